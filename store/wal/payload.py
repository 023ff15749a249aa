"""WAL record payloads: a batch (first seq, orders without seq, fills, l2, events) as bytes.

Record types (store.wal.format): T_BATCH is the batch header then the four arrays packed, as
they are. T_BATCH_LZ4 (read only, written by format version 1) is ``u32 raw length + lz4
block`` of that. T_BATCH_SHUF (what ``compress=True`` writes for one batch) is ``u32 raw length
+ lz4 block`` of the header and each array byte-shuffled (byte 0 of every row, then byte 1 ...:
blosc's shuffle), which lz4 shrinks to less than half and compresses about twice as fast.
T_BATCH_PARTS is the same batch cut into consecutive parts by seq: ``u32 part count``, then per
part ``u32 raw length, u32 lz4 length, lz4 block`` of a T_BATCH_SHUF raw payload. A part can be
encoded while the engine still matches the rest of its batch (``Session.process``).

Invariants:
- Encoding never depends on padding bytes: arrays go on the wire in their packed form.
- Decoding checks every length, count and claimed size against the bytes that hold it before
  allocating anything for it, and raises ValueError (or struct.error, OverflowError,
  LZ4BlockError) when a payload does not add up; the reader turns that into CorruptionError.
- Decoded arrays are writeable, in the stored dtypes (orders without seq: ORDER_DTYPE), whatever
  the file's version: the narrower order and event rows of versions 1-5 come back widened, the
  fields they lack 0. The row width a count is checked against is the file version's.
"""

from __future__ import annotations

import struct

import lz4.block
import numpy as np

from exsim.store.shuffle import shuffle as _shuffle, unshuffle as _unshuffle
from exsim.store.tables import TABLES, widen_rows
from exsim.store.wal.format import (BATCH, LZ4_ACCELERATION, LZ4_MAX_RATIO, LZ4_MAX_RAW, OUT, PART,
                              RAW_LEN, T_BATCH, T_BATCH_LZ4, T_BATCH_PARTS, T_BATCH_SHUF, VERSION,
                              WIRE, wire as wire_of)

DECODE_ERRORS = (ValueError, OverflowError, struct.error, lz4.block.LZ4BlockError)


def wire_bytes(name: str, arr: np.ndarray) -> np.ndarray:
    """Return the packed rows of ``arr`` (table ``name``) as a flat uint8 array (no copy when
    already packed and contiguous)."""
    wire = WIRE[name]
    if arr.dtype != wire or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr).astype(wire)
    return arr.view(np.uint8).reshape(-1)


def raw_size(orders, fills, l2, events) -> int:
    """Return the size in bytes of the raw (uncompressed) payload of a batch."""
    return BATCH.size + sum(a.size * WIRE[t].itemsize for t, a in zip(TABLES, (orders, fills, l2, events)))


def _shuffled_lz4(first_seq, orders, fills, l2, events, scratch: np.ndarray | None) -> tuple[int, bytes]:
    """Return (raw size, lz4 block) of the T_BATCH_SHUF raw payload of a batch: its header and
    each array byte-shuffled, built in ``scratch`` when it is large enough (uint8)."""
    head = BATCH.pack(first_seq, orders.size, fills.size, l2.size, events.size)
    arrays = [wire_bytes(n, a) for n, a in zip(TABLES, (orders, fills, l2, events))]
    size = len(head) + sum(a.size for a in arrays)
    raw = scratch[:size] if scratch is not None and scratch.size >= size else np.empty(size, np.uint8)
    raw[:len(head)] = np.frombuffer(head, np.uint8)
    pos = len(head)
    for name, a in zip(TABLES, arrays):
        pos = _shuffle(a, WIRE[name].itemsize, raw, pos)
    return size, lz4.block.compress(raw, store_size=False, mode="fast", acceleration=LZ4_ACCELERATION)


def encode_batch(first_seq, orders, fills, l2, events, compress: bool,
                 scratch: np.ndarray | None = None) -> tuple[int, list]:
    """Return (record type, payload pieces); the payload is the concatenation of the pieces.

    ``scratch`` (optional uint8 array of at least the raw payload size) receives the shuffled
    bytes before compression; reusing one spares the page faults of a fresh buffer per record,
    which cost more than the shuffle itself.
    """
    if not compress:
        head = BATCH.pack(first_seq, orders.size, fills.size, l2.size, events.size)
        return T_BATCH, [head] + [wire_bytes(n, a) for n, a in zip(TABLES, (orders, fills, l2, events))]
    size, body = _shuffled_lz4(first_seq, orders, fills, l2, events, scratch)
    return T_BATCH_SHUF, [RAW_LEN.pack(size), body]


class Part(list):
    """One encoded part of a T_BATCH_PARTS record: its bytes-like pieces, and ``counts``, the
    rows of orders, fills, l2 and events it holds (the writer puts their sums in the frame)."""

    counts: tuple = (0, 0, 0, 0)


