"""``rerun``: feed a run's journaled orders to a fresh Engine and compare every output byte.

The engine starts from the run's first checkpoint (the exact state the run began in: options,
symbols, counters and any books it already held), then processes the stored orders in seq
order, in chunks that end at each compared checkpoint. Per chunk, its fills, L2 updates and order
events are compared field by field, i.e. every stored byte, with the stored rows of the same seq
range; at the last stored checkpoint (every one with ``checkpoints="all"``) the engine's own
checkpoint bytes are compared with the stored ones.

How it keeps up with the engine: the store is read column by column (``store.read_columns``), so
no stored output row is ever assembled; each column is compared whole with the engine's field
(a memcmp-speed check) and rows are only looked at once a column differs. A worker thread reads
and decodes the next chunk while the engine (which releases the GIL) processes the current one.

Invariants:
- ``ok`` is True only if every stored output row of every table equals the rerun's, row for row,
  the row counts agree, and every compared checkpoint equals the rerun engine's checkpoint.
- ``first_divergence`` is the divergence with the smallest seq (ties: fills, l2, events order);
  comparing stops at the chunk where it was found, so ``counts`` then cover the chunks before it
  plus that chunk.

Limit: batching does not change outputs (an engine invariant), so chunk sizes are free; memory is
bounded by two chunks of every table (``chunk`` messages, default 1M: the one being checked and
the one being read ahead).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from exchange.errors import StoreError, UsageError
from exchange.schema import ORDER_DTYPE
from numba import njit

from store import iter_columns, read_checkpoint

from ._store import RunInfo, load_checkpoint, restore, checkpoint_row, run_info

__all__ = ["RerunReport", "Divergence", "rerun", "compare_outputs", "compare_columns"]

OUTPUT_TABLES = ("fills", "l2", "events")


@dataclass
class Divergence:
    """Where the rerun first differs from the store.

    ``table`` is "fills", "l2", "events" or "checkpoint". For tables the rows are numpy records
    (None where one side has no row at that position); for "checkpoint" they are the stored and
    the rerun engine's state hashes.
    """

    table: str
    seq: int
    stored_row: object
    rerun_row: object


@dataclass
class RerunReport:
    """Result of ``rerun``: ok, rows compared per table, the first divergence (or None)."""

    ok: bool
    counts: dict = field(default_factory=dict)
    first_divergence: Divergence | None = None
    seconds: float = 0.0


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two contiguous arrays hold identical bytes (compared 8 bytes at a time)."""
    x, y = a.view(np.uint8).reshape(-1), b.view(np.uint8).reshape(-1)
    if x.size != y.size:
        return False
    k = x.size & ~7
    return bool(np.array_equal(x[:k].view(np.uint64), y[:k].view(np.uint64))
                and np.array_equal(x[k:], y[k:]))


def _first_diff(stored: np.ndarray, mine: np.ndarray) -> int | None:
    """Index of the first row whose bytes differ (or where one side ends), None if equal."""
    n = min(stored.size, mine.size)
    if stored.dtype != mine.dtype:
        return 0
    if stored.size == mine.size and _same_bytes(stored, mine):
        return None   # the common case, without a per-row temporary
    a = stored[:n].view(np.uint8).reshape(n, stored.dtype.itemsize)
    b = mine[:n].view(np.uint8).reshape(n, mine.dtype.itemsize)
    bad = np.flatnonzero((a != b).any(axis=1)) if n else np.zeros(0, np.int64)
    if bad.size:
        return int(bad[0])
    return None if stored.size == mine.size else n


