"""rerun: a clean run reruns byte for byte (by digest or row by row, with the same report); an
altered or dropped stored row is found with both rows; runs without digests rerun row by row."""

import numpy as np
import pytest

from exsim.exchange.errors import StoreError, UsageError
from exsim.store import read
from exsim.replay import rerun
from exsim.replay.determinism import compare_outputs
from test_replay_common import SYMBOLS, TamperingEngine, rich_flow, store_run


def test_clean_run_reruns_byte_for_byte(tmp_path):
    orders = rich_flow(3000, seed=21)
    store_run(tmp_path, orders, checkpoint_every=600)
    report = rerun(tmp_path, chunk=700, checkpoints="all")
    assert report.ok and report.first_divergence is None
    assert report.counts["orders"] == 3000 and report.counts["fills"] > 0
    assert report.counts["checkpoints"] >= 4


def test_unsealed_wal_tail_is_rerun_too(tmp_path):
    store_run(tmp_path, rich_flow(1200, seed=22), close=False)
    report = rerun(tmp_path, progress=True)
    assert report.ok and report.counts["orders"] == 1200
    assert report.mode == "digest"          # the sealed part by digest, the WAL tail by rows
    _same_report(report, rerun(tmp_path, compare="rows"))


def _same_report(a, b):
    """Two RerunReports say the same: ok, counts, first divergence (table, seq, both rows)."""
    assert (a.ok, a.counts) == (b.ok, b.counts)
    da, db = a.first_divergence, b.first_divergence
    assert (da is None) == (db is None)
    if da is not None:
        assert (da.table, da.seq) == (db.table, db.seq)
        for x, y in ((da.stored_row, db.stored_row), (da.rerun_row, db.rerun_row)):
            assert (x is None) == (y is None)
            if isinstance(x, np.void):
                assert x.tobytes() == y.tobytes()
            else:
                assert x == y


def _engine_with(tamper):
    """An engine whose journaled outputs pass through ``tamper(res, first) -> res``."""
    class Engine(TamperingEngine):
        pass
    Engine.tamper = staticmethod(tamper)
    eng = Engine(stp="cancel_resting")
    for name in SYMBOLS:
        eng.add_symbol(name)
    return eng


def _tampering_engine(table, seq, field="qty"):
    """Journals the first ``table`` row of ``seq`` with ``field`` one higher."""
    def tamper(res, first):
        rows = getattr(res, table)
        hit = np.flatnonzero(rows["seq"] == seq)
        if hit.size:
            rows[hit[0]][field] += 1
        return res
    return _engine_with(tamper)


@pytest.mark.parametrize("table", ["fills", "l2"])
def test_altered_stored_row_is_reported_with_its_seq_and_both_rows(tmp_path, table):
    orders = rich_flow(2000, seed=23)
    store_run(tmp_path / "clean", orders)
    assert rerun(tmp_path / "clean").ok
    seq = int(read(tmp_path / "clean", table)["seq"][40])
    store_run(tmp_path / "bad", orders, engine=_tampering_engine(table, seq))
    report = rerun(tmp_path / "bad")
    div = report.first_divergence
    assert (div.table, div.seq) == (table, seq)
    assert div.stored_row["qty"] == div.rerun_row["qty"] + 1
    assert report.mode == "rows" and "digest" in report.fallback
    _same_report(report, rerun(tmp_path / "bad", compare="rows"))


def test_compare_outputs_reports_a_missing_row():
    from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, EVENT_DTYPE
    a = np.zeros(2, FILL_DTYPE); a["seq"] = [3, 4]
    empty = {"l2": np.zeros(0, L2_DTYPE), "events": np.zeros(0, EVENT_DTYPE)}
    div = compare_outputs({"fills": a[:1], **empty}, {"fills": a, **empty})
    assert (div.table, div.seq, div.stored_row) == ("fills", 4, None)


