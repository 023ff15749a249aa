"""Creating a data directory atomically: built in a hidden sibling, then renamed into place.

``build_directory`` writes the catalog (symbols, run, engine class, ``sealed_through``) and the
engine's first checkpoint into ``.<name>.exsim-create-*`` beside the target, under that
directory's writer lock, then renames it to the target.

Invariants:
- A crash or failure before the rename leaves the target as it was (absent or an empty
  directory) and removes the hidden directory; the rename is the commit.
- The target is a new or empty directory: one holding a catalog or other files is refused
  (UsageError), also when another create fills it meanwhile.
- The lock taken in the hidden directory moves with it: the caller holds the target's lock.
- A create killed before the rename leaves its hidden directory; the next create of the same
  name removes it once nobody holds its lock (``sweep_abandoned``).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import time

from exsim.exchange.errors import ExsimError, UsageError, WriteError
from exsim.store.catalog import CATALOG_NAME, Catalog
from exsim.store.checkpoint_file import write_checkpoint_file
from exsim.store.engine_classes import class_name
from exsim.store.lock import DirLock
from exsim.store.wal import fsync_dir

__all__ = ["build_directory", "creation_target", "rename_into_place", "sweep_abandoned",
           "process_umask"]


def process_umask() -> int:
    """Return the process umask, read without changing it where /proc allows."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)   # why the swap only as a fallback: it is process-wide for a moment
    os.umask(mask)
    return mask


def build_directory(data_dir: str, engine, run_info: dict | None, *, sync: bool) -> DirLock:
    """Build the data directory ``data_dir`` for ``engine`` (fsynced when ``sync``) and return
    its writer lock, held, with the directory in place.

    Raises UsageError if ``data_dir`` holds a catalog or is not empty (or another create won
    the race), WriteError if the first checkpoint or the catalog cannot be written.
    """
    target = creation_target(data_dir)
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        sweep_abandoned(parent, os.path.basename(target))
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.exsim-create-", dir=parent)
    except OSError as e:
        raise WriteError(f"cannot create a data directory beside {target}: {e}") from e
    lock = catalog = None
    try:
        try:
            old = os.stat(target)
            mode = stat.S_IMODE(old.st_mode)   # why: the empty directory it replaces
        except FileNotFoundError:
            mode = 0o777 & ~process_umask()   # why: mkdtemp makes it private; be like mkdir's
        os.chmod(tmp, mode)
        lock = DirLock.acquire(tmp, what="create")
        catalog = Catalog(tmp, create=True)
        config = engine.config()
        info = dict(run_info or {})
        catalog.set_symbols(config)
        catalog.add_run(scenario=str(info.pop("scenario", "")), seed=info.pop("seed", None),
                        engine_options=config, info=info)
        catalog.set_meta("engine_class", class_name(type(engine)))
        catalog.set_meta("sealed_through", engine.seq)   # nothing before the engine's seq is ours
        seq = engine.seq
        rel, nbytes, crc = write_checkpoint_file(tmp, seq, engine.checkpoint(), sync=sync)
        catalog.add_checkpoint(seq, rel, nbytes, crc)
        catalog.close()
        catalog = None
        if sync:
            fsync_dir(tmp)
        rename_into_place(tmp, target)
        if sync:
            fsync_dir(parent)
    except BaseException as e:
        if catalog is not None:
            catalog.close()
        if lock is not None:
            lock.release()
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise WriteError(f"cannot create the data directory {target}: {e}") from e
        raise
    # the directory is complete and in place; the lock (on its LOCK file) moved with it
    lock.data_dir = data_dir
    lock.path = os.path.join(data_dir, os.path.basename(lock.path))
    return lock


ABANDONED_AFTER_S = 60.0   # a hidden build directory this old and unlocked has no live creator


def sweep_abandoned(parent: str, name: str) -> list[str]:
    """Remove the hidden build directories ``.<name>.exsim-create-*`` in ``parent`` that a killed
    create left behind; return their paths.

    Only plain directories (not symlinks) older than ``ABANDONED_AFTER_S`` whose writer lock
    nobody holds are removed: a live create holds its lock from just after making its directory,
    and the age covers the moment in between. Never raises for a directory it cannot inspect or
    remove (it is left for the next create).
    """
    from exsim.store.lock import LockedError

    prefix = f".{name}.exsim-create-"
    removed = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.startswith(prefix):
            continue
        path = os.path.join(parent, entry)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < ABANDONED_AFTER_S:
                continue
            lock = DirLock.acquire(path, what="remove an abandoned create")
        except (LockedError, OSError, ExsimError):
            continue
        try:
            shutil.rmtree(path)
            removed.append(path)
        except OSError:
            pass
        finally:
            lock.release()
    return removed


def creation_target(data_dir: str) -> str:
    """Return the absolute path ``create`` renames the new directory to (a symlinked ``data_dir``
    resolved). Raises UsageError if it holds a catalog, is not a directory or is not empty."""
    target = os.path.abspath(data_dir)
    if os.path.islink(target):
        target = os.path.realpath(target)
    if os.path.lexists(os.path.join(target, CATALOG_NAME)):
        raise UsageError(f"{data_dir} already holds a data directory; use Session.open")
    if os.path.lexists(target):
        if not os.path.isdir(target):
            raise UsageError(f"{data_dir} exists and is not a directory; cannot create a data "
                             "directory there")
        try:
            entries = os.listdir(target)
        except OSError as e:
            raise UsageError(f"{data_dir}: cannot list the directory: {e}") from e
        if entries:
            shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
            raise UsageError(f"{data_dir} is not empty ({shown}) and is not a data directory; "
                             "create needs a new or empty directory")
    return target


def rename_into_place(tmp: str, target: str) -> None:
    """Rename the built directory ``tmp`` to ``target`` (absent or an empty directory); returns None.

    Raises UsageError if ``target`` became non-empty meanwhile (another create won).
    """
    try:
        in_target = os.path.samefile(os.getcwd(), target)
    except OSError:
        in_target = False
    try:
        os.rename(tmp, target)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            if os.path.lexists(os.path.join(target, CATALOG_NAME)):
                raise UsageError(f"{target} already holds a data directory (created meanwhile); "
                                 "use Session.open") from e
            raise UsageError(f"{target} is no longer an empty directory; create needs a new "
                             "or empty one") from e
        raise
    if in_target:   # why: the rename replaced the directory this process was in
        os.chdir(target)
