"""Read API: rows of one table from a data directory or a live session, as a structured array.

Invariants:
- A read sees every row up to the newest acknowledged batch exactly once: rows with seq <=
  ``sealed_through`` come from the segments live in one catalog snapshot, rows above it from the
  WAL (or the session's unsealed batches). Sealing and compaction change the catalog atomically
  and delete files only afterwards; a reader that finds a listed file gone retries on a fresh
  snapshot.
- Only segments whose seq/ts ranges overlap the request are opened, and only the requested
  columns (plus seq/ts when filtering needs them) are decoded.
"""

from __future__ import annotations

import os

import numpy as np

from exchange.errors import StoreError, UsageError
from store.catalog import Catalog
from store.segment import read_segment
from store.tables import orders_with_seq, table_dtype
from store.wal import scan_wal

__all__ = ["read"]

_RETRIES = 5


def _resolve_symbol(catalog: Catalog, symbol):
    if symbol is None or isinstance(symbol, (int, np.integer)):
        return symbol
    sid = catalog.symbol_id(str(symbol))
    if sid is None:
        raise UsageError(f"unknown symbol {symbol!r} in {catalog.path}")
    return sid


def _check_range(name, r):
    if r is None:
        return None
    try:
        lo, hi = int(r[0]), int(r[1])
    except (TypeError, ValueError, IndexError):
        raise UsageError(f"{name} must be an inclusive (lo, hi) pair, got {r!r}") from None
    return lo, hi


def _wal_rows(records, table, after_seq):
    out = []
    for rec in records:
        if rec.last_seq <= after_seq:
            continue
        rows = orders_with_seq(rec.orders, rec.first_seq) if table == "orders" else getattr(rec, table)
        out.append(rows)
    return out


def read(source, table: str, symbol=None, seq=None, ts=None, columns=None) -> np.ndarray:
    """Return the rows of ``table`` as a numpy structured array ordered by seq.

    source: a data directory path or a live ``Session``. symbol: id, name or None (all).
    seq, ts: ``(lo, hi)`` with both ends INCLUSIVE, or None; both may be given (intersection).
    columns: field names to return (in table order), or None for all; the dtype is the stored
    dtype restricted to those fields. Rows not yet sealed (still in the WAL) are included.

    Raises UsageError for an unknown table, column or symbol or a malformed range, StoreError if
    the directory is not a data directory, CorruptionError if a file fails a check.
    """
    dtype = table_dtype(table)
    cols = list(dtype.names) if columns is None else [c for c in dtype.names if c in set(columns)]
    if columns is not None:
        unknown = set(columns) - set(dtype.names)
        if unknown:
            raise UsageError(f"table {table!r} has no column(s) {sorted(unknown)}")
    seq, ts = _check_range("seq", seq), _check_range("ts", ts)
    need = list(dict.fromkeys(cols + ["seq"] + (["ts"] if ts else [])))
    own = isinstance(source, (str, os.PathLike))
    data_dir = os.fspath(source) if own else source.data_dir
    catalog = Catalog(data_dir) if own else source.catalog
    try:
        sym = _resolve_symbol(catalog, symbol)
        for attempt in range(_RETRIES):
            try:
                sealed, segs = catalog.snapshot(table, sym, seq, ts)
                parts = [read_segment(os.path.join(data_dir, s["path"]), need) for s in segs]
                if own:
                    records, _ = scan_wal(os.path.join(data_dir, "wal"), after_seq=sealed)
                else:
                    records = source.unsealed_records()
                break
            except FileNotFoundError:
                # why: compaction or WAL trimming retired a file after our snapshot; a fresh
                # snapshot lists its replacement
                if attempt == _RETRIES - 1:
                    raise StoreError(f"{data_dir}: files kept vanishing while reading {table}") from None
    finally:
        if own:
            catalog.close()
    wal = _wal_rows(records, table, sealed)
    columns_out = {}
    for c in need:
        pieces = [p[c] for p in parts] + [w[c] for w in wal]
        columns_out[c] = np.concatenate(pieces) if pieces else np.zeros(0, dtype.fields[c][0])
    mask = None
    if wal:
        sym_col = np.concatenate([w["symbol"] for w in wal])
        wmask = np.ones(sym_col.size, bool) if sym is None else sym_col == sym
        mask = np.concatenate([np.ones(sum(p["seq"].size for p in parts), bool), wmask])
    for name, r in (("seq", seq), ("ts", ts)):
        if r is not None:
            m = (columns_out[name] >= r[0]) & (columns_out[name] <= r[1])
            mask = m if mask is None else mask & m
    order = None
    if sym is None and (len({s["symbol"] for s in segs}) > 1 or (segs and wal)):
        order = np.argsort(columns_out["seq"], kind="stable")   # merge symbols back into seq order
    if mask is not None:
        idx = np.flatnonzero(mask)
        order = idx if order is None else order[mask[order]]
    out_dtype = dtype if columns is None else np.dtype([(c, dtype.fields[c][0]) for c in cols], align=True)
    n = columns_out["seq"].size if order is None else order.size
    out = np.zeros(n, out_dtype)
    for c in cols:
        out[c] = columns_out[c] if order is None else columns_out[c][order]
    return out
