"""Columnar segment files: one table, one symbol, rows ordered by seq, written once.

Layout (byte by byte in docs/formats.md, "Segment file"):

    header   "EXSG" | u16 version | u16 reserved
    blocks   per column, per row block of ``block_rows`` rows: stored bytes | u32 crc32c
    index    table, symbol, rows, seq/ts ranges, rows per block, the zone map (per row block:
             first/last seq, least/greatest ts), then per column: name, dtype, and per block:
             encoding, codec, offset, stored length, raw length, crc32c
    footer   u64 index offset | u32 index length | u32 crc32c(index) | u16 version |
             u16 reserved | "EXSGFOOT"            (28 bytes, fixed)

Version 4 is the layout above with every column of its table; version 3 is the same layout,
written before the order column ``phase`` and the event columns ``price`` and ``phase`` existed
(and, before the order fields of stops, icebergs, minimum quantities and GTD existed, without
those either); versions 1-2 (still read) hold one block per column and no zone map, read as
one block whose zone is the segment's own ranges.

Invariants:
- A segment is written to a temporary name, fsynced, renamed into place and its directory fsynced
  (``commit_segments`` does these steps for several segments at once, phase by phase);
  it is never modified afterwards (compaction writes new files and retires old ones).
- Every byte read back is under a checksum: blocks, index, footer magic and version. A failed
  check raises CorruptionError naming the file and byte offset; wrong data is never returned.
- A file is hostile until checked: every size in the index is checked against the file, the
  row count (at most ``max_rows`` of the file size) and the encoding's bound on a block's
  length (``codecs.max_block_len``) before anything is read, decompressed or allocated; zstd
  and lz4 never produce more than the declared raw length. No error but CorruptionError (or
  FileNotFoundError / OSError for the file itself) leaves the readers.
- ``read_registered``/``check_registered`` also compare a catalog row with the file's index.
- Readers fetch only the blocks of the columns they ask for, and of those only the row blocks
  whose zone map overlaps the requested seq/ts ranges. The zone map sits under the index
  checksum and must tile the segment (``read_index``); every seq or ts block a read decodes is
  checked against its zone map entry, so a zone map never silently drops or adds a row in the
  blocks read; a seq-windowed read also checks the seq column of the blocks just outside its
  window (once per open file), so an entry forged to open a gap between blocks cannot hide the
  rows in it either (``SegmentFile._check_neighbours``).
- A segment of version 1-3 written before a column of its table existed
  (``store.tables.ADDED_COLUMNS``: orders segments without stop_price, display_qty, min_qty,
  expire_ts or phase, events segments without price and phase) reads that column as zeros,
  whether asked for by name or with every column; any other missing column, and any missing
  column of a version-4 segment, is corrupt.
"""

from __future__ import annotations

import operator
import os
import struct
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import crc32c
import lz4.block
import numpy as np
import zstandard

from exsim.exchange.errors import CorruptionError, WriteError
from exsim.store import codecs
from exsim.store.choice import Chooser
from exsim.store.tables import ADDED_COLUMNS, TABLES, Columns, table_dtype
from exsim.store.wal import fsync_dir

__all__ = ["SegmentInfo", "BuiltSegment", "write_segment", "write_columns", "encode_columns",
           "commit_segments", "read_segment", "check_segment", "read_index", "CODEC_NAMES",
           "read_registered", "check_registered", "max_rows", "SegmentFile",
           "open_registered", "BLOCK_ROWS"]

MAGIC = b"EXSG"
FOOT_MAGIC = b"EXSGFOOT"
VERSION = 4                     # 4: every column of the table (phases: orders phase, events
#                                 price and phase), 3: columns stored as row blocks, a zone map
#                                 per block
READ_VERSIONS = (1, 2, 3, 4)    # a version 1 file is a version 2 file without shuffled streams;
#                                 a version 2 file is one block per column, no zone map
BLOCKED_VERSION = 3             # the first version with row blocks and zone maps
COMPLETE_VERSION = 4            # the first version that holds every column of its table
# rows per block written, by table (why these sizes: docs/formats.md, "Row blocks"): a windowed
# read decodes about one block more than it keeps, a whole-segment read pays per block
BLOCK_ROWS = {"orders": 32_768, "fills": 16_384, "l2": 16_384, "events": 32_768}
HEADER = struct.Struct("<4sHH")
FOOTER = struct.Struct("<QIIHH8s")
CRC = struct.Struct("<I")
INDEX_HEAD = struct.Struct("<IQqqqqH")     # symbol, rows, seq lo, seq hi, ts lo, ts hi, n columns
INDEX_COL = struct.Struct("<BBQIII")       # encoding, codec, offset, stored len, raw len, crc
ZONE_HEAD = struct.Struct("<I")            # rows per block (version 3)
# a block's zone map entry: first and last seq, least and greatest ts of its rows
ZONE_DTYPE = np.dtype([("seq_lo", "<i8"), ("seq_hi", "<i8"), ("ts_lo", "<i8"), ("ts_hi", "<i8")])
# INDEX_COL as a record, for a column's blocks parsed all at once
BLOCK_DTYPE = np.dtype([("enc", "u1"), ("codec", "u1"), ("off", "<u8"), ("stored", "<u4"),
                        ("raw", "<u4"), ("crc", "<u4")])
assert BLOCK_DTYPE.itemsize == INDEX_COL.size and ZONE_DTYPE.itemsize == 32
NONE, LZ4, ZSTD = 0, 1, 2
CODEC_NAMES = {NONE: "none", LZ4: "lz4", ZSTD: "zstd"}
ZSTD_LEVEL = 17          # merged tier: written once, read for years; see docs/formats.md
ZSTD_SEARCH_LEVEL = 9    # encodings are ranked at this (fast) level, the winner compressed at ZSTD_LEVEL
_zstd_local = threading.local()


