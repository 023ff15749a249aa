"""Backtests through the phase engine (needs the issue-16 engine): a strategy sees the phases
and the indicative uncross, submits during a call, is refused what a call refuses, and is filled
by the uncross with ``Fill.auction`` set; the closing-auction example strategy on the
trading_day preset."""

from __future__ import annotations

import dataclasses

import numpy as np

from exsim.exchange.schema import AUCTION_SIDE, ORDER_DTYPE, Event, Kind, Phase, Reason, Side, Tif
from exsim.scenarios import load_scenario
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategy import Strategy
from exsim.replay.backtesting.strategies import ClosingAuctionJoiner, InventoryMarketMaker


def _phase(ts, phase, price=0):
    m = np.zeros(1, ORDER_DTYPE)
    m["ts"], m["kind"], m["phase"], m["price"] = ts, Kind.PHASE, phase, price
    return m


def _limit(ts, oid, side, price, qty):
    m = np.zeros(1, ORDER_DTYPE)
    m["ts"], m["order_id"], m["side"], m["price"], m["qty"], m["trader"] = ts, oid, side, price, qty, 1
    m["tif"] = Tif.GTC
    return m


# a pre-open call that uncrosses 4 @ 99, then a closing call with 6 @ 99 and 5 @ 100 offered
FLOW = np.concatenate([
    _phase(10, Phase.PRE_OPEN, 100), _limit(20, 1, Side.SELL, 99, 10), _limit(30, 2, Side.BUY, 101, 4),
    _phase(40, Phase.OPENING_AUCTION), _phase(50, Phase.PRE_CLOSE), _limit(60, 3, Side.SELL, 100, 5),
    _phase(200, Phase.CLOSING_AUCTION)])


class Watcher(ClosingAuctionJoiner):
    """The joiner, recording what it saw at each symbol event and every fill and report."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen, self.fills, self.reports = [], [], []

    def on_phase(self, ctx, event):
        self.seen.append((int(event["event"]), int(event["phase"]), ctx.phase(), ctx.indicative()))
        super().on_phase(ctx, event)
        if int(event["event"]) == Event.PHASE and int(event["phase"]) == Phase.PRE_CLOSE:
            ctx.buy(101, 1, tif="ioc")          # refused in a call

    def on_fill(self, ctx, fill):
        self.fills.append(fill)

    def on_order(self, ctx, event):
        self.reports.append((int(event["event"]), int(event["reason"])))


def test_a_strategy_joins_the_closing_call_and_is_filled_by_the_uncross():
    s = Watcher(side="buy", qty=3)
    res = backtest(FLOW, s)
    kinds = [(e, p) for e, p, _, _ in s.seen]
    assert (Event.UNCROSS, Phase.OPENING_AUCTION) in kinds
    assert kinds.index((Event.PHASE, Phase.PRE_CLOSE)) < kinds.index((Event.UNCROSS, Phase.CLOSING_AUCTION))
    at_pre_close = [ph for e, p, ph, _ in s.seen if (e, p) == (Event.PHASE, Phase.PRE_CLOSE)]
    assert at_pre_close == [Phase.PRE_CLOSE]
    # its market buy of 3 against 6 @ 99: the indicative it then sees
    assert any(e == Event.INDICATIVE and ind == (99, 3, -3) for e, _, _, ind in s.seen)
    assert (Event.REJECTED, Reason.NOT_IN_CALL) in s.reports
    (fill,) = s.fills
    assert fill.auction and not fill.aggressor and (fill.price, fill.qty) == (99, 3)
    assert res.fills["aggressor_side"].tolist() == [AUCTION_SIDE]
    assert res.phases["event"].tolist().count(Event.UNCROSS) == 2
    stats = res.report().stats
    assert (stats["auction_fills"], stats["auction_volume"]) == (1, 3)
    assert res.summary["final_position"] == 3


class Quoting(InventoryMarketMaker):
    """The market maker, stopped at every symbol event (it overrides on_phase)."""

    def on_phase(self, ctx, event):
        pass


def test_stopping_at_symbol_events_changes_nothing_else():
    plain = backtest(FLOW, InventoryMarketMaker(size=2, max_position=10, every=1))
    stopped = backtest(FLOW, Quoting(size=2, max_position=10, every=1))
    assert stopped.digest() == plain.digest() and len(plain.phases) > 0


class Silent(Strategy):
    pass


def test_without_on_phase_the_phase_events_are_still_recorded():
    res = backtest(FLOW, Silent())
    assert Event.UNCROSS in res.phases["event"].tolist() and len(res.fills) == 0


def test_the_closing_auction_joiner_on_the_trading_day_preset():
    sc = load_scenario("trading_day")
    sc = dataclasses.replace(sc, params={**sc.params, "n": 3_000, "call_messages": 120})
    res = backtest(sc, ClosingAuctionJoiner(side="buy", qty=50))
    auction = res.auction_fills()
    assert auction["qty"].sum() == 50 and np.all(auction["ts"] == 63_300_000_000_000)
    assert res.report().stats["auction_fills"] == len(auction) >= 1
