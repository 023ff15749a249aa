"""Column encodings: integer columns to compact bytes and back, as numba kernels.

Every stored column is an integer column (int64/uint64 and narrower ints: prices, quantities,
ids, timestamps, enum codes). A column is handled as the uint64 bit pattern of its values, so
all arithmetic below wraps modulo 2**64 and every encoding round-trips every value, int64 and
uint64 extremes included.

Encodings (the first byte of an encoded block names it):

- PLAIN  the values' little-endian bytes in the column's own width.
- FOR    frame of reference: (key - min) / gcd, bit-packed at the width of the largest quotient.
         ``key`` is the value with its sign bit flipped for signed columns, so min/max follow the
         signed order.
- DELTA  first value, then the differences divided by their GCD, zigzagged and bit-packed.
- DOD    delta-of-delta (timestamps): first value, first delta, then the second differences
         divided by their GCD, zigzagged and bit-packed.
- RLE    run values and run lengths, each as a FOR stream.
- DICT   the sorted distinct values as a FOR stream, then each row's index bit-packed.

Every bit-packed stream has one of three layouts (``PACKED`` exact width, ``ALIGNED`` width
rounded up to whole bytes, ``SHUFFLED`` aligned and stored as byte planes: flag 0x80 in its width
byte); the block is the same otherwise, and decoding reads the layout from the stream.

Which encoding and layout a column gets is decided in store/choice.py (``choose``, ``Chooser``:
smallest after compression, searched on a sample, remembered); they are re-exported here.
Columns reach the encoders as uint64 bit patterns (``split_u64``: one cache-blocked pass over a
batch's rows for all its fields), so sealing never copies a field through numpy casts.

Decoding is fused: each stream is unpacked a block of values at a time (byte planes and
byte-aligned widths as plain loads, widths 1/2/4 word by word) and the block's final values are
written straight into the output column in its own width (``decode(..., out=)`` may supply it).

Invariants: kernels are ``@njit(cache=True, nogil=True)`` with no object mode and no per-row
Python; the Python wrappers only assemble and parse headers. Byte layouts are in docs/formats.md ("Column block").
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from exchange.errors import CorruptionError

__all__ = [
    "PLAIN", "FOR", "DELTA", "DOD", "RLE", "DICT", "ENCODINGS", "ENCODING_NAMES",
    "PACKED", "ALIGNED", "SHUFFLED", "encode", "encode_u64", "decode", "choose", "choose_u64", "Chooser", "gather_u64", "split_u64", "seq_u64",
    "take_u64",
]

PLAIN, FOR, DELTA, DOD, RLE, DICT = 0, 1, 2, 3, 4, 5
ENCODINGS = (PLAIN, FOR, DELTA, DOD, RLE, DICT)
ENCODING_NAMES = {PLAIN: "plain", FOR: "for", DELTA: "delta", DOD: "dod", RLE: "rle", DICT: "dict"}

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U63 = np.uint64(63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_SIGN = np.uint64(1 << 63)

# Stream layouts ("aligned" argument): bit-packed at the exact width, at a byte-aligned width,
# or byte-aligned and byte-shuffled (flag bit 0x80 of the stream's width byte; widths 16-64).
PACKED, ALIGNED, SHUFFLED = 0, 1, 2
SHUFFLE_FLAG = 0x80
_STREAM_HEAD = struct.Struct("<QQB")   # min, gcd, width
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------

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
def _stream_params(keys):
    """(min, gcd, width) of a FOR stream over uint64 keys; gcd is 1 when all keys are equal."""
    n = keys.size
    if n == 0:
        return _U0, _U1, 0
    mn = keys[0]
    mx = keys[0]
    for i in range(n):
        k = keys[i]
        if k < mn:
            mn = k
        if k > mx:
            mx = k
    g = _U0
    for i in range(n):
        g = _gcd(g, keys[i] - mn)
        if g == _U1:
            break  # why: gcd cannot fall below 1, stop paying for the modulo loop
    if g == _U0:
        g = _U1
    return mn, g, _bit_width((mx - mn) // g)


@njit(cache=True, nogil=True)
def _stream_pack(keys, mn, g, width):
    """Bit-pack (keys - mn) // g at ``width`` bits each, LSB first, into uint64 words."""
    n = keys.size
    nw = (n * width + 63) // 64
    if width == 8 or width == 16 or width == 32 or width == 64:
        # why: byte-aligned widths are plain little-endian stores (what lz4/zstd like best);
        # every byte that is emitted gets written, so no zero fill; and no division when the
        # gcd is 1 (the common case): a 64-bit divide per value cost more than the rest
        out = np.empty(nw, np.uint64)
        if g == _U1:
            _store_aligned(keys, mn, width, out)
        else:
            q = np.empty(n, np.uint64)
            for i in range(n):
                q[i] = (keys[i] - mn) // g
            _store_aligned(q, _U0, width, out)
        return out
    out = np.zeros(nw, np.uint64)
    if width == 0:
        return out
    bitpos = 0
    for i in range(n):
        v = keys[i] - mn
        if g != _U1:
            v = v // g
        w = bitpos >> 6
        o = bitpos & 63
        out[w] |= v << np.uint64(o)
        if o + width > 64:
            out[w + 1] |= v >> np.uint64(64 - o)
        bitpos += width
    return out


