"""Hand cases for every rule of docs/semantics.md "Trading phases, auctions and price bands",
against the reference model only (the model is what the engine is held to, so each rule is
checked here on a book small enough to work out by hand), and properties of the model's
uncrosses on random phase flows.

Events are read as (event, reason, order_id, filled_qty, leaves_qty, price, phase) tuples.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import make_book
from exsim.exchange.schema import (
    CALL_MARKET_PRICE, MAX_PRICE, Event, Kind, OrderType, Phase, Reason, Tif,
)
from model import Model, auction_price
from phase_flows import (
    BUY, PHASE_SYMBOLS, SELL, band_flows, call_auctions, cancel, chain, market, modify, new,
    phase_flows, stop_uncross_flows, to_phase,
)

E, R, P = Event, Reason, Phase


def book(**options):
    """A model with one symbol "X" (id 0) added with `options`."""
    m = Model()
    m.add_symbol("X", **options)
    return m


def call(**options):
    return book(**{"phase": "pre_open", **options})


def go(m, *rows):
    return m.process(chain(*rows))


def events(res):
    return [(E(e["event"]), R(e["reason"]), int(e["order_id"]), int(e["filled_qty"]),
             int(e["leaves_qty"]), int(e["price"]), P(e["phase"])) for e in res.events]


def kinds(res):
    return [(E(e["event"]), int(e["order_id"])) for e in res.events]


def fills(res):
    return [(int(f["price"]), int(f["qty"]), int(f["buy_order_id"]), int(f["sell_order_id"]),
             int(f["aggressor_side"])) for f in res.fills]


def l2(res):
    return [(int(r["side"]), int(r["price"]), int(r["qty"]), int(r["count"])) for r in res.l2]


def rejected(res):
    (e,) = res.events
    assert e["event"] == E.REJECTED
    return R(e["reason"])


def uncross_of(res):
    """(price, volume, surplus, auction) of the message's UNCROSS event."""
    (u,) = [e for e in res.events if e["event"] == E.UNCROSS]
    return int(u["price"]), int(u["filled_qty"]), int(u["leaves_qty"]), P(u["phase"])


# ---- phases and what each accepts -----------------------------------------------------------------

def test_a_symbol_starts_continuous_and_its_events_say_so():
    m = book()
    res = go(m, new(1, SELL, 100, 5), new(2, BUY, 100, 2, trader=2))
    assert m.phase("X") == P.CONTINUOUS
    assert fills(res) == [(100, 2, 2, 1, BUY)]
    assert {e[6] for e in events(res)} == {P.CONTINUOUS}


def test_in_a_call_orders_rest_without_matching_and_the_book_may_cross():
    m = call()
    res = go(m, new(1, SELL, 99, 5), new(2, BUY, 101, 3, trader=2))
    assert fills(res) == []
    assert l2(res) == [(SELL, 99, 5, 1), (BUY, 101, 3, 1)]
    bids, asks = m.depth("X")
    assert bids["price"][0] > asks["price"][0]
    assert {e[6] for e in events(res)} == {P.PRE_OPEN}


@pytest.mark.parametrize("fields", [dict(tif=Tif.IOC), dict(tif=Tif.FOK), dict(flags=1),
                                    dict(min_qty=1)])
def test_a_call_refuses_ioc_fok_post_only_and_min_qty(fields):
    assert rejected(go(call(), new(1, BUY, 100, 2, **fields))) == R.NOT_IN_CALL


def test_not_in_call_comes_after_bad_expiry_and_before_duplicate_id():
    m = call()
    go(m, new(1, BUY, 100, 2))
    assert rejected(go(m, new(2, BUY, 100, 2, tif=Tif.IOC, expire_ts=5))) == R.BAD_EXPIRY
    assert rejected(go(m, new(1, BUY, 100, 2, tif=Tif.IOC))) == R.NOT_IN_CALL


