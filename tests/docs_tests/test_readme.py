"""The README's examples run as written: its CLI walk-through and its Python snippet.

Its shell commands (the CLI walk-through, the benchmark commands) run in
tests/docs_tests/test_docs_commands.py with those of docs/*.md; the two install commands at the top are what
CI itself runs (marked "not run by tests" there; the second is checked here to be the last line
of .ci/run, whose only other steps install the system Chromium for the web page's browser test
and the system QuickFIX for the FIX port's conformance test).
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_starts_with_the_install_and_demo_command_then_the_test_command():
    first, second = _blocks("bash")[:2]
    assert "pip install -e ." in first and "exsim demo" in first
    assert "pip install -q -e '.[test]'" in second and "pytest" in second
    ci = (README.parent / ".ci" / "run").read_text()
    steps = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert steps[-1] == second.strip(), ".ci/run must end with the README's test command"
    assert steps[:2] == ["set -euo pipefail", 'cd "$(dirname "$0")/.."']
    # the one other step: the system Chromium for the --web page's browser test, only if missing
    assert len(steps) == 5 and steps[2].startswith("[ -x /usr/bin/chromium ] ||")
    assert re.search(r"apt-get install -y -qq --no-install-recommends chromium;", steps[2])
    # and the system QuickFIX for the FIX port's conformance test, only if missing
    assert steps[3].startswith("[ -f /usr/include/quickfix/Application.h ] &&")
    assert re.search(r"apt-get install -y -qq --no-install-recommends libquickfix-dev g\+\+;",
                     steps[3])


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
