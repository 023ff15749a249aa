"""Top of book after given sequence numbers, rebuilt from one symbol's L2 update stream (numba).

L2 rows give the new total at a price (0 removes the level), so a book of per-price totals is all
that is needed. The pass first compresses prices: an open-addressing hash gives each distinct
price of the stream a slot, the distinct prices are sorted once, and every row gets the rank of
its price. The book is then two dense arrays indexed by rank (one per side) plus the best rank per
side; a level emptying at the best walks to the next occupied rank.

Why ranks rather than ticks: a real capture spans a wide tick range (the Binance BTCUSDT sample
spans ~1.8e7 ticks but holds ~3e4 distinct prices), and per-tick arrays cost 16 bytes a tick to
allocate, zero and walk. Ranks keep the order of prices, so every best-level walk and depth walk
visits the same occupied levels in the same order as a per-tick book would, and the results are
identical; only the empty ticks between distinct prices disappear.

Invariant: the result after seq s reflects exactly the L2 rows with seq <= s.
Cost: memory O(rows) (hash table, ranks, two rank-indexed arrays); time O(rows) for the hash pass,
O(d log d) to sort the d distinct prices, O(rows + queries x depth) for the replay plus the walks
over emptied ranks.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["top_of_book", "price_ranks", "EMPTY_ASK", "EMPTY_BID"]

EMPTY_ASK = np.iinfo(np.int64).max   # price reported for a missing ask level
EMPTY_BID = -1                       # price reported for a missing bid level
_EMPTY_ASK = EMPTY_ASK
_FIB = np.uint64(11400714819323198485)   # 2^64 / golden ratio: spreads nearby prices over the table


@njit(cache=True)
def _hash_prices(px):
    m = px.shape[0]
    bits = 4
    while (1 << bits) < 2 * m:          # load factor <= 1/2 keeps linear probes short
        bits += 1
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, np.int64)    # slot + 1 of the price hashed here; 0 = empty
    distinct = np.empty(m, np.int64)         # slot -> price, in first-seen order
    slot = np.empty(m, np.int64)             # row -> slot
    d = 0
    for j in range(m):
        p = px[j]
        h = np.int64((np.uint64(p) * _FIB) >> shift)
        while table[h] != 0 and distinct[table[h] - 1] != p:
            h = (h + 1) & mask
        if table[h] == 0:
            distinct[d] = p
            d += 1
            table[h] = d
        slot[j] = table[h] - 1
    return table, distinct[:d], slot


@njit(cache=True)
def _ranks_from_sorted(table, distinct, slot, prices):
    mask = table.shape[0] - 1
    bits = 0
    while (1 << bits) < table.shape[0]:
        bits += 1
    shift = np.uint64(64 - bits)
    rank_of_slot = np.empty(prices.shape[0], np.int64)
    for r in range(prices.shape[0]):
        p = prices[r]
        h = np.int64((np.uint64(p) * _FIB) >> shift)
        while distinct[table[h] - 1] != p:   # every sorted price is in the table
            h = (h + 1) & mask
        rank_of_slot[table[h] - 1] = r
    ranks = np.empty(slot.shape[0], np.int64)
    for j in range(slot.shape[0]):
        ranks[j] = rank_of_slot[slot[j]]
    return ranks


def price_ranks(px: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(prices, ranks)`` for an int64 price array: the distinct prices ascending, and for
    each input row the index of its price in them (so ``prices[ranks] == px``)."""
    table, distinct, slot = _hash_prices(np.ascontiguousarray(px, dtype=np.int64))
    prices = np.sort(distinct)           # numpy's sort: the d distinct prices only
    return prices, _ranks_from_sorted(table, distinct, slot, prices)


@njit(cache=True)
def _top_kernel(l2_seq, l2_side, rank, prices, l2_qty, seq_after, depth):
    n = seq_after.shape[0]
    width = prices.shape[0]
    qty = np.zeros((2, width), np.int64)
    out = np.zeros((n, depth, 4), np.int64)
    best_bid = -1          # rank into qty[0]
    best_ask = width       # rank into qty[1]
    j = 0
    m = l2_seq.shape[0]
    for i in range(n):
        while j < m and l2_seq[j] <= seq_after[i]:
            s = l2_side[j]
            k = rank[j]
            qty[s, k] = l2_qty[j]
            if s == 0:
                if l2_qty[j] > 0 and k > best_bid:
                    best_bid = k
                elif l2_qty[j] == 0 and k == best_bid:
                    while best_bid >= 0 and qty[0, best_bid] == 0:
                        best_bid -= 1
            else:
                if l2_qty[j] > 0 and k < best_ask:
                    best_ask = k
                elif l2_qty[j] == 0 and k == best_ask:
                    while best_ask < width and qty[1, best_ask] == 0:
                        best_ask += 1
            j += 1
        a = best_ask
        b = best_bid
        for d in range(depth):
            while a < width and qty[1, a] == 0:
                a += 1
            if a < width:
                out[i, d, 0] = prices[a]
                out[i, d, 1] = qty[1, a]
                a += 1
            else:
                out[i, d, 0] = _EMPTY_ASK
            while b >= 0 and qty[0, b] == 0:
                b -= 1
            if b >= 0:
                out[i, d, 2] = prices[b]
                out[i, d, 3] = qty[0, b]
                b -= 1
            else:
                out[i, d, 2] = -1
    return out


def top_of_book(l2: np.ndarray, seq_after: np.ndarray, depth: int) -> np.ndarray:
    """Return the top ``depth`` levels after each seq in ``seq_after`` (ascending) from one symbol's
    L2 rows (L2_DTYPE, in emission order, seq ascending) as an int64 array (len(seq_after), depth, 4):
    ask price, ask qty, bid price, bid qty; an empty ask level has price int64 max, an empty bid
    level -1, both qty 0. Memory follows the distinct prices of ``l2``, not their tick range.

    Raises ValueError when ``depth`` is negative."""
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    prices, rank = price_ranks(l2["price"])
    return _top_kernel(l2["seq"].astype(np.int64), l2["side"].astype(np.int64), rank, prices,
                       l2["qty"].astype(np.int64), seq_after.astype(np.int64), depth)
