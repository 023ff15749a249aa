"""Parameter sweeps: grid order, determinism, seeds, bad arguments, and Dask equals serial."""

import pytest

from exsim.exchange import UsageError
from exsim.replay.backtesting.grid import grid_points, sweep
from exsim.scenarios import uniform_flow

SPEC = "exsim.replay.backtesting.strategies:InventoryMarketMaker"
GRID = {"size": [2, 5], "every": [20, 50]}
TRADER = 4242


@pytest.fixture(scope="module")
def flow():
    return uniform_flow(2_000, 7)


@pytest.fixture(scope="module")
def serial_rows(flow):
    return sweep(flow, SPEC, GRID, scheduler="serial", trader=TRADER, fees_bps=0.5)


def test_grid_is_the_cartesian_product_last_key_fastest():
    assert grid_points({"a": [1, 2], "b": ["x", "y"]}) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert grid_points([{"a": 3}]) == [{"a": 3}]
    assert grid_points({}) == [{}]          # one run with the strategy's defaults


def test_each_row_holds_its_parameters_and_its_backtest_summary(flow, serial_rows):
    from exsim.replay.backtesting.driver import backtest
    from exsim.replay.backtesting.strategies import InventoryMarketMaker

    assert [(r["size"], r["every"]) for r in serial_rows] == [(2, 20), (2, 50), (5, 20), (5, 50)]
    one = backtest(flow, InventoryMarketMaker(size=5, every=50), trader=TRADER, fees_bps=0.5)
    assert serial_rows[3] == {"size": 5, "every": 50, **one.summary}


def test_the_same_grid_run_twice_gives_identical_rows(flow, serial_rows):
    assert sweep(flow, SPEC, GRID, scheduler="serial", trader=TRADER, fees_bps=0.5) == serial_rows


def test_seeds_regenerate_the_scenario_and_add_a_seed_column():
    rows = sweep("default", SPEC, {"size": [3]}, seeds=[1, 2], scheduler="serial", symbol="JPM")
    assert [r["seed"] for r in rows] == [1, 2]
    assert rows[0]["n_messages"] != rows[1]["n_messages"] or rows[0]["pnl"] != rows[1]["pnl"]


@pytest.mark.parametrize("grid", [{"size": []}, {"size": 3}, [], "size=1"])
def test_malformed_grid_raises_usage_error(flow, grid):
    with pytest.raises(UsageError):
        sweep(flow, SPEC, grid, scheduler="serial")


def test_bad_strategy_spec_or_parameter_raises_before_any_run(flow):
    with pytest.raises(UsageError, match="no 'Nope'"):
        sweep(flow, "exsim.replay.backtesting.strategies:Nope", GRID, scheduler="serial")
    with pytest.raises(UsageError, match="unexpected keyword"):
        sweep(flow, SPEC, {"sizee": [1]}, scheduler="serial")


def test_seeds_need_a_scenario_flow(flow):
    with pytest.raises(UsageError, match="scenario"):
        sweep(flow, SPEC, GRID, seeds=[1], scheduler="serial")


def test_sweep_on_a_local_cluster_of_two_workers_equals_the_serial_result(flow, serial_rows):
    pytest.importorskip("distributed", reason="dask.distributed is not installed (exsim[dist])")
    rows = sweep(flow, SPEC, GRID, scheduler="local", n_workers=2, trader=TRADER, fees_bps=0.5)
    assert rows == serial_rows


# -- exsim sweep -------------------------------------------------------------------------------

def test_cli_sweep_writes_one_csv_row_per_grid_point_and_seed(tmp_path):
    from cli_fixtures import run, write_scenario

    out_csv = tmp_path / "s.csv"
    code, out, err = run(["sweep", write_scenario(tmp_path), "--symbol", "AAA", "--scheduler",
                          "serial", "--grid", "size=2,4", "--param", "every=20", "--seeds", "3,4",
                          "--csv", str(out_csv)])
    assert code == 0, err
    lines = out_csv.read_text().splitlines()
    assert lines[0].startswith("size,every,seed,pnl,") and len(lines) == 5


def test_cli_sweep_json_rows_equal_the_library_rows(tmp_path):
    import json

    from cli_fixtures import run, write_scenario

    path = write_scenario(tmp_path)
    code, out, err = run(["sweep", path, "--symbol", "AAA", "--scheduler", "serial",
                          "--grid", "every=20,50", "--json"])
    assert code == 0, err
    assert json.loads(out) == sweep(path, SPEC, {"every": [20, 50]}, scheduler="serial",
                                    symbol="AAA", latency=(0, 0))


@pytest.mark.parametrize("argv, needle", [(["--grid", "size"], "KEY=V1"),
                                          (["--grid", "size=1", "--seeds", "a"], "--seeds"),
                                          (["--grid", "size=1", "--param", "size=2"], "both")])
def test_cli_sweep_bad_arguments_exit_2(tmp_path, argv, needle):
    from cli_fixtures import run, write_scenario

    code, out, err = run(["sweep", write_scenario(tmp_path), "--scheduler", "serial", *argv])
    assert code == 2 and needle in err and "Traceback" not in err


def test_serial_sweep_on_l2_only_flow_passes_the_queue_model():
    import numpy as np

    from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE
    from exsim.replay.backtesting.l2queue import L2Flow
    l2 = np.zeros(4, L2_DTYPE)
    l2["ts"], l2["side"], l2["price"], l2["qty"] = [1, 1, 2, 3], [0, 1, 0, 0], [99, 101, 99, 99], [5, 5, 9, 7]
    tr = np.zeros(2, FILL_DTYPE)
    tr["ts"], tr["price"], tr["qty"], tr["aggressor_side"], tr["trade_id"] = [4, 5], 99, 3, 1, [1, 2]
    rows = [sweep(L2Flow(l2, tr, "X"), "exsim.replay.backtesting.strategies:InventoryMarketMaker",
                  {"size": [2], "every": [1]}, scheduler="serial", queue_model=m, trader=9)
            for m in ("conservative", "proportional")]
    # the bid joins behind 5 lots at 99; the level grows to 9, then drops to 7 without a trade;
    # sells of 3 and 3 at 99: conservative 5 ahead -> 1 lot, proportional 4 ahead -> 2 lots
    assert [r[0]["volume"] for r in rows] == [1, 2]
