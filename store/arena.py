"""Private copies of batch rows for the session, carved out of large reused chunks.

Invariants:
- Every copy handed out is a read-only view whose ``base`` is its chunk; a chunk is reused only
  once nothing refers to it (its reference count says so), so nobody ever sees the bytes of a
  copy change under them.
- ``TableRows`` appends one table's rows slice by slice into room reserved in a chunk (copied
  there, or written there in place by whoever fills ``room()``); rows that do not fit are copied
  apart and joined by one more copy at the end, so the result is always the rows end to end, in
  order.
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["Arena", "TableRows"]


class Arena:
    """Private copies of batch arrays, carved out of large chunks that are reused.

    Why: a fresh array per copy costs a page fault per 4 KiB on first write, which made copying
    a batch's rows ~10x slower than the copy itself (the biggest single cost of journaling).
    A full chunk is reused only once nothing refers to it any more: every copy handed out is a
    view whose ``base`` is its chunk, so the chunk's reference count says whether any record,
    caller's Result or slice of one is still alive. Nobody ever sees a reused chunk's bytes
    change under them.
    """

    CHUNK = 32 << 20
    KEEP = 6          # retired chunks kept for reuse; older ones are left to the views' owners

    def __init__(self, chunk: int = CHUNK):
        self.chunk = chunk
        self._cur = np.empty(0, np.uint8)
        self._pos = 0
        self._retired: list[np.ndarray] = []
        probe = [np.empty(1, np.uint8)]
        self._free_refs = sys.getrefcount(probe[0])   # refs of a list entry nobody views

    def copy(self, a: np.ndarray) -> np.ndarray:
        """Return a read-only copy of the 1-D array ``a`` (same dtype) inside a chunk."""
        return self.concat([a])

    def concat(self, arrays: list) -> np.ndarray:
        """Return a read-only copy of the 1-D arrays (one dtype) end to end inside a chunk."""
        dtype = arrays[0].dtype
        n = sum(a.nbytes for a in arrays)
        if n == 0:
            out = np.empty(0, dtype)
            out.flags.writeable = False
            return out
        if self._pos + n > self._cur.size:
            self._next(n)
        dst = self._cur[self._pos:self._pos + n]
        at = 0
        for a in arrays:
            part = dst[at:at + a.nbytes]
            if a.flags.c_contiguous:
                # why bytes: a structured copyto goes field by field, 10x slower than memcpy
                np.copyto(part, a.view(np.uint8).reshape(-1))
            else:
                np.copyto(part.view(dtype), a, casting="no")
            at += a.nbytes
        self._pos += (n + 7) & ~7
        out = dst.view(dtype)
        out.flags.writeable = False
        return out

    def reserve(self, n: int) -> np.ndarray:
        """Return a writable uint8 view of ``n`` bytes inside a chunk, for rows copied in
        piece by piece (views of it are the copies handed out; make them read-only)."""
        if self._pos + n > self._cur.size:
            self._next(n)
        out = self._cur[self._pos:self._pos + n]
        self._pos += (n + 7) & ~7
        return out

    def _next(self, n: int) -> None:
        if self._cur.size == self.chunk:
            self._retired.append(self._cur)
        self._cur, self._pos = None, 0
        for i in range(len(self._retired)):
            if self._retired[i].size >= n and sys.getrefcount(self._retired[i]) == self._free_refs:
                self._cur = self._retired.pop(i)
                break
        if self._cur is None:
            self._cur = np.empty(max(self.chunk, n), np.uint8)
        del self._retired[:-self.KEEP]


class TableRows:
    """One table's rows of a batch, appended slice by slice into room reserved in an arena."""

    def __init__(self, arena: Arena, dtype: np.dtype, room: int):
        self.arena, self.dtype = arena, dtype
        self.buf = arena.reserve(room * dtype.itemsize)
        self.size = 0
        self.extra: list = []   # copies of slices that did not fit

    def add(self, a: np.ndarray) -> np.ndarray:
        """Copy the rows ``a`` after the previous ones (as this table's dtype); return the copy."""
        if a.dtype != self.dtype:
            a = a.astype(self.dtype)
        n = a.nbytes
        if self.extra or self.size * self.dtype.itemsize + n > self.buf.size:
            self.extra.append(self.arena.copy(a))
            self.size += a.size
            return self.extra[-1]
        at = self.size * self.dtype.itemsize
        dst = self.buf[at:at + n]
        if a.flags.c_contiguous:
            np.copyto(dst, a.view(np.uint8).reshape(-1))
        else:
            np.copyto(dst.view(self.dtype), a, casting="no")
        self.size += a.size
        return dst.view(self.dtype)

    def room(self) -> np.ndarray | None:
        """Return a writable view of the unused reserved room as whole rows of this table's
        dtype, for rows written there in place and then booked with ``commit``; None when there
        is no room left or rows already went apart (they must stay in order)."""
        if self.extra:
            return None
        item = self.dtype.itemsize
        at = self.size * item
        k = (self.buf.size - at) // item
        return self.buf[at:at + k * item].view(self.dtype) if k else None

    def commit(self, rows: np.ndarray) -> np.ndarray:
        """Book ``rows``, the first rows of the last ``room()``, as added; return them."""
        self.size += rows.size
        return rows

    def rows(self) -> np.ndarray:
        """All rows added, end to end, read-only."""
        fitted = self.size - sum(e.size for e in self.extra)
        head = self.buf[:fitted * self.dtype.itemsize].view(self.dtype)
        out = self.arena.concat([head] + self.extra) if self.extra else head
        out.flags.writeable = False
        return out
