"""The FOK / minimum-quantity walk: how much matching would fill now, counted without matching.

``fillable`` is the test behind FOK_CANNOT_FILL and MIN_QTY_CANNOT_FILL (docs/semantics.md,
"FOK and minimum quantity"). It reads the book and changes nothing. Its rule for icebergs and
self-trade prevention is matching's: without a self-trade in the way a level gives its
displayed and reserve quantity (each refill comes back to the same aggressor); under
CANCEL_RESTING the trader's own orders and their reserve are skipped; under CANCEL_INCOMING and
CANCEL_BOTH the walk stops at the trader's first own order, counting only the displayed
quantity of the orders before it at that level (their refills would queue behind it).
With a dynamic price band (``lo``, ``hi``) the walk stops at the first level outside it, as
matching does (a fill there would start a volatility interruption), so an FOK never breaches it.
This module depends on the book layout only, so the validation module and the kernels can
both import it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .schema import Side, Stp

guard(__name__, __file__, deps=("exsim.exchange.schema",))

_BUY = int(Side.BUY)


@njit(cache=True, _nrt=False, inline="always")
def fillable(books, levels, arena, ladder_levels, opp_b, side, is_market, limit, reach,
             trader, stp, lo, hi):
    """Return whether matching an order of ``side`` at ``limit`` (any price if ``is_market``)
    for ``trader`` now would fill at least ``reach``, walking the opposite book ``opp_b`` in
    priority order as matching would under ``stp``, over the levels priced in ``[lo, hi]`` (the
    dynamic band; see the module)."""
    bk = books[opp_b]
    acc = np.int64(0)
    for k in range(bk.off + bk.n - 1, bk.off - 1, -1):
        L = levels[ladder_levels[k]]
        if not is_market and (L.price > limit if side == _BUY else L.price < limit):
            break
        if L.price < lo or L.price > hi:
            break
        if stp == Stp.NONE:
            acc += L.qty + L.hidden
            if acc >= reach:
                return True
            continue
        # the orders of this level before the trader's first own order: their shown part counts
        # even where matching stops at that order; their reserve only if it does not
        shown = np.int64(0)
        reserve = np.int64(0)
        r = L.head
        while r >= 0:
            o = arena[r]
            if o.trader == trader:
                if stp != Stp.CANCEL_RESTING:
                    return acc + shown >= reach
            else:
                shown += o.leaves
                reserve += o.hidden
            r = o.next
        acc += shown + reserve
        if acc >= reach:
            return True
    return acc >= reach
