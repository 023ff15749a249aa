"""verify on a trading day: a fill's own rows are checked on symbols with phases as on plain
symbols (issue 41, item 1, in part). Symbols of ``trading_day_flow`` start CLOSED and open by
auction, so every row after their first is checked by the phase checker
(``replay.verification.auctions``), which used to take a fill with another trader or one lot
more as good. Each planted defect must be caught by the rule that catches it on a plain
symbol, and ``verify(threads=N)`` must give one report for every N."""

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.replay import verify, verify_arrays
from exsim.scenarios import uniform_flow
from exsim.scenarios.generators.trading_day import trading_day_flow
from test_replay_common import TamperingEngine, store_run

SYMBOLS = ("S0", "S1")
DEFECTS = {"buy_trader": {"row_fields"}, "sell_trader": {"row_fields"},
           "qty": {"events_fills"}}


def _engine(cls=Engine):
    eng = cls()
    for s in SYMBOLS:
        eng.add_symbol(s)
    return eng


@pytest.fixture(scope="module", params=["trading_day", "plain"])
def run(request):
    flow = trading_day_flow(6_000, seed=3, n_symbols=2) if request.param == "trading_day" \
        else uniform_flow(6_000, seed=3, n_symbols=2)
    res = _engine().process(flow)
    return request.param, flow, res


def _rules(flow, res, fills):
    report = verify_arrays(flow, fills, res.l2, res.events, symbols=[0, 1])
    return report, {v.rule for v in report.violations}


@pytest.mark.parametrize("field", sorted(DEFECTS))
def test_a_changed_fill_is_caught_by_the_same_rule_with_or_without_phases(run, field):
    kind, flow, res = run
    clean, _ = _rules(flow, res, res.fills)
    assert clean.ok
    continuous = np.flatnonzero(res.fills["aggressor_side"] != 2)
    for k in (continuous[len(continuous) // 3], continuous[-3]):
        bad = res.fills.copy()
        bad[k][field] += 1
        report, _ = _rules(flow, res, bad)
        at = {v.rule for v in report.violations if v.seq == int(bad[k]["seq"])}
        assert DEFECTS[field] <= at, (kind, field, int(bad[k]["seq"]), report.violations[:5])


class _Planted(TamperingEngine):
    """A trader and a quantity changed in the fills of every fourth batch."""

    batches = 0

    @staticmethod
    def tamper(res, first):
        _Planted.batches += 1
        if _Planted.batches % 4 == 0 and res.fills.size:
            cont = np.flatnonzero(res.fills["aggressor_side"] != 2)
            if cont.size:
                res.fills[cont[0]]["buy_trader"] += 1
                res.fills[cont[-1]]["qty"] += 1
        return res


def test_verify_gives_one_report_for_every_thread_count_on_a_trading_day(tmp_path):
    store_run(tmp_path, trading_day_flow(6_000, seed=5, n_symbols=2), engine=_engine(_Planted),
              checkpoint_every=700, seal_every=500)
    reports = {n: verify(tmp_path, threads=n) for n in (1, 2, 3)}
    one = reports[1]
    assert not one.ok
    assert all(one.summary["violations"].get(r, 0) > 0 for r in ("row_fields", "events_fills"))
    for n, r in reports.items():
        assert r.violations == one.violations, n
        assert {k: v for k, v in r.summary.items() if "seconds" not in k} == \
            {k: v for k, v in one.summary.items() if "seconds" not in k}, n
