"""``exsim new-strategy`` and ``exsim new-scenario``: write a file to start from, runnable as it is.

``new-scenario`` copies a preset's scenario file (comments and all) to edit and simulate.

The file holds one ``Strategy`` subclass (every callback shown, the ones it does not use
commented) that ``exsim backtest FLOW --strategy FILE.py:CLASS`` loads by path
(``replay.backtesting.loading``), so a strategy written anywhere runs without ``PYTHONPATH``.

Invariants: an existing file is never overwritten without ``--force``; the result (the path
written and the command that runs it) goes to stdout.
"""

from __future__ import annotations

import keyword
import os
import re

from exsim.exchange.errors import UsageError

from exsim.replay.cli.common import EXIT_OK, out_failed, printable

__all__ = ["register", "cmd_new_strategy", "cmd_new_scenario", "strategy_source",
           "class_name_for"]

EXAMPLES = """\
example:
  exsim new-strategy my_strategy          # writes my_strategy.py with class MyStrategy
  exsim backtest default --symbol JPM --strategy my_strategy.py:MyStrategy --param size=2
"""

TEMPLATE = '''\
"""{cls}: a strategy for `exsim backtest`, written by `exsim new-strategy`.

Run it (no PYTHONPATH needed: the file is loaded by its path):

    exsim backtest default --symbol JPM --strategy {path}:{cls} --param size=2

The callbacks and what they receive are in docs/backtesting.md ("Python strategies"; `exsim docs
backtesting` prints the page). Prices
are integer ticks, quantities lots. On an empty side of the book `book.bid` / `book.ask` (and
their qty) are 0, not None: test `if book.bid and book.ask`, or use `book.mid` (None unless
both sides are there).
"""

from exsim.replay.backtesting.strategy import Strategy


class {cls}(Strategy):
    """Joins the best bid and ask with `size` lots each while |position| stays within
    `max_position`; pulls a side's quote when the touch moves away from it."""

    def __init__(self, size: int = 1, max_position: int = 20, every: int = 100):
        # constructor arguments are what `--param KEY=VALUE` sets (checked against the
        # defaults' types: an int default takes an int)
        self.size, self.max_position = size, max_position
        self.every = every          # on_book runs after every `every` market messages
        self.quotes = {{"buy": None, "sell": None}}   # our live order id per side

    def on_start(self, ctx):
        """Once, before the first market message."""

    def on_book(self, ctx, book):
        """After every `every` market messages; `book` is the top of book as we see it."""
        if not (book.bid and book.ask):     # 0 on an empty side
            return
        for side, price, room in (("buy", book.bid, ctx.position + self.size <= self.max_position),
                                  ("sell", book.ask, ctx.position - self.size >= -self.max_position)):
            oid = self.quotes[side]
            live = oid is not None and oid in ctx.open_orders
            if live and (not room or ctx.open_orders[oid].price != price):
                ctx.cancel(oid)             # the touch moved, or the position limit is reached
                live = False
            if not live:
                self.quotes[side] = None
                if room:
                    send = ctx.buy if side == "buy" else ctx.sell
                    self.quotes[side] = send(price, self.size, post_only=True)

    def on_fill(self, ctx, fill):
        """Once per fill of one of our orders (ctx.position and ctx.cash already include it).
        Overriding it (or on_order) makes the driver stop after every message that fills us,
        which is slower; delete it if the strategy does not need it."""

    # def on_order(self, ctx, event):   # every execution report of our orders (EVENT_DTYPE row)
    # def on_timer(self, ctx, ts):      # every `timer_ns` of local time (set self.timer_ns)
    # def on_phase(self, ctx, event):   # auctions and halts of the traded symbol
'''


def class_name_for(name: str) -> str:
    """Return the class name for strategy file ``name`` (``my_strategy`` -> ``MyStrategy``).

    Raises UsageError naming ``name`` when it gives no valid Python identifier."""
    stem = os.path.splitext(os.path.basename(name))[0]
    cls = "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", stem) if part)
    if not cls.isidentifier() or keyword.iskeyword(cls) or cls == "Strategy":
        raise UsageError(f"new-strategy {printable(name)}: cannot make a class name of it; use "
                         "letters, digits and _ starting with a letter (e.g. my_strategy), or "
                         "give --class")
    return cls


