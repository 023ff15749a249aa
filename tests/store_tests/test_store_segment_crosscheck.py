"""A catalog segment row is checked against the file's own index (issue 13, item 8): a flipped
table_name, symbol, rows, seq_lo/seq_hi or ts_lo/ts_hi is a CorruptionError naming the file
and the field, from ``read_registered`` and ``check_registered`` alike."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError
from exsim.store.segment import check_registered, read_registered, write_segment
from exsim.store.tables import orders_with_seq
from store_fixtures import make_batch


def _row(tmp_path, table="l2"):
    """A segment of ``table`` in tmp_path and its catalog row (as Catalog writes it)."""
    o, fills, l2, ev = make_batch(1, 500, n_symbols=1)
    rows = {"orders": orders_with_seq(o, 1), "fills": fills, "l2": l2, "events": ev}[table]
    info = write_segment(str(tmp_path), table, 3, rows)
    d = dataclasses.asdict(info)
    d["table_name"] = d.pop("table")
    return d, rows


_FLIPS = {"table_name": lambda v: "fills" if v != "fills" else "l2", "symbol": lambda v: v + 1,
          "rows": lambda v: v - 1, "seq_lo": lambda v: v + 1, "seq_hi": lambda v: v - 1,
          "ts_lo": lambda v: v - 1, "ts_hi": lambda v: v + 1}


@pytest.mark.parametrize("field", list(_FLIPS))
def test_a_flipped_catalog_field_is_corruption_naming_file_and_field(tmp_path, field):
    row, _ = _row(tmp_path)
    row[field] = _FLIPS[field](row[field])
    for fn in (lambda: read_registered(str(tmp_path), row), lambda: check_registered(str(tmp_path), row)):
        with pytest.raises(CorruptionError, match=field) as e:
            fn()
        assert os.path.basename(row["path"]) in str(e.value) and e.value.path.endswith(row["path"])


def test_a_catalog_field_of_another_type_is_corruption(tmp_path):
    row, _ = _row(tmp_path)
    row["rows"] = str(row["rows"])     # a hostile catalog may hold text where a count belongs
    with pytest.raises(CorruptionError, match="rows"):
        check_registered(str(tmp_path), row)


@pytest.mark.parametrize("table", ["orders", "fills", "l2", "events"])
def test_a_true_catalog_row_reads_and_checks(tmp_path, table):
    row, rows = _row(tmp_path, table)
    row.update({k: np.int64(row[k]) for k in ("symbol", "rows")})   # numpy ints compare as ints
    cols = read_registered(str(tmp_path), row, ["seq"])
    assert np.array_equal(cols["seq"], rows["seq"]) and check_registered(str(tmp_path), row) is None


def test_rows_the_catalog_registers_pass_the_cross_check(tmp_path):
    from exsim.store.catalog import Catalog

    _, rows = _row(tmp_path / "elsewhere")
    info = write_segment(str(tmp_path), "l2", 3, rows)
    cat = Catalog(str(tmp_path), create=True)
    cat.register_seal([info], info.seq_hi)
    (stored,) = cat.all_segments()
    cat.close()
    assert check_registered(str(tmp_path), stored) is None
    assert read_registered(str(tmp_path), stored)["seq"].size == info.rows


def test_rerun_checks_each_output_segment_against_its_catalog_row(tmp_path):
    from exsim.replay import rerun
    from exsim.store.catalog import Catalog
    from store_fixtures import forge_catalog
    from test_replay_common import rich_flow, store_run

    store_run(tmp_path, rich_flow(1500, seed=33))
    cat = Catalog(str(tmp_path))
    seg = sorted((r for r in cat.all_segments() if r["table_name"] == "fills"),
                 key=lambda r: r["seq_lo"])[1]
    cat.close()
    # a flipped ts_lo under a valid row checksum: the digests still match, the file's index not
    forge_catalog(tmp_path, "segments", seg["id"], ts_lo=seg["ts_lo"] - 1)
    try:
        report = rerun(tmp_path)
    except CorruptionError as e:     # once the row-by-row reads cross-check too (store/query.py)
        assert "ts_lo" in str(e)
    else:
        assert report.mode == "rows" and "ts_lo" in report.fallback, report


def _died_after_sealing(tmp_path) -> str:
    """A run that sealed two batches and died with them (and a third) still in its WAL: the
    WAL is trimmed only once a checkpoint covers it."""
    from store_fixtures import FakeEngine, make_orders
    from exsim.store import Session

    d = str(tmp_path / "run")
    pid = os.fork()
    if pid == 0:
        try:
            eng = FakeEngine()
            for name in ("A", "B", "C"):
                eng.add_symbol(name)
            s = Session.create(d, eng, seal_in_background=False, seal_every=10**12,
                               checkpoint_every=10**12)
            for k in range(3):
                s.process(make_orders(200, seed=k))
                if k < 2:
                    s.seal()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return d


def test_a_catalog_row_relabelled_under_its_checksums_is_corruption_not_a_short_read(tmp_path):
    from exsim.store import Reader, read
    from exsim.store.catalog import Catalog
    from store_fixtures import forge_catalog

    d = _died_after_sealing(tmp_path)
    before = read(d, "fills")
    cat = Catalog(d)
    seg = next(r for r in cat.all_segments() if r["table_name"] == "fills")
    cat.close()
    assert before.size > 0
    forge_catalog(d, "segments", seg["id"], table_name="l2")   # a fills segment now says l2
    for call in (lambda: read(d, "fills"), lambda: read(d, "fills", symbol=int(seg["symbol"])),
                 lambda: Reader(d).read("fills", seq=(1, 300)), lambda: read(d, "l2")):
        with pytest.raises(CorruptionError, match=f"row id={seg['id']}.*table_name or symbol"):
            call()


@pytest.mark.parametrize("forged", [200, 600])
def test_a_moved_sealed_through_is_corruption_not_rows_read_twice_or_dropped(tmp_path, forged):
    from exsim.store import read
    from exsim.store.catalog import Catalog
    from store_fixtures import forge_catalog

    d = _died_after_sealing(tmp_path)
    assert read(d, "orders")["seq"].tolist() == list(range(1, 601))
    cat = Catalog(d)
    sealed = cat.sealed_through()
    cat.close()
    assert sealed == 400
    # the WAL still holds 1..600: lowered, its rows 201..400 would come twice; raised, the
    # record of 401..600 would be skipped as sealed
    forge_catalog(d, "meta", "sealed_through", value=str(forged))
    for call in (lambda: read(d, "orders"), lambda: read(d, "fills", seq=(150, 250))):
        with pytest.raises(CorruptionError, match=f"sealed_through.*{forged}") as e:
            call()
        assert "catalog.sqlite" in str(e.value)
