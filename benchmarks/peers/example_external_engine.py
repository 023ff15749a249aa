"""An example of the command ``ExternalEngine`` runs (benchmarks/peers/external_peer.py), in
Python so that it runs anywhere: replace it with your C, C++ or Rust engine's binary, which reads
the same files and prints the same line.

    python benchmarks/peers/example_external_engine.py segment0.csv [segment1.csv ...]

Each file is one fresh book in exsim's generic order-flow format; this example parses it with
exsim's own loader and matches it with an exsim Engine, timing only the matching, then prints
one JSON line: {"seconds", "fills", "volume", "live", "top": [bid, bid_qty, ask, ask_qty]}.
"""

from __future__ import annotations

import json
import sys
import time


def main(paths: list[str]) -> dict:
    """Match each file on a fresh book; return (and print) the result line's fields."""
    from exsim.exchange import Engine
    from exsim.scenarios.loaders.generic import load_generic

    seconds, fills, volume, live, top = 0.0, 0, 0, 0, [None, 0, None, 0]
    warmed = False
    for path in paths:
        flow = load_generic(path)                # parsing: not part of the timed matching
        eng = Engine()
        for s in flow.symbols:
            eng.add_symbol(s.name, tick_size=s.tick_size)
        if not warmed:
            # why: the first process() call loads the compiled kernels (a compiled binary has
            # no such step); one message on a scratch engine keeps it out of the timing
            scratch = Engine()
            for s in flow.symbols:
                scratch.add_symbol(s.name, tick_size=s.tick_size)
            scratch.process(flow.orders[:1])
            warmed = True
        t0 = time.perf_counter()
        res = eng.process(flow.orders)
        seconds += time.perf_counter() - t0
        fills += len(res.fills)
        volume += int(res.fills["qty"].sum())
        live += eng.live_orders
        bids, asks = eng.depth(flow.symbols[0].name, levels=1)
        top = [int(bids["price"][0]) if len(bids) else None, int(bids["qty"][0]) if len(bids) else 0,
               int(asks["price"][0]) if len(asks) else None, int(asks["qty"][0]) if len(asks) else 0]
    result = {"seconds": seconds, "fills": fills, "volume": volume, "live": live, "top": top}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
