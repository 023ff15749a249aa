"""The order fields added since the first row layout (stops, icebergs, minimum quantities and
GTD: ``stop_price``, ``display_qty``, ``min_qty``, ``expire_ts``; trading phases: ``phase``) and
the event fields of trading phases (``price``, ``phase``): journaled, sealed, compacted and read
back exactly, and data written before them (narrower WAL rows, version-3 segments without their
columns, tests/golden/run_v1) read with zeros in them."""

import functools
import os
import shutil

import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError
from exsim.exchange.schema import EVENT_DTYPE, ORDER_DTYPE, Kind, OrderType, Phase, Tif
from exsim.store import Catalog, Session, compact, iter_columns, read, read_columns
from exsim.store import sealing, segment
from exsim.store.segment import read_index, read_segment, write_segment
from exsim.store.tables import (ADDED_COLUMNS, LEGACY_EVENT_DTYPE, LEGACY_ORDER_DTYPE, STORED_DTYPES,
                          orders_with_seq, orders_without_seq)
from exsim.store.wal import VERSION as WAL_VERSION
from exsim.store.wal import scan_wal, wal_files
from store_fixtures import FakeEngine, make_orders

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_V1 = os.path.join(os.path.dirname(HERE), "golden", "run_v1")
ADDED = ADDED_COLUMNS["orders"]
# the stored orders row as segments held it before the added columns
LEGACY_STORED = np.dtype([("seq", "<i8")] + [(n, LEGACY_ORDER_DTYPE.fields[n][0])
                                             for n in LEGACY_ORDER_DTYPE.names], align=True)
LEGACY_EVENTS = LEGACY_EVENT_DTYPE   # the stored events row before the trading-phase columns
OLD_DTYPES = {**STORED_DTYPES, "orders": LEGACY_STORED, "events": LEGACY_EVENTS}
# a seal as version 3 wrote it (the dtypes above, patched in by the tests that use it)
SEAL_V3 = functools.partial(segment.encode_columns, version=3)


