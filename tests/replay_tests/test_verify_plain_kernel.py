"""verify's plain kernel (check_plain) finds exactly what check_symbol finds, and a plain flow
never calls check_symbol (so a first verify of a plain run never compiles it).

Each comparison runs the same rows twice: as verify does (check_plain, then check_symbol from
the first message it does not take) and with check_symbol alone; reports, counts and the final
kernel state must be equal, on clean rows and with defects planted in every table.
"""

import numpy as np
import pytest

import exsim.replay.verification.kernel as K
import exsim.replay.verification.plain as P
from exsim.exchange.schema import Event
from exsim.replay import verify_arrays
from exsim.replay.verification.book import O_DISPLAY, O_EXPIRE, O_LEVEL, O_SIDE
from exsim.replay.verification.run import _stored
from exsim.scenarios import venue_mix
from test_replay_common import SYMBOLS, make_engine, rich_flow

STP = "cancel_resting"


def _flow(n, seed, venue_from=None):
    """rich_flow (plain limit/market/cancel/modify, bad kinds, unknown symbols); from message
    ``venue_from`` on, a venue mix (stops, icebergs, GTD orders)."""
    orders = rich_flow(n, seed=seed)
    if venue_from is not None:
        orders[venue_from:] = venue_mix(orders[venue_from:], seed)
    res = make_engine(STP).process(orders)
    return _stored("orders", orders), res.fills, res.l2, res.events


@pytest.fixture(scope="module")
def plain_tables():
    return _flow(6000, 11)


@pytest.fixture(scope="module")
def mixed_tables():
    return _flow(6000, 12, venue_from=3000)


def _verify(tables):
    return verify_arrays(*tables, stp=STP, symbols=range(len(SYMBOLS)), ownership=True)


def _same_as_full_kernel(tables, monkeypatch):
    """Verify ``tables`` as verify does and with check_symbol alone; assert one report."""
    with monkeypatch.context() as m:
        m.setattr(P, "check_plain", K.check_symbol)
        alone = _verify(tables)
    both = _verify(tables)
    assert [(v.seq, v.rule, v.detail) for v in both.violations] == \
        [(v.seq, v.rule, v.detail) for v in alone.violations]
    untimed = [{k: v for k, v in r.summary.items() if "seconds" not in k} for r in (both, alone)]
    assert untimed[0] == untimed[1] and both.ok == alone.ok
    return both


def _planted(tables, table, j, field, delta):
    tabs = list(tables)
    t = {"fills": 1, "l2": 2, "events": 3}[table]
    bad = tabs[t].copy()
    bad[j][field] = bad[j][field] + delta
    tabs[t] = bad
    return tabs


def _dropped(tables, table, j):
    tabs = list(tables)
    t = {"fills": 1, "l2": 2, "events": 3}[table]
    tabs[t] = np.delete(tabs[t], j)
    return tabs


def test_plain_flow_never_calls_check_symbol(plain_tables, monkeypatch):
    def refuse(*args):
        raise AssertionError("check_symbol called on a plain flow")

    monkeypatch.setattr(K, "check_symbol", refuse)
    report = _verify(plain_tables)
    assert report.ok and report.summary["orders"] == 6000


def test_a_venue_message_hands_the_symbol_to_check_symbol(mixed_tables, monkeypatch):
    assert _same_as_full_kernel(mixed_tables, monkeypatch).ok
    calls = []
    full = K.check_symbol

    def counted(*args):
        calls.append(int(args[-4][K.M_I]))
        return full(*args)

    monkeypatch.setattr(K, "check_symbol", counted)
    assert _verify(mixed_tables).ok
    # each of the three symbols: check_plain took its plain first half, check_symbol the rest
    assert len(calls) == 3 and min(calls) > 0


@pytest.mark.parametrize("tables_name", ["plain_tables", "mixed_tables"])
def test_clean_rows_give_one_report(tables_name, request, monkeypatch):
    assert _same_as_full_kernel(request.getfixturevalue(tables_name), monkeypatch).ok


# defects in every table, at rows of the plain first half (and one in the venue half)
DEFECTS = [
    ("fills", "qty", 1), ("fills", "price", 1), ("fills", "buy_trader", 1),
    ("fills", "sell_order_id", 1), ("fills", "aggressor_side", 1), ("fills", "trade_id", -1),
    ("fills", "ts", 1), ("l2", "qty", 1), ("l2", "count", 1), ("l2", "side", 2),
    ("events", "leaves_qty", 1), ("events", "filled_qty", 1), ("events", "event", 1),
    ("events", "order_id", 1), ("events", "reason", 1),
]


