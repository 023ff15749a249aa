"""What every SoupBinTCP 3.0 session of the NASDAQ ports shares: admission through the
gateway's guard, the write path with its buffer bound, heartbeats, login rejects, shutdown.

A port subclasses ``SoupSession`` (``run``, ``unsubscribe``, ``send_due``) and accepts
connections with ``serve_connection``. Invariants: a session's socket buffer never passes
``max_buffer_bytes`` (the session is dropped instead); a server heartbeat goes out after each
``heartbeat_s`` without other output; a bug in one session costs that connection only.
"""

from __future__ import annotations

import asyncio
import logging

from exsim.exchange.gateway.nasdaq.soupbintcp import Packet, frame

__all__ = ["SoupSession", "serve_connection", "end_sessions", "wait_sessions"]

log = logging.getLogger(__name__)


class SoupSession:
    """One client connection of a SoupBinTCP port (``server.opts`` holds ``heartbeat_s``,
    ``max_buffer_bytes``); ``what`` names the port in logs."""

    what = "SoupBinTCP"

    def __init__(self, server, reader, writer, ticket):
        self.server, self.gw, self.opts = server, server.gw, server.opts
        self.reader, self.writer, self.transport = reader, writer, writer.transport
        self.peer = writer.get_extra_info("peername")
        self.ticket = ticket
        self.logged_in = False
        self.closed = False
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.loop = asyncio.get_running_loop()
        self.last_sent = self.loop.time()

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        self.transport.write(data)
        self.last_sent = self.loop.time()
        if self.transport.get_write_buffer_size() > self.opts["max_buffer_bytes"]:
            self.drop("its socket buffer passed max_buffer_bytes (a slow reader)")

    def drop(self, why: str) -> None:
        """Disconnect now (no more bytes are written); the client may log in again."""
        if not self.closed:
            log.info("%s session %s disconnected: %s", self.what, self.peer, why)
            self.closed = True
            self.wake.set()
            self.transport.abort()

    def send_due(self) -> None:
        """Write what is due before End of Session (a port's override)."""

    def unsubscribe(self) -> None:
        """Stop hearing the port's messages (a port's override)."""

    def end_of_session(self) -> None:
        """Send what is due and End of Session (logged-in clients), close after the bytes."""
        if self.closed:
            return
        if self.logged_in:
            self.send_due()
            self.transport.write(frame(Packet.END_OF_SESSION))
        self.closed = True
        self.wake.set()
        self.transport.close()

    def logged_out(self) -> None:
        """The client sent Logout Request: close (its session, not the server's: no End of
        Session)."""
        self.closed = True
        self.wake.set()
        self.transport.close()

    def shutdown(self) -> None:
        """Unsubscribe, stop the tasks and close the socket (idempotent)."""
        self.unsubscribe()
        for t in self.tasks:
            t.cancel()
        if not self.closed:
            self.closed = True
            self.transport.close()

    async def heartbeats(self) -> None:
        """Send a Server Heartbeat after each ``heartbeat_s`` without other output."""
        period = self.opts["heartbeat_s"]
        try:
            while not self.closed:
                wait = self.last_sent + period - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                self._write(frame(Packet.SERVER_HEARTBEAT))
        except asyncio.CancelledError:
            pass

    def rejected(self, code: bytes, why: str) -> None:
        """Send Login Rejected ``code`` and close; returns None."""
        log.warning("%s login from %s rejected: %s", self.what, self.peer, why)
        self.transport.write(frame(Packet.LOGIN_REJECTED, code))
        self.closed = True
        self.transport.close()
        return None

    async def run(self) -> None:   # pragma: no cover - every port overrides it
        """Serve the connection until it ends."""
        raise NotImplementedError


async def serve_connection(server, port_name: str, session_cls, reader, writer) -> None:
    """Admit one connection through ``server.gw.guard`` (per-address and per-port limits
    before login), run a ``session_cls`` on it, and clean up whatever happens. ``server``
    keeps its live sessions in ``server.sessions``."""
    ticket = server.gw.guard.admit(port_name, writer.get_extra_info("peername"),
                                   writer.transport.abort)
    if ticket is None:
        writer.transport.abort()
        return
    s = session_cls(server, reader, writer, ticket)
    server.sessions.add(s)
    try:
        await s.run()
    except Exception:   # a bug here must cost one connection, never the server
        log.exception("%s session %s ended by an error", s.what, s.peer)
    finally:
        ticket.release()
        s.shutdown()
        server.sessions.discard(s)


def end_sessions(sessions, reason: str | None = None) -> None:
    """Send End of Session to every logged-in session of a port (after a Debug packet with
    ``reason``, if given: why the gateway stopped) and close them all."""
    for s in list(sessions):
        if reason and s.logged_in and not s.closed:
            s.transport.write(frame(Packet.DEBUG, reason.encode("ascii", "replace")[:1000]))
        s.end_of_session()


async def wait_sessions(sessions, timeout_s: float = 2.0) -> None:
    """Wait until ``sessions`` (a port's live set) is empty, at most ``timeout_s``."""
    for _ in range(int(timeout_s / 0.01)):
        if not sessions:
            return
        await asyncio.sleep(0.01)
