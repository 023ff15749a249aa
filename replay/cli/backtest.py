"""``exsim backtest``: run a strategy class against a scenario, a LOBSTER day, a Binance L2 capture
or a stored run.

A thin layer over ``replay.backtesting.driver.backtest``: it builds the strategy class named on the
command line with ``--param`` keyword arguments (``replay.backtesting.loading.load_strategy``), runs the backtest and prints the summary as
a table (or JSON), optionally writing the plot and journaling the merged run.

``--report`` adds ``BacktestResult.report()`` (replay/backtesting/report.py): its statistics and
the first ``--trades`` trades after the summary table, or the whole report under "report" in
the JSON (the summary's keys are unchanged either way). When the lot is known (an L2 capture
whose loader gives the lot, e.g. Binance's 1e-8 BTC) the table prints volumes and the position
as decimals, as the report does; ``--json`` keeps them in lots.

``--cross-fills`` and ``--whole-on-trade-through`` set the L2 fill model's options (the
``queue_models`` options of the same names); on flow that runs through the engine they do not
apply, and a note on stderr says so.

Auction fills (made by an uncross, docs/backtesting.md "Trading phases") are shown apart when
the strategy has any: a second table (count, volume, PnL contribution) after the summary, and
"auction" in the JSON; a run without them prints exactly what it printed before phases existed.

Invariants: ``--json`` prints strict JSON (a NaN measure is ``null``) and nothing else on stdout;
notes such as "wrote PNG" go to stderr. ``--plot`` is checked (format, directory) before the
backtest runs.
``--strategy`` takes ``module:Class`` or ``path/file.py:Class`` (loaded by its path, no
PYTHONPATH needed). A bad ``--strategy`` (unimportable module or file, missing class, not a Strategy) or a bad
``--param`` raises UsageError naming it, so ``exsim`` exits 2 with one line and no traceback.
"""

from __future__ import annotations

import time

from exsim.exchange.errors import UsageError

from exsim.replay.backtesting.loading import load_strategy
from exsim.replay.backtesting.report import auction_summary, money_of
from exsim.replay.cli.common import (EXIT_OK, check_plot_path, format_number, json_text,
                               live_progress, log, note, print_table)

__all__ = ["register", "cmd_backtest", "add_backtest_arguments", "lots_text"]

DEFAULT_STRATEGY = "exsim.replay.backtesting.strategies:InventoryMarketMaker"
REPORT_BAR_NS = 60 * 10**9
REPORT_TRADES = 20

# the summary values that are quantities in lots (decimals in the table when the lot is known)
LOT_KEYS = ("volume", "maker_volume", "taker_volume", "submitted_qty", "final_position")

EXAMPLES = """\
examples:
  exsim backtest default --symbol JPM                      # market maker on the default scenario
  exsim backtest default --strategy exsim.replay.backtesting.strategies:MomentumTaker --symbol JPM \\
        --order-ns 50000 --plot momentum.png
  exsim backtest runs/default --symbol JPM --param size=10 --param every=50 --json
  exsim backtest default --symbol JPM --report --bar-ns 1000000000   # trades, returns, Sharpe
  exsim backtest binance_spot_btcusdt_20240808_hftbacktest --param size=100000 \\
        --param skew_lots=100000 --param max_position=1000000 --param every=500 \\
        --feed-ns 1000000 --order-ns 1000000 --queue-model proportional   # L2-only flow
"""