def _zstd(level: int):
    """This thread's zstd compressor at ``level`` (why per thread: a ZstdCompressor must not be
    used by two threads at once: a session's seal thread and a compaction may both encode)."""
    cs = getattr(_zstd_local, "compressors", None)
    if cs is None:
        cs = _zstd_local.compressors = {}
    if level not in cs:
        cs[level] = zstandard.ZstdCompressor(level=level)
    return cs[level]


def _unzstd():
    """This thread's zstd decompressor (not shareable between threads either)."""
    d = getattr(_zstd_local, "decompressor", None)
    if d is None:
        d = _zstd_local.decompressor = zstandard.ZstdDecompressor()
    return d


@dataclass
class SegmentInfo:
    """What the catalog records about a segment file (path relative to the data directory)."""

    table: str
    symbol: int
    rows: int
    seq_lo: int
    seq_hi: int
    ts_lo: int
    ts_hi: int
    bytes: int
    codec: str
    encodings: dict
    path: str
    # digest of the segment's rows as the engine emitted them (packed dtype bytes, seq order),
    # set by whoever builds the segment from rows; "" when unknown (see store/digest.py)
    digest: str = ""


def _lz4(raw: bytes) -> bytes:
    return lz4.block.compress(raw, store_size=False)


def _zstd_search(raw: bytes) -> bytes:
    return _zstd(ZSTD_SEARCH_LEVEL).compress(raw)


def _zstd_final(raw: bytes) -> bytes:
    return _zstd(ZSTD_LEVEL).compress(raw)


_COMPRESSORS = {LZ4: _lz4, ZSTD: _zstd_search, NONE: None}   # what encodings are ranked by
_FINAL = {ZSTD: _zstd_final}                                   # ... and the codec, if another


def _decompress(codec: int, data: bytes, raw_len: int, path: str, offset: int) -> bytes:
    """The raw bytes of a stored block: never more than ``raw_len`` (the index's length, already
    checked against the row count) is allocated or produced. Raises CorruptionError naming the
    file and the block's offset."""
    try:
        if codec == NONE:
            out = data
        elif codec == LZ4:
            out = lz4.block.decompress(data, uncompressed_size=raw_len)
        elif codec == ZSTD:
            # why the frame's own size first: a frame that declares its content size is
            # decompressed into a buffer of that size whatever max_output_size says
            declared = zstandard.frame_content_size(data)
            if declared > raw_len:
                raise ValueError(f"frame declares {declared} bytes")
            out = _unzstd().decompress(data, max_output_size=raw_len)
        else:
            raise ValueError(f"unknown codec {codec}")
    except (ValueError, lz4.block.LZ4BlockError, zstandard.ZstdError) as e:
        raise CorruptionError(f"{path}: block at offset {offset} does not decompress ({e})",
                              path, offset) from None
    if len(out) != raw_len:
        raise CorruptionError(f"{path}: block at offset {offset} decompressed to {len(out)} bytes, "
                              f"index says {raw_len}", path, offset)
    return out


def _s(text: str) -> bytes:
    b = text.encode()
    return bytes([len(b)]) + b


def write_segment(data_dir: str, table: str, symbol: int, rows: np.ndarray, *,
                  codec: str = "lz4", chooser: Chooser | None = None,
                  block_rows: int = 0, version: int = VERSION) -> SegmentInfo:
    """Write ``rows`` (stored dtype of ``table``, one symbol, ordered by seq) as a new segment.

    The file lands at ``segments/<table>/<symbol>/<seq lo>-<seq hi>-<token>.seg`` under
    ``data_dir``, durably (temp file, fsync, rename, directory fsync). Returns its SegmentInfo.
    Raises WriteError if any write or fsync fails (the temporary file is removed).
    """
    dtype = table_dtype(table)
    if rows.size == 0:
        raise ValueError("a segment holds at least one row")
    cols = {c: codecs.gather_u64([rows[c]], dtype.fields[c][0].kind == "i") for c in dtype.names}
    return write_columns(data_dir, table, symbol, cols, codec=codec, chooser=chooser,
                         block_rows=block_rows, version=version)


def write_columns(data_dir: str, table: str, symbol: int, cols: dict, *, codec: str = "lz4",
                  chooser: Chooser | None = None, sync: bool = True,
                  block_rows: int = 0, version: int = VERSION) -> SegmentInfo:
    """``write_segment`` of rows given column by column: {name: uint64 bit patterns} (see
    ``codecs.gather_u64``), every column of ``table``, equal lengths, ordered by seq.
    ``sync=False`` skips the fsyncs (durability "none": the file survives a process crash, not
    a power loss; a lost file is then reported as corruption, never read as data).
    ``block_rows``: rows per block (0: the table's BLOCK_ROWS); ``version``: the segment format to write
    (VERSION; 2, without zone maps, and 3 only to make old files for tests)."""
    built = encode_columns(data_dir, table, symbol, cols, codec=codec, chooser=chooser,
                           block_rows=block_rows, version=version)
    return commit_segments(data_dir, [built], sync=sync)[0]


@dataclass
class BuiltSegment:
    """An encoded segment not yet on disk: its bytes (as parts) and what the catalog will say."""

    parts: list
    size: int
    info: SegmentInfo


