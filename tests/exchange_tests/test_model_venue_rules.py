"""The reference model follows each venue rule of docs/semantics.md (issue 15), one test each.

These run on the model alone: the differential tests then hold the engine to the same rows. The
iceberg examples follow CME Globex's published rule for display quantity orders (a filled slice
is replaced at once by a new one with new time priority); the stop examples follow CME Globex's
stop-limit rules (a stop whose trigger is already reached is rejected; triggered stops enter the
book as orders of the triggering message).
"""

import pytest

from exsim.exchange.schema import Event, Kind, OrderType, Reason, Side, Tif
from conftest import buy, cancel, flow, modify, msg, rows, sell
from model import DAY_NS, Model, day_expiry


def model(stp="none", ownership=True, **options):
    m = Model(stp=stp, ownership=ownership)
    m.add_symbol("X", **options)
    return m


def events(res):
    """(order_id, event, reason, filled, leaves) rows."""
    return rows(res.events, "order_id", "event", "reason", "filled_qty", "leaves_qty")


def fills(res):
    """(price, qty, buy id, sell id) rows."""
    return rows(res.fills, "price", "qty", "buy_order_id", "sell_order_id")


def l2(res):
    """(side, price, qty, count) rows."""
    return rows(res.l2, "side", "price", "qty", "count")


def l3(m, what="orders"):
    """(order_id, price, shown, hidden) of the resting orders (or stops) in priority order."""
    return rows(getattr(m, what)("X"), "order_id", "price", "qty", "hidden")


def rejected(res):
    (e,) = res.events
    assert e["event"] == Event.REJECTED
    return Reason(int(e["reason"]))


def stop(side, order_id, stop_price, qty, price=0, **kw):
    otype = OrderType.STOP_LIMIT if price else OrderType.STOP
    return msg(side=side, order_id=order_id, price=price, qty=qty, order_type=otype,
               stop_price=stop_price, **kw)


# ---- ownership ---------------------------------------------------------------------------------

def test_cancel_or_modify_by_another_trader_is_rejected_not_owner_and_changes_nothing():
    m = model()
    m.process(buy(1, 100, 10, trader=1))
    assert rejected(m.process(cancel(1, trader=2))) == Reason.NOT_OWNER
    assert rejected(m.process(modify(1, 101, 5, trader=2))) == Reason.NOT_OWNER
    assert l3(m) == [(1, 100, 10, 0)]
    assert events(m.process(cancel(1, trader=1))) == [(1, Event.CANCELLED, Reason.USER_CANCEL, 0, 0)]


def test_ownership_off_lets_any_trader_cancel():
    m = model(ownership=False)
    m.process(buy(1, 100, 10, trader=1))
    assert events(m.process(cancel(1, trader=2)))[0][1] == Event.CANCELLED


def test_unknown_id_is_checked_before_ownership():
    assert rejected(model().process(cancel(9, trader=2))) == Reason.UNKNOWN_ID


# ---- tick tables, lots, minimum order quantity -------------------------------------------------

def test_tick_table_takes_any_price_below_the_break_and_multiples_of_its_tick_above():
    m = model(tick_table=[(1, 1), (10_000, 5)])
    assert events(m.process(buy(1, 9_999, 1)))[0][1] == Event.ACCEPTED
    assert events(m.process(buy(2, 10_005, 1)))[0][1] == Event.ACCEPTED
    assert rejected(m.process(buy(3, 10_001, 1))) == Reason.OFF_TICK
    assert rejected(m.process(modify(1, 10_002, 1))) == Reason.OFF_TICK


def test_off_lot_and_below_minimum_quantities_are_rejected_in_order():
    m = model(lot_size=5, min_order_qty=10, tick_table=[(1, 2)])
    assert rejected(m.process(buy(1, 101, 7))) == Reason.OFF_LOT       # lot before tick
    assert rejected(m.process(buy(1, 101, 5))) == Reason.BELOW_MIN_QTY  # minimum before tick
    assert rejected(m.process(buy(1, 101, 10))) == Reason.OFF_TICK
    m.process(buy(1, 100, 10))
    assert rejected(m.process(modify(1, 100, 12))) == Reason.OFF_LOT
    assert rejected(m.process(modify(1, 100, 5))) == Reason.BELOW_MIN_QTY


