"""The numba side of checkpoints: book state <-> CHECKPOINT_DTYPE rows, without matching.

``collect_orders`` writes the live orders in priority order (what ``Engine.checkpoint`` stores:
every resting order, then every pending stop; see ``collect_orders``),
``check_rows`` checks rows read back before anything is loaded, ``load_orders`` builds books
from rows that passed, and ``orders_equal`` compares rows with the live orders in place. The
byte layout around the rows is ``exchange.checkpoint``'s; these kernels see only the rows.

Invariants: ``load_orders(collect_orders(state))`` rebuilds the same books and stop books (same
priority, same per-level totals and reserves) and an expiry heap with the same entries (its
layout may differ, its order of expiry cannot: the key is unique); ``orders_equal(rows)`` is exactly ``collect_orders() == rows``; none
of them allocates or raises on row content (``check_rows`` returns a ROW_* code instead).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import (
    M_INDEX_COUNT, M_STOPS_LIVE, alloc_level, alloc_order, append_to_level, cold_fields,
    ladder_key, reserve_slices, set_cold,
)
from .expiry import heap_push
from .order_index import index_find, index_home, index_probe, index_put
from .prefetch import prefetch
from .schema import CALL_MARKET_PRICE, KNOWN_FLAGS, MAX_LEVEL_QTY, MAX_QTY, OrderType, Side, Tif

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.expiry", "exsim.exchange.order_index",
                                "exsim.exchange.prefetch", "exsim.exchange.schema"))

_BUY = int(Side.BUY)
_SELL = int(Side.SELL)
_LIMIT = int(OrderType.LIMIT)
_MARKET = int(OrderType.MARKET)
_CALL_BUY = CALL_MARKET_PRICE[0]
_CALL_SELL = CALL_MARKET_PRICE[1]
_STOP = int(OrderType.STOP)
_STOP_LIMIT = int(OrderType.STOP_LIMIT)
_GTC = int(Tif.GTC)
_IOC = int(Tif.IOC)
_FOK = int(Tif.FOK)
_DAY = int(Tif.DAY)
_GTD = int(Tif.GTD)


@njit(cache=True, _nrt=False, inline="always")
def _put_row(out, k, arena, arena_ext, r):
    o = arena[r]
    display, stop_price, expire_ts, order_type, tif, pending = cold_fields(arena, arena_ext, r)
    row = out[k]
    row.order_id = o.order_id
    row.price = o.price
    row.qty = o.leaves
    row.filled = o.filled
    row.symbol = o.symbol
    row.trader = o.trader
    row.side = o.side
    row.flags = o.flags
    row.hidden = o.hidden
    row.stop_price = stop_price
    row.display_qty = display
    row.expire_ts = expire_ts
    row.order_type = order_type
    row.tif = tif
    row.pending = pending


@njit(cache=True, _nrt=False)
def collect_orders(books, stops, levels, arena, arena_ext, ladder_levels, symbols, out, which=3):
    """Write the live orders of ``symbols`` into ``out`` (CHECKPOINT_DTYPE) in priority order.

    ``which``: 1 the resting orders, 2 the pending stops, 3 both (resting first). Resting
    orders: per symbol, bids best first, then asks best first; FIFO within a level. Pending
    stops: per symbol, BUY stops by rising stop price, then SELL stops by falling stop price
    (each in release order); FIFO among equal stop prices. Returns the count.
    """
    k = 0
    for part in range(2):
        if not (which >> part) & 1:
            continue
        src = books if part == 0 else stops
        for s in symbols:
            for side in range(2):
                bk = src[np.int64(s) * 2 + side]
                for j in range(bk.off + bk.n - 1, bk.off - 1, -1):
                    r = levels[ladder_levels[j]].head
                    while r >= 0:
                        _put_row(out, k, arena, arena_ext, r)
                        k += 1
                        r = arena[r].next
    return k


# what check_rows found wrong with a checkpoint row (checkpoint.row_problem words each one)
(ROW_OK, ROW_SYMBOL, ROW_SIDE, ROW_QTY, ROW_FILLED, ROW_FLAGS, ROW_PRICE, ROW_ORDER,
 ROW_LEVEL_QTY, ROW_CROSSED, ROW_PENDING, ROW_TYPE, ROW_TIF, ROW_HIDDEN, ROW_DISPLAY,
 ROW_STOP_PRICE, ROW_EXPIRY) = range(17)


@njit(cache=True, _nrt=False, inline="always")
def _row_fields(row, books, b, call):
    """Check one row's own fields (not its place); return ROW_OK or the first problem.
    ``call``: the row's symbol has an auction pending (a MARKET may rest at its call price)."""
    if row.qty <= 0 or row.qty > MAX_QTY:
        return ROW_QTY
    if row.filled < 0 or row.filled > MAX_LEVEL_QTY or (row.pending == 1 and row.filled != 0):
        return ROW_FILLED
    if row.flags & ~KNOWN_FLAGS:
        return ROW_FLAGS
    if row.pending > 1:
        return ROW_PENDING
    lo = books[b].min_price
    hi = books[b].max_price
    if row.pending == 0:
        if row.order_type == _MARKET:
            if not call:
                return ROW_TYPE
        elif row.order_type != _LIMIT:
            return ROW_TYPE
        if row.tif != _GTC and row.tif != _DAY and row.tif != _GTD:
            return ROW_TIF
        if row.order_type == _MARKET:
            if row.price != (_CALL_BUY if row.side == _BUY else _CALL_SELL):
                return ROW_PRICE
        elif row.price < lo or row.price > hi:
            return ROW_PRICE
        if row.stop_price != 0:
            return ROW_STOP_PRICE
        if row.display_qty < 0 or row.display_qty > MAX_QTY or (
                row.display_qty > 0 and row.qty > row.display_qty):
            return ROW_DISPLAY
        if row.hidden < 0 or row.hidden > MAX_QTY - row.qty or (
                row.hidden > 0 and row.display_qty == 0):
            return ROW_HIDDEN
    else:
        if row.order_type != _STOP and row.order_type != _STOP_LIMIT:
            return ROW_TYPE
        if row.tif != _GTC and row.tif != _IOC and row.tif != _DAY and row.tif != _GTD:
            return ROW_TIF
        if row.flags != 0:
            return ROW_FLAGS
        if row.order_type == _STOP:
            if row.price != 0:
                return ROW_PRICE
        elif row.price < lo or row.price > hi:
            return ROW_PRICE
        if row.stop_price < lo or row.stop_price > hi:
            return ROW_STOP_PRICE
        if row.display_qty != 0:
            return ROW_DISPLAY
        if row.hidden != 0:
            return ROW_HIDDEN
    if (row.tif == _DAY or row.tif == _GTD) != (row.expire_ts != 0):
        return ROW_EXPIRY
    return ROW_OK


