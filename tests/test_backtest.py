"""Backtest driver: queue position is earned, latency shifts fills, runs are deterministic, the
njit and Python paths agree, the summary adds up, runs journal and plot."""

import numpy as np
import pytest

from conftest import resting_flow
from exchange import ORDER_DTYPE, Side
from replay.backtest import ID_BASE, backtest
from replay.backtest_result import build_series, summarize
from replay.latency import ConstantLatency, RandomLatency
from replay.strategy import QuoteStrategy, Strategy
from scenarios import uniform_flow
from scenarios.strategies import InventoryMarketMaker, mm_quotes

TRADER = 4242


class PostOnce(Strategy):
    """Sells ``qty`` at ``price`` once, at the start."""

    def __init__(self, price=100, qty=3):
        self.price, self.qty, self.fills = price, qty, []

    def on_start(self, ctx):
        ctx.sell(self.price, self.qty)

    def on_fill(self, ctx, fill):
        self.fills.append(fill)


# two asks of 5 at 100 (t=10, t=20), then buys of 5, 5, 2 at t=40, 50, 60
BOOK = resting_flow((10, 1, Side.SELL, 100, 5), (20, 2, Side.SELL, 100, 5), (40, 3, Side.BUY, 100, 5),
            (50, 4, Side.BUY, 100, 5), (60, 5, Side.BUY, 100, 2))


def test_order_behind_known_orders_fills_exactly_when_they_are_consumed():
    s = PostOnce()
    r = backtest(BOOK, s, latency=ConstantLatency(0, 20), trader=TRADER)   # arrives at t=30
    assert r.orders["ts"].tolist() == [30]
    assert [(f.ts, f.qty, f.price, f.aggressor) for f in s.fills] == [(60, 2, 100, False)]
    assert r.summary["final_position"] == -2 and r.summary["mean_time_in_queue_ns"] == 30


def test_order_latency_puts_a_later_arrival_behind_orders_that_arrived_meanwhile():
    early = backtest(BOOK, PostOnce(), latency=ConstantLatency(0, 5), trader=TRADER)   # t=15
    late = backtest(BOOK, PostOnce(), latency=ConstantLatency(0, 15), trader=TRADER)   # t=25
    assert early.fills["ts"].tolist() == [50] and early.fills["qty"].tolist() == [3]
    assert late.fills["ts"].tolist() == [60] and late.fills["qty"].tolist() == [2]


def test_arrival_tied_with_a_market_message_goes_behind_it():
    r = backtest(BOOK, PostOnce(), latency=ConstantLatency(0, 10), trader=TRADER)   # t=20, tie
    assert r.fills["ts"].tolist() == [60]


def test_same_inputs_give_identical_result_bytes():
    f = uniform_flow(5_000, 11)
    runs = [backtest(f, InventoryMarketMaker(every=50), trader=TRADER,
                     latency=RandomLatency(3, 200, 500, 100, 400), fees_bps=1.0)
            for _ in range(2)]
    assert runs[0].summary["n_fills"] > 0
    assert runs[0].digest() == runs[1].digest()


def test_njit_and_python_paths_of_the_same_quote_function_give_the_same_fills():
    f = uniform_flow(20_000, 5)
    lat = RandomLatency(9, 300, 700, 200, 500)
    runs = [backtest(f, QuoteStrategy(mm_quotes, [5, 20, 100], every=37), latency=lat,
                     trader=TRADER, fast=fast) for fast in (True, False)]
    assert runs[0].meta["path"] == "njit" and runs[1].meta["path"] == "python"
    assert len(runs[0].fills) > 50
    for name in ("fills", "events", "orders", "order_seq", "marks", "series"):
        assert getattr(runs[0], name).tobytes() == getattr(runs[1], name).tobytes(), name
    assert runs[0].summary == pytest.approx(runs[1].summary, nan_ok=True)


@pytest.mark.parametrize("every,lat", [(1, (0, 0)), (1000, (0, 0)), (250, (5_000, 20_000))])
def test_njit_path_fed_in_slices_matches_the_python_path(every, lat):
    # every=1: one-message slices; every=1000: long slices that outgrow the scratch outputs
    f = uniform_flow(8_000, 3)
    runs = [backtest(f, QuoteStrategy(mm_quotes, [5, 20, 100], every=every), latency=lat,
                     trader=TRADER, fast=fast) for fast in (True, False)]
    assert len(runs[0].fills) > 0
    for name in ("fills", "events", "orders", "order_seq", "marks", "series"):
        assert getattr(runs[0], name).tobytes() == getattr(runs[1], name).tobytes(), name


def test_summary_arithmetic_on_a_hand_made_case():
    from exchange import FILL_DTYPE
    from replay.backtest_core import MARK_DTYPE
    fills = np.zeros(2, FILL_DTYPE)
    fills[0] = (1, 100, 1, 100, 10, ID_BASE, 7, 0, TRADER, 1, Side.SELL)   # bought passively
    fills[1] = (2, 200, 2, 103, 10, 8, ID_BASE + 1, 0, 2, TRADER, Side.SELL)   # sold as taker
    marks = np.array([(150, 101, 1, 103, 1), (250, 99, 1, 101, 1)], MARK_DTYPE)
    series = build_series(fills, marks, TRADER, 10 / 1e4)
    assert series["position"].tolist() == [10, 10, 0, 0]
    assert series["pnl"].tolist() == pytest.approx([-1.0, 19.0, 27.97, 27.97])
    s = summarize(np.zeros(0, ORDER_DTYPE), np.zeros(0, np.int64), fills,
                  np.zeros(0, dtype=[("event", "u1")]), series, TRADER, 10 / 1e4)
    assert (s["volume"], s["turnover"], s["maker_volume"], s["taker_volume"]) == (20, 2030, 10, 10)
    assert s["fees"] == pytest.approx(2.03) and s["pnl"] == pytest.approx(27.97)
    assert s["max_drawdown"] == 0.0