def encode_columns(data_dir: str, table: str, symbol: int, cols: dict, *, codec: str = "lz4",
                   chooser: Chooser | None = None, block_rows: int = 0,
                   version: int = VERSION) -> BuiltSegment:
    """Encode a segment (arguments as ``write_columns``) without writing it; see
    ``commit_segments``. Raises ValueError for no rows, a ``block_rows`` outside 0..2^32-1
    or a ``version`` other than 2, 3 or 4."""
    dtype = table_dtype(table)
    n = cols["seq"].size
    if n == 0:
        raise ValueError("a segment holds at least one row")
    if block_rows < 0 or block_rows >= 1 << 32:
        raise ValueError(f"block_rows must be 0 (the default) or 1..2^32-1; got {block_rows}")
    if version not in (2, BLOCKED_VERSION, VERSION):
        raise ValueError(f"segment format version {version} cannot be written "
                         f"(2, {BLOCKED_VERSION} or {VERSION})")
    chooser = chooser or Chooser()
    c = {"lz4": LZ4, "zstd": ZSTD, "none": NONE}[codec]
    rel_dir = os.path.join("segments", table, str(symbol))
    seq, ts = cols["seq"].view(np.int64), cols["ts"].view(np.int64)
    seq_lo, seq_hi, ts_lo, ts_hi = int(seq[0]), int(seq[-1]), int(ts.min()), int(ts.max())
    name = f"{seq_lo:012d}-{seq_hi:012d}-{uuid.uuid4().hex[:8]}.seg"
    rel = os.path.join(rel_dir, name)
    built = _encode(table, symbol, cols, dtype, n, c, chooser, rel, (seq_lo, seq_hi, ts_lo, ts_hi),
                    block_rows=block_rows, version=version)
    if n > max_rows(built.size):
        # why: a reader refuses a file declaring more rows than max_rows of its size (an
        # allocation bound); rows this compressible get their seq column stored plain, 8 bytes
        # a row, which puts them far inside the bound
        built = _encode(table, symbol, cols, dtype, n, c, chooser, rel,
                        (seq_lo, seq_hi, ts_lo, ts_hi), plain="seq", block_rows=block_rows,
                        version=version)
    return built


def _zones(cols, n: int, block_rows: int) -> np.ndarray:
    """The zone map of rows given as columns: per block of ``block_rows`` rows (the last may
    hold fewer), its first and last seq and its least and greatest ts (ZONE_DTYPE)."""
    seq, ts = cols["seq"].view(np.int64), cols["ts"].view(np.int64)
    starts = np.arange(0, n, block_rows, dtype=np.int64)
    zones = np.empty(starts.size, ZONE_DTYPE)
    zones["seq_lo"] = seq[starts]
    zones["seq_hi"] = seq[np.minimum(starts + block_rows, n) - 1]
    zones["ts_lo"] = np.minimum.reduceat(ts, starts)
    zones["ts_hi"] = np.maximum.reduceat(ts, starts)
    return zones


def _encode(table, symbol, cols, dtype, n, c, chooser, rel, ranges, plain=None,
            block_rows: int = 0, version: int = VERSION) -> BuiltSegment:
    """The BuiltSegment of ``encode_columns``; column ``plain`` (if any) stored PLAIN, raw.
    Each column is stored as blocks of ``block_rows`` rows (0: the table's BLOCK_ROWS), column after
    column, each block encoded, compressed and checksummed on its own; ``version`` 2 writes
    the layout before zone maps (one block per column)."""
    seq_lo, seq_hi, ts_lo, ts_hi = ranges
    head = INDEX_HEAD.pack(symbol, n, seq_lo, seq_hi, ts_lo, ts_hi, len(dtype.names))
    if version >= BLOCKED_VERSION:
        block_rows = block_rows or BLOCK_ROWS[table]
        index = [_s(table), head, ZONE_HEAD.pack(block_rows), _zones(cols, n, block_rows).tobytes()]
    else:
        block_rows, index = n, [_s(table), head]
    parts = [HEADER.pack(MAGIC, version, 0)]
    pos = HEADER.size
    encodings = {}
    for col in dtype.names:
        dt = dtype.fields[col][0]
        index += [_s(col), _s(dt.str)]
        blocks = []    # why joined per column: writev takes at most IOV_MAX (1024) parts
        for a in range(0, n, block_rows):
            u = cols[col][a:a + block_rows]
            if col == plain:
                enc, raw = codecs.PLAIN, codecs.encode_u64(u, dt, codecs.PLAIN)
                stored = raw
            else:
                enc, raw, stored = chooser.encode_u64((table, col, c), u, dt, _COMPRESSORS[c])
                if c in _FINAL:
                    stored = _FINAL[c](raw)
            # why: a block the compressor cannot shrink is stored raw; decoding it is then free
            # (copied: the raw block may be a view of the encoder's reused buffer)
            raw_len = len(raw)
            used, stored = (c, stored) if len(stored) < raw_len else (NONE, bytes(raw))
            crc = crc32c.crc32c(stored)
            blocks += [stored, CRC.pack(crc)]
            index.append(INDEX_COL.pack(enc, used, pos, len(stored), raw_len, crc))
            encodings.setdefault(col, codecs.ENCODING_NAMES[enc])   # the first block's
            pos += len(stored) + CRC.size
        parts.append(b"".join(blocks))
    idx = b"".join(index)
    parts += [idx, FOOTER.pack(pos, len(idx), crc32c.crc32c(idx), version, 0, FOOT_MAGIC)]
    size = sum(len(p) for p in parts)
    return BuiltSegment(parts, size, SegmentInfo(table, symbol, n, seq_lo, seq_hi, ts_lo, ts_hi,
                                                 size, CODEC_NAMES[c], encodings, rel))


_fsync_pool = None
_fsync_pool_lock = threading.Lock()


def _forget_fsync_pool() -> None:
    # why: a forked child (the crash tests fork sessions) inherits the executor but not its
    # threads; work submitted to it would wait forever
    global _fsync_pool, _fsync_pool_lock
    _fsync_pool, _fsync_pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_fsync_pool)


def _all(fsync, targets: list) -> None:
    """Call ``fsync`` on every target, concurrently when there are several (raises the first
    OSError). Why: fsyncs issued together share the file system's journal commits: a seal's
    4 files + 4 directories took half the time in parallel (measured on this ext4 volume)."""
    global _fsync_pool
    if len(targets) < 2:
        for t in targets:
            fsync(t)
        return
    with _fsync_pool_lock:
        if _fsync_pool is None:
            _fsync_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="exsim-fsync")
    futures = [_fsync_pool.submit(fsync, t) for t in targets]
    wait(futures)   # why all before raising: the caller closes the descriptors on failure
    for f in futures:
        f.result()


