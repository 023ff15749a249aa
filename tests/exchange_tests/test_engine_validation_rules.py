"""The reject rules of docs/semantics.md ("Validation", "Ownership", "Symbols"): one named test
per reason and per step order, the symbol options of ``add_symbol`` and their errors,
``config``/``from_config`` and the checkpoint header that carries them.

Every reject here must leave the engine unchanged: one REJECTED event, no fill, no L2 row, the
same live orders. These tests need only the validation kernels (exchange/validation.py); the
ones that need stops to rest, trades to move the last price or the new checkpoint rows are in
test_engine_validation_rules_merged.py.
"""

import json
import re
import struct

import crc32c
import numpy as np
import pytest

from conftest import buy, cancel, flow, modify, msg, rows, sell
from exsim.exchange import Engine
from exsim.exchange.errors import CorruptionError, UsageError
from exsim.exchange.schema import (
    MAX_PRICE, MAX_QTY, Event, Flag, OrderType, Reason, Side, Tif,
)

REJ = Event.REJECTED
STOP, STOP_LIMIT, MARKET = OrderType.STOP, OrderType.STOP_LIMIT, OrderType.MARKET
DAY_NS = 86_400 * 10 ** 9


def engine(ownership=True, stp="none", **options):
    """An engine with one symbol "X" (id 0) added with ``options``."""
    e = Engine(stp=stp, ownership=ownership)
    e.add_symbol("X", **options)
    return e


def ev(result):
    """Events as (order_id, event, reason, filled_qty, leaves_qty)."""
    return rows(result.events, "order_id", "event", "reason", "filled_qty", "leaves_qty")


def assert_rejected(e, message, reason):
    """``message`` is refused with ``reason`` and changes nothing."""
    before = e.orders("X").tobytes(), e.depth("X", 100), e.state.symbols.tobytes()
    res = e.process(message)
    assert ev(res) == [(int(message["order_id"][0]), REJ, reason, 0, 0)]
    assert len(res.fills) == 0 and len(res.l2) == 0
    after = e.orders("X").tobytes(), e.depth("X", 100), e.state.symbols.tobytes()
    assert after[0] == before[0] and after[2] == before[2]
    assert all(np.array_equal(a, b) for a, b in zip(after[1], before[1]))


def accepted(e, message):
    """``message`` passes validation (its first event is not REJECTED)."""
    res = e.process(message)
    return int(res.events["event"][0]) != REJ


# ---- ownership ---------------------------------------------------------------------------------

def test_cancel_by_another_trader_is_rejected_not_owner_and_the_order_stays():
    e = engine()
    e.process(buy(1, 100, 5, trader=7))
    assert_rejected(e, cancel(1, trader=8), Reason.NOT_OWNER)
    assert [int(o["order_id"]) for o in e.orders("X")] == [1]
    assert ev(e.process(cancel(1, trader=7)))[0][1] == Event.CANCELLED


def test_modify_by_another_trader_is_rejected_not_owner_before_any_other_check():
    e = engine()
    e.process(buy(1, 100, 5, trader=7))
    # qty 0 would be BAD_QTY: ownership (step 4) comes first
    assert_rejected(e, modify(1, 100, 0, trader=8), Reason.NOT_OWNER)
    assert_rejected(e, modify(1, 101, 6, trader=8), Reason.NOT_OWNER)
    assert ev(e.process(modify(1, 101, 6, trader=7)))[0][1] == Event.MODIFIED


def test_unknown_id_comes_before_not_owner():
    e = engine()
    e.process(buy(1, 100, 5, trader=7))
    assert_rejected(e, cancel(2, trader=8), Reason.UNKNOWN_ID)
    assert_rejected(e, modify(2, 100, 5, trader=8), Reason.UNKNOWN_ID)


def test_ownership_false_lets_any_trader_cancel_and_modify():
    e = engine(ownership=False)
    assert e.ownership is False
    e.process(flow(buy(1, 100, 5, trader=7), buy(2, 99, 5, trader=7)))
    assert ev(e.process(modify(1, 101, 6, trader=8)))[0][1] == Event.MODIFIED
    assert ev(e.process(cancel(2, trader=9)))[0][1] == Event.CANCELLED


def test_a_new_engine_checks_ownership_by_default():
    assert Engine().ownership is True


