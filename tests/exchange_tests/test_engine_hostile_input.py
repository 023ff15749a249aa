"""The Engine's per-order API refuses arguments it cannot represent with a UsageError naming them.

submit/cancel/modify/add_symbol take Python values: an int outside its field's range (int64
price/qty/ts, uint64 order id, uint32 trader), a bool, a non-integral float or a non-finite tick
size is a UsageError naming the argument and the value, never OverflowError, silent truncation or
acceptance. Message content inside a batch (``process``) never raises: those values get REJECTED
events.
"""

import math

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Event, Reason

I64_MIN, I64_MAX, U64_MAX, U32_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1, (1 << 32) - 1


@pytest.fixture
def eng():
    e = Engine()
    e.add_symbol("X")
    return e


@pytest.mark.parametrize("arg,value", [
    ("qty", I64_MAX + 1), ("qty", I64_MIN - 1), ("price", I64_MAX + 1), ("price", I64_MIN - 1),
    ("order_id", U64_MAX + 1), ("order_id", -1), ("trader", U32_MAX + 1), ("trader", -1),
    ("ts", I64_MAX + 1), ("qty", 1.5), ("price", 100.25), ("qty", math.nan), ("qty", math.inf),
    ("qty", True), ("trader", False), ("order_id", "7"), ("qty", None), ("post_only", 2),
    ("post_only", "yes"),
])
def test_submit_refuses_an_unrepresentable_argument_naming_it(eng, arg, value):
    kw = dict(qty=5, price=100, order_id=1, trader=1, ts=0)
    kw[arg] = value
    with pytest.raises(UsageError, match=arg) as err:
        eng.submit("X", "buy", **kw)
    assert repr(value) in str(err.value)
    assert eng.seq == 0 and eng.live_orders == 0     # nothing was processed


@pytest.mark.parametrize("call", [
    lambda e: e.cancel("X", U64_MAX + 1), lambda e: e.cancel("X", -1),
    lambda e: e.cancel("X", 1, ts=I64_MIN - 1), lambda e: e.cancel("X", 1.5),
    lambda e: e.modify("X", 1, price=I64_MAX + 1, qty=5),
    lambda e: e.modify("X", 1, price=100, qty=2.5), lambda e: e.modify("X", 1, price=100, qty=True),
    lambda e: e.modify("X", -1, price=100, qty=5),
])
def test_cancel_and_modify_refuse_unrepresentable_arguments(eng, call):
    eng.submit("X", "buy", qty=5, price=100, order_id=1)
    with pytest.raises(UsageError):
        call(eng)
    assert eng.seq == 1 and eng.live_orders == 1


@pytest.mark.parametrize("what,kw", [
    ("side", dict(side=True)), ("side", dict(side=1.0)), ("side", dict(side="up")),
    ("tif", dict(tif="forever")), ("tif", dict(tif=7)), ("order_type", dict(order_type="trailing_stop")),
    ("order_type", dict(order_type=False)), ("symbol", dict(symbol=True)),
])
def test_submit_refuses_unknown_or_boolean_codes(eng, what, kw):
    args = dict(symbol="X", side="buy")
    args.update(kw)
    with pytest.raises(UsageError, match=what):
        eng.submit(args.pop("symbol"), args.pop("side"), qty=5, price=100, **args)


@pytest.mark.parametrize("tick", [math.nan, math.inf, -math.inf, 0, -1, "1", True, None, 1j])
def test_add_symbol_refuses_a_tick_size_that_is_not_finite_and_positive(tick):
    e = Engine()
    with pytest.raises(UsageError, match="tick_size"):
        e.add_symbol("X", tick_size=tick)
    assert e.symbols == {}


@pytest.mark.parametrize("kw", [dict(min_price=1.5), dict(max_price=True), dict(max_price=2.0**70),
                                dict(min_price="1"), dict(min_price=0)])
def test_add_symbol_refuses_a_price_band_that_is_not_integral(kw):
    e = Engine()
    with pytest.raises(UsageError, match="price"):
        e.add_symbol("X", **kw)
    assert e.symbols == {}


def test_numpy_integers_and_integral_floats_give_the_same_bytes_as_ints():
    a, b = Engine(), Engine()
    a.add_symbol("X", tick_size=1)
    b.add_symbol("X", tick_size=np.int64(1))
    for e, conv in ((a, int), (b, np.int64)):
        e.submit("X", "sell", qty=conv(5), price=conv(101), order_id=np.uint64(7),
                 trader=np.uint32(3), ts=np.int64(9))
    ra = a.submit("X", "buy", qty=3, price=101, order_id=8, trader=4)
    rb = b.submit("X", "buy", qty=3.0, price=np.int32(101), order_id=8.0, trader=np.uint8(4))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(ra, rb))
    assert a.checkpoint() == b.checkpoint()     # the tick size is stored as a plain int


def test_extreme_values_inside_a_batch_are_rejected_events_not_errors(eng):
    m = np.zeros(4, ORDER_DTYPE)
    m["order_id"] = [1, 2, 3, U64_MAX]
    m["qty"] = [I64_MIN, I64_MAX, 5, 5]
    m["price"] = [100, 100, I64_MIN, I64_MAX]
    m["side"] = [0, 0, 0, 255]
    res = eng.process(m)
    assert list(res.events["event"]) == [Event.REJECTED] * 4
    assert list(res.events["reason"]) == [Reason.BAD_QTY, Reason.OVERFLOW, Reason.BAD_PRICE,
                                          Reason.BAD_SIDE]
