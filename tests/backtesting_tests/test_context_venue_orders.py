"""Strategies send the venue order types: ``Context.buy``/``sell`` write stop_price, display_qty,
min_qty, expire_ts, the stop order types and DAY/GTD into the strategy's order rows, and the
engine acts on them (NEEDS THE ISSUE-15 ENGINE for the engine-side assertions: GTD expiry,
iceberg display, stop trigger)."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Event, Kind, OrderType, Reason, Side, Tif

from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategy import Strategy

ME = 7


def _flow(n: int = 6):
    """A far ask and bid that never trade, then quiet messages every 100 ns (far bids)."""
    o = np.zeros(n, ORDER_DTYPE)
    for k in range(n):
        side, price = (Side.SELL, 500) if k == 0 else (Side.BUY, 10 + k)
        o[k] = (100 * k, k + 1, price, 1, 0, 1, Kind.NEW, 0, 0, 0, side, 0, 0, 0, 0, 0)
    return o


class _Sends(Strategy):
    """Sends the orders ``calls`` lists (each a (method, args, kwargs) triple) at start."""

    def __init__(self, calls):
        self.calls = calls

    def on_start(self, ctx):
        for method, args, kw in self.calls:
            getattr(ctx, method)(*args, **kw)


def _run(calls, flow=None):
    return backtest(_flow() if flow is None else flow, _Sends(calls), trader=ME)


def test_each_new_field_reaches_the_strategys_order_row():
    res = _run([("buy", (50, 4), {"tif": "gtd", "expire_ts": 250}),
                ("sell", (300, 8), {"display_qty": 2}),
                ("buy", (0, 3), {"order_type": "stop", "stop_price": 600}),
                ("sell", (1, 3), {"order_type": "stop_limit", "stop_price": 5, "tif": "day"}),
                ("buy", (40, 6), {"min_qty": 2})])
    o = res.orders
    assert o["tif"].tolist() == [Tif.GTD, Tif.GTC, Tif.GTC, Tif.DAY, Tif.GTC]
    assert o["expire_ts"].tolist() == [250, 0, 0, 0, 0]
    assert o["display_qty"].tolist() == [0, 2, 0, 0, 0]
    assert o["order_type"].tolist() == [OrderType.LIMIT, OrderType.LIMIT, OrderType.STOP,
                                        OrderType.STOP_LIMIT, OrderType.LIMIT]
    assert o["stop_price"].tolist() == [0, 0, 600, 5, 0]
    assert o["min_qty"].tolist() == [0, 0, 0, 0, 2]
    assert o["trader"].tolist() == [ME] * 5


def test_a_gtd_order_expires_at_its_expire_ts_instead_of_being_rejected():
    res = _run([("buy", (50, 4), {"tif": "gtd", "expire_ts": 250})])
    ev = res.events
    assert Event.REJECTED not in ev["event"].tolist()
    cancels = ev[ev["event"] == Event.CANCELLED]
    assert cancels.size == 1 and int(cancels["reason"][0]) == Reason.EXPIRED


def test_an_iceberg_rests_showing_its_display_qty():
    class Peek(_Sends):
        every = 1
        seen = None

        def on_book(self, ctx, book):
            if self.seen is None:
                self.seen = (book.ask, book.ask_qty)

    s = Peek([("sell", (300, 8), {"display_qty": 2})])
    backtest(_flow(), s, trader=ME)
    assert s.seen == (300, 2)


def test_market_flag_and_order_type_together_must_agree():
    with pytest.raises(UsageError, match="market=True"):
        _run([("buy", (0, 1), {"market": True, "order_type": "stop", "stop_price": 9})])
    res = _run([("buy", (0, 1), {"market": True, "order_type": "market"})])
    assert res.orders["order_type"].tolist() == [OrderType.MARKET]


@pytest.mark.parametrize("kw, text", [
    ({"tif": "week"}, "tif must be one of gtc, ioc, fok, day, gtd"),
    ({"order_type": "trailing"}, "order_type must be one of limit, market, stop, stop_limit"),
    ({"stop_price": 1.5}, "stop_price must be a whole number"),
    ({"expire_ts": 2**63}, "expire_ts must be a whole number in int64 range"),
    ({"display_qty": True}, "display_qty must be a whole number"),
    ({"min_qty": float("nan")}, "min_qty must be a whole number"),
])
def test_bad_venue_arguments_are_usage_errors_naming_the_argument(kw, text):
    with pytest.raises(UsageError, match=text):
        _run([("buy", (50, 1), kw)])
