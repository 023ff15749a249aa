"""Round trips for every column encoding on adversarial columns, and the choice logic."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from exchange.errors import CorruptionError
from store import codecs
from store.codecs import ALIGNED, ENCODINGS, PACKED, SHUFFLED, Chooser, choose, decode, encode

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
