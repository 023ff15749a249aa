"""Vectorised parsing helpers shared by the loaders (CSV columns, exact decimals, error locations).

Invariants:
- Every conversion is exact: decimal strings become integers scaled by a power of ten by string
  arithmetic, never through a float, so "0.1" at scale 2 is exactly 10.
- The fast path converts whole columns with numpy; only when it fails does a slow loop run, and only
  to find the first bad line so that the InputError can name it. Line numbers in messages are
  1-based line numbers of the file (a header line counts).
- Nothing here writes anywhere: a failed load leaves no partial output behind.
- Ownership (docs/semantics.md, "Ownership"): ``owner_traders`` gives, per message, the trader of
  the NEW that entered the order it names (the latest NEW of its symbol and order id at or before
  it), so loaders of feeds whose cancels carry no trader id write the owner's with
  ``fill_owners``; an engine with ``ownership=True`` then takes the feed as one without it does.

Known limits: files are read whole into memory (the largest real sample is a few MB).
"""

from __future__ import annotations

import gzip
import os

import numpy as np

from exsim.exchange.errors import InputError, UsageError
from exsim.exchange.schema import Kind

__all__ = ["read_lines", "split_columns", "column_int", "column_decimal", "column_choice",
           "owner_traders", "fill_owners", "check_zone"]


def check_zone(tz: str, what: str = "--tz") -> str:
    """Return ``tz`` if it names an IANA time zone (``America/New_York``, ``UTC``).

    Raises UsageError naming ``what`` otherwise."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise UsageError(f"{what} {tz!r}: not a time zone; give an IANA name such as "
                         "America/New_York, Europe/London or UTC") from None
    return str(tz)



def read_lines(path: str | os.PathLike) -> list[str]:
    """Return the lines of a text file (gzip when the name ends in .gz), without line ends.

    A trailing empty line is dropped. Raises InputError if the file cannot be read or decoded.
    """
    path = os.fspath(path)
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                text = fh.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        # EOFError: a truncated gzip stream; say so rather than leak a low-level error.
        raise InputError(f"{path}: cannot read ({exc})") from exc
    lines = text.splitlines()
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def split_columns(path: str, lines: list[str], ncols: int, first_line: int, what: str) -> np.ndarray:
    """Split comma-separated lines into a 2-D array of strings, shape (len(lines), ncols).

    ``first_line`` is the 1-based file line number of ``lines[0]``; ``what`` names the expected
    columns for the error message. Raises InputError naming the first line with a wrong column count.
    """
    if not lines:
        return np.empty((0, ncols), dtype="U1")
    arr = np.array(lines)
    counts = np.char.count(arr, ",")
    bad = np.flatnonzero(counts != ncols - 1)
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"{path}, line {_line(first_line, i)}: expected {ncols} comma-separated columns ({what}), "
            f"got {int(counts[i]) + 1}: {lines[i][:80]!r}"
        )
    return np.array([ln.split(",") for ln in lines])


def _line(first_line, i: int) -> int:
    """File line of row i: ``first_line`` is the line of row 0, or an array of each row's line."""
    if isinstance(first_line, np.ndarray):
        return int(first_line[i])
    return first_line + i


def _locate(path: str, col: np.ndarray, ok, first_line: "int | np.ndarray", name: str, expected: str):
    for i, s in enumerate(col):
        if not ok(s):
            raise InputError(f"{path}, line {_line(first_line, i)}: column {name!r} should be {expected}, got {str(s)!r}")
    raise InputError(f"{path}: column {name!r} should be {expected}")  # pragma: no cover


def _is_int(s: str) -> bool:
    t = s[1:] if s[:1] == "-" else s
    return t.isdigit()


def column_int(path: str, col: np.ndarray, first_line: "int | np.ndarray", name: str) -> np.ndarray:
    """Return a column of integer strings as int64. Raises InputError naming the first bad line."""
    try:
        return col.astype(np.int64)
    except (ValueError, OverflowError):
        _locate(path, col, _is_int, first_line, name, "an integer")