@njit(cache=True, nogil=True)
def _store_aligned(keys, mn, width, out):
    """out (as width-bit little-endian integers) = keys - mn, for width 8, 16, 32 or 64."""
    n = keys.size
    if width == 8:
        b8 = out.view(np.uint8)
        for i in range(n):
            b8[i] = np.uint8(keys[i] - mn)
    elif width == 16:
        b16 = out.view(np.uint16)
        for i in range(n):
            b16[i] = np.uint16(keys[i] - mn)
    elif width == 32:
        b32 = out.view(np.uint32)
        for i in range(n):
            b32[i] = np.uint32(keys[i] - mn)
    else:
        for i in range(n):
            out[i] = keys[i] - mn


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
def _split_block(t8, k8, t4s, k4s, t4u, k4u, t1, k1, n, out, pos):
    """Copy fields (strided views, grouped by width and signedness: uint64, int32, uint32,
    uint8; group g's j-th view goes to out[kg[j], pos:]) as uint64 bit patterns, 256 rows at a
    time: the rows stay in cache while every field of them is copied, instead of being streamed
    from memory once per field. Views shorter than n are placeholders for empty groups."""
    for s in range(0, n, 256):
        e = min(n, s + 256)
        for j in range(len(t8)):
            f, r = t8[j], k8[j]
            for i in range(s, min(e, f.size)):
                out[r, pos + i] = f[i]
        for j in range(len(t4s)):
            f, r = t4s[j], k4s[j]
            for i in range(s, min(e, f.size)):
                out[r, pos + i] = np.uint64(np.int64(f[i]))
        for j in range(len(t4u)):
            f, r = t4u[j], k4u[j]
            for i in range(s, min(e, f.size)):
                out[r, pos + i] = np.uint64(f[i])
        for j in range(len(t1)):
            f, r = t1[j], k1[j]
            for i in range(s, min(e, f.size)):
                out[r, pos + i] = np.uint64(f[i])
    return pos + n


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
        out[i - lo] = u[idx[i]]
    return out


@njit(cache=True, nogil=True)
def _diff_zigzag(u, order):
    """Divide the first (order 1) or second (order 2) differences of u (uint64 bit patterns of
    signed values) by their GCD and zigzag them, without materialising the differences.

    Returns (gcd, zigzagged quotients). The GCD is taken over magnitudes (1 if all are 0);
    2**63 (the magnitude of int64 min) is kept as is because it has no positive int64 form.
    Zigzag maps 0, -1, 1, -2 ... to 0, 1, 2, 3 ...
    """
    m = u.size - order
    if m < 0:
        m = 0
    g = _U0
    for i in range(m):
        x = u[i + 1] - u[i] if order == 1 else (u[i + 2] - u[i + 1]) - (u[i + 1] - u[i])
        mag = (_U0 - x) if (x >> _U63) == _U1 else x
        g = _gcd(g, mag)
        if g == _U1:
            break
    if g == _U0:
        g = _U1
    z = np.empty(m, np.uint64)
    for i in range(m):
        x = u[i + 1] - u[i] if order == 1 else (u[i + 2] - u[i + 1]) - (u[i + 1] - u[i])
        neg = (x >> _U63) == _U1
        mag = (_U0 - x) if neg else x
        q = mag // g if g != _U1 else mag
        if neg:
            q = _U0 - q
        z[i] = (q << _U1) ^ (_U0 - (q >> _U63))
    return g, z


