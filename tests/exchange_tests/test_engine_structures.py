"""The engine's two search structures against obvious models: the price ladder's search against
``np.searchsorted``, the order-id hash index against a dict (keys spread over the whole table).

These are what every NEW, CANCEL and MODIFY goes through; a wrong answer would misplace a level
or lose an order silently, so they are checked apart from the end-to-end tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange._cache_guard import guard
from exsim.exchange.book import ladder_search
from exsim.exchange.order_index import index_find, index_home, index_insert, index_remove, new_index

# the wrappers below inline these files' kernels into this file's numba cache: without the
# guard, an edit to the hash would leave them running the old one against index_find's new
guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.order_index"))


@njit(cache=True)
def _search(keys, off, n, key):
    return ladder_search(keys, off, n, key)


@njit(cache=True)
def _home(symbol, order_id, mask):
    return index_home(symbol, order_id, mask)


@njit(cache=True)
def _insert(index, symbol, order_id, slot):
    index_insert(index, symbol, order_id, slot)


@njit(cache=True)
def _remove(index, symbol, order_id):
    return index_remove(index, symbol, order_id)


def test_ladder_search_is_a_lower_bound_on_dense_sparse_and_empty_ladders():
    rng = np.random.default_rng(11)
    for trial in range(3000):
        n = int(rng.integers(0, 40))
        if n and trial % 2:   # dense: every tick occupied (the guess from the top hits)
            top = int(rng.integers(-20, 20))
            keys = np.arange(top - n + 1, top + 1, dtype=np.int64)
        else:
            keys = np.sort(rng.choice(np.arange(-60, 60), size=n, replace=False)).astype(np.int64)
        off = int(rng.integers(0, 5))
        # other books' entries on both sides: the search must stay inside [off, off + n)
        ladder = np.concatenate([np.full(off, 10**6, np.int64), keys,
                                 np.full(3, -10**6, np.int64)])
        for key in rng.integers(-70, 70, 6):
            want = int(np.searchsorted(keys, key, "left"))
            assert _search(ladder, off, n, int(key)) == want, (keys.tolist(), int(key))


def test_index_home_stays_in_the_table_for_extreme_ids():
    for cap in (16, 1 << 10, 1 << 20):
        mask = cap - 1
        for oid in (0, 1, 2**32, 2**63, 2**64 - 1):
            for sym in (0, 7, 2**32 - 1):
                assert 0 <= _home(np.uint32(sym), np.uint64(oid), mask) < cap


def test_index_spreads_sequential_and_high_bit_ids():
    # ids that differ only in low bits (sequential), only in high bits, or by a stride (ns
    # timestamps) must spread at least about as well as random homes would: 4,096 keys in 8,192
    # buckets get ~3,220 distinct homes at random; a pile-up in a few buckets gets far fewer
    seq = np.arange(1, 4097, dtype=np.uint64)
    for ids in (seq, seq << np.uint64(20), seq << np.uint64(40), seq << np.uint64(52),
                np.uint64(1_700_000_000_000_000_000) + seq * np.uint64(1000)):
        homes = {_home(np.uint32(3), i, 8191) for i in ids}
        assert len(homes) >= len(ids) * 3 // 4


def test_index_matches_a_dict_under_random_inserts_and_removes():
    rng = np.random.default_rng(5)
    index = new_index(4096)          # >= 2x the live keys at all times, as the engine keeps it
    model = {}
    for step in range(20000):
        sym = int(rng.integers(0, 3))
        oid = int(rng.integers(0, 1500)) if step % 3 else int(rng.integers(0, 2**64, dtype=np.uint64))
        key = (sym, oid)
        if key in model and rng.random() < 0.6:
            assert _remove(index, np.uint32(sym), np.uint64(oid))
            del model[key]
        elif key not in model and len(model) < 2000:
            _insert(index, np.uint32(sym), np.uint64(oid), step)
            model[key] = step
        probe = (int(rng.integers(0, 3)), int(rng.integers(0, 1500)))
        assert index_find(index, np.uint32(probe[0]), np.uint64(probe[1])) == model.get(probe, -1)
    for (sym, oid), slot in model.items():
        assert index_find(index, np.uint32(sym), np.uint64(oid)) == slot
    assert int((index["slot"] >= 0).sum()) == len(model)
