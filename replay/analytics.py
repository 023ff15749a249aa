"""``stats``: book aggregates over time for one symbol, from stored L2 updates and fills;
``phase_stats``: its trading day (auctions, time in each phase, halts, volatility
interruptions, auction trades apart from continuous ones), from its events and fills.

One row per timestamp at which the symbol's book changed, after the last message of that
timestamp (its ``seq``): messages sharing one ts (a Binance depth update split into one message
per level, a burst) are one change, so no row shows a half-applied update:

- ``mid``        (best bid + best ask) / 2
- ``spread``     best ask - best bid
- ``microprice`` (best bid * ask qty + best ask * bid qty) / (bid qty + ask qty), top of book
- ``imbalance``  (B - A) / (B + A), B and A the quantities of the best ``levels`` levels per side
- ``vwap``       sum(price * qty) / sum(qty) over the fills with ts in (ts - window_ns, ts]

Prices are in ticks (float64; multiply by the symbol's tick size for money). ``mid``, ``spread``
and ``microprice`` are NaN when a side is empty; ``imbalance`` is NaN when both are; ``vwap`` is
NaN when the window holds no fill.

Invariants: the book is rebuilt exactly (the L2 view of ``book_at`` at the seq before the first
row, then every L2 update in order); VWAP needs fills in nondecreasing ts order, which holds when
input timestamps are nondecreasing (every exsim generator and loader). Limits: VWAP sums are
float64, so ``price * qty`` beyond 2^53 loses precision.

``phase_stats`` (docs/semantics.md, Trading phases): every UNCROSS event is an auction (its
``phase`` says which: opening, closing, re-opening), with its price, executed volume and surplus;
the time in a phase runs from the PHASE event entering it to the next PHASE event of the symbol
(or the run's last message), the phase before the first one being the starting checkpoint's; a
halt is a PHASE event entering HALTED, a volatility interruption one with reason PRICE_BAND; a
fill is an auction trade when its ``aggressor_side`` is ``AUCTION_SIDE``. A run journaled before
phases reads as continuous all day, without auctions.
"""

from __future__ import annotations

import os

import numpy as np
from numba import njit

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import AUCTION_SIDE, CALL_MARKET_PRICE, Event, Phase, Reason
from exsim.store import Reader, read

from exsim.replay.rundir import SEQ_MAX, resolve_symbol, run_info
from exsim.replay.rebuild import _checkpoint_phase, _checkpoint_row, _run, book_at

__all__ = ["STATS_DTYPE", "AUCTION_DTYPE", "stats", "stats_arrays", "phase_stats"]

# one auction (an UNCROSS event): which one (a Phase code), its price (0: nothing executed),
# executed volume and surplus (> 0 buy side)
AUCTION_DTYPE = np.dtype([("seq", "<i8"), ("ts", "<i8"), ("auction", "u1"), ("price", "<i8"),
                          ("qty", "<i8"), ("surplus", "<i8")])

STATS_DTYPE = np.dtype([("ts", "<i8"), ("seq", "<i8"), ("mid", "<f8"), ("spread", "<f8"),
                        ("microprice", "<f8"), ("imbalance", "<f8"), ("vwap", "<f8")])

_TS_MIN = -(1 << 63)


