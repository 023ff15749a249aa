"""``exsim ls | book | verify | rerun | stats``: read a data directory and report on it.

Invariants:
- These commands never write to the data directory (the catalog is opened read-only; sqlite may
  keep its own -wal/-shm files beside it while open).
- Every string read from the directory is printed through ``printable`` (format_table does it
  for table cells), so stored names cannot drive the terminal.
- A symbol is checked against the catalog before any replay work, so a typo is an immediate
  usage error (exit 2) that lists the directory's symbols.
- ``verify`` and ``rerun`` exit 1 exactly when their report is not ok or a stored file fails its
  checksum or is missing although the catalog lists it (the directory cannot be trusted either
  way); other commands treat a corrupt or missing file as an input error (exit 2) naming the
  file (and offset). ``ls`` counts and marks missing segment files but exits 0: it lists.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from exsim.exchange.errors import CorruptionError, UsageError

from exsim.replay.cli.common import (
    EXIT_FAILED, EXIT_OK, check_plot_path, dir_bytes, format_table, human_bytes, note,
    live_progress, log, open_catalog, step, parse_ts, parse_ts_range, plot_failed,
    print_table, printable, resolve_symbol, time_text,
    symbol_tick_size,
)

__all__ = ["register", "cmd_ls", "cmd_book", "cmd_verify", "cmd_rerun", "cmd_stats"]


def register(sub, parents, formatter) -> None:
    """Add ``ls``, ``book``, ``verify``, ``rerun`` and ``stats`` to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "ls", parents=parents, formatter_class=formatter,
        help="list a data directory's catalog: runs, symbols, segments, sizes",
        description="List what a data directory holds: the runs that produced it, its symbols, and "
                    "per table and symbol\nthe sealed segments (count, rows, bytes, seq range), "
                    "checkpoints and WAL.\nA segment the catalog lists whose file is gone is counted "
                    "under \"missing\" (marked MISSING\nwith --files); `exsim verify` fails on it.",
        epilog="example:\n  exsim ls runs/default\n  exsim ls runs/default --files    # every segment file\n")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.add_argument("--files", action="store_true", help="also list every segment file")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser(
        "book", parents=parents, formatter_class=formatter,
        help="rebuild a symbol's book as it stood after a seq or at a time",
        description="Rebuild SYMBOL's order book exactly as it stood after message --seq N (or the "
                    "last message at or\nbefore --ts T) and print its levels, best first; with "
                    "--l3, every live order in queue order.\nPrices are in integer ticks. A "
                    "symbol not in continuous trading gets one more line: its phase and,\nin a "
                    "call, the indicative uncross (price, volume, surplus). A call book may be "
                    "crossed; a\nMARKET order resting in a call shows as `market` at the top of "
                    "its side.",
        epilog="example:\n  exsim book runs/default JPM --seq 5000\n"
               "  exsim book runs/default BTCUSD --ts 2500000000 --depth 5 --l3\n"
               "  exsim book runs/default JPM --ts 00:00:02.5        # a time of day (the run's zone: UTC here)\n")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.add_argument("symbol", metavar="SYMBOL", help="symbol name")
    at = p.add_mutually_exclusive_group(required=True)
    at.add_argument("--seq", type=int, metavar="N", help="after the message with this seq")
    at.add_argument("--ts", metavar="T",
                    help="at this time: ns as stored, HH:MM[:SS[.fff]] (on the run's first "
                         "day, in its time zone: UTC, or New York for a LOBSTER day) or an ISO "
                         "date-time such as 2024-08-08T10:00:00Z (no offset: the run's zone); a "
                         "time outside the run's messages is an error naming its first and last")
    p.add_argument("--depth", type=int, default=10, metavar="K", help="levels per side (default: %(default)s)")
    p.add_argument("--l3", action="store_true", help="also list the live orders (L3) in queue order")
    p.set_defaults(func=cmd_book)

    p = sub.add_parser(
        "verify", parents=parents, formatter_class=formatter,
        help="check every deal against the orders behind it (exit 1 on a violation)",
        description="Check the stored deals against the stored orders with code independent of the "
                    "engine: both orders\nexisted and were live, opposite sides, price within both "
                    "limits and equal to the resting\norder's, FIFO at each level, no overfill, "
                    "quantities conserved, L2 totals equal to the resting\norders, execution "
                    "reports agree with fills, no crossed book, rejects and order types\n(IOC, "
                    "FOK, post-only) as documented, self-trade prevention, ownership, stops "
                    "triggered\nand released as documented, icebergs showing only their slice, "
                    "GTD/DAY expiry, tick table\nand lot size, minimum quantity filled on entry. "
                    "\n" + _rule_names() + "\nPrints a summary "
                    "and each violation with its seq; exit status 1 if there is any.",
        epilog="example:\n  exsim verify runs/default\n  exsim verify runs/default --limit 100\n"
               "  exsim verify runs/default --threads 1\n")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.add_argument("--limit", type=int, default=20, metavar="N",
                   help="print at most N violations (default: %(default)s; 0: all)")
    p.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                   help="check the seq blocks between stored checkpoints on N threads (default: "
                        "the cores this process may use less one for the reader, at least 1, "
                        "at most 8); the report is the same for every N")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "rerun", parents=parents, formatter_class=formatter,
        help="re-run the journaled orders through a fresh engine, compare every output",
        description="Feed the journaled orders to a fresh engine and compare every output (fills, "
                    "L2 updates, events)\nwith what was stored: sealed segments by their "
                    "xxh3-128 row digests, the rest byte for byte.\nOn a difference, print the "
                    "first diverging seq and both rows and exit with status 1.",
        epilog="example:\n  exsim rerun runs/default\n")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.set_defaults(func=cmd_rerun)

    p = sub.add_parser(
        "stats", parents=parents, formatter_class=formatter,
        help="time series of mid, spread, microprice, imbalance and VWAP (table or PNG)",
        description="Compute SYMBOL's mid, spread, microprice, order-book imbalance over the top "
                    "--levels levels and\nVWAP over --window-ns windows from the stored L2 updates "
                    "and fills. Prints a table (evenly\nspaced rows across the range), all rows as "
                    "CSV with --csv, or a plot with --plot (needs\nmatplotlib: pip install "
                    "'exsim[plot]'). Prices are in ticks. For a symbol that left continuous "
                    "trading the table\nis followed by its trading day: each kind of auction "
                    "(count, volume, VWAP), the time in each\nphase, trades in auctions apart from "
                    "continuous ones, halts and volatility interruptions.",
        epilog="example:\n  exsim stats runs/default JPM\n"
               "  exsim stats runs/default JPM --levels 3 --window-ns 500000000 --plot jpm.png\n"
               "  exsim stats runs/default JPM --ts 00:00:01..00:00:03 --rows 5\n")
    p.add_argument("dir", metavar="DIR", help="data directory")
    p.add_argument("symbol", metavar="SYMBOL", help="symbol name")
    p.add_argument("--levels", type=int, default=5, metavar="K",
                   help="levels per side for the imbalance (default: %(default)s)")
    p.add_argument("--window-ns", type=int, default=1_000_000_000, metavar="N",
                   help="VWAP window in ns (default: %(default)s)")
    p.add_argument("--ts", metavar="LO..HI",
                   help="only this inclusive time range; each bound (either may be empty) ns, "
                        "HH:MM[:SS[.fff]] (on the run's first day, in its time zone) or an ISO "
                        "date-time (no offset: the run's zone); "
                        "LO:HI of integers (ns) also works")
    p.add_argument("--rows", type=int, default=25, metavar="N",
                   help="rows of the printed table (default: %(default)s; 0: all)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--plot", metavar="PNG", help="write a plot to this PNG file instead of a table")
    out.add_argument("--csv", action="store_true", help="print every row as CSV instead of a table")
    p.set_defaults(func=cmd_stats)


