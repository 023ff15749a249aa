"""uint64 arithmetic shared by the encoding kernels: bit patterns, gcd, exact division.

A column is handled as the uint64 bit pattern of its values, so all arithmetic in the kernels
wraps modulo 2**64 and every encoding round-trips every value, int64 and uint64 extremes
included. ``_ld`` reads a value of an integer array of any width as its uint64 bit pattern
(narrower signed values sign-extended, unsigned ones zero-extended), so a narrow column (a
``split_u64`` uint8 column) is read as it is, never widened into a uint64 copy.

Exact divisions by a stream's gcd and the divisibility tests of the gcd search are
multiplications by the inverse of the gcd's odd part (``_divider``, ``_gcd_step``): a 64-bit
divide per value cost more than everything else together.

Invariants: every kernel is ``@njit(cache=True, nogil=True)`` with no object mode; none
allocates or keeps state; ``_divider(g)`` requires g >= 1, and ``_gcd_step`` treats g == 0 as
"nothing seen yet". This module calls no other module's njit code, so it needs no cache guard;
the modules that use it name it in theirs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__: list[str] = []


_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U63 = np.uint64(63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_SIGN = np.uint64(1 << 63)


@njit(cache=True, nogil=True)
def _gcd(a, b):
    while b != _U0:
        a, b = b, a % b
    return a


@njit(cache=True, nogil=True)
def _bit_width(x):
    w = 0
    while x != _U0:
        x = x >> _U1
        w += 1
    return w


@njit(cache=True, nogil=True)
def _ld(a, i):
    """a[i] as its uint64 bit pattern, for an integer array of any width: narrower signed
    values sign-extend, unsigned ones zero-extend (through int64: one instruction, or none for
    8-byte values). Why: the encoders read a narrow column (split_u64's uint8 columns) as it
    is, instead of a uint64 copy of it."""
    return np.uint64(np.int64(a[i]))


@njit(cache=True, nogil=True)
def _divider(g):
    """(shift, inverse, limit) for g >= 1: x is a multiple of g iff its low ``shift`` bits are 0
    and (x >> shift) * inverse <= limit, and then x // g == (x >> shift) * inverse (mod 2**64;
    Granlund & Montgomery 1994, "Division by invariant integers using multiplication")."""
    sh = _U0
    d = g
    while (d & _U1) == _U0:
        d = d >> _U1
        sh += _U1
    inv = d                      # why: d * d == 1 mod 8 for odd d; each Newton step doubles
    for _ in range(5):           # the correct low bits (3, 6, 12, 24, 48, 96)
        inv = inv * (np.uint64(2) - d * inv)
    return sh, inv, _ALL // d


@njit(cache=True, nogil=True)
def _gcd_step(g, m, sh, low, inv, lim):
    """The running gcd after magnitude m, and its divider; the gcd search's slow path runs only
    when m is not a multiple of g (at most ~64 times: each change at least halves g). g == 0
    (nothing seen yet, lim 0) takes any nonzero m."""
    if (m & low) != _U0 or ((m >> sh) * inv) > lim:
        g = _gcd(g, m)
        sh, inv, lim = _divider(g)
        low = (_U1 << sh) - _U1
    return g, sh, low, inv, lim


_CHUNK = 256   # values checked per step of the gcd search's fast path
