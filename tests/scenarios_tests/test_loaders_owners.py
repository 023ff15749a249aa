"""Every loader writes the owner's trader on CANCEL and MODIFY rows (docs/semantics.md,
"Ownership"), so an engine with ownership on takes each feed as one with it off; and the
generic format's optional columns for the new order fields."""

from __future__ import annotations

import os

import numpy as np
import pytest

from exsim.exchange.errors import InputError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Tif
from exsim.scenarios.loaders._parse import fill_owners, owner_traders
from exsim.scenarios.loaders.generic import load_generic, write_generic


def _rows(*rows):
    """(kind, symbol, order_id, trader) rows as ORDER_DTYPE."""
    o = np.zeros(len(rows), ORDER_DTYPE)
    for k, (kind, sym, oid, tr) in enumerate(rows):
        o[k]["kind"], o[k]["symbol"], o[k]["order_id"], o[k]["trader"] = kind, sym, oid, tr
    return o


N, C, M = Kind.NEW, Kind.CANCEL, Kind.MODIFY


def test_owner_is_the_latest_new_of_the_same_symbol_and_id():
    o = _rows((N, 0, 1, 5), (N, 1, 1, 6), (M, 0, 1, 0), (C, 1, 1, 0), (C, 0, 9, 3),
              (N, 0, 1, 8), (C, 0, 1, 0))    # id 1 of symbol 0 re-entered by trader 8
    assert owner_traders(o).tolist() == [5, 6, 5, 6, -1, 8, 8]
    assert fill_owners(o) == 3
    assert o["trader"].tolist() == [5, 6, 5, 6, 3, 8, 8]   # an unknown id keeps its trader


def test_fill_owners_leaves_rows_outside_where_alone():
    o = _rows((N, 0, 1, 5), (C, 0, 1, 2))
    fill_owners(o, np.array([True, False]))
    assert o["trader"].tolist() == [5, 2]


def _csv(tmp_path, text):
    p = tmp_path / "f.csv"
    p.write_text(text)
    return p


def test_generic_cancels_and_modifies_without_a_trader_carry_the_owners(tmp_path):
    p = _csv(tmp_path, "ts,symbol,kind,side,order_id,price,qty,trader\n"
                       "1,A,NEW,BUY,1,100,5,42\n2,A,MODIFY,,1,101,5,\n3,A,CANCEL,,1,,,\n"
                       "4,A,NEW,SELL,2,105,1,43\n5,A,CANCEL,,2,,,9\n")
    assert load_generic(p).orders["trader"].tolist() == [42, 42, 42, 43, 9]   # 9: given


def test_generic_without_a_trader_column_is_all_trader_zero(tmp_path):
    p = _csv(tmp_path, "ts,symbol,kind,side,order_id,price,qty\n1,A,NEW,BUY,1,100,5\n"
                       "2,A,CANCEL,,1,,\n")
    assert load_generic(p).orders["trader"].tolist() == [0, 0]


def test_generic_reads_the_new_order_fields_and_type_and_tif_names(tmp_path):
    p = _csv(tmp_path, "ts,symbol,kind,side,type,tif,order_id,price,qty,stop_price,display_qty,"
                       "min_qty,expire_ts\n"
                       "1,A,NEW,BUY,stop_limit,gtd,1,100,50,99,10,20,5000\n"
                       "2,A,NEW,SELL,STOP,DAY,2,,5,90,,,\n3,A,NEW,BUY,limit,gtc,3,100,5,,,,\n")
    o = load_generic(p).orders
    assert o["order_type"].tolist() == [OrderType.STOP_LIMIT, OrderType.STOP, OrderType.LIMIT]
    assert o["tif"].tolist() == [Tif.GTD, Tif.DAY, Tif.GTC]
    assert o["stop_price"].tolist() == [99, 90, 0]
    assert o["display_qty"].tolist() == [10, 0, 0]
    assert o["min_qty"].tolist() == [20, 0, 0]
    assert o["expire_ts"].tolist() == [5000, 0, 0]


