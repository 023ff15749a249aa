"""The single-message path (issue 20, "one message cheap") gives the batch path's bytes.

``Engine.process`` on a small batch without ``out`` writes the engine's rolling output buffers
and calls the kernel's compiled entry point directly; ``submit``/``cancel``/``modify``/
``set_phase`` pack their row into a reused one-row array. These tests hold that path to the
batch path: random flows (every kind: NEW, CANCEL, MODIFY, PHASE; stops, icebergs, expiries,
auctions) fed one message per call, or in random small batches, to an engine that starts with
no room (every state array must grow, and outputs roll over to fresh buffers, some mid-batch)
give byte-identical fills, L2 updates and events and an identical checkpoint; every Result stays
as it was returned while later calls run (none is overwritten).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import (
    SYMBOLS, VENUE_SYMBOLS, assert_same_outputs, concat, flows, make_book, random_flow,
    venue_flows,
)
from exsim.exchange import Engine, OutputBuffers, Result, UsageError
from exsim.exchange import processing as engine_module
from exsim.exchange.schema import (
    EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE, Kind, Phase, Side, Tif,
)
from exsim.exchange.state import GROW_STATUSES, NEED_EXPIRY, NEED_INDEX, NEED_LADDER, NEED_LEVELS, \
    NEED_ORDERS
from phase_flows import PHASE_SYMBOLS, phase_flows


def tight(symbols, stp="none"):
    """An engine like ``make_book("engine")`` but with capacity 0: every array starts minimal."""
    eng = Engine(stp=stp, capacity=0)
    for name, lo, hi, *options in symbols:
        eng.add_symbol(name, tick_size=1, min_price=lo, max_price=hi,
                       **(options[0] if options else {}))
    return eng


def batch_reference(symbols, orders, stp="none"):
    """The flow through the batch path (one call, ``out=``): outputs and final checkpoint."""
    eng = make_book("engine", stp, symbols=symbols)
    res = eng.process(orders, out=OutputBuffers(len(orders)))
    return tuple(a.copy() for a in res), eng.checkpoint()


def snapshot(results):
    """The bytes of every table of every Result, to check later that none changed."""
    return [tuple(a.tobytes() for a in r) for r in results]


def assert_single_path_matches(symbols, orders, sizes, stp="none"):
    """Feed ``orders`` to a tight engine in batches of ``sizes`` (cycled; all small, so each
    call takes the rolling path) and compare with the batch path."""
    want, want_ck = batch_reference(symbols, orders, stp)
    eng = tight(symbols, stp)
    results, at, k = [], 0, 0
    while at < len(orders):
        n = sizes[k % len(sizes)]
        results.append(eng.process(orders[at: at + n]))
        at, k = at + n, k + 1
    before = snapshot(results)
    got = concat([tuple(r) for r in results]) if results else want
    assert_same_outputs(got, want)
    assert eng.checkpoint() == want_ck
    assert snapshot(results) == before


@settings(max_examples=30, deadline=None)
@given(orders=flows(), stp=st.sampled_from(["none", "cancel_resting", "cancel_both"]))
def test_one_message_per_call_matches_the_batch(orders, stp):
    assert_single_path_matches(SYMBOLS, orders, [1], stp)


@settings(max_examples=25, deadline=None)
@given(orders=venue_flows(), sizes=st.lists(st.integers(0, 7), min_size=1, max_size=5))
def test_venue_flows_in_small_batches_match_the_batch(orders, sizes):
    if not any(sizes):
        sizes = [1]
    assert_single_path_matches(VENUE_SYMBOLS, orders, sizes)


@settings(max_examples=25, deadline=None)
@given(orders=phase_flows(), sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_phase_flows_one_by_one_match_the_batch(orders, sizes):
    assert_single_path_matches(PHASE_SYMBOLS, orders, sizes)


def test_rolling_buffers_roll_over_without_touching_earlier_results():
    """Thousands of single calls and small batches: the rolling buffers fill and roll over
    (several times, also in the middle of a batch) and every Result keeps its bytes."""
    orders = random_flow(11, 12_000)
    sizes = [1, 1, 3, 1, 64, 1, 17, 2, 1, 40]
    assert_single_path_matches(SYMBOLS, orders, sizes)


def test_a_message_needing_more_rows_than_the_rolling_buffers_hold():
    """One buy sweeps 5,000 levels: its fills, L2 rows and events exceed the rolling buffers,
    which are replaced by larger ones holding the call's rows; the Result before it survives."""
    n = 5_000
    rest = np.zeros(n, ORDER_DTYPE)
    rest["kind"], rest["side"], rest["qty"] = Kind.NEW, Side.SELL, 1
    rest["order_id"] = np.arange(1, n + 1)
    rest["price"] = np.arange(100, 100 + n)
    sweep = np.zeros(2, ORDER_DTYPE)
    sweep["kind"], sweep["side"], sweep["qty"], sweep["price"] = Kind.NEW, Side.BUY, n, 10**6
    sweep["order_id"] = [n + 1, n + 2]
    orders = np.concatenate([rest, sweep])
    want, want_ck = batch_reference([("X", 1, 10**7)], orders)
    eng = tight([("X", 1, 10**7)])
    first = eng.process(rest[:1])
    keep = snapshot([first])
    results = [first, eng.process(rest[1:]), eng.process(sweep[:1]), eng.process(sweep[1:])]
    assert len(results[2].fills) == n
    assert_same_outputs(concat([tuple(r) for r in results]), want)
    assert eng.checkpoint() == want_ck
    assert snapshot([first]) == keep


