"""LOBSTER loader: a message file and its book file → an ORDER_DTYPE flow that rebuilds the book.

What each LOBSTER message becomes (``Type`` column):
- 1 new limit order → NEW LIMIT GTC with LOBSTER's own order id.
- 2 partial cancel → MODIFY to the lower open quantity at the same price (keeps queue priority),
  or CANCEL when nothing would be left.
- 3 delete → CANCEL.
- 4 execution of a visible order → a NEW LIMIT IOC of the opposite side at that order's price for
  the executed size, with a fresh (synthetic) id: under price-time priority it executes against
  exactly that resting order. ``expected_trades`` records (seq of the IOC, resting id, price, size).
- 5 execution of a hidden order → no book change; kept in ``hidden_trades`` (price in LOBSTER's
  dollars x 10000, since hidden orders may trade at half cents).
- 7 trading halt indicator → a PHASE message (docs/semantics.md, "PHASE messages") by its Price
  column: -1 halt → HALTED; 0 quoting resumes → REOPENING_AUCTION with no end (it uncrosses at
  the next PHASE message); 1 trading resumes → CONTINUOUS (which uncrosses a pending call). Its
  message index is also kept in ``halts``. Other columns are ignored (LOBSTER writes 0 and -1).

What the files do not say, and how it is filled in:
- Orders resting before the first message have no message. The book before message 0 is row 0
  of the book file with message 0 undone; each level it shows becomes one synthetic order.
- A file of depth D only carries messages that touch the D best levels at the time, so a level
  that leaves the top D may change unseen, and a level that enters from beyond the deepest price
  shown may hold orders never seen. A book row is *unpredictable* when, on some side, it shows a
  level beyond the D-th level of the previous row (a previous row with fewer than D levels on a
  side showed that whole side, so nothing there is unpredictable). On such a row the loader re-seeds
  the side from the book file, for the levels it shows: a missing quantity becomes a synthetic
  order at the back of its level, an excess (orders that vanished unseen) is taken off synthetic
  orders first, then off the newest orders; levels the file no longer shows inside its range are
  cancelled. These corrections are ordinary messages placed after the row's message, and
  ``msg_index`` marks them (CORRECTION), so a check compares the engine's book *before* them.
- A message naming an id never seen (an order from before the open, or from beyond the depth) is
  applied to the synthetic quantity at its price. An execution needs its resting order at the
  front of the best level: stale better levels are cancelled and orders the engine holds ahead of
  it are moved behind it (cancelled and re-entered with the same id) before the IOC; these too are
  CORRECTION rows, and they never change a level's total between two book rows.

Invariants: a file without type 7 messages gives the same rows as before PHASE messages existed;
prices convert once, LOBSTER units / 100 = ticks of one cent (InputError if a message
of type 1-4 or a book price is not a whole cent); timestamps are exact int64 ns from the decimal
seconds and never decrease (InputError naming the line that goes back); synthetic ids start at SYNTHETIC_ID_BASE, above every LOBSTER id. Every row of
``orders`` carries ``symbol``; ``seq_after[i]`` is the number of flow rows up to the end of message
i's own rows, i.e. the engine's seq after message i when the flow is processed from a fresh engine.

Times: LOBSTER's ``Time`` is seconds after midnight, local time of the exchange (New York for
its NASDAQ data), and the file name carries the trading date (``AMZN_2012-06-21_34200000_...``).
The loader keeps ts as ns after that midnight and records the date (from the file name, or
``date=``) and the zone (``tz=``, default ``DEFAULT_TZ``) in ``LobsterFlow.date``/``tz``, which a
run stores so that times read and print as New York times on that day.

Known limits: one symbol per file pair; the whole file is read into memory; the bookkeeping pass
is a plain Python loop (about 1 us a message), the parsing is vectorised.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import warnings
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field

import numpy as np

from exsim.exchange.errors import InputError, UsageError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Phase, Side, Tif

from exsim.scenarios.loaders._parse import check_zone, column_decimal, column_int, read_lines, split_columns

__all__ = ["load_lobster", "LobsterFlow", "HIDDEN_TRADE_DTYPE", "EXPECTED_TRADE_DTYPE",
           "LOBSTER_TICK", "TICK_SIZE", "SYNTHETIC_ID_BASE", "SEED", "CORRECTION", "unpredictable_rows",
           "HALT_PHASES", "DEFAULT_TZ", "date_from_name"]

LOBSTER_TICK = 100                 # LOBSTER prices are dollars x 10000; one tick is one cent
TICK_SIZE = 0.01                   # the price of one engine tick of a loaded flow, in dollars
SYNTHETIC_ID_BASE = 1 << 40        # ids the loader invents (seed, re-seed, IOC aggressors)
EMPTY_ASK, EMPTY_BID = 9999999999, -9999999999   # LOBSTER's dummy prices for empty levels
_EMPTY_ASK_TICKS = int(np.iinfo(np.int64).max)    # an empty ask level once converted to ticks
DEFAULT_TZ = "America/New_York"   # LOBSTER's data is NASDAQ's: times are New York local time
SEED, CORRECTION = -1, -2          # msg_index of rows that are not a translated message
_NAME_DATE = re.compile(r"_(\d{4})-(\d{2})-(\d{2})_")   # the date in LOBSTER's file names
MESSAGE_HEADER = "Time,Type,OrderId,Size,Price,Direction"
# a type 7 message's Price column -> the phase it starts (LOBSTER_SampleFiles_ReadMe.txt)
HALT_PHASES = {-1: Phase.HALTED, 0: Phase.REOPENING_AUCTION, 1: Phase.CONTINUOUS}

HIDDEN_TRADE_DTYPE = np.dtype(
    [("ts", "<i8"), ("order_id", "<u8"), ("price_e4", "<i8"), ("qty", "<i8"), ("side", "u1")],
    align=True,
)  # a type-5 execution of a hidden order; side is the hidden (resting) order's Side
EXPECTED_TRADE_DTYPE = np.dtype(
    [("seq", "<i8"), ("resting_id", "<u8"), ("price", "<i8"), ("qty", "<i8"), ("msg", "<i8")],
    align=True,
)  # one type-4 execution: the fill the engine must emit at this seq


@dataclass
class LobsterFlow:
    """A loaded LOBSTER file pair: the engine flow plus everything needed to check it."""

    orders: np.ndarray            # ORDER_DTYPE: seed rows, translated messages, corrections
    msg_index: np.ndarray         # int64 per order row: LOBSTER message index, SEED or CORRECTION
    seq_after: np.ndarray         # int64 per message: engine seq after the message's own rows
    book: np.ndarray              # int64 (messages, D, 4): ask px, ask qty, bid px, bid qty (ticks)
    depth: int                    # D, the number of levels the book file shows
    expected_trades: np.ndarray   # EXPECTED_TRADE_DTYPE, one per type-4 message
    hidden_trades: np.ndarray     # HIDDEN_TRADE_DTYPE, one per type-5 message
    halts: np.ndarray             # int64 message indices of type-7 messages
    types: np.ndarray = None      # int64 per message: its LOBSTER Type
    synthetic_base: int = SYNTHETIC_ID_BASE      # ids >= this were invented by the loader
    counts: dict = field(default_factory=dict)   # messages by type, corrections by cause
    date: str | None = None       # trading date YYYY-MM-DD (file name or date=); ts count from its midnight
    tz: str = DEFAULT_TZ          # IANA zone of that midnight and of every ts


def _fast_ints(path: str, skip: int, ncols: int, usecols) -> np.ndarray | None:
    """Parse integer columns with numpy's C reader; None when anything is off (the caller then
    runs the line-by-line parser, which names the bad line)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        data = text.split("\n", skip)[-1] if skip else text
        n = data.count("\n") + (0 if data.endswith("\n") else 1)
        if not data.strip() or data.count(",") != (ncols - 1) * n:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return np.loadtxt(path, delimiter=",", skiprows=skip, dtype=np.int64, usecols=usecols, ndmin=2)
    except (OSError, ValueError, UnicodeDecodeError, UserWarning):
        return None


