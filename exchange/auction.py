"""The call auction's uncross: choosing the one price, and executing the call book at it.

docs/semantics.md ("The uncross", "The indicative uncross") is the contract. A call book is a
symbol's two order books while matching is off: it may be crossed, and MARKET orders rest at
their side's ``CALL_MARKET_PRICE`` (BUY ``MAX_PRICE + 1``, SELL 0), which is always the best
level of its side and never a candidate price.

- ``auction_price`` picks ``(P, V, surplus)`` by the four rules (maximum executable volume,
  minimum absolute surplus, side of the surplus, reference price). It reads the book only.
- ``uncross_room`` tells whether the output arrays can take the worst case of ``uncross``.
- ``uncross`` executes ``V`` lots of each side at ``P`` in price-time priority (market orders
  first), cancels the MARKET orders left, writes one L2 row per changed level and drops emptied
  levels. It never adds a level, an order or an index key, so it needs no state room.

Why ``auction_price`` is cheap: ``B(p)`` (buy open quantity at or above ``p``) never rises
with ``p`` and ``S(p)`` never falls, so only the prices where both sides can trade matter:
limit bids from the best down to the best limit ask, limit asks from the best up to the best
limit bid, and, when market orders rest, the one limit price beyond that range where the
market quantity is first matched (every price further out has the same volume and a strictly
larger surplus, so it can never be chosen nor tie). The walk touches only those levels: an
uncrossed book without market orders costs O(1), whatever its depth.

Open quantity means displayed plus reserve throughout (a level's ``qty + hidden``).
Known limit: the side totals are int64 sums over levels; a call book whose one side holds
more than 2^63 lots (some 8 million orders of MAX_QTY) would overflow them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import (
    M_TRADE_ID, append_to_level, detach_from_level, remove_level, reserve_slices,
)
from .removal import remove_order
from .rows import output_fits, write_event, write_l2
from .schema import AUCTION_SIDE, CALL_MARKET_PRICE, Event, Reason

# numba keys this module's cache on this file only; these files are compiled into its kernels
guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.removal", "exsim.exchange.rows",
                                "exsim.exchange.schema"))

_BUY_MARKET = CALL_MARKET_PRICE[0]    # MAX_PRICE + 1: above every limit price
_SELL_MARKET = CALL_MARKET_PRICE[1]   # 0: below every limit price


@njit(cache=True, _nrt=False, inline="always")
def _open_at(levels, ladder_levels, pos):
    """Return the price and open quantity (displayed + reserve) of the level at ladder ``pos``."""
    L = levels[ladder_levels[pos]]
    return L.price, L.qty + L.hidden


@njit(cache=True, _nrt=False, inline="always")
def _market_qty(levels, books, ladder_levels, b, market_price):
    """Return (open quantity of book ``b``'s market level, number of limit levels of ``b``)."""
    bk = books[b]
    n = bk.n
    if n > 0:
        price, q = _open_at(levels, ladder_levels, bk.off + n - 1)
        if price == market_price:
            return q, n - 1
    return np.int64(0), n


@njit(cache=True, _nrt=False)
def auction_price(sym, levels, books, ladder_levels, reference):
    """Return ``(price, volume, surplus)`` of the uncross of symbol ``sym``'s call book, as int64.

    Rules 1-4 of docs/semantics.md "The uncross": the limit prices with the maximum executable
    volume ``min(B, S)``; of those the minimum ``|B - S|``; of those the highest if every one
    has a buy surplus, the lowest if every one has a sell surplus; otherwise ``reference``
    clamped into their ``[lowest, highest]`` (the surplus is then the one at that price). With
    market orders on both sides and no limit order, ``reference`` with the market volume.
    Returns (0, 0, 0) when nothing executes (no crossing, or market orders only and
    ``reference <= 0``). Reads the book only; never raises.
    """
    zero = np.int64(0)
    bb = np.int64(sym) * 2
    bo = books[bb].off
    so = books[bb + 1].off
    # bid positions bo .. bo+nb-1 rise in price; ask positions so .. so+ns-1 fall in price
    bm, nb = _market_qty(levels, books, ladder_levels, bb, _BUY_MARKET)
    sm, ns = _market_qty(levels, books, ladder_levels, bb + 1, _SELL_MARKET)
    best_bid = levels[ladder_levels[bo + nb - 1]].price if nb > 0 else np.int64(-1)
    best_ask = levels[ladder_levels[so + ns - 1]].price if ns > 0 else np.int64(_BUY_MARKET)

    # bids that can trade: down to the best ask, and with market sells one more, the first
    # below it where B reaches the market sell quantity
    btot = bm
    k = nb - 1
    while k >= 0:
        price, q = _open_at(levels, ladder_levels, bo + k)
        beyond = price < best_ask
        if beyond and sm == 0:
            break
        btot += q
        k -= 1
        if beyond and btot >= sm:
            break
    b_lo = k + 1          # bids in play: positions b_lo .. nb-1
    # asks likewise, mirrored
    stot = sm
    k = ns - 1
    while k >= 0:
        price, q = _open_at(levels, ladder_levels, so + k)
        beyond = price > best_bid
        if beyond and bm == 0:
            break
        stot += q
        k -= 1
        if beyond and stot >= bm:
            break
    s_lo = k + 1          # asks in play: positions s_lo .. ns-1

    # every candidate in play in rising price: B(p) = btot - bids below p, S(p) = sm + asks <= p
    i = b_lo
    j = ns - 1
    below = zero
    s_le = sm
    best_v = zero
    best_a = zero
    lo = zero
    hi = zero
    lo_s = zero
    hi_s = zero
    while i < nb or j >= s_lo:
        bp = zero
        ap = zero
        if i < nb:
            bp = levels[ladder_levels[bo + i]].price
        if j >= s_lo:
            ap = levels[ladder_levels[so + j]].price
        take_bid = i < nb and (j < s_lo or bp <= ap)
        take_ask = j >= s_lo and (i >= nb or ap <= bp)
        p = bp if take_bid else ap
        at_p = zero
        if take_bid:
            at_p = _open_at(levels, ladder_levels, bo + i)[1]
            i += 1
        if take_ask:
            s_le += _open_at(levels, ladder_levels, so + j)[1]
            j -= 1
        b_ge = btot - below
        below += at_p
        v = min(b_ge, s_le)
        sur = b_ge - s_le
        a = abs(sur)
        if v == 0:
            continue
        if v > best_v or (v == best_v and a < best_a):
            best_v = v
            best_a = a
            lo = p
            hi = p
            lo_s = sur
            hi_s = sur
        elif v == best_v and a == best_a:
            hi = p          # rising walk: the new highest tie
            hi_s = sur

    if best_v == 0:
        if bm > 0 and sm > 0 and nb == 0 and ns == 0 and reference > 0:
            return np.int64(reference), min(bm, sm), bm - sm
        return zero, zero, zero
    # surplus never rises with the price: the highest tie has the smallest surplus
    if best_a > 0 and hi_s > 0:
        return hi, best_v, hi_s
    if best_a > 0 and lo_s < 0:
        return lo, best_v, lo_s
    p = min(max(np.int64(reference), lo), hi)
    if p == lo:
        return lo, best_v, lo_s
    if p == hi:
        return hi, best_v, hi_s
    # a reference strictly inside the ties: its own surplus (the volume there is best_v too,
    # as min(B, S) never dips between two prices that reach it)
    b_ge = bm
    for k in range(nb - 1, b_lo - 1, -1):
        price, q = _open_at(levels, ladder_levels, bo + k)
        if price < p:
            break
        b_ge += q
    s_le = sm
    for k in range(ns - 1, s_lo - 1, -1):
        price, q = _open_at(levels, ladder_levels, so + k)
        if price > p:
            break
        s_le += q
    return p, best_v, b_ge - s_le


@njit(cache=True, _nrt=False)
def uncross_room(sym, books, meta, fills, l2, events, cnt):
    """Return True if the outputs from ``cnt`` on can take the worst case of ``uncross`` of
    ``sym``; else set ``meta[M_NEED_FILLS/M_NEED_L2/M_NEED_EVENTS]`` to the row totals needed
    and return False.

    Bounds: each fill uses up at least one order's share, so fills <= live orders of both books;
    events: the UNCROSS row, two per fill, one per MARKET order left (at most every live order)
    and 4 for the caller's PHASE and INDICATIVE rows; L2: one per level of both books, plus 2.
    """
    bb = np.int64(sym) * 2
    live = books[bb].live + books[bb + 1].live
    need_fills = live
    need_events = 1 + 2 * need_fills + live + 4
    need_l2 = books[bb].n + books[bb + 1].n + 2
    return output_fits(meta, cnt, fills, l2, events, need_fills, need_l2, need_events)


@njit(cache=True, _nrt=False)
def _remove(arena, arena_ext, levels, books, index, expiry, meta, r):
    """``removal.remove_order`` compiled once for this module (each inlined copy of it costs
    seconds of compile time)."""
    remove_order(arena, arena_ext, levels, books, index, expiry, meta, r)


@njit(cache=True, _nrt=False, inline="always")
def _take(arena, arena_ext, levels, books, r, q):
    """Execute ``q`` lots of order ``r``: its displayed part first, then its reserve."""
    o = arena[r]
    L = levels[o.level]
    shown = min(q, o.leaves)
    o.leaves -= shown
    L.qty -= shown
    o.hidden -= q - shown
    L.hidden -= q - shown
    if q != shown:
        d = arena_ext[r].display
        books[np.int64(o.symbol) * 2 + o.side].slices += (reserve_slices(o.hidden, d)
                                                          - reserve_slices(o.hidden + q - shown, d))
    o.filled += q


@njit(cache=True, _nrt=False, inline="always")
def _order_event(events, cnt, seq, ts, symbols, sym, arena, r, price):
    """Write order ``r``'s PARTIAL or FILLED event after an auction fill at ``price``."""
    o = arena[r]
    left = o.leaves + o.hidden
    write_event(events, cnt, seq, ts, symbols, sym, o.order_id,
                Event.FILLED if left == 0 else Event.PARTIAL, Reason.NONE, o.filled, left, price)


@njit(cache=True, _nrt=False, inline="always")
def _share(arena, r, left):
    """Return how much of ``left`` order ``r`` executes: its whole open quantity, at most."""
    return min(arena[r].leaves + arena[r].hidden, left)


@njit(cache=True, _nrt=False)
def _next_order(arena, arena_ext, levels, index, books, ladder_levels, meta, expiry, b, k, r):
    """Remove the fully executed order ``r`` (its level stays, for its L2 row) and return
    ``(k, r)`` of the next order in priority: the next in ``r``'s queue, else the head of the
    next level down the ladder (``k`` counts levels from the best, 0 = best)."""
    nxt = arena[r].next
    _remove(arena, arena_ext, levels, books, index, expiry, meta, r)
    if nxt < 0:
        k += 1
        bk = books[b]
        nxt = levels[ladder_levels[bk.off + bk.n - 1 - k]].head
    return k, nxt


@njit(cache=True, _nrt=False)
def _finish_last(arena, arena_ext, levels, index, books, expiry, meta, r):
    """Settle the last order of a side after the fills: removed if nothing is left of it; an
    iceberg whose displayed part is used up shows its next slice at the back of its level."""
    o = arena[r]
    if o.leaves + o.hidden == 0:
        _remove(arena, arena_ext, levels, books, index, expiry, meta, r)
    elif o.leaves == 0:
        lv = o.level
        s = min(arena_ext[r].display, o.hidden)
        o.hidden -= s
        levels[lv].hidden -= s
        books[np.int64(o.symbol) * 2 + o.side].slices -= 1   # a whole slice or the last of it
        detach_from_level(arena, levels, r)
        o.leaves = s
        append_to_level(arena, levels, r, lv)


@njit(cache=True, _nrt=False)
def _cancel_markets(seq, ts, sym, side, arena, arena_ext, levels, index, books, ladder_levels,
                    meta, symbols, expiry, events, cnt):
    """Cancel (NO_LIQUIDITY) every order left at ``side``'s market level, in priority; return
    1 if the book has a market level (it changed), else 0. The emptied level stays."""
    b = np.int64(sym) * 2 + side
    bk = books[b]
    if bk.n == 0:
        return 0
    L = levels[ladder_levels[bk.off + bk.n - 1]]
    if L.price != (_BUY_MARKET if side == 0 else _SELL_MARKET):
        return 0
    r = L.head
    while r >= 0:
        nxt = arena[r].next
        write_event(events, cnt, seq, ts, symbols, sym, arena[r].order_id, Event.CANCELLED,
                    Reason.NO_LIQUIDITY, arena[r].filled, 0, 0)
        _remove(arena, arena_ext, levels, books, index, expiry, meta, r)
        r = nxt
    return 1


@njit(cache=True, _nrt=False)
def _publish_levels(seq, ts, sym, side, changed, levels, books, ladder_keys, ladder_levels, meta,
                    l2, cnt):
    """Write the L2 rows of ``side``'s ``changed`` best levels, best first, then drop the
    emptied ones (only the best levels can be empty: each is taken from the top, in O(1))."""
    b = np.int64(sym) * 2 + side
    bk = books[b]
    for k in range(changed):
        L = levels[ladder_levels[bk.off + bk.n - 1 - k]]
        write_l2(l2, cnt, seq, ts, sym, side, L.price, L.qty, L.count)
    for k in range(changed):
        lv = ladder_levels[bk.off + bk.n - 1]
        if levels[lv].count != 0:
            break
        remove_level(books, levels, ladder_keys, ladder_levels, meta, b, side, lv)


@njit(cache=True, _nrt=False)
def uncross(seq, ts, sym, auction, arena, arena_ext, levels, index, books, ladder_keys,
            ladder_levels, meta, symbols, expiry, fills, l2, events, cnt):
    """Run the uncross of symbol ``sym``'s call book (docs/semantics.md, "The uncross") and
    return the volume ``V`` executed (0: nothing traded).

    Writes, with ``seq``/``ts``: the UNCROSS event (its ``phase`` = ``auction``); per fill the
    fill (``aggressor_side`` AUCTION_SIDE, the next trade id), the BUY then the SELL order's
    PARTIAL/FILLED event; CANCELLED/NO_LIQUIDITY for every MARKET order left, BUY side first;
    one L2 row per changed level, BUY best first, then SELL. The reference of rule 4 is the
    symbol's reference price, else its last trade price, else 0. With ``V > 0`` the symbol's
    last trade price and reference price become the auction price. Leaves the phase, the
    pending auction and the stops to the caller, who has checked ``uncross_room``. Never raises.
    """
    srow = symbols[sym]
    reference = srow.reference_price if srow.reference_price > 0 else srow.last_price
    if reference < 0:
        reference = 0
    price, volume, surplus = auction_price(sym, levels, books, ladder_levels, reference)
    write_event(events, cnt, seq, ts, symbols, sym, 0, Event.UNCROSS, Reason.NONE, volume,
                surplus, price)
    events[cnt[2] - 1].phase = auction
    bb = np.int64(sym) * 2
    sb = bb + 1
    kb = -1           # levels reached below the best, per side (-1: none)
    ks = -1
    if volume > 0:
        kb = 0
        ks = 0
        rb = levels[ladder_levels[books[bb].off + books[bb].n - 1]].head
        rs = levels[ladder_levels[books[sb].off + books[sb].n - 1]].head
        left = volume
        share_b = _share(arena, rb, left)
        share_s = _share(arena, rs, left)
        while True:
            q = min(share_b, share_s)
            meta[M_TRADE_ID] += 1
            f = fills[cnt[0]]
            f.seq = seq
            f.ts = ts
            f.trade_id = meta[M_TRADE_ID]
            f.price = price
            f.qty = q
            f.symbol = sym
            f.buy_order_id = arena[rb].order_id
            f.sell_order_id = arena[rs].order_id
            f.buy_trader = arena[rb].trader
            f.sell_trader = arena[rs].trader
            f.aggressor_side = AUCTION_SIDE
            cnt[0] += 1
            _take(arena, arena_ext, levels, books, rb, q)
            _order_event(events, cnt, seq, ts, symbols, sym, arena, rb, price)
            _take(arena, arena_ext, levels, books, rs, q)
            _order_event(events, cnt, seq, ts, symbols, sym, arena, rs, price)
            left -= q
            share_b -= q
            share_s -= q
            if left == 0:
                break
            # a share short of what is left is the order's whole open quantity: it is done
            if share_b == 0:
                kb, rb = _next_order(arena, arena_ext, levels, index, books, ladder_levels, meta,
                                     expiry, bb, kb, rb)
                share_b = _share(arena, rb, left)
            if share_s == 0:
                ks, rs = _next_order(arena, arena_ext, levels, index, books, ladder_levels, meta,
                                     expiry, sb, ks, rs)
                share_s = _share(arena, rs, left)
        _finish_last(arena, arena_ext, levels, index, books, expiry, meta, rb)
        _finish_last(arena, arena_ext, levels, index, books, expiry, meta, rs)
    mb = _cancel_markets(seq, ts, sym, 0, arena, arena_ext, levels, index, books, ladder_levels,
                         meta, symbols, expiry, events, cnt)
    ms = _cancel_markets(seq, ts, sym, 1, arena, arena_ext, levels, index, books, ladder_levels,
                         meta, symbols, expiry, events, cnt)
    _publish_levels(seq, ts, sym, 0, max(kb + 1, mb), levels, books, ladder_keys, ladder_levels,
                    meta, l2, cnt)
    _publish_levels(seq, ts, sym, 1, max(ks + 1, ms), levels, books, ladder_keys, ladder_levels,
                    meta, l2, cnt)
    if volume > 0:
        srow.last_price = price
        srow.reference_price = price
    return volume
