"""``Engine``: the Python facade over the numba matching kernels.

The engine owns the book state arrays (``exchange.book``), validates what Python callers hand it
(dtypes, symbol names, option strings: misuse raises ``UsageError``), and runs
``kernels.process_batch`` over whole batches, growing state and output arrays when the kernel
asks. Message *content* never raises: bad messages come back as REJECTED events.

Invariants:
- ``process`` on a batch and the same messages one at a time (or through ``submit``, ``cancel``,
  ``modify``) produce byte-identical outputs: the per-order calls build a one-row batch.
- Output arrays are zero-initialised, so padding bytes are zero and outputs compare byte for byte.
- ``checkpoint()`` is canonical (live orders in priority order, counters, options): two engines
  with equal checkpoints produce equal outputs from then on, and ``state_hash`` hashes it.
  ``restore`` checks a blob's every field and row first (a CorruptionError "checkpoint: ..."
  otherwise), so ``restore(b).checkpoint() == b`` for every blob it accepts.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import struct
from typing import NamedTuple

import crc32c
import numpy as np

from . import kernels
from .book import (
    ARENA_DTYPE, BOOK_DTYPE, LEVEL_DTYPE, M_INDEX_COUNT, M_NEED_BOOK, M_NEED_EVENTS,
    M_NEED_FILLS, M_NEED_L2, M_NSYM, M_SEQ, M_STP, M_TRADE_ID, new_meta,
)
from .errors import CorruptionError, UsageError
from .order_index import index_find, new_index, rehash_into
from .schema import (
    CHECKPOINT_DTYPE, DEPTH_DTYPE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, L3_DTYPE, MAX_LEVEL_QTY,
    MAX_PRICE, MAX_QTY, ORDER_DTYPE, Flag, Kind, OrderType, Side, Stp, Tif,
)

__all__ = ["Engine", "Result", "OutputBuffers"]

_CHECKPOINT_MAGIC = b"EXSIMCKP"
_CHECKPOINT_VERSION = 1
_INITIAL_LADDER = 8
_MAX_ORDERS = (1 << 31) - 1   # arena slots, levels and their links are int32


class OutputBuffers:
    """Arrays an Engine writes a batch's fills, L2 updates and events into (``Engine.process(
    orders, out=buffers)``): allocated once, so a caller that consumes each Result before it
    reuses the buffers pays no allocation or page faults per batch. The engine replaces an array
    by a larger copy when a batch needs more room. Sized for ``n_messages`` as ``process`` sizes
    fresh outputs (np.zeros maps untouched pages lazily, so generous costs nothing)."""

    __slots__ = ("fills", "l2", "events")

    def __init__(self, n_messages: int = 0):
        n = max(int(n_messages), 0)
        self.fills = np.zeros(n // 2 + 1024, FILL_DTYPE)
        self.l2 = np.zeros(n + n // 2 + 1024, L2_DTYPE)
        self.events = np.zeros(2 * n + n // 2 + 1024, EVENT_DTYPE)


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


# the range of each message field a per-order call fills in (its ORDER_DTYPE type)
_I64 = (-(1 << 63), (1 << 63) - 1)
_U64 = (0, (1 << 64) - 1)
_U32 = (0, (1 << 32) - 1)


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _int_arg(value, what: str, lo: int, hi: int) -> int:
    """Return ``value`` as a Python int in [lo, hi], or raise UsageError naming ``what``.

    Takes ints, numpy integers and integral finite floats (2.0); refuses bool, non-integral or
    non-finite floats and everything else, so nothing is truncated (1.5 -> 1), wrapped or left
    to numpy's OverflowError.
    """
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


def _positive_number(value) -> bool:
    """Whether ``value`` is a plain int or float (not bool), finite and > 0."""
    if type(value) is int:
        return value > 0
    return type(value) is float and math.isfinite(value) and value > 0


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


def _grow(arr: np.ndarray, at_least: int) -> np.ndarray:
    new = np.zeros(max(2 * len(arr), at_least, 16), dtype=arr.dtype)
    new[: len(arr)] = arr
    return new


_HEADER_FIELDS = {"config", "seq", "trade_id", "next_auto_id"}
_CONFIG_FIELDS = {"stp", "symbols"}
_SYMBOL_FIELDS = {"name", "id", "tick_size", "min_price", "max_price"}


def _corrupt_header(what: str) -> CorruptionError:
    return CorruptionError(f"checkpoint: header: {what}", offset=16)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _checkpoint_frame(blob: bytes) -> tuple[bytes, int, int]:
    """Check a checkpoint's frame; return (header bytes, row count, offset of the rows).

    Raises CorruptionError for a bad magic, checksum or version, or a header length or row
    count that does not fit the blob (checked before anything is allocated)."""
    if len(blob) < 28 or blob[:8] != _CHECKPOINT_MAGIC:
        raise CorruptionError("checkpoint: not an exsim checkpoint (bad magic or shorter than "
                              "28 bytes)", offset=0)
    (crc,) = struct.unpack_from("<I", blob, len(blob) - 4)
    if crc32c.crc32c(blob[:-4]) != crc:
        raise CorruptionError("checkpoint: checksum mismatch", offset=len(blob) - 4)
    version, hlen = struct.unpack_from("<II", blob, 8)
    if version != _CHECKPOINT_VERSION:
        raise CorruptionError(f"checkpoint: version {version} is not supported", offset=8)
    start = 24 + hlen
    if start + 4 > len(blob):
        raise CorruptionError(f"checkpoint: header length {hlen} runs past the end of the "
                              f"{len(blob)}-byte blob", offset=12)
    (nrows,) = struct.unpack_from("<Q", blob, 16 + hlen)
    room = len(blob) - 4 - start
    if nrows * CHECKPOINT_DTYPE.itemsize != room:
        raise CorruptionError(
            f"checkpoint: row count {nrows} does not fit the {room} bytes of rows "
            f"({CHECKPOINT_DTYPE.itemsize} bytes a row)", offset=16 + hlen)
    if nrows > _MAX_ORDERS:
        raise CorruptionError(f"checkpoint: {nrows} rows exceed the engine's {_MAX_ORDERS} "
                              "order slots", offset=16 + hlen)
    return blob[16:16 + hlen], nrows, start


def _header_int(d: dict, key: str, lo: int, hi: int, where: str = "") -> int:
    v = d[key]
    if type(v) is not int or not lo <= v <= hi:
        raise _corrupt_header(f"{where}{key} must be an integer in [{lo}, {hi}]; got {_short(v)}")
    return v


def _exact_fields(d, fields: set, what: str) -> None:
    if not isinstance(d, dict):
        raise _corrupt_header(f"{what} must be a JSON object; got {_short(d)}")
    if d.keys() != fields:
        missing, extra = sorted(fields - d.keys()), sorted(d.keys() - fields)
        raise _corrupt_header(f"{what} " + (f"lacks field {missing[0]!r}" if missing
                                           else f"has unknown field {_short(extra[0])}"))


def _checkpoint_header(header_bytes: bytes) -> tuple[str, list, tuple]:
    """Parse and check a checkpoint header; return (stp name, [(name, tick_size, min_price,
    max_price) per symbol], (seq, trade_id, next_auto_id)). Raises CorruptionError naming the
    field."""
    try:
        header = json.loads(header_bytes)
    except (ValueError, RecursionError) as e:   # bad JSON or UTF-8, too deep, too many digits
        raise CorruptionError(f"checkpoint: header is not JSON ({_short(str(e))})",
                              offset=16) from None
    _exact_fields(header, _HEADER_FIELDS, "the header")
    cfg = header["config"]
    _exact_fields(cfg, _CONFIG_FIELDS, "config")
    names = [m.name.lower() for m in Stp]
    if cfg["stp"] not in names or not isinstance(cfg["stp"], str):
        raise _corrupt_header(f"config.stp must be one of {', '.join(names)}; "
                              f"got {_short(cfg['stp'])}")
    if not isinstance(cfg["symbols"], list):
        raise _corrupt_header(f"config.symbols must be a list; got {_short(cfg['symbols'])}")
    specs, seen = [], {}
    for k, sym in enumerate(cfg["symbols"]):
        where = f"symbol {k} "
        _exact_fields(sym, _SYMBOL_FIELDS, f"symbol {k} (config.symbols[{k}])")
        name = sym["name"]
        if not isinstance(name, str) or not name:
            raise _corrupt_header(f"{where}name must be a non-empty string; got {_short(name)}")
        if name in seen:
            raise _corrupt_header(f"{where}name {name!r} is also symbol {seen[name]}'s")
        seen[name] = k
        _header_int(sym, "id", k, k, where)
        tick = sym["tick_size"]
        if not _positive_number(tick):
            raise _corrupt_header(f"{where}tick_size must be a finite number > 0; "
                                  f"got {_short(tick)}")
        lo = _header_int(sym, "min_price", 1, MAX_PRICE, where)
        hi = _header_int(sym, "max_price", 1, MAX_PRICE, where)
        if lo > hi:
            raise _corrupt_header(f"{where}price band [{lo}, {hi}] is empty")
        specs.append((name, tick, lo, hi))
    counters = (_header_int(header, "seq", 0, _I64[1]),
                _header_int(header, "trade_id", 0, _I64[1]),
                _header_int(header, "next_auto_id", 1, _U64[1] + 1))
    return cfg["stp"], specs, counters


def _row_problem(code: int, i: int, rows: np.ndarray, specs: list) -> str:
    """The message for ``kernels.check_rows``' finding ``code`` at row ``i``."""
    r = rows[i]
    sym, side, price = int(r["symbol"]), int(r["side"]), int(r["price"])
    name = specs[sym][0] if sym < len(specs) else None
    at = f"checkpoint: row {i}: "
    if code == kernels.ROW_SYMBOL:
        return at + f"symbol {sym} is not one of the engine's {len(specs)} symbols"
    if code == kernels.ROW_SIDE:
        return at + f"side {side} is neither BUY (0) nor SELL (1)"
    if code == kernels.ROW_QTY:
        return at + f"qty {int(r['qty'])} is outside 1..{MAX_QTY}"
    if code == kernels.ROW_FILLED:
        return at + f"filled {int(r['filled'])} is outside 0..{MAX_LEVEL_QTY}"
    if code == kernels.ROW_FLAGS:
        return at + f"flags {int(r['flags']):#x} holds bits no order carries"
    if code == kernels.ROW_PRICE:
        return at + (f"price {price} is outside the band {specs[sym][2]}..{specs[sym][3]} of "
                     f"symbol {name!r}")
    if code == kernels.ROW_ORDER:
        return at + (f"{Side(side).name} {price} of symbol {name!r} is out of priority order "
                     "(symbols ascending, bids then asks, best level first)")
    if code == kernels.ROW_LEVEL_QTY:
        return at + f"the orders at {Side(side).name} {price} of {name!r} total past {MAX_LEVEL_QTY}"
    if code == kernels.ROW_CROSSED:
        bids = rows[:i][(rows["symbol"][:i] == sym) & (rows["side"][:i] == Side.BUY)]
        return at + (f"symbol {name!r} is crossed: best ask {price} <= best bid "
                     f"{int(bids['price'][0])}")
    raise AssertionError(f"unknown check_rows code {code}")  # pragma: no cover