def _read_messages(path: str):
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.readline().strip().replace(" ", "")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    skip = 1 if head == MESSAGE_HEADER else 0
    ints = _fast_ints(path, skip, 6, (1, 2, 3, 4, 5))
    if ints is not None:
        times = np.loadtxt(path, delimiter=",", skiprows=skip, dtype=str, usecols=(0,), ndmin=1)
        ts = column_decimal(path, times, 9, 1 + skip, "Time")
        typ, oid, size, price, dirn = ints.T
        return _check_messages(path, 1 + skip, ts, typ, oid, size, price, dirn)
    lines = read_lines(path)
    first = 1
    if lines and lines[0].replace(" ", "") == MESSAGE_HEADER:
        lines, first = lines[1:], 2
    if not lines:
        raise InputError(f"{path}, line {first}: expected LOBSTER messages ({MESSAGE_HEADER}), got end of file")
    c = split_columns(path, lines, 6, first, MESSAGE_HEADER)
    ts = column_decimal(path, c[:, 0], 9, first, "Time")
    typ = column_int(path, c[:, 1], first, "Type")
    oid = column_int(path, c[:, 2], first, "OrderId")
    size = column_int(path, c[:, 3], first, "Size")
    price = column_int(path, c[:, 4], first, "Price")
    dirn = column_int(path, c[:, 5], first, "Direction")
    return _check_messages(path, first, ts, typ, oid, size, price, dirn)


