"""The plain kernel (``exchange.plain``) and its dispatch write exactly what the full kernel
writes alone.

Each flow runs twice: on an engine as it is (the plain kernel first, ``kernels.process_batch``
from the first message it does not take to the end of the batch) and on one whose processing
only ever calls ``process_batch`` (the kernel before the split). Every batch's rows and the final
checkpoint must be the same bytes: batches that mix plain and venue messages, venue state left
resting under plain batches (icebergs matched into, GTD orders expiring in the middle of one,
pending stops), symbols leaving and re-entering CONTINUOUS in the middle of a batch, lot sizes,
minimum quantities, tick tables and static bands without any venue field, rejections of every
kind the plain kernel writes itself, and one message per call.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from exsim.exchange import ORDER_DTYPE, Engine, Kind, OutputBuffers, Phase
from exsim.exchange import kernels, plain, processing
from exsim.exchange.schema import Event, Reason
from exsim.scenarios.generators.uniform import uniform_flow
from exsim.scenarios.generators.venue_mix import venue_mix


def _with_modifies(flow, seed, share=0.5):
    """``flow`` with ``share`` of its cancels turned into modifies of the same order: a new price
    a few ticks from the order's own, or a new size at its price."""
    rng = np.random.default_rng(seed)
    f = flow.copy()
    price_of = {}
    for i in np.flatnonzero(f["kind"] == Kind.NEW):
        price_of[(int(f["symbol"][i]), int(f["order_id"][i]))] = int(f["price"][i])
    for i in np.flatnonzero(f["kind"] == Kind.CANCEL):
        if rng.random() >= share:
            continue
        p = price_of.get((int(f["symbol"][i]), int(f["order_id"][i])), 100_000)
        f["kind"][i] = Kind.MODIFY
        f["qty"][i] = rng.integers(1, 150)
        f["price"][i] = p + int(rng.integers(-30, 31)) if rng.random() < 0.6 else p
    return f


def _hostile(flow, seed):
    """Some duplicate ids, unknown ids, other traders' cancels and modifies, zero and negative
    quantities and prices: rejections the plain kernel writes itself."""
    rng = np.random.default_rng(seed)
    f = flow.copy()
    new = np.flatnonzero(f["kind"] == Kind.NEW)
    other = np.flatnonzero(f["kind"] != Kind.NEW)
    # the id of the NEW just before (likely still live, on the same symbol or not)
    pos = rng.choice(np.arange(1, len(new)), 40, replace=False)
    f["order_id"][new[pos]] = f["order_id"][new[pos - 1]]
    f["symbol"][new[pos]] = f["symbol"][new[pos - 1]]
    f["order_id"][rng.choice(other, 20, replace=False)] = 1 << 60
    f["trader"][rng.choice(other, 20, replace=False)] += 7
    f["qty"][rng.choice(len(f), 15, replace=False)] = 0
    f["price"][rng.choice(new, 15, replace=False)] = -5
    return f


def _joined(*parts):
    """The flows one after another, ts increasing, each part's order ids apart."""
    out = []
    ts = 0
    for k, p in enumerate(parts):
        p = p.copy()
        shift = ts - p["ts"][0] + 1
        p["ts"] += shift
        p["expire_ts"][p["expire_ts"] != 0] += shift
        p["order_id"] += np.uint64(k * 10_000_000)
        ts = int(p["ts"][-1])
        out.append(p)
    return np.concatenate(out)


def _phase(at, symbol, phase, flow):
    """``flow`` with a PHASE message for ``symbol`` inserted before message ``at``."""
    m = np.zeros(1, ORDER_DTYPE)
    m["kind"] = Kind.PHASE
    m["symbol"] = symbol
    m["phase"] = phase
    m["ts"] = flow["ts"][at]
    return np.concatenate([flow[:at], m, flow[at:]])


def _run(flow, symbols, cut, monkeypatch, *, full_only, stp="none", ownership=True,
         taken=None):
    """Feed ``flow`` in batches of ``cut`` (0: one message per call, through the single-message
    path) to a fresh engine; return every batch's rows (bytes) and the final checkpoint.
    ``taken`` (a dict): counts the messages each kernel took, under "plain" and "full"."""
    with monkeypatch.context() as mp:
        if full_only:
            mp.setattr(processing, "plain", SimpleNamespace(process_plain=kernels.process_batch))
            mp.setattr(processing, "_PLAIN", None)
        if taken is not None:
            # both kernels' entry points, wrapped: every call (batch, rolling or fast
            # single-message path) goes through them
            probe = Engine()
            probe.add_symbol("P")
            out = OutputBuffers(1)
            for full in (False, True):
                real = probe._caller(flow[:1].copy(), out.fills, out.l2, out.events, full)

                def call(msgs, start, *args, _real=real, _key="full" if full else "plain"):
                    status, nxt = _real(msgs, start, *args)
                    taken[_key] += nxt - start
                    return status, nxt
                mp.setattr(processing, "_PROCESS" if full else "_PLAIN", call)
        eng = Engine(stp, ownership=ownership)
        for name, kw in symbols:
            eng.add_symbol(name, **kw)
        rows = []
        step = cut or 1
        for lo in range(0, len(flow), step):
            rows.append([a.tobytes() for a in eng.process(flow[lo: lo + step])])
        return rows, eng.checkpoint()


