"""The OUCH 5.0 order-entry port: OUCH 5.0 messages over SoupBinTCP 3.0 on a ``Gateway``.

A client logs in with a SoupBinTCP Login Request (6-byte username, 10-byte password: the
account's name and secret, checked by ``gw.guard.authenticate(..., "trade")``; requested session
blank or this port's ``session``; requested sequence number). Each account has one sequenced
stream: message 1 is a System Event "S" (start of day, timestamp 0), message n >= 2 is the
account's report ``rseq`` n - 1 on the core's stream ``ouch50:<account>``, so a client that logs
in again (also to a restarted server) with the next number it expects gets the same messages and
nothing twice. Orders arrive in Unsequenced Data packets; every packet of one socket read is
decoded in one ``ouch50.decode`` call and submitted in order.

Invariants:
- Replay and live meet without a gap or a repeat: the head is read and ``subscribe`` runs with
  no await between; the replay is read ``SEND_CHUNK`` reports at a time on the gateway's replay
  thread within the port's budget of ``replay_per_s`` reports a second. A replay that starts
  inside an engine message's reports first reads (and does not send) that message's earlier
  reports, so its bytes are the live ones (the Liquidity Flag, ``_fold_back``).
- No session stalls another: report callbacks only queue; a session whose queue passes
  ``max_queued_reports`` or whose socket buffer passes ``max_buffer_bytes`` is disconnected
  (it logs in again and replays by sequence number).
- Every read has a deadline: the login within ``login_timeout_s``, then some packet within
  ``idle_s`` (SoupBinTCP: 15 s); the server sends a heartbeat after ``heartbeat_s`` of silence.
- UserRefNums: an Enter or Replace whose UserRefNum is not above the last one this port took
  for the account (this run) is ignored, as the spec says; one the core has seen (an earlier
  run) is refused by the core (duplicate client order id), a sequenced Rejected.
- A message this port cannot read (unknown type, bad length, malformed appendage) is answered
  by a Debug packet naming why and is otherwise ignored; nothing a client sends raises.
- Reductions: a Cancel with Quantity > 0 is the core's replace of the order at its price to
  that total size (it keeps its place), with client order id ``<UserRefNum>r<k>d<decrement>``
  (the decrement: the total it had minus the new one); the port
  keeps, per order it entered in this run, its symbol, current client order id and prices
  (``entered``), so a reduction of an order entered before a restart is ignored (Debug).
- ClOrdIDs are kept in memory and appended to ``data_dir/gateway/ouch50-clordid.txt`` before
  the order is submitted, so the Accepted/Replaced/Rejected of a replay after a restart carry
  them too (the file is not fsynced: after a machine crash a replay may show blanks).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway.accounts import AuthError
from exsim.exchange.gateway.core import RateLimiter, Request
from exsim.exchange.gateway.nasdaq import ouch50, soupbintcp as soup
from exsim.exchange.gateway.nasdaq.soupbintcp import Packet, frame
from exsim.exchange.gateway.nasdaq.soupsession import (SoupSession, end_sessions,
                                                      serve_connection, wait_sessions)

__all__ = ["OuchServer", "start", "DEFAULTS", "STREAM_PREFIX"]

log = logging.getLogger(__name__)

STREAM_PREFIX = "ouch50:"
DEFAULTS = dict(
    session="EXSIM",            # SoupBinTCP session name (at most 10 characters)
    heartbeat_s=1.0,            # server heartbeat after this long without other output
    idle_s=15.0,                # disconnect a client silent for this long
    login_timeout_s=5.0,        # the Login Request must arrive within this
    max_queued_reports=10_000,  # live reports waiting for one slow reader before it is dropped
    max_buffer_bytes=1 << 20,   # bytes in one socket's write buffer before it is dropped
    max_sessions=1024,          # logged-in sessions at once
    replay_per_s=20_000,        # stored reports all replays of the port read per second
)
SEND_CHUNK = 256
READ_CHUNK = 1 << 16
MAX_PACKET = 1 + 1024           # an OUCH inbound message with its appendage fits in 1 KiB
CLORDID_FILE = "ouch50-clordid.txt"


class OuchServer:
    """The listening port and its sessions (``close()``; ``await wait_closed()``)."""

    def __init__(self, gw, accounts, options: dict):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown OUCH 5.0 port option(s) {sorted(unknown)}; "
                            f"known: {sorted(DEFAULTS)}")
        self.gw, self.accounts = gw, accounts
        self.opts = {**DEFAULTS, **options}
        if len(self.opts["session"]) > 10:
            raise UsageError(f"a SoupBinTCP session name is at most 10 characters; got "
                             f"{self.opts['session']!r}")
        self.prices = {name: ouch50.PriceMap(s.tick_size) for name, s in gw.symbols.items()}
        self.sessions: set[_Session] = set()
        self.last_ref: dict[str, int] = {}
        # (account, UserRefNum) -> _Entered: what this run sent for each order (module
        # docstring, "Reductions")
        self.entered: dict[tuple[str, int], _Entered] = {}
        self._clordids: dict[tuple[str, int], bytes] = {}
        self._clordid_path = os.path.join(gw.state_dir, CLORDID_FILE)
        self._load_clordids()
        self._clordid_file = open(self._clordid_path, "a", encoding="ascii")
        self._server = None
        self._closing = False
        self._replay_tokens, self._replay_at = float(SEND_CHUNK), 0.0

    def _load_clordids(self) -> None:
        try:
            with open(self._clordid_path, encoding="ascii", errors="replace") as f:
                for line in f:
                    parts = line.rstrip("\n").split("\t")
                    if len(parts) == 3 and parts[1].isdigit():
                        self._clordids[(parts[0], int(parts[1]))] = bytes.fromhex(parts[2])
        except FileNotFoundError:
            pass
        except ValueError:   # a torn last line after a crash: the rest is kept
            log.warning("%s: a line could not be read; ClOrdIDs after it are blank",
                        self._clordid_path)

    def clordid(self, account: str, ref: int) -> bytes:
        """Return the ClOrdID the client gave with UserRefNum ``ref`` (b"" if none known)."""
        return self._clordids.get((account, ref), b"")

    def remember(self, account: str, ref: int, clordid: bytes) -> None:
        """Keep a ClOrdID in memory and queue its line for the append-only file (written by
        ``flush_clordids``, which the session calls before it submits the read's orders)."""
        if clordid.strip():
            self._clordids[(account, ref)] = clordid
            self._clordid_file.write(f"{account}\t{ref}\t{clordid.hex()}\n")

    def flush_clordids(self) -> None:
        """Write the queued ClOrdID lines to the file (one write per socket read, not per
        order)."""
        self._clordid_file.flush()

    async def replay_turn(self, n: int) -> None:
        """Wait until the port's replay budget holds ``n`` reports, then take them."""
        rate = float(self.opts["replay_per_s"])
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            self._replay_tokens = min(max(rate, float(n)),
                                      self._replay_tokens + (now - self._replay_at) * rate)
            self._replay_at = now
            if self._replay_tokens >= n:
                self._replay_tokens -= n
                return
            await asyncio.sleep((n - self._replay_tokens) / rate)

    @property
    def sockets(self):
        """The listening sockets (``exsim serve`` reads the address from ``sockets[0]``)."""
        return self._server.sockets if self._server else ()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self.sockets[0].getsockname()[1]

    async def _handle(self, reader, writer):
        logged_in = sum(1 for s in self.sessions if s.account is not None)
        if self._closing or logged_in >= self.opts["max_sessions"]:
            writer.transport.abort()
            return
        await serve_connection(self, "ouch50", _Session, reader, writer)

    def close(self, reason: str | None = None) -> None:
        """Stop listening, send End of Session to logged-in clients (after a Debug packet
        with ``reason``, if given), close every session."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        end_sessions(self.sessions, reason)

    async def wait_closed(self) -> None:
        """Wait until the listener and every session are closed (at most ~2 s)."""
        if self._server is not None:
            await self._server.wait_closed()
        await wait_sessions(self.sessions)
        if not self._clordid_file.closed:
            self._clordid_file.close()


async def start(gw, host: str = "127.0.0.1", port: int = 0, **options) -> OuchServer:
    """Listen for OUCH 5.0 sessions on host:port (0: any free port). Options: DEFAULTS,
    ``accounts`` (default ``gw.accounts``), ``ssl`` (an SSLContext). Returns the OuchServer.
    Raises TypeError for an unknown option, UsageError for a symbol whose tick size OUCH
    prices cannot name or a session name over 10 characters, OSError if the address cannot
    be bound."""
    accounts = options.pop("accounts", None) or gw.accounts
    tls = options.pop("ssl", None)
    srv = OuchServer(gw, accounts, options)
    srv._server = await asyncio.start_server(srv._handle, host, port, limit=1 << 16, ssl=tls)
    return srv


class _Session(SoupSession):
    """One client connection: login, the sender (replay then live), heartbeats, the reader."""

    what = "OUCH 5.0"

    def __init__(self, server: OuchServer, reader, writer, ticket):
        super().__init__(server, reader, writer, ticket)
        self.account = None
        self.stream = ""
        self.encoder = ouch50.Encoder(server.prices, server.clordid)
        self.replay_from = self.replay_to = 0   # rseqs (after, upto] still to replay
        self.send_event = False                 # message 1 (System Event) is due
        self.live: collections.deque = collections.deque()
        self.queued_rseq = self.sent_rseq = 0

    def unsubscribe(self) -> None:
        """Stop hearing the account's reports."""
        if self.account is not None:
            self.gw.unsubscribe(self.stream, self._on_reports)

    def _on_reports(self, reports) -> None:
        entered = self.server.entered
        for r in reports:
            if r.exec == "replace_rejected" and ("r" in r.client_order_id
                                                 or "m" in r.client_order_id):
                # a refused reduction did not rename the order: later requests use the old id
                e = entered.get((r.account, ouch50.user_ref_of(r.client_order_id)))
                if e is not None and e.cid == r.client_order_id:
                    e.cid = r.orig_client_order_id
                    e.total += ouch50.reduction_of(r.client_order_id)
        if self.closed:
            return
        for r in reports:
            if r.rseq > self.queued_rseq:
                self.live.append(r)
                self.queued_rseq = r.rseq
        if len(self.live) > self.opts["max_queued_reports"]:
            self.drop("more than max_queued_reports reports waiting (a slow reader)")
            return
        self.wake.set()

    async def _fold_back(self) -> None:
        """Before a replay from the middle of a batch, encode (not send) the reports of the
        same engine message before it: an Executed's Liquidity Flag is "R" when the order's
        own message traded, which an earlier report of that message told. A login at the
        head needs nothing: a batch's reports are dispatched together."""
        after = self.replay_from
        if after == 0 or after >= self.replay_to:
            return
        first = await self.gw.replay_stream(self.stream, after, 1)
        if not first:
            return
        seq, span = first[0].seq, SEND_CHUNK
        while True:
            lo = max(after - span, 0)
            await self.server.replay_turn(after - lo)
            window = await self.gw.replay_stream(self.stream, lo, after - lo)
            if lo == 0 or not window or window[0].seq != seq:
                break
            span *= 2   # one engine message's reports reach further back
        self.encoder.encode([r for r in window if r.seq == seq])

    async def _sender(self) -> None:
        try:
            if self.send_event:
                self._write(frame(Packet.SEQUENCED, ouch50.system_event(0, b"S")))
            await self._fold_back()
            while not self.closed:
                if self.replay_from < self.replay_to:
                    n = min(SEND_CHUNK, self.replay_to - self.replay_from)
                    await self.server.replay_turn(n)
                    chunk = await self.gw.replay_stream(self.stream, self.replay_from, n)
                    if self.closed:
                        return
                    if not chunk:
                        self.drop(f"replay ended early at rseq {self.replay_from}")
                        return
                    self.replay_from = chunk[-1].rseq
                elif self.live:
                    chunk = [self.live.popleft() for _ in range(min(SEND_CHUNK, len(self.live)))]
                else:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                for r in chunk:
                    if r.rseq != self.sent_rseq + 1:
                        self.drop(f"report stream gap: rseq {r.rseq} after {self.sent_rseq}")
                        return
                    self.sent_rseq = r.rseq
                # the chunk's reports as one buffer, one write
                self._write(b"".join(frame(Packet.SEQUENCED, m)
                                     for m in self.encoder.encode(chunk)))
                if self.transport.get_write_buffer_size() > 1 << 16:
                    try:
                        await asyncio.wait_for(self.writer.drain(), self.opts["idle_s"])
                    except asyncio.TimeoutError:
                        self.drop(f"its socket took no bytes for {self.opts['idle_s']:g} s")
                        return
                else:
                    await asyncio.sleep(0)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:   # a report that cannot be encoded: this session ends, loudly
            log.exception("OUCH 5.0 session %s: sending failed", self.peer)
            self.drop("a report could not be sent")

    # -- input -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the connection until logout, a broken rule, silence, or the server closes."""
        try:
            buf = await self._login()
            if buf is None:
                return
            await self._packets(buf)
        except soup.SoupError as e:
            self.drop(str(e))
        except ConnectionError as e:
            self.drop(f"connection error: {e}")

    async def _read(self, buf: bytes, deadline_s: float) -> tuple[list, bytes, bool]:
        """Return (whole packets, rest, eof) after at most one read within ``deadline_s``.
        Raises SoupError on a timeout, or a stream ending inside a packet."""
        packets, buf = soup.split_packets(buf, MAX_PACKET)
        if packets:
            return packets, buf, False
        try:
            chunk = await asyncio.wait_for(self.reader.read(READ_CHUNK), deadline_s)
        except asyncio.TimeoutError:
            raise soup.SoupError(f"nothing whole received for {deadline_s:g} s") from None
        if not chunk:
            if buf:
                raise soup.SoupError("the connection ended inside a packet")
            return [], b"", True
        packets, buf = soup.split_packets(buf + chunk, MAX_PACKET)
        return packets, buf, False

    async def _login(self) -> bytes | None:
        """Run the login; return the bytes read after it (None: the connection is over)."""
        deadline = self.loop.time() + self.opts["login_timeout_s"]
        buf = b""
        while True:
            left = deadline - self.loop.time()
            if left <= 0:
                raise soup.SoupError("no Login Request within login_timeout_s")
            packets, buf, eof = await self._read(buf, left)
            if eof:
                return None
            if packets:
                break
        (ptype, payload), rest = packets[0], packets[1:]
        self.ticket.presented()
        if ptype != Packet.LOGIN_REQUEST:
            self.drop(f"packet type {ptype:#04x} before the login")
            return None
        try:
            req = soup.parse_login(payload)
        except soup.SoupError as e:
            self.gw.guard.record_failure("ouch50", self.peer, None, str(e))
            return self.rejected(soup.REJECT_AUTH, str(e))
        try:
            account = await self.gw.guard.authenticate(self.server.accounts, "ouch50", self.peer,
                                                       req.username, req.password, "trade")
        except AuthError as e:
            return self.rejected(soup.REJECT_AUTH, str(e))
        if req.session not in ("", self.opts["session"]) or self.closed:
            return self.rejected(soup.REJECT_SESSION, f"no session {req.session!r}")
        self.account = account
        self.logged_in = True
        self.stream = STREAM_PREFIX + account.name
        # from here to subscribe: no await, so the replay and the live reports meet exactly
        head = self.gw.stream_head(self.stream)
        want = head + 2 if req.seq == 0 else min(req.seq, head + 2)   # message numbers
        self.send_event = want <= 1
        after = max(want - 2, 0)
        self.replay_from, self.replay_to = after, head
        self.sent_rseq, self.queued_rseq = after, head
        self.gw.subscribe(self.stream, self._on_reports)
        self._write(frame(Packet.LOGIN_ACCEPTED,
                          soup.encode_login_accepted(self.opts["session"], max(want, 1))))
        self.limiter = RateLimiter(account.max_msgs_per_sec)
        self.tasks = [asyncio.ensure_future(self._sender()),
                      asyncio.ensure_future(self.heartbeats())]
        # packets that came with the login are handled first
        return b"".join(frame(t, p) for t, p in rest) + buf

    async def _packets(self, buf: bytes) -> None:
        idle = self.opts["idle_s"]
        while not self.closed:
            packets, buf, eof = await self._read(buf, idle)
            if eof:
                return
            orders = []
            for ptype, payload in packets:
                if ptype == Packet.UNSEQUENCED:
                    orders.append(payload)
                elif ptype in (Packet.CLIENT_HEARTBEAT, Packet.DEBUG):
                    pass
                elif ptype == Packet.LOGOUT_REQUEST:
                    self._orders(orders)
                    self.logged_out()
                    return
                else:
                    self._orders(orders)
                    self.drop(f"packet type {ptype:#04x} is not allowed after login")
                    return
            self._orders(orders)
            await asyncio.sleep(0)

    def _debug(self, text: str) -> None:
        self._write(frame(Packet.DEBUG, text.encode("ascii", "replace")[:200]))

    def _orders(self, payloads: list[bytes]) -> None:
        """Decode one read's messages together and submit them in order."""
        if not payloads or self.closed:
            return
        name = self.account.name
        requests = []
        for msg in ouch50.decode(payloads):
            if isinstance(msg, ouch50.Malformed):
                self._debug(f"ignored: {msg.why}")
                continue
            if msg.type == b"Q":
                # Account Query's answer would be a sequenced message that is no report
                # (docs/gateway-nasdaq.md): answered by Debug
                self._debug("ignored: Account Query is not supported")
                continue
            if not self.limiter.allow(self.gw.now_ns()):
                self._debug(f"ignored: UserRefNum {msg.user_ref}: over "
                            f"{self.account.max_msgs_per_sec} messages a second")
                continue
            if msg.type in (b"O", b"U"):
                if msg.user_ref <= self.server.last_ref.get(name, 0):
                    continue   # spec 1.2: a UserRefNum not above the last one is ignored
                self.server.last_ref[name] = msg.user_ref
                self.server.remember(name, msg.user_ref, msg.clordid)
            req = self._request(msg)
            if req is not None:
                requests.append(req)
        self.server.flush_clordids()   # why before submit: a replay must find the ClOrdIDs
        for req in requests:
            try:
                self.gw.submit(req)
            except UsageError as e:   # the gateway is closing or failed
                self.drop(str(e))
                return

    def _request(self, msg):
        common = dict(account=self.account, stream=self.stream)
        now = self.gw.now_ns()
        key = (self.account.name, msg.user_ref)
        entered = self.server.entered
        if msg.type == b"O":
            f = ouch50.order_fields(msg, self.server.prices.get(msg.symbol), now)
            entered[key] = _Entered(msg.symbol, str(msg.user_ref), f["price"], f["stop_price"],
                                    f["qty"])
            return Request(kind="new", client_order_id=str(msg.user_ref), symbol=msg.symbol,
                           **f, **common)
        old = entered.get((self.account.name, msg.orig_ref if msg.type == b"U" else msg.user_ref))
        if msg.type == b"U":
            # why the entry: a Replace names its order by UserRefNum only, and its price needs
            # that order's symbol's tick
            pm = self.server.prices.get(old.symbol) if old is not None else None
            f = ouch50.order_fields(msg, pm, now)
            if old is not None:
                entered[key] = _Entered(old.symbol, str(msg.user_ref), f["price"],
                                        f["stop_price"], f["qty"])
            return Request(kind="replace", client_order_id=str(msg.user_ref),
                           orig_client_order_id=old.cid if old else str(msg.orig_ref),
                           price=f["price"], qty=f["qty"], stop_price=f["stop_price"], **common)
        if msg.type == b"M" and old is not None and msg.qty and (
                msg.qty >= old.total or msg.side not in (b"S", b"T", b"E")):
            # spec 2.4: a larger size is ignored; only sell types change (one sell here)
            self._debug(f"ignored: UserRefNum {msg.user_ref}: a Modify that reduces nothing")
            return None
        if msg.type in (b"X", b"M"):
            cid = old.cid if old is not None else str(msg.user_ref)
            if msg.qty == 0:
                return Request(kind="cancel", client_order_id=cid, orig_client_order_id=cid,
                               **common)
            if old is None or msg.qty >= old.total:
                self._debug(f"ignored: UserRefNum {msg.user_ref}: not a reduction of an order "
                            "this run entered")
                return None
            # a reduction: the core's replace at the same price to the new total size keeps
            # the order's place (docs/semantics.md, MODIFY); the core wants a new client id,
            # and this one carries the decrement for the Canceled message
            old.reductions += 1
            kind = "m" if msg.type == b"M" else "r"   # Order Modified / Order Canceled
            new_cid = f"{msg.user_ref}{kind}{old.reductions}d{old.total - msg.qty}"
            req = Request(kind="replace", client_order_id=new_cid, orig_client_order_id=old.cid,
                          price=old.price, qty=msg.qty, stop_price=old.stop, **common)
            old.cid, old.total = new_cid, msg.qty
            return req
        return None


class _Entered:
    """An order this port sent in this run: its symbol, its current client order id (a
    reduction gives it a new one) and its price and stop price in ticks."""

    __slots__ = ("symbol", "cid", "price", "stop", "total", "reductions")

    def __init__(self, symbol: str, cid: str, price: int, stop: int, total: int):
        self.symbol, self.cid, self.price, self.stop = symbol, cid, price, stop
        self.total = total   # the shares liable in total (executed + open) it last asked for
        self.reductions = 0
