"""A light price-time book model that generators keep while they generate (numba, explicit arrays).

Why generators need it: "cancel a live order" and "a limit at distance k from the best quote" are
only meaningful if the generator knows which orders are still resting and where the best quotes
are. This model applies the same rules as the engine for the messages generators emit (NEW limits
and CANCELs): price-time priority, a fill removes quantity from the front of the best level, a fill
prices at the resting order, a market or IOC rest never rests. So a generated cancel names an
order that the engine also holds live (tests check that the engine rejects none of them).

Layout: ``bk = (lv, od, live, st, lo)``, four int64 arrays and the window origins; every function
takes ``bk`` first. Few, wide arrays on purpose: each array handed to a numba call costs a
reference-count update, and a row per order keeps one order's fields in one cache line.
- ``lv[s, i, HEAD|TAIL|QTY|CNT]``: the level at price index i of symbol s (price ``lo[s] + i``,
  ``W`` indices); HEAD/TAIL are order slots or -1.
- ``od[slot, PX|OQTY|SIDE|SYM|PREV|NEXT|POS]``: one order (slot = order_id - 1); POS is its index
  in the live set, -1 when it is not live.
- ``live[0:n_live]``: the live set (slots): O(1) insert, delete and uniform random pick.
- ``st[s, BID|ASK|NBUY|NSELL]``: best bid index (-1 when none), best ask index (W when none),
  resting orders per side; ``st[n_sym, 0]`` is n_live.

Invariants: a level's qty and count are the sums over its FIFO; best bid < best ask (callers match
crossing orders before resting them). Known limit: memory is symbols x window width; the
generators size the window from their own price paths, so it is small (thousands of ticks).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["new_book", "book_add", "book_remove", "book_match", "book_pick_live"]

BUY = 0
SELL = 1


HEAD, TAIL, QTY, CNT = 0, 1, 2, 3
PX, OQTY, SIDE, SYM, PREV, NEXT, POS = 0, 1, 2, 3, 4, 5, 6
BID, ASK, NBUY, NSELL = 0, 1, 2, 3


def new_book(n_sym: int, width: int, capacity: int, lo: np.ndarray):
    """Return an empty book model: the tuple ``(lv, od, live, st, lo)`` of the module docstring."""
    lv = np.zeros((n_sym, width, 4), np.int64)
    lv[:, :, HEAD] = -1
    lv[:, :, TAIL] = -1
    od = np.zeros((capacity, 7), np.int64)
    od[:, PREV] = -1
    od[:, NEXT] = -1
    od[:, POS] = -1
    st = np.zeros((n_sym + 1, 4), np.int64)
    st[:n_sym, BID] = -1
    st[:n_sym, ASK] = width
    return (lv, od, np.zeros(capacity, np.int64), st, np.asarray(lo, np.int64))


@njit(cache=True)
def book_add(bk, slot, sym, side, px, qty):
    """Rest ``qty`` at price index ``px`` as order ``slot`` (at the back of its level). Returns None."""
    lv, od, live, st, lo = bk
    nsym = st.shape[0] - 1
    od[slot, PX] = px
    od[slot, OQTY] = qty
    od[slot, SIDE] = side
    od[slot, SYM] = sym
    od[slot, NEXT] = -1
    t = lv[sym, px, TAIL]
    od[slot, PREV] = t
    if t >= 0:
        od[t, NEXT] = slot
    else:
        lv[sym, px, HEAD] = slot
    lv[sym, px, TAIL] = slot
    lv[sym, px, QTY] += qty
    lv[sym, px, CNT] += 1
    if side == BUY:
        if px > st[sym, BID]:
            st[sym, BID] = px
    else:
        if px < st[sym, ASK]:
            st[sym, ASK] = px
    n = st[nsym, 0]
    live[n] = slot
    od[slot, POS] = n
    st[nsym, 0] = n + 1
    st[sym, NBUY + side] += 1


@njit(cache=True)
def book_remove(bk, slot):
    """Take order ``slot`` off the book entirely (cancel or complete fill). Returns None."""
    lv, od, live, st, lo = bk
    nsym = st.shape[0] - 1
    sym = od[slot, SYM]
    px = od[slot, PX]
    side = od[slot, SIDE]
    p, n = od[slot, PREV], od[slot, NEXT]
    if p >= 0:
        od[p, NEXT] = n
    else:
        lv[sym, px, HEAD] = n
    if n >= 0:
        od[n, PREV] = p
    else:
        lv[sym, px, TAIL] = p
    lv[sym, px, QTY] -= od[slot, OQTY]
    lv[sym, px, CNT] -= 1
    od[slot, OQTY] = 0
    if lv[sym, px, CNT] == 0:
        width = lv.shape[1]
        # The level emptied: if it was the best, walk outwards to the next occupied level.
        if side == BUY and st[sym, BID] == px:
            b = px - 1
            while b >= 0 and lv[sym, b, CNT] == 0:
                b -= 1
            st[sym, BID] = b
        elif side == SELL and st[sym, ASK] == px:
            a = px + 1
            while a < width and lv[sym, a, CNT] == 0:
                a += 1
            st[sym, ASK] = a
    # Swap-delete from the live set.
    i = od[slot, POS]
    nl = st[nsym, 0] - 1
    last = live[nl]
    live[i] = last
    od[last, POS] = i
    od[slot, POS] = -1
    st[nsym, 0] = nl
    st[sym, NBUY + side] -= 1


@njit(cache=True)
def book_match(bk, sym, side, px, qty):
    """Match an incoming order of ``side`` limited at price index ``px`` (use -1 / W for a market
    order) against the opposite side, front of the best level first. Returns the unfilled quantity."""
    lv, od, live, st, lo = bk
    width = lv.shape[1]
    while qty > 0:
        if side == BUY:
            b = st[sym, ASK]
            if b >= width or b > px:
                break
        else:
            b = st[sym, BID]
            if b < 0 or b < px:
                break
        slot = lv[sym, b, HEAD]
        take = min(qty, od[slot, OQTY])
        qty -= take
        if take == od[slot, OQTY]:
            book_remove(bk, slot)
        else:
            od[slot, OQTY] -= take
            lv[sym, b, QTY] -= take
    return qty


@njit(cache=True)
def book_pick_live(bk, u):
    """Return the slot of a live order chosen uniformly by ``u`` in [0, 1), or -1 if none is live."""
    live, st = bk[2], bk[3]
    n = st[st.shape[0] - 1, 0]
    if n == 0:
        return -1
    i = int(u * n)
    if i >= n:
        i = n - 1
    return live[i]
