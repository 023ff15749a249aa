"""Sealing benchmark: where a seal's time goes, stage by stage, and decode speed of what it wrote.

Workload: the seeded 1M-message flow (scenarios.generators.uniform.bench_1m, seed 7, one symbol) through
exchange.Engine in batches of 65,536 messages; every 4 batches (262,144 messages, ~940k rows of
the four tables) are sealed the way ``Session`` seals them, without the session around it:

- split:  ``codecs.split_u64`` of each table's batches into contiguous columns (uint8 fields as
          uint8, the others as uint64 bit patterns; + ``seq_u64``)
- encode: ``segment.encode_columns`` (choice, encoders, lz4, CRC32C), one Chooser per run
  (so the first seal of a run searches for encodings, as a new data directory does)
- commit: ``segment.commit_segments`` without fsync (page cache), then with fsync in a second
  directory (its wall time is mostly the disk's)

Rows/s per stage are rows of all four tables per second of that stage (thread CPU time, so other
jobs on a shared machine do not count; wall time is reported for the whole seal). "seal" is
split + encode + commit with fsync; "after first" leaves out each run's first seal. Decode: each
table's segments read back column by column (``segment.read_segment``), rows per CPU second.

Each figure is the median over ``--runs`` runs. Prints a table, writes benchmarks/results/local/seal.json
(``--out PATH`` elsewhere).
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 20,000 messages, one run, JSON outside the checkout.
Usage: python benchmarks/bench_seal.py [--runs 5] [--n 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
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
from exsim.exchange import Engine
from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow
from exsim.store.choice import Chooser
from exsim.store import codecs
from exsim.store.segment import commit_segments, encode_columns, read_segment
from exsim.store.tables import STORED_DTYPES, TABLES

BATCH = 65_536
PER_SEAL = 4          # batches per seal, as bench_store's sealing rows


def seal_groups(flow: np.ndarray) -> list:
    """The engine's output for ``flow``, as one {table: (arrays, first seqs)} per seal."""
    eng = Engine()
    eng.add_symbol("BENCH", tick_size=1)
    groups, cur = [], {t: ([], []) for t in TABLES}
    for i in range(0, flow.size, BATCH):
        batch = flow[i:i + BATCH]
        first = eng.seq + 1
        res = eng.process(batch)
        for t, a in zip(TABLES, (batch, res.fills, res.l2, res.events)):
            cur[t][0].append(a)
            cur[t][1].append(first)
        if len(cur["orders"][0]) == PER_SEAL or i + BATCH >= flow.size:
            groups.append(cur)
            cur = {t: ([], []) for t in TABLES}
    return groups


