"""The ITCH-style market-data feed: message layouts, the visible order book and the translator
that turns the engine's batches into feed messages (docs/gateway-feed.md).

Every message is one big-endian ``struct.Struct`` of fixed size that starts with the same
21-byte header ``type (1 ASCII byte) | symbol id (u32) | seq (u64) | ts (i64)``. ``seq`` is the
symbol's own sequence number: the incremental messages of a symbol are numbered 1, 2, 3 ...
with no gap, so a reader that sees seq ``n + 2`` after ``n`` knows it missed one and asks for a
snapshot. Snapshot messages (``SNAPSHOT_START`` .. ``SNAPSHOT_END`` and what is between them)
carry the seq of the last incremental message they include; the next incremental message of the
symbol has that seq + 1. ``ts`` is the engine timestamp (epoch ns) of the message that caused
the change.

Order references are the engine's order ids, unique among the live orders of a symbol (so a
message names an order by ``(symbol, ref)``). Only the visible book is published: an iceberg
shows its displayed slice (a refill is an ``ORDER_REPLACE`` to the back of its level), a pending
stop is absent until it is triggered, the aggressor of a continuous fill is not in the book.

Invariants:
- ``FeedBuilder`` is pure: its output depends only on the batches it is given (and the state it
  was loaded with), never on a clock. After each batch its ``book(symbol)`` equals the engine's
  ``orders(symbol)`` (order ids, sides, prices, displayed quantities, priority order), and a
  ``VisibleBook`` that applies the messages ends equal to it.
- Prints: a continuous fill is one ``ORDER_EXECUTED`` (printable) on the resting order. An
  auction fill is one ``TRADE`` (printable, both references) and, for the displayed part each
  side's order gave, an ``ORDER_EXECUTED`` marked not printable. Volume is the sum of printable
  executions.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

import numpy as np

from exsim.exchange.errors import ExsimError
from exsim.exchange.schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, CALL_PHASES, Event, Kind, OrderType, Phase, Side,
)

__all__ = [
    "MsgType", "LAYOUTS", "HEADER", "ALL_SYMBOLS", "FeedError", "FeedDesync",
    "SystemEvent", "SymbolDirectory", "SnapshotStart", "SnapshotEnd", "TradingPhase",
    "Indicative", "Cross", "AddOrder", "OrderExecuted", "OrderCancel", "OrderDelete",
    "OrderReplace", "Trade", "SnapshotRequest",
    "encode", "decode", "encode_request", "decode_request", "tick_fields",
    "VisibleBook", "FeedBuilder", "snapshot_messages",
]

ALL_SYMBOLS = 0xFFFFFFFF   # the symbol id of messages about no one symbol (system events)
HEADER = struct.Struct(">cIQq")   # type, symbol id, seq, ts
NAME_BYTES = 16


class MsgType:
    """The type byte of each feed message (the first byte of its payload)."""

    SYSTEM_EVENT = b"S"
    SYMBOL_DIRECTORY = b"R"
    SNAPSHOT_START = b"G"
    SNAPSHOT_END = b"g"
    TRADING_PHASE = b"H"
    INDICATIVE = b"I"
    CROSS = b"Q"
    ADD_ORDER = b"A"
    ORDER_EXECUTED = b"E"
    ORDER_CANCEL = b"X"
    ORDER_DELETE = b"D"
    ORDER_REPLACE = b"U"
    TRADE = b"P"


class FeedError(ExsimError):
    """A feed message could not be encoded or decoded (unknown type, wrong size, bad field)."""


class FeedDesync(FeedError):
    """The engine's rows do not fit the translator's book (an order it does not know, a fill
    without its events): the book must be reloaded from the engine."""


# ---------------------------------------------------------------- message layouts
class SystemEvent(NamedTuple):
    """``code``: b"O" start of messages (after login), b"C" end of messages (server closing)."""
    symbol: int
    seq: int
    ts: int
    code: bytes


class SymbolDirectory(NamedTuple):
    """A symbol's id and name; its tick size is ``tick_mantissa * 10**tick_exponent`` currency
    units; ``seq`` is the symbol's current seq (as in a snapshot)."""
    symbol: int
    seq: int
    ts: int
    name: str
    tick_mantissa: int
    tick_exponent: int


