"""Call auctions: the cost of the uncross and of collecting a call book (issue 16's benchmark).

For each call book size (default 10,000 and 1,000,000 orders) a fresh engine with one symbol
enters PRE_OPEN and takes a seeded flow of orders that crosses heavily: BUY and SELL limits
uniform over 200 ticks around 10,000, sizes 1-100 lots, 5% market orders and 5% icebergs
(display 10). Then one PHASE message to OPENING_AUCTION uncrosses it. Timed apart:

- ``collect``: processing the call flow (every order rests; the engine publishes the indicative
  uncross after each message that changes it), as ns per message;
- ``uncross``: the one PHASE message that runs the auction (price determination, allocation,
  fills, events, L2, the market orders' cancels), in ms, and per order in the call book.

Continuous trading is measured by bench_engine; its ``--baseline REV`` runs today's engine beside
an older one on the plain workloads (the "within 10% of before" check of issue 16):

    python -m benchmarks.bench_auction [--sizes 10000 1000000] [--runs 3] [--out benchmarks/results/auction.json]
    python -m benchmarks.bench_engine --baseline b91e9cf --runs 5

Figures are medians of ``--runs`` runs. Prints a markdown table and writes JSON.
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): one run of a 2,000-order book.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from benchmarks import _smoke
from benchmarks.bench_engine import machine
from exsim.exchange import ORDER_DTYPE, Engine, Kind, OrderType, Phase, Side

MID = 10_000
SPREAD = 100          # prices uniform in [MID - SPREAD, MID + SPREAD]
SEED = 7


def call_flow(n: int, seed: int = SEED) -> np.ndarray:
    """Return ``n`` NEW messages for symbol 0 (ORDER_DTYPE), one ns apart from ts 1, that cross
    heavily: see the module docstring. Order ids are 1..n."""
    rng = np.random.default_rng(seed)
    msgs = np.zeros(n, ORDER_DTYPE)
    msgs["ts"] = np.arange(1, n + 1)
    msgs["order_id"] = np.arange(1, n + 1)
    msgs["kind"] = Kind.NEW
    msgs["side"] = rng.integers(0, 2, n)
    msgs["price"] = rng.integers(MID - SPREAD, MID + SPREAD + 1, n)
    msgs["qty"] = rng.integers(1, 101, n)
    msgs["trader"] = rng.integers(1, 1_000, n)
    market = rng.random(n) < 0.05
    msgs["order_type"][market] = OrderType.MARKET
    msgs["price"][market] = 0
    iceberg = ~market & (rng.random(n) < 0.05) & (msgs["qty"] > 10)
    msgs["display_qty"][iceberg] = 10
    return msgs


def phase_message(ts: int, phase: Phase) -> np.ndarray:
    """Return one PHASE message (ORDER_DTYPE) moving symbol 0 to ``phase`` at ``ts``."""
    m = np.zeros(1, ORDER_DTYPE)
    m["ts"] = ts
    m["kind"] = Kind.PHASE
    m["phase"] = phase
    return m


def one_run(flow: np.ndarray) -> dict:
    """Build the call book from ``flow`` on a fresh engine and uncross it; return the timings,
    the auction's price and volume and the output counts. Raises AssertionError if the uncross
    did not execute (the flow always crosses)."""
    eng = Engine()
    eng.add_symbol("X", reference_price=MID)
    eng.process(phase_message(0, Phase.PRE_OPEN))
    t0 = time.perf_counter()
    collect = eng.process(flow)
    t1 = time.perf_counter()
    res = eng.process(phase_message(int(flow["ts"][-1]) + 1, Phase.OPENING_AUCTION))
    t2 = time.perf_counter()
    from exsim.exchange import Event

    uncross = res.events[res.events["event"] == Event.UNCROSS]
    assert len(uncross) == 1 and uncross["filled_qty"][0] > 0, "the call book did not uncross"
    return {"collect_s": t1 - t0, "uncross_s": t2 - t1,
            "indicative_events": int(np.count_nonzero(collect.events["event"] == Event.INDICATIVE)),
            "price": int(uncross["price"][0]), "volume": int(uncross["filled_qty"][0]),
            "fills": len(res.fills), "events": len(res.events), "l2": len(res.l2),
            "resting_after": eng.live_orders}


def main(argv=None) -> dict:
    """Run the benchmark; print the table and write the JSON report. Returns the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/"
                    "auction.json; the committed one: --out benchmarks/results/auction.json)")
    args = ap.parse_args(argv)
    if args.runs < 1 or any(s < 1 for s in args.sizes):
        ap.error("--runs and --sizes must be positive")
    sizes = [_smoke.scaled(s, 2_000) for s in args.sizes]
    runs = _smoke.scaled(args.runs, 1)
    t = time.perf_counter()
    one_run(call_flow(100))          # the first call compiles (or loads numba's cache)
    first_call_s = time.perf_counter() - t
    rows, report = [], {"machine": machine(), "first_call_s": first_call_s, "seed": SEED,
                        "runs": runs, "sizes": {}}
    for n in sizes:
        flow = call_flow(n)
        got = [one_run(flow) for _ in range(runs)]
        med = {k: statistics.median(r[k] for r in got) for k in ("collect_s", "uncross_s")}
        last = got[-1]
        entry = {**med, "collect_ns_per_msg": 1e9 * med["collect_s"] / n,
                 "uncross_ns_per_order": 1e9 * med["uncross_s"] / n,
                 **{k: last[k] for k in ("price", "volume", "fills", "events", "l2",
                                         "indicative_events", "resting_after")}}
        report["sizes"][str(n)] = entry
        rows.append([f"{n:,}", f"{entry['collect_ns_per_msg']:.0f}",
                     f"{1e3 * med['uncross_s']:.2f}", f"{entry['uncross_ns_per_order']:.0f}",
                     f"{last['price']}", f"{last['volume']:,}", f"{last['fills']:,}",
                     f"{last['indicative_events']:,}"])
    from exsim.replay.cli.common import print_table

    print_table(["call book", "collect ns/msg", "uncross ms", "uncross ns/order", "price",
                 "volume", "fills", "INDICATIVE events"], rows,
                title=f"call auctions, median of {runs} run(s)")
    out = _smoke.report_path(args.out, "auction.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