# ---- stops -----------------------------------------------------------------------------------------

def test_buy_stop_waits_until_a_trade_at_its_price_then_enters_as_a_market_order():
    m = model()
    m.process(flow(sell(1, 100, 5), sell(2, 101, 5)))
    res = m.process(stop(Side.BUY, 3, 100, 4))
    assert events(res) == [(3, Event.ACCEPTED, 0, 0, 4)] and not len(res.l2)
    assert l3(m, "stops") == [(3, 0, 4, 0)]
    res = m.process(buy(4, 100, 2, trader=2))  # trades at 100: the stop's trigger
    assert fills(res) == [(100, 2, 4, 1), (100, 3, 3, 1), (101, 1, 3, 2)]
    assert (3, Event.TRIGGERED, 0, 0, 4) in events(res)
    assert l3(m, "stops") == []


def test_stop_already_reached_on_arrival_is_rejected():
    m = model()
    m.process(flow(sell(1, 100, 5), buy(2, 100, 1, trader=2)))
    assert rejected(m.process(stop(Side.BUY, 3, 100, 1))) == Reason.STOP_PRICE_REACHED
    assert rejected(m.process(stop(Side.SELL, 3, 100, 1))) == Reason.STOP_PRICE_REACHED
    assert events(m.process(stop(Side.SELL, 3, 99, 1)))[0][1] == Event.ACCEPTED


def test_a_symbol_that_never_traded_accepts_any_stop_price():
    m = model()
    assert events(m.process(stop(Side.BUY, 1, 5, 1)))[0][1] == Event.ACCEPTED


def test_triggered_stops_release_lowest_buy_first_fifo_and_cascade_within_one_message():
    m = model()
    m.process(flow(sell(1, 100, 1), sell(2, 101, 1), sell(3, 102, 1), sell(4, 103, 1)))
    # 12 and 11 at 101 (FIFO), 10 at 100, 13 at 102: triggered by the cascade of 10's trade
    m.process(flow(stop(Side.BUY, 12, 101, 1), stop(Side.BUY, 11, 101, 1),
                   stop(Side.BUY, 10, 100, 1), stop(Side.BUY, 13, 103, 1)))
    assert [r[0] for r in l3(m, "stops")] == [10, 12, 11, 13]
    res = m.process(buy(5, 100, 1, trader=2))
    assert [e[0] for e in events(res) if e[1] == Event.TRIGGERED] == [10, 12, 11, 13]
    assert fills(res) == [(100, 1, 5, 1), (101, 1, 10, 2), (102, 1, 12, 3), (103, 1, 11, 4)]
    assert events(res)[-1] == (13, Event.CANCELLED, Reason.NO_LIQUIDITY, 0, 0)
    assert set(res.events["seq"]) == {m.seq}


def test_released_stop_limit_rests_at_its_price_with_priority_from_the_release():
    m = model()
    m.process(flow(sell(1, 100, 1), stop(Side.BUY, 2, 100, 5, price=100), buy(3, 99, 1)))
    m.process(buy(4, 100, 1, trader=2))
    assert l3(m) == [(2, 100, 5, 0), (3, 99, 1, 0)]
    (row,) = [r for r in m.orders("X") if r["order_id"] == 2]
    assert (row["order_type"], row["stop_price"]) == (OrderType.LIMIT, 0)


def test_pending_stops_cancel_and_modify_keeping_or_losing_their_place():
    m = model()
    m.process(flow(stop(Side.SELL, 1, 90, 5), stop(Side.SELL, 2, 90, 5), stop(Side.SELL, 3, 90, 5)))
    res = m.process(modify(1, 0, 4, stop_price=90))   # lower qty, same trigger: place kept
    assert events(res) == [(1, Event.MODIFIED, 0, 0, 4)] and not len(res.l2)
    m.process(modify(2, 0, 6, stop_price=90))          # higher qty: back of its trigger price
    assert [r[0] for r in l3(m, "stops")] == [1, 3, 2]
    m.process(modify(3, 0, 5, stop_price=95))          # higher SELL trigger releases first
    assert [r[0] for r in l3(m, "stops")] == [3, 1, 2]
    assert events(m.process(cancel(1))) == [(1, Event.CANCELLED, Reason.USER_CANCEL, 0, 0)]
    assert rejected(m.process(buy(2, 100, 1))) == Reason.DUPLICATE_ID


