"""``rerun``: feed a run's journaled orders to a fresh Engine and compare every output byte.

The engine starts from the run's first checkpoint (the exact state the run began in: options,
symbols, counters and any books it already held), then processes the stored orders in seq
order, range by range. Its fills, L2 updates and order events are compared with the stored
ones in one of two ways (``RerunReport.mode``):
- "digest" (when every sealed output segment after the first checkpoint carries a row digest,
  store/digest.py): the engine's rows are split per (table, symbol) and hashed in seq order,
  each running digest closing at the next stored segment's row count and compared with the
  digest the seal (or compaction) recorded for that segment. The stored outputs are not
  decoded: only the orders are, while each output segment file's checksums (footer, index,
  every block's CRC32C) are checked on the stored bytes. A segment whose rows differ passes
  with probability 2^-128 (xxh3_128). The WAL tail after the last seal is compared row by row.
  Any difference (a digest, a row count, a checkpoint) or a damaged or missing file stops this
  pass and the run is compared again row by row from its start, so the report (or the
  CorruptionError) is exactly the row-by-row one.
  What it proves: the engine reproduces the rows that were sealed, and the files holding them
  are intact. Not re-derived: that the intact files decode to those rows (the seal's own
  correctness, which the store's tests and ``compare="rows"`` cover).
- "rows": per range, every field of every row (every stored byte) is compared with the decoded
  stored rows of the same seq range. Used for runs sealed before digests, runs with segments
  that predate columns of their table, and with ``compare="rows"``. A field the stored file
  predates (the event price and phase of a run journaled before trading phases: read as 0,
  ``store.tables.Columns.lacking``) is not compared: the run never recorded it.
At the last stored checkpoint (every one with ``checkpoints="all"``) the engine's state is
compared with the stored checkpoint's bytes, in both modes.

How it keeps up with the engine: a reader thread does the store's work while the engine matches.
- Ranges start at chunk/32 and grow by a quarter up to ``chunk`` (the first read is the one
  nothing overlaps), and end at segment boundaries (each segment is decoded once) and at every
  compared checkpoint.
- The reader decodes range k+1 into one of two reused order buffers (in rows mode also the
  stored outputs, as column blocks from ``store.iter_columns``: no rows assembled) and reads
  and checks the stored checkpoint the range ends at, while the engine (which releases the
  GIL) matches range k. In digest mode the reader also hashes range k-1's outputs (~14 GB/s)
  while the engine writes range k into the other of two output sets (``Engine.process(out=)``).
- Outputs are compared column by column with the stored blocks in a nogil kernel. While ranges
  grow the engine writes fresh output arrays and the reader compares them; full-size ranges
  are written into one reused OutputBuffers set (``process(out=)``) and compared on the
  engine's thread before the next range overwrites them.
- At a compared checkpoint the engine's state is compared in place (``Engine.checkpoint_equals``)
  instead of serialising a checkpoint; see ``_same_state``.

Invariants:
- ``ok`` is True only if every stored output row of every table equals the rerun's, row for row
  (in digest mode: every segment's digest and row count equal the rerun's), the row counts
  agree, and every compared checkpoint equals the rerun engine's checkpoint.
- ``first_divergence`` is the divergence with the smallest seq (ties: fills, l2, events order;
  a range's outputs before the checkpoint it ends at): ranges are settled in order, comparing
  stops at the range where it was found, and ``counts`` then cover the ranges before it plus
  that range.

Limit: batching does not change outputs (an engine invariant), so range sizes are free. Memory
is bounded by a few ranges (``chunk`` messages, default 1M; a range ends at a segment boundary,
so it can reach 2x that): two order buffers, the engine's output buffers and the stored outputs
of up to three ranges; 1.14 GB peak RSS on the 10 M-message one-symbol bench run (2 M live
orders at the end; 1.2 GB for the rerun it replaced).
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from exsim.exchange.errors import CorruptionError, StoreError, UsageError
from exsim.exchange.engine import OutputBuffers
from exsim.exchange.schema import ORDER_DTYPE
from numba import njit

from exsim.store import Reader, iter_columns, read_checkpoint
from exsim.store.digest import RowDigest, by_symbol, is_digest
from exsim.store.segment import check_registered
from exsim.store.tables import table_dtype

from exsim.replay.rundir import (RunInfo, checkpoint_row, load_checkpoint,
                     output_segments, restore, run_info, segment_cuts)

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


@dataclass(repr=False)
class RerunReport:
    """Result of ``rerun``: ok, rows compared per table, the first divergence (or None).

    ``mode`` says how the sealed outputs were compared: "digest" (the rerun's rows hashed per
    stored segment and compared with the digests recorded at seal time) or "rows" (column by
    column with the decoded stored rows). ``fallback`` says why "rows" was used ("" in digest
    mode): digests missing (a run sealed before them), ``compare="rows"`` asked for, or a digest
    pass that found a difference, after which the run was compared row by row from its start
    to report the first diverging seq and both rows.
    """

    def __repr__(self) -> str:
        """One line: what a notebook or a log shows (the arrays are summarised)."""
        from exsim.replay import reprs
        return reprs.rerun_report_repr(self)

    def _repr_html_(self) -> str:
        from exsim.replay import reprs
        return reprs.rerun_report_html(self)

    ok: bool
    counts: dict = field(default_factory=dict)
    first_divergence: Divergence | None = None
    seconds: float = 0.0
    mode: str = "rows"
    fallback: str = ""


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
    """Index of the first row where the stored column blocks and the engine rows differ, in
    the columns each block's file holds (a block's ``lacking`` columns, read as 0 from a file
    written before they existed, are not compared)."""
    names = set(mine.dtype.names or ())
    pos = 0
    for cols in blocks:
        if set(cols) != names or any(mine.dtype.fields[c][0] != a.dtype for c, a in cols.items()):
            return pos
        n = next(iter(cols.values())).size
        part = mine[pos:pos + n]
        first = -1
        skip = getattr(cols, "lacking", ())
        for c, a in cols.items():
            if c in skip:
                continue
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


def _plan(start: int, last: int, chunk: int, must: set, cuts) -> list[tuple[int, int]]:
    """Inclusive seq ranges covering start+1..last, in order.

    The first range aims at chunk/32 messages, each next one at a quarter more than the one
    before, up to ``chunk``. Why: the first range's read is the one nothing overlaps, so it is
    kept short, and while ranges grow the reader (about 0.8 of the engine's time per message)
    must read range k+1 in the time the engine matches range k: growing by 2x would make the
    engine wait for it, a quarter does not. (chunk/32 against chunk/8, the stored 2 M bench
    run, 11 alternating rounds: rerun / engine 0.779 against 0.705; chunk/64 0.750.) A range ends at a ``must`` seq (a compared
    checkpoint) when it reaches one; otherwise at the first segment cut (``cuts``: seqs no
    stored segment straddles) at or after its target, within 2x of its size, else the last one
    before it from half its size, else at the target itself (so no segment is decoded for two
    ranges).
    """
    cuts = np.asarray(sorted(c for c in cuts if start < c < last), np.int64)
    stops = sorted(m for m in must if start < m < last) + [last]
    out, pos, size, mi = [], start, max(1, chunk >> 5), 0
    while pos < last:
        while stops[mi] <= pos:
            mi += 1
        target = pos + size
        if stops[mi] <= target:
            hi = stops[mi]
        else:
            i = int(np.searchsorted(cuts, target, "left"))
            if i < cuts.size and cuts[i] <= min(pos + 2 * size, stops[mi]):
                hi = int(cuts[i])
            elif i > 0 and cuts[i - 1] >= pos + max(1, size // 2):
                hi = int(cuts[i - 1])
            else:
                hi = target
        out.append((pos + 1, hi))
        size = min(chunk, max(size, hi - pos) + max(1, (hi - pos) // 4))
        pos = hi
    return out


def rerun(data_dir, *, progress: bool = False, chunk: int = 1_000_000,
          checkpoints: str = "last", compare: str = "auto") -> RerunReport:
    """Re-run the stored orders through a fresh Engine; return a RerunReport.

    ``checkpoints``: which stored checkpoints to compare with the rerun engine's own: "last"
    (the run's final state, the default), "all" (each one; costly for large books, since the
    engine serialises its whole book each time) or "none".
    ``compare``: "auto" (the default) compares the sealed outputs by digest when every output
    segment after the first checkpoint has one, row by row otherwise; "rows" always compares
    row by row. Either way the report of a divergence is the row-by-row one (see RerunReport).
    Raises UsageError for chunk < 1 or an unknown ``checkpoints`` or ``compare`` value,
    StoreError if ``data_dir`` is not a data directory or its orders table misses messages,
    CorruptionError if a stored file it reads fails its checksum.
    """
    if chunk < 1:
        raise UsageError(f"chunk must be >= 1; got {chunk}")
    if checkpoints not in ("last", "all", "none"):
        raise UsageError(f"checkpoints must be 'last', 'all' or 'none'; got {checkpoints!r}")
    if compare not in ("auto", "rows"):
        raise UsageError(f"compare must be 'auto' or 'rows'; got {compare!r}")
    t0 = time.perf_counter()
    data_dir = os.fspath(data_dir)
    info = run_info(data_dir)
    eng = load_checkpoint(info, info.first_seq)
    start = eng.seq
    ck_seqs = {"all": set(info.checkpoints), "none": set(),
               "last": {info.checkpoints[-1]}}[checkpoints]
    ck_seqs = {c for c in ck_seqs if c > start}
    plan = _plan(start, info.last_seq, chunk, ck_seqs, segment_cuts(info, "orders"))
    through, found = (_digest_zone(info, start) if compare == "auto"
                      else (start, "compare='rows' asked for"))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=info.last_seq - info.first_seq, unit="msg", unit_scale=True,
                   desc="rerun")
    try:
        if through > start:
            digests = _SegmentDigests(found)
            try:
                counts, divergence, problem = _pipeline(info, eng, _split_at(plan, through),
                                                        ck_seqs, bar, digests, through)
            except (CorruptionError, FileNotFoundError) as e:
                # why not raised here: an earlier range may hold a divergence the digests
                # have not closed on yet; the row-by-row pass reports whichever comes first
                divergence, problem = None, f"the digest pass met a damaged or missing file: {e}"
            if divergence is None and problem is None:
                return RerunReport(True, counts, None, time.perf_counter() - t0, "digest")
            # why from the start: the digest pass knows which segment differs, not which row;
            # the row-by-row pass reports exactly what it always has (its first divergence and
            # counts), at the price of matching the run's beginning twice, on failure only
            found = problem or (f"the digest pass met a divergence ({divergence.table} at seq "
                                f"{divergence.seq}); compared row by row from the start")
            eng = load_checkpoint(info, info.first_seq)
            if bar is not None:
                bar.reset()
        counts, divergence, _ = _pipeline(info, eng, plan, ck_seqs, bar)
    finally:
        if bar is not None:
            bar.close()
    return RerunReport(divergence is None, counts, divergence, time.perf_counter() - t0, "rows",
                       found)


def _split_at(plan: list, seq: int) -> list:
    """``plan`` with the range holding both ``seq`` and ``seq + 1`` cut in two after ``seq``."""
    out = []
    for lo, hi in plan:
        out += [(lo, seq), (seq + 1, hi)] if lo <= seq < hi else [(lo, hi)]
    return out


def _digest_zone(info: RunInfo, start: int) -> tuple[int, object]:
    """(last seq whose outputs can be compared by digest, {(table, symbol): segments}), or
    (``start``, why not) when no seq after ``start`` can.

    Seqs start+1..sealed_through qualify when every output segment holding any of them lies
    wholly after ``start`` and carries a digest; the WAL tail after them is compared row by row.
    """
    got = output_segments(info, OUTPUT_TABLES)
    if got is None:
        return start, "the catalog changed while it was read (a live writer)"
    sealed, segs = got
    through = min(sealed, info.last_seq)
    if through <= start:
        return start, "no output sealed after the first checkpoint"
    keep = {}
    for key, rows in segs.items():
        rows = [r for r in rows if int(r["seq_hi"]) > start]
        for r in rows:
            if int(r["seq_lo"]) <= start or int(r["seq_hi"]) > through:
                return start, f"segment {r['path']} straddles seq {start} or {through}"
            if not is_digest(r.get("digest") or ""):
                return start, (f"segment {r['path']} has no row digest (sealed before digests "
                               f"were recorded)")
            if _predates_columns(r):
                return start, (f"segment {r['path']} predates columns of its table (its digest "
                               f"covers fewer fields than the rerun's rows)")
        keep[key] = deque(rows)
    return through, keep


def _predates_columns(row: dict) -> bool:
    """Whether the catalog ``row``'s segment lacks a column its table has today (its
    ``encodings`` name the columns it holds; unreadable encodings count as lacking)."""
    try:
        held = set(json.loads(row.get("encodings") or "{}"))
    except (TypeError, ValueError):
        return True
    return not set(table_dtype(row["table_name"]).names) <= held


class _SegmentDigests:
    """Running digests of the rerun's output rows per (table, symbol), each closed where the
    next stored segment of that table and symbol ends (its row count) and compared with the
    digest recorded for it. ``feed`` and ``finish`` return None, or why the rows differ.
    ``files(lo, hi)``: the catalog rows of the segments starting in seq lo..hi, whose stored
    bytes the reader checks (their checksums, and their index against the row) in that range."""

    def __init__(self, segments: dict):
        self.todo = segments       # (table, symbol) -> deque of catalog rows, by seq
        self.open = {}             # (table, symbol) -> (RowDigest, its catalog row)
        starts = sorted(((int(r["seq_lo"]), r) for q in segments.values() for r in q),
                        key=lambda t: t[0])
        self._lo = np.array([lo for lo, _ in starts], np.int64)
        self._rows = [r for _, r in starts]

    def files(self, lo: int, hi: int) -> list:
        a = int(np.searchsorted(self._lo, lo, side="left"))
        return self._rows[a:int(np.searchsorted(self._lo, hi, side="right"))]

    def feed(self, table: str, rows: np.ndarray) -> str | None:
        for sym, part in by_symbol(rows):
            key = (table, sym)
            while part.size:
                if key not in self.open:
                    queue = self.todo.get(key)
                    if not queue:
                        return (f"the rerun has {table} rows of symbol {sym} from seq "
                                f"{int(part['seq'][0])} on, past its stored segments")
                    self.open[key] = (RowDigest(table), queue.popleft())
                digest, seg = self.open[key]
                take = min(part.size, int(seg["rows"]) - digest.rows)
                digest.update(part[:take])
                part = part[take:]
                if digest.rows == int(seg["rows"]):
                    del self.open[key]
                    if digest.hexdigest() != seg["digest"]:
                        return (f"{table} segment {seg['path']} (seq {seg['seq_lo']}.."
                                f"{seg['seq_hi']}): the rerun's rows have another digest")
        return None

    def finish(self) -> str | None:
        for (table, _), (digest, seg) in self.open.items():
            return (f"{table} segment {seg['path']}: the rerun has {digest.rows} of its "
                    f"{seg['rows']} rows")
        for (table, _), queue in self.todo.items():
            if queue:
                return f"{table} segment {queue[0]['path']}: the rerun has none of its rows"
        return None


def _pipeline(info: RunInfo, eng, plan: list, ck_seqs: set, bar, digests=None,
              through: int = 0) -> tuple[dict, object, str | None]:
    """Run ``plan``'s ranges through ``eng`` and compare; return (counts, first Divergence,
    None or why the digests differ).

    With ``digests`` (a _SegmentDigests), ranges ending at or before ``through`` (a range end)
    are compared by digest: the reader decodes only their orders and, after loading the next
    range, hashes this range's outputs; a digest difference stops the pass. Later ranges, and
    every range without ``digests``, are compared row by row as follows.

    The reader thread runs, in submission order: load range k+1 (and the stored checkpoint
    it ends at), then the compare of range k when its outputs are fresh arrays; the engine
    thread matches range k meanwhile and compares full-size ranges itself. By the time range
    k's orders are loaded the reader has finished everything submitted before, so the order
    buffer of range k-1 is free for range k+1. Ranges are settled in order, so the reported
    divergence is the first one.

    Digest mode: the engine's outputs alternate between two OutputBuffers sets (range k
    writes set k % 2, ``process(out=)``), so the reader hashes range k's outputs while the
    engine matches range k+1 into the other set; by the same argument set k % 2 is hashed
    before range k+2 overwrites it. Both sets are sized for the widest range up front, so the
    short first ranges use them too.
    """
    data_dir = info.data_dir
    counts = {"orders": 0, "fills": 0, "l2": 0, "events": 0, "checkpoints": 0}
    # why two order buffers: the reader fills one while the engine matches the other, and
    # neither is allocated (nor page-faulted) per range
    width = max((hi - lo + 1 for lo, hi in plan), default=0)
    buffers = (np.zeros(width, ORDER_DTYPE), np.zeros(width, ORDER_DTYPE))
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerun-read")
    # one Reader keeps the catalog snapshot and open segments across ranges (pool thread only)
    reader = pool.submit(Reader, data_dir).result()   # its sqlite connection lives on that thread
    pending = []                 # (range index, compare future, checkpoint Divergence or None)

    def load(k):
        lo, hi = plan[k]
        by_rows = digests is None or hi > through
        loaded = pool.submit(_load, data_dir, lo, hi, buffers[k % 2], by_rows,
                             () if by_rows else digests.files(lo, hi), reader)
        ck = pool.submit(_stored_checkpoint, data_dir, hi) if hi in ck_seqs else None
        return loaded, ck

    def settle(upto: int):
        """Take the outcome of the ranges <= upto, in order; return the first Divergence (or,
        in digest mode, the str saying which digest differs)."""
        while pending and pending[0][0] <= upto:
            k, compared, ck_div = pending.pop(0)
            stored_rows, div = compared.result()
            lo, hi = plan[k]
            counts["orders"] += hi - lo + 1
            for name in OUTPUT_TABLES:
                counts[name] += stored_rows[name]
            if div is None and ck_div is not False:
                counts["checkpoints"] += 1
                div = ck_div
            if bar is not None:
                bar.update(hi - lo + 1)
            if div is not None:
                return div
        return None

    divergence, reuse = None, False
    # why two output sets: the reader hashes one range's outputs while the engine writes the
    # next. Sized up front for the widest range: the short first ranges would otherwise get
    # fresh arrays (a page fault per 4 KiB written: 5% of the engine's time on the 10 M bench
    # run, interleaved)
    swap = digests is not None
    outsets = [OutputBuffers(width) for _ in range(2 if swap else 1)]
    try:
        ahead = load(0) if plan else None
        for k, (lo, hi) in enumerate(plan):
            loaded, ck = ahead
            orders, stored = loaded.result()
            # the reader has run everything submitted before load(k), the compare of k-2 too
            divergence = settle(k - 2)
            if divergence is not None:
                break
            ahead = load(k + 1) if k + 1 < len(plan) else None
            # why fresh outputs while ranges ramp up (rows mode): the compare of a fresh range
            # runs on the reader, overlapping the engine; from the first full-size range on
            # the reused set is compared here (see below)
            reuse = reuse or orders.size == width or swap
            res = eng.process(orders, out=outsets[k % len(outsets)] if reuse else None)
            mine = {name: getattr(res, name) for name in OUTPUT_TABLES}
            if stored is None:   # digest mode, so swap: the outputs are intact until range k+2
                compared = pool.submit(_digest_range, digests, mine, hi == through)
            elif reuse:
                # why here: the next range overwrites these buffers. Handing
                # the compare to the reader would need a copy of them; measured on the shared
                # 2-core machine that was slower (copy, and the engine slowed by the reader's
                # extra memory traffic: 18.2 s vs 17.0 s on 10 M messages, interleaved)
                compared = Future()
                compared.set_result(_compare_range(stored, mine))
            else:
                compared = pool.submit(_compare_range, stored, mine)   # fresh outputs
            ck_div = False       # False: no checkpoint compared at the end of this range
            if ck is not None:
                ck_div = _compare_checkpoint(info, eng, hi, ck.result())
            pending.append((k, compared, ck_div))
            if ck_div or (compared.done() and compared.result()[1] is not None):
                break            # found here: later ranges cannot come first
        if divergence is None:
            divergence = settle(len(plan))
    finally:
        pool.submit(reader.close).result()
        pool.shutdown(wait=True, cancel_futures=True)
    if isinstance(divergence, str):   # a digest differs: the caller compares row by row
        return counts, None, divergence
    return counts, divergence, None


def _digest_range(digests, mine: dict, last: bool) -> tuple[dict, str | None]:
    """(rerun row count per table, None or why a digest differs) for one range's outputs fed
    to ``digests`` (a _SegmentDigests); ``last``: the range ends the digest zone."""
    for name in OUTPUT_TABLES:
        problem = digests.feed(name, mine[name])
        if problem is not None:
            return {n: mine[n].size for n in OUTPUT_TABLES}, problem
    return {n: mine[n].size for n in OUTPUT_TABLES}, digests.finish() if last else None


def _compare_range(stored: dict, mine: dict) -> tuple[dict, Divergence | None]:
    """(stored or rerun row count per table, whichever is larger; first Divergence or None)."""
    rows = {name: max(sum(b["seq"].size for b in stored[name]), mine[name].size)
            for name in OUTPUT_TABLES}
    return rows, compare_columns(stored, mine)


_ROWS_PER_COPY = 16_384   # rows per field copy: the destination rows (45 B each) stay in L2


def _load(data_dir: str, lo: int, hi: int, buf: np.ndarray, outputs: bool = True,
          check=(), source=None) -> tuple[np.ndarray, dict | None]:
    """The orders of seq lo..hi as an engine batch (a view of ``buf``), and the stored outputs
    as column blocks (None unless ``outputs``). ``check``: catalog rows of segments whose files
    are checked without decoding them (digest mode: checksums, and the file's index against the
    row, ``store.segment.check_registered``). Raises StoreError if the orders
    table lacks one of those seqs, CorruptionError if a file fails a check."""
    for row in check:
        check_registered(data_dir, row)
    source = source or data_dir   # a Reader over data_dir, or the path
    blocks = list(iter_columns(source, "orders", seq=(lo, hi)))
    n = sum(b["seq"].size for b in blocks)
    if n != hi - lo + 1 or (n and (blocks[0]["seq"][0] != lo or blocks[-1]["seq"][-1] != hi)):
        raise StoreError(f"{data_dir}: the orders table holds {n} messages for "
                         f"seq {lo}..{hi}; a journaled run has every seq exactly once")
    orders = buf[:n]
    dest = [(orders[name], name) for name in ORDER_DTYPE.names]
    pos = 0
    for b in blocks:
        k = b["seq"].size
        # why in slices of rows: each field copy writes every row's cache line; copying all
        # fields of a slice that fits in cache before the next one touches each line once
        for s in range(0, k, _ROWS_PER_COPY):
            e = min(s + _ROWS_PER_COPY, k)
            for d, name in dest:
                d[pos + s:pos + e] = b[name][s:e]
        pos += k
    if not outputs:
        return orders, None
    stored = {name: list(iter_columns(source, name, seq=(lo, hi))) for name in OUTPUT_TABLES}
    return orders, stored


def _stored_checkpoint(data_dir: str, seq: int) -> bytes:
    """The stored checkpoint at ``seq`` (file checks passed). Raises StoreError if no
    checkpoint is registered at exactly ``seq``."""
    got, blob = read_checkpoint(data_dir, seq)
    if got != seq:
        raise StoreError(f"{data_dir}: no checkpoint at seq {seq} (newest before it: {got})")
    return blob


def _same_state(eng, blob: bytes) -> bool:
    """Whether ``eng.checkpoint()`` returns exactly ``blob``.

    Why not just call it: for a large book it copies the rows four times into fresh memory
    (0.5 s at 2 M live orders, after the last message, where nothing overlaps it), while
    ``Engine.checkpoint_equals`` checks the stored rows in place against the live orders
    (0.17 s); every engine has it (``exchange.EngineProtocol``).
    """
    return eng.checkpoint_equals(blob)


def _compare_checkpoint(info: RunInfo, eng, seq: int, stored: bytes) -> Divergence | None:
    # why bytes first: restoring a large book costs far more than comparing it; the stored
    # engine is only rebuilt to name the two state hashes of a divergence
    if _same_state(eng, stored):
        return None
    return Divergence("checkpoint", seq, restore(info, checkpoint_row(info, seq)).state_hash(),
                      eng.state_hash())
