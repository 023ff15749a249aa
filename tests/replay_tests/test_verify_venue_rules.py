"""verify's checks of the orders a venue takes: ownership, stops, icebergs, expiry, tick/lot.

Each scenario is a small run written by hand, row by row, exactly as docs/semantics.md says the
engine reports it (orders, fills, L2 rows, execution reports); it first verifies clean, then one
defect is planted by editing rows of the correct run (as test_replay_verify.py does with engine
output) and verify must report it under its own rule and no other. These tests do not need the
engine to implement the new order types; test_verify_venue_rules_engine.py runs the engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import (
    EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Event, Kind, OrderType, Reason, Tif,
)
from exsim.replay import verify_arrays

DAY_NS = 86_400 * 10**9
BUY, SELL = 0, 1
LIMIT, MARKET, STOP, STOP_LIMIT = (int(OrderType.LIMIT), int(OrderType.MARKET),
                                   int(OrderType.STOP), int(OrderType.STOP_LIMIT))


class Run:
    """Rows of a hand-written run: ``msg`` adds a message (seq = its position, from 1); the
    output rows added after it carry its seq and ts (``at`` to write them for another seq)."""

    def __init__(self):
        self.orders, self.fills, self.l2, self.events = [], [], [], []
        self.seq, self.ts, self.trade = 0, 0, 0

    def msg(self, ts, kind, oid, *, trader=1, side=BUY, price=0, qty=0, otype=LIMIT,
            tif=Tif.GTC, stop=0, display=0, expire=0, symbol=0):
        self.seq += 1
        self.ts = ts
        self.orders.append((ts, oid, price, qty, symbol, trader, int(kind), otype, int(tif), 0,
                            side, stop, display, 0, expire, 0))
        return self

    def ev(self, oid, event, filled=0, leaves=0, reason=0, symbol=0):
        self.events.append((self.seq, self.ts, oid, filled, leaves, symbol, int(event),
                            int(reason), 0, 0))
        return self

    def fill(self, price, qty, buy, sell, buy_trader, sell_trader, aggressor, symbol=0):
        self.trade += 1
        self.fills.append((self.seq, self.ts, self.trade, price, qty, buy, sell, symbol,
                           buy_trader, sell_trader, aggressor))
        return self

    def book(self, side, price, qty, count, symbol=0):
        self.l2.append((self.seq, self.ts, price, qty, symbol, count, side))
        return self

    def arrays(self):
        return (np.array(self.orders, ORDER_DTYPE), np.array(self.fills, FILL_DTYPE),
                np.array(self.l2, L2_DTYPE), np.array(self.events, EVENT_DTYPE))


def _verify(tabs, config=None, **kw):
    return verify_arrays(*tabs, stp="none", symbols=kw.pop("symbols", [0]), config=config, **kw)


def _only(report, rule):
    """The run did not verify, and every violation is of ``rule``."""
    assert not report.ok
    got = {name for name, n in report.summary["violations"].items() if n}
    assert got == {rule}, (got, report.violations[:5])
    return report.violations


def _row(table, **match):
    """Index of the one row of ``table`` whose fields equal ``match``."""
    hit = np.ones(table.size, bool)
    for k, v in match.items():
        hit &= table[k] == v
    (j,) = np.flatnonzero(hit)
    return int(j)


# ------------------------------------------------------------------ ownership
def _ownership_run():
    r = Run()
    r.msg(1, Kind.NEW, 1, trader=7, side=BUY, price=100, qty=10).ev(1, Event.ACCEPTED, 0, 10)
    r.book(BUY, 100, 10, 1)
    r.msg(2, Kind.MODIFY, 1, trader=7, price=100, qty=6).ev(1, Event.MODIFIED, 0, 6)
    r.book(BUY, 100, 6, 1)
    r.msg(3, Kind.CANCEL, 1, trader=8).ev(1, Event.REJECTED, reason=Reason.NOT_OWNER)
    r.msg(4, Kind.CANCEL, 1, trader=7).ev(1, Event.CANCELLED, 0, 0, Reason.USER_CANCEL)
    r.book(BUY, 100, 0, 0)
    return r.arrays()


OWNERSHIP_ON = {"stp": "none", "ownership": True, "symbols": [{"name": "A", "id": 0}]}


def test_a_correct_run_with_ownership_verifies_clean():
    report = _verify(_ownership_run(), OWNERSHIP_ON)
    assert report.ok, report.violations
    assert "ownership" in report.summary["rules_checked"]


@pytest.mark.parametrize("seq", [2, 4])
def test_a_cancel_or_modify_by_another_trader_breaks_ownership(seq):
    orders, fills, l2, events = _ownership_run()
    orders = orders.copy()
    orders[seq - 1]["trader"] = 9
    violations = _only(_verify((orders, fills, l2, events), OWNERSHIP_ON), "ownership")
    assert [v.seq for v in violations] == [seq]
    assert "trader 9" in violations[0].detail


def test_ownership_off_lets_another_trader_cancel_but_not_be_refused():
    """Absent from the config (older runs), ownership is off: a cancel by another trader is
    fine, and a NOT_OWNER reject is then itself a violation."""
    orders, fills, l2, events = _ownership_run()
    orders = orders.copy()
    orders[3]["trader"] = 9
    off = {"stp": "none", "symbols": [{"name": "A", "id": 0}]}
    violations = _only(_verify((orders, fills, l2, events), off), "ownership")
    assert [v.seq for v in violations] == [3]          # only the NOT_OWNER reject
    assert _verify((orders, fills, l2, events), OWNERSHIP_ON, ownership=False).summary[
        "violations"]["ownership"] == 1


# ------------------------------------------------------------------ stops
def _stops_run():
    """Two BUY stops at 100 (a STOP, then a STOP_LIMIT at 101); a trade at 100 releases both in
    acceptance order, the first's trades (at 100 and 101) keep the last price at or above 100."""
    r = Run()
    r.msg(1, Kind.NEW, 1, trader=1, side=SELL, price=100, qty=5).ev(1, Event.ACCEPTED, 0, 5)
    r.book(SELL, 100, 5, 1)
    r.msg(2, Kind.NEW, 2, trader=1, side=SELL, price=101, qty=5).ev(2, Event.ACCEPTED, 0, 5)
    r.book(SELL, 101, 5, 1)
    r.msg(3, Kind.NEW, 3, trader=2, side=BUY, qty=5, otype=STOP, stop=100)
    r.ev(3, Event.ACCEPTED, 0, 5)
    r.msg(4, Kind.NEW, 4, trader=3, side=BUY, price=101, qty=3, otype=STOP_LIMIT, stop=100)
    r.ev(4, Event.ACCEPTED, 0, 3)
    r.msg(5, Kind.NEW, 5, trader=4, side=BUY, price=100, qty=2).ev(5, Event.ACCEPTED, 0, 2)
    r.fill(100, 2, 5, 1, 4, 1, BUY).ev(5, Event.FILLED, 2, 0).ev(1, Event.PARTIAL, 2, 3)
    r.book(SELL, 100, 3, 1)
    r.ev(3, Event.TRIGGERED, 0, 5)
    r.fill(100, 3, 3, 1, 2, 1, BUY).ev(3, Event.PARTIAL, 3, 2).ev(1, Event.FILLED, 5, 0)
    r.book(SELL, 100, 0, 0)
    r.fill(101, 2, 3, 2, 2, 1, BUY).ev(3, Event.FILLED, 5, 0).ev(2, Event.PARTIAL, 2, 3)
    r.book(SELL, 101, 3, 1)
    r.ev(4, Event.TRIGGERED, 0, 3)
    r.fill(101, 3, 4, 2, 3, 1, BUY).ev(4, Event.FILLED, 3, 0).ev(2, Event.FILLED, 5, 0)
    r.book(SELL, 101, 0, 0)
    # a SELL stop below the last price waits; a cancel of it writes no L2 row
    r.msg(6, Kind.NEW, 6, trader=5, side=SELL, qty=1, otype=STOP, stop=90)
    r.ev(6, Event.ACCEPTED, 0, 1)
    r.msg(7, Kind.MODIFY, 6, trader=5, qty=1, stop=95).ev(6, Event.MODIFIED, 0, 1)
    r.msg(8, Kind.CANCEL, 6, trader=5).ev(6, Event.CANCELLED, 0, 0, Reason.USER_CANCEL)
    return r.arrays()


