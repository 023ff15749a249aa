"""Backtest driver: queue position is earned, latency shifts fills, runs are deterministic, the
njit and Python paths agree, the summary adds up, runs journal and plot."""

import numpy as np
import pytest

from conftest import resting_flow
from exsim.exchange import ORDER_DTYPE, Side
from exsim.replay.backtesting.driver import ID_BASE, backtest
from exsim.replay.backtesting.money import Money
from exsim.replay.backtesting.result import build_series, summarize
from exsim.replay.backtesting.latency import ConstantLatency, RandomLatency, RecordedLatency
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy
from exsim.scenarios import uniform_flow
from exsim.replay.backtesting.strategies import InventoryMarketMaker, mm_quotes

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
    from exsim.exchange import FILL_DTYPE
    from exsim.replay.backtesting.kernels import MARK_DTYPE
    fills = np.zeros(2, FILL_DTYPE)
    fills[0] = (1, 100, 1, 100, 10, ID_BASE, 7, 0, TRADER, 1, Side.SELL)   # bought passively
    fills[1] = (2, 200, 2, 103, 10, 8, ID_BASE + 1, 0, 2, TRADER, Side.SELL)   # sold as taker
    marks = np.array([(150, 101, 1, 103, 1), (250, 99, 1, 101, 1)], MARK_DTYPE)
    ten_bps = Money(maker_rate=10 / 1e4, taker_rate=10 / 1e4)   # ticks x lots, one rate
    series = build_series(fills, marks, TRADER, ten_bps)
    assert series["position"].tolist() == [10, 10, 0, 0]
    assert series["pnl"].tolist() == pytest.approx([-1.0, 19.0, 27.97, 27.97])
    s = summarize(np.zeros(0, ORDER_DTYPE), np.zeros(0, np.int64), fills,
                  np.zeros(0, dtype=[("event", "u1")]), series, TRADER, ten_bps)
    assert (s["volume"], s["turnover"], s["maker_volume"], s["taker_volume"]) == (20, 2030, 10, 10)
    assert s["fees"] == pytest.approx(2.03) and s["pnl"] == pytest.approx(27.97)
    assert s["max_drawdown"] == 0.0


class Rebuy(Strategy):
    """Sells 2 at 100 at the start; on each fill, bids the filled qty at 99."""

    def on_start(self, ctx):
        ctx.sell(100, 2)

    def on_fill(self, ctx, fill):
        if fill.side == Side.SELL:
            ctx.buy(99, fill.qty)


# an ask of 5 at 100 (t=10); a buy of 6 at 100 (t=40) takes it and 1 of the strategy's; a sell
# of 1 at 99 (t=50) meets the strategy's reaction (a bid at 99) resting if the reaction arrived
# before t=50, else the reaction takes it
REACT = resting_flow((10, 1, Side.SELL, 100, 5), (40, 2, Side.BUY, 100, 6),
                     (50, 3, Side.SELL, 99, 1))


@pytest.mark.parametrize("order_ns,second", [(5, (50, 99, False)), (15, (55, 99, True))])
def test_a_reaction_to_a_fill_goes_in_before_later_market_messages(order_ns, second):
    r = backtest(REACT, Rebuy(), latency=ConstantLatency(0, order_ns), trader=TRADER)
    # the sell arrives at 10 + order_ns; the reaction at 40 + order_ns, before or after t=50
    assert r.orders["ts"].tolist() == [10 + order_ns, 40 + order_ns]
    taker = [int(f["buy_trader"] == TRADER and f["aggressor_side"] == Side.BUY) for f in r.fills]
    assert [(int(f["ts"]), int(f["price"]), bool(t)) for f, t in zip(r.fills, taker)] == \
        [(40, 100, False), second]


class QuoteReacting(QuoteStrategy):
    """The same quotes, with an on_fill: the driver then stops after every message that fills
    the strategy (where a plain QuoteStrategy runs from one wake-up to the next)."""

    def on_fill(self, ctx, fill):
        self.seen = getattr(self, "seen", 0) + 1