def test_ownership_must_be_a_bool():
    with pytest.raises(UsageError, match="ownership"):
        Engine(ownership=1)


# ---- tick tables -------------------------------------------------------------------------------

TABLE = [(1, 1), (10_000, 5)]


@pytest.mark.parametrize("price, ok", [
    (1, True), (9_999, True),            # below 10,000 every integer price
    (10_000, True), (10_001, False), (10_004, False), (10_005, True), (12_345, True),
    (12_346, False)])
def test_off_tick_with_a_two_row_tick_table(price, ok):
    e = engine(tick_table=TABLE)
    if ok:
        assert accepted(e, buy(1, price, 1))
    else:
        assert_rejected(e, buy(1, price, 1), Reason.OFF_TICK)


def test_off_tick_applies_to_modify_and_to_stop_limit_prices():
    e = engine(tick_table=TABLE)
    e.process(buy(1, 9_000, 1))
    assert_rejected(e, modify(1, 10_002, 1), Reason.OFF_TICK)
    assert_rejected(e, buy(2, 10_002, 1, order_type=STOP_LIMIT, stop_price=9_000),
                    Reason.OFF_TICK)
    assert ev(e.process(modify(1, 10_010, 1)))[0][1] == Event.MODIFIED


def test_a_tick_table_of_one_coarse_row():
    e = engine(tick_table=[(1, 25)])
    assert_rejected(e, buy(1, 110, 1), Reason.OFF_TICK)
    assert accepted(e, buy(1, 125, 1))


def test_off_tick_comes_after_the_price_band():
    e = engine(tick_table=TABLE, max_price=20_000)
    assert_rejected(e, buy(1, 20_001, 1), Reason.PRICE_OUT_OF_BAND)
    assert_rejected(e, buy(1, 0, 1), Reason.BAD_PRICE)


def test_a_market_order_ignores_its_price_for_the_tick_check():
    e = engine(tick_table=TABLE)
    e.process(sell(1, 10_005, 3))
    res = e.process(buy(2, 10_003, 3, order_type=MARKET, tif=Tif.IOC))
    assert len(res.fills) == 1


# ---- lots and minimum quantity ------------------------------------------------------------------

def test_off_lot_new_and_modify():
    e = engine(lot_size=100)
    assert_rejected(e, buy(1, 50, 150), Reason.OFF_LOT)
    assert accepted(e, buy(1, 50, 300))
    assert_rejected(e, modify(1, 50, 250), Reason.OFF_LOT)
    assert ev(e.process(modify(1, 50, 200)))[0][1] == Event.MODIFIED


def test_below_min_qty_new_and_modify():
    e = engine(min_order_qty=10)
    assert_rejected(e, buy(1, 50, 9), Reason.BELOW_MIN_QTY)
    assert accepted(e, buy(1, 50, 10))
    assert_rejected(e, modify(1, 50, 9), Reason.BELOW_MIN_QTY)


def test_off_lot_comes_before_below_min_qty_and_after_overflow():
    e = engine(lot_size=10, min_order_qty=30)
    assert_rejected(e, buy(1, 50, 15), Reason.OFF_LOT)
    assert_rejected(e, buy(1, 50, 20), Reason.BELOW_MIN_QTY)
    assert_rejected(e, buy(1, 50, MAX_QTY + 1), Reason.OVERFLOW)
    assert_rejected(e, buy(1, 50, 0), Reason.BAD_QTY)


def test_below_min_qty_comes_before_the_price_checks():
    e = engine(min_order_qty=5, tick_table=[(1, 10)])
    assert_rejected(e, buy(1, 3, 1), Reason.BELOW_MIN_QTY)


# ---- stop prices, display and minimum quantities, expiry ----------------------------------------

@pytest.mark.parametrize("stop_price", [0, -5, 20_001, 10_003])
def test_bad_stop_price(stop_price):
    e = engine(tick_table=TABLE, max_price=20_000)
    for ot in (STOP, STOP_LIMIT):
        assert_rejected(e, buy(1, 9_000, 1, order_type=ot, stop_price=stop_price),
                        Reason.BAD_STOP_PRICE)


def test_a_limit_order_ignores_its_stop_price():
    e = engine()
    assert accepted(e, buy(1, 100, 1, stop_price=-3))