def test_a_correct_run_with_stops_and_a_cascade_verifies_clean():
    report = _verify(_stops_run())
    assert report.ok, report.violations
    assert report.summary["fills"] == 4


def test_stops_released_out_of_acceptance_order_break_stops():
    """The two stops' acceptances swapped: the stop accepted second is released first."""
    orders, fills, l2, events = (t.copy() for t in _stops_run())
    keep = orders[["ts"]].copy()
    orders[[2, 3]] = orders[[3, 2]]
    orders["ts"][[2, 3]] = keep["ts"][[2, 3]]
    a, b = _row(events, seq=3), _row(events, seq=4)
    events[[a, b]] = events[[b, a]]
    events["seq"][[a, b]], events["ts"][[a, b]] = [3, 4], [3, 4]
    violations = _only(_verify((orders, fills, l2, events)), "stops")
    assert [v.seq for v in violations] == [5] and "out of order" in violations[0].detail


def test_a_stop_triggered_before_a_trade_reached_its_price_breaks_stops():
    orders, fills, l2, events = (t.copy() for t in _stops_run())
    orders[2]["stop_price"] = 102
    violations = _only(_verify((orders, fills, l2, events)), "stops")
    assert [v.seq for v in violations] == [5] and "last trade price is 100" in violations[0].detail


