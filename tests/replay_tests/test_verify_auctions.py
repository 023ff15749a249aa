"""verify's checks of the trading day: phases, uncrosses, the indicative uncross, price bands.

One trading day of one symbol is written by hand, row by row, exactly as docs/semantics.md
("Trading phases, auctions and price bands") says the engine reports it: a continuous order,
a pre-open call with a market order, the opening uncross, a continuous trade, a trade that would
print outside the dynamic band (a re-opening auction), its AUCTION_END uncross, the pre-close
call and the closing uncross, then a NEW refused while CLOSED. It verifies clean; then one
defect per rule is planted by editing its rows and verify must name that rule. These tests do
not need the engine to implement phases (test_verify_auctions_engine.py runs the engine).
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Event,
    Kind, OrderType, Phase, Reason, Tif,
)
from exsim.replay import verify_arrays
from exsim.replay.verification.uncross import allocate, uncross

BUY, SELL = 0, 1
LIMIT, MARKET = int(OrderType.LIMIT), int(OrderType.MARKET)
A = AUCTION_SIDE
MB, MS = CALL_MARKET_PRICE
P = Phase
CONFIG = {"stp": "none", "ownership": False, "symbols": [
    {"name": "X", "id": 0, "tick_size": 1, "min_price": 1, "max_price": 1 << 40,
     "reference_price": 98, "static_band_bps": 2000, "dynamic_band_bps": 500,
     "interruption_ns": 10, "phase": "continuous"}]}


class Day:
    """Rows of a hand-written run; ``phase`` is the symbol's phase written on events."""

    def __init__(self):
        self.orders, self.fills, self.l2, self.events = [], [], [], []
        self.seq, self.ts, self.trade, self.phase = 0, 0, 0, int(P.CONTINUOUS)

    def msg(self, ts, kind, oid=0, *, side=BUY, price=0, qty=0, otype=LIMIT, tif=Tif.GTC,
            phase=0, expire=0):
        self.seq += 1
        self.ts = ts
        self.orders.append((ts, oid, price, qty, 0, 1, int(kind), otype, int(tif), 0, side, 0, 0,
                            0, expire, int(phase)))
        return self

    def ev(self, oid, event, filled=0, leaves=0, reason=0, price=0, phase=None):
        self.events.append((self.seq, self.ts, oid, filled, leaves, 0, int(event), int(reason),
                            price, self.phase if phase is None else int(phase)))
        return self

    def fill(self, price, qty, buy, sell, aggressor):
        self.trade += 1
        self.fills.append((self.seq, self.ts, self.trade, price, qty, buy, sell, 0, 1, 1,
                           aggressor))
        return self

    def book(self, side, price, qty, count):
        self.l2.append((self.seq, self.ts, price, qty, 0, count, side))
        return self

    def enter(self, phase, price, reason=0):
        self.phase = int(phase)
        return self.ev(0, Event.PHASE, price=price, reason=reason)

    def arrays(self):
        return (np.array(self.orders, ORDER_DTYPE), np.array(self.fills, FILL_DTYPE),
                np.array(self.l2, L2_DTYPE), np.array(self.events, EVENT_DTYPE))


