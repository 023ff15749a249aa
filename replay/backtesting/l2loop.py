"""The compiled loops of an L2 backtest: market events (``l2queue.prepare``) and the strategy's
messages in arrival order, over ``l2queue``'s book and queue model, inside numba.

- ``drive_l2`` (Python strategies): runs the merged stream from one Python callback to the next
  and returns at a wake-up or a timer (top of book and mark written), after each strategy
  message and each market event that filled the strategy when the strategy reacts to fills, or
  at the end. Python runs once per wake-up: nothing per market event in between.
- ``run_quotes_l2`` (``@njit`` quote strategies, ``fast=True``): the same loop with the quote
  function called inside numba at each wake-up; it returns to Python only when an array must
  grow, then resumes from its state arrays.

Both take their order of work from ``kernels.first_due`` (the L3 loops' rule), wake only at the
message ends they are given (``wakes``: indices into the events, every ``every``-th end of
``l2queue.message_ends``), and apply a quote strategy's rules through ``quoting`` (the functions
the Python path calls), so a quote function gives the same bytes on both paths.

Invariants: a market event or strategy message is applied whole or not at all (growth statuses
come before it starts); ``ds`` / ``st`` hold every loop variable, so a return to Python loses
nothing. This module compiles only when an L2 backtest runs (the driver imports it then).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.state import OK

from exsim.replay.backtesting.kernels import (HIT, NEED_DRAWS, NEED_LOG, NOTE, S_FEED_CUR, S_I,
                                              S_NEXT_WAKE, S_NMARK, S_NORD, S_POS,
                                              S_QH, S_SLOT, STEP_MARKET, STEP_ORDER, STEP_WAKE,
                                              TIMER, WAKE, _first_after, _send_quotes,
                                              entry_room, first_due)
from exsim.replay.backtesting.l2queue import T_SEQ, advance_l2, advance_orders, read_top
from exsim.replay.backtesting.latency import DRAWS, sample
from exsim.replay.backtesting.quoting import SLOTS, account, quote_reports, reconcile

# numba freezes the statuses and slots of these modules into the loops but keys them on this file
guard(__name__, __file__, deps=("exsim.exchange.schema", "exsim.exchange.state",
                                "exsim.replay.backtesting.kernels",
                                "exsim.replay.backtesting.l2queue",
                                "exsim.replay.backtesting.latency",
                                "exsim.replay.backtesting.quoting",
                                "exsim.replay.backtesting.queue_models"))

__all__ = ["drive_l2", "run_quotes_l2", "D_I", "D_QH", "D_NORD", "D_WAKE", "D_TOBS", "D_NMARK",
           "D_TRADER", "D_REACT", "D_SIZE"]

# slots of drive_l2's int64 state ``ds``: the kernel moves I, QH and NMARK; Python sets NORD
# (after sending), WAKE (the index in ``wakes`` of the next wake-up) and TOBS (the first due
# timer's observation ts) before a call
D_I, D_QH, D_NORD, D_WAKE, D_TOBS, D_NMARK, D_TRADER, D_REACT = range(8)
D_SIZE = 8

_BIG = np.iinfo(np.int64).max


@njit(cache=True)
def _mark(px, bqty, best, top, marks, counts, at, obs):
    """Read the top of book into ``top`` and append it to ``marks`` as seen at ``obs``."""
    read_top(px, bqty, best, top)
    m = marks[counts[at]]
    m.ts = obs
    m.bid, m.bid_qty, m.ask, m.ask_qty = top[0], top[1], top[2], top[3]
    counts[at] += 1


@njit(cache=True)
def _next_step(ev, wakes, w, i, olog, qh, nord, tobs):
    """What goes next (``first_due``) with market event ``i``, strategy message ``qh`` of
    ``nord`` and wake-up ``w`` due: returns (step, the next wake-up's event index or -1, the
    wake-up's observation ts, the strategy message's arrival; int64 max for none)."""
    nw = wakes[w] if w < len(wakes) else -1
    t_next = ev[i].ts if i < len(ev) else _BIG
    wake = i == nw and i > 0
    wake_obs = ev[i - 1].ts if wake else _BIG
    order_ts = olog[qh].ts if qh < nord else _BIG
    return first_due(t_next, order_ts, wake, wake_obs, tobs), nw, wake_obs, order_ts


@njit(cache=True)
def drive_l2(ev, wakes, olog, oseq, ds, px, bqty, best, so, sf, se, scnt, sst, marks, top):
    """Run the merged stream up to the next Python callback; return why it stopped.

    WAKE: ``ev[ds[D_I] - 1]`` ended the message of the next wake-up (``wakes[ds[D_WAKE]]``);
    TIMER: the first timer is due (observation at ``ds[D_TOBS]``); both wrote ``top`` and a
    mark. NOTE / HIT (only with ``ds[D_REACT]``): a strategy message / a market event that
    filled the strategy was just applied. OK: everything is applied. Anything else: what to
    grow (``L2Sim.grow``, or NEED_LOG: the marks); call again afterwards, nothing is lost.
    """
    n = len(ev)
    trader = ds[D_TRADER]
    react = ds[D_REACT] != 0
    while True:
        i = ds[D_I]
        qh = ds[D_QH]
        tobs = ds[D_TOBS]
        step, nw, wake_obs, order_ts = _next_step(ev, wakes, ds[D_WAKE], i, olog, qh,
                                                  ds[D_NORD], tobs)
        if step == STEP_ORDER:
            status, _ = advance_orders(olog, qh, qh + 1, px, bqty, best, so, sf, se, scnt, sst,
                                       trader)
            if status != OK:
                return status
            oseq[qh] = sst[T_SEQ]
            ds[D_QH] = qh + 1
            if react:
                return NOTE
            continue
        if step != STEP_MARKET:
            if ds[D_NMARK] + 1 > len(marks):
                return NEED_LOG
            _mark(px, bqty, best, top, marks, ds, D_NMARK, wake_obs if step == STEP_WAKE else tobs)
            return WAKE if step == STEP_WAKE else TIMER
        if i >= n:
            return OK
        # market events up to the next strategy event: the next strategy message's arrival or
        # the first timer's observation (events with ts <= it go first), or the next wake-up
        lim = min(tobs, order_ts)
        stop = n if lim == _BIG else _first_after(ev, i, n, lim)
        if nw > i:
            stop = min(stop, nw)
        status, j = advance_l2(ev, i, stop, px, bqty, best, so, sf, se, scnt, sst, trader, react)
        ds[D_I] = j
        if status == HIT:
            return HIT
        if status != OK:
            return status


@njit(cache=True)
def _fill_samples(sf, f0, f1, feed_mode, feed_times, feed_vals, st):
    """Take one feed sample per strategy message or market event that filled the strategy (its
    fills sf[f0:f1], at the fill's ts), in order: the samples the Python path takes."""
    last = np.int64(-1)
    for k in range(f0, f1):
        if sf[k].seq != last:
            last = sf[k].seq
            _, st[S_FEED_CUR] = sample(feed_mode, feed_times, feed_vals, st[S_FEED_CUR],
                                       sf[k].ts)


@njit(cache=True)
def _room(st, olog, marks, feed_mode, feed_vals, ord_modes, ord_vals):
    """OK when one step has room (1 feed and 2 order samples, 2 logged orders, 1 mark), else
    NEED_LOG or NEED_DRAWS."""
    if st[S_NORD] + 2 > len(olog) or st[S_NMARK] + 1 > len(marks):
        return NEED_LOG
    if feed_mode == DRAWS and st[S_FEED_CUR] + 1 > len(feed_vals):
        return NEED_DRAWS
    return OK if entry_room(st, ord_modes, ord_vals, 2) else NEED_DRAWS


@njit(cache=True)
def run_quotes_l2(fn, ev, wakes, st, fst, px, bqty, best, so, sf, se, scnt, sst, olog, osent,
                  oseq, marks, feed_mode, feed_times, feed_vals, ord_modes, ord_times, ord_vals,
                  state, params, quote, top, trader, symbol, terms):
    """The merged loop of an ``@njit`` quote strategy on L2 flow; returns OK when done or what to
    grow (NEED_LOG: the order log or the marks; NEED_DRAWS: a latency stream; the ``l2queue``
    statuses: ``L2Sim.grow``).

    ``fn(local_ts, bid, bid_qty, ask, ask_qty, position, cash, state, params, quote)`` writes
    [bid_px, bid_qty, ask_px, ask_qty] into ``quote`` at each wake-up (``wakes``; ``st[S_NEXT_WAKE]``
    is the index of the next one), one feed latency after the book it sees; its quotes are
    reconciled and sent as on L3 (``kernels._send_quotes``, order-entry latency by Kind). ``st`` has ``kernels.run_quotes``'
    layout; ``sst`` is the ``L2Sim``'s state.
    """
    n = len(ev)
    slots = st[S_SLOT:S_SLOT + SLOTS]   # views: the quote rules update ``st`` in place
    pos = st[S_POS:S_POS + 1]
    while True:
        room = _room(st, olog, marks, feed_mode, feed_vals, ord_modes, ord_vals)
        if room != OK:
            return room
        i = st[S_I]
        qh = st[S_QH]
        w = st[S_NEXT_WAKE]
        step, nw, obs, order_ts = _next_step(ev, wakes, w, i, olog, qh, st[S_NORD], _BIG)
        if step == STEP_WAKE:
            lat, st[S_FEED_CUR] = sample(feed_mode, feed_times, feed_vals, st[S_FEED_CUR], obs)
            local = obs + lat
            _mark(px, bqty, best, top, marks, st, S_NMARK, obs)
            fn(local, top[0], top[1], top[2], top[3], st[S_POS], fst[0], state, params, quote)
            actions = reconcile(slots, quote)
            _send_quotes(olog, osent, st, slots, actions, local, symbol, trader, ord_modes,
                         ord_times, ord_vals)
            st[S_NEXT_WAKE] = w + 1
            continue
        f0 = scnt[0]
        e0 = scnt[1]
        if step == STEP_MARKET:
            if i >= n:
                return OK
            stop = n if order_ts == _BIG else _first_after(ev, i, n, order_ts)
            if nw > i:
                stop = min(stop, nw)
            if feed_mode == DRAWS:
                # at most one feed sample per event that fills the strategy: stay within those drawn
                stop = min(stop, i + len(feed_vals) - st[S_FEED_CUR])
            stop = max(stop, i + 1)
            status, j = advance_l2(ev, i, stop, px, bqty, best, so, sf, se, scnt, sst, trader,
                                   False)
            st[S_I] = j
        else:
            status, _ = advance_orders(olog, qh, qh + 1, px, bqty, best, so, sf, se, scnt, sst,
                                       trader)
            if status == OK:
                oseq[qh] = sst[T_SEQ]
                st[S_QH] = qh + 1
        # whatever was applied before a growth status is accounted now (an event is whole)
        quote_reports(se, e0, scnt[1], slots)
        if scnt[0] > f0:
            account(sf, f0, scnt[0], trader, pos, fst, terms)
            _fill_samples(sf, f0, scnt[0], feed_mode, feed_times, feed_vals, st)
        if status != OK:
            return status
