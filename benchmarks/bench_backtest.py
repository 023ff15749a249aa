"""Backtest throughput: market events/s of the njit and Python strategy paths against the engine
alone, and exsim's L2 backtest against hftbacktest on the Binance sample.

L3 workload: scenarios.uniform_flow(n, seed 7), 1 symbol; the example market maker quoting 5 lots
(``mm_quotes``) waking every 100 market messages, zero latency. Measured: the engine alone on the
same flow (``Engine.process`` in one batch, as a user would call it, and in 65,536-message
batches into one ``OutputBuffers`` (``out=``), the engine's best rate), the njit path
(``QuoteStrategy``, fast=True), the Python path (the same quote function through the Python
API, fast=False), the same strategy with an ``on_fill`` (the driver then stops after every
message that fills it instead of running from one wake-up to the next), and the example
``InventoryMarketMaker`` (the same rule written against the Python API).
Events are the flow's n market messages in every L3 row (the strategy's own messages, about
0.2% more, are not counted), so the rows compare time for the same input.

L2 workload (skipped when the sample is absent): the Binance BTCUSDT capture, loaded once
outside the timing; every L2 row replays the same 135,830 market events (126,073 L2 rows and
9,757 trades, merged in ``l2queue.l2_events``' order). Measured: exsim's L2 backtest with a
strategy that never acts against hftbacktest 2.x replaying the same rows and trades into a
``HashMapMarketDepthBacktest`` (building the asset plus ``elapse`` to the end); and market makers
with the rule of ``mm_quotes`` (100,000-lot quotes at the touch, skewed by position), 1 ms feed
and order latency, a conservative queue (exsim's default; hftbacktest's
``risk_adverse_queue_model``), all waking at the same points, after every 100th market message
(a depth diff or a trade): exsim's ``QuoteStrategy(mm_quotes)`` on the njit path (fast=True),
exsim's ``InventoryMarketMaker`` (Python API), and hftbacktest's njit loop
(``_hbt_market_maker``, which elapses to the same wake-up times). Targets (issue 37, ratios in
the same run): replay >= 1.5x hftbacktest's, njit market maker >= 1.2x hftbacktest's, Python
market maker >= 0.5x hftbacktest's njit one. hftbacktest 2.4 needs numpy < 2.3: run this in a
venv with the ``bench`` extra. ``--only l2`` (or ``l3``) runs one half.
nautilus_trader (when importable; 1.221 is the newest for Python 3.11) runs beside them, no
target: the same events replayed into an L2_MBP ``BacktestEngine`` with no strategy, and the
same market-maker rule as a nautilus ``Strategy`` waking at the same message counts (1 ms order
latency through its ``LatencyModel``; nautilus has no feed latency of its own, and its fills
follow its own matching with ``trade_execution``: a different queue model from the others').

Every round runs each measurement once, interleaved (A B C A B C ...), after one warm-up round
(compilation excluded); figures are medians over rounds and ratios are taken within the run,
because the shared machine's speed swings between minutes.
Writes benchmarks/results/local/backtest.json (``--out PATH`` elsewhere). EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 20,000
messages, one round, no hftbacktest market maker, JSON to the smoke directory: seconds.

    python benchmarks/bench_backtest.py [--n 1000000] [--runs 5] [--only all|l3|l2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke
from exsim.exchange import Engine, OutputBuffers
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy
from exsim.scenarios import uniform_flow
from exsim.replay.backtesting.strategies import InventoryMarketMaker, mm_quotes

TRADER = 4_000_000_000


class _OnFill(QuoteStrategy):
    """The quote strategy with an on_fill (counting fills): it may act between wake-ups."""

    fills = 0

    def on_fill(self, ctx, fill):
        self.fills += 1


def _l2_cases():
    """(name -> (events, callable)) for the Binance sample, or {} if it is absent, and why
    hftbacktest is missing (None when it runs). Every L2 row replays the same 135,830 market
    events (L2 rows and trades, ``l2queue.l2_events``' order), and every market maker wakes at
    the same points: after every ``L2_EVERY``-th market message (a depth diff or a trade)."""
    from exsim.scenarios import load_binance
    from exsim.scenarios.data import BINANCE_BTCUSDT, shared_file
    from exsim.replay.backtesting.l2queue import L2Flow, l2_events, message_ends
    try:
        path = shared_file(BINANCE_BTCUSDT)
    except Exception:
        return {}, None
    if not os.path.exists(path):
        return {}, None
    data = load_binance(path)
    ev = l2_events(L2Flow.from_binance(data))
    events = len(ev)
    ends = message_ends(ev)
    # the exchange time of each wake-up: the ts of the message ending at each L2_EVERY-th end
    wake_ts = ev["ts"][ends[L2_EVERY - 1::L2_EVERY] - 1]
    cases = {}

    def l2_replay():
        backtest(data, Strategy(), trader=TRADER)

    def l2_mm_python():
        res = backtest(data, InventoryMarketMaker(size=L2_SIZE, skew_lots=L2_SIZE,
                                                  max_position=10 * L2_SIZE, every=L2_EVERY),
                       latency=(L2_LATENCY, L2_LATENCY), trader=TRADER)
        WORK[f"exsim_l2_mm_python_every_{L2_EVERY}"] = _work(res)
    def l2_mm_njit():
        res = backtest(data, QuoteStrategy(mm_quotes, [L2_SIZE, L2_SIZE, 10 * L2_SIZE],
                                           every=L2_EVERY),
                       latency=(L2_LATENCY, L2_LATENCY), trader=TRADER, fast=True)
        WORK["exsim_l2_mm_njit"] = _work(res)
    cases["exsim_l2_replay_events_per_s"] = (events, l2_replay)
    cases["exsim_l2_mm_njit_events_per_s"] = (events, l2_mm_njit)
    cases[f"exsim_l2_mm_python_every_{L2_EVERY}_events_per_s"] = (events, l2_mm_python)
    from peers.hftbacktest_peer import HftbacktestL2
    why = HftbacktestL2().unavailable()
    if why is None:
        rows = _hbt_rows(ev)
        cases["hftbacktest_l2_replay_events_per_s"] = (events, _hbt_replay(rows))
        if not _smoke.enabled():    # its njit strategy compiles for ~15 s: not for a smoke run
            cases["hftbacktest_l2_mm_njit_events_per_s"] = (events, _hbt_market_maker(rows,
                                                                                      wake_ts))
    if _nautilus_missing() is None and not _smoke.enabled():   # seconds a round: not in smoke
        nt = _nautilus_data(ev, ends)
        cases["nautilus_l2_replay_events_per_s"] = (events, lambda: _nt_run(nt, None))
        cases["nautilus_l2_mm_events_per_s"] = (events, lambda: _nt_run(nt, _NtMarketMaker))
    return cases, why


def _nautilus_missing():
    """Why nautilus_trader cannot run here (None when it can)."""
    try:
        import nautilus_trader   # noqa: F401
    except ImportError as e:
        return f"not installed ({e}); pip install nautilus_trader (1.221 on Python 3.11)"
    return None


def _nautilus_data(ev, ends):
    """nautilus_trader's objects for the merged stream ``ev`` (built once, outside the timing):
    (instrument, book deltas, trades). Depth rows become L2_MBP ``OrderBookDelta`` UPDATEs
    (DELETE at qty 0) in the stream's order, the last row of each message flagged F_LAST;
    trades ``TradeTick``s; prices in 0.01 USDT, sizes in BTC (every lot count of the sample is a
    whole number of 1e-6 BTC, the instrument's size step)."""
    import numpy as np
    from nautilus_trader.model.data import BookOrder, OrderBookDelta, TradeTick
    from nautilus_trader.model.enums import AggressorSide, BookAction, OrderSide, RecordFlag
    from nautilus_trader.model.identifiers import TradeId
    from nautilus_trader.model.objects import Price, Quantity
    from nautilus_trader.test_kit.providers import TestInstrumentProvider

    from exsim.replay.backtesting.l2queue import EV_TRADE
    inst = TestInstrumentProvider.btcusdt_binance()
    iid = inst.id
    last = np.zeros(len(ev), bool)
    last[ends - 1] = True
    deltas, trades = [], []
    for k, (ts, kind, side, price, qty) in enumerate(zip(
            ev["ts"].tolist(), ev["kind"].tolist(), ev["side"].tolist(), ev["price"].tolist(),
            ev["qty"].tolist())):
        px, size = Price(price / 100, 2), Quantity(qty / 1e8, 6)
        if kind == EV_TRADE:
            trades.append(TradeTick(iid, px, size, AggressorSide.BUYER if side == 0
                                    else AggressorSide.SELLER, TradeId(str(k)), ts, ts))
        else:
            deltas.append(OrderBookDelta(
                iid, BookAction.DELETE if qty == 0 else BookAction.UPDATE,
                BookOrder(OrderSide.BUY if side == 0 else OrderSide.SELL, px, size, 0),
                RecordFlag.F_LAST if last[k] else 0, 0, ts, ts))
    return inst, deltas, trades


def _NtMarketMaker():   # noqa: N802 (a class factory: nautilus is imported only when it runs)
    """nautilus_trader's Strategy with exsim's market-maker rule (``mm_quotes``, as
    ``_hbt_market_maker``): every ``L2_EVERY``-th market message (a book message's F_LAST
    delta, or a trade) it quotes ``L2_SIZE`` lots at the touch skewed by position // ``L2_SIZE``
    within 10 x ``L2_SIZE``, replacing a quote whose price changed."""
    from nautilus_trader.model.enums import BookType, OrderSide, RecordFlag, TimeInForce
    from nautilus_trader.model.objects import Price, Quantity
    from nautilus_trader.trading.strategy import Strategy as NtStrategy

    class NtMarketMaker(NtStrategy):
        def __init__(self, iid):
            super().__init__()
            self.iid, self.n, self.wakes = iid, 0, 0
            self.live = {OrderSide.BUY: (None, 0), OrderSide.SELL: (None, 0)}

        def on_start(self):
            self.subscribe_order_book_deltas(self.iid, book_type=BookType.L2_MBP)
            self.subscribe_trade_ticks(self.iid)

        def on_order_book_deltas(self, deltas):
            for d in deltas.deltas:
                if d.flags & RecordFlag.F_LAST:
                    self._message()

        def on_trade_tick(self, tick):
            self._message()

        def _message(self):
            self.n += 1
            if self.n % L2_EVERY:
                return
            self.wakes += 1
            book = self.cache.order_book(self.iid)
            bb, ba = book.best_bid_price(), book.best_ask_price()
            if bb is None or ba is None:
                return
            bt, at = round(bb.as_double() * 100), round(ba.as_double() * 100)
            pos = round(float(self.portfolio.net_position(self.iid)) * 1e8)
            skew = pos // L2_SIZE
            bid, ask = min(bt - skew, at - 1), max(at - skew, bt + 1)
            for side, px, room in ((OrderSide.BUY, bid, pos + L2_SIZE <= 10 * L2_SIZE),
                                   (OrderSide.SELL, ask, pos - L2_SIZE >= -10 * L2_SIZE)):
                order, at_px = self.live[side]
                live = order is not None and not order.is_closed
                if live and px == at_px:
                    continue
                if live:
                    self.cancel_order(order)
                if room:
                    order = self.order_factory.limit(self.iid, side, Quantity(L2_SIZE / 1e8, 6),
                                                     Price(px / 100, 2),
                                                     time_in_force=TimeInForce.GTC)
                    self.submit_order(order)
                    self.live[side] = (order, px)
    return NtMarketMaker


def _nt_run(nt, strategy_class):
    """One nautilus_trader backtest of ``nt`` (``_nautilus_data``), timed whole: the engine, an
    L2_MBP venue (1 ms order latency, trades fill resting orders: ``trade_execution``), the
    data, and the run; with ``strategy_class`` (``_NtMarketMaker``) or none (replay)."""
    from nautilus_trader.backtest.engine import BacktestEngine, BacktestEngineConfig
    from nautilus_trader.backtest.models import LatencyModel
    from nautilus_trader.config import LoggingConfig
    from nautilus_trader.model.currencies import BTC, USDT
    from nautilus_trader.model.enums import AccountType, BookType, OmsType
    from nautilus_trader.model.identifiers import TraderId, Venue
    from nautilus_trader.model.objects import Money

    inst, deltas, trades = nt
    eng = BacktestEngine(config=BacktestEngineConfig(trader_id=TraderId("BT-001"),
                                                     logging=LoggingConfig(bypass_logging=True)))
    eng.add_venue(venue=Venue("BINANCE"), oms_type=OmsType.NETTING,
                  account_type=AccountType.CASH,
                  starting_balances=[Money(10_000_000, USDT), Money(1_000, BTC)],
                  book_type=BookType.L2_MBP, latency_model=LatencyModel(L2_LATENCY),
                  trade_execution=True)
    eng.add_instrument(inst)
    # why two calls: the engine tells book data by the first item of a call; the second call's
    # sort merges the trades in by ts
    eng.add_data(deltas, sort=False)
    eng.add_data(trades, sort=True)
    if strategy_class is not None:
        s = strategy_class()(inst.id)
        eng.add_strategy(s)
    eng.run()
    if strategy_class is not None:
        WORK["nautilus_l2_mm"] = {
            "filled_orders": len([o for o in eng.cache.orders() if o.filled_qty > 0]),
            "position_lots": round(float(eng.portfolio.net_position(inst.id)) * 1e8),
            "wake_ups": s.wakes}
    eng.dispose()


def _work(res) -> dict:
    """A backtest's fills and final position (lots), for the JSON's ``work``."""
    return {"fills": int(res.summary["n_fills"]), "position_lots": res.summary["final_position"],
            "wake_ups": int(len(res.marks))}


L2_EVERY = 100              # market messages between two wake-ups of an L2 market maker
L2_SIZE = 100_000           # quote size in lots of 1e-8 BTC (0.001 BTC)
L2_LATENCY = 1_000_000      # feed and order latency, ns


def _hbt_rows(ev):
    """hftbacktest's event rows for the merged stream ``ev`` (l2_events): DEPTH_EVENT or
    TRADE_EVENT, exchange ts and local ts one feed latency later, ticks and lots as floats."""
    import numpy as np
    from hftbacktest import (BUY_EVENT, DEPTH_EVENT, EXCH_EVENT, LOCAL_EVENT, SELL_EVENT,
                             TRADE_EVENT, event_dtype)

    from exsim.replay.backtesting.l2queue import EV_TRADE
    rows = np.zeros(len(ev), event_dtype)
    kind = np.where(ev["kind"] == EV_TRADE, TRADE_EVENT, DEPTH_EVENT).astype(np.uint64)
    side = np.where(ev["side"] == 0, BUY_EVENT, SELL_EVENT).astype(np.uint64)
    rows["ev"] = kind | EXCH_EVENT | LOCAL_EVENT | side
    rows["exch_ts"] = ev["ts"]
    rows["local_ts"] = ev["ts"] + L2_LATENCY
    rows["px"] = ev["price"]
    rows["qty"] = ev["qty"]
    return rows


def _hbt_asset(rows):
    from hftbacktest import BacktestAsset
    return (BacktestAsset().data([rows]).linear_asset(1.0)
            .constant_order_latency(L2_LATENCY, L2_LATENCY).risk_adverse_queue_model()
            .partial_fill_exchange().trading_value_fee_model(0.0, 0.0).tick_size(1.0)
            .lot_size(1.0))


def _hbt_replay(rows):
    """hftbacktest replaying the merged rows and trades with no strategy: building the asset and
    the backtest, then ``elapse`` to the end (timed)."""
    from hftbacktest import HashMapMarketDepthBacktest
    span = int(rows["local_ts"][-1] - rows["local_ts"][0]) + 10

    def run():
        hbt = HashMapMarketDepthBacktest([_hbt_asset(rows)])
        hbt.elapse(span)
        hbt.close()
    return run


def _hbt_market_maker(rows, wake_ts):
    """hftbacktest running exsim's market-maker rule (``mm_quotes``: quote ``L2_SIZE`` at the
    best bid and ask, skewed by position // ``L2_SIZE``, within 10 x ``L2_SIZE``; a quote moves
    when its price changes) as an njit loop on the same rows, waking at the same points as
    exsim's (``wake_ts``: the exchange ts after every ``L2_EVERY``-th message, seen one feed
    latency later), with a conservative queue (``risk_adverse_queue_model``: only trades advance
    it), partial fills and 1 ms latencies. Timed: building the asset and backtest, and the run."""
    import numpy as np
    from hftbacktest import GTC, LIMIT, HashMapMarketDepthBacktest
    from numba import njit

    @njit
    def quote_loop(hbt, wake_local, t0, size, max_pos):
        bid_id = ask_id = 0
        bid_px = ask_px = 0.0
        next_id = 1
        for w in wake_local:
            now = hbt.current_timestamp
            if now == np.iinfo(np.int64).max:      # before the first elapse: the data's start
                now = t0
            if w > now and hbt.elapse(w - now) != 0:
                break
            hbt.clear_inactive_orders(0)
            d = hbt.depth(0)
            if d.best_bid_qty <= 0 or d.best_ask_qty <= 0:
                continue
            pos = hbt.position(0)
            skew = float(int(pos) // int(size))
            bid = d.best_bid_tick - skew
            ask = d.best_ask_tick - skew
            if bid >= d.best_ask_tick:
                bid = d.best_ask_tick - 1
            if ask <= d.best_bid_tick:
                ask = d.best_bid_tick + 1
            orders = hbt.orders(0)
            if bid_id not in orders or bid != bid_px:
                if bid_id in orders:
                    hbt.cancel(0, bid_id, False)
                if pos + size <= max_pos:
                    bid_id = next_id
                    next_id += 1
                    bid_px = bid
                    hbt.submit_buy_order(0, bid_id, bid, size, GTC, LIMIT, False)
            if ask_id not in orders or ask != ask_px:
                if ask_id in orders:
                    hbt.cancel(0, ask_id, False)
                if pos - size >= -max_pos:
                    ask_id = next_id
                    next_id += 1
                    ask_px = ask
                    hbt.submit_sell_order(0, ask_id, ask, size, GTC, LIMIT, False)

    wake_local = (wake_ts + L2_LATENCY).astype(np.int64)
    t0 = np.int64(rows["exch_ts"][0])

    def run():
        hbt = HashMapMarketDepthBacktest([_hbt_asset(rows)])
        quote_loop(hbt, wake_local, t0, float(L2_SIZE), float(10 * L2_SIZE))
        sv = hbt.state_values(0)
        WORK["hftbacktest_l2_mm_njit"] = {"fills": int(sv.num_trades),
                                          "position_lots": float(sv.position)}
        hbt.close()
    return run


# what each market maker did in its last run (fills, position): the JSON shows both did work
WORK: dict = {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=("all", "l3", "l2"), default="all",
                    help="run only the L3 rows (seeded flow) or only the L2 rows (Binance)")
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/backtest.json; the committed one: --out benchmarks/results/backtest.json)")
    args = ap.parse_args()
    args.n = _smoke.scaled(args.n, 20_000)
    args.runs = _smoke.scaled(args.runs, 1)
    flow = uniform_flow(args.n, 7)

    def engine_only():
        e = Engine()
        e.add_symbol("S")
        e.process(flow)

    def engine_reuse():
        e = Engine()
        e.add_symbol("S")
        out = OutputBuffers(65536)
        for k in range(0, len(flow), 65536):
            e.process(flow[k: k + 65536], out=out)

    def run(fast, cls=QuoteStrategy):
        return lambda: backtest(flow, cls(mm_quotes, [5, 20, 200], every=100),
                                trader=TRADER, fast=fast)

    def python_api():
        backtest(flow, InventoryMarketMaker(size=5, skew_lots=20, max_position=200, every=100),
                 trader=TRADER)
    l3 = {"engine_only_events_per_s": (args.n, engine_only),
             "engine_only_reused_buffers_events_per_s": (args.n, engine_reuse),
             "njit_strategy_events_per_s": (args.n, run(True)),
             "python_strategy_every_100_events_per_s": (args.n, run(False)),
             "python_strategy_every_100_on_fill_events_per_s": (args.n, run(False, _OnFill)),
             "python_api_mm_every_100_events_per_s": (args.n, python_api)}
    cases = l3 if args.only != "l2" else {}
    hbt_missing = None
    if args.only != "l3":
        l2, hbt_missing = _l2_cases()
        cases.update(l2)
    times = {k: [] for k in cases}
    load0 = os.getloadavg()[0]    # the machine is shared: record how busy it was
    for r in range(args.runs + 1):          # round 0 is the warm-up
        for k, (_, fn) in cases.items():
            t = time.perf_counter()
            fn()
            if r:
                times[k].append(time.perf_counter() - t)
    rows = {k: cases[k][0] / statistics.median(v) for k, v in times.items()}

    def rmed(a, b, na, nb):
        """Median over rounds of rate(a) / rate(b): both ran within seconds of each other."""
        return statistics.median((na / x) / (nb / y) for x, y in zip(times[a], times[b]))
    ratios = {}
    if args.only != "l2":
        for name, a, b in (
                ("njit_vs_engine", "njit_strategy", "engine_only"),
                ("njit_vs_engine_reused_buffers", "njit_strategy",
                 "engine_only_reused_buffers"),
                ("python_vs_engine", "python_strategy_every_100", "engine_only"),
                ("python_vs_engine_reused_buffers", "python_strategy_every_100",
                 "engine_only_reused_buffers"),
                ("python_on_fill_vs_python", "python_strategy_every_100_on_fill",
                 "python_strategy_every_100")):
            ratios[name] = rmed(f"{a}_events_per_s", f"{b}_events_per_s", args.n, args.n)
    if "hftbacktest_l2_replay_events_per_s" in rows:
        ratios["exsim_l2_replay_vs_hftbacktest_replay"] = rmed(
            "exsim_l2_replay_events_per_s", "hftbacktest_l2_replay_events_per_s", 1, 1)
    if "hftbacktest_l2_mm_njit_events_per_s" in rows:
        for k in [k for k in rows if k.startswith("exsim_l2_mm_")]:
            ratios[k.replace("_events_per_s", "") + "_vs_hftbacktest_mm_njit"] = rmed(
                k, "hftbacktest_l2_mm_njit_events_per_s", 1, 1)
    if "nautilus_l2_replay_events_per_s" in rows:
        ratios["exsim_l2_replay_vs_nautilus_replay"] = rmed(
            "exsim_l2_replay_events_per_s", "nautilus_l2_replay_events_per_s", 1, 1)
        for k in [k for k in rows if k.startswith("exsim_l2_mm_")]:
            ratios[k.replace("_events_per_s", "") + "_vs_nautilus_mm"] = rmed(
                k, "nautilus_l2_mm_events_per_s", 1, 1)
    targets = {"njit_strategy_events_per_s": 5e6, "python_strategy_every_100_events_per_s": 1e6}
    # the L2 targets are ratios to hftbacktest in the same run (issue 37)
    ratio_targets = {"exsim_l2_replay_vs_hftbacktest_replay": 1.5,
                     "exsim_l2_mm_njit_vs_hftbacktest_mm_njit": 1.2,
                     f"exsim_l2_mm_python_every_{L2_EVERY}_vs_hftbacktest_mm_njit": 0.5}
    print(f"| {'measure':48} | {'events/s':>12} | {'target':>10} |")
    print(f"|{'-' * 50}|{'-' * 14}|{'-' * 12}|")
    for k, v in rows.items():
        t = targets.get(k)
        print(f"| {k:48} | {v:12,.0f} | {t and f'{t:,.0f}' or '':>10} |")
    for k, v in ratios.items():
        t = ratio_targets.get(k)
        print(f"| {k:48} | {v:11.2f}x | {t and f'{t:.2f}x' or '':>10} |")
    if hbt_missing:
        print(f"hftbacktest: {hbt_missing}")
    if args.only != "l3" and _nautilus_missing():
        print(f"nautilus_trader: {_nautilus_missing()}")
    out = {"workload": f"uniform_flow(n={args.n}, seed 7), 1 symbol, mm_quotes every 100 "
                       "messages, zero latency; events = the n market messages in every L3 row; "
                       "Binance BTCUSDT 2024-08-08 sample (L2 rows + "
                       "trades) for the L2 rows; median of "
                       f"{args.runs} interleaved rounds after a warm-up round",
           "command": f"python benchmarks/bench_backtest.py --n {args.n} --runs {args.runs}"
                      + (f" --only {args.only}" if args.only != "all" else ""),
           "cores": os.cpu_count(),
           "loadavg_1min": {"start": load0, "end": os.getloadavg()[0]},
           **rows, "ratios": ratios, "targets": targets, "ratio_targets": ratio_targets,
           "work": WORK,
           "hftbacktest": hbt_missing or "measured",
           "nautilus_trader": ("measured" if "nautilus_l2_replay_events_per_s" in rows
                               else _nautilus_missing() or "not run (smoke or --only l3)")}
    path = _smoke.report_path(args.out, "backtest.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
