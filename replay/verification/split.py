"""Checking a stored run's seq ranges on several threads, with the report of one serial walk.

``replay.verify`` walks each symbol's messages in seq order through the verifier's own book. The
walk of a range needs the book the ranges before it left, so the ranges are checked ahead of
that book, speculatively:

- blocks: each symbol's seqs are cut into ``ceil(threads / symbols)`` blocks at stored
  checkpoints (as even as the checkpoints allow; one block when the run has none inside it), and
  the blocks of every symbol are checked on a pool of ``threads`` threads. The kernel releases
  the GIL; each thread reads its next range (on a read-ahead thread of its own, with a
  ``store.Reader`` of its own) while it checks this one.
- seeds: a symbol's first block starts from the empty book, as the serial walk does. A later
  block starts from a seed (``replay.verification.seed``): the book the checkpoint at its start
  holds and the symbol's last trade, message and ts before it, read from the stored tables.
- the fold: blocks are taken in order (symbols ascending, then seq). A later block's findings
  are kept only when the canonical form of the state the block before it ended in equals its
  seed's, so its checks saw exactly what the serial walk's would; otherwise (a defect the
  verifier re-synchronised to, a seed that could not be built, phase activity, a failed read)
  the block is checked again, serially, from the state the block before it ended in. Errors
  (a damaged segment, a failed checksum) are raised by that serial check, so the first one in
  the serial walk's order is the one raised.

So the report, its violations, their order and every count are those of one serial walk for
any thread count or checkpoint spacing; only the time changes. Memory: each thread holds at most
two read ranges (``chunk`` seqs of every table) and each finished block its end state until
the fold takes it.

Layering: a block's checks are a ``_Symbol`` (``replay.verification.symbol``) whose kernel state
takes the symbol's options through ``replay.verification.options.configure``; the run they fold
into is handed in (``check_stored``'s ``ctx_args``), so this module never imports
``replay.verification.run``, which imports it.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from exsim.exchange.checkpoint import parse as parse_checkpoint
from exsim.store import TABLES, Catalog, Reader, read, read_checkpoint

from exsim.replay.verification import seed as S
from exsim.replay.verification.book import (
    M_LAST_PX, M_LAST_SEQ, M_LAST_TRADE, M_PREV_TS, M_TRADED,
)
import exsim.replay.verification.kernel as K
from exsim.replay.verification.options import configure
from exsim.replay.verification.symbol import _Symbol

__all__ = ["check_stored", "blocks", "default_threads", "MAX_THREADS"]

MAX_THREADS = 8   # the default's cap: beyond it the fold and the store reads dominate
_WINDOW = 1 << 16   # seqs read back from a block's start for the symbol's last rows (doubling)


def default_threads() -> int:
    """Return the checking threads ``verify`` uses by default: the cores this process may use
    less one, at least 1 and at most MAX_THREADS.

    Why one less: the reader thread decoding the next range takes a core of its own. On the
    2-core VM two checking threads beside it made verify 0.83x as fast as one (bench_replay,
    10 M messages, docs/benchmarks.md Replay)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n - 1, MAX_THREADS))


def read_range(source, sid: int, lo: int, hi: int, reuse: dict | None = None) -> dict:
    """The four tables of symbol ``sid`` over seqs lo..hi from ``source`` (a path or a Reader).

    ``reuse``: {table: array} whose memory the rows may overwrite (``store.read``'s
    ``reuse``); each entry is replaced by the array its table's rows were written into, so the
    dict always holds the largest buffers read so far."""
    out = {}
    for n in TABLES:
        old = reuse.get(n) if reuse is not None else None
        out[n] = read(source, n, symbol=sid, seq=(lo, hi), reuse=old)
        if reuse is not None and (old is None or out[n].base is not old):
            reuse[n] = out[n]
    return out


