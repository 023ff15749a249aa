"""``exsim new-strategy`` writes a strategy file that ``backtest --strategy FILE.py:CLASS`` loads by
its path, with no PYTHONPATH pointing at the file's folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_fixtures import run, write_scenario

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_new_strategy_writes_a_template_named_after_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["new-strategy", "my_quoter"])
    assert code == 0, err
    text = (tmp_path / "my_quoter.py").read_text()
    assert "class MyQuoter(Strategy):" in text
    assert "--strategy my_quoter.py:MyQuoter" in out
    compile(text, "my_quoter.py", "exec")


def test_new_strategy_keeps_an_existing_file_unless_forced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("# my work\n")
    code, out, err = run(["new-strategy", "mine.py"])
    assert code == 2 and "mine.py: exists; give --force" in err and not out
    assert (tmp_path / "mine.py").read_text() == "# my work\n"
    assert run(["new-strategy", "mine.py", "--force", "--class", "Mine"])[0] == 0
    assert "class Mine(Strategy)" in (tmp_path / "mine.py").read_text()


@pytest.mark.parametrize("name", ["123", "9lives", "__"])
def test_a_name_without_a_class_name_is_a_usage_error(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["new-strategy", name])
    assert code == 2 and "cannot make a class name" in err and "Traceback" not in err


def test_the_template_backtests_by_path_from_another_directory_without_pythonpath(tmp_path):
    """A process whose PYTHONPATH holds only the checkout (as an installed exsim): the file in
    strategies/ is found by its path, from a working directory that is neither."""
    (tmp_path / "strategies").mkdir()
    scenario = write_scenario(tmp_path)
    env = dict(os.environ, PYTHONPATH=REPO)
    cli = [sys.executable, "-m", "exsim.replay.cli"]
    p = subprocess.run([*cli, "new-strategy", "strategies/touch", "-q"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([*cli, "backtest", scenario, "--symbol", "AAA", "--strategy",
                        "strategies/touch.py:Touch", "--param", "size=2", "--param", "every=20",
                        "--json", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["n_orders"] > 0 and summary["n_fills"] > 0, summary


def test_a_strategy_file_that_is_missing_or_broken_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["backtest", "default", "--strategy", "nope.py:X"])
    assert code == 2 and "the file nope.py does not exist" in err
    (tmp_path / "bad.py").write_text("import no_such_module_here\n")
    code, _, err = run(["backtest", "default", "--strategy", "bad.py:X"])
    assert code == 2 and "importing bad.py failed: ModuleNotFoundError" in err
    assert len(err.strip().splitlines()) == 1


def test_a_module_spec_naming_a_file_here_suggests_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    assert run(["new-strategy", "local_strat"])[0] == 0
    code, _, err = run(["backtest", "default", "--strategy", "local_strat:LocalStrat"])
    assert code == 2 and "--strategy local_strat.py:LocalStrat" in err
