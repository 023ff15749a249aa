"""The batch matching kernel: order messages in, fills / L2 updates / order events out.

``process_batch`` runs over a structured array of ORDER_DTYPE messages and mutates the book state
arrays of ``exchange.book``. It never raises on message content: every bad message becomes one
REJECTED event (docs/semantics.md gives the exact rules and their order). It never allocates:
before each message it checks that the state and output arrays can take the worst case of that
message and, if not, returns a status telling the Python facade what to grow; the facade grows it
and calls again from the same message. So a message is always processed whole or not at all;
the one exception is the expiry sweep before a message (``_expire``), which is resumable: it
stops between two expiries, state consistent, and the next call goes on from there.

Trading phases (docs/semantics.md, Trading phases): a symbol row's ``phase`` decides what a
message may do. In a call (PRE_OPEN, PRE_CLOSE, REOPENING_AUCTION) orders rest without matching
(MARKET orders at ``CALL_MARKET_PRICE[side]``) and after every message on the symbol, and every
expiry of its orders, the indicative uncross is published when it changed
(``_publish_indicative``). PHASE messages (``_phase_message``) run the uncross of
``exchange.auction``; a dynamic band breach in ``_match`` interrupts continuous trading
(``_interrupt``) and the re-opening auctions it starts uncross before the first message at or
after their end (``_auction_ends``, resumable like the expiry sweep; ``meta[M_NEXT_END]`` keeps
the earliest end so the check is one compare). A symbol in CONTINUOUS with no band pays one
load of its phase and one of its band per message.

Stops wait in the stop books and are released after a message that traded, and when a symbol
enters CONTINUOUS (a PHASE message, a re-opening auction's end) (``_release_stops``), only while
their symbol is CONTINUOUS, so after every message no pending stop of a CONTINUOUS symbol is
triggered. The matching copy of ``_execute`` is inlined into the hot path only; the cold callers
share one compiled copy (``_execute_cold``);
icebergs rest with ``leaves`` = the shown slice and ``hidden`` = the reserve (level ``qty`` counts
shown quantity only, level ``hidden`` the reserve); DAY/GTD orders sit in the expiry heap
(``exchange.expiry``) from entry until they leave for any reason.

The kernel's parts, one concept per module, each compiled into ``process_batch`` (its
``guard`` names them): ``exchange.matching`` (``_match``, ``_rest``, ``_execute``),
``exchange.stops`` (the stop books), ``exchange.room`` (the worst-case room checks and the
NEED_* statuses of ``exchange.status``), ``exchange.phase_changes`` (PHASE messages, re-opening
auctions' ends); this module keeps the message loop, cancels, modifies, expiry and the short
paths of plain messages.

Known limit: inserting a new price level moves the levels better than it (see ``book``); a flow
that keeps adding levels deep in a huge book pays for that move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .auction import uncross
from .book import (
    M_EXPIRY_N, M_NEED_BOOK, M_NEED_EVENTS, M_BAND_HI, M_BAND_LO, M_NEED_FILLS, M_NEED_L2,
    M_NEXT_END, M_NSYM, M_SEQ, M_STOPS_LIVE, M_STP, MARK_ICEBERG, MARK_PENDING,
    append_to_level, detach_from_level, remove_level, reserve_slices,
)
from .expiry import day_expiry
from .order_index import index_find, index_home, index_probe
from .prefetch import prefetch
from .removal import remove_order
from .rows import output_fits, write_event, write_l2
from .schema import MAX_PRICE, MAX_QTY, Event, Kind, OrderType, Phase, Reason, Side, Tif
from .validation import check_modify, check_new, not_owner
from .validation import crosses as _crosses
from .matching import _dynamic_band, _execute, _execute_cold, _is_call, _publish_indicative, _rest
from .phase_changes import _auction_ends, _phase_message
from .room import _room, _room_for_one_order
from .status import (  # noqa: F401 (the kernel's statuses: callers read them here)
    NEED_EXPIRY, NEED_INDEX, NEED_LADDER, NEED_LEVELS, NEED_ORDERS, NEED_OUTPUT, OK,
)
from .stops import _add_stop, _modify_pending, _release_stops, _remove_pending

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=(
    "exsim.exchange.auction", "exsim.exchange.book", "exsim.exchange.expiry",
    "exsim.exchange.fillable", "exsim.exchange.order_index", "exsim.exchange.prefetch",
    "exsim.exchange.removal", "exsim.exchange.rows", "exsim.exchange.schema",
    "exsim.exchange.validation", "exsim.exchange.matching", "exsim.exchange.stops",
    "exsim.exchange.room", "exsim.exchange.phase_changes"))


_SELL = int(Side.SELL)
_GTC = int(Tif.GTC)
_DAY = int(Tif.DAY)
_GTD = int(Tif.GTD)
_LIMIT = int(OrderType.LIMIT)
_STOP = int(OrderType.STOP)
_CONTINUOUS = int(Phase.CONTINUOUS)
_CLOSED = int(Phase.CLOSED)
_HALTED = int(Phase.HALTED)
_INT64_MAX = (1 << 63) - 1


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
def _modify(m, seq, in_call, arena, arena_ext, levels, index, books, ladder_keys,
            ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt):
    """Apply a MODIFY message (semantics.md, MODIFY); ``in_call``: the symbol is in a call."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    r = np.int64(index[bucket].slot) if bucket >= 0 else -1
    reason = check_modify(m, r, books, arena, arena_ext, levels, ladder_levels, symbols, ticks,
                          meta, in_call)
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
            if h != 0:
                d = arena_ext[r].display
                books[np.int64(sym) * 2 + side].slices += (reserve_slices(o.hidden - h, d)
                                                           - reserve_slices(o.hidden, d))
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
            if o.marks & MARK_ICEBERG:
                d = arena_ext[r].display
                books[np.int64(sym) * 2 + side].slices += (reserve_slices(m.qty - shown, d)
                                                           - reserve_slices(o.hidden, d))
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
    _execute_cold(np.int64(seq), np.int64(m.ts), np.int64(sym), side, np.bool_(False), tif,
                  np.int64(m.price), np.int64(m.qty), np.int64(filled), np.uint64(m.order_id),
                  np.uint32(trader), np.uint8(flags), np.int64(display), np.int64(expire_ts),
                  np.int64(-1), arena, arena_ext, levels, index, books, ladder_keys,
                  ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _cancel(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
            symbols, stops, expiry, l2, events, cnt):
    """CANCEL steps 3-6 (semantics.md): REJECTED UNKNOWN_ID or NOT_OWNER, else CANCELLED
    USER_CANCEL and the order leaves its book (a resting order with its level's L2 row, a
    pending stop its stop book). The caller has checked the symbol and its phase."""
    sym = m.symbol
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
        _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels, meta,
                        expiry, r, bucket)
        return
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
    L = levels[lv]
    write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta, np.int64(sym) * 2 + side,
                     side, lv)


