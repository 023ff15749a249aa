"""Read benchmark: windowed reads of L2 rows on exsim, DuckDB and Parquet side by side, and ingest.

Rows: the L2 updates of the seeded 1M-message flow (scenarios.generators.uniform bench_1m, seed
7, one symbol: 1,002,245 rows), journaled by ``store.Session`` (durability "none") and
compacted, so they sit in one zstd segment as the issue measured them. The same rows, in seq
order, go into a DuckDB table in a database file (embedded, ``CREATE TABLE AS`` from an Arrow
table) and into a Parquet file (pyarrow, zstd, 65,536-row groups, statistics on).

Queries, each over the same ``--windows`` random windows (seed 1) and timed one by one, the
figure being the median over windows, then the median over ``--runs`` runs:
- ts window: 4,000 consecutive rows drawn at random, asked for by their first and last ts
  (rows sharing those timestamps come too, for every engine alike); every L2 column.
  exsim: ``store.read(reader, "l2", ts=w)`` through one ``store.Reader`` (its catalog snapshot,
  open file and zone maps kept between calls); for information also plain
  ``store.read(data_dir, ...)``, which opens the catalog and the segment on every call, and
  ``read_columns`` (arrays per column, as DuckDB's ``fetchnumpy`` gives).
  DuckDB: ``SELECT * FROM l2 WHERE ts BETWEEN ? AND ?`` fetched as numpy arrays.
  Parquet: ``pyarrow.parquet.read_table(path, filters=[ts >= lo, ts <= hi])``, then to numpy.
- seq window: the same 4,000 rows by their seq range, the same three ways.
- one column: ``price`` of the seq window (column pushdown).
- Ingest: rows per second writing the 1,002,245 rows durably (fsync) from arrays in memory:
  exsim ``write_segment`` as a seal writes it (lz4) and as compaction does (zstd), DuckDB
  (``CREATE TABLE AS`` into a new database file, then ``CHECKPOINT`` and close), Parquet
  (``write_table``, zstd, then fsync); each file's bytes per row alongside.

Prints a table and writes benchmarks/results/local/read.json (``--out PATH`` elsewhere).
Usage: python benchmarks/bench_read.py [--runs 3] [--windows 200] [--n 1000000]
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 20,000 messages, one run, JSON outside the checkout.
Needs the ``bench`` extra (duckdb, pyarrow).
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
from exsim.store import Reader, Session, compact, read, read_columns
from exsim.store.segment import write_segment
from exsim.store.tables import STORED_DTYPES

BATCH = 65_536
WINDOW_ROWS = 4_000
ROW_GROUP = 65_536
TARGETS = {"ts_window_ms": "<= duckdb", "ingest_rows_per_s": "> duckdb and parquet"}


def _engine() -> Engine:
    eng = Engine()
    eng.add_symbol("BENCH", tick_size=1)
    return eng


def build_store(d: str, n: int) -> np.ndarray:
    """Journal the seeded flow into ``d``, compact it; return its L2 rows (stored dtype)."""
    params = {k: v for k, v in BENCH_1M.items() if k not in ("n", "seed")}
    flow = uniform_flow(n, BENCH_1M["seed"], **params)
    s = Session.create(d, _engine(), durability="none", seal_every=4 * BATCH,
                       checkpoint_every=10**12)
    for i in range(0, flow.size, BATCH):
        s.process(flow[i:i + BATCH])
    s.close()
    compact(d)
    return read(d, "l2")


def _arrow(rows: np.ndarray):
    import pyarrow as pa

    return pa.table({c: rows[c] for c in rows.dtype.names})


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ingest(rows: np.ndarray, tmp: str) -> dict:
    """Rows per second and bytes per row of writing ``rows`` durably into each store."""
    import duckdb
    import pyarrow.parquet as pq

    out = {}
    for codec in ("lz4", "zstd"):
        d = tempfile.mkdtemp(dir=tmp)
        t = time.perf_counter()
        info = write_segment(d, "l2", 0, rows, codec=codec)
        out[f"exsim_{codec}"] = (rows.size / (time.perf_counter() - t), info.bytes / rows.size)
        shutil.rmtree(d)
    table = _arrow(rows)
    path = os.path.join(tmp, "ingest.duckdb")
    t = time.perf_counter()
    con = duckdb.connect(path)
    con.register("src", table)
    con.execute("CREATE TABLE l2 AS SELECT * FROM src")
    con.execute("CHECKPOINT")
    con.close()
    out["duckdb"] = (rows.size / (time.perf_counter() - t), os.path.getsize(path) / rows.size)
    os.remove(path)
    path = os.path.join(tmp, "ingest.parquet")
    t = time.perf_counter()
    pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP)
    _fsync(path)
    out["parquet"] = (rows.size / (time.perf_counter() - t), os.path.getsize(path) / rows.size)
    os.remove(path)
    return out


def windows(rows: np.ndarray, k: int, seed: int = 1) -> list:
    """``k`` random windows of WINDOW_ROWS consecutive rows: [((ts lo, ts hi), (seq lo, seq hi))]."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, max(rows.size - WINDOW_ROWS, 1), k)
    end = lambda i: min(i + WINDOW_ROWS, rows.size) - 1   # noqa: E731
    return [((int(rows["ts"][i]), int(rows["ts"][end(i)])),
             (int(rows["seq"][i]), int(rows["seq"][end(i)]))) for i in starts]


