"""Helpers shared by the ``exsim`` subcommands: argument parsing of ranges, progress bars, tables,
opening a data directory and naming its symbols.

Invariants:
- Nothing here prints to stdout except ``print_table``; progress bars and notes go to stderr, so
  a command's stdout is its result and can be piped.
- A user mistake (bad path, unknown symbol, malformed range) raises ``UsageError`` or
  ``StoreError`` with a message naming what was wrong; ``replay.cli.app.main`` turns it into
  ``exsim: error: ...`` and exit status 2.
- Text read from a data directory (symbol names, scenarios, paths) is printed through
  ``printable``: a stored name cannot move the cursor, clear the screen or add a line.
- Data directories are opened read-only (``open_catalog``): inspecting one never writes it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import threading
import time
from typing import Iterable, Sequence

from exsim.exchange.errors import StoreError, UsageError

from exsim.replay.export import symbol_tick_size
from exsim.replay.progress import progress
from exsim.replay.simulation import dir_bytes

__all__ = [
    "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "Formatter", "parse_range", "progress",
    "format_table", "print_table", "open_catalog", "symbol_names", "symbol_tick_size", "resolve_symbol", "note",
    "dir_bytes", "human_bytes", "printable", "json_text", "check_plot_path", "plot_failed",
    "need_pyarrow", "format_number",
    "out_failed", "run_day", "parse_ts", "parse_ts_range", "time_text", "live_progress", "log", "step",
    "setup_logging",
]

# what --verbose shows: the steps a command takes, on stderr (``setup_logging``)
log = logging.getLogger("exsim")

EXIT_OK = 0        # the command did what was asked and every check passed
EXIT_FAILED = 1    # a verification or determinism check found a problem
EXIT_USAGE = 2     # bad arguments or unusable input: nothing was checked


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the examples in descriptions/epilogs as written; wrap at a fixed width.

    why a fixed width: docs/cli.md is generated from ``--help`` and must not depend on the
    terminal of whoever regenerated it.
    """

    def __init__(self, prog: str, width: int = 100):
        super().__init__(prog, max_help_position=32, width=width)


def parse_range(text: str, what: str = "--seq") -> tuple[int, int]:
    """Parse ``LO:HI`` (inclusive; either end may be empty, ``N`` alone means ``N:N``).

    Returns (lo, hi) with the open ends as 0 and 2**62. Raises UsageError when a bound is not an
    integer or lo > hi.
    """
    lo_s, sep, hi_s = text.partition(":")
    if not sep:
        hi_s = lo_s
    try:
        lo = int(lo_s) if lo_s.strip() else 0
        hi = int(hi_s) if hi_s.strip() else 1 << 62
    except ValueError:
        raise UsageError(f"{what} expects LO:HI with integer bounds (e.g. 100:2000), got {text!r}") from None
    if lo > hi:
        raise UsageError(f"{what} {text!r}: the low bound is above the high bound")
    return lo, hi


def run_day(data_dir: str) -> int:
    """Return midnight UTC (ns) of the day of the run's first journaled message (0 for a run
    whose ts count from midnight, or one with no message): what a time of day such as
    ``10:00:00`` is added to. Raises as ``replay.rundir.run_info``."""
    from exsim.replay.rundir import read_table, run_info
    from exsim.replay.timefmt import day_start

    info = run_info(data_dir)
    rows = read_table(info, "orders", None, info.first_seq + 1, info.first_seq + 1, ["ts"])
    return day_start(int(rows["ts"][0])) if rows.size else 0


def parse_ts(text: str, what: str, data_dir: str) -> int:
    """Return the ns timestamp of ``text`` for the run in ``data_dir``: ns, ``HH:MM[:SS[.f]]``
    on the run's first day or an ISO date-time, in the run's time zone
    (``replay.timefmt.RunClock.parse``).

    Raises UsageError naming ``what`` for anything else, and naming the run's first and last
    times when ``text`` is outside them."""
    from exsim.replay.rundir import run_clock

    clock = run_clock(data_dir)
    ts = clock.parse(text, what)
    clock.check(ts, ts, text, data_dir, what)
    return ts


def parse_ts_range(text: str, what: str, data_dir: str) -> tuple[int, int]:
    """Return the inclusive (lo, hi) ns range of ``text`` (``LO..HI`` of ``parse_ts`` forms, or
    the integer ``LO:HI``) for the run in ``data_dir``; UsageError naming ``what`` if malformed
    or if the range holds none of the run's messages (naming its first and last times)."""
    from exsim.replay.rundir import run_clock

    clock = run_clock(data_dir)
    lo, hi = clock.parse_range(text, what)
    clock.check(lo, hi, text, data_dir, what)
    return lo, hi


