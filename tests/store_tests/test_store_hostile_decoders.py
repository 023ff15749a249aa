"""Hostile column blocks and segment indexes (issue 13, items 6 and 7): every decoder either
returns exactly ``rows`` values or raises CorruptionError naming the place; never a signal, an
unbounded allocation or another exception.

Anything that could kill the interpreter (a write past an array, an allocation of gigabytes)
runs in a child process (``_in_child``) whose address space is capped at 2 GiB: a SIGSEGV or a
MemoryError there fails the test instead of pytest. The child imports this module and calls one
of its ``_child_*`` functions, which raise AssertionError on a wrong outcome.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys

import crc32c
import numpy as np
from hypothesis import given, settings, strategies as st

from exsim.exchange.errors import CorruptionError
from exsim.store import codecs
from exsim.store import segment as sg
from exsim.store.tables import STORED_DTYPES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIMIT = 2 << 30     # the child's address space: an unbounded allocation fails, it does not swap
U64 = (1 << 64) - 1


def _in_child(call: str, timeout: float = 120) -> None:
    """Run ``_child_<call>()`` of this module in a fresh interpreter under RLIMIT_AS = 2 GiB;
    fail (with the child's stderr) on a nonzero exit or a signal, or after ``timeout`` s."""
    code = ("import resource\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))\n"
            "import test_store_hostile_decoders as t\n"
            f"t._child_{call}()\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=HERE)
    how = (f"killed by {signal.Signals(-p.returncode).name}" if p.returncode < 0
           else f"exit {p.returncode}")
    assert p.returncode == 0, f"child {call} {how}:\n{p.stderr[-4000:]}"


def _expect_corruption(fn, where: str = "") -> CorruptionError:
    """Call ``fn()``; return its CorruptionError (which must name ``where``), else fail."""
    try:
        fn()
    except CorruptionError as e:
        assert where in str(e), f"{e} does not name {where}"
        return e
    raise AssertionError("a hostile input was accepted")


# --- blocks -------------------------------------------------------------------------------------

def _stream(mn: int, g: int, wbyte: int, body: bytes = b"") -> bytes:
    return struct.pack("<QQB", mn, g, wbyte) + body


def _u64s(values) -> bytes:
    return np.array(values, np.uint64).tobytes()


def _rle(lengths, values_const: int = 7) -> bytes:
    """An RLE block: len(lengths) runs, every value ``values_const``, lengths as 64-bit words."""
    return (bytes([codecs.RLE]) + struct.pack("<I", len(lengths)) + _stream(values_const, 1, 0)
            + _stream(0, 1, 64, _u64s(lengths)))


def _child_rle_run_of_2_63_minus_1():
    for lengths in ([1, 2**63 - 1, 1], [1, 2**63 - 1, 2], [2, U64, 1], [2**63, 1], [0, 3]):
        for n in (3, 4, 1000):
            _expect_corruption(lambda: codecs.decode(_rle(lengths), n, np.int64,
                                                     where="seg.x:qty"), where="seg.x:qty")


def test_a_run_of_2_63_minus_1_rows_is_corruption_not_a_crash():
    _in_child("rle_run_of_2_63_minus_1")


def _child_counts_above_the_row_count():
    n = 10
    # a dictionary of 2^32 - 1 values (17 bytes as a width-0 stream) for 10 rows
    big_dict = (bytes([codecs.DICT]) + struct.pack("<I", 2**32 - 1) + _stream(0, 1, 0)
                + _stream(0, 1, 0))
    _expect_corruption(lambda: codecs.decode(big_dict, n, np.int64, where="f:price"),
                       where="f:price")
    # 2^32 - 1 runs of width-0 lengths: every run empty
    many_runs = (bytes([codecs.RLE]) + struct.pack("<I", 2**32 - 1) + _stream(0, 1, 0)
                 + _stream(0, 1, 0))
    _expect_corruption(lambda: codecs.decode(many_runs, n, np.int64, where="f:price"),
                       where="f:price")
    # a dictionary index past the dictionary
    idx_past = (bytes([codecs.DICT]) + struct.pack("<I", 2) + _stream(0, 1, 1, b"\x02")
                + _stream(5, 1, 0))
    _expect_corruption(lambda: codecs.decode(idx_past, n, np.int64, where="f:price"),
                       where="f:price")


def test_run_and_dictionary_counts_above_the_row_count_are_corruption():
    _in_child("counts_above_the_row_count")


_WIDTH_BYTES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 32, 33, 63, 64, 65, 127, 128, 255,
                0x80 | 8, 0x80 | 16, 0x80 | 32, 0x80 | 64, 0x80 | 13]
_BIG = st.sampled_from([0, 1, 2, 3, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, U64 - 1, U64])
_ANY64 = st.one_of(_BIG, st.integers(0, U64))


def _fill(draw, size: int) -> bytes:
    """``size`` bytes: a few drawn bytes repeated (why: hypothesis draws a bounded amount of
    data per example; a body of thousands of drawn bytes would make it discard the example)."""
    seed = draw(st.binary(min_size=1, max_size=16))
    return (seed * (size // len(seed) + 1))[:size]


@st.composite
def _hostile_stream(draw, m: int) -> bytes:
    """A stream meant to hold ``m`` values: a constant one (width 0: any count fits in 17
    bytes), 64-bit words from the extremes (lengths and indexes up to 2^64 - 1, min 0, gcd 1),
    or any width byte, gcd and min with a body of the size that width needs, one byte off it,
    or any short bytes."""
    kind = draw(st.sampled_from(["const", "words", "words", "exact", "off", "any"]))
    if kind == "const":
        return _stream(draw(_ANY64), 1, 0)
    if kind == "words":
        # a few drawn words, each repeated a drawn number of times, cut to m
        extremes = st.sampled_from([0, 1, 1, 2, max(m - 1, 0), m, m + 1, 2**63 - 1, 2**63, U64])
        parts = draw(st.lists(st.tuples(st.one_of(extremes, _ANY64), st.integers(1, 3)),
                              min_size=1, max_size=6))
        words = [w for w, k in parts for _ in range(k)]
        return _stream(0, 1, 64, _u64s((words * (m // len(words) + 1))[:m]))
    wbyte = draw(st.sampled_from(_WIDTH_BYTES))
    need = (m * (wbyte & 0x7F) + 7) // 8
    if kind == "exact":
        body = _fill(draw, need)
    elif kind == "off":
        body = _fill(draw, max(need + draw(st.sampled_from([-1, 1])), 0))
    else:
        body = draw(st.binary(max_size=40))
    mn = draw(st.one_of(st.just(0), _ANY64))
    return _stream(mn, draw(st.sampled_from([0, 1, 1, 1, 2, 3, U64])), wbyte, body)


@st.composite
def hostile_blocks(draw):
    """(block, rows, dtype): an encoding byte (known or not), counts and first values from
    the interesting extremes, streams from ``_hostile_stream``."""
    n = draw(st.one_of(st.integers(0, 8), st.integers(0, 2100)))
    dtype = np.dtype(draw(st.sampled_from(["<i8", "<u8", "<i4", "<u4", "<i2", "|u1", "|i1"])))
    enc = draw(st.sampled_from([0, 1, 2, 3, 4, 4, 4, 5, 5, 5, 6, 255]))
    count = draw(st.sampled_from([0, 1, max(n - 1, 0), n, n + 1, 2**32 - 1, 3, n // 2]))
    b = bytes([enc])
    if enc == 0:
        b += _fill(draw, max(n * dtype.itemsize + draw(st.sampled_from([-1, 0, 0, 1])), 0))
    elif enc == 1:
        b += draw(_hostile_stream(n))
    elif enc in (2, 3):
        b += _u64s(draw(st.lists(_ANY64, min_size=enc, max_size=enc)))
        b += draw(_hostile_stream(max(n - enc + 1, 0)))
    elif enc in (4, 5):
        b += struct.pack("<I", count)
        b += draw(_hostile_stream(min(count, 5000)))
        b += draw(_hostile_stream(min(count, 5000) if enc == 4 else n))
    else:
        b += draw(st.binary(max_size=40))
    if draw(st.integers(0, 9)) == 0:
        b += b"\x00"     # trailing garbage
    return b, n, dtype


@settings(max_examples=600, deadline=None, database=None)
@given(hostile_blocks())
def _fuzz_decode(case):
    block, n, dtype = case
    try:
        out = codecs.decode(block, n, dtype, where="seg.x:col")
    except CorruptionError as e:
        assert "seg.x:col" in str(e)
        return
    assert out.shape == (n,) and out.dtype == dtype


def _child_fuzz_decode():
    _fuzz_decode()


def test_hostile_blocks_decode_to_exactly_rows_values_or_raise_corruption():
    _in_child("fuzz_decode", timeout=300)


# --- segment files ------------------------------------------------------------------------------

def _const_block(signed: bool, value: int = 0) -> bytes:
    """A FOR block with a width-0 stream: a constant column of any length in 18 bytes."""
    return bytes([codecs.FOR]) + _stream((value ^ (1 << 63)) if signed else value, 1, 0)


def _segment(path: str, *, table: str = "l2", rows: int = 10, seq=(1, 1), ts=(0, 0),
             cols=None, symbol: int = 0, ncols: int | None = None) -> int:
    """Write a segment file whose every checksum is right (index and blocks recomputed), with
    ``cols`` [(name, dtype str, encoding, codec, stored bytes, raw length)] (default: every
    column of ``table`` constant, stored raw); ``ncols`` overrides the column count the index
    declares. Returns the file size."""
    if cols is None:
        dt = STORED_DTYPES[table]
        cols = []
        for name in dt.names:
            b = _const_block(dt.fields[name][0].kind == "i")
            cols.append((name, dt.fields[name][0].str, codecs.FOR, sg.NONE, b, len(b)))
    parts, pos = [sg.HEADER.pack(sg.MAGIC, 2, 0)], sg.HEADER.size
    index = [sg._s(table), sg.INDEX_HEAD.pack(symbol, rows, *seq, *ts,
                                                       len(cols) if ncols is None else ncols)]
    for name, dts, enc, codec, stored, raw in cols:
        crc = crc32c.crc32c(stored)
        parts += [stored, sg.CRC.pack(crc)]
        name = bytes([len(name)]) + name if isinstance(name, bytes) else sg._s(name)
        index += [name, sg._s(dts), sg.INDEX_COL.pack(enc, codec, pos, len(stored), raw, crc)]
        pos += len(stored) + sg.CRC.size
    idx = b"".join(index)
    parts += [idx, sg.FOOTER.pack(pos, len(idx), crc32c.crc32c(idx), 2, 0, sg.FOOT_MAGIC)]
    data = b"".join(parts)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def _refused(path: str, what: str = "") -> None:
    """read_index, check_segment and read_segment all raise CorruptionError naming ``path``
    (and ``what``)."""
    def index():
        with open(path, "rb") as f:
            sg.read_index(f, path)
    for fn in (index, lambda: sg.check_segment(path), lambda: sg.read_segment(path)):
        e = _expect_corruption(fn, where=path)
        assert what in str(e) and e.path == path and e.offset >= 0, e


def _child_index_claiming_2_28_rows(tmp=None):
    import tempfile
    d = tmp or tempfile.mkdtemp()
    good = os.path.join(d, "good.seg")
    _segment(good, rows=1000)
    assert sg.read_segment(good)["price"].size == 1000    # the same file with a sane count reads
    path = os.path.join(d, "tiny.seg")
    assert _segment(path, rows=1 << 28) < 1000
    _refused(path, "rows")


def test_a_tiny_segment_whose_index_claims_2_28_rows_is_refused_before_allocating():
    _in_child("index_claiming_2_28_rows")


def _zstd_frames() -> dict:
    import zstandard
    inflating = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(
        bytes(1 << 20))                        # no size in the frame: inflates as far as asked
    declaring = bytearray(zstandard.ZstdCompressor(level=3).compress(bytes(1 << 20)))
    assert declaring[4] == 0b10100000          # single segment, 4-byte content size at 5..8
    declaring[5:9] = struct.pack("<I", 2**32 - 1)
    return {"inflating": bytes(inflating), "declaring": bytes(declaring)}


def _child_zstd_bombs():
    import tempfile
    d = tempfile.mkdtemp()
    frames = _zstd_frames()
    dt = STORED_DTYPES["l2"]
    for kind, raw in (("inflating", 2**32 - 1), ("declaring", 18), ("declaring", 2**32 - 1)):
        cols = []
        for name in dt.names:
            b = _const_block(dt.fields[name][0].kind == "i")
            cols.append((name, dt.fields[name][0].str, codecs.FOR, sg.NONE, b, len(b)))
        cols[1] = (cols[1][0], cols[1][1], codecs.PLAIN, sg.ZSTD, frames[kind], raw)
        path = os.path.join(d, f"{kind}-{raw}.seg")
        _segment(path, rows=10)
        _segment(path, rows=10, cols=cols)
        e = _expect_corruption(lambda: sg.read_segment(path), where=path)
        assert e.path == path and e.offset >= 0
        if raw > 18:   # a declared length no block of 10 rows can have: refused by the index
            _refused(path, "raw bytes")


def test_zstd_bombs_are_refused_before_inflating():
    _in_child("zstd_bombs")


_INDEX_FIELDS = ("rows", "ncols", "enc", "codec", "off", "stored", "raw", "dtype", "name",
                 "table", "seq", "ts")


@st.composite
def hostile_segments(draw):
    """Keyword arguments of ``_segment``: a valid constant l2 segment with one index field (or
    one column's block) replaced by a hostile value; every checksum stays right."""
    dt = STORED_DTYPES["l2"]
    cols = [[name, dt.fields[name][0].str, codecs.FOR, sg.NONE,
             _const_block(dt.fields[name][0].kind == "i"), 18] for name in dt.names]
    kw = {"rows": draw(st.sampled_from([1, 10, 1000])), "cols": cols}
    k = draw(st.integers(0, len(cols) - 1))
    field = draw(st.sampled_from(_INDEX_FIELDS + ("block",)))
    if field == "rows":
        kw["rows"] = draw(st.one_of(_BIG, st.integers(0, 1 << 40)))
    elif field == "ncols":
        kw["ncols"] = draw(st.sampled_from([0, 1, len(cols) - 1, len(cols) + 1, 2**16 - 1]))
    elif field == "enc":
        cols[k][2] = draw(st.integers(0, 255))
    elif field == "codec":
        cols[k][3] = draw(st.integers(0, 255))
    elif field == "raw":
        cols[k][5] = draw(st.one_of(st.sampled_from([0, 1, 17, 19, 2**31, 2**32 - 1]),
                                    st.integers(0, 2**32 - 1)))
    elif field == "dtype":
        cols[k][1] = draw(st.sampled_from(["<f8", ">i8", "O", "V8", "<U4", "i8,i8", "<i16",
                                           "|b1", "<M8[ns]", "", "\x00", "<u2"]))
    elif field == "name":
        cols[k][0] = draw(st.sampled_from(["", cols[0][0], "\u00e9", b"\xff\xfe", b"\xc3"]))
    elif field == "table":
        kw["table"] = draw(st.sampled_from(["", "x", "orders", "fills"]))
    elif field in ("seq", "ts"):
        kw[field] = (draw(st.integers(-2**63, 2**63 - 1)), draw(st.integers(-2**63, 2**63 - 1)))
    elif field == "block":
        codec = draw(st.sampled_from([sg.NONE, sg.LZ4, sg.ZSTD]))
        stored = draw(st.one_of(st.binary(max_size=64), st.sampled_from(
            list(_zstd_frames().values()) + [_rle([1, 2**63 - 1, 1]), _rle([U64])])))
        cols[k][3:6] = [codec, stored, len(stored) if codec == sg.NONE
                        else draw(st.integers(0, 4096))]
    value = draw(_BIG if field == "off" else st.sampled_from([0, 1, 17, 19, 600, 2**32 - 1]))
    return kw, field, k, value


@settings(max_examples=200, deadline=None, database=None)
@given(hostile_segments())
def _fuzz_segments(case):
    import tempfile
    kw, field, k, value = case
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.seg")
        size = _segment(path, **kw)
        if field in ("off", "stored"):
            # these move a block: patch column k's index entry, then the index checksum
            data = bytearray(open(path, "rb").read())
            idx_off, idx_len = struct.unpack_from("<QI", data, size - sg.FOOTER.size)
            at = idx_off + _entry_offset(data[idx_off:idx_off + idx_len], k)
            if field == "off":
                struct.pack_into("<Q", data, at + 2, value)
            else:
                struct.pack_into("<I", data, at + 10, value % 2**32)
            struct.pack_into("<I", data, size - sg.FOOTER.size + 12,
                             crc32c.crc32c(bytes(data[idx_off:idx_off + idx_len])))
            open(path, "wb").write(bytes(data))
        for fn in (lambda: sg.check_segment(path), lambda: sg.read_segment(path)):
            try:
                out = fn()
            except CorruptionError as e:
                assert e.path == path and path in str(e), e
                continue
            if out is not None:
                assert all(v.shape == (kw["rows"],) for v in out.values())


def _entry_offset(idx: bytes, k: int) -> int:
    """Offset in the index of column k's fixed fields (encoding byte first)."""
    p = 1 + idx[0] + sg.INDEX_HEAD.size
    for j in range(k + 1):
        p += 1 + idx[p]
        p += 1 + idx[p]
        if j < k:
            p += sg.INDEX_COL.size
    return p


def _child_fuzz_segments():
    _fuzz_segments()


def test_hostile_segment_indexes_and_blocks_raise_corruption_naming_the_file():
    _in_child("fuzz_segments", timeout=300)


def test_a_writer_never_writes_more_rows_than_a_reader_accepts(tmp_path, monkeypatch):
    monkeypatch.setattr(sg, "ROWS_FLOOR", 1000)     # why: the real floor needs a million rows
    rows = np.zeros(100_000, STORED_DTYPES["l2"])   # constant columns: a few hundred bytes
    rows["seq"] = 5
    info = sg.write_segment(str(tmp_path), "l2", 0, rows, codec="zstd")
    assert info.rows <= sg.max_rows(info.bytes) and info.encodings["seq"] == "plain"
    cols = sg.read_segment(os.path.join(tmp_path, info.path))
    assert all(np.array_equal(cols[c], rows[c]) for c in rows.dtype.names)


# --- the WAL's byte planes, remembered choices, stored digests ---------------------------------

def _child_unshuffle_out_of_bounds():
    from exsim.store.shuffle import shuffle, unshuffle
    src, out = np.arange(64, dtype=np.uint8), np.zeros(64, np.uint8)
    for pos, width, n in ((0, 8, 9), (60, 1, 5), (0, 8, 2**60), (0, 0, 4), (-1, 1, 1),
                          (65, 1, 0), (0, 2**62, 4)):
        try:
            unshuffle(src, pos, width, n, out)
        except ValueError:
            continue
        raise AssertionError(f"unshuffle accepted pos {pos} width {width} n {n}")
    for pos in (-1, 1, 65):
        try:
            shuffle(src, 8, out, pos)
        except ValueError:
            continue
        raise AssertionError(f"shuffle wrote 64 bytes at {pos} of 64")
    unshuffle(src, 0, 8, 8, out)     # a fit is fine
    assert np.array_equal(out.reshape(8, 8).T.ravel(), src)


def test_byte_planes_of_a_size_past_the_arrays_raise_instead_of_overrunning():
    _in_child("unshuffle_out_of_bounds")


def test_hostile_remembered_encoding_choices_are_skipped_not_raised():
    from exsim.store.choice import Chooser
    state = {"l2|price|1": [99, 0, 1.0], "l2|qty|1": [1, 7, 1.0], "l2|ts|1": [1, 0, float("nan")],
             "l2|seq|x": [1, 0, 1.0], "nobar": [1, 0, 1.0], "l2|side|1": "abc",
             "l2|count|1": [1, 0], "l2|id|1": [codecs.DELTA, codecs.SHUFFLED, 2.5]}
    c = Chooser()
    c.load(state)
    c.load(["not", "a", "dict"])
    assert c.state() == {"l2|id|1": [codecs.DELTA, codecs.SHUFFLED, 2.5]}
    col = np.arange(1000, dtype=np.uint64)
    for key in (("l2", "price", 1), ("l2", "id", 1)):
        enc, block, _ = c.encode(key, col)
        assert np.array_equal(codecs.decode(block, col.size, col.dtype), col)


def test_a_stored_digest_that_is_not_hex_is_unknown():
    from exsim.store.digest import PREFIX, digest_rows, is_digest
    from exsim.exchange.schema import TABLE_DTYPES
    assert is_digest(digest_rows("fills", np.zeros(3, TABLE_DTYPES["fills"])))
    for bad in (PREFIX + "g" * 32, PREFIX + "A" * 32, PREFIX + " " * 32, PREFIX + "0" * 31 + "\u0660"):
        assert not is_digest(bad)
