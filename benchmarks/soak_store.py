"""Crash soak for the store: SIGKILL a real-engine journaling child many times, check recovery each time.

Each trial starts ``tests/store_tests/store_crash_child.py DIR N real`` (a fresh interpreter that reopens the
data directory, or creates it, and journals seeded batches with fsync per batch, sealing,
checkpointing and WAL rotation as the crash tests configure it), reads its ``ACK first last`` lines,
and kills it with SIGKILL at a random moment: sometimes before it acknowledges anything (during
startup or recovery), usually after a random number of acknowledged batches plus a random delay
(mid-write, mid-seal, mid-checkpoint ...). Then the parent reopens the directory and checks:

- every acknowledged batch is present, bit for bit, in all four tables (orders, fills, l2,
  events), compared with a fresh exchange.Engine fed the same batches;
- nothing unacknowledged is half present: the store ends at the last acknowledged seq or one whole
  batch later (the batch in flight when the kill came); every other child journals through
  ``Session.process_many`` (depth 3), where up to three whole batches may be in flight;
- the reopened engine continues at the next seq, and the recovery report (torn tail) is recorded.

New rows are checked after every trial; the whole directory every ``--full-every`` trials and at
the end. Every ``--compact-every`` trials the parent also compacts the directory (zstd tier)
between kills. Not part of the test suite (it runs for minutes). Prints a summary; exit status 1
if any check failed.

Usage: python benchmarks/soak_store.py [--trials 200] [--seconds 0] [--seed 1] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "store_tests"))

import store_crash_child as child  # noqa: E402
from exsim.store import Session, compact  # noqa: E402
from exsim.store.tables import orders_with_seq  # noqa: E402

TABLES = ("orders", "fills", "l2", "events")


class Expected:
    """Every table's rows for seqs 1..last, from a fresh engine fed the same batches."""

    def __init__(self):
        self.eng, self.first = child.new_engine("real"), 1
        self.parts = {t: [] for t in TABLES}

    def upto(self, last_seq: int) -> dict:
        while self.first <= last_seq:
            o = child.batch_for(self.first)
            r = self.eng.process(o)
            self.parts["orders"].append(orders_with_seq(o, self.first))
            for t in TABLES[1:]:
                self.parts[t].append(r._asdict()[t].copy())
            self.first += o.size
        if self.first - 1 != last_seq:
            raise AssertionError(f"store ends at seq {last_seq}, inside a batch")
        out = {t: np.concatenate(v) for t, v in self.parts.items()}
        self.parts = {t: [v] for t, v in out.items()}   # why: keep concatenation linear over the run
        return out


def kill_child(data_dir: str, rng: random.Random, trial: int, many: bool = False) -> tuple[int, bool]:
    """Run the child (``many``: through Session.process_many), SIGKILL it at a random moment;
    return (last acknowledged seq, killed early)."""
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "store_tests", "store_crash_child.py"),
                          data_dir, "1000000", "real"] + (["many"] if many else []),
                         stdout=subprocess.PIPE, text=True)
    early = rng.random() < 0.1
    acked = 0
    if early:
        time.sleep(rng.random() * 1.5)   # kill during startup, numba loading or recovery
    else:
        want = rng.randint(1, 40)
        n = 0
        for line in p.stdout:
            if line.startswith("ACK"):
                acked, n = int(line.split()[2]), n + 1
                if n >= want:
                    break
        time.sleep(rng.random() * 0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    rest = p.stdout.read().splitlines()
    p.stdout.close()
    acked = max([acked] + [int(ln.split()[2]) for ln in rest if ln.startswith("ACK")])
    return acked, early


def check(data_dir: str, acked: int, prev_last: int, expected: Expected, full: bool,
          in_flight: int = 1) -> tuple[int, object]:
    """Reopen and compare; return (last seq in the store, torn tail report). ``in_flight``:
    whole unacknowledged batches the store may hold beyond ``acked`` (process_many: its depth)."""
    s = Session.open(data_dir)
    try:
        last = s.engine.seq
        if last < acked:
            raise AssertionError(f"acknowledged seq {acked} lost: store ends at {last}")
        ends, first = [acked], acked + 1
        for _ in range(in_flight):
            first += child.batch_size(first)
            ends.append(first - 1)
        if last not in ends:
            raise AssertionError(f"unacknowledged data half present: acked {acked}, store ends at {last}")
        exp = expected.upto(last)
        lo = 1 if full else max(1, prev_last + 1)
        for t in TABLES:
            want = exp[t][exp[t]["seq"] >= lo]
            got = s.read(t) if full else s.read(t, seq=(lo, last))
            if not np.array_equal(got, want):
                raise AssertionError(f"table {t} differs from the reference for seqs {lo}..{last}")
        return last, s.recovery.torn_tail
    finally:
        s.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--full-every", type=int, default=20)
    ap.add_argument("--compact-every", type=int, default=25)
    ap.add_argument("--dir", default=None, help="data directory (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    tmp = None if args.dir else tempfile.mkdtemp(prefix="soak_store_")
    data_dir = args.dir or os.path.join(tmp, "d")
    expected = Expected()
    t0 = time.perf_counter()
    stats = {"trials": 0, "early_kills": 0, "torn_tails": 0, "in_flight_batch_kept": 0,
             "compactions": 0, "full_checks": 0, "pipelined": 0, "failures": []}
    last = 0
    try:
        for trial in range(1, args.trials + 1):
            if args.seconds and time.perf_counter() - t0 > args.seconds:
                break
            many = trial % 2 == 0   # every other child pipelines through process_many
            acked, early = kill_child(data_dir, rng, trial, many)
            acked = max(acked, last)   # everything an earlier trial found is acknowledged too
            if not os.path.exists(os.path.join(data_dir, "catalog.sqlite")):
                stats["trials"] += 1
                stats["early_kills"] += early
                continue   # killed before the directory was created: nothing to check
            full = trial % args.full_every == 0
            try:
                new_last, torn = check(data_dir, acked, last, expected, full, 3 if many else 1)
            except Exception as e:   # noqa: BLE001 - a soak reports every failure and goes on
                stats["failures"].append(f"trial {trial}: {type(e).__name__}: {e}")
                print(f"FAIL trial {trial}: {type(e).__name__}: {e}", flush=True)
                break
            stats["trials"] += 1
            stats["early_kills"] += early
            stats["torn_tails"] += torn is not None
            stats["in_flight_batch_kept"] += new_last > acked
            stats["pipelined"] += many
            stats["full_checks"] += full
            last = new_last
            if trial % args.compact_every == 0:
                compact(data_dir)
                stats["compactions"] += 1
            if trial % 10 == 0:
                print(f"  trial {trial}: seq {last:,}, {time.perf_counter() - t0:.0f} s", flush=True)
        if not stats["failures"] and last:
            check(data_dir, last, 0, expected, True)
            stats["full_checks"] += 1
    except Exception as e:   # noqa: BLE001
        stats["failures"].append(f"final check: {type(e).__name__}: {e}")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    secs = time.perf_counter() - t0
    print(f"store crash soak: {stats['trials']} SIGKILLs of a real-engine child in {secs:.0f} s "
          f"(seed {args.seed})")
    print(f"  final seq {last:,}; killed before any ack {stats['early_kills']}; torn tails cut "
          f"{stats['torn_tails']}; in-flight batch found whole {stats['in_flight_batch_kept']}; "
          f"children through process_many {stats['pipelined']}; "
          f"compactions {stats['compactions']}; full checks {stats['full_checks']}")
    print(f"  failures: {len(stats['failures'])}" + "".join(f"\n    {f}" for f in stats["failures"]))
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