def test_generic_decimal_stop_prices_convert_to_ticks_exactly(tmp_path):
    p = _csv(tmp_path, "# symbols: A=0.01\nts,symbol,kind,side,type,order_id,price,qty,stop_price\n"
                       "1,A,NEW,BUY,STOP_LIMIT,1,1.00,5,0.99\n")
    o = load_generic(p, decimal_prices=True).orders
    assert (o["price"][0], o["stop_price"][0]) == (100, 99)
    bad = _csv(tmp_path, "# symbols: A=0.01\nts,symbol,kind,side,type,order_id,price,qty,stop_price\n"
                         "1,A,NEW,BUY,STOP_LIMIT,1,1.00,5,0.995\n")
    with pytest.raises(InputError, match="line 3, column 'stop_price'"):
        load_generic(bad, decimal_prices=True)


def test_generic_a_bad_expire_ts_names_line_and_column(tmp_path):
    p = _csv(tmp_path, "ts,symbol,kind,side,tif,order_id,price,qty,expire_ts\n"
                       "1,A,NEW,BUY,GTD,1,100,5,soon\n")
    with pytest.raises(InputError, match="line 2, column 'expire_ts'"):
        load_generic(p)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_generic_write_then_load_keeps_the_new_fields(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    o = np.zeros(2, ORDER_DTYPE)
    o["ts"], o["order_id"], o["qty"], o["price"] = [1, 2], [1, 2], [5, 5], [100, 100]
    o["order_type"], o["tif"] = [OrderType.STOP_LIMIT, OrderType.LIMIT], [Tif.GTD, Tif.DAY]
    o["stop_price"], o["display_qty"], o["min_qty"], o["expire_ts"] = [99, 0], [0, 2], [3, 0], [9, 0]
    path = tmp_path / f"w{suffix}"
    write_generic(path, o, [("A", 1)])
    assert load_generic(path).orders.tobytes() == o.tobytes()


def test_generic_writer_leaves_out_the_new_columns_when_all_zero(tmp_path):
    o = np.zeros(1, ORDER_DTYPE)
    o["qty"], o["price"] = 5, 100
    path = tmp_path / "w.csv"
    write_generic(path, o, [("A", 1)])
    assert path.read_text().splitlines()[1] == \
        "ts,symbol,kind,side,type,tif,order_id,price,qty,trader,flags"


# -- the samples: each loader's CANCEL/MODIFY rows carry their owner's trader -------------------
def _sample(relative):
    from exsim.scenarios.data import shared_file

    try:
        return shared_file(relative)
    except InputError:
        pytest.skip(f"shared sample {relative} is not here")


def _assert_owned(orders):
    owner = owner_traders(orders)
    cm = ((orders["kind"] == Kind.CANCEL) | (orders["kind"] == Kind.MODIFY)) & (owner >= 0)
    assert cm.any()
    assert (orders["trader"][cm].astype(np.int64) == owner[cm]).all()


def test_quantcup_cancels_carry_the_owner_not_the_feeds_cancel_trader():
    from exsim.scenarios.data import QUANTCUP_FEED
    from exsim.scenarios.loaders.quantcup import load_quantcup

    orders = load_quantcup(_sample(QUANTCUP_FEED))
    _assert_owned(orders)
    # the feed's cancel lines name other traders: the loader did change them
    assert len(np.unique(orders["trader"])) > 1


@pytest.mark.parametrize("name", ["LOBSTER_AMZN", "LOBSTER_AAPL"])
def test_lobster_rows_carry_the_owner(name):
    import exsim.scenarios.data as data
    from exsim.scenarios.loaders.lobster import load_lobster

    d = _sample(getattr(data, name))
    files = sorted(os.listdir(d))
    msg = [f for f in files if "_message_" in f][0]
    book = [f for f in files if "_orderbook_" in f][0]
    _assert_owned(load_lobster(os.path.join(d, msg), os.path.join(d, book)).orders)


def test_binance_rows_carry_the_owner():
    from exsim.scenarios.data import BINANCE_BTCUSDT
    from exsim.scenarios.loaders.binance import load_binance

    _assert_owned(load_binance(_sample(BINANCE_BTCUSDT)).orders)


def test_dbn_rows_carry_the_owner(tmp_path):
    pytest.importorskip("databento_dbn")
    from exsim.scenarios.generators.uniform import uniform_flow
    from exsim.scenarios.loaders.dbn import load_dbn
    from exsim.scenarios.loaders.dbn_write import write_mbo

    flow = uniform_flow(n=2000, seed=3, n_symbols=1)
    path = tmp_path / "f.dbn"
    write_mbo(path, flow, [("AAA", 10_000_000, 1)])
    _assert_owned(load_dbn(path).orders)