class SnapshotStart(NamedTuple):
    """The symbol's book as of ``seq`` follows: its phase, its indicative (in a call) and
    ``orders`` ADD_ORDER messages in priority order (bids best first, then asks), then
    SNAPSHOT_END. A reader clears the symbol's book on it."""
    symbol: int
    seq: int
    ts: int
    orders: int


class SnapshotEnd(NamedTuple):
    """The snapshot of the symbol is complete; incremental messages go on at ``seq + 1``."""
    symbol: int
    seq: int
    ts: int


class TradingPhase(NamedTuple):
    """The symbol entered ``phase`` (exchange.schema.Phase) for ``reason`` (Reason: 0 a PHASE
    message, PRICE_BAND a volatility interruption, AUCTION_END); ``reference_price`` in ticks."""
    symbol: int
    seq: int
    ts: int
    phase: int
    reason: int
    reference_price: int


class Indicative(NamedTuple):
    """In a call (``phase``), the uncross that would run now: ``price`` (0: none), ``volume``
    and ``surplus`` (> 0 buy side, < 0 sell side), as the engine's INDICATIVE event."""
    symbol: int
    seq: int
    ts: int
    phase: int
    price: int
    volume: int
    surplus: int


class Cross(NamedTuple):
    """An auction executed: ``phase`` names it (OPENING_AUCTION, CLOSING_AUCTION,
    REOPENING_AUCTION), ``price``, ``volume`` (0: nothing executed) and ``surplus``. Its fills
    follow as TRADE messages; it is not a print itself."""
    symbol: int
    seq: int
    ts: int
    phase: int
    price: int
    volume: int
    surplus: int


class AddOrder(NamedTuple):
    """A visible order joins the back of its price level: ``ref`` (engine order id), ``side``
    (Side), displayed ``qty``, ``price`` in ticks (a MARKET order resting in a call shows at
    CALL_MARKET_PRICE of its side)."""
    symbol: int
    seq: int
    ts: int
    ref: int
    side: int
    qty: int
    price: int


class OrderExecuted(NamedTuple):
    """``qty`` of order ``ref``'s displayed quantity executed at ``price`` in trade ``match``
    (the engine's trade_id); the order leaves the book when its displayed quantity reaches 0.
    ``printable`` False: an auction fill, printed by its TRADE message."""
    symbol: int
    seq: int
    ts: int
    ref: int
    qty: int
    match: int
    price: int
    printable: bool


class OrderCancel(NamedTuple):
    """``qty`` of order ``ref``'s displayed quantity was cancelled; it keeps its place."""
    symbol: int
    seq: int
    ts: int
    ref: int
    qty: int


class OrderDelete(NamedTuple):
    """Order ``ref`` left the book (cancelled, expired, or replaced away)."""
    symbol: int
    seq: int
    ts: int
    ref: int


class OrderReplace(NamedTuple):
    """Order ``ref`` now shows ``qty`` at ``price`` at the back of that level (it lost its time
    priority: a new-price or larger modify, or an iceberg's new slice)."""
    symbol: int
    seq: int
    ts: int
    ref: int
    qty: int
    price: int


class Trade(NamedTuple):
    """An auction fill (printable): ``qty`` at ``price`` between ``buy_ref`` and ``sell_ref`` in
    trade ``match``. The part an iceberg's reserve gave is in it but in no ORDER_EXECUTED."""
    symbol: int
    seq: int
    ts: int
    buy_ref: int
    sell_ref: int
    qty: int
    price: int
    match: int


@dataclass(frozen=True)
class Layout:
    """One message type: its type byte, its struct (header included) and its tuple class."""

    type: bytes
    struct: struct.Struct
    cls: type


def _layout(t: bytes, body: str, cls) -> Layout:
    return Layout(t, struct.Struct(">cIQq" + body), cls)


LAYOUTS: dict[bytes, Layout] = {lay.type: lay for lay in (
    _layout(MsgType.SYSTEM_EVENT, "c", SystemEvent),
    _layout(MsgType.SYMBOL_DIRECTORY, f"{NAME_BYTES}sqb", SymbolDirectory),
    _layout(MsgType.SNAPSHOT_START, "I", SnapshotStart),
    _layout(MsgType.SNAPSHOT_END, "", SnapshotEnd),
    _layout(MsgType.TRADING_PHASE, "BBq", TradingPhase),
    _layout(MsgType.INDICATIVE, "Bqqq", Indicative),
    _layout(MsgType.CROSS, "Bqqq", Cross),
    _layout(MsgType.ADD_ORDER, "Qcqq", AddOrder),
    _layout(MsgType.ORDER_EXECUTED, "Qqqqc", OrderExecuted),
    _layout(MsgType.ORDER_CANCEL, "Qq", OrderCancel),
    _layout(MsgType.ORDER_DELETE, "Q", OrderDelete),
    _layout(MsgType.ORDER_REPLACE, "Qqq", OrderReplace),
    _layout(MsgType.TRADE, "QQqqq", Trade),
)}
_BY_CLASS = {lay.cls: lay for lay in LAYOUTS.values()}
_SIDE_BYTE = (b"B", b"S")


