"""The compiled L2 loops: a QuoteStrategy runs whole in numba on L2 flow (fast=True) and gives
the same bytes as on the Python path; Python strategies run between wake-ups in numba."""

from __future__ import annotations

import numpy as np

from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Side
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.l2queue import L2Flow
from exsim.replay.backtesting.latency import RandomLatency
from exsim.replay.backtesting.strategies import mm_quotes
from exsim.replay.backtesting.strategy import QuoteStrategy


def _flow():
    """A seeded book around 1,000 moving by diffs of two rows, with trades on both sides."""
    rng = np.random.default_rng(5)
    rows, trades = [], []
    mid = 1000
    for k in range(1, 400):
        mid += int(rng.integers(-1, 2))
        rows += [(k, 10 * k, Side.BUY, mid - 1, int(rng.integers(1, 20))),
                 (k, 10 * k, Side.SELL, mid + 1, int(rng.integers(1, 20)))]
        if k % 3 == 0:
            side = int(rng.integers(0, 2))
            trades.append((10 * k + 5, side, mid + 1 if side == 0 else mid - 1,
                           int(rng.integers(1, 15))))
    book = np.zeros(len(rows), L2_DTYPE)
    for j, (seq, ts, side, price, qty) in enumerate(rows):
        book[j]["seq"], book[j]["ts"], book[j]["side"], book[j]["price"], book[j]["qty"] = \
            seq, ts, side, price, qty
    tr = np.zeros(len(trades), FILL_DTYPE)
    for j, (ts, side, price, qty) in enumerate(trades):
        tr[j]["ts"], tr[j]["aggressor_side"], tr[j]["price"], tr[j]["qty"] = ts, side, price, qty
        tr[j]["trade_id"] = j + 1
    return L2Flow(book, tr)


def _mm(every=7):
    return QuoteStrategy(mm_quotes, [3, 5, 12], every=every)


def test_njit_and_python_paths_give_the_same_bytes_on_l2():
    for latency in (None, (3, 4), RandomLatency(9, 2, 3, 5, 7)):
        a = backtest(_flow(), _mm(), latency=latency, fast=True)
        b = backtest(_flow(), _mm(), latency=latency, fast=False)
        assert a.meta["path"] == "njit" and b.meta["path"] == "python"
        assert a.summary["n_fills"] > 0
        assert a.digest() == b.digest()


def test_a_quote_strategy_defaults_to_the_njit_path_on_l2():
    assert backtest(_flow(), _mm()).meta["path"] == "njit"


def test_wake_ups_are_at_message_ends_on_the_njit_path():
    res = backtest(_flow(), _mm(every=1), fast=True)
    # one wake-up per message: 399 diffs of two rows and 133 trades (not 798 rows + 133)
    assert len(res.marks) == 399 + 133


class _CountFills(QuoteStrategy):
    """The quote strategy with an on_fill: the driver then stops after every fill."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen = []

    def on_fill(self, ctx, fill):
        self.seen.append((fill.ts, fill.qty))


def test_a_strategy_reacting_to_fills_gets_each_one_and_the_same_bytes():
    plain = backtest(_flow(), _mm(), latency=(3, 4), fast=False)
    s = _CountFills(mm_quotes, [3, 5, 12], every=7)
    react = backtest(_flow(), s, latency=(3, 4))
    assert react.digest() == plain.digest()
    assert s.seen == list(zip(react.fills["ts"].tolist(), react.fills["qty"].tolist()))


def test_timers_fire_on_l2_flow_between_whole_messages():
    from exsim.replay.backtesting.strategy import Strategy

    class Tick(Strategy):
        timer_ns = 100

        def __init__(self):
            self.seen = []

        def on_timer(self, ctx, ts):
            self.seen.append((ts, ctx.book.ts))

    t = Tick()
    res = backtest(_flow(), t, latency=(5, 0), progress=None)
    # every 100 ns of local time from the first event (ts 10) to the last (3,995)
    assert [s[0] for s in t.seen] == list(range(110, 3_991, 100))
    assert all(local - 5 >= obs for local, obs in t.seen) and len(res.marks) == len(t.seen)


def test_a_quote_strategy_result_is_labelled_with_its_quote_function():
    # issue 40 item 5: not "replay.backtesting.strategy:QuoteStrategy" for every quote function
    for fast in (True, False):
        res = backtest(_flow(), _mm(), fast=fast)
        assert res.meta["strategy"] == "exsim.replay.backtesting.strategies.market_maker:mm_quotes"
        assert "mm_quotes" in repr(res)