@pytest.mark.parametrize("table,field,delta", DEFECTS)
@pytest.mark.parametrize("at", [0.1, 0.4, 0.8])
def test_planted_defects_give_one_report(table, field, delta, at, mixed_tables, monkeypatch):
    t = {"fills": 1, "l2": 2, "events": 3}[table]
    j = int(mixed_tables[t].size * at)
    report = _same_as_full_kernel(_planted(mixed_tables, table, j, field, delta), monkeypatch)
    # (a report's reason is checked only where it decides something: a cancel's, a reject's)
    assert not report.ok or field == "reason"


@pytest.mark.parametrize("table", ["fills", "l2", "events"])
def test_dropped_rows_give_one_report(table, mixed_tables, monkeypatch):
    t = {"fills": 1, "l2": 2, "events": 3}[table]
    j = mixed_tables[t].size // 5
    assert not _same_as_full_kernel(_dropped(mixed_tables, table, j), monkeypatch).ok


def test_swapped_fills_and_trailing_rows_give_one_report(plain_tables, monkeypatch):
    orders, fills, l2, events = plain_tables
    j = np.flatnonzero((fills["seq"][1:] == fills["seq"][:-1]))[0]
    bad = fills.copy()
    bad[[j, j + 1]] = bad[[j + 1, j]]
    assert not _same_as_full_kernel((orders, bad, l2, events), monkeypatch).ok
    # rows after the last message (check_plain leaves them to check_symbol)
    tail = fills[-1:].copy()
    tail["seq"] = orders["seq"][-1] + 5
    report = _same_as_full_kernel((orders, np.concatenate([fills, tail]), l2, events),
                                  monkeypatch)
    assert {v.rule for v in report.violations} >= {"stream"}


def _symbol_rows(tables, sid):
    return [t[t["symbol"] == sid] for t in tables]


def _kernel_run(kernel, rows, stp):
    """One symbol's rows through ``kernel`` (switching to check_symbol on NEED_FULL), from a
    small state that must grow; returns the final state and whether check_symbol ran."""
    state = K.new_state(16, 5000, level_capacity=4)
    ran_full = kernel is K.check_symbol
    while True:
        status = kernel(*rows, rows[0].size, True, stp, K.FINAL, *state)
        if status == K.OK:
            return state, ran_full
        if status == P.NEED_FULL:
            kernel, ran_full = K.check_symbol, True
        else:
            state = K.grow_state(state)


@pytest.mark.parametrize("tables_name", ["plain_tables", "mixed_tables"])
def test_final_state_equals_check_symbols(tables_name, request):
    tables = request.getfixturevalue(tables_name)
    bad = _planted(tables, "fills", tables[1].size // 3, "qty", 1)
    for rows in (_symbol_rows(tables, 0), _symbol_rows(bad, 1)):
        a, ran_full = _kernel_run(P.check_plain, rows, 1)
        b, _ = _kernel_run(K.check_symbol, rows, 1)
        assert ran_full == (tables_name == "mixed_tables")
        for x, y in zip(a, b):
            assert x.shape == y.shape and np.array_equal(x, y)


def test_plain_state_refuses_books_with_venue_orders(mixed_tables):
    rows = _symbol_rows(mixed_tables, 0)
    state, _ = _kernel_run(P.check_plain, rows, 1)
    ost = state[0]
    live = ost[:, O_LEVEL] >= 0
    venue = live & ((ost[:, O_DISPLAY] > 0) | (ost[:, O_EXPIRE] > 0) | (ost[:, O_SIDE] >= 2))
    assert venue.any() and not P.plain_state(state)
    assert P.plain_state(K.new_state(16, 10))


def test_accepted_bad_kind_and_side_give_one_report(plain_tables, monkeypatch):
    orders, fills, l2, events = plain_tables
    bad_kind = np.flatnonzero(orders["kind"] > 2)[0]
    bad = events.copy()
    j = np.flatnonzero(bad["seq"] == orders["seq"][bad_kind])[0]
    bad["event"][j] = Event.ACCEPTED     # where the engine rejected the unknown kind
    report = _same_as_full_kernel((orders, fills, l2, bad), monkeypatch)
    assert "reject" in {v.rule for v in report.violations if v.seq == orders["seq"][bad_kind]}
