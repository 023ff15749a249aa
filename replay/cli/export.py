"""``exsim export``: stored tables → CSV, Parquet or an SQLite database a user can query with SQL.

Invariants:
- Rows come from ``store.read`` in seq windows of ``CHUNK_SEQS`` messages, so memory stays bounded
  on a large run and the progress bar moves; rows are written in seq order, values unchanged
  (integer ticks, lots, ns and enum codes; the SQLite file carries the names in ``symbols`` and
  ``enums`` tables).
- The output is written under a temporary name next to PATH and renamed into place at the end: a
  failed export leaves no partial file, and an existing PATH is only replaced with ``--force``.
"""

from __future__ import annotations

import csv
import os
import sys
import tempfile

from exchange.errors import UsageError

from replay.cli.common import EXIT_OK, open_catalog, parse_range, progress, resolve_symbol, umask

__all__ = ["register", "cmd_export", "CHUNK_SEQS"]

TABLES = ("orders", "fills", "l2", "events")
CHUNK_SEQS = 1_000_000
INT64_MAX = (1 << 63) - 1

EXPORT_EXAMPLES = """\
examples:
  exsim export runs/default all --format sqlite --out default.db
  sqlite3 default.db "SELECT s.name, count(*), sum(qty) FROM deals d JOIN symbols s ON s.id = d.symbol GROUP BY 1"
  exsim export runs/default fills --format csv --out fills.csv --symbol JPM --seq 1000:5000
  exsim export runs/default orders --format parquet --out orders.parquet   # needs exsim[bench]
"""


