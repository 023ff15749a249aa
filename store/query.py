"""Read API: rows of one table from a data directory or a live session, as a structured array.

Invariants:
- A read sees every row up to the newest batch acknowledged before it began exactly once, with
  no gap: rows with seq <= ``sealed_through`` come from the segments live in one catalog
  snapshot, rows above it from the WAL (or the session's unsealed batches). Sealing and
  compaction change the catalog atomically and delete files only afterwards, so a data
  directory's WAL is scanned BEFORE the catalog snapshot is taken: a trim deletes only WAL
  files whose rows are all sealed, and commits nothing, so every record the scan misses is
  sealed by the time of the snapshot that follows, and the WAL it returns starts at or before
  that snapshot's ``sealed_through`` + 1 (a snapshot first and a scan second can miss a seal
  plus trim in between: rows neither in the snapshot's segments nor in the WAL any more). The
  WAL is still checked to start there. A read whose seq range ends at or below
  ``sealed_through`` needs no WAL. A reader that finds a listed file gone retries on a fresh
  scan and snapshot; the same file missing from every fresh snapshot was deleted under the
  store (CorruptionError naming it), other repeated misses raise StoreError naming the last.
- A ``Reader`` keeps the snapshot between calls only while the catalog's ``data_version`` is
  unchanged (no commit by anyone), so it reads exactly what a fresh reader would.
- Files are reached only through ``store.paths`` checks: a symlinked ``wal/`` or segment path
  is refused (CorruptionError), never followed.
- Only segments whose seq/ts ranges overlap the request are opened; inside them only the
  blocks whose zone map overlaps it, and of those only the requested columns (plus seq/ts in
  the blocks a range only partly covers, to cut rows: store/segment.py) are decoded.
- Rows come in seq order; the rows of one seq that belong to several symbols (expiries one
  symbol's message triggers in others) come grouped by symbol id, ascending, each symbol's rows
  in the engine's order, whether they are sealed or still in the WAL. Why this order: sealed
  rows live in per-symbol segments, so the engine's interleaving across symbols is not kept
  once sealed; WAL rows are put in the same order (``_by_symbol``) so a read gives the same
  rows before and after a seal. Within one symbol's segments and the WAL rows already are in
  seq order, so a seq range is cut with a binary search and each decoded column is copied
  once, straight into its place in the result; only a read of several symbols at once sorts
  (a stable merge by seq).

``read`` returns packed rows (the stored dtype, padding zeroed); ``read_columns`` returns the same
rows as one contiguous array per column, for callers that work column by column (comparing,
computing) and need not pay for assembling rows. ``read_checkpoint`` returns a stored checkpoint's
bytes after checking them.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np

from exsim.exchange.errors import CorruptionError, StoreError, UsageError
from exsim.store.catalog import Catalog
from exsim.store.checkpoint_file import read_checkpoint_file
from exsim.store.paths import inside
from exsim.store.catalog import resolve_symbol
from exsim.store.scratch import borrowed
from exsim.store.segment import open_registered, read_registered
from exsim.store.tables import Columns, orders_with_seq, table_dtype
from exsim.store.wal import scan_wal
from exsim.store.wal.format import SEQ_LIMIT, lacks

__all__ = ["Reader", "read", "read_columns", "iter_columns", "read_checkpoint",
           "journaled_through"]

_RETRIES = 5


def _missing(data_dir, table, names: list) -> CorruptionError | None:
    """A CorruptionError naming the listed file that was gone on every one of ``_RETRIES``
    fresh snapshots (``names``: the file each try missed), else None. Why this is corruption:
    a compaction or WAL trim retires a file once and commits a catalog without it, so a file
    that every fresh catalog still lists but that never exists was deleted under the store."""
    if len(names) == _RETRIES and names[0] and len(set(names)) == 1:
        return CorruptionError(f"{data_dir}: {names[0]} is missing: the catalog lists it for "
                               f"{table}, but the file is gone (deleted?)", names[0])
    return None


def _check_range(name, r):
    if r is None:
        return None
    try:
        lo, hi = int(r[0]), int(r[1])
    except (TypeError, ValueError, IndexError):
        raise UsageError(f"{name} must be an inclusive (lo, hi) pair, got {r!r}") from None
    return lo, hi


def _wal_rows(records, table, after_seq, by_symbol: bool):
    """[(rows of ``table``, the fields their file lacks)] of the records above ``after_seq``;
    with ``by_symbol`` the rows of each seq grouped by symbol (``_by_symbol``)."""
    out = []
    for rec in records:
        if rec.last_seq <= after_seq:
            continue
        rows = orders_with_seq(rec.orders, rec.first_seq) if table == "orders" else getattr(rec, table)
        out.append((_by_symbol(rows) if by_symbol else rows, lacks(rec.version, table)))
    return out


def _by_symbol(rows: np.ndarray) -> np.ndarray:
    """``rows`` (seq ascending) with the rows of each seq grouped by symbol id ascending, each
    symbol's rows in their order: the order sealed rows are read in (the module docstring).
    The array itself when it already is (no copy: the common case)."""
    seq, sym = rows["seq"], rows["symbol"]
    if seq.size < 2 or not ((seq[1:] == seq[:-1]) & (sym[1:] < sym[:-1])).any():
        return rows
    order = np.argsort(sym, kind="stable")
    return rows[order[np.argsort(seq[order], kind="stable")]]


def _columns_wanted(table, columns):
    dtype = table_dtype(table)
    if columns is not None:
        unknown = set(columns) - set(dtype.names)
        if unknown:
            raise UsageError(f"table {table!r} has no column(s) {sorted(unknown)}")
    cols = list(dtype.names) if columns is None else [c for c in dtype.names if c in set(columns)]
    return dtype, cols


def _select(seqs: np.ndarray, ts_col, seq, ts, sym_col, sym):
    """Rows of one part to keep: a slice when they are contiguous, else an index array."""
    a, b = 0, seqs.size
    if seq is not None:
        # why a binary search: a part's seqs ascend, so a seq range is one contiguous run
        a = int(np.searchsorted(seqs, seq[0], "left"))
        b = int(np.searchsorted(seqs, seq[1], "right"))
    mask = None
    if sym_col is not None and sym is not None:
        mask = sym_col[a:b] == sym
    if ts is not None:
        t = ts_col[a:b]
        m = (t >= ts[0]) & (t <= ts[1])
        mask = m if mask is None else mask & m
    if mask is None or mask.all():
        return slice(a, b), b - a
    idx = np.flatnonzero(mask) + a
    return idx, idx.size


class Reader:
    """Reads one data directory call after call, keeping what stays valid between calls.

    Kept: the catalog connection (opened read-only), the snapshot of each table's live
    segments and ``sealed_through``, the symbols, and open segment files with their checked
    indexes and zone maps (at most ``MAX_OPEN`` files, least recently used closed first).
    The snapshot and symbols are taken again whenever the catalog's ``data_version`` shows
    another connection committed (a seal, a compaction, a checkpoint), checked before every
    call; an open file stays valid (segments are immutable and an open descriptor survives its
    deletion), so only files the new snapshot lists and the old one did not are opened.
    The WAL is scanned on every call whose seq range reaches above ``sealed_through`` (ts-only
    and unbounded reads included), before the snapshot is taken again: the read is then
    exactly what a fresh ``read`` would return (the module docstring says why the order).

    A Reader is pinned to the directory it opened: the data directory's and the catalog's
    (device, inode) are taken when it opens and checked before every call and after every
    scan of the WAL or segment files (which are opened by path). Why: the catalog connection
    stays on the file it opened, so a directory renamed over by another run would otherwise
    pair the old catalog with the new run's WAL and segments (rows of two runs mixed, seqs
    twice). A call after such a replacement raises StoreError saying so.

    Use ``read``/``read_columns``/``iter_columns`` of this module with the Reader as the
    source, or its methods of the same names; close it when done (or use ``with``). Not to be
    shared between threads. Raises on creation as ``Catalog`` (StoreError if ``data_dir`` is
    not a data directory, CorruptionError if its catalog is damaged).
    """

    MAX_OPEN = 256

    def __init__(self, data_dir):
        self.data_dir = os.fspath(data_dir)
        try:
            before = _identity(self.data_dir)
        except StoreError:
            before = None   # Catalog names what is wrong
        self.catalog = Catalog(self.data_dir, readonly=True)
        try:
            self._pin = _identity(self.data_dir)
            if before is not None:
                # why both sides of the open: a replacement in between would pin the new
                # directory to the old catalog
                self._check_pinned(before)
        except StoreError:
            self.catalog.close()
            raise
        self._wal_dir = None
        self._version = None        # catalog data_version the cached state below belongs to
        self._snaps: dict = {}      # table -> (sealed_through, segment rows)
        self._symbols = None        # {name: id}
        self._files: OrderedDict = OrderedDict()   # catalog row (as a tuple) -> SegmentFile
        # callers' state derived from the catalog (run bounds, checkpoint lists), emptied
        # whenever the catalog changes
        self.cache: dict = {}

    def close(self) -> None:
        """Close the catalog and every open segment file; returns None."""
        for f in self._files.values():
            f.close()
        self._files.clear()
        self.catalog.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, table: str, symbol=None, seq=None, ts=None, columns=None, as_pandas=False):
        """``store.read`` of this data directory (same arguments, result and errors)."""
        return read(self, table, symbol, seq, ts, columns, as_pandas)

    def read_columns(self, table: str, symbol=None, seq=None, ts=None, columns=None) -> dict:
        """``store.read_columns`` of this data directory (same arguments, result and errors)."""
        return read_columns(self, table, symbol, seq, ts, columns)

    def iter_columns(self, table: str, symbol=None, seq=None, ts=None, columns=None):
        """``store.iter_columns`` of this data directory (same arguments, result and errors)."""
        return iter_columns(self, table, symbol, seq, ts, columns)

    def version(self) -> int:
        """The catalog's current ``data_version`` after bringing the cached snapshot up to it
        (a caller may key its own caches by it). Raises as ``Catalog.data_version``."""
        self._fresh()
        return self._version

    def snapshot(self, table: str) -> tuple[int, list]:
        """(sealed_through, live segment rows of ``table`` ordered by symbol, seq) as of now:
        ``Catalog.snapshot`` of the whole table, cached until the catalog changes. The rows are
        shared: read-only by contract. Raises as ``Catalog.snapshot``."""
        self._fresh()
        return self._snapshot(table)

    def _snapshot(self, table: str) -> tuple[int, list]:
        """``snapshot`` as of the last ``_fresh``."""
        snap = self._snaps.get(table)
        if snap is None:
            snap = self._snaps[table] = self.catalog.snapshot(table)
        return snap

    def resolve_symbol(self, symbol) -> int:
        """The id of ``symbol`` (a name or an id; an id the catalog does not list is returned
        as it is: rows journaled for an id the engine rejected are stored under it). Raises
        UsageError for an unknown name, CorruptionError as ``Catalog.symbols``."""
        self._fresh()
        return self._resolve(symbol)

    def _resolve(self, symbol) -> int:
        """``resolve_symbol`` as of the last ``_fresh``."""
        if self._symbols is None:
            self._symbols = {r["name"]: int(r["id"]) for r in self.catalog.symbols()}
        return resolve_symbol(self._symbols, symbol, self.data_dir, unlisted_ids=True)

    def _check_pinned(self, now=None) -> None:
        """StoreError unless ``data_dir`` and its catalog are still the files this Reader
        opened (the class docstring says why)."""
        if now is None:
            now = _identity(self.data_dir)
        if now != self._pin:
            raise StoreError(f"{self.data_dir}: the data directory was replaced (or its catalog "
                             "was) since this Reader opened it; its catalog and the files now at "
                             "that path belong to different runs: open a new Reader")

    def _fresh(self) -> None:
        self._check_pinned()
        # why the version read before any snapshot it keys: a commit landing in between then
        # only makes the next call take the snapshot again, never keeps a stale one
        v = self.catalog.data_version()
        if v != self._version:
            self._version, self._snaps, self._symbols, self.cache = v, {}, None, {}

    def _forget(self) -> None:
        """Drop the cached snapshot (a listed file vanished: the catalog moved on)."""
        self._version, self._snaps, self._symbols, self.cache = None, {}, None, {}

    def last_row(self, table: str, symbol=None, seq=None, ts=None, columns=("seq", "ts")):
        """The row with the highest seq among those ``read`` would return for these arguments,
        as {column: numpy scalar}, or None if there is none.

        Cheap: rows above ``sealed_through`` are read first; then segments are searched newest
        first and, inside each, blocks newest first by their zone maps, decoding one block at a
        time (the highest block whose zone map overlaps the ranges holds a matching row when
        only one of seq/ts is given). Without ``ts`` and with ``seq`` not asked for, a block
        that starts inside the window and holds one value in every column asked for answers
        from its column headers, no decoding (``_constant_row``). Raises as ``read``.
        """
        _, cols = _columns_wanted(table, list(columns))
        cols = cols or ["seq"]
        seq, ts = _check_range("seq", seq), _check_range("ts", ts)
        sym = None if symbol is None else self.resolve_symbol(symbol)
        lo, hi = (-(1 << 63), SEQ_LIMIT) if seq is None else seq
        problem, gone = "", []
        for _ in range(_RETRIES):
            sealed, _ = self.snapshot(table)
            if hi > sealed:
                tail = read_columns(self, table, sym, (max(lo, sealed + 1), hi), ts, cols)
                if tail[cols[0]].size:
                    return {c: tail[c][-1] for c in cols}
            if lo > sealed:
                return None
            window = (lo, min(hi, sealed))
            want = list(dict.fromkeys(cols + ["seq"]))
            try:
                best = None
                _, rows = self._snapshot(table)
                segs = [r for r in rows if (sym is None or r["symbol"] == sym)
                        and r["seq_hi"] >= window[0] and r["seq_lo"] <= window[1]
                        and (ts is None or (r["ts_hi"] >= ts[0] and r["ts_lo"] <= ts[1]))]
                for r in sorted(segs, key=lambda r: -r["seq_hi"]):
                    if best is not None and r["seq_hi"] <= best["seq"]:
                        break   # why: no row of this or any older-ending segment can beat it
                    f = self._open(r)
                    for b in f.blocks(window, ts)[::-1]:
                        if ts is None and "seq" not in cols:
                            same = _constant_row(f, b, cols, window, segs, r)
                            if same is not None:
                                return same
                        got = f.read(want, window, ts, blocks=[b])
                        if got["seq"].size:
                            if best is None or got["seq"][-1] > best["seq"]:
                                best = {c: got[c][-1] for c in want}
                            break
                return None if best is None else {c: best[c] for c in cols}
            except FileNotFoundError as e:
                problem = f"{e.filename or 'a listed file'} vanished while reading {table}"
                gone.append(e.filename)
                self._forget()
        missing = _missing(self.data_dir, table, gone)
        if missing is not None:
            raise missing
        raise StoreError(f"{self.data_dir}: no consistent snapshot of {table} after {_RETRIES} "
                         f"tries: {problem}")

    def _open(self, row: dict):
        key = tuple(sorted(row.items()))   # why the whole row: ids can be reused
        f = self._files.get(key)
        if f is not None:
            self._files.move_to_end(key)
            return f
        f = open_registered(self.data_dir, row)
        try:
            self._check_pinned()   # why: segment files are opened by path
        except StoreError:
            f.close()
            raise
        self._files[key] = f
        if len(self._files) > self.MAX_OPEN:
            self._files.popitem(last=False)[1].close()
        return f

    def _view(self, table, sym, seq, ts):
        """(sealed, segments overlapping the request, WAL records above sealed), consistent:
        the WAL (when the request reaches above sealed_through) is scanned before the snapshot
        is brought up to date (the caller brought it up to date before). Raises
        FileNotFoundError for a WAL file trimmed mid-scan; when the WAL misses rows no seal
        accounts for, the records returned start above sealed + 1 (the caller retries)."""
        sealed, _ = self._snapshot(table)   # the caller brought it up to date
        records = []
        if seq is None or seq[1] > sealed:
            if self._wal_dir is None:
                self._wal_dir = inside(self.data_dir, "wal", what="WAL directory")
            records, _ = scan_wal(self._wal_dir, after_seq=sealed)
            self._check_pinned()   # why: the scan went by path
            sealed, _ = self.snapshot(table)
            records = [r for r in records if r.last_seq > sealed]
            if records and records[0].first_seq > sealed + 1:
                return sealed, [], records
        _, rows = self._snapshot(table)
        segs = [r for r in rows
                if (sym is None or r["symbol"] == sym)
                and (seq is None or (r["seq_hi"] >= seq[0] and r["seq_lo"] <= seq[1]))
                and (ts is None or (r["ts_hi"] >= ts[0] and r["ts_lo"] <= ts[1]))]
        return sealed, segs, records

    def _parts(self, table, symbol, seq, ts, need, scratch=None):
        """The segment and WAL parts of a request (see ``_parts``). Retries on a fresh
        snapshot when a listed file vanished (compaction or a WAL trim retired it). Raises
        StoreError naming the vanished file after ``_RETRIES`` tries (CorruptionError naming it
        when every try missed the same listed file: deleted), CorruptionError if the
        WAL misses rows no seal accounts for."""
        self._fresh()
        sym = None if symbol is None else self._resolve(symbol)
        problem, gap, gone = "", None, []
        for _ in range(_RETRIES):
            try:
                sealed, segs, records = self._view(table, sym, seq, ts)
                if records and records[0].first_seq > sealed + 1:
                    gap = records[0]
                    problem = (f"the WAL starts at seq {gap.first_seq} ({gap.path}, offset "
                               f"{gap.offset}), but seqs {sealed + 1}..{gap.first_seq - 1} are "
                               "neither sealed nor in it")
                    self._forget()
                    self._fresh()
                    continue
                decoded = [self._open(s).read(need, seq, ts, scratch=scratch) for s in segs]
            except FileNotFoundError as e:
                problem, gap = f"{e.filename or 'a listed file'} vanished while reading {table}", None
                gone.append(e.filename)
                self._forget()
                self._fresh()
                continue
            return _assemble(table, sym, seq, ts, sealed, segs, decoded, records)
        if gap is not None:
            raise CorruptionError(f"{self.data_dir}: {problem}", gap.path, gap.offset)
        missing = _missing(self.data_dir, table, gone)
        if missing is not None:
            raise missing
        raise StoreError(f"{self.data_dir}: no consistent snapshot of {table} after {_RETRIES} "
                         f"tries: {problem}")


def _identity(data_dir: str) -> tuple:
    """(device, inode) of ``data_dir`` and of its catalog: what a Reader pins. Raises StoreError
    when either is gone."""
    try:
        d = os.stat(data_dir)
        c = os.stat(os.path.join(data_dir, "catalog.sqlite"))
    except OSError as e:
        raise StoreError(f"{data_dir}: the data directory or its catalog is gone or unreadable "
                         f"({e})") from e
    return d.st_dev, d.st_ino, c.st_dev, c.st_ino


def _assemble(table, sym, seq, ts, sealed, segs, decoded, records):
    """([(columns, selection, rows, columns the source lacks)], merge?) from decoded segment
    windows and WAL records."""
    parts = []
    for cols in decoded:
        n = next(iter(cols.values())).size
        parts.append((cols, slice(0, n), n, getattr(cols, "lacking", ())))
    for rows, lacking in _wal_rows(records, table, sealed, sym is None):
        sel, n = _select(rows["seq"], rows["ts"], seq, ts, rows["symbol"], sym)
        parts.append((rows, sel, n, lacking))
    # why: segments come ordered by symbol, then seq; WAL rows all follow the sealed ones, so
    # only segments of several symbols need a merge back into seq order
    merge = sym is None and len({s["symbol"] for s in segs}) > 1
    return [p for p in parts if p[2]], merge


def _parts(source, table, symbol, seq, ts, need, scratch=None):
    """Decode the overlapping windows of segments and WAL batches of ``source`` (a Reader, a
    data directory or a live Session): ([(columns, selection, rows)], merge?); the segments'
    columns in ``scratch``'s memory when given (``store.scratch``)."""
    if isinstance(source, Reader):
        return source._parts(table, symbol, seq, ts, need, scratch)
    if isinstance(source, (str, os.PathLike)):
        with Reader(source) as reader:
            return reader._parts(table, symbol, seq, ts, need, scratch)
    data_dir, catalog = source.data_dir, source.catalog
    sym = None if symbol is None else catalog.resolve_symbol(symbol, unlisted_ids=True)
    gone = []
    for attempt in range(_RETRIES):
        sealed, segs = catalog.snapshot(table, sym, seq, ts)
        try:
            decoded = [read_registered(data_dir, s, need, seq, ts, scratch) for s in segs]
            break
        except FileNotFoundError as e:
            # why: a compaction retired a segment after our snapshot
            gone.append(e.filename)
            if attempt == _RETRIES - 1:
                missing = _missing(data_dir, table, gone)
                if missing is not None:
                    raise missing from None
                raise StoreError(f"{data_dir}: {e.filename or 'a listed segment'} "
                                 f"vanished while reading {table}, {_RETRIES} times") from None
    return _assemble(table, sym, seq, ts, sealed, segs, decoded, source.unsealed_records())


