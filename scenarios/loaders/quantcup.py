"""Loader for the QuantCup 2011 scoring feed (``quantcup_score_feed.csv``) → ORDER_DTYPE messages.

Format: a header ``seq,op,order_id,trader,side,price,size,cancel_order_id`` then one line per
message; ``op`` is ``limit`` or ``cancel``. A limit line has ``trader`` ("ID8"), ``side``
(buy|sell), ``price`` (integer ticks) and ``size``; a cancel line has only ``trader`` and
``cancel_order_id``.

Invariants of the output:
- Limit orders take order ids 1..N in feed order (the contest's engines numbered them so; the
  file's own ``order_id`` column must agree and is checked). Cancels name ``cancel_order_id``;
  a cancel of an id that is not live is left in the flow (the engine rejects it with UNKNOWN_ID,
  which is exactly the feed's "does nothing").
- Every limit is LIMIT + GTC with no flags; trader "IDk" becomes trader id k.
- A cancel carries its order's owner (the trader of the limit it names), not the feed's cancel
  ``trader`` (the contest's cancels came from any trader): with ownership on, the engine takes
  the feed exactly as with it off. A cancel of an id never entered keeps its line's trader.
- ``ts`` is the feed's ``seq`` (the feed has no clock): one nanosecond per message.

Known limits: one symbol per call (the feed has one); the symbol id is a parameter.
"""

from __future__ import annotations

import os

import numpy as np

from exsim.exchange.errors import InputError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Side, Tif

from exsim.scenarios.loaders._parse import column_choice, column_int, fill_owners, read_lines, split_columns

__all__ = ["load_quantcup", "QUANTCUP_HEADER"]

QUANTCUP_HEADER = "seq,op,order_id,trader,side,price,size,cancel_order_id"
_LIMIT, _CANCEL = 0, 1


def load_quantcup(path: str | os.PathLike, symbol: int = 0) -> np.ndarray:
    """Read a QuantCup feed file and return its messages as an ORDER_DTYPE array (one row a line).

    Raises InputError (naming the file and line) when the header is not QUANTCUP_HEADER, a line has
    the wrong number of columns, a field that the line's ``op`` needs is missing or not a number,
    a limit's ``order_id`` is not the next id in feed order, or the file has no data line.
    """
    path = os.fspath(path)
    lines = read_lines(path)
    if not lines or lines[0].strip() != QUANTCUP_HEADER:
        got = lines[0][:80] if lines else "an empty file"
        raise InputError(f"{path}, line 1: expected the header {QUANTCUP_HEADER!r}, got {got!r}")
    if len(lines) == 1:
        raise InputError(f"{path}, line 2: expected at least one message after the header, got end of file")
    cols = split_columns(path, lines[1:], 8, 2, QUANTCUP_HEADER)
    n = cols.shape[0]
    op = column_choice(path, cols[:, 1], {"limit": _LIMIT, "cancel": _CANCEL}, 2, "op")
    lim = np.flatnonzero(op == _LIMIT)
    can = np.flatnonzero(op == _CANCEL)

    def ints(rows: np.ndarray, c: int, name: str) -> np.ndarray:
        # Only the rows whose op needs the column are parsed; errors name their file lines.
        return column_int(path, cols[rows, c], 2 + rows, name)

    seq = column_int(path, cols[:, 0], 2, "seq")
    trader_col = cols[:, 3]
    if not np.all(np.char.startswith(trader_col, "ID")):
        i = int(np.flatnonzero(~np.char.startswith(trader_col, "ID"))[0])
        raise InputError(f"{path}, line {2 + i}: column 'trader' should look like 'ID8', got {str(trader_col[i])!r}")
    trader = column_int(path, np.char.lstrip(trader_col, "ID"), 2, "trader")

    out = np.zeros(n, dtype=ORDER_DTYPE)
    out["ts"] = seq
    out["symbol"] = symbol
    out["trader"] = trader
    out["order_type"] = OrderType.LIMIT
    out["tif"] = Tif.GTC

    ids = ints(lim, 2, "order_id")
    expected = np.arange(1, lim.size + 1)
    if not np.array_equal(ids, expected):
        k = int(np.flatnonzero(ids != expected)[0])
        raise InputError(
            f"{path}, line {2 + int(lim[k])}: limit order_id should be {k + 1} (ids are 1..N in feed order), got {ids[k]}"
        )
    side = column_choice(path, cols[lim, 4], {"buy": int(Side.BUY), "sell": int(Side.SELL)}, 2 + lim, "side")
    out["kind"][lim] = Kind.NEW
    out["order_id"][lim] = ids
    out["side"][lim] = side
    out["price"][lim] = ints(lim, 5, "price")
    out["qty"][lim] = ints(lim, 6, "size")
    out["kind"][can] = Kind.CANCEL
    out["order_id"][can] = ints(can, 7, "cancel_order_id")
    fill_owners(out)
    return out
