"""OUCH-style binary order-entry messages: fixed layouts, big-endian, one size per type.

The messages ride in SoupBinTCP data packets (``framing``): a client's orders in Unsequenced
Data packets, the server's order reports in Sequenced Data packets (numbered by the report
stream's ``rseq``), and the server's protocol-level rejects (rate limit, malformed message) in
Unsequenced Data packets, since they are answered before the core sees the message and are not
journaled. Every layout, with byte offsets, is in docs/gateway-binary.md; ``layout_table``
prints the same table from the structs below, and the docs test compares the two.

Invariants:
- A message's first byte is its type; its length is fixed by the type. A client message whose
  length differs from its type's, whose type is unknown, or one of whose fields is out of range
  is refused with ``MessageError`` carrying the reject reason (and the token when the token
  itself was readable), never with another exception.
- Tokens (client order ids) are 14 bytes, symbols 8, both printable ASCII (0x21-0x7E) padded on
  the right with spaces; prices are int64 ticks, quantities uint64 lots, timestamps uint64
  epoch nanoseconds.
- ``encode_report`` is a pure function of the Report: the same report gives the same bytes,
  so a replay after a restart sends what was sent live. Every exec kind maps to one message;
  a field too long for its slot (a FIX ClOrdID of 32 characters on an order this port also
  sees) is cut to the slot, never an error.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from enum import IntEnum

from exsim.exchange.errors import ExsimError
from exsim.exchange.schema import OrderType, Reason, Side, Tif

__all__ = [
    "TOKEN_LEN", "SYMBOL_LEN", "OuchReason", "MessageError", "Layout", "CLIENT", "SERVER",
    "ENTER", "CANCEL", "REPLACE", "ACCEPTED", "REJECTED", "EXECUTED", "CANCELED", "REPLACED",
    "TRIGGERED", "CANCEL_REJECT", "LOGIN_REQUEST", "LOGIN_ACCEPTED", "LOGIN_REJECTED",
    "MAX_CLIENT_MESSAGE", "parse_client", "encode_report", "encode_reject", "decode_server",
    "encode_login", "parse_login", "encode_login_accepted", "parse_login_accepted",
    "reject_reason", "layout_table", "LoginRequest", "split_packets",
]

TOKEN_LEN = 14
SYMBOL_LEN = 8
USERNAME_LEN = 32
PASSWORD_LEN = 64
SESSION_LEN = 10
SEQ_LEN = 20
U64_MAX = (1 << 64) - 1


class OuchReason(IntEnum):
    """Reject reasons of this port beyond the engine's (exchange.schema.Reason, all < 128)."""

    RATE_LIMITED = 200      # more messages in a second than the account's max_msgs_per_sec
    MALFORMED = 201         # empty message, or its length is not its type's
    UNKNOWN_TYPE = 202      # the first byte names no client message
    BAD_FIELD = 203         # a field is out of range: a side, order type, tif, flag, token, symbol
    DUPLICATE_TOKEN = 204   # the token is already used by one of the account's orders
    GATEWAY = 255           # another refusal of the gateway core (its text is not on this wire)


# the core's reject texts (reason 0) that have a code of their own on this port
_CORE_TEXTS = {"duplicate client_order_id": OuchReason.DUPLICATE_TOKEN}


def reject_reason(reason: int, text: str) -> int:
    """Return the wire reason of a report: the engine's reason if any, else the code of the
    core's text (``OuchReason.GATEWAY`` for a text this port does not know). Raises nothing."""
    if reason:
        return int(reason) if 0 < int(reason) <= 0xFFFF else int(OuchReason.GATEWAY)
    return int(_CORE_TEXTS.get(text, OuchReason.GATEWAY))


class MessageError(ExsimError):
    """A client message was refused: ``reason`` (an OuchReason) and ``token`` ("" if unread)."""

    def __init__(self, reason: OuchReason, message: str, token: str = ""):
        super().__init__(message)
        self.reason = reason
        self.token = token


