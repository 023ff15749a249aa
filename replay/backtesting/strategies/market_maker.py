"""An inventory-skewed market maker, as a Python strategy and as an ``@njit`` quote function.

Rule (both forms): with a two-sided book, quote ``size`` lots at the best bid and best ask,
each shifted by ``skew = position // skew_lots`` ticks against the inventory (long: both quotes
lower, so it sells sooner and buys later). A side whose fill would take |position| past
``max_position`` is not quoted. With a one-sided or empty book it pulls both quotes.

The Python class keeps one order per side and moves it with MODIFY (a price change loses queue
priority, as on any exchange), exactly like the fast path's reconcile rule.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange.errors import UsageError
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy

__all__ = ["InventoryMarketMaker", "mm_quotes", "market_maker_fast"]


@njit(cache=True)
def mm_quotes(ts, bid, bid_qty, ask, ask_qty, position, cash, state, params, quote):
    """params = [size, skew_lots, max_position]; writes [bid_px, bid_qty, ask_px, ask_qty]."""
    size, skew_lots, max_pos = np.int64(params[0]), np.int64(params[1]), np.int64(params[2])
    if bid <= 0 or ask <= 0:
        quote[:] = 0
        return
    skew = position // skew_lots
    quote[0] = bid - skew
    quote[1] = size if position + size <= max_pos else 0
    quote[2] = ask - skew
    quote[3] = size if position - size >= -max_pos else 0
    if quote[0] >= ask:          # never cross on purpose: a maker stays passive
        quote[0] = ask - 1
    if quote[2] <= bid:
        quote[2] = bid + 1


def market_maker_fast(size: int = 5, skew_lots: int = 20, max_position: int = 200,
                      every: int = 100) -> QuoteStrategy:
    """The market maker as a ``QuoteStrategy`` (runs on the njit path). Raises UsageError for
    size, skew_lots or max_position < 1."""
    if min(size, skew_lots, max_position) < 1:
        raise UsageError("size, skew_lots and max_position must be >= 1")
    return QuoteStrategy(mm_quotes, [size, skew_lots, max_position], every=every)


class InventoryMarketMaker(Strategy):
    """The same rule as ``mm_quotes``, written against the Python API (on_book / on_fill)."""

    def __init__(self, size: int = 5, skew_lots: int = 20, max_position: int = 200,
                 every: int = 100):
        if min(size, skew_lots, max_position, every) < 1:
            raise UsageError("size, skew_lots, max_position and every must be >= 1")
        self.size, self.skew_lots, self.max_position = size, skew_lots, max_position
        self.every = every
        self.quote_ids = [None, None]     # live order id per side (BUY, SELL)
        self._state = np.zeros(1, np.float64)
        # mm_quotes' arguments, made once (on_book runs at every wake-up)
        self._params = np.array([size, skew_lots, max_position], np.float64)
        self._quote = np.zeros(4, np.int64)

    def on_book(self, ctx, book) -> None:
        q = self._quote
        mm_quotes(ctx.now, book.bid, book.bid_qty, book.ask, book.ask_qty, ctx.position,
                  ctx.cash, self._state, self._params, q)
        quote = q.tolist()
        for side in (0, 1):
            price, qty = quote[2 * side], quote[2 * side + 1]
            oid = self.quote_ids[side]
            live = oid is not None and oid in ctx.open_orders
            if live and qty == 0:
                ctx.cancel(oid)
                self.quote_ids[side] = None
            elif live:
                o = ctx.open_orders[oid]
                if o.price != price:
                    ctx.modify(oid, price, qty)
            elif qty > 0:
                self.quote_ids[side] = (ctx.buy if side == 0 else ctx.sell)(price, qty)