def test_bad_chunk_and_missing_directory_are_errors(tmp_path):
    with pytest.raises(UsageError):
        rerun(tmp_path, chunk=0)
    with pytest.raises(StoreError):
        rerun(tmp_path / "nope")


def test_compare_columns_finds_the_first_difference_across_blocks():
    from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, EVENT_DTYPE
    from exsim.replay.determinism import compare_columns
    mine = np.zeros(5, FILL_DTYPE); mine["seq"] = [1, 2, 3, 4, 5]; mine["qty"] = 10
    blocks = [{c: mine[c][:2].copy() for c in FILL_DTYPE.names},
              {c: mine[c][2:].copy() for c in FILL_DTYPE.names}]
    empty = {"l2": [], "events": []}
    outs = {"fills": mine, "l2": np.zeros(0, L2_DTYPE), "events": np.zeros(0, EVENT_DTYPE)}
    assert compare_columns({"fills": blocks, **empty}, outs) is None
    blocks[1]["qty"][1] = 11                                  # row 3 (seq 4) differs
    div = compare_columns({"fills": blocks, **empty}, outs)
    assert (div.table, div.seq, div.stored_row["qty"], div.rerun_row["qty"]) == ("fills", 4, 11, 10)
    div = compare_columns({"fills": blocks[:1], **empty}, outs)   # stored side ends early
    assert (div.seq, div.stored_row, div.rerun_row["seq"]) == (3, None, 3)


def test_plan_covers_every_seq_once_starting_short_and_cutting_at_segments():
    from exsim.replay.determinism import _plan
    # segments of 131 messages, shorter than even the first range (chunk / 32 = 200)
    cuts = list(range(130, 20_000, 131))
    plan = _plan(0, 20_000, 6400, {5_000}, cuts)
    assert plan[0][0] == 1 and plan[-1][1] == 20_000
    assert all(b[0] == a[1] + 1 for a, b in zip(plan, plan[1:]))   # no gap, no overlap
    assert plan[0][1] <= 2 * 6400 // 32                              # a short first range
    assert max(hi - lo + 1 for lo, hi in plan) <= 2 * 6400
    ends = {hi for _, hi in plan}
    assert 5_000 in ends                                             # a compared checkpoint
    assert ends <= set(cuts) | {5_000, 20_000}                       # never inside a segment


def test_plan_without_cuts_and_with_a_start():
    from exsim.replay.determinism import _plan
    plan = _plan(100, 1_000, 64, set(), [])
    assert plan[0] == (101, 102) and plan[-1][1] == 1_000            # chunk / 32 first
    assert all(b[0] == a[1] + 1 for a, b in zip(plan, plan[1:]))
    assert _plan(7, 7, 64, set(), []) == []


def test_segment_cuts_never_split_a_segment(tmp_path):
    from exsim.replay.rundir import run_info, segment_cuts
    from exsim.store.catalog import Catalog
    store_run(tmp_path, rich_flow(2600, seed=24), seal_every=400)
    cuts = segment_cuts(run_info(tmp_path), "orders")
    cat = Catalog(str(tmp_path))
    segs = [r for r in cat.all_segments()]
    cat.close()
    assert len(cuts) >= 5 and cuts == sorted(cuts)
    for c in cuts:
        assert all(s["seq_hi"] <= c or s["seq_lo"] > c for s in segs)


def test_divergence_in_a_middle_range_counts_the_ranges_up_to_it(tmp_path):
    orders = rich_flow(3000, seed=25)
    seq = 1_777
    store_run(tmp_path, orders, engine=_tampering_engine("events", seq, "leaves_qty"))
    report = rerun(tmp_path, chunk=160)
    div = report.first_divergence
    assert (div.table, div.seq) == ("events", seq)
    assert seq <= report.counts["orders"] < seq + 2 * 160 and report.counts["checkpoints"] == 0
    assert report.mode == "rows"
    _same_report(report, rerun(tmp_path, chunk=160, compare="rows"))