# -- ls ----------------------------------------------------------------------------------------

def cmd_ls(args) -> int:
    """``exsim ls``: print the catalog of a data directory; returns 0."""
    cat = open_catalog(args.dir)
    try:
        sym_rows = cat.symbols()
        names = {int(r["id"]): str(r["name"]) for r in sym_rows}
        sealed = cat.sealed_through()
        ckpts = cat.checkpoints()
        segs = cat.all_segments()
        runs = cat.runs()
    finally:
        cat.close()
    wal_dir = os.path.join(args.dir, "wal")
    wal = dir_bytes(wal_dir) if os.path.isdir(wal_dir) else 0
    print(f"data directory {printable(args.dir)}: {human_bytes(dir_bytes(args.dir))} on disk, sealed through "
          f"seq {sealed:,}, {len(ckpts)} checkpoint(s)"
          + (f" (latest at seq {ckpts[-1]['seq']:,})" if ckpts else "") + f", WAL {human_bytes(wal)}")
    print()
    run_rows = []
    for r in runs:
        info = r["info"]
        run_rows.append((r["id"], time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["created"] or 0)),
                         r["scenario"] or "-", "-" if r["seed"] is None else r["seed"],
                         info.get("batch", "-"), info.get("durability", "-")))
    print_table(["run", "created (UTC)", "scenario", "seed", "batch", "durability"], run_rows,
                right=[True, False, False, True, True, False], title="runs")
    span = _span_line(args.dir)
    if span:
        print(span)
    print()
    print_table(["id", "symbol", "tick_size"],
                [(s["id"], s["name"], symbol_tick_size(s)) for s in sym_rows],
                right=[True, False, True], title="symbols")
    print()
    groups: dict[tuple[str, int], list[dict]] = {}
    for s in segs:
        groups.setdefault((s["table_name"], s["symbol"]), []).append(s)
    order = {t: i for i, t in enumerate(("orders", "fills", "l2", "events"))}
    gone = {s["path"] for s in segs if _segment_missing(args.dir, s["path"])}
    rows = []
    for (table, sym), ss in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        lost = sum(s["path"] in gone for s in ss)
        rows.append((table, names.get(sym, sym), len(ss), lost or "", f"{sum(s['rows'] for s in ss):,}",
                     human_bytes(sum(s["bytes"] for s in ss)), min(s["seq_lo"] for s in ss),
                     max(s["seq_hi"] for s in ss), ",".join(sorted({s["codec"] for s in ss}))))
    rows.append(("total", "", len(segs), len(gone) or "", f"{sum(s['rows'] for s in segs):,}",
                 human_bytes(sum(s["bytes"] for s in segs)), "", "", ""))
    print_table(["table", "symbol", "segments", "missing", "rows", "bytes", "seq_lo", "seq_hi",
                 "codec"], rows,
                right=[False, False, True, True, True, True, True, True, False], title="segments")
    if args.files:
        print()
        print_table(["path", "rows", "bytes", "seq_lo", "seq_hi", "tier", "file"],
                    [(s["path"], f"{s['rows']:,}", s["bytes"], s["seq_lo"], s["seq_hi"], s["tier"],
                      "MISSING" if s["path"] in gone else "ok")
                     for s in sorted(segs, key=lambda s: s["path"])],
                    right=[False, True, True, True, True, True, False], title="segment files")
    for path in sorted(gone):
        note(f"missing: {os.path.join(args.dir, path)} is listed in the catalog but not on disk "
             "(`exsim verify` fails on it)")
    return EXIT_OK