def test_a_stop_filled_without_its_triggered_report_breaks_stops():
    orders, fills, l2, events = _stops_run()
    events = np.delete(events, _row(events, order_id=3, event=Event.TRIGGERED))
    violations = _only(_verify((orders, fills, l2, events)), "stops")
    assert "before its TRIGGERED" in violations[0].detail


def test_a_stop_left_pending_after_its_price_traded_breaks_stops():
    """The STOP_LIMIT's release (its report, its fill, its L2 row) never happened."""
    orders, fills, l2, events = _stops_run()
    drop = [j for j in range(events.size) if events[j]["seq"] == 5 and
            (events[j]["order_id"] == 4 or (events[j]["order_id"] == 2 and
                                            events[j]["event"] == Event.FILLED))]
    events = np.delete(events, drop)
    fills = fills[:-1]
    l2 = np.delete(l2, _row(l2, seq=5, price=101, qty=0))
    violations = _only(_verify((orders, fills, l2, events)), "stops")
    assert [v.seq for v in violations] == [5] and "still pending" in violations[0].detail


def test_a_stop_accepted_with_its_price_already_reached_breaks_stops():
    orders, fills, l2, events = _stops_run()
    orders = orders.copy()
    orders[5]["stop_price"] = 101      # a SELL stop at or above the last trade (101)
    orders[6]["stop_price"] = 89       # (its modify keeps it pending below)
    violations = _only(_verify((orders, fills, l2, events)), "stops")
    assert [v.seq for v in violations] == [6]