class Engine:
    """A multi-symbol price-time-priority matching engine.

    ``stp`` is the self-trade prevention mode: "none", "cancel_resting", "cancel_incoming" or
    "cancel_both" (or an ``Stp``). Raises UsageError for an unknown mode.
    """

    def __init__(self, stp: str | int = "none", *, capacity: int = 1024):
        capacity = _int_arg(capacity, "capacity", 0, _MAX_ORDERS)
        self._meta = new_meta(_parse_enum(Stp, stp, "stp"))
        self._arena = np.zeros(max(capacity, 16), ARENA_DTYPE)
        self._levels = np.zeros(max(capacity // 4, 16), LEVEL_DTYPE)
        self._index = new_index(2 * max(capacity, 16))
        # why a view of a larger buffer: adding a symbol appends two rows in amortised O(1)
        # (a concatenate per symbol made adding n symbols O(n^2))
        self._book_rows = np.zeros(0, BOOK_DTYPE)
        self._books = self._book_rows[:0]
        self._ladder_keys = np.zeros(64, np.int64)
        self._ladder_levels = np.zeros(64, np.int32)
        self._ladder_used = 0
        self._names: list[str] = []
        self._ids: dict[str, int] = {}
        self._tick_sizes: list[int | float] = []
        self._next_auto_id = 1
        self.prefetch_distance = 16  # messages; 0 turns prefetching off (results identical)
        self._out: OutputBuffers | None = None  # the buffers process(reuse=True) writes into

    # ---------------------------------------------------------------- symbols and options
    def add_symbol(self, name: str, tick_size: float = 1, min_price: int = 1,
                   max_price: int = MAX_PRICE) -> int:
        """Add a symbol and return its id (0, 1, 2 ... in order of adding).

        ``tick_size`` is kept as metadata for converting prices at the edges; the engine itself
        works in integer ticks. ``min_price``/``max_price`` bound accepted limit prices (ticks).
        Raises UsageError for a duplicate name, a tick size that is not a finite number > 0,
        bounds that are not integers, or an empty or inverted price band.
        """
        if not isinstance(name, str) or not name:
            raise UsageError(f"symbol name must be a non-empty string; got {name!r}")
        if name in self._ids:
            raise UsageError(f"symbol {name!r} already added (id {self._ids[name]})")
        lo = _int_arg(min_price, f"min_price of {name!r}", *_I64)
        hi = _int_arg(max_price, f"max_price of {name!r}", *_I64)
        if not (1 <= lo <= hi <= MAX_PRICE):
            raise UsageError(
                f"price band must satisfy 1 <= min_price <= max_price <= {MAX_PRICE}; "
                f"got [{min_price}, {max_price}] for {name!r}")
        tick = _tick_arg(tick_size, name)
        sid = len(self._names)
        if 2 * sid + 2 > len(self._book_rows):
            rows = np.zeros(max(2 * len(self._book_rows), 16), BOOK_DTYPE)
            rows[: 2 * sid] = self._books
            self._book_rows = rows
            self._books = rows[: 2 * sid]
        off = self._alloc_ladder(2 * _INITIAL_LADDER)  # before the new rows: a repack moves regions
        self._books = self._book_rows[: 2 * sid + 2]
        new = self._books[2 * sid:]
        new["min_price"] = lo
        new["max_price"] = hi
        new["off"] = [off, off + _INITIAL_LADDER]
        new["cap"] = _INITIAL_LADDER
        self._names.append(name)
        self._ids[name] = sid
        self._tick_sizes.append(tick)
        self._meta[M_NSYM] = len(self._names)
        return sid

    def symbol_id(self, symbol: str | int) -> int:
        """Return the id of ``symbol`` (a name or an id). Raises UsageError if unknown."""
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

    def config(self) -> dict:
        """Return the engine's options and symbols as a JSON-able dict (enough to rebuild it)."""
        return {
            "stp": self.stp,
            "symbols": [
                {"name": n, "id": i, "tick_size": self._tick_sizes[i],
                 "min_price": int(self._books[2 * i]["min_price"]),
                 "max_price": int(self._books[2 * i]["max_price"])}
                for i, n in enumerate(self._names)
            ],
        }

    # ---------------------------------------------------------------- processing
    def process(self, orders: np.ndarray, *, reuse: bool = False,
                out: OutputBuffers | None = None) -> Result:
        """Match a batch of ORDER_DTYPE messages; return their fills, L2 updates and events.

        Message i of the batch gets seq ``self.seq + 1 + i``. With ``reuse=True`` the Result
        holds views into output buffers the engine keeps and overwrites on its next
        ``reuse=True`` call (no allocation or page faults per batch: the fast path for callers
        that consume each Result before the next batch, such as the journal and benchmarks).
        With ``out`` (an OutputBuffers) the Result holds views into those instead, valid until
        they are written again: a caller alternating two sets can read one batch's outputs on
        another thread while the engine writes the next.
        Raises UsageError if ``orders`` is not a one-dimensional ORDER_DTYPE array or both
        ``reuse`` and ``out`` are given; never raises on message content.
        """
        if not isinstance(orders, np.ndarray) or orders.dtype != ORDER_DTYPE or orders.ndim != 1:
            got = getattr(orders, "dtype", type(orders).__name__)
            raise UsageError(f"process() takes a 1-d numpy array of ORDER_DTYPE; got {got}")
        if reuse and out is not None:
            raise UsageError("process() takes reuse=True or out=..., not both")
        orders = np.ascontiguousarray(orders)
        n = len(orders)
        if reuse:
            if self._out is None:
                self._out = OutputBuffers(n)
            out = self._out
        buffers = out if out is not None else OutputBuffers(n)
        fills, l2, events = buffers.fills, buffers.l2, buffers.events
        cnt = np.zeros(3, np.int64)
        start = 0
        while True:
            status, start = kernels.process_batch(
                orders, start, self._arena, self._levels, self._index, self._books,
                self._ladder_keys, self._ladder_levels, self._meta, fills, l2, events, cnt,
                self.prefetch_distance)
            if status == kernels.OK:
                break
            if status == kernels.NEED_OUTPUT:
                fills = _grow(fills, int(self._meta[M_NEED_FILLS]))
                l2 = _grow(l2, int(self._meta[M_NEED_L2]))
                events = _grow(events, int(self._meta[M_NEED_EVENTS]))
            else:
                self._grow_state(status)
        buffers.fills, buffers.l2, buffers.events = fills, l2, events
        return Result(fills[: cnt[0]], l2[: cnt[1]], events[: cnt[2]])

    def _grow_state(self, status: int) -> None:
        if status == kernels.NEED_ORDERS:
            self._arena = _grow(self._arena, 0)
        elif status == kernels.NEED_LEVELS:
            self._levels = _grow(self._levels, 0)
        elif status == kernels.NEED_INDEX:
            bigger = new_index(2 * len(self._index))
            rehash_into(self._index, bigger)
            self._index = bigger
        elif status == kernels.NEED_LADDER:
            self._grow_ladder(int(self._meta[M_NEED_BOOK]))
        else:  # pragma: no cover - a kernel/facade mismatch is a bug, not input
            raise RuntimeError(f"kernel returned unknown status {status}")

    def _alloc_ladder(self, cap: int) -> int:
        """Reserve ``cap`` ladder entries at the end of the ladder arrays; return the offset."""
        if self._ladder_used + cap > len(self._ladder_keys):
            self._repack_ladder(extra=cap)
        off = self._ladder_used
        self._ladder_used += cap
        return off

    def _repack_ladder(self, extra: int) -> None:
        # regions abandoned by growth are dropped here, so the ladder stays within 2x its use;
        # vectorised: a loop over the books cost a Python step per symbol on every repack
        books = self._books
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
        books["off"] = new_off
        self._ladder_keys, self._ladder_levels = keys, lvls
        self._ladder_used = int(caps.sum())

    def _grow_ladder(self, b: int) -> None:
        cap = int(self._books[b]["cap"]) * 2
        off = self._alloc_ladder(cap)
        o, n = int(self._books[b]["off"]), int(self._books[b]["n"])
        self._ladder_keys[off: off + n] = self._ladder_keys[o: o + n]
        self._ladder_levels[off: off + n] = self._ladder_levels[o: o + n]
        self._books[b]["off"] = off
        self._books[b]["cap"] = cap

    # ---------------------------------------------------------------- per-order API
    def submit(self, symbol: str | int, side: str | int, *, qty: int, price: int = 0,
               order_type: str | int = "limit", tif: str | int = "gtc", post_only: bool = False,
               trader: int = 0, order_id: int | None = None, ts: int | None = None) -> Result:
        """Send one NEW order; return its Result (same bytes as ``process`` on that message).

        Without ``order_id`` the engine takes its next id not live on the symbol. ``ts``
        defaults to 0. Raises UsageError for an unknown symbol, side, order type or tif (name or
        code), or an argument its message field cannot hold: qty, price and ts must be integers
        in int64, order_id in uint64, trader in uint32 (ints, numpy integers or integral floats;
        never bool), post_only a bool. Values the field holds but the engine refuses (qty <= 0,
        a price out of band ...) are not errors: they come back as a REJECTED event.
        """
        sid = self.symbol_id(symbol)
        fields = dict(side=_parse_enum(Side, side, "side"),
                      order_type=_parse_enum(OrderType, order_type, "order_type"),
                      tif=_parse_enum(Tif, tif, "tif"),
                      trader=_int_arg(trader, "trader", *_U32))
        qty, price = _int_arg(qty, "qty", *_I64), _int_arg(price, "price", *_I64)
        ts = self._ts_arg(ts)
        if not (_is_bool(post_only) or (type(post_only) is int and post_only in (0, 1))):
            raise UsageError(f"post_only must be a bool; got {post_only!r}")
        fields["flags"] = int(Flag.POST_ONLY) if post_only else 0
        if order_id is None:
            order_id = self._next_auto_id
            while order_id <= _U64[1] and index_find(self._index, sid, np.uint64(order_id)) >= 0:
                order_id += 1
            if order_id > _U64[1]:
                raise UsageError("no automatic order id is left below 2^64 on "
                                 f"{self._names[sid]!r}; pass order_id")
            self._next_auto_id = order_id + 1
        else:
            order_id = _int_arg(order_id, "order_id", *_U64)
        return self.process(self._message(Kind.NEW, sid, order_id, price, qty, ts, **fields))

    def cancel(self, symbol: str | int, order_id: int, *, ts: int | None = None) -> Result:
        """Cancel a live order; return the Result (a REJECTED event if it is not live).

        Raises UsageError for an unknown symbol, an order_id that is not an integer in uint64
        or a ts that is not one in int64."""
        sid = self.symbol_id(symbol)
        order_id = _int_arg(order_id, "order_id", *_U64)
        return self.process(self._message(Kind.CANCEL, sid, order_id, 0, 0, self._ts_arg(ts)))

    def modify(self, symbol: str | int, order_id: int, *, price: int, qty: int,
               ts: int | None = None) -> Result:
        """Change a live order's price and open quantity; return the Result (see semantics.md).

        Raises UsageError for an unknown symbol or an argument its field cannot hold (order_id
        uint64; price, qty, ts int64); refused values in range come back as a REJECTED event."""
        sid = self.symbol_id(symbol)
        order_id = _int_arg(order_id, "order_id", *_U64)
        price, qty = _int_arg(price, "price", *_I64), _int_arg(qty, "qty", *_I64)
        return self.process(self._message(Kind.MODIFY, sid, order_id, price, qty,
                                          self._ts_arg(ts)))

    @staticmethod
    def _ts_arg(ts) -> int:
        return 0 if ts is None else _int_arg(ts, "ts", *_I64)

    @staticmethod
    def _message(kind, sid, order_id, price, qty, ts, **fields) -> np.ndarray:
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
        """Return the live orders of ``symbol`` (L3_DTYPE): bids best first, then asks; FIFO."""
        rows = self._collect([self.symbol_id(symbol)])
        out = np.zeros(len(rows), L3_DTYPE)
        for name in L3_DTYPE.names:
            out[name] = rows[name]
        return out

    @property
    def live_orders(self) -> int:
        """Number of live orders over all symbols."""
        return int(self._meta[M_INDEX_COUNT])

    def memory_bytes(self) -> int:
        """Bytes held by the book state arrays (arena, levels, index, ladders)."""
        return sum(a.nbytes for a in (self._arena, self._levels, self._index, self._books,
                                      self._ladder_keys, self._ladder_levels, self._meta))

    def _collect(self, symbols: list[int]) -> np.ndarray:
        out = np.zeros(self.live_orders, CHECKPOINT_DTYPE)
        k = kernels.collect_orders(self._books, self._levels, self._arena, self._ladder_levels,
                                   np.asarray(symbols, dtype=np.int64), out)
        return out[:k]

    # ---------------------------------------------------------------- checkpoints
    def _state_header(self) -> dict:
        return {"config": self.config(), "seq": self.seq,
                "trade_id": int(self._meta[M_TRADE_ID]), "next_auto_id": self._next_auto_id}

    def checkpoint(self) -> bytes:
        """Return the engine's exact state as bytes (restore with ``Engine.restore``).

        Layout: magic "EXSIMCKP", u32 version, u32 header length, header JSON (options,
        symbols, counters), u64 row count, CHECKPOINT_DTYPE rows in priority order, u32 CRC32C of
        all that precedes it.
        """
        header = json.dumps(self._state_header(), sort_keys=True).encode()
        rows = self._collect(list(range(len(self._names))))
        body = (_CHECKPOINT_MAGIC + struct.pack("<II", _CHECKPOINT_VERSION, len(header)) + header
                + struct.pack("<Q", len(rows)) + rows.tobytes())
        return body + struct.pack("<I", crc32c.crc32c(body))

    def checkpoint_equals(self, blob) -> bool:
        """Return ``self.checkpoint() == blob`` without serialising the book.

        The header and the trailing CRC32C are compared as bytes; the rows are checked in place
        against the live orders (``kernels.orders_equal``: one lookup per row, prefetched,
        instead of walking every queue and copying it out). Anything that is not a checkpoint
        of this layout is simply unequal: it never raises.
        """
        blob = memoryview(blob).cast("B")
        if len(blob) < 28 or bytes(blob[:8]) != _CHECKPOINT_MAGIC:
            return False
        version, hlen = struct.unpack_from("<II", blob, 8)
        header = json.dumps(self._state_header(), sort_keys=True).encode()
        if version != _CHECKPOINT_VERSION or hlen != len(header) \
                or bytes(blob[16:16 + hlen]) != header:
            return False
        start = 24 + hlen
        (nrows,) = struct.unpack_from("<Q", blob, 16 + hlen)
        if nrows != self.live_orders or start + nrows * CHECKPOINT_DTYPE.itemsize + 4 != len(blob):
            return False
        (crc,) = struct.unpack_from("<I", blob, len(blob) - 4)
        if crc32c.crc32c(blob[:-4]) != crc:
            return False
        rows = np.frombuffer(blob, CHECKPOINT_DTYPE, count=nrows, offset=start)
        return bool(kernels.orders_equal(rows, self._books, self._levels, self._arena,
                                         self._index, len(self._names),
                                         self.prefetch_distance))

    @classmethod
    def restore(cls, blob: bytes) -> "Engine":
        """Return a new engine in exactly the state ``blob`` (from ``checkpoint``) describes.

        Everything is checked before state is built, so ``restore(b).checkpoint() == b`` for
        every blob it accepts: the frame (magic, CRC32C, version, a header length and row count
        that fit the blob, checked before allocating), the header (the canonical JSON of
        ``checkpoint``: known stp, symbols with ids 0, 1 ..., distinct names, finite tick sizes
        > 0, integer bands within 1..MAX_PRICE, counters in range) and every row (``check_rows``:
        known symbol and side, quantities in range, price in band, priority order, no crossed
        book; no duplicate order id per symbol). Linear in symbols and rows.
        Raises UsageError if ``blob`` is not bytes-like; CorruptionError ("checkpoint: ...",
        with the row index or header field, and the byte offset) for anything else wrong.
        """
        try:
            if not isinstance(blob, bytes):   # bytes need no copy
                blob = bytes(memoryview(blob).cast("B"))
        except TypeError:
            raise UsageError(f"restore() takes the bytes of a checkpoint; got "
                             f"{type(blob).__name__}") from None
        header_bytes, nrows, start = _checkpoint_frame(blob)
        stp, specs, counters = _checkpoint_header(header_bytes)
        rows = np.frombuffer(blob, CHECKPOINT_DTYPE, count=nrows, offset=start)
        eng = cls(stp=stp, capacity=min(max(2 * nrows, 1024), _MAX_ORDERS))
        eng._load_checkpoint(specs, rows, start)
        eng._meta[M_SEQ], eng._meta[M_TRADE_ID], eng._next_auto_id = counters
        if json.dumps(eng._state_header(), sort_keys=True).encode() != header_bytes:
            raise CorruptionError("checkpoint: header is not in canonical form (checkpoint() "
                                  "writes sorted-key JSON with default separators)", offset=16)
        return eng

    def _load_checkpoint(self, specs: list, rows: np.ndarray, start: int) -> None:
        """Build this (new, empty) engine's symbols from ``specs`` (name, tick, min, max) and its
        books from checkpoint ``rows`` (at byte ``start`` of the blob), in one pass each: every
        array is sized once. Raises CorruptionError naming the first bad row."""
        nsym, n = len(specs), len(rows)
        books = np.zeros(2 * nsym, BOOK_DTYPE)
        books["min_price"] = np.repeat(np.array([sp[2] for sp in specs], np.int64), 2)
        books["max_price"] = np.repeat(np.array([sp[3] for sp in specs], np.int64), 2)
        level_count = np.zeros(2 * nsym, np.int64)
        rows = np.ascontiguousarray(rows)
        code, i = kernels.check_rows(rows, books, nsym, level_count)
        if code != kernels.ROW_OK:
            raise CorruptionError(_row_problem(code, int(i), rows, specs),
                                  offset=start + int(i) * CHECKPOINT_DTYPE.itemsize)
        # each ladder region holds its levels with room to double before it must grow
        caps = np.maximum(2 * level_count, _INITIAL_LADDER)
        books["off"] = np.cumsum(caps) - caps
        books["cap"] = caps
        books["n"] = level_count
        used = int(caps.sum())
        self._ladder_keys = np.zeros(used + 64, np.int64)
        self._ladder_levels = np.zeros(used + 64, np.int32)
        self._ladder_used = used
        self._book_rows = self._books = books
        self._names = [sp[0] for sp in specs]
        self._ids = {name: k for k, name in enumerate(self._names)}
        self._tick_sizes = [sp[1] for sp in specs]
        self._meta[M_NSYM] = nsym
        if len(self._arena) < n:
            self._arena = _grow(self._arena, n)
        if len(self._levels) < int(level_count.sum()):
            self._levels = _grow(self._levels, int(level_count.sum()))
        if len(self._index) < 2 * n + 2:
            self._index = new_index(2 * n + 2)
        dup = kernels.load_orders(rows, self._arena, self._levels, self._index, self._books,
                                  self._ladder_keys, self._ladder_levels, self._meta)
        if dup >= 0:
            r = rows[dup]
            raise CorruptionError(
                f"checkpoint: row {dup}: duplicate order id {int(r['order_id'])} on symbol "
                f"{specs[int(r['symbol'])][0]!r} (an earlier row holds it)",
                offset=start + int(dup) * CHECKPOINT_DTYPE.itemsize)

    def state_hash(self) -> str:
        """Return a hex digest of the canonical state (options, counters, books in priority order).

        Two engines with equal hashes produce identical outputs for the same future input.
        """
        h = hashlib.blake2b(digest_size=16)
        h.update(json.dumps(self._state_header(), sort_keys=True).encode())
        h.update(self._collect(list(range(len(self._names)))).tobytes())
        return h.hexdigest()