def _span_line(data_dir: str) -> str | None:
    """``messages from T1 to T2 (ts ...)`` in the run's zone, or None when the run cannot say
    (no checkpoint, a damaged catalog: ls still lists what is there; verify names the damage)."""
    from exsim.exchange.errors import ExsimError
    from exsim.replay.rundir import run_clock

    try:
        clock = run_clock(data_dir)
    except (ExsimError, OSError):
        return None
    return clock.span_text().replace("its messages run", "messages", 1)


def _segment_missing(data_dir: str, path: str) -> bool:
    """Whether the segment file a catalog row lists at ``path`` (relative to ``data_dir``) does
    not exist (a symlink or a path outside is not "missing": verify reports those)."""
    return not os.path.lexists(os.path.join(data_dir, path))


# -- book --------------------------------------------------------------------------------------

def cmd_book(args) -> int:
    """``exsim book``: print a rebuilt book; returns 0."""
    from exsim.exchange import Side
    from exsim.replay import book_at

    if args.depth < 1:
        raise UsageError(f"--depth must be >= 1, got {args.depth}")
    cat = open_catalog(args.dir)
    try:
        resolve_symbol(cat, args.symbol, args.dir)
    finally:
        cat.close()
    ts = None if args.ts is None else parse_ts(args.ts, "--ts", args.dir)
    if ts is not None:
        log.info("book: --ts %s is ts %s", args.ts, f"{ts:,}")
    with step("rebuild the book (nearest checkpoint + messages after it)"):
        view = book_at(args.dir, args.symbol, seq=args.seq, ts=ts, depth=args.depth, l3=args.l3)
    when = ("before its first message" if view.ts is None
            else f"ts {view.ts:,}, {time_text(int(view.ts), args.dir)}")
    print(f"{printable(args.symbol)} after seq {view.seq:,} ({when})  prices in ticks")
    _print_phase(view)
    n = max(len(view.bids), len(view.asks))
    rows = []
    for i in range(n):
        b = view.bids[i] if i < len(view.bids) else None
        a = view.asks[i] if i < len(view.asks) else None
        rows.append(("" if b is None else int(b["count"]), "" if b is None else f"{int(b['qty']):,}",
                     "" if b is None else _bid_label(int(b["price"])), "|",
                     "" if a is None else _sell_label(int(a["price"])),
                     "" if a is None else f"{int(a['qty']):,}",
                     "" if a is None else int(a["count"])))
    print(format_table(["orders", "bid_qty", "bid", "|", "ask", "ask_qty", "orders"], rows,
                       right=[True, True, True, False, True, True, True]))
    if not rows:
        print("(empty book)")
    if args.l3 and view.orders is not None:
        print()
        # why filter: the table shows --depth levels; the L3 list matches it (queue positions
        # are still counted within each whole level)
        shown = {(int(Side.BUY), int(p)) for p in view.bids["price"]}
        shown |= {(int(Side.SELL), int(p)) for p in view.asks["price"]}
        rows, pos, last = [], 0, None
        for o in view.orders:
            if (int(o["side"]), int(o["price"])) not in shown:
                continue
            key = (int(o["side"]), int(o["price"]))
            pos = pos + 1 if key == last else 1   # queue position within its level
            last = key
            # qty is the displayed part; an iceberg's reserve (hidden) is not in the L2 totals
            rows.append((Side(int(o["side"])).name.lower(), int(o["price"]), pos, int(o["order_id"]),
                         f"{int(o['qty']):,}", f"{int(o['hidden']):,}",
                         f"{int(o['display_qty']):,}" if o["display_qty"] else "",
                         f"{int(o['filled']):,}", int(o["trader"])))
        print_table(["side", "price", "queue", "order_id", "qty", "hidden", "display", "filled",
                     "trader"], rows, right=[False] + [True] * 8,
                    title=f"live orders (L3) at these levels: {len(rows):,} of {len(view.orders):,}, "
                          "bids best first then asks, FIFO; qty shown, hidden the iceberg reserve")
        if view.stops is not None:
            print()
            _print_stops(view.stops)
    return EXIT_OK


