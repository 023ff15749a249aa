"""DELTA and DOD: a column as its first (DELTA) or second (DOD, timestamps) differences.

DELTA is the first value, the gcd of the differences, then the differences divided by it,
zigzagged (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...) as one stream (store.codecs.stream); DOD is the
first value, the first difference, the gcd, then the second differences the same way.
``_diffs`` writes the zigzagged quotients for the block writer; ``_dec_delta`` undoes both
orders, writing the running sums straight into the output column in its own width. A DELTA
stream of width 0 (a constant step) is written without reading it; DOD's shuffled streams are
unpacked a block at a time.

Invariants: differences and sums wrap modulo 2**64, so every column round-trips, int64 and
uint64 extremes included; the gcd is over the differences' magnitudes (1 if all are 0), and
2**63 (the magnitude of int64 min) is kept as is. Kernels are ``@njit(cache=True, nogil=True)``;
they call ``arith`` and ``stream`` code, hence the cache guard.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.store.codecs.arith import _CHUNK, _U0, _U1, _U63, _divider, _gcd_step, _ld
from exsim.store.codecs.stream import (_BLOCK, _loadable, _one_pass, _packed_at, _packed_tail, _planes,
                                       _put_stream, _put_word, _stream_words, _unpack_block)

__all__: list[str] = []

guard(__name__, __file__, deps=("exsim.store.codecs.arith", "exsim.store.codecs.stream"))


@njit(cache=True, nogil=True)
def _dif(u0, u1, u2, i, order):
    """The i-th first (order 1) or second (order 2) difference (u0, u1, u2: u, u[1:], u[2:])."""
    if order == 1:
        return _ld(u1, i) - _ld(u0, i)
    return (_ld(u2, i) - _ld(u1, i)) - (_ld(u1, i) - _ld(u0, i))


@njit(cache=True, nogil=True)
def _diffs(u, order, z):
    """z[:m] = the first (order 1) or second (order 2) differences of u (uint64 bit patterns of
    signed values) divided by their gcd and zigzagged (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...);
    returns (gcd, m). The gcd is over magnitudes (1 if all are 0); 2**63 (the magnitude of
    int64 min) is kept as is because it has no positive int64 form."""
    m = max(u.size - order, 0)
    # why slices: indexes from 0 need no negative-index fix-ups, so the loops vectorize
    u0, u1, u2 = u[:m], u[1:m + 1], u[min(2, u.size):m + 2]
    g, sh, low, inv, lim = _U0, _U0, _U0, _U1, _U0
    s = 0
    while s < m and g != _U1:   # chunked like _stats: a vectorized check, the slow path rarely
        e = min(m, s + _CHUNK)
        bad = _U0
        for i in range(s, e):
            x = _dif(u0, u1, u2, i, order)
            x = (_U0 - x) if (x >> _U63) == _U1 else x
            bad |= (x & low) | np.uint64(((x >> sh) * inv) > lim)
        if bad != _U0:
            for i in range(s, e):
                x = _dif(u0, u1, u2, i, order)
                g, sh, low, inv, lim = _gcd_step(g, (_U0 - x) if (x >> _U63) == _U1 else x,
                                                 sh, low, inv, lim)
        s = e
    if g == _U0:
        g = _U1
    sh, inv, _ = _divider(g)
    for i in range(m):
        x = _dif(u0, u1, u2, i, order)
        neg = (x >> _U63) == _U1
        q = (((_U0 - x) if neg else x) >> sh) * inv
        if neg:
            q = _U0 - q
        z[i] = (q << _U1) ^ (_U0 - (q >> _U63))
    return g, m


@njit(cache=True, nogil=True)
def _put_delta(u, order, aligned, out, pos, tmp):
    """Write the body of DELTA (order 1) or DOD (order 2) at out[pos:]: the first value (and
    the first difference), the gcd, the stream; returns the position after it. tmp: scratch
    of at least u.size values. Why one kernel: one dispatch per block (a dispatch from Python
    costs microseconds, a block's encoding tens of them)."""
    n = u.size
    # (the loads written out, not _ld(u, 0): a literal index compiles another variant of _ld)
    u0 = np.uint64(np.int64(u[0])) if n else _U0
    pos = _put_word(out, pos, u0)
    if order == 2:
        pos = _put_word(out, pos, np.uint64(np.int64(u[1])) - u0 if n > 1 else _U0)
    g, m = _diffs(u, order, tmp)
    pos = _put_word(out, pos, g)
    return _put_stream(tmp[:m], _U0, aligned, out, pos)


@njit(cache=True, nogil=True)
def _unzigzag(z):
    """The signed difference (as its uint64 bit pattern) a zigzagged value stands for."""
    return (z >> _U1) ^ (_U0 - (z & _U1))


@njit(cache=True, nogil=True)
def _dec_delta(raw, width, shuffled, smn, sg, first, d0, g, order, out):
    """Undo DELTA (order 1) or DOD (order 2): the stream (min smn, gcd sg) holds the n - order
    zigzagged (second) differences divided by g; out gets the running sums from ``first`` (and the
    first difference ``d0``), truncated to out's width."""
    n = out.size
    if n == 0:
        return
    m = max(n - order, 0)
    acc = first
    out[0] = acc
    d = d0
    if order == 2 and n > 1:
        acc += d
        out[1] = acc
    if width == 0 and order == 1:
        # why apart: a constant step (the seqs of one symbol's orders) has no dependency chain
        step = _unzigzag(smn) * g
        for j in range(1, n):
            out[j] = first + np.uint64(j) * step
        return
    if _one_pass(width, shuffled):
        mask = (_U1 << np.uint64(width)) - _U1
        safe = _loadable(raw.size, width, m)
        if order == 1:
            for j in range(safe):
                acc += _unzigzag(_packed_at(raw, j * width, mask) * sg + smn) * g
                out[j + 1] = acc
        else:
            for j in range(safe):
                d += _unzigzag(_packed_at(raw, j * width, mask) * sg + smn) * g
                acc += d
                out[j + 2] = acc
        for j in range(safe, m):
            z = _unzigzag(_packed_tail(raw, j * width, mask) * sg + smn) * g
            if order == 2:
                d += z
                z = d
            acc += z
            out[j + order] = acc
        return
    if shuffled and order == 1:
        if width == 16:
            for j in range(m):
                acc += _unzigzag(_planes(raw, m, j, 2) * sg + smn) * g
                out[j + 1] = acc
        elif width == 32:
            for j in range(m):
                acc += _unzigzag(_planes(raw, m, j, 4) * sg + smn) * g
                out[j + 1] = acc
        else:
            for j in range(m):
                acc += _unzigzag(_planes(raw, m, j, 8) * sg + smn) * g
                out[j + 1] = acc
        return
    words = _stream_words(raw, width, shuffled)
    q = np.empty(max(min(m, _BLOCK), 1), np.uint64)
    for s in range(0, m, _BLOCK):
        e = min(m, s + _BLOCK)
        _unpack_block(raw, words, width, shuffled, m, s, e, q)
        base = s + order
        if order == 1:
            for j in range(e - s):
                z = q[j] * sg + smn
                acc += ((z >> _U1) ^ (_U0 - (z & _U1))) * g
                out[base + j] = acc
        else:
            for j in range(e - s):
                z = q[j] * sg + smn
                d += ((z >> _U1) ^ (_U0 - (z & _U1))) * g
                acc += d
                out[base + j] = acc