def encode(msg) -> bytes:
    """Return the wire bytes of one message tuple (AddOrder(...), ...).

    Raises FeedError if it is not a feed message or a field does not fit its layout."""
    lay = _BY_CLASS.get(type(msg))
    if lay is None:
        raise FeedError(f"not a feed message: {type(msg).__name__}")
    vals = list(msg)
    if lay.cls is AddOrder:
        vals[4] = _SIDE_BYTE[vals[4]]
    elif lay.cls is OrderExecuted:
        vals[7] = b"Y" if vals[7] else b"N"
    elif lay.cls is SymbolDirectory:
        vals[3] = vals[3].encode("ascii").ljust(NAME_BYTES)
    try:
        return lay.struct.pack(lay.type, *vals)
    except (struct.error, UnicodeEncodeError, IndexError, TypeError) as e:
        raise FeedError(f"{lay.cls.__name__} does not fit its layout: {e}") from None


def decode(payload: bytes):
    """Return the message tuple of one payload.

    Raises FeedError for an unknown type byte, a payload of the wrong size for its type, or a
    side / printable byte that is not one of the layout's."""
    if not payload:
        raise FeedError("an empty feed message")
    lay = LAYOUTS.get(payload[:1])
    if lay is None:
        raise FeedError(f"unknown feed message type {payload[:1]!r}")
    if len(payload) != lay.struct.size:
        raise FeedError(f"{lay.cls.__name__} is {lay.struct.size} bytes; got {len(payload)}")
    vals = list(lay.struct.unpack(payload))[1:]
    if lay.cls is AddOrder:
        if vals[4] not in _SIDE_BYTE:
            raise FeedError(f"AddOrder side {vals[4]!r} is not B or S")
        vals[4] = _SIDE_BYTE.index(vals[4])
    elif lay.cls is OrderExecuted:
        if vals[7] not in (b"Y", b"N"):
            raise FeedError(f"OrderExecuted printable {vals[7]!r} is not Y or N")
        vals[7] = vals[7] == b"Y"
    elif lay.cls is SymbolDirectory:
        vals[3] = vals[3].rstrip(b" ").decode("ascii", "replace")
    return lay.cls(*vals)


# client -> server requests (SoupBinTCP unsequenced data packets)
REQUEST = struct.Struct(">cI")   # b"r" (snapshot request), symbol id or ALL_SYMBOLS


class SnapshotRequest(NamedTuple):
    """Ask for a fresh snapshot of ``symbol`` (ALL_SYMBOLS: of every symbol)."""
    symbol: int


def encode_request(req: SnapshotRequest) -> bytes:
    """Return the payload of a client's snapshot request."""
    return REQUEST.pack(b"r", req.symbol)


def decode_request(payload: bytes) -> SnapshotRequest:
    """Return the request of a client's unsequenced payload. Raises FeedError otherwise."""
    if len(payload) != REQUEST.size or payload[:1] != b"r":
        raise FeedError("not a snapshot request (b'r' + u32 symbol id)")
    return SnapshotRequest(REQUEST.unpack(payload)[1])


def tick_fields(tick_size) -> tuple[int, int]:
    """Return (mantissa, exponent) with ``mantissa * 10**exponent == tick_size`` exactly.

    Raises FeedError for a tick size that is not a positive finite decimal that fits
    (mantissa in int64, exponent in int8)."""
    try:
        d = Decimal(str(tick_size)).normalize()
    except ArithmeticError:
        raise FeedError(f"tick size {tick_size!r} is not a decimal number") from None
    if not d.is_finite() or d <= 0:
        raise FeedError(f"tick size {tick_size!r} is not a positive finite number")
    sign, digits, exp = d.as_tuple()
    mant = int("".join(map(str, digits)))
    if exp > 0:   # keep the exponent small: 100 is (100, 0), not (1, 2)
        mant, exp = mant * 10 ** exp, 0
    if not (-128 <= exp <= 127 and mant < 1 << 63):
        raise FeedError(f"tick size {tick_size!r} does not fit (int64 mantissa, int8 exponent)")
    return mant, exp


