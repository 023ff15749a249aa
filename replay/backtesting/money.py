"""What a backtest's fills are worth: the unit of cash, PnL, fees and turnover, and the fee rates.

A ``Money`` is read once per backtest from the traded symbol's engine config
(``Engine.config()["symbols"][i]``: ``currency``, ``tick_value``, ``maker_bps``, ``taker_bps``;
see docs/semantics.md, "Symbols") and the ``fees_bps`` argument of ``backtest``:

- Unit: with a ``currency`` set, money is in that currency: a fill of ``qty`` lots at ``price``
  ticks has notional ``price * qty * tick_value`` (``tick_value``: the value of one tick on one
  lot; when the symbol gives none, its ``tick_size``, the price of one tick, on a lot of one
  unit). Without a currency, money is in ticks x lots (``tick_value`` 1), as the engine's prices
  and quantities are.
- Fees: ``fees_bps`` (not None) is one rate for both sides and overrides the symbol's schedule;
  otherwise a strategy fill pays ``taker_bps`` of its notional when the strategy's order was the
  aggressor and ``maker_bps`` when it was resting (a negative rate is a rebate: the fee is
  negative and adds to PnL).

Invariant: ``terms()`` is what the numba paths get (``quoting.fill_effect`` / ``account``), and
``result`` applies the same three numbers, so every path gives the same cash, fees and PnL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from exsim.exchange.errors import UsageError

__all__ = ["Money", "money_for", "TICKS_X_LOTS"]

TICKS_X_LOTS = "ticks x lots"   # the unit of money when the symbol has no currency


@dataclass(frozen=True)
class Money:
    """The unit and fee rates of one backtest (rates are fractions of notional, not bps)."""

    currency: str = ""          # "" : money in ticks x lots
    tick_value: float = 1.0     # value of one tick on one lot, in ``currency`` (1 without one)
    maker_rate: float = 0.0     # fee per unit of notional when the strategy's order rested
    taker_rate: float = 0.0     # fee per unit of notional when it was the aggressor
    fees_from: str = "symbol"   # "fees_bps" (the argument overrides) or "symbol" (its schedule)
    price_step: str = ""        # one tick as a decimal string ("0.01"; "": prices print as ticks)
    qty_step: str = ""          # one lot as a decimal string ("0.00000001"; "": sizes as lots)

    @property
    def unit(self) -> str:
        """Return the label of money amounts: the currency, or ``TICKS_X_LOTS``."""
        return self.currency or TICKS_X_LOTS

    def terms(self) -> np.ndarray:
        """Return float64 [tick_value, maker_rate, taker_rate], the form the numba paths take."""
        return np.array([self.tick_value, self.maker_rate, self.taker_rate], np.float64)

    def describe(self) -> dict:
        """Return the JSON-able description a result's meta keeps: unit, currency, tick value,
        maker and taker bps and where the rates came from."""
        out = {"unit": self.unit, "currency": self.currency, "tick_value": self.tick_value,
               "maker_bps": self.maker_rate * 1e4, "taker_bps": self.taker_rate * 1e4,
               "fees_from": self.fees_from}
        if self.price_step or self.qty_step:
            out.update(price_step=self.price_step, qty_step=self.qty_step)
        return out

    def price_text(self, ticks: int) -> str:
        """Return a price in ticks as the report prints it: a decimal when ``price_step`` is
        known (6183763 at 0.01 -> "61837.63"), else the tick count."""
        return _decimal_text(ticks, self.price_step)

    def qty_text(self, lots: int) -> str:
        """Return a quantity in lots as a decimal when ``qty_step`` is known (100000 lots of
        1e-8 -> "0.001"), else the lot count with thousands separators."""
        return _decimal_text(lots, self.qty_step)


def _decimal_text(n: int, step: str) -> str:
    if not step:
        return f"{int(n):,}"
    d = (Decimal(int(n)) * Decimal(step)).normalize()
    return f"{d:f}"


def _finite(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{what} must be a finite number; got {value!r}")
    return float(value)


def money_for(symbol_config: dict | None, fees_bps: float | None) -> Money:
    """Return the ``Money`` of a backtest on the symbol whose engine config is ``symbol_config``
    (None or a dict without the money keys: ticks x lots, no schedule) with ``fees_bps``.

    Raises UsageError when ``fees_bps`` is negative or not finite, or the symbol's tick value or
    rates are not finite numbers (or its tick value is not > 0).
    """
    cfg = symbol_config or {}
    currency = str(cfg.get("currency") or "")
    tick_value = 1.0
    if currency:
        raw = cfg.get("tick_value")
        tick_value = _finite(cfg.get("tick_size", 1) if raw is None else raw,
                             f"symbol {cfg.get('name')!r}: tick_value")
        if tick_value <= 0:
            raise UsageError(f"symbol {cfg.get('name')!r}: tick_value must be > 0; got {raw!r}")
    if fees_bps is not None:
        rate = _finite(fees_bps, "fees_bps")
        if rate < 0:
            raise UsageError(f"fees_bps must be >= 0; got {fees_bps}")
        return Money(currency, tick_value, rate / 1e4, rate / 1e4, "fees_bps")
    maker = _finite(cfg.get("maker_bps", 0.0) or 0.0, f"symbol {cfg.get('name')!r}: maker_bps")
    taker = _finite(cfg.get("taker_bps", 0.0) or 0.0, f"symbol {cfg.get('name')!r}: taker_bps")
    return Money(currency, tick_value, maker / 1e4, taker / 1e4, "symbol")
