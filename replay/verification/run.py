"""``verify``: check every deal of a stored run against the orders behind it, independently.

This module holds the entry points (``verify`` for a data directory, ``verify_arrays`` for
tables in memory) and ``_Run``, which folds each symbol's findings (``replay.verification.symbol``)
and the run-wide stream checks into one ``VerifyReport`` (``replay.verification.report``).

The checks run in ``replay.verification.kernel``, a second order book written from
docs/semantics.md that imports none of the engine's kernels. It does not re-decide matching: it
walks each message with its stored fills, execution reports and L2 updates, in seq order, one
symbol at a time, and checks them against its own book (see that module for how it keeps one
defect from cascading).

Rules (``RULES``; each violation names one, with the seq of the message it concerns):

=================  =============================================================================
stream             every row's seq has a message; trade ids increase; every seq is stored once
row_fields         rows carry their message's ts; fills carry the two orders' traders
order_live         both orders of a fill exist and were live (resting) when it printed
opposite_sides     a fill joins the incoming order on its side with a resting order of the other
price_limits       buy limit >= fill price >= sell limit (market orders have no limit)
resting_price      the fill price is the resting order's price
fifo               the resting order was the first in time at the best opposite price
overfill           no fill exceeds either order's open quantity
conservation       per order: filled (summed from fills) + cancelled + leaves = quantity
l2_totals          every L2 row equals the resting orders' total and count at its level, and every
                   level a message changed has a row
events_fills       execution reports agree with fills (one pair of reports per fill, cumulative
                   filled and leaves quantities, PARTIAL vs FILLED)
crossed_book       the book is not crossed after any message
reject             rejected messages change nothing; rejects and accepts agree with the book
                   (UNKNOWN_ID / DUPLICATE_ID / unknown symbols)
order_type         market, IOC and FOK never rest, an accepted FOK fills whole, post-only never
                   takes liquidity, cancel reasons fit the order
self_trade         no fill between one trader's orders under self-trade prevention
ownership          with the engine's ownership option on, no CANCEL or MODIFY by a trader other
                   than the order's was applied; NOT_OWNER rejects only for another trader
stops              a stop is TRIGGERED only when the symbol's last trade price has reached its
                   stop price, in the documented release order, never fills while pending, is
                   not left pending once triggered, and is not accepted already triggered
icebergs           no fill or L2 row shows more than the display sizes allow; a refilled slice
                   is filled only after the orders that were at its level before the refill
expiry             nothing is filled, cancelled or modified at or after its expiry (GTD
                   expire_ts; DAY the symbol's session close); expired orders leave with
                   CANCELLED/EXPIRED at the first message at or after their expiry, in
                   (expiry, order id) order, and none is live past it at the end
tick_lot           no accepted NEW or MODIFY has a price or stop price off the symbol's tick
                   table, a quantity off its lot size, or a quantity below its minimum
min_qty            an accepted NEW with a minimum quantity filled at least that much on entry
phase              PHASE messages have their documented effect; engine-caused phase changes
                   (PRICE_BAND, AUCTION_END) happen only where the rules put them; events'
                   phase field; NEW/MODIFY accepted or refused as the phase says
trade_in_call      no continuous fill in a call, HALTED or CLOSED or during an uncross; no
                   auction fill outside an uncross
auction_price      the UNCROSS price/volume/surplus are the rules' answer for the call book;
                   every auction fill is at that price
auction_allocation the auction fills pair the sides' priority queues (market, price, time)
indicative         every INDICATIVE is the rules' answer for the call book; none is missing
band               no continuous fill outside the dynamic band, no order accepted outside the
                   static band, no PRICE_BAND interruption without a breach
=================  =============================================================================

The last six rules are ``replay.verification.auctions``'s (``band`` also
``replay.verification.phases``'s): a symbol is checked by the kernel up to its first phase
activity and by that module's checker (seeded with the kernel's book) from then on; a run
without phases is checked by the kernel alone.

Threads: ``verify`` checks the seq blocks between stored checkpoints on several threads and
folds them into the report one serial walk gives, whatever the thread count or checkpoint
spacing (``replay.verification.split``: each later block starts from a seed built from its
checkpoint, ``replay.verification.seed``, kept only when the block before it really ended in
that state; otherwise the block is checked again from that state).

Speed (10M-message bench_replay run, 1.98M fills, one symbol, ~1M live orders mid-run): the
checking kernel costs about 0.35-0.55 us of CPU per message (``summary["kernel_cpu_seconds"]``)
and reading the four tables about 0.2 us (store decoding and assembling rows; the 2M-message
run: kernel 0.21-0.25 us, reads 0.2 us); on one thread the read of range k+1 overlaps the
check of range k, so verify costs about the larger of the two (the first ranges, whose small
book checks faster than they read, wait on the reads); on N threads about
their sum over N, plus about half a CPU second per block boundary for its seed (a million live
orders). The checks of stops, icebergs, expiry and tick tables cost plain
flows about 5-8% of kernel CPU (2M-message uniform flow, 0.39M fills, best of three runs, old
and new code alternating on one busy machine: 0.354-0.358 s against 0.329-0.332 s; an earlier
pair 0.324 against 0.30-0.31).

Configuration: the STP mode, the ``ownership`` option (absent: off, as for runs written before
it existed) and each symbol's tick table, lot size, minimum order quantity and session close
come from the run's engine config (``Engine.config()``, recorded in the catalog); a symbol entry
without them has the defaults (every price, lot 1, minimum 1, session close midnight UTC).

Limits: ``violations`` keeps the first ``max_violations`` rows (in symbol, then seq order);
``summary["violations"]`` counts all. Rejects are checked only where the book decides them
(unknown or live ids, NOT_OWNER); field validation (bad qty, band, flags, display or minimum
quantities, expiries) and the STOP_PRICE_REACHED / FOK / MIN_QTY_CANNOT_FILL rejects are the
engine tests' business (an accepted order that breaks the tick table, lot, stop, FOK or
minimum-quantity rules is caught). Stops are checked against the last trade price after each
order (docs/semantics.md "Stops"): a trade through a stop's price earlier in the same order's
sweep does not release it.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from exsim.exchange.errors import CorruptionError, UsageError
from exsim.exchange.schema import Event, Reason, Stp
from exsim.store import Catalog, read
from exsim.store.tables import STORED_DTYPES, orders_with_seq

import exsim.replay.verification.kernel as K
from exsim.replay.verification.options import _options_by_symbol, _SymbolOptions, configure
from exsim.replay.verification.report import Violation, VerifyReport
from exsim.replay.verification.rules import RULES
from exsim.replay.verification.split import check_stored, default_threads
from exsim.replay.verification.symbol import _Symbol
from exsim.replay.rundir import SEQ_MAX, run_info

__all__ = ["verify", "verify_arrays", "RULES"]

_READ_CHUNK = 1 << 18   # seqs per store read (why not more: the store assembles rows one column
#   at a time, and a range of 2^18 seqs keeps its rows in cache for that; 2^20 cost ~1.4x the CPU)


class _Run:
    """Accumulates per-symbol results into one report, symbol by symbol in the order given."""

    def __init__(self, stp: int, max_violations: int, bar):
        self.stp, self.max_violations, self.bar = stp, max_violations, bar
        self.counts = np.zeros(len(RULES), np.int64)
        self.violations: list[Violation] = []
        self.totals = {"orders": 0, "fills": 0, "l2": 0, "events": 0, "symbols": 0}
        self.kernel_seconds = 0.0
        self.kernel_cpu_seconds = 0.0
        self._bar_lock = threading.Lock()

    def progress(self, n: int) -> None:
        """Advance the progress bar (if any) by ``n`` messages; any thread may call it."""
        if self.bar is not None:
            with self._bar_lock:
                self.bar.update(n)

    def begin(self, options: "_SymbolOptions | None" = None) -> tuple:
        """Fresh kernel state for a symbol, with its options (None: the defaults)."""
        # why 16k orders: each growth copies and rehashes every live order; small runs
        # still allocate only a few MB
        state = K.new_state(1 << 14, max(self.max_violations, 1))
        configure(state, options)
        return state

    def merge(self, sym: "_Symbol") -> None:
        """Take one symbol's findings (all its ranges checked): band rows, then the kernel's,
        then its phase checker's, each as far as ``max_violations`` leaves room. Returns None."""
        t = sym.tally
        for rows in (t.band, t.kernel):
            self.violations += rows[:max(self.max_violations - len(self.violations), 0)]
        self.counts += t.counts
        for k, v in t.totals.items():
            self.totals[k] += v
        self.kernel_seconds += t.kernel_seconds
        self.kernel_cpu_seconds += t.kernel_cpu_seconds
        self.totals["symbols"] += 1
        if sym.checker is not None:
            sym.checker.finish()
            self.add_phase(sym.checker)

    def symbol(self, orders, fills, l2, events, known: bool, options=None) -> None:
        """Check one symbol whose rows are all in memory."""
        sym = _Symbol(self, options)
        sym.feed(orders, fills, l2, events, known, K.FINAL)
        sym.end()

    def add_phase(self, checker) -> None:
        """Collect one symbol's phase, auction and band violations (``PhaseChecker``'s,
        ``replay.verification.auctions``)."""
        for rule, n in checker.counts.items():
            self.counts[RULES.index(rule)] += n
        room = max(self.max_violations - len(self.violations), 0)
        self.violations += [Violation(*v) for v in checker.violations[:room]]

    def stream(self, seqs: np.ndarray, lo: int, hi: int, trade_ids: np.ndarray) -> None:
        """Run-wide checks: every seq lo..hi stored exactly once; trade ids unique, consecutive."""
        if hi - lo + 1 <= 2 * seqs.size + (1 << 16):
            seen = np.bincount(seqs - lo, minlength=max(hi - lo + 1, 0)) if seqs.size else \
                np.zeros(max(hi - lo + 1, 0), np.int64)
            for s in np.flatnonzero(seen != 1)[:10]:
                self._add(lo + int(s), f"seq {lo + int(s)} is stored {int(seen[s])} times, not once")
        else:
            # why not bincount: seqs spread over a range far wider than their number (up to
            # 2^63 in a tampered table) would need a counter per seq of that range
            self._sparse_seqs(seqs, lo, hi)
        if trade_ids.size:
            t0, t1 = int(trade_ids.min()), int(trade_ids.max())
            # the span is checked first (Python ints: no wrap) so a stray id of 2^62 is a
            # violation, not a bincount of 2^62 counters
            if t1 - t0 + 1 != trade_ids.size or np.any(np.bincount(trade_ids - t0) != 1):
                self._add(0, f"trade ids are not unique and consecutive ({trade_ids.size} fills, "
                             f"ids {t0}..{t1})")

    def _sparse_seqs(self, seqs: np.ndarray, lo: int, hi: int) -> None:
        """``stream``'s seq check by sorting: the first seqs of lo..hi stored other than once."""
        u, c = np.unique(seqs, return_counts=True)
        bad = [(int(v), int(n)) for v, n in zip(u[c != 1][:10], c[c != 1][:10])]
        # seqs missing: the first ones of the first gaps between consecutive stored seqs
        # as Python ints (object array): lo - 1 and the differences may pass int64
        ends = np.concatenate([[lo - 1], u[(u >= lo) & (u <= hi)].astype(object), [hi + 1]])
        gaps = np.flatnonzero(np.diff(ends) > 1)[:10]
        for g in gaps:
            a, b = int(ends[g]), int(ends[g + 1])
            bad += [(s, 0) for s in range(a + 1, min(b, a + 11))]
        for s, n in sorted(bad)[:10]:
            self._add(s, f"seq {s} is stored {n} times, not once")

    def _add(self, seq: int, detail: str) -> None:
        self.add_one(seq, "stream", detail)

    def add_one(self, seq: int, rule: str, detail: str) -> None:
        """Count one violation of ``rule`` (kept if there is room)."""
        self.counts[RULES.index(rule)] += 1
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(seq, rule, detail))

    def report(self, seconds: float) -> VerifyReport:
        per_rule = {name: int(c) for name, c in zip(RULES, self.counts)}
        summary = dict(self.totals, rules_checked=list(RULES), violations=per_rule,
                       seconds=seconds, kernel_seconds=self.kernel_seconds,
                       kernel_cpu_seconds=self.kernel_cpu_seconds)
        self.violations.sort(key=lambda v: v.seq)
        return VerifyReport(not any(per_rule.values()), self.violations, summary)