def ranges(first: int, last: int, chunk: int) -> list[tuple[int, int]]:
    """Seq ranges covering first..last (inclusive), none longer than ``chunk``; [(1, 0)] when empty.

    Why they start short (chunk/16, doubling): the first range's read is the only one nothing
    overlaps (the kernel waits for it), so a short one lets checking start at once; from then on
    each read (of a range at most twice the one being checked) runs while the kernel works.
    """
    out, lo, size = [], first, max(chunk >> 4, 1)
    while lo <= last:
        hi = min(lo + size - 1, last)
        out.append((lo, hi))
        lo, size = hi + 1, min(2 * size, chunk)
    return out or [(1, 0)]


def blocks(first: int, last: int, cuts, n: int) -> list[tuple[int, int]]:
    """first..last cut into at most ``n`` blocks, each later one starting just after a seq of
    ``cuts`` (checkpoints), the cuts chosen nearest to even shares; [(first, last)] when no cut
    lies inside."""
    inside = sorted({int(c) for c in cuts if first <= int(c) < last})
    chosen: list[int] = []
    for t in range(1, n):
        target = first - 1 + (last - first + 1) * t / n
        options = [c for c in inside if not chosen or c > chosen[-1]]
        if not options:
            break
        best = min(options, key=lambda c: (abs(c - target), c))
        if best not in chosen:
            chosen.append(best)
    edges = [first - 1] + chosen + [last]
    return [(a + 1, b) for a, b in zip(edges, edges[1:])]


class _Feeder:
    """One read-ahead thread and the ``store.Reader`` it alone uses (a Reader is not
    thread-safe; its sqlite connection belongs to the thread that opened it)."""

    def __init__(self, data_dir: str):
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-read")
        self.reader = self.pool.submit(Reader, data_dir).result()

    def call(self, fn, *args):
        """``fn(reader, *args)`` on the read thread; its result (or its exception)."""
        return self.pool.submit(fn, self.reader, *args).result()

    def tables(self, sid: int, spans: list):
        """Yield the four tables of each seq span in turn, the next read running meanwhile.

        A span's rows are valid until the loop asks for the next but one: the reads take
        turns over two sets of buffers (span k+1 is read into the set span k-1 used while
        the caller checks span k), so fresh memory is paid for once per verify, not per span
        (a page fault per 4 KiB written: the first full-size spans of a 2 M-message run read
        1.3-1.5x faster without them)."""
        buffers: tuple[dict, dict] = ({}, {})
        ahead = self.pool.submit(read_range, self.reader, sid, *spans[0], buffers[0]) \
            if spans else None
        try:
            for k in range(len(spans)):
                t = ahead.result()
                ahead = self.pool.submit(read_range, self.reader, sid, *spans[k + 1],
                                         buffers[(k + 1) % 2]) if k + 1 < len(spans) else None
                yield t
        finally:
            if ahead is not None:      # a caller that stops early: let the read finish
                ahead.exception()

    def close(self) -> None:
        try:
            self.pool.submit(self.reader.close).result()
        finally:
            self.pool.shutdown(wait=True)


@dataclass
class _Job:
    sid: int
    lo: int
    hi: int
    first: bool            # the symbol's first block: starts from the empty book
    last: bool             # its last block: ends with the run-end checks


@dataclass
class _Done:
    """A block checked by a pool thread: its checker (None if it gave up), the canonical form
    of its seed and of its end state, the seqs and trade ids its rows hold."""

    sym: object = None
    seed_form: tuple | None = None
    end_form: tuple | None = None
    seqs: list = field(default_factory=list)
    trade_ids: list = field(default_factory=list)


