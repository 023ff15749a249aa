"""Reading the WAL: ``scan_wal`` checks and returns records, and repairs or salvages a tail.

A scan walks every file in order, checking each file header, each frame (header checksum,
length, payload checksum, record type allowed by the file's version) and seq continuity across
records and files. Version-4 frames carry the record's seq range and row counts, so a record
at or below ``after_seq`` is checked (both checksums, continuity) without decompressing its
payload; older frames are read by decoding the payload (uncompressed ones only up to their
batch header).

Invariants:
- Lengths, counts and claimed sizes read from a file are checked against the bytes that hold
  them before anything is allocated; a decoded payload must agree with its version-4 header.
- A version-4 header trusted without decoding (a record at or below ``after_seq``) is still
  cross-checked: its row counts against the raw sizes its payload states in plain text, its
  seqs against the next record's; the journal's last record (which no next record checks) is
  always decoded. A header forged under a recomputed checksum is a named CorruptionError.
- Each file is decoded with its own version's row layout (store.wal.format.wire), so files of
  several versions (older ones, then those a newer writer appended) read as one journal.
- A record cut off at the end of the last file is a crash tail: truncated (when repairing) and
  reported. Anything else that fails a check is corruption: CorruptionError naming file and
  offset, unless salvage mode was asked for, which truncates there and reports what it dropped.
- The WAL directory and its files are never followed when they are symlinks (CorruptionError).
- No file without a whole record is left behind by repair: older ones are deleted, the newest
  is cut to its header (the next writer deletes it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import crc32c
import numpy as np

from exsim.exchange.errors import CorruptionError
from exsim.store.tables import TABLES
from exsim.store.wal.files import fsync_dir, read_file, truncate, wal_files
from exsim.store.wal.format import (BATCH, FILE_HEADER, FRAME, FRAME4, FRAME4_SIZE, FRAME_SIZE, HCRC,
                              INDEXED_VERSION, MAGIC, MIN_VERSION, READ_VERSIONS, RECORD_TYPES,
                              SEQ_LIMIT, VERSION, wire)
from exsim.store.wal.payload import DECODE_ERRORS, decode_batch, peek_seqs, raw_size_claimed


@dataclass
class WalRecord:
    """One journaled batch: its orders (without seq) and outputs, where it was read and the
    format version of its file (its rows hold 0 in the fields ``lacks(version, table)``)."""

    first_seq: int
    orders: np.ndarray
    fills: np.ndarray
    l2: np.ndarray
    events: np.ndarray
    path: str = ""
    offset: int = 0
    version: int = VERSION

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


def _decode(rtype: int, payload, version: int, path: str, offset: int) -> WalRecord:
    """Return the WalRecord of a payload in a file of format ``version``; CorruptionError naming
    file and offset if it is bad."""
    try:
        first_seq, arrays = decode_batch(rtype, payload, version)
    except DECODE_ERRORS as e:
        raise CorruptionError(f"{path}: record at offset {offset} has a bad payload ({e})",
                              path, offset) from None
    return WalRecord(first_seq, *arrays, path=path, offset=offset, version=version)


def _sizes_disagree(rtype: int, payload, version: int, counts) -> str:
    """Why a version-4 frame's row counts cannot be what its payload holds ("" when they can):
    the raw bytes the payload's plain-text lengths claim must be its batch headers plus the
    counted rows at the file version's row widths. Why: a record skipped by a scan (at or below
    ``after_seq``) is trusted by its header for its seq range; this catches a header forged
    under a recomputed checksum to claim rows its payload does not hold, without decoding."""
    claimed = raw_size_claimed(rtype, payload)
    if claimed is None:
        return ""      # too short to say; decoding it names the damage
    size, headers = claimed
    widths = wire(version)
    want = headers * BATCH.size + sum(int(n) * widths[t].itemsize for t, n in zip(TABLES, counts))
    if size == want:
        return ""
    return (f"payload ({size} raw bytes) disagrees with its record header (rows "
            f"{tuple(int(n) for n in counts)}: {want} raw bytes)")


def _cut_short(msg, last_file, path, pos, salvage, report, size, files_left) -> None:
    """A record cut off by the end of its file: a crash tail in the newest file (reported, cut),
    corruption in an older one (``_fail``)."""
    if last_file:
        report.torn_tail = (path, pos, size - pos)
    else:
        _fail(msg, path, pos, salvage, report, size, files_left)


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
        data = read_file(path)
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
            indexed = version >= INDEXED_VERSION
            fsize = FRAME4_SIZE if indexed else FRAME_SIZE
            if size - pos < fsize:
                _cut_short("file ends inside a record header", last_file, path, pos, salvage,
                           report, size, files[i + 1:])
                cut = pos
                break
            if indexed:
                length, crc, rtype, first_seq, last_seq, *counts = FRAME4.unpack_from(data, pos)
                head_len = FRAME4.size
            else:
                length, crc, rtype = FRAME.unpack_from(data, pos)
                head_len, first_seq, last_seq, counts = FRAME.size, None, None, None
            (hcrc,) = HCRC.unpack_from(data, pos + head_len)
            if crc32c.crc32c(data[pos:pos + head_len]) != hcrc:
                _fail("bad record header checksum", path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            end = pos + fsize + length
            if end > size:
                _cut_short("record runs past the end of the file", last_file, path, pos, salvage,
                           report, size, files[i + 1:])
                cut = pos
                break
            payload = view[pos + fsize:end]
            if rtype not in RECORD_TYPES or version < MIN_VERSION.get(rtype, 1) or \
                    crc32c.crc32c(payload, crc32c.crc32c(bytes([rtype]))) != crc:
                _fail("bad record checksum", path, pos, salvage, report, size, files[i + 1:])
                cut = pos
                break
            if counts is not None:
                n_orders = counts[0]
                if last_seq != first_seq + n_orders - 1:
                    _fail(f"record header seqs {first_seq}..{last_seq} disagree with its "
                          f"{n_orders} orders", path, pos, salvage, report, size, files[i + 1:])
                    cut = pos
                    break
            else:
                first_seq, n_orders = peek_seqs(rtype, payload) or (None, None)
            rec = None
            # why the journal's last record is always decoded: its header alone says where the
            # journal ends (journaled_through, run bounds), and no next record's first seq
            # checks it; a header forged to claim more orders is then a named error
            final = last_file and end == size
            if first_seq is None or first_seq + n_orders - 1 > after_seq or final or \
                    (expect is None and counts is None):
                rec = _decode(rtype, payload, version, path, pos)
                got = (rec.first_seq, rec.orders.size, rec.fills.size, rec.l2.size, rec.events.size)
                if counts is not None and got != (first_seq, *counts):
                    _fail(f"payload (seq {got[0]}, rows {got[1:]}) disagrees with its record "
                          f"header (seq {first_seq}, rows {tuple(counts)})",
                          path, pos, salvage, report, size, files[i + 1:])
                    cut = pos
                    break
                first_seq, n_orders = rec.first_seq, rec.orders.size
            else:
                problem = counts is not None and _sizes_disagree(rtype, payload, version, counts)
                if problem:   # a header trusted without decoding: its rows must fit the payload
                    _fail(problem, path, pos, salvage, report, size, files[i + 1:])
                    cut = pos
                    break
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
            truncate(path, cut)
        if cut is not None:
            if report.salvaged is not None:
                if repair:
                    for _, later in files[i + 1:]:
                        os.unlink(later)
                    fsync_dir(wal_dir)
                break
    return records, report
