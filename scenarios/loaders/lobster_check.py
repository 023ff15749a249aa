"""Check a LOBSTER load against its own book file by running it through the engine once.

``check_lobster(flow)`` processes the whole flow in one ``Engine.process`` call, rebuilds the
engine's top D levels after every LOBSTER message from the emitted L2 updates (a numba pass over
the L2 rows; no per-message Python), and compares with the book file:

- a row is *unpredictable* when it shows, on some side, a level beyond the deepest level the
  previous row showed (``lobster.unpredictable_rows``): those prices may hold orders no message
  revealed, so the messages alone cannot predict the row; it is counted, not compared.
- every other row (after row 0, the seed) is *predictable*: the engine's levels must equal the
  file's (price and size) for every level the file shows, and where the file shows an empty level
  the engine's must be empty too or lie beyond the previous row's deepest level.
- every type-4 execution must appear as exactly one engine fill at the IOC's seq, at the
  execution's price and size, against the expected resting order (the file's order id when the
  loader saw that order enter, else the synthetic order standing for unseen ones); no other seq
  may produce a fill.

Invariant: the engine's book is compared *after a message's own rows and before the corrections
the loader inserted after that row*, so corrections can never make a predictable row agree.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange.schema import Side

from exsim.scenarios.loaders.l2book import top_of_book
from exsim.scenarios.loaders.lobster import TICK_SIZE, LobsterFlow, unpredictable_rows

__all__ = ["check_lobster"]

_EMPTY_ASK = np.iinfo(np.int64).max


def check_lobster(flow: LobsterFlow, engine=None) -> dict:
    """Run ``flow.orders`` through a fresh engine (or ``engine``, with the symbol already added at
    id ``flow.orders['symbol'][0]`` and nothing processed yet) and compare with the book file.

    Returns a dict: ``equal``, ``unpredictable``, ``unequal`` (row counts; row 0 excluded),
    ``first_unequal`` (message index or -1), ``trades_expected``, ``trades_equal``,
    ``trades_with_file_id`` (fills whose resting id is the file's own order id), ``extra_fills``
    (fills at seqs with no execution), ``rejected`` (engine reject events).
    """
    from exsim.exchange import Engine, Event   # imported here: loading a file must not need the engine

    if engine is None:
        engine = Engine()
        engine.add_symbol("LOBSTER", tick_size=TICK_SIZE)
    res = engine.process(flow.orders)
    top = top_of_book(res.l2, flow.seq_after, flow.depth)
    book = flow.book
    unpred = unpredictable_rows(book).any(1)
    prev_deep_ask = np.r_[_EMPTY_ASK, book[:-1, -1, 0]]
    prev_deep_bid = np.r_[-1, book[:-1, -1, 2]]

    ok = np.ones(len(book), bool)
    for pc, qc, beyond in ((0, 1, top[:, :, 0] > prev_deep_ask[:, None]),
                           (2, 3, top[:, :, 2] < prev_deep_bid[:, None])):
        empty = (book[:, :, pc] == _EMPTY_ASK) | (book[:, :, pc] == -1)
        same = (top[:, :, pc] == book[:, :, pc]) & (top[:, :, qc] == book[:, :, qc])
        eng_empty = (top[:, :, pc] == _EMPTY_ASK) | (top[:, :, pc] == -1)
        ok &= np.where(empty, eng_empty | beyond, same).all(1)
    compared = ~unpred
    compared[0] = False
    unequal = compared & ~ok
    first = int(np.flatnonzero(unequal)[0]) if unequal.any() else -1

    fills, exp = res.fills, flow.expected_trades
    pos = np.searchsorted(fills["seq"], exp["seq"])
    pos_c = np.minimum(pos, max(len(fills) - 1, 0))
    one = np.zeros(len(exp), bool)
    if len(fills):
        nxt = np.searchsorted(fills["seq"], exp["seq"], side="right")
        f = fills[pos_c]
        resting = np.where(f["aggressor_side"] == Side.BUY, f["sell_order_id"], f["buy_order_id"])
        one = ((nxt - pos) == 1) & (resting == exp["resting_id"]) & (f["price"] == exp["price"]) \
            & (f["qty"] == exp["qty"])
    return {
        "rows": len(book) - 1,
        "equal": int((compared & ok).sum()),
        "unpredictable": int(unpred[1:].sum()),
        "unequal": int(unequal.sum()),
        "first_unequal": first,
        "trades_expected": len(exp),
        "trades_equal": int(one.sum()),
        "trades_with_file_id": int((one & (exp["resting_id"] < flow.synthetic_base)).sum()),
        "extra_fills": int(len(fills) - one.sum()),
        "rejected": int((res.events["event"] == Event.REJECTED).sum()),
    }
