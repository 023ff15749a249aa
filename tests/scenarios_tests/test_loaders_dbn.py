"""DBN loader: Databento's own test files against databento-dbn's decoder, and an exsim run written
as MBO (and MBP-10) with databento-dbn's encoder loading back into the same messages and books."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

dbn = pytest.importorskip("databento_dbn")

from exsim.exchange.engine import Engine  # noqa: E402
from exsim.exchange.errors import InputError  # noqa: E402
from exsim.exchange.schema import Kind, OrderType, Tif  # noqa: E402
from exsim.scenarios.data import shared_data_dir  # noqa: E402
from exsim.scenarios.generators.uniform import uniform_flow  # noqa: E402
from exsim.scenarios.loaders.dbn import dbn_symbols, iter_dbn, load_dbn  # noqa: E402
from exsim.scenarios.loaders.dbn_write import INSTRUMENT_BASE, write_mbo  # noqa: E402

_BASE = shared_data_dir()
DBN_DIR = (_BASE / "databento_dbn_tests") if _BASE else Path("/nonexistent")
needs_data = pytest.mark.skipif(not DBN_DIR.exists(), reason="shared DBN test files not present")
FILES = sorted(p.name for p in DBN_DIR.glob("*")) if DBN_DIR.exists() else []
BOOK_SCHEMAS = ("mbo", "mbp-1", "mbp-10", "tbbo", "trades", "definition", "bbo-1s", "bbo-1m",
                "cmbp-1", "cbbo-1s")


def _reference(path: Path):
    """databento-dbn's own decode of a file: (metadata, records), or the error it raises."""
    raw = path.read_bytes()
    zstd = raw[:4] == b"\x28\xb5\x2f\xfd"
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD if zstd else dbn.Compression.NONE)
    try:
        dec.write(raw)
        out = dec.decode()
    except dbn.DBNError as exc:
        return exc
    return out[0], out[1:]


def _same_symbols(scanned, loaded) -> bool:
    """The first pass's symbols are the loaded ones, but for ``synced`` (known only by converting)."""
    key = lambda s: (s.id, s.name, s.instrument_id, s.tick, s.lot_size, s.defined)   # noqa: E731
    return [key(s) for s in scanned] == [key(s) for s in loaded]


def _schema(name: str) -> str:
    return name.split(".")[1]


