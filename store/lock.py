"""The writer lock of a data directory: an exclusive ``flock`` on ``<data_dir>/LOCK``.

Exactly one writer (a ``Session``, or ``compact`` of a directory path) may change a data
directory at a time: two writers lose acknowledged batches, and a second ``Session.open``'s
orphan sweep and WAL repair would delete the live writer's unregistered segments and cut its
WAL tail. Readers (``store.read``, ``read_checkpoint``, replay) never take the lock: they only
read files the catalog has made visible.

Invariants:
- A writer holds the lock before it writes, repairs or deletes anything in the directory, and
  until it is closed (or its process dies: the kernel drops a ``flock`` with the last
  descriptor of its open file, also on SIGKILL). The lock is taken without waiting: a second
  writer is refused at once with ``LockedError`` naming the directory and the holder's pid.
- ``LOCK`` is opened with O_NOFOLLOW and must be a regular file: a symlinked or special
  ``LOCK`` is refused (CorruptionError), so taking the lock never touches anything outside the
  directory. Its content (the holder's pid) is only a hint for the error message; the lock is
  the ``flock``, never the file's existence, so a stale ``LOCK`` left by a crash is harmless.
- Within one process the lock is the process's: ``acquire(..., supersede=True)`` (what
  ``Session.open``/``create`` do) of a directory this process already holds hands the lock to
  the new holder, and the earlier holder's ``check()`` fails from then on, so an abandoned
  Session (a simulated crash) can never write beside its successor. ``supersede=False``
  (compaction of a path) is refused instead. A child made by ``fork`` holds nothing: the
  descriptors it inherited are closed in the child, so the parent's lock stays the parent's.
- The descriptor is close-on-exec: programs a writer starts do not hold its lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading

from exsim.exchange.errors import CorruptionError, StoreError
from exsim.store.paths import inside

__all__ = ["DirLock", "LockedError", "LOCK_NAME"]

LOCK_NAME = "LOCK"


class LockedError(StoreError):
    """The data directory is open for writing by another writer (another process, or a live
    Session of this process when the caller asked not to supersede it)."""


class _Held:
    """One held lock of this process: its descriptor and the DirLock that currently owns it."""

    def __init__(self, fd: int, owner: "DirLock"):
        self.fd = fd
        self.pid = os.getpid()
        self.owner = owner


_mutex = threading.Lock()
_held: dict[tuple[int, int], _Held] = {}   # (st_dev, st_ino) of a LOCK file -> its holder


def _forget_after_fork() -> None:
    """In a forked child: close the inherited lock descriptors (they share the parent's open
    file, hence its lock) and forget them, so the child holds nothing of the parent's."""
    global _mutex
    _mutex = threading.Lock()   # why new: another thread may have held the old one at fork
    for h in _held.values():
        try:
            os.close(h.fd)
        except OSError:
            pass
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _holder_pid(fd: int) -> str:
    """The pid the holder wrote into the lock file, as text ("" if none or unreadable)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""


class DirLock:
    """The held writer lock of one data directory. Get one with ``DirLock.acquire``."""

    def __init__(self, data_dir: str, path: str, key: tuple[int, int]):
        self.data_dir = data_dir
        self.path = path
        self._key = key
        self._released = False

    @classmethod
    def acquire(cls, data_dir, *, supersede: bool = False, what: str = "write") -> "DirLock":
        """Take the exclusive lock of ``data_dir`` (an existing directory) without waiting.

        ``supersede``: if this process already holds it, take it over (the earlier holder's
        ``check`` fails from then on) instead of refusing. ``what`` names the purpose in errors.
        Returns the DirLock. Raises LockedError if another process holds it (or this process,
        without ``supersede``), CorruptionError if ``LOCK`` is a symlink or not a regular file,
        StoreError if the lock file cannot be opened or locked (e.g. a read-only directory).
        """
        data_dir = os.fspath(data_dir)
        path = inside(data_dir, LOCK_NAME, what="lock file")
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        # why O_NONBLOCK: opening a FIFO planted as LOCK must not hang the writer
        flags |= getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise CorruptionError(f"{path}: the lock file is a symlink; refused", path, -1) from e
            raise StoreError(f"{path}: cannot open the lock file to {what}: {e}") from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise CorruptionError(f"{path}: the lock file is not a regular file; refused", path, -1)
            key = (st.st_dev, st.st_ino)
            with _mutex:
                h = _held.get(key)
                if h is not None and h.pid == os.getpid():
                    if not supersede:
                        raise LockedError(f"{data_dir}: the data directory is open for writing by a "
                                          f"Session of this process (pid {os.getpid()}); close it "
                                          f"first, or pass that Session instead of the path")
                    os.close(fd)
                    fd = -1
                    lock = cls(data_dir, path, key)
                    h.owner = lock   # why: the earlier holder's check() fails from now on
                    return lock
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        pid = _holder_pid(fd)
                        by = f"another process (pid {pid})" if pid else "another process"
                        raise LockedError(f"{data_dir}: the data directory is open for writing by "
                                          f"{by}; cannot {what} it until that writer closes "
                                          "(readers need no lock)") from None
                    raise StoreError(f"{path}: cannot lock the data directory to {what}: {e}") from e
                try:
                    # why after the flock: a refused writer must not change the file
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                except OSError:
                    pass   # the pid is only a hint for another writer's error message
                lock = cls(data_dir, path, key)
                _held[key] = _Held(fd, lock)
                fd = -1
                return lock
        finally:
            if fd >= 0:
                os.close(fd)

    @property
    def held(self) -> bool:
        """True while this object holds the lock (not released, not superseded, same process)."""
        h = _held.get(self._key)
        return (not self._released and h is not None and h.owner is self
                and h.pid == os.getpid())

    def check(self) -> None:
        """Return None if this object still holds the lock; raise StoreError if it was released,
        taken over by a later open of the same directory in this process, or inherited by fork."""
        if not self.held:
            why = ("released" if self._released else
                   "taken over by a later Session.open/create of the same directory in this "
                   "process, or not this process's (a forked child)")
            raise StoreError(f"{self.data_dir}: this writer no longer holds the directory's lock "
                             f"({why}); it must not write. Use the newer Session or reopen")

    def release(self) -> None:
        """Release the lock if this object holds it (closing its descriptor); idempotent and
        never raises. A superseded holder releases nothing: its successor owns the lock."""
        with _mutex:
            h = _held.get(self._key)
            if not self._released and h is not None and h.owner is self and h.pid == os.getpid():
                del _held[self._key]
                try:
                    os.close(h.fd)
                except OSError:
                    pass
            self._released = True

    def __enter__(self) -> "DirLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()
