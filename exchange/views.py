"""Read-only views of a single engine's state: counters, phases, depth, resting orders, stops.

``BookViews`` is a part of ``exchange.single.SingleEngine``; the sharded engine asks the shard
that owns a symbol for the same views.

Invariants:
- A view never changes the engine's state and never returns one of its arrays: every array is a
  fresh copy the caller may keep and write.
- Orders come in priority order (bids best first, then asks; FIFO within a level), pending
  stops in release order: the order ``checkpoint_kernels.collect_orders`` writes checkpoints in.
"""

from __future__ import annotations

import numpy as np

from . import checkpoint_kernels as ck_kernels
from .book import M_EXPIRY_N, M_INDEX_COUNT, M_NEXT_END, M_SEQ
from .schema import CALL_PHASES, CHECKPOINT_DTYPE, DEPTH_DTYPE, L3_DTYPE, Phase, Side

__all__ = ["BookViews"]


class BookViews:
    """The read-only views of ``SingleEngine`` (see the module)."""

    @property
    def seq(self) -> int:
        """The seq of the last message processed (0 before any)."""
        return int(self._meta[M_SEQ])

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

    def depth(self, symbol: str | int, levels: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Return (bids, asks): DEPTH_DTYPE arrays (price, qty, count), best level first, at
        most ``levels`` each. Raises UsageError for an unknown symbol."""
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
        """Return the L3_DTYPE view fields of CHECKPOINT_DTYPE ``rows``, as a fresh array."""
        out = np.zeros(len(rows), L3_DTYPE)
        for name in L3_DTYPE.names:
            out[name] = rows[name]
        return out

    @property
    def live_orders(self) -> int:
        """Number of live orders over all symbols: resting orders and pending stops."""
        return int(self._meta[M_INDEX_COUNT])

    def memory_bytes(self) -> int:
        """Return the bytes held by the book state arrays (arena and its ext rows, levels,
        index, ladders, stop books, symbol rows, tick tables, expiry heap). Raises nothing."""
        return sum(a.nbytes for a in self.state)

    def _collect(self, symbols: list[int], which: int = 3) -> np.ndarray:
        """Return the CHECKPOINT_DTYPE rows of ``symbols``' resting orders (``which`` 1), pending
        stops (2) or both, resting first (3), in ``checkpoint_kernels.collect_orders`` order."""
        out = np.zeros(self.live_orders, CHECKPOINT_DTYPE)
        k = ck_kernels.collect_orders(self._books, self._stops, self._levels, self._arena,
                                      self._arena_ext, self._ladder_levels,
                                      np.asarray(symbols, dtype=np.int64), out, which)
        return out[:k]
