"""Money from the engine config (``add_symbol``'s currency, tick_value, maker_bps, taker_bps and
``Engine.from_config``), end to end.

A scenario file's symbol money reaches the backtest: the strategy rests a buy that the market
sells into (maker, rebate) and then sells into a resting market bid (taker, fee); the summary,
the CLI table and JSON, and a journaled run all carry the currency.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Kind, Side

from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategy import Strategy

ME = 7



def _flow():
    """ts 10: trader 1 sells 2 @ 100 (hits the strategy's resting bid, sent at ts 0);
    ts 20: trader 2 bids 2 @ 103, which the strategy's sell (sent at 25) takes."""
    o = np.zeros(3, ORDER_DTYPE)
    o[0] = (5, 1, 200, 1, 0, 3, Kind.NEW, 0, 0, 0, Side.SELL, 0, 0, 0, 0, 0)   # a far ask
    o[1] = (10, 2, 100, 2, 0, 1, Kind.NEW, 0, 0, 0, Side.SELL, 0, 0, 0, 0, 0)
    o[2] = (20, 3, 103, 2, 0, 2, Kind.NEW, 0, 0, 0, Side.BUY, 0, 0, 0, 0, 0)
    return o


class _BuyThenSell(Strategy):
    every = 1

    def __init__(self):
        self.n = 0

    def on_start(self, ctx):
        ctx.buy(100, 2)

    def on_book(self, ctx, book):
        self.n += 1
        if book.ts >= 20 and ctx.position == 2 and not ctx.open_orders:
            ctx.sell(103, 2)


SYMBOL = {"name": "AAA", "tick_size": 0.01, "currency": "USD", "tick_value": 0.5,
          "maker_bps": -1.0, "taker_bps": 3.0}


def test_a_symbols_currency_and_schedule_price_the_backtest_by_hand():
    res = backtest(_flow(), _BuyThenSell(), trader=ME, symbols=[SYMBOL])
    s = res.summary
    assert (s["maker_volume"], s["taker_volume"]) == (2, 2)
    # 100 USD bought resting (-0.01 rebate), 103 USD sold aggressing (+0.0309 fee)
    assert s["turnover"] == pytest.approx(203.0)
    assert s["fees"] == pytest.approx(0.0209)
    assert s["pnl"] == pytest.approx(3.0 - 0.0209)
    assert res.unit == "USD" and res.meta["money"]["fees_from"] == "symbol"


def test_fees_bps_overrides_the_symbols_schedule():
    res = backtest(_flow(), _BuyThenSell(), trader=ME, symbols=[SYMBOL], fees_bps=2.0)
    assert res.summary["fees"] == pytest.approx(203.0 * 2e-4)


def test_a_scenario_files_money_reaches_the_backtest(tmp_path):
    from exsim.scenarios import load_scenario

    p = tmp_path / "m.toml"
    p.write_text('generator = "uniform"\nseed = 1\n[params]\nn = 3000\n[[symbols]]\n'
                 'name = "AAA"\ntick_size = 0.01\ncurrency = "USD"\ntick_value = 0.01\n'
                 'maker_bps = -0.5\ntaker_bps = 1.0\n')
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    res = backtest(load_scenario(p), InventoryMarketMaker(every=20))
    assert res.unit == "USD" and res.meta["money"]["maker_bps"] == pytest.approx(-0.5)
    assert res.meta["money"]["taker_bps"] == pytest.approx(1.0)


def test_the_cli_labels_money_with_the_currency(tmp_path, capsys):
    from exsim.replay.cli.app import main

    p = tmp_path / "m.toml"
    p.write_text('generator = "uniform"\nseed = 1\n[params]\nn = 3000\n[[symbols]]\n'
                 'name = "AAA"\ntick_size = 0.01\ncurrency = "USD"\ntick_value = 0.01\n')
    assert main(["backtest", str(p), "--json", "--param", "every=20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "USD"
    assert main(["backtest", str(p), "--param", "every=20"]) == 0
    assert "pnl (USD)" in capsys.readouterr().out


def test_a_journaled_backtest_keeps_the_symbols_money(tmp_path):
    from exsim.store import Session

    backtest(_flow(), _BuyThenSell(), trader=ME, symbols=[SYMBOL], store_dir=tmp_path / "d")
    with Session.open(tmp_path / "d") as s:
        sym = s.engine.config()["symbols"][0]
    assert (sym["currency"], sym["tick_value"], sym["maker_bps"]) == ("USD", 0.5, -1.0)
