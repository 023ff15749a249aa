"""The batch matching kernel: order messages in, fills / L2 updates / order events out.

``process_batch`` runs over a structured array of ORDER_DTYPE messages and mutates the book state
arrays of ``exchange.book``. It never raises on message content: every bad message becomes one
REJECTED event (docs/semantics.md gives the exact rules and their order). It never allocates:
before each message it checks that the state and output arrays can take the worst case of that
message and, if not, returns a status telling the Python facade what to grow; the facade grows it
and calls again from the same message. So a message is always processed whole or not at all;
the one exception is the expiry sweep before a message (``_expire``), which is resumable: it
stops between two expiries, state consistent, and the next call goes on from there.

Stops wait in the stop books and are released after a message that traded (``_release_stops``);
icebergs rest with ``leaves`` = the shown slice and ``hidden`` = the reserve (level ``qty`` counts
shown quantity only, level ``hidden`` the reserve); DAY/GTD orders sit in the expiry heap
(``exchange.expiry``) from entry until they leave for any reason.

Known limit: inserting a new price level moves the levels better than it (see ``book``); a flow
that keeps adding levels deep in a huge book pays for that move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import (
    M_EXPIRY_N, M_FREE_LEVEL, M_FREE_ORDER, M_INDEX_COUNT, M_LEVEL_HW, M_NEED_BOOK, M_NEED_EVENTS,
    M_NEED_FILLS, M_NEED_L2, M_NSYM, M_ORDER_HW, M_SEQ, M_STOPS_LIVE, M_STP, M_TRADE_ID,
    MARK_EXPIRING, MARK_ICEBERG, MARK_PENDING, alloc_order, append_to_level, detach_from_level,
    find_or_add_level, free_order, remove_level, set_cold,
)
from .expiry import day_expiry, heap_push, heap_remove
from .order_index import (
    index_find, index_home, index_insert, index_probe, index_put, index_remove, index_remove_at,
)
from .prefetch import prefetch
from .removal import remove_order
from .rows import write_event, write_l2
from .schema import (
    MAX_LEVEL_QTY, Event, Kind, OrderType, Reason, Side, Stp, Tif,
)
from .validation import check_modify, check_new, not_owner
from .validation import crosses as _crosses

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=("exchange.book", "exchange.expiry", "exchange.order_index",
                                "exchange.prefetch", "exchange.removal", "exchange.rows",
                                "exchange.schema", "exchange.validation"))

# statuses returned by process_batch
OK = 0
NEED_OUTPUT = 1
NEED_ORDERS = 2
NEED_LEVELS = 3
NEED_INDEX = 4
NEED_LADDER = 5
NEED_EXPIRY = 6

_BUY = int(Side.BUY)
_SELL = int(Side.SELL)
_GTC = int(Tif.GTC)
_IOC = int(Tif.IOC)
_FOK = int(Tif.FOK)
_DAY = int(Tif.DAY)
_GTD = int(Tif.GTD)
_LIMIT = int(OrderType.LIMIT)
_STOP = int(OrderType.STOP)
_STOP_LIMIT = int(OrderType.STOP_LIMIT)


@njit(cache=True, _nrt=False, inline="always")
def _match(seq, ts, symbol, side, is_market, limit, qty, order_id, trader, filled, arena, arena_ext,
           levels, index, books, ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2,
           events, cnt):
    """Match an incoming order against the opposite side; return (remaining, stopped_by_stp).

    A resting iceberg whose shown slice is used up while reserve remains shows its next slice
    at once at the back of its level (CME Globex), and matching goes on at that level. Every
    fill moves the symbol's last trade price.
    """
    opp = 1 - side
    opp_b = np.int64(symbol) * 2 + opp
    stp = meta[M_STP]
    remaining = qty
    stp_stop = False
    last = np.int64(0)
    while remaining > 0:
        bk = books[opp_b]
        if bk.n == 0:
            break
        lv = ladder_levels[bk.off + bk.n - 1]
        L = levels[lv]
        price = L.price
        if not _crosses(side, is_market, limit, price):
            break
        changed = False
        while remaining > 0 and L.count > 0:
            r = L.head
            o = arena[r]
            if stp != Stp.NONE and o.trader == trader:
                if stp == Stp.CANCEL_INCOMING:
                    stp_stop = True
                    break
                write_event(events, cnt, seq, ts, symbols, symbol, o.order_id, Event.CANCELLED,
                            Reason.SELF_TRADE, o.filled, 0, 0)
                remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)
                changed = True
                if stp == Stp.CANCEL_BOTH:
                    stp_stop = True
                    break
                continue
            q = min(remaining, o.leaves)
            meta[M_TRADE_ID] += 1
            f = fills[cnt[0]]
            f.seq = seq
            f.ts = ts
            f.trade_id = meta[M_TRADE_ID]
            f.price = price
            f.qty = q
            f.symbol = symbol
            f.aggressor_side = side
            if side == _BUY:
                f.buy_order_id = order_id
                f.sell_order_id = o.order_id
                f.buy_trader = trader
                f.sell_trader = o.trader
            else:
                f.buy_order_id = o.order_id
                f.sell_order_id = order_id
                f.buy_trader = o.trader
                f.sell_trader = trader
            cnt[0] += 1
            last = price
            remaining -= q
            filled += q
            write_event(events, cnt, seq, ts, symbols, symbol, order_id,
                        Event.FILLED if remaining == 0 else Event.PARTIAL, Reason.NONE, filled,
                        remaining, price)
            o.leaves -= q
            o.filled += q
            L.qty -= q
            if o.leaves == 0 and o.hidden == 0:
                write_event(events, cnt, seq, ts, symbols, symbol, o.order_id, Event.FILLED,
                            Reason.NONE, o.filled, 0, price)
                remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)
            else:
                if o.leaves == 0:
                    # refill: the next slice joins the back of the queue
                    s = min(arena_ext[r].display, o.hidden)
                    o.hidden -= s
                    L.hidden -= s
                    detach_from_level(arena, levels, r)
                    o.leaves = s
                    append_to_level(arena, levels, r, lv)
                write_event(events, cnt, seq, ts, symbols, symbol, o.order_id, Event.PARTIAL,
                            Reason.NONE, o.filled, o.leaves + o.hidden, price)
            changed = True
        if changed:
            write_l2(l2, cnt, seq, ts, symbol, opp, price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta, opp_b, opp, lv)
        if stp_stop:
            break
    if last != 0:
        symbols[symbol].last_price = last
    return remaining, stp_stop


@njit(cache=True, _nrt=False, inline="always")
def _rest(seq, ts, symbol, side, price, qty, filled, order_id, trader, flags, display, tif,
          expire_ts, at, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
          expiry, l2, cnt):
    """Put an open order at the back of its price level; False if the level would overflow.

    An iceberg (``display`` > 0) shows ``min(display, qty)`` and keeps the rest as reserve; an
    order with ``expire_ts`` joins the expiry heap. ``at``: the empty index bucket where the
    order's id goes (the table unchanged since it was probed), or -1 to probe again.
    """
    b = np.int64(symbol) * 2 + side
    lv = find_or_add_level(books, levels, ladder_keys, ladder_levels, meta, b, side, price)
    L = levels[lv]
    if L.qty > MAX_LEVEL_QTY - qty - L.hidden:
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta, b, side, lv)
        return False
    shown = qty
    if 0 < display < qty:
        shown = display
    r = alloc_order(arena, meta)
    o = arena[r]
    o.order_id = order_id
    o.price = price
    o.leaves = shown
    o.filled = filled
    o.symbol = symbol
    o.trader = trader
    o.side = side
    o.flags = flags
    o.hidden = qty - shown
    set_cold(arena, arena_ext, r, display, 0, expire_ts, _LIMIT, tif, 0)
    append_to_level(arena, levels, r, lv)
    L.hidden += qty - shown
    books[b].live += 1
    if at >= 0:
        index_put(index, at, symbol, order_id, r)
    else:
        index_insert(index, symbol, order_id, r)
    meta[M_INDEX_COUNT] += 1
    if expire_ts != 0:
        heap_push(expiry, arena, arena_ext, meta, r)
    write_l2(l2, cnt, seq, ts, symbol, side, price, L.qty, L.count)
    return True


@njit(cache=True, _nrt=False, inline="always")
def _execute(seq, ts, symbol, side, is_market, tif, price, qty, filled, order_id, trader, flags,
             display, expire_ts, at, arena, arena_ext, levels, index, books, ladder_keys,
             ladder_levels, meta, symbols, expiry, fills, l2, events, cnt):
    """Match an accepted order, then rest or cancel what is left (semantics.md, NEW steps 2-4).

    ``at``: the empty index bucket the validation's probe for the id stopped at (-1: none).
    """
    live_before = meta[M_INDEX_COUNT]
    remaining, stp_stop = _match(seq, ts, symbol, side, is_market, price, qty, order_id, trader,
                                 filled, arena, arena_ext, levels, index, books, ladder_keys,
                                 ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
    if remaining == 0:
        return
    done = filled + qty - remaining
    if stp_stop:
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.SELF_TRADE, done, 0, 0)
    elif is_market:
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.NO_LIQUIDITY, done, 0, 0)
    elif tif == _IOC or tif == _FOK:
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.IOC_UNFILLED, done, 0, 0)
    # matching only ever removes ids: with the count unchanged the table is as probed
    elif not _rest(seq, ts, symbol, side, price, remaining, done, order_id, trader, flags, display,
                   tif, expire_ts, at if meta[M_INDEX_COUNT] == live_before else -1, arena,
                   arena_ext, levels, index, books, ladder_keys, ladder_levels, meta, expiry, l2,
                   cnt):
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.OVERFLOW, done, 0, 0)


@njit(cache=True, _nrt=False, inline="always")
def _entry_expiry(m, symbols):
    """Return when a NEW order expires: GTD its ``expire_ts``, DAY the symbol's next session
    close after its ts, anything else 0 (never)."""
    if m.tif == _GTD:
        return m.expire_ts
    if m.tif == _DAY:
        return day_expiry(m.ts, symbols[m.symbol].session_close)
    return np.int64(0)


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
def _release_stops(seq, ts, sym, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                   meta, symbols, stops, expiry, fills, l2, events, cnt):
    """Release the triggered stops of ``sym`` one at a time (semantics.md, Stops): TRIGGERED,
    then matched as a MARKET (STOP) or a LIMIT at its price (STOP_LIMIT), resting or cancelled
    by its tif, until none is triggered; the trades of a released stop may trigger more."""
    while True:
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
        _execute(seq, ts, sym, side, is_market, tif, price, qty, 0, order_id, trader, flags, 0,
                 expire_ts, -1, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                 meta, symbols, expiry, fills, l2, events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _modify(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
            symbols, ticks, stops, expiry, fills, l2, events, cnt):
    """Apply a MODIFY message (semantics.md, MODIFY)."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    r = np.int64(index[bucket].slot) if bucket >= 0 else -1
    reason = check_modify(m, r, books, arena, arena_ext, levels, ladder_levels, symbols, ticks,
                          meta)
    if reason != Reason.NONE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED, reason, 0, 0,
                    0)
        return
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    L = levels[lv]
    if o.marks & MARK_PENDING:
        _modify_pending(m, seq, r, arena, arena_ext, levels, stops, ladder_keys, ladder_levels,
                        meta, symbols, events, cnt)
        return
    if m.price == o.price:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.MODIFIED, Reason.NONE,
                    o.filled, m.qty, 0)
        open_qty = o.leaves + o.hidden
        if m.qty == open_qty:
            return
        if m.qty < open_qty:
            # the reserve goes first; the place in the queue is kept
            cut = open_qty - m.qty
            h = min(cut, o.hidden)
            o.hidden -= h
            L.hidden -= h
            if cut == h:
                return
            L.qty -= cut - h
            o.leaves -= cut - h
        else:
            detach_from_level(arena, levels, r)
            L.hidden -= o.hidden
            shown = m.qty
            if o.marks & MARK_ICEBERG and 0 < arena_ext[r].display < m.qty:
                shown = arena_ext[r].display
            o.leaves = shown
            o.hidden = m.qty - shown
            L.hidden += o.hidden
            append_to_level(arena, levels, r, lv)
        write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
        return
    # a new price is delete + add: the order loses its place and may trade as an aggressor;
    # it keeps its tif, display size and expiry
    filled = o.filled
    trader = o.trader
    flags = o.flags
    display = np.int64(0)
    tif = np.int64(_GTC)
    expire_ts = np.int64(0)
    if o.marks != 0:
        display = arena_ext[r].display
        tif = np.int64(arena_ext[r].tif)
        expire_ts = arena_ext[r].expire_ts
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.MODIFIED, Reason.NONE,
                filled, m.qty, 0)
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
    write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta,
                     np.int64(sym) * 2 + side, side, lv)
    _execute(seq, m.ts, sym, side, False, tif, m.price, m.qty, filled, m.order_id, trader,
             flags, display, expire_ts, -1, arena, arena_ext, levels, index, books, ladder_keys,
             ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)


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


