"""Write-ahead log: one checksummed record per processed batch.

A WAL directory holds files ``wal-00000001.log``, ``wal-00000002.log`` ... Each starts with a
16-byte file header (magic ``EXWL``, version, file number) followed by records. A record frame is

    u32 length | u32 crc32c(type + payload) | u8 type | u32 crc32c(the 9 bytes before) | payload

The payload is a batch: a 24-byte header (first seq, row counts of orders, fills, l2, events)
then the four arrays, packed (no padding), in that order. Type BATCH_LZ4 (read only, written by
format version 1) means the payload is ``u32 raw length + lz4 block`` of that; type BATCH_SHUF
(version 2, what ``compress=True`` writes) is ``u32 raw length + lz4 block`` of the header and each
array byte-shuffled (byte 0 of every row, then byte 1 ...: blosc's shuffle), which lz4 shrinks to
less than half and compresses about twice as fast. Type BATCH_PARTS (version 3) is the same batch
cut into consecutive parts by seq: ``u32 part count``, then per part ``u32 raw length, u32 lz4
length, lz4 block`` of a type-3 raw payload (its own 24-byte header and shuffled arrays). A part
can be encoded while the engine still matches the rest of its batch (``Session.process``); the
record is still one frame under one CRC, written whole or not at all, and reads back as one
batch. Byte layout: docs/formats.md.

Invariants:
- Records are appended whole with one writev (frame header + payload parts); a batch is
  acknowledged only after ``append`` returns, and under durability ``fsync`` only after the file
  is fsynced: by that append, or, for records appended with ``defer_sync`` (group commit,
  ``GroupWriter``), by the ``commit()`` after them.
- Seqs are contiguous: each record's first seq is the previous record's last seq + 1, across files.
- A writer never appends to a file a previous process wrote: it starts a new file, so recovery
  only ever has to truncate the tail of an old file, never to rewrite one. No file without a
  whole record is left behind: repair deletes older ones, the next writer the newest.
- Lengths, counts and claimed sizes read from a file are checked against the bytes that hold
  them before anything is allocated; the WAL directory and its files are never followed when
  they are symlinks (CorruptionError).
- A record cut off at the end of the last file is a crash tail: truncated (when repairing) and
  reported. Anything else that fails a check is corruption: CorruptionError naming file and
  offset, unless salvage mode was asked for, which truncates there and reports what it dropped.

Why the extra header checksum (not in LevelDB's frame): a flipped bit in a length field would
otherwise make a record look like it runs past the end of the file, i.e. look like a crash
tail, and recovery would silently drop every acknowledged record after it.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import time
from dataclasses import dataclass, field

import crc32c
import lz4.block
import numpy as np

from exchange.errors import CorruptionError, UsageError, WriteError
from store.paths import is_plain_dir
from store.shuffle import shuffle as _shuffle, unshuffle as _unshuffle
from store.tables import STORED_DTYPES, TABLES, packed
from exchange.schema import TABLE_DTYPES

__all__ = ["WalWriter", "GroupWriter", "PartEncoder", "WalRecord", "WalReport", "scan_wal", "wal_files", "DURABILITY"]

MAGIC = b"EXWL"
VERSION = 3                               # 2 added record type 3, 3 type 4; older files are read
READ_VERSIONS = (1, 2, 3)
FILE_HEADER = struct.Struct("<4sHHQ")     # magic, version, reserved, file number
FRAME = struct.Struct("<IIB")             # length, crc32c(type + payload), type
HCRC = struct.Struct("<I")                # crc32c of the FRAME bytes
FRAME_SIZE = FRAME.size + HCRC.size       # 13
BATCH = struct.Struct("<qIIII")           # first seq, n orders, n fills, n l2, n events
T_BATCH, T_BATCH_LZ4, T_BATCH_SHUF, T_BATCH_PARTS = 1, 2, 3, 4
RECORD_TYPES = (T_BATCH, T_BATCH_LZ4, T_BATCH_SHUF, T_BATCH_PARTS)
MIN_VERSION = {T_BATCH_SHUF: 2, T_BATCH_PARTS: 3}   # the file version that introduced a type
PART = struct.Struct("<II")               # a type-4 part: raw length, lz4 block length
# why 8: on the seeded 1M flow, session with fsync per batch, 10 interleaved rounds: 0.973x the
# process CPU and 0.973x the wall time of acceleration 1 (paired medians), for 29.7 instead of
# 28.5 WAL bytes per message; the lz4 call alone costs 0.78x (the byte shuffle is untouched).
# Readers need nothing: acceleration only changes how hard the compressor searches.
LZ4_ACCELERATION = 8
DURABILITY = ("fsync", "interval", "none")
_NAME = re.compile(r"^wal-(\d{8})\.log$")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# why these bounds: lz4 writes at most 255 bytes of output per input byte (a match length grows
# by 255 per extension byte), and its block API takes at most LZ4_MAX_INPUT_SIZE bytes, so a
# claimed raw size outside them is corrupt; checked before the decompressor allocates it
LZ4_MAX_RATIO = 255
LZ4_MAX_RAW = 0x7E000000
SEQ_LIMIT = 1 << 62   # seqs stay below it (replay's SEQ_MAX): int64 arithmetic on them never wraps
# Wire forms: the schema dtypes packed; orders without seq (it is implied by the first seq).
_WIRE = {"orders": packed(TABLE_DTYPES["orders"]), **{t: packed(STORED_DTYPES[t]) for t in TABLES[1:]}}
_OUT = {"orders": TABLE_DTYPES["orders"], **{t: STORED_DTYPES[t] for t in TABLES[1:]}}


def _check_plain_dir(wal_dir: str) -> None:
    """Raise CorruptionError if ``wal_dir`` exists but is a symlink or not a directory."""
    if os.path.lexists(wal_dir) and not is_plain_dir(wal_dir):
        raise CorruptionError(f"{wal_dir}: the WAL directory is a symlink or not a directory; "
                              "refused (a data directory's files must be its own)", wal_dir, -1)


def wal_files(wal_dir: str) -> list[tuple[int, str]]:
    """Return (file number, path) of every WAL file in ``wal_dir``, in order.

    A file removed while listing is left out (a trim may run meanwhile). Raises CorruptionError
    naming it if ``wal_dir`` or a WAL file is a symlink or not a plain directory / regular file:
    nothing is read, truncated or deleted through a link.
    """
    _check_plain_dir(wal_dir)
    out = []
    for name in os.listdir(wal_dir):
        m = _NAME.match(name)
        if m:
            path = os.path.join(wal_dir, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                raise CorruptionError(f"{path}: a WAL file that is a symlink or not a regular "
                                      "file; refused", path, -1)
            out.append((int(m.group(1)), path))
    return sorted(out)


def _header_only(no: int, path: str) -> bool:
    """True if WAL file ``path`` (number ``no``) is exactly a valid file header, no record."""
    try:
        if os.lstat(path).st_size != FILE_HEADER.size:
            return False
        data = _read_file(path)
    except FileNotFoundError:
        return False
    if len(data) != FILE_HEADER.size:
        return False
    magic, version, _, fno = FILE_HEADER.unpack(data)
    return magic == MAGIC and version in READ_VERSIONS and fno == no


def _read_file(path: str) -> bytes:
    """The bytes of WAL file ``path``, opened without following a symlink put there since it
    was listed (CorruptionError then); FileNotFoundError if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptionError(f"{path}: cannot open WAL file (a symlink?): {e}", path, -1) from e
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _truncate(path: str, size: int) -> None:
    """Cut WAL file ``path`` to ``size`` bytes durably, never through a symlink (CorruptionError
    if one was put there since it was listed)."""
    try:
        fd = os.open(path, os.O_RDWR | _NOFOLLOW)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptionError(f"{path}: cannot open WAL file to cut it (a symlink?): {e}",
                              path, -1) from e
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """fsync a directory so that renames and new files in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class WalRecord:
    """One journaled batch: its orders (without seq) and outputs, and where it was read."""

    first_seq: int
    orders: np.ndarray
    fills: np.ndarray
    l2: np.ndarray
    events: np.ndarray
    path: str = ""
    offset: int = 0

    @property
    def last_seq(self) -> int:
        """Seq of the batch's last order (first_seq - 1 for an empty batch)."""
        return self.first_seq + self.orders.size - 1