def feature_orders(n: int, seed: int, ts0: int = 1_700_000_000_000_000_000) -> np.ndarray:
    """Seeded orders of which about a third are stops (STOP, STOP_LIMIT), a third icebergs with
    a minimum quantity, and a third GTD or DAY; every added field takes varied nonzero values."""
    rng = np.random.default_rng(seed)
    o = make_orders(n, seed, ts0=ts0)
    kind = rng.integers(0, 3, n)
    stop, ice, timed = kind == 0, kind == 1, kind == 2
    o["order_type"][stop] = rng.choice([int(OrderType.STOP), int(OrderType.STOP_LIMIT)], stop.sum())
    o["stop_price"][stop] = o["price"][stop] + rng.integers(-20, 20, stop.sum())
    o["display_qty"][ice] = np.maximum(1, o["qty"][ice] // 4)
    o["min_qty"][ice] = np.maximum(1, o["qty"][ice] // 2)
    o["tif"][timed] = rng.choice([int(Tif.GTD), int(Tif.DAY)], timed.sum())
    o["expire_ts"][timed] = o["ts"][timed] + rng.integers(1, 1 << 40, timed.sum())
    o["expire_ts"][o["tif"] == int(Tif.DAY)] = 0
    phase = rng.random(n) < 0.05                   # a few PHASE messages, every phase code
    o["kind"][phase] = int(Kind.PHASE)
    o["phase"][phase] = rng.integers(0, len(Phase), phase.sum())
    return o


def _session(path, **kw):
    eng = FakeEngine()
    for name in "ABC":
        eng.add_symbol(name)
    return Session.create(str(path), eng, run_info={"scenario": "order fields", "seed": 1},
                          durability="none", seal_in_background=False, **kw)


def _check_rows(got: np.ndarray, fed: np.ndarray) -> None:
    """``got`` (stored orders, seq 1..) holds exactly ``fed`` (ORDER_DTYPE, in seq order)."""
    assert got.dtype == STORED_DTYPES["orders"]
    assert np.array_equal(got["seq"], np.arange(1, fed.size + 1))
    assert orders_without_seq(got).tobytes() == fed.tobytes()


def test_every_added_field_round_trips_through_wal_seal_and_read(tmp_path):
    s = _session(tmp_path, seal_every=10**9)
    fed = [feature_orders(700, seed=k) for k in range(3)]
    s.process(fed[0])
    s.process(fed[1])
    s.seal()                        # the first two batches in segments, the third only in the WAL
    s.process(fed[2])
    every = np.concatenate(fed)
    assert all(every[c].any() for c in ADDED)   # the flow exercises every added field
    _check_rows(read(s, "orders"), every)
    s.wal.close()                   # a kill: the third batch is in the WAL only
    _check_rows(read(str(tmp_path), "orders"), every)
    cols = read_columns(str(tmp_path), "orders", columns=["seq", *ADDED])
    for c in ADDED:
        assert np.array_equal(cols[c], every[c]), c
    for sym in range(3):
        mine = every[every["symbol"] == sym]
        got = read(str(tmp_path), "orders", symbol=sym)
        assert orders_without_seq(got).tobytes() == mine.tobytes()
        blocks = list(iter_columns(str(tmp_path), "orders", symbol=sym))   # a segment, a WAL batch
        assert len(blocks) == 2 and all(
            np.array_equal(np.concatenate([b[c] for b in blocks]), mine[c]) for c in ORDER_DTYPE.names)
    s = Session.open(str(tmp_path), engine_class=FakeEngine)   # recovers the WAL tail, then seals it
    s.close()
    _check_rows(read(str(tmp_path), "orders"), every)


def test_compaction_keeps_every_added_field(tmp_path):
    s = _session(tmp_path, seal_every=500)
    fed = [feature_orders(400, seed=10 + k) for k in range(6)]
    for o in fed:
        s.process(o)
    s.close()
    cat = Catalog(str(tmp_path), readonly=True)
    before = len([x for x in cat.all_segments() if x["table_name"] == "orders"])
    cat.close()
    made = compact(str(tmp_path), table="orders")
    assert made and before > len(made)
    _check_rows(read(str(tmp_path), "orders"), np.concatenate(fed))


def _legacy_segment(tmp_path, rows, monkeypatch):
    """Write ``rows`` (stored orders) as a version-3 segment of the legacy columns only, as the
    store wrote them before the added fields existed; returns its path."""
    return _old_segment(tmp_path, "orders", rows, monkeypatch)


def _old_segment(tmp_path, table, rows, monkeypatch, version=3):
    """Write ``rows`` (stored ``table`` rows, symbol 0) as a segment of format ``version`` of
    the columns of the table's first layout only (OLD_DTYPES); returns its path."""
    with monkeypatch.context() as m:
        m.setattr(segment, "table_dtype", lambda t: OLD_DTYPES[t])
        old = np.zeros(rows.size, OLD_DTYPES[table])
        for c in old.dtype.names:
            old[c] = rows[c]
        info = write_segment(str(tmp_path), table, 0, old, version=version)
    return os.path.join(str(tmp_path), info.path)


def test_an_orders_segment_without_the_added_columns_reads_them_as_zeros(tmp_path, monkeypatch):
    rows = orders_with_seq(feature_orders(300, seed=4), 1)
    rows["symbol"] = 0
    path = _legacy_segment(tmp_path, rows, monkeypatch)
    with open(path, "rb") as f:
        assert not set(ADDED) & set(read_index(f, path)["columns"])   # written as before
    every = read_segment(path)
    assert set(every) == set(STORED_DTYPES["orders"].names)
    for c in ADDED:
        assert every[c].dtype == STORED_DTYPES["orders"].fields[c][0] and every[c].size == 300
        assert not every[c].any()
    for c in LEGACY_STORED.names:
        assert np.array_equal(every[c], rows[c])
    some = read_segment(path, ["seq", "min_qty"])
    assert list(some) == ["seq", "min_qty"] and not some["min_qty"].any()


def test_a_missing_column_that_was_never_added_is_still_corruption_naming_the_file(tmp_path, monkeypatch):
    path = _legacy_segment(tmp_path, orders_with_seq(make_orders(50, n_symbols=1), 1), monkeypatch)
    with pytest.raises(CorruptionError, match="no column 'stop'") as e:
        read_segment(path, ["seq", "stop"])
    assert e.value.path == path


def test_old_and_new_orders_segments_read_and_compact_together(tmp_path, monkeypatch):
    s = _session(tmp_path, seal_every=10**9)
    old = [make_orders(300, seed=k) for k in range(2)]     # journaled before the added fields
    new = [feature_orders(300, seed=5 + k) for k in range(2)]
    with monkeypatch.context() as m:
        m.setattr(segment, "table_dtype", lambda t: LEGACY_STORED if t == "orders" else STORED_DTYPES[t])
        m.setattr(sealing, "encode_columns", SEAL_V3)
        for o in old:
            s.process(o)
            s.seal()
    for o in new:
        s.process(o)
        s.seal()
    s.close()
    every = np.concatenate(old + new)
    _check_rows(read(str(tmp_path), "orders"), every)
    assert compact(str(tmp_path), table="orders")
    _check_rows(read(str(tmp_path), "orders"), every)
    cat = Catalog(str(tmp_path), readonly=True)
    merged = [x for x in cat.all_segments() if x["table_name"] == "orders" and x["tier"] == 1]
    cat.close()
    path = os.path.join(str(tmp_path), merged[0]["path"])
    with open(path, "rb") as f:
        assert set(ADDED) <= set(read_index(f, path)["columns"])   # the merge writes them


def test_the_old_data_directory_run_v1_reads_with_zeros_in_the_added_fields(tmp_path):
    d = str(tmp_path / "run_v1")
    shutil.copytree(RUN_V1, d)
    (_, wal), = wal_files(os.path.join(d, "wal"))
    assert open(wal, "rb").read(6)[4] < 5                        # 45-byte order rows
    cat = Catalog(d, readonly=True)
    seg = next(x for x in cat.all_segments() if x["table_name"] == "orders")
    cat.close()
    seg_path = os.path.join(d, seg["path"])
    with open(seg_path, "rb") as f:
        assert not set(ADDED) & set(read_index(f, seg_path)["columns"])   # no added columns
    got = read(d, "orders")
    assert np.array_equal(got["seq"], np.arange(1, got.size + 1)) and got.size == 7500
    assert not any(got[c].any() for c in ADDED)
    assert got["qty"].any() and got["price"].min() > 0            # the legacy fields read as before
    (rec, *_), _ = scan_wal(os.path.join(d, "wal"))
    tail = got[got["seq"] >= rec.first_seq][:rec.orders.size]
    assert orders_without_seq(tail).tobytes() == rec.orders.tobytes()
    cols = read_columns(d, "orders", columns=["stop_price", "expire_ts"])
    assert cols["stop_price"].size == 7500 and not cols["expire_ts"].any()


def test_flipped_bytes_in_new_wal_records_and_orders_segments_raise_corruption_naming_the_file(tmp_path):
    s = _session(tmp_path / "run", seal_every=10**9)
    fed = [feature_orders(300, seed=30 + k) for k in range(2)]
    s.process(fed[0])
    s.seal()
    s.process(fed[1])
    s.wal.close()                   # the second batch only in the WAL, a current-version record
    d = str(tmp_path / "run")
    every = np.concatenate(fed)
    cat = Catalog(d, readonly=True)
    seg = os.path.join(d, next(x for x in cat.all_segments() if x["table_name"] == "orders")["path"])
    cat.close()
    wal = [p for _, p in wal_files(os.path.join(d, "wal"))][-1]
    assert open(wal, "rb").read(6)[4] == WAL_VERSION
    for path in (seg, wal):
        good = open(path, "rb").read()
        for pos in np.linspace(0, len(good) - 1, 48).astype(int):
            bad = bytearray(good)
            bad[pos] ^= 0x5A
            open(path, "wb").write(bytes(bad))
            try:
                got = read(d, "orders")
            except CorruptionError as e:
                assert e.path == path, (path, pos, e)
            else:   # a flip in bytes no reader uses must leave every row as it was
                assert orders_without_seq(got).tobytes() == every.tobytes(), (path, pos)
        open(path, "wb").write(good)
    _check_rows(read(d, "orders"), every)


def test_a_version_4_segment_missing_an_added_column_is_corruption_naming_the_file(tmp_path, monkeypatch):
    rows = orders_with_seq(feature_orders(80, seed=6), 1)
    path = _old_segment(tmp_path, "orders", rows, monkeypatch, version=segment.VERSION)
    for cols in (["seq", "phase"], None):
        with pytest.raises(CorruptionError, match="no column 'phase'") as e:
            read_segment(path, cols) if cols else read_segment(path, ["phase"])
        assert e.value.path == path


def _events(n: int, seed: int) -> np.ndarray:
    """Stored event rows of one symbol, every field (the trading-phase ones too) varied."""
    rng = np.random.default_rng(seed)
    ev = np.zeros(n, EVENT_DTYPE)
    ev["seq"] = np.arange(1, n + 1)
    ev["ts"] = 1_700_000_000_000_000_000 + np.cumsum(rng.integers(0, 9, n))
    for c in ("order_id", "filled_qty", "leaves_qty", "price"):
        ev[c] = rng.integers(0, 1 << 40, n)
    ev["event"], ev["reason"], ev["phase"] = rng.integers(0, 10, n), rng.integers(0, 98, n), \
        rng.integers(0, len(Phase), n)
    return ev


def test_an_events_segment_of_version_3_reads_price_and_phase_as_zeros(tmp_path, monkeypatch):
    ev = _events(500, seed=2)
    path = _old_segment(tmp_path, "events", ev, monkeypatch)
    with open(path, "rb") as f:
        meta = read_index(f, path)
    assert meta["version"] == 3 and not set(ADDED_COLUMNS["events"]) & set(meta["columns"])
    got = read_segment(path)
    assert set(got) == set(EVENT_DTYPE.names)
    assert not got["price"].any() and not got["phase"].any()
    assert got["price"].dtype == np.int64 and got["phase"].dtype == np.uint8
    for c in LEGACY_EVENTS.names:
        assert np.array_equal(got[c], ev[c]), c


def test_a_current_events_segment_round_trips_price_and_phase(tmp_path):
    ev = _events(700, seed=3)
    info = write_segment(str(tmp_path), "events", 0, ev)
    path = os.path.join(str(tmp_path), info.path)
    with open(path, "rb") as f:
        assert read_index(f, path)["version"] == segment.VERSION
    got = read_segment(path)
    for c in EVENT_DTYPE.names:
        assert np.array_equal(got[c], ev[c]), c
    assert ev["price"].any() and ev["phase"].any()


def test_the_event_fields_round_trip_through_wal_seal_compaction_and_read(tmp_path):
    s = _session(tmp_path, seal_every=10**9)
    fed = [feature_orders(500, seed=40 + k) for k in range(3)]
    want = []
    for o in fed[:2]:
        want.append(s.process(o).events.copy())
        s.seal()
    want.append(s.process(fed[2]).events.copy())   # the third batch in the WAL only
    every = np.concatenate(want)
    assert every["price"].any() and every["phase"].any()
    assert read(s, "events").tobytes() == every.tobytes()   # one event a message, in seq order
    s.close()
    for sym in range(3):
        mine = every[every["symbol"] == sym]
        assert read(str(tmp_path), "events", symbol=sym).tobytes() == mine.tobytes()
    assert compact(str(tmp_path), table="events") is not None
    for sym in range(3):
        mine = every[every["symbol"] == sym]
        assert read(str(tmp_path), "events", symbol=sym).tobytes() == mine.tobytes()


def test_the_old_data_directory_run_v1_reads_its_events_with_zeros_in_price_and_phase(tmp_path):
    d = str(tmp_path / "run_v1")
    shutil.copytree(RUN_V1, d)
    cat = Catalog(d, readonly=True)
    seg = next(x for x in cat.all_segments() if x["table_name"] == "events")
    cat.close()
    seg_path = os.path.join(d, seg["path"])
    with open(seg_path, "rb") as f:
        assert not set(ADDED_COLUMNS["events"]) & set(read_index(f, seg_path)["columns"])
    got = read(d, "events")
    assert got.dtype == EVENT_DTYPE and got.size > 7500
    assert not got["price"].any() and not got["phase"].any()
    assert got["leaves_qty"].any() and np.all(np.diff(got["seq"]) >= 0)
