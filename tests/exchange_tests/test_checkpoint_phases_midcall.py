"""A checkpoint taken in the middle of a call restores to an engine that goes on exactly as the
one that never stopped: the same bytes of fills, L2 and events for the rest of the day (the
uncross included) and the same final checkpoint, from every seq of the day
(tests/replay_tests/phase_day.py). Needs the engine that implements trading phases."""

from __future__ import annotations

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.schema import CALL_PHASES
from phase_day import AUC, day_flow, engine


def _run(eng, orders):
    res = eng.process(orders)
    return res.fills.tobytes(), res.l2.tobytes(), res.events.tobytes()


def test_restoring_at_every_seq_of_the_day_changes_nothing_after_it():
    orders = day_flow()
    whole = engine()
    want = _run(whole, orders)
    final = whole.checkpoint()
    in_call = 0
    for k in range(1, orders.size):
        eng = engine()
        head = _run(eng, orders[:k])
        blob = eng.checkpoint()
        again = Engine.restore(blob)
        assert again.checkpoint() == blob and again.checkpoint_equals(blob), k
        assert (again.phase(AUC), again.indicative(AUC)) == (eng.phase(AUC), eng.indicative(AUC))
        in_call += eng.phase(AUC) in CALL_PHASES
        tail = _run(again, orders[k:])
        assert tuple(h + t for h, t in zip(head, tail)) == want, k
        assert again.checkpoint() == final, k
    assert in_call >= 5   # several restores landed in a call
