"""The web page's update builder (exchange.gateway.web.Board): what a watcher is sent.

The engine is the reference: after any flow cut into any batches, the ladder the board shows is
the engine's ``depth``, positions net to the fills, and the profit identity holds; updates are
coalesced (one per flush, none when nothing changed) and say only what changed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction

from conftest import SYMBOLS, buy, cut_points, flow, flows, make_book, msg, sell, split
from hypothesis import given, settings
from hypothesis import strategies as st

from exsim.exchange.gateway.web import Board, Position, Scope, for_scope
from exsim.exchange.schema import Event, Kind, Phase

LEVELS = 3


def _board(engine, levels=LEVELS, tape=20):
    syms = {i: (name, "0.01") for name, i in engine.symbols.items()}
    return Board(syms, lambda t: {1: "alice", 2: "bob"}.get(t), levels=levels, tape=tape)


def _feed(board, engine, batch):
    res = engine.process(batch)
    board.add_batch(engine.seq, res.l2, res.fills, res.events)
    return res


def _depth(engine, name, levels=LEVELS):
    bids, asks = engine.depth(name, levels)
    return {"bids": [[int(p), int(q), int(c)] for p, q, c in bids.tolist()],
            "asks": [[int(p), int(q), int(c)] for p, q, c in asks.tolist()]}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_ladder_and_positions_agree_with_the_engine_after_any_batches(data):
    orders = data.draw(flows(min_size=20, max_size=120))
    cuts = data.draw(cut_points(len(orders)))
    flush_after = data.draw(st.sets(st.integers(0, 9)))
    engine = make_book("engine")
    board = _board(engine)
    fills = []
    for i, batch in enumerate(split(orders, cuts)):
        fills.extend(_feed(board, engine, batch).fills.tolist())
        if i in flush_after:
            board.flush()
    board.flush()
    for name, _, _ in SYMBOLS:
        assert board.ladder(name) == _depth(engine, name)
    snap = board.snapshot()
    assert snap["seq"] == engine.seq
    # net per (account, symbol) is bought - sold; the identity realised + net * (mark - avg)
    # == sum of signed qty * (mark - price) holds at any mark (here 100)
    net, flows_pnl = defaultdict(int), defaultdict(Fraction)
    names = {i: n for n, i in engine.symbols.items()}
    label = {1: "alice", 2: "bob"}
    for f in fills:
        _, _, _, price, qty, _, _, sym, buyer, seller, _ = f
        for trader, signed in ((buyer, qty), (seller, -qty)):
            key = (label.get(trader, f"trader {trader}"), names[sym])
            net[key] += signed
            flows_pnl[key] += signed * (100 - price)
    assert set(snap["positions"]) == set(net)
    for key, row in snap["positions"].items():
        assert row["net"] == net[key] == row["bought"] - row["sold"]
        total = row["realized"] + row["net"] * (100 - row["avg_cost"])
        # cost and profit are floats (Position: exact below 2^53): the identity holds to a few
        # units in the last place of the largest term (a fill at MAX_PRICE is ~2^62 ticks)
        scale = max(abs(row["realized"]), abs(row["net"] * row["avg_cost"]),
                    abs(float(flows_pnl[key])), 1.0)
        assert abs(total - float(flows_pnl[key])) < 1e-6 + scale * 2.0 ** -48
    assert [t["trade_id"] for t in snap["trades"]] == [f[2] for f in fills][-20:]


def test_average_cost_is_that_of_the_open_position_and_a_reducing_fill_realises_profit():
    p = Position()
    p.fill(3, 100)
    p.fill(1, 104)
    assert (p.net, p.avg_cost, p.realized) == (4, 101.0, 0)
    p.fill(-2, 110)                       # sells 2 of 4: realises 2 * (110 - 101)
    assert (p.net, p.avg_cost, p.realized) == (2, 101.0, 18)
    p.fill(-4, 90)                        # closes 2 at a loss of 11 each, opens -2 at 90
    assert (p.net, p.avg_cost, p.realized) == (-2, 90.0, -4)
    p.fill(2, 95)                         # covers the short at a loss of 5 each: flat
    assert (p.net, p.avg_cost, p.realized, p.bought, p.sold) == (0, 0.0, -14, 6, 6)


def test_updates_are_coalesced_and_say_only_what_changed():
    engine = make_book("engine")
    board = _board(engine, levels=2)
    assert board.flush() is None                                   # nothing happened
    for i, price in enumerate((100, 99, 98)):                      # three batches, one update
        _feed(board, engine, buy(i + 1, price, 5, trader=1))
    up = board.flush()
    assert up["type"] == "update" and up["seq"] == 3
    assert up["books"] == {"A": {"bids": [[100, 5, 1], [99, 5, 1]], "asks": []}}
    assert up["trades"] == [] and up["positions"] == {}
    assert board.flush() is None                                   # nothing new since
    _feed(board, engine, buy(9, 97, 5, trader=1))                  # below the top 2 levels
    assert board.flush() is None                                   # the shown ladder is as it was
    _feed(board, engine, sell(10, 100, 2, trader=2))
    up = board.flush()
    assert up["books"] == {"A": {"bids": [[100, 3, 1], [99, 5, 1]], "asks": []}}
    assert [(t["symbol"], t["price"], t["qty"], t["aggressor"]) for t in up["trades"]] \
        == [("A", 100, 2, "sell")]
    assert {k: (r["net"], r["avg_cost"]) for k, r in up["positions"].items()} \
        == {("alice", "A"): (2, 100.0), ("bob", "A"): (-2, 100.0)}


def test_the_snapshot_starts_from_the_engine_depth_and_a_phase_change_is_an_update():
    engine = make_book("engine")
    engine.process(flow(buy(1, 100, 5), buy(2, 101, 1), sell(3, 103, 4)))
    board = _board(engine)
    bids, asks = engine.depth("A", 1 << 62)
    board.load_depth(0, bids, asks)
    assert board.snapshot()["books"]["A"] == _depth(engine, "A")
    ph = msg(kind=Kind.PHASE, order_id=0, price=0, qty=0, phase=Phase.PRE_OPEN)
    res = _feed(board, engine, ph)
    assert Event.PHASE in res.events["event"].tolist()
    up = board.flush()
    assert up["phases"] == {"A": "PRE_OPEN"}
    assert board.snapshot()["symbols"][0] == {"name": "A", "tick_size": "0.01",
                                              "phase": "PRE_OPEN"}


def test_a_watcher_sees_only_the_positions_of_its_scope():
    engine = make_book("engine")
    board = _board(engine)
    _feed(board, engine, flow(buy(1, 100, 5, trader=1), sell(2, 100, 5, trader=2),
                              sell(3, 100, 1, trader=7), buy(4, 100, 1, trader=1)))
    up = board.flush()
    everyone = json.loads(for_scope(up, Scope(everyone=True)))["positions"]
    assert {(r["account"], r["net"]) for r in everyone} \
        == {("alice", 6), ("bob", -5), ("trader 7", -1)}
    alice = json.loads(for_scope(up, Scope(accounts=frozenset({"alice"}))))
    assert [(r["account"], r["net"]) for r in alice["positions"]] == [("alice", 6)]
    assert alice["books"] == json.loads(for_scope(up, Scope(everyone=True)))["books"]
