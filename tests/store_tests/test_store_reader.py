"""store.Reader: one object read call after call returns exactly what a fresh ``store.read``
returns, while a writer in the same directory journals, seals, checkpoints (trimming the WAL)
and compacts (retiring files the reader holds open); its ``last_row`` is the last row ``read``
returns; book_at and stats through a Reader equal them through the path.

The Reader tests use the store's fake engine; the book_at/stats ones use exchange.Engine on
flows without the order types of issue 15 (they do not need its engine work)."""

import numpy as np
import pytest

from exsim.exchange.errors import StoreError, UsageError
from exsim.store import Reader, Session, compact, read, read_columns
from store_fixtures import FakeEngine, make_orders

N = 300


def _session(path):
    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    return Session.create(str(path), eng, run_info={"scenario": "reader", "seed": 1},
                          seal_in_background=False, seal_every=10**12, checkpoint_every=10**12)


def _same(a, b):
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _requests(rng, last, table):
    from exsim.store.tables import table_dtype

    two = list(table_dtype(table).names[-2:])
    lo = int(rng.integers(1, max(last, 1) + 1))
    hi = int(rng.integers(lo, last + 40))
    return [dict(), dict(symbol="B"), dict(seq=(lo, hi)), dict(seq=(lo, hi), symbol=1),
            dict(seq=(lo, hi), columns=two), dict(seq=(hi + 1, hi + 10))]


def test_a_reader_follows_a_writer_that_seals_checkpoints_and_compacts(tmp_path):
    d = tmp_path / "run"
    s = _session(d)
    rng = np.random.default_rng(5)
    reader = Reader(str(d))
    try:
        seen_files = 0
        for step in range(14):
            s.process(make_orders(N, seed=step))
            if step % 3 == 1:
                s.seal()
            if step % 4 == 2:
                s.checkpoint()   # trims the sealed WAL files
            if step % 5 == 4:
                compact(s, target_rows=4 * N)   # retires segments the reader may hold open
            last = (step + 1) * N
            for table in ("orders", "fills", "l2", "events"):
                for kw in _requests(rng, last, table):
                    want = read(str(d), table, **kw)
                    assert _same(read(reader, table, **kw), want), (step, table, kw)
                    got = reader.read_columns(table, **kw)
                    assert all(np.array_equal(got[c], want[c]) for c in want.dtype.names)
            assert np.array_equal(reader.read("orders", columns=["seq"])["seq"],
                                  np.arange(1, last + 1))
            seen_files = max(seen_files, len(reader._files))
        assert seen_files > 1   # files were kept open between calls
    finally:
        reader.close()
        s.close()
    with Reader(str(d)) as r:   # after close: everything sealed
        assert _same(r.read("fills"), read(str(d), "fills"))


def test_a_reader_made_before_the_first_seal_sees_the_wal_rows_then_the_segments(tmp_path):
    d = tmp_path / "run"
    s = _session(d)
    s.process(make_orders(N, seed=1))
    with Reader(str(d)) as r:
        v = r.version()
        assert r.read("orders").size == N and r.snapshot("orders")[0] == 0
        s.seal()
        assert r.version() != v                       # the seal committed: a new snapshot
        assert r.snapshot("orders")[0] == N and r.snapshot("orders")[1]
        s.process(make_orders(N, seed=2))
        got = r.read("orders", seq=(N - 5, 2 * N))    # segment rows, then WAL rows
        assert np.array_equal(got["seq"], np.arange(N - 5, 2 * N + 1))
    s.close()


@pytest.mark.parametrize("sealed", [True, False])
def test_last_row_is_the_last_row_read_returns(tmp_path, sealed):
    d = tmp_path / "run"
    s = _session(d)
    for i in range(6):
        s.process(make_orders(N, seed=10 + i))
        if sealed and i % 2:
            s.seal()
    rng = np.random.default_rng(2)
    with Reader(str(d)) as r:
        all_orders = read(str(d), "orders")
        t0, t1 = int(all_orders["ts"].min()), int(all_orders["ts"].max())
        for _ in range(40):
            kw = {"symbol": ["A", "B", "C", None][int(rng.integers(0, 4))]}
            kind = int(rng.integers(0, 3))
            if kind != 1:
                a = int(rng.integers(1, 6 * N))
                kw["seq"] = (a, int(rng.integers(a, 6 * N + 5)))
            if kind != 0:
                a = int(rng.integers(t0 - 5, t1))
                kw["ts"] = (a, int(rng.integers(a, t1 + 5)))
            want = read(str(d), "orders", columns=["seq", "ts", "price"], **kw)
            got = r.last_row("orders", columns=["seq", "ts", "price"], **kw)
            if want.size == 0:
                assert got is None, kw
            else:
                assert {c: int(v) for c, v in got.items()} == \
                    {c: int(want[c][-1]) for c in ("seq", "ts", "price")}, kw
    s.close()


