"""The TotalView-ITCH 5.0 feed of a ``Gateway``: one sequenced message stream, sent over
MoldUDP64 on UDP (with a re-request server for gaps) and over SoupBinTCP 3.0 on TCP.

The stream (``ItchFeed``) is numbered 1, 2, 3 ... from the feed's start: the start-of-day
messages (``itch50.Translator.start_of_day``: system events, Stock Directory and Trading Action
per symbol, an Add Order per order already resting), then the translation of every gateway
batch (a market listener: ``exchange.gateway.itch.FeedBuilder`` then ``itch50.Translator``).
A restart starts a new stream (new start-of-day messages, numbered from 1 again).

- MoldUDP64: every batch's messages are sent at once to each destination (loopback unicast
  addresses, or a multicast group) in packets of at most ``max_payload`` bytes; a Heartbeat
  after ``heartbeat_s`` without packets; End of Session packets at close. The re-request server
  answers a Request with one downstream packet (as many of the asked messages as fit) unicast
  to the requester, at most ``requests_per_s`` requests a second per address.
- SoupBinTCP: a client logs in (an account with the "marketdata" role; session blank or this
  feed's; requested sequence number, 0: the next message) and gets the messages from there as
  Sequenced Data, then live; heartbeats both ways; a client silent for ``idle_s`` or whose
  socket buffer passes ``max_buffer_bytes`` is disconnected.

Invariants: the stream keeps the last ``max_retained`` messages (older ones cannot be asked for
again: a re-request for them is not answered, a login from before them starts at the oldest
kept); the market listener only appends and queues, it never awaits; nothing a client sends
raises out of a handler.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket

from exsim.exchange.gateway import itch as xitch
from exsim.exchange.gateway.accounts import AuthError
from exsim.exchange.gateway.nasdaq import itch50, moldudp64, soupbintcp as soup
from exsim.exchange.gateway.nasdaq.soupbintcp import Packet, frame
from exsim.exchange.gateway.nasdaq.soupsession import (SoupSession, end_sessions,
                                                      serve_connection, wait_sessions)

__all__ = ["ItchFeed", "ItchServer", "start", "DEFAULTS"]

log = logging.getLogger(__name__)

DEFAULTS = dict(
    session="EXSIMITCH",       # MoldUDP64 / SoupBinTCP session name (at most 10 characters)
    mpid=False,                # Add Order with MPID (F, the order's firm) instead of A
    max_retained=1_000_000,    # messages kept for re-requests and logins from a sequence number
    heartbeat_s=1.0,
    idle_s=15.0,
    login_timeout_s=5.0,
    max_buffer_bytes=4 << 20,
    max_payload=moldudp64.MAX_PAYLOAD,
    requests_per_s=100,        # MoldUDP64 re-requests per second per address
    max_request_count=1000,    # messages one re-request may ask for
)


class ItchFeed:
    """The sequenced ITCH 5.0 stream of one gateway (module docstring)."""

    def __init__(self, gw, opts: dict):
        self.gw, self.opts = gw, opts
        firm_of = None
        if opts["mpid"]:
            def firm_of(oid):
                st = gw.order_state(oid)
                return (st.firm if st is not None else "")[:4]
        self.translator = itch50.Translator(gw.symbols, firm_of)
        self.builder = None
        self.msgs: collections.deque = collections.deque()
        self.base = 1            # the sequence number of msgs[0]
        self.listeners: list = []
        self.desyncs = 0

    @property
    def next_seq(self) -> int:
        """The sequence number the next message will get."""
        return self.base + len(self.msgs)

    async def open(self) -> None:
        """Load the engine's books, queue the start-of-day messages, listen to batches."""
        async with self.gw.engine_lock:
            eng = self.gw.engine
            self.builder = xitch.FeedBuilder.from_engine(eng)
            phases = {s.id: int(eng.phase(s.id)) for s in self.gw.symbols.values()}
            self._append(self.translator.start_of_day(self.gw.now_ns(), self.builder, phases))
            self.gw.add_market_listener(self.on_batch)

    def on_batch(self, batch) -> None:
        """Translate one gateway batch and append it (a market listener: never awaits)."""
        try:
            out = self.translator.translate(
                self.builder.build(batch.first_seq, batch.orders, batch.result))
        except (xitch.FeedDesync, KeyError, ValueError):
            # ValueError: a value that does not fit its ITCH field (a price above Price(4)'s
            # $429,496.7295); the reload shows every order but such ones
            log.exception("ITCH 5.0 feed out of step with the engine; reloading its books")
            self.desyncs += 1
            self.builder.reload(batch.engine)
            out = self.translator.resync(self.builder, self.gw.now_ns())
        self.translator.forget_finished(self.builder)
        self._append(out)

    def _append(self, out: list[bytes]) -> None:
        if not out:
            return
        first = self.next_seq
        self.msgs.extend(out)
        over = len(self.msgs) - self.opts["max_retained"]
        for _ in range(max(over, 0)):
            self.msgs.popleft()
            self.base += 1
        for cb in list(self.listeners):
            try:
                cb(first, out)
            except Exception:   # one broken sender must not stop the feed
                log.exception("ITCH 5.0 listener %r failed and was removed", cb)
                self.listeners.remove(cb)

    def get(self, seq: int, count: int) -> list[bytes]:
        """Return up to ``count`` retained messages from sequence number ``seq``."""
        lo = max(seq - self.base, 0) if seq >= self.base else None
        if lo is None or count <= 0:
            return []
        return [self.msgs[i] for i in range(lo, min(lo + count, len(self.msgs)))]

    def close(self) -> None:
        """Append the end-of-day system events and stop listening."""
        self.gw.remove_market_listener(self.on_batch)
        self._append(self.translator.end_of_day(self.gw.now_ns()))