@njit(cache=True, _nrt=False, inline="always")
def _process_one(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                 symbols, ticks, stops, expiry, fills, l2, events, cnt, plain):
    sym = m.symbol
    if m.kind > Kind.PHASE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.BAD_KIND, 0, 0, 0)
        return
    if sym >= meta[M_NSYM]:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.UNKNOWN_SYMBOL, 0, 0, 0)
        return
    srow = symbols[sym]
    phase = srow.phase
    in_call = False
    check_stops = False
    lo = np.int64(0)
    hi = np.int64(MAX_PRICE)
    if m.kind == Kind.PHASE:
        check_stops = _phase_message(m, seq, arena, arena_ext, levels, index, books, ladder_keys,
                                     ladder_levels, meta, symbols, ticks, expiry, fills, l2,
                                     events, cnt)
        # stops released after an uncross meet the band around the uncross price
        lo, hi = _dynamic_band(srow)
        meta[M_BAND_LO] = lo
        meta[M_BAND_HI] = hi
    else:
        if phase != _CONTINUOUS:
            if m.kind != Kind.CANCEL and (phase == _CLOSED or phase == _HALTED):
                write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                            Reason.SYMBOL_CLOSED if phase == _CLOSED else Reason.SYMBOL_HALTED,
                            0, 0, 0)
                return
            in_call = _is_call(phase)
        elif srow.dynamic_band_bps != 0:
            lo, hi = _dynamic_band(srow)
        meta[M_BAND_LO] = lo
        meta[M_BAND_HI] = hi
        fills_before = cnt[0]
        if m.kind == Kind.NEW:
            if plain:   # _plain_path: every check but the duplicate id passes
                p = index_probe(index, m.symbol, m.order_id)
                reason, at = (Reason.DUPLICATE_ID, -1) if p >= 0 else (Reason.NONE, -1 - p)
            else:
                reason, at = check_new(m, books, arena, levels, index, ladder_levels, symbols,
                                       ticks, meta[M_STP], in_call, lo, hi)
            if reason != Reason.NONE:
                write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                            reason, 0, 0, 0)
                return
            write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.ACCEPTED,
                        Reason.NONE, 0, m.qty, 0)
            expire_ts = np.int64(0)
            if m.tif >= _DAY:
                expire_ts = _entry_expiry(m, symbols)
            if m.order_type >= _STOP:
                _add_stop(m, at, expire_ts, arena, arena_ext, levels, index, stops, ladder_keys,
                          ladder_levels, meta, expiry)
                return
            _execute(seq, m.ts, sym, np.int64(m.side), m.order_type == OrderType.MARKET,
                     np.int64(m.tif), m.price, m.qty, 0, m.order_id, m.trader, m.flags,
                     m.display_qty, expire_ts, at, arena, arena_ext, levels, index, books,
                     ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        elif m.kind == Kind.CANCEL:
            _cancel(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                    meta, symbols, stops, expiry, l2, events, cnt)
        else:
            _modify(m, seq, in_call, arena, arena_ext, levels, index, books, ladder_keys,
                    ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt)
        check_stops = cnt[0] != fills_before
    # only trades move the last price, so only a message that traded can trigger stops; a
    # symbol entering CONTINUOUS checks them too (stops triggered by the fills before a band
    # breach waited through the call). Meta first: with no stop pending anywhere the symbol's
    # stop rows are never read
    if check_stops and meta[M_STOPS_LIVE] > 0 and (
            stops[np.int64(sym) * 2].live + stops[np.int64(sym) * 2 + 1].live > 0):
        _release_stops(seq, m.ts, np.int64(sym), arena, arena_ext, levels, index, books,
                       ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                       events, cnt)
    if srow.phase != _CONTINUOUS and _is_call(srow.phase):
        _publish_indicative(seq, m.ts, np.int64(sym), levels, books, ladder_levels, symbols,
                            events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _expire(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
            symbols, stops, expiry, fills, l2, events, cnt):
    """``_expire_upto`` with no limit: every due expiry (what ``process_batch`` runs)."""
    return _expire_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                        ladder_levels, meta, symbols, stops, expiry, fills, l2, events, cnt,
                        _INT64_MAX)


@njit(cache=True, _nrt=False, inline="always")
def _expire_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                 meta, symbols, stops, expiry, fills, l2, events, cnt, limit):
    """Remove every live order whose expiry is at or before ``ts``, in heap order
    (CANCELLED/EXPIRED, and an L2 row for a resting order's level), at most ``limit`` of them;
    rows carry ``seq``.

    An order of a symbol in a call leaves with the symbol's indicative published after it if it
    changed. Resumable: it checks room for each expiry (two events, one L2 row) and returns
    NEED_OUTPUT with the state consistent and every row so far written, so the call after
    growing goes on with the next one. Returns OK when none is left or ``limit`` are done
    (``exchange.shards`` steps them one at a time, to interleave several engines' expiries).
    """
    done = 0
    while done < limit and meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= ts:
        done += 1
        if cnt[1] + 1 > len(l2) or cnt[2] + 2 > len(events):
            meta[M_NEED_FILLS] = cnt[0]
            meta[M_NEED_L2] = cnt[1] + 1
            meta[M_NEED_EVENTS] = cnt[2] + 2
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
        if _is_call(symbols[sym].phase):
            _publish_indicative(seq, ts, np.int64(sym), levels, books, ladder_levels, symbols,
                                events, cnt)
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _prefetch_staged(msgs, i, n, ahead, arena, levels, index, found):
    """Prefetch what messages i+ahead, i+ahead/2 and i+ahead/4 will touch, one stage each: the
    index bucket, the arena row, the row's level and queue neighbours. Returns the arena slot
    the second stage found for message ``i + ahead // 2`` (-1: none, or a NEW); ``found`` is
    its return of ``ahead // 2 - ahead // 4`` messages before (-2: unknown, look it up again).
    A stale slot (its order gone meanwhile) only prefetches a useless row.

    Why pass it on: the third stage needs the slot of the message the second stage looked up a
    few messages before, and looking the same id up again (hash and probe, its bucket cached)
    was much of the stages' cost. The plain kernel with it against without, prefetching on,
    interleaved rounds (7, then 11) at load 4-7: QuantCup 1.03x and 1.05x, flash1 1.02x and
    1.04x; uniform1 0.98x and 1.01x, uniform100 0.96x and 1.03x (the noise there)."""
    j = i + ahead
    if j < n:
        prefetch(index, index_home(msgs[j].symbol, msgs[j].order_id, len(index) - 1))
    j = i + ahead // 2
    got = np.int64(-1)
    if j < n and msgs[j].kind != Kind.NEW:
        got = index_find(index, msgs[j].symbol, msgs[j].order_id)
        if got >= 0:
            prefetch(arena, got)
    j = i + ahead // 4
    if j < n and msgs[j].kind != Kind.NEW:
        r = found if found != -2 else index_find(index, msgs[j].symbol, msgs[j].order_id)
        if r >= 0:
            o = arena[r]
            prefetch(levels, o.level)
            if o.prev >= 0:
                prefetch(arena, o.prev)
            if o.next >= 0:
                prefetch(arena, o.next)
    return got


