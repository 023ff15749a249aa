"""``rerun``: feed a run's journaled orders to a fresh Engine and compare every output byte.

The engine starts from the run's first checkpoint (the exact state the run began in: options,
symbols, counters and any books it already held), then processes the stored orders in seq
order, in chunks that end at each compared checkpoint. Per chunk, its fills, L2 updates and order
events are compared byte for byte (padding included: both sides are zero-initialised) with the
stored rows of the same seq range; at the last stored checkpoint (every one with
``checkpoints="all"``) the engine's own checkpoint bytes are compared with the stored ones.

Invariants:
- ``ok`` is True only if every stored output row of every table equals the rerun's, row for row,
  the row counts agree, and every compared checkpoint equals the rerun engine's checkpoint.
- ``first_divergence`` is the divergence with the smallest seq (ties: fills, l2, events order);
  comparing stops at the chunk where it was found, so ``counts`` then cover the chunks before it
  plus that chunk.

Limit: batching does not change outputs (an engine invariant), so chunk sizes are free; memory is
bounded by one chunk of every table (``chunk`` messages, default 1M).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from exchange.errors import StoreError, UsageError
from store import read

from store.session import Session

from ._store import RunInfo, checkpoint_row, load_checkpoint, restore, run_info, strip_seq

__all__ = ["RerunReport", "Divergence", "rerun", "compare_outputs"]

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
    try:
        for lo, hi in _chunks(info, eng.seq, chunk, ck_seqs):
            orders = read(data_dir, "orders", seq=(lo, hi))
            if orders.size != hi - lo + 1 or (orders.size and (orders["seq"][0] != lo
                                                               or orders["seq"][-1] != hi)):
                raise StoreError(f"{data_dir}: the orders table holds {orders.size} messages for "
                                 f"seq {lo}..{hi}; a journaled run has every seq exactly once")
            # why reuse: the outputs are views into buffers the engine keeps; they are compared
            # and dropped before the next chunk, so no chunk pays for allocation or page faults
            res = eng.process(strip_seq(orders), reuse=True)
            mine = {"fills": res.fills, "l2": res.l2, "events": res.events}
            stored = {name: read(data_dir, name, seq=(lo, hi)) for name in OUTPUT_TABLES}
            counts["orders"] += orders.size
            for name in OUTPUT_TABLES:
                counts[name] += max(stored[name].size, mine[name].size)
            divergence = compare_outputs(stored, mine)
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
    return RerunReport(divergence is None, counts, divergence, time.perf_counter() - t0)


def _compare_checkpoint(info: RunInfo, eng, seq: int) -> Divergence | None:
    # why bytes first: restoring a large book costs far more than reading and comparing it;
    # the stored engine is only rebuilt to name the two state hashes of a divergence
    row = checkpoint_row(info, seq)
    if Session._read_checkpoint(info.data_dir, row) == eng.checkpoint():
        return None
    return Divergence("checkpoint", seq, restore(info, row).state_hash(), eng.state_hash())
