"""``book_at``: the book of one symbol exactly as it stood after a given message.

Two views, both starting from the newest checkpoint at or before the target seq:

- **L2** (default): the checkpoint's depth, then every stored L2 update of the symbol with
  checkpoint seq < seq <= target applied in order (an update sets a level's total quantity and
  order count; quantity 0 removes the level). The engine is only used to read the checkpoint.
- **L3** (``l3=True``): the checkpoint restored into an ``Engine``, then the symbol's journaled
  orders up to the target re-matched; ``orders`` lists the resting orders in priority order
  (bids best first, then asks, FIFO within a level) and the depth comes from the same engine.
  An iceberg's row shows its displayed quantity (``qty``) and its reserve (``hidden``) apart,
  with its ``display_qty``; every row carries its ``order_type``, ``tif`` and ``expire_ts``.
  ``stops`` lists the pending stops, which are outside the book (``Engine.stops``): BUY stops
  by rising ``stop_price``, then SELL stops by falling ``stop_price``, FIFO among equal prices
  (the order they would be released in).

Both views also say the symbol's trading phase after the target (``phase``) and, in a call, the
last indicative uncross published (``indicative``: price, volume, surplus; (0, 0, 0) outside a
call or before one is published), from the symbol's events: every event row carries the
symbol's phase after it, the last PHASE event into a call resets the indicative and each
INDICATIVE event sets it (docs/semantics.md, Trading phases); a state no event after the
checkpoint tells comes from the checkpoint's header. A call book is rebuilt like any other: it
may be crossed, and MARKET orders stand at their call price (``CALL_MARKET_PRICE``: a BUY at
MAX_PRICE + 1 heads the bids, a SELL at 0 the asks).

Invariants:
- A symbol's book changes only with that symbol's messages, so the book after global seq N is
  the book after the symbol's last message at or before N; both views rebuild exactly that.
- ``ts=T`` targets the symbol's last message with ``ts <= T`` (its seq is ``view.seq``). With
  nondecreasing timestamps (every exsim generator and loader produces them) that is the book at
  time T. Before the symbol's first such message the view is the run's starting book.
- Depth arrays are DEPTH_DTYPE, best level first: bids by falling price, asks by rising price.
  They hold displayed quantity only (as L2 updates do): neither an iceberg's reserve nor a
  pending stop is in them, in either view.

The L2 view caches the depth of the last 256 (checkpoint, symbol) pairs it read (per process; checkpoint files are
immutable), so repeated views near one another skip restoring the checkpoint. It reads through a
``store.Reader``: the caller's (``book_at(reader, ...)``: its catalog snapshot, open segment
files, the run's bounds and checkpoint list are kept between calls, until the catalog changes)
or one made for the call (``book_at(data_dir, ...)``). Only the L2 blocks between the checkpoint
and the target are decoded (the segments' zone maps), and the symbol's last message at or
before the target is found from the newest block backwards (``Reader.last_row``).

Limits: the cost is one checkpoint read plus the L2 rows (or orders, for L3) between that
checkpoint and the target, so it grows with the store's ``checkpoint_every`` interval.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numba import njit

from exsim.exchange import checkpoint as ckpt
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import CALL_PHASES, DEPTH_DTYPE, Event, Phase, Side
from exsim.store import Reader, journaled_through, read, read_checkpoint, read_columns

from exsim.replay.rundir import RunInfo, resolve_symbol, restore, run_info, strip_seq, SEQ_MAX

__all__ = ["BookView", "book_at", "apply_l2"]

_TS_MIN = -(1 << 63)
_BUY = int(Side.BUY)


@dataclass(repr=False)
class BookView:
    """A rebuilt book. ``seq`` is the last message applied; ``ts`` that message's timestamp.

    ``seq``/``ts`` refer to the target: for ``seq=N`` requests ``seq`` is N and ``ts`` the
    timestamp of the symbol's last message at or before N (None if it had none); for ``ts=T``
    requests both describe the symbol's last message with ts <= T.
    """

    def __repr__(self) -> str:
        """One line: what a notebook or a log shows (the arrays are summarised)."""
        from exsim.replay import reprs
        return reprs.book_view_repr(self)

    def _repr_html_(self) -> str:
        from exsim.replay import reprs
        return reprs.book_view_html(self)

    seq: int
    ts: int | None
    bids: np.ndarray                 # DEPTH_DTYPE, best (highest) price first
    asks: np.ndarray                 # DEPTH_DTYPE, best (lowest) price first
    orders: np.ndarray | None = None  # L3_DTYPE resting orders in priority order, only when l3=True
    symbol: str = ""
    # L3_DTYPE pending stops in release order (BUY by rising stop_price, then SELL by falling),
    # only when l3=True: L2 updates do not carry stops, so the L2 view has none (None)
    stops: np.ndarray | None = None
    phase: Phase = Phase.CONTINUOUS   # the symbol's trading phase after the target
    # in a call, the last indicative uncross published: (price, volume, surplus > 0 buy side);
    # (0, 0, 0) outside a call or when nothing would execute
    indicative: tuple = (0, 0, 0)


# why a direct table when the prices are close together (every book seen so far): a level's
# row is then at its price's offset, one store per update and no probing, and the final scan
# walks the levels in price order; a wider span (a BUY MARKET resting in a call at
# MAX_PRICE + 1, a sparse book) takes the hash table, whose size follows the row count.
# The table is zeroed and scanned whole, so its span is held to a few times the rows: then both
# tables cost time linear in the rows
_DIRECT_SLACK = 1024


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)   # 2^64 / phi: Fibonacci hashing


@njit(cache=True, nogil=True)
def _hash_rows(sides, prices, qty, cnt, buy, mask, shift, kp, ks, used, tq, tc):
    """Write each row's qty and count into the open-addressing table (kp, ks, used, tq, tc)
    at its (price, side) bucket, a later row overwriting an earlier one."""
    for i in range(prices.size):
        p, sd = prices[i], np.uint8(1 if sides[i] == buy else 0)
        # why the product's top bits: its low bits depend only on the key's low bits, so
        # prices on a power-of-two tick would share buckets
        h = np.int64(((np.uint64(p) * np.uint64(2) + np.uint64(sd)) * _GOLDEN) >> shift)
        while used[h] and (kp[h] != p or ks[h] != sd):
            h = (h + 1) & mask
        used[h], kp[h], ks[h] = 1, p, sd
        tq[h], tc[h] = qty[i], cnt[i]


@njit(cache=True, nogil=True)
def _final_levels(side0, price0, qty0, cnt0, side1, price1, qty1, cnt1, buy):
    """The levels left after rows 1 (L2 updates, in order) overwrite rows 0 (a starting
    book), as (side, price, qty, count) arrays of the levels whose last row has qty != 0.
    A (side, price) pair's last row is its final state."""
    n0, n1 = price0.size, price1.size
    lo, hi = np.int64(0), np.int64(-1)
    if n0 + n1:
        lo = price0[0] if n0 else price1[0]
        hi = lo
        for i in range(n0):
            lo, hi = min(lo, price0[i]), max(hi, price0[i])
        for i in range(n1):
            lo, hi = min(lo, price1[i]), max(hi, price1[i])
    if n0 + n1 == 0 or (lo >= 0 and hi - lo < 4 * (n0 + n1) + _DIRECT_SLACK):
        span = hi - lo + 1
        tq = np.zeros(2 * span, np.int64)
        tc = np.zeros(2 * span, np.int64)
        for i in range(n0):
            h = 2 * (price0[i] - lo) + (1 if side0[i] == buy else 0)
            tq[h], tc[h] = qty0[i], cnt0[i]
        for i in range(n1):
            h = 2 * (price1[i] - lo) + (1 if side1[i] == buy else 0)
            tq[h], tc[h] = qty1[i], cnt1[i]
        m = 0
        for h in range(2 * span):
            if tq[h] != 0:
                m += 1
        os_, op, oq, oc = (np.empty(m, np.uint8), np.empty(m, np.int64), np.empty(m, np.int64),
                           np.empty(m, np.int64))
        j = 0
        for h in range(2 * span):
            if tq[h] != 0:
                os_[j] = buy if h & 1 else 1 - buy
                op[j], oq[j], oc[j] = lo + h // 2, tq[h], tc[h]
                j += 1
        return os_, op, oq, oc
    # open addressing over (price, side), any int64 price
    cap, bits = 16, 4
    while cap < 2 * (n0 + n1):
        cap *= 2
        bits += 1
    mask, shift = cap - 1, np.uint64(64 - bits)
    kp = np.empty(cap, np.int64)
    ks = np.empty(cap, np.uint8)
    used = np.zeros(cap, np.uint8)
    tq = np.empty(cap, np.int64)
    tc = np.empty(cap, np.int64)
    _hash_rows(side0, price0, qty0, cnt0, buy, mask, shift, kp, ks, used, tq, tc)
    _hash_rows(side1, price1, qty1, cnt1, buy, mask, shift, kp, ks, used, tq, tc)
    m = 0
    for h in range(cap):
        if used[h] and tq[h] != 0:
            m += 1
    os_, op, oq, oc = (np.empty(m, np.uint8), np.empty(m, np.int64), np.empty(m, np.int64),
                       np.empty(m, np.int64))
    j = 0
    for h in range(cap):
        if used[h] and tq[h] != 0:
            os_[j] = buy if ks[h] else 1 - buy
            op[j], oq[j], oc[j] = kp[h], tq[h], tc[h]
            j += 1
    return os_, op, oq, oc


