"""The WAL directory: file names, listing, and opening, cutting and syncing without symlinks.

A WAL directory holds ``wal-00000001.log``, ``wal-00000002.log`` ... in seq order.

Invariants:
- The WAL directory and its files are never followed when they are symlinks: listing, reading
  and truncating raise CorruptionError naming the path instead.
- A file that vanishes while listed (a concurrent trim) is left out; one that vanishes before
  it is read raises FileNotFoundError, which readers retry.
"""

from __future__ import annotations

import os
import re
import stat

from exsim.exchange.errors import CorruptionError
from exsim.store.paths import is_plain_dir
from exsim.store.wal.format import FILE_HEADER, MAGIC, READ_VERSIONS

_NAME = re.compile(r"^wal-(\d{8})\.log$")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def wal_file_name(no: int) -> str:
    """Return the file name of WAL file number ``no``."""
    return f"wal-{no:08d}.log"


def check_plain_dir(wal_dir: str) -> None:
    """Raise CorruptionError if ``wal_dir`` exists but is a symlink or not a directory."""
    if os.path.lexists(wal_dir) and not is_plain_dir(wal_dir):
        raise CorruptionError(f"{wal_dir}: the WAL directory is a symlink or not a directory; "
                              "refused (a data directory's files must be its own)", wal_dir, -1)


def wal_files(wal_dir: str) -> list[tuple[int, str]]:
    """Return (file number, path) of every WAL file in ``wal_dir``, in order.

    A file removed while listing is left out (a trim may run meanwhile). Raises CorruptionError
    naming it if ``wal_dir`` or a WAL file is a symlink or not a plain directory / regular file:
    nothing is read, truncated or deleted through a link.
    """
    check_plain_dir(wal_dir)
    out = []
    for name in os.listdir(wal_dir):
        m = _NAME.match(name)
        if m:
            path = os.path.join(wal_dir, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                raise CorruptionError(f"{path}: a WAL file that is a symlink or not a regular "
                                      "file; refused", path, -1)
            out.append((int(m.group(1)), path))
    return sorted(out)


def header_only(no: int, path: str) -> bool:
    """Return True if WAL file ``path`` (number ``no``) is exactly a valid file header, no record."""
    try:
        if os.lstat(path).st_size != FILE_HEADER.size:
            return False
        data = read_file(path)
    except FileNotFoundError:
        return False
    if len(data) != FILE_HEADER.size:
        return False
    magic, version, _, fno = FILE_HEADER.unpack(data)
    return magic == MAGIC and version in READ_VERSIONS and fno == no


def read_file(path: str) -> bytes:
    """Return the bytes of WAL file ``path``, opened without following a symlink put there since
    it was listed (CorruptionError then); FileNotFoundError if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptionError(f"{path}: cannot open WAL file (a symlink?): {e}", path, -1) from e
    with os.fdopen(fd, "rb") as f:
        return f.read()


def truncate(path: str, size: int) -> None:
    """Cut WAL file ``path`` to ``size`` bytes durably, never through a symlink (CorruptionError
    if one was put there since it was listed; FileNotFoundError if it is gone)."""
    try:
        fd = os.open(path, os.O_RDWR | _NOFOLLOW)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptionError(f"{path}: cannot open WAL file to cut it (a symlink?): {e}",
                              path, -1) from e
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """fsync a directory so that renames and new files in it are durable; returns None, raises
    OSError if it cannot be opened or synced."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
