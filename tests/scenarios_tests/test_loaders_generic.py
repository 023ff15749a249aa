"""Generic order-flow format: every column round-trips through CSV, CSV.gz and Parquet, and hostile
rows raise InputError naming the file, the line (or row) and the column."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import InputError
from exsim.exchange.schema import ORDER_DTYPE
from exsim.scenarios.generators.uniform import uniform_flow
from exsim.scenarios.loaders.generic import COLUMNS, load_generic, write_generic
from exsim.scenarios.scenario import SymbolSpec

SYMS = [SymbolSpec("JPM", 0.01), SymbolSpec("BTC-USD", 0.5), SymbolSpec("ES", 25)]


def _every_value_flow() -> np.ndarray:
    """A flow whose every field takes extreme and odd values (codes with no name included)."""
    f = uniform_flow(500, 3, 3)
    rng = np.random.default_rng(3)
    for name in ("kind", "side", "order_type", "tif", "flags"):
        pick = rng.random(len(f)) < 0.05
        f[name][pick] = rng.integers(0, 256, int(pick.sum()))
    f["order_id"][:3] = [0, (1 << 64) - 1, 1 << 63]
    f["ts"][:3] = [-(1 << 63), (1 << 63) - 1, 0]
    f["price"][:3] = [-(1 << 63), (1 << 63) - 1, -5]
    f["qty"][:3] = [-1, (1 << 63) - 1, 0]
    f["trader"][:3] = [0, (1 << 32) - 1, 7]
    return f


@pytest.mark.parametrize("name", ["flow.csv", "flow.csv.gz", "flow.parquet"])
def test_every_column_round_trips(tmp_path, name):
    if name.endswith("parquet"):
        pytest.importorskip("pyarrow")
    f = _every_value_flow()
    path = tmp_path / name
    assert write_generic(path, f, SYMS) == len(f)
    back = load_generic(path)
    assert back.orders.dtype == ORDER_DTYPE
    assert back.orders.tobytes() == f.tobytes()
    assert back.symbols == SYMS
    assert not list(tmp_path.glob("*.tmp*"))


def test_hand_written_csv_with_defaults_words_and_decimal_prices(tmp_path):
    p = tmp_path / "mine.csv"
    p.write_text("# my own data\n# symbols: AAPL=0.01,ESH1=0.25\n"
                 "TS,symbol,kind,side,order_id,price,qty\n"
                 "1,AAPL,new,b,7,189.25,100\n"
                 "2,ESH1,NEW,SELL,8,4500.75,3\n"
                 "3,AAPL,cancel,,7,,\n"
                 "\n"
                 "4,ESH1,MODIFY,,8,4501.00,2\n")
    g = load_generic(p, decimal_prices=True)
    o = g.orders
    assert [s.name for s in g.symbols] == ["AAPL", "ESH1"] and g.symbols[1].tick_size == 0.25
    assert o["price"].tolist() == [18925, 18003, 0, 18004]
    assert o["kind"].tolist() == [0, 0, 1, 2] and o["side"].tolist() == [0, 1, 0, 0]
    assert o["symbol"].tolist() == [0, 1, 0, 1] and o["qty"].tolist() == [100, 3, 0, 2]
    assert (o["order_type"] == 0).all() and (o["tif"] == 0).all() and (o["trader"] == 0).all()
    # without a table, names get ids in order of first appearance and tick size 1
    q = tmp_path / "plain.csv"
    q.write_text("ts,symbol,kind,order_id,side,price,qty\n1,Z,NEW,1,BUY,10,1\n2,A,NEW,2,SELL,11,1\n")
    assert [(s.name, s.tick_size) for s in load_generic(q).symbols] == [("Z", 1), ("A", 1)]


HEADER = "ts,symbol,kind,side,type,tif,order_id,price,qty,trader,flags\n"
GOOD = "1,JPM,NEW,BUY,LIMIT,GTC,1,100,5,0,\n"


@pytest.mark.parametrize("body,where,column", [
    (GOOD + "2,JPM,NEW,BUY,LIMIT,GTC,1,1x0,5,0,\n", "line 4", "price"),
    (GOOD + "2,JPM,NEW,BUY,LIMIT,GTC,-1,100,5,0,\n", "line 4", "order_id"),
    (GOOD + "2,JPM,NEW,BUY,LIMIT,GTC,18446744073709551616,100,5,0,\n", "line 4", "order_id"),
    (GOOD + "2,JPM,NEW,BUY,LIMIT,GTC,1,100,5,4294967296,\n", "line 4", "trader"),
    (GOOD + "2,JPM,NEW,BUY,LIMIT,GTC,1,100,9223372036854775808,0,\n", "line 4", "qty"),
    (GOOD + "2,JPM,ADD,BUY,LIMIT,GTC,1,100,5,0,\n", "line 4", "kind"),
    (GOOD + "2,JPM,NEW,UP,LIMIT,GTC,1,100,5,0,\n", "line 4", "side"),
    (GOOD + "2,JPM,NEW,BUY,TRAILING,GTC,1,100,5,0,\n", "line 4", "type"),
    (GOOD + "2,JPM,NEW,BUY,LIMIT,WEEK,1,100,5,0,\n", "line 4", "tif"),
    (GOOD + "2,JPM,NEW,BUY,LIMIT,GTC,1,100,5,0,256\n", "line 4", "flags"),
    (GOOD + "2,XYZ,NEW,BUY,LIMIT,GTC,1,100,5,0,\n", "line 4", "symbol"),
    (GOOD + ",JPM,NEW,BUY,LIMIT,GTC,1,100,5,0,\n", "line 4", "ts"),
    (GOOD + "2.5,JPM,NEW,BUY,LIMIT,GTC,1,100,5,0,\n", "line 4", "ts"),
    (GOOD + "2,JPM,,BUY,LIMIT,GTC,1,100,5,0,\n", "line 4", "kind"),
])
def test_hostile_rows_name_file_line_and_column(tmp_path, body, where, column):
    p = tmp_path / "bad.csv"
    p.write_text("# symbols: JPM=0.01\n" + HEADER + body)
    with pytest.raises(InputError) as e:
        load_generic(p)
    msg = str(e.value)
    assert str(p) in msg and where in msg and f"column {column!r}" in msg, msg


@pytest.mark.parametrize("text,match", [
    ("", "header row"),
    ("# only a comment\n", "header row"),
    ("ts,symbol,kind,order_id,colour\n", "unknown column 'colour'"),
    ("ts,symbol,kind\n", "missing column 'order_id'"),
    ("ts,symbol,kind,order_id,ts\n", "appears twice"),
    (HEADER + "1,JPM,NEW,BUY\n", "line 2: expected 11 comma-separated columns"),
    ("# symbols: JPM=0,X=1\n" + HEADER, "symbol table entry 'JPM=0'"),
    ("# symbols: JPM=1,JPM=2\n" + HEADER, "unique name"),
])
def test_hostile_files(tmp_path, text, match):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InputError, match=match):
        load_generic(p)


def test_decimal_prices_must_be_whole_ticks(tmp_path):
    p = tmp_path / "px.csv"
    p.write_text("# symbols: ES=0.25\nts,symbol,kind,side,order_id,price,qty\n1,ES,NEW,BUY,1,4500.10,1\n")
    with pytest.raises(InputError, match=r"line 3, column 'price': '4500.10' is not a whole number of ticks"):
        load_generic(p, decimal_prices=True)
    p.write_text("# symbols: ES=0.25\nts,symbol,kind,side,order_id,price,qty\n1,ES,NEW,BUY,1,4e5x,1\n")
    with pytest.raises(InputError, match="line 3, column 'price': expected a decimal price"):
        load_generic(p, decimal_prices=True)


def test_unreadable_and_damaged_files(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_generic(tmp_path / "missing.csv")
    (tmp_path / "bad.csv.gz").write_bytes(b"\x1f\x8b\x08\x00junk")
    with pytest.raises(InputError, match="cannot read"):
        load_generic(tmp_path / "bad.csv.gz")
    pytest.importorskip("pyarrow")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="cannot read as Parquet"):
        load_generic(tmp_path / "bad.parquet")


def test_parquet_row_errors_say_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    t = pa.table({"ts": [1, 2], "symbol": ["A", "A"], "kind": ["NEW", "BOGUS"], "order_id": [1, 2]})
    pq.write_table(t, tmp_path / "x.parquet")
    with pytest.raises(InputError, match=r"row 2, column 'kind'"):
        load_generic(tmp_path / "x.parquet")


def test_writer_refuses_symbols_outside_the_table(tmp_path):
    f = np.zeros(2, ORDER_DTYPE)
    f["symbol"] = [0, 3]
    with pytest.raises(InputError, match="outside the symbol table"):
        write_generic(tmp_path / "o.csv", f, SYMS)
    assert not list(tmp_path.iterdir())
    assert COLUMNS[0] == "ts"
