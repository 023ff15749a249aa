"""The gateway core: one engine and one journal session shared by every network session.

Protocol sessions hand ``Request`` objects to ``Gateway.submit``; the core stamps each with the
gateway clock on arrival, gathers them into batches (every ``batch_ns`` or ``batch_max``
requests, whichever comes first), and runs each batch through the journal's ``process`` on one
worker thread. The journal (``journal.JournalSession``; a ``store.Session`` under ``exsim
serve``) comes from the code that composes the server, as an opener ``Gateway.open`` calls on
that worker thread: nothing in ``exchange/`` opens, creates or imports a store. Execution
reports (``reports.Report``) are derived from the batch's rows, stored in the sequenced report
streams (``state_db``), and only then handed to the subscribers, so a client never hears of an
order before the engine's journal holds it.

Invariants:
- Order of events per batch, all in one call on the worker thread: requests, new orders and
  the core's own rejects committed to the gateway state ->
  engine + WAL (durable per policy) -> reports committed -> reports dispatched -> market
  listeners called. A crash between any two steps is repaired at ``open``: the journaled
  seqs without reports get them derived from the stored rows (the same function, the same
  bytes); requests the engine never journaled are dropped: a FIX session had not counted them
  as received (``submit``'s future waits for the engine's journal), so its client sends them
  again; a binary or web request is answered "not processed" (its client never resends).
- Engine order ids are the gateway's, 1, 2, 3 ... never reused (not even after a restart); a
  client names its orders by its own client order id, unique per account.
- Timestamps never go back: ``now_ns`` is the wall clock at start advanced by the monotonic
  clock, and never below the last stamp of an earlier run.
- Everything an account may do is checked before its request reaches a batch: an account only
  ever names its own orders (client ids are looked up per account) and the engine's ownership
  check (trader ids) backs that up.
- The engine is read (depth, orders, phase) only inside a market listener or under
  ``engine_lock``; the batch in flight holds the lock.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import gc
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from exsim.exchange.errors import CorruptionError, StoreError, UsageError
from exsim.exchange.gateway.accounts import Account, Accounts
from exsim.exchange.gateway.journal import JournalOpener, JournalSession
from exsim.exchange.gateway.guard import Guard, Limits
from exsim.exchange.gateway.reports import (Origin, OrderState, Report, derive, origin_reject,
                                      renumbered_json)
from exsim.exchange.gateway.state_db import DB_NAME, StateDB, StreamReader
from exsim.exchange.schema import Flag, Kind, ORDER_DTYPE, OrderType, Side, Tif

__all__ = ["Gateway", "Request", "SymbolInfo", "MarketBatch", "RateLimiter", "Budget", "MAX_CLIENT_ID",
           "UNKNOWN_SYMBOL_ID"]

log = logging.getLogger("exsim.gateway")

MAX_CLIENT_ID = 32            # characters of a client order id
UNKNOWN_SYMBOL_ID = 0xFFFFFFFF  # sent for a symbol name the gateway does not list: the engine
                                # rejects it (UNKNOWN_SYMBOL) and the journal records the reject
MAX_QUEUE = 1_000_000         # requests waiting for a batch before submit refuses more
_U64, _I64 = (1 << 64) - 1, (1 << 63) - 1


@dataclass(frozen=True)
class SymbolInfo:
    """A symbol the gateway trades: engine id, name, and the currency value of one tick."""

    id: int
    name: str
    tick_size: Decimal


@dataclass(frozen=True)
class Request:
    """One inbound order message, as a protocol session decoded it (docs/gateway.md)."""

    kind: str                        # "new" | "cancel" | "replace"
    account: Account
    stream: str                      # the report stream its reports go to
    client_order_id: str
    symbol: str = ""
    orig_client_order_id: str = ""   # cancel / replace: the order it names
    side: int = Side.BUY
    order_type: int = OrderType.LIMIT
    tif: int = Tif.GTC
    price: int = 0
    qty: int = 0                     # new: quantity; replace: the new TOTAL quantity
    stop_price: int = 0
    display_qty: int = 0
    min_qty: int = 0
    expire_ts: int = 0
    post_only: bool = False


@dataclass(frozen=True)
class MarketBatch:
    """What a market listener sees of one batch (read ``engine`` only inside the callback)."""

    first_seq: int
    orders: np.ndarray
    result: object
    engine: object


class RateLimiter:
    """A token bucket: ``per_sec`` messages a second, bursts of up to ``per_sec``."""

    def __init__(self, per_sec: int):
        self.rate = float(per_sec)
        self.tokens = float(per_sec)
        self.last = None

    def allow(self, now_ns: int) -> bool:
        """Return True and take a token if one is left at ``now_ns``; False otherwise."""
        if self.last is not None:
            self.tokens = min(self.rate, self.tokens + (now_ns - self.last) * 1e-9 * self.rate)
        self.last = now_ns
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Budget:
    """A token bucket shared by the tasks of one port: ``per_sec`` units a second, bursts of
    up to ``per_sec`` (or the largest single take)."""

    def __init__(self, per_sec: float, tokens: float = 0.0):
        self.rate = float(per_sec)
        self.tokens, self.at = float(tokens), 0.0

    async def take(self, n: int) -> None:
        """Wait until the bucket holds ``n`` units, then take them."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            self.tokens = min(max(self.rate, float(n)), self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens >= n:
                self.tokens -= n
                return
            await asyncio.sleep((n - self.tokens) / self.rate)


