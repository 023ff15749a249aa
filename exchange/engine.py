"""``Engine``: the Python facade over the numba matching kernels (``exchange.protocol``'s engine).

The engine owns the book state arrays (``exchange.book``; ``Engine.state`` is their public view
and ``Engine.grow`` grows them, see ``exchange.state``), validates what Python callers hand it
(dtypes, symbol names, option strings: misuse raises ``UsageError``), and runs
``kernels.process_batch`` over whole batches, growing state and output arrays when the kernel
asks. Message *content* never raises: bad messages come back as REJECTED events.

Invariants:
- ``process`` on a batch and the same messages one at a time (or through ``submit``, ``cancel``,
  ``modify``) produce byte-identical outputs: the per-order calls build a one-row batch.
- Output arrays are zero-initialised, so padding bytes are zero and outputs compare byte for byte.
- ``checkpoint()`` is canonical (resting orders in priority order, then pending stops in release
  order, counters, options): two engines with equal checkpoints produce equal outputs from then
  on, and ``state_hash`` hashes it. Its bytes are ``exchange.checkpoint``'s layout, written and
  parsed only there. ``restore`` checks a blob's every field and row first (a CorruptionError
  "checkpoint: ..." otherwise), so ``restore(b).checkpoint() == b`` for every blob of the
  current version it accepts.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import struct
import weakref

import numpy as np

from . import checkpoint as ckpt
from . import checkpoint_kernels as ck_kernels
from . import kernels
from .book import (
    ARENA_DTYPE, ARENA_EXT_DTYPE, BOOK_DTYPE, EXPIRY_DTYPE, LEVEL_DTYPE, M_EXPIRY_N, M_INDEX_COUNT,
    M_NEED_BOOK, M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2, M_NEXT_END, M_NSYM, M_ORDER_HW,
    M_OWNERSHIP, M_SEQ, M_STOPS_LIVE, M_STP, M_TRADE_ID, SYMBOL_DTYPE, TICK_DTYPE, new_meta,
)
from .checkpoint import MAX_ORDERS as _MAX_ORDERS
from .checkpoint import positive_number as _positive_number
from .errors import CorruptionError, UsageError
from .order_index import index_find, new_index, rehash_into
from . import prefetch_tuning as _tuning
from .protocol import OutputBuffers, Result
from .symbol_options import OPTIONS as _OPTIONS
from .symbol_options import PHASE_OPTIONS as _PHASE_OPTIONS
from .symbol_options import OptionError, normalize as _normalize_options, phase_option
from .schema import (
    CALL_PHASES, CHECKPOINT_DTYPE, DEPTH_DTYPE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, L3_DTYPE,
    MAX_PRICE, ORDER_DTYPE, Flag, Kind,
    OrderType, Phase, Side, Stp, Tif,
)
from .state import EngineState, grow_array as _grow, grow_cold_rows as _grow_cold, \
    grow_output as _grow_output
from .state import zeros_aligned as _zeros_aligned

__all__ = ["Engine", "Result", "OutputBuffers"]

_INITIAL_LADDER = 8
# A book that outgrows its first 8 levels goes straight to this many: each growth is a kernel
# exit, a Python step and at times a repack of every ladder (doubling took uniform100's 200
# books from 8 to 128 in 786 growths; without them the run is 1.04x faster), and 128 entries
# are 1.5 KB.
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



# the range of each message field a per-order call fills in (its ORDER_DTYPE type)
_I64 = (-(1 << 63), (1 << 63) - 1)
_U64 = (0, (1 << 64) - 1)
_U32 = (0, (1 << 32) - 1)

# The single-message path (issue 20, "one message cheap"). What a one-row call used to pay, ~6 us
# on the development VM: numba's type dispatch over process_batch's 19 arguments (~2.5 us: the
# record dtypes' types are not in its fast fingerprint table), a fresh OutputBuffers (three
# np.zeros of 1024+ rows), the counter array and the state tuple. Now: the compiled entry point
# is called directly (``_entry``) with arguments whose types are checked to be the ones it was
# compiled for, the argument tuple is cached (``Engine.__setattr__`` drops it whenever a state
# array is replaced), small out=None calls write into the engine's rolling output buffers, and
# the per-order calls pack their row with one struct call into a reused one-row array.
_SMALL = 64            # messages: a batch up to this with out=None writes the rolling buffers
_ROLL_MESSAGES = 2048  # the rolling buffers are OutputBuffers(_ROLL_MESSAGES) when they roll


def _entry(dispatcher, args):
    """Return the compiled function ``dispatcher`` runs for ``args`` (numba compiles it, or loads
    it from the on-disk cache, if it has not yet).

    Why: calling it skips numba's per-call type dispatch, ~2.5 us over process_batch's record
    arrays. Its caller must pass arguments of exactly the numba types ``args`` have (it unboxes
    without checking): the engine does so only for arrays it made itself or checked."""
    return dispatcher.compile(tuple(dispatcher.typeof_pyval(a) for a in args))


# the message row submit, cancel, modify and set_phase pack in one struct call (ORDER_DTYPE's
# layout, checked at import: if the dtype ever differs, _message falls back to field writes)
_ROW_LAYOUT = (("ts", "q"), ("order_id", "Q"), ("price", "q"), ("qty", "q"), ("symbol", "I"),
               ("trader", "I"), ("kind", "B"), ("order_type", "B"), ("tif", "B"),
               ("flags", "B"), ("side", "B"), ("stop_price", "q"), ("display_qty", "q"),
               ("min_qty", "q"), ("expire_ts", "q"), ("phase", "B"))
_ROW = struct.Struct("<" + "".join(f for _, f in _ROW_LAYOUT))
if ORDER_DTYPE != np.dtype([(n, "<" + {"q": "i8", "Q": "u8", "I": "u4", "B": "u1"}[f])
                            for n, f in _ROW_LAYOUT]) or ORDER_DTYPE.itemsize != _ROW.size:
    _ROW = None


def _codes(enum) -> dict:
    """Return {name in lower and upper case, and int code: code} of ``enum``, for the fast
    path of ``_parse_enum`` (str and exact int keys only: True, 1.0 and members go the slow way)."""
    table = {}
    for m in enum:
        table[m.name.lower()] = table[m.name.upper()] = table[int(m)] = int(m)
    return table


_SIDES, _TYPES, _TIFS, _PHASES = _codes(Side), _codes(OrderType), _codes(Tif), _codes(Phase)
_PROCESS = None          # process_batch's entry point for the engine's own argument types
_INDEX_FIND = None       # index_find's, for (index, int symbol, uint64 order id)
_POST_ONLY = int(Flag.POST_ONLY)
_NEW = int(Kind.NEW)
_I64_MIN, _I64_MAX = _I64
_U64_MAX = _U64[1]
_U32_MAX = _U32[1]


def _index_find_entry(index, sid, order_id):
    """Return index_find's entry point for an engine index, a symbol and a uint64 order id."""
    global _INDEX_FIND
    _INDEX_FIND = _entry(index_find, (index, sid, np.uint64(order_id)))
    return _INDEX_FIND


def _enum_arg(table, enum, value, what: str) -> int:
    """``_parse_enum(enum, value, what)``, a dict lookup first for an exact str or int."""
    t = type(value)
    if t is str or t is int:
        code = table.get(value)
        if code is not None:
            return code
    return _parse_enum(enum, value, what)


