"""The ITCH-style feed translator against the engine, no network: after every batch of a random
flow, the book built from the feed's messages (by the translator and by a reader applying the
encoded messages) equals the engine's visible book, order by order in priority order, and each
symbol's messages are numbered 1, 2, 3 ... without a gap.

Flows come from the engine tests' strategies: venue flows (icebergs with 1-2 lot slices, stops
and stop limits, modifies that keep or lose priority, DAY/GTD expiries, self-trade prevention)
and phase flows (calls, uncrosses with icebergs and market orders, band breaches, stops pending
across an uncross).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exchange_tests"))

from conftest import VENUE_SYMBOLS, venue_flows  # noqa: E402
from phase_flows import (  # noqa: E402
    BUY, PHASE_SYMBOLS, SELL, band_flows, call_auctions, chain, market, modify, new, cancel,
    phase_flows, stop_uncross_flows, to_phase,
)

from exsim.exchange import Engine, Phase, Side  # noqa: E402
from exsim.exchange.gateway import itch  # noqa: E402

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def make_engine(symbols, stp="cancel_resting"):
    eng = Engine(stp=stp)
    for name, lo, hi, *opts in symbols:
        eng.add_symbol(name, min_price=lo, max_price=hi, **(opts[0] if opts else {}))
    return eng


def engine_rows(eng, sid):
    o = eng.orders(sid)
    return list(zip(o["order_id"].tolist(), o["side"].tolist(), o["price"].tolist(),
                    o["qty"].tolist()))


def engine_depth(eng, sid):
    return [[tuple(r) for r in side.tolist()] for side in eng.depth(sid, 1 << 20)]


class Reader:
    """What a feed client does: decode each message, check its symbol's seq, apply it."""

    def __init__(self, builder):
        self.books = {}
        self.next_seq = {}
        for sid in builder.symbols():   # start from the builder's snapshot of each symbol
            self.apply_all([itch.decode(itch.encode(m)) for m in builder.snapshot(sid)])

    def apply_all(self, msgs):
        for m in msgs:
            book = self.books.setdefault(m.symbol, itch.VisibleBook())
            if type(m) is itch.SnapshotStart:
                book.clear()
                self.in_snapshot = True
            elif type(m) is itch.SnapshotEnd:
                self.next_seq[m.symbol] = m.seq + 1
                self.in_snapshot = False
            elif self.in_snapshot:
                book.apply(m)
            else:
                assert m.seq == self.next_seq[m.symbol], (m, self.next_seq[m.symbol])
                self.next_seq[m.symbol] = m.seq + 1
                book.apply(m)

    in_snapshot = False


def run_flow(eng, flow, cuts, final: dict | None = None):
    """Process ``flow`` in batches cut at ``cuts``; after each batch compare the books. Return
    every message the builder emitted; ``final`` (if given) gets {symbol id: (the reader's
    rows, the engine's rows)} after the last batch."""
    fb = itch.FeedBuilder.from_engine(eng)
    reader = Reader(fb)
    sids = list(eng.symbols.values())
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(flow))), len(flow)]
    every, volume, trades = [], 0, set()
    for a, b in zip(bounds, bounds[1:]):
        batch = flow[a:b]
        first = eng.seq + 1
        res = eng.process(batch)
        volume += int(res.fills["qty"].sum())
        trades |= set(res.fills["trade_id"].tolist())
        msgs = fb.build(first, batch, res)
        wire = [itch.encode(m) for m in msgs]
        for w, m in zip(wire, msgs):
            assert len(w) == itch.LAYOUTS[w[:1]].struct.size
            assert itch.decode(w) == m
        reader.apply_all([itch.decode(w) for w in wire])
        every.extend(msgs)
        assert fb.engine_seq == eng.seq
        for sid in sids:
            want = engine_rows(eng, sid)
            assert fb.book(sid).rows() == want, f"builder, symbol {sid}, after seq {eng.seq}"
            assert reader.books[sid].rows() == want, f"reader, symbol {sid}, after seq {eng.seq}"
            bids, asks = engine_depth(eng, sid)
            assert reader.books[sid].depth(0) == bids
            assert reader.books[sid].depth(1) == asks
            assert reader.next_seq[sid] == fb.seq(sid) + 1
    # every fill is printed exactly once, and the prints add up to the engine's volume
    prints = [m for m in every if (type(m) is itch.OrderExecuted and m.printable)
              or type(m) is itch.Trade]
    assert sorted(m.match for m in prints) == sorted(trades)
    assert sum(m.qty for m in prints) == volume
    if final is not None:
        final.update({sid: (reader.books[sid].rows(), engine_rows(eng, sid)) for sid in sids})
    return every


