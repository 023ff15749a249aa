"""Keep numba's on-disk cache from running stale code after a dependency file changes.

numba's ``cache=True`` keys each cached function on the source of the file that defines it and
on nothing else. A kernel in file A that inlines or calls njit functions of file B, or freezes
B's module-level constants (IntEnum codes, field numbers, dtypes), carries B's code of the day it
was compiled; after B is edited, A's cache still matches A's source and numba silently loads the
old code. ``guard`` closes that hole: a module calls it once, after importing its dependencies
and before any of its kernels is first called (numba looks the cache up at the first call):

    guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.schema"))

It hashes the bytes of the dependency files and compares the digest with a stamp file
``<module stem>.nbdeps`` kept next to the module's ``*.nbi``/``*.nbc`` files. When they differ
(or no stamp exists but cached files do) it deletes that module's ``*.nbi``/``*.nbc`` files, then
writes the new stamp, so numba recompiles the module's kernels at their next call.

Invariants:
- Dependencies are transitive: a dependency that itself called ``guard`` contributes its own
  dependency files too (``replay.backtesting.kernels`` lists ``exchange.kernels`` and so also covers
  ``exchange.book``). A dependency must therefore be imported (and guarded) before its users,
  which a top-of-module import already ensures.
- Every directory where numba may keep this module's cache is checked: ``NUMBA_CACHE_DIR``'s
  subdirectory for the module's folder (when set), the in-tree ``__pycache__``, and numba's
  user-wide cache directory (its fallback when ``__pycache__`` is not writable). Each holds its
  own stamp, so switching ``NUMBA_CACHE_DIR`` on and off cannot resurrect stale files.
- Order of work: stale files are deleted first, the stamp is written after (temp file + atomic
  rename). A crash in between only costs one more purge; it never leaves stale files under a
  fresh stamp.
- Never breaks an import for a filesystem problem: a missing, read-only or concurrently changed
  cache directory is skipped (a stamp that cannot be written means the next import checks
  again). Two processes importing at once (``pytest -n 2``) may both purge; at worst one deletes
  the other's freshly written, correct files, which costs a recompile, not a wrong result. numba
  itself tolerates a data file vanishing under its index.

Known limit: a process that imported the OLD dependency code before the edit and compiles a
kernel after the new stamp was written (a long-lived notebook, say) saves an old-code entry under
the new stamp. Restart such processes after editing a dependency.
Cost: one read of each dependency file plus a small stamp read per import: about 0.2 ms per
guarded module when the stamp matches (median of 50 calls for ``exchange.kernels``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

from . import compiling

__all__ = ["guard", "cache_dirs", "STAMP_SUFFIX"]

STAMP_SUFFIX = ".nbdeps"
_STAMP_VERSION = b"exsim-cache-guard 1\n"

# module name -> {dependency module name: file path}, the transitive closure of every guarded
# module imported in this process (why: a user of a guarded module inherits its dependencies)
_CLOSURE: dict[str, dict[str, str]] = {}


def _dep_file(name: str) -> str:
    """Return the source file of module ``name``; raise ValueError if it has none."""
    mod = sys.modules.get(name)
    path = getattr(mod, "__file__", None) if mod is not None else None
    if path is None:
        spec = importlib.util.find_spec(name)
        path = spec.origin if spec is not None else None
    if not path or not path.endswith(".py"):
        raise ValueError(f"cache guard: dependency {name!r} is not a module with a .py source file")
    return path


def cache_dirs(module_file: str) -> list[str]:
    """Return every directory numba may use for ``module_file``'s cache, in numba's order of
    preference: ``NUMBA_CACHE_DIR``'s subdirectory (if set), the in-tree ``__pycache__``, the
    user-wide numba cache directory. Never raises."""
    path = os.path.abspath(module_file)
    folder = os.path.dirname(path)
    # the same subdirectory name numba derives (its _CacheLocator.get_suitable_cache_subpath)
    sub = "_".join([os.path.basename(folder), hashlib.sha1(folder.encode()).hexdigest()])
    out = []
    try:
        from numba.core import config  # numba resolves NUMBA_CACHE_DIR and its config file
        cache_dir = config.CACHE_DIR
    except Exception:  # why broad: numba missing or changed must not break an import
        cache_dir = os.environ.get("NUMBA_CACHE_DIR", "")
    if cache_dir:
        out.append(os.path.join(cache_dir, sub))
    out.append(os.path.join(folder, "__pycache__"))
    try:
        from numba.misc.appdirs import AppDirs
        out.append(os.path.join(AppDirs(appname="numba", appauthor=False).user_cache_dir, sub))
    except Exception:  # same reason: the fallback directory is optional
        pass
    return out


def _digest(closure: dict[str, str]) -> bytes:
    """Return the stamp bytes for the dependency files of ``closure`` (name -> path)."""
    h = hashlib.sha256()
    for name in sorted(closure):
        try:
            with open(closure[name], "rb") as f:
                data = f.read()
        except OSError:
            data = b"<unreadable>"  # why: still a stable value; numba would fail on it anyway
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return _STAMP_VERSION + h.hexdigest().encode() + b"\n"


def _purge(folder: str, stem: str) -> bool:
    """Delete ``stem``'s numba cache files in ``folder``; return False if one could not be
    deleted (then the stamp must not be refreshed)."""
    ok = True
    prefix = stem + "."
    for entry in os.listdir(folder):
        if entry.startswith(prefix) and entry.endswith((".nbi", ".nbc")):
            try:
                os.unlink(os.path.join(folder, entry))
            except FileNotFoundError:
                pass  # another process purged it first
            except OSError:
                ok = False
    return ok


def _write_stamp(path: str, stamp: bytes) -> None:
    """Write ``stamp`` to ``path`` atomically (temp file in the same folder, then rename)."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(stamp)
        os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _check_dir(folder: str, stem: str, stamp: bytes, create: bool) -> None:
    """Bring one cache directory in line with ``stamp``; never raises."""
    stamp_path = os.path.join(folder, stem + STAMP_SUFFIX)
    try:
        with open(stamp_path, "rb") as f:
            if f.read() == stamp:
                return  # the common case: one small read
    except OSError:
        pass
    try:
        if not os.path.isdir(folder):
            if not create:
                return
            os.makedirs(folder, exist_ok=True)  # numba would create it at the first compile
        if _purge(folder, stem):
            _write_stamp(stamp_path, stamp)
    except OSError:
        pass  # read-only or vanished directory: nothing numba could load from it is refreshed


def guard(module: str, module_file: str, deps) -> None:
    """Delete ``module``'s numba cache files if the dependency files ``deps`` (module names, such
    as ``"exsim.exchange.book"``) changed since they were cached. ``module_file`` is the module's
    ``__file__``. Returns None. Raises ValueError only for a programming error: a dependency
    name that does not resolve to a ``.py`` file. Filesystem problems are ignored."""
    # every module with cached kernels passes here at import: the one place to start saying
    # when numba compiles (exchange.compiling), before any kernel is first called
    compiling.install()
    closure: dict[str, str] = {}
    for name in deps:
        closure[name] = _dep_file(name)
        closure.update(_CLOSURE.get(name, {}))
    closure.pop(module, None)  # numba already keys on the module's own source
    _CLOSURE[module] = closure
    stamp = _digest(closure)
    stem = os.path.splitext(os.path.basename(module_file))[0]
    dirs = cache_dirs(module_file)
    for i, folder in enumerate(dirs):
        # create only numba's first choice when missing, so a cold start gets its stamp now and
        # the next import does not purge the fresh cache it finds without one
        _check_dir(folder, stem, stamp, create=(i == 0))