@njit(cache=True)
def _series(bid_px, bid_q, ask_px, ask_q, seq, ts, side, price, qty, f_ts, f_px, f_qty, levels,
            window):
    # ladders: bids ascending (best at the end), asks descending (best at the end)
    cap = bid_px.size + ask_px.size + seq.size + 1
    lp = np.empty((2, cap), np.int64)
    lq = np.empty((2, cap), np.int64)
    n = np.zeros(2, np.int64)
    for i in range(bid_px.size):
        lp[0, i] = bid_px[bid_px.size - 1 - i]
        lq[0, i] = bid_q[bid_px.size - 1 - i]
    for i in range(ask_px.size):
        lp[1, i] = ask_px[ask_px.size - 1 - i]
        lq[1, i] = ask_q[ask_px.size - 1 - i]
    n[0], n[1] = bid_px.size, ask_px.size
    rows = 0
    for i in range(seq.size):
        if i == seq.size - 1 or ts[i + 1] != ts[i]:
            rows += 1
    out_ts = np.empty(rows, np.int64)
    out_seq = np.empty(rows, np.int64)
    out = np.empty((rows, 5), np.float64)
    r = 0
    fa = 0   # first fill inside the window
    fb = 0   # first fill after the row's ts
    num = 0.0
    den = 0.0
    for i in range(seq.size):
        s = np.int64(side[i])
        key = price[i] if s == 0 else -price[i]
        lo, hi = 0, n[s]
        while lo < hi:   # first ladder index whose key >= key
            mid = (lo + hi) >> 1
            k = lp[s, mid] if s == 0 else -lp[s, mid]
            if k < key:
                lo = mid + 1
            else:
                hi = mid
        k = (lp[s, lo] if s == 0 else -lp[s, lo]) if lo < n[s] else key + 1
        if lo < n[s] and k == key:
            if qty[i] == 0:
                for j in range(lo, n[s] - 1):
                    lp[s, j] = lp[s, j + 1]
                    lq[s, j] = lq[s, j + 1]
                n[s] -= 1
            else:
                lq[s, lo] = qty[i]
        elif qty[i] != 0:
            for j in range(n[s], lo, -1):
                lp[s, j] = lp[s, j - 1]
                lq[s, j] = lq[s, j - 1]
            lp[s, lo] = price[i]
            lq[s, lo] = qty[i]
            n[s] += 1
        if i < seq.size - 1 and ts[i + 1] == ts[i]:
            continue
        t = ts[i]
        out_ts[r] = t
        out_seq[r] = seq[i]
        nb, na = n[0], n[1]
        if nb > 0 and na > 0:
            b, a = float(lp[0, nb - 1]), float(lp[1, na - 1])
            bq, aq = float(lq[0, nb - 1]), float(lq[1, na - 1])
            out[r, 0] = (b + a) / 2.0
            out[r, 1] = a - b
            out[r, 2] = (b * aq + a * bq) / (aq + bq)
        else:
            out[r, 0] = np.nan
            out[r, 1] = np.nan
            out[r, 2] = np.nan
        bv = 0.0
        for j in range(max(nb - levels, 0), nb):
            bv += lq[0, j]
        av = 0.0
        for j in range(max(na - levels, 0), na):
            av += lq[1, j]
        out[r, 3] = (bv - av) / (bv + av) if bv + av > 0 else np.nan
        while fb < f_ts.size and f_ts[fb] <= t:
            num += float(f_px[fb]) * float(f_qty[fb])
            den += float(f_qty[fb])
            fb += 1
        while fa < fb and f_ts[fa] <= t - window:
            num -= float(f_px[fa]) * float(f_qty[fa])
            den -= float(f_qty[fa])
            fa += 1
        if fa == fb:   # empty window: reset the sums so float error cannot accumulate
            num = 0.0
            den = 0.0
        out[r, 4] = num / den if den > 0 else np.nan
        r += 1
    return out_ts, out_seq, out


