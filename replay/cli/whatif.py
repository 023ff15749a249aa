"""``exsim whatif``: how a strategy changed the market it traded in (``replay.whatif``).

A thin layer over ``replay.backtesting.counterfactual.whatif``: the same flow, strategy,
``--param``, symbol, latency and fee options as ``exsim backtest``; the backtest runs, then
history is replayed with and without the strategy, and the comparison's summary (displaced and
added market volume, queue positions taken, price differences) prints as a table, with the
strategy's own PnL and fills, or as JSON.

Invariants: ``--json`` prints strict JSON (a NaN measure is ``null``: e.g. a price difference
when no market order filled in both runs) and nothing else on stdout. L2-only flow (a Binance
capture) has no market orders to displace: UsageError, exit 2, one line.
"""

from __future__ import annotations

from exsim.exchange.errors import UsageError

from exsim.replay.backtesting.loading import load_strategy
from exsim.replay.cli.backtest import add_backtest_arguments, latency_from_args, money_label
from exsim.replay.cli.common import EXIT_OK, format_number, json_text, print_table

__all__ = ["register", "cmd_whatif", "BACKTEST_KEYS"]

# the backtest measures shown beside the comparison (--json carries the whole summary)
BACKTEST_KEYS = ("pnl", "fees", "n_fills", "volume", "final_position")

EXAMPLES = """\
examples:
  exsim whatif default --symbol JPM                        # market maker on the default scenario
  exsim whatif default --symbol JPM --param size=10 --param every=50 --json
  exsim whatif lobster_AMZN_2012-06-21_level1 --param size=100 --param every=200 \\
        --order-ns 50000         # a LOBSTER day (L3 flow; L2-only captures cannot be replayed)
"""


def register(sub, parents, formatter) -> None:
    """Add the ``whatif`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "whatif", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="replay history with and without a strategy: trades it displaced, queues it took",
        description="Backtest a strategy (as `exsim backtest`), then replay the market's flow "
                    "through fresh\nengines with and without the strategy's messages and compare: "
                    "market-vs-market\nvolume displaced and added, market orders queued behind "
                    "the strategy's and how many of\nthem filled, and the price market orders "
                    "got (docs/backtesting.md, \"What-if replay\").\nNeeds L3 flow: a scenario, "
                    "LOBSTER day, generic or DBN order flow, or a data directory.")
    add_backtest_arguments(p)
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the strategy's constructor (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="print the comparison's summary as JSON, with the backtest's summary "
                        "under \"backtest\"")
    p.set_defaults(func=cmd_whatif)


def cmd_whatif(args) -> int:
    """Run ``exsim whatif``; return the exit status (UsageError propagates to main)."""
    from exsim.replay.backtesting.counterfactual import whatif

    latency = latency_from_args(args)
    strategy = load_strategy(args.strategy, args.param)
    w = whatif(args.flow, strategy, symbol=args.symbol,
               latency=latency, fees_bps=args.fees_bps)
    bt = w.backtest
    unit = bt.unit
    if args.json:
        print(json_text({**w.summary, "backtest": {**bt.summary, "unit": unit}}, sort_keys=True))
        return EXIT_OK
    rows = [[k, format_number(v)] for k, v in w.summary.items()]
    rows += [[f"strategy {money_label(k, unit)}", format_number(bt.summary[k])]
             for k in BACKTEST_KEYS]
    print_table(["measure", "value"], rows)
    return EXIT_OK