_new_tuple = tuple.__new__   # Result(...) without the namedtuple's Python-level __new__
_setattr = object.__setattr__
# the attributes the fast path's cached argument tuples are made of (see Engine.__setattr__)
_CACHED_ARGS = frozenset(["_" + f for f in EngineState._fields] + ["prefetch_distance"])
_ndarray, _ascontiguous = np.ndarray, np.ascontiguousarray   # one lookup less per call


def _plain(a, dtype) -> bool:
    """Whether ``a`` is a writeable, C-contiguous, one-dimensional ndarray of ``dtype``: an
    output array of the type ``_PROCESS`` was compiled for."""
    if type(a) is not np.ndarray or a.dtype != dtype or a.ndim != 1:
        return False
    f = a.flags
    return f.c_contiguous and f.writeable


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _int_arg(value, what: str, lo: int, hi: int) -> int:
    """Return ``value`` as a Python int in [lo, hi], or raise UsageError naming ``what``.

    Takes ints, numpy integers and integral finite floats (2.0); refuses bool, non-integral or
    non-finite floats and everything else, so nothing is truncated (1.5 -> 1), wrapped or left
    to numpy's OverflowError.
    """
    if type(value) is int and lo <= value <= hi:     # the common case, first
        return value
    if isinstance(value, (int, np.integer)) and not _is_bool(value):
        v = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) \
            and float(value).is_integer():
        v = int(value)
    else:
        raise UsageError(f"{what} must be an integer; got {value!r}")
    if not lo <= v <= hi:
        raise UsageError(f"{what} must be in [{lo}, {hi}]; got {value!r}")
    return v


def _parse_enum(enum, value, what: str) -> int:
    """Return the code of ``value`` (a member's name, any case, or its int code) in ``enum``.

    Raises UsageError naming ``what`` for an unknown name or code, a bool or a non-int."""
    if isinstance(value, str):
        try:
            return int(enum[value.upper()])
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum)
            raise UsageError(f"{what} must be one of {names}; got {value!r}") from None
    if not isinstance(value, (int, np.integer)) or _is_bool(value):
        names = ", ".join(m.name.lower() for m in enum)
        raise UsageError(f"{what} must be one of {names} or its code; got {value!r}")
    try:
        return int(enum(int(value)))
    except ValueError:
        raise UsageError(f"{what} must be one of {[int(m) for m in enum]}; got {value!r}") from None


def _tick_arg(tick_size, name) -> int | float:
    """Return ``tick_size`` as a plain int or float (JSON-able), or raise UsageError unless it
    is a finite real number > 0."""
    tick = None
    if isinstance(tick_size, numbers.Real) and not _is_bool(tick_size):
        try:
            tick = int(tick_size) if isinstance(tick_size, numbers.Integral) else float(tick_size)
        except (OverflowError, ValueError):
            tick = None
    if not _positive_number(tick):
        raise UsageError(f"tick_size must be a finite number > 0; got {tick_size!r} for {name!r}")
    return tick


