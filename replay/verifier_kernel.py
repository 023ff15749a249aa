"""The verification kernel: an independent order book that checks every reported outcome.

This module deliberately imports nothing from ``exchange`` but the schema codes (and the cache
guard, which only deletes stale cache files): it is a second implementation of the book, written
from docs/semantics.md, and it does not decide outcomes. It follows what the stored rows say
happened (fills, execution reports, L2 updates) and checks each against its own book, message by
message, for one symbol at a time:

- book: ``replay.verifier_book`` (slot arena, id hash, FIFO levels, sorted ladders).
- look-ahead: before each message the kernel prefetches the id buckets, order rows and queue
  neighbours that the messages and fills a few rows ahead will touch (``_look_ahead``; a hint
  only, results never depend on it). A deep book's misses otherwise dominate (measured 1.6x).
- calls: every helper on the per-message path is ``inline="always"``; only ``_viol`` (the rare
  violation path, 60 call sites) stays a call. A call passing a dozen arrays pushes ~100 words:
  push instructions were 14% of the kernel's samples. Inlined, the 10 M-message bench run
  verifies in 4.5-5.1 s instead of 6.1-6.2 s (kernel CPU 1.2-1.4x less, fourth session, two
  runs each), for ~21 s more of a cold first compile (48 -> 69 s for a fresh process's first
  verify; the third session had measured only ~7% for doubling the compile and kept the calls).
- state follows the deals: a fill moves quantity between the two orders it names; when an
  execution report disagrees, the violation is recorded and the order is re-synchronised to the
  report, so one defect yields violations at its own seq and not a cascade over later messages.
  ``fillsum`` (quantity summed from fills alone) is never re-synchronised: conservation checks it.

Rule codes (``RULES`` names them, in this order) and detail codes (``DETAILS``) are plain ints;
``replay.verifier`` formats them. Violation rows are (seq, rule, detail, a, b, c, d) + order id.

Caching: numba's cache keys a kernel on this file only, yet the kernels inline the field numbers
and helpers of ``_verify_book`` and freeze ``exchange.schema`` codes; ``exchange._cache_guard.guard``
(called below) deletes this module's cached kernels whenever one of those two files changes.

Limits: capacities are fixed per call; before a message that might not fit, the kernel returns
``NEED_CAPACITY`` and the caller grows the arrays (``grow_state``) and resumes at that message.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exchange._cache_guard import guard
from exchange.schema import Event, Flag, Kind, OrderType, Reason, Stp, Tif

from replay.verifier_book import (
    L_COUNT, L_HEAD, L_PRICE, L_QTY, L_TAIL, M_EP, M_FILLS, M_FINISHED, M_FP, M_FREE_O, M_I,
    M_LAST_SEQ, M_LAST_TRADE, M_LIVE_L, M_LIVE_O, M_LP, M_NA, M_NB, M_NT, M_ORDERS, M_VN, O_CANCELLED,
    O_FILLED, O_FILLSUM, O_FLAGS, O_LEAVES, O_LEVEL, O_MARKET, O_NEXT, O_PRICE, O_SIDE, O_TIF, O_TOTAL, O_TRADER,
    T_COUNT, T_PRICE, T_QTY, T_ROW, T_SIDE, _append, _best_level, _detach, _find_level, _hash_del,
    _hash_put, _prefetch_id, _prefetch_order, _set_leaves, _slot_of, _touch, grow_state,
    new_state as _new_state, prefetch,
)

guard(__name__, __file__, deps=("replay.verifier_book", "exchange.schema"))

__all__ = ["RULES", "DETAILS", "check_symbol", "check_live", "new_state", "grow_state", "OK",
           "NEED_CAPACITY", "M_VN", "M_I", "M_FP", "M_LP", "M_EP", "MORE", "FLUSH", "FINAL"]

OK, NEED_CAPACITY = 0, 1
MORE, FLUSH, FINAL = 0, 1, 2     # check_symbol's ``final``: see there

RULES = ("stream", "row_fields", "order_live", "opposite_sides", "price_limits", "resting_price",
         "fifo", "overfill", "conservation", "l2_totals", "events_fills", "crossed_book",
         "reject", "order_type", "self_trade")
(R_STREAM, R_FIELDS, R_LIVE, R_SIDES, R_LIMITS, R_RPRICE, R_FIFO, R_OVERFILL, R_CONSERVE, R_L2,
 R_EVENTS, R_CROSSED, R_REJECT, R_OTYPE, R_STP) = range(len(RULES))


def new_state(capacity: int, violations: int, level_capacity: int = 256) -> tuple:
    """Fresh checker state (see ``_verify_book.new_state``) with one counter per rule."""
    return _new_state(capacity, violations, len(RULES), level_capacity)


# detail code -> (rule, template over order_id, a, b, c, d); formatted by replay.verifier
DETAILS = (
    (R_STREAM, "a {table} row has seq {seq}, which has no message of this symbol (or is out of order)"),
    (R_STREAM, "trade id {a} does not follow trade id {b}"),
    (R_FIELDS, "a {table} row carries ts {b}, its message has ts {c}"),
    (R_FIELDS, "fill traders (buy {a}, sell {b}) are not the orders' traders ({c}, {d})"),
    (R_EVENTS, "the message has no execution report"),
    (R_EVENTS, "first report is for order {oid}, the message names another order"),
    (R_REJECT, "a rejected message has fills, L2 updates, further reports or quantities"),
    (R_REJECT, "rejected as UNKNOWN_SYMBOL, but the symbol is in the engine"),
    (R_REJECT, "rejected as UNKNOWN_ID, but order {oid} is live"),
    (R_REJECT, "rejected as DUPLICATE_ID, but order {oid} is not live"),
    (R_REJECT, "a message for a symbol the engine does not have was not rejected as such "
               "(event {a}, reason {b})"),
    (R_EVENTS, "first report of a {a} message is event {b}"),
    (R_REJECT, "accepted a NEW whose id {oid} is live"),
    (R_EVENTS, "report of order {oid}: filled {a}, leaves {b}; expected filled {c}, leaves {d}"),
    (R_REJECT, "accepted a cancel/modify of order {oid}, which is not live"),
    (R_EVENTS, "unexpected report (event {a}) for order {oid}"),
    (R_EVENTS, "fill (trade {a}) has no execution report"),
    (R_EVENTS, "report of a fill for order {oid} without a fill row"),
    (R_SIDES, "fill aggressor side {a} is not the incoming order's side {b}"),
    (R_SIDES, "fill does not name the incoming order {oid} on its side"),
    (R_LIVE, "fill names resting order {oid}, which is not live"),
    (R_SIDES, "fill's resting order {oid} is on the incoming order's side"),
    (R_FIFO, "resting order {oid} at {a} filled before the first order at the best price {b}"),
    (R_RPRICE, "fill price {a} is not resting order {oid}'s price {b}"),
    (R_LIMITS, "fill price {a} is outside the {cside} limit {b} of order {oid}"),
    (R_OVERFILL, "fill of {a} exceeds the open quantity {b} of order {oid}"),
    (R_STP, "order {oid} traded with its own trader {a} under self-trade prevention"),
    (R_OTYPE, "post-only order {oid} took liquidity"),
    (R_EVENTS, "resting report names order {oid}, the fill names {ua}"),
    (R_LIVE, "report for order {oid}, which is not live"),
    (R_EVENTS, "fill against order {oid} has no resting report"),
    (R_FIFO, "self-trade cancel of order {oid} at {a}, not the first order at the best price {b}"),
    (R_STP, "self-trade cancel of order {oid}: traders {a} and {b} differ or STP is off"),
    (R_OTYPE, "order {oid} (market {a}, tif {b}) was cancelled with reason {c}"),
    (R_OTYPE, "order {oid} (market {a}, tif {b}) was left open instead of cancelled"),
    (R_CONSERVE, "order {oid}: filled {a} + cancelled {b} + leaves {c} != quantity {d}"),
    (R_L2, "L2 row {aside} {b}: qty {c}, the resting orders sum to {d}"),
    (R_L2, "L2 row {aside} {b}: count {c}, the level holds {d} orders"),
    (R_L2, "level {aside} {b} changed (now qty {c}) without an L2 row"),
    (R_CROSSED, "book crossed after the message: best bid {a} >= best ask {b}"),
    (R_STREAM, "L2 row with side {a}"),
    (R_REJECT, "accepted a message with an invalid kind or side ({a})"),
)
(D_ROW_NO_MSG, D_TRADE_ID, D_TS, D_TRADERS, D_NO_EVENT, D_FIRST_WRONG_ORDER, D_REJECT_EFFECTS,
 D_REJ_UNKNOWN_SYMBOL, D_REJ_UNKNOWN_ID, D_REJ_DUPLICATE, D_UNKNOWN_SYMBOL_NOT_REJECTED,
 D_BAD_FIRST_EVENT, D_DUPLICATE_ACCEPTED, D_REPORT_QTY, D_NOT_LIVE_ACCEPTED, D_UNEXPECTED_EVENT,
 D_FILL_NO_REPORT, D_REPORT_NO_FILL, D_AGGRESSOR_SIDE, D_INCOMING_NOT_NAMED, D_RESTING_NOT_LIVE,
 D_RESTING_SAME_SIDE, D_FIFO, D_RESTING_PRICE, D_LIMIT, D_OVERFILL, D_SELF_TRADE, D_POST_ONLY,
 D_RESTING_REPORT_ORDER, D_REPORT_NOT_LIVE, D_NO_RESTING_REPORT, D_STP_FIFO, D_STP_TRADERS,
 D_CANCEL_REASON, D_LEFT_OPEN, D_CONSERVE, D_L2_QTY, D_L2_COUNT, D_L2_MISSING, D_CROSSED,
 D_L2_SIDE, D_BAD_FIELD_ACCEPTED) = range(len(DETAILS))

_ACCEPTED, _REJECTED, _PARTIAL, _FILLED, _CANCELLED, _MODIFIED = (
    int(Event.ACCEPTED), int(Event.REJECTED), int(Event.PARTIAL), int(Event.FILLED),
    int(Event.CANCELLED), int(Event.MODIFIED))
_NEW, _CANCEL, _MODIFY = int(Kind.NEW), int(Kind.CANCEL), int(Kind.MODIFY)
_MARKET, _GTC = int(OrderType.MARKET), int(Tif.GTC)
_POST_ONLY = int(Flag.POST_ONLY)
_UNKNOWN_SYMBOL, _UNKNOWN_ID, _DUPLICATE_ID, _BAD_KIND = (
    int(Reason.UNKNOWN_SYMBOL), int(Reason.UNKNOWN_ID), int(Reason.DUPLICATE_ID),
    int(Reason.BAD_KIND))
_NO_LIQUIDITY, _IOC_UNFILLED, _SELF_TRADE = (
    int(Reason.NO_LIQUIDITY), int(Reason.IOC_UNFILLED), int(Reason.SELF_TRADE))
_STP_NONE, _STP_RESTING, _STP_BOTH = int(Stp.NONE), int(Stp.CANCEL_RESTING), int(Stp.CANCEL_BOTH)

@njit(cache=True, _nrt=False)
def _viol(vrows, vids, counts, meta, rule_detail_rule, detail, seq, oid, a, b, c, d):
    counts[rule_detail_rule] += 1
    vn = meta[M_VN]
    if vn < vrows.shape[0]:
        vrows[vn, 0] = seq
        vrows[vn, 1] = rule_detail_rule
        vrows[vn, 2] = detail
        vrows[vn, 3] = a
        vrows[vn, 4] = b
        vrows[vn, 5] = c
        vrows[vn, 6] = d
        vids[vn] = oid
    meta[M_VN] = vn + 1


@njit(cache=True, _nrt=False, inline="always")
def _finish(ost, htab, meta, vrows, vids, counts, seq, s, key):
    """Order ``key`` (in row ``s``) left the book for good: check its quantities, free its row.

    Why the caller passes the id: it just looked the order up by it, and ``oid[s]`` of a
    resting order would be one more cache miss (the look-ahead no longer fetches it)."""
    if ost[s, O_FILLSUM] + ost[s, O_CANCELLED] + ost[s, O_LEAVES] != ost[s, O_TOTAL]:
        _viol(vrows, vids, counts, meta, R_CONSERVE, D_CONSERVE, seq, key, ost[s, O_FILLSUM],
              ost[s, O_CANCELLED], ost[s, O_LEAVES], ost[s, O_TOTAL])
    _hash_del(htab, key)
    ost[s, O_NEXT] = meta[M_FREE_O]
    ost[s, O_LEVEL] = -1
    meta[M_FREE_O] = s
    meta[M_FINISHED] += 1
    meta[M_LIVE_O] -= 1


# ------------------------------------------------------------------ one fill, one walk
@njit(cache=True, _nrt=False, inline="always")
def _check_fill(x, f, seq, stp, ost, lst, oid, htab, ladlv, meta, vrows, vids, counts):
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
    if r < 0:
        _viol(vrows, vids, counts, meta, R_LIVE, D_RESTING_NOT_LIVE, seq, rid, 0, 0, 0, 0)
    else:
        rside = ost[r, O_SIDE]
        rprice = ost[r, O_PRICE]
        if rside == xside:
            _viol(vrows, vids, counts, meta, R_SIDES, D_RESTING_SAME_SIDE, seq, rid, 0, 0, 0, 0)
        lv = ost[r, O_LEVEL]
        best = _best_level(ladlv, meta, rside)
        if lv != best or lst[lv, L_HEAD] != r:
            _viol(vrows, vids, counts, meta, R_FIFO, D_FIFO, seq, rid, rprice,
                  lst[best, L_PRICE] if best >= 0 else 0, 0, 0)
        if price != rprice:
            _viol(vrows, vids, counts, meta, R_RPRICE, D_RESTING_PRICE, seq, rid, price, rprice,
                  0, 0)
        if (rside == 0 and price > rprice) or (rside == 1 and price < rprice):
            _viol(vrows, vids, counts, meta, R_LIMITS, D_LIMIT, seq, rid, price, rprice, rside, 0)
        if q > ost[r, O_LEAVES]:
            _viol(vrows, vids, counts, meta, R_OVERFILL, D_OVERFILL, seq, rid, q,
                  ost[r, O_LEAVES], 0, 0)
        bt = ost[x, O_TRADER] if xside == 0 else ost[r, O_TRADER]
        st = ost[r, O_TRADER] if xside == 0 else ost[x, O_TRADER]
        if np.int64(f.buy_trader) != bt or np.int64(f.sell_trader) != st:
            _viol(vrows, vids, counts, meta, R_FIELDS, D_TRADERS, seq, z,
                  np.int64(f.buy_trader), np.int64(f.sell_trader), bt, st)
        if stp != _STP_NONE and ost[r, O_TRADER] == ost[x, O_TRADER]:
            _viol(vrows, vids, counts, meta, R_STP, D_SELF_TRADE, seq, xid, ost[x, O_TRADER],
                  0, 0, 0)
        ost[r, O_FILLSUM] += q
    if ost[x, O_MARKET] == 0:
        if (xside == 0 and price > ost[x, O_PRICE]) or (xside == 1 and price < ost[x, O_PRICE]):
            _viol(vrows, vids, counts, meta, R_LIMITS, D_LIMIT, seq, xid, price, ost[x, O_PRICE],
                  xside, 0)
    if q <= 0 or q > ost[x, O_LEAVES]:
        _viol(vrows, vids, counts, meta, R_OVERFILL, D_OVERFILL, seq, xid, q, ost[x, O_LEAVES],
              0, 0)
    if ost[x, O_FLAGS] & _POST_ONLY:
        _viol(vrows, vids, counts, meta, R_OTYPE, D_POST_ONLY, seq, xid, 0, 0, 0, 0)
    ost[x, O_FILLSUM] += q
    tid = np.int64(f.trade_id)
    if tid <= meta[M_LAST_TRADE]:
        _viol(vrows, vids, counts, meta, R_STREAM, D_TRADE_ID, seq, z, tid, meta[M_LAST_TRADE],
              0, 0)
    meta[M_LAST_TRADE] = tid
    meta[M_FILLS] += 1
    return r


@njit(cache=True, _nrt=False, inline="always")
def _resting_report(er, r, have, q, seq, ost, lst, oid, htab, ladder, ladlv, touched,
                    meta, vrows, vids, counts):
    """Apply the resting order's PARTIAL/FILLED report ``er`` (paired with fill qty ``q``)."""
    rr = _slot_of(htab, er.order_id)
    if rr >= 0 and ost[rr, O_LEVEL] < 0:
        rr = -1
    if have and r >= 0 and rr != r:
        _viol(vrows, vids, counts, meta, R_EVENTS, D_RESTING_REPORT_ORDER, seq, er.order_id,
              np.int64(oid[r]), 0, 0, 0)
    if rr < 0:
        _viol(vrows, vids, counts, meta, R_LIVE, D_REPORT_NOT_LIVE, seq, er.order_id, 0, 0, 0, 0)
        return
    f_new, l_new = np.int64(er.filled_qty), np.int64(er.leaves_qty)
    if have and rr == r:
        ef, el = ost[rr, O_FILLED] + q, ost[rr, O_LEAVES] - q
        if f_new != ef or l_new != el or (er.event == _FILLED) != (l_new == 0):
            _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, er.order_id, f_new,
                  l_new, ef, el)
    _touch(touched, lst, ladder, ladlv, meta, ost[rr, O_SIDE], ost[rr, O_PRICE])
    ost[rr, O_FILLED] = f_new
    if l_new <= 0:
        _detach(ost, lst, ladder, ladlv, meta, rr)
        ost[rr, O_LEAVES] = 0
        _finish(ost, htab, meta, vrows, vids, counts, seq, rr, er.order_id)
    else:
        _set_leaves(ost, lst, rr, l_new)


