"""scenarios.open_flow: every flow source opens as one Flow, with one naming and tick rule."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import InputError, UsageError
from exsim.exchange.schema import ORDER_DTYPE
from exsim.scenarios import Flow, load_scenario, open_flow, symbol_from_file
from exsim.scenarios.data import BINANCE_BTCUSDT, LOBSTER_AMZN, shared_data_dir, shared_file
from exsim.scenarios.loaders import lobster

from cli_fixtures import write_scenario

needs_data = pytest.mark.skipif(shared_data_dir() is None, reason="shared data samples not found")

QC = """seq,op,order_id,trader,side,price,size,cancel_order_id
1,limit,1,ID1,buy,100,5,
2,limit,2,ID2,sell,101,3,
3,cancel,,ID1,,,,1
"""


@pytest.mark.parametrize("name, want", [
    ("AMZN_2012-06-21_34200000_57600000_message_1.csv", "AMZN"),
    ("/some/dir/btcusdt_20240808.gz", "BTCUSDT"),
    ("feed.csv", "FEED"),
    ("_odd.csv", "_ODD"),
    ("a.b_c.csv", "A"),
])
def test_symbol_from_file(name, want):
    assert symbol_from_file(name) == want


def test_preset_and_seed_override():
    base = open_flow("default")
    assert isinstance(base, Flow) and base.kind == "scenario" and base.label == "default"
    assert base.orders.dtype == ORDER_DTYPE
    assert base.symbols == [(s.name, s.tick_size) for s in load_scenario("default").symbols]
    assert np.array_equal(base.orders, load_scenario("default").generate())
    again = open_flow(load_scenario("default"), seed=base.seed)
    assert np.array_equal(again.orders, base.orders)
    other = open_flow("default", seed=base.seed + 1)
    assert other.seed == base.seed + 1 and not np.array_equal(other.orders, base.orders)
    assert other.run_info() == {"scenario_spec": other.scenario.describe()}


def test_scenario_file(tmp_path):
    path = write_scenario(tmp_path)
    f = open_flow(path)
    assert f.kind == "scenario" and f.source == path and f.orders.size > 0


def test_scenario_rejects_symbol_and_negative_seed():
    with pytest.raises(UsageError, match="names its own"):
        open_flow("default", symbol="X")
    with pytest.raises(UsageError, match="seed must be >= 0"):
        open_flow("default", seed=-1)


def test_quantcup_file(tmp_path):
    path = tmp_path / "feed.csv"
    path.write_text(QC)
    f = open_flow([path], fmt="quantcup")
    assert f.symbols == [("FEED", 1)] and f.label == "quantcup:feed.csv" and f.orders.size == 3
    assert f.run_info() == {"flow": "quantcup", "files": [str(path)]}
    assert open_flow(path, fmt="quantcup", symbol="QC").symbols == [("QC", 1)]
    with pytest.raises(UsageError, match="seed= applies"):
        open_flow(path, fmt="quantcup", seed=1)


def test_format_errors(tmp_path):
    with pytest.raises(UsageError, match="unknown flow format 'xlsx'"):
        open_flow("x.xlsx", fmt="xlsx")
    with pytest.raises(UsageError, match="takes 2 file"):
        open_flow(["only_messages.csv"], fmt="lobster")
    with pytest.raises(InputError, match="no such file"):
        open_flow(tmp_path / "missing.csv", fmt="quantcup")


def test_folder_that_is_no_flow(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match="neither a data directory nor a LOBSTER directory"):
        open_flow(tmp_path)


def test_array_and_unknown_object():
    orders = open_flow("default").orders
    f = open_flow(orders)
    assert f.kind == "orders" and f.symbols is None and f.orders is orders
    with pytest.raises(UsageError, match="flow must be"):
        open_flow(42)


@needs_data
def test_lobster_folder_and_pair_agree():
    folder = shared_file(LOBSTER_AMZN)
    f = open_flow(folder)
    assert f.kind == "lobster" and f.symbols == [("AMZN", lobster.TICK_SIZE)]
    msg, book = f.files
    pair = open_flow([msg, book], fmt="lobster", symbol="AMZN")
    assert pair.label == f.label and np.array_equal(pair.orders, f.orders)
    assert pair.run_info() == {"flow": "lobster", "files": [msg, book], "date": "2012-06-21",
                               "tz": "America/New_York", "ts_origin": "midnight"}


def test_data_dir_round_trip(tmp_path):
    """A flow simulated into a data directory opens again as the same orders and symbols, and
    the library's simulate/export agree with it."""
    from exsim.replay.export import export
    from exsim.replay.simulation import simulate

    flow = open_flow("default")
    out = tmp_path / "run"
    summary = simulate(flow, str(out), batch=2500, durability="none")
    assert summary.messages == flow.orders.size and summary.bytes > 0
    again = open_flow(out)
    assert again.kind == "data_dir" and again.symbols == flow.symbols
    assert np.array_equal(again.orders, flow.orders)
    with pytest.raises(UsageError, match="names its own"):
        open_flow(out, symbol="X")
    counts = export(str(out), "orders", str(tmp_path / "orders.csv"), fmt="csv")
    assert counts == {"orders": flow.orders.size}
    assert (tmp_path / "orders.csv").read_text().count("\n") == flow.orders.size + 1
    with pytest.raises(UsageError, match="batch must be >= 1"):
        simulate(flow, str(tmp_path / "x"), batch=0, durability="none")
    assert not (tmp_path / "x").exists()


@needs_data
def test_binance_file_and_folder_agree():
    gz = shared_file(BINANCE_BTCUSDT)
    f = open_flow(gz)
    assert f.kind == "binance" and f.l2 is not None and f.symbols == [("BTCUSDT", 0.01)]
    assert f.run_info() == {"flow": "binance", "files": [str(gz)], "tick": "0.01", "tz": "UTC",
                          "ts_origin": "epoch"}
    folder = open_flow(gz.parent, fmt="binance")
    assert np.array_equal(folder.orders, f.orders) and np.array_equal(folder.l2.l2, f.l2.l2)
