"""The orders a real venue takes, as the engine runs them: stops, icebergs, DAY/GTD, min qty.

One test per behaviour a user relies on (docs/semantics.md: "Stops", "Icebergs", "Time in force
by the clock", "FOK and minimum quantity", "Checkpoints of the new state"), asserting on the
fills, L2 rows and events emitted. The worked examples follow CME Globex's published rules
(CME Group, "Order Types for CME Globex": stop-limit and stop orders; "Iceberg orders: display
quantity"); each test says which.

These need the engine of issue 15 (its kernels; validation of the new fields comes from the
validation helper's module, and the tests here send only valid messages).
"""

import numpy as np
import pytest

from conftest import buy, cancel, modify, msg, rows, sell
from exsim.exchange import Engine
from exsim.exchange.errors import CorruptionError
from exsim.exchange.protocol import OutputBuffers
from exsim.exchange.schema import (
    MAX_PRICE, ORDER_DTYPE, Event, Kind, OrderType, Reason, Side, Tif,
)

ACC, REJ, PART, FILL, CXL, MOD, TRIG = (Event.ACCEPTED, Event.REJECTED, Event.PARTIAL,
                                        Event.FILLED, Event.CANCELLED, Event.MODIFIED,
                                        Event.TRIGGERED)
STOP, STOP_LIMIT, MARKET = OrderType.STOP, OrderType.STOP_LIMIT, OrderType.MARKET
DAY_NS = 86_400 * 10**9


def ev(result):
    """Events as (order_id, event, reason, filled_qty, leaves_qty)."""
    return rows(result.events, "order_id", "event", "reason", "filled_qty", "leaves_qty")


def l2(result):
    """L2 rows as (side, price, qty, count)."""
    return rows(result.l2, "side", "price", "qty", "count")


def fills(result):
    """Fills as (price, qty, buy_order_id, sell_order_id)."""
    return rows(result.fills, "price", "qty", "buy_order_id", "sell_order_id")


def eng(stp="none"):
    e = Engine(stp=stp, ownership=False)
    e.add_symbol("X", min_price=1, max_price=MAX_PRICE)
    return e


def cat(*messages):
    """One batch of the given one-row messages (ORDER_DTYPE is packed: concatenating is exact)."""
    return np.concatenate(messages)


def tiny_buffers():
    """Output buffers of one row each, so every batch grows them (the growth paths)."""
    out = OutputBuffers()
    out.fills, out.l2, out.events = (np.zeros(1, t.dtype) for t in (out.fills, out.l2,
                                                                     out.events))
    return out


def ids(table):
    return [int(o["order_id"]) for o in table]


# ---- stops ---------------------------------------------------------------------------------------

def test_stop_limit_waits_then_triggers_and_rests_at_its_limit():
    """CME Globex stop-limit: a buy stop-limit with trigger 105 and limit 107 waits outside the
    book (ACCEPTED, no L2); when a trade prints at 105 it is released as a limit at 107, buys what
    is offered up to 107 and rests the rest at 107."""
    e = eng()
    r = e.process(buy(1, 107, 10, order_type=STOP_LIMIT, stop_price=105, trader=1))
    assert ev(r) == [(1, ACC, 0, 0, 10)] and l2(r) == [] and e.depth("X")[0].size == 0
    assert ids(e.stops("X")) == [1] and e.live_orders == 1
    e.process(cat(sell(2, 105, 1, trader=2), sell(3, 106, 4, trader=2),
                     sell(4, 108, 5, trader=2)))
    r = e.process(buy(5, 105, 1, trader=3))          # prints 105: the stop triggers
    assert ev(r) == [(5, ACC, 0, 0, 1), (5, FILL, 0, 1, 0), (2, FILL, 0, 1, 0),
                     (1, TRIG, 0, 0, 10), (1, PART, 0, 4, 6), (3, FILL, 0, 4, 0)]
    assert fills(r) == [(105, 1, 5, 2), (106, 4, 1, 3)]
    assert l2(r) == [(1, 105, 0, 0), (1, 106, 0, 0), (0, 107, 6, 1)]
    assert all(r.events["seq"] == e.seq)
    assert e.stops("X").size == 0
    live = e.orders("X")
    assert ids(live) == [1, 4] and int(live[0]["qty"]) == 6
    assert int(live[0]["order_type"]) == OrderType.LIMIT and int(live[0]["stop_price"]) == 0