def _bid_label(price: int) -> str:
    """A bid price as the book table shows it: a BUY MARKET resting in a call stands at its call
    price (MAX_PRICE + 1), shown as "market"."""
    from exsim.exchange.schema import CALL_MARKET_PRICE
    return "market" if price == CALL_MARKET_PRICE[0] else price


def _sell_label(price: int):
    """An ask price as the book table shows it: a SELL MARKET in a call stands at 0, "market"."""
    from exsim.exchange.schema import CALL_MARKET_PRICE
    return "market" if price == CALL_MARKET_PRICE[1] else price


def _print_phase(view) -> None:
    """Print the symbol's trading phase when it is not continuous, and in a call the indicative
    uncross (docs/semantics.md, Trading phases); a continuous book prints nothing more."""
    from exsim.exchange.schema import CALL_PHASES, Phase
    if view.phase == Phase.CONTINUOUS:
        return
    line = f"phase {view.phase.name.lower()}"
    if view.phase in CALL_PHASES:
        price, qty, surplus = view.indicative
        if qty:
            side = "buy" if surplus > 0 else "sell" if surplus < 0 else "none"
            line += (f"  indicative uncross {price} for {qty:,} lots, surplus {abs(surplus):,} "
                     f"({side})")
        else:
            line += "  indicative uncross: nothing would execute"
        line += "; the call book may cross, MARKET orders head their side"
    print(line)


