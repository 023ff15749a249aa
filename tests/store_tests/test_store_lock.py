"""The writer lock: one writer per data directory, refused writers write nothing, readers are free.

Second writers are real processes (forked, or a fresh interpreter for the SIGKILL case), each
bounded by a timeout.
"""

import os
import select
import signal
import subprocess
import sys
import pytest

from exsim.exchange.errors import StoreError
from exsim.store import Session, compact, read
from exsim.store.lock import DirLock, LockedError
from store_fixtures import FakeEngine, make_orders

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 20


def _session(path, **kw):
    eng = FakeEngine()
    for name in ("A", "B"):
        eng.add_symbol(name)
    return Session.create(str(path), eng, **kw)


def _in_child(fn):
    """Run ``fn()`` in a forked process; return what it returned as text, or "ExcName: msg"."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # child
        os.close(r)
        try:
            try:
                out = str(fn())
            except BaseException as e:   # why: reported to the parent, which asserts on it
                out = f"{type(e).__name__}: {e}"
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], TIMEOUT)
        assert ready, "child timed out"
        with os.fdopen(r, "rb") as f:
            return f.read().decode()
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def _snapshot(root):
    """{relative path: bytes} of every file under ``root``."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def _open(d):
    return Session.open(d, engine_class=FakeEngine)


def test_second_writer_is_refused_with_a_clear_error_and_writes_nothing(tmp_path):
    d = str(tmp_path / "d")
    s = _session(d, seal_every=10**9)
    s.process(make_orders(300))                     # unsealed: only in the WAL
    orphan = os.path.join(d, "segments", "l2", "0", ".0-1-cafe.seg.tmp")   # a seal being written
    os.makedirs(os.path.dirname(orphan))
    open(orphan, "wb").write(b"partial")
    before = _snapshot(d)
    got = _in_child(lambda: _open(d))
    assert got.startswith("LockedError") and f"pid {os.getpid()}" in got and "open for writing" in got
    assert _snapshot(d) == before                    # no sweep, no WAL repair, no catalog write
    s.close()
    assert _in_child(lambda: _open(d).close()) == "None"


def test_a_writer_killed_with_sigkill_releases_the_lock(tmp_path):
    d = str(tmp_path / "d")
    _session(d).close()
    code = ("import sys, time; sys.path.insert(0, sys.argv[2]);"
            "from store_fixtures import FakeEngine; from exsim.store import Session;"
            "s = Session.open(sys.argv[1], engine_class=FakeEngine); print('READY', flush=True);"
            "time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, d, HERE], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], TIMEOUT)
        assert ready and p.stdout.readline().strip() == "READY"
        with pytest.raises(LockedError, match=f"pid {p.pid}"):
            _open(d)
    finally:
        p.kill()
        p.wait(TIMEOUT)
    s = _open(d)                                     # the kernel dropped the dead writer's lock
    assert s.engine.seq == 0
    s.close()


def test_readers_need_no_lock_beside_a_live_writer(tmp_path):
    d = str(tmp_path / "d")
    s = _session(d, seal_every=200)
    s.process(make_orders(500))
    s.seal()
    want = read(d, "orders")["seq"]
    assert _in_child(lambda: read(d, "orders")["seq"].tolist()) == str(want.tolist())
    s.close()


def test_compacting_a_path_is_refused_while_a_writer_holds_it(tmp_path):
    d = str(tmp_path / "d")
    s = _session(d, seal_every=300)
    for i in range(4):
        s.process(make_orders(300, seed=i))
    s.seal()
    before = _snapshot(os.path.join(d, "segments"))
    assert _in_child(lambda: compact(d)).startswith("LockedError")   # another process
    with pytest.raises(LockedError, match="this process"):           # this process, by path
        compact(d)
    assert _snapshot(os.path.join(d, "segments")) == before
    assert compact(s)                                                  # the writer itself may
    s.close()
    assert _in_child(lambda: compact(d)) == "[]"                      # and anyone once it closed


def test_a_later_open_in_one_process_supersedes_the_abandoned_session(tmp_path):
    d = str(tmp_path / "d")
    old = _session(d, seal_every=10**9)
    old.process(make_orders(100))
    old.wal.close()                                  # abandoned, as if the process had crashed
    new = _open(d)
    with pytest.raises(StoreError, match="no longer holds"):
        old.process(make_orders(10))
    with pytest.raises(StoreError, match="not sealed"):
        old.close()                                  # writes nothing, releases nothing of new's
    new.process(make_orders(50, seed=1))
    new.close()
    assert read(d, "orders").size == 150


def test_a_forked_child_does_not_inherit_the_parents_lock(tmp_path):
    d = str(tmp_path / "d")
    s = _session(d)
    got = _in_child(lambda: s.process(make_orders(5)))
    assert got.startswith("StoreError") and "no longer holds" in got
    s.close()


def test_a_symlinked_lock_file_is_refused(tmp_path):
    d = tmp_path / "d"
    _session(d).close()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    os.unlink(d / "LOCK")
    os.symlink(victim, d / "LOCK")
    with pytest.raises(StoreError, match="symlink"):
        _open(str(d))
    assert victim.read_bytes() == b"keep"


def test_dirlock_is_exclusive_between_processes_and_released_on_release(tmp_path):
    lock = DirLock.acquire(tmp_path)
    assert _in_child(lambda: DirLock.acquire(tmp_path)).startswith("LockedError")
    lock.release()
    assert _in_child(lambda: DirLock.acquire(tmp_path).held) == "True"
