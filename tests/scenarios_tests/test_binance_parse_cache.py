"""``load_binance`` parses a capture once per content in a process (issue 37): a second call on
the same bytes does not parse again and gives equal, independent arrays; changed bytes parse
again."""

from __future__ import annotations

import gzip
import shutil

import numpy as np

from exsim.scenarios.data import BINANCE_BTCUSDT
from exsim.scenarios.loaders import binance

from conftest import shared_sample


def _counting(monkeypatch):
    calls = []
    real = binance._parse_binance

    def parse(*a):
        calls.append(a[0])
        return real(*a)
    monkeypatch.setattr(binance, "_parse_binance", parse)
    monkeypatch.setattr(binance, "_CACHE", {})
    return calls


def _small_capture(tmp_path, n_lines=3000):
    """The sample's first lines (its snapshot is the first record) as a capture of its own."""
    src = shared_sample(BINANCE_BTCUSDT)
    out = tmp_path / "small.gz"
    with gzip.open(src, "rt") as f, gzip.open(out, "wt") as g:
        for _, line in zip(range(n_lines), f):
            g.write(line)
    return out


def test_the_same_bytes_are_parsed_once_and_each_caller_gets_its_own_arrays(tmp_path,
                                                                            monkeypatch):
    calls = _counting(monkeypatch)
    path = _small_capture(tmp_path)
    twin = tmp_path / "twin.gz"
    shutil.copy(path, twin)
    first = binance.load_binance(path)
    first.l2["qty"][:] = -1                     # a caller edits what it got
    second = binance.load_binance(twin)         # another path, the same bytes
    assert len(calls) == 1
    assert len(second.l2) > 0 and (second.l2["qty"] >= 0).all()
    assert second.l2 is not first.l2
    assert np.array_equal(second.orders, binance._parse_binance(str(path), 0, binance.DEFAULT_TICK,
                                                                binance.DEFAULT_LOT).orders)


def test_changed_bytes_or_another_lot_parse_again(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    path = _small_capture(tmp_path, 3000)
    binance.load_binance(path)
    binance.load_binance(path, lot="0.000000001")
    shorter = _small_capture(tmp_path, 2000)    # rewrites small.gz with other bytes
    assert shorter == path
    binance.load_binance(path)
    assert len(calls) == 3
