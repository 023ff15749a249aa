"""PNG plot of a backtest: price (mid at wake-ups) with the strategy's buys and sells (fills an
uncross made drawn apart, as gold diamonds labelled "auction"), its position and its PnL (in the result's unit: the symbol's currency, or ticks x lots), on one
shared time axis in time of day (UTC; replay.timefmt.time_of_day_axis).

Uses matplotlib's Agg backend (no display needed); imported only when a plot is asked for.
"""

from __future__ import annotations

import os

import numpy as np

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import AUCTION_SIDE

__all__ = ["plot_result"]


def plot_result(result, path, title: str | None = None) -> str:
    """Write ``result``'s plot to ``path`` (.png); return the path.

    Raises UsageError if ``path`` does not end in .png or matplotlib fails to write it (one line
    naming ``path``), OSError if the file cannot be created.
    """
    path = os.fspath(path)
    if not path.lower().endswith(".png"):
        raise UsageError(f"plot path must end in .png; got {path!r}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m, f, s = result.marks, result.fills, result.series
    from exsim.replay.timefmt import DAY_NS, day_start, time_of_day_axis

    starts = [int(a["ts"][0]) for a in (m, s) if len(a)]
    ends = [int(a["ts"][-1]) for a in (m, s) if len(a)]
    # why from the first day's midnight: the axis then reads as times of day (time_of_day_axis)
    t0 = day_start(min(starts)) if starts else 0
    sec = lambda ts: (np.asarray(ts, np.float64) - t0) / 1e9   # noqa: E731 - local unit helper
    # why scaled: a result whose money knows its tick and lot (L2 Binance) draws prices in the
    # quote currency and positions in base units, as its report prints them
    money = result.meta.get("money") or {}
    px_k = float(money["price_step"]) if money.get("price_step") else 1.0
    qty_k = float(money["qty_step"]) if money.get("qty_step") else 1.0
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1, 1.5]})
    both = (m["bid"] > 0) & (m["ask"] > 0)
    axes[0].plot(sec(m["ts"][both]), (m["bid"][both] + m["ask"][both]) / 2 * px_k, lw=0.7,
                 color="0.4", label="mid")
    trader = result.meta.get("trader")
    auction = f["aggressor_side"] == AUCTION_SIDE
    for side, col, mk, lab in ((f["buy_trader"] == trader, "tab:green", "^", "buy"),
                               (f["sell_trader"] == trader, "tab:red", "v", "sell")):
        side = side & ~auction
        axes[0].scatter(sec(f["ts"][side]), f["price"][side] * px_k, s=10, c=col, marker=mk,
                        label=lab)
    if auction.any():
        axes[0].scatter(sec(f["ts"][auction]), f["price"][auction] * px_k, s=40, c="gold",
                        edgecolors="black", marker="D", label="auction", zorder=3)
    axes[0].set_ylabel(f"price ({money.get('currency') or 'quote'})" if money.get("price_step")
                       else "price (ticks)")
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].step(sec(s["ts"]), s["position"] * qty_k, where="post", color="tab:blue")
    axes[1].set_ylabel("position")
    axes[2].plot(sec(s["ts"]), s["pnl"], color="tab:purple")
    unit = result.unit
    axes[2].set_ylabel(f"PnL ({unit})")
    time_of_day_axis(axes[2], t0, (max(ends) - min(starts)) if starts else 0, epoch=t0 >= DAY_NS)
    summ = result.summary
    axes[0].set_title(title or f"{result.meta.get('strategy', '')}  pnl={summ['pnl']:.0f} {unit}  "
                               f"volume={summ['volume']}  fills={summ['n_fills']}", fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError:
        raise
    except Exception as e:   # why broad: matplotlib raises ValueError, RuntimeError, ... per format
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"plot {path!r}: cannot write the plot: {first}") from None
    finally:
        plt.close(fig)
    return path
