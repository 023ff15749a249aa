"""verify's ``min_qty`` rule and the text of an out-of-order expiry (issue 15 review, 4 and 10).

Runs on the issue-15 engine (min_qty and GTD orders): planted defects over engine outputs.
"""

from __future__ import annotations

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.schema import ORDER_DTYPE, Reason, Tif
from exsim.replay import verify_arrays


def _msgs(rows):
    o = np.zeros(len(rows), ORDER_DTYPE)
    for i, r in enumerate(rows):
        for k, v in r.items():
            o[i][k] = v
    return o


def test_an_accepted_order_filling_less_than_its_min_qty_is_a_min_qty_violation():
    m = _msgs([dict(ts=1, order_id=1, side=1, price=10, qty=3, trader=1),
               dict(ts=2, order_id=2, side=0, price=10, qty=5, trader=2)])
    eng = Engine()
    eng.add_symbol("M")
    r = eng.process(m)                       # order 2 fills 3 and rests 2
    assert verify_arrays(m, r.fills, r.l2, r.events, config=eng.config()).ok
    planted = m.copy()
    planted["min_qty"][1] = 5                # the journal says it needed 5 on entry
    rep = verify_arrays(planted, r.fills, r.l2, r.events, config=eng.config())
    assert not rep.ok
    assert {k: v for k, v in rep.summary["violations"].items() if v} == {"min_qty": 1}
    assert rep.violations[0].seq == 2
    assert "minimum quantity 5 filled only 3" in rep.violations[0].detail
    ok = m.copy()
    ok["min_qty"][1] = 3                     # exactly the minimum: fine
    assert verify_arrays(ok, r.fills, r.l2, r.events, config=eng.config()).ok


def test_an_out_of_order_expiry_names_the_order_expired_before_it():
    m = _msgs([dict(ts=1, order_id=1, side=0, price=50, qty=5, tif=int(Tif.GTD),
                    expire_ts=100, trader=1),
               dict(ts=2, order_id=2, side=0, price=49, qty=5, tif=int(Tif.GTD),
                    expire_ts=90, trader=1),
               dict(ts=100, order_id=3, side=1, price=60, qty=1, trader=2)])
    eng = Engine()
    eng.add_symbol("Y")
    r = eng.process(m)
    ev, l2 = r.events.copy(), r.l2.copy()
    ix = np.flatnonzero(ev["reason"] == Reason.EXPIRED)
    assert len(ix) == 2
    ev[ix] = r.events[ix[::-1]]              # report 1 before 2 (2 expires first)
    lx = np.flatnonzero((l2["seq"] == 3) & (l2["price"] <= 50))
    l2[lx] = r.l2[lx[::-1]]
    rep = verify_arrays(m, r.fills, l2, ev, config=eng.config())
    details = [v.detail for v in rep.violations if v.rule == "expiry"]
    assert details == ["expiry of order 2 (expiry 90) out of order after order 1 (expiry 100)"]


def test_a_day_order_entered_within_a_day_of_the_int64_clock_end_verifies_clean():
    """verify's DAY expiry clamps at the int64 clock end as the engine does (semantics.md,
    Symbols), instead of wrapping to a past time and calling the live order overdue."""
    import numpy as np

    from exsim.exchange import Engine
    from exsim.exchange.schema import ORDER_DTYPE, Side, Tif
    from exsim.replay import verify_arrays

    eng = Engine()
    eng.add_symbol("X")
    ts = (1 << 63) - 11
    o = np.zeros(2, ORDER_DTYPE)
    o["ts"] = [ts, ts + 5]
    o["qty"], o["price"] = [5, 1], [100, 200]
    o["side"], o["order_id"], o["trader"] = [Side.BUY, Side.SELL], [1, 2], [1, 2]
    o["tif"] = [Tif.DAY, Tif.GTC]
    r = eng.process(o)
    report = verify_arrays(o, r.fills, r.l2, r.events, config=eng.config())
    assert report.ok, report.violations[:3]
