"""``export --format flow`` keeps each symbol's engine options, so the flow runs the same market
again (issue 15 review, 3): the generic loader's ``symbol options`` line, read back into
``SymbolSpec.options``, and ``simulate`` registering (name, tick, options) symbols.

Needs the issue-15 engine (tick tables, lots, session close, money in ``add_symbol``).
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import InputError
from exsim.exchange.schema import ORDER_DTYPE, Tif
from exsim.replay.export import export
from exsim.replay.simulation import simulate
from exsim.scenarios import Flow
from exsim.scenarios.loaders.generic import load_generic, write_generic
from exsim.scenarios.scenario import SymbolSpec
from exsim.store import Catalog, Session, read

OPTS = dict(tick_table=[(1, 1), (105, 5)], lot_size=5, min_order_qty=10,
            session_close=16 * 3600 * 10**9, currency="USD", tick_value=12.5, maker_bps=-0.2,
            taker_bps=0.5)


def _flow(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    o = np.zeros(n, ORDER_DTYPE)
    o["ts"] = np.cumsum(rng.integers(1, 10**12, n))      # crosses the session close
    o["order_id"] = np.arange(1, n + 1)
    o["symbol"] = rng.integers(0, 2, n)
    o["side"] = rng.integers(0, 2, n)
    o["price"] = rng.integers(95, 115, n)                # some off the tick table
    o["qty"] = rng.integers(1, 6, n) * rng.choice([1, 5], n)   # some off lot, some below min
    o["trader"] = rng.integers(1, 6, n)
    o["tif"] = rng.choice([int(Tif.GTC), int(Tif.DAY)], n)
    return o


def test_an_exported_flow_reruns_the_same_market(tmp_path):
    eng = Engine(stp="cancel_resting")
    eng.add_symbol("VEN", **OPTS)
    eng.add_symbol("PLAIN")
    orders = _flow(3000, 1)
    s = Session.create(tmp_path / "run", eng, run_info={"scenario": "test"}, durability="none")
    s.process(orders)
    s.close()
    export(str(tmp_path / "run"), ["orders"], str(tmp_path / "flow.csv"), fmt="flow")
    g = load_generic(tmp_path / "flow.csv")
    assert [s.name for s in g.symbols] == ["VEN", "PLAIN"]
    got = dict(g.symbols[0].engine_options())
    assert {k: got[k] for k in OPTS} == {**OPTS, "tick_table": [(1, 1), (105, 5)]}
    assert g.symbols[1].options == ()                    # defaults are not written
    # what scenarios.flows passes for a generic file once it hands on the options
    syms = [(sp.name, sp.tick_size, {k: v for k, v in sp.engine_options().items()
                                     if k not in ("name", "tick_size")}) for sp in g.symbols]
    simulate(Flow(g.orders, syms, "csv:flow.csv", "csv"), str(tmp_path / "again"),
             durability="none", stp="cancel_resting")
    for table in ("fills", "l2", "events"):
        a, b = read(str(tmp_path / "run"), table), read(str(tmp_path / "again"), table)
        assert a.tobytes() == b.tobytes(), table
    cat = Catalog(str(tmp_path / "again"), readonly=True)
    try:
        assert cat.symbols()[0]["info"]["session_close"] == OPTS["session_close"]
    finally:
        cat.close()


def test_symbol_options_round_trip_and_old_files_still_load(tmp_path):
    o = np.zeros(1, ORDER_DTYPE)
    o["ts"], o["order_id"], o["qty"], o["price"] = 1, 1, 5, 100
    spec = SymbolSpec("A", 0.25, None, (("tick_table", ((1, 1), (200, 2))), ("lot_size", 5)))
    for name in ("f.csv", "f.csv.gz"):
        write_generic(tmp_path / name, o, [spec])
        g = load_generic(tmp_path / name)
        assert g.symbols == [spec] and g.orders.tobytes() == o.tobytes()
    old = tmp_path / "old.csv"
    old.write_text("# symbols: A=0.25\nts,symbol,kind,order_id\n1,A,NEW,1\n")
    assert load_generic(old).symbols == [SymbolSpec("A", 0.25)]
    for bad, words in (('{"B":{"lot_size":5}}', "not in the symbols table"),
                       ('{"A":{"lots":5}}', "unknown option 'lots'"),
                       ('[1]', "JSON object"), ("{", "not JSON")):
        p = tmp_path / "bad.csv"
        p.write_text(f"# symbols: A=1\n# symbol options: {bad}\nts,symbol,kind,order_id\n1,A,NEW,1\n")
        with pytest.raises(InputError, match=words):
            load_generic(p)


def test_simulate_with_replace_into_a_missing_directory_creates_it(tmp_path):
    o = np.zeros(1, ORDER_DTYPE)
    o["ts"], o["order_id"], o["qty"], o["price"] = 1, 1, 5, 100
    simulate(Flow(o, [("A", 1)], "orders", "orders"), str(tmp_path / "new"), durability="none",
             replace=True)
    assert read(str(tmp_path / "new"), "orders").size == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]