# ---------------------------------------------------------------- the visible book
class VisibleBook:
    """The visible orders of one symbol: ``ref -> [side, price, qty]`` and, per side and price,
    the refs in time priority. Both the translator and the feed client keep one; ``rows()``
    lists them as ``Engine.orders`` does."""

    def __init__(self):
        self.orders: dict[int, list] = {}
        self.levels: tuple[dict, dict] = ({}, {})   # per side: price -> OrderedDict of refs

    def clear(self) -> None:
        """Remove every order."""
        self.orders.clear()
        self.levels[0].clear()
        self.levels[1].clear()

    def add(self, ref: int, side: int, price: int, qty: int) -> None:
        """Put ``ref`` at the back of its level. Raises FeedDesync if it is already there."""
        if ref in self.orders:
            raise FeedDesync(f"order {ref} added twice")
        if side not in (0, 1) or qty <= 0:
            raise FeedDesync(f"order {ref}: side {side}, qty {qty}")
        self.orders[ref] = [side, price, qty]
        self.levels[side].setdefault(price, OrderedDict())[ref] = None

    def _unlink(self, ref: int) -> list:
        o = self.orders.get(ref)
        if o is None:
            raise FeedDesync(f"order {ref} is not in the book")
        level = self.levels[o[0]][o[1]]
        del level[ref]
        if not level:
            del self.levels[o[0]][o[1]]
        return o

    def remove(self, ref: int) -> list:
        """Remove ``ref``; return its [side, price, qty]. Raises FeedDesync if unknown."""
        o = self._unlink(ref)
        del self.orders[ref]
        return o

    def reduce(self, ref: int, qty: int) -> int:
        """Take ``qty`` off ``ref``'s displayed quantity (removing it at 0); return what is left.
        Raises FeedDesync if unknown or if ``qty`` is not in [1, its quantity]."""
        o = self.orders.get(ref)
        if o is None or not 0 < qty <= o[2]:
            raise FeedDesync(f"order {ref}: cannot take {qty} off {o and o[2]}")
        o[2] -= qty
        if o[2] == 0:
            self.remove(ref)
        return o[2]

    def replace(self, ref: int, qty: int, price: int) -> None:
        """Move ``ref`` to the back of ``price``'s level with ``qty``. Raises FeedDesync if
        unknown."""
        side = self._unlink(ref)[0]
        del self.orders[ref]
        self.add(ref, side, price, qty)

    def rows(self) -> list[tuple[int, int, int, int]]:
        """Return (ref, side, price, qty) of every order: bids best first, then asks best first,
        FIFO within a level (the order of ``Engine.orders``)."""
        out = []
        for side, rev in ((0, True), (1, False)):
            lv = self.levels[side]
            for price in sorted(lv, reverse=rev):
                out.extend((ref, side, price, self.orders[ref][2]) for ref in lv[price])
        return out

    def depth(self, side: int) -> list[tuple[int, int, int]]:
        """Return (price, qty, count) of ``side``'s levels, best first (``Engine.depth``)."""
        lv = self.levels[side]
        return [(p, sum(self.orders[r][2] for r in lv[p]), len(lv[p]))
                for p in sorted(lv, reverse=side == 0)]

    def apply(self, msg) -> None:
        """Apply one incremental order message (AddOrder, OrderExecuted, OrderCancel,
        OrderDelete, OrderReplace); other messages change no order. Raises FeedDesync if the
        message does not fit the book."""
        t = type(msg)
        if t is AddOrder:
            self.add(msg.ref, msg.side, msg.price, msg.qty)
        elif t is OrderExecuted or t is OrderCancel:
            self.reduce(msg.ref, msg.qty)
        elif t is OrderDelete:
            self.remove(msg.ref)
        elif t is OrderReplace:
            self.replace(msg.ref, msg.qty, msg.price)


