"""Commands a reader meets in the docs run as written (issue 40, items 6 and 8): the scenario
file the examples simulate is written by ``exsim new-scenario``; the strategy template cites a
docs section that exists; the docs say that the ``@njit(cache=True)`` example needs a file; the
pages ship with the package and ``exsim docs PAGE`` prints them."""

from __future__ import annotations

import re
from pathlib import Path

from cli_fixtures import run

REPO = Path(__file__).resolve().parents[2]


def test_new_scenario_writes_a_preset_that_simulates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["new-scenario", "my_scenario"])
    assert code == 0, err
    assert "wrote my_scenario.toml" in out and "exsim simulate my_scenario.toml" in out
    code, out, err = run(["simulate", "my_scenario.toml", "--out", "runs/mine", "--seed", 7,
                          "--fsync", "none", "-q"])
    assert code == 0 and "messages" in out, err
    code, _, err = run(["new-scenario", "my_scenario"])
    assert code == 2 and "exists" in err and "--force" in err
    code, _, err = run(["new-scenario", "x", "--from", "nope"])
    assert code == 2 and "no such preset" in err and "trading_day" in err


def test_the_cli_docs_create_the_scenario_file_they_simulate():
    text = (REPO / "docs" / "cli.md").read_text()
    first = text.index("my_scenario.toml")
    assert "exsim new-scenario my_scenario" in text[:first]


def test_the_strategy_template_cites_a_section_that_exists():
    from exsim.replay.cli.template import TEMPLATE

    cited = re.findall(r'docs/(\w[\w-]*\.md) \("([^"]+)"', TEMPLATE)
    assert cited
    for page, section in cited:
        headings = [h.strip() for h in re.findall(r"^#+ (.+)$", (REPO / "docs" / page).read_text(), re.M)]
        assert any(h.startswith(section) for h in headings), (page, section)


def test_the_njit_example_says_it_needs_a_file():
    text = (REPO / "docs" / "backtesting.md").read_text()
    block = text[text.index("@njit(cache=True)"):]
    assert "no locator available for file '<stdin>'" in block[:2500]


def test_docs_lists_and_prints_the_installed_pages():
    code, out, err = run(["docs"])
    assert code == 0 and "backtesting" in out and "Backtesting" in out and "readme" in out
    for name in ("cli", "cli.md", "docs/cli.md", "CLI"):
        code, out, _ = run(["docs", name])
        assert code == 0 and out == (REPO / "docs" / "cli.md").read_text(), name
    code, out, _ = run(["docs", "readme", "--path"])
    assert code == 0 and Path(out.strip()) == REPO / "README.md"
    code, out, err = run(["docs", "nope"])
    assert code == 2 and not out and "no such page" in err and "scenarios" in err