def strategy_source(path: str, cls: str) -> str:
    """Return the text of the template file for class ``cls`` written at ``path``."""
    return TEMPLATE.format(cls=cls, path=path)


SCENARIO_EXAMPLES = """\
examples:
  exsim new-scenario scenario_a               # scenario_a.toml, a copy of the 'default' preset
  exsim new-scenario day --from trading_day   # another preset to start from
"""


def register(sub, parents, formatter) -> None:
    """Add the ``new-strategy`` and ``new-scenario`` subcommands to the ``sub`` subparsers
    action."""
    s = sub.add_parser(
        "new-scenario", parents=parents, formatter_class=formatter, epilog=SCENARIO_EXAMPLES,
        help="write a scenario file to start from (a copy of a preset, to edit and simulate)",
        description="Write NAME.toml holding a preset scenario (default: 'default'), with its "
                    "comments, to edit\nand run with `exsim simulate NAME.toml`. The format is "
                    "in docs/scenarios.md (`exsim docs scenarios`).\nAn existing file is kept "
                    "unless --force.")
    s.add_argument("name", metavar="NAME", help="file to write (.toml is added if missing)")
    s.add_argument("--from", dest="preset", default="default", metavar="PRESET",
                   help="the preset to copy (default: %(default)s)")
    s.add_argument("--force", action="store_true", help="overwrite an existing file")
    s.set_defaults(func=cmd_new_scenario)

    p = sub.add_parser(
        "new-strategy", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="write a strategy file to start from (runs with backtest --strategy FILE.py:CLASS)",
        description="Write NAME.py holding a working Strategy subclass (a quoter at the touch, "
                    "every callback\nshown) that `exsim backtest FLOW --strategy NAME.py:CLASS` "
                    "loads by its path: no\nPYTHONPATH needed. CLASS is NAME in CamelCase "
                    "(my_strategy -> MyStrategy) unless --class\ngives it. An existing file is "
                    "kept unless --force.")
    p.add_argument("name", metavar="NAME", help="file to write (.py is added if missing)")
    p.add_argument("--class", dest="cls", metavar="CLASS", help="class name (default: from NAME)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(func=cmd_new_strategy)


def cmd_new_scenario(args) -> int:
    """``exsim new-scenario``: copy a preset's file; returns 0. Raises UsageError for an
    unknown preset, or naming the file when it exists (without --force), is a directory or
    cannot be written."""
    from exsim.scenarios.scenario import list_presets, load_scenario

    path = args.name if args.name.endswith(".toml") else args.name + ".toml"
    if args.preset not in list_presets():
        raise UsageError(f"--from {printable(args.preset)}: no such preset; presets: "
                         f"{', '.join(list_presets())}")
    if os.path.isdir(path):
        raise UsageError(f"new-scenario {printable(path)}: is a directory")
    if os.path.exists(path) and not args.force:
        raise UsageError(f"new-scenario {printable(path)}: exists; give --force to replace it")
    with open(load_scenario(args.preset).source, encoding="utf-8") as f:
        text = f.read()
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise out_failed(path, e, option="new-scenario") from None
    print(f"wrote {printable(path)} (a copy of preset {args.preset!r}); run it with:")
    print(f"  exsim simulate {printable(path)} --out runs/{printable(os.path.splitext(os.path.basename(path))[0])}")
    return EXIT_OK


def cmd_new_strategy(args) -> int:
    """``exsim new-strategy``: write the template; returns 0. Raises UsageError naming the file
    when it exists (without --force), is a directory or cannot be written."""
    path = args.name if args.name.endswith(".py") else args.name + ".py"
    cls = args.cls or class_name_for(path)
    if not cls.isidentifier() or keyword.iskeyword(cls):
        raise UsageError(f"--class {printable(cls)}: not a Python class name")
    if os.path.isdir(path):
        raise UsageError(f"new-strategy {printable(path)}: is a directory")
    if os.path.exists(path) and not args.force:
        raise UsageError(f"new-strategy {printable(path)}: exists; give --force to replace it")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(strategy_source(path, cls))
    except OSError as e:
        raise out_failed(path, e, option="new-strategy") from None
    print(f"wrote {printable(path)} (class {cls}); run it with:")
    print(f"  exsim backtest default --symbol JPM --strategy {printable(path)}:{cls}")
    return EXIT_OK
