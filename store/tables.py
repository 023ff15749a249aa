"""The four stored tables and their dtypes, derived from exchange.schema (never redeclared).

An order row has three forms: the engine's (``ORDER_DTYPE``, no seq), the WAL's (the same
fields packed, seq implied by the record's first seq: store.wal.format.WIRE) and the stored one
(``STORED_DTYPES["orders"]``: seq first). ``orders_with_seq`` and ``orders_without_seq`` are
the one conversion between the engine's and the stored form.

Order rows written before stops, icebergs, minimum quantities and GTD existed hold only the
first 11 fields (``LEGACY_ORDER_DTYPE``, 45 bytes packed: WAL files of versions 1-4); segments
of those orders have no column for the fields added since (``ADDED_COLUMNS``). Such rows read
as if the added fields were 0 (``widen_legacy_orders``; segments: ``store.segment``), which is
what those fields mean for an order that has none of the new features.

Invariants:
- ``orders`` is stored with a leading int64 ``seq`` (the n-th message of a run has seq n); the
  other tables already carry ``seq`` in their schema dtype.
- Stored and read arrays use the schema's aligned dtypes; on disk (WAL payloads) the same fields
  are written packed, without padding, so bytes on disk never depend on uninitialised padding.
"""

from __future__ import annotations

import numpy as np

from exchange.schema import ORDER_DTYPE, TABLE_DTYPES

__all__ = ["TABLES", "STORED_DTYPES", "packed", "orders_with_seq", "orders_without_seq", "table_dtype",
           "LEGACY_ORDER_DTYPE", "ADDED_COLUMNS", "widen_legacy_orders"]

TABLES = ("orders", "fills", "l2", "events")

# The order row of WAL files of versions 1-4 (packed, 45 bytes), declared here once and for
# good: those files hold exactly these bytes whatever ORDER_DTYPE becomes.
LEGACY_ORDER_DTYPE = np.dtype([
    ("ts", "<i8"), ("order_id", "<u8"), ("price", "<i8"), ("qty", "<i8"), ("symbol", "<u4"),
    ("trader", "<u4"), ("kind", "u1"), ("order_type", "u1"), ("tif", "u1"), ("flags", "u1"),
    ("side", "u1"),
])
# why checked at import: widening copies the legacy fields by name into ORDER_DTYPE, which is
# only right while they are its leading fields with the same types
if ORDER_DTYPE.names[:len(LEGACY_ORDER_DTYPE.names)] != LEGACY_ORDER_DTYPE.names or any(
        ORDER_DTYPE.fields[n][0] != LEGACY_ORDER_DTYPE.fields[n][0] for n in LEGACY_ORDER_DTYPE.names):
    raise ImportError("exchange.schema.ORDER_DTYPE no longer starts with the legacy order row")

# Columns a segment written before they existed lacks, per table; readers take them as zeros.
ADDED_COLUMNS = {"orders": ORDER_DTYPE.names[len(LEGACY_ORDER_DTYPE.names):]}


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
    """Return the stored form of an order batch (a new array): its rows with seq first_seq,
    first_seq+1, ... Raises ValueError if ``orders`` lacks an ORDER_DTYPE field."""
    out = np.zeros(orders.size, STORED_DTYPES["orders"])
    out["seq"] = np.arange(first_seq, first_seq + orders.size, dtype=np.int64)
    for name in ORDER_DTYPE.names:
        out[name] = orders[name]
    return out


def widen_legacy_orders(legacy: np.ndarray) -> np.ndarray:
    """Return order rows of ``LEGACY_ORDER_DTYPE`` (or any dtype holding its fields) as a new
    ORDER_DTYPE array, the fields added since set to 0. Raises ValueError if a field is missing."""
    out = np.zeros(legacy.size, ORDER_DTYPE)
    for name in LEGACY_ORDER_DTYPE.names:
        out[name] = legacy[name]
    return out


def _order_runs(dtype: np.dtype):
    """Return [(source start, destination start, length)] byte runs that copy ORDER_DTYPE's
    fields out of rows of ``dtype`` (fields in ORDER_DTYPE's order, runs broken where padding
    sits between them), or None if ``dtype`` lacks a field or holds one in another type."""
    runs = []
    try:
        for n in ORDER_DTYPE.names:
            ftype, src = dtype.fields[n][:2]
            dst = ORDER_DTYPE.fields[n][1]
            if ftype != ORDER_DTYPE.fields[n][0]:
                return None
            if runs and runs[-1][0] + runs[-1][2] == src and runs[-1][1] + runs[-1][2] == dst:
                runs[-1][2] += ftype.itemsize
            else:
                runs.append([src, dst, ftype.itemsize])
    except (KeyError, TypeError):
        return None
    return runs


def orders_without_seq(stored: np.ndarray) -> np.ndarray:
    """Return stored order rows (any dtype holding ORDER_DTYPE's fields, e.g. with seq) as a new
    ORDER_DTYPE batch the engine accepts. Raises ValueError if a field is missing."""
    runs = _order_runs(stored.dtype)
    n = stored.size
    if runs is not None and stored.ndim == 1:
        # why: the stored dtype holds the order fields in a few contiguous byte runs (the
        # legacy fields after seq, the added ones after padding); copying each run as one
        # opaque field is 5x faster than a copy per field (1M rows: 25 ms against 134 ms)
        names = [f"r{i}" for i in range(len(runs))]
        fmts = [f"V{size}" for _, _, size in runs]
        src = np.dtype({"names": names, "formats": fmts, "offsets": [r[0] for r in runs],
                        "itemsize": stored.dtype.itemsize})
        dst = np.dtype({"names": names, "formats": fmts, "offsets": [r[1] for r in runs],
                        "itemsize": ORDER_DTYPE.itemsize})
        out, view = np.zeros(n, dst), stored.view(src)   # zeros: no byte left undefined
        for name in names:
            out[name] = view[name]
        return out.view(ORDER_DTYPE)
    out = np.zeros(n, ORDER_DTYPE)
    for name in ORDER_DTYPE.names:
        try:
            out[name] = stored[name]
        except (KeyError, ValueError) as e:
            raise ValueError(f"order rows of dtype {stored.dtype} lack field {name!r}") from e
    return out
