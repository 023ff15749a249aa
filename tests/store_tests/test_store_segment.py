"""Segment files: round trips, column-selective reads, and corruption detection."""

import os

import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError
from exsim.store.segment import FOOTER, read_index, read_segment, write_segment
from exsim.store.tables import orders_with_seq
from store_fixtures import make_batch


def _rows(table="l2", n=2000):
    o, fills, l2, ev = make_batch(1, n, n_symbols=1)
    return {"orders": orders_with_seq(o, 1), "fills": fills, "l2": l2, "events": ev}[table]


@pytest.mark.parametrize("codec", ["lz4", "zstd", "none"])
@pytest.mark.parametrize("table", ["orders", "fills", "l2", "events"])
def test_segment_round_trips_every_table(tmp_path, table, codec):
    rows = _rows(table)
    info = write_segment(str(tmp_path), table, 0, rows, codec=codec)
    cols = read_segment(os.path.join(tmp_path, info.path))
    assert all(np.array_equal(cols[c], rows[c]) for c in rows.dtype.names)
    assert info.rows == rows.size and info.seq_lo == rows["seq"][0]


def test_reading_some_columns_decodes_only_those(tmp_path):
    info = write_segment(str(tmp_path), "l2", 0, _rows())
    assert set(read_segment(os.path.join(tmp_path, info.path), ["price", "seq"])) == {"price", "seq"}


def test_no_temporary_file_is_left_behind(tmp_path):
    info = write_segment(str(tmp_path), "l2", 0, _rows())
    assert os.listdir(os.path.dirname(os.path.join(tmp_path, info.path))) == [os.path.basename(info.path)]


def _corrupt(tmp_path, how):
    info = write_segment(str(tmp_path), "l2", 0, _rows())
    path = os.path.join(tmp_path, info.path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if how == "flip":
            f.seek(40)
            b = f.read(1)
            f.seek(40)
            f.write(bytes([b[0] ^ 1]))
        elif how == "zero":
            f.seek(8)
            f.write(bytes(256))
        elif how == "truncate":
            f.truncate(size - 7)
        elif how == "index":
            with open(path, "rb") as g:
                idx_off = int.from_bytes(g.read()[-FOOTER.size:][:8], "little")
            f.seek(idx_off + 2)
            f.write(b"\xee")
    return path


@pytest.mark.parametrize("how", ["flip", "zero", "truncate", "index"])
def test_damaged_segment_raises_corruption_naming_the_file(tmp_path, how):
    path = _corrupt(tmp_path, how)
    with pytest.raises(CorruptionError, match=os.path.basename(path)) as e:
        read_segment(path)
    assert e.value.path == path and e.value.offset >= 0


def test_index_reports_ranges_and_columns(tmp_path):
    rows = _rows()
    info = write_segment(str(tmp_path), "l2", 0, rows)
    with open(os.path.join(tmp_path, info.path), "rb") as f:
        meta = read_index(f, info.path)
    assert meta["seq"] == (rows["seq"][0], rows["seq"][-1]) and meta["ts"] == (rows["ts"].min(), rows["ts"].max())
    assert list(meta["columns"]) == list(rows.dtype.names)


def _set_version(path, version):
    data = bytearray(open(path, "rb").read())
    data[4:6] = version.to_bytes(2, "little")                       # header
    data[-FOOTER.size + 16:-FOOTER.size + 18] = version.to_bytes(2, "little")   # footer
    open(path, "wb").write(bytes(data))


def test_version_1_segments_still_read():
    # a version 1 file differs only in never holding shuffled streams; packed blocks stay valid
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rows = _rows("fills")
        info = write_segment(d, "fills", 0, rows, codec="none", version=2,
                             chooser=_packed_only_chooser())
        path = os.path.join(d, info.path)
        _set_version(path, 1)
        cols = read_segment(path)
        assert all(np.array_equal(cols[c], rows[c]) for c in rows.dtype.names)


def _packed_only_chooser():
    from exsim.store.choice import Chooser

    return Chooser()   # without a compressor the search tries bit-packed streams only


def test_a_newer_segment_version_is_rejected_with_a_clear_error(tmp_path):
    info = write_segment(str(tmp_path), "l2", 0, _rows())
    path = os.path.join(tmp_path, info.path)
    _set_version(path, 9)
    with pytest.raises(CorruptionError, match="version 9; this code reads versions 1, 2"):
        read_segment(path)


def test_commit_segments_leaves_no_file_behind_when_a_write_fails(tmp_path, monkeypatch):
    from exsim.exchange.errors import WriteError
    from exsim.store import codecs
    from exsim.store.segment import commit_segments, encode_columns
    from exsim.store.tables import STORED_DTYPES

    rows = np.zeros(10, STORED_DTYPES["l2"])
    rows["seq"] = np.arange(1, 11)
    cols = {c: codecs.gather_u64([rows[c]], rows.dtype.fields[c][0].kind == "i") for c in rows.dtype.names}
    built = [encode_columns(str(tmp_path), "l2", s, cols) for s in (1, 2)]
    real_rename = os.rename
    calls = []

    def rename(a, b):   # the second rename fails: the first file is already in place
        calls.append(a)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", a)
        real_rename(a, b)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(WriteError, match="cannot write segment .*No space left"):
        commit_segments(str(tmp_path), built)
    assert [f for _, _, fs in os.walk(tmp_path) for f in fs] == []


def test_zstd_segments_encode_on_several_threads_at_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    rows = _rows("events", 3000)

    def one(k):   # why: zstd compressors are not shareable; each thread must use its own
        info = write_segment(str(tmp_path / str(k)), "events", 0, rows, codec="zstd")
        return read_segment(os.path.join(tmp_path, str(k), info.path))

    with ThreadPoolExecutor(4) as ex:
        for cols in ex.map(one, range(8)):
            assert all(np.array_equal(cols[c], rows[c]) for c in rows.dtype.names)


def _commit_two(d):
    """Commit two segments at once (two files, two directories: their fsyncs run concurrently)."""
    from exsim.store import codecs
    from exsim.store.segment import commit_segments, encode_columns

    rows = _rows()
    cols = {c: codecs.gather_u64([rows[c]], rows.dtype.fields[c][0].kind == "i") for c in rows.dtype.names}
    return commit_segments(d, [encode_columns(d, "l2", s, cols) for s in (1, 2)])


def test_a_forked_child_can_commit_segments_after_the_parent_did(tmp_path):
    import time

    assert len(_commit_two(str(tmp_path / "parent"))) == 2   # the parent's fsync pool exists
    pid = os.fork()
    if pid == 0:   # child: a pool inherited without its threads would hang here
        try:
            _commit_two(str(tmp_path / "child"))
            os._exit(0)
        except BaseException:
            os._exit(1)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's segment commit hung")
