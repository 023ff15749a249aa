"""Example strategies for ``replay.backtesting.driver`` (see docs/backtesting.md).

- ``InventoryMarketMaker``: quotes both sides around the touch, skewing its prices against its
  inventory and stopping the side that would grow it past a limit (Python API).
- ``MomentumTaker``: crosses the spread in the direction of a fast-vs-slow mid EMA signal,
  with a position cap (Python API).
- ``ClosingAuctionJoiner``: sends one order into the closing call (PRE_CLOSE), a market order or
  a limit through the indicative price, and is filled by the closing uncross (phase hooks).
- ``mm_quotes`` / ``market_maker_fast(...)``: the same market maker as an ``@njit`` quote
  function for the fast path (``QuoteStrategy``).
"""

from exsim.replay.backtesting.strategies.market_maker import InventoryMarketMaker, market_maker_fast, mm_quotes
from exsim.replay.backtesting.strategies.closing_auction import ClosingAuctionJoiner
from exsim.replay.backtesting.strategies.momentum import MomentumTaker

__all__ = ["InventoryMarketMaker", "MomentumTaker", "ClosingAuctionJoiner", "mm_quotes",
           "market_maker_fast"]
