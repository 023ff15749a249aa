"""Differential and property tests of the venue order types (issue 15) on the engine.

Random venue flows (conftest.venue_flows: stops that trigger and cascade, icebergs refilling while
swept, DAY/GTD expiries, minimum quantities, tick tables and lots with off-tick and off-lot
messages, cancels and modifies of pending stops and by non-owners, mixed with the old order types
over several symbols) go through the numba engine and the reference model: fills, L2 updates and
events must be byte-equal and the books (`orders`, `stops`, `depth` of every symbol) identical,
for every STP mode, whole, in batches or one message per call, with ownership on and off. The
engine must keep the VenueChecker invariants, be deterministic, and a checkpoint restored
mid-flow must give the same future outputs and books.

These tests need the engine that implements docs/semantics.md's venue rules.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import (
    STP_MODES, VENUE_SYMBOLS, VenueChecker, assert_same_outputs, assert_table_equal, cut_points,
    levels, make_book, run, sweep_flows, venue_flows,
)
from exsim.exchange.schema import ORDER_DTYPE, Reason


def assert_same_venue_books(a, b, symbols=VENUE_SYMBOLS):
    """Depth (displayed), resting orders and pending stops of every symbol are identical."""
    for name, *_ in symbols:
        for side_a, side_b in zip(a.depth(name, levels=10**6), b.depth(name, levels=10**6)):
            assert levels(side_a) == levels(side_b), f"depth of {name}"
        assert_table_equal(f"orders({name})", a.orders(name), b.orders(name))
        assert_table_equal(f"stops({name})", a.stops(name), b.stops(name))


def both(stp, ownership=True):
    return (make_book("engine", stp, VENUE_SYMBOLS, ownership),
            make_book("model", stp, VENUE_SYMBOLS, ownership))


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=100, deadline=None)
@given(orders=venue_flows())
def test_engine_matches_model_on_venue_flows(stp, orders):
    engine, model = both(stp)
    assert_same_outputs(run(engine, orders), run(model, orders))
    assert_same_venue_books(engine, model)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=50, deadline=None)
@given(orders=venue_flows(), data=st.data())
def test_engine_matches_model_on_venue_flows_split_into_batches(stp, orders, data):
    engine, model = both(stp)
    cuts = data.draw(cut_points(len(orders)))
    assert_same_outputs(run(engine, orders, cuts), run(model, orders))
    assert_same_venue_books(engine, model)


@pytest.mark.parametrize("stp", ["none", "cancel_both"])
@settings(max_examples=25, deadline=None)
@given(orders=venue_flows())
def test_engine_matches_model_on_venue_flows_one_message_per_call(stp, orders):
    engine, model = both(stp)
    assert_same_outputs(run(engine, orders, range(len(orders))), run(model, orders))
    assert_same_venue_books(engine, model)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=40, deadline=None)
@given(orders=sweep_flows())
def test_engine_matches_model_while_icebergs_refill_under_a_sweep(stp, orders):
    engine, model = both(stp)
    assert_same_outputs(run(engine, orders), run(model, orders))
    assert_same_venue_books(engine, model)


@settings(max_examples=50, deadline=None)
@given(orders=venue_flows())
def test_engine_matches_model_on_venue_flows_with_ownership_off(orders):
    engine, model = both("cancel_resting", ownership=False)
    assert_same_outputs(run(engine, orders), run(model, orders))
    assert_same_venue_books(engine, model)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=30, deadline=None)
@given(orders=venue_flows())
def test_engine_keeps_venue_invariants_after_every_message(stp, orders):
    engine, checker = make_book("engine", stp, VENUE_SYMBOLS), VenueChecker()
    for i in range(len(orders)):
        checker.step(engine, orders[i:i + 1])


@settings(max_examples=40, deadline=None)
@given(orders=venue_flows())
def test_engine_gives_the_same_bytes_twice_on_venue_flows(orders):
    first = make_book("engine", "cancel_both", VENUE_SYMBOLS).process(orders)
    second = make_book("engine", "cancel_both", VENUE_SYMBOLS).process(orders)
    assert [t.tobytes() for t in first] == [t.tobytes() for t in second]


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=30, deadline=None)
@given(orders=venue_flows(), data=st.data())
def test_checkpoint_restored_mid_venue_flow_gives_identical_outputs_and_books(stp, orders, data):
    at = data.draw(st.integers(0, len(orders)))
    original = make_book("engine", stp, VENUE_SYMBOLS)
    original.process(orders[:at])
    restored = type(original).restore(original.checkpoint())
    assert restored.state_hash() == original.state_hash() and restored.seq == original.seq
    assert restored.checkpoint() == original.checkpoint()
    assert_same_venue_books(restored, original)
    assert_same_outputs(restored.process(orders[at:]), original.process(orders[at:]))
    assert_same_venue_books(restored, original)
    assert restored.state_hash() == original.state_hash()


def test_invariants_hold_when_an_id_is_reused_right_after_its_order_expired():
    # found by hypothesis: a GTD iceberg (id 4) fills 1 lot, expires before the message that
    # enters a new order 4; the ledger must treat them as two orders, not one
    t = 1728003599999999700
    rows = [(t, 0, 97, 1, 0, 2, 0, 0, 0, 1, 1, 97, 0, 0, 0, 0),
            (t, 0, 97, 1, 0, 2, 0, 1, 1, 0, 0, 97, 0, 0, 0, 0)]
    rows += [(t, 0, 97, 1, 0, 2, 0, 0, 0, 1, 0, 97, 0, 0, 0, 0)] * 2
    rows += [(t, 0, 97, 1, 0, 2, 0, 0, 0, 0, 0, 97, 1, 0, 0, 0)] * 11
    rows += [(t, 4, 97, 2, 0, 1, 0, 0, 4, 0, 0, 97, 1, 0, t + 1, 0),
             (t, 0, 97, 1, 0, 2, 0, 0, 1, 0, 0, 97, 0, 0, 0, 0),
             (t, 0, 97, 1, 0, 2, 0, 1, 1, 0, 0, 97, 0, 0, 0, 0),
             (t, 0, 97, 1, 0, 2, 0, 0, 0, 0, 0, 97, 1, 0, 0, 0),
             (t + 1, 4, 97, 1, 0, 1, 0, 0, 0, 0, 0, 97, 1, 0, 0, 0)]
    orders = np.array(rows, ORDER_DTYPE)
    engine, checker = make_book("engine", "cancel_resting", VENUE_SYMBOLS), VenueChecker()
    for i in range(len(orders)):
        checker.step(engine, orders[i:i + 1])
    res = make_book("engine", "cancel_resting", VENUE_SYMBOLS).process(orders)
    four = res.events[res.events["order_id"] == 4]
    assert [int(r) for r in four["reason"]] == [0, 0, Reason.EXPIRED, 0]   # two orders 4
