"""The rules' answer for a call book: the uncross price, volume and surplus, and the fills.

Written from docs/semantics.md ("The uncross": its price, then its trades), sharing no code with
``exchange`` (only ``CALL_MARKET_PRICE``). ``replay.verification.auctions`` checks every
UNCROSS and INDICATIVE event and every auction fill against these answers.

- ``uncross``: a brute force over every candidate price (every limit price in the book), then
  the four steps (maximum volume, minimum surplus, the side of the surplus, nearest the
  reference), so it shares no shortcut with the engine's incremental one.
- ``allocate``: the two sides' priority queues (market orders first, then price, then time)
  paired in order until the volume is used; only the marginal order of a side fills in part.

Both are pure functions of plain tuples: they hold no state and need no book.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange.schema import CALL_MARKET_PRICE

__all__ = ["uncross", "allocate"]


def uncross(buys, sells, reference: int) -> tuple[int, int, int]:
    """The uncross the rules choose for a call book: (price, volume, surplus), all 0 when
    nothing would execute. ``buys``/``sells``: (price, open quantity) pairs, market orders at
    their call price (``CALL_MARKET_PRICE``); ``reference``: the reference price (the symbol's,
    else its last trade price, else 0). A brute force: B(p), S(p) at every candidate (every
    limit price in the book), then the four steps of docs/semantics.md "The uncross"."""
    bp = np.array([p for p, _ in buys], np.int64)
    bq = np.array([q for _, q in buys], np.int64)
    sp = np.array([p for p, _ in sells], np.int64)
    sq = np.array([q for _, q in sells], np.int64)
    ob, os_ = np.argsort(bp, kind="stable"), np.argsort(sp, kind="stable")
    bp, bq, sp, sq = bp[ob], bq[ob], sp[os_], sq[os_]
    b_from = np.concatenate([np.cumsum(bq[::-1])[::-1], [0]])   # B of the prices from index i
    s_upto = np.concatenate([[0], np.cumsum(sq)])                # S of the first i prices

    def bs(p):
        """B(p) and S(p) for every price of array ``p``."""
        return (b_from[np.searchsorted(bp, p, side="left")],
                s_upto[np.searchsorted(sp, p, side="right")])

    cands = np.unique(np.concatenate([bp[bp != CALL_MARKET_PRICE[0]],
                                      sp[sp != CALL_MARKET_PRICE[1]]]))
    if not cands.size:
        b, s = int(bq.sum()), int(sq.sum())
        if reference <= 0 or min(b, s) == 0:
            return 0, 0, 0
        return reference, min(b, s), b - s
    b, s = bs(cands)
    vol, sur = np.minimum(b, s), b - s
    vmax = int(vol.max())
    if vmax == 0:
        return 0, 0, 0
    keep = vol == vmax                                            # 1. maximum volume
    smin = np.abs(sur[keep]).min()
    keep &= np.abs(sur) == smin                                   # 2. minimum surplus
    ps, ss = cands[keep], sur[keep]
    if (ss > 0).all():                                            # 3. the side of the surplus
        price = int(ps.max())
    elif (ss < 0).all():
        price = int(ps.min())
    else:                                                         # 4. nearest the reference
        price = min(max(reference, int(ps.min())), int(ps.max()))
    b, s = bs(np.array([price], np.int64))
    b, s = int(b[0]), int(s[0])
    return price, min(b, s), b - s


def allocate(buys, sells, price: int, volume: int) -> list[tuple[int, int, int]]:
    """The auction fills the rules make: (buy id, sell id, qty) in order. ``buys``/``sells``:
    (price, priority, id, open quantity) of each side's orders (priority: lower is earlier);
    the orders that can execute at ``price`` take part best first (market orders at their call
    price lead), until ``volume`` lots of each side are used; the queues pair in order."""
    bq = [[i, q] for p, _, i, q in sorted(buys, key=lambda r: (-r[0], r[1])) if p >= price]
    sq = [[i, q] for p, _, i, q in sorted(sells, key=lambda r: (r[0], r[1])) if p <= price]
    out, left, a, b = [], volume, 0, 0
    while left > 0 and a < len(bq) and b < len(sq):
        q = min(bq[a][1], sq[b][1], left)
        out.append((bq[a][0], sq[b][0], q))
        left -= q
        bq[a][1] -= q
        sq[b][1] -= q
        a += bq[a][1] == 0
        b += sq[b][1] == 0
    return out