def one_run(groups: list, tmp: str) -> dict:
    """Seal every group once (fresh Chooser and directories); CPU seconds per stage and rows."""
    chooser = Chooser()
    scratch = np.empty((16, 1), np.uint64)
    d_nosync, d_sync = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
    seals = []
    for g in groups:
        st = {"split": 0.0, "encode": 0.0, "commit": 0.0, "fsync_commit_wall": 0.0}
        rows, built, wall0 = 0, [], time.perf_counter()
        for table in TABLES:
            arrays, firsts = g[table]
            total = sum(a.size for a in arrays)
            if total == 0:
                continue
            rows += total
            names = [c for c in STORED_DTYPES[table].names if not (table == "orders" and c == "seq")]
            if scratch.shape[1] < total:
                scratch = np.empty((16, total + total // 4), np.uint64)
            t = time.thread_time()
            cols = codecs.split_u64(arrays, names, scratch)
            if table == "orders":
                cols["seq"] = codecs.seq_u64(firsts, [a.size for a in arrays])
            st["split"] += time.thread_time() - t
            t = time.thread_time()
            built.append(encode_columns(d_nosync, table, 0, cols, codec="lz4", chooser=chooser))
            st["encode"] += time.thread_time() - t
        t = time.thread_time()
        commit_segments(d_nosync, built, sync=False)
        st["commit"] = time.thread_time() - t
        files = [(b.info.table, b.info.rows, os.path.join(d_nosync, b.info.path)) for b in built]
        for b in built:   # the same bytes again, durably, in another directory
            b.info.path = b.info.path.replace(".seg", "-s.seg")
        w = time.perf_counter()
        commit_segments(d_sync, built, sync=True)
        st["fsync_commit_wall"] = time.perf_counter() - w
        st["wall"] = (w - wall0) - st["commit"] + st["fsync_commit_wall"]
        st["rows"] = rows
        seals.append((st, files))
    decode = {t: [0, 0.0] for t in TABLES}
    for _, files in seals:
        for table, n, path in files:
            t = time.thread_time()
            read_segment(path)
            decode[table][0] += n
            decode[table][1] += time.thread_time() - t
    shutil.rmtree(d_nosync)
    shutil.rmtree(d_sync)
    return {"seals": [s for s, _ in seals], "decode": decode, "searches": chooser.searches}


def _rate(seals: list, keys) -> float:
    rows = sum(s["rows"] for s in seals)
    return rows / max(sum(s[k] for s in seals for k in keys), 1e-12)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=BENCH_1M["n"])
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/seal.json; the committed one: --out benchmarks/results/seal.json)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.n < 1:
        ap.error("--runs and --n must be positive")
    args.n = _smoke.scaled(args.n, 20_000)
    args.runs = _smoke.scaled(args.runs, 1)
    flow = uniform_flow(**{**BENCH_1M, "n": args.n})
    groups = seal_groups(flow)
    tmp = tempfile.mkdtemp(prefix="bench_seal_")
    load0 = os.getloadavg()[0]
    try:
        one_run(groups[:1], tmp)   # warm numba caches and the page cache
        runs = [one_run(groups, tmp) for _ in range(args.runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(f):
        return statistics.median(f(r) for r in runs)

    cpu = ("split", "encode", "commit")
    later = [r["seals"][1:] or r["seals"] for r in runs]
    result = {
        "workload": f"scenarios.generators.uniform bench_1m (n={flow.size}, seed {BENCH_1M['seed']}, 1 symbol), "
                    f"a seal every {PER_SEAL} batches of {BATCH}, median of {args.runs} runs",
        "rows_per_seal": statistics.median(s["rows"] for s in runs[0]["seals"]),
        "rows_per_cpu_s": {
            "split": med(lambda r: _rate(r["seals"], ("split",))),
            "encode_lz4_crc": med(lambda r: _rate(r["seals"], ("encode",))),
            "commit_page_cache": med(lambda r: _rate(r["seals"], ("commit",))),
            "seal_cpu": med(lambda r: _rate(r["seals"], cpu)),
            "seal_cpu_after_first": statistics.median(_rate(s, cpu) for s in later),
        },
        "seal_rows_per_s_wall_fsync": med(lambda r: _rate(r["seals"], ("wall",))),
        "seal_rows_per_s_wall_fsync_after_first": statistics.median(_rate(s, ("wall",)) for s in later),
        "fsync_commit_ms_per_seal": med(lambda r: 1e3 * statistics.median(
            s["fsync_commit_wall"] for s in r["seals"])),
        "decode_rows_per_cpu_s": {t: med(lambda r: r["decode"][t][0] / max(r["decode"][t][1], 1e-12))
                                  for t in TABLES},
        "encoding_searches_per_run": med(lambda r: r["searches"]),
        "machine": {"loadavg_1min_at_start": load0, "loadavg_1min_at_end": os.getloadavg()[0],
                    "cpu_cores": os.cpu_count()},
        "target_seal_rows_per_s": 1e7,
    }
    print(f"seal benchmark: {result['workload']}")
    m = result["machine"]
    print(f"machine: load average {m['loadavg_1min_at_start']:.1f} -> {m['loadavg_1min_at_end']:.1f} "
          f"on {m['cpu_cores']} cores; {result['rows_per_seal']:,.0f} rows per seal\n")
    print("| stage | rows/s |")
    print("|---|---:|")
    names = {"split": "split into columns (per CPU s)", "encode_lz4_crc": "encode + lz4 + CRC (per CPU s)",
             "commit_page_cache": "write files, no fsync (per CPU s)", "seal_cpu": "seal (per CPU s)",
             "seal_cpu_after_first": "seal after the first (per CPU s)"}
    for k, v in result["rows_per_cpu_s"].items():
        print(f"| {names[k]} | {v:,.0f} |")
    print(f"| seal with fsync (wall; target 10,000,000) | {result['seal_rows_per_s_wall_fsync']:,.0f} |")
    print(f"| seal with fsync after the first (wall) | "
          f"{result['seal_rows_per_s_wall_fsync_after_first']:,.0f} |")
    for t, v in result["decode_rows_per_cpu_s"].items():
        print(f"| decode {t} (per CPU s) | {v:,.0f} |")
    print(f"\nfsync'd commit of a seal's 4 segments: {result['fsync_commit_ms_per_seal']:.1f} ms (wall, median); "
          f"encoding searches per run: {result['encoding_searches_per_run']}")
    with open(_smoke.report_path(args.out, "seal.json"), "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
