"""The walk of one order through the book: its fills, the resting orders' reports, STP cancels.

Part of the verifier (see ``replay.verification.kernel``, whose message loop calls ``_walk`` for an
incoming order, a MODIFY to a new price and each released stop, then ``_end_incoming``). Every
function here is inlined into the loop (see the kernel's docstring on calls). A walk follows the
stored reports in order and checks each fill against the verifier's own book: the resting order
was live and first in time at the best price (``fifo``; ``icebergs`` for a refilled slice filled
ahead of its level), at its price (``resting_price``) within both limits (``price_limits``),
within both open quantities (``overfill``; ``icebergs`` when only the reserve would cover it),
neither order past its expiry (``expiry``), never a pending stop (``stops``), and no self-trade
under STP. A walk ends at its order's end or where a stop's release begins (``_hands_over``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard

from exsim.replay.verification.book import (
    E_REFILLS, E_RESERVE, L_HEAD, L_PRICE, M_FILLS, M_LAST_PX, M_LAST_TRADE, M_TRADED,
    O_CANCELLED, O_DISPLAY, O_EXPIRE, O_FILLED, O_FILLSUM, O_FLAGS, O_LEAVES, O_LEVEL, O_MARKET,
    O_PRICE, O_SIDE, O_TIF, O_TRADER, _append, _best_level, _detach, _set_leaves, _slot_of,
    _touch,
)
from exsim.replay.verification.rules import (
    D_AGGRESSOR_SIDE, D_CANCEL_REASON, D_FIFO, D_FILLED_EXPIRED, D_FILL_PENDING, D_ICE_FIFO,
    D_ICE_FILL, D_INCOMING_NOT_NAMED, D_LEFT_OPEN, D_LIMIT, D_NO_RESTING_REPORT, D_OVERFILL,
    D_POST_ONLY, D_REPORT_NOT_LIVE, D_REPORT_NO_FILL, D_REPORT_QTY, D_RESTING_NOT_LIVE,
    D_RESTING_PRICE, D_RESTING_REPORT_ORDER, D_RESTING_SAME_SIDE, D_SELF_TRADE, D_STP_FIFO,
    D_STP_TRADERS, D_TRADERS, D_TRADE_ID, D_UNEXPECTED_EVENT, R_EVENTS, R_EXPIRY, R_FIELDS,
    R_FIFO, R_ICE, R_LIMITS, R_LIVE, R_OTYPE, R_OVERFILL, R_RPRICE, R_SIDES, R_STOPS, R_STP,
    R_STREAM, _CANCELLED, _DAY, _FILLED, _FOK, _GTC, _GTD, _IOC_UNFILLED, _NO_LIQUIDITY,
    _OVERFLOW, _PARTIAL, _POST_ONLY, _SELF_TRADE, _STP_BOTH, _STP_NONE, _STP_RESTING,
    _TRIGGERED, _viol,
)
from exsim.replay.verification.orders import (
    _finish, _iceberg_filled, _open, _remove, _split,
)

guard(__name__, __file__, deps=("exsim.replay.verification.book",
                                "exsim.replay.verification.rules",
                                "exsim.replay.verification.orders", "exsim.exchange.schema"))


# ------------------------------------------------------------------ one fill, one walk
@njit(cache=True, _nrt=False, inline="always")
def _check_fill(x, f, seq, ts, stp, ost, ext, lst, oid, htab, ladlv, meta, vrows, vids, counts):
    """Check fill ``f`` of incoming order ``x``; return the resting order's slot (or -1)."""
    xid = oid[x]
    xside = ost[x, O_SIDE]
    q = np.int64(f.qty)
    price = np.int64(f.price)
    z = np.uint64(0)
    if np.int64(f.aggressor_side) != xside:
        _viol(vrows, vids, counts, meta, R_SIDES, D_AGGRESSOR_SIDE, seq, xid,
              np.int64(f.aggressor_side), xside, 0, 0)
    if xside == 0:
        mine, rid = f.buy_order_id, f.sell_order_id
    else:
        mine, rid = f.sell_order_id, f.buy_order_id
    if mine != xid:
        _viol(vrows, vids, counts, meta, R_SIDES, D_INCOMING_NOT_NAMED, seq, xid, 0, 0, 0, 0)
    r = _slot_of(htab, rid)
    if r >= 0 and ost[r, O_LEVEL] < 0:
        r = -1
    if r >= 0 and ost[r, O_SIDE] >= 2:
        _viol(vrows, vids, counts, meta, R_STOPS, D_FILL_PENDING, seq, rid, 0, 0, 0, 0)
        r = -2
    if r == -1:
        _viol(vrows, vids, counts, meta, R_LIVE, D_RESTING_NOT_LIVE, seq, rid, 0, 0, 0, 0)
    elif r >= 0:
        rside = ost[r, O_SIDE]
        rprice = ost[r, O_PRICE]
        if rside == xside:
            _viol(vrows, vids, counts, meta, R_SIDES, D_RESTING_SAME_SIDE, seq, rid, 0, 0, 0, 0)
        lv = ost[r, O_LEVEL]
        best = _best_level(ladlv, meta, rside)
        if lv != best or lst[lv, L_HEAD] != r:
            if lv == best and ost[r, O_DISPLAY] > 0 and ext[r, E_REFILLS] > 0:
                _viol(vrows, vids, counts, meta, R_ICE, D_ICE_FIFO, seq, rid, rprice, 0, 0, 0)
            else:
                _viol(vrows, vids, counts, meta, R_FIFO, D_FIFO, seq, rid, rprice,
                      lst[best, L_PRICE] if best >= 0 else 0, 0, 0)
        if price != rprice:
            _viol(vrows, vids, counts, meta, R_RPRICE, D_RESTING_PRICE, seq, rid, price, rprice,
                  0, 0)
        if (rside == 0 and price > rprice) or (rside == 1 and price < rprice):
            _viol(vrows, vids, counts, meta, R_LIMITS, D_LIMIT, seq, rid, price, rprice, rside, 0)
        if q > ost[r, O_LEAVES]:
            if ost[r, O_DISPLAY] > 0 and q <= _open(ost, ext, r):
                _viol(vrows, vids, counts, meta, R_ICE, D_ICE_FILL, seq, rid, q,
                      ost[r, O_LEAVES], 0, 0)
            else:
                _viol(vrows, vids, counts, meta, R_OVERFILL, D_OVERFILL, seq, rid, q,
                      ost[r, O_LEAVES], 0, 0)
        if ost[r, O_EXPIRE] > 0 and ts >= ost[r, O_EXPIRE]:
            _viol(vrows, vids, counts, meta, R_EXPIRY, D_FILLED_EXPIRED, seq, rid,
                  ost[r, O_EXPIRE], ts, 0, 0)
        bt = ost[x, O_TRADER] if xside == 0 else ost[r, O_TRADER]
        st = ost[r, O_TRADER] if xside == 0 else ost[x, O_TRADER]
        if np.int64(f.buy_trader) != bt or np.int64(f.sell_trader) != st:
            _viol(vrows, vids, counts, meta, R_FIELDS, D_TRADERS, seq, z,
                  np.int64(f.buy_trader), np.int64(f.sell_trader), bt, st)
        if stp != _STP_NONE and ost[r, O_TRADER] == ost[x, O_TRADER]:
            _viol(vrows, vids, counts, meta, R_STP, D_SELF_TRADE, seq, xid, ost[x, O_TRADER],
                  0, 0, 0)
        ost[r, O_FILLSUM] += q
    if r < 0:
        r = -1
    if ost[x, O_MARKET] == 0:
        if (xside == 0 and price > ost[x, O_PRICE]) or (xside == 1 and price < ost[x, O_PRICE]):
            _viol(vrows, vids, counts, meta, R_LIMITS, D_LIMIT, seq, xid, price, ost[x, O_PRICE],
                  xside, 0)
    if q <= 0 or q > ost[x, O_LEAVES]:
        _viol(vrows, vids, counts, meta, R_OVERFILL, D_OVERFILL, seq, xid, q, ost[x, O_LEAVES],
              0, 0)
    if ost[x, O_FLAGS] & _POST_ONLY:
        _viol(vrows, vids, counts, meta, R_OTYPE, D_POST_ONLY, seq, xid, 0, 0, 0, 0)
    if ost[x, O_EXPIRE] > 0 and ts >= ost[x, O_EXPIRE]:
        _viol(vrows, vids, counts, meta, R_EXPIRY, D_FILLED_EXPIRED, seq, xid, ost[x, O_EXPIRE],
              ts, 0, 0)
    ost[x, O_FILLSUM] += q
    tid = np.int64(f.trade_id)
    if tid <= meta[M_LAST_TRADE]:
        _viol(vrows, vids, counts, meta, R_STREAM, D_TRADE_ID, seq, z, tid, meta[M_LAST_TRADE],
              0, 0)
    meta[M_LAST_TRADE] = tid
    meta[M_FILLS] += 1
    # the last trade price moves with every fill: stops are checked against it after each order
    meta[M_LAST_PX] = price
    meta[M_TRADED] = 1
    return r


