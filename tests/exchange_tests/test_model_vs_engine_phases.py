"""Differential tests of trading phases, auctions and price bands (issue 16): engine vs model.

Random flows (phase_flows: calls with crossed books and their uncrosses, market orders resting at
their call prices, icebergs taking part with their whole quantity, equal sizes so that volume and
surplus tie, reference prices inside and outside the auction range, halts during a call, dynamic
band breaches whose re-opening auctions end by time, DAY and GTD expiries during calls, stops
pending across an uncross, invalid PHASE messages) go through the numba engine and the reference
model: fills, L2 updates and events must be byte-equal (the events' ``price`` and ``phase``
included), and the books (``orders``, ``stops``, ``depth``), ``phase()`` and ``indicative()`` of
every symbol identical after the flow; an engine restored from a checkpoint taken mid-flow goes
on exactly as the model.

These tests need the engine that implements docs/semantics.md "Trading phases, auctions and
price bands" (Engine.add_symbol's phase options, Kind.PHASE, checkpoints of the phase state).
"""

import pytest
from hypothesis import given, settings, strategies as st

from conftest import assert_same_outputs, assert_table_equal, cut_points, levels, make_book, run
from phase_flows import (
    PHASE_SYMBOLS, band_flows, call_auctions, phase_flows, stop_uncross_flows,
)


def assert_same_phase_books(a, b, symbols=PHASE_SYMBOLS):
    """Depth, resting orders, pending stops, phase and published indicative of every symbol."""
    for name, *_ in symbols:
        for side_a, side_b in zip(a.depth(name, levels=10**6), b.depth(name, levels=10**6)):
            assert levels(side_a) == levels(side_b), f"depth of {name}"
        assert_table_equal(f"orders({name})", a.orders(name), b.orders(name))
        assert_table_equal(f"stops({name})", a.stops(name), b.stops(name))
        assert int(a.phase(name)) == int(b.phase(name)), f"phase of {name}"
        assert tuple(map(int, a.indicative(name))) == tuple(map(int, b.indicative(name))), \
            f"indicative of {name}"


def both(stp="none"):
    return make_book("engine", stp, PHASE_SYMBOLS), make_book("model", stp, PHASE_SYMBOLS)


def check(orders, stp="none", cuts=()):
    engine, model = both(stp)
    assert_same_outputs(run(engine, orders, cuts), run(model, orders))
    assert_same_phase_books(engine, model)


@pytest.mark.parametrize("stp", ["none", "cancel_both"])
@settings(max_examples=30, deadline=None)
@given(orders=phase_flows())
def test_engine_matches_model_on_random_phase_flows(stp, orders):
    check(orders, stp)


@settings(max_examples=20, deadline=None)
@given(orders=phase_flows(), data=st.data())
def test_engine_matches_model_on_phase_flows_split_into_batches(orders, data):
    check(orders, "cancel_resting", data.draw(cut_points(len(orders))))


@pytest.mark.parametrize("stp", ["none", "cancel_incoming"])
@settings(max_examples=30, deadline=None)
@given(orders=call_auctions())
def test_engine_matches_model_on_calls_and_uncrosses(stp, orders):
    check(orders, stp)


@settings(max_examples=30, deadline=None)
@given(orders=band_flows())
def test_engine_matches_model_on_band_breaches_and_reopenings(orders):
    check(orders)


@pytest.mark.parametrize("stp", ["none", "cancel_resting"])
@settings(max_examples=30, deadline=None)
@given(orders=stop_uncross_flows())
def test_engine_matches_model_on_stops_pending_across_an_uncross(stp, orders):
    check(orders, stp)


@settings(max_examples=15, deadline=None)
@given(orders=call_auctions())
def test_engine_matches_model_one_message_per_call(orders):
    check(orders, cuts=range(len(orders)))


@settings(max_examples=20, deadline=None)
@given(orders=st.one_of(phase_flows(), stop_uncross_flows()), data=st.data())
def test_engine_restored_mid_phase_flow_goes_on_as_the_model(orders, data):
    """A checkpoint taken anywhere in a phase flow (in a call, a halt, a re-opening auction with
    its end pending) restores to an engine whose future outputs and books are the model's."""
    at = data.draw(st.integers(0, len(orders)))
    engine, model = both()
    engine.process(orders[:at])
    model.process(orders[:at])
    restored = type(engine).restore(engine.checkpoint())
    assert_same_outputs(run(restored, orders[at:]), run(model, orders[at:]))
    assert_same_phase_books(restored, model)
