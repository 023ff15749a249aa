"""Top of book after given sequence numbers, rebuilt from one symbol's L2 update stream (numba).

L2 rows give the new total at a price (0 removes the level), so a book of per-price totals is all
that is needed. The pass keeps dense per-price arrays over [min price, max price] of the stream
and the best index per side; a level emptying at the best walks to the next occupied price.

Invariant: the result after seq s reflects exactly the L2 rows with seq <= s. Known limit: memory
is 16 bytes x (max price - min price + 1) of the stream, fine for tick ranges up to ~10^7.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["top_of_book", "EMPTY_ASK", "EMPTY_BID"]

EMPTY_ASK = np.iinfo(np.int64).max   # price reported for a missing ask level
EMPTY_BID = -1                       # price reported for a missing bid level
_EMPTY_ASK = EMPTY_ASK


@njit(cache=True)
def _top_kernel(l2_seq, l2_side, l2_px, l2_qty, seq_after, depth, pmin, pmax):
    n = seq_after.shape[0]
    width = pmax - pmin + 1
    qty = np.zeros((2, width), np.int64)
    out = np.zeros((n, depth, 4), np.int64)
    best_bid = -1          # index into qty[0]
    best_ask = width       # index into qty[1]
    j = 0
    m = l2_seq.shape[0]
    for i in range(n):
        while j < m and l2_seq[j] <= seq_after[i]:
            s = l2_side[j]
            k = l2_px[j] - pmin
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
                out[i, d, 0] = a + pmin
                out[i, d, 1] = qty[1, a]
                a += 1
            else:
                out[i, d, 0] = _EMPTY_ASK
            while b >= 0 and qty[0, b] == 0:
                b -= 1
            if b >= 0:
                out[i, d, 2] = b + pmin
                out[i, d, 3] = qty[0, b]
                b -= 1
            else:
                out[i, d, 2] = -1
    return out


def top_of_book(l2: np.ndarray, seq_after: np.ndarray, depth: int) -> np.ndarray:
    """Return the top ``depth`` levels after each seq in ``seq_after`` (ascending) from one symbol's
    L2 rows (L2_DTYPE, in emission order, seq ascending) as an int64 array (len(seq_after), depth, 4): ask price, ask qty, bid price,
    bid qty; an empty ask level has price int64 max, an empty bid level -1, both qty 0."""
    if len(l2) == 0:
        pmin = pmax = 0
    else:
        pmin, pmax = int(l2["price"].min()), int(l2["price"].max())
    return _top_kernel(l2["seq"].astype(np.int64), l2["side"].astype(np.int64), l2["price"].astype(np.int64),
                       l2["qty"].astype(np.int64), seq_after.astype(np.int64), depth, pmin, pmax)