def _assert_same_as_full_kernel(flow, symbols, cut, monkeypatch, plain_share, **kw):
    """Assert both engines write the same bytes and the plain kernel took at least
    ``plain_share`` of the messages (so the comparison covers it); return the rows."""
    taken = {"plain": 0, "full": 0}
    got = _run(flow, symbols, cut, monkeypatch, full_only=False, taken=taken, **kw)
    want = _run(flow, symbols, cut, monkeypatch, full_only=True, **kw)
    assert got[0] == want[0]
    assert got[1] == want[1]
    assert taken["plain"] + taken["full"] == len(flow)
    assert taken["plain"] >= plain_share * len(flow)
    return got[0]


PLAIN3 = [(f"S{s}", {}) for s in range(3)]


@pytest.mark.parametrize("stp", ["none", "cancel_resting"])
def test_venue_state_under_plain_batches(monkeypatch, stp):
    """Plain flow, then a venue stretch (stops, icebergs, GTD orders that expire later), then
    plain flow again: the later batches start plain with icebergs and expiring orders resting
    (matched into, expiring in the middle of a batch) and stops pending."""
    plain_a = _with_modifies(uniform_flow(n=1_500, seed=1, n_symbols=3), seed=1)
    venue = venue_mix(uniform_flow(n=1_500, seed=2, n_symbols=3), seed=2,
                      expire_max_ns=2_000_000)
    # a few GTD orders, so most plain batches after it start with the heap not yet due
    no_stops = venue_mix(uniform_flow(n=1_500, seed=3, n_symbols=3), seed=3, stop_share=0.0,
                         iceberg_share=0.2, gtd_share=0.02, expire_max_ns=3_000_000)
    plain_b = _with_modifies(uniform_flow(n=2_000, seed=4, n_symbols=3), seed=4)
    flow = _joined(plain_a, no_stops, plain_b, venue, plain_b)
    # with self-trade prevention on, every message goes to the full kernel
    _assert_same_as_full_kernel(flow, PLAIN3, 250, monkeypatch, 0.25 if stp == "none" else 0.0,
                                stp=stp)


def test_symbols_leaving_continuous_in_the_middle_of_a_batch(monkeypatch):
    """A halt, a pre-open call with its opening uncross and a close, each in the middle of a
    batch, on some symbols while the others trade on."""
    flow = _with_modifies(uniform_flow(n=3_000, seed=6, n_symbols=3), seed=6)
    for at, sym, ph in [(2_600, 0, Phase.CONTINUOUS), (2_300, 2, Phase.CLOSED),
                        (1_900, 1, Phase.OPENING_AUCTION), (1_400, 1, Phase.PRE_OPEN),
                        (900, 0, Phase.CONTINUOUS), (450, 0, Phase.HALTED)]:
        flow = _phase(at, sym, ph, flow)
    _assert_same_as_full_kernel(flow, PLAIN3, 400, monkeypatch, 0.2)


def test_symbol_rules_without_venue_fields(monkeypatch):
    """Lot sizes, minimum quantities, a two-row tick table and a static band take the plain
    kernel's general path (every validation step)."""
    symbols = [("LOT", {"lot_size": 5, "min_order_qty": 10}),
               ("TICKS", {"tick_table": [(1, 1), (100_010, 5)]}),
               ("BAND", {"reference_price": 100_000, "static_band_bps": 3})]
    flow = _hostile(_with_modifies(uniform_flow(n=5_000, seed=8, n_symbols=3), seed=8), seed=8)
    rows = _assert_same_as_full_kernel(flow, symbols, 600, monkeypatch, 1.0, ownership=True)
    events = np.concatenate([np.frombuffer(r[2], processing.EVENT_DTYPE) for r in rows])
    reasons = {int(x) for x in events["reason"][events["event"] == Event.REJECTED]}
    assert {int(Reason.OFF_LOT), int(Reason.BELOW_MIN_QTY), int(Reason.OFF_TICK),
            int(Reason.OUTSIDE_STATIC_BAND), int(Reason.DUPLICATE_ID), int(Reason.UNKNOWN_ID),
            int(Reason.NOT_OWNER), int(Reason.BAD_QTY), int(Reason.BAD_PRICE)} <= reasons
    assert (events["event"] == Event.MODIFIED).sum() > 100


def test_one_message_per_call(monkeypatch):
    """The single-message path (rolling buffers, the cached entry points) over a mixed flow."""
    flow = _joined(_with_modifies(uniform_flow(n=300, seed=9, n_symbols=2), seed=9),
                   venue_mix(uniform_flow(n=200, seed=10, n_symbols=2), seed=10),
                   _with_modifies(uniform_flow(n=300, seed=11, n_symbols=2), seed=11))
    _assert_same_as_full_kernel(flow, PLAIN3[:2], 0, monkeypatch, 0.4)


def test_a_plain_flow_never_calls_the_full_kernel(monkeypatch):
    """Limit, cancel and modify flow with rejections on plain symbols: the full kernel is never
    called, so never compiled (its entry point replaced by one that fails the test)."""
    def refuse(*args):
        raise AssertionError("the full kernel was called")

    flow = _hostile(_with_modifies(uniform_flow(n=4_000, seed=12, n_symbols=3), seed=12), 12)
    eng = Engine()
    for name, _ in PLAIN3:
        eng.add_symbol(name)
    monkeypatch.setattr(processing, "_PROCESS", refuse)
    for lo in range(0, len(flow), 512):
        eng.process(flow[lo: lo + 512])
    for k in range(20):
        eng.process(flow[k: k + 1])
    assert eng.seq == len(flow) + 20
    # a venue message does reach it
    v = venue_mix(flow[:200], seed=1, stop_share=0.0, iceberg_share=1.0, gtd_share=0.0)
    with pytest.raises(AssertionError, match="full kernel"):
        eng.process(v[v["display_qty"] > 0][:1])
