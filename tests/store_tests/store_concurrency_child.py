"""Child processes of tests/store_tests/test_store_concurrency.py: a writer, readers, a second writer.

    python tests/store_tests/store_concurrency_child.py writer DIR SECONDS
    python tests/store_tests/store_concurrency_child.py reader DIR KIND SECONDS
    python tests/store_tests/store_concurrency_child.py second DIR

The writer journals a seeded two-symbol flow in small batches (sealing, checkpointing, rotating
and trimming its WAL all the time) and, after each batch returns (acknowledged), writes the
acknowledged seq to ``DIR.acked``. A reader loops for SECONDS over one kind of read (``read``,
``book_at``, ``verify``), each time first taking the acknowledged seq A, then checking that what
it read covers at least 1..A exactly once and agrees with the flow itself; it prints one JSON
line of counts, or exits 1 naming the first disagreement. ``second`` tries to open DIR for
writing and prints what happened.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

SYMBOLS = ("S0", "S1")
N = 60_000        # messages of the flow (the writer stops earlier if its time is up)
BATCH = 200
READER_KINDS = ("read", "book_at", "verify")   # the reader processes the writer waits for


def flow() -> np.ndarray:
    """The seeded flow every process derives on its own (same bytes in each)."""
    from exsim.scenarios import uniform_flow

    return uniform_flow(N, seed=11, n_symbols=len(SYMBOLS))


def engine():
    from exsim.exchange import Engine

    eng = Engine()
    for s in SYMBOLS:
        eng.add_symbol(s)
    return eng


def acked(d: str) -> int:
    """The seq the writer last reported as acknowledged (0 before its first batch)."""
    try:
        with open(d + ".acked") as f:
            return int(f.read() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def writer(d: str, seconds: float) -> int:
    from exsim.store import Session

    orders = flow()
    s = Session.create(d, engine(), durability="fsync", seal_every=1_000, checkpoint_every=1_500,
                       wal_rotate_bytes=16 << 10)
    end = time.monotonic() + seconds
    pause = seconds / (orders.size / BATCH)   # why: the writer must still run while readers do
    quarter = orders.size // 4 // BATCH * BATCH
    n = 0
    for lo in range(0, orders.size, BATCH):
        if lo == quarter:
            # why: on a loaded machine a reader can take longer to start (imports, kernel cache
            # loads) than the writer's whole flow; the last three quarters wait for every
            # reader's first read, so the readers do run beside a writer that is still writing
            _wait_for(lambda: all(os.path.exists(f"{d}.seen-{k}") for k in READER_KINDS), 120)
            end = max(end, time.monotonic() + seconds / 2)
        time.sleep(pause)
        s.process(orders[lo:lo + BATCH])
        n = lo + min(BATCH, orders.size - lo)
        tmp = d + ".acked.tmp"
        with open(tmp, "w") as f:
            f.write(str(n))
        os.replace(tmp, d + ".acked")
        if time.monotonic() > end:
            break
    # why: the test's second writer must meet an open writer however slowly it starts on a
    # loaded machine; the test releases this one once the second has been refused
    release = time.monotonic() + 120
    while not os.path.exists(d + ".release") and time.monotonic() < release:
        time.sleep(0.02)
    s.close()
    print(json.dumps({"acked": n}))
    return 0


def _wait_for(ready, seconds: float) -> None:
    """Sleep until ``ready()`` is true or ``seconds`` have passed."""
    give_up = time.monotonic() + seconds
    while not ready() and time.monotonic() < give_up:
        time.sleep(0.02)


def _fail(msg: str) -> int:
    print(json.dumps({"error": msg}))
    return 1


def reader(d: str, kind: str, seconds: float) -> int:
    from exsim.replay import book_at, verify
    from exsim.store import read

    orders = flow()
    end = time.monotonic() + seconds
    done, min_seen = 0, None
    while time.monotonic() < end:
        a = acked(d)
        if a == 0:
            time.sleep(0.01)
            continue
        if kind == "read":
            got = read(d, "orders")
            if got.size < a or not np.array_equal(got["seq"], np.arange(1, got.size + 1)):
                return _fail(f"read orders after ack {a}: {got.size} rows, seqs not exactly "
                             f"1..{got.size} (a gap or a short read)")
            if not np.array_equal(got["order_id"], orders["order_id"][:got.size]):
                return _fail(f"read orders after ack {a}: rows differ from the flow")
            for t in ("fills", "l2", "events"):
                rows = read(d, t, seq=(1, a))
                if rows.size and (np.diff(rows["seq"]) < 0).any():
                    return _fail(f"read {t}: rows out of seq order")
        elif kind == "book_at":
            seq = int(a)
            eng = engine()
            eng.process(orders[:seq])
            for sym in SYMBOLS:
                view = book_at(d, sym, seq=seq, depth=None)
                bids, asks = eng.depth(sym, levels=1 << 30)
                if not (np.array_equal(view.bids, bids) and np.array_equal(view.asks, asks)):
                    return _fail(f"book_at {sym} seq {seq} differs from the flow's own book")
        elif kind == "verify":
            rep = verify(d)
            if not rep.ok:
                return _fail(f"verify after ack {a}: {rep.violations[:3]}")
        else:
            return _fail(f"unknown reader kind {kind}")
        done += 1
        if min_seen is None:
            open(f"{d}.seen-{kind}", "w").close()    # the writer waits for these (writer())
        min_seen = a if min_seen is None else min(min_seen, a)
    print(json.dumps({"reads": done, "first_ack": min_seen, "last_ack": acked(d)}))
    return 0


def second(d: str) -> int:
    from exsim.store import Session
    from exsim.store.lock import LockedError

    try:
        Session.open(d)
    except LockedError as e:
        print(json.dumps({"refused": str(e)}))
        return 0
    print(json.dumps({"opened": True}))
    return 1


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "writer":
        sys.exit(writer(d, float(sys.argv[3])))
    if mode == "reader":
        sys.exit(reader(d, sys.argv[3], float(sys.argv[4])))
    sys.exit(second(d))
