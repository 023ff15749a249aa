"""Session: journaling, reading sealed and unsealed rows, reopening, checkpoints, compaction."""

import os

import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError, StoreError, UsageError
from exsim.store import Session, compact, read
from exsim.store.catalog import Catalog
from exsim.store.tables import orders_with_seq
from store_fixtures import FakeEngine, make_orders


def _session(path, **kw):
    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    return Session.create(str(path), eng, run_info={"scenario": "test", "seed": 1}, **kw)


def _feed(s, batches=4, n=500, seed=0):
    out = []
    for i in range(batches):
        o = make_orders(n, seed=seed + i)
        first = s.engine.seq + 1
        out.append((first, o, s.process(o)))
    return out


def _all(fed, table):
    if table == "orders":
        return np.concatenate([orders_with_seq(o, f) for f, o, _ in fed])
    return np.concatenate([getattr(r, table) for _, _, r in fed])


@pytest.mark.parametrize("table", ["orders", "fills", "l2", "events"])
def test_read_returns_unsealed_rows_then_the_same_rows_once_sealed(tmp_path, table):
    s = _session(tmp_path)
    fed = _feed(s)
    assert np.array_equal(s.read(table), _all(fed, table))
    s.seal()
    assert np.array_equal(read(str(tmp_path), table), _all(fed, table))
    s.close()


def test_reopen_restores_the_engine_and_continues_with_the_next_seq(tmp_path):
    s = _session(tmp_path, checkpoint_every=700)
    _feed(s, batches=3)
    h, seq = s.engine.state_hash(), s.engine.seq
    s.wal.close()                 # simulate a crash: no seal, no final checkpoint
    s2 = Session.open(str(tmp_path))
    assert s2.engine.state_hash() == h and s2.engine.seq == seq
    fed = _feed(s2, batches=1, seed=10)
    assert fed[0][0] == seq + 1
    s2.close()


def test_symbol_seq_and_ts_ranges_are_inclusive(tmp_path):
    s = _session(tmp_path, seal_every=600)
    fed = _feed(s)
    allrows = _all(fed, "l2")
    got = s.read("l2", symbol="B", seq=(100, 1300))
    want = allrows[(allrows["symbol"] == 1) & (allrows["seq"] >= 100) & (allrows["seq"] <= 1300)]
    assert np.array_equal(got, want)
    lo, hi = allrows["ts"][10], allrows["ts"][1700]
    assert np.array_equal(s.read("l2", ts=(lo, hi)), allrows[(allrows["ts"] >= lo) & (allrows["ts"] <= hi)])
    s.close()


def test_columns_selects_fields_in_table_order(tmp_path):
    s = _session(tmp_path)
    _feed(s, batches=1)
    got = s.read("fills", columns=["qty", "seq"])
    assert got.dtype.names == ("seq", "qty")
    with pytest.raises(UsageError):
        s.read("fills", columns=["nope"])
    s.close()


def test_close_seals_everything_and_trims_the_wal(tmp_path):
    s = _session(tmp_path)
    _feed(s)
    s.close()
    assert os.listdir(tmp_path / "wal") == []
    cat = Catalog(str(tmp_path))
    assert cat.sealed_through() == 2000 and cat.latest_checkpoint()["seq"] == 2000
    assert {r["table_name"] for r in cat.all_segments()} == {"orders", "fills", "l2", "events"}


def test_wal_files_are_kept_until_sealed_and_checkpointed(tmp_path):
    s = _session(tmp_path, seal_every=1000, checkpoint_every=10**9, wal_rotate_bytes=1)
    _feed(s)
    assert len(os.listdir(tmp_path / "wal")) >= 4   # sealed, but no checkpoint covers them yet
    s.checkpoint()
    assert len(os.listdir(tmp_path / "wal")) <= 1
    s.close()


def test_catalog_records_run_symbols_and_segment_encodings(tmp_path):
    s = _session(tmp_path)
    _feed(s, batches=1)
    s.close()
    cat = Catalog(str(tmp_path))
    assert cat.symbol_id("C") == 2
    run = next(cat.db["runs"].rows)
    assert run["scenario"] == "test" and run["seed"] == 1
    assert all("seq" in r["encodings"] and r["path"].endswith(".seg") for r in cat.all_segments())


def test_compaction_merges_small_segments_without_changing_any_read(tmp_path):
    s = _session(tmp_path, seal_every=300)
    _feed(s, batches=6, n=300)
    before = {t: s.read(t) for t in ("orders", "l2", "fills", "events")}
    n_before = len(s.catalog.all_segments())
    made = compact(s, target_rows=1000)
    assert made and len(s.catalog.all_segments()) < n_before
    assert all(r["rows"] <= 1000 for r in s.catalog.all_segments())
    assert all(np.array_equal(s.read(t), before[t]) for t in before)
    assert {r["codec"] for r in s.catalog.all_segments() if r["tier"] == 1} == {"zstd"}
    s.close()


