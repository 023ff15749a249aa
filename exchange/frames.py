"""Table rows as labelled columns and pandas DataFrames (the notebook view of exsim's arrays).

``labelled_columns(rows, symbols)`` turns a structured array (an engine output, a stored table,
a backtest's orders) into {column: 1-d array}: every field in dtype order, the enum codes as
their names (``side``/``aggressor_side``: Side, ``kind``: Kind, ``order_type``: OrderType,
``tif``: Tif, ``event``: Event, ``reason``: Reason, ``phase``: Phase) and, when names are given, ``symbol`` as the
symbol's name. ``to_frame`` wraps that in a ``pandas.DataFrame``.

Invariants:
- Row i of every column is row i of ``rows``; a numeric column is a copy of the field (same
  dtype), a labelled one an object array of str.
- A code outside its enum (a rejected message may carry any byte) and a symbol id without a
  name stay visible as their number in text ("7"), never an error and never a wrong name.
- pandas is optional (the ``exsim[pandas]`` extra): only ``to_frame`` imports it, and raises
  UsageError naming the extra when it is missing.

This module imports only numpy and ``exchange.schema``, so the store can use it without numba.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum

import numpy as np

from exsim.exchange.errors import UsageError

from .schema import Event, Kind, OrderType, Phase, Reason, Side, Tif

__all__ = ["LABELLED", "labelled_columns", "to_frame", "require_pandas", "symbol_names"]

# field name -> the enum whose names label its codes
LABELLED: dict[str, type[IntEnum]] = {
    "side": Side, "aggressor_side": Side, "kind": Kind, "order_type": OrderType, "tif": Tif,
    "event": Event, "reason": Reason, "phase": Phase,
}

PANDAS_HINT = "pip install 'exsim[pandas]'"


def require_pandas():
    """Return the ``pandas`` module; raise UsageError naming the ``exsim[pandas]`` extra if it
    is not installed."""
    try:
        import pandas
    except ImportError:
        raise UsageError(f"DataFrames need pandas, which is not installed: {PANDAS_HINT}") from None
    return pandas


def symbol_names(symbols) -> dict[int, str]:
    """Return {symbol id: name} from ``symbols``: None (no names), a mapping of id -> name, a
    mapping of name -> id (as ``Engine.symbols``), or a sequence of names in id order. Raises
    UsageError for anything else."""
    if symbols is None:
        return {}
    if isinstance(symbols, Mapping):
        items = list(symbols.items())
        if all(isinstance(k, str) for k, _ in items):
            return {int(v): k for k, v in items}
        return {int(k): str(v) for k, v in items}
    if isinstance(symbols, Sequence) and not isinstance(symbols, (str, bytes)):
        return {i: str(name) for i, name in enumerate(symbols)}
    raise UsageError(f"symbols must be a mapping or a sequence of names, got "
                     f"{type(symbols).__name__}")


def _labels(codes: np.ndarray, names: Mapping[int, str]) -> np.ndarray:
    """Object array of the name of each code (its number as text where ``names`` lacks it)."""
    if not codes.size:
        return np.empty(0, object)
    uniq, inverse = np.unique(codes, return_inverse=True)   # why: one lookup per distinct code
    table = np.array([names.get(int(c), str(int(c))) for c in uniq.tolist()], object)
    return table[inverse.reshape(-1)]


def labelled_columns(rows: np.ndarray, symbols=None) -> dict[str, np.ndarray]:
    """Return {field: column} for a structured array, enum codes as names and ``symbol`` as the
    names given by ``symbols`` (see ``symbol_names``; None keeps the ids). Raises UsageError if
    ``rows`` is not a 1-d structured array."""
    if not isinstance(rows, np.ndarray) or rows.dtype.names is None or rows.ndim != 1:
        raise UsageError("rows must be a 1-d numpy structured array")
    names = symbol_names(symbols)
    out: dict[str, np.ndarray] = {}
    for field in rows.dtype.names:
        col = rows[field]
        if field in LABELLED:
            enum = LABELLED[field]
            out[field] = _labels(col, {int(m): m.name for m in enum})
        elif field == "symbol" and names:
            out[field] = _labels(col, names)
        else:
            out[field] = np.array(col, copy=True)
    return out


def to_frame(rows: np.ndarray, symbols=None, extra: Mapping[str, np.ndarray] | None = None):
    """Return a ``pandas.DataFrame`` of ``labelled_columns(rows, symbols)``, followed by the
    ``extra`` columns (each as long as ``rows``). Raises UsageError naming the ``exsim[pandas]``
    extra when pandas is missing, or if an extra column's length differs."""
    pd = require_pandas()
    cols = labelled_columns(rows, symbols)
    for name, col in (extra or {}).items():
        if len(col) != len(rows):
            raise UsageError(f"column {name!r} has {len(col)} values for {len(rows)} rows")
        cols[name] = np.asarray(col)
    return pd.DataFrame(cols)
