"""A full trading day: an opening call, continuous trading with a volatility interruption, a
closing call, as one flow of order messages and PHASE messages (docs/semantics.md, "Trading
phases, auctions and price bands").

The day is a schedule of PHASE messages per symbol: the ``schedule`` argument (the PHASE rows a
scenario's [[schedule]] expands into, ``scenarios.schedule``) or, without it, ``DEFAULT_DAY``
(Xetra's hours): 08:00 PRE_OPEN (reference price = the symbol's ``mid_start``), 09:00
OPENING_AUCTION (uncross, then continuous), 17:30 PRE_CLOSE, 17:35 CLOSING_AUCTION (uncross,
then closed). Between two PHASE messages of a symbol, the phase its last one entered decides
what the generator sends (OPENING_AUCTION counts as continuous, CLOSING_AUCTION as closed):

- a call (PRE_OPEN, PRE_CLOSE, REOPENING_AUCTION): ``call_messages`` NEW orders, GTC, at
  uniform times in the interval: a share ``market_share`` of them MARKET orders, the others
  limits priced uniformly on ``mid - span .. mid + span`` whatever their side, so buys and sells
  overlap and the call book crosses;
- continuous: the interval's share (by length) of the rest of ``n``: a random-walk mid (steps
  of one tick with probability ``mid_step_prob``), passive limits at ``mid -/+ d`` (d uniform on
  1..``span``) and, with probability ``cross_share``, limits ``c`` ticks through the mid (c on
  0..3) that trade and rest what is left (GTC, so in a call they rest instead of being refused);
- at ``burst_at`` in a continuous interval, a burst that breaches a dynamic band of
  ``burst_bps`` (w = mid x burst_bps // 10000): a SELL limit at ``mid + 3w/2`` (the far quote),
  then a BUY IOC limit at ``mid + 2w`` for more than every sell the symbol has had, which
  sweeps the asks up to the band edge and would print at the far quote: with
  ``dynamic_band_bps <= burst_bps`` (and a static band wider than ``2 x burst_bps``) the engine
  starts a re-opening auction of ``interruption_ns`` there; then a crossing BUY and SELL pair at
  ``mid +/- 1``, which rest in that call, so its uncross (at its end, by time) trades;
- CLOSED, HALTED: nothing.

Sizes are uniform on ``size_min..size_max``, traders uniform on 1..``n_traders``. NEW ids are 1,
2, 3 ... in message order; no message is a CANCEL or MODIFY (so none names a gone order).

Invariants: the same arguments give identical bytes; messages are in ts order and a PHASE
message goes before the orders of its ts; order messages are sent only between the first and
the last PHASE message of their symbol.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import CALL_PHASES, ORDER_DTYPE, Kind, OrderType, Phase, Side, Tif

from exsim.scenarios.schedule import merge_phases, parse_time

__all__ = ["trading_day_flow", "DEFAULT_DAY"]

_H = 3_600 * 10**9
# (time, phase) of the default day, ns after midnight
DEFAULT_DAY = ((8 * _H, Phase.PRE_OPEN), (9 * _H, Phase.OPENING_AUCTION),
               (17 * _H + _H // 2, Phase.PRE_CLOSE),
               (17 * _H + _H // 2 + 5 * 60 * 10**9, Phase.CLOSING_AUCTION))
_RESTING = {Phase.OPENING_AUCTION: Phase.CONTINUOUS, Phase.CLOSING_AUCTION: Phase.CLOSED}


def _default_schedule(mids: np.ndarray) -> np.ndarray:
    rows = np.zeros(len(DEFAULT_DAY) * len(mids), ORDER_DTYPE)
    k = 0
    for ts, phase in DEFAULT_DAY:
        for s, mid in enumerate(mids.tolist()):
            rows[k]["ts"], rows[k]["symbol"], rows[k]["kind"] = ts, s, Kind.PHASE
            rows[k]["phase"] = phase
            rows[k]["price"] = mid if phase == Phase.PRE_OPEN else 0
            k += 1
    return rows


def trading_day_flow(n: int, seed: int, n_symbols: int = 1, *, schedule=None, mid_start=10_000,
                     span: int = 20, size_min: int = 1, size_max: int = 100, n_traders: int = 10,
                     call_messages: int = 200, market_share: float = 0.05,
                     cross_share: float = 0.1, mid_step_prob: float = 0.05,
                     burst_at="12:00:00", burst_bps: int = 100) -> np.ndarray:
    """Return a day of order and PHASE messages (ORDER_DTYPE; see the module docstring).

    ``n`` is the number of continuous-trading messages (all symbols together); every call
    interval adds ``call_messages`` per symbol, a burst 4 per symbol. ``schedule``: PHASE rows
    (ORDER_DTYPE, kind PHASE) in ts order, or None for ``DEFAULT_DAY``. ``mid_start``: ticks,
    one or one per symbol. ``burst_at``: "HH:MM:SS" or ns; a time outside every continuous
    interval sends no burst.
    Raises UsageError for a count, share or price argument out of range, a schedule that is not
    PHASE rows in ts order, or a mid too low for the span and burst.
    """
    for name, v, lo in (("n", n, 0), ("n_symbols", n_symbols, 1), ("span", span, 1),
                        ("n_traders", n_traders, 1), ("call_messages", call_messages, 0),
                        ("burst_bps", burst_bps, 1)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise UsageError(f"{name} must be an integer >= {lo}; got {v!r}")
    if not 1 <= size_min <= size_max:
        raise UsageError(f"need 1 <= size_min <= size_max; got {size_min}, {size_max}")
    for name, v in (("market_share", market_share), ("cross_share", cross_share),
                    ("mid_step_prob", mid_step_prob)):
        if not 0 <= v <= 1:
            raise UsageError(f"{name} must be in [0, 1]; got {v!r}")
    mids = np.broadcast_to(np.asarray(mid_start, np.int64), (n_symbols,)).copy()
    if np.any(mids - span - 64 < 1):
        raise UsageError(f"mid_start must be above span + 64 ticks; got {mids.tolist()}")
    try:
        burst = parse_time(burst_at, "burst_at")
    except Exception as e:   # InputError from the parser: a parameter, so a UsageError here
        raise UsageError(str(e)) from None
    if schedule is None:
        schedule = _default_schedule(mids)
    if not (isinstance(schedule, np.ndarray) and schedule.dtype == ORDER_DTYPE
            and np.all(schedule["kind"] == Kind.PHASE) and np.all(np.diff(schedule["ts"]) >= 0)):
        raise UsageError("schedule must be PHASE rows (ORDER_DTYPE, kind PHASE) in ts order")
    rng = np.random.default_rng(seed)
    intervals = _intervals(schedule, n_symbols)
    cont = [(s, t0, t1) for s, t0, t1, ph in intervals if ph == Phase.CONTINUOUS]
    total = sum(t1 - t0 for _, t0, t1 in cont)
    parts = []
    mid = mids.copy()
    for s, t0, t1, ph in intervals:
        if ph in CALL_PHASES:
            parts.append(_call(rng, s, t0, t1, int(mid[s]), call_messages, span, market_share,
                               size_min, size_max, n_traders))
        elif ph == Phase.CONTINUOUS and total > 0:
            k = int(round(n * (t1 - t0) / total))
            rows, path = _continuous(rng, s, t0, t1, int(mid[s]), k, span, cross_share,
                                     mid_step_prob, size_min, size_max, n_traders)
            parts.append(rows)
            if t0 < burst < t1 - 3:
                j = int(np.searchsorted(rows["ts"], burst, side="right"))
                at_mid = int(path[j - 1]) if j else int(mid[s])
                sells = sum(int(p["qty"][(p["symbol"] == s) & (p["side"] == Side.SELL)
                                         & (p["ts"] <= burst)].sum()) for p in parts)
                parts.append(_burst(s, burst, at_mid, sells, burst_bps, size_max, n_traders))
            if k:
                mid[s] = int(path[-1])
    flow = np.concatenate(parts) if parts else np.zeros(0, ORDER_DTYPE)
    flow = flow[np.argsort(flow["ts"], kind="stable")]
    flow["order_id"] = np.arange(1, len(flow) + 1, dtype=np.uint64)
    return merge_phases(flow, schedule)


def _intervals(schedule: np.ndarray, n_symbols: int) -> list[tuple[int, int, int, Phase]]:
    """(symbol, start, end, phase) between consecutive PHASE rows of each symbol, symbol by
    symbol; the phase is the one the first row enters (auction targets as their resting phase)."""
    out = []
    for s in range(n_symbols):
        rows = schedule[schedule["symbol"] == s]
        for a, b in zip(rows[:-1].tolist(), rows[1:].tolist()):
            ts0, ts1 = a[0], b[0]
            ph = Phase(a[ORDER_DTYPE.names.index("phase")])
            if ts1 - ts0 > 2:
                out.append((s, ts0, ts1, _RESTING.get(ph, ph)))
    return out


def _rows(k: int, s: int, ts, side, price, qty, trader, otype=OrderType.LIMIT,
          tif=Tif.GTC) -> np.ndarray:
    out = np.zeros(k, ORDER_DTYPE)
    out["ts"], out["symbol"], out["kind"] = ts, s, Kind.NEW
    out["side"], out["price"], out["qty"], out["trader"] = side, price, qty, trader
    out["order_type"], out["tif"] = otype, tif
    return out


def _times(rng, t0: int, t1: int, k: int) -> np.ndarray:
    """``k`` sorted times in (t0, t1)."""
    return np.sort(rng.integers(t0 + 1, t1, k)) if k else np.zeros(0, np.int64)


def _call(rng, s, t0, t1, mid, k, span, market_share, size_min, size_max, n_traders):
    """The NEW orders of one call interval: limits on both sides around ``mid`` (they cross),
    some MARKET orders."""
    side = rng.integers(0, 2, k)
    price = mid + rng.integers(-span, span + 1, k)
    market = rng.random(k) < market_share
    rows = _rows(k, s, _times(rng, t0, t1, k), side, np.where(market, 0, price),
                 rng.integers(size_min, size_max + 1, k), rng.integers(1, n_traders + 1, k))
    rows["order_type"] = np.where(market, OrderType.MARKET, OrderType.LIMIT)
    return rows


def _continuous(rng, s, t0, t1, mid, k, span, cross_share, step_prob, size_min, size_max,
                n_traders):
    """The NEW orders of one continuous interval and the mid at each of them."""
    v = rng.random(k)
    step = np.where(v < step_prob / 2, -1, np.where(v >= 1 - step_prob / 2, 1, 0))
    mids = mid + np.cumsum(step)
    mids = np.maximum(mids, span + 2)
    side = rng.integers(0, 2, k)
    cross = rng.random(k) < cross_share
    d = rng.integers(1, span + 1, k)
    c = rng.integers(0, 4, k)
    buy = side == Side.BUY
    price = np.where(cross, np.where(buy, mids + c, mids - c), np.where(buy, mids - d, mids + d))
    rows = _rows(k, s, _times(rng, t0, t1, k), side, price,
                 rng.integers(size_min, size_max + 1, k), rng.integers(1, n_traders + 1, k))
    return rows, mids


def _burst(s: int, at: int, mid: int, sells: int, bps: int, size_max: int,
           n_traders: int) -> np.ndarray:
    """The four messages of a band-breaching burst at ``at`` around ``mid``; ``sells``: the
    symbol's sell quantity sent before it (see the module docstring)."""
    w = max(mid * bps // 10_000, 1)
    trader = n_traders   # one of the generator's traders
    rows = np.concatenate([
        _rows(1, s, at, Side.SELL, mid + 3 * w // 2, size_max, trader),
        _rows(1, s, at + 1, Side.BUY, mid + 2 * w, sells + size_max + 1, trader, tif=Tif.IOC),
        _rows(1, s, at + 2, Side.BUY, mid + 1, size_max, trader),
        _rows(1, s, at + 3, Side.SELL, mid - 1, size_max, trader),
    ])
    return rows
