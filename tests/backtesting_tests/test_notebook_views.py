"""Notebook views (issue 18): engine results, stored tables and backtest results as pandas
DataFrames with enum names and symbol names, short reprs, and a UsageError naming the
``exsim[pandas]`` extra when pandas is missing.

pandas is optional: the tests with real pandas are skipped without it; the others use a stand-in
``pandas`` module that records the columns it is given."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from exsim.exchange.errors import UsageError
from exsim.exchange.frames import labelled_columns, symbol_names
from exsim.exchange.protocol import Result
from exsim.exchange.schema import EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Event, Reason

from exsim.replay.backtesting.kernels import MARK_DTYPE
from exsim.replay.backtesting.money import Money
from exsim.replay.backtesting.result import build_result

ME = 7


class _Frame(dict):
    """What the stand-in pandas returns: the columns it was given."""


@pytest.fixture
def fake_pandas(monkeypatch):
    mod = types.ModuleType("pandas")
    mod.DataFrame = _Frame
    monkeypatch.setitem(sys.modules, "pandas", mod)
    return mod


@pytest.fixture
def no_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)   # import pandas -> ImportError


def _engine_result():
    f = np.zeros(2, FILL_DTYPE)
    f["symbol"], f["aggressor_side"], f["price"] = [0, 1], [1, 0], [100, 200]
    f["buy_trader"], f["sell_trader"] = [ME, 1], [2, ME]
    l2 = np.zeros(1, L2_DTYPE)
    l2["side"], l2["symbol"] = 1, 5           # symbol 5 has no name
    e = np.zeros(3, EVENT_DTYPE)
    e["event"] = [Event.ACCEPTED, Event.REJECTED, 200]   # 200: no such event
    e["reason"] = [Reason.NONE, Reason.OFF_TICK, Reason.EXPIRED]
    return Result(f, l2, e)


def _backtest():
    r = _engine_result()
    o = np.zeros(2, ORDER_DTYPE)
    o["kind"], o["side"], o["tif"], o["order_type"] = [0, 1], [0, 0], [1, 3], [0, 2]
    return build_result(o, np.array([5, 9]), np.array([11, 12]), r.fills, r.events,
                        np.zeros(0, MARK_DTYPE), ME, Money("USD", 0.5),
                        {"trader": ME, "symbol": 0, "symbol_name": "JPM",
                         "strategy": "my.mod:Maker"})


def test_enum_codes_become_names_and_unknown_codes_stay_numbers():
    cols = labelled_columns(_engine_result().events)
    assert cols["event"].tolist() == ["ACCEPTED", "REJECTED", "200"]
    assert cols["reason"].tolist() == ["NONE", "OFF_TICK", "EXPIRED"]
    assert cols["seq"].dtype == np.int64 and list(cols) == list(EVENT_DTYPE.names)


def test_symbol_ids_become_names_given_in_any_of_the_usual_shapes():
    fills = _engine_result().fills
    for symbols in (["AAA", "BBB"], {0: "AAA", 1: "BBB"}, {"AAA": 0, "BBB": 1}):
        assert labelled_columns(fills, symbols)["symbol"].tolist() == ["AAA", "BBB"]
    assert labelled_columns(fills)["symbol"].tolist() == [0, 1]   # no names: ids kept
    assert labelled_columns(_engine_result().l2, ["AAA"])["symbol"].tolist() == ["5"]
    assert labelled_columns(fills)["aggressor_side"].tolist() == ["SELL", "BUY"]
    with pytest.raises(UsageError, match="symbols"):
        symbol_names(3)
    with pytest.raises(UsageError, match="structured"):
        labelled_columns(np.zeros(3))


def test_engine_result_to_pandas_is_one_frame_per_table(fake_pandas):
    frames = _engine_result().to_pandas(symbols=["AAA", "BBB"])
    assert list(frames) == ["fills", "l2", "events"]
    assert frames["fills"]["symbol"].tolist() == ["AAA", "BBB"]
    assert _engine_result().to_pandas("events")["event"].tolist()[:2] == ["ACCEPTED", "REJECTED"]
    with pytest.raises(UsageError, match="unknown table 'trades'"):
        _engine_result().to_pandas("trades")


def test_backtest_to_pandas_labels_orders_and_adds_send_time_and_seq(fake_pandas):
    frames = _backtest().to_pandas()
    assert list(frames) == ["fills", "orders", "events", "series"]
    orders = frames["orders"]
    assert orders["kind"].tolist() == ["NEW", "CANCEL"] and orders["tif"].tolist() == ["IOC", "DAY"]
    assert orders["order_type"].tolist() == ["LIMIT", "STOP"] and orders["symbol"].tolist() == ["JPM"] * 2
    assert orders["sent_ts"].tolist() == [5, 9] and orders["seq"].tolist() == [11, 12]
    assert frames["fills"]["symbol"].tolist() == ["JPM", "1"]   # only the traded symbol is named
    # the stored columns first and unchanged; then ``time`` (issue 40 item 5)
    assert list(frames["series"]) == ["ts", "position", "cash", "fees", "mark", "pnl", "time"]
    with pytest.raises(UsageError, match="unknown table"):
        _backtest().to_pandas("l2")


def test_without_pandas_every_view_names_the_extra(no_pandas, tmp_path):
    from exsim.store.query import read
    for call in (lambda: _engine_result().to_pandas(), lambda: _backtest().to_pandas(),
                 lambda: read(tmp_path, "fills", as_pandas=True)):
        with pytest.raises(UsageError, match=r"exsim\[pandas\]"):
            call()


def test_backtest_repr_is_one_short_line_and_html_a_small_table():
    res = _backtest()
    text = repr(res)
    assert "\n" not in text and len(text) < 200
    assert "my.mod:Maker" in text and "JPM" in text and "USD" in text and "2 fills" in text
    page = res._repr_html_()
    assert page.count("<tr>") == len(res.summary) + 1 and len(page) < 4000


def test_the_pandas_extra_is_declared_and_in_the_test_extra():
    import tomllib
    from pathlib import Path
    meta = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    assert any(d.startswith("pandas") for d in extras["pandas"])
    assert any(d.startswith("pandas") for d in extras["test"])


def test_with_real_pandas_the_frames_have_the_rows_and_labels():
    pd = pytest.importorskip("pandas")
    df = _backtest().to_pandas("orders")
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert df["kind"].tolist() == ["NEW", "CANCEL"] and df["seq"].tolist() == [11, 12]
    assert _engine_result().to_pandas()["events"]["reason"].tolist()[1] == "OFF_TICK"
