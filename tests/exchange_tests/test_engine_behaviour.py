"""One test per behaviour a user relies on, asserting on the fills, L2 rows and events emitted.

Tests taking the `book` fixture run against the engine and the reference model alike.
"""

import numpy as np
import pytest

from conftest import (
    buy, cancel, concat, flow, levels, make_book, modify, msg, rows, sell,
)
from exsim.exchange.schema import MAX_PRICE, MAX_QTY, Event, Flag, Kind, OrderType, Reason, Side, Tif

ACC, REJ, PART, FILL, CXL, MOD = (Event.ACCEPTED, Event.REJECTED, Event.PARTIAL, Event.FILLED,
                                  Event.CANCELLED, Event.MODIFIED)
X = [("X", 1, MAX_PRICE)]


def ev(result):
    """Events as (order_id, event, reason, filled_qty, leaves_qty)."""
    return rows(result.events, "order_id", "event", "reason", "filled_qty", "leaves_qty")


def l2(result):
    """L2 rows as (side, price, qty, count)."""
    return rows(result.l2, "side", "price", "qty", "count")


def fills(result):
    """Fills as (price, qty, buy_order_id, sell_order_id, aggressor_side)."""
    return rows(result.fills, "price", "qty", "buy_order_id", "sell_order_id", "aggressor_side")


def queue(book, side=None):
    """Live order ids in priority order (optionally of one side)."""
    live = book.orders("X")
    return [int(o["order_id"]) for o in live if side is None or o["side"] == side]


# ---- matching --------------------------------------------------------------------------------------

def test_fill_prices_at_resting_order_price(book):
    book.process(sell(1, 100, 10))
    res = book.process(buy(2, 105, 4))
    assert fills(res) == [(100, 4, 2, 1, Side.BUY)]
    assert ev(res) == [(2, ACC, 0, 0, 4), (2, FILL, 0, 4, 0), (1, PART, 0, 4, 6)]
    assert l2(res) == [(Side.SELL, 100, 6, 1)]


def test_sweep_across_levels_gives_price_improvement(book):
    book.process(flow(sell(1, 100, 5), sell(2, 101, 5), sell(3, 102, 5)))
    res = book.process(buy(4, 103, 12))
    assert fills(res) == [(100, 5, 4, 1, 0), (101, 5, 4, 2, 0), (102, 2, 4, 3, 0)]
    assert l2(res) == [(Side.SELL, 100, 0, 0), (Side.SELL, 101, 0, 0), (Side.SELL, 102, 3, 1)]


def test_gtc_limit_that_does_not_cross_rests_at_back_of_its_level(book):
    res = book.process(flow(buy(1, 99, 5), buy(2, 99, 7), buy(3, 100, 1)))
    assert l2(res) == [(Side.BUY, 99, 5, 1), (Side.BUY, 99, 12, 2), (Side.BUY, 100, 1, 1)]
    assert queue(book) == [3, 1, 2]


def test_partly_filled_gtc_rests_its_remainder(book):
    book.process(sell(1, 100, 3))
    res = book.process(buy(2, 101, 5))
    assert ev(res)[-1] == (1, FILL, 0, 3, 0) and l2(res)[-1] == (Side.BUY, 101, 2, 1)
    assert rows(book.orders("X"), "order_id", "qty", "filled") == [(2, 2, 3)]


def test_market_order_without_liquidity_is_cancelled_not_rested(book):
    res = book.process(buy(1, 0, 5, order_type=OrderType.MARKET))
    assert ev(res) == [(1, ACC, 0, 0, 5), (1, CXL, Reason.NO_LIQUIDITY, 0, 0)]
    assert l2(res) == [] and queue(book) == []


def test_market_order_takes_any_price_and_cancels_its_rest(book):
    book.process(flow(sell(1, 100, 2), sell(2, 10**6, 2)))
    res = book.process(buy(3, 0, 5, order_type=OrderType.MARKET))
    assert fills(res) == [(100, 2, 3, 1, 0), (10**6, 2, 3, 2, 0)]
    assert ev(res)[-1] == (3, CXL, Reason.NO_LIQUIDITY, 4, 0) and queue(book) == []


def test_ioc_fills_what_it_can_and_cancels_rest(book):
    book.process(flow(sell(1, 100, 3), sell(2, 102, 3)))
    res = book.process(buy(3, 101, 5, tif=Tif.IOC))
    assert fills(res) == [(100, 3, 3, 1, 0)]
    assert ev(res)[-1] == (3, CXL, Reason.IOC_UNFILLED, 3, 0) and queue(book) == [2]