@needs_data
@pytest.mark.parametrize("name", [f for f in FILES if f != "LICENSE"])
def test_databento_test_files_match_the_official_decoder(name):
    path = DBN_DIR / name
    ref = _reference(path)
    if isinstance(ref, Exception) or name.endswith(".dbz"):
        # the decoder refuses it (legacy DBZ, a fragment without metadata): so does the loader
        with pytest.raises(InputError, match=name.replace(".", r"\.")):
            load_dbn(path)
        return
    meta, recs = ref
    d = load_dbn(path)
    assert d.metadata["schema"] == meta.schema and d.metadata["dataset"] == meta.dataset
    assert d.metadata["version"] == meta.version
    kinds = [type(r).__name__ for r in recs]
    mbo = [r for r in recs if type(r).__name__ == "MBOMsg"]
    mbp = [r for r in recs if hasattr(r, "levels")]
    defs = [r for r in recs if type(r).__name__.startswith("InstrumentDefMsg")]
    trades = [r for r in recs if type(r).__name__ == "TradeMsg"
              or (hasattr(r, "levels") and getattr(r, "action", None) == "T")]
    assert d.counts["mbo"] == len(mbo) and d.counts["mbp"] == len(mbp)
    assert d.counts["definitions"] == len(defs)
    assert d.counts["other"] == len(recs) - len(mbo) - len(mbp) - len(defs) - sum(k == "TradeMsg" for k in kinds)
    assert len(d.trades) == len(trades)
    iids = list(dict.fromkeys(r.instrument_id for r in recs if hasattr(r, "instrument_id")
                              and type(r).__name__ not in ("OHLCVMsg", "StatMsg", "StatusMsg", "ImbalanceMsg")))
    assert [s.instrument_id for s in d.symbols] == iids
    assert _same_symbols(dbn_symbols(path), d.symbols)
    by_iid = {s.instrument_id: s for s in d.symbols}
    # every MBP record: the shown levels equal the decoder's, in ticks
    for row, r in zip(d.mbp, mbp):
        s = by_iid[r.instrument_id]
        assert row["ts"] == r.ts_recv and row["symbol"] == s.id and row["levels"] == len(r.levels)
        for k, lv in enumerate(r.levels):
            assert row["bid_px"][k] * s.tick == (lv.bid_px if lv.bid_sz else 0)
            assert row["ask_px"][k] * s.tick == (lv.ask_px if lv.ask_sz else 0)
            assert row["bid_sz"][k] == lv.bid_sz and row["ask_sz"][k] == lv.ask_sz
            assert row["bid_ct"][k] == getattr(lv, "bid_ct", 0)
    for t, r in zip(d.trades, trades):
        s = by_iid[r.instrument_id]
        assert t["price"] * s.tick == r.price and t["qty"] == r.size and t["ts"] == r.ts_recv
        assert t["aggressor_side"] == {"B": 0, "A": 1}.get(str(r.side), 2)
    for r in defs:
        s = by_iid[r.instrument_id]
        assert s.defined and s.name.split(".")[0] == r.raw_symbol
        assert s.lot_size == r.min_lot_size_round_lot
    # the MBO test file starts mid-day: its records name orders it never added
    if _schema(name) == "mbo":
        assert d.counts["unknown_order"] == len([r for r in mbo if r.action in ("C",)])
        assert len(d.consistent) == sum(1 for r in mbo if r.flags & dbn.F_LAST)
        assert not d.symbols[0].synced
        with pytest.raises(InputError, match="mid-day"):
            load_dbn(path, midday="refuse")


def _flow(n: int, seed: int) -> np.ndarray:
    """A uniform flow with modifies (price moves, size changes), IOCs and market orders mixed in."""
    f = uniform_flow(n, seed, 3, span=20, p_passive=0.55, p_cancel=0.3, p_cross=0.15)
    rng = np.random.default_rng(seed)
    cancels = np.flatnonzero(f["kind"] == Kind.CANCEL)
    mod = cancels[rng.random(len(cancels)) < 0.5]
    f["kind"][mod] = Kind.MODIFY
    f["qty"][mod] = rng.integers(1, 120, len(mod))
    live = {}
    for i in range(len(f)):     # a modify keeps or moves the price of the order it names
        key = (int(f["symbol"][i]), int(f["order_id"][i]))
        if f["kind"][i] == Kind.NEW:
            live[key] = int(f["price"][i])
        elif f["kind"][i] == Kind.MODIFY and key in live:
            f["price"][i] = live[key] + int(rng.integers(-3, 4))
    new = np.flatnonzero(f["kind"] == Kind.NEW)
    f["tif"][new[rng.random(len(new)) < 0.05]] = Tif.IOC
    f["order_type"][new[rng.random(len(new)) < 0.03]] = OrderType.MARKET
    return f


SYMS = [("AAA", 10 ** 7, 100), ("BBB", 5 * 10 ** 6, 1), ("CCC", 25 * 10 ** 7, 10)]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("dbn")
    flow = _flow(6000, 11)
    mbo, mbp = d / "run.mbo.dbn.zst", d / "run.mbp-10.dbn"
    expected = write_mbo(mbo, flow, SYMS, mbp10_path=mbp)
    return flow, expected, mbo, mbp


