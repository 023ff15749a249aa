"""Matching one aggressor against the book, and resting what is left.

``_execute`` takes an accepted order through ``_match`` (price-time priority, self-trade
prevention, the dynamic band that interrupts continuous trading: ``_interrupt``) and ``_rest``
(the remainder joins the back of its level; an iceberg shows its slice). The hot path inlines
``_execute``; the cold callers (stops released, a modify that crosses) share one compiled copy,
``_execute_cold``, so the matching code is compiled twice, not once per caller.

Invariants: a fill prices at the resting order's price; ``_match`` never allocates (``room``
checked the worst case before the message); after it no order of the symbol crosses unless the
symbol is in a call or a band stopped the match.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .auction import auction_price
from .book import (
    M_BAND_HI, M_BAND_LO, M_INDEX_COUNT, M_NEXT_END, M_NSYM, M_STP, M_TRADE_ID, alloc_order,
    append_to_level, detach_from_level, find_or_add_level, remove_level, reserve_slices,
    set_cold,
)
from .expiry import heap_push
from .order_index import index_insert, index_put
from .removal import remove_order
from .rows import write_event, write_l2
from .schema import (
    CALL_MARKET_PRICE, Event, MAX_LEVEL_QTY, MAX_PRICE, OrderType, Phase, Reason, Side, Stp,
    Tif,
)
from .validation import band_width, crosses as _crosses

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=(
    "exsim.exchange.auction", "exsim.exchange.book", "exsim.exchange.expiry",
    "exsim.exchange.fillable", "exsim.exchange.order_index", "exsim.exchange.prefetch",
    "exsim.exchange.removal", "exsim.exchange.rows", "exsim.exchange.schema",
    "exsim.exchange.validation"))

_BUY = int(Side.BUY)
_IOC = int(Tif.IOC)
_FOK = int(Tif.FOK)
_LIMIT = int(OrderType.LIMIT)
_MARKET = int(OrderType.MARKET)
_CONTINUOUS = int(Phase.CONTINUOUS)
_PRE_OPEN = int(Phase.PRE_OPEN)
_PRE_CLOSE = int(Phase.PRE_CLOSE)
_REOPENING = int(Phase.REOPENING_AUCTION)
_CALL_BUY = CALL_MARKET_PRICE[0]
_CALL_SELL = CALL_MARKET_PRICE[1]
_INT64_MAX = (1 << 63) - 1
# how matching ended short of filling the aggressor (``_match``)
_RAN_OUT = 0    # no crossing level left (or none was needed)
_BY_STP = 1     # self-trade prevention stopped it
_BY_BAND = 2    # the next fill would have printed outside the dynamic band
_BY_CALL = 3    # the symbol is in a call: no matching at all


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