@pytest.mark.parametrize("sealed", [True, False])
def test_last_row_of_columns_constant_in_a_block_is_the_last_row_read_returns(tmp_path, sealed,
                                                                             monkeypatch):
    # events' phase and symbol hold one value per symbol here: a block starting inside the
    # window answers from its column headers without decoding seq; any other request decodes
    from exsim.store.segment import SegmentFile

    answered = []
    constant = SegmentFile.constant

    def counting(self, name, b):
        v = constant(self, name, b)
        answered.append(v is not None)
        return v

    monkeypatch.setattr(SegmentFile, "constant", counting)
    d = tmp_path / "run"
    s = _session(d)
    for i in range(6):
        s.process(make_orders(N, seed=20 + i))
        if sealed:
            s.seal()
    rng = np.random.default_rng(4)
    with Reader(str(d)) as r:
        for _ in range(60):
            a = int(rng.integers(1, 6 * N))
            kw = {"symbol": ["A", "B", "C", None][int(rng.integers(0, 4))],
                  "seq": (a, int(rng.integers(a, 6 * N + 5)))}
            cols = [["phase"], ["phase", "symbol"], ["phase", "leaves_qty"]][int(rng.integers(0, 3))]
            want = read(str(d), "events", columns=cols, **kw)
            got = r.last_row("events", columns=cols, **kw)
            if want.size == 0:
                assert got is None, kw
            else:
                assert {c: int(v) for c, v in got.items()} == \
                    {c: int(want[c][-1]) for c in cols}, (kw, cols)
                assert all(type(got[c]) is type(want[c][-1]) for c in cols)
    s.close()
    if sealed:
        assert any(answered) and not all(answered)


def test_a_reader_raises_what_read_raises(tmp_path):
    with pytest.raises(StoreError):
        Reader(str(tmp_path / "nothing"))
    d = tmp_path / "run"
    s = _session(d)
    s.process(make_orders(N, seed=1))
    s.close()
    with Reader(str(d)) as r:
        with pytest.raises(UsageError):
            r.read("orders", symbol="NOPE")
        with pytest.raises(UsageError):
            r.read("nope")
        with pytest.raises(UsageError):
            r.read("orders", seq=(1,))
        with pytest.raises(UsageError):
            read_columns(r, "fills", columns=["nope"])


# --- book_at and stats through a Reader (exchange.Engine) ---------------------------------------

def _engine_run(path, n=6_000):
    from exsim.exchange import Engine
    from exsim.scenarios.generators.uniform import uniform_flow

    eng = Engine()
    eng.add_symbol("X", tick_size=1)
    s = Session.create(str(path), eng, durability="none", seal_every=2_000,
                       checkpoint_every=1_500, seal_in_background=False)
    flow = uniform_flow(n, 3)
    for i in range(0, n, 500):
        s.process(flow[i:i + 500])
    return s, flow


def test_book_at_and_stats_through_a_reader_equal_them_through_the_path(tmp_path):
    from exsim.replay import book_at, stats

    d = tmp_path / "run"
    s, flow = _engine_run(d)
    s.close()
    rng = np.random.default_rng(4)
    with Reader(str(d)) as r:
        for seq in rng.integers(0, flow.size + 1, 30).tolist() + [0, flow.size]:
            a, b = book_at(str(d), "X", seq=seq, depth=None), book_at(r, "X", seq=seq, depth=None)
            assert (a.seq, a.ts) == (b.seq, b.ts) and _same(a.bids, b.bids) and _same(a.asks, b.asks)
        ts = read(str(d), "orders", columns=["ts"])["ts"]
        for t in rng.integers(int(ts[0]) - 10, int(ts[-1]) + 10, 20).tolist():
            a, b = book_at(str(d), "X", ts=t), book_at(r, "X", ts=t)
            assert (a.seq, a.ts) == (b.seq, b.ts) and _same(a.bids, b.bids) and _same(a.asks, b.asks)
        w = (int(ts[1000]), int(ts[4000]))
        assert _same(stats(r, "X", ts=w), stats(str(d), "X", ts=w))
        with pytest.raises(UsageError, match="outside the stored run"):
            book_at(r, "X", seq=flow.size + 1)


