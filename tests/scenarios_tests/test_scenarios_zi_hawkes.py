"""Zero-intelligence and Hawkes generators: determinism, documented rates, engine-valid flow."""

import numpy as np
import pytest

from exsim.exchange import Engine, Event, Kind, OrderType
from exsim.exchange.errors import UsageError
from exsim.scenarios import load_scenario
from exsim.scenarios.generators.hawkes import hawkes_flow, hawkes_times
from exsim.scenarios.generators.zero_intelligence import zi_flow


@pytest.fixture(scope="module")
def zi():
    return zi_flow(200_000, seed=2, market_rate=1.0, limit_rate=5.0, cancel_rate=0.05)


def test_zi_same_seed_gives_identical_bytes():
    assert zi_flow(10_000, seed=9, n_symbols=2).tobytes() == zi_flow(10_000, seed=9, n_symbols=2).tobytes()
    assert zi_flow(10_000, seed=9).tobytes() != zi_flow(10_000, seed=10).tobytes()


def test_zi_market_and_limit_arrivals_have_their_poisson_rates(zi):
    seconds = (zi["ts"][-1] - zi["ts"][0]) / 1e9
    market = (zi["order_type"] == OrderType.MARKET).sum() / seconds / 2
    limit = ((zi["kind"] == Kind.NEW) & (zi["order_type"] == OrderType.LIMIT)).sum() / seconds / 2
    assert abs(market - 1.0) < 0.03 and abs(limit - 5.0) < 0.1


def test_zi_limits_never_cross_and_engine_accepts_every_cancel(zi):
    eng = Engine()
    eng.add_symbol("ZI")
    res = eng.process(zi)
    assert not np.any(res.events["event"] == Event.REJECTED)
    limit_seqs = np.flatnonzero((zi["kind"] == Kind.NEW) & (zi["order_type"] == OrderType.LIMIT)) + 1
    assert not np.isin(res.fills["seq"], limit_seqs).any()


def test_zi_multi_symbol_ids_unique_and_time_ordered():
    f = zi_flow(5_000, seed=1, n_symbols=3)
    new = f[f["kind"] == Kind.NEW]
    assert len(np.unique(new["order_id"])) == len(new) and np.all(np.diff(f["ts"]) >= 0)


def test_hawkes_same_seed_gives_identical_bytes():
    assert hawkes_flow(20_000, seed=4).tobytes() == hawkes_flow(20_000, seed=4).tobytes()


def test_hawkes_branching_ratio_and_mean_rate_recovered_from_events():
    t = hawkes_times(300_000, seed=1, baseline=1_000.0, jump=600.0, decay=1_000.0)
    rate = len(t) / t[-1]
    assert abs(rate - 2_500.0) / 2_500.0 < 0.03                # mu / (1 - n)
    assert abs((1 - 1_000.0 / rate) - 0.6) < 0.02              # n = 1 - mu / rate
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() > 1.1                      # overdispersed: clustered, not Poisson


def test_hawkes_rejects_explosive_parameters():
    with pytest.raises(UsageError, match="branching ratio"):
        hawkes_times(10, seed=1, baseline=1.0, jump=2.0, decay=1.0)


def test_zi_and_hawkes_presets_generate():
    for name in ("zi", "hawkes"):
        sc = load_scenario(name)
        assert len(sc.generate()) == sc.params["n"]
