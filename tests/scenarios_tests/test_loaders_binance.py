"""Binance loader: rebuilt best quotes equal bookTicker, the market-by-price flow rebuilds the same
book through the engine, exact decimal conversion, and clear errors for broken captures."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import InputError
from exsim.exchange.schema import Kind
from exsim.scenarios.loaders.binance import load_binance
from exsim.scenarios.loaders.l2book import top_of_book

CAPTURE = Path("/work/shared/data/binance_spot_btcusdt_20240808_hftbacktest/btcusdt_20240808.gz")
needs_data = pytest.mark.skipif(not CAPTURE.exists(), reason="shared Binance capture not present")


@pytest.fixture(scope="module")
def data():
    return load_binance(CAPTURE)


def _matches(top, tk):
    return ((top[:, 0, 0] == tk["ask"]) & (top[:, 0, 1] == tk["ask_qty"])
            & (top[:, 0, 2] == tk["bid"]) & (top[:, 0, 3] == tk["bid_qty"]))


@needs_data
def test_capture_counts(data):
    assert len(data.tickers) == 28_040 and len(data.trades) == 9_757
    assert data.snapshot_update_id == 50093239218
    assert len(data.diff_final_ids) + data.dropped_diffs == 3_451


@needs_data
def test_rebuilt_best_quotes_equal_book_ticker_at_all_564_points(data):
    tk = data.tickers[np.isin(data.tickers["update_id"], data.diff_final_ids)]
    assert len(tk) == 564
    assert _matches(top_of_book(data.l2, tk["update_id"], 1), tk).all()


@needs_data
def test_market_by_price_flow_rebuilds_the_same_book_in_the_engine(data):
    eng = Engine()
    eng.add_symbol("BTCUSDT", tick_size=0.01)
    res = eng.process(data.orders)
    assert len(res.fills) == 0 and not np.any(res.events["event"] == 1)   # never crosses, no rejects
    tk = data.tickers[np.isin(data.tickers["update_id"], data.diff_final_ids)]
    seq_after = np.searchsorted(data.flow_update_id, tk["update_id"], side="right")
    assert _matches(top_of_book(res.l2, seq_after, 1), tk).all()


@needs_data
def test_prices_and_quantities_convert_exactly(data):
    first = data.tickers[0]
    assert (first["bid"], first["bid_qty"], first["ask"]) == (6_183_763, 378_826_000, 6_183_764)
    assert set(np.unique(data.orders["kind"])) <= {Kind.NEW, Kind.MODIFY, Kind.CANCEL}


@needs_data
def test_lot_too_coarse_for_the_file_names_the_line():
    with pytest.raises(InputError, match=r"line 1886: .*not a whole number of units of 1e-5"):
        load_binance(CAPTURE, lot="0.00001")


SNAP = '1 {"lastUpdateId":10,"bids":[["100.00","1.0"]],"asks":[["101.00","2.0"]]}\n'


def _write(tmp_path, text, gz=False):
    p = tmp_path / ("c.gz" if gz else "c.txt")
    p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return p


def test_bad_json_line_names_file_and_line(tmp_path):
    p = _write(tmp_path, SNAP + '2 {"stream":"x","data":{"e":"depthUpdate",\n')
    with pytest.raises(InputError, match=r"c.txt, line 2: expected '<receive ns> <JSON>'"):
        load_binance(p)


def test_gap_in_update_ids_is_an_error(tmp_path):
    d1 = '2 {"data":{"e":"depthUpdate","U":11,"u":12,"b":[],"a":[]}}\n'
    d2 = '3 {"data":{"e":"depthUpdate","U":14,"u":15,"b":[],"a":[]}}\n'
    with pytest.raises(InputError, match=r"line 3: diff update ids have a gap: expected U=13"):
        load_binance(_write(tmp_path, SNAP + d1 + d2))


def test_truncated_gzip_is_an_input_error(tmp_path):
    p = _write(tmp_path, SNAP * 50, gz=True)
    p.write_bytes(p.read_bytes()[:-20])
    with pytest.raises(InputError, match=r"c.gz: cannot read"):
        load_binance(p)


def test_missing_snapshot_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no.*snapshot|found none"):
        load_binance(_write(tmp_path, '2 {"data":{"e":"depthUpdate","U":11,"u":12,"b":[],"a":[]}}\n'))