def test_stop_triggers_as_market_and_cancels_what_it_cannot_fill():
    """CME Globex stop (stop-market): a sell stop at 100 enters as a market order once a trade
    prints at or below 100; what no bid takes is cancelled (NO_LIQUIDITY)."""
    e = eng()
    e.process(sell(1, 0, 8, order_type=STOP, stop_price=100, trader=1))
    e.process(cat(buy(2, 100, 1, trader=2), buy(3, 99, 3, trader=2)))
    r = e.process(sell(4, 100, 1, trader=3))
    assert fills(r) == [(100, 1, 2, 4), (99, 3, 3, 1)]
    assert ev(r)[3:] == [(1, TRIG, 0, 0, 8), (1, PART, 0, 3, 5), (3, FILL, 0, 3, 0),
                         (1, CXL, Reason.NO_LIQUIDITY, 3, 0)]


def test_a_trade_away_from_the_trigger_leaves_the_stop_pending():
    e = eng()
    e.process(buy(1, 0, 5, order_type=STOP, stop_price=110))
    e.process(cat(sell(2, 109, 1, trader=2), buy(3, 109, 1, trader=3)))
    assert ids(e.stops("X")) == [1]


def test_several_stops_triggered_at_once_release_buys_lowest_trigger_first_then_fifo():
    """CME Globex: stops elected by one trade enter in trigger-price order, time priority among
    equal triggers. A buy-through to 103 elects buy stops at 101, 102 and 102 (in that order)."""
    e = eng()
    e.process(cat(buy(10, 0, 1, order_type=STOP, stop_price=102, trader=1),
                     buy(11, 0, 1, order_type=STOP, stop_price=101, trader=1),
                     buy(12, 0, 1, order_type=STOP, stop_price=102, trader=1),
                     buy(13, 0, 1, order_type=STOP, stop_price=104, trader=1)))
    assert ids(e.stops("X")) == [11, 10, 12, 13]
    e.process(cat(*[sell(20 + k, 100 + k, 1, trader=2) for k in range(1, 8)]))
    r = e.process(buy(30, 103, 3, trader=3))         # prints 101, 102, 103
    trig = [int(x["order_id"]) for x in r.events if x["event"] == TRIG]
    assert trig == [11, 10, 12, 13]                  # 13 elected by the cascade (104 printed)
    assert fills(r)[3:] == [(104, 1, 11, 24), (105, 1, 10, 25), (106, 1, 12, 26),
                            (107, 1, 13, 27)]
    assert e.stops("X").size == 0


def test_buy_stops_release_before_sell_stops_when_both_are_elected():
    e = eng()
    # the buy stop-limit rests when released (nothing offered at 95), so 100 stays the last price
    e.process(cat(sell(1, 0, 1, order_type=STOP, stop_price=100, trader=1),
                  buy(2, 95, 1, order_type=STOP_LIMIT, stop_price=100, trader=1)))
    e.process(cat(sell(3, 100, 1, trader=2), buy(4, 90, 5, trader=2),
                     sell(5, 110, 5, trader=2)))
    r = e.process(buy(6, 100, 1, trader=3))
    assert [int(x["order_id"]) for x in r.events if x["event"] == TRIG] == [2, 1]


def test_a_cascade_of_stops_runs_within_the_triggering_message():
    """Each released stop's trades can elect the next stop (CME Globex: a cascade), all inside the
    message that started it, carrying its seq and ts."""
    e = eng()
    for k in range(5):   # sell stops at 99, 98 ... each sells into the next bid down
        e.process(sell(10 + k, 0, 1, order_type=STOP, stop_price=99 - k, trader=1))
    e.process(cat(*[buy(20 + k, 99 - k, 1, trader=2) for k in range(6)]))
    r = e.process(sell(30, 99, 1, trader=3, ts=7))
    assert [int(x["order_id"]) for x in r.events if x["event"] == TRIG] == [10, 11, 12, 13, 14]
    assert [int(f["price"]) for f in r.fills] == [99, 98, 97, 96, 95, 94]
    assert set(r.events["seq"]) == {e.seq} and set(r.fills["ts"]) == {7}