def _is_decimal(s: str) -> bool:
    t = s[1:] if s[:1] == "-" else s
    whole, _, frac = t.partition(".")
    return whole.isdigit() and (frac == "" or frac.isdigit())


def column_decimal(path: str, col: np.ndarray, digits: int, first_line: "int | np.ndarray", name: str) -> np.ndarray:
    """Return decimal strings as int64 multiplied by 10**digits, exactly (no float is involved).

    "34200.01746" with digits=9 is 34200017460000. Raises InputError naming the first line that is
    not a decimal number or that has non-zero digits beyond ``digits`` decimal places (it would not
    be a whole number of units).
    """
    col = np.asarray(col, dtype=str)
    if col.size == 0:
        return np.zeros(0, np.int64)
    neg = np.char.startswith(col, "-")
    body = np.where(neg, np.char.lstrip(col, "-"), col)
    parts = np.char.partition(body, ".")
    whole, frac = parts[:, 0], np.char.rstrip(parts[:, 2], "0")
    too_fine = np.char.str_len(frac) > digits
    if too_fine.any():
        i = int(np.flatnonzero(too_fine)[0])
        raise InputError(
            f"{path}, line {_line(first_line, i)}: column {name!r} value {str(col[i])!r} is not a whole number "
            f"of units of 1e-{digits}"
        )
    frac = np.char.ljust(frac, digits, "0") if digits else np.zeros(col.size, dtype="U1")
    try:
        w = whole.astype(np.int64)
        f = frac.astype(np.int64) if digits else np.zeros(col.size, np.int64)
    except (ValueError, OverflowError):
        _locate(path, col, _is_decimal, first_line, name, "a decimal number")
    if not np.all(np.char.isdigit(whole)):
        _locate(path, col, _is_decimal, first_line, name, "a decimal number")
    out = w * 10**digits + f
    return np.where(neg, -out, out)


def column_choice(path: str, col: np.ndarray, choices: dict[str, int], first_line: "int | np.ndarray", name: str) -> np.ndarray:
    """Map a column of words to small ints by ``choices``; raises InputError on the first unknown word."""
    out = np.full(col.shape, -1, np.int64)
    for word, code in choices.items():
        out[col == word] = code
    bad = np.flatnonzero(out < 0)
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"{path}, line {_line(first_line, i)}: column {name!r} should be one of {sorted(choices)}, got {str(col[i])!r}"
        )
    return out


def owner_traders(orders: np.ndarray) -> np.ndarray:
    """Return int64 per row of ORDER_DTYPE ``orders`` (in engine order): the trader of the latest
    NEW with the same symbol and order id at or before the row, or -1 when there is none (a
    cancel of an id never entered). One stable sort; no per-row Python."""
    n = len(orders)
    if n == 0:
        return np.zeros(0, np.int64)
    pos = np.arange(n)
    order = np.lexsort((pos, orders["order_id"], orders["symbol"]))
    sym, oid = orders["symbol"][order], orders["order_id"][order]
    start = np.ones(n, bool)
    start[1:] = (sym[1:] != sym[:-1]) | (oid[1:] != oid[:-1])
    group_start = np.maximum.accumulate(np.where(start, pos, 0))
    last_new = np.maximum.accumulate(np.where(orders["kind"][order] == Kind.NEW, pos, -1))
    traders = orders["trader"][order].astype(np.int64)
    owner_sorted = np.where(last_new >= group_start, traders[np.maximum(last_new, 0)], -1)
    owner = np.empty(n, np.int64)
    owner[order] = owner_sorted
    return owner


def fill_owners(orders: np.ndarray, where: np.ndarray | None = None) -> int:
    """Write the owner's trader (``owner_traders``) into the CANCEL and MODIFY rows of ``orders``
    that name a known order, in place; only rows where ``where`` (bool per row, default all) is
    True. Returns the number of rows whose trader changed."""
    owner = owner_traders(orders)
    kind = orders["kind"]
    take = ((kind == Kind.CANCEL) | (kind == Kind.MODIFY)) & (owner >= 0)
    if where is not None:
        take &= where
    changed = take & (orders["trader"].astype(np.int64) != owner)
    orders["trader"][take] = owner[take]
    return int(changed.sum())