@pytest.mark.parametrize("fields", [
    dict(display_qty=-1), dict(qty=10, display_qty=11), dict(display_qty=5, tif=Tif.IOC),
    dict(display_qty=5, tif=Tif.FOK), dict(display_qty=5, order_type=MARKET, tif=Tif.IOC),
    dict(display_qty=5, order_type=STOP_LIMIT, stop_price=50),
    dict(display_qty=5, order_type=STOP, stop_price=50)])
def test_bad_display_qty(fields):
    e = engine()
    assert_rejected(e, msg(**{"qty": 10, **fields}), Reason.BAD_DISPLAY_QTY)


def test_display_qty_off_lot_is_bad_display_qty():
    e = engine(lot_size=5)
    assert_rejected(e, buy(1, 100, 20, display_qty=7), Reason.BAD_DISPLAY_QTY)


@pytest.mark.parametrize("tif", [Tif.GTC, Tif.DAY])
def test_an_iceberg_limit_that_can_rest_passes_validation(tif):
    e = engine()
    assert accepted(e, buy(1, 100, 10, display_qty=10, tif=tif))


@pytest.mark.parametrize("fields", [
    dict(min_qty=-1), dict(qty=10, min_qty=11), dict(min_qty=5, tif=Tif.FOK),
    dict(min_qty=5, order_type=STOP, stop_price=50),
    dict(min_qty=5, order_type=STOP_LIMIT, stop_price=50)])
def test_bad_min_qty(fields):
    e = engine()
    assert_rejected(e, msg(**{"qty": 10, **fields}), Reason.BAD_MIN_QTY)


def test_min_qty_off_lot_is_bad_min_qty():
    e = engine(lot_size=5)
    assert_rejected(e, buy(1, 100, 20, min_qty=7), Reason.BAD_MIN_QTY)


@pytest.mark.parametrize("fields", [
    dict(tif=Tif.GTD, ts=100, expire_ts=100), dict(tif=Tif.GTD, ts=100, expire_ts=0),
    dict(tif=Tif.GTC, expire_ts=5), dict(tif=Tif.DAY, expire_ts=5), dict(tif=Tif.IOC, expire_ts=5)])
def test_bad_expiry(fields):
    e = engine()
    assert_rejected(e, msg(**fields), Reason.BAD_EXPIRY)


def test_gtd_with_a_future_expiry_passes_validation():
    e = engine()
    assert accepted(e, buy(1, 100, 1, tif=Tif.GTD, ts=100, expire_ts=101))


# ---- order type, tif and flags -----------------------------------------------------------------

@pytest.mark.parametrize("order_type", [4, 255])
def test_bad_order_type(order_type):
    assert_rejected(engine(), msg(order_type=order_type), Reason.BAD_ORDER_TYPE)


@pytest.mark.parametrize("fields", [
    dict(tif=5), dict(tif=255), dict(order_type=MARKET, tif=Tif.DAY),
    dict(order_type=MARKET, tif=Tif.GTD, expire_ts=10),
    dict(order_type=STOP, tif=Tif.FOK, stop_price=50),
    dict(order_type=STOP_LIMIT, tif=Tif.FOK, stop_price=50)])
def test_bad_tif(fields):
    assert_rejected(engine(), msg(**fields), Reason.BAD_TIF)


@pytest.mark.parametrize("fields", [
    dict(flags=2), dict(flags=0x80 | Flag.POST_ONLY), dict(flags=Flag.POST_ONLY, tif=Tif.IOC),
    dict(flags=Flag.POST_ONLY, tif=Tif.FOK),
    dict(flags=Flag.POST_ONLY, order_type=MARKET, tif=Tif.IOC),
    dict(flags=Flag.POST_ONLY, order_type=STOP_LIMIT, stop_price=50),
    dict(flags=Flag.POST_ONLY, order_type=STOP, stop_price=50)])
def test_bad_flags(fields):
    assert_rejected(engine(), msg(**fields), Reason.BAD_FLAGS)


@pytest.mark.parametrize("tif", [Tif.GTC, Tif.DAY, Tif.GTD])
def test_post_only_limit_with_a_resting_tif_passes_validation(tif):
    e = engine()
    exp = 10 if tif == Tif.GTD else 0
    assert accepted(e, buy(1, 100, 1, flags=Flag.POST_ONLY, tif=tif, expire_ts=exp))


