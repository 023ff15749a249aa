"""A quant's report of one backtest: the trade list, PnL per bar (returns), Sharpe, drawdown,
fees and turnover, all money in the result's unit (``BacktestResult.unit``).

Definitions (``build_report(result, bar_ns, capital)``):
- Trades: one row per strategy fill (TRADE_DTYPE), in fill order: the strategy's side, price
  (ticks), qty (lots), notional and fee (money; the fee at the maker rate when the strategy's
  order rested, the taker rate when it aggressed, as ``result`` charges them), liquidity
  ("maker"/"taker") and the position after the fill. A fill with the strategy on both sides
  (a self-trade) is two rows, buy first.
- Bars: ``bar_ns`` wide, aligned to multiples of ``bar_ns``, from the bar holding the first
  series row through the bar holding the last; a bar's PnL is the series' last ``pnl`` at or
  before its end (0 before the first row). Returns are the changes of that PnL from bar to bar
  (the first bar's change from 0), in money, or as fractions of ``capital`` when it is given.
- Sharpe: mean / standard deviation (ddof 1) of the bar returns, per bar, and annualised by
  sqrt(bars per year) with a year of 252 days of 6.5 trading hours; None with fewer than two
  bars or no variation (a constant PnL has no Sharpe ratio). An annualised Sharpe needs at
  least ``MIN_SHARPE_BARS`` (30) returns over at least one trading day (6.5 h, the year's
  unit) of series: from a shorter run it is noise scaled up by sqrt(bars per year) (a 10 s run
  gave -2081.75), so ``sharpe_note`` then says why (None otherwise) and ``text`` prints the
  number followed by "(not meaningful: <why>)". The value itself is kept, for JSON readers.
- pnl, fees, turnover and max_drawdown equal the result's summary values (the same series).
- Auction fills (made by an uncross; ``auction`` True in the trade list, liquidity "auction"):
  ``auction_fills`` (rows of the trade list), ``auction_volume`` (lots) and ``auction_pnl``,
  their PnL contribution: for each, its signed quantity times (the last mark of the series -
  its price) x tick_value, minus its fee (the maker rate), summed.

Invariant: the report reads only the result's arrays and meta; it never changes the result (its
``summary`` keys and digest stay as they are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import AUCTION_SIDE, Side

from exsim.replay.backtesting.money import Money

__all__ = ["BacktestReport", "TRADE_DTYPE", "build_report", "money_of", "YEAR_NS", "auction_summary",
           "MIN_SHARPE_BARS", "MIN_SHARPE_SPAN_NS"]

TRADE_DTYPE = np.dtype([("ts", "<i8"), ("seq", "<i8"), ("trade_id", "<i8"), ("side", "u1"),
                        ("price", "<i8"), ("qty", "<i8"), ("notional", "<f8"), ("fee", "<f8"),
                        ("taker", "?"), ("position", "<i8"), ("auction", "?")])

# the stats that are money, labelled with the unit in ``text``
MONEY_STATS = ("pnl", "gross_pnl", "fees", "turnover", "max_drawdown", "auction_pnl")

# the stats that are quantities in lots, printed as decimals when the lot is known
QTY_STATS = ("volume", "final_position", "auction_volume")

# a trading year for annualising: 252 days of 6.5 hours (a US equity session), in ns
YEAR_NS = 252 * 23_400 * 10**9

# below these an annualised Sharpe is flagged (module docstring): returns, and ns of series
MIN_SHARPE_BARS = 30
MIN_SHARPE_SPAN_NS = YEAR_NS // 252


@dataclass
class BacktestReport:
    """The report of one backtest (see the module docstring); money in ``unit``."""

    trades: np.ndarray          # TRADE_DTYPE
    bar_ts: np.ndarray          # int64: end of each bar (exclusive), ns
    bar_pnl: np.ndarray         # float64: PnL at the end of each bar
    returns: np.ndarray         # float64: PnL change per bar (money, or fraction of capital)
    stats: dict = field(default_factory=dict)
    unit: str = ""
    money: Money = field(default_factory=Money)   # price_text / qty_text: how to print them

    def text(self, max_trades: int = 20) -> str:
        """Return the report as plain text: the statistics, then the first ``max_trades``
        trades (all of them when ``max_trades`` is None)."""
        labels = {k: f"{k} ({self.unit})" if k in MONEY_STATS else k for k in self.stats}
        width = max(map(len, labels.values())) if labels else 0
        m = self.money
        lines = [f"{labels[k]:<{width}}  "
                 f"{m.qty_text(v) if m.qty_step and k in QTY_STATS else _text(v)}"
                 + (f" (not meaningful: {self.stats['sharpe_note']})"
                    if k == "sharpe_annualised" and self.stats.get("sharpe_note") else "")
                 for k, v in self.stats.items() if k != "sharpe_note"]
        shown = self.trades if max_trades is None else self.trades[:max_trades]
        rows = [(str(int(t["ts"])), Side(int(t["side"])).name,
                 m.price_text(int(t["price"])) if m.price_step else str(int(t["price"])),
                 m.qty_text(int(t["qty"])), _text(float(t["notional"])), _text(float(t["fee"])),
                 _liquidity(t), m.qty_text(int(t["position"]))) for t in shown]
        units = (f"price in {m.currency or 'quote units'}" if m.price_step else "price in ticks",
                 "qty in base units" if m.qty_step else "qty in lots")
        head = ("ts", "side", "price", "qty", "notional", "fee", "liquidity", "position")
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
        lines += ["", f"trades ({len(self.trades):,}; {units[0]}, {units[1]}, notional and "
                      f"fee in {self.unit})"]
        for r in [head] + rows:
            lines.append("  ".join(c.ljust(w) if i in (1, 6) else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if len(shown) < len(self.trades):
            lines.append(f"... {len(self.trades) - len(shown):,} more")
        return "\n".join(lines)

    def to_json(self) -> dict:
        """Return the report as a JSON-able dict: stats, unit, bars and trades (lists)."""
        trades = [{"ts": int(t["ts"]), "seq": int(t["seq"]), "trade_id": int(t["trade_id"]),
                   "side": Side(int(t["side"])).name, "price": int(t["price"]),
                   "qty": int(t["qty"]), "notional": float(t["notional"]), "fee": float(t["fee"]),
                   "liquidity": _liquidity(t),
                   "position": int(t["position"])} for t in self.trades]
        return {"unit": self.unit, "stats": dict(self.stats),
                "bars": {"ts": self.bar_ts.tolist(), "pnl": self.bar_pnl.tolist(),
                         "returns": self.returns.tolist()},
                "trades": trades}


def _liquidity(t) -> str:
    """A trade's liquidity label: "auction" (an uncross made it), "taker" or "maker"."""
    return "auction" if t["auction"] else "taker" if t["taker"] else "maker"