def test_fok_that_can_fill_fills_completely_across_levels(book):
    book.process(flow(sell(1, 100, 3), sell(2, 101, 3)))
    res = book.process(buy(3, 101, 5, tif=Tif.FOK))
    assert fills(res) == [(100, 3, 3, 1, 0), (101, 2, 3, 2, 0)]
    assert ev(res)[-2] == (3, FILL, 0, 5, 0)


def test_fok_that_cannot_fill_is_rejected_and_book_unchanged(book):
    book.process(flow(sell(1, 100, 3), sell(2, 102, 3)))
    before = book.orders("X")
    res = book.process(buy(3, 101, 5, tif=Tif.FOK))
    assert ev(res) == [(3, REJ, Reason.FOK_CANNOT_FILL, 0, 0)] and fills(res) == [] and l2(res) == []
    assert book.orders("X").tobytes() == before.tobytes()


def test_post_only_that_would_cross_is_rejected(book):
    book.process(sell(1, 100, 3))
    res = book.process(buy(2, 100, 1, flags=Flag.POST_ONLY))
    assert ev(res) == [(2, REJ, Reason.POST_ONLY_WOULD_CROSS, 0, 0)] and queue(book) == [1]


def test_post_only_that_does_not_cross_rests(book):
    book.process(sell(1, 100, 3))
    res = book.process(buy(2, 99, 1, flags=Flag.POST_ONLY))
    assert ev(res) == [(2, ACC, 0, 0, 1)] and l2(res) == [(Side.BUY, 99, 1, 1)]
    assert int(book.orders("X")["flags"][0]) == Flag.POST_ONLY


# ---- cancel and modify -----------------------------------------------------------------------------

def test_cancel_removes_order_and_reports_its_fills(book):
    book.process(flow(sell(1, 100, 5), buy(2, 100, 2)))
    res = book.process(cancel(1))
    assert ev(res) == [(1, CXL, Reason.USER_CANCEL, 2, 0)] and l2(res) == [(Side.SELL, 100, 0, 0)]


def test_cancel_of_unknown_id_is_rejected_and_changes_nothing(book):
    book.process(sell(1, 100, 5))
    res = book.process(cancel(9))
    assert ev(res) == [(9, REJ, Reason.UNKNOWN_ID, 0, 0)] and l2(res) == [] and queue(book) == [1]


def test_cancel_of_partly_filled_non_first_order_leaves_no_phantom_level(book):
    book.process(flow(sell(1, 100, 5), buy(9, 100, 2), sell(2, 100, 5)))
    book.process(modify(1, 100, 4))  # raising 3 -> 4 moves the partly filled order behind 2
    assert queue(book) == [2, 1]
    assert l2(book.process(cancel(1))) == [(Side.SELL, 100, 5, 1)]
    res = book.process(buy(3, 100, 8))
    assert fills(res) == [(100, 5, 3, 2, 0)]
    assert l2(res) == [(Side.SELL, 100, 0, 0), (Side.BUY, 100, 3, 1)]
    assert levels(book.depth("X")[1]) == [] and levels(book.depth("X")[0]) == [(100, 3, 1)]


def test_modify_lowering_qty_keeps_priority(book):
    book.process(flow(buy(1, 99, 5), buy(2, 99, 5)))
    res = book.process(modify(1, 99, 3))
    assert ev(res) == [(1, MOD, 0, 0, 3)] and l2(res) == [(Side.BUY, 99, 8, 2)]
    assert queue(book) == [1, 2]


def test_modify_to_same_qty_keeps_priority_and_emits_no_l2(book):
    book.process(flow(buy(1, 99, 5), buy(2, 99, 5)))
    res = book.process(modify(1, 99, 5))
    assert ev(res) == [(1, MOD, 0, 0, 5)] and l2(res) == [] and queue(book) == [1, 2]


def test_modify_raising_qty_loses_priority(book):
    book.process(flow(buy(1, 99, 5), buy(2, 99, 5)))
    res = book.process(modify(1, 99, 6))
    assert ev(res) == [(1, MOD, 0, 0, 6)] and l2(res) == [(Side.BUY, 99, 11, 2)]
    assert queue(book) == [2, 1]


