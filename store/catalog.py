"""The catalog: ``catalog.sqlite`` in a data directory, through sqlite-utils.

Tables (columns in docs/formats.md, "Catalog"):
- ``meta``        key/value: format version, ``sealed_through`` (every row with seq <= it is in a
                  live segment; rows above it are only in the WAL), engine class.
- ``symbols``     id, name, tick size (REAL) and the engine's per-symbol config.
- ``runs``        what produced the data: scenario, seed, engine options, free-form info.
- ``segments``    live segment files: table, symbol, seq and ts ranges, rows, bytes, tier, codec,
                  encodings, path, digest (of the rows, store/digest.py; "" = unknown).
- ``checkpoints`` engine checkpoint files by seq.

Invariants:
- Sealing registers its segments and advances ``sealed_through`` in one transaction; compaction
  swaps old segments for their merge in one transaction. A reader takes the segment list and
  ``sealed_through`` in one read transaction, so it sees either the state before or after,
  never a gap or a duplicate.
- A file becomes visible only after it is durable on disk; files are deleted only after the
  transaction that retired them committed (a crash in between leaves orphans, removed on open).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import sqlite_utils
from contextlib import contextmanager

from exchange.errors import StoreError, WriteError

__all__ = ["Catalog", "CATALOG_NAME", "FORMAT_VERSION"]

CATALOG_NAME = "catalog.sqlite"
FORMAT_VERSION = 1


class Catalog:
    """Open (creating if asked) the catalog of ``data_dir``.

    Raises StoreError if it does not exist and ``create`` is False, or has another format version.
    """

    def __init__(self, data_dir: str, create: bool = False):
        self.path = os.path.join(data_dir, CATALOG_NAME)
        if not create and not os.path.exists(self.path):
            raise StoreError(f"{data_dir} is not an exsim data directory (no {CATALOG_NAME})")
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db = sqlite_utils.Database(conn)
            self.db.execute("PRAGMA journal_mode=WAL")
            # why: in WAL mode the default NORMAL may lose the last commit on power loss; a
            # registered segment must outlive the WAL file that is deleted after it
            self.db.execute("PRAGMA synchronous=FULL")
            self._ensure_schema()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot open catalog: {e}") from e

    def _ensure_schema(self) -> None:
        db = self.db
        with db.conn:
            if "meta" not in db.table_names():
                db["meta"].create({"key": str, "value": str}, pk="key")
                db["meta"].insert({"key": "format_version", "value": str(FORMAT_VERSION)})
                db["meta"].insert({"key": "sealed_through", "value": "0"})
                db["symbols"].create({"id": int, "name": str, "tick_size": float, "info": str}, pk="id")
                db["runs"].create({"id": int, "created": float, "scenario": str, "seed": int,
                                   "engine_options": str, "info": str}, pk="id")
                db["segments"].create({"id": int, "table_name": str, "symbol": int, "seq_lo": int,
                                       "seq_hi": int, "ts_lo": int, "ts_hi": int, "rows": int,
                                       "bytes": int, "tier": int, "codec": str, "encodings": str,
                                       "path": str, "created": float, "digest": str},
                                      pk="id", not_null={"digest"}, defaults={"digest": ""})
                db["segments"].create_index(["table_name", "symbol", "seq_lo"])
                db["checkpoints"].create({"seq": int, "path": str, "bytes": int, "crc": int,
                                          "created": float}, pk="seq")
        version = int(self.get_meta("format_version"))
        if version != FORMAT_VERSION:
            raise StoreError(f"{self.path}: catalog format version {version}, this code reads {FORMAT_VERSION}")
        self._add_digest_column()

    def _add_digest_column(self) -> None:
        """Give a catalog made before row digests its ``segments.digest`` column ("" = unknown).

        Why a column added on open and no format version bump: the change is additive both
        ways (this code reads old catalogs once the column is there, older code ignores it and
        its inserts get the default ""). A catalog that cannot be written (read-only file) is
        left as it is: its segment rows then have no "digest" key, which readers take as "" (unknown).
        """
        if "digest" in self.db["segments"].columns_dict:
            return
        try:
            with self.db.conn:
                self.db["segments"].add_column("digest", str, not_null_default="")
        except sqlite3.OperationalError:
            # another process added it meanwhile (duplicate column), or a read-only catalog
            if "digest" not in self.db["segments"].columns_dict and self._writable():
                raise

    def _writable(self) -> bool:
        return os.access(self.path, os.W_OK) and os.access(os.path.dirname(self.path) or ".", os.W_OK)

    @contextmanager
    def _writing(self, what: str):
        """Run a write transaction; sqlite failures (disk full, file size limit) become WriteError."""
        try:
            with self.db.conn:
                yield
        except sqlite3.OperationalError as e:
            raise WriteError(f"{self.path}: cannot {what}: {e}") from e

    # -- meta, symbols, runs -------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """Return a meta value, or ``default`` if the key is absent."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value) -> None:
        """Set a meta value (stored as text)."""
        with self.db.conn:
            self.db["meta"].upsert({"key": key, "value": str(value)}, pk="key")

    def sealed_through(self) -> int:
        """Return the seq through which every row is in a live segment."""
        return int(self.get_meta("sealed_through"))

    def set_symbols(self, config: dict) -> None:
        """Record the symbols of an engine config ({"symbols": [{"name", "id", "tick_size", ...}]}).

        Tick sizes are stored as REAL (0.01 stays 0.01; catalogs written before this declared the
        column INTEGER, and SQLite keeps a REAL there unchanged, so they take fractions too).
        """
        rows = []
        for i, s in enumerate(config.get("symbols", [])):
            sid = int(s.get("id", i))
            rows.append({"id": sid, "name": str(s.get("name", sid)),
                         "tick_size": float(s.get("tick_size", 1) or 1), "info": json.dumps(s)})
        with self.db.conn:
            self.db["symbols"].upsert_all(rows, pk="id")

    def symbols(self) -> list[dict]:
        """Return every symbol row (id, name, tick_size as float, info as a dict), by id.

        Catalogs written before tick sizes were REAL hold 0 for a fractional tick; the engine
        config kept in ``info`` has the true value, which is returned instead.
        """
        out = []
        for r in self.db.execute("SELECT id, name, tick_size, info FROM symbols ORDER BY id").fetchall():
            info = json.loads(r[3] or "{}")
            tick = r[2]
            if not tick and info.get("tick_size"):
                tick = info["tick_size"]   # why: old integer column truncated 0.01 to 0
            out.append({"id": r[0], "name": r[1], "tick_size": float(tick if tick else 1), "info": info})
        return out

    def symbol_id(self, name: str) -> int | None:
        """Return the id of a symbol name, or None."""
        row = self.db.execute("SELECT id FROM symbols WHERE name = ?", [name]).fetchone()
        return row[0] if row else None

    def add_run(self, scenario: str = "", seed: int | None = None, engine_options: dict | None = None,
                info: dict | None = None) -> int:
        """Record a run; return its id."""
        with self.db.conn:
            t = self.db["runs"].insert({"created": time.time(), "scenario": scenario, "seed": seed,
                                        "engine_options": json.dumps(engine_options or {}),
                                        "info": json.dumps(info or {}, default=str)})
        return t.last_pk

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
        # surrounding transaction in two
        if rows:
            cols = list(rows[0])
            self.db.conn.executemany(
                f"INSERT INTO segments ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[r[c] for c in cols] for r in rows])

    def register_seal(self, infos, sealed_through: int, meta: dict | None = None) -> None:
        """Register freshly sealed segments, advance sealed_through and set the ``meta`` values
        (key -> text) given, all in one transaction.

        Raises WriteError if the transaction cannot be committed (nothing is registered then).
        """
        with self._writing("register sealed segments"):
            self.db.execute("BEGIN IMMEDIATE")
            self._insert_segments([self._row(i, 0) for i in infos])
            self.db.execute("UPDATE meta SET value = ? WHERE key = 'sealed_through'", [str(sealed_through)])
            for key, value in (meta or {}).items():
                self.db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) "
                                "DO UPDATE SET value = excluded.value", [key, str(value)])

    def replace_segments(self, old_ids: list[int], infos, tier: int) -> None:
        """Retire ``old_ids`` and register ``infos`` in one transaction.

        Raises StoreError if any old segment is no longer live (another compaction got there),
        WriteError if the transaction cannot be committed.
        """
        with self._writing("swap compacted segments"):
            self.db.execute("BEGIN IMMEDIATE")
            q = ",".join("?" * len(old_ids))
            n = self.db.execute(f"SELECT count(*) FROM segments WHERE id IN ({q})", old_ids).fetchone()[0]
            if n != len(old_ids):
                self.db.execute("ROLLBACK")
                raise StoreError(f"{self.path}: segments {old_ids} changed during compaction")
            self.db.execute(f"DELETE FROM segments WHERE id IN ({q})", old_ids)
            self._insert_segments([self._row(i, tier) for i in infos])

    def snapshot(self, table: str, symbol: int | None = None, seq=None, ts=None) -> tuple[int, list[dict]]:
        """Return (sealed_through, live segments of ``table`` overlapping the ranges), consistently.

        ``seq``/``ts`` are inclusive (lo, hi) pairs or None; segments come ordered by symbol, seq.
        """
        where, args = ["table_name = ?"], [table]
        if symbol is not None:
            where.append("symbol = ?")
            args.append(int(symbol))
        if seq is not None:
            where.append("seq_hi >= ? AND seq_lo <= ?")
            args += [int(seq[0]), int(seq[1])]
        if ts is not None:
            where.append("ts_hi >= ? AND ts_lo <= ?")
            args += [int(ts[0]), int(ts[1])]
        conn = self.db.conn
        conn.execute("BEGIN")
        try:
            sealed = int(conn.execute("SELECT value FROM meta WHERE key = 'sealed_through'").fetchone()[0])
            cur = conn.execute(f"SELECT * FROM segments WHERE {' AND '.join(where)} ORDER BY symbol, seq_lo", args)
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        finally:
            conn.execute("COMMIT")
        return sealed, rows

    def all_segments(self) -> list[dict]:
        """Return every live segment row."""
        return list(self.db["segments"].rows)

    # -- checkpoints ---------------------------------------------------------------------------
    def add_checkpoint(self, seq: int, path: str, nbytes: int, crc: int) -> None:
        """Register a durable checkpoint file for ``seq``; raises WriteError if that fails."""
        with self._writing("register a checkpoint"):
            self.db["checkpoints"].upsert({"seq": seq, "path": path, "bytes": nbytes, "crc": crc,
                                           "created": time.time()}, pk="seq")

    def checkpoints(self) -> list[dict]:
        """Return every checkpoint row, oldest first."""
        return list(self.db["checkpoints"].rows_where(order_by="seq"))

    def latest_checkpoint(self, at_or_before: int | None = None) -> dict | None:
        """Return the newest checkpoint row (at or before a seq if given), or None."""
        if at_or_before is None:
            row = self.db.execute("SELECT * FROM checkpoints ORDER BY seq DESC LIMIT 1")
        else:
            row = self.db.execute("SELECT * FROM checkpoints WHERE seq <= ? ORDER BY seq DESC LIMIT 1",
                                  [at_or_before])
        names = [d[0] for d in row.description]
        r = row.fetchone()
        return dict(zip(names, r)) if r else None

    def close(self) -> None:
        """Close the database connection."""
        self.db.conn.close()
