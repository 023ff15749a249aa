"""book_at's L3 view of the new order state: icebergs (displayed and hidden apart), pending stops
(``stops``, release order) and GTD orders, against the live engine; depth stays displayed-only.

Needs the engine of issue 15 (``Engine.stops``, stops, icebergs and GTD in the kernels).
"""

import numpy as np
import pytest

from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Side, Tif
from exsim.replay import book_at
from exsim.store import Session
from test_replay_common import SYMBOLS, make_engine, rich_flow


def feature_flow(n: int, seed: int) -> np.ndarray:
    """``rich_flow`` with about a tenth of its NEW limits each turned into a STOP_LIMIT or STOP
    (trigger a few ticks away from the price), an iceberg (display a third of its quantity)
    and a GTD order (expiring within a few hundred messages)."""
    rng = np.random.default_rng(seed)
    o = rich_flow(n, seed)
    new = (o["kind"] == Kind.NEW) & (o["order_type"] == OrderType.LIMIT) & (o["tif"] == Tif.GTC) \
        & (o["flags"] == 0) & (o["qty"] >= 3)
    pick = rng.random(n)
    stop = new & (pick < 0.1)
    ice = new & (pick >= 0.1) & (pick < 0.2)
    gtd = new & (pick >= 0.2) & (pick < 0.3)
    up = np.where(o["side"] == Side.BUY, 1, -1)
    o["order_type"][stop] = rng.choice([int(OrderType.STOP_LIMIT), int(OrderType.STOP)], stop.sum())
    o["stop_price"][stop] = o["price"][stop] + up[stop] * rng.integers(2, 8, stop.sum())
    o["display_qty"][ice] = o["qty"][ice] // 3
    o["tif"][gtd] = int(Tif.GTD)
    o["expire_ts"][gtd] = o["ts"][gtd] + rng.integers(1_000, 300_000, gtd.sum())
    return o


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A stored run of ``feature_flow`` and the live engine's books and stops after each batch."""
    d = tmp_path_factory.mktemp("book_at_stops")
    orders = feature_flow(4000, seed=21)
    rng = np.random.default_rng(3)
    s = Session.create(d, make_engine(), run_info={"scenario": "test"}, durability="none",
                       checkpoint_every=700, seal_every=500)
    captures, i = [], 0
    while i < orders.size:
        j = min(orders.size, i + int(rng.integers(1, 250)))
        s.process(orders[i:j])
        i = j
        books = {name: (*s.engine.depth(name, levels=1 << 30), s.engine.orders(name),
                        s.engine.stops(name)) for name in SYMBOLS}
        captures.append((s.engine.seq, books))
    s.close()
    return d, captures


def test_l3_view_equals_the_live_orders_stops_and_depth_at_every_batch_end(run):
    d, captures = run
    seen_stops = seen_hidden = 0
    for seq, books in captures[::7]:
        for name in SYMBOLS:
            bids, asks, orders, stops = books[name]
            view = book_at(d, name, seq=seq, depth=None, l3=True)
            assert np.array_equal(view.orders, orders) and np.array_equal(view.stops, stops)
            assert np.array_equal(view.bids, bids) and np.array_equal(view.asks, asks)
            seen_stops += stops.size
            seen_hidden += int((orders["hidden"] > 0).sum())
    assert seen_stops and seen_hidden   # the flow left pending stops and iceberg reserve


def test_the_l2_view_has_no_stops_and_the_same_displayed_depth(run):
    d, captures = run
    seq, books = captures[len(captures) // 2]
    for name in SYMBOLS:
        l2, l3 = book_at(d, name, seq=seq, depth=None), book_at(d, name, seq=seq, depth=None, l3=True)
        assert l2.stops is None and l2.orders is None
        assert np.array_equal(l2.bids, l3.bids) and np.array_equal(l2.asks, l3.asks)


def _msg(ts, oid, side, price, qty, *, order_type=OrderType.LIMIT, tif=Tif.GTC, stop=0,
         display=0, expire=0, kind=Kind.NEW, trader=1):
    m = np.zeros(1, ORDER_DTYPE)
    m[0] = (ts, oid, price, qty, 0, trader, kind, order_type, tif, 0, side, stop, display, 0, expire, 0)
    return m


def test_a_worked_book_shows_reserve_apart_and_stops_in_release_order(tmp_path):
    """Resting: a sell iceberg of 100 showing 10 at 105 and a GTD bid; pending: buy stops at 107
    and 106 (entered in that order), sell stops at 95 and 97. The view lists the iceberg with
    qty 10 and hidden 90, the stops as BUY 106, BUY 107, SELL 97, SELL 95 (release order), and
    the depth only the displayed 10 at 105."""
    flow = np.concatenate([
        _msg(1, 1, Side.SELL, 105, 100, display=10, trader=2),
        _msg(2, 2, Side.BUY, 100, 5, tif=Tif.GTD, expire=1_000_000),
        _msg(3, 3, Side.BUY, 0, 4, order_type=OrderType.STOP, stop=107),
        _msg(4, 4, Side.BUY, 108, 4, order_type=OrderType.STOP_LIMIT, stop=106),
        _msg(5, 5, Side.SELL, 0, 3, order_type=OrderType.STOP, stop=95),
        _msg(6, 6, Side.SELL, 96, 3, order_type=OrderType.STOP_LIMIT, stop=97),
        _msg(7, 7, Side.BUY, 101, 1, trader=3),   # a trade-free message after the stops
    ])
    s = Session.create(str(tmp_path), make_engine(), run_info={"scenario": "worked"},
                       durability="none", checkpoint_every=3, seal_every=4)
    s.process(flow[:5])
    s.process(flow[5:])
    s.close()
    view = book_at(str(tmp_path), "AAA", seq=7, depth=None, l3=True)
    ice = view.orders[view.orders["order_id"] == 1][0]
    assert (ice["qty"], ice["hidden"], ice["display_qty"]) == (10, 90, 10)
    gtd = view.orders[view.orders["order_id"] == 2][0]
    assert (gtd["tif"], gtd["expire_ts"]) == (int(Tif.GTD), 1_000_000)
    assert list(view.stops["order_id"]) == [4, 3, 6, 5]
    assert list(view.stops["stop_price"]) == [106, 107, 97, 95]
    assert list(view.stops["order_type"]) == [int(OrderType.STOP_LIMIT), int(OrderType.STOP),
                                              int(OrderType.STOP_LIMIT), int(OrderType.STOP)]
    assert [(int(r["price"]), int(r["qty"])) for r in view.asks] == [(105, 10)]
    assert [(int(r["price"]), int(r["qty"])) for r in view.bids] == [(101, 1), (100, 5)]
    # the L2 view agrees on the displayed book and carries no stops
    l2 = book_at(str(tmp_path), "AAA", seq=7, depth=None)
    assert np.array_equal(l2.asks, view.asks) and l2.stops is None
    # before the stops arrived the view has none
    assert book_at(str(tmp_path), "AAA", seq=2, l3=True).stops.size == 0
