"""The gateway's own durable state: the requests behind engine messages, each order's client
identity and progress, and the sequenced report streams. One SQLite file,
``DATA_DIR/gateway/gateway.sqlite``, in WAL mode.

Invariants:
- ``begin_batch`` commits the requests (by the engine seq they will get) and the new orders
  before the batch reaches the engine, so after a crash every journaled message has its request
  here; rows of seqs the engine never journaled are dropped by ``forget_after``. The reports
  the core answered itself (seq 0) are committed in the same transaction, or in an
  ``end_batch`` of their own when no request of the batch reaches the engine.
- ``end_batch`` commits the batch's reports, the orders' new state and ``reported_through`` in
  one transaction, so the reports of a seq are either all stored or none.
- Under durability "fsync" every commit is synced (``synchronous=FULL``); under "interval" and
  "none" SQLite's NORMAL / OFF.
- Only this module writes the file; it never follows a symlink out of the data directory:
  ``gateway/`` and ``gateway.sqlite`` are refused if either is a symlink (checked with
  ``lstat`` before the file is opened).
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse

from exsim.exchange.errors import CorruptionError, StoreError
from exsim.exchange.gateway.reports import Origin, OrderState, Report

__all__ = ["StateDB", "STATE_DIR", "DB_NAME"]

STATE_DIR = "gateway"
DB_NAME = "gateway.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS requests (seq INTEGER PRIMARY KEY, origin TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, account TEXT NOT NULL,
                                   client_order_id TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS client_ids (account TEXT NOT NULL, client_order_id TEXT NOT NULL,
                                       order_id INTEGER NOT NULL,
                                       PRIMARY KEY (account, client_order_id));
CREATE TABLE IF NOT EXISTS reports (stream TEXT NOT NULL, rseq INTEGER NOT NULL,
                                    seq INTEGER NOT NULL, body TEXT NOT NULL,
                                    PRIMARY KEY (stream, rseq));
"""


