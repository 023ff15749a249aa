"""store.read assembles its rows a block of rows at a time (``store.query._fill``); the rows
must be byte for byte those of the plain one-pass-per-column copy, across block boundaries,
for rows from segments (sliced) and from the WAL (picked by index: a ts window, a symbol)."""

import numpy as np
import pytest

import exsim.store.query as query
from exsim.store import Session, read, read_columns
from store_fixtures import FakeEngine, make_orders

BATCH = 3 * query._FILL_ROWS + 7   # parts end inside a block; every table spans several


def _one_pass(parts, cols, dest):
    """The reference: each column of each part copied in one go."""
    pos = 0
    for src, sel, n, _ in parts:
        for c in cols:
            dest[c][pos:pos + n] = src[c][sel]
        pos += n


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("blocks") / "run"
    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    s = Session.create(str(d), eng, run_info={"scenario": "blocks", "seed": 1},
                       seal_in_background=False, seal_every=10**12, checkpoint_every=10**12)
    for k in range(4):
        s.process(make_orders(BATCH, seed=k))
        if k == 1:
            s.seal()   # two batches sealed, two left in the WAL
    yield s
    s.close()


def _requests(s):
    ts = read(s, "orders", columns=["ts"])["ts"]
    lo, hi = int(ts[BATCH // 3]), int(ts[-BATCH // 2])
    return [dict(), dict(symbol="B"), dict(ts=(lo, hi)), dict(ts=(lo, hi), symbol="C"),
            dict(seq=(BATCH // 2, 3 * BATCH + 5)), dict(seq=(5, 4 * BATCH), columns=["seq", "ts"])]


@pytest.mark.parametrize("table", ["orders", "fills", "l2", "events"])
def test_rows_assembled_by_blocks_equal_the_one_pass_copy(run, table, monkeypatch):
    seen, blocked = [], query._fill

    def recording(parts, cols, dest):
        seen.extend((isinstance(sel, np.ndarray), n) for _, sel, n, _ in parts)
        blocked(parts, cols, dest)

    for kw in _requests(run):
        with monkeypatch.context() as m:
            m.setattr(query, "_fill", recording)
            got = read(run, table, **kw)
            got_cols = read_columns(run, table, **kw)
        with monkeypatch.context() as m:
            m.setattr(query, "_fill", _one_pass)
            want = read(run, table, **kw)
            want_cols = read_columns(run, table, **kw)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (table, kw)
        assert got.size > query._FILL_ROWS or kw, (table, kw)   # several blocks
        assert list(got_cols) == list(want_cols)
        for c in want_cols:
            assert np.array_equal(got_cols[c], want_cols[c]), (table, kw, c)
    # parts both ways went through the blocks: sliced (segments) and picked by index (the
    # WAL's rows in a ts window), the orders' and events' over several blocks
    assert any(not indexed for indexed, _ in seen) and any(indexed for indexed, _ in seen)
    if table in ("orders", "events"):
        assert any(indexed and n > query._FILL_ROWS for indexed, n in seen)
