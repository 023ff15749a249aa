"""The book rows' running totals (exchange/book.py): a book's ``slices`` is the number of refills
its icebergs can still make (ceil(reserve / display) summed over its orders) and a stop book's
``stop_qty`` the sum of its pending stops' quantity.

The kernels bound the output of a stop cascade with these totals instead of walking every level
(``room._cascade_need``); a total that drifts from the levels would make that bound wrong
(an output row written past the buffer) or loose. Random venue and phase flows (icebergs
refilling, modified and cancelled, stops added, modified, triggered and expiring, uncrosses)
must leave both totals equal to the levels after every batch, and a restored checkpoint must
rebuild them.
"""

import pytest
from hypothesis import given, settings, strategies as st

from conftest import VENUE_SYMBOLS, cut_points, make_book, split, venue_flows
from phase_flows import PHASE_SYMBOLS, phase_flows


def expected_totals(engine, symbols):
    """Return (slices per order book, quantity per stop book) from the engine's public views:
    its resting orders and its pending stops, book row ``symbol * 2 + side``."""
    slices, stop_qty = [], []
    for name, *_ in symbols:
        orders, stops = engine.orders(name), engine.stops(name)
        for side in (0, 1):
            o = orders[(orders["side"] == side) & (orders["hidden"] > 0)]
            slices.append(int((-(-o["hidden"] // o["display_qty"])).sum()))
            stop_qty.append(int(stops["qty"][stops["side"] == side].sum()))
    return slices, stop_qty


def assert_totals(engine, symbols):
    s = engine.state
    slices, stop_qty = expected_totals(engine, symbols)
    assert s.books["slices"].tolist() == slices
    assert s.stops["stop_qty"].tolist() == stop_qty
    assert not s.stops["slices"].any() and not s.books["stop_qty"].any()


@settings(max_examples=60, deadline=None)
@given(orders=venue_flows(), data=st.data())
def test_totals_follow_the_levels_through_venue_flows_and_restore(orders, data):
    engine = make_book("engine", "none", VENUE_SYMBOLS)
    for batch in split(orders, data.draw(cut_points(len(orders)))):
        engine.process(batch)
        assert_totals(engine, VENUE_SYMBOLS)
    assert_totals(type(engine).restore(engine.checkpoint()), VENUE_SYMBOLS)


@settings(max_examples=60, deadline=None)
@given(orders=phase_flows())
def test_totals_follow_the_levels_through_auctions(orders):
    engine = make_book("engine", "none", PHASE_SYMBOLS)
    for k in range(len(orders)):
        engine.process(orders[k: k + 1])
        assert_totals(engine, PHASE_SYMBOLS)
    assert_totals(type(engine).restore(engine.checkpoint()), PHASE_SYMBOLS)


def test_a_drifted_total_is_seen():
    """The check above can fail: a total off by one from its levels is caught."""
    engine = make_book("engine", "none", VENUE_SYMBOLS)
    engine.state.books["slices"][0] += 1
    with pytest.raises(AssertionError):
        assert_totals(engine, VENUE_SYMBOLS)
