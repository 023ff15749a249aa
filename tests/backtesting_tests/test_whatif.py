"""What-if replay on a hand-made book where the strategy's effect is known exactly."""

import numpy as np
import pytest

from conftest import resting_flow
from exsim.exchange import Side, UsageError
from exsim.replay.backtesting.latency import ConstantLatency
from exsim.replay.backtesting.strategy import Strategy
from exsim.replay.backtesting.counterfactual import whatif

TRADER = 4242


class PostOnce(Strategy):
    """Sells 3 at 100 once, at the start."""

    def on_start(self, ctx):
        ctx.sell(100, 3)


# asks 5@101 (id 6), 5@100 (ids 1, 2); the strategy's 3@100 (sent at t=5) arrives at t=15,
# between 1 and 2; then buys 5@100 (id 3), 5@100 (id 4), 2@101 (id 5).
# Without it: 3<-1 x5, 4<-2 x5, 5<-6 x2 @101.  With it: 3<-1 x5, 4<-S x3 + 4<-2 x2, 5<-2 x2 @100.
BOOK = resting_flow((5, 6, Side.SELL, 101, 5), (10, 1, Side.SELL, 100, 5), (20, 2, Side.SELL, 100, 5),
            (40, 3, Side.BUY, 100, 5), (50, 4, Side.BUY, 100, 5), (60, 5, Side.BUY, 101, 2))


@pytest.fixture(scope="module")
def w():
    return whatif(BOOK, PostOnce(), latency=ConstantLatency(0, 10), trader=TRADER)


def test_displaced_pairs_are_those_that_traded_less_with_the_strategy(w):
    assert w.displaced[["buy_order_id", "sell_order_id", "base_qty", "with_qty"]].tolist() == [
        (4, 2, 5, 2), (5, 6, 2, 0)]
    assert w.added[["buy_order_id", "sell_order_id", "base_qty", "with_qty"]].tolist() == [
        (5, 2, 0, 2)]
    assert (w.summary["displaced_qty"], w.summary["added_qty"]) == (5, 2)
    assert (w.summary["market_volume_base"], w.summary["market_volume_with"]) == (12, 9)
    assert w.summary["strategy_volume"] == 3


def test_queue_entry_counts_the_market_order_that_joined_behind_it(w):
    (q,) = w.queue.tolist()
    assert q[:4] == (w.backtest.orders["order_id"][0], Side.SELL, 100, 3)
    assert q[7:] == (3, 1, 1, 4, 5)   # filled 3; order 2 behind it: filled 4 with it, 5 without


def test_buyer_that_reached_the_next_level_without_the_strategy_pays_a_tick_less_with_it(w):
    rows = {(r["order_id"], r["side"]): r for r in w.orders}
    five = rows[(5, Side.BUY)]
    assert (five["base_vwap"], five["with_vwap"], five["price_diff"]) == (101.0, 100.0, -1.0)
    assert rows[(4, Side.BUY)]["vs_strategy_qty"] == 3
    assert rows[(6, Side.SELL)]["with_qty"] == 0 and np.isnan(rows[(6, Side.SELL)]["price_diff"])
    assert w.summary["buy_price_diff"] == pytest.approx(-2 / 12)   # -1 on 2 of 12 common lots
    assert w.summary["sell_price_diff"] == 0.0


def test_a_strategy_that_never_trades_changes_nothing():
    w = whatif(BOOK, Strategy(), trader=TRADER)
    assert len(w.pairs) == len(w.orders) == len(w.queue) == 0
    assert w.base_fills.tobytes() == w.with_fills.tobytes()


def test_store_dir_is_refused():
    with pytest.raises(UsageError):
        whatif(BOOK, Strategy(), store_dir="x")


def test_market_maker_on_generated_flow_replays_its_backtest_and_takes_queue_positions():
    from exsim.scenarios import uniform_flow
    from exsim.replay.backtesting.strategies import InventoryMarketMaker

    w = whatif(uniform_flow(2_000, 7), InventoryMarketMaker(size=3, every=20), trader=TRADER)
    assert w.summary["strategy_volume"] == w.backtest.summary["volume"] > 0
    assert w.summary["n_queue_entries"] > 0 and w.summary["n_behind"] > 0
    assert w.summary["displaced_qty"] > 0
    s = w.summary      # every displaced or added lot is a market-vs-market lot lost or gained
    assert s["market_volume_base"] - s["market_volume_with"] == s["displaced_qty"] - s["added_qty"]


def test_whatif_refuses_l2_only_flow():
    from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE
    from exsim.replay.backtesting.l2queue import L2Flow
    from exsim.replay.backtesting.strategy import Strategy
    flow = L2Flow(np.zeros(0, L2_DTYPE), np.zeros(0, FILL_DTYPE))
    with pytest.raises(UsageError, match="L3 flow"):
        whatif(flow, Strategy())
