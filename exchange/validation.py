"""Every reject decision of the matching kernel: which reason, if any, refuses a message.

docs/semantics.md ("Validation") is the contract: the checks run in its step order and the first
failure wins. ``check_new`` decides a NEW (steps 3-22), ``check_modify`` a MODIFY (steps 3-15)
and ``not_owner`` the ownership step of CANCEL and MODIFY; ``check_phase`` a PHASE message
(Trading phases, its steps 2-5). ``band_width`` is the half-width of every price band. They only read the state: a message
they refuse changes nothing, and one they pass is then applied by ``exchange.kernels``.

Invariants:
- Pure reads of the book state arrays; no allocation, no Python objects (njit, inlined into the
  kernel).
- The common path stays cheap: a symbol with lot size 1, minimum 1 and the one-row tick table
  ``[(1, 1)]`` costs one predictable branch each for lot, minimum and tick.
- ``fillable`` walks the opposite side exactly as matching would take it; FOK (step 21) and
  minimum quantity (step 22) both ask it whether a quantity is reachable now.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import MARK_PENDING, M_OWNERSHIP
from .fillable import fillable  # the FOK / min_qty walk (icebergs' reserve and STP as matching)
from .order_index import index_probe
from .schema import (
    CALL_MARKET_PRICE, KNOWN_FLAGS, MAX_LEVEL_QTY, MAX_QTY, Flag, OrderType, Phase, Reason, Side,
    Tif,
)

# numba keys this module's cache on this file only; these files are compiled into its functions
guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.fillable", "exsim.exchange.order_index",
                                "exsim.exchange.schema"))

__all__ = ["check_new", "check_modify", "check_phase", "not_owner", "fillable", "on_tick",
           "off_lot", "crosses", "best_crosses", "stop_reached", "band_width",
           "outside_static_band", "is_call_market"]

_BUY = int(Side.BUY)
_SELL = int(Side.SELL)
_POST_ONLY = int(Flag.POST_ONLY)
_LIMIT = int(OrderType.LIMIT)
_MARKET = int(OrderType.MARKET)
_STOP = int(OrderType.STOP)
_STOP_LIMIT = int(OrderType.STOP_LIMIT)
_GTC = int(Tif.GTC)
_FOK = int(Tif.FOK)
_DAY = int(Tif.DAY)
_GTD = int(Tif.GTD)
_IOC = int(Tif.IOC)
_REOPENING = int(Phase.REOPENING_AUCTION)
_LAST_PHASE = int(max(Phase))
_CALL_BUY = CALL_MARKET_PRICE[0]
_CALL_SELL = CALL_MARKET_PRICE[1]


@njit(cache=True, _nrt=False, inline="always")
def band_width(x, bps):
    """Return ``x * bps // 10_000`` for ``0 <= x <= MAX_PRICE`` and ``0 <= bps <= 10_000``
    without overflowing int64 (the product itself may not fit)."""
    return (x // 10_000) * bps + (x % 10_000) * bps // 10_000


@njit(cache=True, _nrt=False, inline="always")
def outside_static_band(sym_row, price):
    """Return whether ``price`` lies outside the symbol's static band (False with no band or no
    reference price): steps 13a of NEW and 11a of MODIFY."""
    bps = sym_row.static_band_bps
    if bps == 0:
        return False
    ref = sym_row.reference_price
    if ref == 0:
        return False
    w = band_width(ref, bps)
    return ref - price > w or price - ref > w   # differences: ref + w could pass int64


@njit(cache=True, _nrt=False, inline="always")
def is_call_market(side, price):
    """Return whether a resting order of ``side`` at ``price`` is a MARKET order entered in a
    call (it rests at ``CALL_MARKET_PRICE[side]``, outside every limit price)."""
    return price == (_CALL_BUY if side == _BUY else _CALL_SELL)


@njit(cache=True, _nrt=False, inline="always")
def check_phase(m, books, symbols, ticks):
    """Return the reason PHASE message ``m`` is refused (Trading phases, PHASE messages steps
    2-5), or Reason.NONE. The caller has checked the kind and the symbol (step 1)."""
    if m.phase > _LAST_PHASE:
        return Reason.BAD_PHASE
    if m.price < 0:
        return Reason.BAD_PRICE
    b = np.int64(m.symbol) * 2
    if m.price > 0 and (m.price < books[b].min_price or m.price > books[b].max_price):
        return Reason.PRICE_OUT_OF_BAND
    if m.price > 0 and not on_tick(ticks, symbols[m.symbol], m.price):
        return Reason.OFF_TICK
    if m.expire_ts != 0 and (m.phase != _REOPENING or m.expire_ts <= m.ts):
        return Reason.BAD_EXPIRY
    return Reason.NONE


@njit(cache=True, _nrt=False, inline="always")
def crosses(side, is_market, limit, level_price):
    """Return whether an incoming order of ``side`` at ``limit`` (any price if ``is_market``)
    trades with a level at ``level_price``."""
    if is_market:
        return True
    if side == _BUY:
        return level_price <= limit
    return level_price >= limit


@njit(cache=True, _nrt=False, inline="always")
def best_crosses(books, levels, ladder_levels, opp_b, side, limit):
    """Return whether the best level of book ``opp_b`` crosses a ``side`` order at ``limit``
    (False for an empty book)."""
    bk = books[opp_b]
    if bk.n == 0:
        return False
    return crosses(side, False, limit, levels[ladder_levels[bk.off + bk.n - 1]].price)


@njit(cache=True, _nrt=False, inline="always")
def on_tick(ticks, sym_row, price):
    """Return whether ``price`` (>= 1) is on the symbol's tick table: ``price % tick(price) == 0``
    with ``tick(price)`` the tick of the last row whose ``from_price <= price``."""
    off = sym_row.tick_off
    n = sym_row.tick_n
    if n == 1:
        t = ticks[off].tick
        return t == 1 or price % t == 0
    # rows ascend by from_price and the first is 1 <= price: count the rows at or below price
    lo = 1
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if ticks[off + mid].from_price <= price:
            lo = mid + 1
        else:
            hi = mid
    return price % ticks[off + lo - 1].tick == 0


@njit(cache=True, _nrt=False, inline="always")
def off_lot(sym_row, qty):
    """Return whether ``qty`` is not a multiple of the symbol's lot size."""
    lot = sym_row.lot_size
    return lot != 1 and qty % lot != 0