def _depth(prices, qty, count, best_high: bool, depth: int | None) -> np.ndarray:
    order = np.argsort(prices, kind="stable")
    if best_high:
        order = order[::-1]
    if depth is not None:
        order = order[:depth]
    out = np.zeros(order.size, DEPTH_DTYPE)
    out["price"], out["qty"], out["count"] = prices[order], qty[order], count[order]
    return out


def _apply_columns(bids: np.ndarray, asks: np.ndarray, side, price, qty, count,
                   depth: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``apply_l2`` on the updates' columns (1-D arrays, one element per L2 row, in order)."""
    nb = bids.size
    side0 = np.empty(nb + asks.size, np.uint8)
    side0[:nb], side0[nb:] = _BUY, 1 - _BUY
    s, p, q, c = _final_levels(
        side0, np.concatenate([bids["price"], asks["price"]]).astype(np.int64),
        np.concatenate([bids["qty"], asks["qty"]]).astype(np.int64),
        np.concatenate([bids["count"], asks["count"]]).astype(np.int64),
        np.ascontiguousarray(side, np.uint8), np.ascontiguousarray(price, np.int64),
        np.ascontiguousarray(qty, np.int64), np.ascontiguousarray(count, np.int64), _BUY)
    b, a = s == _BUY, s != _BUY
    return (_depth(p[b], q[b], c[b], True, depth), _depth(p[a], q[a], c[a], False, depth))


def apply_l2(bids: np.ndarray, asks: np.ndarray, updates: np.ndarray,
             depth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return (bids, asks) after applying L2 ``updates`` (L2 rows, in order) to a starting depth.

    ``bids``/``asks`` are DEPTH_DTYPE arrays of the starting book (any order); ``updates``
    any structured array with L2_DTYPE's side, price, qty and count fields. The result is
    DEPTH_DTYPE, best level first, at most ``depth`` levels per side (None: all); a level
    whose last row has qty 0 is gone. Raises nothing of its own (a missing field: KeyError
    or ValueError from numpy).
    """
    return _apply_columns(bids, asks, updates["side"], updates["price"], updates["qty"],
                          updates["count"], depth)


_DEPTH_CACHE: OrderedDict = OrderedDict()
# why 256: an entry is one symbol's depth (levels x 24 bytes), tiny next to a checkpoint file
_DEPTH_CACHE_SIZE = 256


def _checkpoint_depth(reader: Reader, info: RunInfo, sid: int,
                      target: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(checkpoint seq, bids, asks) of the newest checkpoint at or before ``target``.

    Cached per process: a checkpoint file is written once and never modified, so its depth is
    keyed by directory, path, CRC and size. Restoring a large book dominates an L2 view
    otherwise (the whole engine, every symbol, is rebuilt from the file).
    """
    row = _checkpoint_row(reader, info, target)
    key = (os.path.realpath(info.data_dir), row["path"], row["crc"], row["bytes"], sid)
    hit = _DEPTH_CACHE.get(key)
    if hit is not None:
        _DEPTH_CACHE.move_to_end(key)
        return hit
    eng = restore(info, row)
    value = (eng.seq, *eng.depth(sid, levels=1 << 62))
    _DEPTH_CACHE[key] = value
    if len(_DEPTH_CACHE) > _DEPTH_CACHE_SIZE:
        _DEPTH_CACHE.popitem(last=False)
    return value


def _run(reader: Reader) -> RunInfo:
    """The RunInfo of the reader's directory, kept in the reader's cache until its catalog
    changes. Raises as ``run_info``."""
    reader.version()   # why first: a commit after this empties the cache, never keeps it stale
    info = reader.cache.get("exsim.replay.rebuild.run_info")
    if info is None:
        info = reader.cache["exsim.replay.rebuild.run_info"] = run_info(reader.data_dir)
    return info


def _journaled(reader: Reader, info: RunInfo, seq: int) -> RunInfo:
    """``info``, its ``last_seq`` brought up to the WAL when ``seq`` is above it (rows
    journaled since ``info`` was taken change the WAL only, not the catalog)."""
    if seq > info.last_seq:
        info = dataclasses.replace(info, last_seq=max(info.last_seq,
                                                      journaled_through(info.data_dir)))
        reader.cache["exsim.replay.rebuild.run_info"] = info
    return info


def _checkpoint_row(reader: Reader, info: RunInfo, seq: int) -> dict:
    """The catalog row of the newest checkpoint at or before ``seq`` (the reader's checkpoint
    list, kept until its catalog changes). Raises UsageError if ``seq`` is before the run's
    first checkpoint."""
    rows = reader.cache.get("exsim.replay.rebuild.checkpoints")
    if rows is None:
        rows = sorted(reader.catalog.checkpoints(), key=lambda r: int(r["seq"]))
        reader.cache["exsim.replay.rebuild.checkpoints"] = rows
    k = bisect.bisect_right([int(r["seq"]) for r in rows], seq)
    if k == 0:
        raise UsageError(f"seq {seq} is before the first checkpoint (seq {info.first_seq}) of "
                         f"{info.data_dir}")
    return rows[k - 1]


def _last_message(reader: Reader, sid: int, seq_hi: int, ts_hi: int) -> tuple[int, int] | None:
    """(seq, ts) of the symbol's last message with seq <= seq_hi and ts <= ts_hi, or None."""
    last = reader.last_row("orders", sid, seq=(0, seq_hi), ts=(_TS_MIN, ts_hi),
                           columns=["seq", "ts"])
    return None if last is None else (int(last["seq"]), int(last["ts"]))


def _target(reader: Reader, info: RunInfo, sid: int, seq, ts) -> tuple[int, int | None]:
    if (seq is None) == (ts is None):
        raise UsageError("book_at takes exactly one of seq= or ts=")
    if seq is not None:
        if isinstance(seq, bool) or not isinstance(seq, (int, np.integer)):
            raise UsageError(f"seq must be an int; got {seq!r}")
        seq = int(seq)
        info = _journaled(reader, info, seq)
        if seq < info.first_seq or seq > info.last_seq:
            raise UsageError(f"seq {seq} is outside the stored run {info.first_seq}..{info.last_seq}"
                             f" of {info.data_dir}")
        last = _last_message(reader, sid, seq, SEQ_MAX)
        return seq, (last[1] if last else None)
    if isinstance(ts, bool) or not isinstance(ts, (int, np.integer)):
        raise UsageError(f"ts must be an int (nanoseconds); got {ts!r}")
    # why up to SEQ_MAX: every journaled message counts, also those after ``info`` was taken
    last = _last_message(reader, sid, SEQ_MAX, int(ts))
    if last is None:
        return info.first_seq, None
    return last


def book_at(source, symbol, *, seq: int | None = None, ts: int | None = None,
            depth: int | None = 10, l3: bool = False) -> BookView:
    """Return the BookView of ``symbol`` after message ``seq`` (or the last one with ts <= ``ts``).

    ``source``: a data directory, or a ``store.Reader`` of one (what repeated calls should
    pass: its catalog snapshot, open files, run bounds and checkpoint list are kept between
    calls). ``depth`` caps the levels per side (None: all) of the displayed depth. With ``l3``
    the view also lists the resting orders in priority order (``orders``, L3_DTYPE: displayed
    ``qty`` and reserve ``hidden`` apart) and the pending stops in release order (``stops``,
    L3_DTYPE), and is rebuilt by re-matching orders; without it ``orders`` and ``stops`` are
    None.

    Raises UsageError when both or neither of seq/ts are given, for an unknown symbol, a seq
    outside the stored run or a negative depth; StoreError if ``source`` is not a data
    directory; CorruptionError if a file read fails its checksum.
    """
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, (int, np.integer))
                              or depth < 0):
        raise UsageError(f"depth must be a non-negative int or None; got {depth!r}")
    if isinstance(source, Reader):
        return _book_at(source, _run(source), symbol, seq, ts, depth, l3)
    info = run_info(os.fspath(source))   # why first: its errors name a missing directory
    with Reader(info.data_dir) as reader:
        return _book_at(reader, info, symbol, seq, ts, depth, l3)


