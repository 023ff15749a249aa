"""``exsim whatif`` (issue 18): the library's what-if replay on the command line, as a table or
strict JSON like ``exsim backtest``, with an example in its help; L2-only flow is one line, exit 2."""

from __future__ import annotations

import json

import pytest

from cli_fixtures import run, write_scenario
from conftest import shared_sample


def _strict(text: str):
    def bad(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("whatif"))


def test_whatif_json_is_the_librarys_summary(scenario):
    from exsim.replay.backtesting.counterfactual import whatif
    from exsim.replay.backtesting.loading import load_strategy

    code, out, err = run(["whatif", scenario, "--symbol", "AAA", "--param", "size=5",
                          "--param", "every=10", "--json", "-q"])
    assert code == 0, err
    got = _strict(out)
    strategy = load_strategy("exsim.replay.backtesting.strategies:InventoryMarketMaker",
                             ["size=5", "every=10"])
    w = whatif(scenario, strategy, symbol="AAA")
    want = json.loads(json.dumps(w.summary).replace("NaN", "null"))
    assert {k: got[k] for k in want} == want
    assert got["backtest"]["n_fills"] == w.backtest.summary["n_fills"]
    assert got["backtest"]["unit"] == w.backtest.unit


def test_whatif_prints_a_table_of_the_comparison_and_the_strategys_result(scenario):
    code, out, err = run(["whatif", scenario, "--symbol", "AAA", "--param", "every=10", "-q"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["measure", "value"]
    for measure in ("displaced_qty", "added_qty", "n_behind_filled", "strategy pnl (ticks x lots)",
                    "strategy n_fills"):
        assert any(line.startswith(measure) for line in lines), measure


def test_whatif_help_has_an_example():
    code, out, _ = run(["whatif", "--help"])
    assert code == 0 and "exsim whatif default --symbol JPM" in out


@pytest.mark.parametrize("argv, needle", [
    (["--param", "size=abc"], "size"),
    (["--feed-ns", "-1"], "--feed-ns"),
    (["--strategy", "no.such.module:X"], "no.such.module"),
])
def test_whatif_user_errors_are_one_line_exit_2(scenario, argv, needle):
    code, out, err = run(["whatif", scenario, "--symbol", "AAA", *argv])
    assert code == 2 and out == "" and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_whatif_refuses_l2_only_flow_in_one_line():
    from exsim.scenarios.data import BINANCE_BTCUSDT
    code, out, err = run(["whatif", str(shared_sample(BINANCE_BTCUSDT).parent), "-q"])
    assert code == 2 and "L3 flow" in err and len(err.strip().splitlines()) == 1