def _text(v) -> str:
    """A value as the report prints it: every digit of a float (to 1e-10), ints with commas."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return repr(round(v, 10))
    return f"{v:,}" if isinstance(v, int) else str(v)


def money_of(result) -> Money:
    """Return the ``Money`` a result was valued in, rebuilt from ``result.meta["money"]``
    (ticks x lots and no fees when the meta has none)."""
    m = result.meta.get("money") or {}
    return Money(str(m.get("currency") or ""), float(m.get("tick_value", 1.0)),
                 float(m.get("maker_bps", 0.0)) / 1e4, float(m.get("taker_bps", 0.0)) / 1e4,
                 str(m.get("fees_from", "symbol")), str(m.get("price_step", "")),
                 str(m.get("qty_step", "")))


def trade_list(fills: np.ndarray, trader: int, money: Money) -> np.ndarray:
    """Return the TRADE_DTYPE rows of the strategy's fills (see the module docstring)."""
    buy = fills["buy_trader"] == trader
    sell = fills["sell_trader"] == trader
    # row per (fill, side the strategy was on): a self-trade fill gives a buy and a sell row
    idx = np.concatenate([np.flatnonzero(buy), np.flatnonzero(sell)])
    side = np.concatenate([np.zeros(int(buy.sum()), np.uint8), np.ones(int(sell.sum()), np.uint8)])
    order = np.lexsort((side, idx))
    idx, side = idx[order], side[order]
    f = fills[idx]
    out = np.zeros(len(idx), TRADE_DTYPE)
    for k in ("ts", "seq", "trade_id", "price", "qty"):
        out[k] = f[k]
    out["side"] = side
    out["notional"] = f["price"].astype(np.float64) * f["qty"].astype(np.float64) * money.tick_value
    out["taker"] = f["aggressor_side"] == side
    out["auction"] = f["aggressor_side"] == AUCTION_SIDE
    out["fee"] = out["notional"] * np.where(out["taker"], money.taker_rate, money.maker_rate)
    signed = np.where(side == 0, 1, -1) * f["qty"].astype(np.int64)
    out["position"] = np.cumsum(signed)
    return out


def _bars(series: np.ndarray, bar_ns: int):
    """(bar ends, PnL at each bar end) over the series (see the module docstring)."""
    if not len(series):
        return np.zeros(0, np.int64), np.zeros(0)
    first = int(series["ts"][0]) // bar_ns
    last = int(series["ts"][-1]) // bar_ns
    ends = (np.arange(first, last + 1, dtype=np.int64) + 1) * bar_ns
    k = np.searchsorted(series["ts"], ends, side="left") - 1   # last row before each end
    pnl = np.where(k >= 0, series["pnl"][np.maximum(k, 0)], 0.0)
    return ends, pnl


