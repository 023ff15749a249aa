"""TotalView-ITCH 5.0 (NASDAQ, "Nasdaq TotalView-ITCH 5.0" interface specification) from the
engine's batches.

Every message starts with Message Type (1), Stock Locate (2), Tracking Number (2, always 0
here) and Timestamp (6: ns since midnight UTC); the layouts below are numpy dtypes (big-endian,
packed; the Timestamp is two fields, ``ts_hi`` u16 and ``ts_lo`` u32). ``Translator`` turns the
order-level messages of exsim's own translator (``exchange.gateway.itch.FeedBuilder``: the
visible book of every symbol, kept equal to the engine's) into ITCH 5.0:

  exsim                         ITCH 5.0 (section)
  AddOrder                      A Add Order, or F Add Order with MPID (``mpid`` option) (4.3)
  OrderExecuted printable       E Order Executed (4.4.1)
  OrderExecuted not printable   C Order Executed With Price, Printable N (auction fills) (4.4.2)
  OrderCancel                   X Order Cancel (4.4.3)
  OrderDelete                   D Order Delete (4.4.4)
  OrderReplace                  U Order Replace: a new Order Reference Number (4.4.5)
  Cross                         Q Cross Trade: the auction's volume and price (4.5.2)
  TradingPhase                  H Stock Trading Action (4.2.2)
  Indicative                    I NOII (4.6)
  Trade (auction print)         (none: the Cross Trade prints the cross's volume)

Order Reference Numbers: an order's first reference is its engine order id (the OUCH 5.0 Order
Reference Number); a replace, an iceberg's next slice or a resync gives it
``REPLACE_REF_BASE + n`` (every reference is used once; the ids already used are kept in
memory, one int per order). Stock Locate: 1, 2, ... in the
order of the engine's symbol ids. Prices: Price(4) = ticks * ``PriceMap.mult``; a market order
resting in a call shows at 0x7FFFFFFF (buy) or 0 (sell).

Invariants: ``Translator`` never reads the engine; a value that does not fit its field (a
displayed quantity of 2^32 shares or more, a price above $429,496.7295) raises ValueError.
"""

from __future__ import annotations

import struct

import numpy as np

from exsim.exchange.gateway import itch as xitch
from exsim.exchange.gateway.nasdaq.ouch50 import Packer, PriceMap, ns_since_midnight
from exsim.exchange.schema import CALL_MARKET_PRICE, Phase, Reason

__all__ = ["LAYOUTS", "Translator", "REPLACE_REF_BASE", "MARKET_BUY_PRICE", "wire_price"]

REPLACE_REF_BASE = 1 << 40
MARKET_BUY_PRICE = 0x7FFFFFFF
_H = [("type", "S1"), ("locate", ">u2"), ("tracking", ">u2"), ("ts_hi", ">u2"), ("ts_lo", ">u4")]


def _dt(*fields) -> np.dtype:
    return np.dtype(_H + list(fields))


