"""The ``--web`` page: a live view of a served session for a person watching it.

One HTTP port serves a static page (``static/index.html``, plain JavaScript, no build step) at
``/`` and a WebSocket at ``/ws``. A watcher logs on over the WebSocket, gets a *snapshot* (the
symbols, the top ``levels`` price levels per side, the last ``tape`` trades and the positions it
may see), then *updates*: the ladders that changed, the new trades, the changed positions.

``Board`` is the update builder. The gateway's market listener hands it each batch's L2, fill
and event rows (copied: the engine reuses its buffers); ``Board.flush`` folds them into its
state and returns what changed, at most every ``interval_s`` (100 ms): a busy gateway sends a
watcher ten messages a second, not one per batch.

Who may watch (the page shows per-account positions, so it is not public):
- the operator, with the read-only token of this server (``token=`` option, else the one kept
  in ``DATA_DIR/gateway/web-token``, made on first start with mode 0600, so an open page
  reconnects after a restart; ``WebServer.url`` is the page's address with the token in its
  ``#fragment``, which a browser never sends over HTTP): everything, every account's positions;
- an account with role ``marketdata`` (name and password typed into the page): the ladders and
  the anonymous tape, and the positions of its own account, or of every account of its firm if
  it also has role ``dropcopy`` (the same executions its drop copy would see).
The HTTP page itself holds no data. The server listens on 127.0.0.1 unless told otherwise; it
has no TLS, so a token or password sent to a non-loopback address crosses the network in clear.

Invariants:
- A watcher sees the snapshot, then every later update, in order: it joins the broadcast with
  no ``await`` between taking the snapshot and joining, and updates are built on the one event
  loop that also builds snapshots.
- L2 rows carry the new total of a level, so the ladder after applying them is the engine's
  ``depth`` (a row applied twice changes nothing).
- Positions count each fill once per side: ``buy_trader`` gains ``qty``, ``sell_trader`` loses
  it; average cost is that of the open position (a reducing fill realises profit at it, a fill
  through zero opens the new side at the fill price).
- A watcher whose queue of unsent messages is full (it reads slower than the updates come) is
  disconnected (close code 1013); it never slows the gateway or another watcher. Only logged-on
  watchers take one of ``max_watchers`` slots (more are closed 1013); connections not logged on
  are bounded per address by ``gw.guard`` (closed 1013 past the limit), so idle sockets cannot
  lock out the operator's token. Every
  inbound message is at most 4 KiB; a watcher that has not logged on within ``auth_timeout_s``
  or sends anything after logging on is disconnected (close code 1008).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import heapq
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
from collections import deque
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Response

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import AUCTION_SIDE, EVENT_DTYPE, L2_DTYPE, Event, Phase, Side

from .accounts import AuthError

__all__ = ["Board", "Position", "Scope", "WebServer", "start", "PAGE"]

log = logging.getLogger("exsim.gateway.web")

PAGE = Path(__file__).with_name("static") / "index.html"
MAX_INBOUND = 4096
SIDES = {int(Side.BUY): "bids", int(Side.SELL): "asks"}
MARKETDATA_ONLY = ("this account has market-data rights only: it cannot trade, so it has no "
                   "positions (the operator's link, or an account with the dropcopy role, sees "
                   "its firm's positions)")
TOKEN_FILE = "web-token"     # in the gateway's state directory: the operator's token, mode 0600
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_EMPTY_L2, _EMPTY_EVENTS = np.zeros(0, L2_DTYPE), np.zeros(0, EVENT_DTYPE)


@dataclass(frozen=True)
class Scope:
    """Whose positions a watcher sees: ``everyone`` (the token), or the named ``accounts``."""

    everyone: bool = False
    accounts: frozenset = frozenset()
    note: str = ""      # why the watcher sees no positions at all (the page shows it instead)

    def sees(self, account: str) -> bool:
        """Return True if this watcher may see ``account``'s position."""
        return self.everyone or account in self.accounts


