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

from exchange.errors import CorruptionError
from store import codecs
from store import segment as sg
from store.tables import STORED_DTYPES

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
