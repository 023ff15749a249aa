"""Run a workload through PyPI ``matching-engine`` (needs Python >= 3.12). Imports only numpy and
matching_engine, so it also runs as a script under another interpreter:

    python _matching_engine_worker.py FLOW.npz [--wal DIR] [--sync-every N]

prints one JSON object: seconds (the engine's work only), fills, volume, live, top, version.
FLOW.npz holds arrays seg0, seg1, ... of (kind, side, order_id, price, qty) int64 columns, kind 0
new (GTC limit), 1 cancel; each segment runs on a fresh engine (and a fresh journal).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def build(columns: np.ndarray) -> list:
    """SequencedCommands for one segment (account 1 for all, self-trade prevention off)."""
    from matching_engine import CancelOrder, NewOrder, SelfTradePrevention, SequencedCommand, Side

    stp, buy, sell = SelfTradePrevention.NONE, Side.BUY, Side.SELL
    out = []
    for i, (kind, side, oid, price, qty) in enumerate(columns.tolist()):
        cmd = (NewOrder(oid, 1, buy if side == 0 else sell, price, qty, stp=stp) if kind == 0
               else CancelOrder(oid, 1))
        out.append(SequencedCommand(i + 1, i + 1, cmd))
    return out


def run(segments: list, wal_dir: str | None, sync_every: int = 65_536) -> dict:
    import matching_engine
    from matching_engine.engine import MatchingEngine
    from matching_engine.events import Trade

    dt = 0.0
    fills = volume = live = 0
    eng = None
    for k, cmds in enumerate(segments):
        eng = MatchingEngine()
        process = eng.process
        if wal_dir is None:
            t0 = time.perf_counter()
            for sc in cmds:
                for ev in process(sc):
                    if type(ev) is Trade:
                        fills += 1
                        volume += ev.qty
            dt += time.perf_counter() - t0
        else:
            from matching_engine.journal import Journal

            journal = Journal(Path(wal_dir) / f"seg{k}", fsync=True)
            t0 = time.perf_counter()
            journal.open(1)
            append, sync = journal.append, journal.sync
            for i, sc in enumerate(cmds, 1):
                append(sc)
                if i % sync_every == 0:
                    sync()          # group commit: one write + fsync for the batch
                for ev in process(sc):
                    if type(ev) is Trade:
                        fills += 1
                        volume += ev.qty
            sync()
            journal.close()
            dt += time.perf_counter() - t0
        live += len(eng.book)
    bid, ask = eng.book.best_bid(), eng.book.best_ask()
    depth = eng.book.depth(1)
    bq = depth.bids[0].qty if bid is not None else 0
    aq = depth.asks[0].qty if ask is not None else 0
    return {"seconds": dt, "fills": fills, "volume": volume, "live": live,
            "top": [bid, bq, ask, aq], "version": matching_engine.__version__}


def main(argv: list[str]) -> None:
    path, wal, sync_every = argv[0], None, 65_536
    if "--wal" in argv:
        wal = argv[argv.index("--wal") + 1]
    if "--sync-every" in argv:
        sync_every = int(argv[argv.index("--sync-every") + 1])
    with np.load(path) as z:
        segs = [build(z[f"seg{i}"]) for i in range(len(z.files))]
    print(json.dumps(run(segs, wal, sync_every)))


if __name__ == "__main__":
    if "--version" in sys.argv:
        import matching_engine

        print(matching_engine.__version__)
    else:
        with tempfile.TemporaryDirectory():
            main(sys.argv[1:])
