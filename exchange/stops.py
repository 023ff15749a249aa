"""Stop and stop-limit orders: waiting in the stop books, released by the last trade price.

``_add_stop`` parks an accepted stop (its level in the symbol's stop ladder for its side);
``_release_stops`` elects, after a message that traded or when a symbol enters CONTINUOUS, every
stop the last price reached, in trigger order, and executes each as a new aggressor (a cascade:
its fills may trigger more). ``_remove_pending`` and ``_modify_pending`` cancel and modify a
stop that has not been elected.

Invariant: after every message no pending stop of a CONTINUOUS symbol is triggered.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import (
    M_INDEX_COUNT, M_STOPS_LIVE, alloc_order, append_to_level, detach_from_level,
    find_or_add_level, remove_level, set_cold,
)
from .expiry import heap_push
from .matching import _execute_cold
from .order_index import index_insert, index_put
from .removal import remove_order
from .rows import write_event
from .schema import Event, OrderType, Phase, Reason

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=(
    "exsim.exchange.auction", "exsim.exchange.book", "exsim.exchange.expiry",
    "exsim.exchange.fillable", "exsim.exchange.order_index", "exsim.exchange.prefetch",
    "exsim.exchange.removal", "exsim.exchange.rows", "exsim.exchange.schema",
    "exsim.exchange.validation", "exsim.exchange.matching"))

_STOP = int(OrderType.STOP)
_STOP_LIMIT = int(OrderType.STOP_LIMIT)
_CONTINUOUS = int(Phase.CONTINUOUS)


@njit(cache=True, _nrt=False, inline="always")
def _add_stop(m, at, expire_ts, arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels,
              meta, expiry):
    """Put an accepted STOP or STOP_LIMIT at the back of its trigger price in its stop book.

    ``at`` as for ``_rest``. A pending stop keeps its limit price (0 for a STOP) in ``price``.
    """
    side = np.int64(m.side)
    b = np.int64(m.symbol) * 2 + side
    lv = find_or_add_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side,
                           m.stop_price)
    r = alloc_order(arena, meta)
    o = arena[r]
    o.order_id = m.order_id
    o.price = m.price if m.order_type == _STOP_LIMIT else 0
    o.leaves = m.qty
    o.filled = 0
    o.symbol = m.symbol
    o.trader = m.trader
    o.side = side
    o.flags = m.flags
    o.hidden = 0
    set_cold(arena, arena_ext, r, 0, m.stop_price, expire_ts, m.order_type, m.tif, 1)
    append_to_level(arena, levels, r, lv)
    stops[b].live += 1
    stops[b].stop_qty += m.qty
    if at >= 0:
        index_put(index, at, m.symbol, m.order_id, r)
    else:
        index_insert(index, m.symbol, m.order_id, r)
    meta[M_INDEX_COUNT] += 1
    meta[M_STOPS_LIVE] += 1
    if expire_ts != 0:
        heap_push(expiry, arena, arena_ext, meta, r)


@njit(cache=True, _nrt=False, inline="always")
def _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels, meta,
                    expiry, r, bucket=-1):
    """Take pending stop ``r`` out of its stop book (dropping an emptied trigger level)."""
    o = arena[r]
    side = np.int64(o.side)
    b = np.int64(o.symbol) * 2 + side
    lv = o.level
    stops[b].stop_qty -= o.leaves
    remove_order(arena, arena_ext, levels, stops, index, expiry, meta, r, bucket)
    meta[M_STOPS_LIVE] -= 1
    if levels[lv].count == 0:
        remove_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side, lv)


@njit(cache=True, _nrt=False, inline="always")
def _next_triggered(sym, levels, stops, ladder_levels, last):
    """Return the arena slot of the next stop of ``sym`` to release at last price ``last``, or
    -1: the BUY stop with the lowest trigger if ``last`` reached it, else the SELL stop with the
    highest; FIFO among equal triggers (each stop book's best entry is its next release)."""
    bk = stops[np.int64(sym) * 2]
    if bk.n > 0:
        L = levels[ladder_levels[bk.off + bk.n - 1]]
        if L.price <= last:
            return np.int64(L.head)
    bk = stops[np.int64(sym) * 2 + 1]
    if bk.n > 0:
        L = levels[ladder_levels[bk.off + bk.n - 1]]
        if L.price >= last:
            return np.int64(L.head)
    return np.int64(-1)


@njit(cache=True, _nrt=False)
def _release_stops(seq, ts, sym, arena, arena_ext, levels, index, books, ladder_keys,
                   ladder_levels, meta, symbols, stops, expiry, fills, l2, events, cnt):
    """Release the triggered stops of ``sym`` one at a time (semantics.md, Stops): TRIGGERED,
    then matched as a MARKET (STOP) or a LIMIT at its price (STOP_LIMIT), resting or cancelled
    by its tif, until none is triggered; the trades of a released stop may trigger more.
    Stops are released only while the symbol is CONTINUOUS: a band breach (the band in meta,
    see ``_match``) by one of them ends the cascade."""
    while True:
        # no trade yet: no stop is triggered (a SELL stop is not reached by a last price of 0)
        if symbols[sym].phase != _CONTINUOUS or symbols[sym].last_price == 0:
            return
        r = _next_triggered(sym, levels, stops, ladder_levels, symbols[sym].last_price)
        if r < 0:
            return
        o = arena[r]
        side = np.int64(o.side)
        order_id = o.order_id
        trader = o.trader
        flags = o.flags
        qty = o.leaves
        price = o.price
        x = arena_ext[r]   # a pending stop's ext row is always written
        is_market = x.order_type == _STOP
        tif = np.int64(x.tif)
        expire_ts = x.expire_ts
        _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels, meta,
                        expiry, r)
        write_event(events, cnt, seq, ts, symbols, sym, order_id, Event.TRIGGERED, Reason.NONE, 0,
                    qty, 0)
        _execute_cold(np.int64(seq), np.int64(ts), np.int64(sym), side, is_market, tif, price,
                      qty, np.int64(0), np.uint64(order_id), np.uint32(trader), np.uint8(flags),
                      np.int64(0), np.int64(expire_ts), np.int64(-1), arena, arena_ext, levels,
                      index, books, ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2,
                      events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _modify_pending(m, seq, r, arena, arena_ext, levels, stops, ladder_keys, ladder_levels, meta,
                    symbols, events, cnt):
    """Apply a valid MODIFY to pending stop ``r`` (semantics.md, MODIFY: pending stops)."""
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    L = levels[lv]
    write_event(events, cnt, seq, m.ts, symbols, m.symbol, m.order_id, Event.MODIFIED, Reason.NONE,
                o.filled, m.qty, 0)
    x = arena_ext[r]
    if x.order_type == _STOP_LIMIT:
        o.price = m.price
    stops[np.int64(m.symbol) * 2 + side].stop_qty += m.qty - o.leaves
    if m.stop_price == x.stop_price and m.qty <= o.leaves:
        L.qty -= o.leaves - m.qty
        o.leaves = m.qty
        return
    b = np.int64(m.symbol) * 2 + side
    detach_from_level(arena, levels, r)
    if L.count == 0:
        remove_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side, lv)
    o.leaves = m.qty
    x.stop_price = m.stop_price
    nlv = find_or_add_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side,
                            m.stop_price)
    append_to_level(arena, levels, r, nlv)
