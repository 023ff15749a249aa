"""The Python-strategy drivers of a backtest and what every backtest path shares.

``_EngineDriver`` runs a Python strategy on L3 flow through one ``Engine``; ``_L2Driver`` runs
one on L2 flow over ``l2queue``'s book (both on ``_Driver``'s timing rules: see
``replay.backtesting.driver``, whose ``backtest`` picks the path). Also here: reading a flow
(``_load_flow``), the symbols a backtest registers (``symbol_specs``, ``engine_for``,
``l2_symbol_spec``) and money on L2. ``replay.backtesting.several`` builds on the L2 driver.
"""

from __future__ import annotations

import collections
import heapq

import numpy as np

from exsim.exchange import Engine
from exsim.exchange import state as K
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import EVENT_DTYPE, Event, OrderType, Phase

import exsim.replay.backtesting.kernels as C
from exsim.replay.backtesting.kernels import ID_BASE
from exsim.replay.backtesting.money import money_for
from exsim.replay.backtesting.quoting import quote_reports
from exsim.replay.backtesting.strategy import Context, MarketView, QuoteStrategy, Strategy


DEFAULT_TRADER = 0xFFFF_FFF0      # the strategy's trader id unless one is given
_INF = np.iinfo(np.int64).max
_SYMBOL_EVENTS = frozenset((int(Event.PHASE), int(Event.INDICATIVE), int(Event.UNCROSS)))
_E_EVENT, _E_TS = EVENT_DTYPE.names.index("event"), EVENT_DTYPE.names.index("ts")
_MIN = np.iinfo(np.int64).min


def _load_flow(flow):
    """Return (orders or L2Flow, symbol names, tick sizes, run description, symbol specs) for any
    flow input ``scenarios.open_flow`` takes, or an ``L2Flow``. A Binance capture becomes an
    L2Flow (its aggregate levels); names, ticks and specs are None when the flow names no
    symbols. Specs are ``Engine.add_symbol`` keyword dicts by symbol id: a scenario's carry every
    option its file gives (``SymbolSpec.engine_options``), a data directory's every option of its
    stored run config (``Flow.specs``), other flows' only name and tick size. A data directory's
    description also holds "engine_options": the ``Engine()`` options (stp, ownership) its run
    was made with."""
    from exsim.scenarios import open_flow
    from exsim.replay.backtesting.l2queue import L2Flow

    if isinstance(flow, L2Flow):
        return flow, [flow.name], [flow.tick_size], {"kind": "l2"}, None
    f = open_flow(flow)
    if f.scenario is not None:
        return f.orders, f.names, f.ticks, {"scenario": f.scenario.describe()}, f.specs
    kind = "binance_l2" if f.l2 is not None else f.kind
    info = {"kind": kind} if f.source is None else {"source": f.source, "kind": kind}
    if f.engine is not None:
        info["engine_options"] = dict(f.engine)
    if f.l2 is not None:
        (name, tick), = f.symbols
        l2 = L2Flow.from_binance(f.l2, name, tick)
        return l2, [l2.name], [l2.tick_size], info, None
    specs = f.specs
    if specs is None and f.symbols is not None:
        specs = [{"name": n, "tick_size": t} for n, t in f.symbols]
    return f.orders, f.names, f.ticks, info, specs


def symbol_specs(specs, n_sym: int) -> list[dict]:
    """Return the ``Engine.add_symbol`` keyword dicts a backtest registers: ``specs`` (a list
    of dicts, each with a string "name", one per symbol id) or, when None, ``S0``, ``S1`` ...
    with tick size 1 for ``n_sym`` symbols. Raises UsageError for a malformed ``specs`` or one
    with fewer symbols than the flow uses (``n_sym``)."""
    if specs is None:
        return [{"name": f"S{k}", "tick_size": 1} for k in range(max(n_sym, 1))]
    if isinstance(specs, dict) or not hasattr(specs, "__iter__"):
        raise UsageError(f"symbols must be a list of add_symbol option dicts; got {specs!r}")
    out = []
    for k, spec in enumerate(specs):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
            raise UsageError(f"symbols[{k}] must be a dict of add_symbol options with a "
                             f"non-empty string 'name'; got {spec!r}")
        out.append(dict(spec))
    if len(out) < n_sym:
        raise UsageError(f"symbols lists {len(out)} symbol(s) but the flow uses symbol ids up "
                         f"to {n_sym - 1}")
    return out