@njit(cache=True, _nrt=False)
def check_rows(rows, books, nsym, level_count, stop_level_count, calls):
    """Check checkpoint ``rows`` against the symbols' ``books`` (their price bands) before any
    is loaded; return (ROW_OK, len(rows)) or (the first problem's ROW_* code, its row index).

    ``calls[symbol]`` is nonzero for a symbol with an auction pending (in a call, or halted in
    one): its book may be crossed and a MARKET may rest at ``CALL_MARKET_PRICE[side]``.
    A row must name a symbol below ``nsym`` and a side, hold 1..MAX_QTY open (shown plus
    reserve) and 0..MAX_LEVEL_QTY filled (so the kernel's sums stay in int64), carry known flags
    only. A resting row (pending 0) is a LIMIT with tif GTC, DAY or GTD and a price in band (or,
    in a call, a MARKET at its call price), no
    stop price, shown qty at most its display size and a reserve only with a display size. A
    pending row (pending 1) is a STOP (price 0) or STOP_LIMIT (price in band) with tif GTC, IOC,
    DAY or GTD, a stop price in band, no flags, display, reserve or fills. DAY and GTD rows have
    an expiry, others none. Rows come in ``collect_orders`` order: all resting rows (symbols
    ascending, bids then asks, best level first), then all pending rows (symbols ascending, BUY
    stops by rising then SELL stops by falling stop price); a level's (or a trigger price's)
    orders total at most MAX_LEVEL_QTY, and no symbol's best bid may reach its best ask but in
    a call. Fills
    ``level_count[book]`` and ``stop_level_count[book]`` with each book's number of levels and
    trigger prices. One pass, O(1) per row.
    """
    prev_b = np.int64(-1)          # book of the previous row, pending books after 2 * nsym
    prev_price = np.int64(0)
    level_qty = np.int64(0)
    bid_symbol = np.int64(-1)      # symbol of the last best bid seen, and its price
    bid_price = np.int64(0)
    for i in range(len(rows)):
        row = rows[i]
        sym = np.int64(row.symbol)
        if sym >= nsym:
            return ROW_SYMBOL, i
        if row.side > _SELL:
            return ROW_SIDE, i
        b = sym * 2 + row.side
        code = _row_fields(row, books, b, calls[sym] != 0)
        if code != ROW_OK:
            return code, i
        pending = row.pending == 1
        open_qty = row.qty + row.hidden
        if pending:
            pb = 2 * nsym + b
            price = row.stop_price
            # stop books release BUY stops lowest first (like asks), SELL highest first
            falling = row.side == _SELL
        else:
            pb = b
            price = row.price
            falling = row.side == _BUY
        if pb < prev_b:
            return ROW_ORDER, i
        if pb == prev_b and price == prev_price:
            if level_qty > MAX_LEVEL_QTY - open_qty:
                return ROW_LEVEL_QTY, i
            level_qty += open_qty
        else:
            # a new level: after the previous one of its book in priority order
            if pb == prev_b and falling == (price > prev_price):
                return ROW_ORDER, i
            if pb != prev_b and not pending:
                if row.side == _BUY:
                    bid_symbol, bid_price = sym, price
                elif bid_symbol == sym and bid_price >= price and calls[sym] == 0:
                    return ROW_CROSSED, i
            if pending:
                stop_level_count[b] += 1
            else:
                level_count[b] += 1
            level_qty = open_qty
        prev_b, prev_price = pb, price
    return ROW_OK, len(rows)


