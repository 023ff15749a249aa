"""The FIX order-entry application: NewOrderSingle, OrderCancelRequest and
OrderCancelReplaceRequest in, ExecutionReport and OrderCancelReject out (docs/gateway-fix.md).

``parse_order`` turns one inbound application message into a ``core.Request``; ``report_body``
turns one ``reports.Report`` into the body of an ExecutionReport (35=8) or, for a refused
cancel or replace, an OrderCancelReject (35=9).

Invariants:
- FIX prices are decimals in currency: the wire value is ticks * the symbol's tick size. A price
  that is not a whole number of ticks never reaches the engine (``Refused``: a rejected
  ExecutionReport or an OrderCancelReject made here).
- The body of a report's message depends only on the report (ExecID is ``<stream>:<rseq>``),
  so the same report always makes the same bytes after the standard header.
- A field that is missing or malformed raises ``FieldError`` (session-level Reject 35=3 with
  RefTagID); an OrdType, TimeInForce or ExecInst the gateway does not support is ``Refused``
  (a rejected ExecutionReport, 103=11, or an OrderCancelReject, Text naming the field); a value
  the engine judges (quantity, band, phase, an unknown symbol or order) goes to the engine,
  which rejects it in the journal.
- Plain FIX 4.4 unless ``extended`` (dialect.py): an FOK that cannot fill and an IOC with
  nothing left to fill are both killed, ExecType 4 Canceled (FIX 4.4's convention; the engine
  records the FOK as REJECTED); a triggered stop is ExecType D Restated.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from exsim.exchange.gateway.core import MAX_CLIENT_ID, Request
from exsim.exchange.gateway.fix.codec import FieldError, field, field_int, field_str, \
    parse_utc_timestamp, utc_timestamp
from exsim.exchange.schema import MAX_PRICE, MAX_QTY, OrderType, Reason, Side, Tif

__all__ = ["parse_order", "report_body", "refusal_body", "Refused", "ORDER_MSG_TYPES",
           "SIDES", "ORD_TYPES", "TIFS"]

ORDER_MSG_TYPES = {"D": "new", "F": "cancel", "G": "replace"}
SIDES = {b"1": Side.BUY, b"2": Side.SELL}
ORD_TYPES = {b"1": OrderType.MARKET, b"2": OrderType.LIMIT, b"3": OrderType.STOP,
             b"4": OrderType.STOP_LIMIT}
TIFS = {b"0": Tif.DAY, b"1": Tif.GTC, b"3": Tif.IOC, b"4": Tif.FOK, b"6": Tif.GTD}
_FIX_SIDE = {int(v): k.decode() for k, v in SIDES.items()}
_FIX_ORD_TYPE = {int(v): k.decode() for k, v in ORD_TYPES.items()}
_FIX_TIF = {int(v): k.decode() for k, v in TIFS.items()}
EXEC_TYPE = {"new": "0", "trade": "F", "canceled": "4", "replaced": "5", "expired": "C",
             "rejected": "8", "triggered": "D"}
# why Restated for a triggered stop: FIX 4.4 has no ExecType for it (L is FIX 5.0, sent only
# with the extensions: dialect.py); 378 ExecRestatementReason 99 = Other, Text says what
TRIGGERED_TEXT = "stop triggered"
ORD_STATUS = {"pending": "A", "new": "0", "partially_filled": "1", "filled": "2",
              "canceled": "4", "expired": "C", "rejected": "8"}
# engine Reason -> FIX 4.4 OrdRejReason (103); anything else is 99 (Other), the name in Text
_ORD_REJ = {Reason.UNKNOWN_SYMBOL: 1, Reason.SYMBOL_CLOSED: 2, Reason.SYMBOL_HALTED: 2,
            Reason.UNKNOWN_ID: 5, Reason.DUPLICATE_ID: 6, Reason.BAD_QTY: 13,
            Reason.OFF_LOT: 13, Reason.BELOW_MIN_QTY: 13, Reason.OVERFLOW: 13,
            Reason.BAD_MIN_QTY: 13, Reason.BAD_DISPLAY_QTY: 13, Reason.BAD_ORDER_TYPE: 11,
            Reason.BAD_TIF: 11, Reason.BAD_FLAGS: 11, Reason.NOT_IN_CALL: 11}
# engine Reason -> CxlRejReason (102)
_CXL_REJ = {Reason.UNKNOWN_ID: 1, Reason.NOT_OWNER: 1}
DUPLICATE_TEXT = "duplicate client_order_id"
_DECIMAL = re.compile(rb"-?\d{1,24}(\.\d{1,24})?")
_QTY = re.compile(rb"\d{1,19}(\.0{1,24})?")


class Refused(Exception):
    """An order message the FIX layer answers itself (not a whole number of ticks): the
    session sends ``refusal_body(...)`` of it. ``text`` says why."""

    def __init__(self, kind: str, client_order_id: str, orig: str, symbol: str, text: str,
                 side: str = "1", echo: tuple = (), reason: int = 99):
        super().__init__(text)
        self.kind, self.client_order_id, self.orig = kind, client_order_id, orig
        self.symbol, self.text, self.side = symbol, text, side
        # (tag, value) of the order's 38 / 40 / 44 / 59 as sent, where valid: the reject
        # repeats them so the client sees which order it was (never a made-up 38=0 59=1)
        self.echo, self.reason = echo, reason


def _price(msg, tag: int, tick: Decimal | None, refuse) -> int:
    """Return the price in ``tag`` as ticks (0 if absent or the symbol is unknown)."""
    raw = field(msg, tag)
    if raw is None:
        return 0
    if not _DECIMAL.fullmatch(raw):
        raise FieldError(6, f"tag {tag} is not a decimal price", tag)
    if tick is None:
        return 0   # unknown symbol: the engine rejects it whatever the price
    try:
        ticks = Decimal(raw.decode()) / tick
    except InvalidOperation:
        raise FieldError(6, f"tag {tag} is not a decimal price", tag) from None
    if ticks != ticks.to_integral_value():
        refuse(f"price {raw.decode()} (tag {tag}) is not a whole number of ticks of {tick}")
    t = int(ticks)
    if abs(t) > MAX_PRICE:
        refuse(f"price {raw.decode()} (tag {tag}) is out of range")
    return t


def _qty(msg, tag: int, *, required: bool = False) -> int:
    raw = field(msg, tag)
    if raw is None:
        if required:
            raise FieldError(1, f"required tag {tag} missing", tag)
        return 0
    if not _QTY.fullmatch(raw):
        raise FieldError(6, f"tag {tag} is not a whole quantity", tag)
    q = int(raw.split(b".")[0])
    if q > MAX_QTY:
        raise FieldError(5, f"tag {tag} is above the largest quantity {MAX_QTY}", tag)
    return q


def _enum(msg, tag: int, table: dict, *, required: bool, default=None, refuse=None,
          name: str = ""):
    """Return the engine value of enumeration ``tag`` (``default`` if absent and not
    ``required``). A value outside ``table`` is a FieldError (session Reject 373=5), or, given
    ``refuse``, refused: an ExecutionReport reject or OrderCancelReject naming the field
    (OrdRejReason 11), so the client learns the order's fate, not only that a field was wrong."""
    raw = field(msg, tag)
    if raw is None:
        if required:
            raise FieldError(1, f"required tag {tag} missing", tag)
        return default
    if raw not in table:
        supported = b", ".join(sorted(table)).decode()
        if refuse is None:
            raise FieldError(5, f"value of tag {tag} is not supported (supported: {supported})",
                             tag)
        value = raw.decode("ascii", "replace")[:16]
        refuse(f"{name} ({tag}) {value!r} is not supported (supported: {supported})", 11)
    return table[raw]