@pytest.mark.parametrize("phase, reason", [(P.HALTED, R.SYMBOL_HALTED), (P.CLOSED, R.SYMBOL_CLOSED)])
def test_halted_and_closed_refuse_new_and_modify_before_any_other_check_but_accept_cancel(
        phase, reason):
    m = book()
    go(m, new(1, BUY, 100, 2), to_phase(phase))
    assert rejected(go(m, new(2, 7, 100, 2))) == reason          # before BAD_SIDE
    assert rejected(go(m, modify(1, 99, 2))) == reason
    res = go(m, cancel(1))
    assert events(res) == [(E.CANCELLED, R.USER_CANCEL, 1, 0, 0, 0, phase)]
    assert l2(res) == [(BUY, 100, 0, 0)]


def test_a_market_order_rests_at_its_call_price_and_cannot_be_modified():
    m = call()
    res = go(m, market(1, BUY, 3), market(2, SELL, 2))
    assert l2(res) == [(BUY, CALL_MARKET_PRICE[BUY], 3, 1), (SELL, CALL_MARKET_PRICE[SELL], 2, 1)]
    assert CALL_MARKET_PRICE == (MAX_PRICE + 1, 0)
    assert [int(p) for p in m.orders("X")["price"]] == [MAX_PRICE + 1, 0]
    assert rejected(go(m, modify(1, MAX_PRICE, 3))) == R.NOT_IN_CALL
    assert rejected(go(m, modify(2, 0, 3))) == R.BAD_PRICE   # step 9 comes before 11b


def test_a_new_price_modify_in_a_call_rests_at_the_back_without_matching():
    m = call()
    go(m, new(1, SELL, 101, 2), new(2, SELL, 100, 2), new(3, BUY, 99, 4, trader=2))
    res = go(m, modify(2, 101, 2))
    assert fills(res) == [] and kinds(res) == [(E.MODIFIED, 2)]
    assert l2(res) == [(SELL, 100, 0, 0), (SELL, 101, 4, 2)]
    res = go(m, modify(3, 102, 4, trader=2))
    assert fills(res) == [] and [int(o) for o in m.orders("X")["order_id"]] == [3, 1, 2]


def test_orders_expire_in_a_call_and_the_indicative_follows():
    m = call()
    go(m, new(1, SELL, 100, 2, tif=Tif.GTD, expire_ts=10, ts=1), new(2, BUY, 100, 2, ts=2,
                                                                        trader=2))
    assert m.indicative("X") == (100, 2, 0)
    res = go(m, new(3, BUY, 90, 1, ts=10))
    assert kinds(res) == [(E.CANCELLED, 1), (E.INDICATIVE, 0), (E.ACCEPTED, 3)]
    assert events(res)[1] == (E.INDICATIVE, R.NONE, 0, 0, 0, 0, P.PRE_OPEN)


# ---- PHASE messages -------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, reason", [
    (dict(phase=8), R.BAD_PHASE), (dict(phase=255, price=-1), R.BAD_PHASE),
    (dict(phase=P.PRE_OPEN, price=-1), R.BAD_PRICE),
    (dict(phase=P.PRE_OPEN, price=111), R.PRICE_OUT_OF_BAND),
    (dict(phase=P.PRE_OPEN, price=111, end=50), R.PRICE_OUT_OF_BAND),
    (dict(phase=P.PRE_OPEN, price=105), R.OFF_TICK),             # ticks of 2 from 104
    (dict(phase=P.PRE_OPEN, price=105, end=50), R.OFF_TICK),
    (dict(phase=P.PRE_OPEN, end=50), R.BAD_EXPIRY),
    (dict(phase=P.REOPENING_AUCTION, end=10), R.BAD_EXPIRY),   # end <= ts
])
def test_phase_message_validation_in_order(fields, reason):
    m = book(min_price=90, max_price=110, tick_table=[(1, 1), (104, 2)])
    phase = fields.pop("phase")
    res = go(m, to_phase(phase, ts=10, order_id=4, **fields))
    assert events(res) == [(E.REJECTED, reason, 4, 0, 0, 0, P.CONTINUOUS)]
    assert m.phase("X") == P.CONTINUOUS