def test_compacted_inputs_are_deleted_and_orphans_removed_on_open(tmp_path):
    s = _session(tmp_path, seal_every=300)
    _feed(s, batches=4, n=300)
    compact(s)
    s.close()
    orphan = tmp_path / "segments" / "l2" / "0" / "000000000001-000000000002-deadbeef.seg"
    orphan.write_bytes(b"x")
    s2 = Session.open(str(tmp_path))
    files = {os.path.relpath(os.path.join(d, f), tmp_path) for d, _, fs in os.walk(tmp_path / "segments") for f in fs}
    assert files == {r["path"] for r in s2.catalog.all_segments()}
    s2.close()


def test_create_refuses_an_existing_directory_and_open_a_missing_one(tmp_path):
    _session(tmp_path).close()
    with pytest.raises(UsageError):
        _session(tmp_path)
    with pytest.raises(StoreError):
        Session.open(str(tmp_path / "nothing"))


def test_corrupt_checkpoint_is_detected_on_open(tmp_path):
    s = _session(tmp_path)
    _feed(s, batches=1)
    s.close()
    path = tmp_path / Catalog(str(tmp_path)).latest_checkpoint()["path"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="ckpt-"):
        Session.open(str(tmp_path))


def test_a_session_after_close_refuses_batches(tmp_path):
    s = _session(tmp_path)
    s.close()
    with pytest.raises(StoreError):
        s.process(make_orders(3))


def test_catalog_keeps_fractional_tick_sizes(tmp_path):
    eng = FakeEngine()
    eng.add_symbol("BTCUSDT")
    cfg = {"stp": "none", "symbols": [{"name": "BTCUSDT", "id": 0, "tick_size": 0.01}]}
    cat = Catalog(str(tmp_path), create=True)
    cat.set_symbols(cfg)
    assert cat.symbols()[0]["tick_size"] == 0.01
    assert cat.db.execute("SELECT tick_size FROM symbols").fetchone()[0] == 0.01


def test_old_catalog_with_a_truncated_tick_size_reads_it_from_the_symbol_info(tmp_path):
    cat = Catalog(str(tmp_path), create=True)
    cat.db.execute("DROP TABLE symbols")
    cat.db["symbols"].create({"id": int, "name": str, "tick_size": int, "info": str}, pk="id")
    cat.db["symbols"].insert({"id": 0, "name": "X", "tick_size": 0,   # what old code wrote for 0.01
                              "info": '{"name": "X", "id": 0, "tick_size": 0.01}'})
    assert cat.symbols() == [{"id": 0, "name": "X", "tick_size": 0.01,
                              "info": {"name": "X", "id": 0, "tick_size": 0.01}}]
    cat.set_symbols({"symbols": [{"name": "X", "id": 0, "tick_size": 0.05}]})   # INTEGER column
    assert cat.symbols()[0]["tick_size"] == 0.05


def test_a_failed_background_seal_is_reported_and_its_rows_stay_readable(tmp_path, monkeypatch):
    import exsim.store.sealing as session_mod
    from exsim.exchange.errors import WriteError

    real = session_mod.commit_segments

    def full(*a, **kw):
        raise WriteError("cannot write segment: No space left on device")

    monkeypatch.setattr(session_mod, "commit_segments", full)
    s = _session(tmp_path, seal_every=1000)
    fed = _feed(s, batches=2)            # the second batch starts a background seal, which fails
    s._sealing.thread.join()
    with pytest.raises(WriteError, match="journaled, but cannot write segment"):
        _feed(s, batches=1, seed=2)      # ... and the next call reports it
    assert Catalog(str(tmp_path)).all_segments() == []
    assert sum(r.orders.size for r in s.unsealed_records()) == 1500
    monkeypatch.setattr(session_mod, "commit_segments", real)
    s.close()
    want = _all(fed, "fills")   # the first two batches' fills lead the sealed ones
    assert np.array_equal(read(str(tmp_path), "fills")[:want.size], want)
    assert read(str(tmp_path), "orders").size == 1500


