"""The uncross kernel (exchange/auction.py) on call books built directly in an engine's state.

A call book may be crossed and holds MARKET orders at their call price; the engine of this
branch cannot rest such a book through messages yet, so ``CallBook`` places orders with the
book primitives (as a call's NEW will) and the kernels run on the engine's own arrays.
``auction_price`` is checked against a brute force over every candidate price (the rules of
docs/semantics.md "The uncross", written out plainly here), and ``uncross`` against an
allocation written here: each side's orders that can execute, in priority, take their whole
open quantity until V is used, and the two queues pair in order.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from exsim.exchange import Engine
from exsim.exchange.auction import auction_price, uncross, uncross_room
from exsim.exchange.book import (
    M_INDEX_COUNT, M_NEED_BOOK, M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2, M_TRADE_ID, alloc_order,
    append_to_level, find_or_add_level, set_cold,
)
from exsim.exchange.kernels import NEED_LADDER
from exsim.exchange.order_index import index_insert
from exsim.exchange.schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, Event, OrderType, Phase,
    Reason,
)

BUY, SELL = 0, 1
MKT = None   # the price of a MARKET order in a CallBook


class CallBook:
    """One symbol's call book in a fresh Engine, plus the list of what was placed (arrival
    order) for the brute forces."""

    def __init__(self, reference=0, last=0):
        self.eng = Engine(capacity=1024)
        self.eng.add_symbol("X")
        row = self.eng.state.symbols[0]
        row["reference_price"] = reference
        row["last_price"] = last
        row["phase"] = Phase.PRE_OPEN
        row["auction"] = Phase.OPENING_AUCTION
        self.placed = []      # dicts: oid, side, price (None: market), qty, display, trader
        self._next = 1

    def add(self, side, qty, price=MKT, display=0, trader=0):
        """Rest an order at the back of its level, as a call does; return its id."""
        oid = self._next
        self._next += 1
        s = self.eng.state
        if s.books[side]["n"] >= s.books[side]["cap"]:
            s.meta[M_NEED_BOOK] = side
            s = self.eng.grow(NEED_LADDER)
        at = CALL_MARKET_PRICE[side] if price is MKT else price
        lv = find_or_add_level(s.books, s.levels, s.ladder_keys, s.ladder_levels, s.meta, side,
                               side, at)
        r = alloc_order(s.arena, s.meta)
        shown = display if 0 < display < qty else qty
        a = s.arena
        for name, value in (("order_id", oid), ("price", at), ("leaves", shown), ("filled", 0),
                            ("hidden", qty - shown), ("symbol", 0), ("trader", trader),
                            ("side", side), ("flags", 0)):
            a[name][r] = value
        set_cold(a, s.arena_ext, r, display, 0, 0,
                 OrderType.MARKET if price is MKT else OrderType.LIMIT, 0, 0)
        append_to_level(a, s.levels, r, lv)
        s.levels["hidden"][lv] += qty - shown
        s.books["live"][side] += 1
        index_insert(s.index, 0, oid, r)
        s.meta[M_INDEX_COUNT] += 1
        self.placed.append(dict(oid=oid, side=side, price=price, qty=qty, display=display,
                                trader=trader))
        return oid

    def price(self, reference=None):
        s = self.eng.state
        if reference is None:
            reference = int(s.symbols[0]["reference_price"]) or int(s.symbols[0]["last_price"])
        return tuple(int(x) for x in auction_price(0, s.levels, s.books, s.ladder_levels,
                                                   reference))

    def run(self, seq=7, ts=1000, auction=Phase.OPENING_AUCTION, rows=256):
        """Run the uncross; return (volume, fills, l2, events) as written."""
        s = self.eng.state
        fills = np.zeros(rows, FILL_DTYPE)
        l2 = np.zeros(rows, L2_DTYPE)
        events = np.zeros(rows, EVENT_DTYPE)
        cnt = np.zeros(3, np.int64)
        assert uncross_room(0, s.books, s.meta, fills, l2, events, cnt)
        v = uncross(seq, ts, 0, int(auction), s.arena, s.arena_ext, s.levels, s.index, s.books,
                    s.ladder_keys, s.ladder_levels, s.meta, s.symbols, s.expiry, fills, l2,
                    events, cnt)
        return int(v), fills[: cnt[0]], l2[: cnt[1]], events[: cnt[2]]


# ---- the rules, by brute force ----------------------------------------------------------------

def _executable(o, p):
    """Whether order ``o`` can execute at price ``p`` (a MARKET order always can)."""
    return o["price"] is MKT or (o["price"] >= p if o["side"] == BUY else o["price"] <= p)


def _open_sums(placed, p):
    b = sum(o["qty"] for o in placed if o["side"] == BUY and _executable(o, p))
    s = sum(o["qty"] for o in placed if o["side"] == SELL and _executable(o, p))
    return b, s


def brute_price(placed, reference):
    """(price, volume, surplus) by every candidate price (semantics.md, rules 1-4)."""
    limits = sorted({o["price"] for o in placed if o["price"] is not MKT})
    if not limits:
        bm, sm = _open_sums(placed, 0)
        if bm > 0 and sm > 0 and reference > 0:
            return reference, min(bm, sm), bm - sm
        return 0, 0, 0
    cands = []
    for p in limits:
        b, s = _open_sums(placed, p)
        cands.append((p, min(b, s), b - s))
    vmax = max(v for _, v, _ in cands)
    if vmax == 0:
        return 0, 0, 0
    cands = [c for c in cands if c[1] == vmax]                           # rule 1
    amin = min(abs(c[2]) for c in cands)
    cands = [c for c in cands if abs(c[2]) == amin]                      # rule 2
    if all(c[2] > 0 for c in cands):                                     # rule 3
        p = max(c[0] for c in cands)
    elif all(c[2] < 0 for c in cands):
        p = min(c[0] for c in cands)
    else:                                                                # rule 4
        p = min(max(reference, min(c[0] for c in cands)), max(c[0] for c in cands))
    b, s = _open_sums(placed, p)
    return p, min(b, s), b - s


def expected_fills(placed, p, v):
    """[(buy id, sell id, qty)]: each side's executable orders in priority (market first, then
    price, then arrival) take their whole open quantity until v is used; queues pair in order."""
    def queue(side):
        ok = [o for o in placed if o["side"] == side and _executable(o, p)]
        sign = -1 if side == BUY else 1
        ok.sort(key=lambda o: (o["price"] is not MKT,
                               0 if o["price"] is MKT else sign * o["price"]))
        out, left = [], v
        for o in ok:   # sort is stable: arrival order within a price
            if left == 0:
                break
            q = min(o["qty"], left)
            out.append([o["oid"], q])
            left -= q
        return out
    buys, sells = queue(BUY), queue(SELL)
    fills, i, j = [], 0, 0
    while i < len(buys) and j < len(sells):
        q = min(buys[i][1], sells[j][1])
        fills.append((buys[i][0], sells[j][0], q))
        buys[i][1] -= q
        sells[j][1] -= q
        i += buys[i][1] == 0
        j += sells[j][1] == 0
    return fills


def _fills(f):
    return [(int(r["buy_order_id"]), int(r["sell_order_id"]), int(r["qty"])) for r in f]


def _events(e):
    return [(int(r["order_id"]), Event(r["event"]).name, int(r["reason"]), int(r["filled_qty"]),
             int(r["leaves_qty"]), int(r["price"])) for r in e]


def _l2(rows):
    return [(int(r["side"]), int(r["price"]), int(r["qty"]), int(r["count"])) for r in rows]


def _book(cb):
    return [(int(r["order_id"]), int(r["side"]), int(r["price"]), int(r["qty"]), int(r["hidden"]),
             int(r["filled"])) for r in cb.eng.orders("X")]


def build(spec, reference=0, last=0):
    """A CallBook from [(side, qty, price, display)] (display optional)."""
    cb = CallBook(reference, last)
    for side, qty, price, *display in spec:
        cb.add(side, qty, price, display[0] if display else 0)
    return cb


# ---- auction_price on hand cases, one per rule -------------------------------------------------

PRICE_CASES = {
    # rule 1: 100 alone executes 8; 101 has as small a surplus but executes 6
    "rule1_max_volume": ([(BUY, 6, 101), (BUY, 4, 100), (SELL, 3, 98), (SELL, 5, 100)], 0,
                         (100, 8, 2)),
    # rule 2: 100, 101, 102 all execute 8; 102 leaves the smallest surplus (2)
    "rule2_min_surplus": ([(BUY, 10, 102), (BUY, 5, 101), (SELL, 8, 100), (SELL, 10, 103)], 0,
                          (102, 8, 2)),
    # rule 3: both ties leave a buy surplus: the highest; a sell surplus: the lowest
    "rule3_buy_side": ([(BUY, 8, 100), (SELL, 5, 99)], 0, (100, 5, 3)),
    "rule3_sell_side": ([(BUY, 5, 101), (SELL, 8, 100)], 0, (100, 5, -3)),
    # rule 4: ties with no surplus at 100 and 102: the reference clamped into [100, 102]
    "rule4_inside": ([(BUY, 5, 102), (SELL, 5, 100)], 101, (101, 5, 0)),
    "rule4_below": ([(BUY, 5, 102), (SELL, 5, 100)], 99, (100, 5, 0)),
    "rule4_above": ([(BUY, 5, 102), (SELL, 5, 100)], 150, (102, 5, 0)),
    "rule4_no_reference": ([(BUY, 5, 102), (SELL, 5, 100)], 0, (100, 5, 0)),
    # rule 4 with surpluses of both signs (+1 at 100, -1 at 102): 101 has its own surplus, 0
    "rule4_mixed_signs_inside": ([(BUY, 5, 102), (BUY, 1, 100), (SELL, 5, 100), (SELL, 1, 102)],
                                 101, (101, 5, 0)),
    "rule4_mixed_signs_above": ([(BUY, 5, 102), (BUY, 1, 100), (SELL, 5, 100), (SELL, 1, 102)],
                                200, (102, 5, -1)),
    # market orders only: the reference price and the market volume; none without a reference
    "markets_only": ([(BUY, 5, MKT), (SELL, 3, MKT)], 50, (50, 3, 2)),
    "markets_only_no_reference": ([(BUY, 5, MKT), (SELL, 3, MKT)], 0, (0, 0, 0)),
    # a market buy trades up the asks: 105 matches it all (106 beyond it does too, with more
    # surplus); the far price must be reached even though it is above every bid
    "market_buy_up_the_asks": ([(BUY, 10, MKT), (BUY, 3, 99), (SELL, 4, 100), (SELL, 4, 101),
                                (SELL, 4, 105), (SELL, 1, 106)], 0, (105, 10, -2)),
    "market_buy_best_above_bids": ([(BUY, 10, MKT), (BUY, 5, 100), (SELL, 10, 90),
                                    (SELL, 1, 110)], 0, (110, 10, -1)),
    "market_sell_down_the_bids": ([(SELL, 10, MKT), (SELL, 3, 101), (BUY, 4, 100), (BUY, 4, 99),
                                   (BUY, 4, 95), (BUY, 1, 94)], 0, (95, 10, 2)),
    # an iceberg counts with its reserve
    "iceberg_reserve": ([(BUY, 10, 100, 2), (SELL, 6, 99)], 0, (100, 6, 4)),
    # nothing executes
    "not_crossed": ([(BUY, 5, 99), (SELL, 5, 100)], 0, (0, 0, 0)),
    "buys_only": ([(BUY, 5, 99), (BUY, 5, MKT)], 100, (0, 0, 0)),
    "market_buy_no_sells": ([(BUY, 5, MKT), (BUY, 1, 100)], 0, (0, 0, 0)),
    "empty": ([], 100, (0, 0, 0)),
}


def test_auction_price_on_hand_cases_for_every_rule():
    for name, (spec, reference, want) in PRICE_CASES.items():
        cb = build(spec)
        got = cb.price(reference)
        assert got == want, name
        assert brute_price(cb.placed, reference) == want, name


# ---- uncross outputs ---------------------------------------------------------------------------

def test_uncross_pairs_the_queues_with_the_last_order_of_a_side_partly_filled():
    cb = CallBook()
    b1 = cb.add(BUY, 5, 101)
    b2 = cb.add(BUY, 3, 100)
    s1 = cb.add(SELL, 2, 99)
    s2 = cb.add(SELL, 4, 100)
    s3 = cb.add(SELL, 4, 101)
    cb.eng.state.meta[M_TRADE_ID] = 41
    v, fills, l2, events = cb.run(seq=7, ts=1000, auction=Phase.OPENING_AUCTION)
    assert v == 6
    assert _fills(fills) == [(b1, s1, 2), (b1, s2, 3), (b2, s2, 1)]
    assert list(fills["trade_id"]) == [42, 43, 44]
    assert set(fills["price"]) == {100} and set(fills["aggressor_side"]) == {AUCTION_SIDE}
    assert set(fills["seq"]) == {7} and set(fills["ts"]) == {1000}
    assert _events(events) == [
        (0, "UNCROSS", 0, 6, 2, 100),
        (b1, "PARTIAL", 0, 2, 3, 100), (s1, "FILLED", 0, 2, 0, 100),
        (b1, "FILLED", 0, 5, 0, 100), (s2, "PARTIAL", 0, 3, 1, 100),
        (b2, "PARTIAL", 0, 1, 2, 100), (s2, "FILLED", 0, 4, 0, 100),
    ]
    assert events["phase"][0] == Phase.OPENING_AUCTION
    assert set(events["phase"][1:]) == {Phase.PRE_OPEN}   # the caller changes the phase
    assert _l2(l2) == [(BUY, 101, 0, 0), (BUY, 100, 2, 1), (SELL, 99, 0, 0), (SELL, 100, 0, 0)]
    assert _book(cb) == [(b2, BUY, 100, 2, 0, 1), (s3, SELL, 101, 4, 0, 0)]
    row = cb.eng.state.symbols[0]
    assert row["last_price"] == 100 and row["reference_price"] == 100
    assert cb.eng.state.books["n"][:2].tolist() == [1, 1]


def test_uncross_leaves_the_sell_side_last_order_partly_filled():
    cb = CallBook()
    b1 = cb.add(BUY, 4, 102)
    s1 = cb.add(SELL, 3, 100)
    s2 = cb.add(SELL, 3, 101)
    v, fills, l2, events = cb.run()
    assert v == 4 and _fills(fills) == [(b1, s1, 3), (b1, s2, 1)]
    assert _events(events)[0] == (0, "UNCROSS", 0, 4, -2, 101)
    assert _events(events)[-1] == (s2, "PARTIAL", 0, 1, 2, 101)
    assert _l2(l2) == [(BUY, 102, 0, 0), (SELL, 100, 0, 0), (SELL, 101, 2, 1)]
    assert _book(cb) == [(s2, SELL, 101, 2, 0, 1)]


def test_uncross_refills_an_iceberg_at_the_back_of_its_level():
    cb = CallBook()
    i1 = cb.add(BUY, 10, 100, display=3)
    b2 = cb.add(BUY, 2, 100)
    s1 = cb.add(SELL, 5, 100)
    v, fills, l2, events = cb.run()
    # the iceberg executes 5 of its 10 (3 shown, 2 of reserve) and shows 3 behind b2
    assert v == 5 and _fills(fills) == [(i1, s1, 5)]
    assert _events(events)[1:] == [(i1, "PARTIAL", 0, 5, 5, 100), (s1, "FILLED", 0, 5, 0, 100)]
    assert _l2(l2) == [(BUY, 100, 5, 2), (SELL, 100, 0, 0)]
    assert _book(cb) == [(b2, BUY, 100, 2, 0, 0), (i1, BUY, 100, 3, 2, 5)]
    s = cb.eng.state
    assert s.levels["hidden"][s.ladder_levels[s.books["off"][0]]] == 2   # the level's reserve


def test_uncross_keeps_an_iceberg_in_place_when_its_shown_part_remains():
    cb = CallBook()
    i1 = cb.add(BUY, 10, 100, display=5)
    b2 = cb.add(BUY, 2, 100)
    cb.add(SELL, 3, 100)
    v, _, l2, _ = cb.run()
    assert v == 3
    assert _book(cb) == [(i1, BUY, 100, 2, 5, 3), (b2, BUY, 100, 2, 0, 0)]
    assert _l2(l2) == [(BUY, 100, 4, 2), (SELL, 100, 0, 0)]


def test_uncross_fills_market_orders_first_and_cancels_their_rest():
    cb = CallBook()
    a = cb.add(SELL, 4, 100)
    m1 = cb.add(BUY, 5, MKT)
    m2 = cb.add(BUY, 5, MKT)
    ms = cb.add(SELL, 3, MKT)
    v, fills, l2, events = cb.run()
    assert v == 7
    assert _fills(fills) == [(m1, ms, 3), (m1, a, 2), (m2, a, 2)]
    assert _events(events)[-1] == (m2, "CANCELLED", Reason.NO_LIQUIDITY, 2, 0, 0)
    assert _l2(l2) == [(BUY, CALL_MARKET_PRICE[BUY], 0, 0), (SELL, CALL_MARKET_PRICE[SELL], 0, 0),
                       (SELL, 100, 0, 0)]
    assert _book(cb) == [] and cb.eng.live_orders == 0


def test_uncross_with_nothing_to_execute_still_cancels_market_orders():
    cb = CallBook(reference=0)
    m = cb.add(SELL, 4, MKT)
    m2 = cb.add(SELL, 1, MKT)
    s = cb.add(SELL, 2, 101)
    v, fills, l2, events = cb.run(auction=Phase.CLOSING_AUCTION)
    assert v == 0 and len(fills) == 0
    assert _events(events) == [(0, "UNCROSS", 0, 0, 0, 0),
                               (m, "CANCELLED", Reason.NO_LIQUIDITY, 0, 0, 0),
                               (m2, "CANCELLED", Reason.NO_LIQUIDITY, 0, 0, 0)]
    assert events["phase"][0] == Phase.CLOSING_AUCTION
    assert _l2(l2) == [(SELL, 0, 0, 0)]
    assert _book(cb) == [(s, SELL, 101, 2, 0, 0)]
    assert cb.eng.state.symbols[0]["last_price"] == 0


def test_market_sells_take_the_bids_when_no_limit_sell_crosses():
    cb = build([(BUY, 5, 99), (SELL, 4, MKT), (SELL, 1, MKT), (SELL, 2, 101)])
    assert cb.price(0) == (99, 5, 0)


def test_uncross_uses_the_reference_then_the_last_price_for_rule_4():
    for reference, last, want in ((101, 0, 101), (0, 102, 102), (0, 0, 100)):
        cb = build([(BUY, 5, 103), (SELL, 5, 100)], reference=reference, last=last)
        v, fills, _, events = cb.run()
        assert v == 5 and set(fills["price"]) == {want}, (reference, last)
        assert cb.eng.state.symbols[0]["reference_price"] == want


def test_uncross_room_asks_for_the_worst_case():
    cb = build([(BUY, 5, 101), (BUY, 5, MKT), (SELL, 5, 100), (SELL, 1, 102)])
    s = cb.eng.state
    cnt = np.array([3, 2, 5], np.int64)
    small = (np.zeros(4, FILL_DTYPE), np.zeros(4, L2_DTYPE), np.zeros(8, EVENT_DTYPE))
    assert not uncross_room(0, s.books, s.meta, *small, cnt)
    # fills <= 4 live orders, events <= 1 + 2 * 4 + 4 + 4, l2 <= 4 levels + 2
    assert s.meta[[M_NEED_FILLS, M_NEED_L2, M_NEED_EVENTS]].tolist() == [3 + 4, 2 + 6, 5 + 17]
    big = (np.zeros(7, FILL_DTYPE), np.zeros(8, L2_DTYPE), np.zeros(22, EVENT_DTYPE))
    assert uncross_room(0, s.books, s.meta, *big, cnt)


# ---- random call books against the brute forces ------------------------------------------------

_order = st.tuples(st.sampled_from([BUY, SELL]), st.integers(1, 6),
                   st.one_of(st.none(), st.integers(97, 103), st.integers(97, 103)),
                   st.sampled_from([0, 0, 0, 1, 2]))


@settings(max_examples=30, deadline=None)
@given(st.lists(_order, max_size=14), st.sampled_from([0, 96, 99, 100, 101, 104]),
       st.sampled_from([0, 100]))
def test_random_call_books_uncross_as_the_brute_force_says(spec, reference, last):
    cb = CallBook(reference, last)
    for side, qty, price, display in spec:
        cb.add(side, qty, price, display if price is not MKT and display < qty else 0)
    placed = list(cb.placed)
    rule_ref = reference or last
    want = brute_price(placed, rule_ref)
    assert cb.price(rule_ref) == want
    p, v, _ = want
    before = sum(o["qty"] for o in placed)
    vol, fills, l2, events = cb.run()
    assert vol == v
    assert _fills(fills) == expected_fills(placed, p, v)
    assert all(fills["price"] == p)
    assert _events(events)[0] == (0, "UNCROSS", 0, v, want[2], p)
    # no MARKET order survives, the book left is not crossed, every lot is accounted for
    book = cb.eng.orders("X")
    assert not any(o["price"] is MKT and o["oid"] in set(book["order_id"].tolist()) for o in placed)
    bids = book[book["side"] == BUY]["price"]
    asks = book[book["side"] == SELL]["price"]
    assert len(bids) == 0 or len(asks) == 0 or bids.max() < asks.min()
    cancelled = sum(o["qty"] - sum(q for b, s, q in _fills(fills) if o["oid"] in (b, s))
                    for o in placed if o["price"] is MKT)
    assert int((book["qty"] + book["hidden"]).sum()) == before - 2 * v - cancelled
    # L2: one row per changed level, bids best first then asks; each row is the level's state
    levels = {}
    for r in book:
        k = (int(r["side"]), int(r["price"]))
        q, c = levels.get(k, (0, 0))
        levels[k] = (q + int(r["qty"]), c + 1)
    rows = _l2(l2)
    assert len({(sd, pr) for sd, pr, _, _ in rows}) == len(rows)
    assert [sd for sd, *_ in rows] == sorted(sd for sd, *_ in rows)
    for sd, pr, q, c in rows:
        assert levels.get((sd, pr), (0, 0)) == (q, c)