def test_expiries_grow_the_heap_and_roll_the_outputs_before_a_message():
    """3,000 GTD orders one per call (the expiry heap grows from 16), then one message whose ts
    expires them all: their rows come before its own and need more room than the rolling
    buffers have left."""
    n = 3_000
    gtd = np.zeros(n, ORDER_DTYPE)
    gtd["kind"], gtd["qty"], gtd["tif"] = Kind.NEW, 1, Tif.GTD
    gtd["side"] = np.arange(n) % 2
    gtd["price"] = np.where(gtd["side"] == Side.BUY, 1000 - np.arange(n) % 500,
                            2000 + np.arange(n) % 500)
    gtd["order_id"] = np.arange(1, n + 1)
    gtd["ts"] = np.arange(n)
    gtd["expire_ts"] = 10**6 + np.arange(n)
    late = np.zeros(1, ORDER_DTYPE)
    late["kind"], late["side"], late["qty"], late["price"] = Kind.NEW, Side.BUY, 1, 1500
    late["order_id"], late["ts"] = n + 1, 10**7
    orders = np.concatenate([gtd, late])
    symbols = [("X", 1, 10**4)]
    want, want_ck = batch_reference(symbols, orders)
    eng = tight(symbols)
    results = [eng.process(orders[k: k + 1]) for k in range(len(orders))]
    assert len(results[-1].events) > n
    assert_same_outputs(concat([tuple(r) for r in results]), want)
    assert eng.checkpoint() == want_ck


def test_every_grow_status_on_the_single_path():
    """A tight engine grows its arena, levels, index, ladders and expiry heap while fed one
    message at a time (the random flows above check the bytes); replacing any state array drops
    the cached argument tuples, so the next call passes the kernel the current arrays."""
    orders = random_flow(5, 3_000)
    eng = tight(SYMBOLS)
    sizes = {f: len(a) for f, a in zip(eng.state._fields, eng.state)}
    for k in range(len(orders)):
        eng.process(orders[k: k + 1])
    grown = {f for f, a in zip(eng.state._fields, eng.state) if len(a) > sizes[f]}
    assert {"arena", "levels", "index"} <= grown
    assert int(eng.state.books["cap"].max()) > 8      # a ladder region moved (NEED_LADDER)
    for status in sorted(GROW_STATUSES - {NEED_LADDER}):    # NEED_LADDER needs M_NEED_BOOK
        eng.grow(status)
        assert eng._state_args is None and eng._tail is None
        eng.process(orders[:1])
        assert all(a is b for a, b in zip(eng._tail, eng.state))
        assert all(a is b for a, b in zip(eng._state_args, eng.state))
    eng.prefetch_distance = 3
    assert eng._tail is None
    eng.process(orders[:1])
    assert eng._tail[-1] == 3
    assert {NEED_ORDERS, NEED_LEVELS, NEED_INDEX, NEED_EXPIRY} <= set(GROW_STATUSES)