@dataclass
class WalReport:
    """What a scan found: records, the crash tail it cut, what salvage dropped."""

    files: list = field(default_factory=list)
    records: int = 0
    last_seq: int = 0
    torn_tail: tuple | None = None    # (path, offset, bytes cut)
    salvaged: tuple | None = None     # (path, offset, message, bytes dropped)
    file_ranges: dict = field(default_factory=dict)   # path -> (first seq, last seq)
    removed: list = field(default_factory=list)       # files without a whole record (repair)


def _wire_bytes(name: str, arr: np.ndarray) -> np.ndarray:
    """The packed rows of ``arr`` as a flat uint8 array (no copy when already packed)."""
    wire = _WIRE[name]
    if arr.dtype != wire or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr).astype(wire)
    return arr.view(np.uint8).reshape(-1)


def _shuffled_lz4(first_seq, orders, fills, l2, events, scratch: np.ndarray | None) -> tuple[int, bytes]:
    """Return (raw size, lz4 block) of the type-3 raw payload of a batch: its header and each
    array byte-shuffled, built in ``scratch`` when it is large enough (uint8)."""
    head = BATCH.pack(first_seq, orders.size, fills.size, l2.size, events.size)
    arrays = [_wire_bytes(n, a) for n, a in zip(TABLES, (orders, fills, l2, events))]
    size = len(head) + sum(a.size for a in arrays)
    raw = scratch[:size] if scratch is not None and scratch.size >= size else np.empty(size, np.uint8)
    raw[:len(head)] = np.frombuffer(head, np.uint8)
    pos = len(head)
    for name, a in zip(TABLES, arrays):
        pos = _shuffle(a, _WIRE[name].itemsize, raw, pos)
    return size, lz4.block.compress(raw, store_size=False, mode="fast", acceleration=LZ4_ACCELERATION)


