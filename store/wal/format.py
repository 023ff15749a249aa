"""The WAL's on-disk format: magic, versions, record types, frame and batch structs, limits.

A WAL file is a 16-byte file header (``FILE_HEADER``: magic ``EXWL``, version, reserved, file
number) followed by records. How a record is framed depends on the file's version:

- versions 1-3 (read only): ``FRAME`` ``u32 length | u32 crc32c(type + payload) | u8 type``
  then ``u32 crc32c`` of those 9 bytes (``HCRC``), then the payload;
- versions 4-6 (6 written today): ``FRAME4`` ``u32 length | u32 crc32c(type + payload) | u8 type |
  i64 first seq | i64 last seq | u32 rows of orders, fills, l2, events`` then ``u32 crc32c`` of
  those 41 bytes, then the payload. The header says which seqs and how many rows the record
  holds, so a scan that only needs the seq range (``scan_wal(after_seq=)``, recovery's
  continuity check) reads 45 bytes per record instead of decompressing its payload.

The payload is a batch: ``BATCH`` (first seq, row counts of orders, fills, l2, events), then
the four arrays packed (no padding), in that order; record types say how it is encoded
(store.wal.payload). Rows are the schema dtypes packed in version 6 files (orders 78 bytes,
events 55); older versions hold a prefix of them (``wire(version)``, store.tables): orders
``LEGACY_ORDER_DTYPE`` (45 bytes) in versions 1-4 and ``ORDER_V5_DTYPE`` (77) in version 5,
events ``LEGACY_EVENT_DTYPE`` (46) in versions 1-5. The readers widen those with zeros in the
fields added since. Byte layout: docs/formats.md.

Invariants:
- A version-4 header is checked before anything is read through it (last seq is first seq +
  orders - 1), and a payload that is decoded must agree with it (first seq and all four counts).
- Seqs stay in [1, SEQ_LIMIT): int64 arithmetic on them never wraps.

Why the header checksum (not in LevelDB's frame): a flipped bit in a length field would
otherwise make a record look like it runs past the end of the file, i.e. look like a crash
tail, and recovery would silently drop every acknowledged record after it.
"""

from __future__ import annotations

import struct

from exsim.exchange.schema import TABLE_DTYPES
from exsim.store.tables import (LEGACY_EVENT_DTYPE, LEGACY_ORDER_DTYPE, ORDER_V5_DTYPE, STORED_DTYPES,
                          TABLES, packed)

MAGIC = b"EXWL"
# 2 added record type 3, 3 type 4, 4 the seq range and row counts in the frame, 5 the order
# fields stop_price, display_qty, min_qty and expire_ts (77-byte order rows instead of 45), 6 the
# order field phase and the event fields price and phase (78-byte orders, 55-byte events)
VERSION = 6
READ_VERSIONS = (1, 2, 3, 4, 5, 6)
FILE_HEADER = struct.Struct("<4sHHQ")     # magic, version, reserved, file number
FRAME = struct.Struct("<IIB")             # versions 1-3: length, crc32c(type + payload), type
FRAME4 = struct.Struct("<IIBqqIIII")      # versions 4-6: FRAME + first seq, last seq, 4 row counts
HCRC = struct.Struct("<I")                # crc32c of the frame bytes before it
FRAME_SIZE = FRAME.size + HCRC.size       # 13
FRAME4_SIZE = FRAME4.size + HCRC.size     # 45
BATCH = struct.Struct("<qIIII")           # first seq, n orders, n fills, n l2, n events
PART = struct.Struct("<II")               # a type-4 part: raw length, lz4 block length
RAW_LEN = struct.Struct("<I")             # raw length before an lz4 block (types 2, 3)
T_BATCH, T_BATCH_LZ4, T_BATCH_SHUF, T_BATCH_PARTS = 1, 2, 3, 4
RECORD_TYPES = (T_BATCH, T_BATCH_LZ4, T_BATCH_SHUF, T_BATCH_PARTS)
MIN_VERSION = {T_BATCH_SHUF: 2, T_BATCH_PARTS: 3}   # the file version that introduced a type
INDEXED_VERSION = 4                       # the first file version whose frames carry FRAME4
WIDE_ORDERS_VERSION = 5                   # the first file version whose order rows are ORDER_V5_DTYPE
PHASE_VERSION = 6                         # the first whose orders and events are the schema's
# why 8: on the seeded 1M flow, session with fsync per batch, 10 interleaved rounds: 0.973x the
# process CPU and 0.973x the wall time of acceleration 1 (paired medians), for 29.7 instead of
# 28.5 WAL bytes per message; the lz4 call alone costs 0.78x (the byte shuffle is untouched).
# Readers need nothing: acceleration only changes how hard the compressor searches.
LZ4_ACCELERATION = 8
# why these bounds: lz4 writes at most 255 bytes of output per input byte (a match length grows
# by 255 per extension byte), and its block API takes at most LZ4_MAX_INPUT_SIZE bytes, so a
# claimed raw size outside them is corrupt; checked before the decompressor allocates it
LZ4_MAX_RATIO = 255
LZ4_MAX_RAW = 0x7E000000
SEQ_LIMIT = 1 << 62   # seqs stay below it (replay's SEQ_MAX): int64 arithmetic on them never wraps
# Wire forms (what VERSION writes): the schema dtypes packed; orders without seq (it is implied
# by the first seq). OUT: the dtypes decoded rows come back in, whatever the file's version.
WIRE = {"orders": packed(TABLE_DTYPES["orders"]), **{t: packed(STORED_DTYPES[t]) for t in TABLES[1:]}}
# the wire forms of older versions: {first version: WIRE of versions from it up to the next}
_OLD_WIRES = {1: {**WIRE, "orders": LEGACY_ORDER_DTYPE, "events": LEGACY_EVENT_DTYPE},
              WIDE_ORDERS_VERSION: {**WIRE, "orders": ORDER_V5_DTYPE, "events": LEGACY_EVENT_DTYPE}}
OUT = {"orders": TABLE_DTYPES["orders"], **{t: STORED_DTYPES[t] for t in TABLES[1:]}}
WIRE_SIZES = tuple(WIRE[t].itemsize for t in TABLES)


def lacks(version: int, table: str) -> tuple:
    """Return the fields of ``table``'s decoded rows (OUT) that records of a WAL file of format
    ``version`` do not hold (read as 0), in field order; () for the current version."""
    held = wire(version)[table].names
    return tuple(n for n in OUT[table].names if n not in held)


def wire(version: int) -> dict:
    """Return {table: packed row dtype} of the records of a WAL file of format ``version``
    (one of READ_VERSIONS; older versions' rows are a prefix of today's, see store.tables)."""
    if version >= PHASE_VERSION:
        return WIRE
    return _OLD_WIRES[WIDE_ORDERS_VERSION if version >= WIDE_ORDERS_VERSION else 1]