def test_written_mbo_loads_back_into_the_same_messages(written):
    flow, expected, mbo, _ = written
    d = load_dbn(mbo)
    assert d.orders.tobytes() == expected.tobytes()
    assert [(s.name, s.tick, s.lot_size, s.instrument_id) for s in d.symbols] == \
        [(n, t, lot, INSTRUMENT_BASE + k) for k, (n, t, lot) in enumerate(SYMS)]
    assert all(s.synced for s in d.symbols)
    assert d.counts["unknown_order"] == d.counts["over_cancel"] == d.counts["modify_as_add"] == 0
    assert len(d.trades) == len(d.fills) > 100
    assert set(np.unique(d.orders["kind"])) == {Kind.NEW, Kind.CANCEL, Kind.MODIFY}
    # batches of a few KiB give the same rows, and progress reaches the file size
    seen = []
    parts = list(iter_dbn(mbo, batch_bytes=4096, progress=lambda a, b: seen.append((a, b))))
    assert len(parts) > 3 and seen[-1][0] == seen[-1][1] == os.path.getsize(mbo)
    assert np.concatenate([p.orders for p in parts]).tobytes() == d.orders.tobytes()
    assert np.concatenate([p.consistent for p in parts]).tobytes() == d.consistent.tobytes()


def test_engine_book_after_every_f_last_equals_the_flow_book(written):
    flow, _, mbo, mbp = written
    d = load_dbn(mbo)
    orig, rep = Engine(), Engine()
    for s in d.symbols:
        orig.add_symbol(s.name, tick_size=s.tick_size)
        rep.add_symbol(s.name, tick_size=s.tick_size)
    cons = d.consistent
    by_sequence = {int(c["sequence"]): c for c in cons if c["sequence"]}
    assert len(by_sequence) == len(cons) - len(d.symbols)     # one per message that wrote records
    checked = 0
    with_defs = load_dbn(mbp, definitions=mbo)
    assert _same_symbols(dbn_symbols(mbp, definitions=mbo, batch_bytes=4096), with_defs.symbols)
    assert _same_symbols(dbn_symbols(mbo, batch_bytes=4096), d.symbols)
    mbp_rows = {int(r["sequence"]): r for r in with_defs.mbp}
    for i in range(len(flow)):
        orig.process(flow[i:i + 1])
        c = by_sequence.get(orig.seq)
        if c is None:
            continue
        rep.process(d.orders[rep.seq:int(c["seq"])])
        for sym in range(len(d.symbols)):
            a, b = orig.orders(sym), rep.orders(sym)
            assert a[["order_id", "price", "qty"]].tolist() == b[["order_id", "price", "qty"]].tolist(), i
        row = mbp_rows[orig.seq]
        bids, asks = rep.depth(int(row["symbol"]), 10)
        n_b, n_a = len(bids), len(asks)
        assert (row["bid_px"][:n_b] == bids["price"]).all() and (row["bid_sz"][:n_b] == bids["qty"]).all()
        assert (row["ask_px"][:n_a] == asks["price"]).all() and (row["ask_ct"][:n_a] == asks["count"]).all()
        assert (row["bid_sz"][n_b:] == 0).all() and (row["ask_sz"][n_a:] == 0).all()
        checked += 1
    assert checked == len(by_sequence) > 3000


def test_damaged_files_raise_input_error(tmp_path, written):
    _, _, mbo, mbp = written
    raw = Path(mbp).read_bytes()
    cut = tmp_path / "cut.dbn"
    cut.write_bytes(raw[: len(raw) - 17])
    with pytest.raises(InputError, match="truncated"):
        load_dbn(cut)
    junk = tmp_path / "junk.dbn"
    junk.write_bytes(b"hello world")
    with pytest.raises(InputError, match="not a DBN file"):
        load_dbn(junk)
    (tmp_path / "empty.dbn").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        load_dbn(tmp_path / "empty.dbn")
    with pytest.raises(InputError, match="cannot read"):
        load_dbn(tmp_path / "missing.dbn")
    with pytest.raises(InputError, match="whole number of ticks"):
        load_dbn(mbp, tick="0.3")
    with pytest.raises(InputError, match="tick"):
        load_dbn(mbp, tick="abc")


