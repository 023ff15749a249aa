"""A live writer, readers beside it and a second writer, each a real process.

The writer journals with fsync, seals every 1,000 messages, checkpoints every 1,500 and rotates
its WAL every 16 KiB, so seals, checkpoints and WAL trims race every read. Readers run
``store.read``, ``replay.rebuild`` and ``replay.verify`` in loops; each read must cover every
acknowledged batch exactly once and agree with the flow (tests/store_tests/store_concurrency_child.py).
A second writer started meanwhile must be refused, and after the writer closes, the directory
holds every acknowledged message and verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

import store_concurrency_child as child

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "store_concurrency_child.py")
WRITE_S = 8.0


def _start(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(CHILD), os.path.dirname(os.path.dirname(CHILD)),
         os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, CHILD, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _result(p, timeout=240):
    out, err = p.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    assert lines, f"child exited {p.returncode} with no report; stderr:\n{err[-3000:]}"
    return p.returncode, json.loads(lines[-1]), err


def test_readers_beside_a_live_writer_see_every_acknowledged_batch_and_a_second_writer_is_refused(
        tmp_path):
    from exsim.replay import verify
    from exsim.store import read

    d = str(tmp_path / "live")
    w = _start("writer", d, WRITE_S)
    deadline = time.monotonic() + 120   # the first run may compile the kernels
    while child.acked(d) == 0:
        assert w.poll() is None, w.communicate()
        assert time.monotonic() < deadline, "the writer acknowledged nothing"
        time.sleep(0.05)
    readers = [_start("reader", d, kind, WRITE_S - 1) for kind in child.READER_KINDS]
    try:
        code, second, err = _result(_start("second", d), timeout=120)
    finally:
        open(d + ".release", "w").close()
    assert code == 0 and "open for writing" in second["refused"], (second, err)
    reports = {}
    for kind, r in zip(child.READER_KINDS, readers):
        code, reports[kind], err = _result(r)
        assert code == 0, (kind, reports[kind], err[-2000:])
        assert reports[kind]["reads"] >= 1, (kind, reports[kind])
    code, rep, err = _result(w)
    assert code == 0, err[-2000:]
    n = rep["acked"]
    # the readers ran while the writer still wrote, not only after it finished
    assert min(r["first_ack"] for r in reports.values()) < n, (reports, n)
    orders = read(d, "orders")
    assert np.array_equal(orders["seq"], np.arange(1, n + 1))          # nothing acknowledged lost
    assert np.array_equal(orders["order_id"], child.flow()["order_id"][:n])
    assert verify(d).ok