def test_phase_event_fields_and_a_phase_message_to_the_current_phase():
    m = book(reference_price=100)
    assert events(go(m, to_phase(P.HALTED))) == [(E.PHASE, R.NONE, 0, 0, 0, 100, P.HALTED)]
    assert events(go(m, to_phase(P.HALTED, price=105))) == [
        (E.PHASE, R.NONE, 0, 0, 0, 105, P.HALTED)]
    assert m.phase("X") == P.HALTED


def test_opening_auction_uncrosses_then_continuous_and_closing_auction_then_closed():
    m = call()
    go(m, new(1, SELL, 100, 2), new(2, BUY, 100, 2, trader=2))
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert uncross_of(res) == (100, 2, 0, P.OPENING_AUCTION)
    assert m.phase("X") == P.CONTINUOUS and events(res)[-1][6] == P.CONTINUOUS
    go(m, to_phase(P.PRE_CLOSE), new(3, SELL, 101, 2), new(4, BUY, 101, 2, trader=2))
    res = go(m, to_phase(P.CLOSING_AUCTION))
    assert uncross_of(res) == (101, 2, 0, P.CLOSING_AUCTION)
    assert m.phase("X") == P.CLOSED


def test_continuous_or_closed_after_a_call_uncross_its_pending_auction():
    for target in (P.CONTINUOUS, P.CLOSED):
        m = call()
        go(m, new(1, SELL, 100, 2), new(2, BUY, 100, 2, trader=2))
        assert uncross_of(go(m, to_phase(target)))[3] == P.OPENING_AUCTION
        assert m.phase("X") == target


def test_a_halt_during_a_call_suspends_it_and_the_resume_uncrosses_it():
    m = call()
    go(m, new(1, SELL, 100, 2), new(2, BUY, 100, 2, trader=2))
    res = go(m, to_phase(P.HALTED))
    assert kinds(res) == [(E.PHASE, 0)] and m.indicative("X") == (0, 0, 0)
    assert len(m.orders("X")) == 2
    res = go(m, to_phase(P.CONTINUOUS))
    assert uncross_of(res) == (100, 2, 0, P.OPENING_AUCTION)


def test_entering_another_call_makes_its_auction_the_pending_one():
    m = call()
    go(m, new(1, SELL, 100, 2), new(2, BUY, 100, 2, trader=2), to_phase(P.PRE_CLOSE))
    assert uncross_of(go(m, to_phase(P.CLOSED)))[3] == P.CLOSING_AUCTION


def test_continuous_without_a_pending_auction_does_not_uncross():
    m = book()
    go(m, to_phase(P.HALTED))
    assert kinds(go(m, to_phase(P.CONTINUOUS))) == [(E.PHASE, 0)]


def test_opening_auction_from_continuous_uncrosses_an_uncrossed_book_with_nothing():
    m = book()
    go(m, new(1, SELL, 101, 2), new(2, BUY, 100, 2))
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert events(res) == [(E.UNCROSS, R.NONE, 0, 0, 0, 0, P.OPENING_AUCTION),
                           (E.PHASE, R.NONE, 0, 0, 0, 0, P.CONTINUOUS)]


# ---- the uncross price ----------------------------------------------------------------------------

def price_of(*rows, **options):
    m = call(**options)
    go(m, *rows)
    return auction_price(m.books[0])


def test_rule_1_maximum_executable_volume():
    # B(99)=8 S(99)=3 V=3; B(100)=5 S(100)=5 V=5; B(101)=2 S(101)=9 V=2
    assert price_of(new(1, BUY, 99, 3), new(2, BUY, 100, 3), new(3, BUY, 101, 2),
                    new(4, SELL, 99, 3), new(5, SELL, 100, 2), new(6, SELL, 101, 4)) == (100, 5, 0)


def test_rule_2_minimum_surplus_among_equal_volumes():
    # V=4 at 99, 100 and 101; surplus +2 at 99, +1 at 100, -3 at 101
    assert price_of(new(1, BUY, 101, 4), new(2, BUY, 99, 2), new(3, BUY, 100, 1),
                    new(4, SELL, 99, 4), new(5, SELL, 101, 4)) == (100, 4, 1)


