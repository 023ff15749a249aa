"""``ShardedEngine``: one engine's batches matched on several threads (``Engine(threads=N)``).

Symbols are independent, so the engine is split by symbol into N shards: N inner engines
(``exchange.single.SingleEngine``, which is ``Engine`` without the threads option: this module
builds on it, and ``exchange.engine`` on this one), each with every symbol (same ids, same
options) but holding the orders of the symbols it owns only. Symbol s belongs to shard
``s % N`` (round robin in the order of adding). ``process`` runs one task per shard on a thread
pool (the calling thread takes shard 0): the shard copies its messages out of the batch and
walks the batch with ``shard_kernels.drive`` (nogil), matching its own messages and running its
own deadlines before every message; then ``shard_kernels.merge`` writes the shards' rows in the
single engine's order (in N ranges of the batch, on the pool too). ``exchange.shard_kernels``
says why the order is exact, deadlines of several shards before one message included.

Invariants:
- Every output (rows, their bytes, seq, trade ids), ``checkpoint()``, ``state_hash()`` and
  ``config()`` equal those of ``Engine()`` (threads=1) fed the same calls. A checkpoint restores
  into any thread count (``Engine.restore(blob, threads=N)``).
- Between calls every shard's ``meta[M_SEQ]`` is the engine's seq and its ``meta[M_TRADE_ID]``
  the engine's last trade id; inside a batch they count the shard's own (see shard_kernels).
- ``threads`` is how the engine runs, not state: ``config()`` and checkpoints do not hold it.

Not here: ``state`` and ``grow`` (there is one state per shard; the kernels that extend the
engine take a threads=1 engine). A call that raises part way (MemoryError growing) leaves the
engine unusable, as it leaves a threads=1 engine part way through its batch.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from . import checkpoint as ckpt
from . import kernels
from . import shard_kernels as sk
from .book import (
    M_EXPIRY_N, M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2, M_NEXT_END, M_SEQ, M_TRADE_ID,
)
from .arguments import I64, PHASES, SIDES, TIFS, TYPES, U32, U64, enum_arg, int_arg, is_bool
from .configuration import build_from_config
from .errors import UsageError
from .order_index import index_find
from .processing import compiled_entry, message_fields
from .protocol import OutputBuffers, Result
from .schema import (
    CHECKPOINT_DTYPE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Flag, Kind, OrderType,
    Phase, Side, Tif,
)
from .single import SingleEngine
from .state import OK, grow_output as _grow_output, zeros_aligned

__all__ = ["ShardedEngine", "MAX_THREADS"]

MAX_THREADS = 64
# below this many messages a batch runs its shards one after another on the calling thread:
# handing work to the pool costs tens of microseconds
PARALLEL_MIN = 4096


def threads_arg(threads) -> int:
    """Return ``threads`` as an int in [1, MAX_THREADS]; raise UsageError naming it otherwise."""
    return int_arg(threads, "threads", 1, MAX_THREADS)


class _Shard:
    """One shard: its engine and the buffers its walk of a batch fills."""

    __slots__ = ("engine", "own", "ownpos", "n_own", "fills", "l2", "events", "cnt", "log",
                 "ctl")

    def __init__(self, engine: SingleEngine):
        engine.prefetch_tuning = False     # a shard always prefetches (ShardedEngine says why)
        self.engine = engine
        self.own = np.zeros(0, ORDER_DTYPE)
        self.ownpos = np.zeros(0, np.int64)
        self.n_own = 0
        b = OutputBuffers(0)
        self.fills, self.l2, self.events = b.fills, b.l2, b.events
        self.cnt = np.zeros(3, np.int64)
        self.log = np.zeros((64, sk.LOG_COLS), np.int64)
        self.ctl = np.zeros(3, np.int64)     # position, own message, log rows

    def _reserve(self, n_own: int) -> None:
        """Give each output buffer the room ``OutputBuffers(n_own)`` has: a shard's buffers
        start empty, and growing them by doubling inside the walk costs a kernel exit, a copy
        and the GIL each time (the shards then wait on each other). The rows of the previous
        batch are merged already, so nothing is copied."""
        sized = OutputBuffers.sizes(n_own)
        for name, rows in zip(("fills", "l2", "events"), sized):
            if len(getattr(self, name)) < rows:
                setattr(self, name, zeros_aligned(rows, getattr(self, name).dtype))

    def run(self, orders: np.ndarray, owner: np.ndarray, k: int, owners: np.ndarray) -> None:
        """Match shard ``k``'s part of ``orders`` (its messages and its deadlines), growing what
        the kernels ask for; leaves the rows in the shard's buffers and marks its messages in
        ``owners``. Python steps between the kernels once per run of the shard's messages
        (``shard_kernels.walk``): once a batch unless deadlines fall inside it."""
        n = len(orders)
        if len(self.own) < n:
            self.own = np.zeros(n, ORDER_DTYPE)
            self.ownpos = np.zeros(n, np.int64)
        own, ownpos, ctl, cnt = self.own, self.ownpos, self.ctl, self.cnt
        eng = self.engine
        meta = eng._meta
        n_own, latest, settable = sk.split(orders, owner, k, own, ownpos, owners,
                                           eng._symbols["dynamic_band_bps"])
        self.n_own = n_own
        self._reserve(n_own)
        meta[M_SEQ] = 0
        cnt[:] = 0
        ctl[:] = 0
        ahead = eng.prefetch_distance
        end = -1       # the run of own messages being matched (-1: none)
        if n_own and not settable and _next_deadline(eng) > latest:
            # no deadline is due in the batch and none of its messages can set one: all the
            # shard's messages are one run, and the walk need not look at each
            ctl[0] = n
            end = n_own
        while True:
            state = tuple(eng.state)
            if end < 0:
                status, end = sk.walk(orders, latest, own, ownpos, n_own, ctl, *state,
                                      self.fills, self.l2, self.events, cnt, self.log)
                if status != OK:
                    end = -1
                elif end == ctl[1]:
                    return
            if end >= 0:
                j = int(ctl[1])
                args = (own[j:end], 0, *state, self.fills, self.l2, self.events, cnt, ahead)
                call = (_PROCESS or _process_entry(args)) if type(ahead) is int \
                    else kernels.process_batch     # numba's dispatch checks other types
                status, done = call(*args)
                if status == OK:
                    ctl[1] = end
                    end = -1
                    continue
                ctl[1] = j + done     # the rest of the run after growing (no deadline in it)
            if status == sk.NEED_OUTPUT:
                used = cnt.tolist()
                self.fills = _grow_output(self.fills, used[0], int(meta[M_NEED_FILLS]))
                self.l2 = _grow_output(self.l2, used[1], int(meta[M_NEED_L2]))
                self.events = _grow_output(self.events, used[2], int(meta[M_NEED_EVENTS]))
            elif status == sk.NEED_LOG:
                log = np.zeros((2 * len(self.log), sk.LOG_COLS), np.int64)
                log[: len(self.log)] = self.log
                self.log = log
            else:
                eng.grow(status)


_PROCESS = None   # process_batch's compiled entry for the shards' argument types


def _next_deadline(eng: SingleEngine) -> int:
    """The earliest ts at which one of ``eng``'s deadlines is due (an expiry or an auction
    end; the int64 maximum if none): ``shard_kernels._next_deadline`` in Python."""
    d = (1 << 63) - 1
    meta = eng._meta
    if meta[M_EXPIRY_N] > 0:
        d = int(eng._expiry[0]["expire_ts"])
    end = int(meta[M_NEXT_END])
    return min(d, end) if end != 0 else d


def _process_entry(args):
    """Return process_batch's entry point for ``args`` (the shards' own arrays, of the types
    the engine's own call has: the per-run call skips numba's type dispatch)."""
    global _PROCESS
    _PROCESS = compiled_entry(kernels.process_batch, args)
    return _PROCESS


class ShardedEngine:
    """A multi-symbol matching engine whose batches are matched on ``threads`` threads, one
    shard of the symbols each (see the module); what ``Engine(..., threads=N)`` returns for
    N > 1. Same interface, outputs and checkpoints as ``Engine`` but ``state``/``grow``.

    ``stp``, ``ownership``, ``capacity``: as ``Engine`` (``capacity`` is shared among the
    shards). Raises UsageError for a bad option or ``threads`` not an int in [1, MAX_THREADS].
    """

    def __init__(self, stp: str | int = "none", *, ownership: bool = True, capacity: int = 1024,
                 threads: int = 2):
        n = threads_arg(threads)
        capacity = int_arg(capacity, "capacity", 0, ckpt.MAX_ORDERS)
        self._shards = [_Shard(SingleEngine(stp, ownership=ownership,
                                            capacity=-(-capacity // n)))
                        for _ in range(n)]
        self._owner = np.zeros(0, np.int32)     # symbol id -> shard
        self._next_auto_id = 1
        self._pool = None

    @property
    def threads(self) -> int:
        """The number of shards (and threads a large batch runs on)."""
        return len(self._shards)

    def _engines(self) -> list[SingleEngine]:
        return [s.engine for s in self._shards]

    def _owner_of(self, sid: int) -> SingleEngine:
        return self._shards[int(self._owner[sid])].engine

    def __getstate__(self) -> dict:
        d = dict(self.__dict__)
        d["_pool"] = None      # a copy or an unpickled engine starts its own
        return d

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)

    # ---------------------------------------------------------------- symbols and options
    def add_symbol(self, name: str, *args, **kwargs) -> int:
        """``Engine.add_symbol`` (same arguments, checks and errors); the symbol goes to shard
        ``id % threads``. Returns its id."""
        sid = self._shards[0].engine.add_symbol(name, *args, **kwargs)
        for sh in self._shards[1:]:
            sh.engine.add_symbol(name, *args, **kwargs)
        self._owner = np.arange(sid + 1, dtype=np.int32) % len(self._shards)
        return sid

    def symbol_id(self, symbol: str | int) -> int:
        """Return the id of ``symbol`` (a name or an id). Raises UsageError if unknown."""
        return self._shards[0].engine.symbol_id(symbol)

    @property
    def symbols(self) -> dict[str, int]:
        """Symbol names mapped to ids, in id order."""
        return self._shards[0].engine.symbols

    @property
    def seq(self) -> int:
        """The seq of the last message processed (0 before any)."""
        return self._shards[0].engine.seq

    @property
    def stp(self) -> str:
        """The self-trade prevention mode's name."""
        return self._shards[0].engine.stp

    @property
    def ownership(self) -> bool:
        """Whether a CANCEL or MODIFY from a trader other than the order's is refused."""
        return self._shards[0].engine.ownership

    @property
    def prefetch_distance(self) -> int:
        """Every shard's prefetch distance in messages (0: off; results identical)."""
        return self._shards[0].engine.prefetch_distance

    @prefetch_distance.setter
    def prefetch_distance(self, value: int) -> None:
        for e in self._engines():
            e.prefetch_distance = value

    @property
    def prefetch_tuning(self) -> bool:
        """False: the shards always prefetch ``prefetch_distance`` messages ahead. Trials made
        per shard (each timing its own share of a batch) were measured and not kept: on 2
        threads uniform100 0.97x, QuantCup 1.01x of always prefetching."""
        return False

    @prefetch_tuning.setter
    def prefetch_tuning(self, on: bool) -> None:
        if on is not False:
            raise UsageError("prefetch_tuning: an engine with threads > 1 always prefetches "
                             f"prefetch_distance messages ahead (set that to 0 to turn it "
                             f"off); got {on!r}")

    def config(self) -> dict:
        """Return ``Engine.config()``: the options and symbols (not ``threads``, how it runs).
        Raises nothing."""
        return self._shards[0].engine.config()

    @classmethod
    def from_config(cls, cfg: dict, *,
                    threads: int = 2) -> "ShardedEngine | SingleEngine":
        """``Engine.from_config(cfg, threads=threads)``: a fresh engine with the options and
        symbols of ``cfg``, a ``SingleEngine`` for ``threads`` 1. Raises UsageError as that
        does (``threads`` first)."""
        n = threads_arg(threads)
        if n == 1:
            return SingleEngine.from_config(cfg)
        return build_from_config(partial(cls, threads=n), cfg)

    # ---------------------------------------------------------------- processing
    def process(self, orders: np.ndarray, *, out: OutputBuffers | None = None) -> Result:
        """Return ``Engine.process``'s Result: the same rows and bytes, matched on the shards'
        threads. Raises UsageError as that does (a bad ``orders`` or ``out``)."""
        if not isinstance(orders, np.ndarray) or orders.dtype != ORDER_DTYPE or orders.ndim != 1:
            got = getattr(orders, "dtype", type(orders).__name__)
            raise UsageError(f"process() takes a 1-d numpy array of ORDER_DTYPE; got {got}")
        if out is not None and not isinstance(out, OutputBuffers):
            raise UsageError(f"process(out=...) takes an OutputBuffers; got {type(out).__name__}")
        orders = np.ascontiguousarray(orders)
        if not orders.flags.writeable:
            orders = orders.copy()    # one compiled type of the kernels: writeable arrays
        shards, owner = self._shards, self._owner
        base_seq = self.seq
        base_trade = int(shards[0].engine._meta[M_TRADE_ID])
        n = len(orders)
        parallel = n >= PARALLEL_MIN and len(shards) > 1
        owners = np.empty(n, np.int32)
        if parallel:
            pool = self._pool or self._start_pool()
            futures = [pool.submit(sh.run, orders, owner, k, owners)
                       for k, sh in enumerate(shards) if k > 0]
            shards[0].run(orders, owner, 0, owners)
            for f in futures:
                f.result()
        else:
            for k, sh in enumerate(shards):
                sh.run(orders, owner, k, owners)
        totals = [int(sum(sh.cnt[t] for sh in shards)) for t in range(3)]
        if out is None:
            fills = np.zeros(totals[0], FILL_DTYPE)
            l2 = np.zeros(totals[1], L2_DTYPE)
            events = np.zeros(totals[2], EVENT_DTYPE)
        else:
            for name, total in zip(("fills", "l2", "events"), totals):
                if len(getattr(out, name)) < total:
                    # nothing copied: the merge writes every row of the result
                    setattr(out, name, _grow_output(getattr(out, name), 0, total))
            fills, l2, events = out.fills, out.l2, out.events
        args = (base_seq, base_trade, owners, tuple(sh.ownpos for sh in shards),
                np.array([sh.n_own for sh in shards], np.int64),
                tuple(sh.log for sh in shards),
                np.array([sh.ctl[2] for sh in shards], np.int64),
                tuple(sh.fills for sh in shards), tuple(sh.l2 for sh in shards),
                tuple(sh.events for sh in shards), np.stack([sh.cnt for sh in shards]),
                fills, l2, events)
        if parallel:
            cuts = [n * t // len(shards) for t in range(len(shards) + 1)]
            futures = [pool.submit(sk.merge, cuts[t], cuts[t + 1], *args,
                                   np.zeros((len(shards), 5), np.int64))
                       for t in range(1, len(shards))]
            sk.merge(cuts[0], cuts[1], *args, np.zeros((len(shards), 5), np.int64))
            for f in futures:
                f.result()
        else:
            sk.merge(0, n, *args, np.zeros((len(shards), 5), np.int64))
        for sh in shards:
            sh.engine._meta[M_SEQ] = base_seq + n
            sh.engine._meta[M_TRADE_ID] = base_trade + totals[0]
        return Result(fills[: totals[0]], l2[: totals[1]], events[: totals[2]])

    def _start_pool(self) -> ThreadPoolExecutor:
        self._pool = ThreadPoolExecutor(max_workers=len(self._shards) - 1,
                                        thread_name_prefix="exsim-shard")
        return self._pool

    # ---------------------------------------------------------------- per-order API
    def submit(self, symbol: str | int, side: str | int, *, qty: int, price: int = 0,
               order_type: str | int = "limit", tif: str | int = "gtc", post_only: bool = False,
               trader: int = 0, order_id: int | None = None, ts: int | None = None,
               stop_price: int = 0, display_qty: int = 0, min_qty: int = 0,
               expire_ts: int = 0) -> Result:
        """Return ``Engine.submit``'s Result (same arguments, checks and automatic ids). Raises
        UsageError as that does."""
        sid = self.symbol_id(symbol)
        side = enum_arg(SIDES, Side, side, "side")
        order_type = enum_arg(TYPES, OrderType, order_type, "order_type")
        tif = enum_arg(TIFS, Tif, tif, "tif")
        trader = int_arg(trader, "trader", *U32)
        stop_price = int_arg(stop_price, "stop_price", *I64)
        display_qty = int_arg(display_qty, "display_qty", *I64)
        min_qty = int_arg(min_qty, "min_qty", *I64)
        expire_ts = int_arg(expire_ts, "expire_ts", *I64)
        qty = int_arg(qty, "qty", *I64)
        price = int_arg(price, "price", *I64)
        ts = 0 if ts is None else int_arg(ts, "ts", *I64)
        if is_bool(post_only) or (type(post_only) is int and post_only in (0, 1)):
            flags = int(Flag.POST_ONLY) if post_only else 0
        else:
            raise UsageError(f"post_only must be a bool; got {post_only!r}")
        if order_id is None:
            order_id = self._next_auto_id
            index = self._owner_of(sid)._index
            while order_id <= U64[1] and index_find(index, sid, np.uint64(order_id)) >= 0:
                order_id += 1
            if order_id > U64[1]:
                raise UsageError("no automatic order id is left below 2^64 on "
                                 f"{self.config()['symbols'][sid]['name']!r}; pass order_id")
            self._next_auto_id = order_id + 1
        else:
            order_id = int_arg(order_id, "order_id", *U64)
        return self.process(message_fields(
            Kind.NEW, sid, order_id, price, qty, ts, trader=trader, side=side,
            order_type=order_type, tif=tif, flags=flags, stop_price=stop_price,
            display_qty=display_qty, min_qty=min_qty, expire_ts=expire_ts))

    def cancel(self, symbol: str | int, order_id: int, *, trader: int = 0,
               ts: int | None = None) -> Result:
        """Return ``Engine.cancel``'s Result (same arguments and checks). Raises UsageError as
        that does."""
        sid = self.symbol_id(symbol)
        order_id = int_arg(order_id, "order_id", *U64)
        ts = 0 if ts is None else int_arg(ts, "ts", *I64)
        return self.process(message_fields(Kind.CANCEL, sid, order_id, 0, 0, ts,
                                           trader=int_arg(trader, "trader", *U32)))

    def modify(self, symbol: str | int, order_id: int, *, price: int, qty: int,
               trader: int = 0, ts: int | None = None, stop_price: int = 0) -> Result:
        """Return ``Engine.modify``'s Result (same arguments and checks). Raises UsageError as
        that does."""
        sid = self.symbol_id(symbol)
        order_id = int_arg(order_id, "order_id", *U64)
        price, qty = int_arg(price, "price", *I64), int_arg(qty, "qty", *I64)
        ts = 0 if ts is None else int_arg(ts, "ts", *I64)
        return self.process(message_fields(
            Kind.MODIFY, sid, order_id, price, qty, ts, trader=int_arg(trader, "trader", *U32),
            stop_price=int_arg(stop_price, "stop_price", *I64)))

    def set_phase(self, symbol: str | int, phase: str | int, *, ts: int | None = None,
                  reference_price: int = 0, end_ts: int = 0) -> Result:
        """Return ``Engine.set_phase``'s Result (same arguments and checks). Raises UsageError
        as that does."""
        sid = self.symbol_id(symbol)
        code = enum_arg(PHASES, Phase, phase, "phase")
        price = int_arg(reference_price, "reference_price", *I64)
        ts = 0 if ts is None else int_arg(ts, "ts", *I64)
        return self.process(message_fields(
            Kind.PHASE, sid, 0, price, 0, ts, phase=code,
            expire_ts=int_arg(end_ts, "end_ts", *I64)))

    # ---------------------------------------------------------------- views of the book
    def phase(self, symbol: str | int) -> Phase:
        """Return the Phase ``symbol`` is in. Raises UsageError for an unknown symbol."""
        sid = self.symbol_id(symbol)
        return self._owner_of(sid).phase(sid)

    def indicative(self, symbol: str | int) -> tuple[int, int, int]:
        """Return ``Engine.indicative``: the last indicative uncross published for ``symbol``.
        Raises UsageError for an unknown symbol."""
        sid = self.symbol_id(symbol)
        return self._owner_of(sid).indicative(sid)

    def next_deadline(self) -> int:
        """Return ``Engine.next_deadline``: the earliest expiry or auction end of any shard (0:
        none). Raises nothing."""
        times = [t for t in (e.next_deadline() for e in self._engines()) if t]
        return min(times) if times else 0

    def depth(self, symbol: str | int, levels: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Return ``Engine.depth``: (bids, asks) of ``symbol``, best level first. Raises
        UsageError for an unknown symbol."""
        sid = self.symbol_id(symbol)
        return self._owner_of(sid).depth(sid, levels)

    def orders(self, symbol: str | int) -> np.ndarray:
        """Return ``Engine.orders``: the resting orders of ``symbol`` (L3_DTYPE). Raises
        UsageError for an unknown symbol."""
        sid = self.symbol_id(symbol)
        return self._owner_of(sid).orders(sid)

    def stops(self, symbol: str | int) -> np.ndarray:
        """Return ``Engine.stops``: the pending stops of ``symbol`` (L3_DTYPE) in release order.
        Raises UsageError for an unknown symbol."""
        sid = self.symbol_id(symbol)
        return self._owner_of(sid).stops(sid)

    @property
    def live_orders(self) -> int:
        """Number of live orders over all symbols: resting orders and pending stops."""
        return sum(e.live_orders for e in self._engines())

    def memory_bytes(self) -> int:
        """Return the bytes held by every shard's book state arrays. Raises nothing."""
        return sum(e.memory_bytes() for e in self._engines())

    @property
    def state(self):
        """Not available: each shard has its own state arrays. Raises UsageError."""
        raise UsageError("Engine.state is one engine's arrays; an engine with threads > 1 has "
                         "one set per shard (use threads=1 for kernels that extend the engine)")

    def grow(self, status: int):
        """Not available (see ``state``). Raises UsageError."""
        raise UsageError("Engine.grow: an engine with threads > 1 grows its shards itself")

    # ---------------------------------------------------------------- checkpoints
    def _parts(self) -> tuple[dict, np.ndarray]:
        """Return (header, CHECKPOINT_DTYPE rows) of the one engine these shards make up."""
        engines = self._engines()
        first = engines[0]
        symbols = first._symbols.copy()
        parts = [[], []]
        for k, e in enumerate(engines):
            mine = np.flatnonzero(self._owner == k)
            symbols[mine] = e._symbols[mine]
            for which in (1, 2):
                parts[which - 1].append(e._collect(mine.tolist(), which))
        rows = []
        for part in parts:     # resting orders of every symbol, then pending stops
            cat = np.concatenate(part) if part else np.zeros(0, CHECKPOINT_DTYPE)
            rows.append(cat[np.argsort(cat["symbol"], kind="stable")])
        header = ckpt.make_header(self.config(), self.seq, int(first._meta[M_TRADE_ID]),
                                  self._next_auto_id, symbols["last_price"].tolist(),
                                  ckpt.phase_state(symbols, first._options))
        return header, np.concatenate(rows)

    def checkpoint(self) -> bytes:
        """Return ``Engine.checkpoint``: the bytes a threads=1 engine in this state writes.
        Raises nothing."""
        return ckpt.encode(*self._parts())

    def checkpoint_equals(self, blob) -> bool:
        """``self.checkpoint() == blob`` as ``Engine.checkpoint_equals`` decides it (a version 1
        blob compared as that engine would). Never raises."""
        return SingleEngine.restore(self.checkpoint()).checkpoint_equals(blob)

    def state_hash(self) -> str:
        """Return ``Engine.state_hash``: the digest a threads=1 engine in this state gives.
        Raises nothing."""
        header, rows = self._parts()
        h = hashlib.blake2b(digest_size=16)
        h.update(ckpt.header_bytes(header))
        h.update(rows.tobytes())
        return h.hexdigest()

    @classmethod
    def restore(cls, blob: bytes, *, threads: int = 2) -> "ShardedEngine":
        """Return ``Engine.restore(blob)`` split into ``threads`` shards. Raises UsageError for
        ``threads`` not an int in [1, MAX_THREADS], else as ``Engine.restore`` (the same
        checks and errors)."""
        n = threads_arg(threads)
        whole = SingleEngine.restore(blob)    # checks everything; its state is the reference
        ck = ckpt.parse(blob)
        self = cls.__new__(cls)
        self._pool = None
        self._next_auto_id = whole._next_auto_id
        self._owner = np.arange(len(ck.symbols), dtype=np.int32) % n
        self._shards = []
        for k in range(n):
            mine = self._owner[ck.rows["symbol"]] == k if len(ck.rows) else np.zeros(0, bool)
            self._shards.append(_Shard(SingleEngine._restore_part(ck, ckpt.row_size(blob),
                                                                  self._owner == k, mine)))
        return self
