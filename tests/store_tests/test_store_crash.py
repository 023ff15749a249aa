"""Crash, torn-tail and disk-full tests: kill a journaling child with SIGKILL, then reopen.

After every kill: every acknowledged batch is present bit for bit in every table, and nothing
beyond it is half present (at most the one in-flight batch, whole). Most trials use the fake
engine (fast); a few use exchange.Engine, so real outputs and real checkpoints go through the
same kills. The longer soak is benchmarks/soak_store.py.
"""

import os
import random
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from exsim.exchange.errors import WriteError
from exsim.store import Session
from exsim.store.tables import orders_with_seq
from exsim.store.wal import FILE_HEADER, wal_files
import store_crash_child as child

HERE = os.path.dirname(os.path.abspath(__file__))


class _Expected:
    """Every table's rows for seqs 1..last, by replaying the same batches on a fresh engine
    (extended incrementally: the trials of one test share a directory whose seqs only grow)."""

    def __init__(self, kind="fake"):
        self.eng, self.first = child.new_engine(kind), 1
        self.parts = {t: [] for t in ("orders", "fills", "l2", "events")}

    def upto(self, last_seq):
        while self.first <= last_seq:
            o = child.batch_for(self.first)
            r = self.eng.process(o)
            self.parts["orders"].append(orders_with_seq(o, self.first))
            for t in ("fills", "l2", "events"):
                self.parts[t].append(getattr(r, t))
            self.first += o.size
        assert self.first - 1 == last_seq, "store ends inside a batch"
        return {t: np.concatenate(v) for t, v in self.parts.items()}


