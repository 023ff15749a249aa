"""``exsim sweep``: backtest a strategy over a grid of parameters (and seeds), serially or on Dask.

A thin layer over ``replay.backtesting.grid.sweep``: ``--grid key=v1,v2`` options make the grid (every
combination), ``--param`` fixes other constructor arguments, and the rows (parameters + backtest
summary, one per grid point and seed) print as a table, or go out as JSON or CSV. Values parse as
in ``exsim backtest --param`` (JSON when they can, else strings); a grid value cannot itself hold a
comma.

Invariants: ``--json`` prints strict JSON (a NaN measure is ``null``); notes go to stderr.
A bad ``--grid``, ``--seeds``, ``--workers`` or strategy raises UsageError (exit 2, one
line); the default runs in this process (no Dask), ``--scheduler local`` starts a LocalCluster;
a missing dask.distributed says how to install it and that the default works without it.
"""

from __future__ import annotations

import csv
import json

from exsim.exchange.errors import UsageError

from exsim.replay.backtesting.loading import absolute_spec
from exsim.replay.backtesting.money import TICKS_X_LOTS
from exsim.replay.cli.backtest import add_backtest_arguments, latency_from_args, money_label
from exsim.replay.cli.common import (EXIT_OK, format_number, json_text, live_progress,
                               log, note, print_table)

__all__ = ["register", "cmd_sweep", "parse_grid"]

# summary columns in the default table (--json / --csv carry all of them)
TABLE_COLUMNS = ("pnl", "fees", "volume", "n_fills", "fill_ratio", "final_position",
                 "max_drawdown")

EXAMPLES = """\
examples:
  exsim sweep default --symbol JPM --grid size=2,5,10 --grid every=20,100     # in this process
  exsim sweep default --symbol JPM --grid size=2,5 --seeds 1,2,3 --csv sweep.csv
  exsim sweep lobster_AMZN_2012-06-21_level1 --grid skew_lots=50,200 --param size=100 \\
        --json      # a LOBSTER day; --scheduler tcp://HOST:8786: a running Dask scheduler
  exsim sweep default --symbol JPM --grid size=1,2 --scheduler local --workers 2   # a Dask LocalCluster
"""


def _value(raw: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_grid(items: list[str]) -> dict:
    """Return ``{key: [values]}`` from ``key=v1,v2,...`` strings; UsageError if malformed."""
    grid: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key or not raw:
            raise UsageError(f"--grid must be KEY=V1,V2,...; got {item!r}")
        if key in grid:
            raise UsageError(f"--grid {key} given twice")
        grid[key] = [_value(v) for v in raw.split(",")]
    return grid


def _parse_seeds(text: str | None):
    if text is None:
        return None
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise UsageError(f"--seeds must be comma-separated integers; got {text!r}") from None


def register(sub, parents, formatter) -> None:
    """Add the ``sweep`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "sweep", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="backtest a strategy over a grid of parameters, serially or on Dask",
        description="Run one backtest per combination of --grid values (times --seeds) in this "
                    "process (the default),\non a Dask LocalCluster (--scheduler local) or an "
                    "existing Dask scheduler, and gather one row\nper run: its parameters and "
                    "its summary. The same grid gives identical rows wherever it runs.\nDask: "
                    "pip install 'exsim[dist]'.")
    add_backtest_arguments(p)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="constructor argument and its values to sweep (repeatable: every "
                        "combination)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor argument fixed for every run (repeatable)")
    p.add_argument("--seeds", metavar="S1,S2,...",
                   help="also run every grid point with each scenario seed (scenarios only)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="'serial' (in this process, the default), 'local' (a Dask "
                        "LocalCluster of --workers processes) or a Dask scheduler address")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="LocalCluster worker processes, with --scheduler local (default: "
                        "%(default)s)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print all rows as JSON")
    out.add_argument("--csv", metavar="PATH", help="write all rows to a CSV file")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    """Run ``exsim sweep``; return the exit status (UsageError propagates to main)."""
    from exsim.replay.backtesting.grid import grid_points, sweep

    latency = latency_from_args(args)
    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1; got {args.workers}")
    grid = parse_grid(args.grid)
    fixed = {}
    for item in args.param:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param must be KEY=VALUE; got {item!r}")
        if key in grid:
            raise UsageError(f"{key} is both a --param and a --grid")
        fixed[key] = _value(raw)
    points = [{**p, **fixed} for p in grid_points(grid)]
    seeds = _parse_seeds(args.seeds)
    log.info("sweep of %s over %d point(s) x %d seed(s), scheduler %s", args.strategy,
             len(points), len(seeds or [None]),
             f"LocalCluster({args.workers})" if args.scheduler == "local" else args.scheduler or "serial")
    with live_progress("sweep", unit="run", quiet=args.quiet) as tell:
        rows = sweep(args.flow, absolute_spec(args.strategy), points, seeds=seeds,
                     scheduler=args.scheduler, n_workers=args.workers, progress=tell,
                     latency=latency,
                     fees_bps=args.fees_bps, symbol=args.symbol)
    log.info("sweep: %d run(s) done", len(rows))
    if args.json:
        print(json_text(rows))
        return EXIT_OK
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        note(f"wrote {len(rows)} rows to {args.csv}")
        return EXIT_OK
    keys = list(grid) + (["seed"] if args.seeds else [])
    headers = keys + list(TABLE_COLUMNS)
    unit = rows[0].get("currency") or TICKS_X_LOTS
    print_table([money_label(h, unit) if h in TABLE_COLUMNS else h for h in headers],
                [[format_number(r[k]) for k in headers] for r in rows])
    return EXIT_OK