@njit(cache=True, _nrt=False, inline="always")
def _resting_report(er, r, have, q, seq, ost, ext, lst, oid, htab, ladder, ladlv, touched,
                    meta, vrows, vids, counts):
    """Apply the resting order's PARTIAL/FILLED report ``er`` (paired with fill qty ``q``).
    Returns False when no level slot is free (an iceberg's refill)."""
    rr = _slot_of(htab, er.order_id)
    if rr >= 0 and ost[rr, O_LEVEL] < 0:
        rr = -1
    if rr >= 0 and ost[rr, O_SIDE] >= 2:
        return True    # a pending stop: its fill was flagged (stops) and changes nothing
    if have and r >= 0 and rr != r:
        _viol(vrows, vids, counts, meta, R_EVENTS, D_RESTING_REPORT_ORDER, seq, er.order_id,
              np.int64(oid[r]), 0, 0, 0)
    if rr < 0:
        _viol(vrows, vids, counts, meta, R_LIVE, D_REPORT_NOT_LIVE, seq, er.order_id, 0, 0, 0, 0)
        return True
    f_new, l_new = np.int64(er.filled_qty), np.int64(er.leaves_qty)
    ice = ost[rr, O_DISPLAY] > 0
    if have and rr == r:
        ef, el = ost[rr, O_FILLED] + q, _open(ost, ext, rr) - q
        if f_new != ef or l_new != el or (er.event == _FILLED) != (l_new == 0):
            _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, er.order_id, f_new,
                  l_new, ef, el)
    _touch(touched, lst, ladder, ladlv, meta, ost[rr, O_SIDE], ost[rr, O_PRICE])
    ost[rr, O_FILLED] = f_new
    if l_new <= 0:
        _detach(ost, lst, ladder, ladlv, meta, rr)
        ost[rr, O_LEAVES] = 0
        if ice:    # why not always: see _remove
            ext[rr, E_RESERVE] = 0
        _finish(ost, htab, meta, vrows, vids, counts, seq, rr, er.order_id)
    elif ice:
        return _iceberg_filled(ost, ext, lst, ladder, ladlv, meta, rr,
                               q if have and rr == r else 0, l_new)
    else:
        _set_leaves(ost, lst, rr, l_new)
    return True


