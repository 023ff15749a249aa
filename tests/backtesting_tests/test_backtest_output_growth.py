"""Growth of a backtest's scratch outputs: a stop cascade's bound can ask for far more rows in one
output than the others need, so only an output short of room grows (exchange.state.grow_output,
as the engine's own outputs do), and the results must not depend on how often anything grew."""

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.state import M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2, NEED_OUTPUT
from exsim.replay.backtesting import kernels as C
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategies import InventoryMarketMaker, mm_quotes
from exsim.replay.backtesting.strategy import QuoteStrategy
from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow
from exsim.scenarios.generators.venue_mix import venue_mix

TRADER = 999_999


def _venue(n: int) -> np.ndarray:
    return venue_mix(uniform_flow(n_symbols=1, **{**BENCH_1M, "n": n}), seed=7)


def _run(flow, fast):
    """The njit path (``fast``) or the Python strategy API, both quoting into the flow."""
    strategy = QuoteStrategy(mm_quotes, [5, 20, 100], every=37) if fast else \
        InventoryMarketMaker(size=5, skew_lots=20, max_position=200, every=50)
    return backtest(flow, strategy, trader=TRADER, fast=fast)


def test_only_an_output_short_of_room_grows_and_strategy_rows_are_kept():
    eng = Engine()
    eng.add_symbol("S")
    a = C.EngineArrays(eng)
    fills, l2, events = a.fills, a.l2, a.events
    meta = a.state.meta
    meta[M_NEED_FILLS], meta[M_NEED_L2], meta[M_NEED_EVENTS] = 5_000, len(l2), 3
    a.grow(NEED_OUTPUT)
    assert len(a.fills) >= 5_000 and a.l2 is l2 and a.events is events
    a.sf[:3]["trade_id"] = [7, 8, 9]
    a.scnt[0] = 3
    a.grow(C.NEED_STRAT)          # room for the strategy's rows plus a whole scratch output
    assert len(a.sf) >= 3 + len(a.fills)
    assert a.sf[:3]["trade_id"].tolist() == [7, 8, 9]


@pytest.mark.parametrize("fast", [True, False])
def test_a_venue_flow_backtest_gives_the_same_bytes_however_its_outputs_grew(monkeypatch, fast):
    flow = _venue(4_000)
    grown = _run(flow, fast)
    assert len(grown.fills)                       # the strategy traded against stops and icebergs
    roomy_init = C.EngineArrays.__init__

    def roomy(self, engine):
        roomy_init(self, engine)
        self.fills, self.l2, self.events = (np.zeros(1 << 16, x.dtype)
                                            for x in (self.fills, self.l2, self.events))
        self.sf, self.se = (np.zeros(1 << 18, x.dtype) for x in (self.sf, self.se))

    monkeypatch.setattr(C.EngineArrays, "__init__", roomy)
    pre_sized = _run(flow, fast)
    for name in ("fills", "events", "orders", "marks", "series"):
        assert getattr(grown, name).tobytes() == getattr(pre_sized, name).tobytes(), name
    assert grown.summary == pytest.approx(pre_sized.summary, nan_ok=True)
