"""The column block: its encoding byte, PLAIN, and encoding and decoding a whole block.

A block is one byte naming its encoding, then its body: PLAIN, the values' little-endian bytes
in the column's own width; the others, their fixed header fields (``_FIXED``) and their streams
(FOR: one; DELTA and DOD: first value(s) and gcd, one; RLE and DICT: a u32 count, two).

Encoding (``_encode_block``) is a Python dispatch to a few small kernels, each compiled on its
first call (so a run compiles only the encodings its columns try or use), one kernel call per
block: ``stream._put_stream`` (FOR), ``delta._put_delta``, ``rle._put_rle``,
``dictionary._put_dict`` (after ``_dict_index``); PLAIN is one numpy cast. Blocks go into a reused per-thread buffer
(``encode_view``; ``encode``/``encode_u64`` copy it out): stream parameters in one pass, then
the body packed, shuffled or stored in place (no whole-column temporaries except the
differences / runs / dictionary keys of DELTA, DOD, RLE and DICT, which go to a reused scratch
array). ``compile_all`` compiles every kernel ahead (``exsim warmup``).

Decoding parses every header in Python (``_Reader``) and then runs one kernel, which writes
each final value straight into the output column in its own width (``decode(..., out=)`` may
supply it). ``constant`` answers "is every row the same value" from a PLAIN or FOR block without
decoding it; ``max_block_len`` bounds a block's length before anything is read.

Invariants: the Python functions assemble and parse headers and call kernels or whole-array
numpy; no per-row Python. A block
read back is hostile: ``decode`` checks every length, count and width against the block and the
row count before it allocates or calls a kernel, and the decoding kernels (which have no bounds
checks) check each run length and dictionary index before writing; any failure is a
CorruptionError. This module compiles no kernel of its own, so it needs no cache guard. Byte layouts are in docs/formats.md ("Column block").
"""

from __future__ import annotations

import struct
import threading

import numpy as np
from exsim.exchange.errors import CorruptionError
from exsim.store.codecs.arith import _SIGN, _U0
from exsim.store.codecs.columns import _as_u64
from exsim.store.codecs.delta import _dec_delta, _put_delta
from exsim.store.codecs.dictionary import _dec_dict, _dict_index, _put_dict
from exsim.store.codecs.rle import _dec_rle, _put_rle
from exsim.store.codecs.stream import _STREAM_HEAD, PACKED, SHUFFLE_FLAG, _dec_for, _put_stream

__all__ = ["PLAIN", "FOR", "DELTA", "DOD", "RLE", "DICT", "ENCODINGS", "ENCODING_NAMES", "encode",
           "encode_u64", "encode_view", "decode", "constant", "max_block_len", "compile_all"]

PLAIN, FOR, DELTA, DOD, RLE, DICT = 0, 1, 2, 3, 4, 5
ENCODINGS = (PLAIN, FOR, DELTA, DOD, RLE, DICT)
ENCODING_NAMES = {PLAIN: "plain", FOR: "for", DELTA: "delta", DOD: "dod", RLE: "rle", DICT: "dict"}

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def _encode_block(u, enc, aligned, flip, itemsize, out, tmp):
    """Write the block of column u (contiguous unsigned bit patterns; flip: the sign bit for
    signed columns, itemsize: the column's width) in encoding ``enc`` and stream layout
    ``aligned`` at out[0:]; returns its length, or -1 for an unknown encoding. out holds at
    least 16 * u.size + 64 bytes, tmp (scratch) at least 2 * u.size values.

    Why Python dispatching to one small kernel per encoding, and not one kernel for all: a
    kernel is compiled on its first call, so a run compiles only what its encodings use, and
    each small kernel types far faster than one big one inlining them all (a cold seal and
    read compiled ~54 s of CPU as one kernel with numba-level inlining). The kernels do the
    per-row work; the calls cost microseconds per block."""
    n = u.size
    out[0] = enc
    if enc == PLAIN:
        # the bit patterns truncated to the column's width (a modular cast, as the kernels'
        # np.uintN(value) is), little-endian like every stored word
        np.copyto(out[1:1 + itemsize * n].view(_UNSIGNED[itemsize]), u, casting="unsafe")
        return 1 + itemsize * n
    if enc == FOR:
        return _put_stream(u, flip, aligned, out, 1)
    if enc == DELTA or enc == DOD:
        return _put_delta(u, 1 if enc == DELTA else 2, aligned, out, 1, tmp)
    if enc == RLE:
        nr, end = _put_rle(u, flip, aligned, out, 5, tmp)
        _U32.pack_into(out, 1, nr)
        return end
    if enc == DICT:
        # why the keys into tmp's upper half: one contiguous uint64 input whatever the column's
        # width (its indexes go to the lower half)
        keys = tmp[n:2 * n]
        np.copyto(keys, u, casting="unsafe")   # zero-extends: u is unsigned
        keys ^= flip
        uniq = _dict_index(keys, tmp[:n])
        _U32.pack_into(out, 1, uniq.size)
        return _put_dict(uniq, tmp[:n], PACKED, aligned, out, 5)
    return -1