# ------------------------------------------------------------------ icebergs
def _iceberg_run(ahead: bool = False):
    """A SELL iceberg of 10 showing 4, then a plain SELL of 3 at its price; a BUY of 6 takes the
    shown 4, the refilled slice goes behind the plain order, which gives the other 2.
    ``ahead``: the defective engine keeps the slice in front and fills it instead."""
    r = Run()
    r.msg(1, Kind.NEW, 1, trader=1, side=SELL, price=100, qty=10, display=4)
    r.ev(1, Event.ACCEPTED, 0, 10).book(SELL, 100, 4, 1)
    r.msg(2, Kind.NEW, 2, trader=2, side=SELL, price=100, qty=3).ev(2, Event.ACCEPTED, 0, 3)
    r.book(SELL, 100, 7, 2)
    r.msg(3, Kind.NEW, 3, trader=3, side=BUY, price=100, qty=6).ev(3, Event.ACCEPTED, 0, 6)
    r.fill(100, 4, 3, 1, 3, 1, BUY).ev(3, Event.PARTIAL, 4, 2).ev(1, Event.PARTIAL, 4, 6)
    if ahead:
        r.fill(100, 2, 3, 1, 3, 1, BUY).ev(3, Event.FILLED, 6, 0).ev(1, Event.PARTIAL, 6, 4)
    else:
        r.fill(100, 2, 3, 2, 3, 2, BUY).ev(3, Event.FILLED, 6, 0).ev(2, Event.PARTIAL, 2, 1)
    r.book(SELL, 100, 5, 2)
    if ahead:
        return r.arrays()
    # same-price modify down: the reserve shrinks first, the shown part stays (no L2 row)
    r.msg(4, Kind.MODIFY, 1, trader=1, price=100, qty=5).ev(1, Event.MODIFIED, 4, 5)
    r.msg(5, Kind.CANCEL, 1, trader=1).ev(1, Event.CANCELLED, 4, 0, Reason.USER_CANCEL)
    r.book(SELL, 100, 1, 1)
    return r.arrays()


def test_a_correct_iceberg_run_verifies_clean():
    report = _verify(_iceberg_run())
    assert report.ok, report.violations


def test_an_l2_row_showing_the_reserve_breaks_icebergs():
    orders, fills, l2, events = _iceberg_run()
    l2 = l2.copy()
    l2[0]["qty"] = 10
    violations = _only(_verify((orders, fills, l2, events)), "icebergs")
    assert [v.seq for v in violations] == [1]


def test_a_refilled_slice_filled_ahead_of_the_orders_before_it_breaks_icebergs():
    """CME Globex: the new slice joins the back of the queue, behind the plain order of 3."""
    violations = _only(_verify(_iceberg_run(ahead=True)), "icebergs")
    assert [v.seq for v in violations] == [3] and "refilled slice" in violations[0].detail


def test_a_fill_larger_than_the_shown_slice_breaks_icebergs():
    r = Run()
    r.msg(1, Kind.NEW, 1, trader=1, side=SELL, price=100, qty=10, display=4)
    r.ev(1, Event.ACCEPTED, 0, 10).book(SELL, 100, 4, 1)
    r.msg(2, Kind.NEW, 2, trader=2, side=SELL, price=100, qty=3).ev(2, Event.ACCEPTED, 0, 3)
    r.book(SELL, 100, 7, 2)
    r.msg(3, Kind.NEW, 3, trader=3, side=BUY, price=100, qty=6).ev(3, Event.ACCEPTED, 0, 6)
    r.fill(100, 6, 3, 1, 3, 1, BUY).ev(3, Event.FILLED, 6, 0).ev(1, Event.PARTIAL, 6, 4)
    r.book(SELL, 100, 7, 2)        # the plain 3, then a new slice of 4 (reserve 0)
    violations = _only(_verify(r.arrays()), "icebergs")
    assert [v.seq for v in violations] == [3] and "shows only 4" in violations[0].detail