@njit(cache=True, _nrt=False, inline="always")
def _walk(x, seq, stp, fills, fp, f_hi, events, k, e_hi, ost, lst, oid, htab, ladder,
          ladlv, touched, meta, vrows, vids, counts):
    """Follow an incoming order's reports from event ``k``: fills, resting reports, STP cancels
    and its own end. Returns (next fill index, whether the order ended)."""
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
                q = np.int64(fills[fp].qty)
                r = _check_fill(x, fills[fp], seq, stp, ost, lst, oid, htab, ladlv, meta,
                                vrows, vids, counts)
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
                _resting_report(events[k], r, have, q, seq, ost, lst, oid, htab, ladder,
                                ladlv, touched, meta, vrows, vids, counts)
                k += 1
            elif have:
                rid = np.uint64(fills[fp - 1].sell_order_id) if xside == 0 \
                    else np.uint64(fills[fp - 1].buy_order_id)
                _viol(vrows, vids, counts, meta, R_EVENTS, D_NO_RESTING_REPORT, seq, rid, 0, 0,
                      0, 0)
                if r >= 0:   # the deal happened: take its quantity off the resting order
                    _touch(touched, lst, ladder, ladlv, meta, ost[r, O_SIDE], ost[r, O_PRICE])
                    left = ost[r, O_LEAVES] - q
                    if left <= 0:
                        _detach(ost, lst, ladder, ladlv, meta, r)
                        ost[r, O_LEAVES] = 0
                        _finish(ost, htab, meta, vrows, vids, counts, seq, r, rid)
                    else:
                        _set_leaves(ost, lst, r, left)
            continue
        if et == _CANCELLED and ev.order_id == xid:
            if ev.leaves_qty != 0 or np.int64(ev.filled_qty) != ost[x, O_FILLED]:
                _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, xid,
                      np.int64(ev.filled_qty), np.int64(ev.leaves_qty), ost[x, O_FILLED], 0)
            rs = np.int64(ev.reason)
            mk, tif = ost[x, O_MARKET], ost[x, O_TIF]
            if rs == _NO_LIQUIDITY:
                bad = mk == 0
            elif rs == _IOC_UNFILLED:
                bad = mk == 1 or tif == _GTC
            elif rs == _SELF_TRADE:
                bad = stp == _STP_NONE or stp == _STP_RESTING
            else:
                bad = rs != np.int64(Reason.OVERFLOW)
            if tif == np.int64(Tif.FOK):
                bad = True   # an accepted FOK always ends FILLED
            if bad:
                _viol(vrows, vids, counts, meta, R_OTYPE, D_CANCEL_REASON, seq, xid, mk, tif, rs,
                      0)
            ost[x, O_CANCELLED] += ost[x, O_LEAVES]
            ost[x, O_LEAVES] = 0
            ended = True
            continue
        if et == _CANCELLED and ev.reason == _SELF_TRADE:
            r = _slot_of(htab, ev.order_id)
            if r < 0 or ost[r, O_LEVEL] < 0:
                _viol(vrows, vids, counts, meta, R_LIVE, D_REPORT_NOT_LIVE, seq, ev.order_id, 0,
                      0, 0, 0)
                continue
            lv = ost[r, O_LEVEL]
            best = _best_level(ladlv, meta, opp)
            if ost[r, O_SIDE] != opp or lv != best or lst[lv, L_HEAD] != r:
                _viol(vrows, vids, counts, meta, R_FIFO, D_STP_FIFO, seq, ev.order_id,
                      ost[r, O_PRICE], lst[best, L_PRICE] if best >= 0 else 0, 0, 0)
            if ost[r, O_TRADER] != ost[x, O_TRADER] or not (stp == _STP_RESTING
                                                           or stp == _STP_BOTH):
                _viol(vrows, vids, counts, meta, R_STP, D_STP_TRADERS, seq, ev.order_id,
                      ost[r, O_TRADER], ost[x, O_TRADER], 0, 0)
            if ev.leaves_qty != 0 or np.int64(ev.filled_qty) != ost[r, O_FILLED]:
                _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, ev.order_id,
                      np.int64(ev.filled_qty), np.int64(ev.leaves_qty), ost[r, O_FILLED], 0)
            _touch(touched, lst, ladder, ladlv, meta, ost[r, O_SIDE], ost[r, O_PRICE])
            _detach(ost, lst, ladder, ladlv, meta, r)
            ost[r, O_CANCELLED] += ost[r, O_LEAVES]
            ost[r, O_LEAVES] = 0
            _finish(ost, htab, meta, vrows, vids, counts, seq, r, ev.order_id)
            continue
        _viol(vrows, vids, counts, meta, R_EVENTS, D_UNEXPECTED_EVENT, seq, ev.order_id, et, 0, 0,
              0)
    while fp < f_hi:
        _viol(vrows, vids, counts, meta, R_EVENTS, D_FILL_NO_REPORT, seq, z,
              np.int64(fills[fp].trade_id), 0, 0, 0)
        fp += 1
    return fp, ended


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
def _look_ahead(orders, i, i_end, fills, fp, nf, ost, lst, oid, htab, ladder, ladlv, meta):
    """Prefetch what the messages (and fills) a few rows ahead will touch (no effect on results)."""
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
    if fp + PF_ID < nf:
        _prefetch_id(htab, _resting_id(fills, fp + PF_ID))
    if fp + PF_ROW < nf:
        _prefetch_order(ost, oid, htab, _resting_id(fills, fp + PF_ROW), False)
    if fp + PF_NEXT < nf:
        _prefetch_order(ost, oid, htab, _resting_id(fills, fp + PF_NEXT), True)

