"""Book state as arrays, and the njit primitives that change it.

State (owned by ``Engine``, passed to kernels as arrays):
- ``arena`` (ARENA_DTYPE): one row per order slot. Live orders of a level form a doubly linked
  FIFO through ``prev``/``next``; free slots form a stack through ``next`` (head in ``meta``).
  The row holds what matching touches (64 bytes); an order's cold fields (iceberg slice size,
  stop trigger, expiry, heap position, order type, tif) live in ``arena_ext`` (ARENA_EXT_DTYPE)
  at the same slot index, and the row's ``marks`` bits (MARK_*) say which of them apply, so a
  plain limit order never touches its ext row. ``flags`` stays the order's own Flag bits.
- ``levels`` (LEVEL_DTYPE): one row per occupied price level: price, total open quantity, order
  count, FIFO head and tail. Free rows form a stack through ``head``.
- ``books`` (BOOK_DTYPE): one row per (symbol, side), index ``symbol * 2 + side``. Each owns a
  region ``[off, off + cap)`` of the ladder arrays ``ladder_key``/``ladder_level``, of which the
  first ``n`` entries are its occupied levels sorted by key ascending, best last.
  The key is the price for bids and ``-price`` for asks, so "better" is "larger key" on both sides
  and the best level is always the last entry: removing it is O(1), inserting near the top moves
  only the few better levels.
  A book row also keeps ``slices``, the refills its icebergs can still make (the sum of
  ``reserve_slices`` over its orders), and a stop book row ``stop_qty``, the sum of its levels'
  ``qty`` (every pending stop's quantity).
- ``meta`` (int64): counters and free-list heads, indexed by the ``M_*`` constants.
- ``symbols`` (SYMBOL_DTYPE): one row per symbol: lot size, minimum order quantity, session
  close, last trade price, its region ``[tick_off, tick_off + tick_n)`` of ``ticks``, and its
  trading phase state (phase, pending auction, reference price, bands, re-opening end, the last
  published indicative uncross).
- ``ticks`` (TICK_DTYPE): every symbol's tick table rows, ``from_price`` ascending per symbol.
- ``stops`` (BOOK_DTYPE): the pending-stop books, one row per (symbol, side) at
  ``symbol * 2 + side``, laid out like ``books`` (ladder regions in the same ladder arrays,
  levels in the same level table, FIFO through the arena). A trigger price's key is the key of
  the opposite book side (``ladder_key(1 - side, stop_price)``): BUY stops are released lowest
  trigger first, like asks, SELL stops highest first, like bids; so the next stop to release is
  always the last ladder entry.
- ``expiry`` (EXPIRY_DTYPE): a binary min-heap of the live orders that expire, ordered by
  ``(expire_ts, symbol, order_id)``, ``meta[M_EXPIRY_N]`` entries; each such order's arena
  ``arena_ext`` ``xpos`` is its heap position, so removing it is O(log n).

Invariants after every message: a level's ``qty`` is the sum of its orders' ``leaves`` and
``count`` their number; no level is empty; a book's ``live`` is its order count; every live order
is in the order index exactly once; a book's ``slices`` is the sum of its orders'
``reserve_slices`` and a stop book's ``stop_qty`` its levels' quantity. Memory grows with live orders and occupied levels only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ARENA_DTYPE = np.dtype(
    [
        ("order_id", "<u8"),
        ("price", "<i8"),
        ("leaves", "<i8"),
        ("filled", "<i8"),
        ("hidden", "<i8"),      # iceberg reserve (not in the level's qty)
        ("symbol", "<u4"),
        ("trader", "<u4"),
        ("prev", "<i4"),
        ("next", "<i4"),
        ("level", "<i4"),
        ("side", "u1"),
        ("flags", "u1"),        # the order's Flag bits, as reported
        ("marks", "u1"),        # MARK_* bits: which cold fields of arena_ext apply
    ],
    align=True,
)

# the cold fields of an order slot, at the same index in ``arena_ext``: read only where the
# slot's ``marks`` say they apply (the ext row of a slot without marks is stale)
ARENA_EXT_DTYPE = np.dtype(
    [
        ("display", "<i8"),     # iceberg slice size
        ("stop_price", "<i8"),  # a pending stop's trigger
        ("expire_ts", "<i8"),   # expiry
        ("xpos", "<i4"),        # position in the expiry heap (-1: not in it)
        ("order_type", "u1"),
        ("tif", "u1"),
    ],
    align=True,
)

# marks bits; the slot's ext row is written whole whenever any is set. Without marks the ext
# fields read as display 0, stop_price 0, expire_ts 0, xpos -1, order_type LIMIT, tif GTC: a
# plain resting limit order, the only kind the hot path then has to know
MARK_ICEBERG = 1    # display > 0
MARK_EXPIRING = 2   # expire_ts > 0: in the expiry heap while live
MARK_PENDING = 4    # a pending stop: in a stop book, not in the order book
MARK_EXT = 8        # some other ext field differs from a plain limit order's (tif, type, stop)

LEVEL_DTYPE = np.dtype(
    [("price", "<i8"), ("qty", "<i8"), ("head", "<i4"), ("tail", "<i4"), ("count", "<i4"),
     ("hidden", "<i8")],   # hidden: the reserve of the level's icebergs (qty is displayed only)
    align=True,
)

SYMBOL_DTYPE = np.dtype(
    [("lot_size", "<i8"), ("min_order_qty", "<i8"), ("session_close", "<i8"),
     ("last_price", "<i8"),   # last trade price (0: no trade yet)
     ("tick_off", "<i8"), ("tick_n", "<i8"),
     # trading phases (docs/semantics.md, Trading phases); all 0 = continuous, no bands
     ("reference_price", "<i8"),   # static band centre and uncross tie-break (0: none)
     ("static_band_bps", "<i8"),   # half-width of the static band, bps of the reference (0: none)
     ("dynamic_band_bps", "<i8"),  # half-width of the dynamic band, bps of the last price (0: none)
     ("interruption_ns", "<i8"),   # length of the re-opening auction a band breach starts
     ("auction_end", "<i8"),       # when the current re-opening auction uncrosses (0: no end)
     ("ind_price", "<i8"), ("ind_qty", "<i8"), ("ind_surplus", "<i8"),  # last INDICATIVE
     ("phase", "<i8"),             # Phase
     ("auction", "<i8")],          # the auction a pending uncross will be (Phase code; 0: none)
    align=True,
)

TICK_DTYPE = np.dtype([("from_price", "<i8"), ("tick", "<i8")], align=True)

EXPIRY_DTYPE = np.dtype(
    [("expire_ts", "<i8"), ("order_id", "<u8"), ("symbol", "<u4"), ("slot", "<i4")],
    align=True,
)

BOOK_DTYPE = np.dtype(
    [("off", "<i8"), ("n", "<i8"), ("cap", "<i8"), ("live", "<i8"),
     ("min_price", "<i8"), ("max_price", "<i8"),
     # running totals, so the stop-cascade bound (``room._cascade_need``) is O(1) instead
     # of a walk over every level: the refills the book's icebergs can still make, the sum of
     # ``reserve_slices`` over its orders (order books; always 0 in a stop book), and the
     # pending stops' quantity (stop books; always 0 in an order book)
     ("slices", "<i8"), ("stop_qty", "<i8")],
    align=True,
)

# meta slots
M_SEQ = 0            # last seq processed
M_TRADE_ID = 1       # last trade id issued
M_FREE_ORDER = 2     # head of the free arena-slot stack (-1: none)
M_ORDER_HW = 3       # arena rows ever used (slots >= this are fresh)
M_FREE_LEVEL = 4
M_LEVEL_HW = 5
M_INDEX_COUNT = 6    # live keys in the order index
M_STP = 7            # Stp mode
M_NSYM = 8           # symbols added
M_NEED_BOOK = 9      # whose ladder ran out of room (NEED_LADDER): b of books, -1 - b of stops
M_NEED_FILLS = 10    # output rows a message may need (status NEED_OUTPUT)
M_NEED_L2 = 11
M_NEED_EVENTS = 12
M_OWNERSHIP = 13     # 1: cancel/modify only by the order's trader
M_EXPIRY_N = 14      # entries in the expiry heap
M_STOPS_LIVE = 15    # pending stops over all symbols
M_NEXT_END = 16      # earliest re-opening auction end over all symbols (0: none), so the check
                     # before each message is one compare
M_BAND_LO = 17       # the dynamic band of the message being processed: fill prices allowed
M_BAND_HI = 18       # are [lo, hi] (kernels set both before matching; no band: [0, MAX_PRICE])
META_SIZE = 19


@njit(cache=True, _nrt=False, inline="always")
def reserve_slices(hidden, display):
    """Return how many refills an iceberg with reserve ``hidden`` and slice size ``display``
    can still make: ``ceil(hidden / display)``, 0 without reserve (``display`` then unread)."""
    if hidden == 0:
        return np.int64(0)
    return (np.int64(hidden) + display - 1) // display


@njit(cache=True, _nrt=False, inline="always")
def cold_fields(arena, arena_ext, r):
    """Return slot ``r``'s (display, stop_price, expire_ts, order_type, tif, pending): its ext
    row where its marks say it applies, else a plain resting limit order's values."""
    marks = arena[r].marks
    if marks == 0:
        return np.int64(0), np.int64(0), np.int64(0), np.uint8(0), np.uint8(0), np.uint8(0)
    x = arena_ext[r]
    return (x.display, x.stop_price, x.expire_ts, x.order_type, x.tif,
            np.uint8(1 if marks & MARK_PENDING else 0))


