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
smallest after compression, searched on a sample, remembered), which builds on this module.
Columns reach the encoders as contiguous arrays (``split_u64``: one cache-blocked pass over a
batch's rows for all its fields): uint8 fields as uint8 columns, all others as uint64 bit
patterns; every kernel reads a value through ``_ld`` (its uint64 bit pattern), so a narrow
column is never widened into a uint64 copy.

Encoding is one kernel call per block (``_encode_block``), written into a reused per-thread
buffer (``encode_view``; ``encode``/``encode_u64`` copy it out): each stream's min, max and gcd
in one pass (the gcd search checks a chunk of values at a time for divisibility by a
multiplication, dividing only when the gcd changes), then the body packed, stored or written
as byte planes straight from the values; exact divisions by the gcd are multiplications too.

Decoding is fused: a bit-packed stream of width 3-57 is read value by value, each value with
one unaligned 8-byte load, and a shuffled one value by value from its byte planes (a loop per
width, which vectorizes); each final value is written straight into the output column in its
own width (``decode(..., out=)`` may supply it). Other layouts (and DOD's shuffled streams) are
unpacked a block of values at a time (byte-aligned widths as plain loads, widths 1/2 word by
word, 58-63 with two word loads) and the block's final values written the same way; a DELTA
stream of width 0 (a constant step) is written without reading it. Run and dictionary
streams are unpacked a block at a time in every layout.

Invariants: kernels are ``@njit(cache=True, nogil=True)`` with no object mode and no per-row
Python; the Python wrappers only assemble and parse headers. A block read back is hostile:
``decode`` checks every length, count and width against the block and the row count before it
allocates or calls a kernel, and the decoding kernels (which have no bounds checks) check each
run length and dictionary index before writing; any failure is a CorruptionError. Byte layouts are in docs/formats.md ("Column block").
"""

from __future__ import annotations

import struct
import threading

import numpy as np
from numba import njit

from exsim.exchange.errors import CorruptionError
from exsim.store.shuffle import _load_u64

__all__ = [
    "PLAIN", "FOR", "DELTA", "DOD", "RLE", "DICT", "ENCODINGS", "ENCODING_NAMES",
    "PACKED", "ALIGNED", "SHUFFLED", "encode", "encode_u64", "encode_view", "decode", "constant", "choose", "choose_u64", "Chooser", "gather_u64", "split_u64", "seq_u64",
    "take_u64", "max_block_len",
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
_BLOCK = 1024   # values (un)packed per step through a small buffer: 8 KiB, stays in L1
# the widest bit-packed value one unaligned 8-byte load always covers: it starts at bit 0-7 of
# its first byte, and 7 + 57 = 64
_ONE_LOAD_WIDTH = 57


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


@njit(cache=True, nogil=True, inline="always")
def _ld(a, i):
    """a[i] as its uint64 bit pattern, for an integer array of any width: narrower signed
    values sign-extend, unsigned ones zero-extend (through int64: one instruction, or none for
    8-byte values). Why: the encoders read a narrow column (split_u64's uint8 columns) as it
    is, instead of a uint64 copy of it."""
    return np.uint64(np.int64(a[i]))


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


# ---------------------------------------------------------------------------------------------
# encoding kernels: a column block is written by ONE kernel call (``_encode_block``) straight
# into a reused byte buffer: stream parameters in one pass, then the body packed, shuffled or
# stored in place (no whole-column temporaries except the differences / runs of DELTA, DOD and
# RLE, which go to a reused scratch array). Exact divisions by a stream's gcd and the
# divisibility tests of the gcd search are multiplications by the gcd's odd part's inverse:
# a 64-bit divide per value cost more than everything else together.
# ---------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
def _multiples(keys, flip, k0, s, e, low, sh, inv, lim):
    """(all of |keys[s:e] ^ flip - k0| are multiples of the divider's g, their min, their max):
    branch-free, so the loop vectorizes."""
    bad = _U0
    mn = _ld(keys, s) ^ flip
    mx = mn
    ks = keys[s:e]   # why a slice: indexes from 0 need no negative-index fix-up (vectorizes)
    for j in range(ks.size):
        x = _ld(ks, j) ^ flip
        mn = min(mn, x)
        mx = max(mx, x)
        m = x - k0 if x >= k0 else k0 - x
        bad |= (m & low) | np.uint64(((m >> sh) * inv) > lim)
    return bad == _U0, mn, mx


@njit(cache=True, nogil=True)
def _stats(keys, flip):
    """(min, gcd, width) of the FOR stream over keys ^ flip: one pass. The gcd of the keys'
    distances from the first key equals that of their distances from the minimum (both generate
    the same multiples), so it needs no second pass; gcd 1 when all keys are equal."""
    n = keys.size
    if n == 0:
        return _U0, _U1, 0
    k0 = _ld(keys, 0) ^ flip
    mn = k0
    mx = k0
    g, sh, low, inv, lim = _U0, _U0, _U0, _U1, _U0
    s = 0
    while s < n and g != _U1:
        # why chunks: a chunk whose values are all multiples of the gcd so far (the common
        # case once the gcd has settled) costs a vectorized pass; only the others take the
        # per-value slow path
        e = min(n, s + _CHUNK)
        ok, cmn, cmx = _multiples(keys, flip, k0, s, e, low, sh, inv, lim)
        mn = min(mn, cmn)
        mx = max(mx, cmx)
        if not ok:
            for j in range(s, e):
                x = _ld(keys, j) ^ flip
                g, sh, low, inv, lim = _gcd_step(g, x - k0 if x >= k0 else k0 - x,
                                                 sh, low, inv, lim)
        s = e
    for j in range(s, n):   # the gcd is 1: a plain min/max loop
        x = _ld(keys, j) ^ flip
        mn = min(mn, x)
        mx = max(mx, x)
    if g == _U0:
        g = _U1
    return mn, g, _bit_width((mx - mn) // g)


@njit(cache=True, nogil=True, inline="always")
def _put_word(out, pos, v):
    out[pos:pos + 8].view(np.uint64)[0] = v
    return pos + 8


@njit(cache=True, nogil=True)
def _put_stream(keys, flip, aligned, out, pos):
    """Write the FOR stream of keys ^ flip (header: min, gcd, width byte; then the body in the
    ``aligned`` layout) at out[pos:]; returns the position after it."""
    mn, g, width = _stats(keys, flip)
    shuffled = False
    if aligned != PACKED and width:
        # why: a general-purpose compressor after us finds far more structure in whole bytes
        width = 8 if width <= 8 else 16 if width <= 16 else 32 if width <= 32 else 64
        shuffled = aligned == SHUFFLED and width > 8
    pos = _put_word(out, pos, mn)
    pos = _put_word(out, pos, g)
    out[pos] = np.uint8(width | SHUFFLE_FLAG) if shuffled else np.uint8(width)
    pos += 1
    n = keys.size
    if width == 0 or n == 0:
        return pos
    sh, inv, _ = _divider(g)     # g == 1: shift 0, inverse 1
    if shuffled:
        # why byte planes (all low bytes, then all next bytes ...): they put the slowly varying
        # high bytes together, where lz4/zstd find long runs (blosc's shuffle); written
        # straight from the values, one sequential stream per plane
        k = width // 8
        q = np.empty(min(n, _BLOCK), np.uint64)
        for s in range(0, n, _BLOCK):
            e = min(n, s + _BLOCK)
            ks = keys[s:e]
            for j in range(e - s):
                q[j] = (((_ld(ks, j) ^ flip) - mn) >> sh) * inv
            for b in range(k):   # why a block at a time: each plane loop vectorizes
                plane = out[pos + b * n + s:pos + b * n + e]
                bs = np.uint64(8 * b)
                for j in range(e - s):
                    plane[j] = np.uint8(q[j] >> bs)
        return pos + n * (width // 8)
    if width == 8:
        w8 = out[pos:pos + n]
        for i in range(n):
            w8[i] = np.uint8((((_ld(keys, i) ^ flip) - mn) >> sh) * inv)
    elif width == 16:
        w16 = out[pos:pos + 2 * n].view(np.uint16)
        for i in range(n):
            w16[i] = np.uint16((((_ld(keys, i) ^ flip) - mn) >> sh) * inv)
    elif width == 32:
        w32 = out[pos:pos + 4 * n].view(np.uint32)
        for i in range(n):
            w32[i] = np.uint32((((_ld(keys, i) ^ flip) - mn) >> sh) * inv)
    elif width == 64:
        w64 = out[pos:pos + 8 * n].view(np.uint64)
        for i in range(n):
            w64[i] = (((_ld(keys, i) ^ flip) - mn) >> sh) * inv
    else:
        # bit-packed LSB first: a 64-bit accumulator flushed a word at a time, then the
        # tail's bytes (the body is exactly ceil(n * width / 8) bytes)
        words = out[pos:pos + 8 * ((n * width) // 64)].view(np.uint64)
        acc = _U0
        bits = 0
        w = 0
        for i in range(n):
            v = (((_ld(keys, i) ^ flip) - mn) >> sh) * inv
            acc |= v << np.uint64(bits)
            bits += width
            if bits >= 64:
                words[w] = acc
                w += 1
                bits -= 64
                acc = (v >> np.uint64(width - bits)) if bits > 0 else _U0
        p = pos + 8 * w
        for b in range((bits + 7) // 8):
            out[p + b] = np.uint8(acc >> np.uint64(8 * b))
    return pos + (n * width + 7) // 8


@njit(cache=True, nogil=True, inline="always")
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
def _runs(u, vals, lens):
    """Run values and run lengths of u into vals[:nr], lens[:nr]; returns nr."""
    n = u.size
    if n == 0:
        return 0
    # why branch-free: run ends are unpredictable in mostly-distinct columns (events.seq);
    # each row rewrites its run's value and last row, the run's last row leaves the final ones
    r = 0
    prev = _ld(u, 0)
    vals[0] = prev
    lens[0] = _U0
    for i in range(1, n):
        x = _ld(u, i)
        r += x != prev
        vals[r] = x
        lens[r] = np.uint64(i)
        prev = x
    prev = _ALL                  # last rows -> lengths (row -1 ends the empty run before)
    for k in range(r + 1):
        last = lens[k]
        lens[k] = last - prev
        prev = last
    return r + 1


@njit(cache=True, nogil=True)
def _encode_block(u, enc, aligned, flip, itemsize, out, tmp):
    """Write the block of column u (uint64 bit patterns; flip: the sign bit for signed columns,
    itemsize: the column's width) in encoding ``enc`` and stream layout ``aligned`` at out[0:];
    returns its length, or -1 for an unknown encoding. out holds at least 16 * u.size + 64
    bytes, tmp (scratch) at least 2 * u.size values."""
    n = u.size
    out[0] = np.uint8(enc)
    pos = 1
    if enc == PLAIN:
        if itemsize == 8:
            dst8 = out[1:1 + 8 * n].view(np.uint64)
            for i in range(n):
                dst8[i] = _ld(u, i)
        elif itemsize == 4:
            dst4 = out[1:1 + 4 * n].view(np.uint32)
            for i in range(n):
                dst4[i] = np.uint32(_ld(u, i))
        elif itemsize == 2:
            dst2 = out[1:1 + 2 * n].view(np.uint16)
            for i in range(n):
                dst2[i] = np.uint16(_ld(u, i))
        else:
            for i in range(n):
                out[1 + i] = np.uint8(_ld(u, i))
        return 1 + itemsize * n
    if enc == FOR:
        return _put_stream(u, flip, aligned, out, pos)
    if enc == DELTA or enc == DOD:
        order = 1 if enc == DELTA else 2
        pos = _put_word(out, pos, _ld(u, 0) if n else _U0)
        if order == 2:
            pos = _put_word(out, pos, _ld(u, 1) - _ld(u, 0) if n > 1 else _U0)
        g, m = _diffs(u, order, tmp)
        pos = _put_word(out, pos, g)
        return _put_stream(tmp[:m], _U0, aligned, out, pos)
    if enc == RLE:
        nr = _runs(u, tmp[:n], tmp[n:2 * n])
        out[pos:pos + 4].view(np.uint32)[0] = np.uint32(nr)
        pos = _put_stream(tmp[:nr], flip, aligned, out, pos + 4)
        return _put_stream(tmp[n:n + nr], _U0, aligned, out, pos)
    if enc == DICT:
        # why the keys into tmp's upper half: one contiguous uint64 input for _dict_index
        # whatever the column's width (its indexes go to the lower half)
        keys = tmp[n:2 * n]
        for i in range(n):
            keys[i] = _ld(u, i) ^ flip
        uniq = _dict_index(keys, tmp[:n])
        out[pos:pos + 4].view(np.uint32)[0] = np.uint32(uniq.size)
        pos = _put_stream(uniq, _U0, PACKED, out, pos + 4)
        return _put_stream(tmp[:n], _U0, aligned, out, pos)
    return -1


# ---------------------------------------------------------------------------------------------
# decoding kernels: each stream is unpacked BLOCK values at a time into a small cache-resident
# buffer, and the block's final values (times gcd plus min, un-delta'd, looked up ...) are written
# straight into the caller's output in its own width: one pass over memory, no whole-column
# temporaries, no casts afterwards.
# ---------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _stream_words(raw, width, shuffled):
    """The stream body as uint64 words plus at least one zero word (so every value can be read
    with two word loads, or one unaligned 8-byte load at any byte of the body, and no bounds
    test), for the layouts read word-wise: bit-packed and byte-aligned-unshuffled widths
    16/32/64. Other layouts are read from ``raw`` directly."""
    if shuffled or width == 0 or width == 8:
        return np.zeros(1, np.uint64)
    nw = raw.size // 8 + 2
    words = np.empty(nw, np.uint64)
    words[raw.size // 8:] = _U0
    words.view(np.uint8)[:raw.size] = raw
    return words


@njit(cache=True, nogil=True, inline="always")
def _packed_at(b8, bit, mask):
    """The bit-packed value starting at bit ``bit`` of the stream bytes ``b8``, for widths up
    to _ONE_LOAD_WIDTH: one unaligned 8-byte load holds all of its bits (the caller keeps the
    load inside ``b8``: ``_loadable``)."""
    return (_load_u64(b8, bit >> 3) >> np.uint64(bit & 7)) & mask


@njit(cache=True, nogil=True, inline="always")
def _packed_tail(raw, bit, mask):
    """``_packed_at`` for a value near the end of ``raw``, whose 8-byte load would run past
    it: the bytes that exist, one at a time."""
    k = bit >> 3
    v = _U0
    for b in range(min(8, raw.size - k)):
        v |= np.uint64(raw[k + b]) << np.uint64(8 * b)
    return (v >> np.uint64(bit & 7)) & mask


@njit(cache=True, nogil=True, inline="always")
def _planes(raw, nv, i, nb):
    """Value i of a shuffled stream of nv values of nb bytes (byte b of value i is
    raw[b * nv + i]). Called with a literal nb, so each caller's loop is unrolled and
    vectorizes (4-7x the plane-by-plane form)."""
    v = np.uint64(raw[i])
    for b in range(1, nb):
        v |= np.uint64(raw[b * nv + i]) << np.uint64(8 * b)
    return v


@njit(cache=True, nogil=True, inline="always")
def _unzigzag(z):
    """The signed difference (as its uint64 bit pattern) a zigzagged value stands for."""
    return (z >> _U1) ^ (_U0 - (z & _U1))


@njit(cache=True, nogil=True, inline="always")
def _loadable(size, width, n):
    """How many of a stream's first values (of n, ``width`` bits each, in ``size`` bytes) can be
    read with one 8-byte load that stays inside the bytes: value i's load ends at byte
    (i * width >> 3) + 8."""
    if size < 8:
        return 0
    return min(n, ((size - 8) * 8 + 7) // width + 1)


@njit(cache=True, nogil=True, inline="always")
def _one_pass(width, shuffled):
    """Whether a stream of this layout is decoded value by value straight into the output
    (bit-packed widths that one unaligned load covers; widths 1 and 2, read word by word, byte
    widths and byte planes are read a block at a time, which is as fast or faster)."""
    return (not shuffled and 2 < width <= _ONE_LOAD_WIDTH and width != 8 and width != 16
            and width != 32)


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
        # why a loop per width (the only shuffled widths are 16, 32 and 64): with the byte
        # count a constant each loop vectorizes
        if width == 16:
            for j in range(m):
                q[j] = _planes(raw, n, s + j, 2)
        elif width == 32:
            for j in range(m):
                q[j] = _planes(raw, n, s + j, 4)
        else:
            for j in range(m):
                q[j] = _planes(raw, n, s + j, 8)
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
    elif width <= _ONE_LOAD_WIDTH:
        b8 = words.view(np.uint8)
        mask = (_U1 << np.uint64(width)) - _U1
        for j in range(m):
            q[j] = _packed_at(b8, (s + j) * width, mask)
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
    if _one_pass(width, shuffled):
        # why straight from raw: no padded copy of the stream to allocate and fill, which
        # cost a third as much as the decoding itself
        mask = (_U1 << np.uint64(width)) - _U1
        safe = _loadable(raw.size, width, n)
        for i in range(safe):
            out[i] = (_packed_at(raw, i * width, mask) * g + mn) ^ flip
        for i in range(safe, n):
            out[i] = (_packed_tail(raw, i * width, mask) * g + mn) ^ flip
        return
    if shuffled:
        if width == 16:
            for i in range(n):
                out[i] = (_planes(raw, n, i, 2) * g + mn) ^ flip
        elif width == 32:
            for i in range(n):
                out[i] = (_planes(raw, n, i, 4) * g + mn) ^ flip
        else:
            for i in range(n):
                out[i] = (_planes(raw, n, i, 8) * g + mn) ^ flip
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


@njit(cache=True, nogil=True)
def _dec_rle(vraw, vw, vsh, vmn, vg, lraw, lw, lsh, lmn, lg, nr, flip, out):
    """Expand nr runs (values stream, lengths stream) into out. Returns True when the runs fill
    out exactly; False (nothing past out written) if a run is empty, runs past the column, or
    the lengths end short of it.
    Why the check reads ``ln > n - p`` and never ``p + ln > n``: a stored length near 2**63
    wraps the sum and the run is written past the column; here 0 <= p <= n always holds, so
    n - p cannot wrap, and a stored length >= 2**63 is negative as an int64 and fails ``ln < 1``.
    Why a bool and not the bad run's index: returning the index cost 6% of the decode (and
    the dictionary kernel's 9%), measured; the wrapper's message names the block instead."""
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
            if ln < 1 or ln > n - p:
                return False
            for i in range(p, p + ln):
                out[i] = v
            p += ln
    return p == n


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
    """The seqs first, first + 1 ... of consecutive batches, as one uint64 array."""
    out = np.empty(int(sum(sizes)), np.uint64)
    pos = 0
    for f, n in zip(firsts, sizes):
        pos = _put_range(f, n, out, pos)
    return out


def take_u64(u: np.ndarray, idx: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """u[idx[lo:hi]] as a new contiguous uint64 array of bit patterns; ``u`` is an integer
    column of any width and stride (a ``split_u64`` field view, signed ones sign-extended)."""
    return _take(u, idx, lo, hi)


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

    def end(self) -> None:
        """Raise CorruptionError unless every byte of the block was taken."""
        if self.pos != len(self.buf):
            raise CorruptionError(f"{self.where}: {len(self.buf) - self.pos} trailing bytes after "
                                  f"column block", self.where, self.pos)

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
    """``encode`` of a column already given as its uint64 bit patterns ``u`` (see gather_u64;
    or as a field view, see ``encode_view``);
    ``dtype`` is the column's own dtype (signedness, and the width PLAIN stores). Returns the
    block bytes; raises ValueError for an unknown encoding."""
    return bytes(encode_view(u, dtype, encoding, aligned))


_local = threading.local()


def encode_view(u: np.ndarray, dtype: np.dtype, encoding: int, aligned: int = PACKED) -> memoryview:
    """``encode_u64`` without the copy: the block as a memoryview of this thread's reused
    buffer, valid until the next encode on this thread (copy it, compress it or checksum it
    before then). ``u`` is a 1-D integer array: uint64 bit patterns, or the column in a width
    of its own (e.g. a ``split_u64`` column), read as the bit patterns of its values (signed
    ones sign-extended; those, and strided columns, are first copied to uint64). Raises ValueError for an unknown encoding or a
    column that is not a 1-D integer array."""
    dtype = np.dtype(dtype)
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding}")
    if u.ndim != 1 or u.dtype.kind not in "iu" or u.dtype.itemsize not in (1, 2, 4, 8):
        raise ValueError(f"encode_view takes a 1-D integer column (uint64 bit patterns or a field "
                         f"view), got {u.dtype} ndim {u.ndim}")
    if u.dtype.kind == "i" or not u.flags.c_contiguous:
        # why a uint64 copy (or view) for these: the kernels are compiled for contiguous
        # unsigned columns only (each further column type is another compiled variant)
        u = _as_u64(u)
    n = u.size
    bufs = getattr(_local, "bufs", None)
    if bufs is None or bufs[1].size < 2 * n:
        # why reused and grown by a quarter: fresh pages fault on first write, and a seal
        # encodes ~40 columns of similar length in a row
        m = 2 * n + n // 2 + 1024
        bufs = _local.bufs = (np.empty(8 * m + 64, np.uint8), np.empty(m, np.uint64))
    size = _encode_block(u, encoding, aligned, _SIGN if dtype.kind == "i" else _U0,
                         dtype.itemsize, bufs[0], bufs[1])
    return memoryview(bufs[0])[:size]


# the fixed bytes in front of each encoding's streams (encoding byte included), and its streams
_FIXED = {FOR: (1, 1), DELTA: (17, 1), DOD: (25, 1), RLE: (5, 2), DICT: (5, 2)}


def max_block_len(encoding: int, n: int, itemsize: int) -> int:
    """The most bytes a valid block of ``encoding`` holding ``n`` values of ``itemsize`` bytes
    can have (its exact length for PLAIN): the bound a reader checks a block's declared length
    against before decompressing or allocating anything. Every stream of m <= n values holds at
    most 8 bytes per value plus its 17-byte header (run and dictionary counts never exceed n).
    Returns -1 for an unknown encoding."""
    if encoding == PLAIN:
        return 1 + n * itemsize
    if encoding not in _FIXED:
        return -1
    fixed, streams = _FIXED[encoding]
    return fixed + streams * (_STREAM_HEAD.size + 8 * n)


def constant(block: bytes, n: int, dtype: np.dtype, where: str = "") -> int | None:
    """The value every one of the ``n`` rows of a block made by ``encode`` holds, or None when
    they differ or the block is neither PLAIN nor FOR (a constant column of another encoding is
    not recognised: None). A FOR block answers from its stream header (width 0: every row is
    its minimum), a PLAIN one from comparing its values; nothing is decoded. Raises as
    ``decode`` for a block ``decode`` would refuse (its header and length are checked the same
    way)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or dtype.itemsize not in _UNSIGNED:
        raise ValueError(f"constant: {dtype} is not a 1, 2, 4 or 8-byte integer type")
    r = _Reader(block, where)
    enc = r.take(1)[0] if n > 0 else None
    if enc == PLAIN:
        vals = np.frombuffer(r.take(n * dtype.itemsize), dtype.newbyteorder("<"))
    elif enc == FOR:
        _, width, _, mn, _ = r.stream(n)
    else:
        return None
    r.end()
    if enc == PLAIN:
        return int(vals[0]) if (vals == vals[0]).all() else None
    if width != 0:
        return None
    flip = _SIGN if dtype.kind == "i" else _U0
    # the value as decode writes it: the key un-flipped, its bit pattern truncated to the
    # column's width, read as the column's type
    bits = np.array([mn ^ flip], np.uint64).astype(_UNSIGNED[dtype.itemsize])
    return int(bits.view(dtype)[0])


def decode(block: bytes, n: int, dtype: np.dtype, where: str = "", out: np.ndarray | None = None
           ) -> np.ndarray:
    """Decode a block made by ``encode`` into an array of ``n`` values of ``dtype``.

    ``where`` names the file and column for error messages. ``out`` (optional): a writable,
    contiguous 1-D array of ``n`` values of ``dtype`` to decode into (no allocation); it is
    returned. Returns a new array otherwise. Raises CorruptionError naming ``where`` if the
    block is malformed (unknown encoding, too short or too long for ``n`` values, a bad stream
    width or gcd, run or dictionary counts above ``n``, run lengths that do not add up to ``n``,
    indexes out of range); ValueError if ``n`` is negative, ``dtype`` is not a 1, 2, 4 or
    8-byte integer type, or ``out`` does not fit.

    Every length, count and width is checked against the block and ``n`` (Python integers:
    no overflow) before the output is allocated or a kernel runs; what only a kernel can see
    (each run length, each dictionary index) it checks before writing and reports by returning
    False, which becomes the CorruptionError.
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or dtype.itemsize not in _UNSIGNED:
        raise ValueError(f"decode: {dtype} is not a 1, 2, 4 or 8-byte integer type")
    if n < 0:
        raise ValueError(f"decode: negative row count {n}")
    if out is not None and (out.dtype != dtype or out.shape != (n,) or not out.flags.c_contiguous
                            or not out.flags.writeable):
        raise ValueError(f"decode: out must be a writable contiguous array of {n} {dtype}, got "
                         f"{out.shape} {out.dtype}")
    flip = _SIGN if dtype.kind == "i" else _U0
    r = _Reader(block, where)
    enc = r.take(1)[0]
    # parse every header and take every stream's body first: a block too short or too long
    # for n values fails here, before n values are allocated
    if enc == PLAIN:
        body = r.take(n * dtype.itemsize)
    elif enc == FOR:
        streams = (r.stream(n),)
    elif enc == DELTA:
        first, g = r.u64(), r.u64()
        streams = (r.stream(max(n - 1, 0)),)
    elif enc == DOD:
        first, d0, g = r.u64(), r.u64(), r.u64()
        streams = (r.stream(max(n - 2, 0)),)
    elif enc == RLE:
        nr = r.u32()
        if nr > n or (nr == 0) != (n == 0):
            # why: every run holds at least one row (the encoder writes no empty run)
            raise CorruptionError(f"{where}: {nr} runs for {n} rows", where, 1)
        streams = (r.stream(nr), r.stream(nr))
    elif enc == DICT:
        nd = r.u32()
        if nd > n or (nd == 0) != (n == 0):
            raise CorruptionError(f"{where}: dictionary of {nd} values for {n} rows", where, 1)
        streams = (r.stream(nd), r.stream(n))
    else:
        raise CorruptionError(f"{where}: unknown column encoding {enc}", where, 0)
    r.end()
    if out is None:
        out = np.empty(n, dtype)
    # why an unsigned view: kernels write uint64 bit patterns, truncated to the column's width
    dst = out.view(_UNSIGNED[dtype.itemsize])
    if enc == PLAIN:
        dst[:] = np.frombuffer(body, dst.dtype.newbyteorder("<"))
    elif enc == FOR:
        _dec_for(*streams[0], flip, dst)
    elif enc == DELTA:
        _dec_delta(*streams[0], np.uint64(first), _U0, np.uint64(g), 1, dst)
    elif enc == DOD:
        _dec_delta(*streams[0], np.uint64(first), np.uint64(d0), np.uint64(g), 2, dst)
    elif enc == RLE:
        if not _dec_rle(*streams[0], *streams[1], nr, flip, dst):
            raise CorruptionError(f"{where}: run lengths do not add up to {n} rows (a run is "
                                  f"empty, runs past the column or they end short)", where, r.pos)
    elif not _dec_dict(*streams[0], nd, *streams[1], flip, dst):
        raise CorruptionError(f"{where}: dictionary index out of range (dictionary of {nd} "
                              f"values)", where, r.pos)
    return out

