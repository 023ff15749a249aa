"""A run journaled before trading phases (tests/golden/run_v1) reads as continuous all day:
``book_at`` says CONTINUOUS with no indicative, ``phase_stats`` finds no auction and every
trade continuous."""

from __future__ import annotations

import os
import shutil

import pytest

from exsim.exchange.schema import Phase
from exsim.replay import book_at
from exsim.replay.analytics import phase_stats
from exsim.store import read

RUN_V1 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden",
                      "run_v1")


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("old") / "run_v1")
    shutil.copytree(RUN_V1, d)
    return d


def test_book_at_of_an_old_run_is_continuous_without_indicative(old):
    for seq in (1999, 4500, 7500):
        for l3 in (False, True):
            v = book_at(old, "JPM", seq=seq, l3=l3)
            assert v.phase == Phase.CONTINUOUS and v.indicative == (0, 0, 0)


def test_phase_stats_of_an_old_run_is_a_continuous_day(old):
    got = phase_stats(old, "JPM")
    orders = read(old, "orders", columns=["ts"])
    fills = read(old, "fills", symbol="JPM", columns=["qty"])
    assert got["auctions"] == {} and got["uncrosses"].size == 0
    assert got["halts"] == 0 and got["interruptions"] == 0
    assert got["time_in_phase_ns"] == {"continuous": int(orders["ts"][-1] - orders["ts"][0])}
    assert got["trades"]["continuous"] == {"count": int(fills.size), "volume": int(fills["qty"].sum())}
    assert got["trades"]["auction"] == {"count": 0, "volume": 0}