def trading_day() -> Day:
    """The clean day (seq numbers in the comments)."""
    d = Day()
    # 1 continuous: a sell rests (static band [79, 117] around 98)
    d.msg(1, Kind.NEW, 20, side=SELL, price=115, qty=1).ev(20, Event.ACCEPTED, leaves=1) \
        .book(SELL, 115, 1, 1)
    # 2 pre-open call
    d.msg(2, Kind.PHASE, phase=P.PRE_OPEN).enter(P.PRE_OPEN, 98)
    # 3-6 orders rest without matching; the indicative follows the book
    d.msg(3, Kind.NEW, 1, price=101, qty=10).ev(1, Event.ACCEPTED, leaves=10).book(BUY, 101, 10, 1)
    d.msg(4, Kind.NEW, 2, side=SELL, price=99, qty=6).ev(2, Event.ACCEPTED, leaves=6) \
        .book(SELL, 99, 6, 1).ev(0, Event.INDICATIVE, 6, 4, price=101)
    d.msg(5, Kind.NEW, 3, otype=MARKET, qty=3).ev(3, Event.ACCEPTED, leaves=3) \
        .book(BUY, MB, 3, 1).ev(0, Event.INDICATIVE, 6, 7, price=101)
    d.msg(6, Kind.NEW, 4, side=SELL, price=100, qty=8).ev(4, Event.ACCEPTED, leaves=8) \
        .book(SELL, 100, 8, 1).ev(0, Event.INDICATIVE, 13, -1, price=100)
    # 7 the opening uncross at 100: market first, then 101; sells 99 then 100
    d.msg(7, Kind.PHASE, phase=P.OPENING_AUCTION)
    d.ev(0, Event.UNCROSS, 13, -1, price=100, phase=P.OPENING_AUCTION)
    d.fill(100, 3, 3, 2, A).ev(3, Event.FILLED, 3, 0, price=100).ev(2, Event.PARTIAL, 3, 3,
                                                                    price=100)
    d.fill(100, 3, 1, 2, A).ev(1, Event.PARTIAL, 3, 7, price=100).ev(2, Event.FILLED, 6, 0,
                                                                     price=100)
    d.fill(100, 7, 1, 4, A).ev(1, Event.FILLED, 10, 0, price=100).ev(4, Event.PARTIAL, 7, 1,
                                                                     price=100)
    d.book(BUY, MB, 0, 0).book(BUY, 101, 0, 0).book(SELL, 99, 0, 0).book(SELL, 100, 1, 1)
    d.enter(P.CONTINUOUS, 100)
    # 8 continuous trade at 100 (dynamic band [95, 105] around 100)
    d.msg(8, Kind.NEW, 5, price=100, qty=1).ev(5, Event.ACCEPTED, leaves=1)
    d.fill(100, 1, 5, 4, BUY).ev(5, Event.FILLED, 1, 0, price=100) \
        .ev(4, Event.FILLED, 8, 0, price=100).book(SELL, 100, 0, 0)
    # 9 a sell rests at 110 (static band [80, 120] around 100)
    d.msg(9, Kind.NEW, 6, side=SELL, price=110, qty=5).ev(6, Event.ACCEPTED, leaves=5) \
        .book(SELL, 110, 5, 1)
    # 10 a buy at 112 would print 110, outside the band: re-opening auction until ts 20
    d.msg(10, Kind.NEW, 7, price=112, qty=2).ev(7, Event.ACCEPTED, leaves=2)
    d.enter(P.REOPENING_AUCTION, 100, Reason.PRICE_BAND)
    d.book(BUY, 112, 2, 1).ev(0, Event.INDICATIVE, 2, -3, price=110)
    # 11 at ts 20: the re-opening auction's end uncrosses first, then the message
    d.msg(20, Kind.NEW, 8, price=90, qty=1)
    d.ev(0, Event.UNCROSS, 2, -3, price=110, phase=P.REOPENING_AUCTION)
    d.fill(110, 2, 7, 6, A).ev(7, Event.FILLED, 2, 0, price=110).ev(6, Event.PARTIAL, 2, 3,
                                                                    price=110)
    d.book(BUY, 112, 0, 0).book(SELL, 110, 3, 1)
    d.enter(P.CONTINUOUS, 110, Reason.AUCTION_END)
    d.ev(8, Event.ACCEPTED, leaves=1).book(BUY, 90, 1, 1)
    # 12 pre-close call; 13 a market sell rests at its call price
    d.msg(21, Kind.PHASE, phase=P.PRE_CLOSE).enter(P.PRE_CLOSE, 110)
    d.msg(22, Kind.NEW, 9, side=SELL, otype=MARKET, qty=1).ev(9, Event.ACCEPTED, leaves=1) \
        .book(SELL, MS, 1, 1).ev(0, Event.INDICATIVE, 1, 0, price=90)
    # 14 the closing uncross at 90
    d.msg(23, Kind.PHASE, phase=P.CLOSING_AUCTION)
    d.ev(0, Event.UNCROSS, 1, 0, price=90, phase=P.CLOSING_AUCTION)
    d.fill(90, 1, 8, 9, A).ev(8, Event.FILLED, 1, 0, price=90).ev(9, Event.FILLED, 1, 0,
                                                                  price=90)
    d.book(BUY, 90, 0, 0).book(SELL, MS, 0, 0).enter(P.CLOSED, 90)
    # 15 closed: a NEW is refused; 16 a cancel is taken
    d.msg(24, Kind.NEW, 10, price=100, qty=1).ev(10, Event.REJECTED, reason=Reason.SYMBOL_CLOSED)
    d.msg(25, Kind.CANCEL, 6).ev(6, Event.CANCELLED, 2, 0, reason=Reason.USER_CANCEL) \
        .book(SELL, 110, 0, 0)
    return d