class Position:
    """One account's position in one symbol: net lots, average cost of the open position
    (ticks), realised profit (ticks * lots), lots bought and sold. The lots are exact integers;
    cost and profit are floats (a display value: exact while they stay below 2^53)."""

    __slots__ = ("net", "avg_cost", "realized", "bought", "sold")

    def __init__(self):
        self.net = 0
        self.avg_cost = 0.0
        self.realized = 0.0
        self.bought = 0
        self.sold = 0

    def fill(self, qty: int, price: int) -> None:
        """Apply a fill of signed ``qty`` (> 0 bought) at ``price``; returns nothing."""
        if qty > 0:
            self.bought += qty
        else:
            self.sold -= qty
        net = self.net
        if net == 0 or (net > 0) == (qty > 0):
            total = net + qty
            self.avg_cost = (self.avg_cost * abs(net) + price * abs(qty)) / abs(total)
            self.net = total
            return
        closing = min(abs(qty), abs(net))
        self.realized += closing * (price - self.avg_cost) * (1 if net > 0 else -1)
        self.net = net + qty
        if self.net == 0:
            self.avg_cost = 0.0
        elif abs(qty) > closing:        # through zero: the rest opens the other side here
            self.avg_cost = float(price)

    def row(self, account: str, symbol: str) -> dict:
        """Return the position as the page's JSON row."""
        return {"account": account, "symbol": symbol, "net": self.net,
                "avg_cost": self.avg_cost, "realized": self.realized,
                "bought": self.bought, "sold": self.sold}


class Board:
    """The state the page shows, built from the gateway's batches (see the module docstring).

    ``symbols``: {symbol id: (name, tick_size str)}; ``account_of``: trader id -> account name
    (or None for a trader no account has: shown as ``trader N``, to the operator only).
    """

    def __init__(self, symbols: dict, account_of, *, levels: int = 10, tape: int = 50):
        self.levels = int(levels)
        self.names = {int(k): v[0] for k, v in symbols.items()}
        # why format "f": the page splits "0.01" at its point; str(Decimal) may say "1E-7"
        self.ticks = {int(k): format(Decimal(str(v[1])), "f") for k, v in symbols.items()}
        self.phases = {k: Phase.CONTINUOUS.name for k in self.names}
        self.seq = 0
        self._account_of = account_of
        self._book = {k: ({}, {}) for k in self.names}   # id -> (bids, asks): price -> (qty, count)
        self._top = {k: self._ladder(k) for k in self.names}
        self._tape = deque(maxlen=int(tape))
        self._positions: dict[tuple[str, str], Position] = {}
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def load_depth(self, symbol_id: int, bids: np.ndarray, asks: np.ndarray) -> None:
        """Set a symbol's whole book from ``Engine.depth`` rows (every level); returns nothing."""
        for side, rows in ((0, bids), (1, asks)):
            book = self._book[symbol_id][side]
            book.clear()
            for r in rows:
                book[int(r["price"])] = (int(r["qty"]), int(r["count"]))
        self._top[symbol_id] = self._ladder(symbol_id)

    def set_phase(self, symbol_id: int, phase: int) -> None:
        """Record a symbol's phase (a Phase value); returns nothing."""
        self.phases[symbol_id] = _phase_name(phase)

    def add_batch(self, last_seq: int, l2: np.ndarray, fills: np.ndarray,
                  events: np.ndarray) -> None:
        """Queue one batch's rows for the next ``flush`` (copies them: the engine's output
        buffers are reused by its next batch). Returns nothing; cheap enough for a listener."""
        phase_rows = events[events["event"] == Event.PHASE] if len(events) else events
        self._pending.append((l2.copy(), fills.copy(), phase_rows.copy()))
        self.seq = max(self.seq, int(last_seq))

    def flush(self) -> dict | None:
        """Fold the queued rows into the board; return the update (``type`` "update": the
        ``books`` whose top levels changed, the new ``trades``, the changed ``positions`` as
        {(account, symbol): row}, ``phases``, ``seq``), or None if nothing changed."""
        pending, self._pending = self._pending, []
        dirty, trades, moved, phases = set(), [], set(), {}
        for l2, fills, events in pending:
            for r in l2.tolist():     # tolist: one conversion, then plain ints (fields in order)
                _, _, price, qty, sym, count, side = r
                book = self._book.get(sym)
                if book is None or side not in SIDES:
                    continue
                levels = book[side]
                if qty > 0:
                    levels[price] = (qty, count)
                else:
                    levels.pop(price, None)
                dirty.add(sym)
            for f in fills.tolist():
                seq, ts, tid, price, qty, _, _, sym, buyer, seller, aggr = f
                if sym not in self.names:
                    continue
                name = self.names[sym]
                trades.append(self._trade(tid, ts, name, price, qty, aggr))
                for trader, signed in ((buyer, qty), (seller, -qty)):
                    key = (self._name(trader), name)
                    self._positions.setdefault(key, Position()).fill(signed, price)
                    moved.add(key)
            for e in events:
                sym = int(e["symbol"])
                if sym in self.names:
                    self.set_phase(sym, int(e["phase"]))
                    phases[self.names[sym]] = self.phases[sym]
        books = {}
        for sym in dirty:
            top = self._ladder(sym)
            if top != self._top[sym]:
                self._top[sym] = top
                books[self.names[sym]] = top
        self._tape.extend(trades)
        if not (books or trades or moved or phases):
            return None
        return {"type": "update", "seq": self.seq, "books": books,
                "trades": trades[-self._tape.maxlen:] if self._tape.maxlen else [],
                "positions": {k: self._positions[k].row(*k) for k in sorted(moved)},
                "phases": phases}

    def snapshot(self) -> dict:
        """Return the whole board (``type`` "snapshot"; positions as in ``flush``)."""
        return {"type": "snapshot", "seq": self.seq, "levels": self.levels,
                "symbols": [{"name": self.names[k], "tick_size": self.ticks[k],
                             "phase": self.phases[k]} for k in sorted(self.names)],
                "books": {self.names[k]: self._top[k] for k in sorted(self.names)},
                "trades": list(self._tape),
                "positions": {k: p.row(*k) for k, p in sorted(self._positions.items())}}

    def ladder(self, symbol: str) -> dict:
        """Return the top levels of ``symbol`` as the page shows them: {"bids": [[price, qty,
        count], ...] best first, "asks": ...}. Raises KeyError for an unknown symbol."""
        return self._top[next(k for k, v in self.names.items() if v == symbol)]

    def _ladder(self, sym: int) -> dict:
        bids, asks = self._book[sym]
        return {"bids": [[p, *bids[p]] for p in heapq.nlargest(self.levels, bids)],
                "asks": [[p, *asks[p]] for p in heapq.nsmallest(self.levels, asks)]}

    def _name(self, trader: int) -> str:
        name = self._account_of(trader)
        return name if name is not None else f"trader {trader}"

    @staticmethod
    def _trade(tid, ts, symbol, price, qty, aggressor) -> dict:
        side = {int(Side.BUY): "buy", int(Side.SELL): "sell", AUCTION_SIDE: "auction"}
        return {"trade_id": tid, "ts": ts, "symbol": symbol, "price": price, "qty": qty,
                "aggressor": side.get(aggressor, "?")}


