"""Session lifecycle against hostile directories and failures: what open imports, what the sweep
and compaction may touch, atomic create (SIGKILLed children), one-transaction seals, and what a
failed open or close leaves held.
"""

import errno
import os
import select
import signal
import sqlite3
import sys

import numpy as np
import pytest

import exsim.store.session as session_mod
from exsim.exchange.errors import CorruptionError, StoreError, UsageError, WriteError
from exsim.store import Session, compact, read, read_checkpoint
from exsim.store.catalog import Catalog
from store_fixtures import FakeEngine, forge_catalog, make_orders


def _engine():
    eng = FakeEngine()
    for name in ("A", "B"):
        eng.add_symbol(name)
    return eng


def _session(path, **kw):
    return Session.create(str(path), _engine(), **kw)


def _open(path):
    return Session.open(str(path), engine_class=FakeEngine)


def _sealed_dir(d, batches=4):
    s = _session(d, seal_every=300)
    for i in range(batches):
        s.process(make_orders(300, seed=i))
    s.close()
    return d


def _set(d, sql, args=()):
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    con.execute(sql, args)
    con.commit()
    con.close()


# -- item 4: open imports nothing the data names ----------------------------------------------
@pytest.mark.parametrize("name", ["planted_exsim_engine:Engine", "this:Engine"])
def test_open_never_imports_the_engine_class_a_catalog_names(tmp_path, monkeypatch, name):
    d = tmp_path / "d"
    _session(d).close()
    marker = tmp_path / "code-ran"
    (d / "planted_exsim_engine.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Engine: ...\n")
    monkeypatch.syspath_prepend(str(d))             # opened from inside the directory
    monkeypatch.chdir(d)
    assert name.split(":")[0] not in sys.modules
    forge_catalog(d, "meta", "engine_class", value=name)
    with pytest.raises(StoreError, match="catalog.sqlite.*not a registered engine class.*engine_class="):
        Session.open(str(d))
    assert name.split(":")[0] not in sys.modules and not marker.exists()
    _open(d).close()                                 # the caller's class still opens it


# -- item 5: nothing outside the data directory is read or deleted ----------------------------
@pytest.mark.parametrize("sub", ["segments", "checkpoints"])
def test_a_symlinked_store_directory_is_refused_and_what_it_points_at_survives(tmp_path, sub):
    d = str(_sealed_dir(tmp_path / "d"))
    victim = tmp_path / "victim"
    os.rename(os.path.join(d, sub), victim)          # the real files, plus one of someone else's
    (victim / "precious.txt").write_bytes(b"keep me")
    os.symlink(victim, os.path.join(d, sub))
    with pytest.raises(CorruptionError, match=f"{sub}: is a symlink"):
        _open(d)
    assert (victim / "precious.txt").read_bytes() == b"keep me"


@pytest.mark.parametrize("outside", ["absolute", "relative"])
def test_compaction_never_reads_or_deletes_a_segment_outside_the_data_directory(tmp_path, outside):
    d = str(_sealed_dir(tmp_path / "d"))
    row = sorted(Catalog(d).all_segments(), key=lambda r: (r["table_name"], r["seq_lo"]))[0]
    victim = tmp_path / "victim.seg"
    os.rename(os.path.join(d, row["path"]), victim)
    path = str(victim) if outside == "absolute" else os.path.join("..", "victim.seg")
    forge_catalog(d, "segments", row["id"], path=path)
    with pytest.raises(CorruptionError, match="victim.seg"):
        compact(d)
    assert victim.exists()
    assert [r["path"] for r in Catalog(d).all_segments() if r["id"] == row["id"]] == [path]


def test_a_checkpoint_path_outside_the_data_directory_is_refused(tmp_path):
    d = str(_sealed_dir(tmp_path / "d", batches=1))
    row = Catalog(d).latest_checkpoint()
    os.rename(os.path.join(d, row["path"]), tmp_path / "ckpt.bin")
    forge_catalog(d, "checkpoints", row["seq"], path="../ckpt.bin")
    with pytest.raises(CorruptionError, match="ckpt.bin"):
        _open(d)
    with pytest.raises(CorruptionError, match="ckpt.bin"):
        read_checkpoint(d)