def _sharpe(returns: np.ndarray, bar_ns: int):
    """(per bar, annualised) Sharpe ratio of ``returns``, or (None, None)."""
    if returns.size < 2:
        return None, None
    sd = float(np.std(returns, ddof=1))
    if not sd > 0 or not math.isfinite(sd):
        return None, None
    per_bar = float(np.mean(returns)) / sd
    return per_bar, per_bar * math.sqrt(YEAR_NS / bar_ns)


def _sharpe_note(n_returns: int, series: np.ndarray, annual) -> str | None:
    """Why an annualised Sharpe from this run means nothing, or None (module docstring)."""
    if annual is None:
        return None
    span = int(series["ts"][-1] - series["ts"][0]) if len(series) else 0
    why = []
    if n_returns < MIN_SHARPE_BARS:
        why.append(f"{n_returns} bar returns, fewer than {MIN_SHARPE_BARS}")
    if span < MIN_SHARPE_SPAN_NS:
        why.append(f"{span / 1e9:,.6g} s of data, less than one 6.5 h trading day")
    return "; ".join(why) or None


def _auction_stats(trades: np.ndarray, series: np.ndarray, money: Money) -> dict:
    """auction_fills, auction_volume and auction_pnl of the trade list (module docstring)."""
    a = trades[trades["auction"]]
    mark = float(series["mark"][-1]) if len(series) else float("nan")
    signed = np.where(a["side"] == 0, 1.0, -1.0) * a["qty"].astype(np.float64)
    pnl = float((signed * (np.nan_to_num(mark) - a["price"].astype(np.float64))).sum()
                * money.tick_value - a["fee"].sum()) if len(a) else 0.0
    return {"auction_fills": int(len(a)), "auction_volume": int(a["qty"].sum()),
            "auction_pnl": pnl}


def auction_summary(result) -> dict:
    """Return {"auction_fills", "auction_volume", "auction_pnl"} of ``result`` (see the module
    docstring; money in ``result.unit``)."""
    money = money_of(result)
    return _auction_stats(trade_list(result.fills, int(result.meta.get("trader", 0)), money),
                          result.series, money)


def build_report(result, bar_ns: int = 60 * 10**9, capital: float | None = None) -> BacktestReport:
    """Return the BacktestReport of ``result`` with bars ``bar_ns`` wide and returns in money,
    or as fractions of ``capital``. Raises UsageError if ``bar_ns`` is not a positive int or
    ``capital`` is not a positive finite number."""
    if isinstance(bar_ns, bool) or not isinstance(bar_ns, (int, np.integer)) or bar_ns <= 0:
        raise UsageError(f"bar_ns must be a positive integer (ns); got {bar_ns!r}")
    bar_ns = int(bar_ns)
    if capital is not None and (isinstance(capital, bool) or not isinstance(capital, (int, float))
                                or not math.isfinite(capital) or capital <= 0):
        raise UsageError(f"capital must be a positive number; got {capital!r}")
    money = money_of(result)
    trader = int(result.meta.get("trader", 0))
    trades = trade_list(result.fills, trader, money)
    ends, pnl = _bars(result.series, bar_ns)
    returns = np.diff(pnl, prepend=0.0)
    if capital is not None:
        returns = returns / float(capital)
    per_bar, annual = _sharpe(returns, bar_ns)
    s = result.summary
    stats = {
        "pnl": s["pnl"], "gross_pnl": s["gross_pnl"], "fees": s["fees"],
        "turnover": s["turnover"], "max_drawdown": s["max_drawdown"],
        "n_trades": int(len(trades)), "volume": s["volume"],
        "maker_share": (float(trades["qty"][~trades["taker"]].sum() / trades["qty"].sum())
                        if len(trades) else None),
        "final_position": s["final_position"],
        **_auction_stats(trades, result.series, money),
        "bar_ns": bar_ns, "n_bars": int(len(ends)),
        "returns_in": "fraction of capital" if capital is not None else result.unit,
        "mean_return": float(np.mean(returns)) if returns.size else None,
        "sd_return": float(np.std(returns, ddof=1)) if returns.size > 1 else None,
        "sharpe_per_bar": per_bar, "sharpe_annualised": annual,
        "sharpe_note": _sharpe_note(int(returns.size), result.series, annual),
    }
    return BacktestReport(trades, ends, pnl, returns, stats, result.unit, money)
