"""verify on several threads: the report of one serial walk for any thread count and checkpoint
spacing, defects planted across block boundaries included; damaged files fail alike."""

import os

import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError, UsageError
from exsim.exchange.schema import Event
from exsim.replay import verify
from exsim.replay.verification.split import blocks
from exsim.store.catalog import Catalog
from test_replay_common import SYMBOLS, TamperingEngine, rich_flow, store_run

THREADS = (1, 2, 3)


def _flow(n, seed=9, one_symbol=True):
    flow = rich_flow(n, seed=seed)
    if one_symbol:   # one symbol: 2 and 3 threads cut it into 2 and 3 blocks
        flow["symbol"] = 0
    return flow


def _findings(report) -> tuple:
    """Everything a report says but the time it took."""
    summary = {k: v for k, v in report.summary.items() if "seconds" not in k}
    return report.ok, report.violations, summary


def _reports(data_dir, threads=THREADS, **kw):
    return {n: verify(data_dir, threads=n, **kw) for n in threads}


class _Defects(TamperingEngine):
    """Plants defects in every batch: a fill's quantity, a dropped cancel report, an L2 row, a
    reordered pair of fills; each may sit on either side of a checkpoint, so a block's seed
    (the engine's true book) disagrees with the book the verifier walked into."""

    @staticmethod
    def tamper(res, first):
        fills, l2, events = res.fills, res.l2, res.events
        if fills.size and first % 3 == 0:
            fills[-1]["qty"] += 1
        if events.size and first % 5 == 1:
            hit = np.flatnonzero(events["event"] == Event.CANCELLED)
            if hit.size:
                keep = np.ones(events.size, bool)
                keep[hit[-1]] = False
                events = events[keep]
        if l2.size and first % 7 == 2:
            l2[0]["qty"] += 3
        if fills.size > 1 and first % 11 == 3:
            fills[[0, 1]] = fills[[1, 0]]
        return type(res)(fills, l2, events)


def _tampered_engine():
    eng = _Defects(stp="cancel_resting")
    for name in SYMBOLS:
        eng.add_symbol(name, tick_size=1)
    return eng


def test_a_clean_run_gives_one_report_and_keeps_every_block_checked_ahead(tmp_path):
    store_run(tmp_path, _flow(6000), checkpoint_every=700)
    got = _reports(tmp_path)
    assert got[1].ok and got[1].split["blocks"] == 1
    for n in (2, 3):
        assert _findings(got[n]) == _findings(got[1])
        # every later block started from its checkpoint's seed, and the seed was right
        assert got[n].split["blocks"] == n and got[n].split["kept"] == n - 1
        assert got[n].split["rechecked"] == 0


def test_defects_across_block_boundaries_are_found_as_by_one_serial_walk(tmp_path):
    store_run(tmp_path, _flow(8000, seed=4), engine=_tampered_engine(), checkpoint_every=500)
    got = _reports(tmp_path, threads=(1, 2, 3, 5))
    assert not got[1].ok
    rules = {r for r, n in got[1].summary["violations"].items() if n}
    assert {"overfill", "conservation", "l2_totals"} <= rules
    for n in (2, 3, 5):
        assert _findings(got[n]) == _findings(got[1])
    # the walked book differed from the engine's at some boundary: those blocks were
    # checked again from the state the block before them ended in
    assert sum(got[n].split["rechecked"] for n in (2, 3, 5)) > 0


@pytest.mark.parametrize("every", [230, 900, 2500])
def test_the_report_is_the_same_for_any_checkpoint_spacing(tmp_path, every):
    flow = _flow(5000, seed=12)
    store_run(tmp_path / "ref", flow, engine=_tampered_engine(), checkpoint_every=10_000)
    ref = verify(tmp_path / "ref", threads=1)
    store_run(tmp_path / "run", flow, engine=_tampered_engine(), checkpoint_every=every)
    for n in THREADS:
        assert _findings(verify(tmp_path / "run", threads=n)) == _findings(ref)


def test_several_symbols_checked_on_threads_report_as_serially(tmp_path):
    store_run(tmp_path, rich_flow(6000, seed=21), engine=_tampered_engine(), checkpoint_every=600)
    one = verify(tmp_path, threads=1, max_violations=25)
    assert not one.ok and len(one.violations) == 25
    for n in (2, 3, 8, 13):          # 13 threads, 5 symbols: 3 blocks a symbol
        assert _findings(verify(tmp_path, threads=n, max_violations=25)) == _findings(one)


