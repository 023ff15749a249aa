"""The encoders' bytes are pinned: every encoding and layout of a seeded corpus of columns
hashes to the digest the encoders wrote at b81b285 (one numba kernel per block, before the
encoders were split into small kernels dispatched from Python).

A change of block bytes changes every segment file written afterwards (tests/golden covers a
few runs; this corpus covers every encoding, layout and column width, the edge sizes and both
dictionary paths). If a change of bytes is intended, say why in the commit, and update
docs/formats.md and the digest.
"""

import hashlib

import numpy as np

from exsim.store.codecs import ENCODINGS, PACKED, ALIGNED, SHUFFLED, decode, encode, encode_view
from exsim.store.codecs.columns import split_u64

# sha256 over the corpus's blocks, written by the encoders at b81b285
PINNED = "93b414a8734a0d73c6f02e2fee2f68f1a7e3d9ac32f7a8ddfde8f30a4ababdef"
DTYPES = (np.int64, np.uint64, np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8)


def _columns(dtype):
    """Seeded columns of ``dtype``: edge sizes, constant, narrow and wide ranges, steps,
    timestamps, runs, low cardinality over a wide range (the dictionary's sorted path), and
    the type's extremes."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(int(info.bits) * 2 + (info.min < 0))
    lo, hi = int(info.min), int(info.max)
    wide = rng.integers(lo, hi, 6000, dtype=dtype, endpoint=True)
    yield from (np.zeros(0, dtype), np.array([hi], dtype), np.array([lo, hi], dtype),
                np.array([hi, lo, 0], dtype))
    yield np.full(3000, lo, dtype)
    yield rng.integers(0, min(hi, 100), 5000, dtype=dtype)
    yield wide
    yield np.sort(wide)
    yield (np.arange(5000) * 3 + 7).astype(dtype)                          # a constant step
    yield np.cumsum(rng.integers(0, 5, 5000)).astype(dtype)                 # a slow counter
    yield (np.cumsum(rng.integers(990, 1010, 5000)) * 1000).astype(dtype)  # timestamps
    yield np.repeat(rng.integers(lo, hi, 300, dtype=dtype, endpoint=True), rng.integers(1, 40, 300))
    yield wide[rng.integers(0, 50, 9000)]                                  # 50 wide values
    yield np.where(rng.random(5000) < 0.5, lo, hi).astype(dtype)


def _blocks():
    for dtype in DTYPES:
        for col in _columns(dtype):
            for enc in ENCODINGS:
                for aligned in (PACKED, ALIGNED, SHUFFLED):
                    yield col, enc, aligned, encode(col, enc, aligned)


def test_every_encoding_writes_the_pinned_bytes_and_reads_them_back():
    h = hashlib.sha256()
    for col, enc, aligned, block in _blocks():
        h.update(block)
        assert np.array_equal(decode(block, col.size, col.dtype), col), (col.dtype, enc, aligned)
    assert h.hexdigest() == PINNED


def test_a_narrow_split_column_encodes_as_its_uint64_bit_patterns_do():
    # split_u64 keeps uint8 fields narrow; the encoders read them at their own width
    rows = np.zeros(5000, [("side", np.uint8), ("qty", np.int64)])
    rows["side"] = np.random.default_rng(1).integers(0, 3, rows.size)
    cols = split_u64([rows], ["side"])
    assert cols["side"].dtype == np.uint8
    for enc in ENCODINGS:
        for aligned in (PACKED, ALIGNED, SHUFFLED):
            narrow = bytes(encode_view(cols["side"], np.uint8, enc, aligned))
            assert narrow == encode(rows["side"], enc, aligned)


def test_compile_all_round_trips_every_encoding_into_every_width():
    # exsim warmup's way of compiling every encoder and decoder ahead: it must not fail on a
    # healthy install (it raises AssertionError if a block does not round-trip)
    from exsim.store.codecs import compile_all
    assert compile_all() is None
