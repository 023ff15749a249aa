"""``exsim backtest`` (issue 37 leftovers): the L2 fill model's options on the command line, and
the summary table in decimals when the lot is known (as the report prints them)."""

from __future__ import annotations

import json

from cli_fixtures import run, write_scenario
from conftest import shared_sample

MM = ["--param", "size=100000", "--param", "skew_lots=100000", "--param", "max_position=1000000",
      "--param", "every=500", "--order-ns", "1000000", "-q"]


def _binance_dir():
    from exsim.scenarios.data import BINANCE_BTCUSDT

    return str(shared_sample(BINANCE_BTCUSDT).parent)


def _summary(*flags):
    code, out, err = run(["backtest", _binance_dir(), "--json", *MM, *flags])
    assert code == 0, err
    return json.loads(out)


def test_the_fill_model_options_reach_the_l2_backtest():
    plain = _summary()
    whole = _summary("--whole-on-trade-through")
    # a trade through fills each order whole: the same lots in fewer, larger fills
    assert whole["n_fills"] < plain["n_fills"] and whole["volume"] > 0
    cross = _summary("--cross-fills", "--queue-model", "proportional")
    assert cross["n_fills"] > 0


def test_the_summary_table_prints_lots_as_decimals_when_the_lot_is_known():
    code, out, err = run(["backtest", _binance_dir(), *MM])
    assert code == 0, err
    summary = _summary()
    rows = {line.split("  ")[0].strip(): line.split()[-1] for line in out.splitlines()[2:]}
    # the lot is 1e-8 BTC: 3,300,000 lots print 0.033
    assert rows["volume"] == f"{summary['volume'] / 1e8:.8f}".rstrip("0").rstrip(".")
    assert "." in rows["submitted_qty"] and "," not in rows["volume"]
    assert rows["n_fills"] == f"{summary['n_fills']:,}"          # counts stay counts


def test_on_engine_flow_the_options_do_not_apply_and_a_note_says_so(tmp_path):
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA", "--param",
                          "every=20", "--cross-fills"])
    assert code == 0, err
    assert "apply to L2 flow only" in err and "pnl" in out


def test_help_names_the_options():
    code, out, err = run(["backtest", "--help"])
    assert "--cross-fills" in out and "--whole-on-trade-through" in out
