"""The engine's book state arrays as one view, and their growth when a kernel asks for room.

``StateGrowth`` is a part of ``exchange.single.SingleEngine`` (it works on the state attributes
``SingleEngine.__init__`` makes): ``state`` returns the arrays as an ``EngineState`` (see
``exchange.state``), ``grow`` grows the one a kernel's status names.

Invariants:
- Growing never changes what the arrays mean: live rows keep their slots, indexes and order, so
  outputs are byte-identical whatever the growth policy (sizes only change what is allocated).
- Every order book and stop book owns one region of the shared ladder arrays (``off``, ``cap``);
  regions never overlap, and a repack keeps the ladder within about twice its use.
- A state array is replaced, never resized in place: ``SingleEngine.__setattr__`` sees the
  replacement and drops the argument tuples that held the old array.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .book import M_NEED_BOOK, M_ORDER_HW
from .errors import UsageError
from .order_index import new_index, rehash_into
from .state import EngineState, grow_array as _grow, grow_cold_rows as _grow_cold

__all__ = ["StateGrowth", "INITIAL_LADDER"]

# the ladder entries each side of a new book (and of its stop book) starts with
INITIAL_LADDER = 8
# A book that outgrows its first INITIAL_LADDER levels goes straight to this many: each growth
# is a kernel exit, a Python step and at times a repack of every ladder (doubling took
# uniform100's 200 books from 8 to 128 in 786 growths; without them the run is 1.04x faster),
# and 128 entries are 1.5 KB.
_FIRST_LADDER_GROWTH = 128
# The order arena grows fourfold, not twofold: each growth copies the live rows into fresh pages
# (a page fault each 4 KiB, ~2 us on a VM) and exits the kernel, and rows past the high-water mark
# are never touched (slots are handed out from the bottom), so the larger room costs address
# space only. Four times halves the growths and copies a third of the rows doubling copies
# (uniform1, 1 M messages: 8 growths to 262,144 slots cost 13 ms of a 117 ms run).
_ARENA_GROWTH = 4
# Past this many slots (1.5 GB of arena and cold rows) the arena doubles again: one fourfold
# step there would ask for tens of GB of address space at once, which an overcommit limit can
# refuse where doubling fits
_ARENA_FOURFOLD_BELOW = 1 << 24


class StateGrowth:
    """The state arrays' view and growth of ``SingleEngine`` (see the module)."""

    @property
    def state(self) -> EngineState:
        """Return the book state arrays (the engine's own; see ``exchange.state``)."""
        return EngineState(self._arena, self._arena_ext, self._levels, self._index, self._books,
                           self._ladder_keys, self._ladder_levels, self._meta, self._symbols,
                           self._ticks, self._stops, self._expiry)

    def grow(self, status: int) -> EngineState:
        """Grow the state array a kernel's ``status`` (one of ``state.GROW_STATUSES``) names;
        return the new ``state``. Raises UsageError for any other status (``NEED_OUTPUT``
        concerns the caller's output arrays, not the engine's state)."""
        if status == kernels.NEED_ORDERS:
            used = int(self._meta[M_ORDER_HW])
            n = len(self._arena)
            self._arena = _grow(self._arena, _ARENA_GROWTH * n if n < _ARENA_FOURFOLD_BELOW else 0)
            self._arena_ext = _grow_cold(self._arena_ext, self._arena, used, len(self._arena))
        elif status == kernels.NEED_LEVELS:
            self._levels = _grow(self._levels, 0)
        elif status == kernels.NEED_INDEX:
            bigger = new_index(2 * len(self._index))
            rehash_into(self._index, bigger)
            self._index = bigger
        elif status == kernels.NEED_LADDER:
            b = int(self._meta[M_NEED_BOOK])
            self._grow_ladder(self._books if b >= 0 else self._stops, b if b >= 0 else -1 - b)
        elif status == kernels.NEED_EXPIRY:
            self._expiry = _grow(self._expiry, 0)
        else:
            raise UsageError(f"Engine.grow takes NEED_ORDERS, NEED_LEVELS, NEED_INDEX, "
                             f"NEED_LADDER or NEED_EXPIRY; got status {status!r}")
        return self.state

    def _alloc_ladder(self, cap: int) -> int:
        """Reserve ``cap`` ladder entries at the end of the ladder arrays; return the offset."""
        if self._ladder_used + cap > len(self._ladder_keys):
            self._repack_ladder(extra=cap)
        off = self._ladder_used
        self._ladder_used += cap
        return off

    def _repack_ladder(self, extra: int) -> None:
        # regions abandoned by growth are dropped here, so the ladder stays within 2x its use;
        # vectorised: a loop over the books cost a Python step per symbol on every repack.
        # The order books and the stop books share the ladder arrays: repack both as one.
        nb = len(self._books)
        books = np.concatenate([self._books, self._stops])
        caps = books["cap"]
        total = int(caps.sum()) + extra
        keys = np.zeros(2 * total + 64, np.int64)
        lvls = np.zeros(2 * total + 64, np.int32)
        new_off = np.cumsum(caps) - caps
        ns = books["n"]
        if ns.sum():
            book = np.repeat(np.arange(len(books)), ns)
            within = np.arange(int(ns.sum())) - np.repeat(np.cumsum(ns) - ns, ns)
            src, dst = books["off"][book] + within, new_off[book] + within
            keys[dst] = self._ladder_keys[src]
            lvls[dst] = self._ladder_levels[src]
        self._books["off"] = new_off[:nb]
        self._stops["off"] = new_off[nb:]
        self._ladder_keys, self._ladder_levels = keys, lvls
        self._ladder_used = int(caps.sum())

    def _grow_ladder(self, books: np.ndarray, b: int) -> None:
        """Move book row ``b`` of ``books`` (the order or the stop books) to a region twice as big
        (at least ``_FIRST_LADDER_GROWTH`` entries)."""
        cap = max(int(books[b]["cap"]) * 2, _FIRST_LADDER_GROWTH)
        off = self._alloc_ladder(cap)   # may repack, which rewrites every row's off
        o, n = int(books[b]["off"]), int(books[b]["n"])
        self._ladder_keys[off: off + n] = self._ladder_keys[o: o + n]
        self._ladder_levels[off: off + n] = self._ladder_levels[o: o + n]
        books[b]["off"] = off
        books[b]["cap"] = cap

