"""``BacktestResult.report()``: the trade list, PnL per bar, Sharpe, drawdown, fees and turnover a
quant reads, in the result's money unit, checked against a hand computation; and the summary
keys stay exactly as they were (the golden digests hash them)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import EVENT_DTYPE, FILL_DTYPE, ORDER_DTYPE, Side

from exsim.replay.backtesting.kernels import MARK_DTYPE
from exsim.replay.backtesting.money import Money
from exsim.replay.backtesting.result import build_result

ME = 7
USD = Money("USD", 0.5, -1e-4, 3e-4)   # rebate 1 bp resting, pay 3 bp aggressing

SUMMARY_KEYS = ["pnl", "gross_pnl", "fees", "turnover", "volume", "maker_volume", "taker_volume",
                "n_fills", "n_orders", "submitted_qty", "fill_ratio", "final_position",
                "max_drawdown", "mean_time_in_queue_ns", "rejects", "n_messages"]


def _result(money=USD, self_trade=False):
    """The strategy buys 2 @ 100 resting at ts 30, then sells 2 @ 103 aggressing at ts 50
    (and, with ``self_trade``, trades 1 @ 104 with itself at ts 70)."""
    n = 3 if self_trade else 2
    f = np.zeros(n, FILL_DTYPE)
    f["seq"], f["ts"], f["trade_id"] = [3, 5, 7][:n], [30, 50, 70][:n], [1, 2, 3][:n]
    f["price"], f["qty"] = [100, 103, 104][:n], [2, 2, 1][:n]
    f["buy_trader"], f["sell_trader"] = [ME, 1, ME][:n], [2, ME, ME][:n]
    f["aggressor_side"] = [1, 1, 0][:n]
    empty = np.zeros(0, np.int64)
    return build_result(np.zeros(0, ORDER_DTYPE), empty, empty, f, np.zeros(0, EVENT_DTYPE),
                        np.zeros(0, MARK_DTYPE), ME, money, {"trader": ME, "symbol": 0,
                                                             "symbol_name": "JPM"})


def test_the_trade_list_has_side_liquidity_notional_fee_and_position_in_the_unit():
    rep = _result().report(bar_ns=20)
    t = rep.trades
    assert t["side"].tolist() == [Side.BUY, Side.SELL]
    assert t["taker"].tolist() == [False, True]
    assert t["notional"].tolist() == [100.0, 103.0]            # price x qty x tick_value 0.5
    assert t["fee"].tolist() == pytest.approx([-0.01, 0.0309])  # -1 bp rebate, 3 bp taker
    assert t["position"].tolist() == [2, 0]
    assert rep.unit == "USD"


def test_bars_returns_and_sharpe_match_the_hand_computation():
    rep = _result().report(bar_ns=20)
    assert rep.bar_ts.tolist() == [40, 60]
    # after the buy: cash -100 + 2 x 100 x 0.5 - fee (-0.01); after the sell: 3 - 0.0209
    assert rep.bar_pnl.tolist() == pytest.approx([0.01, 2.9791])
    assert rep.returns.tolist() == pytest.approx([0.01, 2.9691])
    r = np.array([0.01, 2.9691])
    per_bar = r.mean() / r.std(ddof=1)
    assert rep.stats["sharpe_per_bar"] == pytest.approx(per_bar)
    assert rep.stats["sharpe_annualised"] == pytest.approx(per_bar * math.sqrt(252 * 23_400e9 / 20))
    with_capital = _result().report(bar_ns=20, capital=1000.0)
    assert with_capital.returns.tolist() == pytest.approx([0.00001, 0.0029691])
    assert with_capital.stats["sharpe_per_bar"] == pytest.approx(per_bar)   # scale-free


def test_the_report_agrees_with_the_summary_and_leaves_its_keys_alone():
    res = _result()
    before = res.digest()
    rep = res.report()
    for k in ("pnl", "fees", "turnover", "max_drawdown", "final_position", "volume"):
        assert rep.stats[k] == res.summary[k]
    assert list(res.summary) == SUMMARY_KEYS
    assert res.digest() == before


def test_one_bar_or_a_flat_pnl_has_no_sharpe():
    rep = _result().report()          # both fills inside one minute
    assert rep.stats["n_bars"] == 1 and rep.stats["sharpe_per_bar"] is None
    assert _result(Money()).report(bar_ns=10**12).stats["sharpe_annualised"] is None


def test_a_self_trade_is_two_rows_and_leaves_the_position():
    t = _result(self_trade=True).report(bar_ns=20).trades
    assert t["trade_id"].tolist() == [1, 2, 3, 3]
    assert t["side"].tolist()[2:] == [Side.BUY, Side.SELL]
    assert t["taker"].tolist()[2:] == [True, False]
    assert t["position"].tolist() == [2, 0, 1, 0]


def test_an_empty_backtest_reports_zeros_and_no_trades():
    empty = np.zeros(0, np.int64)
    res = build_result(np.zeros(0, ORDER_DTYPE), empty, empty, np.zeros(0, FILL_DTYPE),
                       np.zeros(0, EVENT_DTYPE), np.zeros(0, MARK_DTYPE), ME, USD, {})
    rep = res.report()
    assert len(rep.trades) == 0 and rep.stats["n_bars"] == 0 and rep.stats["pnl"] == 0.0
    assert "trades (0" in rep.text()


@pytest.mark.parametrize("kw", [{"bar_ns": 0}, {"bar_ns": 1.5}, {"bar_ns": True},
                                {"capital": 0}, {"capital": float("nan")}, {"capital": "1"}])
def test_bad_report_arguments_are_usage_errors_naming_them(kw):
    with pytest.raises(UsageError, match=next(iter(kw))):
        _result().report(**kw)


def test_text_and_json_views():
    rep = _result().report(bar_ns=20)
    text = rep.text()
    assert "sharpe_annualised" in text and "fee in USD" in text and "pnl (USD)" in text
    assert "maker" in text and "taker" in text
    js = rep.to_json()
    assert js["trades"][1] == {"ts": 50, "seq": 5, "trade_id": 2, "side": "SELL", "price": 103,
                               "qty": 2, "notional": 103.0, "fee": pytest.approx(0.0309),
                               "liquidity": "taker", "position": 0}
    assert js["bars"]["ts"] == [40, 60] and js["unit"] == "USD"
