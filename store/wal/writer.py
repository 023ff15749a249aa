"""Writing the WAL: ``WalWriter`` appends batch records, ``GroupWriter`` commits them in groups.

Records are framed as the current format version (store.wal.format, ``FRAME4``: the frame
header carries the record's seq range and row counts) around a payload from store.wal.payload.

Invariants:
- Records are appended whole with one writev (frame header + payload pieces); a batch is
  acknowledged only after ``append`` returns, and under durability ``fsync`` only after the file
  is fsynced: by that append, or, for records appended with ``defer_sync`` (group commit,
  ``GroupWriter``), by the ``commit()`` after them.
- Seqs are contiguous: each record's first seq is the previous record's last seq + 1, across files.
- A writer never appends to a file a previous process wrote: it starts a new file, so recovery
  only ever has to truncate the tail of an old file, never to rewrite one. A newest file holding
  only its header (a kill before its first record) is deleted and its number reused.
- After a failed write or fsync the writer refuses further appends (WriteError): the caller's
  state is ahead of the log.
"""

from __future__ import annotations

import os
import time

import crc32c
import numpy as np

from exsim.exchange.errors import UsageError, WriteError
from exsim.store.wal.files import check_plain_dir, fsync_dir, header_only, wal_file_name, wal_files
from exsim.store.wal.format import FILE_HEADER, FRAME4, FRAME4_SIZE, HCRC, MAGIC, RAW_LEN, T_BATCH_PARTS, VERSION
from exsim.store.wal.payload import encode_batch, raw_size

DURABILITY = ("fsync", "interval", "none")


