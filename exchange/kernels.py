"""The batch matching kernel: order messages in, fills / L2 updates / order events out.

``process_batch`` runs over a structured array of ORDER_DTYPE messages and mutates the book state
arrays of ``exchange.book``. It never raises on message content: every bad message becomes one
REJECTED event (docs/semantics.md gives the exact rules and their order). It never allocates:
before each message it checks that the state and output arrays can take the worst case of that
message and, if not, returns a status telling the Python facade what to grow; the facade grows it
and calls again from the same message. So a message is always processed whole or not at all;
the one exception is the expiry sweep before a message (``_expire``), which is resumable: it
stops between two expiries, state consistent, and the next call goes on from there.

Trading phases (docs/semantics.md, Trading phases): a symbol row's ``phase`` decides what a
message may do. In a call (PRE_OPEN, PRE_CLOSE, REOPENING_AUCTION) orders rest without matching
(MARKET orders at ``CALL_MARKET_PRICE[side]``) and after every message on the symbol, and every
expiry of its orders, the indicative uncross is published when it changed
(``_publish_indicative``). PHASE messages (``_phase_message``) run the uncross of
``exchange.auction``; a dynamic band breach in ``_match`` interrupts continuous trading
(``_interrupt``) and the re-opening auctions it starts uncross before the first message at or
after their end (``_auction_ends``, resumable like the expiry sweep; ``meta[M_NEXT_END]`` keeps
the earliest end so the check is one compare). A symbol in CONTINUOUS with no band pays one
load of its phase and one of its band per message.

Stops wait in the stop books and are released after a message that traded, and when a symbol
enters CONTINUOUS (a PHASE message, a re-opening auction's end) (``_release_stops``), only while
their symbol is CONTINUOUS, so after every message no pending stop of a CONTINUOUS symbol is
triggered. The matching copy of ``_execute`` is inlined into the hot path only; the cold callers
share one compiled copy (``_execute_cold``);
icebergs rest with ``leaves`` = the shown slice and ``hidden`` = the reserve (level ``qty`` counts
shown quantity only, level ``hidden`` the reserve); DAY/GTD orders sit in the expiry heap
(``exchange.expiry``) from entry until they leave for any reason.

Known limit: inserting a new price level moves the levels better than it (see ``book``); a flow
that keeps adding levels deep in a huge book pays for that move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .auction import auction_price, uncross, uncross_room
from .book import (
    M_EXPIRY_N, M_FREE_LEVEL, M_FREE_ORDER, M_INDEX_COUNT, M_LEVEL_HW, M_NEED_BOOK, M_NEED_EVENTS,
    M_BAND_HI, M_BAND_LO, M_NEED_FILLS, M_NEED_L2, M_NEXT_END, M_NSYM, M_ORDER_HW, M_SEQ, M_STOPS_LIVE, M_STP,
    M_TRADE_ID,
    MARK_EXPIRING, MARK_ICEBERG, MARK_PENDING, alloc_order, append_to_level, detach_from_level,
    find_or_add_level, free_order, remove_level, reserve_slices, set_cold,
)
from .expiry import day_expiry, heap_push, heap_remove
from .order_index import (
    index_find, index_home, index_insert, index_probe, index_put, index_remove, index_remove_at,
)
from .prefetch import prefetch
from .removal import remove_order
from .rows import output_fits, write_event, write_l2
from .schema import (
    CALL_MARKET_PRICE, MAX_LEVEL_QTY, MAX_PRICE, MAX_QTY, Event, Kind, OrderType, Phase, Reason,
    Side, Stp, Tif,
)
from .validation import band_width, check_modify, check_new, check_phase, not_owner
from .validation import crosses as _crosses

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=("exsim.exchange.auction", "exsim.exchange.book", "exsim.exchange.expiry",
                                "exsim.exchange.fillable", "exsim.exchange.order_index",
                                "exsim.exchange.prefetch", "exsim.exchange.removal", "exsim.exchange.rows",
                                "exsim.exchange.schema", "exsim.exchange.validation"))

# statuses returned by process_batch
OK = 0
NEED_OUTPUT = 1
NEED_ORDERS = 2
NEED_LEVELS = 3
NEED_INDEX = 4
NEED_LADDER = 5
NEED_EXPIRY = 6

_BUY = int(Side.BUY)
_SELL = int(Side.SELL)
_GTC = int(Tif.GTC)
_IOC = int(Tif.IOC)
_FOK = int(Tif.FOK)
_DAY = int(Tif.DAY)
_GTD = int(Tif.GTD)
_LIMIT = int(OrderType.LIMIT)
_STOP = int(OrderType.STOP)
_STOP_LIMIT = int(OrderType.STOP_LIMIT)
_MARKET = int(OrderType.MARKET)
_CONTINUOUS = int(Phase.CONTINUOUS)
_CLOSED = int(Phase.CLOSED)
_PRE_OPEN = int(Phase.PRE_OPEN)
_OPENING = int(Phase.OPENING_AUCTION)
_PRE_CLOSE = int(Phase.PRE_CLOSE)
_CLOSING = int(Phase.CLOSING_AUCTION)
_HALTED = int(Phase.HALTED)
_REOPENING = int(Phase.REOPENING_AUCTION)
_CALL_BUY = CALL_MARKET_PRICE[0]
_CALL_SELL = CALL_MARKET_PRICE[1]
_INT64_MAX = (1 << 63) - 1

# how matching ended short of filling the aggressor (``_match``)
_RAN_OUT = 0    # no crossing level left (or none was needed)
_BY_STP = 1     # self-trade prevention stopped it
_BY_BAND = 2    # the next fill would have printed outside the dynamic band
_BY_CALL = 3    # the symbol is in a call: no matching at all

# what the worst case of a message adds for the phases: a band breach's PHASE event and the
# rest's L2 row, and one INDICATIVE event (room bounds, see ``_room``)
_PHASE_EVENTS = 3
_PHASE_L2 = 1


@njit(cache=True, _nrt=False, inline="always")
def _is_call(phase):
    """Whether ``phase`` is a call (orders rest without matching, the indicative is published)."""
    return phase == _PRE_OPEN or phase == _PRE_CLOSE or phase == _REOPENING


@njit(cache=True, _nrt=False, inline="always")
def _dynamic_band(srow):
    """Return the (lo, hi) fill prices the dynamic band allows for a message starting now: the
    band around the last trade price in CONTINUOUS with a band and a trade, else every price."""
    bps = srow.dynamic_band_bps
    x = srow.last_price
    if bps == 0 or x == 0 or srow.phase != _CONTINUOUS:
        return np.int64(0), np.int64(MAX_PRICE)
    w = band_width(x, bps)
    return x - w, x + min(w, np.int64(MAX_PRICE) - x)   # x + w could pass int64


@njit(cache=True, _nrt=False)
def _refresh_next_end(meta, symbols):
    """Set ``meta[M_NEXT_END]`` to the earliest re-opening auction end of any symbol (0: none).
    O(symbols); runs only when an end is set or cleared."""
    best = np.int64(0)
    for s in range(meta[M_NSYM]):
        e = symbols[s].auction_end
        if e > 0 and (best == 0 or e < best):
            best = e
    meta[M_NEXT_END] = best


# cold path: compiled once, not inlined into every matching copy
@njit(cache=True, _nrt=False)
def _interrupt(seq, ts, symbol, symbols, meta, events, cnt):
    """A fill would have printed outside the dynamic band: ``symbol`` enters REOPENING_AUCTION
    ending at ``ts + interruption_ns`` (the int64 clock end if that is past it), with the
    indicative reset to none; one PHASE event, reason PRICE_BAND."""
    srow = symbols[symbol]
    srow.phase = _REOPENING
    srow.auction = _REOPENING
    d = srow.interruption_ns
    srow.auction_end = ts + d if ts <= _INT64_MAX - d else np.int64(_INT64_MAX)
    srow.ind_price = 0
    srow.ind_qty = 0
    srow.ind_surplus = 0
    if srow.auction_end > 0:
        _refresh_next_end(meta, symbols)
    write_event(events, cnt, seq, ts, symbols, symbol, 0, Event.PHASE, Reason.PRICE_BAND, 0, 0,
                srow.reference_price)


# cold path: compiled once, not inlined into every matching copy
@njit(cache=True, _nrt=False)
def _publish_indicative(seq, ts, sym, levels, books, ladder_levels, symbols, events, cnt):
    """Compute the uncross ``sym`` would run now and, if it differs from the last one published,
    publish it: one INDICATIVE event (price, volume as filled_qty, surplus as leaves_qty; all 0
    when nothing would execute)."""
    srow = symbols[sym]
    ref = srow.reference_price if srow.reference_price != 0 else srow.last_price
    p, v, surplus = auction_price(sym, levels, books, ladder_levels, ref)
    if v == 0:
        p = 0
        surplus = 0
    if p == srow.ind_price and v == srow.ind_qty and surplus == srow.ind_surplus:
        return
    srow.ind_price = p
    srow.ind_qty = v
    srow.ind_surplus = surplus
    write_event(events, cnt, seq, ts, symbols, sym, 0, Event.INDICATIVE, Reason.NONE, v, surplus,
                p)


@njit(cache=True, _nrt=False, inline="always")
def _match(seq, ts, symbol, side, is_market, limit, qty, order_id, trader, filled, arena, arena_ext,
           levels, index, books, ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2,
           events, cnt):
    """Match an incoming order against the opposite side; return (remaining, why it stopped:
    _RAN_OUT, _BY_STP or _BY_BAND).

    A resting iceberg whose shown slice is used up while reserve remains shows its next slice
    at once at the back of its level (CME Globex), and matching goes on at that level. Every
    fill moves the symbol's last trade price. A fill priced outside ``meta[M_BAND_LO]`` ..
    ``meta[M_BAND_HI]`` (the dynamic band of the message) does not happen: the symbol is
    interrupted (``_interrupt``) where that fill would have been, i.e. after self-trade
    prevention handled the resting orders ahead of it (own orders cancelled by CANCEL_RESTING
    are not fills; CANCEL_INCOMING / CANCEL_BOTH stop before any fill, so without a breach).
    """
    opp = 1 - side
    opp_b = np.int64(symbol) * 2 + opp
    stp = meta[M_STP]
    lo = meta[M_BAND_LO]
    hi = meta[M_BAND_HI]
    remaining = qty
    stp_stop = False
    band_stop = False
    last = np.int64(0)
    while remaining > 0:
        bk = books[opp_b]
        if bk.n == 0:
            break
        lv = ladder_levels[bk.off + bk.n - 1]
        L = levels[lv]
        price = L.price
        if not _crosses(side, is_market, limit, price):
            break
        # every fill of a level prints at its price; the check is made for the next fill,
        # after self-trade prevention has dealt with the order at the head of the queue
        outside = price < lo or price > hi
        changed = False
        while remaining > 0 and L.count > 0:
            r = L.head
            o = arena[r]
            if stp != Stp.NONE and o.trader == trader:
                if stp == Stp.CANCEL_INCOMING:
                    stp_stop = True
                    break
                write_event(events, cnt, seq, ts, symbols, symbol, o.order_id, Event.CANCELLED,
                            Reason.SELF_TRADE, o.filled, 0, 0)
                remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)
                changed = True
                if stp == Stp.CANCEL_BOTH:
                    stp_stop = True
                    break
                continue
            if outside:
                band_stop = True
                break
            q = min(remaining, o.leaves)
            meta[M_TRADE_ID] += 1
            f = fills[cnt[0]]
            f.seq = seq
            f.ts = ts
            f.trade_id = meta[M_TRADE_ID]
            f.price = price
            f.qty = q
            f.symbol = symbol
            f.aggressor_side = side
            if side == _BUY:
                f.buy_order_id = order_id
                f.sell_order_id = o.order_id
                f.buy_trader = trader
                f.sell_trader = o.trader
            else:
                f.buy_order_id = o.order_id
                f.sell_order_id = order_id
                f.buy_trader = o.trader
                f.sell_trader = trader
            cnt[0] += 1
            last = price
            remaining -= q
            filled += q
            write_event(events, cnt, seq, ts, symbols, symbol, order_id,
                        Event.FILLED if remaining == 0 else Event.PARTIAL, Reason.NONE, filled,
                        remaining, price)
            o.leaves -= q
            o.filled += q
            L.qty -= q
            if o.leaves == 0 and o.hidden == 0:
                write_event(events, cnt, seq, ts, symbols, symbol, o.order_id, Event.FILLED,
                            Reason.NONE, o.filled, 0, price)
                remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)
            else:
                if o.leaves == 0:
                    # refill: the next slice joins the back of the queue
                    s = min(arena_ext[r].display, o.hidden)
                    o.hidden -= s
                    L.hidden -= s
                    books[opp_b].slices -= 1     # s is a whole slice or the last of it
                    detach_from_level(arena, levels, r)
                    o.leaves = s
                    append_to_level(arena, levels, r, lv)
                write_event(events, cnt, seq, ts, symbols, symbol, o.order_id, Event.PARTIAL,
                            Reason.NONE, o.filled, o.leaves + o.hidden, price)
            changed = True
        if changed:
            write_l2(l2, cnt, seq, ts, symbol, opp, price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta, opp_b, opp, lv)
        if stp_stop or band_stop:
            break
    if last != 0:
        symbols[symbol].last_price = last
    if band_stop:
        _interrupt(seq, ts, np.int64(symbol), symbols, meta, events, cnt)
        return remaining, _BY_BAND
    return remaining, _BY_STP if stp_stop else _RAN_OUT


@njit(cache=True, _nrt=False, inline="always")
def _rest(seq, ts, symbol, side, price, qty, filled, order_id, trader, flags, display, tif,
          expire_ts, order_type, at, arena, arena_ext, levels, index, books, ladder_keys,
          ladder_levels, meta, expiry, l2, cnt):
    """Put an open order at the back of its price level; False if the level would overflow.
    ``order_type``: LIMIT, or MARKET for a market order resting in a call at its call price.

    An iceberg (``display`` > 0) shows ``min(display, qty)`` and keeps the rest as reserve; an
    order with ``expire_ts`` joins the expiry heap. ``at``: the empty index bucket where the
    order's id goes (the table unchanged since it was probed), or -1 to probe again.
    """
    b = np.int64(symbol) * 2 + side
    lv = find_or_add_level(books, levels, ladder_keys, ladder_levels, meta, b, side, price)
    L = levels[lv]
    if L.qty > MAX_LEVEL_QTY - qty - L.hidden:
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta, b, side, lv)
        return False
    shown = qty
    if 0 < display < qty:
        shown = display
    r = alloc_order(arena, meta)
    o = arena[r]
    o.order_id = order_id
    o.price = price
    o.leaves = shown
    o.filled = filled
    o.symbol = symbol
    o.trader = trader
    o.side = side
    o.flags = flags
    o.hidden = qty - shown
    set_cold(arena, arena_ext, r, display, 0, expire_ts, order_type, tif, 0)
    append_to_level(arena, levels, r, lv)
    if shown != qty:
        L.hidden += qty - shown
        books[b].slices += reserve_slices(qty - shown, display)
    books[b].live += 1
    if at >= 0:
        index_put(index, at, symbol, order_id, r)
    else:
        index_insert(index, symbol, order_id, r)
    meta[M_INDEX_COUNT] += 1
    if expire_ts != 0:
        heap_push(expiry, arena, arena_ext, meta, r)
    write_l2(l2, cnt, seq, ts, symbol, side, price, L.qty, L.count)
    return True


@njit(cache=True, _nrt=False, inline="always")
def _execute(seq, ts, symbol, side, is_market, tif, price, qty, filled, order_id, trader, flags,
             display, expire_ts, at, arena, arena_ext, levels, index, books, ladder_keys,
             ladder_levels, meta, symbols, expiry, fills, l2, events, cnt):
    """Match an accepted order, then rest or cancel what is left (semantics.md, NEW steps 2-4).

    ``at``: the empty index bucket the validation's probe for the id stopped at (-1: none).
    The dynamic band is in meta (``_match``). In a call (the symbol's phase is one whenever it is not
    CONTINUOUS here: halted and closed symbols refuse orders before) nothing matches; in a call,
    and after a band breach, what is left is handled as an order entered in the call: a MARKET
    rests at its call price, an IOC or FOK is cancelled, anything else rests; after a breach
    the indicative is then published.
    """
    live_before = meta[M_INDEX_COUNT]
    if symbols[symbol].phase == _CONTINUOUS:
        remaining, why = _match(seq, ts, symbol, side, is_market, price, qty, order_id, trader,
                                filled, arena, arena_ext, levels, index, books, ladder_keys,
                                ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        if remaining == 0:
            return
    else:
        remaining, why = qty, _BY_CALL
    done = filled + qty - remaining
    order_type = _LIMIT
    if why >= _BY_BAND and is_market:
        is_market = False
        if tif != _IOC and tif != _FOK:
            # a market order rests in the call beyond every limit price of its side
            order_type = _MARKET
            price = _CALL_BUY if side == _BUY else _CALL_SELL
    if why == _BY_STP:
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.SELF_TRADE, done, 0, 0)
    elif is_market:
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.NO_LIQUIDITY, done, 0, 0)
    elif tif == _IOC or tif == _FOK:
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.IOC_UNFILLED, done, 0, 0)
    # matching only ever removes ids: with the count unchanged the table is as probed
    elif not _rest(seq, ts, symbol, side, price, remaining, done, order_id, trader, flags, display,
                   tif, expire_ts, order_type, at if meta[M_INDEX_COUNT] == live_before else -1,
                   arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                   expiry, l2, cnt):
        write_event(events, cnt, seq, ts, symbols, symbol, order_id, Event.CANCELLED,
                    Reason.OVERFLOW, done, 0, 0)
    if why == _BY_BAND:
        # the call a breach starts publishes its indicative at once, before anything later
        # in the message (or the message after a re-opening end's stop cascade)
        _publish_indicative(seq, ts, np.int64(symbol), levels, books, ladder_levels, symbols,
                            events, cnt)


# cold callers (a released stop, a new-price MODIFY) share this one compiled copy of
# ``_execute`` instead of inlining its ~800 lines each: that was most of the cold compile. Every
# call site passes the same types (symbol int64, order_id uint64, trader uint32, flags uint8,
# is_market a bool, the other integers int64; never a literal, which numba types apart), so it
# is compiled once.
@njit(cache=True, _nrt=False)
def _execute_cold(seq, ts, symbol, side, is_market, tif, price, qty, filled, order_id, trader,
                  flags, display, expire_ts, at, arena, arena_ext, levels, index, books,
                  ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2, events, cnt):
    """``_execute`` for the cold paths (see there)."""
    _execute(seq, ts, symbol, side, is_market, tif, price, qty, filled, order_id, trader, flags,
             display, expire_ts, at, arena, arena_ext, levels, index, books, ladder_keys,
             ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _entry_expiry(m, symbols):
    """Return when a NEW order expires: GTD its ``expire_ts``, DAY the symbol's next session
    close after its ts, anything else 0 (never)."""
    if m.tif == _GTD:
        return m.expire_ts
    if m.tif == _DAY:
        return day_expiry(m.ts, symbols[m.symbol].session_close)
    return np.int64(0)


@njit(cache=True, _nrt=False, inline="always")
def _add_stop(m, at, expire_ts, arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels,
              meta, expiry):
    """Put an accepted STOP or STOP_LIMIT at the back of its trigger price in its stop book.

    ``at`` as for ``_rest``. A pending stop keeps its limit price (0 for a STOP) in ``price``.
    """
    side = np.int64(m.side)
    b = np.int64(m.symbol) * 2 + side
    lv = find_or_add_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side,
                           m.stop_price)
    r = alloc_order(arena, meta)
    o = arena[r]
    o.order_id = m.order_id
    o.price = m.price if m.order_type == _STOP_LIMIT else 0
    o.leaves = m.qty
    o.filled = 0
    o.symbol = m.symbol
    o.trader = m.trader
    o.side = side
    o.flags = m.flags
    o.hidden = 0
    set_cold(arena, arena_ext, r, 0, m.stop_price, expire_ts, m.order_type, m.tif, 1)
    append_to_level(arena, levels, r, lv)
    stops[b].live += 1
    stops[b].stop_qty += m.qty
    if at >= 0:
        index_put(index, at, m.symbol, m.order_id, r)
    else:
        index_insert(index, m.symbol, m.order_id, r)
    meta[M_INDEX_COUNT] += 1
    meta[M_STOPS_LIVE] += 1
    if expire_ts != 0:
        heap_push(expiry, arena, arena_ext, meta, r)


@njit(cache=True, _nrt=False, inline="always")
def _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels, meta,
                    expiry, r, bucket=-1):
    """Take pending stop ``r`` out of its stop book (dropping an emptied trigger level)."""
    o = arena[r]
    side = np.int64(o.side)
    b = np.int64(o.symbol) * 2 + side
    lv = o.level
    stops[b].stop_qty -= o.leaves
    remove_order(arena, arena_ext, levels, stops, index, expiry, meta, r, bucket)
    meta[M_STOPS_LIVE] -= 1
    if levels[lv].count == 0:
        remove_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side, lv)


@njit(cache=True, _nrt=False, inline="always")
def _next_triggered(sym, levels, stops, ladder_levels, last):
    """Return the arena slot of the next stop of ``sym`` to release at last price ``last``, or
    -1: the BUY stop with the lowest trigger if ``last`` reached it, else the SELL stop with the
    highest; FIFO among equal triggers (each stop book's best entry is its next release)."""
    bk = stops[np.int64(sym) * 2]
    if bk.n > 0:
        L = levels[ladder_levels[bk.off + bk.n - 1]]
        if L.price <= last:
            return np.int64(L.head)
    bk = stops[np.int64(sym) * 2 + 1]
    if bk.n > 0:
        L = levels[ladder_levels[bk.off + bk.n - 1]]
        if L.price >= last:
            return np.int64(L.head)
    return np.int64(-1)


@njit(cache=True, _nrt=False)
def _release_stops(seq, ts, sym, arena, arena_ext, levels, index, books, ladder_keys,
                   ladder_levels, meta, symbols, stops, expiry, fills, l2, events, cnt):
    """Release the triggered stops of ``sym`` one at a time (semantics.md, Stops): TRIGGERED,
    then matched as a MARKET (STOP) or a LIMIT at its price (STOP_LIMIT), resting or cancelled
    by its tif, until none is triggered; the trades of a released stop may trigger more.
    Stops are released only while the symbol is CONTINUOUS: a band breach (the band in meta,
    see ``_match``) by one of them ends the cascade."""
    while True:
        # no trade yet: no stop is triggered (a SELL stop is not reached by a last price of 0)
        if symbols[sym].phase != _CONTINUOUS or symbols[sym].last_price == 0:
            return
        r = _next_triggered(sym, levels, stops, ladder_levels, symbols[sym].last_price)
        if r < 0:
            return
        o = arena[r]
        side = np.int64(o.side)
        order_id = o.order_id
        trader = o.trader
        flags = o.flags
        qty = o.leaves
        price = o.price
        x = arena_ext[r]   # a pending stop's ext row is always written
        is_market = x.order_type == _STOP
        tif = np.int64(x.tif)
        expire_ts = x.expire_ts
        _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels, meta,
                        expiry, r)
        write_event(events, cnt, seq, ts, symbols, sym, order_id, Event.TRIGGERED, Reason.NONE, 0,
                    qty, 0)
        _execute_cold(np.int64(seq), np.int64(ts), np.int64(sym), side, is_market, tif, price,
                      qty, np.int64(0), np.uint64(order_id), np.uint32(trader), np.uint8(flags),
                      np.int64(0), np.int64(expire_ts), np.int64(-1), arena, arena_ext, levels,
                      index, books, ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2,
                      events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _modify(m, seq, in_call, arena, arena_ext, levels, index, books, ladder_keys,
            ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt):
    """Apply a MODIFY message (semantics.md, MODIFY); ``in_call``: the symbol is in a call."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    r = np.int64(index[bucket].slot) if bucket >= 0 else -1
    reason = check_modify(m, r, books, arena, arena_ext, levels, ladder_levels, symbols, ticks,
                          meta, in_call)
    if reason != Reason.NONE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED, reason, 0, 0,
                    0)
        return
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    L = levels[lv]
    if o.marks & MARK_PENDING:
        _modify_pending(m, seq, r, arena, arena_ext, levels, stops, ladder_keys, ladder_levels,
                        meta, symbols, events, cnt)
        return
    if m.price == o.price:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.MODIFIED, Reason.NONE,
                    o.filled, m.qty, 0)
        open_qty = o.leaves + o.hidden
        if m.qty == open_qty:
            return
        if m.qty < open_qty:
            # the reserve goes first; the place in the queue is kept
            cut = open_qty - m.qty
            h = min(cut, o.hidden)
            if h != 0:
                d = arena_ext[r].display
                books[np.int64(sym) * 2 + side].slices += (reserve_slices(o.hidden - h, d)
                                                           - reserve_slices(o.hidden, d))
            o.hidden -= h
            L.hidden -= h
            if cut == h:
                return
            L.qty -= cut - h
            o.leaves -= cut - h
        else:
            detach_from_level(arena, levels, r)
            L.hidden -= o.hidden
            shown = m.qty
            if o.marks & MARK_ICEBERG and 0 < arena_ext[r].display < m.qty:
                shown = arena_ext[r].display
            if o.marks & MARK_ICEBERG:
                d = arena_ext[r].display
                books[np.int64(sym) * 2 + side].slices += (reserve_slices(m.qty - shown, d)
                                                           - reserve_slices(o.hidden, d))
            o.leaves = shown
            o.hidden = m.qty - shown
            L.hidden += o.hidden
            append_to_level(arena, levels, r, lv)
        write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
        return
    # a new price is delete + add: the order loses its place and may trade as an aggressor;
    # it keeps its tif, display size and expiry
    filled = o.filled
    trader = o.trader
    flags = o.flags
    display = np.int64(0)
    tif = np.int64(_GTC)
    expire_ts = np.int64(0)
    if o.marks != 0:
        display = arena_ext[r].display
        tif = np.int64(arena_ext[r].tif)
        expire_ts = arena_ext[r].expire_ts
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.MODIFIED, Reason.NONE,
                filled, m.qty, 0)
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
    write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta,
                     np.int64(sym) * 2 + side, side, lv)
    _execute_cold(np.int64(seq), np.int64(m.ts), np.int64(sym), side, np.bool_(False), tif,
                  np.int64(m.price), np.int64(m.qty), np.int64(filled), np.uint64(m.order_id),
                  np.uint32(trader), np.uint8(flags), np.int64(display), np.int64(expire_ts),
                  np.int64(-1), arena, arena_ext, levels, index, books, ladder_keys,
                  ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _modify_pending(m, seq, r, arena, arena_ext, levels, stops, ladder_keys, ladder_levels, meta,
                    symbols, events, cnt):
    """Apply a valid MODIFY to pending stop ``r`` (semantics.md, MODIFY: pending stops)."""
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    L = levels[lv]
    write_event(events, cnt, seq, m.ts, symbols, m.symbol, m.order_id, Event.MODIFIED, Reason.NONE,
                o.filled, m.qty, 0)
    x = arena_ext[r]
    if x.order_type == _STOP_LIMIT:
        o.price = m.price
    stops[np.int64(m.symbol) * 2 + side].stop_qty += m.qty - o.leaves
    if m.stop_price == x.stop_price and m.qty <= o.leaves:
        L.qty -= o.leaves - m.qty
        o.leaves = m.qty
        return
    b = np.int64(m.symbol) * 2 + side
    detach_from_level(arena, levels, r)
    if L.count == 0:
        remove_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side, lv)
    o.leaves = m.qty
    x.stop_price = m.stop_price
    nlv = find_or_add_level(stops, levels, ladder_keys, ladder_levels, meta, b, 1 - side,
                            m.stop_price)
    append_to_level(arena, levels, r, nlv)


# cold path: compiled once, not inlined into every matching copy
@njit(cache=True, _nrt=False)
def _phase_message(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                   meta, symbols, ticks, expiry, fills, l2, events, cnt):
    """Apply a PHASE message (semantics.md, PHASE messages): validation, the reference price,
    the uncross when the target ends an auction, the PHASE event and the call it enters.
    Returns whether the message was valid and left the symbol CONTINUOUS (the caller then
    checks the stops, whether or not an uncross traded). The indicative of a call entered is
    published by the caller, after this."""
    sym = m.symbol
    reason = check_phase(m, books, symbols, ticks)
    if reason != Reason.NONE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED, reason, 0, 0,
                    0)
        return False
    srow = symbols[sym]
    target = np.int64(m.phase)
    if m.price > 0:
        srow.reference_price = m.price
    auction = np.int64(0)
    if target == _OPENING or target == _CLOSING:
        auction = target
    elif target == _CONTINUOUS or target == _CLOSED:
        auction = srow.auction
    if auction != 0:
        uncross(seq, m.ts, np.int64(sym), auction, arena, arena_ext, levels, index, books,
                ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        srow.auction = 0
    new = target
    if target == _OPENING:
        new = _CONTINUOUS
    elif target == _CLOSING:
        new = _CLOSED
    srow.phase = new
    # a halt or any other phase suspends a re-opening auction's end; only its own target sets one
    had_end = srow.auction_end != 0
    srow.auction_end = 0
    if _is_call(new):
        srow.auction = (_OPENING if new == _PRE_OPEN else _CLOSING if new == _PRE_CLOSE
                        else _REOPENING)
        srow.ind_price = 0
        srow.ind_qty = 0
        srow.ind_surplus = 0
        if new == _REOPENING:
            srow.auction_end = m.expire_ts
    if had_end or srow.auction_end != 0:
        _refresh_next_end(meta, symbols)
    write_event(events, cnt, seq, m.ts, symbols, sym, 0, Event.PHASE, Reason.NONE, 0, 0,
                srow.reference_price)
    return new == _CONTINUOUS


@njit(cache=True, _nrt=False, inline="always")
def _cancel(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
            symbols, stops, expiry, l2, events, cnt):
    """CANCEL steps 3-6 (semantics.md): REJECTED UNKNOWN_ID or NOT_OWNER, else CANCELLED
    USER_CANCEL and the order leaves its book (a resting order with its level's L2 row, a
    pending stop its stop book). The caller has checked the symbol and its phase."""
    sym = m.symbol
    bucket = index_probe(index, sym, m.order_id)
    if bucket < 0:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.UNKNOWN_ID, 0, 0, 0)
        return
    r = np.int64(index[bucket].slot)
    if not_owner(m, arena, r, meta):
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.NOT_OWNER, 0, 0, 0)
        return
    o = arena[r]
    side = np.int64(o.side)
    lv = o.level
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.CANCELLED,
                Reason.USER_CANCEL, o.filled, 0, 0)
    if o.marks & MARK_PENDING:
        _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels, meta,
                        expiry, r, bucket)
        return
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r, bucket)
    L = levels[lv]
    write_l2(l2, cnt, seq, m.ts, sym, side, L.price, L.qty, L.count)
    if L.count == 0:
        remove_level(books, levels, ladder_keys, ladder_levels, meta, np.int64(sym) * 2 + side,
                     side, lv)


@njit(cache=True, _nrt=False, inline="always")
def _process_one(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                 symbols, ticks, stops, expiry, fills, l2, events, cnt, plain):
    sym = m.symbol
    if m.kind > Kind.PHASE:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.BAD_KIND, 0, 0, 0)
        return
    if sym >= meta[M_NSYM]:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.UNKNOWN_SYMBOL, 0, 0, 0)
        return
    srow = symbols[sym]
    phase = srow.phase
    in_call = False
    check_stops = False
    lo = np.int64(0)
    hi = np.int64(MAX_PRICE)
    if m.kind == Kind.PHASE:
        check_stops = _phase_message(m, seq, arena, arena_ext, levels, index, books, ladder_keys,
                                     ladder_levels, meta, symbols, ticks, expiry, fills, l2,
                                     events, cnt)
        # stops released after an uncross meet the band around the uncross price
        lo, hi = _dynamic_band(srow)
        meta[M_BAND_LO] = lo
        meta[M_BAND_HI] = hi
    else:
        if phase != _CONTINUOUS:
            if m.kind != Kind.CANCEL and (phase == _CLOSED or phase == _HALTED):
                write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                            Reason.SYMBOL_CLOSED if phase == _CLOSED else Reason.SYMBOL_HALTED,
                            0, 0, 0)
                return
            in_call = _is_call(phase)
        elif srow.dynamic_band_bps != 0:
            lo, hi = _dynamic_band(srow)
        meta[M_BAND_LO] = lo
        meta[M_BAND_HI] = hi
        fills_before = cnt[0]
        if m.kind == Kind.NEW:
            if plain:   # _plain_path: every check but the duplicate id passes
                p = index_probe(index, m.symbol, m.order_id)
                reason, at = (Reason.DUPLICATE_ID, -1) if p >= 0 else (Reason.NONE, -1 - p)
            else:
                reason, at = check_new(m, books, arena, levels, index, ladder_levels, symbols,
                                       ticks, meta[M_STP], in_call, lo, hi)
            if reason != Reason.NONE:
                write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                            reason, 0, 0, 0)
                return
            write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.ACCEPTED,
                        Reason.NONE, 0, m.qty, 0)
            expire_ts = np.int64(0)
            if m.tif >= _DAY:
                expire_ts = _entry_expiry(m, symbols)
            if m.order_type >= _STOP:
                _add_stop(m, at, expire_ts, arena, arena_ext, levels, index, stops, ladder_keys,
                          ladder_levels, meta, expiry)
                return
            _execute(seq, m.ts, sym, np.int64(m.side), m.order_type == OrderType.MARKET,
                     np.int64(m.tif), m.price, m.qty, 0, m.order_id, m.trader, m.flags,
                     m.display_qty, expire_ts, at, arena, arena_ext, levels, index, books,
                     ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        elif m.kind == Kind.CANCEL:
            _cancel(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                    meta, symbols, stops, expiry, l2, events, cnt)
        else:
            _modify(m, seq, in_call, arena, arena_ext, levels, index, books, ladder_keys,
                    ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt)
        check_stops = cnt[0] != fills_before
    # only trades move the last price, so only a message that traded can trigger stops; a
    # symbol entering CONTINUOUS checks them too (stops triggered by the fills before a band
    # breach waited through the call). Meta first: with no stop pending anywhere the symbol's
    # stop rows are never read
    if check_stops and meta[M_STOPS_LIVE] > 0 and (
            stops[np.int64(sym) * 2].live + stops[np.int64(sym) * 2 + 1].live > 0):
        _release_stops(seq, m.ts, np.int64(sym), arena, arena_ext, levels, index, books,
                       ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                       events, cnt)
    if srow.phase != _CONTINUOUS and _is_call(srow.phase):
        _publish_indicative(seq, m.ts, np.int64(sym), levels, books, ladder_levels, symbols,
                            events, cnt)


@njit(cache=True, _nrt=False, inline="always")
def _expire(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
            symbols, stops, expiry, fills, l2, events, cnt):
    """``_expire_upto`` with no limit: every due expiry (what ``process_batch`` runs)."""
    return _expire_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                        ladder_levels, meta, symbols, stops, expiry, fills, l2, events, cnt,
                        _INT64_MAX)


@njit(cache=True, _nrt=False, inline="always")
def _expire_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                 meta, symbols, stops, expiry, fills, l2, events, cnt, limit):
    """Remove every live order whose expiry is at or before ``ts``, in heap order
    (CANCELLED/EXPIRED, and an L2 row for a resting order's level), at most ``limit`` of them;
    rows carry ``seq``.

    An order of a symbol in a call leaves with the symbol's indicative published after it if it
    changed. Resumable: it checks room for each expiry (two events, one L2 row) and returns
    NEED_OUTPUT with the state consistent and every row so far written, so the call after
    growing goes on with the next one. Returns OK when none is left or ``limit`` are done
    (``exchange.shards`` steps them one at a time, to interleave several engines' expiries).
    """
    done = 0
    while done < limit and meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= ts:
        done += 1
        if cnt[1] + 1 > len(l2) or cnt[2] + 2 > len(events):
            meta[M_NEED_FILLS] = cnt[0]
            meta[M_NEED_L2] = cnt[1] + 1
            meta[M_NEED_EVENTS] = cnt[2] + 2
            return NEED_OUTPUT
        r = np.int64(expiry[0].slot)
        o = arena[r]
        sym = o.symbol
        write_event(events, cnt, seq, ts, symbols, sym, o.order_id, Event.CANCELLED,
                    Reason.EXPIRED, o.filled, 0, 0)
        if o.marks & MARK_PENDING:
            _remove_pending(arena, arena_ext, levels, index, stops, ladder_keys, ladder_levels,
                            meta, expiry, r)
            continue
        side = np.int64(o.side)
        lv = o.level
        remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)
        L = levels[lv]
        write_l2(l2, cnt, seq, ts, sym, side, L.price, L.qty, L.count)
        if L.count == 0:
            remove_level(books, levels, ladder_keys, ladder_levels, meta,
                         np.int64(sym) * 2 + side, side, lv)
        if _is_call(symbols[sym].phase):
            _publish_indicative(seq, ts, np.int64(sym), levels, books, ladder_levels, symbols,
                                events, cnt)
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _auction_ends(ts, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, stops, expiry, fills, l2, events, cnt):
    """``_auction_ends_upto`` with no limit: every due auction (what ``process_batch`` runs)."""
    return _auction_ends_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                              ladder_levels, meta, symbols, stops, expiry, fills, l2, events,
                              cnt, _INT64_MAX)


@njit(cache=True, _nrt=False)
def _auction_ends_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                       ladder_levels, meta, symbols, stops, expiry, fills, l2, events, cnt,
                       limit):
    """Uncross every re-opening auction whose end is at or before ``ts``, in (end, symbol)
    order, at most ``limit`` of them: the uncross, the symbol enters CONTINUOUS (PHASE event,
    reason AUCTION_END), then its stops are checked (band around the uncross price). Rows
    carry ``seq``.

    Resumable like ``_expire_upto``: before each uncross it checks room for it and the stop
    cascade after it and returns what must grow, the state consistent and every earlier
    auction done. Returns OK when none is due or ``limit`` are done.
    """
    done = 0
    while done < limit and meta[M_NEXT_END] != 0 and meta[M_NEXT_END] <= ts:
        done += 1
        sym = np.int64(-1)
        for s in range(meta[M_NSYM]):
            e = symbols[s].auction_end
            if e > 0 and e <= ts and (sym < 0 or e < symbols[sym].auction_end):
                sym = s
        if sym < 0:     # an end cleared without a refresh cannot happen; stay safe
            _refresh_next_end(meta, symbols)
            return OK
        status = _uncross_room(sym, np.bool_(True), levels, books, ladder_levels, meta, stops,
                               fills, l2, events, cnt)
        if status != OK:
            return status
        srow = symbols[sym]
        uncross(seq, ts, sym, srow.auction, arena, arena_ext, levels, index, books, ladder_keys,
                ladder_levels, meta, symbols, expiry, fills, l2, events, cnt)
        srow.auction = 0
        srow.auction_end = 0
        srow.phase = _CONTINUOUS
        _refresh_next_end(meta, symbols)
        write_event(events, cnt, seq, ts, symbols, sym, 0, Event.PHASE, Reason.AUCTION_END, 0, 0,
                    srow.reference_price)
        # checked whether or not the uncross traded (see ``_process_one``)
        if stops[sym * 2].live + stops[sym * 2 + 1].live > 0:
            lo, hi = _dynamic_band(srow)
            meta[M_BAND_LO] = lo
            meta[M_BAND_HI] = hi
            _release_stops(seq, ts, sym, arena, arena_ext, levels, index, books,
                           ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                           events, cnt)
    return OK


@njit(cache=True, _nrt=False)
def _uncross_room(sym, continuous, levels, books, ladder_levels, meta, stops, fills, l2, events,
                  cnt):
    """Return OK if the outputs can take an uncross of ``sym``, its PHASE event and, if the
    symbol then is ``continuous``, the stop cascade after it (with a breach's rows); else the
    status of what must grow (NEED_OUTPUT with the ``M_NEED_*`` counts set)."""
    nf = np.int64(0)
    nl = np.int64(_PHASE_L2)
    ne = np.int64(1 + _PHASE_EVENTS)
    if continuous and stops[sym * 2].live + stops[sym * 2 + 1].live > 0:
        status, f, l, e = _cascade_need(sym, np.int64(0), levels, books, ladder_levels, meta, stops)
        if status != OK:
            return status
        nf += f
        nl += l
        ne += e
    # the uncross's own rows come after these: ask for room as if they were written already
    cnt[0] += nf
    cnt[1] += nl
    cnt[2] += ne
    ok = uncross_room(sym, books, meta, fills, l2, events, cnt)
    cnt[0] -= nf
    cnt[1] -= nl
    cnt[2] -= ne
    if not ok:
        return NEED_OUTPUT
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _levels_full(levels, meta, k):
    """Whether the level table cannot take ``k`` more rows (the free stack counted as empty)."""
    return meta[M_LEVEL_HW] + k > len(levels) and (k > 1 or meta[M_FREE_LEVEL] < 0)


@njit(cache=True, _nrt=False, inline="always")
def _room_for_one_order(arena, levels, index, meta):
    """Return OK if the arena, the level table and the order index can take one more order
    (and its level), else the first of them that must grow."""
    if meta[M_FREE_ORDER] < 0 and meta[M_ORDER_HW] >= len(arena):
        return NEED_ORDERS
    if _levels_full(levels, meta, 1):
        return NEED_LEVELS
    if 2 * (meta[M_INDEX_COUNT] + 1) > len(index):
        return NEED_INDEX
    return OK


@njit(cache=True, _nrt=False, inline="always")
def _room(m, arena, levels, index, books, ladder_levels, meta, symbols, stops, expiry, fills, l2,
          events, cnt):
    """Return OK if every array can take this message's worst case, else what must grow.

    Bounds (why they hold): every fill takes at least one lot from an aggressor, so fills are at
    most the aggressors' quantity; every fill also ends a resting order, ends the aggressor or
    uses up an iceberg slice that refills, and refills at a level are at most its reserve. With
    pending stops on the symbol and an order that can trade, the whole cascade is bounded at
    once: aggressors are the order and the symbol's P pending stops, so fills <= min(their
    quantity, resting + 2P + 1 + the refills the resting icebergs can make; released stops are
    never icebergs), both O(1) from the book rows' ``stop_qty`` and ``slices``; each aggressor adds a few events and at most two L2
    rows beyond the levels that ever exist (the book's and P more), and at most P + 1 new levels.
    Phases add at most a breach's PHASE event and L2 row (the rest of the order that breached,
    after which nothing matches) and one INDICATIVE event (``_PHASE_EVENTS``, ``_PHASE_L2``);
    a PHASE message that uncrosses needs ``_uncross_room``.
    """
    need_fills = 0
    need_l2 = 1
    need_events = 1
    sym = np.int64(m.symbol)
    if m.kind == Kind.PHASE and sym < meta[M_NSYM]:
        target = np.int64(m.phase)
        if target == _OPENING or target == _CLOSING or (
                (target == _CONTINUOUS or target == _CLOSED) and symbols[sym].auction != 0):
            return _uncross_room(sym, target == _OPENING or target == _CONTINUOUS, levels, books,
                                 ladder_levels, meta, stops, fills, l2, events, cnt)
        if target == _CONTINUOUS and stops[sym * 2].live + stops[sym * 2 + 1].live > 0:
            # entering CONTINUOUS checks the stops: the cascade, behind the PHASE event
            cnt[2] += 1
            status = _cascade_room(m, sym, np.int64(0), np.int64(0), levels, books,
                                   ladder_levels, meta, stops, fills, l2, events, cnt)
            cnt[2] -= 1
            return status
        need_events = 2     # the PHASE event, the indicative of the call it enters
    elif m.kind <= Kind.MODIFY and sym < meta[M_NSYM] and m.kind != Kind.CANCEL:
        side = np.int64(m.side)
        qty = m.qty
        is_market = m.order_type == OrderType.MARKET
        pending = m.order_type == _STOP or m.order_type == _STOP_LIMIT
        if m.kind == Kind.MODIFY:
            r = index_find(index, m.symbol, m.order_id)
            side = np.int64(arena[r].side) if r >= 0 else 2
            is_market = False
            pending = r >= 0 and (arena[r].marks & MARK_PENDING) != 0
        if side <= _SELL:
            status = _room_for_one_order(arena, levels, index, meta)
            if status != OK:
                return status
            if m.kind == Kind.NEW and m.tif >= _DAY and meta[M_EXPIRY_N] >= len(expiry):
                return NEED_EXPIRY
            own = sym * 2 + side
            if pending:
                if stops[own].n >= stops[own].cap:
                    meta[M_NEED_BOOK] = -1 - own
                    return NEED_LADDER
                need_events = 2
            else:
                if books[own].n >= books[own].cap:
                    meta[M_NEED_BOOK] = own
                    return NEED_LADDER
                opp_b = sym * 2 + 1 - side
                opp = books[opp_b]
                stp = meta[M_STP]
                if (meta[M_STOPS_LIVE] > 0 and stops[sym * 2].live + stops[sym * 2 + 1].live > 0
                        and opp.n > 0 and _crosses(
                            side, is_market, m.price,
                            levels[ladder_levels[opp.off + opp.n - 1]].price)):
                    return _cascade_room(m, sym, side, qty, levels, books, ladder_levels,
                                         meta, stops, fills, l2, events, cnt)
                bound = opp.live
                q = max(qty, 0)
                if stp != Stp.CANCEL_RESTING and q < bound:
                    bound = q  # each fill takes at least one lot
                elif opp.n > 0:
                    # refills add fills, at most one a lot: when the output has room for that
                    # anyway, no need to look closer
                    bound = q if stp != Stp.CANCEL_RESTING else bound + q
                    if (cnt[0] + bound <= len(fills)
                            and cnt[1] + opp.n + 3 + _PHASE_L2 <= len(l2)
                            and cnt[2] + 2 * bound + 4 + _PHASE_EVENTS <= len(events)):
                        return OK
                    # else: at most the reserve of the levels it can reach
                    bound = opp.live
                    h = np.int64(0)
                    acc = np.int64(0)
                    for k in range(opp.off + opp.n - 1, opp.off - 1, -1):
                        L = levels[ladder_levels[k]]
                        if not _crosses(side, is_market, m.price, L.price):
                            break
                        h += L.hidden
                        acc += L.qty + L.hidden
                        if h >= qty or (stp != Stp.CANCEL_RESTING and acc >= qty):
                            break
                    bound += min(h, max(qty, 0))
                    if stp != Stp.CANCEL_RESTING:
                        bound = min(bound, max(qty, 0))
                need_fills = bound
                need_events = 2 * bound + 4
                need_l2 = opp.n + 3
    need_events += _PHASE_EVENTS
    need_l2 += _PHASE_L2
    return OK if output_fits(meta, cnt, fills, l2, events, need_fills, need_l2,
                             need_events) else NEED_OUTPUT


@njit(cache=True, _nrt=False)
def _cascade_need(sym, qty, levels, books, ladder_levels, meta, stops):
    """Return (status, fills, l2 rows, events) a cascade of ``sym``'s pending stops behind an
    aggressor of ``qty`` may need (see ``_room``); status is what state must grow first (OK:
    none), the counts then meaningless."""
    p = stops[sym * 2].live + stops[sym * 2 + 1].live
    if _levels_full(levels, meta, p + 2):
        return NEED_LEVELS, 0, 0, 0
    for b in (sym * 2, sym * 2 + 1):
        if books[b].n + p + 1 > books[b].cap:
            meta[M_NEED_BOOK] = b
            return NEED_LADDER, 0, 0, 0
    # the book rows' running totals: the pending stops' quantity and the books' reserve
    q = max(qty, 0) + stops[sym * 2].stop_qty + stops[sym * 2 + 1].stop_qty
    resting = books[sym * 2].live + books[sym * 2 + 1].live
    units = min(resting + 2 * p + 1 + books[sym * 2].slices + books[sym * 2 + 1].slices, q)
    if meta[M_STP] != Stp.NONE:
        units += resting + p
    return (OK, units, books[sym * 2].n + books[sym * 2 + 1].n + 3 * p + 6 + _PHASE_L2,
            2 * units + 3 * p + 8 + _PHASE_EVENTS)


@njit(cache=True, _nrt=False)
def _cascade_room(m, sym, side, qty, levels, books, ladder_levels, meta, stops, fills, l2,
                  events, cnt):
    """``_room`` for an order that can trade on a symbol with pending stops (see there)."""
    status, need_fills, need_l2, need_events = _cascade_need(sym, qty, levels, books,
                                                             ladder_levels, meta, stops)
    if status != OK:
        return status
    return OK if output_fits(meta, cnt, fills, l2, events, need_fills, need_l2,
                             need_events) else NEED_OUTPUT


@njit(cache=True, _nrt=False, inline="always")
def _prefetch_ahead(msgs, i, n, ahead, arena, levels, index):
    """Prefetch what messages i+ahead, i+ahead/2 and i+ahead/4 will touch, one stage each."""
    mask = len(index) - 1
    j = i + ahead
    if j < n:
        prefetch(index, index_home(msgs[j].symbol, msgs[j].order_id, mask))
    j = i + ahead // 2
    if j < n and msgs[j].kind != Kind.NEW:
        r = index_find(index, msgs[j].symbol, msgs[j].order_id)
        if r >= 0:
            prefetch(arena, r)
    j = i + ahead // 4
    if j < n and msgs[j].kind != Kind.NEW:
        r = index_find(index, msgs[j].symbol, msgs[j].order_id)
        if r >= 0:
            o = arena[r]
            prefetch(levels, o.level)
            if o.prev >= 0:
                prefetch(arena, o.prev)
            if o.next >= 0:
                prefetch(arena, o.next)


_NOT_PLAIN = 0   # _plain_path: take the general path
_PLAIN_RESTS = 1  # a plain order that cannot trade: _rest_plain
_PLAIN_TRADES = 2  # a plain order that may trade: the general path without check_new
_PLAIN_CANCEL = 3  # a CANCEL on a CONTINUOUS symbol without a dynamic band: _cancel at once


@njit(cache=True, _nrt=False, inline="always")
def _plain_path(m, meta, symbols, ticks, books, levels, ladder_levels):
    """Return which fast path message ``m`` may take: _PLAIN_CANCEL for a CANCEL on a known
    CONTINUOUS symbol without a dynamic band; _PLAIN_RESTS or _PLAIN_TRADES for a NEW that is a
    plain limit order on a plain symbol (resting at once, or able to trade); else _NOT_PLAIN.

    Plain message: LIMIT, GTC, no flags, no stop, display, minimum or expiry fields, side and
    quantity valid, price inside the book's price band. Plain symbol: CONTINUOUS, lot size 1,
    minimum order quantity at most 1, the one-row tick table of tick 1, no static or dynamic
    band, and no pending stop anywhere (meta's count). Then every step of semantics.md's NEW
    validation but the duplicate id passes, no fill can breach a band and no stop can trigger,
    so ``_rest_plain`` (or ``_process_one`` skipping ``check_new``) gives exactly the rows of
    the general path. Why: those ~25 checks, and for a resting order the match call and the
    trade bookkeeping, were ~14 ns of the ~60 ns a resting order took; a cancel skips the
    phase, band and stop steps of ``_room`` and ``_process_one`` that cannot apply to it."""
    if m.kind == Kind.CANCEL:
        if m.symbol >= meta[M_NSYM]:
            return _NOT_PLAIN
        srow = symbols[m.symbol]
        if srow.phase == _CONTINUOUS and srow.dynamic_band_bps == 0:
            return _PLAIN_CANCEL
        return _NOT_PLAIN
    if (m.kind != Kind.NEW or m.side > _SELL or meta[M_STOPS_LIVE] != 0
            or (np.int64(m.order_type) | np.int64(m.tif) | np.int64(m.flags) | m.stop_price
                | m.display_qty | m.min_qty | m.expire_ts) != 0
            or m.qty <= 0 or m.qty > MAX_QTY or m.price <= 0 or m.symbol >= meta[M_NSYM]):
        return _NOT_PLAIN
    srow = symbols[m.symbol]
    if ((srow.phase - _CONTINUOUS) | (srow.lot_size - 1) | (srow.tick_n - 1)
            | srow.static_band_bps | srow.dynamic_band_bps | (srow.min_order_qty > 1)) != 0:
        return _NOT_PLAIN
    if ticks[srow.tick_off].tick != 1:
        return _NOT_PLAIN
    own = books[np.int64(m.symbol) * 2 + m.side]
    if m.price < own.min_price or m.price > own.max_price:
        return _NOT_PLAIN
    opp = books[np.int64(m.symbol) * 2 + 1 - m.side]
    if opp.n == 0 or not _crosses(np.int64(m.side), False, m.price,
                                  levels[ladder_levels[opp.off + opp.n - 1]].price):
        return _PLAIN_RESTS
    return _PLAIN_TRADES


@njit(cache=True, _nrt=False, inline="always")
def _rest_plain(m, seq, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
                symbols, expiry, fills, l2, events, cnt):
    """Process a message ``_plain_path`` found _PLAIN_RESTS: a duplicate id is REJECTED, else it is
    ACCEPTED and rests (CANCELLED OVERFLOW if its level would overflow), as the general path.
    Returns OK, or before writing anything the state or output that must grow."""
    sym = np.int64(m.symbol)
    side = np.int64(m.side)
    b = sym * 2 + side
    status = _room_for_one_order(arena, levels, index, meta)
    if status != OK:
        return status
    if books[b].n >= books[b].cap:
        meta[M_NEED_BOOK] = b
        return NEED_LADDER
    if not output_fits(meta, cnt, fills, l2, events, 0, 1, 2):
        return NEED_OUTPUT
    meta[M_SEQ] += 1
    meta[M_BAND_LO] = 0
    meta[M_BAND_HI] = MAX_PRICE
    p = index_probe(index, m.symbol, m.order_id)
    if p >= 0:
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.REJECTED,
                    Reason.DUPLICATE_ID, 0, 0, 0)
        return OK
    write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.ACCEPTED, Reason.NONE,
                0, m.qty, 0)
    if not _rest(seq, m.ts, m.symbol, side, m.price, m.qty, 0, m.order_id, m.trader, m.flags, 0,
                 np.int64(m.tif), np.int64(0), _LIMIT, -1 - p, arena, arena_ext, levels, index,
                 books, ladder_keys, ladder_levels, meta, expiry, l2, cnt):
        write_event(events, cnt, seq, m.ts, symbols, sym, m.order_id, Event.CANCELLED,
                    Reason.OVERFLOW, 0, 0, 0)
    return OK


# nogil: the kernel touches no Python object, so a caller may decode or journal on another
# thread while it matches (the store and rerun can overlap with it)
@njit(cache=True, _nrt=False, nogil=True)
def process_batch(msgs, start, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels,
                  meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, ahead=0):
    """Process ``msgs[start:]`` in order, writing outputs at ``cnt`` = [fills, l2, events].

    ``ahead`` is the prefetch distance in messages (0: no prefetching; results are identical
    either way). Returns (status, next): status OK with next == len(msgs) when done; otherwise
    the state or output array to grow (NEED_*) and the index of the first message not yet
    processed (the orders expiring before it may already be out, their rows written: the call
    from ``next`` goes on with the rest).
    """
    n = len(msgs)
    for i in range(start, n):
        if ahead > 0:
            _prefetch_ahead(msgs, i, n, ahead, arena, levels, index)
        m = msgs[i]
        # expiries leave before the message, in rows carrying its seq (the one it will get)
        if meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= m.ts:
            status = _expire(m.ts, meta[M_SEQ] + 1, arena, arena_ext, levels, index, books,
                             ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills, l2,
                             events, cnt)
            if status != OK:
                return status, i
        # re-opening auctions that reached their end uncross before the message, after them
        if meta[M_NEXT_END] != 0 and meta[M_NEXT_END] <= m.ts:
            status = _auction_ends(m.ts, meta[M_SEQ] + 1, arena, arena_ext, levels, index,
                                   books, ladder_keys, ladder_levels, meta, symbols, stops,
                                   expiry, fills, l2, events, cnt)
            if status != OK:
                return status, i
        plain = _plain_path(m, meta, symbols, ticks, books, levels, ladder_levels)
        if plain == _PLAIN_RESTS:
            status = _rest_plain(m, meta[M_SEQ] + 1, arena, arena_ext, levels, index, books,
                                 ladder_keys, ladder_levels, meta, symbols, expiry, fills, l2,
                                 events, cnt)
            if status != OK:
                return status, i
            continue
        if plain == _PLAIN_CANCEL:
            # what the general path does for it: a cancel never trades, so no stop is checked
            # and the symbol stays CONTINUOUS (no indicative)
            if not output_fits(meta, cnt, fills, l2, events, 0, 1, 1):
                return NEED_OUTPUT, i
            meta[M_SEQ] += 1
            meta[M_BAND_LO] = 0
            meta[M_BAND_HI] = MAX_PRICE
            _cancel(m, meta[M_SEQ], arena, arena_ext, levels, index, books, ladder_keys,
                    ladder_levels, meta, symbols, stops, expiry, l2, events, cnt)
            continue
        status = _room(m, arena, levels, index, books, ladder_levels, meta, symbols, stops,
                       expiry, fills, l2, events, cnt)
        if status != OK:
            return status, i
        meta[M_SEQ] += 1
        _process_one(m, meta[M_SEQ], arena, arena_ext, levels, index, books, ladder_keys,
                     ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt,
                     plain == _PLAIN_TRADES)
    return OK, n