class _Context:
    """What every block of one verify shares: the run, its options, and each thread's feeder."""

    def __init__(self, data_dir, info, run, options, known, chunk):
        self.data_dir, self.info, self.run, self.options = data_dir, info, run, options
        self.known, self.chunk = known, chunk
        self._local = threading.local()
        self._feeders: list[_Feeder] = []
        self._lock = threading.Lock()
        self._checkpoints: dict[int, object] = {}

    def feeder(self) -> _Feeder:
        f = getattr(self._local, "feeder", None)
        if f is None:
            f = _Feeder(self.data_dir)
            self._local.feeder = f
            with self._lock:
                self._feeders.append(f)
        return f

    def close(self) -> None:
        for f in self._feeders:
            f.close()

    def checkpoint_rows(self, seq: int):
        """The parsed checkpoint at exactly ``seq`` (cached: every symbol's block starting
        there uses it), or None when there is none there."""
        with self._lock:
            if seq in self._checkpoints:
                return self._checkpoints[seq]
        at, blob = read_checkpoint(self.data_dir, seq)
        ck = parse_checkpoint(blob) if at == seq else None
        with self._lock:
            self._checkpoints[seq] = ck
        return ck

    def symbol(self, sid: int, state=None):
        return _Symbol(self.run, self.options.get(sid, self.options.get(None)), state)


def _last_rows(reader, sid: int, lo: int, first: int) -> tuple:
    """(last fill's trade id and price, or None; last message's seq and ts, or (0, 0); the
    latest event ts) of symbol ``sid`` before seq ``lo``, reading back from ``lo`` in doubling
    windows to ``first``."""
    fill, msg, ev_ts = None, None, 0
    hi, width = lo - 1, _WINDOW
    while hi >= first and (fill is None or msg is None):
        a = max(first, hi - width + 1)
        if msg is None:
            o = read(reader, "orders", symbol=sid, seq=(a, hi), columns=["seq", "ts"])
            if o.size:
                msg = (int(o["seq"][-1]), int(o["ts"].max()))
            e = read(reader, "events", symbol=sid, seq=(a, hi), columns=["ts"])
            if e.size:
                ev_ts = max(ev_ts, int(e["ts"].max()))
        if fill is None:
            f = read(reader, "fills", symbol=sid, seq=(a, hi), columns=["trade_id", "price"])
            if f.size:
                fill = (int(f["trade_id"][-1]), int(f["price"][-1]))
        hi, width = a - 1, 2 * width
    return fill, msg or (0, 0), ev_ts


def _seed(ctx: _Context, job: _Job):
    """The kernel state a later block starts from (see ``replay.verification.seed``), or None."""
    ck = ctx.checkpoint_rows(job.lo - 1)
    if ck is None:
        return None
    rows = np.ascontiguousarray(ck.rows[ck.rows["symbol"] == job.sid])
    opts = ctx.options.get(job.sid, ctx.options.get(None))
    # room for the book and a quarter more before the first growth (``grow_state``)
    state = K.new_state(rows.size + (rows.size >> 2) + (1 << 14),
                        max(ctx.run.max_violations, 1), level_capacity=rows.size + 16)
    configure(state, opts)
    ost, lst, oid, htab, ladder, ladlv, _t, ext, _cfg, meta = state[:10]
    if S.seed_book(rows, ost, lst, oid, htab, ladder, ladlv, ext, meta) != S.SEED_OK:
        return None
    fill, (mseq, mts), ev_ts = ctx.feeder().call(_last_rows, job.sid, job.lo,
                                                 ctx.info.first_seq + 1)
    if fill is not None:
        meta[M_LAST_TRADE], meta[M_LAST_PX], meta[M_TRADED] = fill[0], fill[1], 1
    meta[M_LAST_SEQ], meta[M_PREV_TS] = mseq, max(mts, ev_ts)
    return state


def _check_block(ctx: _Context, job: _Job, sym, speculative: bool) -> _Done:
    """Check one block's seq spans with ``sym`` (a ``_Symbol``); ``speculative``: give up
    (return a _Done without a checker) at rows that need the phase checker."""
    done = _Done(sym)
    spans = ranges(job.lo, job.hi, ctx.chunk)
    feed = ctx.feeder()
    known = job.sid in ctx.known
    for k, t in enumerate(feed.tables(job.sid, spans)):
        if speculative and sym.needs_phases(t["orders"], t["fills"], t["events"]):
            return _Done()
        final = K.FINAL if job.last and k + 1 == len(spans) else K.FLUSH
        sym.feed(t["orders"], t["fills"], t["l2"], t["events"], known, final)
        # copies, not views: a view would keep every range's rows alive to the end
        done.seqs.append(t["orders"]["seq"].copy())
        done.trade_ids.append(t["fills"]["trade_id"].copy())
    return done