def test_book_at_through_a_reader_follows_a_live_writer(tmp_path):
    from exsim.replay import book_at

    d = tmp_path / "run"
    s, flow = _engine_run(d, n=3_000)
    with Reader(str(d)) as r:
        first = book_at(r, "X", seq=3_000)
        more = flow[:1_000].copy()
        s.process(more)                      # journaled, not yet sealed: only the WAL grew
        v = book_at(r, "X", seq=4_000)
        w = book_at(str(d), "X", seq=4_000)
        assert v.seq == 4_000 and _same(v.bids, w.bids) and _same(v.asks, w.asks)
        s.seal()
        s.checkpoint()
        assert _same(book_at(r, "X", seq=3_000).bids, first.bids)
        assert _same(book_at(r, "X", seq=4_000).asks, w.asks)
    s.close()


def _crashed_run(path, n):
    """A run that journaled ``n`` messages and died before sealing them (a forked child that
    exits without closing): its rows are only in its WAL."""
    import os

    pid = os.fork()
    if pid == 0:
        try:
            _session(path).process(make_orders(n, seed=5))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def test_a_reader_whose_directory_is_replaced_raises_instead_of_mixing_two_runs(tmp_path):
    import os

    d, other = str(tmp_path / "run"), str(tmp_path / "other")
    s = _session(d)
    s.process(make_orders(N))
    s.close()                                   # everything sealed
    _crashed_run(other, 2 * N)                  # 600 seqs, all in the WAL
    with Reader(d) as r:
        before = r.read("orders")
        assert before["seq"].tolist() == list(range(1, N + 1))
        os.rename(d, str(tmp_path / "old"))
        os.rename(other, d)                     # another run now has the path
        for call in (lambda: r.read("orders"), lambda: r.read("fills", seq=(1, 10)),
                     lambda: r.last_row("orders")):
            with pytest.raises(StoreError, match="replaced"):
                call()
    assert read(d, "orders")["seq"].tolist() == list(range(1, 2 * N + 1))   # a new reader


def test_rows_of_one_seq_in_several_symbols_come_in_one_order_before_and_after_a_seal(tmp_path):
    from exsim.exchange import Engine
    from exsim.scenarios import uniform_flow
    from exsim.scenarios.generators.venue_mix import venue_mix
    from exsim.store import iter_columns

    # GTD orders: a message of one symbol expires orders of others at its seq
    flow = venue_mix(uniform_flow(3000, seed=4, n_symbols=3), 1, gtd_share=0.5, stop_share=0,
                     iceberg_share=0)
    eng = Engine()
    for name in ("S0", "S1", "S2"):
        eng.add_symbol(name)
    d = str(tmp_path / "run")
    s = Session.create(d, eng, seal_every=10**12, checkpoint_every=10**12)
    s.process(flow)
    tables = ("events", "l2", "fills")
    unsealed = {t: read(d, t) for t in tables}
    live = {t: s.read(t) for t in tables}
    blocks = {t: np.concatenate([np.stack([b["seq"], b["symbol"]]) for b in iter_columns(d, t)],
                                axis=1) for t in tables}
    s.close()
    several = 0
    for t in tables:
        sealed = read(d, t)
        assert _same(unsealed[t], sealed) and _same(live[t], sealed), t
        assert np.array_equal(blocks[t], np.stack([sealed["seq"], sealed["symbol"]])), t
        key = sealed["seq"].astype(np.int64) * 4 + sealed["symbol"]
        assert (np.diff(key) >= 0).all(), t          # seq, then symbol id ascending
        tie = sealed["seq"][1:] == sealed["seq"][:-1]
        several += int((tie & (sealed["symbol"][1:] != sealed["symbol"][:-1])).sum())
    assert several > 0                                 # the flow does have such seqs
