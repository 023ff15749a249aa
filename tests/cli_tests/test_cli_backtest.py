"""``exsim backtest``: the strategy named on the command line trades the scenario's flow."""

from __future__ import annotations

import json

from cli_fixtures import run, write_scenario
from conftest import shared_sample


def test_backtest_prints_a_json_summary_for_the_default_market_maker(tmp_path):
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA", "--json",
                          "--param", "every=20"])
    assert code == 0, err
    summary = json.loads(out)
    assert {"pnl", "fill_ratio", "n_fills", "max_drawdown"} <= set(summary)
    assert summary["n_fills"] >= 0 and 0 <= summary["fill_ratio"] <= 1.5


def test_backtest_writes_the_plot(tmp_path):
    png = tmp_path / "bt.png"
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA",
                          "--plot", str(png)])
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_backtest_with_an_unknown_strategy_exits_2_naming_it(tmp_path):
    code, out, err = run(["backtest", write_scenario(tmp_path), "--strategy", "nosuch:Thing"])
    assert code == 2 and "nosuch" in err and "Traceback" not in err


def test_backtest_with_a_malformed_param_exits_2(tmp_path):
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA",
                          "--param", "novalue"])
    assert code == 2 and "KEY=VALUE" in err


def test_bench_prints_a_throughput_row_with_the_flows_fill_count():
    code, out, err = run(["bench", "--messages", "5000", "--runs", "1"])
    assert code == 0, err
    assert "M msgs/s" in out and "5,000" in out


def test_bench_rejects_a_zero_size():
    code, out, err = run(["bench", "--messages", "0"])
    assert code == 2 and "--messages" in err


def _binance_dir():
    from exsim.scenarios.data import BINANCE_BTCUSDT

    return str(shared_sample(BINANCE_BTCUSDT).parent)


def test_backtest_on_the_binance_l2_sample_end_to_end(tmp_path):
    png = tmp_path / "l2.png"
    code, out, err = run(["backtest", _binance_dir(), "--json", "--param", "size=100000",
                          "--param", "skew_lots=100000", "--param", "max_position=1000000",
                          "--param", "every=500", "--order-ns", "1000000",
                          "--queue-model", "proportional", "--plot", str(png)])
    assert code == 0, err
    summary = json.loads(out.split("wrote")[0])
    assert summary["n_fills"] > 0 and summary["n_orders"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_backtest_on_l2_flow_with_store_exits_2(tmp_path):
    code, out, err = run(["backtest", _binance_dir(), "--store", str(tmp_path / "d")])
    assert code == 2 and "store_dir" in err and "Traceback" not in err


def test_backtest_latency_flags_split_by_direction_and_command(tmp_path):
    from exsim.replay.backtesting.driver import backtest
    from exsim.replay.backtesting.latency import SplitLatency
    from exsim.replay.backtesting.strategies import InventoryMarketMaker

    scenario = write_scenario(tmp_path)
    code, out, err = run(["backtest", scenario, "--symbol", "AAA", "--json", "--param",
                          "every=20", "--feed-ns", "1000", "--order-ns", "2000", "--cancel-ns",
                          "50000", "--response-ns", "3000", "-q"])
    assert code == 0, err
    want = backtest(scenario, InventoryMarketMaker(every=20), symbol="AAA",
                    latency=SplitLatency(1000, 2000, cancel=50_000, response=3000)).summary
    got = json.loads(out)
    assert got["n_orders"] == want["n_orders"] and got["n_fills"] == want["n_fills"]
    assert got["pnl"] == want["pnl"]


def test_backtest_negative_command_latency_exits_2(tmp_path):
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA",
                          "--modify-ns", "-1"])
    assert code == 2 and "--modify-ns" in err and "Traceback" not in err