def _fork_and_kill(data_dir, rng, kind="fake", many=False):
    """Fork a journaling child, SIGKILL it at a random moment; return the last acknowledged seq."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            child.run(data_dir, 10_000, os.fdopen(w, "w"), kind, many=many)
        finally:
            os._exit(0)
    os.close(w)
    acks, want, buf = 0, rng.randint(1, 8), b""
    with os.fdopen(r, "rb", buffering=0) as f:
        while acks < want:
            chunk = f.read(4096)
            if not chunk:
                break
            buf += chunk
            acks = buf.count(b"ACK")
        time.sleep(rng.random() * 0.02)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        buf += f.read()
    lines = [ln.split() for ln in buf.decode().splitlines() if ln.startswith("ACK ")]
    return int(lines[-1][2]) if lines else 0


def _check(data_dir, acked, expected=None, in_flight=1):
    s = Session.open(data_dir)
    last = s.engine.seq
    assert last >= acked
    ends, first = [acked], acked + 1   # where whole unacknowledged batches (up to in_flight) end
    for _ in range(in_flight):
        first += child.batch_size(first)
        ends.append(first - 1)
    assert last in ends, "unacknowledged data half present"
    exp = (expected or _Expected()).upto(last)
    for t in exp:
        assert np.array_equal(s.read(t), exp[t]), t
    torn = s.recovery.torn_tail
    s.close()
    return torn


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path):
    rng, data_dir, expected = random.Random(20240808), str(tmp_path / "d"), _Expected()
    for _ in range(44):
        _check(data_dir, _fork_and_kill(data_dir, rng), expected)


def test_sigkill_of_a_pipelined_child_loses_nothing_acknowledged(tmp_path):
    # process_many: up to 3 batches in flight, the writer thread writing and fsyncing while the
    # next batch is matched; a kill may land with matched, unsynced or unyielded batches
    rng, data_dir, expected = random.Random(31), str(tmp_path / "d"), _Expected()
    for _ in range(12):
        _check(data_dir, _fork_and_kill(data_dir, rng, many=True), expected, in_flight=3)


def test_sigkill_of_a_real_engine_child_loses_nothing_acknowledged(tmp_path):
    # the parent builds its reference with exchange.Engine first, so the forked children
    # inherit the loaded kernels instead of paying ~1 s each to load them
    rng, data_dir, expected = random.Random(7), str(tmp_path / "d"), _Expected("real")
    expected.upto(child.batch_size(1))
    for _ in range(6):
        _check(data_dir, _fork_and_kill(data_dir, rng, "real"), expected)


@pytest.mark.parametrize("trial,kind", [(0, "fake"), (1, "real")])
def test_sigkill_of_a_subprocess_child_loses_nothing_acknowledged(tmp_path, trial, kind):
    data_dir = str(tmp_path / "d")
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "store_crash_child.py"), data_dir, "100000", kind],
                         stdout=subprocess.PIPE, text=True)
    acked = 0
    for line in p.stdout:
        acked = int(line.split()[2])
        if acked > 3000 + 2000 * trial:
            break
    p.send_signal(signal.SIGKILL)
    p.wait()
    acked = max([acked] + [int(ln.split()[2]) for ln in p.stdout.read().splitlines() if ln.startswith("ACK")])
    _check(data_dir, acked, _Expected(kind))


def test_torn_tail_is_reported_and_everything_before_it_is_intact(tmp_path):
    data_dir = str(tmp_path / "d")
    acked = _fork_and_kill(data_dir, random.Random(1))
    _, path = wal_files(os.path.join(data_dir, "wal"))[-1]
    with open(path, "rb") as f:
        first_record = f.read()[FILE_HEADER.size:FILE_HEADER.size + 200]
    with open(path, "ab") as f:        # a record the crash cut short: its header, part of its payload
        f.write(first_record)
    s = Session.open(data_dir)
    assert s.recovery.torn_tail is not None and s.recovery.torn_tail[0] == path
    s.close()
    assert _check(data_dir, acked) is None


def _fill_disk(data_dir, w):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # get EFBIG from write() instead of dying
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
    out = os.fdopen(w, "w")
    try:
        child.run(data_dir, 10_000, out, wal_rotate_bytes=1 << 30, seal_every=10**9)
    except WriteError as e:
        out.write(f"WRITEERROR {e}\n")
    out.flush()


def test_disk_full_raises_write_error_and_loses_nothing_acknowledged(tmp_path):
    data_dir = str(tmp_path / "d")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _fill_disk(data_dir, w)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    os.waitpid(pid, 0)
    assert "WRITEERROR WAL: write of" in text and "File too large" in text
    acked = max(int(ln.split()[2]) for ln in text.splitlines() if ln.startswith("ACK"))
    assert _check(data_dir, acked) is None   # the partial record was cut by the writer itself


def _stalled_seal_child(data_dir, w):
    """Journal batches while every background seal writes one segment without fsync, says
    STALL and then hangs: the process holds unsynced, unregistered segment files when killed."""
    import threading

    import exsim.store.sealing as sealing_mod
    import exsim.store.session as session_mod

    real = sealing_mod.commit_segments
    out = os.fdopen(w, "w")

    def stalled(data_dir, built, **kw):
        if threading.current_thread() is not threading.main_thread():
            real(data_dir, built[:1], sync=False)
            out.write("STALL\n")
            out.flush()
            threading.Event().wait()
        return real(data_dir, built, **kw)

    sealing_mod.commit_segments = stalled
    start = session_mod.Session._start_seal

    def start_once(self):   # why: a second seal would wait for the stalled one; go on journaling
        start(self)
        self.seal_every = 10**12

    session_mod.Session._start_seal = start_once
    child.run(data_dir, 10_000, out)


def test_sigkill_while_the_seal_thread_holds_unsynced_segments_loses_nothing_acknowledged(tmp_path):
    data_dir = str(tmp_path / "d")
    with open(os.devnull, "w") as devnull:   # load the seal kernels here, for the child to inherit
        child.run(str(tmp_path / "warm"), 12, devnull)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _stalled_seal_child(data_dir, w)
        finally:
            os._exit(0)
    os.close(w)
    buf = b""
    with os.fdopen(r, "rb", buffering=0) as f:
        # the session thread goes on acknowledging batches while the seal thread holds its files
        while b"STALL" not in buf or b"ACK" not in buf[buf.index(b"STALL"):]:
            chunk = f.read(4096)
            assert chunk, "the child ended before its seal thread stalled"
            buf += chunk
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        buf += f.read()
    acks = [int(ln.split()[2]) for ln in buf.decode().splitlines() if ln.startswith("ACK ")]
    stall_at = buf.decode().splitlines().index("STALL")
    assert len(acks) > stall_at, "no batch was acknowledged while the seal thread held its files"
    segs = os.path.join(data_dir, "segments")
    on_disk = {os.path.relpath(os.path.join(d, n), data_dir) for d, _, ns in os.walk(segs) for n in ns}
    s = Session.open(data_dir)
    live = {r["path"] for r in s.catalog.all_segments()}
    assert on_disk - live, "the stalled seal left no unregistered file to clean up"
    s.close()
    assert _check(data_dir, acks[-1]) is None
    s = Session.open(data_dir)
    left = {os.path.relpath(os.path.join(d, n), data_dir) for d, _, ns in os.walk(segs) for n in ns}
    assert left == {r["path"] for r in s.catalog.all_segments()}   # orphans removed on open
    s.close()
