"""Sealing: journaled records written as columnar segments, and WAL files trimmed once covered.

A seal takes the unsealed records, splits each table's rows by symbol (stable: seq order kept
per symbol), encodes each (table, symbol) as one segment (store.segment, encodings chosen by
store.choice.Chooser) with the digest of its rows (store.digest), and commits the files;
``Session`` then registers them and advances ``sealed_through`` in one catalog transaction.
``SealJob`` does the writing on a thread of its own.

Invariants:
- Writing never registers: a segment becomes visible only through the session's catalog
  transaction, after its file is durable; a crash in between leaves orphans, swept on open.
- No segment file is written through a symlinked ``segments/<table>/<symbol>``.
- A WAL file is deleted (``trim_wal``) only once every seq it holds is both sealed and covered
  by a checkpoint.
"""

from __future__ import annotations

import json
import os
import threading

import numpy as np

from exsim.exchange.schema import TABLE_DTYPES
from exsim.store import codecs
from exsim.store.digest import DIGEST_TABLES, RowDigest, by_symbol
from exsim.store.paths import inside
from exsim.store.segment import commit_segments, encode_columns
from exsim.store.tables import STORED_DTYPES, TABLES
from exsim.store.wal import fsync_dir

__all__ = ["SealJob", "digests_by_symbol", "write_segments", "register_seal", "trim_wal"]


class SealJob:
    """Segments of some records being written on a background thread.

    The thread only writes (and fsyncs) segment files; registering them in the catalog, which
    makes them visible, happens on the session's thread when the job is reaped. A crash before
    that leaves unregistered files, removed as orphans on open; the WAL still holds the rows.
    ``session`` is the Session whose ``_write_segments`` the thread calls.
    """

    def __init__(self, session, records: list):
        self.records = records
        self.through = records[-1].last_seq
        self.infos: list = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(session,), name="exsim-seal",
                                       daemon=True)
        self.thread.start()

    def _run(self, session) -> None:
        try:
            self.infos = session._write_segments(self.records)
        except BaseException as e:   # why: re-raised on the session's thread when reaped
            self.error = e


def digests_by_symbol(table: str, arrays: list) -> dict:
    """Return {symbol: digest of its rows} over the record arrays of ``table`` (packed schema dtype, in
    seq order); {} for a table without digests (orders). See store/digest.py."""
    if table not in DIGEST_TABLES:
        return {}
    running = {}
    for a in arrays:
        for sym, rows in by_symbol(a):
            if sym not in running:
                running[sym] = RowDigest(table)
            running[sym].update(rows)
    return {sym: d.hexdigest() for sym, d in running.items()}


def write_segments(data_dir: str, recs: list, chooser, scratch: np.ndarray, *, lock, sync: bool):
    """Write the segments of records ``recs`` (fsynced when ``sync``), one per table and symbol,
    choosing encodings with ``chooser``; register nothing.

    ``scratch`` is a reused uint64 (fields, n) buffer for the columns. Returns (SegmentInfos,
    the scratch buffer, grown when it was too small). Raises WriteError if a file cannot be
    written, StoreError if ``lock`` is no longer held, CorruptionError if a segment directory
    is a symlink.
    """
    built = []
    for table in TABLES:
        dtype = STORED_DTYPES[table]
        want = TABLE_DTYPES[table]   # the records' (packed schema) dtype; orders without seq
        arrays = [r.orders if table == "orders" else getattr(r, table) for r in recs]
        arrays = [a if a.dtype == want else a.astype(want) for a in arrays]
        if sum(a.size for a in arrays) == 0:
            continue
        # why columns in one pass: each batch's rows are read once, straight into the uint64
        # columns the encoders take (a pass per field would stream the rows ~10 times)
        names = [c for c in dtype.names if not (table == "orders" and c == "seq")]
        total = sum(a.size for a in arrays)
        if scratch.shape[1] < total:   # why reused: fresh pages fault on first write
            scratch = np.empty((scratch.shape[0], total + total // 4), np.uint64)
        cols = codecs.split_u64(arrays, names, scratch)
        if table == "orders":
            cols["seq"] = codecs.seq_u64([r.first_seq for r in recs], [a.size for a in arrays])
        syms = cols["symbol"]
        digests = digests_by_symbol(table, arrays)
        if syms.min() == syms.max():
            built.append(encode_columns(data_dir, table, int(syms[0]), cols,
                                        codec="lz4", chooser=chooser))
            built[-1].info.digest = digests.get(int(syms[0]), "")
            continue
        order = np.argsort(syms, kind="stable")   # stable: seq order kept per symbol
        ss = syms[order]
        cuts = np.flatnonzero(ss[1:] != ss[:-1]) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, ss.size]):
            part = {c: codecs.take_u64(u, order, int(lo), int(hi)) for c, u in cols.items()}
            built.append(encode_columns(data_dir, table, int(ss[lo]), part,
                                        codec="lz4", chooser=chooser))
            built[-1].info.digest = digests.get(int(ss[lo]), "")
    lock.check()
    for b in built:   # why: a symlinked segments/<table>/<symbol> must not receive our files
        inside(data_dir, b.info.path, what="segment")
    # why all at once: one directory fsync per directory after all renames (see there)
    return commit_segments(data_dir, built, sync=sync), scratch


def register_seal(catalog, lock, chooser, infos: list, through: int) -> None:
    """Register segments ``infos`` and advance ``sealed_through`` to ``through`` in one catalog
    transaction, with ``chooser``'s state; returns None. Raises StoreError if ``lock`` is no
    longer held, WriteError if the catalog cannot be written."""
    lock.check()
    # why one transaction: segments registered without their sealed_through (or the other
    # way round) would be sealed again by the next seal: every row stored twice
    catalog.register_seal(infos, through, meta={"encoding_choices": json.dumps(chooser.state())})


def trim_wal(wal, ranges: dict, limit: int, lock) -> None:
    """Delete the WAL files whose every seq is at or below ``limit`` (sealed and checkpointed).

    ``ranges`` ({path: (first seq, last seq)}) is updated with the files ``wal`` (a WalWriter)
    closed since, and loses the files deleted. Returns None; raises StoreError if a file is to
    be deleted and ``lock`` is no longer held, OSError if the directory cannot be synced.
    """
    while wal.closed_files:   # why pop: the WAL writer thread may append meanwhile
        path, lo, hi = wal.closed_files.pop(0)
        ranges[path] = (lo, hi)
    if any(hi <= limit for lo, hi in ranges.values()):
        lock.check()
    removed = False
    for path, (lo, hi) in list(ranges.items()):
        if hi <= limit:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            del ranges[path]
            removed = True
    if removed:
        fsync_dir(wal.wal_dir)
