"""exchange._cache_guard: a cached kernel never runs a dependency's old code after an edit.

The end-to-end tests build a throwaway package in tmp_path: ``b`` defines njit helpers, ``a``
inlines one and calls the other from cached kernels, ``c`` calls ``a`` (a transitive dependency).
A subprocess imports and calls them (filling numba's cache), ``b`` is edited, and a fresh
subprocess must see the edit. The same package without the guard call shows the stale result,
which proves the scenario really exercises numba's cache.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from exsim.exchange import _cache_guard
from exsim.exchange._cache_guard import STAMP_SUFFIX, cache_dirs, guard

B_SRC = """
from numba import njit

@njit(cache=True, inline="always")
def inlined():
    return {value}

@njit(cache=True)
def called():
    return {value} * 10
"""

A_SRC = """
from numba import njit
{guard_line}
from .b import called, inlined

{guard_call}

@njit(cache=True)
def f():
    return inlined() + called()
"""

C_SRC = """
from numba import njit
{guard_line}
from .a import f

{guard_call}

@njit(cache=True)
def g():
    return f() + 1000
"""

RUN = "import {pkg}.a, {pkg}.c; print({pkg}.a.f(), {pkg}.c.g())"


def _make_pkg(root, name, guarded, value=1):
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "b.py").write_text(B_SRC.format(value=value))
    gl = "from exsim.exchange._cache_guard import guard" if guarded else ""
    (pkg / "a.py").write_text(A_SRC.format(
        guard_line=gl, guard_call=f"guard(__name__, __file__, deps=['{name}.b'])" if guarded else ""))
    (pkg / "c.py").write_text(C_SRC.format(
        guard_line=gl, guard_call=f"guard(__name__, __file__, deps=['{name}.a'])" if guarded else ""))
    return pkg


def _run(root, pkg, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", RUN.format(pkg=pkg)], env=env, cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return tuple(int(x) for x in out.stdout.split())


def _edit_b(pkg, value):
    path = pkg / "b.py"
    before = path.stat().st_mtime_ns
    path.write_text(B_SRC.format(value=value))
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


def _scenario(tmp_path, guarded, env_extra=None):
    name = "gpkg" if guarded else "npkg"
    pkg = _make_pkg(tmp_path, name, guarded)
    assert _run(tmp_path, name, env_extra) == (11, 1011)
    _edit_b(pkg, 2)
    return _run(tmp_path, name, env_extra)


def test_edit_of_inlined_and_called_dependency_reaches_guarded_kernels(tmp_path):
    assert _scenario(tmp_path, guarded=True) == (22, 1022)


def test_without_the_guard_numba_runs_the_stale_dependency(tmp_path):
    # the trap the guard exists for: a and c still return the old b's values
    assert _scenario(tmp_path, guarded=False) == (11, 1011)


def test_guard_respects_numba_cache_dir(tmp_path):
    cache = tmp_path / "nbcache"
    assert _scenario(tmp_path, guarded=True, env_extra={"NUMBA_CACHE_DIR": str(cache)}) == (22, 1022)
    assert any(p.name == "a" + STAMP_SUFFIX for p in cache.rglob("*"))
    assert not (tmp_path / "gpkg" / "__pycache__" / ("a" + STAMP_SUFFIX)).exists()


# --- in-process tests of the purge and stamp logic (no numba compile) -------------------------

def _fake_module(tmp_path, dep_value="x = 1\n"):
    """A module file with a dependency module ``cgdep`` on sys.path, and a fake cache entry."""
    (tmp_path / "cgdep.py").write_text(dep_value)
    mod = tmp_path / "cgmod.py"
    mod.write_text("")
    cache = tmp_path / "__pycache__"
    cache.mkdir(exist_ok=True)
    return mod, cache


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(_cache_guard, "_CLOSURE", {})
    yield tmp_path
    sys.modules.pop("cgdep", None)


def _entries(cache):
    return sorted(p.name for p in cache.iterdir())


def test_unchanged_dependency_keeps_the_cache_and_changed_one_purges_only_this_module(on_path):
    mod, cache = _fake_module(on_path)
    guard("cgmod", str(mod), deps=["cgdep"])
    kept = ["cgmod.f-3.py311.nbi", "cgmod.f-3.py311.1.nbc", "cgmod.cpython-311.pyc",
            "cgmod_other.f-1.py311.nbi", "other.f-1.py311.nbc"]
    for n in kept:
        (cache / n).write_bytes(b"")
    guard("cgmod", str(mod), deps=["cgdep"])
    assert set(kept) <= set(_entries(cache))
    (on_path / "cgdep.py").write_text("x = 2\n")
    guard("cgmod", str(mod), deps=["cgdep"])
    assert _entries(cache) == sorted(["cgmod" + STAMP_SUFFIX, "cgmod.cpython-311.pyc",
                                      "cgmod_other.f-1.py311.nbi", "other.f-1.py311.nbc"])


def test_cache_files_without_a_stamp_are_purged(on_path):
    mod, cache = _fake_module(on_path)
    (cache / "cgmod.f-3.py311.nbi").write_bytes(b"")
    guard("cgmod", str(mod), deps=["cgdep"])
    assert _entries(cache) == ["cgmod" + STAMP_SUFFIX]


def test_missing_cache_dir_is_created_with_its_stamp(on_path):
    mod, cache = _fake_module(on_path)
    cache.rmdir()
    guard("cgmod", str(mod), deps=["cgdep"])
    assert _entries(cache) == ["cgmod" + STAMP_SUFFIX]


def test_read_only_cache_dir_never_breaks_the_import(on_path, monkeypatch):
    mod, cache = _fake_module(on_path)
    (cache / "cgmod.f-3.py311.nbi").write_bytes(b"")

    def refuse(*a, **k):
        raise PermissionError("read-only")

    # why monkeypatch rather than chmod: root (CI containers) ignores directory permissions
    with monkeypatch.context() as m:
        m.setattr(_cache_guard.os, "unlink", refuse)
        m.setattr(_cache_guard.os, "replace", refuse)
        guard("cgmod", str(mod), deps=["cgdep"])
    assert _entries(cache) == ["cgmod.f-3.py311.nbi"]  # untouched, and no stamp claims it fresh


def test_unwritable_cache_dir_parent_never_breaks_the_import(on_path, monkeypatch):
    mod, cache = _fake_module(on_path)
    blocker = on_path / "not_a_dir"
    blocker.write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker))  # makedirs under a file fails
    monkeypatch.setattr(_cache_guard, "cache_dirs",
                        lambda f: [str(blocker / "sub"), str(cache)])
    guard("cgmod", str(mod), deps=["cgdep"])
    assert _entries(cache) == ["cgmod" + STAMP_SUFFIX]


def test_cache_files_vanishing_during_the_purge_are_tolerated(on_path, monkeypatch):
    mod, cache = _fake_module(on_path)
    real_listdir = os.listdir
    # another process deleted this entry between our listing and our unlink
    with monkeypatch.context() as m:
        m.setattr(_cache_guard.os, "listdir", lambda d: real_listdir(d) + ["cgmod.gone-1.py311.nbi"])
        guard("cgmod", str(mod), deps=["cgdep"])
    assert _entries(cache) == ["cgmod" + STAMP_SUFFIX]


def test_two_processes_guarding_at_once_leave_one_valid_stamp(on_path):
    mod, cache = _fake_module(on_path)
    for i in range(50):
        (cache / f"cgmod.f{i}-3.py311.nbi").write_bytes(b"")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from exsim.exchange._cache_guard import guard; "
            "guard('cgmod', sys.argv[2], deps=['cgdep'])")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(on_path), str(mod)]) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert _entries(cache) == ["cgmod" + STAMP_SUFFIX]
    stamp = (cache / ("cgmod" + STAMP_SUFFIX)).read_bytes()
    assert stamp == _cache_guard._digest({"cgdep": str(on_path / "cgdep.py")})


def test_transitive_dependencies_are_inherited(on_path):
    mod, cache = _fake_module(on_path)
    (on_path / "cgmid.py").write_text("")
    guard("cgmid", str(on_path / "cgmid.py"), deps=["cgdep"])
    guard("cgmod", str(mod), deps=["cgmid"])
    (cache / "cgmod.f-3.py311.nbi").write_bytes(b"")
    (on_path / "cgdep.py").write_text("x = 3\n")
    guard("cgmid", str(on_path / "cgmid.py"), deps=["cgdep"])
    guard("cgmod", str(mod), deps=["cgmid"])
    assert "cgmod.f-3.py311.nbi" not in _entries(cache)


def test_unknown_dependency_is_a_clear_error(on_path):
    mod, _ = _fake_module(on_path)
    with pytest.raises(ValueError, match="no_such_module_xyz"):
        guard("cgmod", str(mod), deps=["no_such_module_xyz"])


def test_cache_dirs_follow_numba_cache_dir(tmp_path, monkeypatch):
    from numba.core import config
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "c"))
    dirs = cache_dirs(str(tmp_path / "pkg" / "m.py"))
    assert dirs[0].startswith(str(tmp_path / "c" / "pkg_"))
    assert dirs[1] == str(tmp_path / "pkg" / "__pycache__")