@njit(cache=True, _nrt=False, inline="always")
def _hands_over(ev, xid, htab, ost):
    """Whether report ``ev`` ends the walk of order ``xid``: a stop's release (TRIGGERED), or a
    fill report of a stop still pending (released without its TRIGGERED report)."""
    et = ev.event
    if et == _TRIGGERED:
        return True
    if (et == _PARTIAL or et == _FILLED) and ev.order_id != xid:
        s = _slot_of(htab, ev.order_id)
        return s >= 0 and ost[s, O_LEVEL] >= 0 and ost[s, O_SIDE] >= 2
    return False


@njit(cache=True, _nrt=False, inline="always")
def _own_cancel(ev, x, xid, seq, stp, ost, meta, vrows, vids, counts):
    """The walking order ``x``'s own CANCELLED report ``ev``: its quantities, and a reason its
    type, time in force and the STP mode allow (``order_type``); its leaves are cancelled.
    (Shared with ``replay.verification.plain``.)"""
    if ev.leaves_qty != 0 or np.int64(ev.filled_qty) != ost[x, O_FILLED]:
        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, xid,
              np.int64(ev.filled_qty), np.int64(ev.leaves_qty), ost[x, O_FILLED], 0)
    rs = np.int64(ev.reason)
    mk, tif = ost[x, O_MARKET], ost[x, O_TIF]
    if rs == _NO_LIQUIDITY:
        bad = mk == 0
    elif rs == _IOC_UNFILLED:
        bad = mk == 1 or tif == _GTC or tif == _DAY or tif == _GTD
    elif rs == _SELF_TRADE:
        bad = stp == _STP_NONE or stp == _STP_RESTING
    else:
        bad = rs != _OVERFLOW
    if tif == _FOK:
        bad = True   # an accepted FOK always ends FILLED
    if bad:
        _viol(vrows, vids, counts, meta, R_OTYPE, D_CANCEL_REASON, seq, xid, mk, tif, rs, 0)
    ost[x, O_CANCELLED] += ost[x, O_LEAVES]
    ost[x, O_LEAVES] = 0