# -- field kinds: struct format, encoder (value -> packable), decoder (packed -> value) ---------

def _ascii_field(width: int):
    def enc(value) -> bytes:
        raw = str(value).encode("ascii", "replace")[:width]
        return raw.ljust(width, b" ")

    def dec(raw: bytes) -> str:
        text = raw.rstrip(b" ")
        if not text or any(b < 0x21 or b > 0x7E for b in text):
            raise ValueError("must be printable ASCII without spaces, padded on the right")
        return text.decode("ascii")
    return f"{width}s", enc, dec


def _ascii_loose(width: int):
    # why loose: server-side fields (a FIX ClOrdID, an empty orig token) that the client reads
    # as sent; a blank slot is "", not an error
    fmt, enc, _ = _ascii_field(width)
    return fmt, enc, lambda raw: raw.rstrip(b" ").decode("ascii", "replace")


def _char_enum(mapping: dict):
    back = {v: k for k, v in mapping.items()}

    def enc(value) -> bytes:
        return back[value]

    def dec(raw: bytes):
        try:
            return mapping[raw]
        except KeyError:
            raise ValueError(f"unknown code {raw!r}; known: "
                             f"{b''.join(sorted(mapping)).decode()}") from None
    return "c", enc, dec


def _int(fmt: str, lo: int, hi: int):
    def dec(v: int) -> int:
        if not lo <= v <= hi:
            raise ValueError(f"{v} is outside [{lo}, {hi}]")
        return v
    return fmt, int, dec


SIDES = {b"B": Side.BUY, b"S": Side.SELL}
ORDER_TYPES = {b"L": OrderType.LIMIT, b"M": OrderType.MARKET, b"S": OrderType.STOP,
               b"T": OrderType.STOP_LIMIT}
TIFS = {b"G": Tif.GTC, b"I": Tif.IOC, b"F": Tif.FOK, b"D": Tif.DAY, b"T": Tif.GTD}
YES_NO = {b"Y": True, b"N": False}
CANCEL_KINDS = {b"X": "cancel", b"U": "replace"}

KINDS = {
    "token": _ascii_field(TOKEN_LEN),
    "token?": _ascii_loose(TOKEN_LEN),
    "symbol": _ascii_field(SYMBOL_LEN),
    "symbol?": _ascii_loose(SYMBOL_LEN),
    "side": _char_enum(SIDES),
    "order_type": _char_enum(ORDER_TYPES),
    "tif": _char_enum(TIFS),
    "yes_no": _char_enum(YES_NO),
    "request": _char_enum(CANCEL_KINDS),
    "u16": _int("H", 0, 0xFFFF),
    "u64": _int("Q", 0, U64_MAX),
    "i64": _int("q", -(1 << 63), (1 << 63) - 1),
}

KIND_DOC = {
    "token": "ASCII, right-padded with spaces", "token?": "ASCII, right-padded; blank if none",
    "symbol": "ASCII, right-padded with spaces", "symbol?": "ASCII, right-padded with spaces",
    "side": "B buy, S sell", "order_type": "L limit, M market, S stop, T stop-limit",
    "tif": "G GTC, I IOC, F FOK, D DAY, T GTD", "yes_no": "Y or N",
    "request": "X cancel, U replace", "u16": "unsigned", "u64": "unsigned", "i64": "signed",
}