# ---- icebergs --------------------------------------------------------------------------------------

def test_iceberg_shows_its_display_quantity_and_refills_at_the_back_cme_globex():
    """CME Globex: an order with display quantity shows one slice; when the slice fills a new
    one is shown with new time priority, behind the orders already at the price."""
    m = model()
    res = m.process(flow(sell(1, 100, 10, display_qty=3), sell(2, 100, 4, trader=2)))
    assert l2(res) == [(Side.SELL, 100, 3, 1), (Side.SELL, 100, 7, 2)]
    assert l3(m) == [(1, 100, 3, 7), (2, 100, 4, 0)]
    res = m.process(buy(3, 100, 5, trader=3))          # 3 from the slice, then 2 from order 2
    assert fills(res) == [(100, 3, 3, 1), (100, 2, 3, 2)]
    assert l3(m) == [(2, 100, 2, 0), (1, 100, 3, 4)]
    assert l2(res) == [(Side.SELL, 100, 5, 2)]
    assert (1, Event.PARTIAL, 0, 3, 7) in events(res)


def test_aggressor_sweeping_an_iceberg_alone_at_its_level_takes_slice_after_slice():
    m = model()
    m.process(sell(1, 100, 10, display_qty=3))
    res = m.process(buy(2, 100, 8, trader=2))
    assert fills(res) == [(100, 3, 2, 1), (100, 3, 2, 1), (100, 2, 2, 1)]
    assert l3(m) == [(1, 100, 1, 1)]


def test_fok_counts_reserve_unless_a_self_trade_stops_matching_first():
    m = model(stp="cancel_incoming")
    m.process(flow(sell(1, 100, 10, display_qty=2, trader=2), sell(2, 100, 5, trader=1)))
    assert rejected(m.process(buy(3, 100, 3, trader=1, tif=Tif.FOK))) == Reason.FOK_CANNOT_FILL
    assert events(m.process(buy(4, 100, 2, trader=1, tif=Tif.FOK)))[-2][1] == Event.FILLED
    n = model()
    n.process(sell(1, 100, 10, display_qty=2, trader=2))
    assert events(n.process(buy(3, 100, 10, trader=1, tif=Tif.FOK)))[1][1] == Event.PARTIAL


def test_modify_down_takes_the_reserve_first_and_writes_no_l2_row_if_the_slice_stays():
    m = model()
    m.process(sell(1, 100, 10, display_qty=3))
    res = m.process(modify(1, 100, 5))
    assert l3(m) == [(1, 100, 3, 2)] and not len(res.l2)
    res = m.process(modify(1, 100, 2))
    assert l3(m) == [(1, 100, 2, 0)] and l2(res) == [(Side.SELL, 100, 2, 1)]


@pytest.mark.parametrize("bad", [dict(display_qty=11), dict(display_qty=-1),
                                 dict(display_qty=2, tif=Tif.IOC),
                                 dict(display_qty=2, order_type=OrderType.MARKET)])
def test_display_quantity_on_an_order_that_cannot_rest_or_above_its_qty_is_rejected(bad):
    assert rejected(model().process(sell(1, 100, 10, **bad))) == Reason.BAD_DISPLAY_QTY


# ---- DAY / GTD ---------------------------------------------------------------------------------------

def test_gtd_and_day_orders_expire_before_the_message_at_or_after_their_expiry_in_order():
    close = 16 * 3600 * 10**9
    m = model(session_close=close)
    m.process(flow(sell(5, 101, 1, tif=Tif.GTD, expire_ts=1_000, ts=10),
                   sell(4, 102, 1, tif=Tif.GTD, expire_ts=1_000, ts=10),
                   sell(3, 103, 1, tif=Tif.DAY, ts=10),
                   stop(Side.BUY, 6, 150, 1, tif=Tif.GTD, expire_ts=999, ts=10)))
    assert rows(m.orders("X"), "order_id", "expire_ts")[2] == (3, close)
    res = m.process(buy(7, 101, 1, ts=1_000, trader=2))  # 5 has expired: no fill
    assert events(res)[:3] == [(6, Event.CANCELLED, Reason.EXPIRED, 0, 0),
                               (4, Event.CANCELLED, Reason.EXPIRED, 0, 0),
                               (5, Event.CANCELLED, Reason.EXPIRED, 0, 0)]
    assert l2(res)[:2] == [(Side.SELL, 102, 0, 0), (Side.SELL, 101, 0, 0)]
    assert not len(res.fills) and set(res.events["seq"]) == {m.seq}
    res = m.process(msg(kind=9, ts=close))                # even an invalid message moves the clock
    assert events(res)[0] == (3, Event.CANCELLED, Reason.EXPIRED, 0, 0)


