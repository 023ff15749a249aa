"""What the rest of exsim relies on in an engine: ``EngineProtocol``, its ``Result`` and buffers.

``store.Session`` journals any engine of this shape, ``replay`` re-runs and restores them and the
backtests drive them; none of them probes an engine with ``inspect`` or ``getattr``: they call
these members and nothing else. ``exchange.Engine`` is the implementation; a stand-in (the
store tests' FakeEngine) implements the same members.

Invariants of every implementation:
- ``process(orders, out=None)`` gives message i of the batch seq ``seq + 1 + i`` and returns a
  ``Result`` (fills, l2, events). With ``out`` (an ``OutputBuffers``) the Result's arrays may be
  views into those buffers, valid until the next call that writes them; the bytes are the same
  with or without ``out``. An engine may ignore ``out`` and return fresh arrays.
- ``checkpoint()`` is the complete, canonical state: ``type(e).restore(e.checkpoint())`` is an
  engine that produces the same outputs from then on, ``checkpoint_equals(b)`` is exactly
  ``checkpoint() == b`` and ``state_hash()`` is a digest of that state.

This module imports only numpy, ``exchange.schema`` and ``exchange.errors`` (``to_pandas``
imports ``exchange.frames`` when called): the store reads it without loading numba.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from .errors import UsageError
from .schema import EVENT_DTYPE, FILL_DTYPE, L2_DTYPE

__all__ = ["EngineProtocol", "Result", "OutputBuffers"]


class Result(NamedTuple):
    """What processing produced: fills, L2 updates and order events, each in engine order."""

    fills: np.ndarray    # FILL_DTYPE
    l2: np.ndarray       # L2_DTYPE
    events: np.ndarray   # EVENT_DTYPE

    @staticmethod
    def concat(results: "list[Result]") -> "Result":
        """Return one Result holding the rows of ``results`` in order."""
        if not results:
            return Result(np.zeros(0, FILL_DTYPE), np.zeros(0, L2_DTYPE), np.zeros(0, EVENT_DTYPE))
        return Result(*(np.concatenate([getattr(r, f) for r in results]) for f in Result._fields))

    def to_pandas(self, table: str | None = None, symbols=None):
        """Return the outputs as pandas DataFrames: ``{"fills": ..., "l2": ..., "events": ...}``,
        or the one DataFrame of ``table``. Columns are the fields in dtype order, enum codes as
        names (Side, Event, Reason: ``exchange.frames``) and ``symbol`` as names when
        ``symbols`` gives them (e.g. ``engine.symbols``). Raises UsageError for an unknown
        table, or naming the ``exsim[pandas]`` extra when pandas is missing."""
        from .frames import to_frame   # why lazy: this module imports only numpy and schema

        if table is not None and table not in Result._fields:
            raise UsageError(f"unknown table {table!r}; known: {', '.join(Result._fields)}")
        if table is not None:
            return to_frame(getattr(self, table), symbols)
        return {name: to_frame(getattr(self, name), symbols) for name in Result._fields}


class OutputBuffers:
    """Arrays an engine writes a batch's fills, L2 updates and events into (``process(orders,
    out=buffers)``): allocated once, so a caller that consumes each Result before it reuses the
    buffers pays no allocation or page faults per batch, and a caller alternating two sets can
    read one batch's outputs on another thread while the engine writes the next. The engine
    replaces an array by a larger copy when a batch needs more room. Sized for ``n_messages`` as
    ``process`` sizes fresh outputs (np.zeros maps untouched pages lazily, so generous costs
    nothing)."""

    __slots__ = ("fills", "l2", "events")

    def __init__(self, n_messages: int = 0):
        fills, l2, events = self.sizes(n_messages)
        self.fills = np.zeros(fills, FILL_DTYPE)
        self.l2 = np.zeros(l2, L2_DTYPE)
        self.events = np.zeros(events, EVENT_DTYPE)

    @staticmethod
    def sizes(n_messages: int) -> tuple[int, int, int]:
        """Return the (fills, L2, events) rows ``OutputBuffers(n_messages)`` allocates."""
        n = max(int(n_messages), 0)
        return n // 2 + 1024, n + n // 2 + 1024, 2 * n + n // 2 + 1024


@runtime_checkable
class EngineProtocol(Protocol):
    """The members store, replay and the backtests call on an engine (see the module docstring).

    ``isinstance(x, EngineProtocol)`` checks that the members exist, not their signatures."""

    @property
    def seq(self) -> int:
        """The seq of the last message processed (0 before any)."""
        ...

    def process(self, orders: np.ndarray, *, out: OutputBuffers | None = None) -> Result:
        """Match a batch of ORDER_DTYPE messages; return their Result (see the module)."""
        ...

    def add_symbol(self, name: str, tick_size: float = 1) -> int:
        """Add a symbol; return its id (0, 1, 2 ... in order of adding)."""
        ...

    def symbol_id(self, symbol: str | int) -> int:
        """Return the id of ``symbol`` (a name or an id); raise UsageError if unknown."""
        ...

    def config(self) -> dict:
        """Return the engine's options and symbols as a JSON-able dict."""
        ...

    def checkpoint(self) -> bytes:
        """Return the engine's complete state as bytes (``restore`` takes them back)."""
        ...

    @classmethod
    def restore(cls, blob: bytes) -> "EngineProtocol":
        """Return a new engine in the state ``blob`` describes; raise CorruptionError if bad."""
        ...

    def checkpoint_equals(self, blob) -> bool:
        """Return ``self.checkpoint() == blob`` (possibly without serialising); never raises."""
        ...

    def state_hash(self) -> str:
        """Return a hex digest of the state: equal hashes, equal outputs from then on."""
        ...