def register(sub, parents, formatter) -> None:
    """Add the ``export`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "export", parents=parents, formatter_class=formatter, epilog=EXPORT_EXAMPLES,
        help="write a stored table as CSV, Parquet or an SQLite database",
        description="Write the rows of a stored table (orders, fills, l2, events) in seq order as "
                    "CSV, Parquet (needs\npyarrow: pip install 'exsim[bench]') or SQLite. For "
                    "SQLite, TABLE may be 'all'; the database\nalso holds 'symbols' (id, name, "
                    "tick_size), 'enums' (type, value, name) and a view 'deals'\nover 'fills'. "
                    "Values are as stored: prices in ticks, quantities in lots, times in ns.\n"
                    "--out - writes CSV to stdout.")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.add_argument("table", metavar="TABLE", choices=TABLES + ("all",),
                   help="orders, fills, l2, events, or all (sqlite only)")
    p.add_argument("--format", required=True, choices=("csv", "parquet", "sqlite"), help="output format")
    p.add_argument("--out", required=True, metavar="PATH", help="output file")
    p.add_argument("--symbol", metavar="S", help="only this symbol")
    p.add_argument("--seq", metavar="LO:HI", help="only this inclusive seq range (either end may be empty)")
    p.add_argument("--force", action="store_true", help="replace PATH if it exists")
    p.set_defaults(func=cmd_export)


def _windows(data_dir: str, seq: tuple[int, int] | None):
    """Yield inclusive seq windows covering the run (the last one open-ended, for WAL rows)."""
    cat = open_catalog(data_dir)
    try:
        segs = cat.all_segments()
        ck = cat.latest_checkpoint()
    finally:
        cat.close()
    last = max([s["seq_hi"] for s in segs] + [ck["seq"] if ck else 0])
    lo, hi = seq if seq else (0, 1 << 62)
    start = lo
    while start <= min(hi, last):
        end = min(start + CHUNK_SEQS - 1, hi)
        yield start, end
        start = end + 1
    if start <= hi:
        yield start, hi


def _chunks(args, table: str, seq):
    """Yield non-empty structured-array chunks of ``table`` in seq order."""
    from store import read

    windows = list(_windows(args.dir, seq))
    for lo, hi in progress(windows, desc=f"export {table}", unit="chunk", quiet=args.quiet):
        rows = read(args.dir, table, symbol=args.symbol, seq=(lo, hi))
        if rows.size:
            yield rows


def cmd_export(args) -> int:
    """``exsim export``: write the file; returns 0. Raises UsageError for bad options."""
    from store.tables import table_dtype

    if args.table == "all" and args.format != "sqlite":
        raise UsageError(f"TABLE 'all' needs --format sqlite (a {args.format} file holds one table)")
    if args.out == "-" and args.format != "csv":
        raise UsageError("--out - (stdout) works with --format csv only")
    seq = parse_range(args.seq, "--seq") if args.seq else None
    cat = open_catalog(args.dir)
    try:
        if args.symbol is not None:
            resolve_symbol(cat, args.symbol, args.dir)
        symbols = cat.symbols()
    finally:
        cat.close()
    if args.out != "-":
        if os.path.isdir(args.out):
            raise UsageError(f"--out {args.out}: is a directory")
        if os.path.exists(args.out) and not args.force:
            raise UsageError(f"--out {args.out}: exists (use --force to replace it)")
    if args.format == "parquet":
        _pyarrow()   # fail on the missing extra before reading anything
    tables = TABLES if args.table == "all" else (args.table,)
    if args.out == "-":
        _write_csv(sys.stdout, args, args.table, seq, table_dtype(args.table))
        return EXIT_OK
    out = os.path.abspath(args.out)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=os.path.dirname(out))
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask())   # why: mkstemp makes it private; PATH should be like open()'s
    try:
        if args.format == "csv":
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                counts = {args.table: _write_csv(f, args, args.table, seq, table_dtype(args.table))}
        elif args.format == "parquet":
            counts = {args.table: _write_parquet(tmp, args, args.table, seq, table_dtype(args.table))}
        else:
            counts = _write_sqlite(tmp, args, tables, seq, symbols)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    what = ", ".join(f"{n:,} {t}" for t, n in counts.items())
    print(f"wrote {args.out} ({args.format}): {what}")
    return EXIT_OK


def _write_csv(f, args, table, seq, dtype) -> int:
    w = csv.writer(f)
    w.writerow(dtype.names)
    n = 0
    for rows in _chunks(args, table, seq):
        w.writerows(rows.tolist())   # tuples of Python ints: exact, no float formatting
        n += rows.size
    return n


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("--format parquet needs pyarrow, which is not installed: "
                         "pip install 'exsim[bench]'") from None
    return pyarrow, pq


def _write_parquet(path, args, table, seq, dtype) -> int:
    import numpy as np

    pa, pq = _pyarrow()
    schema = pa.schema([(n, pa.from_numpy_dtype(dtype.fields[n][0])) for n in dtype.names])
    n = 0
    with pq.ParquetWriter(path, schema) as writer:
        for rows in _chunks(args, table, seq):
            writer.write_table(pa.Table.from_arrays(
                [pa.array(np.ascontiguousarray(rows[c])) for c in dtype.names], schema=schema))
            n += rows.size
    return n


def _enum_rows() -> list[dict]:
    from exchange.schema import Event, Flag, Kind, OrderType, Reason, Side, Tif

    out = []
    for name, enum in (("side", Side), ("kind", Kind), ("order_type", OrderType), ("tif", Tif),
                       ("flag", Flag), ("event", Event), ("reason", Reason)):
        out += [{"type": name, "value": int(m), "name": m.name.lower()} for m in enum]
    return out


# why these indexes: they serve the joins a user writes first (a deal to its two orders, one
# symbol's history in seq order)
_INDEXES = {
    "orders": [["symbol", "seq"], ["order_id"]],
    "fills": [["symbol", "seq"], ["buy_order_id"], ["sell_order_id"]],
    "l2": [["symbol", "seq"]],
    "events": [["symbol", "seq"], ["order_id"]],
}


def _write_sqlite(path, args, tables, seq, symbols) -> dict[str, int]:
    import json

    import numpy as np
    import sqlite_utils

    from store.tables import table_dtype

    from replay.cli.common import symbol_tick_size

    os.unlink(path)   # sqlite wants to create the file itself; the name stays reserved by us
    db = sqlite_utils.Database(path)
    # why no journal: the file is private until the final rename, so a crash cannot expose it
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    counts = {}
    try:
        db["symbols"].insert_all([{"id": s["id"], "name": s["name"], "tick_size": symbol_tick_size(s),
                                   "info": s.get("info")} for s in symbols], pk="id")
        db["enums"].insert_all(_enum_rows(), pk=("type", "value"))
        for table in tables:
            dtype = table_dtype(table)
            db[table].create({c: int for c in dtype.names})
            sql = f"INSERT INTO [{table}] VALUES ({', '.join('?' * len(dtype.names))})"
            n = 0
            for rows in _chunks(args, table, seq):
                for c in dtype.names:
                    if dtype.fields[c][0] == np.uint64 and rows.size and int(rows[c].max()) > INT64_MAX:
                        raise UsageError(f"{args.dir}: {table}.{c} holds values >= 2**63, which an "
                                         "SQLite INTEGER cannot store; export as csv or parquet")
                with db.conn:
                    db.conn.executemany(sql, rows.tolist())
                n += rows.size
            for cols in _INDEXES[table]:
                db[table].create_index(cols)
            counts[table] = n
        if "fills" in tables:
            db.create_view("deals", "SELECT * FROM fills")   # the word for fills
        db.conn.execute("PRAGMA user_version = 1")
        db["meta"].insert_all([{"key": "source", "value": os.path.abspath(args.dir)},
                               {"key": "filter", "value": json.dumps({"symbol": args.symbol, "seq": args.seq})}],
                              pk="key")
    finally:
        db.close()
    return counts
