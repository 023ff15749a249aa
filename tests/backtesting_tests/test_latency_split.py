"""Latency per direction and per command (``SplitLatency``): feed, order entry per command (NEW,
CANCEL, MODIFY) and response each shift what they should, on hand-made L3 and L2 sequences, on
the Python and njit paths, and the unsplit models keep their draws."""

from __future__ import annotations

import pytest

from conftest import resting_flow
from exsim.exchange import Side
from exsim.exchange.errors import UsageError
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.latency import (ConstantLatency, RandomLatency, RecordedLatency,
                                              SplitLatency, streams_of)
from exsim.replay.backtesting.strategies import mm_quotes
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy
from exsim.scenarios import uniform_flow

from test_backtest_l2_fast import _flow as l2_flow, _mm as l2_mm
from test_l2_fill_models import BOOK as L2_BOOK, _flow

TRADER = 4242


class PostThenCancel(Strategy):
    """At the start: sells 3 at 100 and at once cancels it (both sent at the same local time)."""

    def __init__(self, side=Side.SELL, price=100, qty=3):
        self.side, self.price, self.qty = side, price, qty

    def on_start(self, ctx):
        send = ctx.sell if self.side == Side.SELL else ctx.buy
        ctx.cancel(send(self.price, self.qty))


# a bid of 1 at 90 (t=10: the strategy starts there), then a buy of 3 at 100 (t=50)
CANCEL_RACE = resting_flow((10, 1, Side.BUY, 90, 1), (50, 2, Side.BUY, 100, 3))


@pytest.mark.parametrize("lat,arrivals,filled", [
    (ConstantLatency(0, 5), [15, 15], 0),            # the cancel lands at 15, before the buy
    (SplitLatency(0, 5, cancel=60), [15, 70], 3),    # the sell rests at 15, the cancel is late
    (SplitLatency(0, 60, new=5), [15, 70], 3),       # the same with NEW given its own
])
def test_a_cancel_with_a_larger_entry_latency_arrives_after_the_fill(lat, arrivals, filled):
    r = backtest(CANCEL_RACE, PostThenCancel(), latency=lat, trader=TRADER)
    assert r.orders["ts"].tolist() == arrivals
    assert int(r.fills["qty"].sum()) == filled
    if filled:   # resting, as the maker, when the buy comes
        assert r.fills["ts"].tolist() == [50] and r.summary["maker_volume"] == 3


class PostThenModify(Strategy):
    """At the start: sells 3 at 100, then moves it to 110 (sent at the same local time)."""

    def on_start(self, ctx):
        ctx.modify(ctx.sell(100, 3), 110, 3)


@pytest.mark.parametrize("modify_ns,filled", [(None, 0), (5, 0), (60, 3)])
def test_a_modify_with_a_larger_entry_latency_lands_after_the_fill(modify_ns, filled):
    r = backtest(CANCEL_RACE, PostThenModify(), trader=TRADER,
                 latency=SplitLatency(0, 5, modify=modify_ns))
    assert int(r.fills["qty"].sum()) == filled


class SeeBook(Strategy):
    """Records (local time, observation ts) of each wake-up."""
    every = 1

    def __init__(self):
        self.seen = []

    def on_book(self, ctx, book):
        self.seen.append((ctx.now, book.ts))


def test_the_feed_latency_is_when_a_wake_up_runs():
    s = SeeBook()
    backtest(CANCEL_RACE, s, latency=SplitLatency(feed=7, order=1000, response=3), trader=TRADER)
    assert s.seen == [(17, 10), (57, 50)]


class Rebuy(Strategy):
    """Sells 2 at 100 at the start; on each fill, bids the filled qty at 99 (when it learns of
    the fill: one response latency after it)."""

    def __init__(self):
        self.learnt = []

    def on_start(self, ctx):
        ctx.sell(100, 2)

    def on_fill(self, ctx, fill):
        self.learnt.append(ctx.now)
        if fill.side == Side.SELL:
            ctx.buy(99, fill.qty)


# an ask of 5 at 100 (t=10); a buy of 6 at 100 (t=40) takes it and 1 of the strategy's; a sell
# of 1 at 99 (t=50) meets the strategy's reaction resting if the reaction arrived before t=50
REACT = resting_flow((10, 1, Side.SELL, 100, 5), (40, 2, Side.BUY, 100, 6),
                     (50, 3, Side.SELL, 99, 1))


@pytest.mark.parametrize("response,second", [(0, (50, False)), (20, (65, True))])
def test_a_reaction_leaves_one_response_latency_after_the_fill(response, second):
    s = Rebuy()
    r = backtest(REACT, s, trader=TRADER, latency=SplitLatency(0, 5, response=response))
    assert s.learnt[0] == 40 + response
    assert r.orders["ts"].tolist() == [15, 40 + response + 5]
    # the reaction's bid at 99: resting when the sell at t=50 comes (maker), else it takes it
    buy = r.fills[r.fills["buy_trader"] == TRADER]
    assert [(int(buy["ts"][0]), bool(buy["aggressor_side"][0] == Side.BUY))] == [second]


