"""The plain verification kernel: continuous limit / market / cancel / modify flow, no venue order.

``check_plain`` takes the arguments of ``replay.verification.kernel.check_symbol`` and records,
for every message it takes, exactly the violations, counts and state ``check_symbol`` would. It
takes a message only when none of the verifier's venue checks can apply to it:

- the state (the caller's promise, ``plain_state``): no pending stop, no live iceberg and no
  live order with an expiry, so every branch of ``check_symbol`` and ``walk`` that reads an
  iceberg's reserve, a stop or an expiry is dead;
- the message: kind NEW, CANCEL or MODIFY; a NEW is a LIMIT or MARKET order, GTC, IOC or FOK,
  without display or minimum quantity, on a valid side (so the orders it adds keep the state
  plain);
- its rows: no row of an earlier seq is pending (``check_symbol``'s ``_foreign``: expiries
  another symbol's message caused, or stray rows), and no report of the message is a TRIGGERED
  (a stop's release) or an EXPIRED cancel (an expiry before it).

Anything else makes it return ``NEED_FULL`` with ``meta[M_I]`` (and the row cursors) at that
message, having recorded nothing for it; the caller (``replay.verification.symbol``) continues
with ``check_symbol`` from there. Rows left after the last message at a FLUSH/FINAL call do the
same with ``meta[M_I] == i_end``. So a verify of a plain flow never calls -- never compiles --
``check_symbol`` and its venue helpers (the stop book, icebergs, expiries, multi-phase L2 checks).

Why it cannot drift from ``check_symbol``: it is that kernel's loop with the branches that the
conditions above make dead taken out, using the same book primitives (``book``), the same L2
and violation helpers, and ``walk_plain`` (``_walk`` without the stop hand-over and the iceberg
branches). tests/replay_tests/test_verify_plain_kernel.py checks reports, counts and the final
state of both kernels on plain and mixed flows, defects planted, and that a plain flow never
calls ``check_symbol``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard

from exsim.replay.verification.book import (
    C_OWNER, C_PLAIN, E_RESERVE, L_COUNT, L_HEAD, L_PRICE, L_QTY, M_EP, M_FILLS, M_FP, M_FREE_O,
    M_I, M_LAST_PX, M_LAST_SEQ, M_LAST_TRADE, M_LIVE_L, M_LIVE_O, M_LP, M_NT, M_ORDERS,
    M_PENDING, M_TRADED, O_CANCELLED, O_DISPLAY, O_EXPIRE, O_FILLED, O_FILLSUM, O_FLAGS,
    O_LEAVES, O_LEVEL, O_MARKET, O_NEXT, O_PRICE, O_SIDE, O_TIF, O_TOTAL, O_TRADER, T_PRICE,
    T_ROW, T_SIDE, _append, _best_level, _detach, _find_level, _hash_put, _set_leaves, _slot_of,
    _touch,
)
from exsim.replay.verification.rules import (
    D_AGGRESSOR_SIDE, D_BAD_FIELD_ACCEPTED, D_BAD_FIRST_EVENT, D_DUPLICATE_ACCEPTED, D_FIFO,
    D_FILL_NO_REPORT, D_FIRST_WRONG_ORDER, D_INCOMING_NOT_NAMED, D_L2_COUNT, D_L2_QTY,
    D_L2_SIDE, D_LEFT_OPEN, D_LIMIT, D_NOT_LIVE_ACCEPTED, D_NOT_OWNER_ACCEPTED, D_NO_EVENT,
    D_NO_RESTING_REPORT, D_OVERFILL, D_POST_ONLY, D_REPORT_NOT_LIVE, D_REPORT_NO_FILL,
    D_REPORT_QTY, D_RESTING_NOT_LIVE, D_RESTING_PRICE, D_RESTING_REPORT_ORDER,
    D_RESTING_SAME_SIDE, D_SELF_TRADE, D_TRADERS, D_TRADE_ID, D_UNEXPECTED_EVENT,
    D_UNKNOWN_SYMBOL_NOT_REJECTED, R_EVENTS, R_FIELDS, R_FIFO, R_L2, R_LIMITS, R_LIVE, R_OTYPE,
    R_OVERFILL, R_OWNER, R_REJECT, R_RPRICE, R_SIDES, R_STP, R_STREAM, _ACCEPTED, _CANCEL,
    _CANCELLED, _DAY, _EXPIRED, _FILLED, _FOK, _GTC, _GTD, _IOC, _LIMIT, _MARKET, _MODIFIED,
    _MODIFY, _NEW, _PARTIAL, _POST_ONLY, _REJECTED, _SELF_TRADE, _STP_NONE, _TRIGGERED, _viol,
)
from exsim.replay.verification.orders import _check_grid, _finish, _l2_missing
from exsim.replay.verification.kernel import (
    FLUSH, FINAL, NEED_CAPACITY, OK, PF_ID, PF_NEXT, PF_ROW, _after_message, _check_reject,
    _look_ahead, _rows_at, check_live,
)
from exsim.replay.verification.walk import _own_cancel, _stp_cancel

# numba keys this module's cache on this file only; these files are compiled into its kernel
guard(__name__, __file__, deps=("exsim.replay.verification.book",
                                "exsim.replay.verification.rules",
                                "exsim.replay.verification.orders",
                                "exsim.replay.verification.kernel",
                                "exsim.replay.verification.walk", "exsim.exchange.schema"))

__all__ = ["check_plain", "plain_state", "NEED_FULL"]

NEED_FULL = 2     # beside kernel.OK (0) and NEED_CAPACITY (1)


def plain_state(state: tuple) -> bool:
    """Whether a verifier state (``replay.verification.book.new_state``) holds no pending stop,
    no live iceberg and no live order with an expiry: what ``check_plain`` needs of the book
    it starts from. Returns a bool (vectorised over the order rows)."""
    ost, meta = state[0], state[-4]
    if meta[M_PENDING] != 0:
        return False
    live = ost[:, O_LEVEL] >= 0
    return not bool(np.any(live & ((ost[:, O_DISPLAY] > 0) | (ost[:, O_EXPIRE] > 0)
                                   | (ost[:, O_SIDE] >= 2))))


# ------------------------------------------------------------------ one fill, one walk
@njit(cache=True, _nrt=False)
def walk_plain(x, seq, stp, fills, fp, f_hi, events, k, e_hi, ost, ext, lst, oid, htab, ladder,
               ladlv, touched, meta, vrows, vids, counts):
    """``walk._walk`` for a plain book and a message with no TRIGGERED report (so nothing hands
    the walk over): an incoming order's fills, the resting orders' reports, STP cancels and its
    own end. Returns (next fill index, whether the order ended, next report index, True)."""
    xid = oid[x]
    xside = ost[x, O_SIDE]
    opp = 1 - xside
    ended = False
    z = np.uint64(0)
    while k < e_hi:
        ev = events[k]
        et = np.int64(ev.event)
        k += 1
        if ended:
            _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, ev.order_id, et,
                  0, 0, 0)
            continue
        if (et == _PARTIAL or et == _FILLED) and ev.order_id == xid:
            q, r, have = np.int64(0), np.int64(-1), False
            if fp < f_hi:
                have = True
                f = fills[fp]
                fp += 1
                q = np.int64(f.qty)
                price = np.int64(f.price)
                # walk._check_fill without the stop, iceberg and expiry cases
                if np.int64(f.aggressor_side) != xside:
                    _viol(vrows, vids, counts, meta, R_SIDES, D_AGGRESSOR_SIDE, seq, xid,
                          np.int64(f.aggressor_side), xside, 0, 0)
                if xside == 0:
                    mine, rid = f.buy_order_id, f.sell_order_id
                else:
                    mine, rid = f.sell_order_id, f.buy_order_id
                if mine != xid:
                    _viol(vrows, vids, counts, meta, R_SIDES, D_INCOMING_NOT_NAMED, seq, xid, 0,
                          0, 0, 0)
                r = _slot_of(htab, rid)
                if r >= 0 and ost[r, O_LEVEL] < 0:
                    r = -1
                if r < 0:
                    _viol(vrows, vids, counts, meta, R_LIVE, D_RESTING_NOT_LIVE, seq, rid, 0, 0,
                          0, 0)
                else:
                    rside = ost[r, O_SIDE]
                    rprice = ost[r, O_PRICE]
                    if rside == xside:
                        _viol(vrows, vids, counts, meta, R_SIDES, D_RESTING_SAME_SIDE, seq, rid,
                              0, 0, 0, 0)
                    lv = ost[r, O_LEVEL]
                    best = _best_level(ladlv, meta, rside)
                    if lv != best or lst[lv, L_HEAD] != r:
                        _viol(vrows, vids, counts, meta, R_FIFO, D_FIFO, seq, rid, rprice,
                              lst[best, L_PRICE] if best >= 0 else 0, 0, 0)
                    if price != rprice:
                        _viol(vrows, vids, counts, meta, R_RPRICE, D_RESTING_PRICE, seq, rid,
                              price, rprice, 0, 0)
                    if (rside == 0 and price > rprice) or (rside == 1 and price < rprice):
                        _viol(vrows, vids, counts, meta, R_LIMITS, D_LIMIT, seq, rid, price,
                              rprice, rside, 0)
                    if q > ost[r, O_LEAVES]:
                        _viol(vrows, vids, counts, meta, R_OVERFILL, D_OVERFILL, seq, rid, q,
                              ost[r, O_LEAVES], 0, 0)
                    bt = ost[x, O_TRADER] if xside == 0 else ost[r, O_TRADER]
                    st = ost[r, O_TRADER] if xside == 0 else ost[x, O_TRADER]
                    if np.int64(f.buy_trader) != bt or np.int64(f.sell_trader) != st:
                        _viol(vrows, vids, counts, meta, R_FIELDS, D_TRADERS, seq, z,
                              np.int64(f.buy_trader), np.int64(f.sell_trader), bt, st)
                    if stp != _STP_NONE and ost[r, O_TRADER] == ost[x, O_TRADER]:
                        _viol(vrows, vids, counts, meta, R_STP, D_SELF_TRADE, seq, xid,
                              ost[x, O_TRADER], 0, 0, 0)
                    ost[r, O_FILLSUM] += q
                if ost[x, O_MARKET] == 0:
                    if (xside == 0 and price > ost[x, O_PRICE]) or \
                            (xside == 1 and price < ost[x, O_PRICE]):
                        _viol(vrows, vids, counts, meta, R_LIMITS, D_LIMIT, seq, xid, price,
                              ost[x, O_PRICE], xside, 0)
                if q <= 0 or q > ost[x, O_LEAVES]:
                    _viol(vrows, vids, counts, meta, R_OVERFILL, D_OVERFILL, seq, xid, q,
                          ost[x, O_LEAVES], 0, 0)
                if ost[x, O_FLAGS] & _POST_ONLY:
                    _viol(vrows, vids, counts, meta, R_OTYPE, D_POST_ONLY, seq, xid, 0, 0, 0, 0)
                ost[x, O_FILLSUM] += q
                tid = np.int64(f.trade_id)
                if tid <= meta[M_LAST_TRADE]:
                    _viol(vrows, vids, counts, meta, R_STREAM, D_TRADE_ID, seq, z, tid,
                          meta[M_LAST_TRADE], 0, 0)
                meta[M_LAST_TRADE] = tid
                meta[M_FILLS] += 1
                meta[M_LAST_PX] = price
                meta[M_TRADED] = 1
            else:
                _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_NO_FILL, seq, xid, 0, 0, 0, 0)
            f_new, l_new = np.int64(ev.filled_qty), np.int64(ev.leaves_qty)
            ef, el = ost[x, O_FILLED] + q, ost[x, O_LEAVES] - q
            if have and (f_new != ef or l_new != el or (et == _FILLED) != (l_new == 0)):
                _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, xid, f_new, l_new,
                      ef, el)
            ost[x, O_FILLED] = f_new
            ost[x, O_LEAVES] = l_new
            if l_new <= 0:
                ended = True
            if k < e_hi and (events[k].event == _PARTIAL or events[k].event == _FILLED) \
                    and events[k].order_id != xid:
                # walk._resting_report without the stop and iceberg cases
                er = events[k]
                k += 1
                rr = _slot_of(htab, er.order_id)
                if rr >= 0 and ost[rr, O_LEVEL] < 0:
                    rr = -1
                if have and r >= 0 and rr != r:
                    _viol(vrows, vids, counts, meta, R_EVENTS, D_RESTING_REPORT_ORDER, seq,
                          er.order_id, np.int64(oid[r]), 0, 0, 0)
                if rr < 0:
                    _viol(vrows, vids, counts, meta, R_LIVE, D_REPORT_NOT_LIVE, seq, er.order_id,
                          0, 0, 0, 0)
                    continue
                tgt, key, left = rr, er.order_id, np.int64(er.leaves_qty)
                rf, reported = np.int64(er.filled_qty), True
                if have and rr == r:
                    ef, el = ost[rr, O_FILLED] + q, ost[rr, O_LEAVES] - q
                    if rf != ef or left != el or (er.event == _FILLED) != (left == 0):
                        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq,
                              er.order_id, rf, left, ef, el)
            elif have:
                rid = np.uint64(fills[fp - 1].sell_order_id) if xside == 0 \
                    else np.uint64(fills[fp - 1].buy_order_id)
                _viol(vrows, vids, counts, meta, R_EVENTS, D_NO_RESTING_REPORT, seq, rid, 0, 0,
                      0, 0)
                if r < 0:
                    continue
                # the deal happened: take its quantity off the resting order
                tgt, key, left = r, rid, ost[r, O_LEAVES] - q
                rf, reported = ost[r, O_FILLED], False
            else:
                continue
            # the resting order's new quantities (one copy of this code for both cases above)
            _touch(touched, lst, ladder, ladlv, meta, ost[tgt, O_SIDE], ost[tgt, O_PRICE])
            ost[tgt, O_FILLED] = rf
            if left <= 0:
                _detach(ost, lst, ladder, ladlv, meta, tgt)
                ost[tgt, O_LEAVES] = 0
                if not reported:     # as walk._walk does (ext is read only for icebergs)
                    ext[tgt, E_RESERVE] = 0
                _finish(ost, htab, meta, vrows, vids, counts, seq, tgt, key)
            else:
                _set_leaves(ost, lst, tgt, left)
            continue
        if et == _CANCELLED and ev.order_id == xid:
            _own_cancel(ev, x, xid, seq, stp, ost, meta, vrows, vids, counts)
            ended = True
            continue
        if et == _CANCELLED and ev.reason == _SELF_TRADE:
            r = _slot_of(htab, ev.order_id)
            if r < 0 or ost[r, O_LEVEL] < 0:
                _viol(vrows, vids, counts, meta, R_LIVE, D_REPORT_NOT_LIVE, seq, ev.order_id, 0,
                      0, 0, 0)
                continue
            _stp_cancel(ev, r, x, opp, seq, stp, ost, lst, ladlv, meta, vrows, vids, counts)
            _remove(ost, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts, seq, r,
                    ev.order_id)
            continue
        _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, ev.order_id, et, 0, 0,
              0)
    return fp, ended, k, True


@njit(cache=True, _nrt=False, inline="always")
def _remove(ost, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts, seq, s, key):
    """``orders._remove`` of a resting plain order (no stop, no reserve)."""
    _touch(touched, lst, ladder, ladlv, meta, ost[s, O_SIDE], ost[s, O_PRICE])
    _detach(ost, lst, ladder, ladlv, meta, s)
    ost[s, O_CANCELLED] += ost[s, O_LEAVES]
    ost[s, O_LEAVES] = 0
    _finish(ost, htab, meta, vrows, vids, counts, seq, s, key)


@njit(cache=True, _nrt=False, inline="always")
def _end_incoming(x, ended, seq, ost, lst, oid, htab, ladder, ladlv, touched, meta, vrows, vids,
                  counts):
    """``walk._end_incoming`` of a plain order (it shows everything it rests with); one
    ``_finish`` site for both ways it may be done."""
    if not (ended or ost[x, O_LEAVES] <= 0):
        tif = ost[x, O_TIF]
        if ost[x, O_MARKET] == 0 and (tif == _GTC or tif == _DAY or tif == _GTD):
            _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
            return _append(ost, lst, ladder, ladlv, meta, x)
        _viol(vrows, vids, counts, meta, R_OTYPE, D_LEFT_OPEN, seq, oid[x], ost[x, O_MARKET],
              tif, 0, 0)
    _finish(ost, htab, meta, vrows, vids, counts, seq, x, oid[x])
    return True


@njit(cache=True, _nrt=False, inline="always")
def _check_l2(seq, l2, lp, l_hi, lst, ladder, ladlv, touched, meta, vrows, vids, counts):
    """``kernel._check_l2`` on a plain book (no reserve: a row's quantity is the level's
    shown total or an ``l2_totals`` violation)."""
    z = np.uint64(0)
    nt = meta[M_NT]
    for k in range(lp, l_hi):
        row = l2[k]
        side = np.int64(row.side)
        price = np.int64(row.price)
        if side > 1:
            _viol(vrows, vids, counts, meta, R_STREAM, D_L2_SIDE, seq, z, side, 0, 0, 0)
            continue
        lv = _find_level(ladder, ladlv, meta, side, price)
        q = lst[lv, L_QTY] if lv >= 0 else 0
        c = lst[lv, L_COUNT] if lv >= 0 else 0
        if row.qty != q:
            _viol(vrows, vids, counts, meta, R_L2, D_L2_QTY, seq, z, side, price,
                  np.int64(row.qty), q)
        if row.count != c:
            _viol(vrows, vids, counts, meta, R_L2, D_L2_COUNT, seq, z, side, price,
                  np.int64(row.count), c)
        for t in range(nt):
            if touched[t, T_SIDE] == side and touched[t, T_PRICE] == price:
                touched[t, T_ROW] = 1
    _l2_missing(seq, lst, ladder, ladlv, touched, meta, vrows, vids, counts)


# ------------------------------------------------------------------ the message loop
@njit(cache=True, _nrt=False, inline="always")
def _plain_message(m, rejected):
    """Whether message ``m`` (``rejected``: its first report is a REJECTED) keeps a plain book
    plain (see the module docstring): anything but a NEW, a NEW that never enters the book
    (rejected, or on no valid side), or a LIMIT or MARKET NEW, GTC, IOC or FOK, without display
    or minimum quantity."""
    if m.kind != _NEW or rejected or m.side > 1:
        return True
    if m.display_qty != 0 or m.min_qty != 0:
        return False
    ot, tif = m.order_type, m.tif
    return (ot == _LIMIT or ot == _MARKET) and (tif == _GTC or tif == _IOC or tif == _FOK)


@njit(cache=True, _nrt=False, nogil=True)
def check_plain(orders, fills, l2, events, i_end, known, stp, final, ost, lst, oid, htab,
                ladder, ladlv, touched, ext, cfg, meta, vrows, vids, counts):
    """``kernel.check_symbol`` over the messages ``meta[M_I]..i_end-1`` that are plain (see the
    module docstring), on a state ``plain_state`` accepts. Returns OK, NEED_CAPACITY (grow the
    state and call again) or NEED_FULL (``meta[M_I]`` names the first message it did not take,
    or equals ``i_end`` when only the rows after the last message are left to FLUSH)."""
    nf, nl, ne = fills.size, l2.size, events.size
    i, fp, lp, ep = meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP]
    z = np.uint64(0)
    owner = cfg[C_OWNER] != 0
    f_id, f_row, f_next = fp + PF_ID, fp + PF_ROW, fp + PF_NEXT
    while i < i_end:
        if meta[M_LIVE_O] + 2 > ost.shape[0] or meta[M_LIVE_L] + 2 > lst.shape[0]:
            meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
            return NEED_CAPACITY
        m = orders[i]
        seq, ts = np.int64(m.seq), np.int64(m.ts)
        # what only check_symbol takes: decided before anything of the message is recorded
        rejected = ep < ne and events[ep].seq == seq and events[ep].event == _REJECTED
        full = not _plain_message(m, rejected) or (ep < ne and events[ep].seq < seq) or \
            (fp < nf and fills[fp].seq < seq) or (lp < nl and l2[lp].seq < seq)
        e_hi = ep
        while not full and e_hi < ne and events[e_hi].seq == seq:
            ev = events[e_hi]
            full = ev.event == _TRIGGERED or (ev.event == _CANCELLED and ev.reason == _EXPIRED
                                              and e_hi == ep)
            e_hi += 1
        if full:
            meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
            return NEED_FULL
        f_id, f_row, f_next = _look_ahead(orders, i, i_end, fills, fp, nf, f_id, f_row, f_next,
                                          ost, lst, oid, htab, ladder, ladlv, meta)
        f_hi, l_hi, e_hi = _rows_at(seq, ts, fills, fp, l2, lp, events, ep, meta, vrows, vids,
                                    counts)
        meta[M_NT] = 0
        meta[M_ORDERS] += 1
        kind = np.int64(m.kind)
        k, x = e_hi, np.int64(-1)
        incoming = extra = False
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
                    market = np.int64(m.order_type) == _MARKET
                    if cfg[C_PLAIN] == 0:
                        _check_grid(cfg, seq, m.order_id, not market, False, np.int64(m.price),
                                    np.int64(m.stop_price), qty, np.int64(m.display_qty),
                                    np.int64(m.min_qty), meta, vrows, vids, counts)
                    _hash_put(htab, m.order_id, x)
                    # kernel._new_order of a plain order: no display, expiry or stop
                    ost[x, O_SIDE] = np.int64(m.side)
                    ost[x, O_MARKET] = 1 if market else 0
                    ost[x, O_PRICE] = 0 if market else np.int64(m.price)
                    ost[x, O_LEAVES] = qty
                    ost[x, O_FILLED] = 0
                    ost[x, O_FILLSUM] = 0
                    ost[x, O_TOTAL] = qty
                    ost[x, O_CANCELLED] = 0
                    ost[x, O_TRADER] = np.int64(m.trader)
                    ost[x, O_FLAGS] = np.int64(m.flags)
                    ost[x, O_TIF] = np.int64(m.tif)
                    ost[x, O_LEVEL] = -1
                    ost[x, O_DISPLAY] = 0
                    ost[x, O_EXPIRE] = 0
                    incoming = True
            elif not live:
                _viol(vrows, vids, counts, meta, R_REJECT, D_NOT_LIVE_ACCEPTED, seq, m.order_id,
                      0, 0, 0, 0)
                x = -1
            else:
                if owner and np.int64(m.trader) != ost[x, O_TRADER]:
                    _viol(vrows, vids, counts, meta, R_OWNER, D_NOT_OWNER_ACCEPTED, seq,
                          m.order_id, np.int64(m.trader), ost[x, O_TRADER], 0, 0)
                if kind == _CANCEL:
                    if ev0.leaves_qty != 0 or np.int64(ev0.filled_qty) != ost[x, O_FILLED]:
                        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                              np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty),
                              ost[x, O_FILLED], 0)
                    _remove(ost, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts,
                            seq, x, m.order_id)
                    extra = True
                else:   # MODIFY of a live order
                    q = np.int64(m.qty)
                    if ev0.leaves_qty != q or np.int64(ev0.filled_qty) != ost[x, O_FILLED]:
                        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                              np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty),
                              ost[x, O_FILLED], q)
                    old = ost[x, O_LEAVES]
                    ost[x, O_TOTAL] += q - old
                    if cfg[C_PLAIN] == 0:
                        _check_grid(cfg, seq, m.order_id, True, False, np.int64(m.price), 0,
                                    q, 0, 0, meta, vrows, vids, counts)
                    _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
                    moved = np.int64(m.price) != ost[x, O_PRICE]
                    if moved or q > old:   # to the back of its level, or out to its new price
                        _detach(ost, lst, ladder, ladlv, meta, x)
                        ost[x, O_LEAVES] = q
                        if moved:          # then handled as an incoming limit
                            ext[x, E_RESERVE] = 0
                            ost[x, O_PRICE] = np.int64(m.price)
                            ost[x, O_MARKET] = 0
                            incoming = True
                        elif not _append(ost, lst, ladder, ladlv, meta, x):
                            return NEED_CAPACITY
                    else:
                        _set_leaves(ost, lst, x, q)
                    extra = not incoming
        # a cancel or a same-price modify: it has no more reports or fills (one site for both)
        if extra:
            fp, k, x = _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids,
                              counts)
        # an accepted NEW, or a MODIFY to a new price: its walk, then it rests or is done
        # (one call site for both: each inlined copy costs cold-compile time)
        if incoming:
            ended = False
            if ep + 1 < e_hi:
                fp, ended, k, _ = walk_plain(x, seq, stp, fills, fp, f_hi, events, ep + 1, e_hi,
                                             ost, ext, lst, oid, htab, ladder, ladlv, touched,
                                             meta, vrows, vids, counts)
            if not _end_incoming(x, ended, seq, ost, lst, oid, htab, ladder, ladlv, touched,
                                 meta, vrows, vids, counts):
                return NEED_CAPACITY
        for j in range(fp, f_hi):
            _viol(vrows, vids, counts, meta, R_EVENTS, D_FILL_NO_REPORT, seq, z,
                  np.int64(fills[j].trade_id), 0, 0, 0)
        _check_l2(seq, l2, lp, l_hi, lst, ladder, ladlv, touched, meta, vrows, vids, counts)
        _after_message(seq, ts, ladder, meta, vrows, vids, counts)
        fp, lp, ep = f_hi, l_hi, e_hi
        i += 1
    meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
    if final >= FLUSH:
        if fp < nf or lp < nl or ep < ne:   # rows after the last message: check_symbol's
            return NEED_FULL
    if final >= FINAL:
        last = np.int64(orders[i_end - 1].seq) if i_end > 0 else meta[M_LAST_SEQ]
        check_live(last, ost, ext, oid, lst, ladlv, meta, vrows, vids, counts)
    if i_end > 0:
        meta[M_LAST_SEQ] = np.int64(orders[i_end - 1].seq)
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _extra(seq, events, k, e_hi, fills, fp, f_hi, meta, vrows, vids, counts):
    """``kernel._extra``: reports and fills a message should not have (after a cancel or a
    same-price modify). Returns (next fill, next report, no walking order)."""
    z = np.uint64(0)
    for j in range(k, e_hi):
        _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, events[j].order_id,
              np.int64(events[j].event), 0, 0, 0)
    for j in range(fp, f_hi):
        _viol(vrows, vids, counts, meta, R_EVENTS, D_FILL_NO_REPORT, seq, z,
              np.int64(fills[j].trade_id), 0, 0, 0)
    return f_hi, e_hi, np.int64(-1)
