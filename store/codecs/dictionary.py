"""DICT: a column as its sorted distinct values and, per row, the index of its value among them.

The block holds the dictionary size (u32), the sorted distinct keys as a bit-packed stream, then
each row's index as another stream (store.codecs.stream). ``_dict_index`` builds the dictionary
and the indexes (a direct table for a narrow key range, else a sorted sample plus the values it
missed); ``_dec_dict`` decodes the dictionary and looks each row up.

Invariants: the dictionary is sorted and its values distinct, so index i names exactly one
value. A block read back is hostile: ``_dec_dict`` checks each index against the dictionary size
before the lookup and returns False at the first one out of range (no entry past the dictionary
is read). Kernels are ``@njit(cache=True, nogil=True)``; ``_dec_dict`` calls ``stream`` code,
hence the cache guard.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.store.codecs.stream import _BLOCK, _dec_for, _stream_words, _unpack_block

__all__: list[str] = []

guard(__name__, __file__, deps=("exsim.store.codecs.stream",))


@njit(cache=True, nogil=True)
def _dict_index(u, idx):
    """The sorted distinct values of u; idx[i] = the position of u[i] among them."""
    if u.size:
        mn, mx = u[0], u[0]
        for i in range(u.size):
            if u[i] < mn:
                mn = u[i]
            if u[i] > mx:
                mx = u[i]
        if mx - mn < np.uint64(min(1 << 20, 4 * u.size + 4096)):
            # why: a narrow key range indexes a table directly: O(n), no sort, no binary search
            # (a table much larger than the column would cost more to clear than to sort)
            slot = np.zeros(np.int64(mx - mn) + 1, np.int64)
            for i in range(u.size):
                slot[np.int64(u[i] - mn)] = 1
            d = 0
            for k in range(slot.size):
                if slot[k]:
                    slot[k] = d
                    d += 1
                else:
                    slot[k] = -1
            uniq = np.empty(d, np.uint64)
            for k in range(slot.size):
                if slot[k] >= 0:
                    uniq[slot[k]] = mn + np.uint64(k)
            for i in range(u.size):
                idx[i] = np.uint64(slot[np.int64(u[i] - mn)])
            return uniq
    return _dict_index_sorted(u, idx)


@njit(cache=True, nogil=True)
def _dict_index_sorted(u, out):
    # why: sorting the whole column is slow; a low-cardinality column shows most of its values
    # in a sample, so look rows up in the sample's sorted values and add the few it missed
    step = max(1, u.size // 4096)
    uniq = np.unique(u[::step])
    idx = np.searchsorted(uniq, u)
    miss = np.zeros(u.size, np.bool_)
    n_miss = 0
    for i in range(u.size):
        if idx[i] >= uniq.size or uniq[idx[i]] != u[i]:
            miss[i] = True
            n_miss += 1
    if n_miss:
        uniq = np.unique(np.concatenate((uniq, u[miss])))
        idx = np.searchsorted(uniq, u)
    for i in range(u.size):
        out[i] = np.uint64(idx[i])
    return uniq


@njit(cache=True, nogil=True)
def _dec_dict(uraw, uw, ush, umn, ug, nd, iraw, iw, ish, imn, ig, flip, out):
    """out[i] = dictionary[index i] (dictionary values un-flipped). Returns True, or False at
    the first index not below nd (no entry past the dictionary is read)."""
    n = out.size
    uniq = np.empty(nd, np.uint64)
    _dec_for(uraw, uw, ush, umn, ug, flip, uniq)
    words = _stream_words(iraw, iw, ish)
    q = np.empty(max(min(n, _BLOCK), 1), np.uint64)
    lim = np.uint64(nd)
    for s in range(0, n, _BLOCK):
        e = min(n, s + _BLOCK)
        _unpack_block(iraw, words, iw, ish, n, s, e, q)
        for j in range(e - s):
            k = q[j] * ig + imn
            if k >= lim:
                return False
            out[s + j] = uniq[k]
    return True