def test_rule_3_buy_surplus_takes_the_highest_and_sell_surplus_the_lowest():
    # buys 101x5, 100x5; sell 99x4: V=4 at 99..101, surplus 6 at 99 and 100, 1 at 101
    assert price_of(new(1, BUY, 101, 5), new(2, BUY, 100, 5), new(3, SELL, 99, 4)) == (101, 4, 1)
    # V=2 and surplus +1 at both 100 and 101: the highest
    assert price_of(new(1, BUY, 101, 3), new(2, SELL, 100, 2)) == (101, 2, 1)
    # sell surplus at every best candidate: the lowest
    assert price_of(new(1, BUY, 101, 4), new(2, SELL, 99, 5), new(3, SELL, 100, 5)) == (99, 4, -1)


@pytest.mark.parametrize("reference, want", [(100, 100), (101, 101), (102, 102), (99, 100),
                                            (150, 102), (0, 100)])
def test_rule_4_the_reference_clamped_into_the_range_of_balanced_candidates(reference, want):
    # buy 102x3, sell 100x3: V=3 and surplus 0 at 100 and 102 (101 is not a candidate)
    m = call(reference_price=reference)
    go(m, new(1, BUY, 102, 3), new(2, SELL, 100, 3, trader=2))
    assert auction_price(m.books[0]) == (want, 3, 0)


def test_rule_4_surpluses_of_both_signs_use_the_reference():
    # buy 102x3 + 100x1, sell 100x3 + 102x1: V=3 at 100 with surplus +1 and at 102 with -1;
    # equal |surplus| of both signs: the reference 101, where B = S = 3
    m = call(reference_price=101)
    go(m, new(1, BUY, 102, 3), new(2, BUY, 100, 1), new(3, SELL, 100, 3), new(4, SELL, 102, 1))
    assert auction_price(m.books[0]) == (101, 3, 0)


def test_rule_4_without_a_reference_price_the_last_trade_is_used():
    m = book()
    go(m, new(1, SELL, 101, 1), new(2, BUY, 101, 1, trader=2), to_phase(P.PRE_OPEN),
       new(3, BUY, 102, 3), new(4, SELL, 100, 3, trader=2))
    assert m.indicative("X") == (101, 3, 0)


def test_market_orders_only_execute_at_the_reference_price_and_not_without_one():
    m = call(reference_price=100)
    go(m, market(1, BUY, 3), market(2, SELL, 5))
    assert m.indicative("X") == (100, 3, -2)
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert fills(res) == [(100, 3, 1, 2, 2)]
    assert kinds(res)[-2:] == [(E.CANCELLED, 2), (E.PHASE, 0)]
    m = call()
    go(m, market(1, BUY, 3), market(2, SELL, 5))
    assert m.indicative("X") == (0, 0, 0)


def test_market_orders_are_not_candidates_but_count_in_the_volume():
    # a sell market of 4 and buy limits 101x2, 100x3: S(p) = 4 at every price
    assert price_of(market(1, SELL, 4), new(2, BUY, 101, 2), new(3, BUY, 100, 3)) == (100, 4, 1)


# ---- allocation and the outputs of an uncross -----------------------------------------------------

def test_uncross_outputs_in_order_priority_markets_first_and_partial_last():
    m = call(reference_price=100)
    go(m, new(1, BUY, 100, 2, trader=1), new(2, BUY, 101, 2, trader=2), market(3, BUY, 1),
       new(4, BUY, 100, 2, trader=3), new(5, SELL, 99, 3, trader=4), new(6, SELL, 100, 3),
       market(7, SELL, 8, trader=5))
    # V = 7 (every buy) at 99 (S = 11, surplus -4) and 100 (S = 14, -7): 99. The sell market
    # alone gives the 7 lots (it has 8); buys in priority: market, 101, then 100 by time
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert uncross_of(res) == (99, 7, -4, P.OPENING_AUCTION)
    assert fills(res) == [(99, 1, 3, 7, 2), (99, 2, 2, 7, 2), (99, 2, 1, 7, 2),
                          (99, 2, 4, 7, 2)]
    assert kinds(res) == [(E.UNCROSS, 0), (E.FILLED, 3), (E.PARTIAL, 7), (E.FILLED, 2),
                          (E.PARTIAL, 7), (E.FILLED, 1), (E.PARTIAL, 7), (E.FILLED, 4),
                          (E.PARTIAL, 7), (E.CANCELLED, 7), (E.PHASE, 0)]
    assert events(res)[9] == (E.CANCELLED, R.NO_LIQUIDITY, 7, 7, 0, 0, P.PRE_OPEN)
    assert l2(res) == [(BUY, MAX_PRICE + 1, 0, 0), (BUY, 101, 0, 0), (BUY, 100, 0, 0),
                       (SELL, 0, 0, 0)]
    assert [int(o) for o in m.orders("X")["order_id"]] == [5, 6]
    assert m.books[0].last == m.books[0].ref == 99


