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
from numba import njit

from exchange.schema import Side

from .lobster import LobsterFlow, unpredictable_rows

__all__ = ["check_lobster", "engine_top_of_book"]

_EMPTY_ASK = np.iinfo(np.int64).max


@njit(cache=True)
def _top_kernel(l2_seq, l2_side, l2_px, l2_qty, seq_after, depth, pmin, pmax):
    n = seq_after.shape[0]
    width = pmax - pmin + 1
    qty = np.zeros((2, width), np.int64)
    out = np.zeros((n, depth, 4), np.int64)
    best_bid = -1          # index into qty[0]
    best_ask = width       # index into qty[1]
    j = 0
    m = l2_seq.shape[0]
    for i in range(n):
        while j < m and l2_seq[j] <= seq_after[i]:
            s = l2_side[j]
            k = l2_px[j] - pmin
            qty[s, k] = l2_qty[j]
            if s == 0:
                if l2_qty[j] > 0 and k > best_bid:
                    best_bid = k
                elif l2_qty[j] == 0 and k == best_bid:
                    while best_bid >= 0 and qty[0, best_bid] == 0:
                        best_bid -= 1
            else:
                if l2_qty[j] > 0 and k < best_ask:
                    best_ask = k
                elif l2_qty[j] == 0 and k == best_ask:
                    while best_ask < width and qty[1, best_ask] == 0:
                        best_ask += 1
            j += 1
        a = best_ask
        b = best_bid
        for d in range(depth):
            while a < width and qty[1, a] == 0:
                a += 1
            if a < width:
                out[i, d, 0] = a + pmin
                out[i, d, 1] = qty[1, a]
                a += 1
            else:
                out[i, d, 0] = _EMPTY_ASK
            while b >= 0 and qty[0, b] == 0:
                b -= 1
            if b >= 0:
                out[i, d, 2] = b + pmin
                out[i, d, 3] = qty[0, b]
                b -= 1
            else:
                out[i, d, 2] = -1
    return out


def engine_top_of_book(l2: np.ndarray, seq_after: np.ndarray, depth: int) -> np.ndarray:
    """Return the engine's top ``depth`` levels after each seq in ``seq_after`` (one symbol's L2 rows,
    in emission order) as an int64 array (len(seq_after), depth, 4): ask price, ask qty, bid price,
    bid qty; an empty ask level has price int64 max, an empty bid level -1, both qty 0."""
    if len(l2) == 0:
        pmin = pmax = 0
    else:
        pmin, pmax = int(l2["price"].min()), int(l2["price"].max())
    return _top_kernel(l2["seq"].astype(np.int64), l2["side"].astype(np.int64), l2["price"].astype(np.int64),
                       l2["qty"].astype(np.int64), seq_after.astype(np.int64), depth, pmin, pmax)


def check_lobster(flow: LobsterFlow, engine=None) -> dict:
    """Run ``flow.orders`` through a fresh engine (or ``engine``, with the symbol already added at
    id ``flow.orders['symbol'][0]`` and nothing processed yet) and compare with the book file.

    Returns a dict: ``equal``, ``unpredictable``, ``unequal`` (row counts; row 0 excluded),
    ``first_unequal`` (message index or -1), ``trades_expected``, ``trades_equal``,
    ``trades_with_file_id`` (fills whose resting id is the file's own order id), ``extra_fills``
    (fills at seqs with no execution), ``rejected`` (engine reject events).
    """
    from exchange import Engine, Event   # imported here: loading a file must not need the engine

    if engine is None:
        engine = Engine()
        engine.add_symbol("LOBSTER", tick_size=0.01)
    res = engine.process(flow.orders)
    top = engine_top_of_book(res.l2, flow.seq_after, flow.depth)
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