def _check_messages(path, first, ts, typ, oid, size, price, dirn):
    bad = np.flatnonzero(~np.isin(typ, (1, 2, 3, 4, 5, 7)))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}, line {first + i}: column 'Type' should be 1, 2, 3, 4, 5 or 7, got {typ[i]}")
    bad = np.flatnonzero((typ == 7) & ~np.isin(price, tuple(HALT_PHASES)))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}, line {first + i}: a type 7 (trading halt) message needs Price "
                         f"-1 (halt), 0 (quoting) or 1 (resume), got {price[i]}")
    book_msg = typ <= 4
    bad = np.flatnonzero(book_msg & ((price % LOBSTER_TICK != 0) | (price <= 0) | (size <= 0)
                                     | ((dirn != 1) & (dirn != -1))))
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"{path}, line {first + i}: a type {typ[i]} message needs Size > 0, Direction 1 or -1 and a "
            f"Price that is a whole cent (a multiple of {LOBSTER_TICK}); got Size {size[i]}, "
            f"Price {price[i]}, Direction {dirn[i]}")
    back = np.flatnonzero(np.diff(ts) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise InputError(f"{path}, line {first + i}: column 'Time' goes back in time "
                         f"(the line before has a later Time); LOBSTER messages are in time order")
    return ts, typ, oid, size, price, dirn


def _read_book(path: str, n_messages: int, message_path: str) -> np.ndarray:
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.readline()
            row1 = fh.readline() if head[:1].isalpha() else head
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    first = 2 if head[:1].isalpha() else 1   # this copy of the AMZN file has a header line
    ncols = row1.count(",") + 1
    if not row1.strip():
        raise InputError(f"{path}, line {first}: expected book rows, got end of file")
    if ncols % 4:
        raise InputError(f"{path}, line {first}: expected 4 columns per level "
                         f"(ask price, ask size, bid price, bid size), got {ncols}")
    vals = _fast_ints(path, first - 1, ncols, None)
    if vals is None:
        lines = read_lines(path)[first - 1:]
        c = split_columns(path, lines, ncols, first, "4 columns per level")
        vals = np.stack([column_int(path, c[:, j], first, f"column {j + 1}") for j in range(ncols)], 1)
    if len(vals) != n_messages:
        raise InputError(f"{path}, line {first + min(len(vals), n_messages)}: expected one book row per "
                         f"message of {message_path} ({n_messages} rows), got {len(vals)} rows")
    book = vals.reshape(len(vals), ncols // 4, 4)
    px = book[:, :, [0, 2]]
    real = (px != EMPTY_ASK) & (px != EMPTY_BID)
    bad = np.flatnonzero((real & (px % LOBSTER_TICK != 0)).any(axis=(1, 2)))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}, line {first + i}: book prices should be whole cents "
                         f"(multiples of {LOBSTER_TICK})")
    px = np.where(real, px // LOBSTER_TICK, np.where(px == EMPTY_ASK, np.iinfo(np.int64).max, -1))
    book = book.copy()
    book[:, :, [0, 2]] = px
    return book


def unpredictable_rows(book: np.ndarray) -> np.ndarray:
    """Return a bool array per (row, side) [ask, bid]: True where the row shows a level beyond the
    deepest level the previous row showed (a price that may hold orders no message revealed).

    Row 0 (the seed) is False. ``book`` is as in LobsterFlow (empty asks at int64 max, bids at -1).
    """
    D = book.shape[1]
    out = np.zeros((len(book), 2), bool)
    ask, bid = book[:, :, 0], book[:, :, 2]
    full_ask = ask[:-1, D - 1] != np.iinfo(np.int64).max   # previous row showed all D ask levels
    full_bid = bid[:-1, D - 1] != -1
    shown_a = ask[1:] != np.iinfo(np.int64).max
    shown_b = bid[1:] != -1
    out[1:, 0] = full_ask & (shown_a & (ask[1:] > ask[:-1, D - 1:D])).any(1)
    out[1:, 1] = full_bid & (shown_b & (bid[1:] < bid[:-1, D - 1:D])).any(1)
    return out


class _Rebuild:
    """The loader's own order-level book; it decides the corrections and emits the flow rows."""

    def __init__(self, symbol: int, next_id: int, last_ref: dict[int, int]):
        self.symbol = symbol
        self.last_ref = last_ref        # id -> index of the last message of type 2-4 naming it
        self.now = -1                   # index of the message being translated
        self.next_id = next_id
        self.levels = ({}, {})          # per Side: price -> list of order ids in priority order
        self.prices = ([], [])          # per Side: occupied prices, ascending
        self.orders: dict[int, list] = {}   # id -> [side, price, qty]
        self.synthetic: set[int] = set()
        self.rows: list[tuple] = []     # (ts, id, price, qty, kind, tif, side, msg, phase)
        self.counts = {"moved_for_priority": 0, "stale_levels_cancelled": 0, "reseeded_qty_added": 0,
                       "reseeded_qty_removed": 0, "unknown_id_on_synthetic": 0, "known_qty_to_unseen": 0,
                       "inconsistent": 0}

    def fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def emit(self, ts, oid, price, qty, kind, side, msg, tif=Tif.GTC, phase=0):
        self.rows.append((ts, oid, price, qty, int(kind), int(tif), int(side), msg, int(phase)))

    def add(self, ts, oid, side, price, qty, msg, synthetic=False):
        self.emit(ts, oid, price, qty, Kind.NEW, side, msg)
        lv = self.levels[side]
        if price not in lv:
            lv[price] = []
            insort(self.prices[side], price)
        lv[price].append(oid)
        self.orders[oid] = [side, price, qty]
        if synthetic:
            self.synthetic.add(oid)

    def _drop(self, oid):
        side, price, _ = self.orders.pop(oid)
        q = self.levels[side][price]
        q.remove(oid)
        if not q:
            del self.levels[side][price]
            ps = self.prices[side]
            del ps[bisect_left(ps, price)]
        self.synthetic.discard(oid)

    def cancel(self, ts, oid, msg):
        side, price, _ = self.orders[oid]
        self.emit(ts, oid, price, 0, Kind.CANCEL, side, msg)
        self._drop(oid)

    def reduce(self, ts, oid, by, msg):
        """Lower an order's open quantity by ``by`` keeping priority (MODIFY), or cancel it."""
        side, price, qty = self.orders[oid]
        if by >= qty:
            self.cancel(ts, oid, msg)
        else:
            self.orders[oid][2] = qty - by
            self.emit(ts, oid, price, qty - by, Kind.MODIFY, side, msg)

    def level_qty(self, side, price) -> int:
        return sum(self.orders[o][2] for o in self.levels[side].get(price, ()))

    def gather_synthetic(self, ts, side, price, need) -> int:
        """Merge the synthetic orders at a level into one of at least ``need`` lots; return its id.

        If the synthetic quantity is short, known orders at the level lost that quantity unseen
        (they left the book while the level was beyond the file's depth) and unseen orders hold
        it: the shortfall moves from the oldest known orders to the synthetic order. Level totals
        do not change (all rows are CORRECTIONs)."""
        queue = self.levels[side].get(price, [])
        syn = [o for o in queue if o in self.synthetic]
        have = sum(self.orders[o][2] for o in syn)
        short, moved = need - have, 0
        for o in self.unseen_candidates(queue):
            if short <= 0:
                break
            take = min(short, self.orders[o][2])
            self.reduce(ts, o, take, CORRECTION)
            short -= take
            moved += take
        self.counts["known_qty_to_unseen"] += moved
        if short > 0:
            # The level holds less than the message needs: the model has lost track (counted).
            self.counts["inconsistent"] += 1
            moved += short
        if len(syn) == 1 and moved == 0:
            return syn[0]
        for o in syn:
            self.cancel(ts, o, CORRECTION)
        oid = self.fresh_id()
        self.add(ts, oid, side, price, have + moved, CORRECTION, synthetic=True)
        return oid

    def unseen_candidates(self, queue):
        """Known orders of a queue in the order they are presumed to have left unseen: first those
        no later message names (newest first), then the others (a later message proves they live)."""
        known = [o for o in queue if o not in self.synthetic]
        gone = [o for o in known if self.last_ref.get(o, -1) <= self.now]
        return gone[::-1] + [o for o in known if self.last_ref.get(o, -1) > self.now][::-1]

    def take_synthetic(self, ts, side, price, qty, msg, newest_first=True) -> int:
        """Remove up to ``qty`` from synthetic orders at a level; return what could not be removed."""
        q = [o for o in self.levels[side].get(price, ()) if o in self.synthetic]
        for oid in (reversed(q) if newest_first else q):
            if qty <= 0:
                break
            take = min(qty, self.orders[oid][2])
            self.reduce(ts, oid, take, msg)
            qty -= take
        return qty

    def better_levels(self, side, price):
        """Occupied prices of ``side`` strictly better than ``price``."""
        ps = self.prices[side]
        return ps[bisect_right(ps, price):] if side == Side.BUY else ps[:bisect_left(ps, price)]

    def through(self, side, price):
        """Occupied prices of ``side`` at or better than ``price``."""
        ps = self.prices[side]
        return ps[bisect_left(ps, price):] if side == Side.BUY else ps[:bisect_right(ps, price)]

    def execute(self, ts, rest_side, price, qty, oid, msg, trades):
        """Emit the IOC that executes ``qty`` of resting order ``oid`` (or synthetic quantity)."""
        for p in self.better_levels(rest_side, price):      # stale: the file says price is best
            self.counts["stale_levels_cancelled"] += 1
            for o in list(self.levels[rest_side][p]):
                self.cancel(ts, o, CORRECTION)
        if oid not in self.orders or self.orders[oid][1] != price:
            # Never seen: the executed quantity is part of the unseen quantity at this price, and
            # that order is first in its queue: gather the unseen quantity into one synthetic order.
            self.counts["unknown_id_on_synthetic"] += 1
            oid = self.gather_synthetic(ts, rest_side, price, qty)
        queue = self.levels[rest_side][price]
        ahead = queue[:queue.index(oid)]
        for o in ahead:                      # in truth these are behind the executed order
            self.counts["moved_for_priority"] += 1
            _, _, q = self.orders[o]
            syn = o in self.synthetic
            self.cancel(ts, o, CORRECTION)
            self.add(ts, o, rest_side, price, q, CORRECTION, synthetic=syn)
        if self.orders[oid][2] < qty:
            self.counts["inconsistent"] += 1
        trades.append((len(self.rows) + 1, oid, price, qty, msg))
        self.emit(ts, self.fresh_id(), price, qty, Kind.NEW, 1 - rest_side, msg, tif=Tif.IOC)
        # The model fills front first, like the engine.
        left = qty
        for o in list(self.levels[rest_side].get(price, [])):
            if left <= 0:
                break
            take = min(left, self.orders[o][2])
            left -= take
            if take == self.orders[o][2]:
                self._drop(o)
            else:
                self.orders[o][2] -= take

    def reseed(self, ts, side, shown, all_shown):
        """Make the levels the book file shows on ``side`` (list of (price, qty)) the model's;
        ``all_shown``: the file shows D levels, so only levels inside their range are known."""
        prices = {p for p, _ in shown}
        if shown:
            last = shown[-1][0]
            in_range = self.through(side, last) if all_shown else list(self.prices[side])
        else:
            in_range = list(self.prices[side])
        for p in in_range:
            if p not in prices:
                self.counts["stale_levels_cancelled"] += 1
                for o in list(self.levels[side][p]):
                    self.cancel(ts, o, CORRECTION)
        for p, q in shown:
            have = self.level_qty(side, p)
            if q > have:
                self.counts["reseeded_qty_added"] += q - have
                self.add(ts, self.fresh_id(), side, p, q - have, CORRECTION, synthetic=True)
            elif q < have:
                self.counts["reseeded_qty_removed"] += have - q
                left = self.take_synthetic(ts, side, p, have - q, CORRECTION)
                for o in self.unseen_candidates(self.levels[side].get(p, [])):
                    if left <= 0:
                        break
                    take = min(left, self.orders[o][2])
                    self.reduce(ts, o, take, CORRECTION)
                    left -= take


def _shown(book_row, side):
    """(levels shown on a side as [(price, qty)], whether all D levels are shown)."""
    pc, qc = (2, 3) if side == Side.BUY else (0, 1)
    lv = [(p, q) for p, q in zip(book_row[:, pc].tolist(), book_row[:, qc].tolist())
          if p != -1 and p != _EMPTY_ASK_TICKS]
    return lv, len(lv) == len(book_row)


def date_from_name(path: str | os.PathLike) -> str | None:
    """Return the trading date ``YYYY-MM-DD`` a LOBSTER file name carries
    (``AMZN_2012-06-21_34200000_57600000_message_1.csv``), or None when it has none."""
    m = _NAME_DATE.search(os.path.basename(os.fspath(path)))
    if m is None:
        return None
    try:
        return _dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3))).isoformat()
    except ValueError:
        return None