def time_text(ts: int, data_dir: str) -> str:
    """Return ``ts`` of the run in ``data_dir`` as a time that names its zone
    (``replay.timefmt.RunClock.text``)."""
    from exsim.replay.rundir import run_clock
    return run_clock(data_dir).text(ts)


def printable(text) -> str:
    """Return ``str(text)`` with every non-printable character (control characters such as ESC
    and newline, format characters such as bidi overrides) escaped as Python writes it in a
    string literal (\\x1b, \\n, \\u202e); printable text is unchanged.

    why: names come from data directories, which may come from anyone; printed raw, a name could
    drive the terminal (clear it, rewrite earlier lines) or fake extra output lines. Backslashes
    are left as they are (a literal "\\x1b" then reads like an escaped ESC, but drives nothing),
    so messages that already quote a name with repr are not escaped twice.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def format_table(headers: Sequence[str], rows: Iterable[Sequence], right: Sequence[bool] | None = None) -> str:
    """Return ``rows`` as a plain-text table under ``headers``, every cell through ``printable``.

    Numbers are right-aligned, text left-aligned (or as ``right`` says per column).
    """
    headers = [printable(h) for h in headers]
    rows = [["" if v is None else printable(v) for v in r] for r in rows]
    if right is None:
        sample = rows[0] if rows else [""] * len(headers)
        right = [_numeric(v) for v in sample]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def _numeric(v: str) -> bool:
    try:
        float(v.replace(",", ""))
        return True
    except ValueError:
        return False


def format_number(v) -> str:
    """Return a number as a table cell: ints with thousands separators; floats with separators and
    up to 6 decimals (trailing zeros dropped), so no digit left of the point is ever rounded away;
    floats under 0.001 in 6 significant digits; NaN and infinities as ``nan``/``inf``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return str(v)
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.6g}"
    text = f"{v:,.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def print_table(headers, rows, right=None, title: str | None = None) -> None:
    """Print ``format_table`` to stdout, with an optional title line (through ``printable``) above it."""
    if title:
        print(printable(title))
    print(format_table(headers, rows, right))


def note(message: str) -> None:
    """Print an informational line to stderr (never mixed into a command's result)."""
    print(message, file=sys.stderr)


def open_catalog(data_dir: str):
    """Open the catalog of an existing data directory, read-only, and check every row of it.

    Returns a ``store.Catalog``. Raises StoreError naming the path when it is not a directory or
    holds no catalog (why check first: sqlite would happily create an empty database),
    CorruptionError naming catalog.sqlite when the catalog is damaged anywhere.
    why check it whole: then every command reports a damaged catalog the same way (exit 2,
    before any work), whatever part of it the command happens to need.
    """
    from exsim.store import Catalog

    if not os.path.isdir(data_dir):
        raise StoreError(f"{data_dir}: no such data directory")
    cat = Catalog(data_dir, readonly=True)
    try:
        cat.check()
    except BaseException:
        cat.close()
        raise
    return cat


def symbol_names(catalog) -> dict[int, str]:
    """Return {symbol id: name} from a catalog's checked symbol rows (CorruptionError if one fails)."""
    return {int(r["id"]): str(r["name"]) for r in catalog.symbols()}


def resolve_symbol(catalog, name: str, data_dir: str) -> int:
    """Return the id of symbol ``name`` (a name or an id) in ``catalog`` (``Catalog.resolve_symbol``).

    Raises UsageError naming ``data_dir``'s symbols when it has no such symbol.
    """
    return catalog.resolve_symbol(name)


def human_bytes(n: int) -> str:
    """Return ``n`` bytes as a short human-readable string (1.5 MiB)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _finite(value):
    """Return ``value`` with every NaN or infinite float (in dicts, lists, tuples) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(value, **kwargs) -> str:
    """Return ``value`` as strict JSON text (indent 2 unless ``kwargs`` say otherwise).

    NaN and infinite floats become ``null`` (why: ``NaN`` is not JSON, and ``jq`` or a strict
    parser rejects it). Raises ValueError only for a value ``json`` cannot encode.
    """
    kwargs.setdefault("indent", 2)
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def check_plot_path(path: str, option: str = "--plot", formats: Sequence[str] | None = None) -> str:
    """Check, before any work, that a plot can be written to ``path``; return ``path``.

    ``formats``: the allowed suffixes without the dot (default: every format matplotlib
    writes). Raises UsageError naming ``path`` when matplotlib is not installed, the suffix is
    not an allowed format, ``path`` is a directory, or its directory does not exist or is not
    writable.
    """
    path = os.fspath(path)
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise UsageError(f"{option} needs matplotlib, which is not installed: "
                         "pip install 'exsim[plot]'") from None
    if formats is None:
        formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    if suffix not in formats:
        raise UsageError(f"{option} {printable(path)}: cannot write a plot as "
                         f"{'.' + suffix if suffix else 'a file without a suffix'}; "
                         f"use {', '.join('.' + f for f in formats)}")
    if os.path.isdir(path):
        raise UsageError(f"{option} {printable(path)}: is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {printable(path)}: directory {printable(folder)} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {printable(path)}: directory {printable(folder)} is not writable")
    return path