def test_per_order_calls_equal_process_of_their_rows():
    """submit/cancel/modify/set_phase (the reused packed row) give process()'s bytes for the
    same message, with odd but valid argument forms (names in any case, numpy ints, codes)."""
    a, b = tight([("X", 1, 1000)]), tight([("X", 1, 1000)])

    def row(**f):
        m = np.zeros(1, ORDER_DTYPE)
        for k, v in f.items():
            m[k] = v
        return m

    pairs = [
        (lambda: a.submit("X", "sell", qty=5, price=101, trader=7, ts=3, order_id=9),
         row(kind=Kind.NEW, side=Side.SELL, qty=5, price=101, trader=7, ts=3, order_id=9)),
        (lambda: a.submit(0, "BUY", qty=np.int64(2), price=101.0, tif="ioc", order_id=10,
                          ts=np.int32(4)),
         row(kind=Kind.NEW, side=Side.BUY, qty=2, price=101, tif=1, order_id=10, ts=4)),
        (lambda: a.submit("X", Side.SELL, qty=3, price=105, post_only=True, display_qty=1,
                          order_id=11, stop_price=0, min_qty=0, expire_ts=0),
         row(kind=Kind.NEW, side=Side.SELL, qty=3, price=105, flags=1, display_qty=1,
             order_id=11)),
        (lambda: a.modify("X", 11, price=104, qty=2, ts=5),
         row(kind=Kind.MODIFY, order_id=11, price=104, qty=2, ts=5)),
        (lambda: a.cancel("X", np.uint64(9), ts=6), row(kind=Kind.CANCEL, order_id=9, ts=6)),
        (lambda: a.cancel("X", 2**64 - 1), row(kind=Kind.CANCEL, order_id=2**64 - 1)),
        (lambda: a.set_phase("X", "halted", ts=7), row(kind=Kind.PHASE, phase=Phase.HALTED,
                                                      ts=7)),
        (lambda: a.set_phase("X", int(Phase.CONTINUOUS), ts=8, reference_price=100),
         row(kind=Kind.PHASE, phase=Phase.CONTINUOUS, ts=8, price=100)),
        (lambda: a.submit("X", 1, qty=1, price=104, order_id=12, ts=9),
         row(kind=Kind.NEW, side=Side.SELL, qty=1, price=104, order_id=12, ts=9)),
    ]
    for call, message in pairs:
        assert_same_outputs(tuple(call()), tuple(b.process(message)))
    assert a.checkpoint() == b.checkpoint()


def test_automatic_order_ids_skip_live_ones():
    eng = tight([("X", 1, 1000)])
    eng.submit("X", "sell", qty=1, price=500, order_id=1)
    eng.submit("X", "sell", qty=1, price=501, order_id=2)
    res = eng.submit("X", "sell", qty=1, price=502)
    assert int(res.events["order_id"][0]) == 3
    eng.cancel("X", 1)
    assert int(eng.submit("X", "sell", qty=1, price=503).events["order_id"][0]) == 4


@pytest.mark.parametrize("kwargs, what", [
    (dict(side=True), "side"), (dict(side=1.0), "side"), (dict(side="up"), "side"),
    (dict(side=5), "side"), (dict(order_type=True), "order_type"), (dict(tif="gtx"), "tif"),
    (dict(qty=True), "qty"), (dict(qty=1.5), "qty"), (dict(qty=2**63), "qty"),
    (dict(price=-(2**63) - 1), "price"), (dict(trader=-1), "trader"),
    (dict(trader=2**32), "trader"), (dict(order_id=-1), "order_id"),
    (dict(order_id=2**64), "order_id"), (dict(ts=2**63), "ts"), (dict(ts="0"), "ts"),
    (dict(stop_price=1.5), "stop_price"), (dict(display_qty=None), "display_qty"),
    (dict(min_qty=2**70), "min_qty"), (dict(expire_ts=True), "expire_ts"),
    (dict(post_only=2), "post_only"), (dict(post_only=None), "post_only"),
])
def test_submit_still_refuses_what_its_fields_cannot_hold(kwargs, what):
    eng = tight([("X", 1, 1000)])
    args = {"qty": 1, "price": 100, **kwargs}
    side = args.pop("side", "buy")
    with pytest.raises(UsageError, match=what):
        eng.submit("X", side, **args)
    assert eng.seq == 0


