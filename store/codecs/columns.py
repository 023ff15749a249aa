"""Columns in: integer fields and columns as contiguous columns of uint64 bit patterns.

Columns reach the encoders as contiguous arrays (``split_u64``: one cache-blocked pass over a
batch's rows for all its fields): uint8 fields as uint8 columns, all others as uint64 bit
patterns; every kernel reads a value through ``arith._ld`` (its uint64 bit pattern), so a narrow
column is never widened into a uint64 copy. ``gather_u64`` concatenates columns (strided field
views welcome), ``seq_u64`` writes the seqs of consecutive batches, ``take_u64`` picks rows in a
given order (a seal's rows sorted by symbol), ``_as_u64`` turns one column into bit patterns.

Invariants: signed values are sign-extended and unsigned ones zero-extended, so a value has the
same bit pattern whichever function produced it and whatever its column's width. Results are
new arrays, except ``split_u64``'s columns (views into the caller's ``out`` when it is large
enough) and ``_as_u64`` of a contiguous 8-byte column (a view of it). Kernels are
``@njit(cache=True, nogil=True)``; ``_take`` calls ``arith._ld``, hence the cache guard.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.store.codecs.arith import _ld

__all__ = ["gather_u64", "split_u64", "seq_u64", "take_u64"]

guard(__name__, __file__, deps=("exsim.store.codecs.arith",))


@njit(cache=True, nogil=True)
def _put_u64(src, signed, out, pos):
    """Copy an integer column (any width, any stride) into out[pos:] as uint64 bit patterns,
    sign-extending when ``signed``. Returns the position after it."""
    if signed:
        for i in range(src.size):
            out[pos + i] = np.uint64(np.int64(src[i]))
    else:
        for i in range(src.size):
            out[pos + i] = np.uint64(src[i])
    return pos + src.size


@njit(cache=True, nogil=True)
def _put_range(first, n, out, pos):
    """Write first, first + 1, ... (n values) into out[pos:]; returns the position after them."""
    for i in range(n):
        out[pos + i] = np.uint64(first + i)
    return pos + n


@njit(cache=True, nogil=True)
def _take(u, idx, lo, hi):
    out = np.empty(hi - lo, np.uint64)
    for i in range(lo, hi):
        out[i - lo] = _ld(u, idx[i])
    return out


def _as_u64(col: np.ndarray) -> np.ndarray:
    """The column's values as contiguous uint64 bit patterns (signed ones sign-extended)."""
    if col.dtype.itemsize == 8 and col.flags.c_contiguous:
        return col.view(np.uint64)
    out = np.empty(col.size, np.uint64)
    _put_u64(col, col.dtype.kind == "i", out, 0)
    return out


def gather_u64(parts, signed: bool) -> np.ndarray:
    """Concatenate integer columns (strided field views welcome) into one uint64 array.

    Returns a new array of sum(p.size) uint64 bit patterns, sign-extended when ``signed``.
    Raises nothing of its own (numba raises TypingError for a part that is not an array)."""
    out = np.empty(sum(p.size for p in parts), np.uint64)
    pos = 0
    for p in parts:
        pos = _put_u64(p, signed, out, pos)
    return out


_SPLIT_ROWS = 16_384   # rows per step of split_u64: 0.7-1.1 MiB of records, about L2's size


def split_u64(arrays, names, out: np.ndarray | None = None) -> dict:
    """The named integer fields of structured arrays (same dtype), concatenated, as {name:
    contiguous column}. uint8 fields come as uint8 columns, which the encoders (``encode_view``,
    ``Chooser.encode_u64``, ``take_u64``) read as the bit patterns of their values: they are
    copied at their own width, not widened to 8 bytes. All other fields come as uint64 bit
    patterns (signed ones sign-extended).
    ``out`` (optional, reused to spare page faults) is C-contiguous scratch memory of any dtype;
    when it is large enough the columns are views into it (valid until it is reused).
    Raises ValueError for no arrays, mixed dtypes or a name that is not an integer field."""
    if not arrays:
        raise ValueError("split_u64: no arrays")
    dtype = arrays[0].dtype
    for a in arrays:
        if a.dtype != dtype:
            raise ValueError(f"split_u64: mixed dtypes {a.dtype} and {dtype}")
    for c in names:
        if dtype.fields is None or c not in dtype.fields or dtype.fields[c][0].kind not in "iu":
            raise ValueError(f"split_u64: {c!r} is not an integer field of {dtype}")
    total = sum(a.size for a in arrays)
    # why only 1-byte unsigned fields stay narrow: they are most of the narrow bytes (five of
    # the orders' eleven fields), and each column type the encoders see is another compiled
    # variant of every encoding kernel (~10 s cold each): 4-byte fields (symbol, trader ...)
    # are widened like the 8-byte ones
    kinds = [dtype.fields[c][0] if dtype.fields[c][0] == np.uint8 else np.dtype(np.uint64)
             for c in names]
    # each column starts on a cache line of its own
    sizes = [(total * np.dtype(k).itemsize + 63) // 64 * 64 for k in kinds]
    if out is not None and out.flags.c_contiguous and out.nbytes >= sum(sizes) + 64:
        raw = out.reshape(-1).view(np.uint8)
    else:
        raw = np.empty(sum(sizes) + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    cols = {}
    for c, k, size in zip(names, kinds, sizes):
        cols[c] = raw[start:start + total * np.dtype(k).itemsize].view(k)
        start += size
    # why numpy copies a block of rows at a time: every field of a block is copied while its
    # rows are in L2 (a pass per field over the whole batch would stream it from memory once per
    # field); a strided field copy in numpy costs about what a kernel would, and 8-byte fields
    # are copied as their uint64 bit patterns (same bytes)
    pos = 0
    for a in arrays:
        for s in range(0, a.size, _SPLIT_ROWS):
            blk = a[s:s + _SPLIT_ROWS]
            m = blk.size
            for c in names:
                f = blk[c]
                # (unsafe casting: int32 -> uint64 sign-extends, as C does)
                np.copyto(cols[c][pos + s:pos + s + m],
                          f.view(np.uint64) if f.dtype.itemsize == 8 else f, casting="unsafe")
        pos += a.size
    return cols


def seq_u64(firsts, sizes) -> np.ndarray:
    """The seqs first, first + 1 ... of consecutive batches, as one uint64 array.

    Returns a new array of sum(sizes) values, batch after batch; raises nothing of its own."""
    out = np.empty(int(sum(sizes)), np.uint64)
    pos = 0
    for f, n in zip(firsts, sizes):
        pos = _put_range(f, n, out, pos)
    return out


def take_u64(u: np.ndarray, idx: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """u[idx[lo:hi]] as a new contiguous uint64 array of bit patterns; ``u`` is an integer
    column of any width and stride (a ``split_u64`` field view, signed ones sign-extended).
    Raises nothing of its own: the kernel has no bounds checks, so the caller keeps lo <= hi
    within idx and every idx[lo:hi] a row of ``u``."""
    return _take(u, idx, lo, hi)
