"""The order slots' cold rows (``arena_ext``) across growth: copied only while a live slot is
marked, and never needed before (exchange.state.grow_cold_rows).

A flow of plain limit orders grows the arena without copying its cold rows; a venue flow that
starts plain and then sends icebergs, stops and GTD orders must give the same bytes as an engine
that never grew, and keep every marked order's cold fields through later growth and a restore.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.book import ARENA_EXT_DTYPE, MARK_ICEBERG
from exsim.exchange.state import NEED_ORDERS, grow_cold_rows, zeros_aligned
from exsim.scenarios.generators.uniform import uniform_flow
from exsim.scenarios.generators.venue_mix import venue_mix


def _flow():
    """4,000 plain messages, then 4,000 with stops, icebergs and GTD orders (ids apart)."""
    plain = uniform_flow(n=4_000, n_symbols=1, seed=3)
    venue = venue_mix(uniform_flow(n=4_000, n_symbols=1, seed=4), seed=4,
                      stop_share=0.2, iceberg_share=0.2, gtd_share=0.2)
    venue["order_id"] += 10_000_000
    venue["ts"] += int(plain["ts"].max()) + 1
    return np.concatenate([plain, venue])


def _run(capacity, flow, batch=500):
    eng = Engine(capacity=capacity)
    eng.add_symbol("S0")
    outs = [eng.process(flow[lo: lo + batch]) for lo in range(0, len(flow), batch)]
    return eng, [[t.tobytes() for t in res] for res in outs]


def test_growing_engine_matches_one_that_never_grew_through_plain_then_venue_orders():
    flow = _flow()
    grown, a = _run(16, flow)
    roomy, b = _run(1 << 16, flow)
    assert len(grown.state.arena) < len(roomy.state.arena)   # the small one did grow
    assert a == b
    assert grown.checkpoint() == roomy.checkpoint()
    assert len(grown.state.arena_ext) == len(grown.state.arena)


def test_marked_live_orders_keep_their_cold_fields_through_growth_and_restore():
    eng = Engine(capacity=16)
    eng.add_symbol("S0")
    for k in range(12):
        eng.submit("S0", "buy", qty=50, price=100 - k, display_qty=5, order_id=k + 1)
    before = eng.checkpoint()
    for _ in range(3):
        eng.grow(NEED_ORDERS)
    assert eng.checkpoint() == before
    live = eng.state.arena["marks"] & MARK_ICEBERG != 0
    assert int(live.sum()) == 12
    assert set(eng.state.arena_ext["display"][live]) == {5}
    again = Engine.restore(before)
    assert again.checkpoint() == before
    fills = again.submit("S0", "sell", qty=7, price=100).fills
    assert fills["qty"].tolist() == [5, 2]           # the slice, then the refilled slice


def test_cold_rows_are_copied_only_while_a_slot_is_marked():
    arena = np.zeros(8, Engine().state.arena.dtype)
    ext = zeros_aligned(8, ARENA_EXT_DTYPE)
    ext["display"] = 9                                 # stale: no slot is marked
    fresh = grow_cold_rows(ext, arena, 8, 32)
    assert len(fresh) == 32 and not fresh["display"].any()
    arena["marks"][3] = MARK_ICEBERG
    kept = grow_cold_rows(ext, arena, 8, 32)
    assert kept["display"][:8].tolist() == [9] * 8 and not kept["display"][8:].any()
    assert kept.ctypes.data % 64 == 0 and fresh.ctypes.data % 64 == 0
