"""An asyncio client of the ITCH-style feed: logs in, keeps a local visible book per symbol from
the snapshot and the incremental messages, and re-requests a snapshot when a symbol's sequence
has a gap (docs/gateway-feed.md).

>>> async def main():                                             # doctest: +SKIP
...     feed = await FeedClient.connect("127.0.0.1", 7003, "alice", "pw")
...     await feed.wait_synced()
...     print(feed.depth("JPM"))
...     await feed.close()

Invariants:
- A symbol's book is ``synced`` only between a complete snapshot and the next gap; incremental
  messages of an unsynced symbol are discarded until its requested snapshot arrives, and a
  message whose seq is not the next one is never applied.
- The client sends a heartbeat every ``heartbeat_s`` and closes the connection when the server
  is silent for ``idle_s`` (the server heartbeats every second when idle).
"""

from __future__ import annotations

import asyncio
import contextlib

from exsim.exchange.gateway import itch
from exsim.exchange.gateway.feed_server import encode_login
from exsim.exchange.gateway.framing import FrameError, PacketType, frame, read_frame

__all__ = ["FeedClient", "LoginRejected"]

MAX_FRAME = 1 + max(lay.struct.size for lay in itch.LAYOUTS.values()) + 64


class LoginRejected(ConnectionError):
    """The server refused the login (``code``: b"A" not authorized, b"S" no session free)."""

    def __init__(self, code: bytes):
        super().__init__(f"feed login rejected ({code!r})")
        self.code = code


