"""A single engine's checkpoints: writing its state as bytes, comparing, restoring, hashing.

``Checkpointing`` is a part of ``exchange.single.SingleEngine``. The bytes are
``exchange.checkpoint``'s layout, written (``checkpoint.encode``) and parsed
(``checkpoint.parse``) only there; the rows are collected, checked and loaded by
``exchange.checkpoint_kernels``.

Invariants:
- ``checkpoint()`` is canonical (resting orders in priority order, then pending stops in release
  order, counters, options): two engines with equal checkpoints produce equal outputs from then
  on, and ``state_hash`` digests the same bytes' content.
- ``restore`` checks a blob's every field and row before it builds any state (a CorruptionError
  "checkpoint: ..." otherwise), so ``restore(b).checkpoint() == b`` for every blob of the
  current version it accepts.
- ``checkpoint_equals(b) == (checkpoint() == b)`` for every ``b``; it never raises.
- ``_restore_part`` builds the state of a subset of the symbols from one parsed checkpoint: what
  each shard of ``exchange.shards`` holds, with the same checks.
"""

from __future__ import annotations

import hashlib

import numpy as np

from . import checkpoint as ckpt
from . import checkpoint_kernels as ck_kernels
from .book import BOOK_DTYPE, M_EXPIRY_N, M_NEXT_END, M_NSYM, M_ORDER_HW, M_SEQ, M_STOPS_LIVE, \
    M_TRADE_ID, SYMBOL_DTYPE
from .checkpoint import MAX_ORDERS as _MAX_ORDERS
from .errors import CorruptionError, UsageError
from .order_index import new_index
from .schema import CHECKPOINT_DTYPE
from .state import grow_array as _grow, grow_cold_rows as _grow_cold
from .state_growth import INITIAL_LADDER

__all__ = ["Checkpointing"]


class Checkpointing:
    """The checkpoints of ``SingleEngine`` (see the module)."""

    def _state_header(self) -> dict:
        """Return the checkpoint header of this state (``checkpoint.make_header``'s dict)."""
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
    def restore(cls, blob: bytes) -> "Checkpointing":
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
        """
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
                      rows=None) -> "Checkpointing":
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
        caps = np.maximum(2 * np.concatenate([level_count, stop_level_count]), INITIAL_LADDER)
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
