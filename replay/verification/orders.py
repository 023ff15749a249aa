"""The verifier's checks of the orders a venue takes beyond plain limits: stops, icebergs, expiry.

Helpers of ``replay.verification.kernel``'s message loop, written from docs/semantics.md ("Stops",
"Icebergs", "Time in force by the clock", "Ownership", "Symbols"), sharing no code with the
engine. Like the rest of the verifier they follow what the stored rows say happened and check it
against the verifier's own book (``replay.verification.book``):

- stops: a pending stop rests in the stop book (book sides 2 and 3, keyed so the next to release
  is at the end: BUY stops by rising stop price, SELL stops by falling, FIFO within a price);
  each TRIGGERED report must name the stop the documented release order picks for the symbol's
  last trade price (the price of the latest fill: releases are checked after each order that
  traded), and after a message that traded no pending stop may be triggered.
- icebergs: a resting order's ``O_LEAVES`` is its displayed part; when it is filled with reserve
  left, the verifier shows the next slice at the back of the level, so a later fill of the slice
  ahead of the orders that were there is caught (``icebergs``, not ``fifo``), as is a fill or an
  L2 row showing more than the display sizes allow.
- expiry: every order keeps its expiry (GTD: ``expire_ts``; DAY: the symbol's next session close
  after its entry ts); a fill, cancel or modify at or after it, an EXPIRED cancel before it or
  after a message it should have left at, and expiries out of (expiry, order id) order are
  violations of ``expiry``.
- L2 phases: a message with expiries or stop releases has several phases (each expiry, the
  message's own order, each released stop); every phase's L2 rows are checked against the book
  as that phase left it (``_l2_phase``), so a level changed twice in one message is checked twice.

Invariants: a pending stop has ``O_SIDE`` 2 (BUY) or 3 (SELL), ``O_PRICE`` its stop price and
``O_LEVEL`` its stop level; on release its side and price become those of the order it enters as.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.replay.verification.book import (
    C_CLOSE, C_GRID, C_LOT, C_MINQ, C_NTICK, C_TICKS, E_LIMIT, E_REFILLS, E_RESERVE, E_STOP,
    L_COUNT, L_HEAD, L_PRICE, L_QTY, M_EXP_E, M_EXP_ID, M_EXP_SEQ, M_FINISHED, M_FREE_O,
    M_LAST_PX, M_LIVE_O, M_NT, M_PENDING, M_PREV_TS, M_TRADED, M_TS_BACK, O_CANCELLED, O_DISPLAY, O_EXPIRE,
    O_FILLED, O_FILLSUM, O_LEAVES, O_LEVEL, O_MARKET, O_NEXT, O_PRICE, O_SIDE, O_TOTAL, T_COUNT,
    T_PRICE, T_QTY, T_ROW, T_SIDE, _append, _best_level, _detach, _find_level, _hash_del,
    _slot_of, _touch,
)
from exsim.replay.verification.rules import (
    D_CONSERVE, D_EXPIRED_EARLY, D_EXPIRED_LATE, D_EXPIRED_NOT_LIVE, D_EXPIRY_ORDER, D_ICE_L2,
    D_L2_COUNT, D_L2_MISSING, D_L2_QTY, D_NOT_TRIGGERED, D_OFF_GRID, D_RELEASE_ORDER,
    D_REPORT_QTY, D_TRIGGER_NOT_PENDING, D_TRIGGER_UNREACHED, DAY_NS, R_CONSERVE, R_EVENTS,
    R_EXPIRY, R_ICE, R_L2, R_STOPS, R_TICK, _DAY, _GTD, _viol,
)

guard(__name__, __file__, deps=("exsim.replay.verification.book",
                                "exsim.replay.verification.rules", "exsim.exchange.schema"))


# ------------------------------------------------------------------ quantities and the clock
@njit(cache=True, _nrt=False, inline="always")
def _open(ost, ext, s):
    """An order's whole open quantity: what it shows plus an iceberg's reserve."""
    if ost[s, O_DISPLAY] > 0:
        return ost[s, O_LEAVES] + ext[s, E_RESERVE]
    return ost[s, O_LEAVES]


_I64_MAX = (1 << 63) - 1


@njit(cache=True, _nrt=False, inline="always")
def _expiry_of(tif, ts, expire_ts, close):
    """When an order entered at ``ts`` expires: GTD its expire_ts, DAY the first instant after
    ``ts`` at the session close (mod one day); 0 for never."""
    if tif == _GTD:
        return np.int64(expire_ts)
    if tif == _DAY:
        # from the remainders, so nothing leaves int64; a close past the int64 clock is its
        # largest value (docs/semantics.md, Symbols)
        ahead = DAY_NS - (ts % DAY_NS - close) % DAY_NS   # in (0, DAY_NS]
        if ts > _I64_MAX - ahead:
            return np.int64(_I64_MAX)
        return ts + ahead
    return np.int64(0)


@njit(cache=True, _nrt=False, inline="always")
def _finish(ost, htab, meta, vrows, vids, counts, seq, s, key):
    """Order ``key`` (in row ``s``) left the book for good: check its quantities, free its row.

    The caller has already zeroed its open quantity (reserve included). Why the caller passes
    the id: it just looked the order up by it, and ``oid[s]`` of a resting order would be one
    more cache miss (the look-ahead no longer fetches it)."""
    if ost[s, O_FILLSUM] + ost[s, O_CANCELLED] + ost[s, O_LEAVES] != ost[s, O_TOTAL]:
        _viol(vrows, vids, counts, meta, R_CONSERVE, D_CONSERVE, seq, key, ost[s, O_FILLSUM],
              ost[s, O_CANCELLED], ost[s, O_LEAVES], ost[s, O_TOTAL])
    _hash_del(htab, key)
    ost[s, O_NEXT] = meta[M_FREE_O]
    ost[s, O_LEVEL] = -1
    meta[M_FREE_O] = s
    meta[M_FINISHED] += 1
    meta[M_LIVE_O] -= 1


@njit(cache=True, _nrt=False, inline="always")
def _remove(ost, ext, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts, seq, s, key):
    """A live order (resting or a pending stop) leaves by a cancel: its open quantity counts as
    cancelled; a resting order's level is remembered for the L2 check."""
    if ost[s, O_SIDE] >= 2:
        meta[M_PENDING] -= 1
    else:
        _touch(touched, lst, ladder, ladlv, meta, ost[s, O_SIDE], ost[s, O_PRICE])
    _detach(ost, lst, ladder, ladlv, meta, s)
    ost[s, O_CANCELLED] += _open(ost, ext, s)
    ost[s, O_LEAVES] = 0
    # why only an iceberg's: E_RESERVE is read only when O_DISPLAY > 0 (see _new_order), and a
    # plain order's ``ext`` row would be one more cache miss per cancel in a deep book
    if ost[s, O_DISPLAY] > 0:
        ext[s, E_RESERVE] = 0
    _finish(ost, htab, meta, vrows, vids, counts, seq, s, key)


