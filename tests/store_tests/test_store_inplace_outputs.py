"""The session lets the engine write a batch's outputs straight into the rows it journals and
seals (store.arena.TableRows.room); whatever the engine does with that room, the journaled rows
are exactly the engine's outputs."""

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import FILL_DTYPE
from exsim.store import Session
from exsim.store.arena import Arena, TableRows
from store_fixtures import FakeEngine, make_orders


def test_rows_written_into_the_room_and_committed_come_back_in_order():
    rows = TableRows(Arena(1 << 16), FILL_DTYPE, 10)
    room = rows.room()
    room[:3]["seq"] = [1, 2, 3]
    rows.commit(room[:3])
    one = np.zeros(1, FILL_DTYPE)
    one["seq"] = 4
    rows.add(one)
    room = rows.room()
    room[:2]["seq"] = [5, 6]
    rows.commit(room[:2])
    assert rows.rows()["seq"].tolist() == [1, 2, 3, 4, 5, 6]


def test_no_room_is_offered_once_rows_went_apart():
    rows = TableRows(Arena(1 << 16), FILL_DTYPE, 2)
    rows.add(np.zeros(5, FILL_DTYPE))   # does not fit: copied apart
    assert rows.room() is None


def _engine():
    eng = Engine()
    eng.add_symbol("X", tick_size=1)
    return eng


def _flow(n):
    o = make_orders(n, seed=3, n_symbols=1)
    o["kind"] = 0   # limit orders: a busy book with fills, L2 updates and events
    return o


@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize("room", [None, 0.0])   # the guessed room, or far too little of it
def test_journaled_rows_equal_a_plain_engines_outputs(tmp_path, many, room):
    flow = _flow(30_000)
    batches = [flow[i:i + 10_000] for i in range(0, flow.size, 10_000)]
    ref = _engine()
    want = [[np.array(a) for a in ref.process(b)] for b in batches]
    s = Session.create(str(tmp_path / "d"), _engine(), durability="none", wal_compress=True, journal_parts=4)
    s.PART_MIN = 1000   # several parts per batch
    if room is not None:
        s._rows_per_msg = dict.fromkeys(s._rows_per_msg, room)   # the engine must grow them
    got = list(s.process_many(iter(batches))) if many else [s.process(b) for b in batches]
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert a.tobytes() == b.tobytes()
    recs = s.unsealed_records()
    for name, k in (("fills", 0), ("l2", 1), ("events", 2)):
        journaled = np.concatenate([getattr(r, name) for r in recs])
        assert journaled.tobytes() == np.concatenate([w[k] for w in want]).tobytes()
    s.close()


def test_an_engine_that_ignores_out_is_journaled_from_its_own_arrays(tmp_path):
    eng = FakeEngine()
    eng.add_symbol("A")
    s = Session.create(str(tmp_path / "d"), eng, durability="none")
    o = make_orders(500, n_symbols=1)
    ref = FakeEngine()
    ref.add_symbol("A")
    want = ref.process(o)
    got = s.process(o)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
    rec = s.unsealed_records()[-1]
    assert rec.events.tobytes() == want.events.tobytes()
    s.close()


def test_a_strided_batch_is_journaled_as_its_rows(tmp_path):
    flow = _flow(40_000)[::2]   # not contiguous: copied row by row
    s = Session.create(str(tmp_path / "d"), _engine(), durability="none", wal_compress=True, journal_parts=4)
    s.PART_MIN = 1000
    got = s.process(flow)
    want = _engine().process(np.ascontiguousarray(flow))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
    assert s.unsealed_records()[-1].orders.tobytes() == np.ascontiguousarray(flow).tobytes()
    s.close()
