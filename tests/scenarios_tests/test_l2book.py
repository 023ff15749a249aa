"""scenarios.loaders.l2book.top_of_book (ranked sparse book) equals an obviously right per-price dict
replay on random small streams, and a stream spanning a huge tick range needs no per-tick memory."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exsim.exchange.schema import L2_DTYPE
from exsim.scenarios.loaders.l2book import EMPTY_ASK, EMPTY_BID, price_ranks, top_of_book


def _obvious_top(l2, seq_after, depth):
    """Per-price dict per side, sorted at every query: slow and plainly right."""
    book = ({}, {})
    out = np.zeros((len(seq_after), depth, 4), np.int64)
    j = 0
    for i, s in enumerate(seq_after):
        while j < len(l2) and l2["seq"][j] <= s:
            side, px, q = int(l2["side"][j]), int(l2["price"][j]), int(l2["qty"][j])
            if q:
                book[side][px] = q
            else:
                book[side].pop(px, None)
            j += 1
        asks, bids = sorted(book[1]), sorted(book[0], reverse=True)
        for d in range(depth):
            out[i, d, 0], out[i, d, 1] = (asks[d], book[1][asks[d]]) if d < len(asks) else (EMPTY_ASK, 0)
            out[i, d, 2], out[i, d, 3] = (bids[d], book[0][bids[d]]) if d < len(bids) else (EMPTY_BID, 0)
    return out


def _rows(raw):
    l2 = np.zeros(len(raw), L2_DTYPE)
    for k, (gap, side, px, q) in enumerate(raw):
        l2[k]["seq"] = (l2[k - 1]["seq"] if k else 1) + gap
        l2[k]["side"], l2[k]["price"], l2[k]["qty"] = side, px, q
    return l2


PRICE = st.one_of(st.integers(95, 105), st.integers(-10**12, 10**15))   # clustered and very wide
ROW = st.tuples(st.integers(0, 2), st.integers(0, 1), PRICE, st.integers(0, 3))   # qty 0: removal


@settings(max_examples=150, deadline=None)
@given(raw=st.lists(ROW, max_size=60), queries=st.lists(st.integers(0, 130), max_size=25),
       depth=st.integers(0, 4))
def test_top_of_book_equals_the_obvious_dict_replay(raw, queries, depth):
    l2 = _rows(raw)
    seq_after = np.array(sorted(queries), np.int64)
    assert np.array_equal(top_of_book(l2, seq_after, depth), _obvious_top(l2, seq_after, depth))


@settings(max_examples=50, deadline=None)
@given(px=st.lists(st.integers(-2**62, 2**62), max_size=200))
def test_price_ranks_are_the_sorted_distinct_prices(px):
    a = np.array(px, np.int64)
    prices, ranks = price_ranks(a)
    assert np.array_equal(prices, np.unique(a)) and np.array_equal(prices[ranks], a)


def test_wide_tick_range_needs_no_per_tick_memory():
    # a per-tick book over this range would need 16 bytes x 1e17 ticks
    l2 = _rows([(1, 0, 10, 5), (1, 1, 10**17, 2), (1, 0, 11, 1), (1, 0, 11, 0)])
    top = top_of_book(l2, np.array([3, 5], np.int64), 2)   # seqs are 2, 3, 4, 5
    assert top[0, 0].tolist() == [10**17, 2, 10, 5] and top[1, 0].tolist() == [10**17, 2, 10, 5]
    assert top[1, 1].tolist() == [EMPTY_ASK, 0, EMPTY_BID, 0]


def test_negative_depth_is_a_clear_error():
    with pytest.raises(ValueError, match="depth must be >= 0"):
        top_of_book(_rows([(1, 0, 10, 5)]), np.array([1]), -1)