def load_lobster(message_path: str | os.PathLike, book_path: str | os.PathLike, symbol: int = 0,
                 *, tz: str = DEFAULT_TZ, date: str | None = None) -> LobsterFlow:
    """Read a LOBSTER message file and its book file; return a LobsterFlow (see module docstring).

    ``tz``: the IANA time zone of the file's times (default New York, LOBSTER's NASDAQ data);
    ``date``: the trading date ``YYYY-MM-DD`` (default: from the message file's name, None
    when it has none). Raises InputError naming file and line for a malformed or truncated file:
    wrong column count, a non-numeric field, an unknown message type, a price that is not a whole
    cent, or a book file whose row count differs from the message count; UsageError for a ``tz``
    that is not a time zone or a ``date`` that is not ``YYYY-MM-DD``.
    """
    mpath, bpath = os.fspath(message_path), os.fspath(book_path)
    tz = check_zone(tz, "tz")
    if date is None:
        date = date_from_name(mpath)
    else:
        try:
            date = _dt.date.fromisoformat(str(date)).isoformat()
        except ValueError:
            raise UsageError(f"date {date!r}: expected a date YYYY-MM-DD") from None
    ts, typ, oid, size, price_e4, dirn = _read_messages(mpath)
    book = _read_book(bpath, len(ts), mpath)
    n = len(ts)
    price = price_e4 // LOBSTER_TICK
    side = np.where(dirn == 1, int(Side.BUY), int(Side.SELL))
    unpred = unpredictable_rows(book)
    base = max(SYNTHETIC_ID_BASE, int(oid.max()) + 1)
    refs = np.flatnonzero((typ >= 2) & (typ <= 4))
    last_ref = dict(zip(oid[refs].tolist(), refs.tolist()))   # later indices overwrite earlier
    rb = _Rebuild(symbol, base, last_ref)

    # Seed: row 0 with message 0 undone, one synthetic order per level.
    seed = {Side.BUY: dict(_shown(book[0], Side.BUY)[0]), Side.SELL: dict(_shown(book[0], Side.SELL)[0])}
    t0, p0, s0 = int(typ[0]), int(price[0]), Side(int(side[0]))
    if t0 == 1:
        seed[s0][p0] = seed[s0].get(p0, 0) - int(size[0])
    elif t0 in (2, 3, 4):
        seed[s0][p0] = seed[s0].get(p0, 0) + int(size[0])
    for sd in (Side.SELL, Side.BUY):
        for p in sorted(seed[sd], reverse=(sd == Side.BUY)):
            if seed[sd][p] > 0:
                rb.add(int(ts[0]), rb.fresh_id(), sd, p, seed[sd][p], SEED, synthetic=True)

    trades: list[tuple] = []
    seq_after = np.zeros(n, np.int64)
    hidden, halts = [], []
    unpred_any = unpred.any(1).tolist()
    for i, (t, o, q, p, sd, tsi) in enumerate(zip(typ.tolist(), oid.tolist(), size.tolist(), price.tolist(),
                                                  side.tolist(), ts.tolist())):
        rb.now = i
        if t == 1:
            opp = 1 - sd
            # A new limit never crosses in LOBSTER (marketable parts arrive as executions), so
            # opposite levels at or through its price are stale.
            for bp in rb.through(opp, p):
                rb.counts["stale_levels_cancelled"] += 1
                for x in list(rb.levels[opp][bp]):
                    rb.cancel(tsi, x, CORRECTION)
            if o in rb.orders:
                rb.counts["inconsistent"] += 1
                rb.cancel(tsi, o, CORRECTION)
            rb.add(tsi, o, sd, p, q, i)
        elif t in (2, 3):
            if o in rb.orders and rb.orders[o][1] == p:
                rb.reduce(tsi, o, q if t == 2 else rb.orders[o][2], i)
            else:
                rb.counts["unknown_id_on_synthetic"] += 1
                syn = rb.gather_synthetic(tsi, sd, p, q)
                rb.reduce(tsi, syn, q, i)
        elif t == 4:
            rb.execute(tsi, sd, p, q, o, i, trades)
        elif t == 5:
            hidden.append((tsi, o, int(price_e4[i]), q, sd))
        else:
            halts.append(i)
            # price 0 (keep the reference price), no end: the resume message ends a quoting call
            rb.emit(tsi, 0, 0, 0, Kind.PHASE, 0, i, phase=HALT_PHASES[int(price_e4[i])])
        seq_after[i] = len(rb.rows)
        if unpred_any[i]:
            for k, s in ((0, Side.SELL), (1, Side.BUY)):
                if unpred[i, k]:
                    rb.reseed(tsi, s, *_shown(book[i], s))

    rows = rb.rows
    orders = np.zeros(len(rows), ORDER_DTYPE)
    arr = np.array(rows, dtype=np.int64).reshape(-1, 9)
    orders["ts"], orders["order_id"], orders["price"], orders["qty"] = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
    orders["kind"], orders["tif"], orders["side"] = arr[:, 4], arr[:, 5], arr[:, 6]
    orders["phase"] = arr[:, 8]
    # a PHASE row's other fields are 0 (the contract's PHASE message)
    orders["order_type"] = np.where(orders["kind"] == Kind.PHASE, 0, OrderType.LIMIT)
    orders["symbol"] = symbol
    counts = {f"type_{k}": int((typ == k).sum()) for k in (1, 2, 3, 4, 5, 7)}
    counts.update(rb.counts)
    counts["unpredictable_rows"] = int(unpred.any(1).sum())
    return LobsterFlow(
        orders=orders, msg_index=arr[:, 7].copy(), seq_after=seq_after, book=book, depth=book.shape[1],
        expected_trades=np.array(trades, EXPECTED_TRADE_DTYPE),
        hidden_trades=np.array(hidden, HIDDEN_TRADE_DTYPE),
        halts=np.array(halts, np.int64), types=typ, synthetic_base=base, counts=counts,
        date=date, tz=tz)
