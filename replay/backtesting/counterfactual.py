"""What-if replay: how a strategy changed the market it traded in.

``whatif(flow, strategy)`` runs history twice through fresh engines with the same options: once
the market's messages alone (the baseline), once merged with the strategy's messages exactly as
the backtest merged them (each at the engine seq it got). Comparing the two:

- **Displaced trades**: market-vs-market fills are keyed by the pair of market order ids
  (buy_order_id, sell_order_id) and their quantities summed per pair; a pair that traded less
  with the strategy than without it was displaced (``displaced_qty``), a pair that traded more
  (or only) with it was added (``added_qty``). Fills with the strategy on a side are not market
  fills.
- **Queue positions taken**: each time a strategy order joined a queue and rested (a NEW, or a
  MODIFY that changed the price or raised the open quantity: those lose priority), the market
  NEW orders at the same symbol, side and price that arrived while it was resting are behind it;
  ``n_behind_filled`` counts those that filled afterwards (any fill after they arrived), with
  their filled quantity in both runs (``behind_filled_qty`` with, ``behind_filled_qty_base``
  without the strategy).
- **Price differences**: for every market order that filled in either run, its filled quantity
  and volume-weighted price in both runs (fills against the strategy count for the market order);
  ``price_diff = with_vwap - base_vwap`` (positive: a buyer paid more, a seller got more).

Invariant: the with-strategy run reproduces the backtest (the engine is deterministic); the
strategy fills it makes are checked byte for byte against ``BacktestResult.fills`` and a mismatch
raises RuntimeError (a bug, not a user error).

Limits: market MODIFYs that re-queue are not counted as "behind" (only NEWs); queue positions are
by arrival within a price level, which is exact on L3 flow only (L2-only flow, whose backtest
does not run through the engine, is refused with UsageError).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.errors import UsageError
from exsim.exchange.schema import ORDER_DTYPE, Event, Kind, Side

from exsim.replay.backtesting.driver import DEFAULT_TRADER, backtest
from exsim.replay.backtesting.result import BacktestResult

__all__ = ["whatif", "WhatIf", "PAIR_DTYPE", "MARKET_ORDER_DTYPE", "QUEUE_DTYPE"]

# one market-vs-market order pair whose traded quantity differs between the runs
PAIR_DTYPE = np.dtype([
    ("buy_order_id", "<u8"), ("sell_order_id", "<u8"),
    ("base_qty", "<i8"),       # lots the pair traded without the strategy
    ("with_qty", "<i8"),       # ... with it
    ("base_ts", "<i8"),        # first fill ts without the strategy (-1: none)
    ("with_ts", "<i8"),        # ... with it (-1: none)
])

# one market order whose fills differ between the runs
MARKET_ORDER_DTYPE = np.dtype([
    ("order_id", "<u8"), ("side", "u1"),
    ("base_qty", "<i8"), ("base_vwap", "<f8"),      # NaN when it did not fill
    ("with_qty", "<i8"), ("with_vwap", "<f8"),
    ("vs_strategy_qty", "<i8"),                     # lots of with_qty traded against the strategy
    ("price_diff", "<f8"),                          # with_vwap - base_vwap (NaN unless both filled)
])

# one queue entry of a strategy order that rested
QUEUE_DTYPE = np.dtype([
    ("order_id", "<u8"), ("side", "u1"), ("price", "<i8"),
    ("leaves", "<i8"),                   # open quantity when it joined
    ("entry_seq", "<i8"), ("entry_ts", "<i8"),
    ("end_seq", "<i8"),                  # seq it left the queue (filled, cancelled, re-queued); -1: never
    ("filled_qty", "<i8"),               # strategy lots filled from this entry
    ("n_behind", "<i8"),                 # market NEWs that joined behind it while it rested
    ("n_behind_filled", "<i8"),          # ... of those, how many filled afterwards
    ("behind_filled_qty", "<i8"),        # their filled lots with the strategy
    ("behind_filled_qty_base", "<i8"),   # the same orders' filled lots without it
])


@dataclass
class WhatIf:
    """The two runs compared (see the module docstring); ``summary`` holds plain ints/floats."""

    pairs: np.ndarray          # PAIR_DTYPE: displaced (base > with) and added (with > base) pairs
    orders: np.ndarray         # MARKET_ORDER_DTYPE: market orders whose fills changed
    queue: np.ndarray          # QUEUE_DTYPE: the strategy's resting queue entries
    base_fills: np.ndarray     # FILL_DTYPE: all fills without the strategy
    with_fills: np.ndarray     # FILL_DTYPE: all fills with it
    backtest: BacktestResult
    summary: dict = field(default_factory=dict)

    @property
    def displaced(self) -> np.ndarray:
        """Pairs that traded less (or not at all) because of the strategy."""
        return self.pairs[self.pairs["base_qty"] > self.pairs["with_qty"]]

    @property
    def added(self) -> np.ndarray:
        """Pairs that traded more (or only) because of the strategy."""
        return self.pairs[self.pairs["with_qty"] > self.pairs["base_qty"]]


def whatif(flow, strategy, *, symbol=None, engine_options=None, **backtest_kwargs) -> WhatIf:
    """Backtest ``strategy`` on ``flow``, replay the market with and without it; return ``WhatIf``.

    Arguments are those of ``replay.backtesting.driver.backtest`` (``latency``, ``trader``, ``fees_bps``,
    ``fast``, ``symbols``; not ``store_dir``). Raises UsageError as ``backtest`` does (bad flow, symbol,
    strategy, options) and RuntimeError if the replay does not reproduce the backtest's fills.
    """
    from exsim.replay.backtesting.driver import _load_flow, engine_for, symbol_specs

    if "store_dir" in backtest_kwargs:
        raise UsageError("whatif does not journal runs (store_dir); use backtest for that")
    from exsim.replay.backtesting.l2queue import L2Flow
    orders, _, _, _, specs = _load_flow(flow)
    if isinstance(orders, L2Flow):
        raise UsageError("whatif needs L3 flow (orders the engine can re-match); L2-only flow "
                         "has no market orders to displace")
    n_sym = int(orders["symbol"].max()) + 1 if len(orders) else 1
    # the caller's symbols, else the flow's with every option its source gives
    given = backtest_kwargs.pop("symbols", None)
    if given is not None or specs is None:
        specs = symbol_specs(given, n_sym)

    def engine():
        return engine_for(specs, engine_options)

    if symbol is not None:
        symbol = engine().symbol_id(symbol)
    bt = backtest(orders, strategy, symbol=symbol, engine_options=engine_options, symbols=specs,
                  **backtest_kwargs)
    trader = int(backtest_kwargs.get("trader", DEFAULT_TRADER))
    msgs = np.ascontiguousarray(orders)
    merged = np.zeros(len(msgs) + len(bt.orders), ORDER_DTYPE)
    is_strat = np.zeros(len(merged), bool)
    is_strat[bt.order_seq - 1] = True
    merged[is_strat] = bt.orders
    merged[~is_strat] = msgs
    base = engine().process(msgs)
    with_ = engine().process(merged)
    strat_rows = (with_.fills["buy_trader"] == trader) | (with_.fills["sell_trader"] == trader)
    if with_.fills[strat_rows].tobytes() != bt.fills.tobytes():
        raise RuntimeError("what-if replay does not reproduce the backtest's strategy fills")

    pairs = _pairs(base.fills, with_.fills[~strat_rows])
    morders, price_summary = _market_orders(base.fills, with_.fills, trader)
    queue = _queue(merged, is_strat, with_, base.fills, trader)
    mm = with_.fills[~strat_rows]
    summary = {
        "displaced_qty": int(np.maximum(pairs["base_qty"] - pairs["with_qty"], 0).sum()),
        "added_qty": int(np.maximum(pairs["with_qty"] - pairs["base_qty"], 0).sum()),
        "n_displaced_pairs": int((pairs["base_qty"] > pairs["with_qty"]).sum()),
        "n_added_pairs": int((pairs["with_qty"] > pairs["base_qty"]).sum()),
        "market_volume_base": int(base.fills["qty"].sum()),
        "market_volume_with": int(mm["qty"].sum()),
        "strategy_volume": int(bt.fills["qty"].sum()),
        "n_market_orders_changed": int(len(morders)),
        **price_summary,
        "n_queue_entries": int(len(queue)),
        "n_behind": int(queue["n_behind"].sum()),
        "n_behind_filled": int(queue["n_behind_filled"].sum()),
        "behind_filled_qty": int(queue["behind_filled_qty"].sum()),
        "behind_filled_qty_base": int(queue["behind_filled_qty_base"].sum()),
    }
    return WhatIf(pairs, morders, queue, base.fills, with_.fills, bt, summary)


def _pair_table(fills) -> dict:
    """{(buy_id, sell_id): [qty, first ts]}."""
    out: dict = {}
    for b, s, q, t in zip(fills["buy_order_id"].tolist(), fills["sell_order_id"].tolist(),
                          fills["qty"].tolist(), fills["ts"].tolist()):
        e = out.setdefault((b, s), [0, t])
        e[0] += q
    return out


def _pairs(base_fills, with_mm_fills) -> np.ndarray:
    """PAIR_DTYPE rows of the pairs whose traded quantity differs, sorted by (buy, sell) id."""
    b, w = _pair_table(base_fills), _pair_table(with_mm_fills)
    keys = sorted(k for k in set(b) | set(w) if b.get(k, [0])[0] != w.get(k, [0])[0])
    out = np.zeros(len(keys), PAIR_DTYPE)
    for i, k in enumerate(keys):
        bq, bt = b.get(k, (0, -1))
        wq, wt = w.get(k, (0, -1))
        out[i] = (k[0], k[1], bq, wq, bt, wt)
    return out


def _per_order(fills, trader: int) -> dict:
    """{(order_id, side): [qty, notional, qty vs the strategy]} for the market sides of fills."""
    out: dict = {}
    for side, id_col, tr_col, other in ((Side.BUY, "buy_order_id", "buy_trader", "sell_trader"),
                                        (Side.SELL, "sell_order_id", "sell_trader", "buy_trader")):
        mine = fills[fills[tr_col] != trader]
        for oid, q, p, o in zip(mine[id_col].tolist(), mine["qty"].tolist(),
                                mine["price"].tolist(), mine[other].tolist()):
            e = out.setdefault((oid, int(side)), [0, 0, 0])
            e[0] += q
            e[1] += q * p
            if o == trader:
                e[2] += q
    return out


def _market_orders(base_fills, with_fills, trader: int):
    """MARKET_ORDER_DTYPE rows of the changed market orders, and the price summary."""
    b, w = _per_order(base_fills, trader), _per_order(with_fills, trader)
    rows, diff = [], {Side.BUY: [0.0, 0], Side.SELL: [0.0, 0]}
    for key in sorted(set(b) | set(w)):
        bq, bn, _ = b.get(key, (0, 0, 0))
        wq, wn, vs = w.get(key, (0, 0, 0))
        bv = bn / bq if bq else np.nan
        wv = wn / wq if wq else np.nan
        d = wv - bv if bq and wq else np.nan
        if bq and wq:
            weight = min(bq, wq)
            diff[Side(key[1])][0] += d * weight
            diff[Side(key[1])][1] += weight
        if bq != wq or bn * wq != wn * bq or vs:
            rows.append((key[0], key[1], bq, bv, wq, wv, vs, d))
    out = np.array(rows, MARKET_ORDER_DTYPE) if rows else np.zeros(0, MARKET_ORDER_DTYPE)
    summary = {f"{name}_price_diff": (float(s / n) if n else 0.0)
               for name, (s, n) in (("buy", diff[Side.BUY]), ("sell", diff[Side.SELL]))}
    return out, summary


def _queue(merged, is_strat, with_, base_fills, trader: int) -> np.ndarray:
    """QUEUE_DTYPE rows: the strategy's queue entries that rested, with who queued behind them."""
    ev = with_.events
    strat_ids = set(merged["order_id"][is_strat].tolist())
    entries, open_ = [], {}   # open_: order id -> index in entries
    state: dict = {}          # order id -> (price, leaves)
    for e in ev[np.isin(ev["order_id"], list(strat_ids))]:
        oid, seq, leaves = int(e["order_id"]), int(e["seq"]), int(e["leaves_qty"])
        msg = merged[seq - 1]
        kind = int(e["event"])
        price, prev_leaves = state.get(oid, (0, 0))
        requeue = False
        if kind == Event.ACCEPTED:
            price, requeue = int(msg["price"]), True
        elif kind == Event.MODIFIED and int(msg["order_id"]) == oid:
            requeue = int(msg["price"]) != price or leaves > prev_leaves
            price = int(msg["price"])
        if requeue or leaves == 0 or kind in (Event.CANCELLED, Event.REJECTED):
            if oid in open_:
                entries[open_.pop(oid)][6] = seq
        if requeue and leaves > 0:
            open_[oid] = len(entries)
            entries.append([oid, int(msg["side"]), price, leaves, seq, int(msg["ts"]), -1])
        state[oid] = (price, leaves)
    # rested: still open after the events of its own seq
    rested = [en for en in entries if en[6] != en[4]]
    out = np.zeros(len(rested), QUEUE_DTYPE)
    fills = with_.fills
    fill_qty_with = _qty_by_order(fills)
    fill_qty_base = _qty_by_order(base_fills)
    first_fill_seq = _first_fill_seq(fills)
    mkt_seq = np.arange(1, len(merged) + 1)
    is_new = (~is_strat) & (merged["kind"] == Kind.NEW)
    for i, (oid, side, price, leaves, seq, ts, end) in enumerate(rested):
        stop = end if end > 0 else len(merged) + 1
        sel = is_new & (merged["side"] == side) & (merged["price"] == price) & \
            (merged["symbol"] == merged["symbol"][seq - 1]) & (mkt_seq > seq) & (mkt_seq < stop)
        behind = merged["order_id"][sel].tolist()
        behind_seq = mkt_seq[sel].tolist()
        filled = [b for b, s in zip(behind, behind_seq) if first_fill_seq.get(b, 0) > s]
        mine = fills[((fills["buy_order_id"] == oid) & (fills["buy_trader"] == trader)) |
                     ((fills["sell_order_id"] == oid) & (fills["sell_trader"] == trader))]
        mine = mine[(mine["seq"] >= seq) & (mine["seq"] <= stop)]
        out[i] = (oid, side, price, leaves, seq, ts, end, int(mine["qty"].sum()), len(behind),
                  len(filled), sum(fill_qty_with.get(b, 0) for b in filled),
                  sum(fill_qty_base.get(b, 0) for b in filled))
    return out


def _qty_by_order(fills) -> dict:
    """{order id: lots filled} over both sides of ``fills``."""
    out: dict = {}
    for col in ("buy_order_id", "sell_order_id"):
        for oid, q in zip(fills[col].tolist(), fills["qty"].tolist()):
            out[oid] = out.get(oid, 0) + q
    return out


def _first_fill_seq(fills) -> dict:
    """{order id: seq of its first fill}."""
    out: dict = {}
    for col in ("buy_order_id", "sell_order_id"):
        for oid, s in zip(fills[col].tolist(), fills["seq"].tolist()):
            if oid not in out or s < out[oid]:
                out[oid] = s
    return out