def check(tables, config=CONFIG):
    return verify_arrays(*tables, config=config)


def rules_at(report):
    return {(v.seq, v.rule) for v in report.violations}


def test_clean_day_verifies():
    report = check(trading_day().arrays())
    assert report.ok, report.violations
    assert {"phase", "trade_in_call", "auction_price", "auction_allocation", "indicative",
            "band"} <= set(report.summary["rules_checked"])


def _edit(table, pick, **fields):
    """A copy of ``table`` with ``fields`` set on the rows ``pick(rows)`` selects."""
    t = table.copy()
    sel = pick(t)
    assert np.count_nonzero(sel) >= 1
    for k, v in fields.items():
        t[k][sel] = v
    return t


def test_wrong_uncross_price_is_auction_price():
    o, f, l2, e = trading_day().arrays()
    e = _edit(e, lambda t: (t["seq"] == 7) & (t["event"] == Event.UNCROSS), price=101)
    report = check((o, f, l2, e))
    assert rules_at(report) == {(7, "auction_price")}


def test_wrong_uncross_volume_or_surplus_is_auction_price():
    o, f, l2, e = trading_day().arrays()
    e = _edit(e, lambda t: (t["seq"] == 14) & (t["event"] == Event.UNCROSS), leaves_qty=1)
    assert rules_at(check((o, f, l2, e))) == {(14, "auction_price")}


def test_auction_trade_at_another_price_is_auction_price():
    o, f, l2, e = trading_day().arrays()
    f = _edit(f, lambda t: t["trade_id"] == 2, price=101)
    assert rules_at(check((o, f, l2, e))) == {(7, "auction_price")}


def test_out_of_priority_allocation_is_auction_allocation():
    o, f, l2, e = trading_day().arrays()
    # the 101 buy is served before the market buy (totals unchanged)
    keep = f[f["seq"] != 7]
    wrong = np.array([(7, 7, 1, 100, 6, 1, 2, 0, 1, 1, A), (7, 7, 2, 100, 4, 1, 4, 0, 1, 1, A),
                      (7, 7, 3, 100, 3, 3, 4, 0, 1, 1, A)], FILL_DTYPE)
    f = np.concatenate([keep[keep["seq"] < 7], wrong, keep[keep["seq"] > 7]])
    rep = [(1, Event.PARTIAL, 6, 4), (2, Event.FILLED, 6, 0), (1, Event.FILLED, 10, 0),
           (4, Event.PARTIAL, 4, 4), (3, Event.FILLED, 3, 0), (4, Event.PARTIAL, 7, 1)]
    fills_ev = np.flatnonzero((e["seq"] == 7) & np.isin(e["event"], [Event.PARTIAL,
                                                                     Event.FILLED]))
    for j, (oid, et, filled, leaves) in zip(fills_ev, rep):
        e["order_id"][j], e["event"][j] = oid, et
        e["filled_qty"][j], e["leaves_qty"][j] = filled, leaves
    assert rules_at(check((o, f, l2, e))) == {(7, "auction_allocation")}


def test_continuous_fill_during_an_uncross_is_trade_in_call():
    o, f, l2, e = trading_day().arrays()
    f = _edit(f, lambda t: t["seq"] == 11, aggressor_side=BUY)
    assert rules_at(check((o, f, l2, e))) == {(11, "trade_in_call")}


