"""The kernel's short paths for plain messages (``kernels._plain_path``) give exactly the rows of
its general path.

A symbol with a dynamic band of 100% (10,000 bps) never interrupts these flows (their prices stay
within a few hundred ticks of 100,000) but is not plain, so every message on it takes the general
path; the same flow on a plain symbol takes the short ones. Rows, counts and checkpoints must be
byte-identical, duplicate ids, unknown ids, other traders' cancels and self-trade prevention
included.
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import Engine, Kind
from exsim.exchange.schema import Reason
from exsim.scenarios.generators.uniform import uniform_flow


def _hostile(flow, seed):
    """``flow`` with some NEW ids repeated (DUPLICATE_ID), some cancels of ids never sent
    (UNKNOWN_ID) and some cancels sent by another trader (NOT_OWNER under ownership)."""
    rng = np.random.default_rng(seed)
    f = flow.copy()
    new = np.flatnonzero(f["kind"] == Kind.NEW)
    cancel = np.flatnonzero(f["kind"] == Kind.CANCEL)
    dup = rng.choice(new[len(new) // 2:], 40, replace=False)
    f["order_id"][dup] = f["order_id"][rng.choice(new[: len(new) // 2], 40)]
    f["order_id"][rng.choice(cancel, 40, replace=False)] = 1 << 60
    f["trader"][rng.choice(cancel, 40, replace=False)] += 7
    return f


def _rows(flow, n_symbols, stp, ownership, band_bps):
    eng = Engine(stp, ownership=ownership)
    for s in range(n_symbols):
        eng.add_symbol(f"S{s}", dynamic_band_bps=band_bps)
    out = [[t.tobytes() for t in eng.process(flow[lo: lo + 700])]
           for lo in range(0, len(flow), 700)]
    return out, eng


@pytest.mark.parametrize("stp,ownership", [("none", True), ("cancel_resting", True),
                                           ("cancel_both", False)])
def test_plain_paths_write_the_general_paths_rows(stp, ownership):
    flow = _hostile(uniform_flow(n=6_000, seed=11, n_symbols=3), seed=11)
    short, a = _rows(flow, 3, stp, ownership, 0)
    general, b = _rows(flow, 3, stp, ownership, 10_000)
    assert short == general
    # the checkpoints differ in the band option only: the books and counters are the same
    assert [a.orders(s).tobytes() for s in range(3)] == [b.orders(s).tobytes() for s in range(3)]
    assert a.seq == b.seq == len(flow) and a.live_orders == b.live_orders


def test_the_flow_exercises_every_short_path_outcome():
    flow = _hostile(uniform_flow(n=6_000, seed=11, n_symbols=3), seed=11)
    eng = Engine()
    for s in range(3):
        eng.add_symbol(f"S{s}")
    res = eng.process(flow)
    reasons = {int(r) for r in res.events["reason"]}
    assert {int(Reason.DUPLICATE_ID), int(Reason.UNKNOWN_ID), int(Reason.NOT_OWNER),
            int(Reason.USER_CANCEL)} <= reasons
    assert len(res.fills) > 0