LAYOUTS = {
    b"S": _dt(("event", "S1")),                                                       # 12
    b"R": _dt(("stock", "S8"), ("category", "S1"), ("status", "S1"), ("round_lot", ">u4"),
              ("round_only", "S1"), ("klass", "S1"), ("subtype", "S2"), ("auth", "S1"),
              ("ssti", "S1"), ("ipo", "S1"), ("luld", "S1"), ("etp", "S1"),
              ("leverage", ">u4"), ("inverse", "S1")),                                # 39
    b"H": _dt(("stock", "S8"), ("state", "S1"), ("reserved", "S1"), ("reason", "S4")),  # 25
    b"A": _dt(("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
              ("price", ">u4")),                                                      # 36
    b"F": _dt(("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
              ("price", ">u4"), ("mpid", "S4")),                                      # 40
    b"E": _dt(("ref", ">u8"), ("shares", ">u4"), ("match", ">u8")),                   # 31
    b"C": _dt(("ref", ">u8"), ("shares", ">u4"), ("match", ">u8"), ("printable", "S1"),
              ("price", ">u4")),                                                      # 36
    b"X": _dt(("ref", ">u8"), ("shares", ">u4")),                                     # 23
    b"D": _dt(("ref", ">u8")),                                                        # 19
    b"U": _dt(("ref", ">u8"), ("new_ref", ">u8"), ("shares", ">u4"), ("price", ">u4")),  # 35
    b"P": _dt(("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"),
              ("price", ">u4"), ("match", ">u8")),                                    # 44
    b"Q": _dt(("shares", ">u8"), ("stock", "S8"), ("price", ">u4"), ("match", ">u8"),
              ("cross", "S1")),                                                       # 40
    b"I": _dt(("paired", ">u8"), ("imbalance", ">u8"), ("direction", "S1"), ("stock", "S8"),
              ("far", ">u4"), ("near", ">u4"), ("reference", ">u4"), ("cross", "S1"),
              ("variation", "S1")),                                                   # 50
}
# Trading State (4.2.2): T trading, H halted, Q quotation only (a call: orders rest, no match)
TRADING_STATE = {Phase.CONTINUOUS: b"T", Phase.HALTED: b"H", Phase.CLOSED: b"H",
                 Phase.PRE_OPEN: b"Q", Phase.PRE_CLOSE: b"Q", Phase.REOPENING_AUCTION: b"Q"}
CROSS_TYPE = {Phase.OPENING_AUCTION: b"O", Phase.PRE_OPEN: b"O", Phase.CLOSING_AUCTION: b"C",
              Phase.PRE_CLOSE: b"C", Phase.REOPENING_AUCTION: b"H"}
ACTION_REASON = {Reason.PRICE_BAND: b"LUDP", Reason.AUCTION_END: b"LUDP"}


def wire_price(pm: PriceMap, ticks: int) -> int:
    """Return ITCH Price(4) of ``ticks`` (a resting call market order: module docstring).
    Raises ValueError if it does not fit 4 bytes."""
    if ticks == CALL_MARKET_PRICE[0]:
        return MARKET_BUY_PRICE
    p = pm.to_wire(ticks)
    if not 0 <= p <= 0xFFFFFFFF:
        raise ValueError(f"price of {ticks} ticks does not fit ITCH 5.0 Price(4)")
    return p


_PACKERS = {t: Packer(dt) for t, dt in LAYOUTS.items()}


def _pack(t: bytes, locate: int, ts: int, **values) -> bytes:
    """Return one message of type ``t``. Raises ValueError for a number that does not fit."""
    ns = ns_since_midnight(ts)
    values.update(type=t, locate=locate, ts_hi=ns >> 32, ts_lo=ns & 0xFFFFFFFF)
    try:
        return _PACKERS[t].pack(values)
    except struct.error as e:
        raise ValueError(f"ITCH 5.0 {t.decode()}: a field does not fit: {e}") from None


class Translator:
    """exsim feed messages -> ITCH 5.0 bytes (module docstring). ``symbols``: the gateway's
    ``{name: SymbolInfo}``; ``firm_of``: order id -> MPID (4 characters) for Add Order with
    MPID, or None for Add Order (A) only."""

    def __init__(self, symbols: dict, firm_of=None):
        infos = sorted(symbols.values(), key=lambda s: s.id)
        for s in infos:
            if len(s.name.encode()) > 8:
                raise ValueError(f"symbol {s.name!r}: an ITCH 5.0 Stock is 8 characters")
        self.locate = {s.id: i + 1 for i, s in enumerate(infos)}
        self.stock = {s.id: s.name.encode() for s in infos}
        self.prices = {s.id: PriceMap(s.tick_size) for s in infos}
        self.firm_of = firm_of
        self.refs: dict[tuple[int, int], int] = {}   # (symbol id, engine ref) -> ITCH ref
        self._next_replace = REPLACE_REF_BASE
        self._cross_match = 0
        self._seen: set[int] = set()   # engine order ids added once (module docstring)

    def start_of_day(self, ts: int, builder: xitch.FeedBuilder, phases: dict) -> list[bytes]:
        """Return the messages that open the feed: System Event O (start of messages), S
        (start of system hours), Stock Directory and Stock Trading Action per symbol, System
        Event Q (start of market hours), then an Add Order per visible order already resting
        in ``builder``'s books (priority order). ``phases``: {symbol id: Phase}."""
        out = [_pack(b"S", 0, ts, event=b"O"), _pack(b"S", 0, ts, event=b"S")]
        for sid, loc in self.locate.items():
            out.append(_pack(b"R", loc, ts, stock=self.stock[sid], category=b" ", status=b" ",
                             round_lot=1, round_only=b"N", klass=b" ", subtype=b"  ",
                             auth=b"T", ssti=b" ", ipo=b" ", luld=b" ", etp=b"N", leverage=0,
                             inverse=b"N"))
            out.append(self._action(sid, ts, phases.get(sid, Phase.CONTINUOUS), 0))
        out.append(_pack(b"S", 0, ts, event=b"Q"))
        for sid in self.locate:
            for ref, side, price, qty in builder.book(sid).rows():
                out.append(self._add(sid, ts, ref, side, qty, price))
        return out

    def end_of_day(self, ts: int) -> list[bytes]:
        """Return System Events M (end of market hours), E (end of system hours), C (end of
        messages)."""
        return [_pack(b"S", 0, ts, event=e) for e in (b"M", b"E", b"C")]

    def _action(self, sid: int, ts: int, phase: int, reason: int) -> bytes:
        return _pack(b"H", self.locate[sid], ts, stock=self.stock[sid],
                     state=TRADING_STATE.get(phase, b"T"), reserved=b" ",
                     reason=ACTION_REASON.get(reason, b"    "))

    def _add(self, sid, ts, ref, side, qty, price) -> bytes:
        # why the seen set: an iceberg's next slice (and a resync) adds an engine order again,
        # and an Order Reference Number is day-unique; the first add keeps the engine's id
        if ref in self._seen:
            self._next_replace += 1
            wire_ref = self._next_replace
        else:
            self._seen.add(ref)
            wire_ref = ref
        self.refs[(sid, ref)] = wire_ref
        common = dict(ref=wire_ref, side=b"BS"[side:side + 1], shares=qty, stock=self.stock[sid],
                      price=wire_price(self.prices[sid], price))
        if self.firm_of is not None:
            return _pack(b"F", self.locate[sid], ts, mpid=self.firm_of(ref).encode("ascii", "replace")[:4],
                         **common)
        return _pack(b"A", self.locate[sid], ts, **common)

    def translate(self, msgs: list) -> list[bytes]:
        """Return the ITCH 5.0 messages of exsim feed messages (one batch's, in order)."""
        out = []
        for m in msgs:
            t = type(m)
            sid, ts = m.symbol, m.ts
            if sid not in self.locate:
                continue   # not a listed symbol (none is: the engine rejects its orders)
            loc = self.locate[sid]
            if t is xitch.AddOrder:
                out.append(self._add(sid, ts, m.ref, m.side, m.qty, m.price))
            elif t is xitch.OrderExecuted:
                ref = self.refs[(sid, m.ref)]
                if m.printable:
                    out.append(_pack(b"E", loc, ts, ref=ref, shares=m.qty, match=m.match))
                else:
                    out.append(_pack(b"C", loc, ts, ref=ref, shares=m.qty, match=m.match,
                                     printable=b"N",
                                     price=wire_price(self.prices[sid], m.price)))
            elif t is xitch.OrderCancel:
                out.append(_pack(b"X", loc, ts, ref=self.refs[(sid, m.ref)], shares=m.qty))
            elif t is xitch.OrderDelete:
                out.append(_pack(b"D", loc, ts, ref=self.refs.pop((sid, m.ref))))
            elif t is xitch.OrderReplace:
                old = self.refs[(sid, m.ref)]
                self._next_replace += 1
                self.refs[(sid, m.ref)] = new = self._next_replace
                out.append(_pack(b"U", loc, ts, ref=old, new_ref=new, shares=m.qty,
                                 price=wire_price(self.prices[sid], m.price)))
            elif t is xitch.Cross:
                self._cross_match += 1
                out.append(_pack(b"Q", loc, ts, shares=m.volume, stock=self.stock[sid],
                                 price=wire_price(self.prices[sid], m.price),
                                 match=REPLACE_REF_BASE + self._cross_match,
                                 cross=CROSS_TYPE.get(m.phase, b"H")))
            elif t is xitch.TradingPhase:
                out.append(self._action(sid, ts, m.phase, m.reason))
            elif t is xitch.Indicative:
                price = wire_price(self.prices[sid], m.price) if m.price else 0
                out.append(_pack(b"I", loc, ts, paired=m.volume, imbalance=abs(m.surplus),
                                 direction=b"B" if m.surplus > 0 else
                                 b"S" if m.surplus < 0 else b"N",
                                 stock=self.stock[sid], far=price, near=price,
                                 reference=price, cross=CROSS_TYPE.get(m.phase, b"H"),
                                 variation=b" "))
        return out

    def forget_finished(self, builder: xitch.FeedBuilder) -> None:
        """Drop the references of orders no longer in ``builder``'s books (executed away),
        so the table holds only live orders."""
        gone = [k for k in self.refs if k[1] not in builder.book(k[0]).orders]
        for k in gone:
            del self.refs[k]

    def resync(self, builder: xitch.FeedBuilder, ts: int) -> list[bytes]:
        """Return Order Delete for every order this translator shows and Add Order for every
        order of ``builder`` (reloaded from the engine after a desync): ITCH 5.0 has no
        snapshot, so a reload is told as deletes and adds."""
        out = [_pack(b"D", self.locate[sid], ts, ref=ref) for (sid, _), ref in self.refs.items()]
        self.refs.clear()
        for sid in self.locate:
            for ref, side, price, qty in builder.book(sid).rows():
                try:
                    out.append(self._add(sid, ts, ref, side, qty, price))
                except ValueError:   # not shown: its price or size does not fit ITCH 5.0
                    self.refs.pop((sid, ref), None)
        return out
