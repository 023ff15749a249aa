"""store.read of a data directory while a writer seals, checkpoints, trims and compacts.

A reader sees one consistent snapshot (every row up to some acknowledged seq, exactly once) or
retries; it never returns a short read. Deterministic tests inject the writer's work between the
catalog snapshot and the WAL scan; one test races a real writer thread.
"""

import os
import threading
import time

import numpy as np
import pytest

import exsim.store.query as store_query
from exsim.exchange.errors import CorruptionError, StoreError
from exsim.store import Session, compact, iter_columns, read, read_columns
from exsim.store.catalog import Catalog
from exsim.store.tables import table_dtype
from store_fixtures import FakeEngine, make_orders

N = 400   # orders per batch


def _session(path, **kw):
    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    kw.setdefault("seal_in_background", False)
    return Session.create(str(path), eng, run_info={"scenario": "race", "seed": 1}, **kw)


def _feed(s, batches, seed=0):
    for i in range(batches):
        s.process(make_orders(N, seed=seed + i))


def _contiguous(rows, n):
    return np.array_equal(rows["seq"], np.arange(1, n + 1))


def _inject_once(monkeypatch, work):
    """Run ``work()`` once, right before the reader's WAL scan (which followed the catalog
    snapshot when this race lost rows)."""
    real, done = store_query.scan_wal, []

    def scan(*a, **kw):
        if not done:
            done.append(1)
            work()
        return real(*a, **kw)
    monkeypatch.setattr(store_query, "scan_wal", scan)


def test_a_seal_and_trim_just_before_the_wal_scan_leave_no_gap_in_a_read(tmp_path, monkeypatch):
    s = _session(tmp_path)
    _feed(s, 3)

    def seal_trim_and_go_on():
        s.seal()
        s.checkpoint()   # covers the sealed WAL file: it is trimmed
        _feed(s, 2, seed=10)
    _inject_once(monkeypatch, seal_trim_and_go_on)
    rows = read(str(tmp_path), "orders")
    assert _contiguous(rows, 5 * N)
    s.close()


def test_a_seal_and_trim_of_the_whole_wal_just_before_the_scan_is_not_an_empty_read(tmp_path, monkeypatch):
    s = _session(tmp_path)
    _feed(s, 3)
    _inject_once(monkeypatch, lambda: (s.seal(), s.checkpoint()))
    assert _contiguous(read(str(tmp_path), "events"), 3 * N)
    s.close()


def test_a_seal_and_trim_between_wal_scan_and_snapshot_neither_duplicates_nor_drops_rows(tmp_path, monkeypatch):
    s = _session(tmp_path)
    _feed(s, 3)
    real, done = Catalog.snapshot, []

    def snapshot(self, *a, **kw):
        if not done:
            done.append(1)
            s.seal()
            s.checkpoint()
        return real(self, *a, **kw)
    monkeypatch.setattr(Catalog, "snapshot", snapshot)
    assert _contiguous(read(str(tmp_path), "orders"), 3 * N) and done
    s.close()


def test_unsealed_rows_missing_from_the_wal_are_corruption_not_a_short_read(tmp_path):
    s = _session(tmp_path, wal_rotate_bytes=1)   # one record per WAL file
    _feed(s, 3)
    s.wal.close()
    os.unlink(tmp_path / "wal" / "wal-00000002.log")   # seqs N+1..2N: neither sealed nor in the WAL
    os.unlink(tmp_path / "wal" / "wal-00000001.log")
    with pytest.raises(CorruptionError, match="wal-00000003.log"):
        read(str(tmp_path), "orders")


def test_a_wal_file_trimmed_mid_scan_is_retried(tmp_path, monkeypatch):
    import exsim.store.wal.files as wal_files
    import exsim.store.wal.reader as wal_reader

    s = _session(tmp_path, wal_rotate_bytes=1)   # one record per WAL file
    _feed(s, 3)
    real, opened = wal_files.read_file, []

    def read_file(path):
        opened.append(path)
        if len(opened) == 2:   # file 1 is read: seal, checkpoint and trim before file 2 opens
            s.seal()
            s.checkpoint()
        return real(path)
    monkeypatch.setattr(wal_reader, "read_file", read_file)
    _feed(s, 1, seed=10)
    assert _contiguous(read(str(tmp_path), "orders"), 4 * N)
    assert [os.path.basename(p) for p in opened] == ["wal-00000001.log", "wal-00000002.log"]
    s.close()


def test_a_segment_missing_for_good_raises_a_store_error_naming_the_file(tmp_path):
    s = _session(tmp_path)
    _feed(s, 2)
    s.close()
    cat = Catalog(str(tmp_path))
    rel = cat.snapshot("l2")[1][0]["path"]
    cat.close()
    os.unlink(tmp_path / rel)
    with pytest.raises(StoreError, match=os.path.basename(rel)):
        read(str(tmp_path), "l2")


def test_an_empty_seq_range_over_several_symbols_segments_is_an_empty_array_of_the_table_dtype(tmp_path):
    s = _session(tmp_path)
    _feed(s, 2)
    s.close()
    fills = read(str(tmp_path), "fills")
    gap = np.setdiff1d(np.arange(2, 2 * N), fills["seq"])[N // 2]   # a seq without a fill, mid-run
    out = read(str(tmp_path), "fills", seq=(gap, gap))
    assert out.size == 0 and out.dtype == table_dtype("fills")
    cols = read_columns(str(tmp_path), "fills", seq=(gap, gap), columns=["price"])
    assert cols["price"].size == 0 and cols["price"].dtype == table_dtype("fills").fields["price"][0]
    assert [b for b in iter_columns(str(tmp_path), "fills", seq=(gap, gap))] == []


def test_reads_racing_a_sealing_checkpointing_trimming_compacting_writer_never_have_gaps(tmp_path):
    acked, ready, stop, errors = [0], threading.Event(), threading.Event(), []

    def write():   # why in the thread: a session's catalog connection belongs to its thread
        try:
            s = _session(tmp_path, seal_every=3 * N, checkpoint_every=2 * N, wal_rotate_bytes=4096,
                         durability="none", seal_in_background=True)
            ready.set()
            for i in range(400):
                if stop.is_set():
                    break
                s.process(make_orders(N, seed=i))
                acked[0] = s.engine.seq
                if i % 10 == 9:   # compaction retires segments a reader may have listed
                    s.checkpoint()
                    compact(s, target_rows=6 * N)
            s.close()
        except BaseException as e:   # why: a writer failure must fail the test, not hang it
            errors.append(e)
            ready.set()
    w = threading.Thread(target=write, daemon=True)
    w.start()
    assert ready.wait(30)
    bad, reads, deadline = [], 0, time.monotonic() + 8
    try:
        while time.monotonic() < deadline and w.is_alive():
            for table in ("orders", "l2", "events"):
                before = acked[0]
                rows = read(str(tmp_path), table, columns=["seq"])
                reads += 1
                if rows.size < before or not _contiguous(rows, rows.size):
                    bad.append((table, before, rows.size))
    finally:
        stop.set()
        w.join(10)
    assert not errors and not w.is_alive()
    assert reads >= 20 and not bad, f"{len(bad)} of {reads} reads had gaps or were short: {bad[:5]}"