@pytest.mark.parametrize("lat", [(0, 0), RandomLatency(4, 300, 700, 200, 500)])
def test_stopping_at_each_fill_and_running_whole_slices_give_the_same_bytes(lat):
    f = uniform_flow(20_000, 6)
    plain = backtest(f, QuoteStrategy(mm_quotes, [5, 20, 100], every=25), latency=lat,
                     trader=TRADER, fast=False)
    s = QuoteReacting(mm_quotes, [5, 20, 100], every=25)
    react = backtest(f, s, latency=lat, trader=TRADER)
    assert react.meta["path"] == "python" and s.seen == len(react.fills) > 20
    assert react.digest() == plain.digest()


@pytest.mark.parametrize("model", [ConstantLatency(7, 9), RandomLatency(3, 100, 200, 50, 80),
                                   RecordedLatency({"ts": [5, 50], "feed_ns": [1, 2],
                                                    "order_ns": [3, 4]})])
def test_python_latency_draws_equal_the_njit_sampler(model):
    from exsim.replay.backtesting.latency import sample
    for sampler, twin in zip(model.samplers(), model.samplers()):
        twin.ensure(5000)
        cursor = 0
        for ts in range(0, 10_000, 2):     # past the first block of random draws (4,096)
            want, cursor = sample(twin.mode, twin.times, twin.vals, cursor, ts)
            assert sampler.draw(ts) == want


def test_arrays_of_another_kind_are_told_apart_before_a_prepared_call():
    # the prepared entry point skips numba's type checks, so the driver re-prepares whenever
    # arg_types differ: they must differ for a strided view and for another integer width
    import exsim.replay.backtesting.kernels as C

    flow = uniform_flow(64, seed=1)
    base = C.arg_types(C.check_flow, (flow, 1, 2))
    if base is None:
        pytest.skip("numba disabled: no prepared entry points")
    assert C.arg_types(C.check_flow, (flow.copy(), 1, 2)) == base
    assert C.arg_types(C.check_flow, (flow[::2], 1, 2)) != base
    ints = np.zeros(4, np.int64)
    assert C.arg_types(C.check_flow, (flow, ints, 2)) != C.arg_types(C.check_flow, (flow, ints.astype(np.int32), 2))


# -- the quote rules (replay.backtesting.quoting), one statement for both paths ----------------

def _reconcile(slots, bid, bid_qty, ask, ask_qty):
    from exsim.replay.backtesting.quoting import reconcile
    return list(reconcile(slots, np.array([bid, bid_qty, ask, ask_qty], np.int64)))


def test_reconcile_places_modifies_cancels_or_leaves_each_side():
    from exsim.exchange import Kind
    from exsim.replay.backtesting.quoting import NO_ACTION, SLOTS
    slots = np.zeros(SLOTS, np.int64)
    assert _reconcile(slots, 100, 5, 0, 5) == [Kind.NEW, NO_ACTION]     # ask price 0: no quote
    assert slots[1:4].tolist() == [100, 5, 1] and slots[7] == 0
    slots[0] = ID_BASE                                                   # the caller's id
    assert _reconcile(slots, 100, 5, 102, 3) == [NO_ACTION, Kind.NEW]
    assert _reconcile(slots, 99, 5, 102, 4) == [Kind.MODIFY, Kind.MODIFY]
    assert slots[1:3].tolist() == [99, 5] and slots[5:7].tolist() == [102, 4]
    assert _reconcile(slots, 99, 0, -1, 4) == [Kind.CANCEL, Kind.CANCEL]
    assert slots[3] == 0 and slots[7] == 0 and slots[0] == ID_BASE      # the id stays for CANCEL
    assert _reconcile(slots, 0, 0, 0, 0) == [NO_ACTION, NO_ACTION]


def test_a_quote_ends_when_its_order_is_filled_cancelled_or_rejected_only():
    from exsim.exchange import EVENT_DTYPE, Event
    from exsim.replay.backtesting.quoting import SLOTS, quote_report, quote_reports
    slots = np.zeros(SLOTS, np.int64)
    slots[[0, 3, 4, 7]] = ID_BASE, 1, ID_BASE + 1, 1
    for ev in (Event.ACCEPTED, Event.PARTIAL, Event.MODIFIED):
        quote_report(slots, ID_BASE, int(ev))
    assert slots[[3, 7]].tolist() == [1, 1]
    quote_report(slots, ID_BASE + 7, int(Event.FILLED))                 # not one of the quotes
    assert slots[[3, 7]].tolist() == [1, 1]
    se = np.zeros(2, EVENT_DTYPE)
    se["order_id"], se["event"] = [ID_BASE + 1, ID_BASE], [Event.REJECTED, Event.CANCELLED]
    quote_reports(se, 0, 1, slots)
    assert slots[[3, 7]].tolist() == [1, 0]
    quote_reports(se, 1, 2, slots)
    assert slots[[3, 7]].tolist() == [0, 0]


