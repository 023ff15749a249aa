"""``exsim export``: stored tables → CSV, Parquet or an SQLite database a user can query with SQL.

A layer over ``replay.export`` (the writers, chunked reads, the file built aside and renamed).

Invariants: every option is checked (the catalog opened and checked, the symbol resolved, PATH
tested) before anything is read or written; an existing PATH is only replaced with ``--force``.
"""

from __future__ import annotations

import os
import sys

from exsim.exchange.errors import UsageError

from exsim.replay.cli.common import (EXIT_OK, need_pyarrow, open_catalog, out_failed, parse_range, step,
                               parse_ts_range, resolve_symbol)
from exsim.replay.export import FORMATS, TABLES, export, write_csv

__all__ = ["register", "cmd_export"]

EXPORT_EXAMPLES = """\
examples:
  exsim export runs/default all --format sqlite --out default.db
  sqlite3 default.db "SELECT s.name, count(*), sum(qty) FROM deals d JOIN symbols s ON s.id = d.symbol GROUP BY 1"
  exsim export runs/default fills --format csv --out fills.csv --symbol JPM --seq 1000:5000
  exsim export runs/default l2 --format csv --out l2.csv --ts 00:00:01..00:00:02   # times of day
  exsim export runs/default orders --format parquet --out orders.parquet   # needs exsim[parquet]
  exsim export runs/default orders --format flow --out flow.csv   # exsim simulate --flow csv flow.csv
"""


def register(sub, parents, formatter) -> None:
    """Add the ``export`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "export", parents=parents, formatter_class=formatter, epilog=EXPORT_EXAMPLES,
        help="write a stored table as CSV, Parquet or an SQLite database",
        description="Write the rows of a stored table (orders, fills, l2, events) in seq order as "
                    "CSV, Parquet (needs\npyarrow: pip install 'exsim[parquet]') or SQLite. For "
                    "SQLite, TABLE may be 'all'; the database\nalso holds 'symbols' (id, name, "
                    "tick_size), 'enums' (type, value, name) and a view 'deals'\nover 'fills'. "
                    "Values are as stored: prices in ticks, quantities in lots, times in ns; a "
                    "CSV or Parquet file\nthen adds them in trading terms: time (the run's "
                    "zone), symbol_name and the enum words\n(side_name BUY/SELL, kind_name, "
                    "event_name ...).\n"
                    "--format flow writes the orders table in the generic order-flow format "
                    "(CSV, .csv.gz or\n.parquet by PATH's name, with the symbol table), which "
                    "'exsim simulate --flow csv' runs again.\n"
                    "--out - writes CSV to stdout.")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.add_argument("table", metavar="TABLE", choices=TABLES + ("all",),
                   help="orders, fills, l2, events, or all (sqlite only)")
    p.add_argument("--format", required=True, choices=FORMATS, help="output format")
    p.add_argument("--out", required=True, metavar="PATH", help="output file")
    p.add_argument("--symbol", metavar="S", help="only this symbol")
    p.add_argument("--seq", metavar="LO:HI", help="only this inclusive seq range (either end may be empty)")
    p.add_argument("--ts", metavar="LO..HI",
                   help="only this inclusive time range; each bound (either may be empty) ns, "
                        "HH:MM[:SS[.fff]] (on the run's first day, in its time zone) or an ISO "
                        "date-time (no offset: the run's zone)")
    p.add_argument("--force", action="store_true", help="replace PATH if it exists")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    """``exsim export``: write the file; returns 0. Raises UsageError for bad options."""
    if args.table == "all" and args.format != "sqlite":
        raise UsageError(f"TABLE 'all' needs --format sqlite (a {args.format} file holds one table)")
    if args.out == "-" and args.format != "csv":
        raise UsageError("--out - (stdout) works with --format csv only")
    if args.format == "parquet" or (args.format == "flow" and args.out.lower().endswith(".parquet")):
        need_pyarrow()   # why first: the missing extra fails before anything is read
    seq = parse_range(args.seq, "--seq") if args.seq else None
    cat = open_catalog(args.dir)
    try:
        if args.symbol is not None:
            resolve_symbol(cat, args.symbol, args.dir)
    finally:
        cat.close()
    ts = parse_ts_range(args.ts, "--ts", args.dir) if args.ts else None
    if args.out == "-":
        write_csv(sys.stdout, args.dir, args.table, symbol=args.symbol, seq=seq, quiet=args.quiet,
                  ts=ts)
        return EXIT_OK
    if os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: is a directory")
    if os.path.exists(args.out) and not args.force:
        raise UsageError(f"--out {args.out}: exists (use --force to replace it)")
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):   # why first: fail before the table is read
        raise UsageError(f"--out {args.out}: directory {parent} does not exist")
    try:
        with step(f"read and write {args.out}"):
            counts = export(args.dir, TABLES if args.table == "all" else args.table, args.out,
                            fmt=args.format, symbol=args.symbol, seq=seq, quiet=args.quiet, ts=ts,
                            filter_text={"symbol": args.symbol, "seq": args.seq, "ts": args.ts})
    except OSError as e:
        raise out_failed(args.out, e) from None
    what = ", ".join(f"{n:,} {t}" for t, n in counts.items())
    print(f"wrote {args.out} ({args.format}): {what}")
    return EXIT_OK
