"""The engine's book state as a public view, and what a kernel extending the engine may use.

``Engine.state`` returns an ``EngineState``: the twelve arrays ``kernels.process_batch`` takes,
in its argument order, so ``process_batch(orders, start, *engine.state, fills, l2, events, cnt,
prefetch)`` is the engine's own call. ``Engine.grow(status)`` grows what a state status names
and returns the new ``EngineState``. The arrays are the engine's own, not copies: a kernel may
mutate them only as ``process_batch`` does (whole messages, never allocating), and must take
``engine.state`` again after every ``grow``, since growing replaces arrays.

Kernels that extend the engine (the backtests') import from here, and only from here, the rest
of what they need of the engine: the statuses, the meta slots they read, the order-index lookup
and the prefetch hint. That makes the dependency explicit: a change to these names is a change
to this module's public surface.

Statuses: ``OK`` (batch done) and the ``NEED_*`` codes below are the engine's and mean the same
everywhere in exsim; ``NEED_OUTPUT`` is the caller's to handle (it owns the output arrays: grow
them to the ``M_NEED_*`` row counts in meta), the others are ``GROW_STATUSES``, which
``Engine.grow`` handles. Kernels beyond the engine number their own statuses from 10 up.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .book import M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2, M_SEQ
from .kernels import process_batch
from .status import (
    NEED_EXPIRY, NEED_INDEX, NEED_LADDER, NEED_LEVELS, NEED_ORDERS, NEED_OUTPUT, OK,
)
from .order_index import index_find, index_home
from .prefetch import prefetch

__all__ = ["EngineState", "GROW_STATUSES", "grow_array", "grow_cold_rows", "grow_output",
           "zeros_aligned",
           "OK", "NEED_OUTPUT", "NEED_ORDERS", "NEED_LEVELS", "NEED_INDEX", "NEED_LADDER",
           "NEED_EXPIRY",
           "M_SEQ", "M_NEED_FILLS", "M_NEED_L2", "M_NEED_EVENTS",
           "process_batch", "index_find", "index_home", "prefetch"]

# the statuses Engine.grow handles: the state arrays ran out of room before a message
GROW_STATUSES = frozenset((NEED_ORDERS, NEED_LEVELS, NEED_INDEX, NEED_LADDER, NEED_EXPIRY))


class EngineState(NamedTuple):
    """The engine's book state arrays (``exchange.book`` documents their dtypes and links)."""

    arena: np.ndarray          # ARENA_DTYPE: one row per order slot; a level's FIFO is linked here
    arena_ext: np.ndarray      # ARENA_EXT_DTYPE: the slots' cold fields (read where marks say)
    levels: np.ndarray         # LEVEL_DTYPE: one row per occupied price level (qty, count, FIFO)
    index: np.ndarray          # INDEX_DTYPE: hash table (symbol, order_id) -> arena slot
    books: np.ndarray          # BOOK_DTYPE: one row per (symbol, side), at symbol * 2 + side
    ladder_keys: np.ndarray    # int64: each book's region of level keys, sorted, best last
    ladder_levels: np.ndarray  # int32: the level row of each ladder key
    meta: np.ndarray           # int64: counters and free-list heads at the M_* slots (M_SEQ ...)
    symbols: np.ndarray        # SYMBOL_DTYPE: one row per symbol (lot, minimum, close, last price)
    ticks: np.ndarray          # TICK_DTYPE: the symbols' tick tables
    stops: np.ndarray          # BOOK_DTYPE: pending-stop books, at symbol * 2 + side
    expiry: np.ndarray         # EXPIRY_DTYPE: min-heap of expiring orders (M_EXPIRY_N entries)


CACHE_LINE = 64


def zeros_aligned(n: int, dtype: np.dtype) -> np.ndarray:
    """Return a zeroed array of ``n`` rows of ``dtype`` whose first row starts on a cache line.

    Why: numpy places large arrays 16 bytes past a page start, so a 64-byte arena row would
    straddle two cache lines (two misses, and a prefetch of the row would fetch only one)."""
    dtype = np.dtype(dtype)
    buf = np.zeros(n * dtype.itemsize + CACHE_LINE, dtype=np.uint8)
    skip = -buf.ctypes.data % CACHE_LINE
    return buf[skip: skip + n * dtype.itemsize].view(dtype)


def grow_cold_rows(arena_ext: np.ndarray, arena: np.ndarray, used: int, rows: int) -> np.ndarray:
    """Return ``arena_ext`` (ARENA_EXT_DTYPE) resized to ``rows`` rows, its first row on a cache
    line: a copy when any of the first ``used`` slots of ``arena`` has ``marks`` set, else fresh
    zeroed rows.

    Why: an ext row is read only where its slot's marks say it applies, so with no marked slot
    the old rows are stale and need no copy, and fresh rows are pages the OS maps only when an
    order with cold fields first writes one. A flow of plain limit orders then never faults
    in, copies or zeroes them: a third of the order slots' bytes (docs/benchmarks.md, Growth).
    """
    new = zeros_aligned(rows, arena_ext.dtype)
    used = min(used, len(arena), len(arena_ext), rows)
    if used and arena["marks"][:used].any():
        new[:used] = arena_ext[:used]
    return new


def grow_output(arr: np.ndarray, used: int, at_least: int) -> np.ndarray:
    """Return output array ``arr`` itself when it has room for ``at_least`` rows; else a zeroed
    array of max(2 * len, ``at_least``, 16) rows, its first row on a cache line, holding the
    first ``used`` rows of ``arr`` (the rows the kernel has written).

    Why not ``grow_array``: a kernel that lacks room in one output asks for the totals of all
    three, and only the rows written so far mean anything. Doubling the outputs that had room
    and copying every row of their capacity made growth most of a venue flow's time with fresh
    outputs (a stop cascade's bound asks for millions of rows: 0.82 of 1.2 s per million
    messages went to those copies)."""
    if len(arr) >= at_least:
        return arr
    new = zeros_aligned(max(2 * len(arr), at_least, 16), arr.dtype)
    new[:used] = arr[:used]
    return new


def grow_array(arr: np.ndarray, at_least: int) -> np.ndarray:
    """Return a zeroed copy of ``arr`` with room for max(2 * len, ``at_least``, 16) rows, its
    first row on a cache line (``zeros_aligned``)."""
    new = zeros_aligned(max(2 * len(arr), at_least, 16), arr.dtype)
    new[: len(arr)] = arr
    return new