_NOT_PLAIN = 0   # _plain_path: take the general path
_PLAIN_RESTS = 1  # a plain order that cannot trade: _rest_plain
_PLAIN_TRADES = 2  # a plain order that may trade: the general path without check_new
_PLAIN_CANCEL = 3  # a CANCEL on a CONTINUOUS symbol without a dynamic band: _cancel at once


@njit(cache=True, _nrt=False, inline="always")
def _plain_path(m, meta, symbols, ticks, books, levels, ladder_levels):
    """Return which fast path message ``m`` may take: _PLAIN_CANCEL for a CANCEL on a known
    CONTINUOUS symbol without a dynamic band; _PLAIN_RESTS or _PLAIN_TRADES for a NEW that is a
    plain limit order on a plain symbol (resting at once, or able to trade); else _NOT_PLAIN.

    Plain message: LIMIT, GTC, no flags, no stop, display, minimum or expiry fields, side and
    quantity valid, price inside the book's price band. Plain symbol: CONTINUOUS, lot size 1,
    minimum order quantity at most 1, the one-row tick table of tick 1, no static or dynamic
    band, and no pending stop anywhere (meta's count). Then every step of semantics.md's NEW
    validation but the duplicate id passes, no fill can breach a band and no stop can trigger,
    so ``_rest_plain`` (or ``_process_one`` skipping ``check_new``) gives exactly the rows of
    the general path. Why: those ~25 checks, and for a resting order the match call and the
    trade bookkeeping, were ~14 ns of the ~60 ns a resting order took; a cancel skips the
    phase, band and stop steps of ``_room`` and ``_process_one`` that cannot apply to it."""
    if m.kind == Kind.CANCEL:
        if m.symbol >= meta[M_NSYM]:
            return _NOT_PLAIN
        srow = symbols[m.symbol]
        if srow.phase == _CONTINUOUS and srow.dynamic_band_bps == 0:
            return _PLAIN_CANCEL
        return _NOT_PLAIN
    if (m.kind != Kind.NEW or m.side > _SELL or meta[M_STOPS_LIVE] != 0
            or (np.int64(m.order_type) | np.int64(m.tif) | np.int64(m.flags) | m.stop_price
                | m.display_qty | m.min_qty | m.expire_ts) != 0
            or m.qty <= 0 or m.qty > MAX_QTY or m.price <= 0 or m.symbol >= meta[M_NSYM]):
        return _NOT_PLAIN
    srow = symbols[m.symbol]
    if ((srow.phase - _CONTINUOUS) | (srow.lot_size - 1) | (srow.tick_n - 1)
            | srow.static_band_bps | srow.dynamic_band_bps | (srow.min_order_qty > 1)) != 0:
        return _NOT_PLAIN
    if ticks[srow.tick_off].tick != 1:
        return _NOT_PLAIN
    own = books[np.int64(m.symbol) * 2 + m.side]
    if m.price < own.min_price or m.price > own.max_price:
        return _NOT_PLAIN
    opp = books[np.int64(m.symbol) * 2 + 1 - m.side]
    if opp.n == 0 or not _crosses(np.int64(m.side), False, m.price,
                                  levels[ladder_levels[opp.off + opp.n - 1]].price):
        return _PLAIN_RESTS
    return _PLAIN_TRADES