def _phase_name(phase: int) -> str:
    try:
        return Phase(phase).name
    except ValueError:
        return f"phase {phase}"


def for_scope(message: dict, scope: Scope) -> str:
    """Return ``message`` (a snapshot or update) as the JSON text a watcher of ``scope`` gets:
    the positions it may not see left out. Raises nothing."""
    out = dict(message)
    out["positions"] = [row for (acct, _), row in message["positions"].items() if scope.sees(acct)]
    if scope.note and message.get("type") == "snapshot":
        out["positions_note"] = scope.note
    return json.dumps(out, separators=(",", ":"))


class _Watcher:
    """One logged-on WebSocket: its scope, its bounded queue, the task that drains it."""

    def __init__(self, ws, scope: Scope, queue_max: int):
        self.ws, self.scope = ws, scope
        self.queue: asyncio.Queue = asyncio.Queue(queue_max)
        self.sender: asyncio.Task | None = None
        self.dropped = False


def _csp_hash(html: str, tag: str) -> str:
    """Return the CSP source ('sha256-...') of every inline ``<tag>`` block of ``html``."""
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
    return " ".join("'sha256-" + base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()
                    + "'" for b in blocks)


class WebServer:
    """The running ``--web`` server (build it with ``start``): ``url`` (the operator's link,
    token included), ``token``, ``port``; ``close()`` then ``await wait_closed()`` stops it."""

    def __init__(self, gw, *, token: str, levels: int, tape: int, interval_s: float,
                 queue_max: int, max_watchers: int, auth_timeout_s: float, accounts=None):
        self.gw = gw
        self.token = token
        self.interval_s = float(interval_s)
        self.queue_max = int(queue_max)
        self.max_watchers = int(max_watchers)
        self.auth_timeout_s = float(auth_timeout_s)
        self.accounts = accounts if accounts is not None else getattr(gw, "accounts", None)
        self.watchers: set[_Watcher] = set()
        self.dropped = 0              # watchers disconnected for reading too slowly
        self._closing: set[asyncio.Task] = set()
        self._closed = False
        by_trader = getattr(self.accounts, "by_trader", None)
        symbols = {info.id: (name, info.tick_size) for name, info in gw.symbols.items()}

        def account_of(trader: int):
            acct = by_trader(trader) if by_trader is not None else None
            return acct.name if acct is not None else None

        self.board = Board(symbols, account_of, levels=levels, tape=tape)
        html = PAGE.read_text()
        self._page = html.encode()
        self._csp = (f"default-src 'none'; script-src {_csp_hash(html, 'script')}; "
                     f"style-src {_csp_hash(html, 'style')}; connect-src 'self'; "
                     "img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                     "frame-ancestors 'none'")
        self._server = None
        self.tls = None               # an ssl.SSLContext: the page and its WebSocket over TLS
        self._ticker: asyncio.Task | None = None
        self.host, self.port = "", 0

    @property
    def url(self) -> str:
        """The page's address with the operator token in the fragment."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}/#token={self.token}"

    async def _open(self, host: str, port: int) -> None:
        # why under the lock with no await between the depth reads and add_market_listener:
        # no batch can land between the snapshot of the books and the first batch we are given
        async with self.gw.engine_lock:
            engine = self.gw.engine
            for sym_id, name in self.board.names.items():
                bids, asks = engine.depth(name, 1 << 62)
                self.board.load_depth(sym_id, bids, asks)
                self.board.set_phase(sym_id, int(engine.phase(name)))
            self.board.seq = int(engine.seq)
            session = getattr(self.gw, "session", None)
            if session is not None and engine.seq > 0:
                # why: after a restart the positions and the tape go back to the day's first
                # fill, not to this process's; read under the lock, so no batch runs meanwhile
                fills = await _read_journal(self.gw, "fills", (1, int(engine.seq)))
                self.board.add_batch(engine.seq, _EMPTY_L2, fills, _EMPTY_EVENTS)
                self.board.flush()
            self.gw.add_market_listener(self._on_batch)
        try:
            self._server = await serve(self._handle, host, port, process_request=self._http,
                                       max_size=MAX_INBOUND, max_queue=4, close_timeout=2,
                                       write_limit=1 << 16, compression=None, ssl=self.tls)
        except BaseException:
            self.gw.remove_market_listener(self._on_batch)
            raise
        sock = self._server.sockets[0].getsockname()
        self.host, self.port = sock[0], sock[1]
        self._ticker = asyncio.create_task(self._tick(), name="web-flush")

    def _on_batch(self, batch) -> None:
        if self._closed:
            return
        res = batch.result
        self.board.add_batch(batch.first_seq + len(batch.orders) - 1, res.l2, res.fills,
                             res.events)

    async def _tick(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.interval_s)
            try:
                update = self.board.flush()
            except Exception:   # why broad: a bug in the view must not stop it for good
                log.exception("web page: building an update failed; the batch is skipped")
                continue
            if update is None or not self.watchers:
                continue
            texts: dict[Scope, str] = {}
            for w in list(self.watchers):
                if w.scope not in texts:
                    texts[w.scope] = for_scope(update, w.scope)
                self._offer(w, texts[w.scope])

    def _offer(self, w: _Watcher, text: str) -> None:
        try:
            w.queue.put_nowait(text)
        except asyncio.QueueFull:
            self._drop(w)

    def _drop(self, w: _Watcher) -> None:
        if w.dropped:
            return
        w.dropped = True
        self.dropped += 1
        self.watchers.discard(w)
        if w.sender is not None:
            w.sender.cancel()
        task = asyncio.create_task(w.ws.close(1013, "too slow: updates dropped, reload the page"))
        self._closing.add(task)      # why keep it: the loop holds only a weak reference to a task
        task.add_done_callback(self._closing.discard)

    def _http(self, connection, request):
        """process_request: the page at / (and /index.html), the WebSocket at /ws, else 404."""
        path = urlsplit(request.path).path
        if path == "/ws":
            origin = request.headers.get("Origin")
            # why: a page of another site open in the same browser may open a WebSocket to
            # 127.0.0.1 (no same-origin rule for WebSockets); only this server's own page may
            if origin is not None and urlsplit(origin).netloc != request.headers.get("Host"):
                return connection.respond(403, "cross-origin WebSocket refused\n")
            return None
        if path not in ("/", "/index.html"):
            return connection.respond(404, "not found\n")
        headers = Headers([("Content-Type", "text/html; charset=utf-8"),
                           ("Content-Length", str(len(self._page))),
                           ("Cache-Control", "no-store"),
                           ("Content-Security-Policy", self._csp),
                           ("X-Content-Type-Options", "nosniff"),
                           ("Referrer-Policy", "no-referrer"),
                           ("Connection", "close")])
        return Response(200, "OK", headers, self._page)

    async def _handle(self, ws) -> None:
        # why a guard ticket and not a watcher slot before the login: connections that never
        # log on are bounded per address and evicted first, so they cannot fill the watcher
        # slots and lock out the operator's token
        ticket = self.gw.guard.admit("web", ws.remote_address, lambda: ws.transport.abort())
        if ticket is None:
            await ws.close(1013, "too many connections from this address")
            return
        try:
            await self._watch(ws, ticket)
        finally:
            ticket.release()

    async def _watch(self, ws, ticket) -> None:
        try:
            first = await asyncio.wait_for(ws.recv(), self.auth_timeout_s)
            ticket.presented()
            scope = await self._login(first, ws.remote_address)
            if len(self.watchers) >= self.max_watchers:
                await ws.close(1013, "too many watchers")
                return
        except (TimeoutError, asyncio.TimeoutError):
            await ws.close(1008, "no login")
            return
        except AuthError as e:
            await _send_quietly(ws, json.dumps({"type": "error", "text": str(e)}))
            await ws.close(1008, "login refused")
            return
        except ConnectionClosed:
            return
        w = _Watcher(ws, scope, self.queue_max)
        # why no await from here to add(): the snapshot and the later updates join seamlessly
        w.queue.put_nowait(for_scope(self.board.snapshot(), scope))
        self.watchers.add(w)
        w.sender = asyncio.create_task(self._send_loop(w))
        try:
            async for _ in ws:
                await ws.close(1008, "the page sends nothing after its login")
                break
        except ConnectionClosed:
            pass
        finally:
            self.watchers.discard(w)
            w.sender.cancel()

    async def _send_loop(self, w: _Watcher) -> None:
        try:
            while True:
                await w.ws.send(await w.queue.get())
        except ConnectionClosed:
            pass

    async def _login(self, message, peer=None) -> Scope:
        """Return the Scope of a login message; raises AuthError for anything else."""
        try:
            msg = json.loads(message) if isinstance(message, str) else None
        except (ValueError, RecursionError):   # why RecursionError: JSON nested thousands deep
            msg = None
        if not isinstance(msg, dict):
            raise AuthError("the first message must be a JSON login")
        token = msg.get("token")
        if isinstance(token, str):
            if hmac.compare_digest(token.encode(), self.token.encode()):
                return Scope(everyone=True)
            self.gw.guard.record_failure("web", peer, "<token>", "wrong token")
            raise AuthError("wrong token")
        name, password = msg.get("account"), msg.get("password")
        if self.accounts is None or not isinstance(name, str) or not isinstance(password, str):
            raise AuthError("log in with the token or an account and its password")
        # why the guard's pool: scrypt takes ~50 ms, which the event loop's other sessions must
        # not wait, and its failure throttle keeps guessers from queueing hashes
        acct = await self.gw.guard.authenticate(self.accounts, "web", peer, name, password,
                                                "marketdata")
        if acct.can("dropcopy"):
            return Scope(accounts=frozenset(a.name for a in self.accounts if a.firm == acct.firm))
        if not acct.can("trade"):
            return Scope(accounts=frozenset({acct.name}), note=MARKETDATA_ONLY)
        return Scope(accounts=frozenset({acct.name}))

    def close(self, reason: str | None = None) -> None:
        """Stop listening, stop the updates and disconnect every watcher (``reason`` is
        accepted as by the other ports; the page shows the connection lost); returns nothing."""
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
        if self._server is not None:
            self._server.close()
        self.gw.remove_market_listener(self._on_batch)

    async def wait_closed(self) -> None:
        """Return once the server and every watcher connection are closed."""
        if self._server is not None:
            await self._server.wait_closed()


async def _read_journal(gw, table: str, seq: tuple[int, int]) -> np.ndarray:
    """Return the journaled rows of ``table`` in ``seq`` (the store's catalog is SQLite and
    serves only the thread that opened it: the core's worker thread)."""
    read = getattr(gw, "read_journal", None)
    if read is not None:
        return await read(table, seq=seq)
    return await asyncio.get_running_loop().run_in_executor(
        gw._pool, lambda: gw.session.read(table, seq=seq))


async def _send_quietly(ws, text: str) -> None:
    try:
        await ws.send(text)
    except ConnectionClosed:
        pass


def _stored_token(state_dir: str | None) -> str:
    """Return the operator token kept in ``state_dir`` (made on first use, mode 0600), so a
    page left open reconnects after a restart; a random one if there is no state directory.
    Raises UsageError if the stored file is not a token, OSError if it cannot be written."""
    if state_dir is None:
        return secrets.token_urlsafe(18)
    path = os.path.join(state_dir, TOKEN_FILE)
    os.makedirs(state_dir, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        with open(path, "rb") as f:
            text = f.read(256).decode("ascii", "replace").strip()
        if not _TOKEN_RE.fullmatch(text):
            raise UsageError(f"{path}: not a web token (delete it to make a new one)") from None
        return text
    token = secrets.token_urlsafe(18)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def _check_host(host: str) -> str:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise UsageError(f"--web host must be an IP address or localhost; got {host!r}") \
                from None
    return host


async def start(gw, host: str = "127.0.0.1", port: int = 0, **options) -> WebServer:
    """Start the web page server for gateway ``gw`` on ``host:port`` (port 0: any free port).

    Options: ``token`` (the operator's read-only token; default a random one), ``accounts``
    (default ``gw.accounts``: who may log on with a password), ``levels`` (price levels per
    side, default 10), ``tape`` (trades kept, default 50), ``interval_s`` (update period,
    default 0.1), ``queue_max`` (unsent messages before a watcher is dropped, default 64),
    ``max_watchers`` (default 32), ``auth_timeout_s`` (default 10), ``ssl`` (an
    ``ssl.SSLContext``: https and wss only).
    Returns the running WebServer (``.url`` is the operator's link). Raises UsageError for an
    unknown option or a bad value, OSError if the port cannot be bound.
    """
    known = {"token", "accounts", "ssl", "levels", "tape", "interval_s", "queue_max", "max_watchers",
             "auth_timeout_s"}
    unknown = set(options) - known
    if unknown:
        raise UsageError(f"unknown web option(s) {sorted(unknown)}; known: {sorted(known)}")
    token = options.get("token")
    if token is None:
        token = _stored_token(getattr(gw, "state_dir", None))
    if not isinstance(token, str) or not _TOKEN_RE.fullmatch(token):
        raise UsageError("the web token must be 16-128 letters, digits, _ or -")
    cfg = {"levels": 10, "tape": 50, "interval_s": 0.1, "queue_max": 64, "max_watchers": 32,
           "auth_timeout_s": 10.0}
    for key, default in cfg.items():
        value = options.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or (isinstance(default, int) and not isinstance(value, int)):
            raise UsageError(f"web option {key} must be a positive {type(default).__name__}; "
                             f"got {value!r}")
        cfg[key] = value
    server = WebServer(gw, token=token, accounts=options.get("accounts"), **cfg)
    server.tls = options.get("ssl")
    await server._open(_check_host(host), port)
    return server