_NO_INDICATIVE = (0, 0, 0)


_PHASE_CACHE: OrderedDict = OrderedDict()


def _checkpoint_phase(info: RunInfo, row: dict, sid: int) -> tuple[Phase, tuple]:
    """(phase, indicative) of symbol ``sid`` in checkpoint ``row``, from its header (cached
    like the depth: a checkpoint file never changes)."""
    key = (os.path.realpath(info.data_dir), row["path"], row["crc"], row["bytes"])
    states = _PHASE_CACHE.get(key)
    if states is None:
        _, blob = read_checkpoint(info.data_dir, int(row["seq"]))
        ck = ckpt.parse(blob)
        states = ck.phases if ck.phases is not None else [ckpt.start_state(sp[4])
                                                         for sp in ck.symbols]
        _PHASE_CACHE[key] = states
        if len(_PHASE_CACHE) > _DEPTH_CACHE_SIZE:
            _PHASE_CACHE.popitem(last=False)
    else:
        _PHASE_CACHE.move_to_end(key)
    phase = Phase(states[sid][0])
    indicative = tuple(int(v) for v in states[sid][4:7]) if phase in CALL_PHASES else _NO_INDICATIVE
    return phase, indicative


def _phase_at(reader: Reader, info: RunInfo, sid: int, target: int) -> tuple[Phase, tuple]:
    """(phase, indicative) of symbol ``sid`` after message ``target`` (module docstring): the
    newest checkpoint's state, then the symbol's events after it up to ``target``."""
    row = _checkpoint_row(reader, info, target)
    lo = int(row["seq"]) + 1
    last = reader.last_row("events", sid, seq=(lo, target), columns=["phase"]) \
        if target >= lo else None
    if last is None:
        return _checkpoint_phase(info, row, sid)
    phase = Phase(int(last["phase"]))
    if phase not in CALL_PHASES:
        return phase, _NO_INDICATIVE
    ev = read(reader, "events", symbol=sid, seq=(lo, target),
              columns=["event", "price", "filled_qty", "leaves_qty"])
    kinds = ev["event"]
    hit = np.flatnonzero((kinds == int(Event.INDICATIVE)) | (kinds == int(Event.PHASE)))
    if hit.size == 0:
        return phase, _checkpoint_phase(info, row, sid)[1]
    e = ev[hit[-1]]
    if int(e["event"]) == int(Event.PHASE):   # entering a call: none published yet
        return phase, _NO_INDICATIVE
    return phase, (int(e["price"]), int(e["filled_qty"]), int(e["leaves_qty"]))


