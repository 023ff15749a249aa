"""Backtest throughput: market events/s of the njit and Python strategy paths against the engine
alone, and exsim's L2 backtest against hftbacktest on the Binance sample.

L3 workload: scenarios.uniform_flow(n, seed 7), 1 symbol; the example market maker quoting 5 lots
(``mm_quotes``) waking every 100 market messages, zero latency. Measured: the engine alone on the
same flow (``Engine.process`` in one batch, as a user would call it, and in 65,536-message
batches into one ``OutputBuffers`` (``out=``), the engine's best rate), the njit path
(``QuoteStrategy``, fast=True), the Python path (the same quote function through the Python
API, fast=False), the same strategy with an ``on_fill`` (the driver then stops after every
message that fills it instead of running from one wake-up to the next), and the example
``InventoryMarketMaker`` (the same rule written against the Python API).
Events are the flow's n market messages in every L3 row (the strategy's own messages, about
0.2% more, are not counted), so the rows compare time for the same input.

L2 workload (skipped when the sample is absent): the Binance BTCUSDT capture (126,073 L2 rows +
9,757 trades), loaded once outside the timing. Measured: hftbacktest 2.x replaying its L2 rows
into a ``HashMapMarketDepthBacktest`` (benchmarks/peers/hftbacktest_peer.py: building the asset
plus ``elapse`` to the end; no strategy) against exsim's L2 backtest with a strategy that never
acts (the same replay plus the driver loop); and hftbacktest running a comparable njit market
maker on the L2 rows and trades (``_hbt_market_maker``) against exsim's inventory market maker
waking every 500 events (Python API; both: 1 ms feed and order latency, a conservative queue
model, 100,000-lot quotes at the touch).

Every round runs each measurement once, interleaved (A B C A B C ...), after one warm-up round
(compilation excluded); figures are medians over rounds and ratios are taken within the run,
because the shared machine's speed swings between minutes.
Writes benchmarks/results/local/backtest.json (``--out PATH`` elsewhere). EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 20,000
messages, one round, no hftbacktest market maker, JSON to the smoke directory: seconds.

    python benchmarks/bench_backtest.py [--n 1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke
from exsim.exchange import Engine, OutputBuffers
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy
from exsim.scenarios import uniform_flow
from exsim.replay.backtesting.strategies import InventoryMarketMaker, mm_quotes

TRADER = 4_000_000_000


class _OnFill(QuoteStrategy):
    """The quote strategy with an on_fill (counting fills): it may act between wake-ups."""

    fills = 0

    def on_fill(self, ctx, fill):
        self.fills += 1


def _l2_cases():
    """(name -> (events, callable)) for the Binance sample, or {} if it is absent."""
    from exsim.scenarios import load_binance
    from exsim.scenarios.data import BINANCE_BTCUSDT, shared_file
    try:
        path = shared_file(BINANCE_BTCUSDT)
    except Exception:
        return {}, None
    if not os.path.exists(path):
        return {}, None
    data = load_binance(path)
    events = len(data.l2) + len(data.trades)
    cases = {}

    def l2_replay():
        backtest(data, Strategy(), trader=TRADER)

    def l2_mm():
        backtest(data, InventoryMarketMaker(size=100_000, skew_lots=100_000,
                                            max_position=1_000_000, every=500),
                 latency=(1_000_000, 1_000_000), trader=TRADER)
    cases["exsim_l2_replay_events_per_s"] = (events, l2_replay)
    cases["exsim_l2_mm_every_500_events_per_s"] = (events, l2_mm)
    from peers import Workload
    from peers.hftbacktest_peer import HftbacktestL2
    peer = HftbacktestL2()
    why = peer.unavailable()
    if why is None:
        wl = Workload("binance", "l2", [data.l2])
        prepared = peer.prepare(wl)
        # hftbacktest replays the L2 rows only (no trades): rate over the rows it replays
        cases["hftbacktest_l2_replay_events_per_s"] = (len(data.l2), lambda: peer.run(prepared))
        if not _smoke.enabled():    # its njit strategy compiles for ~15 s: not for a smoke run
            cases["hftbacktest_l2_mm_events_per_s"] = (events, _hbt_market_maker(data))
    return cases, why


def _hbt_market_maker(data):
    """hftbacktest running a market maker comparable to exsim's L2 one: the same merged L2 rows and
    trades (replay.backtesting.l2queue.l2_events' order), 1 ms feed and order latency, its conservative
    ``risk_adverse_queue_model`` (only trades advance the queue), partial fills; every wake-up it
    cancels its two quotes and quotes 100,000 lots at the best bid and ask. It wakes on time
    (``elapse``), so the interval is the data's span over exsim's wake-up count (one per 500
    events). Timed: building the asset and backtest, and the run."""
    import numpy as np
    from hftbacktest import (BUY_EVENT, DEPTH_EVENT, EXCH_EVENT, GTC, LIMIT, LOCAL_EVENT,
                             SELL_EVENT, TRADE_EVENT, BacktestAsset, HashMapMarketDepthBacktest,
                             event_dtype)
    from numba import njit

    from exsim.replay.backtesting.l2queue import EV_TRADE, L2Flow, l2_events

    ev = l2_events(L2Flow.from_binance(data))
    rows = np.zeros(len(ev), event_dtype)
    kind = np.where(ev["kind"] == EV_TRADE, TRADE_EVENT, DEPTH_EVENT).astype(np.uint64)
    side = np.where(ev["side"] == 0, BUY_EVENT, SELL_EVENT).astype(np.uint64)
    rows["ev"] = kind | EXCH_EVENT | LOCAL_EVENT | side
    rows["exch_ts"] = ev["ts"]
    rows["local_ts"] = ev["ts"] + 1_000_000      # 1 ms feed latency
    rows["px"] = ev["price"]
    rows["qty"] = ev["qty"]
    interval = int(ev["ts"][-1] - ev["ts"][0]) // max(len(ev) // 500, 1)

    @njit
    def quote_loop(hbt, interval, size):
        bid_id = ask_id = 0
        next_id = 1
        while hbt.elapse(interval) == 0:
            hbt.clear_inactive_orders(0)
            d = hbt.depth(0)
            if d.best_bid_qty <= 0 or d.best_ask_qty <= 0:
                continue
            orders = hbt.orders(0)
            if bid_id in orders:
                hbt.cancel(0, bid_id, False)
            if ask_id in orders:
                hbt.cancel(0, ask_id, False)
            bid_id, ask_id, next_id = next_id, next_id + 1, next_id + 2
            hbt.submit_buy_order(0, bid_id, float(d.best_bid_tick), size, GTC, LIMIT, False)
            hbt.submit_sell_order(0, ask_id, float(d.best_ask_tick), size, GTC, LIMIT, False)

    def run():
        asset = (BacktestAsset().data([rows]).linear_asset(1.0)
                 .constant_order_latency(1_000_000, 1_000_000).risk_adverse_queue_model()
                 .partial_fill_exchange().trading_value_fee_model(0.0, 0.0).tick_size(1.0)
                 .lot_size(1.0))
        hbt = HashMapMarketDepthBacktest([asset])
        quote_loop(hbt, interval, 100_000.0)
        hbt.close()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/backtest.json; the committed one: --out benchmarks/results/backtest.json)")
    args = ap.parse_args()
    args.n = _smoke.scaled(args.n, 20_000)
    args.runs = _smoke.scaled(args.runs, 1)
    flow = uniform_flow(args.n, 7)

    def engine_only():
        e = Engine()
        e.add_symbol("S")
        e.process(flow)

    def engine_reuse():
        e = Engine()
        e.add_symbol("S")
        out = OutputBuffers(65536)
        for k in range(0, len(flow), 65536):
            e.process(flow[k: k + 65536], out=out)

    def run(fast, cls=QuoteStrategy):
        return lambda: backtest(flow, cls(mm_quotes, [5, 20, 200], every=100),
                                trader=TRADER, fast=fast)

    def python_api():
        backtest(flow, InventoryMarketMaker(size=5, skew_lots=20, max_position=200, every=100),
                 trader=TRADER)
    cases = {"engine_only_events_per_s": (args.n, engine_only),
             "engine_only_reused_buffers_events_per_s": (args.n, engine_reuse),
             "njit_strategy_events_per_s": (args.n, run(True)),
             "python_strategy_every_100_events_per_s": (args.n, run(False)),
             "python_strategy_every_100_on_fill_events_per_s": (args.n, run(False, _OnFill)),
             "python_api_mm_every_100_events_per_s": (args.n, python_api)}
    l2, hbt_missing = _l2_cases()
    cases.update(l2)
    times = {k: [] for k in cases}
    load0 = os.getloadavg()[0]    # the machine is shared: record how busy it was
    for r in range(args.runs + 1):          # round 0 is the warm-up
        for k, (_, fn) in cases.items():
            t = time.perf_counter()
            fn()
            if r:
                times[k].append(time.perf_counter() - t)
    rows = {k: cases[k][0] / statistics.median(v) for k, v in times.items()}

    def rmed(a, b, na, nb):
        """Median over rounds of rate(a) / rate(b): both ran within seconds of each other."""
        return statistics.median((na / x) / (nb / y) for x, y in zip(times[a], times[b]))
    ratios = {}
    ratios["njit_vs_engine"] = rmed("njit_strategy_events_per_s", "engine_only_events_per_s",
                                    args.n, args.n)
    ratios["njit_vs_engine_reused_buffers"] = rmed(
        "njit_strategy_events_per_s", "engine_only_reused_buffers_events_per_s", args.n, args.n)
    ratios["python_vs_engine"] = rmed("python_strategy_every_100_events_per_s",
                                      "engine_only_events_per_s", args.n, args.n)
    ratios["python_vs_engine_reused_buffers"] = rmed(
        "python_strategy_every_100_events_per_s", "engine_only_reused_buffers_events_per_s",
        args.n, args.n)
    ratios["python_on_fill_vs_python"] = rmed("python_strategy_every_100_on_fill_events_per_s",
                                              "python_strategy_every_100_events_per_s",
                                              args.n, args.n)
    if "hftbacktest_l2_replay_events_per_s" in rows:
        h = "hftbacktest_l2_replay_events_per_s"
        nh = cases[h][0]
        ratios["exsim_l2_replay_vs_hftbacktest_replay"] = rmed(
            "exsim_l2_replay_events_per_s", h, cases["exsim_l2_replay_events_per_s"][0], nh)
    if "hftbacktest_l2_mm_events_per_s" in rows:
        ratios["exsim_l2_mm_vs_hftbacktest_mm"] = rmed(
            "exsim_l2_mm_every_500_events_per_s", "hftbacktest_l2_mm_events_per_s",
            cases["exsim_l2_mm_every_500_events_per_s"][0],
            cases["hftbacktest_l2_mm_events_per_s"][0])
    targets = {"njit_strategy_events_per_s": 5e6, "python_strategy_every_100_events_per_s": 1e6}
    print(f"| {'measure':48} | {'events/s':>12} | {'target':>10} |")
    print(f"|{'-' * 50}|{'-' * 14}|{'-' * 12}|")
    for k, v in rows.items():
        t = targets.get(k)
        print(f"| {k:48} | {v:12,.0f} | {t and f'{t:,.0f}' or '':>10} |")
    for k, v in ratios.items():
        print(f"| {k:48} | {v:11.2f}x | {'':>10} |")
    if hbt_missing:
        print(f"hftbacktest: {hbt_missing}")
    out = {"workload": f"uniform_flow(n={args.n}, seed 7), 1 symbol, mm_quotes every 100 "
                       "messages, zero latency; events = the n market messages in every L3 row; "
                       "Binance BTCUSDT 2024-08-08 sample (L2 rows + "
                       "trades) for the L2 rows; median of "
                       f"{args.runs} interleaved rounds after a warm-up round",
           "command": f"python benchmarks/bench_backtest.py --n {args.n} --runs {args.runs}",
           "cores": os.cpu_count(),
           "loadavg_1min": {"start": load0, "end": os.getloadavg()[0]},
           **rows, "ratios": ratios, "targets": targets,
           "hftbacktest": hbt_missing or "measured"}
    path = _smoke.report_path(args.out, "backtest.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
