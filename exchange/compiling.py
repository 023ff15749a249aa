"""Saying when numba compiles, and where its cache lives.

A first run compiles exsim's numba kernels (minutes on two cores); every later run loads them
from numba's on-disk cache in seconds. This module makes the first case visible and the second
silent, for the command line and the Python API alike:

- ``install()`` registers a listener for numba's ``numba:compile`` event. numba fires that event
  only for a real compile (a signature loaded from the cache fires none), so the listener speaks
  exactly when compiling happens: one notice on stderr when the process starts its first
  compile (what is compiled, where the cache goes, an estimate), a line "still compiling NAME"
  every ``HEARTBEAT_S`` while one compile runs long, and "compiled NAME in N s" after each
  compile that took over ``SHOWN_S``. A process whose kernels all come from the cache prints
  nothing.
- ``cache_location()`` says where the cache goes, ``compiled_seconds()`` how long this process
  spent compiling.
- For kernels compiled in a child process meanwhile (``replay.warmup.in_background``):
  ``cached(dispatcher)`` says whether numba's on-disk cache holds a kernel for today's source,
  ``hold(dispatchers, wait)`` makes this process's first compile-or-load of any of them call
  ``wait()`` first (so it loads what the child compiled instead of compiling it again), and
  ``announce``/``say`` print the notices for them.

Invariants:
- Never raises into the caller's compile: a failure to write the notice is swallowed (a closed
  stderr must not break a backtest).
- ``install()`` is idempotent and thread-safe; ``_cache_guard.guard`` calls it, so every module
  with cached kernels installs the listener when it is imported.
- Quiet when ``EXSIM_COMPILE_NOTICE=0`` or after ``set_quiet(True)`` (the CLI's ``--quiet``);
  the accounting (``compiled_seconds``) runs either way.
"""

from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["install", "set_quiet", "compiled_seconds", "cache_location", "say", "announce",
           "dispatchers", "cached", "hold",
           "FIRST_RUN_ESTIMATE", "KNOWN_COST_S", "HEARTBEAT_S", "SHOWN_S", "ENV_QUIET"]

ENV_QUIET = "EXSIM_COMPILE_NOTICE"   # "0": no compile notices
HEARTBEAT_S = 15.0                   # a compile running this long is reported again, and again
SHOWN_S = 2.0                        # compiles at least this long get their own "compiled" line
# What a first `exsim demo` costs on an empty cache (benchmarks/bench_compile.py on a 2-vCPU
# VM: docs/benchmarks.md, "Cold start"); the notices quote these so a user knows what to expect.
# Update them with the benchmark.
# (the wall time: on 2 free cores, the verifier and the codecs compiling in a child process
# meanwhile, replay.warmup.in_background: the child's CPU, ~150 s, is the longer of the two)
FIRST_RUN_ESTIMATE = ("a first exsim demo compiles for about 2.3 minutes of CPU in two processes "
                      "(about 80 s of wall time) and 0.94 GB of memory in the larger one")
KNOWN_COST_S = {   # CPU seconds of the longest compiles, from the same run
    "exsim.exchange.plain.process_plain": 55,
    "exsim.replay.verification.plain.check_plain": 45,
    # compiled only when a symbol's rows first need the venue/phase rules (not by a plain
    # exsim demo): measured on its own before the plain verifier kernel existed
    "exsim.replay.verification.kernel.check_symbol": 135,
    # compiled only when a batch first needs the venue rules (not by a plain exsim demo):
    # measured on its own before the plain kernel existed
    "exsim.exchange.kernels.process_batch": 350,
}

_lock = threading.Lock()
_state = {"installed": False, "quiet": None, "announced": False, "seconds": 0.0,
          "watching": False}
# thread id -> [kernel name, start, nesting depth, last reported] of its top-level compile
_running: dict[int, list] = {}


def set_quiet(quiet: bool | None) -> None:
    """Turn the compile notices off (True) or on (False) for this process; None follows
    ``EXSIM_COMPILE_NOTICE`` again. Returns None."""
    _state["quiet"] = None if quiet is None else bool(quiet)


def _quiet() -> bool:
    if _state["quiet"] is not None:
        return _state["quiet"]
    return os.environ.get(ENV_QUIET, "").strip() in ("0", "false", "no", "off")


def compiled_seconds() -> float:
    """Return the wall seconds this process has spent in top-level numba compiles of any
    kernel (0.0 when everything came from the cache, or before ``install``)."""
    return _state["seconds"]


def cache_location() -> str:
    """Return, for people, where numba keeps exsim's compiled kernels: ``NUMBA_CACHE_DIR`` when
    set (exsim sets it for a read-only install: the package's ``_configure_numba_cache``), else
    the ``__pycache__`` folders beside exsim's sources. Never raises."""
    configured = os.environ.get("NUMBA_CACHE_DIR", "")
    if configured:
        return configured
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"the __pycache__ folders under {root}"


def say(text: str) -> None:
    """Print ``exsim: TEXT`` on stderr unless the notices are off. Returns None; never raises."""
    _say(text)


def announce(text: str) -> None:
    """Print ``text`` as this process's first-compile notice, in place of the generic one (a
    caller that knows more, e.g. that groups compile in child processes, says so once). Returns
    None; never raises."""
    with _lock:
        _state["announced"] = True
    _say(text)


def _say(text: str) -> None:
    if _quiet():
        return
    try:
        sys.stderr.write(f"exsim: {text}\n")
        sys.stderr.flush()
    except Exception:   # why broad: a closed or broken stderr must not fail a compile
        pass


