"""The njit quote loops are built per quote function (``quoteloops``, numba#6264), so a second
process loads the compiled loop from numba's cache instead of compiling it again, leaves no new
cache file, and gives the same bytes as the loop that takes the function as an argument."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from numba import njit

from exsim.replay.backtesting import quoteloops
from exsim.replay.backtesting.driver import backtest
from exsim.replay.backtesting.strategies import mm_quotes
from exsim.replay.backtesting.strategy import QuoteStrategy

from test_backtest_l2_fast import _flow

HERE = Path(__file__).resolve().parent
PKG_CACHE = Path(quoteloops.__file__).resolve().parent / "__pycache__"

# one fast L2 backtest, then what numba's dispatcher of the loop says about its cache
PROBE = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from test_backtest_l2_fast import _flow, _mm
from exsim.replay.backtesting import quoteloops
from exsim.replay.backtesting.driver import backtest
r = backtest(_flow(), _mm(), fast=True)
loop = quoteloops.quote_loop("l2", _mm().fn)
print(r.digest(), sum(loop.stats.cache_hits.values()), sum(loop.stats.cache_misses.values()))
"""


def _probe(loop_dir) -> list[str]:
    env = {**os.environ, "EXSIM_QUOTE_LOOP_DIR": str(loop_dir)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _cache_files(*dirs) -> set[str]:
    return {f"{d.name}/{p.name}" for d in dirs if d.exists() for p in d.iterdir()
            if p.suffix in (".nbi", ".nbc")}


def test_a_second_process_loads_the_quote_loop_from_the_cache(tmp_path):
    first = _probe(tmp_path)
    files = _cache_files(tmp_path / "__pycache__", PKG_CACHE)
    second = _probe(tmp_path)
    assert second[0] == first[0]                 # the same result
    assert second[1:] == ["1", "0"]              # one cache hit, no compile
    assert _cache_files(tmp_path / "__pycache__", PKG_CACHE) == files   # no new cache file
    assert len(list(tmp_path.glob("ql_l2_*.py"))) == 1


def test_the_fast_path_runs_the_loop_built_for_its_quote_function(tmp_path, monkeypatch):
    # (its bytes equal the Python path's: test_backtest_l2_fast, test_backtest)
    monkeypatch.setenv("EXSIM_QUOTE_LOOP_DIR", str(tmp_path))
    monkeypatch.setattr(quoteloops, "_LOOPS", {})
    backtest(_flow(), QuoteStrategy(mm_quotes, [3, 5, 12], every=7), fast=True)
    loop = quoteloops._LOOPS[("l2", mm_quotes)]
    assert not isinstance(loop, functools.partial) and loop.__module__.startswith("ql_l2_")


def test_without_a_writable_directory_or_an_importable_name_it_falls_back(monkeypatch):
    @njit
    def local_quotes(now, bid, bid_qty, ask, ask_qty, position, cash, state, params, quote):
        quote[0], quote[1], quote[2], quote[3] = bid, 1, ask, 1

    monkeypatch.setattr(quoteloops, "_LOOPS", {})
    assert isinstance(quoteloops.quote_loop("l2", local_quotes), functools.partial)
    monkeypatch.setattr(quoteloops, "loop_dir", lambda: None)    # nowhere to write
    assert isinstance(quoteloops.quote_loop("l2", mm_quotes), functools.partial)


def test_an_edited_source_gives_a_new_file_and_removes_the_old_one(tmp_path, monkeypatch):
    monkeypatch.setenv("EXSIM_QUOTE_LOOP_DIR", str(tmp_path))
    monkeypatch.setattr(quoteloops, "_LOOPS", {})
    quoteloops.quote_loop("l2", mm_quotes)
    (old,) = tmp_path.glob("ql_l2_*.py")
    monkeypatch.setattr(quoteloops, "_VERSION", "another digest")   # as if a source changed
    monkeypatch.setattr(quoteloops, "_LOOPS", {})
    quoteloops.quote_loop("l2", mm_quotes)
    (new,) = tmp_path.glob("ql_l2_*.py")
    assert new != old and not old.exists()
