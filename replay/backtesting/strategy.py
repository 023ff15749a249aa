"""The strategy API of the backtest driver: a Python ``Strategy`` class and its ``Context``.

A strategy subclasses ``Strategy`` and overrides the callbacks it needs:

- ``on_start(ctx)``: once, before the first market message (local time = first message's ts).
- ``on_book(ctx, book)``: after every ``every`` market messages (class or instance attribute;
  0 = never). ``book`` is a ``MarketView`` of the state after the last of them. An empty side
  is **0, not None**: ``book.bid``/``book.ask`` (and their qty) are 0 then, and ``book.mid`` is
  None unless both sides are there; test ``if book.bid and book.ask`` (a check for ``is None``
  never fires, and the order goes out at price 0).
- ``on_fill(ctx, fill)``: once per fill of one of its orders (``Fill``), as soon as it happens.
- ``on_order(ctx, event)``: once per execution report of one of its orders (EVENT_DTYPE row).
- ``on_timer(ctx, ts)``: every ``timer_ns`` of local time (0 = never), or at times set with
  ``ctx.set_timer``. Timers past the last market message never fire: time ends with the data.
- ``on_phase(ctx, event)``: once per symbol event of the traded symbol (EVENT_DTYPE row with
  ``event`` PHASE, INDICATIVE or UNCROSS; docs/semantics.md, "Trading phases"), one feed latency
  after the message that made it, in engine order with the strategy's own reports.

Trading phases: ``ctx.buy/sell`` work in every phase (the engine refuses what a phase refuses:
an IOC in a call comes back REJECTED/NOT_IN_CALL, any NEW in a halt SYMBOL_HALTED);
``ctx.phase()`` and ``ctx.indicative()`` read the engine's state at the callback (as
``MarketView.depth`` does); an order resting in a call is filled by the uncross, and its
``Fill`` has ``auction`` True (the fill row's aggressor_side is ``AUCTION_SIDE``; the strategy
pays the maker rate on it, as it did not take liquidity).

Time: the strategy lives on a local clock. What it sees happened one feed latency ago at the
exchange; ``ctx.now`` is the local time of the current callback; orders it sends reach the engine
one order latency later (never before the previous one: one connection keeps its order).

Speed: a strategy that overrides neither ``on_fill`` nor ``on_order`` can only act at wake-ups
and timers, so the driver runs the market from one to the next in numba and delivers the fills
(to ``ctx``) on the way; one that does is stopped right after every message that fills it, so
what it sends goes in before any later market message (same results, more round trips).

``ctx.buy/sell`` return the order id at once (ids are the strategy's, in a reserved range above
every market id). ``ctx.position``, ``ctx.cash`` (a buy lowers it) and ``ctx.fees`` (maker or
taker rate of each fill; negative for a rebate) are in the symbol's currency when it has one,
else in ticks x lots (``replay.backtesting.money``), and change only when fills are reported; ``ctx.open_orders`` holds orders sent and not yet known to be
done (filled, cancelled, or rejected before going live / as unknown).

Several instruments (``backtest(symbol=[...])``, L3 flow): ``ctx.books`` has every traded
symbol's book by name at a wake-up, ``ctx.buy/sell(..., symbol=)`` picks one (default the
first), ``ctx.positions`` is per symbol (``ctx.position`` the first's), and ``ctx.cash`` /
``ctx.fees`` are one account's, each fill in its own symbol's terms.

``QuoteStrategy`` runs an ``@njit`` quote function through this Python API with the quote rules
of ``replay.backtesting.quoting``, the very functions the njit fast path calls: the same function
gives the same fills on both paths.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import (AUCTION_SIDE, EVENT_DTYPE, FILL_DTYPE, Event, Flag, Kind, OrderType,
                             Phase, Reason, Side, Tif)

from exsim.replay.backtesting.quoting import NO_ACTION, SLOTS, fill_effect, quote_report, reconcile

__all__ = ["Strategy", "Context", "MarketView", "Fill", "OpenOrder", "QuoteStrategy"]


class Strategy:
    """Base class: every callback does nothing. Set ``every`` and/or ``timer_ns`` to be woken."""

    every: int = 0
    timer_ns: int = 0

    def on_start(self, ctx: "Context") -> None:
        """Called once before the first market message."""

    def on_book(self, ctx: "Context", book: "MarketView") -> None:
        """Called after every ``every`` market messages. ``book.bid``/``book.ask`` are integer
        ticks, **0** (not None) on an empty side; ``book.mid`` is None unless both are there."""

    def on_fill(self, ctx: "Context", fill: "Fill") -> None:
        """Called for each fill of one of the strategy's orders."""

    def on_order(self, ctx: "Context", event) -> None:
        """Called for each execution report (EVENT_DTYPE row) of one of the strategy's orders."""

    def on_timer(self, ctx: "Context", ts: int) -> None:
        """Called at each timer's local time ``ts``."""

    def on_phase(self, ctx: "Context", event) -> None:
        """Called for each PHASE, INDICATIVE or UNCROSS event (EVENT_DTYPE row) of the traded
        symbol."""


