"""``exsim serve``: one asyncio process running the gateway core and the ports asked for.

``serve`` takes the journal as an opener (``journal.JournalOpener``) from the code that composes
the server: ``exsim.replay.serving.serve`` opens or creates the store on a data directory and
calls this one. This module imports nothing above ``exchange/``.

Each port is a protocol module's ``start(gw, host, port, **options)``: FIX order entry and
market data (``exchange.gateway.fix.server``), binary order entry
(``exchange.gateway.binary_server``), the ITCH-style feed (``exchange.gateway.feed_server``)
and the web page (``exchange.gateway.web``). Once every port listens, the actual addresses are
written to ``DATA_DIR/gateway/listening.json`` (``{"fix": [host, port], ...}``; port 0 asks the
system for a free port) and printed to stderr; the file is removed at a clean stop.

Invariants:
- Ports listen on 127.0.0.1 unless an address names another host.
- SIGINT and SIGTERM stop the ports, process what was queued, seal and close the store: a
  clean stop loses nothing. SIGKILL loses nothing acknowledged either (the store's and the
  gateway state's recovery at the next start), only requests not yet answered.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import sys

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway.accounts import Accounts
from exsim.exchange.gateway.core import Gateway
from exsim.exchange.gateway.journal import JournalOpener
from exsim.exchange.gateway.tls import check_plaintext

__all__ = ["serve", "parse_address", "PORTS"]

# port name -> the module whose start(gw, host, port, **options) serves it (a fixed table:
# nothing a user passes is imported)
PORTS = {
    "fix": "exsim.exchange.gateway.fix.server",
    "binary": "exsim.exchange.gateway.binary_server",
    "feed": "exsim.exchange.gateway.feed_server",
    "web": "exsim.exchange.gateway.web",
    # NASDAQ's published protocols (docs/gateway-nasdaq.md)
    "ouch50": "exsim.exchange.gateway.nasdaq.ouch_server",
    "itch50": "exsim.exchange.gateway.nasdaq.itch_server",
}
DEFAULT_HOST = "127.0.0.1"


def parse_address(text: str, what: str) -> tuple[str, int]:
    """Return (host, port) of ``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1).

    Raises UsageError naming ``what`` for anything else or a port outside [0, 65535]."""
    host, _, port = str(text).rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST
    try:
        p = int(port)
    except ValueError:
        raise UsageError(f"--{what} takes HOST:PORT (or PORT); got {text!r}") from None
    if not 0 <= p <= 65535:
        raise UsageError(f"--{what}: port must be in [0, 65535]; got {p}")
    return host, p


def _address(server) -> tuple[str, int]:
    sockets = getattr(server, "sockets", None) or []
    if sockets:
        host, port = sockets[0].getsockname()[:2]
        return host, port
    return getattr(server, "host", ""), getattr(server, "port", 0)


async def serve(open_journal: JournalOpener, accounts_path: str, ports: dict, *,
                durability: str = "fsync", batch_ns: int = 1_000_000, batch_max: int = 1024,
                stop: asyncio.Event | None = None, options: dict | None = None,
                allow_weak_hashes: bool = False, limits=None, tls=None,
                allow_plaintext: bool = False) -> None:
    """Run the gateway on the journal ``open_journal()`` returns until ``stop`` is set (or
    SIGINT / SIGTERM); the journal is closed at the stop.

    ports: {port name: "HOST:PORT"} for any of ``PORTS``; options: {port name: keyword
    options for its start()}; ``limits``: the ``guard.Limits`` of every port (None: the
    defaults); ``tls``: an ``ssl.SSLContext`` (``tls.server_context``) every port serves TLS
    with; without it a port on an address other than loopback is refused unless
    ``allow_plaintext``. Returns None after a clean stop. Raises UsageError for an unknown port name or a
    bad address, InputError for a bad accounts file (or one whose password hashes are cheaper
    than ``accounts.MIN_SCRYPT_WORK``, unless ``allow_weak_hashes``), what
    ``Gateway.open`` raises, and the failure that stopped the core.
    """
    unknown = set(ports) - set(PORTS)
    if unknown:
        raise UsageError(f"unknown port(s) {sorted(unknown)}; known: {sorted(PORTS)}")
    if not ports:
        raise UsageError("give at least one of --fix, --binary, --feed, --web, --ouch50, "
                         "--itch50")
    addresses = {name: parse_address(a, name) for name, a in ports.items()}
    check_plaintext(addresses, tls=tls is not None, allow_plaintext=allow_plaintext)
    accounts = Accounts.load(accounts_path)
    if not allow_weak_hashes:
        accounts.require_cost()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            # why: signal handlers can be set only from the main thread (serve run by a test
            # on another thread stops by ``stop`` alone) and not on every platform's loop
            pass
    gw = await Gateway.open(open_journal, accounts, durability=durability, batch_ns=batch_ns,
                            batch_max=batch_max, limits=limits)
    servers = []
    try:
        listening = {}
        for name, (host, port) in addresses.items():
            module = importlib.import_module(PORTS[name])
            opts = dict((options or {}).get(name, {}))
            if tls is not None:
                opts.setdefault("ssl", tls)
            srv = await module.start(gw, host, port, **opts)
            servers.append(srv)
            listening[name] = list(_address(srv))
            print(f"exsim serve: {name} listening on {listening[name][0]}:{listening[name][1]}",
                  file=sys.stderr, flush=True)
            if getattr(srv, "url", None):
                # why: the page's link carries its operator token (after the #)
                print(f"exsim serve: web page {srv.url}", file=sys.stderr, flush=True)
        _write_listening(gw.state_dir, listening)
        stopper = loop.create_task(stop.wait())
        core = gw._task
        await asyncio.wait({stopper, core}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if gw.failed is not None:
            raise gw.failed
    finally:
        try:
            os.unlink(os.path.join(gw.state_dir, "listening.json"))   # why: the ports are gone
        except OSError:
            pass
        # why the reason: a client whose orders were in flight when the store failed (a full
        # disk) hears why the gateway stopped, not only that it did
        reason = f"the gateway stopped: {gw.failed}" if gw.failed is not None else None
        for srv in servers:
            srv.close(reason)
        for srv in servers:
            try:
                await asyncio.wait_for(srv.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):   # why: a stuck client must not block the stop
                pass
        await gw.close()


def _write_listening(state_dir: str, listening: dict) -> None:
    """Write ``listening.json`` atomically (a reader never sees half a file)."""
    path = os.path.join(state_dir, "listening.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(listening, f)
    os.replace(tmp, path)