@njit(cache=True, _nrt=False, inline="always")
def set_cold(arena, arena_ext, r, display, stop_price, expire_ts, order_type, tif, pending):
    """Set slot ``r``'s marks from its cold fields and, if any applies, write its ext row
    (``xpos`` -1: the caller pushes an expiring order on the heap afterwards)."""
    marks = ((MARK_ICEBERG if display != 0 else 0) | (MARK_EXPIRING if expire_ts != 0 else 0)
             | (MARK_PENDING if pending != 0 else 0)
             | (MARK_EXT if (stop_price | order_type | tif) != 0 else 0))
    arena[r].marks = marks
    if marks != 0:
        x = arena_ext[r]
        x.display = display
        x.stop_price = stop_price
        x.expire_ts = expire_ts
        x.xpos = -1
        x.order_type = order_type
        x.tif = tif


def new_meta(stp: int, ownership: bool = True) -> np.ndarray:
    """Return a fresh meta array for an empty engine with self-trade mode ``stp``."""
    meta = np.zeros(META_SIZE, dtype=np.int64)
    meta[M_FREE_ORDER] = -1
    meta[M_FREE_LEVEL] = -1
    meta[M_STP] = stp
    meta[M_OWNERSHIP] = 1 if ownership else 0
    return meta


@njit(cache=True, _nrt=False, inline="always")
def ladder_key(side, price):
    """Sort key of a price on a side: larger is better on both sides."""
    return price if side == 0 else -price