def _echo(msg) -> tuple:
    """Return the (tag, value) pairs of 38, 40, 44, 59 that ``msg`` holds with a value the
    gateway supports (a reject may repeat only what FIX 4.4 allows there)."""
    out = []
    for tag, ok in ((38, lambda v: _QTY.fullmatch(v)), (40, lambda v: v in ORD_TYPES),
                    (44, lambda v: _DECIMAL.fullmatch(v)), (59, lambda v: v in TIFS)):
        try:
            raw = field(msg, tag)
        except FieldError:
            continue
        if raw is not None and ok(raw):
            out.append((tag, raw.decode()))
    return tuple(out)


def parse_order(msg, msg_type: str, account, stream: str, symbols: dict) -> Request:
    """Return the Request of one NewOrderSingle (D), OrderCancelRequest (F) or
    OrderCancelReplaceRequest (G).

    Raises FieldError for a missing, malformed or unsupported field (session Reject), and
    Refused for a price that is not a whole number of ticks.
    """
    kind = ORDER_MSG_TYPES[msg_type]
    cid = field_str(msg, 11, required=True, max_len=MAX_CLIENT_ID)
    if not cid:
        raise FieldError(4, "tag 11 is empty", 11)
    orig = field_str(msg, 41, required=kind != "new", max_len=MAX_CLIENT_ID) or ""
    symbol = field_str(msg, 55, required=True, max_len=64)
    side = _enum(msg, 54, SIDES, required=True)
    transact = field(msg, 60)
    if transact is None:
        raise FieldError(1, "required tag 60 missing", 60)
    parse_utc_timestamp(transact, 60)
    info = symbols.get(symbol)
    tick = info.tick_size if info is not None else None

    def refuse(text, reason=99):
        raise Refused(kind, cid, orig, symbol, text, _FIX_SIDE[int(side)], _echo(msg), reason)

    if kind == "cancel":
        return Request(kind="cancel", account=account, stream=stream, client_order_id=cid,
                       orig_client_order_id=orig, symbol=symbol, side=side)
    order_type = _enum(msg, 40, ORD_TYPES, required=True, refuse=refuse, name="OrdType")
    qty = _qty(msg, 38, required=True)
    price = _price(msg, 44, tick, refuse)
    stop = _price(msg, 99, tick, refuse)
    if order_type in (OrderType.LIMIT, OrderType.STOP_LIMIT) and field(msg, 44) is None:
        raise FieldError(1, "required tag 44 missing (Price, for OrdType 2 and 4)", 44)
    if order_type in (OrderType.STOP, OrderType.STOP_LIMIT) and field(msg, 99) is None:
        raise FieldError(1, "required tag 99 missing (StopPx, for OrdType 3 and 4)", 99)
    # why IOC for a market order without 59: FIX's default DAY cannot apply to an order that
    # never rests (the engine refuses a DAY market order, BAD_TIF); IOC is what it does anyway
    tif = _enum(msg, 59, TIFS, required=False, refuse=refuse, name="TimeInForce",
                default=Tif.IOC if order_type == OrderType.MARKET else Tif.DAY)
    expire = field(msg, 126)
    expire_ts = parse_utc_timestamp(expire, 126) if expire is not None else 0
    if tif == Tif.GTD and expire is None:
        raise FieldError(1, "required tag 126 missing (ExpireTime, for TimeInForce 6)", 126)
    exec_inst = field_str(msg, 18, max_len=64)
    post_only = False
    if exec_inst is not None:
        values = exec_inst.split(" ")
        if any(v != "6" for v in values):
            refuse(f"ExecInst (18) {exec_inst!r} is not supported: only 6 (participate don't "
                   "initiate, post-only)", 11)
        post_only = True
    display = _qty(msg, 111)
    min_qty = _qty(msg, 110)
    return Request(kind=kind, account=account, stream=stream, client_order_id=cid,
                   orig_client_order_id=orig, symbol=symbol, side=side, order_type=order_type,
                   tif=tif, price=price, qty=qty, stop_price=stop, display_qty=display,
                   min_qty=min_qty, expire_ts=expire_ts, post_only=post_only)