def test_fill_events_carry_the_auction_price_and_the_call_phase_then_the_phase_event_last():
    m = call()
    go(m, new(1, BUY, 101, 3), new(2, SELL, 99, 3, trader=2))
    res = go(m, to_phase(P.OPENING_AUCTION, price=100))
    assert events(res) == [
        (E.UNCROSS, R.NONE, 0, 3, 0, 100, P.OPENING_AUCTION),
        (E.FILLED, R.NONE, 1, 3, 0, 100, P.PRE_OPEN),
        (E.FILLED, R.NONE, 2, 3, 0, 100, P.PRE_OPEN),
        (E.PHASE, R.NONE, 0, 0, 0, 100, P.CONTINUOUS)]


def test_an_iceberg_takes_part_with_its_whole_quantity_and_refills_at_the_back():
    m = call()
    go(m, new(1, SELL, 100, 10, display_qty=2), new(2, SELL, 100, 3, trader=2),
       new(3, BUY, 100, 7, trader=3))
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert fills(res) == [(100, 7, 3, 1, 2)]
    assert l2(res) == [(BUY, 100, 0, 0), (SELL, 100, 5, 2)]
    o = m.orders("X")
    assert [(int(r["order_id"]), int(r["qty"]), int(r["hidden"])) for r in o] == [(2, 3, 0),
                                                                               (1, 2, 1)]


def test_an_iceberg_keeps_its_place_when_its_displayed_part_is_not_used_up():
    m = call()
    go(m, new(1, SELL, 100, 10, display_qty=4), new(2, SELL, 100, 3, trader=2),
       new(3, BUY, 100, 1, trader=3))
    go(m, to_phase(P.OPENING_AUCTION))
    o = m.orders("X")
    assert [(int(r["order_id"]), int(r["qty"]), int(r["hidden"])) for r in o] == [(1, 3, 6),
                                                                               (2, 3, 0)]


def test_self_trade_prevention_does_not_apply_to_the_uncross():
    m = Model(stp="cancel_both")
    m.add_symbol("X", phase="pre_open")
    go(m, new(1, BUY, 100, 2), new(2, SELL, 100, 2))
    assert fills(go(m, to_phase(P.OPENING_AUCTION))) == [(100, 2, 1, 2, 2)]


def test_an_uncross_with_nothing_to_execute_still_cancels_the_market_orders():
    m = call()
    go(m, market(1, BUY, 2), new(2, BUY, 99, 1))
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert events(res) == [(E.UNCROSS, R.NONE, 0, 0, 0, 0, P.OPENING_AUCTION),
                           (E.CANCELLED, R.NO_LIQUIDITY, 1, 0, 0, 0, P.PRE_OPEN),
                           (E.PHASE, R.NONE, 0, 0, 0, 0, P.CONTINUOUS)]
    assert l2(res) == [(BUY, MAX_PRICE + 1, 0, 0)]


# ---- the indicative uncross -----------------------------------------------------------------------