@njit(cache=True, _nrt=False, inline="always")
def _rest_plain(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                symbols, expiry, fills, l2, events, cnt):
    """Process a message ``_plain_path`` found _PLAIN_RESTS: a duplicate id is REJECTED, else it is
    ACCEPTED and rests (CANCELLED OVERFLOW if its level would overflow), as the general path.
    Returns OK, or before writing anything the state or output that must grow."""
    sym = np.int64(m.symbol)
    side = np.int64(m.side)
    b = sym * 2 + side
    status = _room_for_one_order(arena, levels, index, meta)
    if status != OK:
        return status
    if books[b].n >= books[b].cap:
        meta[M_NEED_BOOK] = b
        return NEED_LADDER
    if not output_fits(meta, cnt, fills, l2, events, 0, 1, 2):
        return NEED_OUTPUT
    meta[M_SEQ] += 1
    meta[M_BAND_LO] = 0
    meta[M_BAND_HI] = MAX_PRICE
    p = index_probe(index, m.symbol, m.order_id)
    if p >= 0:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.DUPLICATE_ID, 0, 0, 0)
        return OK
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.ACCEPTED, Reason.NONE,
                0, m.qty, 0)
    if not _rest(seq, m.ts, m.symbol, side, m.price, m.qty, 0, m.order_id, m.trader, m.flags, 0,
                 np.int64(m.tif), np.int64(0), _LIMIT, -1 - p, arena, arena_ext, levels, index,
                 books, ladder_keys, ladder_levels, meta, expiry, l2, cnt):
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.CANCELLED,
                    Reason.OVERFLOW, 0, 0, 0)
    return OK


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
    # the second prefetch stage's last four slots, oldest first (``_prefetch_staged``)
    lag4 = ahead // 2 - ahead // 4 == 4
    f0 = f1 = f2 = f3 = np.int64(-2)
    for i in range(start, n):
        if ahead > 0:
            got = _prefetch_staged(msgs, i, n, ahead, arena, levels, index,
                                   f0 if lag4 else np.int64(-2))
            f0, f1, f2, f3 = f1, f2, f3, got
        m = msgs[i]
        # expiries leave before the message, in rows carrying its seq (the one it will get)
        if meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= m.ts:
            status = _expire(m.ts, meta[M_SEQ] + 1, arena, arena_ext, levels, index, books,
                             ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                             events, cnt)
            if status != OK:
                return status, i
        # re-opening auctions that reached their end uncross before the message, after them
        if meta[M_NEXT_END] != 0 and meta[M_NEXT_END] <= m.ts:
            status = _auction_ends(m.ts, meta[M_SEQ] + 1, arena, arena_ext, levels, index,
                                   books, ladder_keys, ladder_levels, meta, symbols, stops,
                                   expiry, fills, l2, events, cnt)
            if status != OK:
                return status, i
        plain = _plain_path(m, meta, symbols, ticks, books, levels, ladder_levels)
        if plain == _PLAIN_RESTS:
            status = _rest_plain(m, meta[M_SEQ] + 1, arena, arena_ext, levels, index, books,
                                 ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2,
                                 events, cnt)
            if status != OK:
                return status, i
            continue
        if plain == _PLAIN_CANCEL:
            # what the general path does for it: a cancel never trades, so no stop is checked
            # and the symbol stays CONTINUOUS (no indicative)
            if not output_fits(meta, cnt, fills, l2, events, 0, 1, 1):
                return NEED_OUTPUT, i
            meta[M_SEQ] += 1
            meta[M_BAND_LO] = 0
            meta[M_BAND_HI] = MAX_PRICE
            _cancel(m, meta[M_SEQ], arena, arena_ext, levels, index, books, ladder_keys,
                    ladder_levels, meta, symbols, stops, expiry, l2, events, cnt)
            continue
        status = _room(m, arena, levels, index, books, ladder_levels, meta, symbols, stops,
                       expiry, fills, l2, events, cnt)
        if status != OK:
            return status, i
        meta[M_SEQ] += 1
        _process_one(m, meta[M_SEQ], arena, arena_ext, levels, index, books, ladder_keys,
                     ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt,
                     plain == _PLAIN_TRADES)
    return OK, n
