"""Venue order types mixed into a plain flow: stops, icebergs and GTD orders.

``venue_mix(flow, seed)`` returns a copy of an ORDER_DTYPE flow in which shares of the NEW limit
orders become the order types of docs/semantics.md that a plain generator never sends. The law,
one independent draw per message; a plain NEW LIMIT message (not already an iceberg or GTD)
may be converted, everything else (the other messages, and every field the conversion does not
name) is copied unchanged, so with every share 0 the flow comes back as it was:
- with probability ``stop_share`` it becomes a stop on the far side of the market: a BUY stop
  triggers at ``mid + d``, a SELL stop at ``mid - d``, where ``d = |price - mid|`` (at least 1)
  and ``mid`` is the symbol's running estimate (the mean of the last 64 NEW limit prices of
  that symbol). Half are STOP (released as MARKET), half STOP_LIMIT with limit ``price`` moved
  through the trigger by ``d`` (a buy at ``trigger + d``), so released stop-limits mostly trade;
- else with probability ``iceberg_share`` it becomes an iceberg showing ``max(1, qty // 4)``
  (orders of quantity 1 stay plain);
- else with probability ``gtd_share`` it becomes GTD, expiring ``U(1, expire_max_ns)`` after its ts.
Stops whose trigger is already reached when they arrive are rejected (STOP_PRICE_REACHED), as a
venue would; cancels of converted orders cancel them if they are still live.

Invariants: a pure function of its arguments (same bytes for the same flow and seed); order
ids, timestamps, traders and every CANCEL/MODIFY row are unchanged.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Side, Tif

guard(__name__, __file__, deps=("exsim.exchange.schema",))

__all__ = ["venue_mix"]

_WINDOW = 64   # NEW limit prices per symbol in the running mid estimate


@njit(cache=True)
def _running_mid(symbol, price, is_limit, n_symbols):
    """The mean of the previous ``_WINDOW`` NEW limit prices of each message's symbol (0: none)."""
    n = len(price)
    ring = np.zeros((n_symbols, _WINDOW), np.int64)
    filled = np.zeros(n_symbols, np.int64)
    total = np.zeros(n_symbols, np.int64)
    mid = np.zeros(n, np.int64)
    for i in range(n):
        s = symbol[i]
        k = min(filled[s], _WINDOW)
        mid[i] = total[s] // k if k > 0 else 0
        if is_limit[i]:
            slot = filled[s] % _WINDOW
            total[s] += price[i] - ring[s, slot]
            ring[s, slot] = price[i]
            filled[s] += 1
    return mid


def venue_mix(flow: np.ndarray, seed: int, *, stop_share: float = 0.1,
              iceberg_share: float = 0.1, gtd_share: float = 0.1,
              expire_max_ns: int = 10_000_000) -> np.ndarray:
    """Return a copy of ``flow`` (ORDER_DTYPE) with shares of its NEW limits turned into stops,
    icebergs and GTD orders (see the module docstring for the law).

    Raises UsageError if ``flow`` is not a 1-d ORDER_DTYPE array, a share is outside [0, 1],
    the shares sum above 1, or ``expire_max_ns`` < 1.
    """
    if not isinstance(flow, np.ndarray) or flow.dtype != ORDER_DTYPE or flow.ndim != 1:
        raise UsageError(f"venue_mix takes a 1-d ORDER_DTYPE array; got "
                         f"{getattr(flow, 'dtype', type(flow).__name__)}")
    shares = {"stop_share": stop_share, "iceberg_share": iceberg_share, "gtd_share": gtd_share}
    for name, v in shares.items():
        if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
            raise UsageError(f"{name} must be a number in [0, 1]; got {v!r}")
    if sum(shares.values()) > 1.0:
        raise UsageError(f"stop_share + iceberg_share + gtd_share must be <= 1; got "
                         f"{sum(shares.values())}")
    if not isinstance(expire_max_ns, (int, np.integer)) or expire_max_ns < 1:
        raise UsageError(f"expire_max_ns must be an integer >= 1; got {expire_max_ns!r}")
    out = flow.copy()
    n = len(out)
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    half = rng.random(n) < 0.5
    life = rng.integers(1, int(expire_max_ns) + 1, n)
    limit_new = (out["kind"] == Kind.NEW) & (out["order_type"] == OrderType.LIMIT)
    # why only plain limits convert: an iceberg or GTD already in the flow keeps its fields (a
    # stop made of one would carry its display quantity or expiry into another order type)
    plain = limit_new & (out["display_qty"] == 0) & (out["tif"] != Tif.GTD)
    mid = _running_mid(out["symbol"].astype(np.int64), out["price"], limit_new,
                       int(out["symbol"].max()) + 1)
    stop = plain & (u < stop_share) & (mid > 0)
    ice = plain & ~stop & (u >= stop_share) & (u < stop_share + iceberg_share) \
        & (out["qty"] >= 2)
    gtd = plain & ~stop & ~ice & (u >= stop_share + iceberg_share) \
        & (u < stop_share + iceberg_share + gtd_share)

    buy = out["side"] == Side.BUY
    d = np.maximum(np.abs(out["price"] - mid), 1)
    trigger = np.where(buy, mid + d, np.maximum(mid - d, 1))
    limit = np.where(buy, trigger + d, np.maximum(trigger - d, 1))
    # why np.where(..., out[field]) everywhere: rows not converted keep what they carried
    # (a PHASE message's expire_ts, a stop's stop_price, an iceberg's display_qty)
    out["stop_price"] = np.where(stop, trigger, out["stop_price"])
    out["order_type"] = np.where(stop, np.where(half, OrderType.STOP, OrderType.STOP_LIMIT),
                                 out["order_type"])
    out["price"] = np.where(stop, np.where(half, 0, limit), out["price"])
    out["display_qty"] = np.where(ice, np.maximum(out["qty"] // 4, 1), out["display_qty"])
    out["tif"] = np.where(gtd, Tif.GTD, out["tif"])
    out["expire_ts"] = np.where(gtd, out["ts"] + life, out["expire_ts"])
    return out