@njit(cache=True, _nrt=False, inline="always")
def _process_one(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                 symbols, ticks, stops, expiry, fills, l2, events, cnt):
    sym = m.symbol
    if m.kind > Kind.MODIFY:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.BAD_KIND, 0, 0, 0)
        return
    if sym >= meta[M_NSYM]:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.UNKNOWN_SYMBOL, 0, 0, 0)
        return
    fills_before = cnt[0]
    if m.kind == Kind.NEW:
        reason, at = check_new(m, books, arena, levels, index, ladder_levels, symbols, ticks,
                               meta[M_STP])
        if reason != Reason.NONE:
            write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED, reason,
                        0, 0, 0)
            return
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.ACCEPTED, Reason.NONE,
                    0, m.qty, 0)
        expire_ts = np.int64(0)
        if m.tif >= _DAY:
            expire_ts = _entry_expiry(m, symbols)
        if m.order_type >= _STOP:
            _add_stop(m, at, expire_ts, arena, arena_ext, levels, index, stops, ladder_keys,
                      ladder_levels, meta, expiry)
            return
        _execute(seq, m.ts, sym, np.int64(m.side), m.order_type == OrderType.MARKET,
                 np.int64(m.tif), m.price, m.qty, 0, m.order_id, m.trader, m.flags,
                 m.display_qty, expire_ts, at, arena, arena_ext, levels, index, books, ladder_keys,
                 ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
    elif m.kind == Kind.CANCEL:
        bucket = index_probe(index, sym, m.order_id)
        if bucket < 0:
            write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                        Reason.UNKNOWN_ID, 0, 0, 0)
            return
        r = np.int64(index[bucket].slot)
        if not_owner(m, arena, r, meta):
            write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                        Reason.NOT_OWNER, 0, 0, 0)
            return
        o = arena[r]
        side = np.int64(o.side)
        lv = o.level
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.CANCELLED,
                    Reason.USER_CANCEL, o.filled, 0, 0)
        if o.marks & MARK_PENDING:
            _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels,
                            meta, expiry, r, bucket)
            return
        remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
        L = levels[lv]
        write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta,
                         np.int64(sym) * 2 + side, side, lv)
        return
    else:
        _modify(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                symbols, ticks, stops, expiry, fills, l2, events, cnt)
    # only trades move the last price, so only a message that traded can trigger stops
    # (meta first: with no stop pending anywhere the symbol's stop rows are never read)
    if cnt[0] != fills_before and meta[M_STOPS_LIVE] > 0 and (
            stops[np.int64(sym) * 2].live + stops[np.int64(sym) * 2 + 1].live > 0):
        _release_stops(seq, m.ts, np.int64(sym), arena, arena_ext, levels, index, books,
                       ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2, events,
                       cnt)


