"""QuantCup feed loader: counts, id numbering, and clear errors for broken files."""

from pathlib import Path

import numpy as np
import pytest

from exsim.exchange.errors import InputError
from exsim.exchange.schema import Kind, OrderType, Side, Tif
from exsim.scenarios.loaders.quantcup import QUANTCUP_HEADER, load_quantcup

FEED = Path("/work/shared/data/quantcup_score_feed/quantcup_score_feed.csv")
needs_feed = pytest.mark.skipif(not FEED.exists(), reason="shared QuantCup feed not present")


@needs_feed
def test_feed_loads_with_documented_counts():
    orders = load_quantcup(FEED)
    assert len(orders) == 35_759
    assert (orders["kind"] == Kind.NEW).sum() == 17_894
    assert (orders["kind"] == Kind.CANCEL).sum() == 17_865


@needs_feed
def test_limits_take_ids_one_to_n_and_are_gtc_limits():
    orders = load_quantcup(FEED)
    new = orders[orders["kind"] == Kind.NEW]
    assert np.array_equal(new["order_id"], np.arange(1, len(new) + 1))
    assert np.all(new["order_type"] == OrderType.LIMIT) and np.all(new["tif"] == Tif.GTC)
    assert orders[0]["trader"] == 8 and orders[0]["side"] == Side.BUY and orders[0]["price"] == 4799
    assert orders[2]["kind"] == Kind.CANCEL and orders[2]["order_id"] == 2


def _write(tmp_path, body: str) -> Path:
    p = tmp_path / "feed.csv"
    p.write_text(body)
    return p


def test_wrong_header_names_line_one(tmp_path):
    p = _write(tmp_path, "seq,op\n0,limit\n")
    with pytest.raises(InputError, match=r"feed.csv, line 1: expected the header"):
        load_quantcup(p)


def test_truncated_line_names_its_line_and_the_columns(tmp_path):
    p = _write(tmp_path, QUANTCUP_HEADER + "\n0,limit,1,ID8,buy,4799,500,\n1,limit,2,ID4,bu")
    with pytest.raises(InputError, match=r"line 3: expected 8 comma-separated columns"):
        load_quantcup(p)


def test_missing_price_on_a_limit_names_the_field(tmp_path):
    p = _write(tmp_path, QUANTCUP_HEADER + "\n0,cancel,,ID7,,,,2\n1,limit,1,ID8,buy,,500,\n")
    with pytest.raises(InputError, match=r"line 3: column 'price' should be an integer"):
        load_quantcup(p)


def test_out_of_order_limit_id_is_an_error(tmp_path):
    p = _write(tmp_path, QUANTCUP_HEADER + "\n0,limit,1,ID8,buy,4799,500,\n1,limit,5,ID8,buy,4799,500,\n")
    with pytest.raises(InputError, match=r"line 3: limit order_id should be 2"):
        load_quantcup(p)


def test_unknown_op_is_an_error(tmp_path):
    p = _write(tmp_path, QUANTCUP_HEADER + "\n0,amend,1,ID8,buy,4799,500,\n")
    with pytest.raises(InputError, match=r"line 2: column 'op' should be one of"):
        load_quantcup(p)


@needs_feed
def test_feed_through_the_engine_makes_16887_trades():
    from exsim.exchange import Engine

    eng = Engine()
    eng.add_symbol("QC")
    assert len(eng.process(load_quantcup(FEED)).fills) == 16_887