class Fill(NamedTuple):
    """One fill of a strategy order, from the strategy's side."""

    ts: int          # exchange time of the fill
    local_ts: int    # when the strategy learns of it
    order_id: int    # the strategy's order
    side: int        # Side the strategy traded
    price: int
    qty: int
    trade_id: int
    aggressor: bool  # the strategy's order was the incoming one (it took liquidity)
    auction: bool = False   # an uncross made it (aggressor_side AUCTION_SIDE)


@dataclass
class OpenOrder:
    """A strategy order sent and not yet known to be done."""

    order_id: int
    side: int
    price: int
    qty: int          # open quantity as last reported (or as sent)
    filled: int = 0
    acked: bool = False
    symbol: int = 0   # its symbol id (several instruments: ``backtest(symbol=[...])``)


class MarketView:
    """What the strategy sees at a wake-up: top of book at exchange time ``ts``.

    ``bid``/``ask`` are 0 (and their qty 0) when that side is empty, never None: the njit
    fast path passes the same four ints to a ``QuoteStrategy`` function, so both paths test
    ``bid > 0``; ``mid`` is None unless both sides are there. ``depth(levels)`` returns the
    engine's (bids, asks) DEPTH_DTYPE arrays for the same instant (valid only inside the callback).
    """

    __slots__ = ("ts", "local_ts", "bid", "bid_qty", "ask", "ask_qty", "_engine", "_symbol")

    def __init__(self, ts, local_ts, top, engine, symbol):
        self.ts, self.local_ts = int(ts), int(local_ts)
        self.bid, self.bid_qty, self.ask, self.ask_qty = map(int, top)
        self._engine, self._symbol = engine, symbol

    @property
    def symbol(self) -> int:
        """The id of the symbol this book is of (``OpenOrder.symbol`` holds the same ids)."""
        return self._symbol

    @property
    def mid(self) -> float | None:
        """(bid + ask) / 2, or None if a side is empty."""
        return (self.bid + self.ask) / 2 if self.bid and self.ask else None

    def depth(self, levels: int = 10):
        """Return (bids, asks) as ``Engine.depth`` does, best level first."""
        return self._engine.depth(self._symbol, levels)


