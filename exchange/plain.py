"""The plain kernel: limit / cancel / modify flow on continuous symbols, with no venue rule.

``process_plain`` takes the arguments of ``kernels.process_batch`` and returns the same
(status, next), writing byte for byte the rows and state ``process_batch`` would, for every
message it takes. It takes a message only when no venue rule can apply to it:

- engine-wide, checked once per call (a plain message cannot change them): no self-trade
  prevention, no pending stop anywhere;
- per message: no expiry due and no re-opening auction ending at its ts; kind NEW, CANCEL or
  MODIFY on a known symbol that is CONTINUOUS without a dynamic band; a NEW is a LIMIT GTC
  order with no flag, stop, display, minimum or expiry field and a valid side; a MODIFY names
  an order without ``marks`` (no iceberg, expiry, stop or other cold field), or none.

Lot sizes, minimum order quantities, tick tables, static bands, ownership and the expiry heap of
*other* orders (an order matched away leaves it, ``remove_order``) are handled here as there.
Anything else makes it return ``NEED_FULL`` with the index of that message, having written
nothing for it; the caller (``exchange.processing``) then runs ``process_batch`` from there to
the end of the batch. So a flow that never meets a venue rule never calls -- never compiles --
the full kernel (~350 s of cold compile on the development VM, against ~40 s for this one),
and a plain message pays none of the venue checks, the stop, auction and band code, or the
register pressure of their code around the hot loop.

Why it cannot drift from ``process_batch``: it runs the same room checks (``_rest_plain``'s for
an order that rests at once, ``_room``'s for the rest, restricted to the cases it takes), the
same validation steps in the same order, and the same primitives (``_rest``, ``remove_order``,
``remove_level``, ``check_modify``); ``_match_plain`` is ``matching._match`` without self-trade
prevention and the dynamic band, which cannot apply here. tests/exchange_tests/test_plain_kernel.py
compares the two kernels' outputs and state on mixed flows.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import (
    M_BAND_HI, M_BAND_LO, M_EXPIRY_N, M_INDEX_COUNT, M_NEXT_END, M_NSYM, M_OWNERSHIP, M_SEQ,
    M_STOPS_LIVE, M_STP, M_NEED_BOOK, M_TRADE_ID, append_to_level, detach_from_level,
    remove_level,
)
from .kernels import _prefetch_staged, _rest_plain
from .matching import _rest
from .order_index import index_find, index_probe
from .removal import remove_order
from .room import _PHASE_EVENTS, _PHASE_L2, _room_for_one_order
from .rows import output_fits, write_event, write_l2
from .schema import MAX_PRICE, MAX_QTY, Event, Kind, OrderType, Phase, Reason, Side
from .status import OK, NEED_LADDER, NEED_OUTPUT
from .validation import _bad_price, check_modify, off_lot, outside_static_band
from .validation import crosses as _crosses

# numba keys this module's cache on this file only; these files are compiled into its kernel
guard(__name__, __file__, deps=(
    "exsim.exchange.book", "exsim.exchange.kernels", "exsim.exchange.matching",
    "exsim.exchange.order_index", "exsim.exchange.prefetch", "exsim.exchange.removal",
    "exsim.exchange.room", "exsim.exchange.rows", "exsim.exchange.schema",
    "exsim.exchange.validation"))

__all__ = ["process_plain", "NEED_FULL"]

NEED_FULL = 7   # status: message ``next`` needs ``kernels.process_batch`` (nothing written for it)

_BUY = int(Side.BUY)
_SELL = int(Side.SELL)
_LIMIT = int(OrderType.LIMIT)
_CONTINUOUS = int(Phase.CONTINUOUS)
_NEW = int(Kind.NEW)
_CANCEL = int(Kind.CANCEL)
_MODIFY = int(Kind.MODIFY)
# how a plain NEW goes (``kernels._plain_path``'s classes, so the room checks are the same)
_GENERAL = 0   # every validation step, then matching (process_batch's general path)
_RESTS = 1     # cannot trade: ``_rest_plain``
_TRADES = 2    # may trade: every step but the duplicate id passes


@njit(cache=True, _nrt=False, inline="always")
def _short_symbol(srow, ticks):
    """Whether a symbol's plain NEWs may take the short paths: lot 1, tick 1, no static band,
    minimum at most 1 (``kernels._plain_path``'s symbol test, the phase and dynamic band
    checked apart)."""
    return ((srow.lot_size - 1) | (srow.tick_n - 1) | srow.static_band_bps
            | (srow.min_order_qty > 1)) == 0 and ticks[srow.tick_off].tick == 1


@njit(cache=True, _nrt=False, inline="always")
def _new_class(m, short, books, levels, ladder_levels):
    """Return _RESTS, _TRADES or _GENERAL for a NEW with no venue field (``kernels._plain_path``
    restricted to such messages, no stop pending); ``short``: ``_short_symbol`` of its symbol."""
    if m.qty <= 0 or m.qty > MAX_QTY or m.price <= 0 or not short:
        return _GENERAL
    own = books[np.int64(m.symbol) * 2 + m.side]
    if m.price < own.min_price or m.price > own.max_price:
        return _GENERAL
    opp = books[np.int64(m.symbol) * 2 + 1 - m.side]
    if opp.n == 0 or not _crosses(np.int64(m.side), False, m.price,
                                  levels[ladder_levels[opp.off + opp.n - 1]].price):
        return _RESTS
    return _TRADES


@njit(cache=True, _nrt=False, inline="always")
def _check_new_plain(m, books, index, symbols, ticks):
    """``validation.check_new`` for a NEW with no venue field and a valid side on a symbol in
    CONTINUOUS (the steps that can refuse it, in the same order): (reason, -1), or (NONE, the
    empty index bucket its id probe stopped at)."""
    qty = m.qty
    if qty <= 0:
        return Reason.BAD_QTY, -1
    if qty > MAX_QTY:
        return Reason.OVERFLOW, -1
    sym_row = symbols[m.symbol]
    if off_lot(sym_row, qty):
        return Reason.OFF_LOT, -1
    if qty < sym_row.min_order_qty:
        return Reason.BELOW_MIN_QTY, -1
    reason = _bad_price(books, ticks, sym_row, np.int64(m.symbol) * 2 + m.side, m.price)
    if reason != Reason.NONE:
        return reason, -1
    if outside_static_band(sym_row, m.price):
        return Reason.OUTSIDE_STATIC_BAND, -1
    p = index_probe(index, m.symbol, m.order_id)
    if p >= 0:
        return Reason.DUPLICATE_ID, -1
    return Reason.NONE, -1 - p


@njit(cache=True, _nrt=False, inline="always")
def _room_plain(m, side, arena, levels, index, books, ladder_levels, meta, fills, l2, events,
                cnt):
    """``room._room`` for a NEW or MODIFY this kernel takes (``side``: the order's side, 2 for a
    MODIFY of an unknown id): no self-trade prevention, no pending stop, no expiry tif."""
    need_fills = 0
    need_l2 = 1
    need_events = 1
    sym = np.int64(m.symbol)
    if side <= _SELL:
        status = _room_for_one_order(arena, levels, index, meta)
        if status != OK:
            return status
        own = sym * 2 + side
        if books[own].n >= books[own].cap:
            meta[M_NEED_BOOK] = own
            return NEED_LADDER
        opp = books[sym * 2 + 1 - side]
        qty = m.qty
        bound = opp.live
        q = max(qty, 0)
        if q < bound:
            bound = q  # each fill takes at least one lot
        elif opp.n > 0:
            bound = q
            if (cnt[0] + bound <= len(fills)
                    and cnt[1] + opp.n + 3 + _PHASE_L2 <= len(l2)
                    and cnt[2] + 2 * bound + 4 + _PHASE_EVENTS <= len(events)):
                return OK
            bound = opp.live
            h = np.int64(0)
            acc = np.int64(0)
            for k in range(opp.off + opp.n - 1, opp.off - 1, -1):
                L = levels[ladder_levels[k]]
                if not _crosses(side, False, m.price, L.price):
                    break
                h += L.hidden
                acc += L.qty + L.hidden
                if h >= qty or acc >= qty:
                    break
            bound += min(h, q)
            bound = min(bound, q)
        need_fills = bound
        need_events = 2 * bound + 4
        need_l2 = opp.n + 3
    need_events += _PHASE_EVENTS
    need_l2 += _PHASE_L2
    return OK if output_fits(meta, cnt, fills, l2, events, need_fills, need_l2,
                             need_events) else NEED_OUTPUT


@njit(cache=True, _nrt=False, inline="always")
def _match_plain(seq, ts, symbol, side, limit, qty, order_id, trader, filled, arena, arena_ext,
                 levels, index, books, ladder_keys, ladder_levels, meta, symbols, expiry, fills,
                 l2, events, cnt):
    """``matching._match`` with no self-trade prevention and no dynamic band (neither can stop
    it here); returns the quantity left."""
    opp = 1 - side
    opp_b = np.int64(symbol) * 2 + opp
    remaining = qty
    last = np.int64(0)
    while remaining > 0:
        bk = books[opp_b]
        if bk.n == 0:
            break
        lv = ladder_levels[bk.off + bk.n - 1]
        L = levels[lv]
        price = L.price
        if not _crosses(side, False, limit, price):
            break
        changed = False
        while remaining > 0 and L.count > 0:
            r = L.head
            o = arena[r]
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
                    # a resting iceberg's refill: the next slice joins the back of the queue
                    s = min(arena_ext[r].display, o.hidden)
                    o.hidden -= s
                    L.hidden -= s
                    books[opp_b].slices -= 1
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
    if last != 0:
        symbols[symbol].last_price = last
    return remaining


@njit(cache=True, _nrt=False, inline="always")
def _execute_plain(seq, ts, symbol, side, price, qty, filled, order_id, trader, flags, at, arena,
                   arena_ext, levels, index, books, ladder_keys, ladder_levels, meta, symbols,
                   expiry, fills, l2, events, cnt):
    """``matching._execute`` for a GTC limit order on a CONTINUOUS symbol without a band: match,
    then rest what is left (CANCELLED OVERFLOW if its level would overflow)."""
    live_before = meta[M_INDEX_COUNT]
    remaining = _match_plain(seq, ts, symbol, side, price, qty, order_id, trader, filled, arena,
                             arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                             symbols, expiry, fills, l2, events, cnt)
    if remaining == 0:
        return
    done = filled + qty - remaining
    # matching only ever removes ids: with the count unchanged the table is as probed
    if not _rest(seq, ts, symbol, side, price, remaining, done, order_id, trader, flags,
                 np.int64(0), np.int64(0), np.int64(0), _LIMIT,
                 at if meta[M_INDEX_COUNT] == live_before else -1, arena, arena_ext, levels,
                 index, books, ladder_keys, ladder_levels, meta, expiry, l2, cnt):
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.OVERFLOW, done, 0, 0)


# a modify to a new price goes through this one compiled copy (as process_batch's cold callers
# share ``_execute_cold``), so the matching code is compiled twice, not once per caller
@njit(cache=True, _nrt=False)
def _execute_plain_cold(seq, ts, symbol, side, price, qty, filled, order_id, trader, flags, at,
                        arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                        symbols, expiry, fills, l2, events, cnt):
    """``_execute_plain`` for a MODIFY to a new price (see there)."""
    _execute_plain(seq, ts, symbol, side, price, qty, filled, order_id, trader, flags, at, arena,
                   arena_ext, levels, index, books, ladder_keys, ladder_levels, meta, symbols,
                   expiry, fills, l2, events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _cancel_plain(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, expiry, l2, events, cnt):
    """``kernels._cancel`` with no pending stop anywhere (none can be named)."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    if bucket < 0:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.UNKNOWN_ID, 0, 0, 0)
        return
    r = np.int64(index[bucket].slot)
    if meta[M_OWNERSHIP] != 0 and m.trader != arena[r].trader:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.NOT_OWNER, 0, 0, 0)
        return
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.CANCELLED,
                Reason.USER_CANCEL, o.filled, 0, 0)
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
    L = levels[lv]
    write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta, np.int64(sym) * 2 + side,
                     side, lv)


