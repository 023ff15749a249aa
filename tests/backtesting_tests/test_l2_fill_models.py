"""The four hand-made sequences every L2 fill model answers (docs/backtesting.md, "Fill models"):
trades at our price, a trade through our price, the book moving through our bid with no trade,
a level cancelled then traded; plus a trade and the diff that reports it, counted once."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Side
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.l2queue import L2Flow
from exsim.replay.backtesting.queue_models import ConservativeQueue, ProportionalQueue
from exsim.replay.backtesting.strategy import Strategy

BUY, SELL = Side.BUY, Side.SELL
BOOK = [(1, 1, BUY, 99, 7), (1, 1, SELL, 101, 5)]     # (seq, ts, side, price, qty)

MODELS = {"conservative": ConservativeQueue(), "proportional": ProportionalQueue(),
          "cross_fills": ConservativeQueue(cross_fills=True),
          "whole_on_trade_through": ConservativeQueue(whole_on_trade_through=True)}

# name -> (L2 rows, trades (ts, aggressor, price, qty), our order (side, price, qty),
#          fills (qty) per model)
SEQUENCES = {
    # buyers lift 101 twice, 3 lots each: 5 ahead of our 4, so 1 lot fills on the second
    "trades_at_our_price": (BOOK, [(2, BUY, 101, 3), (3, BUY, 101, 3)], (SELL, 101, 4),
                            {"conservative": [1], "proportional": [1], "cross_fills": [1],
                             "whole_on_trade_through": [1]}),
    # a buyer pays 102 for 2 lots: the 101 level was exhausted, our ask traded first
    "trade_through_our_price": (BOOK, [(2, BUY, 102, 2)], (SELL, 101, 4),
                                {"conservative": [2], "proportional": [2], "cross_fills": [2],
                                 "whole_on_trade_through": [4]}),
    # the asks move down to 98 (3 lots) with no trade: our bid at 99 is crossed
    "book_moves_through_our_bid": (BOOK + [(2, 2, SELL, 101, 0), (2, 2, SELL, 98, 3)], [],
                                   (BUY, 99, 4),
                                   {"conservative": [], "proportional": [], "cross_fills": [3],
                                    "whole_on_trade_through": []}),
    # 5 join behind us (10), then 6 are cancelled (4 left), then a buyer takes 3
    "level_cancelled_then_traded": (BOOK + [(2, 2, SELL, 101, 10), (3, 3, SELL, 101, 4)],
                                    [(4, BUY, 101, 3)], (SELL, 101, 4),
                                    {"conservative": [], "proportional": [1], "cross_fills": [],
                                     "whole_on_trade_through": []}),
}


def _flow(rows, trades):
    book = np.zeros(len(rows), L2_DTYPE)
    for k, (seq, ts, side, price, qty) in enumerate(rows):
        book[k]["seq"], book[k]["ts"], book[k]["side"] = seq, ts, side
        book[k]["price"], book[k]["qty"] = price, qty
    tr = np.zeros(len(trades), FILL_DTYPE)
    for k, (ts, side, price, qty) in enumerate(trades):
        tr[k]["ts"], tr[k]["aggressor_side"], tr[k]["price"], tr[k]["qty"] = ts, side, price, qty
        tr[k]["trade_id"] = k + 1
    return L2Flow(book, tr)


class Post(Strategy):
    def __init__(self, side, price, qty):
        self.order = (side, price, qty)

    def on_start(self, ctx):
        side, price, qty = self.order
        (ctx.buy if side == BUY else ctx.sell)(price, qty)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("sequence", sorted(SEQUENCES))
def test_each_fill_model_gives_the_documented_fills(sequence, model):
    rows, trades, order, want = SEQUENCES[sequence]
    res = backtest(_flow(rows, trades), Post(*order), queue_model=MODELS[model])
    assert res.fills["qty"].tolist() == want[model]
    # every fill is at our price and we are the maker
    assert set(res.fills["price"].tolist()) <= {order[1]}
    assert res.summary["taker_volume"] == 0


def test_a_trade_and_the_diff_that_reports_it_move_the_queue_once():
    # 10 ahead; a buyer takes 4 (6 ahead), the diff then shows the level at 6: that decrease is
    # the trade, not cancellations, so the proportional model must not move us again
    rows = [(1, 1, BUY, 99, 7), (1, 1, SELL, 101, 10), (2, 3, SELL, 101, 6)]
    trades = [(2, BUY, 101, 4), (4, BUY, 101, 7)]
    for model in ("proportional", "conservative"):
        res = backtest(_flow(rows, trades), Post(SELL, 101, 4), queue_model=model)
        assert res.fills["qty"].tolist() == [1], model


def test_fill_model_options_are_described_and_checked():
    m = ProportionalQueue(cross_fills=True)
    res = backtest(_flow(BOOK, []), Post(SELL, 101, 1), queue_model=m)
    assert res.meta["queue_model"] == "proportional" and res.meta["cross_fills"] is True
    assert ConservativeQueue().describe() == {"queue_model": "conservative"}
    with pytest.raises(UsageError, match="cross_fills"):
        ConservativeQueue(cross_fills=1)
