"""Store benchmark: end-to-end journaling throughput, sealing rate, bytes per row, Binance L2 vs Parquet.

Workloads:
- Engine only: the same batches through Engine.process(out=OutputBuffers), as the session calls it.
- End to end: the seeded 1M-message flow (scenarios.generators.uniform.bench_1m, seed 7, one symbol) through
  exchange.Engine inside a store.Session, in batches of 65,536 messages, WAL fsync per batch
  (and again with durability "none"), sealing every 262,144 messages (``seal_every``: on the
  session's background seal thread) and at close (final checkpoint included). Throughput =
  messages / wall time from the first batch to close(). ``Session.process`` journals each batch
  as one multi-part record (the engine matches it in 8 slices; each slice's part is encoded on a
  thread while the next is matched); also with ``journal_parts=1`` (one whole-batch record, as
  before), with ``seal_in_background=False`` (every seal inline, as before the seal thread), and
  through ``Session.process_many`` (journaling on a writer thread with group commit, the next
  batch matched meanwhile; each Result still only after its record is durable), side by side in
  the same rounds.
- CPU seconds per 1 M messages of each end-to-end variant: the whole process (every thread) and
  the calling thread alone. On a shared machine the wall-clock rates swing with other jobs' load;
  CPU time does much less. The calling thread's CPU (plus its fsync waits) is the part that
  cannot overlap with the other threads' work: on two free cores a run takes at least
  max(calling thread, total / 2).
- Sealing rate: rows of all four tables sealed per second of ``Session.seal`` (lz4 tier), called
  synchronously every 262,144 messages in a separate fsync run (the time of those calls only).
- Bytes per row per table: sealed lz4 segments, then after compaction into zstd segments.
- Binance BTCUSDT L2: the depth snapshot + depthUpdate diffs of /work/shared/data (price ticks 0.01,
  lots 1e-5, seq = message number, ts = local receive ns, count 0: Binance gives no counts)
  written as one zstd segment and as Parquet (pyarrow, zstd) of exactly the same rows.
- WAL bytes per message: the session default, byte-shuffled lz4 records when fsynced, raw
  records under durability "none".
- Sealing rate overall (the first seal of a directory searches for encodings) and after the first.

- The ratio the issue-20 target names: end to end with fsync per batch (``process``, and the
  pipelined ``process_many``) over the engine alone, taken per round (both in the same round)
  and then the median of the rounds.
- ``--baseline REV``: the store (and everything else) as of git revision REV, extracted once to
  <tmp>/exsim-store-baseline-<sha> (its numba cache lives there: the first run compiles it
  cold), measured in a child process in every round beside this tree's variants: engine
  alone, end to end with fsync through ``process`` and ``process_many``, and their ratios
  (the baseline goes first in odd rounds, last in even ones; every timed run starts after an
  ``os.sync()``, so no run pays for the writeback of the one before).

Each measurement is the median of ``--runs`` runs (rounds interleave every variant). Prints a
table, writes benchmarks/results/local/store.json (``--out PATH`` elsewhere).
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 20,000 messages, one run, JSON outside the checkout.
Usage: python benchmarks/bench_store.py [--runs 3] [--n 1000000] [--baseline REV]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from benchmarks import _revisions, _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _revisions
    import _smoke
from exsim.exchange import Engine, OutputBuffers
from exsim.exchange.schema import L2_DTYPE, Side
from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow
from exsim.store import Catalog, Session, compact
from exsim.store.segment import write_segment

BATCH = 65_536
BINANCE = "/work/shared/data/binance_spot_btcusdt_20240808_hftbacktest/btcusdt_20240808.gz"


def _engine():
    eng = Engine()
    eng.add_symbol("BENCH", tick_size=1)
    return eng


def end_to_end(flow, durability, tmp, background=True, many=False, parts=None):
    """One end-to-end run: returns dict of throughput, CPU per 1M messages (all threads, calling
    thread), WAL and segment sizes, compaction time, WAL records per fsync group."""
    _settle()
    d = tempfile.mkdtemp(dir=tmp)
    s = Session.create(d, _engine(), run_info={"scenario": "bench_1m", "seed": BENCH_1M["seed"]},
                       durability=durability, seal_every=4 * BATCH, checkpoint_every=10**12,
                       seal_in_background=background, journal_parts=parts)
    cpu0, main0 = time.process_time(), time.thread_time()
    t0 = time.perf_counter()
    if many:   # pipelined: batch k+1 is matched while batch k is written and fsynced
        for _ in s.process_many(flow[i:i + BATCH] for i in range(0, flow.size, BATCH)):
            pass
    else:
        for i in range(0, flow.size, BATCH):
            s.process(flow[i:i + BATCH])
    wal_bytes = s.wal.bytes_written
    records, groups = s.wal_groups
    s.close()
    total = time.perf_counter() - t0
    cpu, main = time.process_time() - cpu0, time.thread_time() - main0
    cat = Catalog(d, readonly=True)
    lz4 = _bytes_per_row(cat.all_segments())
    cat.close()
    t = time.perf_counter()
    compact(d)
    compact_time = time.perf_counter() - t
    cat = Catalog(d, readonly=True)
    zstd = _bytes_per_row(cat.all_segments())
    cat.close()
    shutil.rmtree(d)
    return {"msgs_per_s": flow.size / total, "wal_bytes_per_msg": wal_bytes / flow.size,
            "cpu_s_per_1m": cpu * 1e6 / flow.size, "main_cpu_s_per_1m": main * 1e6 / flow.size,
            "records_per_fsync": records / groups if groups else 1.0,
            "compact_s": compact_time, "lz4_bytes_per_row": lz4, "zstd_bytes_per_row": zstd}


def sealing(flow, tmp):
    """Rows sealed per second of synchronous ``Session.seal`` calls every 4 batches (fsync)."""
    d = tempfile.mkdtemp(dir=tmp)
    s = Session.create(d, _engine(), durability="fsync", seal_every=10**12, checkpoint_every=10**12)
    seals = []
    for i in range(0, flow.size, BATCH):
        s.process(flow[i:i + BATCH])
        if s._pending_rows >= 4 * BATCH or i + BATCH >= flow.size:
            rows = sum(r.orders.size + r.fills.size + r.l2.size + r.events.size for r in s._pending)
            t = time.perf_counter()
            s.seal()
            seals.append((rows, time.perf_counter() - t))
    s.close()
    shutil.rmtree(d)
    later = seals[1:] or seals   # the first seal of a directory also searches for encodings
    return {"seal_rows_per_s": sum(r for r, _ in seals) / sum(t for _, t in seals),
            "seal_rows_per_s_after_first": sum(r for r, _ in later) / sum(t for _, t in later)}


def _settle() -> None:
    """Flush the writeback an earlier run left (its files, its deletions) before timing the
    next: the kernel's flushing otherwise lands inside whichever run comes next (measured: the
    engine alone 0.6x right after a baseline child's run)."""
    os.sync()