@njit(cache=True, _nrt=False, inline="always")
def _bad_price(books, ticks, sym_row, own_b, price):
    """Return the reason ``price`` is refused as a limit price (steps 11-13), or NONE."""
    if price <= 0:
        return Reason.BAD_PRICE
    if price < books[own_b].min_price or price > books[own_b].max_price:
        return Reason.PRICE_OUT_OF_BAND
    if not on_tick(ticks, sym_row, price):
        return Reason.OFF_TICK
    return Reason.NONE


@njit(cache=True, _nrt=False, inline="always")
def _bad_stop_price(books, ticks, sym_row, own_b, stop_price):
    """Return whether ``stop_price`` is <= 0, outside the band or off the tick table."""
    return (stop_price <= 0 or stop_price < books[own_b].min_price
            or stop_price > books[own_b].max_price or not on_tick(ticks, sym_row, stop_price))


@njit(cache=True, _nrt=False, inline="always")
def stop_reached(sym_row, side, stop_price):
    """Return whether a ``side`` stop at ``stop_price`` is already reached by the symbol's last
    trade price (never before the symbol's first trade)."""
    last = sym_row.last_price
    if last == 0:
        return False
    if side == _BUY:
        return stop_price <= last
    return stop_price >= last


@njit(cache=True, _nrt=False, inline="always")
def not_owner(m, arena, r, meta):
    """Return whether ownership is on and message ``m`` comes from a trader other than the owner
    of live order ``r`` (CANCEL step 4, MODIFY step 4)."""
    return meta[M_OWNERSHIP] != 0 and m.trader != arena[r].trader


