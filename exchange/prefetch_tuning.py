"""Whether the batch kernel prefetches, chosen by timing (``Engine.prefetch_tuning``).

The kernel's software prefetch hides the cache misses of a book whose cancels and modifies land
anywhere in megabytes of arena and order index: on the seeded uniform flows it makes matching
about 1.25x faster. On a flow whose messages find their orders still in cache it is only extra
work: on the QuantCup feed, whose cancels hit recent orders, matching is about 1.25x faster
without it. Which kind a flow is cannot be read off the messages cheaply, and it changes as a
book deepens, so the engine measures it: in a large batch now and then (batches 1, 2, 4, 8, ...
of at least ``MIN_BATCH`` messages, then every ``EVERY``-th), it matches four equal slices at
the batch's start, with prefetching, without, without, with (or the other way round, in turn:
a drift of the machine's speed, or a cost the first slice of a batch pays, then falls on both
alike), and keeps prefetching unless the median of the last ``TRIALS`` trials says it is at
least ``MARGIN`` slower. A trial costs two slices run the slower way.

Prefetching never changes a result, so the choice changes only speed: every output and state
byte is the same whatever is chosen and whatever the clock reads (tests check this with a
clock that lies).
"""

from __future__ import annotations

import statistics
import time

__all__ = ["PrefetchTuner", "MIN_BATCH", "EVERY", "TRIALS", "MARGIN"]

MIN_BATCH = 16384     # smaller batches are neither tried nor timed: they run the current choice
SLICE_MIN, SLICE_MAX = 2048, 4096   # messages in each of a trial's four slices (n // 16 between)
EVERY = 32            # after batches 1, 2, 4, ... EVERY, a trial every EVERY large batches
TRIALS = 3            # the choice is the median of this many latest trials
MARGIN = 0.03         # prefetching is turned off only if it is at least this much slower


class PrefetchTuner:
    """The trials of one engine: which large batches hold one, and what they chose.

    ``plan(n)`` says how to run a batch of ``n`` messages; after a trial batch, ``result``
    takes the two slices' kernel times. ``prefetching`` is the current choice (True at first:
    prefetching is the kernel's default)."""

    __slots__ = ("prefetching", "_large", "_ratios", "_off_first", "clock")

    def __init__(self, clock=time.perf_counter_ns):
        self.prefetching = True
        self._large = 0            # large batches seen
        self._ratios: list[float] = []   # the latest trials' (ns without) / (ns with)
        self._off_first = False
        self.clock = clock         # ns; a test passes its own

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
        without); return the new choice."""
        if ns_with > 0 and ns_without > 0:
            self._ratios = (self._ratios + [ns_without / ns_with])[-TRIALS:]
            self.prefetching = statistics.median(self._ratios) >= 1 - MARGIN
        return self.prefetching
