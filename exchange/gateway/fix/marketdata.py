"""FIX 4.4 market data on the FIX port: MarketDataRequest (V) in; MarketDataSnapshotFullRefresh
(W), MarketDataIncrementalRefresh (X) and MarketDataRequestReject (Y) out (docs/gateway-fix.md,
"Market data").

A subscription is one MDReqID of one session: a set of symbols, a set of MDEntryTypes (0 bid,
1 offer, 2 trade, 4 opening price, 5 closing price) and a MarketDepth (0: every level; N: the
best N levels of each side). It starts with one W per symbol, taken from ``gw.engine.depth`` at
a batch boundary, then gets one X per batch that changed what it shows, built from the batch's
rows (``gw.add_market_listener``): the L2 rows give the new level totals, the fills the trades,
the INDICATIVE / UNCROSS / PHASE events the auction prices.

Invariants:
- A snapshot is taken where no batch is in flight (the engine lock is free, or held by this
  module), and the subscription goes live in the same step: its first X holds exactly the
  batches after the snapshot. W carries 83 RptSeq = the engine seq it reflects; each X entry
  carries 83 = the seq of the engine message that made it, and entries go out in seq order
  (per seq: trades, then level changes, then auction entries).
- A client that applies W then every X (key: symbol, side, price) holds, after the X messages
  of a batch, the engine's ``depth`` (the best N levels for MarketDepth N) after that batch.
  For MarketDepth N a level pushed out of the top N gets a delete entry and a level moving into
  it a new entry, so the client never holds more than N levels.
- Every level entry carries 1023 MDPriceLevel, the level's 1-based position on its side (for a
  delete: before the removal). This module keeps, for each symbol someone watches, a copy of
  the engine's levels (``_Book``) to number them; it is loaded from the engine when the first
  subscription of the symbol starts and dropped when the last one ends.
- Market data goes through the session's output (its ``max_output_bytes`` bound disconnects a
  reader that falls behind) and is not kept for a resend: a ResendRequest gap-fills W and X; a
  client that reconnects subscribes again and gets a new snapshot.
- The listener never awaits and touches only watched symbols; a message never holds more than
  ``MAX_ENTRIES`` entries (a larger W continues in X messages with 279=0 entries, 83 = the
  snapshot's seq, before any incremental).
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from dataclasses import dataclass, field as dc_field

import numpy as np

from exsim.exchange.gateway.fix.codec import FieldError, field, field_int, field_str, utc_timestamp
from exsim.exchange.gateway.fix.orders import _decimal
from exsim.exchange.schema import CALL_PHASES, Event, Phase, Side

__all__ = ["MarketData", "Subscription", "ENTRY_TYPES", "MAX_DEPTH", "MAX_ENTRIES",
           "MAX_SUBSCRIPTIONS", "REJECT"]

log = logging.getLogger("exsim.gateway.fix")

BID, OFFER, TRADE, OPENING, CLOSING = "0", "1", "2", "4", "5"
ENTRY_TYPES = frozenset({BID, OFFER, TRADE, OPENING, CLOSING})
MAX_DEPTH = 1000          # largest MarketDepth N (0, every level, is also allowed)
MAX_ENTRIES = 100         # entries in one W or X message
MAX_SUBSCRIPTIONS = 64    # live subscriptions of one session
MAX_SYMBOLS = 64          # symbols of one request
# price levels of snapshots one session may be sent per second (a burst of 5 s of them): a
# client subscribing and unsubscribing over a deep book costs the event loop this at most
SNAPSHOT_LEVELS_PER_S = 20_000
_ALL = 1 << 62            # "every level" as a depth
# MDReqRejReason (281), FIX 4.4
REJECT = {"unknown_symbol": "0", "duplicate": "1", "bandwidth": "2", "permission": "3",
          "subscription_type": "4", "depth": "5", "update_type": "6", "aggregated": "7",
          "entry_type": "8"}
_SIDE_TYPE = (BID, OFFER)
_EXPECTED = "3"           # OpenCloseSettlFlag (286) 3 = expected entry: the indicative price


class _Reject(Exception):
    """A request answered with MarketDataRequestReject: ``reason`` (281, or None) and text."""

    def __init__(self, reason: str | None, text: str):
        super().__init__(text)
        self.reason, self.text = reason, text


@dataclass
class Subscription:
    """One live (or starting) MDReqID of a session (module docstring)."""

    session: object
    req_id: str
    symbols: tuple            # engine symbol ids, in request order
    types: frozenset          # MDEntryTypes
    depth: int                # levels per side (_ALL for MarketDepth 0)
    live: bool = False        # True once its snapshot is sent
    out: list = dc_field(default_factory=list)   # entries of the batch being built


class _Side:
    """The price levels of one side: ``keys`` sorted best first (bids -price, asks price)."""

    def __init__(self, side: int, rows):
        self.sign = -1 if side == Side.BUY else 1
        self.levels = {int(r["price"]): (int(r["qty"]), int(r["count"])) for r in rows}
        self.keys = sorted(self.sign * p for p in self.levels)

    def price_at(self, index: int) -> int:
        return self.sign * self.keys[index]


class _Book:
    """This module's copy of one symbol's levels and its published indicative price."""

    def __init__(self, engine, sid: int):
        bids, asks = engine.depth(sid, _ALL)
        self.sides = (_Side(Side.BUY, bids), _Side(Side.SELL, asks))
        self.indicative = _indicative(engine, sid)


def _indicative(engine, sid: int):
    """Return (entry type, price, volume) of the symbol's indicative uncross, or None."""
    phase = engine.phase(sid)
    price, qty, _ = engine.indicative(sid)
    if phase not in CALL_PHASES or not price:
        return None
    return (CLOSING if phase == Phase.PRE_CLOSE else OPENING), price, qty