class StateDB:
    """The gateway's SQLite state file (module docstring). One writer: the gateway."""

    def __init__(self, data_dir: str, durability: str):
        self.dir = os.path.join(data_dir, STATE_DIR)
        if os.path.lexists(self.dir) and (os.path.islink(self.dir) or not os.path.isdir(self.dir)):
            raise CorruptionError(f"{self.dir}: is a symlink or not a directory; the gateway's "
                                  "state must be inside the data directory", self.dir, -1)
        os.makedirs(self.dir, mode=0o700, exist_ok=True)   # why 0700: every account's reports
        self.path = os.path.join(os.path.abspath(data_dir), STATE_DIR, DB_NAME)
        if os.path.islink(self.path):
            raise CorruptionError(f"{self.path}: is a symlink; the gateway's state must be "
                                  "inside the data directory", self.path, -1)
        try:
            # why check_same_thread=False: the gateway writes from its one worker thread and
            # reads from the event loop; SQLite serialises them and WAL lets reads not block
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            sync = {"fsync": "FULL", "interval": "NORMAL"}.get(durability, "OFF")
            self.db.execute(f"PRAGMA synchronous={sync}")
            self.db.executescript(_SCHEMA)
            version = self._meta("schema_version", None)
            if version is None:
                self._set_meta("schema_version", SCHEMA_VERSION)
            elif version != SCHEMA_VERSION:
                raise StoreError(f"{self.path}: gateway state version {version}; this exsim "
                                 f"reads version {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            raise CorruptionError(f"{self.path}: the gateway state cannot be read: {e}",
                                  self.path, -1) from None

    def _meta(self, key: str, default):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            return default
        if type(row[0]) is not int:
            raise CorruptionError(f"{self.path}: meta {key!r} is {row[0]!r}, not an integer",
                                  self.path, -1)
        return row[0]

    def _set_meta(self, key: str, value: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, int(value)))

    # -- reading at start ------------------------------------------------------------------------
    def reported_through(self) -> int:
        """Return the last engine seq whose reports are stored (0: none)."""
        return self._meta("reported_through", 0)

    def next_order_id(self) -> int:
        """Return the next engine order id the gateway may use (ids are never reused)."""
        return self._meta("next_order_id", 1)

    def last_ts(self) -> int:
        """Return the latest timestamp the gateway stamped (0: none)."""
        return self._meta("last_ts", 0)

    def load_orders(self) -> tuple[dict, dict]:
        """Return ({order_id: OrderState}, {(account, client_order_id): order_id}).

        Raises CorruptionError if a stored row does not parse."""
        states, ids = {}, {}
        try:
            for (text,) in self.db.execute("SELECT state FROM orders"):
                st = OrderState.from_json(text)
                states[st.order_id] = st
            for account, cid, oid in self.db.execute(
                    "SELECT account, client_order_id, order_id FROM client_ids"):
                ids[(account, cid)] = int(oid)
        except (ValueError, TypeError) as e:
            raise CorruptionError(f"{self.path}: a stored order does not parse: {e}",
                                  self.path, -1) from None
        return states, ids

    def load_order(self, order_id: int) -> OrderState | None:
        """Return the stored state of one order, or None if there is none.

        Raises CorruptionError if the stored row does not parse."""
        row = self.db.execute("SELECT state FROM orders WHERE order_id = ?",
                              (int(order_id),)).fetchone()
        try:
            return None if row is None else OrderState.from_json(row[0])
        except (ValueError, TypeError) as e:
            raise CorruptionError(f"{self.path}: a stored order does not parse: {e}",
                                  self.path, -1) from None

    def stream_heads(self) -> dict[str, int]:
        """Return {stream: its last rseq}."""
        return {s: int(r) for s, r in
                self.db.execute("SELECT stream, MAX(rseq) FROM reports GROUP BY stream")}

    def origins(self, lo: int, hi: int) -> dict[int, Origin]:
        """Return {seq: Origin} of the requests with lo <= seq <= hi."""
        try:
            return {int(s): Origin.from_json(t) for s, t in self.db.execute(
                "SELECT seq, origin FROM requests WHERE seq BETWEEN ? AND ?", (lo, hi))}
        except (ValueError, TypeError) as e:
            raise CorruptionError(f"{self.path}: a stored request does not parse: {e}",
                                  self.path, -1) from None

    def forget_after(self, seq: int) -> list[int]:
        """Drop the requests after ``seq`` (the engine never journaled them) and the orders they
        created; return those order ids."""
        gone = [int(r[0]) for r in self.db.execute(
            "SELECT order_id FROM orders WHERE json_extract(state, '$.status') = 'pending' "
            "AND order_id IN (SELECT json_extract(origin, '$.order_id') FROM requests "
            "WHERE seq > ? AND json_extract(origin, '$.kind') = 'new')", (seq,))]
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM requests WHERE seq > ?", (seq,))
            self.db.executemany("DELETE FROM orders WHERE order_id = ?", [(o,) for o in gone])
            self.db.executemany("DELETE FROM client_ids WHERE order_id = ?", [(o,) for o in gone])
        return gone

    def read_stream(self, stream: str, after: int, upto: int, limit: int = 1 << 30) -> list[Report]:
        """Return the reports of ``stream`` with after < rseq <= upto, in rseq order."""
        try:
            return [Report.from_json(t) for (t,) in self.db.execute(
                "SELECT body FROM reports WHERE stream = ? AND rseq > ? AND rseq <= ? "
                "ORDER BY rseq LIMIT ?", (stream, int(after), int(upto), int(limit)))]
        except ValueError as e:
            raise CorruptionError(f"{self.path}: a stored report does not parse: {e}",
                                  self.path, -1) from None

    # -- writing, batch by batch ------------------------------------------------------------------
    def begin_batch(self, origins: dict, new_orders: list, next_order_id: int, last_ts: int,
                    reports: list = ()) -> None:
        """Commit the requests of a batch and the orders it creates, before the engine runs it,
        with ``reports`` the core answered itself (seq 0: they need no engine message).

        Raises WriteError if SQLite cannot write."""
        self._write(lambda db: (
            reports and db.executemany(
                "INSERT INTO reports (stream, rseq, seq, body) VALUES (?, ?, ?, ?)",
                [(r.stream, r.rseq, r.seq, r.to_json()) for r in reports]),
            db.executemany("INSERT OR REPLACE INTO requests (seq, origin) VALUES (?, ?)",
                           [(s, o.to_json()) for s, o in origins.items()]),
            db.executemany("INSERT OR REPLACE INTO orders (order_id, account, client_order_id, "
                           "state) VALUES (?, ?, ?, ?)",
                           [(st.order_id, st.account, st.client_order_id, st.to_json())
                            for st in new_orders]),
            db.executemany("INSERT OR REPLACE INTO client_ids (account, client_order_id, "
                           "order_id) VALUES (?, ?, ?)",
                           [(st.account, st.client_order_id, st.order_id) for st in new_orders]),
            self._set_meta("next_order_id", next_order_id),
            self._set_meta("last_ts", last_ts)))

    def end_batch(self, reports: list[Report], changed: list, client_ids: list,
                  reported_through: int, last_ts: int | None = None, *,
                  bodies: list[str] | None = None) -> None:
        """Commit a batch's reports, the changed order states, new client ids (a replace's),
        ``reported_through`` and (if given) the latest stamp in one transaction. ``bodies``:
        each report's ``to_json()`` if the caller has it already. Raises WriteError if SQLite
        cannot write."""
        if bodies is None:
            bodies = [r.to_json() for r in reports]
        self._write(lambda db: (
            last_ts is not None and self._set_meta("last_ts", max(last_ts, self.last_ts())),
            db.executemany("INSERT INTO reports (stream, rseq, seq, body) VALUES (?, ?, ?, ?)",
                           [(r.stream, r.rseq, r.seq, b) for r, b in zip(reports, bodies)]),
            db.executemany("UPDATE orders SET client_order_id = ?, state = ? WHERE order_id = ?",
                           [(st.client_order_id, st.to_json(), st.order_id) for st in changed]),
            db.executemany("INSERT OR REPLACE INTO client_ids (account, client_order_id, "
                           "order_id) VALUES (?, ?, ?)", client_ids),
            self._set_meta("reported_through", max(reported_through, self.reported_through()))))

    def _write(self, fn) -> None:
        from exsim.exchange.errors import WriteError

        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                fn(self.db)
        except sqlite3.Error as e:
            raise WriteError(f"{self.path}: the gateway state cannot be written: {e}") from None

    def close(self) -> None:
        """Close the file (idempotent)."""
        try:
            self.db.close()
        except sqlite3.Error:
            pass


class StreamReader:
    """A read-only connection to the state file, for replays (``read_stream`` as StateDB's),
    used from one thread. Why its own connection: WAL lets it read while the gateway's
    connection writes, so a replay's reads need neither that connection nor the event loop."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.db = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True,
                                      check_same_thread=False)
        except sqlite3.DatabaseError as e:
            raise CorruptionError(f"{path}: the gateway state cannot be read: {e}",
                                  path, -1) from None

    read_stream = StateDB.read_stream
    close = StateDB.close