def test_a_pending_stop_can_be_cancelled_without_an_l2_row():
    e = eng()
    e.process(buy(1, 0, 5, order_type=STOP, stop_price=110))
    r = e.process(cancel(1))
    assert ev(r) == [(1, CXL, Reason.USER_CANCEL, 0, 0)] and l2(r) == []
    assert e.stops("X").size == 0 and e.live_orders == 0
    e.process(cat(sell(2, 110, 1, trader=2), buy(3, 110, 1, trader=3)))
    assert e.orders("X").size == 0


def test_modifying_a_pending_stop_moves_its_trigger_and_keeps_place_only_when_allowed():
    e = eng()
    e.process(cat(buy(1, 0, 5, order_type=STOP, stop_price=110),
                     buy(2, 0, 5, order_type=STOP, stop_price=110),
                     buy(3, 120, 5, order_type=STOP_LIMIT, stop_price=115)))
    r = e.process(modify(1, 1, 4, stop_price=110))      # lower qty, same trigger: keeps place
    assert ev(r) == [(1, MOD, 0, 0, 4)] and l2(r) == []
    assert ids(e.stops("X")) == [1, 2, 3]
    e.process(modify(1, 1, 6, stop_price=110))          # higher qty: to the back
    assert ids(e.stops("X")) == [2, 1, 3]
    e.process(modify(3, 125, 5, stop_price=105))        # new trigger and limit
    st = e.stops("X")
    assert ids(st) == [3, 2, 1] and int(st[0]["price"]) == 125
    assert int(st[0]["stop_price"]) == 105 and int(st[1]["price"]) == 0


def test_a_modify_that_trades_releases_stops():
    e = eng()
    e.process(cat(sell(1, 0, 2, order_type=STOP, stop_price=100, trader=1),
                     buy(2, 100, 1, trader=2), buy(3, 95, 5, trader=2),
                     sell(4, 101, 1, trader=3)))
    r = e.process(modify(4, 100, 1, trader=3))
    assert [int(x["order_id"]) for x in r.events if x["event"] == TRIG] == [1]


# ---- icebergs ------------------------------------------------------------------------------------

def test_iceberg_shows_only_its_display_quantity():
    """CME Globex iceberg: an order for 50 with display quantity 10 shows 10 in the book."""
    e = eng()
    r = e.process(sell(1, 100, 50, display_qty=10))
    assert l2(r) == [(1, 100, 10, 1)]
    o = e.orders("X")[0]
    assert (int(o["qty"]), int(o["hidden"]), int(o["display_qty"])) == (10, 40, 10)
    assert e.depth("X")[1]["qty"].tolist() == [10]


def test_iceberg_refills_to_the_back_of_the_queue():
    """CME Globex iceberg: when the displayed 10 of order A (50, display 10) is filled, A's next
    10 are shown at the back of the 100 queue, behind order B that arrived after A; an aggressor
    for 25 takes A's 10, then B's 10, then 5 of A's new slice."""
    e = eng()
    e.process(cat(sell(1, 100, 50, display_qty=10, trader=1), sell(2, 100, 10, trader=2)))
    r = e.process(buy(3, 100, 25, trader=3))
    assert fills(r) == [(100, 10, 3, 1), (100, 10, 3, 2), (100, 5, 3, 1)]
    assert ev(r) == [(3, ACC, 0, 0, 25), (3, PART, 0, 10, 15), (1, PART, 0, 10, 40),
                     (3, PART, 0, 20, 5), (2, FILL, 0, 10, 0), (3, FILL, 0, 25, 0),
                     (1, PART, 0, 15, 35)]
    assert l2(r) == [(1, 100, 5, 1)]
    o = e.orders("X")[0]
    assert (int(o["qty"]), int(o["hidden"])) == (5, 30)


def test_an_iceberg_alone_at_its_level_keeps_matching_slice_after_slice():
    e = eng()
    e.process(sell(1, 100, 25, display_qty=10))
    r = e.process(buy(2, 100, 25, trader=2))
    assert [int(f["qty"]) for f in r.fills] == [10, 10, 5]
    assert l2(r) == [(1, 100, 0, 0)] and e.orders("X").size == 0


def test_an_incoming_iceberg_matches_its_whole_quantity_and_rests_a_slice():
    e = eng()
    e.process(sell(1, 100, 15, trader=1))
    r = e.process(buy(2, 100, 40, display_qty=10, trader=2))
    assert fills(r) == [(100, 15, 2, 1)]
    o = e.orders("X")[0]
    assert (int(o["qty"]), int(o["hidden"])) == (10, 15)
    assert l2(r)[-1] == (0, 100, 10, 1)