@njit(cache=True, _nrt=False, inline="always")
def _expire(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
            symbols, stops, expiry, fills, l2, events, cnt):
    """Remove every live order whose expiry is at or before ``ts``, in heap order
    (CANCELLED/EXPIRED, and an L2 row for a resting order's level); rows carry ``seq``.

    Resumable: it checks room for each expiry (one event, one L2 row) and returns NEED_OUTPUT
    with the state consistent and every row so far written, so the call after growing goes on
    with the next one. Returns OK when none is left.
    """
    while meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= ts:
        if cnt[1] + 1 > len(l2) or cnt[2] + 1 > len(events):
            meta[M_NEED_FILLS] = cnt[0]
            meta[M_NEED_L2] = cnt[1] + 1
            meta[M_NEED_EVENTS] = cnt[2] + 1
            return NEED_OUTPUT
        r = np.int64(expiry[0].slot)
        o = arena[r]
        sym = o.symbol
        write_event(events, cnt, seq, ts, symbols, sym, o.order_id, Event.CANCELLED,
                    Reason.EXPIRED, o.filled, 0, 0)
        if o.marks & MARK_PENDING:
            _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels,
                            meta, expiry, r)
            continue
        side = np.int64(o.side)
        lv = o.level
        remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)
        L = levels[lv]
        write_l2(l2, cnt, seq, ts, sym, side, L.price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta,
                         np.int64(sym) * 2 + side, side, lv)
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _levels_full(levels, meta, k):
    """Whether the level table cannot take ``k`` more rows (the free stack counted as empty)."""
    return meta[M_LEVEL_HW] + k > len(levels) and (k > 1 or meta[M_FREE_LEVEL] < 0)