def test_continuous_fill_in_a_call_is_trade_in_call():
    o, f, l2, e = trading_day().arrays()
    # the market buy of seq 5 matches at once in the pre-open call
    f = np.concatenate([f[f["seq"] < 5], np.array([(5, 5, 0, 99, 3, 3, 2, 0, 1, 1, BUY)],
                                                   FILL_DTYPE), f[f["seq"] > 5]])
    f["trade_id"] = np.arange(1, f.size + 1)
    at = int(np.flatnonzero(e["seq"] == 5)[0]) + 1
    extra = np.array([(5, 5, 3, 3, 0, 0, Event.FILLED, 0, 99, P.PRE_OPEN),
                      (5, 5, 2, 3, 3, 0, Event.PARTIAL, 0, 99, P.PRE_OPEN)], EVENT_DTYPE)
    e = np.concatenate([e[:at], extra, e[at:]])
    found = rules_at(check((o, f, l2, e)))
    assert (5, "trade_in_call") in found
    assert {r for s, r in found if s == 5} <= {"trade_in_call", "indicative"}


def test_fill_outside_the_dynamic_band_is_band():
    o, f, l2, e = trading_day().arrays()
    f = _edit(f, lambda t: t["seq"] == 8, price=106)
    found = rules_at(check((o, f, l2, e)))
    # the resting order's price and the buy's limit are 100: the kernel's resting_price and
    # price_limits, checked past the hand-over
    assert {(8, "band"), (8, "resting_price"), (8, "price_limits")} <= found
    assert {r for _, r in found} == {"band", "resting_price", "price_limits"}


def test_missing_interruption_is_band():
    o, f, l2, e = trading_day().arrays()
    # the 112 buy rests in CONTINUOUS against the 110 sell instead of interrupting
    e = e[~((e["seq"] == 10) & np.isin(e["event"], [Event.PHASE, Event.INDICATIVE]))]
    e["phase"][e["seq"] == 10] = P.CONTINUOUS
    found = rules_at(check((o, f, l2, e)))
    assert (10, "band") in found and {r for s, r in found if s == 10} == {"band"}


def test_interruption_without_a_breach_is_band():
    o, f, l2, e = trading_day().arrays()
    cfg = {**CONFIG, "symbols": [dict(CONFIG["symbols"][0], dynamic_band_bps=1500)]}
    found = rules_at(check((o, f, l2, e), cfg))
    assert (10, "band") in found and {r for _, r in found} == {"band"}


def test_missing_indicative_is_indicative():
    o, f, l2, e = trading_day().arrays()
    e = e[~((e["seq"] == 5) & (e["event"] == Event.INDICATIVE))]
    assert rules_at(check((o, f, l2, e))) == {(5, "indicative")}


def test_wrong_indicative_is_indicative():
    o, f, l2, e = trading_day().arrays()
    e = _edit(e, lambda t: (t["seq"] == 6) & (t["event"] == Event.INDICATIVE), price=101)
    assert {r for _, r in rules_at(check((o, f, l2, e)))} == {"indicative"}


def test_accepted_new_while_closed_is_phase():
    o, f, l2, e = trading_day().arrays()
    e = _edit(e, lambda t: t["seq"] == 15, event=Event.ACCEPTED, reason=0, leaves_qty=1)
    assert (15, "phase") in rules_at(check((o, f, l2, e)))


def test_missing_uncross_is_phase():
    o, f, l2, e = trading_day().arrays()
    e = e[~((e["seq"] == 14) & (e["event"] == Event.UNCROSS))]
    found = rules_at(check((o, f, l2, e)))
    assert (14, "phase") in found


def test_missing_auction_end_is_phase():
    o, f, l2, e = trading_day().arrays()
    cfg = {**CONFIG, "symbols": [dict(CONFIG["symbols"][0], interruption_ns=1000)]}
    found = rules_at(check((o, f, l2, e), cfg))
    assert (11, "phase") in found