class _Mold(asyncio.DatagramProtocol):
    """The MoldUDP64 sender (``sendto`` each destination) or the re-request server."""

    def __init__(self, server: "ItchServer", answer: bool):
        self.server, self.answer = server, answer
        self.transport = None
        self.buckets: dict[str, list] = {}

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        if not self.answer:
            return
        srv = self.server
        req = moldudp64.parse_request(data)
        if req is None or req.session != srv.opts["session"] or req.seq < 1:
            return
        loop = asyncio.get_running_loop()
        now, rate = loop.time(), float(srv.opts["requests_per_s"])
        host = addr[0]
        b = self.buckets.get(host)
        if b is None:
            if len(self.buckets) >= 4096:   # bound the table: forget the others
                self.buckets.clear()
            b = self.buckets[host] = [rate, now]
        b[0] = min(rate, b[0] + (now - b[1]) * rate)
        b[1] = now
        if b[0] < 1:
            return
        b[0] -= 1
        msgs = srv.feed.get(req.seq, min(req.count, srv.opts["max_request_count"]))
        if msgs:
            first = moldudp64.packets(srv.opts["session"], req.seq, msgs,
                                      srv.opts["max_payload"])[0]
            self.transport.sendto(first, addr)


class ItchServer:
    """The feed's ports: ``mold_port`` (re-request server), ``soup_port``; ``close()`` then
    ``await wait_closed()``."""

    def __init__(self, gw, opts: dict):
        self.gw, self.opts = gw, opts
        self.feed = ItchFeed(gw, opts)
        self.destinations: list[tuple[str, int]] = []
        self._sender = self._rerequest = None
        self._tcp = None
        self.sessions: set[_SoupSession] = set()
        self._tasks: list[asyncio.Task] = []
        self._last_packet = 0.0

    @property
    def mold_port(self) -> int:
        """The UDP port of the re-request server."""
        return self._rerequest.transport.get_extra_info("sockname")[1]

    @property
    def sockets(self):
        """The SoupBinTCP listening sockets (``exsim serve`` reads the address from them)."""
        return self._tcp.sockets if self._tcp is not None else ()

    @property
    def soup_port(self) -> int:
        """The TCP port of the SoupBinTCP feed."""
        return self._tcp.sockets[0].getsockname()[1]

    def _on_messages(self, first: int, msgs: list[bytes]) -> None:
        if self._sender is not None and self.destinations:
            for p in moldudp64.packets(self.opts["session"], first, msgs,
                                       self.opts["max_payload"]):
                for d in self.destinations:
                    self._sender.transport.sendto(p, d)
            self._last_packet = asyncio.get_running_loop().time()

    async def _heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        period = self.opts["heartbeat_s"]
        try:
            while True:
                wait = self._last_packet + period - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                hb = moldudp64.heartbeat(self.opts["session"], self.feed.next_seq)
                for d in self.destinations:
                    self._sender.transport.sendto(hb, d)
                self._last_packet = loop.time()
        except asyncio.CancelledError:
            pass

    async def _handle(self, reader, writer):
        await serve_connection(self, "itch50", _SoupSession, reader, writer)

    def close(self, reason: str | None = None) -> None:
        """Send the end-of-day messages and End of Session (after a Debug packet with
        ``reason``, if given, to SoupBinTCP clients), close every port."""
        self.feed.close()
        for t in self._tasks:
            t.cancel()
        if self._sender is not None:
            eos = moldudp64.end_of_session(self.opts["session"], self.feed.next_seq)
            for d in self.destinations:
                self._sender.transport.sendto(eos, d)
            self._sender.transport.close()
        if self._rerequest is not None:
            self._rerequest.transport.close()
        if self._tcp is not None:
            self._tcp.close()
        end_sessions(self.sessions, reason)

    async def wait_closed(self) -> None:
        """Wait until the TCP listener and sessions are closed (at most ~2 s)."""
        if self._tcp is not None:
            await self._tcp.wait_closed()
        await wait_sessions(self.sessions)