# ------------------------------------------------------------------ tick table and lot
@njit(cache=True, _nrt=False, inline="always")
def _on_grid(cfg, p):
    """Whether price ``p`` is on the symbol's tick table (docs/semantics.md "Symbols")."""
    if p < 1:
        return False
    if cfg[C_GRID] == 0:
        return True
    tick = cfg[C_TICKS + 1]
    for j in range(1, cfg[C_NTICK]):
        if cfg[C_TICKS + 2 * j] > p:
            break
        tick = cfg[C_TICKS + 2 * j + 1]
    return p % tick == 0


@njit(cache=True, _nrt=False, inline="always")
def _off_lot(cfg, q):
    """Whether quantity ``q`` is off the symbol's lot size (never for a lot of 1)."""
    return cfg[C_LOT] > 1 and q % cfg[C_LOT] != 0


@njit(cache=True, _nrt=False)
def _check_grid(cfg, seq, key, otype_limit, otype_stop, price, stop, qty, display, min_qty,
                meta, vrows, vids, counts):
    """``tick_lot``: an accepted NEW or MODIFY has its prices on the tick table and its
    quantities on lot (``otype_limit``: the price counts; ``otype_stop``: the stop price counts;
    ``qty`` also at least the minimum order quantity)."""
    bad = (otype_limit and not _on_grid(cfg, price)) or (otype_stop and not _on_grid(cfg, stop))
    bad = bad or _off_lot(cfg, qty) or _off_lot(cfg, display) or _off_lot(cfg, min_qty)
    if bad or qty < cfg[C_MINQ]:
        _viol(vrows, vids, counts, meta, R_TICK, D_OFF_GRID, seq, key, price if otype_limit
              else 0, stop if otype_stop else 0, qty, cfg[C_LOT])


