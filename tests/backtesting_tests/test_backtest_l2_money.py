"""Money on L2-only flow: the quote currency when the flow knows its tick and lot, a symbol's
currency, tick value and maker/taker fees through ``symbols=``, prices and sizes printed as
decimals."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import shared_sample
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Side
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.l2queue import L2Flow
from exsim.replay.backtesting.strategy import Strategy


def _flow(**kw):
    """bid 9900 x 7000, ask 10100 x 5000 (ticks of 0.01, lots of 0.001); a buyer lifts 6000 at
    10100 at ts 2, which fills 1000 of an ask of ours joined behind the 5000."""
    book = np.zeros(2, L2_DTYPE)
    book["ts"], book["seq"] = 1, 1
    book["side"], book["price"], book["qty"] = [Side.BUY, Side.SELL], [9900, 10100], [7000, 5000]
    tr = np.zeros(1, FILL_DTYPE)
    tr["ts"], tr["price"], tr["qty"], tr["aggressor_side"], tr["trade_id"] = 2, 10100, 6000, 0, 1
    return L2Flow(book, tr, "XUSD", 0.01, **kw)


class AskThenTake(Strategy):
    """Joins the ask with 2000 lots, and takes 1000 lots of the bid (a taker fill)."""

    def on_start(self, ctx):
        ctx.sell(10100, 2000)
        ctx.sell(9900, 1000, tif="ioc")


def test_a_flow_with_tick_lot_and_currency_values_fills_in_that_currency():
    res = backtest(_flow(tick="0.01", lot="0.001", currency="USD"), AskThenTake())
    assert res.unit == "USD" and res.meta["money"]["tick_value"] == pytest.approx(1e-5)
    # sold 1 unit at 99 (taker) and 1 unit at 101 (maker): 200 USD of notional
    assert res.summary["turnover"] == pytest.approx(200.0)
    text = res.report().text()
    assert "101" in text and "10100" not in text and "price in USD" in text
    # the volume (2,000 lots of 0.001) prints as 2 units, the final position as -2
    assert [ln.split()[-1] for ln in text.splitlines()
            if ln.startswith(("volume", "final_position"))] == ["2", "-2"]


def test_symbols_give_currency_tick_value_and_maker_taker_fees_on_l2():
    flow = _flow(tick="0.01", lot="0.001", currency="USD")
    res = backtest(flow, AskThenTake(), symbols=[{"name": "XUSD", "tick_size": 0.01,
                                                  "currency": "EUR", "maker_bps": -10,
                                                  "taker_bps": 20}])
    assert res.unit == "EUR"
    # tick value from tick_size x the flow's lot: 0.01 x 0.001
    assert res.meta["money"]["tick_value"] == pytest.approx(1e-5)
    # maker 101 x -10 bps = -0.101, taker 99 x 20 bps = 0.198
    assert res.summary["fees"] == pytest.approx(0.198 - 0.101)


def test_fees_bps_still_overrides_the_schedule_on_l2():
    res = backtest(_flow(), AskThenTake(), fees_bps=1.0,
                   symbols=[{"name": "XUSD", "maker_bps": -10, "taker_bps": 20}])
    assert res.meta["money"]["fees_from"] == "fees_bps"


def test_symbols_options_an_l2_backtest_cannot_use_are_refused():
    with pytest.raises(UsageError, match="tick_table"):
        backtest(_flow(), AskThenTake(), symbols=[{"name": "XUSD", "tick_table": [[0, 1]]}])
    with pytest.raises(UsageError, match="one symbol"):
        backtest(_flow(), AskThenTake(), symbols=[{"name": "A"}, {"name": "B"}])


def test_binance_sample_pnl_is_in_usdt():
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    from exsim.scenarios.data import BINANCE_BTCUSDT
    res = backtest(str(shared_sample(BINANCE_BTCUSDT)),
                   InventoryMarketMaker(size=100_000, skew_lots=100_000, max_position=1_000_000,
                                        every=500), latency=(1_000_000, 1_000_000))
    assert res.unit == "USDT" and res.meta["money"]["tick_value"] == pytest.approx(1e-10)
    # about 0.001 BTC quotes at ~61,800 USDT: turnover in the thousands of USDT, not 1e10
    assert 1 < res.summary["turnover"] < 1e7
    assert res.meta["money"]["price_step"] == "0.01"
