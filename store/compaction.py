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
"""

from __future__ import annotations

import os

import numpy as np

from exchange.errors import StoreError
from store import codecs
from store.catalog import Catalog
from store.digest import DIGEST_TABLES, digest_rows
from store.segment import read_segment, write_segment
from store.tables import table_dtype

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

    table/symbol restrict the work (None: all). Returns the new SegmentInfos. Raises
    CorruptionError if an input fails a check (nothing changes then), WriteError if the merged
    file cannot be written, StoreError if the catalog changed underneath.
    """
    own = isinstance(source, (str, os.PathLike))
    data_dir = os.fspath(source) if own else source.data_dir
    catalog = Catalog(data_dir) if own else source.catalog
    chooser = source.chooser if not own else codecs.Chooser()
    made = []
    try:
        segs = catalog.all_segments()
        keys = sorted({(s["table_name"], s["symbol"]) for s in segs})
        for tname, sym in keys:
            if (table is not None and tname != table) or (symbol is not None and sym != symbol):
                continue
            mine = sorted((s for s in segs if s["table_name"] == tname and s["symbol"] == sym),
                          key=lambda s: s["seq_lo"])
            for group in plan(mine, target_rows):
                made.append(_merge(data_dir, catalog, chooser, tname, sym, group))
    finally:
        if own:
            catalog.close()
    return made


def _merge(data_dir, catalog, chooser, table, symbol, group):
    dtype = table_dtype(table)
    parts = [read_segment(os.path.join(data_dir, s["path"])) for s in group]
    rows = np.zeros(sum(s["rows"] for s in group), dtype)
    for c in dtype.names:
        rows[c] = np.concatenate([p[c] for p in parts])
    if np.any(np.diff(rows["seq"]) < 0):
        raise StoreError(f"{data_dir}: segments {[s['path'] for s in group]} overlap in seq")
    info = write_segment(data_dir, table, symbol, rows, codec="zstd", chooser=chooser)
    if table in DIGEST_TABLES:
        # why from the merged rows, not from the inputs' digests: xxh3 digests do not combine,
        # and the rows are at hand (the inputs were read under their checksums)
        info.digest = digest_rows(table, rows)
    try:
        catalog.replace_segments([s["id"] for s in group], [info], tier=1)
    except StoreError:
        os.unlink(os.path.join(data_dir, info.path))
        raise
    for s in group:
        try:
            os.unlink(os.path.join(data_dir, s["path"]))
        except FileNotFoundError:
            pass
    return info
