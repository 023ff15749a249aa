"""Vectorised parsing helpers shared by the loaders (CSV columns, exact decimals, error locations).

Invariants:
- Every conversion is exact: decimal strings become integers scaled by a power of ten by string
  arithmetic, never through a float, so "0.1" at scale 2 is exactly 10.
- The fast path converts whole columns with numpy; only when it fails does a slow loop run, and only
  to find the first bad line so that the InputError can name it. Line numbers in messages are
  1-based line numbers of the file (a header line counts).
- Nothing here writes anywhere: a failed load leaves no partial output behind.

Known limits: files are read whole into memory (the largest real sample is a few MB).
"""

from __future__ import annotations

import gzip
import os

import numpy as np

from exchange.errors import InputError

__all__ = ["read_lines", "split_columns", "column_int", "column_decimal", "column_choice"]


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
