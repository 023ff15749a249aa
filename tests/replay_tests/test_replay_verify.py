"""verify: a clean run passes; each planted defect is caught by its rule at its seq."""

import numpy as np
import pytest

from exsim.exchange.errors import UsageError, VerificationError
from exsim.replay import verify, verify_arrays
from test_replay_common import TamperingEngine, SYMBOLS, make_engine, rich_flow, store_run

STP = "cancel_resting"


@pytest.fixture(scope="module")
def tables():
    """A 20,000-message run's orders and outputs (fills, l2, events) straight from the engine."""
    orders = rich_flow(20_000, seed=5)
    res = make_engine(STP).process(orders)
    return orders, res.fills, res.l2, res.events


def _check(orders, fills, l2, events, stp=STP):
    return verify_arrays(orders, fills, l2, events, stp=stp, symbols=range(len(SYMBOLS)),
                         ownership=True)   # make_engine enforces ownership, as Engine does


def _rules_at(report, seq):
    return {v.rule for v in report.violations if v.seq == seq}


@pytest.mark.parametrize("stp", ["none", "cancel_resting", "cancel_incoming", "cancel_both"])
def test_clean_engine_output_verifies_under_every_stp_mode(stp):
    orders = rich_flow(8000, seed=7)
    res = make_engine(stp).process(orders)
    report = _check(orders, *res, stp=stp)
    assert report.ok and report.violations == []
    assert report.summary["fills"] == res.fills.size and report.summary["orders"] == 8000


def test_changed_fill_price_breaks_resting_price(tables):
    orders, fills, l2, events = tables
    bad = fills.copy()
    bad[100]["price"] += 1
    assert "resting_price" in _rules_at(_check(orders, bad, l2, events), int(bad[100]["seq"]))


def test_changed_fill_qty_breaks_reports_and_overfills(tables):
    orders, fills, l2, events = tables
    bad = fills.copy()
    bad[100]["qty"] += 1000
    rules = _rules_at(_check(orders, bad, l2, events), int(bad[100]["seq"]))
    assert {"overfill", "events_fills", "conservation"} <= rules


def test_dropped_fill_leaves_reports_without_a_deal(tables):
    orders, fills, l2, events = tables
    report = _check(orders, np.delete(fills, 100), l2, events)
    assert {"events_fills", "conservation"} <= _rules_at(report, int(fills[100]["seq"]))


def test_swapped_fills_at_one_level_break_fifo(tables):
    orders, fills, l2, events = tables
    j = np.flatnonzero((fills["seq"][1:] == fills["seq"][:-1])
                       & (fills["price"][1:] == fills["price"][:-1]))[0]
    bad = fills.copy()
    bad[[j, j + 1]] = bad[[j + 1, j]]
    assert "fifo" in _rules_at(_check(orders, bad, l2, events), int(fills[j]["seq"]))


def test_altered_l2_row_breaks_only_l2_totals(tables):
    orders, fills, l2, events = tables
    bad = l2.copy()
    bad[100]["qty"] += 1
    report = _check(orders, fills, bad, events)
    assert {v.rule for v in report.violations} == {"l2_totals"}
    assert report.violations[0].seq == int(l2[100]["seq"])


def test_summary_counts_every_rule_and_raise_if_failed_raises(tables):
    orders, fills, l2, events = tables
    bad = l2.copy()
    bad[5]["count"] += 1
    report = _check(orders, fills, bad, events)
    assert report.summary["violations"]["l2_totals"] == 1
    assert len(report.summary["rules_checked"]) == len(report.summary["violations"])
    with pytest.raises(VerificationError, match="l2_totals"):
        report.raise_if_failed()


def test_verify_reads_a_stored_run_and_passes(tmp_path):
    store_run(tmp_path, rich_flow(3000, seed=9))
    report = verify(tmp_path, progress=True)
    assert report.ok and report.summary["orders"] == 3000 and report.summary["symbols"] == 4


