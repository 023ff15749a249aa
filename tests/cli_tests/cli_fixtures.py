"""Shared helpers for the CLI tests: a small scenario file and a way to run ``exsim`` in-process.

Kept out of tests/conftest.py (owned by the engine tests); the CLI test modules import it.
"""

from __future__ import annotations

import contextlib
import io

SMALL_SCENARIO = """\
description = "2,000 uniform messages over two symbols: small enough for quick CLI tests"
generator = "uniform"
seed = 3

[params]
n = 2_000
span = 10
n_traders = 4
mean_gap_ns = 1_000_000

[[symbols]]
name = "AAA"
tick_size = 0.01
mid = 10_000

[[symbols]]
name = "BBB"
tick_size = 1
mid = 500
"""


def write_scenario(directory) -> str:
    """Write SMALL_SCENARIO to ``directory/small.toml``; return its path."""
    path = directory / "small.toml"
    path.write_text(SMALL_SCENARIO)
    return str(path)


def run(argv: list[str]) -> tuple[int, str, str]:
    """Run ``exsim argv`` in-process; return (exit status, stdout, stderr)."""
    from exsim.replay.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()