class Layout:
    """One message type: its type byte, name, fields and ``struct.Struct`` (type byte first).

    ``pack(**fields)`` returns the message's bytes; ``unpack(data)`` returns the namedtuple of
    its fields (without the type byte). Both raise ValueError for a field out of range.
    """

    def __init__(self, code: bytes, name: str, fields: list[tuple[str, str, str]]):
        self.code = code
        self.name = name
        self.fields = fields   # (field name, kind, description)
        self.struct = struct.Struct(">c" + "".join(KINDS[k][0] for _, k, _ in fields))
        self.size = self.struct.size
        self.tuple = namedtuple(name, [f for f, _, _ in fields])
        self._enc = [KINDS[k][1] for _, k, _ in fields]
        self._dec = [KINDS[k][2] for _, k, _ in fields]

    def pack(self, **values) -> bytes:
        """Return the bytes of the message with these field values (all fields required).

        Raises KeyError for a missing field, ValueError / struct.error for a value out of range.
        """
        try:
            args = [enc(values[f]) for enc, (f, _, _) in zip(self._enc, self.fields)]
            return self.struct.pack(self.code, *args)
        except (KeyError, struct.error) as e:
            raise ValueError(f"{self.name}: {e}") from None

    def unpack(self, data: bytes):
        """Return the fields of a message of exactly ``size`` bytes. Raises ValueError naming
        the first field out of range."""
        raw = self.struct.unpack(data)[1:]
        out = []
        for dec, value, (f, _, _) in zip(self._dec, raw, self.fields):
            try:
                out.append(dec(value))
            except ValueError as e:
                raise ValueError(f"{self.name}.{f}: {e}") from None
        return self.tuple(*out)

    def offsets(self) -> list[tuple[int, int, str, str, str]]:
        """Return (offset, length, field, struct code, description) of every field, type byte
        first."""
        rows = [(0, 1, "type", "c", f"'{self.code.decode()}'")]
        off = 1
        for f, k, doc in self.fields:
            size = struct.calcsize(">" + KINDS[k][0])
            rows.append((off, size, f, KINDS[k][0], f"{doc} ({KIND_DOC[k]})" if doc else KIND_DOC[k]))
            off += size
        return rows


# -- client -> server (in Unsequenced Data packets) ---------------------------------------------

ENTER = Layout(b"O", "EnterOrder", [
    ("token", "token", "client order id, unique among the account's orders"),
    ("side", "side", ""),
    ("qty", "u64", "lots"),
    ("symbol", "symbol", ""),
    ("price", "i64", "limit price in ticks (ignored by market and stop)"),
    ("order_type", "order_type", ""),
    ("tif", "tif", ""),
    ("display_qty", "u64", "iceberg displayed lots, 0 = all"),
    ("min_qty", "u64", "minimum lots to fill at once, 0 = none"),
    ("stop_price", "i64", "stop and stop-limit trigger in ticks, else 0"),
    ("expire_ts", "u64", "GTD expiry, epoch ns, else 0"),
    ("post_only", "yes_no", "refuse instead of crossing (a resting limit: GTC, DAY or GTD)"),
])
CANCEL = Layout(b"X", "CancelOrder", [
    ("token", "token", "the token of the order to cancel"),
])
REPLACE = Layout(b"U", "ReplaceOrder", [
    ("token", "token", "the current token of the order"),
    ("new_token", "token", "the order's token once replaced"),
    ("qty", "u64", "new total quantity (filled + open), lots"),
    ("price", "i64", "new limit price in ticks"),
    ("stop_price", "i64", "new stop price in ticks (pending stops), else 0"),
])
CLIENT = {lay.code[0]: lay for lay in (ENTER, CANCEL, REPLACE)}
MAX_CLIENT_MESSAGE = max(lay.size for lay in CLIENT.values())

# -- server -> client (reports in Sequenced Data, rejects of this port in Unsequenced Data) -----