def engine_only(flow):
    """Messages per second of the bare engine over ``flow`` in batches, as the session calls it."""
    _settle()
    eng = _engine()
    out = OutputBuffers(BATCH)
    t0 = time.perf_counter()
    for i in range(0, flow.size, BATCH):
        eng.process(flow[i:i + BATCH], out=out)   # as the session calls it
    return flow.size / (time.perf_counter() - t0)


def headline_round(flow, tmp) -> dict:
    """One round of the headline variants: engine alone, end to end with fsync per batch
    through ``process`` and ``process_many``; returns their msgs/s and the ratios to the engine."""
    eng = engine_only(flow)
    fsync = end_to_end(flow, "fsync", tmp)
    many = end_to_end(flow, "fsync", tmp, many=True)
    return {"engine": eng, "fsync": fsync["msgs_per_s"], "fsync_many": many["msgs_per_s"],
            "ratio_fsync": fsync["msgs_per_s"] / eng, "ratio_fsync_many": many["msgs_per_s"] / eng,
            "cpu_fsync": fsync["cpu_s_per_1m"], "main_cpu_fsync": fsync["main_cpu_s_per_1m"]}


def baseline_tree(rev: str) -> Path:
    """Return the directory holding this repository's tree at git revision ``rev``, extracted
    once per commit to <tmp>/exsim-store-baseline-<sha> (``benchmarks._revisions``; its numba
    cache lives there). Raises SystemExit naming ``rev`` if git cannot resolve or archive it."""
    return _revisions.extract(rev, [], "exsim-store-baseline")