# ---- the first failure wins --------------------------------------------------------------------

@pytest.mark.parametrize("fields, reason", [
    # each message fails two or more steps; the lowest step's reason is the one reported
    (dict(side=2, order_type=9), Reason.BAD_SIDE),
    (dict(order_type=9, tif=9), Reason.BAD_ORDER_TYPE),
    (dict(order_type=MARKET, tif=Tif.DAY, flags=Flag.POST_ONLY), Reason.BAD_TIF),
    (dict(flags=2, qty=0), Reason.BAD_FLAGS),
    (dict(qty=0, price=0), Reason.BAD_QTY),
    (dict(qty=7, price=0), Reason.OFF_LOT),
    (dict(qty=5, price=0), Reason.BELOW_MIN_QTY),
    (dict(qty=10, price=0, display_qty=-1), Reason.BAD_PRICE),
    (dict(qty=10, price=13, display_qty=-1), Reason.OFF_TICK),
    (dict(qty=10, order_type=STOP_LIMIT, price=13, stop_price=0), Reason.OFF_TICK),
    (dict(qty=10, order_type=STOP, price=13, stop_price=0, display_qty=5),
     Reason.BAD_STOP_PRICE),
    (dict(qty=10, display_qty=20, min_qty=20), Reason.BAD_DISPLAY_QTY),
    (dict(qty=10, min_qty=20, tif=Tif.GTD, expire_ts=0), Reason.BAD_MIN_QTY),
    (dict(qty=10, order_id=1, tif=Tif.GTD, expire_ts=0), Reason.BAD_EXPIRY),
    (dict(qty=10, order_id=1, flags=Flag.POST_ONLY, price=200), Reason.DUPLICATE_ID),
    (dict(qty=10, order_id=5, flags=Flag.POST_ONLY, price=100, side=Side.SELL),
     Reason.POST_ONLY_WOULD_CROSS),
    (dict(qty=40, order_id=5, tif=Tif.FOK, price=100, side=Side.SELL), Reason.FOK_CANNOT_FILL),
    (dict(qty=40, order_id=5, min_qty=30, price=100, side=Side.SELL),
     Reason.MIN_QTY_CANNOT_FILL),
])
def test_the_first_failing_step_gives_the_reason(fields, reason):
    e = engine(lot_size=5, min_order_qty=10, tick_table=[(1, 10)])
    e.process(buy(1, 100, 20))
    assert_rejected(e, msg(**{"order_id": 7, "price": 100, **fields}), reason)


# ---- stop price reached, minimum quantity, FOK ---------------------------------------------------

@pytest.mark.parametrize("side, stop_price, ok", [
    (Side.BUY, 99, False), (Side.BUY, 100, False), (Side.BUY, 101, True),
    (Side.SELL, 101, False), (Side.SELL, 100, False), (Side.SELL, 99, True)])
def test_stop_price_reached_against_the_last_trade_price(side, stop_price, ok):
    e = engine()
    e.state.symbols["last_price"][0] = 100   # as if the symbol last traded at 100
    for ot in (STOP, STOP_LIMIT):
        m = msg(side=side, order_type=ot, price=100, stop_price=stop_price, order_id=3)
        if ok:
            assert accepted(e, m)
            e.process(cancel(3))
        else:
            assert_rejected(e, m, Reason.STOP_PRICE_REACHED)


def test_a_stop_before_the_first_trade_is_never_reached():
    e = engine()
    for side, sp in ((Side.BUY, 1), (Side.SELL, MAX_PRICE)):
        assert accepted(e, msg(side=side, order_type=STOP, stop_price=sp, order_id=side + 1))


def test_stop_price_reached_is_checked_after_duplicate_id():
    e = engine()
    e.state.symbols["last_price"][0] = 100
    e.process(buy(1, 90, 1))
    assert_rejected(e, msg(order_id=1, order_type=STOP, stop_price=100), Reason.DUPLICATE_ID)


def test_min_qty_cannot_fill_when_less_would_fill_now():
    e = engine()
    e.process(flow(sell(1, 100, 3), sell(2, 101, 3), sell(3, 103, 9)))
    assert_rejected(e, buy(9, 101, 10, min_qty=7), Reason.MIN_QTY_CANNOT_FILL)
    res = e.process(buy(9, 101, 10, min_qty=6))
    assert rows(res.fills, "qty") == [(3,), (3,)]
    assert (9, Event.PARTIAL, 0, 6, 4) in ev(res)   # the rest (4) rests: no minimum after
    assert [int(o["order_id"]) for o in e.orders("X") if o["side"] == Side.BUY] == [9]