class _BadCheckpointEngine(TamperingEngine):
    """Journals true outputs but checkpoints with the first live order's quantity plus one."""

    def checkpoint(self):
        import struct

        import crc32c
        blob = bytearray(super().checkpoint())
        hlen = struct.unpack_from("<I", blob, 12)[0]
        rows_at = 16 + hlen + 8
        if struct.unpack_from("<Q", blob, rows_at - 8)[0] == 0:
            return bytes(blob)
        from exsim.exchange.schema import CHECKPOINT_DTYPE
        q = rows_at + CHECKPOINT_DTYPE.fields["qty"][1]
        struct.pack_into("<q", blob, q, struct.unpack_from("<q", blob, q)[0] + 1)
        struct.pack_into("<I", blob, len(blob) - 4, crc32c.crc32c(bytes(blob[:-4])))
        return bytes(blob)


@pytest.mark.parametrize("mode", ["last", "all"])
def test_a_stored_checkpoint_that_differs_is_reported(tmp_path, mode):
    eng = _BadCheckpointEngine(stp="cancel_resting")
    for name in SYMBOLS:
        eng.add_symbol(name)
    store_run(tmp_path, rich_flow(2000, seed=26), engine=eng, checkpoint_every=600)
    from exsim.replay.rundir import run_info
    info = run_info(tmp_path)
    report = rerun(tmp_path, chunk=300, checkpoints=mode)
    div = report.first_divergence
    assert div.table == "checkpoint" and div.stored_row != div.rerun_row
    assert div.seq == (info.checkpoints[-1] if mode == "last" else info.checkpoints[1])
    assert report.counts["orders"] == div.seq - info.first_seq
    _same_report(report, rerun(tmp_path, chunk=300, checkpoints=mode, compare="rows"))
    clean = rerun(tmp_path, checkpoints="none")
    assert clean.ok and clean.mode == "digest"


def test_checkpoint_shortcut_agrees_with_the_engine_bytes():
    import crc32c
    from exsim.replay.determinism import _same_state
    from test_replay_common import make_engine
    eng = make_engine()
    eng.process(rich_flow(1500, seed=27))
    blob = eng.checkpoint()
    assert eng.live_orders > 0 and _same_state(eng, blob)
    rows_at = 24 + int.from_bytes(blob[12:16], "little")
    bad = bytearray(blob)
    bad[rows_at + 3] ^= 1                                      # a row byte, CRC left stale
    assert not _same_state(eng, bytes(bad))
    bad[-4:] = crc32c.crc32c(bytes(bad[:-4])).to_bytes(4, "little")   # ... and CRC fixed
    assert not _same_state(eng, bytes(bad))
    eng.process(rich_flow(10, seed=28, ts0=10**9))            # the engine moves on
    assert not _same_state(eng, blob)


def _dropping_engine(table, seq):
    """Journals every output but the first ``table`` row of ``seq`` (the store lacks it)."""
    def tamper(res, first):
        rows = getattr(res, table)
        hit = np.flatnonzero(rows["seq"] == seq)
        return res._replace(**{table: np.delete(rows, hit[0])}) if hit.size else res
    return _engine_with(tamper)


@pytest.mark.parametrize("table", ["fills", "events"])
def test_a_dropped_stored_row_is_found_by_the_digest_pass_and_reported_as_by_rows(tmp_path, table):
    orders = rich_flow(2000, seed=29)
    store_run(tmp_path / "clean", orders)
    seq = int(read(tmp_path / "clean", table)["seq"][300])
    store_run(tmp_path / "bad", orders, engine=_dropping_engine(table, seq))
    report = rerun(tmp_path / "bad", chunk=400)
    assert not report.ok and report.mode == "rows" and "digest" in report.fallback
    assert (report.first_divergence.table, report.first_divergence.seq) == (table, seq)
    _same_report(report, rerun(tmp_path / "bad", chunk=400, compare="rows"))


