"""Replay benchmark: book_at latency, verify throughput, rerun rate against the engine's own.

Workload: ``scenarios.generators.uniform.uniform_flow(n, seed=7)`` (the bench_1m law: 60% passive limits,
30% cancels, 10% crossing limits, one symbol), journaled by ``store.Session`` with durability
"none" in batches of 65,536, a checkpoint every ``--checkpoint-every`` messages and sealing every
``--seal-every`` messages (so L2 segments hold that many messages' rows).

- book_at: 1,000 seqs drawn uniformly from the run (seed 1), L2 view, depth 10, through one
  ``store.Reader`` (its catalog snapshot, open segment files, zone maps, run bounds and
  checkpoint list kept between calls; each call decodes only the L2 blocks between the nearest
  checkpoint and its seq); p50 / p99. The first pass restores every checkpoint it touches
  (reported as "cold"); the figure is the median of the later passes, where book_at's
  per-process cache holds each checkpoint's depth. For information: the same seqs with the
  data directory's path (each call opens the catalog, reads the run's bounds and opens the
  segments again), and the L3 view on 100 of those seqs (no target).
- verify: ``replay.verify(data_dir, threads=--threads)`` end to end (store reads included; the
  seq blocks between checkpoints checked on that many threads, default the cores, see
  ``replay.verification.split``); fills and messages per second, the checking kernel's own rates
  (its time spent checking summed over threads, reads excluded), and its msgs/s against the
  engine's (the target). For information: verify on one thread (``threads=1``: one block,
  reads overlapped with the checking on a worker thread, as before blocks) and the CPU
  seconds of both.
- rerun: ``replay.rerun(data_dir)`` (its default: outputs and the last checkpoint compared;
  outputs by digest on a run sealed with row digests, row by row on an older one: the mode is
  printed) messages per second, against a fresh Engine processing the same orders from memory
  in 1M chunks (rerun's ranges: 1,048,576 after a short ramp) with reused output buffers, as
  the session and rerun do; the ratio is the target. For information: rerun with
  ``checkpoints="none"`` (outputs only: what the final checkpoint check costs), rerun with
  ``compare="rows"`` (the row-by-row comparison the digests replace), and CPU seconds of the
  engine and of rerun (both threads): on a shared machine the wall ratio moves with the load,
  the CPU ratio much less. Engine, verify and the three reruns alternate within each round,
  in an order shuffled per round (a fixed seed): a step can run slower right after another.

Each figure is the median of ``--runs`` runs. Prints a table and writes
benchmarks/results/local/replay.json (or ``--out PATH``). The default is a 2M-message run (a few
minutes on 2 cores, compiles included); the issue's size is ``--messages 10000000``. Usage:
    python benchmarks/bench_replay.py [--messages 2000000] [--runs 3] [--data-dir DIR] [--out PATH]
        [--threads N] [--rerun-only | --book-at-only]
(``--data-dir`` keeps the stored run there and reuses it when it already holds one; a run
sealed before row digests then reruns row by row.)
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 20,000 messages, one run, the stored run and the JSON
outside the checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke
from exsim.exchange import Engine, OutputBuffers
from exsim.replay import book_at, rerun, verify
from exsim.replay.rundir import run_info, strip_seq
from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow
from exsim.store import Reader, Session, read

BATCH = 65_536
STEP_ORDER_SEED = 20   # bench_verify_rerun: each round shuffles its steps with this seed + round
TARGETS = {"book_at_p50_ms": 2.0, "book_at_p99_ms": 10.0, "verify_fills_per_s": 5e6,
           "verify_vs_engine": 0.5, "rerun_vs_engine": 0.8}


def _engine() -> Engine:
    eng = Engine()
    eng.add_symbol("BENCH", tick_size=1)
    return eng


def _flow(n: int) -> np.ndarray:
    params = {k: v for k, v in BENCH_1M.items() if k not in ("n", "seed")}
    return uniform_flow(n, 7, **params)


def build(data_dir: str, n: int, checkpoint_every: int, seal_every: int) -> float:
    """Journal the flow into ``data_dir``; return the seconds it took."""
    flow = _flow(n)
    t0 = time.perf_counter()
    with Session.create(data_dir, _engine(), run_info={"scenario": "bench_replay", "seed": 7},
                        durability="none", checkpoint_every=checkpoint_every,
                        seal_every=seal_every) as s:
        for i in range(0, n, BATCH):
            s.process(flow[i:i + BATCH])
    return time.perf_counter() - t0


def _latencies(source, seqs, **kw) -> list:
    lat = []
    for s in seqs:
        t0 = time.perf_counter()
        book_at(source, "BENCH", seq=int(s), **kw)
        lat.append(time.perf_counter() - t0)
    return lat


def bench_book_at(data_dir: str, runs: int, with_l3: bool = True) -> dict:
    info = run_info(data_dir)
    seqs = np.random.default_rng(1).integers(info.first_seq, info.last_seq + 1, 1000)
    book_at(data_dir, "BENCH", seq=int(seqs[0]))            # compile / warm the caches
    if with_l3:
        book_at(data_dir, "BENCH", seq=int(seqs[0]), l3=True)
    p50s, p99s, path50s, path99s = [], [], [], []
    with Reader(data_dir) as reader:
        for _ in range(max(runs, 2)):
            lat = _latencies(reader, seqs, depth=10)
            p50s.append(np.percentile(lat, 50) * 1e3)
            p99s.append(np.percentile(lat, 99) * 1e3)
        l3 = _latencies(reader, seqs[:100], depth=10, l3=True) if with_l3 else None
    for _ in range(max(runs, 2) - 1):   # checkpoint depths cached already: all passes warm
        lat = _latencies(data_dir, seqs, depth=10)
        path50s.append(np.percentile(lat, 50) * 1e3)
        path99s.append(np.percentile(lat, 99) * 1e3)
    # run 1 restores each checkpoint once (cold); later runs find its depth in book_at's cache
    out = {"book_at_p50_ms": statistics.median(p50s[1:]),
            "book_at_p99_ms": statistics.median(p99s[1:]),
            "book_at_cold_p50_ms": p50s[0], "book_at_cold_p99_ms": p99s[0],
            "book_at_path_p50_ms": statistics.median(path50s),
            "book_at_path_p99_ms": statistics.median(path99s)}
    if l3 is not None:
        out["book_at_l3_p50_ms"] = float(np.percentile(l3, 50) * 1e3)
        out["book_at_l3_p99_ms"] = float(np.percentile(l3, 99) * 1e3)
    return out


def bench_verify_rerun(data_dir: str, runs: int, chunk: int = 1_000_000,
                       with_verify: bool = True, threads: int | None = None) -> dict:
    """Engine from memory, verify on ``threads`` threads and on one (unless not
    ``with_verify``), rerun, rerun without its checkpoint check and rerun row by row,
    alternating within each round, in an order shuffled per round by a fixed seed, after one
    untimed call of each (when ``runs`` > 1); medians of wall and CPU seconds. Why shuffled: a
    step can run slower after another (an engine run right after verify's large frees was
    measured at up to 2x its time after the others), and rotating one order keeps every step
    behind the same one in every round."""
    info = run_info(data_dir)
    orders = strip_seq(read(data_dir, "orders"))
    n = orders.size
    wall = {k: [] for k in ("engine", "verify", "verify_1", "rerun", "rerun_none", "rerun_rows")}
    cpu = {k: [] for k in wall}
    kernel_s, report, modes, splits = [], None, set(), []

    def engine():
        eng = _engine()
        out = OutputBuffers(chunk)
        t0 = time.perf_counter()
        for i in range(0, n, chunk):
            eng.process(orders[i:i + chunk], out=out)
        return time.perf_counter() - t0

    def run_verify(n=threads):
        nonlocal report
        rep = verify(data_dir, threads=n)
        if not rep.ok:
            raise SystemExit(f"verify failed on a clean run: {rep.violations[:3]}")
        if n != 1:
            report = rep
            kernel_s.append(rep.summary["kernel_seconds"])
            splits.append(rep.split)
        return rep.summary["seconds"]

    def run_rerun(checkpoints, compare="auto"):
        rr = rerun(data_dir, chunk=chunk, checkpoints=checkpoints, compare=compare)
        if not rr.ok:
            raise SystemExit(f"rerun diverged on a clean run: {rr.first_divergence}")
        if compare == "auto":
            modes.add(rr.mode)
        return rr.seconds

    steps = {"engine": engine, "verify": run_verify, "verify_1": lambda: run_verify(1),
             "rerun": lambda: run_rerun("last"),
             "rerun_none": lambda: run_rerun("none"),
             "rerun_rows": lambda: run_rerun("last", "rows")}
    if not with_verify:
        for k in ("verify", "verify_1"):
            del steps[k], wall[k], cpu[k]
    names = list(steps)
    if runs > 1:    # one untimed call of each step first: no median holds a kernel cache load
        for name in names:
            steps[name]()
        kernel_s.clear()
        splits.clear()
    for r in range(runs):
        order = list(names)
        random.Random(STEP_ORDER_SEED + r).shuffle(order)
        for name in order:
            c0 = time.process_time()
            wall[name].append(steps[name]())
            cpu[name].append(time.process_time() - c0)
    del orders
    med = {k: statistics.median(v) for k, v in wall.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    eng_rate = n / med["engine"]
    rerun_msgs = info.last_seq - info.first_seq
    rr_rate, rn_rate = rerun_msgs / med["rerun"], rerun_msgs / med["rerun_none"]
    rows_rate = rerun_msgs / med["rerun_rows"]
    out = {"engine_msgs_per_s": eng_rate, "rerun_msgs_per_s": rr_rate,
           "rerun_vs_engine": rr_rate / eng_rate,
           "rerun_no_checkpoint_msgs_per_s": rn_rate,
           "rerun_no_checkpoint_vs_engine": rn_rate / eng_rate,
           "rerun_mode": "/".join(sorted(modes)),
           "rerun_rows_msgs_per_s": rows_rate, "rerun_rows_vs_engine": rows_rate / eng_rate,
           "rerun_vs_rerun_rows": rr_rate / rows_rate,
           "engine_cpu_s": cpu_med["engine"], "rerun_cpu_s": cpu_med["rerun"],
           "rerun_cpu_vs_engine_cpu": cpu_med["rerun"] / cpu_med["engine"],
           "wall_s": med, "cpu_s": cpu_med}
    if with_verify:
        fills, msgs = report.summary["fills"], report.summary["orders"]
        v_rate = msgs / med["verify"]
        out.update({"verify_fills": fills, "verify_s": med["verify"],
                    "verify_fills_per_s": fills / med["verify"],
                    "verify_kernel_fills_per_s": fills / statistics.median(kernel_s),
                    "verify_msgs_per_s": v_rate,
                    "verify_kernel_msgs_per_s": msgs / statistics.median(kernel_s),
                    "verify_vs_engine": v_rate / eng_rate,
                    "verify_1_thread_vs_engine": msgs / med["verify_1"] / eng_rate,
                    "verify_vs_verify_1_thread": med["verify_1"] / med["verify"],
                    "verify_cpu_s": cpu_med["verify"], "verify_1_thread_cpu_s": cpu_med["verify_1"],
                    "verify_split": splits[-1]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--checkpoint-every", type=int, default=100_000)
    ap.add_argument("--seal-every", type=int, default=100_000)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/replay.json; the committed one: --out benchmarks/results/replay.json)")
    ap.add_argument("--threads", type=int, default=None,
                    help="verify's threads (default: verify's own, the cores less one, 1 to 8)")
    ap.add_argument("--rerun-only", action="store_true",
                    help="time only the engine and the reruns (no book_at, no verify)")
    ap.add_argument("--book-at-only", action="store_true",
                    help="time only book_at's L2 view (no L3 view, verify or reruns)")
    args = ap.parse_args(argv)
    args.messages = _smoke.scaled(args.messages, 20_000)
    args.runs = _smoke.scaled(args.runs, 1)
    args.checkpoint_every = _smoke.scaled(args.checkpoint_every, 5_000)
    args.seal_every = _smoke.scaled(args.seal_every, 5_000)
    if _smoke.enabled() and args.data_dir:   # never reuse (or fill) a real run with smoke sizes
        args.data_dir = str(_smoke.results_path("replay-run"))
    tmp = None
    data_dir = args.data_dir
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="bench_replay_")
        data_dir = os.path.join(tmp, "run")
    results = {"workload": (f"uniform_flow(n={args.messages}, seed 7, bench_1m law, 1 symbol), "
                            f"Session durability none, batches of {BATCH}, checkpoint every "
                            f"{args.checkpoint_every}, seal every {args.seal_every}; median of "
                            f"{args.runs} runs"),
               "messages": args.messages}
    try:
        if os.path.exists(os.path.join(data_dir, "catalog.sqlite")):
            results["build_s"] = None
        else:
            results["build_s"] = build(data_dir, args.messages, args.checkpoint_every,
                                       args.seal_every)
        info = run_info(data_dir)
        results["messages"] = info.last_seq - info.first_seq   # a reused --data-dir may differ
        if not args.rerun_only:
            results.update(bench_book_at(data_dir, args.runs, with_l3=not args.book_at_only))
        results["load_average_before"] = os.getloadavg()[0]
        if not args.book_at_only:
            results.update(bench_verify_rerun(data_dir, args.runs,
                                              with_verify=not args.rerun_only,
                                              threads=args.threads))
        results["load_average_after"] = os.getloadavg()[0]
        results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    results["targets"] = TARGETS
    rows = [("book_at L2 p50 (ms)", "book_at_p50_ms", "<="), ("book_at L2 p99 (ms)", "book_at_p99_ms", "<="),
            ("book_at L2 cold p50 (ms)", "book_at_cold_p50_ms", None),
            ("book_at L2 cold p99 (ms)", "book_at_cold_p99_ms", None),
            ("book_at L2 p50, by path (ms)", "book_at_path_p50_ms", None),
            ("book_at L2 p99, by path (ms)", "book_at_path_p99_ms", None),
            ("book_at L3 p50 (ms)", "book_at_l3_p50_ms", None), ("book_at L3 p99 (ms)", "book_at_l3_p99_ms", None),
            ("verify fills/s (end to end)", "verify_fills_per_s", ">="),
            ("verify fills/s (kernel)", "verify_kernel_fills_per_s", None),
            ("verify msgs/s (end to end)", "verify_msgs_per_s", None),
            ("verify msgs/s (kernel)", "verify_kernel_msgs_per_s", None),
            ("verify / engine (msgs/s)", "verify_vs_engine", ">="),
            ("verify, 1 thread / engine (msgs/s)", "verify_1_thread_vs_engine", None),
            ("verify / verify on 1 thread (speed)", "verify_vs_verify_1_thread", None),
            ("verify CPU s", "verify_cpu_s", None),
            ("verify, 1 thread, CPU s", "verify_1_thread_cpu_s", None),
            ("engine msgs/s (from memory)", "engine_msgs_per_s", None),
            ("rerun msgs/s", "rerun_msgs_per_s", None), ("rerun / engine", "rerun_vs_engine", ">="),
            ("rerun, no checkpoint check / engine", "rerun_no_checkpoint_vs_engine", None),
            ("rerun row by row / engine", "rerun_rows_vs_engine", None),
            ("rerun / rerun row by row", "rerun_vs_rerun_rows", None),
            ("rerun CPU s / engine CPU s", "rerun_cpu_vs_engine_cpu", None)]
    print(results["workload"])
    print(f"load average {results['load_average_before']:.1f} before, "
          f"{results['load_average_after']:.1f} after; peak RSS {results['peak_rss_mib']:.0f} MiB; "
          f"rerun compared the outputs by {results.get('rerun_mode', '-')}")
    if "verify_split" in results:
        print(f"verify split: {results['verify_split']}")
    print(f"{'measure':36s} {'value':>14s} {'target':>10s}  ok")
    for label, key, cmp in rows:
        if key not in results:   # --rerun-only
            continue
        v, t = results[key], TARGETS.get(key)
        ok = "" if t is None else ("yes" if (v <= t if cmp == "<=" else v >= t) else "NO")
        print(f"{label:36s} {v:14,.3f} {'' if t is None else f'{cmp} {t:g}':>10s}  {ok}")
    with open(_smoke.report_path(args.out, "replay.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