async def start(gw, host: str = "127.0.0.1", port: int | None = None, *,
                mold_port: int | str | None = "same", destinations=(),
                multicast: tuple[str, int] | None = None, **options) -> ItchServer:
    """Start the ITCH 5.0 feed of ``gw``: the SoupBinTCP feed on TCP ``host:port``, the
    MoldUDP64 re-request server on UDP ``host:mold_port`` ("same": the UDP port of the number
    the TCP listener got; None: none), and MoldUDP64 packets to each (host, port) of
    ``destinations`` and/or a ``multicast`` (group, port) (sent with TTL 0 and loopback on, so
    it stays on this machine). ``port`` None: no TCP feed. Options: DEFAULTS, ``accounts``
    (default ``gw.accounts``), ``ssl`` (the TCP feed only). Returns the ItchServer.
    Raises TypeError for an unknown option, ValueError for a symbol name over 8 characters or
    a session name over 10, UsageError for a tick size ITCH prices cannot name, OSError if an
    address cannot be bound."""
    accounts = options.pop("accounts", None) or gw.accounts
    tls = options.pop("ssl", None)
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown ITCH 5.0 feed option(s) {sorted(unknown)}; "
                        f"known: {sorted(DEFAULTS)}")
    opts = {**DEFAULTS, **options}
    moldudp64.heartbeat(opts["session"], 0)   # raises ValueError for a bad session name
    srv = ItchServer(gw, opts)
    srv.accounts = accounts
    loop = asyncio.get_running_loop()
    srv.destinations = [tuple(d) for d in destinations]
    if srv.destinations or multicast is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if multicast is not None:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            # why: without it the kernel sends on the default route's interface, not ``host``
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                            socket.inet_aton(socket.gethostbyname(host)))
            srv.destinations.append(tuple(multicast))
        sock.bind((host, 0))
        _, srv._sender = await loop.create_datagram_endpoint(lambda: _Mold(srv, False),
                                                             sock=sock)
        srv._tasks.append(asyncio.ensure_future(srv._heartbeats()))
    if port is not None:
        srv._tcp = await asyncio.start_server(srv._handle, host, port, limit=1 << 16, ssl=tls)
    if mold_port == "same":
        mold_port = srv.soup_port if port is not None else None
    if mold_port is not None:
        _, srv._rerequest = await loop.create_datagram_endpoint(
            lambda: _Mold(srv, True), local_addr=(host, mold_port))
    srv.feed.listeners.append(srv._on_messages)
    await srv.feed.open()
    return srv


