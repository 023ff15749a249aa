"""A scenario with a lot, a minimum, a tick table and a [venue] table runs through the engine
without rule rejects: only UNKNOWN_ID (cancels of orders already gone) and STOP_PRICE_REACHED
(stops whose trigger the market reached first, as venue_mix documents) remain. Runs on this
branch's (issue-15) engine."""

from __future__ import annotations

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.schema import Event, Reason

from exsim.scenarios import Scenario


def test_a_fitted_venue_scenario_is_taken_by_the_engine():
    sc = Scenario.from_dict({
        "generator": "uniform", "seed": 1, "params": {"n": 20_000, "mean_gap_ns": 1_000_000},
        "symbols": [{"name": "ES", "tick_size": 0.25, "mid": 15_000,
                     "tick_table": [[1, 1], [15_000, 5]], "lot_size": 5, "min_order_qty": 10}],
        "venue": {"stop_share": 0.1, "iceberg_share": 0.1, "gtd_share": 0.1}}, source="s1.toml")
    eng = Engine()
    sc.add_symbols(eng)
    ev = eng.process(sc.generate()).events
    rej = ev[ev["event"] == Event.REJECTED]["reason"]
    assert set(np.unique(rej).tolist()) <= {Reason.UNKNOWN_ID, Reason.STOP_PRICE_REACHED}
    assert rej.size < 0.1 * 20_000
    assert (ev["event"] == Event.TRIGGERED).any() and (ev["event"] == Event.FILLED).any()
