"""``BacktestResult``: a backtest's arrays, its time series, its summary and its plot.

Units: prices in ticks, quantities in lots. Cash, PnL, turnover and fees are money in the unit of
the backtest's ``money.Money`` (``meta["money"]["unit"]``): the traded symbol's currency when its
engine config sets one (notional of a fill = price x qty x tick_value), else ticks x lots. A buy
lowers cash by its notional. Fees: each strategy fill pays the maker rate of its notional when
the strategy's order rested, the taker rate when it was the aggressor (``fees_bps`` sets both;
a negative maker rate is a rebate, so fees can be negative).

Series: one row per strategy fill and per wake-up mark, in time order (fills before a mark at
the same ts). The mark price is the mid of the last top of book the strategy saw (or the last
fill price while no two-sided book has been seen); ``pnl = cash + position x mark x tick_value -
fees``.

Summary (``summary`` dict; every value a plain int/float, so it serialises to JSON):
pnl, gross_pnl, fees, turnover (notional traded), volume (lots), maker_volume, taker_volume
(lots filled resting / aggressing),
n_fills, n_orders (NEW messages), submitted_qty, fill_ratio (volume / submitted_qty; above 1 when
MODIFYs top up partly filled orders),
final_position, max_drawdown (largest fall of pnl from a running peak over the series),
mean_time_in_queue_ns (passive fills: fill ts minus the ts the order joined its queue, i.e. its
NEW's or last priority-losing MODIFY's arrival, weighted by fill qty), rejects, n_messages.

Notebook views: ``to_pandas()`` gives the fills, orders (with the send time and engine seq of
each message), events and series as pandas DataFrames (the ``exsim[pandas]`` extra) with enum
names and the symbol's name. Every stored column comes first and unchanged; after them, the
fills gain ``my_side`` (BUY or SELL: the strategy's side; BOTH for a self-trade) and
``liquidity`` ("maker": the strategy's order rested, "taker": it aggressed, "auction": an
uncross made it, "both": a self-trade), and every table gains ``time``, its ``ts`` as a
datetime64[ns]: in the run's time zone (``datetime64[ns, zone]``) for a backtest of a stored
run (``replay.rundir.run_clock``) or of epoch-stamped data (Binance, Databento: UTC), and naive
for a day counted from midnight with no recorded date (1970-01-01 plus the time of day: only
the time of day means anything); ``repr`` is one line and ``_repr_html_`` a small table (the arrays
are never printed); ``report()`` is the quant's report (replay/backtesting/report.py).

Auction fills (an uncross made them: ``aggressor_side == AUCTION_SIDE``) are strategy fills like
any other in the arrays and the summary (the maker rate applies: the strategy did not take
liquidity); ``auction_fills()`` picks them out and ``report()`` shows them apart. ``phases``
holds the traded symbol's PHASE, INDICATIVE and UNCROSS events the strategy was shown.

Invariant: ``digest()`` hashes every array's bytes and the summary (``phases`` only when it is
not empty, so a run without phases digests as before); equal inputs give equal digests.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import AUCTION_SIDE, EVENT_DTYPE, Event, Kind

from exsim.replay.backtesting.money import TICKS_X_LOTS, Money

__all__ = ["BacktestResult", "SERIES_DTYPE", "MONEY_KEYS", "TABLES", "build_result", "summarize",
           "strategy_label"]

# the tables ``BacktestResult.to_pandas`` returns, in order
TABLES = ("fills", "orders", "events", "series")

# the summary values that are money, in the result's unit (``meta["money"]["unit"]``)
MONEY_KEYS = ("pnl", "gross_pnl", "fees", "turnover", "max_drawdown")

SERIES_DTYPE = np.dtype([("ts", "<i8"), ("position", "<i8"), ("cash", "<f8"), ("fees", "<f8"),
                         ("mark", "<f8"), ("pnl", "<f8")])


@dataclass(repr=False)
class BacktestResult:
    """Everything a backtest produced (arrays are the strategy's only; see the module docstring)."""

    orders: np.ndarray      # ORDER_DTYPE: the strategy's messages, ts = arrival at the engine
    sent_ts: np.ndarray     # int64: local time each message was sent
    order_seq: np.ndarray   # int64: engine seq each message got
    fills: np.ndarray       # FILL_DTYPE: fills with the strategy on at least one side
    events: np.ndarray      # EVENT_DTYPE: execution reports of the strategy's orders
    marks: np.ndarray       # MARK_DTYPE: top of book at each wake-up
    series: np.ndarray      # SERIES_DTYPE
    summary: dict
    meta: dict = field(default_factory=dict)
    phases: np.ndarray = field(default_factory=lambda: np.zeros(0, EVENT_DTYPE))   # symbol events
    # several instruments (``backtest(symbol=[...])``): each symbol's own result by name, this
    # one being the account's (see ``account_result``); empty for one symbol
    by_symbol: dict = field(default_factory=dict)

    def digest(self) -> str:
        """Hex blake2b of all arrays and the summary: equal runs give equal digests."""
        h = hashlib.blake2b(digest_size=16)
        for a in (self.orders, self.sent_ts, self.order_seq, self.fills, self.events, self.marks,
                  self.series):
            h.update(np.ascontiguousarray(a).tobytes())
        if len(self.phases):
            h.update(np.ascontiguousarray(self.phases).tobytes())
        h.update(json.dumps(self.summary, sort_keys=True).encode())
        return h.hexdigest()

    def auction_fills(self) -> np.ndarray:
        """Return the strategy's fills that an uncross made (FILL_DTYPE rows, in fill order)."""
        return self.fills[self.fills["aggressor_side"] == AUCTION_SIDE]

    @property
    def unit(self) -> str:
        """Return the unit of the money values (the symbol's currency, or "ticks x lots")."""
        return self.meta.get("money", {}).get("unit", TICKS_X_LOTS)

    def to_pandas(self, table: str | None = None):
        """Return ``{"fills", "orders", "events", "series"}`` as pandas DataFrames, or the one
        DataFrame of ``table``: enum codes as names, ``symbol`` as the traded symbol's name;
        ``orders`` gains ``sent_ts`` and ``seq`` (the engine seq of each message). Raises
        UsageError for an unknown table, or naming the ``exsim[pandas]`` extra when pandas is
        missing."""
        from exsim.exchange.frames import require_pandas, to_frame

        if table is not None and table not in TABLES:
            raise UsageError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
        pd = require_pandas()
        names = {int(self.meta.get("symbol", 0)): str(self.meta.get("symbol_name", ""))}
        names = {k: v for k, v in names.items() if v}
        clock = self._clock()

        def timed(frame, ts):
            frame["time"] = _times(pd, ts, clock)
            return frame

        trader = int(self.meta.get("trader", 0))
        frames = {
            "fills": lambda: timed(to_frame(self.fills, names, fill_terms(self.fills, trader)),
                                   self.fills["ts"]),
            "orders": lambda: timed(to_frame(self.orders, names, {"sent_ts": self.sent_ts,
                                                                  "seq": self.order_seq}),
                                    self.orders["ts"]),
            "events": lambda: timed(to_frame(self.events, names), self.events["ts"]),
            "series": lambda: timed(to_frame(self.series), self.series["ts"]),
        }
        if table is not None:
            return frames[table]()
        return {name: make() for name, make in frames.items()}

    def _clock(self):
        """The ``RunClock`` of the backtested run: a stored run's own (its date and zone), else
        UTC, epoch-stamped when the first ts is past the first day (see the module docstring)."""
        import os

        from exsim.replay.timefmt import DAY_NS, RunClock

        from exsim.exchange.errors import StoreError
        from exsim.store.catalog import CATALOG_NAME

        source = self.meta.get("source")
        # why the catalog test: a Binance or LOBSTER directory is a source but no stored run
        if isinstance(source, str) and os.path.isfile(os.path.join(source, CATALOG_NAME)):
            try:
                from exsim.replay.rundir import run_clock
                return run_clock(source)
            except (UsageError, StoreError, OSError, ValueError, KeyError):
                pass   # a run moved or damaged since: its times read as below, never a crash
        stamps = [a["ts"] for a in (self.fills, self.orders, self.series) if len(a)]
        first = min(int(a[0]) for a in stamps) if stamps else 0
        return RunClock(tz="UTC", epoch=first >= DAY_NS)

    def report(self, bar_ns: int = 60 * 10**9, capital: float | None = None):
        """Return the ``BacktestReport`` (trade list, PnL per bar, Sharpe, drawdown, fees,
        turnover in ``unit``; see replay/backtesting/report.py) with bars ``bar_ns`` wide and
        returns in money, or as fractions of ``capital``. Raises UsageError for a bad
        ``bar_ns`` or ``capital``."""
        from exsim.replay.backtesting.report import build_report
        return build_report(self, bar_ns, capital)

    def __repr__(self) -> str:
        s = self.summary
        name = self.meta.get("symbol_name") or self.meta.get("symbol", "?")
        return (f"<BacktestResult {self.meta.get('strategy', '?')} on {name}: "
                f"pnl {_short(s.get('pnl'))} {self.unit}, {s.get('n_fills', 0):,} fills, "
                f"{s.get('n_orders', 0):,} orders, position {s.get('final_position', 0):,}>")

    def _repr_html_(self) -> str:
        import html
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(_short(v))}</td></tr>"
                       for k, v in self.summary.items())
        head = html.escape(repr(self)[1:-1])
        return (f"<div><b>{head}</b><table><tr><th>measure</th><th>value ({html.escape(self.unit)} "
                f"for money)</th></tr>{rows}</table></div>")

    def plot(self, path, title: str | None = None) -> str:
        """Write a PNG: price with the strategy's buys/sells, position, PnL. Returns ``path``.

        Raises UsageError if ``path`` does not end in .png.
        """
        from exsim.replay.backtesting.plot import plot_result
        return plot_result(self, path, title)


