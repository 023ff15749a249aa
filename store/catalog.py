"""The catalog: ``catalog.sqlite`` in a data directory, through sqlite-utils.

All catalog access goes through ``Catalog`` (nothing else in the library touches its
database); its schema, row checksum and migrations are in store/catalog_schema.py.

Tables (columns in docs/formats.md, "Catalog"):
- ``meta``        key/value: format version, ``sealed_through`` (every row with seq <= it is in a
                  live segment; rows above it are only in the WAL), engine class.
- ``symbols``     id, name, tick size (REAL) and the engine's per-symbol config.
- ``runs``        what produced the data: scenario, seed, engine options, free-form info.
- ``segments``    live segment files: table, symbol, seq and ts ranges, rows, bytes, tier, codec,
                  encodings, path, digest (of the rows, store/digest.py; "" = unknown).
- ``checkpoints`` engine checkpoint files by seq.

Every row carries ``row_crc``: the CRC32C of its canonical values (``_ROW_COLUMNS``; see
``_row_crc``), written by every insert and update here and checked by every read. Why: the
catalog decides which rows a reader sees; a flipped bound or symbol in a segment row would
otherwise silently drop rows or return another symbol's, and a flipped ``sealed_through`` would
make readers skip WAL rows. Readers therefore fetch a table's rows whole, check each, and filter
in Python (a bound in SQL's WHERE would exclude a damaged row unchecked).
``segments.digest`` is left out of the checksum: it checks itself (rerun recomputes it from the
rows and, on a mismatch, compares the rows themselves). A row checksum cannot tell a row that is
gone, so meta ``rows:<table>`` ("count:sum") records each table's row count and row_crc sum
(symbols, runs, segments, checkpoints), updated in the transaction that changes the table and
checked whenever a whole table is read; meta itself is read whole on every ``get_meta`` (a few
rows), so a key damaged into another name is found too. The cost: a snapshot reads every segment
row (~1 ms per 700 segments; rows already checked are recognised by their raw values).

Invariants:
- Sealing registers its segments and advances ``sealed_through`` in one transaction; compaction
  swaps old segments for their merge in one transaction. A reader takes the segment list and
  ``sealed_through`` in one read transaction, so it sees either the state before or after,
  never a gap or a duplicate.
- A file becomes visible only after it is durable on disk; files are deleted only after the
  transaction that retired them committed (a crash in between leaves orphans, removed on open).
- Every failure to read the catalog (not a database, truncated, a missing table, a value of the
  wrong type, bad JSON, a checksum mismatch) is a CorruptionError or StoreError naming
  ``catalog.sqlite`` (and the table and row key where known); no sqlite3/json exception escapes.
- A catalog opened with ``readonly=True`` is never written: no journal-mode change, no schema
  migration (sqlite may still create its -wal/-shm files beside it).
- A catalog made before row checksums has no ``row_crc`` columns: its rows are read unchecked
  (types are still checked) until it is opened for writing, which adds the column and computes
  the checksums (and tallies) of the rows as they stand. In a table that has the column, a row
  without a checksum (NULL) is corrupt; so are rows that code predating checksums adds to a
  catalog that has them (older code leaves row_crc NULL and the tallies as they were).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from contextlib import contextmanager

import numpy as np
import sqlite_utils

from exsim.exchange.errors import CorruptionError, StoreError, UsageError, WriteError
from exsim.store.catalog_schema import _KEY, _ROW_COLUMNS, FORMAT_VERSION, CatalogSchema, _row_crc  # noqa: F401

__all__ = ["Catalog", "CATALOG_NAME", "FORMAT_VERSION", "resolve_symbol"]

CATALOG_NAME = "catalog.sqlite"


def resolve_symbol(symbols: dict, symbol, where: str, *, unlisted_ids: bool = False) -> int:
    """Return the id of ``symbol`` (a name, or an id) among ``symbols`` ({name: id}).

    An id (int or numpy integer, not bool) must be one of the ids, unless ``unlisted_ids``:
    then it is returned as it is (rows journaled for an id the engine rejected are stored under
    it). Raises UsageError naming the symbol, ``where`` (the data directory) and the known
    symbols when there is no such symbol.
    """
    if isinstance(symbol, (int, np.integer)) and not isinstance(symbol, (bool, np.bool_)):
        if unlisted_ids or int(symbol) in symbols.values():
            return int(symbol)
    elif isinstance(symbol, str) and symbol in symbols:
        return int(symbols[symbol])
    known = ", ".join(symbols) or "none"
    raise UsageError(f"{where}: unknown symbol {symbol!r} (symbols: {known})")


# Raw rows (values + row_crc) already found good -> their dicts, per (table, column layout), so a
# reader that takes the same snapshot again (a read per chunk) does not recompute every
# checksum: the check is a pure function of the raw row.
_VERIFIED: dict = {}
_VERIFIED_MAX = 100_000


class Catalog(CatalogSchema):
    """Open (creating if asked) the catalog of ``data_dir``.

    ``readonly``: open it read-only (for readers: nothing is ever written, no migration).
    Raises StoreError if it does not exist and ``create`` is False, CorruptionError if it is not
    an exsim catalog (not a SQLite database, truncated, tables missing) or has another format
    version.
    """

    def __init__(self, data_dir: str, create: bool = False, readonly: bool = False):
        self.path = os.path.join(os.fspath(data_dir), CATALOG_NAME)
        self.readonly = bool(readonly) and not create
        if os.path.islink(self.path):
            raise CorruptionError(f"{self.path}: is a symlink; a data directory's catalog must be "
                                  "its own file (refused)", self.path, -1)
        if not create and not os.path.isfile(self.path):
            what = "is not a file" if os.path.exists(self.path) else "is missing"
            raise StoreError(f"{data_dir} is not an exsim data directory ({CATALOG_NAME} {what})")
        if not create:
            self._check_header()
        conn = None
        try:
            if self.readonly:
                uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
            else:
                conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db = sqlite_utils.Database(conn)
            if not create:
                self._probe()
            if not self.readonly:
                self.db.execute("PRAGMA journal_mode=WAL")
                # why: in WAL mode the default NORMAL may lose the last commit on power loss; a
                # registered segment must outlive the WAL file that is deleted after it
                self.db.execute("PRAGMA synchronous=FULL")
            self._ensure_schema(create)
        except (sqlite3.Error, UnicodeDecodeError) as e:
            if conn is not None:
                conn.close()
            if isinstance(e, UnicodeDecodeError):
                raise self._corrupt(f"cannot open catalog: the catalog is damaged (text that is "
                                    f"not UTF-8: {e})") from e
            raise self._error(e, "cannot open catalog") from e
        except StoreError:
            if conn is not None:
                conn.close()
            raise

    def _check_header(self) -> None:
        """CorruptionError if the file is empty. Why before sqlite opens it: a writable connection
        would turn an empty (truncated to 0) file into a fresh database. Why ``os.stat`` and not
        reading the magic with ``open()``: closing any descriptor of a file drops every POSIX lock
        the process holds on it, its open SQLite connections' included (sqlite.org's "How To
        Corrupt An SQLite Database File", 2.2); a writer elsewhere then takes itself for the last
        connection and removes ``-wal``/``-shm`` under a live Reader of this process. The header
        itself is checked through SQLite (``_probe``), which shares one descriptor per file."""
        try:
            size = os.stat(self.path).st_size
        except OSError as e:
            raise StoreError(f"{self.path}: cannot read the catalog: {e}") from e
        if size == 0:
            raise self._corrupt("the catalog is empty (truncated or overwritten)")

    def _probe(self) -> None:
        """CorruptionError unless SQLite reads the file as a database (its header and schema
        page): a garbage or truncated file is named as such, not failed on its first query."""
        try:
            self.db.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.DatabaseError as e:
            what = ("is not a SQLite database" if "not a database" in str(e)
                    else f"is damaged ({e})")
            raise self._corrupt(f"the catalog {what} (truncated or overwritten)") from e

    # -- errors --------------------------------------------------------------------------------
    def _corrupt(self, message: str) -> CorruptionError:
        return CorruptionError(f"{self.path}: {message}", self.path, -1)

    def _error(self, e: sqlite3.Error, what: str) -> StoreError:
        """A sqlite3 error as the StoreError to raise: CorruptionError when the file is damaged
        (not a database, malformed, a table or column missing), StoreError otherwise."""
        text = str(e)
        damaged = type(e) in (sqlite3.DatabaseError, sqlite3.DataError, sqlite3.IntegrityError)
        if damaged or any(s in text for s in ("no such table", "no such column", "malformed",
                                              "not a database", "Could not decode")):
            return self._corrupt(f"{what}: the catalog is damaged ({text})")
        return StoreError(f"{self.path}: {what}: {text}")

    @contextmanager
    def _reading(self, what: str):
        """Turn sqlite3 failures inside into StoreError/CorruptionError naming the catalog."""
        try:
            yield
        except sqlite3.Error as e:
            raise self._error(e, what) from e
        except UnicodeDecodeError as e:   # text that is not UTF-8 (sqlite3 decodes some itself)
            raise self._corrupt(f"{what}: the catalog is damaged (text that is not UTF-8: {e})") from e

    @contextmanager
    def _writing(self, what: str):
        """Run a write transaction; sqlite failures (disk full, file size limit) become WriteError,
        a damaged file CorruptionError."""
        if self.readonly:
            raise StoreError(f"{self.path}: cannot {what}: the catalog is open read-only")
        try:
            with self.db.conn:
                self.db.execute("BEGIN IMMEDIATE")
                yield
        except sqlite3.Error as e:
            err = self._error(e, f"cannot {what}")
            if not isinstance(err, CorruptionError):
                err = WriteError(f"{self.path}: cannot {what}: {e}")
            raise err from e
        except UnicodeDecodeError as e:
            raise self._corrupt(f"cannot {what}: the catalog is damaged (text that is not "
                                f"UTF-8: {e})") from e

    # -- checked rows --------------------------------------------------------------------------
    def _typed(self, table: str, values) -> list:
        """``values`` (in ``_ROW_COLUMNS`` order) with reals as float; CorruptionError naming the
        table, row key and column if one has the wrong type."""
        out = list(values)
        for i, ((name, kind), v) in enumerate(zip(_ROW_COLUMNS[table], values)):
            t = type(v)
            if kind == "t":
                ok = t is str
            elif kind == "f":
                ok = t is float or t is int
                if ok:
                    out[i] = float(v)
            else:
                ok = t is int or (v is None and kind == "i?")
            if not ok:
                raise self._corrupt(f"table {table} row {self._key_text(table, values)}: column "
                                    f"{name} holds {v!r}, not {_KIND_NAMES[kind]}")
        return out

    def _key_text(self, table: str, values) -> str:
        names = [c for c, _ in _ROW_COLUMNS[table]]
        return f"{_KEY[table]}={values[names.index(_KEY[table])]!r}"

    def _fetch(self, table: str, where: str = "", args=(), copy: bool = True) -> list[dict]:
        """Rows of ``table`` (SQL ``where`` on the key only, or only an ORDER BY), each type-
        and checksum-checked, as dicts of the ``_ROW_COLUMNS`` (plus ``digest`` for segments when
        the column exists). A whole table (no WHERE) of a checked catalog must also match the
        row count and checksum sum meta records for it (so a lost row is found too).

        ``copy`` False returns dicts shared with the cache of checked rows: the caller must not
        change them (``snapshot`` copies the ones it returns).
        """
        conn = self.db.conn
        if conn.in_transaction:
            return self._fetch_in(table, where, args, copy)
        conn.execute("BEGIN")   # why: the table and its tally in meta from one snapshot
        try:
            return self._fetch_in(table, where, args, copy)
        finally:
            conn.execute("COMMIT")

    def _fetch_in(self, table: str, where: str, args, copy: bool) -> list[dict]:
        cols = [c for c, _ in _ROW_COLUMNS[table]]
        have = self._columns(table)
        if not have:
            raise self._corrupt(f"table {table} is missing")
        extra = [c for c in ("digest",) if table == "segments" and c in have]
        checked = "row_crc" in have
        sel = cols + extra + (["row_crc"] if checked else [])
        raw = self.db.execute(f"SELECT {', '.join(sel)} FROM {table} {where}", list(args)).fetchall()
        cache = _VERIFIED.setdefault((table, len(extra), checked), {})
        out = []
        for r in raw:
            row = cache.get(r)
            if row is None:
                row = self._check_row(table, cols, extra, checked, r)
                if len(cache) >= _VERIFIED_MAX:
                    cache.clear()
                cache[r] = row
            out.append(row)
        if checked and table != "meta" and "WHERE" not in where:
            n, total = self._tally(table)
            got = (len(raw), sum(r[-1] for r in raw))
            if got != (n, total):
                raise self._corrupt(f"table {table} holds {got[0]} rows (checksum sum {got[1]}), "
                                    f"meta recorded {n} (sum {total}): rows are lost or added")
        return [dict(r) for r in out] if copy else out

    def _check_row(self, table: str, cols: list, extra: list, checked: bool, r: tuple) -> dict:
        """The dict of raw row ``r`` (``cols``, then ``extra`` text columns, then row_crc if
        ``checked``); CorruptionError naming the table and row if a check fails."""
        n = len(cols)
        values = r[:n]
        typed = self._typed(table, values)
        if checked:
            crc = r[-1]
            if crc is None:
                raise self._corrupt(f"table {table} row {self._key_text(table, values)} "
                                    "has no checksum (row_crc is NULL: damage, or a row "
                                    "written by exsim code older than row checksums)")
            if crc != _row_crc(table, typed):
                raise self._corrupt(f"table {table} row {self._key_text(table, values)}: "
                                    "checksum mismatch (row_crc), the row is damaged")
        row = dict(zip(cols, typed))
        if table == "segments":
            self._check_segment_values(row, values)
        for c, v in zip(extra, r[n:n + len(extra)]):
            if not isinstance(v, str):
                raise self._corrupt(f"table {table} row {self._key_text(table, values)}: "
                                    f"column {c} holds {v!r}, not text")
            row[c] = v
        return row

    def _check_segment_values(self, row: dict, values) -> None:
        """CorruptionError if a segment row holds values no seal writes (an unknown table, a
        reversed range, no rows). why: catalogs from before row checksums are read unchecked,
        and a damaged table name or bound would otherwise hide the row from every read."""
        problem = None
        if row["table_name"] not in _SEGMENT_TABLES:
            problem = f"table_name {row['table_name']!r} is not one of {', '.join(_SEGMENT_TABLES)}"
        elif not 1 <= row["seq_lo"] <= row["seq_hi"]:
            problem = f"seq range {row['seq_lo']}..{row['seq_hi']} is empty or reversed"
        elif row["ts_lo"] > row["ts_hi"]:
            problem = f"ts range {row['ts_lo']}..{row['ts_hi']} is reversed"
        elif row["rows"] < 1 or row["rows"] > row["seq_hi"] - row["seq_lo"] + 1 and \
                row["table_name"] == "orders":
            problem = f"rows {row['rows']} do not fit its seq range"
        elif row["symbol"] < 0 or row["bytes"] < 0:
            problem = "a negative symbol or size"
        if problem:
            raise self._corrupt(f"table segments row {self._key_text('segments', values)}: "
                                f"{problem} (the row is damaged)")

    def _values(self, table: str, row: dict, checked: bool | None = None) -> tuple[list[str], list]:
        """(column names, values) to insert for ``row`` of ``table``, with its row_crc if the
        table has the column (``checked``: whether it has, None: look it up)."""
        cols = [c for c, _ in _ROW_COLUMNS[table]]
        values = [row[c] for c in cols]
        extra = [c for c in row if c not in cols]
        values += [row[c] for c in extra]
        cols += extra
        if checked is None:
            checked = "row_crc" in self._columns(table)
        if checked:
            cols.append("row_crc")
            values.append(_row_crc(table, self._typed(table, values[:len(_ROW_COLUMNS[table])])))
        return cols, values

    def _upsert(self, table: str, row: dict) -> None:
        """Insert or replace ``row`` of ``table`` (inside a write transaction), keeping the
        table's row count and checksum sum in meta."""
        cols, values = self._values(table, row)
        key = _KEY[table]
        checked = cols[-1] == "row_crc"
        old = None
        if checked and table != "meta":
            old = self.db.execute(f"SELECT row_crc FROM {table} WHERE {key} = ?", [row[key]]).fetchone()
        sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != key)
        self.db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                        f"({', '.join('?' * len(cols))}) ON CONFLICT({key}) DO UPDATE SET {sets}",
                        values)
        if checked and table != "meta":
            self._adjust(table, 0 if old else 1, values[-1] - ((old[0] or 0) if old else 0))

    def _checked(self, table: str) -> bool:
        return "row_crc" in self._columns(table)

    def _adjust(self, table: str, rows: int, crcs: int) -> None:
        """Add ``rows`` and ``crcs`` to ``table``'s count and checksum sum (meta ``rows:<table>``),
        inside the write transaction that changed the table.

        why: a row checksum cannot tell a row that is gone (a damaged page, a lost cell); the
        count and sum of a whole table can, and readers fetch whole tables anyway.
        """
        n, total = self._tally(table)
        self._put_meta(f"rows:{table}", f"{n + rows}:{total + crcs}")

    def _tally(self, table: str) -> tuple[int, int]:
        """(row count, row_crc sum) that meta records for ``table``; CorruptionError if absent
        or malformed."""
        key = f"rows:{table}"
        text = self.get_meta(key)
        try:
            n, total = (int(x) for x in text.split(":"))
        except (AttributeError, ValueError):
            raise self._corrupt(f"meta {key!r} is {text!r}, not 'count:sum' (the catalog is "
                                "damaged)") from None
        return n, total

    def _next_id(self, table: str) -> int:
        return int(self.db.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone()[0])

    # -- meta, symbols, runs -------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """Return a meta value (text), or ``default`` if the key is absent.

        Raises CorruptionError if the row fails its checksum or the catalog is damaged.
        """
        with self._reading(f"read meta {key!r}"):
            # why every row (a few): a key damaged into another name must be found, not missed
            rows = self._fetch("meta", "ORDER BY rowid")
        rows = [r for r in rows if r["key"] == key]
        return rows[0]["value"] if rows else default

    def meta_json(self, key: str, default=None):
        """Return a meta value decoded from JSON (``default`` if the key is absent).

        Raises CorruptionError naming the catalog and key if the value is not valid JSON.
        """
        text = self.get_meta(key)
        if text is None:
            return default
        try:
            return json.loads(text)
        except ValueError as e:
            raise self._corrupt(f"meta {key!r} is not valid JSON ({e})") from None

    def _put_meta(self, key: str, value) -> None:
        self._upsert("meta", {"key": key, "value": str(value)})

    def set_meta(self, key: str, value) -> None:
        """Set a meta value (stored as text). Raises WriteError if that fails."""
        with self._writing(f"set meta {key!r}"):
            self._put_meta(key, value)

    def sealed_through(self) -> int:
        """Return the seq through which every row is in a live segment.

        Raises CorruptionError if the value is missing, not an integer or fails its checksum.
        """
        return self._int_meta(self.get_meta("sealed_through"), "sealed_through")

    def _int_meta(self, text, key: str) -> int:
        try:
            return int(text)
        except (TypeError, ValueError):
            raise self._corrupt(f"meta {key!r} is {text!r}, not an integer") from None

    def set_symbols(self, config: dict) -> None:
        """Record the symbols of an engine config ({"symbols": [{"name", "id", "tick_size", ...}]}).

        Tick sizes are stored as REAL (0.01 stays 0.01; catalogs written before this declared the
        column INTEGER, and SQLite keeps a REAL there unchanged, so they take fractions too).
        Raises WriteError if that fails.
        """
        rows = []
        for i, s in enumerate(config.get("symbols", [])):
            sid = int(s.get("id", i))
            rows.append({"id": sid, "name": str(s.get("name", sid)),
                         "tick_size": float(s.get("tick_size", 1) or 1), "info": json.dumps(s)})
        with self._writing("record symbols"):
            for r in rows:
                self._upsert("symbols", r)

    def symbols(self) -> list[dict]:
        """Return every symbol row (id, name, tick_size as float, info as a dict), by id.

        Catalogs written before tick sizes were REAL hold 0 for a fractional tick; the engine
        config kept in ``info`` has the true value, which is returned instead.
        Raises CorruptionError if a row fails its checks or its info is not a JSON object.
        """
        with self._reading("read symbols"):
            rows = self._fetch("symbols", "ORDER BY id")
        out = []
        for r in rows:
            info = self._json_object(r["info"], f"table symbols row id={r['id']}: info")
            tick = r["tick_size"]
            if not tick and info.get("tick_size"):
                tick = info["tick_size"]   # why: old integer column truncated 0.01 to 0
            try:
                tick = float(tick if tick else 1)
            except (TypeError, ValueError):
                raise self._corrupt(f"table symbols row id={r['id']}: tick_size {tick!r} is not a "
                                    "number") from None
            out.append({"id": r["id"], "name": r["name"], "tick_size": tick, "info": info})
        return out

    def _json_object(self, text: str, what: str) -> dict:
        try:
            v = json.loads(text or "{}")
        except ValueError as e:
            raise self._corrupt(f"{what} is not valid JSON ({e})") from None
        if not isinstance(v, dict):
            raise self._corrupt(f"{what} is not a JSON object")
        return v

    def symbol_id(self, name: str) -> int | None:
        """Return the id of a symbol name, or None. Raises CorruptionError as ``symbols``."""
        with self._reading("read symbols"):
            rows = self._fetch("symbols", "ORDER BY id")
        for r in rows:
            if r["name"] == name:
                return r["id"]
        return None

    def resolve_symbol(self, symbol, *, unlisted_ids: bool = False) -> int:
        """Return the id of ``symbol`` (a name or an id) in this catalog (see ``resolve_symbol``).

        Raises UsageError naming the symbol and the data directory's symbols when it has no
        such symbol; CorruptionError as ``symbols``.
        """
        symbols = {r["name"]: int(r["id"]) for r in self.symbols()}
        return resolve_symbol(symbols, symbol, os.path.dirname(self.path), unlisted_ids=unlisted_ids)

    def add_run(self, scenario: str = "", seed: int | None = None, engine_options: dict | None = None,
                info: dict | None = None) -> int:
        """Record a run; return its id. Raises WriteError if that fails."""
        with self._writing("record a run"):
            rid = self._next_id("runs")
            cols, values = self._values("runs", {
                "id": rid, "created": time.time(), "scenario": str(scenario),
                "seed": None if seed is None else int(seed),
                "engine_options": json.dumps(engine_options or {}),
                "info": json.dumps(info or {}, default=str)})
            self.db.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES "
                            f"({', '.join('?' * len(cols))})", values)
            if cols[-1] == "row_crc":
                self._adjust("runs", 1, values[-1])
        return rid

    def runs(self) -> list[dict]:
        """Return every run row by id: id, created, scenario, seed (int or None), and
        engine_options and info as dicts.

        Raises CorruptionError if a row fails its checks or holds JSON that is not an object.
        """
        with self._reading("read runs"):
            rows = self._fetch("runs", "ORDER BY id")
        for r in rows:
            for c in ("engine_options", "info"):
                r[c] = self._json_object(r[c], f"table runs row id={r['id']}: {c}")
        return rows

    # -- segments ------------------------------------------------------------------------------
    @staticmethod
    def _row(info, tier: int) -> dict:
        return {"table_name": info.table, "symbol": info.symbol, "seq_lo": info.seq_lo,
                "seq_hi": info.seq_hi, "ts_lo": info.ts_lo, "ts_hi": info.ts_hi, "rows": info.rows,
                "bytes": info.bytes, "tier": tier, "codec": info.codec,
                "encodings": json.dumps(info.encodings), "path": info.path, "created": time.time(),
                "digest": getattr(info, "digest", "") or ""}

    def _insert_segments(self, rows: list[dict]) -> None:
        # why raw SQL: sqlite-utils' insert_all commits on its own, which would split the
        # surrounding transaction in two; why explicit ids: the id is part of the row checksum
        if not rows:
            return
        nid = self._next_id("segments")
        have = self._columns("segments")
        has_digest, checked = "digest" in have, "row_crc" in have
        batch = []
        for i, r in enumerate(rows):
            r = {"id": nid + i, **r}
            r = {k: (int(v) if k in _INT_SEGMENT_COLUMNS else v) for k, v in r.items()}
            if not has_digest:
                r.pop("digest", None)
            batch.append(self._values("segments", r, checked))
        cols = batch[0][0]
        self.db.conn.executemany(
            f"INSERT INTO segments ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [v for _, v in batch])
        if checked:
            self._adjust("segments", len(batch), sum(v[-1] for _, v in batch))

    def register_seal(self, infos, sealed_through: int, meta: dict | None = None) -> None:
        """Register freshly sealed segments, advance sealed_through and set the ``meta`` values
        (key -> text) given, all in one transaction.

        Raises WriteError if the transaction cannot be committed (nothing is registered then).
        """
        with self._writing("register sealed segments"):
            self._insert_segments([self._row(i, 0) for i in infos])
            self._put_meta("sealed_through", str(int(sealed_through)))
            for key, value in (meta or {}).items():
                self._put_meta(key, value)

    def replace_segments(self, old_ids: list[int], infos, tier: int) -> None:
        """Retire ``old_ids`` and register ``infos`` in one transaction.

        Raises StoreError if any old segment is no longer live (another compaction got there),
        WriteError if the transaction cannot be committed.
        """
        with self._writing("swap compacted segments"):
            q = ",".join("?" * len(old_ids))
            old = self.db.execute(f"SELECT row_crc FROM segments WHERE id IN ({q})" if self._checked("segments")
                                  else f"SELECT 0 FROM segments WHERE id IN ({q})", old_ids).fetchall()
            if len(old) != len(old_ids):
                self.db.execute("ROLLBACK")
                raise StoreError(f"{self.path}: segments {old_ids} changed during compaction")
            self.db.execute(f"DELETE FROM segments WHERE id IN ({q})", old_ids)
            self._adjust("segments", -len(old), -sum(r[0] or 0 for r in old))
            self._insert_segments([self._row(i, tier) for i in infos])

    def snapshot(self, table: str, symbol: int | None = None, seq=None, ts=None) -> tuple[int, list[dict]]:
        """Return (sealed_through, live segments of ``table`` overlapping the ranges), consistently.

        ``seq``/``ts`` are inclusive (lo, hi) pairs or None; segments come ordered by symbol, seq.
        Every segment row is checked (not only those in range: a damaged bound must not hide a
        row), so this raises CorruptionError if any row or ``sealed_through`` fails a check.
        """
        conn = self.db.conn
        with self._reading(f"read the segments of {table}"):
            conn.execute("BEGIN")
            try:
                sealed = self.sealed_through()
                rows = self._fetch("segments", copy=False)
            finally:
                conn.execute("COMMIT")
        self._check_layout(sealed, rows)
        sym = None if symbol is None else int(symbol)
        slo, shi = (None, None) if seq is None else (int(seq[0]), int(seq[1]))
        tlo, thi = (None, None) if ts is None else (int(ts[0]), int(ts[1]))
        out = [r for r in rows if r["table_name"] == table
               and (sym is None or r["symbol"] == sym)
               and (slo is None or (r["seq_hi"] >= slo and r["seq_lo"] <= shi))
               and (tlo is None or (r["ts_hi"] >= tlo and r["ts_lo"] <= thi))]
        out.sort(key=lambda r: (r["symbol"], r["seq_lo"]))
        return sealed, [dict(r) for r in out]

    def _check_layout(self, sealed: int, rows) -> None:
        """CorruptionError unless every segment row agrees with the facts a read relies on
        that no file is opened to check: its path lies under ``segments/<table_name>/<symbol>/``
        (where the writer puts it), its seqs end at or below ``sealed_through``, and the orders
        segments hold one row per seq up to ``sealed_through``. Why: rows
        and tallies can be edited with their checksums recomputed; a fills segment relabelled
        ``l2`` would silently vanish from fills reads (no fills read opens it to compare its
        index), and a lowered ``sealed_through`` would make reads take the WAL's copy of rows
        the segments also hold (returned twice)."""
        orders = [r for r in rows if r["table_name"] == "orders"]
        if orders:
            # every seq is one order message: the orders segments hold one row per seq from
            # the first sealed seq to sealed_through, so a raised sealed_through (rows above
            # the real one would be taken from neither segments nor WAL) shows as a shortfall
            first = min(r["seq_lo"] for r in orders)
            held = sum(r["rows"] for r in orders)
            if held != sealed - first + 1:
                raise self._corrupt(f"meta sealed_through = {sealed}, but the orders segments "
                                    f"hold {held} rows from seq {first} (one per seq): the "
                                    "catalog is damaged")
        for r in rows:
            where = f"table segments row id={r['id']}"
            prefix = f"segments/{r['table_name']}/{r['symbol']}/"
            if not str(r["path"]).replace(os.sep, "/").startswith(prefix):
                raise self._corrupt(f"{where}: path {r['path']!r} is not under {prefix} (its "
                                    f"table_name or symbol was changed): the catalog is damaged")
            if r["seq_hi"] > sealed:
                raise self._corrupt(f"{where}: holds seqs up to {r['seq_hi']}, above "
                                    f"sealed_through {sealed} (rows above it are read from the "
                                    "WAL: they would be read twice): the catalog is damaged")

    def data_version(self) -> int:
        """Return SQLite's ``data_version`` of this connection: it changes whenever another
        connection (any process) commits to the catalog, so a reader that cached what it read
        knows when to read again. Raises StoreError/CorruptionError naming the catalog."""
        with self._reading("read the data version"):
            return int(self.db.conn.execute("PRAGMA data_version").fetchone()[0])

    def all_segments(self) -> list[dict]:
        """Return every live segment row, each checked; CorruptionError if one fails."""
        with self._reading("read segments"):
            return self._fetch("segments", "ORDER BY id")

    # -- checkpoints ---------------------------------------------------------------------------
    def add_checkpoint(self, seq: int, path: str, nbytes: int, crc: int) -> None:
        """Register a durable checkpoint file for ``seq``; raises WriteError if that fails."""
        with self._writing("register a checkpoint"):
            self._upsert("checkpoints", {"seq": int(seq), "path": path, "bytes": int(nbytes),
                                         "crc": int(crc), "created": time.time()})

    def checkpoints(self) -> list[dict]:
        """Return every checkpoint row, oldest first, each checked; CorruptionError if one fails."""
        with self._reading("read checkpoints"):
            return self._fetch("checkpoints", "ORDER BY seq")

    def latest_checkpoint(self, at_or_before: int | None = None) -> dict | None:
        """Return the newest checkpoint row (at or before a seq if given), or None.

        Raises CorruptionError if any checkpoint row fails its checks.
        """
        rows = self.checkpoints()
        if at_or_before is not None:
            rows = [r for r in rows if r["seq"] <= int(at_or_before)]
        return max(rows, key=lambda r: r["seq"]) if rows else None

    def check(self) -> None:
        """Check every row of every table (types, checksums, JSON, the meta values readers need);
        returns None.

        Raises CorruptionError naming the catalog, table and row of the first damage found.
        """
        with self._reading("check the catalog"):
            conn = self.db.conn
            conn.execute("BEGIN")
            try:
                self._fetch("meta")
                self.sealed_through()
                self.symbols()
                self.runs()
                self._fetch("segments")
                self._fetch("checkpoints")
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close the database connection."""
        self.db.conn.close()


_KIND_NAMES = {"t": "text", "f": "a number", "i": "an integer", "i?": "an integer or NULL"}
_SEGMENT_TABLES = ("orders", "fills", "l2", "events")
_INT_SEGMENT_COLUMNS = {"id", "symbol", "seq_lo", "seq_hi", "ts_lo", "ts_hi", "rows", "bytes", "tier"}
