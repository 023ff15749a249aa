"""The ITCH-style market-data port: SoupBinTCP login, a snapshot on connect, then the
incremental stream of every symbol (message layouts: ``exchange.gateway.itch``; the protocol:
docs/gateway-feed.md).

A session: the client sends a Login Request (``LOGIN``: username, password; the account needs
the "marketdata" role); the server answers Login Accepted or Login Rejected, then sends, in
sequenced data packets, a System Event "O", and per symbol its Symbol Directory and its
snapshot, then every incremental message as the engine's batches are translated. A client may
send Snapshot Requests (unsequenced data packets) at any time, client heartbeats, and a Logout
Request.

Invariants:
- One ``FeedBuilder`` translates each batch once, inside the core's market listener (the engine
  lock is held); the encoded bytes are shared by every session. A snapshot is taken under the
  engine lock, when the builder has translated every batch the engine processed, and is written
  before the lock is released: its seq is exactly the seq before the symbol's next incremental
  message on that connection.
- Nothing a session does can stall the gateway or another session: the listener never awaits,
  it appends bytes to each session's transport; a session whose unsent output passes
  ``max_buffer`` bytes (plus the size of the snapshot it was just sent) is disconnected, and so
  is one that asks for a snapshot while more than ``max_buffer`` bytes of earlier output are
  unsent: a session never holds more than ``max_buffer`` plus one snapshot.
- Snapshots are encoded as numpy arrays (one framed ADD_ORDER per row), not message by
  message, and every snapshot of the port counts against one budget of orders a second
  (``snapshot_orders_per_s``): past it, a Snapshot Request is answered with a Debug packet.
- Every read has a deadline: a login must arrive within ``login_timeout_s``, and a logged-in
  client must send something (a heartbeat at least) every ``idle_s``; otherwise the session is
  closed. Inbound frames are at most ``MAX_INBOUND`` bytes. Before its login a connection
  holds a pre-logon ticket of ``gw.guard``; password checks run on the guard's pool under its
  failure throttle.
- A translator desync (a bug, never expected) does not stop the feed: the builder is reloaded
  from the engine and every session is sent a fresh snapshot of every symbol.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import numpy as np

from exsim.exchange.gateway import itch
from exsim.exchange.gateway.accounts import AuthError
from exsim.exchange.gateway.core import RateLimiter
from exsim.exchange.gateway.framing import HEADER, FrameError, PacketType, frame, read_frame
from exsim.exchange.schema import Side

__all__ = ["start", "FeedServer", "LOGIN", "SESSION", "MAX_INBOUND", "encode_login",
           "snapshot_frames", "SNAPSHOT_ORDERS_PER_S"]

log = logging.getLogger("exsim.gateway.feed")

LOGIN = struct.Struct(">32s64s")   # username, password: ASCII/UTF-8, right-padded with spaces
SESSION = b"exsim-feed"            # the 10-byte session name of Login Accepted
MAX_INBOUND = 1 + LOGIN.size       # the largest frame a client may send (a login)
REQUESTS_PER_SEC = 20              # snapshot requests per session before they are refused
SNAPSHOT_ORDERS_PER_S = 100_000    # orders in the snapshots of all sessions of a port, a second

# One framed ADD_ORDER: the SoupBinTCP header and itch's ADD_ORDER layout, packed. Why: a
# snapshot's orders are encoded as one numpy array; one tuple and struct.pack per order cost
# ~10 us each, so an all-symbol snapshot of a 3,000-order book held the event loop 40-70 ms
_ADD_FRAME = np.dtype([("length", ">u2"), ("packet", "u1"), ("type", "S1"), ("symbol", ">u4"),
                       ("seq", ">u8"), ("ts", ">i8"), ("ref", ">u8"), ("side", "S1"),
                       ("qty", ">i8"), ("price", ">i8")])
assert _ADD_FRAME.itemsize == HEADER.size + itch.LAYOUTS[itch.MsgType.ADD_ORDER].struct.size


def snapshot_frames(builder: itch.FeedBuilder, sid: int, rows: np.ndarray) -> tuple[bytes, list]:
    """Return the framed snapshot of symbol ``sid`` (the bytes of ``builder.snapshot(sid,
    rows)``, each message a sequenced data packet) and its messages other than the orders
    (SNAPSHOT_START first). ``rows``: ``Engine.orders(sid)`` taken at the builder's seq.

    Raises FeedError if a field of the messages around the orders does not fit its layout."""
    msgs = builder.snapshot(sid, rows[:0])
    msgs[0] = msgs[0]._replace(orders=len(rows))
    start, end = msgs[0], msgs[-1]
    adds = np.empty(len(rows), _ADD_FRAME)
    adds["length"] = _ADD_FRAME.itemsize - 2   # why - 2: it counts the bytes after itself
    adds["packet"] = PacketType.SEQUENCED
    adds["type"] = itch.MsgType.ADD_ORDER
    adds["symbol"], adds["seq"], adds["ts"] = start.symbol, start.seq, start.ts
    adds["ref"] = rows["order_id"]
    adds["side"] = np.where(rows["side"] == Side.BUY, b"B", b"S")
    adds["qty"], adds["price"] = rows["qty"], rows["price"]
    head = b"".join(frame(PacketType.SEQUENCED, itch.encode(m)) for m in msgs[:-1])
    return head + adds.tobytes() + frame(PacketType.SEQUENCED, itch.encode(end)), msgs[:-1]


def encode_login(username: str, password: str) -> bytes:
    """Return a Login Request payload. Raises ValueError if a field is longer than its slot."""
    u, p = username.encode(), password.encode()
    if len(u) > 32 or len(p) > 64:
        raise ValueError("username is at most 32 bytes and password at most 64")
    return LOGIN.pack(u.ljust(32), p.ljust(64))


class _Session:
    """One logged-in connection's output side."""

    def __init__(self, server: "FeedServer", writer: asyncio.StreamWriter, name: str):
        self.server = server
        self.writer = writer
        self.transport = writer.transport
        self.name = name
        self.limit = server.max_buffer
        self.last_write = asyncio.get_running_loop().time()
        self.closed = False
        self.requests = RateLimiter(REQUESTS_PER_SEC)

    def send(self, data: bytes, *, snapshot: bool = False) -> None:
        """Queue ``data`` on the transport, never waiting; drop the session if its unsent output
        would pass its limit (a snapshot raises the limit by its own size)."""
        if self.closed or not data:
            return
        buffered = self.transport.get_write_buffer_size()
        if buffered <= self.server.max_buffer:
            self.limit = self.server.max_buffer
        if snapshot:
            if buffered > self.server.max_buffer:
                # why: a client that asks for snapshots and does not read them would otherwise
                # hold one more snapshot per request in the gateway's memory
                self.drop(f"snapshot asked for with {buffered} bytes of earlier output unsent")
                return
            self.limit = max(self.limit, buffered + len(data) + self.server.max_buffer)
        elif buffered + len(data) > self.limit:
            self.drop(f"slow reader: {buffered} bytes unsent")
            return
        self.writer.write(data)
        self.last_write = asyncio.get_running_loop().time()

    def drop(self, why: str) -> None:
        """Close the connection at once (unsent output is discarded)."""
        if self.closed:
            return
        self.closed = True
        self.server.dropped += 1
        log.info("feed session %s disconnected: %s", self.name, why)
        self.server.sessions.discard(self)
        self.transport.abort()


