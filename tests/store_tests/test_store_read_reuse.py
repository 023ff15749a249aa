"""store.read(reuse=...): a loop that reads range after range can hand back the rows it is done
with, and the next read writes over their memory. What a user relies on: the rows are exactly
those of a fresh read (padding too), the memory is reused only when it has room, and a buffer of
the wrong kind is a clear error, never a silent reinterpretation of its bytes."""

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.store import Reader, read
from store_fixtures import sealed_run


def _run(tmp_path):
    # the last batch stays in the WAL: reads merge sealed and unsealed rows
    return sealed_run(tmp_path, "reuse", batches=3, n=3000, seed=70, seal_last=False)


@pytest.mark.parametrize("table", ["orders", "fills", "l2", "events"])
def test_reused_memory_holds_the_rows_a_fresh_read_returns(tmp_path, table):
    d = _run(tmp_path)
    with Reader(d) as r:
        big = read(r, table, symbol="A")
        assert big.size > 100
        for lo, hi in [(1, 2500), (2501, 7000), (7001, 9000), (1, 9000)]:
            got = read(r, table, symbol="A", seq=(lo, hi), reuse=big)
            want = read(d, table, symbol="A", seq=(lo, hi))
            assert got.tobytes() == want.tobytes()
            assert np.shares_memory(got, big)       # written over the buffer, not fresh


def test_a_buffer_without_room_gives_a_fresh_array_and_stays_untouched(tmp_path):
    d = _run(tmp_path)
    small = read(d, "orders", symbol="B", seq=(1, 50))
    before = small.tobytes()
    got = read(d, "orders", symbol="B", reuse=small)
    assert got.size > small.size and not np.shares_memory(got, small)
    assert small.tobytes() == before
    assert got.tobytes() == read(d, "orders", symbol="B").tobytes()


def test_column_subsets_reuse_their_own_dtype_and_keep_zero_padding(tmp_path):
    d = _run(tmp_path)
    cols = ["seq", "side", "price"]
    buf = read(d, "orders", columns=cols)
    got = read(d, "orders", seq=(10, 400), columns=cols, reuse=buf)
    assert np.shares_memory(got, buf)
    assert got.tobytes() == read(d, "orders", seq=(10, 400), columns=cols).tobytes()


@pytest.mark.parametrize("bad, words", [
    (np.zeros(10, np.int64), "dtype"),
    ([1, 2, 3], "list"),
    (np.zeros((4, 4), np.uint8), "dtype"),
])
def test_a_buffer_of_the_wrong_kind_is_a_clear_error(tmp_path, bad, words):
    d = _run(tmp_path)
    with pytest.raises(UsageError, match="reuse") as e:
        read(d, "orders", reuse=bad)
    assert words in str(e.value)


def test_read_only_or_strided_buffers_are_refused(tmp_path):
    d = _run(tmp_path)
    buf = read(d, "orders")
    frozen = buf.copy()
    frozen.flags.writeable = False
    for bad in (frozen, buf[::2]):
        with pytest.raises(UsageError, match="writable 1-D contiguous"):
            read(d, "orders", reuse=bad)
    with pytest.raises(UsageError, match="as_pandas"):
        read(d, "orders", reuse=buf, as_pandas=True)
