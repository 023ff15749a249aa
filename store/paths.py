"""Paths inside a data directory: the one place a name read from disk becomes a file path.

A data directory may come from someone else, so every path the catalog (or any other stored
byte) names is untrusted. ``inside`` turns such a relative name into an absolute path and
refuses anything that would leave the directory: absolute names, ``..`` components, and
symlinks anywhere on the way (a symlinked ``segments/`` would otherwise let an orphan sweep or
a compaction delete files elsewhere).

Invariants:
- A path returned by ``inside`` is under ``data_dir`` after resolving every symlink, and none
  of its components below ``data_dir`` is a symlink (checked with ``lstat``, so a link that
  points back inside is refused too: the store never makes links).
- Nothing here creates, opens or deletes a file.
"""

from __future__ import annotations

import os
import stat

from exsim.exchange.errors import CorruptionError

__all__ = ["inside", "is_plain_dir"]


def inside(data_dir: str, rel: str, *, what: str = "file") -> str:
    """Return the absolute path of ``rel`` (a name stored in ``data_dir``) under ``data_dir``.

    Components that do not exist yet are allowed (a file about to be written); existing ones
    must be plain directories or, for the last, a plain file. Raises CorruptionError naming the
    data directory and the stored name if ``rel`` is not a str, is empty, absolute, holds a
    ``..`` or NUL, or passes through a symlink.
    """
    root = os.path.abspath(os.fspath(data_dir))
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise CorruptionError(f"{root}: stored {what} path {rel!r} is not a relative file name",
                              root, -1)
    if os.path.isabs(rel) or rel.startswith(("/", "\\")):
        raise CorruptionError(f"{root}: stored {what} path {rel!r} is absolute: refused "
                              "(a data directory only names files inside itself)", root, -1)
    parts = rel.replace("\\", "/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise CorruptionError(f"{root}: stored {what} path {rel!r} leaves or re-enters the data "
                              "directory: refused", root, -1)
    cur = root
    for p in parts:
        cur = os.path.join(cur, p)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break   # the rest does not exist yet: nothing to follow
        except OSError as e:
            raise CorruptionError(f"{cur}: cannot inspect stored {what} path: {e}", cur, -1) from e
        if stat.S_ISLNK(st.st_mode):
            raise CorruptionError(f"{cur}: is a symlink; a data directory's files must be its own "
                                  f"(stored {what} path {rel!r} refused)", cur, -1)
    return os.path.join(root, *parts)


def is_plain_dir(path: str) -> bool:
    """Return True if ``path`` exists and is a directory that is not a symlink (never raises)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
