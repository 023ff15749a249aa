"""The reference model keeps the venue invariants on random venue flows (issue 15).

Flows mix stops, icebergs, DAY/GTD, minimum quantities, tick tables and lots and non-owner
cancels with the old order types over several symbols (conftest.venue_flows). VenueChecker
(conftest.py) checks every message from the outputs and the public books alone; the same checks
run on the engine in test_model_vs_engine_venue.py.
"""

import pytest
from hypothesis import given, settings

from conftest import STP_MODES, VENUE_SYMBOLS, VenueChecker, make_book, sweep_flows, venue_flows


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=60, deadline=None)
@given(orders=venue_flows())
def test_model_keeps_venue_invariants_after_every_message(stp, orders):
    model, checker = make_book("model", stp, VENUE_SYMBOLS), VenueChecker()
    for i in range(len(orders)):
        checker.step(model, orders[i:i + 1])


@settings(max_examples=40, deadline=None)
@given(orders=venue_flows())
def test_model_outputs_are_deterministic_and_independent_of_batching(orders):
    whole = make_book("model", "cancel_both", VENUE_SYMBOLS).process(orders)
    again = make_book("model", "cancel_both", VENUE_SYMBOLS)
    parts = [again.process(orders[i:i + 3]) for i in range(0, len(orders), 3)]
    for i in range(3):
        assert whole[i].tobytes() == b"".join(p[i].tobytes() for p in parts)


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=60, deadline=None)
@given(orders=sweep_flows())
def test_model_refills_iceberg_slices_behind_older_orders_while_swept(stp, orders):
    model, checker = make_book("model", stp, VENUE_SYMBOLS), VenueChecker()
    for i in range(len(orders)):
        checker.step(model, orders[i:i + 1])


@pytest.mark.parametrize("book", ["model", "engine"])
def test_invariants_hold_when_a_new_order_reuses_the_id_of_a_stop_that_just_expired(book):
    # found by hypothesis: GTD stop 1 expires at ts t + 1; the message at t + 1 is a new MARKET 1
    # that fills; its fill is the new order's, not the expired stop's
    import numpy as np
    from exsim.exchange.schema import ORDER_DTYPE

    t = 1728003599999999700
    rows = [(t, 0, 97, 1, 0, 1, 0, 0, 0, 1, 0, 97, 0, 0, 0, 0)] * 5
    rows += [(t, 0, 97, 1, 0, 1, 0, 0, 1, 0, 0, 97, 0, 0, 0, 0)] * 3
    rows += [(t, 0, 97, 1, 0, 1, 0, 1, 1, 0, 0, 97, 0, 0, 0, 0)]
    rows += [(t, 0, 97, 1, 0, 1, 0, 0, 0, 0, 0, 97, 1, 0, 0, 0)] * 8
    rows += [(t, 1, 97, 1, 0, 1, 0, 2, 4, 0, 0, 97, 0, 0, t + 1, 0),
             (t, 0, 97, 1, 0, 1, 0, 0, 0, 0, 0, 97, 1, 0, 0, 0),
             (t + 1, 1, 97, 1, 0, 1, 0, 1, 1, 0, 1, 97, 0, 0, 0, 0)]
    orders = np.array(rows, ORDER_DTYPE)
    target, checker = make_book(book, "none", VENUE_SYMBOLS), VenueChecker()
    for i in range(len(orders)):
        checker.step(target, orders[i:i + 1])
    res = make_book(book, "none", VENUE_SYMBOLS).process(orders)
    assert len(res.fills) == 1 and res.fills["sell_order_id"][0] == 1