def test_wrong_phase_on_the_phase_event_is_phase():
    o, f, l2, e = trading_day().arrays()
    e = _edit(e, lambda t: (t["seq"] == 2) & (t["event"] == Event.PHASE), phase=P.PRE_CLOSE)
    found = rules_at(check((o, f, l2, e)))
    assert found and min(found)[1] == "phase" and min(found)[0] == 2


def test_accepted_outside_the_static_band_is_band():
    d = trading_day()
    o, f, l2, e = d.arrays()
    o = _edit(o, lambda t: t["order_id"] == 20, price=118)
    l2 = _edit(l2, lambda t: (t["seq"] == 1), price=118)
    assert rules_at(check((o, f, l2, e))) == {(1, "band")}


def test_continuous_symbol_with_bands_checks_fills_without_phases():
    """No PHASE message: the kernel checks the run and the band rows are checked beside it."""
    d = Day()
    d.msg(1, Kind.NEW, 1, side=SELL, price=100, qty=2).ev(1, Event.ACCEPTED, leaves=2) \
        .book(SELL, 100, 2, 1)
    d.msg(2, Kind.NEW, 2, price=100, qty=1).ev(2, Event.ACCEPTED, leaves=1)
    d.fill(100, 1, 2, 1, BUY).ev(2, Event.FILLED, 1, 0, price=100) \
        .ev(1, Event.PARTIAL, 1, 1, price=100).book(SELL, 100, 1, 1)
    d.msg(3, Kind.NEW, 3, side=SELL, price=104, qty=1).ev(3, Event.ACCEPTED, leaves=1) \
        .book(SELL, 104, 1, 1)
    d.msg(4, Kind.CANCEL, 1).ev(1, Event.CANCELLED, 1, 0, reason=Reason.USER_CANCEL) \
        .book(SELL, 100, 0, 0)
    d.msg(5, Kind.NEW, 4, price=104, qty=1).ev(4, Event.ACCEPTED, leaves=1)
    d.fill(104, 1, 4, 3, BUY).ev(4, Event.FILLED, 1, 0, price=104) \
        .ev(3, Event.FILLED, 1, 0, price=104).book(SELL, 104, 0, 0)
    tables = d.arrays()
    assert check(tables).ok, check(tables).violations
    narrow = {**CONFIG, "symbols": [dict(CONFIG["symbols"][0], dynamic_band_bps=300)]}
    assert rules_at(check(tables, narrow)) == {(5, "band")}


def test_old_journal_without_phases_is_unchanged():
    """A run without phase rows or phase options gets no new check and no new violation."""
    d = Day()
    d.msg(1, Kind.NEW, 1, side=SELL, price=100, qty=2).ev(1, Event.ACCEPTED, leaves=2) \
        .book(SELL, 100, 2, 1)
    d.msg(2, Kind.NEW, 2, price=101, qty=1).ev(2, Event.ACCEPTED, leaves=1)
    d.fill(100, 1, 2, 1, BUY).ev(2, Event.FILLED, 1, 0).ev(1, Event.PARTIAL, 1, 1) \
        .book(SELL, 100, 1, 1)
    report = verify_arrays(*d.arrays())
    assert report.ok
    # the same rows with the fill price moved: the kernel's rule, as before
    o, f, l2, e = d.arrays()
    f["price"] = 101
    assert {v.rule for v in verify_arrays(o, f, l2, e).violations} == {"resting_price"}


# ------------------------------------------------------------------ the brute force itself
def test_uncross_rules_step_by_step():
    # 1. maximum volume
    assert uncross([(101, 10), (100, 5)], [(99, 8), (100, 4)], 0) == (100, 12, 3)
    # 3. every candidate with a buy surplus: the highest
    assert uncross([(101, 10)], [(99, 6)], 0) == (101, 6, 4)
    # 3. a sell surplus: the lowest
    assert uncross([(112, 2)], [(110, 5)], 0) == (110, 2, -3)
    # 4. zero surplus over a range: the reference clamped into it
    assert uncross([(105, 5)], [(100, 5)], 103) == (103, 5, 0)
    assert uncross([(105, 5)], [(100, 5)], 90) == (100, 5, 0)
    assert uncross([(105, 5)], [(100, 5)], 200) == (105, 5, 0)
    # market orders only: the reference price, or nothing without one
    assert uncross([(MB, 4)], [(MS, 3)], 50) == (50, 3, 1)
    assert uncross([(MB, 4)], [(MS, 3)], 0) == (0, 0, 0)
    # nothing crosses
    assert uncross([(99, 4)], [(100, 3)], 0) == (0, 0, 0)