@njit(cache=True, _nrt=False)
def load_orders(rows, arena, arena_ext, levels, index, books, stops, ladder_keys, ladder_levels,
                meta, expiry):
    """Put checkpoint ``rows`` (passed by ``check_rows``) into empty books and stop books
    without matching, and every order with an expiry into the expiry heap.

    The caller has sized every array for all rows and set each book's and stop book's ``n`` to
    its level count (``check_rows``) with an empty ladder region of at least that. Levels arrive
    best first (a stop book's next release first), so each is written straight to its final
    ladder slot, from the top down: O(1) per row (inserting them one by one moved every better
    level, O(levels^2) per book). Returns -1 when all rows are loaded, or the index of the first
    row whose (symbol, order id) an earlier row already holds.
    """
    prev_b = np.int64(-1)
    prev_price = np.int64(0)
    pos = np.int64(0)
    lv = np.int64(-1)
    for i in range(len(rows)):
        row = rows[i]
        p = index_probe(index, row.symbol, row.order_id)
        if p >= 0:
            return i
        side = np.int64(row.side)
        pending = row.pending == 1
        b = np.int64(row.symbol) * 2 + side
        src = stops if pending else books
        pb = b + (len(books) if pending else 0)
        price = row.stop_price if pending else row.price
        if pb != prev_b:
            pos = src[b].off + src[b].n - 1
        if pb != prev_b or price != prev_price:
            lv = alloc_level(levels, meta)
            L = levels[lv]
            L.price = price
            L.qty = 0
            L.head = -1
            L.tail = -1
            L.count = 0
            L.hidden = 0
            ladder_keys[pos] = ladder_key(1 - side if pending else side, price)
            ladder_levels[pos] = lv
            pos -= 1
        r = alloc_order(arena, meta)
        o = arena[r]
        o.order_id = row.order_id
        o.price = row.price
        o.leaves = row.qty
        o.filled = row.filled
        o.symbol = row.symbol
        o.trader = row.trader
        o.side = row.side
        o.flags = row.flags
        o.hidden = row.hidden
        set_cold(arena, arena_ext, r, row.display_qty, row.stop_price, row.expire_ts,
                 row.order_type, row.tif, row.pending)
        append_to_level(arena, levels, r, lv)
        levels[lv].hidden += row.hidden
        src[b].slices += reserve_slices(row.hidden, row.display_qty)
        if pending:
            src[b].stop_qty += row.qty
        src[b].live += 1
        index_put(index, -1 - p, row.symbol, row.order_id, r)
        meta[M_INDEX_COUNT] += 1
        if pending:
            meta[M_STOPS_LIVE] += 1
        if row.expire_ts != 0:
            heap_push(expiry, arena, arena_ext, meta, r)
        prev_b, prev_price = pb, price
    return -1