def strategy_label(strategy) -> str:
    """Return how results name ``strategy``: ``module:QualName`` of its class, or for a
    ``QuoteStrategy`` of its quote function (an ``@njit`` function's Python name)."""
    from exsim.replay.backtesting.strategy import QuoteStrategy

    if isinstance(strategy, QuoteStrategy):
        fn = getattr(strategy.fn, "py_func", strategy.fn)
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
        if name:
            return f"{getattr(fn, '__module__', None) or '?'}:{name}"
    return f"{type(strategy).__module__}:{type(strategy).__qualname__}"


def fill_terms(fills: np.ndarray, trader: int) -> dict:
    """Return ``{"my_side", "liquidity"}`` of each fill, from ``trader``'s point of view (see
    the module docstring): arrays of str, as long as ``fills``."""
    buy, sell = _signed(fills, trader)
    buy_taker, sell_taker = _taker(fills, buy, sell)
    both = (buy == 1) & (sell == 1)
    side = np.where(both, "BOTH", np.where(buy == 1, "BUY", "SELL")).astype(object)
    taker = buy_taker | sell_taker
    liq = np.where(both, "both", np.where(
        fills["aggressor_side"] == AUCTION_SIDE, "auction",
        np.where(taker, "taker", "maker"))).astype(object)
    return {"my_side": side, "liquidity": liq}