# ------------------------------------------------------------------ icebergs
@njit(cache=True, _nrt=False, inline="always")
def _split(ost, ext, s):
    """An order about to rest shows ``min(display_qty, open)``; an iceberg keeps the rest in
    reserve (a plain order shows everything)."""
    d = ost[s, O_DISPLAY]
    if d > 0:
        q = ost[s, O_LEAVES]
        show = d if d < q else q
        ext[s, E_RESERVE] = q - show
        ost[s, O_LEAVES] = show


@njit(cache=True, _nrt=False, inline="always")
def _iceberg_filled(ost, ext, lst, ladder, ladlv, meta, s, q, open_after):
    """Resting iceberg ``s`` was filled ``q`` (its report says ``open_after`` is left): take it
    off the shown part; a shown part used up with reserve left is refilled at once with a new
    slice at the back of its level (CME Globex). Returns False when no level slot is free."""
    shown = ost[s, O_LEAVES] - q
    if shown < 0:
        shown = np.int64(0)
    if shown > open_after:
        shown = open_after
    reserve = open_after - shown
    if shown == 0 and reserve > 0:
        d = ost[s, O_DISPLAY]
        show = d if d < reserve else reserve
        _detach(ost, lst, ladder, ladlv, meta, s)
        ost[s, O_LEAVES] = show
        ext[s, E_RESERVE] = reserve - show
        ext[s, E_REFILLS] += 1
        return _append(ost, lst, ladder, ladlv, meta, s)
    lv = ost[s, O_LEVEL]
    lst[lv, L_QTY] += shown - ost[s, O_LEAVES]
    ost[s, O_LEAVES] = shown
    ext[s, E_RESERVE] = reserve
    return True


@njit(cache=True, _nrt=False, inline="always")
def _iceberg_reduce(ost, ext, lst, s, q):
    """A same-price MODIFY down to open quantity ``q``: the reserve shrinks first, then the
    shown part; the order keeps its place."""
    cut = _open(ost, ext, s) - q
    res = ext[s, E_RESERVE]
    take = cut if cut < res else res
    ext[s, E_RESERVE] = res - take
    shown = ost[s, O_LEAVES] - (cut - take)
    lst[ost[s, O_LEVEL], L_QTY] += shown - ost[s, O_LEAVES]
    ost[s, O_LEAVES] = shown


@njit(cache=True, _nrt=False)
def _level_reserve(ost, ext, lst, lv):
    """The reserve of the icebergs queued at level ``lv`` (a walk of its queue: only on the
    violation path, to tell an L2 row showing reserve from one that is simply wrong)."""
    total = np.int64(0)
    s = lst[lv, L_HEAD]
    while s >= 0:
        if ost[s, O_DISPLAY] > 0:
            total += ext[s, E_RESERVE]
        s = ost[s, O_NEXT]
    return total


# ------------------------------------------------------------------ stops
@njit(cache=True, _nrt=False, inline="always")
def _stop_reached(meta, side, stop):
    """Whether the symbol's last trade price has reached a ``side`` stop at ``stop``."""
    if meta[M_TRADED] == 0:
        return False
    last = meta[M_LAST_PX]
    return last >= stop if side == 0 else last <= stop


@njit(cache=True, _nrt=False, inline="always")
def _next_release(lst, ladlv, meta):
    """The pending stop the documented release order takes next (its row), or -1 if none is
    triggered: the lowest BUY stop at or below the last price, else the highest SELL stop at or
    above it, FIFO among equal stop prices."""
    lb = _best_level(ladlv, meta, 2)
    if lb >= 0 and _stop_reached(meta, 0, lst[lb, L_PRICE]):
        return lst[lb, L_HEAD]
    ls = _best_level(ladlv, meta, 3)
    if ls >= 0 and _stop_reached(meta, 1, lst[ls, L_PRICE]):
        return lst[ls, L_HEAD]
    return np.int64(-1)