class MarketData:
    """The market-data service of one FIX server (module docstring). The session calls
    ``request``; the server calls ``drop`` when a session ends and ``close`` at shutdown."""

    def __init__(self, gw, server):
        self.gw, self.server = gw, server
        self.by_session: dict[object, dict[str, Subscription]] = {}
        self.by_symbol: dict[int, list[Subscription]] = {}
        self.books: dict[int, _Book] = {}
        self.tasks: set[asyncio.Task] = set()   # snapshots waiting for the engine lock
        self.names = {s.id: s.name for s in gw.symbols.values()}
        self.ticks = {s.id: s.tick_size for s in gw.symbols.values()}
        gw.add_market_listener(self._on_batch)

    # -- requests ------------------------------------------------------------------------------
    def request(self, session, msg, seq: int) -> None:
        """Answer one MarketDataRequest of ``session``: a snapshot, a new subscription, an
        unsubscribe, or a MarketDataRequestReject. Raises FieldError for a missing or malformed
        field (the session answers with a session Reject)."""
        req_id = field_str(msg, 262, required=True, max_len=64)
        if not req_id:
            raise FieldError(4, "tag 262 is empty", 262)
        try:
            self._request(session, msg, req_id)
        except _Reject as r:
            body = [(262, req_id)]
            if r.reason is not None:
                body.append((281, r.reason))
            session.send_market_data([("Y", body + [(58, r.text)])])

    def _request(self, session, msg, req_id: str) -> None:
        kind = field(msg, 263)
        if kind is None:
            raise FieldError(1, "required tag 263 missing", 263)
        subs = self.by_session.get(session, {})
        if kind == b"2":
            sub = subs.get(req_id)
            if sub is None:
                raise _Reject(None, f"no subscription with MDReqID {req_id}")
            self._remove(sub)
            return
        if kind in (b"0", b"1") and _budget(session) < 0:
            raise _Reject(REJECT["bandwidth"], "snapshots over this session's budget of "
                          f"{SNAPSHOT_LEVELS_PER_S} price levels a second; retry later")
        if kind not in (b"0", b"1"):
            raise _Reject(REJECT["subscription_type"], "SubscriptionRequestType (263) must be "
                          "0 snapshot, 1 snapshot + updates or 2 unsubscribe")
        if not session.account.can("marketdata"):
            raise _Reject(REJECT["permission"], f"account {session.account.name!r} may not "
                          "receive market data")
        depth = field_int(msg, 264, required=True)
        if depth > MAX_DEPTH:
            raise _Reject(REJECT["depth"], f"MarketDepth (264) must be 0 (every level) or 1-"
                          f"{MAX_DEPTH}")
        update = field(msg, 265)
        if update not in (None, b"1"):
            raise _Reject(REJECT["update_type"], "MDUpdateType (265) must be 1 (incremental)")
        if field(msg, 266) not in (None, b"Y"):
            raise _Reject(REJECT["aggregated"], "AggregatedBook (266) must be Y: the book is "
                          "published by price level")
        types = _group(msg, 267, 269)
        if not types or not set(types) <= ENTRY_TYPES:
            raise _Reject(REJECT["entry_type"], "MDEntryType (269) must be among 0 bid, 1 offer, "
                          "2 trade, 4 opening price, 5 closing price")
        names = _group(msg, 146, 55)
        if not names or len(names) > MAX_SYMBOLS:
            raise _Reject(REJECT["unknown_symbol"], f"a request names 1-{MAX_SYMBOLS} symbols")
        unknown = [n for n in names if n not in self.gw.symbols]
        if unknown:
            raise _Reject(REJECT["unknown_symbol"], f"unknown symbol {unknown[0]!r}")
        if req_id in subs:
            raise _Reject(REJECT["duplicate"], f"MDReqID {req_id} is already subscribed")
        if kind == b"1" and len(subs) >= MAX_SUBSCRIPTIONS:
            raise _Reject(REJECT["bandwidth"], f"a session may hold {MAX_SUBSCRIPTIONS} "
                          "subscriptions")
        sids = tuple(dict.fromkeys(self.gw.symbols[n].id for n in names))
        sub = Subscription(session, req_id, sids, frozenset(types), depth or _ALL)
        if kind == b"1":
            self.by_session.setdefault(session, {})[req_id] = sub
            for sid in sids:
                self.by_symbol.setdefault(sid, []).append(sub)
        if self.gw.engine_lock.locked():
            # a batch is in flight: snapshot once it (and its listeners) are done
            task = asyncio.get_running_loop().create_task(self._start_locked(sub, kind == b"1"))
            self.tasks.add(task)   # why: the loop keeps only a weak reference to a task
            task.add_done_callback(self.tasks.discard)
        else:
            self._start(sub, kind == b"1")

    async def _start_locked(self, sub: Subscription, keep: bool) -> None:
        async with self.gw.engine_lock:
            if keep and self.by_session.get(sub.session, {}).get(sub.req_id) is not sub:
                return   # unsubscribed or dropped while waiting
            self._start(sub, keep)

    def _start(self, sub: Subscription, keep: bool) -> None:
        """Send the snapshot of ``sub`` (the engine is at a batch boundary) and, if ``keep``,
        make it live."""
        engine = self.gw.engine
        if sub.session.closing:
            self._remove(sub)
            return
        messages = []
        for sid in sub.symbols:
            if keep and sid not in self.books:
                self.books[sid] = _Book(engine, sid)
            messages += self._snapshot(sub, sid)
        _charge(sub.session, sum(len(m[1]) for m in messages) // 5)   # ~5 fields per entry
        if keep:
            sub.live = True
        sub.session.send_market_data(messages)

    def _snapshot(self, sub: Subscription, sid: int) -> list:
        """Return the messages of one symbol's snapshot: a W, then X continuations."""
        engine, name, tick = self.gw.engine, self.names[sid], self.ticks[sid]
        entries = []
        bids, asks = engine.depth(sid, sub.depth)
        for etype, rows in ((BID, bids), (OFFER, asks)):
            if etype in sub.types:
                entries += [[(269, etype), (270, _decimal(int(r["price"]), tick)),
                             (271, int(r["qty"])), (346, int(r["count"])), (1023, i + 1)]
                            for i, r in enumerate(rows)]
        ind = _indicative(engine, sid)
        if ind is not None and ind[0] in sub.types:
            entries.append([(269, ind[0]), (270, _decimal(ind[1], tick)), (271, ind[2]),
                            (286, _EXPECTED)])
        rpt = int(engine.seq)
        head, rest = entries[:MAX_ENTRIES], entries[MAX_ENTRIES:]
        body = [(262, sub.req_id), (55, name), (83, rpt), (268, len(head))]
        out = [("W", body + [p for e in head for p in e])]
        cont = [[(279, "0"), (55, name)] + e + [(83, rpt)] for e in rest]
        out += _incremental(sub.req_id, cont)
        return out

    def _remove(self, sub: Subscription) -> None:
        subs = self.by_session.get(sub.session)
        if subs is not None and subs.get(sub.req_id) is sub:
            del subs[sub.req_id]
            if not subs:
                del self.by_session[sub.session]
        for sid in sub.symbols:
            lst = self.by_symbol.get(sid)
            if lst is not None and sub in lst:
                lst.remove(sub)
                if not lst:
                    del self.by_symbol[sid]
                    self.books.pop(sid, None)

    def drop(self, session) -> None:
        """Forget every subscription of ``session`` (it ended)."""
        for sub in list(self.by_session.get(session, {}).values()):
            self._remove(sub)

    def close(self) -> None:
        """Stop listening to the gateway and forget every subscription."""
        self.gw.remove_market_listener(self._on_batch)
        for task in self.tasks:
            task.cancel()
        self.by_session.clear()
        self.by_symbol.clear()
        self.books.clear()

    # -- incrementals --------------------------------------------------------------------------
    def _on_batch(self, batch) -> None:
        """Market listener: send each live subscription the entries of one batch."""
        if not self.by_symbol:
            return
        res = batch.result
        watched = np.fromiter(self.by_symbol, np.uint32, len(self.by_symbol))
        items = []
        fills = res.fills
        for i in np.flatnonzero(np.isin(fills["symbol"], watched)):
            items.append((int(fills["seq"][i]), 0, int(i)))
        l2 = res.l2
        for i in np.flatnonzero(np.isin(l2["symbol"], watched)):
            items.append((int(l2["seq"][i]), 1, int(i)))
        ev = res.events
        symbol_events = np.isin(ev["event"], (Event.PHASE, Event.INDICATIVE, Event.UNCROSS))
        for i in np.flatnonzero(symbol_events & np.isin(ev["symbol"], watched)):
            items.append((int(ev["seq"][i]), 2, int(i)))
        if not items:
            return
        items.sort()
        touched: dict[int, Subscription] = {}
        for seq, table, i in items:
            if table == 0:
                self._trade(fills[i], seq, touched)
            elif table == 1:
                self._level(l2[i], seq, touched)
            else:
                self._auction(ev[i], seq, touched)
        by_session: dict[object, list] = {}
        for sub in touched.values():
            if sub.out:
                by_session.setdefault(sub.session, []).extend(_incremental(sub.req_id, sub.out))
                sub.out = []
        for session, messages in by_session.items():
            session.send_market_data(messages)

    def _subs(self, sid: int, etype: str, touched: dict):
        for sub in self.by_symbol.get(sid, ()):
            if sub.live and etype in sub.types and not sub.session.closing:
                touched[id(sub)] = sub
                yield sub

    def _trade(self, row, seq: int, touched: dict) -> None:
        sid = int(row["symbol"])
        tick, ts = self.ticks[sid], int(row["ts"])
        stamp = utc_timestamp(ts)
        entry = [(279, "0"), (269, TRADE), (278, int(row["trade_id"])), (55, self.names[sid]),
                 (270, _decimal(int(row["price"]), tick)), (271, int(row["qty"])),
                 (272, stamp[:8]), (273, stamp[9:]), (83, seq)]
        for sub in self._subs(sid, TRADE, touched):
            sub.out.append(entry)

    def _level(self, row, seq: int, touched: dict) -> None:
        sid, s = int(row["symbol"]), int(row["side"])
        book = self.books.get(sid)
        if book is None:   # only subscriptions still waiting for their snapshot watch it
            return
        side = book.sides[s]
        price, qty, count = int(row["price"]), int(row["qty"]), int(row["count"])
        key = side.sign * price
        i = bisect_left(side.keys, key)
        exists = i < len(side.keys) and side.keys[i] == key
        if qty == 0:
            if not exists:
                return
            del side.keys[i]
            del side.levels[price]
            action = "2"
        else:
            action = "1" if exists else "0"
            if not exists:
                side.keys.insert(i, key)
            side.levels[price] = (qty, count)
        name, tick, etype = self.names[sid], self.ticks[sid], _SIDE_TYPE[s]
        n = len(side.keys)

        def entry(act: str, p: int, level: int) -> list:
            e = [(279, act), (269, etype), (55, name), (270, _decimal(p, tick))]
            if act != "2":
                q, c = side.levels[p]
                e += [(271, q), (346, c)]
            return e + [(1023, level), (83, seq)]

        for sub in self._subs(sid, etype, touched):
            depth = sub.depth
            if i >= depth:
                continue
            if action == "2":
                sub.out.append(entry("2", price, i + 1))
                if n >= depth:   # the level after the window moves into it
                    sub.out.append(entry("0", side.price_at(depth - 1), depth))
            elif action == "0":
                if n > depth:    # the last level of the window is pushed out
                    sub.out.append(entry("2", side.price_at(depth), depth))
                sub.out.append(entry("0", price, i + 1))
            else:
                sub.out.append(entry("1", price, i + 1))

    def _auction(self, row, seq: int, touched: dict) -> None:
        sid, kind = int(row["symbol"]), int(row["event"])
        book = self.books.get(sid)
        if book is None:
            return
        old = book.indicative
        new, actual = old, None
        if kind == Event.INDICATIVE:
            price = int(row["price"])
            etype = CLOSING if int(row["phase"]) == Phase.PRE_CLOSE else OPENING
            new = (etype, price, int(row["filled_qty"])) if price else None
        elif kind == Event.UNCROSS:
            new = None
            etype = CLOSING if int(row["phase"]) == Phase.CLOSING_AUCTION else OPENING
            actual = (etype, int(row["price"]), int(row["filled_qty"]))
        elif int(row["phase"]) not in CALL_PHASES:
            new = None
        if new == old and actual is None:
            return
        book.indicative = new
        name, tick = self.names[sid], self.ticks[sid]
        stamp = utc_timestamp(int(row["ts"]))
        entries = []   # (entry type, entry)
        if old is not None and (new is None or new[0] != old[0]):
            entries.append((old[0], [(279, "2"), (269, old[0]), (55, name),
                                     (270, _decimal(old[1], tick)), (286, _EXPECTED),
                                     (83, seq)]))
        if new is not None:
            act = "1" if old is not None and old[0] == new[0] else "0"
            entries.append((new[0], [(279, act), (269, new[0]), (55, name),
                                     (270, _decimal(new[1], tick)), (271, new[2]),
                                     (286, _EXPECTED), (83, seq)]))
        if actual is not None:
            entries.append((actual[0], [(279, "0"), (269, actual[0]), (55, name),
                                        (270, _decimal(actual[1], tick)), (271, actual[2]),
                                        (272, stamp[:8]), (273, stamp[9:]), (83, seq)]))
        for etype, e in entries:
            for sub in self._subs(sid, etype, touched):
                sub.out.append(e)


def _budget(session) -> float:
    """Return the snapshot levels ``session`` may still be sent now (below 0: none)."""
    now = time.monotonic()
    burst = 5.0 * SNAPSHOT_LEVELS_PER_S
    tokens, at = getattr(session, "md_budget", (burst, now))
    tokens = min(burst, tokens + (now - at) * SNAPSHOT_LEVELS_PER_S)
    session.md_budget = (tokens, now)
    return tokens


def _charge(session, levels: int) -> None:
    """Take ``levels`` off ``session``'s snapshot budget (it may go below 0: the next
    snapshot request is refused until it refills)."""
    tokens = _budget(session)
    session.md_budget = (tokens - levels, session.md_budget[1])


def _incremental(req_id: str, entries: list) -> list:
    """Return the X messages carrying ``entries`` (at most MAX_ENTRIES each), in order."""
    return [("X", [(262, req_id), (268, len(chunk))] + [p for e in chunk for p in e])
            for chunk in (entries[k:k + MAX_ENTRIES] for k in range(0, len(entries),
                                                                     MAX_ENTRIES))]


def _group(msg, count_tag: int, item_tag: int) -> list[str]:
    """Return the ``item_tag`` values of the repeating group counted by ``count_tag``.

    Raises FieldError: 373=1 if the count is missing, 373=16 if it disagrees with the entries,
    373=6 if an entry is not printable ASCII of at most 64 characters."""
    count = field_int(msg, count_tag, required=True, lo=0, hi=1024)
    items, in_group = [], False
    for tag, value in msg.pairs:
        tag = int(tag)
        if tag == count_tag:
            in_group = True
        elif tag == item_tag and in_group:
            if not (0 < len(value) <= 64 and all(0x20 <= b < 0x7F for b in value)):
                raise FieldError(6, f"tag {item_tag} is not 1-64 printable ASCII", item_tag)
            items.append(value.decode("ascii"))
    if len(items) != count:
        raise FieldError(16, f"NumInGroup ({count_tag}) is {count} but {len(items)} entries "
                         f"of tag {item_tag} follow", count_tag)
    return items