def commit_segments(data_dir: str, built: list, *, sync: bool = True) -> list:
    """Write encoded segments durably: every file to its temporary name, then (``sync``) all
    fsynced (concurrently), then all renamed into place, then each distinct directory fsynced
    once (concurrently).

    Why in phases: one directory fsync after all renames commits them together, where a
    rename + directory fsync per file paid a journal commit each. Returns their SegmentInfos.
    Raises WriteError naming the file if any step fails (the files of this call are removed).
    """
    tmps, done = [], []
    try:
        for b in built:
            full_dir = os.path.join(data_dir, os.path.dirname(b.info.path))
            tmp = os.path.join(full_dir, "." + os.path.basename(b.info.path) + ".tmp")
            os.makedirs(full_dir, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            tmps.append((tmp, fd, b))
            written = os.writev(fd, b.parts)
            if written != b.size:   # a short writev: finish with plain writes
                view = memoryview(b"".join(b.parts))[written:]
                while view:
                    view = view[os.write(fd, view):]
        if sync:
            _all(os.fsync, [fd for _, fd, _ in tmps])
        for tmp, fd, b in tmps:
            os.rename(tmp, os.path.join(data_dir, b.info.path))
            done.append(id(b))
        if sync:
            _all(fsync_dir, [os.path.join(data_dir, d)
                             for d in dict.fromkeys(os.path.dirname(b.info.path) for b in built)])
    except OSError as e:
        for tmp, fd, b in tmps:
            try:
                os.unlink(os.path.join(data_dir, b.info.path) if id(b) in done else tmp)
            except OSError:
                pass
        where = getattr(e, "filename", None) or (tmps[-1][0] if tmps else data_dir)
        raise WriteError(f"cannot write segment {where}: {e}") from e
    finally:
        for _, fd, _ in tmps:
            try:
                os.close(fd)
            except OSError:
                pass
    return [b.info for b in built]


# A segment holds at most max(ROWS_FLOOR, ROWS_PER_BYTE x its file size) rows. Why a bound at
# all: a reader allocates rows x itemsize per decoded column, and a constant column encodes in 18
# bytes whatever its length, so without it a 714-byte file could make a reader allocate
# gigabytes. Real segments hold well under one row per byte (0.07-0.24 on the test fixtures'
# flows, lz4 or zstd); the floor lets a seal of a million constant rows through; a writer
# whose rows would exceed the bound stores the seq column plain (8 bytes a row, see
# encode_columns), so it never writes a file a reader refuses. Decoded, a file of b bytes thus
# takes at most max(2^20, 16 b) rows x the table's field bytes (86 at most: orders with seq).
ROWS_FLOOR = 1 << 20
ROWS_PER_BYTE = 16
# column dtypes a segment may hold: the integer types the codecs decode, little-endian
_DTYPES = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8"}


def max_rows(file_size: int) -> int:
    """The most rows a segment file of ``file_size`` bytes may declare (see ROWS_FLOOR)."""
    return max(ROWS_FLOOR, ROWS_PER_BYTE * file_size)


def read_index(f, path: str) -> dict:
    """Parse and check the footer, zone map and column index of an open segment file.

    Returns {"table", "symbol", "rows", "seq", "ts", "version", "block_rows", "zones",
    "columns": {name: (dtype, blocks)}, "index_offset"}: ``zones`` is the ZONE_DTYPE array of
    the blocks (one block of every row, from the segment's ranges, before version 3),
    ``blocks`` the BLOCK_DTYPE array of a column's blocks, one per zone. Raises CorruptionError
    naming the file and offset: for a failed checksum, and for any field the file cannot hold:
    an index outside the file, a table the store does not know, rows of 0 or above
    ``max_rows`` of the file size, a seq or ts range whose low end is above its high end, a
    zone map that does not tile the segment's ranges (a block's range reversed, seqs going
    back from block to block, ends other than the segment's), a duplicate column, a dtype that
    is not a little-endian 1-8 byte integer, an unknown encoding or codec, a block outside the
    space between header and index, or a raw length no block of that encoding and row count
    can have. Nothing is allocated from a size the file has not been checked to hold.
    """
    return _index(f.fileno(), path)


def _pread(fd: int, n: int, off: int) -> bytes:
    return os.pread(fd, n, off)


def _index(fd: int, path: str) -> dict:
    size = os.fstat(fd).st_size
    if size < HEADER.size + FOOTER.size:
        raise CorruptionError(f"{path}: {size} bytes is too short for a segment", path, 0)
    idx_off, idx_len, idx_crc, version, _, magic = FOOTER.unpack(
        _pread(fd, FOOTER.size, size - FOOTER.size))
    if magic != FOOT_MAGIC:
        raise CorruptionError(f"{path}: bad footer magic at offset {size - FOOTER.size}",
                              path, size - FOOTER.size)
    if version not in READ_VERSIONS:
        raise CorruptionError(f"{path}: segment format version {version}; this code reads versions "
                              f"{', '.join(map(str, READ_VERSIONS))} (written by a newer exsim?)",
                              path, size - FOOTER.size + 16)
    if idx_off + idx_len != size - FOOTER.size or idx_off < HEADER.size:
        raise CorruptionError(f"{path}: index bounds in footer do not match the file size",
                              path, size - FOOTER.size)
    idx = _pread(fd, idx_len, idx_off)
    if len(idx) != idx_len or crc32c.crc32c(idx) != idx_crc:
        raise CorruptionError(f"{path}: index checksum mismatch at offset {idx_off}", path, idx_off)
    magic, hversion, _ = HEADER.unpack(_pread(fd, HEADER.size, 0))
    if magic != MAGIC or hversion != version:
        raise CorruptionError(f"{path}: bad header at offset 0", path, 0)
    p = 0

    def bad(what: str):
        return CorruptionError(f"{path}: index at offset {idx_off + p}: {what}", path, idx_off + p)

    def s():
        nonlocal p
        n = idx[p]
        if p + 1 + n > len(idx):
            raise bad("a name runs past the index")
        out = idx[p + 1:p + 1 + n].decode()
        p += 1 + n
        return out

    try:
        table = s()
        if table not in TABLES:
            raise bad(f"unknown table {table!r}")
        sym, rows, slo, shi, tlo, thi, ncols = INDEX_HEAD.unpack_from(idx, p)
        if not 1 <= rows <= max_rows(size):
            raise bad(f"{rows} rows in a file of {size} bytes (at most {max_rows(size)})")
        if slo > shi or tlo > thi:
            raise bad(f"seq range {slo}..{shi} or ts range {tlo}..{thi} is reversed")
        p += INDEX_HEAD.size
        if version >= BLOCKED_VERSION:
            (block_rows,) = ZONE_HEAD.unpack_from(idx, p)
            if block_rows == 0:
                raise bad("0 rows per block")
            p += ZONE_HEAD.size
            nb = -(-rows // block_rows)
            if p + nb * ZONE_DTYPE.itemsize > len(idx):
                raise bad(f"{nb} zone map entries run past the index")
            zones = np.frombuffer(idx, ZONE_DTYPE, nb, p)
            _check_zones(zones, (slo, shi, tlo, thi), bad)
            p += nb * ZONE_DTYPE.itemsize
        else:
            block_rows, nb = rows, 1
            zones = np.array([(slo, shi, tlo, thi)], ZONE_DTYPE)
        # rows of each block: all block_rows but the last
        counts = np.full(nb, block_rows, np.int64)
        counts[-1] = rows - block_rows * (nb - 1)
        cols = {}
        for _ in range(ncols):
            name, dt = s(), s()
            if not name or name in cols:
                raise bad(f"empty or repeated column name {name!r}")
            if dt not in _DTYPES:
                raise bad(f"column {name!r} has dtype {dt!r}, not a little-endian integer type")
            dtype = np.dtype(dt)
            if p + nb * BLOCK_DTYPE.itemsize > len(idx):
                raise bad("the index ends early")
            blocks = np.frombuffer(idx, BLOCK_DTYPE, nb, p)
            k = _first_bad_block(blocks, counts, dtype.itemsize, idx_off)
            if k is not None:
                p += k * BLOCK_DTYPE.itemsize
                enc, codec, off, stored, raw, _ = (int(v) for v in blocks[k].tolist())
                if codec not in CODEC_NAMES or enc not in codecs.ENCODINGS:
                    raise bad(f"column {name!r} has encoding {enc}, codec {codec}")
                if off < HEADER.size or off + stored + CRC.size > idx_off:
                    raise bad(f"column {name!r} block at offset {off}, {stored} bytes, is outside "
                              f"the blocks (offsets {HEADER.size}..{idx_off})")
                raise bad(f"column {name!r} declares {raw} raw bytes ({stored} stored, codec "
                          f"{CODEC_NAMES[codec]}) for {int(counts[k])} rows in encoding "
                          f"{codecs.ENCODING_NAMES[enc]}")
            cols[name] = (dtype, blocks)
            p += nb * BLOCK_DTYPE.itemsize
        if p != len(idx):
            raise bad(f"{len(idx) - p} trailing bytes")
    except (IndexError, struct.error):
        raise bad("the index ends early") from None
    except UnicodeDecodeError:
        raise bad("a name is not UTF-8") from None
    return {"table": table, "symbol": sym, "rows": rows, "seq": (slo, shi), "ts": (tlo, thi),
            "version": version, "block_rows": block_rows, "zones": zones, "columns": cols,
            "index_offset": idx_off}


def _check_zones(zones: np.ndarray, ranges, bad) -> None:
    """Raise ``bad(...)`` unless the zone map tiles the segment: every block's seq and ts
    range in order, seqs never going back from one block to the next (rows of one message may
    straddle two blocks), the first and last seq and the ts extremes the segment's own."""
    slo, shi, tlo, thi = ranges
    sl, sh, tl, th = zones["seq_lo"], zones["seq_hi"], zones["ts_lo"], zones["ts_hi"]
    wrong = (sl > sh) | (tl > th)
    wrong[1:] |= sl[1:] < sh[:-1]
    if wrong.any():
        k = int(np.flatnonzero(wrong)[0])
        raise bad(f"zone map block {k}: seq {int(sl[k])}..{int(sh[k])}, ts {int(tl[k])}.."
                  f"{int(th[k])} is reversed or starts before the block before it ends")
    if int(sl[0]) != slo or int(sh[-1]) != shi or int(tl.min()) != tlo or int(th.max()) != thi:
        raise bad(f"zone map covers seq {int(sl[0])}..{int(sh[-1])}, ts {int(tl.min())}.."
                  f"{int(th.max())}; the segment is seq {slo}..{shi}, ts {tlo}..{thi}")


# per encoding: (fixed bytes, streams) of codecs.max_block_len; PLAIN is 1 + rows x itemsize
_ENC_FIXED = np.zeros(256, np.int64)
_ENC_STREAMS = np.zeros(256, np.int64)
_ENC_KNOWN = np.zeros(256, bool)
for _e in codecs.ENCODINGS:
    _ENC_KNOWN[_e] = True
    if _e != codecs.PLAIN:
        _ENC_FIXED[_e], _ENC_STREAMS[_e] = codecs._FIXED[_e]
_STREAM_HEAD_SIZE = codecs._STREAM_HEAD.size


def _first_bad_block(blocks: np.ndarray, counts: np.ndarray, itemsize: int,
                     idx_off: int) -> int | None:
    """The index of the first block entry a file cannot hold (see ``read_index``), or None:
    the checks of ``codecs.max_block_len`` and the codec bounds, on all entries at once."""
    enc, codec = blocks["enc"].astype(np.int64), blocks["codec"].astype(np.int64)
    off, stored = blocks["off"], blocks["stored"].astype(np.int64)
    raw = blocks["raw"].astype(np.int64)
    known = _ENC_KNOWN[enc] & (codec <= ZSTD)
    # why the offset compared before adding: a hostile u64 offset would wrap
    inside = (off >= HEADER.size) & (off <= idx_off)
    inside &= off.astype(np.int64, casting="unsafe") + stored + CRC.size <= idx_off
    bound = np.where(enc == codecs.PLAIN, 1 + counts * itemsize,
                     _ENC_FIXED[enc] + _ENC_STREAMS[enc] * (_STREAM_HEAD_SIZE + 8 * counts))
    # why 256: lz4 cannot expand a byte to more than ~255 (one length byte adds 255)
    sized = (raw >= 1) & (raw <= bound) & ~((codec == NONE) & (stored != raw)) \
        & ~((codec == LZ4) & (raw > 256 * stored + 64))
    ok = known & inside & sized
    if ok.all():
        return None
    return int(np.flatnonzero(~ok)[0])


def _checked_block(data, path: str, name: str, off: int, stored: int, crc: int):
    """The stored bytes of column ``name``'s block (``data``: those bytes and the copy of their
    CRC32C that follows them) after the checksum and its copy check out. Raises
    CorruptionError naming the file, column and offset."""
    if len(data) != stored + CRC.size or crc32c.crc32c(data[:stored]) != crc \
            or CRC.unpack_from(data, stored)[0] != crc:
        raise CorruptionError(f"{path}: checksum mismatch in column {name!r} block at "
                              f"offset {off}", path, off)
    return data[:stored]


def check_segment(path: str) -> None:
    """Check every checksum of a segment file (footer, index, each column block) and the index's
    fields (see ``read_index``) without decompressing or decoding anything; returns None.
    Raises what ``read_segment`` raises for the same damage (CorruptionError naming file and
    offset; FileNotFoundError if it is gone). For callers that trust the rows by other means
    (rerun's row digests) but must still report a damaged file."""
    _check(path, None)


def _check(path: str, row) -> None:
    seg = SegmentFile(path, row)
    try:
        for name, (_, blocks) in seg.meta["columns"].items():
            for _, _, off, stored, _, crc in blocks.tolist():
                _checked_block(_pread(seg.fd, stored + CRC.size, off), path, name, off, stored,
                               crc)
    finally:
        seg.close()


class SegmentFile:
    """One open segment file and its checked index (``read_index``), read window by window.

    Opening reads and checks the index once (and, given a catalog ``row``, cross-checks it,
    see ``read_registered``); each ``read`` then fetches only the blocks whose zone map
    entries overlap the request, of the columns asked for. A file is immutable, so an open
    one stays valid even after compaction deletes its name. Reads use ``os.pread``: one
    SegmentFile may serve several threads. Raises on opening as ``read_segment``.
    """

    def __init__(self, path: str, row=None):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)   # FileNotFoundError if it is gone
        try:
            self.meta = _index(self.fd, path)
            if row is not None:
                _cross_check(path, self.meta, row)
        except BaseException:
            self.close()
            raise
        z = self.meta["zones"]
        self._zones = tuple(z[f].copy() for f in ZONE_DTYPE.names)
        # why only before version 4: a version-4 file holds every column of its table, so one
        # missing from its index is damage, never a column that did not exist yet
        self._added = ADDED_COLUMNS.get(self.meta["table"], ()) \
            if self.meta["version"] < COMPLETE_VERSION else ()
        # why only from version 3: an older file has no zone map, only the index's own ranges,
        # which readers of those versions never compared with the rows
        self._zoned = self.meta["version"] >= BLOCKED_VERSION
        # blocks whose seq column was decoded and found to match its zone map entry
        # (``_check_zone``); a set shared by threads (adds only, each atomic)
        self._seq_checked: set = set()

    def close(self) -> None:
        """Close the file (idempotent); returns None."""
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)
            self.fd = -1

    __del__ = close   # why: a reader dropped without close() must not keep the descriptor

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def blocks(self, seq=None, ts=None) -> np.ndarray:
        """The indexes (ascending) of the blocks whose zone map overlaps the inclusive ``seq``
        and ``ts`` ranges (None: any)."""
        sl, sh, tl, th = self._zones
        if seq is None and ts is None:
            return np.arange(sl.size)
        if ts is None:
            # why a binary search: zones' seqs ascend from block to block
            a = int(np.searchsorted(sh, seq[0], "left"))
            b = int(np.searchsorted(sl, seq[1], "right"))
            return np.arange(a, max(a, b))
        m = (th >= ts[0]) & (tl <= ts[1])
        if seq is not None:
            m &= (sh >= seq[0]) & (sl <= seq[1])
        return np.flatnonzero(m)

    def read(self, columns=None, seq=None, ts=None, blocks=None, scratch=None) -> dict:
        """Decode the rows with seq and ts inside the inclusive ranges (None: all rows) of the
        named columns (None: every column, added ones included); ``blocks`` (block indexes,
        ascending) restricts the read to those blocks. ``scratch`` (a ``store.scratch.Scratch``)
        supplies the decoded columns' memory: the arrays returned are then valid only while
        the caller's borrow of it lasts.

        Returns a ``store.tables.Columns`` {column name: 1-D array of the kept rows, in file
        (seq) order}, its ``lacking`` the asked-for columns the file predates. Only blocks
        whose zone map overlaps the ranges are read; rows are cut by a binary search on seq
        (it never decreases) and a ts mask. Every decoded seq and ts block is checked against
        its zone map entry (first/last seq, least/greatest ts).
        Raises as ``read_segment``.
        """
        meta, path = self.meta, self.path
        if columns is None:
            columns = list(meta["columns"]) + [c for c in self._added if c not in meta["columns"]]
        ids = self.blocks(seq, ts)
        if blocks is not None:
            ids = np.intersect1d(ids, blocks)
        if seq is not None and self._zoned:
            self._check_neighbours(seq)
        # why seq/ts decoded even where the zone map puts a block wholly inside the range: the
        # check against the zone map (``_check_zone``) then covers every block the read
        # returns rows of; they are one column of the few the window decodes
        cut_seq = seq is not None and ids.size > 0
        cut_ts = ts is not None and ids.size > 0
        need = list(dict.fromkeys(list(columns) + (["seq"] if cut_seq else [])
                                  + (["ts"] if cut_ts else [])))
        br, rows = meta["block_rows"], meta["rows"]
        counts = np.minimum(br, rows - ids * br)
        total = int(counts.sum())
        decoded = {}
        for name in need:
            if name not in meta["columns"]:
                if name in self._added:
                    # why zeros: the column did not exist when the file was written, and 0 is
                    # what the field means for rows written before it (store.tables)
                    decoded[name] = np.zeros(total, table_dtype(meta["table"]).fields[name][0])
                    continue
                raise CorruptionError(f"{path}: no column {name!r} in the index", path, 0)
            decoded[name] = self._column(name, ids, counts, total, scratch)
        a, b, sel = 0, total, None
        if cut_seq:
            s = decoded["seq"]
            a = int(np.searchsorted(s, seq[0], "left"))
            b = int(np.searchsorted(s, seq[1], "right"))
        if cut_ts:
            t = decoded["ts"][a:b]
            m = (t >= ts[0]) & (t <= ts[1])
            if not m.all():
                sel = np.flatnonzero(m) + a
        lacking = [c for c in columns if c not in meta["columns"]]
        if sel is None:
            if a == 0 and b == total:
                return Columns({c: decoded[c] for c in columns}, lacking)
            return Columns({c: decoded[c][a:b] for c in columns}, lacking)
        return Columns({c: decoded[c][sel] for c in columns}, lacking)

    def _check_neighbours(self, seq) -> None:
        """Check (decode) the seq column of the blocks just outside the seq window, once per
        file: the last block the zone map ends before the window and the first it starts after
        it. Why: a read skips blocks by their zone map entries; a forged entry that still tiles
        the segment (a block's first seq moved up past rows it holds, under a recomputed index
        checksum) would hide rows from a window falling in the gap it opens, with no block
        decoded to disagree. With every block's rows ordered by seq and the blocks holding
        ``block_rows`` rows each, both neighbours matching their entries means no row lies
        between them and the window's blocks. Raises CorruptionError as ``_check_zone``."""
        sl, sh = self._zones[0], self._zones[1]
        below = int(np.searchsorted(sh, seq[0], "left")) - 1
        above = int(np.searchsorted(sl, seq[1], "right"))
        br, rows = self.meta["block_rows"], self.meta["rows"]
        for b in (below, above):
            if 0 <= b < sl.size and b not in self._seq_checked:
                n = min(br, rows - b * br)
                self._column("seq", np.array([b]), np.array([n]), n)

    def _column(self, name: str, ids: np.ndarray, counts: np.ndarray, total: int,
                scratch=None) -> np.ndarray:
        """Column ``name`` of blocks ``ids`` (``counts`` rows each), decoded into one array
        (from ``scratch`` when given)."""
        path, meta = self.path, self.meta
        dt, blocks = meta["columns"][name]
        try:
            out = np.empty(total, dt) if scratch is None else scratch.take(total, dt)
        except MemoryError:
            raise CorruptionError(f"{path}: column {name!r} declares {total} rows, more than "
                                  f"this process can allocate", path, 0) from None
        if ids.size == 0:
            return out
        ents = blocks[ids].tolist()
        first, last = ents[0], ents[-1]
        span = last[2] + last[3] + CRC.size - first[2]
        if span == sum(e[3] + CRC.size for e in ents) and span > 0:
            # the writer's layout: a column's blocks back to back, fetched in one read
            buf, base = memoryview(_pread(self.fd, span, first[2])), first[2]
        else:
            buf, base = None, 0
        pos = 0
        for k, (enc, codec, off, stored, raw, crc) in enumerate(ents):
            n = int(counts[k])
            data = buf[off - base:off - base + stored + CRC.size] if buf is not None \
                else _pread(self.fd, stored + CRC.size, off)
            block = self._block(name, data, (enc, codec, off, stored, raw, crc))
            dest = out[pos:pos + n]
            try:
                codecs.decode(block, n, dt, where=f"{path}:{name}", out=dest)
            except CorruptionError as e:
                # why re-raised: codecs name the place but know no file offset
                raise CorruptionError(f"{e} (block at offset {off})", path, off) from None
            if self._zoned and (name == "seq" or name == "ts"):
                self._check_zone(name, int(ids[k]), dest, off)
            pos += n
        return out

    def _block(self, name: str, data, entry) -> bytes:
        """Column ``name``'s block bytes: its stored bytes ``data`` (CRC included) checked,
        decompressed, and its encoding byte checked against the index ``entry``. Raises
        CorruptionError naming the file and offset."""
        enc, codec, off, stored, raw, crc = entry
        block = _decompress(codec, _checked_block(data, self.path, name, off, stored, crc), raw,
                            self.path, off)
        if block[0] != enc:
            raise CorruptionError(f"{self.path}: column {name!r} block at offset {off} holds "
                                  f"encoding {block[0]}, the index says {enc}", self.path, off)
        return block

    def first_seq(self, b: int) -> int:
        """The seq of block ``b``'s first row, as its zone map entry records it."""
        return int(self._zones[0][b])

    def constant(self, name: str, b: int):
        """The value (a numpy scalar of the column's dtype) every row of column ``name`` holds
        in block ``b``, when its block is a constant FOR stream or PLAIN values all equal
        (``codecs.constant``; such as a symbol's phase through a continuous session), else
        None; None too for a column the file predates. Costs one block's stored bytes, not a
        decode. Raises CorruptionError as ``read``."""
        if name not in self.meta["columns"]:
            return None
        dt, blocks = self.meta["columns"][name]
        entry = tuple(blocks[b].tolist())
        off, stored = entry[2], entry[3]
        block = self._block(name, _pread(self.fd, stored + CRC.size, off), entry)
        br = self.meta["block_rows"]
        try:
            v = codecs.constant(block, min(br, self.meta["rows"] - b * br), dt,
                                where=f"{self.path}:{name}")
        except CorruptionError as e:
            raise CorruptionError(f"{e} (block at offset {off})", self.path, off) from None
        return None if v is None else np.array(v, dt)[()]

    def _check_zone(self, name: str, b: int, vals: np.ndarray, off: int) -> None:
        """Raise CorruptionError unless block ``b``'s decoded seq (first, last) or ts (least,
        greatest) are what its zone map entry says. Why: a read trusts the zone map to skip
        blocks and to take interior blocks whole; a zone map that disagrees with the rows it
        describes must not silently drop or add rows."""
        sl, sh, tl, th = self._zones
        if name == "seq":
            got, want = (int(vals[0]), int(vals[-1])), (int(sl[b]), int(sh[b]))
        else:
            got, want = (int(vals.min()), int(vals.max())), (int(tl[b]), int(th[b]))
        if got != want:
            raise CorruptionError(f"{self.path}: column {name!r} block at offset {off} holds "
                                  f"{name} {got[0]}..{got[1]}, its zone map says "
                                  f"{want[0]}..{want[1]}", self.path, off)
        if name == "seq":
            self._seq_checked.add(b)


