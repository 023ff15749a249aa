"""The catalog's schema: its tables' checksummed columns, the row checksum, creation and migration.

``_ROW_COLUMNS`` lists, per table, the columns a row checksum covers, in checksum order, with
their kind; ``_row_crc`` is that checksum (store.catalog explains why every row carries one).
``CatalogSchema`` is the part of ``Catalog`` that creates the tables of a new catalog and
brings an older one up to date on open.

Invariants:
- Migrations are additive (a column added with a default, checksums computed for rows as they
  stand), each in its own transaction, and safe against another process migrating at once.
- A catalog opened read-only, or whose file cannot be written, is never migrated.
"""

from __future__ import annotations

import os
import sqlite3

import crc32c

from exsim.exchange.errors import StoreError

FORMAT_VERSION = 1

# The checksummed columns of each table, in checksum order, with their kind: "i" integer,
# "i?" integer or NULL, "f" real (an integer is taken as its float), "t" text.
_ROW_COLUMNS = {
    "meta": (("key", "t"), ("value", "t")),
    "symbols": (("id", "i"), ("name", "t"), ("tick_size", "f"), ("info", "t")),
    "runs": (("id", "i"), ("created", "f"), ("scenario", "t"), ("seed", "i?"),
             ("engine_options", "t"), ("info", "t")),
    "segments": (("id", "i"), ("table_name", "t"), ("symbol", "i"), ("seq_lo", "i"),
                 ("seq_hi", "i"), ("ts_lo", "i"), ("ts_hi", "i"), ("rows", "i"), ("bytes", "i"),
                 ("tier", "i"), ("codec", "t"), ("encodings", "t"), ("path", "t"),
                 ("created", "f")),
    "checkpoints": (("seq", "i"), ("path", "t"), ("bytes", "i"), ("crc", "i"), ("created", "f")),
}
_KEY = {"meta": "key", "symbols": "id", "runs": "id", "segments": "id", "checkpoints": "seq"}


def _row_crc(table: str, values) -> int:
    """CRC32C of ``values`` (already type-checked, in ``_ROW_COLUMNS`` order) of ``table``.

    Canonical form: the table name, then per value a kind letter and its text (integers in
    decimal, reals as float.hex, text with its length first, NULL as "N"), joined by 0x1f; so
    no two different rows share a form.
    """
    parts = [table]
    for (_, kind), v in zip(_ROW_COLUMNS[table], values):
        if v is None:
            parts.append("N")
        elif kind == "t":
            parts.append(f"S{len(v)}:{v}")
        elif kind == "f":
            parts.append("F" + float(v).hex())
        else:
            parts.append(f"I{v}")
    return crc32c.crc32c("\x1f".join(parts).encode("utf-8", "surrogatepass"))


class CatalogSchema:
    """Creation and migration of the catalog's tables; mixed into ``Catalog``, whose ``db``,
    ``path``, ``readonly``, ``get_meta``, ``_put_meta``, ``_typed`` and ``_corrupt`` it uses."""

    def _ensure_schema(self, create: bool) -> None:
        db = self.db
        names = set(db.table_names())
        if "meta" not in names and create and not self.readonly:
            with db.conn:
                db.execute("BEGIN IMMEDIATE")
                if "meta" not in db.table_names():
                    self._create_tables()
            names = set(db.table_names())
        missing = [t for t in _ROW_COLUMNS if t not in names]
        if missing:
            raise self._corrupt(f"not an exsim catalog (no table {', '.join(missing)}; "
                                "truncated, or another database)")
        version = self.get_meta("format_version")
        if version is None:
            raise self._corrupt("meta has no format_version")
        if version.strip() != str(FORMAT_VERSION):
            raise StoreError(f"{self.path}: catalog format version {version!r}, this code reads "
                             f"{FORMAT_VERSION}")
        if not self.readonly and self._writable():
            self._add_digest_column()
            self._add_row_crcs()

    def _create_tables(self) -> None:
        db = self.db
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT, row_crc INTEGER)")
        db.execute("CREATE TABLE symbols (id INTEGER PRIMARY KEY, name TEXT, tick_size FLOAT, "
                   "info TEXT, row_crc INTEGER)")
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, created FLOAT, scenario TEXT, "
                   "seed INTEGER, engine_options TEXT, info TEXT, row_crc INTEGER)")
        db.execute("CREATE TABLE segments (id INTEGER PRIMARY KEY, table_name TEXT, symbol INTEGER, "
                   "seq_lo INTEGER, seq_hi INTEGER, ts_lo INTEGER, ts_hi INTEGER, rows INTEGER, "
                   "bytes INTEGER, tier INTEGER, codec TEXT, encodings TEXT, path TEXT, "
                   "created FLOAT, digest TEXT NOT NULL DEFAULT '', row_crc INTEGER)")
        db.execute("CREATE INDEX idx_segments_table_name_symbol_seq_lo "
                   "ON segments (table_name, symbol, seq_lo)")
        db.execute("CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY, path TEXT, bytes INTEGER, "
                   "crc INTEGER, created FLOAT, row_crc INTEGER)")
        self._put_meta("format_version", str(FORMAT_VERSION))
        self._put_meta("sealed_through", "0")
        for table in _ROW_COLUMNS:
            if table != "meta":
                self._put_meta(f"rows:{table}", "0:0")

    def _add_digest_column(self) -> None:
        """Give a catalog made before row digests its ``segments.digest`` column ("" = unknown).

        Why a column added on open and no format version bump: the change is additive both
        ways (this code reads old catalogs once the column is there, older code ignores it and
        its inserts get the default ""). A catalog that cannot be written (read-only file) is
        left as it is: its segment rows then have no "digest" key, which readers take as "" (unknown).
        """
        if "digest" in self._columns("segments"):
            return
        try:
            with self.db.conn:
                self.db["segments"].add_column("digest", str, not_null_default="")
        except sqlite3.OperationalError:
            # another process added it meanwhile (duplicate column), or a read-only catalog
            if "digest" not in self._columns("segments") and self._writable():
                raise

    def _add_row_crcs(self) -> None:
        """Give each table of a catalog made before row checksums its ``row_crc`` column, with
        the checksums of its rows as they stand (they were trusted as they are until now).

        Raises CorruptionError if a row holds a value of the wrong type (nothing is added then).
        """
        for table in _ROW_COLUMNS:
            if "row_crc" in self._columns(table):
                continue
            try:
                with self.db.conn:
                    self.db.execute("BEGIN IMMEDIATE")
                    if "row_crc" in self._columns(table):   # another process got there first
                        continue
                    cols = _ROW_COLUMNS[table]
                    rows = self.db.execute(f"SELECT rowid, {', '.join(c for c, _ in cols)} "
                                           f"FROM {table}").fetchall()
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN row_crc INTEGER")
                    crcs = [(_row_crc(table, self._typed(table, r[1:])), r[0]) for r in rows]
                    self.db.conn.executemany(f"UPDATE {table} SET row_crc = ? WHERE rowid = ?", crcs)
                    if table != "meta":
                        self._put_meta(f"rows:{table}", f"{len(crcs)}:{sum(c for c, _ in crcs)}")
            except sqlite3.OperationalError:
                if "row_crc" not in self._columns(table) and self._writable():
                    raise

    def _columns(self, table: str) -> list[str]:
        """The column names of ``table`` ([] if it does not exist)."""
        return [r[1] for r in self.db.execute(f"PRAGMA table_info({table})").fetchall()]

    def _writable(self) -> bool:
        return os.access(self.path, os.W_OK) and os.access(os.path.dirname(self.path) or ".", os.W_OK)