class FeedServer:
    """The feed port of one gateway (module docstring). Build with ``start``."""

    def __init__(self, gw, *, heartbeat_s: float = 1.0, idle_s: float = 15.0,
                 login_timeout_s: float = 5.0, max_buffer: int = 4 << 20,
                 max_sessions: int = 1024, sndbuf: int = 0,
                 snapshot_orders_per_s: int = SNAPSHOT_ORDERS_PER_S):
        if isinstance(snapshot_orders_per_s, bool) or not isinstance(snapshot_orders_per_s, int) \
                or snapshot_orders_per_s < 1:
            raise ValueError(f"snapshot_orders_per_s must be an integer >= 1; got "
                             f"{snapshot_orders_per_s!r}")
        self.gw = gw
        self.snapshot_orders_per_s = snapshot_orders_per_s
        self._tokens, self._tokens_at = float(snapshot_orders_per_s), 0.0
        self.refused_snapshots = 0   # snapshot requests refused for the port's budget
        self.heartbeat_s, self.idle_s, self.login_timeout_s = heartbeat_s, idle_s, login_timeout_s
        self.max_buffer, self.max_sessions, self.sndbuf = max_buffer, max_sessions, sndbuf
        self.builder = itch.FeedBuilder()   # loaded from the engine by start(), under the lock
        self.sessions: set[_Session] = set()
        self.connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self.dropped = 0       # sessions disconnected for a full buffer
        self.desyncs = 0       # translator reloads (expected to stay 0)
        self.server: asyncio.AbstractServer | None = None
        self.sockets = ()

    # ------------------------------------------------------------ the market listener
    def on_batch(self, batch) -> None:
        """Translate one gateway batch and queue its bytes on every session (never awaits)."""
        try:
            msgs = self.builder.build(batch.first_seq, batch.orders, batch.result)
        except itch.FeedDesync:
            log.exception("feed translator out of step with the engine; reloading it")
            self.desyncs += 1
            self.builder.reload(batch.engine)
            for s in list(self.sessions):
                s.send(self._snapshot_bytes(batch.engine, None), snapshot=True)
            return
        if not msgs:
            return
        data = b"".join(frame(PacketType.SEQUENCED, itch.encode(m)) for m in msgs)
        for s in list(self.sessions):
            s.send(data)

    def _snapshot_bytes(self, engine, sid: int | None, *, directory: bool = False) -> bytes:
        """Return the framed snapshot of ``sid`` (None: every symbol), optionally each with its
        Symbol Directory first. Call with the engine at the builder's seq. Takes the orders it
        holds off the port's snapshot budget (``snapshot_orders_per_s``)."""
        infos = {info.id: info for info in self.gw.symbols.values()}
        # why filtered by the gateway's list: only symbols the engine knows have a book
        sids = [k for k in (self.builder.symbols() if sid is None else [sid]) if k in infos]
        snaps = [snapshot_frames(self.builder, k, engine.orders(k)) for k in sids]
        out = []
        if directory:   # every directory entry first: a reader knows all symbols to wait for
            for k, (_, msgs) in zip(sids, snaps):
                mant, exp = itch.tick_fields(infos[k].tick_size)
                out.append(frame(PacketType.SEQUENCED, itch.encode(itch.SymbolDirectory(
                    k, msgs[0].seq, msgs[0].ts, infos[k].name[:16], mant, exp))))
        out.extend(data for data, _ in snaps)
        self._take_budget(sum(msgs[0].orders for _, msgs in snaps))
        return b"".join(out)

    def _budget(self) -> float:
        """Return the orders left in the port's snapshot budget now (below 0: in debt)."""
        now = asyncio.get_running_loop().time()
        rate = float(self.snapshot_orders_per_s)
        self._tokens = min(rate, self._tokens + (now - self._tokens_at) * rate)
        self._tokens_at = now
        return self._tokens

    def _take_budget(self, orders: int) -> None:
        # why it may go below 0: one snapshot larger than a second's budget is still sent
        # whole; the requests after it wait until the debt is paid
        self._tokens = self._budget() - orders

    async def _send_snapshot(self, session: _Session, sid: int | None, *,
                             greeting: bool = False) -> None:
        """Write a snapshot consistent with the incremental stream (module docstring)."""
        async with self.gw.engine_lock:
            engine = self.gw.engine
            if self.builder.engine_seq != engine.seq:   # a batch the listener never saw
                self.desyncs += 1
                self.builder.reload(engine)
            data = self._snapshot_bytes(engine, sid, directory=greeting)
            if greeting:
                hello = itch.SystemEvent(itch.ALL_SYMBOLS, 0, self.gw.now_ns(), b"O")
                data = frame(PacketType.SEQUENCED, itch.encode(hello)) + data
            session.send(data, snapshot=True)
            if greeting and not session.closed:
                self.sessions.add(session)

    # ------------------------------------------------------------ one connection
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.connections[task] = writer
        sock = writer.get_extra_info("socket")
        if self.sndbuf and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
        session = None
        hb = None
        ticket = None
        try:
            # why logged-in sessions only: connections before login are bounded by gw.guard
            if len(self.sessions) >= self.max_sessions:
                writer.write(frame(PacketType.LOGIN_REJECTED, b"S"))
                return
            ticket = self.gw.guard.admit("feed", writer.get_extra_info("peername"),
                                         writer.transport.abort)
            if ticket is None:
                writer.write(frame(PacketType.LOGIN_REJECTED, b"S"))
                return
            account = await self._login(reader, writer, ticket)
            if account is None:
                return
            session = _Session(self, writer, account.name)
            writer.write(frame(PacketType.LOGIN_ACCEPTED, SESSION.ljust(10) + b"1".rjust(20)))
            await self._send_snapshot(session, None, greeting=True)
            hb = asyncio.create_task(self._heartbeats(session))
            await self._serve(reader, session)
        except FrameError as e:
            if session is not None:
                log.info("feed session %s closed: %s", session.name, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:   # why broad: one broken session must never take the port down
            log.exception("feed session failed")
        finally:
            if ticket is not None:
                ticket.release()
            if hb is not None:
                hb.cancel()
            if session is not None:
                self.sessions.discard(session)
                session.closed = True
            self.connections.pop(task, None)
            try:
                writer.close()
            except Exception:
                pass

    async def _login(self, reader, writer, ticket):
        """Return the account of a valid login, or None after answering Login Rejected."""
        got = await read_frame(reader, max_size=MAX_INBOUND, idle_s=self.login_timeout_s)
        if got is None:
            return None
        ticket.presented()
        ptype, payload = got
        peer = writer.get_extra_info("peername")
        if ptype != PacketType.LOGIN_REQUEST or len(payload) != LOGIN.size:
            self.gw.guard.record_failure("feed", peer, None, "not a Login Request")
            writer.write(frame(PacketType.LOGIN_REJECTED, b"A"))
            return None
        user, password = (f.rstrip(b" ").decode("utf-8", "replace")
                          for f in LOGIN.unpack(payload))
        try:   # scrypt costs ~50 ms: on the guard's pool so the gateway never waits for it
            return await self.gw.guard.authenticate(self.gw.accounts, "feed", peer, user,
                                                    password, "marketdata")
        except AuthError:
            writer.write(frame(PacketType.LOGIN_REJECTED, b"A"))
            return None

    async def _serve(self, reader, session: _Session) -> None:
        """Read the client's packets until it logs out, closes, or goes quiet."""
        while not session.closed:
            got = await read_frame(reader, max_size=MAX_INBOUND, idle_s=self.idle_s)
            if got is None:
                return
            ptype, payload = got
            if ptype == PacketType.CLIENT_HEARTBEAT:
                continue
            if ptype == PacketType.LOGOUT_REQUEST:
                session.send(frame(PacketType.END_OF_SESSION))
                return
            if ptype != PacketType.UNSEQUENCED:
                session.send(frame(PacketType.DEBUG, b"unexpected packet type"))
                continue
            try:
                req = itch.decode_request(payload)
            except itch.FeedError as e:
                session.send(frame(PacketType.DEBUG, str(e).encode()))
                continue
            if req.symbol != itch.ALL_SYMBOLS and req.symbol not in self.builder.symbols():
                session.send(frame(PacketType.DEBUG, b"unknown symbol id"))
            elif not session.requests.allow(self.gw.now_ns()):
                session.send(frame(PacketType.DEBUG, b"snapshot requests over the rate limit"))
            elif self._budget() < 0:
                # why a port budget beside the per-session rate: a snapshot's cost grows with
                # the book, and many sessions asking at their allowed rate would together take
                # the event loop from every other client
                self.refused_snapshots += 1
                session.send(frame(PacketType.DEBUG, b"snapshot budget of the feed port "
                                                     b"exhausted; ask again later"))
            else:
                await self._send_snapshot(
                    session, None if req.symbol == itch.ALL_SYMBOLS else req.symbol)

    async def _heartbeats(self, session: _Session) -> None:
        """Send a server heartbeat whenever the session has had no output for heartbeat_s."""
        loop = asyncio.get_running_loop()
        while not session.closed:
            await asyncio.sleep(self.heartbeat_s / 2)
            if loop.time() - session.last_write >= self.heartbeat_s:
                session.send(frame(PacketType.SERVER_HEARTBEAT))

    # ------------------------------------------------------------ life cycle
    def close(self, reason: str | None = None) -> None:
        """Stop listening and end every session (System Event "C", a Debug packet carrying
        ``reason`` if given, End of Session, close)."""
        self.gw.remove_market_listener(self.on_batch)
        if self.server is not None:
            self.server.close()
        bye = frame(PacketType.SEQUENCED, itch.encode(
            itch.SystemEvent(itch.ALL_SYMBOLS, 0, self.gw.now_ns(), b"C")))
        why = frame(PacketType.DEBUG, reason.encode()[:1000]) if reason else b""
        for s in list(self.sessions):
            s.send(bye + why + frame(PacketType.END_OF_SESSION))
            s.closed = True
            s.writer.close()
        self.sessions.clear()
        for w in list(self.connections.values()):   # their reads end, and their tasks with them
            w.transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the listening socket and every connection are closed."""
        if self.connections:
            await asyncio.gather(*self.connections, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()


async def start(gw, host: str = "127.0.0.1", port: int = 0, **options) -> FeedServer:
    """Start the feed port of ``gw`` on ``host:port`` (port 0: any free port) and return its
    ``FeedServer`` (``sockets`` holds the listening sockets; ``close()``/``wait_closed()``).

    Options: ``heartbeat_s`` (1.0), ``idle_s`` (15.0), ``login_timeout_s`` (5.0),
    ``max_buffer`` (bytes of unsent output before a session is dropped, 4 MiB),
    ``max_sessions`` (1024), ``snapshot_orders_per_s`` (the orders all snapshots of the port
    may hold a second, 100,000: past it a Snapshot Request is answered with a Debug packet;
    the snapshot after a login is always sent), ``sndbuf`` (the kernel send buffer of each
    session's socket in bytes; 0 keeps the system's, which can hold megabytes more for a slow
    reader), ``ssl`` (an ``ssl.SSLContext``: TLS only). Raises TypeError for an unknown
    option, ValueError for a bad ``snapshot_orders_per_s`` and OSError if the address cannot
    be bound."""
    tls = options.pop("ssl", None)
    fs = FeedServer(gw, **options)
    async with gw.engine_lock:   # the builder starts from the engine as no batch is in flight
        fs.builder.reload(gw.engine)
        gw.add_market_listener(fs.on_batch)
    fs.server = await asyncio.start_server(fs._handle, host, port, limit=1 << 16, ssl=tls)
    fs.sockets = fs.server.sockets
    return fs