def _fits(v, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


class Gateway:
    """The shared core (module docstring). Build with ``await Gateway.open(...)``."""

    def __init__(self):
        raise UsageError("build a Gateway with `await Gateway.open(open_journal, accounts)`")

    @classmethod
    async def open(cls, open_journal: JournalOpener, accounts: Accounts, *,
                   durability: str = "fsync", batch_ns: int = 1_000_000,
                   batch_max: int = 1024, limits: Limits | None = None) -> "Gateway":
        """Open the journal with ``open_journal()`` and return the running gateway on it.

        ``open_journal`` is called once, on the gateway's worker thread (journal.py says why),
        and returns the ``JournalSession`` the gateway writes to and closes at ``close``;
        ``exsim.replay.serving.open_gateway`` composes one from a data directory and a scenario.
        The gateway state lives in the journal's ``data_dir/gateway/`` under ``durability``
        (give the journal's own policy). Journaled batches whose reports are not stored yet get
        them derived from the journal's rows. ``limits`` (``guard.Limits``) bounds what
        clients may cost before and at logon, for every port (``gw.guard``).
        Raises UsageError for bad options, an ``open_journal`` that is not callable or returns
        no JournalSession; what ``open_journal`` raises; StoreError / CorruptionError if the
        gateway state is damaged or disagrees with the journal (it holds reports of seqs the
        journal lacks).
        """
        if durability not in ("fsync", "interval", "none"):
            raise UsageError(f"durability must be fsync, interval or none; got {durability!r}")
        if not _fits(batch_ns, 1, 10**10) or not _fits(batch_max, 1, 1 << 20):
            raise UsageError(f"batch_ns must be in [1, 1e10] and batch_max in [1, 2^20]; "
                             f"got {batch_ns!r}, {batch_max!r}")
        if not callable(open_journal):
            raise UsageError(f"Gateway.open takes a callable that opens the journal; got "
                             f"{type(open_journal).__name__}")
        self = object.__new__(cls)
        self.accounts = accounts
        self.batch_ns, self.batch_max = batch_ns, batch_max
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="exsim-gateway")
        self._replay_pool, self._reader = None, None   # opened by the first replay_stream
        loop = self._loop = asyncio.get_running_loop()
        try:
            self.session = await loop.run_in_executor(self._pool, _call_opener, open_journal)
        except BaseException:
            self._pool.shutdown(wait=False)
            raise
        self.data_dir = os.fspath(self.session.data_dir)
        self.engine = self.session.engine
        self.state_dir = os.path.join(self.data_dir, "gateway")
        try:
            self._db = StateDB(self.data_dir, durability)
            await loop.run_in_executor(self._pool, self._recover)
        except BaseException as e:
            # why on the pool: the session's SQLite objects belong to the thread that opened it
            # (closing it here raised a thread error that hid the real one)
            def close_all():
                self.session.close()
                if getattr(self, "_db", None) is not None:
                    self._db.close()
            try:
                await loop.run_in_executor(self._pool, close_all)
            except Exception:   # why: the error that stopped the open is the one to report
                pass
            finally:
                self._pool.shutdown(wait=False)
            if isinstance(e, sqlite3.DatabaseError):
                path = os.path.join(self.state_dir, DB_NAME)
                raise CorruptionError(f"{path}: the gateway state cannot be read: {e}",
                                      path, -1) from None
            raise
        self.guard = Guard(limits, self.state_dir)
        self.symbols = {name: SymbolInfo(sid, name, Decimal(str(self.engine._tick_sizes[sid])))
                        for name, sid in self.engine.symbols.items()}
        self._names = {s.id: s.name for s in self.symbols.values()}
        self.engine_lock = asyncio.Lock()
        self._queue: asyncio.Queue = asyncio.Queue()
        self._listeners: dict[str, list] = {}
        self._market: list = []
        self._closing = False
        self._pending_core: list = []
        # submit() numbers requests in queue order; a batch journals a prefix of them
        self._submitted = self._done_count = 0
        self._waiters: collections.deque = collections.deque()
        self._clock_sent_for = 0   # the deadline the last clock message was sent for
        self._gather: asyncio.Future | None = None   # the batch loop waits on it for requests
        self._wall0, self._mono0 = time.time_ns(), time.monotonic_ns()
        self._task = loop.create_task(self._run(), name="exsim-gateway-core")
        self.failed: BaseException | None = None
        # why: what is alive now (the engine, the compiled kernels, the recovered orders) lives
        # as long as the process; left to the collector, each full collection scanned its
        # ~150k objects and paused the event loop for tens of ms (the p99 outliers)
        gc.freeze()
        return self

    def _recover(self) -> None:
        """Load the gateway state and derive the reports of journaled seqs that have none."""
        db, engine_seq = self._db, self.engine.seq
        self._states, self._client_ids = db.load_orders()
        self._next_id = db.next_order_id()
        self._last_ts = db.last_ts()
        self._heads = db.stream_heads()
        done = db.reported_through()
        if done > engine_seq:
            raise StoreError(f"{db.path}: holds reports up to seq {done} but the journal ends at "
                             f"{engine_seq}: acknowledged batches are missing from the store")
        if done < engine_seq:
            origins = db.origins(done + 1, engine_seq)
            lo, hi = done + 1, engine_seq
            # the journal's order rows hold ORDER_DTYPE's fields by name (its stored form adds
            # seq), which is all ``derive`` reads of them
            orders = self.session.read("orders", seq=(lo, hi))
            fills = self.session.read("fills", seq=(lo, hi))
            events = self.session.read("events", seq=(lo, hi))
            self._commit_reports(lo, orders, fills, events, origins)
        dropped = db.origins(engine_seq + 1, 1 << 62)
        forgotten = {}
        for oid in db.forget_after(engine_seq):
            st = self._states.pop(oid, None)
            if st is not None:
                forgotten[oid] = st
                self._client_ids.pop((st.account, st.client_order_id), None)
        # why not FIX: a FIX session counts a request as received only once the engine has
        # journaled it (_run_batch), so a FIX client is asked for these again (ResendRequest)
        # and its resent copy is the order's one fate; a reject as well would be a second.
        # A binary or web client never resends: it must hear that they were not processed
        answer = [o for _, o in sorted(dropped.items()) if not o.stream.startswith("fix:")]
        if answer:
            ts = max(self._last_ts, time.time_ns())
            reports = self._number([(origin_reject(o, 0, ts, 0, NOT_PROCESSED,
                                                   forgotten.get(o.order_id)), o.firm)
                                    for o in answer])
            db.end_batch(reports, [], [], 0, ts)
            self._last_ts = ts
        self._dispatched = dict(self._heads)
        # why: a restart keeps in memory only the orders still alive (_release)
        for oid in [o for o, st in self._states.items() if st.status in FINISHED]:
            del self._states[oid]

    # -- the clock and the inbound side -----------------------------------------------------------
    def now_ns(self) -> int:
        """Return the gateway clock: epoch ns, never below an earlier stamp (this run or before)."""
        t = self._wall0 + (time.monotonic_ns() - self._mono0)
        if t <= self._last_ts:
            t = self._last_ts
        self._last_ts = t
        return t

    def submit(self, request: Request) -> asyncio.Future:
        """Queue ``request`` for the next batch, stamped now. Never raises for its content:
        anything refused comes back as a report on the request's stream.

        Returns a future that becomes done (result None) once the request is journaled: the
        engine's journal holds its batch (step 2 of docs/gateway.md "The life of an order"), or
        its core-level refusal is committed, so a restart answers it whatever happens next (a
        FIX session counts it as received only then). It stays pending if the gateway fails
        first and is cancelled by ``close``. Raises UsageError if ``request`` is not a Request or the gateway is closing
        or failed."""
        if not isinstance(request, Request):
            raise UsageError(f"submit() takes a Request; got {type(request).__name__}")
        if self._closing or self.failed is not None:
            raise UsageError("the gateway is closed" if self.failed is None
                             else f"the gateway failed: {self.failed}")
        if not isinstance(request.account, Account) or not isinstance(request.stream, str):
            raise UsageError("a Request names its Account and its report stream (a str)")
        problem = _malformed(request)
        if problem is not None or self._queue.qsize() >= MAX_QUEUE:
            self._core_reject(self.now_ns(), _printable(request),
                              problem or "gateway overloaded: request queue full")
            # why a (ts, None) item: it wakes the batch loop, which sends the reject
            self._queue.put_nowait((self._last_ts, None))
        else:
            self._queue.put_nowait((self.now_ns(), request))
        self._submitted += 1
        done = asyncio.get_running_loop().create_future()
        self._waiters.append((self._submitted, done))
        if self._gather is not None and self._queue.qsize() >= self.batch_max - 1:
            _wake(self._gather)
        return done

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                item = await self._next_item()
                if item is None:
                    return
                batch = [item]
                stop = False
                # why one timer per batch (not a timed get per request): the window is waited
                # out once, or cut short by submit() when batch_max requests are queued
                if self._queue.qsize() < self.batch_max - 1:
                    self._gather = loop.create_future()
                    timer = loop.call_later(self.batch_ns * 1e-9, _wake, self._gather)
                    try:
                        await self._gather
                    finally:
                        timer.cancel()
                        self._gather = None
                while len(batch) < self.batch_max and not self._queue.empty():
                    nxt = self._queue.get_nowait()
                    if nxt is None:
                        stop = True
                        break
                    batch.append(nxt)
                await self._process(batch)
                if stop:
                    return
        except BaseException as e:   # why broad: a failed store must stop the gateway loudly
            if not isinstance(e, asyncio.CancelledError):
                self.failed = e
            raise

    def _journaled(self, n: int) -> None:
        """``n`` more submitted requests (in queue order) are journaled: their futures are done."""
        self._done_count += n
        waiters = self._waiters
        while waiters and waiters[0][0] <= self._done_count:
            done = waiters.popleft()[1]
            if not done.done():
                done.set_result(None)

    async def _next_item(self):
        """Return the next queued request, or a clock item ``(ts, CLOCK)`` once the engine's
        next deadline (an expiry, a re-opening auction's end) has come with nothing queued."""
        while True:
            if not self._queue.empty():
                return self._queue.get_nowait()
            due = self.engine.next_deadline()   # no batch is in flight here
            if not due or due == self._clock_sent_for:
                # why the second test: a deadline a clock message did not clear must not make
                # the core journal clock messages in a loop; the next request carries it on
                return await self._queue.get()
            wait = (due - self._wall0 - (time.monotonic_ns() - self._mono0)) * 1e-9
            if wait <= 0:
                self._clock_sent_for = due
                return self.now_ns(), CLOCK
            try:
                return await asyncio.wait_for(self._queue.get(), min(wait, 3600.0))
            except asyncio.TimeoutError:
                continue

    def _row(self, ts: int, req: Request, seq: int, new_states: list):
        """Return (order row or None, Origin or None) for one request; a core-level refusal
        makes a report at once and returns (None, None)."""
        acct = req.account
        sym = self.symbols.get(req.symbol)
        sid = sym.id if sym is not None else UNKNOWN_SYMBOL_ID
        row = np.zeros(1, ORDER_DTYPE)[0]
        row["ts"], row["trader"] = ts, acct.trader
        if not isinstance(req.client_order_id, str) or not 0 < len(req.client_order_id) <= MAX_CLIENT_ID:
            self._core_reject(ts, req, f"client_order_id must be 1-{MAX_CLIENT_ID} characters")
            return None, None
        ints = (req.price, req.qty, req.stop_price, req.display_qty, req.min_qty, req.expire_ts)
        if not all(_fits(v, -_I64 - 1, _I64) for v in ints) or not all(
                _fits(v, 0, 255) for v in (req.side, req.order_type, req.tif)):
            self._core_reject(ts, req, "a numeric field is out of range")
            return None, None
        if req.kind == "new":
            if (acct.name, req.client_order_id) in self._client_ids:
                self._core_reject(ts, req, "duplicate client_order_id")
                return None, None
            oid = self._next_id
            self._next_id += 1
            row["kind"], row["order_id"], row["symbol"] = Kind.NEW, oid, sid
            row["side"], row["order_type"], row["tif"] = req.side, req.order_type, req.tif
            row["flags"] = Flag.POST_ONLY if req.post_only else 0
            row["price"], row["qty"], row["stop_price"] = req.price, req.qty, req.stop_price
            row["display_qty"], row["min_qty"], row["expire_ts"] = (req.display_qty, req.min_qty,
                                                                   req.expire_ts)
            st = OrderState(oid, acct.name, acct.firm, req.stream, req.client_order_id,
                            req.symbol, req.side, req.order_type, req.tif, req.price,
                            req.stop_price, req.qty)
            self._states[oid] = st
            self._client_ids[(acct.name, req.client_order_id)] = oid
            new_states.append(st)
            return row, Origin("new", oid, req.stream, req.client_order_id, account=acct.name,
                               firm=acct.firm, symbol=req.symbol)
        if req.kind in ("cancel", "replace"):
            oid = self._client_ids.get((acct.name, req.orig_client_order_id), 0)
            st = self._states.get(oid) if oid else None
            if st is None and oid:
                # a finished order: its state was released from memory (_release); the batch
                # needs it to answer, and _release lets it go again after
                st = self._db.load_order(oid)
                if st is not None:
                    self._states[oid] = st
            if st is not None and st.client_order_id != req.orig_client_order_id:
                # why: an id the order had before a replace no longer names it (FIX: the
                # OrigClOrdID is the order's latest ClOrdID); it stays taken for duplicates
                oid, st = 0, None
            if req.kind == "replace" and (acct.name, req.client_order_id) in self._client_ids:
                self._core_reject(ts, req, "duplicate client_order_id")
                return None, None
            if st is not None:
                sid = self.symbols[st.symbol].id if st.symbol in self.symbols else sid
            elif not req.symbol and self.symbols:
                # why: a request naming no symbol (an OUCH cancel) and no known order must be
                # answered UNKNOWN_ID, not UNKNOWN_SYMBOL: any listed symbol has no order id 0
                sid = next(iter(self.symbols.values())).id
            row["order_id"], row["symbol"] = oid, sid
            if req.kind == "cancel":
                row["kind"] = Kind.CANCEL
            else:
                row["kind"], row["price"] = Kind.MODIFY, req.price
                # why: a client asks for a new total quantity (FIX OrderQty); the engine takes
                # the new open quantity
                # (a total at or below the filled quantity asks for nothing open: 0, which the
                # engine rejects as BAD_QTY, where the difference could leave int64)
                row["qty"] = max(req.qty - (st.cum_qty if st is not None else 0), 0)
                row["stop_price"] = req.stop_price
            return row, Origin(req.kind, oid, req.stream, req.client_order_id,
                               req.orig_client_order_id, req.qty, req.price, req.stop_price,
                               account=acct.name, firm=acct.firm, symbol=req.symbol)
        self._core_reject(ts, req, f"unknown request kind {req.kind!r}")
        return None, None

    def _core_reject(self, ts: int, req: Request, text: str) -> None:
        """Store and dispatch a report for a request the core refused before the engine."""
        exec_kind = {"cancel": "cancel_rejected", "replace": "replace_rejected"}.get(req.kind,
                                                                                   "rejected")
        cid = req.client_order_id if isinstance(req.client_order_id, str) else ""
        r = Report(stream=req.stream, rseq=0, seq=0, ts=ts, exec=exec_kind, status="rejected",
                   order_id=0, client_order_id=cid[:64],
                   orig_client_order_id=str(req.orig_client_order_id)[:64],
                   account=req.account.name, symbol=str(req.symbol)[:64],
                   side=req.side if _fits(req.side, 0, 255) else 0,
                   order_type=req.order_type if _fits(req.order_type, 0, 255) else 0,
                   tif=req.tif if _fits(req.tif, 0, 255) else 0,
                   price=req.price if _fits(req.price, -_I64 - 1, _I64) else 0,
                   stop_price=req.stop_price if _fits(req.stop_price, -_I64 - 1, _I64) else 0,
                   qty=req.qty if _fits(req.qty, -_I64 - 1, _I64) else 0, text=text)
        self._pending_core.append((r, req.account.firm))

    async def _process(self, batch: list) -> None:
        """Run one batch, in parts cut where a request must see the reports of an earlier one
        (``_part_length``)."""
        while batch:
            n = self._part_length(batch)
            await self._process_part(batch[:n])
            batch = batch[n:]

    def _part_length(self, batch: list) -> int:
        """Return how many requests from the start of ``batch`` can run as one engine batch.

        Why cut: a replace asks for a new total quantity and the engine takes the new open
        quantity, which is total - filled at the moment the engine runs it; a message earlier in
        the same batch on its symbol may fill the order, so the replace must see those reports.
        And a client id a replace gives is known only once its reports are derived, so a
        cancel/replace naming it, or a request giving the same id again (a duplicate), must
        wait for them.
        """
        seen = set()   # symbols this part touches
        named = {}     # (account, client id) this part gives -> (symbol, given by a replace)
        for i, (_, req) in enumerate(batch):
            if req is None or req is CLOCK:
                continue
            sym = req.symbol
            if req.kind in ("cancel", "replace"):
                key = (req.account.name, req.orig_client_order_id)
                st = self._states.get(self._client_ids.get(key, 0))
                sym, renamed = ((st.symbol, False) if st is not None
                                else named.get(key, (req.symbol, False)))
                if i and (renamed or (req.kind == "replace" and sym in seen)):
                    return i
            if req.kind in ("new", "replace"):
                mine = (req.account.name, req.client_order_id)
                if i and named.get(mine, (None, False))[1]:
                    return i   # its id is being given by a replace here: refused after that
                named[mine] = (sym, req.kind == "replace")
            seen.add(sym)
        return len(batch)

    async def _process_part(self, batch: list) -> None:
        loop = asyncio.get_running_loop()
        first_seq = self.engine.seq + 1
        submitted = sum(1 for _, req in batch if req is not CLOCK)
        rows, origins, new_states = [], {}, []
        for ts, req in batch:
            if req is None:
                continue
            if req is CLOCK:
                rows.append(_clock_row(ts, next(iter(self.symbols.values())).id))
                continue
            row, origin = self._row(ts, req, first_seq + len(rows), new_states)
            if row is not None:
                origins[first_seq + len(rows)] = origin
                rows.append(row)
        core_reports, self._pending_core = self._pending_core, []
        core = self._number(core_reports) if core_reports else []
        if not rows:
            if core:
                # why last_ts: a core reject's stamp was sent to a client, so a later run must
                # not stamp below it (no engine batch may follow to store the clock)
                await loop.run_in_executor(self._pool, self._db.end_batch, core, [], [], 0,
                                           self._last_ts)
                self._dispatch(core)
            self._journaled(submitted)
            return
        orders = np.array(rows, dtype=ORDER_DTYPE)
        async with self.engine_lock:
            # why one hop: each hand-over to the worker thread and back costs a thread wake-up
            # (and on a loaded machine a wait for a CPU), so the whole batch runs in one
            result, reports = await loop.run_in_executor(
                self._pool, self._run_batch, first_seq, orders, origins, new_states, core,
                self._next_id, self._last_ts, submitted)
            self._dispatch(core)
            self._dispatch(reports)
            self._release(reports)
            batch_view = MarketBatch(first_seq, orders, result, self.engine)
            for cb in list(self._market):
                self._call(cb, batch_view, self._market)

    def _release(self, reports: list) -> None:
        """Forget the in-memory state of the orders these reports finished (filled, canceled,
        expired, rejected): the stored row keeps it for a cancel that names one later, and only
        the client order id stays in memory (to refuse a duplicate)."""
        for r in reports:
            if r.status in FINISHED:
                st = self._states.get(r.order_id)
                if st is not None and st.status in FINISHED:
                    del self._states[r.order_id]

    def _run_batch(self, first_seq, orders, origins, new_states, core, next_id, last_ts,
                   submitted):
        """On the worker thread: commit the batch's requests (and the core's reports of this
        batch), tell the loop its ``submitted`` requests are journaled, run it through the
        journal session (durable per policy), derive and commit its reports; return (engine
        Result, reports)."""
        self._db.begin_batch(origins, new_states, next_id, last_ts, core)
        result = self.session.process(orders)
        # why after the engine's journal, not after the commit above: a FIX session counts a
        # request as received (persists its MsgSeqNum) once this fires. Before the WAL holds
        # the batch a crash leaves the request unknown (_recover), so the session must not
        # have counted it: it asks for it again and the resent copy is its only fate
        self._loop.call_soon_threadsafe(self._journaled, submitted)
        return result, self._commit_reports(first_seq, orders, result.fills, result.events,
                                            origins)

    def _number(self, pairs: list) -> list[Report]:
        """Return the reports of (report, firm) pairs numbered on their streams, each also on
        its firm's drop-copy stream."""
        out = []
        for r, firm in pairs:
            for stream in (r.stream, f"dropcopy:{firm}"):
                rseq = self._heads.get(stream, 0) + 1
                self._heads[stream] = rseq
                out.append(_renumber(r, stream, rseq))
        return out

    def _commit_reports(self, first_seq, orders, fills, events, origins) -> list[Report]:
        """Derive, number and store the reports of one journaled batch; return them."""
        before = {}
        for ev in events:
            st = self._states.get(int(ev["order_id"]))
            if st is not None and st.order_id not in before:
                before[st.order_id] = st.client_order_id
        raw = derive(first_seq, orders, fills, events, origins, self._states)
        pairs = []
        for r in raw:
            st = self._states.get(r.order_id)
            firm = st.firm if st is not None else origins[r.seq].firm
            pairs.append((r, firm))
            origin = origins.get(r.seq)
            if origin is not None and origin.order_id == r.order_id and origin.stream != r.stream \
                    and r.exec in ("canceled", "replaced", "cancel_rejected", "replace_rejected"):
                # why: a cancel/replace from another session of the account is answered there too
                pairs.append((_renumber(r, origin.stream, 0), None))
        numbered, bodies = [], []
        for r, firm in pairs:
            # why one JSON per report: its copies differ only in stream and rseq
            body = r.to_json()
            for stream in ((r.stream,) if firm is None else (r.stream, f"dropcopy:{firm}")):
                rseq = self._heads.get(stream, 0) + 1
                self._heads[stream] = rseq
                numbered.append(_renumber(r, stream, rseq))
                bodies.append(renumbered_json(body, r, stream, rseq))
        changed = [self._states[o] for o in before]
        client_ids = [(st.account, st.client_order_id, st.order_id) for st in changed
                      if st.client_order_id != before[st.order_id]]
        for st in changed:
            if st.client_order_id != before[st.order_id]:
                self._client_ids[(st.account, st.client_order_id)] = st.order_id
        last = first_seq + len(orders) - 1
        self._db.end_batch(numbered, changed, client_ids, last, bodies=bodies)
        return numbered

    # -- the outbound side --------------------------------------------------------------------------
    def _dispatch(self, reports: list[Report]) -> None:
        by_stream: dict[str, list] = {}
        for r in reports:
            by_stream.setdefault(r.stream, []).append(r)
        for stream, rs in by_stream.items():
            self._dispatched[stream] = rs[-1].rseq
            for cb in list(self._listeners.get(stream, ())):
                self._call(cb, rs, self._listeners.get(stream, []))

    @staticmethod
    def _call(cb, arg, owner: list) -> None:
        """Call a listener; one that raises is logged and removed, never allowed to stop the
        core (one broken session must not disturb the others)."""
        try:
            cb(arg)
        except Exception:   # why broad: any bug in a protocol session is that session's
            log.exception("gateway listener %r failed and was removed", cb)
            if cb in owner:
                owner.remove(cb)

    def subscribe(self, stream: str, callback) -> None:
        """Call ``callback(list of Report)`` for every report of ``stream`` dispatched from now on."""
        self._listeners.setdefault(stream, []).append(callback)

    def unsubscribe(self, stream: str, callback) -> None:
        """Stop calling ``callback`` for ``stream`` (no-op if it was not subscribed)."""
        cbs = self._listeners.get(stream, [])
        if callback in cbs:
            cbs.remove(callback)

    def read_stream(self, stream: str, after_rseq: int, limit: int = 1 << 30) -> list[Report]:
        """Return the dispatched reports of ``stream`` with rseq > ``after_rseq`` (at most
        ``limit``), in order. Raises CorruptionError if a stored report does not parse."""
        return self._db.read_stream(stream, after_rseq, self._dispatched.get(stream, 0), limit)

    async def replay_stream(self, stream: str, after_rseq: int, limit: int) -> list[Report]:
        """Return what ``read_stream`` returns, read on the replay thread with its own
        read-only connection. Why: a replay's SQLite reads and JSON parsing (~50 us a report)
        on the event loop stalled every session for 0.2-0.5 s while a dozen logins replayed
        (issue 36); on a thread the loop gets the GIL back every switch interval (5 ms).
        Raises CorruptionError if a stored report does not parse."""
        upto = self._dispatched.get(stream, 0)
        if self._replay_pool is None:
            self._replay_pool = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="exsim-replay")
        return await asyncio.get_running_loop().run_in_executor(
            self._replay_pool, self._replay_read, stream, after_rseq, upto, limit)

    def _replay_read(self, stream: str, after: int, upto: int, limit: int) -> list[Report]:
        if self._reader is None:
            self._reader = StreamReader(self._db.path)
        return self._reader.read_stream(stream, after, upto, limit)

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def stream_head(self, stream: str) -> int:
        """Return the last dispatched rseq of ``stream`` (0: none yet)."""
        return self._dispatched.get(stream, 0)

    def add_market_listener(self, callback) -> None:
        """Call ``callback(MarketBatch)`` after every batch (module docstring)."""
        self._market.append(callback)

    def remove_market_listener(self, callback) -> None:
        """Stop calling ``callback`` (no-op if it was not added)."""
        if callback in self._market:
            self._market.remove(callback)

    async def read_journal(self, table: str, seq: tuple[int, int] | None = None) -> np.ndarray:
        """Return the journaled rows of ``table`` ("orders", "fills", "l2", "events") with seq
        in ``seq`` (inclusive; None: all), read on the core's worker thread (the store's catalog
        serves only the thread that opened it). Raises as the journal's ``read``."""
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, lambda: self.session.read(table, seq=seq))

    def knows_client_order_id(self, account: str, client_order_id: str) -> bool:
        """Return True if ``account`` has an order that was given ``client_order_id`` (a new
        order's id, or the id a replace gave it), journaled or in the batch being journaled."""
        return (account, client_order_id) in self._client_ids

    def order_state(self, order_id: int) -> OrderState | None:
        """Return the gateway's state of an engine order id (a finished order's from the
        store), or None."""
        st = self._states.get(int(order_id))
        return st if st is not None else self._db.load_order(int(order_id))

    async def close(self) -> None:
        """Process the requests already queued, then close the journal (a store seals what is
        journaled) and the gateway state. Idempotent. Raises what the journal's close raises."""
        if self._closing:
            return
        self._closing = True
        self._queue.put_nowait(None)
        if self._gather is not None:
            _wake(self._gather)   # why: the batch in gathering runs now, then the loop stops
        try:
            await self._task
        except BaseException:   # why: the loop's failure is kept in self.failed; close anyway
            pass
        for _, done in self._waiters:   # what is left was never journaled (the loop failed)
            done.cancel()
        self._waiters.clear()
        self.guard.close()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self.session.close)
        finally:
            if self._replay_pool is not None:
                await loop.run_in_executor(self._replay_pool, self._close_reader)
                self._replay_pool.shutdown(wait=True)
            self._db.close()
            self._pool.shutdown(wait=True)


