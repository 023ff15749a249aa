"""Whether the batch kernel prefetches, chosen by timing (``Engine.prefetch_tuning``).

The kernel's software prefetch hides the cache misses of a book whose cancels and modifies land
anywhere in megabytes of arena and order index: on the seeded uniform flows it makes matching
about 1.25x faster. On a flow whose messages find their orders still in cache it is only extra
work: the QuantCup feed's cancels hit recent orders, so its first replays match faster without
it (trial ratios 0.7-0.85), while later ones, beside the arena the earlier replays filled,
match faster with it (1.2-1.7). Which kind a flow is cannot be read off the messages cheaply,
and it changes as a book deepens, so the engine measures it: in a large batch now and then (batches 1, 2, 4, 8, ...
of at least ``MIN_BATCH`` messages, then every ``EVERY``-th), it matches four equal slices at
the batch's start, with prefetching, without, without, with (or the other way round, in turn:
a drift of the machine's speed, or a cost the first slice of a batch pays, then falls on both
alike). A trial that finds prefetching at least ``CLEAR`` faster turns it on alone; every
other trial is pooled with the trials before it, and prefetching is kept unless the median of
the last ``TRIALS`` says it is at least ``MARGIN`` slower. The slices are timed in the thread's
CPU time (``time.thread_time_ns``), not wall time. A trial costs two slices run the slower way:
at a 1.3x difference, 4% of a 65,536-message batch, half a percent of a run once trials come
every ``EVERY``-th batch.

Why a clear trial turns prefetching on alone: a book deepens as a run goes on, and the answer
turns with it. A fresh book fits in cache, so the first batches find prefetching slower (the
seeded flows' first trial: 0.75-0.9); a few batches later their books no longer fit and
prefetching is 1.3-2.5x faster. A median of three alone would hold the early answer for two
more trials (on uniform100 batches 2-8 of 16 would run without prefetching, 12% slower than
always prefetching over the run); the QuantCup workload's books turn the same way late in its
run, which trials every 8th batch notice within half a million messages. The median still
pools the close trials, where one trial's noise could tip the choice.

Why not off alone, and why CPU time (issue 42): the two mistakes do not cost alike. Prefetching
where it was not needed costs 10-25% of a batch (the first trials of a fresh book: 0.75-0.9);
not prefetching where it was needed costs 1.3-2.5x. And a trial is four slices of a few
hundred microseconds, so on a loaded machine one preempted slice reads 10% or more either
way. Timed in wall time, with a clear trial deciding alone either way, such outliers turned
prefetching off for 39-63 of the QuantCup workload's 152 batches at load 4 (trial ratios of
0.58 between 1.15s late in the run, where prefetching is 1.2-1.7x faster) and the workload
ran at 0.915x of always prefetching's 1.045x (per-round medians against ce8ab02, 7 rounds).
Thread CPU time leaves out the time the thread was not running; an outlier that still reads
"off" is outvoted by the median of the trials around it, while a fresh book's consistently
slower trials still turn prefetching off. With both, in two runs at load 3-8 (7 and 9 rounds):
0.993x and 1.044x, always prefetching 1.048x and 1.008x, the old rule 0.959x in the first.

Why spans: a batch is decided at its start, and one of a million messages starts on a book
that may be small and ends on one that is not. Matched whole, the seeded 2 M-message run in
batches of 1 M took 1.46x as long as in batches of 65,536 (0.382 against 0.262 s, medians of 7
alternating runs; always prefetching 0.253 s): the first trial, on a fresh book, turned
prefetching off for the whole first million. So a batch longer than ``SPAN`` is matched span by
span, each span counted and tried as a batch of its own.

Prefetching never changes a result, so the choice changes only speed: every output and state
byte is the same whatever is chosen and whatever the clock reads (tests check this with a
clock that lies).
"""

from __future__ import annotations

import statistics
import time

__all__ = ["PrefetchTuner", "MIN_BATCH", "SPAN", "EVERY", "TRIALS", "MARGIN", "CLEAR"]

MIN_BATCH = 16384     # smaller batches are neither tried nor timed: they run the current choice
SPAN = 65536          # a longer batch is matched, tried and decided span by span, as if it were
#                       batches of this many messages (see "Why spans" above)
SLICE_MIN, SLICE_MAX = 2048, 4096   # messages in each of a trial's four slices (n // 16 between)
EVERY = 8             # after batches 1, 2, 4, ... EVERY, a trial every EVERY large batches
TRIALS = 3            # a close trial's choice is the median of this many latest trials
MARGIN = 0.03         # by the median, prefetching is turned off only if at least this much slower
CLEAR = 0.10          # a trial whose ratio is at least 1 + this turns prefetching on alone


class PrefetchTuner:
    """The trials of one engine: which large batches hold one, and what they chose.

    ``plan(n)`` says how to run a batch of ``n`` messages; after a trial batch, ``result``
    takes the two slices' kernel times. ``prefetching`` is the current choice (True at first:
    prefetching is the kernel's default)."""

    __slots__ = ("prefetching", "_large", "_ratios", "_off_first", "clock")

    def __init__(self, clock=time.thread_time_ns):
        self.prefetching = True
        self._large = 0            # large batches seen
        self._ratios: list[float] = []   # the latest trials' (ns without) / (ns with)
        self._off_first = False
        self.clock = clock         # ns of the thread's CPU time; a test passes its own

    def plan(self, n: int) -> int:
        """Return the slice length of a trial for a batch of ``n`` messages, or 0: run the
        whole batch the current way (``prefetching``)."""
        if n < MIN_BATCH:
            return 0
        self._large += 1
        k = self._large
        if (k <= EVERY and k & (k - 1) == 0) or k % EVERY == 0:
            return max(SLICE_MIN, min(SLICE_MAX, n // 16))
        return 0

    def trial_order(self) -> tuple[bool, bool, bool, bool]:
        """Return whether each of the next trial's four slices prefetches: (True, False, False,
        True) and (False, True, True, False) in turn."""
        self._off_first = not self._off_first
        return (False, True, True, False) if self._off_first else (True, False, False, True)

    def result(self, ns_with: int, ns_without: int) -> bool:
        """Record a trial's kernel times (the two slices with prefetching, summed; the two
        without); return the new choice: on if its ratio (ns without / ns with) is at least
        1 + ``CLEAR``, else the median rule over the latest ``TRIALS`` (off only if their
        median is below 1 - ``MARGIN``). A trial in which either way took no time is
        ignored."""
        if ns_with > 0 and ns_without > 0:
            ratio = ns_without / ns_with
            self._ratios = (self._ratios + [ratio])[-TRIALS:]
            if ratio >= 1 + CLEAR:
                self.prefetching = True
            else:
                self.prefetching = statistics.median(self._ratios) >= 1 - MARGIN
        return self.prefetching
