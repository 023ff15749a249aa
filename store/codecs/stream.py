"""The stream every encoding is built of: frame of reference, bit-packed in one of three layouts.

A stream of m values is: u64 min, u64 gcd, one width byte, then the body, (key - min) / gcd for
each value bit-packed at the width of the largest quotient. For FOR, the stream of a column,
``key`` is the value with its sign bit flipped for signed columns, so min/max follow the signed
order; DELTA, DOD, RLE and DICT store their zigzagged differences, runs and indexes as streams
too. The body has one of three layouts (the ``aligned`` argument): ``PACKED`` exact width, LSB
first; ``ALIGNED`` width rounded up to 8, 16, 32 or 64 bits; ``SHUFFLED`` aligned and stored as
byte planes (flag 0x80 in the width byte, widths 16-64). Decoding reads the layout from the
stream.

Writing (``_put_stream``): each stream's min, max and gcd in one pass (``_stats``: the gcd search
checks a chunk of values at a time for divisibility by a multiplication, dividing only when the
gcd changes), then the body packed, stored or written as byte planes straight from the values;
exact divisions by the gcd are multiplications too.

Reading is fused: a bit-packed stream of width 3-57 is read value by value, each value with one
unaligned 8-byte load (``_packed_at``), and a shuffled one value by value from its byte planes
(a loop per width, which vectorizes). Other layouts are unpacked ``_BLOCK`` values at a time
(``_unpack_block``: byte-aligned widths as plain loads, widths 1/2/4 word by word, 58-63 with
two word loads) into a small cache-resident buffer; the final values (times gcd plus min,
un-delta'd, looked up ...) are written straight into the caller's output in its own width: one
pass over memory, no whole-column temporaries, no casts afterwards.

Invariants: a body is exactly ceil(m * width / 8) bytes. The readers have no bounds checks: the
block parser (``block._Reader.stream``) checks the header (width <= 64, gcd != 0, the shuffle
flag only on widths 16, 32 and 64) and the body's length before a reader runs, and every load
stays inside the body (``_loadable``, ``_packed_tail``) or its zero-padded copy
(``_stream_words``). Kernels are ``@njit(cache=True, nogil=True)``; they call ``arith``'s
helpers and ``store.shuffle._load_u64``, hence the cache guard.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.store.codecs.arith import _ALL, _CHUNK, _U0, _U1, _U63, _bit_width, _divider, _gcd_step, _ld
from exsim.store.shuffle import _load_u64

__all__ = ["PACKED", "ALIGNED", "SHUFFLED", "SHUFFLE_FLAG"]

guard(__name__, __file__, deps=("exsim.store.codecs.arith", "exsim.store.shuffle"))

# Stream layouts ("aligned" argument): bit-packed at the exact width, at a byte-aligned width,
# or byte-aligned and byte-shuffled (flag bit 0x80 of the stream's width byte; widths 16-64).
PACKED, ALIGNED, SHUFFLED = 0, 1, 2
SHUFFLE_FLAG = 0x80
_STREAM_HEAD = struct.Struct("<QQB")   # min, gcd, width
_BLOCK = 1024   # values (un)packed per step through a small buffer: 8 KiB, stays in L1
# the widest bit-packed value one unaligned 8-byte load always covers: it starts at bit 0-7 of
# its first byte, and 7 + 57 = 64
_ONE_LOAD_WIDTH = 57


@njit(cache=True, nogil=True)
def _multiples(ks, flip, k0, low, sh, inv, lim):
    """(all of |ks ^ flip - k0| are multiples of the divider's g, their min, their max), ks
    not empty: branch-free, so the loop vectorizes. Why a slice and no start index: indexes
    from 0 need no negative-index fix-up (vectorizes), and a literal start (the first chunk's
    0) compiled a second variant of this function."""
    bad = _U0
    mn = _ld(ks, ks.size - 1) ^ flip
    mx = mn
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
        ok, cmn, cmx = _multiples(keys[s:e], flip, k0, low, sh, inv, lim)
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


@njit(cache=True, nogil=True)
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
    b8 = words.view(np.uint8)
    # why a loop and not a slice assignment: numba compiles a slice assignment's shape check
    # with its error message formatting, ~2.5 s of CPU on a cold cache, for a plain copy
    for i in range(raw.size):
        b8[i] = raw[i]
    return words


@njit(cache=True, nogil=True)
def _packed_at(b8, bit, mask):
    """The bit-packed value starting at bit ``bit`` of the stream bytes ``b8``, for widths up
    to _ONE_LOAD_WIDTH: one unaligned 8-byte load holds all of its bits (the caller keeps the
    load inside ``b8``: ``_loadable``)."""
    return (_load_u64(b8, bit >> 3) >> np.uint64(bit & 7)) & mask


@njit(cache=True, nogil=True)
def _packed_tail(raw, bit, mask):
    """``_packed_at`` for a value near the end of ``raw``, whose 8-byte load would run past
    it: the bytes that exist, one at a time."""
    k = bit >> 3
    v = _U0
    for b in range(min(8, raw.size - k)):
        v |= np.uint64(raw[k + b]) << np.uint64(8 * b)
    return (v >> np.uint64(bit & 7)) & mask


@njit(cache=True, nogil=True)
def _planes(raw, nv, i, nb):
    """Value i of a shuffled stream of nv values of nb bytes (byte b of value i is
    raw[b * nv + i]). Called with a literal nb, so each caller's loop is unrolled and
    vectorizes (4-7x the plane-by-plane form)."""
    v = np.uint64(raw[i])
    for b in range(1, nb):
        v |= np.uint64(raw[b * nv + i]) << np.uint64(8 * b)
    return v


@njit(cache=True, nogil=True)
def _loadable(size, width, n):
    """How many of a stream's first values (of n, ``width`` bits each, in ``size`` bytes) can be
    read with one 8-byte load that stays inside the bytes: value i's load ends at byte
    (i * width >> 3) + 8."""
    if size < 8:
        return 0
    return min(n, ((size - 8) * 8 + 7) // width + 1)


@njit(cache=True, nogil=True)
def _one_pass(width, shuffled):
    """Whether a stream of this layout is decoded value by value straight into the output
    (bit-packed widths that one unaligned load covers; widths 1 and 2, read word by word, byte
    widths and byte planes are read a block at a time, which is as fast or faster)."""
    return (not shuffled and 2 < width <= _ONE_LOAD_WIDTH and width != 8 and width != 16
            and width != 32)


@njit(cache=True, nogil=True)
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
