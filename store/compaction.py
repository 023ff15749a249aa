"""Compaction: merge runs of small adjacent segments of one table and symbol into zstd segments.

Invariants:
- Only segments adjacent in seq order within one (table, symbol) are merged, so a merged
  segment holds exactly the rows of its inputs, in the same order.
- The merged file is durable before the catalog swaps it in for its inputs, in one transaction;
  the inputs' files are deleted only after that commit. A reader sees the inputs or the merge,
  never both and never neither (a reader that finds an input gone retries on a fresh snapshot).
- A merged segment holds at most ``target_rows`` rows (262,144 by default).
- A merged fills, l2 or events segment carries the digest of its rows (store/digest.py), also
  when an input had none (sealed before digests existed).

Locking and hostile directories:
- Compaction writes, so it runs under the directory's writer lock (store/lock.py):
  ``compact(path)`` takes it before opening the catalog and releases it when done (a directory
  open for writing elsewhere, or by a Session of this process, is refused with LockedError:
  compact that Session instead); ``compact(session)`` checks that the Session still holds it.
  Two compactions of one directory therefore never run at once.
- Inputs are read only through ``segment.read_registered`` and deleted only through
  ``paths.inside``: a catalog path that leaves the directory or passes a symlink is refused
  (CorruptionError) before anything is written, and nothing outside is ever read or deleted.
  The merged file's path is checked the same way before it is written.
- A missing input file, or a catalog that changed underneath, is a StoreError naming the
  file or segments, never a raw OSError; the merged file is then removed again.
"""

from __future__ import annotations

import os

import numpy as np

from exsim.exchange.errors import StoreError, WriteError
from exsim.store import codecs
from exsim.store.catalog import Catalog
from exsim.store.choice import Chooser
from exsim.store.digest import DIGEST_TABLES, digest_rows
from exsim.store.lock import DirLock
from exsim.store.paths import inside
from exsim.store.segment import commit_segments, encode_columns, read_registered
from exsim.store.tables import table_dtype

__all__ = ["compact", "plan", "TARGET_ROWS"]

TARGET_ROWS = 262_144


def plan(segments: list[dict], target_rows: int = TARGET_ROWS) -> list[list[dict]]:
    """Group one (table, symbol)'s segments (ordered by seq) into runs worth merging.

    Returns groups of >= 2 adjacent segments whose rows sum to <= target_rows; segments already
    at or above half the target are left alone (merging them buys little).
    """
    groups, cur, rows = [], [], 0
    for s in segments:
        small = s["rows"] < target_rows // 2
        if small and rows + s["rows"] <= target_rows:
            cur.append(s)
            rows += s["rows"]
            continue
        if len(cur) >= 2:
            groups.append(cur)
        cur, rows = ([s], s["rows"]) if small else ([], 0)
    if len(cur) >= 2:
        groups.append(cur)
    return groups


def compact(source, table: str | None = None, symbol: int | None = None,
            target_rows: int = TARGET_ROWS) -> list:
    """Merge small segments of ``source`` (data directory path or Session) into zstd segments.

    table/symbol restrict the work (None: all). A path is compacted under its writer lock,
    taken first and released at the end. Returns the new SegmentInfos. Raises LockedError (a
    StoreError) if the directory is open for writing (by another process, or by a Session of
    this process: pass that Session), CorruptionError if an input fails a check or its path
    leaves the directory (nothing changes then), WriteError if the merged file cannot be
    written, StoreError if an input file is missing, the catalog changed underneath or the
    Session no longer holds the lock.
    """
    own = isinstance(source, (str, os.PathLike))
    data_dir = os.fspath(source) if own else source.data_dir
    lock = None
    if own:
        if not os.path.isfile(os.path.join(data_dir, "catalog.sqlite")):
            raise StoreError(f"{data_dir} is not an exsim data directory (no catalog.sqlite)")
        lock = DirLock.acquire(data_dir, what="compact")
    else:
        source._lock.check()
        lock = source._lock
    catalog = None
    made = []
    try:
        catalog = Catalog(data_dir) if own else source.catalog
        chooser = source.chooser if not own else Chooser()
        segs = catalog.all_segments()
        keys = sorted({(s["table_name"], s["symbol"]) for s in segs})
        for tname, sym in keys:
            if (table is not None and tname != table) or (symbol is not None and sym != symbol):
                continue
            mine = sorted((s for s in segs if s["table_name"] == tname and s["symbol"] == sym),
                          key=lambda s: s["seq_lo"])
            for group in plan(mine, target_rows):
                made.append(_merge(data_dir, catalog, lock, chooser, tname, sym, group))
    finally:
        if own:
            if catalog is not None:
                catalog.close()
            lock.release()
    return made


def _read_input(data_dir: str, row: dict) -> dict:
    """The columns of input segment ``row``; raises StoreError if its file is gone or unreadable
    (CorruptionError, from read_registered, if it fails a check or its path is refused)."""
    try:
        return read_registered(data_dir, row)
    except OSError as e:
        raise StoreError(f"{data_dir}: cannot read segment {row['path']} (id {row['id']}) that the "
                         f"catalog registers: {e}; another compaction or writer changed the "
                         "directory, or the file was removed") from e


def _unlink_quietly(path: str) -> None:
    """Remove a file if it is there; a failure leaves an orphan, which the next open removes."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _merge(data_dir, catalog, lock, chooser, table, symbol, group):
    dtype = table_dtype(table)
    parts = [_read_input(data_dir, s) for s in group]
    rows = np.zeros(sum(s["rows"] for s in group), dtype)
    for c in dtype.names:
        col = np.concatenate([p[c] for p in parts])
        if col.size != rows.size:
            raise StoreError(f"{data_dir}: segments {[s['path'] for s in group]} hold {col.size} "
                             f"rows, the catalog says {rows.size}")
        rows[c] = col
    if np.any(np.diff(rows["seq"]) < 0):
        raise StoreError(f"{data_dir}: segments {[s['path'] for s in group]} overlap in seq")
    cols = {c: codecs.gather_u64([rows[c]], dtype.fields[c][0].kind == "i") for c in dtype.names}
    built = encode_columns(data_dir, table, symbol, cols, codec="zstd", chooser=chooser)
    out = inside(data_dir, built.info.path, what="segment")   # a symlinked segment dir is refused
    lock.check()
    info = commit_segments(data_dir, [built])[0]
    if table in DIGEST_TABLES:
        # why from the merged rows, not from the inputs' digests: xxh3 digests do not combine,
        # and the rows are at hand (the inputs were read under their checksums)
        info.digest = digest_rows(table, rows)
    try:
        lock.check()
        catalog.replace_segments([s["id"] for s in group], [info], tier=1)
    except (StoreError, WriteError):
        _unlink_quietly(out)
        raise
    for s in group:
        try:
            _unlink_quietly(inside(data_dir, s["path"], what="segment"))
        except StoreError:
            pass   # why: refused now (a symlink appeared): leave it; nothing outside is deleted
    return info