@njit(cache=True, _nrt=False, inline="always")
def check_new(m, books, arena, levels, index, ladder_levels, symbols, ticks, stp, in_call, lo,
              hi):
    """Return (reason, -1) for a NEW message refused by steps 3-22 of semantics.md, or
    (Reason.NONE, the empty index bucket its id probe stopped at) if it may be accepted.
    ``in_call``: the symbol is in a call (step 17a); ``[lo, hi]``: the dynamic band the FOK and
    minimum-quantity walks stay inside.

    The caller has checked the kind, that the symbol exists and its phase (steps 1-2a)."""
    if m.side > _SELL:
        return Reason.BAD_SIDE, -1
    ot = m.order_type
    if ot > _STOP_LIMIT:
        return Reason.BAD_ORDER_TYPE, -1
    tif = m.tif
    is_stop = ot >= _STOP
    if tif > _GTD or (ot == _MARKET and tif >= _DAY) or (is_stop and tif == _FOK):
        return Reason.BAD_TIF, -1
    if m.flags & ~KNOWN_FLAGS:
        return Reason.BAD_FLAGS, -1
    post_only = (m.flags & _POST_ONLY) != 0
    rests = tif == _GTC or tif >= _DAY   # a tif that lets the order rest
    if post_only and (ot != _LIMIT or not rests):
        return Reason.BAD_FLAGS, -1
    qty = m.qty
    if qty <= 0:
        return Reason.BAD_QTY, -1
    if qty > MAX_QTY:
        return Reason.OVERFLOW, -1
    sym_row = symbols[m.symbol]
    if off_lot(sym_row, qty):
        return Reason.OFF_LOT, -1
    if qty < sym_row.min_order_qty:
        return Reason.BELOW_MIN_QTY, -1
    own_b = np.int64(m.symbol) * 2 + m.side
    if ot == _LIMIT or ot == _STOP_LIMIT:
        reason = _bad_price(books, ticks, sym_row, own_b, m.price)
        if reason != Reason.NONE:
            return reason, -1
        if outside_static_band(sym_row, m.price):
            return Reason.OUTSIDE_STATIC_BAND, -1
    if is_stop and _bad_stop_price(books, ticks, sym_row, own_b, m.stop_price):
        return Reason.BAD_STOP_PRICE, -1
    display = m.display_qty
    min_qty = m.min_qty
    # one test for the common message that has none of these fields (steps 15-17)
    if (display | min_qty | m.expire_ts) != 0 or tif == _GTD:
        if display != 0 and (display < 0 or display > qty or off_lot(sym_row, display)
                             or ot != _LIMIT or not rests):
            return Reason.BAD_DISPLAY_QTY, -1
        if min_qty != 0 and (min_qty < 0 or min_qty > qty or off_lot(sym_row, min_qty)
                             or tif == _FOK or is_stop):
            return Reason.BAD_MIN_QTY, -1
        if (m.expire_ts <= m.ts) if tif == _GTD else (m.expire_ts != 0):
            return Reason.BAD_EXPIRY, -1
    if in_call and (tif == _IOC or tif == _FOK or post_only or min_qty > 0):
        return Reason.NOT_IN_CALL, -1
    p = index_probe(index, m.symbol, m.order_id)
    if p >= 0:
        return Reason.DUPLICATE_ID, -1
    if is_stop:
        if stop_reached(sym_row, m.side, m.stop_price):
            return Reason.STOP_PRICE_REACHED, -1
        return Reason.NONE, -1 - p
    opp_b = own_b ^ 1
    if post_only and best_crosses(books, levels, ladder_levels, opp_b, m.side, m.price):
        return Reason.POST_ONLY_WOULD_CROSS, -1
    is_market = ot == _MARKET
    if tif == _FOK and not fillable(books, levels, arena, ladder_levels, opp_b, m.side,
                                    is_market, m.price, qty, m.trader, stp, lo, hi):
        return Reason.FOK_CANNOT_FILL, -1
    if min_qty > 0 and not fillable(books, levels, arena, ladder_levels, opp_b, m.side,
                                    is_market, m.price, min_qty, m.trader, stp, lo, hi):
        return Reason.MIN_QTY_CANNOT_FILL, -1
    return Reason.NONE, -1 - p


@njit(cache=True, _nrt=False, inline="always")
def check_modify(m, r, books, arena, arena_ext, levels, ladder_levels, symbols, ticks, meta,
                 in_call):
    """Return the reason MODIFY message ``m`` is refused (steps 3-15 of semantics.md), or
    Reason.NONE. ``r`` is the arena row of the live order it names (-1: none, UNKNOWN_ID); a
    pending stop (marked MARK_PENDING, its ext row then written) is checked as one.
    ``in_call``: the symbol is in a call (step 11b).

    The caller has checked the kind, that the symbol exists and its phase (steps 1-2a)."""
    if r < 0:
        return Reason.UNKNOWN_ID
    o = arena[r]
    if meta[M_OWNERSHIP] != 0 and m.trader != o.trader:
        return Reason.NOT_OWNER
    qty = m.qty
    if qty <= 0:
        return Reason.BAD_QTY
    if qty > MAX_QTY:
        return Reason.OVERFLOW
    sym_row = symbols[m.symbol]
    if off_lot(sym_row, qty):
        return Reason.OFF_LOT
    if qty < sym_row.min_order_qty:
        return Reason.BELOW_MIN_QTY
    own_b = np.int64(m.symbol) * 2 + o.side
    pending = (o.marks & MARK_PENDING) != 0
    if not pending or arena_ext[r].order_type == _STOP_LIMIT:
        reason = _bad_price(books, ticks, sym_row, own_b, m.price)
        if reason != Reason.NONE:
            return reason
        if outside_static_band(sym_row, m.price):
            return Reason.OUTSIDE_STATIC_BAND
    if in_call and not pending and is_call_market(o.side, o.price):
        return Reason.NOT_IN_CALL
    if pending:
        if _bad_stop_price(books, ticks, sym_row, own_b, m.stop_price):
            return Reason.BAD_STOP_PRICE
        if stop_reached(sym_row, o.side, m.stop_price):
            return Reason.STOP_PRICE_REACHED
        return Reason.NONE
    if m.price == o.price:
        # the level's total counts displayed and reserve quantity; the order's open quantity
        # (its displayed leaves plus its reserve) is replaced by the new qty
        L = levels[o.level]
        if (L.qty + L.hidden) - (o.leaves + o.hidden) > MAX_LEVEL_QTY - qty:
            return Reason.OVERFLOW
    elif (o.flags & _POST_ONLY) and best_crosses(books, levels, ladder_levels, own_b ^ 1,
                                                  o.side, m.price):
        return Reason.POST_ONLY_WOULD_CROSS
    return Reason.NONE
