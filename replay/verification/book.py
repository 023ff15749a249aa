"""The verifier's own order book: slot arena, id hash, FIFO levels and sorted ladders.

Written from docs/semantics.md, sharing no code with ``exchange`` (only the idea of a ladder):

- orders live in rows of ``ost`` (int64 fields ``O_*``), their ids in ``oid``; free rows are
  chained through ``O_NEXT``. ``htab`` maps an id to its row: rows of (id, row + 1), 0 meaning
  empty, so key and row share a cache line (open addressing, linear probing, backward-shift
  deletion, so no tombstones).
- a level is a row of ``lst`` (``L_*``) holding a doubly linked FIFO of order rows; free level
  rows are chained through ``L_HEAD``.
- per side, ``ladder[side, :n]`` holds level keys in ascending order with the best at the end
  (bids keyed by price, asks by -price), ``ladlv`` the level row of each key. Sides 2 and 3 are
  the stop book: pending BUY stops keyed by -stop_price (the lowest trigger is released first),
  SELL stops by stop_price (the highest first), each stop level a FIFO of acceptance.
- icebergs: a resting order's ``O_LEAVES`` is its displayed part (what levels and L2 count); the
  reserve is ``ext[row, E_RESERVE]`` (only read when ``O_DISPLAY > 0``).
- ``touched`` remembers each level's totals before the current message first changed it, so the
  L2 check can tell which levels changed.

- ``prefetch`` (an LLVM prefetch intrinsic) and ``_prefetch_id``/``_prefetch_order`` let the
  kernel ask for an id's bucket, an order's row and its queue neighbours ahead of use.

Invariants: a resting order has ``O_LEVEL >= 0`` and sits in exactly one level list (every
other row, free or finished, has ``O_LEVEL == -1``); a level's
``L_QTY``/``L_COUNT`` are the sum of its orders' leaves and their number; an empty level leaves
its ladder at once. Limits: capacities are fixed per array set; ``grow_state`` quadruples the
order capacity or doubles the level capacity, whichever ran short.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# order slot fields: a row is 16 int64 (128 bytes, rows aligned to 128), so an order is exactly
# two cache lines; the fields a cancel or a fill reads first (links, level, side, price, leaves,
# filled, trader) share the first line, and a queue neighbour's link is one line
# (O_SIDE 2 and 3 are pending BUY and SELL stops, queued in the stop book: see below); a resting
# order's O_LEAVES is its displayed part, an iceberg's reserve is in ``ext``
(O_LEVEL, O_PREV, O_NEXT, O_SIDE, O_PRICE, O_LEAVES, O_FILLED, O_TRADER, O_FILLSUM, O_TOTAL,
 O_CANCELLED, O_FLAGS, O_MARKET, O_TIF, O_DISPLAY, O_EXPIRE) = range(16)
NOF = 16
# fields only icebergs and stops use (``ext``, one row per order row): the reserve not shown,
# a pending STOP_LIMIT's limit price, a pending stop's trigger, how many slices were refilled
E_RESERVE, E_LIMIT, E_STOP, E_REFILLS = range(4)
NEF = 4
# ``cfg``: the symbol's options (ownership is the engine's): ownership on, lot size, minimum
# order quantity, session close, whether the tick table is more than every integer, whether
# the symbol has no tick table, lot or minimum at all (no tick_lot check to make), tick rows,
# then the rows as (from_price, tick) pairs
C_OWNER, C_LOT, C_MINQ, C_CLOSE, C_GRID, C_PLAIN, C_NTICK, C_TICKS = range(8)
MAX_TICK_ROWS = 64
NCFG = C_TICKS + 2 * MAX_TICK_ROWS
_ROW_ALIGN = 128
# level slot fields
L_PRICE, L_QTY, L_COUNT, L_HEAD, L_TAIL = range(5)
NLF = 5
# meta fields
# (M_NB + side for side 0..3: bids, asks, BUY stops, SELL stops; M_LAST_PX the symbol's last
# trade price, M_TRADED whether it has traded; M_PREV_TS the ts of the latest message seen;
# M_EXP_SEQ/E/ID the last expiry checked (its seq, expiry and id) for the expiry order;
# M_TS_BACK set once a message's ts steps back: "expired late" is then not decidable)
(M_FREE_O, M_FREE_L, M_NB, M_NA, M_NSB, M_NSS, M_VN, M_LAST_TRADE, M_NT, M_FP, M_LP, M_EP, M_I,
 M_ORDERS, M_FILLS, M_FINISHED, M_LIVE_O, M_LIVE_L, M_LAST_SEQ, M_LAST_PX, M_TRADED, M_PREV_TS,
 M_PENDING, M_EXP_SEQ, M_EXP_E, M_EXP_ID, M_TS_BACK) = range(27)
NMETA = 27
# touched-level fields
T_SIDE, T_PRICE, T_QTY, T_COUNT, T_ROW = range(5)

_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)
_SHIFT = np.uint64(29)


def _aligned_zeros(shape: tuple, dtype, align: int) -> np.ndarray:
    """A zeroed C-contiguous array whose first byte sits on an ``align``-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    buf = np.zeros(nbytes + align, np.uint8)
    off = (-buf.ctypes.data) % align
    return buf[off:off + nbytes].view(dtype).reshape(shape)