def test_indicative_after_each_change_only_and_reset_on_entering_a_call():
    m = call()
    assert kinds(go(m, new(1, BUY, 100, 2))) == [(E.ACCEPTED, 1)]
    res = go(m, new(2, SELL, 100, 3, trader=2))
    assert events(res)[-1] == (E.INDICATIVE, R.NONE, 0, 2, -1, 100, P.PRE_OPEN)
    assert kinds(go(m, new(3, SELL, 105, 3, trader=2))) == [(E.ACCEPTED, 3)]   # unchanged
    assert m.indicative("X") == (100, 2, -1)
    res = go(m, to_phase(P.PRE_CLOSE))   # re-entering a call publishes again
    assert kinds(res) == [(E.PHASE, 0), (E.INDICATIVE, 0)]
    res = go(m, cancel(1))
    assert events(res)[-1] == (E.INDICATIVE, R.NONE, 0, 0, 0, 0, P.PRE_CLOSE)
    go(m, new(4, BUY, 100, 2), to_phase(P.HALTED))
    assert m.indicative("X") == (0, 0, 0)   # outside a call


# ---- price bands and volatility interruptions -----------------------------------------------------

def test_static_band_rejects_limit_prices_outside_it_after_off_tick():
    m = book(reference_price=100, static_band_bps=500, tick_table=[(1, 1), (104, 2)])
    assert rejected(go(m, new(1, BUY, 94, 1))) == R.OUTSIDE_STATIC_BAND
    assert rejected(go(m, new(1, BUY, 107, 1))) == R.OFF_TICK
    assert rejected(go(m, new(1, BUY, 106, 1, order_type=OrderType.STOP_LIMIT,
                              stop_price=300))) == R.OUTSIDE_STATIC_BAND
    assert kinds(go(m, new(1, BUY, 95, 1)))[0] == (E.ACCEPTED, 1)
    assert rejected(go(m, modify(1, 106, 1))) == R.OUTSIDE_STATIC_BAND
    assert kinds(go(m, market(2, SELL, 1, tif=Tif.IOC)))[0] == (E.ACCEPTED, 2)


def test_static_band_needs_a_reference_price_and_moves_with_a_phase_message():
    m = book(static_band_bps=500)
    assert kinds(go(m, new(1, BUY, 10, 1)))[0] == (E.ACCEPTED, 1)
    go(m, to_phase(P.CONTINUOUS, price=200))
    assert rejected(go(m, new(2, BUY, 100, 1))) == R.OUTSIDE_STATIC_BAND
    assert len(m.orders("X")) == 1   # checked on entry only


def band_book(**options):
    """Last trade 100, dynamic band +-2 (200 bps), asks at 101, 102 and 103."""
    m = book(dynamic_band_bps=200, interruption_ns=50, **options)
    go(m, new(1, SELL, 100, 1), new(2, BUY, 100, 1, trader=2),
       new(3, SELL, 101, 1), new(4, SELL, 102, 1), new(5, SELL, 103, 1))
    return m


def test_a_fill_outside_the_dynamic_band_starts_a_reopening_auction():
    m = band_book()
    res = go(m, new(6, BUY, 103, 5, trader=2, ts=1000))
    assert fills(res) == [(101, 1, 6, 3, BUY), (102, 1, 6, 4, BUY)]
    assert kinds(res)[-3:] == [(E.FILLED, 4), (E.PHASE, 0), (E.INDICATIVE, 0)]
    assert events(res)[-2] == (E.PHASE, R.PRICE_BAND, 0, 0, 0, 0, P.REOPENING_AUCTION)
    assert events(res)[-1] == (E.INDICATIVE, R.NONE, 0, 1, 2, 103, P.REOPENING_AUCTION)
    assert l2(res) == [(SELL, 101, 0, 0), (SELL, 102, 0, 0), (BUY, 103, 3, 1)]
    assert m.phase("X") == P.REOPENING_AUCTION and m.books[0].auction_end == 1050


def test_the_band_is_around_the_last_trade_at_the_start_of_the_message():
    m = band_book()
    res = go(m, new(6, BUY, 102, 2, trader=2))   # 101 then 102: both within 100 +- 2
    assert [f[0] for f in fills(res)] == [101, 102] and m.phase("X") == P.CONTINUOUS