def _decimal(ticks, tick: Decimal) -> str:
    d = Decimal(ticks) * tick
    return format(d.normalize() if d else Decimal(0), "f")


def _avg(avg_px: float, tick: Decimal) -> str:
    if not avg_px:
        return "0"
    d = Decimal(repr(float(avg_px))) * tick
    return format(d.normalize(), "f")


def report_body(report, symbols: dict, *, with_account: bool = False,
                extended: bool = False) -> tuple[str, list]:
    """Return (MsgType, body pairs) of the message telling a client of ``report``:
    an OrderCancelReject (9) for cancel_rejected / replace_rejected, else an ExecutionReport (8),
    in plain FIX 4.4 or, with ``extended``, with exsim's extensions (dialect.py). The pairs
    depend only on the report and ``extended`` (module docstring)."""
    info = symbols.get(report.symbol)
    tick = info.tick_size if info is not None else Decimal(1)
    order_id = str(report.order_id) if report.order_id else "NONE"
    if report.exec in ("cancel_rejected", "replace_rejected"):
        body = [(37, order_id), (11, report.client_order_id or "NONE"),
                (41, report.orig_client_order_id or "NONE"),
                (39, ORD_STATUS.get(report.status, "8")),
                (434, "1" if report.exec == "cancel_rejected" else "2"),
                (102, _cxl_reason(report)), (58, report.text or report.exec)]
        if with_account:
            body.append((1, report.account))
        return "9", body
    exec_type, status = EXEC_TYPE.get(report.exec, "I"), ORD_STATUS.get(report.status, "8")
    text = report.text
    if report.exec == "rejected" and report.reason == Reason.FOK_CANNOT_FILL:
        # FIX 4.4 (Vol. 4, order state change matrices): an FOK that cannot be filled is
        # killed with ExecType Canceled, like an IOC with nothing to fill; it never rested
        exec_type = status = "4"
    elif report.exec == "triggered" and extended:
        exec_type = "L"
    body = [(37, order_id), (11, report.client_order_id), (17, f"{report.stream}:{report.rseq}"),
            (150, exec_type), (39, status),
            (55, report.symbol), (54, _FIX_SIDE.get(report.side, "1")),
            (40, _FIX_ORD_TYPE.get(report.order_type, "2")), (38, report.qty)]
    if report.orig_client_order_id:
        body.insert(2, (41, report.orig_client_order_id))
    if with_account:
        body.append((1, report.account))
    if report.order_type in (OrderType.LIMIT, OrderType.STOP_LIMIT):
        body.append((44, _decimal(report.price, tick)))
    if report.order_type in (OrderType.STOP, OrderType.STOP_LIMIT):
        body.append((99, _decimal(report.stop_price, tick)))
    body.append((59, _FIX_TIF.get(report.tif, "1")))
    if report.exec == "trade":
        body += [(31, _decimal(report.last_px, tick)), (32, report.last_qty)]
        if report.trade_id and extended:
            body.append((880, report.trade_id))
    body += [(14, report.cum_qty), (151, report.leaves_qty), (6, _avg(report.avg_px, tick)),
             (60, utc_timestamp(report.ts))]
    if exec_type == "8":
        body.append((103, _rej_reason(report)))
    elif exec_type == "D":
        body.append((378, 99))
        text = text or TRIGGERED_TEXT
    if text:
        body.append((58, text))
    return "8", body


def _rej_reason(report) -> int:
    if report.reason:
        return _ORD_REJ.get(report.reason, 99)
    return 6 if report.text == DUPLICATE_TEXT else 99


def _cxl_reason(report) -> int:
    if report.reason:
        return _CXL_REJ.get(report.reason, 99)
    return 6 if report.text == DUPLICATE_TEXT else 99


def refusal_body(refused: Refused, exec_id: str, now_ns: int) -> tuple[str, list]:
    """Return (MsgType, body pairs) answering a ``Refused`` order message: a rejected
    ExecutionReport (8, OrdRejReason 99) for a new order, an OrderCancelReject (9) for a
    cancel or replace."""
    if refused.kind == "new":
        return "8", [(37, "NONE"), (11, refused.client_order_id), (17, exec_id), (150, "8"),
                     (39, "8"), (55, refused.symbol), (54, refused.side), *refused.echo,
                     (14, 0), (151, 0), (6, "0"), (60, utc_timestamp(now_ns)),
                     (103, refused.reason), (58, refused.text)]
    return "9", [(37, "NONE"), (11, refused.client_order_id), (41, refused.orig or "NONE"),
                 (39, "8"), (434, "1" if refused.kind == "cancel" else "2"), (102, 99),
                 (58, refused.text)]
