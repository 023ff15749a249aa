"""verify on engine runs of whole trading days (needs the issue-16 engine: phases, uncrosses,
bands): a correct run verifies clean, and a defect planted in the engine's output is caught by
the rule that names it.

The flows are seeded: per symbol a pre-open call, the opening auction, continuous trading with a
narrow dynamic band (so volatility interruptions happen and end by their clock), a halt and its
resumption, the pre-close call and the closing auction; orders are limits, market orders and
icebergs around 100, with cancels and modifies.
"""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import AUCTION_SIDE, ORDER_DTYPE, Event, Kind, OrderType, Phase, Tif
from exsim.replay import verify, verify_arrays

from test_replay_common import store_run


def day_flow(n: int, seed: int, symbols: int = 2) -> np.ndarray:
    """A seeded day: phases at fixed fractions of the flow, orders in between."""
    rng = np.random.default_rng(seed)
    rows = []
    ts = 1_000
    schedule = {0: Phase.PRE_OPEN, n // 6: Phase.OPENING_AUCTION, n // 2: Phase.HALTED,
                n // 2 + n // 20: Phase.REOPENING_AUCTION, n // 2 + n // 10: Phase.CONTINUOUS,
                4 * n // 5: Phase.PRE_CLOSE, n - 1: Phase.CLOSING_AUCTION}
    live: dict = {}
    for i in range(n):
        ts += int(rng.integers(1, 2_000_000))
        for sym in range(symbols):
            if i in schedule:
                r = np.zeros(1, ORDER_DTYPE)[0]
                r["ts"], r["symbol"], r["kind"], r["phase"] = ts, sym, Kind.PHASE, schedule[i]
                rows.append(r)
        sym = int(rng.integers(0, symbols))
        r = np.zeros(1, ORDER_DTYPE)[0]
        r["ts"], r["symbol"], r["trader"] = ts, sym, int(rng.integers(1, 5))
        oid = int(rng.integers(1, 200))
        if (sym, oid) in live and rng.random() < 0.3:
            r["order_id"], r["trader"] = oid, live[(sym, oid)]
            if rng.random() < 0.5:
                r["kind"] = Kind.CANCEL
            else:
                r["kind"], r["price"] = Kind.MODIFY, int(100 + rng.integers(-6, 7))
                r["qty"] = int(rng.integers(1, 10))
        else:
            r["kind"], r["order_id"], r["side"] = Kind.NEW, oid, int(rng.integers(0, 2))
            market = rng.random() < 0.08
            r["order_type"] = OrderType.MARKET if market else OrderType.LIMIT
            r["tif"] = Tif.GTC if market or rng.random() < 0.9 else Tif.IOC
            r["price"] = 0 if market else int(100 + rng.integers(-6, 7))
            r["qty"] = int(rng.integers(1, 12))
            if not market and rng.random() < 0.15:
                r["display_qty"] = min(int(rng.integers(1, 4)), int(r["qty"]))
            live[(sym, oid)] = int(r["trader"])
        rows.append(r)
    return np.array(rows, ORDER_DTYPE)


def day_engine(symbols: int = 2) -> Engine:
    eng = Engine(ownership=True)
    for s in range(symbols):
        eng.add_symbol(f"S{s}", reference_price=100, static_band_bps=1000, dynamic_band_bps=200,
                       interruption_ns=20_000_000)
    return eng


def run_day(seed: int, n: int = 3000):
    orders = day_flow(n, seed)
    eng = day_engine()
    res = eng.process(orders)
    return orders, res, eng.config()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_engine_trading_days_verify_clean(seed):
    orders, res, config = run_day(seed)
    report = verify_arrays(orders, res.fills, res.l2, res.events, config=config)
    assert report.ok, report.violations[:5]
    ev = res.events
    # the day did what it is for: uncrosses that traded, interruptions, indicatives
    assert (res.fills["aggressor_side"] == AUCTION_SIDE).any()
    assert ((ev["event"] == Event.UNCROSS) & (ev["filled_qty"] > 0)).any()
    assert (ev["event"] == Event.INDICATIVE).any()


def test_a_stored_trading_day_verifies_clean_in_ranges(tmp_path):
    store_run(tmp_path, day_flow(2500, seed=4), engine=day_engine())
    assert verify(tmp_path).ok
    assert verify(tmp_path, chunk=97).ok


def _day_with(seed=1):
    orders, res, config = run_day(seed)
    return orders, res.fills.copy(), res.l2.copy(), res.events.copy(), config


def _rules(orders, fills, l2, events, config):
    return {v.rule for v in verify_arrays(orders, fills, l2, events, config=config).violations}


def test_planted_uncross_price_is_auction_price():
    o, f, l2, e, cfg = _day_with()
    j = np.flatnonzero((e["event"] == Event.UNCROSS) & (e["filled_qty"] > 0))[0]
    e["price"][j] += 1
    assert "auction_price" in _rules(o, f, l2, e, cfg)


def test_planted_auction_trade_price_is_auction_price():
    o, f, l2, e, cfg = _day_with()
    j = np.flatnonzero(f["aggressor_side"] == AUCTION_SIDE)[0]
    f["price"][j] += 1
    assert "auction_price" in _rules(o, f, l2, e, cfg)


def test_planted_allocation_is_auction_allocation():
    o, f, l2, e, cfg = _day_with()
    auc = np.flatnonzero(f["aggressor_side"] == AUCTION_SIDE)
    seqs, counts = np.unique(f["seq"][auc], return_counts=True)
    s = seqs[np.argmax(counts)]
    rows = np.flatnonzero((f["aggressor_side"] == AUCTION_SIDE) & (f["seq"] == s))
    assert rows.size >= 2
    a, b = rows[0], rows[-1]
    f["buy_order_id"][a], f["buy_order_id"][b] = f["buy_order_id"][b], f["buy_order_id"][a]
    assert "auction_allocation" in _rules(o, f, l2, e, cfg)


def test_planted_continuous_fill_in_a_call_is_trade_in_call():
    o, f, l2, e, cfg = _day_with()
    j = np.flatnonzero(f["aggressor_side"] == AUCTION_SIDE)[0]
    f["aggressor_side"][j] = 0
    assert "trade_in_call" in _rules(o, f, l2, e, cfg)


def test_planted_fill_outside_the_band_is_band():
    o, f, l2, e, cfg = _day_with()
    j = np.flatnonzero(f["aggressor_side"] != AUCTION_SIDE)[-1]
    f["price"][j] += 50
    assert "band" in _rules(o, f, l2, e, cfg)


def test_planted_missing_indicative_is_indicative():
    o, f, l2, e, cfg = _day_with()
    j = np.flatnonzero(e["event"] == Event.INDICATIVE)[0]
    e = np.delete(e, j)
    assert "indicative" in _rules(o, f, l2, e, cfg)


def test_reference_model_trading_days_verify_clean():
    """The same days through tests/model.py (needs the model's phases): verify agrees with the
    reference model as well as with the engine."""
    import model as reference

    for seed in (5, 6):
        orders = day_flow(2000, seed)
        m = reference.Model(ownership=True)
        config = {"stp": "none", "ownership": True, "symbols": []}
        for s in range(2):
            opts = dict(reference_price=100, static_band_bps=1000, dynamic_band_bps=200,
                        interruption_ns=20_000_000)
            m.add_symbol(f"S{s}", **opts)
            config["symbols"].append(dict(name=f"S{s}", id=s, **opts))
        res = m.process(orders)
        report = verify_arrays(orders, res.fills, res.l2, res.events, config=config)
        assert report.ok, report.violations[:5]
        assert (res.events["reason"] == 97).any()     # an interruption ran to its end