def snapshot_messages(symbol: int, seq: int, ts: int, rows, phase: int, reference_price: int,
                      indicative: tuple[int, int, int]) -> list:
    """Return the snapshot of one symbol as message tuples: SNAPSHOT_START, TRADING_PHASE,
    INDICATIVE (only in a call), one ADD_ORDER per row of ``rows`` ((ref, side, price, qty) in
    priority order, or an L3_DTYPE array as ``Engine.orders`` returns), SNAPSHOT_END; every one
    with ``seq`` (the seq of the last incremental message the snapshot includes)."""
    if isinstance(rows, np.ndarray):
        rows = list(zip(rows["order_id"].tolist(), rows["side"].tolist(),
                        rows["price"].tolist(), rows["qty"].tolist()))
    out = [SnapshotStart(symbol, seq, ts, len(rows)),
           TradingPhase(symbol, seq, ts, int(phase), 0, int(reference_price))]
    if phase in CALL_PHASES:
        out.append(Indicative(symbol, seq, ts, int(phase), *map(int, indicative)))
    out.extend(AddOrder(symbol, seq, ts, r, s, q, p) for r, s, p, q in rows)
    out.append(SnapshotEnd(symbol, seq, ts))
    return out


# ---------------------------------------------------------------- the translator
class _Order:
    """What the translator knows of a visible order beyond its shown quantity."""

    __slots__ = ("side", "price", "hidden", "display")

    def __init__(self, side: int, price: int, hidden: int, display: int):
        self.side, self.price, self.hidden, self.display = side, price, hidden, display


class _Aggressor:
    """An order being matched within one message: a NEW, a new-price MODIFY or a released
    stop. It rests (or replaces its old self) when its matching is over."""

    __slots__ = ("symbol", "ref", "side", "market", "price", "display", "leaves", "done",
                 "replacing", "deleted")

    def __init__(self, symbol, ref, side, market, price, display, leaves, replacing=False):
        self.symbol, self.ref, self.side, self.market = symbol, ref, side, market
        self.price, self.display, self.leaves = price, display, leaves
        self.done = False
        self.replacing = replacing   # a MODIFY: readers still show the old order ...
        self.deleted = False         # ... until its ORDER_DELETE (sent at its first fill)


class _Symbol:
    """The translator's state of one symbol."""

    def __init__(self, sid: int):
        self.sid = sid
        self.seq = 0
        self.ts = 0
        self.book = VisibleBook()
        self.info: dict[int, _Order] = {}    # every visible order, and an iceberg between slices
        self.stops: dict[int, tuple] = {}    # pending stop ref -> (side, order_type, price)
        self.phase = int(Phase.CONTINUOUS)
        self.reference_price = 0
        self.indicative = (0, 0, 0)
        self.uncross: list[int] | None = None   # refs the uncross in progress touched, in order


_EV_FIELDS = ("seq", "ts", "order_id", "filled_qty", "leaves_qty", "symbol", "event", "reason",
              "price", "phase")
_FILL_FIELDS = ("ts", "trade_id", "price", "qty", "buy_order_id", "sell_order_id",
                "aggressor_side")


