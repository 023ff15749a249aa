"""The session with the real exchange.Engine: journal, crash, reopen, identical state and outputs."""

import numpy as np
import pytest

from exsim.store import Session, read

exchange = pytest.importorskip("exsim.exchange")
uniform = pytest.importorskip("exsim.scenarios.generators.uniform")


def _flow(n=6000, seed=3):
    return uniform.uniform_flow(n, seed, n_symbols=2)


def _engine():
    eng = exchange.Engine(stp="cancel_resting")
    eng.add_symbol("AAA", tick_size=1)
    eng.add_symbol("BBB", tick_size=1)
    return eng


def test_reopened_session_matches_an_uninterrupted_engine(tmp_path):
    flow, ref = _flow(), _engine()
    ref_res = [ref.process(flow[i:i + 1000]) for i in range(0, flow.size, 1000)]
    s = Session.create(tmp_path, _engine(), checkpoint_every=2500, seal_every=1500)
    for i in range(0, 3000, 1000):
        s.process(flow[i:i + 1000])
    s.wal.close()                                   # crash: no final seal or checkpoint
    s = Session.open(tmp_path)
    assert s.engine.seq == 3000
    later = [s.process(flow[i:i + 1000]) for i in range(3000, flow.size, 1000)]
    assert s.engine.state_hash() == ref.state_hash()
    assert all(np.array_equal(a.fills, b.fills) for a, b in zip(later, ref_res[3:]))
    s.close()
    fills = np.concatenate([r.fills for r in ref_res])
    assert np.array_equal(read(tmp_path, "fills"), fills)
    events = np.concatenate([r.events for r in ref_res])
    assert np.array_equal(read(tmp_path, "events", symbol="BBB"), events[events["symbol"] == 1])


def test_orders_with_and_without_seq_are_inverse_conversions():
    from exsim.exchange.schema import ORDER_DTYPE
    from exsim.store.tables import STORED_DTYPES, orders_with_seq, orders_without_seq
    from store_fixtures import make_orders

    o = make_orders(500, seed=4)
    stored = orders_with_seq(o, 41)
    assert stored.dtype == STORED_DTYPES["orders"] and list(stored["seq"][[0, -1]]) == [41, 540]
    back = orders_without_seq(stored)
    assert back.dtype == ORDER_DTYPE and back.tobytes() == o.astype(ORDER_DTYPE).tobytes()
    assert orders_without_seq(stored[::2]).tobytes() == o[::2].astype(ORDER_DTYPE).tobytes()