class _Reader:
    """Cursor over an encoded block; every overrun is a CorruptionError."""

    def __init__(self, buf: bytes, where: str):
        self.buf = memoryview(buf)
        self.pos = 0
        self.where = where

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptionError(f"{self.where}: column block ends early (need {n} bytes at "
                                  f"block offset {self.pos})", self.where, self.pos)
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def end(self) -> None:
        """Raise CorruptionError unless every byte of the block was taken."""
        if self.pos != len(self.buf):
            raise CorruptionError(f"{self.where}: {len(self.buf) - self.pos} trailing bytes after "
                                  f"column block", self.where, self.pos)

    def stream(self, n: int) -> tuple:
        """The next stream of n values as kernel arguments (body bytes, width, shuffled, min,
        gcd); raises CorruptionError on a bad header or a short body."""
        mn, g, wbyte = _STREAM_HEAD.unpack(self.take(_STREAM_HEAD.size))
        width, shuffled = wbyte & ~SHUFFLE_FLAG, bool(wbyte & SHUFFLE_FLAG)
        if width > 64 or g == 0 or (shuffled and width not in (16, 32, 64)):
            raise CorruptionError(f"{self.where}: bad stream header (width byte {wbyte}, gcd {g})",
                                  self.where, self.pos)
        raw = np.frombuffer(self.take((n * width + 7) // 8), np.uint8)
        raw.flags.writeable = False   # why: one compiled kernel variant whatever the buffer type
        return raw, width, shuffled, np.uint64(mn), np.uint64(g)


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def encode(col: np.ndarray, encoding: int, aligned: int = PACKED) -> bytes:
    """Encode a 1-D integer column with the given encoding.

    ``aligned``: PACKED (0/False) bit-packs at the exact width; ALIGNED (1/True) rounds widths up
    to 8, 16, 32 or 64 bits (better input for lz4/zstd); SHUFFLED (2) also stores such values
    as byte planes. Each stream records its layout, so decoding needs no argument. Returns the block bytes (first byte:
    the encoding). Raises ValueError for a non-integer column or an unknown encoding.
    """
    if col.ndim != 1 or col.dtype.kind not in "iu":
        raise ValueError(f"only 1-D integer columns are encodable, got {col.dtype} ndim {col.ndim}")
    return encode_u64(_as_u64(col), col.dtype, encoding, aligned)


def encode_u64(u: np.ndarray, dtype: np.dtype, encoding: int, aligned: int = PACKED) -> bytes:
    """``encode`` of a column already given as its uint64 bit patterns ``u`` (see gather_u64;
    or as a field view, see ``encode_view``);
    ``dtype`` is the column's own dtype (signedness, and the width PLAIN stores). Returns the
    block bytes; raises ValueError for an unknown encoding."""
    return bytes(encode_view(u, dtype, encoding, aligned))


_local = threading.local()


def encode_view(u: np.ndarray, dtype: np.dtype, encoding: int, aligned: int = PACKED) -> memoryview:
    """``encode_u64`` without the copy: the block as a memoryview of this thread's reused
    buffer, valid until the next encode on this thread (copy it, compress it or checksum it
    before then). ``u`` is a 1-D integer array: uint64 bit patterns, or the column in a width
    of its own (e.g. a ``split_u64`` column), read as the bit patterns of its values (signed
    ones sign-extended; those, and strided columns, are first copied to uint64). Raises ValueError for an unknown encoding or a
    column that is not a 1-D integer array."""
    dtype = np.dtype(dtype)
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding}")
    if u.ndim != 1 or u.dtype.kind not in "iu" or u.dtype.itemsize not in (1, 2, 4, 8):
        raise ValueError(f"encode_view takes a 1-D integer column (uint64 bit patterns or a field "
                         f"view), got {u.dtype} ndim {u.ndim}")
    if u.dtype.kind == "i" or not u.flags.c_contiguous:
        # why a uint64 copy (or view) for these: the kernels are compiled for contiguous
        # unsigned columns only (each further column type is another compiled variant)
        u = _as_u64(u)
    n = u.size
    bufs = getattr(_local, "bufs", None)
    if bufs is None or bufs[1].size < 2 * n:
        # why reused and grown by a quarter: fresh pages fault on first write, and a seal
        # encodes ~40 columns of similar length in a row
        m = 2 * n + n // 2 + 1024
        bufs = _local.bufs = (np.empty(8 * m + 64, np.uint8), np.empty(m, np.uint64))
    size = _encode_block(u, encoding, aligned, _SIGN if dtype.kind == "i" else _U0,
                         dtype.itemsize, bufs[0], bufs[1])
    return memoryview(bufs[0])[:size]


# the fixed bytes in front of each encoding's streams (encoding byte included), and its streams
_FIXED = {FOR: (1, 1), DELTA: (17, 1), DOD: (25, 1), RLE: (5, 2), DICT: (5, 2)}


def max_block_len(encoding: int, n: int, itemsize: int) -> int:
    """The most bytes a valid block of ``encoding`` holding ``n`` values of ``itemsize`` bytes
    can have (its exact length for PLAIN): the bound a reader checks a block's declared length
    against before decompressing or allocating anything. Every stream of m <= n values holds at
    most 8 bytes per value plus its 17-byte header (run and dictionary counts never exceed n).
    Returns -1 for an unknown encoding."""
    if encoding == PLAIN:
        return 1 + n * itemsize
    if encoding not in _FIXED:
        return -1
    fixed, streams = _FIXED[encoding]
    return fixed + streams * (_STREAM_HEAD.size + 8 * n)


def constant(block: bytes, n: int, dtype: np.dtype, where: str = "") -> int | None:
    """The value every one of the ``n`` rows of a block made by ``encode`` holds, or None when
    they differ or the block is neither PLAIN nor FOR (a constant column of another encoding is
    not recognised: None). A FOR block answers from its stream header (width 0: every row is
    its minimum), a PLAIN one from comparing its values; nothing is decoded. Raises as
    ``decode`` for a block ``decode`` would refuse (its header and length are checked the same
    way): CorruptionError naming ``where``, ValueError if ``dtype`` is not a 1, 2, 4 or 8-byte
    integer type."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or dtype.itemsize not in _UNSIGNED:
        raise ValueError(f"constant: {dtype} is not a 1, 2, 4 or 8-byte integer type")
    r = _Reader(block, where)
    enc = r.take(1)[0] if n > 0 else None
    if enc == PLAIN:
        vals = np.frombuffer(r.take(n * dtype.itemsize), dtype.newbyteorder("<"))
    elif enc == FOR:
        _, width, _, mn, _ = r.stream(n)
    else:
        return None
    r.end()
    if enc == PLAIN:
        return int(vals[0]) if (vals == vals[0]).all() else None
    if width != 0:
        return None
    flip = _SIGN if dtype.kind == "i" else _U0
    # the value as decode writes it: the key un-flipped, its bit pattern truncated to the
    # column's width, read as the column's type
    bits = np.array([mn ^ flip], np.uint64).astype(_UNSIGNED[dtype.itemsize])
    return int(bits.view(dtype)[0])


def decode(block: bytes, n: int, dtype: np.dtype, where: str = "", out: np.ndarray | None = None
           ) -> np.ndarray:
    """Decode a block made by ``encode`` into an array of ``n`` values of ``dtype``.

    ``where`` names the file and column for error messages. ``out`` (optional): a writable,
    contiguous 1-D array of ``n`` values of ``dtype`` to decode into (no allocation); it is
    returned. Returns a new array otherwise. Raises CorruptionError naming ``where`` if the
    block is malformed (unknown encoding, too short or too long for ``n`` values, a bad stream
    width or gcd, run or dictionary counts above ``n``, run lengths that do not add up to ``n``,
    indexes out of range); ValueError if ``n`` is negative, ``dtype`` is not a 1, 2, 4 or
    8-byte integer type, or ``out`` does not fit.

    Every length, count and width is checked against the block and ``n`` (Python integers:
    no overflow) before the output is allocated or a kernel runs; what only a kernel can see
    (each run length, each dictionary index) it checks before writing and reports by returning
    False, which becomes the CorruptionError.
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or dtype.itemsize not in _UNSIGNED:
        raise ValueError(f"decode: {dtype} is not a 1, 2, 4 or 8-byte integer type")
    if n < 0:
        raise ValueError(f"decode: negative row count {n}")
    if out is not None and (out.dtype != dtype or out.shape != (n,) or not out.flags.c_contiguous
                            or not out.flags.writeable):
        raise ValueError(f"decode: out must be a writable contiguous array of {n} {dtype}, got "
                         f"{out.shape} {out.dtype}")
    flip = _SIGN if dtype.kind == "i" else _U0
    r = _Reader(block, where)
    enc = r.take(1)[0]
    # parse every header and take every stream's body first: a block too short or too long
    # for n values fails here, before n values are allocated
    if enc == PLAIN:
        body = r.take(n * dtype.itemsize)
    elif enc == FOR:
        streams = (r.stream(n),)
    elif enc == DELTA:
        first, g = r.u64(), r.u64()
        streams = (r.stream(max(n - 1, 0)),)
    elif enc == DOD:
        first, d0, g = r.u64(), r.u64(), r.u64()
        streams = (r.stream(max(n - 2, 0)),)
    elif enc == RLE:
        nr = r.u32()
        if nr > n or (nr == 0) != (n == 0):
            # why: every run holds at least one row (the encoder writes no empty run)
            raise CorruptionError(f"{where}: {nr} runs for {n} rows", where, 1)
        streams = (r.stream(nr), r.stream(nr))
    elif enc == DICT:
        nd = r.u32()
        if nd > n or (nd == 0) != (n == 0):
            raise CorruptionError(f"{where}: dictionary of {nd} values for {n} rows", where, 1)
        streams = (r.stream(nd), r.stream(n))
    else:
        raise CorruptionError(f"{where}: unknown column encoding {enc}", where, 0)
    r.end()
    if out is None:
        out = np.empty(n, dtype)
    # why an unsigned view: kernels write uint64 bit patterns, truncated to the column's width
    dst = out.view(_UNSIGNED[dtype.itemsize])
    if enc == PLAIN:
        dst[:] = np.frombuffer(body, dst.dtype.newbyteorder("<"))
    elif enc == FOR:
        _dec_for(*streams[0], flip, dst)
    elif enc == DELTA:
        _dec_delta(*streams[0], np.uint64(first), _U0, np.uint64(g), 1, dst)
    elif enc == DOD:
        _dec_delta(*streams[0], np.uint64(first), np.uint64(d0), np.uint64(g), 2, dst)
    elif enc == RLE:
        if not _dec_rle(*streams[0], *streams[1], nr, flip, dst):
            raise CorruptionError(f"{where}: run lengths do not add up to {n} rows (a run is "
                                  f"empty, runs past the column or they end short)", where, r.pos)
    elif not _dec_dict(*streams[0], nd, *streams[1], flip, dst):
        raise CorruptionError(f"{where}: dictionary index out of range (dictionary of {nd} "
                              f"values)", where, r.pos)
    return out


def compile_all() -> None:
    """Compile (or load from numba's cache) every encoding and decoding kernel for every column
    type the store passes them: each encoding and layout of a uint8 and a uint64 column (the
    types ``split_u64`` and ``gather_u64`` give the encoders), decoded into each of the four
    column widths. A kernel otherwise compiles on its first call, when a block first uses its
    encoding (``exsim warmup`` calls this to compile them all ahead). Returns None; raises
    AssertionError if a block does not round-trip (a broken install)."""
    rng = np.random.default_rng(0)
    # runs of a few small values: every encoding's streams have a width of 1-8 bits, and the
    # wide column adds bit-packed widths above 8 and the shuffled byte planes
    small = np.repeat(rng.integers(0, 9, 600), rng.integers(1, 4, 600))[:1000]
    wide = (small.astype(np.int64) << 40) + np.arange(small.size) * 3
    for col in (small.astype(np.uint8), wide.astype(np.uint64)):
        for enc in ENCODINGS:
            for aligned in (PACKED, 1, 2):
                block = bytes(encode_view(col, col.dtype, enc, aligned))
                # (a PLAIN block holds the column's own width, and decodes without a kernel)
                for dtype in ((col.dtype,) if enc == PLAIN else _UNSIGNED.values()):
                    got = decode(block, col.size, dtype)
                    assert np.array_equal(got, col.astype(dtype)), (enc, aligned, dtype)
