"""The binary order-entry port: OUCH-style messages (``ouch``) over SoupBinTCP sessions.

A session: the client sends a Login Request (username, password, session, the next sequence
number it wants); the server checks it with ``Accounts.authenticate(name, password, "trade")``
and answers Login Accepted (with the sequence number of the next report it will send) or Login
Rejected, then sends the account's durable report stream ``ouch:<account>`` from that number as
Sequenced Data packets. The packet with sequence number n is the report with ``rseq`` n, so a
client that reconnects (also to a restarted server) with its next expected number gets the same
bytes it would have got live, and nothing twice. Rules for bad input: docs/gateway-binary.md.

Invariants:
- Replay and live reports meet without a gap or a repeat: the stream's head is read and
  ``subscribe`` runs with no await between them; the replay up to that head is read from the
  store ``SEND_CHUNK`` reports at a time as the socket drains (a replay from 1 of a long stream
  holds one chunk in memory), on the gateway's replay thread (``Gateway.replay_stream``), not
  the event loop, within the port's budget of ``replay_per_s`` reports a second
  shared by all replays, live reports after it wait in the session's queue, and the session
  drops a report whose rseq it already queued.
- Before its login a connection holds a pre-logon ticket of ``gw.guard`` (per-address and
  per-port limits); the password check runs on the guard's pool under its failure throttle.
- No session stalls another: report callbacks only append to the session's queue (never
  await), one sender task per session writes and drains; a session whose queue passes
  ``max_queued_reports``, whose socket buffer passes ``max_buffer_bytes``, or whose socket
  takes no bytes for ``idle_s`` is disconnected (it can reconnect and replay by sequence
  number).
- Every read has a deadline: the login must arrive within ``login_timeout_s``, then some packet
  (at least a client heartbeat) within every ``idle_s``; the server sends a heartbeat after each
  ``heartbeat_s`` without other output.
- Hostile bytes end in a Rejected message (unsequenced, not journaled) or a clean disconnect,
  never an exception out of the connection handler.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct

from exsim.exchange.gateway import ouch
from exsim.exchange.errors import UsageError
from exsim.exchange.gateway.accounts import AuthError
from exsim.exchange.gateway.core import Budget, RateLimiter, Request
from exsim.exchange.gateway.framing import FrameError, PacketType, frame, read_frame

__all__ = ["BinaryServer", "start", "DEFAULTS"]

log = logging.getLogger(__name__)

DEFAULTS = dict(
    session="EXSIM",            # SoupBinTCP session name (a blank requested session means this)
    heartbeat_s=1.0,            # server heartbeat after this long without other output
    idle_s=15.0,                # disconnect a client silent for this long (SoupBinTCP: 15 s)
    login_timeout_s=5.0,        # the Login Request must arrive within this
    max_queued_reports=10_000,  # live reports waiting for one slow reader before it is dropped
    max_buffer_bytes=1 << 20,   # bytes in one socket's write buffer before it is dropped
    max_sessions=1024,          # logged-in sessions at once; more connections are closed at once
    sndbuf=0,                   # SO_SNDBUF of each connection in bytes (0: the system's autotuning)
    replay_per_s=10_000,        # stored reports all replays of the port read per second together
)
SEND_CHUNK = 256                # reports written per drain
READ_CHUNK = 1 << 16            # bytes asked of the socket per read (many packets at a time)
# why 1 + the largest payload: read_frame's limit counts the type byte and the payload
MAX_FRAME = 1 + max(ouch.LOGIN_REQUEST.size, ouch.MAX_CLIENT_MESSAGE)
YIELD_EVERY = 64                # inbound packets handled before letting other sessions run
WRITE_HIGH = 1 << 16            # socket buffer bytes above which the sender waits for drain


class BinaryServer:
    """The listening port and its sessions. ``close()`` sends End of Session to every logged-in
    client and closes all connections; ``await wait_closed()`` waits until they are gone."""

    def __init__(self, gw, accounts, options: dict):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown binary port option(s) {sorted(unknown)}; "
                            f"known: {sorted(DEFAULTS)}")
        self.gw = gw
        self.accounts = accounts
        self.opts = {**DEFAULTS, **options}
        self.sessions: set[_Session] = set()
        self._server: asyncio.AbstractServer | None = None
        self._closing = False
        # the port's replay budget (reports), shared by every session replaying
        self._replay_budget = Budget(self.opts["replay_per_s"], SEND_CHUNK)

    async def replay_turn(self, n: int) -> None:
        """Wait until the port's replay budget holds ``n`` reports, then take them."""
        # why one budget per port: a replay costs a JSON parse and an encode per report, and
        # many logins replaying at once (also of one account) must not take every other
        # session's turn on the event loop
        await self._replay_budget.take(n)

    @property
    def sockets(self):
        """The listening sockets (``sockets[0].getsockname()[1]`` is the port)."""
        return self._server.sockets if self._server else ()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self.sockets[0].getsockname()[1]

    async def _handle(self, reader, writer):
        # why logged-in sessions only: connections before login are bounded by gw.guard
        logged_in = sum(1 for s in self.sessions if s.account is not None)
        if self._closing or logged_in >= self.opts["max_sessions"]:
            writer.transport.abort()
            return
        ticket = self.gw.guard.admit("binary", writer.get_extra_info("peername"),
                                     writer.transport.abort)
        if ticket is None:
            writer.transport.abort()
            return
        s = _Session(self, reader, writer)
        s.ticket = ticket
        self.sessions.add(s)
        try:
            await s.run()
        except Exception:   # a bug here must cost one connection, never the server
            log.exception("binary session %s ended by an error", s.peer)
        finally:
            ticket.release()
            s.shutdown()
            self.sessions.discard(s)

    def close(self, reason: str | None = None) -> None:
        """Stop listening, send End of Session to logged-in clients (after a Debug packet
        carrying ``reason``, if given: why the gateway stopped) and close every session."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for s in list(self.sessions):
            if reason and s.account is not None and not s.closed:
                s.transport.write(frame(PacketType.DEBUG, reason.encode()[:1000]))
            s.end_of_session()

    async def wait_closed(self) -> None:
        """Wait until the listener and every session are closed."""
        if self._server is not None:
            await self._server.wait_closed()
        for _ in range(200):
            if not self.sessions:
                break
            await asyncio.sleep(0.01)


async def start(gw, host: str = "127.0.0.1", port: int = 0, **options) -> BinaryServer:
    """Listen for binary order-entry sessions on host:port (port 0: any free port).

    Options (DEFAULTS): session, heartbeat_s, idle_s, login_timeout_s, max_queued_reports,
    max_buffer_bytes, max_sessions, sndbuf, ``accounts`` (default ``gw.accounts``) and ``ssl``
    (an ``ssl.SSLContext``: TLS only, ``tls.server_context``).
    Returns the BinaryServer. Raises TypeError for an unknown option, OSError if the address
    cannot be bound.
    """
    accounts = options.pop("accounts", None) or gw.accounts
    tls = options.pop("ssl", None)
    srv = BinaryServer(gw, accounts, options)
    srv._server = await asyncio.start_server(srv._handle, host, port, limit=1 << 16, ssl=tls)
    return srv


class _Session:
    """One client connection: login, then the report sender, heartbeats and the order reader."""

    def __init__(self, server: BinaryServer, reader, writer):
        self.server = server
        self.gw = server.gw
        self.opts = server.opts
        self.reader = reader
        self.writer = writer
        self.transport = writer.transport
        self.peer = writer.get_extra_info("peername")
        self.account = None
        self.stream = ""
        self.limiter = None
        self.ticket = None
        # the stored reports still to replay: after replay_from, up to replay_to (read a chunk
        # at a time, so a replay from 1 of a long stream holds one chunk, not the stream)
        self.replay_from = self.replay_to = 0
        self.live: collections.deque = collections.deque()
        self.queued_rseq = 0   # rseq of the last report queued (replay or live)
        self.sent_rseq = 0     # rseq of the last report written
        self.wake = asyncio.Event()
        self.closed = False
        self.tasks: list[asyncio.Task] = []
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.last_sent = loop.time()
        # why these limits: drain() returns below 16 KiB and waits above 64 KiB, far under
        # max_buffer_bytes, so a reader that keeps up is never near the disconnect limit
        self.transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_HIGH // 4)
        sock = writer.get_extra_info("socket")
        if self.opts["sndbuf"] and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.opts["sndbuf"])

    # -- output -----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        self.transport.write(data)
        self.last_sent = self.loop.time()
        if self.transport.get_write_buffer_size() > self.opts["max_buffer_bytes"]:
            self.drop("its socket buffer passed max_buffer_bytes (a slow reader)")

    def drop(self, why: str) -> None:
        """Disconnect now (no more bytes are written); the client may reconnect and replay."""
        if not self.closed:
            log.info("binary session %s (%s) disconnected: %s", self.peer,
                     self.account.name if self.account else "not logged in", why)
            self.closed = True
            self.wake.set()
            self.transport.abort()

    def end_of_session(self) -> None:
        """Send End of Session (logged-in clients) and close the connection after the bytes
        already queued."""
        if self.closed:
            return
        if self.account is not None:
            self.transport.write(frame(PacketType.END_OF_SESSION))
        self.closed = True
        self.wake.set()
        self.transport.close()

    def shutdown(self) -> None:
        """Unsubscribe, stop the tasks and close the socket (idempotent)."""
        if self.account is not None:
            self.gw.unsubscribe(self.stream, self._on_reports)
        for t in self.tasks:
            t.cancel()
        if not self.closed:
            self.closed = True
            self.transport.close()

    def _on_reports(self, reports) -> None:
        # called by the gateway in the event loop: queue only, never await
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

    async def _sender(self) -> None:
        try:
            while not self.closed:
                if self.replay_from < self.replay_to:
                    n = min(SEND_CHUNK, self.replay_to - self.replay_from)
                    await self.server.replay_turn(n)
                    if self.closed:
                        return
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
                out = []
                for r in chunk:
                    if r.rseq != self.sent_rseq + 1:
                        self.drop(f"report stream gap: rseq {r.rseq} after {self.sent_rseq}")
                        return
                    self.sent_rseq = r.rseq
                    out.append(frame(PacketType.SEQUENCED, ouch.encode_report(r)))
                self._write(b"".join(out))
                # why only above the high-water mark: below it drain() returns at once, and a
                # timed wait per write (a task and a timer) cost more than the write itself
                if self.transport.get_write_buffer_size() > WRITE_HIGH:
                    try:
                        await asyncio.wait_for(self.writer.drain(), self.opts["idle_s"])
                    except asyncio.TimeoutError:
                        self.drop(f"its socket took no bytes for {self.opts['idle_s']:g} s")
                        return
                else:
                    # why: a long replay to a fast reader must let other sessions' acks through
                    await asyncio.sleep(0)
        except (ConnectionError, asyncio.CancelledError):
            pass

    async def _heartbeats(self) -> None:
        period = self.opts["heartbeat_s"]
        try:
            while not self.closed:
                wait = self.last_sent + period - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                self._write(frame(PacketType.SERVER_HEARTBEAT))
        except asyncio.CancelledError:
            pass

    # -- input ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until the client logs out, breaks a rule, goes silent, or the
        server closes. Raises nothing for anything the client sends."""
        try:
            if not await self._login():
                return
            await self._packets()
        except FrameError as e:
            self.drop(str(e))
        except ConnectionError as e:
            self.drop(f"connection error: {e}")

    async def _packets(self) -> None:
        """Read the socket a chunk at a time and handle every whole packet in it, until the
        client logs out or breaks a rule. Raises FrameError for a bad length, a packet not
        completed within ``idle_s`` of its first byte, nothing within ``idle_s``, or the
        stream ending inside a packet; ConnectionError from the socket."""
        # why not read_frame per packet: two timed reads per packet cost more than the packet
        idle = self.opts["idle_s"]
        buf, n, partial_since = b"", 0, None
        while not self.closed:
            packets, buf = ouch.split_packets(buf, MAX_FRAME)
            for ptype, payload in packets:
                if not self._packet(ptype, payload):
                    return
                n += 1
                if n % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            # the idle clock restarts with every whole packet; a packet begun must be
            # completed within idle_s
            if packets or not buf:
                partial_since = None
            now = self.loop.time()
            if not buf:
                wait = idle
            else:
                partial_since = now if partial_since is None else partial_since
                wait = partial_since + idle - now
            try:
                chunk = await asyncio.wait_for(self.reader.read(READ_CHUNK), max(wait, 0.0))
            except asyncio.TimeoutError:
                raise FrameError(f"a frame was not completed within {idle:g} s" if buf
                                 else f"nothing received for {idle:g} s") from None
            if not chunk:
                if buf:
                    raise FrameError("the connection ended inside a frame")
                return
            buf += chunk

    def _packet(self, ptype: int, payload: bytes) -> bool:
        """Handle one packet after the login; return False when the session is over."""
        if self.closed:
            return False
        if ptype == PacketType.UNSEQUENCED:
            self._order(payload)
        elif ptype == PacketType.CLIENT_HEARTBEAT or ptype == PacketType.DEBUG:
            pass
        elif ptype == PacketType.LOGOUT_REQUEST:
            # the client ends its session, not the server's: no End of Session
            self.closed = True
            self.wake.set()
            self.transport.close()
            return False
        else:
            self.drop(f"packet type {ptype:#04x} is not allowed after login")
            return False
        return True

    async def _login(self) -> bool:
        got = await read_frame(self.reader, max_size=MAX_FRAME,
                               idle_s=self.opts["login_timeout_s"])
        if got is None:
            return False
        ptype, payload = got
        self.ticket.presented()
        if ptype != PacketType.LOGIN_REQUEST:
            self.drop(f"packet type {ptype:#04x} before the login")
            return False
        try:
            req = ouch.parse_login(payload)
        except ValueError as e:
            self.gw.guard.record_failure("binary", self.peer, None, str(e))
            return self._login_rejected(ouch.REJECT_NOT_AUTHORIZED, str(e))
        try:
            account = await self.gw.guard.authenticate(self.server.accounts, "binary", self.peer,
                                                       req.username, req.password, "trade")
        except AuthError as e:
            return self._login_rejected(ouch.REJECT_NOT_AUTHORIZED, str(e))
        if req.session not in ("", self.opts["session"]) or self.closed:
            log.warning("binary login from %s rejected: no session %r", self.peer, req.session)
            return self._login_rejected(ouch.REJECT_SESSION, f"no session {req.session!r}")
        self.account = account
        self.stream = f"ouch:{account.name}"
        # from here to subscribe: no await, so the replay and the live reports meet exactly
        head = self.gw.stream_head(self.stream)
        after = head if req.seq == 0 else min(req.seq - 1, head)
        self.replay_from, self.replay_to = after, head
        self.sent_rseq = after
        self.queued_rseq = head
        self.gw.subscribe(self.stream, self._on_reports)
        self._write(frame(PacketType.LOGIN_ACCEPTED,
                          ouch.encode_login_accepted(self.opts["session"], after + 1)))
        self.limiter = RateLimiter(account.max_msgs_per_sec)
        self.tasks = [asyncio.ensure_future(self._sender()),
                      asyncio.ensure_future(self._heartbeats())]
        return True

    def _login_rejected(self, code: bytes, why: str) -> bool:
        # why debug: the guard has logged (and audited) the refusal with its address already
        log.debug("binary login from %s rejected: %s", self.peer, why)
        self.transport.write(frame(PacketType.LOGIN_REJECTED, ouch.LOGIN_REJECTED.pack(code)))
        self.closed = True
        self.transport.close()
        return False

    def _reject(self, token: str, reason: int) -> None:
        self._write(frame(PacketType.UNSEQUENCED,
                          ouch.encode_reject(self.gw.now_ns(), token, reason)))

    def _order(self, payload: bytes) -> None:
        if not self.limiter.allow(self.gw.now_ns()):
            self._reject(_peek_token(payload), ouch.OuchReason.RATE_LIMITED)
            return
        try:
            msg = ouch.parse_client(payload)
        except ouch.MessageError as e:
            self._reject(e.token, e.reason)
            return
        try:
            self.gw.submit(_request(self, msg))
        except UsageError as e:   # the gateway is closing or failed: nothing more will trade
            self._reject(msg.token, ouch.OuchReason.GATEWAY)
            self.drop(str(e))


