"""docs/cli.md is generated from the CLI's help, and every command's help carries an example."""

from __future__ import annotations

import os

import pytest

from cli_fixtures import run
from exsim.replay.cli.app import COMMANDS, build_parser, render_docs

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "cli.md")


def test_docs_cli_md_is_up_to_date():
    with open(DOCS, encoding="utf-8") as f:
        committed = f.read()
    assert committed == render_docs(), "docs/cli.md is stale: run `python -m exsim.replay.cli.docs`"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_has_an_example(command):
    code, out, _ = run([command, "--help"])
    assert code == 0
    assert "example" in out and f"exsim {command}" in out.split("example", 1)[1]


def test_every_registered_command_is_documented():
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert list(sub.choices) == list(COMMANDS)
    docs = render_docs()
    assert all(f"## exsim {c}\n" in docs for c in COMMANDS)