def test_modifying_an_iceberg_down_takes_the_reserve_first():
    e = eng()
    e.process(cat(buy(1, 100, 50, display_qty=10), buy(2, 100, 5, trader=2)))
    r = e.process(modify(1, 100, 45))
    assert ev(r) == [(1, MOD, 0, 0, 45)] and l2(r) == []    # display unchanged: no row
    r = e.process(modify(1, 100, 8))
    assert l2(r) == [(0, 100, 13, 2)]
    o = e.orders("X")
    assert ids(o) == [1, 2] and (int(o[0]["qty"]), int(o[0]["hidden"])) == (8, 0)
    r = e.process(modify(1, 100, 30))                       # up: back of the queue, shows 10
    assert ids(e.orders("X")) == [2, 1] and l2(r) == [(0, 100, 15, 2)]
    assert int(e.orders("X")[1]["hidden"]) == 20


# ---- DAY and GTD ---------------------------------------------------------------------------------

def test_gtd_order_expires_before_the_first_message_at_or_after_its_expiry():
    e = eng()
    e.process(buy(1, 100, 5, tif=Tif.GTD, expire_ts=1000, ts=10))
    r = e.process(sell(2, 200, 1, ts=999, trader=2))
    assert e.orders("X").size == 2
    r = e.process(sell(3, 100, 1, ts=1000, trader=2))
    assert ev(r)[0] == (1, CXL, Reason.EXPIRED, 0, 0) and l2(r)[0] == (0, 100, 0, 0)
    assert r.fills.size == 0 and set(r.events["seq"]) == {e.seq}   # never filled after expiry


def test_day_order_expires_at_the_symbols_next_session_close():
    e = eng()
    # session close 21:00 UTC (the symbol option's row; Engine.add_symbol takes it too)
    e.state.symbols["session_close"][0] = 21 * 3600 * 10**9
    entry = 3 * DAY_NS + 22 * 3600 * 10**9        # entered after that day's close
    e.process(buy(1, 100, 5, tif=Tif.DAY, ts=entry))
    close = 4 * DAY_NS + 21 * 3600 * 10**9
    assert int(e.orders("X")[0]["expire_ts"]) == close
    e.process(msg(kind=Kind.CANCEL, order_id=99, qty=0, ts=close - 1))
    assert e.orders("X").size == 1
    r = e.process(msg(kind=Kind.CANCEL, order_id=99, qty=0, ts=close))
    assert ev(r) == [(1, CXL, Reason.EXPIRED, 0, 0), (99, REJ, Reason.UNKNOWN_ID, 0, 0)]


def test_a_rejected_message_still_expires_orders():
    e = eng()
    e.process(buy(1, 100, 5, tif=Tif.GTD, expire_ts=50))
    bad = msg(kind=7, ts=60)
    r = e.process(bad)
    assert ev(r) == [(1, CXL, Reason.EXPIRED, 0, 0), (1, REJ, Reason.BAD_KIND, 0, 0)]


def test_orders_expire_in_expiry_then_symbol_then_id_order_and_stops_expire_while_pending():
    e = eng()
    e.add_symbol("Y")
    e.process(cat(buy(5, 100, 1, tif=Tif.GTD, expire_ts=20, symbol=1),
                     buy(9, 100, 1, tif=Tif.GTD, expire_ts=20),
                     buy(7, 100, 1, tif=Tif.GTD, expire_ts=20, symbol=1),
                     buy(3, 0, 1, order_type=STOP, stop_price=200, tif=Tif.GTD, expire_ts=10),
                     buy(4, 100, 1, tif=Tif.GTD, expire_ts=30)))
    r = e.process(sell(8, 500, 1, ts=25, trader=2))
    assert [(int(x["symbol"]), int(x["order_id"])) for x in r.events[:4]] == [
        (0, 3), (0, 9), (1, 5), (1, 7)]
    assert all(r.events["reason"][:4] == Reason.EXPIRED)
    assert len(r.l2) == 4          # the pending stop's expiry writes no L2 row
    assert e.stops("X").size == 0 and ids(e.orders("X")) == [4, 8]