def _times(pd, ts: np.ndarray, clock):
    """``ts`` (int64 ns of the run) as datetime64[ns]: zoned when ``clock`` knows the date or
    the ts are epoch ns, else naive from 1970-01-01 (module docstring)."""
    when = (np.asarray(ts, np.int64) + clock.origin()).astype("datetime64[ns]")
    zoned = clock.epoch or clock.date is not None
    if not zoned or not hasattr(pd, "DatetimeIndex"):   # why hasattr: the tests' stand-in pandas
        return when
    return pd.DatetimeIndex(when).tz_localize("UTC").tz_convert(clock.tz)


def _short(v) -> str:
    """A summary value for a one-line repr: ints with separators, floats to 10 significant
    digits, NaN as "nan"."""
    if isinstance(v, float):
        return f"{v:,.10g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _signed(fills: np.ndarray, trader: int):
    buy = (fills["buy_trader"] == trader).astype(np.int64)
    sell = (fills["sell_trader"] == trader).astype(np.int64)
    return buy, sell


def _taker(fills: np.ndarray, buy: np.ndarray, sell: np.ndarray):
    """Per fill, whether the strategy's buy side / sell side was the aggressor (bool arrays)."""
    return ((buy == 1) & (fills["aggressor_side"] == 0),
            (sell == 1) & (fills["aggressor_side"] == 1))


def _side_fees(notional: np.ndarray, on: np.ndarray, taker: np.ndarray, money: Money):
    """Fee of one side of each fill: its rate (taker or maker) of ``notional`` where ``on``."""
    rate = np.where(taker, money.taker_rate, money.maker_rate)
    return on * notional * rate


