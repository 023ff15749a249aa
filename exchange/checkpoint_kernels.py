"""The numba side of checkpoints: book state <-> CHECKPOINT_DTYPE rows, without matching.

``collect_orders`` writes the live orders in priority order (what ``Engine.checkpoint`` stores),
``check_rows`` checks rows read back before anything is loaded, ``load_orders`` builds books
from rows that passed, and ``orders_equal`` compares rows with the live orders in place. The
byte layout around the rows is ``exchange.checkpoint``'s; these kernels see only the rows.

Invariants: ``load_orders(collect_orders(state))`` rebuilds the same books (same priority,
same per-level totals); ``orders_equal(rows)`` is exactly ``collect_orders() == rows``; none
of them allocates or raises on row content (``check_rows`` returns a ROW_* code instead).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import M_INDEX_COUNT, alloc_level, alloc_order, append_to_level, ladder_key
from .order_index import index_find, index_home, index_probe, index_put
from .prefetch import prefetch
from .schema import KNOWN_FLAGS, MAX_LEVEL_QTY, MAX_QTY, Side

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=("exchange.book", "exchange.order_index", "exchange.prefetch",
                                "exchange.schema"))

_BUY = int(Side.BUY)
_SELL = int(Side.SELL)


@njit(cache=True, _nrt=False)
def collect_orders(books, levels, arena, ladder_levels, symbols, out):
    """Write the live orders of ``symbols`` into ``out`` (CHECKPOINT_DTYPE) in priority order.

    Per symbol: bids best first, then asks best first; FIFO within a level. Returns the count.
    """
    k = 0
    for s in symbols:
        for side in range(2):
            bk = books[np.int64(s) * 2 + side]
            for j in range(bk.off + bk.n - 1, bk.off - 1, -1):
                r = levels[ladder_levels[j]].head
                while r >= 0:
                    o = arena[r]
                    row = out[k]
                    row.order_id = o.order_id
                    row.price = o.price
                    row.qty = o.leaves
                    row.filled = o.filled
                    row.symbol = o.symbol
                    row.trader = o.trader
                    row.side = o.side
                    row.flags = o.flags
                    k += 1
                    r = o.next
    return k


# what check_rows found wrong with a checkpoint row (checkpoint.row_problem words each one)
(ROW_OK, ROW_SYMBOL, ROW_SIDE, ROW_QTY, ROW_FILLED, ROW_FLAGS, ROW_PRICE, ROW_ORDER,
 ROW_LEVEL_QTY, ROW_CROSSED) = range(10)


@njit(cache=True, _nrt=False)
def check_rows(rows, books, nsym, level_count):
    """Check checkpoint ``rows`` against the symbols' ``books`` (their price bands) before any
    is loaded; return (ROW_OK, len(rows)) or (the first problem's ROW_* code, its row index).

    A row must name a symbol below ``nsym`` and a side, hold 1..MAX_QTY open and 0..MAX_LEVEL_QTY
    filled (so the kernel's sums stay in int64), carry known flags only and a price in its
    symbol's band; rows must be in ``collect_orders`` order (symbols ascending, bids then asks,
    best level first); a level's orders total at most MAX_LEVEL_QTY, and no symbol's best bid
    may reach its best ask. Fills ``level_count[book]`` with each book's number of levels.
    One pass, O(1) per row.
    """
    prev_b = np.int64(-1)
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
        if row.qty <= 0 or row.qty > MAX_QTY:
            return ROW_QTY, i
        if row.filled < 0 or row.filled > MAX_LEVEL_QTY:
            return ROW_FILLED, i
        if row.flags & ~KNOWN_FLAGS:
            return ROW_FLAGS, i
        b = sym * 2 + row.side
        price = row.price
        if price < books[b].min_price or price > books[b].max_price:
            return ROW_PRICE, i
        if b < prev_b:
            return ROW_ORDER, i
        if b == prev_b and price == prev_price:
            if level_qty > MAX_LEVEL_QTY - row.qty:
                return ROW_LEVEL_QTY, i
            level_qty += row.qty
        else:
            # a new level: below the previous one of its book (bids falling, asks rising)
            if b == prev_b and (row.side == _BUY) == (price > prev_price):
                return ROW_ORDER, i
            if b != prev_b:
                if row.side == _BUY:
                    bid_symbol, bid_price = sym, price
                elif bid_symbol == sym and bid_price >= price:
                    return ROW_CROSSED, i
            level_count[b] += 1
            level_qty = row.qty
        prev_b, prev_price = b, price
    return ROW_OK, len(rows)


@njit(cache=True, _nrt=False)
def load_orders(rows, arena, levels, index, books, ladder_keys, ladder_levels, meta):
    """Put checkpoint ``rows`` (passed by ``check_rows``) into empty books without matching.

    The caller has sized every array for all rows and set each book's ``n`` to its level count
    (``check_rows``) with an empty ladder region of at least that. Levels arrive best first, so
    each is written straight to its final ladder slot, from the top down: O(1) per row (inserting
    them one by one moved every better level, O(levels^2) per book). Returns -1 when all rows are
    loaded, or the index of the first row whose (symbol, order id) an earlier row already holds.
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
        b = np.int64(row.symbol) * 2 + side
        if b != prev_b:
            pos = books[b].off + books[b].n - 1
        if b != prev_b or row.price != prev_price:
            lv = alloc_level(levels, meta)
            L = levels[lv]
            L.price = row.price
            L.qty = 0
            L.head = -1
            L.tail = -1
            L.count = 0
            L.hidden = 0
            ladder_keys[pos] = ladder_key(side, row.price)
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
        o.xpos = -1
        append_to_level(arena, levels, r, lv)
        books[b].live += 1
        index_put(index, -1 - p, row.symbol, row.order_id, r)
        meta[M_INDEX_COUNT] += 1
        prev_b, prev_price = b, row.price
    return -1


@njit(cache=True, _nrt=False, nogil=True)
def orders_equal(rows, books, levels, arena, index, nsym, ahead=16):
    """Whether ``rows`` (CHECKPOINT_DTYPE) are exactly what ``collect_orders`` would write for
    symbols 0..nsym-1, without walking the queues.

    Why not collect and compare: the walk follows each queue's links, one dependent cache miss
    per order (~0.2 s at 2 M live orders). Here every row is looked up by its id, and the
    lookups of rows ``ahead`` and ``ahead/2`` further on are prefetched, so the misses overlap.
    Equal means: every row is a live order with the same fields; consecutive rows of one
    (symbol, side, price) start at their level's head, follow its FIFO links and number its
    count; those runs come in (symbol, side, price best first) order; and no live order is left
    out (the rows number the live orders of those symbols).
    """
    n = len(rows)
    mask = len(index) - 1
    live = 0
    for b in range(2 * nsym):
        live += books[b].live
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
        if (o.price != row.price or o.leaves != row.qty or o.filled != row.filled
                or o.trader != row.trader or o.side != row.side or o.flags != row.flags):
            return False
        if k > 0 and rows[k - 1].symbol == row.symbol and rows[k - 1].side == row.side \
                and rows[k - 1].price == row.price:
            if o.prev != prev:
                return False
        else:
            if left != 0 or o.prev != -1:
                return False
            if k > 0:
                p = rows[k - 1]
                if p.symbol == row.symbol and p.side == row.side:
                    # levels best first: bids by falling price, asks by rising price
                    if (row.side == _BUY) != (row.price < p.price):
                        return False
                elif row.symbol < p.symbol or (row.symbol == p.symbol and row.side < p.side):
                    return False
            left = levels[o.level].count
        left -= 1
        prev = r
    return left == 0
