"""The project's pure-Python reference engine (tests/model.py): same semantics as exsim, written
to be obviously right, not fast. It emits fills, L2 updates and events like the engine. Each
segment runs on a fresh ``Model`` in one ``process`` call."""

from __future__ import annotations

import time

import numpy as np

from . import Outcome, Peer, Workload, top_tuple


def _model_class():
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.model import Model

    return Model


class ReferenceModel(Peer):
    name = "reference model (tests/model.py)"
    kind = "match"

    def version(self) -> str:
        from importlib.metadata import version

        return f"exsim {version('exsim')}"

    def unavailable(self):
        try:
            _model_class()
        except ImportError as e:  # an installed exsim without its tests/
            return f"tests/model.py not importable ({e})"
        return None

    def prepare(self, wl: Workload):
        return [np.ascontiguousarray(s) for s in wl.segments]

    def run(self, prepared) -> Outcome:
        Model = _model_class()
        fills = volume = live = 0
        dt = 0.0
        for seg in prepared:
            m = Model()
            m.add_symbol("S0")
            t0 = time.perf_counter()
            res = m.process(seg)
            dt += time.perf_counter() - t0
            fills += len(res.fills)
            volume += int(res.fills["qty"].sum())
            live += len(m.orders(0))
        bids, asks = m.depth(0, levels=1)
        top = top_tuple(bids["price"][0] if len(bids) else None, bids["qty"][0] if len(bids) else 0,
                        asks["price"][0] if len(asks) else None, asks["qty"][0] if len(asks) else 0)
        return Outcome(dt, fills=fills, volume=volume, live=live, top=top)
