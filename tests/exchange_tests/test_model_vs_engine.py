"""Differential tests: the numba engine and the reference model emit identical bytes.

For every STP mode, a random flow goes through both; fills, L2 updates and events must be
byte-equal and the final books (depth and L3 orders of every symbol) identical, whether the
engine gets the flow whole, split into random batches, or one message per process() call.
"""

import pytest
from hypothesis import given, settings, strategies as st

from conftest import (
    STP_MODES, assert_same_books, assert_same_outputs, cut_points, flows, make_book,
    run,
)



@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=150, deadline=None)
@given(orders=flows())
def test_engine_matches_model_on_whole_flows(stp, orders):
    engine, model = make_book("engine", stp), make_book("model", stp)
    assert_same_outputs(run(engine, orders), run(model, orders))
    assert_same_books(engine, model)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=100, deadline=None)
@given(orders=flows(), data=st.data())
def test_engine_matches_model_when_flow_is_split_into_batches(stp, orders, data):
    engine, model = make_book("engine", stp), make_book("model", stp)
    cuts = data.draw(cut_points(len(orders)))
    assert_same_outputs(run(engine, orders, cuts), run(model, orders))
    assert_same_books(engine, model)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=40, deadline=None)
@given(orders=flows())
def test_engine_matches_model_one_message_per_call(stp, orders):
    engine, model = make_book("engine", stp), make_book("model", stp)
    assert_same_outputs(run(engine, orders, range(len(orders))), run(model, orders))
    assert_same_books(engine, model)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=60, deadline=None)
@given(orders=flows(min_size=30, max_size=200, dense=True))
def test_engine_matches_model_on_deep_single_symbol_books(stp, orders):
    engine, model = make_book("engine", stp), make_book("model", stp)
    assert_same_outputs(run(engine, orders), run(model, orders))
    assert_same_books(engine, model)