@pytest.mark.parametrize("aggressor, rest", [
    # an IOC's rest is cancelled (the book left does not cross: no indicative to publish)
    (market(6, BUY, 5, trader=2, tif=Tif.IOC), [(E.CANCELLED, R.IOC_UNFILLED)]),
    (new(6, BUY, 103, 5, trader=2, tif=Tif.IOC), [(E.CANCELLED, R.IOC_UNFILLED)]),
    # a GTC market rests at its call price and crosses the ask at 103: 1 lot at 103, surplus 2
    (market(6, BUY, 5, trader=2, tif=Tif.GTC), [(E.INDICATIVE, R.NONE)]),
])
def test_what_is_left_of_the_aggressor_after_a_breach(aggressor, rest):
    m = band_book()
    res = go(m, aggressor)
    after = [(e[0], e[1]) for e in events(res)]
    i = after.index((E.PHASE, R.PRICE_BAND))
    assert after[i + 1:] == rest
    if aggressor["tif"][0] == Tif.GTC:
        assert int(m.orders("X")["price"][0]) == CALL_MARKET_PRICE[BUY]
        assert m.indicative("X") == (103, 1, 2)


def test_fok_walk_stops_at_the_band_so_an_fok_never_breaches():
    m = band_book()
    assert rejected(go(m, new(6, BUY, 103, 3, tif=Tif.FOK, trader=2))) == R.FOK_CANNOT_FILL
    res = go(m, new(7, BUY, 103, 2, tif=Tif.FOK, trader=2))
    assert len(fills(res)) == 2 and m.phase("X") == P.CONTINUOUS


def test_a_reopening_auction_ends_by_time_before_the_message_that_reaches_it():
    m = band_book()
    go(m, new(6, BUY, 103, 5, trader=2, ts=1000))
    assert kinds(go(m, new(7, SELL, 110, 1, ts=1049)))[-1] == (E.ACCEPTED, 7)   # not yet
    res = go(m, new(8, SELL, 110, 1, ts=1050))
    assert uncross_of(res) == (103, 1, 2, P.REOPENING_AUCTION)
    assert kinds(res) == [(E.UNCROSS, 0), (E.PARTIAL, 6), (E.FILLED, 5), (E.PHASE, 0),
                          (E.ACCEPTED, 8)]
    assert events(res)[3] == (E.PHASE, R.AUCTION_END, 0, 0, 0, 103, P.CONTINUOUS)
    assert set(int(s) for s in res.events["seq"]) == {m.seq}
    assert m.phase("X") == P.CONTINUOUS


def test_stops_released_at_the_auction_end_match_within_a_band_around_the_uncross_price():
    m = band_book()
    go(m, new(6, BUY, 103, 5, trader=2, ts=1000))          # breach: 3 lots rest at 103
    go(m, new(7, BUY, 0, 1, order_type=OrderType.STOP, stop_price=103, trader=3, ts=1001),
       new(8, SELL, 106, 1, ts=1002))                      # 106 is outside 103 +- 2
    res = go(m, new(9, SELL, 120, 1, ts=1050))
    assert uncross_of(res)[:2] == (103, 1)
    assert [(e[0], e[1]) for e in events(res)][3:] == [
        (E.PHASE, R.AUCTION_END), (E.TRIGGERED, R.NONE), (E.PHASE, R.PRICE_BAND),
        (E.INDICATIVE, R.NONE), (E.ACCEPTED, R.NONE)]
    assert m.phase("X") == P.REOPENING_AUCTION and m.books[0].auction_end == 1100
    assert int(m.orders("X")["price"][0]) == CALL_MARKET_PRICE[BUY]


def test_a_phase_message_to_reopening_sets_its_end_or_none():
    m = book()
    go(m, to_phase(P.REOPENING_AUCTION, end=100, ts=1), new(1, BUY, 100, 1),
       new(2, SELL, 100, 1, trader=2))
    assert uncross_of(go(m, new(3, BUY, 1, 1, ts=100)))[:2] == (100, 1)
    go(m, to_phase(P.REOPENING_AUCTION, ts=200))
    assert kinds(go(m, new(4, BUY, 1, 1, ts=10**18)))[-1] == (E.ACCEPTED, 4)
    assert m.phase("X") == P.REOPENING_AUCTION


# ---- stops ----------------------------------------------------------------------------------------

