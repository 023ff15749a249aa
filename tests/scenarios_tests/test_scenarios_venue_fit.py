"""Scenario files make the venue order types and fit their flows to lots, minimums and tick
tables (scenarios.scenario [venue], scenarios.fit). No engine needed: the checks are on the
generated messages against docs/semantics.md's rules for what a symbol accepts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from exsim.exchange.errors import InputError
from exsim.exchange.schema import Kind, OrderType, Side, Tif

from exsim.scenarios import Scenario
from exsim.scenarios.fit import fit_to_symbols, grid_down, grid_up

TABLE = [[1, 1], [15_000, 5], [15_103, 7]]
BASE = {"generator": "uniform", "seed": 3, "params": {"n": 4000, "mean_gap_ns": 1_000_000},
        "symbols": [{"name": "ES", "tick_size": 0.25, "mid": 15_000}]}


def _sc(symbol_opts=None, venue=None, **top):
    d = {**BASE, **top}
    d["symbols"] = [{**BASE["symbols"][0], **(symbol_opts or {})}]
    if venue is not None:
        d["venue"] = venue
    return Scenario.from_dict(d, source="probe.toml")


def _tick(p: int, table) -> int:
    return [t for f, t in table if f <= p][-1]


def _on_grid(p: int, table) -> bool:
    return p % _tick(p, table) == 0


def test_grid_rounding_matches_a_brute_force_walk_of_the_grid():
    grid = [p for p in range(1, 15_400) if _on_grid(p, TABLE)]
    prices = np.arange(1, 15_300, dtype=np.int64)
    down, up = grid_down(prices, TABLE), grid_up(prices, TABLE)
    for p, d, u in zip(prices.tolist(), down.tolist(), up.tolist()):
        assert d == max(g for g in grid if g <= p)
        assert u == min(g for g in grid if g >= p)
    # nothing at or below 2 on a grid of 3s: a buy goes up to the lowest grid price
    assert grid_down(np.array([1, 2, 4]), [[1, 3]]).tolist() == [3, 3, 3]


def test_a_file_with_lots_minimums_and_a_tick_table_generates_what_the_symbol_accepts():
    opts = {"tick_table": TABLE, "lot_size": 5, "min_order_qty": 10}
    fitted = _sc(opts, venue={}).generate()
    plain = _sc(None, venue={}).generate()     # the same draws, before fitting
    live = np.isin(fitted["kind"], [Kind.NEW, Kind.MODIFY])
    q = fitted["qty"][live]
    assert (q % 5 == 0).all() and (q >= 10).all()
    assert (fitted["display_qty"] % 5 == 0).all()
    assert (fitted["display_qty"] <= fitted["qty"]).all()
    limit = live & np.isin(fitted["order_type"], [OrderType.LIMIT, OrderType.STOP_LIMIT])
    assert all(_on_grid(p, TABLE) for p in fitted["price"][limit].tolist())
    buy, sell = limit & (fitted["side"] == Side.BUY), limit & (fitted["side"] == Side.SELL)
    # toward the passive side: buys never higher, sells never lower than drawn
    assert (fitted["price"][buy] <= plain["price"][buy]).all()
    assert (fitted["price"][sell] >= plain["price"][sell]).all()
    stops = live & np.isin(fitted["order_type"], [OrderType.STOP, OrderType.STOP_LIMIT])
    assert stops.any()
    assert all(_on_grid(p, TABLE) for p in fitted["stop_price"][stops].tolist())
    sbuy = stops & (fitted["side"] == Side.BUY)
    assert (fitted["stop_price"][sbuy] >= plain["stop_price"][sbuy]).all()
    # everything but sizes and prices is the draw itself
    for f in ("ts", "order_id", "kind", "side", "symbol", "trader", "tif", "order_type"):
        assert (fitted[f] == plain[f]).all(), f


def test_a_venue_table_makes_stops_icebergs_and_gtd_orders_from_the_scenarios_seed():
    sc = _sc(venue={"stop_share": 0.2, "iceberg_share": 0.2, "gtd_share": 0.2,
                    "expire_max_ns": 5_000})
    o = sc.generate()
    assert (o["order_type"] == OrderType.STOP).any() and (o["order_type"] == OrderType.STOP_LIMIT).any()
    assert (o["display_qty"] > 0).any()
    gtd = o["tif"] == Tif.GTD
    assert gtd.any()
    life = o["expire_ts"][gtd] - o["ts"][gtd]
    assert life.min() >= 1 and life.max() <= 5_000
    assert o.tobytes() == sc.generate().tobytes()
    assert o.tobytes() != dataclasses.replace(sc, seed=4).generate().tobytes()


def test_venue_keys_describe_and_round_trip_while_files_without_them_describe_as_before():
    sc = _sc(venue={"gtd_share": 0.3})
    d = sc.describe()
    assert d["venue"] == {"gtd_share": 0.3}
    again = Scenario.from_dict(d, source="x")
    assert again.describe()["sha256"] == d["sha256"]
    assert again.generate().tobytes() == sc.generate().tobytes()
    plain = _sc().describe()
    assert "venue" not in plain
    assert plain["sha256"] != d["sha256"]


def test_a_file_without_venue_or_fit_options_generates_the_generators_own_bytes():
    sc = _sc({"currency": "USD", "tick_value": 12.5, "session_close": 5})
    from exsim.scenarios.generators.uniform import uniform_flow
    raw = uniform_flow(seed=3, n_symbols=1, n=4000, mean_gap_ns=1_000_000,
                       mid_start=np.array([15_000], np.int64))
    assert sc.generate().tobytes() == raw.tobytes()


@pytest.mark.parametrize("venue, text", [
    ({"stop_sahre": 0.1}, r"\[venue\]: unknown key\(s\) \['stop_sahre'\]"),
    ({"stop_share": 1.5}, r"\[venue\]: 'stop_share' should be a number in \[0, 1\]"),
    ({"gtd_share": "x"}, r"\[venue\]: 'gtd_share' should be a number"),
    ({"stop_share": 0.5, "iceberg_share": 0.5}, r"\[venue\]: 'stop_share' \+ 'iceberg_share'"),
    ({"expire_max_ns": 0}, r"\[venue\]: 'expire_max_ns' should be an integer"),
    ({"expire_max_ns": 1.5}, r"\[venue\]: 'expire_max_ns' should be an integer"),
    ([1, 2], r"\[venue\]: expected a table"),
])
def test_bad_venue_tables_name_the_file_and_the_key(venue, text):
    with pytest.raises(InputError, match=r"probe\.toml: " + text):
        _sc(venue=venue)


def test_fit_leaves_default_symbols_and_cancels_alone():
    o = _sc().generate()
    assert fit_to_symbols(o, [{"name": "ES"}]).tobytes() == o.tobytes()
    f = fit_to_symbols(o, [{"name": "ES", "lot_size": 4}])
    c = o["kind"] == Kind.CANCEL
    assert f[c].tobytes() == o[c].tobytes()
