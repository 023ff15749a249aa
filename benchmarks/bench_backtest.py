"""Backtest throughput: market events/s through the driver, njit quote path and Python path.

Workload: scenarios.uniform_flow(n, seed 7), 1 symbol; the example market maker quoting 5 lots
(``mm_quotes``) waking every 100 market messages, zero latency. Reported: the engine alone on the
same flow (``Engine.process`` in one batch, the ceiling for any driver), the njit path
(``QuoteStrategy``, fast=True) and the Python path (the same quote function through the Python
API, fast=False). Median of ``--runs`` runs after one warm-up (compilation excluded).
Writes benchmarks/results/backtest.json.

    python benchmarks/bench_backtest.py [--n 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from exchange import Engine
from replay.backtest import backtest
from replay.strategy import QuoteStrategy
from scenarios import uniform_flow
from scenarios.strategies import mm_quotes

TRADER = 4_000_000_000


def _time(fn, runs: int) -> float:
    fn()   # warm-up: compilation and page faults
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    flow = uniform_flow(args.n, 7)

    def engine_only():
        e = Engine()
        e.add_symbol("S")
        e.process(flow)

    def run(fast):
        return lambda: backtest(flow, QuoteStrategy(mm_quotes, [5, 20, 200], every=100),
                                trader=TRADER, fast=fast)
    rows = {
        "engine_only_events_per_s": args.n / _time(engine_only, args.runs),
        "njit_strategy_events_per_s": args.n / _time(run(True), args.runs),
        "python_strategy_every_100_events_per_s": args.n / _time(run(False), args.runs),
    }
    targets = {"njit_strategy_events_per_s": 5e6, "python_strategy_every_100_events_per_s": 1e6}
    print(f"{'measure':42} {'events/s':>14} {'target':>10}")
    for k, v in rows.items():
        t = targets.get(k)
        print(f"{k:42} {v:14,.0f} {t and f'{t:,.0f}' or '':>10}")
    out = {"workload": f"uniform_flow(n={args.n}, seed 7), 1 symbol, mm_quotes every 100 "
                       f"messages, zero latency, median of {args.runs} runs after a warm-up",
           "cores": os.cpu_count(), **rows, "targets": targets}
    path = os.path.join(os.path.dirname(__file__), "results", "backtest.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