def _need(cols, symbol) -> list:
    """The columns to decode from segments for ``cols``: seq too when rows of several symbols
    may need merging by it (or no column is asked for: it counts the rows). Segments filter by
    seq and ts themselves, decoding those only where a window cuts a block."""
    return cols if cols and symbol is not None else list(dict.fromkeys(cols + ["seq"]))


def _constant_row(f, b: int, cols, window, segs, row):
    """{column: value} of the last row in seq ``window`` when block ``b`` of segment file
    ``f`` (catalog ``row``) holds it and every column asked for is constant in that block,
    else None. Why it may skip decoding seq: the block's first row (its zone map's first seq)
    lies in the window, no later block overlaps it (the caller walks blocks newest first) and
    no other listed segment reaches that seq, so the last row in the window is in this block,
    and every row of the block holds the same values (a symbol's phase through a continuous
    session: ``book_at`` then reads one block header instead of decoding a block of seqs)."""
    first = f.first_seq(b)
    if first < window[0] or any(o is not row and o["seq_hi"] >= first for o in segs):
        return None
    same = {}
    for c in cols:
        v = f.constant(c, b)
        if v is None:
            return None
        same[c] = v
    return same


# rows per step of ``_fill``: 8,192 rows of the widest table (orders, 96 bytes) are 768 KiB,
# inside L2 while every column is written into them
_FILL_ROWS = 8192


