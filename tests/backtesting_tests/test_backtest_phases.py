"""Auction fills in backtest results without the phase engine: fills an uncross made
(aggressor_side AUCTION_SIDE) are shown apart by the report (count, volume, PnL contribution),
the plot and ``Fill.auction``; symbol events among a result's events go to ``phases``; a result
without either is what it was before (same summary keys, same digest inputs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from exsim.exchange.schema import AUCTION_SIDE, EVENT_DTYPE, FILL_DTYPE, ORDER_DTYPE, Event, Phase

from exsim.replay.backtesting.kernels import MARK_DTYPE
from exsim.replay.backtesting.money import Money
from exsim.replay.backtesting.report import auction_summary
from exsim.replay.backtesting.result import build_result
from exsim.replay.backtesting.strategy import Context, Strategy
from exsim.replay.backtesting.strategies import ClosingAuctionJoiner

ME = 7
USD = Money("USD", 0.5, -1e-4, 3e-4)


def _fills():
    """Buys 4 @ 100 in the opening uncross (ts 30), sells 1 @ 103 aggressing (ts 50), sells 3
    @ 101 in the closing uncross (ts 90)."""
    f = np.zeros(3, FILL_DTYPE)
    f["seq"], f["ts"], f["trade_id"] = [3, 5, 9], [30, 50, 90], [1, 2, 3]
    f["price"], f["qty"] = [100, 103, 101], [4, 1, 3]
    f["buy_trader"], f["sell_trader"] = [ME, 1, 2], [2, ME, ME]
    f["aggressor_side"] = [AUCTION_SIDE, 1, AUCTION_SIDE]
    return f


def _result(fills, events=np.zeros(0, EVENT_DTYPE), marks=None):
    empty = np.zeros(0, np.int64)
    if marks is None:
        marks = np.zeros(1, MARK_DTYPE)
        marks[0] = (95, 101, 5, 103, 5)     # last mark: mid 102
    return build_result(np.zeros(0, ORDER_DTYPE), empty, empty, fills, events, marks, ME, USD,
                        {"trader": ME, "symbol": 0, "symbol_name": "XETR"})


def test_the_report_shows_auction_fills_apart_with_their_pnl_contribution():
    res = _result(_fills())
    rep = res.report(bar_ns=100)
    assert rep.trades["auction"].tolist() == [True, False, True]
    s = rep.stats
    assert (s["auction_fills"], s["auction_volume"]) == (2, 7)
    # +4 @ 100 and -3 @ 101 marked at the last mid 102, x tick_value 0.5, minus maker fees
    # (an auction fill pays the maker rate: -1 bp of 200 and of 151.5)
    want = (4 * (102 - 100) - 3 * (102 - 101)) * 0.5 - (-1e-4 * 200 - 1e-4 * 151.5)
    assert s["auction_pnl"] == pytest.approx(want)
    assert auction_summary(res) == {k: s[k] for k in ("auction_fills", "auction_volume",
                                                       "auction_pnl")}
    assert len(res.auction_fills()) == 2 and res.summary["taker_volume"] == 1
    text = rep.text()
    assert "auction_pnl (USD)" in text and text.count(" auction ") == 2
    assert [t["liquidity"] for t in rep.to_json()["trades"]] == ["auction", "taker", "auction"]


def test_without_auction_fills_the_auction_stats_are_zero():
    f = _fills()
    f["aggressor_side"] = [1, 1, 0]
    rep = _result(f).report(bar_ns=100)
    assert (rep.stats["auction_fills"], rep.stats["auction_volume"], rep.stats["auction_pnl"]) \
        == (0, 0, 0.0)
    assert not rep.trades["auction"].any()


def test_symbol_events_go_to_phases_and_into_the_digest_only_when_present():
    ev = np.zeros(3, EVENT_DTYPE)
    ev["order_id"] = [0, 1 << 62, 0]
    ev["event"] = [Event.PHASE, Event.ACCEPTED, Event.UNCROSS]
    ev["phase"] = [Phase.PRE_CLOSE, Phase.PRE_CLOSE, Phase.CLOSING_AUCTION]
    res = _result(_fills(), ev)
    assert res.phases["event"].tolist() == [Event.PHASE, Event.UNCROSS]
    assert res.events["order_id"].tolist() == [1 << 62]
    plain = _result(_fills(), ev[1:2])
    assert len(plain.phases) == 0
    assert plain.digest() != res.digest()
    assert json.dumps(plain.summary) == json.dumps(res.summary)   # NaN == NaN as text


def test_the_plot_marks_auction_trades_with_their_own_marker(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    labels = []
    real = matplotlib.axes.Axes.scatter

    def spy(self, *a, **kw):
        labels.append((kw.get("label"), kw.get("marker"), len(a[0])))
        return real(self, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", spy)
    path = _result(_fills()).plot(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0 and path.endswith("p.png")
    assert ("auction", "D", 2) in labels
    assert ("sell", "v", 1) in labels and ("buy", "^", 0) in labels   # auction fills not twice


class _Driver:
    symbol = 0

    def phase_of(self, symbol):
        return Phase.PRE_CLOSE

    def indicative_of(self, symbol):
        return (101, 7, -2)


def test_a_fill_made_by_an_uncross_is_marked_auction():
    ctx = Context(_Driver(), 1 << 62, USD.terms())
    f = _fills()
    rows = f.tolist()
    got = [fill for row in rows for fill in ctx._apply_fill(row, ME, 0, True)]
    assert [g.auction for g in got] == [True, False, True]
    assert [g.aggressor for g in got] == [False, True, False]
    assert ctx.position == 4 - 1 - 3
    assert ctx.phase() == Phase.PRE_CLOSE and ctx.indicative() == (101, 7, -2)


def test_strategy_on_phase_is_a_no_op_by_default_and_the_joiner_checks_its_arguments():
    assert Strategy().on_phase(None, None) is None
    from exsim.exchange.errors import UsageError
    for kw in ({"side": "long"}, {"qty": 0}, {"limit_ticks": -1}):
        with pytest.raises(UsageError):
            ClosingAuctionJoiner(**kw)


class _Ctx:
    def __init__(self, indicative=(0, 0, 0)):
        self.sent = []
        self._ind = indicative

    def buy(self, price, qty, **kw):
        self.sent.append(("buy", price, qty, kw))
        return 1

    def sell(self, price, qty, **kw):
        self.sent.append(("sell", price, qty, kw))
        return 2

    def indicative(self):
        return self._ind


def _event(kind, phase, price=0, qty=0, surplus=0, ts=5):
    e = np.zeros(1, EVENT_DTYPE)[0]
    e["event"], e["phase"], e["price"], e["filled_qty"], e["leaves_qty"], e["ts"] = \
        kind, phase, price, qty, surplus, ts
    return e


def test_the_joiner_sends_one_order_when_the_closing_call_starts():
    s, ctx = ClosingAuctionJoiner(side="sell", qty=30), _Ctx()
    s.on_phase(ctx, _event(Event.PHASE, Phase.PRE_OPEN))
    assert ctx.sent == []
    s.on_phase(ctx, _event(Event.PHASE, Phase.PRE_CLOSE))
    s.on_phase(ctx, _event(Event.PHASE, Phase.PRE_CLOSE))
    assert ctx.sent == [("sell", 0, 30, {"market": True})]
    s.on_phase(ctx, _event(Event.INDICATIVE, Phase.PRE_CLOSE, 101, 40, -3, ts=6))
    s.on_phase(ctx, _event(Event.UNCROSS, Phase.CLOSING_AUCTION, 101, 40, -3, ts=7))
    assert s.indicatives == [(6, 101, 40, -3)] and s.uncrosses == [(7, 101, 40, -3)]
    lim, ctx2 = ClosingAuctionJoiner(side="buy", qty=5, limit_ticks=2), _Ctx((250, 9, 1))
    lim.on_phase(ctx2, _event(Event.PHASE, Phase.PRE_CLOSE))
    assert ctx2.sent == [("buy", 252, 5, {})]
