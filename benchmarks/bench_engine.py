"""Matching throughput of the engine alone (issue 2's benchmark).

Workloads:
  quantcup   the QuantCup scoring feed replayed to ~10 M messages: replay k runs on its own
             symbol of one engine, so every replay starts from an empty book as in the contest
  uniform1   the seeded 1 M flow (scenarios.bench_1m: 60% passive limits within 50 ticks of a
             random-walk mid, 30% cancels of live orders, 10% crossing limits, sizes 1-100, seed 7)
  uniform100 the same over 100 symbols
  venue      uniform1 with 10% of its NEW limits turned into stops, 10% into icebergs and 10%
             into GTD orders (scenarios.generators.venue_mix, seed 7): the order types of a real
             venue; not run on a --baseline engine that predates them
  flash1     plain limit/cancel/modify flow with price swings and a crash (``flash_flow``, seed
             7, 1 M messages): 45% passive limits within 50 ticks of a mid that swings +-2% and
             crashes 15% at 70% of the flow (recovering half), 25% cancels and 20% modifies
             (new price or size) of live orders, 10% crossing limits: the shape of the flash1
             harness's scenarios (issue 42), no venue order type

Each run builds a fresh engine and feeds the workload in batches (default 65,536 messages) with
fills, L2 updates and events all emitted. "reused" keeps the output buffers between batches
(``process(out=OutputBuffers)``: what the journal does); "fresh" allocates new outputs per batch;
"no prefetch" turns the kernel's software prefetch off; "prefetch always" prefetches on every
batch (``prefetch_tuning = False``), where the default lets the engine time prefetching on and
off now and then and keep the faster (exchange.prefetch_tuning). Variants run in interleaved
rounds. The
first call of the process (numba compile, or loading the on-disk cache) is timed apart.
Figures are medians of ``--runs`` runs. Prints a markdown table and writes JSON.

Single message (issue 20, "one message cheap"): the per-call cost the gateway, Python strategies
and interactive users pay, over the first ``--single`` messages of uniform1 (default 20,000; 0
skips it): "process" calls ``Engine.process(one-row array)`` on each message in turn (fresh
outputs, no ``out``), "process, out=" the same with one reused ``OutputBuffers`` (what the
journal and the gateway do); "submit" calls ``Engine.submit(symbol name, side name, qty=, price=, ts=)``
(automatic order ids) on each of its NEW messages. ns per call in wall-clock and in thread CPU
time (the second is steadier on a loaded machine), medians of ``--runs`` rounds, with the
``--baseline`` engine interleaved in the same rounds when given.

Threads (issue 20, "every core"): uniform100 on ``Engine(threads=--threads)`` (default 2; 0
skips it) against ``Engine()``, reused buffers, in the same interleaved rounds: the ratio of
the medians, the median of the per-round ratios, and whether an untimed pass gives every
batch's outputs and the final checkpoint byte for byte alike. In the same rounds, the machine's
ceiling: each shard's part of the flow on its own independent ``Engine()``, all at once on
their own threads against one after another (the same matching with no split and no merge), so
the ratio is the most any symbol-sharded design can gain on this machine: cores that share a
cache and memory bandwidth give less than N.

``--baseline REV`` adds the engine as of git revision REV (its ``exchange/`` extracted to
<tmp>/exsim-engine-rev-<sha> and imported apart as ``exchange_baseline``; the first run there
compiles it cold) as one more interleaved variant, "reused, baseline", so old and new engines meet
the same machine noise; the table then gives new vs baseline per workload (ratio of the medians,
and the median of the per-round ratios) and whether their output counts agree.

    python -m benchmarks.bench_engine [--runs 5] [--batch 65536] [--single 20000] [--threads 2] [--baseline REV] [--out benchmarks/results/engine.json]

EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): one run over one QuantCup replay and the first 20,000
messages of each seeded flow, JSON to the smoke directory: seconds, for the docs' command tests.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import _revisions, _smoke
from exsim.exchange import ORDER_DTYPE, Engine, OutputBuffers
from exsim.replay.cli.bench import load_text

SMOKE_MESSAGES = 20_000   # per seeded workload in smoke mode


def machine() -> dict:
    """Return a description of this machine and the library versions that matter here."""
    import numba

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__, "platform": platform.platform()}


def flash_flow(n: int, seed: int = 7) -> np.ndarray:
    """Return ``n`` messages (ORDER_DTYPE) of the flash1-shaped plain flow (see the workloads):
    one symbol, LIMIT GTC NEW / CANCEL / MODIFY only, ten traders, 1 us apart. Cancels and
    modifies name a live order (or, after it traded away, one no longer live: rejected)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / max(n, 1)
    # +-2% swings (three and a half periods), a 15% crash over 1% of the flow at 70%, half of
    # it recovered over the next 10%
    mid = 100_000 * (1 + 0.02 * np.sin(2 * np.pi * 3.5 * t))
    crash = np.clip((t - 0.70) / 0.01, 0, 1) * 0.15 - np.clip((t - 0.71) / 0.10, 0, 1) * 0.075
    mid = np.round(mid * (1 - crash)).astype(np.int64)
    u = rng.random(n)
    side = rng.integers(0, 2, n)
    dist = rng.integers(1, 51, n)
    through = rng.integers(0, 3, n)
    size = rng.integers(1, 101, n)
    pick = rng.random(n)
    trader = rng.integers(1, 11, n)
    reprice = rng.random(n) < 0.6
    out = np.zeros(n, ORDER_DTYPE)
    out["ts"] = np.arange(1, n + 1, dtype=np.int64) * 1_000
    kind = out["kind"]
    oid = out["order_id"]
    price = out["price"]
    qty = out["qty"]
    tr = out["trader"]
    sd = out["side"]
    live_id: list[int] = []
    live_side: list[int] = []
    live_trader: list[int] = []
    next_id = 1
    for i in range(n):
        x = u[i]
        if x < 0.45 or (x < 0.9 and not live_id) or x >= 0.9:
            s = int(side[i])
            m = int(mid[i])
            if x >= 0.9:      # crossing: through the mid by a few ticks
                p = m + int(through[i]) if s == 0 else m - int(through[i])
            else:
                p = m - int(dist[i]) if s == 0 else m + int(dist[i])
            kind[i] = 0
            oid[i] = next_id
            price[i] = max(p, 1)
            qty[i] = size[i]
            tr[i] = trader[i]
            sd[i] = s
            live_id.append(next_id)
            live_side.append(s)
            live_trader.append(int(trader[i]))
            next_id += 1
            continue
        k = int(pick[i] * len(live_id))
        oid[i] = live_id[k]
        tr[i] = live_trader[k]
        sd[i] = live_side[k]
        if x < 0.70:          # cancel
            kind[i] = 1
            last = len(live_id) - 1
            live_id[k], live_side[k], live_trader[k] = live_id[last], live_side[last], live_trader[last]
            live_id.pop()
            live_side.pop()
            live_trader.pop()
        else:                 # modify: a new passive price, or a new size at the same price
            kind[i] = 2
            m = int(mid[i])
            qty[i] = size[i]
            if reprice[i]:
                price[i] = max(m - int(dist[i]) if live_side[k] == 0 else m + int(dist[i]), 1)
            else:
                price[i] = -1     # filled below: the same price as the order's last
    # a size-only modify keeps the order's price: the last price sent for that id
    last_price: dict[int, int] = {}
    for i in range(n):
        if kind[i] == 0 or (kind[i] == 2 and price[i] >= 0):
            last_price[int(oid[i])] = int(price[i])
        elif kind[i] == 2:
            price[i] = last_price.get(int(oid[i]), int(mid[i]))
    return out