def _fill(parts, cols, dest) -> None:
    """Copy each part's kept rows of ``cols`` into ``dest[c]`` (1-D, possibly strided views).

    Why a block of rows at a time: every column of a block is written while the block's rows
    are in cache; a whole-part pass per column streams the rows through memory once per
    column (measured: the four tables' rows assembled 1.3-2.1x faster, orders the most)."""
    pos = 0
    outs = [dest[c] for c in cols]
    for src, sel, n, _ in parts:
        sliced = isinstance(sel, slice)
        # a slice is taken once as views (each block then copies its part); an index array
        # picks each block's rows from the whole column
        ins = [src[c][sel] if sliced else src[c] for c in cols]
        for s in range(0, n, _FILL_ROWS):
            e = min(n, s + _FILL_ROWS)
            take = slice(s, e) if sliced else sel[s:e]
            for d, v in zip(outs, ins):
                d[pos + s:pos + e] = v[take]
        pos += n


def _merge_order(parts) -> np.ndarray | None:
    seqs = np.concatenate([p[0]["seq"][p[1]] for p in parts]) if parts else np.zeros(0, np.int64)
    return np.argsort(seqs, kind="stable")


def iter_columns(source, table: str, symbol=None, seq=None, ts=None, columns=None):
    """Yield the rows ``read_columns`` would return as consecutive blocks, without copying.

    Each block is a ``store.tables.Columns`` {column name: 1-D array} for the next rows in seq
    order (one block per segment or WAL batch the request touches; empty blocks are skipped),
    its ``lacking`` the columns its file predates (read as 0). The arrays may be views
    of decoded buffers: read-only by contract. Cheapest for callers that consume rows block by
    block (a read of several symbols at once is merged first, so it comes as one block).
    Raises as ``read``, before the first block is yielded.
    """
    dtype, cols = _columns_wanted(table, columns)
    seq, ts = _check_range("seq", seq), _check_range("ts", ts)
    need = _need(cols, symbol)
    parts, merge = _parts(source, table, symbol, seq, ts, need)
    if merge:
        return iter([_merged(parts, cols, dtype)] if parts else [])
    return (Columns({c: src[c][sel] for c in cols}, [c for c in cols if c in lacking])
            for src, sel, _, lacking in parts)