_TS = ("ts", "u64", "gateway clock, epoch ns")
ACCEPTED = Layout(b"A", "Accepted", [
    _TS, ("token", "token?", ""), ("order_id", "u64", "engine order id"), ("side", "side", ""),
    ("qty", "u64", ""), ("symbol", "symbol?", ""), ("price", "i64", ""),
    ("stop_price", "i64", ""), ("order_type", "order_type", ""), ("tif", "tif", ""),
    ("leaves_qty", "u64", "open lots after acceptance"),
])
REJECTED = Layout(b"J", "Rejected", [
    _TS, ("token", "token?", ""), ("order_id", "u64", "engine order id, 0 if none"),
    ("reason", "u16", "exchange.schema.Reason, or an OuchReason (>= 200)"),
])
EXECUTED = Layout(b"E", "Executed", [
    _TS, ("token", "token?", ""), ("order_id", "u64", ""), ("qty", "u64", "lots of this fill"),
    ("price", "i64", "ticks of this fill"), ("match_number", "u64", "trade id"),
    ("cum_qty", "u64", ""), ("leaves_qty", "u64", ""),
])
CANCELED = Layout(b"C", "Canceled", [
    _TS, ("token", "token?", "the cancel's token (= the order's on this port)"),
    ("orig_token", "token?", "the order's token when a request canceled it"),
    ("order_id", "u64", ""), ("cum_qty", "u64", "lots filled before it left"),
    ("reason", "u16", "USER_CANCEL, EXPIRED (a DAY/GTD expiry), IOC_UNFILLED, ..."),
])
REPLACED = Layout(b"U", "Replaced", [
    _TS, ("token", "token?", "new token"), ("orig_token", "token?", "previous token"),
    ("order_id", "u64", ""), ("side", "side", ""), ("qty", "u64", "new total quantity"),
    ("symbol", "symbol?", ""), ("price", "i64", ""), ("stop_price", "i64", ""),
    ("cum_qty", "u64", ""), ("leaves_qty", "u64", ""),
])
TRIGGERED = Layout(b"T", "Triggered", [
    _TS, ("token", "token?", ""), ("order_id", "u64", ""), ("leaves_qty", "u64", ""),
])
CANCEL_REJECT = Layout(b"I", "CancelReject", [
    _TS, ("token", "token?", "the request's token"), ("orig_token", "token?", "the order named"),
    ("order_id", "u64", "0 if none"), ("request", "request", ""),
    ("reason", "u16", "exchange.schema.Reason, or an OuchReason"),
])
SERVER = {lay.code[0]: lay for lay in (ACCEPTED, REJECTED, EXECUTED, CANCELED, REPLACED,
                                       TRIGGERED, CANCEL_REJECT)}

# -- SoupBinTCP session packets (payloads of the Login packets; ASCII fields per SoupBinTCP) ----

LOGIN_REQUEST = struct.Struct(f">{USERNAME_LEN}s{PASSWORD_LEN}s{SESSION_LEN}s{SEQ_LEN}s")
LOGIN_ACCEPTED = struct.Struct(f">{SESSION_LEN}s{SEQ_LEN}s")
LOGIN_REJECTED = struct.Struct(">c")
LoginRequest = namedtuple("LoginRequest", "username password session seq")
REJECT_NOT_AUTHORIZED = b"A"
REJECT_SESSION = b"S"


def parse_client(payload: bytes):
    """Return the namedtuple of one client message (EnterOrder, CancelOrder, ReplaceOrder).

    Raises MessageError: MALFORMED for an empty message or a length not its type's,
    UNKNOWN_TYPE for an unknown first byte, BAD_FIELD for a field out of range (with the
    token if the token itself was valid).
    """
    if not payload:
        raise MessageError(OuchReason.MALFORMED, "an empty message")
    layout = CLIENT.get(payload[0])
    if layout is None:
        raise MessageError(OuchReason.UNKNOWN_TYPE, f"unknown message type {payload[:1]!r}")
    if len(payload) != layout.size:
        raise MessageError(OuchReason.MALFORMED, f"{layout.name} is {layout.size} bytes; "
                           f"got {len(payload)}")
    try:
        return layout.unpack(payload)
    except ValueError as e:
        try:
            token = KINDS["token"][2](payload[1:1 + TOKEN_LEN])
        except ValueError:
            token = ""
        raise MessageError(OuchReason.BAD_FIELD, str(e), token) from None


def _pack_enum(mapping: dict, value, default):
    # a report of an order entered elsewhere may carry a code this port has no letter for
    return value if value in mapping.values() else default


