"""The uncross through the Engine's public API: orders entered in a call, an OPENING_AUCTION
PHASE message, and the outputs checked against the brute forces of test_auction_kernel.

Needs the engine with phases (Engine.set_phase, Engine.indicative): on an engine without them
these tests fail on the first set_phase call.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from exsim.exchange import Engine
from exsim.exchange.schema import AUCTION_SIDE, Event, Phase, Reason
from test_auction_kernel import BUY, MKT, SELL, brute_price, expected_fills

_order = st.tuples(st.sampled_from([BUY, SELL]), st.integers(1, 6),
                   st.one_of(st.none(), st.integers(97, 103), st.integers(97, 103)),
                   st.sampled_from([0, 0, 0, 1, 2]))


def _call(spec, reference):
    """An engine whose symbol X is in PRE_OPEN with ``spec``'s orders entered (ids 1, 2 ...);
    return (engine, placed) as test_auction_kernel's brute forces take them."""
    eng = Engine()
    eng.add_symbol("X")
    eng.set_phase("X", Phase.PRE_OPEN, ts=1, reference_price=reference)
    placed = []
    for k, (side, qty, price, display) in enumerate(spec, start=1):
        display = display if price is not MKT and display < qty else 0
        res = eng.submit("X", "buy" if side == BUY else "sell", qty=qty, price=price or 0,
                         order_type="market" if price is MKT else "limit", order_id=k, ts=2,
                         display_qty=display)
        assert len(res.fills) == 0 and Event(res.events["event"][0]) == Event.ACCEPTED
        placed.append(dict(oid=k, side=side, price=price, qty=qty, display=display, trader=0))
    return eng, placed


def test_call_orders_rest_crossed_and_the_opening_auction_executes_them():
    eng, placed = _call([(BUY, 5, 101, 0), (BUY, 3, 100, 0), (SELL, 2, 99, 0), (SELL, 4, 100, 0),
                         (SELL, 4, 101, 0), (BUY, 2, MKT, 0)], 0)
    assert eng.indicative("X") == brute_price(placed, 0) == (101, 7, -3)
    res = eng.set_phase("X", Phase.OPENING_AUCTION, ts=3)
    fills = [(int(f["buy_order_id"]), int(f["sell_order_id"]), int(f["qty"])) for f in res.fills]
    assert fills == expected_fills(placed, 101, 7)
    assert set(res.fills["aggressor_side"]) == {AUCTION_SIDE}
    ev = res.events
    assert Event(ev["event"][0]) == Event.UNCROSS and ev["phase"][0] == Phase.OPENING_AUCTION
    assert Event(ev["event"][-1]) == Event.PHASE and ev["phase"][-1] == Phase.CONTINUOUS
    assert ev["reason"][-1] == Reason.NONE and ev["price"][-1] == 101   # the new reference
    assert eng.phase("X") == Phase.CONTINUOUS
    assert eng.indicative("X") == (0, 0, 0)


@settings(max_examples=20, deadline=None)
@given(st.lists(_order, max_size=12), st.sampled_from([0, 96, 100, 104]))
def test_random_calls_uncross_through_the_engine_as_the_brute_force_says(spec, reference):
    eng, placed = _call(spec, reference)
    want = brute_price(placed, reference)
    assert eng.indicative("X") == want
    res = eng.set_phase("X", Phase.OPENING_AUCTION, ts=3)
    p, v, surplus = want
    fills = [(int(f["buy_order_id"]), int(f["sell_order_id"]), int(f["qty"])) for f in res.fills]
    assert fills == expected_fills(placed, p, v)
    first = res.events[0]
    assert (Event(first["event"]), int(first["price"]), int(first["filled_qty"]),
            int(first["leaves_qty"])) == (Event.UNCROSS, p, v, surplus)
    book = eng.orders("X")
    market_ids = {o["oid"] for o in placed if o["price"] is MKT}
    assert not market_ids & set(book["order_id"].tolist())