def _merged(parts, cols, dtype) -> Columns:
    """The parts merged into one block in seq order; it lacks a column if any part does."""
    n = sum(p[2] for p in parts)
    out = {c: np.empty(n, dtype.fields[c][0]) for c in cols}
    _fill(parts, cols, out)
    order = _merge_order(parts)
    lacking = {c for p in parts for c in p[3]}
    return Columns({c: a[order] for c, a in out.items()}, [c for c in cols if c in lacking])


def read_columns(source, table: str, symbol=None, seq=None, ts=None, columns=None) -> dict:
    """Return the rows ``read`` would return as {column name: contiguous 1-D array}.

    Same arguments, order, filtering and errors as ``read``; the arrays have the stored column
    dtypes and one element per row. Cheaper than ``read`` when the caller works column by column:
    no rows are assembled. Raises UsageError for an unknown table, column or symbol or a malformed
    range, StoreError if the directory is not a data directory, CorruptionError if a file fails a
    check.
    """
    dtype, cols = _columns_wanted(table, columns)
    seq, ts = _check_range("seq", seq), _check_range("ts", ts)
    need = _need(cols, symbol)
    parts, merge = _parts(source, table, symbol, seq, ts, need)
    n = sum(p[2] for p in parts)
    if len(parts) == 1 and not merge and isinstance(parts[0][1], slice) \
            and isinstance(parts[0][0], dict):
        src, sel, _, _ = parts[0]   # one segment: its decoded columns are returned as they are
        return {c: np.ascontiguousarray(src[c][sel]) for c in cols}
    if merge:
        return _merged(parts, cols, dtype)
    out = {c: np.empty(n, dtype.fields[c][0]) for c in cols}
    _fill(parts, cols, out)
    return out