def _peek_token(payload: bytes) -> str:
    """Return the token of a message not parsed (rate-limited), or "" if it is not one."""
    try:
        return ouch.KINDS["token"][2](payload[1:1 + ouch.TOKEN_LEN]) \
            if len(payload) > ouch.TOKEN_LEN and payload[0] in ouch.CLIENT else ""
    except (ValueError, struct.error):
        return ""


def _request(session: _Session, msg):
    """Return the core Request of one parsed client message."""
    common = dict(account=session.account, stream=session.stream)
    if isinstance(msg, ouch.ENTER.tuple):
        return Request(kind="new", client_order_id=msg.token, orig_client_order_id="",
                       symbol=msg.symbol, side=msg.side, order_type=msg.order_type, tif=msg.tif,
                       price=msg.price, qty=msg.qty, stop_price=msg.stop_price,
                       display_qty=msg.display_qty, min_qty=msg.min_qty,
                       expire_ts=msg.expire_ts, post_only=msg.post_only, **common)
    if isinstance(msg, ouch.CANCEL.tuple):
        return Request(kind="cancel", client_order_id=msg.token, orig_client_order_id=msg.token,
                       symbol="", **common)
    return Request(kind="replace", client_order_id=msg.new_token, orig_client_order_id=msg.token,
                   price=msg.price, qty=msg.qty,
                   stop_price=msg.stop_price, **common)
