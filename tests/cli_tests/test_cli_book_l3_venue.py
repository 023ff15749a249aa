"""``exsim book --l3`` on a run with an iceberg and pending stops, and ``exsim verify --help``
naming every rule (issue 15 review, 5 and 11).

Needs the issue-15 engine (icebergs and stops): the L3 table shows each order's displayed
quantity, reserve and display size, and the pending stops are listed apart, in release order.
"""

from __future__ import annotations

import numpy as np

from cli_fixtures import run
from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, OrderType
from exsim.store import Session


def _msgs(rows):
    o = np.zeros(len(rows), ORDER_DTYPE)
    for i, r in enumerate(rows):
        for k, v in r.items():
            o[i][k] = v
    return o


def test_book_l3_shows_iceberg_reserve_and_pending_stops_apart(tmp_path):
    eng = Engine()
    eng.add_symbol("ICE")
    orders = _msgs([
        dict(ts=1, order_id=1, side=0, price=100, qty=50, display_qty=10, trader=1),
        dict(ts=2, order_id=2, side=0, price=100, qty=7, trader=2),
        dict(ts=3, order_id=3, side=1, price=100, qty=4, trader=3),          # trades at 100
        dict(ts=4, order_id=4, side=0, order_type=int(OrderType.STOP), stop_price=105, qty=3,
             trader=4),
        dict(ts=5, order_id=5, side=1, order_type=int(OrderType.STOP_LIMIT), stop_price=95,
             price=94, qty=2, trader=5),
    ])
    s = Session.create(tmp_path / "run", eng, run_info={"scenario": "test"}, durability="none")
    s.process(orders)
    s.close()
    code, out, err = run(["book", tmp_path / "run", "ICE", "--seq", 5, "--l3"])
    assert code == 0, err
    lines = out.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("side  price")))
    assert lines[head].split() == ["side", "price", "queue", "order_id", "qty", "hidden",
                                   "display", "filled", "trader"]
    # the iceberg showed 10, 4 were filled: 6 shown, 40 in reserve, display size 10
    assert lines[head + 2].split() == ["buy", "100", "1", "1", "6", "40", "10", "4", "1"]
    assert lines[head + 3].split() == ["buy", "100", "2", "2", "7", "0", "0", "2"]
    stop_title = next(i for i, line in enumerate(lines) if line.startswith("pending stops"))
    assert "2" in lines[stop_title]
    assert lines[stop_title + 1].split() == ["side", "stop_price", "limit", "order_id", "qty",
                                             "trader"]
    assert [line.split() for line in lines[stop_title + 3:stop_title + 5]] == [
        ["buy", "105", "market", "4", "3", "4"], ["sell", "95", "94", "5", "2", "5"]]


def test_verify_help_names_every_rule():
    from exsim.replay.verification.run import RULES
    code, out, _ = run(["verify", "--help"])
    assert code == 0
    text = " ".join(out.split())
    for rule in RULES:
        assert rule in text, rule
    assert "min_qty" in RULES and "indicative, band." in text
