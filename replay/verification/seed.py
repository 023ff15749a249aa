"""The verifier's state at a checkpoint (a guess to check a later seq range from) and the canonical
form that tells whether two states would check the rest of a run alike.

``replay.verification.split`` checks the ranges between a run's checkpoints on several threads. A
range's starting state is a *seed*: the verifier's book built from the engine's checkpoint rows
(``seed_book``) and a few scalars read from the stored tables just before the range. The seed is
never trusted: the range's findings are kept only when the canonical form of the state the
previous range really ended in equals the seed's (``canonical``); otherwise the range is checked
again from that state. So the engine's checkpoint only decides how much runs in parallel, never
what is found.

Canonical form: what the checks of any later message read, independent of where rows sit in the
arrays (slots, free lists, hash buckets): every live order in book order (sides 0..3, ladder
order, FIFO within a level) with its fields (an iceberg's reserve and whether it was ever
refilled, a pending stop's trigger and limit; the ``ext`` fields an order's kind never reads
count as 0), every level's price, total and count, and the scalars ``CANON_META`` names. The
last expiry checked (``M_EXP_*``) is left out: it is read only at its own seq, and every later
range starts past it. Counters that only tally (``M_ORDERS``, ``M_FILLS``, ``M_FINISHED``,
``M_VN``) are left out too.

Seed fields, from a checkpoint row (``CHECKPOINT_DTYPE``): open quantity shown ``qty`` plus reserve
``hidden``; filled so far both as reported and as summed from fills (``O_FILLED``,
``O_FILLSUM``), total ``filled + qty + hidden``, nothing cancelled; an iceberg counts as refilled
once its filled quantity reaches one slice. Where the engine's state and the verifier's differ
(a planted defect the verifier re-synchronised to, a field the guess gets wrong), the canonical
forms differ and the range is re-checked: correctness never depends on the guess.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.schema import OrderType

from exsim.replay.verification.book import (
    E_LIMIT, E_REFILLS, E_RESERVE, E_STOP, L_COUNT, L_HEAD, L_PRICE, L_QTY, M_FREE_O,
    M_LAST_PX, M_LAST_SEQ, M_LAST_TRADE, M_LIVE_L, M_LIVE_O, M_NB, M_PENDING, M_PREV_TS,
    M_TRADED, M_TS_BACK, O_CANCELLED, O_DISPLAY, O_EXPIRE, O_FILLED, O_FILLSUM, O_FLAGS,
    O_LEAVES, O_MARKET, O_NEXT, O_PRICE, O_SIDE, O_TIF, O_TOTAL, O_TRADER, _append,
    _hash_put, _slot_of,
)

guard(__name__, __file__, deps=("exsim.replay.verification.book", "exsim.exchange.schema"))

__all__ = ["seed_book", "canonical", "CANON_META", "SEED_OK", "SEED_BAD", "SEED_FULL"]

SEED_OK, SEED_BAD, SEED_FULL = 0, 1, 2
# the scalars of ``meta`` a later message's checks read (see the module docstring)
CANON_META = np.array([M_LAST_TRADE, M_LAST_PX, M_TRADED, M_PREV_TS, M_TS_BACK, M_LAST_SEQ,
                       M_PENDING, M_LIVE_O, M_LIVE_L, M_NB, M_NB + 1, M_NB + 2, M_NB + 3],
                      np.int64)
_STOP, _STOP_LIMIT, _LIMIT = int(OrderType.STOP), int(OrderType.STOP_LIMIT), int(OrderType.LIMIT)
NCANON = 19   # int64 fields per order in the canonical form (see ``canonical``)


@njit(cache=True, _nrt=False, nogil=True)
def seed_book(rows, ost, lst, oid, htab, ladder, ladlv, ext, meta):
    """Queue checkpoint ``rows`` (one symbol's, in the checkpoint's priority order) into an empty
    state. Returns SEED_OK, SEED_FULL when the arrays are too small, SEED_BAD when the rows
    cannot be a book (a repeated id, a side outside 0..1, no quantity): then no seed."""
    for j in range(rows.size):
        r = rows[j]
        if _slot_of(htab, r.order_id) >= 0 or r.side > 1 or r.qty <= 0 or r.qty + r.hidden <= 0:
            return SEED_BAD
        x = meta[M_FREE_O]
        if x < 0:
            return SEED_FULL
        meta[M_FREE_O] = ost[x, O_NEXT]
        meta[M_LIVE_O] += 1
        oid[x] = r.order_id
        _hash_put(htab, r.order_id, x)
        ot = np.int64(r.order_type)
        qty, hidden, filled = np.int64(r.qty), np.int64(r.hidden), np.int64(r.filled)
        ost[x, O_FILLED] = filled
        ost[x, O_FILLSUM] = filled
        ost[x, O_TOTAL] = filled + qty + hidden
        ost[x, O_CANCELLED] = 0
        ost[x, O_TRADER] = np.int64(r.trader)
        ost[x, O_FLAGS] = np.int64(r.flags)
        ost[x, O_TIF] = np.int64(r.tif)
        ost[x, O_EXPIRE] = np.int64(r.expire_ts)
        ost[x, O_LEAVES] = qty
        if r.pending != 0:
            if ot != _STOP and ot != _STOP_LIMIT:
                return SEED_BAD
            ost[x, O_SIDE] = 2 + np.int64(r.side)
            ost[x, O_MARKET] = 1 if ot == _STOP else 0
            ost[x, O_PRICE] = np.int64(r.stop_price)
            ost[x, O_DISPLAY] = 0
            ext[x, E_STOP] = np.int64(r.stop_price)
            ext[x, E_LIMIT] = np.int64(r.price) if ot == _STOP_LIMIT else 0
            meta[M_PENDING] += 1
        else:
            ost[x, O_SIDE] = np.int64(r.side)
            ost[x, O_MARKET] = 0
            ost[x, O_PRICE] = np.int64(r.price)
            d = np.int64(r.display_qty) if ot == _LIMIT else 0
            ost[x, O_DISPLAY] = d
            if d > 0:
                ext[x, E_RESERVE] = hidden
                ext[x, E_REFILLS] = 1 if filled >= d else 0
            elif hidden != 0:
                return SEED_BAD
        if not _append(ost, lst, ladder, ladlv, meta, x):
            return SEED_FULL
    return SEED_OK


@njit(cache=True, _nrt=False, nogil=True)
def canonical(ost, lst, oid, ladder, ladlv, ext, meta, orders, levels, scalars):
    """Write the canonical form of a state into ``orders`` (``M_LIVE_O`` rows of NCANON),
    ``levels`` (``M_LIVE_L`` rows of side, price, total, count) and ``scalars`` (CANON_META's
    values). Returns the number of orders written (< M_LIVE_O only for a state whose live rows
    are not all queued, which ``replay.verification.book`` rules out)."""
    n = 0
    nl = 0
    for side in range(4):
        for p in range(meta[M_NB + side] - 1, -1, -1):
            lv = ladlv[side, p]
            if nl < levels.shape[0]:
                levels[nl, 0] = side
                levels[nl, 1] = lst[lv, L_PRICE]
                levels[nl, 2] = lst[lv, L_QTY]
                levels[nl, 3] = lst[lv, L_COUNT]
            nl += 1
            s = lst[lv, L_HEAD]
            while s >= 0 and n < orders.shape[0]:
                orders[n, 0] = np.int64(oid[s])
                orders[n, 1] = ost[s, O_SIDE]
                orders[n, 2] = ost[s, O_PRICE]
                orders[n, 3] = ost[s, O_LEAVES]
                orders[n, 4] = ost[s, O_FILLED]
                orders[n, 5] = ost[s, O_TRADER]
                orders[n, 6] = ost[s, O_FILLSUM]
                orders[n, 7] = ost[s, O_TOTAL]
                orders[n, 8] = ost[s, O_CANCELLED]
                orders[n, 9] = ost[s, O_FLAGS]
                orders[n, 10] = ost[s, O_MARKET]
                orders[n, 11] = ost[s, O_TIF]
                orders[n, 12] = ost[s, O_DISPLAY]
                orders[n, 13] = ost[s, O_EXPIRE]
                ice = ost[s, O_DISPLAY] > 0
                stop = ost[s, O_SIDE] >= 2
                orders[n, 14] = ext[s, E_RESERVE] if ice else 0
                orders[n, 15] = (1 if ext[s, E_REFILLS] > 0 else 0) if ice else 0
                orders[n, 16] = ext[s, E_STOP] if stop else 0
                orders[n, 17] = ext[s, E_LIMIT] if stop else 0
                orders[n, 18] = p   # the level's place in its ladder: which orders share a level
                n += 1
                s = ost[s, O_NEXT]
    for j in range(CANON_META.size):
        scalars[j] = meta[CANON_META[j]]
    return n


def canonical_form(state: tuple) -> tuple:
    """The canonical form of a verifier state (see the module docstring) as three arrays."""
    ost, lst, oid, _htab, ladder, ladlv, _t, ext, _cfg, meta = state[:10]
    orders = np.zeros((int(meta[M_LIVE_O]), NCANON), np.int64)
    levels = np.zeros((int(meta[M_LIVE_L]), 4), np.int64)
    scalars = np.zeros(CANON_META.size, np.int64)
    n = canonical(ost, lst, oid, ladder, ladlv, ext, meta, orders, levels, scalars)
    if n != orders.shape[0]:     # never expected: such a state is compared as unequal to all
        scalars = np.full(CANON_META.size, -1, np.int64)
    return orders, levels, scalars


def same_form(a: tuple, b: tuple) -> bool:
    """Whether two canonical forms are equal, array by array."""
    return all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
