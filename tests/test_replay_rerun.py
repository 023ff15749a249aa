"""rerun: a clean run reruns byte for byte; an altered stored row is found with both rows."""

import numpy as np
import pytest

from exchange.errors import StoreError, UsageError
from store import read
from replay import rerun
from replay.rerun import compare_outputs
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


def _tampering_engine(table, seq):
    class Engine(TamperingEngine):
        @staticmethod
        def tamper(res, first):
            rows = getattr(res, table)
            hit = np.flatnonzero(rows["seq"] == seq)
            if hit.size:
                rows[hit[0]]["qty"] += 1
            return res
    eng = Engine(stp="cancel_resting")
    for name in SYMBOLS:
        eng.add_symbol(name)
    return eng


@pytest.mark.parametrize("table", ["fills", "l2"])
def test_altered_stored_row_is_reported_with_its_seq_and_both_rows(tmp_path, table):
    orders = rich_flow(2000, seed=23)
    store_run(tmp_path / "clean", orders)
    assert rerun(tmp_path / "clean").ok
    seq = int(read(tmp_path / "clean", table)["seq"][40])
    store_run(tmp_path / "bad", orders, engine=_tampering_engine(table, seq))
    div = rerun(tmp_path / "bad").first_divergence
    assert (div.table, div.seq) == (table, seq)
    assert div.stored_row["qty"] == div.rerun_row["qty"] + 1


def test_compare_outputs_reports_a_missing_row():
    from exchange.schema import FILL_DTYPE, L2_DTYPE, EVENT_DTYPE
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
    from exchange.schema import FILL_DTYPE, L2_DTYPE, EVENT_DTYPE
    from replay.rerun import compare_columns
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