def test_verify_finds_a_defect_planted_in_the_store(tmp_path):
    class Engine(TamperingEngine):
        @staticmethod
        def tamper(res, first):
            if res.fills.size:
                res.fills[0]["price"] += 2
            return res
    eng = Engine(stp=STP)
    for name in SYMBOLS:
        eng.add_symbol(name)
    store_run(tmp_path, rich_flow(1500, seed=9), engine=eng)
    report = verify(tmp_path)
    assert not report.ok and report.summary["violations"]["resting_price"] > 0
    # read and checked in small seq ranges (state carried across): the very same report
    small = verify(tmp_path, chunk=97)
    assert small.violations == report.violations
    assert small.summary["violations"] == report.summary["violations"]
    assert small.summary["fills"] == report.summary["fills"]


def test_verify_chunk_must_be_positive(tmp_path):
    store_run(tmp_path, rich_flow(300, seed=9))
    assert verify(tmp_path, chunk=1).ok
    with pytest.raises(UsageError, match="chunk"):
        verify(tmp_path, chunk=0)


def test_wrong_dtype_is_a_usage_error(tables):
    orders, fills, l2, events = tables
    with pytest.raises(UsageError):
        verify_arrays(orders, l2, fills, events)


@pytest.mark.parametrize("first,last,chunk", [(1, 2_000_000, 1 << 20), (1, 300, 97), (5, 5, 1),
                                              (1, 10, 1), (101, 100, 7)])
def test_read_ranges_cover_every_seq_once_and_start_short(first, last, chunk):
    from exsim.replay.verification.split import ranges as _ranges

    got = _ranges(first, last, chunk)
    if last < first:
        assert got == [(1, 0)]
        return
    seqs = np.concatenate([np.arange(lo, hi + 1) for lo, hi in got])
    assert np.array_equal(seqs, np.arange(first, last + 1))
    assert max(hi - lo + 1 for lo, hi in got) <= chunk
    assert got[0][1] - got[0][0] + 1 == min(max(chunk >> 4, 1), last - first + 1)


def test_state_grows_orders_and_levels_separately_with_the_same_findings(tables):
    """Tiny starting capacities force many mid-run grows (orders and levels apart); the
    violations found are those of a run that never grows."""
    from exsim.exchange.schema import Stp
    import exsim.replay.verification.kernel as K
    from exsim.replay.verification.run import _stored

    orders, fills, l2, events = tables
    bad = fills.copy()
    bad[100]["price"] += 1
    tabs = [_stored(n, a) for n, a in (("orders", orders), ("fills", bad), ("l2", l2),
                                         ("events", events))]
    found = []
    for cap, lcap in ((16, 16), (1 << 16, 1 << 12)):
        outs = []
        for sid in range(len(SYMBOLS)):
            part = [t[t["symbol"] == sid] for t in tabs]
            st = K.new_state(cap, 100, lcap)
            while K.check_symbol(*part, part[0].size, True, int(Stp.CANCEL_RESTING), K.FINAL,
                                 *st) != K.OK:
                st = K.grow_state(st)
            meta, vrows, vids, counts = st[-4:]
            outs.append((vrows[:meta[K.M_VN]].tolist(), vids[:meta[K.M_VN]].tolist(),
                         counts.tolist(), st[0].shape[0], st[1].shape[0]))
        found.append(outs)
    small, big = found
    assert [o[:3] for o in small] == [o[:3] for o in big]
    assert any(sum(o[2]) for o in small)                       # the defect is seen
    assert all(o[3] > 16 and o[4] > 16 and o[4] < o[3] for o in small)   # both grew, apart


def test_the_checkers_ladder_search_is_a_lower_bound_on_dense_and_sparse_ladders():
    # the verifier's own ladder (replay.verification.book), searched from the top of the book
    from numba import njit
    from exsim.replay.verification.book import _lad_pos

    search = njit(lambda lad, side, n, key: _lad_pos(lad, side, n, key))
    rng = np.random.default_rng(3)
    for trial in range(2000):
        n = int(rng.integers(0, 40))
        keys = np.sort(rng.choice(np.arange(-60, 60), size=n, replace=False)).astype(np.int64)
        if n and trial % 2:      # dense: every tick occupied
            keys = np.arange(keys[-1] - n + 1, keys[-1] + 1, dtype=np.int64)
        lad = np.full((2, 45), 10**6, np.int64)   # entries past n must never be looked at
        side = trial % 2
        lad[side, :n] = keys
        for key in rng.integers(-70, 70, 4):
            assert search(lad, side, n, int(key)) == int(np.searchsorted(keys, key, "left"))
