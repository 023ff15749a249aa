"""The phase checker's book: its live orders by id and each side's resting quantity per price.

``replay.verification.auctions``'s ``PhaseChecker`` keeps a book of its own in Python (a symbol
reaches it only after its first phase activity, see ``replay.verification.phases``):

- ``_Order``: one live order; ``open`` is what is left of it (shown + an iceberg's reserve),
  ``shown`` its displayed slice, ``prio`` its place in time (lower is earlier), ``pending`` a
  stop not yet released.
- ``book_from_state``: the book the kernel's state arrays hold at the hand-over (the fields of
  ``replay.verification.book``), as ``_Order`` rows in priority order.
- ``_PhaseBook``: the orders by id, and per side price -> open quantity of the resting orders
  there, with a heap of those prices for the best one.

Invariants: ``levels[side][p]`` is the sum of ``open`` over the resting, non-pending orders of
that side at price ``p`` (each order's ``counted`` share), and a price with nothing left leaves
the dict; a heap may hold stale prices (skipped when met), never miss a live one. While the
symbol is in a call (``phase``, kept by the checker) a resting market order sits at its side's
``CALL_MARKET_PRICE``.
"""

from __future__ import annotations

import heapq

from exsim.exchange.schema import CALL_MARKET_PRICE, CALL_PHASES, OrderType
from exsim.replay.verification import book as B

__all__ = ["book_from_state"]

_CALLS = frozenset(int(p) for p in CALL_PHASES)


class _Order:
    """One live order of the checker's book (open = shown + an iceberg's reserve)."""

    __slots__ = ("oid", "side", "price", "open", "shown", "display", "market", "tif", "otype",
                 "pending", "limit", "prio", "resting", "counted", "trader")

    def __init__(self, oid, side, price, open_, display, market, tif, otype, pending, limit,
                 prio, trader=-1):
        self.oid, self.side, self.price, self.open = oid, side, price, open_
        self.trader = trader    # the account that sent it (-1: unknown, not checked)
        self.display, self.market, self.tif, self.otype = display, market, tif, otype
        self.pending, self.limit, self.prio = pending, limit, prio
        self.shown = min(display, open_) if display > 0 else open_
        self.resting = False
        self.counted = None     # (price, qty) it adds to its side's levels (None: nothing)


def book_from_state(state: tuple) -> tuple[list, int, bool]:
    """The book the kernel's state holds (``replay.verification.kernel`` state arrays): its live
    orders as ``_Order`` rows in priority order (resting orders, then pending stops), the last
    trade price and whether the symbol traded. Returns (orders, last price, traded)."""
    ost, lst, oid, _h, ladder, ladlv, _t, ext, _cfg, meta = state[:10]
    out, prio = [], 0
    for side in range(4):
        n = int(meta[B.M_NB + side])
        for j in range(n - 1, -1, -1):
            s = int(lst[int(ladlv[side, j]), B.L_HEAD])
            while s >= 0:
                disp = int(ost[s, B.O_DISPLAY])
                shown = int(ost[s, B.O_LEAVES])
                total = shown + (int(ext[s, B.E_RESERVE]) if disp > 0 else 0)
                market = int(ost[s, B.O_MARKET]) == 1
                pending = side >= 2
                if pending:
                    otype = int(OrderType.STOP) if market else int(OrderType.STOP_LIMIT)
                    o = _Order(int(oid[s]), side - 2, 0, total, 0, market, int(ost[s, B.O_TIF]),
                               otype, True, int(ext[s, B.E_LIMIT]), prio, int(ost[s, B.O_TRADER]))
                else:
                    o = _Order(int(oid[s]), side, int(ost[s, B.O_PRICE]), total, disp, market,
                               int(ost[s, B.O_TIF]), int(OrderType.LIMIT), False, 0, prio,
                               int(ost[s, B.O_TRADER]))
                    o.shown = shown
                    o.resting = True
                out.append(o)
                prio += 1
                s = int(ost[s, B.O_NEXT])
    return out, int(meta[B.M_LAST_PX]), bool(meta[B.M_TRADED])


class _PhaseBook:
    """The checker's orders (``book``: id -> ``_Order``, resting or pending) and price levels.
    ``seed``: the orders to start with (``book_from_state``), in priority order; ``phase``: the
    symbol's phase, which the checker keeps current."""

    def __init__(self, seed, phase: int):
        self.book: dict[int, _Order] = {}
        # per side: price -> open quantity of the resting orders there, and a heap of the
        # prices (best first; stale entries are skipped) for the best price
        self.levels: tuple[dict, dict] = ({}, {})
        self.heaps: tuple[list, list] = ([], [])
        self.prio = 0
        for o in seed:
            self.book[o.oid] = o
            self.prio = max(self.prio, o.prio + 1)
            self._count(o)
        self.phase = phase

    def _next_prio(self) -> int:
        self.prio += 1
        return self.prio

    def _sides(self):
        buys, sells = [], []
        for o in self.book.values():
            if o.resting and not o.pending:
                (buys if o.side == 0 else sells).append(o)
        return buys, sells

    def _uncount(self, o: _Order) -> None:
        if o.counted is not None:
            price, q = o.counted
            lv = self.levels[o.side]
            left = lv[price] - q
            if left > 0:
                lv[price] = left
            else:
                del lv[price]
            o.counted = None

    def _count(self, o: _Order) -> None:
        """Make ``o``'s share of its side's levels its current price and open quantity (after
        any change to it; nothing unless it rests)."""
        self._uncount(o)
        if o.resting and not o.pending and o.open > 0:
            lv = self.levels[o.side]
            if o.price not in lv:
                heapq.heappush(self.heaps[o.side], -o.price if o.side == 0 else o.price)
                lv[o.price] = 0
            lv[o.price] += o.open
            o.counted = (o.price, o.open)

    def _best(self, side: int):
        """The best resting price of ``side`` (None: the side is empty)."""
        heap, lv = self.heaps[side], self.levels[side]
        while heap:
            p = -heap[0] if side == 0 else heap[0]
            if p in lv:
                return p
            heapq.heappop(heap)
        return None

    def _rest(self, o: _Order) -> None:
        if o.market and self.phase in _CALLS:
            o.price = CALL_MARKET_PRICE[o.side]
        o.shown = min(o.display, o.open) if o.display > 0 else o.open
        o.resting = True
        self._count(o)

    def _drop(self, oid: int) -> None:
        o = self.book.pop(int(oid), None)
        if o is not None:
            self._uncount(o)