def test_modify_changing_price_loses_priority(book):
    book.process(flow(buy(1, 99, 5), buy(2, 98, 5), buy(3, 98, 5)))
    res = book.process(modify(1, 98, 5))
    assert ev(res) == [(1, MOD, 0, 0, 5)]
    assert l2(res) == [(Side.BUY, 99, 0, 0), (Side.BUY, 98, 15, 3)] and queue(book) == [2, 3, 1]


def test_modify_to_crossing_price_matches_as_aggressor(book):
    book.process(flow(sell(1, 101, 3), buy(2, 99, 5)))
    res = book.process(modify(2, 101, 5))
    assert fills(res) == [(101, 3, 2, 1, Side.BUY)]
    assert ev(res) == [(2, MOD, 0, 0, 5), (2, PART, 0, 3, 2), (1, FILL, 0, 3, 0)]
    assert l2(res) == [(Side.BUY, 99, 0, 0), (Side.SELL, 101, 0, 0), (Side.BUY, 101, 2, 1)]


def test_modify_of_partly_filled_order_sets_new_open_qty(book):
    book.process(flow(sell(1, 100, 10), buy(2, 100, 4)))
    res = book.process(modify(1, 100, 2))
    assert ev(res) == [(1, MOD, 0, 4, 2)]
    assert rows(book.orders("X"), "order_id", "qty", "filled") == [(1, 2, 4)]


def test_finished_order_id_can_be_reused(book):
    book.process(flow(sell(1, 100, 5), cancel(1)))
    res = book.process(sell(1, 101, 5))
    assert ev(res) == [(1, ACC, 0, 0, 5)] and queue(book) == [1]


# ---- rejects: one per reason -----------------------------------------------------------------------

REJECTS = {
    "BAD_KIND": msg(kind=9),
    "UNKNOWN_SYMBOL": buy(7, 100, 1, symbol=5),
    "BAD_SIDE": msg(order_id=7, side=2),
    "BAD_ORDER_TYPE": msg(order_id=7, order_type=4),
    "BAD_TIF": msg(order_id=7, tif=5),
    "BAD_FLAGS": msg(order_id=7, flags=Flag.POST_ONLY, tif=Tif.IOC),
    "BAD_QTY": buy(7, 100, 0),
    "OVERFLOW": buy(7, 100, MAX_QTY + 1),
    "BAD_PRICE": buy(7, 0, 1),
    "PRICE_OUT_OF_BAND": buy(7, MAX_PRICE + 1, 1),
    "DUPLICATE_ID": buy(1, 90, 1),
    "UNKNOWN_ID": modify(7, 100, 1),
    "POST_ONLY_WOULD_CROSS": sell(7, 90, 1, flags=Flag.POST_ONLY),
    "FOK_CANNOT_FILL": sell(7, 90, 11, tif=Tif.FOK),
    "NOT_OWNER": cancel(1, trader=2),
    "BAD_STOP_PRICE": buy(7, 100, 1, order_type=OrderType.STOP_LIMIT, stop_price=0),
    "BAD_DISPLAY_QTY": buy(7, 100, 5, display_qty=6),
    "BAD_EXPIRY": buy(7, 100, 5, tif=Tif.GTD, ts=10, expire_ts=10),
    "BAD_MIN_QTY": sell(7, 90, 5, min_qty=6),
    "MIN_QTY_CANNOT_FILL": sell(7, 90, 12, min_qty=11),
    # OFF_TICK, OFF_LOT, BELOW_MIN_QTY need symbol options and STOP_PRICE_REACHED a trade:
    # test_engine_validation_rules.py has them
}


@pytest.mark.parametrize("reason", REJECTS)
def test_invalid_message_is_rejected_with_its_reason_and_changes_nothing(book, reason):
    book.process(buy(1, 95, 10))  # a live order for DUPLICATE_ID, POST_ONLY and FOK to meet
    before = book.orders("X")
    res = book.process(REJECTS[reason])
    assert ev(res) == [(int(REJECTS[reason]["order_id"][0]), REJ, Reason[reason], 0, 0)]
    assert fills(res) == [] and l2(res) == [] and book.orders("X").tobytes() == before.tobytes()


@pytest.mark.parametrize("message, reason", [
    (modify(1, 95, 0), Reason.BAD_QTY), (modify(1, 95, MAX_QTY + 1), Reason.OVERFLOW),
    (modify(1, -3, 5), Reason.BAD_PRICE), (modify(1, MAX_PRICE + 1, 5), Reason.PRICE_OUT_OF_BAND),
    (cancel(2), Reason.UNKNOWN_ID)])