def build_series(fills, marks, trader: int, money: Money) -> np.ndarray:
    """Return the SERIES_DTYPE time series from the strategy's fills and wake-up marks, money in
    ``money``'s unit."""
    buy, sell = _signed(fills, trader)
    buy_taker, sell_taker = _taker(fills, buy, sell)
    qty = fills["qty"].astype(np.int64)
    notional = fills["price"].astype(np.float64) * qty.astype(np.float64) * money.tick_value
    nf, nm = len(fills), len(marks)
    ts = np.concatenate([fills["ts"], marks["ts"]]).astype(np.int64)
    order = np.argsort(ts, kind="stable")   # stable: fills first at equal ts
    dpos = np.concatenate([(buy - sell) * qty, np.zeros(nm, np.int64)])[order]
    dcash = np.concatenate([(sell - buy) * notional, np.zeros(nm)])[order]
    fee = (_side_fees(notional, buy, buy_taker, money)
           + _side_fees(notional, sell, sell_taker, money))
    dfee = np.concatenate([fee, np.zeros(nm)])[order]
    both = (marks["bid"] > 0) & (marks["ask"] > 0)
    mid = np.where(both, (marks["bid"] + marks["ask"]) / 2.0, np.nan)
    mark_mid = np.concatenate([np.full(nf, np.nan), mid])[order]
    fill_px = np.concatenate([fills["price"].astype(np.float64), np.full(nm, np.nan)])[order]
    out = np.zeros(nf + nm, SERIES_DTYPE)
    out["ts"] = ts[order]
    out["position"] = np.cumsum(dpos)
    out["cash"] = np.cumsum(dcash)
    out["fees"] = np.cumsum(dfee)
    out["mark"] = _ffill(mark_mid, _ffill(fill_px, np.full(nf + nm, np.nan)))
    out["pnl"] = (out["cash"] + out["position"] * np.nan_to_num(out["mark"]) * money.tick_value
                  - out["fees"])
    return out


