"""L2 backtests see the book only between whole market messages: ``every`` counts messages (a
depth diff, a trade), never the level rows inside a diff."""

from __future__ import annotations

import numpy as np

from conftest import shared_sample
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Side
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.l2queue import L2Flow
from exsim.replay.backtesting.strategy import Strategy


class Watch(Strategy):
    """Records (ts, bid, ask) at each wake-up."""

    def __init__(self, every):
        self.every = every
        self.seen = []

    def on_book(self, ctx, book):
        self.seen.append((book.ts, book.bid, book.ask))


def _l2(*rows):
    out = np.zeros(len(rows), L2_DTYPE)
    for k, (seq, ts, side, price, qty) in enumerate(rows):
        out[k]["seq"], out[k]["ts"], out[k]["side"] = seq, ts, side
        out[k]["price"], out[k]["qty"] = price, qty
    return out


def test_every_counts_whole_diffs_not_their_rows():
    # update 1: the book 99 / 101; update 2 moves both sides up in one diff of four rows
    book = _l2((1, 1, Side.BUY, 99, 5), (1, 1, Side.SELL, 101, 5),
               (2, 2, Side.SELL, 101, 0), (2, 2, Side.SELL, 103, 5),
               (2, 2, Side.BUY, 99, 0), (2, 2, Side.BUY, 102, 5))
    w = Watch(every=1)
    backtest(L2Flow(book, np.zeros(0, FILL_DTYPE)), w)
    assert w.seen == [(1, 99, 101), (2, 102, 103)]


def test_binance_sample_no_wake_up_sees_a_crossed_book():
    from exsim.scenarios.data import BINANCE_BTCUSDT
    w = Watch(every=1)
    res = backtest(str(shared_sample(BINANCE_BTCUSDT)), w)
    crossed = [s for s in w.seen if s[1] and s[2] and s[1] >= s[2]]
    assert crossed == []
    # one wake-up per message: the snapshot, 3,449 applied diffs and 9,757 trades
    assert len(w.seen) == 1 + 3_449 + 9_757 == len(res.marks)


def test_a_flow_is_prepared_once_per_content():
    from exsim.replay.backtesting.l2queue import prepare
    book = _l2((1, 1, Side.BUY, 99, 5), (1, 1, Side.SELL, 101, 5), (2, 2, Side.SELL, 101, 3))
    flow = L2Flow(book, np.zeros(0, FILL_DTYPE))
    p = prepare(flow)
    assert prepare(L2Flow(book.copy(), np.zeros(0, FILL_DTYPE))) is p     # same content
    assert p.ends.tolist() == [2, 3] and p.px.tolist() == [99, 101]
    book["qty"][2] = 4
    assert prepare(flow) is not p                                      # changed content
    a, b = Watch(every=1), Watch(every=1)
    assert backtest(flow, a).digest() == backtest(flow, b).digest() and a.seen == b.seen