@njit(cache=True, _nrt=False, inline="always")
def _modify_plain(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, ticks, expiry, fills, l2, events, cnt):
    """``kernels._modify`` of an order without marks (so no reserve, no stop, no cold field),
    or of an unknown id, on a CONTINUOUS symbol."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    r = np.int64(index[bucket].slot) if bucket >= 0 else -1
    reason = check_modify(m, r, books, arena, arena_ext, levels, ladder_levels, symbols, ticks,
                          meta, False)
    if reason != Reason.NONE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED, reason, 0, 0,
                    0)
        return
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    L = levels[lv]
    if m.price == o.price:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.MODIFIED, Reason.NONE,
                    o.filled, m.qty, 0)
        if m.qty == o.leaves:
            return
        if m.qty < o.leaves:
            # the place in the queue is kept
            L.qty -= o.leaves - m.qty
            o.leaves = m.qty
        else:
            detach_from_level(arena, levels, r)
            o.leaves = m.qty
            append_to_level(arena, levels, r, lv)
        write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
        return
    # a new price is delete + add: the order loses its place and may trade as an aggressor
    filled = o.filled
    trader = o.trader
    flags = o.flags
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.MODIFIED, Reason.NONE,
                filled, m.qty, 0)
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
    write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta,
                     np.int64(sym) * 2 + side, side, lv)
    _execute_plain_cold(np.int64(seq), np.int64(m.ts), np.int64(sym), side, np.int64(m.price),
                        np.int64(m.qty), np.int64(filled), np.uint64(m.order_id),
                        np.uint32(trader), np.uint8(flags), np.int64(-1), arena, arena_ext,
                        levels, index, books, ladder_keys, ladder_levels, meta, symbols, expiry,
                        fills, l2, events, cnt)


# nogil: as process_batch, the kernel touches no Python object
@njit(cache=True, _nrt=False, nogil=True)
def process_plain(msgs, start, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, ahead=0):
    """Process ``msgs[start:]`` as ``kernels.process_batch`` does, while each message is plain
    (see the module). Returns (status, next): OK with next == len(msgs) when done; a NEED_*
    growth status as ``process_batch``'s; or NEED_FULL with the index of the first message that
    is not plain (nothing written for it: ``process_batch`` goes on from there)."""
    n = len(msgs)
    # engine-wide rules no plain message can switch on: checked once
    if meta[M_STP] != 0 or meta[M_STOPS_LIVE] != 0:
        return NEED_FULL, start
    # the symbol of the last message, and its tests: no plain message changes a symbol's
    # phase, band or rules, so they are read again only when the symbol changes
    last_sym = np.int64(-1)
    plain_sym = False
    short = False
    # the second prefetch stage's last four slots, oldest first; the third stage reads the
    # oldest when it lags the second by four messages (the default distance, 16), else -2
    lag4 = ahead // 2 - ahead // 4 == 4
    f0 = f1 = f2 = f3 = np.int64(-2)
    for i in range(start, n):
        if ahead > 0:
            got = _prefetch_staged(msgs, i, n, ahead, arena, levels, index,
                                   f0 if lag4 else np.int64(-2))
            f0, f1, f2, f3 = f1, f2, f3, got
        m = msgs[i]
        if meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= m.ts:
            return NEED_FULL, i
        if meta[M_NEXT_END] != 0 and meta[M_NEXT_END] <= m.ts:
            return NEED_FULL, i
        kind = m.kind
        how = _GENERAL
        if kind > _MODIFY or m.symbol >= meta[M_NSYM]:
            return NEED_FULL, i
        if m.symbol != last_sym:
            last_sym = np.int64(m.symbol)
            srow = symbols[last_sym]
            plain_sym = srow.phase == _CONTINUOUS and srow.dynamic_band_bps == 0
            short = _short_symbol(srow, ticks)
        if not plain_sym:
            return NEED_FULL, i
        if kind == _CANCEL:
            if not output_fits(meta, cnt, fills, l2, events, 0, 1, 1):
                return NEED_OUTPUT, i
            meta[M_SEQ] += 1
            meta[M_BAND_LO] = 0
            meta[M_BAND_HI] = MAX_PRICE
            _cancel_plain(m, meta[M_SEQ], arena, arena_ext, levels, index, books, ladder_keys,
                          ladder_levels, meta, symbols, expiry, l2, events, cnt)
            continue
        if kind == _NEW:
            if (m.side > _SELL or (np.int64(m.order_type) | np.int64(m.tif) | np.int64(m.flags)
                                   | m.stop_price | m.display_qty | m.min_qty | m.expire_ts)
                    != 0):
                return NEED_FULL, i
            how = _new_class(m, short, books, levels, ladder_levels)
            if how == _RESTS:
                status = _rest_plain(m, meta[M_SEQ] + 1, arena, arena_ext, levels, index, books,
                                     ladder_keys, ladder_levels, meta, symbols, expiry, fills,
                                     l2, events, cnt)
                if status != OK:
                    return status, i
                continue
            side = np.int64(m.side)
        else:
            r = index_find(index, m.symbol, m.order_id)
            if r >= 0 and arena[r].marks != 0:
                return NEED_FULL, i
            side = np.int64(arena[r].side) if r >= 0 else np.int64(2)
        status = _room_plain(m, side, arena, levels, index, books, ladder_levels, meta, fills, l2,
                             events, cnt)
        if status != OK:
            return status, i
        meta[M_SEQ] += 1
        seq = meta[M_SEQ]
        meta[M_BAND_LO] = 0
        meta[M_BAND_HI] = MAX_PRICE
        if kind == _MODIFY:
            _modify_plain(m, seq, arena, arena_ext, levels, index, books, ladder_keys,
                          ladder_levels, meta, symbols, ticks, expiry, fills, l2, events, cnt)
            continue
        if how == _TRADES:
            p = index_probe(index, m.symbol, m.order_id)
            reason, at = (Reason.DUPLICATE_ID, -1) if p >= 0 else (Reason.NONE, -1 - p)
        else:
            reason, at = _check_new_plain(m, books, index, symbols, ticks)
        if reason != Reason.NONE:
            write_event(events, cnt, seq, m.ts, symbols, m.symbol, m.order_id, Event.REJECTED,
                        reason, 0, 0, 0)
            continue
        write_event(events, cnt, seq, m.ts, symbols, m.symbol, m.order_id, Event.ACCEPTED,
                    Reason.NONE, 0, m.qty, 0)
        _execute_plain(seq, m.ts, m.symbol, side, m.price, m.qty, 0, m.order_id, m.trader,
                       m.flags, at, arena, arena_ext, levels, index, books, ladder_keys,
                       ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
    return OK, n