@njit(cache=True, _nrt=False, inline="always")
def _room(m, arena, levels, index, books, ladder_levels, meta, stops, expiry, fills, l2, events,
          cnt):
    """Return OK if every array can take this message's worst case, else what must grow.

    Bounds (why they hold): every fill takes at least one lot from an aggressor, so fills are at
    most the aggressors' quantity; every fill also ends a resting order, ends the aggressor or
    uses up an iceberg slice that refills, and refills at a level are at most its reserve. With
    pending stops on the symbol and an order that can trade, the whole cascade is bounded at
    once: aggressors are the order and the symbol's P pending stops, so fills <= min(their
    quantity, resting + 2P + 1 + reserve), each aggressor adds a few events and at most two L2
    rows beyond the levels that ever exist (the book's and P more), and at most P + 1 new levels.
    """
    need_fills = 0
    need_l2 = 1
    need_events = 1
    sym = np.int64(m.symbol)
    if m.kind <= Kind.MODIFY and sym < meta[M_NSYM] and m.kind != Kind.CANCEL:
        side = np.int64(m.side)
        qty = m.qty
        is_market = m.order_type == OrderType.MARKET
        pending = m.order_type == _STOP or m.order_type == _STOP_LIMIT
        if m.kind == Kind.MODIFY:
            r = index_find(index, m.symbol, m.order_id)
            side = np.int64(arena[r].side) if r >= 0 else 2
            is_market = False
            pending = r >= 0 and (arena[r].marks & MARK_PENDING) != 0
        if side <= _SELL:
            if meta[M_FREE_ORDER] < 0 and meta[M_ORDER_HW] >= len(arena):
                return NEED_ORDERS
            if _levels_full(levels, meta, 1):
                return NEED_LEVELS
            if 2 * (meta[M_INDEX_COUNT] + 1) > len(index):
                return NEED_INDEX
            if m.kind == Kind.NEW and m.tif >= _DAY and meta[M_EXPIRY_N] >= len(expiry):
                return NEED_EXPIRY
            own = sym * 2 + side
            if pending:
                if stops[own].n >= stops[own].cap:
                    meta[M_NEED_BOOK] = -1 - own
                    return NEED_LADDER
                need_events = 2
            else:
                if books[own].n >= books[own].cap:
                    meta[M_NEED_BOOK] = own
                    return NEED_LADDER
                opp_b = sym * 2 + 1 - side
                opp = books[opp_b]
                stp = meta[M_STP]
                if (meta[M_STOPS_LIVE] > 0 and stops[sym * 2].live + stops[sym * 2 + 1].live > 0
                        and opp.n > 0 and _crosses(
                            side, is_market, m.price,
                            levels[ladder_levels[opp.off + opp.n - 1]].price)):
                    return _cascade_room(m, sym, side, qty, levels, books, ladder_levels,
                                         meta, stops, fills, l2, events, cnt)
                bound = opp.live
                q = max(qty, 0)
                if stp != Stp.CANCEL_RESTING and q < bound:
                    bound = q  # each fill takes at least one lot
                elif opp.n > 0:
                    # refills add fills, at most one a lot: when the output has room for that
                    # anyway, no need to look closer
                    bound = q if stp != Stp.CANCEL_RESTING else bound + q
                    if (cnt[0] + bound <= len(fills) and cnt[1] + opp.n + 3 <= len(l2)
                            and cnt[2] + 2 * bound + 4 <= len(events)):
                        return OK
                    # else: at most the reserve of the levels it can reach
                    bound = opp.live
                    h = np.int64(0)
                    acc = np.int64(0)
                    for k in range(opp.off + opp.n - 1, opp.off - 1, -1):
                        L = levels[ladder_levels[k]]
                        if not _crosses(side, is_market, m.price, L.price):
                            break
                        h += L.hidden
                        acc += L.qty + L.hidden
                        if h >= qty or (stp != Stp.CANCEL_RESTING and acc >= qty):
                            break
                    bound += min(h, max(qty, 0))
                    if stp != Stp.CANCEL_RESTING:
                        bound = min(bound, max(qty, 0))
                need_fills = bound
                need_events = 2 * bound + 4
                need_l2 = opp.n + 3
    if (cnt[0] + need_fills > len(fills) or cnt[1] + need_l2 > len(l2)
            or cnt[2] + need_events > len(events)):
        meta[M_NEED_FILLS] = cnt[0] + need_fills
        meta[M_NEED_L2] = cnt[1] + need_l2
        meta[M_NEED_EVENTS] = cnt[2] + need_events
        return NEED_OUTPUT
    return OK


