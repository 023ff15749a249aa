"""Export carries the order fields added for stops, icebergs, minimum quantities and GTD
(stop_price, display_qty, min_qty, expire_ts) in every format, and refuses the generic flow
format when the orders use a field it has no column for."""

import csv
import sqlite3

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Tif
from exsim.replay.export import export
from exsim.store import Session
from exsim.store.tables import ADDED_COLUMNS
from test_replay_common import make_engine

ADDED = ADDED_COLUMNS["orders"]


def _orders(n: int = 60) -> np.ndarray:
    """Orders of symbol 0 with every added field set on some rows (values need not be accepted
    by the engine: the orders table is the input as journaled)."""
    o = np.zeros(n, ORDER_DTYPE)
    o["ts"] = 1_000 + np.arange(n) * 10
    o["order_id"] = np.arange(1, n + 1)
    o["price"] = 100 + np.arange(n) % 5
    o["qty"] = 10
    o["kind"] = Kind.NEW
    o["side"] = np.arange(n) % 2
    o["order_type"][0::4] = OrderType.STOP_LIMIT
    o["stop_price"][0::4] = 90 + np.arange(n)[0::4] % 20
    o["display_qty"][1::4] = 3
    o["min_qty"][1::4] = 5
    o["tif"][2::4] = Tif.GTD
    o["expire_ts"][2::4] = o["ts"][2::4] + 10**9 + np.arange(n)[2::4]
    return o


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("export_fields") / "run")
    orders = _orders()
    s = Session.create(d, make_engine(), run_info={"scenario": "test"}, durability="none",
                       seal_every=25)
    s.process(orders[:30])
    s.process(orders[30:])
    s.close()
    return d, orders


def test_csv_export_has_every_added_column_with_its_values(run, tmp_path):
    d, orders = run
    out = str(tmp_path / "orders.csv")
    assert export(d, "orders", out, fmt="csv") == {"orders": orders.size}
    rows = list(csv.DictReader(open(out)))
    for c in ADDED:
        assert [int(r[c]) for r in rows] == orders[c].tolist(), c


def test_parquet_export_has_every_added_column_with_its_values(run, tmp_path):
    import pyarrow.parquet as pq

    d, orders = run
    out = str(tmp_path / "orders.parquet")
    export(d, "orders", out, fmt="parquet")
    t = pq.read_table(out)
    for c in ADDED:
        assert t.column(c).to_pylist() == orders[c].tolist(), c


def test_sqlite_export_has_every_added_column_with_its_values(run, tmp_path):
    d, orders = run
    out = str(tmp_path / "run.sqlite")
    export(d, ["orders"], out, fmt="sqlite")
    db = sqlite3.connect(out)
    for c in ADDED:
        assert [v for (v,) in db.execute(f"SELECT {c} FROM orders ORDER BY seq")] == orders[c].tolist()
    db.close()


def test_flow_export_writes_the_added_fields_so_the_flow_reruns_the_same_messages(run, tmp_path):
    from exsim.scenarios import load_generic

    d, orders = run
    export(d, "orders", str(tmp_path / "flow.csv"), fmt="flow")
    back = load_generic(str(tmp_path / "flow.csv")).orders
    assert back.tobytes() == orders.tobytes()
