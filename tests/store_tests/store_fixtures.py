"""Shared helpers for the store tests: synthetic batches and a tiny deterministic fake engine.

The fake engine exists so the session can be tested without exchange/engine.py; it implements
``exchange.protocol.EngineProtocol``, the members the session relies on.
"""

from __future__ import annotations

import hashlib
import os
import json
import pickle
from typing import NamedTuple

import numpy as np

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE


def make_orders(n: int, seed: int = 0, n_symbols: int = 3, ts0: int = 1_700_000_000_000_000_000) -> np.ndarray:
    """A seeded batch of plausible order messages."""
    rng = np.random.default_rng(seed)
    o = np.zeros(n, ORDER_DTYPE)
    o["ts"] = ts0 + np.cumsum(rng.integers(0, 5000, n))
    o["order_id"] = rng.integers(1, 1 << 40, n, dtype=np.uint64)
    o["price"] = 10_000 + rng.integers(-50, 50, n)
    o["qty"] = rng.integers(1, 500, n)
    o["symbol"] = rng.integers(0, n_symbols, n)
    o["trader"] = rng.integers(0, 20, n)
    o["kind"] = rng.integers(0, 3, n)
    o["side"] = rng.integers(0, 2, n)
    return o


def make_outputs(orders: np.ndarray, first_seq: int, seed: int = 0):
    """Fills, l2, events for an order batch: deterministic functions of the orders."""
    rng = np.random.default_rng(seed + 7)
    n = orders.size
    seq = np.arange(first_seq, first_seq + n, dtype=np.int64)
    ev = np.zeros(n, EVENT_DTYPE)
    ev["seq"], ev["ts"], ev["symbol"], ev["order_id"] = seq, orders["ts"], orders["symbol"], orders["order_id"]
    ev["leaves_qty"] = orders["qty"]
    # the event fields of trading phases: a price on every other row, a phase on every row
    ev["price"][::2], ev["phase"] = orders["price"][::2], orders["symbol"] % 8
    l2 = np.zeros(n, L2_DTYPE)
    l2["seq"], l2["ts"], l2["symbol"], l2["price"] = seq, orders["ts"], orders["symbol"], orders["price"]
    l2["qty"], l2["side"], l2["count"] = orders["qty"] * 3, orders["side"], rng.integers(1, 9, n)
    k = np.flatnonzero(orders["kind"] == 0)[::3]
    fi = np.zeros(k.size, FILL_DTYPE)
    fi["seq"], fi["ts"], fi["symbol"], fi["price"], fi["qty"] = seq[k], orders["ts"][k], orders["symbol"][k], \
        orders["price"][k], orders["qty"][k]
    fi["trade_id"] = np.arange(k.size) + first_seq
    fi["buy_order_id"], fi["sell_order_id"] = orders["order_id"][k], orders["order_id"][k] + 1
    return fi, l2, ev


def make_batch(first_seq: int, n: int, seed: int = 0, n_symbols: int = 3):
    """(orders, fills, l2, events) for seqs first_seq .. first_seq + n - 1."""
    o = make_orders(n, seed, n_symbols, ts0=1_700_000_000_000_000_000 + first_seq * 1000)
    return (o, *make_outputs(o, first_seq, seed))


class FakeResult(NamedTuple):
    fills: np.ndarray
    l2: np.ndarray
    events: np.ndarray


class FakeEngine:
    """Deterministic stand-in for exchange.Engine: outputs depend on the orders and the state."""

    def __init__(self, stp: str = "none"):
        self.stp = stp
        self.seq = 0
        self.symbols: list[str] = []
        self.acc = 0

    def add_symbol(self, name: str, tick_size: int = 1) -> int:
        self.symbols.append(name)
        return len(self.symbols) - 1

    def symbol_id(self, symbol) -> int:
        if isinstance(symbol, int) and 0 <= symbol < len(self.symbols):
            return symbol
        if symbol in self.symbols:
            return self.symbols.index(symbol)
        raise UsageError(f"unknown symbol {symbol!r}")

    def process(self, orders: np.ndarray, *, out=None) -> FakeResult:
        """Fresh outputs every call: an engine may ignore ``out`` (the protocol allows it)."""
        first = self.seq + 1
        fills, l2, events = make_outputs(orders, first, seed=self.acc % 1000)
        events["filled_qty"] = self.acc
        self.acc = (self.acc * 31 + int(orders["qty"].sum())) % (1 << 61)
        self.seq += orders.size
        return FakeResult(fills, l2, events)

    def config(self) -> dict:
        return {"stp": self.stp, "symbols": [{"name": s, "id": i} for i, s in enumerate(self.symbols)]}

    def checkpoint(self) -> bytes:
        return pickle.dumps((self.stp, self.seq, self.symbols, self.acc))

    @classmethod
    def restore(cls, blob: bytes) -> "FakeEngine":
        e = cls.__new__(cls)
        e.stp, e.seq, e.symbols, e.acc = pickle.loads(blob)
        return e

    def checkpoint_equals(self, blob) -> bool:
        return self.checkpoint() == bytes(blob)

    def state_hash(self) -> str:
        return hashlib.sha256(json.dumps([self.stp, self.seq, self.symbols, self.acc]).encode()).hexdigest()


