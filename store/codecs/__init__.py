"""Column encodings: integer columns to compact bytes and back, as numba kernels.

Every stored column is an integer column (int64/uint64 and narrower ints: prices, quantities,
ids, timestamps, enum codes). A column is handled as the uint64 bit pattern of its values, so
all arithmetic wraps modulo 2**64 and every encoding round-trips every value, int64 and uint64
extremes included.

Encodings (the first byte of an encoded block names it):

- PLAIN  the values' little-endian bytes in the column's own width.
- FOR    frame of reference: (key - min) / gcd, bit-packed at the width of the largest quotient.
         ``key`` is the value with its sign bit flipped for signed columns, so min/max follow the
         signed order.
- DELTA  first value, then the differences divided by their GCD, zigzagged and bit-packed.
- DOD    delta-of-delta (timestamps): first value, first delta, then the second differences
         divided by their GCD, zigzagged and bit-packed.
- RLE    run values and run lengths, each as a FOR stream.
- DICT   the sorted distinct values as a FOR stream, then each row's index bit-packed.

Every bit-packed stream has one of three layouts (``PACKED`` exact width, ``ALIGNED`` width
rounded up to whole bytes, ``SHUFFLED`` aligned and stored as byte planes: flag 0x80 in its width
byte); the block is the same otherwise, and decoding reads the layout from the stream.

Which encoding and layout a column gets is decided in store/choice.py (``choose``, ``Chooser``:
smallest after compression, searched on a sample, remembered), which builds on this package.

Modules, one concept each; each imports only modules above it in this list, so there is no
import circle:

- ``arith``       uint64 bit patterns (``_ld``), gcd and exact division by multiplication.
- ``columns``     columns in: fields and columns to contiguous bit patterns (``split_u64``,
                  ``gather_u64``, ``seq_u64``, ``take_u64``).
- ``stream``      the FOR stream every encoding is built of, its three layouts, written and read.
- ``delta``       DELTA and DOD.
- ``rle``         RLE.
- ``dictionary``  DICT.
- ``block``       the block: encoding byte, PLAIN, ``encode``/``encode_view``, ``decode``,
                  ``constant``, ``max_block_len``, ``compile_all``.

Invariants: kernels are ``@njit(cache=True, nogil=True)`` with no object mode, small, and
call one another as plain calls (no ``inline="always"``: numba-level inlining multiplied
their typing cost; LLVM may still inline the small helpers, and the decoders measured as
fast as the inlined ones in one process, interleaved); each compiles on its first
call. The Python wrappers assemble and parse headers and call kernels or whole-array numpy;
no per-row Python. A block read back is hostile:
``decode`` checks every length, count and width against the block and the row count before it
allocates or calls a kernel, and the decoding kernels (which have no bounds checks) check each
run length and dictionary index before writing; any failure is a CorruptionError. Every module
whose kernels call another module's njit code names it in its cache guard
(exchange._cache_guard). Byte layouts are in docs/formats.md ("Column block").
"""

from __future__ import annotations

from exsim.store.codecs.block import (DELTA, DICT, DOD, ENCODING_NAMES, ENCODINGS, FOR, PLAIN, RLE,
                                      compile_all, constant, decode, encode, encode_u64,
                                      encode_view, max_block_len)
from exsim.store.codecs.columns import gather_u64, seq_u64, split_u64, take_u64
from exsim.store.codecs.stream import ALIGNED, PACKED, SHUFFLE_FLAG, SHUFFLED

# why these private names too: store/segment.py checks block lengths against the block layout
# (``codecs._FIXED``, ``codecs._STREAM_HEAD``) for all of a segment's blocks at once, and the
# tests compare ``codecs._as_u64`` with the split columns
from exsim.store.codecs.block import _FIXED
from exsim.store.codecs.columns import _as_u64
from exsim.store.codecs.stream import _STREAM_HEAD

__all__ = [
    "PLAIN", "FOR", "DELTA", "DOD", "RLE", "DICT", "ENCODINGS", "ENCODING_NAMES",
    "PACKED", "ALIGNED", "SHUFFLED", "SHUFFLE_FLAG", "encode", "encode_u64", "encode_view",
    "decode", "constant", "gather_u64", "split_u64", "seq_u64", "take_u64", "max_block_len",
    "compile_all",
]