def _stp_code(stp) -> int:
    try:
        return int(Stp[stp.upper()]) if isinstance(stp, str) else int(Stp(stp))
    except (KeyError, ValueError):
        raise UsageError(f"stp must be one of {[m.name.lower() for m in Stp]}; got {stp!r}") from None


def _bar(progress: bool, total: int, desc: str):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="msg", unit_scale=True, desc=desc)


def _stored(table: str, rows: np.ndarray) -> np.ndarray:
    want = STORED_DTYPES[table]
    if table == "orders" and "seq" not in (rows.dtype.names or ()):
        rows = orders_with_seq(rows, 1)
    if rows.dtype != want:
        raise UsageError(f"verify_arrays: {table} must have dtype {want}; got {rows.dtype}")
    return np.ascontiguousarray(rows)


def verify_arrays(orders, fills, l2, events, *, symbols=None, stp="none", progress=False,
                  max_violations: int = 1000, config=None, ownership=None) -> VerifyReport:
    """Verify tables given as arrays (the store's dtypes, seq order); return a VerifyReport.

    ``orders`` may lack the seq column (then it is 1, 2, ...). ``symbols``: the ids the engine
    has (messages for others must be rejected); None infers them (a symbol is known unless all
    its messages were rejected as UNKNOWN_SYMBOL). ``stp``: the engine's self-trade prevention.
    ``config``: the engine's ``Engine.config()`` (its symbols' tick tables, lots, minimum
    quantities and session closes, and its ``ownership``); None: every symbol has the defaults.
    ``ownership``: overrides the config's option (None: the config's, absent = off).
    Raises UsageError for a wrong dtype, stp name or a malformed config.
    """
    t0 = time.perf_counter()
    tabs = {n: _stored(n, a) for n, a in (("orders", orders), ("fills", fills), ("l2", l2),
                                          ("events", events))}
    if ownership is not None:
        config = dict(config or {}, ownership=bool(ownership))
    options = _options_by_symbol(config, UsageError, "verify_arrays config")
    run = _Run(_stp_code(stp), max_violations, _bar(progress, tabs["orders"].size, "verify"))
    sids = np.unique(np.concatenate([t["symbol"] for t in tabs.values()]).astype(np.int64))
    for sid in sids:
        part = {n: t[t["symbol"] == sid] if len(sids) > 1 else t for n, t in tabs.items()}
        if symbols is None:
            ev = part["events"]
            known = bool(np.any((ev["event"] != Event.REJECTED)
                                | (ev["reason"] != Reason.UNKNOWN_SYMBOL))) if ev.size else True
        else:
            known = int(sid) in {int(s) for s in symbols}
        run.symbol(part["orders"], part["fills"], part["l2"], part["events"], known,
                   options.get(int(sid), options.get(None)))
    seqs = tabs["orders"]["seq"]
    if seqs.size:
        run.stream(seqs, int(seqs.min()), int(seqs.max()), tabs["fills"]["trade_id"])
    if run.bar is not None:
        run.bar.close()
    return run.report(time.perf_counter() - t0)


