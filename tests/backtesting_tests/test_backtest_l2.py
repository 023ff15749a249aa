"""L2-only backtests (replay.backtesting.l2queue): the queue-position model on hand-made L2 sequences, where
the answer is obvious, determinism, and the Binance sample end to end."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import shared_sample
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Event, Reason, Side
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.l2queue import L2Flow, l2_events
from exsim.replay.backtesting.strategy import Strategy

TRADER = 77


def l2(*rows):
    """rows of (ts, side, price, qty) -> L2_DTYPE."""
    out = np.zeros(len(rows), L2_DTYPE)
    for k, (ts, side, price, qty) in enumerate(rows):
        out[k]["ts"], out[k]["side"], out[k]["price"], out[k]["qty"] = ts, side, price, qty
        out[k]["count"] = qty > 0
    return out


def trades(*rows):
    """rows of (ts, aggressor side, price, qty) -> FILL_DTYPE (trade ids 1, 2, ...)."""
    out = np.zeros(len(rows), FILL_DTYPE)
    for k, (ts, side, price, qty) in enumerate(rows):
        out[k]["ts"], out[k]["aggressor_side"], out[k]["price"], out[k]["qty"] = ts, side, price, qty
        out[k]["trade_id"] = k + 1
    return out


class Post(Strategy):
    """Sends the given orders at start: (side, price, qty[, kwargs])."""

    def __init__(self, *orders):
        self.orders = orders
        self.ids = []

    def on_start(self, ctx):
        for side, price, qty, *kw in self.orders:
            send = ctx.buy if side == Side.BUY else ctx.sell
            self.ids.append(send(price, qty, **(kw[0] if kw else {})))


BOOK = [(1, Side.BUY, 99, 7), (1, Side.SELL, 101, 5)]


def run(book_rows, trade_rows, strat, **kw):
    return backtest(L2Flow(l2(*book_rows), trades(*trade_rows)), strat, trader=TRADER, **kw)


def test_queue_ahead_5_trades_3_then_3_fill_1_on_the_second():
    res = run(BOOK, [(2, Side.BUY, 101, 3), (3, Side.BUY, 101, 3)], Post((Side.SELL, 101, 4)))
    assert res.fills["qty"].tolist() == [1]
    assert res.fills["ts"].tolist() == [3]
    assert res.fills["price"].tolist() == [101]
    assert res.fills[0]["sell_trader"] == TRADER and res.fills[0]["aggressor_side"] == Side.BUY
    assert res.fills[0]["trade_id"] == 2
    assert res.summary["maker_volume"] == 1 and res.summary["final_position"] == -1


def test_later_trades_fill_the_rest_then_the_order_is_done():
    res = run(BOOK, [(2, Side.BUY, 101, 6), (3, Side.BUY, 101, 10)], Post((Side.SELL, 101, 4)))
    assert res.fills["qty"].tolist() == [1, 3]
    assert [int(e) for e in res.events["event"]] == [Event.ACCEPTED, Event.PARTIAL, Event.FILLED]


def test_trades_on_other_prices_or_sides_do_not_advance_the_queue():
    res = run(BOOK, [(2, Side.SELL, 99, 8), (3, Side.BUY, 101, 5)], Post((Side.SELL, 101, 4)))
    assert len(res.fills) == 0     # the sell-side trade at 99 is against bids; 5 ahead, 5 traded


def test_level_increase_is_behind_us():
    book = BOOK + [(2, Side.SELL, 101, 50)]
    res = run(book, [(3, Side.BUY, 101, 6)], Post((Side.SELL, 101, 4)))
    assert res.fills["qty"].tolist() == [1]


def _decrease_case(model):
    # we join behind 5; 5 more join behind us (10); 2 cancel (8); a trade of 5 at our price
    book = BOOK + [(2, Side.SELL, 101, 10), (3, Side.SELL, 101, 8)]
    return run(book, [(4, Side.BUY, 101, 5)], Post((Side.SELL, 101, 4)), queue_model=model)


def test_level_decrease_without_trade_does_not_advance_conservative_queue():
    assert len(_decrease_case("conservative").fills) == 0


def test_level_decrease_without_trade_advances_proportional_queue():
    # ahead 5 of 10: a decrease of 2 takes 2 x 5/10 = 1 from ahead -> 4; a trade of 5 fills 1
    assert _decrease_case("proportional").fills["qty"].tolist() == [1]


def test_level_decrease_caps_ahead_at_the_new_total():
    book = BOOK + [(2, Side.SELL, 101, 2)]
    res = run(book, [(3, Side.BUY, 101, 3)], Post((Side.SELL, 101, 4)))
    assert res.fills["qty"].tolist() == [1]


def test_trade_through_our_price_fills_us_at_our_price():
    res = run(BOOK, [(2, Side.BUY, 102, 3)], Post((Side.SELL, 101, 4)))
    assert res.fills["qty"].tolist() == [3] and res.fills["price"].tolist() == [101]


def test_order_inside_the_spread_has_nothing_ahead():
    res = run(BOOK, [(2, Side.SELL, 100, 2)], Post((Side.BUY, 100, 4)))
    assert res.fills["qty"].tolist() == [2] and res.summary["final_position"] == 2


def test_own_earlier_order_is_ahead_of_the_later_one():
    res = run(BOOK, [(2, Side.BUY, 101, 8)], Post((Side.SELL, 101, 2), (Side.SELL, 101, 2)))
    # 5 market lots, then our first 2 lots, then our second: 8 traded -> 2 + 1
    assert res.fills["qty"].tolist() == [2, 1]


def test_marketable_order_takes_the_aggregate_levels():
    book = BOOK + [(1, Side.SELL, 102, 5)]
    res = run(book, [], Post((Side.BUY, 102, 8)))
    assert res.fills["price"].tolist() == [101, 102] and res.fills["qty"].tolist() == [5, 3]
    assert all(res.fills["aggressor_side"] == Side.BUY)
    assert res.summary["taker_volume"] == 8


def test_ioc_rest_is_cancelled_and_fok_rejected_without_liquidity():
    res = run(BOOK, [], Post((Side.BUY, 101, 8, {"tif": "ioc"}), (Side.BUY, 101, 8, {"tif": "fok"})))
    ev = [(int(e["event"]), int(e["reason"])) for e in res.events]
    assert (Event.CANCELLED, Reason.IOC_UNFILLED) in ev
    assert (Event.REJECTED, Reason.FOK_CANNOT_FILL) in ev
    assert res.fills["qty"].tolist() == [5]


def test_post_only_that_would_cross_is_rejected():
    res = run(BOOK, [], Post((Side.BUY, 101, 1, {"post_only": True})))
    assert int(res.events[0]["reason"]) == Reason.POST_ONLY_WOULD_CROSS and len(res.fills) == 0


class Requeue(Strategy):
    """Posts at 101, then after the first wake-up modifies the price (back of the queue)."""

    every = 1

    def on_start(self, ctx):
        self.oid = ctx.sell(101, 4)
        self.done = False

    def on_book(self, ctx, book):
        if not self.done and book.ts >= 2:   # after the level grew to 9
            ctx.modify(self.oid, 101, 6)    # a larger quantity loses priority
            self.done = True


def test_modify_that_raises_qty_rejoins_behind_the_level():
    book = BOOK + [(2, Side.SELL, 101, 9)]
    res = run(book, [(3, Side.BUY, 101, 6), (4, Side.BUY, 101, 4)], Requeue())
    # re-joined behind 9 at ts 2: trades of 6 then 4 -> 1 lot
    assert res.fills["qty"].tolist() == [1]


def test_cancel_of_unknown_id_is_rejected():
    class C(Strategy):
        def on_start(self, ctx):
            ctx.cancel(123)
    res = run(BOOK, [], C())
    assert int(res.events[0]["reason"]) == Reason.UNKNOWN_ID


def test_trades_go_before_l2_rows_of_equal_ts():
    ev = l2_events(L2Flow(l2((5, 0, 99, 1), (5, 1, 101, 1)), trades((5, 0, 101, 1))))
    assert ev["kind"].tolist() == [1, 0, 0]


def test_snapshot_received_late_keeps_time_non_decreasing():
    ev = l2_events(L2Flow(l2((9, 0, 99, 1), (5, 1, 101, 1)), trades()))
    assert ev["ts"].tolist() == [9, 9]


def test_bad_queue_model_and_l3_only_options_are_usage_errors(tmp_path):
    flow = L2Flow(l2(*BOOK), trades())
    with pytest.raises(UsageError, match="queue_model"):
        backtest(flow, Post(), queue_model="optimistic")
    with pytest.raises(UsageError, match="store_dir"):
        backtest(flow, Post(), store_dir=tmp_path / "x")
    with pytest.raises(UsageError, match="fast=True"):
        backtest(flow, Post(), fast=True)


def test_l2_backtest_is_deterministic():
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    book = [(t, Side.BUY, 99 + (t % 2), 5 + t) for t in range(1, 40)] + BOOK
    book.sort(key=lambda r: r[0])
    tr = [(t, t % 2, 100 + (t % 2), 3) for t in range(2, 40, 3)]
    a = run(book, tr, InventoryMarketMaker(size=2, every=3))
    b = run(book, tr, InventoryMarketMaker(size=2, every=3))
    assert a.digest() == b.digest() and a.summary["n_orders"] > 0


def _binance():
    from exsim.scenarios.data import BINANCE_BTCUSDT

    return str(shared_sample(BINANCE_BTCUSDT))


def test_binance_sample_backtest_end_to_end():
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    path = _binance()
    strat = lambda: InventoryMarketMaker(size=100_000, skew_lots=100_000, max_position=1_000_000,
                                         every=500)
    a = backtest(path, strat(), latency=(1_000_000, 1_000_000))
    b = backtest(path, strat(), latency=(1_000_000, 1_000_000))
    assert a.digest() == b.digest()
    assert a.meta["symbol_name"] == "BTCUSDT" and a.meta["queue_model"] == "conservative"
    assert a.summary["n_fills"] > 0 and len(a.marks) > 0
    p = backtest(path, strat(), latency=(1_000_000, 1_000_000), queue_model="proportional")
    assert p.summary["volume"] >= a.summary["volume"]


def test_sim_reports_the_quantity_ahead_after_join_trade_and_decrease():
    from exsim.exchange.schema import ORDER_DTYPE, Kind
    from exsim.replay.backtesting.l2queue import L2Sim
    ev = l2_events(L2Flow(l2(*BOOK, (3, Side.SELL, 101, 4)), trades((2, Side.BUY, 101, 1))))
    sim = L2Sim(ev, "conservative", TRADER)
    sim.advance(ev, 0, 2, False)                       # the book at ts 1
    o = np.zeros(1, ORDER_DTYPE)
    o["ts"], o["order_id"], o["kind"], o["side"], o["price"], o["qty"] = 1, 1 << 62, Kind.NEW, Side.SELL, 101, 4
    sim.apply_orders(o, 0, 1)
    assert sim.ahead(1 << 62) == 5
    sim.advance(ev, 2, 3, False)                       # a trade of 1 at 101
    assert sim.ahead(1 << 62) == 4
    sim.advance(ev, 3, 4, False)                       # the level drops to 4 with no trade: cap
    assert sim.ahead(1 << 62) == 4 and sim.ahead(7) is None
    assert sim.depth(0, 1)[1]["qty"].tolist() == [4]


def test_queue_models_are_objects_behind_one_interface():
    from exsim.replay.backtesting.queue_models import (QUEUE_MODELS, ConservativeQueue,
                                                 ProportionalQueue, as_queue_model)
    assert sorted(QUEUE_MODELS) == ["conservative", "proportional"]
    for cls in (ConservativeQueue, ProportionalQueue):
        m = cls()
        assert as_queue_model(m) is m and isinstance(as_queue_model(m.name), cls)
        assert m.describe() == {"queue_model": m.name}
    assert _decrease_case(ProportionalQueue()).fills["qty"].tolist() == [1]
    assert len(_decrease_case(ConservativeQueue()).fills) == 0
    res = _decrease_case(ProportionalQueue())
    assert res.meta["queue_model"] == "proportional"
    assert res.digest() == _decrease_case("proportional").digest()
    with pytest.raises(UsageError, match="queue_model"):
        as_queue_model(3)