def _median_ms(fn, args) -> tuple[float, int]:
    times, n = [], 0
    for a in args:
        t = time.perf_counter()
        got = fn(a)
        times.append(time.perf_counter() - t)
        n += got
    return statistics.median(times) * 1e3, n


def reads(d: str, db: str, pq_path: str, wins: list) -> dict:
    """Median ms per query of each engine on ``wins`` (and the rows each returned, to check
    they agree)."""
    import duckdb
    import pyarrow.parquet as pq

    ts_w, seq_w = [w[0] for w in wins], [w[1] for w in wins]
    con = duckdb.connect(db, read_only=True)
    reader = Reader(d)
    q_all = "SELECT * FROM l2 WHERE {} BETWEEN ? AND ?"
    out = {}
    try:
        for name, col, ws in (("ts_window", "ts", ts_w), ("seq_window", "seq", seq_w)):
            out[f"{name}:exsim"] = _median_ms(
                lambda w: read(reader, "l2", **{col: w}).size, ws)
            out[f"{name}:exsim_columns"] = _median_ms(
                lambda w: read_columns(reader, "l2", **{col: w})["seq"].size, ws)
            out[f"{name}:exsim_plain_read"] = _median_ms(
                lambda w: read(d, "l2", **{col: w}).size, ws)
            out[f"{name}:duckdb"] = _median_ms(
                lambda w: con.execute(q_all.format(col), list(w)).fetchnumpy()["seq"].size, ws)
            out[f"{name}:parquet"] = _median_ms(
                lambda w: _pq_rows(pq, pq_path, None, col, w), ws)
        out["one_column:exsim"] = _median_ms(
            lambda w: read_columns(reader, "l2", seq=w, columns=["price"])["price"].size, seq_w)
        out["one_column:duckdb"] = _median_ms(
            lambda w: con.execute("SELECT price FROM l2 WHERE seq BETWEEN ? AND ?",
                                  list(w)).fetchnumpy()["price"].size, seq_w)
        out["one_column:parquet"] = _median_ms(
            lambda w: _pq_rows(pq, pq_path, ["price"], "seq", w), seq_w)
    finally:
        reader.close()
        con.close()
    return out


def _pq_rows(pq, path, columns, col, w) -> int:
    t = pq.read_table(path, columns=columns, filters=[(col, ">=", w[0]), (col, "<=", w[1])])
    arrays = {c: t.column(c).to_numpy() for c in t.column_names}   # as the others: numpy
    return arrays[t.column_names[0]].size


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="messages of the seeded flow")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--windows", type=int, default=200)
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/"
                    "read.json; the committed one: --out benchmarks/results/read.json)")
    args = ap.parse_args(argv)
    args.n = _smoke.scaled(args.n, 20_000)
    args.runs = _smoke.scaled(args.runs, 1)
    args.windows = _smoke.scaled(args.windows, 20)
    import duckdb
    import pyarrow.parquet as pq

    tmp = tempfile.mkdtemp(prefix="exsim-bench-read-")
    try:
        d = os.path.join(tmp, "run")
        rows = build_store(d, args.n)
        db, pq_path = os.path.join(tmp, "l2.duckdb"), os.path.join(tmp, "l2.parquet")
        con = duckdb.connect(db)
        con.register("src", _arrow(rows))
        con.execute("CREATE TABLE l2 AS SELECT * FROM src")
        con.close()
        pq.write_table(_arrow(rows), pq_path, compression="zstd", row_group_size=ROW_GROUP)
        wins = windows(rows, args.windows)
        runs_r, runs_i = [], []
        for _ in range(args.runs):
            runs_r.append(reads(d, db, pq_path, wins))
            runs_i.append(ingest(rows, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {"rows": int(rows.size), "windows": args.windows, "runs": args.runs,
           "window_rows": WINDOW_ROWS, "load_avg": os.getloadavg()[0]}
    for k in runs_r[0]:
        res[f"{k}:ms"] = statistics.median(r[k][0] for r in runs_r)
        counts = {r[k][1] for r in runs_r}
        res[f"{k}:rows_returned"] = counts.pop() if len(counts) == 1 else sorted(counts)
    for k in runs_i[0]:
        res[f"ingest:{k}:rows_per_s"] = statistics.median(r[k][0] for r in runs_i)
        res[f"ingest:{k}:bytes_per_row"] = runs_i[0][k][1]
    print(f"{rows.size:,} L2 rows of bench_1m ({args.n:,} messages); {args.windows} windows of "
          f"{WINDOW_ROWS:,} rows; median of {args.runs} runs; load {res['load_avg']:.2f}")
    print(f"{'query (ms, median)':<22}{'exsim':>9}{'exsim cols':>11}{'plain read':>11}"
          f"{'duckdb':>9}{'parquet':>9}")
    for q in ("ts_window", "seq_window", "one_column"):
        cell = lambda e: (f"{res[f'{q}:{e}:ms']:.3f}" if f"{q}:{e}:ms" in res else "-")  # noqa: E731
        print(f"{q:<22}{cell('exsim'):>9}{cell('exsim_columns'):>11}{cell('exsim_plain_read'):>11}"
              f"{cell('duckdb'):>9}{cell('parquet'):>9}")
    print(f"{'ingest':<22}{'rows/s':>14}{'bytes/row':>11}")
    for k in runs_i[0]:
        print(f"{k:<22}{res[f'ingest:{k}:rows_per_s']:>14,.0f}"
              f"{res[f'ingest:{k}:bytes_per_row']:>11.2f}")
    path = _smoke.report_path(args.out, "read.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