MAX_SYMBOL_NAME = 64
FINISHED = frozenset({"filled", "canceled", "expired", "rejected"})   # order statuses with no future

CLOCK = object()   # a queue item: the clock message is due (Gateway._next_item)


def _clock_row(ts: int, symbol_id: int) -> np.ndarray:
    """Return the clock message: a CANCEL of order id 0 by trader 0, which the engine rejects
    (UNKNOWN_ID) after expiring every order due by ``ts`` and ending every re-opening auction
    due (docs/semantics.md, "Time in force by the clock"). It has no origin, so it makes no
    report of its own; the expiries it causes make theirs."""
    row = np.zeros(1, ORDER_DTYPE)[0]
    row["ts"], row["kind"], row["symbol"] = ts, Kind.CANCEL, symbol_id
    return row


def _malformed(req: Request) -> str | None:
    """Return why a request's text fields cannot be used (None if they can): each must be a str
    of bounded length, so no hostile value reaches a dict key or the state file unbounded."""
    if req.kind not in ("new", "cancel", "replace"):
        return f"unknown request kind {str(req.kind)[:16]!r}"
    if not isinstance(req.symbol, str) or len(req.symbol) > MAX_SYMBOL_NAME:
        return f"symbol must be a name of at most {MAX_SYMBOL_NAME} characters"
    for name in ("client_order_id", "orig_client_order_id"):
        v = getattr(req, name)
        if not isinstance(v, str) or len(v) > MAX_CLIENT_ID:
            return f"{name} must be at most {MAX_CLIENT_ID} characters"
    return None