def compare_outputs(stored: dict, mine: dict) -> Divergence | None:
    """Compare tables (name -> array) of the store with a rerun's; return the first Divergence.

    Both dicts map "fills", "l2", "events" to arrays of the same seq range. Returns None when
    every table is byte-identical.
    """
    found = []
    for name in OUTPUT_TABLES:
        s, m = np.ascontiguousarray(stored[name]), np.ascontiguousarray(mine[name])
        i = _first_diff(s, m)
        if i is None:
            continue
        # copies: a rerun row is a view into a buffer the engine reuses
        srow = s[i:i + 1].copy()[0] if i < s.size else None
        mrow = m[i:i + 1].copy()[0] if i < m.size else None
        seq = int((srow if srow is not None else mrow)["seq"])
        if srow is not None and mrow is not None:
            seq = min(int(srow["seq"]), int(mrow["seq"]))
        found.append(Divergence(name, seq, srow, mrow))
    return min(found, key=lambda d: d.seq) if found else None


@njit(cache=True, nogil=True)
def _first_neq(a, b):
    """Index of the first i with a[i] != b[i] over the common length, or -1 (b may be strided)."""
    for i in range(min(a.size, b.size)):
        if a[i] != b[i]:
            return i
    return -1


def _first_diff_blocks(blocks: list, mine: np.ndarray) -> int | None:
    """Index of the first row where the stored column blocks and the engine rows differ."""
    names = set(mine.dtype.names or ())
    pos = 0
    for cols in blocks:
        if set(cols) != names or any(mine.dtype.fields[c][0] != a.dtype for c, a in cols.items()):
            return pos
        n = next(iter(cols.values())).size
        part = mine[pos:pos + n]
        first = -1
        for c, a in cols.items():
            # why a kernel: one pass over both, no temporaries, and without the GIL so the
            # read-ahead thread keeps decoding meanwhile
            k = _first_neq(a, part[c])
            if k >= 0 and (first < 0 or k < first):
                first = k
        if first >= 0:
            return pos + first
        if part.size < n:
            return pos + part.size
        pos += n
    return None if pos == mine.size else pos


def _row(blocks: list, dtype: np.dtype, i: int):
    """Row ``i`` of the stored column blocks as a numpy record of ``dtype`` (None past the end)."""
    for cols in blocks:
        n = next(iter(cols.values())).size
        if i < n:
            row = np.zeros(1, dtype)
            for c, a in cols.items():
                if c in (dtype.names or ()):
                    row[c] = a[i]
            return row[0]
        i -= n
    return None


def compare_columns(stored: dict, mine: dict) -> Divergence | None:
    """``compare_outputs`` with the stored side given as column blocks.

    ``stored`` maps "fills", "l2", "events" to a list of {column: 1-D array} blocks in seq order
    (as ``store.iter_columns`` yields them, every column of the table); ``mine`` maps them to
    the engine's structured arrays of the same seq range. Returns the first Divergence (rows as
    numpy records, copied), or None when every value of every table is equal.
    """
    found = []
    for name in OUTPUT_TABLES:
        blocks, m = stored[name], mine[name]
        i = _first_diff_blocks(blocks, m)
        if i is None:
            continue
        srow = _row(blocks, m.dtype, i)
        mrow = m[i:i + 1].copy()[0] if i < m.size else None   # copy: the engine reuses m
        seq = int((srow if srow is not None else mrow)["seq"])
        if srow is not None and mrow is not None:
            seq = min(int(srow["seq"]), int(mrow["seq"]))
        found.append(Divergence(name, seq, srow, mrow))
    return min(found, key=lambda d: d.seq) if found else None