def encode_report(report) -> bytes:
    """Return the message of one execution report (reports.Report): its exec kind picks the
    type (new: Accepted, rejected: Rejected, trade: Executed, canceled / expired: Canceled,
    replaced: Replaced, triggered: Triggered, cancel_rejected / replace_rejected:
    CancelReject). Raises ValueError for an exec kind it does not know."""
    r = report
    side = _pack_enum(SIDES, r.side, Side.BUY)
    if r.exec == "new":
        return ACCEPTED.pack(ts=r.ts, token=r.client_order_id, order_id=r.order_id, side=side,
                             qty=r.qty, symbol=r.symbol, price=r.price, stop_price=r.stop_price,
                             order_type=_pack_enum(ORDER_TYPES, r.order_type, OrderType.LIMIT),
                             tif=_pack_enum(TIFS, r.tif, Tif.GTC), leaves_qty=r.leaves_qty)
    if r.exec == "rejected":
        return REJECTED.pack(ts=r.ts, token=r.client_order_id, order_id=r.order_id,
                             reason=reject_reason(r.reason, r.text))
    if r.exec == "trade":
        return EXECUTED.pack(ts=r.ts, token=r.client_order_id, order_id=r.order_id,
                             qty=r.last_qty, price=r.last_px, match_number=r.trade_id,
                             cum_qty=r.cum_qty, leaves_qty=r.leaves_qty)
    if r.exec in ("canceled", "expired"):
        reason = r.reason or (Reason.EXPIRED if r.exec == "expired" else Reason.USER_CANCEL)
        return CANCELED.pack(ts=r.ts, token=r.client_order_id,
                             orig_token=r.orig_client_order_id, order_id=r.order_id,
                             cum_qty=r.cum_qty, reason=reject_reason(reason, r.text))
    if r.exec == "replaced":
        return REPLACED.pack(ts=r.ts, token=r.client_order_id, orig_token=r.orig_client_order_id,
                             order_id=r.order_id, side=side, qty=r.qty, symbol=r.symbol,
                             price=r.price, stop_price=r.stop_price, cum_qty=r.cum_qty,
                             leaves_qty=r.leaves_qty)
    if r.exec == "triggered":
        return TRIGGERED.pack(ts=r.ts, token=r.client_order_id, order_id=r.order_id,
                              leaves_qty=r.leaves_qty)
    if r.exec in ("cancel_rejected", "replace_rejected"):
        return CANCEL_REJECT.pack(ts=r.ts, token=r.client_order_id,
                                  orig_token=r.orig_client_order_id, order_id=r.order_id,
                                  request="cancel" if r.exec == "cancel_rejected" else "replace",
                                  reason=reject_reason(r.reason, r.text))
    raise ValueError(f"no OUCH message for exec kind {r.exec!r}")


def encode_reject(ts: int, token: str, reason: int) -> bytes:
    """Return a Rejected message of this port (no engine order: order_id 0). Raises nothing
    for any token (it is cut to 14 bytes)."""
    return REJECTED.pack(ts=ts, token=token, order_id=0, reason=int(reason))


def decode_server(payload: bytes):
    """Return the namedtuple of one server message (its class name is the message's name).

    Raises ValueError for an unknown type or a length not its type's.
    """
    layout = SERVER.get(payload[0]) if payload else None
    if layout is None:
        raise ValueError(f"unknown server message type {payload[:1]!r}")
    if len(payload) != layout.size:
        raise ValueError(f"{layout.name} is {layout.size} bytes; got {len(payload)}")
    return layout.unpack(payload)