def test_results_stay_intact_while_later_batches_reuse_the_copy_buffers(tmp_path):
    s = _session(tmp_path, seal_every=1000)
    s._arena.chunk = 64 << 10          # small chunks: many are retired and offered for reuse
    fed = _feed(s, batches=12, n=400)
    kept = [(f, o, r) for f, o, r in fed[::3]]
    snapshot = [r.fills.copy() for _, _, r in kept]
    del fed
    _feed(s, batches=12, n=400, seed=50)
    assert all(np.array_equal(r.fills, want) for (_, _, r), want in zip(kept, snapshot))
    assert not kept[0][2].fills.flags.writeable
    s.close()


def test_process_many_yields_what_process_returns_and_reopens_identically(tmp_path):
    batches = [make_orders(300, seed=i) for i in range(9)]
    ref = _session(tmp_path / "a", seal_every=700, checkpoint_every=1000)
    want = [ref.process(o) for o in batches]
    ref.close()
    s = _session(tmp_path / "b", seal_every=700, checkpoint_every=1000)
    got = list(s.process_many(batches, depth=3))
    s.close()
    for w, g in zip(want, got):
        assert all(np.array_equal(getattr(w, t), getattr(g, t)) for t in ("fills", "l2", "events"))
    for t in ("orders", "fills", "l2", "events"):
        assert np.array_equal(read(str(tmp_path / "a"), t), read(str(tmp_path / "b"), t)), t
    s = Session.open(str(tmp_path / "b"))
    assert s.engine.seq == 2700
    s.close()


def _slow_fsync(monkeypatch, seconds):
    import exsim.store.wal.writer as wal_mod

    real = os.fsync
    monkeypatch.setattr(wal_mod.os, "fsync", lambda fd: (__import__("time").sleep(seconds), real(fd)))


def test_process_many_left_early_keeps_every_journaled_batch(tmp_path, monkeypatch):
    _slow_fsync(monkeypatch, 0.05)   # why: the first batch is still in flight when the third is matched
    s = _session(tmp_path, seal_every=10**9)
    batches = [make_orders(200, seed=i) for i in range(6)]
    it = s.process_many(batches, depth=3)
    next(it)
    with pytest.raises(UsageError):
        s.process(batches[0])
    it.close()                          # two more batches were matched and journaled meanwhile
    assert s.engine.seq == sum(r.orders.size for r in s.unsealed_records()) == 600
    s.close()
    assert read(str(tmp_path), "orders").size == 600


def test_process_many_commits_queued_batches_with_one_fsync_and_loses_none(tmp_path, monkeypatch):
    _slow_fsync(monkeypatch, 0.03)   # fsyncs slower than matching: batches queue up behind one
    batches = [make_orders(200, seed=i) for i in range(10)]
    s = _session(tmp_path, seal_every=10**9)
    got = list(s.process_many(batches, depth=6))
    records, groups = s.wal_groups
    assert records == 10 and groups < records
    s.close()
    s = Session.open(str(tmp_path))
    assert s.engine.seq == 2000 and len(got) == 10
    assert read(str(tmp_path), "orders").size == 2000
    s.close()


def _real_engine():
    from exsim.exchange import Engine

    eng = Engine(stp="cancel_resting")
    eng.add_symbol("AAA", tick_size=1)
    eng.add_symbol("BBB", tick_size=1)
    return eng


@pytest.mark.parametrize("parts,room", [(None, None), (3, None), (3, 0.0)])
def test_batches_journaled_in_parts_equal_whole_batches_and_reopen_identically(tmp_path, parts, room):
    from exsim.scenarios.generators.uniform import uniform_flow

    import exsim.store.wal as wal_mod

    flow = uniform_flow(30000, 5, n_symbols=2)
    whole = Session.create(str(tmp_path / "a"), _real_engine(), journal_parts=1, seal_every=10**9)
    want = [whole.process(flow[i:i + 15000]) for i in range(0, flow.size, 15000)]
    whole.close()
    s = Session.create(str(tmp_path / "b"), _real_engine(), journal_parts=parts, seal_every=10**9)
    if room is not None:   # no room guessed: every table outgrows it and is joined by a copy
        s._rows_per_msg = dict.fromkeys(s._rows_per_msg, room)
    got = [s.process(flow[i:i + 15000]) for i in range(0, flow.size, 15000)]
    assert s._parts == (parts or 8)           # None: the real engine gets parts by default
    for w, g in zip(want, got):
        assert all(np.array_equal(getattr(w, t), getattr(g, t)) for t in ("fills", "l2", "events"))
    s.wal.close()                             # crash: nothing sealed, everything in the WAL
    recs, _ = wal_mod.scan_wal(str(tmp_path / "b" / "wal"))
    assert [r.first_seq for r in recs] == [1, 15001]
    s = Session.open(str(tmp_path / "b"))     # replays each multi-part record as one batch
    assert s.engine.seq == 30000
    s.close()
    for t in ("orders", "fills", "l2", "events"):
        assert np.array_equal(read(str(tmp_path / "a"), t), read(str(tmp_path / "b"), t)), t


