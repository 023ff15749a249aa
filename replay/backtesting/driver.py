"""``backtest``: a strategy's orders and the market's flow through one ``Engine``, with latency.

The market flow (ORDER_DTYPE, sorted by ts) and the strategy's messages meet in one engine, in
arrival order, so the strategy's queue position is earned: its order joins the back of its
level behind everything that arrived before it and fills only once those are consumed.

Timing model (all in int64 ns, see ``replay.backtesting.latency``):
- A wake-up observes the book after some market message at exchange time ``t`` (``on_book``
  every N messages, or a fill, or a timer). The strategy runs at local time ``t + feed``; what it
  sends reaches the engine at ``local + order`` (the order-entry latency of its command: NEW,
  CANCEL or MODIFY; never before its previous message: one connection keeps its order).
- A strategy message arriving at ``a`` is processed after every market message with
  ``ts <= a`` (ties go to the market: the conservative choice) and before the first with ts > a.
- Fills and execution reports of strategy orders are delivered in engine order; the strategy
  learns of a message's fills one response latency after it (the feed latency unless the model
  gives response its own, ``SplitLatency``). With a response latency of its own, every report
  of a message (acks and cancels too) is due at ``ts + response`` (never before the previous
  message's: in order), and a wake-up or timer at local time ``L`` sees only the reports due by
  ``L``; the rest come at a later callback. Without one, a wake-up first gets every report made
  before its observation. The symbol events of the traded symbol
  (PHASE, INDICATIVE, UNCROSS; docs/semantics.md, "Trading phases") go to ``on_phase`` in the
  same order; a strategy that overrides ``on_phase`` is stopped right after every message that
  made one (market messages then go through the engine one at a time, still inside numba). A strategy that overrides ``on_fill``
  or ``on_order`` is stopped right after every message that fills it, so what it sends goes in
  before any later market message; any other acts only at its wake-ups and timers.

These loops run this model, one per kind of strategy and flow, all taking their order of work
from the rule above (the two Python drivers are in ``replay.backtesting.drivers``):
- ``_EngineDriver`` (a Python strategy on L3 flow): ``kernels.drive`` runs the merged stream in
  numba from one Python callback to the next (a wake-up, a timer, or, for a strategy that
  reacts to fills, each strategy message and each market message that filled it).
- ``_run_fast`` (a ``QuoteStrategy`` on L3 flow, ``fast``): ``kernels.run_quotes`` runs the whole
  loop inside numba, the quote function included; Python only grows arrays. Both njit loops are
  built per quote function (``quoteloops.quote_loop``) so a later process loads them from cache.
- ``_L2Driver`` (a Python strategy on L2 flow): ``l2loop.drive_l2`` runs market events and the
  strategy's messages over ``l2queue``'s book in numba from one Python callback to the next.
- ``_run_fast_l2`` (a ``QuoteStrategy`` on L2 flow, ``fast``): ``l2loop.run_quotes_l2``, the
  whole L2 loop with the quote function inside numba.
- ``several.L2SeveralDriver`` (a Python strategy on a list of L2 flows): ``drive_l2`` per flow,
  every flow stopped at the same instants. Several symbols of one L3 flow (``symbol=[...]``)
  run on ``_EngineDriver``, which then shows the strategy every traded symbol's book.
The numba loops on L3 hand the engine whole slices of market messages (one ``process_batch``
call each). A ``QuoteStrategy``'s rules (``replay.backtesting.quoting``) are the same compiled
functions on every path.

Identifiers: strategy order ids start at ``ID_BASE`` (2^62, ``kernels.ID_BASE``), above every
market id (the flow is checked: a market id >= ID_BASE or a market row with the strategy's
trader raises UsageError).

Queue model: exact on L3 flow (generated scenarios, LOBSTER, QuantCup): every market order is an
order in the engine's FIFO. L2-only flow (Binance aggregates, ``L2Flow``) does not go through the
engine: ``replay.backtesting.l2queue`` replays the aggregate book and tracks the quantity ahead of each
strategy order (``queue_model`` "conservative" or "proportional"), with the same driver loop, the
same timing rules and the same result shape. Journaling is L3-only.

Determinism: the same flow, strategy, latency model (and seed) give byte-identical results
(``BacktestResult.digest()``). With ``store_dir`` the merged message stream is journaled with
``store.Session`` so ``verify``/``rerun`` work on it.
"""