@njit(cache=True, _nrt=False, inline="always")
def ladder_search(ladder_keys, off, n, key):
    """Return the first position in the book's ladder whose key is >= ``key`` (n if none)."""
    if n == 0:
        return 0
    top = ladder_keys[off + n - 1]
    if top < key:
        return n
    # keys are distinct integers, so the entry d = top - key places below the top holds a key
    # <= ``key``: equal when every tick in between is occupied (a dense book, where most orders
    # land), and otherwise the answer lies above it. Either way the search starts near the top.
    lo = 0
    d = top - key
    if d < n:
        g = n - 1 - d
        if ladder_keys[off + g] == key:
            return g
        lo = g + 1
    # branch-free lower bound on [lo, n - 1] (the top is >= key): a mispredicted branch per
    # step cost more than the whole search
    base = lo
    length = n - 1 - lo
    while length > 1:
        half = length >> 1
        base = base + half if ladder_keys[off + base + half - 1] < key else base
        length -= half
    if length == 1 and ladder_keys[off + base] < key:
        base += 1
    return base


@njit(cache=True, _nrt=False, inline="always")
def alloc_order(arena, meta):
    """Pop a free arena slot (the caller has checked that one exists) and return its index."""
    r = meta[M_FREE_ORDER]
    if r >= 0:
        meta[M_FREE_ORDER] = arena[r].next
        return r
    r = meta[M_ORDER_HW]
    meta[M_ORDER_HW] = r + 1
    return r


