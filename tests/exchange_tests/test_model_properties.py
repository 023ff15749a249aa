"""The reference model keeps the invariants the engine is held to (checked after every batch)."""

import pytest
from hypothesis import given, settings, strategies as st

from conftest import STP_MODES, Ledger, cut_points, flows, make_book, random_flow, split
from model import Model


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=80, deadline=None)
@given(orders=flows(), data=st.data())
def test_model_keeps_book_invariants_after_every_batch(stp, orders, data):
    model, ledger = make_book("model", stp), Ledger()
    for batch in split(orders, data.draw(cut_points(len(orders)))):
        ledger.feed(batch, model.process(batch))
        ledger.check(model)


@pytest.mark.parametrize("stp", STP_MODES)
def test_model_keeps_invariants_on_a_long_seeded_flow(stp):
    model, ledger = make_book("model", stp), Ledger()
    orders = random_flow(seed=11, n=4000)
    for batch in split(orders, range(0, len(orders), 500)):
        ledger.feed(batch, model.process(batch))
        ledger.check(model)


def test_model_batching_does_not_change_outputs():
    orders = random_flow(seed=3, n=2000)
    whole = make_book("model", "cancel_both").process(orders)
    parts = make_book("model", "cancel_both")
    pieces = [parts.process(orders[i:i + 7]) for i in range(0, len(orders), 7)]
    for i in range(3):
        assert whole[i].tobytes() == b"".join(p[i].tobytes() for p in pieces)