class Context:
    """The strategy's handle on the backtest: order entry, position, cash, open orders, clock.

    Built by the driver; strategies only call its public methods and read its attributes.
    """

    def __init__(self, driver, id_base: int, terms, terms_by_symbol=None):
        self._driver = driver
        self._next_id = id_base
        self._terms = terms     # Money.terms(): tick value, maker and taker rates
        # several instruments: symbol id -> (name, its Money.terms()); None for one symbol
        self._by_symbol = terms_by_symbol
        # several instruments: the position of each traded symbol by name (``position`` is the
        # first one's); one cash and one fee total over all of them, in their one currency
        self.positions: dict[str, int] = {n: 0 for n, _ in (terms_by_symbol or {}).values()}
        self.books: dict[str, MarketView] = {}   # several instruments: each one's book at a wake-up
        self._timers: list[tuple[int, int, int]] = []   # heap of (observation ts, n, local ts)
        self._n_timers = 0
        self.now = 0
        self.position = 0
        self.cash = 0.0
        self.fees = 0.0
        self.open_orders: dict[int, OpenOrder] = {}
        self.book: MarketView | None = None

    # -- order entry ----------------------------------------------------------------------
    def buy(self, price: int, qty: int, *, tif: str = "gtc", post_only: bool = False,
            market: bool = False, order_type: str | None = None, stop_price: int = 0,
            display_qty: int = 0, min_qty: int = 0, expire_ts: int = 0, symbol=None) -> int:
        """Send a NEW buy order; return its id (see ``sell`` for the arguments).

        Raises UsageError as ``sell`` does."""
        return self._new(Side.BUY, price, qty, tif, post_only, market, order_type,
                         (stop_price, display_qty, min_qty, expire_ts), symbol)

    def sell(self, price: int, qty: int, *, tif: str = "gtc", post_only: bool = False,
             market: bool = False, order_type: str | None = None, stop_price: int = 0,
             display_qty: int = 0, min_qty: int = 0, expire_ts: int = 0, symbol=None) -> int:
        """Send a NEW sell order; return its id.

        ``symbol`` (name or id): which traded symbol, when the backtest trades several
        (``backtest(symbol=[...])``); None: the first (the only one otherwise).

        ``tif``: gtc, ioc, fok, day (rests until the symbol's session close) or gtd (until
        ``expire_ts``, exchange ns). ``order_type``: limit, market, stop (a market order once the
        last trade reaches ``stop_price``) or stop_limit (a limit at ``price`` then); None: limit,
        or market when ``market`` is set. ``display_qty``: an iceberg's shown part (0: all);
        ``min_qty``: fill at least this much on entry or be rejected (0: none). The engine
        judges the values (docs/semantics.md): a stop already reached, a bad display or minimum
        or a GTD without a future ``expire_ts`` come back as a REJECTED report.
        On L2-only flow stops and icebergs (``display_qty``) raise UsageError at the call (an
        aggregate book has no last-trade trigger chain or hidden quantity to model them with).
        Raises UsageError for qty <= 0, a tif or order type not named above, ``market`` with
        another order type, a price outside int64, or a stop price, display, minimum or expiry
        that is not a whole number in int64 range, or a symbol the backtest does not trade."""
        return self._new(Side.SELL, price, qty, tif, post_only, market, order_type,
                         (stop_price, display_qty, min_qty, expire_ts), symbol)

    def cancel(self, order_id: int) -> None:
        """Send a CANCEL (the engine rejects it with UNKNOWN_ID if the order is gone by then)."""
        o = self.open_orders.get(order_id)
        self._driver.send(Kind.CANCEL, o.side if o else 0, order_id, 0, 0, Tif.GTC, 0,
                          OrderType.LIMIT, self.now, symbol=o.symbol if o else None)

    def modify(self, order_id: int, price: int, qty: int) -> None:
        """Send a MODIFY to a new price and open quantity (see docs/semantics.md for priority)."""
        if qty <= 0:
            raise UsageError(f"modify qty must be > 0 (use cancel); got {qty}")
        o = self.open_orders.get(order_id)
        if o is not None:
            o.price, o.qty = int(price), int(qty)
        self._driver.send(Kind.MODIFY, o.side if o else 0, order_id, int(price), int(qty), Tif.GTC, 0,
                          OrderType.LIMIT, self.now, symbol=o.symbol if o else None)

    def phase(self, symbol: int | str | None = None) -> Phase:
        """Return the current ``Phase`` of ``symbol`` (id or name; None: the traded symbol).
        Always CONTINUOUS on L2 flow. Raises UsageError for an unknown symbol."""
        return self._driver.phase_of(symbol)

    def indicative(self, symbol: int | str | None = None) -> tuple[int, int, int]:
        """Return the last indicative uncross the engine published for ``symbol`` (None: the
        traded one) as (price, qty, surplus): (0, 0, 0) outside a call or when nothing would
        execute; surplus > 0 on the buy side, < 0 on the sell side. Raises UsageError for an
        unknown symbol."""
        return self._driver.indicative_of(symbol)

    def set_timer(self, local_ts: int) -> None:
        """Call ``on_timer`` at local time ``local_ts`` (>= now; else UsageError)."""
        if local_ts < self.now:
            raise UsageError(f"timer at {local_ts} is before now ({self.now})")
        obs = local_ts - self._driver.feed.draw(local_ts)
        heapq.heappush(self._timers, (max(obs, self._driver.obs_ts), self._n_timers, int(local_ts)))
        self._n_timers += 1

    def _new(self, side, price, qty, tif, post_only, market, order_type, extra, symbol=None) -> int:
        if int(qty) != qty or qty <= 0:
            raise UsageError(f"qty must be a whole number of lots > 0; got {qty!r}")
        t = _enum_arg(Tif, tif, "tif")
        if order_type is None:
            otype = OrderType.MARKET if market else OrderType.LIMIT
        else:
            otype = _enum_arg(OrderType, order_type, "order_type")
            if market and otype != OrderType.MARKET:
                raise UsageError(f"market=True sends a MARKET order; order_type says "
                                 f"{otype.name.lower()}")
        price = int(price)   # as ever: a float price is cut to whole ticks
        if not _I64[0] <= price <= _I64[1]:
            raise UsageError(f"price must fit in int64; got {price}")
        extra = tuple(_int64_arg(v, k) for v, k in zip(extra, _EXTRA_NAMES))
        self._driver.check_new(otype, *extra)
        sid = self._driver.traded(symbol)
        oid = self._next_id
        self._next_id += 1
        self.open_orders[oid] = OpenOrder(oid, int(side), price, int(qty), symbol=sid)
        self._driver.send(Kind.NEW, int(side), oid, price, int(qty), t,
                          int(Flag.POST_ONLY) if post_only else 0, otype, self.now, *extra,
                          symbol=sid)
        return oid

    # -- driver side ----------------------------------------------------------------------
    # rows arrive as tuples (``ndarray.tolist()`` of FILL_DTYPE / EVENT_DTYPE rows): reading a
    # field of a numpy record costs a microsecond, a tuple item a few nanoseconds
    def _apply_fill(self, f: tuple, trader: int, local_ts: int, want: bool) -> list[Fill]:
        """Apply one strategy fill row to position, cash and fees; return its ``Fill``s (one per
        side the strategy is on) when ``want``, else an empty list."""
        out = []
        price, qty = f[_F_PRICE], f[_F_QTY]
        terms, name = self._terms, None
        if self._by_symbol is not None:   # several instruments: this symbol's terms
            name, terms = self._by_symbol[f[_F_SYMBOL]]
        for side, tr, oid in ((0, f[_F_BUY_TRADER], f[_F_BUY_ID]),
                              (1, f[_F_SELL_TRADER], f[_F_SELL_ID])):
            if tr != trader:
                continue
            dpos, dcash, fee = fill_effect(side, price, qty, f[_F_AGGRESSOR] == side, terms)
            if name is not None:
                self.positions[name] += dpos
                if f[_F_SYMBOL] != self._driver.symbol:
                    dpos = 0    # ``position`` is the first symbol's
            self.position += dpos
            self.cash += dcash
            self.fees += fee
            if want:
                out.append(Fill(f[_F_TS], local_ts, oid, side, price, qty, f[_F_TRADE_ID],
                                f[_F_AGGRESSOR] == side, f[_F_AGGRESSOR] == AUCTION_SIDE))
        return out

    def _apply_event(self, e: tuple) -> None:
        """Update ``open_orders`` from one execution report row of a strategy order."""
        o = self.open_orders.get(e[_E_ID])
        if o is None:
            return
        ev = e[_E_EVENT]
        if ev == Event.ACCEPTED:
            o.acked = True
        elif ev == Event.PARTIAL or ev == Event.MODIFIED:
            o.qty, o.filled = e[_E_LEAVES], e[_E_FILLED]
        elif ev == Event.FILLED or ev == Event.CANCELLED:
            del self.open_orders[o.order_id]
        elif ev == Event.REJECTED and (not o.acked or e[_E_REASON] == Reason.UNKNOWN_ID):
            del self.open_orders[o.order_id]   # never went live, or gone before our message


