"""exsim itself: the batch engine (match workloads) and the L2 top-of-book kernel (l2 workloads).

Match: one ``Engine``; segment k of the workload runs on its own symbol k (a fresh book, as in
benchmarks/bench_engine.py), fed in batches of 65,536 messages with ``process(out=OutputBuffers)``; fills,
L2 updates and events are all emitted. L2: ``scenarios.top_of_book`` replays the level totals
(a book indexed by price rank, numba: memory follows the distinct prices, not the tick
range) and reports the final top of book; the rank pass is part of the timed run.
"""

from __future__ import annotations

import time

import numpy as np

from . import Outcome, Peer, Workload, top_tuple

BATCH = 65_536


class ExsimMatch(Peer):
    name = "exsim"
    kind = "match"
    package = "exsim"

    def __init__(self, label: str = "exsim"):
        self.name = label

    def prepare(self, wl: Workload):
        flow = np.concatenate(wl.segments)
        flow["symbol"] = np.repeat(np.arange(len(wl.segments), dtype=np.uint32),
                                   [len(s) for s in wl.segments])
        return flow, len(wl.segments)

    def run(self, prepared) -> Outcome:
        from exsim.exchange import Engine, OutputBuffers

        flow, nsym = prepared
        eng = Engine()
        for s in range(nsym):
            eng.add_symbol(f"S{s}")
        fills = volume = 0
        out = OutputBuffers(BATCH)
        t0 = time.perf_counter()
        for lo in range(0, len(flow), BATCH):
            res = eng.process(flow[lo: lo + BATCH], out=out)
            fills += len(res.fills)
            volume += int(res.fills["qty"].sum())
        dt = time.perf_counter() - t0
        bids, asks = eng.depth(nsym - 1, levels=1)
        top = top_tuple(bids["price"][0] if len(bids) else None, bids["qty"][0] if len(bids) else 0,
                        asks["price"][0] if len(asks) else None, asks["qty"][0] if len(asks) else 0)
        return Outcome(dt, fills=fills, volume=volume, live=eng.live_orders, top=top)


class ExsimL2(Peer):
    name = "exsim"
    kind = "l2"
    package = "exsim"

    def __init__(self, label: str = "exsim"):
        self.name = label

    def prepare(self, wl: Workload):
        (rows,) = wl.segments
        return rows, np.array([rows["seq"].max()], np.int64)

    def run(self, prepared) -> Outcome:
        from exsim.scenarios import top_of_book
        from exsim.scenarios.loaders.l2book import EMPTY_ASK, EMPTY_BID

        rows, last = prepared
        t0 = time.perf_counter()
        out = top_of_book(rows, last, 1)
        dt = time.perf_counter() - t0
        ask, ask_qty, bid, bid_qty = (int(v) for v in out[0, 0])
        return Outcome(dt, top=top_tuple(None if bid == EMPTY_BID else bid, bid_qty,
                                         None if ask == EMPTY_ASK else ask, ask_qty))