from __future__ import annotations

import json

import numpy as np

from exsim.exchange import Engine
from exsim.exchange import state as K
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE

import exsim.replay.backtesting.kernels as C
from exsim.replay.backtesting.result import (BacktestResult, account_result, build_result,
                                             strategy_label)
from exsim.replay.backtesting.latency import as_latency, streams_of
from exsim.replay.backtesting.kernels import ID_BASE
from exsim.replay.backtesting.money import money_for
from exsim.replay.backtesting.quoteloops import quote_loop
from exsim.replay.backtesting.strategy import QuoteStrategy, Strategy

__all__ = ["backtest", "BacktestResult", "ID_BASE", "DEFAULT_TRADER"]
# DEFAULT_TRADER, _load_flow, engine_for, symbol_specs, l2_symbol_spec and L2_SYMBOL_KEYS are
# part of this module's surface too: counterfactual, grid and user code import them from here
from exsim.replay.backtesting.drivers import (DEFAULT_TRADER, L2_SYMBOL_KEYS, _EngineDriver,
                                              _L2Driver, _MIN, _l2_money, _load_flow,
                                              _session_close, engine_for, l2_symbol_spec,
                                              symbol_specs)


def _backtest_l2(flow, strategy, model, trader, money, fast, store_dir, engine_options,
                 queue_model, info, progress, spec, fees_bps):
    """Run ``strategy`` on an ``L2Flow`` through the queue model; return a BacktestResult."""
    from exsim.replay.backtesting.l2queue import L2Sim, prepare
    lat = streams_of(model)
    fast = _pick_fast(fast, strategy, lat, type(strategy) is QuoteStrategy)
    if store_dir is not None:
        raise UsageError("store_dir: an L2 backtest does not run through the engine, so there is "
                         "no merged order stream to journal")
    if engine_options:
        raise UsageError("engine_options do not apply to L2 flow (no engine runs)")
    prep = prepare(flow)          # merged, ranked and cut into messages once per content
    events = prep.events
    sim = L2Sim(events, queue_model, trader, session_close=_session_close(spec), px=prep.px)
    if fast:
        olog, osent, oseq, marks = _run_fast_l2(sim, prep, strategy, lat, trader, money.terms())
    else:
        d = _L2Driver(sim, events, strategy, lat, trader, 0, money.terms(), prep.ends,
                      spec["name"])
        d.progress = progress
        d.run()
        olog, osent, oseq, marks = d.olog[:d.nord], d.osent[:d.nord], d.oseq[:d.nord], \
            d.marks[:d.nmark]
    if progress is not None:
        progress(len(events), len(events))
    meta = {"latency": model.describe(), "trader": trader, "symbol": 0,
            "symbol_name": spec["name"], "fees_bps": fees_bps,
            "n_market": int(len(events)), "path": "njit" if fast else "python",
            **queue_model.describe(),
            "strategy": strategy_label(strategy), **info}
    return build_result(olog.copy(), osent.copy(), oseq.copy(), sim.sf[: sim.scnt[0]].copy(),
                        sim.se[: sim.scnt[1]].copy(), marks.copy(), trader, money, meta)


def _pick_fast(fast, strategy, lat, default: bool) -> bool:
    """Whether a backtest takes the njit path: ``fast`` as given, or ``default`` when None,
    except that a response latency of its own needs the Python path (the njit loops apply
    reports at once: they have no queue of reports in flight). Raises UsageError for fast=True
    with a strategy that is not a QuoteStrategy or with a split response latency."""
    if fast and not isinstance(strategy, QuoteStrategy):
        raise UsageError("fast=True needs a QuoteStrategy (an @njit quote function)")
    if lat.split_response:
        if fast:
            raise UsageError("fast=True: the njit path does not model a response latency of its "
                             "own (SplitLatency(response=...)); use fast=False, or leave "
                             "response unset (the feed latency then stands for it)")
        return False
    return default if fast is None else bool(fast)


