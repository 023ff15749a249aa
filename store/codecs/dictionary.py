"""DICT: a column as its sorted distinct values and, per row, the index of its value among them.

The block holds the dictionary size (u32), the sorted distinct keys as a bit-packed stream, then
each row's index as another stream (store.codecs.stream). ``_dict_index`` builds the dictionary
and the indexes (a direct table for a narrow key range, the kernel ``_dict_table``; else, in
numpy, a sorted sample plus the values it missed); ``_dec_dict`` decodes the dictionary and looks each row up.

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
from exsim.store.codecs.arith import _ALL, _U0
from exsim.store.codecs.stream import _BLOCK, _dec_for, _put_stream, _stream_words, _unpack_block

__all__: list[str] = []

guard(__name__, __file__, deps=("exsim.store.codecs.arith", "exsim.store.codecs.stream"))


def _dict_index(u, idx):
    """The sorted distinct values of u (contiguous uint64); idx[i] = the position of u[i] among
    them. A narrow key range indexes a table (``_dict_table``), a wide one looks rows up in a
    sorted sample (``_dict_lookup``; the sorting in numpy, nothing to compile)."""
    if u.size == 0:
        return np.empty(0, np.uint64)
    mn, mx = u.min(), u.max()
    if mx - mn < np.uint64(min(1 << 20, 4 * u.size + 4096)):
        # why: a narrow key range indexes a table directly: O(n), no sort, no binary search
        # (a table much larger than the column would cost more to clear than to sort)
        return _dict_table(u, mn, int(mx - mn) + 1, idx)
    # why: sorting the whole column is slow; a low-cardinality column shows most of its values
    # in a sample, so look rows up in the sample's sorted values and add the few it missed
    uniq = _sorted_distinct(u[::max(1, u.size // 4096)])
    if _dict_lookup(uniq, u, idx):
        uniq = _sorted_distinct(np.concatenate((uniq, u[idx == _ALL])))
        _dict_lookup(uniq, u, idx)
    return uniq


def _sorted_distinct(x):
    """The sorted distinct values of x. Why not np.unique: it hashes here, 5-10x slower than a
    sort (see also choice._sample_distinct)."""
    s = np.sort(x)
    keep = np.empty(s.size, np.bool_)
    keep[:1] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


@njit(cache=True, nogil=True)
def _dict_lookup(uniq, u, idx):
    """idx[i] = the position of u[i] in the sorted distinct values uniq, or _ALL where u[i] is
    not among them; returns how many are not. One fused pass (a binary search per row), where
    numpy's searchsorted and the membership test took three passes and twice the time."""
    missed = 0
    m = uniq.size
    for i in range(u.size):
        x = u[i]
        lo, hi = 0, m
        while lo < hi:
            mid = (lo + hi) >> 1
            if uniq[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        if lo < m and uniq[lo] == x:
            idx[i] = np.uint64(lo)
        else:
            idx[i] = _ALL
            missed += 1
    return missed


@njit(cache=True, nogil=True)
def _dict_table(u, mn, size, idx):
    """``_dict_index`` for keys within [mn, mn + size): the sorted distinct values, and each
    row's position among them in idx, through a table of ``size`` slots."""
    slot = np.zeros(size, np.int64)
    for i in range(u.size):
        slot[np.int64(u[i] - mn)] = 1
    d = 0
    for k in range(size):
        if slot[k]:
            slot[k] = d
            d += 1
        else:
            slot[k] = -1
    uniq = np.empty(d, np.uint64)
    for k in range(size):
        if slot[k] >= 0:
            uniq[slot[k]] = mn + np.uint64(k)
    for i in range(u.size):
        idx[i] = np.uint64(slot[np.int64(u[i] - mn)])
    return uniq


@njit(cache=True, nogil=True)
def _put_dict(uniq, idx, packed, aligned, out, pos):
    """Write the dictionary's stream (layout ``packed``) and the indexes' (layout ``aligned``)
    at out[pos:]; returns the position after them. One kernel: one dispatch per block."""
    pos = _put_stream(uniq, _U0, packed, out, pos)
    return _put_stream(idx, _U0, aligned, out, pos)


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
