"""Backtest inputs and outputs: refused flows, timers, journaling, plots, example strategies."""

import numpy as np
import pytest

from exsim.exchange import UsageError
from exsim.replay.backtesting.driver import ID_BASE, backtest
from exsim.replay.backtesting.latency import ConstantLatency, RecordedLatency
from exsim.replay.backtesting.strategy import Strategy
from exsim.scenarios import load_scenario, uniform_flow
from exsim.replay.backtesting.strategies import InventoryMarketMaker, MomentumTaker

TRADER = 4242


def test_flow_using_the_strategy_id_range_or_trader_is_refused():
    f = uniform_flow(100, 1)
    f["order_id"][5] = ID_BASE
    with pytest.raises(UsageError, match="ID_BASE"):
        backtest(f, Strategy(), trader=TRADER)
    with pytest.raises(UsageError, match="trader"):
        backtest(uniform_flow(100, 1), Strategy(), trader=3)


def test_timer_wakes_at_local_times_and_sees_the_book_one_feed_latency_old():
    seen = []

    class Clock(Strategy):
        timer_ns = 50_000

        def on_timer(self, ctx, ts):
            seen.append((ts, ctx.book.ts))
    backtest(uniform_flow(2_000, 2), Clock(), latency=ConstantLatency(7_000, 0), trader=TRADER)
    assert len(seen) > 10
    assert all(b - a == 50_000 for (a, _), (b, _) in zip(seen, seen[1:]))
    assert all(obs == local - 7_000 for local, obs in seen)


def test_recorded_latency_is_a_step_function_of_time():
    feed, order = RecordedLatency({"ts": [0, 100], "feed_ns": [1, 2], "order_ns": [5, 9]}).samplers()
    assert [order.draw(t) for t in (-5, 0, 99, 100, 10**9)] == [5, 5, 5, 9, 9]


def test_journaled_backtest_holds_the_strategy_fills(tmp_path):
    from exsim.store import read
    r = backtest(uniform_flow(3_000, 4), InventoryMarketMaker(every=20), trader=TRADER,
                 store_dir=tmp_path / "run")
    stored = read(tmp_path / "run", "fills")
    mine = stored[(stored["buy_trader"] == TRADER) | (stored["sell_trader"] == TRADER)]
    assert len(mine) == len(r.fills) > 0
    assert mine["trade_id"].tolist() == r.fills["trade_id"].tolist()


def test_plot_writes_a_png(tmp_path):
    r = backtest(uniform_flow(3_000, 4), InventoryMarketMaker(every=20), trader=TRADER)
    out = r.plot(tmp_path / "bt.png")
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(UsageError):
        r.plot(tmp_path / "bt.jpg")


def test_market_maker_respects_its_position_limit_on_a_generated_scenario():
    r = backtest(load_scenario("default"), InventoryMarketMaker(size=3, max_position=15, every=10),
                 symbol="JPM", trader=TRADER, latency=ConstantLatency(1_000, 2_000))
    assert r.summary["n_fills"] > 0
    assert np.abs(r.series["position"]).max() <= 15 + 3   # one in-flight quote may overshoot


def test_momentum_taker_only_takes_liquidity():
    r = backtest(uniform_flow(20_000, 8), MomentumTaker(threshold=0.5, every=20), trader=TRADER)
    assert r.summary["n_fills"] > 0 and r.summary["maker_volume"] == 0


def test_stored_run_keeps_its_symbol_names_and_ticks(tmp_path):
    sc = load_scenario("default")                       # 10,000 messages, named symbols
    names = [s.name for s in sc.symbols]
    backtest(sc, Strategy(), trader=TRADER, symbol=names[0], store_dir=tmp_path / "run")
    r = backtest(str(tmp_path / "run"), InventoryMarketMaker(every=20), trader=TRADER + 1,
                 symbol=names[-1])
    assert r.meta["symbol_name"] == names[-1] and r.meta["symbol"] == len(names) - 1
    with pytest.raises(UsageError):
        backtest(str(tmp_path / "run"), Strategy(), trader=TRADER + 1, symbol="NOSUCH")


def test_a_strategy_named_by_its_path_before_the_rooms_still_loads():
    from exsim.replay.backtesting.loading import load_strategy
    from exsim.replay.backtesting.strategies import InventoryMarketMaker, MomentumTaker

    assert type(load_strategy("scenarios.strategies:InventoryMarketMaker", ["size=3"])) is InventoryMarketMaker
    assert type(load_strategy("replay.backtesting.strategies:InventoryMarketMaker", [])) is InventoryMarketMaker
    assert type(load_strategy("scenarios.strategies.momentum:MomentumTaker", [])) is MomentumTaker


def test_an_unsorted_flow_is_refused_naming_the_message_that_steps_back():
    from exsim.replay import backtest
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    from exsim.scenarios import load_scenario

    orders = load_scenario("default").generate()[:100].copy()
    orders["ts"][40] = orders["ts"][39] - 1
    with pytest.raises(UsageError, match=r"sorted by ts.*message 41 \(ts \d+\) comes before message 40"):
        backtest(orders, InventoryMarketMaker(), symbol=0)