@njit(cache=True, _nrt=False)
def _release(ev, seq, checked, ost, ext, lst, oid, htab, ladder, ladlv, meta, vrows, vids,
             counts):
    """A stop is released (``ev`` its TRIGGERED report, or the first report of a stop filled
    without one: ``checked`` False, the caller has flagged it). Checks it was the stop to
    release, takes it out of the stop book and makes it the order it enters as (a MARKET or a
    LIMIT at its limit price). Returns its row, or -1 when ``ev`` names no pending stop."""
    s = _slot_of(htab, ev.order_id)
    if s < 0 or ost[s, O_LEVEL] < 0 or ost[s, O_SIDE] < 2:
        _viol(vrows, vids, counts, meta, R_STOPS, D_TRIGGER_NOT_PENDING, seq, ev.order_id, 0, 0,
              0, 0)
        return np.int64(-1)
    side = ost[s, O_SIDE] - 2
    if checked:
        stop = ext[s, E_STOP]
        if not _stop_reached(meta, side, stop):
            _viol(vrows, vids, counts, meta, R_STOPS, D_TRIGGER_UNREACHED, seq, ev.order_id,
                  stop, meta[M_LAST_PX], side, meta[M_TRADED])
        else:
            nx = _next_release(lst, ladlv, meta)
            if nx != s:
                _viol(vrows, vids, counts, meta, R_STOPS, D_RELEASE_ORDER, seq, ev.order_id,
                      np.int64(oid[nx]) if nx >= 0 else 0, 0, 0, 0)
        if np.int64(ev.filled_qty) != ost[s, O_FILLED] or np.int64(ev.leaves_qty) != \
                ost[s, O_LEAVES]:
            _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, ev.order_id,
                  np.int64(ev.filled_qty), np.int64(ev.leaves_qty), ost[s, O_FILLED],
                  ost[s, O_LEAVES])
    _detach(ost, lst, ladder, ladlv, meta, s)
    meta[M_PENDING] -= 1
    ost[s, O_SIDE] = side
    ost[s, O_PRICE] = 0 if ost[s, O_MARKET] == 1 else ext[s, E_LIMIT]
    return s


@njit(cache=True, _nrt=False)
def _stops_settled(seq, ost, oid, lst, ladlv, meta, vrows, vids, counts):
    """``stops``: after a message that traded no pending stop is still triggered."""
    s = _next_release(lst, ladlv, meta)
    if s >= 0:
        side = ost[s, O_SIDE] - 2
        _viol(vrows, vids, counts, meta, R_STOPS, D_NOT_TRIGGERED, seq, oid[s], ost[s, O_PRICE],
              meta[M_LAST_PX], side, 0)


# ------------------------------------------------------------------ expiry
@njit(cache=True, _nrt=False)
def _expire(ev, seq, ts, ost, ext, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts):
    """A CANCELLED/EXPIRED report ``ev`` before the message ``seq`` (at ``ts``): the order was
    live and its expiry is at or before ``ts``, after the ts of every earlier message of the
    symbol (unless the symbol's ts ever stepped back: an order entered after a later-stamped
    message was not live at it), and not before the expiry reported just before it at this
    seq."""
    key = ev.order_id
    s = _slot_of(htab, key)
    if s < 0 or ost[s, O_LEVEL] < 0:
        _viol(vrows, vids, counts, meta, R_EXPIRY, D_EXPIRED_NOT_LIVE, seq, key, 0, 0, 0, 0)
        return
    e = ost[s, O_EXPIRE]
    if e == 0 or e > ts:
        _viol(vrows, vids, counts, meta, R_EXPIRY, D_EXPIRED_EARLY, seq, key, e, ts, 0, 0)
    elif e <= meta[M_PREV_TS] and meta[M_TS_BACK] == 0:
        _viol(vrows, vids, counts, meta, R_EXPIRY, D_EXPIRED_LATE, seq, key, e, meta[M_PREV_TS],
              0, 0)
    if meta[M_EXP_SEQ] == seq and (e < meta[M_EXP_E] or (
            e == meta[M_EXP_E] and key < np.uint64(meta[M_EXP_ID]))):
        # the previous id as the signed field a: the formatter shows it unsigned ({ua})
        _viol(vrows, vids, counts, meta, R_EXPIRY, D_EXPIRY_ORDER, seq, key, meta[M_EXP_ID], e,
              meta[M_EXP_E], 0)
    meta[M_EXP_SEQ], meta[M_EXP_E], meta[M_EXP_ID] = seq, e, np.int64(key)
    if ev.leaves_qty != 0 or np.int64(ev.filled_qty) != ost[s, O_FILLED]:
        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, key,
              np.int64(ev.filled_qty), np.int64(ev.leaves_qty), ost[s, O_FILLED], 0)
    _remove(ost, ext, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts, seq, s, key)