@njit(cache=True, _nrt=False, inline="always")
def _stp_cancel(ev, r, x, opp, seq, stp, ost, lst, ladlv, meta, vrows, vids, counts):
    """Checks of the STP cancel ``ev`` of live resting order ``r`` met by walking order ``x``:
    it was first at the best opposite price (``fifo``), of the same trader under a mode that
    cancels resting orders (``self_trade``), with its quantities (``events_fills``). The
    caller removes it. (Shared with ``replay.verification.plain``.)"""
    lv = ost[r, O_LEVEL]
    best = _best_level(ladlv, meta, opp)
    if ost[r, O_SIDE] != opp or lv != best or lst[lv, L_HEAD] != r:
        _viol(vrows, vids, counts, meta, R_FIFO, D_STP_FIFO, seq, ev.order_id,
              ost[r, O_PRICE], lst[best, L_PRICE] if best >= 0 else 0, 0, 0)
    if ost[r, O_TRADER] != ost[x, O_TRADER] or not (stp == _STP_RESTING or stp == _STP_BOTH):
        _viol(vrows, vids, counts, meta, R_STP, D_STP_TRADERS, seq, ev.order_id,
              ost[r, O_TRADER], ost[x, O_TRADER], 0, 0)
    if ev.leaves_qty != 0 or np.int64(ev.filled_qty) != ost[r, O_FILLED]:
        _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, ev.order_id,
              np.int64(ev.filled_qty), np.int64(ev.leaves_qty), ost[r, O_FILLED], 0)


