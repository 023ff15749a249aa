"""Export: stored tables → CSV, Parquet or an SQLite database a user can query with SQL.

``export(data_dir, tables, out, fmt=...)`` writes a file and returns the row count per table;
``write_csv`` streams one table as CSV to an open text file (``exsim export --out -``).

Invariants:
- Rows come from ``store.read`` (through one ``store.Reader``) in seq windows of ``CHUNK_SEQS`` messages, so memory stays bounded
  on a large run; rows are written in seq order, values unchanged (integer ticks, lots, ns and
  enum codes; the SQLite file carries the names in ``symbols`` and ``enums`` tables).
- CSV and Parquet files follow the table's columns with the same facts in trading terms
  (``NAMED``): ``time``, the wall-clock time of ``ts`` in the run's zone (CSV: ISO 8601 with
  its UTC offset, ``2012-06-21T10:00:00.040920000-04:00``; Parquet: a ``timestamp[ns, tz]``
  column), ``symbol_name``, and the enum words (``side_name`` BUY/SELL, ``kind_name``,
  ``event_name`` ...). The code columns stay as they were, first, so a reader of the old
  columns is unaffected.
- The output is written under a temporary name next to ``out`` (``replay.atomic``), fsynced and
  renamed into place: a failed export leaves no partial file.
- SQLite INTEGER is signed 64-bit: a uint64 value >= 2**63 raises UsageError rather than being
  stored wrapped.
"""

from __future__ import annotations

import csv
import json
import os

from exsim.exchange.errors import UsageError

from exsim.replay.atomic import temp_file_beside
from exsim.replay.progress import progress

__all__ = ["export", "write_csv", "symbol_tick_size", "named_columns", "TABLES", "FORMATS",
           "CHUNK_SEQS", "NAMED"]

TABLES = ("orders", "fills", "l2", "events")
FORMATS = ("csv", "parquet", "sqlite", "flow")   # flow: the generic order-flow format
CHUNK_SEQS = 1_000_000
INT64_MAX = (1 << 63) - 1
# enum code columns of each table -> the enum that names them (each gets a ``<column>_name``)
NAMED = {
    "orders": ("kind", "order_type", "tif", "side", "phase"),
    "fills": ("aggressor_side",),
    "l2": ("side",),
    "events": ("event", "reason", "phase"),
}


def _enum_of(column: str):
    from exsim.exchange.schema import Event, Kind, OrderType, Phase, Reason, Side, Tif

    return {"kind": Kind, "order_type": OrderType, "tif": Tif, "side": Side, "phase": Phase,
            "aggressor_side": Side, "event": Event, "reason": Reason}[column]


