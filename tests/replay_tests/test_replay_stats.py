"""stats: hand-computed mid, spread, microprice, imbalance and VWAP on a tiny stored book."""

import math

import numpy as np
import pytest

from exsim.exchange import ORDER_DTYPE, Engine
from exsim.exchange.errors import UsageError
from exsim.replay import stats
from exsim.replay.analytics import STATS_DTYPE, stats_arrays
from exsim.store import Session

S = 1_000_000_000
# (ts, order_id, side, price, qty): two asks, two bids, then a buy and a sell that cross
MESSAGES = [(1 * S, 1, 1, 101, 4), (2 * S, 2, 1, 102, 6), (3 * S, 3, 0, 99, 2),
            (4 * S, 4, 0, 100, 3), (5 * S, 5, 0, 101, 1), (5 * S + S // 2, 6, 1, 100, 3)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("stats")
    eng = Engine()
    eng.add_symbol("T")
    orders = np.zeros(len(MESSAGES), ORDER_DTYPE)
    for name, column in zip(("ts", "order_id", "side", "price", "qty"), zip(*MESSAGES)):
        orders[name] = column
    orders["trader"] = orders["order_id"]
    with Session.create(d, eng, durability="none") as s:
        s.process(orders)
    return d


def test_series_equals_hand_computed_values(data_dir):
    out = stats(data_dir, "T", levels=5, window_ns=S)
    assert out.dtype == STATS_DTYPE and list(out["seq"]) == [1, 2, 3, 4, 5, 6]
    row = out[3]   # bids 100x3, 99x2; asks 101x4, 102x6
    assert (row["mid"], row["spread"]) == (100.5, 1.0)
    assert row["microprice"] == pytest.approx((100 * 4 + 101 * 3) / 7)
    assert row["imbalance"] == pytest.approx((5 - 10) / 15) and math.isnan(row["vwap"])
    assert out[4]["vwap"] == 101.0                               # one fill: 1 @ 101
    assert out[5]["vwap"] == pytest.approx((101 + 3 * 100) / 4)  # 1 @ 101 and 3 @ 100 in 1 s
    assert (out[5]["mid"], out[5]["spread"]) == (100.0, 2.0)     # bids 99x2, asks 101x3


def test_one_sided_book_has_nan_prices_and_full_imbalance(data_dir):
    first = stats(data_dir, "T")[0]   # only the ask 101x4
    assert math.isnan(first["mid"]) and math.isnan(first["spread"]) and math.isnan(first["microprice"])
    assert first["imbalance"] == -1.0


def test_levels_limit_the_imbalance_depth(data_dir):
    row = stats(data_dir, "T", levels=1)[3]
    assert row["imbalance"] == pytest.approx((3 - 4) / 7)


def test_ts_range_selects_rows_and_keeps_the_book_before_it(data_dir):
    out = stats(data_dir, "T", ts=(4 * S, 5 * S))
    assert list(out["seq"]) == [4, 5] and out[0]["mid"] == 100.5


def test_window_drops_old_fills(data_dir):
    assert stats(data_dir, "T", window_ns=S // 4)[5]["vwap"] == 100.0


def test_bad_arguments_are_usage_errors(data_dir):
    with pytest.raises(UsageError):
        stats(data_dir, "T", levels=0)
    with pytest.raises(UsageError):
        stats(data_dir, "NOPE")
    with pytest.raises(UsageError):
        stats_arrays(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), window_ns=0)