# not inlined: the kernel calls it from three places, and three inlined copies of it were half
# of the verify kernel's cold compile (about 85 of 155 CPU seconds)
@njit(cache=True, _nrt=False)
def _walk(x, seq, ts, stp, fills, fp, f_hi, events, k, e_hi, ost, ext, lst, oid, htab, ladder,
          ladlv, touched, meta, vrows, vids, counts):
    """Follow an incoming order's reports from event ``k``: fills, resting reports, STP cancels
    and its own end, up to the release of a stop (see ``_hands_over``). Returns (next fill
    index, whether the order ended, next report index, False when no level slot was free)."""
    xid = oid[x]
    xside = ost[x, O_SIDE]
    opp = 1 - xside
    ended = False
    room = True
    while k < e_hi:
        ev = events[k]
        et = np.int64(ev.event)
        if _hands_over(ev, xid, htab, ost):
            break
        k += 1
        if ended:
            _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, ev.order_id, et,
                  0, 0, 0)
            continue
        if (et == _PARTIAL or et == _FILLED) and ev.order_id == xid:
            q, r, have = np.int64(0), np.int64(-1), False
            if fp < f_hi:
                have = True
                q = np.int64(fills[fp].qty)
                r = _check_fill(x, fills[fp], seq, ts, stp, ost, ext, lst, oid, htab, ladlv,
                                meta, vrows, vids, counts)
                fp += 1
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
                fits = _resting_report(events[k], r, have, q, seq, ost, ext, lst, oid, htab,
                                       ladder, ladlv, touched, meta, vrows, vids, counts)
                room = room and fits
                k += 1
            elif have:
                rid = np.uint64(fills[fp - 1].sell_order_id) if xside == 0 \
                    else np.uint64(fills[fp - 1].buy_order_id)
                _viol(vrows, vids, counts, meta, R_EVENTS, D_NO_RESTING_REPORT, seq, rid, 0, 0,
                      0, 0)
                if r >= 0:   # the deal happened: take its quantity off the resting order
                    _touch(touched, lst, ladder, ladlv, meta, ost[r, O_SIDE], ost[r, O_PRICE])
                    left = _open(ost, ext, r) - q
                    if left <= 0:
                        _detach(ost, lst, ladder, ladlv, meta, r)
                        ost[r, O_LEAVES] = 0
                        ext[r, E_RESERVE] = 0
                        _finish(ost, htab, meta, vrows, vids, counts, seq, r, rid)
                    elif ost[r, O_DISPLAY] > 0:
                        fits = _iceberg_filled(ost, ext, lst, ladder, ladlv, meta, r, q, left)
                        room = room and fits
                    else:
                        _set_leaves(ost, lst, r, left)
            continue
        if et == _CANCELLED and ev.order_id == xid:
            _own_cancel(ev, x, xid, seq, stp, ost, meta, vrows, vids, counts)
            ended = True
            continue
        if et == _CANCELLED and ev.reason == _SELF_TRADE:
            r = _slot_of(htab, ev.order_id)
            if r < 0 or ost[r, O_LEVEL] < 0 or ost[r, O_SIDE] >= 2:
                _viol(vrows, vids, counts, meta, R_LIVE, D_REPORT_NOT_LIVE, seq, ev.order_id, 0,
                      0, 0, 0)
                continue
            _stp_cancel(ev, r, x, opp, seq, stp, ost, lst, ladlv, meta, vrows, vids, counts)
            _remove(ost, ext, lst, htab, ladder, ladlv, touched, meta, vrows, vids, counts, seq,
                    r, ev.order_id)
            continue
        _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, ev.order_id, et, 0, 0,
              0)
    return fp, ended, k, room


@njit(cache=True, _nrt=False, inline="always")
def _follow(x, seq, ts, stp, fills, fp, f_hi, events, k, e_hi, ost, ext, lst, oid, htab, ladder,
            ladlv, touched, meta, vrows, vids, counts):
    """``_walk`` from report ``k``, without calling it when no report is left (a NEW that only
    has its ACCEPTED: it neither traded nor was cancelled). Why: the call passes ~120 words of
    array descriptors on the stack, and most incoming orders have nothing to walk."""
    if k >= e_hi:
        return fp, False, k, True
    return _walk(x, seq, ts, stp, fills, fp, f_hi, events, k, e_hi, ost, ext, lst, oid, htab,
                 ladder, ladlv, touched, meta, vrows, vids, counts)


@njit(cache=True, _nrt=False, inline="always")
def _end_incoming(x, ended, seq, ost, ext, lst, oid, htab, ladder, ladlv, touched, meta, vrows,
                  vids, counts):
    """After its reports: an incoming order rests (a GTC, DAY or GTD limit with quantity left;
    an iceberg showing its first slice) or is done. Returns False when no level slot is free."""
    if ended or ost[x, O_LEAVES] <= 0:
        _finish(ost, htab, meta, vrows, vids, counts, seq, x, oid[x])
        return True
    tif = ost[x, O_TIF]
    if ost[x, O_MARKET] == 1 or not (tif == _GTC or tif == _DAY or tif == _GTD):
        _viol(vrows, vids, counts, meta, R_OTYPE, D_LEFT_OPEN, seq, oid[x], ost[x, O_MARKET],
              tif, 0, 0)
        _finish(ost, htab, meta, vrows, vids, counts, seq, x, oid[x])
        return True
    _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
    _split(ost, ext, x)
    return _append(ost, lst, ladder, ladlv, meta, x)