def _name(data) -> str:
    try:
        f = data["dispatcher"].py_func
        return f"{f.__module__}.{f.__qualname__}"
    except Exception:   # why broad: numba's event payload is not a stable API
        return "a kernel"


def _watch() -> None:
    """Say "still compiling" for every top-level compile running HEARTBEAT_S since it started or
    was last reported. One daemon thread per process, started at the first compile."""
    while True:
        time.sleep(1.0)
        now, due = time.monotonic(), []
        with _lock:
            for entry in _running.values():
                if now - entry[3] >= HEARTBEAT_S:
                    entry[3] = now
                    due.append((entry[0], now - entry[1]))
        for name, running_s in due:
            _say(f"still compiling {name} ({running_s:.0f} s)...")


def _on_start(data) -> None:
    ident = threading.get_ident()
    with _lock:
        entry = _running.get(ident)
        if entry is not None:          # a nested compile: its time is inside the outer one
            entry[2] += 1
            return
        start = time.monotonic()
        name = _name(data)
        _running[ident] = [name, start, 0, start]
        first = not _state["announced"]
        _state["announced"] = True
        if not _state["watching"]:
            _state["watching"] = True
            threading.Thread(target=_watch, name="exsim-compile-notice", daemon=True).start()
    if first:
        _say(f"compiling numba kernels on first use ({FIRST_RUN_ESTIMATE} on 2 vCPUs, once: "
             f"cached in {cache_location()}, later runs load them in seconds; "
             "`exsim warmup` compiles everything ahead)")
    if name in KNOWN_COST_S:
        _say(f"compiling {name} (about {KNOWN_COST_S[name]} s of CPU on 2 vCPUs)...")


def _on_end(data) -> None:
    ident = threading.get_ident()
    with _lock:
        entry = _running.get(ident)
        if entry is None:
            return
        if entry[2] > 0:
            entry[2] -= 1
            return
        del _running[ident]
        name, start = entry[0], entry[1]
        took = time.monotonic() - start
        _state["seconds"] += took
    if took >= SHOWN_S:
        _say(f"compiled {name} in {took:.1f} s")


def install() -> None:
    """Register the compile listener with numba (once per process; imports numba). Returns
    None; never raises (without a usable numba event API, compiles are simply not reported)."""
    with _lock:
        if _state["installed"]:
            return
        _state["installed"] = True
    try:
        from numba.core import event

        class _Listener(event.Listener):
            def on_start(self, ev):
                _on_start(ev.data)

            def on_end(self, ev):
                _on_end(ev.data)

        event.register("numba:compile", _Listener())
    except Exception:   # why broad: numba's event API is internal-ish; reporting is optional
        pass


def dispatchers(module) -> list:
    """Return the numba dispatchers with an on-disk cache (``cache=True``) defined in
    ``module`` (not those it imported from elsewhere), in name order. Never raises."""
    found = []
    for name in sorted(vars(module)):
        obj = getattr(module, name, None)
        py = getattr(obj, "py_func", None)
        if py is None or getattr(py, "__module__", None) != module.__name__:
            continue
        if getattr(getattr(obj, "_cache", None), "_cache_file", None) is not None:
            found.append(obj)
    return found


def cached(dispatcher) -> bool:
    """Return True when numba's on-disk cache holds at least one compiled signature of
    ``dispatcher`` for its source file as it is today (or this process already compiled or
    loaded one), False otherwise. Reads numba's cache index only: nothing is compiled or
    loaded. Never raises (an index that cannot be read counts as absent)."""
    if getattr(dispatcher, "signatures", None):
        return True
    try:
        # why numba's private index reader: it applies numba's own staleness rule (the source
        # file's stamp), which no public API exposes; the same call replay.simulation uses
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:   # why broad: numba internals may change; "absent" only costs a compile
        return False


class _WaitingCache:
    """Stands in for a dispatcher's numba cache: ``load_overload`` first calls ``wait()``
    (numba calls it before compiling a signature it has not got), everything else is the
    original cache's. Why at numba's cache lookup: it is the one point every first call of a
    kernel passes, from Python or from another kernel, before numba decides to compile."""

    def __init__(self, original, wait):
        self._original = original
        self._wait = wait

    def load_overload(self, sig, target_context):
        self._wait()
        return self._original.load_overload(sig, target_context)

    def __getattr__(self, name):
        return getattr(self._original, name)


def hold(disps, wait) -> "callable":
    """Make each dispatcher of ``disps`` call ``wait()`` before it next looks a signature up
    in numba's cache (that is, before it would compile one); return a function that undoes it.

    ``wait`` must return (it is called holding numba's compiler lock, so the whole process
    waits with it, which is what a process would do anyway while compiling that kernel) and
    should return quickly once its event is over. Never raises: a dispatcher whose cache
    attribute numba no longer has is left alone (it then compiles as usual).
    """
    swapped = []
    for d in disps:
        original = getattr(d, "_cache", None)
        if original is None or isinstance(original, _WaitingCache):
            continue
        try:
            d._cache = _WaitingCache(original, wait)
        except Exception:   # why broad: numba internals may change; waiting is an optimisation
            continue
        swapped.append((d, original))

    def release() -> None:
        for d, original in swapped:
            try:
                d._cache = original
            except Exception:   # why broad: as above; a left proxy only calls a finished wait
                pass
        swapped.clear()
    return release