class FeedBuilder:
    """Turns each batch of the engine (its order messages and Result) into feed messages and
    keeps the visible book of every symbol (module docstring). Load it with the engine's state
    (``from_engine``) before the first batch it translates."""

    def __init__(self):
        self._sym: dict[int, _Symbol] = {}
        self.engine_seq = 0     # the seq of the last engine message translated
        self._out: list = []
        self._aggr: _Aggressor | None = None
        self._fill_events = 0   # PARTIAL/FILLED events still owed to the last fill row
        self._fill_refs = ()

    # ------------------------------------------------------------ loading
    @classmethod
    def from_engine(cls, engine) -> "FeedBuilder":
        """Return a builder holding the engine's current state: every symbol's visible orders
        with their reserves, pending stops, phase, reference price and indicative."""
        fb = cls()
        fb.reload(engine)
        return fb

    def reload(self, engine) -> None:
        """Replace every symbol's state with the engine's (keeping each symbol's seq, so a
        reload never reuses a seq; readers need a snapshot after it)."""
        self.engine_seq = engine.seq
        refs = engine.state.symbols["reference_price"]
        for sid in engine.symbols.values():
            self.load_symbol(sid, engine.orders(sid), engine.stops(sid), int(engine.phase(sid)),
                             int(refs[sid]), engine.indicative(sid))

    def load_symbol(self, sid: int, orders: np.ndarray, stops: np.ndarray, phase: int,
                    reference_price: int, indicative: tuple[int, int, int]) -> None:
        """Set symbol ``sid``'s state: ``orders`` and ``stops`` as ``Engine.orders`` and
        ``Engine.stops`` return them (L3_DTYPE), its phase, reference price and indicative.
        Its seq and last ts are kept."""
        old = self._sym.get(sid)
        s = self._sym[sid] = _Symbol(sid)
        if old is not None:
            s.seq, s.ts = old.seq, old.ts
        for ref, side, price, qty, hidden, display in zip(
                *(orders[n].tolist() for n in ("order_id", "side", "price", "qty", "hidden",
                                               "display_qty"))):
            s.book.add(ref, side, price, qty)
            s.info[ref] = _Order(side, price, hidden, display)
        for ref, side, otype, price in zip(
                *(stops[n].tolist() for n in ("order_id", "side", "order_type", "price"))):
            s.stops[ref] = (side, otype, price)
        s.phase, s.reference_price = int(phase), int(reference_price)
        s.indicative = tuple(map(int, indicative))

    # ------------------------------------------------------------ views
    def symbols(self) -> list[int]:
        """Return the ids of the symbols the builder knows, ascending."""
        return sorted(self._sym)

    def seq(self, sid: int) -> int:
        """Return the seq of symbol ``sid``'s last message (0 before any)."""
        return self._symbol(sid).seq

    def book(self, sid: int) -> VisibleBook:
        """Return the visible book of symbol ``sid`` (read it, do not change it)."""
        return self._symbol(sid).book

    def snapshot(self, sid: int, rows=None) -> list:
        """Return the snapshot messages of symbol ``sid`` as of its current seq
        (``snapshot_messages``), of ``rows`` (``Engine.orders(sid)`` taken when the engine is
        at ``engine_seq``) or, without them, of the builder's own book."""
        s = self._symbol(sid)
        return snapshot_messages(sid, s.seq, s.ts, s.book.rows() if rows is None else rows,
                                 s.phase, s.reference_price, s.indicative)

    def _symbol(self, sid: int) -> _Symbol:
        s = self._sym.get(sid)
        if s is None:
            s = self._sym[sid] = _Symbol(sid)
        return s

    # ------------------------------------------------------------ translation
    def build(self, first_seq: int, orders: np.ndarray, result) -> list:
        """Translate one batch: ``orders`` (ORDER_DTYPE, message i has seq ``first_seq + i``)
        and the engine's ``result`` of it. Return the feed messages (tuples) in order.

        Raises FeedDesync if the rows do not fit the builder's books (it was not loaded with the
        engine's state, or a batch was skipped); ``reload`` it from the engine then."""
        self._out = []
        self._aggr = None
        self._fill_events = 0
        fills = list(zip(*(result.fills[n].tolist() for n in _FILL_FIELDS)))
        fi = 0
        cur = None
        msg = None
        for seq, ts, ref, filled, leaves, sid, kind, reason, price, phase in zip(
                *(result.events[n].tolist() for n in _EV_FIELDS)):
            if seq != cur:
                self._finish()
                if self._fill_events:
                    raise FeedDesync(f"seq {cur}: a fill without its two events")
                cur = seq
                if not 0 <= seq - first_seq < len(orders):
                    raise FeedDesync(f"event of seq {seq} outside the batch from {first_seq}")
                msg = orders[seq - first_seq]
            if kind == Event.REJECTED:
                # why before _symbol: a reject changes no book, and an order for a symbol the
                # engine does not list (id UNKNOWN_SYMBOL_ID) must not become a feed symbol
                continue
            s = self._symbol(sid)
            s.ts = ts
            if kind == Event.PARTIAL or kind == Event.FILLED:
                if self._fill_events == 0:
                    if fi >= len(fills):
                        raise FeedDesync(f"seq {seq}: a fill event with no fill row")
                    self._fill(s, *fills[fi])
                    fi += 1
                    self._fill_events = 2
                self._fill_event(s, ref, leaves)
            elif kind == Event.ACCEPTED:
                self._accepted(s, ref, msg, leaves)
            elif kind == Event.CANCELLED:
                self._cancelled(s, ref, ts)
            elif kind == Event.MODIFIED:
                self._modified(s, ref, msg, leaves, ts)
            elif kind == Event.TRIGGERED:
                self._finish()
                st = s.stops.pop(ref, None)
                if st is None:
                    raise FeedDesync(f"symbol {sid}: stop {ref} triggered but not pending")
                side, otype, limit = st
                self._aggr = _Aggressor(sid, ref, side, otype == OrderType.STOP, limit, 0, leaves)
            elif kind == Event.PHASE:
                if s.uncross is not None:
                    self._end_uncross(s, ts)
                s.phase, s.reference_price = phase, price
                if phase not in CALL_PHASES:
                    s.indicative = (0, 0, 0)
                self._emit(s, TradingPhase, ts, phase, reason, price)
            elif kind == Event.INDICATIVE:
                self._finish()
                s.indicative = (price, filled, leaves)
                self._emit(s, Indicative, ts, phase, price, filled, leaves)
            elif kind == Event.UNCROSS:
                self._finish()
                s.uncross = []
                self._emit(s, Cross, ts, phase, price, filled, leaves)
        self._finish()
        if self._fill_events or fi != len(fills):
            raise FeedDesync("the batch's fill rows and fill events do not pair up")
        if any(s.uncross is not None for s in self._sym.values()):
            raise FeedDesync("an uncross without its PHASE event")
        if len(orders):
            self.engine_seq = first_seq + len(orders) - 1
        out, self._out = self._out, []
        return out

    def _emit(self, s: _Symbol, cls, ts: int, *fields) -> None:
        s.seq += 1
        self._out.append(cls(s.sid, s.seq, ts, *fields))

    def _add(self, s: _Symbol, ref: int, side: int, price: int, qty: int, ts: int,
             replace: bool) -> None:
        """Show ``qty`` of ``ref`` at the back of ``price`` (as a replace of what readers show)."""
        if replace:
            self._emit(s, OrderReplace, ts, ref, qty, price)
        else:
            self._emit(s, AddOrder, ts, ref, side, qty, price)
        s.book.add(ref, side, price, qty)

    def _accepted(self, s: _Symbol, ref: int, msg, leaves: int) -> None:
        if int(msg["kind"]) != Kind.NEW or int(msg["order_id"]) != ref:
            raise FeedDesync(f"symbol {s.sid}: ACCEPTED for {ref} is not its NEW message")
        otype, side, price = int(msg["order_type"]), int(msg["side"]), int(msg["price"])
        if otype in (OrderType.STOP, OrderType.STOP_LIMIT):
            s.stops[ref] = (side, otype, price)
            return
        self._finish()
        self._aggr = _Aggressor(s.sid, ref, side, otype == OrderType.MARKET, price,
                                int(msg["display_qty"]), leaves)

    def _fill(self, s: _Symbol, ts, match, price, qty, buy, sell, aggressor) -> None:
        self._fill_refs = (buy, sell)
        if aggressor == AUCTION_SIDE:
            if s.uncross is None:
                raise FeedDesync(f"symbol {s.sid}: an auction fill outside an uncross")
            for ref in (buy, sell):
                info = s.info.get(ref)
                if info is None:
                    raise FeedDesync(f"symbol {s.sid}: auction fill of {ref}, not in the book")
                shown = s.book.orders[ref][2] if ref in s.book.orders else 0
                vis = min(qty, shown)
                info.hidden -= qty - vis   # the uncross takes the shown part, then the reserve
                if info.hidden < 0:
                    raise FeedDesync(f"symbol {s.sid}: auction fill of {ref} beyond its quantity")
                if ref not in s.uncross:
                    s.uncross.append(ref)
                if vis:
                    self._emit(s, OrderExecuted, ts, ref, vis, match, price, False)
                    s.book.reduce(ref, vis)
                if shown == vis and info.hidden == 0:
                    del s.info[ref]
            self._emit(s, Trade, ts, buy, sell, qty, price, match)
            return
        a = self._aggr
        incoming, resting = (buy, sell) if aggressor == Side.BUY else (sell, buy)
        if a is None or a.ref != incoming or a.symbol != s.sid:
            raise FeedDesync(f"symbol {s.sid}: a fill of {incoming}, not the order matching")
        if a.replacing and not a.deleted:
            a.deleted = True
            self._emit(s, OrderDelete, ts, a.ref)
        self._emit(s, OrderExecuted, ts, resting, qty, match, price, True)
        if s.book.reduce(resting, qty) == 0:
            info = s.info[resting]
            if info.hidden:   # an iceberg's next slice joins the back of its level at once
                new = min(info.display, info.hidden)
                info.hidden -= new
                self._add(s, resting, info.side, info.price, new, ts, False)
            else:
                del s.info[resting]

    def _fill_event(self, s: _Symbol, ref: int, leaves: int) -> None:
        self._fill_events -= 1
        if ref not in self._fill_refs:
            raise FeedDesync(f"symbol {s.sid}: a fill event of {ref}, not of the fill's orders")
        a = self._aggr
        if a is not None and a.ref == ref and a.symbol == s.sid:
            a.leaves = leaves
            a.done = leaves == 0
            return
        info = s.info.get(ref)
        shown = s.book.orders[ref][2] if ref in s.book.orders else 0
        open_qty = shown + (info.hidden if info else 0)
        if open_qty != leaves:
            raise FeedDesync(f"symbol {s.sid}: order {ref} has {leaves} open after its fill; "
                             f"the feed's book has {open_qty}")

    def _cancelled(self, s: _Symbol, ref: int, ts: int) -> None:
        a = self._aggr
        if a is not None and a.ref == ref and a.symbol == s.sid and not a.done:
            a.done = True   # the matching order's rest was cancelled (IOC, market, STP ...)
            if a.replacing and not a.deleted:
                a.deleted = True
                self._emit(s, OrderDelete, ts, ref)
        elif ref in s.book.orders:
            self._emit(s, OrderDelete, ts, ref)
            s.book.remove(ref)
            del s.info[ref]
        elif s.stops.pop(ref, None) is None:
            raise FeedDesync(f"symbol {s.sid}: order {ref} cancelled but not live")

    def _modified(self, s: _Symbol, ref: int, msg, leaves: int, ts: int) -> None:
        if int(msg["kind"]) != Kind.MODIFY or int(msg["order_id"]) != ref:
            raise FeedDesync(f"symbol {s.sid}: MODIFIED for {ref} is not its MODIFY message")
        new_price = int(msg["price"])
        if ref in s.stops:   # a pending stop is not shown; keep what its release needs
            side, otype, limit = s.stops[ref]
            s.stops[ref] = (side, otype, new_price if otype == OrderType.STOP_LIMIT else limit)
            return
        if ref not in s.book.orders:
            raise FeedDesync(f"symbol {s.sid}: order {ref} modified but not live")
        side, price, shown = s.book.orders[ref]
        info = s.info[ref]
        if new_price != price:   # handled as an incoming limit at the new price
            self._finish()
            s.book.remove(ref)
            del s.info[ref]
            self._aggr = _Aggressor(s.sid, ref, side, False, new_price, info.display, leaves,
                                    replacing=True)
            return
        open_qty = shown + info.hidden
        if leaves < open_qty:   # keeps its place; the reserve goes first
            cut = open_qty - leaves
            from_hidden = min(cut, info.hidden)
            info.hidden -= from_hidden
            if cut > from_hidden:
                self._emit(s, OrderCancel, ts, ref, cut - from_hidden)
                s.book.reduce(ref, cut - from_hidden)
        elif leaves > open_qty:   # to the back of its level, showing a fresh slice
            new = min(info.display, leaves) if info.display else leaves
            info.hidden = leaves - new
            s.book.remove(ref)
            self._add(s, ref, side, price, new, ts, True)

    def _finish(self) -> None:
        """End the matching order's turn: rest what is left of it, or delete its old self."""
        a, self._aggr = self._aggr, None
        if a is None:
            return
        s = self._sym[a.symbol]
        if not a.done and a.leaves > 0:
            price = CALL_MARKET_PRICE[a.side] if a.market else a.price
            new = min(a.display, a.leaves) if a.display else a.leaves
            s.info[a.ref] = _Order(a.side, price, a.leaves - new, a.display)
            self._add(s, a.ref, a.side, price, new, s.ts, a.replacing and not a.deleted)
        elif a.replacing and not a.deleted:
            self._emit(s, OrderDelete, s.ts, a.ref)

    def _end_uncross(self, s: _Symbol, ts: int) -> None:
        """Show the next slice of each iceberg the uncross used up, in the order it reached
        them (each at the back of its level)."""
        for ref in s.uncross:
            info = s.info.get(ref)
            if info is not None and ref not in s.book.orders:
                new = min(info.display, info.hidden)
                info.hidden -= new
                self._add(s, ref, info.side, info.price, new, ts, False)
        s.uncross = None