def read_segment(path: str, columns=None, seq=None, ts=None) -> dict:
    """Decode the named columns (all if None) of a segment file, the rows with seq and ts in
    the inclusive ``seq``/``ts`` ranges (None: every row).

    Returns {column name: 1-D array of the kept rows}; only those columns' blocks whose zone
    map overlaps the ranges are read. A column the table gained after the file was written
    (``store.tables.ADDED_COLUMNS``) is returned as zeros of its stored dtype when asked for or
    when all are (None). Raises CorruptionError (naming file and offset) on any failed check:
    checksums, the index's fields (``read_index``), a block whose encoding byte differs from
    the index's, that does not decompress or decode to exactly its rows, or whose seq or ts
    disagree with its zone map; StoreError subclasses on unreadable files; FileNotFoundError
    if the file is gone (a reader may then re-read the catalog).
    """
    with SegmentFile(path) as seg:
        return seg.read(columns, seq, ts)


# (catalog row field, its value in read_index's dict)
_CROSS = (("table_name", lambda m: m["table"]), ("symbol", lambda m: m["symbol"]),
          ("rows", lambda m: m["rows"]), ("seq_lo", lambda m: m["seq"][0]),
          ("seq_hi", lambda m: m["seq"][1]), ("ts_lo", lambda m: m["ts"][0]),
          ("ts_hi", lambda m: m["ts"][1]))


