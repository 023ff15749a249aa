"""Pure-Python reference model of the matching engine: obviously correct, deliberately slow.

It implements docs/semantics.md with plain dicts and lists so that a reader can check it against
the document line by line. The numba engine (`exchange/`) is a second, independent implementation;
the differential tests require both to emit byte-identical fills, L2 updates and events.

Invariants kept by the model (and checked by the property tests on the engine):
- a book side is ``{price: [order, ...]}`` with the oldest order first; no empty level is kept;
- ``live`` holds exactly the orders that rest in the levels, keyed by order id;
- the book is never crossed after a message;
- every output row carries the seq and ts of the message that caused it.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from exchange.schema import (
    DEPTH_DTYPE, EVENT_DTYPE, FILL_DTYPE, KNOWN_FLAGS, L2_DTYPE, L3_DTYPE, MAX_LEVEL_QTY, MAX_PRICE, MAX_QTY,
    Event, Flag, Kind, OrderType, Reason, Side, Stp, Tif,
)

ModelResult = namedtuple("ModelResult", "fills l2 events")

# The model writes output rows as tuples in dtype field order: fail loudly if the schema moves.
assert FILL_DTYPE.names == ("seq", "ts", "trade_id", "price", "qty", "buy_order_id",
                            "sell_order_id", "symbol", "buy_trader", "sell_trader", "aggressor_side")
assert L2_DTYPE.names == ("seq", "ts", "price", "qty", "symbol", "count", "side")
assert EVENT_DTYPE.names == ("seq", "ts", "order_id", "filled_qty", "leaves_qty", "symbol",
                             "event", "reason")
assert L3_DTYPE.names[:7] == ("order_id", "price", "qty", "filled", "trader", "side", "flags")


class _Order:
    """One order, incoming or resting. ``leaves`` is its open quantity, ``filled`` cumulative."""

    __slots__ = ("order_id", "side", "price", "leaves", "filled", "trader", "flags", "market", "tif")

    def __init__(self, order_id, side, price, leaves, trader, flags, market, tif):
        self.order_id, self.side, self.price, self.leaves = order_id, side, price, leaves
        self.filled, self.trader, self.flags, self.market, self.tif = 0, trader, flags, market, tif


class _Book:
    """One symbol: two sides of FIFO levels, the live orders by id, and the price band."""

    def __init__(self, min_price, max_price):
        self.min_price, self.max_price = min_price, max_price
        self.sides = ({}, {})  # Side.BUY, Side.SELL -> {price: [order, ...]}
        self.live = {}

    def prices(self, side):
        """Occupied prices of one side, best first."""
        return sorted(self.sides[side], reverse=(side == Side.BUY))

    def best(self, side):
        prices = self.sides[side]
        if not prices:
            return None
        return max(prices) if side == Side.BUY else min(prices)

    def totals(self, side, price):
        """(total open quantity, order count) at one level; (0, 0) if the level is empty."""
        queue = self.sides[side].get(price, [])
        return sum(o.leaves for o in queue), len(queue)

    def remove(self, o):
        """Take a live order out of its level (and the level out of the book if it empties)."""
        queue = self.sides[o.side][o.price]
        queue.remove(o)
        if not queue:
            del self.sides[o.side][o.price]
        del self.live[o.order_id]


def _crosses(side, limit, market, level_price):
    """Does an order of `side` with limit `limit` cross an opposite level at `level_price`?"""
    if market:
        return True
    return level_price <= limit if side == Side.BUY else level_price >= limit


class Model:
    """The reference engine: same constructor, `add_symbol`, `process`, `depth`, `orders` as Engine."""

    def __init__(self, stp="none"):
        """`stp`: "none" | "cancel_resting" | "cancel_incoming" | "cancel_both", or an Stp code."""
        self.stp = Stp[stp.upper()] if isinstance(stp, str) else Stp(stp)
        self.books, self.names = [], {}
        self.seq, self.trade_id = 0, 0

    def add_symbol(self, name, tick_size=1, min_price=1, max_price=MAX_PRICE):
        """Add a symbol with its price band; returns its id (0, 1, 2 ...)."""
        self.names[name] = len(self.books)
        self.books.append(_Book(min_price, max_price))
        return self.names[name]

    def _book(self, symbol):
        return self.books[self.names[symbol] if isinstance(symbol, str) else symbol]

    # ---- inspection ----------------------------------------------------------------------------

    def depth(self, symbol, levels=10):
        """(bids, asks): arrays of (price, qty, count) per level, best first."""
        book = self._book(symbol)
        out = []
        for side in (Side.BUY, Side.SELL):
            rows = [(p, *book.totals(side, p)) for p in book.prices(side)[:levels]]
            out.append(_array(rows, DEPTH_DTYPE))
        return out[0], out[1]

    def orders(self, symbol):
        """Live orders as an L3_DTYPE array: bids best first, then asks best first, FIFO in a level."""
        book = self._book(symbol)
        rows = [(o.order_id, o.price, o.leaves, o.filled, o.trader, o.side, o.flags,
                 0, 0, 0, 0, 0, 0)
                for side in (Side.BUY, Side.SELL) for p in book.prices(side)
                for o in book.sides[side][p]]
        return _array(rows, L3_DTYPE)

    # ---- processing ----------------------------------------------------------------------------

    def process(self, orders):
        """Process an ORDER_DTYPE array; returns ModelResult(fills, l2, events) as structured arrays."""
        self._fills, self._l2, self._events = [], [], []
        for row in np.asarray(orders).tolist():
            # tolist() gives plain ints in ORDER_DTYPE field order.
            ts, oid, price, qty, symbol, trader, kind, otype, tif, flags, side = row
            self.seq += 1
            self._ts, self._sym = ts, symbol
            self._message(oid, price, qty, symbol, trader, kind, otype, tif, flags, side)
        return ModelResult(_array(self._fills, FILL_DTYPE), _array(self._l2, L2_DTYPE),
                           _array(self._events, EVENT_DTYPE))

    def _event(self, order_id, event, reason=Reason.NONE, filled=0, leaves=0):
        self._events.append((self.seq, self._ts, order_id, filled, leaves, self._sym,
                             int(event), int(reason)))

    def _level_row(self, book, side, price):
        qty, count = book.totals(side, price)
        self._l2.append((self.seq, self._ts, price, qty, self._sym, count, int(side)))

    def _message(self, oid, price, qty, symbol, trader, kind, otype, tif, flags, side):
        if kind not in (Kind.NEW, Kind.CANCEL, Kind.MODIFY):
            return self._event(oid, Event.REJECTED, Reason.BAD_KIND)
        if symbol >= len(self.books):
            return self._event(oid, Event.REJECTED, Reason.UNKNOWN_SYMBOL)
        book = self.books[symbol]
        if kind == Kind.NEW:
            reason = self._check_new(book, oid, price, qty, trader, otype, tif, flags, side)
            if reason:
                return self._event(oid, Event.REJECTED, reason)
            o = _Order(oid, side, price, qty, trader, flags, otype == OrderType.MARKET, tif)
            self._event(oid, Event.ACCEPTED, leaves=qty)
            return self._execute(book, o)
        o = book.live.get(oid)
        if o is None:
            return self._event(oid, Event.REJECTED, Reason.UNKNOWN_ID)
        if kind == Kind.CANCEL:
            book.remove(o)
            self._event(oid, Event.CANCELLED, Reason.USER_CANCEL, o.filled, 0)
            return self._level_row(book, o.side, o.price)
        reason = self._check_modify(book, o, price, qty)
        if reason:
            return self._event(oid, Event.REJECTED, reason)
        self._modify(book, o, price, qty)

    def _check_new(self, book, oid, price, qty, trader, otype, tif, flags, side):
        """Validation steps 3-13 of a NEW, in order; returns the first failing Reason or 0."""
        limit = otype == OrderType.LIMIT
        post_only = bool(flags & Flag.POST_ONLY)
        if side not in (Side.BUY, Side.SELL):
            return Reason.BAD_SIDE
        if otype not in (OrderType.LIMIT, OrderType.MARKET):
            return Reason.BAD_ORDER_TYPE
        if tif not in (Tif.GTC, Tif.IOC, Tif.FOK):
            return Reason.BAD_TIF
        if flags & ~KNOWN_FLAGS or (post_only and not (limit and tif == Tif.GTC)):
            return Reason.BAD_FLAGS
        if qty <= 0:
            return Reason.BAD_QTY
        if qty > MAX_QTY:
            return Reason.OVERFLOW
        if limit and price <= 0:
            return Reason.BAD_PRICE
        if limit and not book.min_price <= price <= book.max_price:
            return Reason.PRICE_OUT_OF_BAND
        if oid in book.live:
            return Reason.DUPLICATE_ID
        best = book.best(1 - side)
        if post_only and best is not None and _crosses(side, price, False, best):
            return Reason.POST_ONLY_WOULD_CROSS
        if tif == Tif.FOK and not self._fok_fillable(book, side, price, not limit, qty, trader):
            return Reason.FOK_CANNOT_FILL
        return 0

    def _fok_fillable(self, book, side, price, market, qty, trader):
        """Walk the opposite side in priority order as matching would; can it fill `qty` now?"""
        opp = 1 - side
        for p in book.prices(opp):
            if not _crosses(side, price, market, p):
                return False
            for r in book.sides[opp][p]:
                if self.stp != Stp.NONE and r.trader == trader:
                    if self.stp == Stp.CANCEL_RESTING:
                        continue  # matching would cancel it and go on
                    return False  # matching would stop here
                qty -= r.leaves
                if qty <= 0:
                    return True
        return False

    def _check_modify(self, book, o, price, qty):
        """MODIFY validation steps 4-9 (step 3, UNKNOWN_ID, is done by the caller)."""
        if qty <= 0:
            return Reason.BAD_QTY
        if qty > MAX_QTY:
            return Reason.OVERFLOW
        if price <= 0:
            return Reason.BAD_PRICE
        if not book.min_price <= price <= book.max_price:
            return Reason.PRICE_OUT_OF_BAND
        if price == o.price:
            if book.totals(o.side, price)[0] - o.leaves + qty > MAX_LEVEL_QTY:
                return Reason.OVERFLOW
        else:
            best = book.best(1 - o.side)
            if o.flags & Flag.POST_ONLY and best is not None and _crosses(o.side, price, False, best):
                return Reason.POST_ONLY_WOULD_CROSS
        return 0

    def _modify(self, book, o, price, qty):
        queue = book.sides[o.side][o.price]
        if price == o.price:
            if qty > o.leaves:  # a higher quantity loses priority: back of the level
                queue.remove(o)
                queue.append(o)
            changed = qty != o.leaves
            o.leaves = qty
            self._event(o.order_id, Event.MODIFIED, filled=o.filled, leaves=qty)
            if changed:
                self._level_row(book, o.side, price)
            return
        # New price: leave the old level, then behave as an incoming GTC limit (no second ACCEPTED).
        old_price = o.price
        book.remove(o)
        o.leaves, o.price, o.market, o.tif = qty, price, False, Tif.GTC
        self._event(o.order_id, Event.MODIFIED, filled=o.filled, leaves=qty)
        self._level_row(book, o.side, old_price)
        self._execute(book, o)

    def _execute(self, book, o):
        """Match an accepted incoming order (semantics.md NEW steps 2-4), then dispose of the rest."""
        stopped = self._match(book, o)
        if o.leaves == 0:
            return
        if stopped:
            reason = Reason.SELF_TRADE
        elif o.market:
            reason = Reason.NO_LIQUIDITY
        elif o.tif in (Tif.IOC, Tif.FOK):
            reason = Reason.IOC_UNFILLED
        elif book.totals(o.side, o.price)[0] + o.leaves > MAX_LEVEL_QTY:
            reason = Reason.OVERFLOW
        else:
            book.sides[o.side].setdefault(o.price, []).append(o)
            book.live[o.order_id] = o
            return self._level_row(book, o.side, o.price)
        self._event(o.order_id, Event.CANCELLED, reason, o.filled, 0)

    def _match(self, book, o):
        """Match `o` against the opposite side; returns True if self-trade prevention stopped it."""
        opp = 1 - o.side
        while o.leaves > 0:
            p = book.best(opp)
            if p is None or not _crosses(o.side, o.price, o.market, p):
                return False
            queue, changed, stopped = book.sides[opp][p], False, False
            while queue and o.leaves > 0 and not stopped:
                r = queue[0]
                if self.stp != Stp.NONE and r.trader == o.trader:
                    if self.stp in (Stp.CANCEL_RESTING, Stp.CANCEL_BOTH):
                        queue.pop(0)
                        del book.live[r.order_id]
                        self._event(r.order_id, Event.CANCELLED, Reason.SELF_TRADE, r.filled, 0)
                        changed = True
                    stopped = self.stp in (Stp.CANCEL_INCOMING, Stp.CANCEL_BOTH)
                    continue
                self._fill(o, r, p)
                if r.leaves == 0:
                    queue.pop(0)
                    del book.live[r.order_id]
                changed = True
            if changed:  # one L2 row per level changed, written as matching leaves it
                self._level_row(book, opp, p)
            if not queue:
                del book.sides[opp][p]
            if stopped:
                return True
        return False

    def _fill(self, o, r, price):
        """One fill between incoming `o` and resting `r` at the resting price, then both events."""
        q = min(o.leaves, r.leaves)
        o.leaves -= q
        o.filled += q
        r.leaves -= q
        r.filled += q
        self.trade_id += 1
        buy, sell = (o, r) if o.side == Side.BUY else (r, o)
        self._fills.append((self.seq, self._ts, self.trade_id, price, q, buy.order_id,
                            sell.order_id, self._sym, buy.trader, sell.trader, int(o.side)))
        for x in (o, r):
            ev = Event.FILLED if x.leaves == 0 else Event.PARTIAL
            self._event(x.order_id, ev, filled=x.filled, leaves=x.leaves)


def _array(rows, dtype):
    """Rows (tuples in field order) as a structured array whose padding bytes are zero."""
    out = np.zeros(len(rows), dtype=dtype)
    if rows:
        out[:] = rows
    return out
