"""The four stored tables and their dtypes, derived from exchange.schema (never redeclared).

Invariants:
- ``orders`` is stored with a leading int64 ``seq`` (the n-th message of a run has seq n); the
  other tables already carry ``seq`` in their schema dtype.
- Stored and read arrays use the schema's aligned dtypes; on disk (WAL payloads) the same fields
  are written packed, without padding, so bytes on disk never depend on uninitialised padding.
"""

from __future__ import annotations

import numpy as np

from exchange.schema import ORDER_DTYPE, TABLE_DTYPES

__all__ = ["TABLES", "STORED_DTYPES", "packed", "orders_with_seq", "table_dtype"]

TABLES = ("orders", "fills", "l2", "events")


def packed(dtype: np.dtype) -> np.dtype:
    """Return ``dtype`` with the same fields in the same order and no padding."""
    return np.dtype([(name, dtype.fields[name][0]) for name in dtype.names])


STORED_DTYPES = {
    "orders": np.dtype([("seq", "<i8")] + [(n, ORDER_DTYPE.fields[n][0]) for n in ORDER_DTYPE.names],
                       align=True),
    "fills": TABLE_DTYPES["fills"],
    "l2": TABLE_DTYPES["l2"],
    "events": TABLE_DTYPES["events"],
}


def table_dtype(table: str) -> np.dtype:
    """Return the stored dtype of ``table``; raises UsageError for an unknown table name."""
    from exchange.errors import UsageError

    try:
        return STORED_DTYPES[table]
    except KeyError:
        raise UsageError(f"unknown table {table!r}; tables are {', '.join(TABLES)}") from None


def orders_with_seq(orders: np.ndarray, first_seq: int) -> np.ndarray:
    """Return the stored form of an order batch: its rows with seq first_seq, first_seq+1, ..."""
    out = np.zeros(orders.size, STORED_DTYPES["orders"])
    out["seq"] = np.arange(first_seq, first_seq + orders.size, dtype=np.int64)
    for name in ORDER_DTYPE.names:
        out[name] = orders[name]
    return out
