"""Properties of the engine, checked after every batch of random flows.

The Ledger (conftest.py) rebuilds every order's life from fills and events alone, so these checks
do not trust the engine's own bookkeeping: never crossed, fills = events' filled_qty, quantities
conserved across fills, cancels and modifies, FIFO at every level, L2 totals = resting orders.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from exsim.exchange.schema import CHECKPOINT_DTYPE

from conftest import (
    STP_MODES, Ledger, assert_same_outputs, cut_points, flows,
    make_book, random_flow, run, split,
)

TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=80, deadline=None)
@given(orders=flows(), data=st.data())
def test_engine_keeps_book_invariants_after_every_batch(stp, orders, data):
    engine, ledger = make_book("engine", stp), Ledger()
    for batch in split(orders, data.draw(cut_points(len(orders)))):
        ledger.feed(batch, engine.process(batch))
        ledger.check(engine)


@pytest.mark.parametrize("stp", STP_MODES)
def test_engine_keeps_invariants_on_a_long_seeded_flow(stp):
    engine, ledger = make_book("engine", stp), Ledger()
    orders = random_flow(seed=11, n=6000)
    for batch in split(orders, range(0, len(orders), 750)):
        ledger.feed(batch, engine.process(batch))
        ledger.check(engine)


def test_results_of_batches_concatenate_to_the_bytes_of_one_whole_batch():
    # Journals and hashes see bytes: batching and Result.concat must not change a single one
    # (no seq/trade_id drift, no uninitialised padding; a freed 0xFF block exposes the latter).
    orders = random_flow(seed=5, n=600)
    whole = make_book("engine", "cancel_resting").process(orders)
    engine = make_book("engine", "cancel_resting")
    results = [engine.process(b) for b in split(orders, range(0, 600, 60))]
    junk = np.full(sum(t.nbytes for t in whole), 0xFF, np.uint8)
    del junk
    joined = type(results[0]).concat(results)
    assert [t.tobytes() for t in joined] == [t.tobytes() for t in whole]


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=40, deadline=None)
@given(orders=flows(), data=st.data())
def test_restored_checkpoint_gives_same_future_outputs_and_hash(stp, orders, data):
    at = data.draw(st.integers(0, len(orders)))
    original = make_book("engine", stp)
    original.process(orders[:at])
    restored = type(original).restore(original.checkpoint())
    assert restored.state_hash() == original.state_hash() and restored.seq == original.seq
    assert_same_outputs(restored.process(orders[at:]), original.process(orders[at:]))
    assert restored.state_hash() == original.state_hash()


def _with_crc(body: bytes) -> bytes:
    import crc32c
    return body + crc32c.crc32c(body).to_bytes(4, "little")


@pytest.mark.parametrize("stp", STP_MODES)
@settings(max_examples=30, deadline=None)
@given(orders=flows(), data=st.data())
def test_checkpoint_equals_agrees_with_comparing_checkpoint_bytes(stp, orders, data):
    # checkpoint_equals checks rows in place by id lookups; it must answer exactly what
    # comparing the serialised bytes answers, for the engine's own checkpoint, an earlier one,
    # and blobs altered the ways a wrong state would differ (a field, queue order, level order,
    # a missing order) with a valid CRC
    at = data.draw(st.integers(0, len(orders)))
    engine = make_book("engine", stp)
    engine.process(orders[:at])
    earlier = engine.checkpoint()
    engine.process(orders[at:])
    own = engine.checkpoint()
    blobs = [own, earlier, own[:-1], own[:-4] + bytes(4)]
    hlen = int.from_bytes(own[12:16], "little")
    start, n = 24 + hlen, engine.live_orders
    size = CHECKPOINT_DTYPE.itemsize
    if n:
        rows = np.frombuffer(own, CHECKPOINT_DTYPE, n, start).copy()
        i = data.draw(st.integers(0, n - 1))
        field = data.draw(st.sampled_from(["price", "qty", "filled", "trader", "order_id"]))
        bent = rows.copy()
        bent[field][i] ^= 1     # a changed value that never overflows the field
        blobs.append(_with_crc(own[:start] + bent.tobytes()))
        if n > 1:
            j = data.draw(st.integers(0, n - 2))
            swapped = rows.copy()
            swapped[[j, j + 1]] = swapped[[j + 1, j]]
            blobs.append(_with_crc(own[:start] + swapped.tobytes()))
        fewer = own[:start - 8] + (n - 1).to_bytes(8, "little") + np.delete(rows, i).tobytes()
        blobs.append(_with_crc(fewer))
    assert len(own) == start + n * size + 4
    for blob in blobs:
        assert engine.checkpoint_equals(blob) == (engine.checkpoint() == blob)
    assert engine.checkpoint_equals(own)


_FRESH_PROCESS_SCRIPT = """
import hashlib, sys
import numpy as np
sys.path.insert(0, {tests!r})
from conftest import make_book, run
orders = np.load({path!r})
print(hashlib.sha256(b"".join(t.tobytes() for t in run(make_book("engine", "cancel_both"), orders,
                                                       range(0, len(orders), 500)))).hexdigest())
"""


def test_same_input_gives_identical_bytes_in_a_fresh_process(tmp_path):
    orders = random_flow(seed=9, n=5000)
    np.save(tmp_path / "flow.npy", orders)
    here = run(make_book("engine", "cancel_both"), orders, range(0, len(orders), 500))
    script = _FRESH_PROCESS_SCRIPT.format(tests=str(TESTS), path=str(tmp_path / "flow.npy"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == hashlib.sha256(b"".join(t.tobytes() for t in here)).hexdigest()