def test_orders_live_at_the_end_are_reported_in_book_order_for_any_split(tmp_path):
    # every fill's quantity one more: orders still resting at the end do not balance
    class Engine(TamperingEngine):
        @staticmethod
        def tamper(res, first):
            if res.fills.size:
                res.fills["qty"] += 1
            return res
    eng = Engine(stp="cancel_resting")
    for name in SYMBOLS:
        eng.add_symbol(name, tick_size=1)
    store_run(tmp_path, _flow(3000, seed=2), engine=eng, checkpoint_every=400)
    got = _reports(tmp_path, max_violations=1 << 20)
    last = [v for v in got[1].violations if v.rule == "conservation" and v.seq == 3000]
    assert len(last) > 1
    for n in (2, 3):
        assert _findings(got[n]) == _findings(got[1])


def test_a_damaged_segment_fails_alike_on_any_thread_count(tmp_path):
    store_run(tmp_path, _flow(6000, seed=3), checkpoint_every=700)
    cat = Catalog(str(tmp_path), readonly=True)
    segs = sorted((r for r in cat.all_segments() if r["table_name"] == "events"),
                  key=lambda r: r["seq_lo"])
    cat.close()
    path = os.path.join(tmp_path, segs[len(segs) * 2 // 3]["path"])   # in a later block
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    errors = set()
    for n in THREADS:
        with pytest.raises(CorruptionError) as e:
            verify(tmp_path, threads=n)
        errors.add(str(e.value))
    assert len(errors) == 1


def test_a_damaged_checkpoint_only_costs_its_block_its_head_start(tmp_path):
    store_run(tmp_path, _flow(6000, seed=3), checkpoint_every=700)
    ref = verify(tmp_path, threads=1)
    cat = Catalog(str(tmp_path), readonly=True)
    rows = sorted(cat.checkpoints(), key=lambda r: int(r["seq"]))
    cat.close()
    for r in rows[1:]:        # verify never needs a checkpoint: every seed is only a guess
        path = os.path.join(tmp_path, r["path"])
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(path, "wb").write(bytes(data))
    got = verify(tmp_path, threads=3)
    assert _findings(got) == _findings(ref) and got.split["kept"] == 0


def test_threads_must_be_a_positive_integer(tmp_path):
    store_run(tmp_path, _flow(300), checkpoint_every=100)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(UsageError, match="threads"):
            verify(tmp_path, threads=bad)
    assert verify(tmp_path).split["threads"] >= 1


@pytest.mark.parametrize("cuts,n,want", [
    ([], 3, [(1, 100)]),
    ([0, 50], 2, [(1, 50), (51, 100)]),
    ([0, 10, 20, 60, 100], 3, [(1, 20), (21, 60), (61, 100)]),
    ([99], 4, [(1, 99), (100, 100)]),
    ([100, 150], 2, [(1, 100)]),
])
def test_blocks_cut_at_checkpoints_cover_every_seq_once(cuts, n, want):
    got = blocks(1, 100, cuts, n)
    assert got == want
    assert got[0][0] == 1 and got[-1][1] == 100
    assert all(b[0] == a[1] + 1 for a, b in zip(got, got[1:]))


@pytest.mark.parametrize("cores,expected", [(1, 1), (2, 1), (4, 3), (9, 8), (32, 8)])
def test_default_threads_leave_a_core_to_the_reader(monkeypatch, cores, expected):
    from exsim.replay.verification import split as verifier_split

    monkeypatch.setattr(verifier_split.os, "sched_getaffinity", lambda pid: set(range(cores)),
                        raising=False)
    assert verifier_split.default_threads() == expected


def test_spans_read_into_two_rotating_buffers_hold_their_own_rows(tmp_path):
    """The read thread writes span k+1 over span k-1's buffers while span k is checked: every
    span the loop sees holds exactly its own rows, and verify's findings do not depend on how
    many spans (buffer turns) a run is read in."""
    from exsim.replay.verification.split import _Feeder, ranges, read_range
    store_run(tmp_path, _flow(5000, seed=6), engine=_tampered_engine(), checkpoint_every=600)
    spans = ranges(1, 5000, 512)
    feeder = _Feeder(str(tmp_path))
    try:
        seen = 0
        for (lo, hi), t in zip(spans, feeder.tables(0, spans)):
            fresh = read_range(str(tmp_path), 0, lo, hi)
            for name, rows in t.items():
                assert rows.tobytes() == fresh[name].tobytes(), (lo, hi, name)
            seen += 1
        assert seen == len(spans) > 4
    finally:
        feeder.close()
    whole = verify(tmp_path, threads=1)
    assert not whole.ok
    for chunk in (64, 1000):
        assert _findings(verify(tmp_path, threads=1, chunk=chunk)) == _findings(whole)
