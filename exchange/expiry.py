"""The expiry heap: DAY and GTD orders by the time they leave, and the clock arithmetic.

``expiry`` (EXPIRY_DTYPE) is a binary min-heap of ``meta[M_EXPIRY_N]`` entries ordered by
``(expire_ts, symbol, order_id)`` (the order in which docs/semantics.md expires orders). Each
entry names its order's arena ``slot``, and that order's ``arena_ext`` ``xpos`` is the entry's
heap position, so any live order leaves the heap in O(log n) whatever took it out (fill, cancel,
STP, expiry, release of a stop). Invariants: ``arena_ext[expiry[k].slot].xpos == k`` for every
entry; a live order is in the heap exactly while its arena ``marks`` has MARK_EXPIRING (its ext
row then valid); the caller has checked there is room before a push.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import M_EXPIRY_N

guard(__name__, __file__, deps=("exsim.exchange.book",))

DAY_NS = 86_400 * 1_000_000_000
_I64_MAX = (1 << 63) - 1


@njit(cache=True, _nrt=False, inline="always")
def day_expiry(ts, session_close):
    """Return the first instant ``t > ts`` with ``t == session_close (mod one day)``, or the
    largest int64 when that instant lies past it (the clock cannot reach it anyway)."""
    # formed from the remainders so no intermediate leaves int64, whatever ts is
    ahead = DAY_NS - (ts % DAY_NS - session_close) % DAY_NS   # in (0, DAY_NS]
    if ts > _I64_MAX - ahead:
        return _I64_MAX
    return ts + ahead


@njit(cache=True, _nrt=False, inline="always")
def _before(expiry, a, b):
    """Whether heap entry ``a`` expires before entry ``b``."""
    x = expiry[a]
    y = expiry[b]
    if x.expire_ts != y.expire_ts:
        return x.expire_ts < y.expire_ts
    if x.symbol != y.symbol:
        return x.symbol < y.symbol
    return x.order_id < y.order_id


@njit(cache=True, _nrt=False, inline="always")
def _swap(expiry, arena_ext, a, b):
    ta = expiry[a].expire_ts
    oa = expiry[a].order_id
    sa = expiry[a].symbol
    ra = expiry[a].slot
    expiry[a].expire_ts = expiry[b].expire_ts
    expiry[a].order_id = expiry[b].order_id
    expiry[a].symbol = expiry[b].symbol
    expiry[a].slot = expiry[b].slot
    expiry[b].expire_ts = ta
    expiry[b].order_id = oa
    expiry[b].symbol = sa
    expiry[b].slot = ra
    arena_ext[expiry[a].slot].xpos = a
    arena_ext[expiry[b].slot].xpos = b


@njit(cache=True, _nrt=False)
def _sift_up(expiry, arena_ext, k):
    while k > 0:
        p = (k - 1) >> 1
        if not _before(expiry, k, p):
            break
        _swap(expiry, arena_ext, k, p)
        k = p


@njit(cache=True, _nrt=False)
def _sift_down(expiry, arena_ext, n, k):
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and _before(expiry, c + 1, c):
            c += 1
        if not _before(expiry, c, k):
            break
        _swap(expiry, arena_ext, k, c)
        k = c


@njit(cache=True, _nrt=False)
def heap_push(expiry, arena, arena_ext, meta, r):
    """Add live order ``r`` (marked MARK_EXPIRING, its ext row written, not in the heap) to the
    heap."""
    n = meta[M_EXPIRY_N]
    e = expiry[n]
    o = arena[r]
    e.expire_ts = arena_ext[r].expire_ts
    e.order_id = o.order_id
    e.symbol = o.symbol
    e.slot = r
    arena_ext[r].xpos = n
    meta[M_EXPIRY_N] = n + 1
    _sift_up(expiry, arena_ext, n)


@njit(cache=True, _nrt=False)
def heap_remove(expiry, arena_ext, meta, r):
    """Take order ``r`` (in the heap) out of it and set its ``xpos`` to -1."""
    k = np.int64(arena_ext[r].xpos)
    n = meta[M_EXPIRY_N] - 1
    meta[M_EXPIRY_N] = n
    arena_ext[r].xpos = -1
    if k == n:
        return
    last = expiry[n]
    e = expiry[k]
    e.expire_ts = last.expire_ts
    e.order_id = last.order_id
    e.symbol = last.symbol
    e.slot = last.slot
    arena_ext[e.slot].xpos = k
    if k > 0 and _before(expiry, k, (k - 1) >> 1):
        _sift_up(expiry, arena_ext, k)
    else:
        _sift_down(expiry, arena_ext, n, k)
