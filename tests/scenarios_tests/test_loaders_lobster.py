"""LOBSTER loader: message translation counts, the engine book check, and errors for broken files."""

from pathlib import Path

import numpy as np
import pytest

from exsim.exchange.errors import InputError
from exsim.exchange.schema import Kind, Tif
from exsim.scenarios.loaders.lobster import CORRECTION, load_lobster
from exsim.scenarios.loaders.lobster_check import check_lobster

DATA = Path("/work/shared/data")
AMZN = (DATA / "lobster_AMZN_2012-06-21_level1/AMZN_2012-06-21_34200000_57600000_message_1.csv",
        DATA / "lobster_AMZN_2012-06-21_level1/AMZN_2012-06-21_34200000_57600000_orderbook_1.csv")
AAPL = (DATA / "lobster_AAPL_2012-06-21_level10_head/AAPL_2012-06-21_34200000_57600000_message_10_head.csv",
        DATA / "lobster_AAPL_2012-06-21_level10_head/AAPL_2012-06-21_34200000_57600000_orderbook_10_head.csv")
needs_data = pytest.mark.skipif(not AMZN[0].exists(), reason="shared LOBSTER samples not present")


@pytest.fixture(scope="module")
def amzn():
    return load_lobster(*AMZN)


@needs_data
def test_amzn_message_counts_match_the_readme(amzn):
    c = amzn.counts
    assert (c["type_1"], c["type_2"], c["type_3"], c["type_4"], c["type_5"]) == (27845, 16, 18235, 8974, 2445)
    assert len(amzn.hidden_trades) == 2445 and len(amzn.expected_trades) == 8974
    assert amzn.depth == 1 and amzn.book.shape == (57515, 1, 4)


@needs_data
def test_executions_become_ioc_limits_of_the_opposite_side(amzn):
    own = amzn.msg_index >= 0
    ioc = amzn.orders[own & (amzn.orders["tif"] == Tif.IOC)]
    assert len(ioc) == 8974 and np.all(ioc["order_id"] >= amzn.synthetic_base)
    partial = np.isin(amzn.msg_index, np.flatnonzero(amzn.types == 2))
    assert partial.sum() == 16 and np.all(amzn.orders["kind"][partial] == Kind.MODIFY)  # keep priority


@needs_data
def test_amzn_full_day_engine_book_equals_file_on_every_predictable_row(amzn):
    r = check_lobster(amzn)
    assert (r["equal"], r["unpredictable"], r["unequal"]) == (43_561, 13_953, 0)
    assert r["trades_equal"] == r["trades_expected"] == 8974 and r["extra_fills"] == 0
    assert r["rejected"] == 0


@needs_data
def test_aapl_ten_levels_engine_book_equals_file_on_every_predictable_row():
    flow = load_lobster(*AAPL)
    r = check_lobster(flow)
    assert (r["equal"], r["unpredictable"], r["unequal"]) == (680, 318, 0)
    assert r["trades_equal"] == r["trades_expected"] == 98 and r["extra_fills"] == 0


@needs_data
def test_nanosecond_timestamps_are_exact():
    flow = load_lobster(*AAPL)
    first = flow.orders[flow.msg_index == 0][0]
    assert first["ts"] == 34200_004241176 and first["price"] == 58533 and first["order_id"] == 16113575


def _pair(tmp_path, messages: str, book: str):
    m, b = tmp_path / "m.csv", tmp_path / "b.csv"
    m.write_text(messages)
    b.write_text(book)
    return m, b


GOOD_M = "34200.1,1,11,10,1000000,1\n34200.2,3,11,10,1000000,1\n"
GOOD_B = "1010000,5,1000000,10\n1010000,5,-9999999999,0\n"


def test_small_valid_pair_loads(tmp_path):
    flow = load_lobster(*_pair(tmp_path, GOOD_M, GOOD_B))
    assert list(flow.orders[flow.msg_index >= 0]["kind"]) == [Kind.NEW, Kind.CANCEL]


def test_truncated_message_line_names_file_and_line(tmp_path):
    m, b = _pair(tmp_path, GOOD_M + "34200.3,1,12,10", GOOD_B + "1010000,5,-9999999999,0\n")
    with pytest.raises(InputError, match=r"m.csv, line 3: expected 6 comma-separated columns"):
        load_lobster(m, b)


def test_price_that_is_not_a_whole_cent_is_an_error(tmp_path):
    m, b = _pair(tmp_path, "34200.1,1,11,10,1000050,1\n", "1010000,5,1000050,10\n")
    with pytest.raises(InputError, match=r"m.csv, line 1: .*whole cent"):
        load_lobster(m, b)


def test_book_with_fewer_rows_than_messages_is_an_error(tmp_path):
    m, b = _pair(tmp_path, GOOD_M, GOOD_B.splitlines()[0] + "\n")
    with pytest.raises(InputError, match=r"b.csv.*one book row per message"):
        load_lobster(m, b)


def test_unknown_message_type_is_an_error(tmp_path):
    m, b = _pair(tmp_path, "34200.1,6,11,10,1000000,1\n", "1010000,5,1000000,10\n")
    with pytest.raises(InputError, match=r"line 1: column 'Type' should be"):
        load_lobster(m, b)


def test_non_numeric_time_names_the_column(tmp_path):
    m, b = _pair(tmp_path, "34200.1,1,11,10,1000000,1\nnoon,1,12,10,1000000,1\n", GOOD_B)
    with pytest.raises(InputError, match=r"line 2: column 'Time' should be a decimal number"):
        load_lobster(m, b)
