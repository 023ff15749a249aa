"""Write ``tests/golden/run_v1``: a data directory as the store wrote it on 2026-12-01.

It holds sealed segments, three checkpoints and an unsealed WAL tail left by a process that
ended without closing its session (as a crash does), so a later store must read the old
segment, checkpoint, catalog and WAL formats, recover the tail and verify and rerun the run.
``tests/golden/test_golden_outputs.py`` checks that it still does, with the digests in outputs.json.
Kept to show how the directory was made; rerunning it with newer code makes a newer directory.
"""

from __future__ import annotations

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "run_v1")


def main() -> int:
    """Write the directory (replacing it); the process exits without closing the session."""
    from exsim.exchange import Engine
    from exsim.scenarios import load_scenario
    from exsim.store import Session

    sc = load_scenario("default")
    orders = sc.generate()[:7500]
    eng = Engine()
    for s in sc.symbols:
        eng.add_symbol(s.name, tick_size=s.tick_size)
    shutil.rmtree(TARGET, ignore_errors=True)
    s = Session.create(TARGET, eng, run_info={"scenario": "default", "seed": sc.seed},
                       durability="fsync", checkpoint_every=2000, seal_every=3000,
                       seal_in_background=False)
    for lo in range(0, orders.size, 500):
        s.process(orders[lo:lo + 500])
    sys.stdout.flush()
    os._exit(0)   # why: no close, so the WAL keeps its unsealed tail


if __name__ == "__main__":
    main()