cut_lists = st.lists(st.integers(0, 120), max_size=8)


@SETTINGS
@given(flow=venue_flows(), cuts=cut_lists, stp=st.sampled_from(["none", "cancel_resting",
                                                                 "cancel_incoming", "cancel_both"]))
def test_venue_flows_book_matches_engine(flow, cuts, stp):
    final = {}
    run_flow(make_engine(VENUE_SYMBOLS, stp), flow, cuts, final)
    assert final and all(feed == engine for feed, engine in final.values())


@SETTINGS
@given(flow=phase_flows(), cuts=cut_lists)
def test_phase_flows_book_matches_engine(flow, cuts):
    final = {}
    run_flow(make_engine(PHASE_SYMBOLS), flow, cuts, final)
    assert final and all(feed == engine for feed, engine in final.values())


@SETTINGS
@given(flow=st.one_of(band_flows(), call_auctions(), stop_uncross_flows()), cuts=cut_lists)
def test_auction_and_band_flows_book_matches_engine(flow, cuts):
    final = {}
    run_flow(make_engine(PHASE_SYMBOLS), flow, cuts, final)
    assert final and all(feed == engine for feed, engine in final.values())


def body(msgs, after_seq=0):
    """The messages of symbol 0 after ``after_seq`` as (name, fields after the header)."""
    return [(type(m).__name__, *m[3:]) for m in msgs if m.symbol == 0 and m.seq > after_seq]


def test_iceberg_refill_is_a_new_slice_at_the_back():
    eng = make_engine(PHASE_SYMBOLS)
    flow = chain(to_phase(Phase.CONTINUOUS),      # seq 1, 2: the (empty) opening cross, phase
                 new(1, SELL, 100, 5, display_qty=2, trader=1),
                 new(2, SELL, 100, 3, trader=1),
                 new(3, BUY, 100, 2, trader=2), t0=1, dt=1)
    msgs = run_flow(eng, flow, [3])
    assert body(msgs, 4) == [("OrderExecuted", 1, 2, 1, 100, True),   # the shown 2 trade
                             ("AddOrder", 1, SELL, 2, 100)]           # the next slice, at the back
    assert [r[0] for r in engine_rows(eng, 0)] == [2, 1]


def test_modifies_keep_or_lose_priority():
    eng = make_engine(PHASE_SYMBOLS)
    flow = chain(to_phase(Phase.CONTINUOUS), new(1, BUY, 99, 5), new(2, BUY, 99, 5),
                 modify(1, 98, 5), modify(2, 99, 7), modify(2, 99, 4), modify(2, 99, 4),
                 t0=1, dt=1)
    msgs = run_flow(eng, flow, [])
    assert body(msgs, 2) == [("AddOrder", 1, BUY, 5, 99), ("AddOrder", 2, BUY, 5, 99),
                             ("OrderReplace", 1, 5, 98),    # new price: to the back there
                             ("OrderReplace", 2, 7, 99),    # more: to the back of its level
                             ("OrderCancel", 2, 3)]         # less: keeps its place; same: nothing