def add_backtest_arguments(p) -> None:
    """Add what every backtest-running command takes: the flow, the strategy class, the symbol,
    latencies and fees."""
    p.add_argument("flow", metavar="SCENARIO|DIR",
                   help="scenario preset or file, LOBSTER directory, Binance capture (.gz "
                        "or its directory), Databento DBN file (.dbn, .dbn.zst: loaded whole, "
                        "not streamed, since the strategy is merged into the flow), generic "
                        "flow file (.csv, .parquet), or exsim data directory")
    p.add_argument("--strategy", default=DEFAULT_STRATEGY, metavar="MODULE:CLASS",
                   help="strategy class: a module's (on the Python path) or a file's, "
                        "FILE.py:CLASS, loaded by its path (`exsim new-strategy` writes one) "
                        "(default: %(default)s)")
    p.add_argument("--symbol", metavar="NAME", help="symbol to trade (needed with several)")
    p.add_argument("--feed-ns", type=int, default=0, metavar="NS",
                   help="market data latency in ns (default: %(default)s)")
    p.add_argument("--order-ns", type=int, default=0, metavar="NS",
                   help="order entry latency in ns (default: %(default)s)")
    p.add_argument("--response-ns", type=int, default=None, metavar="NS",
                   help="exchange-to-strategy latency of execution reports and fills in ns: a "
                        "wake-up sees only the reports due by its local time (Python path) "
                        "(default: the feed latency)")
    for kind in ("new", "cancel", "modify"):
        p.add_argument(f"--{kind}-ns", type=int, default=None, metavar="NS",
                       help=f"order entry latency of {kind.upper()} messages in ns (default: "
                            "--order-ns)")
    p.add_argument("--fees-bps", type=float, default=None, metavar="BPS",
                   help="one fee rate on traded notional, basis points, for maker and taker "
                        "fills alike, overriding the symbol's maker_bps/taker_bps (default: the "
                        "symbol's schedule; none: no fees)")


def latency_from_args(args):
    """Return the latency model of the ``add_backtest_arguments`` options: a ConstantLatency of
    --feed-ns/--order-ns, or a SplitLatency when --response-ns, --new-ns, --cancel-ns or
    --modify-ns is given. Raises UsageError for a negative value."""
    from exsim.replay.backtesting.latency import ConstantLatency, SplitLatency
    split = {k: getattr(args, f"{k}_ns") for k in ("response", "new", "cancel", "modify")}
    for name, v in (("feed", args.feed_ns), ("order", args.order_ns), *split.items()):
        if v is not None and v < 0:
            raise UsageError(f"--{name}-ns must be >= 0; got {v}")
    if all(v is None for v in split.values()):
        return ConstantLatency(args.feed_ns, args.order_ns)
    return SplitLatency(args.feed_ns, args.order_ns, **split)


def money_label(key: str, unit: str) -> str:
    """Return a summary key as a table label: money values (``MONEY_KEYS``) carry their unit,
    e.g. "pnl (USD)" or "pnl (ticks x lots)"."""
    from exsim.replay.backtesting.result import MONEY_KEYS
    return f"{key} ({unit})" if key in MONEY_KEYS else key


def lots_text(money, key: str, value) -> str:
    """Return a summary value as the table prints it: a quantity in lots (``LOT_KEYS``) as a
    decimal when ``money`` knows the lot (``qty_step``: 100000 lots of 1e-8 BTC print 0.001), as
    the report prints them; anything else as ``format_number``."""
    if money.qty_step and key in LOT_KEYS and isinstance(value, int):
        return money.qty_text(value)
    return format_number(value)


