"""verify on valid engine runs with extreme prices: it reports ok and never dies.

The engine ignores a MARKET order's price and rejects out-of-range limit prices, so a valid run
may carry any int64 price (INT64_MIN, INT64_MAX, +-2^62). The checker's ladder arithmetic once
overflowed on them (``top - key`` of a bid at 2^40 and a key of INT64_MIN) and read far outside
its ladder: a segfault. Everything that could die by a signal runs in a child process (this file,
run as a script), so a crash fails the test instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
I64_MIN, I64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
# prices whose distance below a resting bid wraps int64 far enough to leave the ladder
EXTREME_PRICES = [I64_MIN, I64_MIN + 1, -(1 << 62), -1, 0, 1, 2, 1 << 40, (1 << 40) + 1,
                  1 << 59, 1 << 60, (1 << 62) - 1, 1 << 62, (1 << 62) + 1, I64_MAX]


def _child(mode: str, *args: str, timeout: float = 600) -> dict:
    """Run this file as a script in a fresh interpreter; return the JSON it prints.

    A death by signal (returncode < 0) or any other failure fails the calling test."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), HERE, env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-X", "faulthandler", __file__, mode, *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, (
        f"child {mode} exited with {proc.returncode} (negative: killed by that signal)\n"
        f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def eight_message_run() -> np.ndarray:
    """A resting bid at 2^40, an ask at 2^62, then MARKET and limit orders at extreme prices."""
    from exsim.exchange.schema import ORDER_DTYPE, Kind

    o = np.zeros(8, ORDER_DTYPE)
    o["ts"] = np.arange(1, 9)
    o["order_id"] = np.arange(1, 9)
    o["trader"] = np.arange(1, 9)                 # all distinct: no self-trade prevention
    o["qty"] = 5
    o["kind"] = Kind.NEW
    o["price"] = [1 << 40, 1 << 62, 7, 8, I64_MIN, I64_MIN, I64_MIN, I64_MAX]
    o["side"] = [0, 1, 0, 0, 0, 1, 0, 1]          # buy, sell ...
    o["order_type"] = [0, 0, 0, 0, 1, 1, 0, 0]    # messages 5 and 6 are MARKET
    return o


def _store_and_verify(data_dir: str, orders: np.ndarray) -> dict:
    from exsim.exchange import Engine
    from exsim.replay import verify
    from test_replay_common import store_run

    eng = Engine(stp="cancel_resting")
    eng.add_symbol("A")
    store_run(data_dir, orders, engine=eng, checkpoint_every=3, seal_every=4)
    rep = verify(data_dir)
    return {"ok": rep.ok, "violations": [str(v) for v in rep.violations[:5]],
            "orders": rep.summary["orders"], "fills": rep.summary["fills"]}


def _hypothesis_over_extreme_runs(examples: int) -> dict:
    """Hypothesis in the child: engine outputs of random extreme-price flows all verify."""
    from hypothesis import example, given, settings, strategies as st

    from exsim.exchange import Engine
    from exsim.exchange.schema import ORDER_DTYPE
    from exsim.replay import verify_arrays

    # a price far below the book (INT64_MIN) often, and resting prices anywhere in the band
    price = st.one_of(st.sampled_from(EXTREME_PRICES), st.just(I64_MIN), st.integers(1, 1 << 62),
                      st.integers(I64_MIN, I64_MAX), st.integers(1, 1 << 62))
    # mostly GTC limit orders of valid quantity, so books fill up and the extreme prices meet
    # resting levels
    message = st.tuples(st.sampled_from([0, 0, 0, 1, 2]), st.integers(0, 1),
                        st.sampled_from([0, 0, 1]), st.sampled_from([0, 0, 0, 1, 2]), price,
                        st.sampled_from([1, 2, 5, 5, 5, 1 << 40, (1 << 40) + 1, 0, -1]),
                        st.integers(1, 6))
    seen = {"examples": 0}

    known = [(0, int(r["side"]), int(r["order_type"]), 0, int(r["price"]), 5, int(r["order_id"]))
             for r in eight_message_run()]

    @settings(max_examples=examples, deadline=None, database=None)
    @given(st.lists(message, min_size=8, max_size=40))
    @example(known)
    def check(msgs):
        o = np.zeros(len(msgs), ORDER_DTYPE)
        for i, (kind, side, otype, tif, p, qty, oid) in enumerate(msgs):
            o[i] = (i + 1, oid, p, qty, 0, 1 + oid % 2, kind, otype, tif, 0, side, 0, 0, 0, 0, 0)
        eng = Engine(stp="cancel_resting")
        eng.add_symbol("A")
        res = eng.process(o)
        rep = verify_arrays(o, res.fills, res.l2, res.events, stp="cancel_resting", symbols=[0])
        assert rep.ok, (msgs, rep.violations[:3])
        seen["examples"] += 1

    check()
    return seen


def _ladder_search_far_below_the_top() -> dict:
    """The checker's ladder search against np.searchsorted for keys far below the top."""
    from numba import njit

    from exsim.replay.verification.book import _lad_pos

    search = njit(lambda lad, side, n, key: _lad_pos(lad, side, n, key))
    wrong = []
    for top in (1, 1 << 40, 1 << 60, 1 << 62, I64_MAX):
        keys = np.array([top - 2, top - 1, top], np.int64)
        lad = np.zeros((2, 3), np.int64)
        lad[0] = keys
        for key in (I64_MIN, I64_MIN + 1, -(1 << 62), 0, top - 1):
            if search(lad, 0, 3, key) != int(np.searchsorted(keys, key, "left")):
                wrong.append((top, key))
    return {"wrong": wrong}


def test_verify_passes_an_eight_message_run_with_int64_min_market_prices():
    with tempfile.TemporaryDirectory() as d:
        out = _child("run8", d)
    assert out["ok"], out["violations"]
    assert out["orders"] == 8 and out["fills"] == 2


def test_verify_and_engine_survive_random_flows_at_extreme_prices():
    out = _child("hypothesis", "200")
    assert out["examples"] >= 200


def test_checkers_ladder_search_with_a_key_far_below_the_top_stays_in_the_ladder():
    assert _child("ladder")["wrong"] == []


def _clean_run():
    from exsim.exchange import Engine

    from test_replay_common import rich_flow

    orders = rich_flow(600, seed=3, n_symbols=1)
    eng = Engine(stp="cancel_resting")
    eng.add_symbol("A")
    return (orders, *eng.process(orders))


def test_a_trade_id_far_from_the_others_is_a_stream_violation_not_an_allocation():
    from exsim.replay import verify_arrays

    orders, fills, l2, events = _clean_run()
    fills = fills.copy()
    fills["trade_id"][-1] = 1 << 62
    rep = verify_arrays(orders, fills, l2, events, stp="cancel_resting", symbols=[0])
    assert not rep.ok and any("trade ids are not unique" in v.detail for v in rep.violations)


def test_message_seqs_spread_over_all_of_int64_are_stream_violations_not_an_allocation():
    from exsim.replay import verify_arrays
    from exsim.store.tables import orders_with_seq

    orders, fills, l2, events = _clean_run()
    stored = orders_with_seq(orders, 1)
    stored["seq"][0], stored["seq"][-1] = I64_MIN, I64_MAX
    rep = verify_arrays(stored, fills, l2, events, stp="cancel_resting", symbols=[0])
    assert not rep.ok and rep.summary["violations"]["stream"] > 0
    assert {v.seq for v in rep.violations if v.rule == "stream"} & {I64_MIN + 1, 1}


if __name__ == "__main__":
    sys.path[:0] = [HERE]
    mode = sys.argv[1]
    if mode == "run8":
        result = _store_and_verify(sys.argv[2], eight_message_run())
    elif mode == "ladder":
        result = _ladder_search_far_below_the_top()
    else:
        result = _hypothesis_over_extreme_runs(int(sys.argv[2]))
    print(json.dumps(result))