def quantcup_workload(target: int) -> tuple[np.ndarray, int]:
    """Return (flow, n_symbols): the QuantCup feed tiled to about ``target`` messages."""
    from exsim.scenarios import load_quantcup
    from exsim.scenarios.data import QUANTCUP_FEED, shared_file

    feed = load_quantcup(shared_file(QUANTCUP_FEED))
    reps = max(1, target // len(feed))
    flow = np.tile(feed, reps)
    flow["symbol"] = np.repeat(np.arange(reps, dtype=np.uint32), len(feed))
    return flow, reps


def load_baseline(rev: str):
    """Return the ``exchange`` package of this repository at git revision ``rev`` (a module).

    The package is extracted once per commit to <tmp>/exsim-engine-rev-<sha>
    (``benchmarks._revisions``) and imported as ``exchange_baseline`` (its numba cache lives
    there, apart from the working tree's). Raises SystemExit naming ``rev`` if git cannot
    resolve it or the revision has no exchange/.
    """
    pkg = _revisions.extract(rev, ["exchange"], "exsim-engine-rev") / "exchange"
    spec = importlib.util.spec_from_file_location(
        "exchange_baseline", pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["exchange_baseline"] = module
    # The baseline's cache guard names its dependencies by absolute module name, which resolves
    # to THIS tree's files (exsim.exchange.book, or exchange.book from the repository root):
    # every edit here would purge the baseline's numba cache and cost a cold compile. An
    # extracted revision never changes, so its cache needs no guard.
    try:
        importlib.import_module("exchange_baseline._cache_guard").guard = lambda *a, **k: None
    except ImportError:   # a revision from before the guard
        pass
    spec.loader.exec_module(module)
    return module


def in_dtype(flow: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Return ``flow`` as an array of ``dtype`` (an older engine's ORDER_DTYPE: its fields only)."""
    if flow.dtype == dtype:
        return flow
    out = np.zeros(len(flow), dtype)
    for name in dtype.names:
        out[name] = flow[name]
    return out


def run_once(flow: np.ndarray, n_symbols: int, batch: int, reuse: bool,
             prefetch: int | str | None = None, package=None, threads: int = 1) -> dict:
    """Feed ``flow`` to a fresh engine of ``package`` (default: this ``exchange``; ``threads``
    its thread count) in batches; return timing and output counts. ``prefetch``: None the
    engine's default (prefetching chosen by timing), an int the prefetch distance, "always"
    the default distance with the timed choice off."""
    engine_cls = Engine if package is None else package.Engine
    buffers = OutputBuffers if package is None else package.OutputBuffers
    eng = engine_cls() if threads == 1 else engine_cls(threads=threads)
    if prefetch == "always":     # the default distance on every batch, no timed choice
        if hasattr(eng, "prefetch_tuning"):
            eng.prefetch_tuning = False
    elif prefetch is not None:
        eng.prefetch_distance = prefetch
    for s in range(n_symbols):
        eng.add_symbol(f"S{s}")
    fills = l2 = events = 0
    peak_live = 0
    out = buffers(batch) if reuse else None
    t0 = time.perf_counter()
    c0 = time.thread_time()
    for lo in range(0, len(flow), batch):
        res = eng.process(flow[lo: lo + batch], out=out)
        fills += len(res.fills)
        l2 += len(res.l2)
        events += len(res.events)
        peak_live = max(peak_live, eng.live_orders)
    dt = time.perf_counter() - t0
    cpu = time.thread_time() - c0
    return {"seconds": dt, "cpu_seconds": cpu, "fills": fills, "l2": l2, "events": events,
            "peak_live": peak_live,
            "live_end": eng.live_orders, "state_bytes": eng.memory_bytes()}


def single_once(flow: np.ndarray, call: str, package=None, count: bool = False) -> dict:
    """Feed ``flow`` one message per call to a fresh one-symbol engine of ``package`` (default:
    this ``exchange``): ``call`` "process" (``process(flow[k:k+1])``, the rows sliced before
    the clock starts), "process, out=" (the same into one reused OutputBuffers) or "submit" (its NEW messages through ``submit``); return ns per call
    (wall and thread CPU). The timed loop does nothing but the calls (each Result is dropped
    at the next one); with ``count``, an untimed second pass on a fresh engine adds the
    output counts."""
    eng = (Engine if package is None else package.Engine)()
    eng.add_symbol("S0")
    if call == "process":
        rows = [flow[k: k + 1] for k in range(len(flow))]
        process = eng.process
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        for row in rows:
            process(row)
    elif call == "process, out=":
        rows = [flow[k: k + 1] for k in range(len(flow))]
        process = eng.process
        out = (OutputBuffers if package is None else package.OutputBuffers)(1)
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        for row in rows:
            process(row, out=out)
    else:
        new = flow[flow["kind"] == 0]   # Kind.NEW
        sides = np.where(new["side"] == 0, "buy", "sell").tolist()
        rows = list(zip(sides, new["qty"].tolist(), new["price"].tolist(), new["ts"].tolist()))
        submit = eng.submit
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        for side, qty, price, ts in rows:
            submit("S0", side, qty=qty, price=price, ts=ts)
    wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
    got = {"calls": len(rows), "wall_ns": wall / len(rows), "cpu_ns": cpu / len(rows)}
    if count:
        eng = (Engine if package is None else package.Engine)()
        eng.add_symbol("S0")
        got.update(fills=0, l2=0, events=0)
        for r in rows:   # one Result at a time: an old engine's pins ~170 KB of buffers
            res = eng.process(r) if call != "submit" else eng.submit(
                "S0", r[0], qty=r[1], price=r[2], ts=r[3])
            for t in ("fills", "l2", "events"):
                got[t] += len(getattr(res, t))
    return got


def single_message(flow: np.ndarray, runs: int, baseline=None) -> list[dict]:
    """Time ``single_once`` for "process", "process, out=" and "submit" on this engine (and on ``baseline``, a
    package from ``load_baseline``), variants interleaved and their order alternated per round;
    return one row per (call, engine) with medians, and the new-vs-baseline ratio on the new
    rows."""
    variants = [(call, label, pkg) for call in ("process", "process, out=", "submit")
                for label, pkg in (("new", None), ("baseline", baseline))
                if label == "new" or baseline is not None]
    timed: dict[tuple, list[dict]] = {(c, lab): [] for c, lab, _ in variants}
    for rnd in range(runs):
        for call, label, pkg in (variants if rnd % 2 == 0 else variants[::-1]):
            f = flow if pkg is None else in_dtype(flow, pkg.ORDER_DTYPE)
            timed[(call, label)].append(single_once(f, call, pkg, count=rnd == 0))
    rows = []
    for (call, label), got in timed.items():
        first = got[0]
        row = {"call": call, "engine": label, "calls": first["calls"],
               "wall_ns": statistics.median(r["wall_ns"] for r in got),
               "cpu_ns": statistics.median(r["cpu_ns"] for r in got),
               "runs_wall_ns": [r["wall_ns"] for r in got],
               "fills": first["fills"], "l2_rows": first["l2"], "events": first["events"]}
        old = timed.get((call, "baseline"))
        if label == "new" and old:
            row["speedup_wall"] = statistics.median(r["wall_ns"] for r in old) / row["wall_ns"]
            row["speedup_cpu"] = statistics.median(r["cpu_ns"] for r in old) / row["cpu_ns"]
            row["same_output_counts"] = all(old[0][t] == first[t]
                                            for t in ("fills", "l2", "events"))
        rows.append(row)
    return rows


def same_bytes(flow: np.ndarray, n_symbols: int, batch: int, threads: int) -> bool:
    """Whether ``Engine(threads=threads)`` gives every batch's fills, L2 rows and events, and the
    final checkpoint, byte for byte as ``Engine()`` does (an untimed pass)."""
    engines = [Engine(), Engine(threads=threads)]
    for eng in engines:
        for s in range(n_symbols):
            eng.add_symbol(f"S{s}")
    bufs = [OutputBuffers(batch), OutputBuffers(batch)]
    for lo in range(0, len(flow), batch):
        got = [tuple(a.tobytes() for a in eng.process(flow[lo: lo + batch], out=b))
               for eng, b in zip(engines, bufs)]
        if got[0] != got[1]:
            return False
    return engines[0].checkpoint() == engines[1].checkpoint()


def ceiling_once(parts: list[np.ndarray], n_symbols: int, batch: int) -> tuple[float, float]:
    """Feed each of ``parts`` to its own fresh ``Engine()`` (always prefetching, as a shard
    does; reused buffers, batches of ``batch // len(parts)``, the share of a batch a shard
    matches) on its own thread, all at once, then again one after another on fresh engines;
    return (seconds at once, seconds one after another): the same work with no split and no
    merge, so their ratio is the most any symbol-sharded design can gain on this machine."""
    step = max(1, batch // len(parts))

    def ready() -> list:
        out = []
        for _ in parts:
            eng = Engine()
            eng.prefetch_tuning = False
            for s in range(n_symbols):
                eng.add_symbol(f"S{s}")
            out.append((eng, OutputBuffers(step)))
        return out

    def feed(eng, buf, part):
        for lo in range(0, len(part), step):
            eng.process(part[lo: lo + step], out=buf)

    engines = ready()
    start = threading.Barrier(len(parts) + 1)

    def task(k):
        start.wait()
        feed(*engines[k], parts[k])

    pool = [threading.Thread(target=task, args=(k,)) for k in range(len(parts))]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    together = time.perf_counter() - t0
    engines = ready()
    t0 = time.perf_counter()
    for k, part in enumerate(parts):
        feed(*engines[k], part)
    return together, time.perf_counter() - t0


def threads_section(flow: np.ndarray, n_symbols: int, batch: int, runs: int,
                    threads: int) -> dict:
    """Time ``Engine()`` and ``Engine(threads=threads)`` on ``flow`` (reused buffers, the same
    interleaved rounds), and in the same rounds the machine's ceiling (``ceiling_once`` on the
    shards' parts of the flow: symbol ``s`` goes to ``s % threads``, as in exchange.shards);
    return the medians, their ratio, the median per-round ratio, the ceiling and whether the
    outputs are byte-identical."""
    timed = {1: [], threads: []}
    at_once, in_turn = [], []
    parts = [np.ascontiguousarray(flow[flow["symbol"] % threads == k]) for k in range(threads)]
    for rnd in range(runs):
        for t in ((1, threads) if rnd % 2 == 0 else (threads, 1)):
            timed[t].append(run_once(flow, n_symbols, batch, True, threads=t)["seconds"])
        together, apart = ceiling_once(parts, n_symbols, batch)
        at_once.append(together)
        in_turn.append(apart)
    one, many = statistics.median(timed[1]), statistics.median(timed[threads])
    ceiling = statistics.median(in_turn) / statistics.median(at_once)
    return {"workload": f"uniform{n_symbols}", "messages": len(flow), "threads": threads,
            "seconds_1_thread": one, "seconds_n_threads": many, "speedup": one / many,
            "median_round_ratio": statistics.median(a / b for a, b in
                                                    zip(timed[1], timed[threads])),
            "runs_seconds_1_thread": timed[1], "runs_seconds_n_threads": timed[threads],
            "ceiling": ceiling, "ceiling_seconds_at_once": at_once,
            "ceiling_seconds_in_turn": in_turn,
            "identical_outputs": same_bytes(flow, n_symbols, batch, threads)}


def first_call_seconds(package=None) -> float:
    """Time the process's first engine call: numba compile, or loading its on-disk cache."""
    t0 = time.perf_counter()
    eng = (Engine if package is None else package.Engine)()
    eng.add_symbol("X")
    eng.process(np.zeros(1, ORDER_DTYPE if package is None else package.ORDER_DTYPE))
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; print a table and write the JSON report. Returns the report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=65_536)
    ap.add_argument("--quantcup-messages", type=int, default=10_000_000)
    ap.add_argument("--single", type=int, default=20_000, metavar="N",
                    help="messages for the single-message section (0: skip it)")
    ap.add_argument("--single-only", action="store_true",
                    help="run only the single-message section")
    ap.add_argument("--baseline", metavar="REV", default=None,
                    help="also time the engine of git revision REV (interleaved), e.g. main")
    ap.add_argument("--threads", type=int, default=2, metavar="N",
                    help="thread count of the uniform100 threads row, against 1 (0: skip it)")
    ap.add_argument("--workloads", default=None, metavar="A,B",
                    help="run only these workloads (default: all: quantcup,uniform1,uniform100,"
                         "venue,flash1)")
    ap.add_argument("--reused-only", action="store_true",
                    help="time only the 'reused' variant (and the baseline's): a quicker A/B")
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/engine.json; the committed one: --out benchmarks/results/engine.json)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.batch < 1:
        ap.error(f"--runs and --batch must be >= 1; got {args.runs} and {args.batch}")

    from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow
    from exsim.scenarios.generators.venue_mix import venue_mix

    args.runs = _smoke.scaled(args.runs, 1)
    law = {**BENCH_1M, "n": _smoke.scaled(BENCH_1M["n"], SMOKE_MESSAGES)}   # scenarios.bench_1m
    first = first_call_seconds()
    baseline = load_baseline(args.baseline) if args.baseline else None
    baseline_first = first_call_seconds(baseline) if baseline else None
    uniform1 = uniform_flow(n_symbols=1, **law)
    workloads = {}
    if not args.single_only:
        qc, qc_syms = quantcup_workload(_smoke.scaled(args.quantcup_messages, 1))
        workloads = {"quantcup": (qc, qc_syms), "uniform1": (uniform1, 1),
                     "uniform100": (uniform_flow(n_symbols=100, **law), 100),
                     "venue": (venue_mix(uniform1, seed=7), 1),
                     "flash1": (flash_flow(law["n"], seed=7), 1)}
        if args.workloads:
            wanted = args.workloads.split(",")
            unknown = sorted(set(wanted) - set(workloads))
            if unknown:
                ap.error(f"--workloads: unknown {', '.join(unknown)}; known: {', '.join(workloads)}")
            workloads = {k: v for k, v in workloads.items() if k in wanted}
    n_single = min(_smoke.scaled(args.single, 2_000), len(uniform1))
    rows = []
    versus = []
    for name, (flow, nsym) in workloads.items():
        # interleaved rounds, so machine noise hits every variant alike
        variants = [("reused", True, None, None, flow), ("fresh", False, None, None, flow),
                    ("reused, no prefetch", True, 0, None, flow),
                    ("reused, prefetch always", True, "always", None, flow)]
        if args.reused_only:
            variants = variants[:1]
        # the venue flow only on a baseline whose messages have the venue fields
        with_baseline = baseline is not None and (
            name != "venue" or set(ORDER_DTYPE.names) <= set(baseline.ORDER_DTYPE.names))
        if with_baseline:
            variants.append(("reused, baseline", True, None, baseline,
                             in_dtype(flow, baseline.ORDER_DTYPE)))
        timed: dict[str, list[dict]] = {v[0]: [] for v in variants}
        for rnd in range(args.runs):
            # alternate the order too: the variant run right after another may find warmer caches
            for label, reuse, prefetch, pkg, f in (variants if rnd % 2 == 0 else variants[::-1]):
                timed[label].append(run_once(f, nsym, args.batch, reuse, prefetch, pkg))
        if with_baseline:
            new, old = timed["reused"], timed["reused, baseline"]
            versus.append({
                "workload": name,
                "speedup": (statistics.median(r["seconds"] for r in old)
                            / statistics.median(r["seconds"] for r in new)),
                "median_round_ratio": statistics.median(o["seconds"] / n["seconds"]
                                                        for o, n in zip(old, new)),
                # thread CPU time: steadier than wall time on a machine others load
                "speedup_cpu": (statistics.median(r["cpu_seconds"] for r in old)
                                / statistics.median(r["cpu_seconds"] for r in new)),
                "median_round_ratio_cpu": statistics.median(
                    o["cpu_seconds"] / n["cpu_seconds"] for o, n in zip(old, new)),
                "same_output_counts": all((o["fills"], o["l2"], o["events"])
                                          == (n["fills"], n["l2"], n["events"])
                                          for o, n in zip(old, new)),
            })
        for label, runs in timed.items():
            sec = statistics.median(r["seconds"] for r in runs)
            last = runs[-1]
            rows.append({
                "workload": name, "outputs": label,
                "messages": len(flow), "symbols": nsym,
                "msgs_per_s": len(flow) / sec, "ns_per_msg": sec * 1e9 / len(flow),
                "runs_seconds": [r["seconds"] for r in runs],
                "fills": last["fills"], "l2_rows": last["l2"], "events": last["events"],
                "peak_live_orders": last["peak_live"],
                "state_bytes": last["state_bytes"],
                "bytes_per_live_order": last["state_bytes"] / max(last["live_end"], 1),
            })
    threads = (threads_section(workloads["uniform100"][0], 100, args.batch, args.runs,
                               args.threads) if args.threads > 1 and workloads else None)
    single = single_message(uniform1[:n_single], args.runs, baseline) if n_single > 0 else []
    report = {"benchmark": "engine", "first_call_seconds": first, "batch": args.batch,
              "runs": args.runs, "machine": machine(),
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "rows": rows, "threads": threads, "single_message": single}
    if baseline is not None:
        report["baseline"] = {"rev": args.baseline, "first_call_seconds": baseline_first,
                              "versus": versus}
    print(f"first call (compile or cache load): {first:.2f} s; batch {args.batch}; "
          f"median of {args.runs} runs; {load_text()}\n")
    print("| workload | outputs | messages | M msgs/s | ns/msg | fills | L2 rows | events "
          "| peak live | bytes/live order |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['outputs']} | {r['messages']:,} | {r['msgs_per_s'] / 1e6:.2f} "
              f"| {r['ns_per_msg']:.0f} | {r['fills']:,} | {r['l2_rows']:,} | {r['events']:,} "
              f"| {r['peak_live_orders']:,} | {r['bytes_per_live_order']:.0f} |")
    if versus:
        print(f"\nnew vs baseline {args.baseline} (reused buffers, same rounds; baseline first "
              f"call {baseline_first:.2f} s)\n")
        print("| workload | speedup (ratio of medians) | median of per-round ratios "
              "| speedup, thread CPU | median of per-round ratios, CPU | same output counts |")
        print("|---|---:|---:|---:|---:|---|")
        for v in versus:
            print(f"| {v['workload']} | {v['speedup']:.2f}x | {v['median_round_ratio']:.2f}x "
                  f"| {v['speedup_cpu']:.2f}x | {v['median_round_ratio_cpu']:.2f}x "
                  f"| {'yes' if v['same_output_counts'] else 'NO'} |")
    if threads:
        print(f"\nthreads: {threads['workload']} on Engine(threads={threads['threads']}) vs "
              f"Engine(), reused buffers, median of {args.runs} interleaved rounds\n")
        print("| workload | threads | s (1 thread) | s (N threads) | speedup (ratio of medians) "
              "| median of per-round ratios | machine ceiling | byte-identical outputs |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        print(f"| {threads['workload']} | {threads['threads']} | {threads['seconds_1_thread']:.3f} "
              f"| {threads['seconds_n_threads']:.3f} | {threads['speedup']:.2f}x "
              f"| {threads['median_round_ratio']:.2f}x | {threads['ceiling']:.2f}x "
              f"| {'yes' if threads['identical_outputs'] else 'NO'} |")
        print("\nmachine ceiling: the shards' parts of the flow on as many independent one-thread "
              "engines, run at once against one after another (no split, no merge): the most "
              "any symbol-sharded engine can gain here")
    if single:
        print(f"\nsingle message: uniform1's first {n_single:,} messages one per call (submit: "
              f"its NEW ones), ns per call, median of {args.runs} interleaved rounds\n")
        # why two layouts: the speedup columns compare with --baseline; without one they
        # would print empty
        versus_cols = any("speedup_wall" in r for r in single)
        print("| call | engine | calls | ns/call (wall) | ns/call (thread CPU) |"
              + (" speedup (wall) | speedup (CPU) | same output counts |" if versus_cols else ""))
        print("|---|---|---:|---:|---:|" + ("---:|---:|---|" if versus_cols else ""))
        for r in single:
            ratio = (f" {r['speedup_wall']:.1f}x | {r['speedup_cpu']:.1f}x | "
                     f"{'yes' if r['same_output_counts'] else 'NO'} |"
                     if "speedup_wall" in r else " | | |" if versus_cols else "")
            print(f"| {r['call']} | {r['engine']} | {r['calls']:,} | {r['wall_ns']:,.0f} "
                  f"| {r['cpu_ns']:,.0f} |{ratio}")
    out = _smoke.report_path(args.out, "engine.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")
    return report


if __name__ == "__main__":
    main()
