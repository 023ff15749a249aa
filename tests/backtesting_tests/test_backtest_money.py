"""Money in backtests: the unit (a currency or ticks x lots), maker/taker fees, ``fees_bps``
precedence, and the same numbers on every path.

These tests run on any engine: the symbol's schedule is given as a ``Money`` (what
``money.money_for`` reads from the engine config). tests/backtesting_tests/test_backtest_money_engine.py
holds the ones that need the engine's symbol money options.
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import EVENT_DTYPE, FILL_DTYPE, ORDER_DTYPE

import exsim.replay.backtesting.driver as driver
from exsim.replay.backtesting.kernels import MARK_DTYPE
from exsim.replay.backtesting.money import TICKS_X_LOTS, Money, money_for
from exsim.replay.backtesting.quoting import account
from exsim.replay.backtesting.result import build_result

ME = 7
USD = Money("USD", 0.5, -1e-4, 3e-4)   # rebate 1 bp resting, pay 3 bp aggressing


def _fills():
    """The strategy (trader 7) buys 2 @ 100 resting (the market sold into it), then sells 2 @ 103
    aggressing (its sell hits a market bid)."""
    f = np.zeros(2, FILL_DTYPE)
    f["seq"], f["ts"], f["trade_id"] = [3, 5], [30, 50], [1, 2]
    f["price"], f["qty"] = [100, 103], [2, 2]
    f["buy_trader"], f["sell_trader"] = [ME, 1], [2, ME]
    f["aggressor_side"] = [1, 1]
    return f


def _result(money):
    orders = np.zeros(0, ORDER_DTYPE)
    empty = np.zeros(0, np.int64)
    return build_result(orders, empty, empty, _fills(), np.zeros(0, EVENT_DTYPE),
                        np.zeros(0, MARK_DTYPE), ME, money, {})


def test_a_maker_rebate_and_a_taker_fee_in_the_currency_match_the_hand_computation():
    res = _result(USD)
    # buy: notional 100 * 2 * 0.5 = 100 USD, maker: fee -0.01 (a rebate)
    # sell: notional 103 * 2 * 0.5 = 103 USD, taker: fee +0.0309
    s = res.summary
    assert s["turnover"] == pytest.approx(203.0)
    assert s["fees"] == pytest.approx(-0.01 + 0.0309)
    assert s["gross_pnl"] == pytest.approx(3.0)
    assert s["pnl"] == pytest.approx(3.0 - 0.0209)
    assert (s["maker_volume"], s["taker_volume"]) == (2, 2)
    assert res.series["fees"].tolist() == pytest.approx([-0.01, 0.0209])
    assert res.series["cash"].tolist() == pytest.approx([-100.0, 3.0])
    assert res.unit == "USD" and res.meta["money"]["maker_bps"] == pytest.approx(-1.0)


def test_without_a_currency_money_stays_in_ticks_x_lots():
    res = _result(money_for({"name": "X", "tick_size": 0.01}, None))
    assert res.unit == TICKS_X_LOTS
    assert res.summary["turnover"] == 100 * 2 + 103 * 2 and res.summary["fees"] == 0.0
    assert res.summary["pnl"] == 6.0


def test_fees_bps_is_one_rate_for_both_sides_and_overrides_the_symbols_schedule():
    cfg = {"name": "X", "tick_size": 0.01, "currency": "USD", "tick_value": 0.5,
           "maker_bps": -1.0, "taker_bps": 3.0}
    assert money_for(cfg, None) == Money("USD", 0.5, -1e-4, 3e-4, "symbol")
    m = money_for(cfg, 2.0)
    assert (m.maker_rate, m.taker_rate, m.fees_from) == (2e-4, 2e-4, "fees_bps")
    assert _result(m).summary["fees"] == pytest.approx(203.0 * 2e-4)


def test_a_currency_without_a_tick_value_values_a_tick_at_the_tick_size():
    assert money_for({"name": "X", "tick_size": 0.01, "currency": "EUR"}, None).tick_value == 0.01


@pytest.mark.parametrize("cfg, fees, what", [
    (None, -1.0, "fees_bps must be >= 0"),
    (None, float("nan"), "fees_bps must be a finite number"),
    ({"name": "X", "currency": "USD", "tick_value": 0.0}, None, "tick_value must be > 0"),
    ({"name": "X", "maker_bps": float("inf")}, None, "maker_bps"),
])
def test_bad_money_is_a_usage_error_naming_it(cfg, fees, what):
    with pytest.raises(UsageError, match=what):
        money_for(cfg, fees)


def test_the_njit_account_and_the_python_context_book_the_same_cash_and_fees():
    from exsim.replay.backtesting.strategy import Context

    fills = _fills()
    pos, money = np.zeros(1, np.int64), np.zeros(2, np.float64)
    account(fills, 0, len(fills), ME, pos, money, USD.terms())
    ctx = Context(None, 0, USD.terms())
    for row in fills.tolist():
        ctx._apply_fill(row, ME, 0, False)
    assert (ctx.position, ctx.cash, ctx.fees) == (int(pos[0]), money[0], money[1])
    assert money.tolist() == pytest.approx([3.0, 0.0209])
    res = _result(USD)
    assert res.series["cash"][-1] == money[0] and res.series["fees"][-1] == money[1]


def test_the_fast_and_python_paths_give_identical_money_with_a_split_schedule(monkeypatch):
    from exsim.replay.backtesting.strategies import market_maker_fast
    from exsim.scenarios import load_scenario

    monkeypatch.setattr(driver, "money_for", lambda cfg, fees: USD)
    sc = load_scenario("default")
    fast = driver.backtest(sc, market_maker_fast(), symbol="JPM", fast=True)
    slow = driver.backtest(sc, market_maker_fast(), symbol="JPM", fast=False)
    assert fast.summary["n_fills"] > 0
    assert fast.summary["maker_volume"] > 0 and fast.summary["taker_volume"] >= 0
    assert fast.summary == slow.summary
    assert fast.series.tobytes() == slow.series.tobytes()
    assert fast.fills.tobytes() == slow.fills.tobytes()
    assert fast.unit == slow.unit == "USD"


def test_backtest_rejects_a_negative_fees_bps_and_a_malformed_symbols_list():
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    from exsim.scenarios import load_scenario

    sc = load_scenario("default")
    with pytest.raises(UsageError, match="fees_bps must be >= 0"):
        driver.backtest(sc, InventoryMarketMaker(), symbol="JPM", fees_bps=-1)
    with pytest.raises(UsageError, match=r"symbols\[0\]"):
        driver.backtest(sc, InventoryMarketMaker(), symbol="JPM", symbols=[{"tick_size": 1}])
    with pytest.raises(UsageError, match="symbols lists 1 symbol"):
        driver.backtest(sc, InventoryMarketMaker(), symbols=[{"name": "A"}])
