"""Progress bars (tqdm, stderr, only on a terminal and never with --quiet) on backtest, sweep and
stats, and ``--verbose`` logging what a command does, to stderr, leaving stdout as it was."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from cli_fixtures import run, write_scenario


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal (so the bars are on)."""

    def isatty(self) -> bool:
        return True


def _run_on_terminal(argv) -> tuple[int, str, str]:
    from exsim.replay.cli.app import main

    out, err = io.StringIO(), _Terminal()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("progress"))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, scenario):
    out = str(tmp_path_factory.mktemp("progress_run") / "run")
    assert run(["simulate", scenario, "--out", out, "--quiet"])[0] == 0
    return out


BACKTEST = ["--symbol", "AAA", "--param", "every=20", "--json"]


def test_backtest_shows_a_bar_on_a_terminal_and_keeps_stdout_json(scenario):
    code, out, err = _run_on_terminal(["backtest", scenario, *BACKTEST])
    assert code == 0, err
    json.loads(out)
    assert "backtest" in err and "/2000 [" in err
    code, out, err = _run_on_terminal(["backtest", scenario, *BACKTEST, "--quiet"])
    assert code == 0 and "msg" not in err
    json.loads(out)


def test_no_bar_when_stderr_is_not_a_terminal(scenario):
    code, out, err = run(["backtest", scenario, *BACKTEST])
    assert code == 0 and "msg/s" not in err and "2000/2000" not in err


def test_sweep_and_stats_show_bars(scenario, small_run):
    code, out, err = _run_on_terminal(["sweep", scenario, "--symbol", "AAA", "--grid",
                                       "size=1,2", "--scheduler", "serial", "--json"])
    assert code == 0, err
    assert len(json.loads(out)) == 2 and "sweep" in err and "run" in err
    code, out, err = _run_on_terminal(["stats", small_run, "AAA", "--csv"])
    assert code == 0 and "stats" in err and "step" in err
    assert out.startswith("ts,")


def test_the_library_reports_progress_to_a_callable(scenario):
    from exsim.replay.backtesting.driver import backtest
    from exsim.replay.backtesting.grid import sweep
    from exsim.replay.backtesting.strategies import InventoryMarketMaker

    seen = []
    backtest(scenario, InventoryMarketMaker(every=50), symbol="AAA",
             progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (2000, 2000) and len(seen) > 2
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    runs = []
    sweep(scenario, "exsim.replay.backtesting.strategies:InventoryMarketMaker", {"size": [1, 2, 3]},
          scheduler="serial", symbol="AAA", progress=lambda d, t: runs.append((d, t)))
    assert runs == [(1, 3), (2, 3), (3, 3)]


def test_verbose_logs_the_steps_to_stderr_and_leaves_stdout_alone(scenario, small_run):
    quiet = run(["backtest", scenario, *BACKTEST])
    loud = run(["backtest", scenario, *BACKTEST, "--verbose"])
    assert loud[0] == 0 and json.loads(loud[1]) == json.loads(quiet[1])
    lines = [x for x in loud[2].splitlines() if x.startswith("exsim: ")]
    assert any("strategy exsim.replay.backtesting.strategies:InventoryMarketMaker" in x for x in lines)
    assert any("market messages" in x and "fills" in x for x in lines)
    assert not any(x.startswith("exsim: ") for x in quiet[2].splitlines())
    code, out, err = run(["stats", small_run, "AAA", "-v", "--rows", "3"])
    assert code == 0 and "exsim: stats of AAA" in err and "agrees with the first checkpoint" in err
    code, out, err = run(["book", small_run, "AAA", "--ts", "00:00:01", "-v"])
    assert code == 0 and "exsim: book: --ts 00:00:01 is ts 1,000,000,000" in err