def test_day_expiry_is_the_next_session_close_strictly_after_entry():
    assert day_expiry(0, 0) == DAY_NS
    assert day_expiry(5, 10) == 10
    assert day_expiry(10, 10) == 10 + DAY_NS


@pytest.mark.parametrize("fields", [dict(tif=Tif.GTD, expire_ts=5, ts=5), dict(expire_ts=7)])
def test_bad_expiries_are_rejected(fields):
    assert rejected(model().process(buy(1, 100, 1, **fields))) == Reason.BAD_EXPIRY


# ---- minimum quantity ----------------------------------------------------------------------------

def test_min_qty_rejects_when_less_would_fill_now_and_rests_the_rest_otherwise():
    m = model()
    m.process(sell(1, 100, 3))
    assert rejected(m.process(buy(2, 100, 10, min_qty=4, trader=2))) == Reason.MIN_QTY_CANNOT_FILL
    res = m.process(buy(2, 100, 10, min_qty=3, trader=2))
    assert fills(res) == [(100, 3, 2, 1)] and l3(m) == [(2, 100, 7, 0)]


@pytest.mark.parametrize("fields", [dict(min_qty=11), dict(min_qty=-1), dict(min_qty=2, tif=Tif.FOK)])
def test_bad_minimum_quantities_are_rejected(fields):
    assert rejected(model().process(buy(1, 100, 10, **fields))) == Reason.BAD_MIN_QTY


def test_stop_with_fok_is_bad_tif_and_with_min_qty_bad_min_qty():
    assert rejected(model().process(stop(Side.BUY, 1, 100, 5, tif=Tif.FOK))) == Reason.BAD_TIF
    assert rejected(model().process(stop(Side.BUY, 1, 100, 5, min_qty=1))) == Reason.BAD_MIN_QTY
    assert rejected(model().process(stop(Side.BUY, 1, 0, 5))) == Reason.BAD_STOP_PRICE


def test_kind_check_still_comes_first():
    assert rejected(model().process(msg(kind=Kind.NEW + 7))) == Reason.BAD_KIND


# ---- validation order: the first failing step wins --------------------------------------------

S = OrderType.STOP
FIRST_FAILURE = {  # a NEW failing the named step and a later one, on symbol X (lot 2, min 4,
    # band 10..1000, ticks of 5 from 500 up); a live order 1 rests at 20 and X has traded at 30
    "BAD_SIDE": dict(side=2, order_type=9),
    "BAD_ORDER_TYPE": dict(order_type=9, tif=9),
    "BAD_TIF": dict(tif=9, flags=4),
    "BAD_FLAGS": dict(flags=4, qty=0),
    "BAD_QTY": dict(qty=0, price=0),
    "OVERFLOW": dict(qty=(1 << 40) + 2, price=0),
    "OFF_LOT": dict(qty=3, price=0),
    "BELOW_MIN_QTY": dict(qty=2, price=0),
    "BAD_PRICE": dict(price=0, order_type=OrderType.STOP_LIMIT, stop_price=0),
    "PRICE_OUT_OF_BAND": dict(price=1001, display_qty=-1),
    "OFF_TICK": dict(price=502, order_type=OrderType.STOP_LIMIT, stop_price=0),
    "BAD_STOP_PRICE": dict(order_type=S, stop_price=502, display_qty=2),
    "BAD_DISPLAY_QTY": dict(display_qty=3, min_qty=-1),
    "BAD_MIN_QTY": dict(min_qty=3, expire_ts=5),
    "BAD_EXPIRY": dict(expire_ts=5, order_id=1),
    "DUPLICATE_ID": dict(order_id=1, order_type=S, stop_price=35, side=Side.SELL),
    "STOP_PRICE_REACHED": dict(order_type=S, stop_price=30),
    "POST_ONLY_WOULD_CROSS": dict(side=Side.SELL, price=15, flags=1),
    "FOK_CANNOT_FILL": dict(side=Side.SELL, price=15, tif=Tif.FOK, qty=40),
    "MIN_QTY_CANNOT_FILL": dict(side=Side.SELL, price=15, qty=40, min_qty=30),
}


