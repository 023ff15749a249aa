"""One symbol's checks: the kernel up to its first phase activity, the phase checker after it.

``_Symbol`` feeds a symbol's rows, all at once or seq range by seq range, to the kernel
(``replay.verification.plain.check_plain`` while its messages are plain continuous ones, then
``replay.verification.kernel.check_symbol``) until the symbol's first row of phase activity
(``replay.verification.phases.first_phase_seq``), then to ``PhaseChecker``
(``replay.verification.auctions``), whose book is seeded with the kernel's at that seq; rows
before it whose symbol has bands also go through ``phases.band_rows``. Its ``_Tally`` keeps what
the checks found, and ``_format`` turns a kernel violation row into a ``Violation`` with its
detail's template (``replay.verification.rules.DETAILS``).

A ``_Symbol`` reports to a run (``replay.verification.run._Run``, passed in, never imported):
``run.begin`` gives it a fresh kernel state, ``run.merge`` takes its findings when it ``end``s.
Invariants: the kernel state carries over from range to range, so checking a symbol in ranges
finds what one call over all its rows finds; ``adopt`` continues with the state and findings of
a later block checked from an equal state (``replay.verification.split``).
"""

from __future__ import annotations

import time

import numpy as np

from exsim.exchange.schema import Side

from exsim.replay.verification.auction_book import book_from_state
from exsim.replay.verification.auctions import PhaseChecker
from exsim.replay.verification.book import M_LAST_PX, M_TRADED
import exsim.replay.verification.kernel as K
from exsim.replay.verification.options import _SymbolOptions
from exsim.replay.verification import plain as P
from exsim.replay.verification.phases import (
    PhaseOptions, band_rows, first_phase_seq, static_band_rejects,
)
from exsim.replay.verification.report import Violation
from exsim.replay.verification.rules import RULES

_TABLE_NAMES = ("fill", "L2", "event")
_CHUNK = 1 << 20   # messages per kernel call: the granularity of the progress bar


def _format(row, oid) -> Violation:
    seq, rule, code, a, b, c, d = (int(v) for v in row)
    kw = dict(seq=seq, oid=int(oid), a=a, b=b, c=c, d=d, ua=a % (1 << 64),
              table=_TABLE_NAMES[a] if 0 <= a < 3 else str(a),
              aside=Side(a).name.lower() if a in (0, 1) else f"side {a}",
              cside=Side(c).name.lower() if c in (0, 1) else str(c))
    return Violation(seq, RULES[rule], K.DETAILS[code][1].format(**kw))


class _Tally:
    """What one symbol's checks found over the ranges checked so far: counts per rule, the
    ``band`` rows (``replay.verification.phases.band_rows``) and the kernel's violations, each in
    the order found (the first ``cap`` of each kept), the rows checked and the kernel's time."""

    def __init__(self, cap: int):
        self.cap = cap
        self.counts = np.zeros(len(RULES), np.int64)
        self.band: list[Violation] = []
        self.kernel: list[Violation] = []
        self.totals = {"orders": 0, "fills": 0, "l2": 0, "events": 0}
        self.kernel_seconds = 0.0
        self.kernel_cpu_seconds = 0.0

    def absorb(self, later: "_Tally") -> None:
        """Append what ``later`` (the next ranges of the same symbol) found. Returns None."""
        self.counts += later.counts
        self.band += later.band[:max(self.cap - len(self.band), 0)]
        self.kernel += later.kernel[:max(self.cap - len(self.kernel), 0)]
        for k, v in later.totals.items():
            self.totals[k] += v
        self.kernel_seconds += later.kernel_seconds
        self.kernel_cpu_seconds += later.kernel_cpu_seconds