def test_min_qty_on_an_ioc_and_a_market_order():
    e = engine()
    e.process(sell(1, 100, 3))
    assert_rejected(e, buy(9, 100, 5, min_qty=4, tif=Tif.IOC), Reason.MIN_QTY_CANNOT_FILL)
    assert_rejected(e, buy(9, 0, 5, min_qty=4, order_type=MARKET, tif=Tif.IOC),
                    Reason.MIN_QTY_CANNOT_FILL)
    assert accepted(e, buy(9, 0, 5, min_qty=3, order_type=MARKET, tif=Tif.IOC))


def test_min_qty_walk_stops_at_the_traders_own_order_under_cancel_incoming():
    e = engine(stp="cancel_incoming")
    e.process(flow(sell(1, 100, 3, trader=2), sell(2, 100, 5, trader=1),
                   sell(3, 100, 5, trader=2)))
    assert_rejected(e, buy(9, 100, 8, min_qty=4, trader=1), Reason.MIN_QTY_CANNOT_FILL)
    assert accepted(e, buy(9, 100, 8, min_qty=3, trader=1))


# ---- modify of a resting order: order of checks ----------------------------------------------

@pytest.mark.parametrize("price, qty, reason", [
    (100, 0, Reason.BAD_QTY), (100, MAX_QTY + 1, Reason.OVERFLOW), (0, 7, Reason.OFF_LOT),
    (0, 5, Reason.BELOW_MIN_QTY), (0, 10, Reason.BAD_PRICE),
    (MAX_PRICE + 1, 10, Reason.PRICE_OUT_OF_BAND), (105, 10, Reason.OFF_TICK),
    (120, 10, Reason.POST_ONLY_WOULD_CROSS)])
def test_modify_reasons_in_step_order(price, qty, reason):
    e = engine(lot_size=5, min_order_qty=10, tick_table=[(1, 10)])
    e.process(flow(buy(1, 100, 20, flags=Flag.POST_ONLY), sell(2, 120, 10)))
    assert_rejected(e, modify(1, price, qty), reason)


# ---- add_symbol options -------------------------------------------------------------------------

@pytest.mark.parametrize("option, value", [
    ("tick_table", []), ("tick_table", [(2, 1)]), ("tick_table", [(1, 0)]),
    ("tick_table", [(1, 1), (1, 5)]), ("tick_table", [(1, 1), (10, 5), (5, 2)]),
    ("tick_table", [(1, 1, 1)]), ("tick_table", [(1, 1.5)]), ("tick_table", 5),
    ("tick_table", [(1, 1)] + [(k * 10, 1) for k in range(1, 65)]),
    ("tick_table", [(1, True)]), ("tick_table", ["ab"]),
    ("lot_size", 0), ("lot_size", 1.5), ("lot_size", True), ("lot_size", "1"),
    ("min_order_qty", 0), ("min_order_qty", -1),
    ("session_close", -1), ("session_close", DAY_NS), ("session_close", 1.5),
    ("currency", 5), ("currency", "US D"), ("currency", "X" * 17), ("currency", "€"),
    ("tick_value", 0), ("tick_value", -1.0), ("tick_value", float("nan")),
    ("tick_value", float("inf")), ("tick_value", "1"), ("tick_value", True),
    ("maker_bps", 10_000), ("maker_bps", -10_000.0), ("taker_bps", float("nan")),
    ("taker_bps", "1"), ("taker_bps", None)])
def test_add_symbol_refuses_a_bad_option_naming_symbol_and_option(option, value):
    e = Engine()
    with pytest.raises(UsageError) as err:
        e.add_symbol("ZZTOP", **{option: value})
    assert option in str(err.value) and "ZZTOP" in str(err.value)
    assert e.symbols == {}   # nothing was added


