"""PyPI ``limit-order-book`` (C++ book behind ctypes): limit orders, market orders and cancel by id.

What it cannot express: IOC/FOK/post-only, modify, self-trade prevention. What its API does not
report: fills (no fill callback or trade list), so the agreement check uses what it does expose:
traded volume (derived exactly from its book totals: every fill removes its quantity twice, once
from the resting order and once from the incoming one, so traded = (added - cancelled - resting
at the end) / 2, with the cancelled volume read around each cancel in an untimed pass), the
number of resting orders and the final top of book. Its ``cancel`` of an unknown id throws a C++
exception that aborts the process, so the adapter asks ``has(id)`` first, as a user must.
"""

from __future__ import annotations

import time

import numpy as np

from exsim.exchange.schema import Kind, OrderType, Side, Tif

from . import Outcome, Peer, Workload, top_tuple


class LimitOrderBook(Peer):
    name = "limit-order-book"
    kind = "match"
    package = "limit_order_book"

    def unavailable(self):
        try:
            import limit_order_book  # noqa: F401
        except ImportError as e:
            return f"not installed ({e})"
        return None

    def cannot(self, wl: Workload):
        if wl.kind != "match":
            return "match only"
        for s in wl.segments:
            if (s["kind"] == Kind.MODIFY).any():
                return "no modify"
            new = s["kind"] == Kind.NEW
            if (s["tif"][new] != Tif.GTC).any() or (s["flags"][new] != 0).any():
                return "no IOC/FOK/post-only"
            if (s["order_type"][new] != OrderType.LIMIT).any():
                return "market orders not mapped"
            if (s["qty"] >= 2**32).any():
                return "quantity above uint32"
        return None

    def prepare(self, wl: Workload):
        return [list(zip((s["kind"] == Kind.NEW).tolist(), (s["side"] == Side.BUY).tolist(),
                         s["order_id"].tolist(), s["qty"].tolist(), s["price"].tolist()))
                for s in wl.segments]

    def _replay(self, prepared, measure_cancels: bool) -> Outcome:
        from limit_order_book import LimitOrderBook as Book

        dt = 0.0
        live = cancelled = added = 0
        book = None
        for rows in prepared:
            book = Book()
            limit, cancel, has, volume = book.limit, book.cancel, book.has, book.volume
            t0 = time.perf_counter()
            if not measure_cancels:
                for new, buy, oid, qty, price in rows:
                    if new:
                        limit(buy, oid, qty, price)
                    elif has(oid):
                        cancel(oid)
            else:
                for new, buy, oid, qty, price in rows:
                    if new:
                        added += qty
                        limit(buy, oid, qty, price)
                    elif has(oid):
                        v = volume()
                        cancel(oid)
                        cancelled += v - volume()
                cancelled += volume()   # resting at the end leaves the same way
            dt += time.perf_counter() - t0
            live += book.count()
        bid, ask = book.best_buy(), book.best_sell()
        top = top_tuple(bid or None, book.volume_buy(bid) if bid else 0,
                        ask or None, book.volume_sell(ask) if ask else 0)
        out = Outcome(dt, live=live, top=top)
        if measure_cancels:
            out.volume = (added - cancelled) // 2
        return out

    def run(self, prepared) -> Outcome:
        return self._replay(prepared, measure_cancels=False)

    def check(self, prepared) -> Outcome:
        return self._replay(prepared, measure_cancels=True)