def test_allocate_pairs_the_priority_queues():
    buys = [(101, 2, 1, 10), (MB, 3, 3, 3)]
    sells = [(99, 1, 2, 6), (100, 4, 4, 8)]
    assert allocate(buys, sells, 100, 13) == [(3, 2, 3), (1, 2, 3), (1, 4, 7)]


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_clean_day_in_ranges(tmp_path, chunk):
    """verify's streamed path (a data directory, read in seq ranges) agrees."""
    pytest.importorskip("exsim.store")
    from exsim.replay.verification.options import _options_by_symbol
    from exsim.replay.verification.run import _Run
    from exsim.replay.verification.symbol import _Symbol
    from exsim.exchange.errors import UsageError
    import exsim.replay.verification.kernel as K
    o, f, l2, e = trading_day().arrays()
    from exsim.store.tables import orders_with_seq
    o = orders_with_seq(o, 1)
    run = _Run(0, 100, None)
    sym = _Symbol(run, _options_by_symbol(CONFIG, UsageError, "t")[0])
    last = int(o["seq"].max())
    for lo in range(1, last + 1, chunk):
        hi = lo + chunk - 1
        part = [t[(t["seq"] >= lo) & (t["seq"] <= hi)] for t in (o, f, l2, e)]
        sym.feed(*part, True, K.FINAL if hi >= last else K.FLUSH)
    sym.end()
    report = run.report(0.0)
    assert report.ok, report.violations


def _literal_uncross(buys, sells, reference):
    """docs/semantics.md "The uncross" read word for word, one candidate at a time."""
    cands = sorted({p for p, _ in buys if p != MB} | {p for p, _ in sells if p != MS})

    def at(p):
        b = sum(q for bp, q in buys if bp >= p)
        s = sum(q for sp, q in sells if sp <= p)
        return min(b, s), b - s

    if not cands:
        b, s = sum(q for _, q in buys), sum(q for _, q in sells)
        return (reference, min(b, s), b - s) if reference > 0 and min(b, s) > 0 else (0, 0, 0)
    best = max(at(p)[0] for p in cands)
    if best == 0:
        return 0, 0, 0
    left = [p for p in cands if at(p)[0] == best]
    low = min(abs(at(p)[1]) for p in left)
    left = [p for p in left if abs(at(p)[1]) == low]
    if all(at(p)[1] > 0 for p in left):
        price = max(left)
    elif all(at(p)[1] < 0 for p in left):
        price = min(left)
    else:
        price = min(max(reference, min(left)), max(left))
    return (price, *at(price))


def test_uncross_agrees_with_the_rules_read_literally():
    rng = np.random.default_rng(7)
    for _ in range(300):
        side = lambda mk: [(int(rng.integers(95, 106)) if rng.random() > 0.15 else mk,
                            int(rng.integers(1, 9))) for _ in range(int(rng.integers(0, 7)))]
        buys, sells, ref = side(MB), side(MS), int(rng.choice([0, 97, 100, 104]))
        assert uncross(buys, sells, ref) == _literal_uncross(buys, sells, ref), (buys, sells, ref)


def test_static_band_reject_inside_the_band_is_band():
    """No phases: the kernel checks the run, the band rows check the OUTSIDE_STATIC_BAND reject."""
    d = Day()
    d.msg(1, Kind.NEW, 1, side=SELL, price=100, qty=2).ev(1, Event.REJECTED,
                                                          reason=Reason.OUTSIDE_STATIC_BAND)
    tables = d.arrays()
    assert rules_at(check(tables)) == {(1, "band")}             # 100 is inside [79, 117]
    o, f, l2, e = tables
    o["price"] = 130
    assert check((o, f, l2, e)).ok