# -- item 3: compaction errors are StoreErrors --------------------------------------------------
def test_compacting_a_segment_whose_file_vanished_raises_a_store_error_naming_it(tmp_path):
    d = str(_sealed_dir(tmp_path / "d"))
    gone = sorted(r["path"] for r in Catalog(d).all_segments() if r["table_name"] == "l2")[0]
    os.unlink(os.path.join(d, gone))                 # e.g. a second compaction got there first
    with pytest.raises(StoreError, match=gone):
        compact(d)


def test_a_catalog_change_during_compaction_is_a_store_error_and_leaves_no_merged_file(tmp_path, monkeypatch):
    d = str(_sealed_dir(tmp_path / "d"))
    before = {r["path"] for r in Catalog(d).all_segments()}

    def changed(self, old_ids, infos, tier):
        os.unlink(os.path.join(d, infos[0].path))    # the merge is already gone, too
        raise StoreError(f"{self.path}: segments {old_ids} changed during compaction")

    monkeypatch.setattr(Catalog, "replace_segments", changed)
    with pytest.raises(StoreError, match="changed during compaction"):
        compact(d)
    files = {os.path.relpath(os.path.join(p, n), d) for p, _, ns in os.walk(os.path.join(d, "segments"))
             for n in ns}
    assert files == before


# -- item 12: create is atomic ------------------------------------------------------------------
_HOOKED = [("os", "open"), ("os", "mkdir"), ("os", "chmod"), ("os", "fsync"), ("os", "replace"),
           ("os", "rename"), ("Catalog", "set_symbols"), ("Catalog", "add_run"),
           ("Catalog", "set_meta"), ("Catalog", "add_checkpoint"), ("Catalog", "close")]