def _speculate(ctx: _Context, job: _Job) -> _Done:
    """A pool thread's work on one block: from the empty book for a symbol's first block, from
    a seed for a later one (a _Done without a checker when there is no seed)."""
    if job.first:
        return _check_block(ctx, job, ctx.symbol(job.sid), False)
    opts = ctx.options.get(job.sid, ctx.options.get(None))
    if opts.phase.banded:
        return _Done()
    try:
        state = _seed(ctx, job)
    except Exception:   # noqa: BLE001
        # a seed is only a guess: whatever keeps one from being built (a damaged checkpoint, a
        # read that fails) leaves the block to the serial check, which reports it if it matters
        return _Done()
    if state is None:
        return _Done()
    seed_form = S.canonical_form(state)
    done = _check_block(ctx, job, ctx.symbol(job.sid, state), True)
    if done.sym is not None:
        done.seed_form = seed_form
    return done


def _finish(ctx: _Context, job: _Job, done: _Done) -> _Done:
    if done.sym is not None and not job.last:
        done.end_form = S.canonical_form(done.sym.state)
    return done


def check_stored(ctx_args: tuple, symbols: list[int], threads: int) -> tuple[list, list, dict]:
    """Check every symbol of a stored run, blocks on ``threads`` threads, folding into
    ``run`` (the ``_Run`` in ``ctx_args``) as one serial walk would. Returns (seqs arrays,
    trade id arrays, how the work was split: blocks, blocks kept as checked ahead, blocks
    checked again)."""
    ctx = _Context(*ctx_args)
    info = ctx.info
    first, last = info.first_seq + 1, info.last_seq
    per_symbol = max(1, math.ceil(threads / max(len(symbols), 1))) if threads > 1 else 1
    spans = [(first, last)]
    if per_symbol > 1 and last >= first:
        cat = Catalog(ctx.data_dir, readonly=True)
        try:
            cuts = [int(r["seq"]) for r in cat.checkpoints()]
        finally:
            cat.close()
        spans = blocks(first, last, cuts, per_symbol)
    jobs = [_Job(sid, lo, hi, j == 0, j + 1 == len(spans))
            for sid in symbols for j, (lo, hi) in enumerate(spans)]
    split = {"threads": threads, "blocks": len(jobs), "kept": 0, "rechecked": 0}
    seqs: list = []
    trade_ids: list = []
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="verify") \
        if threads > 1 else None

    def work(job):
        return _finish(ctx, job, _speculate(ctx, job))

    try:
        futures = [pool.submit(work, j) for j in jobs] if pool is not None else None
        sym, form = None, None
        for k, job in enumerate(jobs):
            try:
                done = futures[k].result() if futures is not None else work(job)
            except Exception:   # noqa: BLE001
                if futures is None:
                    raise
                # checked again below: an error the serial walk meets is raised there, in its
                # order; one only the guess met (its seed) is not an error of the run
                done = _Done()
            if job.first and done.sym is not None:
                sym = done.sym
            elif (not job.first and done.sym is not None and sym.checker is None
                  and done.seed_form is not None and form is not None
                  and S.same_form(form, done.seed_form)):
                sym.adopt(done.sym)
                split["kept"] += 1
            else:
                if job.first:
                    sym = ctx.symbol(job.sid)
                else:
                    split["rechecked"] += 1
                sym.show_progress = job.first   # a later block's rows were counted ahead
                done = _finish(ctx, job, _check_block(ctx, job, sym, False))
                sym.show_progress = True
            form = done.end_form
            seqs += done.seqs
            trade_ids += done.trade_ids
            if job.last:
                sym.end()
                sym, form = None, None
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        ctx.close()
    return seqs, trade_ids, split

