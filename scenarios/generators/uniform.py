"""Uniform random order flow: passive limits around a random-walk mid, cancels of live orders and
crossing limits, in a fixed mix. The engine benchmark flow is the preset ``bench_1m``.

The law of one message (independent draws per message, all from one ``numpy.random.Generator``
seeded with ``seed``, then one sequential numba pass):
- symbol: uniform over ``n_symbols``; each symbol has its own mid, which starts at
  ``mid_start[s]`` (ticks) and moves -1/0/+1 tick with probabilities q/2, 1-q, q/2
  (q = ``mid_step_prob``) at each message of that symbol.
- kind, with probabilities ``p_passive``, ``p_cancel``, ``p_cross`` (they must sum to 1):
  - passive limit: side buy/sell with probability 1/2; price ``mid - d`` (buy) or ``mid + d``
    (sell) with d uniform on 1..``span``; if that would cross the opposite best it is moved to one
    tick inside it, so a passive limit always rests.
  - cancel: of a live order chosen uniformly among all live orders (all symbols); when none is
    live the message becomes a passive limit (so the realised mix is exact only once a book
    exists; with the default mix that is the first few messages).
  - crossing limit: side 1/2 each; priced ``c`` ticks through the opposite best (c uniform on
    0..``cross_depth``-1), or, when the opposite side is empty, at ``mid +/- d`` like a passive
    order of the far side. What does not fill rests (GTC).
- size: uniform on ``size_min..size_max`` (``size_law="uniform"``) or geometric with mean
  ``size_mean`` truncated to ``size_min..size_max`` (``size_law="geometric"``).
- trader: uniform on 1..``n_traders`` (a cancel carries the trader of the order it cancels).
- time: exponential inter-arrival gaps with mean ``mean_gap_ns``, rounded to whole ns.

Invariants: the same arguments give identical bytes; order ids of NEW messages are 1, 2, 3 ...
in message order (unique across symbols); every CANCEL names an order that is live at that point
under price-time priority (the generator keeps a light book model, scenarios/generators/_book.py, and
matches crossing limits in it exactly as the engine does), so the engine rejects none of them.

Known limit: the book model spans a price window sized from the simulated mid paths plus a margin
of 4 x (span + cross_depth) ticks; a price that would leave it is clamped to its edge.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Tif

from exsim.scenarios.generators._book import ASK, BID, PX, SIDE, SYM, book_add, book_match, book_pick_live, book_remove, new_book

# numba inlines scenarios.generators._book and freezes schema codes here but keys the cache on this file only
guard(__name__, __file__, deps=("exsim.scenarios.generators._book", "exsim.exchange.schema"))

__all__ = ["uniform_flow", "bench_1m", "BENCH_1M", "PASSIVE", "CANCEL", "CROSS"]

# Message categories of the generator (what the kind draw selected; not a schema code).
PASSIVE, CANCEL, CROSS = 0, 1, 2


def _draw_sizes(rng, n, size_law, size_min, size_max, size_mean):
    if not 1 <= size_min <= size_max:
        raise UsageError(f"size_min and size_max need 1 <= size_min <= size_max, got size_min "
                         f"{size_min}, size_max {size_max}")
    if size_law == "uniform":
        return rng.integers(size_min, size_max + 1, n)
    if size_law == "geometric":
        if size_mean is None or size_mean < 1:
            raise UsageError("size_law='geometric' needs size_mean >= 1")
        return np.clip(rng.geometric(1.0 / size_mean, n), size_min, size_max)
    raise UsageError(f"size_law must be 'uniform' or 'geometric', got {size_law!r}")


def uniform_flow(n: int, seed: int, n_symbols: int = 1, *, p_passive: float = 0.6,
                 p_cancel: float = 0.3, p_cross: float = 0.1, span: int = 50, cross_depth: int = 3,
                 size_law: str = "uniform", size_min: int = 1, size_max: int = 100,
                 size_mean: float | None = None, mid_start=100_000, mid_step_prob: float = 0.1,
                 n_traders: int = 10, mean_gap_ns: float = 1_000.0, start_ts: int = 0) -> np.ndarray:
    """Return ``n`` order messages (ORDER_DTYPE) of the uniform random flow described above.

    ``mid_start`` is one price in ticks or one per symbol. Raises UsageError when the mix does not
    sum to 1, a size or count argument is out of range, or the mid path would reach prices <= 0.
    """
    limits = {"n": (n, 0), "n_symbols": (n_symbols, 1), "span": (span, 1),
              "cross_depth": (cross_depth, 1), "n_traders": (n_traders, 1)}
    broken = [f"{k} >= {lo}, got {v}" for k, (v, lo) in limits.items() if v < lo]
    if broken:
        raise UsageError("need " + "; ".join(broken))
    mix = np.array([p_passive, p_cancel, p_cross], float)
    if np.any(mix < 0) or abs(mix.sum() - 1.0) > 1e-9:
        raise UsageError(f"p_passive + p_cancel + p_cross must be 1, got {mix.sum()}")
    if not 0 <= mid_step_prob <= 1 or mean_gap_ns < 0:
        raise UsageError("need 0 <= mid_step_prob <= 1 and mean_gap_ns >= 0")
    mids = np.broadcast_to(np.asarray(mid_start, np.int64), (n_symbols,)).copy()

    rng = np.random.default_rng(seed)
    sym = rng.integers(0, n_symbols, n) if n_symbols > 1 else np.zeros(n, np.int64)
    u = rng.random(n)
    cat = np.where(u < mix[0], PASSIVE, np.where(u < mix[0] + mix[1], CANCEL, CROSS))
    side = rng.integers(0, 2, n)
    dist = rng.integers(1, span + 1, n)
    through = rng.integers(0, cross_depth, n)
    size = _draw_sizes(rng, n, size_law, size_min, size_max, size_mean)
    v = rng.random(n)
    step = np.where(v < mid_step_prob / 2, -1, np.where(v >= 1 - mid_step_prob / 2, 1, 0))
    pick = rng.random(n)
    trader = rng.integers(1, n_traders + 1, n)
    ts = start_ts + np.cumsum(np.rint(rng.exponential(mean_gap_ns, n))).astype(np.int64)

    # Each symbol's mid path bounds its price window (walk = running sum of its own steps).
    order = np.argsort(sym, kind="stable")
    walk = np.zeros(n, np.int64)
    if n:
        cs = np.cumsum(step[order])
        starts = np.searchsorted(sym[order], np.arange(n_symbols))
        before = np.where(starts > 0, cs[np.maximum(starts - 1, 0)], 0)
        walk[order] = cs - np.repeat(before, np.diff(np.append(starts, n)))
    wmin = np.zeros(n_symbols, np.int64)
    wmax = np.zeros(n_symbols, np.int64)
    np.minimum.at(wmin, sym, walk)
    np.maximum.at(wmax, sym, walk)
    margin = 4 * (span + cross_depth) + 8
    lo = mids + wmin - margin
    if np.any(lo < 1):
        raise UsageError(f"mid_start is too low for this walk: prices would reach {int(lo.min())} <= 0")
    width = int(np.max(wmax - wmin)) + 2 * margin + 1

    bk = new_book(n_symbols, width, max(n, 1), lo)
    out = np.zeros(n, dtype=ORDER_DTYPE)
    cols = _uniform_kernel(bk, mids - lo, sym, cat, side, dist, through, size, step, pick, trader)
    out["ts"] = ts
    out["symbol"] = sym
    out["kind"], out["order_id"], out["side"], out["price"], out["qty"], out["trader"] = cols
    out["price"] += lo[sym]
    out["order_type"] = OrderType.LIMIT
    out["tif"] = Tif.GTC
    return out


@njit(cache=True)
def _uniform_kernel(bk, mid, sym, cat, side, dist, through, size, step, pick, trader):
    n = sym.shape[0]
    lv, od, live, st, lo = bk
    width = lv.shape[1]
    kind = np.zeros(n, np.uint8)
    oid = np.zeros(n, np.uint64)
    oside = np.zeros(n, np.uint8)
    price = np.zeros(n, np.int64)   # index in the symbol's window; the caller adds lo
    qty = np.zeros(n, np.int64)
    otrader = np.zeros(n, np.uint32)
    o_trader = np.zeros(max(n, 1), np.uint32)
    next_slot = 0
    for i in range(n):
        s = sym[i]
        mid[s] += step[i]
        c = cat[i]
        if c == CANCEL:
            slot = book_pick_live(bk, pick[i])
            if slot >= 0:
                kind[i] = Kind.CANCEL
                oid[i] = slot + 1
                oside[i] = od[slot, SIDE]
                price[i] = od[slot, PX]
                otrader[i] = o_trader[slot]
                sym[i] = od[slot, SYM]
                book_remove(bk, slot)
                continue
            c = PASSIVE
        sd = side[i]
        s = sym[i]
        if c == CROSS and sd == 0 and st[s, ASK] < width:
            px = st[s, ASK] + through[i]
        elif c == CROSS and sd == 1 and st[s, BID] >= 0:
            px = st[s, BID] - through[i]
        elif (c == PASSIVE) == (sd == 0):
            # passive buy, or a crossing sell into an empty bid side: below the mid
            px = mid[s] - dist[i]
            if c == PASSIVE and px >= st[s, ASK]:
                px = st[s, ASK] - 1
        else:
            px = mid[s] + dist[i]
            if c == PASSIVE and px <= st[s, BID]:
                px = st[s, BID] + 1
        px = min(max(px, 0), width - 1)
        slot = next_slot
        next_slot += 1
        kind[i] = Kind.NEW
        oid[i] = slot + 1
        oside[i] = sd
        price[i] = px
        qty[i] = size[i]
        otrader[i] = trader[i]
        o_trader[slot] = trader[i]
        rem = book_match(bk, s, sd, px, size[i])
        if rem > 0:
            book_add(bk, slot, s, sd, px, rem)
    return kind, oid, oside, price, qty, otrader


# The engine benchmark flow (engine issue, benchmark (b) and (c)); presets/bench_1m*.toml say the
# same, and a test checks that both give identical bytes.
BENCH_1M = dict(n=1_000_000, seed=7, p_passive=0.6, p_cancel=0.3, p_cross=0.1, span=50,
                size_min=1, size_max=100)


def bench_1m(n_symbols: int = 1) -> np.ndarray:
    """Return the engine benchmark flow: 1,000,000 uniform messages, seed 7, over ``n_symbols``."""
    return uniform_flow(n_symbols=n_symbols, **BENCH_1M)