def _raw_size(orders, fills, l2, events) -> int:
    return BATCH.size + sum(a.size * _WIRE[t].itemsize for t, a in zip(TABLES, (orders, fills, l2, events)))


def _encode_batch(first_seq, orders, fills, l2, events, compress: bool,
                  scratch: np.ndarray | None = None) -> tuple[int, list]:
    """Return (record type, payload parts); the payload is the concatenation of the parts.

    ``scratch`` (optional uint8 array of at least the raw payload size) receives the shuffled
    bytes before compression; reusing one spares the page faults of a fresh buffer per record,
    which cost more than the shuffle itself.
    """
    if not compress:
        head = BATCH.pack(first_seq, orders.size, fills.size, l2.size, events.size)
        return T_BATCH, [head] + [_wire_bytes(n, a) for n, a in zip(TABLES, (orders, fills, l2, events))]
    size, body = _shuffled_lz4(first_seq, orders, fills, l2, events, scratch)
    return T_BATCH_SHUF, [struct.pack("<I", size), body]


class PartEncoder:
    """Encodes the parts of a type-4 record (``WalWriter.append_parts``), one at a time, in a
    reused shuffle buffer. Its ``encode`` releases the GIL for nearly all of its work (shuffle
    kernel, lz4), so parts can be encoded on a thread while the engine matches the next ones.
    One encoder must not be used by two threads at once."""

    def __init__(self):
        self._scratch = np.empty(0, np.uint8)

    def encode(self, first_seq, orders, fills, l2, events) -> list:
        """Return one part (a list of bytes-like pieces) holding this sub-batch of a record."""
        need = _raw_size(orders, fills, l2, events)
        if self._scratch.size < need:
            self._scratch = np.empty(need + need // 4, np.uint8)
        size, body = _shuffled_lz4(first_seq, orders, fills, l2, events, self._scratch)
        return [PART.pack(size, len(body)), body]


def _rows(rtype: int, payload, pos: int = 0, end: int | None = None) -> tuple[int, list]:
    """Parse one (decompressed) batch payload of type 1 or 3 in payload[pos:end]; return
    (first seq, [orders, fills, l2, events]). Raises ValueError when it does not add up."""
    end = len(payload) if end is None else end
    first_seq, *counts = BATCH.unpack_from(payload, pos)
    pos += BATCH.size
    arrays = []
    src = np.frombuffer(payload, np.uint8)
    for name, n in zip(TABLES, counts):
        wire = _WIRE[name]
        size = n * wire.itemsize
        if pos + size > end:
            raise ValueError(f"{name} rows run past the payload")
        if rtype == T_BATCH_SHUF:
            out = np.empty(size, np.uint8)
            _unshuffle(src, pos, wire.itemsize, n, out)
            a = out.view(wire)
        else:
            a = np.frombuffer(payload, wire, count=n, offset=pos)
        pos += size
        arrays.append(a if wire == _OUT[name] and a.flags.writeable else a.astype(_OUT[name]))
    if pos != end:
        raise ValueError(f"{end - pos} unexpected trailing bytes")
    return first_seq, arrays


def _lz4(block, n: int) -> bytes:
    """Decompress an lz4 block claimed to hold ``n`` bytes; ValueError if the claim is
    impossible for its size (checked before the decompressor allocates ``n`` bytes) or wrong."""
    if n > min(LZ4_MAX_RAW, LZ4_MAX_RATIO * len(block) + 16):
        raise ValueError(f"a {len(block)}-byte lz4 block cannot hold the {n} bytes claimed")
    out = lz4.block.decompress(block, uncompressed_size=n)
    if len(out) != n:
        raise ValueError(f"decompressed to {len(out)} bytes, header says {n}")
    return out


def _decode_parts(payload) -> tuple[int, list]:
    (count,) = struct.unpack_from("<I", payload)
    if count == 0:
        raise ValueError("a multi-part record without parts")
    if count > (len(payload) - 4) // PART.size:
        raise ValueError(f"{count} parts cannot fit in {len(payload)} bytes")
    pos, first, expect, per_table = 4, None, None, [[] for _ in TABLES]
    view = memoryview(payload)
    for k in range(count):
        raw_n, comp_n = PART.unpack_from(payload, pos)
        pos += PART.size
        if pos + comp_n > len(payload):
            raise ValueError(f"part {k} runs past the payload")
        seq, arrays = _rows(T_BATCH_SHUF, _lz4(view[pos:pos + comp_n], raw_n))
        pos += comp_n
        if expect is not None and seq != expect:
            raise ValueError(f"part {k} starts at seq {seq}, expected {expect}")
        first = seq if first is None else first
        expect = seq + arrays[0].size
        for lst, a in zip(per_table, arrays):
            lst.append(a)
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} unexpected trailing bytes")
    return first, [p[0] if len(p) == 1 else np.concatenate(p) for p in per_table]


