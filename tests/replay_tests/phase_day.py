"""A small trading day for the phase tests of book_at, stats and checkpoints: symbol AUC goes
through a pre-open call (crossing limits, MARKET orders on both sides), its opening auction,
continuous trading with a halt, a pre-close call and its closing auction; symbol OTHER trades
continuously throughout. Built message by message as ORDER_DTYPE rows (PHASE messages as the
contract in exchange/schema.py describes them), so a test can replay it one message at a time
through an Engine and compare with what the store and replay say at every seq."""

from __future__ import annotations

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Phase, Side, Tif

AUC, OTHER = 0, 1
T0 = 1_700_000_000_000_000_000
STEP = 1_000_000   # ns between messages


def engine() -> Engine:
    """A fresh engine with the day's two symbols (AUC id 0, OTHER id 1)."""
    eng = Engine()
    eng.add_symbol("AUC")
    eng.add_symbol("OTHER")
    return eng


class _Day:
    def __init__(self):
        self.rows = []
        self.next_id = 1

    def _msg(self, **fields):
        r = np.zeros(1, ORDER_DTYPE)
        r["ts"] = T0 + STEP * len(self.rows)
        for k, v in fields.items():
            r[k] = v
        self.rows.append(r)

    def phase(self, phase: Phase, reference_price: int = 0, symbol: int = AUC):
        self._msg(kind=int(Kind.PHASE), symbol=symbol, phase=int(phase), price=reference_price)

    def order(self, side: Side, qty: int, price: int = 0, symbol: int = AUC, market=False,
              trader: int = 1):
        self._msg(kind=int(Kind.NEW), symbol=symbol, side=int(side), qty=qty, price=price,
                  order_type=int(OrderType.MARKET if market else OrderType.LIMIT),
                  tif=int(Tif.GTC), order_id=self.next_id,
                  trader=trader)
        self.next_id += 1


def day_flow() -> np.ndarray:
    """The day's messages in seq order (ORDER_DTYPE)."""
    d = _Day()
    B, S = Side.BUY, Side.SELL
    d.order(B, 5, 50, symbol=OTHER)
    d.order(S, 5, 52, symbol=OTHER, trader=2)
    d.phase(Phase.PRE_OPEN, reference_price=102)
    d.order(B, 50, 105)
    d.order(S, 40, 100, trader=2)
    d.order(B, 30, market=True, trader=3)
    d.order(B, 1, 51, symbol=OTHER)
    d.order(S, 60, 104, trader=4)
    d.order(S, 25, market=True, trader=5)
    d.order(B, 10, 99, trader=6)
    d.order(S, 3, 52, symbol=OTHER, trader=2)
    d.order(B, 20, 105, trader=7)
    d.phase(Phase.OPENING_AUCTION)             # uncross, then continuous
    d.order(B, 10, 106, trader=8)
    d.order(S, 10, 103, trader=9)
    d.order(B, 6, 52, symbol=OTHER, trader=3)   # trades on OTHER
    d.phase(Phase.HALTED)
    d.order(B, 5, 110, trader=8)                # refused in the halt
    d.phase(Phase.CONTINUOUS)                   # no auction pending: no uncross
    d.order(S, 15, 101, trader=9)
    d.phase(Phase.PRE_CLOSE)
    d.order(B, 40, 108, trader=1)
    d.order(S, 35, 100, trader=2)
    d.order(S, 10, market=True, trader=3)
    d.order(B, 2, 50, symbol=OTHER, trader=4)
    d.phase(Phase.CLOSING_AUCTION)              # uncross, then closed
    d.order(S, 1, 52, symbol=OTHER, trader=5)
    return np.concatenate(d.rows)


def step_by_step(orders: np.ndarray, symbol=AUC):
    """Replay ``orders`` one message at a time through a fresh engine; return per seq (1-based
    index k-1) the engine's (phase, indicative, bids, asks) of ``symbol`` after message k, and
    the engine's outputs of the whole run (fills, events) concatenated."""
    eng = engine()
    after, fills, events = [], [], []
    for k in range(orders.size):
        res = eng.process(orders[k:k + 1])
        fills.append(res.fills.copy())
        events.append(res.events.copy())
        bids, asks = eng.depth(symbol, levels=1 << 62)
        after.append((eng.phase(symbol), eng.indicative(symbol), bids.copy(), asks.copy()))
    return after, np.concatenate(fills), np.concatenate(events)


def journal(path: str, orders: np.ndarray, batch: int = 3, **opts) -> str:
    """Journal ``orders`` into a new data directory ``path`` in batches of ``batch`` messages,
    checkpointing and sealing often (mid-call checkpoints included); returns ``path``."""
    from exsim.store import Session

    s = Session.create(path, engine(), run_info={"scenario": "phase day", "seed": 0},
                       durability="none", seal_in_background=False,
                       **{"checkpoint_every": 7, "seal_every": 9, **opts})
    for lo in range(0, orders.size, batch):
        s.process(orders[lo:lo + batch])
    s.close()
    return path