# ------------------------------------------------------------------ expiry
def _expiry_run(two_symbols: bool = False):
    """GTD asks expiring at 40 and 50 (worse than the DAY ask at 101), a BUY at ts 60 that sees
    them gone, then the DAY ask expiring at the next midnight UTC. ``two_symbols``: the GTD
    orders expire before a message of symbol 1 instead (their rows carry that message's seq)."""
    r = Run()
    r.msg(10, Kind.NEW, 1, side=SELL, price=102, qty=5, tif=Tif.GTD, expire=50)
    r.ev(1, Event.ACCEPTED, 0, 5).book(SELL, 102, 5, 1)
    r.msg(20, Kind.NEW, 2, side=SELL, price=101, qty=5, tif=Tif.DAY)
    r.ev(2, Event.ACCEPTED, 0, 5).book(SELL, 101, 5, 1)
    r.msg(30, Kind.NEW, 5, side=SELL, price=103, qty=1, tif=Tif.GTD, expire=40)
    r.ev(5, Event.ACCEPTED, 0, 1).book(SELL, 103, 1, 1)
    if two_symbols:
        r.msg(55, Kind.NEW, 1, side=BUY, price=10, qty=1, symbol=1)
    else:
        r.msg(60, Kind.NEW, 3, trader=2, side=BUY, price=101, qty=3)
    r.ev(5, Event.CANCELLED, 0, 0, Reason.EXPIRED).book(SELL, 103, 0, 0)
    r.ev(1, Event.CANCELLED, 0, 0, Reason.EXPIRED).book(SELL, 102, 0, 0)
    if two_symbols:
        r.ev(1, Event.ACCEPTED, 0, 1, symbol=1).book(BUY, 10, 1, 1, symbol=1)
        r.msg(60, Kind.NEW, 3, trader=2, side=BUY, price=101, qty=3)
    r.ev(3, Event.ACCEPTED, 0, 3)
    r.fill(101, 3, 3, 2, 2, 1, BUY).ev(3, Event.FILLED, 3, 0).ev(2, Event.PARTIAL, 3, 2)
    r.book(SELL, 101, 2, 1)
    r.msg(DAY_NS + 5, Kind.NEW, 4, side=BUY, price=90, qty=1)
    r.ev(2, Event.CANCELLED, 3, 0, Reason.EXPIRED).book(SELL, 101, 0, 0)
    r.ev(4, Event.ACCEPTED, 0, 1).book(BUY, 90, 1, 1)
    return r.arrays()


def test_a_correct_run_with_gtd_and_day_expiries_verifies_clean():
    report = _verify(_expiry_run())
    assert report.ok, report.violations


def test_expiries_before_another_symbols_message_verify_clean():
    report = _verify(_expiry_run(two_symbols=True), symbols=[0, 1])
    assert report.ok, report.violations
    assert report.summary["symbols"] == 2


def test_a_day_order_expires_at_the_configured_session_close():
    """With the session close at 55 ns after midnight the DAY ask entered at ts 20 expires at
    55: the run written for a midnight close trades it at ts 60 and expires it late."""
    config = {"stp": "none", "symbols": [{"name": "A", "id": 0, "session_close": 55}]}
    violations = _only(_verify(_expiry_run(), config), "expiry")
    assert any("filled at ts 60, at or after its expiry 55" in v.detail for v in violations)
    assert any("expired late" in v.detail for v in violations)


def test_a_fill_at_or_after_the_expiry_breaks_expiry():
    """The DAY ask made GTD expiring at 60: the BUY at ts 60 must not trade with it."""
    orders, fills, l2, events = _expiry_run()
    orders = orders.copy()
    orders[1]["tif"], orders[1]["expire_ts"] = Tif.GTD, 60
    violations = _only(_verify((orders, fills, l2, events)), "expiry")
    assert any("filled at ts 60" in v.detail for v in violations)


def test_an_order_expired_before_its_expiry_breaks_expiry():
    orders, fills, l2, events = _expiry_run()
    orders = orders.copy()
    orders[0]["expire_ts"] = 70
    violations = _only(_verify((orders, fills, l2, events)), "expiry")
    assert [v.seq for v in violations] == [4] and "before its expiry 70" in violations[0].detail


def test_an_order_left_live_after_its_expiry_breaks_expiry():
    orders, fills, l2, events = _expiry_run()
    events = np.delete(events, _row(events, order_id=1, reason=Reason.EXPIRED))
    l2 = np.delete(l2, _row(l2, seq=4, price=102))
    violations = _only(_verify((orders, fills, l2, events)), "expiry")
    assert "still live" in violations[0].detail


def test_expiries_out_of_expiry_order_break_expiry():
    orders, fills, l2, events = (t.copy() for t in _expiry_run())
    a, b = _row(events, order_id=5, event=Event.CANCELLED), _row(events, order_id=1,
                                                                   event=Event.CANCELLED)
    events[[a, b]] = events[[b, a]]
    c, d = _row(l2, seq=4, price=103), _row(l2, seq=4, price=102)
    l2[[c, d]] = l2[[d, c]]
    violations = _only(_verify((orders, fills, l2, events)), "expiry")
    assert [v.seq for v in violations] == [4] and "out of order" in violations[0].detail