def _entry_arrays(lat, st):
    """The order-entry streams of ``lat`` (``latency.Streams``) as the njit loops take them:
    (modes int64[3], times 3-tuple, vals 3-tuple) by Kind; writes into ``st[S_CUROF + kind]``
    the slot of each stream's cursor (shared streams share one: NEW's is S_ORD_CUR)."""
    slots = {}
    for k, s in enumerate(lat.entry):
        slots.setdefault(id(s), (C.S_ORD_CUR, C.S_CAN_CUR, C.S_MOD_CUR)[len(slots)])
        st[C.S_CUROF + k] = slots[id(s)]
    return (np.array([s.mode for s in lat.entry], np.int64), tuple(s.times for s in lat.entry),
            tuple(s.vals for s in lat.entry))


def _run_fast_l2(sim, prep, strat: QuoteStrategy, lat, trader, terms):
    """The njit path on L2 flow: the whole loop in ``l2loop.run_quotes_l2``; Python only grows
    arrays. Returns (order log, sent times, seqs, marks), trimmed."""
    loop = quote_loop("l2", strat.fn)
    st = np.zeros(C.ST_SIZE, np.int64)    # S_NEXT_WAKE: the index of the next wake-up in wakes
    fst = np.zeros(2, np.float64)
    wakes = np.ascontiguousarray(prep.ends[strat.every - 1::strat.every])
    top = np.zeros(4, np.int64)

    feed = lat.feed

    def step(olog, osent, oseq, marks):
        modes, times, vals = _entry_arrays(lat, st)
        return loop(prep.events, wakes, st, fst, sim.px, sim.bqty, sim.best, sim.so, sim.sf,
                    sim.se, sim.scnt, sim.st, olog, osent, oseq, marks, feed.mode, feed.times,
                    feed.vals, modes, times, vals, strat.state, strat.params, strat._quote, top,
                    trader, 0, terms)
    return _fast_loop(step, sim.grow, st, lat, len(wakes) + 2)