def _print_stops(stops) -> None:
    """Print the pending stops (L3_DTYPE rows, in release order): they are outside the book."""
    from exsim.exchange.schema import OrderType, Side
    rows = [(Side(int(o["side"])).name.lower(), int(o["stop_price"]),
             int(o["price"]) if int(o["order_type"]) == int(OrderType.STOP_LIMIT) else "market",
             int(o["order_id"]), f"{int(o['qty']):,}", int(o["trader"])) for o in stops]
    print_table(["side", "stop_price", "limit", "order_id", "qty", "trader"], rows,
                right=[False, True, True, True, True, True],
                title=f"pending stops (outside the book): {len(rows):,}, release order "
                      "(buys by rising stop price, then sells by falling)")
    if not rows:
        print("(no pending stops)")


def _rule_names() -> str:
    """Return verify's rule names (``replay.verification.rules.RULES``; no kernel is compiled to
    print the help) as lines of at most 96 characters."""
    import textwrap

    from exsim.replay.verification.rules import RULES
    return "\n".join(textwrap.wrap("Rules: " + ", ".join(RULES) + ".", 96))


# -- verify, rerun -----------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--threads``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return value


def _show_progress(args) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _check_dir(data_dir: str) -> None:
    # why open the catalog first: a wrong path should say "not a data directory", not whatever
    # the first file read happens to fail with
    open_catalog(data_dir).close()


def cmd_verify(args) -> int:
    """``exsim verify``: print the report; returns 0 if it is ok, 1 if there are violations."""
    from exsim.replay import verify

    _check_dir(args.dir)
    log.info("verify %s", args.dir)
    t0 = time.perf_counter()
    try:
        report = verify(args.dir, progress=_show_progress(args), threads=args.threads)
    except CorruptionError as e:
        return _corrupt("verify", e)
    secs = time.perf_counter() - t0
    summary = dict(report.summary or {})
    summary.pop("seconds", None)   # printed below, measured here
    width = max([len(k) for k in summary] + [1])
    for k, v in summary.items():
        print(printable(f"{k:>{width}}  {_summary_value(v)}"))
    if report.violations:
        limit = args.limit if args.limit > 0 else len(report.violations)
        print()
        print_table(["seq", "rule", "detail"],
                    [(v.seq, v.rule, v.detail) for v in report.violations[:limit]],
                    right=[True, False, False], title="violations")
        if len(report.violations) > limit:
            print(f"... and {len(report.violations) - limit:,} more (--limit 0 shows all)")
    print()
    if report.ok:
        print(f"verify: ok ({secs:.2f} s)")
        return EXIT_OK
    by_rule = summary.get("violations")
    total = (sum(by_rule.values()) if isinstance(by_rule, dict)
             and all(isinstance(n, int) for n in by_rule.values()) else len(report.violations))
    # why the summary's count: the report lists only the first violations, the summary counts all
    print(f"verify: FAILED, {max(total, len(report.violations)):,} violation(s) ({secs:.2f} s)")
    return EXIT_FAILED


def _corrupt(command: str, e: Exception) -> int:
    """Report a failed checksum as a failed check (exit 1), not a usage error: verify and rerun
    exist to say whether a directory can be trusted, and a corrupt file is a clear no."""
    print(f"{command}: FAILED, the store is corrupt: {printable(e)}")
    return EXIT_FAILED