def stats_arrays(bids: np.ndarray, asks: np.ndarray, l2: np.ndarray, fills: np.ndarray, *,
                 levels: int = 5, window_ns: int = 1_000_000_000) -> np.ndarray:
    """Return the STATS_DTYPE series for one symbol from arrays.

    ``bids``/``asks``: DEPTH_DTYPE book before the first update (best first); ``l2``: that
    symbol's L2 rows in seq order (one output row per run of equal ts); ``fills``: its fills in
    ts order (those with ts up to ``window_ns`` before the first row are needed for the first
    VWAPs).
    Raises UsageError for levels < 1 or window_ns < 1.
    """
    if levels < 1 or window_ns < 1:
        raise UsageError(f"levels and window_ns must be >= 1; got {levels}, {window_ns}")
    # market orders resting in a call sit at their side's CALL_MARKET_PRICE: they quote no price
    bids = bids[bids["price"] != CALL_MARKET_PRICE[0]]
    asks = asks[asks["price"] != CALL_MARKET_PRICE[1]]
    l2 = l2[~(((l2["side"] == 0) & (l2["price"] == CALL_MARKET_PRICE[0]))
              | ((l2["side"] == 1) & (l2["price"] == CALL_MARKET_PRICE[1])))]
    ts, seq, vals = _series(
        bids["price"].astype(np.int64), bids["qty"].astype(np.int64),
        asks["price"].astype(np.int64), asks["qty"].astype(np.int64),
        l2["seq"].astype(np.int64), l2["ts"].astype(np.int64), l2["side"].astype(np.int64),
        l2["price"].astype(np.int64), l2["qty"].astype(np.int64),
        fills["ts"].astype(np.int64), fills["price"].astype(np.int64),
        fills["qty"].astype(np.int64), int(levels), int(window_ns))
    out = np.zeros(ts.size, STATS_DTYPE)
    out["ts"], out["seq"] = ts, seq
    for j, name in enumerate(("mid", "spread", "microprice", "imbalance", "vwap")):
        out[name] = vals[:, j]
    return out


def stats(source, symbol, *, ts=None, levels: int = 5,
          window_ns: int = 1_000_000_000, progress=None) -> np.ndarray:
    """Return a STATS_DTYPE array: one row per timestamp at which ``symbol``'s book changed,
    after its last message (module docstring).

    ``progress``: None or a callable ``progress(done, total, what)`` told each of the four
    steps (read l2, rebuild the first book, read fills, compute) as it starts.

    ``source``: a data directory or a ``store.Reader`` of one (kept between calls).
    ``ts``: an inclusive ``(lo, hi)`` nanosecond range of rows (None: the whole run).
    Raises UsageError for an unknown symbol, a malformed range, levels < 1 or window_ns < 1;
    StoreError if ``source`` is not a data directory.
    """
    if isinstance(source, Reader):
        return _stats(source, _run(source), symbol, ts, levels, window_ns, progress)
    info = run_info(os.fspath(source))   # why first: its errors name a missing directory
    with Reader(info.data_dir) as reader:
        return _stats(reader, info, symbol, ts, levels, window_ns, progress)


def _stats(reader, info, symbol, ts, levels, window_ns, progress=None) -> np.ndarray:
    tell = progress or (lambda done, total, what: None)
    sid, name = resolve_symbol(info, symbol)
    if ts is None:
        lo_ts, hi_ts = _TS_MIN, (1 << 63) - 1
    else:
        try:
            lo_ts, hi_ts = int(ts[0]), int(ts[1])
        except (TypeError, ValueError, IndexError):
            raise UsageError(f"ts must be an inclusive (lo, hi) pair; got {ts!r}") from None
    if levels < 1 or window_ns < 1:
        raise UsageError(f"levels and window_ns must be >= 1; got {levels}, {window_ns}")
    tell(0, 4, "read l2")
    l2 = read(reader, "l2", symbol=sid, ts=(lo_ts, hi_ts))
    if l2.size == 0:
        tell(4, 4, "done")
        return np.zeros(0, STATS_DTYPE)
    first = int(l2["seq"][0])
    tell(1, 4, "rebuild the first book")
    start = book_at(reader, sid, seq=max(first - 1, info.first_seq), depth=None)
    # why max(..., -2^63): the window reaches back before lo_ts without underflowing int64
    f_lo = max(int(l2["ts"][0]) - int(window_ns), _TS_MIN)
    tell(2, 4, "read fills")
    fills = read(reader, "fills", symbol=sid, seq=(1, SEQ_MAX), ts=(f_lo, hi_ts),
                 columns=["ts", "price", "qty"])
    tell(3, 4, "compute")
    out = stats_arrays(start.bids, start.asks, l2, fills, levels=levels, window_ns=window_ns)
    tell(4, 4, "done")
    return out


