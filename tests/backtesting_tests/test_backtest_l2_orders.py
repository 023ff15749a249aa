"""Order options on L2-only flow behave as in the engine (min_qty, DAY, GTD), and the ones an
aggregate book cannot model (stops, icebergs) are refused at the call with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Event, Reason, Side
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.l2queue import L2Flow
from exsim.replay.backtesting.strategy import Strategy

DAY_NS = 86_400 * 10**9


def _flow(ask_qty=5, trade_ts=()):
    """bid 99 x 7, ask 101 x ``ask_qty`` at ts 1; then buyers lifting 101 (3 lots each) at
    ``trade_ts``, and a last book row far later so time runs on."""
    book = np.zeros(3, L2_DTYPE)
    book["seq"] = [1, 1, 2]
    book["ts"] = [1, 1, 3 * DAY_NS]
    book["side"], book["price"], book["qty"] = [Side.BUY, Side.SELL, Side.BUY], [99, 101, 98], \
        [7, ask_qty, 1]
    tr = np.zeros(len(trade_ts), FILL_DTYPE)
    tr["ts"], tr["price"], tr["qty"], tr["aggressor_side"] = list(trade_ts), 101, 3, Side.BUY
    tr["trade_id"] = np.arange(1, len(tr) + 1)
    return L2Flow(book, tr)


class Send(Strategy):
    def __init__(self, side, price, qty, **kw):
        self.args = (side, price, qty, kw)

    def on_start(self, ctx):
        side, price, qty, kw = self.args
        (ctx.buy if side == Side.BUY else ctx.sell)(price, qty, **kw)


def _events(res):
    return [(Event(int(e["event"])).name, Reason(int(e["reason"])).name) for e in res.events]


def test_min_qty_more_than_available_is_rejected_like_the_engine():
    res = backtest(_flow(), Send(Side.BUY, 101, 6, tif="ioc", min_qty=6))
    assert _events(res) == [("REJECTED", "MIN_QTY_CANNOT_FILL")] and len(res.fills) == 0


def test_min_qty_that_can_fill_fills_and_cancels_the_rest():
    res = backtest(_flow(), Send(Side.BUY, 101, 6, tif="ioc", min_qty=5))
    assert res.fills["qty"].tolist() == [5]
    assert _events(res)[-1] == ("CANCELLED", "IOC_UNFILLED")


def test_min_qty_on_fok_is_bad_min_qty():
    res = backtest(_flow(), Send(Side.BUY, 101, 2, tif="fok", min_qty=1))
    assert _events(res) == [("REJECTED", "BAD_MIN_QTY")]


def test_gtd_order_expires_at_its_expiry_before_a_later_trade():
    # our ask at 102 would be filled by nothing at 101; put it at 101 behind 0 (ask_qty 0 level
    # absent) so the trade at ts 20 would fill it, but it expires at ts 10
    res = backtest(_flow(ask_qty=0, trade_ts=(20,)), Send(Side.SELL, 101, 2, tif="gtd",
                                                           expire_ts=10))
    assert len(res.fills) == 0
    assert _events(res) == [("ACCEPTED", "NONE"), ("CANCELLED", "EXPIRED")]
    assert int(res.events[-1]["ts"]) == 20       # the first message at or after the expiry


def test_gtd_in_the_past_is_bad_expiry():
    res = backtest(_flow(), Send(Side.SELL, 103, 2, tif="gtd", expire_ts=1))
    assert _events(res) == [("REJECTED", "BAD_EXPIRY")]


def test_day_order_expires_at_the_session_close_after_it_was_entered():
    res = backtest(_flow(trade_ts=(2 * DAY_NS + 5,)), Send(Side.SELL, 103, 2, tif="day"))
    assert _events(res) == [("ACCEPTED", "NONE"), ("CANCELLED", "EXPIRED")]
    assert int(res.events[-1]["ts"]) == 2 * DAY_NS + 5   # first message past midnight UTC


@pytest.mark.parametrize("kw", [{"order_type": "stop", "stop_price": 102},
                                {"order_type": "stop_limit", "stop_price": 102},
                                {"display_qty": 1}])
def test_stops_and_icebergs_are_refused_at_the_call(kw):
    with pytest.raises(UsageError, match="L2-only flow"):
        backtest(_flow(), Send(Side.SELL, 103, 2, **kw))


def test_a_resting_order_reserves_no_fill_row_per_distinct_price_of_the_data():
    from exsim.exchange.schema import ORDER_DTYPE, Kind
    from exsim.replay.backtesting.l2queue import L2Sim, l2_events
    # 20,000 distinct bid prices in the data, then one strategy ask that does not cross
    book = np.zeros(20_001, L2_DTYPE)
    book["ts"], book["seq"] = 1, np.arange(20_001)
    book["side"][:20_000], book["price"][:20_000], book["qty"][:20_000] = Side.BUY, \
        np.arange(1, 20_001), 1
    book["side"][-1], book["price"][-1], book["qty"][-1] = Side.SELL, 30_000, 1
    ev = l2_events(L2Flow(book, np.zeros(0, FILL_DTYPE)))
    sim = L2Sim(ev, "conservative", 7)
    sim.advance(ev, 0, len(ev), False)
    o = np.zeros(1, ORDER_DTYPE)
    o["ts"], o["order_id"], o["kind"], o["side"], o["price"], o["qty"] = \
        1, 1 << 62, Kind.NEW, Side.SELL, 30_001, 4
    sim.apply_orders(o, 0, 1)
    assert sim.ahead(1 << 62) == 0
    assert len(sim.sf) <= 1024 and len(sim.se) <= 2048      # the buffers it started with
    # a buy that takes the one ask level fills once and needs room for that, not 20,000 rows
    o["order_id"], o["side"], o["price"], o["qty"] = (1 << 62) + 1, Side.BUY, 30_001, 1
    sim.apply_orders(o, 0, 1)
    assert int(sim.scnt[0]) == 1 and len(sim.sf) <= 1024