@njit(cache=True, _nrt=False, inline="always")
def alloc_level(levels, meta):
    """Pop a free level row (the caller has checked that one exists) and return its index."""
    lv = meta[M_FREE_LEVEL]
    if lv >= 0:
        meta[M_FREE_LEVEL] = levels[lv].head
        return lv
    lv = meta[M_LEVEL_HW]
    meta[M_LEVEL_HW] = lv + 1
    return lv


@njit(cache=True, _nrt=False, inline="always")
def find_or_add_level(books, levels, ladder_keys, ladder_levels, meta, b, side, price):
    """Return the level row for ``price`` in book ``b``, creating it (empty) if needed.

    The caller has checked that the book's ladder and the level table have room for one more.
    """
    bk = books[b]
    key = ladder_key(side, price)
    pos = ladder_search(ladder_keys, bk.off, bk.n, key)
    if pos < bk.n and ladder_keys[bk.off + pos] == key:
        return ladder_levels[bk.off + pos]
    lv = alloc_level(levels, meta)
    L = levels[lv]
    L.price = price
    L.qty = 0
    L.head = -1
    L.tail = -1
    L.count = 0
    L.hidden = 0
    # shift the better levels up by one to open the slot
    for k in range(bk.off + bk.n, bk.off + pos, -1):
        ladder_keys[k] = ladder_keys[k - 1]
        ladder_levels[k] = ladder_levels[k - 1]
    ladder_keys[bk.off + pos] = key
    ladder_levels[bk.off + pos] = lv
    bk.n += 1
    return lv


@njit(cache=True, _nrt=False, inline="always")
def remove_level(books, levels, ladder_keys, ladder_levels, meta, b, side, lv):
    """Take the (now empty) level ``lv`` out of book ``b`` and free its row."""
    bk = books[b]
    end = bk.off + bk.n - 1
    if ladder_levels[end] == lv:
        pos = bk.n - 1
    else:
        pos = ladder_search(ladder_keys, bk.off, bk.n, ladder_key(side, levels[lv].price))
    for k in range(bk.off + pos, end):
        ladder_keys[k] = ladder_keys[k + 1]
        ladder_levels[k] = ladder_levels[k + 1]
    bk.n -= 1
    levels[lv].head = meta[M_FREE_LEVEL]
    meta[M_FREE_LEVEL] = lv


@njit(cache=True, _nrt=False, inline="always")
def append_to_level(arena, levels, r, lv):
    """Put order ``r`` at the back of level ``lv``'s queue and add its leaves to the total."""
    L = levels[lv]
    o = arena[r]
    o.level = lv
    o.next = -1
    o.prev = L.tail
    if L.tail >= 0:
        arena[L.tail].next = r
    else:
        L.head = r
    L.tail = r
    L.qty += o.leaves
    L.count += 1


@njit(cache=True, _nrt=False, inline="always")
def detach_from_level(arena, levels, r):
    """Take order ``r`` out of its level's queue and subtract its leaves from the total."""
    o = arena[r]
    L = levels[o.level]
    if o.prev >= 0:
        arena[o.prev].next = o.next
    else:
        L.head = o.next
    if o.next >= 0:
        arena[o.next].prev = o.prev
    else:
        L.tail = o.prev
    L.qty -= o.leaves
    L.count -= 1


@njit(cache=True, _nrt=False, inline="always")
def free_order(arena, meta, r):
    """Push arena slot ``r`` on the free stack."""
    arena[r].next = meta[M_FREE_ORDER]
    meta[M_FREE_ORDER] = r
