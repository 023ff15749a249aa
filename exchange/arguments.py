"""The checks of what Python callers hand the engine: integers for message fields, enum names.

Shared by the single engine (``exchange.single``) and the sharded one (``exchange.shards``), so
both accept and refuse exactly the same arguments with exactly the same messages.

Invariants:
- A check returns a plain Python int (never bool, never a numpy scalar) within the range it was
  given, or raises UsageError naming the argument: nothing is truncated (1.5 -> 1), wrapped or
  left to numpy's OverflowError.
- The code tables (``SIDES`` ...) hold exactly what ``parse_enum`` accepts for str and exact int
  keys, so ``enum_arg``'s dict lookup and ``parse_enum`` always agree.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import UsageError
from .schema import OrderType, Phase, Side, Tif

__all__ = ["I64", "U64", "U32", "SIDES", "TYPES", "TIFS", "PHASES", "codes", "is_bool",
           "int_arg", "parse_enum", "enum_arg"]

# the range of each message field a per-order call fills in (its ORDER_DTYPE type)
I64 = (-(1 << 63), (1 << 63) - 1)
U64 = (0, (1 << 64) - 1)
U32 = (0, (1 << 32) - 1)


def codes(enum) -> dict:
    """Return {name in lower and upper case, and int code: code} of ``enum``, for the fast
    path of ``enum_arg`` (str and exact int keys only: True, 1.0 and members go the slow way).
    Raises nothing."""
    table = {}
    for m in enum:
        table[m.name.lower()] = table[m.name.upper()] = table[int(m)] = int(m)
    return table


SIDES, TYPES, TIFS, PHASES = codes(Side), codes(OrderType), codes(Tif), codes(Phase)


def is_bool(value) -> bool:
    """Return whether ``value`` is a Python or numpy bool (refused where an int is asked for).
    Raises nothing."""
    return isinstance(value, (bool, np.bool_))


def int_arg(value, what: str, lo: int, hi: int) -> int:
    """Return ``value`` as a Python int in [lo, hi], or raise UsageError naming ``what``.

    Takes ints, numpy integers and integral finite floats (2.0); refuses bool, non-integral or
    non-finite floats and everything else, so nothing is truncated (1.5 -> 1), wrapped or left
    to numpy's OverflowError.
    """
    if type(value) is int and lo <= value <= hi:     # the common case, first
        return value
    if isinstance(value, (int, np.integer)) and not is_bool(value):
        v = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) \
            and float(value).is_integer():
        v = int(value)
    else:
        raise UsageError(f"{what} must be an integer; got {value!r}")
    if not lo <= v <= hi:
        raise UsageError(f"{what} must be in [{lo}, {hi}]; got {value!r}")
    return v


def parse_enum(enum, value, what: str) -> int:
    """Return the code of ``value`` (a member's name, any case, or its int code) in ``enum``.

    Raises UsageError naming ``what`` for an unknown name or code, a bool or a non-int."""
    if isinstance(value, str):
        try:
            return int(enum[value.upper()])
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum)
            raise UsageError(f"{what} must be one of {names}; got {value!r}") from None
    if not isinstance(value, (int, np.integer)) or is_bool(value):
        names = ", ".join(m.name.lower() for m in enum)
        raise UsageError(f"{what} must be one of {names} or its code; got {value!r}")
    try:
        return int(enum(int(value)))
    except ValueError:
        raise UsageError(f"{what} must be one of {[int(m) for m in enum]}; got {value!r}") from None


def enum_arg(table, enum, value, what: str) -> int:
    """Return ``parse_enum(enum, value, what)``, looked up in ``table`` (``codes(enum)``) first
    for an exact str or int. Raises UsageError as ``parse_enum`` does."""
    t = type(value)
    if t is str or t is int:
        code = table.get(value)
        if code is not None:
            return code
    return parse_enum(enum, value, what)
