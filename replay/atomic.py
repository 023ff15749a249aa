"""Outputs that appear whole or not at all: built under a temporary sibling name, renamed into place.

Invariants: the temporary name sits in the same directory as the output (so the rename is atomic
on one filesystem) and starts with a dot; it gets the permissions ``mkdir``/``open`` would have
given the output under the process umask (``mkdtemp``/``mkstemp`` alone make it private).
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["umask", "temp_dir_beside", "temp_file_beside"]


def umask() -> int:
    """Return the process umask (``store.creation.process_umask``: read from /proc where it can
    be, so other threads never see it changed)."""
    from exsim.store.creation import process_umask

    return process_umask()


def temp_dir_beside(out: str, tag: str = "exsim") -> str:
    """Create and return an empty directory ``.<name>.<tag>-XXXX`` next to ``out`` (creating the
    parent directories), with the mode ``mkdir`` would give. Raises OSError if it cannot."""
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.{tag}-", dir=parent)
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def temp_file_beside(out: str) -> str:
    """Create and return an empty file ``.<name>.XXXX.tmp`` next to ``out``, with the mode
    ``open`` would give. Raises OSError if it cannot."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp",
                               dir=os.path.dirname(out))
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask())
    return tmp