def _printable(req: Request) -> Request:
    """Return ``req`` with its text fields cut to strings a report can carry."""
    from dataclasses import replace

    def text(v, n):
        return v[:n] if isinstance(v, str) else ""

    return replace(req, kind=req.kind if req.kind in ("new", "cancel", "replace") else "new",
                   symbol=text(req.symbol, MAX_SYMBOL_NAME),
                   client_order_id=text(req.client_order_id, MAX_CLIENT_ID),
                   orig_client_order_id=text(req.orig_client_order_id, MAX_CLIENT_ID))


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


NOT_PROCESSED = ("not processed: the gateway stopped before this request was journaled; "
                 "send it again")


def _renumber(r: Report, stream: str, rseq: int) -> Report:
    """Return a copy of ``r`` on ``stream`` as its report ``rseq``."""
    # why not dataclasses.replace: it re-runs __init__ over every field, per report and copy
    new = object.__new__(Report)
    new.__dict__.update(r.__dict__, stream=stream, rseq=rseq)
    return new


def _call_opener(open_journal: JournalOpener) -> JournalSession:
    """Return ``open_journal()`` (on the worker thread); raise UsageError if it is no
    JournalSession."""
    session = open_journal()
    if not isinstance(session, JournalSession):
        raise UsageError("the journal opener must return a JournalSession (data_dir, engine, "
                         f"process, read, close); it returned {type(session).__name__!r}")
    return session
