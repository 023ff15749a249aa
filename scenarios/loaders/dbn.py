"""Databento DBN loader: MBO, MBP-1/MBP-10, trades and definitions → exsim flows and L2 views.

Decoding is the official ``databento-dbn`` package's (``DBNDecoder``; DBN versions 1-3 are
upgraded to the current record layouts, zstd is recognised by its magic bytes); this module only
converts its records. The file is fed to the decoder in chunks of ``batch_bytes``, so a file larger
than memory is converted batch by batch (``iter_dbn``); ``load_dbn`` joins the batches.
``dbn_symbols`` is the cheap first pass a streaming consumer runs to register every symbol before
the first batch: it decodes the whole file but converts nothing, only following the metadata's
symbol mappings, the definitions and each instrument's first record, so its symbols are the ones
``iter_dbn``'s last batch reports (ids, names, ticks, lot sizes; all but ``synced``).

What each record becomes:
- MBO ``A`` (add) → NEW LIMIT GTC with the record's order id, side, price and size.
- MBO ``C`` (cancel of ``size`` lots) → MODIFY to the lower open quantity at the same price (the
  order keeps its place, as at the venue), or CANCEL when nothing is left.
- MBO ``M`` (modify to ``price``, ``size``) → MODIFY: exsim's MODIFY keeps the place on a lower
  size at the same price and sends the order to the back on a price change or a size increase,
  which is Databento's rule. A modify of an order the file never added is an add (Databento's
  advice), counted in ``counts["modify_as_add"]``.
- MBO ``R`` (clear) → CANCEL of every live order of the instrument, in the order they were added.
- MBO ``T`` (trade, aggressor side) → a row of ``trades``; ``F`` (fill of a resting order) → a row
  of ``fills``. Neither changes the book: in Databento's normalisation the book change of a fill is
  its own ``C`` record, so the flow never crosses and the engine emits no fills of its own.
- MBO ``N`` (none) → nothing.
- ``F_LAST`` marks the last record of one event: only there is the venue's book consistent. Each
  such record adds a row to ``consistent`` (engine seq after the event's messages, ts, the
  record's venue ``sequence``, symbol); observe books at those seqs only.
- MBP-1 / MBP-10 / BBO / CMBP-1 records → a row of ``mbp`` (the top levels the record shows, in
  ticks) and ``l2`` rows (L2_DTYPE): one per level of the shown top whose total or count changed
  since the instrument's previous record, ``qty`` 0 for a level no longer shown; ``seq`` is the
  record's index in the file, so the shown book after record k is every row with seq <= k.
- Trades-schema records and MBP records with action ``T`` → rows of ``trades``.
- Definitions → symbols (``DbnSymbol``): name ``raw_symbol`` (``raw_symbol.instrument_id`` when two
  instruments share it), tick = ``min_price_increment``, lot size = ``min_lot_size_round_lot``.
- Other schemas (OHLCV, statistics, status, imbalance, ...) are counted in ``counts["other"]``.

Symbols: each instrument id becomes one exsim symbol, ids 0, 1, ... in order of first appearance
(definitions first when a ``definitions`` file is given). Names come from the definition, else
from the metadata's symbol mappings, else ``ID<instrument_id>``. Without a definition the tick is
the ``tick`` argument (a decimal string such as ``"0.25"``), else DBN's own price unit 1e-9.

A file that starts mid-day: Databento's MBO starts a session with ``R`` and a snapshot of ``A``
records (``F_SNAPSHOT``). Until an instrument's first ``R``, its book lacks the orders resting
before the file began: with ``midday="drop"`` (the default) records naming such an order are
skipped and counted in ``counts["unknown_order"]`` and the symbol's ``synced`` stays False until its
first ``R``; ``midday="refuse"`` raises InputError at the first such record.

Invariants: prices convert to ticks once, here, by exact integer division of DBN's 1e-9 units (a
price that is not a whole number of ticks raises InputError naming the file and the record);
times are ``ts_recv`` (the order DBN files are sorted in), exact int64 ns; quantities stay in
DBN's units (shares, contracts). ``seq`` fields of ``consistent``, ``trades`` and ``fills`` are
engine seqs when the flow is processed from a fresh engine. Nothing is written anywhere.
Errors of the decoder (a damaged or truncated file, legacy DBZ) raise InputError naming the file.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Callable, Iterator

import numpy as np

from exsim.exchange.errors import InputError
from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Kind, OrderType, Side, Tif

__all__ = ["load_dbn", "iter_dbn", "dbn_symbols", "DbnData", "DbnSymbol", "CONSISTENT_DTYPE", "MBP_DTYPE",
           "NO_SIDE", "MBP_LEVELS"]

MBP_LEVELS = 10
NO_SIDE = 2                       # aggressor_side of a trade whose side the venue did not say
_PRICE_UNIT = 10 ** 9             # DBN prices are int64 multiples of 1e-9
_UNDEF_PRICE = (1 << 63) - 1
_UNDEF_I32 = (1 << 31) - 1
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

CONSISTENT_DTYPE = np.dtype(
    [("seq", "<i8"), ("ts", "<i8"), ("sequence", "<u8"), ("record", "<i8"), ("symbol", "<u4")])
MBP_DTYPE = np.dtype(
    [("ts", "<i8"), ("record", "<i8"), ("sequence", "<u8"), ("symbol", "<u4"), ("levels", "u1"),
     ("bid_px", "<i8", (MBP_LEVELS,)), ("bid_sz", "<i8", (MBP_LEVELS,)), ("bid_ct", "<i4", (MBP_LEVELS,)),
     ("ask_px", "<i8", (MBP_LEVELS,)), ("ask_sz", "<i8", (MBP_LEVELS,)), ("ask_ct", "<i4", (MBP_LEVELS,))])
# an empty level of ``mbp`` has price 0, size 0 and count 0


@dataclass(frozen=True)
class DbnSymbol:
    """One instrument of a DBN file as an exsim symbol."""

    id: int                  # exsim symbol id (0, 1, ... in order of first appearance)
    name: str
    instrument_id: int       # Databento's instrument id
    tick: int                # price of one tick in DBN units of 1e-9
    lot_size: int = 1        # the venue's round lot (metadata; quantities stay in DBN units)
    defined: bool = False    # tick and lot size came from an instrument definition
    synced: bool = False     # an MBO clear (R) was seen: the book holds every resting order

    @property
    def tick_size(self) -> float:
        """The price of one tick as a float (for ``Engine.add_symbol``)."""
        return self.tick / _PRICE_UNIT


@dataclass
class DbnData:
    """A loaded DBN file (or one batch of it); see the module docstring for each field."""

    symbols: list[DbnSymbol]
    orders: np.ndarray         # ORDER_DTYPE
    record: np.ndarray         # int64 per order row: index of the DBN record it came from
    consistent: np.ndarray     # CONSISTENT_DTYPE, one per MBO record carrying F_LAST
    trades: np.ndarray         # FILL_DTYPE: aggressor's order id in its side's slot, trade_id from 1
    fills: np.ndarray          # FILL_DTYPE: resting order's id in its side's slot
    mbp: np.ndarray            # MBP_DTYPE
    l2: np.ndarray             # L2_DTYPE
    counts: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)   # dataset, schema, start, end, version

    def symbol_specs(self):
        """Return the symbols as ``scenarios.SymbolSpec`` (name, tick_size), in id order."""
        from exsim.scenarios.scenario import SymbolSpec
        return [SymbolSpec(s.name, s.tick_size) for s in self.symbols]


def _decimal_tick(tick: str | None, path: str) -> int | None:
    if tick is None:
        return None
    try:
        t = Decimal(str(tick)) * _PRICE_UNIT
    except ArithmeticError as exc:
        raise InputError(f"{path}: tick {tick!r} is not a decimal number") from exc
    if t <= 0 or t != t.to_integral_value():
        raise InputError(f"{path}: tick {tick!r} must be > 0 and a multiple of 1e-9")
    return int(t)


class _Converter:
    """Converts decoded records, keeping the per-instrument books and symbols across batches."""

    def __init__(self, path: str, tick: int | None, midday: str):
        if midday not in ("drop", "refuse"):
            raise InputError(f"{path}: midday must be 'drop' or 'refuse', got {midday!r}")
        self.path, self.default_tick, self.midday = path, tick, midday
        self.symbols: dict[int, DbnSymbol] = {}     # instrument id -> symbol
        self.used: set[int] = set()                 # instruments whose prices were converted
        self.names: dict[int, str] = {}             # instrument id -> name from the mappings
        self.books: dict[int, dict[int, list]] = {}  # instrument id -> order id -> [side, price, qty]
        self.shown: dict[int, tuple[dict, dict]] = {}   # instrument id -> MBP levels (bid, ask)
        self.seq = 0            # flow rows emitted so far (the engine seq after them)
        self.index = 0          # index of the next record
        self.trade_id = 0
        self.metadata: dict = {}
        self.only_definitions = False   # while reading a separate definitions file
        self.cache: dict[int, list] = {}   # instrument id -> [book, symbol id, tick] (see _state)
        self.counts = {k: 0 for k in ("mbo", "mbp", "trades", "definitions", "other", "unknown_order",
                                      "modify_as_add", "duplicate_add", "over_cancel", "clears")}

    # ---------------------------------------------------------------- symbols
    def _fail(self, what: str):
        raise InputError(f"{self.path}, record {self.index}: {what}")

    def symbol(self, iid: int) -> DbnSymbol:
        s = self.symbols.get(iid)
        if s is None:
            name = self._unique(self.names.get(iid, f"ID{iid}"), iid)
            s = DbnSymbol(len(self.symbols), name, iid, self.default_tick or 1)
            self.symbols[iid] = s
        return s

    def _unique(self, name: str, iid: int) -> str:
        taken = {s.name for s in self.symbols.values() if s.instrument_id != iid}
        return name if name not in taken else f"{name}.{iid}"

    def definition(self, r):
        self.counts["definitions"] += 1
        iid = r.instrument_id
        inc, lot = r.min_price_increment, r.min_lot_size_round_lot
        tick = inc if 0 < inc < _UNDEF_PRICE else (self.default_tick or 1)
        lot = lot if 0 < lot < _UNDEF_I32 else 1
        old = self.symbols.get(iid)
        if old is not None and iid in self.used and old.tick != tick:
            self._fail(f"the definition of instrument {iid} sets tick {tick}e-9 after its records were "
                       f"converted with tick {old.tick}e-9 (definitions must come first)")
        self.cache.pop(iid, None)
        name = self._unique(r.raw_symbol or self.names.get(iid, f"ID{iid}"), iid)
        sid = old.id if old is not None else len(self.symbols)
        synced = old.synced if old is not None else False
        self.symbols[iid] = DbnSymbol(sid, name, iid, tick, lot, True, synced)

    def ticks(self, s: DbnSymbol, price: int) -> int:
        if price == _UNDEF_PRICE:
            self._fail(f"an order of {s.name} has no price")
        q, rem = divmod(price, s.tick)
        if rem:
            self._fail(f"price {price}e-9 of {s.name} is not a whole number of ticks of {s.tick}e-9 "
                       f"(give the tick, or a definitions file)")
        self.used.add(s.instrument_id)
        return q

    # ---------------------------------------------------------------- one batch
    def convert(self, records: list) -> DbnData:
        # the batch allocates millions of small acyclic objects: a cyclic GC pass over them
        # would cost a fifth of the conversion and free nothing
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._convert(records)
        finally:
            if enabled:
                gc.enable()

    def scan(self, records: list) -> None:
        """Register the symbols ``records`` create in ``convert``, in the same order, converting
        nothing (``dbn_symbols``)."""
        symbols, only_definitions = self.symbols, self.only_definitions
        for r in records:
            kind = type(r).__name__
            if kind in _SYMBOL_KINDS:
                if not only_definitions and r.instrument_id not in symbols:
                    self.symbol(r.instrument_id)
            elif kind.startswith("InstrumentDefMsg"):
                self.definition(r)
            elif kind == "Metadata":
                self.meta(r)
                self.index -= 1     # the metadata is not a numbered record
        self.index += len(records)

    def _convert(self, records: list) -> DbnData:
        rows, oids, cons = [], [], []
        trades, fills, mbp, l2 = [], [], [], []
        counts = self.counts
        for r in records:
            kind = type(r).__name__
            if self.only_definitions and not kind.startswith(("InstrumentDefMsg", "Metadata")):
                self.index += 1
                continue
            if kind == "MBOMsg":
                counts["mbo"] += 1
                self.mbo(r, rows, oids, cons, trades, fills)
            elif kind in _MBP_KINDS:
                counts["mbp"] += 1
                self.book_levels(r, mbp, l2)
                if kind in _TRADING_MBP and r.action == "T":
                    self.trade(r, trades, r.side, 0, len(rows))
            elif kind == "TradeMsg":
                self.trade(r, trades, r.side, 0, len(rows))
            elif kind.startswith("InstrumentDefMsg"):
                self.definition(r)
            elif kind == "Metadata":
                self.meta(r)
                continue
            else:
                counts["other"] += 1
            self.index += 1
        out = self._arrays(rows, oids, cons, trades, fills, mbp, l2)
        self.seq += len(rows)
        return out

    def meta(self, m):
        self.metadata = {"dataset": m.dataset, "schema": m.schema, "start": m.start, "end": m.end,
                         "version": m.version}
        if str(m.stype_out) in ("instrument_id", "SType.INSTRUMENT_ID"):
            for raw, spans in (m.mappings or {}).items():
                for span in spans:
                    try:
                        self.names.setdefault(int(span["symbol"]), raw)
                    except (KeyError, ValueError, TypeError):
                        continue

    def _state(self, iid: int) -> list:
        """[order book dict, symbol id, tick] of an instrument, cached for the MBO loop."""
        st = self.cache.get(iid)
        if st is None:
            s = self.symbols.get(iid) or self.symbol(iid)
            self.used.add(iid)
            st = self.cache[iid] = [self.books.setdefault(iid, {}), s.id, s.tick]
        return st

    def mbo(self, r, rows, oids, cons, trades, fills):
        # the hot loop of an MBO file: plain ints, one tuple per flow row, no helper calls on
        # the common path (about half the time of going through ticks() and a row helper)
        act = r.action.value
        iid = r.instrument_id
        book, sid, tick = self.cache.get(iid) or self._state(iid)
        ts, oid, idx = r.ts_recv, r.order_id, self.index
        if act == "A" or act == "M":
            side = _SIDE.get(r.side.value)
            size = r.size
            px, rem = divmod(r.price, tick)
            if side is None or size <= 0 or rem or r.price == _UNDEF_PRICE:
                self._bad_order(r, act, side, size)
            o = book.get(oid)
            if act == "M" and o is not None:
                o[1], o[2] = px, size
                rows.append((ts, px, size, sid, _MODIFY, o[0], idx))
                oids.append(oid)
            else:
                if o is not None:
                    self.counts["duplicate_add"] += 1
                    rows.append((ts, o[1], 0, sid, _CANCEL, o[0], idx))
                    oids.append(oid)
                elif act == "M":
                    self.counts["modify_as_add"] += 1
                book[oid] = [side, px, size]
                rows.append((ts, px, size, sid, _NEW, side, idx))
                oids.append(oid)
        elif act == "C":
            o = book.get(oid)
            if o is None:
                self._unknown(self.symbols[iid])
            else:
                left = o[2] - r.size
                if left > 0:
                    o[2] = left
                    rows.append((ts, o[1], left, sid, _MODIFY, o[0], idx))
                else:
                    if left < 0:
                        self.counts["over_cancel"] += 1
                    del book[oid]
                    rows.append((ts, o[1], 0, sid, _CANCEL, o[0], idx))
                oids.append(oid)
        elif act == "R":
            self.counts["clears"] += 1
            for x, o in book.items():
                rows.append((ts, o[1], 0, sid, _CANCEL, o[0], idx))
                oids.append(x)
            book.clear()
            s = self.symbols[iid]
            if not s.synced:
                self.symbols[iid] = replace(s, synced=True)
        elif act == "T":
            self.trade(r, trades, r.side, oid, len(rows))
        elif act == "F":
            self.trade(r, fills, r.side, oid, len(rows))
        if r.flags & 128:   # F_LAST
            cons.append((self.seq + len(rows), ts, r.sequence, idx, sid))

    def _bad_order(self, r, act, side, size):
        s = self.symbols[r.instrument_id]
        if side is None:
            self._fail(f"an {act} record of {s.name} has no side")
        if size <= 0:
            self._fail(f"an {act} record of {s.name} has size {size}")
        self.ticks(s, r.price)

    def _unknown(self, s: DbnSymbol):
        if not s.synced and self.midday == "refuse":
            self._fail(f"a record names an order of {s.name} the file never added: the file starts "
                       f"mid-day without a clear and snapshot (load with midday='drop' to skip such records)")
        self.counts["unknown_order"] += 1

    def trade(self, r, out, side, oid, pending=0):
        s = self.symbols.get(r.instrument_id) or self.symbol(r.instrument_id)
        self.counts["trades"] += 1
        sd = _SIDE.get(side.value, NO_SIDE)
        self.trade_id += 1
        out.append((self.seq + pending, r.ts_recv, self.trade_id, self.ticks(s, r.price), r.size,
                    oid if sd == Side.BUY else 0, oid if sd == Side.SELL else 0, s.id, 0, 0, sd))

    def book_levels(self, r, mbp, l2):
        s = self.symbols.get(r.instrument_id) or self.symbol(r.instrument_id)
        lv = r.levels
        row = [r.ts_recv, self.index, getattr(r, "sequence", 0), s.id, len(lv)]
        cols = [[0] * MBP_LEVELS for _ in range(6)]
        now = ({}, {})
        for k, p in enumerate(lv[:MBP_LEVELS]):
            bct, act = getattr(p, "bid_ct", 0), getattr(p, "ask_ct", 0)
            if p.bid_px != _UNDEF_PRICE and p.bid_sz:
                b = self.ticks(s, p.bid_px)
                cols[0][k], cols[1][k], cols[2][k] = b, p.bid_sz, bct
                now[0][b] = (p.bid_sz, bct)
            if p.ask_px != _UNDEF_PRICE and p.ask_sz:
                a = self.ticks(s, p.ask_px)
                cols[3][k], cols[4][k], cols[5][k] = a, p.ask_sz, act
                now[1][a] = (p.ask_sz, act)
        mbp.append(tuple(row + cols))
        before = self.shown.get(s.instrument_id, ({}, {}))
        for side in (0, 1):
            old, new = before[side], now[side]
            for px, (q, c) in new.items():
                if old.get(px) != (q, c):
                    l2.append((self.index, r.ts_recv, px, q, s.id, c, side))
            for px in old:
                if px not in new:
                    l2.append((self.index, r.ts_recv, px, 0, s.id, 0, side))
        self.shown[s.instrument_id] = now

    def _arrays(self, rows, oids, cons, trades, fills, mbp, l2) -> DbnData:
        orders = np.zeros(len(rows), ORDER_DTYPE)
        a = np.array(rows, np.int64).reshape(-1, 7)
        if rows:
            orders["ts"], orders["price"], orders["qty"] = a[:, 0], a[:, 1], a[:, 2]
            orders["symbol"], orders["kind"], orders["side"] = a[:, 3], a[:, 4], a[:, 5]
            orders["order_id"] = np.array(oids, np.uint64)
        orders["order_type"], orders["tif"] = OrderType.LIMIT, Tif.GTC
        return DbnData(
            symbols=self.symbol_list(), orders=orders, record=a[:, 6].copy(),
            consistent=np.array(cons, CONSISTENT_DTYPE), trades=np.array(trades, FILL_DTYPE),
            fills=np.array(fills, FILL_DTYPE), mbp=np.array(mbp, MBP_DTYPE),
            l2=np.array(l2, L2_DTYPE), counts=dict(self.counts), metadata=dict(self.metadata))

    def symbol_list(self) -> list[DbnSymbol]:
        return sorted(self.symbols.values(), key=lambda s: s.id)


_SIDE = {"B": int(Side.BUY), "A": int(Side.SELL)}
_NEW, _CANCEL, _MODIFY = int(Kind.NEW), int(Kind.CANCEL), int(Kind.MODIFY)
_TRADING_MBP = ("MBP1Msg", "MBP10Msg", "CMBP1Msg")   # MBP records that carry an action
_MBP_KINDS = ("MBP1Msg", "MBP10Msg", "BBOMsg", "CMBP1Msg", "CBBOMsg")
_SYMBOL_KINDS = frozenset(("MBOMsg", "TradeMsg") + _MBP_KINDS)   # records that create their symbol


def _chunks(path: str, batch_bytes: int) -> Iterator[bytes]:
    try:
        with open(path, "rb") as fh:
            while True:
                b = fh.read(batch_bytes)
                if not b:
                    return
                yield b
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc


def _decoder(path: str, first: bytes):
    import databento_dbn as dbn
    zstd = first[:4] == _ZSTD_MAGIC
    if not zstd and first[:3] != b"DBN":
        raise InputError(f"{path}: not a DBN file: it starts neither with 'DBN' nor with zstd's "
                         f"magic bytes (legacy DBZ files are not read by databento-dbn)")
    return dbn.DBNDecoder(compression=dbn.Compression.ZSTD if zstd else dbn.Compression.NONE), dbn.DBNError


def iter_dbn(path: str | os.PathLike, *, tick: str | None = None, definitions: str | os.PathLike | None = None,
             midday: str = "drop", batch_bytes: int = 1 << 24,
             progress: Callable[[int, int], None] | None = None) -> Iterator[DbnData]:
    """Yield the file's records converted batch by batch (each DbnData holds that batch's rows;
    ``symbols`` and ``counts`` are cumulative; seqs and record indices count from the file's start).

    ``tick``: decimal price of one tick for instruments without a definition; ``definitions``: a
    DBN file of instrument definitions read first; ``midday``: "drop" or "refuse" (module
    docstring); ``progress(bytes_read, total_bytes)`` is called after each batch.
    Raises InputError for an unreadable, damaged or truncated file, a price that is not a whole
    number of ticks, an add or modify without side or size, or a file starting mid-day with
    ``midday="refuse"``.
    """
    path = os.fspath(path)
    conv = _converter(path, tick, definitions, midday, batch_bytes)
    yield from _batches(path, conv.convert, conv, batch_bytes, progress)


def dbn_symbols(path: str | os.PathLike, *, tick: str | None = None,
                definitions: str | os.PathLike | None = None, batch_bytes: int = 1 << 24,
                progress: Callable[[int, int], None] | None = None) -> list[DbnSymbol]:
    """Return the symbols (in id order) that ``iter_dbn`` with the same arguments reports after its
    last batch, from one pass that decodes the file batch by batch and converts no record. They
    are equal but for ``synced``, which only the conversion learns (False here).

    The arguments are ``iter_dbn``'s. Raises InputError for an unreadable, damaged or truncated
    file or a bad ``tick``; the errors of converting a record (a price off the tick grid, a mid-day
    start with ``midday="refuse"``) come only from ``iter_dbn``.
    """
    path = os.fspath(path)
    conv = _converter(path, tick, definitions, "drop", batch_bytes)
    for _ in _batches(path, conv.scan, conv, batch_bytes, progress):
        pass
    return conv.symbol_list()


def _converter(path: str, tick: str | None, definitions, midday: str, batch_bytes: int) -> _Converter:
    """A converter for ``path`` that has already read the ``definitions`` file, if any."""
    conv = _Converter(path, _decimal_tick(tick, path), midday)
    if definitions is not None:
        conv.only_definitions = True
        for _ in _batches(os.fspath(definitions), conv.scan, conv, batch_bytes, None):
            pass
        conv.index, conv.metadata, conv.only_definitions = 0, {}, False
    return conv


def _batches(path: str, step, conv: _Converter, batch_bytes: int, progress):
    """Yield ``step(records)`` for the records of each ``batch_bytes`` chunk of ``path``."""
    try:
        total = os.path.getsize(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    dec, err, done = None, None, 0
    for chunk in _chunks(path, max(int(batch_bytes), 1 << 12)):
        if dec is None:
            dec, err = _decoder(path, chunk)
        done += len(chunk)
        try:
            dec.write(chunk)
            records = dec.decode()
        except err as exc:
            raise InputError(f"{path}: DBN decoding failed near byte {done} ({exc})") from exc
        yield step(records)
        if progress is not None:
            progress(done, total)
    if dec is None:
        raise InputError(f"{path}: empty file, expected DBN metadata")
    try:
        rest = len(dec.buffer())
    except err as exc:
        raise InputError(f"{path}: DBN decoding failed at the end ({exc})") from exc
    if rest:
        raise InputError(f"{path}: truncated: {rest} bytes of an incomplete record at the end "
                         f"(after record {conv.index})")
    if not conv.metadata:
        raise InputError(f"{path}: truncated: no complete DBN metadata")


def load_dbn(path: str | os.PathLike, **kwargs) -> DbnData:
    """Read a whole DBN file (``.dbn`` or zstd ``.dbn.zst``); return one DbnData.

    Takes the keyword arguments of ``iter_dbn``; raises what it raises.
    """
    parts = list(iter_dbn(path, **kwargs))
    last = parts[-1]
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])   # noqa: E731
    return DbnData(symbols=last.symbols, orders=cat("orders"), record=cat("record"),
                   consistent=cat("consistent"), trades=cat("trades"), fills=cat("fills"),
                   mbp=cat("mbp"), l2=cat("l2"), counts=last.counts, metadata=last.metadata)
