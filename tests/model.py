"""Pure-Python reference model of the matching engine: obviously correct, deliberately slow.

It implements docs/semantics.md with plain dicts and lists so that a reader can check it against
the document line by line (the section a method follows is named in its docstring). The numba
engine (`exchange/`) is a second, independent implementation; the differential tests require both
to emit byte-identical fills, L2 updates and events and to hold the same books.

Invariants kept by the model (and checked by the property tests on the engine):
- a book side is ``{price: [order, ...]}`` with the oldest order first; no empty level is kept;
- ``live`` holds exactly the orders that rest in the levels, ``pending`` exactly the stops that
  wait in the stop book, both keyed by order id; an id is never in both;
- a resting order shows ``0 < shown <= leaves`` (``shown <= display`` for an iceberg); its
  reserve is ``leaves - shown``; L2 and ``depth`` count ``shown`` only;
- outside a call the book is never crossed after a message; in a call (and in a halt that
  suspended one) it may be, and nothing matches until the uncross;
- a MARKET order rests only in a call or a halt, at ``CALL_MARKET_PRICE[side]``; an uncross
  cancels every one still resting;
- a pending stop is released only in CONTINUOUS, and after every message no pending stop of a
  CONTINUOUS symbol is triggered (entering CONTINUOUS checks them, traded or not);
- every output row carries the seq and ts of the message that caused it, and every event the
  symbol's phase after it (an UNCROSS: its auction).

Trading phases (semantics.md, "Trading phases, auctions and price bands") are kept per book as
plain attributes: ``phase``, ``auction`` (the pending auction, 0: none), ``ref`` (the reference
price), ``auction_end`` (the re-opening end, 0: none), ``ind`` (the last published indicative)
and ``band`` (the dynamic band centre for the matching under way, None: no band). The uncross
price is found by brute force over every candidate price, summing the orders for each.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from exsim.exchange.schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, CALL_PHASES, DEPTH_DTYPE, EVENT_DTYPE, FILL_DTYPE,
    KNOWN_FLAGS, L2_DTYPE, L3_DTYPE, MAX_LEVEL_QTY, MAX_PRICE, MAX_QTY, ORDER_DTYPE, Event, Flag,
    Kind, OrderType, Phase, Reason, Side, Stp, Tif,
)

ModelResult = namedtuple("ModelResult", "fills l2 events")

DAY_NS = 86_400 * 10**9

# The model reads messages and writes output rows as tuples in dtype field order: fail loudly if
# the schema moves.
assert ORDER_DTYPE.names == ("ts", "order_id", "price", "qty", "symbol", "trader", "kind",
                             "order_type", "tif", "flags", "side", "stop_price", "display_qty",
                             "min_qty", "expire_ts", "phase")
assert FILL_DTYPE.names == ("seq", "ts", "trade_id", "price", "qty", "buy_order_id",
                            "sell_order_id", "symbol", "buy_trader", "sell_trader", "aggressor_side")
assert L2_DTYPE.names == ("seq", "ts", "price", "qty", "symbol", "count", "side")
assert EVENT_DTYPE.names == ("seq", "ts", "order_id", "filled_qty", "leaves_qty", "symbol",
                             "event", "reason", "price", "phase")
assert L3_DTYPE.names == ("order_id", "price", "qty", "filled", "trader", "side", "flags",
                          "hidden", "stop_price", "display_qty", "expire_ts", "order_type", "tif")

_RESTING_TIFS = (Tif.GTC, Tif.DAY, Tif.GTD)
_STOPS = (OrderType.STOP, OrderType.STOP_LIMIT)
_PRICED = (OrderType.LIMIT, OrderType.STOP_LIMIT)
_I64_MAX = (1 << 63) - 1
# the auction a call's uncross is (semantics.md, PHASE messages, step 3)
_CALL_AUCTION = {Phase.PRE_OPEN: Phase.OPENING_AUCTION, Phase.PRE_CLOSE: Phase.CLOSING_AUCTION,
                 Phase.REOPENING_AUCTION: Phase.REOPENING_AUCTION}


class _Order:
    """One order: incoming, resting or a pending stop.

    ``leaves`` is its whole open quantity, ``shown`` the displayed part of a resting order (the
    rest is reserve), ``filled`` cumulative. ``expire`` is its expiry instant (0: never).
    ``otype`` is what it is now: a released stop becomes a MARKET or a LIMIT. ``key`` orders
    pending stops of one stop price (FIFO).
    """

    __slots__ = ("order_id", "side", "price", "leaves", "shown", "filled", "trader", "flags",
                 "otype", "tif", "stop_price", "display", "min_qty", "expire", "key")

    def __init__(self, order_id, side, price, leaves, trader, flags, otype, tif, stop_price,
                 display, min_qty, expire):
        self.order_id, self.side, self.price, self.leaves = order_id, side, price, leaves
        self.shown, self.filled, self.trader, self.flags = 0, 0, trader, flags
        self.otype, self.tif, self.stop_price, self.display = otype, tif, stop_price, display
        self.min_qty, self.expire, self.key = min_qty, expire, 0

    @property
    def market(self):
        return self.otype == OrderType.MARKET

    def slice(self):
        """The displayed part a fresh slice (entry, refill, or a loss of place) shows."""
        return min(self.display, self.leaves) if self.display else self.leaves


class _Book:
    """One symbol: its options, two sides of FIFO levels, the live orders and the stop book."""

    def __init__(self, sid, min_price, max_price, tick_table, lot_size, min_order_qty,
                 session_close, reference_price=0, static_band_bps=0, dynamic_band_bps=0,
                 interruption_ns=120_000_000_000, phase=Phase.CONTINUOUS):
        self.sid = sid
        self.ref, self.static_bps, self.dynamic_bps = reference_price, static_band_bps, dynamic_band_bps
        self.interruption_ns = interruption_ns
        self.phase = phase
        self.auction = _CALL_AUCTION.get(phase, 0)  # pending auction (0: none)
        self.auction_end = 0   # when a re-opening auction uncrosses (0: at a later PHASE)
        self.ind = (0, 0, 0)   # last published indicative (price, volume, surplus); none = 0s
        self.band = None       # dynamic band centre of the matching under way (None: no band)
        self.traded = 0        # seq of the last message that traded on the symbol
        self.min_price, self.max_price = min_price, max_price
        self.tick_table = [(int(f), int(t)) for f, t in tick_table]
        self.lot_size, self.min_order_qty, self.session_close = lot_size, min_order_qty, session_close
        self.sides = ({}, {})  # Side.BUY, Side.SELL -> {price: [order, ...]}
        self.live = {}         # resting orders by id
        self.pending = {}      # pending stops by id
        self.last = 0          # last trade price; 0: the symbol has not traded

    # ---- the price grid and lots (semantics.md, Symbols) ----

    def tick(self, price):
        """The tick of the last tick-table row whose from_price <= price."""
        tick = self.tick_table[0][1]
        for from_price, t in self.tick_table:
            if from_price <= price:
                tick = t
        return tick

    def on_grid(self, price):
        """A positive price inside the band and on the tick table."""
        return 0 < price and self.min_price <= price <= self.max_price and price % self.tick(price) == 0

    def off_lot(self, qty):
        return qty % self.lot_size != 0

    # ---- phases and bands (semantics.md, Trading phases) ----

    @property
    def in_call(self):
        return self.phase in CALL_PHASES

    def outside_static(self, price):
        """Is a limit price outside the static band (only with a band and a reference price)?"""
        return bool(self.static_bps and self.ref) and _outside(price, self.ref, self.static_bps)

    def set_band(self):
        """Centre the dynamic band of the matching about to start on the last trade price (no
        band outside CONTINUOUS, without a dynamic band or before the first trade)."""
        self.band = self.last if (self.phase == Phase.CONTINUOUS and self.dynamic_bps
                                  and self.last) else None

    def outside_dynamic(self, price):
        """Would a fill at `price` print outside the dynamic band of the matching under way?"""
        return self.band is not None and _outside(price, self.band, self.dynamic_bps)

    def reference(self):
        """The uncross tie-break reference: the reference price, else the last trade, else 0."""
        return self.ref or self.last or 0

    def resting(self, side):
        """Resting orders of one side in priority order (best price first, FIFO)."""
        return [o for p in self.prices(side) for o in self.sides[side][p]]

    # ---- levels ----

    def prices(self, side):
        """Occupied prices of one side, best first."""
        return sorted(self.sides[side], reverse=(side == Side.BUY))

    def best(self, side):
        prices = self.sides[side]
        if not prices:
            return None
        return max(prices) if side == Side.BUY else min(prices)

    def shown_totals(self, side, price):
        """(displayed quantity, order count) at one level; (0, 0) if the level is empty."""
        queue = self.sides[side].get(price, [])
        return sum(o.shown for o in queue), len(queue)

    def open_total(self, side, price):
        """Displayed plus reserve quantity at one level (what MAX_LEVEL_QTY bounds)."""
        return sum(o.leaves for o in self.sides[side].get(price, []))

    def remove(self, o):
        """Take a live order out of its level (and the level out of the book if it empties)."""
        queue = self.sides[o.side][o.price]
        queue.remove(o)
        if not queue:
            del self.sides[o.side][o.price]
        del self.live[o.order_id]

    def rest(self, o):
        """Put an order at the back of its level showing a fresh slice."""
        o.shown = o.slice()
        self.sides[o.side].setdefault(o.price, []).append(o)
        self.live[o.order_id] = o

    # ---- the stop book (semantics.md, Stops) ----

    def stop_order(self):
        """Pending stops in release priority: BUY by rising stop price, then SELL by falling, FIFO."""
        buys = sorted((s for s in self.pending.values() if s.side == Side.BUY),
                      key=lambda s: (s.stop_price, s.key))
        sells = sorted((s for s in self.pending.values() if s.side == Side.SELL),
                       key=lambda s: (-s.stop_price, s.key))
        return buys + sells

    def reached(self, side, stop_price):
        """Has the last trade price reached a stop of `side` at `stop_price`?"""
        if not self.last:
            return False
        return self.last >= stop_price if side == Side.BUY else self.last <= stop_price

    def triggered(self):
        """The next stop to release, or None: the lowest triggered BUY stop (FIFO among equal),
        else the highest triggered SELL stop (FIFO among equal)."""
        for s in self.stop_order():
            if self.reached(s.side, s.stop_price):
                return s
        return None


def _outside(price, centre, bps):
    """Is `price` outside the band of `bps` around `centre` ([x - w, x + w], w = x * bps // 10^4)?"""
    w = centre * bps // 10_000
    return price < centre - w or price > centre + w


def _crosses(side, limit, market, level_price):
    """Does an order of `side` with limit `limit` cross an opposite level at `level_price`?"""
    if market:
        return True
    return level_price <= limit if side == Side.BUY else level_price >= limit


def day_expiry(ts, session_close):
    """The first instant t > ts with t = session_close (mod one day): when a DAY order expires."""
    r = (session_close - ts) % DAY_NS
    # a close past the int64 clock is its largest value (docs/semantics.md, Symbols)
    return min(ts + (r if r else DAY_NS), (1 << 63) - 1)


class Model:
    """The reference engine: same constructor options, `add_symbol`, `process`, `depth`,
    `orders` and `stops` as Engine."""

    def __init__(self, stp="none", *, ownership=True):
        """`stp`: "none" | "cancel_resting" | "cancel_incoming" | "cancel_both", or an Stp code.
        `ownership`: refuse CANCEL/MODIFY by a trader other than the order's (NOT_OWNER)."""
        self.stp = Stp[stp.upper()] if isinstance(stp, str) else Stp(stp)
        self.ownership = bool(ownership)
        self.books, self.names, self.options = [], {}, []
        self.seq, self.trade_id = 0, 0
        self._stop_clock = 0  # FIFO key of pending stops, engine-wide

    def add_symbol(self, name, tick_size=1, min_price=1, max_price=MAX_PRICE, *, tick_table=None,
                   lot_size=1, min_order_qty=1, session_close=0, currency="", tick_value=None,
                   maker_bps=0.0, taker_bps=0.0, reference_price=0, static_band_bps=0,
                   dynamic_band_bps=0, interruption_ns=120_000_000_000, phase="continuous"):
        """Add a symbol with its price band, grid, lots, session close, bands and starting phase
        (a Phase, its name or code; not OPENING_AUCTION or CLOSING_AUCTION, which never rest);
        returns its id. Raises AssertionError, KeyError or ValueError on an invalid option.

        The money options are kept in ``options`` and never used (as in the engine)."""
        table = [(1, 1)] if tick_table is None else list(tick_table)
        assert table and table[0][0] == 1 and all(t >= 1 for _, t in table)
        assert lot_size >= 1 and min_order_qty >= 1 and 0 <= session_close < DAY_NS
        assert reference_price >= 0 and static_band_bps >= 0 and dynamic_band_bps >= 0
        assert interruption_ns >= 0
        start = _phase_arg(phase)
        assert start not in (Phase.OPENING_AUCTION, Phase.CLOSING_AUCTION), "not a resting phase"
        sid = len(self.books)
        self.names[name] = sid
        self.books.append(_Book(sid, min_price, max_price, table, lot_size, min_order_qty,
                                session_close, reference_price, static_band_bps,
                                dynamic_band_bps, interruption_ns, start))
        self.options.append(dict(tick_size=tick_size, currency=currency, tick_value=tick_value,
                                 maker_bps=maker_bps, taker_bps=taker_bps))
        return sid

    def _book(self, symbol):
        return self.books[self.names[symbol] if isinstance(symbol, str) else symbol]

    # ---- inspection ----------------------------------------------------------------------------

    def depth(self, symbol, levels=10):
        """(bids, asks): arrays of (price, displayed qty, count) per level, best first."""
        book = self._book(symbol)
        out = []
        for side in (Side.BUY, Side.SELL):
            rows = [(p, *book.shown_totals(side, p)) for p in book.prices(side)[:levels]]
            out.append(_array(rows, DEPTH_DTYPE))
        return out[0], out[1]

    def orders(self, symbol):
        """Resting orders as an L3_DTYPE array: bids best first, then asks best first, FIFO in a
        level; qty is the displayed part, hidden the reserve."""
        book = self._book(symbol)
        return _array([_l3(o) for side in (Side.BUY, Side.SELL) for p in book.prices(side)
                       for o in book.sides[side][p]], L3_DTYPE)

    def phase(self, symbol):
        """The symbol's Phase."""
        return Phase(self._book(symbol).phase)

    def indicative(self, symbol):
        """(price, qty, surplus) of the last INDICATIVE published; (0, 0, 0) outside a call."""
        book = self._book(symbol)
        return book.ind if book.in_call else (0, 0, 0)

    def set_phase(self, symbol, phase, *, ts=None, reference_price=0, end_ts=0):
        """Process one PHASE message (`phase` a Phase, its name or code; `end_ts` the re-opening
        end); returns its ModelResult."""
        m = np.zeros(1, ORDER_DTYPE)
        m["kind"], m["symbol"], m["ts"] = Kind.PHASE, self._book(symbol).sid, ts or 0
        m["phase"], m["price"], m["expire_ts"] = _phase_arg(phase), reference_price, end_ts
        return self.process(m)

    def stops(self, symbol):
        """Pending stops as an L3_DTYPE array in release priority (BUY stops by rising
        stop_price, then SELL stops by falling stop_price, FIFO among equal prices)."""
        return _array([_l3(s) for s in self._book(symbol).stop_order()], L3_DTYPE)

    # ---- processing ----------------------------------------------------------------------------

    def process(self, orders):
        """Process an ORDER_DTYPE array; returns ModelResult(fills, l2, events) as structured arrays."""
        self._fills, self._l2, self._events = [], [], []
        for row in np.asarray(orders).tolist():
            # tolist() gives plain ints in ORDER_DTYPE field order.
            self.seq += 1
            self._ts = row[0]
            self._expire(row[0])
            self._reopen_due(row[0])
            self._sym = row[4]
            self._message(*row)
            if self._sym < len(self.books) and self.books[self._sym].in_call:
                self._publish(self.books[self._sym])  # the indicative after every message on it
        return ModelResult(_array(self._fills, FILL_DTYPE), _array(self._l2, L2_DTYPE),
                           _array(self._events, EVENT_DTYPE))

    def _event(self, order_id, event, reason=Reason.NONE, filled=0, leaves=0, price=0, phase=None):
        """Append an event row; its phase is the symbol's phase now (after the event) unless given."""
        if phase is None:
            phase = self.books[self._sym].phase if self._sym < len(self.books) else 0
        self._events.append((self.seq, self._ts, order_id, filled, leaves, self._sym,
                             int(event), int(reason), price, int(phase)))

    def _level_row(self, book, side, price):
        qty, count = book.shown_totals(side, price)
        self._l2.append((self.seq, self._ts, price, qty, self._sym, count, int(side)))

    def _expire(self, ts):
        """Time in force by the clock: before the message, every live order (resting or pending)
        whose expiry is at or before `ts` leaves, in (expiry, symbol, order_id) order."""
        due = sorted((o.expire, book.sid, o.order_id, o, book)
                     for book in self.books
                     for o in (*book.live.values(), *book.pending.values())
                     if o.expire and o.expire <= ts)
        for _, sid, oid, o, book in due:
            self._sym = sid
            self._event(oid, Event.CANCELLED, Reason.EXPIRED, o.filled, 0)
            if oid in book.pending:
                del book.pending[oid]
            else:
                book.remove(o)
                self._level_row(book, o.side, o.price)
            if book.in_call:
                self._publish(book)  # the indicative after each expiry of a call symbol's order

    def _reopen_due(self, ts):
        """Re-opening auction end: every symbol in REOPENING_AUCTION whose end is at or before
        `ts` uncrosses, in (end, symbol) order, enters CONTINUOUS (reason AUCTION_END), then its
        stops are checked."""
        due = sorted((b.auction_end, b.sid) for b in self.books
                     if b.phase == Phase.REOPENING_AUCTION and 0 < b.auction_end <= ts)
        for _, sid in due:
            self._sym, book = sid, self.books[sid]
            self._uncross(book, Phase.REOPENING_AUCTION)
            book.phase = Phase.CONTINUOUS
            self._event(0, Event.PHASE, Reason.AUCTION_END, price=book.ref)
            book.set_band()   # stops released now match within the band around the uncross price
            self._continuous_stops(book)

    def _message(self, ts, oid, price, qty, symbol, trader, kind, otype, tif, flags, side,
                 stop_price, display, min_qty, expire_ts, phase=0):
        if kind not in (Kind.NEW, Kind.CANCEL, Kind.MODIFY, Kind.PHASE):
            return self._event(oid, Event.REJECTED, Reason.BAD_KIND)
        if symbol >= len(self.books):
            return self._event(oid, Event.REJECTED, Reason.UNKNOWN_SYMBOL)
        book = self.books[symbol]
        if kind == Kind.PHASE:
            return self._phase_message(book, ts, oid, price, expire_ts, phase)
        if kind != Kind.CANCEL and book.phase in (Phase.CLOSED, Phase.HALTED):       # 2a
            return self._event(oid, Event.REJECTED, Reason.SYMBOL_CLOSED
                               if book.phase == Phase.CLOSED else Reason.SYMBOL_HALTED)
        book.set_band()   # around the last trade price at the start of the message
        if kind == Kind.NEW:
            reason = self._check_new(book, ts, oid, price, qty, trader, otype, tif, flags, side,
                                     stop_price, display, min_qty, expire_ts)
            if reason:
                return self._event(oid, Event.REJECTED, reason)
            expire = expire_ts if tif == Tif.GTD else \
                day_expiry(ts, book.session_close) if tif == Tif.DAY else 0
            o = _Order(oid, side, price if otype in _PRICED else 0, qty, trader, flags, otype,
                       tif, stop_price if otype in _STOPS else 0, display, min_qty, expire)
            self._event(oid, Event.ACCEPTED, leaves=qty)
            if otype in _STOPS:
                return self._queue_stop(book, o)
            self._execute(book, o)
            return self._release_stops(book)
        o = book.live.get(oid) or book.pending.get(oid)
        if o is None:
            return self._event(oid, Event.REJECTED, Reason.UNKNOWN_ID)
        if self.ownership and trader != o.trader:
            return self._event(oid, Event.REJECTED, Reason.NOT_OWNER)
        if kind == Kind.CANCEL:
            self._event(oid, Event.CANCELLED, Reason.USER_CANCEL, o.filled, 0)
            if oid in book.pending:
                del book.pending[oid]
                return
            book.remove(o)
            return self._level_row(book, o.side, o.price)
        reason = self._check_modify(book, o, price, qty, stop_price)
        if reason:
            return self._event(oid, Event.REJECTED, reason)
        if oid in book.pending:
            return self._modify_stop(book, o, price, qty, stop_price)
        self._modify(book, o, price, qty)
        self._release_stops(book)

    # ---- validation (semantics.md, Validation) --------------------------------------------------

    def _check_new(self, book, ts, oid, price, qty, trader, otype, tif, flags, side, stop_price,
                   display, min_qty, expire_ts):
        """NEW validation steps 3-22 (with 13a and 17a), in order; returns the first failing
        Reason or 0."""
        post_only = bool(flags & Flag.POST_ONLY)
        stop = otype in _STOPS
        rests = otype == OrderType.LIMIT and tif in _RESTING_TIFS
        if side not in (Side.BUY, Side.SELL):                                        # 3
            return Reason.BAD_SIDE
        if otype not in (OrderType.LIMIT, OrderType.MARKET, *_STOPS):                # 4
            return Reason.BAD_ORDER_TYPE
        if (tif not in (Tif.GTC, Tif.IOC, Tif.FOK, Tif.DAY, Tif.GTD)                 # 5
                or (otype == OrderType.MARKET and tif in (Tif.DAY, Tif.GTD))
                or (stop and tif == Tif.FOK)):
            return Reason.BAD_TIF
        if flags & ~KNOWN_FLAGS or (post_only and not rests):                        # 6
            return Reason.BAD_FLAGS
        if qty <= 0:                                                                 # 7
            return Reason.BAD_QTY
        if qty > MAX_QTY:                                                            # 8
            return Reason.OVERFLOW
        if book.off_lot(qty):                                                        # 9
            return Reason.OFF_LOT
        if qty < book.min_order_qty:                                                 # 10
            return Reason.BELOW_MIN_QTY
        if otype in _PRICED:
            if price <= 0:                                                           # 11
                return Reason.BAD_PRICE
            if not book.min_price <= price <= book.max_price:                        # 12
                return Reason.PRICE_OUT_OF_BAND
            if price % book.tick(price):                                             # 13
                return Reason.OFF_TICK
            if book.outside_static(price):                                           # 13a
                return Reason.OUTSIDE_STATIC_BAND
        if stop and not book.on_grid(stop_price):                                    # 14
            return Reason.BAD_STOP_PRICE
        if display < 0 or (display > 0 and (display > qty or book.off_lot(display)   # 15
                                            or not rests)):
            return Reason.BAD_DISPLAY_QTY
        if min_qty < 0 or (min_qty > 0 and (min_qty > qty or book.off_lot(min_qty)  # 16
                                            or tif == Tif.FOK or stop)):
            return Reason.BAD_MIN_QTY
        if (tif == Tif.GTD and expire_ts <= ts) or (tif != Tif.GTD and expire_ts != 0):  # 17
            return Reason.BAD_EXPIRY
        if book.in_call and (tif in (Tif.IOC, Tif.FOK) or post_only or min_qty > 0):  # 17a
            return Reason.NOT_IN_CALL
        if oid in book.live or oid in book.pending:                                  # 18
            return Reason.DUPLICATE_ID
        if stop and book.reached(side, stop_price):                                  # 19
            return Reason.STOP_PRICE_REACHED
        best = book.best(1 - side)
        if post_only and best is not None and _crosses(side, price, False, best):    # 20
            return Reason.POST_ONLY_WOULD_CROSS
        market = otype == OrderType.MARKET
        if tif == Tif.FOK and self._fillable(book, side, price, market, trader) < qty:   # 21
            return Reason.FOK_CANNOT_FILL
        if min_qty > 0 and self._fillable(book, side, price, market, trader) < min_qty:  # 22
            return Reason.MIN_QTY_CANNOT_FILL
        return 0

    def _fillable(self, book, side, price, market, trader):
        """The FOK walk (semantics.md, FOK and minimum quantity): how much an order of `trader`
        would fill now, walking the opposite side in priority order within its limit and, with a
        dynamic band, up to the first level outside it (matching would stop there)."""
        opp, total = 1 - side, 0
        for p in book.prices(opp):
            if not _crosses(side, price, market, p) or book.outside_dynamic(p):
                break
            queue = book.sides[opp][p]
            own = [i for i, r in enumerate(queue) if r.trader == trader]
            if own and self.stp in (Stp.CANCEL_INCOMING, Stp.CANCEL_BOTH):
                # matching stops at the first own order; the slices before it refill behind it
                return total + sum(r.shown for r in queue[:own[0]])
            skip = self.stp == Stp.CANCEL_RESTING
            total += sum(r.leaves for r in queue if not (skip and r.trader == trader))
        return total

    def _check_modify(self, book, o, price, qty, stop_price):
        """MODIFY validation steps 5-15 with 11a and 11b (3 UNKNOWN_ID and 4 NOT_OWNER are
        done by the caller)."""
        pending = o.order_id in book.pending
        if qty <= 0:                                                                 # 5
            return Reason.BAD_QTY
        if qty > MAX_QTY:                                                            # 6
            return Reason.OVERFLOW
        if book.off_lot(qty):                                                        # 7
            return Reason.OFF_LOT
        if qty < book.min_order_qty:                                                 # 8
            return Reason.BELOW_MIN_QTY
        if not pending or o.otype == OrderType.STOP_LIMIT:
            if price <= 0:                                                           # 9
                return Reason.BAD_PRICE
            if not book.min_price <= price <= book.max_price:                        # 10
                return Reason.PRICE_OUT_OF_BAND
            if price % book.tick(price):                                             # 11
                return Reason.OFF_TICK
            if book.outside_static(price):                                           # 11a
                return Reason.OUTSIDE_STATIC_BAND
        if not pending and book.in_call and o.market:                                # 11b
            return Reason.NOT_IN_CALL
        if pending:
            if not book.on_grid(stop_price):                                         # 12
                return Reason.BAD_STOP_PRICE
            if book.reached(o.side, stop_price):                                     # 13
                return Reason.STOP_PRICE_REACHED
            return 0
        if price == o.price:
            if book.open_total(o.side, price) - o.leaves + qty > MAX_LEVEL_QTY:      # 14
                return Reason.OVERFLOW
        else:
            best = book.best(1 - o.side)
            if o.flags & Flag.POST_ONLY and best is not None and _crosses(o.side, price, False, best):
                return Reason.POST_ONLY_WOULD_CROSS                                  # 15
        return 0

    # ---- MODIFY (semantics.md, MODIFY) ------------------------------------------------------------

    def _modify(self, book, o, price, qty):
        """Modify a resting order (validated)."""
        queue = book.sides[o.side][o.price]
        if price == o.price:
            shown, raised = o.shown, qty > o.leaves
            if raised:  # a higher quantity loses priority: back of the level, a fresh slice
                queue.remove(o)
                queue.append(o)
                o.leaves = qty
                o.shown = o.slice()
            else:       # not higher: place kept; the reserve goes first, then the displayed part
                o.leaves = qty
                o.shown = min(o.shown, qty)
            self._event(o.order_id, Event.MODIFIED, filled=o.filled, leaves=qty)
            if raised or o.shown != shown:
                self._level_row(book, o.side, price)
            return
        # New price: leave the old level, then behave as an incoming limit (no second ACCEPTED,
        # no minimum quantity, its tif, display size and expiry kept).
        old_price = o.price
        book.remove(o)
        o.leaves, o.price, o.min_qty = qty, price, 0
        self._event(o.order_id, Event.MODIFIED, filled=o.filled, leaves=qty)
        self._level_row(book, o.side, old_price)
        self._execute(book, o)

    def _modify_stop(self, book, s, price, qty, stop_price):
        """Modify a pending stop (validated): same stop price and a quantity not higher keep its
        place; anything else goes to the back of its (new) stop price."""
        if stop_price != s.stop_price or qty > s.leaves:
            self._stop_clock += 1
            s.key = self._stop_clock
        s.leaves, s.stop_price = qty, stop_price
        if s.otype == OrderType.STOP_LIMIT:
            s.price = price
        self._event(s.order_id, Event.MODIFIED, filled=s.filled, leaves=qty)

    def _queue_stop(self, book, s):
        self._stop_clock += 1
        s.key = self._stop_clock
        book.pending[s.order_id] = s

    # ---- matching (semantics.md, NEW and Stops) ---------------------------------------------------

    def _release_stops(self, book):
        """If the message traded on the symbol, check its stops (NEW step 5, MODIFY)."""
        if book.traded == self.seq:
            self._continuous_stops(book)

    def _continuous_stops(self, book):
        """Release triggered stops one at a time (each matched in full before the next check),
        only while the symbol is CONTINUOUS (a band breach ends the release)."""
        while book.phase == Phase.CONTINUOUS and (s := book.triggered()) is not None:
            del book.pending[s.order_id]
            self._event(s.order_id, Event.TRIGGERED, filled=s.filled, leaves=s.leaves)
            s.otype = OrderType.MARKET if s.otype == OrderType.STOP else OrderType.LIMIT
            s.stop_price = 0
            self._execute(book, s)

    def _execute(self, book, o):
        """Match an accepted incoming order (NEW steps 2-4), then dispose of the rest. In a call
        nothing matches and the order rests; a dynamic band breach stops the matching, starts a
        re-opening auction and handles the rest as an order entered in the call."""
        if book.in_call:
            return self._rest_in_call(book, o)
        stopped = self._match(book, o)
        if stopped == "band":
            self._breach(book)
            if o.tif == Tif.IOC:
                self._event(o.order_id, Event.CANCELLED, Reason.IOC_UNFILLED, o.filled, 0)
            else:
                self._rest_in_call(book, o)
            return self._publish(book)
        if o.leaves == 0:
            return
        if stopped:
            reason = Reason.SELF_TRADE
        elif o.market:
            reason = Reason.NO_LIQUIDITY
        elif o.tif in (Tif.IOC, Tif.FOK):
            reason = Reason.IOC_UNFILLED
        elif book.open_total(o.side, o.price) + o.leaves > MAX_LEVEL_QTY:
            reason = Reason.OVERFLOW
        else:
            book.rest(o)
            return self._level_row(book, o.side, o.price)
        self._event(o.order_id, Event.CANCELLED, reason, o.filled, 0)

    def _rest_in_call(self, book, o):
        """An order entered in a call (or left by a band breach) rests at the back of its level,
        a MARKET at its call price; CANCELLED/OVERFLOW if the level total would pass the limit."""
        if o.market:
            o.price = CALL_MARKET_PRICE[o.side]
        if book.open_total(o.side, o.price) + o.leaves > MAX_LEVEL_QTY:
            return self._event(o.order_id, Event.CANCELLED, Reason.OVERFLOW, o.filled, 0)
        book.rest(o)
        self._level_row(book, o.side, o.price)

    def _match(self, book, o):
        """Match `o` against the opposite side; returns "stp" if self-trade prevention stopped
        it, "band" if its next fill would print outside the dynamic band, else None."""
        opp = 1 - o.side
        while o.leaves > 0:
            p = book.best(opp)
            if p is None or not _crosses(o.side, o.price, o.market, p):
                return None
            queue, changed, stopped = book.sides[opp][p], False, None
            while queue and o.leaves > 0 and not stopped:
                r = queue[0]
                if self.stp != Stp.NONE and r.trader == o.trader:
                    if self.stp in (Stp.CANCEL_RESTING, Stp.CANCEL_BOTH):
                        queue.pop(0)
                        del book.live[r.order_id]
                        self._event(r.order_id, Event.CANCELLED, Reason.SELF_TRADE, r.filled, 0)
                        changed = True
                    if self.stp in (Stp.CANCEL_INCOMING, Stp.CANCEL_BOTH):
                        stopped = "stp"
                    continue
                if book.outside_dynamic(p):  # this fill would print outside the band
                    stopped = "band"
                    break
                self._fill(book, o, r, p)
                if r.leaves == 0:
                    queue.pop(0)
                    del book.live[r.order_id]
                elif r.shown == 0:  # iceberg: a new slice at the back of the level (CME Globex)
                    queue.pop(0)
                    r.shown = r.slice()
                    queue.append(r)
                changed = True
            if changed:  # one L2 row per level changed, written as matching leaves it
                self._level_row(book, opp, p)
            if not queue:
                del book.sides[opp][p]
            if stopped:
                return stopped
        return None

    def _fill(self, book, o, r, price):
        """One fill between incoming `o` and the displayed part of resting `r` at the resting
        price, then both events; the fill moves the symbol's last trade price."""
        q = min(o.leaves, r.shown)
        o.leaves -= q
        o.filled += q
        r.leaves -= q
        r.shown -= q
        r.filled += q
        book.last, book.traded = price, self.seq
        self.trade_id += 1
        buy, sell = (o, r) if o.side == Side.BUY else (r, o)
        self._fills.append((self.seq, self._ts, self.trade_id, price, q, buy.order_id,
                            sell.order_id, self._sym, buy.trader, sell.trader, int(o.side)))
        for x in (o, r):
            ev = Event.FILLED if x.leaves == 0 else Event.PARTIAL
            self._event(x.order_id, ev, filled=x.filled, leaves=x.leaves, price=price)

    # ---- trading phases (semantics.md, Trading phases, auctions and price bands) ----------------

    def _phase_message(self, book, ts, oid, price, expire_ts, target):
        """A PHASE message: its validation steps 2-5 (with 4a), then steps 1-5 of its
        processing."""
        if target not in set(Phase):                                                 # 2
            return self._event(oid, Event.REJECTED, Reason.BAD_PHASE)
        if price < 0:                                                                # 3
            return self._event(oid, Event.REJECTED, Reason.BAD_PRICE)
        if price > 0 and not book.min_price <= price <= book.max_price:             # 4
            return self._event(oid, Event.REJECTED, Reason.PRICE_OUT_OF_BAND)
        if price > 0 and price % book.tick(price):                                   # 4a
            return self._event(oid, Event.REJECTED, Reason.OFF_TICK)
        if expire_ts != 0 and (target != Phase.REOPENING_AUCTION or expire_ts <= ts):  # 5
            return self._event(oid, Event.REJECTED, Reason.BAD_EXPIRY)
        if price > 0:                                                                # 1
            book.ref = price
        if target in (Phase.OPENING_AUCTION, Phase.CLOSING_AUCTION):                 # 2
            self._uncross(book, target)
        elif target in (Phase.CONTINUOUS, Phase.CLOSED) and book.auction:
            self._uncross(book, book.auction)
        book.phase = {Phase.OPENING_AUCTION: Phase.CONTINUOUS,                       # 3
                      Phase.CLOSING_AUCTION: Phase.CLOSED}.get(target, target)
        if book.in_call:
            book.auction, book.ind = _CALL_AUCTION[book.phase], (0, 0, 0)
            if book.phase == Phase.REOPENING_AUCTION:
                book.auction_end = expire_ts
        self._event(0, Event.PHASE, price=book.ref)
        if book.in_call:                                                             # 4
            self._publish(book)
        # 5: whether or not the uncross traded (stops triggered by the fills before a band
        # breach waited through the call)
        if book.phase == Phase.CONTINUOUS:
            book.set_band()   # around the uncross price, the symbol's last trade
            self._continuous_stops(book)

    def _breach(self, book):
        """A fill would print outside the dynamic band: the symbol enters REOPENING_AUCTION,
        ending interruption_ns after the message (clamped to the int64 clock)."""
        book.phase = book.auction = Phase.REOPENING_AUCTION
        book.auction_end = min(self._ts + book.interruption_ns, _I64_MAX)
        book.ind, book.band = (0, 0, 0), None
        self._event(0, Event.PHASE, Reason.PRICE_BAND, price=book.ref)

    def _publish(self, book):
        """Write an INDICATIVE event if the uncross the symbol would run now differs from the
        last one published."""
        now = auction_price(book)
        if now != book.ind:
            book.ind = now
            self._event(0, Event.INDICATIVE, price=now[0], filled=now[1], leaves=now[2])

    def _uncross(self, book, auction):
        """Run the uncross of `auction` on the call book (semantics.md, The uncross): outputs 1-4
        in order. Returns True if it traded. Leaves the symbol with no pending auction; with
        V > 0 the last trade and reference prices become P. (The dynamic band is not applied.)"""
        price, volume, surplus = auction_price(book)
        self._event(0, Event.UNCROSS, price=price, filled=volume, leaves=surplus, phase=auction)
        changed = {Side.BUY: set(), Side.SELL: set()}
        if volume:
            queues = []
            for side in (Side.BUY, Side.SELL):
                takers, left = [], volume   # [order, quantity it still executes], priority order
                for o in book.resting(side):
                    if left == 0 or not _crosses(1 - side, price, False, o.price):
                        break
                    take = min(o.leaves, left)
                    takers.append([o, take])
                    left -= take
                queues.append(takers)
            buys, sells = queues
            i = j = 0
            while i < len(buys) and j < len(sells):
                (b, bq), (s, sq) = buys[i], sells[j]
                q = min(bq, sq)
                self.trade_id += 1
                self._fills.append((self.seq, self._ts, self.trade_id, price, q, b.order_id,
                                    s.order_id, self._sym, b.trader, s.trader, AUCTION_SIDE))
                for x in (b, s):
                    x.leaves -= q
                    x.filled += q
                    x.shown -= min(x.shown, q)   # the displayed part first, then the reserve
                    changed[x.side].add(x.price)
                    ev = Event.FILLED if x.leaves == 0 else Event.PARTIAL
                    self._event(x.order_id, ev, filled=x.filled, leaves=x.leaves, price=price)
                buys[i][1] -= q
                sells[j][1] -= q
                i += buys[i][1] == 0
                j += sells[j][1] == 0
            for takers in queues:   # filled orders leave; a used-up iceberg slice refills at the back
                for o, _ in takers:
                    if o.leaves == 0:
                        book.remove(o)
                    elif o.shown == 0:
                        queue = book.sides[o.side][o.price]
                        queue.remove(o)
                        o.shown = o.slice()
                        queue.append(o)
            book.last = book.ref = price
            book.traded = self.seq
        for side in (Side.BUY, Side.SELL):   # market orders still resting: BUY side first
            for o in list(book.sides[side].get(CALL_MARKET_PRICE[side], [])):
                book.remove(o)
                changed[side].add(o.price)
                self._event(o.order_id, Event.CANCELLED, Reason.NO_LIQUIDITY, o.filled, 0)
        for side in (Side.BUY, Side.SELL):   # one L2 row per level changed, best first
            for p in sorted(changed[side], reverse=(side == Side.BUY)):
                self._level_row(book, side, p)
        book.auction, book.auction_end, book.ind = 0, 0, (0, 0, 0)
        return volume > 0


def _phase_arg(phase):
    """A Phase from a Phase, its name (any case) or its code; raises KeyError or ValueError."""
    return Phase[phase.upper()] if isinstance(phase, str) else Phase(phase)


def auction_price(book):
    """The uncross the call book of `book` would run now, by brute force: (P, V, surplus at P),
    (0, 0, 0) when nothing would execute (semantics.md, The uncross, rules 1-4)."""
    orders = [o for side in (Side.BUY, Side.SELL) for o in book.resting(side)]

    def executable(p):
        bought = sum(o.leaves for o in orders if o.side == Side.BUY and o.price >= p)
        sold = sum(o.leaves for o in orders if o.side == Side.SELL and o.price <= p)
        return min(bought, sold), bought - sold

    candidates = sorted({o.price for o in orders if not o.market})
    if not candidates:
        # market orders only: the reference price, if both sides have them and there is one
        ref = book.reference()
        volume, surplus = executable(ref) if ref else (0, 0)
        return (ref, volume, surplus) if volume else (0, 0, 0)
    at = {p: executable(p) for p in candidates}
    best_volume = max(v for v, _ in at.values())
    if best_volume == 0:                                                             # 1
        return (0, 0, 0)
    left = [p for p in candidates if at[p][0] == best_volume]
    least = min(abs(at[p][1]) for p in left)                                         # 2
    left = [p for p in left if abs(at[p][1]) == least]
    if all(at[p][1] > 0 for p in left):                                              # 3
        price = max(left)
    elif all(at[p][1] < 0 for p in left):
        price = min(left)
    else:                                                                            # 4
        price = min(max(book.reference(), left[0]), left[-1])
    volume, surplus = executable(price)
    assert volume == best_volume, "every price between two best candidates executes as much"
    return (price, volume, surplus)


def _l3(o):
    """An order as an L3_DTYPE tuple (a resting order's qty is its displayed part)."""
    pending = o.otype in _STOPS
    shown = o.leaves if pending else o.shown
    return (o.order_id, o.price, shown, o.filled, o.trader, o.side, o.flags, o.leaves - shown,
            o.stop_price, o.display, o.expire, int(o.otype), int(o.tif))


def _array(rows, dtype):
    """Rows (tuples in field order) as a structured array whose padding bytes are zero."""
    out = np.zeros(len(rows), dtype=dtype)
    if rows:
        out[:] = rows
    return out