def _book_at(reader: Reader, info: RunInfo, symbol, seq, ts, depth, l3) -> BookView:
    sid, name = resolve_symbol(info, symbol)
    target, target_ts = _target(reader, info, sid, seq, ts)
    phase, indicative = _phase_at(reader, info, sid, target)
    if l3:
        eng = restore(info, _checkpoint_row(reader, info, target))
        lo, hi = eng.seq + 1, target
        msgs = read(reader, "orders", symbol=sid, seq=(lo, hi)) if hi >= lo else None
        if msgs is not None and msgs.size:
            eng.process(strip_seq(msgs))
        levels = 1 << 62 if depth is None else int(depth)
        bids, asks = eng.depth(sid, levels=levels)
        return BookView(target, target_ts, bids, asks, eng.orders(sid), name, stops=eng.stops(sid),
                        phase=phase, indicative=indicative)
    ck_seq, bids, asks = _checkpoint_depth(reader, info, sid, target)
    lo, hi = ck_seq + 1, target
    if hi >= lo:
        # only the L2 blocks after the checkpoint are decoded (their zone maps), of 4 columns
        # (as columns: a structured copy of them would cost about what applying them does)
        u = read_columns(reader, "l2", symbol=sid, seq=(lo, hi),
                         columns=["side", "price", "qty", "count"])
        bids, asks = _apply_columns(bids, asks, u["side"], u["price"], u["qty"], u["count"],
                                    depth)
    else:
        bids, asks = _apply_columns(bids, asks, *(np.zeros(0, np.int64),) * 4, depth)
    return BookView(target, target_ts, bids, asks, None, name, phase=phase, indicative=indicative)