@pytest.mark.parametrize("reason", list(FIRST_FAILURE))
def test_new_validation_steps_run_in_the_documented_order(reason):
    m = model(min_price=10, max_price=1000, lot_size=2, min_order_qty=4,
              tick_table=[(1, 1), (500, 5)])
    m.process(flow(sell(7, 30, 4, trader=2), buy(8, 30, 4), buy(1, 20, 10)))
    before = (l3(m), l3(m, "stops"))
    fields = {**dict(order_id=2, price=100, qty=10), **FIRST_FAILURE[reason]}
    assert rejected(m.process(msg(**fields))) == Reason[reason]
    assert (l3(m), l3(m, "stops")) == before


MODIFY_FIRST_FAILURE = {  # a MODIFY of resting order 1 (trader 1, at 20) or pending stop 3
    "UNKNOWN_ID": dict(order_id=9, trader=2),
    "NOT_OWNER": dict(trader=2, qty=0),
    "BAD_QTY": dict(qty=0, price=0),
    "OFF_LOT": dict(qty=5, price=0),
    "BELOW_MIN_QTY": dict(qty=2, price=0),
    "BAD_PRICE": dict(price=0),
    "PRICE_OUT_OF_BAND": dict(price=5),
    "OFF_TICK": dict(price=503),
    "BAD_STOP_PRICE": dict(order_id=3, stop_price=503),
    "STOP_PRICE_REACHED": dict(order_id=3, stop_price=30),
}


@pytest.mark.parametrize("reason", list(MODIFY_FIRST_FAILURE))
def test_modify_validation_steps_run_in_the_documented_order(reason):
    m = model(min_price=10, max_price=1000, lot_size=2, min_order_qty=4,
              tick_table=[(1, 1), (500, 5)])
    m.process(flow(sell(7, 30, 4, trader=2), buy(8, 30, 4), buy(1, 20, 10),
                   stop(Side.BUY, 3, 40, 4)))
    before = (l3(m), l3(m, "stops"))
    fields = {**dict(order_id=1, price=20, qty=10, stop_price=40), **MODIFY_FIRST_FAILURE[reason]}
    assert rejected(m.process(modify(fields.pop("order_id"), fields.pop("price"),
                                     fields.pop("qty"), **fields))) == Reason[reason]
    assert (l3(m), l3(m, "stops")) == before


def test_a_pending_stop_modify_ignores_price_but_a_stop_limit_checks_it():
    m = model(min_price=10, max_price=1000)
    m.process(flow(stop(Side.BUY, 3, 40, 4), stop(Side.BUY, 4, 40, 4, price=41)))
    assert events(m.process(modify(3, 0, 4, stop_price=45)))[0][1] == Event.MODIFIED
    assert rejected(m.process(modify(4, 0, 4, stop_price=45))) == Reason.BAD_PRICE
    assert l3(m, "stops") == [(4, 41, 4, 0), (3, 0, 4, 0)]


def test_modify_down_keeps_a_partly_filled_slice_and_cuts_the_reserve():
    m = model()
    m.process(flow(sell(1, 100, 10, display_qty=3), buy(2, 100, 2, trader=2)))
    assert l3(m) == [(1, 100, 1, 7)]
    res = m.process(modify(1, 100, 5))
    assert l3(m) == [(1, 100, 1, 4)] and not len(res.l2)
    assert events(res) == [(1, Event.MODIFIED, 0, 2, 5)]


def test_modify_up_loses_place_and_shows_a_fresh_slice():
    m = model()
    m.process(flow(sell(1, 100, 10, display_qty=3), sell(2, 100, 1, trader=2),
                   buy(3, 100, 2, trader=3)))
    res = m.process(modify(1, 100, 12))
    assert l3(m) == [(2, 100, 1, 0), (1, 100, 3, 9)]
    assert l2(res) == [(Side.SELL, 100, 4, 2)]
