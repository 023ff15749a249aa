"""Backtests on L2-only flow: an aggregate book replayed from L2 rows, and a queue-position model
for the strategy's orders (Binance market-by-price data, or any ``L2Flow``).

Why not the engine: L2 data has one aggregate quantity per price level, not orders. Fed to the
engine as one aggregate order per level, a level increase would be a MODIFY that sends the
aggregate behind the strategy's order: optimistic. Here the market book is replayed exactly as
recorded (each L2 row sets a level's total), and each strategy order carries ``ahead``, the
quantity in front of it in its level's queue.

Queue model (``queue_model``, one of ``queue_models``):
- when a strategy order joins a level (a NEW that rests, or a MODIFY that changes price or raises
  the quantity), ``ahead`` = the level's aggregate quantity + the open quantity of the strategy's
  own earlier orders at that price and side;
- a market trade at the order's price, against its side, lowers ``ahead`` by the trade's
  quantity; once ``ahead`` goes below zero the order fills ``min(leaves, -ahead)`` and ``ahead``
  becomes 0 (so queue ahead 5, trades of 3 then 3: 1 lot fills on the second trade);
- a trade *through* the order's price (a buyer paying more than a resting ask, a seller taking a
  bid below a resting bid) means the level was exhausted: ``ahead`` becomes 0 and the order
  fills ``min(leaves, trade qty)`` at its own price;
- a level decrease without a trade: the queue model (``queue_models``: "conservative" leaves
  ``ahead``, "proportional" lowers it by the cancellation's share) moves ``ahead``, which is then
  capped at the new total plus the open quantity of the strategy's own orders ahead;
- a level increase is always behind the order.

Marketable strategy orders take liquidity from the replayed book at the levels' prices, best
first, and the levels taken are lowered until the data next sets them (the market's reaction to
the strategy is not modelled otherwise). MARKET, IOC, FOK and POST_ONLY behave as in the engine
(docs/semantics.md); the events and fills have the engine's dtypes and meanings, so an L2
backtest's ``BacktestResult`` has the same shape as an L3 one. Fills against the market carry the
market trade's id (passive fills) or ids from ``TAKE_ID_BASE`` up (the strategy's takes); the
market side's order id and trader are 0.

Ordering: L2 rows keep their file order (update-id order) with ``ts`` made non-decreasing (a REST
snapshot may be received after the first diffs it covers); trades are merged in by ``ts``, before
L2 rows with the same ``ts`` (a trade and the diff that reports its effect: the trade advances the
queue first, the diff then only caps it). A market message is one trade, or the consecutive L2
rows with one ``seq`` (update id) and ``ts`` (``message_ends``); the driver wakes the strategy
only between whole messages. A decrease counts as cancellation only for what the trades at that
price since the level's last row (``O_TRADED``) do not explain, so a trade and the diff that
reports it move ``ahead`` once. Options of the fill model (``queue_models``): ``cross_fills``
(the other side's rows at or through a resting order fill it by the quantity they add) and
``whole_on_trade_through``. Known limits: without ``cross_fills`` a resting order fills only on
trades; trades that arrive after the diff showing their effect advance the queue once more
(the data carries no link between the two streams).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.errors import UsageError
from exsim.exchange.state import OK
from exsim.exchange.state import grow_output
from exsim.exchange.schema import (DEPTH_DTYPE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, Event, Flag, Kind,
                             OrderType, Reason, Side, Tif)

from exsim.replay.backtesting.kernels import HIT, ID_BASE, NEED_LIVE, NEED_STRAT
from exsim.replay.backtesting.queue_models import (CROSS_FILLS, WHOLE_ON_THROUGH,
                                                   ahead_after_decrease, as_queue_model)

# numba freezes schema codes and the statuses of ``kernels`` into these kernels, and inlines the
# queue models' kernel, but keys them on this file
guard(__name__, __file__, deps=("exsim.exchange.schema", "exsim.replay.backtesting.kernels",
                                "exsim.replay.backtesting.queue_models"))

__all__ = ["L2Flow", "L2_EVENT_DTYPE", "l2_events", "message_ends", "L2Sim", "TAKE_ID_BASE",
           "L2Prepared", "prepare"]

L2_EVENT_DTYPE = np.dtype([
    ("ts", "<i8"),        # non-decreasing exchange time
    ("seq", "<i8"),       # L2 rows: the update id of the message that made the row (its ``seq``)
    ("price", "<i8"),     # level price / trade price (ticks)
    ("qty", "<i8"),       # new level total (0 removes it) / trade quantity (lots)
    ("trade_id", "<i8"),  # the market trade id (trades only)
    ("rank", "<i8"),      # L2 rows: the price's rank among the rows' distinct prices (L2Sim sets it)
    ("kind", "u1"),       # EV_DEPTH or EV_TRADE
    ("side", "u1"),       # the level's Side / the trade's aggressor Side
])
EV_DEPTH = 0
EV_TRADE = 1
_POST_ONLY = int(Flag.POST_ONLY)
# trade ids of the strategy's own takes: the strategy's reserved id range, above every market id
TAKE_ID_BASE = ID_BASE

# The kernels' statuses are ``kernels``' own: OK, HIT (stopped after an event that filled the
# strategy), NEED_STRAT (the strategy's fill/event arrays need room), NEED_LIVE (the live-order
# table is full).


# columns of the live-order table ``so`` (rows [0, st[T_NLIVE]) in queue-join order);
# O_EXPIRE: the exchange time a DAY or GTD order expires at (0: never)
# O_TRADED: market trades at the order's price since its level's last L2 row (the part of the
# next decrease those trades explain, which must not move ``ahead`` a second time)
O_ID, O_SIDE, O_PRICE, O_LEAVES, O_FILLED, O_AHEAD, O_EXPIRE, O_TRADED = range(8)
O_COLS = 8
# slots of the int64 state ``st``: T_NEXT_EXP is the earliest O_EXPIRE of a live order (int64
# max: none), T_CLOSE the symbol's session close (ns after midnight UTC) DAY orders expire at
# T_NEED: the rows of strategy fills/events a kernel needed when it returned NEED_STRAT
# T_FILLS: the fill model's options (``queue_models.CROSS_FILLS``, ``WHOLE_ON_THROUGH`` bits)
T_SEQ, T_NLIVE, T_TAKE_ID, T_MODEL, T_SYMBOL, T_TS, T_NEXT_EXP, T_CLOSE, T_NEED, T_FILLS = \
    range(10)
T_SIZE = 10
_NEVER = np.iinfo(np.int64).max
_DAY_NS = 86_400 * 10**9


@dataclass
class L2Flow:
    """L2-only market data: ``l2`` rows (L2_DTYPE; qty = new level total, 0 removes) in the order
    they apply, and ``trades`` (FILL_DTYPE; price, qty, aggressor_side, trade_id, ts used) sorted
    by ts. ``name`` and ``tick_size`` describe the one symbol; ``tick`` and ``lot`` are the
    decimal steps of a price tick and a quantity lot ("0.01", "0.00000001"; "" when unknown)
    and ``currency`` the quote currency ("" when unknown): with all three a backtest values its
    fills in that currency (tick value = tick x lot) and prints prices and sizes as decimals."""

    l2: np.ndarray
    trades: np.ndarray
    name: str = "L2"
    tick_size: float = 1.0
    tick: str = ""
    lot: str = ""
    currency: str = ""

    @classmethod
    def from_binance(cls, data, name: str | None = None, tick_size: float | None = None) -> "L2Flow":
        """Return the L2Flow of a ``scenarios.BinanceData`` (its ``l2`` rows and ``trades``, its
        tick, lot and quote currency; name: the data's symbol, else "BTCUSDT")."""
        tick = getattr(data, "tick", "0.01")
        return cls(data.l2, data.trades, name or getattr(data, "symbol_name", "") or "BTCUSDT",
                   float(tick) if tick_size is None else tick_size, tick,
                   getattr(data, "lot", ""), getattr(data, "currency", ""))


def l2_events(flow: L2Flow) -> np.ndarray:
    """Return the merged L2_EVENT_DTYPE stream of ``flow`` (see the module docstring's ordering).

    Raises UsageError if ``l2``/``trades`` have the wrong dtype or trades are not sorted by ts.
    """
    l2, tr = flow.l2, flow.trades
    if not isinstance(l2, np.ndarray) or l2.dtype != L2_DTYPE:
        raise UsageError(f"L2Flow.l2 must be an L2_DTYPE array; got {getattr(l2, 'dtype', type(l2))}")
    if not isinstance(tr, np.ndarray) or tr.dtype != FILL_DTYPE:
        raise UsageError(f"L2Flow.trades must be a FILL_DTYPE array; got {getattr(tr, 'dtype', type(tr))}")
    if len(tr) and np.any(np.diff(tr["ts"]) < 0):
        raise UsageError("L2Flow.trades must be sorted by ts")
    if np.any(l2["price"] <= 0) or np.any(l2["qty"] < 0) or np.any(l2["side"] > 1):
        raise UsageError("L2Flow.l2 rows need price > 0, qty >= 0 and side BUY (0) or SELL (1)")
    l2_ts = np.maximum.accumulate(l2["ts"]) if len(l2) else l2["ts"]
    out = np.zeros(len(l2) + len(tr), L2_EVENT_DTYPE)
    # trades go before L2 rows of equal ts: searchsorted(side="left") places each trade before them
    pos = np.searchsorted(l2_ts, tr["ts"], side="left") + np.arange(len(tr))
    is_tr = np.zeros(len(out), bool)
    is_tr[pos] = True
    dpos = np.flatnonzero(~is_tr)
    out["seq"][dpos] = l2["seq"]
    for col, d, t in (("ts", l2_ts, tr["ts"]), ("price", l2["price"], tr["price"]),
                      ("qty", l2["qty"], tr["qty"]), ("side", l2["side"], tr["aggressor_side"])):
        out[col][dpos] = d
        out[col][pos] = t
    out["kind"][pos] = EV_TRADE
    out["trade_id"][pos] = tr["trade_id"]
    return out


def message_ends(events: np.ndarray) -> np.ndarray:
    """Return the end (exclusive index) of every market message of an ``l2_events`` stream, in
    order: a trade is a message of its own; consecutive L2 rows with the same ``seq`` (update id)
    and ``ts`` are one message (a depth diff, or the snapshot). A strategy only ever sees the
    book at one of these ends, never half way through a diff (a half-applied diff can show a
    crossed book)."""
    n = len(events)
    if n == 0:
        return np.zeros(0, np.int64)
    depth = events["kind"] == EV_DEPTH
    same = depth[:-1] & depth[1:] & (events["seq"][:-1] == events["seq"][1:]) & \
        (events["ts"][:-1] == events["ts"][1:])
    return np.append(np.flatnonzero(~same) + 1, n).astype(np.int64)


@dataclass(frozen=True)
class L2Prepared:
    """An L2 flow made ready to replay, once per content: the merged ``events`` (``l2_events``,
    with ``rank`` filled in), ``px`` (the distinct prices of the L2 rows, ascending: a rank's
    price) and ``ends`` (``message_ends``). Runs share it: nothing may write to its arrays."""

    events: np.ndarray
    px: np.ndarray
    ends: np.ndarray


# prepared flows by content digest, most recently used last; a few: each holds a copy of its flow
_PREPARED: "dict[bytes, L2Prepared]" = {}
PREPARED_CACHE_SIZE = 4


def prepare(flow: L2Flow) -> L2Prepared:
    """Return the ``L2Prepared`` of ``flow``, built once per content and kept in memory (the
    last ``PREPARED_CACHE_SIZE`` flows), so repeated backtests on the same data do not merge,
    sort and rank it again. The key is a 128-bit xxhash of the rows' and trades' bytes, so a
    changed array is a new key. Raises UsageError as ``l2_events``."""
    import xxhash
    h = xxhash.xxh3_128()
    for a in (flow.l2, flow.trades):
        if isinstance(a, np.ndarray):
            h.update(str(a.dtype).encode())
            h.update(np.ascontiguousarray(a).view(np.uint8).data if a.size else b"")
    key = h.digest()
    hit = _PREPARED.pop(key, None)
    if hit is None:
        events = l2_events(flow)
        is_depth = events["kind"] == EV_DEPTH
        p = np.sort(events["price"][is_depth])
        px = p[np.concatenate(([True], p[1:] != p[:-1]))] if len(p) else p
        events["rank"][is_depth] = np.searchsorted(px, events["price"][is_depth])
        # why still writable: the kernels take ``events`` and ``px``, and numba compiles a
        # read-only array as another type (a second compilation of every L2 kernel)
        ends = message_ends(events)
        ends.flags.writeable = False
        hit = L2Prepared(events, px, ends)
        while len(_PREPARED) >= PREPARED_CACHE_SIZE:
            _PREPARED.pop(next(iter(_PREPARED)))
    _PREPARED[key] = hit
    return hit


# -- the aggregate book: quantities indexed by price rank ----------------------------------
# ``px`` holds every distinct price the L2 rows name, ascending; ``bqty[side, r]`` is the level
# total at px[r] (0: no level), ``best[side]`` the rank of the best level (-1: empty side). A
# price the data never names has no market level, ever. Setting a level is O(1); removing the
# best scans to the next occupied rank (the prices near the touch: a short scan).

@njit(cache=True)
def _rank(px, price):
    """The rank of ``price`` in ``px``, or -1 if the data never names it."""
    r = np.searchsorted(px, price)
    return r if r < len(px) and px[r] == price else -1


@njit(cache=True)
def _level_qty(px, bqty, side, price):
    r = _rank(px, price)
    return bqty[side, r] if r >= 0 else 0


@njit(cache=True)
def _next_level(bqty, side, r):
    """The next occupied rank after r going away from the touch (-1: none)."""
    if side == 0:
        r -= 1
        while r >= 0 and bqty[0, r] == 0:
            r -= 1
        return r
    r += 1
    n = bqty.shape[1]
    while r < n and bqty[1, r] == 0:
        r += 1
    return r if r < n else -1


@njit(cache=True)
def _set_rank(bqty, best, side, r, qty):
    """Set the level at rank r to ``qty`` (0 removes it); return the old total."""
    old = bqty[side, r]
    bqty[side, r] = qty
    if qty > 0:
        if best[side] < 0 or (r > best[side] if side == 0 else r < best[side]):
            best[side] = r
    elif r == best[side]:
        best[side] = _next_level(bqty, side, r)
    return old


@njit(cache=True)
def read_top(px, bqty, best, out):
    """Write [bid, bid_qty, ask, ask_qty] into ``out`` (0, 0 for an empty side)."""
    for side in range(2):
        r = best[side]
        out[2 * side] = px[r] if r >= 0 else 0
        out[2 * side + 1] = bqty[side, r] if r >= 0 else 0


# -- outputs -------------------------------------------------------------------------------

@njit(cache=True)
def _event(se, scnt, st, oid, ev, reason, filled, leaves):
    e = se[scnt[1]]
    e.seq = st[T_SEQ]
    e.ts = st[T_TS]
    e.order_id = np.uint64(oid)
    e.filled_qty = filled
    e.leaves_qty = leaves
    e.symbol = np.uint32(st[T_SYMBOL])
    e.event = ev
    e.reason = reason
    scnt[1] += 1


@njit(cache=True)
def _fill(sf, scnt, st, trade_id, price, qty, side, oid, trader, aggressor):
    f = sf[scnt[0]]
    f.seq = st[T_SEQ]
    f.ts = st[T_TS]
    f.trade_id = trade_id
    f.price = price
    f.qty = qty
    f.symbol = np.uint32(st[T_SYMBOL])
    f.aggressor_side = aggressor
    if side == 0:
        f.buy_order_id = np.uint64(oid)
        f.buy_trader = np.uint32(trader)
        f.sell_order_id = 0
        f.sell_trader = 0
    else:
        f.sell_order_id = np.uint64(oid)
        f.sell_trader = np.uint32(trader)
        f.buy_order_id = 0
        f.buy_trader = 0
    scnt[0] += 1


@njit(cache=True)
def _fill_resting(so, r, qty, price, trade_id, aggressor, sf, se, scnt, st, trader):
    """Fill live order r by ``qty`` at ``price``; returns True if it is now done."""
    so[r, O_LEAVES] -= qty
    so[r, O_FILLED] += qty
    _fill(sf, scnt, st, trade_id, price, qty, so[r, O_SIDE], so[r, O_ID], trader, aggressor)
    done = so[r, O_LEAVES] == 0
    _event(se, scnt, st, so[r, O_ID], Event.FILLED if done else Event.PARTIAL, Reason.NONE,
           so[r, O_FILLED], so[r, O_LEAVES])
    return done


@njit(cache=True)
def _remove(so, st, r):
    n = st[T_NLIVE]
    for m in range(r, n - 1):
        so[m, :] = so[m + 1, :]
    st[T_NLIVE] = n - 1


@njit(cache=True)
def _own_ahead(so, st, r):
    """Open quantity of the strategy's live orders before row r at r's side and price."""
    tot = 0
    for m in range(r):
        if so[m, O_SIDE] == so[r, O_SIDE] and so[m, O_PRICE] == so[r, O_PRICE]:
            tot += so[m, O_LEAVES]
    return tot


@njit(cache=True)
def _expire(so, se, scnt, st, ts):
    """Expire every live order whose O_EXPIRE is at or before ``ts`` (CANCELLED/EXPIRED, in
    order of (expiry, order id) as the engine does) and recompute T_NEXT_EXP. The caller made
    room for one event per live order."""
    while st[T_NEXT_EXP] <= ts:
        best = -1
        for r in range(st[T_NLIVE]):
            x = so[r, O_EXPIRE]
            if x > 0 and x <= ts and (best < 0 or x < so[best, O_EXPIRE] or
                                      (x == so[best, O_EXPIRE] and so[r, O_ID] < so[best, O_ID])):
                best = r
        if best >= 0:
            _event(se, scnt, st, so[best, O_ID], Event.CANCELLED, Reason.EXPIRED,
                   so[best, O_FILLED], 0)
            _remove(so, st, best)
        nxt = _NEVER
        for r in range(st[T_NLIVE]):
            if so[r, O_EXPIRE] > 0:
                nxt = min(nxt, so[r, O_EXPIRE])
        st[T_NEXT_EXP] = nxt


def day_expiry(ts: int, close: int) -> int:
    """The expiry of a DAY order entered at ``ts``: the first instant after ``ts`` that is
    ``close`` ns after midnight UTC (as the engine's session close)."""
    return _day_expiry(np.int64(ts), np.int64(close))


@njit(cache=True)
def _day_expiry(ts, close):
    k = (ts - close) // _DAY_NS
    return close + (k + 1) * _DAY_NS


# -- market events -------------------------------------------------------------------------

@njit(cache=True)
def _market_event(e, px, bqty, best, so, sf, se, scnt, st, trader):
    """Apply one market event; return the number of strategy fills it made."""
    nf0 = scnt[0]
    if e.kind == EV_DEPTH:
        side = np.int64(e.side)
        old = _set_rank(bqty, best, side, e.rank, e.qty)
        r = 0
        while r < st[T_NLIVE]:
            if so[r, O_SIDE] == side and so[r, O_PRICE] == e.price:
                # the row reports the level after the trades seen since its last row: only the
                # rest of a decrease is cancellation
                traded = so[r, O_TRADED]
                so[r, O_TRADED] = 0
                cancel = old - e.qty - traded
                a = so[r, O_AHEAD]
                if cancel > 0:
                    a = ahead_after_decrease(st[T_MODEL], a, cancel, old - traded)
                cap = e.qty + _own_ahead(so, st, r)
                so[r, O_AHEAD] = min(max(a, 0), cap)
            elif (st[T_FILLS] & CROSS_FILLS) != 0 and so[r, O_SIDE] != side and e.qty > old \
                    and (e.price <= so[r, O_PRICE] if side == 1 else e.price >= so[r, O_PRICE]):
                # the other side's book moved onto or through the order: the quantity it added
                # there would have traded with the order first (a fill at the order's price)
                q = min(so[r, O_LEAVES], e.qty - old)
                tid = st[T_TAKE_ID]
                st[T_TAKE_ID] = tid + 1
                if _fill_resting(so, r, q, so[r, O_PRICE], tid, side, sf, se, scnt, st, trader):
                    _remove(so, st, r)
                    continue
            r += 1
        return scnt[0] - nf0
    # a trade: the resting side is the one opposite the aggressor
    rest = 1 - np.int64(e.side)
    r = 0
    while r < st[T_NLIVE]:
        if so[r, O_SIDE] != rest:
            r += 1
            continue
        p = so[r, O_PRICE]
        through = (e.price > p) if rest == 1 else (e.price < p)
        q = 0
        if through:
            so[r, O_AHEAD] = 0
            q = so[r, O_LEAVES] if (st[T_FILLS] & WHOLE_ON_THROUGH) != 0 else \
                min(so[r, O_LEAVES], e.qty)
        elif e.price == p:
            so[r, O_TRADED] += e.qty
            a = so[r, O_AHEAD] - e.qty
            if a < 0:
                q = min(so[r, O_LEAVES], -a)
                a = 0
            so[r, O_AHEAD] = a
        if q > 0 and _fill_resting(so, r, q, p, e.trade_id, e.side, sf, se, scnt, st, trader):
            _remove(so, st, r)
            continue
        r += 1
    return scnt[0] - nf0


@njit(cache=True)
def advance_l2(ev, i, stop, px, bqty, best, so, sf, se, scnt, st, trader, stop_on_fill):
    """Apply market events ev[i:stop]; return (status, next i). HIT: ev[next i - 1] filled the
    strategy (only with ``stop_on_fill``); OK: reached ``stop``; NEED_STRAT: grow sf/se first."""
    while i < stop:
        need = 2 * st[T_NLIVE] + 1    # an expiry and a fill per live order at most
        if scnt[0] + need > len(sf) or scnt[1] + need > len(se):
            st[T_NEED] = need
            return NEED_STRAT, i
        st[T_SEQ] += 1
        st[T_TS] = ev[i].ts
        if st[T_NEXT_EXP] <= ev[i].ts:
            _expire(so, se, scnt, st, ev[i].ts)
        nf = _market_event(ev[i], px, bqty, best, so, sf, se, scnt, st, trader)
        i += 1
        if nf > 0 and stop_on_fill:
            return HIT, i
    return OK, i


# -- strategy messages ---------------------------------------------------------------------

@njit(cache=True)
def _crosses(px, bqty, best, side, price, market):
    r = best[1 - side]
    if r < 0:
        return False
    if market:
        return True
    return price >= px[r] if side == 0 else price <= px[r]


@njit(cache=True)
def _available(px, bqty, best, side, price, market, want):
    """Quantity the opposite side offers at ``price`` or better (stops counting at ``want``)."""
    opp = 1 - side
    tot = 0
    r = best[opp]
    while r >= 0:
        if not market and ((side == 0 and px[r] > price) or (side == 1 and px[r] < price)):
            break
        tot += bqty[opp, r]
        if tot >= want:
            break
        r = _next_level(bqty, opp, r)
    return tot


@njit(cache=True)
def _levels_taken(px, bqty, best, side, price, market, qty):
    """How many opposite levels a take of ``qty`` at ``price`` would touch (its fill count)."""
    opp = 1 - side
    n = 0
    got = 0
    r = best[opp]
    while r >= 0 and got < qty:
        if not market and ((side == 0 and px[r] > price) or (side == 1 and px[r] < price)):
            break
        got += bqty[opp, r]
        n += 1
        r = _next_level(bqty, opp, r)
    return n


@njit(cache=True)
def _take(px, bqty, best, side, price, market, oid, qty, filled, sf, se, scnt, st, trader):
    """Take up to ``qty`` from the opposite levels, best first; return the quantity filled."""
    opp = 1 - side
    got = 0
    while got < qty and best[opp] >= 0:
        r = best[opp]
        p = px[r]
        if not market and ((side == 0 and p > price) or (side == 1 and p < price)):
            break
        q = min(qty - got, bqty[opp, r])
        _set_rank(bqty, best, opp, r, bqty[opp, r] - q)
        got += q
        tid = st[T_TAKE_ID]
        st[T_TAKE_ID] = tid + 1
        _fill(sf, scnt, st, tid, p, q, side, oid, trader, side)
        _event(se, scnt, st, oid, Event.FILLED if got == qty else Event.PARTIAL, Reason.NONE,
               filled + got, qty - got)
    return got


@njit(cache=True)
def _rest(so, st, px, bqty, best, oid, side, price, leaves, filled, expire):
    r = st[T_NLIVE]
    so[r, O_ID] = oid
    so[r, O_SIDE] = side
    so[r, O_PRICE] = price
    so[r, O_LEAVES] = leaves
    so[r, O_FILLED] = filled
    so[r, O_EXPIRE] = expire
    so[r, O_TRADED] = 0
    if expire > 0:
        st[T_NEXT_EXP] = min(st[T_NEXT_EXP], expire)
    st[T_NLIVE] = r + 1
    so[r, O_AHEAD] = _level_qty(px, bqty, side, price) + _own_ahead(so, st, r)


@njit(cache=True)
def _find_live(so, st, oid):
    for r in range(st[T_NLIVE]):
        if so[r, O_ID] == oid:
            return r
    return -1


@njit(cache=True)
def strategy_message(m, px, bqty, best, so, sf, se, scnt, st, trader):
    """Apply one strategy message (ORDER_DTYPE row); return OK, NEED_STRAT or NEED_LIVE (then
    nothing was applied)."""
    # room: an expiry per live order, then a fill and an event per level the order can take
    # (counted on the book as it is: expiries do not change it), plus its own reports
    need = st[T_NLIVE] + 4
    if m.kind != Kind.CANCEL:
        side = np.int64(m.side) & 1
        if m.kind == Kind.MODIFY:      # a modify takes on its order's side, whatever it says
            r = _find_live(so, st, np.int64(m.order_id))
            side = so[r, O_SIDE] if r >= 0 else side
        need += _levels_taken(px, bqty, best, side, m.price, m.order_type == OrderType.MARKET,
                              m.qty)
    if scnt[0] + need > len(sf) or scnt[1] + need > len(se):
        st[T_NEED] = need
        return NEED_STRAT
    if st[T_NLIVE] + 1 > so.shape[0]:
        return NEED_LIVE
    st[T_SEQ] += 1
    st[T_TS] = m.ts
    if st[T_NEXT_EXP] <= m.ts:
        _expire(so, se, scnt, st, m.ts)
    oid = np.int64(m.order_id)
    side = np.int64(m.side)
    market = m.order_type == OrderType.MARKET
    if m.kind == Kind.CANCEL:
        r = _find_live(so, st, oid)
        if r < 0:
            _event(se, scnt, st, oid, Event.REJECTED, Reason.UNKNOWN_ID, 0, 0)
        else:
            _event(se, scnt, st, oid, Event.CANCELLED, Reason.USER_CANCEL, so[r, O_FILLED], 0)
            _remove(so, st, r)
        return OK
    if m.kind == Kind.MODIFY:
        r = _find_live(so, st, oid)
        if r < 0:
            _event(se, scnt, st, oid, Event.REJECTED, Reason.UNKNOWN_ID, 0, 0)
            return OK
        if m.qty <= 0 or m.price <= 0:
            _event(se, scnt, st, oid, Event.REJECTED, Reason.BAD_QTY if m.qty <= 0 else
                   Reason.BAD_PRICE, 0, 0)
            return OK
        side = so[r, O_SIDE]
        filled = so[r, O_FILLED]
        expire = so[r, O_EXPIRE]     # a modified order keeps its own expiry
        requeue = m.price != so[r, O_PRICE] or m.qty > so[r, O_LEAVES]
        _event(se, scnt, st, oid, Event.MODIFIED, Reason.NONE, filled, m.qty)
        if not requeue:
            so[r, O_LEAVES] = m.qty
            return OK
        _remove(so, st, r)
        leaves = m.qty
        if _crosses(px, bqty, best, side, m.price, False):
            got = _take(px, bqty, best, side, m.price, False, oid, leaves, filled, sf, se, scnt,
                        st, trader)
            leaves -= got
            filled += got
        if leaves > 0:
            _rest(so, st, px, bqty, best, oid, side, m.price, leaves, filled, expire)
        return OK
    # NEW: the engine's checks, in its order (docs/semantics.md), for what an L2 book can do
    rests = m.tif == Tif.GTC or m.tif == Tif.DAY or m.tif == Tif.GTD
    reason = Reason.NONE
    if m.kind != Kind.NEW:
        reason = Reason.BAD_KIND
    elif m.side > 1:
        reason = Reason.BAD_SIDE
    elif m.order_type > 1:
        reason = Reason.BAD_ORDER_TYPE     # stops: refused by the L2 driver before they are sent
    elif m.tif > Tif.GTD or (market and (m.tif == Tif.DAY or m.tif == Tif.GTD)):
        reason = Reason.BAD_TIF
    elif m.qty <= 0:
        reason = Reason.BAD_QTY
    elif not market and m.price <= 0:
        reason = Reason.BAD_PRICE
    elif (m.flags & _POST_ONLY) != 0 and (market or not rests):
        reason = Reason.BAD_FLAGS
    elif m.display_qty != 0:
        reason = Reason.BAD_DISPLAY_QTY    # icebergs: refused by the L2 driver too
    elif m.min_qty < 0 or (m.min_qty > 0 and (m.min_qty > m.qty or m.tif == Tif.FOK)):
        reason = Reason.BAD_MIN_QTY
    elif (m.tif == Tif.GTD and m.expire_ts <= m.ts) or (m.tif != Tif.GTD and m.expire_ts != 0):
        reason = Reason.BAD_EXPIRY
    elif _find_live(so, st, oid) >= 0:
        reason = Reason.DUPLICATE_ID
    if reason != Reason.NONE:
        _event(se, scnt, st, oid, Event.REJECTED, reason, 0, 0)
        return OK
    crosses = _crosses(px, bqty, best, side, m.price, market)
    if crosses and (m.flags & _POST_ONLY) != 0:
        _event(se, scnt, st, oid, Event.REJECTED, Reason.POST_ONLY_WOULD_CROSS, 0, 0)
        return OK
    if m.tif == Tif.FOK and _available(px, bqty, best, side, m.price, market, m.qty) < m.qty:
        _event(se, scnt, st, oid, Event.REJECTED, Reason.FOK_CANNOT_FILL, 0, 0)
        return OK
    if m.min_qty > 0 and _available(px, bqty, best, side, m.price, market,
                                    m.min_qty) < m.min_qty:
        _event(se, scnt, st, oid, Event.REJECTED, Reason.MIN_QTY_CANNOT_FILL, 0, 0)
        return OK
    _event(se, scnt, st, oid, Event.ACCEPTED, Reason.NONE, 0, m.qty)
    got = 0
    if crosses:
        got = _take(px, bqty, best, side, m.price, market, oid, m.qty, 0, sf, se, scnt, st,
                    trader)
    leaves = m.qty - got
    if leaves > 0:
        if market or not rests:
            _event(se, scnt, st, oid, Event.CANCELLED,
                   Reason.NO_LIQUIDITY if market else Reason.IOC_UNFILLED, got, 0)
        else:
            expire = m.expire_ts if m.tif == Tif.GTD else \
                _day_expiry(m.ts, st[T_CLOSE]) if m.tif == Tif.DAY else 0
            _rest(so, st, px, bqty, best, oid, side, m.price, leaves, got, expire)
    return OK


@njit(cache=True)
def advance_orders(olog, i, stop, px, bqty, best, so, sf, se, scnt, st, trader):
    """Apply strategy messages olog[i:stop]; return (status, next i)."""
    while i < stop:
        status = strategy_message(olog[i], px, bqty, best, so, sf, se, scnt, st, trader)
        if status != OK:
            return status, i
        i += 1
    return OK, i


class L2Sim:
    """The replayed aggregate book and the strategy's live orders, with the strategy's outputs.

    Quacks like the parts of ``Engine``/``kernels.EngineArrays`` the backtest driver uses:
    ``seq``, ``depth(symbol, levels)``, ``sf``/``se``/``scnt`` (strategy fills, events, counts).
    """

    def __init__(self, events: np.ndarray, model, trader: int, symbol: int = 0,
                 session_close: int = 0, px: np.ndarray | None = None):
        """``events`` from ``l2_events`` (its ``rank`` column is filled in here unless ``px``,
        the distinct prices its ranks index, is given: ``prepare`` did it); ``model`` a queue
        model or its name (UsageError for an unknown one); ``session_close``: when DAY orders
        expire (ns after midnight UTC, as the engine's symbol option)."""
        model = as_queue_model(model)
        if px is None:
            is_depth = events["kind"] == EV_DEPTH
            p = np.sort(events["price"][is_depth])
            px = p[np.concatenate(([True], p[1:] != p[:-1]))] if len(p) else p
            events["rank"][is_depth] = np.searchsorted(px, events["price"][is_depth])
        self.px = px
        self.bqty = np.zeros((2, max(len(self.px), 1)), np.int64)
        self.best = np.full(2, -1, np.int64)
        self.so = np.zeros((16, O_COLS), np.int64)
        self.sf = np.zeros(1024, FILL_DTYPE)
        self.se = np.zeros(2048, EVENT_DTYPE)
        self.scnt = np.zeros(2, np.int64)
        self.st = np.zeros(T_SIZE, np.int64)
        self.st[T_TAKE_ID] = TAKE_ID_BASE
        self.st[T_MODEL] = model.code
        self.st[T_FILLS] = model.fills
        self.st[T_SYMBOL] = symbol
        self.st[T_NEXT_EXP] = _NEVER
        self.st[T_CLOSE] = int(session_close)
        self.trader = int(trader)

    @property
    def seq(self) -> int:
        """The seq of the last event or strategy message applied (0 before any)."""
        return int(self.st[T_SEQ])

    def grow(self, status: int) -> None:
        """Make room for what ``status`` names; RuntimeError for an unknown status (a bug)."""
        if status == NEED_STRAT:
            need = int(self.st[T_NEED])     # what the kernel asked for, no more
            self.sf = grow_output(self.sf, int(self.scnt[0]), int(self.scnt[0]) + need)
            self.se = grow_output(self.se, int(self.scnt[1]), int(self.scnt[1]) + need)
        elif status == NEED_LIVE:
            so = np.zeros((2 * len(self.so), O_COLS), np.int64)
            so[: len(self.so)] = self.so
            self.so = so
        else:  # pragma: no cover - a kernel/driver mismatch is a bug, not input
            raise RuntimeError(f"l2queue kernel returned unknown status {status}")

    def advance(self, events, i: int, stop: int, stop_on_fill: bool):
        """Apply market events [i, stop) (growing as needed); return (status OK/HIT, next i)."""
        while True:
            status, i = advance_l2(events, i, stop, self.px, self.bqty, self.best, self.so,
                                   self.sf, self.se, self.scnt, self.st, self.trader, stop_on_fill)
            if status in (OK, HIT):
                return status, i
            self.grow(status)

    def apply_orders(self, olog, i: int, stop: int) -> int:
        """Apply strategy messages olog[i:stop] (growing as needed); return ``stop``."""
        while True:
            status, i = advance_orders(olog, i, stop, self.px, self.bqty, self.best, self.so,
                                       self.sf, self.se, self.scnt, self.st, self.trader)
            if status == OK:
                return i
            self.grow(status)

    def read_top(self, out: np.ndarray) -> np.ndarray:
        """Write [bid, bid_qty, ask, ask_qty] into ``out`` and return it."""
        read_top(self.px, self.bqty, self.best, out)
        return out

    def depth(self, symbol=0, levels: int = 10):
        """Return (bids, asks) as DEPTH_DTYPE arrays, best first (count: 1 per occupied level)."""
        sides = []
        for side in (Side.BUY, Side.SELL):
            occ = np.nonzero(self.bqty[side])[0]
            occ = occ[::-1] if side == Side.BUY else occ      # best first
            occ = occ[: max(levels, 0)]
            out = np.zeros(len(occ), DEPTH_DTYPE)
            out["price"] = self.px[occ]
            out["qty"] = self.bqty[side, occ]
            out["count"] = 1
            sides.append(out)
        return sides[0], sides[1]

    def ahead(self, order_id: int) -> int | None:
        """The queue quantity ahead of a live strategy order (None if it is not live)."""
        n = int(self.st[T_NLIVE])
        rows = np.nonzero(self.so[:n, O_ID] == order_id)[0]
        return int(self.so[rows[0], O_AHEAD]) if len(rows) else None

