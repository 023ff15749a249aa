"""The batch matching kernel: order messages in, fills / L2 updates / order events out.

``process_batch`` runs over a structured array of ORDER_DTYPE messages and mutates the book state
arrays of ``exchange.book``. It never raises on message content: every bad message becomes one
REJECTED event (docs/semantics.md gives the exact rules and their order). It never allocates:
before each message it checks that the state and output arrays can take the worst case of that
message and, if not, returns a status telling the Python facade what to grow; the facade grows it
and calls again from the same message. So a message is always processed whole or not at all.

Known limit: inserting a new price level moves the levels better than it (see ``book``); a flow
that keeps adding levels deep in a huge book pays for that move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import (
    M_FREE_LEVEL, M_FREE_ORDER, M_INDEX_COUNT, M_LEVEL_HW, M_NEED_BOOK, M_NEED_EVENTS,
    M_NEED_FILLS, M_NEED_L2, M_NSYM, M_ORDER_HW, M_SEQ, M_STP, M_TRADE_ID,
    alloc_order, append_to_level, detach_from_level, find_or_add_level, free_order, remove_level,
)
from .order_index import (
    index_find, index_home, index_insert, index_probe, index_put, index_remove, index_remove_at,
)
from .prefetch import prefetch
from .schema import (
    MAX_LEVEL_QTY, Event, Flag, Kind, OrderType, Reason, Side, Stp, Tif,
)
from .validation import best_crosses as _best_crosses
from .validation import check_modify, check_new, not_owner
from .validation import crosses as _crosses

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=("exchange.book", "exchange.order_index", "exchange.prefetch",
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
_POST_ONLY = int(Flag.POST_ONLY)
_GTC = int(Tif.GTC)


@njit(cache=True, _nrt=False, inline="always")
def _event(events, cnt, seq, ts, symbol, order_id, ev, reason, filled, leaves):
    e = events[cnt[2]]
    e.seq = seq
    e.ts = ts
    e.order_id = order_id
    e.filled_qty = filled
    e.leaves_qty = leaves
    e.symbol = symbol
    e.event = ev
    e.reason = reason
    cnt[2] += 1


@njit(cache=True, _nrt=False, inline="always")
def _l2(l2, cnt, seq, ts, symbol, side, price, qty, count):
    u = l2[cnt[1]]
    u.seq = seq
    u.ts = ts
    u.price = price
    u.qty = qty
    u.symbol = symbol
    u.count = count
    u.side = side
    cnt[1] += 1


@njit(cache=True, _nrt=False, inline="always")
def _remove_order(arena, levels, books, index, meta, r, bucket=-1):
    """Unlink live order ``r`` from its level, the index and its book; free its slot.

    ``bucket``: the order's index bucket if the caller just probed for it (-1: look it up).
    The level is left in place even if empty: the caller decides when to drop it.
    """
    o = arena[r]
    detach_from_level(arena, levels, r)
    books[np.int64(o.symbol) * 2 + o.side].live -= 1
    if bucket >= 0:
        index_remove_at(index, bucket)
    else:
        index_remove(index, o.symbol, o.order_id)
    meta[M_INDEX_COUNT] -= 1
    free_order(arena, meta, r)


@njit(cache=True, _nrt=False, inline="always")
def _match(seq, ts, symbol, side, is_market, limit, qty, order_id, trader, filled,
           arena, levels, index, books, ladder_keys, ladder_levels, meta, fills, l2, events, cnt):
    """Match an incoming order against the opposite side; return (remaining, stopped_by_stp)."""
    opp = 1 - side
    opp_b = np.int64(symbol) * 2 + opp
    stp = meta[M_STP]
    remaining = qty
    stp_stop = False
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
                _event(events, cnt, seq, ts, symbol, o.order_id, Event.CANCELLED,
                       Reason.SELF_TRADE, o.filled, 0)
                _remove_order(arena, levels, books, index, meta, r)
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
            remaining -= q
            filled += q
            _event(events, cnt, seq, ts, symbol, order_id,
                   Event.FILLED if remaining == 0 else Event.PARTIAL, Reason.NONE,
                   filled, remaining)
            o.leaves -= q
            o.filled += q
            L.qty -= q
            if o.leaves == 0:
                _event(events, cnt, seq, ts, symbol, o.order_id, Event.FILLED, Reason.NONE,
                       o.filled, 0)
                _remove_order(arena, levels, books, index, meta, r)
            else:
                _event(events, cnt, seq, ts, symbol, o.order_id, Event.PARTIAL, Reason.NONE,
                       o.filled, o.leaves)
            changed = True
        if changed:
            _l2(l2, cnt, seq, ts, symbol, opp, price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta, opp_b, opp, lv)
        if stp_stop:
            break
    return remaining, stp_stop


@njit(cache=True, _nrt=False, inline="always")
def _rest(seq, ts, symbol, side, price, qty, filled, order_id, trader, flags, at,
          arena, levels, index, books, ladder_keys, ladder_levels, meta, l2, cnt):
    """Put a new open order at the back of its price level; False if the level would overflow.

    ``at``: the empty index bucket where the order's id goes (the table unchanged since it was
    probed), or -1 to probe again.
    """
    b = np.int64(symbol) * 2 + side
    lv = find_or_add_level(books, levels, ladder_keys, ladder_levels, meta, b, side, price)
    L = levels[lv]
    if L.qty > MAX_LEVEL_QTY - qty:
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta, b, side, lv)
        return False
    r = alloc_order(arena, meta)
    o = arena[r]
    o.order_id = order_id
    o.price = price
    o.leaves = qty
    o.filled = filled
    o.symbol = symbol
    o.trader = trader
    o.side = side
    o.flags = flags
    o.hidden = 0
    o.display = 0
    o.stop_price = 0
    o.expire_ts = 0
    o.xpos = -1
    o.order_type = 0
    o.tif = 0
    o.pending = 0
    append_to_level(arena, levels, r, lv)
    books[b].live += 1
    if at >= 0:
        index_put(index, at, symbol, order_id, r)
    else:
        index_insert(index, symbol, order_id, r)
    meta[M_INDEX_COUNT] += 1
    _l2(l2, cnt, seq, ts, symbol, side, price, L.qty, L.count)
    return True


@njit(cache=True, _nrt=False, inline="always")
def _execute(seq, ts, symbol, side, is_market, tif, price, qty, filled, order_id, trader, flags,
             at, arena, levels, index, books, ladder_keys, ladder_levels, meta, fills, l2, events,
             cnt):
    """Match an accepted order, then rest or cancel what is left (semantics.md, NEW steps 2-4).

    ``at``: the empty index bucket the validation's probe for the id stopped at (-1: none).
    """
    live_before = meta[M_INDEX_COUNT]
    remaining, stp_stop = _match(seq, ts, symbol, side, is_market, price, qty, order_id, trader,
                                 filled, arena, levels, index, books, ladder_keys, ladder_levels,
                                 meta, fills, l2, events, cnt)
    if remaining == 0:
        return
    done = filled + qty - remaining
    if stp_stop:
        _event(events, cnt, seq, ts, symbol, order_id, Event.CANCELLED, Reason.SELF_TRADE, done, 0)
    elif is_market:
        _event(events, cnt, seq, ts, symbol, order_id, Event.CANCELLED, Reason.NO_LIQUIDITY,
               done, 0)
    elif tif != Tif.GTC:
        _event(events, cnt, seq, ts, symbol, order_id, Event.CANCELLED, Reason.IOC_UNFILLED,
               done, 0)
    # matching only ever removes ids: with the count unchanged the table is as probed
    elif not _rest(seq, ts, symbol, side, price, remaining, done, order_id, trader, flags,
                   at if meta[M_INDEX_COUNT] == live_before else -1, arena, levels, index, books, ladder_keys, ladder_levels, meta, l2, cnt):
        _event(events, cnt, seq, ts, symbol, order_id, Event.CANCELLED, Reason.OVERFLOW, done, 0)


@njit(cache=True, _nrt=False, inline="always")
def _modify(m, seq, arena, levels, index, books, ladder_keys, ladder_levels, meta, symbols, ticks,
            fills, l2, events, cnt):
    """Apply a MODIFY message (semantics.md, MODIFY)."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    r = np.int64(index[bucket].slot) if bucket >= 0 else -1
    reason = check_modify(m, r, books, arena, levels, ladder_levels, symbols, ticks, meta)
    if reason != Reason.NONE:
        _event(events, cnt, seq, m.ts, sym, m.order_id, Event.REJECTED, reason, 0, 0)
        return
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    L = levels[lv]
    if m.price == o.price:
        _event(events, cnt, seq, m.ts, sym, m.order_id, Event.MODIFIED, Reason.NONE,
               o.filled, m.qty)
        if m.qty == o.leaves:
            return
        if m.qty < o.leaves:
            L.qty -= o.leaves - m.qty
            o.leaves = m.qty
        else:
            detach_from_level(arena, levels, r)
            o.leaves = m.qty
            append_to_level(arena, levels, r, lv)
        _l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
        return
    # a new price is delete + add: the order loses its place and may trade as an aggressor
    filled = o.filled
    trader = o.trader
    flags = o.flags
    _event(events, cnt, seq, m.ts, sym, m.order_id, Event.MODIFIED, Reason.NONE, filled, m.qty)
    _remove_order(arena, levels, books, index, meta, r, bucket)
    _l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta,
                     np.int64(sym) * 2 + side, side, lv)
    _execute(seq, m.ts, sym, side, False, _GTC, m.price, m.qty, filled, m.order_id, trader,
             flags, -1, arena, levels, index, books, ladder_keys, ladder_levels, meta, fills, l2,
             events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _process_one(m, seq, arena, levels, index, books, ladder_keys, ladder_levels, meta, symbols,
                 ticks, fills, l2, events, cnt):
    sym = m.symbol
    if m.kind > Kind.MODIFY:
        _event(events, cnt, seq, m.ts, sym, m.order_id, Event.REJECTED, Reason.BAD_KIND, 0, 0)
        return
    if sym >= meta[M_NSYM]:
        _event(events, cnt, seq, m.ts, sym, m.order_id, Event.REJECTED, Reason.UNKNOWN_SYMBOL,
               0, 0)
        return
    if m.kind == Kind.NEW:
        reason, at = check_new(m, books, arena, levels, index, ladder_levels, symbols, ticks,
                               meta[M_STP])
        if reason != Reason.NONE:
            _event(events, cnt, seq, m.ts, sym, m.order_id, Event.REJECTED, reason, 0, 0)
            return
        _event(events, cnt, seq, m.ts, sym, m.order_id, Event.ACCEPTED, Reason.NONE, 0, m.qty)
        _execute(seq, m.ts, sym, np.int64(m.side), m.order_type == OrderType.MARKET,
                 np.int64(m.tif), m.price, m.qty, 0, m.order_id, m.trader, m.flags, at,
                 arena, levels, index, books, ladder_keys, ladder_levels, meta, fills, l2, events,
                 cnt)
    elif m.kind == Kind.CANCEL:
        bucket = index_probe(index, sym, m.order_id)
        if bucket < 0:
            _event(events, cnt, seq, m.ts, sym, m.order_id, Event.REJECTED, Reason.UNKNOWN_ID,
                   0, 0)
            return
        r = np.int64(index[bucket].slot)
        if not_owner(m, arena, r, meta):
            _event(events, cnt, seq, m.ts, sym, m.order_id, Event.REJECTED, Reason.NOT_OWNER,
                   0, 0)
            return
        o = arena[r]
        side = np.int64(o.side)
        lv = o.level
        _event(events, cnt, seq, m.ts, sym, m.order_id, Event.CANCELLED, Reason.USER_CANCEL,
               o.filled, 0)
        _remove_order(arena, levels, books, index, meta, r, bucket)
        L = levels[lv]
        _l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta,
                         np.int64(sym) * 2 + side, side, lv)
    else:
        _modify(m, seq, arena, levels, index, books, ladder_keys, ladder_levels, meta, symbols,
                ticks, fills, l2, events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _room(m, arena, levels, index, books, meta, fills, l2, events, cnt):
    """Return OK if every array can take this message's worst case, else what must grow."""
    need_fills = 0
    need_l2 = 1
    need_events = 1
    sym = np.int64(m.symbol)
    if m.kind <= Kind.MODIFY and sym < meta[M_NSYM] and m.kind != Kind.CANCEL:
        side = np.int64(m.side)
        qty = m.qty
        if m.kind == Kind.MODIFY:
            r = index_find(index, m.symbol, m.order_id)
            side = np.int64(arena[r].side) if r >= 0 else 2
        if side <= _SELL:
            opp = books[sym * 2 + 1 - side]
            bound = opp.live
            if meta[M_STP] != Stp.CANCEL_RESTING and qty < bound:
                bound = max(qty, 0)  # each fill takes at least one lot
            need_fills = bound
            need_events = 2 * bound + 4
            need_l2 = opp.n + 3
            if meta[M_FREE_ORDER] < 0 and meta[M_ORDER_HW] >= len(arena):
                return NEED_ORDERS
            if meta[M_FREE_LEVEL] < 0 and meta[M_LEVEL_HW] >= len(levels):
                return NEED_LEVELS
            if 2 * (meta[M_INDEX_COUNT] + 1) > len(index):
                return NEED_INDEX
            own = sym * 2 + side
            if books[own].n >= books[own].cap:
                meta[M_NEED_BOOK] = own
                return NEED_LADDER
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
def process_batch(msgs, start, arena, levels, index, books, ladder_keys, ladder_levels, meta,
                  symbols, ticks, stops, expiry, fills, l2, events, cnt, ahead=0):
    """Process ``msgs[start:]`` in order, writing outputs at ``cnt`` = [fills, l2, events].

    ``ahead`` is the prefetch distance in messages (0: no prefetching; results are identical
    either way). Returns (status, next): status OK with next == len(msgs) when done; otherwise
    the state or output array to grow (NEED_*) and the index of the first message not yet
    processed.
    """
    n = len(msgs)
    for i in range(start, n):
        if ahead > 0:
            _prefetch_ahead(msgs, i, n, ahead, arena, levels, index)
        m = msgs[i]
        status = _room(m, arena, levels, index, books, meta, fills, l2, events, cnt)
        if status != OK:
            return status, i
        meta[M_SEQ] += 1
        _process_one(m, meta[M_SEQ], arena, levels, index, books, ladder_keys, ladder_levels,
                     meta, symbols, ticks, fills, l2, events, cnt)
    return OK, n