def _ffill(x: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Forward-fill NaNs of x; where x has no value yet, use fallback (itself forward-filled)."""
    idx = np.where(np.isnan(x), 0, np.arange(len(x)))
    np.maximum.accumulate(idx, out=idx)
    y = x[idx] if len(x) else x
    return np.where(np.isnan(y), fallback, y)


def _time_in_queue(orders, order_seq, fills, trader) -> float:
    """Qty-weighted mean of (fill ts - queue entry ts) over passive strategy fills; NaN if none."""
    # order id -> seqs and arrival ts of the messages that put it at the back of its queue, in
    # seq order (the log is in arrival order, which is seq order)
    joined: dict[int, tuple[list[int], list[int]]] = {}
    last_qty: dict[int, tuple[int, int]] = {}
    for (ts, oid, price, qty, kind), s in zip(
            zip(*(orders[k].tolist() for k in ("ts", "order_id", "price", "qty", "kind"))),
            order_seq.tolist()):
        if kind == Kind.NEW:
            seqs, tss = joined.setdefault(oid, ([], []))
            seqs.append(s)
            tss.append(ts)
            last_qty[oid] = (price, qty)
        elif kind == Kind.MODIFY and oid in last_qty:
            px, q = last_qty[oid]
            if price != px or qty > q:   # loses priority: back of the queue
                joined[oid][0].append(s)
                joined[oid][1].append(ts)
            last_qty[oid] = (price, qty)
    total = weight = 0.0
    cols = ("seq", "ts", "qty", "buy_trader", "sell_trader", "aggressor_side", "buy_order_id",
            "sell_order_id")
    for seq, ts, qty, bt, st, aggr, bid, sid in zip(*(fills[k].tolist() for k in cols)):
        passive_id = None
        if bt == trader and aggr != 0:
            passive_id = bid
        elif st == trader and aggr != 1:
            passive_id = sid
        entry = joined.get(passive_id)
        if not entry:
            continue
        k = bisect_left(entry[0], seq) - 1      # the last entry before the fill (else the first)
        entry_ts = entry[1][max(k, 0)]
        total += float(qty) * float(ts - entry_ts)
        weight += float(qty)
    return total / weight if weight else float("nan")


def _fee_total(notional, buy, sell, buy_taker, sell_taker, money: Money) -> float:
    """Total fees: the maker rate of the resting notional plus the taker rate of the aggressing
    notional (one product when both rates are equal)."""
    sides = buy + sell
    if money.maker_rate == money.taker_rate:
        return float((sides * notional).sum() * money.taker_rate)
    taker = buy_taker.astype(np.int64) + sell_taker.astype(np.int64)
    return float(((sides - taker) * notional).sum() * money.maker_rate
                 + (taker * notional).sum() * money.taker_rate)


def summarize(orders, order_seq, fills, events, series, trader: int, money: Money) -> dict:
    """Return the summary dict described in the module docstring (money in ``money``'s unit)."""
    buy, sell = _signed(fills, trader)
    buy_taker, sell_taker = _taker(fills, buy, sell)
    sides = buy + sell
    qty = fills["qty"].astype(np.int64)
    notional = fills["price"].astype(np.float64) * qty * money.tick_value
    taker = buy_taker | sell_taker
    volume = int((sides * qty).sum())
    new = orders["kind"] == Kind.NEW
    submitted = int(orders["qty"][new].sum())
    pnl = series["pnl"] if len(series) else np.zeros(1)
    drawdown = float(np.max(np.maximum.accumulate(pnl) - pnl)) if len(pnl) else 0.0
    last = series[-1] if len(series) else None
    return {
        "pnl": float(last["pnl"]) if last is not None else 0.0,
        "gross_pnl": float(last["pnl"] + last["fees"]) if last is not None else 0.0,
        "fees": _fee_total(notional, buy, sell, buy_taker, sell_taker, money),
        "turnover": float((sides * notional).sum()),
        "volume": volume,
        "maker_volume": volume - int((taker * qty).sum()),
        "taker_volume": int((taker * qty).sum()),
        "n_fills": int(len(fills)),
        "n_orders": int(new.sum()),
        "submitted_qty": submitted,
        "fill_ratio": volume / submitted if submitted else 0.0,
        "final_position": int(last["position"]) if last is not None else 0,
        "max_drawdown": drawdown,
        "mean_time_in_queue_ns": _time_in_queue(orders, order_seq, fills, trader),
        "rejects": int((events["event"] == Event.REJECTED).sum()),
        "n_messages": int(len(orders)),
    }


def build_result(orders, sent_ts, order_seq, fills, events, marks, trader, money: Money, meta):
    """Assemble a BacktestResult (series and summary computed here, money in ``money``'s unit;
    ``meta`` gains ``money.describe()`` under "money"). ``events`` may hold the symbol's PHASE,
    INDICATIVE and UNCROSS events (order id 0) among the strategy's reports: they go to
    ``phases``."""
    symbol_events = events["order_id"] == 0
    phases, events = events[symbol_events], events[~symbol_events]
    series = build_series(fills, marks, trader, money)
    summary = summarize(orders, order_seq, fills, events, series, trader, money)
    meta = {**meta, "money": money.describe()}
    return BacktestResult(orders, sent_ts, order_seq, fills, events, marks, series, summary, meta,
                          phases)


def _sum_series(parts: list[np.ndarray]) -> np.ndarray:
    """The account's SERIES_DTYPE series from each symbol's: at every time any of them has a
    row, cash, fees and pnl are the sums of each symbol's latest values (0 before its first);
    position and mark are the first symbol's."""
    ts = np.sort(np.concatenate([p["ts"] for p in parts]), kind="stable")
    out = np.zeros(len(ts), SERIES_DTYPE)
    out["ts"] = ts
    out["mark"] = np.nan
    for k, p in enumerate(parts):
        idx = np.searchsorted(p["ts"], ts, side="right") - 1
        seen = idx >= 0
        at = np.maximum(idx, 0)
        for col in ("cash", "fees", "pnl"):
            out[col] += np.where(seen, p[col][at] if len(p) else 0.0, 0.0)
        if k == 0:
            out["position"] = np.where(seen, p["position"][at] if len(p) else 0, 0)
            out["mark"] = np.where(seen, p["mark"][at] if len(p) else np.nan, np.nan)
    return out


def account_result(orders, sent_ts, order_seq, fills, events, marks, trader, meta,
                   symbols) -> BacktestResult:
    """Assemble the result of a backtest that traded several symbols from one account.

    ``symbols``: per traded symbol, in order, (id, name, ``Money``, its wake-up marks); the
    first one's marks are ``marks``. Each symbol gets its own ``build_result`` (its orders,
    fills, events and marks, money in its terms) in ``by_symbol``; the account's series sums
    their cash, fees and pnl, so its pnl is the sum of theirs. The account summary counts over
    all symbols; fees and turnover are the sums of each symbol's (each in its own terms);
    ``final_position`` is the first symbol's (as ``ctx.position``) and ``positions`` has each
    one's by name. All symbols share one money unit (the caller checks)."""
    by = {}
    for sid, name, money, sym_marks in symbols:
        o, f, e = orders["symbol"] == sid, fills["symbol"] == sid, events["symbol"] == sid
        by[name] = build_result(orders[o], sent_ts[o], order_seq[o], fills[f], events[e],
                                sym_marks, trader, money,
                                {**meta, "symbol": int(sid), "symbol_name": name})
    first = symbols[0][2]
    res = build_result(orders, sent_ts, order_seq, fills, events, marks, trader, first, meta)
    series = _sum_series([r.series for r in by.values()])
    summary = summarize(orders, order_seq, fills, res.events, series, trader, first)
    for key in ("fees", "turnover"):
        summary[key] = float(sum(r.summary[key] for r in by.values()))
    summary["final_position"] = next(iter(by.values())).summary["final_position"]
    summary["positions"] = {n: r.summary["final_position"] for n, r in by.items()}
    return BacktestResult(res.orders, res.sent_ts, res.order_seq, res.fills, res.events,
                          res.marks, series, summary, res.meta, res.phases, by)
