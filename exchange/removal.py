"""Taking one live order out of every structure that holds it.

A live order is in its price level (or its stop book's trigger level), the order-id index, its
book's live count and, if it expires, the expiry heap; ``remove_order`` undoes all of them and
frees its arena slot, so no caller can forget one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import M_INDEX_COUNT, MARK_EXPIRING, detach_from_level, free_order, reserve_slices
from .expiry import heap_remove
from .order_index import index_remove, index_remove_at

guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.expiry", "exsim.exchange.order_index"))


@njit(cache=True, _nrt=False, inline="always")
def remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket=-1):
    """Unlink live order ``r`` from its level, the index, the expiry heap and its book; free its
    slot. ``books`` is the order books for a resting order, the stop books for a pending stop.

    ``bucket``: the order's index bucket if the caller just probed for it (-1: look it up).
    The level is left in place even if empty: the caller decides when to drop it.
    """
    o = arena[r]
    marks = o.marks
    bk = books[np.int64(o.symbol) * 2 + o.side]
    if o.hidden != 0:
        levels[o.level].hidden -= o.hidden
        bk.slices -= reserve_slices(o.hidden, arena_ext[r].display)
    detach_from_level(arena, levels, r)
    bk.live -= 1
    if bucket >= 0:
        index_remove_at(index, bucket)
    else:
        index_remove(index, o.symbol, o.order_id)
    meta[M_INDEX_COUNT] -= 1
    if marks & MARK_EXPIRING:
        heap_remove(expiry, arena_ext, meta, r)
    free_order(arena, meta, r)
