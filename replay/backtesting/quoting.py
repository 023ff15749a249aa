"""The quote rules of a quote strategy, written once: ``@njit`` functions both strategy paths call.

A quote strategy (``strategy.QuoteStrategy``) keeps at most one live order per side. Its state is
``slots``, int64[8]: per side (BUY at 0, SELL at 4) the order id, price, open quantity and a live
flag (1/0). Three rules act on it:

- ``reconcile(slots, quote)``: the quote function wrote [bid_px, bid_qty, ask_px,
  ask_qty] into ``quote``; per side, decide the one message (``Kind.NEW``, ``Kind.MODIFY``,
  ``Kind.CANCEL`` or ``NO_ACTION``) that moves the live quote there, and update the slot. A price
  <= 0 or a qty <= 0 means no quote on that side. The caller sends the messages, BUY side first,
  and writes the id of a NEW order into its slot (``slots[4 * side]``).
- ``quote_report(slots, order_id, event)``: a slot stops being live once its order is filled,
  cancelled or rejected; ``quote_reports`` applies it to a run of EVENT_DTYPE rows.
- ``fill_effect(side, price, qty, taker, terms)``: what one fill on ``side`` does to (position,
  cash, fees): a buy adds ``qty`` and costs its notional ``price * qty * tick_value`` (ticks x
  lots when ``tick_value`` is 1; see ``money``), a sell the reverse; the fee is the taker rate of
  the notional when the strategy was the aggressor (``taker``), else the maker rate (negative:
  a rebate). ``terms`` is ``Money.terms()``: [tick_value, maker_rate, taker_rate].
  ``Context`` (Python strategies) and ``account`` (the njit path) both apply it.

Invariant: these functions are the only statement of the rules. The njit path
(``kernels.run_quotes``) calls them inside numba; the Python path calls the same compiled
functions from Python, so a quote function gives the same orders and fills on both paths.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.schema import Event, Kind

# numba freezes the schema's Event/Kind codes into these kernels but keys them on this file
guard(__name__, __file__, deps=("exsim.exchange.schema",))

__all__ = ["NO_ACTION", "SLOTS", "reconcile", "quote_report", "quote_reports", "fill_effect",
           "account"]

NO_ACTION = -1   # reconcile: this side's quote is already where the quote function wants it
SLOTS = 8        # length of a slots array: (order id, price, qty, live) per side
_NEW, _MODIFY, _CANCEL = int(Kind.NEW), int(Kind.MODIFY), int(Kind.CANCEL)


@njit(cache=True)
def _reconcile_side(slots, quote, side):
    """``reconcile`` for one side: returns its action."""
    s = 4 * side
    price = quote[2 * side]
    qty = quote[2 * side + 1]
    if price <= 0:
        qty = 0
    if slots[s + 3] == 1:
        if qty <= 0:
            slots[s + 3] = 0
            return _CANCEL
        if price != slots[s + 1] or qty != slots[s + 2]:
            slots[s + 1] = price
            slots[s + 2] = qty
            return _MODIFY
        return NO_ACTION
    if qty > 0:
        slots[s + 1] = price
        slots[s + 2] = qty
        slots[s + 3] = 1
        return _NEW
    return NO_ACTION


@njit(cache=True)
def reconcile(slots, quote):
    """Return (BUY action, SELL action): per side the message kind that moves its quote to the
    one in ``quote``, or NO_ACTION; updates ``slots`` (the id of a NEW order is the caller's to
    set)."""
    return _reconcile_side(slots, quote, 0), _reconcile_side(slots, quote, 1)


@njit(cache=True)
def quote_report(slots, order_id, event):
    """Apply one execution report (order id, Event code) to ``slots``. Returns nothing."""
    if event == Event.FILLED or event == Event.CANCELLED or event == Event.REJECTED:
        oid = np.int64(order_id)
        for s in range(0, 8, 4):
            if slots[s + 3] == 1 and slots[s] == oid:
                slots[s + 3] = 0


@njit(cache=True)
def quote_reports(se, first, last, slots):
    """Apply the EVENT_DTYPE rows se[first:last] to ``slots`` in order. Returns nothing."""
    for k in range(first, last):
        quote_report(slots, se[k].order_id, se[k].event)


@njit(cache=True)
def fill_effect(side, price, qty, taker, terms):
    """Return (position change, cash change, fee) of one fill of ``qty`` lots at ``price`` on
    ``side`` (0 = the strategy bought, 1 = it sold); ``taker``: the strategy's order was the
    aggressor; ``terms``: [tick_value, maker_rate, taker_rate] (``Money.terms()``)."""
    notional = float(price) * float(qty) * terms[0]
    fee = notional * (terms[2] if taker else terms[1])
    if side == 0:
        return qty, -notional, fee
    return -qty, notional, fee


@njit(cache=True)
def account(sf, first, last, trader, pos, money, terms):
    """Apply the FILL_DTYPE rows sf[first:last] to ``pos[0]`` (position) and ``money`` ([cash,
    fees]) for each side ``trader`` is on, at ``terms`` (``fill_effect``). Returns nothing."""
    for k in range(first, last):
        f = sf[k]
        for side in range(2):
            if (f.buy_trader if side == 0 else f.sell_trader) == trader:
                dpos, dcash, fee = fill_effect(side, f.price, f.qty, f.aggressor_side == side,
                                               terms)
                pos[0] += dpos
                money[0] += dcash
                money[1] += fee
