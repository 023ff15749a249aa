"""A first run compiles independent kernel groups in child processes (replay.warmup.in_background).

What a user sees: on a cold cache ``exsim demo`` says on stderr what compiles where, its output
is the warm run's, a warm run starts no child and says nothing about compiling, a child that
fails leaves the parent to compile (with a message, same result), and killing the parent leaves
no child behind.

The mechanism tests use a one-line kernel in a module of their own, on a fresh numba cache, so
they compile in a second or two; the CLI test makes only the store's codecs cold (a copy of
this checkout's warm cache without them), so its child really compiles (about 20 s of CPU).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

KERNEL_MODULE = '''
import os, time
from numba import njit

@njit(cache=True)
def bump(x):
    return x + 1

def step():
    time.sleep(float(os.environ.get("TINY_STEP_SLEEP", "0")))
    if os.environ.get("TINY_STEP_FAIL"):
        raise RuntimeError("boom in the child")
    bump(1)
'''

PARENT = '''
import json, sys, time
from exsim.exchange import compiling
from exsim.replay import warmup

compiling.install()
group = warmup.BackgroundGroup("tiny", "the tiny kernel", "tinyk:step", probe=("tinyk",),
                               packages=("tinyk",), peak_bytes=1)
bg = warmup.start_background([group])
print(json.dumps({"started": bg is not None,
                  "pids": [p.pid for p in bg._procs] if bg else []}), flush=True)
if len(sys.argv) > 1:    # "hang": wait here to be killed
    time.sleep(600)
import tinyk
value = tinyk.bump(41)
if bg is not None:
    bg.close()
print(json.dumps({"value": value, "compiled_here": compiling.compiled_seconds() > 0,
                  "children": warmup.background_stats()}), flush=True)
'''


def _env(tmp_path: Path, **extra) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    env.pop("EXSIM_COMPILE_NOTICE", None)
    env.pop("EXSIM_COMPILE_CHILDREN", None)
    return dict(env, **extra)


@pytest.fixture
def tiny(tmp_path):
    """A module with one cached kernel and a parent script, on an empty numba cache."""
    (tmp_path / "tinyk.py").write_text(KERNEL_MODULE)
    (tmp_path / "parent.py").write_text(PARENT)
    return tmp_path


def _parent(tmp_path: Path, **extra) -> tuple[list, str]:
    done = subprocess.run([sys.executable, str(tmp_path / "parent.py")], capture_output=True,
                          text=True, env=_env(tmp_path, **extra), cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def test_the_parent_waits_for_the_child_and_loads_what_it_compiled(tiny):
    # the child sleeps before compiling, so the parent's first call comes first and must wait
    (started, result), err = _parent(tiny, TINY_STEP_SLEEP="1.5")
    assert started["started"] and len(started["pids"]) == 1
    assert result["value"] == 42
    assert result["compiled_here"] is False, err          # loaded from the child's cache entry
    assert err.splitlines()[0].startswith("exsim: compiling numba kernels on first use")
    assert "the tiny kernel in a child process (pid" in err.splitlines()[0]
    assert "compiled the tiny kernel in a child process in" in err
    (child,) = result["children"]
    assert child["groups"] == ["tiny"] and child["exit"] == 0 and child["peak_mb"] > 0

    # warm: no child, not a word about compiling
    (started, result), err = _parent(tiny)
    assert not started["started"] and result["value"] == 42 and result["children"] == []
    assert err == ""


def test_a_failed_child_leaves_the_parent_to_compile_with_a_message(tiny):
    (started, result), err = _parent(tiny, TINY_STEP_FAIL="1")
    assert started["started"] and result["value"] == 42
    assert result["compiled_here"] is True
    assert ("compiling the tiny kernel in a child process failed (RuntimeError: boom in the "
            "child); compiling it in this process instead") in err


def test_no_child_when_the_cap_is_zero(tiny):
    (started, result), err = _parent(tiny, EXSIM_COMPILE_CHILDREN="0")
    assert not started["started"] and result["value"] == 42 and result["compiled_here"]
    assert "child process" not in err


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_parent_leaves_no_child_compiling(tiny):
    proc = subprocess.Popen([sys.executable, str(tiny / "parent.py"), "hang"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=_env(tiny, TINY_STEP_SLEEP="300"), cwd=tiny)
    try:
        started = json.loads(proc.stdout.readline())
        (child,) = started["pids"]
        assert not _gone(child)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    deadline = time.monotonic() + 20
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(child)


# -- the CLI: exsim demo with the store's codecs cold --------------------------------------------

def _numba_subdir(folder: Path) -> str:
    # numba's own name for a source folder's cache under NUMBA_CACHE_DIR
    # (_CacheLocator.get_suitable_cache_subpath)
    return "_".join([folder.name, hashlib.sha1(str(folder).encode()).hexdigest()])


def _copy_warm_cache(dest: Path, leave_out: Path) -> int:
    """Copy this checkout's numba cache (the __pycache__ files beside exsim's sources, with the
    cache guard's stamps) into ``dest`` laid out as NUMBA_CACHE_DIR, except the files of the
    sources under ``leave_out``; return how many files were copied."""
    copied = 0
    for top in ("exchange", "store", "replay", "scenarios"):
        for cache in (REPO / top).rglob("__pycache__"):
            folder = cache.parent
            if folder == leave_out or leave_out in folder.parents:
                continue
            files = [f for f in cache.iterdir() if f.suffix in (".nbi", ".nbc", ".nbdeps")]
            if files:
                sub = dest / _numba_subdir(folder)
                sub.mkdir(parents=True, exist_ok=True)
                for f in files:
                    shutil.copy2(f, sub / f.name)
                    copied += 1
    return copied


def _demo(env: dict) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-m", "exsim.replay.cli", "demo"], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, done.stderr


def _stable(out: str) -> list[str]:
    """The demo's stdout without what differs between runs (rates, seconds, the scratch path)."""
    drop = ("msgs/s", "simulated default")
    return [line for line in out.splitlines() if not any(d in line for d in drop)]


def test_a_cold_demo_compiles_the_codecs_in_a_child_and_prints_what_a_warm_one_does(tmp_path):
    warm_out, warm_err = _demo(dict(os.environ, EXSIM_COMPILE_NOTICE="1"))
    assert "compil" not in warm_err + warm_out          # this checkout's cache is warm
    cache = tmp_path / "cache"
    if _copy_warm_cache(cache, REPO / "store" / "codecs") == 0:
        pytest.skip("this checkout's numba cache is not beside its sources")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), EXSIM_COMPILE_NOTICE="1")
    env.pop("EXSIM_COMPILE_CHILDREN", None)
    cold_out, cold_err = _demo(env)
    first = cold_err.splitlines()[0]
    assert first.startswith("exsim: compiling numba kernels on first use"), cold_err
    assert "the store's codecs in a child process (pid" in first
    assert "the verifier" not in first                   # warm in the copy: not recompiled
    assert "compiled the store's codecs in a child process in" in cold_err
    assert "failed" not in cold_err
    assert _stable(cold_out) == _stable(warm_out)
    # the copy is now warm: a second run starts no child and says nothing about compiling
    again_out, again_err = _demo(env)
    assert "compil" not in again_err and _stable(again_out) == _stable(warm_out)