def _decode_batch(rtype: int, payload: bytes, path: str, offset: int) -> WalRecord:
    try:
        if rtype == T_BATCH_PARTS:
            first_seq, arrays = _decode_parts(payload)
        elif rtype in (T_BATCH_LZ4, T_BATCH_SHUF):
            (n,) = struct.unpack_from("<I", payload)
            first_seq, arrays = _rows(rtype, _lz4(memoryview(payload)[4:], n))
        else:
            first_seq, arrays = _rows(rtype, payload)
    except (ValueError, OverflowError, struct.error, lz4.block.LZ4BlockError) as e:
        raise CorruptionError(f"{path}: record at offset {offset} has a bad payload ({e})",
                              path, offset) from None
    return WalRecord(first_seq, *arrays, path=path, offset=offset)


class WalWriter:
    """Appends batch records to a WAL directory under an explicit durability policy.

    durability: "fsync" (fsync after every record), "interval" (fsync when ``interval`` seconds
    passed since the last one: group commit; records between fsyncs survive a process crash but
    not a power loss) or "none" (never fsync: pure simulation). Files rotate when they pass
    ``rotate_bytes``. A newest file holding only its header (a kill before its first record) is
    deleted and its number reused. Raises UsageError for an unknown policy, CorruptionError if
    ``wal_dir`` or a WAL file in it is a symlink.
    """

    def __init__(self, wal_dir: str, *, durability: str = "fsync", interval: float = 0.05,
                 rotate_bytes: int = 64 << 20, compress: bool = True, next_seq: int = 1):
        if durability not in DURABILITY:
            raise UsageError(f"durability must be one of {DURABILITY}, got {durability!r}")
        os.makedirs(wal_dir, exist_ok=True)
        _check_plain_dir(wal_dir)   # why: never write records through a symlinked directory
        self.wal_dir = wal_dir
        self.durability = durability
        self.interval = interval
        self.rotate_bytes = rotate_bytes
        self.compress = compress
        self.next_seq = next_seq
        existing = wal_files(wal_dir)
        if existing and _header_only(*existing[-1]):
            # why: a kill between writing a file's header and its first record leaves it; it
            # holds nothing, and a new file after it would leave it behind for good (no seq
            # range, so no trim covers it)
            os.unlink(existing.pop()[1])
            fsync_dir(wal_dir)
        self._file_no = existing[-1][0] if existing else 0
        self._fd = -1
        self._path = ""
        self._size = 0
        self._last_sync = time.monotonic()
        self._broken: str | None = None
        self.closed_files: list[tuple[str, int, int]] = []   # (path, first seq, last seq)
        self._cur_range: tuple[int, int] | None = None
        self.bytes_written = 0
        self._scratch = np.empty(0, np.uint8)   # shuffled payloads before lz4, reused
        self._unsynced = False      # bytes written to the current file since its last fsync
        self._dir_synced = True     # the directory entry of the current file is durable

    # -- files ---------------------------------------------------------------------------------
    def _open_next(self) -> None:
        self._file_no += 1
        self._path = os.path.join(self.wal_dir, f"wal-{self._file_no:08d}.log")
        try:
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self._write_all(FILE_HEADER.pack(MAGIC, VERSION, 0, self._file_no))
            # why no fsync here: the first record's fsync covers the header too, and the
            # directory is fsynced right after it (_sync_now): one fsync fewer per file, on the
            # path of the batch that opens it
            self._dir_synced = self.durability == "none"
        except OSError as e:
            self._broken = f"cannot create {self._path}: {e}"
            raise WriteError(f"WAL: {self._broken}") from e
        self._size = FILE_HEADER.size
        self._cur_range = None

    def rotate(self) -> None:
        """Close the current file (fsynced unless durability is none); the next append opens a new one."""
        if self._fd < 0:
            return
        try:
            if self.durability != "none" and (self._unsynced or not self._dir_synced):
                self._sync_now()
        except OSError as e:
            # why broken: a record in this file may not be durable; appending to the next file
            # would put later records on disk after a lost one (a seq gap on reopen)
            self._broken = f"fsync of {self._path} failed: {e}"
            raise WriteError(f"WAL: {self._broken}") from e
        finally:
            os.close(self._fd)
            self._fd = -1
        if self._cur_range is not None:
            self.closed_files.append((self._path, *self._cur_range))

    def _sync_now(self) -> None:
        """fsync the current file and, the first time, the directory that names it."""
        os.fsync(self._fd)
        self._unsynced = False
        if not self._dir_synced:
            fsync_dir(self.wal_dir)
            self._dir_synced = True

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def _writev(self, parts: list, size: int) -> None:
        """Write the parts back to back (one writev; short writes finish with plain writes)."""
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        done = os.writev(self._fd, views)
        if done == size:
            return
        for v in views:     # why: a short writev (rare: signals, pipes, quotas) continues here
            if done >= len(v):
                done -= len(v)
                continue
            self._write_all(v[done:])
            done = 0

    # -- records -------------------------------------------------------------------------------
    def append(self, first_seq: int, orders, fills, l2, events, *, defer_sync: bool = False) -> int:
        """Append one batch record; return its size in bytes once it is durable under the policy.

        ``defer_sync`` (group commit): under durability "fsync", skip this record's fsync; the
        record is then durable only after the next ``commit()`` (or rotation), and must not be
        acknowledged before. Other policies ignore it.
        Raises UsageError if first_seq does not continue the log, WriteError if the write or
        fsync fails (the partial record is cut off again where possible; the writer then refuses
        further appends because the caller's state is ahead of the log).
        """
        self._check_next(first_seq)
        need = _raw_size(orders, fills, l2, events)
        if self.compress and self._scratch.size < need:
            self._scratch = np.empty(need + need // 4, np.uint8)
        rtype, parts = _encode_batch(first_seq, orders, fills, l2, events, self.compress,
                                     self._scratch)
        return self._append_payload(first_seq, orders.size, rtype, parts, defer_sync)

    def append_parts(self, first_seq: int, n_orders: int, parts: list, *,
                     defer_sync: bool = False) -> int:
        """Append one batch record made of parts (``PartEncoder.encode`` results, consecutive
        sub-batches in seq order, the first starting at ``first_seq``, ``n_orders`` orders in
        all); return its size once durable, as ``append`` (same errors). A record of type 4:
        one frame, one CRC, read back as one batch."""
        self._check_next(first_seq)
        payload = [struct.pack("<I", len(parts))] + [piece for part in parts for piece in part]
        return self._append_payload(first_seq, n_orders, T_BATCH_PARTS, payload, defer_sync)

    def _check_next(self, first_seq: int) -> None:
        if self._broken:
            raise WriteError(f"WAL writer unusable after an earlier failure: {self._broken}")
        if first_seq != self.next_seq:
            raise UsageError(f"WAL expects seq {self.next_seq} next, got a batch starting at {first_seq}")

    def _append_payload(self, first_seq: int, n_orders: int, rtype: int, parts: list,
                        defer_sync: bool) -> int:
        if self._fd >= 0 and self._size >= self.rotate_bytes:
            self.rotate()
        if self._fd < 0:
            self._open_next()
        crc = crc32c.crc32c(bytes([rtype]))
        for p in parts:
            crc = crc32c.crc32c(p, crc)
        length = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)
        head = FRAME.pack(length, crc, rtype)
        frame = [head + HCRC.pack(crc32c.crc32c(head))] + parts
        size = FRAME_SIZE + length
        start = self._size
        try:
            self._writev(frame, size)
            self._size += size
            now = time.monotonic()
            self._unsynced = True
            if (self.durability == "fsync" and not defer_sync) or (
                    self.durability == "interval" and now - self._last_sync >= self.interval):
                self._sync_now()
                self._last_sync = now
        except OSError as e:
            self._broken = f"write of {size} bytes to {self._path} at offset {start} failed: {e}"
            try:
                os.ftruncate(self._fd, start)   # why: leave no half record behind if we can
            except OSError:
                pass                            # recovery will see a torn tail and cut it
            raise WriteError(f"WAL: {self._broken}") from e
        last = first_seq + n_orders - 1
        self._cur_range = (self._cur_range[0] if self._cur_range else first_seq, last)
        self.next_seq = last + 1
        self.bytes_written += size
        return size

    def commit(self) -> None:
        """Make every record appended with ``defer_sync`` durable (durability "fsync": one fsync
        for all of them; other policies: nothing to do). Raises WriteError if the fsync fails;
        the writer then refuses further appends (whether those records survive is unknown)."""
        if self.durability != "fsync" or self._fd < 0 or not (self._unsynced or not self._dir_synced):
            return
        if self._broken:
            raise WriteError(f"WAL writer unusable after an earlier failure: {self._broken}")
        try:
            self._sync_now()
        except OSError as e:
            self._broken = f"fsync of {self._path} failed: {e}"
            raise WriteError(f"WAL: {self._broken}") from e
        self._last_sync = time.monotonic()

    def sync(self) -> None:
        """fsync the current file now (group commit flush). Raises WriteError on failure."""
        if self._fd >= 0:
            try:
                self._sync_now()
            except OSError as e:
                raise WriteError(f"WAL: fsync of {self._path} failed: {e}") from e
            self._last_sync = time.monotonic()

    def close(self) -> None:
        """Flush and close the current file (fsync unless durability is none)."""
        if self._fd >= 0:
            self.rotate()


