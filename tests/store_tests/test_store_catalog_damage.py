"""The catalog against damage: row checksums, damaged files, old catalogs, read-only opens."""

import hashlib
import shutil
import os
import sqlite3

import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError, StoreError
from exsim.store import Session, compact, read
from exsim.store.catalog import Catalog
from store_fixtures import FakeEngine, make_orders

TABLES = ("orders", "fills", "l2", "events")


def _make(path, batches=6, n=400, **kw):
    """A closed data directory: several sealed segments per table and symbol, a WAL tail."""
    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    s = Session.create(str(path), eng, run_info={"scenario": "t", "seed": 1},
                       seal_every=kw.get("seal_every", 800), checkpoint_every=1000)
    for i in range(batches):
        s.process(make_orders(n, seed=i))
    s.wal.close()   # no final seal: the last batches stay in the WAL only
    s.catalog.close()
    s._lock.release()   # as the end of a crashed process would
    return str(path)


def _sql(path, statement, args=()):
    con = sqlite3.connect(os.path.join(path, "catalog.sqlite"))
    con.execute(statement, args)
    con.commit()
    con.close()


def _segment(path, table="l2", which=1):
    cat = Catalog(path, readonly=True)
    seg = sorted((r for r in cat.all_segments() if r["table_name"] == table),
                 key=lambda r: (r["seq_lo"], r["symbol"]))[which]
    cat.close()
    return seg


@pytest.mark.parametrize("change", [
    "table_name = 'fills'", "symbol = (symbol + 1) % 3", "seq_hi = seq_lo - 1", "ts_lo = ts_hi + 1",
    "seq_lo = seq_hi + 1000"])
def test_a_flipped_segment_value_that_would_exclude_it_is_detected(tmp_path, change):
    d = _make(tmp_path)
    seg = _segment(d)
    _sql(d, f"UPDATE segments SET {change} WHERE id = ?", [seg["id"]])
    with pytest.raises(CorruptionError, match=rf"catalog\.sqlite.*segments row id={seg['id']}"):
        read(d, "l2", symbol=seg["symbol"], seq=(seg["seq_lo"], seg["seq_hi"]))
    with pytest.raises(CorruptionError, match="checksum"):
        Catalog(d, readonly=True).snapshot("l2", seg["symbol"], (0, 1 << 62))


def test_a_flipped_row_count_is_reported_by_compact_not_a_crash(tmp_path):
    d = _make(tmp_path)
    seg = _segment(d, "orders", 0)
    _sql(d, "UPDATE segments SET rows = rows + 7 WHERE id = ?", [seg["id"]])
    with pytest.raises(CorruptionError, match="catalog.sqlite"):
        compact(d, target_rows=10_000)


@pytest.mark.parametrize("delta", [+300, -300])
def test_a_flipped_sealed_through_is_detected(tmp_path, delta):
    d = _make(tmp_path)
    _sql(d, "UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'sealed_through'", [delta])
    with pytest.raises(CorruptionError, match="meta row key='sealed_through'"):
        read(d, "orders")


def test_an_edited_run_configuration_is_detected_by_replay(tmp_path):
    from exsim.replay.rundir import run_info
    d = _make(tmp_path)
    assert run_info(d).config["stp"] == "none"
    _sql(d, """UPDATE runs SET engine_options = replace(engine_options, '"none"', '"cancel_both"')""")
    with pytest.raises(CorruptionError, match="runs row id=1"):
        run_info(d)


