"""The trading_day scenario and a LOBSTER halt through the phase engine (needs the issue-16
engine): the journal of a simulated day holds the opening, re-opening and closing UNCROSS events
the generator lays out, and a LOBSTER halt / quote / resume drives the symbol's phase."""

from __future__ import annotations

import dataclasses

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.schema import AUCTION_SIDE, Event, Kind, Phase, Reason
from exsim.scenarios import load_scenario, open_flow
from exsim.scenarios.loaders.lobster import load_lobster
from exsim.replay.simulation import simulate
from exsim.store import read


def _small_day():
    sc = load_scenario("trading_day")
    return dataclasses.replace(sc, params={**sc.params, "n": 3_000, "call_messages": 120})


def test_a_simulated_trading_day_journals_its_three_auctions(tmp_path):
    summary = simulate(_small_day(), str(tmp_path / "day"), durability="none")
    ev = read(str(tmp_path / "day"), "events")
    ux = ev[ev["event"] == Event.UNCROSS]
    assert ux["phase"].tolist() == [Phase.OPENING_AUCTION, Phase.REOPENING_AUCTION,
                                    Phase.CLOSING_AUCTION]
    assert np.all(ux["filled_qty"] > 0) and np.all(ux["price"] > 0)
    ph = ev[ev["event"] == Event.PHASE]
    assert [(int(p), int(r)) for p, r in zip(ph["phase"], ph["reason"])] == [
        (Phase.PRE_OPEN, Reason.NONE), (Phase.CONTINUOUS, Reason.NONE),
        (Phase.REOPENING_AUCTION, Reason.PRICE_BAND), (Phase.CONTINUOUS, Reason.AUCTION_END),
        (Phase.PRE_CLOSE, Reason.NONE), (Phase.CLOSED, Reason.NONE)]
    # the interruption lasts interruption_ns of message time
    start, end = ph["ts"][2], ph["ts"][3]
    assert end - start >= 120_000_000_000
    fills = read(str(tmp_path / "day"), "fills")
    auction = fills[fills["aggressor_side"] == AUCTION_SIDE]
    assert int(auction["qty"].sum()) == int(ux["filled_qty"].sum())
    for u in ux:
        assert np.all(auction["price"][auction["seq"] == u["seq"]] == u["price"])
    assert (summary.phase_changes, summary.auctions) == (6, 3)
    assert summary.auction_volume == int(ux["filled_qty"].sum())


def test_the_lobster_halt_drives_the_symbol_through_halted_quoting_and_continuous(tmp_path):
    from test_scenarios_phases import HALT_B, HALT_M, _pair   # the synthetic halt file

    flow = load_lobster(*_pair(tmp_path, HALT_M, HALT_B))
    eng = Engine()
    eng.add_symbol("AAPL", tick_size=0.01)
    res = eng.process(flow.orders)
    ph = res.events[res.events["event"] == Event.PHASE]
    assert ph["phase"].tolist() == [Phase.HALTED, Phase.REOPENING_AUCTION, Phase.CONTINUOUS]
    assert (res.events["event"] == Event.UNCROSS).sum() == 1     # the resume ends the call
    assert eng.phase("AAPL") == Phase.CONTINUOUS
    assert not np.any(res.events["event"] == Event.REJECTED)


def test_open_flow_runs_the_preset_by_name():
    flow = open_flow("trading_day")
    assert flow.specs[0]["phase"] == "closed" and (flow.orders["kind"] == Kind.PHASE).sum() == 4