class FeedClient:
    """A logged-in feed connection and its local books. Build with ``connect``."""

    def __init__(self, reader, writer, *, keep_messages: bool = False,
                 heartbeat_s: float = 1.0, idle_s: float = 15.0):
        self._reader, self._writer = reader, writer
        self.heartbeat_s, self.idle_s = heartbeat_s, idle_s
        self.books: dict[int, itch.VisibleBook] = {}
        self.directory: dict[int, itch.SymbolDirectory] = {}
        self.phase: dict[int, itch.TradingPhase] = {}
        self.indicative: dict[int, itch.Indicative] = {}
        self.next_seq: dict[int, int] = {}     # per symbol, the seq the next message must have
        self.synced: set[int] = set()
        self.gaps = 0                          # gaps seen (each answered by a snapshot request)
        self.messages: list | None = [] if keep_messages else None
        self.debug: list[bytes] = []           # the server's debug packets
        self.closed_reason: str | None = None
        self._in_snapshot: set[int] = set()
        self._requested: set[int] = set()
        self._changed = asyncio.Condition()
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._beat())]

    @classmethod
    async def connect(cls, host: str, port: int, username: str, password: str, *,
                      timeout: float = 10.0, **options) -> "FeedClient":
        """Connect and log in; return the client (its books fill as the snapshot arrives).

        Raises LoginRejected if the server refuses the login, ConnectionError / OSError if the
        connection fails or closes first, asyncio.TimeoutError after ``timeout`` seconds."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        try:
            writer.write(frame(PacketType.LOGIN_REQUEST, encode_login(username, password)))
            got = await read_frame(reader, max_size=MAX_FRAME, idle_s=timeout)
            if got is None:
                raise ConnectionError("the feed closed the connection during login")
            ptype, payload = got
            if ptype == PacketType.LOGIN_REJECTED:
                raise LoginRejected(payload[:1])
            if ptype != PacketType.LOGIN_ACCEPTED:
                raise ConnectionError(f"unexpected login answer, packet type {ptype}")
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, **options)

    # ------------------------------------------------------------ views
    def symbol_id(self, symbol: int | str) -> int:
        """Return the id of a symbol named in the directory (or an id). Raises KeyError."""
        if isinstance(symbol, int):
            return symbol
        for sid, d in self.directory.items():
            if d.name == symbol:
                return sid
        raise KeyError(f"symbol {symbol!r} is not in the feed's directory")

    def book(self, symbol: int | str) -> list[tuple[int, int, int, int]]:
        """Return (ref, side, price, qty) of the symbol's visible orders in priority order."""
        return self.books.get(self.symbol_id(symbol), itch.VisibleBook()).rows()

    def depth(self, symbol: int | str) -> tuple[list, list]:
        """Return (bids, asks) as lists of (price, qty, count), best first."""
        b = self.books.get(self.symbol_id(symbol), itch.VisibleBook())
        return b.depth(0), b.depth(1)

    def seq(self, symbol: int | str) -> int:
        """Return the seq of the last message applied to the symbol (0: none)."""
        return self.next_seq.get(self.symbol_id(symbol), 1) - 1

    async def wait_for(self, predicate, timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` is true (checked after every message). Raises
        asyncio.TimeoutError after ``timeout`` s, ConnectionError if the connection ends."""
        async def wait():
            async with self._changed:
                while not predicate():
                    if self.closed_reason is not None:
                        raise ConnectionError(f"feed closed: {self.closed_reason}")
                    await self._changed.wait()
        await asyncio.wait_for(wait(), timeout)

    async def wait_synced(self, timeout: float = 10.0) -> None:
        """Wait until every symbol of the directory has a complete book."""
        await self.wait_for(lambda: self.directory and set(self.directory) <= self.synced,
                            timeout)

    # ------------------------------------------------------------ requests
    def request_snapshot(self, symbol: int = itch.ALL_SYMBOLS) -> None:
        """Ask for a fresh snapshot of ``symbol`` (ALL_SYMBOLS: every symbol)."""
        self._writer.write(frame(PacketType.UNSEQUENCED,
                                 itch.encode_request(itch.SnapshotRequest(symbol))))

    async def close(self) -> None:
        """Log out and close the connection."""
        with contextlib.suppress(Exception):
            self._writer.write(frame(PacketType.LOGOUT_REQUEST))
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 2)

    # ------------------------------------------------------------ the reader
    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            self._writer.write(frame(PacketType.CLIENT_HEARTBEAT))

    async def _read(self) -> None:
        reason = "closed by the server"
        try:
            while True:
                got = await read_frame(self._reader, max_size=MAX_FRAME, idle_s=self.idle_s)
                if got is None:
                    break
                ptype, payload = got
                if ptype == PacketType.SEQUENCED:
                    self._on_message(itch.decode(payload))
                elif ptype == PacketType.END_OF_SESSION:
                    reason = "end of session"
                    break
                elif ptype == PacketType.DEBUG:
                    self.debug.append(payload)
                async with self._changed:
                    self._changed.notify_all()
        except (FrameError, itch.FeedError, ConnectionError) as e:
            reason = str(e) or type(e).__name__
        finally:
            self.closed_reason = reason
            async with self._changed:
                self._changed.notify_all()

    def _on_message(self, m) -> None:
        if self.messages is not None:
            self.messages.append(m)
        t, sid = type(m), m.symbol
        if t is itch.SystemEvent:
            return
        if t is itch.SymbolDirectory:
            self.directory[sid] = m
            return
        if t is itch.SnapshotStart:
            self._in_snapshot.add(sid)
            self.synced.discard(sid)
            self.books.setdefault(sid, itch.VisibleBook()).clear()
            self.indicative.pop(sid, None)
            return
        if sid in self._in_snapshot:
            if t is itch.SnapshotEnd:
                self._in_snapshot.discard(sid)
                self._requested.discard(sid)
                self.synced.add(sid)
                self.next_seq[sid] = m.seq + 1
            else:
                self._apply(sid, m)
            return
        if sid not in self.synced:
            return   # waiting for the snapshot this symbol asked for
        want = self.next_seq[sid]
        if m.seq < want:
            return   # already in the snapshot
        if m.seq > want:
            self.gaps += 1
            self.synced.discard(sid)
            if sid not in self._requested:
                self._requested.add(sid)
                self.request_snapshot(sid)
            return
        self.next_seq[sid] = want + 1
        try:
            self._apply(sid, m)
        except itch.FeedDesync:
            self.synced.discard(sid)
            self._requested.add(sid)
            self.request_snapshot(sid)

    def _apply(self, sid: int, m) -> None:
        t = type(m)
        if t is itch.TradingPhase:
            self.phase[sid] = m
            if m.phase not in itch.CALL_PHASES:
                self.indicative.pop(sid, None)
        elif t is itch.Indicative:
            self.indicative[sid] = m
        else:
            self.books.setdefault(sid, itch.VisibleBook()).apply(m)
