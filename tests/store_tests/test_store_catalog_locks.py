"""A long-lived Reader keeps its SQLite locks while its process opens the catalog again.

Closing any descriptor of a file drops every POSIX lock the process holds on it (sqlite.org,
"How To Corrupt An SQLite Database File", 2.2). The catalog's header check used to open and
close ``catalog.sqlite`` with ``open()``: a process with a live ``Reader`` that also called
``read(path)`` lost the Reader's locks, a writer in another process that closed took itself for
the last connection and removed ``-wal``/``-shm``, and after it reopened and sealed, the Reader
returned the old rows without an error. Two real processes here: this one (the Reader and
``read(path)`` calls) and a writer that journals, closes, reopens and seals.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

N = 4000

WRITER = textwrap.dedent(f"""
    import sys
    from exsim.exchange import Engine
    from exsim.scenarios import uniform_flow
    from exsim.store import Session

    d = sys.argv[1]
    flow = uniform_flow({N}, seed=3, n_symbols=2)
    eng = Engine()
    for s in ("S0", "S1"):
        eng.add_symbol(s)
    s = Session.create(d, eng, seal_every=10**9)      # rows stay in the WAL until close
    s.process(flow[:{N} // 2])
    print("first half", flush=True)
    sys.stdin.readline()             # the reader process opened its Reader and read(path)
    s.close()                        # the last connection, as far as this process can tell
    s = Session.open(d)
    s.process(flow[{N} // 2:])
    s.close()                        # seals the second half
    print("sealed", flush=True)
""")


def test_a_reader_beside_read_calls_sees_a_writer_that_closes_reopens_and_seals(tmp_path):
    from exsim.store import Catalog, Reader, read

    d = str(tmp_path / "run")
    w = subprocess.Popen([sys.executable, "-c", WRITER, d], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline().strip() == "first half", w.communicate(timeout=60)
        with Reader(d) as r:
            assert r.read("orders").size == N // 2
            # each of these opens the catalog again beside the Reader's connection
            assert read(d, "orders").size == N // 2
            Catalog(d, readonly=True).close()
            w.stdin.write("\n")
            w.stdin.flush()
            out, err = w.communicate(timeout=240)
            assert w.returncode == 0 and "sealed" in out, err[-3000:]
            got = r.read("orders")
            assert got["seq"].tolist() == list(range(1, N + 1))
            assert r.read("fills").size == read(d, "fills").size > 0
        assert read(d, "orders")["seq"].tolist() == list(range(1, N + 1))
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