def new_state(capacity: int, violations: int, n_rules: int, level_capacity: int = 256) -> tuple:
    """Fresh state arrays for the checker: up to ``capacity`` live orders, ``level_capacity``
    live price levels, ``violations`` stored violation rows and a counter per rule (all
    violations are counted). The two capacities grow separately (``grow_state``): a deep book
    has far more orders than levels."""
    cap = max(int(capacity), 16)
    lcap = max(int(level_capacity), 16)
    hcap = 16
    while hcap < 2 * cap:
        hcap *= 2
    ost = _aligned_zeros((cap, NOF), np.int64, _ROW_ALIGN)
    ost[:, O_NEXT] = np.arange(1, cap + 1)
    ost[-1, O_NEXT] = -1
    ost[:, O_LEVEL] = -1          # free and finished rows rest nowhere
    lst = np.zeros((lcap, NLF), np.int64)
    lst[:, L_HEAD] = np.arange(1, lcap + 1)
    lst[-1, L_HEAD] = -1
    oid = np.zeros(cap, np.uint64)
    # one 16-byte bucket per id: (key, row + 1), 0 = empty, so a probe reads one cache line
    htab = np.zeros((hcap, 2), np.uint64)
    ladder = np.zeros((4, lcap), np.int64)    # level keys (see the module docstring), ascending
    ladlv = np.zeros((4, lcap), np.int64)     # level slot of each ladder entry
    # a message touches at most every live level plus the one it may add
    touched = np.zeros((lcap + 4, 5), np.int64)
    ext = np.zeros((cap, NEF), np.int64)
    cfg = np.zeros(NCFG, np.int64)
    cfg[C_LOT] = cfg[C_MINQ] = cfg[C_NTICK] = cfg[C_PLAIN] = 1
    cfg[C_TICKS] = cfg[C_TICKS + 1] = 1        # the default table [(1, 1)]: every price
    meta = np.zeros(NMETA, np.int64)
    vrows = np.zeros((max(int(violations), 1), 7), np.int64)
    vids = np.zeros(max(int(violations), 1), np.uint64)
    counts = np.zeros(n_rules, np.int64)
    return ost, lst, oid, htab, ladder, ladlv, touched, ext, cfg, meta, vrows, vids, counts


def set_config(state: tuple, ownership: bool, tick_table, lot_size: int, min_order_qty: int,
               session_close: int) -> None:
    """Write a symbol's options into ``state``'s ``cfg`` (before its first message is checked).

    ``tick_table``: rows (from_price, tick), as docs/semantics.md "Symbols" states them (the
    caller validated them). Returns None."""
    cfg = state[8]
    rows = [(int(a), int(b)) for a, b in tick_table] or [(1, 1)]
    cfg[C_OWNER] = 1 if ownership else 0
    cfg[C_LOT], cfg[C_MINQ], cfg[C_CLOSE] = int(lot_size), int(min_order_qty), int(session_close)
    cfg[C_NTICK] = len(rows)
    for j, (a, b) in enumerate(rows):
        cfg[C_TICKS + 2 * j], cfg[C_TICKS + 2 * j + 1] = a, b
    cfg[C_GRID] = 0 if rows == [(1, 1)] else 1
    cfg[C_PLAIN] = 1 if cfg[C_GRID] == 0 and cfg[C_LOT] == 1 and cfg[C_MINQ] == 1 else 0