# ------------------------------------------------------------------ tick table and lot
TICKS = {"stp": "none", "symbols": [{"name": "A", "id": 0, "tick_table": [[1, 1], [100, 5]],
                                     "lot_size": 2, "min_order_qty": 2}]}


def _tick_run(price=105, qty=4):
    r = Run()
    r.msg(1, Kind.NEW, 1, side=SELL, price=price, qty=qty).ev(1, Event.ACCEPTED, 0, qty)
    r.book(SELL, price, qty, 1)
    r.msg(2, Kind.NEW, 2, side=BUY, price=99, qty=2).ev(2, Event.ACCEPTED, 0, 2)
    r.book(BUY, 99, 2, 1)
    return r.arrays()


def test_a_run_on_the_tick_table_and_lot_verifies_clean():
    assert _verify(_tick_run(), TICKS).ok
    # without the symbol's table and lot (defaults) the planted defects are not defects
    assert _verify(_tick_run(price=103, qty=3)).ok


@pytest.mark.parametrize("price,qty", [(103, 4), (105, 3)])
def test_an_accepted_order_off_tick_or_off_lot_breaks_tick_lot(price, qty):
    violations = _only(_verify(_tick_run(price, qty), TICKS), "tick_lot")
    assert [v.seq for v in violations] == [1]


@pytest.mark.parametrize("bad", [
    {"tick_table": [[2, 1]]}, {"tick_table": [[1, 1], [1, 5]]}, {"tick_table": [[1, 0]]},
    {"tick_table": "x"}, {"lot_size": 0}, {"lot_size": True}, {"session_close": DAY_NS},
])
def test_a_malformed_symbol_config_is_a_usage_error(bad):
    config = {"symbols": [dict({"name": "A", "id": 0}, **bad)]}
    with pytest.raises(UsageError, match="symbol A"):
        _verify(_tick_run(), config)


# ------------------------------------------------------------------ checked in seq ranges
def _in_ranges(tabs, size, symbols, config=None):
    """What verify does with a stored run: each symbol's rows in seq ranges of ``size``, the
    checker's state carried from range to range."""
    import exsim.replay.verification.kernel as K
    from exsim.replay.verification.options import _options_by_symbol
    from exsim.replay.verification.run import _Run, _stored
    from exsim.replay.verification.symbol import _Symbol

    tabs = [_stored(n, t) for n, t in zip(("orders", "fills", "l2", "events"), tabs)]
    options = _options_by_symbol(config, UsageError, "test")
    run = _Run(0, 1000, None)
    last = int(tabs[0]["seq"].max())
    for sid in symbols:
        sym = _Symbol(run, options.get(sid, options.get(None)))
        for lo in range(1, last + 1, size):
            part = [t[(t["symbol"] == sid) & (t["seq"] >= lo) & (t["seq"] < lo + size)]
                    for t in tabs]
            sym.feed(*part, True, K.FINAL if lo + size > last else K.FLUSH)
        sym.end()
    return run.report(0.0)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_expiries_at_other_symbols_seqs_check_the_same_in_seq_ranges(size):
    """An expiry before another symbol's message may fall in a range where its own symbol has
    no message at all: the report is still that of the whole run."""
    tabs = _expiry_run(two_symbols=True)
    assert _in_ranges(tabs, size, [0, 1]).ok
    orders, fills, l2, events = (t.copy() for t in tabs)
    orders[0]["expire_ts"] = 70          # expired at ts 55, before its expiry
    whole = _verify((orders, fills, l2, events), symbols=[0, 1])
    parts = _in_ranges((orders, fills, l2, events), size, [0, 1])
    assert parts.violations == whole.violations and not whole.ok
    assert parts.summary["violations"] == whole.summary["violations"]


@pytest.mark.parametrize("config", [
    {"ownership": "yes", "symbols": []}, {"symbols": [{"name": "A", "id": "0"}]}, ["A"],
])
def test_a_malformed_engine_config_is_a_usage_error(config):
    with pytest.raises(UsageError, match="config"):
        _verify(_tick_run(), config)