def _cross_check(path: str, meta: dict, row) -> None:
    """Raise CorruptionError naming the file and the first field in which the catalog ``row``
    and the file's own index disagree (table_name, symbol, rows, seq_lo/hi, ts_lo/hi).
    Why: a flipped catalog field would otherwise drop rows, return another symbol's rows or
    rows outside a range, and the index records the same facts under its own checksum."""
    for field, mine in _CROSS:
        try:
            theirs = row[field]
        except (KeyError, IndexError, TypeError):
            raise CorruptionError(f"{path}: the catalog row has no {field}", path, -1) from None
        want = mine(meta)
        if field != "table_name":
            try:
                theirs = operator.index(theirs)
            except TypeError:
                pass   # not an integer: it cannot equal the index's
        if type(theirs) is not type(want) or theirs != want:
            raise CorruptionError(f"{path}: the catalog says {field} = {theirs!r}, the file's "
                                  f"index says {want!r}", path, meta["index_offset"])


def read_registered(data_dir: str, row: dict, columns=None, seq=None, ts=None,
                    scratch=None) -> dict:
    """Decode the columns of the segment a catalog ``row`` registers in ``data_dir`` (rows in
    the ``seq``/``ts`` ranges, as ``read_segment``; ``scratch`` as ``SegmentFile.read``).

    The row's path must stay inside ``data_dir`` (store/paths.py), and its table_name, symbol,
    rows, seq_lo/seq_hi and ts_lo/ts_hi must equal what the file's own index records. Returns
    what ``read_segment`` returns. Raises CorruptionError if the path is refused, a field
    disagrees (naming the file and the field) or the file fails a check; FileNotFoundError if
    it is gone (a reader may then re-read the catalog).
    """
    with open_registered(data_dir, row) as seg:
        return seg.read(columns, seq, ts, scratch=scratch)


def open_registered(data_dir: str, row: dict) -> SegmentFile:
    """The SegmentFile of the segment a catalog ``row`` registers in ``data_dir``, opened
    after the checks of ``read_registered`` (path inside, fields cross-checked). Raises as
    ``read_registered``."""
    from exsim.store.paths import inside

    return SegmentFile(inside(data_dir, row["path"], what="segment"), row)


def check_registered(data_dir: str, row: dict) -> None:
    """``check_segment`` on the file a catalog ``row`` registers in ``data_dir``, with the
    cross-check of ``read_registered``; returns None. Raises as ``read_registered``."""
    from exsim.store.paths import inside

    _check(inside(data_dir, row["path"], what="segment"), row)
