"""Result tables in trading terms (issue 40 item 5): a backtest's fills in ``to_pandas()`` say
the strategy's side and liquidity, every table has a datetime64[ns] ``time`` in the run's zone,
QuoteStrategy results carry the quote function's name, and an annualised Sharpe from a run too
short to mean anything is flagged in the printed report."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.schema import AUCTION_SIDE, EVENT_DTYPE, FILL_DTYPE, ORDER_DTYPE, Side

from exsim.replay.backtesting.kernels import MARK_DTYPE
from exsim.replay.backtesting.money import Money
from exsim.replay.backtesting.report import MIN_SHARPE_BARS
from exsim.replay.backtesting.result import build_result, strategy_label
from exsim.replay.backtesting.strategy import QuoteStrategy

ME = 7
DAY = 86_400 * 10**9


def _result(ts=(30, 50, 70, 90), meta=None):
    """Fills: a resting buy, an aggressing sell, a self-trade, an auction buy."""
    f = np.zeros(4, FILL_DTYPE)
    f["seq"], f["ts"], f["trade_id"] = [3, 5, 7, 9], list(ts), [1, 2, 3, 4]
    f["price"], f["qty"] = [100, 103, 104, 101], [2, 2, 1, 1]
    f["buy_trader"], f["sell_trader"] = [ME, 1, ME, ME], [2, ME, ME, 3]
    f["aggressor_side"] = [Side.SELL, Side.SELL, Side.BUY, AUCTION_SIDE]
    o = np.zeros(1, ORDER_DTYPE)
    o["ts"] = ts[0] - 5
    return build_result(o, np.array([ts[0] - 9]), np.array([2]), f, np.zeros(0, EVENT_DTYPE),
                        np.zeros(0, MARK_DTYPE), ME, Money("USD", 0.5),
                        {"trader": ME, "symbol": 0, "symbol_name": "JPM", **(meta or {})})


def test_fills_say_my_side_and_liquidity_after_every_stored_column():
    pd = pytest.importorskip("pandas")
    res = _result()
    df = res.to_pandas("fills")
    assert list(df.columns) == [*FILL_DTYPE.names, "my_side", "liquidity", "time"]
    assert df["my_side"].tolist() == ["BUY", "SELL", "BOTH", "BUY"]
    assert df["liquidity"].tolist() == ["maker", "taker", "both", "auction"]
    assert df["buy_trader"].tolist() == res.fills["buy_trader"].tolist()   # stored: unchanged
    assert df["aggressor_side"].tolist()[:2] == ["SELL", "SELL"]
    assert isinstance(df, pd.DataFrame)


def test_every_table_gets_a_datetime_time_naive_for_a_day_without_a_date():
    pytest.importorskip("pandas")
    frames = _result(ts=(34_200 * 10**9, 34_201 * 10**9, 34_202 * 10**9, 34_203 * 10**9)) \
        .to_pandas()
    for name, df in frames.items():
        assert list(df.columns)[-1] == "time", name
        assert str(df["time"].dtype) == "datetime64[ns]", name
    assert str(frames["fills"]["time"].iloc[0]) == "1970-01-01 09:30:00"
    assert list(frames["series"].columns)[:6] == ["ts", "position", "cash", "fees", "mark", "pnl"]


def test_epoch_stamped_data_reads_as_utc():
    pytest.importorskip("pandas")
    t0 = 1_723_075_200 * 10**9   # 2024-08-08 00:00 UTC
    df = _result(ts=(t0, t0 + 1, t0 + 2, t0 + 3)).to_pandas("fills")
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    assert str(df["time"].iloc[1]) == "2024-08-08 00:00:00.000000001+00:00"


def test_a_stored_run_gives_its_own_date_and_zone(tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    from exsim.replay import rundir
    from exsim.replay.timefmt import RunClock

    monkeypatch.setattr(rundir, "run_clock",
                        lambda d: RunClock(tz="America/New_York", date="2012-06-21"))
    (tmp_path / "catalog.sqlite").write_bytes(b"")   # run_clock is the stand-in's
    df = _result(ts=(34_200 * 10**9, 34_201 * 10**9, 34_202 * 10**9, 34_203 * 10**9),
                 meta={"source": str(tmp_path)}).to_pandas("fills")
    assert str(df["time"].dtype) == "datetime64[ns, America/New_York]"
    assert str(df["time"].iloc[0]) == "2012-06-21 09:30:00-04:00"


def test_a_source_directory_that_is_no_stored_run_reads_as_utc(tmp_path):
    pytest.importorskip("pandas")
    t0 = 1_723_075_200 * 10**9
    for source in (str(tmp_path), "/no/such/dir"):   # a Binance capture's directory, or gone
        df = _result(ts=(t0, t0 + 1, t0 + 2, t0 + 3), meta={"source": source}).to_pandas("fills")
        assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    (tmp_path / "catalog.sqlite").write_bytes(b"not a catalog")   # damaged: no crash
    df = _result(ts=(t0, t0 + 1, t0 + 2, t0 + 3), meta={"source": str(tmp_path)}).to_pandas()
    assert str(df["fills"]["time"].dtype) == "datetime64[ns, UTC]"


def test_a_quote_strategy_is_labelled_with_its_quote_function():
    def my_quotes(ts, bid, bq, ask, aq, pos, cash, state, params, quote):
        pass

    label = strategy_label(QuoteStrategy(my_quotes))
    assert label.endswith(":test_a_quote_strategy_is_labelled_with_its_quote_function."
                          "<locals>.my_quotes")
    assert "QuoteStrategy" not in label
    from exsim.replay.backtesting.strategies import mm_quotes   # an @njit function
    assert strategy_label(QuoteStrategy(mm_quotes)) == \
        "exsim.replay.backtesting.strategies.market_maker:mm_quotes"


def _span_result(n_bars: int, bar_ns: int):
    """A result whose PnL moves at each of ``n_bars`` bars ``bar_ns`` apart."""
    n = n_bars
    f = np.zeros(n, FILL_DTYPE)
    f["seq"] = np.arange(1, n + 1)
    f["ts"] = np.arange(n, dtype=np.int64) * bar_ns + 1
    f["trade_id"] = np.arange(1, n + 1)
    f["price"] = 100 + (np.arange(n) % 3)
    f["qty"] = 1
    f["buy_trader"] = np.where(np.arange(n) % 2 == 0, ME, 1)
    f["sell_trader"] = np.where(np.arange(n) % 2 == 0, 2, ME)
    f["aggressor_side"] = Side.SELL
    empty = np.zeros(0, np.int64)
    return build_result(np.zeros(0, ORDER_DTYPE), empty, empty, f, np.zeros(0, EVENT_DTYPE),
                        np.zeros(0, MARK_DTYPE), ME, Money(), {"trader": ME, "symbol": 0})


def test_a_sharpe_annualised_from_a_short_run_is_flagged_not_printed_plainly():
    rep = _span_result(10, 10**9).report(bar_ns=10**9)   # 10 one-second bars
    assert rep.stats["sharpe_annualised"] is not None
    assert "fewer than 30" in rep.stats["sharpe_note"]
    assert "less than one 6.5 h trading day" in rep.stats["sharpe_note"]
    line = next(l for l in rep.text().splitlines() if l.startswith("sharpe_annualised"))
    assert "(not meaningful: " in line
    assert "sharpe_note" not in rep.text()
    assert rep.to_json()["stats"]["sharpe_note"] == rep.stats["sharpe_note"]


def test_a_long_enough_run_prints_its_sharpe_without_a_note():
    hour = 3600 * 10**9
    rep = _span_result(MIN_SHARPE_BARS + 10, hour).report(bar_ns=hour)
    assert rep.stats["sharpe_annualised"] is not None and rep.stats["sharpe_note"] is None
    line = next(l for l in rep.text().splitlines() if l.startswith("sharpe_annualised"))
    assert "not meaningful" not in line
    # enough bars but under a trading day: still flagged, for the span alone
    short = _span_result(MIN_SHARPE_BARS + 10, 10**9).report(bar_ns=10**9)
    assert short.stats["sharpe_note"] == "39 s of data, less than one 6.5 h trading day"


def test_a_backtest_of_a_stored_lobster_day_shows_new_york_times(tmp_path):
    pytest.importorskip("pandas")
    from conftest import shared_sample

    from exsim.replay import backtest
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    from exsim.replay.simulation import simulate
    from exsim.scenarios import open_flow
    from exsim.scenarios.data import LOBSTER_AAPL

    simulate(open_flow(str(shared_sample(LOBSTER_AAPL))), str(tmp_path / "run"), batch=1000,
             durability="none", quiet=True)
    res = backtest(str(tmp_path / "run"), InventoryMarketMaker(every=5))
    fills = res.to_pandas("fills")
    assert len(fills) > 0
    assert str(fills["time"].dtype) == "datetime64[ns, America/New_York]"
    first = fills["time"].iloc[0]
    assert str(first.date()) == "2012-06-21" and first.hour == 9   # LOBSTER ts: from NY midnight
    assert set(fills["my_side"]) <= {"BUY", "SELL"}
