"""Encode an exsim run as Databento DBN with ``databento-dbn``'s own record classes and metadata.

``write_mbo`` runs an ORDER_DTYPE flow through a fresh engine and writes what a venue publishing
market-by-order data would have sent for that run, in Databento's normalisation:
- per instrument, one definition record (name, tick as ``min_price_increment``, round lot) and a
  leading ``R`` (clear) with ``F_LAST``, so the file is synced from its first record;
- per engine message that changed the book or traded, its records, the last one with ``F_LAST``
  and every one with ``sequence`` = the engine seq of the message: for each fill a ``T``
  (aggressor side and id), an ``F`` (resting side and id) and a ``C`` removing the filled lots from
  the resting order; cancels of resting orders (user, self-trade prevention) as ``C``; a MODIFY
  that keeps its price as ``M``, one that moves and trades as ``C`` of the whole order, its fills,
  then an ``A`` of what rests; a NEW that rests as ``A`` with the quantity left after its fills.
- with ``mbp10_path``, an MBP-10 file holding one record per such message: the engine's top ten
  levels of that symbol after it.

It returns the exsim messages those records stand for (``expected``), built from the engine's
events, not from the records, so a loader can be checked against it. Messages that change
nothing (rejects, an IOC that found nothing) write no record. Prices are ticks x ``tick`` DBN
units; ``ts_event`` = ``ts_recv`` = the message's ts. Used by the DBN tests and benchmarks.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np

from exsim.exchange.engine import Engine
from exsim.exchange.schema import ORDER_DTYPE, Event, Kind, OrderType, Side, Tif

__all__ = ["write_mbo", "write_dbn", "INSTRUMENT_BASE"]

INSTRUMENT_BASE = 1000      # instrument id of exsim symbol k is INSTRUMENT_BASE + k
_F_LAST = 128
_PUBLISHER = 1


def write_dbn(path: str | os.PathLike, records: list, *, schema, symbols: dict[str, int],
              start: int = 0, dataset: str = "EXSIM.SIM") -> None:
    """Write DBN metadata and ``records`` (databento-dbn record objects) to ``path``.

    ``symbols`` maps raw symbols to instrument ids (the metadata's mappings); a path ending in
    ``.zst`` is zstd-compressed. Returns None; raises OSError if the file cannot be written.
    """
    import databento_dbn as dbn
    import zstandard

    # the mapping types are Protocols: any object with their attributes will do
    maps = [SimpleNamespace(raw_symbol=raw, intervals=[SimpleNamespace(
        start_date=_day(start), end_date=_day(start, 1), symbol=str(iid))]) for raw, iid in symbols.items()]
    meta = dbn.Metadata(dataset=dataset, start=start, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=schema, symbols=list(symbols),
                        mappings=maps)
    blob = bytes(meta) + b"".join(bytes(r) for r in records)
    if os.fspath(path).endswith(".zst"):
        blob = zstandard.ZstdCompressor(level=3).compress(blob)
    with open(path, "wb") as fh:
        fh.write(blob)


def _day(ts: int, plus: int = 0):
    import datetime
    d = datetime.datetime.fromtimestamp(ts / 1e9, datetime.timezone.utc).date()
    return d + datetime.timedelta(days=plus)


def write_mbo(path: str | os.PathLike, orders: np.ndarray, symbols: list[tuple[str, int, int]], *,
              mbp10_path: str | os.PathLike | None = None, engine_kwargs: dict | None = None) -> np.ndarray:
    """Run ``orders`` on a fresh engine and write the run as MBO (module docstring).

    ``symbols``: (name, tick in DBN units of 1e-9, round lot) per exsim symbol id. Returns the
    ORDER_DTYPE messages the records stand for. Raises OSError if a file cannot be written.
    """
    import databento_dbn as dbn

    eng = Engine(**(engine_kwargs or {}))
    for name, tick, _ in symbols:
        eng.add_symbol(name, tick_size=tick / 1e9)
    start = int(orders["ts"][0]) if len(orders) else 0
    recs, mbp, expected = [], [], []
    for k, (name, tick, lot) in enumerate(symbols):
        recs.append(dbn.InstrumentDefMsg(
            publisher_id=_PUBLISHER, instrument_id=INSTRUMENT_BASE + k, ts_event=start, ts_recv=start,
            min_price_increment=tick, display_factor=10 ** 9, raw_symbol=name, asset=name[:7],
            security_type="STK", instrument_class=dbn.InstrumentClass.STOCK,
            security_update_action=dbn.SecurityUpdateAction.ADD, min_lot_size_round_lot=lot))
    for k in range(len(symbols)):
        recs.append(_mbo(dbn, k, start, 0, 0, 0, "R", "N", 0, _F_LAST))
    book: dict[tuple[int, int], list] = {}     # (symbol, id) -> [side, price, qty]
    tick_of = [t for _, t, _ in symbols]

    def exp(ts, sym, oid, px, qty, kind, side):
        expected.append((ts, oid, px, qty, sym, kind, side))

    for i in range(len(orders)):
        m = orders[i:i + 1]
        res = eng.process(m)
        seq = eng.seq
        sym, ts, oid = int(m["symbol"][0]), int(m["ts"][0]), int(m["order_id"][0])
        tk, iid = tick_of[sym] if sym < len(symbols) else 1, INSTRUMENT_BASE + sym
        ev, fills = res.events, res.fills
        out = []
        moved = int(m["kind"][0]) == Kind.MODIFY and len(fills) > 0 and (sym, oid) in book
        if moved:   # the order leaves its level whole, trades, and rests anew
            sd, px, q = book.pop((sym, oid))
            moved_side = sd
            out.append(_mbo(dbn, sym, ts, seq, oid, px * tk, "C", sd, q, 0))
            exp(ts, sym, oid, px, 0, Kind.CANCEL, sd)
        for f in fills:
            agg = int(f["aggressor_side"])
            a_id, r_id = (int(f["buy_order_id"]), int(f["sell_order_id"]))[::1 if agg == Side.BUY else -1]
            px, q = int(f["price"]), int(f["qty"])
            out.append(_mbo(dbn, sym, ts, seq, a_id, px * tk, "T", agg, q, 0))
            out.append(_mbo(dbn, sym, ts, seq, r_id, px * tk, "F", 1 - agg, q, 0))
            out.append(_mbo(dbn, sym, ts, seq, r_id, px * tk, "C", 1 - agg, q, 0))
            o = book[(sym, r_id)]
            o[2] -= q
            if o[2]:
                exp(ts, sym, r_id, px, o[2], Kind.MODIFY, o[0])
            else:
                del book[(sym, r_id)]
                exp(ts, sym, r_id, px, 0, Kind.CANCEL, o[0])
        for e in ev:
            eid, typ = int(e["order_id"]), int(e["event"])
            if typ == Event.CANCELLED and (sym, eid) in book:
                sd, px, q = book.pop((sym, eid))
                out.append(_mbo(dbn, sym, ts, seq, eid, px * tk, "C", sd, q, 0))
                exp(ts, sym, eid, px, 0, Kind.CANCEL, sd)
        last = {int(e["order_id"]): e for e in ev}.get(oid)
        kind = int(m["kind"][0])
        rests = last is not None and int(last["event"]) in (Event.ACCEPTED, Event.PARTIAL, Event.MODIFIED) \
            and int(last["leaves_qty"]) > 0 and kind != Kind.CANCEL
        if rests and kind == Kind.NEW and int(m["order_type"][0]) == OrderType.LIMIT and int(m["tif"][0]) == Tif.GTC:
            sd, px, q = int(m["side"][0]), int(m["price"][0]), int(last["leaves_qty"])
            book[(sym, oid)] = [sd, px, q]
            out.append(_mbo(dbn, sym, ts, seq, oid, px * tk, "A", sd, q, 0))
            exp(ts, sym, oid, px, q, Kind.NEW, sd)
        elif rests and kind == Kind.MODIFY:
            px, q = int(m["price"][0]), int(last["leaves_qty"])
            if moved:
                sd = moved_side
                book[(sym, oid)] = [sd, px, q]
                out.append(_mbo(dbn, sym, ts, seq, oid, px * tk, "A", sd, q, 0))
                exp(ts, sym, oid, px, q, Kind.NEW, sd)
            elif (sym, oid) in book:
                o = book[(sym, oid)]
                if (o[1], o[2]) != (px, q):
                    o[1], o[2] = px, q
                    out.append(_mbo(dbn, sym, ts, seq, oid, px * tk, "M", o[0], q, 0))
                    exp(ts, sym, oid, px, q, Kind.MODIFY, o[0])
        if out:
            out[-1].flags = _F_LAST
            recs.extend(out)
            if mbp10_path is not None:
                mbp.append(_mbp10(dbn, eng, sym, iid, ts, seq, tk))
    names = {name: INSTRUMENT_BASE + k for k, (name, _, _) in enumerate(symbols)}
    write_dbn(path, recs, schema=None, symbols=names, start=start)
    if mbp10_path is not None:
        write_dbn(mbp10_path, mbp, schema=dbn.Schema.MBP_10, symbols=names, start=start)
    out = np.zeros(len(expected), ORDER_DTYPE)
    if expected:
        a = np.array(expected, dtype=object)
        for j, f in enumerate(("ts", "order_id", "price", "qty", "symbol", "kind", "side")):
            out[f] = a[:, j].astype(np.uint64 if f == "order_id" else np.int64)
    out["order_type"], out["tif"] = OrderType.LIMIT, Tif.GTC
    return out


def _mbo(dbn, sym, ts, seq, oid, price, action, side, size, flags):
    sd = {0: "B", 1: "A", "N": "N", 2: "N"}.get(side, side)
    return dbn.MBOMsg(publisher_id=_PUBLISHER, instrument_id=INSTRUMENT_BASE + sym, ts_event=ts,
                      order_id=oid, price=price if action != "R" else (1 << 63) - 1, size=size,
                      action=dbn.Action(action), side=dbn.Side(sd), ts_recv=ts, flags=flags, sequence=seq)


def _mbp10(dbn, eng, sym, iid, ts, seq, tk):
    bids, asks = eng.depth(sym, 10)
    levels = []
    for k in range(10):
        b = bids[k] if k < len(bids) else None
        a = asks[k] if k < len(asks) else None
        levels.append(dbn.BidAskPair(
            bid_px=int(b["price"]) * tk if b is not None else (1 << 63) - 1,
            ask_px=int(a["price"]) * tk if a is not None else (1 << 63) - 1,
            bid_sz=int(b["qty"]) if b is not None else 0, ask_sz=int(a["qty"]) if a is not None else 0,
            bid_ct=int(b["count"]) if b is not None else 0, ask_ct=int(a["count"]) if a is not None else 0))
    return dbn.MBP10Msg(publisher_id=_PUBLISHER, instrument_id=iid, ts_event=ts, price=(1 << 63) - 1,
                        size=0, action=dbn.Action("N"), side=dbn.Side("N"), depth=0, ts_recv=ts, flags=_F_LAST, sequence=seq,
                        levels=levels)