def engine_for(specs: list[dict], engine_options=None) -> Engine:
    """Return a fresh ``Engine(**engine_options)`` with ``specs`` (``symbol_specs``) added in
    order. Raises UsageError for a bad engine or symbol option (the engine's own message)."""
    engine = Engine(**(engine_options or {}))
    for spec in specs:
        try:
            engine.add_symbol(**spec)
        except TypeError as e:   # an option this engine's add_symbol does not take
            raise UsageError(f"symbol {spec['name']!r}: {e}") from None
    return engine


class _Driver:
    """What both Python-strategy loops share: the order log, latency draws, wake-ups, timers and
    the delivery of fills and execution reports to the strategy."""

    def __init__(self, engine, msgs, strategy, lat, trader, symbol, terms, names=None,
                 terms_by=None):
        self.engine, self.msgs, self.strategy = engine, msgs, strategy
        # ``names``: symbol id -> name of each traded symbol, the first being ``symbol``;
        # ``terms_by``: each one's Money.terms() when there are several (else None)
        self.names = names or {symbol: str(symbol)}
        self.multi = terms_by is not None
        self.sym_marks = {sid: [] for sid in list(self.names)[1:]}   # the others' wake-up tops
        # ``lat``: latency.Streams; ``entry`` by Kind (NEW, CANCEL, MODIFY)
        self.feed, self.response, self.entry = lat.feed, lat.response, lat.entry
        self.split_response = lat.split_response
        self.pending = collections.deque()   # split_response: (due, seq, ts, e end, f end)
        self.fstamp = self.estamp = 0        # strategy fills / events given a due time so far
        self.last_due = _MIN
        self.trader, self.symbol = trader, symbol
        self.olog = C.new_order_log(256)
        self.osent = np.zeros(len(self.olog), np.int64)
        self.oseq = np.zeros(len(self.olog), np.int64)
        self.nord = self.qh = 0
        self.last_arr = _MIN
        self.every = int(getattr(strategy, "every", 0) or 0)
        self.timer_ns = int(getattr(strategy, "timer_ns", 0) or 0)
        if self.every < 0 or self.timer_ns < 0:
            raise UsageError("strategy.every and strategy.timer_ns must be >= 0")
        # one mark per wake-up (timers add more: the array grows then)
        self.marks = np.zeros(max(1024, len(msgs) // self.every + 2 if self.every else 0),
                              C.MARK_DTYPE)
        self.nmark = 0
        self.top = np.zeros(4, np.int64)
        self.obs_ts = int(msgs["ts"][0]) if len(msgs) else 0
        self.ctx = Context(self, ID_BASE, terms, {sid: (self.names[sid], t)
                                                  for sid, t in terms_by.items()}
                           if self.multi else None)
        self.fdone = self.edone = 0        # strategy fills / events delivered so far
        self._bind_callbacks()
        self.progress = None   # callable(done, total) of market messages, or None

    def _tick(self, done: int) -> None:
        """Report ``done`` market messages of ``len(msgs)`` to ``self.progress`` (at wake-ups:
        Python runs there anyway, so a report costs no extra round trip)."""
        if self.progress is not None:
            self.progress(int(done), len(self.msgs))

    # called by Context
    def traded(self, symbol) -> int:
        """Return the id of ``symbol`` (name or id; None: the first traded one). Raises
        UsageError for a symbol the backtest does not trade."""
        if symbol is None:
            return self.symbol
        for sid, name in self.names.items():
            if symbol == name or (type(symbol) is not bool and isinstance(symbol, (int, np.integer))
                                  and symbol == sid):
                return sid
        raise UsageError(f"symbol {symbol!r} is not traded in this backtest (it trades "
                         f"{', '.join(map(repr, self.names.values()))}; pass symbol=[...] to "
                         "backtest to trade several)")

    def send(self, kind, side, oid, price, qty, tif, flags, otype, local, stop_price=0,
             display_qty=0, min_qty=0, expire_ts=0, symbol=None) -> None:
        arrival = max(local + self.entry[kind].draw(local), self.last_arr)
        self.last_arr = arrival
        k = self.nord
        if k == len(self.olog):
            self.olog, self.osent, self.oseq = (K.grow_array(a, 0)
                                                for a in (self.olog, self.osent, self.oseq))
            self._logs_moved()
        # one tuple assignment, in ORDER_DTYPE's field order (a field at a time costs 10x more)
        self.olog[k] = (arrival, oid, price, qty, self.symbol if symbol is None else symbol,
                        self.trader, kind, otype, tif, flags, side, stop_price, display_qty,
                        min_qty, expire_ts, 0)   # phase 0
        self.osent[k] = local
        self.nord = k + 1

    def _deliver(self, until: int = _INF) -> None:
        """Hand the strategy its new execution reports and fills in engine order (by seq:
        a message's events, then its fills); each message that filled it takes one response
        sample at its ts, which is when the strategy learns of the fill (plus that latency).
        With a response latency of its own (``split_response``) only the reports due by local
        time ``until`` go now (``_stamp``/``_release``); the rest wait for a later callback."""
        a = self.arrays
        f1, e1 = int(a.scnt[0]), int(a.scnt[1])
        if self.split_response:
            self._stamp(f1, e1)
            self._release(until)
            return
        f, e = self.fdone, self.edone
        if f == f1 and e == e1:
            return
        self.fdone, self.edone = f1, e1
        self._quote_events(e, e1)
        frows = a.sf[f:f1].tolist()
        erows = a.se[e:e1].tolist()
        nf, ne = len(frows), len(erows)
        fk = ek = 0
        while fk < nf or ek < ne:
            seq = min(frows[fk][0] if fk < nf else _INF, erows[ek][0] if ek < ne else _INF)
            while ek < ne and erows[ek][0] == seq:
                self._report(erows[ek], e + ek)
                ek += 1
            if fk < nf and frows[fk][0] == seq:
                self._fills_seen(frows[fk][1])
                while fk < nf and frows[fk][0] == seq:
                    self._fill(frows[fk])
                    fk += 1

    def _stamp(self, f1: int, e1: int) -> None:
        """Give each message that made new strategy reports (se[estamp:e1], sf[fstamp:f1]) its
        due time: its ts plus one response sample, never before the previous message's (one
        connection delivers in order), queued in ``pending``."""
        a = self.arrays
        f, e = self.fstamp, self.estamp
        if f == f1 and e == e1:
            return
        self.fstamp, self.estamp = f1, e1
        fseq, fts = a.sf["seq"][f:f1].tolist(), a.sf["ts"][f:f1].tolist()
        eseq, ets = a.se["seq"][e:e1].tolist(), a.se["ts"][e:e1].tolist()
        fk = ek = 0
        while fk < len(fseq) or ek < len(eseq):
            seq = min(fseq[fk] if fk < len(fseq) else _INF, eseq[ek] if ek < len(eseq) else _INF)
            ts = fts[fk] if fk < len(fseq) and fseq[fk] == seq else ets[ek]
            while ek < len(eseq) and eseq[ek] == seq:
                ek += 1
            while fk < len(fseq) and fseq[fk] == seq:
                fk += 1
            due = self.last_due = max(ts + self.response.draw(ts), self.last_due)
            self.pending.append((due, ts, e + ek, f + fk))

    def _release(self, until: int) -> None:
        """Deliver the queued reports due by local time ``until``, in order, each message's at
        its due time (``ctx.now``): events (``_report``), then fills."""
        a, ctx = self.arrays, self.ctx
        while self.pending and self.pending[0][0] <= until:
            due, ts, e1, f1 = self.pending.popleft()
            e, f = self.edone, self.fdone
            self.edone, self.fdone = e1, f1
            ctx.now, self.obs_ts = due, ts
            self._quote_events(e, e1)
            for k, row in enumerate(a.se[e:e1].tolist(), e):
                if row[_E_EVENT] in _SYMBOL_EVENTS:
                    if self._on_phase is not None:
                        self._on_phase(ctx, a.se[k])
                    continue
                ctx._apply_event(row)
                if self._on_order is not None:
                    self._on_order(ctx, a.se[k])
            for row in a.sf[f:f1].tolist():
                self._fill(row)

    def _logs_moved(self) -> None:
        """Hook: the order log arrays were replaced by bigger ones."""

    def check_new(self, order_type, stop_price, display_qty, min_qty, expire_ts) -> None:
        """Hook: raise UsageError for a NEW this loop cannot run (the engine judges the rest)."""

    def _start(self) -> None:
        ctx = self.ctx
        ctx.now = self.obs_ts
        self.strategy.on_start(ctx)
        if self.timer_ns:
            ctx.set_timer(ctx.now + self.timer_ns)

    def _wake(self, obs: int) -> None:
        """on_book for an observation at exchange time ``obs`` (``self.top`` holds the book),
        after the reports due by then (with a split response latency; else ``_deliver`` has
        handed over every report made before ``obs``)."""
        local = obs + self.feed.draw(obs)
        if self.split_response:
            self._release(local)
        self.obs_ts = obs
        ctx = self.ctx
        ctx.now = local
        ctx.book = book = MarketView(obs, local, self.top.tolist(), self.engine, self.symbol)
        if self.multi:
            self._books(obs, local)
        self.strategy.on_book(ctx, book)

    def _fire_timer(self) -> None:
        """on_timer for the first timer (``self.top`` holds the book at its observation)."""
        ctx = self.ctx
        obs, _, local = heapq.heappop(ctx._timers)
        if self.split_response:
            self._release(local)
        self.obs_ts = obs
        ctx.now = local
        ctx.book = MarketView(obs, local, self.top.tolist(), self.engine, self.symbol)
        if self.multi:
            self._books(obs, local)
        self.strategy.on_timer(ctx, local)
        if self.timer_ns:
            ctx.set_timer(local + self.timer_ns)

    def _books(self, obs: int, local: int) -> None:
        """Several instruments: ``ctx.books`` gets every traded symbol's book at this wake-up
        (the first one's is ``ctx.book``), and the others' tops join their marks."""
        ctx = self.ctx
        ctx.books = {self.names[self.symbol]: ctx.book}
        st, top = self.arrays.state, np.zeros(4, np.int64)
        for sid, marks in self.sym_marks.items():
            C.read_top(st.books, st.levels, st.ladder_levels, sid, top)
            t = top.tolist()
            marks.append((obs, *t))
            ctx.books[self.names[sid]] = MarketView(obs, local, t, self.engine, sid)

    def _bind_callbacks(self) -> None:
        """Look up once which callbacks do something: building the numpy row for ``on_order``
        and the ``Fill`` for ``on_fill`` costs more than the rest of a delivery."""
        cls = type(self.strategy)
        inst = vars(self.strategy)
        self._on_fill = (self.strategy.on_fill if "on_fill" in inst
                         or cls.on_fill is not Strategy.on_fill else None)
        self._on_phase = (self.strategy.on_phase if "on_phase" in inst
                          or cls.on_phase is not Strategy.on_phase else None)
        self._on_order = self._quote_slots = None
        if "on_order" not in inst and cls.on_order is QuoteStrategy.on_order:
            # QuoteStrategy.on_order applies quoting.quote_report to one event; the driver
            # applies it to each delivery's events in one call (``_quote_events``)
            self._quote_slots = self.strategy.slots
        elif "on_order" in inst or cls.on_order is not Strategy.on_order:
            self._on_order = self.strategy.on_order

    def _quote_events(self, e0: int, e1: int) -> None:
        """Apply the strategy's events se[e0:e1] to a QuoteStrategy's slots (no-op for any other
        strategy). Its slots are read only at wake-ups, so a delivery's events go in one call."""
        if self._quote_slots is not None and e1 > e0:
            quote_reports(self.arrays.se, e0, e1, self._quote_slots)

    def _report(self, row: tuple, k: int) -> None:
        """One execution report (row ``k`` of the strategy's events) to the context and the
        strategy; a symbol event (PHASE, INDICATIVE, UNCROSS) goes to ``on_phase`` instead."""
        if row[_E_EVENT] in _SYMBOL_EVENTS:
            if self._on_phase is not None:
                self._fills_seen(row[_E_TS])   # learnt one feed latency after its message
                self._on_phase(self.ctx, self.arrays.se[k])
            return
        self.ctx._apply_event(row)
        if self._on_order is not None:
            self._on_order(self.ctx, self.arrays.se[k])

    def _fills_seen(self, ts: int) -> None:
        """The strategy learns of the fills of a message at exchange time ``ts`` one response
        latency later (the feed stream itself unless the model splits them)."""
        self.ctx.now = ts + self.response.draw(ts)
        self.obs_ts = ts

    def _fill(self, row: tuple) -> None:
        ctx = self.ctx
        fills = ctx._apply_fill(row, self.trader, ctx.now, self._on_fill is not None)
        for fill in fills:
            self._on_fill(ctx, fill)

    def phase_of(self, symbol) -> Phase:
        """Return the engine's current Phase of ``symbol`` (id or name; None: the traded one)."""
        return Phase(int(self.engine.phase(self.symbol if symbol is None else symbol)))

    def indicative_of(self, symbol) -> tuple[int, int, int]:
        """Return the engine's last published (price, qty, surplus) of ``symbol`` (None: the
        traded one); (0, 0, 0) outside a call."""
        return tuple(int(v) for v in self.engine.indicative(self.symbol if symbol is None
                                                            else symbol))

    def _timer_obs(self, last_ts: int) -> int:
        """Observation ts of the first timer, or _INF when none can fire (time ends with the
        data: a timer observing after the last market message never fires)."""
        timers = self.ctx._timers
        if timers and len(self.msgs) and timers[0][0] <= last_ts:
            return timers[0][0]
        return _INF


class _EngineDriver(_Driver):
    """The Python-strategy loop on L3 flow: ``kernels.drive`` runs the merged stream in
    numba from one callback to the next, so Python runs once per wake-up (and, for a strategy
    that reacts to fills, once per strategy message and per message that filled it)."""

    def __init__(self, engine, msgs, strategy, lat, trader, symbol, terms, names=None,
                 terms_by=None):
        self.arrays = C.EngineArrays(engine)
        super().__init__(engine, msgs, strategy, lat, trader, symbol, terms, names, terms_by)
        # a strategy with its own on_fill/on_order may act between wake-ups, so the kernel stops
        # after every message that fills it; any other runs from one wake-up to the next
        self.react = self._on_fill is not None or self._on_order is not None
        ds = self.ds = np.zeros(C.D_SIZE, np.int64)
        ds[C.D_NEXT_WAKE] = self.every if self.every else -1
        ds[C.D_TOBS] = _INF
        ds[C.D_TRADER], ds[C.D_ID_BASE], ds[C.D_SYMBOL] = trader, ID_BASE, symbol
        ds[C.D_REACT] = int(self.react)
        ds[C.D_PREFETCH] = int(getattr(engine, "prefetch_distance", 0))
        ds[C.D_PHASE] = int(self._on_phase is not None)
        self._ts = msgs["ts"]
        self._args = None
        self._call = None
        self._call_types = None

    def _logs_moved(self) -> None:
        self._args = None

    def _kernel_args(self):
        a = self.arrays
        return (self.msgs, self.olog, self.oseq, self.ds, *a.state, a.fills, a.l2, a.events,
                a.cnt, a.sf, a.se, a.scnt, a.live, a.lcnt, self.marks, self.top)

    def run(self) -> None:
        self._start()
        ds, every = self.ds, self.every
        last_ts = int(self.msgs["ts"][-1]) if len(self.msgs) else 0
        while True:
            ds[C.D_NORD] = self.nord
            ds[C.D_TOBS] = self._timer_obs(last_ts)
            if self._args is None:      # first call, or an array was replaced by a bigger one
                self._args = self._kernel_args()
                types = C.arg_types(C.drive, self._args)
                # why compare: the prepared entry point skips numba's type checks, so arrays of
                # another kind (a replacement that is not contiguous, say) must get their own
                if self._call is None or types != self._call_types:
                    self._call, self._call_types = C.prepared(C.drive, self._args), types
            status = self._call(*self._args)
            if status not in _DRIVE_STOPS:
                self._grow(status)
                continue
            # a wake-up or timer releases the reports due by its own local time (_wake, _fire_timer)
            self._deliver(_MIN if status == C.WAKE or status == C.TIMER else _INF)
            if status == C.WAKE:
                self._wake(int(self._ts[int(ds[C.D_I]) - 1]))
                ds[C.D_NEXT_WAKE] += every
                self._tick(int(ds[C.D_I]))
            elif status == C.TIMER:
                self._fire_timer()
            elif status == K.OK:
                self.qh, self.nmark = int(ds[C.D_QH]), int(ds[C.D_NMARK])
                return

    def _grow(self, status: int) -> None:
        if status == C.NEED_LOG:
            self.marks = K.grow_array(self.marks, 0)
        else:
            self.arrays.grow(status)
        self._args = None


_DRIVE_STOPS = frozenset((K.OK, C.WAKE, C.TIMER, C.NOTE, C.HIT, C.PHASE_NOTE))


class _L2Driver(_Driver):
    """The Python-strategy loop on L2 flow: ``l2loop.drive_l2`` runs market events (L2 rows and
    trades) and the strategy's messages over an ``l2queue.L2Sim`` in numba from one callback to
    the next; the strategy's messages go to the queue model instead of the engine."""

    def __init__(self, sim, events, strategy, lat, trader, symbol, terms, wakes, name=None):
        super().__init__(sim, events, strategy, lat, trader, symbol, terms,
                         {symbol: name or str(symbol)})
        self.arrays = sim
        self.wakes = wakes     # ``l2queue.message_ends`` of ``events``

    def check_new(self, order_type, stop_price, display_qty, min_qty, expire_ts) -> None:
        """Raise UsageError for a stop, stop-limit or iceberg: the L2 model has no trigger or
        hidden quantity for them (min_qty, DAY and GTD run with the engine's semantics)."""
        if order_type in (OrderType.STOP, OrderType.STOP_LIMIT):
            raise UsageError(f"order_type={OrderType(order_type).name.lower()}: stop orders are "
                             "not modelled on L2-only flow (use L3 flow, or send the order "
                             "yourself when the trade prices reach the stop)")
        if display_qty:
            raise UsageError("display_qty: icebergs are not modelled on L2-only flow (an "
                             "aggregate book has no hidden quantity)")

    def phase_of(self, symbol) -> Phase:
        """L2 flow has no phases: always CONTINUOUS."""
        return Phase.CONTINUOUS

    def indicative_of(self, symbol) -> tuple[int, int, int]:
        """L2 flow has no calls: always (0, 0, 0)."""
        return (0, 0, 0)

    def run(self) -> None:
        from exsim.replay.backtesting import l2loop as L
        sim, ds = self.engine, np.zeros(L.D_SIZE, np.int64)
        ev = self.msgs
        n = len(ev)
        last_ts = int(ev["ts"][-1]) if n else 0
        # ``every`` counts market messages (a whole depth diff, or one trade), and a wake-up
        # comes only at a message's end: a half-applied diff can show a crossed book
        wakes = np.ascontiguousarray(self.wakes[self.every - 1::self.every]) if self.every \
            else np.zeros(0, np.int64)
        ds[L.D_TRADER] = self.trader
        # a strategy with its own on_fill/on_order may act between wake-ups, so the kernel stops
        # after every message that fills it; any other runs from one wake-up to the next
        ds[L.D_REACT] = int(self._on_fill is not None or self._on_order is not None)
        self._start()
        while True:
            ds[L.D_NORD] = self.nord
            ds[L.D_TOBS] = self._timer_obs(last_ts)
            status = L.drive_l2(ev, wakes, self.olog, self.oseq, ds, sim.px, sim.bqty, sim.best,
                                sim.so, sim.sf, sim.se, sim.scnt, sim.st, self.marks, self.top)
            if status == C.NEED_LOG:
                self.marks = K.grow_array(self.marks, 0)
                continue
            if status not in _DRIVE_STOPS:
                sim.grow(status)
                continue
            # a wake-up or timer releases the reports due by its own local time (_wake, _fire_timer)
            self._deliver(_MIN if status == C.WAKE or status == C.TIMER else _INF)
            if status == C.WAKE:
                self._wake(int(ev["ts"][int(ds[L.D_I]) - 1]))
                ds[L.D_WAKE] += 1
                self._tick(int(ds[L.D_I]))
            elif status == C.TIMER:
                self._fire_timer()
            elif status == K.OK:
                self.qh, self.nmark = int(ds[L.D_QH]), int(ds[L.D_NMARK])
                return


# the add_symbol options an L2 backtest uses (no engine runs: the rest would mean nothing)
L2_SYMBOL_KEYS = frozenset(("name", "tick_size", "currency", "tick_value", "maker_bps",
                            "taker_bps", "session_close"))


def l2_symbol_spec(flow, symbols) -> dict:
    """Return the symbol options of an L2 backtest on ``flow`` (an ``L2Flow``): ``symbols[0]``
    over the flow's own (name, tick size and, when the flow knows its quote currency, tick and
    lot, that currency with tick value = tick x lot). A given currency without a tick value
    takes tick_size x the flow's lot. Raises UsageError for more than one symbol or an option
    an L2 backtest does not use."""
    from decimal import Decimal
    spec = {"name": flow.name, "tick_size": flow.tick_size}
    lot = float(Decimal(flow.lot)) if flow.lot else 1.0
    if flow.currency and flow.tick and flow.lot:
        spec.update(currency=flow.currency, tick_value=float(Decimal(flow.tick) * Decimal(flow.lot)))
    if symbols is None:
        return spec
    given = symbol_specs(symbols, 1)
    if len(given) != 1:
        raise UsageError(f"symbols: an L2 flow has one symbol; got {len(given)}")
    extra = sorted(set(given[0]) - L2_SYMBOL_KEYS)
    if extra:
        raise UsageError(f"symbols[0]: {', '.join(extra)} do(es) not apply to L2 flow (no engine "
                         f"runs); it takes {', '.join(sorted(L2_SYMBOL_KEYS))}")
    out = {**{k: v for k, v in spec.items() if k not in ("currency", "tick_value")}, **given[0]}
    if out.get("currency") and out.get("tick_value") is None:
        out["tick_value"] = float(out["tick_size"]) * lot
    return out


def _session_close(spec: dict) -> int:
    """The ``session_close`` of an L2 symbol ``spec`` (0 when unset). Raises UsageError unless
    it is whole ns after midnight in [0, 86,400 s)."""
    close = spec.get("session_close", 0)
    if isinstance(close, bool) or not isinstance(close, (int, np.integer)) or \
            not 0 <= close < 86_400 * 10**9:
        raise UsageError(f"session_close must be ns after midnight in [0, 86_400 * 10^9); got "
                         f"{close!r}")
    return int(close)


def _l2_money(flow, spec, fees_bps):
    """The ``Money`` of an L2 backtest: ``money_for`` the symbol ``spec``, with the flow's tick
    and lot as decimal steps (prices and sizes print as decimals when both are known)."""
    import dataclasses
    money = money_for(spec, fees_bps)
    if flow.tick and flow.lot:
        money = dataclasses.replace(money, price_step=flow.tick, qty_step=flow.lot)
    return money