def read(source, table: str, symbol=None, seq=None, ts=None, columns=None, as_pandas=False,
         reuse=None):
    """Return the rows of ``table`` as a numpy structured array ordered by seq, or with
    ``as_pandas=True`` as a pandas DataFrame of the same rows: enum codes as names (Side, Kind,
    Event, Reason ...) and ``symbol`` as the catalog's symbol names (``exchange.frames``).

    source: a data directory path or a live ``Session``. symbol: id, name or None (all).
    seq, ts: ``(lo, hi)`` with both ends INCLUSIVE, or None; both may be given (intersection).
    columns: field names to return (in table order), or None for all; the dtype is the stored
    dtype restricted to those fields. Rows not yet sealed (still in the WAL) are included.
    Padding bytes between fields are zero, so equal rows are equal byte for byte.
    reuse: an array an earlier ``read`` of the same table and columns returned, whose rows the
    caller no longer needs. When it has room, the rows are written over its memory and its
    leading slice is returned (a fresh array costs a page fault per 4 KiB: a loop reading
    ranges one after another saves them); otherwise a fresh array, as without it.

    A range that holds no rows gives an empty array of that dtype.

    Raises UsageError for an unknown table, column or symbol or a malformed range, StoreError if
    the directory is not a data directory or a file the catalog lists stays missing (named)
    through every retry, CorruptionError if a file fails a check, a stored path is a symlink or
    leaves the directory, or unsealed rows are missing from the WAL; with ``as_pandas`` also
    UsageError naming the ``exsim[pandas]`` extra when pandas is missing (before reading);
    UsageError if ``reuse`` is given with ``as_pandas`` or is not a writable array of the
    rows' dtype.
    """
    if as_pandas and reuse is not None:
        raise UsageError("read: reuse applies to numpy rows, not to as_pandas=True")
    if as_pandas:
        from exsim.exchange.frames import require_pandas, to_frame

        require_pandas()
        if isinstance(source, (str, os.PathLike)):
            with Reader(source) as reader:
                return read(reader, table, symbol, seq, ts, columns, as_pandas=True)
        rows = read(source, table, symbol, seq, ts, columns)
        catalog = source.catalog
        return to_frame(rows, {int(r["id"]): str(r["name"]) for r in catalog.symbols()})
    dtype, cols = _columns_wanted(table, columns)
    seq, ts = _check_range("seq", seq), _check_range("ts", ts)
    out_dtype = dtype if columns is None else np.dtype([(c, dtype.fields[c][0]) for c in cols],
                                                       align=True)
    _check_reuse(reuse, out_dtype)
    # why borrowed memory for the decoded columns: every value is copied into the rows before
    # this returns (store/scratch.py: fresh arrays cost a page fault per 4 KiB)
    with borrowed() as scratch:
        parts, merge = _parts(source, table, symbol, seq, ts, _need(cols, symbol), scratch)
        n = sum(p[2] for p in parts)
        # zeros: padding bytes are defined (a reused array's padding was zeroed when read made it)
        out = reuse[:n] if reuse is not None and reuse.size >= n else np.zeros(n, out_dtype)
        if not merge or not parts:
            # why straight into the rows: strided copies per column and block of rows, no
            # concatenated temporaries (assembling 1M rows this way costs a third of
            # concatenate-then-scatter)
            _fill(parts, cols, {c: out[c] for c in cols})
            return out
        order = _merge_order(parts)
        for c in cols:
            out[c] = np.concatenate([p[0][c][p[1]] for p in parts])[order]
    return out