class _SoupSession(SoupSession):
    """One SoupBinTCP client of the feed: login, then the stream from its sequence number."""

    what = "ITCH 5.0 SoupBinTCP"

    def __init__(self, server: ItchServer, reader, writer, ticket):
        super().__init__(server, reader, writer, ticket)
        self.feed = server.feed
        self.next_seq = 0          # the next message this session sends

    def unsubscribe(self) -> None:
        """Stop hearing the feed."""
        if self._on_messages in self.feed.listeners:
            self.feed.listeners.remove(self._on_messages)

    def _on_messages(self, first, msgs) -> None:
        self.wake.set()

    def send_due(self) -> None:
        """Write the messages from ``next_seq`` to the feed's newest (dropping a session that
        fell behind what the feed keeps)."""
        if self.next_seq < self.feed.base:
            self.drop("it fell behind the retained messages")
            return
        while not self.closed and self.next_seq < self.feed.next_seq:
            chunk = self.feed.get(self.next_seq, 256)
            self.next_seq += len(chunk)
            self._write(b"".join(frame(Packet.SEQUENCED, m) for m in chunk))

    async def _sender(self) -> None:
        try:
            while not self.closed:
                self.send_due()
                if self.transport.get_write_buffer_size() > 1 << 16:
                    try:
                        await asyncio.wait_for(self.writer.drain(), self.opts["idle_s"])
                    except asyncio.TimeoutError:
                        self.drop(f"its socket took no bytes for {self.opts['idle_s']:g} s")
                        return
                    continue
                self.wake.clear()
                if self.next_seq >= self.feed.next_seq:
                    await self.wake.wait()
        except (ConnectionError, asyncio.CancelledError):
            pass

    async def run(self) -> None:
        """Serve the connection: login, then read heartbeats until logout or silence."""
        buf = b""
        try:
            # why one deadline for the whole login: a client sending a byte at a time must
            # not hold a pre-login slot for longer than login_timeout_s
            deadline = self.loop.time() + self.opts["login_timeout_s"]
            while True:
                packets, buf = soup.split_packets(buf, 1 + soup.LOGIN_REQUEST.itemsize)
                if packets:
                    break
                left = deadline - self.loop.time()
                if left <= 0:
                    raise asyncio.TimeoutError("no Login Request within login_timeout_s")
                chunk = await asyncio.wait_for(self.reader.read(4096), left)
                if not chunk:
                    return
                buf += chunk
            ptype, payload = packets[0]
            self.ticket.presented()
            if ptype != Packet.LOGIN_REQUEST:
                return self.drop("a packet before the login")
            req = soup.parse_login(payload)
            try:
                await self.server.gw.guard.authenticate(self.server.accounts, "itch50",
                                                        self.peer, req.username, req.password,
                                                        "marketdata")
            except AuthError as e:
                return self.rejected(soup.REJECT_AUTH, str(e))
            if req.session not in ("", self.opts["session"]):
                return self.rejected(soup.REJECT_SESSION, f"no session {req.session!r}")
            want = self.feed.next_seq if req.seq == 0 else min(req.seq, self.feed.next_seq)
            self.next_seq = max(want, self.feed.base)
            self.logged_in = True
            self._write(frame(Packet.LOGIN_ACCEPTED,
                              soup.encode_login_accepted(self.opts["session"], self.next_seq)))
            self.feed.listeners.append(self._on_messages)
            self.tasks = [asyncio.ensure_future(self._sender()),
                          asyncio.ensure_future(self.heartbeats())]
            while not self.closed:
                packets, buf = soup.split_packets(buf, 1024)
                for ptype, _ in packets:
                    if ptype == Packet.LOGOUT_REQUEST:
                        self.logged_out()
                        return
                chunk = await asyncio.wait_for(self.reader.read(4096), self.opts["idle_s"])
                if not chunk:
                    return
                buf += chunk
        except (asyncio.TimeoutError, soup.SoupError, ConnectionError) as e:
            self.drop(f"{type(e).__name__}: {e}")
