"""Uniform random flow: determinism, documented mix and laws, and cancels that name live orders."""

import numpy as np
import pytest

from exsim.exchange import Engine, Event, Kind, Reason
from exsim.exchange.errors import UsageError
from exsim.scenarios.generators.uniform import bench_1m, uniform_flow

N = 200_000


@pytest.fixture(scope="module")
def flow():
    return uniform_flow(N, seed=11, n_symbols=3, mean_gap_ns=500.0)


def test_same_seed_gives_identical_bytes():
    a = uniform_flow(20_000, seed=3, n_symbols=2)
    b = uniform_flow(20_000, seed=3, n_symbols=2)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != uniform_flow(20_000, seed=4, n_symbols=2).tobytes()


def test_message_mix_matches_parameters(flow):
    cancel_share = (flow["kind"] == Kind.CANCEL).mean()
    assert abs(cancel_share - 0.3) < 0.005
    assert np.all(np.isin(flow["kind"], [Kind.NEW, Kind.CANCEL]))


def test_sizes_traders_and_interarrival_follow_their_laws(flow):
    new = flow[flow["kind"] == Kind.NEW]
    assert new["qty"].min() == 1 and new["qty"].max() == 100
    assert abs(new["qty"].mean() - 50.5) < 0.5
    assert set(np.unique(new["trader"])) == set(range(1, 11))
    gaps = np.diff(flow["ts"])
    assert np.all(gaps >= 0) and abs(gaps.mean() - 500.0) < 5.0


def test_new_order_ids_count_up_from_one(flow):
    new = flow[flow["kind"] == Kind.NEW]
    assert np.array_equal(new["order_id"], np.arange(1, len(new) + 1))


def test_engine_accepts_every_cancel_and_books_never_cross(flow):
    eng = Engine()
    for s in range(3):
        eng.add_symbol(f"S{s}")
    res = eng.process(flow)
    assert not np.any(res.events["event"] == Event.REJECTED)
    assert (res.events["reason"] == Reason.USER_CANCEL).sum() == (flow["kind"] == Kind.CANCEL).sum()
    for s in range(3):
        bids, asks = eng.depth(s, levels=1)
        assert bids["price"][0] < asks["price"][0]


def test_crossing_share_produces_fills_and_passive_orders_rest():
    flow = uniform_flow(50_000, seed=5, p_passive=1.0, p_cancel=0.0, p_cross=0.0)
    eng = Engine()
    eng.add_symbol("X")
    assert len(eng.process(flow).fills) == 0          # passive limits never cross
    crossing = uniform_flow(50_000, seed=5)
    eng2 = Engine()
    eng2.add_symbol("X")
    assert len(eng2.process(crossing).fills) > 0.05 * 50_000


def test_bench_preset_is_one_million_messages_over_requested_symbols():
    flow = bench_1m(n_symbols=100)
    assert len(flow) == 1_000_000 and len(np.unique(flow["symbol"])) == 100
    assert abs((flow["kind"] == Kind.CANCEL).mean() - 0.3) < 0.002


def test_bad_mix_is_a_usage_error():
    with pytest.raises(UsageError, match="must be 1"):
        uniform_flow(10, seed=1, p_passive=0.5, p_cancel=0.3, p_cross=0.1)
    with pytest.raises(UsageError, match="too low"):
        uniform_flow(10, seed=1, mid_start=5)
