"""store.scratch: ``read`` decodes into memory it reuses from one call to the next. What a user
relies on: every row a read returns stays what it was after later reads on the same thread (or
others), and reads through reused memory return the bytes a fresh decode does."""

import threading

import numpy as np

from exsim.store import Reader, read, read_columns
from exsim.store import scratch as S
from store_fixtures import sealed_run


def _run(tmp_path, batches=4, n=3000):
    return sealed_run(tmp_path, "scratch", batches, n, seed=40)


def test_rows_a_read_returned_survive_later_reads(tmp_path):
    d = _run(tmp_path)
    with Reader(d) as r:
        first = read(r, "orders", seq=(1, 6000))
        # why field by field: a structured copy leaves its padding bytes undefined
        kept = {c: first[c].copy() for c in first.dtype.names}
        for table in ("orders", "events", "l2", "fills", "orders"):
            read(r, table)                          # reuses the memory the first read decoded into
            read(r, table, symbol="B", seq=(100, 9000))
        assert all(np.array_equal(first[c], kept[c]) for c in first.dtype.names)
        assert first.tobytes() == read(d, "orders", seq=(1, 6000)).tobytes()   # padding too
        # the bytes equal those of columns decoded into fresh arrays
        cols = read_columns(d, "orders", seq=(1, 6000))
        for c in first.dtype.names:
            assert np.array_equal(first[c], cols[c])


def test_reads_on_threads_each_use_their_own_memory(tmp_path):
    d = _run(tmp_path)
    want = {t: read(d, t).tobytes() for t in ("orders", "events")}
    got, errors = [], []

    def worker(table):
        try:
            for _ in range(5):
                got.append((table, read(d, table).tobytes()))
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in ("orders", "events") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 20
    assert all(b == want[t] for t, b in got)


def test_a_scratch_hands_out_disjoint_arrays_and_grows_to_what_was_asked():
    s = S.Scratch()
    a = s.take(1000, np.int64)          # no memory yet: fresh arrays
    b = s.take(333, np.uint8)
    assert a.size == 1000 and not np.shares_memory(a, s._mem)
    s.reset()                           # grows to what the read asked for
    a, b = s.take(1000, np.int64), s.take(333, np.uint8)
    c = s.take(10, np.uint32)           # past what was asked before: fresh
    assert np.shares_memory(a, s._mem) and np.shares_memory(b, s._mem)
    assert not np.shares_memory(a, b) and not np.shares_memory(c, s._mem)
    a[:] = 7
    b[:] = 1
    assert (a == 7).all() and a.ctypes.data % 64 == 0 and b.ctypes.data % 64 == 0
    s.reset()
    assert s._mem.size >= 1000 * 8 + 333 + 10 * 4    # the next read's three fit


def test_a_borrow_inside_a_borrow_gets_other_memory_and_large_reads_are_not_kept():
    with S.borrowed() as outer:
        with S.borrowed() as inner:
            assert inner is not outer
    s = S.Scratch()
    s.take(S.RETAIN_BYTES + 1, np.uint8)
    s.reset()
    assert s._mem.size == 0             # more than a thread keeps: not retained
