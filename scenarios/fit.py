"""Fitting a generated flow to its symbols' trading options: lots, minimums and tick tables.

A generator draws sizes and prices without knowing a symbol's ``lot_size``, ``min_order_qty`` or
``tick_table`` (docs/semantics.md, "Symbols"), so most of its messages would be rejected
(OFF_LOT, BELOW_MIN_QTY, OFF_TICK). ``fit_to_symbols`` moves every NEW and MODIFY onto what the
symbol accepts:
- ``qty`` and ``display_qty`` (when > 0) go up to the next multiple of the lot, ``qty`` first to
  at least the minimum (so an iceberg's shown part never exceeds its quantity);
- a limit price (LIMIT and STOP_LIMIT) moves onto the tick grid toward the passive side: a buy
  down to the nearest grid price at or below it, a sell up to the nearest at or above it, so a
  passive order stays passive (a buy below the lowest grid price goes up to it);
- a stop trigger (STOP and STOP_LIMIT ``stop_price``) moves away from the market the same way
  for the opposite side: a buy stop up, a sell stop down, so a stop not yet reached stays so.

Invariants: a pure function of its arguments; a symbol with default options (lot 1, minimum 1,
table ``[(1, 1)]``) and every CANCEL row are left byte-identical; prices <= 0 are left as they
are (the engine rejects them as BAD_PRICE).
"""

from __future__ import annotations

import numpy as np

from exsim.exchange.schema import Kind, OrderType, Side

__all__ = ["fit_to_symbols", "grid_down", "grid_up"]


def _rows(table) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(table, np.int64).reshape(-1, 2)
    return t[:, 0], t[:, 1]


def grid_down(price: np.ndarray, table) -> np.ndarray:
    """Return each of ``price`` (int64, >= 1) moved down to the largest price on ``table``'s grid
    (rows (from_price, tick), the first from 1) at or below it, or up to the smallest grid price
    when none is at or below it."""
    froms, ticks = _rows(table)
    p = np.asarray(price, np.int64).copy()
    out = np.zeros_like(p)
    row = np.searchsorted(froms, p, side="right") - 1
    todo = np.ones(len(p), bool)
    for _ in range(len(froms)):
        if not todo.any():
            break
        k = np.flatnonzero(todo)
        r = row[k]
        cand = p[k] - p[k] % ticks[r]
        ok = cand >= froms[r]
        out[k[ok]] = cand[ok]
        todo[k[ok]] = False
        # below this row's first grid price: the largest one of the rows below
        rest = k[~ok]
        p[rest] = froms[row[rest]] - 1
        row[rest] -= 1
        low = rest[row[rest] < 0]
        todo[low] = False
        out[low] = grid_up(np.ones(len(low), np.int64), table)
    return out


def grid_up(price: np.ndarray, table) -> np.ndarray:
    """Return each of ``price`` (int64, >= 1) moved up to the smallest price on ``table``'s grid
    at or above it."""
    froms, ticks = _rows(table)
    p = np.asarray(price, np.int64).copy()
    out = np.zeros_like(p)
    row = np.searchsorted(froms, p, side="right") - 1
    todo = np.ones(len(p), bool)
    last = len(froms) - 1
    for _ in range(len(froms)):
        if not todo.any():
            break
        k = np.flatnonzero(todo)
        r = row[k]
        t = ticks[r]
        cand = (p[k] + t - 1) // t * t
        nxt = froms[np.minimum(r + 1, last)]
        ok = (r == last) | (cand < nxt)
        out[k[ok]] = cand[ok]
        todo[k[ok]] = False
        # past this row's end: the first grid price of the next row
        rest = k[~ok]
        row[rest] += 1
        p[rest] = froms[row[rest]]
    return out


def _round_up(q: np.ndarray, lot: int) -> np.ndarray:
    return (q + lot - 1) // lot * lot


def fit_to_symbols(orders: np.ndarray, specs: list[dict]) -> np.ndarray:
    """Return a copy of ``orders`` (ORDER_DTYPE) with every NEW and MODIFY fitted to the options
    of its symbol in ``specs`` (``Engine.add_symbol`` keyword dicts by symbol id; a missing
    option is the default) as the module docstring says. Messages of symbol ids beyond
    ``specs`` are copied unchanged."""
    out = orders.copy()
    live = (out["kind"] == Kind.NEW) | (out["kind"] == Kind.MODIFY)
    sell = out["side"] == Side.SELL
    otype = out["order_type"]
    for sid, spec in enumerate(specs):
        lot = int(spec.get("lot_size", 1))
        least = int(spec.get("min_order_qty", 1))
        table = spec.get("tick_table") or [(1, 1)]
        if lot == 1 and least == 1 and [tuple(r) for r in table] == [(1, 1)]:
            continue
        m = live & (out["symbol"] == sid)
        if not m.any():
            continue
        q = out["qty"][m]
        out["qty"][m] = np.where(q > 0, _round_up(np.maximum(q, least), lot), q)
        d = out["display_qty"][m]
        out["display_qty"][m] = np.where(d > 0, _round_up(d, lot), d)
        limit = m & ((otype == OrderType.LIMIT) | (otype == OrderType.STOP_LIMIT))
        _to_grid(out, "price", limit, ~sell, table)
        stop = m & ((otype == OrderType.STOP) | (otype == OrderType.STOP_LIMIT))
        _to_grid(out, "stop_price", stop, sell, table)
    return out


def _to_grid(out: np.ndarray, field: str, mask: np.ndarray, down: np.ndarray, table) -> None:
    """Move ``out[field]`` where ``mask`` (and > 0) onto the grid: down where ``down``, else up."""
    pos = mask & (out[field] > 0)
    for sel, fn in ((pos & down, grid_down), (pos & ~down, grid_up)):
        if sel.any():
            out[field][sel] = fn(out[field][sel], table)
