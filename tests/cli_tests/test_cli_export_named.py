"""Exports in trading terms (issue 40, item 5): CSV and Parquet files carry, after the table's
code columns, the wall-clock ``time`` in the run's zone, the ``symbol_name`` and the enum words
(``side_name`` BUY/SELL, ``event_name`` ...), so a reader need not decode side 0/1 and symbol 0."""

from __future__ import annotations

import csv
import io

import pytest

from cli_fixtures import run, write_scenario


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    out = root / "run"
    code, _, err = run(["simulate", write_scenario(root), "--out", out, "--quiet", "--fsync", "none"])
    assert code == 0, err
    return out


def _csv(argv) -> list[dict]:
    code, out, err = run(argv)
    assert code == 0, err
    return list(csv.DictReader(io.StringIO(out)))


def test_csv_rows_name_their_side_symbol_and_time(small_run):
    rows = _csv(["export", small_run, "fills", "--format", "csv", "--out", "-"])
    assert rows and {r["symbol_name"] for r in rows} <= {"AAA", "BBB"}
    assert all(r["aggressor_side_name"] == ("BUY", "SELL")[int(r["aggressor_side"])] for r in rows)
    first = rows[0]
    assert first["time"].startswith("1970-01-01T00:00:") and first["time"].endswith("+00:00")
    events = _csv(["export", small_run, "events", "--format", "csv", "--out", "-", "--seq", "1:50"])
    assert {"ACCEPTED"} <= {r["event_name"] for r in events} and "reason_name" in events[0]
    orders = _csv(["export", small_run, "orders", "--format", "csv", "--out", "-", "--seq", "1:50"])
    assert {r["kind_name"] for r in orders} <= {"NEW", "CANCEL", "MODIFY"} and orders[0]["tif_name"]


def test_parquet_has_a_timestamp_column_and_names(small_run, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "l2.parquet"
    code, _, err = run(["export", small_run, "l2", "--format", "parquet", "--out", out])
    assert code == 0, err
    t = pq.read_table(out)
    assert str(t.schema.field("time").type) == "timestamp[ns, tz=UTC]"
    assert set(t.column("side_name").to_pylist()) == {"BUY", "SELL"}
    assert t.column("time").cast("int64").to_pylist() == t.column("ts").to_pylist()