@njit(cache=True, _nrt=False, nogil=True)
def orders_equal(rows, books, stops, levels, arena, arena_ext, index, nsym, ahead=16):
    """Whether ``rows`` (CHECKPOINT_DTYPE) are exactly what ``collect_orders`` would write for
    symbols 0..nsym-1, without walking the queues.

    Why not collect and compare: the walk follows each queue's links, one dependent cache miss
    per order (~0.2 s at 2 M live orders). Here every row is looked up by its id, and the
    lookups of rows ``ahead`` and ``ahead/2`` further on are prefetched, so the misses overlap.
    Equal means: every row is a live order with the same fields; consecutive rows of one
    (pending, symbol, side, price or stop price) start at their level's head, follow its FIFO
    links and number its count; those runs come in ``collect_orders`` order; and no live order
    or pending stop is left out (the rows number them).
    """
    n = len(rows)
    mask = len(index) - 1
    live = 0
    for b in range(2 * nsym):
        live += books[b].live + stops[b].live
    if live != n:
        return False
    prev = -1          # arena slot of the previous row
    left = 0           # rows the current level still needs
    for k in range(n):
        if ahead > 0:
            j = k + ahead
            if j < n:
                prefetch(index, index_home(rows[j].symbol, rows[j].order_id, mask))
            j = k + ahead // 2
            if j < n:
                rj = index_find(index, rows[j].symbol, rows[j].order_id)
                if rj >= 0:
                    prefetch(arena, rj)
        row = rows[k]
        r = index_find(index, row.symbol, row.order_id)
        if r < 0:
            return False
        o = arena[r]
        display, stop_price, expire_ts, order_type, tif, pending = cold_fields(arena, arena_ext,
                                                                               r)
        if (o.price != row.price or o.leaves != row.qty or o.filled != row.filled
                or o.trader != row.trader or o.side != row.side or o.flags != row.flags
                or o.hidden != row.hidden or display != row.display_qty
                or stop_price != row.stop_price or expire_ts != row.expire_ts
                or order_type != row.order_type or tif != row.tif
                or pending != row.pending):
            return False
        key = row.stop_price if row.pending else row.price
        if k > 0:
            p = rows[k - 1]
            pkey = p.stop_price if p.pending else p.price
            same_book = (p.pending == row.pending and p.symbol == row.symbol
                         and p.side == row.side)
        else:
            pkey = np.int64(0)
            same_book = False
        if same_book and pkey == key:
            if o.prev != prev:
                return False
        else:
            if left != 0 or o.prev != -1:
                return False
            if k > 0:
                if same_book:
                    # levels best first: resting bids and SELL stops by falling price,
                    # resting asks and BUY stops by rising price
                    falling = (row.side == _BUY) != (row.pending == 1)
                    if falling != (key < pkey):
                        return False
                elif row.pending != p.pending:
                    if row.pending < p.pending:
                        return False
                elif row.symbol < p.symbol or (row.symbol == p.symbol and row.side < p.side):
                    return False
            left = levels[o.level].count
        left -= 1
        prev = r
    return left == 0
