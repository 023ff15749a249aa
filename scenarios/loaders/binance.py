"""Binance spot market-data loader (hftbacktest's raw capture): depth snapshot + diffs → L2 rows, a
market-by-price order flow, trades and book tickers.

Input: text (gzip when the name ends in .gz), one line ``<local receive ns> <websocket JSON>``:
a REST depth snapshot ``{"lastUpdateId", "bids", "asks"}``, ``depthUpdate`` diffs (``U`` first and
``u`` final update id, ``b``/``a`` lists of [price, qty] with qty the new level total, 0 removes),
``bookTicker`` (``u``, best ``b``/``B``, ``a``/``A``) and ``trade`` records.

Rebuild rule (Binance's): diffs with ``u`` <= the snapshot's lastUpdateId are dropped; the first
applied diff must have ``U`` <= lastUpdateId + 1 <= ``u`` and each next one ``U`` = previous
``u`` + 1, else the stream has a gap and InputError names the line.

Outputs (BinanceData):
- ``l2`` (L2_DTYPE): the snapshot's levels, then one row per level a diff changes. ``seq`` is the
  update id that made the row: lastUpdateId for the snapshot, the diff's final id ``u`` after; so
  the book after update id X is every row with seq <= X. ``count`` is 1 for an occupied level, 0
  for a removed one (Binance publishes no order counts). ``ts`` is the local receive time.
- ``orders`` (ORDER_DTYPE): the same book as a market-by-price flow, one aggregate GTC limit
  order per level: a new level is a NEW, a changed total a MODIFY (new qty, same price), a removed
  level a CANCEL. Within a diff, removals and decreases come before increases and new levels, so
  the flow never crosses the book on its way (a stale level is gone before its replacement).
  ``flow_update_id[k]`` is the update id of order row k, for mapping engine seqs to update ids.
  Its ts never decreases: a row takes effect no earlier than the rows before it (the diffs
  received while the snapshot was fetched take the snapshot's ts); ``l2`` keeps receive times.
- ``trades`` (FILL_DTYPE): ``trade_id`` = Binance ``t``, ``aggressor_side`` SELL when the buyer
  was the maker (``m``), ``seq`` the update id of the last diff applied before it, order ids 0.
- ``tickers``: structured array (ts, update_id, bid, bid_qty, ask, ask_qty).
- ``tick``, ``lot`` (the decimal steps used), ``symbol_name`` (the records' ``s``) and
  ``currency`` (its quote asset, "USDT" for BTCUSDT): what a backtest needs to value fills in
  money (notional = price x qty x tick x lot).

Invariants: prices become ticks of ``tick`` (default 0.01) and quantities lots of ``lot``
(default 1e-8, the precision of Binance's quantity strings) by exact decimal-string arithmetic.
BTCUSDT's lot is 1e-5, but the sample's snapshot and two diffs carry far-away levels (74,000 to
200,000 USDT) with 1e-6 quantities, so 1e-5 lots cannot represent the file exactly; a value that is not a whole number of ticks or
lots raises InputError naming the line. Known limit: one symbol per file; the JSON is parsed line
by line with the standard library (about 0.3 s for the 41,249-line sample).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from exsim.exchange.errors import InputError
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Kind, OrderType, Side, Tif

from exsim.scenarios.loaders._parse import column_decimal, read_lines

__all__ = ["load_binance", "BinanceData", "TICKER_DTYPE", "DEFAULT_TICK", "DEFAULT_LOT",
           "quote_currency"]

DEFAULT_TICK = "0.01"               # price of one tick (USDT) unless the caller gives one
DEFAULT_LOT = "0.00000001"          # quantity of one lot: the precision of Binance's strings
# quote assets a Binance spot symbol can end with, longest first ("BTCFDUSD" ends in FDUSD)
QUOTE_ASSETS = ("FDUSD", "USDT", "USDC", "TUSD", "BUSD", "EUR", "TRY", "BRL", "BTC", "ETH",
                "BNB")

TICKER_DTYPE = np.dtype(
    [("ts", "<i8"), ("update_id", "<i8"), ("bid", "<i8"), ("bid_qty", "<i8"), ("ask", "<i8"),
     ("ask_qty", "<i8")],
    align=True,
)


@dataclass
class BinanceData:
    """A loaded Binance capture (see the module docstring for each field)."""

    l2: np.ndarray
    orders: np.ndarray
    flow_update_id: np.ndarray
    trades: np.ndarray
    tickers: np.ndarray
    snapshot_update_id: int
    diff_final_ids: np.ndarray    # ``u`` of every applied diff, in order
    dropped_diffs: int            # diffs before the snapshot (u <= lastUpdateId)
    tick: str = DEFAULT_TICK      # price of one tick, a decimal string (quote currency)
    lot: str = DEFAULT_LOT        # quantity of one lot, a decimal string (base currency)
    symbol_name: str = ""         # the records' ``s`` (e.g. "BTCUSDT"); "" when none says
    currency: str = ""            # the quote currency ``symbol_name`` ends with ("USDT"), or ""


def _digits(step: str) -> int:
    d = Decimal(step)
    if d <= 0 or d != Decimal(1).scaleb(d.adjusted()):
        raise InputError(f"tick and lot must be a power of ten like '0.01', got {step!r}")
    return -d.adjusted()


# parsed captures kept in memory by content: (xxh3-128 of the file's bytes, symbol, tick, lot)
# -> BinanceData; the last CACHE_SIZE files (a parse costs seconds, a hash well under 1 ms/MB)
CACHE_SIZE = 2
_CACHE: dict = {}
_HASH_CHUNK = 1 << 20     # why chunks: hashing never holds more than this of the file at once


def load_binance(path: str | os.PathLike, symbol: int = 0, tick: str = DEFAULT_TICK, lot: str = DEFAULT_LOT) -> BinanceData:
    """Read a Binance capture and return BinanceData (L2 rows, market-by-price flow, trades, tickers).

    Parsed once per content in a process: a later call on a file with the same bytes (any path)
    and the same ``symbol``, ``tick`` and ``lot`` returns fresh copies of the arrays parsed the
    first time (the last ``CACHE_SIZE`` files are kept); a file whose bytes changed is parsed
    again.

    Raises InputError naming file and line for a line that is not ``<ns> <JSON>``, a record missing
    a field, a price or quantity that is not a whole number of ticks/lots, a gap in the diff update
    ids, or a file without a depth snapshot.
    """
    import dataclasses

    import xxhash
    path = os.fspath(path)
    h = xxhash.xxh3_128()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
                h.update(chunk)
    except OSError:
        return _parse_binance(path, symbol, tick, lot)   # it names the file's problem
    key = (h.digest(), symbol, str(tick), str(lot))
    hit = _CACHE.pop(key, None)
    if hit is None:
        hit = _parse_binance(path, symbol, tick, lot)
        while len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = hit
    # why copies: a caller may edit what it got; the kept parse must stay the file's
    return dataclasses.replace(hit, **{f.name: getattr(hit, f.name).copy()
                                       for f in dataclasses.fields(hit)
                                       if isinstance(getattr(hit, f.name), np.ndarray)})


def _parse_binance(path: str, symbol: int, tick: str, lot: str) -> BinanceData:
    """``load_binance`` without the cache: parse the file."""
    pd, qd = _digits(tick), _digits(lot)
    lines = read_lines(path)
    snap = None
    diffs, tickers, trades = [], [], []       # (line, ts, record)
    for ln, line in enumerate(lines, 1):
        head, _, body = line.partition(" ")
        try:
            ts = int(head)
            rec = json.loads(body)
        except ValueError as exc:
            raise InputError(f"{path}, line {ln}: expected '<receive ns> <JSON>', got {line[:80]!r} ({exc})") from exc
        data = rec.get("data", rec) if isinstance(rec, dict) else None
        if not isinstance(data, dict):
            raise InputError(f"{path}, line {ln}: expected a JSON object, got {line[:80]!r}")
        if "lastUpdateId" in data:
            if snap is None:
                snap = (ln, ts, data)
        elif data.get("e") == "depthUpdate":
            diffs.append((ln, ts, data))
        elif data.get("e") == "trade":
            trades.append((ln, ts, data))
        elif "b" in data and "a" in data and "u" in data and "B" in data:
            tickers.append((ln, ts, data))
    if snap is None:
        raise InputError(f"{path}: expected a depth snapshot line (with 'lastUpdateId'), found none")
    last_id = _field(path, snap, "lastUpdateId")

    def convert(entries, what):
        """[(line, price str, qty str)] -> int arrays of ticks and lots (one vectorised call each)."""
        lines_ = np.array([e[0] for e in entries], np.int64)
        px = column_decimal(path, np.array([e[1] for e in entries], dtype=str), pd, lines_, f"{what} price")
        qt = column_decimal(path, np.array([e[2] for e in entries], dtype=str), qd, lines_, f"{what} quantity")
        return px, qt

    # Snapshot levels and applied diffs become one list of (update id, ts, side, price, qty).
    ln0, ts0, sd = snap
    entries, meta = [], []
    for side, key in ((Side.BUY, "bids"), (Side.SELL, "asks")):
        for lvl in _field(path, snap, key):
            entries.append((ln0, *_pair(path, ln0, lvl)))
            meta.append((last_id, ts0, int(side)))
    applied, prev_u, dropped = [], None, 0
    for d in diffs:
        ln, ts, rec = d
        first, final = _field(path, d, "U"), _field(path, d, "u")
        if final <= last_id:
            dropped += 1
            continue
        if prev_u is None and not first <= last_id + 1 <= final:
            raise InputError(f"{path}, line {ln}: first diff after the snapshot should span update id "
                             f"{last_id + 1}, got U={first} u={final}")
        if prev_u is not None and first != prev_u + 1:
            raise InputError(f"{path}, line {ln}: diff update ids have a gap: expected U={prev_u + 1}, got U={first}")
        prev_u = final
        applied.append(final)
        for side, key in ((Side.BUY, "b"), (Side.SELL, "a")):
            for lvl in _field(path, d, key):
                entries.append((ln, *_pair(path, ln, lvl)))
                meta.append((final, ts, int(side)))
    px, qt = convert(entries, "level")
    meta_a = np.array(meta, np.int64).reshape(-1, 3)

    l2 = np.zeros(len(entries), L2_DTYPE)
    l2["seq"], l2["ts"], l2["side"] = meta_a[:, 0], meta_a[:, 1], meta_a[:, 2]
    l2["price"], l2["qty"], l2["symbol"] = px, qt, symbol
    l2["count"] = (qt > 0).astype(np.int32)

    orders, flow_uid = _mbp_flow(l2, symbol)

    tk = np.zeros(len(tickers), TICKER_DTYPE)
    if tickers:
        tk["ts"] = [t[1] for t in tickers]
        tk["update_id"] = [_field(path, t, "u") for t in tickers]
        tl = np.array([t[0] for t in tickers], np.int64)
        for col, key, digits in (("bid", "b", pd), ("bid_qty", "B", qd), ("ask", "a", pd), ("ask_qty", "A", qd)):
            tk[col] = column_decimal(path, np.array([str(_field(path, t, key)) for t in tickers], dtype=str),
                                     digits, tl, f"bookTicker {key}")

    fills = np.zeros(len(trades), FILL_DTYPE)
    if trades:
        tl = np.array([t[0] for t in trades], np.int64)
        fills["ts"] = [t[1] for t in trades]
        fills["trade_id"] = [_field(path, t, "t") for t in trades]
        fills["price"] = column_decimal(path, np.array([str(_field(path, t, "p")) for t in trades], dtype=str),
                                        pd, tl, "trade price")
        fills["qty"] = column_decimal(path, np.array([str(_field(path, t, "q")) for t in trades], dtype=str),
                                      qd, tl, "trade quantity")
        fills["aggressor_side"] = [int(Side.SELL) if _field(path, t, "m") else int(Side.BUY) for t in trades]
        fills["symbol"] = symbol
        # seq: the update id of the last diff line read before the trade line.
        diff_lines = np.array([d[0] for d in diffs], np.int64)
        diff_u = np.array([d[2]["u"] for d in diffs], np.int64)
        k = np.searchsorted(diff_lines, tl) - 1
        fills["seq"] = np.where(k >= 0, diff_u[np.maximum(k, 0)], last_id)
    name = next((str(r[2]["s"]) for r in (diffs + trades)[:1] if "s" in r[2]), "")
    return BinanceData(l2=l2, orders=orders, flow_update_id=flow_uid, trades=fills, tickers=tk,
                       snapshot_update_id=int(last_id), diff_final_ids=np.array(applied, np.int64),
                       dropped_diffs=dropped, tick=str(tick), lot=str(lot), symbol_name=name,
                       currency=quote_currency(name))


def quote_currency(symbol_name: str) -> str:
    """Return the quote asset a Binance spot symbol ends with ("BTCUSDT" -> "USDT"), or "" when
    it ends with none of ``QUOTE_ASSETS``."""
    return next((q for q in QUOTE_ASSETS if symbol_name.endswith(q) and symbol_name != q), "")


def _field(path, item, key):
    ln, _, rec = item
    if key not in rec:
        raise InputError(f"{path}, line {ln}: record has no field {key!r}")
    return rec[key]


def _pair(path, ln, lvl):
    if not isinstance(lvl, list) or len(lvl) != 2:
        raise InputError(f"{path}, line {ln}: expected a [price, qty] pair, got {lvl!r}")
    return str(lvl[0]), str(lvl[1])


def _mbp_flow(l2: np.ndarray, symbol: int) -> tuple[np.ndarray, np.ndarray]:
    """One aggregate order per (side, price) level: NEW / MODIFY / CANCEL from the L2 rows.

    Within one update id, rows that remove or lower a level are emitted before rows that raise or
    add one, so the flow never crosses the book in between."""
    live: dict[tuple[int, int], list] = {}   # (side, price) -> [order id, qty]
    next_id = 1
    out = []
    seqs = l2["seq"]
    bounds = np.flatnonzero(np.diff(seqs)) + 1
    for chunk in np.split(np.arange(len(l2)), bounds):
        rows = l2[chunk]
        down, up = [], []
        for r in rows.tolist():
            seq, ts, price, qty, _sym, _cnt, side = r
            cur = live.get((side, price))
            old = cur[1] if cur else 0
            if qty == old:
                continue
            (down if qty < old else up).append((seq, ts, price, qty, side))
        for seq, ts, price, qty, side in down + up:
            cur = live.get((side, price))
            if cur is None:
                live[(side, price)] = [next_id, qty]
                out.append((seq, ts, next_id, price, qty, int(Kind.NEW), side))
                next_id += 1
            elif qty == 0:
                del live[(side, price)]
                out.append((seq, ts, cur[0], price, 0, int(Kind.CANCEL), side))
            else:
                cur[1] = qty
                out.append((seq, ts, cur[0], price, qty, int(Kind.MODIFY), side))
    a = np.array(out, np.int64).reshape(-1, 7)
    orders = np.zeros(len(a), ORDER_DTYPE)
    # why the running maximum: diffs buffered while the snapshot was fetched were received
    # before it (the sample's first applied diff, 69 ms) but apply to it, so they take effect
    # when it arrives; an engine flow must not step back in time
    orders["ts"] = np.maximum.accumulate(a[:, 1])
    orders["order_id"], orders["price"], orders["qty"] = a[:, 2], a[:, 3], a[:, 4]
    orders["kind"], orders["side"] = a[:, 5], a[:, 6]
    orders["order_type"], orders["tif"], orders["symbol"] = OrderType.LIMIT, Tif.GTC, symbol
    return orders, a[:, 0].copy()
