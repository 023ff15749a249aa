"""Reusable per-thread memory for the decoded columns a read copies out before it returns.

A read of rows (``store.read``) decodes each column of its window into an array, then copies
the columns into its rows and drops them. Fresh arrays cost a page fault, and the kernel
zeroing the page, per 4 KiB they touch: decoding a million stored orders (17 columns, ~85 MB)
took 0.078 s, about two thirds of it in the kernel's page handling (`perf`: 55% of the samples
in page faults, clearing and unmapping pages); in memory that stays mapped the same decode
took 0.025 s. So ``read`` borrows this thread's ``Scratch`` for its decoded columns, and the
Scratch keeps its memory between reads.

Invariants: an array ``take`` returns is valid until the ``borrowed`` block that took it ends
(the next read on the thread reuses its memory), so only reads that copy every decoded value
out before they return borrow it; a read nested in another on the same thread (none does
today) gets fresh memory, never the memory in use. A thread keeps at most ``RETAIN_BYTES``
between reads: a larger read takes fresh arrays for what does not fit.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from exsim.exchange.state import CACHE_LINE, zeros_aligned

__all__ = ["Scratch", "borrowed", "RETAIN_BYTES"]

RETAIN_BYTES = 128 << 20   # kept per thread between reads: a read of 1 M orders rows (~86 MB) fits

_local = threading.local()


class Scratch:
    """Arrays carved one after another from one reusable block of memory (see the module)."""

    def __init__(self):
        self._mem = np.zeros(0, np.uint8)
        self._used = 0        # bytes handed out since ``reset``
        self._wanted = 0      # bytes asked for since ``reset`` (fresh ones included)
        self.busy = False

    def take(self, n: int, dtype) -> np.ndarray:
        """Return an uninitialised array of ``n`` values of ``dtype``, from the block when it
        has room, else a fresh one. Raises MemoryError as ``numpy.empty`` does."""
        dtype = np.dtype(dtype)
        size = n * dtype.itemsize
        # every array starts on a cache line (any dtype's alignment)
        start = -(-self._used // CACHE_LINE) * CACHE_LINE
        # counted as if every array came from the block
        self._wanted = -(-self._wanted // CACHE_LINE) * CACHE_LINE + size
        if start + size <= self._mem.size:
            self._used = start + size
            return self._mem[start:start + size].view(dtype)
        return np.empty(n, dtype)

    def reset(self) -> None:
        """Forget every array handed out; grow the block to what the last reads asked for
        (at most RETAIN_BYTES), so the next read of that size takes no fresh memory."""
        want = self._wanted
        if self._mem.size < want <= RETAIN_BYTES:
            # an aligned start, so the aligned offsets above are aligned addresses
            self._mem = zeros_aligned(want, np.uint8)
        self._used = self._wanted = 0


@contextmanager
def borrowed():
    """This thread's Scratch for the duration of the block (a fresh one when it is already in
    use on this thread); its arrays are reused after the block ends."""
    s = getattr(_local, "scratch", None)
    if s is None:
        s = _local.scratch = Scratch()
    if s.busy:
        s = Scratch()
    s.busy = True
    try:
        yield s
    finally:
        s.reset()
        s.busy = False