def test_arguments_of_other_types_go_through_numbas_dispatcher():
    """The compiled entry point takes only the types it was compiled for (a read-only batch
    too: the kernel never writes it): a float prefetch distance or an output array of another
    layout or byte order go through the dispatcher (which types them itself, compiling a
    specialisation if need be; not run here, compiling process_batch takes minutes). So do
    both kernels' entry points: the plain one (``exchange.plain``) and the full one."""
    eng = tight(SYMBOLS)
    orders = random_flow(3, 4)
    eng.process(orders)
    out = OutputBuffers(4)
    ahead = eng.prefetch_distance
    for full, kernel in ((False, engine_module.plain.process_plain),
                         (True, engine_module.kernels.process_batch)):
        eng.prefetch_distance = ahead
        fast = eng._caller(orders, out.fills, out.l2, out.events, full)
        assert fast is (engine_module._PROCESS if full else engine_module._PLAIN)
        assert fast is not None and fast is not eng.process and fast is not kernel
        ro = orders.copy()
        ro.flags.writeable = False
        assert eng._caller(ro, out.fills, out.l2, out.events, full) is fast
        assert eng._caller(orders, out.fills[::2], out.l2, out.events, full) is kernel
        assert eng._caller(orders, out.fills, out.l2.astype(out.l2.dtype.newbyteorder()),
                           out.events, full) is not fast
        eng.prefetch_distance = 2.0
        assert eng._caller(orders, out.fills, out.l2, out.events, full) is not fast
        eng.prefetch_distance = 2**64
        assert eng._caller(orders, out.fills, out.l2, out.events, full) is not fast


def test_odd_order_arrays_give_the_same_bytes():
    """Read-only, strided and recarray inputs, a changed prefetch distance and ``out=``: the
    same bytes as the batch path."""
    orders = random_flow(3, 200)
    want, want_ck = batch_reference(SYMBOLS, orders)
    eng = tight(SYMBOLS)
    results = []
    wide = np.zeros(2 * len(orders), ORDER_DTYPE)
    wide[::2] = orders
    ro = orders.copy()
    ro.flags.writeable = False
    out = OutputBuffers(0)
    for k in range(len(orders)):
        if k % 5 == 0:
            results.append(eng.process(ro[k: k + 1]))
        elif k % 5 == 1:
            results.append(eng.process(wide[2 * k: 2 * k + 1:2]))
        elif k % 5 == 2:
            results.append(eng.process(orders[k: k + 1].view(np.recarray)))
        elif k % 5 == 3:
            r = eng.process(orders[k: k + 1], out=out)
            results.append(Result(*(a.copy() for a in r)))
        else:
            eng.prefetch_distance = k % 3
            results.append(eng.process(orders[k: k + 1]))
    assert_same_outputs(concat([tuple(r) for r in results]), want)
    assert eng.checkpoint() == want_ck
    whole = tight(SYMBOLS)
    assert_same_outputs(tuple(whole.process(ro)), want)     # a read-only batch, 200 rows
    assert whole.checkpoint() == want_ck


def test_result_tables_are_fresh_writeable_arrays_of_the_output_dtypes():
    eng = tight([("X", 1, 1000)])
    r1 = eng.submit("X", "sell", qty=5, price=101)
    r2 = eng.submit("X", "buy", qty=5, price=101)
    for r in (r1, r2):
        assert type(r) is Result
        for a, dt in zip(r, (FILL_DTYPE, L2_DTYPE, EVENT_DTYPE)):
            assert a.dtype == dt and a.flags.writeable and a.ndim == 1
    assert not any(a is b for a, b in zip(r1, r2))
    kept = snapshot([r1])
    r2.events["qty" if "qty" in EVENT_DTYPE.names else "leaves_qty"] = 0   # writing one Result
    assert snapshot([r1]) == kept                                           # leaves the other


def test_copies_of_an_engine_have_their_own_rolling_buffers():
    eng = tight([("X", 1, 1000)])
    r = eng.submit("X", "sell", qty=5, price=101)
    twin = copy.deepcopy(eng)
    kept = snapshot([r])
    a = eng.submit("X", "buy", qty=1, price=101)
    b = twin.submit("X", "buy", qty=2, price=101)
    assert snapshot([r]) == kept
    assert int(a.fills["qty"][0]) == 1 and int(b.fills["qty"][0]) == 2
    assert eng.checkpoint() != twin.checkpoint()


def test_a_pickled_engine_goes_on_alike():
    eng = tight([("X", 1, 1000)])
    r = eng.submit("X", "sell", qty=5, price=101)
    twin = pickle.loads(pickle.dumps(eng))
    assert twin._roll is None and twin._tail is None
    kept = snapshot([r])
    assert_same_outputs(tuple(twin.submit("X", "buy", qty=2, price=101)),
                        tuple(eng.submit("X", "buy", qty=2, price=101)))
    assert snapshot([r]) == kept and twin.checkpoint() == eng.checkpoint()


def test_the_struct_row_matches_order_dtype():
    assert engine_module._ROW is not None, "ORDER_DTYPE changed: update _ROW_LAYOUT"
    assert engine_module._ROW.size == ORDER_DTYPE.itemsize