def _check_reuse(reuse, dtype: np.dtype) -> None:
    if reuse is None:
        return
    if not isinstance(reuse, np.ndarray) or reuse.dtype != dtype or reuse.ndim != 1 \
            or not reuse.flags.writeable or not reuse.flags.c_contiguous:
        what = f"an array of {reuse.dtype}" if isinstance(reuse, np.ndarray) else \
            type(reuse).__name__
        raise UsageError(f"read: reuse must be a writable 1-D contiguous array of the rows' "
                         f"dtype {dtype}; got {what}")


def journaled_through(data_dir) -> int:
    """Return the seq of the last message journaled in ``data_dir`` (sealed or only in the WAL;
    0 for an empty run), consistently beside a live writer.

    Why the retry: a WAL file trimmed while it is scanned was sealed before the trim, so a
    fresh look at ``sealed_through`` and the WAL sees its rows. Raises StoreError if the
    directory is not a data directory or files kept vanishing, CorruptionError if the catalog
    or the WAL fails a check.
    """
    data_dir = os.fspath(data_dir)
    wal_dir = inside(data_dir, "wal", what="WAL directory")
    cat = Catalog(data_dir, readonly=True)
    try:
        problem = ""
        for _ in range(_RETRIES):
            sealed = cat.sealed_through()
            try:
                # why after every seq: only the report's last seq is wanted, and records whose
                # frame carries their seq range (WAL version 4) are then checked, not decoded
                _, report = scan_wal(wal_dir, after_seq=SEQ_LIMIT)
            except FileNotFoundError as e:
                problem = f"{e.filename or 'a WAL file'} vanished"
                continue
            return max(sealed, report.last_seq)
    finally:
        cat.close()
    raise StoreError(f"{data_dir}: no consistent view of the WAL after {_RETRIES} tries: {problem}")


def read_checkpoint(data_dir, seq: int | None = None) -> tuple[int, bytes]:
    """Return ``(seq, blob)`` of the newest checkpoint at or before ``seq`` (None: the newest).

    ``blob`` is the engine state ``exchange.Engine.restore`` accepts, after the file's header and
    CRC32C were checked. Raises UsageError if no checkpoint is at or before ``seq``, StoreError
    if ``data_dir`` is not a data directory, CorruptionError if the file fails a check.
    """
    data_dir = os.fspath(data_dir)
    if not os.path.isfile(os.path.join(data_dir, "catalog.sqlite")):
        raise StoreError(f"{data_dir}: not a data directory (no catalog.sqlite)")
    cat = Catalog(data_dir, readonly=True)
    try:
        row = cat.latest_checkpoint(at_or_before=None if seq is None else int(seq))
    finally:
        cat.close()
    if row is None:
        where = "" if seq is None else f" at or before seq {int(seq)}"
        raise UsageError(f"{data_dir}: no checkpoint{where}")
    return int(row["seq"]), read_checkpoint_file(data_dir, row)
