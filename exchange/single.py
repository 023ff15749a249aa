"""``SingleEngine``: the engine on one set of book state arrays, matched on the calling thread.

It is ``exchange.engine.Engine`` without the ``threads`` option, and what each shard of
``exchange.shards.ShardedEngine`` is. The class is assembled from one part per concept, each in
its own module and working on the attributes ``__init__`` makes here:

- ``configuration``: options and symbols (``add_symbol``, ``config``, ``from_config``);
- ``processing``: ``process``, the single-message fast path, the growth of outputs;
- ``order_calls``: ``submit``, ``cancel``, ``modify``, ``set_phase``;
- ``views``: ``seq``, ``phase``, ``depth``, ``orders``, ``stops`` ...;
- ``checkpointing``: ``checkpoint``, ``checkpoint_equals``, ``restore``, ``state_hash``;
- ``state_growth``: ``state`` and ``grow``.

The engine owns the book state arrays (``exchange.book``; ``state`` is their public view and
``grow`` grows them, see ``exchange.state``) and validates what Python callers hand it (dtypes,
symbol names, option strings: misuse raises ``UsageError``); message *content* never raises.

Invariants:
- A state array is only ever replaced whole (growing, adding a symbol, restoring), and every
  replacement goes through ``__setattr__``, which drops the argument tuples the fast path caches
  (``_state_args``, ``_tail``): no cached tuple ever holds a replaced array.
- A copy or an unpickled engine shares no buffer it writes with the original
  (``__getstate__``).
- ``process``, the per-order calls and checkpoints behave as documented in their modules; the
  parts share state only through the attributes made in ``__init__``.
"""

from __future__ import annotations

import numpy as np

from . import prefetch_tuning as _tuning
from .arguments import int_arg, is_bool, parse_enum
from .book import (
    ARENA_DTYPE, ARENA_EXT_DTYPE, BOOK_DTYPE, EXPIRY_DTYPE, LEVEL_DTYPE, SYMBOL_DTYPE, TICK_DTYPE,
    new_meta,
)
from .checkpoint import MAX_ORDERS
from .checkpointing import Checkpointing
from .configuration import Configuration
from .errors import UsageError
from .order_calls import OrderCalls
from .order_index import new_index
from .processing import Processing
from .schema import Stp
from .state import EngineState, zeros_aligned as _zeros_aligned
from .state_growth import StateGrowth
from .views import BookViews

__all__ = ["SingleEngine"]

_setattr = object.__setattr__
# the attributes the fast path's cached argument tuples are made of (see __setattr__)
_CACHED_ARGS = frozenset(["_" + f for f in EngineState._fields] + ["prefetch_distance"])


class SingleEngine(Processing, OrderCalls, Configuration, BookViews, Checkpointing, StateGrowth):
    """A multi-symbol price-time-priority matching engine on one set of state arrays.

    ``stp`` is the self-trade prevention mode: "none", "cancel_resting", "cancel_incoming" or
    "cancel_both" (or an ``Stp``). ``ownership``: refuse a CANCEL or MODIFY from any trader but
    the order's (NOT_OWNER). ``capacity``: the orders the arrays first have room for (they grow
    as needed; outputs are the same). Raises UsageError for an unknown mode, a non-bool
    ownership or a capacity not an integer in [0, ``checkpoint.MAX_ORDERS``].
    Users build it as ``exchange.engine.Engine`` (``Engine(threads=1)``).
    """

    @property
    def threads(self) -> int:
        """The number of threads a batch is matched on: 1 (``ShardedEngine`` for more)."""
        return 1

    def __setattr__(self, name, value):
        # replacing a state array or the prefetch distance (grow, add_symbol, restore ...) drops
        # the argument tuples the fast path caches (``_cache_state``, ``_tail``), so none can
        # ever hold a replaced array. Why here and not in a descriptor: stores through
        # object.__setattr__ keep the instance's attributes in CPython's shared-key layout,
        # where every attribute load on the hot path is several times faster.
        _setattr(self, name, value)
        if name in _CACHED_ARGS:
            _setattr(self, "_state_args", None)
            _setattr(self, "_tail", None)

    def __init__(self, stp: str | int = "none", *, ownership: bool = True, capacity: int = 1024):
        self._state_args = self._tail = None   # first: __setattr__ of a state array sets them
        capacity = int_arg(capacity, "capacity", 0, MAX_ORDERS)
        if not is_bool(ownership):
            raise UsageError(f"ownership must be a bool; got {ownership!r}")
        self._meta = new_meta(parse_enum(Stp, stp, "stp"), bool(ownership))
        self._arena = _zeros_aligned(max(capacity, 16), ARENA_DTYPE)
        self._arena_ext = _zeros_aligned(len(self._arena), ARENA_EXT_DTYPE)   # same slot index
        self._levels = np.zeros(max(capacity // 4, 16), LEVEL_DTYPE)
        self._index = new_index(2 * max(capacity, 16))
        # why a view of a larger buffer: adding a symbol appends two rows in amortised O(1)
        # (a concatenate per symbol made adding n symbols O(n^2))
        self._book_rows = np.zeros(0, BOOK_DTYPE)
        self._books = self._book_rows[:0]
        # the pending-stop books and the per-symbol rows grow with the books (same views)
        self._stop_rows = np.zeros(0, BOOK_DTYPE)
        self._stops = self._stop_rows[:0]
        self._symbol_rows = np.zeros(0, SYMBOL_DTYPE)
        self._symbols = self._symbol_rows[:0]
        self._ticks = np.zeros(16, TICK_DTYPE)
        self._ticks_used = 0
        self._expiry = np.zeros(16, EXPIRY_DTYPE)
        self._ladder_keys = np.zeros(64, np.int64)
        self._ladder_levels = np.zeros(64, np.int32)
        self._ladder_used = 0
        self._names: list[str] = []
        self._ids: dict[str, int] = {}
        self._tick_sizes: list[int | float] = []
        self._options: list[dict] = []   # each symbol's options in symbol_options' normal form
        self._next_auto_id = 1
        self.prefetch_distance = 16  # messages; 0 turns prefetching off (results identical)
        self._prefetch_tuner = _tuning.PrefetchTuner()   # None: always prefetch_distance
        # small out=None calls' outputs: [fills, l2, events, cnt], made at the first such call
        self._roll = None
        self._row = None               # the one-row message the per-order calls pack
        self._cnt = np.zeros(3, np.int64)   # the row counters of an out= or large call
        self._checked = None           # weakrefs to the output arrays _caller checked last

    def __getstate__(self) -> dict:
        # a copy or an unpickled engine gets rolling buffers of its own (at its first small
        # call): two engines writing one set would overwrite each other's Results
        d = dict(self.__dict__)
        d["_roll"] = d["_state_args"] = d["_tail"] = d["_row"] = d["_checked"] = None
        if d.get("_prefetch_tuner") is not None:    # timings of this machine and run only
            d["_prefetch_tuner"] = _tuning.PrefetchTuner()
        return d
