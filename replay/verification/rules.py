"""The verifier's rule codes, violation details and the one function that records a violation.

Shared by ``replay.verification.kernel`` (the message loop and the checks of plain orders) and
``replay.verification.orders`` (stops, icebergs, expiry, ownership, tick tables and lots). Rules
(``RULES``) and details (``DETAILS``) are plain ints, so the kernels pass them without objects;
``replay.verification.symbol`` formats a violation row (seq, rule, detail, a, b, c, d) + order
id with its detail's template. Codes are appended, never renumbered (a report names rules by name).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.schema import Event, Flag, Kind, OrderType, Reason, Stp, Tif

from exsim.replay.verification.book import M_VN

guard(__name__, __file__, deps=("exsim.replay.verification.book", "exsim.exchange.schema"))

RULES = ("stream", "row_fields", "order_live", "opposite_sides", "price_limits", "resting_price",
         "fifo", "overfill", "conservation", "l2_totals", "events_fills", "crossed_book",
         "reject", "order_type", "self_trade", "ownership", "stops", "icebergs", "expiry",
         "tick_lot", "min_qty",
         # checked by replay.verification.phases and .auctions (phases, auctions, bands), not
         # by the kernels
         "phase", "trade_in_call", "auction_price", "auction_allocation", "indicative", "band")
(R_STREAM, R_FIELDS, R_LIVE, R_SIDES, R_LIMITS, R_RPRICE, R_FIFO, R_OVERFILL, R_CONSERVE, R_L2,
 R_EVENTS, R_CROSSED, R_REJECT, R_OTYPE, R_STP, R_OWNER, R_STOPS, R_ICE, R_EXPIRY,
 R_TICK, R_MIN_QTY, R_PHASE, R_TRADE_IN_CALL, R_AUCTION_PRICE, R_AUCTION_ALLOCATION,
 R_INDICATIVE, R_BAND) = range(len(RULES))


# detail code -> (rule, template over order_id, a, b, c, d); formatted by
# replay.verification.symbol
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
    (R_OWNER, "order {oid} of trader {b} was cancelled or modified by trader {a}"),
    (R_OWNER, "rejected as NOT_OWNER, but trader {a} owns order {oid} or ownership is off"),
    (R_STOPS, "fill against order {oid}, a stop still pending (no TRIGGERED event yet)"),
    (R_STOPS, "order {oid} filled before its TRIGGERED event"),
    (R_STOPS, "TRIGGERED for order {oid}, which is not a pending stop"),
    (R_STOPS, "stop {oid} ({cside}, stop price {a}) triggered, but the last trade price is {b}"
              " (traded: {d})"),
    (R_STOPS, "stop {oid} released out of order: the documented order releases {ua} next"),
    (R_STOPS, "stop {oid} ({cside}, stop price {a}) still pending after the last trade at {b}"),
    (R_STOPS, "stop {oid} accepted at stop price {a}, already reached by the last trade at {b}"),
    (R_ICE, "fill of {a} against iceberg order {oid}, which shows only {b}"),
    (R_ICE, "L2 row {aside} {b}: qty {c} shows more than the display sizes allow ({d})"),
    (R_ICE, "refilled slice of iceberg order {oid} at {a} filled before the orders queued ahead "
            "of it"),
    (R_EXPIRY, "order {oid} filled at ts {b}, at or after its expiry {a}"),
    (R_EXPIRY, "order {oid} expired at ts {b}, before its expiry {a} (0: it has none)"),
    (R_EXPIRY, "order {oid} (expiry {a}) expired late: it was still live at ts {b}"),
    (R_EXPIRY, "expiry of order {oid} (expiry {b}) out of order after order {ua} (expiry {c})"),
    (R_EXPIRY, "EXPIRED cancel of order {oid}, which is not live"),
    (R_EXPIRY, "order {oid} cancelled or modified at ts {b}, at or after its expiry {a}"),
    (R_EXPIRY, "order {oid} (expiry {a}) is still live at the symbol's last ts {b}"),
    (R_TICK, "accepted order {oid}: price {a} or stop price {b} off the tick table, or qty {c} "
             "off lot {d} or below the minimum"),
    (R_MIN_QTY, "accepted order {oid} with minimum quantity {a} filled only {b} on entry"),
)
(D_ROW_NO_MSG, D_TRADE_ID, D_TS, D_TRADERS, D_NO_EVENT, D_FIRST_WRONG_ORDER, D_REJECT_EFFECTS,
 D_REJ_UNKNOWN_SYMBOL, D_REJ_UNKNOWN_ID, D_REJ_DUPLICATE, D_UNKNOWN_SYMBOL_NOT_REJECTED,
 D_BAD_FIRST_EVENT, D_DUPLICATE_ACCEPTED, D_REPORT_QTY, D_NOT_LIVE_ACCEPTED, D_UNEXPECTED_EVENT,
 D_FILL_NO_REPORT, D_REPORT_NO_FILL, D_AGGRESSOR_SIDE, D_INCOMING_NOT_NAMED, D_RESTING_NOT_LIVE,
 D_RESTING_SAME_SIDE, D_FIFO, D_RESTING_PRICE, D_LIMIT, D_OVERFILL, D_SELF_TRADE, D_POST_ONLY,
 D_RESTING_REPORT_ORDER, D_REPORT_NOT_LIVE, D_NO_RESTING_REPORT, D_STP_FIFO, D_STP_TRADERS,
 D_CANCEL_REASON, D_LEFT_OPEN, D_CONSERVE, D_L2_QTY, D_L2_COUNT, D_L2_MISSING, D_CROSSED,
 D_L2_SIDE, D_BAD_FIELD_ACCEPTED, D_NOT_OWNER_ACCEPTED, D_NOT_OWNER_WRONG, D_FILL_PENDING,
 D_FILLED_BEFORE_TRIGGER, D_TRIGGER_NOT_PENDING, D_TRIGGER_UNREACHED, D_RELEASE_ORDER,
 D_NOT_TRIGGERED, D_STOP_REACHED_ACCEPTED, D_ICE_FILL, D_ICE_L2, D_ICE_FIFO, D_FILLED_EXPIRED,
 D_EXPIRED_EARLY, D_EXPIRED_LATE, D_EXPIRY_ORDER, D_EXPIRED_NOT_LIVE, D_ACTED_EXPIRED,
 D_NOT_EXPIRED, D_OFF_GRID, D_MIN_QTY_UNFILLED) = range(len(DETAILS))


_ACCEPTED, _REJECTED, _PARTIAL, _FILLED, _CANCELLED, _MODIFIED, _TRIGGERED = (
    int(Event.ACCEPTED), int(Event.REJECTED), int(Event.PARTIAL), int(Event.FILLED),
    int(Event.CANCELLED), int(Event.MODIFIED), int(Event.TRIGGERED))
_NEW, _CANCEL, _MODIFY = int(Kind.NEW), int(Kind.CANCEL), int(Kind.MODIFY)
_LIMIT, _MARKET, _STOP, _STOP_LIMIT = (int(OrderType.LIMIT), int(OrderType.MARKET),
                                      int(OrderType.STOP), int(OrderType.STOP_LIMIT))
_GTC, _IOC, _FOK, _DAY, _GTD = int(Tif.GTC), int(Tif.IOC), int(Tif.FOK), int(Tif.DAY), int(Tif.GTD)
_POST_ONLY = int(Flag.POST_ONLY)
_UNKNOWN_SYMBOL, _UNKNOWN_ID, _DUPLICATE_ID, _BAD_KIND = (
    int(Reason.UNKNOWN_SYMBOL), int(Reason.UNKNOWN_ID), int(Reason.DUPLICATE_ID),
    int(Reason.BAD_KIND))
_NO_LIQUIDITY, _IOC_UNFILLED, _SELF_TRADE, _EXPIRED, _NOT_OWNER, _OVERFLOW = (
    int(Reason.NO_LIQUIDITY), int(Reason.IOC_UNFILLED), int(Reason.SELF_TRADE),
    int(Reason.EXPIRED), int(Reason.NOT_OWNER), int(Reason.OVERFLOW))
DAY_NS = 86_400 * 10**9
_STP_NONE, _STP_RESTING, _STP_BOTH = int(Stp.NONE), int(Stp.CANCEL_RESTING), int(Stp.CANCEL_BOTH)


@njit(cache=True, _nrt=False, inline="always")
def _viol(vrows, vids, counts, meta, rule_detail_rule, detail, seq, oid, a, b, c, d):
    """Record one violation (see ``_record_violation``), its scalars cast to one type each: the
    call sites pass many integer types, and without the casts numba compiled the recorder once
    per combination (70 times, ten seconds of a cold compile)."""
    _record_violation(vrows, vids, counts, meta, np.int64(rule_detail_rule), np.int64(detail),
                      np.int64(seq), np.uint64(oid), np.int64(a), np.int64(b), np.int64(c),
                      np.int64(d))


@njit(cache=True, _nrt=False)
def _record_violation(vrows, vids, counts, meta, rule_detail_rule, detail, seq, oid, a, b, c, d):
    """Count a violation of ``rule_detail_rule`` and keep its row while ``vrows`` has room."""
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


