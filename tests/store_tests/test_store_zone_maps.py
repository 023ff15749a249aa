"""Zone maps inside segments: a windowed read returns exactly the rows a full decode filtered
by the same window holds, whatever the block size, codec and window; a damaged zone map is a
CorruptionError naming the file; version 2 segments (no zone maps) read the same way.
None of these need the engine."""

import os
import struct
import tempfile

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from exsim.exchange.errors import CorruptionError
from exsim.store import segment as sg
from exsim.store.tables import STORED_DTYPES

L2 = STORED_DTYPES["l2"]


def _rows(n: int, seed: int, ts_sorted: bool = True) -> np.ndarray:
    """L2 rows of one symbol: seqs never decreasing (several rows share a message's seq), ts
    nondecreasing or (``ts_sorted`` False) jittered back and forth."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, L2)
    r["seq"] = 1 + np.cumsum(rng.integers(0, 3, n))
    jitter = 0 if ts_sorted else rng.integers(-3_000, 3_000, n)
    r["ts"] = r["seq"] * 1_000 + jitter
    r["price"] = 10_000 + rng.integers(-40, 40, n)
    r["qty"] = rng.integers(0, 9, n)
    r["count"] = rng.integers(0, 4, n)
    r["side"] = rng.integers(0, 2, n)
    return r


def _expect(rows, cols, seq, ts):
    m = np.ones(rows.size, bool)
    if seq is not None:
        m &= (rows["seq"] >= seq[0]) & (rows["seq"] <= seq[1])
    if ts is not None:
        m &= (rows["ts"] >= ts[0]) & (rows["ts"] <= ts[1])
    return {c: rows[c][m] for c in cols}


def _window(draw, values):
    lo, hi = int(values.min()) - 5, int(values.max()) + 5
    a, b = sorted((draw(st.integers(lo, hi)), draw(st.integers(lo, hi))))
    return a, b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(1, 3_000), block_rows=st.integers(1, 700),
       codec=st.sampled_from(["lz4", "zstd", "none"]), ts_sorted=st.booleans(),
       kind=st.sampled_from(["seq", "ts", "both", "none"]), seed=st.integers(0, 2**16))
def test_windowed_reads_never_drop_or_add_a_row(data, n, block_rows, codec, ts_sorted, kind, seed):
    rows = _rows(n, seed, ts_sorted)
    seq = _window(data.draw, rows["seq"]) if kind in ("seq", "both") else None
    ts = _window(data.draw, rows["ts"]) if kind in ("ts", "both") else None
    cols = data.draw(st.lists(st.sampled_from(L2.names), min_size=1, max_size=7, unique=True))
    with tempfile.TemporaryDirectory() as d:
        info = sg.write_segment(d, "l2", 0, rows, codec=codec, block_rows=block_rows)
        path = os.path.join(d, info.path)
        full = sg.read_segment(path)
        assert all(np.array_equal(full[c], rows[c]) for c in L2.names)
        got = sg.read_segment(path, cols, seq=seq, ts=ts)
        want = _expect(rows, cols, seq, ts)
        assert list(got) == cols
        for c in cols:
            assert got[c].dtype == L2.fields[c][0] and np.array_equal(got[c], want[c]), c
        with sg.SegmentFile(path) as f:   # the blocks fetched hold every matching row
            assert f.meta["block_rows"] == block_rows and f.meta["zones"].size == -(-n // block_rows)
            m = np.ones(n, bool)
            for c, r in (("seq", seq), ("ts", ts)):
                if r is not None:
                    m &= (rows[c] >= r[0]) & (rows[c] <= r[1])
            assert set((np.flatnonzero(m) // block_rows).tolist()) <= set(f.blocks(seq, ts).tolist())


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2_000), block_rows=st.integers(1, 500), seed=st.integers(0, 2**16))
def test_every_matching_row_lies_in_a_block_the_zone_map_selects(n, block_rows, seed):
    rows = _rows(n, seed, ts_sorted=False)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as d:
        info = sg.write_segment(d, "l2", 0, rows, codec="lz4", block_rows=block_rows)
        with sg.SegmentFile(os.path.join(d, info.path)) as f:
            for _ in range(10):
                i, j = sorted(rng.integers(0, n, 2))
                ts = (int(rows["ts"][i]), int(rows["ts"][j]))
                ids = f.blocks(None, ts)
                m = (rows["ts"] >= ts[0]) & (rows["ts"] <= ts[1])
                assert set(np.flatnonzero(m) // block_rows) <= set(ids.tolist())
                z = f.meta["zones"]
                assert ((z["ts_hi"][ids] >= ts[0]) & (z["ts_lo"][ids] <= ts[1])).all()


def _segment(d, n=5_000, block_rows=512, codec="lz4"):
    rows = _rows(n, 3)
    info = sg.write_segment(d, "l2", 0, rows, codec=codec, block_rows=block_rows)
    return rows, os.path.join(d, info.path)


def _zone_span(path):
    """(index offset, index length, offset of the zone map in the file, its length)."""
    data = open(path, "rb").read()
    idx_off, idx_len = struct.unpack_from("<QI", data, len(data) - sg.FOOTER.size)
    zone_at = idx_off + 1 + data[idx_off] + sg.INDEX_HEAD.size + sg.ZONE_HEAD.size
    with sg.SegmentFile(path) as f:
        nb = f.meta["zones"].size
    return idx_off, idx_len, zone_at, nb * sg.ZONE_DTYPE.itemsize


def _rewrite(path, edit, fix_crc: bool):
    data = bytearray(open(path, "rb").read())
    idx_off, idx_len, zone_at, zone_len = _zone_span(path)
    edit(data, zone_at, zone_len)
    if fix_crc:
        struct.pack_into("<I", data, len(data) - sg.FOOTER.size + 12,
                         crc32c.crc32c(bytes(data[idx_off:idx_off + idx_len])))
    open(path, "wb").write(bytes(data))


def _all_readers_refuse(path, what=""):
    """Return the messages of the CorruptionError each reader raised on ``path`` (a full read, a
    windowed read, the check); fail if one did not raise or named another file."""
    messages = []
    for fn in (lambda: sg.read_segment(path), lambda: sg.read_segment(path, ["price"], seq=(1, 50)),
               lambda: sg.check_segment(path)):
        with pytest.raises(CorruptionError) as e:
            fn()
        assert e.value.path == path and path in str(e.value) and what in str(e.value), e.value
        messages.append(str(e.value))
    return messages


@pytest.mark.parametrize("byte", [0, 7, 8, 31, 100, 250])
def test_a_flipped_byte_in_a_zone_map_is_a_checksum_error(tmp_path, byte):
    _, path = _segment(str(tmp_path))

    def flip(data, at, length):
        data[at + byte % length] ^= 0x10
    _rewrite(path, flip, fix_crc=False)
    _all_readers_refuse(path, "index checksum mismatch")


@pytest.mark.parametrize("field,how", [("seq_lo", "reverse"), ("ts_lo", "reverse"),
                                       ("seq_lo", "back"), ("seq_hi", "end"), ("ts_hi", "extreme")])
def test_a_zone_map_that_does_not_tile_the_segment_is_refused_even_under_a_good_checksum(
        tmp_path, field, how):
    rows, path = _segment(str(tmp_path))

    def forge(data, at, length):
        z = np.frombuffer(bytes(data[at:at + length]), sg.ZONE_DTYPE).copy()
        if how == "reverse":     # block 3's range reversed
            z[3][field] = z[3][field.replace("lo", "hi")] + 1
        elif how == "back":      # block 4 starts before block 3 ends
            z[4]["seq_lo"] = z[3]["seq_hi"] - 1
        elif how == "end":       # the last block ends before the segment does
            z[-1]["seq_hi"] -= 1
        else:                    # a block's ts beyond the segment's own range
            z[2]["ts_hi"] = rows["ts"].max() + 1
        data[at:at + length] = z.tobytes()
    _rewrite(path, forge, fix_crc=True)
    _all_readers_refuse(path, "zone map")


def test_a_zone_map_that_disagrees_with_its_rows_is_caught_when_the_block_is_decoded(tmp_path):
    rows, path = _segment(str(tmp_path))

    def forge(data, at, length):   # block 5 claims a narrower ts range (the tiling still holds)
        z = np.frombuffer(bytes(data[at:at + length]), sg.ZONE_DTYPE).copy()
        z[5]["ts_lo"] += 1
        data[at:at + length] = z.tobytes()
    _rewrite(path, forge, fix_crc=True)
    with sg.SegmentFile(path) as f:
        lo, hi = int(f.meta["zones"][5]["ts_lo"]), int(f.meta["zones"][5]["ts_hi"])
    assert sg.read_segment(path, ["price"], ts=(0, int(rows["ts"][0]))) is not None   # block 0
    for kw in ({"ts": (lo, hi)}, {"ts": (lo - 10**9, hi + 10**9)}):
        with pytest.raises(CorruptionError, match="its zone map says") as e:
            sg.read_segment(path, ["price"], **kw)
        assert e.value.path == path


def test_a_damaged_block_inside_the_window_is_still_a_checksum_error(tmp_path):
    rows, path = _segment(str(tmp_path))
    with sg.SegmentFile(path) as f:
        _, blocks = f.meta["columns"]["price"]
        off = int(blocks[4]["off"])
        z4 = f.meta["zones"][4]
    data = bytearray(open(path, "rb").read())
    data[off + 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    assert sg.read_segment(path, ["price"], seq=(1, int(rows["seq"][100])))["price"].size
    with pytest.raises(CorruptionError, match="checksum mismatch in column 'price'"):
        sg.read_segment(path, ["price"], seq=(int(z4["seq_lo"]), int(z4["seq_hi"])))


@pytest.mark.parametrize("version", [1, 2])
def test_segments_without_zone_maps_read_windows_the_same(tmp_path, version):
    rows = _rows(4_000, 9, ts_sorted=False)
    info = sg.write_segment(str(tmp_path), "l2", 0, rows, codec="lz4", version=2)
    path = os.path.join(tmp_path, info.path)
    if version == 1:   # the same bytes under version 1 (only shuffled streams are newer)
        data = bytearray(open(path, "rb").read())
        struct.pack_into("<H", data, 4, 1)
        struct.pack_into("<H", data, len(data) - sg.FOOTER.size + 16, 1)
        open(path, "wb").write(bytes(data))
    with sg.SegmentFile(path) as f:
        assert f.meta["version"] == version and f.meta["zones"].size == 1
    for seq, ts in (((100, 900), None), (None, (500_000, 2_000_000)), ((50, 3_000), (0, 10**6))):
        got = sg.read_segment(path, ["seq", "ts", "qty"], seq=seq, ts=ts)
        want = _expect(rows, ["seq", "ts", "qty"], seq, ts)
        assert all(np.array_equal(got[c], want[c]) for c in want)


def test_a_writer_refuses_a_block_size_or_version_it_cannot_write(tmp_path):
    rows = _rows(10, 1)
    for kw in ({"block_rows": -1}, {"block_rows": 1 << 32}, {"version": 1}, {"version": 5}):
        with pytest.raises(ValueError):
            sg.write_segment(str(tmp_path), "l2", 0, rows, **kw)


def test_an_index_declaring_zero_rows_per_block_is_refused(tmp_path):
    _, path = _segment(str(tmp_path))

    def zero(data, at, length):
        struct.pack_into("<I", data, at - sg.ZONE_HEAD.size, 0)
    _rewrite(path, zero, fix_crc=True)
    messages = _all_readers_refuse(path, "0 rows per block")
    assert len(messages) == 3 and all("0 rows per block" in m for m in messages)


def test_an_index_whose_zone_map_runs_past_it_is_refused(tmp_path):
    _, path = _segment(str(tmp_path), n=5_000, block_rows=512)

    def tiny_blocks(data, at, length):   # 1 row per block: 5,000 zone entries claimed
        struct.pack_into("<I", data, at - sg.ZONE_HEAD.size, 1)
    _rewrite(path, tiny_blocks, fix_crc=True)
    messages = _all_readers_refuse(path, "run past the index")
    assert len(messages) == 3 and all("run past the index" in m for m in messages)


def test_a_zone_map_forged_to_open_a_gap_between_blocks_is_caught_by_a_window_in_the_gap(tmp_path):
    rows, path = _segment(str(tmp_path))
    with sg.SegmentFile(path) as f:
        z = f.meta["zones"]
        # seqs taken out of block 1: its entry starts later, the tiling still holds
        start, new = int(z[1]["seq_lo"]), int(z[1]["seq_lo"]) + 40
        assert new <= int(z[1]["seq_hi"])

    def forge(data, at, length):
        zz = np.frombuffer(bytes(data[at:at + length]), sg.ZONE_DTYPE).copy()
        zz[1]["seq_lo"] = new
        data[at:at + length] = zz.tobytes()
    _rewrite(path, forge, fix_crc=True)
    assert ((rows["seq"] >= start) & (rows["seq"] < new)).any()
    for window in ((start, new - 1), (start + 1, new - 2), (start, start)):
        with pytest.raises(CorruptionError, match="its zone map says") as e:
            sg.read_segment(path, ["price"], seq=window)
        assert e.value.path == path
    with sg.SegmentFile(path) as f:   # the same through one open file, read after read
        f.read(["price"], seq=(1, 2))
        with pytest.raises(CorruptionError, match="its zone map says"):
            f.read(["price"], seq=(start, new - 1))
