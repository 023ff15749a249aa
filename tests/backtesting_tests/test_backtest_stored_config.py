"""A backtest on a stored run replays the market the run recorded: ``open_flow`` on a data
directory carries the catalog's stored engine config (every symbol option, stp, ownership), and
``backtest`` builds its engine from it, so money, lots, tick tables and session close apply as
they did in the run. Runs on this branch's (issue-15) engine."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Event, Kind, Reason, Side
from exsim.store import Session

from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategy import Strategy
from exsim.scenarios import open_flow

ME = 9
SYMBOL = {"name": "ES", "tick_size": 0.25, "tick_table": [[1, 1], [100, 5]], "lot_size": 5,
          "min_order_qty": 10, "session_close": 10_000_000_000, "currency": "USD",
          "tick_value": 12.5, "maker_bps": -0.2, "taker_bps": 0.5}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("stored") / "run"
    eng = Engine(stp="cancel_resting", ownership=True)
    eng.add_symbol(**SYMBOL)
    o = np.zeros(3, ORDER_DTYPE)
    o[0] = (10, 1, 200, 10, 0, 1, Kind.NEW, 0, 0, 0, Side.SELL, 0, 0, 0, 0, 0)
    o[1] = (20, 2, 50, 10, 0, 2, Kind.NEW, 0, 0, 0, Side.BUY, 0, 0, 0, 0, 0)
    o[2] = (30, 3, 60, 10, 0, 2, Kind.NEW, 0, 0, 0, Side.BUY, 0, 0, 0, 0, 0)
    with Session.create(str(d), eng, durability="none") as s:
        s.process(o)
    return str(d)


def test_a_data_directory_flow_carries_its_runs_engine_config(run_dir):
    f = open_flow(run_dir)
    assert f.engine == {"stp": "cancel_resting", "ownership": True}
    (spec,) = f.specs
    assert {k: spec[k] for k in SYMBOL} == SYMBOL
    assert "id" not in spec
    eng = Engine(**f.engine)
    eng.add_symbol(**spec)
    assert eng.config()["symbols"][0] == {**spec, "id": 0}


class _Probe(Strategy):
    """An off-lot bid, an off-tick bid and a good one; then it takes the ask."""

    def on_start(self, ctx):
        ctx.buy(55, 3)        # qty off the lot of 5
        ctx.buy(101, 10)      # price off the tick of 5 from 100 up
        ctx.buy(200, 10)      # takes the recorded ask: a taker fill in USD


def test_a_backtest_on_a_stored_run_keeps_its_lots_ticks_money_and_options(run_dir):
    res = backtest(run_dir, _Probe(), trader=ME)
    assert res.unit == "USD"
    assert res.meta["engine_options"] == {"stp": "cancel_resting", "ownership": True}
    rej = res.events[res.events["event"] == Event.REJECTED]
    assert sorted(rej["reason"].tolist()) == sorted([Reason.OFF_LOT, Reason.OFF_TICK])
    assert res.fills["qty"].sum() == 10
    # a taker fee of 0.5 bps on 200 ticks x 10 lots x 12.5 USD
    assert res.summary["fees"] == pytest.approx(200 * 10 * 12.5 * 0.5e-4)


def test_the_callers_engine_options_override_the_runs(run_dir):
    res = backtest(run_dir, Strategy(), trader=ME, engine_options={"stp": "none"})
    assert res.meta["engine_options"] == {"stp": "none", "ownership": True}


def test_an_old_catalog_without_options_reads_with_defaults():
    f = open_flow("tests/golden/run_v1")
    assert f.engine == {"stp": "none", "ownership": False}
    assert [s["name"] for s in f.specs] == ["JPM", "BTCUSD"]
    assert [s["tick_size"] for s in f.specs] == [0.01, 0.5]
