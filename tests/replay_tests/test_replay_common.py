"""Shared builders for the replay tests (no tests here): a rich seeded flow and stored runs.

The flow mixes every message kind over three symbols plus an unknown symbol id: GTC/IOC/FOK
limits, market orders, post-only, modifies that keep or lose priority, cancels of live and of
unknown ids, duplicates (ids come from a small pool) and malformed fields, so a run exercises
every path of the engine that replay must reproduce or check.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Flag, Kind, OrderType, Tif
from exsim.store import Session

SYMBOLS = ("AAA", "BBB", "CCC")


def rich_flow(n: int, seed: int, n_symbols: int = len(SYMBOLS), ts0: int = 1_000) -> np.ndarray:
    """A seeded ORDER_DTYPE flow of ``n`` messages; ts strictly increasing from ``ts0``."""
    rng = np.random.default_rng(seed)
    o = np.zeros(n, ORDER_DTYPE)
    o["ts"] = ts0 + np.cumsum(rng.integers(1, 1000, n))
    o["kind"] = rng.choice([Kind.NEW, Kind.CANCEL, Kind.MODIFY, 9], n, p=[0.62, 0.18, 0.19, 0.01])
    o["symbol"] = rng.choice(n_symbols + 1, n, p=[0.97 / n_symbols] * n_symbols + [0.03])
    o["side"] = rng.integers(0, 2, n)
    o["order_type"] = rng.choice([OrderType.LIMIT, OrderType.MARKET], n, p=[0.95, 0.05])
    o["tif"] = rng.choice([Tif.GTC, Tif.IOC, Tif.FOK], n, p=[0.85, 0.1, 0.05])
    o["flags"] = rng.choice([0, Flag.POST_ONLY], n, p=[0.93, 0.07])
    o["price"] = 100 + rng.integers(-12, 13, n)
    o["qty"] = rng.integers(0, 30, n)
    o["order_id"] = rng.integers(1, 300, n)
    o["trader"] = rng.integers(1, 6, n)
    return o


def make_engine(stp: str = "cancel_resting") -> Engine:
    eng = Engine(stp=stp)
    for name in SYMBOLS:
        eng.add_symbol(name, tick_size=1)
    return eng


def store_run(data_dir, orders: np.ndarray, *, seed: int = 0, stp: str = "cancel_resting",
              engine: Engine | None = None, capture: bool = False, close: bool = True,
              checkpoint_every: int = 700, seal_every: int = 500):
    """Journal ``orders`` in random-sized batches; return the captures at each batch end.

    A capture is (seq, ts, {symbol: (bids, asks, orders)}) of the live engine after the batch.
    """
    rng = np.random.default_rng(seed)
    s = Session.create(data_dir, engine or make_engine(stp), run_info={"scenario": "test"},
                       durability="none", checkpoint_every=checkpoint_every, seal_every=seal_every)
    captures, i = [], 0
    while i < orders.size:
        j = min(orders.size, i + int(rng.integers(1, 250)))
        s.process(orders[i:j])
        i = j
        if capture:
            books = {name: (*s.engine.depth(name, levels=1 << 30), s.engine.orders(name))
                     for name in SYMBOLS}
            captures.append((s.engine.seq, int(orders["ts"][j - 1]), books))
    if close:
        s.close()
    else:
        s.wal.close()   # a crash: the tail stays in the WAL, unsealed
    return captures


class TamperingEngine(Engine):
    """An Engine whose journaled outputs are altered by ``tamper(result, first_seq)``.

    Used to plant defects in a stored run through the ordinary Session path: the store holds
    the altered rows, while a fresh Engine (rerun) or an independent check (verify) sees the truth.
    """

    tamper = None

    def process(self, orders, *, out=None):
        first = self.seq + 1
        res = super().process(orders, out=out)
        if type(self).tamper is not None:
            # copies: the engine may hand out buffers it reuses or marks read-only
            res = type(self).tamper(type(res)(*(np.array(t, copy=True) for t in res)), first)
        return res