@pytest.mark.parametrize("n_symbols", [1, 3])
def test_digest_mode_equals_rows_mode_on_clean_runs_with_compaction(tmp_path, n_symbols):
    from exsim.store import compact
    store_run(tmp_path, rich_flow(2500, seed=30, n_symbols=n_symbols), seal_every=300,
              checkpoint_every=900)
    rows = rerun(tmp_path, chunk=500, checkpoints="all", compare="rows")
    digest = rerun(tmp_path, chunk=500, checkpoints="all")
    assert rows.ok and (rows.mode, digest.mode) == ("rows", "digest") and digest.fallback == ""
    _same_report(digest, rows)
    assert compact(tmp_path, target_rows=2000)
    after = rerun(tmp_path, chunk=500, checkpoints="all")
    assert after.mode == "digest"
    _same_report(after, rows)


def _set_digest(data_dir, value, table="l2", which=1):
    """Overwrite the digest of one ``table`` segment (the which-th by seq) in the catalog."""
    from exsim.store.catalog import Catalog
    cat = Catalog(str(data_dir))
    seg = sorted((r for r in cat.all_segments() if r["table_name"] == table),
                 key=lambda r: r["seq_lo"])[which]
    with cat.db.conn:
        cat.db.execute("UPDATE segments SET digest = ? WHERE id = ?", [value, seg["id"]])
    cat.close()
    return seg


def test_runs_sealed_without_digests_rerun_row_by_row(tmp_path):
    import sqlite3
    store_run(tmp_path, rich_flow(1500, seed=31))
    seg = _set_digest(tmp_path, "")                        # one segment without a digest
    report = rerun(tmp_path)
    assert report.ok and report.mode == "rows" and seg["path"] in report.fallback
    con = sqlite3.connect(tmp_path / "catalog.sqlite")     # a catalog from before digests
    con.execute("ALTER TABLE segments DROP COLUMN digest")
    con.commit()
    con.close()
    old = rerun(tmp_path)
    assert old.ok and old.mode == "rows" and "no row digest" in old.fallback
    _same_report(old, rerun(tmp_path, compare="rows"))


def test_a_wrong_recorded_digest_is_settled_by_the_rows(tmp_path):
    store_run(tmp_path, rich_flow(1500, seed=32))
    seg = _set_digest(tmp_path, "xxh3_128:" + "0" * 32)
    report = rerun(tmp_path)
    # the digest pass flags the segment; the stored rows equal the rerun's, so rows say ok
    assert report.ok and report.mode == "rows" and seg["path"] in report.fallback
    with pytest.raises(UsageError):
        rerun(tmp_path, compare="digest")


@pytest.mark.parametrize("table,which", [("fills", 0), ("l2", -1), ("events", 2)])
def test_a_damaged_output_file_is_reported_as_when_its_rows_are_read(tmp_path, table, which):
    import os
    from exsim.exchange.errors import CorruptionError
    from exsim.store.segment import check_segment
    from exsim.store.catalog import Catalog
    store_run(tmp_path, rich_flow(1500, seed=33))
    cat = Catalog(str(tmp_path))
    segs = sorted((r for r in cat.all_segments() if r["table_name"] == table),
                  key=lambda r: r["seq_lo"])
    cat.close()
    path = os.path.join(tmp_path, segs[which]["path"])
    assert check_segment(path) is None
    data = bytearray(open(path, "rb").read())
    data[len(data) // 3] ^= 0xFF                      # inside a column block
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptionError, match=os.path.basename(path)):
        check_segment(path)
    with pytest.raises(CorruptionError) as by_digest:
        rerun(tmp_path)
    with pytest.raises(CorruptionError) as by_rows:
        rerun(tmp_path, compare="rows")
    assert str(by_digest.value) == str(by_rows.value)