def baseline_round(tree: Path, n: int) -> dict:
    """``headline_round`` of the code in ``tree`` (a ``baseline_tree``), in a child process
    importing exchange, store and scenarios from there. Raises SystemExit if the child fails."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    got = subprocess.run([sys.executable, os.path.abspath(__file__), "--_round", str(n)],
                         cwd=tree, env=env, capture_output=True, text=True)
    if got.returncode != 0:
        raise SystemExit(f"--baseline: the baseline round failed:\n{got.stderr[-2000:]}")
    return json.loads(got.stdout.strip().splitlines()[-1])


def _one_round(n: int) -> int:
    """The child side of ``baseline_round``: prints one ``headline_round`` as JSON."""
    flow = uniform_flow(**{**BENCH_1M, "n": n})
    tmp = tempfile.mkdtemp(prefix="bench_store_")
    try:
        end_to_end(flow[:BATCH * 2], "fsync", tmp)   # warm numba caches and the page cache
        print(json.dumps(headline_round(flow, tmp)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _bytes_per_row(segs):
    out = {}
    for t in ("orders", "fills", "l2", "events"):
        rows = sum(s["rows"] for s in segs if s["table_name"] == t)
        out[t] = sum(s["bytes"] for s in segs if s["table_name"] == t) / max(rows, 1)
    return out


def binance_l2_rows(path=BINANCE) -> np.ndarray:
    """L2 rows of the Binance sample: the snapshot (seq 1), then each applicable diff."""
    rows, seq, snap_id = [], 0, None
    with gzip.open(path, "rt") as f:
        for line in f:
            ts, _, text = line.partition(" ")
            if '"lastUpdateId"' in text[:40] and snap_id is None:
                msg = json.loads(text)
                snap_id, bids, asks = msg["lastUpdateId"], msg["bids"], msg["asks"]
            elif '"depthUpdate"' in text and snap_id is not None:
                data = json.loads(text)["data"]
                if data["u"] <= snap_id:
                    continue
                bids, asks = data["b"], data["a"]
            else:
                continue
            seq += 1
            for side, levels in ((Side.BUY, bids), (Side.SELL, asks)):
                for p, q in levels:
                    rows.append((seq, int(ts), _ticks(p, 2), _ticks(q, 5), int(side)))
    out = np.zeros(len(rows), L2_DTYPE)
    a = np.array(rows, dtype=np.int64)
    for i, name in enumerate(("seq", "ts", "price", "qty", "side")):
        out[name] = a[:, i]
    return out


def _ticks(text: str, decimals: int) -> int:
    """Exact decimal string -> integer units of 10**-decimals (no float rounding)."""
    whole, _, frac = text.partition(".")
    frac = (frac + "0" * decimals)[:decimals]
    return int(whole) * 10 ** decimals + int(frac or 0)


def binance_sizes(rows, tmp):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tempfile.mkdtemp(dir=tmp)
    ours = write_segment(d, "l2", 0, rows, codec="zstd")
    ours_lz4 = write_segment(d, "l2", 0, rows, codec="lz4")
    table = pa.table({name: rows[name] for name in rows.dtype.names})
    pq_path = os.path.join(d, "l2.parquet")
    pq.write_table(table, pq_path, compression="zstd")
    res = {"rows": int(rows.size), "store_zstd_bytes": ours.bytes, "store_lz4_bytes": ours_lz4.bytes,
           "parquet_zstd_bytes": os.path.getsize(pq_path), "encodings": ours.encodings}
    shutil.rmtree(d)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=BENCH_1M["n"])
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/store.json; the committed one: --out benchmarks/results/store.json)")
    ap.add_argument("--baseline", metavar="REV", default=None,
                    help="also measure the headline variants of git revision REV in every round")
    ap.add_argument("--_round", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._round is not None:
        return _one_round(args._round)
    args.n = _smoke.scaled(args.n, 20_000)
    args.runs = _smoke.scaled(args.runs, 1)
    flow = uniform_flow(**{**BENCH_1M, "n": args.n})
    tree = baseline_tree(args.baseline) if args.baseline else None
    tmp = tempfile.mkdtemp(prefix="bench_store_")
    load0, cpu0, wall0 = os.getloadavg()[0], time.process_time(), time.perf_counter()
    try:
        end_to_end(flow[:BATCH * 2], "fsync", tmp)   # warm numba caches and the page cache
        # interleaved rounds: the machine's load drifts, so each round measures every variant
        heads, base_heads, seal_runs = [], [], []
        runs = {"fsync_whole": [], "none": [], "fsync_inline": [], "none_many": []}
        for k in range(args.runs):
            # why alternated: whichever of the two trees runs first in a round meets the
            # machine as the other left it
            if tree is not None and k % 2 == 0:
                base_heads.append(baseline_round(tree, args.n))
            head = {}
            head["engine"] = engine_only(flow)
            for p in ("fsync", "fsync_many"):
                r = end_to_end(flow, "fsync", tmp, many=p == "fsync_many")
                runs.setdefault(p, []).append(r)
                head[p] = r["msgs_per_s"]
                head["ratio_" + p] = r["msgs_per_s"] / head["engine"]
                if p == "fsync":
                    head["cpu_fsync"], head["main_cpu_fsync"] = r["cpu_s_per_1m"], r["main_cpu_s_per_1m"]
            heads.append(head)
            for p in ("fsync_whole", "none", "fsync_inline", "none_many"):
                runs[p].append(end_to_end(flow, p.split("_")[0], tmp, background=p != "fsync_inline",
                                          many=p.endswith("_many"),
                                          parts=1 if p == "fsync_whole" else None))
            seal_runs.append(sealing(flow, tmp))
            if tree is not None and k % 2 == 1:
                base_heads.append(baseline_round(tree, args.n))
        runs = {p: runs[p] for p in ("fsync", "fsync_whole", "none", "fsync_inline", "fsync_many",
                                     "none_many")}
        eng = statistics.median(h["engine"] for h in heads)
        rows = binance_l2_rows()
        bn = binance_sizes(rows, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(policy, key, sub=None):
        vals = [r[key] if sub is None else r[key][sub] for r in runs[policy]]
        return statistics.median(vals)

    result = {
        "workload": f"scenarios.generators.uniform bench_1m (n={flow.size}, seed {BENCH_1M['seed']}, 1 symbol), "
                    f"batches of {BATCH}, median of {args.runs} runs",
        "engine_only_msgs_per_s": eng,
        "end_to_end_fsync_msgs_per_s": med("fsync", "msgs_per_s"),
        "end_to_end_nofsync_msgs_per_s": med("none", "msgs_per_s"),
        "end_to_end_fsync_whole_records_msgs_per_s": med("fsync_whole", "msgs_per_s"),
        "end_to_end_fsync_inline_seal_msgs_per_s": med("fsync_inline", "msgs_per_s"),
        "end_to_end_fsync_process_many_msgs_per_s": med("fsync_many", "msgs_per_s"),
        "end_to_end_nofsync_process_many_msgs_per_s": med("none_many", "msgs_per_s"),
        # the issue-20 target: per round, end to end with fsync / engine alone, then the median
        "ratio_fsync_to_engine": statistics.median(h["ratio_fsync"] for h in heads),
        "ratio_fsync_many_to_engine": statistics.median(h["ratio_fsync_many"] for h in heads),
        "rounds": heads,
        "cpu_s_per_1m_msgs": {p: med(p, "cpu_s_per_1m") for p in runs},
        "calling_thread_cpu_s_per_1m_msgs": {p: med(p, "main_cpu_s_per_1m") for p in runs},
        "process_many_records_per_fsync": med("fsync_many", "records_per_fsync"),
        "seal_rows_per_s": statistics.median(r["seal_rows_per_s"] for r in seal_runs),
        "seal_rows_per_s_after_first": statistics.median(r["seal_rows_per_s_after_first"] for r in seal_runs),
        "wal_bytes_per_msg": med("fsync", "wal_bytes_per_msg"),
        "wal_bytes_per_msg_nofsync": med("none", "wal_bytes_per_msg"),
        "compaction_s": med("fsync", "compact_s"),
        "bytes_per_row_lz4": {t: med("fsync", "lz4_bytes_per_row", t) for t in runs["fsync"][0]["lz4_bytes_per_row"]},
        "bytes_per_row_zstd": {t: med("fsync", "zstd_bytes_per_row", t) for t in runs["fsync"][0]["zstd_bytes_per_row"]},
        "binance_l2": {**bn, "store_zstd_bytes_per_row": bn["store_zstd_bytes"] / bn["rows"],
                       "store_lz4_bytes_per_row": bn["store_lz4_bytes"] / bn["rows"],
                       "parquet_zstd_bytes_per_row": bn["parquet_zstd_bytes"] / bn["rows"],
                       "ratio_to_parquet": bn["store_zstd_bytes"] / bn["parquet_zstd_bytes"]},
        # why: on a shared machine the absolute figures swing 1.5-4x with other jobs' load;
        # a CPU share well below 1 core means the figures above are bounded by it
        "machine": {"loadavg_1min_at_start": load0, "loadavg_1min_at_end": os.getloadavg()[0],
                    "cpu_cores": os.cpu_count(),
                    "process_cpu_share": (time.process_time() - cpu0) / (time.perf_counter() - wall0)},
        "targets": {"end_to_end_fsync_msgs_per_s": 2e6, "seal_rows_per_s": 1e7,
                    "binance_l2_bytes_per_row": 3.0, "binance_ratio_to_parquet": 0.8,
                    "ratio_fsync_to_engine": 0.5},
    }
    if tree is not None:
        result["baseline"] = {
            "rev": args.baseline, "rounds": base_heads,
            **{k: statistics.median(h[k] for h in base_heads)
               for k in ("engine", "fsync", "fsync_many", "ratio_fsync", "ratio_fsync_many",
                         "cpu_fsync", "main_cpu_fsync")}}
    print(f"store benchmark: {result['workload']}")
    m = result["machine"]
    print(f"machine: load average {m['loadavg_1min_at_start']:.1f} -> {m['loadavg_1min_at_end']:.1f} on "
          f"{m['cpu_cores']} cores; this process got {m['process_cpu_share']:.2f} cores on average")
    print(f"{'measure':44s} {'value':>14s} {'target':>10s}")
    line = "{:44s} {:>14s} {:>10s}"
    print(line.format("engine only (msgs/s)", f"{eng:,.0f}", ""))
    print(line.format("engine + WAL fsync/batch + seal (msgs/s)", f"{result['end_to_end_fsync_msgs_per_s']:,.0f}", "2,000,000"))
    print(line.format("engine + WAL no fsync + seal (msgs/s)", f"{result['end_to_end_nofsync_msgs_per_s']:,.0f}", ""))
    print(line.format("  fsync, whole-batch records (msgs/s)", f"{result['end_to_end_fsync_whole_records_msgs_per_s']:,.0f}", ""))
    print(line.format("  same, fsync, seals inline (msgs/s)", f"{result['end_to_end_fsync_inline_seal_msgs_per_s']:,.0f}", ""))
    print(line.format("  fsync, process_many (pipelined) (msgs/s)", f"{result['end_to_end_fsync_process_many_msgs_per_s']:,.0f}", "2,000,000"))
    print(line.format("  no fsync, process_many (msgs/s)", f"{result['end_to_end_nofsync_process_many_msgs_per_s']:,.0f}", ""))
    print(line.format("  process_many WAL records per fsync", f"{result['process_many_records_per_fsync']:.2f}", ""))
    print(line.format("end to end fsync / engine, process", f"{result['ratio_fsync_to_engine']:.3f}", "0.5"))
    print(line.format("end to end fsync / engine, process_many", f"{result['ratio_fsync_many_to_engine']:.3f}", "0.5"))
    if tree is not None:
        b = result["baseline"]
        print(f"baseline {args.baseline} in the same rounds (medians; this tree / baseline):")
        for k, label in (("engine", "engine only (msgs/s)"), ("fsync", "end to end fsync, process (msgs/s)"),
                         ("fsync_many", "end to end fsync, process_many (msgs/s)")):
            mine = statistics.median(h[k] for h in heads)
            print(line.format(f"  {label}", f"{b[k]:,.0f}", f"{mine / b[k]:.2f}x"))
        print(line.format("  ratio to engine, process / process_many",
                          f"{b['ratio_fsync']:.3f} / {b['ratio_fsync_many']:.3f}", ""))
        for k, label in (("cpu_fsync", "CPU s/1M msgs, process fsync, all threads"),
                         ("main_cpu_fsync", "  same, calling thread")):
            mine = statistics.median(h[k] for h in heads)
            print(line.format(f"  {label}", f"{b[k]:.3f}", f"{mine / b[k]:.2f}x"))
    for p in runs:
        print(line.format(f"  CPU s/1M msgs, all / caller: {p}",
                          f"{result['cpu_s_per_1m_msgs'][p]:.3f} / {result['calling_thread_cpu_s_per_1m_msgs'][p]:.3f}", ""))
    print(line.format("sealing (rows/s)", f"{result['seal_rows_per_s']:,.0f}", "10,000,000"))
    print(line.format("sealing after the first seal (rows/s)", f"{result['seal_rows_per_s_after_first']:,.0f}", ""))
    print(line.format("WAL bytes / message (fsync: shuffled lz4)", f"{result['wal_bytes_per_msg']:.1f}", ""))
    print(line.format("WAL bytes / message (no fsync: raw)", f"{result['wal_bytes_per_msg_nofsync']:.1f}", ""))
    for t in result["bytes_per_row_lz4"]:
        print(line.format(f"{t} bytes/row (lz4 sealed / zstd merged)",
                          f"{result['bytes_per_row_lz4'][t]:.2f} / {result['bytes_per_row_zstd'][t]:.2f}", ""))
    b = result["binance_l2"]
    print(line.format(f"Binance L2 ({b['rows']:,} rows) store zstd bytes/row", f"{b['store_zstd_bytes_per_row']:.3f}", "3.0"))
    print(line.format("Binance L2 store lz4 bytes/row", f"{b['store_lz4_bytes_per_row']:.3f}", ""))
    print(line.format("Binance L2 Parquet zstd bytes/row", f"{b['parquet_zstd_bytes_per_row']:.3f}", ""))
    print(line.format("Binance L2 store / Parquet", f"{b['ratio_to_parquet']:.3f}", "0.8"))
    with open(_smoke.report_path(args.out, "store.json"), "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