@njit(cache=True, nogil=True)
def _runs(u):
    """Run values and run lengths of u."""
    n = u.size
    nr = 0
    for i in range(n):
        if i == 0 or u[i] != u[i - 1]:
            nr += 1
    vals = np.empty(nr, np.uint64)
    lens = np.empty(nr, np.uint64)
    r = -1
    for i in range(n):
        if i == 0 or u[i] != u[i - 1]:
            r += 1
            vals[r] = u[i]
            lens[r] = _U0
        lens[r] += _U1
    return vals, lens


@njit(cache=True, nogil=True)
def _dict_index(u):
    if u.size:
        mn, mx = u[0], u[0]
        for i in range(u.size):
            if u[i] < mn:
                mn = u[i]
            if u[i] > mx:
                mx = u[i]
        if mx - mn < np.uint64(1 << 20):
            # why: a narrow key range indexes a table directly: O(n), no sort, no binary search
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
            idx = np.empty(u.size, np.uint64)
            for i in range(u.size):
                idx[i] = np.uint64(slot[np.int64(u[i] - mn)])
            return uniq, idx
    return _dict_index_sorted(u)


@njit(cache=True, nogil=True)
def _dict_index_sorted(u):
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
    return uniq, idx.astype(np.uint64)


@njit(cache=True, nogil=True)
def _flip(u, flip):
    if not flip:
        return u
    out = np.empty(u.size, np.uint64)
    for i in range(u.size):
        out[i] = u[i] ^ _SIGN
    return out


# ---------------------------------------------------------------------------------------------
# decoding kernels: each stream is unpacked BLOCK values at a time into a small cache-resident
# buffer, and the block's final values (times gcd plus min, un-delta'd, looked up ...) are written
# straight into the caller's output in its own width: one pass over memory, no whole-column
# temporaries, no casts afterwards.
# ---------------------------------------------------------------------------------------------

_BLOCK = 1024   # values unpacked per step: 8 KiB of scratch, stays in L1


