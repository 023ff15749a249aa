"""``Engine(threads=N)`` (exchange.shards) against the single-threaded engine.

The product is byte-identical output, so every test feeds the same calls to ``Engine()`` and to
``Engine(threads=N)`` and compares bytes: fills, L2 rows, events (seq and trade ids included),
checkpoints and state hashes. The flows put symbols of several shards on every path where
shards could disagree: DAY orders of many symbols expiring at one session close and GTD orders
of different symbols expiring at one instant (the deadlines of several shards before one
message), re-opening auctions after band breaches ending at one instant, stops released by an
uncross, icebergs, growth from a tiny capacity, checkpoints restored into another thread count,
and the threaded path proper (``PARALLEL_MIN`` 0: every batch on the pool, the merge in ranges).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import exsim.exchange.shards as shards
from exsim.exchange import Engine, OutputBuffers, ShardedEngine, UsageError
from exsim.exchange.schema import ORDER_DTYPE, Event, Kind, Reason, Side, Tif
from phase_flows import PHASE_SYMBOLS, SESSION_CLOSE, T0, phase_messages, phase_orders

# the phase symbols A (a call at the start) and B (bands, short interruptions, a DAY close inside
# every flow) three times each, laid out so that every thread count below has B symbols on
# several shards: symbol s is on shard s % N
LAYOUT = [0, 1, 1, 0, 0, 1]
SYMBOLS = [(f"{PHASE_SYMBOLS[k][0]}{i}", *PHASE_SYMBOLS[k][1:]) for i, k in enumerate(LAYOUT)]
COPIES = {k: [i for i, c in enumerate(LAYOUT) if c == k] for k in (0, 1)}
UNKNOWN = len(SYMBOLS)


def build(threads, capacity=1024):
    eng = Engine(stp="cancel_resting", threads=threads, capacity=capacity)
    for name, lo, hi, opts in SYMBOLS:
        eng.add_symbol(name, min_price=lo, max_price=hi, **opts)
    return eng


@st.composite
def mixed_flows(draw, min_size=20, max_size=80):
    """Phase flows (phase_flows.phase_messages) spread over the six symbols: each message's
    symbol becomes one of its copies, so one flow's DAY/GTD expiries and auction ends fall on
    symbols of different shards at the same instants."""
    msgs = draw(st.lists(phase_messages(), min_size=min_size, max_size=max_size))
    for m in msgs:
        s = m["symbol"]
        m["symbol"] = UNKNOWN if s not in COPIES else draw(st.sampled_from(COPIES[s]))
    return phase_orders(msgs)


def outputs(res):
    return tuple(a.tobytes() for a in res)


def run_both(flow, threads, cuts=(), capacity=1024, out=False):
    """Feed ``flow`` in batches split at ``cuts`` to a threads=1 and a threads=N engine; return
    (the batches [lo, hi) whose outputs or seq differ, the two engines)."""
    one, many = build(1, capacity), build(threads, capacity)
    bufs = OutputBuffers(0) if out else None
    bounds = [0, *sorted(c for c in cuts if 0 <= c <= len(flow)), len(flow)]
    differ = []
    for lo, hi in zip(bounds, bounds[1:]):
        want = outputs(one.process(flow[lo:hi]))
        got = outputs(many.process(flow[lo:hi], out=bufs))
        if got != want or many.seq != one.seq:
            differ.append((lo, hi))
    return differ, one, many


@pytest.fixture(params=["inline", "pool"])
def path(request, monkeypatch):
    """Both ways a batch runs: shards one after another (small batches) and on the pool."""
    if request.param == "pool":
        monkeypatch.setattr(shards, "PARALLEL_MIN", 0)
    return request.param


_SETTINGS = dict(max_examples=15, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


@settings(**_SETTINGS)
@given(flow=mixed_flows(), threads=st.sampled_from([2, 3]),
       cuts=st.lists(st.integers(0, 120), max_size=4))
def test_threads_give_the_single_engines_bytes_on_mixed_flows(path, flow, threads, cuts):
    differ, one, many = run_both(flow, threads, cuts)
    assert differ == []
    assert many.checkpoint() == one.checkpoint()
    assert many.state_hash() == one.state_hash()


@settings(**_SETTINGS)
@given(flow=mixed_flows(), threads=st.sampled_from([2, 3]))
def test_threads_grow_every_shard_from_a_tiny_capacity_into_reused_buffers(path, flow, threads):
    differ, one, many = run_both(flow, threads, capacity=0, out=True)
    assert differ == []
    assert many.checkpoint() == one.checkpoint()
    assert many.state_hash() == one.state_hash()


@settings(**_SETTINGS)
@given(flow=mixed_flows(), data=st.data())
def test_a_checkpoint_restores_into_any_thread_count(path, flow, data):
    cut = data.draw(st.integers(0, len(flow)))
    src_threads = data.draw(st.sampled_from([1, 2, 3]))
    dst_threads = data.draw(st.sampled_from([1, 2, 3]))
    one, src = build(1), build(src_threads)
    one.process(flow[:cut])
    src.process(flow[:cut])
    blob = src.checkpoint()
    assert blob == one.checkpoint()
    dst = Engine.restore(blob, threads=dst_threads)
    assert dst.threads == dst_threads
    assert dst.checkpoint() == blob and dst.state_hash() == one.state_hash()
    assert outputs(dst.process(flow[cut:])) == outputs(one.process(flow[cut:]))
    assert dst.checkpoint() == one.checkpoint()
    for sid in range(len(SYMBOLS)):
        assert dst.orders(sid).tobytes() == one.orders(sid).tobytes()
        assert dst.stops(sid).tobytes() == one.stops(sid).tobytes()
        assert dst.phase(sid) == one.phase(sid)
        assert dst.indicative(sid) == one.indicative(sid)
    assert dst.next_deadline() == one.next_deadline()
    assert dst.live_orders == one.live_orders


def day_orders_at_one_close(n_symbols=8, per_symbol=3):
    """DAY orders on every symbol (ids interleaved across symbols), then one message after the
    session close: every order expires before it, in (expire_ts, symbol, order_id) order."""
    rows = []
    t = T0 - 100
    for k in range(per_symbol):
        for s in reversed(range(n_symbols)):
            rows.append(dict(kind=Kind.NEW, symbol=s, order_id=100 - 10 * k + s, side=k % 2,
                             price=100 + (1 if k % 2 else -1), qty=1 + s, tif=Tif.DAY, ts=t,
                             trader=1))
            t += 1
    # GTD orders of two symbols expiring at one instant, the same as a third one's
    for s, oid in ((5, 7), (2, 9), (6, 1)):
        rows.append(dict(kind=Kind.NEW, symbol=s, order_id=oid, side=0, price=90, qty=1,
                         tif=Tif.GTD, expire_ts=T0 + 500, ts=t, trader=1))
    rows.append(dict(kind=Kind.CANCEL, symbol=0, order_id=1, ts=T0 + 1_000, trader=1))
    flow = np.zeros(len(rows), ORDER_DTYPE)
    for row, m in zip(flow, rows):
        for k, v in m.items():
            row[k] = v
    return flow


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_expiries_of_many_shards_before_one_message_interleave_as_one_engine(path, threads):
    names = [(f"S{s}", dict(session_close=SESSION_CLOSE)) for s in range(8)]
    one, many = Engine(), Engine(threads=threads)
    for eng in (one, many):
        for name, opts in names:
            eng.add_symbol(name, **opts)
    flow = day_orders_at_one_close()
    want, got = one.process(flow), many.process(flow)
    assert outputs(got) == outputs(want)
    expired = got.events[got.events["reason"] == Reason.EXPIRED]
    assert len(expired) == 8 * 3 + 3
    assert (expired["seq"] == len(flow)).all()          # all before the last message
    keys = list(zip(expired["symbol"][:24].tolist(), expired["order_id"][:24].tolist()))
    assert keys == sorted(keys)                          # one close: by symbol, then id
    assert many.checkpoint() == one.checkpoint()


def test_trade_ids_run_engine_wide_across_shards(path):
    one, many = Engine(), Engine(threads=2)
    for eng in (one, many):
        for s in range(4):
            eng.add_symbol(f"S{s}")
    rows = []
    for k in range(40):
        s = k % 4
        rows.append((Kind.NEW, s, 2 * k + 1, Side.SELL, 100, 2, k))
        rows.append((Kind.NEW, s, 2 * k + 2, Side.BUY, 100, 1, k))
    flow = np.zeros(len(rows), ORDER_DTYPE)
    for row, (kind, s, oid, side, price, qty, ts) in zip(flow, rows):
        row["kind"], row["symbol"], row["order_id"], row["side"] = kind, s, oid, side
        row["price"], row["qty"], row["ts"], row["trader"] = price, qty, ts, 1 + side
    got = many.process(flow)
    assert outputs(got) == outputs(one.process(flow))
    assert got.fills["trade_id"].tolist() == list(range(1, 41))
    assert outputs(many.process(flow[:2])) == outputs(one.process(flow[:2]))


def test_large_uniform_batches_match_on_the_pool():
    from exsim.scenarios.generators.uniform import uniform_flow

    flow = uniform_flow(n=3 * shards.PARALLEL_MIN, n_symbols=7, seed=3)
    one, many = Engine(), Engine(threads=2)
    for eng in (one, many):
        for s in range(7):
            eng.add_symbol(f"S{s}")
    out = OutputBuffers(1000)
    for lo in range(0, len(flow), 2 * shards.PARALLEL_MIN):
        batch = flow[lo: lo + 2 * shards.PARALLEL_MIN]
        assert outputs(many.process(batch, out=out)) == outputs(one.process(batch))
    assert many.checkpoint() == one.checkpoint()


@pytest.mark.parametrize("pending", [True, False])
def test_a_batch_of_plain_messages_runs_the_deadlines_set_before_it(pending):
    """A shard whose messages in a batch can set no deadline matches them as one run without
    walking the batch, unless a deadline set earlier falls due inside it: GTD orders rested in
    one batch expire between the plain messages of the next, on both shards, in the single
    engine's order (and with ``pending`` False nothing is due and the short way is taken)."""
    from exsim.scenarios.generators.uniform import uniform_flow

    one, many = Engine(), Engine(threads=2)
    for eng in (one, many):
        for s in range(4):
            eng.add_symbol(f"S{s}")
    first = np.zeros(8, ORDER_DTYPE)
    first["kind"] = Kind.NEW
    first["symbol"] = np.arange(8) % 4
    first["order_id"] = 10_000_000 + np.arange(8)
    first["side"] = Side.BUY
    first["price"] = 1
    first["qty"] = 5
    first["ts"] = 1 + np.arange(8)
    first["tif"] = Tif.GTD
    first["expire_ts"] = (10 ** 18 if not pending else 0) + 2_000 + 37 * np.arange(8)
    assert outputs(many.process(first)) == outputs(one.process(first))
    flow = uniform_flow(n=2 * shards.PARALLEL_MIN, n_symbols=4, seed=5)
    flow["ts"] = flow["ts"] - flow["ts"][0] + 100      # the expiries fall inside this batch
    got, want = many.process(flow), one.process(flow)
    assert outputs(got) == outputs(want)
    expired = (want.events["event"] == Event.CANCELLED) & (want.events["reason"] == Reason.EXPIRED)
    assert int(expired.sum()) == (8 if pending else 0)
    assert many.checkpoint() == one.checkpoint()


