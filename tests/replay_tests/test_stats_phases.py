"""``phase_stats`` on a day with auctions (tests/replay_tests/phase_day.py): each auction with
its price and volume as the engine's UNCROSS events say, auction trades counted apart from
continuous ones (``aggressor_side == AUCTION_SIDE``), the time in each phase from the PHASE
messages' timestamps, the halt. Needs the engine that implements trading phases."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.schema import AUCTION_SIDE, Event, Phase
from phase_day import AUC, STEP, day_flow, journal, step_by_step
from exsim.replay.analytics import phase_stats


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    orders = day_flow()
    d = journal(str(tmp_path_factory.mktemp("day") / "run"), orders)
    _, fills, events = step_by_step(orders)
    return d, orders, fills[fills["symbol"] == AUC], events[events["symbol"] == AUC]


def test_each_auction_has_the_engine_s_price_and_volume(day):
    d, _, fills, events = day
    got = phase_stats(d, "AUC")
    un = events[events["event"] == int(Event.UNCROSS)]
    assert un.size == 2 and got["uncrosses"].size == 2
    assert got["uncrosses"]["price"].tolist() == un["price"].tolist()
    assert got["uncrosses"]["qty"].tolist() == un["filled_qty"].tolist()
    assert got["uncrosses"]["auction"].tolist() == [int(Phase.OPENING_AUCTION),
                                                    int(Phase.CLOSING_AUCTION)]
    assert set(got["auctions"]) == {"opening_auction", "closing_auction"}
    opening = got["auctions"]["opening_auction"]
    assert opening["count"] == 1 and opening["volume"] == int(un["filled_qty"][0]) > 0
    assert opening["vwap"] == float(un["price"][0])


def test_auction_trades_are_counted_apart_from_continuous_ones(day):
    d, _, fills, _ = day
    got = phase_stats(d, "AUC")["trades"]
    auction = fills["aggressor_side"] == AUCTION_SIDE
    assert got["auction"] == {"count": int(auction.sum()), "volume": int(fills["qty"][auction].sum())}
    assert got["continuous"]["count"] == int((~auction).sum()) > 0
    assert got["auction"]["volume"] == sum(a["volume"] for a in phase_stats(d, "AUC")["auctions"].values())


def test_time_in_each_phase_and_the_halt_follow_the_phase_messages(day):
    d, orders, _, events = day
    got = phase_stats(d, "AUC")
    ph = events[events["event"] == int(Event.PHASE)]
    assert got["halts"] == 1 and got["interruptions"] == 0
    t = got["time_in_phase_ns"]
    # from the first message to the PRE_OPEN message, then between PHASE events, then to the end
    assert sum(t.values()) == int(orders["ts"][-1] - orders["ts"][0])
    assert t["halted"] == int(ph["ts"][np.flatnonzero(ph["phase"] == int(Phase.HALTED))[0] + 1]
                              - ph["ts"][ph["phase"] == int(Phase.HALTED)][0]) == 2 * STEP
    assert t["closed"] == int(orders["ts"][-1] - ph["ts"][-1])


def test_a_symbol_that_never_left_continuous_trading_has_no_auctions(day):
    d, orders, _, _ = day
    got = phase_stats(d, "OTHER")
    assert got["auctions"] == {} and got["uncrosses"].size == 0 and got["halts"] == 0
    assert got["time_in_phase_ns"] == {"continuous": int(orders["ts"][-1] - orders["ts"][0])}
    assert got["trades"]["auction"] == {"count": 0, "volume": 0}