def phase_stats(source, symbol) -> dict:
    """Return ``symbol``'s trading day (module docstring) as a JSON-able dict:

    - ``auctions``: {auction name: {"count", "volume", "vwap" (volume-weighted price of the
      executed ones; None if none executed)}} per kind that happened, and ``uncrosses``: every
      auction as an AUCTION_DTYPE array (not JSON-able; in seq order);
    - ``time_in_phase_ns``: {phase name: nanoseconds of message time spent in it};
    - ``halts``, ``interruptions``: PHASE events entering HALTED / with reason PRICE_BAND;
    - ``trades``: {"continuous": {"count", "volume"}, "auction": {"count", "volume"}} of fills.

    ``source``: a data directory or a ``store.Reader`` of one. Raises UsageError for an unknown
    symbol; StoreError if ``source`` is not a data directory.
    """
    if isinstance(source, Reader):
        return _phase_stats(source, _run(source), symbol)
    info = run_info(os.fspath(source))
    with Reader(info.data_dir) as reader:
        return _phase_stats(reader, info, symbol)


def _phase_stats(reader, info, symbol) -> dict:
    sid, _ = resolve_symbol(info, symbol)
    ev = read(reader, "events", symbol=sid,
              columns=["seq", "ts", "event", "reason", "price", "filled_qty", "leaves_qty",
                       "phase"])
    un = ev[ev["event"] == int(Event.UNCROSS)]
    uncrosses = np.zeros(un.size, AUCTION_DTYPE)
    uncrosses["seq"], uncrosses["ts"], uncrosses["auction"] = un["seq"], un["ts"], un["phase"]
    uncrosses["price"], uncrosses["qty"], uncrosses["surplus"] = \
        un["price"], un["filled_qty"], un["leaves_qty"]
    auctions = {}
    for code in np.unique(uncrosses["auction"]):
        mine = uncrosses[uncrosses["auction"] == code]
        vol = int(mine["qty"].sum())
        notional = float((mine["price"].astype(np.float64) * mine["qty"]).sum())
        auctions[Phase(int(code)).name.lower()] = {
            "count": int(mine.size), "volume": vol, "vwap": notional / vol if vol else None}
    ph = ev[ev["event"] == int(Event.PHASE)]
    first = _checkpoint_row(reader, info, info.first_seq)
    start, _ = _checkpoint_phase(info, first, sid)
    last = reader.last_row("orders", None, seq=(0, SEQ_MAX), columns=["ts"])
    end_ts = int(last["ts"]) if last is not None else 0
    first_ts = reader.last_row("orders", None, seq=(info.first_seq + 1, info.first_seq + 1),
                               columns=["ts"])
    # the starting phase runs from the run's first message on
    t0 = int(first_ts["ts"]) if first_ts is not None else end_ts
    times = {}
    phases = [int(start)] + ph["phase"].astype(np.int64).tolist()
    starts = [t0] + ph["ts"].astype(np.int64).tolist()
    ends = starts[1:] + [max(end_ts, starts[-1])]
    for p, a, b in zip(phases, starts, ends):
        name = Phase(p).name.lower()
        times[name] = times.get(name, 0) + max(int(b) - int(a), 0)
    fills = read(reader, "fills", symbol=sid, columns=["qty", "aggressor_side"])
    at_auction = fills["aggressor_side"] == AUCTION_SIDE
    return {
        "auctions": auctions,
        "uncrosses": uncrosses,
        "time_in_phase_ns": times,
        "halts": int((ph["phase"] == int(Phase.HALTED)).sum()),
        "interruptions": int((ph["reason"] == int(Reason.PRICE_BAND)).sum()),
        "trades": {"continuous": {"count": int((~at_auction).sum()),
                                  "volume": int(fills["qty"][~at_auction].sum())},
                   "auction": {"count": int(at_auction.sum()),
                               "volume": int(fills["qty"][at_auction].sum())}},
    }