def test_a_shards_output_buffers_are_sized_for_its_messages_before_matching(monkeypatch):
    """A shard's buffers start empty: growing them by doubling inside the walk cost a kernel
    exit and a copy under the GIL each time, so ``run`` sizes them as ``OutputBuffers`` would
    first and an ordinary batch grows none of them."""
    from exsim.scenarios.generators.uniform import uniform_flow

    flow = uniform_flow(n=2 * shards.PARALLEL_MIN, n_symbols=5, seed=4)
    one, many = Engine(), Engine(threads=2)
    for eng in (one, many):
        for s in range(5):
            eng.add_symbol(f"S{s}")
    grown = []
    real_grow = shards._grow_output
    monkeypatch.setattr(shards, "_grow_output",
                        lambda a, used, n: grown.append(n) or real_grow(a, used, n))
    assert outputs(many.process(flow)) == outputs(one.process(flow))
    assert grown == []
    for sh in many._shards:
        assert [len(sh.fills), len(sh.l2), len(sh.events)] >= list(OutputBuffers.sizes(sh.n_own))


def test_the_per_order_calls_match_the_single_engine():
    one, many = Engine(), Engine(threads=3)
    for eng in (one, many):
        for s in range(4):
            eng.add_symbol(f"S{s}", session_close=SESSION_CLOSE, dynamic_band_bps=500,
                           reference_price=100)
    for eng in (one, many):
        eng._calls = [
            eng.submit("S1", "sell", price=100, qty=5, ts=1),
            eng.submit("S2", "sell", price=101, qty=5, ts=2, tif="gtd", expire_ts=10),
            eng.submit(3, "buy", price=99, qty=3, ts=3, display_qty=1),
            eng.submit("S1", "buy", qty=2, order_type="market", ts=4),
            eng.modify("S1", 1, price=100, qty=9, ts=5),
            eng.cancel("S3", 3, ts=6),
            eng.set_phase("S0", "reopening_auction", ts=7, end_ts=12),
            eng.submit("S0", "buy", price=100, qty=1, ts=11),
            eng.submit("S0", "sell", price=100, qty=1, ts=20),
        ]
    assert [outputs(r) for r in many._calls] == [outputs(r) for r in one._calls]
    assert many.checkpoint() == one.checkpoint()
    for sid in range(4):
        assert [a.tobytes() for a in many.depth(sid)] == [a.tobytes() for a in one.depth(sid)]
    assert many.memory_bytes() > 0 and many.prefetch_distance == one.prefetch_distance


def test_threads_is_a_documented_option_outside_the_config():
    eng = Engine(threads=2)
    assert isinstance(eng, ShardedEngine) and eng.threads == 2 and Engine().threads == 1
    assert type(Engine(threads=1)) is Engine
    eng.add_symbol("X", session_close=5)
    cfg = eng.config()
    assert cfg == Engine.from_config(cfg).config()            # threads is not in it
    again = Engine.from_config(cfg, threads=3)
    assert again.threads == 3 and again.config() == cfg
    for bad in (0, -1, 65, 1.5, True, "2"):
        with pytest.raises(UsageError, match="threads"):
            Engine(threads=bad)
    with pytest.raises(UsageError, match="threads"):
        Engine.restore(Engine().checkpoint(), threads=0)
    with pytest.raises(UsageError, match="threads > 1"):
        eng.state
    with pytest.raises(UsageError, match="ORDER_DTYPE"):
        eng.process(np.zeros(3))