def _rec(action, oid=0, price=0, size=0, side="N", flags=128, iid=7, ts=1, seq=0):
    return dbn.MBOMsg(publisher_id=1, instrument_id=iid, ts_event=ts, order_id=oid,
                      price=price if action != "R" else dbn.UNDEF_PRICE, size=size,
                      action=dbn.Action(action), side=dbn.Side(side), ts_recv=ts, flags=flags, sequence=seq)


def test_hand_made_mbo_mid_day_start_clear_and_every_action(tmp_path):
    from exsim.scenarios.loaders.dbn_write import write_dbn
    T = 250_000_000    # 0.25 in DBN units
    recs = [
        _rec("C", 99, 100 * T, 1, "B"),                   # names an order from before the file
        _rec("M", 98, 101 * T, 2, "A", ts=2),             # a modify of an unseen order is an add
        _rec("R", ts=3),                                  # the clear: synced from here
        _rec("A", 1, 100 * T, 10, "B", flags=0, ts=4),    # one event of two records ...
        _rec("A", 2, 102 * T, 5, "A", ts=4),              # ... ends here
        _rec("C", 1, 100 * T, 4, "B", ts=5),              # partial cancel: MODIFY to 6
        _rec("M", 1, 99 * T, 6, "B", ts=6),               # price change: MODIFY
        _rec("T", 0, 102 * T, 2, "B", flags=0, ts=7),     # trade + fill change nothing ...
        _rec("F", 2, 102 * T, 2, "A", flags=0, ts=7),
        _rec("C", 2, 102 * T, 2, "A", ts=7),              # ... the C does: MODIFY to 3
        _rec("C", 2, 102 * T, 9, "A", ts=8),              # more than is left: CANCEL, counted
        _rec("A", 3, 100 * T, 1, "B", iid=8, ts=9),       # a second instrument, never cleared
        _rec("N", ts=10),
    ]
    p = tmp_path / "hand.dbn"
    write_dbn(p, recs, schema=dbn.Schema.MBO, symbols={"ESH1": 7, "NQH1": 8}, start=0)
    d = load_dbn(p, tick="0.25")
    o = d.orders
    assert [s.name for s in d.symbols] == ["ESH1", "NQH1"] and d.symbols[0].tick == T
    assert d.symbols[0].synced and not d.symbols[1].synced
    assert o["kind"].tolist() == [0, 1, 0, 0, 2, 2, 2, 1, 0]
    assert o["order_id"].tolist() == [98, 98, 1, 2, 1, 1, 2, 2, 3]
    assert o["price"].tolist() == [101, 101, 100, 102, 100, 99, 102, 102, 100]
    assert o["qty"].tolist() == [2, 0, 10, 5, 6, 6, 3, 0, 1]
    assert o["side"].tolist() == [1, 1, 0, 1, 0, 0, 1, 1, 0]
    assert d.record.tolist() == [1, 2, 3, 4, 5, 6, 9, 10, 11]
    assert d.counts["unknown_order"] == 1 and d.counts["modify_as_add"] == 1
    assert _same_symbols(dbn_symbols(p, tick="0.25"), d.symbols)
    assert d.counts["over_cancel"] == 1 and d.counts["clears"] == 1
    # consistent points: engine seq after each F_LAST event
    assert d.consistent["seq"].tolist() == [0, 1, 2, 4, 5, 6, 7, 8, 9, 9]
    assert d.trades["aggressor_side"].tolist() == [0] and d.fills["sell_order_id"].tolist() == [2]
    assert d.trades["seq"].tolist() == [6] and d.trades["price"].tolist() == [102]
    with pytest.raises(InputError, match="record 0: a record names an order of ESH1"):
        load_dbn(p, tick="0.25", midday="refuse")
    with pytest.raises(InputError, match="record 1: price .* not a whole number of ticks"):
        load_dbn(p, tick="0.5")
    bad = tmp_path / "noside.dbn"
    write_dbn(bad, [_rec("R"), _rec("A", 1, 100 * T, 1, "N")], schema=dbn.Schema.MBO, symbols={"X": 7})
    with pytest.raises(InputError, match="record 1: an A record of X has no side"):
        load_dbn(bad)
