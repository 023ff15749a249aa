"""RLE: a column as its run values and run lengths, each a stream.

The block holds the run count (u32), then the run values as a FOR stream (keys, like FOR) and the
run lengths as another (store.codecs.stream). ``_runs`` finds the runs in one branch-free pass;
``_dec_rle`` expands them into the output column, unpacking both streams a block at a time.

Invariants: the encoder writes no empty run, so a block of n rows holds between 1 and n runs
(none when n is 0). A block read back is hostile: ``_dec_rle`` checks each run length before
writing and returns False for a run that is empty or runs past the column, or lengths that end
short of it; nothing past the output is written. Kernels are ``@njit(cache=True, nogil=True)``;
they call ``arith`` and ``stream`` code, hence the cache guard.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.store.codecs.arith import _ALL, _U0, _ld
from exsim.store.codecs.stream import _BLOCK, _put_stream, _stream_words, _unpack_block

__all__: list[str] = []

guard(__name__, __file__, deps=("exsim.store.codecs.arith", "exsim.store.codecs.stream"))


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
def _put_rle(u, flip, aligned, out, pos, tmp):
    """Write the run values' and run lengths' streams at out[pos:] (the caller writes the run
    count before them); returns (runs, the position after them). tmp: scratch of at least
    2 * u.size values. One kernel: one dispatch per block."""
    n = u.size
    nr = _runs(u, tmp[:n], tmp[n:2 * n])
    pos = _put_stream(tmp[:nr], flip, aligned, out, pos)
    return nr, _put_stream(tmp[n:n + nr], _U0, aligned, out, pos)


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
