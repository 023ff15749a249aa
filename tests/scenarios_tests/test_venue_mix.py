"""scenarios.generators.venue_mix: stops, icebergs and GTD orders mixed into a plain flow."""

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import Event, Kind, OrderType, Reason, Side, Tif
from exsim.scenarios.generators.uniform import uniform_flow
from exsim.scenarios.generators.venue_mix import venue_mix


@pytest.fixture(scope="module")
def base():
    return uniform_flow(20_000, seed=3)


def test_same_flow_and_seed_give_identical_bytes_and_only_new_limits_change(base):
    a, b = venue_mix(base, seed=1), venue_mix(base, seed=1)
    assert a.tobytes() == b.tobytes()
    assert venue_mix(base, seed=2).tobytes() != a.tobytes()
    changed = (a != base)
    assert np.all((base["kind"][changed] == Kind.NEW)
                  & (base["order_type"][changed] == OrderType.LIMIT))
    for name in ("ts", "order_id", "trader", "symbol", "kind", "side", "qty"):
        assert np.array_equal(a[name], base[name]), name


def test_shares_and_fields_follow_the_law(base):
    out = venue_mix(base, seed=5, stop_share=0.1, iceberg_share=0.1, gtd_share=0.1)
    new = (base["kind"] == Kind.NEW).sum()
    stops = np.isin(out["order_type"], (OrderType.STOP, OrderType.STOP_LIMIT))
    ice = out["display_qty"] > 0
    gtd = out["tif"] == Tif.GTD
    for mask in (stops, ice, gtd):
        assert 0.07 * new < mask.sum() < 0.13 * new
    assert not (stops & ice).any() and not (stops & gtd).any() and not (ice & gtd).any()
    assert np.all(out["display_qty"][ice] < out["qty"][ice])
    assert np.all(out["expire_ts"][gtd] > out["ts"][gtd])
    assert np.all(out["expire_ts"][~gtd] == 0)
    buy = out["side"] == Side.BUY
    sl = out["order_type"] == OrderType.STOP_LIMIT
    # a stop-limit's limit lies through its trigger, so a released one mostly trades
    assert np.all(out["price"][sl & buy] > out["stop_price"][sl & buy])
    assert np.all(out["price"][sl & ~buy] <= out["stop_price"][sl & ~buy])
    assert np.all(out["price"][out["order_type"] == OrderType.STOP] == 0)


@pytest.mark.parametrize("kw", [{"stop_share": -0.1}, {"gtd_share": 1.5},
                                {"stop_share": 0.6, "iceberg_share": 0.6},
                                {"expire_max_ns": 0}])
def test_bad_arguments_are_usage_errors_naming_them(base, kw):
    with pytest.raises(UsageError, match=next(iter(kw))[:5]):
        venue_mix(base, seed=1, **kw)


def test_the_engine_triggers_stops_and_expires_gtd_orders_of_the_mix(base):
    out = venue_mix(base, seed=7)
    eng = Engine()
    eng.add_symbol("S0")
    events = eng.process(out).events
    assert (events["event"] == Event.TRIGGERED).sum() > 100
    assert ((events["event"] == Event.CANCELLED) & (events["reason"] == Reason.EXPIRED)).sum() > 100


def test_every_share_0_copies_a_flow_with_venue_types_and_phases_unchanged(base):
    # a flow that already holds GTD orders, stops, icebergs (a mix of its own) and PHASE
    # messages (their expire_ts is when the phase starts)
    from exsim.scenarios.generators.trading_day import trading_day_flow

    mixed = venue_mix(base, seed=9, stop_share=0.2, iceberg_share=0.2, gtd_share=0.2)
    day = trading_day_flow(3_000, seed=2, n_symbols=2)
    for flow in (mixed, day):
        out = venue_mix(flow, seed=4, stop_share=0, iceberg_share=0, gtd_share=0)
        assert out.tobytes() == flow.tobytes()
    assert (mixed["stop_price"] > 0).any() and (mixed["display_qty"] > 0).any()
    assert (mixed["expire_ts"] > 0).any()
    # a second mix converts only plain limits: what the first made stays as it was
    again = venue_mix(mixed, seed=4)
    made = (mixed["display_qty"] > 0) | (mixed["tif"] == Tif.GTD) | (mixed["stop_price"] > 0)
    assert again[made].tobytes() == mixed[made].tobytes()