def test_a_filled_or_cancelled_order_leaves_the_expiry_heap():
    e = eng()
    e.process(cat(buy(1, 100, 5, tif=Tif.GTD, expire_ts=100),
                     buy(2, 99, 5, tif=Tif.DAY), sell(3, 100, 5, trader=2), cancel(2)))
    assert e.state.meta[14] == 0     # M_EXPIRY_N
    r = e.process(buy(4, 90, 1, ts=10**18))
    assert [int(x["event"]) for x in r.events] == [ACC]


def test_modify_to_a_new_price_keeps_the_expiry():
    e = eng()
    e.process(buy(1, 100, 5, tif=Tif.GTD, expire_ts=100))
    e.process(modify(1, 101, 5))
    assert int(e.orders("X")[0]["expire_ts"]) == 100
    r = e.process(sell(2, 200, 1, ts=100, trader=2))
    assert ev(r)[0] == (1, CXL, Reason.EXPIRED, 0, 0)


def test_a_released_gtd_stop_limit_rests_with_its_expiry():
    e = eng()
    e.process(cat(buy(1, 101, 5, order_type=STOP_LIMIT, stop_price=100, tif=Tif.GTD,
                         expire_ts=500, trader=1),
                     sell(2, 100, 1, trader=2), buy(3, 100, 1, trader=3)))
    o = e.orders("X")
    assert ids(o) == [1] and int(o[0]["expire_ts"]) == 500 and int(o[0]["tif"]) == Tif.GTD
    r = e.process(sell(4, 300, 1, ts=500, trader=2))
    assert ev(r)[0] == (1, CXL, Reason.EXPIRED, 0, 0)


# ---- minimum quantity ----------------------------------------------------------------------------

def test_min_qty_order_that_can_fill_its_minimum_matches_and_rests_the_rest():
    e = eng()
    e.process(sell(1, 100, 4, trader=2))
    r = e.process(buy(2, 100, 10, min_qty=3))
    assert fills(r) == [(100, 4, 2, 1)]
    o = e.orders("X")[0]
    assert int(o["order_id"]) == 2 and int(o["qty"]) == 6


# ---- checkpoints ---------------------------------------------------------------------------------