def test_stops_wait_through_a_call_and_are_released_after_the_opening_uncross():
    m = book()
    go(m, new(1, SELL, 100, 1), new(2, BUY, 100, 1, trader=2), to_phase(P.PRE_OPEN),
       new(3, BUY, 0, 1, order_type=OrderType.STOP, stop_price=102, trader=3),
       new(4, SELL, 105, 1, trader=2), new(5, BUY, 102, 2, trader=2),
       new(6, SELL, 102, 2))
    assert len(m.stops("X")) == 1
    res = go(m, to_phase(P.OPENING_AUCTION))
    assert kinds(res)[-4:] == [(E.PHASE, 0), (E.TRIGGERED, 3), (E.FILLED, 3), (E.FILLED, 4)]
    assert fills(res)[-1] == (105, 1, 3, 4, BUY)


def test_stops_triggered_by_a_closing_uncross_stay_pending_while_closed():
    m = book()
    go(m, new(1, SELL, 100, 1), new(2, BUY, 100, 1, trader=2),
       new(3, BUY, 0, 1, order_type=OrderType.STOP, stop_price=102, trader=3),
       to_phase(P.PRE_CLOSE), new(5, BUY, 102, 2, trader=2), new(6, SELL, 102, 2))
    res = go(m, to_phase(P.CLOSING_AUCTION))
    assert E.TRIGGERED not in [k for k, _ in kinds(res)] and len(m.stops("X")) == 1


def test_a_stop_entered_in_a_call_is_checked_against_the_last_trade():
    m = book()
    go(m, new(1, SELL, 100, 1), new(2, BUY, 100, 1, trader=2), to_phase(P.PRE_OPEN))
    assert rejected(go(m, new(3, BUY, 0, 1, order_type=OrderType.STOP,
                              stop_price=100))) == R.STOP_PRICE_REACHED


# ---- properties of the model on random phase flows ------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(orders=st.one_of(phase_flows(), call_auctions(), band_flows(), stop_uncross_flows()))
def test_model_uncrosses_are_maximal_at_one_price_and_leave_no_crossed_book(orders):
    """Message by message: an uncross run by a PHASE message (no expiry before it) executes the
    largest volume any integer price would (checked over every price of the book, not only the
    candidates), all its fills are at its price and add up to its volume; outside a call and a
    halt no MARKET order rests and the book is not crossed; in CONTINUOUS no pending stop is
    triggered."""
    m = make_book("model", "none", PHASE_SYMBOLS)
    for i in range(len(orders)):
        before = {n: m.orders(n) for n, *_ in PHASE_SYMBOLS}
        res = m.process(orders[i:i + 1])
        ev = res.events
        if orders[i]["kind"] == Kind.PHASE and not np.any(ev["reason"] == R.EXPIRED):
            for u in ev[ev["event"] == E.UNCROSS]:
                book = before[PHASE_SYMBOLS[int(u["symbol"])][0]]
                open_qty = book["qty"] + book["hidden"]
                limits = book["price"][(book["price"] > 0) & (book["price"] <= MAX_PRICE)]
                best = 0
                for p in range(int(limits.min()), int(limits.max()) + 1) if len(limits) else ():
                    bought = open_qty[(book["side"] == BUY) & (book["price"] >= p)].sum()
                    sold = open_qty[(book["side"] == SELL) & (book["price"] <= p)].sum()
                    best = max(best, min(bought, sold))
                auction = res.fills[res.fills["aggressor_side"] == 2]
                if len(limits):
                    assert u["filled_qty"] == best, "the uncross volume is the largest possible"
                assert auction["qty"].sum() == u["filled_qty"]
                assert np.all(auction["price"] == u["price"])
        for k, (name, *_) in enumerate(PHASE_SYMBOLS):
            if m.phase(name) == P.CONTINUOUS:
                assert m.books[k].triggered() is None, "a triggered stop waits in CONTINUOUS"
            if m.phase(name) in (P.CONTINUOUS, P.CLOSED):
                o = m.orders(name)
                assert not np.any(o["order_type"] == OrderType.MARKET), "a market order rests"
                bids, asks = m.depth(name)
                assert not (len(bids) and len(asks) and bids[0]["price"] >= asks[0]["price"])