def register(sub, parents, formatter) -> None:
    """Add the ``backtest`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "backtest", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="run a strategy against a scenario, a LOBSTER day, Binance L2 or a stored run",
        description="Merge a strategy's orders with the market's flow through one engine, after "
                    "feed and order\nlatency, so its fills and queue positions are earned. "
                    "Prints the summary (PnL, turnover,\nfill ratio, fees, drawdown, time in "
                    "queue).\nOn L2-only flow (a Binance capture: its .gz file or directory) the "
                    "strategy's queue\nposition behind each aggregate level follows "
                    "--queue-model (see docs/backtesting.md).")
    add_backtest_arguments(p)
    p.add_argument("--queue-model", choices=["conservative", "proportional"], metavar="MODEL",
                   default="conservative",
                   help="L2 flow only, conservative or proportional: what a level decrease "
                        "without a trade does to the queue "
                        "ahead of the strategy's order: nothing (conservative) or advance it pro "
                        "rata (proportional) (default: %(default)s)")
    p.add_argument("--cross-fills", action="store_true",
                   help="L2 flow only: the other side's book moving onto or through a resting "
                        "order fills it, without a trade print (the fill model's cross_fills; "
                        "docs/backtesting.md \"Fill models\")")
    p.add_argument("--whole-on-trade-through", action="store_true",
                   help="L2 flow only: a trade through the order's price fills all of it "
                        "(hftbacktest's behaviour; the fill model's whole_on_trade_through)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the strategy's constructor (repeatable)")
    p.add_argument("--store", metavar="DIR", help="also journal the merged run into DIR")
    p.add_argument("--plot", metavar="PNG", help="write price/fills, position and PnL to PNG")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--report", action="store_true",
                   help="also print the report: trade list, PnL per bar, Sharpe, drawdown, fees, "
                        "turnover, in the result's money unit (with --json: under \"report\", "
                        "every trade and bar)")
    p.add_argument("--bar-ns", type=int, default=REPORT_BAR_NS, metavar="NS",
                   help="--report: width of the bars returns and Sharpe are taken over, ns "
                        "(default: %(default)s, one minute)")
    p.add_argument("--trades", type=int, default=REPORT_TRADES, metavar="N",
                   help="--report: how many trades the table lists (default: %(default)s; "
                        "--json lists all)")
    p.set_defaults(func=cmd_backtest)


def cmd_backtest(args) -> int:
    """Run ``exsim backtest``; return the exit status (UsageError propagates to main)."""
    from exsim.replay.backtesting.driver import backtest
    from exsim.replay.backtesting.queue_models import QUEUE_MODELS   # why here: numba import

    latency = latency_from_args(args)
    if args.bar_ns <= 0:
        raise UsageError(f"--bar-ns must be > 0; got {args.bar_ns}")
    if args.trades < 0:
        raise UsageError(f"--trades must be >= 0; got {args.trades}")
    if args.plot:
        check_plot_path(args.plot, formats=("png",))   # why first: fail before the backtest
    strategy = load_strategy(args.strategy, args.param)
    queue_model = QUEUE_MODELS[args.queue_model](
        cross_fills=args.cross_fills, whole_on_trade_through=args.whole_on_trade_through)
    log.info("strategy %s (%s), latency %s", args.strategy, type(strategy).__qualname__,
             latency.describe())
    t0 = time.perf_counter()
    with live_progress("backtest", quiet=args.quiet) as tell:
        res = backtest(args.flow, strategy, latency=latency,
                       fees_bps=args.fees_bps, symbol=args.symbol, store_dir=args.store,
                       queue_model=queue_model, progress=tell)
    log.info("backtest of %s: %s market messages, %s strategy orders, %s fills, %s path, "
             "%.2f s", res.meta.get("source") or args.flow, f"{res.meta.get('n_market', 0):,}",
             f"{res.summary.get('n_orders', 0):,}", f"{res.summary.get('n_fills', 0):,}",
             res.meta.get("path"), time.perf_counter() - t0)
    if (args.cross_fills or args.whole_on_trade_through) and "queue_model" not in res.meta:
        note("--cross-fills and --whole-on-trade-through apply to L2 flow only: this flow ran "
             "through the engine, which fills by its own book (ignored)")
    money = res.meta["money"]
    lots = money_of(res)
    report = res.report(bar_ns=args.bar_ns) if args.report else None
    auction = auction_summary(res) if len(res.auction_fills()) else None
    if args.json:
        extra = {} if report is None else {"report": report.to_json()}
        if auction is not None:
            extra["auction"] = auction
        print(json_text({**res.summary, "unit": money["unit"], "maker_bps": money["maker_bps"],
                         "taker_bps": money["taker_bps"], **extra}, sort_keys=True))
    else:
        print_table(["measure", "value"],
                    [[money_label(k, money["unit"]), lots_text(lots, k, v)]
                     for k, v in res.summary.items()])
        if auction is not None:
            print()
            print_table(["auction fills", "value"],
                        [["fills", format_number(auction["auction_fills"])],
                         ["volume", lots_text(lots, "volume", auction["auction_volume"])],
                         [f"pnl ({money['unit']})", format_number(auction["auction_pnl"])]])
        if report is not None:
            print()
            print(report.text(max_trades=args.trades))
    if args.plot:
        res.plot(args.plot)
        note(f"wrote {args.plot}")
    return EXIT_OK