class _Symbol:
    """One symbol's checks: the kernel until the symbol's first phase activity, then
    ``PhaseChecker`` (seeded with the kernel's book; see ``replay.verification.auctions``).
    ``run``: the ``_Run`` it reports to; ``state``: the kernel state to start from (None: a
    fresh one, the symbol's first seq)."""

    def __init__(self, run, options: "_SymbolOptions | None", state: tuple | None = None):
        self.run = run
        self.popts = options.phase if options is not None else PhaseOptions()
        self.state = state if state is not None else run.begin(options)
        # True once the symbol needs check_symbol: from then on every message goes to it (a
        # state it left may hold stops, icebergs and expiries, which check_plain cannot take)
        self.full = state is not None and not P.plain_state(state)
        self.checker = None
        self.tally = _Tally(max(run.max_violations, 0))
        self.show_progress = True

    def needs_phases(self, orders, fills, events) -> bool:
        """Whether these rows need more than the kernel: band rows or the phase checker."""
        return bool(self.popts.banded or first_phase_seq(orders, fills, events, self.popts)
                    is not None or static_band_rejects(events))

    def _band_rows(self, orders, fills, events) -> None:
        meta = self.state[-4]
        last = int(meta[M_LAST_PX]) if meta[M_TRADED] else 0
        t = self.tally
        for seq, rule, detail in band_rows(orders, fills, events, self.popts, last):
            t.counts[RULES.index(rule)] += 1
            if len(t.band) < t.cap:
                t.band.append(Violation(seq, rule, detail))

    def _check(self, orders, fills, l2, events, known: bool, final: int) -> None:
        """The kernel over one symbol's rows (all of them, or the next seq range of them:
        ``final`` is ``K.FLUSH`` for a range more follow, ``K.FINAL`` for the last); its
        violations and counts move into the tally."""
        state = self.state
        meta = state[-4]
        meta[K.M_I] = meta[K.M_FP] = meta[K.M_LP] = meta[K.M_EP] = 0
        n = orders.size
        t0, c0 = time.perf_counter(), time.thread_time()
        for lo in range(0, max(n, 1), _CHUNK):
            hi = min(n, lo + _CHUNK)
            while True:
                # why two kernels: check_plain takes the plain continuous messages, and
                # check_symbol (about 3x its cold compile, 2.5x its peak memory) is compiled only
                # when one is not plain
                kernel = K.check_symbol if self.full else P.check_plain
                status = kernel(orders, fills, l2, events, hi, known, self.run.stp,
                                final if hi == n else K.MORE, *state)
                if status == K.OK:
                    break
                if status == P.NEED_FULL:
                    self.full = True
                else:
                    state = K.grow_state(state)
            if self.show_progress:
                self.run.progress(hi - lo)
        t = self.tally
        t.kernel_seconds += time.perf_counter() - t0
        # why CPU time too: on a shared machine wall time mostly measures the other jobs
        t.kernel_cpu_seconds += time.thread_time() - c0
        meta, vrows, vids, counts = state[-4:]
        kept = min(int(meta[K.M_VN]), vrows.shape[0], max(t.cap - len(t.kernel), 0))
        t.kernel += [_format(vrows[j], vids[j]) for j in range(kept)]
        meta[K.M_VN] = 0
        t.counts += counts
        counts[:] = 0
        for name, rows in (("orders", orders), ("fills", fills), ("l2", l2), ("events", events)):
            t.totals[name] += rows.size
        self.state = state

    def feed(self, orders, fills, l2, events, known: bool, final: int) -> None:
        """Check the symbol's next rows (``final`` as ``_check``). Returns None."""
        if self.checker is None:
            cut = first_phase_seq(orders, fills, events, self.popts)
            if cut is None:
                if self.popts.banded or static_band_rejects(events):
                    self._band_rows(orders, fills, events)
                self._check(orders, fills, l2, events, known, final)
                return
            pre = [t[t["seq"] < cut] for t in (orders, fills, l2, events)]
            self._band_rows(pre[0], pre[1], pre[3])
            self._check(*pre, known, K.FINAL)
            seed, last, traded = book_from_state(self.state)
            self.checker = PhaseChecker(self.popts, seed, last, traded,
                                        max(self.run.max_violations, 1))
            orders, fills, l2, events = (t[t["seq"] >= cut] for t in (orders, fills, l2, events))
        self.checker.feed(orders, fills, events)
        for name, rows in (("orders", orders), ("fills", fills), ("l2", l2), ("events", events)):
            self.tally.totals[name] += rows.size

    def end(self) -> None:
        """Hand the symbol's findings to the run (all its ranges checked). Returns None."""
        self.run.merge(self)

    def adopt(self, later: "_Symbol") -> None:
        """Continue with what ``later`` found checking the next ranges from a state equal to
        this one's (``replay.verification.split``): its state and its findings. Returns None."""
        self.state = later.state
        self.full = later.full
        self.tally.absorb(later.tally)