def test_add_symbol_takes_every_option_and_config_lists_them():
    e = Engine(stp="cancel_both", ownership=False)
    e.add_symbol("ES", tick_size=0.25, min_price=1, max_price=10 ** 6,
                 tick_table=np.array([[1, 1], [1000, 5]]), lot_size=2, min_order_qty=4,
                 session_close=79_200 * 10 ** 9, currency="USD", tick_value=12.5,
                 maker_bps=-0.5, taker_bps=1)
    e.add_symbol("B")
    cfg = e.config()
    assert cfg["ownership"] is False and cfg["stp"] == "cancel_both"
    assert cfg["symbols"][0] == {
        "name": "ES", "id": 0, "tick_size": 0.25, "min_price": 1, "max_price": 10 ** 6,
        "tick_table": [[1, 1], [1000, 5]], "lot_size": 2, "min_order_qty": 4,
        "session_close": 79_200 * 10 ** 9, "currency": "USD", "tick_value": 12.5,
        "maker_bps": -0.5, "taker_bps": 1.0}
    assert cfg["symbols"][1] == {
        "name": "B", "id": 1, "tick_size": 1, "min_price": 1, "max_price": MAX_PRICE,
        "tick_table": [[1, 1]], "lot_size": 1, "min_order_qty": 1, "session_close": 0,
        "currency": "", "tick_value": None, "maker_bps": 0.0, "taker_bps": 0.0}
    json.dumps(cfg)   # JSON-able
    assert e.state.symbols["lot_size"].tolist() == [2, 1]


def test_config_is_a_copy():
    e = engine(tick_table=TABLE)
    e.config()["symbols"][0]["tick_table"].append([20_000, 10])
    assert e.config()["symbols"][0]["tick_table"] == [[1, 1], [10_000, 5]]


def test_options_of_one_symbol_do_not_leak_into_another():
    e = Engine()
    e.add_symbol("A", lot_size=10, tick_table=[(1, 5)])
    e.add_symbol("B")
    assert ev(e.process(buy(1, 7, 3, symbol=1)))[0][1] == Event.ACCEPTED
    assert ev(e.process(buy(1, 7, 3, symbol=0)))[0][2] == Reason.OFF_LOT


# ---- from_config --------------------------------------------------------------------------------

def test_from_config_round_trips_every_option():
    e = Engine(stp="cancel_resting", ownership=True)
    e.add_symbol("ES", tick_size=0.25, tick_table=TABLE, lot_size=5, min_order_qty=10,
                 session_close=3600 * 10 ** 9, currency="USD", tick_value=12.5, maker_bps=-1.0,
                 taker_bps=2.5)
    e.add_symbol("NQ", max_price=10 ** 9)
    back = Engine.from_config(e.config())
    assert back.config() == e.config() and back.ownership and back.live_orders == 0
    assert back.checkpoint() == e.checkpoint()
    assert json.loads(json.dumps(e.config())) == e.config()
    assert Engine.from_config(json.loads(json.dumps(e.config()))).config() == e.config()


def test_from_config_of_an_old_config_takes_defaults_and_ownership_off():
    old = {"stp": "none", "symbols": [{"name": "A", "id": 0, "tick_size": 0.01,
                                       "min_price": 1, "max_price": MAX_PRICE}]}
    e = Engine.from_config(old)
    assert e.ownership is False
    assert e.config()["symbols"][0]["tick_table"] == [[1, 1]]
    assert e.config()["symbols"][0]["lot_size"] == 1


@pytest.mark.parametrize("cfg, key", [
    ([], "dict"), ({"symbols": []}, "stp"), ({"stp": "none"}, "symbols"),
    ({"stp": "none", "symbols": [], "bogus": 1}, "bogus"),
    ({"stp": "bogus", "symbols": []}, "stp"),
    ({"stp": "none", "symbols": [], "ownership": "yes"}, "ownership"),
    ({"stp": "none", "symbols": {}}, "symbols"),
    ({"stp": "none", "symbols": [5]}, "symbols[0]"),
    ({"stp": "none", "symbols": [{"id": 0}]}, "name"),
    ({"stp": "none", "symbols": [{"name": "A", "id": 1}]}, "id"),
    ({"stp": "none", "symbols": [{"name": "A", "lots": 1}]}, "lots"),
    ({"stp": "none", "symbols": [{"name": "A", "lot_size": 0}]}, "lot_size"),
    ({"stp": "none", "symbols": [{"name": "A"}, {"name": "A"}]}, "already"),
])
def test_from_config_refuses_a_bad_config_naming_the_key(cfg, key):
    with pytest.raises(UsageError, match=re.escape(key)):
        Engine.from_config(cfg)


