"""Round trips for every column encoding on adversarial columns, and the choice logic."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from exsim.exchange.errors import CorruptionError
from exsim.store import codecs
from exsim.store.choice import Chooser, choose
from exsim.store.codecs import ALIGNED, ENCODINGS, PACKED, SHUFFLED, decode, encode

DTYPES = [np.int64, np.uint64, np.int32, np.uint32, np.uint8]


def _adversarial(dtype):
    """Columns hypothesis builds: random, constant, alternating extremes, runs, sorted."""
    info = np.iinfo(dtype)
    elems = st.integers(int(info.min), int(info.max))
    arrays = hnp.arrays(dtype, st.integers(0, 300), elements=elems)
    extremes = st.lists(st.sampled_from([int(info.min), int(info.max), 0, 1, -1 if info.min < 0 else 2]),
                        max_size=50).map(lambda xs: np.array(xs, dtype))
    constant = st.tuples(elems, st.integers(0, 200)).map(lambda t: np.full(t[1], t[0], dtype))
    alternating = st.tuples(elems, elems, st.integers(0, 200)).map(
        lambda t: np.array([t[0], t[1]] * t[2], dtype))
    runs = st.lists(st.tuples(elems, st.integers(1, 40)), max_size=20).map(
        lambda rs: np.array([v for v, k in rs for _ in range(k)], dtype))
    return st.one_of(arrays, extremes, constant, alternating, runs, arrays.map(np.sort))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=100, deadline=None)
@given(data=st.data(), aligned=st.sampled_from([PACKED, ALIGNED, SHUFFLED]))
def test_every_encoding_round_trips_adversarial_columns(dtype, encoding, data, aligned):
    col = data.draw(_adversarial(dtype))
    out = decode(encode(col, encoding, aligned), col.size, col.dtype)
    assert out.dtype == col.dtype
    assert np.array_equal(out, col)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_empty_and_single_row_columns_round_trip(encoding):
    for col in (np.array([], np.int64), np.array([np.iinfo(np.int64).min]), np.array([2**64 - 1], np.uint64)):
        assert np.array_equal(decode(encode(col, encoding), col.size, col.dtype), col)


def test_choose_picks_the_smallest_candidate():
    col = np.arange(0, 10_000 * 7, 7, dtype=np.int64)
    enc, _, blob = choose(col)
    assert len(blob) == min(len(encode(col, e)) for e in ENCODINGS)
    assert enc in (codecs.DELTA, codecs.DOD)


def test_timestamps_at_a_fixed_rate_prefer_delta_of_delta():
    ts = 1_700_000_000_000_000_000 + np.arange(5000, dtype=np.int64) * 1_000 + (np.arange(5000) % 2)
    enc, _, blob = choose(ts)
    assert len(blob) < 5000 * 2


def test_chooser_reuses_its_choice_until_the_data_changes():
    ch = Chooser(research_every=100)
    rng = np.random.default_rng(0)
    for _ in range(5):
        ch.encode(("l2", "side"), rng.integers(0, 2, 1000).astype(np.uint8))
    assert ch.searches == 1
    ch.encode(("l2", "side"), rng.integers(0, 255, 1000).astype(np.uint8))  # much worse: re-search
    assert ch.searches == 2


def test_a_short_last_block_does_not_replace_the_choice_of_full_blocks():
    # a segment's last block holds a few rows: its bytes per row are mostly headers, so a
    # choice made on it (PLAIN wins on 2 rows) must not carry over to the next full blocks
    ch = Chooser()
    rng = np.random.default_rng(3)
    seqs = np.cumsum(rng.integers(0, 3, 5 * 16_384)).astype(np.int64) + 1_000_000
    full = [seqs[i * 16_384:(i + 1) * 16_384] for i in range(5)]
    enc0, _, _ = ch.encode(("l2", "seq", 1), full[0])
    assert enc0 != codecs.PLAIN
    searches = ch.searches
    tail = np.array([seqs[-1] + 5, seqs[-1] + 9_000_000], np.int64)
    enc_tail, block, _ = ch.encode(("l2", "seq", 1), tail)
    assert enc_tail == enc0 and np.array_equal(decode(block, 2, np.int64), tail)
    for col in full[1:]:
        enc, block, _ = ch.encode(("l2", "seq", 1), col)
        assert enc == enc0 and np.array_equal(decode(block, col.size, np.int64), col)
    assert ch.searches == searches


def test_a_choice_made_on_short_columns_is_searched_again_for_a_full_one():
    ch = Chooser()
    seqs = np.arange(20_000, dtype=np.int64) * 3
    ch.encode("seq", seqs[:2])                     # no full column seen yet: searched
    assert ch.searches == 1
    ch.encode("seq", seqs[:3])                     # a short column reuses the short choice
    assert ch.searches == 1
    enc, _, _ = ch.encode("seq", seqs)             # the first full column searches afresh
    assert ch.searches == 2 and enc in (codecs.DELTA, codecs.DOD)
    assert "seq" not in str(Chooser().state())
    assert list(ch.state().values())[0][0] == enc


def test_chooser_blocks_stay_the_callers_after_later_encodes():
    ch = Chooser()
    a = np.arange(1000, dtype=np.int64)
    ch.encode("k", a)                              # searches
    _, block, comp = ch.encode("k", a)             # remembered choice: the reused-buffer path
    kept = bytes(block), bytes(comp)
    ch.encode("k", a * 7 + 3)
    assert (bytes(block), bytes(comp)) == kept
    assert isinstance(block, bytes)


def test_truncated_block_raises_corruption_error_naming_the_place():
    blob = encode(np.arange(100, dtype=np.int64) * 3, codecs.FOR)
    with pytest.raises(CorruptionError, match="seg.x:price"):
        decode(blob[:-3], 100, np.int64, where="seg.x:price")


def test_unknown_encoding_byte_is_corruption():
    with pytest.raises(CorruptionError):
        decode(b"\x09" + bytes(8), 1, np.int64)


def test_ranking_by_compressed_size_may_prefer_byte_aligned_blocks():
    import zstandard

    zc = zstandard.ZstdCompressor(level=9).compress
    col = np.tile(np.array([3, 900, 17, 4000, 5], np.int64), 2000)
    enc, aligned, blob = choose(col, compress=zc)
    assert len(zc(blob)) <= min(len(zc(encode(col, e))) for e in ENCODINGS)
    assert np.array_equal(decode(blob, col.size, col.dtype), col)


def test_shuffled_streams_store_byte_planes_and_round_trip():
    col = np.arange(0, 3000 * 70001, 70001, dtype=np.int64)   # keys / gcd need 12 bits -> 16
    blob = encode(col, codecs.FOR, SHUFFLED)
    assert blob[1 + 16] == 16 | codecs.SHUFFLE_FLAG             # width byte after min and gcd
    assert np.array_equal(decode(blob, col.size, col.dtype), col)
    assert len(blob) == len(encode(col, codecs.FOR, ALIGNED))


def test_shuffle_flag_on_an_unaligned_width_is_corruption():
    blob = bytearray(encode(np.arange(100, dtype=np.int64), codecs.FOR, PACKED))
    blob[1 + 16] |= codecs.SHUFFLE_FLAG                         # width 7, flagged shuffled
    with pytest.raises(CorruptionError, match="stream header"):
        decode(bytes(blob), 100, np.int64)


def _at_width(width, n, seed=0):
    """n uint64 values whose FOR stream (min 0, gcd 1) needs exactly ``width`` bits."""
    rng = np.random.default_rng(seed + width)
    if width == 0:
        return np.zeros(n, np.uint64)
    hi = (1 << width) - 1
    col = rng.integers(0, hi, n, dtype=np.uint64, endpoint=True)
    col[0], col[-1] = 1, hi            # why: pin min to 0 below and max to the full width
    col[n // 2] = 0
    return col


@pytest.mark.parametrize("width", range(65))
def test_for_streams_of_every_width_decode_across_block_boundaries(width):
    for n in (3, 1025, 2500):
        col = _at_width(width, n)
        for aligned in (PACKED, ALIGNED, SHUFFLED):
            blob = encode(col, codecs.FOR, aligned)
            stored = blob[1 + 16] & 0x7F
            assert stored == (width if aligned == PACKED or width == 0
                              else next(w for w in (8, 16, 32, 64) if w >= width))
            assert np.array_equal(decode(blob, n, col.dtype), col)


# lengths around the end of a stream: a value whose 8-byte load would run past the stream's
# last byte is read byte by byte (every width, streams shorter than 8 bytes included)
_TAIL_LENGTHS = (1, 2, 3, 5, 8, 9, 15, 17, 31, 40, 63, 65, 129, 1030)


@pytest.mark.parametrize("width", range(65))
def test_every_width_decodes_at_every_stream_length_near_its_end(width):
    for n in _TAIL_LENGTHS:
        col = _at_width(width, max(n, 3))[:n]
        if n < 3:
            col = col.copy()
        for aligned in (PACKED, ALIGNED, SHUFFLED):
            assert np.array_equal(decode(encode(col, codecs.FOR, aligned), n, col.dtype), col)
            # DELTA and DOD of a walk whose steps span the width (each step's zigzag < 2^width)
            steps = (col >> np.uint64(1)).view(np.int64) * np.where(col & np.uint64(1), -1, 1)
            walk = np.cumsum(steps).astype(np.int64)
            for enc in (codecs.DELTA, codecs.DOD):
                got = decode(encode(walk, enc, aligned), n, walk.dtype)
                assert np.array_equal(got, walk), (width, n, aligned, enc)


@pytest.mark.parametrize("step", [0, 1, -1, 7, -(1 << 62), (1 << 63) - 1])
def test_delta_of_a_constant_step_decodes_without_reading_a_stream(step):
    for n in (1, 2, 3, 1000, 2049):
        col = (np.arange(n, dtype=np.uint64) * np.uint64(step & ((1 << 64) - 1))
               + np.uint64(5)).view(np.int64)
        for aligned in (PACKED, ALIGNED, SHUFFLED):
            blob = encode(col, codecs.DELTA, aligned)
            assert np.array_equal(decode(blob, n, col.dtype), col)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 7, 8, 13, 16, 31, 32, 33, 57, 63, 64])
@pytest.mark.parametrize("encoding", [codecs.DELTA, codecs.DOD, codecs.RLE, codecs.DICT])
def test_every_encoding_decodes_streams_of_many_widths(width, encoding):
    col = _at_width(width, 2100).view(np.int64)
    if encoding == codecs.RLE:
        col = np.repeat(col[:700], 3)
    if encoding == codecs.DICT:
        col = col[np.arange(2100) % 37]
    for aligned in (PACKED, ALIGNED, SHUFFLED):
        assert np.array_equal(decode(encode(col, encoding, aligned), col.size, col.dtype), col)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_extremes_empty_and_one_row_decode_in_every_width(dtype, encoding):
    info = np.iinfo(dtype)
    cols = [np.array([], dtype), np.array([info.min], dtype), np.array([info.max], dtype),
            np.array([info.min, info.max] * 600 + [0], dtype)]
    for col in cols:
        for aligned in (PACKED, ALIGNED, SHUFFLED):
            out = decode(encode(col, encoding, aligned), col.size, col.dtype)
            assert out.dtype == col.dtype and np.array_equal(out, col)


def test_decode_writes_into_the_given_output_array():
    col = np.arange(5000, dtype=np.int32) * -3
    out = np.full(5000, 7, np.int32)
    assert decode(encode(col, codecs.DELTA), 5000, np.int32, out=out) is out
    assert np.array_equal(out, col)


def test_decode_rejects_an_output_array_of_the_wrong_shape_or_dtype():
    blob = encode(np.arange(10, dtype=np.int64), codecs.FOR)
    with pytest.raises(ValueError, match="out must be"):
        decode(blob, 10, np.int64, out=np.empty(10, np.int32))
    with pytest.raises(ValueError, match="out must be"):
        decode(blob, 10, np.int64, out=np.empty(11, np.int64))


def test_run_lengths_that_overrun_the_column_are_corruption():
    blob = encode(np.repeat(np.arange(4, dtype=np.int64), 5), codecs.RLE)
    with pytest.raises(CorruptionError, match="run lengths"):
        decode(blob, 19, np.int64)
    with pytest.raises(CorruptionError, match="run lengths"):
        decode(blob, 21, np.int64)


# --- the fused encoder: gcd search by multiplication, reused buffers, branch-free runs ----------

def _gcd_columns():
    """Columns whose stream gcd is > 1, changes late, or is a power of two / odd / 2**63."""
    base = np.arange(3000, dtype=np.int64)
    late = base * 96
    late[2999] += 32                      # gcd 96 until the last row (past several check chunks)
    odd_change = base * 45
    odd_change[700] += 15                 # 45 -> 15 in the third chunk
    return [base * 64, base * 3 * 7 * 11, late, odd_change,
            np.array([0, 1 << 63, 0, 1 << 63] * 10, np.uint64),
            np.cumsum(np.full(3000, 1000, np.int64)),           # deltas all equal: gcd 1000
            np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max] * 100, np.int64)]


@pytest.mark.parametrize("aligned", [PACKED, ALIGNED, SHUFFLED])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_columns_with_changing_gcds_round_trip(encoding, aligned):
    for col in _gcd_columns():
        blob = encode(col, encoding, aligned)
        assert np.array_equal(decode(blob, col.size, col.dtype), col)


def test_for_stream_stores_the_exact_gcd():
    import struct

    for col, g in ((np.arange(3000, dtype=np.int64) * 96, 96), (_gcd_columns()[2], 32),
                   (_gcd_columns()[3], 15), (np.full(500, 7, np.uint32), 1)):
        blob = encode(col, codecs.FOR, PACKED)
        assert struct.unpack_from("<Q", blob, 1 + 8)[0] == g


def test_encode_view_is_the_block_and_is_reused():
    col = np.arange(10_000, dtype=np.int64) * 5
    u = col.view(np.uint64)
    view = codecs.encode_view(u, col.dtype, codecs.FOR, SHUFFLED)
    blob = bytes(view)
    assert blob == encode(col, codecs.FOR, SHUFFLED)
    codecs.encode_view(u[::-1].copy(), col.dtype, codecs.FOR, SHUFFLED)
    assert bytes(view) != blob            # same buffer, next block: copy before the next encode
    with pytest.raises(ValueError, match="unknown encoding"):
        codecs.encode_view(u, col.dtype, 9)


def test_buffers_grow_for_a_longer_column_and_stay_correct():
    small = np.arange(10, dtype=np.int64)
    big = np.repeat(np.arange(50_000, dtype=np.int64), 3)   # RLE needs twice the rows of scratch
    for col in (small, big, small):
        for enc in ENCODINGS:
            assert np.array_equal(decode(encode(col, enc, SHUFFLED), col.size, col.dtype), col)


def test_dictionary_of_a_wide_range_takes_the_sorted_path_and_round_trips():
    values = np.array([0, 1 << 19, 5, 1 << 40], np.uint64)   # range too wide for a direct table
    col = values[np.arange(3000) % 4]
    for aligned in (PACKED, ALIGNED, SHUFFLED):
        assert np.array_equal(decode(encode(col, codecs.DICT, aligned), col.size, col.dtype), col)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(1, 5)), max_size=400))
def test_runs_of_every_length_pattern_round_trip(runs):
    col = np.array([v for v, k in runs for _ in range(k)], np.int64)
    assert np.array_equal(decode(encode(col, codecs.RLE, ALIGNED), col.size, col.dtype), col)
    assert len(encode(col, codecs.RLE)) >= 1 + 4


def test_encode_view_rejects_a_column_that_is_not_a_1d_integer_array():
    with pytest.raises(ValueError, match="1-D integer"):
        codecs.encode_view(np.arange(5, dtype=np.float64), np.int64, codecs.FOR)
    with pytest.raises(ValueError, match="1-D integer"):
        codecs.encode_view(np.zeros((2, 2), np.uint64), np.uint64, codecs.FOR)


# --- split_u64's narrow columns encode to the same bytes as uint64 bit patterns -----------------

# packed (fields at odd offsets), in the widths the schema uses
_PACKED_REC = np.dtype([("a", "<i8"), ("b", "<u8"), ("c", "<i4"), ("d", "<u4"), ("e", "u1")])


@settings(max_examples=40, deadline=None)
@given(data=st.data(), cut=st.integers(0, 300), aligned=st.sampled_from([PACKED, ALIGNED, SHUFFLED]))
def test_split_columns_encode_to_the_bytes_of_their_uint64_bit_patterns(data, cut, aligned):
    # the old path widened every column to uint64 (gather_u64); split_u64 keeps narrow widths:
    # every encoding must give byte-identical blocks either way, on adversarial columns
    n = data.draw(st.integers(1, 300))
    rec = np.zeros(n, _PACKED_REC)
    for name in _PACKED_REC.names:
        col = data.draw(_adversarial(_PACKED_REC.fields[name][0]))
        rec[name][:min(n, col.size)] = col[:n]
    parts = [rec[:min(cut, n)], rec[min(cut, n):]]
    scratch = np.empty((8, n + 64), np.uint64)
    for out in (None, scratch, np.empty(3, np.uint64)):   # no scratch, scratch, too small
        cols = codecs.split_u64(parts, list(_PACKED_REC.names), out)
        for name in _PACKED_REC.names:
            dt = _PACKED_REC.fields[name][0]
            wide = codecs.gather_u64([rec[name]], dt.kind == "i")
            assert cols[name].flags.c_contiguous and cols[name].dtype.itemsize in (dt.itemsize, 8)
            assert np.array_equal(codecs._as_u64(cols[name]), wide)
            for enc in ENCODINGS:
                assert bytes(codecs.encode_view(cols[name], dt, enc, aligned)) == \
                    codecs.encode_u64(wide, dt, enc, aligned), (name, enc)
            assert np.array_equal(codecs.take_u64(cols[name], np.arange(n)[::-1], 0, n), wide[::-1])


def test_split_u64_rejects_mixed_dtypes_and_non_integer_fields():
    a = np.zeros(3, [("x", "<i8"), ("y", "<f8")])
    with pytest.raises(ValueError, match="mixed dtypes"):
        codecs.split_u64([a, np.zeros(3, [("x", "<i8")])], ["x"])
    with pytest.raises(ValueError, match="'y' is not an integer field"):
        codecs.split_u64([a], ["y"])
    with pytest.raises(ValueError, match="no arrays"):
        codecs.split_u64([], ["x"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_tells_a_block_of_one_value_without_decoding_it(dtype):
    info = np.iinfo(dtype)
    for v in (int(info.min), int(info.max), 0, 1):
        col = np.full(3000, v, dtype)
        for enc in (codecs.PLAIN, codecs.FOR):
            got = codecs.constant(encode(col, enc), col.size, dtype)
            assert got == v and isinstance(got, int)
        assert codecs.constant(encode(col, codecs.RLE), col.size, dtype) is None  # not recognised
    mixed = np.full(3000, 7, dtype)
    mixed[2999] = 8
    for enc in ENCODINGS:
        assert codecs.constant(encode(mixed, enc), mixed.size, dtype) is None
    with pytest.raises(CorruptionError):
        codecs.constant(encode(np.full(100, 5, dtype), codecs.FOR)[:-1] + b"", 100, dtype)
    with pytest.raises(CorruptionError):
        codecs.constant(encode(np.full(100, 5, dtype), codecs.PLAIN) + b"\0", 100, dtype)
