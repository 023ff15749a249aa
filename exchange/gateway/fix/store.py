"""Persistent FIX session state: sequence numbers and the outbound message store.

One SQLite file (WAL mode) under the gateway's state directory holds, per session key (the
account name and the session kind), the next inbound and outbound MsgSeqNum, the last report
rseq sent, and every outbound message: its MsgSeqNum, MsgType, the report rseq it carried (0
for none) and, for messages a resend repeats, its encoded bytes.

Invariants:
- An outbound message is committed (its row and the session's next outbound MsgSeqNum and
  last rseq, in one transaction) before its bytes are written to the socket, so after a crash
  a ResendRequest gets back exactly the bytes that may have been sent, and a report is never
  sent under two different MsgSeqNums with different content.
- The next inbound MsgSeqNum is committed before the messages it counts are handed to the
  engine: a message counted as received is never processed twice after a restart (one lost
  in the crash before its batch was durable got no acknowledgement).
- ``synchronous=NORMAL``: a commit survives the process being killed (SIGKILL); a power loss
  may lose the last commits (the client then sees a MsgSeqNum lower than it expects).
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from dataclasses import dataclass

__all__ = ["SessionStore", "SessionState", "Outbound"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fix_session (
    key TEXT PRIMARY KEY, next_in INTEGER NOT NULL, next_out INTEGER NOT NULL,
    last_rseq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS fix_outbound (
    key TEXT NOT NULL, seq INTEGER NOT NULL, msg_type TEXT NOT NULL, rseq INTEGER NOT NULL,
    raw BLOB, PRIMARY KEY (key, seq));
"""


@dataclass
class SessionState:
    """The persisted counters of one session."""

    next_in: int = 1
    next_out: int = 1
    last_rseq: int = 0


@dataclass(frozen=True)
class Outbound:
    """One stored outbound message (``raw`` is None for those a resend gap-fills)."""

    seq: int
    msg_type: str
    rseq: int
    raw: bytes | None


class SessionStore:
    """The SQLite file of every FIX session's state (module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def load(self, key: str) -> SessionState:
        """Return the state of session ``key`` (a fresh one if it never logged on)."""
        row = self.db.execute("SELECT next_in, next_out, last_rseq FROM fix_session WHERE key=?",
                              (key,)).fetchone()
        return SessionState(*row) if row else SessionState()

    def commit(self, key: str, state: SessionState, rows: list[Outbound]) -> None:
        """Store ``rows`` and ``state`` of session ``key`` in one transaction."""
        db = self.db
        db.execute("BEGIN")
        try:
            if rows:
                db.executemany("INSERT OR REPLACE INTO fix_outbound VALUES (?,?,?,?,?)",
                               [(key, r.seq, r.msg_type, r.rseq, r.raw) for r in rows])
            db.execute("INSERT OR REPLACE INTO fix_session VALUES (?,?,?,?)",
                       (key, state.next_in, state.next_out, state.last_rseq))
            db.execute("COMMIT")
        except BaseException:
            # why only in a transaction: SQLite rolls back by itself on a full disk, and a
            # second ROLLBACK's "no transaction is active" would hide the "disk is full"
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def resendable(self, key: str, first: int, last: int, limit: int) -> list[Outbound]:
        """Return up to ``limit`` stored outbound messages of ``key`` that a resend repeats
        (those with bytes), first <= seq <= last, in seq order."""
        rows = self.db.execute("SELECT seq, msg_type, rseq, raw FROM fix_outbound WHERE key=? "
                               "AND seq BETWEEN ? AND ? AND raw IS NOT NULL ORDER BY seq "
                               "LIMIT ?", (key, first, last, limit))
        return [Outbound(*r) for r in rows]

    def reset(self, key: str, last_rseq: int) -> SessionState:
        """Forget the outbound store of ``key`` and restart both sequence numbers at 1 (a
        Logon with ResetSeqNumFlag); reports already sent stay sent. Returns the new state."""
        state = SessionState(1, 1, last_rseq)
        db = self.db
        db.execute("BEGIN")
        db.execute("DELETE FROM fix_outbound WHERE key=?", (key,))
        db.execute("INSERT OR REPLACE INTO fix_session VALUES (?,?,?,?)",
                   (key, state.next_in, state.next_out, state.last_rseq))
        db.execute("COMMIT")
        return state

    def close(self) -> None:
        """Close the database."""
        self.db.close()


class OutboundReader:
    """A read-only connection to the session file, for resends (``resendable`` as
    SessionStore's), used from one thread. Why its own connection: WAL lets it read what the
    sessions committed while their connection writes, so a resend's reads need neither that
    connection nor the event loop."""

    def __init__(self, path: str):
        self.path = path
        self.db = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True,
                                  check_same_thread=False)

    resendable = SessionStore.resendable
    close = SessionStore.close