# ---- checkpoint header ---------------------------------------------------------------------------

def parts(blob):
    """(header dict, (frame version, rows bytes)) of a checkpoint of today's layout."""
    version, hlen = struct.unpack_from("<II", blob, 8)
    (n,) = struct.unpack_from("<Q", blob, 16 + hlen)
    return json.loads(blob[16: 16 + hlen]), (version, n, blob[24 + hlen: -4])


def build(header, body_of):
    """A checkpoint with ``header`` and the frame version and rows of ``body_of`` (from
    ``parts``), its CRC correct."""
    version, n, rows_ = body_of
    h = json.dumps(header, sort_keys=True).encode()
    body = (b"EXSIMCKP" + struct.pack("<II", version, len(h)) + h
            + struct.pack("<Q", n) + rows_)
    return body + struct.pack("<I", crc32c.crc32c(body))


def optioned_engine():
    e = Engine(stp="cancel_both")
    e.add_symbol("ES", tick_size=0.25, tick_table=TABLE, lot_size=5, min_order_qty=10,
                 session_close=3600 * 10 ** 9, currency="USD", tick_value=12.5, maker_bps=-1.0,
                 taker_bps=2.5)
    e.add_symbol("B", max_price=10 ** 9)
    e.process(flow(buy(1, 9_000, 20), sell(2, 10_005, 15), buy(1, 500, 3, symbol=1)))
    e.state.symbols["last_price"][:] = [9_000, 0]
    return e


def test_checkpoint_header_carries_options_ownership_and_last_prices():
    e = optioned_engine()
    header, _ = parts(e.checkpoint())
    assert header["config"] == e.config() and header["last_prices"] == [9_000, 0]
    back = Engine.restore(e.checkpoint())
    assert back.config() == e.config() and back.ownership is True
    assert back.state.symbols.tobytes() == e.state.symbols.tobytes()
    assert back.checkpoint() == e.checkpoint()
    # the restored options decide: off lot, off tick and a reached stop are still refused
    assert ev(back.process(buy(7, 9_000, 12)))[0][2] == Reason.OFF_LOT
    assert ev(back.process(buy(7, 10_001, 10)))[0][2] == Reason.OFF_TICK
    assert ev(back.process(buy(7, 0, 10, order_type=STOP, stop_price=9_000)))[0][2] \
        == Reason.STOP_PRICE_REACHED


def old_form_blob():
    """A checkpoint whose header is as written before ownership, options and last prices
    existed (two resting orders of trader 4; rows in today's layout)."""
    header = {"config": {"stp": "none", "symbols": [
        {"name": "JPM", "id": 0, "tick_size": 0.01, "min_price": 1, "max_price": MAX_PRICE}]},
        "seq": 2, "trade_id": 0, "next_auto_id": 1}
    e = Engine(ownership=False)
    e.add_symbol("JPM", tick_size=0.01)
    e.process(flow(buy(1, 99, 5, trader=4), sell(2, 101, 5, trader=4)))
    return build(header, parts(e.checkpoint())[1])


def test_an_old_form_header_restores_with_ownership_off_and_reencodes_to_the_same_bytes():
    blob = old_form_blob()
    e = Engine.restore(blob)
    assert e.ownership is False and e.checkpoint() == blob
    assert e.config()["symbols"][0]["lot_size"] == 1
    assert e.state.symbols["last_price"].tolist() == [0]
    # ownership is off: another trader may cancel (older journals rerun to the same bytes)
    assert ev(e.process(cancel(1, trader=9)))[0][1] == Event.CANCELLED


def test_an_engine_in_the_old_state_writes_the_old_form():
    e = Engine(ownership=False)
    e.add_symbol("A")
    e.process(buy(1, 100, 5))
    header, _ = parts(e.checkpoint())
    assert "ownership" not in header["config"] and "last_prices" not in header
    assert set(header["config"]["symbols"][0]) == {"name", "id", "tick_size", "min_price",
                                                   "max_price"}
    e2 = Engine()   # ownership on: the new form
    e2.add_symbol("A")
    assert parts(e2.checkpoint())[0]["config"]["ownership"] is True


