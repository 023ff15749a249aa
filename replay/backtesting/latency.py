"""Latency models for backtests: how late the strategy sees the market, and how late its orders land.

Three directions, all int64 nanoseconds >= 0 (hftbacktest's split):
- **feed**: market data at exchange time ``t`` (the book a wake-up sees) reaches the strategy at
  local time ``t + feed``.
- **order entry**: a message the strategy sends at local time ``w`` reaches the engine at
  ``w + order``; ``SplitLatency`` can give NEW, CANCEL and MODIFY each their own.
- **response**: an execution report or fill the engine makes at exchange time ``t`` reaches the
  strategy at ``t + response``. The two-stream models below have no response stream of their
  own: their feed stream stands for it (one sample stream for both, as before the split).

Models:
- ``ConstantLatency(feed_ns, order_ns)``: fixed values.
- ``RandomLatency(seed, feed_ns, order_ns, feed_jitter_ns, order_jitter_ns)``: base plus an
  exponential jitter with the given mean, rounded to whole ns. Samples are a fixed sequence per
  seed: the k-th feed (or order) sample of a run is always the same number, whichever path (Python
  or njit strategy) asks for it, because both take samples in the same order.
- ``RecordedLatency(series)``: a step function of time from a recorded series with fields ``ts``,
  ``feed_ns``, ``order_ns``: the value at ``t`` is the last record with ``ts <= t`` (the first record
  before it starts).

- ``SplitLatency(feed, order, response=, new=, cancel=, modify=)``: each direction (and each
  command) its own model: an int (constant ns) or one of the models above, whose stream of the
  same direction it takes (the feed stream for feed and response, the order stream for the
  rest). Unset: response is the feed stream, new/cancel/modify the order stream (shared, so the
  same draws as the plain model).

Every model compiles to two ``Sampler``s (feed, order) with one representation both paths use:
``mode`` CONST (``vals[0]``), STEP (``times``/``vals``), DRAWS (``vals`` consumed in order; the
Python side extends the array when a run needs more samples than drawn so far).

Invariant: samples are deterministic functions of (model, sample index, time); no wall clock.
Limit: orders on one connection arrive in the order sent (the backtest driver enforces this by
never letting an order arrive before the previous one), so a random order latency delays but never
reorders a strategy's messages.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
from numba import njit

from exsim.exchange.errors import UsageError

__all__ = ["ConstantLatency", "RandomLatency", "RecordedLatency", "SplitLatency", "Streams",
           "Sampler", "as_latency", "streams_of", "CONST", "STEP", "DRAWS"]

CONST, STEP, DRAWS = 0, 1, 2
_BLOCK = 4096  # samples drawn at a time by RandomLatency; fixed so the sequence never depends on it


class Sampler:
    """One latency stream (feed or order) in the shared array form; ``draw(ts)`` takes the next sample.

    ``cursor`` counts DRAWS samples taken; ``ensure(k)`` makes at least ``k`` samples available.
    """

    def __init__(self, mode: int, times: np.ndarray, vals: np.ndarray, extend=None):
        self.mode = mode
        self.times = np.ascontiguousarray(times, np.int64)
        self.vals = np.ascontiguousarray(vals, np.int64)
        self.cursor = 0
        self._extend = extend
        # Python copies for ``draw`` (the Python driver draws once per wake-up and per order:
        # a numba call costs more than the lookup itself)
        self._times = self.times.tolist()
        self._vals = self.vals.tolist()

    def ensure(self, k: int) -> None:
        """Grow a DRAWS stream until it holds at least ``k`` samples (no-op for other modes)."""
        while self.mode == DRAWS and len(self.vals) < k:
            more = self._extend()
            self.vals = np.concatenate([self.vals, more])
            self._vals.extend(more.tolist())

    def draw(self, ts: int) -> int:
        """Return the latency (ns) of the next sample at exchange/local time ``ts``: the value
        ``sample`` (the njit paths' lookup) gives for the same cursor and time."""
        if self.mode == CONST:
            return self._vals[0]
        if self.mode == STEP:
            return self._vals[max(bisect_right(self._times, ts) - 1, 0)]
        if self.cursor >= len(self._vals):
            self.ensure(self.cursor + 1)
        self.cursor += 1
        return self._vals[self.cursor - 1]


@njit(cache=True)
def sample(mode, times, vals, cursor, ts):
    """Return (latency, new cursor) for one sample; the caller guarantees a DRAWS value exists."""
    if mode == CONST:
        return vals[0], cursor
    if mode == STEP:
        k = np.searchsorted(times, ts, side="right") - 1
        return vals[max(k, 0)], cursor
    return vals[cursor], cursor + 1


def _check_ns(name: str, v) -> int:
    if int(v) != v or v < 0:
        raise UsageError(f"{name} must be a whole number of nanoseconds >= 0; got {v!r}")
    return int(v)


class ConstantLatency:
    """Fixed feed and order latencies in ns. Raises UsageError for a negative or fractional value."""

    def __init__(self, feed_ns: int = 0, order_ns: int = 0):
        self.feed_ns = _check_ns("feed_ns", feed_ns)
        self.order_ns = _check_ns("order_ns", order_ns)

    def samplers(self) -> tuple[Sampler, Sampler]:
        """Return fresh (feed, order) samplers for one run."""
        return (Sampler(CONST, np.zeros(0), np.array([self.feed_ns])),
                Sampler(CONST, np.zeros(0), np.array([self.order_ns])))

    def describe(self) -> dict:
        """A JSON-able description (kept with stored runs)."""
        return {"model": "constant", "feed_ns": self.feed_ns, "order_ns": self.order_ns}


class RandomLatency:
    """Base latency plus exponential jitter (mean ``*_jitter_ns``), a fixed sequence per ``seed``.

    Raises UsageError for a negative seed or latency.
    """

    def __init__(self, seed: int, feed_ns: int = 0, order_ns: int = 0, feed_jitter_ns: int = 0,
                 order_jitter_ns: int = 0):
        if int(seed) != seed or seed < 0:
            raise UsageError(f"seed must be an int >= 0; got {seed!r}")
        self.seed = int(seed)
        self.feed_ns = _check_ns("feed_ns", feed_ns)
        self.order_ns = _check_ns("order_ns", order_ns)
        self.feed_jitter_ns = _check_ns("feed_jitter_ns", feed_jitter_ns)
        self.order_jitter_ns = _check_ns("order_jitter_ns", order_jitter_ns)

    def _stream(self, stream: int, base: int, jitter: int) -> Sampler:
        rng = np.random.default_rng([self.seed, stream])   # one generator per stream, never shared

        def extend():
            return base + np.rint(rng.exponential(jitter, _BLOCK)).astype(np.int64) if jitter \
                else np.full(_BLOCK, base, np.int64)
        return Sampler(DRAWS, np.zeros(0), extend(), extend)

    def samplers(self) -> tuple[Sampler, Sampler]:
        """Return fresh (feed, order) samplers for one run (the same sequences every time)."""
        return (self._stream(0, self.feed_ns, self.feed_jitter_ns),
                self._stream(1, self.order_ns, self.order_jitter_ns))

    def describe(self) -> dict:
        """A JSON-able description (kept with stored runs)."""
        return {"model": "random", "seed": self.seed, "feed_ns": self.feed_ns,
                "order_ns": self.order_ns, "feed_jitter_ns": self.feed_jitter_ns,
                "order_jitter_ns": self.order_jitter_ns}


class RecordedLatency:
    """Latencies from a recorded series (fields or columns ``ts``, ``feed_ns``, ``order_ns``).

    ``series`` is a structured array or a dict of equal-length arrays, sorted by ``ts``.
    Raises UsageError if it is empty, unsorted, has negative latencies or lacks a field.
    """

    def __init__(self, series):
        try:
            ts, feed, order = (np.asarray(series[k], np.int64) for k in ("ts", "feed_ns", "order_ns"))
        except (KeyError, ValueError, IndexError) as e:
            raise UsageError(f"RecordedLatency needs fields ts, feed_ns, order_ns: {e}") from None
        if not (len(ts) == len(feed) == len(order)) or len(ts) == 0:
            raise UsageError("RecordedLatency needs a non-empty series with equal-length fields")
        if np.any(np.diff(ts) < 0):
            raise UsageError("RecordedLatency series must be sorted by ts")
        if np.any(feed < 0) or np.any(order < 0):
            raise UsageError("RecordedLatency latencies must be >= 0")
        self.ts, self.feed, self.order = ts, feed, order

    def samplers(self) -> tuple[Sampler, Sampler]:
        """Return (feed, order) step-function samplers."""
        return Sampler(STEP, self.ts, self.feed), Sampler(STEP, self.ts, self.order)

    def describe(self) -> dict:
        """A JSON-able description (kept with stored runs)."""
        return {"model": "recorded", "points": int(len(self.ts)),
                "first_ts": int(self.ts[0]), "last_ts": int(self.ts[-1])}


_MODELS = (ConstantLatency, RandomLatency, RecordedLatency)


class Streams:
    """The samplers of one run, one per direction and command: ``feed``, ``response`` and
    ``entry`` (a list indexed by ``Kind``: NEW 0, CANCEL 1, MODIFY 2). Streams a model does not
    split are the same ``Sampler`` object (one cursor), so their draws interleave exactly as
    the unsplit model's did.

    ``split_response``: the response stream is its own (not the feed stream); only then does
    a backtest hold back a report until its response latency has passed (see the driver).
    """

    def __init__(self, feed: Sampler, response: Sampler, new: Sampler, cancel: Sampler,
                 modify: Sampler):
        self.feed, self.response = feed, response
        self.entry = [new, cancel, modify]
        self.split_response = response is not feed

    def distinct_entry(self) -> list[Sampler]:
        """The distinct order-entry samplers, NEW's first (each once however many commands
        share it)."""
        out = []
        for s in self.entry:
            if all(s is not o for o in out):
                out.append(s)
        return out


class SplitLatency:
    """Latency per direction and per command (hftbacktest's split).

    ``feed``: market data to the strategy; ``order``: strategy to exchange, for every command
    not given its own; ``response``: exchange to strategy (acks, fills, cancels; None: the feed
    stream); ``new``/``cancel``/``modify``: order entry of that command (None: ``order``'s
    stream). Each is an int of ns >= 0 (constant) or a ConstantLatency / RandomLatency /
    RecordedLatency, of which the stream of the same direction is used (its feed stream for
    feed and response, its order stream for the others). Raises UsageError for anything else.
    """

    _PARTS = ("feed", "order", "response", "new", "cancel", "modify")

    def __init__(self, feed=0, order=0, *, response=None, new=None, cancel=None, modify=None):
        self.parts = {}
        for name, v in zip(self._PARTS, (feed, order, response, new, cancel, modify)):
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer) + _MODELS):
                raise UsageError(f"SplitLatency {name} must be ns (an int) or a ConstantLatency, "
                                 f"RandomLatency or RecordedLatency; got {v!r}")
            self.parts[name] = _check_ns(f"{name} latency", v) if not isinstance(v, _MODELS) \
                else v

    def _sampler(self, name: str) -> Sampler:
        v = self.parts[name]
        if isinstance(v, int):
            return Sampler(CONST, np.zeros(0), np.array([v]))
        return v.samplers()[0 if name in ("feed", "response") else 1]

    def samplers(self) -> tuple[Sampler, Sampler]:
        """Return fresh (feed, order) samplers (the unsplit view; ``streams`` has them all)."""
        return self._sampler("feed"), self._sampler("order")

    def streams(self) -> Streams:
        """Return fresh samplers of every direction and command for one run."""
        feed, order = self.samplers()
        pick = {k: self._sampler(k) for k in ("response", "new", "cancel", "modify")
                if k in self.parts}
        return Streams(feed, pick.get("response", feed), pick.get("new", order),
                       pick.get("cancel", order), pick.get("modify", order))

    def describe(self) -> dict:
        """A JSON-able description (kept with stored runs): each part given, as ns or its
        model's description."""
        return {"model": "split", **{k: (v if isinstance(v, int) else v.describe())
                                     for k, v in self.parts.items()}}


def streams_of(model) -> Streams:
    """Return fresh ``Streams`` of any model (``as_latency``'s result): a two-stream model's
    feed stream is also its response stream, its order stream every command's."""
    if isinstance(model, SplitLatency):
        return model.streams()
    feed, order = model.samplers()
    return Streams(feed, feed, order, order, order)


def as_latency(latency):
    """Return ``latency`` as a model: None means zero latency, an int or (feed, order) pair constant.

    Raises UsageError for anything else.
    """
    if latency is None:
        return ConstantLatency(0, 0)
    if isinstance(latency, _MODELS + (SplitLatency,)):
        return latency
    if isinstance(latency, (int, np.integer)):
        return ConstantLatency(int(latency), int(latency))
    if isinstance(latency, tuple) and len(latency) == 2:
        return ConstantLatency(*latency)
    raise UsageError("latency must be ConstantLatency, RandomLatency, RecordedLatency, "
                     "SplitLatency, an int "
                     f"or a (feed_ns, order_ns) pair; got {latency!r}")
