"""DBN and generic flow files through the CLI: ``exsim export --format flow`` then
``exsim simulate --flow csv|parquet`` gives a byte-identical run, and ``--flow dbn`` /
``exsim backtest FILE.dbn.zst`` run a Databento MBO file."""

from __future__ import annotations

import numpy as np
import pytest

from cli_fixtures import run, write_scenario
from exsim.store import Catalog, read

TABLES = ("orders", "fills", "l2", "events")


def _symbols(d):
    cat = Catalog(str(d), readonly=True)
    try:
        return [(s["id"], s["name"], s["tick_size"]) for s in cat.symbols()]
    finally:
        cat.close()


@pytest.mark.parametrize("name,fmt", [("flow.csv", "csv"), ("flow.csv.gz", "csv"), ("flow.parquet", "parquet")])
def test_exported_flow_reruns_byte_identical(tmp_path, name, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    a, b, f = tmp_path / "a", tmp_path / "b", tmp_path / name
    assert run(["simulate", write_scenario(tmp_path), "--out", a, "-q"])[0] == 0
    code, out, err = run(["export", a, "orders", "--format", "flow", "--out", f])
    assert code == 0, err
    assert "wrote" in out and f.exists()
    code, out, err = run(["simulate", "--flow", fmt, f, "--out", b, "-q"])
    assert code == 0, err
    for t in TABLES:
        assert read(str(a), t).tobytes() == read(str(b), t).tobytes(), t
    assert _symbols(a) == _symbols(b)
    if not name.endswith(".gz"):     # a .gz path is a Binance capture to open_flow's detection
        code, _, err = run(["backtest", f, "--symbol", "AAA", "-q"])
        assert code == 0, err


def test_export_flow_refuses_other_tables(tmp_path):
    a = tmp_path / "a"
    assert run(["simulate", write_scenario(tmp_path), "--out", a, "-q"])[0] == 0
    code, _, err = run(["export", a, "fills", "--format", "flow", "--out", tmp_path / "x.csv"])
    assert code != 0 and "orders table" in err
    assert not (tmp_path / "x.csv").exists()


def test_simulate_bad_generic_file_names_line_and_column(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("ts,symbol,kind,order_id,side,price,qty\n1,A,NEW,1,BUY,10,1\n2,A,NEW,2,SIDEWAYS,10,1\n")
    code, _, err = run(["simulate", "--flow", "csv", f, "--out", tmp_path / "r"])
    assert code != 0 and "line 3, column 'side'" in err
    assert not (tmp_path / "r").exists()


def test_simulate_and_backtest_a_dbn_file(tmp_path):
    pytest.importorskip("databento_dbn")
    from exsim.scenarios.generators.uniform import uniform_flow
    from exsim.scenarios.loaders.dbn import load_dbn
    from exsim.scenarios.loaders.dbn_write import write_mbo

    f = tmp_path / "run.mbo.dbn.zst"
    write_mbo(f, uniform_flow(3000, 5, 2), [("AAA", 10 ** 7, 100), ("BBB", 10 ** 9, 1)])
    code, out, err = run(["simulate", "--flow", "dbn", f, "--out", tmp_path / "r"])
    assert code == 0, err
    d = load_dbn(f)
    stored = read(str(tmp_path / "r"), "orders")
    for name in d.orders.dtype.names:
        assert (stored[name] == d.orders[name]).all(), name
    assert [(n, t) for _, n, t in _symbols(tmp_path / "r")] == [("AAA", 0.01), ("BBB", 1)]
    assert len(read(str(tmp_path / "r"), "fills")) == 0       # the flow never crosses
    # the CLI streams the file; the run equals the fully loaded flow's
    from exsim.replay.simulation import simulate
    from exsim.scenarios import open_flow

    whole = open_flow(f)
    assert whole.orders is not None
    simulate(whole, str(tmp_path / "w"))
    for t in TABLES:
        assert read(str(tmp_path / "r"), t).tobytes() == read(str(tmp_path / "w"), t).tobytes(), t
    code, out, err = run(["backtest", f, "--symbol", "AAA", "-q"])
    assert code == 0, err
    code, _, err = run(["simulate", "--flow", "dbn", f, "--symbol", "X", "--out", tmp_path / "s"])
    assert code != 0 and "this one has 2" in err
    assert np.unique(stored["symbol"]).tolist() == [0, 1]