def test_stop_is_absent_until_triggered_and_a_modify_that_trades_deletes_first():
    eng = make_engine(PHASE_SYMBOLS)
    flow = chain(to_phase(Phase.CONTINUOUS), new(1, SELL, 100, 1, trader=1),
                 new(2, BUY, 100, 1, trader=2),                                # last price 100
                 new(3, BUY, 0, 2, order_type=2, stop_price=101, trader=3),   # a pending stop
                 new(4, SELL, 101, 1, trader=1), new(5, SELL, 102, 5, trader=1),
                 new(6, BUY, 99, 3, trader=2),
                 modify(6, 101, 3, trader=2),     # trades 1 at 101, which releases the stop
                 t0=1, dt=1)
    msgs = run_flow(eng, flow, [3, 4])
    assert not any(getattr(m, "ref", None) == 3 for m in msgs)    # the stop is never shown
    assert body(msgs, 7) == [("OrderDelete", 6),                  # leaves 99 before it trades
                             ("OrderExecuted", 4, 1, 2, 101, True),
                             ("AddOrder", 6, BUY, 2, 101),         # its rest at the new price
                             ("OrderExecuted", 5, 2, 3, 102, True)]   # the released stop buys 2


def test_uncross_prints_trades_and_executes_shown_parts_only():
    eng = make_engine(PHASE_SYMBOLS)            # A starts in the pre-open call, reference 100
    flow = chain(new(1, SELL, 100, 6, display_qty=2, trader=1),
                 new(2, BUY, 101, 5, trader=2), market(3, BUY, 1, trader=3),
                 to_phase(Phase.OPENING_AUCTION), t0=1, dt=1)
    msgs = run_flow(eng, flow, [3])
    cross = [m for m in msgs if type(m) is itch.Cross]
    assert [(c.price, c.volume) for c in cross] == [(100, 6)]
    after = body(msgs, cross[0].seq)
    trades = [x for x in after if x[0] == "Trade"]
    assert sum(t[3] for t in trades) == 6 and all(t[4] == 100 for t in trades)
    assert all(not x[-1] for x in after if x[0] == "OrderExecuted")   # the Trades print
    executed_1 = sum(x[2] for x in after if x[0] == "OrderExecuted" and x[1] == 1)
    assert executed_1 == 2                                          # only its shown slice
    assert engine_rows(eng, 0) == []
    assert after[-1] == ("TradingPhase", Phase.CONTINUOUS, 0, 100)


def test_desync_is_reported_not_guessed():
    eng = make_engine(PHASE_SYMBOLS)
    fb = itch.FeedBuilder()                     # not loaded with the engine's book
    eng.process(chain(to_phase(Phase.CONTINUOUS), new(1, SELL, 100, 1), t0=1))
    batch = chain(new(2, BUY, 100, 1, trader=2), t0=5)
    with pytest.raises(itch.FeedDesync):
        fb.build(eng.seq + 1, batch, eng.process(batch))


@pytest.mark.parametrize("payload", [b"", b"Z" + bytes(20), b"A" + bytes(10),
                                     itch.encode(itch.AddOrder(0, 1, 2, 3, 0, 1, 1))[:-1],
                                     itch.encode(itch.AddOrder(0, 1, 2, 3, 0, 1, 1))[:21] + bytes(8)
                                     + b"x" + bytes(16)])
def test_decode_refuses_malformed_messages(payload):
    with pytest.raises(itch.FeedError):
        itch.decode(payload)


def test_layout_sizes_are_fixed():
    sizes = {t.decode(): lay.struct.size for t, lay in itch.LAYOUTS.items()}
    assert sizes == {"S": 22, "R": 46, "G": 25, "g": 21, "H": 31, "I": 46, "Q": 46, "A": 46,
                     "E": 54, "X": 37, "D": 29, "U": 45, "P": 61}
    assert itch.tick_fields("0.01") == (1, -2) and itch.tick_fields(5) == (5, 0)
    assert itch.tick_fields("0.0025") == (25, -4)