class WalWriter:
    """Appends batch records to a WAL directory under an explicit durability policy.

    durability: "fsync" (fsync after every record), "interval" (fsync when ``interval`` seconds
    passed since the last one: group commit; records between fsyncs survive a process crash but
    not a power loss) or "none" (never fsync: pure simulation). Files rotate when they pass
    ``rotate_bytes``. A newest file holding only its header (a kill before its first record) is
    deleted and its number reused. Raises UsageError for an unknown policy, CorruptionError if
    ``wal_dir`` or a WAL file in it is a symlink.
    """

    def __init__(self, wal_dir: str, *, durability: str = "fsync", interval: float = 0.05,
                 rotate_bytes: int = 64 << 20, compress: bool = True, next_seq: int = 1):
        if durability not in DURABILITY:
            raise UsageError(f"durability must be one of {DURABILITY}, got {durability!r}")
        os.makedirs(wal_dir, exist_ok=True)
        check_plain_dir(wal_dir)   # why: never write records through a symlinked directory
        self.wal_dir = wal_dir
        self.durability = durability
        self.interval = interval
        self.rotate_bytes = rotate_bytes
        self.compress = compress
        self.next_seq = next_seq
        existing = wal_files(wal_dir)
        if existing and header_only(*existing[-1]):
            # why: a kill between writing a file's header and its first record leaves it; it
            # holds nothing, and a new file after it would leave it behind for good (no seq
            # range, so no trim covers it)
            os.unlink(existing.pop()[1])
            fsync_dir(wal_dir)
        self._file_no = existing[-1][0] if existing else 0
        self._fd = -1
        self._path = ""
        self._size = 0
        self._last_sync = time.monotonic()
        self._broken: str | None = None
        self.closed_files: list[tuple[str, int, int]] = []   # (path, first seq, last seq)
        self._cur_range: tuple[int, int] | None = None
        self.bytes_written = 0
        self._scratch = np.empty(0, np.uint8)   # shuffled payloads before lz4, reused
        self._unsynced = False      # bytes written to the current file since its last fsync
        self._dir_synced = True     # the directory entry of the current file is durable

    # -- files ---------------------------------------------------------------------------------
    def _open_next(self) -> None:
        self._file_no += 1
        self._path = os.path.join(self.wal_dir, wal_file_name(self._file_no))
        try:
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self._write_all(FILE_HEADER.pack(MAGIC, VERSION, 0, self._file_no))
            # why no fsync here: the first record's fsync covers the header too, and the
            # directory is fsynced right after it (_sync_now): one fsync fewer per file, on the
            # path of the batch that opens it
            self._dir_synced = self.durability == "none"
        except OSError as e:
            self._broken = f"cannot create {self._path}: {e}"
            raise WriteError(f"WAL: {self._broken}") from e
        self._size = FILE_HEADER.size
        self._cur_range = None

    def rotate(self) -> None:
        """Close the current file (fsynced unless durability is none); the next append opens a new one."""
        if self._fd < 0:
            return
        try:
            if self.durability != "none" and (self._unsynced or not self._dir_synced):
                self._sync_now()
        except OSError as e:
            # why broken: a record in this file may not be durable; appending to the next file
            # would put later records on disk after a lost one (a seq gap on reopen)
            self._broken = f"fsync of {self._path} failed: {e}"
            raise WriteError(f"WAL: {self._broken}") from e
        finally:
            os.close(self._fd)
            self._fd = -1
        if self._cur_range is not None:
            self.closed_files.append((self._path, *self._cur_range))

    def _sync_now(self) -> None:
        """fsync the current file and, the first time, the directory that names it."""
        os.fsync(self._fd)
        self._unsynced = False
        if not self._dir_synced:
            fsync_dir(self.wal_dir)
            self._dir_synced = True

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def _writev(self, parts: list, size: int) -> None:
        """Write the parts back to back (one writev; short writes finish with plain writes)."""
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        done = os.writev(self._fd, views)
        if done == size:
            return
        for v in views:     # why: a short writev (rare: signals, pipes, quotas) continues here
            if done >= len(v):
                done -= len(v)
                continue
            self._write_all(v[done:])
            done = 0

    # -- records -------------------------------------------------------------------------------
    def append(self, first_seq: int, orders, fills, l2, events, *, defer_sync: bool = False) -> int:
        """Append one batch record; return its size in bytes once it is durable under the policy.

        ``defer_sync`` (group commit): under durability "fsync", skip this record's fsync; the
        record is then durable only after the next ``commit()`` (or rotation), and must not be
        acknowledged before. Other policies ignore it.
        Raises UsageError if first_seq does not continue the log, WriteError if the write or
        fsync fails (the partial record is cut off again where possible; the writer then refuses
        further appends because the caller's state is ahead of the log).
        """
        self._check_next(first_seq)
        need = raw_size(orders, fills, l2, events)
        if self.compress and self._scratch.size < need:
            self._scratch = np.empty(need + need // 4, np.uint8)
        rtype, parts = encode_batch(first_seq, orders, fills, l2, events, self.compress,
                                    self._scratch)
        counts = (orders.size, fills.size, l2.size, events.size)
        return self._append_payload(first_seq, counts, rtype, parts, defer_sync)

    def append_parts(self, first_seq: int, n_orders: int, parts: list, *,
                     defer_sync: bool = False) -> int:
        """Append one batch record made of parts (``PartEncoder.encode`` results, consecutive
        sub-batches in seq order, the first starting at ``first_seq``, ``n_orders`` orders in
        all); return its size once durable, as ``append`` (same errors; also UsageError if
        ``parts`` is empty, not ``PartEncoder.encode`` results, or holds another number of
        orders). A record of type 4: one frame, one CRC, read back as one batch."""
        self._check_next(first_seq)
        counts = [getattr(part, "counts", None) for part in parts]
        if not counts or None in counts:
            raise UsageError("append_parts takes one or more parts PartEncoder.encode returns")
        counts = tuple(int(sum(c)) for c in zip(*counts))
        if counts[0] != n_orders:
            raise UsageError(f"append_parts: the parts hold {counts[0]} orders, not {n_orders}")
        payload = [RAW_LEN.pack(len(parts))] + [piece for part in parts for piece in part]
        return self._append_payload(first_seq, counts, T_BATCH_PARTS, payload, defer_sync)

    def _check_next(self, first_seq: int) -> None:
        if self._broken:
            raise WriteError(f"WAL writer unusable after an earlier failure: {self._broken}")
        if first_seq != self.next_seq:
            raise UsageError(f"WAL expects seq {self.next_seq} next, got a batch starting at {first_seq}")

    def _append_payload(self, first_seq: int, counts: tuple, rtype: int, parts: list,
                        defer_sync: bool) -> int:
        if self._fd >= 0 and self._size >= self.rotate_bytes:
            self.rotate()
        if self._fd < 0:
            self._open_next()
        crc = crc32c.crc32c(bytes([rtype]))
        for p in parts:
            crc = crc32c.crc32c(p, crc)
        length = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)
        n_orders = counts[0]
        head = FRAME4.pack(length, crc, rtype, first_seq, first_seq + n_orders - 1, *counts)
        frame = [head + HCRC.pack(crc32c.crc32c(head))] + parts
        size = FRAME4_SIZE + length
        start = self._size
        try:
            self._writev(frame, size)
            self._size += size
            now = time.monotonic()
            self._unsynced = True
            if (self.durability == "fsync" and not defer_sync) or (
                    self.durability == "interval" and now - self._last_sync >= self.interval):
                self._sync_now()
                self._last_sync = now
        except OSError as e:
            self._broken = f"write of {size} bytes to {self._path} at offset {start} failed: {e}"
            try:
                os.ftruncate(self._fd, start)   # why: leave no half record behind if we can
            except OSError:
                pass                            # recovery will see a torn tail and cut it
            raise WriteError(f"WAL: {self._broken}") from e
        last = first_seq + n_orders - 1
        self._cur_range = (self._cur_range[0] if self._cur_range else first_seq, last)
        self.next_seq = last + 1
        self.bytes_written += size
        return size

    def commit(self) -> None:
        """Make every record appended with ``defer_sync`` durable (durability "fsync": one fsync
        for all of them; other policies: nothing to do). Raises WriteError if the fsync fails;
        the writer then refuses further appends (whether those records survive is unknown)."""
        if self.durability != "fsync" or self._fd < 0 or not (self._unsynced or not self._dir_synced):
            return
        if self._broken:
            raise WriteError(f"WAL writer unusable after an earlier failure: {self._broken}")
        try:
            self._sync_now()
        except OSError as e:
            self._broken = f"fsync of {self._path} failed: {e}"
            raise WriteError(f"WAL: {self._broken}") from e
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Flush and close the current file (fsync unless durability is none)."""
        if self._fd >= 0:
            self.rotate()


class GroupWriter:
    """A WalWriter driven by a thread of its own that commits queued records in groups.

    ``append`` and ``rotate`` queue an operation and return a ``concurrent.futures.Future``.
    The thread takes everything queued (up to ``max_group`` operations), performs it in order,
    then makes it durable with one ``commit()`` (one fsync for the group under durability
    "fsync"), and only then resolves the group's futures: a future's result means its record is
    durable under the policy, exactly as a return from ``WalWriter.append``. When the writer
    keeps up, groups hold one record (the same fsync per record as before); when records
    arrive faster than fsyncs complete, one fsync covers several.

    If an operation fails, it and every later one of its group get the exception (an earlier
    record of the group was written but never committed: it is not acknowledged either); the
    WalWriter refuses further appends. While a GroupWriter runs, only its thread touches the
    WalWriter. ``close()`` performs what is queued, then stops the thread.
    """

    def __init__(self, wal: WalWriter, max_group: int = 16):
        import collections
        import threading

        self.wal = wal
        self.max_group = max_group
        self.groups = 0          # commits done: records / groups says how much was grouped
        self.records = 0
        self._queue = collections.deque()
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="exsim-wal", daemon=True)
        self._thread.start()

    def append(self, first_seq, orders, fills, l2, events):
        """Queue a record; return a Future resolved (with its size) once it is durable."""
        return self._submit(("append", (first_seq, orders, fills, l2, events)))

    def rotate(self):
        """Queue a rotation of the WAL file after the records queued so far; return a Future."""
        return self._submit(("rotate", ()))

    def _submit(self, op):
        from concurrent.futures import Future

        fut = Future()
        with self._cond:
            if self._stop:
                raise UsageError("GroupWriter is closed")
            self._queue.append((fut, op))
            self._cond.notify()
        return fut

    def close(self) -> None:
        """Perform every queued operation, then stop the thread (idempotent)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if not self._queue:
                    return
                group = [self._queue.popleft() for _ in range(min(self.max_group, len(self._queue)))]
            self._perform(group)

    def _perform(self, group: list) -> None:
        done, error = [], None
        for fut, (kind, args) in group:
            if error is not None:
                fut.set_exception(error)
                continue
            try:
                if kind == "append":
                    done.append((fut, self.wal.append(*args, defer_sync=True)))
                    self.records += 1
                else:
                    self.wal.rotate()
                    done.append((fut, None))
            except BaseException as e:   # why broad: any failure must reach the waiting caller
                error = e
                fut.set_exception(e)
        if error is None:
            try:
                self.wal.commit()
                self.groups += any(kind == "append" for _, (kind, _) in group)
            except BaseException as e:
                error = e
        for fut, result in done:
            if error is None:
                fut.set_result(result)
            else:   # written but never committed: not durable, so not acknowledged
                fut.set_exception(error if isinstance(error, WriteError) else
                                  WriteError(f"WAL: group commit failed: {error!r}"))