_EXTRA_NAMES = ("stop_price", "display_qty", "min_qty", "expire_ts")
_I64 = (-2**63, 2**63 - 1)


def _enum_arg(enum, value, what: str):
    """Return the ``enum`` member ``value`` names (its name in any case, or its number).
    Raises UsageError listing every member's name otherwise."""
    try:
        if isinstance(value, str):
            return enum[value.upper()]
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return enum(int(value))
    except (KeyError, ValueError):
        pass
    names = ", ".join(m.name.lower() for m in enum)
    raise UsageError(f"{what} must be one of {names}; got {value!r}")


def _int64_arg(value, what: str) -> int:
    """Return ``value`` as an int. Raises UsageError unless it is a whole number (not a bool)
    that fits the order row's int64 field."""
    ok = isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, bool)
    if ok and value == value and abs(value) != float("inf") and int(value) == value \
            and _I64[0] <= int(value) <= _I64[1]:
        return int(value)
    raise UsageError(f"{what} must be a whole number in int64 range; got {value!r}")


_F_TS, _F_TRADE_ID, _F_PRICE, _F_QTY, _F_BUY_ID, _F_SELL_ID, _F_BUY_TRADER, _F_SELL_TRADER, \
    _F_AGGRESSOR, _F_SYMBOL = (FILL_DTYPE.names.index(k) for k in (
        "ts", "trade_id", "price", "qty", "buy_order_id", "sell_order_id", "buy_trader",
        "sell_trader", "aggressor_side", "symbol"))