class Watch(Strategy):
    """Sells 2 at 100 at the start; records (local time, position) at each wake-up."""
    every = 1

    def __init__(self):
        self.seen = []

    def on_start(self, ctx):
        ctx.sell(100, 2)

    def on_book(self, ctx, book):
        self.seen.append((ctx.now, ctx.position))


# REACT plus a quiet message at t=90: wake-ups at 10, 40, 50, 90
WATCH = resting_flow((10, 1, Side.SELL, 100, 5), (40, 2, Side.BUY, 100, 6),
                     (50, 3, Side.SELL, 99, 1), (90, 4, Side.SELL, 120, 1))


@pytest.mark.parametrize("lat,positions", [
    (ConstantLatency(0, 5), [0, -1, -1, -1]),                 # the fill at 40 is seen at 40
    (SplitLatency(0, 5, response=0), [0, -1, -1, -1]),
    (SplitLatency(0, 5, response=25), [0, 0, 0, -1]),         # seen at 65: not at 40 or 50
])
def test_a_wake_up_sees_a_fill_only_once_its_response_latency_has_passed(lat, positions):
    s = Watch()
    backtest(WATCH, s, latency=lat, trader=TRADER)
    assert [p for _, p in s.seen] == positions


def test_split_latency_on_l2_flow_a_late_cancel_misses_the_trade():
    # our ask of 4 at 101 behind 5; a buyer pays 102 for 2 lots at ts 5 (a trade through: 2 fill)
    flow = _flow(L2_BOOK, [(5, Side.BUY, 102, 2)])
    quick = backtest(flow, PostThenCancel(Side.SELL, 101, 4), latency=SplitLatency(0, 1))
    late = backtest(flow, PostThenCancel(Side.SELL, 101, 4), latency=SplitLatency(0, 1, cancel=10))
    assert quick.orders["ts"].tolist() == [2, 2] and len(quick.fills) == 0
    assert late.orders["ts"].tolist() == [2, 11] and late.fills["qty"].tolist() == [2]


SPLIT = SplitLatency(RandomLatency(5, 300, 0, 200, 0), 400,
                     new=RandomLatency(6, 0, 500, 0, 300), cancel=900,
                     modify=RecordedLatency({"ts": [0, 10**7], "feed_ns": [0, 0],
                                             "order_ns": [100, 2000]}))


def test_njit_and_python_paths_agree_with_a_latency_per_command():
    f = uniform_flow(20_000, 5)
    runs = [backtest(f, QuoteStrategy(mm_quotes, [5, 20, 100], every=37), latency=SPLIT,
                     trader=TRADER, fast=fast) for fast in (True, False)]
    assert [r.meta["path"] for r in runs] == ["njit", "python"]
    assert len(runs[0].fills) > 50
    for name in ("fills", "events", "orders", "order_seq", "marks"):
        assert getattr(runs[0], name).tobytes() == getattr(runs[1], name).tobytes(), name


def test_njit_and_python_paths_agree_on_l2_with_a_latency_per_command():
    # the flow's messages are 10 ns apart: latencies of a few ns
    lat = SplitLatency(RandomLatency(5, 3, 0, 2, 0), 4, new=RandomLatency(6, 0, 5, 0, 3),
                       cancel=9, modify=RecordedLatency({"ts": [0, 2000], "feed_ns": [0, 0],
                                                         "order_ns": [1, 20]}))
    runs = [backtest(l2_flow(), l2_mm(), latency=lat, fast=fast) for fast in (True, False)]
    assert [r.meta["path"] for r in runs] == ["njit", "python"]
    assert len(runs[0].orders) > 10 and len(runs[0].fills) > 0
    for name in ("fills", "events", "orders", "order_seq", "marks"):
        assert getattr(runs[0], name).tobytes() == getattr(runs[1], name).tobytes(), name


def test_a_response_latency_of_its_own_takes_the_python_path():
    f = uniform_flow(2_000, 5)
    lat = SplitLatency(100, 100, response=50)
    r = backtest(f, QuoteStrategy(mm_quotes, [5, 20, 100], every=37), latency=lat, trader=TRADER)
    assert r.meta["path"] == "python" and r.meta["latency"]["response"] == 50
    with pytest.raises(UsageError, match="response latency"):
        backtest(f, QuoteStrategy(mm_quotes, [5, 20, 100], every=37), latency=lat,
                 trader=TRADER, fast=True)


def test_unsplit_streams_share_one_sampler_so_the_draws_do_not_change():
    lat = streams_of(RandomLatency(3, 10, 20, 5, 5))
    assert lat.response is lat.feed and lat.entry[0] is lat.entry[1] is lat.entry[2]
    assert not lat.split_response
    split = streams_of(SplitLatency(1, 2, cancel=3))
    assert split.response is split.feed and split.entry[0] is split.entry[2]
    assert [s.draw(0) for s in split.entry] == [2, 3, 2]


@pytest.mark.parametrize("bad", [-1, 1.5, "5", True, (1, 2)])
def test_split_latency_refuses_a_bad_part(bad):
    with pytest.raises(UsageError):
        SplitLatency(0, 0, cancel=bad)
