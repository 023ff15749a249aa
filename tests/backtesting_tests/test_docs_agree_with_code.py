"""docs/backtesting.md and the strategy docstrings say what the code does: an empty side of the
book is 0 (not None), the Binance capture's counts are the loader's and say what each counts,
and the page quotes no speed it does not point at a benchmark for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "backtesting.md").read_text()


def test_an_empty_side_is_zero_and_the_docs_say_so_where_a_strategy_author_reads():
    from exsim.exchange import Engine
    from exsim.replay.backtesting.strategy import MarketView, Strategy

    view = MarketView(5, 5, (0, 0, 0, 0), Engine(), 0)
    assert view.bid == 0 and view.ask == 0 and view.mid is None
    assert "An empty side is 0, not None" in PAGE
    assert "0** (not None) on an empty side" in Strategy.on_book.__doc__
    import exsim.replay.backtesting.strategy as module
    assert "**0, not None**" in module.__doc__
    # the page's own example checks the side before buying at it
    assert "if book.bid and ctx.position < 10" in PAGE


def test_the_page_quotes_no_unmeasured_timing():
    assert not re.search(r"about \d+(\.\d+)? ?s\b(?! of market time)", PAGE)
    assert not re.search(r"\d(\.\d+)? M events/s", PAGE)
    assert "about 10 s" not in PAGE


def test_the_binance_counts_on_the_page_are_the_loaders():
    from exsim.scenarios.data import BINANCE_BTCUSDT, shared_file
    from exsim.scenarios.loaders.binance import load_binance

    from exsim.exchange.errors import InputError

    try:
        path = shared_file(BINANCE_BTCUSDT)
    except InputError as e:   # ../shared/data is not beside this checkout
        pytest.skip(f"the shared Binance sample is absent: {e}")
    import os
    if os.path.isdir(path):
        path = os.path.join(path, "btcusdt_20240808.gz")
    d = load_binance(path)
    want = {"L2 rows": d.l2.size, "trades": d.trades.size,
            "market events": d.l2.size + d.trades.size, "engine messages": d.orders.size}
    for what, n in want.items():
        assert f"**{n:,} {what}**" in PAGE, (what, n)
