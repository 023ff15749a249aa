"""An asyncio FIX 4.4 client of the gateway's FIX port (docs/gateway-fix.md has an example).

``await FixClient.connect(host, port, name, password)`` opens a connection and logs on;
``new_order`` / ``cancel`` / ``replace`` send orders; ``expect`` waits for the next message
of a type (ExecutionReports, OrderCancelRejects, Rejects ...). The client keeps its sequence
numbers and the application messages it sent, so ``reconnect()`` after a dropped connection
(or a gateway restart) resumes the session: a gap in what the gateway sends is filled by a
ResendRequest, a ResendRequest from the gateway is answered from the sent messages.

Invariants:
- Messages are handed to the caller in MsgSeqNum order, each once: a PossDupFlag=Y copy of a
  message already received is dropped; while a ResendRequest of ours is outstanding, messages
  beyond the gap are dropped (the resend brings them again, in order).
- Every wait has a timeout (asyncio.TimeoutError); nothing here blocks forever.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field as dc_field
from decimal import Decimal

from exsim.exchange.gateway.fix.codec import Framer, Garbled, body_of, build, parse_frame, \
    utc_timestamp
from exsim.exchange.gateway.fix.dialect import EXTENSION_TAG

__all__ = ["FixClient", "FixMessage", "FixClientError", "MarketDataBook"]

ADMIN = frozenset({"0", "1", "2", "4", "5", "A"})


class FixClientError(Exception):
    """The gateway refused the logon or the connection ended while a caller waited."""


@dataclass
class FixMessage:
    """One received message: ``type`` (35), ``seq`` (34), ``fields`` [(tag, str value)]."""

    type: str
    seq: int
    fields: list = dc_field(default_factory=list)
    raw: bytes = b""

    def get(self, tag: int, default=None):
        """Return the first value of ``tag`` (str), or ``default``."""
        for t, v in self.fields:
            if t == tag:
                return v
        return default

    def __getitem__(self, tag: int) -> str:
        v = self.get(tag)
        if v is None:
            raise KeyError(tag)
        return v

    def __contains__(self, tag: int) -> bool:
        return self.get(tag) is not None


class FixClient:
    """One FIX session with the gateway (module docstring)."""

    def __init__(self, host: str, port: int, name: str, password: str, *, target: str = "EXSIM",
                 heartbeat: int = 30, dropcopy: bool = False, marketdata: bool = False,
                 max_message_size: int = 1 << 16, extensions: bool = False):
        self.host, self.port, self.name, self.password = host, port, name, password
        self.target, self.heartbeat, self.dropcopy = target, heartbeat, dropcopy
        self.marketdata = marketdata
        # ask for exsim's FIX extensions at logon (880 TrdMatchID, ExecType L, 83 / 1023 in
        # market data: docs/gateway-fix.md, "Dialect"); without them the gateway speaks FIX 4.4
        self.extensions = extensions
        self.md_requests: dict[str, list] = {}   # MDReqID -> its symbols and types (unsubscribe)
        self.max_message_size = max_message_size
        self.next_out = 1
        self.next_in = 1
        self.sent: dict[int, bytes] = {}        # seq -> raw application message we sent
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.received: list[FixMessage] = []    # every message handed out, in order
        self.logged_on = False
        self.resend_until = 0
        self._reader = self._writer = None
        self._tasks: list[asyncio.Task] = []
        self._last_sent = 0.0
        self._ids = itertools.count(1)

    # -- the connection --------------------------------------------------------------------------
    @classmethod
    async def connect(cls, host: str, port: int, name: str, password: str, *,
                      timeout: float = 5.0, reset: bool = False, **kw) -> "FixClient":
        """Return a client logged on to the gateway at (host, port).

        Raises FixClientError if the gateway answers the Logon with a Logout (its Text says
        why) or closes, asyncio.TimeoutError if no answer comes within ``timeout`` s, OSError
        if the connection fails."""
        client = cls(host, port, name, password, **kw)
        await client.logon(timeout=timeout, reset=reset)
        return client

    async def logon(self, *, timeout: float = 5.0, reset: bool = False) -> FixMessage:
        """Open the connection and log on; return the gateway's Logon. Raises as ``connect``."""
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port), timeout)
        self.logged_on = False
        self.resend_until = 0
        if reset:
            self.next_out, self.next_in, self.sent = 1, 1, {}
        self.inbox = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._beat())]
        body = [(98, 0), (108, self.heartbeat), (553, self.name), (554, self.password)]
        if reset:
            body.append((141, "Y"))
        if self.extensions:
            body.append((EXTENSION_TAG, "Y"))
        if self.dropcopy or self.marketdata:
            body.insert(0, (57, "DROPCOPY" if self.dropcopy else "MARKETDATA"))
        self.send("A", body)
        msg = await self.expect("A", "5", timeout=timeout)
        if msg.type == "5":
            raise FixClientError(f"logon refused: {msg.get(58, '')}")
        return msg

    async def reconnect(self, *, timeout: float = 5.0) -> FixMessage:
        """Close the connection (if open) and log on again with the same sequence numbers;
        return the gateway's Logon. Raises as ``connect``."""
        await self.close()
        return await self.logon(timeout=timeout)

    async def logout(self, text: str | None = None, *, timeout: float = 5.0) -> None:
        """Send Logout, wait for the gateway's Logout (up to ``timeout``) and close."""
        if self._writer is not None and not self._writer.is_closing():
            self.send("5", [(58, text)] if text else [])
            try:
                await self.expect("5", timeout=timeout)
            except (asyncio.TimeoutError, FixClientError):
                pass
        await self.close()

    async def close(self) -> None:
        """Close the connection at once (no Logout): what a crashed client does."""
        for t in self._tasks:
            t.cancel()
        self._tasks = []
        if self._writer is not None:
            self._writer.close()
            try:
                await asyncio.wait_for(self._writer.wait_closed(), 2)
            except (asyncio.TimeoutError, ConnectionError, OSError):
                pass
        self._writer = None
        self.logged_on = False

    # -- sending ---------------------------------------------------------------------------------
    def send(self, msg_type: str, body: list) -> int:
        """Send one message with the next MsgSeqNum; return that MsgSeqNum. Application
        messages are kept for a resend. Raises FixClientError if not connected."""
        if self._writer is None or self._writer.is_closing():
            raise FixClientError("not connected")
        seq = self.next_out
        self.next_out += 1
        raw = build(msg_type, self.name, self.target, seq, utc_timestamp(time.time_ns()), body)
        if msg_type not in ADMIN and msg_type != "3":
            self.sent[seq] = raw
        self._writer.write(raw)
        self._last_sent = time.monotonic()
        return seq

    def send_raw(self, data: bytes) -> None:
        """Write ``data`` as it is (tests of malformed input). Raises FixClientError if not
        connected."""
        if self._writer is None or self._writer.is_closing():
            raise FixClientError("not connected")
        self._writer.write(data)

    def new_client_id(self, prefix: str = "C") -> str:
        """Return a client order id not used before by this client object."""
        return f"{prefix}{next(self._ids)}-{time.monotonic_ns() % 10**9}"

    def new_order(self, cl_ord_id: str, symbol: str, side: str, qty: int, price=None, *,
                  ord_type: str | None = None, tif: str | None = None, stop_px=None,
                  expire_time: str | None = None, post_only: bool = False,
                  max_floor: int | None = None, min_qty: int | None = None) -> int:
        """Send a NewOrderSingle; return its MsgSeqNum. ``side``: "buy"/"sell" or "1"/"2";
        ``ord_type`` defaults to limit ("2") with a price, market ("1") without; prices are
        decimals (str, int or Decimal). ``tif``: "0" DAY (default), "1" GTC, "3" IOC, "4" FOK,
        "6" GTD (give ``expire_time`` as a FIX UTCTimestamp)."""
        if ord_type is None:
            ord_type = "2" if price is not None else "1"
        body = [(11, cl_ord_id), (55, symbol), (54, _side(side)),
                (60, utc_timestamp(time.time_ns())), (38, qty), (40, ord_type)]
        body += _order_extras(price, tif, stop_px, expire_time, post_only, max_floor, min_qty)
        return self.send("D", body)

    def cancel(self, cl_ord_id: str, orig_cl_ord_id: str, symbol: str, side: str) -> int:
        """Send an OrderCancelRequest for the order ``orig_cl_ord_id``; return its MsgSeqNum."""
        return self.send("F", [(11, cl_ord_id), (41, orig_cl_ord_id), (55, symbol),
                               (54, _side(side)), (60, utc_timestamp(time.time_ns()))])

    def replace(self, cl_ord_id: str, orig_cl_ord_id: str, symbol: str, side: str, qty: int,
                price=None, *, ord_type: str = "2", tif: str | None = None, stop_px=None) -> int:
        """Send an OrderCancelReplaceRequest: the order gets total quantity ``qty`` and
        ``price``; return its MsgSeqNum."""
        body = [(11, cl_ord_id), (41, orig_cl_ord_id), (55, symbol), (54, _side(side)),
                (60, utc_timestamp(time.time_ns())), (38, qty), (40, ord_type)]
        body += _order_extras(price, tif, stop_px, None, False, None, None)
        return self.send("G", body)

    def subscribe(self, symbols, *, depth: int = 0, types=("0", "1", "2"),
                  snapshot_only: bool = False, req_id: str | None = None) -> str:
        """Send a MarketDataRequest for ``symbols`` (a name or a list of names); return its
        MDReqID. ``depth``: 0 every level, N the best N per side; ``types``: MDEntryTypes
        ("0" bid, "1" offer, "2" trade, "4" opening, "5" closing price); ``snapshot_only``: one
        W per symbol and no updates. Apply the W / X messages to a ``MarketDataBook``. Raises
        FixClientError if not connected."""
        names = [symbols] if isinstance(symbols, str) else list(symbols)
        req_id = req_id or self.new_client_id("MD")
        groups = [(267, len(types))] + [(269, t) for t in types] + \
            [(146, len(names))] + [(55, n) for n in names]
        self.send("V", [(262, req_id), (263, "0" if snapshot_only else "1"), (264, depth),
                        (265, 1)] + groups)
        if not snapshot_only:
            self.md_requests[req_id] = [(264, depth)] + groups
        return req_id

    def unsubscribe(self, req_id: str) -> int:
        """End the subscription ``req_id`` (MarketDataRequest 263=2); return its MsgSeqNum.
        Raises KeyError if this client made no such subscription, FixClientError if not
        connected."""
        groups = self.md_requests.pop(req_id)
        return self.send("V", [(262, req_id), (263, "2")] + groups)

    # -- receiving -------------------------------------------------------------------------------
    async def next(self, timeout: float = 5.0) -> FixMessage:
        """Return the next message handed out (not Heartbeats and session-internal ones).
        Raises asyncio.TimeoutError, FixClientError if the connection ended."""
        if not self.inbox.empty():   # why: no timer for a message already here
            msg = self.inbox.get_nowait()
        else:
            msg = await asyncio.wait_for(self.inbox.get(), timeout)
        if msg is None:
            self.inbox.put_nowait(None)   # keep telling later callers
            raise FixClientError("the connection ended")
        return msg

    async def expect(self, *types: str, timeout: float = 5.0, where=None) -> FixMessage:
        """Return the next message whose type is one of ``types`` (and for which ``where(msg)``
        is true), dropping the others. Raises asyncio.TimeoutError after ``timeout`` s in all,
        FixClientError if the connection ended first."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise asyncio.TimeoutError(f"no message of type {types} within {timeout} s")
            msg = await self.next(left)
            if (not types or msg.type in types) and (where is None or where(msg)):
                return msg

    async def _read(self) -> None:
        framer = Framer(self.max_message_size)
        try:
            while True:
                data = await self._reader.read(65536)
                if not data:
                    break
                framer.feed(data)
                while True:
                    item = framer.next()
                    if item is None:
                        break
                    if isinstance(item, Garbled):
                        continue
                    self._on_frame(item)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        except Exception:   # a framing error from the gateway: report it as the end
            pass
        finally:
            self.logged_on = False
            self.inbox.put_nowait(None)

    def _on_frame(self, frame: bytes) -> None:
        m = parse_frame(frame)
        msg = FixMessage(m.message_type.decode(), int(m.get(34)),
                         [(int(t), v.decode("latin-1")) for t, v in m.pairs], frame)
        poss_dup = msg.get(43) == "Y"
        if msg.type == "4" and msg.get(123) != "Y":
            self.next_in = int(msg[36])
            return
        if msg.seq < self.next_in:
            if not poss_dup:
                self._deliver(msg)   # a gateway bug; let the caller see it
            return
        if msg.seq > self.next_in:
            if msg.type == "A":
                self.logged_on = True
                self._deliver(msg)
            if msg.type == "5":
                self._deliver(msg)
                return
            if msg.type == "2":
                # why: FIX answers a ResendRequest even beyond a gap (then asks for the gap);
                # the gateway gap-fills its own ResendRequest when it resends, so ignoring it
                # here would leave our lost message unsent and both sides waiting
                self._resend(int(msg[7]), int(msg[16]))
            if self.resend_until == 0:
                self.send("2", [(7, self.next_in), (16, 0)])
            self.resend_until = max(self.resend_until, msg.seq)
            return
        self.next_in += 1
        if self.resend_until and self.next_in > self.resend_until:
            self.resend_until = 0
        if msg.type == "0":
            return
        if msg.type == "1":
            self.send("0", [(112, msg.get(112, ""))])
        elif msg.type == "2":
            self._resend(int(msg[7]), int(msg[16]))
        elif msg.type == "4":
            self.next_in = max(self.next_in, int(msg[36]))
        else:
            if msg.type == "A":
                self.logged_on = True
            self._deliver(msg)

    def _deliver(self, msg: FixMessage) -> None:
        self.received.append(msg)
        self.inbox.put_nowait(msg)

    def _resend(self, begin: int, end: int) -> None:
        last = self.next_out - 1
        end = last if end == 0 or end > last else end
        pos, now = begin, utc_timestamp(time.time_ns())
        parts = []
        for seq in range(begin, end + 1):
            raw = self.sent.get(seq)
            if raw is None:
                continue
            if seq > pos:
                parts.append(self._gap(pos, seq, now))
            msg_type, body, sent = body_of(raw)
            parts.append(build(msg_type, self.name, self.target, seq, now, body, poss_dup=True,
                               orig_sending_time=sent))
            pos = seq + 1
        if pos <= end:
            parts.append(self._gap(pos, end + 1, now))
        if parts and self._writer is not None:
            self._writer.write(b"".join(parts))

    def _gap(self, first: int, next_seq: int, now: str) -> bytes:
        return build("4", self.name, self.target, first, now, [(123, "Y"), (36, next_seq)],
                     poss_dup=True, orig_sending_time=now)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(max(0.2, self.heartbeat / 4))
            if time.monotonic() - self._last_sent >= self.heartbeat * 0.9 and self.logged_on:
                try:
                    self.send("0", [])
                except FixClientError:
                    return


def _side(side: str) -> str:
    return {"buy": "1", "sell": "2", "b": "1", "s": "2"}.get(str(side).lower(), str(side))


def _order_extras(price, tif, stop_px, expire_time, post_only, max_floor, min_qty) -> list:
    out = []
    if price is not None:
        out.append((44, _dec(price)))
    if stop_px is not None:
        out.append((99, _dec(stop_px)))
    if tif is not None:
        out.append((59, tif))
    if expire_time is not None:
        out.append((126, expire_time))
    if post_only:
        out.append((18, "6"))
    if max_floor is not None:
        out.append((111, max_floor))
    if min_qty is not None:
        out.append((110, min_qty))
    return out


def _dec(v) -> str:
    return format(Decimal(str(v)), "f")


@dataclass
class MarketDataBook:
    """A local copy of the gateway's books built from MarketData W / X messages (all
    subscriptions of a session, or one: give ``req_id``).

    ``bids[symbol]`` / ``asks[symbol]`` map a price (Decimal) to (size, number of orders);
    ``trades`` lists (symbol, price, size, trade id) in order; ``auction[symbol]`` maps
    (MDEntryType, "expected" | "actual") to (price, size). ``seq[symbol]`` is the last engine
    seq (83 RptSeq) applied: a session with the extensions only (plain FIX 4.4 has no 83)."""

    req_id: str | None = None
    bids: dict = dc_field(default_factory=dict)
    asks: dict = dc_field(default_factory=dict)
    trades: list = dc_field(default_factory=list)
    auction: dict = dc_field(default_factory=dict)
    seq: dict = dc_field(default_factory=dict)

    def apply(self, msg: FixMessage) -> bool:
        """Apply one message; return True if it was a W or X of this book's subscription."""
        if msg.type not in ("W", "X") or (self.req_id is not None
                                          and msg.get(262) != self.req_id):
            return False
        if msg.type == "W":
            symbol = msg[55]
            self.bids[symbol], self.asks[symbol] = {}, {}
            self.auction[symbol] = {}
            self.seq[symbol] = int(msg.get(83, 0))
            for e in _entries(msg.fields, 269):
                self._put(symbol, "0", e)
            return True
        for e in _entries(msg.fields, 279):
            symbol = e[55]
            if e[279] == "2":
                self._delete(symbol, e)
            else:
                self._put(symbol, e[279], e)
            if 83 in e:
                self.seq[symbol] = int(e[83])
        return True

    def _put(self, symbol: str, action: str, e: dict) -> None:
        etype = e[269]
        if etype in ("0", "1"):
            side = self.bids if etype == "0" else self.asks
            side.setdefault(symbol, {})[Decimal(e[270])] = (int(e[271]), int(e.get(346, 0)))
        elif etype == "2":
            self.trades.append((symbol, Decimal(e[270]), int(e[271]), e.get(278)))
        else:
            kind = "expected" if e.get(286) == "3" else "actual"
            self.auction.setdefault(symbol, {})[(etype, kind)] = (Decimal(e[270]), int(e[271]))

    def _delete(self, symbol: str, e: dict) -> None:
        etype = e[269]
        if etype in ("0", "1"):
            side = self.bids if etype == "0" else self.asks
            side.get(symbol, {}).pop(Decimal(e[270]), None)
        else:
            kind = "expected" if e.get(286) == "3" else "actual"
            self.auction.get(symbol, {}).pop((etype, kind), None)

    def levels(self, symbol: str, side: str) -> list:
        """Return [(price, size, orders)] of ``side`` ("bid" or "ask") of ``symbol``, best
        first."""
        book = (self.bids if side == "bid" else self.asks).get(symbol, {})
        return [(p, q, c) for p, (q, c) in sorted(book.items(), reverse=side == "bid")]


def _entries(fields: list, first_tag: int) -> list[dict]:
    """Return the repeating-group entries of ``fields``: each starts at ``first_tag``."""
    out, cur = [], None
    for tag, value in fields:
        if tag == first_tag:
            cur = {}
            out.append(cur)
        if cur is not None and tag != 10:
            cur.setdefault(tag, value)
    return out