@pytest.mark.parametrize("table,statement", [
    ("checkpoints", "UPDATE checkpoints SET seq = seq + 1 WHERE seq = (SELECT max(seq) FROM checkpoints)"),
    ("symbols", "UPDATE symbols SET name = 'Z' WHERE id = 1"),
    ("meta", "UPDATE meta SET value = 'x.y:Evil' WHERE key = 'engine_class'"),
    # (a space appended: still JSON, another value whatever choices the run remembered)
    ("meta", "UPDATE meta SET value = value || ' ' WHERE key = 'encoding_choices'"),
])
def test_every_catalog_table_is_checksummed(tmp_path, table, statement):
    d = _make(tmp_path)
    _sql(d, statement)
    with pytest.raises(CorruptionError, match=f"table {table}"):
        cat = Catalog(d, readonly=True)   # opening reads meta (whole) already
        try:
            cat.checkpoints(), cat.symbols(), cat.get_meta("engine_class")
        finally:
            cat.close()
    if table != "symbols":   # what a session reads on open
        with pytest.raises(CorruptionError, match="catalog.sqlite"):
            Session.open(d)


def test_a_row_without_its_checksum_is_corrupt(tmp_path):
    d = _make(tmp_path)
    _sql(d, "UPDATE checkpoints SET row_crc = NULL")
    with pytest.raises(CorruptionError, match="no checksum"):
        Catalog(d).latest_checkpoint()


@pytest.mark.parametrize("statement,match", [
    ("UPDATE segments SET seq_hi = NULL WHERE id = 2", "segments row id=2: column seq_hi holds None"),
    ("UPDATE segments SET path = x'00ff' WHERE id = 2", "column path holds b"),
    ("UPDATE symbols SET info = '{not json' WHERE id = 0", "symbols row id=0: info is not valid JSON"),
    ("UPDATE runs SET engine_options = '[1]'", "engine_options is not a JSON object"),
    ("DELETE FROM meta WHERE key = 'sealed_through'", "'sealed_through' is None"),
])
def test_bad_values_are_corruption_errors_even_in_a_catalog_without_checksums(tmp_path, statement, match):
    d = _make(tmp_path)
    for t in ("meta", "symbols", "runs", "segments", "checkpoints"):
        _sql(d, f"ALTER TABLE {t} DROP COLUMN row_crc")   # as written before row checksums
    _sql(d, statement)
    cat = Catalog(d, readonly=True)
    with pytest.raises(CorruptionError, match=match):
        cat.all_segments(), cat.symbols(), cat.runs(), cat.sealed_through()
    cat.close()


def test_an_old_catalog_reads_unchecked_and_gets_checksums_when_opened_for_writing(tmp_path):
    d = _make(tmp_path)
    want = {t: read(d, t) for t in TABLES}
    segs = Catalog(d, readonly=True).all_segments()
    for t in ("meta", "symbols", "runs", "segments", "checkpoints"):
        _sql(d, f"ALTER TABLE {t} DROP COLUMN row_crc")
    ro = Catalog(d, readonly=True)
    assert ro.all_segments() == segs and ro.sealed_through() > 0   # reads, unchecked
    assert "row_crc" not in ro._columns("segments")                 # a reader adds nothing
    ro.close()
    Catalog(d).close()                                               # a writer adds them
    assert all(np.array_equal(read(d, t), want[t]) for t in TABLES)
    _sql(d, "UPDATE segments SET seq_hi = 1 WHERE id = 3")
    with pytest.raises(CorruptionError, match="segments row id=3"):
        read(d, "orders")


def _digest(path):
    return hashlib.sha256(open(os.path.join(path, "catalog.sqlite"), "rb").read()).hexdigest()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "no table"])
