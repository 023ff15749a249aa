"""verify's phase checker on stops released after an uncross (needs the issue-16 engine).

docs/semantics.md "Stops": every released order is matched in full, and rests, before the next
one starts. After an uncross (a PHASE message's, or a re-opening auction's end at a NEW) the
stops it releases, and then the message's own order, match one after another within the message;
a stop that rests without trading must stay in verify's book when the next one starts. Verify
lost it, then reported false band, indicative, auction_price, auction_allocation and phase
violations on correct engine output. These flows verify clean.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Event, Kind, OrderType, Phase, Reason
from exsim.replay import verify_arrays


def _rows(rows):
    out = np.zeros(len(rows), ORDER_DTYPE)
    for row, fields in zip(out, rows):
        for k, v in fields.items():
            row[k] = v
    return out


def _verify(engine, orders):
    res = engine.process(orders)
    config = engine.config()
    report = verify_arrays(orders, res.fills, res.l2, res.events, config=config,
                           stp=config["stp"])
    return res, report


def _events(res, seq):
    ev = res.events[res.events["seq"] == seq]
    return [(int(e["event"]), int(e["order_id"])) for e in ev]


def test_stop_resting_after_a_reopening_end_then_the_message_order_verifies_clean():
    """A re-opening auction ends at a NEW: the uncross releases STOP_LIMIT 3, which rests at 100;
    the NEW then rests too; the next sell at 100 trades with the stop and breaches the band."""
    new, stop_limit = int(Kind.NEW), int(OrderType.STOP_LIMIT)
    orders = _rows([
        dict(kind=new, order_id=1, side=1, price=100, qty=1, ts=1),
        dict(kind=new, order_id=2, side=0, price=100, qty=1, ts=2),      # last price 100
        dict(kind=new, order_id=3, side=0, order_type=stop_limit, stop_price=101, price=100,
             qty=5, ts=3),
        dict(kind=new, order_id=4, side=1, price=105, qty=1, ts=4),
        dict(kind=new, order_id=5, side=0, price=105, qty=1, ts=5),      # breach: call to 15
        dict(kind=new, order_id=6, side=1, price=102, qty=1, ts=6),
        dict(kind=new, order_id=7, side=0, price=90, qty=1, ts=20),      # the end: uncross
        dict(kind=new, order_id=8, side=1, price=100, qty=2, ts=21),
    ])
    eng = Engine()
    eng.add_symbol("X", dynamic_band_bps=100, interruption_ns=10)
    res, report = _verify(eng, orders)
    assert report.ok, report.violations[:5]
    # the flow is the case: at seq 7 stop 3 is released after the AUCTION_END, then order 7
    seven = _events(res, 7)
    assert (int(Event.TRIGGERED), 3) in seven and (int(Event.ACCEPTED), 7) in seven
    assert seven.index((int(Event.TRIGGERED), 3)) < seven.index((int(Event.ACCEPTED), 7))
    ev = res.events
    assert ((ev["seq"] == 7) & (ev["reason"] == int(Reason.AUCTION_END))).any()
    assert ((ev["seq"] == 8) & (ev["reason"] == int(Reason.PRICE_BAND))).any()


def test_two_stops_released_by_a_phase_uncross_the_first_resting_verify_clean():
    """The opening uncross at 100 releases two buy stops: STOP_LIMIT 5 (limit 99) rests without
    trading, STOP 6 trades. The pre-close call after it must count stop 5 in its indicative and
    the closing uncross must allocate to it."""
    new, ph = int(Kind.NEW), int(Kind.PHASE)
    orders = _rows([
        dict(kind=new, order_id=1, side=0, price=100, qty=2, ts=1),
        dict(kind=new, order_id=2, side=1, price=100, qty=2, ts=2),
        dict(kind=new, order_id=3, side=1, price=103, qty=4, ts=3),
        dict(kind=new, order_id=5, side=0, order_type=int(OrderType.STOP_LIMIT), stop_price=100,
             price=99, qty=3, ts=4),
        dict(kind=new, order_id=6, side=0, order_type=int(OrderType.STOP), stop_price=100,
             qty=1, ts=5),
        dict(kind=ph, phase=int(Phase.OPENING_AUCTION), ts=6),
        dict(kind=ph, phase=int(Phase.PRE_CLOSE), ts=7),
        dict(kind=new, order_id=7, side=1, price=98, qty=2, ts=8),
        dict(kind=ph, phase=int(Phase.CLOSING_AUCTION), ts=9),
    ])
    eng = Engine()
    eng.add_symbol("X", reference_price=100, phase="pre_open")
    res, report = _verify(eng, orders)
    assert report.ok, report.violations[:5]
    six = _events(res, 6)
    assert (int(Event.TRIGGERED), 5) in six and (int(Event.TRIGGERED), 6) in six
    f = res.fills
    assert ((f["seq"] == 9) & (f["buy_order_id"] == 5)).any()   # the rested stop is in the close


def _random_flow(seed: int, n: int):
    """A seeded flow over two symbols (A with a static band): random PHASE messages (re-opening ends included), limits, market orders,
    stops and stop limits around 100, icebergs, DAY/GTD, cancels and modifies."""
    rng = random.Random(seed)
    # no dynamic band: a PRICE_BAND interruption during the stops an auction end releases
    # misses its INDICATIVE in today's engine (a known engine defect, not verify's)
    eng = Engine(stp=rng.choice(["none", "cancel_resting", "cancel_incoming", "cancel_both"]))
    eng.add_symbol("A", static_band_bps=2000, reference_price=100,
                   phase=rng.choice(["pre_open", "continuous"]))
    eng.add_symbol("B", phase="pre_open", reference_price=100)
    rows, ts, live, oid, owner = [], 0, {0: [], 1: []}, 1, {}
    for _ in range(n):
        ts += rng.randint(0, 3)
        s = rng.randint(0, 1)
        r = rng.random()
        if r < 0.06:
            ph = rng.choice(list(Phase))
            end = ts + rng.randint(1, 30) if ph == Phase.REOPENING_AUCTION and rng.random() < 0.6 \
                else 0
            rows.append(dict(kind=int(Kind.PHASE), symbol=s, phase=int(ph), ts=ts, expire_ts=end,
                             price=rng.choice([0, 0, 0, 95, 100, 105])))
        elif r < 0.15 and live[s]:
            o = rng.choice(live[s])
            rows.append(dict(kind=int(Kind.CANCEL), symbol=s, order_id=o, trader=owner[o], ts=ts))
        elif r < 0.22 and live[s]:
            o = rng.choice(live[s])
            rows.append(dict(kind=int(Kind.MODIFY), symbol=s, order_id=o, trader=owner[o], ts=ts,
                             price=rng.randint(90, 110), qty=rng.randint(1, 20)))
        else:
            ot = rng.choices([0, 1, 2, 3], [70, 10, 10, 10])[0]
            tif = rng.choices([0, 3, 4], [70, 15, 15])[0] if ot != 1 else 0
            q = rng.randint(1, 20)
            d = dict(kind=int(Kind.NEW), symbol=s, order_id=oid, side=rng.randint(0, 1),
                     order_type=ot, tif=tif, ts=ts, qty=q,
                     price=rng.randint(90, 110) if ot in (0, 3) else 0,
                     trader=rng.randint(1, 3))
            owner[oid] = d["trader"]
            if ot >= 2:
                d["stop_price"] = rng.randint(92, 108)
            if ot == 0 and rng.random() < 0.2:
                d["display_qty"] = rng.randint(1, q)
            if tif == 4:
                d["expire_ts"] = ts + rng.randint(1, 40)
            rows.append(d)
            live[s].append(oid)
            oid += 1
    return eng, _rows(rows)


# seeds 0, 5, 8 and 10 release a stop after an uncross that rests while another matcher follows
# (verify lost it); 12 flows of 250 messages verify in about 0.3 s
@pytest.mark.parametrize("seed", range(12))
def test_random_phase_flows_with_stops_verify_clean(seed):
    eng, orders = _random_flow(seed, 250)
    res, report = _verify(eng, orders)
    assert report.ok, report.violations[:5]
