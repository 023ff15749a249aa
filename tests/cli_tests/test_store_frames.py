"""``store.read(..., as_pandas=True)``: a stored table as a DataFrame with the catalog's symbol
names and enum names (a stand-in ``pandas`` records the columns; real pandas when installed)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from cli_fixtures import run, write_scenario


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("frames")
    code, _, err = run(["simulate", write_scenario(base), "--out", base / "run", "--batch", 500,
                        "--fsync", "none", "-q"])
    assert code == 0, err
    return base / "run"


@pytest.fixture
def fake_pandas(monkeypatch):
    mod = types.ModuleType("pandas")
    mod.DataFrame = dict
    monkeypatch.setitem(sys.modules, "pandas", mod)


def test_a_stored_table_reads_as_labelled_columns(run_dir, fake_pandas):
    from exsim.exchange.schema import Event
    from exsim.store.query import Reader, read

    rows = read(run_dir, "events")
    df = read(run_dir, "events", as_pandas=True)
    assert set(df["symbol"].tolist()) == {"AAA", "BBB"}
    assert df["event"].tolist() == [Event(int(e)).name for e in rows["event"]]
    assert np.array_equal(df["seq"], rows["seq"])
    with Reader(run_dir) as reader:
        part = reader.read("fills", symbol="BBB", as_pandas=True)
    assert set(part["symbol"].tolist()) == {"BBB"}
    assert set(part["aggressor_side"].tolist()) <= {"BUY", "SELL"}


def test_with_real_pandas(run_dir):
    pd = pytest.importorskip("pandas")
    from exsim.store.query import read
    df = read(run_dir, "orders", as_pandas=True)
    assert isinstance(df, pd.DataFrame) and set(df["kind"]) <= {"NEW", "CANCEL", "MODIFY"}