def _rich_flow(n=400, seed=3):
    """A flow mixing limits, markets, stops, stop-limits, icebergs, DAY/GTD orders, cancels and
    modifies over two symbols, with ts rising so that orders expire along the way."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n, ORDER_DTYPE)
    live = {0: [], 1: []}
    last = {0: 100, 1: 100}
    for i in range(n):
        m = out[i]
        sym = int(rng.integers(0, 2))
        m["ts"] = i * 10
        m["symbol"] = sym
        m["trader"] = int(rng.integers(1, 4))
        u = rng.random()
        if u < 0.15 and live[sym]:
            oid = live[sym][int(rng.integers(0, len(live[sym])))]
            m["kind"], m["order_id"] = Kind.CANCEL, oid
            continue
        if u < 0.25 and live[sym]:
            oid = live[sym][int(rng.integers(0, len(live[sym])))]
            m["kind"], m["order_id"] = Kind.MODIFY, oid
            m["price"], m["qty"] = int(rng.integers(95, 106)), int(rng.integers(1, 20))
            continue
        oid = 1000 + i
        side = int(rng.integers(0, 2))
        m["order_id"], m["side"], m["qty"] = oid, side, int(rng.integers(1, 20))
        m["price"] = int(rng.integers(95, 106))
        v = rng.random()
        if v < 0.1:
            m["order_type"] = MARKET
        elif v < 0.25:
            m["order_type"] = STOP if v < 0.18 else STOP_LIMIT
            # triggers away from the last price so the stop is not already reached
            m["stop_price"] = last[sym] + (1 + int(rng.integers(0, 4))) * (1 if side == 0 else -1)
            if m["order_type"] == STOP:
                m["price"] = 0
        elif v < 0.4:
            m["display_qty"] = int(rng.integers(1, 5))
        t = rng.random()
        if m["order_type"] != MARKET and t < 0.2:
            m["tif"], m["expire_ts"] = Tif.GTD, i * 10 + int(rng.integers(1, 500))
        elif m["order_type"] != MARKET and t < 0.3:
            m["tif"] = Tif.DAY
        live[sym].append(oid)
    return out


def test_checkpoint_mid_flow_restores_identical_outputs_and_bytes():
    flow = _rich_flow()
    a = eng()
    a.add_symbol("Y")
    head = a.process(flow[:200])
    assert len(head.events) > 0
    blob = a.checkpoint()
    b = Engine.restore(blob)
    assert b.checkpoint() == blob and a.checkpoint_equals(blob) and b.checkpoint_equals(blob)
    ra, rb = a.process(flow[200:]), b.process(flow[200:])
    for t in ("fills", "l2", "events"):
        assert getattr(ra, t).tobytes() == getattr(rb, t).tobytes()
    assert a.checkpoint() == b.checkpoint()


def test_checkpoint_holds_pending_stops_icebergs_and_expiries_in_order():
    e = eng()
    e.process(cat(buy(1, 100, 30, display_qty=10, tif=Tif.GTD, expire_ts=99),
                     sell(2, 0, 5, order_type=STOP, stop_price=90),
                     sell(3, 0, 5, order_type=STOP, stop_price=95),
                     buy(4, 120, 5, order_type=STOP_LIMIT, stop_price=110, tif=Tif.DAY)))
    rows_ = e._collect([0])
    assert rows_["order_id"].tolist() == [1, 4, 3, 2]
    assert rows_["pending"].tolist() == [0, 1, 1, 1]
    assert rows_["hidden"].tolist()[0] == 20 and rows_["display_qty"].tolist()[0] == 10
    assert rows_["expire_ts"].tolist()[:2] == [99, DAY_NS]
    b = Engine.restore(e.checkpoint())
    assert ids(b.stops("X")) == [4, 3, 2]
    r = b.process(sell(9, 300, 1, ts=99, trader=2))
    assert ev(r)[0] == (1, CXL, Reason.EXPIRED, 0, 0)


def test_a_version_1_checkpoint_still_restores():
    from exsim.exchange import checkpoint as ckpt
    e = eng()
    e.process(cat(buy(1, 100, 5), sell(2, 101, 3, trader=2)))
    v2 = e.checkpoint()
    head, rows_, _ = ckpt.frame(v2)
    old = np.zeros(len(rows_), ckpt.V1_ROW_DTYPE)
    for name in ckpt.V1_ROW_DTYPE.names:
        old[name] = rows_[name]
    import struct
    import crc32c
    body = (ckpt.MAGIC + struct.pack("<II", 1, len(head)) + head
            + struct.pack("<Q", len(old)) + old.tobytes())
    v1 = body + struct.pack("<I", crc32c.crc32c(body))
    b = Engine.restore(v1)
    assert b.checkpoint() == v2 and e.checkpoint_equals(v1) and b.checkpoint_equals(v1)


@pytest.mark.parametrize("field,value,words", [
    ("hidden", 5, "reserve"),
    ("display_qty", 2, "display"),
    ("expire_ts", 7, "expire_ts"),
    ("stop_price", 3, "stop_price"),
    ("pending", 2, "pending"),
])
def test_check_rows_names_a_bad_new_field(field, value, words):
    from exsim.exchange import checkpoint as ckpt
    import struct
    import crc32c
    e = eng()
    e.process(buy(1, 100, 5))
    head, rows_, _ = ckpt.frame(e.checkpoint())
    rows_ = rows_.copy()
    rows_[0][field] = value
    blob = ckpt.encode(__import__("json").loads(head), rows_)
    with pytest.raises(CorruptionError, match=words):
        Engine.restore(blob)


def test_a_pending_stop_out_of_release_order_is_refused():
    from exsim.exchange import checkpoint as ckpt
    e = eng()
    e.process(cat(buy(1, 0, 5, order_type=STOP, stop_price=110),
                     buy(2, 0, 5, order_type=STOP, stop_price=120)))
    head, rows_, _ = ckpt.frame(e.checkpoint())
    rows_ = rows_[::-1].copy()
    with pytest.raises(CorruptionError, match="out of order"):
        Engine.restore(ckpt.encode(__import__("json").loads(head), rows_))


# ---- growth paths --------------------------------------------------------------------------------

def _one_by_one_equals_batch(flow, make):
    """Process ``flow`` as one batch and one message at a time into tiny output buffers."""
    a, b = make(), make()
    whole = a.process(flow)
    parts = [b.process(flow[i:i + 1], out=tiny_buffers()) for i in range(len(flow))]
    for t in ("fills", "l2", "events"):
        got = np.concatenate([getattr(p, t) for p in parts])
        assert got.tobytes() == getattr(whole, t).tobytes(), t
    assert a.checkpoint() == b.checkpoint()
    return whole


def test_many_stops_and_a_big_cascade_give_the_same_outputs_as_one_batch():
    def make():
        e = Engine(ownership=False, capacity=0)
        e.add_symbol("X")
        return e
    stops = [sell(100 + k, 0, 1, order_type=STOP, stop_price=1000 - k, trader=1)
             for k in range(300)]
    bids = [buy(1000 + k, 1000 - k, 1, trader=2) for k in range(301)]
    flow = cat(*stops, *bids, sell(5000, 1000, 1, trader=3))
    whole = _one_by_one_equals_batch(flow, make)
    assert (whole.events["event"] == TRIG).sum() == 300


def test_many_expiries_at_once_with_tiny_buffers_give_the_same_outputs_as_one_batch():
    def make():
        e = Engine(ownership=False, capacity=0)
        e.add_symbol("X")
        return e
    flow = cat(*[buy(k + 1, 100 + k % 50, 1, tif=Tif.GTD, expire_ts=1000 + k % 7)
                    for k in range(500)],
                  *[sell(900 + k, 1000 + k, 1, trader=2, display_qty=1, tif=Tif.DAY)
                    for k in range(50)],
                  sell(5000, 2000, 1, ts=DAY_NS, trader=2))
    whole = _one_by_one_equals_batch(flow, make)
    assert (whole.events["reason"] == Reason.EXPIRED).sum() == 550


def test_iceberg_refills_swept_by_a_big_order_fit_tiny_buffers():
    def make():
        e = Engine(ownership=False, capacity=0)
        e.add_symbol("X")
        return e
    flow = cat(*[sell(k + 1, 100 + k % 3, 40, display_qty=1, trader=1) for k in range(20)],
                  buy(100, 200, 800, trader=2))
    whole = _one_by_one_equals_batch(flow, make)
    assert len(whole.fills) == 800


# ---- the FOK / min_qty walk (exchange.fillable) --------------------------------------------------

def _reaches(e, qty, trader=9, stp=0, limit=100):
    from exsim.exchange.fillable import fillable
    s = e.state
    return bool(fillable(s.books, s.levels, s.arena, s.ladder_levels, 1, Side.BUY, False, limit,
                         qty, trader, stp, 0, MAX_PRICE))   # no band


def test_the_fok_walk_counts_reserve_when_no_self_trade_is_in_the_way():
    e = eng()
    e.process(cat(sell(1, 100, 30, display_qty=5, trader=1), sell(2, 101, 5, trader=1)))
    assert _reaches(e, 30) and not _reaches(e, 31)
    assert _reaches(e, 35, limit=101)


def test_the_fok_walk_under_cancel_resting_skips_own_orders_and_their_reserve():
    e = eng()
    e.process(cat(sell(1, 100, 30, display_qty=5, trader=9), sell(2, 100, 7, trader=1)))
    assert _reaches(e, 7, stp=1) and not _reaches(e, 8, stp=1)


def test_the_fok_walk_under_cancel_incoming_stops_at_own_order_counting_shown_before_it():
    """The iceberg ahead of the trader's own order refills behind it, so only its shown 5
    count; matching would stop at the own order."""
    e = eng()
    e.process(cat(sell(1, 100, 30, display_qty=5, trader=1), sell(2, 100, 7, trader=9),
                  sell(3, 100, 50, trader=1)))
    for stp in (2, 3):
        assert _reaches(e, 5, stp=stp) and not _reaches(e, 6, stp=stp)


def test_a_day_order_entered_within_a_day_of_the_int64_clock_end_expires_at_its_largest_value():
    """A DAY close past 2^63 - 1 is clamped there (semantics.md, Symbols), never wrapped to a
    negative time that would expire the order at the next message."""
    from exsim.exchange import Engine
    from exsim.exchange.schema import Event

    eng = Engine()
    eng.add_symbol("X", session_close=0)
    ts = (1 << 63) - 11
    eng.submit("X", "buy", qty=5, price=100, tif="day", ts=ts, trader=1)
    assert int(eng.orders("X")["expire_ts"][0]) == (1 << 63) - 1
    res = eng.submit("X", "sell", qty=1, price=200, ts=ts + 5, trader=2)
    assert Event.CANCELLED not in res.events["event"].tolist()
    assert eng.live_orders == 2
