"""Byte shuffle (blosc's transform) of packed rows, as numba kernels that release the GIL.

An array of n rows of w bytes is written as its w byte planes: byte j of row i goes to j * n + i.
The WAL shuffles each batch's rows before lz4 (high bytes that hardly change end up next to each
other), and unshuffles them when it reads a record back. Byte layout: docs/formats.md.

Invariants: ``unshuffle(shuffle(rows))`` is the rows, for any width >= 1 and any row count;
nothing outside the n * w bytes at the given position is written.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["shuffle", "unshuffle"]


@intrinsic
def _load_u64(typingctx, arr, idx):
    """The 8 bytes at byte index ``idx`` of a uint8 array as one little-endian uint64 (an
    unaligned load; no bounds check: the caller keeps idx + 8 <= size)."""
    sig = types.uint64(arr, types.intp)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

    return sig, codegen


@intrinsic
def _store_u64(typingctx, arr, idx, val):
    """Store ``val`` as 8 little-endian bytes at byte index ``idx`` of a uint8 array (unaligned,
    no bounds check)."""
    sig = types.void(arr, types.intp, types.uint64)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        builder.store(args[2], builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


_M32, _M16, _M8 = np.uint64(0xFFFFFFFF), np.uint64(0x0000FFFF0000FFFF), np.uint64(0x00FF00FF00FF00FF)
_S32, _S16, _S8 = np.uint64(32), np.uint64(16), np.uint64(8)


@njit(inline="always")
def _swap(a, b, s, m):
    t = ((a >> s) ^ b) & m
    return a ^ (t << s), b ^ t


@njit(inline="always")
def _transpose8(x0, x1, x2, x3, x4, x5, x6, x7):
    """Transpose the 8x8 byte matrix whose rows are the little-endian words x0..x7: byte r of
    result c is byte c of x_r. Swaps 4x4, then 2x2, then 1x1 blocks (an involution)."""
    x0, x4 = _swap(x0, x4, _S32, _M32)
    x1, x5 = _swap(x1, x5, _S32, _M32)
    x2, x6 = _swap(x2, x6, _S32, _M32)
    x3, x7 = _swap(x3, x7, _S32, _M32)
    x0, x2 = _swap(x0, x2, _S16, _M16)
    x1, x3 = _swap(x1, x3, _S16, _M16)
    x4, x6 = _swap(x4, x6, _S16, _M16)
    x5, x7 = _swap(x5, x7, _S16, _M16)
    x0, x1 = _swap(x0, x1, _S8, _M8)
    x2, x3 = _swap(x2, x3, _S8, _M8)
    x4, x5 = _swap(x4, x5, _S8, _M8)
    x6, x7 = _swap(x6, x7, _S8, _M8)
    return x0, x1, x2, x3, x4, x5, x6, x7


@njit(inline="always")
def _block8(src, s, s_step, out, o, o_step):
    """Load 8 words at src[s + k * s_step], transpose them as an 8x8 byte matrix and store
    them at out[o + k * o_step] (shuffle and unshuffle differ only in the two steps)."""
    y0, y1, y2, y3, y4, y5, y6, y7 = _transpose8(
        _load_u64(src, s), _load_u64(src, s + s_step),
        _load_u64(src, s + 2 * s_step), _load_u64(src, s + 3 * s_step),
        _load_u64(src, s + 4 * s_step), _load_u64(src, s + 5 * s_step),
        _load_u64(src, s + 6 * s_step), _load_u64(src, s + 7 * s_step))
    _store_u64(out, o, y0)
    _store_u64(out, o + o_step, y1)
    _store_u64(out, o + 2 * o_step, y2)
    _store_u64(out, o + 3 * o_step, y3)
    _store_u64(out, o + 4 * o_step, y4)
    _store_u64(out, o + 5 * o_step, y5)
    _store_u64(out, o + 6 * o_step, y6)
    _store_u64(out, o + 7 * o_step, y7)


@njit(cache=True, nogil=True)
def shuffle(src, width, out, pos):
    """Write the n x width bytes of ``src`` byte-shuffled into out[pos:]: byte j of row i goes to
    pos + j * n + i. Returns the position after them. Releases the GIL. Raises ValueError if
    width < 1 or out has no room for them at pos (nothing is written then)."""
    if width < 1 or pos < 0 or pos > out.size or src.size // width > (out.size - pos) // width:
        raise ValueError("shuffle: width < 1 or the rows do not fit in out at pos")
    n = src.size // width
    n8 = n - n % 8 if width >= 8 else 0   # rows narrower than a word: byte loop only
    # why 8x8 word transposes: 8 rows x 8 byte columns are loaded as 8 words, transposed with
    # shifts and masks and stored as 8 words, one per byte plane: 16 memory operations per 64
    # bytes instead of 128 (2-3x the strided byte copies this replaced). Why blocks of 64 rows
    # with the column groups outside: each plane then receives a whole cache line before the
    # next group's planes are touched, so the 8 lines being written stay in L1.
    # A width that is not a multiple of 8 ends with a group overlapping the previous one: its
    # shared planes are written twice with the same bytes.
    for b in range(0, n8, 64):
        e = min(n8, b + 64)
        j = 0
        while j < width:
            jj = min(j, width - 8)
            for i in range(b, e, 8):
                _block8(src, i * width + jj, width, out, pos + jj * n + i, n)
            j += 8
    for i in range(n8, n):   # the last n % 8 rows (all of them when width < 8)
        for j in range(width):
            out[pos + j * n + i] = src[i * width + j]
    return pos + n * width


@njit(cache=True, nogil=True)
def unshuffle(src, pos, width, n, out):
    """Inverse of shuffle: the n byte-shuffled rows of width ``width`` at src[pos:] are written
    back as rows into out[:n * width]. Releases the GIL. Raises ValueError (nothing written) if
    width < 1, n < 0, or src[pos:] or out holds fewer than n * width bytes. Why checked here
    although the WAL checks its record sizes first: the sizes come from a file, and an
    unchecked kernel reads and writes past its arrays (compared as quotients: no overflow)."""
    if width < 1 or n < 0 or pos < 0 or pos > src.size or n > (src.size - pos) // width \
            or n > out.size // width:
        raise ValueError("unshuffle: the rows do not fit in src at pos or in out")
    n8 = n - n % 8 if width >= 8 else 0
    for b in range(0, n8, 64):
        e = min(n8, b + 64)
        j = 0
        while j < width:
            jj = min(j, width - 8)
            for i in range(b, e, 8):
                _block8(src, pos + jj * n + i, n, out, i * width + jj, width)
            j += 8
    for i in range(n8, n):
        for j in range(width):
            out[i * width + j] = src[pos + j * n + i]