class Engine:
    """A multi-symbol price-time-priority matching engine.

    ``stp`` is the self-trade prevention mode: "none", "cancel_resting", "cancel_incoming" or
    "cancel_both" (or an ``Stp``). ``ownership``: refuse a CANCEL or MODIFY from any trader but
    the order's (NOT_OWNER). ``threads`` > 1 returns an ``exchange.shards.ShardedEngine``
    instead: the symbols split among that many shards, a batch matched on that many threads,
    every output and checkpoint byte-identical to this class's (docs/architecture.md,
    "Threads"); it is how the engine runs, not state, so ``config()`` and checkpoints do not
    hold it. Raises UsageError for an unknown mode, a non-bool ownership or ``threads`` not an
    integer in [1, 64].
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

    def __new__(cls, *args, threads: int = 1, **kwargs):
        # threads > 1 builds the sharded engine instead (exchange.shards: same interface and
        # outputs); threads=1 is this class, its per-call path untouched
        if type(threads) is int and threads == 1:
            return object.__new__(cls)
        from .shards import ShardedEngine, threads_arg

        if threads_arg(threads) == 1:
            return object.__new__(cls)
        return ShardedEngine(*args, threads=threads, **kwargs)

    def __init__(self, stp: str | int = "none", *, ownership: bool = True, capacity: int = 1024,
                 threads: int = 1):
        self._state_args = self._tail = None   # first: __setattr__ of a state array sets them
        capacity = _int_arg(capacity, "capacity", 0, _MAX_ORDERS)
        if not _is_bool(ownership):
            raise UsageError(f"ownership must be a bool; got {ownership!r}")
        self._meta = new_meta(_parse_enum(Stp, stp, "stp"), bool(ownership))
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

    # ---------------------------------------------------------------- symbols and options
    def add_symbol(self, name: str, tick_size: float = 1, min_price: int = 1,
                   max_price: int = MAX_PRICE, *, tick_table=None, lot_size: int = 1,
                   min_order_qty: int = 1, session_close: int = 0, currency: str = "",
                   tick_value: float | None = None, maker_bps: float = 0.0,
                   taker_bps: float = 0.0, reference_price: int = 0, static_band_bps: int = 0,
                   dynamic_band_bps: int = 0, interruption_ns: int = 120_000_000_000,
                   phase: str | int = "continuous") -> int:
        """Add a symbol and return its id (0, 1, 2 ... in order of adding).

        ``tick_size`` is kept as metadata for converting prices at the edges; the engine itself
        works in integer ticks. ``min_price``/``max_price`` bound accepted prices (ticks).
        ``tick_table`` (rows ``(from_price, tick)``; None: ``[(1, 1)]``), ``lot_size``,
        ``min_order_qty`` and ``session_close`` (ns after midnight UTC) decide what the engine
        accepts and when DAY orders expire; ``currency``, ``tick_value``, ``maker_bps`` and
        ``taker_bps`` are money metadata for backtests (docs/semantics.md, "Symbols").
        ``reference_price`` (0: none), ``static_band_bps``, ``dynamic_band_bps`` (0: no band),
        ``interruption_ns`` (the length of a re-opening auction a band breach starts) and
        ``phase`` (the Phase the symbol starts in, a name or code; a call starts with its
        auction pending) are the trading-phase options (docs/semantics.md, Trading phases).
        Raises UsageError naming the symbol and the option for a duplicate name, a tick size
        that is not a finite number > 0, bounds that are not integers, an empty or inverted
        price band, or any option ``symbol_options.normalize`` refuses.
        """
        if not isinstance(name, str) or not name:
            raise UsageError(f"symbol name must be a non-empty string; got {name!r}")
        if name in self._ids:
            raise UsageError(f"symbol {name!r} already added (id {self._ids[name]})")
        opts = dict(lot_size=lot_size, min_order_qty=min_order_qty, session_close=session_close,
                    currency=currency, tick_value=tick_value, maker_bps=maker_bps,
                    taker_bps=taker_bps, reference_price=reference_price,
                    static_band_bps=static_band_bps, dynamic_band_bps=dynamic_band_bps,
                    interruption_ns=interruption_ns, phase=phase)
        if tick_table is not None:
            opts["tick_table"] = tick_table
        try:
            opts = _normalize_options(opts, name)
        except OptionError as e:
            raise UsageError(str(e)) from None
        lo = _int_arg(min_price, f"min_price of {name!r}", *_I64)
        hi = _int_arg(max_price, f"max_price of {name!r}", *_I64)
        if not (1 <= lo <= hi <= MAX_PRICE):
            raise UsageError(
                f"price band must satisfy 1 <= min_price <= max_price <= {MAX_PRICE}; "
                f"got [{min_price}, {max_price}] for {name!r}")
        if not lo <= phase_option(opts, "reference_price") <= hi and opts.get("reference_price"):
            raise UsageError(f"reference_price of {name!r} must be 0 (none) or in [min_price, "
                             f"max_price] = [{lo}, {hi}]; got {reference_price!r}")
        ref = phase_option(opts, "reference_price")
        if ref and ref % [t for f, t in opts["tick_table"] if f <= ref][-1]:
            raise UsageError(f"reference_price of {name!r} is off its tick table "
                             f"{opts['tick_table']}; got {reference_price!r}")
        tick = _tick_arg(tick_size, name)
        sid = len(self._names)
        if 2 * sid + 2 > len(self._book_rows):
            self._book_rows = _grow(self._book_rows[: 2 * sid], 2 * sid + 2)
            self._stop_rows = _grow(self._stop_rows[: 2 * sid], 2 * sid + 2)
            self._symbol_rows = _grow(self._symbol_rows[:sid], sid + 1)
            self._books = self._book_rows[: 2 * sid]
            self._stops = self._stop_rows[: 2 * sid]
        # before the new rows: a repack moves regions
        off = self._alloc_ladder(4 * _INITIAL_LADDER)
        self._books = self._book_rows[: 2 * sid + 2]
        self._stops = self._stop_rows[: 2 * sid + 2]
        self._symbols = self._symbol_rows[: sid + 1]
        for rows, at in ((self._books[2 * sid:], off), (self._stops[2 * sid:],
                                                         off + 2 * _INITIAL_LADDER)):
            rows["min_price"] = lo
            rows["max_price"] = hi
            rows["off"] = [at, at + _INITIAL_LADDER]
            rows["cap"] = _INITIAL_LADDER
        self._set_symbol_row(sid, opts)
        self._names.append(name)
        self._ids[name] = sid
        self._tick_sizes.append(tick)
        self._options.append(opts)
        self._meta[M_NSYM] = len(self._names)
        return sid

    def _set_symbol_row(self, sid: int, opts: dict) -> None:
        """Write symbol ``sid``'s kernel row from its normalized options ``opts`` and append its
        tick table to ``ticks`` (the last trade price is left as it is)."""
        table = opts["tick_table"]
        n = len(table)
        if self._ticks_used + n > len(self._ticks):
            self._ticks = _grow(self._ticks[: self._ticks_used], self._ticks_used + n)
        at = self._ticks_used
        self._ticks["from_price"][at: at + n] = [r[0] for r in table]
        self._ticks["tick"][at: at + n] = [r[1] for r in table]
        self._ticks_used += n
        row = self._symbols[sid]
        row["lot_size"], row["min_order_qty"], row["session_close"] = (
            opts["lot_size"], opts["min_order_qty"], opts["session_close"])
        row["tick_off"], row["tick_n"] = at, n
        # the phase state a symbol starts with; a checkpoint overwrites it with the saved one
        phase = Phase[phase_option(opts, "phase").upper()]
        for key in ("reference_price", "static_band_bps", "dynamic_band_bps", "interruption_ns"):
            row[key] = phase_option(opts, key)
        row["phase"] = int(phase)
        row["auction"] = int(ckpt.CALL_AUCTION.get(phase, 0))
        row["auction_end"] = row["ind_price"] = row["ind_qty"] = row["ind_surplus"] = 0

    def symbol_id(self, symbol: str | int) -> int:
        """Return the id of ``symbol`` (a name or an id). Raises UsageError if unknown."""
        if type(symbol) is str:
            sid = self._ids.get(symbol)
            if sid is not None:
                return sid
        if isinstance(symbol, (int, np.integer)) and not _is_bool(symbol) \
                and 0 <= symbol < len(self._names):
            return int(symbol)
        if isinstance(symbol, str) and symbol in self._ids:
            return self._ids[symbol]
        known = ", ".join(self._names[:10]) + (f" ... ({len(self._names)})"
                                               if len(self._names) > 10 else "")
        raise UsageError(f"unknown symbol {symbol!r}; known: {known or 'none'}")

    @property
    def symbols(self) -> dict[str, int]:
        """Symbol names mapped to ids, in id order."""
        return dict(self._ids)

    @property
    def seq(self) -> int:
        """The seq of the last message processed (0 before any)."""
        return int(self._meta[M_SEQ])

    @property
    def stp(self) -> str:
        """The self-trade prevention mode's name."""
        return Stp(int(self._meta[M_STP])).name.lower()

    @property
    def ownership(self) -> bool:
        """Whether a CANCEL or MODIFY from a trader other than the order's is refused."""
        return bool(self._meta[M_OWNERSHIP])

    def config(self) -> dict:
        """Return the engine's options and symbols as a JSON-able dict (enough to rebuild it
        with ``Engine.from_config``): "stp", "ownership" and per symbol its name, id,
        tick_size, min_price, max_price and every ``add_symbol`` option (the trading-phase
        options only where they differ from their defaults, see ``symbol_options``)."""
        return {
            "stp": self.stp,
            "ownership": self.ownership,
            "symbols": [
                {"name": n, "id": i, "tick_size": self._tick_sizes[i],
                 "min_price": int(self._books[2 * i]["min_price"]),
                 "max_price": int(self._books[2 * i]["max_price"]),
                 **{k: (list(map(list, v)) if k == "tick_table" else v)
                    for k, v in self._options[i].items()}}
                for i, n in enumerate(self._names)
            ],
        }

    @classmethod
    def from_config(cls, cfg: dict, *, threads: int = 1) -> "Engine":
        """Return a fresh engine (no orders) with the options and symbols of ``cfg`` (what
        ``config()`` returns, or one written before some options existed: a missing symbol
        option takes its default and a missing "ownership" is False, as before the option
        existed).

        Raises UsageError naming the key for anything else: a non-dict, an unknown or missing
        key, an id out of order, or a value ``add_symbol`` or ``Engine()`` refuses (``threads``
        as ``Engine()`` takes it)."""
        if not isinstance(cfg, dict):
            raise UsageError(f"from_config takes a dict (Engine.config()); got "
                             f"{type(cfg).__name__}")
        extra = sorted(str(k) for k in cfg.keys() - {"stp", "ownership", "symbols"})
        if extra:
            raise UsageError(f"config has unknown key {extra[0]!r}")
        for key in ("stp", "symbols"):
            if key not in cfg:
                raise UsageError(f"config lacks key {key!r}")
        if not isinstance(cfg["symbols"], list):
            raise UsageError(f"config key 'symbols' must be a list; got {cfg['symbols']!r}")
        eng = cls(stp=cfg["stp"], ownership=cfg.get("ownership", False), threads=threads)
        known = {"name", "id", "tick_size", "min_price", "max_price", *_OPTIONS, *_PHASE_OPTIONS}
        for k, sym in enumerate(cfg["symbols"]):
            if not isinstance(sym, dict):
                raise UsageError(f"config symbols[{k}] must be a dict; got {sym!r}")
            extra = sorted(str(x) for x in sym.keys() - known)
            if extra:
                raise UsageError(f"config symbols[{k}] has unknown key {extra[0]!r}")
            if "name" not in sym:
                raise UsageError(f"config symbols[{k}] lacks key 'name'")
            if sym.get("id", k) != k or _is_bool(sym.get("id", k)):
                raise UsageError(f"config symbols[{k}] key 'id' must be {k} (symbols in id "
                                 f"order); got {sym['id']!r}")
            eng.add_symbol(**{x: v for x, v in sym.items() if x != "id"})
        return eng

    # ---------------------------------------------------------------- processing
    def process(self, orders: np.ndarray, *, out: OutputBuffers | None = None) -> Result:
        """Match a batch of ORDER_DTYPE messages; return their fills, L2 updates and events.

        Message i of the batch gets seq ``self.seq + 1 + i``. Without ``out`` the Result holds
        fresh arrays. With ``out`` (an OutputBuffers) it holds views into those buffers, valid
        until they are written again (growing them when the batch needs more room): a caller
        that consumes each Result before the next batch pays no allocation or page faults per
        batch, and one alternating two sets can read one batch's outputs on another thread
        while the engine writes the next. The bytes are the same either way.
        Raises UsageError if ``orders`` is not a one-dimensional ORDER_DTYPE array or ``out`` is
        not None or an OutputBuffers; never raises on message content.
        """
        if not isinstance(orders, _ndarray) or orders.dtype != ORDER_DTYPE or orders.ndim != 1:
            got = getattr(orders, "dtype", type(orders).__name__)
            raise UsageError(f"process() takes a 1-d numpy array of ORDER_DTYPE; got {got}")
        orders = _ascontiguous(orders)
        if out is None:
            if len(orders) <= _SMALL:
                return self._process_small(orders)
            out = OutputBuffers(len(orders))
        elif not isinstance(out, OutputBuffers):
            raise UsageError(f"process(out=...) takes an OutputBuffers; got {type(out).__name__}")
        cnt = self._cnt
        cnt.fill(0)
        ahead = self.prefetch_distance
        tuner = self._prefetch_tuner
        if tuner is not None and len(orders) >= _tuning.MIN_BATCH and type(ahead) is int \
                and ahead > 0:
            # a long batch span by span, each tried and decided as a batch of its own
            # (prefetch_tuning, "Why spans")
            for s in range(0, len(orders), _tuning.SPAN):
                self._tuned(orders[s: s + _tuning.SPAN], out, cnt, ahead, tuner)
        else:
            self._match(orders, out, cnt, ahead)
        b0, b1, b2 = cnt.tolist()
        return _new_tuple(Result, (out.fills[:b0], out.l2[:b1], out.events[:b2]))

    def _tuned(self, orders: np.ndarray, out: OutputBuffers, cnt: np.ndarray, ahead: int,
               tuner) -> None:
        """Match ``orders`` (at most one span) after ``tuner``'s trial when it plans one: four
        slices with and without prefetching (distance ``ahead``), timed; the rest the way the
        tuner then chooses."""
        cut = tuner.plan(len(orders))
        if cut:
            took = [0, 0]     # kernel ns of the slices with prefetching, without
            for k, on in enumerate(tuner.trial_order()):
                took[not on] += self._match(orders[k * cut: (k + 1) * cut], out, cnt,
                                            ahead if on else 0, tuner.clock)
            tuner.result(*took)
            orders = orders[4 * cut:]
        self._match(orders, out, cnt, ahead if tuner.prefetching else 0)

    def _match(self, orders: np.ndarray, out: OutputBuffers, cnt: np.ndarray, ahead,
               clock=None) -> int:
        """Run ``process_batch`` over ``orders`` with prefetch distance ``ahead``, writing
        ``out``'s arrays from the rows ``cnt`` counts (growing the engine's state and ``out``'s
        arrays as the kernel asks); return the ns ``clock`` saw spent in the kernel (growth not
        counted; 0 without a clock)."""
        fills, l2, events = out.fills, out.l2, out.events
        call = self._caller(orders, fills, l2, events)
        t0 = clock() if clock else 0
        status, start = call(orders, 0, *(self._state_args or self._cache_state()), fills, l2,
                             events, cnt, ahead)
        took = clock() - t0 if clock else 0
        if status != kernels.OK:
            while status != kernels.OK:
                if status == kernels.NEED_OUTPUT:
                    used = cnt.tolist()
                    fills = _grow_output(fills, used[0], int(self._meta[M_NEED_FILLS]))
                    l2 = _grow_output(l2, used[1], int(self._meta[M_NEED_L2]))
                    events = _grow_output(events, used[2], int(self._meta[M_NEED_EVENTS]))
                    call = self._caller(orders, fills, l2, events)
                else:
                    self.grow(status)
                t0 = clock() if clock else 0
                status, start = call(orders, start, *(self._state_args or self._cache_state()),
                                     fills, l2, events, cnt, ahead)
                took += clock() - t0 if clock else 0
            out.fills, out.l2, out.events = fills, l2, events
        return took

    def _process_small(self, orders: np.ndarray) -> Result:
        """``process(orders)`` of a small batch, without ``out``: the outputs go to the engine's
        rolling buffers, each call's rows after the previous call's, and the Result views them.

        Why it is safe: no row is written twice. When the buffers lack room the kernel says so
        before writing a message's rows (NEED_OUTPUT), and fresh zeroed buffers take over
        (``_roll_over``); the old ones live as long as Results view them. So a Result is never
        overwritten by a later call, and its bytes are those of fresh zeroed outputs.

        The fast case is one call of the kernel's entry point with the cached argument tail
        (``_tail``: state arrays, rolling buffers, counters, prefetch distance), valid while
        none of them is replaced; anything else goes through ``_process_rolling``."""
        tail = self._tail
        if tail is None:
            return self._process_rolling(orders, -1, 0)
        roll = self._roll
        fills, l2, events, cnt, (a0, a1, a2) = roll
        status, start = _PROCESS(orders, 0, *tail)
        if status != 0:     # kernels.OK
            return self._process_rolling(orders, status, start)
        b0, b1, b2 = roll[4] = cnt.tolist()
        return _new_tuple(Result, (fills[a0: b0], l2[a1: b1], events[a2: b2]))

    def _process_rolling(self, orders: np.ndarray, status: int, start: int) -> Result:
        """``_process_small`` from ``start`` with the kernel's last ``status`` (-1: not started):
        grows state or rolls the buffers over as the kernel asks, then caches ``_tail``."""
        fills, l2, events, cnt, a = self._roll or self._new_roll()
        try:
            while status != kernels.OK:
                if status == kernels.NEED_OUTPUT:
                    a = self._roll_over(a)
                    fills, l2, events, cnt, _ = self._roll
                elif status != -1:
                    self.grow(status)
                status, start = self._caller(orders, fills, l2, events)(
                    orders, start, *(self._state_args or self._cache_state()), fills, l2,
                    events, cnt, self.prefetch_distance)
        finally:     # even if growing fails: the next call's rows start after this one's
            b = self._roll[4] = self._roll[3].tolist()
        ahead = self.prefetch_distance
        if _PROCESS is not None and type(ahead) is int and _I64_MIN <= ahead <= _I64_MAX:
            self._tail = (*(self._state_args or self._cache_state()), fills, l2, events, cnt,
                          ahead)
        return Result(fills[a[0]: b[0]], l2[a[1]: b[1]], events[a[2]: b[2]])

    def _new_roll(self, fills_rows: int = 0, l2_rows: int = 0, events_rows: int = 0) -> list:
        """Make fresh rolling buffers with room for _ROLL_MESSAGES messages (at least the rows
        given), their counters at 0; return them as [fills, l2, events, cnt, cnt as a list]."""
        b = OutputBuffers(_ROLL_MESSAGES)
        fills, l2, events = b.fills, b.l2, b.events
        if fills_rows > len(fills):
            fills = np.zeros(fills_rows, FILL_DTYPE)
        if l2_rows > len(l2):
            l2 = np.zeros(l2_rows, L2_DTYPE)
        if events_rows > len(events):
            events = np.zeros(events_rows, EVENT_DTYPE)
        self._roll = [fills, l2, events, np.zeros(3, np.int64), [0, 0, 0]]
        self._tail = None
        return self._roll

    def _roll_over(self, a: list) -> list:
        """On NEED_OUTPUT in the rolling buffers: move this call's rows so far (from ``a``, the
        counters when it began) to fresh buffers with room for what the kernel asks (the
        ``M_NEED_*`` totals, less ``a``), set their counters after those rows; return the new
        start, [0, 0, 0]."""
        fills, l2, events, cnt, _ = self._roll
        b = cnt.tolist()
        need = [int(self._meta[k]) - lo
                for k, lo in zip((M_NEED_FILLS, M_NEED_L2, M_NEED_EVENTS), a)]
        roll = self._new_roll(*need)
        for old, new, lo, hi in zip((fills, l2, events), roll, a, b):
            new[: hi - lo] = old[lo: hi]
        roll[3][:] = [hi - lo for lo, hi in zip(a, b)]
        return [0, 0, 0]

    def _caller(self, orders, fills, l2, events):
        """Return what to call ``kernels.process_batch`` through for these arguments: its
        compiled entry point (``_entry``) when every argument has the types it was compiled for
        (engine state, a C-contiguous ORDER_DTYPE array, plain C arrays of the output dtypes, an
        int prefetch distance), else the numba dispatcher itself (which types them and compiles
        a new specialisation if need be, as before).

        A read-only batch is passed to the entry point compiled for writeable ones: the kernel
        never writes the batch (numba compiles it for read-only arrays too, which it refuses
        for code that writes them), so the code is the same; this also spares a caller with a
        read-only batch (``np.frombuffer``) a second compile of the kernel. The output arrays
        checked last are remembered (weakly) and not checked again: changing an array's flags
        or shape in place (``a.flags.writeable = False``) is not supported; replace it."""
        global _PROCESS
        ahead = self.prefetch_distance
        if not (type(ahead) is int and _I64_MIN <= ahead <= _I64_MAX):
            return kernels.process_batch
        seen = self._checked      # the output arrays checked last, weakly held
        if seen is None or seen[0]() is not fills or seen[1]() is not l2 \
                or seen[2]() is not events:
            if not (_plain(fills, FILL_DTYPE) and _plain(l2, L2_DTYPE)
                    and _plain(events, EVENT_DTYPE)):
                return kernels.process_batch
            self._checked = (weakref.ref(fills), weakref.ref(l2), weakref.ref(events))
        if _PROCESS is None:
            if not orders.flags.writeable:
                orders = orders.copy()     # the types of the entry point: writeable arrays
            args = self._state_args or self._cache_state()
            _PROCESS = _entry(kernels.process_batch, (orders, 0, *args, fills, l2, events,
                                                      np.zeros(3, np.int64), ahead))
        return _PROCESS

    def _cache_state(self) -> tuple:
        """Return the state arrays as a tuple, cached until one is replaced (``__setattr__``)."""
        args = tuple(self.state)
        self._state_args = args
        return args

    def __getstate__(self) -> dict:
        # a copy or an unpickled engine gets rolling buffers of its own (at its first small
        # call): two engines writing one set would overwrite each other's Results
        d = dict(self.__dict__)
        d["_roll"] = d["_state_args"] = d["_tail"] = d["_row"] = d["_checked"] = None
        if d.get("_prefetch_tuner") is not None:    # timings of this machine and run only
            d["_prefetch_tuner"] = _tuning.PrefetchTuner()
        return d

    @property
    def prefetch_tuning(self) -> bool:
        """Whether batches of at least ``prefetch_tuning.MIN_BATCH`` messages time prefetching
        on and off now and then and keep the faster (``exchange.prefetch_tuning``; default
        True). False: every batch prefetches ``prefetch_distance`` messages ahead. Either way
        the outputs are the same bytes."""
        return self._prefetch_tuner is not None

    @prefetch_tuning.setter
    def prefetch_tuning(self, on: bool) -> None:
        if not _is_bool(on):
            raise UsageError(f"prefetch_tuning must be a bool; got {on!r}")
        if bool(on) != (self._prefetch_tuner is not None):
            self._prefetch_tuner = _tuning.PrefetchTuner() if on else None

    # ---------------------------------------------------------------- the state arrays
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

    # ---------------------------------------------------------------- per-order API
    def submit(self, symbol: str | int, side: str | int, *, qty: int, price: int = 0,
               order_type: str | int = "limit", tif: str | int = "gtc", post_only: bool = False,
               trader: int = 0, order_id: int | None = None, ts: int | None = None,
               stop_price: int = 0, display_qty: int = 0, min_qty: int = 0,
               expire_ts: int = 0) -> Result:
        """Send one NEW order; return its Result (same bytes as ``process`` on that message).

        Without ``order_id`` the engine takes its next id not live on the symbol. ``ts``
        defaults to 0. ``stop_price``: a STOP or STOP_LIMIT's trigger; ``display_qty``: an
        iceberg's shown size (0: all shown); ``min_qty``: fill at least this much at once or
        reject (0: none); ``expire_ts``: a GTD order's expiry (ns, message clock). Raises
        UsageError for an unknown symbol, side, order type or tif (name or code), or an argument
        its message field cannot hold: qty, price, ts, stop_price, display_qty, min_qty and
        expire_ts must be integers in int64, order_id in uint64, trader in uint32 (ints, numpy
        integers or integral floats; never bool), post_only a bool. Values the field holds but
        the engine refuses (qty <= 0, a price out of band ...) are not errors: they come back as
        a REJECTED event.
        """
        sid = self.symbol_id(symbol)
        # checked in the order of old (a UsageError names the first bad argument as before);
        # each int check inline first (a call per argument was a third of submit's cost)
        side = _enum_arg(_SIDES, Side, side, "side")
        order_type = _enum_arg(_TYPES, OrderType, order_type, "order_type")
        tif = _enum_arg(_TIFS, Tif, tif, "tif")
        if type(trader) is not int or not 0 <= trader <= _U32_MAX:
            trader = _int_arg(trader, "trader", *_U32)
        if type(stop_price) is not int or not _I64_MIN <= stop_price <= _I64_MAX:
            stop_price = _int_arg(stop_price, "stop_price", *_I64)
        if type(display_qty) is not int or not _I64_MIN <= display_qty <= _I64_MAX:
            display_qty = _int_arg(display_qty, "display_qty", *_I64)
        if type(min_qty) is not int or not _I64_MIN <= min_qty <= _I64_MAX:
            min_qty = _int_arg(min_qty, "min_qty", *_I64)
        if type(expire_ts) is not int or not _I64_MIN <= expire_ts <= _I64_MAX:
            expire_ts = _int_arg(expire_ts, "expire_ts", *_I64)
        if type(qty) is not int or not _I64_MIN <= qty <= _I64_MAX:
            qty = _int_arg(qty, "qty", *_I64)
        if type(price) is not int or not _I64_MIN <= price <= _I64_MAX:
            price = _int_arg(price, "price", *_I64)
        if ts is None:
            ts = 0
        elif type(ts) is not int or not _I64_MIN <= ts <= _I64_MAX:
            ts = _int_arg(ts, "ts", *_I64)
        if post_only is False:
            flags = 0
        elif _is_bool(post_only) or (type(post_only) is int and post_only in (0, 1)):
            flags = _POST_ONLY if post_only else 0
        else:
            raise UsageError(f"post_only must be a bool; got {post_only!r}")
        if order_id is None:
            order_id = self._next_auto_id
            find = _INDEX_FIND or _index_find_entry(self._index, sid, order_id)
            while order_id <= _U64_MAX and find(self._index, sid, order_id) >= 0:
                order_id += 1
            if order_id > _U64_MAX:
                raise UsageError("no automatic order id is left below 2^64 on "
                                 f"{self._names[sid]!r}; pass order_id")
            _setattr(self, "_next_auto_id", order_id + 1)   # not a cached argument
        elif type(order_id) is not int or not 0 <= order_id <= _U64_MAX:
            order_id = _int_arg(order_id, "order_id", *_U64)
        row = self._row
        if row is None:
            return self._process_small(self._message(
                _NEW, sid, order_id, price, qty, ts, trader, side, order_type, tif, flags,
                stop_price, display_qty, min_qty, expire_ts))
        _ROW.pack_into(row[1], 0, ts, order_id, price, qty, sid, trader, _NEW, order_type, tif,
                       flags, side, stop_price, display_qty, min_qty, expire_ts, 0)
        return self._process_small(row[0])     # _message, inline (a call less)

    def cancel(self, symbol: str | int, order_id: int, *, trader: int = 0,
               ts: int | None = None) -> Result:
        """Cancel a live order for ``trader``; return the Result (a REJECTED event if it is not
        live, or NOT_OWNER if ownership is on and ``trader`` is not the order's).

        Raises UsageError for an unknown symbol, an order_id that is not an integer in uint64,
        a trader not in uint32 or a ts that is not an integer in int64."""
        sid = self.symbol_id(symbol)
        order_id = _int_arg(order_id, "order_id", *_U64)
        return self._process_small(self._message(Kind.CANCEL, sid, order_id, 0, 0,
                                                 self._ts_arg(ts),
                                                 trader=_int_arg(trader, "trader", *_U32)))

    def modify(self, symbol: str | int, order_id: int, *, price: int, qty: int,
               trader: int = 0, ts: int | None = None, stop_price: int = 0) -> Result:
        """Change a live order's price and open quantity (displayed plus reserve), and a pending
        stop's ``stop_price``, for ``trader``; return the Result (see semantics.md, MODIFY;
        NOT_OWNER if ownership is on and ``trader`` is not the order's).

        Raises UsageError for an unknown symbol or an argument its field cannot hold (order_id
        uint64; price, qty, ts, stop_price int64; trader uint32); refused values in range come
        back as a
        REJECTED event."""
        sid = self.symbol_id(symbol)
        order_id = _int_arg(order_id, "order_id", *_U64)
        price, qty = _int_arg(price, "price", *_I64), _int_arg(qty, "qty", *_I64)
        return self._process_small(self._message(
            Kind.MODIFY, sid, order_id, price, qty, self._ts_arg(ts),
            trader=_int_arg(trader, "trader", *_U32),
            stop_price=_int_arg(stop_price, "stop_price", *_I64)))

    def set_phase(self, symbol: str | int, phase: str | int, *, ts: int | None = None,
                  reference_price: int = 0, end_ts: int = 0) -> Result:
        """Send one PHASE message moving ``symbol`` to ``phase`` (a Phase, its name or code);
        return its Result (same bytes as ``process`` on that message): the uncross when the
        target ends an auction, the PHASE event, the indicative of a call it enters.
        ``reference_price`` > 0 sets the reference price first (0 keeps it); ``end_ts``: with
        target REOPENING_AUCTION, when it uncrosses (0: at a later PHASE message).

        Raises UsageError for an unknown symbol or phase, or an argument its field cannot hold
        (reference_price, ts, end_ts int64); refused values in range (a negative price, an end
        not after ``ts`` ...) come back as a REJECTED event."""
        sid = self.symbol_id(symbol)
        code = _enum_arg(_PHASES, Phase, phase, "phase")
        price = _int_arg(reference_price, "reference_price", *_I64)
        return self._process_small(self._message(Kind.PHASE, sid, 0, price, 0,
                                                 self._ts_arg(ts), phase=code,
                                                 expire_ts=_int_arg(end_ts, "end_ts", *_I64)))

    def phase(self, symbol: str | int) -> Phase:
        """Return the Phase ``symbol`` is in. Raises UsageError for an unknown symbol."""
        return Phase(int(self._symbols[self.symbol_id(symbol)]["phase"]))

    def indicative(self, symbol: str | int) -> tuple[int, int, int]:
        """Return the last indicative uncross published for ``symbol`` as (price, volume,
        surplus) (surplus > 0: buy side); (0, 0, 0) when the symbol is not in a call or
        nothing would execute. Raises UsageError for an unknown symbol."""
        row = self._symbols[self.symbol_id(symbol)]
        if Phase(int(row["phase"])) not in CALL_PHASES:
            return 0, 0, 0
        return int(row["ind_price"]), int(row["ind_qty"]), int(row["ind_surplus"])

    def next_deadline(self) -> int:
        """Return the earliest time (ns, the message clock) at which the engine will act by
        itself: a DAY or GTD order expiring or a re-opening auction ending; 0 if none is
        pending. It acts only when a message with ``ts`` at or after it arrives (a live venue
        sends one then: the gateway's clock message). Raises nothing."""
        times = []
        if int(self._meta[M_EXPIRY_N]) > 0:
            times.append(int(self._expiry[0]["expire_ts"]))
        if int(self._meta[M_NEXT_END]) > 0:
            times.append(int(self._meta[M_NEXT_END]))
        return min(times) if times else 0

    @staticmethod
    def _ts_arg(ts) -> int:
        return 0 if ts is None else _int_arg(ts, "ts", *_I64)

    def _message(self, kind, sid, order_id, price, qty, ts, trader=0, side=0, order_type=0,
                 tif=0, flags=0, stop_price=0, display_qty=0, min_qty=0, expire_ts=0,
                 phase=0) -> np.ndarray:
        """Return the one-row ORDER_DTYPE message of these fields (every value checked against
        its field's range, so nothing can fail): the engine's reused row, packed in one struct
        call (the caller processes it at once; nothing keeps it). ``self._row`` is set only
        when ``_ROW`` is (submit packs into it directly once it is)."""
        row = self._row
        if _ROW is None:
            return self._message_fields(kind, sid, order_id, price, qty, ts, trader=trader,
                                        side=side, order_type=order_type, tif=tif, flags=flags,
                                        stop_price=stop_price, display_qty=display_qty,
                                        min_qty=min_qty, expire_ts=expire_ts, phase=phase)
        if row is None:
            m = np.zeros(1, ORDER_DTYPE)
            row = self._row = (m, m.view(np.uint8))
        _ROW.pack_into(row[1], 0, ts, order_id, price, qty, sid, trader, kind, order_type, tif,
                       flags, side, stop_price, display_qty, min_qty, expire_ts, phase)
        return row[0]

    @staticmethod
    def _message_fields(kind, sid, order_id, price, qty, ts, **fields) -> np.ndarray:
        # every value was checked against its field's range, so these assignments cannot fail
        m = np.zeros(1, ORDER_DTYPE)
        m["kind"] = kind
        m["symbol"] = sid
        m["order_id"] = order_id
        m["price"] = price
        m["qty"] = qty
        m["ts"] = ts
        for k, v in fields.items():
            m[k] = v
        return m

    # ---------------------------------------------------------------- views of the book
    def depth(self, symbol: str | int, levels: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Return (bids, asks): DEPTH_DTYPE arrays (price, qty, count), best level first."""
        sid = self.symbol_id(symbol)
        sides = []
        for side in (Side.BUY, Side.SELL):
            bk = self._books[2 * sid + side]
            o, n = int(bk["off"]), int(bk["n"])
            lv = self._ladder_levels[o: o + n][::-1][: max(levels, 0)]
            out = np.zeros(len(lv), DEPTH_DTYPE)
            out["price"] = self._levels["price"][lv]
            out["qty"] = self._levels["qty"][lv]
            out["count"] = self._levels["count"][lv]
            sides.append(out)
        return sides[0], sides[1]

    def orders(self, symbol: str | int) -> np.ndarray:
        """Return the resting orders of ``symbol`` (L3_DTYPE): bids best first, then asks; FIFO.

        ``qty`` is the displayed quantity, ``hidden`` an iceberg's reserve (open = qty + hidden);
        pending stops are not in the book (see ``stops``). Raises UsageError for an unknown
        symbol."""
        return self._l3(self._collect([self.symbol_id(symbol)], 1))

    def stops(self, symbol: str | int) -> np.ndarray:
        """Return the pending stops of ``symbol`` (L3_DTYPE) in release order: BUY stops by
        rising ``stop_price``, then SELL stops by falling ``stop_price``, FIFO among equal ones.
        ``qty`` is a stop's whole quantity, ``price`` its limit (0 for a STOP). Raises
        UsageError for an unknown symbol."""
        return self._l3(self._collect([self.symbol_id(symbol)], 2))

    @staticmethod
    def _l3(rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), L3_DTYPE)
        for name in L3_DTYPE.names:
            out[name] = rows[name]
        return out

    @property
    def live_orders(self) -> int:
        """Number of live orders over all symbols: resting orders and pending stops."""
        return int(self._meta[M_INDEX_COUNT])

    def memory_bytes(self) -> int:
        """Bytes held by the book state arrays (arena and its ext rows, levels, index, ladders, stop books,
        symbol rows, tick tables, expiry heap)."""
        return sum(a.nbytes for a in self.state)

    def _collect(self, symbols: list[int], which: int = 3) -> np.ndarray:
        """Return the CHECKPOINT_DTYPE rows of ``symbols``' resting orders (``which`` 1), pending
        stops (2) or both, resting first (3), in ``checkpoint_kernels.collect_orders`` order."""
        out = np.zeros(self.live_orders, CHECKPOINT_DTYPE)
        k = ck_kernels.collect_orders(self._books, self._stops, self._levels, self._arena,
                                      self._arena_ext, self._ladder_levels,
                                      np.asarray(symbols, dtype=np.int64), out, which)
        return out[:k]

    # ---------------------------------------------------------------- checkpoints
    def _state_header(self) -> dict:
        return ckpt.make_header(self.config(), self.seq, int(self._meta[M_TRADE_ID]),
                                self._next_auto_id, self._symbols["last_price"].tolist(),
                                ckpt.phase_state(self._symbols, self._options))

    def _uses_new_fields(self) -> bool:
        """Whether a live order is a pending stop or has a reserve, a display size, an expiry
        or a tif other than GTC (what version 1 checkpoints cannot hold)."""
        if self._meta[M_STOPS_LIVE] or self._meta[M_EXPIRY_N]:
            return True
        rows = self._collect(list(range(len(self._names))), 1)
        return bool(rows["display_qty"].any() or rows["tif"].any())

    def checkpoint(self) -> bytes:
        """Return the engine's exact state as bytes (restore with ``Engine.restore``), in the
        layout ``exchange.checkpoint`` defines: header JSON (options, symbols, counters), then
        the live orders in priority order, framed and CRC32C-checked."""
        return ckpt.encode(self._state_header(), self._collect(list(range(len(self._names)))))

    def checkpoint_equals(self, blob) -> bool:
        """Return ``self.checkpoint() == blob`` without serialising the book; for a version 1
        blob (written before stops, icebergs, expiry and last prices), whether this state
        written as then would be ``blob``: its header in the old form (ownership off, default
        options; last prices are not compared, version 1 never held them) and its rows read with
        every new field zero. So reruns of old journals still compare their checkpoints.

        The blob's frame is checked (``checkpoint.frame``), its header compared as bytes, and
        its rows checked in place against the live orders (``checkpoint_kernels.orders_equal``:
        one lookup per row, prefetched, instead of walking every queue and copying it out).
        Anything that is not a checkpoint of this layout is simply unequal: it never raises.
        """
        try:
            view = memoryview(blob).cast("B")
            head, rows, _ = ckpt.frame(view)
        except (CorruptionError, TypeError):
            return False
        if len(rows) != self.live_orders:
            return False
        if ckpt.row_version(view) == 1:
            # as written before last prices existed (orders_equal then rules out new fields)
            header = ckpt.make_header(self.config(), self.seq, int(self._meta[M_TRADE_ID]),
                                      self._next_auto_id, [0] * len(self._names),
                                      ckpt.phase_state(self._symbols, self._options))
            if "last_prices" in header or head != ckpt.header_bytes(header):
                return False
        else:
            header = self._state_header()
            if head != ckpt.header_bytes(header):
                return False
            if "last_prices" not in header and not self._uses_new_fields():
                return False      # this state is written in version 1
        return bool(ck_kernels.orders_equal(rows, self._books, self._stops, self._levels,
                                            self._arena, self._arena_ext, self._index,
                                            len(self._names),
                                            self.prefetch_distance))

    @classmethod
    def restore(cls, blob: bytes, *, threads: int = 1) -> "Engine":
        """Return a new engine in exactly the state ``blob`` (from ``checkpoint``) describes.

        Everything is checked before state is built, so ``restore(b).checkpoint() == b`` for
        every blob of the current version it accepts (a version 1 blob restores to the same
        state, written back in the current version): the frame (magic, CRC32C, version, a
        header length and row count that fit the blob, checked before allocating), the header
        (the canonical JSON of ``checkpoint``: known stp, symbols with ids 0, 1 ..., distinct
        names, finite tick sizes > 0, integer bands within 1..MAX_PRICE, counters in range) and
        every row (``check_rows``: known symbol and side, quantities in range, price in band,
        the fields of stops, icebergs and expiry consistent, resting orders in priority order
        then pending stops in release order, no crossed book and no resting MARKET but in a
        call; no duplicate order id per symbol) and the symbols' phase state (header
        ``phases``: known phases and auctions, prices in band). Pending stops go back into
        their stop books and DAY/GTD orders into the expiry heap. Linear in symbols and rows.
        Raises UsageError if ``blob`` is not bytes-like; CorruptionError ("checkpoint: ...",
        with the row index or header field, and the byte offset) for anything else wrong.
        ``threads`` > 1: the same state in a ``ShardedEngine`` (as ``Engine()`` takes it).
        """
        if not (type(threads) is int and threads == 1):
            from .shards import ShardedEngine, threads_arg

            if threads_arg(threads) > 1:
                return ShardedEngine.restore(blob, threads=threads)
        try:
            if not isinstance(blob, bytes):   # bytes need no copy
                blob = bytes(memoryview(blob).cast("B"))
        except TypeError:
            raise UsageError(f"restore() takes the bytes of a checkpoint; got "
                             f"{type(blob).__name__}") from None
        ck = ckpt.parse(blob)
        eng = cls._restore_part(ck, ckpt.row_size(blob))
        if ckpt.version_for(eng._state_header(), ck.rows) != ckpt.row_version(blob):
            raise CorruptionError(
                f"checkpoint: version {ckpt.row_version(blob)} is not the one checkpoint() "
                f"writes for this state ({ckpt.version_for(eng._state_header(), ck.rows)})",
                offset=8)
        if ckpt.header_bytes(eng._state_header()) != ck.header:
            raise CorruptionError("checkpoint: header is not in canonical form (checkpoint() "
                                  "writes sorted-key JSON with default separators)", offset=16)
        return eng

    @classmethod
    def _restore_part(cls, ck: ckpt.Checkpoint, row_size: int, symbols=None,
                      rows=None) -> "Engine":
        """Return an engine in the state of the parsed checkpoint ``ck`` (``row_size`` bytes a
        row in its blob), or, for a shard (``exchange.shards``), of only the symbols in the
        bool mask ``symbols`` with the rows in the bool mask ``rows``: the other symbols then
        hold no orders and are as their options start them (no auction end to run). Raises
        CorruptionError naming the first bad row."""
        keep = ck.rows if rows is None else ck.rows[rows]
        phases = ck.phases
        if symbols is not None and phases is not None:
            phases = [p if mine else ckpt.start_state(sp[4])
                      for p, mine, sp in zip(phases, symbols, ck.symbols)]
        eng = cls(stp=ck.stp, ownership=ck.ownership,
                  capacity=min(max(2 * len(keep), 1024), _MAX_ORDERS))
        eng._load_checkpoint(ck.symbols, keep, ck.rows_at, row_size, phases)
        eng._symbols["last_price"] = ck.last_prices
        ends = eng._symbols["auction_end"]   # the kernels keep the earliest re-opening end
        eng._meta[M_NEXT_END] = int(ends[ends > 0].min()) if (ends > 0).any() else 0
        eng._meta[M_SEQ], eng._meta[M_TRADE_ID], eng._next_auto_id = ck.counters
        return eng

    def _load_checkpoint(self, specs: list, rows: np.ndarray, start: int,
                         row_size: int = CHECKPOINT_DTYPE.itemsize, phases=None) -> None:
        """Build this (new, empty) engine's symbols from ``specs`` (name, tick, min, max,
        options) and their phase state ``phases`` (``Checkpoint.phases``; None: as the options
        start them), and its books, stop books and expiry heap from checkpoint ``rows`` (at
        byte ``start`` of the blob, ``row_size`` bytes each there), in one pass each: every
        array is sized once. Raises CorruptionError naming the first bad row."""
        nsym, n = len(specs), len(rows)
        books = np.zeros(2 * nsym, BOOK_DTYPE)
        books["min_price"] = np.repeat(np.array([sp[2] for sp in specs], np.int64), 2)
        books["max_price"] = np.repeat(np.array([sp[3] for sp in specs], np.int64), 2)
        level_count = np.zeros(2 * nsym, np.int64)
        stop_level_count = np.zeros(2 * nsym, np.int64)
        rows = np.ascontiguousarray(rows)
        # the symbols first: whether each has an auction pending decides what its rows may be
        self._symbol_rows = self._symbols = np.zeros(nsym, SYMBOL_DTYPE)
        for sid in range(nsym):
            self._set_symbol_row(sid, specs[sid][4])
        ckpt.apply_phase_state(self._symbols, phases)
        calls = (self._symbols["auction"] != 0).astype(np.int64)
        code, i = ck_kernels.check_rows(rows, books, nsym, level_count, stop_level_count, calls)
        if code != ck_kernels.ROW_OK:
            raise CorruptionError(ckpt.row_problem(code, int(i), rows, specs),
                                  offset=start + int(i) * row_size)
        # each ladder region holds its levels with room to double before it must grow; the
        # stop books' regions follow the order books'
        stops = books.copy()
        caps = np.maximum(2 * np.concatenate([level_count, stop_level_count]), _INITIAL_LADDER)
        offs = np.cumsum(caps) - caps
        books["off"], stops["off"] = offs[: 2 * nsym], offs[2 * nsym:]
        books["cap"], stops["cap"] = caps[: 2 * nsym], caps[2 * nsym:]
        books["n"], stops["n"] = level_count, stop_level_count
        used = int(caps.sum())
        self._ladder_keys = np.zeros(used + 64, np.int64)
        self._ladder_levels = np.zeros(used + 64, np.int32)
        self._ladder_used = used
        self._book_rows = self._books = books
        self._stop_rows = self._stops = stops
        self._options = [sp[4] for sp in specs]
        self._names = [sp[0] for sp in specs]
        self._ids = {name: k for k, name in enumerate(self._names)}
        self._tick_sizes = [sp[1] for sp in specs]
        self._meta[M_NSYM] = nsym
        if len(self._arena) < n:
            used = int(self._meta[M_ORDER_HW])
            self._arena = _grow(self._arena, n)
            self._arena_ext = _grow_cold(self._arena_ext, self._arena, used, len(self._arena))
        nlevels = int(level_count.sum() + stop_level_count.sum())
        if len(self._levels) < nlevels:
            self._levels = _grow(self._levels, nlevels)
        if len(self._index) < 2 * n + 2:
            self._index = new_index(2 * n + 2)
        nexp = int(np.count_nonzero(rows["expire_ts"]))
        if len(self._expiry) < nexp:
            self._expiry = _grow(self._expiry, nexp)
        dup = ck_kernels.load_orders(rows, self._arena, self._arena_ext, self._levels,
                                     self._index, self._books, self._stops, self._ladder_keys,
                                     self._ladder_levels, self._meta, self._expiry)
        if dup >= 0:
            r = rows[dup]
            raise CorruptionError(
                f"checkpoint: row {dup}: duplicate order id {int(r['order_id'])} on symbol "
                f"{specs[int(r['symbol'])][0]!r} (an earlier row holds it)",
                offset=start + int(dup) * row_size)

    def state_hash(self) -> str:
        """Return a hex digest of the canonical state (options, counters, books in priority order).

        Two engines with equal hashes produce identical outputs for the same future input.
        """
        h = hashlib.blake2b(digest_size=16)
        h.update(ckpt.header_bytes(self._state_header()))
        h.update(self._collect(list(range(len(self._names)))).tobytes())
        return h.hexdigest()
