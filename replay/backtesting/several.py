"""Several L2 flows, one symbol each, traded from one account: ``backtest([spot, future], ...)``.

``backtest_l2_several`` checks and loads the flows (each an L2-only flow: a Binance capture,
``BinanceData`` or ``L2Flow``; symbol ids 0, 1 ... in the order given, names distinct, one money
unit), runs ``L2SeveralDriver`` and builds the account's result (``result.account_result``).

``L2SeveralDriver`` keeps one ``l2queue.L2Sim`` per flow and runs each with the unchanged
``l2loop.drive_l2`` up to the next wake-up or timer, so every symbol's book, queue model and
strategy messages behave as on one flow; what it adds is the merge in time (see its docstring).

Invariants: the one order log keeps arrival order and one connection's FIFO across symbols
(``driver._Driver.send``); a symbol's messages reach its sim in that order; every sim stops at
the same instants, so all books at a callback are of one time. Known limits: Python strategies
only (no njit path), reports are handed over at callbacks (``on_fill`` does not stop the run at
the filling message), no response latency of its own.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange import state as K
from exsim.exchange.errors import UsageError

import exsim.replay.backtesting.kernels as C
from exsim.replay.backtesting.drivers import (_E_TS, _INF, _L2Driver, _l2_money, _load_flow,
                                              _session_close, l2_symbol_spec)
from exsim.replay.backtesting.kernels import ID_BASE
from exsim.replay.backtesting.latency import streams_of
from exsim.replay.backtesting.quoting import quote_reports
from exsim.replay.backtesting.result import account_result, strategy_label
from exsim.replay.backtesting.strategy import Context, MarketView, Strategy

__all__ = ["backtest_l2_several", "L2SeveralDriver"]


def backtest_l2_several(flows, strategy, model, trader, fees_bps, symbol, symbols, queue_model,
                         fast, store_dir, engine_options, progress):
    """Several L2 flows (one symbol each) traded from one account on the Python path; return
    the account's BacktestResult (``account_result``). Raises UsageError for a flow that is not
    L2-only, two flows of one name, symbols of different money units, or an option this path
    does not take (fast=True, store_dir, engine_options, a response latency of its own)."""
    from exsim.replay.backtesting.l2queue import L2Flow, L2Sim, prepare
    if not isinstance(strategy, Strategy):
        raise UsageError(f"strategy must be a replay.Strategy instance; got {type(strategy)}")
    if not 0 <= int(trader) < 2**32:
        raise UsageError(f"trader must fit in uint32; got {trader}")
    if fast or store_dir is not None or engine_options:
        raise UsageError("a list of L2 flows runs on the Python path, not journaled, with no "
                         "engine: fast=True, store_dir and engine_options do not apply")
    if not flows:
        raise UsageError("flow=[...] must hold at least one L2 flow")
    if symbols is not None and (not isinstance(symbols, (list, tuple)) or
                                len(symbols) != len(flows)):
        raise UsageError("symbols: with a list of flows, one dict per flow, in the same order")
    lat = streams_of(model)
    if lat.split_response:
        raise UsageError("a list of L2 flows: a response latency of its own is not modelled "
                         "here yet (leave SplitLatency(response=) unset)")
    loaded, specs, infos = [], [], []
    for k, f in enumerate(flows):
        fl, _, _, info, _ = _load_flow(f)
        if not isinstance(fl, L2Flow):
            raise UsageError(f"flow[{k}] is not L2-only flow: a list of flows takes L2 flows "
                             "(Binance captures, BinanceData, L2Flow); for several symbols of "
                             "one L3 flow pass it once with symbol=[...]")
        loaded.append(fl)
        specs.append(l2_symbol_spec(fl, None if symbols is None else [symbols[k]]))
        infos.append(info)
    names = [sp["name"] for sp in specs]
    if len(set(names)) != len(names):
        raise UsageError(f"two flows have one symbol name ({names}); name them with "
                         "symbols=[{'name': ...}, ...]")
    if symbol is not None and (not isinstance(symbol, (list, tuple)) or
                               sorted(map(str, symbol)) != sorted(names)):
        raise UsageError(f"symbol: with a list of flows, None or a list of all their names "
                         f"(the first is the primary one); they are {names}")
    order = list(range(len(names))) if symbol is None else [names.index(str(s)) for s in symbol]
    loaded, specs, infos = ([x[k] for k in order] for x in (loaded, specs, infos))
    names = [names[k] for k in order]
    monies = [_l2_money(fl, sp, fees_bps) for fl, sp in zip(loaded, specs)]
    if len({m.unit for m in monies}) > 1:
        raise UsageError("one account holds one cash in one currency; these flows' money is in "
                         + ", ".join(f"{n}: {m.unit}" for n, m in zip(names, monies)))
    preps = [prepare(fl) for fl in loaded]
    sims = [L2Sim(p.events, queue_model, int(trader), symbol=k,
                  session_close=_session_close(sp), px=p.px)
            for k, (p, sp) in enumerate(zip(preps, specs))]
    d = L2SeveralDriver(sims, preps, strategy, lat, int(trader), names,
                         [m.terms() for m in monies])
    d.progress = progress
    d.run()
    n_events = sum(len(p.events) for p in preps)
    if progress is not None:
        progress(n_events, n_events)
    fills, events = d.outputs()
    meta = {"latency": model.describe(), "trader": int(trader), "symbol": 0,
            "symbol_name": names[0], "symbols": names, "fees_bps": fees_bps,
            "n_market": int(n_events), "path": "python", **queue_model.describe(),
            "strategy": strategy_label(strategy), "kind": "l2", "flows": infos}
    nord = d.nord
    marks = [d.marks_of(k) for k in range(len(names))]
    return account_result(d.olog[:nord].copy(), d.osent[:nord].copy(), d.oseq[:nord].copy(),
                          fills, events, marks[0], int(trader), meta,
                          [(k, names[k], monies[k], marks[k]) for k in range(len(names))])


class L2SeveralDriver(_L2Driver):
    """The Python-strategy loop over several L2 flows, one ``L2Sim`` each (symbol ids 0, 1 ...
    in the order given), from one account.

    Every step runs each symbol's ``l2loop.drive_l2`` up to one instant: the next wake-up or
    timer. Wake-ups come after every ``every``-th message of the flows merged by ts (ties in
    flow order); at one, the symbol whose message it is stops right after that message and the
    others after every event with ts <= its ts. Each symbol's strategy messages (routed from the
    one order log, which keeps arrival order and one connection's FIFO across symbols) go in at
    their arrival, as on one flow. Reports are handed over at wake-ups and timers, in ts order
    (ties: flow order, then seq); ``on_fill``/``on_order`` run then too (not right after the
    message that filled: a strategy reacts at its next callback). Marks: one per wake-up or timer
    per symbol."""

    def __init__(self, sims, preps, strategy, lat, trader, names, terms):
        self.sims, self.preps = sims, preps
        super().__init__(sims[0], preps[0].events, strategy, lat, trader, 0, terms[0],
                         preps[0].ends, names[0])
        self.names = dict(enumerate(names))
        self.multi = True
        self.ctx = Context(self, ID_BASE, terms[0], {k: (names[k], t) for k, t in enumerate(terms)})
        self.sym_marks = {}
        starts = [int(p.events["ts"][0]) for p in preps if len(p.events)]
        self.obs_ts = min(starts) if starts else 0
        self.sym = [{"olog": C.new_order_log(64), "oseq": np.zeros(64, np.int64), "nord": 0,
                     "glob": [], "ds": np.zeros(0, np.int64), "fdone": 0, "edone": 0,
                     "marks": np.zeros(len(self.marks), C.MARK_DTYPE), "top": np.zeros(4, np.int64)}
                    for _ in sims]
        self.routed = 0

    def _route(self) -> None:
        """Copy the order log's new messages to their symbol's own log (arrival order kept)."""
        while self.routed < self.nord:
            g = self.routed
            s = self.sym[int(self.olog[g]["symbol"])]
            k = s["nord"]
            if k == len(s["olog"]):
                s["olog"], s["oseq"] = K.grow_array(s["olog"], 0), K.grow_array(s["oseq"], 0)
            s["olog"][k] = self.olog[g]
            s["glob"].append(g)
            s["nord"] = k + 1
            self.routed = g + 1

    def _wake_points(self):
        """(ts, symbol, event index) of every ``every``-th message end over all flows, by ts."""
        if not self.every:
            return [], [], []
        ts = np.concatenate([p.events["ts"][p.ends - 1] for p in self.preps])
        sym = np.concatenate([np.full(len(p.ends), k) for k, p in enumerate(self.preps)])
        idx = np.concatenate([p.ends for p in self.preps])
        o = np.argsort(ts, kind="stable")[self.every - 1::self.every]
        return ts[o].tolist(), sym[o].tolist(), idx[o].tolist()

    def _advance(self, k: int, until: int, wake_at: int) -> None:
        """Run symbol ``k`` to ``until`` (a stop there writes its mark), or to its wake-up at
        event ``wake_at`` (>= 0), or to its end (``until`` int64 max)."""
        from exsim.replay.backtesting import l2loop as L
        s, sim = self.sym[k], self.sims[k]
        ds = s["ds"]
        if not len(ds):
            ds = s["ds"] = np.zeros(L.D_SIZE, np.int64)
            ds[L.D_TRADER] = self.trader
        ds[L.D_TOBS], ds[L.D_WAKE] = until, 0
        wakes = np.array([wake_at], np.int64) if wake_at >= 0 else np.zeros(0, np.int64)
        while True:
            ds[L.D_NORD] = s["nord"]
            status = L.drive_l2(self.preps[k].events, wakes, s["olog"], s["oseq"], ds, sim.px,
                                sim.bqty, sim.best, sim.so, sim.sf, sim.se, sim.scnt, sim.st,
                                s["marks"], s["top"])
            if status == C.NEED_LOG:
                s["marks"] = K.grow_array(s["marks"], 0)
            elif status in (C.WAKE, C.TIMER, K.OK):
                return
            elif status not in (C.HIT, C.NOTE):
                sim.grow(status)

    def run(self) -> None:
        w_ts, w_sym, w_idx = self._wake_points()
        last_ts = max((int(p.events["ts"][-1]) for p in self.preps if len(p.events)), default=0)
        self._start()
        w = 0
        while True:
            self._route()
            tobs = self._timer_obs(last_ts)
            wake = w < len(w_ts) and w_ts[w] <= tobs
            until = w_ts[w] if wake else tobs
            for k in range(len(self.sims)):
                self._advance(k, until, w_idx[w] if wake and w_sym[w] == k else -1)
            self._deliver()
            if until == _INF:
                break
            self.top = self.sym[0]["top"]
            if wake:
                self._wake(until)
                w += 1
                self._tick(w * self.every)
            else:
                self._fire_timer()
        for s in self.sym:   # each message's seq, in the one log's order
            for j, g in enumerate(s["glob"]):
                self.oseq[g] = s["oseq"][j]

    def _books(self, obs: int, local: int) -> None:
        """``ctx.books``: every symbol's book at this wake-up (``ctx.book`` is the first's)."""
        self.ctx.books = {self.names[k]: MarketView(obs, local, s["top"].tolist(), self.sims[k], k)
                          for k, s in enumerate(self.sym)}

    def _deliver(self, until: int = _INF) -> None:
        """Hand over every symbol's new reports, in ts order (ties: symbol, then seq): each
        message's events, then its fills, seen one response latency after its ts."""
        groups = []
        for k, (s, sim) in enumerate(zip(self.sym, self.sims)):
            f0, e0, f1, e1 = s["fdone"], s["edone"], int(sim.scnt[0]), int(sim.scnt[1])
            s["fdone"], s["edone"] = f1, e1
            if self._quote_slots is not None and e1 > e0:
                quote_reports(sim.se, e0, e1, self._quote_slots)
            rows = {}
            for j, row in enumerate(sim.se[e0:e1].tolist(), e0):
                rows.setdefault(row[0], ([], []))[0].append((j, row))
            for row in sim.sf[f0:f1].tolist():
                rows.setdefault(row[0], ([], []))[1].append(row)
            for seq, (evs, fls) in rows.items():
                ts = fls[0][1] if fls else evs[0][1][_E_TS]
                groups.append((ts, k, seq, evs, fls))
        groups.sort(key=lambda g: g[:3])
        for _, k, _, evs, fls in groups:
            for j, row in evs:
                self.ctx._apply_event(row)
                if self._on_order is not None:
                    self._on_order(self.ctx, self.sims[k].se[j])
            if fls:
                self._fills_seen(fls[0][1])
                for row in fls:
                    self._fill(row)

    def marks_of(self, k: int) -> np.ndarray:
        """Symbol ``k``'s marks (one per wake-up or timer), trimmed."""
        from exsim.replay.backtesting import l2loop as L
        s = self.sym[k]
        n = int(s["ds"][L.D_NMARK]) if len(s["ds"]) else 0
        return s["marks"][:n].copy()

    def outputs(self):
        """(fills, events) of every symbol, in ts order (ties: symbol, then seq)."""
        fills = np.concatenate([sim.sf[: sim.scnt[0]] for sim in self.sims])
        events = np.concatenate([sim.se[: sim.scnt[1]] for sim in self.sims])
        return (fills[np.lexsort((fills["seq"], fills["symbol"], fills["ts"]))].copy(),
                events[np.lexsort((events["seq"], events["symbol"], events["ts"]))].copy())
