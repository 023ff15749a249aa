"""The README's examples run as written: its CLI walk-through and its Python snippet.

The two install commands at the top are what CI itself runs (.ci/run runs the test command, and
the demo is exercised by tests/test_cli*.py), so they are not repeated here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from cli_fixtures import run

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_starts_with_the_install_and_demo_command_then_the_test_command():
    first, second = _blocks("bash")[:2]
    assert "pip install -e ." in first and "exsim demo" in first
    assert "pip install -q -e '.[test]'" in second and "pytest" in second
    ci = (README.parent / ".ci" / "run").read_text()
    assert second.strip() in ci


def test_readme_cli_walkthrough_runs_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    walkthrough = next(b for b in _blocks("bash") if b.lstrip().startswith("exsim simulate"))
    for line in walkthrough.strip().splitlines():
        argv = shlex.split(line.split("#", 1)[0])
        assert argv[0] == "exsim"
        code, out, err = run(argv[1:])
        assert code == 0, f"{line!r} exited {code}: {err}"
    assert (tmp_path / "run1.sqlite").stat().st_size > 0


def test_readme_python_snippet_fills_at_the_resting_price():
    namespace: dict = {}
    exec(_blocks("python")[0], namespace)
    fills = namespace["res"].fills
    assert len(fills) == 1 and int(fills["price"][0]) == 10_100 and int(fills["qty"][0]) == 3


def test_readme_performance_section_is_generated_from_the_committed_compare_report():
    import json

    from benchmarks.compare import BEGIN, END, markdown

    report = json.loads((README.parent / "benchmarks" / "results" / "compare.json").read_text())
    section = README.read_text().split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert section == markdown(report).strip(), (
        "README's Performance section is stale: python -m benchmarks.compare "
        "--from-json benchmarks/results/compare.json --write-docs")