@njit(cache=True, _nrt=False)
def _cascade_room(m, sym, side, qty, levels, books, ladder_levels, meta, stops, fills, l2,
                  events, cnt):
    """``_room`` for an order that can trade on a symbol with pending stops (see there)."""
    p = stops[sym * 2].live + stops[sym * 2 + 1].live
    if _levels_full(levels, meta, p + 2):
        return NEED_LEVELS
    for b in (sym * 2, sym * 2 + 1):
        if books[b].n + p + 1 > books[b].cap:
            meta[M_NEED_BOOK] = b
            return NEED_LADDER
    q = max(qty, 0)
    for b in (sym * 2, sym * 2 + 1):
        bk = stops[b]
        for k in range(bk.off, bk.off + bk.n):
            q += levels[ladder_levels[k]].qty
    resting = books[sym * 2].live + books[sym * 2 + 1].live
    units = resting + 2 * p + 1
    for b in (sym * 2, sym * 2 + 1):
        bk = books[b]
        for k in range(bk.off, bk.off + bk.n):
            if units >= q:
                break
            units += levels[ladder_levels[k]].hidden
    units = min(units, q)
    if meta[M_STP] != Stp.NONE:
        units += resting + p
    need_fills = units
    need_events = 2 * units + 3 * p + 8
    need_l2 = books[sym * 2].n + books[sym * 2 + 1].n + 3 * p + 6
    if (cnt[0] + need_fills > len(fills) or cnt[1] + need_l2 > len(l2)
            or cnt[2] + need_events > len(events)):
        meta[M_NEED_FILLS] = cnt[0] + need_fills
        meta[M_NEED_L2] = cnt[1] + need_l2
        meta[M_NEED_EVENTS] = cnt[2] + need_events
        return NEED_OUTPUT
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _prefetch_ahead(msgs, i, n, ahead, arena, levels, index):
    """Prefetch what messages i+ahead, i+ahead/2 and i+ahead/4 will touch, one stage each."""
    mask = len(index) - 1
    j = i + ahead
    if j < n:
        prefetch(index, index_home(msgs[j].symbol, msgs[j].order_id, mask))
    j = i + ahead // 2
    if j < n and msgs[j].kind != Kind.NEW:
        r = index_find(index, msgs[j].symbol, msgs[j].order_id)
        if r >= 0:
            prefetch(arena, r)
    j = i + ahead // 4
    if j < n and msgs[j].kind != Kind.NEW:
        r = index_find(index, msgs[j].symbol, msgs[j].order_id)
        if r >= 0:
            o = arena[r]
            prefetch(levels, o.level)
            if o.prev >= 0:
                prefetch(arena, o.prev)
            if o.next >= 0:
                prefetch(arena, o.next)


