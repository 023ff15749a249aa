"""verify on engine and reference-model runs with every new order type: a correct run verifies
clean. The flows mix stops and stop-limits (cascades included), icebergs refilling
while being swept, GTD and DAY orders expiring (before messages of other symbols too), cancels
and modifies by owners and by other traders, on two symbols with tick tables and lots.
"""

from __future__ import annotations


import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Tif
from exsim.replay import verify, verify_arrays

from test_replay_common import store_run


DAY_NS = 86_400 * 10**9
TABLE = [(1, 1), (105, 5)]


def _on_grid(p: int) -> int:
    return p if p < 105 else p - p % 5


def venue_flow(n: int, seed: int) -> np.ndarray:
    """A seeded flow over symbols 0 (tick table, lot 1) and 1 (lot 2), ts crossing midnights."""
    rng = np.random.default_rng(seed)
    o = np.zeros(n, ORDER_DTYPE)
    ts = 1_000 + np.cumsum(rng.integers(1, DAY_NS // 400, n))
    owner: dict = {}
    for i in range(n):
        sym = int(rng.integers(0, 2))
        lot = 2 if sym == 1 else 1
        oid = int(rng.integers(1, 120))
        row = dict(ts=int(ts[i]), order_id=oid, symbol=sym, trader=int(rng.integers(1, 5)))
        u = rng.random()
        if u < 0.25 and (sym, oid) in owner:
            # cancels and modifies: mostly by the owner, sometimes by another trader
            kind = Kind.CANCEL if rng.random() < 0.5 else Kind.MODIFY
            trader, is_stop = owner[(sym, oid)]
            row.update(kind=kind, trader=trader if rng.random() < 0.9 else trader % 4 + 1,
                       price=_on_grid(int(100 + rng.integers(-8, 9))),
                       qty=lot * int(rng.integers(1, 8)),
                       stop_price=_on_grid(int(100 + rng.integers(-8, 9))) if is_stop else 0)
        else:
            side = int(rng.integers(0, 2))
            otype = int(rng.choice([OrderType.LIMIT, OrderType.MARKET, OrderType.STOP,
                                    OrderType.STOP_LIMIT], p=[0.7, 0.05, 0.12, 0.13]))
            tif = int(rng.choice([Tif.GTC, Tif.IOC, Tif.DAY, Tif.GTD], p=[0.5, 0.1, 0.2, 0.2]))
            if otype == OrderType.MARKET and tif in (Tif.DAY, Tif.GTD):
                tif = int(Tif.IOC)
            qty = lot * int(rng.integers(1, 12))
            display = lot * int(rng.integers(1, 4)) if (
                otype == OrderType.LIMIT and tif != Tif.IOC and rng.random() < 0.3) else 0
            row.update(kind=Kind.NEW, side=side, order_type=otype, tif=tif, qty=qty,
                       price=_on_grid(int(100 + rng.integers(-8, 9))),
                       stop_price=_on_grid(int(100 + rng.integers(-8, 9))),
                       display_qty=min(display, qty),
                       expire_ts=int(ts[i] + rng.integers(1, DAY_NS // 20)) if tif == Tif.GTD
                       else 0)
            owner[(sym, oid)] = (row["trader"], otype in (OrderType.STOP, OrderType.STOP_LIMIT))
        for k, v in row.items():
            o[i][k] = v
    return o


def venue_engine() -> Engine:
    eng = Engine(stp="cancel_resting", ownership=True)
    eng.add_symbol("A", tick_table=TABLE, session_close=16 * 3600 * 10**9)
    eng.add_symbol("B", lot_size=2, min_order_qty=2)
    return eng


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_engine_runs_with_every_new_order_type_verify_clean(seed):
    orders = venue_flow(6000, seed)
    eng = venue_engine()
    res = eng.process(orders)
    report = verify_arrays(orders, res.fills, res.l2, res.events, stp="cancel_resting",
                           symbols=[0, 1], config=eng.config())
    assert report.ok, report.violations[:5]
    assert report.summary["fills"] == res.fills.size > 0


def test_a_stored_run_with_every_new_order_type_verifies_clean(tmp_path):
    """verify reads ownership, tick tables, lots and session closes from the run config, and
    checks in small seq ranges the same as in one."""
    store_run(tmp_path, venue_flow(4000, seed=4), engine=venue_engine())
    report = verify(tmp_path)
    assert report.ok, report.violations[:5]
    assert verify(tmp_path, chunk=97).ok


def test_reference_model_runs_with_every_new_order_type_verify_clean():
    """The same flows through tests/model.py (the reference model of docs/semantics.md)."""
    import model as reference

    for seed in (5, 6):
        orders = venue_flow(3000, seed)
        m = reference.Model(stp="cancel_resting", ownership=True)
        m.add_symbol("A", tick_table=TABLE, session_close=16 * 3600 * 10**9)
        m.add_symbol("B", lot_size=2, min_order_qty=2)
        res = m.process(orders)
        config = {"stp": "cancel_resting", "ownership": True, "symbols": [
            {"name": "A", "id": 0, "tick_table": TABLE, "session_close": 16 * 3600 * 10**9},
            {"name": "B", "id": 1, "lot_size": 2, "min_order_qty": 2}]}
        report = verify_arrays(orders, res.fills, res.l2, res.events, stp="cancel_resting",
                               symbols=[0, 1], config=config)
        assert report.ok, report.violations[:5]
        assert (res.events["event"] == 6).sum() > 0 and (res.events["reason"] == 68).sum() > 0
