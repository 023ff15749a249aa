"""The book rows' running totals (exchange/book.py): a book's ``hidden`` is the sum of its
levels' reserve and a stop book's ``stop_qty`` the sum of its pending stops' quantity.

The kernels bound the output of a stop cascade with these totals instead of walking every level
(``kernels._cascade_need``); a total that drifts from the levels would make that bound wrong
(an output row written past the buffer) or loose. Random venue and phase flows (icebergs
refilling, modified and cancelled, stops added, modified, triggered and expiring, uncrosses)
must leave both totals equal to the levels after every batch, and a restored checkpoint must
rebuild them.
"""

import pytest
from hypothesis import given, settings, strategies as st

from conftest import VENUE_SYMBOLS, cut_points, make_book, split, venue_flows
from phase_flows import PHASE_SYMBOLS, phase_flows


def level_sums(engine):
    """Return (hidden per order book, qty per stop book) summed over each book's levels."""
    s = engine.state
    sums = []
    for rows, field in ((s.books, "hidden"), (s.stops, "qty")):
        got = []
        for bk in rows:
            lv = s.ladder_levels[bk["off"]: bk["off"] + bk["n"]]
            got.append(int(s.levels[field][lv].sum()))
        sums.append(got)
    return sums


def assert_totals(engine):
    s = engine.state
    hidden, stop_qty = level_sums(engine)
    assert s.books["hidden"].tolist() == hidden
    assert s.stops["stop_qty"].tolist() == stop_qty
    assert not s.stops["hidden"].any() and not s.books["stop_qty"].any()


@settings(max_examples=60, deadline=None)
@given(orders=venue_flows(), data=st.data())
def test_totals_follow_the_levels_through_venue_flows_and_restore(orders, data):
    engine = make_book("engine", "none", VENUE_SYMBOLS)
    for batch in split(orders, data.draw(cut_points(len(orders)))):
        engine.process(batch)
        assert_totals(engine)
    assert_totals(type(engine).restore(engine.checkpoint()))


@settings(max_examples=60, deadline=None)
@given(orders=phase_flows())
def test_totals_follow_the_levels_through_auctions(orders):
    engine = make_book("engine", "none", PHASE_SYMBOLS)
    for k in range(len(orders)):
        engine.process(orders[k: k + 1])
        assert_totals(engine)
    assert_totals(type(engine).restore(engine.checkpoint()))


def test_a_drifted_total_is_seen():
    """The check above can fail: a total off by one from its levels is caught."""
    engine = make_book("engine", "none", VENUE_SYMBOLS)
    engine.state.books["hidden"][0] += 1
    with pytest.raises(AssertionError):
        assert_totals(engine)
