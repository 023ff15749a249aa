"""The ``exsim`` command line: a thin layer over the exchange, scenarios, store and replay libraries.

Subcommands (each in its own module, each ``--help`` carrying an example)::

    simulate, demo            replay/cli/run.py
    ls, book, verify, rerun   replay/cli/inspect.py
    stats                     replay/cli/inspect.py
    export                    replay/cli/export.py
    backtest                  replay/cli/backtest.py
    whatif                    replay/cli/whatif.py
    sweep                     replay/cli/sweep.py
    new-strategy, new-scenario replay/cli/template.py
    docs                      replay/cli/pages.py
    bench                     replay/cli/bench.py
    serve, account            replay/cli/serve.py
    warmup                    replay/cli/warmup.py

Exit status: 0 ok, 1 a verification or determinism check failed, 2 usage or input error.

Invariants:
- ``main(argv)`` returns the exit status and never raises for a user mistake: argparse errors,
  ``ExsimError`` and ``OSError`` become one ``exsim: error: ...`` line on stderr and status 2
  (non-printable characters escaped: a message may quote a stored name). A damaged data
  directory raises ExsimError from the store, never a raw sqlite3/json/ValueError. Anything
  else is a bug and keeps its traceback.
- ``docs/cli.md`` is generated from the parser itself (``render_docs``); a test fails when the
  committed file differs, so the help text is the single source of the CLI's documentation.
"""

from __future__ import annotations

import argparse
import os
import sys

from exsim.exchange import compiling
from exsim.exchange.errors import ExsimError, VerificationError

from exsim.replay.cli import backtest as cli_backtest, bench as cli_bench, export as cli_export
from exsim.replay.cli import inspect as cli_inspect, run as cli_run, sweep as cli_sweep
from exsim.replay.cli import serve as cli_serve, template as cli_template, whatif as cli_whatif
from exsim.replay.cli import pages as cli_pages, warmup as cli_warmup
from exsim.replay.cli.common import EXIT_FAILED, EXIT_USAGE, Formatter, log, printable, setup_logging

__all__ = ["main", "build_parser", "render_docs", "write_docs", "COMMANDS"]

PROG = "exsim"
DOCS_WIDTH = 100
# The order commands appear in help and docs.
COMMANDS = (
    "simulate", "demo", "ls", "book", "verify", "rerun", "stats", "export", "backtest", "whatif",
    "sweep", "new-scenario", "new-strategy", "bench", "serve", "account", "warmup", "docs",
)

DESCRIPTION = """\
exsim: a deterministic exchange simulator. Simulate order flow into a journaled, checksummed
data directory, then rebuild any historical book, verify every deal against its orders, re-run
the journal byte for byte, export and analyse it.

exit status: 0 ok, 1 verification failed, 2 usage or input error"""

EPILOG = """\
example:
  exsim demo                                 # simulate -> store -> replay -> verify, in one go
  exsim simulate --out runs/first && exsim verify runs/first
  exsim COMMAND --help                       # details and an example for each command
  exsim docs                                 # the documentation pages, installed with exsim
"""


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("exsim")
    except Exception:   # why broad: an uninstalled checkout has no metadata; --version must still work
        return "unknown"