class _Names:
    """What the named columns of one run need: its clock and its symbol names."""

    def __init__(self, data_dir: str):
        from exsim.replay.rundir import run_clock

        self.clock = run_clock(data_dir)
        self.symbols = {int(r["id"]): r["name"] for r in _symbol_rows(data_dir)}
        self.origin = self.clock.origin()

    def header(self, table: str) -> list[str]:
        return ["time", "symbol_name", *(f"{c}_name" for c in NAMED[table])]

    def iso_times(self, ts):
        """ISO 8601 local times of the int64 ns array ``ts``, with their UTC offsets."""
        import datetime as dt
        from zoneinfo import ZoneInfo

        import numpy as np

        zone = ZoneInfo(self.clock.tz)
        epoch = ts.astype(np.int64) + self.origin

        def offset(ns: int) -> int:
            when = dt.datetime.fromtimestamp(ns // 10**9, zone)
            return int(when.utcoffset().total_seconds()) * 10**9

        if not ts.size:
            return []
        first, last = offset(int(epoch[0])), offset(int(epoch[-1]))
        offsets = (np.full(ts.size, first, np.int64) if first == last
                   else np.array([offset(int(v)) for v in epoch], np.int64))   # a DST change
        text = np.datetime_as_string((epoch + offsets).astype("datetime64[ns]"), unit="ns")
        suffix = [_offset_suffix(int(o)) for o in (offsets if first != last else offsets[:1])]
        if first == last:
            return [t + suffix[0] for t in text.tolist()]
        return [t + x for t, x in zip(text.tolist(), suffix)]

    def columns(self, table: str, rows) -> list[list]:
        """The named columns of ``rows`` (a chunk of ``table``), each a list of str."""
        import numpy as np

        cols = [self.iso_times(rows["ts"])]
        ids = rows["symbol"].astype(np.int64)
        cols.append([self.symbols.get(i, str(i)) for i in ids.tolist()])
        for c in NAMED[table]:
            enum = _enum_of(c)
            words = {int(m): m.name for m in enum}
            cols.append([words.get(v, str(v)) for v in rows[c].tolist()])
        return cols


def _offset_suffix(offset_ns: int) -> str:
    minutes = offset_ns // 60_000_000_000
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def named_columns(data_dir: str, table: str, rows) -> dict[str, list]:
    """Return {column: values} of the named columns of ``rows`` (``table``'s rows read from the
    run in ``data_dir``): ``time`` (ISO 8601 in the run's zone), ``symbol_name`` and each enum
    column's words (``NAMED``). Raises as ``replay.rundir.run_clock``."""
    names = _Names(data_dir)
    return dict(zip(names.header(table), names.columns(table, rows)))


def _windows(data_dir: str, seq: tuple[int, int] | None):
    """Yield inclusive seq windows covering the run (the last one open-ended, for WAL rows)."""
    from exsim.store import Catalog

    cat = Catalog(data_dir, readonly=True)
    try:
        segs = cat.all_segments()
        ck = cat.latest_checkpoint()
    finally:
        cat.close()
    last = max([s["seq_hi"] for s in segs] + [ck["seq"] if ck else 0])
    lo, hi = seq if seq else (0, 1 << 62)
    start = lo
    while start <= min(hi, last):
        end = min(start + CHUNK_SEQS - 1, hi)
        yield start, end
        start = end + 1
    if start <= hi:
        yield start, hi


def _chunks(data_dir: str, table: str, symbol, seq, quiet: bool, ts=None):
    """Yield non-empty structured-array chunks of ``table`` in seq order (one ``store.Reader``
    for all of them: the catalog is opened once and a segment's index read once), only rows
    with ts in the inclusive ``ts`` range when given."""
    from exsim.store import Reader, read

    windows = list(_windows(data_dir, seq))
    with Reader(data_dir) as reader:
        for lo, hi in progress(windows, desc=f"export {table}", unit="chunk", quiet=quiet):
            rows = read(reader, table, symbol=symbol, seq=(lo, hi), ts=ts)
            if rows.size:
                yield rows


def write_csv(f, data_dir: str, table: str, *, symbol: str | None = None,
              seq: tuple[int, int] | None = None, quiet: bool = True,
              ts: tuple[int, int] | None = None) -> int:
    """Write ``table`` (header line, then rows in seq order; the table's columns, then the named
    ones of the module docstring) as CSV to the text file ``f``; return the number of rows. ``symbol``/``seq``/``ts`` (inclusive) filter the rows.
    Raises StoreError/UsageError from ``store.read`` for a bad directory, table or symbol."""
    from exsim.store.tables import table_dtype

    names = _Names(data_dir)
    w = csv.writer(f)
    w.writerow([*table_dtype(table).names, *names.header(table)])
    n = 0
    for rows in _chunks(data_dir, table, symbol, seq, quiet, ts):
        # tuples of Python ints (exact, no float formatting), then the named columns
        w.writerows(a + b for a, b in zip(rows.tolist(), zip(*names.columns(table, rows))))
        n += rows.size
    return n


def export(data_dir: str, tables, out: str, *, fmt: str, symbol: str | None = None,
           seq: tuple[int, int] | None = None, quiet: bool = True,
           filter_text: dict | None = None, ts: tuple[int, int] | None = None) -> dict[str, int]:
    """Write ``tables`` (a name of TABLES, or several for sqlite) of ``data_dir`` to the file
    ``out`` as ``fmt`` (csv, parquet, sqlite), replacing any file there; return {table: rows}.

    ``symbol``/``seq``/``ts`` (inclusive ns) filter the rows; an SQLite file records them in its ``meta`` table (as
    ``filter_text`` when given: the filter as the user wrote it). Raises UsageError for an
    unknown format or table, several tables outside sqlite, a missing pyarrow (parquet), a
    value SQLite cannot hold, or (``flow``) symbol ids that are not 0..n-1 or a symbol id
    outside the symbol table; StoreError/OSError if reading or
    writing fails. Every other format writes every column of the table.
    """
    tables = (tables,) if isinstance(tables, str) else tuple(tables)
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    bad = [t for t in tables if t not in TABLES]
    if bad or not tables:
        raise UsageError(f"tables must be some of {', '.join(TABLES)}; got {bad or 'none'}")
    if len(tables) > 1 and fmt != "sqlite":
        raise UsageError(f"several tables need sqlite (a {fmt} file holds one table)")
    if fmt == "flow":
        if tables != ("orders",):
            raise UsageError("--format flow writes the orders table, as the generic order-flow "
                             "format (docs/data-formats.md)")
        return {"orders": _write_flow(data_dir, os.path.abspath(out), symbol, seq, quiet, ts)}
    if fmt == "parquet":
        _pyarrow()   # fail on the missing extra before reading anything
    out = os.path.abspath(out)
    tmp = temp_file_beside(out)
    try:
        if fmt == "csv":
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                counts = {tables[0]: write_csv(f, data_dir, tables[0], symbol=symbol, seq=seq,
                                                  quiet=quiet, ts=ts)}
        elif fmt == "parquet":
            counts = {tables[0]: _write_parquet(tmp, data_dir, tables[0], symbol, seq, quiet, ts)}
        else:
            if filter_text is None:
                filter_text = {"symbol": symbol, "seq": None if seq is None else f"{seq[0]}:{seq[1]}",
                               "ts": None if ts is None else f"{ts[0]}..{ts[1]}"}
            counts = _write_sqlite(tmp, data_dir, tables, symbol, seq, quiet, filter_text, ts)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return counts


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("--format parquet needs pyarrow, which is not installed: "
                         "pip install 'exsim[parquet]'") from None
    return pyarrow, pq


def _write_parquet(path, data_dir, table, symbol, seq, quiet, ts=None) -> int:
    import numpy as np

    from exsim.store.tables import table_dtype

    dtype = table_dtype(table)
    pa, pq = _pyarrow()
    names = _Names(data_dir)
    extra = names.header(table)
    schema = pa.schema([(n, pa.from_numpy_dtype(dtype.fields[n][0])) for n in dtype.names]
                       + [("time", pa.timestamp("ns", tz=names.clock.tz))]
                       + [(c, pa.string()) for c in extra[1:]])
    n = 0
    with pq.ParquetWriter(path, schema) as writer:
        for rows in _chunks(data_dir, table, symbol, seq, quiet, ts):
            named = names.columns(table, rows)[1:]   # why not the ISO text: a real timestamp
            when = pa.array(rows["ts"].astype(np.int64) + names.origin,
                            pa.timestamp("ns", tz=names.clock.tz))
            writer.write_table(pa.Table.from_arrays(
                [pa.array(np.ascontiguousarray(rows[c])) for c in dtype.names] + [when]
                + [pa.array(col, pa.string()) for col in named], schema=schema))
            n += rows.size
    return n


def _write_flow(data_dir, out, symbol, seq, quiet, ts=None) -> int:
    """The orders table as a generic order-flow file (CSV, CSV.gz or Parquet by ``out``'s name)
    with the run's symbol table and each symbol's engine options (tick table, lot, minimum,
    session close, money), so ``exsim simulate --flow csv OUT`` runs the same market again."""
    import numpy as np

    from exsim.exchange.errors import InputError
    from exsim.exchange.schema import ORDER_DTYPE
    from exsim.scenarios.loaders.generic import write_generic
    from exsim.store.tables import orders_without_seq

    symbols = _symbol_rows(data_dir)
    if [s["id"] for s in symbols] != list(range(len(symbols))):
        raise UsageError(f"{data_dir}: symbol ids are not 0..{len(symbols) - 1}; a flow file "
                         "numbers its symbols in table order")
    parts = [orders_without_seq(rows) for rows in _chunks(data_dir, "orders", symbol, seq, quiet, ts)]
    orders = np.concatenate(parts) if parts else np.zeros(0, ORDER_DTYPE)
    try:
        return write_generic(out, orders, [_symbol_spec(s) for s in symbols])
    except InputError as exc:
        raise UsageError(str(exc)) from None


def _enum_rows() -> list[dict]:
    from exsim.exchange.schema import Event, Flag, Kind, OrderType, Phase, Reason, Side, Tif

    out = []
    for name, enum in (("side", Side), ("kind", Kind), ("order_type", OrderType), ("tif", Tif),
                       ("flag", Flag), ("event", Event), ("reason", Reason), ("phase", Phase)):
        out += [{"type": name, "value": int(m), "name": m.name.lower()} for m in enum]
    return out


def _symbol_spec(row: dict):
    """The SymbolSpec of a ``_symbol_rows`` row: name, tick size and the engine options that
    differ from ``add_symbol``'s defaults for that tick size (so a flow of plain symbols keeps
    its old bytes; a catalog without options gives none)."""
    import json

    from exsim.exchange import Engine
    from exsim.scenarios.scenario import ENGINE_OPTIONS, SymbolSpec

    info = row.get("info") or {}
    if isinstance(info, str):
        info = json.loads(info) if info else {}
    probe = Engine()
    probe.add_symbol("x", tick_size=row["tick_size"])
    default = probe.config()["symbols"][0]
    pairs = tuple((k, tuple(tuple(r) for r in info[k]) if k == "tick_table" else info[k])
                  for k in ENGINE_OPTIONS if k in info and info[k] != default.get(k))
    return SymbolSpec(row["name"], row["tick_size"], None, pairs)


def _symbol_rows(data_dir: str) -> list[dict]:
    """The catalog's symbols as the ``symbols`` table: id, name, tick size as the engine got it."""
    from exsim.store import Catalog

    cat = Catalog(data_dir, readonly=True)
    try:
        symbols = cat.symbols()
    finally:
        cat.close()
    return [{"id": s["id"], "name": s["name"], "tick_size": symbol_tick_size(s), "info": s.get("info")}
            for s in symbols]


def symbol_tick_size(row: dict):
    """Return a catalog symbol row's tick size as the engine was given it (int or float).

    ``row`` is one of ``Catalog.symbols()`` (info a dict) or a raw table row (info JSON text).
    why the info JSON: catalogs made before the ``tick_size`` column was REAL hold 0 for 0.01;
    the engine config kept in ``info`` has the real value.
    """
    info = row.get("info")
    if not isinstance(info, dict):
        try:
            info = json.loads(info or "{}")
        except (TypeError, ValueError):
            info = {}
    tick = info.get("tick_size", row.get("tick_size")) if isinstance(info, dict) else None
    return row.get("tick_size") if tick is None else tick


# why these indexes: they serve the joins a user writes first (a deal to its two orders, one
# symbol's history in seq order)
_INDEXES = {
    "orders": [["symbol", "seq"], ["order_id"]],
    "fills": [["symbol", "seq"], ["buy_order_id"], ["sell_order_id"]],
    "l2": [["symbol", "seq"]],
    "events": [["symbol", "seq"], ["order_id"]],
}


def _write_sqlite(path, data_dir, tables, symbol, seq, quiet, filter_text, ts=None) -> dict[str, int]:
    import numpy as np
    import sqlite_utils

    from exsim.store.tables import table_dtype

    symbols = _symbol_rows(data_dir)
    os.unlink(path)   # sqlite wants to create the file itself; the name stays reserved by us
    db = sqlite_utils.Database(path)
    # why no journal: the file is private until the final rename, so a crash cannot expose it
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    counts = {}
    try:
        db["symbols"].insert_all(symbols, pk="id")
        db["enums"].insert_all(_enum_rows(), pk=("type", "value"))
        for table in tables:
            dtype = table_dtype(table)
            db[table].create({c: int for c in dtype.names})
            sql = f"INSERT INTO [{table}] VALUES ({', '.join('?' * len(dtype.names))})"
            n = 0
            for rows in _chunks(data_dir, table, symbol, seq, quiet, ts):
                for c in dtype.names:
                    if dtype.fields[c][0] == np.uint64 and rows.size and int(rows[c].max()) > INT64_MAX:
                        raise UsageError(f"{data_dir}: {table}.{c} holds values >= 2**63, which an "
                                         "SQLite INTEGER cannot store; export as csv or parquet")
                with db.conn:
                    db.conn.executemany(sql, rows.tolist())
                n += rows.size
            for cols in _INDEXES[table]:
                db[table].create_index(cols)
            counts[table] = n
        if "fills" in tables:
            db.create_view("deals", "SELECT * FROM fills")   # the word for fills
        db.conn.execute("PRAGMA user_version = 1")
        db["meta"].insert_all([{"key": "source", "value": os.path.abspath(data_dir)},
                               {"key": "filter", "value": json.dumps(filter_text)}],
                              pk="key")
    finally:
        db.close()
    return counts
