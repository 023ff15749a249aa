"""Trading-phase changes inside the batch kernel: PHASE messages and re-opening auctions' ends.

``_phase_message`` moves a symbol to a new phase (running the uncross of ``exchange.auction`` when
a call ends); ``_auction_ends`` uncrosses every re-opening auction whose end the next message
reaches (resumable: it stops between two uncrosses when an array needs room).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .auction import uncross
from .book import M_BAND_HI, M_BAND_LO, M_NEXT_END, M_NSYM
from .matching import _dynamic_band, _is_call, _refresh_next_end
from .room import _uncross_room
from .rows import write_event
from .schema import Event, Phase, Reason
from .status import OK
from .stops import _release_stops
from .validation import check_phase

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=(
    "exsim.exchange.auction", "exsim.exchange.book", "exsim.exchange.expiry",
    "exsim.exchange.fillable", "exsim.exchange.order_index", "exsim.exchange.prefetch",
    "exsim.exchange.removal", "exsim.exchange.rows", "exsim.exchange.schema",
    "exsim.exchange.validation", "exsim.exchange.matching", "exsim.exchange.stops",
    "exsim.exchange.room"))

_CONTINUOUS = int(Phase.CONTINUOUS)
_CLOSED = int(Phase.CLOSED)
_PRE_OPEN = int(Phase.PRE_OPEN)
_OPENING = int(Phase.OPENING_AUCTION)
_PRE_CLOSE = int(Phase.PRE_CLOSE)
_CLOSING = int(Phase.CLOSING_AUCTION)
_REOPENING = int(Phase.REOPENING_AUCTION)
_INT64_MAX = (1 << 63) - 1


# cold path: compiled once, not inlined into every matching copy
@njit(cache=True, _nrt=False)
def _phase_message(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                   meta, symbols, ticks, expiry, fills, l2, events, cnt):
    """Apply a PHASE message (semantics.md, PHASE messages): validation, the reference price,
    the uncross when the target ends an auction, the PHASE event and the call it enters.
    Returns whether the message was valid and left the symbol CONTINUOUS (the caller then
    checks the stops, whether or not an uncross traded). The indicative of a call entered is
    published by the caller, after this."""
    sym = m.symbol
    reason = check_phase(m, books, symbols, ticks)
    if reason != Reason.NONE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED, reason, 0, 0,
                    0)
        return False
    srow = symbols[sym]
    target = np.int64(m.phase)
    if m.price > 0:
        srow.reference_price = m.price
    auction = np.int64(0)
    if target == _OPENING or target == _CLOSING:
        auction = target
    elif target == _CONTINUOUS or target == _CLOSED:
        auction = srow.auction
    if auction != 0:
        uncross(seq, m.ts, np.int64(sym), auction, arena, arena_ext, levels, index, books,
                ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        srow.auction = 0
    new = target
    if target == _OPENING:
        new = _CONTINUOUS
    elif target == _CLOSING:
        new = _CLOSED
    srow.phase = new
    # a halt or any other phase suspends a re-opening auction's end; only its own target sets one
    had_end = srow.auction_end != 0
    srow.auction_end = 0
    if _is_call(new):
        srow.auction = (_OPENING if new == _PRE_OPEN else _CLOSING if new == _PRE_CLOSE
                        else _REOPENING)
        srow.ind_price = 0
        srow.ind_qty = 0
        srow.ind_surplus = 0
        if new == _REOPENING:
            srow.auction_end = m.expire_ts
    if had_end or srow.auction_end != 0:
        _refresh_next_end(meta, symbols)
    write_event(events, cnt, seq, m.ts, symbols, sym, 0, Event.PHASE, Reason.NONE, 0, 0,
                srow.reference_price)
    return new == _CONTINUOUS


@njit(cache=True, _nrt=False, inline="always")
def _auction_ends(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, stops, expiry, fills, l2, events, cnt):
    """``_auction_ends_upto`` with no limit: every due auction (what ``process_batch`` runs)."""
    return _auction_ends_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                              ladder_levels, meta, symbols, stops, expiry, fills, l2, events,
                              cnt, _INT64_MAX)


@njit(cache=True, _nrt=False)
def _auction_ends_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                       ladder_levels, meta, symbols, stops, expiry, fills, l2, events, cnt,
                       limit):
    """Uncross every re-opening auction whose end is at or before ``ts``, in (end, symbol)
    order, at most ``limit`` of them: the uncross, the symbol enters CONTINUOUS (PHASE event,
    reason AUCTION_END), then its stops are checked (band around the uncross price). Rows
    carry ``seq``.

    Resumable like ``_expire_upto``: before each uncross it checks room for it and the stop
    cascade after it and returns what must grow, the state consistent and every earlier
    auction done. Returns OK when none is due or ``limit`` are done.
    """
    done = 0
    while done < limit and meta[M_NEXT_END] != 0 and meta[M_NEXT_END] <= ts:
        done += 1
        sym = np.int64(-1)
        for s in range(meta[M_NSYM]):
            e = symbols[s].auction_end
            if e > 0 and e <= ts and (sym < 0 or e < symbols[sym].auction_end):
                sym = s
        if sym < 0:     # an end cleared without a refresh cannot happen; stay safe
            _refresh_next_end(meta, symbols)
            return OK
        status = _uncross_room(sym, np.bool_(True), levels, books, ladder_levels, meta, stops,
                               fills, l2, events, cnt)
        if status != OK:
            return status
        srow = symbols[sym]
        uncross(seq, ts, sym, srow.auction, arena, arena_ext, levels, index, books, ladder_keys,
                ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        srow.auction = 0
        srow.auction_end = 0
        srow.phase = _CONTINUOUS
        _refresh_next_end(meta, symbols)
        write_event(events, cnt, seq, ts, symbols, sym, 0, Event.PHASE, Reason.AUCTION_END, 0, 0,
                    srow.reference_price)
        # checked whether or not the uncross traded (see ``_process_one``)
        if stops[sym * 2].live + stops[sym * 2 + 1].live > 0:
            lo, hi = _dynamic_band(srow)
            meta[M_BAND_LO] = lo
            meta[M_BAND_HI] = hi
            _release_stops(seq, ts, sym, arena, arena_ext, levels, index, books,
                           ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                           events, cnt)
    return OK
