"""The four stored tables and their dtypes, derived from exchange.schema (never redeclared).

An order row has three forms: the engine's (``ORDER_DTYPE``, no seq), the WAL's (the same
fields packed, seq implied by the record's first seq: store.wal.format.WIRE) and the stored one
(``STORED_DTYPES["orders"]``: seq first). ``orders_with_seq`` and ``orders_without_seq`` are
the one conversion between the engine's and the stored form.

Rows written by an older exsim hold a prefix of today's fields (fields are only ever appended):

- orders: the first 11 fields (``LEGACY_ORDER_DTYPE``, 45 bytes packed: WAL files of versions
  1-4), then the first 15, with stop_price, display_qty, min_qty and expire_ts
  (``ORDER_V5_DTYPE``, 77 bytes: version 5); today's rows add ``phase`` (78 bytes);
- events: the first 8 fields (``LEGACY_EVENT_DTYPE``, 46 bytes: WAL files of versions 1-5);
  today's rows add ``price`` and ``phase`` (55 bytes).

Segments of those rows have no column for the fields added since (``ADDED_COLUMNS``). Such
rows read as if the added fields were 0 (``widen_rows``; segments: ``store.segment``), which is
what those fields mean for an order without the features they describe and for an event of a
symbol that never left continuous trading.

Invariants:
- ``orders`` is stored with a leading int64 ``seq`` (the n-th message of a run has seq n); the
  other tables already carry ``seq`` in their schema dtype.
- Stored and read arrays use the schema's aligned dtypes; on disk (WAL payloads) the same fields
  are written packed, without padding, so bytes on disk never depend on uninitialised padding.
- Every older row dtype is a prefix of today's (checked at import): widening copies fields by name.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange.schema import EVENT_DTYPE, ORDER_DTYPE, TABLE_DTYPES

__all__ = ["TABLES", "STORED_DTYPES", "packed", "orders_with_seq", "orders_without_seq", "table_dtype",
           "LEGACY_ORDER_DTYPE", "ORDER_V5_DTYPE", "LEGACY_EVENT_DTYPE", "ADDED_COLUMNS",
           "widen_rows", "zero_fields", "Columns"]

TABLES = ("orders", "fills", "l2", "events")

# The older row layouts (packed), declared here once and for good: the files that hold them
# hold exactly these bytes whatever the schema dtypes become.
# orders of WAL files of versions 1-4 (45 bytes)
LEGACY_ORDER_DTYPE = np.dtype([
    ("ts", "<i8"), ("order_id", "<u8"), ("price", "<i8"), ("qty", "<i8"), ("symbol", "<u4"),
    ("trader", "<u4"), ("kind", "u1"), ("order_type", "u1"), ("tif", "u1"), ("flags", "u1"),
    ("side", "u1"),
])
# orders of WAL files of version 5 (77 bytes): stops, icebergs, minimum quantities, GTD
ORDER_V5_DTYPE = np.dtype(LEGACY_ORDER_DTYPE.descr + [
    ("stop_price", "<i8"), ("display_qty", "<i8"), ("min_qty", "<i8"), ("expire_ts", "<i8"),
])
# events of WAL files of versions 1-5 (46 bytes)
LEGACY_EVENT_DTYPE = np.dtype([
    ("seq", "<i8"), ("ts", "<i8"), ("order_id", "<u8"), ("filled_qty", "<i8"),
    ("leaves_qty", "<i8"), ("symbol", "<u4"), ("event", "u1"), ("reason", "u1"),
])


def _is_prefix(old: np.dtype, new: np.dtype) -> bool:
    """Whether ``new`` starts with ``old``'s fields, in order, with the same types."""
    return new.names[:len(old.names)] == old.names and all(
        new.fields[n][0] == old.fields[n][0] for n in old.names)


# why checked at import: widening copies the older fields by name into today's dtype, which is
# only right while they are its leading fields with the same types
for _old, _new in ((LEGACY_ORDER_DTYPE, ORDER_DTYPE), (ORDER_V5_DTYPE, ORDER_DTYPE),
                   (LEGACY_EVENT_DTYPE, EVENT_DTYPE)):
    if not _is_prefix(_old, _new):
        raise ImportError(f"exchange.schema no longer starts {_new} with the older row {_old}")

# Columns a segment written before they existed lacks, per table; readers take them as zeros.
ADDED_COLUMNS = {"orders": ORDER_DTYPE.names[len(LEGACY_ORDER_DTYPE.names):],
                 "events": EVENT_DTYPE.names[len(LEGACY_EVENT_DTYPE.names):]}


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
    from exsim.exchange.errors import UsageError

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


def widen_rows(rows: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Return ``rows`` (an older layout of a table, or any dtype holding some of ``dtype``'s
    fields) as a new array of ``dtype``, every field ``rows`` lacks set to 0."""
    out = np.zeros(rows.size, dtype)
    for name in dtype.names:
        if name in rows.dtype.names:
            out[name] = rows[name]
    return out


class Columns(dict):
    """{column name: 1-D array} of consecutive rows of one table, and ``lacking``: the columns
    among them that the file they were read from did not hold (a segment or WAL file written
    before the column existed), returned as zeros. A comparison with rows of today's engine
    compares only the other columns: the file never recorded those."""

    def __init__(self, columns=(), lacking=()):
        super().__init__(columns)
        self.lacking = tuple(lacking)


def zero_fields(rows: np.ndarray, names) -> np.ndarray:
    """Return ``rows`` with the fields ``names`` set to 0: ``rows`` itself for no names, else a
    copy. What rows look like once stored by a format that lacks those fields (a comparison
    with rows read back from such a store compares only what it holds)."""
    if not names:
        return rows
    out = rows.copy()
    for name in names:
        out[name] = 0
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
