"""Writing one output row: an order or symbol event, an L2 update.

The kernels write every event and L2 row through these two functions, so each field is set in
one place, and check room for them through ``output_fits``. ``cnt`` is the kernels' output counter ``[fills, l2, events]``; the caller has checked
that the row fits (see ``room._room``). An event's ``phase`` is the symbol's phase as the
symbol row says when the row is written, i.e. after the change the event reports.
"""

from __future__ import annotations

from numba import njit

from ._cache_guard import guard
from .book import M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2

guard(__name__, __file__, deps=("exsim.exchange.book",))


@njit(cache=True, _nrt=False, inline="always")
def output_fits(meta, cnt, fills, l2, events, need_fills, need_l2, need_events):
    """Return True if ``need_*`` more rows fit after ``cnt`` in each output; else record the
    totals needed in ``meta[M_NEED_*]`` (what the facade grows the outputs to) and return False."""
    if (cnt[0] + need_fills > len(fills) or cnt[1] + need_l2 > len(l2)
            or cnt[2] + need_events > len(events)):
        meta[M_NEED_FILLS] = cnt[0] + need_fills
        meta[M_NEED_L2] = cnt[1] + need_l2
        meta[M_NEED_EVENTS] = cnt[2] + need_events
        return False
    return True


@njit(cache=True, _nrt=False, inline="always")
def write_event(events, cnt, seq, ts, symbols, symbol, order_id, ev, reason, filled, leaves,
                price):
    """Append one EVENT_DTYPE row at ``cnt[2]`` (``price``: see schema.EVENT_DTYPE)."""
    e = events[cnt[2]]
    e.seq = seq
    e.ts = ts
    e.order_id = order_id
    e.filled_qty = filled
    e.leaves_qty = leaves
    e.symbol = symbol
    e.event = ev
    e.reason = reason
    e.price = price
    e.phase = symbols[symbol].phase if symbol < len(symbols) else 0
    cnt[2] += 1


@njit(cache=True, _nrt=False, inline="always")
def write_l2(l2, cnt, seq, ts, symbol, side, price, qty, count):
    """Append one L2_DTYPE row at ``cnt[1]``: the level's new totals."""
    u = l2[cnt[1]]
    u.seq = seq
    u.ts = ts
    u.price = price
    u.qty = qty
    u.symbol = symbol
    u.count = count
    u.side = side
    cnt[1] += 1
