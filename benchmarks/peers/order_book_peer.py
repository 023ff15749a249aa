"""PyPI ``order-book`` (a C extension: an L2 book of two sorted dicts, price -> size, used by
cryptofeed). It holds level totals only, so it runs L2 workloads: each row sets a level's total
(``book.bids[price] = qty``) or removes it (``del book.bids[price]`` when qty is 0). Checked on
the final top of book. Rows are turned into Python tuples before timing."""

from __future__ import annotations

import time

from exsim.exchange.schema import Side

from . import Outcome, Peer, Workload, top_tuple


class OrderBookL2(Peer):
    name = "order-book"
    kind = "l2"
    package = "order-book"

    def unavailable(self):
        try:
            import order_book  # noqa: F401
        except ImportError as e:
            return f"not installed ({e})"
        return None

    def prepare(self, wl: Workload):
        (rows,) = wl.segments
        return list(zip((rows["side"] == Side.BUY).tolist(), rows["price"].tolist(), rows["qty"].tolist()))

    def run(self, prepared) -> Outcome:
        from order_book import OrderBook

        book = OrderBook()
        bids, asks = book.bids, book.asks
        t0 = time.perf_counter()
        for buy, price, qty in prepared:
            side = bids if buy else asks
            if qty:
                side[price] = qty
            elif price in side:
                del side[price]
        dt = time.perf_counter() - t0
        b = bids.index(0) if len(bids) else (None, 0)
        a = asks.index(0) if len(asks) else (None, 0)
        return Outcome(dt, top=top_tuple(b[0], b[1], a[0], a[1]))
