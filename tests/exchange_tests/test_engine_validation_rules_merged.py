"""Reject rules that need the whole issue-15 engine: pending stops, a last trade price kept up to
date by trades, and checkpoints of the old row layout (docs/semantics.md, "Validation",
"Ownership", "Checkpoints of the new state").

The validation kernels alone are tested in test_engine_validation_rules.py; these need the stop
books, the last-price updates and the v1 row reader as well.
"""

import os
import struct

import pytest

from conftest import buy, cancel, flow, modify, msg, rows, sell
from exsim.exchange import Engine
from exsim.exchange.schema import Event, OrderType, Reason, Side

REJ = Event.REJECTED
STOP, STOP_LIMIT = OrderType.STOP, OrderType.STOP_LIMIT
RUN_V1 = os.path.join(os.path.dirname(__file__), "..", "golden", "run_v1", "checkpoints")


def engine(**options):
    e = Engine()
    e.add_symbol("X", **options)
    return e


def ev(result):
    return rows(result.events, "order_id", "event", "reason", "filled_qty", "leaves_qty")


def traded_at_100():
    e = engine(tick_table=[(1, 1), (10_000, 5)])
    e.process(flow(sell(1, 100, 5, trader=2), buy(2, 100, 2, trader=3)))
    return e


@pytest.mark.parametrize("side, stop_price, reason", [
    (Side.BUY, 100, Reason.STOP_PRICE_REACHED), (Side.BUY, 99, Reason.STOP_PRICE_REACHED),
    (Side.BUY, 101, Reason.NONE), (Side.SELL, 100, Reason.STOP_PRICE_REACHED),
    (Side.SELL, 101, Reason.STOP_PRICE_REACHED), (Side.SELL, 99, Reason.NONE)])
def test_stop_price_reached_after_a_trade(side, stop_price, reason):
    e = traded_at_100()
    assert e.state.symbols["last_price"][0] == 100
    res = e.process(msg(order_id=9, side=side, order_type=STOP, stop_price=stop_price, qty=1))
    if reason == Reason.NONE:
        assert ev(res) == [(9, Event.ACCEPTED, 0, 0, 1)]
    else:
        assert ev(res) == [(9, REJ, reason, 0, 0)]


def pending_stop(order_type=STOP_LIMIT):
    e = traded_at_100()
    e.process(msg(order_id=9, side=Side.BUY, order_type=order_type, price=120, stop_price=110,
                  qty=4, trader=5))
    return e


def test_a_pending_stop_takes_its_id():
    e = pending_stop()
    assert ev(e.process(buy(9, 90, 1, trader=5))) == [(9, REJ, Reason.DUPLICATE_ID, 0, 0)]


def test_cancel_and_modify_of_a_pending_stop_by_another_trader_are_not_owner():
    e = pending_stop()
    assert ev(e.process(cancel(9, trader=6))) == [(9, REJ, Reason.NOT_OWNER, 0, 0)]
    assert ev(e.process(modify(9, 120, 4, stop_price=111, trader=6))) == \
        [(9, REJ, Reason.NOT_OWNER, 0, 0)]
    assert ev(e.process(cancel(9, trader=5)))[0][1] == Event.CANCELLED


@pytest.mark.parametrize("price, stop_price, reason", [
    (120, 0, Reason.BAD_STOP_PRICE), (120, 10_003, Reason.BAD_STOP_PRICE),
    (120, 100, Reason.STOP_PRICE_REACHED), (120, 99, Reason.STOP_PRICE_REACHED),
    (10_002, 111, Reason.OFF_TICK), (0, 111, Reason.BAD_PRICE)])
def test_modify_of_a_pending_stop_limit(price, stop_price, reason):
    e = pending_stop()
    res = e.process(modify(9, price, 4, stop_price=stop_price, trader=5))
    assert ev(res) == [(9, REJ, reason, 0, 0)]


def test_modify_of_a_pending_stop_ignores_its_price():
    e = pending_stop(STOP)
    assert ev(e.process(modify(9, 0, 4, stop_price=112, trader=5)))[0][1] == Event.MODIFIED


def test_the_last_trade_price_survives_a_checkpoint():
    e = traded_at_100()
    back = Engine.restore(e.checkpoint())
    assert back.state.symbols["last_price"][0] == 100 and back.checkpoint() == e.checkpoint()
    assert ev(back.process(msg(order_id=9, order_type=STOP, stop_price=100)))[0][2] == \
        Reason.STOP_PRICE_REACHED


def _run_v1_blobs():
    """The engine checkpoints inside the store files of tests/golden/run_v1 (a 28-byte store
    frame, then the engine's own bytes)."""
    for name in sorted(os.listdir(RUN_V1)):
        data = open(os.path.join(RUN_V1, name), "rb").read()
        at = data.find(b"EXSIMCKP")
        yield name, data[at:]


def test_old_v1_checkpoints_restore_with_ownership_off_and_reencode_to_the_same_bytes():
    for name, blob in _run_v1_blobs():
        assert struct.unpack_from("<I", blob, 8)[0] == 1, name
        e = Engine.restore(blob)
        assert e.ownership is False, name
        assert e.config()["symbols"][0]["tick_table"] == [[1, 1]]
        assert e.checkpoint() == blob, name