def test_fill_effect_and_account_agree_on_a_self_trade():
    from exsim.exchange import FILL_DTYPE
    from exsim.replay.backtesting.quoting import account, fill_effect
    terms = np.array([1.0, 0.001, 0.001])     # tick value 1 (ticks x lots), maker, taker
    assert fill_effect(0, 100, 3, False, terms) == (3, -300.0, 300.0 * 0.001)
    assert fill_effect(1, 100, 3, True, terms) == (-3, 300.0, 300.0 * 0.001)
    sf = np.zeros(2, FILL_DTYPE)
    sf["price"], sf["qty"] = [100, 101], [3, 2]
    sf["buy_trader"], sf["sell_trader"] = [TRADER, TRADER], [7, TRADER]
    pos, money = np.zeros(1, np.int64), np.zeros(2, np.float64)
    account(sf, 0, 2, TRADER, pos, money, terms)
    assert pos[0] == 3 and money[0] == -300.0 - 202.0 + 202.0
    assert money[1] == 300.0 * 0.001 + 202.0 * 0.001 + 202.0 * 0.001


def test_both_paths_run_the_same_compiled_quote_rules():
    import exsim.replay.backtesting.kernels as C
    import exsim.replay.backtesting.quoting as Q
    import exsim.replay.backtesting.strategy as S
    for name in ("reconcile", "quote_report", "fill_effect"):
        assert getattr(S, name) is getattr(Q, name)
    for name in ("reconcile", "quote_reports", "account"):
        assert getattr(C, name) is getattr(Q, name)
    assert not hasattr(S.QuoteStrategy, "_reconcile") and not hasattr(C, "_account")


def test_the_strategy_id_base_is_one_constant():
    import exsim.replay.backtesting.driver as D
    import exsim.replay.backtesting.kernels as C
    import exsim.replay.backtesting.l2queue as L
    assert D.ID_BASE is C.ID_BASE and L.TAKE_ID_BASE is C.ID_BASE and C.ID_BASE == 1 << 62


def test_a_quote_strategy_overriding_on_order_still_tracks_its_quotes():
    class Logged(QuoteStrategy):
        def on_order(self, ctx, event):
            self.seen = getattr(self, "seen", 0) + 1
            super().on_order(ctx, event)

    flow = uniform_flow(3000, seed=5)
    base = backtest(flow, QuoteStrategy(mm_quotes, [5, 1, 50], every=50), trader=TRADER,
                    fast=False)
    s = Logged(mm_quotes, [5, 1, 50], every=50)
    logged = backtest(flow, s, trader=TRADER, fast=False)
    assert s.seen == len(logged.events) > 0
    assert logged.digest() == base.digest()


def test_first_due_is_the_one_order_of_work_rule_of_every_loop():
    from exsim.replay.backtesting.kernels import (STEP_MARKET, STEP_ORDER, STEP_TIMER, STEP_WAKE,
                                            first_due)
    inf = np.iinfo(np.int64).max
    assert first_due(10, 9, False, inf, inf) == STEP_ORDER
    assert first_due(10, 10, False, inf, inf) == STEP_MARKET       # a tie goes to the market
    assert first_due(inf, 10, False, inf, inf) == STEP_ORDER       # past the end of the flow
    assert first_due(10, 5, True, 5, inf) == STEP_ORDER            # arrival tied with the wake-up
    assert first_due(10, 6, True, 5, inf) == STEP_WAKE
    assert first_due(10, 6, True, 5, 5) == STEP_WAKE               # wake-up before a tied timer
    assert first_due(10, 6, True, 5, 4) == STEP_TIMER
    assert first_due(10, 4, True, 5, 4) == STEP_ORDER              # arrival tied with the timer
    assert first_due(10, inf, False, inf, 10) == STEP_MARKET       # the timer observes later
    assert first_due(10, inf, False, inf, inf) == STEP_MARKET
    import exsim.replay.backtesting.driver as D
    assert D.C.first_due is first_due
