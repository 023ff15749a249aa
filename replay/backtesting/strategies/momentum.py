"""A momentum taker: buys (sells) with an IOC at the touch when a fast EMA of the mid rises
above (falls below) a slow one by ``threshold`` ticks, up to ``max_position`` lots.

Written against the Python API; wakes every ``every`` market messages. The EMAs are updated on
every wake-up with a two-sided book; no order rests (IOC), so there is no queue to manage.
"""

from __future__ import annotations

from exsim.exchange.errors import UsageError
from exsim.replay.backtesting.strategy import Strategy

__all__ = ["MomentumTaker"]


class MomentumTaker(Strategy):
    """Crosses the spread in the direction of the fast-vs-slow mid EMA signal."""

    def __init__(self, size: int = 5, fast: float = 0.2, slow: float = 0.02,
                 threshold: float = 1.0, max_position: int = 100, every: int = 100):
        if not (0 < slow < fast <= 1) or size < 1 or max_position < 1 or every < 1:
            raise UsageError("need 0 < slow < fast <= 1, size >= 1, max_position >= 1, every >= 1")
        self.size, self.a_fast, self.a_slow = size, fast, slow
        self.threshold, self.max_position, self.every = threshold, max_position, every
        self.fast = self.slow = None

    def on_book(self, ctx, book) -> None:
        mid = book.mid
        if mid is None:
            return
        if self.fast is None:
            self.fast = self.slow = mid
            return
        self.fast += self.a_fast * (mid - self.fast)
        self.slow += self.a_slow * (mid - self.slow)
        signal = self.fast - self.slow
        if signal > self.threshold and ctx.position + self.size <= self.max_position:
            ctx.buy(book.ask, self.size, tif="ioc")
        elif signal < -self.threshold and ctx.position - self.size >= -self.max_position:
            ctx.sell(book.bid, self.size, tif="ioc")