def fake_engine_factory():
    """The engine class the session should restore with (FakeEngine)."""
    return FakeEngine


# why registered: Session.open restores only engine classes it was told about, never a class a
# catalog names (the crash tests reopen FakeEngine directories without passing engine_class=)
from exsim.store.session import register_engine_class  # noqa: E402

register_engine_class(FakeEngine)


def sealed_run(tmp_path, scenario: str, batches: int, n: int, seed: int,
               seal_last: bool = True) -> str:
    """A data directory of ``batches`` batches of ``n`` FakeEngine orders (symbols A, B, C),
    sealed one by one (the last left in the WAL unless ``seal_last``); returns its path."""
    from exsim.store import Session

    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    d = str(tmp_path / "run")
    s = Session.create(d, eng, run_info={"scenario": scenario, "seed": 1},
                       seal_in_background=False, seal_every=10**12, checkpoint_every=10**12)
    for i in range(batches):
        s.process(make_orders(n, seed=seed + i))
        if seal_last or i < batches - 1:
            s.seal()
    s.close()
    return d


def forge_catalog(data_dir, table: str, key, **values) -> None:
    """Set ``values`` in the catalog row of ``table`` whose key is ``key``, with its row checksum
    (and its table's count/sum tally) recomputed: the edit of someone who knows the format, so a
    test reaches the defences behind the catalog's own checksums."""
    import sqlite3

    from exsim.store.catalog import _KEY, _ROW_COLUMNS, _row_crc

    con = sqlite3.connect(os.path.join(os.fspath(data_dir), "catalog.sqlite"))
    try:
        kcol = _KEY[table]
        cols = [c for c, _ in _ROW_COLUMNS[table]]

        def reseal(tbl, k):
            row = con.execute(f"SELECT {', '.join(_ROW_COLUMNS[tbl][i][0] for i in range(len(_ROW_COLUMNS[tbl])))}, "
                              f"row_crc FROM {tbl} WHERE {_KEY[tbl]} = ?", [k]).fetchone()
            crc = _row_crc(tbl, row[:-1])
            con.execute(f"UPDATE {tbl} SET row_crc = ? WHERE {_KEY[tbl]} = ?", [crc, k])
            return row[-1], crc

        for c, v in values.items():
            assert c in cols, c
            con.execute(f"UPDATE {table} SET {c} = ? WHERE {kcol} = ?", [v, key])
        old, new = reseal(table, key)
        if table != "meta":
            tkey = f"rows:{table}"
            n, total = (int(x) for x in con.execute("SELECT value FROM meta WHERE key = ?",
                                                    [tkey]).fetchone()[0].split(":"))
            con.execute("UPDATE meta SET value = ? WHERE key = ?", [f"{n}:{total - old + new}", tkey])
            reseal("meta", tkey)
        con.commit()
    finally:
        con.close()


def wal_frames(path):
    """[(offset, FRAME4 fields)] of the records of a version-4+ WAL file."""
    from exsim.store.wal import FILE_HEADER, FRAME4, HCRC

    data = open(path, "rb").read()
    out, pos = [], FILE_HEADER.size
    while pos < len(data):
        fields = FRAME4.unpack_from(data, pos)
        out.append((pos, fields))
        pos += FRAME4.size + HCRC.size + fields[0]
    return out


def forge_wal_header(path, which: int, more_orders: int = 10):
    """Make record ``which`` of WAL file ``path`` claim ``more_orders`` more orders (its last seq
    moved to match), header checksum recomputed, payload untouched. Returns the claimed last
    seq."""
    import crc32c

    from exsim.store.wal import FRAME4, HCRC

    data = bytearray(open(path, "rb").read())
    pos, (length, crc, rtype, first, last, *counts) = wal_frames(path)[which]
    counts[0] += more_orders
    head = FRAME4.pack(length, crc, rtype, first, last + more_orders, *counts)
    data[pos:pos + FRAME4.size] = head
    data[pos + FRAME4.size:pos + FRAME4.size + HCRC.size] = HCRC.pack(crc32c.crc32c(head))
    open(path, "wb").write(bytes(data))
    return last + more_orders