def test_invalid_modify_or_cancel_is_rejected_with_its_reason(book, message, reason):
    book.process(flow(buy(1, 95, 10), sell(3, 100, 5)))
    res = book.process(message)
    assert ev(res) == [(int(message["order_id"][0]), REJ, reason, 0, 0)] and queue(book) == [1, 3]


def test_modify_of_post_only_order_to_crossing_price_is_rejected(book):
    book.process(flow(buy(1, 95, 10, flags=Flag.POST_ONLY), sell(3, 100, 5)))
    res = book.process(modify(1, 100, 10))
    assert ev(res) == [(1, REJ, Reason.POST_ONLY_WOULD_CROSS, 0, 0)] and queue(book) == [1, 3]


def test_unknown_kind_is_rejected_before_unknown_symbol(book):
    res = book.process(msg(kind=200, symbol=77, order_id=4))
    assert ev(res) == [(4, REJ, Reason.BAD_KIND, 0, 0)]
    assert int(res.events["symbol"][0]) == 77


# ---- self-trade prevention: one per mode -----------------------------------------------------------

def stp_book(impl, stp):
    """Trader 1 rests 5 @100 (id 1), trader 2 rests 5 @100 behind it (id 2)."""
    book = make_book(impl, stp, X)
    book.process(flow(sell(1, 100, 5, trader=1), sell(2, 100, 5, trader=2)))
    return book


def test_stp_none_lets_a_trader_trade_with_itself(impl):
    res = stp_book(impl, "none").process(buy(3, 100, 8, trader=1))
    assert fills(res) == [(100, 5, 3, 1, 0), (100, 3, 3, 2, 0)]


def test_stp_cancel_resting_removes_own_order_and_goes_on(impl):
    book = stp_book(impl, "cancel_resting")
    res = book.process(buy(3, 100, 8, trader=1))
    assert ev(res)[:2] == [(3, ACC, 0, 0, 8), (1, CXL, Reason.SELF_TRADE, 0, 0)]
    assert fills(res) == [(100, 5, 3, 2, 0)] and queue(book) == [3]


def test_stp_cancel_incoming_cancels_the_aggressor_and_leaves_book(impl):
    book = stp_book(impl, "cancel_incoming")
    res = book.process(buy(3, 100, 8, trader=1))
    assert ev(res) == [(3, ACC, 0, 0, 8), (3, CXL, Reason.SELF_TRADE, 0, 0)]
    assert fills(res) == [] and l2(res) == [] and queue(book) == [1, 2]


def test_stp_cancel_both_cancels_resting_and_aggressor(impl):
    book = stp_book(impl, "cancel_both")
    res = book.process(buy(3, 100, 8, trader=1))
    assert ev(res) == [(3, ACC, 0, 0, 8), (1, CXL, Reason.SELF_TRADE, 0, 0),
                       (3, CXL, Reason.SELF_TRADE, 0, 0)]
    assert l2(res) == [(Side.SELL, 100, 5, 1)] and queue(book) == [2]


def test_fok_under_stp_counts_only_what_matching_would_take(impl):
    book = stp_book(impl, "cancel_incoming")
    res = book.process(buy(3, 100, 5, trader=2, tif=Tif.FOK))
    assert fills(res) == [(100, 5, 3, 1, 0)]
    assert ev(book.process(buy(4, 100, 1, trader=2, tif=Tif.FOK)))[0][2] == Reason.FOK_CANNOT_FILL


# ---- sequence numbers, ids, views ------------------------------------------------------------------

def test_seq_counts_every_message_including_rejects(book):
    res = book.process(flow(buy(1, 99, 1), cancel(5), msg(kind=9), sell(2, 99, 1)))
    assert rows(res.events, "seq") == [(1,), (2,), (3,), (4,), (4,), (4,)]
    assert rows(res.fills, "seq", "trade_id") == [(4, 1)]


def test_trade_ids_are_engine_wide_across_symbols(impl):
    book = make_book(impl, symbols=[("X", 1, MAX_PRICE), ("Y", 1, MAX_PRICE)])
    res = book.process(flow(sell(1, 10, 1), sell(1, 10, 1, symbol=1), buy(2, 10, 1, symbol=1),
                            buy(2, 10, 1)))
    assert rows(res.fills, "symbol", "trade_id", "seq") == [(1, 1, 3), (0, 2, 4)]