@njit(cache=True, nogil=True)
def _stream_words(raw, width, shuffled):
    """The stream body as uint64 words plus one zero word (so every value can be read with two
    word loads and no bounds test), for the layouts read word-wise: bit-packed and
    byte-aligned-unshuffled widths 16/32/64. Other layouts are read from ``raw`` directly."""
    if shuffled or width == 0 or width == 8:
        return np.zeros(1, np.uint64)
    nw = raw.size // 8 + 2
    words = np.empty(nw, np.uint64)
    words[raw.size // 8:] = _U0
    words.view(np.uint8)[:raw.size] = raw
    return words


@njit(cache=True, nogil=True, inline="always")
def _unpack_block(raw, words, width, shuffled, n, s, e, q):
    """q[:e - s] = the raw (pre gcd/min) values s .. e-1 of a stream of n values."""
    m = e - s
    if width == 0:
        for j in range(m):
            q[j] = _U0
    elif width == 8:
        for j in range(m):
            q[j] = np.uint64(raw[s + j])
    elif shuffled:
        # why: byte planes are read plane by plane over the block: sequential loads, no
        # separate unshuffle pass over the whole stream
        for j in range(m):
            q[j] = np.uint64(raw[s + j])
        for b in range(1, width // 8):
            base = b * n + s
            sh = np.uint64(8 * b)
            for j in range(m):
                q[j] |= np.uint64(raw[base + j]) << sh
    elif width == 16:
        w16 = words.view(np.uint16)
        for j in range(m):
            q[j] = np.uint64(w16[s + j])
    elif width == 32:
        w32 = words.view(np.uint32)
        for j in range(m):
            q[j] = np.uint64(w32[s + j])
    elif width == 64:
        for j in range(m):
            q[j] = words[s + j]
    elif width == 1 or width == 2 or width == 4:
        # why word by word: a width dividing 64 never straddles words, and the inner loop is
        # shifts only (2-3x the per-value address arithmetic below). Blocks start at a word
        # boundary because _BLOCK * width is a multiple of 64.
        mask = (_U1 << np.uint64(width)) - _U1
        per = 64 // width
        w0 = (s * width) >> 6
        full = m // per
        for k in range(full):
            x = words[w0 + k]
            for t in range(per):
                q[k * per + t] = (x >> np.uint64(t * width)) & mask
        x = words[w0 + full]
        for t in range(m - full * per):
            q[full * per + t] = (x >> np.uint64(t * width)) & mask
    else:
        mask = (_U1 << np.uint64(width)) - _U1
        uw = np.uint64(width)
        base = np.uint64(s) * uw
        for j in range(m):
            # why unsigned positions: no negative-index wraparound test per load
            bp = base + np.uint64(j) * uw
            w = bp >> np.uint64(6)
            o = bp & _U63
            # why two loads and no branch: the padding word makes words[w + 1] always valid,
            # and (x << 1) << (63 - o) is x << (64 - o) without the undefined shift by 64
            v = (words[w] >> o) | ((words[w + _U1] << _U1) << (_U63 - o))
            q[j] = v & mask


@njit(cache=True, nogil=True)
def _dec_for(raw, width, shuffled, mn, g, flip, out):
    """out[i] = (value i * g + mn) ^ flip, truncated to out's width (FOR, and plain streams)."""
    n = out.size
    if width == 0:
        # why: a constant column (symbol, order type ...) is a fill, no unpacking
        out[:] = mn ^ flip
        return
    words = _stream_words(raw, width, shuffled)
    q = np.empty(min(n, _BLOCK), np.uint64)
    for s in range(0, n, _BLOCK):
        e = min(n, s + _BLOCK)
        _unpack_block(raw, words, width, shuffled, n, s, e, q)
        if g == _U1:
            for j in range(e - s):
                out[s + j] = (q[j] + mn) ^ flip
        else:
            for j in range(e - s):
                out[s + j] = (q[j] * g + mn) ^ flip


@njit(cache=True, nogil=True)
def _dec_delta(raw, width, shuffled, smn, sg, first, d0, g, order, out):
    """Undo DELTA (order 1) or DOD (order 2): the stream (min smn, gcd sg) holds the n - order
    zigzagged (second) differences divided by g; out gets the running sums from ``first`` (and the
    first difference ``d0``), truncated to out's width."""
    n = out.size
    if n == 0:
        return
    m = max(n - order, 0)
    words = _stream_words(raw, width, shuffled)
    q = np.empty(max(min(m, _BLOCK), 1), np.uint64)
    acc = first
    out[0] = acc
    d = d0
    if order == 2 and n > 1:
        acc += d
        out[1] = acc
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


@njit(cache=True, nogil=True)
def _dec_rle(vraw, vw, vsh, vmn, vg, lraw, lw, lsh, lmn, lg, nr, flip, out):
    """Expand nr runs (values stream, lengths stream) into out; False if the lengths do not
    add up to out.size."""
    n = out.size
    vwords = _stream_words(vraw, vw, vsh)
    lwords = _stream_words(lraw, lw, lsh)
    qv = np.empty(max(min(nr, _BLOCK), 1), np.uint64)
    ql = np.empty(max(min(nr, _BLOCK), 1), np.uint64)
    p = 0
    for s in range(0, nr, _BLOCK):
        e = min(nr, s + _BLOCK)
        _unpack_block(vraw, vwords, vw, vsh, nr, s, e, qv)
        _unpack_block(lraw, lwords, lw, lsh, nr, s, e, ql)
        for j in range(e - s):
            ln = np.int64(ql[j] * lg + lmn)
            v = (qv[j] * vg + vmn) ^ flip
            if ln == 1 and p < n:
                # why: most runs of a mostly-distinct column are single rows; skip the
                # inner loop's setup for them
                out[p] = v
                p += 1
                continue
            if ln < 0 or p + ln > n:
                return False
            for i in range(p, p + ln):
                out[i] = v
            p += ln
    return p == n


@njit(cache=True, nogil=True)
def _dec_dict(uraw, uw, ush, umn, ug, nd, iraw, iw, ish, imn, ig, flip, out):
    """out[i] = dictionary[index i] (dictionary values un-flipped); False if an index is out of
    range."""
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


# ---------------------------------------------------------------------------------------------
# Python wrappers: headers and byte layout
# ---------------------------------------------------------------------------------------------

def _as_u64(col: np.ndarray) -> np.ndarray:
    """The column's values as contiguous uint64 bit patterns (signed ones sign-extended)."""
    if col.dtype.itemsize == 8 and col.flags.c_contiguous:
        return col.view(np.uint64)
    out = np.empty(col.size, np.uint64)
    _put_u64(col, col.dtype.kind == "i", out, 0)
    return out


def gather_u64(parts, signed: bool) -> np.ndarray:
    """Concatenate integer columns (strided field views welcome) into one uint64 array."""
    out = np.empty(sum(p.size for p in parts), np.uint64)
    pos = 0
    for p in parts:
        pos = _put_u64(p, signed, out, pos)
    return out


_GROUPS = ((8, "iu", np.uint64), (4, "i", np.int32), (4, "u", np.uint32), (1, "u", np.uint8))


def split_u64(arrays, names, out: np.ndarray | None = None) -> dict:
    """The named integer fields of structured arrays (same dtype), concatenated, as
    {name: uint64 array}: ``gather_u64`` of many columns at once, in one cache-friendly pass.
    ``out`` (optional, reused to spare page faults) is a 2-D uint64 scratch array of at least
    len(names) x total rows; the returned columns are views into it."""
    dtype = arrays[0].dtype
    total = sum(a.size for a in arrays)
    if out is None or out.shape[0] < len(names) or out.shape[1] < total:
        out = np.empty((len(names), total), np.uint64)
    plan, rest = [], []
    for size, kinds, view in _GROUPS:
        plan.append([k for k, c in enumerate(names) if dtype.fields[c][0].itemsize == size
                     and dtype.fields[c][0].kind in kinds])
    rest = [k for k in range(len(names)) if not any(k in g for g in plan)]
    pos = 0
    for a in arrays:
        if a.dtype != dtype:
            raise ValueError(f"split_u64: mixed dtypes {a.dtype} and {dtype}")
        args = []
        for (size, _, view), ks in zip(_GROUPS, plan):
            views = tuple(a[names[k]].view(view) for k in ks) or (np.zeros(0, view),)
            args += [views, np.array(ks or [0], np.int64)]
        _split_block(*args, a.size, out, pos)
        for k in rest:   # why: widths the schema does not use today (2 bytes) take the slow path
            f = a[names[k]]
            _put_u64(f, f.dtype.kind == "i", out[k], pos)
        pos += a.size
    return {c: out[k, :total] for k, c in enumerate(names)}


def seq_u64(firsts, sizes) -> np.ndarray:
    """The seqs first, first + 1 ... of consecutive batches, as one uint64 array."""
    out = np.empty(int(sum(sizes)), np.uint64)
    pos = 0
    for f, n in zip(firsts, sizes):
        pos = _put_range(f, n, out, pos)
    return out


def take_u64(u: np.ndarray, idx: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """u[idx[lo:hi]] as a new uint64 array."""
    return _take(u, idx, lo, hi)


def _from_u64(u: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.itemsize == 8:
        return u.view(dtype)
    src = u.view(np.int64) if dtype.kind == "i" else u
    return src.astype(dtype)


def _stream_parts(keys: np.ndarray, aligned: int = 0) -> list:
    """A FOR stream as [header bytes, body buffer]: joined once by the caller, so the body
    (the bulk of a block) is copied once instead of once per concatenation."""
    mn, g, width = _stream_params(keys)
    flag = 0
    if aligned and width:
        # why: a general-purpose compressor after us finds far more structure in whole bytes
        width = next(w for w in (8, 16, 32, 64) if w >= width)
        if aligned == SHUFFLED and width > 8:
            flag = SHUFFLE_FLAG
    words = _stream_pack(keys, np.uint64(mn), np.uint64(g), width)
    body = words.view("<u8").view(np.uint8)[:(keys.size * width + 7) // 8]
    if flag:
        # why: byte planes (all low bytes, then all next bytes ...) put the slowly varying
        # high bytes together, where lz4/zstd find long runs (blosc's shuffle)
        body = _byte_shuffle(body, width // 8)
    return [_STREAM_HEAD.pack(int(mn), int(g), width | flag), body]


@njit(cache=True, nogil=True)
def _byte_shuffle(src, k):
    n = src.size // k
    out = np.empty(src.size, np.uint8)
    rows = src[:n * k].reshape(n, k)
    # why blocks copied as strided slices: the block stays in cache while each byte plane is
    # written sequentially, and slice copies compile to tight loops (2-3x a per-byte loop)
    for b in range(0, n, 4096):
        e = min(n, b + 4096)
        for j in range(k):
            out[j * n + b:j * n + e] = rows[b:e, j]
    return out


class _Reader:
    """Cursor over an encoded block; every overrun is a CorruptionError."""

    def __init__(self, buf: bytes, where: str):
        self.buf = memoryview(buf)
        self.pos = 0
        self.where = where

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptionError(f"{self.where}: column block ends early (need {n} bytes at "
                                  f"block offset {self.pos})", self.where, self.pos)
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def stream(self, n: int) -> tuple:
        """The next stream of n values as kernel arguments (body bytes, width, shuffled, min,
        gcd); raises CorruptionError on a bad header or a short body."""
        mn, g, wbyte = _STREAM_HEAD.unpack(self.take(_STREAM_HEAD.size))
        width, shuffled = wbyte & ~SHUFFLE_FLAG, bool(wbyte & SHUFFLE_FLAG)
        if width > 64 or g == 0 or (shuffled and width not in (16, 32, 64)):
            raise CorruptionError(f"{self.where}: bad stream header (width byte {wbyte}, gcd {g})",
                                  self.where, self.pos)
        raw = np.frombuffer(self.take((n * width + 7) // 8), np.uint8)
        raw.flags.writeable = False   # why: one compiled kernel variant whatever the buffer type
        return raw, width, shuffled, np.uint64(mn), np.uint64(g)


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def encode(col: np.ndarray, encoding: int, aligned: int = PACKED) -> bytes:
    """Encode a 1-D integer column with the given encoding.

    ``aligned``: PACKED (0/False) bit-packs at the exact width; ALIGNED (1/True) rounds widths up
    to 8, 16, 32 or 64 bits (better input for lz4/zstd); SHUFFLED (2) also stores such values
    as byte planes. Each stream records its layout, so decoding needs no argument. Returns the block bytes (first byte:
    the encoding). Raises ValueError for a non-integer column or an unknown encoding.
    """
    if col.ndim != 1 or col.dtype.kind not in "iu":
        raise ValueError(f"only 1-D integer columns are encodable, got {col.dtype} ndim {col.ndim}")
    return encode_u64(_as_u64(col), col.dtype, encoding, aligned)


def encode_u64(u: np.ndarray, dtype: np.dtype, encoding: int, aligned: int = PACKED) -> bytes:
    """``encode`` of a column already given as its uint64 bit patterns ``u`` (see gather_u64);
    ``dtype`` is the column's own dtype (signedness, and the width PLAIN stores)."""
    dtype = np.dtype(dtype)
    signed = dtype.kind == "i"
    n = u.size
    head = bytes([encoding])
    # why b"".join of parts: the column's bytes are copied once into the block
    if encoding == PLAIN:
        return b"".join((head, np.ascontiguousarray(_from_u64(u, dtype.newbyteorder("<")))))
    if encoding == FOR:
        return b"".join([head] + _stream_parts(_flip(u, signed), aligned))
    if encoding == DELTA:
        g, z = _diff_zigzag(u, 1)
        first = int(u[0]) if n else 0
        return b"".join([head, _U64.pack(first), _U64.pack(int(g))] + _stream_parts(z, aligned))
    if encoding == DOD:
        g, z = _diff_zigzag(u, 2)
        first = int(u[0]) if n else 0
        d0 = (int(u[1]) - int(u[0])) % (1 << 64) if n > 1 else 0
        return b"".join([head, _U64.pack(first), _U64.pack(d0), _U64.pack(int(g))]
                        + _stream_parts(z, aligned))
    if encoding == RLE:
        vals, lens = _runs(u)
        return b"".join([head, _U32.pack(vals.size)] + _stream_parts(_flip(vals, signed), aligned)
                        + _stream_parts(lens, aligned))
    if encoding == DICT:
        uniq, idx = _dict_index(_flip(u, signed))
        return b"".join([head, _U32.pack(uniq.size)] + _stream_parts(uniq) + _stream_parts(idx, aligned))
    raise ValueError(f"unknown encoding {encoding}")


def decode(block: bytes, n: int, dtype: np.dtype, where: str = "", out: np.ndarray | None = None
           ) -> np.ndarray:
    """Decode a block made by ``encode`` into an array of ``n`` values of ``dtype``.

    ``where`` names the file and column for error messages. ``out`` (optional): a writable,
    contiguous 1-D array of ``n`` values of ``dtype`` to decode into (no allocation); it is
    returned. Returns a new array otherwise. Raises CorruptionError if the block is malformed
    (unknown encoding, too short, indexes out of range), ValueError if ``out`` does not fit.
    """
    dtype = np.dtype(dtype)
    if out is None:
        out = np.empty(n, dtype)
    elif out.dtype != dtype or out.shape != (n,) or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise ValueError(f"decode: out must be a writable contiguous array of {n} {dtype}, got "
                         f"{out.shape} {out.dtype}")
    # why an unsigned view: kernels write uint64 bit patterns, truncated to the column's width
    dst = out.view(_UNSIGNED[dtype.itemsize])
    flip = _SIGN if dtype.kind == "i" else _U0
    r = _Reader(block, where)
    enc = r.take(1)[0]
    if enc == PLAIN:
        dst[:] = np.frombuffer(r.take(n * dtype.itemsize), dst.dtype.newbyteorder("<"))
    elif enc == FOR:
        _dec_for(*r.stream(n), flip, dst)
    elif enc == DELTA:
        first, g = r.u64(), r.u64()
        _dec_delta(*r.stream(max(n - 1, 0)), np.uint64(first), _U0, np.uint64(g), 1, dst)
    elif enc == DOD:
        first, d0, g = r.u64(), r.u64(), r.u64()
        _dec_delta(*r.stream(max(n - 2, 0)), np.uint64(first), np.uint64(d0), np.uint64(g), 2,
                   dst)
    elif enc == RLE:
        nr = r.u32()
        vals, lens = r.stream(nr), r.stream(nr)
        if not _dec_rle(*vals, *lens, nr, flip, dst):
            raise CorruptionError(f"{where}: run lengths do not add up to {n} rows", where, r.pos)
    elif enc == DICT:
        nd = r.u32()
        uniq, idx = r.stream(nd), r.stream(n)
        if not _dec_dict(*uniq, nd, *idx, flip, dst):
            raise CorruptionError(f"{where}: dictionary index out of range", where, r.pos)
    else:
        raise CorruptionError(f"{where}: unknown column encoding {enc}", where, 0)
    if r.pos != len(r.buf):
        raise CorruptionError(f"{where}: {len(r.buf) - r.pos} trailing bytes after column block",
                              where, r.pos)
    return out


# The encoding search lives in store/choice.py; its names stay importable from here.
from store.choice import Chooser, choose, choose_u64  # noqa: E402  (choice imports this module)