def _stored_symbols(data_dir: str) -> list[int]:
    cat = Catalog(data_dir, readonly=True)
    try:
        ids = {int(r["symbol"]) for r in cat.all_segments() if r["table_name"] == "orders"}
        sealed = cat.sealed_through()
    finally:
        cat.close()
    tail = read(data_dir, "orders", seq=(sealed + 1, SEQ_MAX), columns=["symbol"])
    return sorted(ids | {int(s) for s in np.unique(tail["symbol"])})


def _threads(threads) -> int:
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise UsageError(f"threads must be an integer >= 1; got {threads!r}")
    return int(threads)


def verify(data_dir, *, progress: bool = False, max_violations: int = 1000,
           chunk: int = _READ_CHUNK, threads: int | None = None) -> VerifyReport:
    """Verify every deal of the run in ``data_dir`` against its orders; return a VerifyReport.

    Reads one symbol at a time (all four tables), at most ``chunk`` seqs at a time (short
    ranges first, see ``replay.verification.split.ranges``), and checks it with the independent
    kernel while a worker thread reads the next range; then checks run-wide that every seq is
    stored once and trade ids are consecutive. ``threads`` (None:
    ``replay.verification.split.default_threads()``, the cores this process may use less one for
    the reader, at most ``MAX_THREADS``): the seq blocks between stored checkpoints are
    checked on that many threads and folded into the report one serial walk gives, the same
    for every thread count (``replay.verification.split``); ``report.split`` says how the work
    was split. Raises UsageError for chunk < 1 or threads < 1, StoreError if ``data_dir`` is
    not a data directory, CorruptionError if a stored file fails its checksum or the run's
    engine config has a malformed symbol entry (tick table, lot, minimum, session close) or
    ownership value. Violations are reported, not raised (see ``raise_if_failed``).
    """
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise UsageError(f"chunk must be >= 1; got {chunk}")
    threads = _threads(threads)
    t0 = time.perf_counter()
    data_dir = os.fspath(data_dir)
    info = run_info(data_dir)
    stp = _stp_code(info.config.get("stp", "none"))
    options = _options_by_symbol(info.config, CorruptionError,
                                 f"{data_dir}: the run's engine config")
    known = set(info.symbols.values())
    run = _Run(stp, max_violations, _bar(progress, info.last_seq - info.first_seq, "verify"))
    try:
        seqs, trade_ids, split = check_stored((data_dir, info, run, options, known, int(chunk)),
                                              _stored_symbols(data_dir), threads)
        if info.last_seq > info.first_seq:
            run.stream(np.concatenate(seqs) if seqs else np.zeros(0, np.int64),
                       info.first_seq + 1, info.last_seq,
                       np.concatenate(trade_ids) if trade_ids else np.zeros(0, np.int64))
    finally:
        if run.bar is not None:
            run.bar.close()
    report = run.report(time.perf_counter() - t0)
    report.split = split
    return report