class GroupWriter:
    """A WalWriter driven by a thread of its own that commits queued records in groups.

    ``append`` and ``rotate`` queue an operation and return a ``concurrent.futures.Future``.
    The thread takes everything queued (up to ``max_group`` operations), performs it in order,
    then makes it durable with one ``commit()`` (one fsync for the group under durability
    "fsync"), and only then resolves the group's futures: a future's result means its record is
    durable under the policy, exactly as a return from ``WalWriter.append``. When the writer
    keeps up, groups hold one record (the same fsync per record as before); when records
    arrive faster than fsyncs complete, one fsync covers several.

    If an operation fails, it and every later one of its group get the exception (an earlier
    record of the group was written but never committed: it is not acknowledged either); the
    WalWriter refuses further appends. While a GroupWriter runs, only its thread touches the
    WalWriter. ``close()`` performs what is queued, then stops the thread.
    """

    def __init__(self, wal: WalWriter, max_group: int = 16):
        import collections
        import threading

        self.wal = wal
        self.max_group = max_group
        self.groups = 0          # commits done: records / groups says how much was grouped
        self.records = 0
        self._queue = collections.deque()
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="exsim-wal", daemon=True)
        self._thread.start()

    def append(self, first_seq, orders, fills, l2, events):
        """Queue a record; return a Future resolved (with its size) once it is durable."""
        return self._submit(("append", (first_seq, orders, fills, l2, events)))

    def rotate(self):
        """Queue a rotation of the WAL file after the records queued so far; return a Future."""
        return self._submit(("rotate", ()))

    def _submit(self, op):
        from concurrent.futures import Future

        fut = Future()
        with self._cond:
            if self._stop:
                raise UsageError("GroupWriter is closed")
            self._queue.append((fut, op))
            self._cond.notify()
        return fut

    def close(self) -> None:
        """Perform every queued operation, then stop the thread (idempotent)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if not self._queue:
                    return
                group = [self._queue.popleft() for _ in range(min(self.max_group, len(self._queue)))]
            self._perform(group)

    def _perform(self, group: list) -> None:
        done, error = [], None
        for fut, (kind, args) in group:
            if error is not None:
                fut.set_exception(error)
                continue
            try:
                if kind == "append":
                    done.append((fut, self.wal.append(*args, defer_sync=True)))
                    self.records += 1
                else:
                    self.wal.rotate()
                    done.append((fut, None))
            except BaseException as e:   # why broad: any failure must reach the waiting caller
                error = e
                fut.set_exception(e)
        if error is None:
            try:
                self.wal.commit()
                self.groups += any(kind == "append" for _, (kind, _) in group)
            except BaseException as e:
                error = e
        for fut, result in done:
            if error is None:
                fut.set_result(result)
            else:   # written but never committed: not durable, so not acknowledged
                fut.set_exception(error if isinstance(error, WriteError) else
                                  WriteError(f"WAL: group commit failed: {error!r}"))


def _fail(msg, path, offset, salvage, report, size, files_left):
    if not salvage:
        raise CorruptionError(f"{path}: {msg} at offset {offset}", path, offset)
    dropped = size - offset + sum(os.path.getsize(p) for _, p in files_left)
    report.salvaged = (path, offset, msg, dropped)


def scan_wal(wal_dir: str, *, repair: bool = False, salvage: bool = False,
             after_seq: int = 0) -> tuple[list[WalRecord], WalReport]:
    """Read every record of a WAL directory, checking frames, checksums and seq continuity.

    Returns (records whose last seq > after_seq, report). A record cut off at the end of the
    last file is a crash tail: reported in ``report.torn_tail`` and, with ``repair``, truncated.
    Raises CorruptionError naming file and offset for anything else that fails a check; with
    ``salvage`` (implies repair) it instead truncates there, deletes later files and reports
    what it dropped in ``report.salvaged``. With ``repair`` a file left without a whole record
    is deleted (``report.removed``), except the newest, which is cut to its header and replaced
    by the next ``WalWriter``. Every length, count and claimed size in a record is checked
    against the bytes that hold it before anything is allocated for it.
    Raises CorruptionError (naming it) if ``wal_dir`` or a WAL file is a symlink or not a plain
    directory / regular file: nothing is read, cut or deleted through a link.
    FileNotFoundError if a listed file vanished before it was read (a concurrent trim; readers
    retry).
    """
    repair = repair or salvage
    report = WalReport()
    records: list[WalRecord] = []
    files = wal_files(wal_dir) if os.path.lexists(wal_dir) else []
    expect = None
    for i, (no, path) in enumerate(files):
        last_file = i == len(files) - 1
        data = _read_file(path)
        size = len(data)
        view = memoryview(data)   # why: payload slices without copies, however long they claim to be
        report.files.append(path)
        cut = None            # offset to truncate at (torn tail or salvage)
        if size < FILE_HEADER.size:
            if last_file:
                report.torn_tail = (path, 0, size)
                cut = 0
            else:
                _fail("file shorter than its header", path, 0, salvage, report, size, files[i + 1:])
                cut = 0
        else:
            magic, version, _, fno = FILE_HEADER.unpack_from(data)
            if magic != MAGIC or version not in READ_VERSIONS or fno != no:
                _fail(f"bad file header (magic {magic!r}, version {version}, number {fno})",
                      path, 0, salvage, report, size, files[i + 1:])
                cut = 0
        pos = FILE_HEADER.size
        first_in_file = None
        while cut is None and pos < size:
            if size - pos < FRAME_SIZE:
                if last_file:
                    report.torn_tail = (path, pos, size - pos)
                else:
                    _fail("file ends inside a record header", path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            length, crc, rtype = FRAME.unpack_from(data, pos)
            (hcrc,) = HCRC.unpack_from(data, pos + FRAME.size)
            if crc32c.crc32c(data[pos:pos + FRAME.size]) != hcrc:
                _fail("bad record header checksum", path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            end = pos + FRAME_SIZE + length
            if end > size:
                if last_file:
                    report.torn_tail = (path, pos, size - pos)
                else:
                    _fail("record runs past the end of the file", path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            payload = view[pos + FRAME_SIZE:end]
            if rtype not in RECORD_TYPES or version < MIN_VERSION.get(rtype, 1) or \
                    crc32c.crc32c(payload, crc32c.crc32c(bytes([rtype]))) != crc:
                _fail("bad record checksum", path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            first_seq, n_orders = BATCH.unpack_from(payload)[:2] \
                if rtype == T_BATCH and len(payload) >= BATCH.size else (None, None)
            rec = None
            if first_seq is None or first_seq + n_orders - 1 > after_seq or expect is None:
                rec = _decode_batch(rtype, payload, path, pos)
                first_seq, n_orders = rec.first_seq, rec.orders.size
            if first_seq < 1 or first_seq + n_orders > SEQ_LIMIT:
                # why: seqs are counted from 1; one near 2^63 would overflow the int64 seq
                # columns readers compute from it
                _fail(f"implausible seqs {first_seq}..{first_seq + n_orders - 1}",
                      path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            if expect is not None and first_seq != expect:
                _fail(f"seq gap: record starts at seq {first_seq}, expected {expect}",
                      path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            expect = first_seq + n_orders
            first_in_file = first_seq if first_in_file is None else first_in_file
            report.file_ranges[path] = (first_in_file, expect - 1)
            report.records += 1
            report.last_seq = expect - 1
            if rec is not None and rec.last_seq > after_seq:
                records.append(rec)
            pos = end
        # why drop an older file without a whole record: it holds nothing, and having no seq
        # range no trim would ever cover it (a kill between a new file's header and its first
        # record leaves one). The newest such file is kept (cut to its header): the next
        # WalWriter removes it and reuses its number.
        newest = last_file or report.salvaged is not None   # salvage deletes every later file
        if repair and ((cut is not None and cut < FILE_HEADER.size) or
                       (first_in_file is None and not newest)):
            os.unlink(path)
            fsync_dir(wal_dir)
            report.removed.append(path)
        elif repair and cut is not None:
            _truncate(path, cut)
        if cut is not None:
            if report.salvaged is not None:
                if repair:
                    for _, later in files[i + 1:]:
                        os.unlink(later)
                    fsync_dir(wal_dir)
                break
    return records, report