def test_journal_parts_must_be_a_positive_integer(tmp_path):
    with pytest.raises(UsageError, match="journal_parts"):
        _session(tmp_path, journal_parts=0)


@pytest.mark.parametrize("bad", [np.zeros(10000, np.int64), [1, 2, 3]])
def test_a_batch_the_engine_refuses_leaves_a_parts_session_usable(tmp_path, bad):
    from exsim.scenarios.generators.uniform import uniform_flow

    s = Session.create(str(tmp_path), _real_engine(), journal_parts=4, seal_every=10**9)
    with pytest.raises(UsageError, match="ORDER_DTYPE"):
        s.process(bad)
    s.process(uniform_flow(10000, 1, n_symbols=2))   # nothing was matched: the session goes on
    assert s.engine.seq == 10000
    s.close()


def _emitted(fed, table, symbol, lo, hi):
    """The rows the engine emitted for ``table`` and ``symbol`` with lo <= seq <= hi, in order."""
    rows = _all(fed, table)
    return rows[(rows["symbol"] == symbol) & (rows["seq"] >= lo) & (rows["seq"] <= hi)]


def _check_digests(cat, fed):
    from exsim.store.digest import digest_rows
    segs = cat.all_segments()
    assert {r["digest"] for r in segs if r["table_name"] == "orders"} == {""}
    outs = [r for r in segs if r["table_name"] != "orders"]
    assert len({r["symbol"] for r in outs}) > 1          # several symbols: the split is covered
    for r in outs:
        want = _emitted(fed, r["table_name"], r["symbol"], r["seq_lo"], r["seq_hi"])
        assert want.size == r["rows"]
        assert r["digest"] == digest_rows(r["table_name"], want), r["path"]
    return outs


@pytest.mark.parametrize("background", [True, False])
def test_seal_records_the_digest_of_each_output_segments_emitted_rows(tmp_path, background):
    s = _session(tmp_path, seal_every=400, seal_in_background=background)
    fed = _feed(s, batches=5, n=300)
    s.close()
    cat = Catalog(str(tmp_path))
    assert len(_check_digests(cat, fed)) > 6
    cat.close()


def test_compaction_records_the_digest_of_the_merged_rows(tmp_path):
    s = _session(tmp_path, seal_every=300)
    fed = _feed(s, batches=6, n=300)
    made = compact(s, target_rows=1000)
    assert any(m.table != "orders" and m.digest for m in made)
    assert all(bool(m.digest) == (m.table != "orders") for m in made)
    _check_digests(s.catalog, fed)
    s.close()


def test_a_catalog_without_the_digest_column_opens_and_gets_it(tmp_path):
    import sqlite3
    s = _session(tmp_path, seal_every=300)
    fed = _feed(s, batches=2, n=300)
    s.close()
    con = sqlite3.connect(tmp_path / "catalog.sqlite")    # as written before row digests
    con.execute("ALTER TABLE segments DROP COLUMN digest")
    con.commit()
    con.close()
    s = Session.open(str(tmp_path), seal_every=300)
    old = {r["path"] for r in s.catalog.all_segments()}
    assert {r["digest"] for r in s.catalog.all_segments()} == {""}
    fed += _feed(s, batches=2, n=300, seed=5)
    s.close()
    cat = Catalog(str(tmp_path))
    new = [r for r in cat.all_segments() if r["path"] not in old and r["table_name"] != "orders"]
    assert new and all(r["digest"].startswith("xxh3_128:") for r in new)
    cat.close()


def test_journaled_through_counts_unsealed_wal_records_decoding_only_the_last(tmp_path, monkeypatch):
    import exsim.store.wal.reader as reader
    from exsim.store import journaled_through

    s = _session(tmp_path, seal_every=10**9, checkpoint_every=10**9)
    _feed(s, batches=3)
    s.seal()
    _feed(s, batches=4, seed=5)                       # 2000 messages only in the WAL
    decoded = []
    real = reader.decode_batch
    monkeypatch.setattr(reader, "decode_batch", lambda t, p, *v: (decoded.append(t), real(t, p, *v))[1])
    assert journaled_through(str(tmp_path)) == s.engine.seq == 3500
    # the last record is decoded: no next record checks where its header says the journal
    # ends (a header forged to claim more orders: test_store_wal_hostile.py)
    assert len(decoded) == 1
    s.close()
    assert journaled_through(str(tmp_path)) == 3500
