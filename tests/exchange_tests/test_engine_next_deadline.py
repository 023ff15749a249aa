"""``Engine.next_deadline``: the earliest message-clock time at which the engine acts by itself
(an expiry or a re-opening auction's end), which a live gateway uses to send its clock message."""

from __future__ import annotations

from exsim.exchange import Engine

DAY_NS = 86_400 * 10**9


def test_no_deadline_on_an_empty_engine_and_after_everything_expired():
    eng = Engine()
    eng.add_symbol("X")
    assert eng.next_deadline() == 0
    eng.submit("X", "buy", price=100, qty=1, tif="gtd", expire_ts=5_000, ts=10, trader=1)
    assert eng.next_deadline() == 5_000
    eng.submit("X", "buy", price=100, qty=1, tif="gtd", expire_ts=3_000, ts=20, trader=1)
    assert eng.next_deadline() == 3_000
    eng.submit("X", "sell", price=200, qty=1, ts=6_000, trader=2)   # both GTDs expire before it
    assert eng.next_deadline() == 0 and len(eng.orders("X")) == 1


def test_a_day_order_is_due_at_its_session_close():
    eng = Engine()
    eng.add_symbol("X", session_close=16 * 3600 * 10**9)
    eng.submit("X", "buy", price=100, qty=1, tif="day", ts=DAY_NS + 3600 * 10**9, trader=1)
    assert eng.next_deadline() == DAY_NS + 16 * 3600 * 10**9


def test_a_reopening_auction_end_is_a_deadline():
    eng = Engine()
    eng.add_symbol("X")
    eng.set_phase("X", "reopening_auction", ts=100, end_ts=9_000)
    assert eng.next_deadline() == 9_000
