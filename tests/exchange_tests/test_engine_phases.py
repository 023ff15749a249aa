"""The engine's trading phases (docs/semantics.md, "Trading phases, auctions and price bands"):
what each phase accepts, PHASE validation, calls and their indicative, the uncross at the end
of an auction, static and dynamic bands with the re-opening auction a breach starts, and that
outputs are the same whatever the output buffers' size.

Needs the phase engine (exchange/kernels.py of issue 16) and exchange/auction.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import Engine, UsageError
from exsim.exchange.protocol import OutputBuffers
from exsim.exchange.schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, ORDER_DTYPE, Event, Kind, OrderType, Phase, Reason, Side, Tif,
)


def _events(res, kind=None):
    ev = res.events
    return ev if kind is None else ev[ev["event"] == kind]


def _reasons(res):
    return [int(r) for r in res.events["reason"]]


def _engine(**opts):
    eng = Engine()
    eng.add_symbol("X", **opts)
    return eng


# ---------------------------------------------------------------- acceptance by phase
def test_a_call_rests_crossing_orders_without_matching_and_publishes_the_indicative():
    eng = _engine(phase="pre_open")
    assert eng.phase("X") is Phase.PRE_OPEN
    r1 = eng.submit("X", "buy", price=101, qty=5, trader=1)
    assert len(r1.fills) == 0 and len(_events(r1, Event.INDICATIVE)) == 0   # nothing crosses
    r2 = eng.submit("X", "sell", price=100, qty=3, trader=2)
    assert len(r2.fills) == 0
    ind = _events(r2, Event.INDICATIVE)
    assert len(ind) == 1 and r2.events[-1]["event"] == Event.INDICATIVE
    # volume 3, buy surplus 2: the highest of the max-volume prices
    assert (int(ind["price"][0]), int(ind["filled_qty"][0]), int(ind["leaves_qty"][0])) == \
        (101, 3, 2)
    assert ind["phase"][0] == Phase.PRE_OPEN
    assert eng.indicative("X") == (101, 3, 2)
    bids, asks = eng.depth("X")
    assert bids["price"][0] == 101 and asks["price"][0] == 100   # the call book may cross
    # an unchanged indicative is not published again
    r3 = eng.submit("X", "buy", price=90, qty=1, trader=3)
    assert len(_events(r3, Event.INDICATIVE)) == 0


def test_a_market_order_rests_in_a_call_at_its_call_price_and_cannot_be_modified():
    eng = _engine(phase="pre_open")
    res = eng.submit("X", "buy", qty=4, order_type="market", order_id=7)
    assert [int(e) for e in res.events["event"]] == [Event.ACCEPTED]
    assert res.l2["price"][0] == CALL_MARKET_PRICE[Side.BUY]
    bids, _ = eng.depth("X")
    assert bids["price"][0] == CALL_MARKET_PRICE[Side.BUY] and bids["qty"][0] == 4
    o = eng.orders("X")
    assert o["order_type"][0] == OrderType.MARKET and o["price"][0] == CALL_MARKET_PRICE[0]
    res = eng.modify("X", 7, price=100, qty=4)
    assert _reasons(res) == [Reason.NOT_IN_CALL]
    sell = eng.submit("X", "sell", qty=2, order_type="market")
    assert sell.l2["price"][0] == CALL_MARKET_PRICE[Side.SELL]


@pytest.mark.parametrize("kw", [dict(tif="ioc"), dict(tif="fok"), dict(post_only=True),
                                dict(min_qty=1, qty=2)])
def test_a_call_refuses_ioc_fok_post_only_and_min_qty(kw):
    eng = _engine(phase="pre_close")
    args = dict(price=100, qty=5) | kw
    res = eng.submit("X", "buy", **args)
    assert _reasons(res) == [Reason.NOT_IN_CALL]
    assert eng.live_orders == 0


@pytest.mark.parametrize("phase,reason", [("halted", Reason.SYMBOL_HALTED),
                                          ("closed", Reason.SYMBOL_CLOSED)])
def test_halted_and_closed_refuse_new_and_modify_but_accept_cancel(phase, reason):
    eng = _engine()
    eng.submit("X", "buy", price=100, qty=5, order_id=1)
    eng.set_phase("X", phase)
    assert _reasons(eng.submit("X", "buy", price=100, qty=5, order_id=2)) == [reason]
    assert _reasons(eng.modify("X", 1, price=99, qty=5)) == [reason]
    res = eng.cancel("X", 1)
    assert res.events["event"][0] == Event.CANCELLED and res.events["phase"][0] == int(
        Phase[phase.upper()])


def test_stops_wait_in_a_call_and_are_released_only_in_continuous():
    eng = _engine()
    eng.submit("X", "sell", price=100, qty=1, trader=1)
    eng.submit("X", "buy", price=100, qty=1, trader=2)            # last price 100
    eng.submit("X", "buy", qty=2, order_type="stop", stop_price=102, trader=3, order_id=50)
    eng.set_phase("X", "pre_open")
    eng.submit("X", "sell", price=102, qty=2, trader=4)
    eng.submit("X", "buy", price=102, qty=2, trader=5)
    assert len(eng.stops("X")) == 1
    res = eng.set_phase("X", "opening_auction")                    # uncross at 102 (2 lots)
    assert eng.phase("X") is Phase.CONTINUOUS
    assert (res.fills["aggressor_side"] == AUCTION_SIDE).all() and res.fills["price"][0] == 102
    trig = _events(res, Event.TRIGGERED)
    assert list(trig["order_id"]) == [50]                          # released after the uncross
    kinds = [int(e) for e in res.events["event"]]
    assert kinds.index(Event.PHASE) < kinds.index(Event.TRIGGERED)


# ---------------------------------------------------------------- PHASE validation
@pytest.mark.parametrize("fields,reason", [
    (dict(phase=8), Reason.BAD_PHASE),
    (dict(phase=255), Reason.BAD_PHASE),
    (dict(phase=2, price=-1), Reason.BAD_PRICE),
    (dict(phase=2, price=10_000), Reason.PRICE_OUT_OF_BAND),
    (dict(phase=2, expire_ts=50), Reason.BAD_EXPIRY),
    (dict(phase=7, expire_ts=10), Reason.BAD_EXPIRY),     # not after ts
])
def test_phase_messages_are_validated_and_a_rejected_one_changes_nothing(fields, reason):
    eng = Engine()
    eng.add_symbol("X", min_price=1, max_price=1000)
    m = np.zeros(1, ORDER_DTYPE)
    m["kind"] = Kind.PHASE
    m["ts"] = 10
    for k, v in fields.items():
        m[k] = v
    res = eng.process(m)
    assert [int(e) for e in res.events["event"]] == [Event.REJECTED]
    assert _reasons(res) == [reason]
    assert eng.phase("X") is Phase.CONTINUOUS


def test_set_phase_refuses_unknown_phases_and_symbols_with_usage_errors():
    eng = _engine()
    with pytest.raises(UsageError, match="phase"):
        eng.set_phase("X", "lunch")
    with pytest.raises(UsageError, match="symbol"):
        eng.set_phase("Y", "halted")
    with pytest.raises(UsageError, match="phase"):
        eng.add_symbol("Z", phase="opening_auction")
    with pytest.raises(UsageError, match="static_band_bps"):
        eng.add_symbol("Z", static_band_bps=-1)
    with pytest.raises(UsageError, match="interruption_ns"):
        eng.add_symbol("Z", interruption_ns=0)


def test_phase_options_are_in_config_and_old_configs_load_continuous():
    eng = Engine()
    eng.add_symbol("X", reference_price=100, static_band_bps=500, dynamic_band_bps=200,
                   interruption_ns=5, phase="pre_open")
    cfg = eng.config()
    again = Engine.from_config(cfg)
    assert again.config() == cfg and again.phase("X") is Phase.PRE_OPEN
    old = {"stp": "none", "symbols": [{"name": "X", "tick_size": 1, "min_price": 1,
                                       "max_price": 1000}]}
    assert Engine.from_config(old).phase("X") is Phase.CONTINUOUS


# ---------------------------------------------------------------- bands
def test_static_band_rejects_limits_outside_it_on_entry_and_modify():
    eng = _engine(reference_price=1000, static_band_bps=100)        # [990, 1010]
    assert _reasons(eng.submit("X", "buy", price=1011, qty=1)) == [Reason.OUTSIDE_STATIC_BAND]
    assert _reasons(eng.submit("X", "buy", price=989, qty=1)) == [Reason.OUTSIDE_STATIC_BAND]
    ok = eng.submit("X", "buy", price=1010, qty=1, order_id=5)
    assert ok.events["event"][0] == Event.ACCEPTED
    assert _reasons(eng.modify("X", 5, price=985, qty=1)) == [Reason.OUTSIDE_STATIC_BAND]
    # a market order has no limit price: no static band
    assert eng.submit("X", "sell", qty=1, order_type="market").fills["qty"].sum() == 1


def _breach_book():
    eng = _engine(dynamic_band_bps=100, interruption_ns=1_000)       # 1 % around the last trade
    eng.submit("X", "sell", price=1000, qty=1, trader=1, ts=1)
    eng.submit("X", "buy", price=1000, qty=1, trader=2, ts=2)        # last 1000: band [990, 1010]
    eng.submit("X", "sell", price=1005, qty=2, trader=1, ts=3, order_id=11)
    eng.submit("X", "sell", price=1020, qty=5, trader=1, ts=4, order_id=12)
    return eng


def test_fok_counts_only_levels_inside_the_dynamic_band():
    eng = _breach_book()
    res = eng.submit("X", "buy", price=1020, qty=3, tif="fok", trader=3, ts=5)
    assert _reasons(res) == [Reason.FOK_CANNOT_FILL]
    assert eng.phase("X") is Phase.CONTINUOUS
    res = eng.submit("X", "buy", price=1020, qty=2, tif="fok", trader=3, ts=6)
    assert res.fills["qty"].sum() == 2 and eng.phase("X") is Phase.CONTINUOUS


def test_a_full_day_with_a_band_breach_and_its_reopening_end():
    eng = Engine()
    eng.add_symbol("X", dynamic_band_bps=100, interruption_ns=1_000, phase="closed")
    assert _reasons(eng.submit("X", "buy", price=1000, qty=1, ts=1)) == [Reason.SYMBOL_CLOSED]
    eng.set_phase("X", "pre_open", ts=10, reference_price=1000)
    eng.submit("X", "buy", price=1002, qty=4, trader=1, ts=11, order_id=1)
    eng.submit("X", "sell", qty=3, order_type="market", trader=2, ts=12, order_id=2)
    eng.submit("X", "sell", price=1001, qty=2, trader=3, ts=13, order_id=3)
    assert eng.indicative("X")[1] == 4
    # opening auction: 1002 and 1001 both execute 4 with a sell surplus of 1: the lowest
    res = eng.set_phase("X", "opening_auction", ts=20)
    unc = _events(res, Event.UNCROSS)
    assert len(unc) == 1 and unc["phase"][0] == Phase.OPENING_AUCTION
    assert (int(unc["price"][0]), int(unc["filled_qty"][0]), int(unc["leaves_qty"][0])) == \
        (1001, 4, -1)
    assert (res.fills["price"] == 1001).all() and list(res.fills["qty"]) == [3, 1]
    assert res.fills["sell_order_id"][0] == 2                       # the market order first
    assert res.events[-1]["event"] == Event.PHASE and eng.phase("X") is Phase.CONTINUOUS
    assert int(res.events[-1]["price"]) == 1001                    # reference = auction price
    # continuous: band [991, 1011] around 1001; a buy sweeping to 1020 breaches at 1020
    eng.submit("X", "sell", price=1010, qty=1, trader=3, ts=30, order_id=4)
    eng.submit("X", "sell", price=1020, qty=3, trader=3, ts=31, order_id=5)
    res = eng.submit("X", "buy", price=1020, qty=3, trader=4, ts=40, order_id=6)
    assert list(res.fills["price"]) == [1001, 1010]                 # the band stops the third
    ph = _events(res, Event.PHASE)
    assert len(ph) == 1 and ph["reason"][0] == Reason.PRICE_BAND
    assert eng.phase("X") is Phase.REOPENING_AUCTION
    assert [(int(o["order_id"]), int(o["qty"])) for o in eng.orders("X")
            if o["side"] == Side.BUY] == [(6, 1)]                   # its rest rests in the call
    assert eng.indicative("X") == (1020, 1, -2)
    assert _events(res, Event.INDICATIVE)["price"][0] == 1020
    # before the first message at or after ts 40 + 1000 the re-opening auction uncrosses
    res = eng.submit("X", "buy", price=900, qty=1, trader=7, ts=1040, order_id=8)
    unc = _events(res, Event.UNCROSS)
    assert len(unc) == 1 and unc["phase"][0] == Phase.REOPENING_AUCTION
    ph = _events(res, Event.PHASE)
    assert ph["reason"][0] == Reason.AUCTION_END and eng.phase("X") is Phase.CONTINUOUS
    assert res.events["seq"][0] == eng.seq                         # rows of the message's seq
    assert list(res.fills["price"]) == [1020]
    kinds = [int(e) for e in res.events["event"]]
    assert kinds.index(Event.PHASE) < kinds.index(Event.ACCEPTED)
    # the close
    eng.set_phase("X", "pre_close", ts=2000)
    eng.submit("X", "sell", price=900, qty=1, trader=9, ts=2001)
    res = eng.set_phase("X", "closing_auction", ts=2002)
    assert _events(res, Event.UNCROSS)["phase"][0] == Phase.CLOSING_AUCTION
    assert res.fills["qty"].sum() == 1 and eng.phase("X") is Phase.CLOSED
    assert eng.indicative("X") == (0, 0, 0)


def test_a_breaching_ioc_is_cancelled_and_a_market_rests_at_its_call_price():
    eng = _breach_book()
    res = eng.submit("X", "buy", price=1020, qty=4, tif="ioc", trader=3, ts=5)
    assert list(res.fills["qty"]) == [2]
    canc = _events(res, Event.CANCELLED)
    assert canc["reason"][0] == Reason.IOC_UNFILLED
    eng2 = _breach_book()
    res = eng2.submit("X", "buy", qty=4, order_type="market", trader=3, ts=5, order_id=99)
    assert eng2.phase("X") is Phase.REOPENING_AUCTION
    bids, _ = eng2.depth("X")
    assert bids["price"][0] == CALL_MARKET_PRICE[Side.BUY] and bids["qty"][0] == 2


def test_a_halt_suspends_a_call_and_continuous_then_uncrosses_it():
    eng = _engine(phase="pre_open")
    eng.submit("X", "buy", price=100, qty=2)
    eng.submit("X", "sell", price=100, qty=2)
    res = eng.set_phase("X", "halted")
    assert len(_events(res, Event.UNCROSS)) == 0 and eng.indicative("X") == (0, 0, 0)
    res = eng.set_phase("X", "continuous")
    assert res.fills["qty"].sum() == 2 and _events(res, Event.UNCROSS)["phase"][0] == \
        Phase.OPENING_AUCTION


def test_expiry_in_a_call_republishes_the_indicative():
    eng = _engine(phase="pre_open")
    eng.submit("X", "buy", price=100, qty=2, tif="gtd", expire_ts=50, ts=1)
    eng.submit("X", "sell", price=100, qty=2, ts=2)
    assert eng.indicative("X") == (100, 2, 0)
    res = eng.submit("X", "sell", price=200, qty=1, ts=60)
    kinds = [int(e) for e in res.events["event"]]
    assert kinds[:2] == [Event.CANCELLED, Event.INDICATIVE]
    assert eng.indicative("X") == (0, 0, 0)


# ---------------------------------------------------------------- room and resumption
def _day_flow():
    rows = []

    def add(**f):
        m = np.zeros(1, ORDER_DTYPE)
        for k, v in f.items():
            m[k] = v
        rows.append(m)

    ts = 0
    add(kind=Kind.PHASE, phase=Phase.PRE_OPEN, price=1000, ts=ts)
    rng = np.random.default_rng(7)
    oid = 1
    for i in range(60):
        ts += 1
        side = int(rng.integers(2))
        market = rng.random() < 0.1
        add(kind=Kind.NEW, side=side, price=0 if market else 1000 + int(rng.integers(-5, 6)),
            qty=int(rng.integers(1, 5)), order_type=OrderType.MARKET if market else 0,
            order_id=oid, trader=int(rng.integers(1, 4)), ts=ts,
            display_qty=1 if (not market and rng.random() < 0.2) else 0)
        oid += 1
    ts += 1
    add(kind=Kind.PHASE, phase=Phase.OPENING_AUCTION, ts=ts)
    for i in range(60):
        ts += 1
        side = int(rng.integers(2))
        add(kind=Kind.NEW, side=side, price=1000 + int(rng.integers(-30, 31)),
            qty=int(rng.integers(1, 6)), order_id=oid, trader=int(rng.integers(1, 4)), ts=ts,
            tif=Tif.IOC if rng.random() < 0.2 else Tif.GTC)
        oid += 1
    ts += 5_000
    add(kind=Kind.PHASE, phase=Phase.PRE_CLOSE, ts=ts)
    add(kind=Kind.PHASE, phase=Phase.CLOSING_AUCTION, ts=ts + 1)
    return np.concatenate(rows)


def _day_engine():
    eng = Engine()
    eng.add_symbol("X", dynamic_band_bps=50, interruption_ns=100)
    return eng


def test_tiny_output_buffers_give_the_same_bytes_as_one_big_batch():
    flow = _day_flow()
    big = _day_engine().process(flow)
    assert len(big.fills) > 0
    assert (big.events["event"] == Event.UNCROSS).sum() >= 2
    tiny = OutputBuffers(0)
    tiny.fills = tiny.fills[:1]
    tiny.l2 = tiny.l2[:1]
    tiny.events = tiny.events[:1]
    small = _day_engine().process(flow, out=tiny)
    for name in ("fills", "l2", "events"):
        assert getattr(small, name).tobytes() == getattr(big, name).tobytes(), name
    one = _day_engine()
    parts = [one.process(flow[i: i + 1]) for i in range(len(flow))]
    for name in ("fills", "l2", "events"):
        assert np.concatenate([getattr(p, name) for p in parts]).tobytes() == \
            getattr(big, name).tobytes(), name


# ---------------------------------------------------------------- found by review
def test_a_phase_reference_price_off_the_tick_table_is_rejected_and_changes_nothing():
    eng = _engine(tick_table=[(1, 1), (100, 5)], reference_price=100)
    res = eng.set_phase("X", "pre_open", reference_price=102)
    assert [int(e) for e in res.events["event"]] == [Event.REJECTED]
    assert _reasons(res) == [Reason.OFF_TICK]
    assert eng.phase("X") is Phase.CONTINUOUS
    ok = eng.set_phase("X", "pre_open", reference_price=105)
    assert _events(ok, Event.PHASE)["price"].tolist() == [105]


def test_add_symbol_refuses_a_reference_price_off_its_tick_table():
    with pytest.raises(UsageError, match="reference_price.*tick table"):
        _engine(tick_table=[(1, 1), (100, 5)], reference_price=102)


def test_bands_at_the_top_of_the_price_range_do_not_wrap_around():
    top = 1 << 62
    eng = _engine(reference_price=top, static_band_bps=10_000, dynamic_band_bps=10_000)
    res = eng.submit("X", "sell", price=top, qty=1, trader=1)
    assert _reasons(res) == [Reason.NONE]            # inside [0, 2 * top]: accepted
    res = eng.submit("X", "buy", price=top, qty=1, trader=2)
    assert len(res.fills) == 1                        # the dynamic band around the last price too
    res = eng.submit("X", "sell", price=top, qty=1, trader=1)
    assert _reasons(res) == [Reason.NONE]
