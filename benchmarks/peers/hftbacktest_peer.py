"""PyPI ``hftbacktest`` (Rust core, numba-callable): its backtester replays depth events into a
market-depth object. L2 rows become DEPTH_EVENT rows (exchange and local, BUY/SELL flag, price and
quantity as float64 ticks and lots, timestamps 1 ns apart); the timed part builds the asset and a
``HashMapMarketDepthBacktest`` (which copies the events in) and ``elapse``s to the end of the data.
Checked on the final top of book (``depth(0).best_bid_tick`` ...)."""

from __future__ import annotations

import time

import numpy as np

from exsim.exchange.schema import Side

from . import Outcome, Peer, Workload, top_tuple


class HftbacktestL2(Peer):
    name = "hftbacktest"
    kind = "l2"
    package = "hftbacktest"

    def unavailable(self):
        try:
            import hftbacktest  # noqa: F401
        except Exception as e:  # ImportError, or numba/numpy version clashes
            return f"not importable ({type(e).__name__}: {e})"
        return None

    def cannot(self, wl: Workload):
        if wl.kind != "l2":
            return "l2 only"
        (rows,) = wl.segments
        if len(rows) and max(int(rows["price"].max()), int(rows["qty"].max())) >= 2**53:
            return "prices/quantities beyond float64's exact integers"
        return None

    def prepare(self, wl: Workload):
        from hftbacktest import BUY_EVENT, DEPTH_EVENT, EXCH_EVENT, LOCAL_EVENT, SELL_EVENT, event_dtype

        (rows,) = wl.segments
        ev = np.zeros(len(rows), event_dtype)
        ev["ev"] = DEPTH_EVENT | EXCH_EVENT | LOCAL_EVENT
        ev["ev"] |= np.where(rows["side"] == Side.BUY, BUY_EVENT, SELL_EVENT).astype(np.uint64)
        ev["exch_ts"] = ev["local_ts"] = np.arange(1, len(rows) + 1)
        ev["px"] = rows["price"]
        ev["qty"] = rows["qty"]
        return ev

    def run(self, prepared) -> Outcome:
        from hftbacktest import BacktestAsset, HashMapMarketDepthBacktest

        t0 = time.perf_counter()
        asset = (BacktestAsset().data([prepared]).linear_asset(1.0).constant_order_latency(0, 0)
                 .power_prob_queue_model(2.0).no_partial_fill_exchange()
                 .trading_value_fee_model(0.0, 0.0).tick_size(1.0).lot_size(1.0))
        hbt = HashMapMarketDepthBacktest([asset])
        hbt.elapse(len(prepared) + 10)
        dt = time.perf_counter() - t0
        d = hbt.depth(0)
        bid, ask = d.best_bid_tick, d.best_ask_tick
        bid_ok = d.best_bid_qty > 0 and bid != np.iinfo(np.int64).min
        ask_ok = d.best_ask_qty > 0 and ask != np.iinfo(np.int64).max
        top = top_tuple(bid if bid_ok else None, round(d.best_bid_qty),
                        ask if ask_ok else None, round(d.best_ask_qty))
        hbt.close()
        return Outcome(dt, top=top)
