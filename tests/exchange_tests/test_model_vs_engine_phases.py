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

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import assert_same_outputs, assert_table_equal, cut_points, levels, make_book, run
from exsim.exchange.schema import Event, OrderType, Phase, Reason
from phase_flows import (
    BUY, INTERRUPTION_NS, PHASE_SYMBOLS, SELL, T0, band_flows, call_auctions, cancel, chain, new,
    phase_flows, stop_uncross_flows, to_phase,
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


# ---- regressions: three rules the engine and the model once read differently ----------------------
# Symbol B (id 1): dynamic band of 2 % around the last trade, static band [95, 105], re-opening
# auctions of INTERRUPTION_NS. Each flow first trades 1 lot at 100 (band [98, 102]).

def _on_b(*rows):
    """The rows on symbol B, one ns apart from T0 (later rows may move their own ts)."""
    flow = chain(*rows, t0=T0, dt=1)
    flow["symbol"] = 1
    return flow


def _trade_at_100():
    return (new(1, SELL, 100, 1, trader=1), new(2, BUY, 100, 1, trader=2))


def _sell_stop(order_id, stop_price, qty, trader=5):
    return new(order_id, SELL, 0, qty, order_type=OrderType.STOP, stop_price=stop_price,
               trader=trader)


@pytest.mark.parametrize("stp", ["cancel_resting", "cancel_incoming", "cancel_both"])
def test_band_is_checked_for_the_next_fill_after_self_trade_prevention(stp):
    """At a level outside the band, the aggressor's own order at its head is handled by STP
    first: CANCEL_RESTING cancels it (not a fill) and then breaches at the next order;
    CANCEL_INCOMING / CANCEL_BOTH stop matching there, with no breach."""
    flow = _on_b(*_trade_at_100(),
                 new(3, SELL, 101, 1, trader=3),
                 new(4, SELL, 103, 1, trader=2),    # own order of the aggressor, head of 103
                 new(5, SELL, 103, 1, trader=4),
                 new(6, BUY, 104, 5, trader=2))     # fills 101, then meets 103 (outside)
    engine, model = both(stp)
    out = run(model, flow)
    assert_same_outputs(run(engine, flow), out)
    assert_same_phase_books(engine, model)
    last = out[2][out[2]["seq"] == len(flow)]
    cancelled = {int(e["order_id"]) for e in last if e["reason"] == Reason.SELF_TRADE}
    breached = (last["reason"] == Reason.PRICE_BAND).any()
    if stp == "cancel_resting":
        assert cancelled == {4} and breached
    else:
        assert 6 in cancelled and not breached


def test_indicative_is_published_right_after_a_breach_by_stops_at_a_reopening_end():
    """The stop released when a re-opening auction ends breaches the band around the uncross
    price: the new call's INDICATIVE follows at once, before the next message's rows (here a
    message on another symbol), and again after a later message on B that changes it."""
    flow = _on_b(*_trade_at_100(),
                 _sell_stop(3, 99, 1),
                 new(4, BUY, 95, 1, trader=3),
                 new(5, BUY, 97, 1, trader=3),
                 new(6, SELL, 96, 1, trader=4),     # 97 is outside [98, 102]: breach, rests
                 new(7, BUY, 99, 1, trader=6),      # after the end: on A
                 new(8, BUY, 95, 1, trader=3))      # B again: the indicative changes
    flow["ts"][-2:] += 2 * INTERRUPTION_NS
    flow["symbol"][-2] = 0
    engine, model = both()
    out = run(model, flow)
    assert_same_outputs(run(engine, flow), out)
    assert_same_phase_books(engine, model)
    ev = out[2]
    at_end = ev[ev["seq"] == len(flow) - 1]
    on_b = np.flatnonzero(at_end["symbol"] == 1)
    assert on_b[-1] < np.flatnonzero(at_end["symbol"] == 0)[0]    # B's rows come first
    b_rows = at_end[on_b]
    # the uncross at 97 triggers the stop, whose market sell meets 95 outside [96, 98]
    assert list(b_rows["event"][-4:]) == [Event.PHASE, Event.TRIGGERED, Event.PHASE,
                                          Event.INDICATIVE]
    assert list(b_rows["reason"][[-4, -2]]) == [Reason.AUCTION_END, Reason.PRICE_BAND]
    assert b_rows["price"][-1] == 95
    later = ev[ev["seq"] == len(flow)]
    assert later["event"][-1] == Event.INDICATIVE


@pytest.mark.parametrize("by", ["phase_message", "reopening_end"])
def test_entering_continuous_checks_stops_even_when_the_uncross_does_not_trade(by):
    """A fill just before a breach triggers a stop that then waits through the call; the
    uncross trades nothing, and entering CONTINUOUS (a PHASE message or the re-opening end)
    still releases it."""
    rows = [*_trade_at_100(),
            _sell_stop(3, 99, 1),
            new(4, BUY, 99, 1, trader=3),
            new(5, BUY, 95, 1, trader=3),
            new(6, SELL, 95, 2, trader=4),          # fills 99 (the stop is reached), breach at 95
            cancel(6, trader=4),                    # the call book no longer crosses
            new(7, BUY, 99, 1, trader=3)]
    rows.append(to_phase(Phase.CONTINUOUS) if by == "phase_message"
                else new(8, BUY, 99, 1, trader=6))  # a message on A after the end
    flow = _on_b(*rows)
    if by == "reopening_end":
        flow["ts"][-1] += 2 * INTERRUPTION_NS
        flow["symbol"][-1] = 0
    engine, model = both()
    out = run(model, flow)
    assert_same_outputs(run(engine, flow), out)
    assert_same_phase_books(engine, model)
    ev = out[2]
    last = ev[(ev["seq"] == len(flow)) & (ev["symbol"] == 1)]
    assert list(last["event"][:2]) == [Event.UNCROSS, Event.PHASE]
    assert last["filled_qty"][0] == 0                       # the uncross traded nothing
    assert list(last["order_id"][last["event"] == Event.TRIGGERED]) == [3]
    assert list(out[0]["sell_order_id"][out[0]["seq"] == len(flow)]) == [3]   # it sold at 99
    assert int(engine.phase("B")) == Phase.CONTINUOUS


def test_reentering_continuous_after_a_close_releases_the_stops_the_closing_uncross_triggered():
    """Stops triggered by a closing uncross wait while CLOSED; a PHASE message to CONTINUOUS
    (no auction pending, so no uncross) releases them."""
    flow = chain(to_phase(Phase.OPENING_AUCTION),
                 new(1, SELL, 100, 1, trader=1), new(2, BUY, 100, 1, trader=2),
                 new(3, BUY, 0, 1, order_type=OrderType.STOP, stop_price=102, trader=3),
                 new(4, SELL, 105, 1, trader=2),
                 to_phase(Phase.PRE_CLOSE),
                 new(5, BUY, 102, 2, trader=2), new(6, SELL, 102, 2, trader=1),
                 to_phase(Phase.CLOSING_AUCTION),
                 to_phase(Phase.CONTINUOUS), t0=T0, dt=1)
    engine, model = both()
    out = run(model, flow)
    assert_same_outputs(run(engine, flow), out)
    assert_same_phase_books(engine, model)
    last = out[2][out[2]["seq"] == len(flow)]
    assert list(last["event"]) == [Event.PHASE, Event.TRIGGERED, Event.FILLED, Event.FILLED]
    assert list(out[0][out[0]["seq"] == len(flow)][["price", "qty"]].tolist()) == [(105, 1)]
