"""The FIX port: a TCP listener whose every connection is one ``session.FixSession``.

``start(gw, host, port, **options)`` returns a ``FixServer`` (``close()`` / ``wait_closed()``,
``sockets`` for the bound address). Options (all keywords, defaults in ``DEFAULTS``):
``comp_id`` (the gateway's CompID, the clients' TargetCompID), ``logon_timeout`` (s a
connection may take to log on), ``max_message_size`` (BodyLength limit, bytes),
``min_heartbeat`` / ``max_heartbeat`` (the HeartBtInt a client may ask for, s),
``max_output_bytes`` (unsent output before a client that does not read is disconnected),
``resend_per_s`` (stored messages a session's resends repeat per second, so one client's
resends take a bounded share of the server), ``backlog_per_s`` (reports the logons of all
sessions deliver per second from the reports stored while they were away), ``sndbuf``
(SO_SNDBUF of each connection in bytes; 0 keeps the system's autotuning, which can hold
megabytes more for a client that does not read), ``max_garbled`` (garbled messages a session may send before it is logged out),
``ssl`` (an ``ssl.SSLContext``: TLS only), ``max_sessions`` (logged-on sessions at once; more are closed at once), ``marketdata`` (serve
MarketDataRequest, 35=V).

Invariants:
- The session state lives in ``<gw.state_dir>/fix.sqlite`` (``store.SessionStore``), never
  outside the data directory.
- Closing the server logs every session out and closes the listener; the store is closed
  once every session has ended.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import socket

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway.core import Budget
from exsim.exchange.gateway.fix.session import FixSession
from exsim.exchange.gateway.fix.store import OutboundReader, SessionStore

__all__ = ["start", "FixServer", "DEFAULTS"]

DEFAULTS = {"comp_id": "EXSIM", "logon_timeout": 10.0, "max_message_size": 4096,
            "min_heartbeat": 1, "max_heartbeat": 300, "max_output_bytes": 16 << 20,
            "max_garbled": 16, "max_sessions": 1024, "marketdata": True,
            "resend_per_s": 2000, "backlog_per_s": 10_000, "sndbuf": 0}


class FixServer:
    """The listening FIX port (module docstring)."""

    def __init__(self, gw, options: dict):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise UsageError(f"unknown FIX option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        opts = {**DEFAULTS, **options}
        self.gw = gw
        self.comp_id = str(opts["comp_id"])
        self.logon_timeout = float(opts["logon_timeout"])
        self.max_message_size = int(opts["max_message_size"])
        self.min_heartbeat, self.max_heartbeat = int(opts["min_heartbeat"]), int(opts["max_heartbeat"])
        self.max_output_bytes = int(opts["max_output_bytes"])
        self.max_garbled = int(opts["max_garbled"])
        self.max_sessions = int(opts["max_sessions"])
        self.resend_per_s = int(opts["resend_per_s"])
        self.backlog_per_s = int(opts["backlog_per_s"])
        self.sndbuf = int(opts["sndbuf"])
        if not (0 < self.logon_timeout and 64 <= self.max_message_size <= 1 << 20
                and 1 <= self.min_heartbeat <= self.max_heartbeat and self.resend_per_s >= 1
                and self.backlog_per_s >= 1 and self.sndbuf >= 0):
            raise UsageError("FIX options out of range: logon_timeout > 0, max_message_size in "
                             "[64, 2^20], 1 <= min_heartbeat <= max_heartbeat, resend_per_s "
                             ">= 1, backlog_per_s >= 1, sndbuf >= 0")
        # the reports that logons' backlogs deliver, shared by every session of the port
        self.backlog = Budget(self.backlog_per_s, self.backlog_per_s)
        self.store = SessionStore(os.path.join(gw.state_dir, "fix.sqlite"))
        self.active: dict[str, FixSession] = {}    # session key -> the logged-on session
        self.sessions: set[FixSession] = set()
        self.tasks: set[asyncio.Task] = set()
        # counters of the whole port: rejects_received / business_rejects_received (messages
        # of ours that clients refused, session.FixSession._peer_rejected)
        self.stats: collections.Counter = collections.Counter()
        self.marketdata = None
        if opts["marketdata"]:
            try:
                from exsim.exchange.gateway.fix.marketdata import MarketData
            except ImportError:
                MarketData = None
            if MarketData is not None:
                self.marketdata = MarketData(gw, self)
        self.server: asyncio.Server | None = None
        self._reader: OutboundReader | None = None   # used only on the _reads thread
        self._reads: concurrent.futures.ThreadPoolExecutor | None = None

    async def off_loop(self, fn, *args):
        """Return ``fn(reader, *args)`` run on the port's read thread, where ``reader`` is the
        port's read-only ``OutboundReader``. Why: a resend's SQLite reads and the building
        of 256 messages a step held the event loop from every other session (issue 36); on
        a thread the loop gets the GIL back every switch interval (5 ms)."""
        if self._reads is None:
            self._reads = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="exsim-fix-read")
        return await asyncio.get_running_loop().run_in_executor(self._reads, self._call, fn,
                                                                 args)

    def _call(self, fn, args):
        if self._reader is None:
            self._reader = OutboundReader(self.store.path)
        return fn(self._reader, *args)

    @property
    def sockets(self):
        """The listening sockets (``getsockname()`` gives the bound address)."""
        return self.server.sockets if self.server else []

    async def _serve(self, reader, writer) -> None:
        # why logged-on sessions only: connections before logon are bounded by gw.guard
        if len(self.active) >= self.max_sessions:
            writer.close()
            return
        ticket = self.gw.guard.admit("fix", writer.get_extra_info("peername"),
                                     writer.transport.abort)
        if ticket is None:
            writer.transport.abort()
            return
        sock = writer.get_extra_info("socket")
        if self.sndbuf and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
        session = FixSession(self, reader, writer)
        session.ticket = ticket
        self.sessions.add(session)
        task = asyncio.current_task()
        self.tasks.add(task)
        try:
            await session.run()
        finally:
            ticket.release()
            self.sessions.discard(session)
            self.tasks.discard(task)
            if self.marketdata is not None:
                self.marketdata.drop(session)

    def close(self, reason: str | None = None) -> None:
        """Stop listening and log every session out (Logout Text: ``reason``, e.g. why the
        gateway stopped, else "the gateway is shutting down")."""
        if self.server is not None:
            self.server.close()
        for s in list(self.sessions):
            s.shutdown(reason or "the gateway is shutting down")
        if self.marketdata is not None:
            self.marketdata.close()

    async def wait_closed(self) -> None:
        """Wait until the listener and every session have ended, then close the store."""
        if self.server is not None:
            await self.server.wait_closed()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=5)
        if self._reads is not None:
            reader, self._reader = self._reader, None
            self._reads.shutdown(wait=True)
            if reader is not None:
                reader.close()
        self.store.close()


async def start(gw, host: str = "127.0.0.1", port: int = 0, **options) -> FixServer:
    """Listen for FIX connections on (host, port) (port 0: any free port) and return the
    FixServer. Raises UsageError for an unknown or out-of-range option, OSError if the address
    cannot be bound."""
    tls = options.pop("ssl", None)
    srv = FixServer(gw, options)
    srv.server = await asyncio.start_server(srv._serve, host, port, ssl=tls)
    return srv