def _chunks(info: RunInfo, start: int, chunk: int, ck_seqs: set) -> list[tuple[int, int]]:
    cuts = {c for c in ck_seqs if start < c <= info.last_seq}
    cuts |= set(range(start + chunk, info.last_seq, chunk))
    cuts.add(info.last_seq)
    bounds = [start] + sorted(cuts)
    return [(lo + 1, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def rerun(data_dir, *, progress: bool = False, chunk: int = 1_000_000,
          checkpoints: str = "last") -> RerunReport:
    """Re-run the stored orders through a fresh Engine; return a RerunReport.

    ``checkpoints``: which stored checkpoints to compare with the rerun engine's own: "last"
    (the run's final state, the default), "all" (each one; costly for large books, since the
    engine serialises its whole book each time) or "none".
    Raises UsageError for chunk < 1 or an unknown ``checkpoints`` value, StoreError if ``data_dir`` is not a data directory or its
    orders table misses messages, CorruptionError if a stored file fails its checksum.
    """
    if chunk < 1:
        raise UsageError(f"chunk must be >= 1; got {chunk}")
    if checkpoints not in ("last", "all", "none"):
        raise UsageError(f"checkpoints must be 'last', 'all' or 'none'; got {checkpoints!r}")
    t0 = time.perf_counter()
    data_dir = os.fspath(data_dir)
    info = run_info(data_dir)
    eng = load_checkpoint(info, info.first_seq)
    counts = {"orders": 0, "fills": 0, "l2": 0, "events": 0, "checkpoints": 0}
    ck_seqs = {"all": set(info.checkpoints), "none": set(),
               "last": {info.checkpoints[-1]}}[checkpoints]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=info.last_seq - info.first_seq, unit="msg", unit_scale=True,
                   desc="rerun")
    divergence = None
    chunks = _chunks(info, eng.seq, chunk, ck_seqs)
    # why a thread: decoding the next chunk (numpy, lz4 and numba decoders) runs while the
    # engine, which releases the GIL, matches the current one; on two free cores the read
    # costs little more than the engine's own time
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerun-read")
    try:
        ahead = pool.submit(_load, data_dir, *chunks[0]) if chunks else None
        for k, (lo, hi) in enumerate(chunks):
            orders, stored = ahead.result()
            ahead = pool.submit(_load, data_dir, *chunks[k + 1]) if k + 1 < len(chunks) else None
            # why reuse: the outputs are views into buffers the engine keeps; they are compared
            # and dropped before the next chunk, so no chunk pays for allocation or page faults
            res = eng.process(orders, reuse=True)
            mine = {"fills": res.fills, "l2": res.l2, "events": res.events}
            counts["orders"] += orders.size
            for name in OUTPUT_TABLES:
                counts[name] += max(sum(b["seq"].size for b in stored[name]), mine[name].size)
            divergence = compare_columns(stored, mine)
            if divergence is None and hi in ck_seqs:
                divergence = _compare_checkpoint(info, eng, hi)
                counts["checkpoints"] += 1
            if bar is not None:
                bar.update(hi - lo + 1)
            if divergence is not None:
                break
    finally:
        if bar is not None:
            bar.close()
        pool.shutdown(wait=True, cancel_futures=True)
    return RerunReport(divergence is None, counts, divergence, time.perf_counter() - t0)


def _load(data_dir: str, lo: int, hi: int) -> tuple[np.ndarray, dict]:
    """The orders of seq lo..hi as an engine batch, and the stored outputs as column blocks."""
    blocks = list(iter_columns(data_dir, "orders", seq=(lo, hi)))
    n = sum(b["seq"].size for b in blocks)
    if n != hi - lo + 1 or (n and (blocks[0]["seq"][0] != lo or blocks[-1]["seq"][-1] != hi)):
        raise StoreError(f"{data_dir}: the orders table holds {n} messages for "
                         f"seq {lo}..{hi}; a journaled run has every seq exactly once")
    orders = np.zeros(n, ORDER_DTYPE)
    pos = 0
    for b in blocks:
        k = b["seq"].size
        for name in ORDER_DTYPE.names:
            orders[name][pos:pos + k] = b[name]
        pos += k
    stored = {name: list(iter_columns(data_dir, name, seq=(lo, hi))) for name in OUTPUT_TABLES}
    return orders, stored


def _compare_checkpoint(info: RunInfo, eng, seq: int) -> Divergence | None:
    # why bytes first: restoring a large book costs far more than reading and comparing it;
    # the stored engine is only rebuilt to name the two state hashes of a divergence
    row = checkpoint_row(info, seq)
    if read_checkpoint(info.data_dir, seq)[1] == eng.checkpoint():
        return None
    return Divergence("checkpoint", seq, restore(info, row).state_hash(), eng.state_hash())