def test_a_damaged_catalog_file_is_a_store_error_naming_it(tmp_path, damage):
    d = _make(tmp_path)
    path = os.path.join(d, "catalog.sqlite")
    data = open(path, "rb").read()
    if damage == "no table":
        _sql(d, "DROP TABLE checkpoints")
    else:
        new = {"garbage": bytes(range(256)) * (len(data) // 256), "truncated": data[:len(data) // 2],
               "empty": b""}[damage]
        open(path, "wb").write(new)
    for readonly in (True, False):
        with pytest.raises(StoreError, match="catalog.sqlite"):
            cat = Catalog(d, readonly=readonly)
            cat.all_segments(), cat.checkpoints(), cat.symbols(), cat.runs()
    if damage == "empty":
        assert os.path.getsize(path) == 0   # not turned into a fresh, empty catalog


def test_a_read_only_catalog_sees_a_live_writer_and_never_writes(tmp_path):
    d = _make(tmp_path)
    before = _digest(d)
    ro = Catalog(d, readonly=True)
    for t in TABLES:
        ro.snapshot(t)
    assert _digest(d) == before
    w = Catalog(d)
    w.set_meta("note", "from the writer")
    assert ro.get_meta("note") == "from the writer"
    with pytest.raises(StoreError, match="read-only"):
        ro.set_meta("note", "from the reader")
    ro.close()
    w.close()


def test_rows_written_here_carry_checksums_of_their_values(tmp_path):
    from exsim.store.catalog import _row_crc
    d = _make(tmp_path)
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    key, value, crc = con.execute("SELECT key, value, row_crc FROM meta WHERE key = 'sealed_through'").fetchone()
    assert crc == _row_crc("meta", [key, value]) and crc != _row_crc("meta", [key, str(int(value) + 1)])
    assert con.execute("SELECT count(*) FROM segments WHERE row_crc IS NULL").fetchone()[0] == 0
    con.close()


@pytest.mark.parametrize("table", ["segments", "checkpoints", "symbols", "runs"])
def test_a_lost_row_is_detected_by_the_tables_tally(tmp_path, table):
    d = _make(tmp_path)
    _sql(d, f"DELETE FROM {table} WHERE rowid = (SELECT min(rowid) FROM {table})")
    cat = Catalog(d, readonly=True)
    with pytest.raises(CorruptionError, match=f"table {table} holds .* rows are lost"):
        cat.check()
    cat.close()


def test_a_symlinked_catalog_is_refused(tmp_path):
    d = _make(tmp_path / "real")
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(os.path.join(d, "catalog.sqlite"), other / "catalog.sqlite")
    for readonly in (True, False):
        with pytest.raises(CorruptionError, match="symlink"):
            Catalog(str(other), readonly=readonly)


def test_register_seal_sets_checksummed_meta_in_its_transaction(tmp_path):
    d = _make(tmp_path)
    cat = Catalog(d)
    cat.register_seal([], cat.sealed_through(), meta={"encoding_choices": '{"x": 1}'})
    assert cat.meta_json("encoding_choices") == {"x": 1}
    cat.close()
    _sql(d, """UPDATE meta SET value = '{"x": 2}' WHERE key = 'encoding_choices'""")
    with pytest.raises(CorruptionError, match="key='encoding_choices'"):
        Catalog(d, readonly=True)


def _old_dir(tmp_path):
    """A copy of tests/golden/run_v1: a catalog written before row checksums (read unchecked)."""
    d = tmp_path / "old"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "golden", "run_v1"), d)
    return str(d)


def test_a_damaged_table_name_in_a_catalog_without_checksums_is_corruption_not_a_short_read(tmp_path):
    d = _old_dir(tmp_path)
    _sql(d, "UPDATE segments SET table_name = 'even4s' WHERE id = (SELECT min(id) FROM segments "
            "WHERE table_name = 'events')")
    with pytest.raises(CorruptionError, match="catalog.sqlite.*table_name 'even4s'"):
        read(d, "events")


def test_an_edited_stp_mode_in_a_catalog_without_checksums_is_found_against_the_checkpoint(tmp_path):
    from exsim.replay import verify

    d = _old_dir(tmp_path)
    _sql(d, "UPDATE runs SET engine_options = replace(engine_options, '\"stp\": \"none\"', "
            "'\"stp\": \"cancel_both\"')")
    with pytest.raises(CorruptionError, match="catalog.sqlite.*stp is 'cancel_both'.*checkpoint"):
        verify(d)