def _pre_open_config():
    return {**CONFIG, "symbols": [dict(CONFIG["symbols"][0], phase="pre_open")]}


def test_symbol_starting_in_a_call_and_phase_message_validation():
    """A symbol configured to start in PRE_OPEN: its orders rest from the first message; an
    invalid PHASE message must be rejected with its reason, a valid one must not be."""
    d = Day()
    d.phase = int(P.PRE_OPEN)
    d.msg(1, Kind.NEW, 1, price=100, qty=2).ev(1, Event.ACCEPTED, leaves=2).book(BUY, 100, 2, 1)
    d.msg(2, Kind.NEW, 2, side=SELL, price=100, qty=1).ev(2, Event.ACCEPTED, leaves=1) \
        .book(SELL, 100, 1, 1).ev(0, Event.INDICATIVE, 1, 1, price=100)
    # an expiry on a target other than REOPENING_AUCTION: BAD_EXPIRY
    d.msg(3, Kind.PHASE, phase=P.HALTED, expire=50).ev(0, Event.REJECTED,
                                                       reason=Reason.BAD_EXPIRY)
    tables = d.arrays()
    assert check(tables, _pre_open_config()).ok, check(tables, _pre_open_config()).violations
    # the same rows for a symbol starting CONTINUOUS: the orders would have matched
    assert not check(tables).ok
    o, f, l2, e = tables
    e = _edit(e, lambda t: t["seq"] == 3, reason=Reason.BAD_PHASE)
    assert rules_at(check((o, f, l2, e), _pre_open_config())) == {(3, "phase")}


def _first_phase_reference(orders, fills, events):
    """first_phase_seq for a CONTINUOUS symbol, written the obvious way (every row compared)."""
    phase_events = {int(Event.PHASE), int(Event.INDICATIVE), int(Event.UNCROSS)}
    phase_reasons = {int(r) for r in (Reason.PRICE_BAND, Reason.AUCTION_END,
                                      Reason.SYMBOL_CLOSED, Reason.SYMBOL_HALTED,
                                      Reason.NOT_IN_CALL, Reason.BAD_PHASE)}
    found = [int(o["seq"]) for o in orders if o["kind"] == int(Kind.PHASE)]
    found += [int(e["seq"]) for e in events
              if e["event"] in phase_events or e["reason"] in phase_reasons]
    found += [int(f["seq"]) for f in fills if f["aggressor_side"] == AUCTION_SIDE]
    return min(found) if found else None


@pytest.mark.parametrize("seed", range(12))
def test_the_phase_scan_finds_the_first_phase_row_of_each_table(seed):
    """first_phase_seq and static_band_rejects scan strided code columns in a compiled loop;
    they answer as comparing every row would, for codes anywhere in 0..255."""
    from exsim.replay.verification.phases import PhaseOptions, first_phase_seq, static_band_rejects
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    from exsim.store.tables import STORED_DTYPES
    orders, fills, events = (np.zeros(k, d) for k, d in (
        (n, STORED_DTYPES["orders"]), (n // 3, FILL_DTYPE), (2 * n, EVENT_DTYPE)))
    for rows in (orders, fills, events):
        rows["seq"] = np.sort(rng.integers(1, 10 * n + 2, rows.size))
    rare = 1.0 / max(n, 1) * rng.uniform(0, 3)     # a few phase rows, or none at all
    orders["kind"] = np.where(rng.random(n) < rare, int(Kind.PHASE), int(Kind.NEW))
    # codes drawn from the ones looked for and others, among them the band reason and 255
    codes = np.array(sorted({int(e) for e in Event} | {int(r) for r in Reason} | {200, 255}))
    for col in ("event", "reason"):
        events[col] = np.where(rng.random(2 * n) < rare, rng.choice(codes, 2 * n), 0)
    fills["aggressor_side"] = np.where(rng.random(n // 3) < rare, AUCTION_SIDE, 0)
    assert first_phase_seq(orders, fills, events, PhaseOptions()) == \
        _first_phase_reference(orders, fills, events)
    assert static_band_rejects(events) == \
        bool(np.any(events["reason"] == int(Reason.OUTSIDE_STATIC_BAND)))