@njit(cache=True, _nrt=False, inline="always")
def _end_incoming(x, ended, seq, ost, lst, oid, htab, ladder, ladlv, touched, meta, vrows,
                  vids, counts):
    """After its reports: an incoming order rests (GTC limit with quantity left) or is done.
    Returns False when no level slot is free."""
    if ended or ost[x, O_LEAVES] <= 0:
        _finish(ost, htab, meta, vrows, vids, counts, seq, x, oid[x])
        return True
    if ost[x, O_MARKET] == 1 or ost[x, O_TIF] != _GTC:
        _viol(vrows, vids, counts, meta, R_OTYPE, D_LEFT_OPEN, seq, oid[x], ost[x, O_MARKET],
              ost[x, O_TIF], 0, 0)
        _finish(ost, htab, meta, vrows, vids, counts, seq, x, oid[x])
        return True
    _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
    return _append(ost, lst, ladder, ladlv, meta, x)


@njit(cache=True, _nrt=False, inline="always")
def _check_l2(seq, l2, lp, l_hi, lst, ladder, ladlv, touched, meta, vrows, vids, counts):
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
    for t in range(nt):
        if touched[t, T_ROW] == 0:
            side, price = touched[t, T_SIDE], touched[t, T_PRICE]
            lv = _find_level(ladder, ladlv, meta, side, price)
            q = lst[lv, L_QTY] if lv >= 0 else 0
            c = lst[lv, L_COUNT] if lv >= 0 else 0
            if q != touched[t, T_QTY] or c != touched[t, T_COUNT]:
                _viol(vrows, vids, counts, meta, R_L2, D_L2_MISSING, seq, z, side, price, q, 0)