def plot_failed(path: str, error: BaseException, option: str = "--plot") -> UsageError:
    """Return the UsageError (one line, naming ``path``) for a plot that matplotlib failed to
    write."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return UsageError(f"{option} {printable(path)}: cannot write the plot: {printable(first)}")


def out_failed(out: str, error: OSError, option: str = "--out") -> OSError | UsageError:
    """Return the error to raise for ``error`` met while writing ``out``: a UsageError naming
    ``option`` and ``out`` when ``error`` is about ``out``'s hidden temporary sibling (a name the
    user never gave) or its directory, else ``error`` itself."""
    name = os.path.basename(os.path.abspath(out))
    failed = os.fspath(error.filename) if error.filename is not None else ""
    if os.path.basename(failed).startswith(f".{name}.") or os.path.abspath(failed or out) in (
            os.path.abspath(out), os.path.dirname(os.path.abspath(out))):
        parent = os.path.dirname(os.path.abspath(out))
        why = error.strerror or str(error)
        return UsageError(f"{option} {out}: cannot write it in {parent} ({why})")
    return error


def need_pyarrow() -> None:
    """Return None if pyarrow (Parquet) can be imported; else raise UsageError naming the
    ``parquet`` extra (a small install, unlike ``bench``)."""
    try:
        import pyarrow.parquet  # noqa: F401 - only its presence is checked
    except ImportError:
        raise UsageError("Parquet needs pyarrow, which is not installed: "
                         "pip install 'exsim[parquet]'") from None


class _Elapsed(logging.Formatter):
    """``exsim: MESSAGE  [+S.SSS s]``: each line says how long after the command started it
    came, so ``-v`` shows where the time goes."""

    def __init__(self):
        super().__init__()
        self.start = time.perf_counter()

    def format(self, record) -> str:
        return f"exsim: {record.getMessage()}  [+{time.perf_counter() - self.start:.3f} s]"


@contextlib.contextmanager
def step(what: str):
    """Log (``-v``) ``what`` when the block ends, with the seconds it took; yields None.
    A block that raises logs nothing (the error says what happened)."""
    t0 = time.perf_counter()
    yield
    log.info("%s: %.3f s", what, time.perf_counter() - t0)


def setup_logging(verbose: bool) -> None:
    """With ``verbose``, send INFO records of the exsim loggers ("exsim" and the library's
    "replay", "store", "scenarios") to stderr as ``exsim: MESSAGE  [+S.SSS s]`` lines (the
    time since the command started); without, only
    warnings and worse (Python's default). Returns None. why stderr: stdout is the result."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Elapsed())
    for name in ("exsim", "replay", "store", "scenarios"):
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            if getattr(h, "_exsim_cli", False):
                logger.removeHandler(h)   # why: main() may run many times in one process (tests)
        handler._exsim_cli = True
        if verbose:
            logger.addHandler(handler)
        logger.setLevel(logging.INFO if verbose else logging.NOTSET)
        logger.propagate = not verbose


@contextlib.contextmanager
def live_progress(desc: str, *, unit: str = "msg", quiet: bool = False):
    """Yield ``tell(done, total, what=None)``, which moves a tqdm bar on stderr to ``done`` of
    ``total`` (``what``: the step now running, shown after ``desc``). No bar when ``quiet`` or
    stderr is not a terminal (``replay.progress.progress``): ``tell`` then does nothing.

    The bar's clock is redrawn every second by a helper thread, so a long step that reports
    nothing (the first run's kernel compile, a big read) still shows time passing."""
    bar = progress(total=None, desc=desc, unit=unit, quiet=quiet)
    if bar.disable:
        bar.close()
        yield lambda done, total, what=None: None
        return
    stop = threading.Event()

    def redraw():
        while not stop.wait(1.0):
            bar.refresh()

    thread = threading.Thread(target=redraw, name="exsim-progress", daemon=True)
    thread.start()

    def tell(done, total, what=None):
        if total is not None and bar.total != total:
            bar.total = total
        if what:
            bar.set_description_str(f"{desc}: {what}", refresh=False)
        bar.update(int(done) - bar.n)

    try:
        yield tell
    finally:
        stop.set()
        thread.join()
        bar.refresh()   # why: tqdm skips draws within mininterval; the final count must show
        bar.close()