# ------------------------------------------------------------------ prefetch
@intrinsic
def prefetch(typingctx, arr, i, j):
    """Hint the CPU to load ``arr[i]`` (1-d) or ``arr[i, j]`` (2-d) into cache; never faults.

    Why: a deep book spreads live orders over tens of megabytes, so the id lookup and the order
    row of a cancel miss every cache level; the checker knows the messages and fills to come and
    asks for those lines several messages ahead, so the misses overlap with the current work.
    (The verifier's own copy: it shares no code with the engine's kernels.)
    """
    sig = types.void(arr, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [args[1]] if aryty.ndim == 1 else [args[1], args[2]]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(1), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


# ------------------------------------------------------------------ small helpers
@njit(cache=True, _nrt=False, inline="always")
def _home(htab, key):
    """The bucket where the probe for ``key`` starts."""
    x = key * _HASH_MUL
    return np.int64((x ^ (x >> _SHIFT)) & np.uint64(htab.shape[0] - 1))


@njit(cache=True, _nrt=False, inline="always")
def _prefetch_id(htab, key):
    """Stage 1 of a look-ahead: the id's home bucket (key and slot share one cache line)."""
    prefetch(htab, _home(htab, key), 0)


@njit(cache=True, _nrt=False, inline="always")
def _prefetch_order(ost, oid, htab, key, neighbours):
    """Stage 2 (3 with ``neighbours``): the order's row, then its queue neighbours' rows."""
    s = _slot_of(htab, key)
    if s < 0:
        return
    if not neighbours:
        # a row is two aligned cache lines (see NOF); ``oid`` is not needed: whoever finishes
        # an order passes its id
        prefetch(ost, s, 0)
        prefetch(ost, s, NOF // 2)
        return
    p, nx = ost[s, O_PREV], ost[s, O_NEXT]
    if ost[s, O_LEVEL] >= 0:
        if p >= 0:
            prefetch(ost, p, O_NEXT)
        if nx >= 0:
            prefetch(ost, nx, O_PREV)


@njit(cache=True, _nrt=False, inline="always")
def _slot_of(htab, key):
    """The row of order ``key``, or -1 when the id is not in the table."""
    i = _home(htab, key)
    m = htab.shape[0] - 1
    while True:
        v = htab[i, 1]
        if v == 0:
            return np.int64(-1)
        if htab[i, 0] == key:
            return np.int64(v) - 1
        i = (i + 1) & m


@njit(cache=True, _nrt=False)
def _hash_put(htab, key, val):
    i = _home(htab, key)
    m = htab.shape[0] - 1
    while htab[i, 1] != 0:
        i = (i + 1) & m
    htab[i, 0] = key
    htab[i, 1] = np.uint64(val + 1)


@njit(cache=True, _nrt=False)
def _hash_del(htab, key):
    m = htab.shape[0] - 1
    i = _home(htab, key)
    while True:
        if htab[i, 1] == 0:
            return
        if htab[i, 0] == key:
            break
        i = (i + 1) & m
    # backward-shift deletion keeps probe chains intact without tombstones
    j = i
    while True:
        j = (j + 1) & m
        if htab[j, 1] == 0:
            break
        k = _home(htab, htab[j, 0])
        if i <= j:
            stays = i < k <= j
        else:
            stays = k > i or k <= j
        if stays:
            continue
        htab[i, 0] = htab[j, 0]
        htab[i, 1] = htab[j, 1]
        i = j
    htab[i, 1] = 0


@njit(cache=True, _nrt=False, inline="always")
def _lad_pos(ladder, side, n, key):
    """First index in ladder[side, :n] whose key >= ``key``."""
    if n == 0 or ladder[side, n - 1] < key:
        return n
    # keys are distinct integers ascending to the best at n-1, so the entry `top - key` places
    # below the top holds a key <= ``key`` (equal in a dense book, where most orders land):
    # search only above it, without branches (mispredicted halvings cost more than the loads)
    lo = 0
    # why unsigned: top >= key, so top - key is in [0, 2^64) and exact as uint64, where int64
    # wraps negative for a key far below the top (a market order's ignored price INT64_MIN under
    # a bid at 2^40) and g would index far outside the ladder
    d = np.uint64(ladder[side, n - 1]) - np.uint64(key)
    if d < np.uint64(n):
        g = n - 1 - np.int64(d)
        if ladder[side, g] == key:
            return g
        lo = g + 1
    length = n - 1 - lo
    while length > 1:
        half = length >> 1
        lo = lo + half if ladder[side, lo + half - 1] < key else lo
        length -= half
    if length == 1 and ladder[side, lo] < key:
        lo += 1
    return lo


@njit(cache=True, _nrt=False, inline="always")
def _key(side, price):
    """A level's ladder key: ascending with the best (first to match or release) at the end."""
    return price if side == 0 or side == 3 else -price


@njit(cache=True, _nrt=False, inline="always")
def _find_level(ladder, ladlv, meta, side, price):
    n = meta[M_NB + side]
    key = _key(side, price)
    p = _lad_pos(ladder, side, n, key)
    if p < n and ladder[side, p] == key:
        return ladlv[side, p]
    return -1


@njit(cache=True, _nrt=False)
def _add_level(lst, ladder, ladlv, meta, side, price):
    """Slot of a new empty level at ``price`` (caller checked it is absent); -1 when full."""
    n = meta[M_NB + side]
    lv = meta[M_FREE_L]
    if lv < 0 or n >= ladder.shape[1]:
        return -1
    meta[M_FREE_L] = lst[lv, L_HEAD]
    meta[M_LIVE_L] += 1
    lst[lv, L_PRICE] = price
    lst[lv, L_QTY] = 0
    lst[lv, L_COUNT] = 0
    lst[lv, L_HEAD] = -1
    lst[lv, L_TAIL] = -1
    key = _key(side, price)
    p = _lad_pos(ladder, side, n, key)
    for j in range(n, p, -1):
        ladder[side, j] = ladder[side, j - 1]
        ladlv[side, j] = ladlv[side, j - 1]
    ladder[side, p] = key
    ladlv[side, p] = lv
    meta[M_NB + side] = n + 1
    return lv


@njit(cache=True, _nrt=False)
def _drop_level(lst, ladder, ladlv, meta, side, lv):
    n = meta[M_NB + side]
    price = lst[lv, L_PRICE]
    key = _key(side, price)
    p = _lad_pos(ladder, side, n, key)
    for j in range(p, n - 1):
        ladder[side, j] = ladder[side, j + 1]
        ladlv[side, j] = ladlv[side, j + 1]
    meta[M_NB + side] = n - 1
    lst[lv, L_HEAD] = meta[M_FREE_L]
    meta[M_FREE_L] = lv
    meta[M_LIVE_L] -= 1


@njit(cache=True, _nrt=False, inline="always")
def _best_level(ladlv, meta, side):
    n = meta[M_NB + side]
    return ladlv[side, n - 1] if n > 0 else -1


@njit(cache=True, _nrt=False, inline="always")
def _touch(touched, lst, ladder, ladlv, meta, side, price):
    """Remember a level's totals before this message first changes it."""
    nt = meta[M_NT]
    for t in range(nt):
        if touched[t, T_SIDE] == side and touched[t, T_PRICE] == price:
            return
    if nt >= touched.shape[0]:
        return
    lv = _find_level(ladder, ladlv, meta, side, price)
    touched[nt, T_SIDE] = side
    touched[nt, T_PRICE] = price
    touched[nt, T_QTY] = lst[lv, L_QTY] if lv >= 0 else 0
    touched[nt, T_COUNT] = lst[lv, L_COUNT] if lv >= 0 else 0
    touched[nt, T_ROW] = 0
    meta[M_NT] = nt + 1


@njit(cache=True, _nrt=False, inline="always")
def _detach(ost, lst, ladder, ladlv, meta, s):
    """Take resting order ``s`` out of its level (dropping the level when it empties)."""
    lv = ost[s, O_LEVEL]
    if lv < 0:
        return
    p, nx = ost[s, O_PREV], ost[s, O_NEXT]
    if p >= 0:
        ost[p, O_NEXT] = nx
    else:
        lst[lv, L_HEAD] = nx
    if nx >= 0:
        ost[nx, O_PREV] = p
    else:
        lst[lv, L_TAIL] = p
    lst[lv, L_QTY] -= ost[s, O_LEAVES]
    lst[lv, L_COUNT] -= 1
    ost[s, O_LEVEL] = -1
    if lst[lv, L_COUNT] == 0:
        _drop_level(lst, ladder, ladlv, meta, ost[s, O_SIDE], lv)


@njit(cache=True, _nrt=False, inline="always")
def _append(ost, lst, ladder, ladlv, meta, s):
    """Queue order ``s`` at the back of its price level; False when no level slot is free."""
    side, price = ost[s, O_SIDE], ost[s, O_PRICE]
    lv = _find_level(ladder, ladlv, meta, side, price)
    if lv < 0:
        lv = _add_level(lst, ladder, ladlv, meta, side, price)
        if lv < 0:
            return False
    t = lst[lv, L_TAIL]
    ost[s, O_PREV] = t
    ost[s, O_NEXT] = -1
    if t >= 0:
        ost[t, O_NEXT] = s
    else:
        lst[lv, L_HEAD] = s
    lst[lv, L_TAIL] = s
    lst[lv, L_QTY] += ost[s, O_LEAVES]
    lst[lv, L_COUNT] += 1
    ost[s, O_LEVEL] = lv
    return True


@njit(cache=True, _nrt=False, inline="always")
def _set_leaves(ost, lst, s, leaves):
    """Set a resting order's open quantity, keeping its level total in step."""
    lv = ost[s, O_LEVEL]
    if lv >= 0:
        lst[lv, L_QTY] += leaves - ost[s, O_LEAVES]
    ost[s, O_LEAVES] = leaves


@njit(cache=True, _nrt=False)
def rehash(old, new):
    """Insert every entry of one id table into a larger, empty one."""
    for i in range(old.shape[0]):
        if old[i, 1] != 0:
            _hash_put(new, old[i, 0], np.int64(old[i, 1]) - 1)


# why four times: each growth writes every row of the new order arrays (their free list) and
# copies and rehashes every live order; a deep book (~200 k live orders from the first 16 k)
# then takes two growths instead of four (the engine's order arena grows the same way)
_ORDER_GROWTH = 4


def grow_state(state: tuple) -> tuple:
    """Return the state arrays with ``_ORDER_GROWTH`` times the order capacity, or twice the
    level capacity, or both (whichever is short of room for one more message: see
    ``check_symbol``), contents kept."""
    ost, lst, oid, htab, ladder, ladlv, touched, ext, cfg, meta, vrows, vids, counts = state
    cap, lcap = ost.shape[0], lst.shape[0]
    more_o = meta[M_LIVE_O] + 2 > cap or meta[M_FREE_O] < 0
    more_l = meta[M_LIVE_L] + meta[M_PENDING] + 2 > lcap or meta[M_FREE_L] < 0
    if not (more_o or more_l):   # never expected; growing both guarantees progress
        more_o = more_l = True
    if more_o:
        big = new_state(_ORDER_GROWTH * cap, 1, 1, 16)
        nost, noid, nhtab, next_ = big[0], big[2], big[3], big[7]
        nost[:cap], noid[:cap], next_[:cap] = ost, oid, ext
        # the new rows from cap on are chained by new_state; prepend them to the old free list
        nost[-1, O_NEXT] = meta[M_FREE_O]
        meta[M_FREE_O] = cap
        rehash(htab, nhtab)
        ost, oid, htab, ext = nost, noid, nhtab, next_
    if more_l:
        big = new_state(16, 1, 1, 2 * lcap)
        nlst, nladder, nladlv, touched = big[1], big[4], big[5], big[6]
        nlst[:lcap] = lst
        nladder[:, :lcap], nladlv[:, :lcap] = ladder, ladlv
        nlst[2 * lcap - 1, L_HEAD] = meta[M_FREE_L]
        meta[M_FREE_L] = lcap
        lst, ladder, ladlv = nlst, nladder, nladlv
    return ost, lst, oid, htab, ladder, ladlv, touched, ext, cfg, meta, vrows, vids, counts