_E_ID, _E_EVENT, _E_LEAVES, _E_FILLED, _E_REASON = (EVENT_DTYPE.names.index(k) for k in (
    "order_id", "event", "leaves_qty", "filled_qty", "reason"))


class QuoteStrategy(Strategy):
    """Run an ``@njit`` quote function on the Python path, with the rules of ``quoting``.

    ``fn(local_ts, bid, bid_qty, ask, ask_qty, position, cash, state, params, quote)`` writes
    [bid_px, bid_qty, ask_px, ask_qty] into ``quote`` (int64[4]); ``state`` (float64) is the
    function's memory, ``params`` (float64) its parameters. ``slots`` holds the live quotes
    (``quoting``'s layout). Raises UsageError if ``every`` < 1.
    """

    def __init__(self, fn, params=(), state_size: int = 8, every: int = 100):
        if every < 1:
            raise UsageError(f"every must be >= 1; got {every}")
        self.fn = fn
        self.params = np.asarray(params, np.float64)
        self.state = np.zeros(state_size, np.float64)
        self.every = int(every)
        self.slots = np.zeros(SLOTS, np.int64)
        self._quote = np.zeros(4, np.int64)

    def on_order(self, ctx, event) -> None:
        quote_report(self.slots, int(event["order_id"]), int(event["event"]))

    def on_book(self, ctx, book) -> None:
        q, slots = self._quote, self.slots
        self.fn(ctx.now, book.bid, book.bid_qty, book.ask, book.ask_qty, ctx.position, ctx.cash,
                self.state, self.params, q)
        todo = reconcile(slots, q)
        if todo[0] == NO_ACTION and todo[1] == NO_ACTION:
            return
        sl = slots.tolist()
        for side, action in enumerate(todo):
            oid, price, qty = sl[4 * side: 4 * side + 3]
            if action == Kind.NEW:
                slots[4 * side] = ctx.buy(price, qty) if side == 0 else ctx.sell(price, qty)
            elif action == Kind.MODIFY:
                ctx.modify(oid, price, qty)
            elif action == Kind.CANCEL:
                ctx.cancel(oid)
