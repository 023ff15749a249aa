"""Crash-test child: journals batches into a data directory and reports each acknowledged range.

Used two ways: forked by tests (``run``, writing to a pipe: starting a fresh interpreter per
trial would cost a second each) and as a script (``python tests/store_tests/store_crash_child.py DIR N
[fake|real] [many]``, printing to stdout) for subprocess trials and the longer soak. Each line is
``ACK first last`` once ``Session.process`` returned, i.e. the batch is durable.

Batches are a pure function of their first seq (``batch_for``), so the parent can rebuild every
expected row by replaying the same batches through a fresh engine.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from store_fixtures import FakeEngine, make_orders  # noqa: E402

OPTIONS = dict(durability="fsync", seal_every=1500, checkpoint_every=1100, wal_rotate_bytes=48 << 10)
N_SYMBOLS = 3


def batch_size(first_seq: int) -> int:
    """Deterministic, varied batch sizes: 40 .. 299 rows."""
    return 40 + (first_seq * 2654435761) % 260


def batch_for(first_seq: int) -> np.ndarray:
    """The order batch that starts at ``first_seq``."""
    o = make_orders(batch_size(first_seq), seed=first_seq, n_symbols=N_SYMBOLS,
                    ts0=1_700_000_000_000_000_000 + first_seq * 1000)
    return o


def new_engine(kind: str):
    """A fresh engine with the test symbols: the fake one or exchange.Engine."""
    if kind == "real":
        from exsim.exchange import Engine

        eng = Engine()
    else:
        eng = FakeEngine()
    for i in range(N_SYMBOLS):
        eng.add_symbol(f"S{i}")
    return eng


def open_or_create(data_dir: str, kind: str, **options):
    from exsim.store import Session

    opts = {**OPTIONS, **options}
    if os.path.exists(os.path.join(data_dir, "catalog.sqlite")):
        s = Session.open(data_dir, **opts)
    else:
        s = Session.create(data_dir, new_engine(kind), run_info={"scenario": "crash"}, **opts)
    # why: with the real engine, ``process`` journals each batch as a multi-part record (parts
    # encoded while the next slice is matched); these small batches get parts of 32+ messages,
    # so kills also land between parts (the fake engine's outputs depend on how a batch is cut)
    s.PART_MIN = 32
    return s


def run(data_dir: str, n_batches: int, out, kind: str = "fake", many: bool = False, **options) -> None:
    """Journal ``n_batches`` batches, writing ``ACK first last`` lines to ``out`` (a text file).

    ``many``: through ``Session.process_many`` (pipelined: the next batch is matched while this
    one is written and fsynced on the writer thread) instead of one ``process`` call each.
    """
    s = open_or_create(data_dir, kind, **options)
    if many:
        sent = []

        def batches():
            for _ in range(n_batches):
                first = s.engine.seq + 1   # the engine has matched every batch sent so far
                o = batch_for(first)
                sent.append((first, first + o.size - 1))
                yield o

        for i, _ in enumerate(s.process_many(batches(), depth=3)):
            out.write(f"ACK {sent[i][0]} {sent[i][1]}\n")
            out.flush()
    else:
        for _ in range(n_batches):
            first = s.engine.seq + 1
            s.process(batch_for(first))
            out.write(f"ACK {first} {s.engine.seq}\n")
            out.flush()
    s.close()
    out.write("DONE\n")
    out.flush()


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), sys.stdout, sys.argv[3] if len(sys.argv) > 3 else "fake",
        many=len(sys.argv) > 4 and sys.argv[4] == "many")