@njit(cache=True, _nrt=False, nogil=True)
def check_symbol(orders, fills, l2, events, i_end, known, stp, final, ost, lst, oid, htab,
                 ladder, ladlv, touched, meta, vrows, vids, counts):
    """Check the messages ``meta[M_I]..i_end-1`` of one symbol and their output rows.

    orders/fills/l2/events are the symbol's stored rows in seq order. State persists in the
    arrays between calls (so the caller can show progress, or pass the next seq range's rows,
    with ``meta[M_I]``, ``M_FP``, ``M_LP``, ``M_EP`` reset to 0). ``final``: 0 for a call more
    rows of the same arrays follow; FLUSH when these arrays end (rows left after their last
    message have no message); FINAL at the run's end (FLUSH, then the quantities of the orders
    still live). Returns OK or NEED_CAPACITY. Releases the GIL, so a caller can read the next
    rows meanwhile.
    """
    nf, nl, ne = fills.size, l2.size, events.size
    i, fp, lp, ep = meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP]
    z = np.uint64(0)
    while i < i_end:
        # why here: a message needs at most one new order slot and one new level; checking
        # before it starts lets the caller grow the arrays and resume at this very message
        if meta[M_LIVE_O] + 2 > ost.shape[0] or meta[M_LIVE_L] + 2 > lst.shape[0]:
            meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
            return NEED_CAPACITY
        _look_ahead(orders, i, i_end, fills, fp, nf, ost, lst, oid, htab, ladder, ladlv, meta)
        m = orders[i]
        seq, ts = np.int64(m.seq), np.int64(m.ts)
        while fp < nf and fills[fp].seq < seq:
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(fills[fp].seq), z,
                  0, 0, 0, 0)
            fp += 1
        while lp < nl and l2[lp].seq < seq:
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(l2[lp].seq), z, 1,
                  0, 0, 0)
            lp += 1
        while ep < ne and events[ep].seq < seq:
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(events[ep].seq), z,
                  2, 0, 0, 0)
            ep += 1
        f_hi, l_hi, e_hi = fp, lp, ep
        while f_hi < nf and fills[f_hi].seq == seq:
            if fills[f_hi].ts != ts:
                _viol(vrows, vids, counts, meta, R_FIELDS, D_TS, seq, z, 0,
                      np.int64(fills[f_hi].ts), ts, 0)
            f_hi += 1
        while l_hi < nl and l2[l_hi].seq == seq:
            if l2[l_hi].ts != ts:
                _viol(vrows, vids, counts, meta, R_FIELDS, D_TS, seq, z, 1,
                      np.int64(l2[l_hi].ts), ts, 0)
            l_hi += 1
        while e_hi < ne and events[e_hi].seq == seq:
            if events[e_hi].ts != ts:
                _viol(vrows, vids, counts, meta, R_FIELDS, D_TS, seq, z, 2,
                      np.int64(events[e_hi].ts), ts, 0)
            e_hi += 1
        meta[M_NT] = 0
        meta[M_ORDERS] += 1
        kind = np.int64(m.kind)
        if e_hi == ep:
            _viol(vrows, vids, counts, meta, R_EVENTS, D_NO_EVENT, seq, m.order_id, 0, 0, 0, 0)
        else:
            ev0 = events[ep]
            et = np.int64(ev0.event)
            if ev0.order_id != m.order_id:
                _viol(vrows, vids, counts, meta, R_EVENTS, D_FIRST_WRONG_ORDER, seq, ev0.order_id,
                      0, 0, 0, 0)
            x = _slot_of(htab, m.order_id)
            if et == _REJECTED:
                rs = np.int64(ev0.reason)
                if e_hi - ep != 1 or f_hi != fp or l_hi != lp or ev0.filled_qty != 0 \
                        or ev0.leaves_qty != 0:
                    _viol(vrows, vids, counts, meta, R_REJECT, D_REJECT_EFFECTS, seq, m.order_id,
                          0, 0, 0, 0)
                if not known:
                    if rs != _UNKNOWN_SYMBOL and rs != _BAD_KIND:
                        _viol(vrows, vids, counts, meta, R_REJECT, D_UNKNOWN_SYMBOL_NOT_REJECTED,
                              seq, m.order_id, et, rs, 0, 0)
                elif rs == _UNKNOWN_SYMBOL:
                    _viol(vrows, vids, counts, meta, R_REJECT, D_REJ_UNKNOWN_SYMBOL, seq,
                          m.order_id, 0, 0, 0, 0)
                elif rs == _UNKNOWN_ID and (kind == _CANCEL or kind == _MODIFY) and x >= 0:
                    _viol(vrows, vids, counts, meta, R_REJECT, D_REJ_UNKNOWN_ID, seq, m.order_id,
                          0, 0, 0, 0)
                elif rs == _DUPLICATE_ID and kind == _NEW and x < 0:
                    _viol(vrows, vids, counts, meta, R_REJECT, D_REJ_DUPLICATE, seq, m.order_id,
                          0, 0, 0, 0)
            elif not known:
                _viol(vrows, vids, counts, meta, R_REJECT, D_UNKNOWN_SYMBOL_NOT_REJECTED, seq,
                      m.order_id, et, np.int64(ev0.reason), 0, 0)
            elif kind > 2 or (kind == _NEW and m.side > 1):
                _viol(vrows, vids, counts, meta, R_REJECT, D_BAD_FIELD_ACCEPTED, seq, m.order_id,
                      kind, 0, 0, 0)
            elif (kind == _NEW and et != _ACCEPTED) or (kind == _CANCEL and et != _CANCELLED) \
                    or (kind == _MODIFY and et != _MODIFIED):
                _viol(vrows, vids, counts, meta, R_EVENTS, D_BAD_FIRST_EVENT, seq, ev0.order_id,
                      kind, et, 0, 0)
            elif kind == _NEW:
                if x >= 0:
                    _viol(vrows, vids, counts, meta, R_REJECT, D_DUPLICATE_ACCEPTED, seq,
                          m.order_id, 0, 0, 0, 0)
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
                    ost[x, O_SIDE] = np.int64(m.side)
                    ost[x, O_MARKET] = 1 if m.order_type == _MARKET else 0
                    ost[x, O_PRICE] = 0 if m.order_type == _MARKET else np.int64(m.price)
                    ost[x, O_LEAVES] = qty
                    ost[x, O_FILLED] = 0
                    ost[x, O_FILLSUM] = 0
                    ost[x, O_TOTAL] = qty
                    ost[x, O_CANCELLED] = 0
                    ost[x, O_TRADER] = np.int64(m.trader)
                    ost[x, O_FLAGS] = np.int64(m.flags)
                    ost[x, O_TIF] = np.int64(m.tif)
                    ost[x, O_LEVEL] = -1
                    _hash_put(htab, m.order_id, x)
                    fp2, ended = _walk(x, seq, stp, fills, fp, f_hi, events, ep + 1, e_hi, ost,
                                       lst, oid, htab, ladder, ladlv, touched, meta, vrows,
                                       vids, counts)
                    if not _end_incoming(x, ended, seq, ost, lst, oid, htab, ladder, ladlv,
                                         touched, meta, vrows, vids, counts):
                        return NEED_CAPACITY
            elif x < 0 or ost[x, O_LEVEL] < 0:
                _viol(vrows, vids, counts, meta, R_REJECT, D_NOT_LIVE_ACCEPTED, seq, m.order_id,
                      0, 0, 0, 0)
            elif kind == _CANCEL:
                if ev0.leaves_qty != 0 or np.int64(ev0.filled_qty) != ost[x, O_FILLED]:
                    _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                          np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty), ost[x, O_FILLED],
                          0)
                _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
                _detach(ost, lst, ladder, ladlv, meta, x)
                ost[x, O_CANCELLED] += ost[x, O_LEAVES]
                ost[x, O_LEAVES] = 0
                _finish(ost, htab, meta, vrows, vids, counts, seq, x, m.order_id)
                _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids, counts)
            else:   # MODIFY of a live order
                q = np.int64(m.qty)
                if ev0.leaves_qty != q or np.int64(ev0.filled_qty) != ost[x, O_FILLED]:
                    _viol(vrows, vids, counts, meta, R_EVENTS, D_REPORT_QTY, seq, m.order_id,
                          np.int64(ev0.filled_qty), np.int64(ev0.leaves_qty), ost[x, O_FILLED], q)
                old = ost[x, O_LEAVES]
                _touch(touched, lst, ladder, ladlv, meta, ost[x, O_SIDE], ost[x, O_PRICE])
                ost[x, O_TOTAL] += q - old
                if np.int64(m.price) == ost[x, O_PRICE]:
                    if q > old:   # more quantity loses priority: to the back of the level
                        _detach(ost, lst, ladder, ladlv, meta, x)
                        ost[x, O_LEAVES] = q
                        if not _append(ost, lst, ladder, ladlv, meta, x):
                            return NEED_CAPACITY
                    else:
                        _set_leaves(ost, lst, x, q)
                    _extra(seq, events, ep + 1, e_hi, fills, fp, f_hi, meta, vrows, vids, counts)
                else:         # a new price: out of the book, then handled as an incoming GTC
                    _detach(ost, lst, ladder, ladlv, meta, x)
                    ost[x, O_LEAVES] = q
                    ost[x, O_PRICE] = np.int64(m.price)
                    ost[x, O_MARKET] = 0
                    ost[x, O_TIF] = _GTC
                    fp2, ended = _walk(x, seq, stp, fills, fp, f_hi, events, ep + 1, e_hi, ost,
                                       lst, oid, htab, ladder, ladlv, touched, meta, vrows,
                                       vids, counts)
                    if not _end_incoming(x, ended, seq, ost, lst, oid, htab, ladder, ladlv,
                                         touched, meta, vrows, vids, counts):
                        return NEED_CAPACITY
        _check_l2(seq, l2, lp, l_hi, lst, ladder, ladlv, touched, meta, vrows, vids, counts)
        nb, na = meta[M_NB], meta[M_NA]
        if nb > 0 and na > 0 and ladder[0, nb - 1] >= -ladder[1, na - 1]:
            _viol(vrows, vids, counts, meta, R_CROSSED, D_CROSSED, seq, z, ladder[0, nb - 1],
                  -ladder[1, na - 1], 0, 0)
        fp, lp, ep = f_hi, l_hi, e_hi
        i += 1
    meta[M_I], meta[M_FP], meta[M_LP], meta[M_EP] = i, fp, lp, ep
    if final >= FLUSH:
        for j in range(fp, nf):
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(fills[j].seq), z, 0,
                  0, 0, 0)
        for j in range(lp, nl):
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(l2[j].seq), z, 1,
                  0, 0, 0)
        for j in range(ep, ne):
            _viol(vrows, vids, counts, meta, R_STREAM, D_ROW_NO_MSG, np.int64(events[j].seq), z,
                  2, 0, 0, 0)
    if final >= FINAL:
        last = np.int64(orders[i_end - 1].seq) if i_end > 0 else meta[M_LAST_SEQ]
        check_live(last, ost, oid, meta, vrows, vids, counts)
    if i_end > 0:
        meta[M_LAST_SEQ] = np.int64(orders[i_end - 1].seq)
    return OK


@njit(cache=True, _nrt=False)
def check_live(seq, ost, oid, meta, vrows, vids, counts):
    """Quantities of the orders still resting at the end of the run must balance too.

    Why a scan of every row rather than a walk of the queues: rows not resting have O_LEVEL
    -1, and a sequential scan streams memory where a queue walk misses the cache per order
    (millions of live orders at the end of a long run)."""
    for s in range(ost.shape[0]):
        if ost[s, O_LEVEL] >= 0 and \
                ost[s, O_FILLSUM] + ost[s, O_CANCELLED] + ost[s, O_LEAVES] != ost[s, O_TOTAL]:
            _viol(vrows, vids, counts, meta, R_CONSERVE, D_CONSERVE, seq, oid[s],
                  ost[s, O_FILLSUM], ost[s, O_CANCELLED], ost[s, O_LEAVES], ost[s, O_TOTAL])