def _field(value: str, width: int, what: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > width or raw != raw.rstrip(b" "):
        raise ValueError(f"{what} must be at most {width} bytes without trailing spaces")
    return raw.ljust(width, b" ")


def encode_login(username: str, password: str, session: str = "", seq: int = 1) -> bytes:
    """Return the payload of a Login Request: ``seq`` is the next sequence number the client
    wants (1: from the first report; 0: only reports from now on). Raises ValueError for a
    field that does not fit."""
    if not 0 <= seq < 10 ** SEQ_LEN:
        raise ValueError(f"sequence number {seq} does not fit {SEQ_LEN} digits")
    return LOGIN_REQUEST.pack(_field(username, USERNAME_LEN, "username"),
                              _field(password, PASSWORD_LEN, "password"),
                              _field(session, SESSION_LEN, "session"),
                              str(seq).rjust(SEQ_LEN).encode())


def parse_login(payload: bytes) -> LoginRequest:
    """Return the fields of a Login Request payload. Raises ValueError for a wrong length, a
    field that is not UTF-8, or a sequence number that is not digits."""
    if len(payload) != LOGIN_REQUEST.size:
        raise ValueError(f"a login request is {LOGIN_REQUEST.size} bytes; got {len(payload)}")
    user, pw, session, seq = LOGIN_REQUEST.unpack(payload)
    text = seq.strip(b" ")
    if not text or not text.isdigit():
        raise ValueError("the requested sequence number must be ASCII digits")
    try:
        return LoginRequest(user.rstrip(b" ").decode(), pw.rstrip(b" ").decode(),
                            session.rstrip(b" ").decode(), int(text))
    except UnicodeDecodeError:
        raise ValueError("a login field is not UTF-8") from None


def encode_login_accepted(session: str, seq: int) -> bytes:
    """Return the payload of a Login Accepted: the session and the sequence number of the next
    sequenced message the server will send. Raises ValueError if either does not fit."""
    return LOGIN_ACCEPTED.pack(_field(session, SESSION_LEN, "session"),
                               str(seq).rjust(SEQ_LEN).encode())


def parse_login_accepted(payload: bytes) -> tuple[str, int]:
    """Return (session, next sequence number) of a Login Accepted payload. Raises ValueError
    for a wrong length or a sequence number that is not digits."""
    if len(payload) != LOGIN_ACCEPTED.size:
        raise ValueError(f"a login accepted is {LOGIN_ACCEPTED.size} bytes; got {len(payload)}")
    session, seq = LOGIN_ACCEPTED.unpack(payload)
    text = seq.strip(b" ")
    if not text.isdigit():
        raise ValueError("the sequence number must be ASCII digits")
    return session.rstrip(b" ").decode("ascii", "replace"), int(text)


def layout_table(layout: Layout) -> str:
    """Return the Markdown table of one layout's fields (offset, length, field, format,
    meaning), as docs/gateway-binary.md shows it."""
    lines = ["| offset | length | field | format | meaning |", "|---|---|---|---|---|"]
    for off, size, name, fmt, doc in layout.offsets():
        lines.append(f"| {off} | {size} | {name} | `{fmt}` | {doc} |")
    lines.append(f"| | **{layout.size}** | total | | |")
    return "\n".join(lines)


def split_packets(buf: bytes, max_size: int) -> tuple[list[tuple[int, bytes]], bytes]:
    """Return the whole SoupBinTCP packets at the start of ``buf`` as (packet type, payload)
    pairs, and the bytes after them (a packet not yet complete).

    Why here and not one ``framing.read_frame`` per packet: a session reads its socket a chunk
    at a time and takes every packet in it, with no timed wait per packet. Raises
    ``framing.FrameError`` for a length of 0 or above ``max_size`` (checked on the header,
    before the payload is waited for) at the start of ``buf``; a bad length after whole
    packets ends the list there, so the packets before it are handled first.
    """
    from exsim.exchange.gateway.framing import HEADER, FrameError

    out, pos, end, head = [], 0, len(buf), HEADER.size
    while end - pos >= head:
        length, ptype = HEADER.unpack_from(buf, pos)
        if (length == 0 or length > max_size) and out:
            break   # the packets before a bad one are handled first; the next call raises
        if length == 0:
            raise FrameError("a frame of length 0 (it must count at least its type byte)")
        if length > max_size:
            raise FrameError(f"a frame of {length} bytes; this port's limit is {max_size}")
        stop = pos + 2 + length
        if stop > end:
            break
        out.append((ptype, buf[pos + head:stop]))
        pos = stop
    return out, buf[pos:]