def test_depth_lists_best_levels_first_with_totals(book):
    book.process(flow(buy(1, 98, 1), buy(2, 99, 2), buy(3, 99, 3), sell(4, 102, 4), sell(5, 101, 5)))
    bids, asks = book.depth("X")
    assert levels(bids) == [(99, 5, 2), (98, 1, 1)] and levels(asks) == [(101, 5, 1), (102, 4, 1)]
    assert levels(book.depth("X", levels=1)[0]) == [(99, 5, 2)]


def test_orders_lists_bids_then_asks_best_first_fifo(book):
    book.process(flow(sell(1, 102, 1), buy(2, 98, 1), sell(3, 101, 1), buy(4, 99, 1), buy(5, 99, 1)))
    assert queue(book) == [4, 5, 2, 3, 1]
    assert rows(book.orders("X"), "side")[:3] == [(Side.BUY,)] * 3


# ---- engine only: per-order API, wide prices, checkpoints ------------------------------------------

def test_prices_spanning_1e9_ticks_work(engine):
    engine.process(flow(buy(1, 1, 5), buy(2, 10**9, 5), buy(3, 10**15, 5), sell(4, 2 * 10**15, 5)))
    assert levels(engine.depth("X")[0]) == [(10**15, 5, 1), (10**9, 5, 1), (1, 5, 1)]
    res = engine.process(sell(5, 1, 12))
    assert fills(res) == [(10**15, 5, 3, 5, 1), (10**9, 5, 2, 5, 1), (1, 2, 1, 5, 1)]
    assert engine.memory_bytes() < 8 << 20  # state grows with orders and levels, not the range


def test_submit_cancel_modify_match_process_byte_for_byte(engine):
    other = make_book("engine", symbols=X)
    a = [engine.submit("X", "sell", price=100, qty=5, trader=1, order_id=1, ts=10),
         engine.submit("X", "buy", price=101, qty=2, tif="ioc", trader=2, order_id=2, ts=11),
         engine.modify("X", 1, price=102, qty=4, trader=1, ts=12),
         engine.cancel("X", 1, trader=1, ts=13)]
    b = other.process(flow(sell(1, 100, 5, trader=1, ts=10), buy(2, 101, 2, trader=2, tif=Tif.IOC,
                                                                   ts=11),
                           modify(1, 102, 4, ts=12), cancel(1, ts=13)))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(concat(a), b))


def test_auto_order_id_is_unique(engine):
    engine.submit("X", "buy", price=90, qty=1, order_id=1)
    ids = [int(engine.submit("X", "buy", price=90, qty=1).events["order_id"][0]) for _ in range(5)]
    assert len(set(ids + [1])) == 6 and sorted(queue(engine)) == sorted(ids + [1])


def test_checkpoint_restore_roundtrip(engine):
    engine.process(flow(buy(1, 99, 5), buy(2, 99, 3), sell(3, 101, 4), buy(4, 101, 1)))
    restored = type(engine).restore(engine.checkpoint())
    assert restored.orders("X").tobytes() == engine.orders("X").tobytes()
    assert (restored.seq, restored.state_hash()) == (engine.seq, engine.state_hash())
    a, b = restored.process(sell(5, 99, 6)), engine.process(sell(5, 99, 6))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def test_outputs_written_into_given_buffers_equal_fresh_ones_and_grow_when_short():
    from conftest import random_flow, split
    from exsim.exchange import OutputBuffers
    from exsim.exchange.errors import UsageError
    orders = random_flow(seed=31, n=3000)
    fresh, given = make_book("engine"), make_book("engine")
    sets = [OutputBuffers(0), OutputBuffers(0)]      # smaller than any batch's outputs
    for k, batch in enumerate(split(orders, range(0, 3000, 400))):
        want, got = fresh.process(batch), given.process(batch, out=sets[k % 2])
        assert [t.tobytes() for t in got] == [t.tobytes() for t in want]
        assert got.events.base is sets[k % 2].events or got.events.base is sets[k % 2].events.base
    assert len(sets[0].events) >= 400
    with pytest.raises(UsageError, match="OutputBuffers"):     # out= is the one way to reuse
        given.process(orders[:1], out=object())
    with pytest.raises(TypeError, match="reuse"):
        given.process(orders[:1], reuse=True, out=sets[0])