def _summary_value(v) -> str:
    """A verify summary value on one line: counts with separators, lists joined, dicts of
    counts as their non-zero entries."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        shown = {k: x for k, x in v.items() if x}
        return ", ".join(f"{k} {_summary_value(x)}" for k, x in shown.items()) if shown else "all 0"
    return str(v)


def _row_fields(row) -> dict | None:
    """A stored/rerun row (numpy record, dict or None) as {field: python value}."""
    if row is None:
        return None
    if isinstance(row, dict):
        return row
    names = getattr(getattr(row, "dtype", None), "names", None)
    if names:
        return {n: row[n].item() if hasattr(row[n], "item") else row[n] for n in names}
    return {"row": str(row)}


def cmd_rerun(args) -> int:
    """``exsim rerun``: returns 0 if a fresh engine reproduced every row, 1 on a divergence."""
    from exsim.replay import rerun

    _check_dir(args.dir)
    log.info("rerun %s from its first checkpoint", args.dir)
    t0 = time.perf_counter()
    try:
        report = rerun(args.dir, progress=_show_progress(args))
    except CorruptionError as e:
        return _corrupt("rerun", e)
    secs = time.perf_counter() - t0
    for k, v in (report.counts or {}).items():
        print(f"{k:>12}  {v:,}" if isinstance(v, int) else printable(f"{k:>12}  {v}"))
    print()
    if report.ok:
        how = ("every sealed output segment's row digest (xxh3-128) and the unsealed rows"
               if report.mode == "digest" else "every stored row, byte for byte,")
        print(f"rerun: ok, {how} reproduced ({secs:.2f} s)")
        return EXIT_OK
    d = report.first_divergence
    if d is None:
        print("rerun: FAILED (no divergence detail reported)")
        return EXIT_FAILED
    print(f"rerun: FAILED, first divergence in table {printable(d.table)} at seq {d.seq:,}")
    stored, again = _row_fields(d.stored_row), _row_fields(d.rerun_row)
    fields = list(dict.fromkeys(list(stored or {}) + list(again or {})))
    rows = [(f, "(no row)" if stored is None else stored.get(f, ""),
             "(no row)" if again is None else again.get(f, ""),
             "" if stored is None or again is None or stored.get(f) == again.get(f) else "<--")
            for f in fields]
    print_table(["field", "stored", "rerun", ""], rows or [("(no rows)", "", "", "")],
                right=[False, True, True, False])
    return EXIT_FAILED


# -- stats -------------------------------------------------------------------------------------

def _fmt(v) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.4f}"
    return str(v)


def cmd_stats(args) -> int:
    """``exsim stats``: print (or plot) the analytics series; returns 0."""
    import numpy as np

    if args.levels < 1:
        raise UsageError(f"--levels must be >= 1, got {args.levels}")
    if args.window_ns < 1:
        raise UsageError(f"--window-ns must be >= 1, got {args.window_ns}")
    cat = open_catalog(args.dir)
    try:
        resolve_symbol(cat, args.symbol, args.dir)
    finally:
        cat.close()
    ts = parse_ts_range(args.ts, "--ts", args.dir) if args.ts else None
    if args.plot:
        # why first: a missing extra, an unwritable format or directory fails before the work
        check_plot_path(args.plot)
    from exsim.replay import stats

    log.info("stats of %s in %s: ts %s, %d level(s), VWAP window %d ns", args.symbol, args.dir,
             "all" if ts is None else f"{ts[0]}..{ts[1]}", args.levels, args.window_ns)
    with live_progress("stats", unit="step", quiet=args.quiet) as tell, step("compute the series"):
        series = stats(args.dir, args.symbol, ts=ts, levels=args.levels,
                       window_ns=args.window_ns, progress=tell)
    log.info("stats: %s row(s)", f"{series.size:,}")
    names = list(series.dtype.names)
    if args.plot:
        from exsim.replay.rundir import run_clock
        _plot(series, args.symbol, args.plot, run_clock(args.dir))
        note(f"wrote {printable(args.plot)}: {series.size:,} points of {printable(args.symbol)}")
        return EXIT_OK
    if args.csv:
        print(",".join(names))
        for row in series.tolist():
            print(",".join("" if isinstance(v, float) and math.isnan(v) else repr(v) if isinstance(v, float)
                           else str(v) for v in row))
        return EXIT_OK
    n = series.size
    idx = np.arange(n) if args.rows <= 0 or n <= args.rows else np.unique(
        np.linspace(0, n - 1, args.rows).round().astype(np.int64))
    from exsim.replay.rundir import run_clock

    clock = run_clock(args.dir)
    # why a time column: ts are ns as stored; a reader wants the wall-clock time beside them
    print_table(["time", *names], [[clock.time_of_day(int(series["ts"][i])),
                                    *(_fmt(v) for v in series[i].tolist())] for i in idx],
                right=[False] + [True] * len(names),
                title=f"{args.symbol}: imbalance over {args.levels} level(s), VWAP over "
                      f"{args.window_ns:,} ns windows, prices in ticks; time in "
                      f"{clock.zone_text()}, ts in ns as stored")
    if len(idx) < n:
        print(f"showing {len(idx)} of {n:,} rows, evenly spaced (--rows 0 or --csv for all)")
    elif n == 0:
        print("(no rows in range)")
    _print_phase_stats(args.dir, args.symbol)
    return EXIT_OK


def _print_phase_stats(data_dir: str, symbol) -> None:
    """Print the symbol's trading day (``replay.analytics.phase_stats``) when it had any phase
    other than continuous trading; a continuous day prints nothing more."""
    from exsim.replay.analytics import phase_stats

    day = phase_stats(data_dir, symbol)
    if list(day["time_in_phase_ns"]) in ([], ["continuous"]) and not day["auctions"]:
        return
    print()
    rows = [(name, a["count"], f"{a['volume']:,}", "-" if a["vwap"] is None else f"{a['vwap']:.4f}")
            for name, a in day["auctions"].items()]
    print_table(["auction", "count", "volume", "vwap"], rows, right=[False, True, True, True],
                title=f"{symbol}: auctions (uncrosses), prices in ticks")
    print_table(["phase", "seconds"], [(name, f"{ns / 1e9:,.3f}") for name, ns
                                       in day["time_in_phase_ns"].items()],
                right=[False, True], title="time in each phase (message time)")
    t = day["trades"]
    print(f"trades: {t['continuous']['count']:,} continuous ({t['continuous']['volume']:,} lots), "
          f"{t['auction']['count']:,} in auctions ({t['auction']['volume']:,} lots); "
          f"halts {day['halts']}, volatility interruptions {day['interruptions']}")


def _plot_module():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed: "
                         "pip install 'exsim[plot]'") from None
    matplotlib.use("Agg")   # why: no display is needed to write a PNG, and none may exist
    import matplotlib.pyplot as plt

    return plt


def _plot(series, symbol: str, path: str, clock=None) -> None:
    """Write a three-panel PNG: prices (mid, microprice, VWAP), spread, imbalance; the time
    axis in ``clock``'s zone (a ``RunClock``; None: UTC)."""
    from exsim.replay.timefmt import DAY_NS, day_start, time_of_day_axis

    plt = _plot_module()
    first = int(series["ts"][0]) if series.size else 0
    base = day_start(first) if clock is None else clock.day0()
    t = (series["ts"] - base) / 1e9   # seconds after the first day's midnight: a time of day
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1, 1]})
    for name in ("mid", "microprice", "vwap"):
        if name in series.dtype.names:
            axes[0].plot(t, series[name], label=name, lw=0.8)
    axes[0].set_ylabel("price (ticks)")
    axes[0].legend(loc="best")
    axes[0].set_title(f"{symbol}")
    axes[1].plot(t, series["spread"], lw=0.8, color="tab:red")
    axes[1].set_ylabel("spread")
    axes[2].plot(t, series["imbalance"], lw=0.8, color="tab:green")
    axes[2].set_ylabel("imbalance")
    span = int(series["ts"][-1]) - first if series.size else 0
    time_of_day_axis(axes[2], base, span, epoch=base >= DAY_NS,
                     zone=None if clock is None else clock.zone_text())
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError:
        raise
    except Exception as e:   # why broad: matplotlib raises ValueError, RuntimeError, ... per format
        raise plot_failed(path, e) from None
    finally:
        plt.close(fig)
