"""Zero-intelligence Poisson order flow (Smith, Farmer, Gillemot & Krishnamurthy 2003, "Statistical
theory of the continuous double auction").

Per symbol and side, three independent processes drive the book:
- market orders at rate ``market_rate`` (per second): a MARKET IOC order of ``size`` lots;
- limit orders at rate ``limit_rate`` (per second), at distance d = 1..``max_distance`` ticks from
  the *opposite* best quote (a buy at best_ask - d, a sell at best_bid + d), d drawn with weight
  ``distance_decay ** (d - 1)`` (1.0 = uniform, the paper's flat density); so a limit order never
  crosses, and may improve the own best quote. With no opposite quote the last one seen is used.
- cancellations: each resting order is cancelled at rate ``cancel_rate``, so the side's cancel
  rate is cancel_rate x (resting orders on that side).

Simulation (exact, event by event, as in Gillespie's algorithm): with total rate
R = 2 market_rate + 2 limit_rate + cancel_rate x N (N resting orders), the next event comes after
an Exp(R) time and is of each kind with probability rate / R; a cancel picks a resting order
uniformly. This needs the live book (best quotes and resting orders), so the generator keeps a
light numba book model (scenarios/generators/_book.py) that applies the engine's own rules; generating in
steps against the engine would cost a Python round trip per event. Draws are taken up front from
one seeded numpy Generator, so a seed fixes the bytes.

Several symbols are independent copies (seeds spawned from ``seed``) merged by timestamp; order ids
are unique across symbols. Invariants: every CANCEL names an order live in the engine; market
orders never rest. Known limit: the book model spans ``price_window`` ticks around the start mid;
a flow that would leave it raises UsageError (raise the window or shorten the run).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Tif

from exsim.scenarios.generators._book import ASK, BID, PX, SIDE, book_add, book_match, book_pick_live, book_remove, new_book

# numba inlines scenarios.generators._book and freezes schema codes here but keys the cache on this file only
guard(__name__, __file__, deps=("exsim.scenarios.generators._book", "exsim.exchange.schema"))

__all__ = ["zi_flow"]

_NS = 1_000_000_000


def zi_flow(n: int, seed: int, n_symbols: int = 1, *, market_rate: float = 1.0, limit_rate: float = 5.0,
            cancel_rate: float = 0.05, max_distance: int = 20, distance_decay: float = 1.0,
            size_min: int = 1, size_max: int = 1, mid_start=100_000, price_window: int = 20_000,
            n_traders: int = 10, start_ts: int = 0) -> np.ndarray:
    """Return ``n`` messages per symbol of zero-intelligence flow (ORDER_DTYPE, ts ascending).

    Rates are per second per side; ``mid_start`` is one price in ticks or one per symbol.
    Raises UsageError for a non-positive rate or size, or when prices leave the window.
    """
    if n < 0 or n_symbols < 1 or max_distance < 1 or n_traders < 1 or not 1 <= size_min <= size_max:
        raise UsageError("need n >= 0, n_symbols >= 1, max_distance >= 1, n_traders >= 1, 1 <= size_min <= size_max")
    if market_rate < 0 or limit_rate <= 0 or cancel_rate < 0 or distance_decay <= 0:
        raise UsageError("need market_rate >= 0, limit_rate > 0, cancel_rate >= 0, distance_decay > 0")
    mids = np.broadcast_to(np.asarray(mid_start, np.int64), (n_symbols,))
    if np.any(mids - price_window // 2 < 1):
        raise UsageError("mid_start must exceed price_window / 2 so that every price stays >= 1")
    w = distance_decay ** np.arange(max_distance)
    cdf = np.cumsum(w / w.sum())
    parts = []
    next_id = 0
    for s, ss in enumerate(np.random.SeedSequence(seed).spawn(n_symbols)):
        rng = np.random.default_rng(ss)
        e = rng.exponential(1.0, n)
        u = rng.random(n)
        d = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), max_distance - 1) + 1
        size = rng.integers(size_min, size_max + 1, n)
        pick = rng.random(n)
        trader = rng.integers(1, n_traders + 1, n).astype(np.uint32)
        lo = int(mids[s]) - price_window // 2
        bk = new_book(1, price_window, max(n, 1), np.array([lo]))
        cols = _zi_kernel(bk, e, u, d, size, pick, trader, price_window // 2,
                          market_rate, limit_rate, cancel_rate)
        t, kind, oid, side, px, qty, otype, tif, otr, status = cols
        if status:
            raise UsageError(f"symbol {s}: prices left the {price_window}-tick window; raise price_window")
        out = np.zeros(n, ORDER_DTYPE)
        out["ts"] = start_ts + np.rint(t * _NS).astype(np.int64)
        out["kind"], out["side"], out["qty"] = kind, side, qty
        out["order_id"] = oid + next_id
        out["price"] = np.where(otype == OrderType.MARKET, 0, px + lo)
        out["order_type"], out["tif"], out["trader"], out["symbol"] = otype, tif, otr, s
        next_id += int(oid.max()) if n else 0
        parts.append(out)
    flow = np.concatenate(parts)
    return flow[np.argsort(flow["ts"], kind="stable")]


@njit(cache=True)
def _zi_kernel(bk, e, u, d, size, pick, trader, mid, market_rate, limit_rate, cancel_rate):
    n = e.shape[0]
    lv, od, live, st, lo = bk
    width = lv.shape[1]
    t_out = np.zeros(n)
    kind = np.zeros(n, np.uint8)
    oid = np.zeros(n, np.uint64)
    side = np.zeros(n, np.uint8)
    px = np.zeros(n, np.int64)
    qty = np.zeros(n, np.int64)
    otype = np.zeros(n, np.uint8)
    tif = np.zeros(n, np.uint8)
    otr = np.zeros(n, np.uint32)
    o_trader = np.zeros(max(n, 1), np.uint32)
    last_bid, last_ask = mid - 1, mid + 1   # reference quotes when a side is empty
    t = 0.0
    next_slot = 0
    for i in range(n):
        n_rest = st[1, 0]
        rate = 2.0 * market_rate + 2.0 * limit_rate + cancel_rate * n_rest
        t += e[i] / rate
        t_out[i] = t
        x = u[i] * rate
        if st[0, BID] >= 0:
            last_bid = st[0, BID]
        if st[0, ASK] < width:
            last_ask = st[0, ASK]
        if x < 2.0 * market_rate:
            sd = 0 if x < market_rate else 1
            slot = next_slot
            next_slot += 1
            kind[i], oid[i], side[i], qty[i] = Kind.NEW, slot + 1, sd, size[i]
            otype[i], tif[i], otr[i] = OrderType.MARKET, Tif.IOC, trader[i]
            book_match(bk, 0, sd, width if sd == 0 else -1, size[i])
        elif x < 2.0 * market_rate + 2.0 * limit_rate:
            sd = 0 if x < 2.0 * market_rate + limit_rate else 1
            p = last_ask - d[i] if sd == 0 else last_bid + d[i]
            if p < 0 or p >= width:
                return t_out, kind, oid, side, px, qty, otype, tif, otr, 1
            slot = next_slot
            next_slot += 1
            kind[i], oid[i], side[i], px[i], qty[i] = Kind.NEW, slot + 1, sd, p, size[i]
            otype[i], tif[i], otr[i] = OrderType.LIMIT, Tif.GTC, trader[i]
            o_trader[slot] = trader[i]
            book_add(bk, slot, 0, sd, p, size[i])
        else:
            slot = book_pick_live(bk, pick[i])
            kind[i], oid[i], side[i], px[i] = Kind.CANCEL, slot + 1, od[slot, SIDE], od[slot, PX]
            otr[i] = o_trader[slot]
            book_remove(bk, slot)
    return t_out, kind, oid, side, px, qty, otype, tif, otr, 0