class PartEncoder:
    """Encodes the parts of a T_BATCH_PARTS record (``WalWriter.append_parts``), one at a time,
    in a reused shuffle buffer. Its ``encode`` releases the GIL for nearly all of its work
    (shuffle kernel, lz4), so parts can be encoded on a thread while the engine matches the next
    ones. One encoder must not be used by two threads at once."""

    def __init__(self):
        self._scratch = np.empty(0, np.uint8)

    def encode(self, first_seq, orders, fills, l2, events) -> Part:
        """Return one part (a ``Part``: bytes-like pieces and row counts) holding this sub-batch."""
        need = raw_size(orders, fills, l2, events)
        if self._scratch.size < need:
            self._scratch = np.empty(need + need // 4, np.uint8)
        size, body = _shuffled_lz4(first_seq, orders, fills, l2, events, self._scratch)
        part = Part([PART.pack(size, len(body)), body])
        part.counts = (orders.size, fills.size, l2.size, events.size)
        return part


def _out_rows(name: str, a: np.ndarray) -> np.ndarray:
    """Rows ``a`` of table ``name`` as decoded from the wire, in their OUT dtype (writeable)."""
    if a.dtype.names != OUT[name].names:   # an older version's narrower rows
        return widen_rows(a, OUT[name])
    return a if a.dtype == OUT[name] and a.flags.writeable else a.astype(OUT[name])


def _rows(rtype: int, payload, wires: dict, pos: int = 0, end: int | None = None) -> tuple[int, list]:
    """Parse one (decompressed) batch payload of type 1 or 3 in payload[pos:end], rows in the
    packed dtypes ``wires`` (store.wal.format.wire of the file's version); return (first seq,
    [orders, fills, l2, events]). Raises ValueError when it does not add up."""
    end = len(payload) if end is None else end
    first_seq, *counts = BATCH.unpack_from(payload, pos)
    pos += BATCH.size
    arrays = []
    src = np.frombuffer(payload, np.uint8)
    for name, n in zip(TABLES, counts):
        wire = wires[name]
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
        arrays.append(_out_rows(name, a))
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


def _decode_parts(payload, wires: dict) -> tuple[int, list]:
    (count,) = RAW_LEN.unpack_from(payload)
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
        seq, arrays = _rows(T_BATCH_SHUF, _lz4(view[pos:pos + comp_n], raw_n), wires)
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


def decode_batch(rtype: int, payload, version: int = VERSION) -> tuple[int, list]:
    """Return (first seq, [orders, fills, l2, events]) of a payload of record type ``rtype`` in
    a WAL file of format ``version`` (its row layouts: store.wal.format.wire); rows come back
    in the OUT dtypes whatever the version, the fields an older version lacks set to 0.

    Raises one of DECODE_ERRORS when the payload does not add up (never allocates more than
    its bytes can hold)."""
    wires = wire_of(version)
    if rtype == T_BATCH_PARTS:
        return _decode_parts(payload, wires)
    if rtype in (T_BATCH_LZ4, T_BATCH_SHUF):
        (n,) = RAW_LEN.unpack_from(payload)
        return _rows(rtype, _lz4(memoryview(payload)[4:], n), wires)
    return _rows(rtype, payload, wires)


def peek_seqs(rtype: int, payload) -> tuple[int, int] | None:
    """Return (first seq, orders) read from the front of an uncompressed (T_BATCH) payload
    without decoding it, or None when the type needs decoding to tell."""
    if rtype == T_BATCH and len(payload) >= BATCH.size:
        return tuple(BATCH.unpack_from(payload)[:2])
    return None


def raw_size_claimed(rtype: int, payload) -> int | None:
    """The raw (uncompressed) bytes a payload's own plain-text fields say its batch holds,
    parts' batch headers included, without decompressing: a T_BATCH payload's length, a
    T_BATCH_LZ4/T_BATCH_SHUF's raw length, the sum of a T_BATCH_PARTS record's part raw
    lengths; None when the payload is too short to say (decoding then finds it bad). Also
    returns the number of batch headers in that size as ``(bytes, headers)``."""
    if rtype == T_BATCH:
        return len(payload), 1
    if rtype in (T_BATCH_LZ4, T_BATCH_SHUF):
        return (RAW_LEN.unpack_from(payload)[0], 1) if len(payload) >= RAW_LEN.size else None
    if len(payload) < RAW_LEN.size:
        return None
    (count,) = RAW_LEN.unpack_from(payload)
    pos, total = RAW_LEN.size, 0
    for _ in range(count):
        if pos + PART.size > len(payload):
            return None
        raw_n, comp_n = PART.unpack_from(payload, pos)
        total += raw_n
        pos += PART.size + comp_n
    return total, count