def _create_killed_at(target, k):
    """Fork a child that runs Session.create(target) and SIGKILLs itself at the k-th call of
    a hooked step; return True if it finished create without being killed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # child
        try:
            os.close(r)
            calls = [0]

            def hook(owner, name):
                real = getattr(owner, name)

                def step(*a, **kw):
                    calls[0] += 1
                    if calls[0] == k:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return real(*a, **kw)
                setattr(owner, name, step)

            for owner, name in _HOOKED:
                hook(os if owner == "os" else Catalog, name)
            _session(target)
            os.write(w, b"DONE")
        finally:
            os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 20)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        done = f.read() == b"DONE"
    assert ready, "create child timed out"
    return done


def test_create_killed_at_any_step_leaves_a_directory_that_create_or_open_accepts(tmp_path):
    complete = 0
    for k in range(1, 80):
        target = tmp_path / f"t{k}"
        if k % 2:
            target.mkdir()                           # an empty directory made for the run
        finished = _create_killed_at(str(target), k)
        if (target / "catalog.sqlite").exists():
            complete += 1
            s = _open(target)                        # complete: open restores the engine
        else:
            assert complete == 0 and (not target.exists() or os.listdir(target) == [])
            s = _session(target)                     # nothing half made: create starts again
        assert s.engine.seq == 0 and [r["name"] for r in s.catalog.symbols()] == ["A", "B"]
        s.close()
        if finished or complete == 5:                # why 5: later steps only build the Session
            break
    assert k - complete > 10, "create has too few steps before its rename to test"


def test_a_create_that_runs_out_of_space_leaves_nothing_behind(tmp_path, monkeypatch):
    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)         # the first checkpoint cannot be placed
    with pytest.raises(WriteError, match="No space left"):
        _session(tmp_path / "d")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []                # no half-made directory, no hidden leftover
    _session(tmp_path / "d").close()


def test_create_refuses_a_non_empty_directory_that_is_not_a_data_directory(tmp_path):
    (tmp_path / "notes.txt").write_bytes(b"mine")
    with pytest.raises(UsageError, match="not empty"):
        _session(tmp_path)
    assert os.listdir(tmp_path) == ["notes.txt"]


# -- item 14: a seal is one catalog transaction --------------------------------------------------
def test_a_seal_whose_metadata_write_fails_stores_no_row_twice(tmp_path, monkeypatch):
    d = str(tmp_path / "d")
    s = _session(d, seal_every=10**9)
    # why 4,000: each symbol's columns then exceed store.choice.REMEMBER_ROWS, so the seal has
    # remembered choices to write
    s.process(make_orders(4000))

    def broken(self, key, value):
        raise WriteError(f"{self.path}: cannot set {key}: disk I/O error")

    monkeypatch.setattr(Catalog, "set_meta", broken)
    s.seal()                                         # the meta goes in the seal's transaction
    monkeypatch.undo()
    s.process(make_orders(100, seed=1))
    s.close()
    assert np.array_equal(read(d, "orders")["seq"], np.arange(1, 4101))
    s = _open(d)
    assert s.catalog.get_meta("encoding_choices") not in (None, "{}")
    s.close()


# -- item 15: failed open and failed close release everything -------------------------------------
def _is_closed(catalog):
    try:
        catalog.db.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def test_a_failed_open_closes_its_catalog_and_releases_the_lock(tmp_path, monkeypatch):
    from exsim.store.lock import DirLock

    d = str(_sealed_dir(tmp_path / "d", batches=1))
    ck = os.path.join(d, Catalog(d).latest_checkpoint()["path"])
    data = bytearray(open(ck, "rb").read())
    data[-1] ^= 0xFF
    open(ck, "wb").write(bytes(data))
    opened = []

    class Recording(Catalog):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            opened.append(self)

    monkeypatch.setattr(session_mod, "Catalog", Recording)
    with pytest.raises(CorruptionError, match="checksum"):
        _open(d)
    assert opened and all(_is_closed(c) for c in opened)
    DirLock.acquire(d).release()                     # refused if this process still held it


def test_close_of_a_failed_session_raises_and_releases_everything(tmp_path, monkeypatch):
    d = str(tmp_path / "d")
    s = _session(d, seal_every=10**9)
    s.process(make_orders(200))

    def full(*a, **kw):
        raise WriteError("WAL: write failed: No space left on device")

    monkeypatch.setattr(s.wal, "append", full)
    with pytest.raises(WriteError):
        s.process(make_orders(10, seed=1))
    with pytest.raises(StoreError, match="No space left.*not sealed.*reopen"):
        s.close()
    s.close()                                        # once said, later calls are quiet
    assert _is_closed(s.catalog)
    s = _open(d)                                     # the lock was released
    assert s.engine.seq == 200
    s.close()


def test_a_with_block_failing_inside_a_failed_session_raises_its_own_error(tmp_path, monkeypatch):
    s = _session(tmp_path / "d", seal_every=10**9)
    monkeypatch.setattr(s.wal, "append", lambda *a, **kw: (_ for _ in ()).throw(WriteError("WAL: EIO")))
    with pytest.raises(WriteError, match="EIO"):
        with s:
            s.process(make_orders(10))
    _open(tmp_path / "d").close()


def test_the_next_create_removes_what_a_killed_create_left_beside_it(tmp_path):
    old = tmp_path / ".d.exsim-create-abc123"
    (old / "checkpoints").mkdir(parents=True)
    (old / "catalog.sqlite").write_bytes(b"half made")
    os.utime(old, (1, 1))                            # long before: no live creator
    fresh = tmp_path / ".d.exsim-create-new999"
    fresh.mkdir()                                    # a create that may still be running
    other = tmp_path / ".e.exsim-create-zzz"         # another target's: not ours to touch
    other.mkdir()
    os.utime(other, (1, 1))
    _session(tmp_path / "d").close()
    assert not old.exists() and fresh.exists() and other.exists()