def forge_zone_map(path: str, edit) -> None:
    """Call ``edit(zones)`` on a copy of segment ``path``'s zone map (a ZONE_DTYPE array) and
    write it back with the index checksum recomputed: a forgery the checksum cannot see."""
    import struct

    import crc32c

    from exsim.store import segment as sg

    data = bytearray(open(path, "rb").read())
    idx_off, idx_len = struct.unpack_from("<QI", data, len(data) - sg.FOOTER.size)
    at = idx_off + 1 + data[idx_off] + sg.INDEX_HEAD.size + sg.ZONE_HEAD.size
    with sg.SegmentFile(path) as f:
        length = f.meta["zones"].size * sg.ZONE_DTYPE.itemsize
    zones = np.frombuffer(bytes(data[at:at + length]), sg.ZONE_DTYPE).copy()
    edit(zones)
    data[at:at + length] = zones.tobytes()
    struct.pack_into("<I", data, len(data) - sg.FOOTER.size + 12,
                     crc32c.crc32c(bytes(data[idx_off:idx_off + idx_len])))
    open(path, "wb").write(bytes(data))


def legacy_orders(orders: np.ndarray) -> np.ndarray:
    """``orders`` (ORDER_DTYPE) as the 45-byte rows WAL files of versions 1-4 hold: the legacy
    fields only (store.tables.LEGACY_ORDER_DTYPE)."""
    return old_rows("orders", orders, 1)


def old_rows(table: str, rows: np.ndarray, version: int) -> np.ndarray:
    """``rows`` of ``table`` (today's dtype) as WAL files of format ``version`` hold them (packed,
    the fields of that version only: store.wal.format.wire)."""
    from exsim.store.wal.format import wire

    out = np.zeros(rows.size, wire(version)[table])
    for name in out.dtype.names:
        out[name] = rows[name]
    return out


def as_read(table: str, rows: np.ndarray, version: int) -> np.ndarray:
    """A copy of ``rows`` of ``table`` with the fields WAL files of format ``version`` lack set
    to 0: what a reader returns for rows an older exsim journaled."""
    from exsim.store.wal.format import wire

    out = rows.copy()
    for name in out.dtype.names:
        if name not in wire(version)[table].names:
            out[name] = 0
    return out


def without_added_fields(orders: np.ndarray) -> np.ndarray:
    """``as_read`` of order rows journaled in a version-1 file: every field added after the
    legacy row 0."""
    return as_read("orders", orders, 1)


def old_wal_file(path: str, version: int, file_no: int, batches, rtype: int = 3) -> str:
    """Write a WAL file as format ``version`` (1-5) wrote it: one record of type ``rtype`` (1 raw,
    2 lz4, 3 shuffled lz4) per ``(first_seq, (orders, fills, l2, events))`` of ``batches``, its
    rows those of that version (``old_rows``) and its frames too. Returns ``path``."""
    import crc32c
    import lz4.block

    from exsim.store.shuffle import shuffle
    from exsim.store.wal.format import BATCH, FILE_HEADER, FRAME, FRAME4, HCRC, INDEXED_VERSION, MAGIC

    body = []
    for first, batch in batches:
        arrays = [old_rows(t, a, version) for t, a in zip(("orders", "fills", "l2", "events"), batch)]
        orders = batch[0]
        head = BATCH.pack(first, *(a.size for a in arrays))
        planes = [a.view(np.uint8).reshape(-1) for a in arrays]
        if rtype == 3:
            raw = np.empty(len(head) + sum(p.size for p in planes), np.uint8)
            raw[:len(head)] = np.frombuffer(head, np.uint8)
            pos = len(head)
            for a, p in zip(arrays, planes):
                pos = shuffle(p, a.dtype.itemsize, raw, pos)
            raw = raw.tobytes()
        else:
            raw = head + b"".join(p.tobytes() for p in planes)
        payload = raw if rtype == 1 else \
            len(raw).to_bytes(4, "little") + lz4.block.compress(raw, store_size=False)
        crc = crc32c.crc32c(payload, crc32c.crc32c(bytes([rtype])))
        if version >= INDEXED_VERSION:
            frame = FRAME4.pack(len(payload), crc, rtype, first, first + orders.size - 1,
                                *(a.size for a in arrays))
        else:
            frame = FRAME.pack(len(payload), crc, rtype)
        body.append(frame + HCRC.pack(crc32c.crc32c(frame)) + payload)
    with open(path, "wb") as f:
        f.write(FILE_HEADER.pack(MAGIC, version, 0, file_no) + b"".join(body))
    return path
