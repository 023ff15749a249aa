"""``exsim bench``: a quick matching-throughput measurement on the seeded benchmark flow.

It times ``Engine.process`` (batches, reused output buffers, fills/L2/events all emitted) on
``scenarios.uniform_flow`` with the engine benchmark's parameters, over fresh engines, and prints
the median. Every timed run excludes compiling: the kernels are warmed up (compiled, or loaded
from numba's cache) before the first, with a note on stderr when that will take minutes. The
full benchmark suite, with the QuantCup workload, variants run side by side and JSON output,
is ``python -m benchmarks.bench_engine`` in a source checkout (docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import time

from exsim.exchange.errors import UsageError

from exsim.replay.cli.common import EXIT_OK, print_table

__all__ = ["register", "cmd_bench", "measure_throughput", "load_text"]

EXAMPLES = """\
examples:
  exsim bench                                  # 1 M seeded messages, 1 symbol, median of 3 runs
  exsim bench --messages 200000 --symbols 100 --runs 5
"""


def measure_throughput(messages: int, symbols: int, runs: int, batch: int) -> dict:
    """Return the median seconds and output counts of matching the seeded flow ``runs`` times.

    Raises UsageError for non-positive sizes.
    """
    from exsim.exchange import Engine, OutputBuffers
    from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow

    if min(messages, symbols, runs, batch) < 1:
        raise UsageError("--messages, --symbols, --runs and --batch must be >= 1")
    params = {**BENCH_1M, "n": messages, "n_symbols": symbols}
    flow = uniform_flow(**params)
    # why: the first call compiles the kernel; timing it would report the compile as throughput
    warm = Engine()
    warm.add_symbol("WARM")
    warm.process(_one_symbol(flow[:64]), out=OutputBuffers(batch))
    times, counts = [], {}
    for _ in range(runs):
        eng = Engine()
        for s in range(symbols):
            eng.add_symbol(f"S{s}")
        counts = {"fills": 0, "l2": 0, "events": 0}
        out = OutputBuffers(batch)
        t0 = time.perf_counter()
        for lo in range(0, len(flow), batch):
            res = eng.process(flow[lo: lo + batch], out=out)
            counts["fills"] += len(res.fills)
            counts["l2"] += len(res.l2)
            counts["events"] += len(res.events)
        times.append(time.perf_counter() - t0)
        counts["live"] = eng.live_orders
    return {"seconds": statistics.median(times), "messages": len(flow), **counts}


def load_text() -> str:
    """Return the machine's load average and CPU count as text (``load average 0.52 0.61 0.70
    over 1/5/15 min, 2 CPUs``; ``load average unknown`` where the OS does not say).

    why: a throughput figure from a busy machine is not one from an idle machine; the reader
    needs to see which it was."""
    import os

    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "load average unknown"
    return (f"load average {one:.2f} {five:.2f} {fifteen:.2f} over 1/5/15 min, "
            f"{os.cpu_count() or '?'} CPUs")


def _one_symbol(msgs):
    """Return a copy of ``msgs`` with every message on symbol 0 (the warm-up engine's only one)."""
    out = msgs.copy()
    out["symbol"] = 0
    return out


def register(sub, parents, formatter) -> None:
    """Add the ``bench`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "bench", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="measure matching throughput on the seeded benchmark flow",
        description="Match the seeded benchmark flow (60% passive limits, 30% cancels, 10% "
                    "crossing limits, seed 7)\nthrough fresh engines and print the median "
                    "throughput. The timing excludes compiling\nthe kernels (a first run compiles the "
                    "matching kernel first: about 6 minutes of CPU).")
    p.add_argument("--messages", type=int, default=1_000_000, metavar="N",
                   help="messages in the flow (default: %(default)s)")
    p.add_argument("--symbols", type=int, default=1, metavar="K",
                   help="symbols the flow spreads over (default: %(default)s)")
    p.add_argument("--runs", type=int, default=3, metavar="R",
                   help="timed runs; the median is reported (default: %(default)s)")
    p.add_argument("--batch", type=int, default=65_536, metavar="B",
                   help="messages per process() call (default: %(default)s)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    """Run ``exsim bench``; print one table row and the load average; return 0."""
    r = measure_throughput(args.messages, args.symbols, args.runs, args.batch)
    rate = r["messages"] / r["seconds"]
    print_table(["messages", "symbols", "M msgs/s", "ns/msg", "fills", "L2 rows", "events",
                 "live at end"],
                [[f"{r['messages']:,}", args.symbols, f"{rate / 1e6:.2f}",
                  f"{1e9 / rate:.0f}", f"{r['fills']:,}", f"{r['l2']:,}", f"{r['events']:,}",
                  f"{r['live']:,}"]])
    print(f"median of {args.runs} run(s); {load_text()}")
    return EXIT_OK