def build_parser(width: int | None = None) -> argparse.ArgumentParser:
    """Return the ``exsim`` argument parser.

    width: help text width (None: the terminal's, capped at 100); ``render_docs`` fixes it so the
    generated docs do not depend on the terminal.
    """
    if width is None:
        try:
            width = min(DOCS_WIDTH, os.get_terminal_size(sys.stdout.fileno()).columns - 2)
        except (OSError, ValueError):
            width = DOCS_WIDTH

    def fmt(prog):
        return Formatter(prog, width=width)

    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars (they are also off when stderr is not a terminal)")
    common.add_argument("-v", "--verbose", action="store_true",
                        help="log what the command does (steps, inputs, timings) to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # argparse lists subcommands in the order they are added: the order of COMMANDS
    cli_run.register(sub, [common], fmt)
    cli_inspect.register(sub, [common], fmt)
    cli_export.register(sub, [common], fmt)
    cli_backtest.register(sub, [common], fmt)
    cli_whatif.register(sub, [common], fmt)
    cli_sweep.register(sub, [common], fmt)
    cli_template.register(sub, [common], fmt)
    cli_bench.register(sub, [common], fmt)
    cli_serve.register(sub, [common], fmt)
    cli_warmup.register(sub, [common], fmt)
    cli_pages.register(sub, [common], fmt)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``exsim`` command line with ``argv`` (default ``sys.argv[1:]``).

    Returns the exit status: 0 ok, 1 verification failed, 2 usage or input error. Never raises
    for a user mistake (bad arguments, missing or malformed files, unknown symbols).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # --help, --version and argparse usage errors
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
    setup_logging(getattr(args, "verbose", False))
    # why here: every command may compile kernels on a cold cache; the notice is the listener's
    compiling.set_quiet(True if getattr(args, "quiet", False) else None)
    compiling.install()
    log.info("%s %s", args.command, " ".join(printable(a) for a in (argv or sys.argv[1:])[1:]))
    try:
        code = int(args.func(args))
        log.info("%s: exit %d", args.command, code)
        return code
    except BrokenPipeError:
        # `exsim ls DIR | head`: the reader left; silence the interpreter's final flush too
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141   # 128 + SIGPIPE, as a shell reports a command killed by the pipe
    except VerificationError as e:
        print(f"{PROG}: verification failed: {printable(e)}", file=sys.stderr)
        return EXIT_FAILED
    except (ExsimError, OSError) as e:
        print(f"{PROG}: error: {printable(_describe(e))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


# why a table: the library's errors name its Python arguments; at the command line the same
# advice is an option (each library phrase maps to the option that does the same)
CLI_WORDING = (
    ("pass symbol=", "give --symbol"),
    ("use scheduler='serial'", "use --scheduler serial"),
    ("load with midday='drop'", "use --midday drop"),
    ("use Session.open", "use --force to replace it"),
)


def _describe(e: BaseException) -> str:
    """One line for an error, in the command line's words (``CLI_WORDING``); OSErrors name their
    file (str(e) already does for most)."""
    if isinstance(e, OSError) and e.filename and str(e.filename) not in str(e):
        return f"{e.filename}: {e.strerror or e}"
    text = str(e)
    for library, cli in CLI_WORDING:
        text = text.replace(library, cli)
    return text


# -- documentation -----------------------------------------------------------------------------

DOCS_HEADER = """\
# The `exsim` command line

<!-- Generated by `python -m exsim.replay.cli.docs` from the parser in replay/cli/app.py; do not edit.
     tests/cli_tests/test_cli_docs.py fails when this file is stale. -->

`exsim` is a thin layer over the Python library (`exchange`, `scenarios`, `store`, `replay`).
Every command prints its result to stdout, and progress bars (only on a terminal, never with
`--quiet`), notes ("wrote PATH", the first run's "compiling numba kernels" lines) and
errors to stderr, so `--json` output pipes into `jq`: it is strict JSON, with `null` for a value
that does not exist (never `NaN`).

Exit status: **0** ok, **1** a verification or determinism check failed, **2** usage or input
error (the message names the file or argument; no traceback).

Commands: {toc}
"""


def _help_text(parser: argparse.ArgumentParser) -> str:
    return parser.format_help().rstrip() + "\n"


def render_docs() -> str:
    """Return the Markdown of ``docs/cli.md``: the top-level help and every subcommand's help."""
    parser = build_parser(width=DOCS_WIDTH)
    subs = _subparsers(parser)
    toc = ", ".join(f"[`{c}`](#exsim-{c})" for c in COMMANDS)
    parts = [DOCS_HEADER.format(toc=toc), "## exsim\n", "```text\n" + _help_text(parser) + "```\n"]
    for name in COMMANDS:
        parts.append(f"## exsim {name}\n")
        parts.append("```text\n" + _help_text(subs[name]) + "```\n")
    return "\n".join(parts)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Return {command name: its parser}."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def write_docs(path: str | None = None) -> str:
    """Write ``render_docs()`` to ``path`` (default: docs/cli.md next to this package); return the path."""
    if path is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.path.join(root, "docs", "cli.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_docs())
    return path


if __name__ == "__main__":   # pragma: no cover - `python -m exsim.replay.cli.app`
    sys.exit(main())
