"""The numba side of the backtest driver: run market messages through the engine's own arrays.

Both strategy paths use these kernels, so both see exactly the same engine behaviour:
- ``drive`` (Python strategies): the merged loop (market messages and the strategy's messages in
  arrival order) from one Python callback to the next: it returns at a wake-up or a timer (with
  the top of book and the mark written), after each strategy message or market message that
  filled the strategy when the strategy reacts to fills, or at the end. One call per wake-up.
- ``run_quotes`` (``@njit`` strategies): the same merged loop with a quote function called
  inside numba at each wake-up; it returns to Python only when an array must grow, then resumes
  from the state arrays.
Both take their order of work from ``first_due`` (which the Python L2 loop of the driver calls
too) and cut their market slices with ``_slice_end``; ``run_quotes`` applies a quote strategy's
rules through ``replay.backtesting.quoting``, the functions the Python path calls.

Market messages go to ``exchange.kernels.process_batch`` in slices (one call per run of messages
between two strategy events, at most ``CHUNK`` messages so the scratch outputs stay in cache);
each strategy message goes alone, as a one-row view of the order log. When the strategy reacts to
fills, ``drive`` cuts a slice right after each message that might trade with one of the
strategy's live orders (a table kept from its events), so it can stop there if it did. Fills
that involve the strategy's ``trader``, events of the strategy's order ids (``>= id_base``) and
the symbol events (PHASE, INDICATIVE, UNCROSS) of the strategy's symbol are copied into the
strategy's own output arrays; the market's outputs are dropped (re-run the
journal to get them).

Invariants: a message is processed whole or not at all (growth statuses are returned before it
starts); ``st``/``ds``/``fst`` hold every loop variable, so a return to Python loses nothing.
The engine is reached only through its public kernel surface: ``Engine.state`` (the state
arrays, passed to the kernels in ``process_batch``'s order), ``Engine.grow`` and the names
``exchange.state`` exports for kernels that extend the engine (statuses, meta slots, order-index
lookup, prefetch). Statuses: ``K.OK`` and the engine's ``K.NEED_*`` mean what they mean in the
engine; the ones below (from 10 up) are this module's own.
Numba cache: these kernels inline ``exchange.order_index`` (``index_find``/``index_home``),
link ``exchange.kernels.process_batch`` and freeze ``exchange.book``/``exchange.schema``
constants, but numba keys their cache on this file only; ``exchange._cache_guard.guard`` (called
below) deletes this module's cached kernels whenever one of those files changes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange import state as K
from exsim.exchange._cache_guard import guard
from exsim.exchange.schema import (
    EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Event, Kind, OrderType, Tif,
)
from exsim.exchange.state import (
    M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2, M_SEQ, grow_output, index_find, index_home,
)
from exsim.exchange.state import prefetch as _prefetch

from exsim.replay.backtesting.latency import DRAWS, sample
from exsim.replay.backtesting.quoting import NO_ACTION, SLOTS, account, quote_reports, reconcile

# the files compiled into these kernels (exchange.kernels brings its own: book, order_index ...)
guard(__name__, __file__, deps=("exsim.exchange.kernels", "exsim.exchange.book", "exsim.exchange.order_index",
                                "exsim.exchange.prefetch", "exsim.exchange.schema", "exsim.exchange.state",
                                "exsim.replay.backtesting.latency", "exsim.replay.backtesting.quoting"))

__all__ = ["ID_BASE", "MARK_DTYPE", "drive", "read_top", "run_quotes", "NEED_STRAT", "HIT",
           "NEED_LOG", "NEED_DRAWS", "NEED_LIVE", "WAKE", "TIMER", "NOTE", "PHASE_NOTE", "CHUNK", "EngineArrays",
           "prepared", "arg_types", "check_flow", "new_order_log", "first_due", "STEP_MARKET",
           "STEP_ORDER", "STEP_WAKE", "STEP_TIMER"]

# the strategy's order ids (and an L2 backtest's own trade ids) start here; the market's stay below
ID_BASE = 1 << 62

# this module's statuses, beyond the engine's own (K.OK, K.NEED_*)
NEED_STRAT = 10   # the strategy's fill/event output arrays are full
HIT = 11          # advance stopped after a message that filled the strategy
NEED_LOG = 12     # run_quotes: the order log or the mark array is full
NEED_DRAWS = 13   # run_quotes: a DRAWS latency stream needs more samples
NEED_LIVE = 14    # drive: the table of the strategy's live orders is full
WAKE = 15         # drive: an on_book wake-up is due (top and mark written)
TIMER = 16        # drive: the first timer is due (top and mark written)
NOTE = 17         # drive: a strategy message was processed (the strategy reacts to fills)
PHASE_NOTE = 18   # drive: a message made symbol events of the strategy's symbol (it has on_phase)

# what goes next in a loop (``first_due``)
STEP_MARKET, STEP_ORDER, STEP_WAKE, STEP_TIMER = range(4)

# at most this many market messages per process_batch call: the scratch outputs (~2.5 events and
# ~1 L2 row per message) then stay in cache, where a longer slice writes (and first touches)
# megabytes the backtest throws away
CHUNK = 4096

MARK_DTYPE = np.dtype([("ts", "<i8"), ("bid", "<i8"), ("bid_qty", "<i8"), ("ask", "<i8"),
                       ("ask_qty", "<i8")])  # top of book the strategy saw at a wake-up (0 = empty)

# slots of run_quotes' int64 state array ``st``
S_I, S_NEXT_WAKE, S_QH, S_NORD, S_NMARK, S_NEXT_ID, S_POS, S_LAST_ARR, S_FEED_CUR, S_ORD_CUR = range(10)
S_SLOT = 10   # the quote slots (``quoting``): per side (BUY at 10, SELL at 14) id, price, qty, live
# order entry per command: st[S_CUROF + kind] is the slot of st holding the cursor of that
# command's latency stream (kind NEW 0, CANCEL 1, MODIFY 2): S_ORD_CUR, or S_CAN_CUR /
# S_MOD_CUR for a stream of its own; commands sharing a stream share its cursor
S_CUROF = S_SLOT + SLOTS
S_CAN_CUR, S_MOD_CUR = S_CUROF + 3, S_CUROF + 4
ST_SIZE = S_CUROF + 5
F_CASH = 0    # float state ``fst`` (``quoting.account``'s money, in ``Money.unit``): cash, fees
F_FEES = 1

# slots of drive's int64 state array ``ds``: the kernel moves I, QH and NMARK; the Python driver
# sets NORD (after sending), NEXT_WAKE and TOBS (first due timer's observation ts) before a call
D_I, D_QH, D_NORD, D_NEXT_WAKE, D_TOBS, D_NMARK, D_TRADER, D_ID_BASE, D_SYMBOL, D_REACT, \
    D_PREFETCH, D_PHASE = range(12)
D_SIZE = 12   # D_PHASE: 1 when the strategy has on_phase (drive then stops at symbol events)


class EngineArrays:
    """The engine's state arrays plus scratch outputs and the strategy's output arrays.

    ``state`` is the engine's ``EngineState`` (re-read by ``grow`` whenever the engine grows
    it); ``grow(status)`` handles any growth status of the kernels here.
    """

    def __init__(self, engine):
        self.engine = engine
        self.fills = np.zeros(64, FILL_DTYPE)
        self.l2 = np.zeros(64, L2_DTYPE)
        self.events = np.zeros(128, EVENT_DTYPE)
        self.cnt = np.zeros(3, np.int64)
        self.sf = np.zeros(1024, FILL_DTYPE)     # the strategy's fills
        self.se = np.zeros(2048, EVENT_DTYPE)    # the strategy's order events
        self.scnt = np.zeros(3, np.int64)      # strategy fills, its events, symbol events among them
        self.live = np.zeros((16, 3), np.int64)    # the strategy's live orders: id, side, price
        self.lcnt = np.zeros(1, np.int64)
        self.state = engine.state

    def grow(self, status: int) -> None:
        """Grow whatever ``status`` names; raises RuntimeError for an unknown status (a bug)."""
        meta = self.state.meta
        if status == K.NEED_OUTPUT:
            # why nothing copied: ``_proc_batch`` has taken the strategy's rows out of the
            # scratch outputs before it returns, and the next call writes them from row 0; and
            # only an output short of room grows (a stop cascade's bound asks for one of them)
            self.fills = grow_output(self.fills, 0, int(meta[M_NEED_FILLS]))
            self.l2 = grow_output(self.l2, 0, int(meta[M_NEED_L2]))
            self.events = grow_output(self.events, 0, int(meta[M_NEED_EVENTS]))
        elif status == NEED_STRAT:
            self.sf = grow_output(self.sf, int(self.scnt[0]), int(self.scnt[0]) + len(self.fills))
            self.se = grow_output(self.se, int(self.scnt[1]), int(self.scnt[1]) + len(self.events))
        elif status == NEED_LIVE:
            live = np.zeros((2 * len(self.live), 3), np.int64)
            live[: len(self.live)] = self.live
            self.live = live
        elif status in K.GROW_STATUSES:
            self.state = self.engine.grow(status)
        else:  # pragma: no cover - a kernel/driver mismatch is a bug, not input
            raise RuntimeError(f"backtest kernel returned unknown status {status}")


def arg_types(kernel, args):
    """Return the numba types of ``args`` as ``kernel`` would dispatch on them (a tuple), or
    None when numba is disabled (NUMBA_DISABLE_JIT: ``kernel`` is a plain function)."""
    if not hasattr(kernel, "typeof_pyval"):
        return None
    return tuple(kernel.typeof_pyval(a) for a in args)


def prepared(kernel, args):
    """Return ``kernel``'s compiled entry point for the types of ``args``: calling it skips
    numba's per-call type dispatch (about 0.5 us per structured array argument: most of a
    wake-up's cost on a kernel taking ~20 arrays). Compiles, or loads the cached compilation,
    when needed.

    The entry point does not check its arguments: arrays of another dtype, ndim or layout give
    wrong results or a crash, not an error. Callers compare ``arg_types`` of new arguments with
    the ones it was prepared for and prepare again when they differ.
    """
    types = arg_types(kernel, args)
    if types is None:
        return kernel
    return kernel.compile(types)


@njit(cache=True)
def check_flow(msgs, trader, id_base):
    """One pass over the market flow: returns (unsorted by ts, an order id >= ``id_base``,
    a row carrying the strategy's ``trader``, the highest symbol id or -1 when empty)."""
    unsorted = False
    high_id = False
    has_trader = False
    top_symbol = np.int64(-1)
    base = np.uint64(id_base)
    tr = np.uint32(trader)
    for k in range(len(msgs)):
        m = msgs[k]
        if k > 0 and m.ts < msgs[k - 1].ts:
            unsorted = True
        if m.order_id >= base:
            high_id = True
        if m.trader == tr:
            has_trader = True
        top_symbol = max(top_symbol, np.int64(m.symbol))
    return unsorted, high_id, has_trader, top_symbol


@njit(cache=True)
def _proc_batch(msgs, i, stop, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt, trader, id_base, prefetch,
                symbol):
    """Process msgs[i:stop] in one ``process_batch`` call; copy the strategy's fills/events out,
    and the symbol events (PHASE, INDICATIVE, UNCROSS: order id 0) of ``symbol`` into ``se`` too,
    counting those in ``scnt[2]``.

    Returns (status, next i): K.OK with next i == stop, or what to grow and the first message not
    yet processed (the outputs of those before it are already copied out).
    """
    if scnt[0] + len(fills) > len(sf) or scnt[1] + len(events) > len(se):
        return NEED_STRAT, i
    cnt[0] = 0
    cnt[1] = 0
    cnt[2] = 0
    mask = len(index) - 1
    if prefetch > 0:
        # process_batch prefetches ``prefetch`` messages ahead of the one it works on, within
        # the slice only, so a slice's first messages would start cold: their index buckets
        # were asked for at the end of the previous slice (below); ask for the arena rows of the
        # first half now, while the buckets of the rest come in
        for j in range(i, min(stop, i + prefetch)):
            _prefetch(index, index_home(msgs[j].symbol, msgs[j].order_id, mask))
        for j in range(i, min(stop, i + prefetch // 2)):
            if msgs[j].kind != Kind.NEW:
                r = index_find(index, msgs[j].symbol, msgs[j].order_id)
                if r >= 0:
                    _prefetch(arena, r)
    # msgs[:stop] is a C-contiguous view of the same type as Engine.process's argument (and
    # ``prefetch`` an int64 like its prefetch distance), so numba reuses the engine's compilation
    # of process_batch; it stops at ``stop`` because the view ends there
    status, j = K.process_batch(msgs[:stop], i, arena, arena_ext, levels, index, books, ladder_keys,
                                ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, prefetch)
    if prefetch > 0 and status == K.OK:
        # the next slice's buckets load while the strategy works (it starts at ``stop``)
        for t in range(stop, min(len(msgs), stop + prefetch)):
            _prefetch(index, index_home(msgs[t].symbol, msgs[t].order_id, mask))
    tr = np.uint32(trader)
    base = np.uint64(id_base)
    for k in range(cnt[0]):
        if fills[k].buy_trader == tr or fills[k].sell_trader == tr:
            sf[scnt[0]] = fills[k]
            scnt[0] += 1
    sym = np.uint32(symbol)
    for k in range(cnt[2]):
        e = events[k]
        if e.order_id >= base:
            se[scnt[1]] = e
            scnt[1] += 1
        elif e.order_id == 0 and e.event >= Event.PHASE and e.symbol == sym:
            se[scnt[1]] = e
            scnt[1] += 1
            scnt[2] += 1
    return status, j


@njit(cache=True)
def _first_after(msgs, lo, hi, ts):
    """The first index in [lo, hi) whose message has ts > ``ts`` (hi if none): a binary search."""
    while lo < hi:
        mid = (lo + hi) // 2
        if msgs[mid].ts <= ts:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _slice_end(msgs, i, lim, next_wake):
    """Return the end of the slice of market messages from ``i``: the first message with ts >
    ``lim`` (the next strategy event's time, int64 max for none; messages with ts <= it go
    first), the next wake-up ``next_wake`` when after ``i``, or ``i + CHUNK``, whichever is first."""
    n = len(msgs)
    stop = n if lim == np.iinfo(np.int64).max else _first_after(msgs, i, n, lim)
    if next_wake > i:
        stop = min(stop, next_wake)
    return min(stop, i + CHUNK)


@njit(cache=True)
def _track_live(msgs, i, se, e0, e1, live, lcnt):
    """Update the table of the strategy's live orders (id, side, price) from its events
    se[e0:e1], made by msgs[i] (ACCEPTED/MODIFIED come only from the strategy's own message,
    which adds at most one row: the caller made room)."""
    for k in range(e0, e1):
        e = se[k]
        oid = np.int64(e.order_id)
        if e.event == Event.ACCEPTED:
            live[lcnt[0], 0] = oid
            live[lcnt[0], 1] = msgs[i].side
            live[lcnt[0], 2] = msgs[i].price
            lcnt[0] += 1
        elif e.event == Event.MODIFIED or e.event == Event.FILLED or e.event == Event.CANCELLED:
            for r in range(lcnt[0]):
                if live[r, 0] == oid:
                    if e.event == Event.MODIFIED:
                        live[r, 2] = msgs[i].price
                    else:
                        live[r, :] = live[lcnt[0] - 1, :]
                        lcnt[0] -= 1
                    break


@njit(cache=True)
def _harmless_until(msgs, i, stop, live, lcnt):
    """The first index in [i, stop) whose message might trade with a live strategy order: a NEW
    or MODIFY priced at or through the strategy's best resting price on the other side, or a
    MARKET order (stop if none). Messages before it cannot fill the strategy."""
    max_bid = np.iinfo(np.int64).min
    min_ask = np.iinfo(np.int64).max
    for r in range(lcnt[0]):
        if live[r, 1] == 0:
            max_bid = max(max_bid, live[r, 2])
        else:
            min_ask = min(min_ask, live[r, 2])
    k = i
    while k < stop:
        m = msgs[k]
        if m.kind == Kind.NEW or m.kind == Kind.MODIFY:
            if m.order_type == OrderType.MARKET:
                break
            if m.side == 0 and m.price >= min_ask:
                break
            if m.side == 1 and m.price <= max_bid:
                break
        k += 1
    return k


@njit(cache=True)
def _mark(books, levels, ladder_levels, symbol, top, marks, counts, at, obs):
    """Read the top of book into ``top`` and append it to ``marks`` as seen at ``obs``; the
    number of marks is ``counts[at]`` (the Python driver's and the njit path's state arrays
    keep it at different places)."""
    read_top(books, levels, ladder_levels, symbol, top)
    m = marks[counts[at]]
    m.ts = obs
    m.bid = top[0]
    m.bid_qty = top[1]
    m.ask = top[2]
    m.ask_qty = top[3]
    counts[at] += 1


@njit(cache=True)
def first_due(t_next, order_ts, wake, wake_obs, timer_obs):
    """The order of work of every backtest loop: which strategy event goes before the next market
    message (exchange time ``t_next``; int64 max past the end). Returns STEP_ORDER, STEP_WAKE,
    STEP_TIMER or STEP_MARKET (none: the market messages go next).

    ``order_ts``: the next strategy message's arrival (int64 max: none); it goes after every
    market message with ts <= it. ``wake``: a wake-up is due, observing at ``wake_obs`` (the ts of
    the message just processed, so <= ``t_next``). ``timer_obs``: the first timer's observation
    (int64 max: none). Ties go to the strategy message, then the wake-up, then the timer.
    """
    if order_ts < t_next and (not wake or order_ts <= wake_obs) and order_ts <= timer_obs:
        return STEP_ORDER
    if wake and wake_obs <= timer_obs:
        return STEP_WAKE
    if timer_obs < t_next:
        return STEP_TIMER
    return STEP_MARKET


@njit(cache=True)
def drive(msgs, olog, oseq, ds, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
          symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt, live, lcnt, marks, top):
    """Run the merged stream up to the next Python callback; return why it stopped.

    WAKE: ``msgs[ds[D_I] - 1]`` was the ``every``-th message (observation at its ts); TIMER: the
    first timer is due (observation at ``ds[D_TOBS]``); both wrote ``top`` and a mark. NOTE /
    HIT (only with ``ds[D_REACT]``): a strategy message / a market message that filled the
    strategy was just processed. PHASE_NOTE (only with ``ds[D_PHASE]``): the message just
    processed made symbol events of the strategy's symbol (market messages then go one at a time,
    so the strategy sees each one right after the message that made it). K.OK: the flow and the strategy's messages are all processed.
    Anything else: what to grow (call again afterwards: nothing is lost).

    Order of work: ``first_due``; market messages run up to the next strategy event.
    """
    n = len(msgs)
    big = np.iinfo(np.int64).max
    trader = ds[D_TRADER]
    id_base = ds[D_ID_BASE]
    react = ds[D_REACT] != 0
    on_phase = ds[D_PHASE] != 0
    sym = ds[D_SYMBOL]
    pf = ds[D_PREFETCH]
    while True:
        i = ds[D_I]
        qh = ds[D_QH]
        t_next = msgs[i].ts if i < n else big
        wake = i == ds[D_NEXT_WAKE] and i > 0
        wake_obs = msgs[i - 1].ts if wake else big
        tobs = ds[D_TOBS]
        step = first_due(t_next, olog[qh].ts if qh < ds[D_NORD] else big, wake, wake_obs, tobs)
        if step == STEP_ORDER:
            if react and lcnt[0] + 1 > live.shape[0]:
                return NEED_LIVE
            e0 = scnt[1]
            p0 = scnt[2]
            status, _ = _proc_batch(olog, qh, qh + 1, arena, arena_ext, levels, index, books, ladder_keys,
                                    ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt,
                                    trader, id_base, np.int64(0), sym)
            if status != K.OK:
                return status
            oseq[qh] = meta[M_SEQ]
            ds[D_QH] = qh + 1
            if react:
                _track_live(olog, qh, se, e0, scnt[1], live, lcnt)
                return NOTE
            if on_phase and scnt[2] > p0:
                return PHASE_NOTE
            continue
        if step != STEP_MARKET:
            if ds[D_NMARK] + 1 > len(marks):
                return NEED_LOG
            obs = wake_obs if step == STEP_WAKE else tobs
            _mark(books, levels, ladder_levels, ds[D_SYMBOL], top, marks, ds, D_NMARK, obs)
            return WAKE if step == STEP_WAKE else TIMER
        if i >= n:
            return K.OK
        # market messages up to the next strategy event: the next strategy message's arrival or
        # the first timer's observation, whichever is first, or the next wake-up
        lim = min(tobs, olog[qh].ts) if qh < ds[D_NORD] else tobs
        stop = _slice_end(msgs, i, lim, ds[D_NEXT_WAKE])
        if on_phase:
            # any message may make a symbol event (an order in a call moves the indicative, a
            # trade breaches a band, a message's ts ends a re-opening auction): one at a time
            stop = i + 1
        p0 = scnt[2]
        if react:
            # cut the slice right after the first message that might fill the strategy
            k = _harmless_until(msgs, i, stop, live, lcnt)
            if k < stop:
                if lcnt[0] + 1 > live.shape[0]:
                    return NEED_LIVE
                f0 = scnt[0]
                e0 = scnt[1]
                status, j = _proc_batch(msgs, i, k + 1, arena, arena_ext, levels, index, books,
                                        ladder_keys, ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt,
                                        sf, se, scnt, trader, id_base, pf, sym)
                ds[D_I] = j
                if status != K.OK:
                    return status
                # the messages before k cannot touch the strategy's orders: its new events and
                # fills are all msgs[k]'s
                _track_live(msgs, k, se, e0, scnt[1], live, lcnt)
                if scnt[0] > f0:
                    return HIT
                if on_phase and scnt[2] > p0:
                    return PHASE_NOTE
                continue
        status, j = _proc_batch(msgs, i, stop, arena, arena_ext, levels, index, books, ladder_keys,
                                ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt,
                                trader, id_base, pf, sym)
        ds[D_I] = j
        if status != K.OK:
            return status
        if on_phase and scnt[2] > p0:
            return PHASE_NOTE


@njit(cache=True)
def read_top(books, levels, ladder_levels, symbol, out):
    """Write [bid, bid_qty, ask, ask_qty] of ``symbol`` into ``out`` (0, 0 for an empty side)."""
    for side in range(2):
        bk = books[np.int64(symbol) * 2 + side]
        if bk.n > 0:
            lv = levels[ladder_levels[bk.off + bk.n - 1]]
            out[2 * side] = lv.price
            out[2 * side + 1] = lv.qty
        else:
            out[2 * side] = 0
            out[2 * side + 1] = 0


@njit(cache=True)
def entry_room(st, ord_modes, ord_vals, n):
    """True when every DRAWS order-entry stream (``ord_modes``/``ord_vals`` by Kind) has ``n``
    more samples drawn."""
    for k in range(3):
        if ord_modes[k] == DRAWS and st[st[S_CUROF + k]] + n > len(ord_vals[k]):
            return False
    return True


@njit(cache=True)
def _send(olog, osent, st, kind, side, order_id, price, qty, local, symbol, trader, ord_modes,
          ord_times, ord_vals):
    """Log one strategy message; it arrives at local + the order-entry latency of its ``kind``
    (``ord_modes``/``ord_times``/``ord_vals``: the stream of each Kind, NEW, CANCEL, MODIFY),
    never before the last one."""
    c = st[S_CUROF + kind]
    lat, st[c] = sample(ord_modes[kind], ord_times[kind], ord_vals[kind], st[c], local)
    arrival = max(local + lat, st[S_LAST_ARR])
    st[S_LAST_ARR] = arrival
    k = st[S_NORD]
    o = olog[k]
    o.ts = arrival
    o.order_id = order_id
    o.price = price
    o.qty = qty
    o.symbol = symbol
    o.trader = trader
    o.kind = kind
    o.order_type = OrderType.LIMIT
    o.tif = Tif.GTC
    o.flags = 0
    o.side = side
    osent[k] = local
    st[S_NORD] = k + 1


@njit(cache=True)
def _send_quotes(olog, osent, st, slots, actions, local, symbol, trader, ord_modes, ord_times,
                 ord_vals):
    """Send the messages ``quoting.reconcile`` decided, BUY side first; a NEW takes the next
    strategy order id."""
    for side in range(2):
        action = actions[side]
        if action == NO_ACTION:
            continue
        s = 4 * side
        if action == Kind.NEW:
            slots[s] = st[S_NEXT_ID]
            st[S_NEXT_ID] += 1
        price = 0 if action == Kind.CANCEL else slots[s + 1]
        qty = 0 if action == Kind.CANCEL else slots[s + 2]
        _send(olog, osent, st, action, side, slots[s], price, qty, local, symbol, trader,
              ord_modes, ord_times, ord_vals)


@njit(cache=True)
def run_quotes(fn, msgs, st, fst, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
               symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt, olog, osent, oseq, marks, feed_mode,
               feed_times, feed_vals, ord_modes, ord_times, ord_vals, state, params, quote,
               top, trader, id_base, symbol, every, terms, prefetch):
    """The merged loop of an ``@njit`` quote strategy; returns K.OK when done or what to grow.

    ``fn(local_ts, bid, bid_qty, ask, ask_qty, position, cash, state, params, quote)`` writes
    [bid_px, bid_qty, ask_px, ask_qty] into ``quote``; it runs after every ``every`` market
    messages, ``feed`` ns after the state it sees; its messages take the order-entry latency of
    their Kind (``ord_modes``: int64[3]; ``ord_times``/``ord_vals``: 3-tuples of arrays; cursors
    at ``st[st[S_CUROF + kind]]``); ``cash`` and the fees in ``fst`` are in the
    unit of ``terms`` (``money.Money.terms()``: tick value, maker and taker rates). Order of work:
    ``first_due`` (no timers).
    """
    n = len(msgs)
    big = np.iinfo(np.int64).max
    slots = st[S_SLOT:S_SLOT + SLOTS]   # views: the quote rules update ``st`` in place
    pos = st[S_POS:S_POS + 1]
    while True:
        # room for one step: 1 feed and 2 order samples, 2 logged orders, 1 mark
        if st[S_NORD] + 2 > len(olog) or st[S_NMARK] + 1 > len(marks):
            return NEED_LOG
        if (feed_mode == DRAWS and st[S_FEED_CUR] + 1 > len(feed_vals)) or \
                not entry_room(st, ord_modes, ord_vals, 2):
            return NEED_DRAWS
        i = st[S_I]
        t_next = msgs[i].ts if i < n else big
        qh = st[S_QH]
        wake = every > 0 and i == st[S_NEXT_WAKE] and i > 0
        obs = msgs[i - 1].ts if wake else big
        step = first_due(t_next, olog[qh].ts if qh < st[S_NORD] else big, wake, obs, big)
        if step == STEP_WAKE:
            lat, st[S_FEED_CUR] = sample(feed_mode, feed_times, feed_vals, st[S_FEED_CUR], obs)
            local = obs + lat
            _mark(books, levels, ladder_levels, symbol, top, marks, st, S_NMARK, obs)
            fn(local, top[0], top[1], top[2], top[3], st[S_POS], fst[F_CASH], state, params, quote)
            actions = reconcile(slots, quote)
            _send_quotes(olog, osent, st, slots, actions, local, symbol, trader, ord_modes,
                         ord_times, ord_vals)
            st[S_NEXT_WAKE] += every
            continue
        if step == STEP_MARKET:
            if i >= n:
                return K.OK
            # a whole slice of market messages up to the next strategy event (the next strategy
            # order's arrival or the next wake-up), or the end of the pre-drawn feed samples (one
            # per message that fills the strategy, at most)
            stop = _slice_end(msgs, i, olog[qh].ts if qh < st[S_NORD] else big,
                              st[S_NEXT_WAKE] if every > 0 else -1)
            if feed_mode == DRAWS:
                stop = min(stop, i + len(feed_vals) - st[S_FEED_CUR])
            stop = max(stop, i + 1)
            f0 = scnt[0]
            e0 = scnt[1]
            status, j = _proc_batch(msgs, i, stop, arena, arena_ext, levels, index, books, ladder_keys,
                                    ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt,
                                    trader, id_base, prefetch, symbol)
            st[S_I] = j
            quote_reports(se, e0, scnt[1], slots)
            if scnt[0] > f0:
                account(sf, f0, scnt[0], trader, pos, fst, terms)
                # one feed sample per message that filled the strategy, at its ts, in order:
                # exactly the samples the one-message-at-a-time loop (and the Python path) takes
                last = np.int64(-1)
                for k in range(f0, scnt[0]):
                    if sf[k].seq != last:
                        last = sf[k].seq
                        _, st[S_FEED_CUR] = sample(feed_mode, feed_times, feed_vals,
                                                   st[S_FEED_CUR], sf[k].ts)
            if status != K.OK:
                return status
            continue
        f0 = scnt[0]
        e0 = scnt[1]
        status, _ = _proc_batch(olog, qh, qh + 1, arena, arena_ext, levels, index, books, ladder_keys,
                                ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, sf, se, scnt, trader,
                                id_base, np.int64(0), symbol)
        if status != K.OK:
            return status
        oseq[qh] = meta[M_SEQ]
        st[S_QH] = qh + 1
        quote_reports(se, e0, scnt[1], slots)
        if scnt[0] > f0:
            account(sf, f0, scnt[0], trader, pos, fst, terms)
            # the strategy learns of the fill one feed latency later: a sample per notification,
            # as the Python path takes one, so both paths consume the same latency sequence
            _, st[S_FEED_CUR] = sample(feed_mode, feed_times, feed_vals, st[S_FEED_CUR],
                                       olog[qh].ts)


def new_order_log(n: int) -> np.ndarray:
    """An empty ORDER_DTYPE log of capacity ``n``."""
    return np.zeros(max(n, 16), ORDER_DTYPE)

