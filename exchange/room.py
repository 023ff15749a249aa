"""Room checks: before a message runs, the state and output arrays can take its worst case.

``_room`` bounds what one message may add (orders, levels, index slots, ladder entries, expiry
slots, output rows: a stop cascade and an uncross included, ``_cascade_room``/``_uncross_room``)
and returns the NEED_* status (``exchange.status``) naming the array to grow, so the kernels
never allocate and a message is processed whole or not at all.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .auction import uncross_room
from .book import (
    MARK_PENDING, M_EXPIRY_N, M_FREE_LEVEL, M_FREE_ORDER, M_INDEX_COUNT, M_LEVEL_HW,
    M_NEED_BOOK, M_NSYM, M_ORDER_HW, M_STOPS_LIVE, M_STP,
)
from .order_index import index_find
from .rows import output_fits
from .schema import Kind, OrderType, Phase, Side, Stp, Tif
from .status import NEED_EXPIRY, NEED_INDEX, NEED_LADDER, NEED_LEVELS, NEED_ORDERS, NEED_OUTPUT, OK
from .validation import crosses as _crosses

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=(
    "exsim.exchange.auction", "exsim.exchange.book", "exsim.exchange.expiry",
    "exsim.exchange.fillable", "exsim.exchange.order_index", "exsim.exchange.prefetch",
    "exsim.exchange.removal", "exsim.exchange.rows", "exsim.exchange.schema",
    "exsim.exchange.validation"))

_SELL = int(Side.SELL)
_DAY = int(Tif.DAY)
_STOP = int(OrderType.STOP)
_STOP_LIMIT = int(OrderType.STOP_LIMIT)
_CONTINUOUS = int(Phase.CONTINUOUS)
_CLOSED = int(Phase.CLOSED)
_OPENING = int(Phase.OPENING_AUCTION)
_CLOSING = int(Phase.CLOSING_AUCTION)
# what the worst case of a message adds for the phases: a band breach's PHASE event and the
# rest's L2 row, and one INDICATIVE event (room bounds, see ``_room``)
_PHASE_EVENTS = 3
_PHASE_L2 = 1


@njit(cache=True, _nrt=False, inline="always")
def _levels_full(levels, meta, k):
    """Whether the level table cannot take ``k`` more rows (the free stack counted as empty)."""
    return meta[M_LEVEL_HW] + k > len(levels) and (k > 1 or meta[M_FREE_LEVEL] < 0)


@njit(cache=True, _nrt=False, inline="always")
def _room_for_one_order(arena, levels, index, meta):
    """Return OK if the arena, the level table and the order index can take one more order
    (and its level), else the first of them that must grow."""
    if meta[M_FREE_ORDER] < 0 and meta[M_ORDER_HW] >= len(arena):
        return NEED_ORDERS
    if _levels_full(levels, meta, 1):
        return NEED_LEVELS
    if 2 * (meta[M_INDEX_COUNT] + 1) > len(index):
        return NEED_INDEX
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _room(m, arena, levels, index, books, ladder_levels, meta, symbols, stops, expiry, fills, l2,
          events, cnt):
    """Return OK if every array can take this message's worst case, else what must grow.

    Bounds (why they hold): every fill takes at least one lot from an aggressor, so fills are at
    most the aggressors' quantity; every fill also ends a resting order, ends the aggressor or
    uses up an iceberg slice that refills, and refills at a level are at most its reserve. With
    pending stops on the symbol and an order that can trade, the whole cascade is bounded at
    once: aggressors are the order and the symbol's P pending stops, so fills <= min(their
    quantity, resting + 2P + 1 + the refills the resting icebergs can make; released stops are
    never icebergs), both O(1) from the book rows' ``stop_qty`` and ``slices``; each aggressor adds a few events and at most two L2
    rows beyond the levels that ever exist (the book's and P more), and at most P + 1 new levels.
    Phases add at most a breach's PHASE event and L2 row (the rest of the order that breached,
    after which nothing matches) and one INDICATIVE event (``_PHASE_EVENTS``, ``_PHASE_L2``);
    a PHASE message that uncrosses needs ``_uncross_room``.
    """
    need_fills = 0
    need_l2 = 1
    need_events = 1
    sym = np.int64(m.symbol)
    if m.kind == Kind.PHASE and sym < meta[M_NSYM]:
        target = np.int64(m.phase)
        if target == _OPENING or target == _CLOSING or (
                (target == _CONTINUOUS or target == _CLOSED) and symbols[sym].auction != 0):
            return _uncross_room(sym, target == _OPENING or target == _CONTINUOUS, levels, books,
                                 ladder_levels, meta, stops, fills, l2, events, cnt)
        if target == _CONTINUOUS and stops[sym * 2].live + stops[sym * 2 + 1].live > 0:
            # entering CONTINUOUS checks the stops: the cascade, behind the PHASE event
            cnt[2] += 1
            status = _cascade_room(m, sym, np.int64(0), np.int64(0), levels, books,
                                   ladder_levels, meta, stops, fills, l2, events, cnt)
            cnt[2] -= 1
            return status
        need_events = 2     # the PHASE event, the indicative of the call it enters
    elif m.kind <= Kind.MODIFY and sym < meta[M_NSYM] and m.kind != Kind.CANCEL:
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
            status = _room_for_one_order(arena, levels, index, meta)
            if status != OK:
                return status
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
                    if (cnt[0] + bound <= len(fills)
                            and cnt[1] + opp.n + 3 + _PHASE_L2 <= len(l2)
                            and cnt[2] + 2 * bound + 4 + _PHASE_EVENTS <= len(events)):
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
    need_events += _PHASE_EVENTS
    need_l2 += _PHASE_L2
    return OK if output_fits(meta, cnt, fills, l2, events, need_fills, need_l2,
                             need_events) else NEED_OUTPUT


@njit(cache=True, _nrt=False)
def _cascade_need(sym, qty, levels, books, ladder_levels, meta, stops):
    """Return (status, fills, l2 rows, events) a cascade of ``sym``'s pending stops behind an
    aggressor of ``qty`` may need (see ``_room``); status is what state must grow first (OK:
    none), the counts then meaningless."""
    p = stops[sym * 2].live + stops[sym * 2 + 1].live
    if _levels_full(levels, meta, p + 2):
        return NEED_LEVELS, 0, 0, 0
    for b in (sym * 2, sym * 2 + 1):
        if books[b].n + p + 1 > books[b].cap:
            meta[M_NEED_BOOK] = b
            return NEED_LADDER, 0, 0, 0
    # the book rows' running totals: the pending stops' quantity and the books' reserve
    q = max(qty, 0) + stops[sym * 2].stop_qty + stops[sym * 2 + 1].stop_qty
    resting = books[sym * 2].live + books[sym * 2 + 1].live
    units = min(resting + 2 * p + 1 + books[sym * 2].slices + books[sym * 2 + 1].slices, q)
    if meta[M_STP] != Stp.NONE:
        units += resting + p
    return (OK, units, books[sym * 2].n + books[sym * 2 + 1].n + 3 * p + 6 + _PHASE_L2,
            2 * units + 3 * p + 8 + _PHASE_EVENTS)


@njit(cache=True, _nrt=False)
def _cascade_room(m, sym, side, qty, levels, books, ladder_levels, meta, stops, fills, l2,
                  events, cnt):
    """``_room`` for an order that can trade on a symbol with pending stops (see there)."""
    status, need_fills, need_l2, need_events = _cascade_need(sym, qty, levels, books,
                                                             ladder_levels, meta, stops)
    if status != OK:
        return status
    return OK if output_fits(meta, cnt, fills, l2, events, need_fills, need_l2,
                             need_events) else NEED_OUTPUT


@njit(cache=True, _nrt=False)
def _uncross_room(sym, continuous, levels, books, ladder_levels, meta, stops, fills, l2, events,
                  cnt):
    """Return OK if the outputs can take an uncross of ``sym``, its PHASE event and, if the
    symbol then is ``continuous``, the stop cascade after it (with a breach's rows); else the
    status of what must grow (NEED_OUTPUT with the ``M_NEED_*`` counts set)."""
    nf = np.int64(0)
    nl = np.int64(_PHASE_L2)
    ne = np.int64(1 + _PHASE_EVENTS)
    if continuous and stops[sym * 2].live + stops[sym * 2 + 1].live > 0:
        status, f, l, e = _cascade_need(sym, np.int64(0), levels, books, ladder_levels, meta, stops)
        if status != OK:
            return status
        nf += f
        nl += l
        ne += e
    # the uncross's own rows come after these: ask for room as if they were written already
    cnt[0] += nf
    cnt[1] += nl
    cnt[2] += ne
    ok = uncross_room(sym, books, meta, fills, l2, events, cnt)
    cnt[0] -= nf
    cnt[1] -= nl
    cnt[2] -= ne
    if not ok:
        return NEED_OUTPUT
    return OK
