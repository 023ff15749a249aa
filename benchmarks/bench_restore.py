"""Restore benchmark: ``Engine.restore`` must be linear in symbols and in price levels.

Workloads: a checkpoint of n symbols with one bid each, and one of 8n bid levels of one symbol
(distinct prices, best first, the order checkpoint() writes them). Each is restored at its size
and at 4x its size; the figure is the best CPU time (time.process_time) of ``--runs`` restores.
Linear restore takes about 4x as long at 4x the size; quadratic (a book grown one symbol at a
time, levels inserted best-first into a ladder) 16x. The target: under 8x, else exit status 1.

This is the timed half of tests/exchange_tests/test_checkpoint_hostile.py's linearity test
(which counts the Python work deterministically but cannot see inside the compiled kernels).
Usage: python benchmarks/bench_restore.py [--n 10000] [--runs 3]
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): n = 500, one run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke

from exsim.exchange import Engine
from exsim.exchange.schema import MAX_PRICE, ORDER_DTYPE, Kind, OrderType, Side, Tif

TARGET = 8.0   # time(4n) / time(n) must stay below this; quadratic is 16


def symbols_blob(n: int) -> bytes:
    """Return the checkpoint of an engine with n symbols, one resting bid on each."""
    eng = Engine()
    for i in range(n):
        eng.add_symbol(f"S{i}", tick_size=1, min_price=1, max_price=MAX_PRICE)
    eng.process(_bids(np.arange(n), np.full(n, 100)))
    return eng.checkpoint()


def levels_blob(n: int) -> bytes:
    """Return the checkpoint of one symbol with n bid levels (prices 11..n+10), one order each."""
    eng = Engine()
    eng.add_symbol("S", tick_size=1, min_price=1, max_price=MAX_PRICE)
    eng.process(_bids(np.zeros(n, np.int64), np.arange(11, n + 11)))
    return eng.checkpoint()


def _bids(symbols: np.ndarray, prices: np.ndarray) -> np.ndarray:
    m = np.zeros(len(prices), ORDER_DTYPE)
    m["order_id"] = np.arange(1, len(prices) + 1)
    m["symbol"], m["price"], m["qty"], m["trader"] = symbols, prices, 1, 1
    m["kind"], m["order_type"], m["tif"], m["side"] = Kind.NEW, OrderType.LIMIT, Tif.GTC, Side.BUY
    return m


def restore_seconds(blob: bytes, runs: int) -> float:
    """Return the best CPU seconds of ``runs`` restores of ``blob`` (checked to round-trip)."""
    best = math.inf
    for _ in range(runs):
        t0 = time.process_time()
        eng = Engine.restore(blob)
        best = min(best, time.process_time() - t0)
    assert eng.checkpoint() == blob
    return best


def main(argv=None) -> int:
    """Print each workload's times and ratio; return 1 if a ratio reaches TARGET, else 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/"
                    "restore.json)")
    args = ap.parse_args(argv)
    n, runs = _smoke.scaled(args.n, 500), _smoke.scaled(args.runs, 1)
    Engine.restore(levels_blob(10))    # compiled: compiling is not restore's work
    worst = 0.0
    report = {"runs": runs, "target_ratio": TARGET, "workloads": {}}
    # levels restore ~100x faster per item than symbols: 8x as many keep the timer well above noise
    for name, make, n in (("symbols", symbols_blob, n), ("levels", levels_blob, 8 * n)):
        t_n, t_4n = restore_seconds(make(n), runs), restore_seconds(make(4 * n), runs)
        ratio = t_4n / max(t_n, 1e-4)
        worst = max(worst, ratio)
        print(f"{name:8s} n={n:>9,} {t_n * 1e3:9.2f} ms   4n {t_4n * 1e3:9.2f} ms   x{ratio:5.2f}")
        report["workloads"][name] = {"n": n, "cpu_s_n": t_n, "cpu_s_4n": t_4n, "ratio": ratio}
    print(f"target: under x{TARGET:g} (quadratic is x16)")
    out = _smoke.report_path(args.out, "restore.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")
    return 1 if worst >= TARGET and not _smoke.enabled() else 0


if __name__ == "__main__":
    sys.exit(main())