def _edit_new(fn):
    blob = optioned_engine().checkpoint()
    header, r = parts(blob)
    fn(header)
    return build(header, r)


@pytest.mark.parametrize("edit, field", [
    (lambda h: h["config"].update(ownership=1), "ownership"),
    (lambda h: h["config"].update(ownership=None), "ownership"),
    (lambda h: h.pop("last_prices"), "last_prices"),
    (lambda h: h.update(last_prices=[1]), "last_prices"),
    (lambda h: h.update(last_prices=[9_000, -1]), "last_prices"),
    (lambda h: h.update(last_prices=[9_000, 10 ** 9 + 1]), "last_prices"),
    (lambda h: h.update(last_prices=[9_000.0, 0]), "last_prices"),
    (lambda h: h["config"]["symbols"][0].pop("lot_size"), "lot_size"),
    (lambda h: h["config"]["symbols"][0].update(lot_size=0), "lot_size"),
    (lambda h: h["config"]["symbols"][0].update(tick_table=[[2, 1]]), "tick_table"),
    (lambda h: h["config"]["symbols"][0].update(tick_table="x"), "tick_table"),
    (lambda h: h["config"]["symbols"][0].update(min_order_qty=-2), "min_order_qty"),
    (lambda h: h["config"]["symbols"][0].update(session_close=DAY_NS), "session_close"),
    (lambda h: h["config"]["symbols"][0].update(currency=7), "currency"),
    (lambda h: h["config"]["symbols"][0].update(tick_value=-1), "tick_value"),
    (lambda h: h["config"]["symbols"][0].update(maker_bps=1e9), "maker_bps"),
    (lambda h: h["config"]["symbols"][1].update(taker_bps="x"), "taker_bps"),
    (lambda h: h["config"]["symbols"][1].update(extra=1), "extra"),
    (lambda h: h["config"].pop("ownership"), "ownership"),   # half old, half new
])
def test_a_corrupt_new_header_field_is_named(edit, field):
    with pytest.raises(CorruptionError, match=field) as err:
        Engine.restore(_edit_new(edit))
    assert str(err.value).startswith("checkpoint: ")


def test_an_old_form_header_with_a_new_key_is_refused():
    header, r = parts(old_form_blob())
    header["last_prices"] = [0]
    with pytest.raises(CorruptionError, match="ownership"):
        Engine.restore(build(header, r))
    header, r = parts(old_form_blob())
    header["config"]["symbols"][0]["lot_size"] = 1
    with pytest.raises(CorruptionError, match="lot_size"):
        Engine.restore(build(header, r))


def test_a_new_form_header_of_an_old_state_is_not_canonical():
    # ownership off, defaults, no trade: checkpoint() writes the old form, so the new form of
    # that state is not a blob checkpoint() could have written
    e = Engine(ownership=False)
    e.add_symbol("A")
    header, r = parts(e.checkpoint())
    header["config"] = {"stp": "none", "ownership": False,
                        "symbols": [{**e.config()["symbols"][0]}]}
    header["last_prices"] = [0]
    with pytest.raises(CorruptionError, match="canonical"):
        Engine.restore(build(header, r))


def test_a_non_canonical_option_value_is_refused():
    def edit(h):
        h["config"]["symbols"][1]["maker_bps"] = 0   # config() writes 0.0
    with pytest.raises(CorruptionError, match="canonical"):
        Engine.restore(_edit_new(edit))



def test_off_tick_agrees_with_the_rule_on_a_64_row_table():
    rng = np.random.default_rng(15)
    starts = np.concatenate([[1], np.sort(rng.choice(np.arange(2, 100_000), 63, replace=False))])
    table = [(int(s), int(t)) for s, t in zip(starts, rng.integers(1, 40, 64))]
    e = engine(tick_table=table)
    prices = np.concatenate([rng.integers(1, 110_000, 400), starts, starts - 1, starts + 1])
    prices = prices[prices >= 1]
    m = np.concatenate([buy(k + 1, int(p), 1)
                        for k, p in enumerate(prices)])
    got = e.process(m).events
    for p, row in zip(prices, got):
        tick = [t for s, t in table if s <= p][-1]
        want = Reason.NONE if p % tick == 0 else Reason.OFF_TICK
        assert (int(row["reason"]) if row["event"] == REJ else Reason.NONE) == want, (p, tick)
