"""The verification kernel: an independent order book that checks every reported outcome.

This module deliberately imports nothing from ``exchange`` but the schema codes (and the cache
guard, which only deletes stale cache files): it is a second implementation of the book, written
from docs/semantics.md, and it does not decide outcomes. It follows what the stored rows say
happened (fills, execution reports, L2 updates) and checks each against its own book, message by
message, for one symbol at a time:

- book: ``replay.verification.book`` (slot arena, id hash, FIFO levels, sorted ladders).
- one order's walk through the book (its fills and the reports they cause):
  ``replay.verification.walk``.
- look-ahead: before each message the kernel prefetches the id buckets, order rows and queue
  neighbours that the messages and fills a few rows ahead will touch (``_look_ahead``; a hint
  only, results never depend on it). A deep book's misses otherwise dominate (measured 1.6x).
- calls: every helper on the per-message path is ``inline="always"``; only ``_viol`` (the rare
  violation path, 60 call sites) and the helpers of messages plain flows never have (tick/lot
  checks of symbols with a table or lot, expiries, stop releases, the L2 check between phases)
  stay calls. A call passing a dozen arrays pushes ~100 words:
  push instructions were 14% of the kernel's samples. Inlined, the 10 M-message bench run
  verifies in 4.5-5.1 s instead of 6.1-6.2 s (kernel CPU 1.2-1.4x less, fourth session, two
  runs each), for ~21 s more of a cold first compile (48 -> 69 s for a fresh process's first
  verify; the third session had measured only ~7% for doubling the compile and kept the calls).
  ``_touch`` (every cancel and every order that rests remembers its level's totals) is inlined
  too: kernel CPU 1.16x on the 2M-message run for ~26 s more cold-compile CPU (97 -> 124 s).
  ``_walk`` stays a call (see there), not made when there is no report to follow (``_follow``).
- orders beyond plain limits (stops, icebergs, expiry, ownership, tick tables and lots) are
  checked by the helpers of ``replay.verification.orders``; a message is then a sequence of phases
  (expiries before it, its own order, each stop it releases) walked in the order of its reports.
- state follows the deals: a fill moves quantity between the two orders it names; when an
  execution report disagrees, the violation is recorded and the order is re-synchronised to the
  report, so one defect yields violations at its own seq and not a cascade over later messages.
  ``fillsum`` (quantity summed from fills alone) is never re-synchronised: conservation checks it.

Rule codes (``RULES`` names them, in this order) and detail codes (``DETAILS``) are plain ints
kept in ``replay.verification.rules``; ``replay.verification.symbol`` formats them. Violation
rows are (seq, rule, detail, a, b, c, d) + order id.

Caching: numba's cache keys a kernel on this file only, yet the kernels inline the field numbers
and helpers of ``replay.verification.book``, ``.rules``, ``.orders`` and ``.walk`` and freeze
``exchange.schema`` codes; ``exchange._cache_guard.guard`` (called below) deletes this
module's cached kernels whenever one of those files changes.

Limits: capacities are fixed per call; before a message that might not fit, the kernel returns
``NEED_CAPACITY`` and the caller grows the arrays (``grow_state``) and resumes at that message.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard

from exsim.replay.verification.book import (
    C_CLOSE, C_OWNER, C_PLAIN, E_LIMIT, E_REFILLS, E_RESERVE, E_STOP, L_HEAD, L_TAIL,
    MAX_TICK_ROWS, M_EP, M_FP, M_FREE_O, M_I, M_LAST_PX, M_LAST_SEQ, M_LIVE_L, M_LIVE_O, M_LP,
    M_NA, M_NB, M_NT, M_ORDERS, M_PENDING, M_PREV_TS, M_TS_BACK, M_VN, O_CANCELLED, O_DISPLAY, O_EXPIRE,
    O_FILLED, O_FILLSUM, O_FLAGS, O_LEAVES, O_LEVEL, O_MARKET, O_NEXT, O_PRICE, O_SIDE, O_TIF,
    O_TOTAL, O_TRADER, T_PRICE, T_ROW, T_SIDE, grow_state, new_state as _new_state, prefetch,
    set_config, _append, _detach, _find_level, _hash_put, _prefetch_id, _prefetch_order,
    _set_leaves, _slot_of, _touch,
)
from exsim.replay.verification.rules import *          # noqa: F403 (rule, detail and schema codes)
from exsim.replay.verification.rules import _viol      # noqa: F401
from exsim.replay.verification.rules import (
    _ACCEPTED, _BAD_KIND, _CANCEL, _CANCELLED, _DUPLICATE_ID, _EXPIRED, _LIMIT, _MARKET,
    _MODIFIED, _MODIFY, _NEW, _NOT_OWNER, _REJECTED, _STOP, _STOP_LIMIT, _TRIGGERED,
    _UNKNOWN_ID, _UNKNOWN_SYMBOL,
)
from exsim.replay.verification.orders import (
    _check_grid, _expire, _expiry_of, _iceberg_reduce, _l2_missing, _l2_phase, _l2_row, _open,
    _release, _remove, _split, _stop_reached, _stops_settled,
)
from exsim.replay.verification.walk import _end_incoming, _follow

guard(__name__, __file__, deps=("exsim.replay.verification.book",
                                "exsim.replay.verification.rules",
                                "exsim.replay.verification.orders",
                                "exsim.replay.verification.walk", "exsim.exchange.schema"))

__all__ = ["RULES", "DETAILS", "check_symbol", "check_live", "new_state", "grow_state",
           "set_config", "MAX_TICK_ROWS", "OK", "NEED_CAPACITY", "M_VN", "M_I", "M_FP", "M_LP", "M_EP", "MORE",
           "FLUSH", "FINAL"]

OK, NEED_CAPACITY = 0, 1
MORE, FLUSH, FINAL = 0, 1, 2     # check_symbol's ``final``: see there


def new_state(capacity: int, violations: int, level_capacity: int = 256) -> tuple:
    """Fresh checker state (``replay.verification.book.new_state``) with one counter per rule."""
    return _new_state(capacity, violations, len(RULES), level_capacity)


@njit(cache=True, _nrt=False, inline="always")
def _extra(seq, events, k, e_hi, fills, fp, f_hi, meta, vrows, vids, counts):
    """Reports and fills a message should not have (after a cancel or a same-price modify)."""
    z = np.uint64(0)
    for j in range(k, e_hi):
        _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, events[j].order_id,
              np.int64(events[j].event), 0, 0, 0)
    for j in range(fp, f_hi):
        _viol(vrows, vids, counts, meta, R_EVENTS, D_FILL_NO_REPORT, seq, z,
              np.int64(fills[j].trade_id), 0, 0, 0)


# ------------------------------------------------------------------ the message loop
# look-ahead distances (messages; fills use the same in fill rows): id bucket, order row, neighbours
PF_ID, PF_ROW, PF_NEXT = 16, 8, 3


@njit(cache=True, _nrt=False, inline="always")
def _resting_id(fills, k):
    return fills[k].sell_order_id if fills[k].aggressor_side == 0 else fills[k].buy_order_id


@njit(cache=True, _nrt=False, inline="always")
def _look_ahead(orders, i, i_end, fills, fp, nf, f_id, f_row, f_next, ost, lst, oid, htab, ladder,
                ladlv, meta):
    """Prefetch what the messages (and fills) a few rows ahead will touch (no effect on results).

    ``f_id``, ``f_row``, ``f_next``: the next fill row each stage has yet to take; returned
    advanced. Why each stage keeps its own row rather than taking ``fp`` plus its distance:
    ``fp`` moves only when a message trades (one in ten in a plain run), so that would redo the
    same fill's lookups every message until then (measured: a tenth of the kernel's samples),
    and skip rows when one message has several fills."""
    if i + PF_ID < i_end:
        _prefetch_id(htab, orders[i + PF_ID].order_id)
    if i + PF_ROW < i_end:
        _prefetch_order(ost, oid, htab, orders[i + PF_ROW].order_id, False)
    if i + PF_NEXT < i_end:
        m = orders[i + PF_NEXT]
        if m.kind == _NEW and m.side <= 1:   # the row it may queue behind: its level's tail
            lv = _find_level(ladder, ladlv, meta, np.int64(m.side), np.int64(m.price))
            if lv >= 0 and lst[lv, L_TAIL] >= 0:
                prefetch(ost, lst[lv, L_TAIL], O_NEXT)
        else:
            _prefetch_order(ost, oid, htab, m.order_id, True)
    end = min(fp + PF_ID + 1, nf)
    while f_id < end:
        _prefetch_id(htab, _resting_id(fills, f_id))
        f_id += 1
    end = min(fp + PF_ROW + 1, nf)
    while f_row < end:
        _prefetch_order(ost, oid, htab, _resting_id(fills, f_row), False)
        f_row += 1
    end = min(fp + PF_NEXT + 1, nf)
    while f_next < end:
        _prefetch_order(ost, oid, htab, _resting_id(fills, f_next), True)
        f_next += 1
    return f_id, f_row, f_next

@njit(cache=True, _nrt=False, inline="always")
def _check_l2(seq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta, vrows, vids,
              counts):
    """The last phase of a message: its remaining L2 rows against the book it left, and every
    level it changed has a row."""
    z = np.uint64(0)
    nt = meta[M_NT]
    for k in range(lp, l_hi):
        row = l2[k]
        side = np.int64(row.side)
        price = np.int64(row.price)
        if side > 1:
            _viol(vrows, vids, counts, meta, R_STREAM, D_L2_SIDE, seq, z, side, 0, 0, 0)
            continue
        _l2_row(seq, row, ost, ext, lst, ladder, ladlv, meta, vrows, vids, counts)
        for t in range(nt):
            if touched[t, T_SIDE] == side and touched[t, T_PRICE] == price:
                touched[t, T_ROW] = 1
    _l2_missing(seq, lst, ladder, ladlv, touched, meta, vrows, vids, counts)


@njit(cache=True, _nrt=False, inline="always")
def _foreign(limit, fills, fp, nf, l2, lp, nl, events, ep, ne, ost, ext, lst, htab, ladder,
             ladlv, touched, meta, vrows, vids, counts):
    """Rows of seqs before ``limit`` that no message of this symbol has: expiries of its orders
    before another symbol's message (their CANCELLED/EXPIRED reports and L2 rows) are checked;
    any other row is a ``stream`` violation. Returns the next (fill, L2, event) indices."""
    z = np.uint64(0)
    while ep < ne and events[ep].seq < limit:
        sq, ts = np.int64(events[ep].seq), np.int64(events[ep].ts)
        while fp < nf and fills[fp].seq <= sq:
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(fills[fp].seq), z,
                  0, 0, 0, 0)
            fp += 1
        while lp < nl and l2[lp].seq < sq:
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(l2[lp].seq), z, 1,
                  0, 0, 0)
            lp += 1
        l_hi = lp
        while l_hi < nl and l2[l_hi].seq == sq:
            l_hi += 1
        meta[M_NT] = 0
        while ep < ne and events[ep].seq == sq:
            ev = events[ep]
            if ev.event == _CANCELLED and ev.reason == _EXPIRED:
                _expire(ev, sq, ts, ost, ext, lst, htab, ladder, ladlv, touched, meta, vrows,
                        vids, counts)
                lp = _l2_phase(sq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta,
                               vrows, vids, counts)
            else:
                _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, sq, z, 2, 0, 0, 0)
            ep += 1
        _check_l2(sq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta, vrows, vids,
                  counts)
        meta[M_NT] = 0
        lp = l_hi
        if ts > meta[M_PREV_TS]:
            meta[M_PREV_TS] = ts
    while fp < nf and fills[fp].seq < limit:
        _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(fills[fp].seq), z,
              0, 0, 0, 0)
        fp += 1
    while lp < nl and l2[lp].seq < limit:
        _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(l2[lp].seq), z, 1,
              0, 0, 0)
        lp += 1
    return fp, lp, ep


@njit(cache=True, _nrt=False, inline="always")
def _new_order(m, x, ts, ost, ext, cfg):
    """Fill order row ``x`` from accepted NEW ``m`` (a stop keeps its side + 2 and its trigger
    as price until released; see ``replay.verification.orders``)."""
    ot = np.int64(m.order_type)
    qty = np.int64(m.qty)
    ost[x, O_SIDE] = np.int64(m.side)
    ost[x, O_MARKET] = 1 if ot == _MARKET or ot == _STOP else 0
    ost[x, O_PRICE] = 0 if ost[x, O_MARKET] == 1 else np.int64(m.price)
    ost[x, O_LEAVES] = qty
    ost[x, O_FILLED] = 0
    ost[x, O_FILLSUM] = 0
    ost[x, O_TOTAL] = qty
    ost[x, O_CANCELLED] = 0
    ost[x, O_TRADER] = np.int64(m.trader)
    ost[x, O_FLAGS] = np.int64(m.flags)
    ost[x, O_TIF] = np.int64(m.tif)
    ost[x, O_LEVEL] = -1
    ost[x, O_DISPLAY] = np.int64(m.display_qty) if ot == _LIMIT else 0
    ost[x, O_EXPIRE] = _expiry_of(np.int64(m.tif), ts, np.int64(m.expire_ts), cfg[C_CLOSE])
    # why only for icebergs and stops: ``ext`` is read only for them (see verification.book), and
    # a row written for every order is one more cache miss per order in a deep book
    if ost[x, O_DISPLAY] > 0:
        ext[x, E_RESERVE] = 0
        ext[x, E_REFILLS] = 0
    if ot == _STOP or ot == _STOP_LIMIT:
        ext[x, E_STOP] = np.int64(m.stop_price)
        ext[x, E_LIMIT] = np.int64(m.price) if ot == _STOP_LIMIT else 0
        ost[x, O_SIDE] = 2 + np.int64(m.side)
        ost[x, O_PRICE] = np.int64(m.stop_price)
        return True
    return False


@njit(cache=True, _nrt=False, inline="always")
def _rows_at(seq, ts, fills, fp, l2, lp, events, ep, meta, vrows, vids, counts):
    """The ends of message ``seq``'s fill, L2 and event rows from ``fp``, ``lp``, ``ep``; each
    row carries the message's ``ts`` (``row_fields``). Returns (f_hi, l_hi, e_hi). (Shared
    with ``replay.verification.plain``.)"""
    z = np.uint64(0)
    f_hi, l_hi, e_hi = fp, lp, ep
    while f_hi < fills.size and fills[f_hi].seq == seq:
        if fills[f_hi].ts != ts:
            _viol(vrows, vids, counts, meta, R_FIELDS, D_TS, seq, z, 0,
                  np.int64(fills[f_hi].ts), ts, 0)
        f_hi += 1
    while l_hi < l2.size and l2[l_hi].seq == seq:
        if l2[l_hi].ts != ts:
            _viol(vrows, vids, counts, meta, R_FIELDS, D_TS, seq, z, 1,
                  np.int64(l2[l_hi].ts), ts, 0)
        l_hi += 1
    while e_hi < events.size and events[e_hi].seq == seq:
        if events[e_hi].ts != ts:
            _viol(vrows, vids, counts, meta, R_FIELDS, D_TS, seq, z, 2,
                  np.int64(events[e_hi].ts), ts, 0)
        e_hi += 1
    return f_hi, l_hi, e_hi


@njit(cache=True, _nrt=False, inline="always")
def _check_reject(m, ev0, kind, x, live, known, owner, alone, seq, ost, meta, vrows, vids,
                  counts):
    """``reject`` (and ``ownership``) for message ``m`` rejected by its first report ``ev0``:
    ``alone`` whether that report is its only row; ``x`` the row of its order id (-1 none),
    ``live`` whether that order rests. (Shared with ``replay.verification.plain``.)"""
    rs = np.int64(ev0.reason)
    if not alone or ev0.filled_qty != 0 or ev0.leaves_qty != 0:
        _viol(vrows, vids, counts, meta, R_REJECT, D_REJECT_EFFECTS, seq, m.order_id,
              0, 0, 0, 0)
    if not known:
        if rs != _UNKNOWN_SYMBOL and rs != _BAD_KIND:
            _viol(vrows, vids, counts, meta, R_REJECT, D_UNKNOWN_SYMBOL_NOT_REJECTED,
                  seq, m.order_id, np.int64(ev0.event), rs, 0, 0)
    elif rs == _UNKNOWN_SYMBOL:
        _viol(vrows, vids, counts, meta, R_REJECT, D_REJ_UNKNOWN_SYMBOL, seq,
              m.order_id, 0, 0, 0, 0)
    elif rs == _UNKNOWN_ID and (kind == _CANCEL or kind == _MODIFY) and x >= 0:
        _viol(vrows, vids, counts, meta, R_REJECT, D_REJ_UNKNOWN_ID, seq, m.order_id,
              0, 0, 0, 0)
    elif rs == _DUPLICATE_ID and kind == _NEW and x < 0:
        _viol(vrows, vids, counts, meta, R_REJECT, D_REJ_DUPLICATE, seq, m.order_id,
              0, 0, 0, 0)
    elif rs == _NOT_OWNER and (kind == _CANCEL or kind == _MODIFY) and live and (
            not owner or ost[x, O_TRADER] == np.int64(m.trader)):
        _viol(vrows, vids, counts, meta, R_OWNER, D_NOT_OWNER_WRONG, seq, m.order_id,
              np.int64(m.trader), ost[x, O_TRADER], 0, 0)


@njit(cache=True, _nrt=False, inline="always")
def _after_message(seq, ts, ladder, meta, vrows, vids, counts):
    """After message ``seq`` at ``ts``: the book is not crossed (``crossed_book``); the
    symbol's latest ts moves on (or is noted to have stepped back). (Shared with
    ``replay.verification.plain``.)"""
    nb, na = meta[M_NB], meta[M_NA]
    if nb > 0 and na > 0 and ladder[0, nb - 1] >= -ladder[1, na - 1]:
        _viol(vrows, vids, counts, meta, R_CROSSED, D_CROSSED, seq, np.uint64(0),
              ladder[0, nb - 1], -ladder[1, na - 1], 0, 0)
    if ts > meta[M_PREV_TS]:
        meta[M_PREV_TS] = ts
    elif ts < meta[M_PREV_TS]:
        meta[M_TS_BACK] = 1


@njit(cache=True, _nrt=False, nogil=True)
def check_symbol(orders, fills, l2, events, i_end, known, stp, final, ost, lst, oid, htab,
                 ladder, ladlv, touched, ext, cfg, meta, vrows, vids, counts):
    """Check the messages ``meta[M_I]..i_end-1`` of one symbol and their output rows.

    orders/fills/l2/events are the symbol's stored rows in seq order. State persists in the
    arrays between calls (so the caller can show progress, or pass the next seq range's rows,
    with ``meta[M_I]``, ``M_FP``, ``M_LP``, ``M_EP`` reset to 0). ``final``: 0 for a call more
    rows of the same arrays follow; FLUSH when these arrays end (rows left after their last
    message have no message, unless they are expiries); FINAL at the run's end (FLUSH, then the
    quantities and expiries of the orders still live). Returns OK or NEED_CAPACITY. Releases
    the GIL, so a caller can read the next rows meanwhile.
    """
    nf, nl, ne = fills.size, l2.size, events.size
    i, fp, lp, ep = meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP]
    z = np.uint64(0)
    owner = cfg[C_OWNER] != 0
    # the fill rows each look-ahead stage takes next (see _look_ahead)
    f_id, f_row, f_next = fp + PF_ID, fp + PF_ROW, fp + PF_NEXT
    while i < i_end:
        # why here: a message needs at most one new order slot, and one new level for itself
        # and for each stop it may release; checking before it starts lets the caller grow the
        # arrays and resume at this very message
        if meta[M_LIVE_O] + 2 > ost.shape[0] or \
                meta[M_LIVE_L] + meta[M_PENDING] + 2 > lst.shape[0]:
            meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
            return NEED_CAPACITY
        f_id, f_row, f_next = _look_ahead(orders, i, i_end, fills, fp, nf, f_id, f_row, f_next,
                                          ost, lst, oid, htab, ladder, ladlv, meta)
        m = orders[i]
        seq, ts = np.int64(m.seq), np.int64(m.ts)
        if (ep < ne and events[ep].seq < seq) or (fp < nf and fills[fp].seq < seq) \
                or (lp < nl and l2[lp].seq < seq):
            fp, lp, ep = _foreign(seq, fills, fp, nf, l2, lp, nl, events, ep, ne, ost, ext, lst,
                                  htab, ladder, ladlv, touched, meta, vrows, vids, counts)
        f_hi, l_hi, e_hi = _rows_at(seq, ts, fills, fp, l2, lp, events, ep, meta, vrows, vids,
                                    counts)
        meta[M_NT] = 0
        meta[M_ORDERS] += 1
        # expiries before the message: each is a phase with its own L2 row
        while ep < e_hi and events[ep].event == _CANCELLED and events[ep].reason == _EXPIRED:
            _expire(events[ep], seq, ts, ost, ext, lst, htab, ladder, ladlv, touched, meta,
                    vrows, vids, counts)
            lp = _l2_phase(seq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta,
                           vrows, vids, counts)
            ep += 1
        kind = np.int64(m.kind)
        fp0 = fp
        k, x = e_hi, np.int64(-1)     # k: the next report to follow; x: the order walking
        if e_hi == ep:
            _viol(vrows, vids, counts, meta, R_EVENTS, D_NO_EVENT, seq, m.order_id, 0, 0, 0, 0)
        else:
            ev0 = events[ep]
            et = np.int64(ev0.event)
            if ev0.order_id != m.order_id:
                _viol(vrows, vids, counts, meta, R_EVENTS, D_FIRST_WRONG_ORDER, seq, ev0.order_id,
                      0, 0, 0, 0)
            x = _slot_of(htab, m.order_id)
            live = x >= 0 and ost[x, O_LEVEL] >= 0
            if et == _REJECTED:
                _check_reject(m, ev0, kind, x, live, known, owner, e_hi - ep == 1 and
                              f_hi == fp and l_hi == lp, seq, ost, meta, vrows, vids, counts)
                x = -1
            elif not known:
                _viol(vrows, vids, counts, meta, R_REJECT, D_UNKNOWN_SYMBOL_NOT_REJECTED, seq,
                      m.order_id, et, np.int64(ev0.reason), 0, 0)
                x = -1
            elif kind > 2 or (kind == _NEW and m.side > 1):
                _viol(vrows, vids, counts, meta, R_REJECT, D_BAD_FIELD_ACCEPTED, seq, m.order_id,
                      kind, 0, 0, 0)
                x = -1
            elif (kind == _NEW and et != _ACCEPTED) or (kind == _CANCEL and et != _CANCELLED) \
                    or (kind == _MODIFY and et != _MODIFIED):
                _viol(vrows, vids, counts, meta, R_EVENTS, D_BAD_FIRST_EVENT, seq, ev0.order_id,
                      kind, et, 0, 0)
                x = -1
            elif kind == _NEW:
                if x >= 0:
                    _viol(vrows, vids, counts, meta, R_REJECT, D_DUPLICATE_ACCEPTED, seq,
                          m.order_id, 0, 0, 0, 0)
                    x = -1
                else:
                    qty = np.int64(m.qty)
                    if ev0.leaves_qty != qty or ev0.filled_qty != 0:
                        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                              np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty), 0, qty)
                    x = meta[M_FREE_O]
                    if x < 0:
                        return NEED_CAPACITY
                    meta[M_FREE_O] = ost[x, O_NEXT]
                    meta[M_LIVE_O] += 1
                    oid[x] = m.order_id
                    ot = np.int64(m.order_type)
                    if cfg[C_PLAIN] == 0:
                        _check_grid(cfg, seq, m.order_id, ot == _LIMIT or ot == _STOP_LIMIT,
                                    ot == _STOP or ot == _STOP_LIMIT, np.int64(m.price),
                                    np.int64(m.stop_price), qty, np.int64(m.display_qty),
                                    np.int64(m.min_qty), meta, vrows, vids, counts)
                    _hash_put(htab, m.order_id, x)
                    if _new_order(m, x, ts, ost, ext, cfg):      # a stop: it waits
                        if _stop_reached(meta, ost[x, O_SIDE] - 2, ext[x, E_STOP]):
                            _viol(vrows, vids, counts, meta, R_STOPS, D_STOP_REACHED_ACCEPTED,
                                  seq, m.order_id, ext[x, E_STOP], meta[M_LAST_PX], 0, 0)
                        meta[M_PENDING] += 1
                        if not _append(ost, lst, ladder, ladlv, meta, x):
                            return NEED_CAPACITY
                        _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids,
                               counts)
                        fp, k, x = f_hi, e_hi, -1
                    else:
                        fp, ended, k, room = _follow(x, seq, ts, stp, fills, fp, f_hi, events,
                                                     ep + 1, e_hi, ost, ext, lst, oid, htab,
                                                     ladder, ladlv, touched, meta, vrows, vids,
                                                     counts)
                        mq = np.int64(m.min_qty)
                        if mq > 0 and ost[x, O_FILLED] < mq:   # min_qty holds on entry only
                            _viol(vrows, vids, counts, meta, R_MIN_QTY, D_MIN_QTY_UNFILLED, seq,
                                  m.order_id, mq, ost[x, O_FILLED], 0, 0)
                        if not (room and _end_incoming(x, ended, seq, ost, ext, lst, oid, htab,
                                                       ladder, ladlv, touched, meta, vrows,
                                                       vids, counts)):
                            return NEED_CAPACITY
            elif not live:
                _viol(vrows, vids, counts, meta, R_REJECT, D_NOT_LIVE_ACCEPTED, seq, m.order_id,
                      0, 0, 0, 0)
                x = -1
            else:
                if owner and np.int64(m.trader) != ost[x, O_TRADER]:
                    _viol(vrows, vids, counts, meta, R_OWNER, D_NOT_OWNER_ACCEPTED, seq,
                          m.order_id, np.int64(m.trader), ost[x, O_TRADER], 0, 0)
                if ost[x, O_EXPIRE] > 0 and ts >= ost[x, O_EXPIRE]:
                    _viol(vrows, vids, counts, meta, R_EXPIRY, D_ACTED_EXPIRED, seq, m.order_id,
                          ost[x, O_EXPIRE], ts, 0, 0)
                pending = ost[x, O_SIDE] >= 2
                if kind == _CANCEL:
                    if ev0.leaves_qty != 0 or np.int64(ev0.filled_qty) != ost[x, O_FILLED]:
                        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                              np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty),
                              ost[x, O_FILLED], 0)
                    _remove(ost, ext, lst, htab, ladder, ladlv, touched, meta, vrows, vids,
                            counts, seq, x, m.order_id)
                    _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids, counts)
                    fp, x = f_hi, -1
                else:   # MODIFY of a live order
                    q = np.int64(m.qty)
                    if ev0.leaves_qty != q or np.int64(ev0.filled_qty) != ost[x, O_FILLED]:
                        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                              np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty),
                              ost[x, O_FILLED], q)
                    old = _open(ost, ext, x)
                    ost[x, O_TOTAL] += q - old
                    if pending:
                        newstop = np.int64(m.stop_price)
                        limit = ost[x, O_MARKET] == 0
                        if cfg[C_PLAIN] == 0:
                            _check_grid(cfg, seq, m.order_id, limit, True, np.int64(m.price),
                                        newstop, q, 0, 0, meta, vrows, vids, counts)
                        if _stop_reached(meta, ost[x, O_SIDE] - 2, newstop):
                            _viol(vrows, vids, counts, meta, R_STOPS, D_STOP_REACHED_ACCEPTED,
                                  seq, m.order_id, newstop, meta[M_LAST_PX], 0, 0)
                        if limit:
                            ext[x, E_LIMIT] = np.int64(m.price)
                        if newstop == ext[x, E_STOP] and q <= old:
                            _set_leaves(ost, lst, x, q)
                        else:     # to the back of its (new) trigger price
                            _detach(ost, lst, ladder, ladlv, meta, x)
                            ext[x, E_STOP] = newstop
                            ost[x, O_PRICE] = newstop
                            ost[x, O_LEAVES] = q
                            if not _append(ost, lst, ladder, ladlv, meta, x):
                                return NEED_CAPACITY
                        _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids,
                               counts)
                        fp, x = f_hi, -1
                    else:
                        if cfg[C_PLAIN] == 0:
                            _check_grid(cfg, seq, m.order_id, True, False, np.int64(m.price), 0,
                                        q, 0, 0, meta, vrows, vids, counts)
                        _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
                        if np.int64(m.price) == ost[x, O_PRICE]:
                            if q > old:   # more quantity loses priority: to the back of the level
                                _detach(ost, lst, ladder, ladlv, meta, x)
                                ost[x, O_LEAVES] = q
                                _split(ost, ext, x)
                                if not _append(ost, lst, ladder, ladlv, meta, x):
                                    return NEED_CAPACITY
                            elif ost[x, O_DISPLAY] > 0:
                                _iceberg_reduce(ost, ext, lst, x, q)
                            else:
                                _set_leaves(ost, lst, x, q)
                            _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids,
                                   counts)
                            fp, x = f_hi, -1
                        else:     # a new price: out of the book, then handled as an incoming limit
                            _detach(ost, lst, ladder, ladlv, meta, x)
                            ost[x, O_LEAVES] = q
                            ext[x, E_RESERVE] = 0
                            ost[x, O_PRICE] = np.int64(m.price)
                            ost[x, O_MARKET] = 0
                            fp, ended, k, room = _follow(x, seq, ts, stp, fills, fp, f_hi,
                                                         events, ep + 1, e_hi, ost, ext, lst,
                                                         oid, htab, ladder, ladlv, touched, meta,
                                                         vrows, vids, counts)
                            if not (room and _end_incoming(x, ended, seq, ost, ext, lst, oid,
                                                           htab, ladder, ladlv, touched, meta,
                                                           vrows, vids, counts)):
                                return NEED_CAPACITY
        # stops released by the message's trades (a cascade included), one phase each
        while x >= 0 and k < e_hi:
            ev = events[k]
            lp = _l2_phase(seq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta,
                           vrows, vids, counts)
            checked = ev.event == _TRIGGERED
            if not checked:
                _viol(vrows, vids, counts, meta, R_STOPS, D_FILLED_BEFORE_TRIGGER, seq,
                      ev.order_id, 0, 0, 0, 0)
            x = _release(ev, seq, checked, ost, ext, lst, oid, htab, ladder, ladlv, meta, vrows,
                         vids, counts)
            if checked:
                k += 1
            if x >= 0:
                fp, ended, k, room = _follow(x, seq, ts, stp, fills, fp, f_hi, events, k, e_hi,
                                             ost, ext, lst, oid, htab, ladder, ladlv, touched,
                                             meta, vrows, vids, counts)
                if not (room and _end_incoming(x, ended, seq, ost, ext, lst, oid, htab, ladder,
                                               ladlv, touched, meta, vrows, vids, counts)):
                    return NEED_CAPACITY
        for j in range(k, e_hi):
            _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq,
                  events[j].order_id, np.int64(events[j].event), 0, 0, 0)
        for j in range(fp, f_hi):
            _viol(vrows, vids, counts, meta, R_EVENTS, D_FILL_NO_REPORT, seq, z,
                  np.int64(fills[j].trade_id), 0, 0, 0)
        _check_l2(seq, l2, lp, l_hi, ost, ext, lst, ladder, ladlv, touched, meta, vrows, vids,
                  counts)
        if f_hi > fp0 and meta[M_PENDING] > 0:
            _stops_settled(seq, ost, oid, lst, ladlv, meta, vrows, vids, counts)
        _after_message(seq, ts, ladder, meta, vrows, vids, counts)
        fp, lp, ep = f_hi, l_hi, e_hi
        i += 1
    meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
    if final >= FLUSH:
        big = np.int64(0x7FFFFFFFFFFFFFFF)
        fp, lp, ep = _foreign(big, fills, fp, nf, l2, lp, nl, events, ep, ne, ost, ext, lst,
                              htab, ladder, ladlv, touched, meta, vrows, vids, counts)
        for j in range(fp, nf):
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(fills[j].seq), z, 0,
                  0, 0, 0)
        for j in range(lp, nl):
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(l2[j].seq), z, 1,
                  0, 0, 0)
        for j in range(ep, ne):
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(events[j].seq), z,
                  2, 0, 0, 0)
        meta[M_FP], meta[M_LP], meta[M_EP] = nf, nl, ne
    if final >= FINAL:
        last = np.int64(orders[i_end - 1].seq) if i_end > 0 else meta[M_LAST_SEQ]
        check_live(last, ost, ext, oid, lst, ladlv, meta, vrows, vids, counts)
    if i_end > 0:
        meta[M_LAST_SEQ] = np.int64(orders[i_end - 1].seq)
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _live_bad(s, now, ost, ext, meta):
    """Whether live order ``s`` breaks conservation or is past its expiry at ``now``."""
    return ost[s, O_FILLSUM] + ost[s, O_CANCELLED] + _open(ost, ext, s) != ost[s, O_TOTAL] or (
        ost[s, O_EXPIRE] > 0 and ost[s, O_EXPIRE] <= now and meta[M_TS_BACK] == 0)


@njit(cache=True, _nrt=False)
def check_live(seq, ost, ext, oid, lst, ladlv, meta, vrows, vids, counts):
    """Quantities of the orders still live at the end of the run must balance too, and none may
    be past its expiry at the symbol's latest ts (unless its ts ever stepped back).

    Why a scan of every row first: rows not live have O_LEVEL -1, and a sequential scan
    streams memory where a queue walk misses the cache per order (millions of live orders at
    the end of a long run). Only when the scan finds a violation are the orders walked, in book
    order (sides 0..3, best level first, FIFO), to report them: the rows an order occupies
    depend on the history of the arrays, the book order only on the book, so the findings come
    in the same order however the run was split into ranges (``replay.verification.split``)."""
    now = meta[M_PREV_TS]
    bad = False
    for s in range(ost.shape[0]):
        if ost[s, O_LEVEL] >= 0 and _live_bad(s, now, ost, ext, meta):
            bad = True
            break
    if not bad:
        return
    for side in range(4):
        for p in range(meta[M_NB + side] - 1, -1, -1):
            s = lst[ladlv[side, p], L_HEAD]
            while s >= 0:
                if ost[s, O_FILLSUM] + ost[s, O_CANCELLED] + _open(ost, ext, s) != \
                        ost[s, O_TOTAL]:
                    _viol(vrows, vids, counts, meta, R_CONSERVE, D_CONSERVE, seq, oid[s],
                          ost[s, O_FILLSUM], ost[s, O_CANCELLED], _open(ost, ext, s),
                          ost[s, O_TOTAL])
                if ost[s, O_EXPIRE] > 0 and ost[s, O_EXPIRE] <= now and meta[M_TS_BACK] == 0:
                    _viol(vrows, vids, counts, meta, R_EXPIRY, D_NOT_EXPIRED, seq, oid[s],
                          ost[s, O_EXPIRE], now, 0, 0)
                s = ost[s, O_NEXT]
