"""``replay.apply_l2``: a starting depth plus L2 rows, against a dict of levels.

book_at's L2 view is this function over the rows after a checkpoint. It keeps two tables, a
direct one indexed by price offset when the prices lie close together and a hash table
otherwise (a BUY MARKET resting in a call stands at MAX_PRICE + 1); both must give exactly
what replaying the rows into a dict gives.
"""

import numpy as np
from hypothesis import given, settings, strategies as st

from exsim.exchange.schema import DEPTH_DTYPE, L2_DTYPE, MAX_PRICE, Side
from exsim.replay.rebuild import apply_l2

BUY, SELL = int(Side.BUY), int(Side.SELL)


def model(bids, asks, rows, depth):
    """The obviously correct answer: a dict of (side, price) -> (qty, count), last row wins."""
    levels = {}
    for side, book in ((BUY, bids), (SELL, asks)):
        for r in book:
            levels[(side, int(r["price"]))] = (int(r["qty"]), int(r["count"]))
    for r in rows:
        levels[(int(r["side"]), int(r["price"]))] = (int(r["qty"]), int(r["count"]))
    out = []
    for side, best_high in ((BUY, True), (SELL, False)):
        lv = sorted(((p, q, c) for (s, p), (q, c) in levels.items() if s == side and q != 0),
                    reverse=best_high)
        lv = lv if depth is None else lv[:depth]
        out.append(np.array(lv, DEPTH_DTYPE) if lv else np.zeros(0, DEPTH_DTYPE))
    return out


def depth_of(levels):
    return np.array(levels, DEPTH_DTYPE) if levels else np.zeros(0, DEPTH_DTYPE)


def l2_rows(rows):
    out = np.zeros(len(rows), L2_DTYPE)
    for i, (side, price, qty, count) in enumerate(rows):
        out[i]["side"], out[i]["price"], out[i]["qty"], out[i]["count"] = side, price, qty, count
    return out


def prices(spread):
    """Prices of one case: close together (the direct table), a few thousand ticks apart
    (either table, by the rows' count: the span limit is 4 ticks a row plus 1,024), on a
    power-of-two tick, negative, or out to MAX_PRICE + 1 (the hash table)."""
    return {"near": st.integers(990, 1010),
            "mid": st.integers(0, 6000),
            "tick": st.integers(0, 40).map(lambda k: k << 12),
            "negative": st.integers(-60, 20),
            "wide": st.one_of(st.integers(990, 1010),
                              st.sampled_from([0, 1, MAX_PRICE, MAX_PRICE + 1]))}[spread]


@st.composite
def cases(draw):
    spread = draw(st.sampled_from(["near", "mid", "tick", "negative", "wide"]))
    level = st.tuples(prices(spread), st.integers(1, 500), st.integers(1, 9))
    bids = draw(st.lists(level, max_size=8, unique_by=lambda t: t[0]))
    asks = draw(st.lists(level, max_size=8, unique_by=lambda t: t[0]))
    row = st.tuples(st.sampled_from([BUY, SELL]), prices(spread), st.integers(0, 500),
                    st.integers(0, 9))
    rows = draw(st.lists(row, max_size=40))
    depth = draw(st.one_of(st.none(), st.integers(0, 6)))
    return depth_of(bids), depth_of(asks), l2_rows(rows), depth


@settings(max_examples=300, deadline=None, database=None)
@given(cases())
def test_apply_l2_is_the_last_row_of_every_level(case):
    bids, asks, rows, depth = case
    got_bids, got_asks = apply_l2(bids, asks, rows, depth)
    want_bids, want_asks = model(bids, asks, rows, depth)
    assert got_bids.dtype == DEPTH_DTYPE and got_asks.dtype == DEPTH_DTYPE
    assert got_bids.tolist() == want_bids.tolist()
    assert got_asks.tolist() == want_asks.tolist()


def test_a_level_removed_and_added_again_comes_back_with_its_last_row():
    bids = depth_of([(100, 5, 1), (99, 7, 2)])
    rows = l2_rows([(BUY, 100, 0, 0), (SELL, 101, 3, 1), (BUY, 100, 9, 4), (BUY, 99, 0, 0)])
    got_bids, got_asks = apply_l2(bids, np.zeros(0, DEPTH_DTYPE), rows)
    assert got_bids.tolist() == [(100, 9, 4)]
    assert got_asks.tolist() == [(101, 3, 1)]


def test_a_buy_market_in_a_call_at_max_price_plus_one_keeps_its_own_level():
    # the span to price 0 is too wide for the direct table: the hash table answers
    rows = l2_rows([(BUY, MAX_PRICE + 1, 10, 1), (BUY, 0, 4, 1), (SELL, MAX_PRICE + 1, 2, 1)])
    got_bids, got_asks = apply_l2(np.zeros(0, DEPTH_DTYPE), np.zeros(0, DEPTH_DTYPE), rows)
    assert got_bids.tolist() == [(MAX_PRICE + 1, 10, 1), (0, 4, 1)]
    assert got_asks.tolist() == [(MAX_PRICE + 1, 2, 1)]


def test_counts_past_int32_and_any_structured_rows_are_kept_whole():
    rows = np.zeros(2, [("side", "u1"), ("price", "<i8"), ("qty", "<i8"), ("count", "<i8")])
    rows[0] = (BUY, 100, 7, 1 << 40)
    rows[1] = (SELL, 1 << 50, 3, (1 << 31) + 5)
    got_bids, got_asks = apply_l2(np.zeros(0, DEPTH_DTYPE), np.zeros(0, DEPTH_DTYPE), rows)
    assert got_bids.tolist() == [(100, 7, 1 << 40)]
    assert got_asks.tolist() == [(1 << 50, 3, (1 << 31) + 5)]