# ------------------------------------------------------------------ L2 rows
@njit(cache=True, _nrt=False, inline="always")
def _l2_row(seq, row, ost, ext, lst, ladder, ladlv, meta, vrows, vids, counts):
    """Check one L2 row against its level as the book stands: ``l2_totals``, or ``icebergs``
    when the row shows more than the level's shown quantity but no more than shown plus the
    icebergs' reserve (a level showing hidden quantity)."""
    z = np.uint64(0)
    side = np.int64(row.side)
    price = np.int64(row.price)
    lv = _find_level(ladder, ladlv, meta, side, price)
    q = lst[lv, L_QTY] if lv >= 0 else 0
    c = lst[lv, L_COUNT] if lv >= 0 else 0
    if row.qty != q:
        res = _level_reserve(ost, ext, lst, lv) if lv >= 0 and row.qty > q else 0
        if res > 0 and row.qty <= q + res:
            _viol(vrows, vids, counts, meta, R_ICE, D_ICE_L2, seq, z, side, price,
                  np.int64(row.qty), q)
        else:
            _viol(vrows, vids, counts, meta, R_L2, D_L2_QTY, seq, z, side, price,
                  np.int64(row.qty), q)
    if row.count != c:
        _viol(vrows, vids, counts, meta, R_L2, D_L2_COUNT, seq, z, side, price,
              np.int64(row.count), c)


@njit(cache=True, _nrt=False, inline="always")
def _l2_missing(seq, lst, ladder, ladlv, touched, meta, vrows, vids, counts):
    """Every level the phase changed (totals differ from before it) has had a row."""
    z = np.uint64(0)
    for t in range(meta[M_NT]):
        if touched[t, T_ROW] == 0:
            side, price = touched[t, T_SIDE], touched[t, T_PRICE]
            lv = _find_level(ladder, ladlv, meta, side, price)
            q = lst[lv, L_QTY] if lv >= 0 else 0
            c = lst[lv, L_COUNT] if lv >= 0 else 0
            if q != touched[t, T_QTY] or c != touched[t, T_COUNT]:
                _viol(vrows, vids, counts, meta, R_L2, D_L2_MISSING, seq, z, side, price, q, 0)


@njit(cache=True, _nrt=False)
def _l2_phase(seq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta, vrows, vids,
              counts):
    """End of a phase that more phases of the same message follow (an expiry, or an order
    followed by stop releases): its rows are the next rows, one per level it touched, each
    checked against the book as the phase left it. Returns the next L2 row; clears ``touched``."""
    nt = meta[M_NT]
    while lp < l_hi:
        row = l2[lp]
        hit = -1
        for t in range(nt):
            if touched[t, T_ROW] == 0 and touched[t, T_SIDE] == row.side \
                    and touched[t, T_PRICE] == row.price:
                hit = t
                break
        if hit < 0:
            break
        _l2_row(seq, row, ost, ext, lst, ladder, ladlv, meta, vrows, vids, counts)
        touched[hit, T_ROW] = 1
        lp += 1
    _l2_missing(seq, lst, ladder, ladlv, touched, meta, vrows, vids, counts)
    meta[M_NT] = 0
    return lp


__all__ = ["_open", "_expiry_of", "_finish", "_remove", "_on_grid", "_check_grid", "_split",
           "_iceberg_filled", "_iceberg_reduce", "_stop_reached", "_next_release", "_release",
           "_stops_settled", "_expire", "_l2_row", "_l2_missing", "_l2_phase", "M_PREV_TS",
           "C_CLOSE"]
