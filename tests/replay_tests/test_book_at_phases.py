"""``book_at`` through a trading day (tests/replay_tests/phase_day.py): at every seq the stored
run's view says the phase and the indicative uncross the engine had after that message, and its
book (crossed in a call, MARKET orders at their call price) is the engine's, in the L2 view and
in the L3 view, across checkpoints taken in the middle of a call. Needs the engine that
implements trading phases (docs/semantics.md, Trading phases)."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.schema import CALL_MARKET_PRICE, CALL_PHASES, Phase
from phase_day import day_flow, journal, step_by_step
from exsim.replay import book_at
from exsim.store import Reader


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    orders = day_flow()
    d = journal(str(tmp_path_factory.mktemp("day") / "run"), orders)
    after, _, _ = step_by_step(orders)
    return d, orders, after


def test_every_seq_has_the_engine_s_phase_indicative_and_book(day):
    d, orders, after = day
    seen = set()
    with Reader(d) as r:
        for seq in range(1, orders.size + 1):
            phase, indicative, bids, asks = after[seq - 1]
            v = book_at(r, "AUC", seq=seq, depth=None)
            assert (v.phase, v.indicative) == (phase, indicative), seq
            assert v.bids.tobytes() == bids.tobytes() and v.asks.tobytes() == asks.tobytes(), seq
            seen.add(phase)
    assert {Phase.PRE_OPEN, Phase.CONTINUOUS, Phase.HALTED, Phase.PRE_CLOSE,
            Phase.CLOSED} <= seen   # the day went through them all


def test_the_call_book_is_crossed_with_markets_at_their_call_price(day):
    d, orders, after = day
    k = max(i for i, a in enumerate(after) if a[0] == Phase.PRE_OPEN)   # the call's last message
    v = book_at(d, "AUC", seq=k + 1, depth=None)
    assert v.phase == Phase.PRE_OPEN and v.indicative[1] > 0           # something would execute
    assert v.bids["price"][0] == CALL_MARKET_PRICE[0] and v.asks["price"][0] == CALL_MARKET_PRICE[1]
    assert v.bids["price"][1] >= v.asks["price"][1]                    # limits crossed
    l3 = book_at(d, "AUC", seq=k + 1, depth=None, l3=True)
    assert (l3.phase, l3.indicative) == (v.phase, v.indicative)
    assert l3.bids.tobytes() == v.bids.tobytes() and l3.asks.tobytes() == v.asks.tobytes()
    assert (l3.orders["order_type"] == 1).sum() == 2                   # the two MARKET orders


def test_outside_a_call_the_indicative_is_none(day):
    d, orders, after = day
    for seq in range(1, orders.size + 1):
        if after[seq - 1][0] not in CALL_PHASES:
            assert book_at(d, "AUC", seq=seq).indicative == (0, 0, 0)
    assert book_at(d, "OTHER", seq=orders.size).phase == Phase.CONTINUOUS


def test_the_l3_view_agrees_at_every_seq(day):
    d, orders, after = day
    with Reader(d) as r:
        for seq in range(1, orders.size + 1, 2):
            phase, indicative, bids, asks = after[seq - 1]
            v = book_at(r, "AUC", seq=seq, depth=None, l3=True)
            assert (v.phase, v.indicative) == (phase, indicative), seq
            assert v.bids.tobytes() == bids.tobytes(), seq
