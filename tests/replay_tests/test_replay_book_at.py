"""book_at against the live engine: L2 and L3 views, by seq and by ts, and its usage errors."""

import numpy as np
import pytest

from exsim.exchange.errors import StoreError, UsageError
from exsim.replay import book_at
from test_replay_common import SYMBOLS, rich_flow, store_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A stored 4,000-message run and the live engine's books captured after each batch."""
    d = tmp_path_factory.mktemp("book_at")
    return d, store_run(d, rich_flow(4000, seed=11), seed=5, capture=True)


def _samples(captures, k=12, seed=0):
    rng = np.random.default_rng(seed)
    return [captures[i] for i in sorted(rng.choice(len(captures), k, replace=False))]


def test_l2_view_equals_live_depth_at_random_seqs(run):
    d, captures = run
    for seq, _, books in _samples(captures):
        for name in SYMBOLS:
            view = book_at(d, name, seq=seq, depth=None)
            assert view.seq == seq and view.orders is None
            assert np.array_equal(view.bids, books[name][0]) and np.array_equal(view.asks, books[name][1])


def test_l3_view_equals_live_orders_and_depth_at_random_seqs(run):
    d, captures = run
    for seq, _, books in _samples(captures, seed=1):
        for name in SYMBOLS:
            view = book_at(d, name, seq=seq, depth=None, l3=True)
            bids, asks, orders = books[name]
            assert np.array_equal(view.orders, orders)
            assert np.array_equal(view.bids, bids) and np.array_equal(view.asks, asks)


def test_ts_target_gives_the_book_after_the_last_message_at_or_before_it(run):
    d, captures = run
    for seq, ts, books in _samples(captures, seed=2):
        view = book_at(d, "AAA", ts=ts, depth=3)
        assert view.seq <= seq and view.ts <= ts
        assert np.array_equal(view.bids, books["AAA"][0][:3])
        assert np.array_equal(view.asks, books["AAA"][1][:3])


def test_ts_before_the_first_message_gives_the_starting_book(run):
    d, _ = run
    view = book_at(d, "AAA", ts=0)
    assert (view.seq, view.ts, view.bids.size, view.asks.size) == (0, None, 0, 0)


def test_depth_caps_levels_best_first(run):
    d, captures = run
    seq, _, books = captures[-1]
    view = book_at(d, "BBB", seq=seq, depth=2)
    assert np.array_equal(view.bids, books["BBB"][0][:2])
    assert np.all(np.diff(view.bids["price"]) < 0) and np.all(np.diff(view.asks["price"]) > 0)


def test_unsealed_wal_tail_is_rebuilt_too(tmp_path):
    captures = store_run(tmp_path, rich_flow(900, seed=3), capture=True, close=False)
    seq, _, books = captures[-1]
    for l3 in (False, True):
        view = book_at(tmp_path, "CCC", seq=seq, depth=None, l3=l3)
        assert np.array_equal(view.bids, books["CCC"][0]) and np.array_equal(view.asks, books["CCC"][1])


@pytest.mark.parametrize("kwargs, match", [
    ({}, "exactly one"), ({"seq": 5, "ts": 5}, "exactly one"), ({"seq": 10**9}, "outside"),
    ({"seq": -1}, "outside"), ({"seq": 5, "depth": -1}, "depth"), ({"seq": "5"}, "int"),
])
def test_bad_arguments_raise_usage_error(run, kwargs, match):
    with pytest.raises(UsageError, match=match):
        book_at(run[0], "AAA", **kwargs)


def test_unknown_symbol_and_missing_directory_are_errors(run, tmp_path):
    with pytest.raises(UsageError, match="unknown symbol"):
        book_at(run[0], "ZZZ", seq=1)
    with pytest.raises(StoreError):
        book_at(tmp_path / "nope", "AAA", seq=1)