def _run_fast(engine, msgs, strat: QuoteStrategy, lat, trader, symbol, terms):
    """The njit path: the whole loop in ``run_quotes``; Python only grows arrays."""
    a = C.EngineArrays(engine)
    st = np.zeros(C.ST_SIZE, np.int64)
    st[C.S_NEXT_WAKE] = strat.every
    fst = np.zeros(2, np.float64)
    top = np.zeros(4, np.int64)

    feed = lat.feed
    loop = quote_loop("l3", strat.fn)

    def step(olog, osent, oseq, marks):
        modes, times, vals = _entry_arrays(lat, st)
        return loop(msgs, st, fst, *a.state, a.fills, a.l2, a.events, a.cnt,
                            a.sf, a.se, a.scnt, olog, osent, oseq, marks, feed.mode, feed.times,
                            feed.vals, modes, times, vals, strat.state,
                            strat.params, strat._quote, top, trader, ID_BASE, symbol,
                            strat.every, terms, np.int64(engine.prefetch_distance))
    return (a, *_fast_loop(step, a.grow, st, lat, len(msgs) // strat.every + 2))


def _fast_loop(step, grow, st, lat, n_marks: int):
    """Run an njit quote loop, ``step(olog, osent, oseq, marks) -> status``, to the end: grow
    the order log and marks (NEED_LOG) and the latency draws (NEED_DRAWS) it asks for, anything
    else through ``grow(status)``. ``st`` is its state (``kernels.run_quotes``' layout; the
    strategy's ids and arrival clock are set here). Returns (order log, sent times, seqs,
    marks), trimmed."""
    st[C.S_NEXT_ID] = ID_BASE
    st[C.S_LAST_ARR] = _MIN
    olog = C.new_order_log(1024)
    osent = np.zeros(len(olog), np.int64)
    oseq = np.zeros(len(olog), np.int64)
    marks = np.zeros(max(16, n_marks), C.MARK_DTYPE)
    while True:
        status = step(olog, osent, oseq, marks)
        if status == K.OK:
            break
        if status == C.NEED_LOG:
            olog, osent, oseq, marks = (K.grow_array(x, 0) for x in (olog, osent, oseq, marks))
        elif status == C.NEED_DRAWS:
            lat.feed.ensure(int(st[C.S_FEED_CUR]) + 2)
            for k, s in enumerate(lat.entry):
                s.ensure(int(st[int(st[C.S_CUROF + k])]) + 3)
        else:
            grow(status)
    nord = int(st[C.S_NORD])
    return olog[:nord], osent[:nord], oseq[:nord], marks[: int(st[C.S_NMARK])]


def backtest(flow, strategy: Strategy, *, latency=None, trader: int = DEFAULT_TRADER,
             fees_bps: float | None = None, symbol: int | str | None = None,
             engine_options=None, store_dir=None, fast: bool | None = None,
             queue_model="conservative", symbols=None, progress=None) -> BacktestResult:
    """Run ``strategy`` against ``flow`` through one engine; return a ``BacktestResult``.

    ``flow``: ORDER_DTYPE array sorted by ts, a ``Scenario``, a scenario name or file, a
    ``LobsterFlow``, a LOBSTER directory, or a data directory (its journaled orders); or a list
    of L2-only flows (one symbol each, ids 0, 1 ... in order): several instruments from one
    account on the Python path, as ``symbol=[...]`` below (``symbol`` then None or a list of
    all their names, the first being the primary one; ``symbols`` one dict per flow).
    ``latency``: ConstantLatency / RandomLatency / RecordedLatency (None: zero; an int or a
    (feed_ns, order_ns) pair: constant), or SplitLatency (feed, order entry per command, and
    response each its own; a response latency of its own runs on the Python path, see
    ``fast``). ``trader``: the strategy's account id.
    ``fees_bps``: one fee rate on traded notional, in basis points, for maker and taker fills
    alike; it overrides the traded symbol's schedule (``maker_bps``/``taker_bps`` of its engine
    config), which applies when ``fees_bps`` is None (see ``replay.backtesting.money``).
    ``symbol``: which symbol the strategy trades (id or name; needed when the flow has several),
    or a list of them: several instruments from one account (L3 flow, Python path): the
    strategy sees every one's book (``ctx.books``, by name; ``book`` is the first's), sends to
    any (``ctx.buy(..., symbol=)``; default the first), holds a position per symbol
    (``ctx.positions``; ``ctx.position`` is the first's) and one cash and fee total, each fill
    in its symbol's terms; they must share one money unit. The result is the account's, with
    each symbol's own in ``result.by_symbol`` (``result.account_result``).
    ``engine_options``: keyword arguments of ``Engine`` (e.g. ``{"stp": "cancel_resting"}``);
    a data directory's flow starts from its run's stp and ownership and these override them.
    ``symbols``: ``Engine.add_symbol`` keyword dicts, one per symbol id (name, tick_size,
    currency, tick_value, maker_bps, taker_bps, tick_table, lot_size ...), registered instead of
    the flow's own symbols (a scenario's carry its file's options, a data directory's every
    option of its run; other flows only names and ticks); on L2 flow one dict of name,
    tick_size, currency, tick_value, maker_bps, taker_bps, session_close
    (``l2_symbol_spec``). ``store_dir``: journal the merged run there.
    ``fast``: run a ``QuoteStrategy`` on the njit path (None: whenever the strategy is one and
    the latency has no response latency of its own; fast=True with one raises UsageError). ``queue_model``: for L2-only flow (``L2Flow``, ``BinanceData``, a Binance
    capture), "conservative" or "proportional", or a ``queue_models.QueueModel`` (see
    ``replay.backtesting.l2queue``).
    ``progress``: None or a callable ``progress(done, total)`` told how many of the flow's
    ``total`` market messages have run: at wake-ups on the Python path, once at the end (done
    == total) on every path.
    Money (cash, PnL, fees, turnover) is in the traded symbol's currency when it has one, else
    in ticks x lots; ``result.meta["money"]`` says which.
    Raises UsageError for a bad argument, an unsorted flow, a market id in the strategy's range,
    a market row carrying the strategy's trader id, or an L3-only option on L2 flow.
    """
    from exsim.replay.backtesting.l2queue import L2Flow
    from exsim.replay.backtesting.queue_models import as_queue_model
    queue_model = as_queue_model(queue_model)
    if isinstance(flow, (list, tuple)):
        from exsim.replay.backtesting.several import backtest_l2_several
        return backtest_l2_several(flow, strategy, as_latency(latency), trader, fees_bps,
                                   symbol, symbols, queue_model, fast, store_dir,
                                   engine_options, progress)
    orders, names, ticks, info, specs = _load_flow(flow)
    if "engine_options" in info:
        # a stored run's stp and ownership, under the caller's own engine_options
        engine_options = info["engine_options"] = {**info["engine_options"],
                                                   **(engine_options or {})}
    if not 0 <= int(trader) < 2**32:
        raise UsageError(f"trader must fit in uint32; got {trader}")
    if not isinstance(strategy, Strategy):
        raise UsageError(f"strategy must be a replay.Strategy instance; got {type(strategy)}")
    if isinstance(symbol, (list, tuple)) and len(symbol) == 1:
        symbol = symbol[0]      # one symbol in a list: the plain one-symbol backtest
    several = isinstance(symbol, (list, tuple))
    if isinstance(orders, L2Flow):
        if several:
            raise UsageError("symbol=[...]: an L2 flow has one symbol; for several L2 symbols "
                             "pass a list of flows, backtest([spot, future], ...)")
        spec = l2_symbol_spec(orders, symbols)
        money = _l2_money(orders, spec, fees_bps)
        if symbol is not None and symbol not in (0, orders.name, spec["name"]):
            raise UsageError(f"symbol {symbol!r}: the L2 flow has one symbol, {spec['name']!r}")
        return _backtest_l2(orders, strategy, as_latency(latency), int(trader), money, fast,
                            store_dir, engine_options, queue_model, info, progress, spec,
                            fees_bps)
    msgs = np.ascontiguousarray(orders)
    unsorted, high_id, has_trader, top_symbol = C.check_flow(msgs, int(trader), ID_BASE)
    if unsorted:
        i = int(np.flatnonzero(np.diff(msgs["ts"]) < 0)[0]) + 1
        where = info.get("source") or info.get("kind") or "the flow"
        raise UsageError(f"{where}: flow must be sorted by ts (the merge is by arrival time); "
                         f"message {i + 1} (ts {int(msgs['ts'][i])}) comes before message {i} "
                         f"(ts {int(msgs['ts'][i - 1])})")
    if high_id:
        raise UsageError("market order ids must be below ID_BASE (2^62), the strategy's range")
    if has_trader:
        raise UsageError(f"trader {trader} appears in the market flow; pick another strategy trader")
    if fees_bps is not None:
        money_for(None, fees_bps)    # a bad fees_bps fails before the engine is built
    n_sym = int(top_symbol) + 1
    if symbols is not None:
        specs = symbol_specs(symbols, n_sym)
    elif specs is None:
        specs = symbol_specs(None, n_sym)
    engine = engine_for(specs, engine_options)
    cfgs = engine.config()["symbols"]
    n_names = len(cfgs)
    sids = None
    if several:
        sids = _traded_symbols(engine, symbol)
        symbol = sids[0]
    if symbol is None:
        if n_names != 1:
            names = [s["name"] for s in engine.config()["symbols"]]
            raise UsageError(f"the flow has {n_names} symbols; pass symbol= (one of {names})")
        symbol = 0
    sid = engine.symbol_id(symbol)
    sym_cfg = engine.config()["symbols"][sid]
    money = money_for(sym_cfg, fees_bps)
    terms = money.terms()
    model = as_latency(latency)
    lat = streams_of(model)
    names, terms_by, monies = {sid: sym_cfg["name"]}, None, [money]
    if sids is not None:
        if fast:
            raise UsageError("fast=True: several symbols run on the Python path (the njit "
                             "quote loop quotes one)")
        fast = False
        names = {k: cfgs[k]["name"] for k in sids}
        monies = [money_for(cfgs[k], fees_bps) for k in sids]
        if len({m.unit for m in monies}) > 1:
            raise UsageError("symbol=[...]: one account holds one cash in one currency; these "
                             "symbols' money is in " + ", ".join(
                                 f"{names[k]}: {m.unit}" for k, m in zip(sids, monies)))
        terms_by = {k: m.terms() for k, m in zip(sids, monies)}
    fast = _pick_fast(fast, strategy, lat, type(strategy) is QuoteStrategy)
    if fast:
        a, olog, osent, oseq, marks = _run_fast(engine, msgs, strategy, lat, int(trader), sid,
                                                terms)
    else:
        d = _EngineDriver(engine, msgs, strategy, lat, int(trader), sid, terms, names, terms_by)
        d.progress = progress
        d.run()
        a, olog, osent, oseq = d.arrays, d.olog[:d.nord], d.osent[:d.nord], d.oseq[:d.nord]
        marks = d.marks[:d.nmark]
    if progress is not None:
        progress(len(msgs), len(msgs))
    meta = {"latency": model.describe(), "trader": int(trader), "symbol": sid,
            "symbol_name": sym_cfg["name"], "fees_bps": fees_bps,
            "n_market": int(len(msgs)), "path": "njit" if fast else "python",
            "strategy": strategy_label(strategy), **info}
    if sids is not None:
        meta["symbols"] = list(names.values())
        result = account_result(
            olog.copy(), osent.copy(), oseq.copy(), a.sf[: a.scnt[0]].copy(),
            a.se[: a.scnt[1]].copy(), marks.copy(), int(trader), meta,
            [(k, names[k], m, marks.copy() if k == sid else np.array(d.sym_marks[k], C.MARK_DTYPE))
             for k, m in zip(sids, monies)])
    else:
        result = build_result(olog.copy(), osent.copy(), oseq.copy(), a.sf[: a.scnt[0]].copy(),
                              a.se[: a.scnt[1]].copy(), marks.copy(), int(trader), money, meta)
    if store_dir is not None:
        _journal(store_dir, engine, msgs, olog, oseq, result.meta)
    return result


def _traded_symbols(engine, symbols) -> list[int]:
    """Return the ids of ``symbols`` (names or ids, ``backtest(symbol=[...])``), in order.
    Raises UsageError for an empty list, an unknown symbol or one named twice."""
    if not symbols:
        raise UsageError("symbol=[...] must name at least one symbol")
    sids = [engine.symbol_id(s) for s in symbols]
    if len(set(sids)) != len(sids):
        raise UsageError(f"symbol=[...] names a symbol twice: {list(symbols)!r}")
    return sids


def _journal(store_dir, engine, msgs, olog, oseq, meta, batch: int = 65536) -> None:
    """Journal the merged stream (market + strategy messages at the seqs they got) in a data dir.

    A fresh engine with the backtest engine's config re-matches it; by the engine's determinism
    it reproduces the backtest exactly.
    """
    from exsim.store import Session
    merged = np.zeros(len(msgs) + len(olog), ORDER_DTYPE)
    is_strat = np.zeros(len(merged), bool)
    is_strat[oseq - 1] = True
    merged[is_strat] = olog
    merged[~is_strat] = msgs
    fresh = Engine.from_config(engine.config())
    info = {"scenario": "backtest", "backtest": json.loads(json.dumps(meta, default=str))}
    with Session.create(store_dir, fresh, run_info=info, durability="none") as s:
        for k in range(0, len(merged), batch):
            s.process(merged[k: k + batch])
