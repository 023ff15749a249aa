"""A closing-auction joiner: when its symbol enters the closing call (PRE_CLOSE), it sends one
order that rests in the call and is filled by the closing uncross.

Written against the Python API's phase hooks (``on_phase``, ``ctx.indicative``): the order is a
MARKET order (``limit_ticks`` None: it takes whatever the uncross price is, with priority over
every limit) or a limit ``limit_ticks`` through the indicative price the call shows when the
order is sent (the reference price's side of it when there is no indicative yet: the last mid
the strategy saw). It keeps every INDICATIVE (``indicatives``) and UNCROSS (``uncrosses``) it
was shown, as (ts, price, qty, surplus) tuples, so a notebook can compare the call with its
fill.
"""

from __future__ import annotations

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import Event, Phase
from exsim.replay.backtesting.strategy import Strategy

__all__ = ["ClosingAuctionJoiner"]


class ClosingAuctionJoiner(Strategy):
    """Joins the closing auction with one order of ``qty`` lots on ``side``."""

    def __init__(self, side: str = "buy", qty: int = 100, limit_ticks: int | None = None):
        if side not in ("buy", "sell"):
            raise UsageError(f"side must be 'buy' or 'sell'; got {side!r}")
        if not isinstance(qty, int) or qty < 1:
            raise UsageError(f"qty must be an integer >= 1; got {qty!r}")
        if limit_ticks is not None and (not isinstance(limit_ticks, int) or limit_ticks < 0):
            raise UsageError(f"limit_ticks must be None or an integer >= 0; got {limit_ticks!r}")
        self.side, self.qty, self.limit_ticks = side, qty, limit_ticks
        self.every = 1_000      # wake-ups keep the last mid (the limit's fallback)
        self.mid = None
        self.order_id = None
        self.indicatives: list[tuple[int, int, int, int]] = []
        self.uncrosses: list[tuple[int, int, int, int]] = []

    def on_book(self, ctx, book) -> None:
        if book.mid is not None:
            self.mid = book.mid

    def on_phase(self, ctx, event) -> None:
        kind = int(event["event"])
        row = (int(event["ts"]), int(event["price"]), int(event["filled_qty"]),
               int(event["leaves_qty"]))
        if kind == Event.INDICATIVE:
            self.indicatives.append(row)
        elif kind == Event.UNCROSS:
            self.uncrosses.append(row)
        elif kind == Event.PHASE and int(event["phase"]) == Phase.PRE_CLOSE \
                and self.order_id is None:
            self._join(ctx)

    def _join(self, ctx) -> None:
        send = ctx.buy if self.side == "buy" else ctx.sell
        if self.limit_ticks is None:
            self.order_id = send(0, self.qty, market=True)
            return
        price, _, _ = ctx.indicative()
        base = price or (round(self.mid) if self.mid is not None else 0)
        if base <= 0:
            return    # no price to lean on: stay out rather than guess
        through = self.limit_ticks if self.side == "buy" else -self.limit_ticks
        self.order_id = send(max(base + through, 1), self.qty)
