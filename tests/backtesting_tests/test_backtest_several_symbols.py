"""Several instruments in one backtest (``backtest(symbol=[...])``, L3 flow): the strategy sees
both books and trades both from one account; fills go to the right symbol, positions are per
symbol, cash and fees are one account's in each symbol's terms, and the account's PnL is the sum
of the symbols'."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import ORDER_DTYPE, Side
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import Kind, OrderType, Tif
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategies import mm_quotes
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy

from test_l2_fill_models import BOOK as L2_BOOK, _flow as l2_flow

TRADER = 4242
A, B = 0, 1
SPECS = [{"name": "AAA", "tick_size": 1, "currency": "USD", "tick_value": 0.01, "maker_bps": 1.0},
         {"name": "BBB", "tick_size": 1, "currency": "USD", "tick_value": 0.5, "maker_bps": 2.0}]


def _flow(*rows):
    """rows: (ts, order_id, symbol, side, price, qty) NEW GTC limit orders of trader 1."""
    out = np.zeros(len(rows), ORDER_DTYPE)
    for k, (ts, oid, sym, side, price, qty) in enumerate(rows):
        out[k] = (ts, oid, price, qty, sym, 1, Kind.NEW, OrderType.LIMIT, Tif.GTC, 0, side, 0, 0,
                  0, 0, 0)
    return out


# both books quoted at t=1; at t=20 a buyer lifts AAA at 101 (our ask), at t=30 a seller hits
# BBB at 199 (our bid); a quiet message at t=40
FLOW = _flow((1, 1, A, Side.BUY, 99, 1), (1, 2, A, Side.SELL, 103, 1),
             (1, 3, B, Side.BUY, 198, 1), (1, 4, B, Side.SELL, 202, 1),
             (20, 5, A, Side.BUY, 101, 2), (30, 6, B, Side.SELL, 199, 3),
             (40, 7, A, Side.BUY, 90, 1))


class Legs(Strategy):
    """At the first wake-up: sends each leg (side, price, qty, symbol); records at every wake-up
    what it sees (ts, every book's (bid, ask), the first's bid, positions, position, cash, fees)."""
    every = 1

    def __init__(self, *legs):
        self.legs, self.seen = legs, []

    def on_book(self, ctx, book):
        if not self.seen:
            for side, price, qty, symbol in self.legs:
                (ctx.sell if side == Side.SELL else ctx.buy)(price, qty, symbol=symbol)
        self.seen.append((book.ts, {n: (v.bid, v.ask) for n, v in ctx.books.items()}, book.bid,
                          dict(ctx.positions), ctx.position, ctx.cash, ctx.fees))


def Pair():   # noqa: N802 (a strategy's name)
    """Asks 2 AAA at 101 and bids 3 BBB (by id) at 199."""
    return Legs((Side.SELL, 101, 2, "AAA"), (Side.BUY, 199, 3, B))


def _run(strategy=None, **kw):
    return backtest(FLOW, strategy or Pair(), symbol=["AAA", "BBB"], symbols=SPECS,
                    trader=TRADER, **kw)


def test_two_symbols_one_account_fills_routed_and_pnl_the_sum():
    s = Pair()
    r = _run(s)
    # the orders went to their symbols, and each fill to its own
    assert r.orders["symbol"].tolist() == [A, B]
    assert [(int(f["symbol"]), int(f["price"]), int(f["qty"])) for f in r.fills] == \
        [(A, 101, 2), (B, 199, 3)]
    assert set(r.by_symbol) == {"AAA", "BBB"}
    assert r.by_symbol["AAA"].fills["symbol"].tolist() == [A]
    assert r.by_symbol["BBB"].fills["symbol"].tolist() == [B]
    # one account: positions per symbol, cash and fees in each symbol's terms
    cash = 2 * 101 * 0.01 - 3 * 199 * 0.5
    fees = 2 * 101 * 0.01 * 1e-4 + 3 * 199 * 0.5 * 2e-4
    assert r.summary["positions"] == {"AAA": -2, "BBB": 3}
    assert r.summary["final_position"] == -2          # the first symbol's, as ctx.position
    assert r.summary["fees"] == pytest.approx(fees)
    assert r.series["cash"][-1] == pytest.approx(cash)
    assert r.summary["pnl"] == pytest.approx(sum(x.summary["pnl"] for x in r.by_symbol.values()))
    assert r.summary["n_fills"] == 2 and r.meta["symbols"] == ["AAA", "BBB"]
    # marked at each book's last mid: AAA (99+103)/2, BBB (198+202)/2
    mark = -2 * 101 * 0.01 + 3 * 200 * 0.5
    assert r.summary["pnl"] == pytest.approx(cash + mark - fees)
    # what the strategy saw: both books at every wake-up, then its fills in the account
    _, books, bid, positions, position, ctx_cash, ctx_fees = s.seen[-1]
    assert books == {"AAA": (99, 103), "BBB": (198, 202)} and bid == 99
    assert positions == {"AAA": -2, "BBB": 3} and position == -2
    assert ctx_cash == pytest.approx(cash) and ctx_fees == pytest.approx(fees)
    # the first wake-up comes after the first message (AAA's bid); by the fourth (after BBB's
    # ask) our own quotes, in at t=1, are each book's best
    assert s.seen[0][1] == {"AAA": (99, 0), "BBB": (0, 0)}
    assert s.seen[3][1] == {"AAA": (99, 101), "BBB": (199, 202)}


def test_one_symbol_in_a_list_is_the_same_backtest_as_naming_it():
    listed = backtest(FLOW, Legs((Side.SELL, 101, 2, None)), symbol=["AAA"], symbols=SPECS,
                      trader=TRADER)
    single = backtest(FLOW, Legs((Side.SELL, 101, 2, None)), symbol="AAA", symbols=SPECS,
                      trader=TRADER)
    assert listed.digest() == single.digest() and len(single.fills) == 1


def test_an_untraded_symbol_is_refused_at_the_call():
    class Stray(Strategy):
        every = 1

        def on_book(self, ctx, book):
            ctx.buy(99, 1, symbol="BBB")

    with pytest.raises(UsageError, match="not traded"):
        backtest(FLOW, Stray(), symbol="AAA", symbols=SPECS, trader=TRADER)


@pytest.mark.parametrize("kw,match", [
    ({"symbol": []}, "at least one"),
    ({"symbol": ["AAA", 0]}, "twice"),
    ({"symbol": ["AAA", "ZZZ"]}, "ZZZ"),
    ({"symbol": ["AAA", "BBB"], "fast": True}, "Python path"),
    ({"symbol": ["AAA", "BBB"], "symbols": [SPECS[0], {"name": "BBB", "tick_size": 1}]},
     "one currency"),
])
def test_several_symbols_bad_arguments_are_usage_errors(kw, match):
    args = {"symbols": SPECS, **kw}
    strategy = QuoteStrategy(mm_quotes, [1, 1, 5], every=1) if kw.get("fast") else Pair()
    with pytest.raises(UsageError, match=match):
        backtest(FLOW, strategy, trader=TRADER, **args)


def test_a_symbol_list_on_one_l2_flow_is_refused_clearly():
    with pytest.raises(UsageError, match="list of flows"):
        backtest(l2_flow(L2_BOOK, []), Pair(), symbol=["BTCUSDT", "ETHUSDT"])


# -- several L2 flows (a spot and a future, say), one symbol each ---------------------------

def _l2(rows, trades, name):
    flow = l2_flow(rows, trades)
    flow.name = name
    return flow


# spot: bid 99 x7, ask 101 x5 at ts 1; a buyer pays 102 for 2 at ts 5 (through our ask at 101)
SPOT = [(1, 1, Side.BUY, 99, 7), (1, 1, Side.SELL, 101, 5)]
# future: bid 199 x4, ask 203 x4 at ts 2; a seller hits 198 for 3 at ts 7 (through our bid at 199)
FUT = [(1, 2, Side.BUY, 199, 4), (1, 2, Side.SELL, 203, 4), (2, 9, Side.BUY, 199, 4)]


def SpotFut():   # noqa: N802 (a strategy's name)
    """Asks 4 spot at 101 and bids 2 future at 199."""
    return Legs((Side.SELL, 101, 4, "SPOT"), (Side.BUY, 199, 2, "FUT"))


def _l2_run(**kw):
    s = SpotFut()
    flows = [_l2(SPOT, [(5, Side.BUY, 102, 2)], "SPOT"), _l2(FUT, [(7, Side.SELL, 198, 3)], "FUT")]
    return s, backtest(flows, s, **kw)


def test_two_l2_flows_one_account_fills_routed_and_pnl_the_sum():
    s, r = _l2_run(symbols=[{"name": "SPOT", "currency": "USD", "tick_value": 0.01},
                            {"name": "FUT", "currency": "USD", "tick_value": 0.1}])
    assert r.meta["symbols"] == ["SPOT", "FUT"] and r.meta["path"] == "python"
    assert r.orders["symbol"].tolist() == [0, 1]
    # the trade through 101 fills 2 of our ask (conservative), the one through 199 2 of our bid
    assert [(int(f["symbol"]), int(f["price"]), int(f["qty"])) for f in r.fills] == \
        [(0, 101, 2), (1, 199, 2)]
    assert r.summary["positions"] == {"SPOT": -2, "FUT": 2}
    assert r.series["cash"][-1] == pytest.approx(2 * 101 * 0.01 - 2 * 199 * 0.1)
    assert r.summary["pnl"] == pytest.approx(sum(x.summary["pnl"] for x in r.by_symbol.values()))
    # wake-ups after each message of the two flows merged by ts: spot snapshot (ts 1), future
    # snapshot (ts 2), spot trade (5), future trade (7), future diff (9)
    assert [seen[0] for seen in s.seen] == [1, 2, 5, 7, 9]
    assert s.seen[1][1] == {"SPOT": (99, 101), "FUT": (199, 203)}
    assert s.seen[-1][3] == {"SPOT": -2, "FUT": 2}
    assert all(len(x.marks) == 5 for x in r.by_symbol.values())


def test_several_l2_flows_refuse_what_they_cannot_run():
    flows = [_l2(SPOT, [], "SPOT"), _l2(FUT, [], "FUT")]
    with pytest.raises(UsageError, match="one symbol name"):
        backtest([_l2(SPOT, [], "X"), _l2(FUT, [], "X")], SpotFut())
    with pytest.raises(UsageError, match="Python path"):
        backtest(flows, SpotFut(), fast=True)
    with pytest.raises(UsageError, match="not L2-only"):
        backtest([flows[0], FLOW], SpotFut())
    with pytest.raises(UsageError, match="one currency"):
        backtest(flows, SpotFut(), symbols=[{"name": "SPOT", "currency": "USD"}, {"name": "FUT"}])