# nogil: the kernel touches no Python object, so a caller may decode or journal on another
# thread while it matches (the store and rerun can overlap with it)
@njit(cache=True, _nrt=False, nogil=True)
def process_batch(msgs, start, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, ahead=0):
    """Process ``msgs[start:]`` in order, writing outputs at ``cnt`` = [fills, l2, events].

    ``ahead`` is the prefetch distance in messages (0: no prefetching; results are identical
    either way). Returns (status, next): status OK with next == len(msgs) when done; otherwise
    the state or output array to grow (NEED_*) and the index of the first message not yet
    processed (the orders expiring before it may already be out, their rows written: the call
    from ``next`` goes on with the rest).
    """
    n = len(msgs)
    for i in range(start, n):
        if ahead > 0:
            _prefetch_ahead(msgs, i, n, ahead, arena, levels, index)
        m = msgs[i]
        # expiries leave before the message, in rows carrying its seq (the one it will get)
        if meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= m.ts:
            status = _expire(m.ts, meta[M_SEQ] + 1, arena, arena_ext, levels, index, books,
                             ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                             events, cnt)
            if status != OK:
                return status, i
        status = _room(m, arena, levels, index, books, ladder_levels, meta, stops, expiry, fills,
                       l2, events, cnt)
        if status != OK:
            return status, i
        meta[M_SEQ] += 1
        _process_one(m, meta[M_SEQ], arena, arena_ext, levels, index, books, ladder_keys,
                     ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt)
    return OK, n
