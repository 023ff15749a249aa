"""The gateway core against its journal: random flows of requests from several accounts, the
replace semantics (a new TOTAL quantity) across batch boundaries, and the core-level rejects.

Every flow ends with ``core_child.check_journal``: the stored streams are what ``derive`` makes
of the rows read back from the store, numbered 1..N, routed to the asking stream and the firm's
drop copy, and they agree with the fills and with the engine's live orders.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import defaultdict

from hypothesis import HealthCheck, given, settings, strategies as st

from core_child import check_journal, in_core
from exsim.exchange.gateway.core import MAX_CLIENT_ID, Request
from exsim.exchange.schema import Event, OrderType, Reason, Side, Tif
from gw_fixtures import make_accounts, running_gateway

ACCOUNTS = make_accounts(4)
STREAMS = [f"{p}:acct{i}" for p in ("fix", "ouch") for i in range(4)] + ["dropcopy:F0",
                                                                         "dropcopy:F1"]


def _subscribe_all(gw) -> dict:
    got = defaultdict(list)
    for s in STREAMS:
        gw.subscribe(s, got[s].extend)
    return got


async def _settle(gw, account: str = "acct0") -> None:
    """Wait until every request submitted so far is processed: submit a cancel of an unknown
    id (processed in order, after everything before it) and wait for its reject."""
    stream = f"fix:{account}"
    done = asyncio.get_running_loop().create_future()
    cid = f"settle-{gw.now_ns() % 10**9}"

    def seen(reports):
        if any(r.client_order_id == cid for r in reports) and not done.done():
            done.set_result(None)

    gw.subscribe(stream, seen)
    gw.submit(Request("cancel", ACCOUNTS.get(account), stream, cid, "JPM", "no-such-order"))
    try:
        await asyncio.wait_for(done, 10)
    finally:
        gw.unsubscribe(stream, seen)


# -- random flows -------------------------------------------------------------------------------

action = st.one_of(
    st.tuples(st.just("new"), st.integers(0, 3), st.booleans(),            # account, 2nd stream
              st.sampled_from(["JPM", "JPM", "BTCUSD", "NOPE"]),
              st.sampled_from([Side.BUY, Side.SELL]),
              st.sampled_from(["limit", "limit", "limit", "market", "stop", "stop_limit",
                               "iceberg", "post_only", "ioc", "fok", "gtd", "day"]),
              st.integers(-4, 4), st.integers(1, 12), st.integers(0, 4)),
    st.tuples(st.just("cancel"), st.integers(0, 3), st.booleans(), st.integers(0, 200),
              st.booleans()),                                               # target, other acct
    st.tuples(st.just("replace"), st.integers(0, 3), st.booleans(), st.integers(0, 200),
              st.booleans(), st.integers(-3, 3), st.integers(1, 15)),
    st.tuples(st.just("pause"), st.sampled_from([0, 0.0003, 0.001])),
)

MID = {"JPM": 15000, "BTCUSD": 120000, "NOPE": 100}


def _new(a, n: int, gw):
    _, i, alt, sym, side, kind, dp, qty, extra = a
    acct = ACCOUNTS.get(f"acct{i}")
    kw = dict(side=side, price=MID[sym] + dp, qty=qty)
    if kind == "market":
        kw.update(order_type=OrderType.MARKET, tif=Tif.IOC, price=0)
    elif kind in ("stop", "stop_limit"):
        kw.update(order_type=OrderType.STOP if kind == "stop" else OrderType.STOP_LIMIT,
                  stop_price=MID[sym] + (dp or 1), price=0 if kind == "stop" else MID[sym] + dp)
    elif kind == "iceberg":
        kw.update(display_qty=max(1, min(qty, extra)))
    elif kind == "post_only":
        kw.update(post_only=True)
    elif kind in ("ioc", "fok"):
        kw.update(tif=Tif.IOC if kind == "ioc" else Tif.FOK, min_qty=min(extra, qty) if
                  kind == "ioc" else 0)
    elif kind == "gtd":
        kw.update(tif=Tif.GTD, expire_ts=gw.now_ns() + extra * 400_000)
    elif kind == "day":
        kw.update(tif=Tif.DAY)
    stream = f"{'ouch' if alt else 'fix'}:{acct.name}"
    return Request("new", acct, stream, f"c{n}", sym, **kw)


def _run_flow(actions) -> tuple[dict, dict]:
    """Run ``actions`` through a gateway and check it against its journal; return (stored
    streams, what the subscribers were handed), both {stream: [Report]}."""
    d = tempfile.mkdtemp(prefix="exsim-coreflow-")
    try:
        return asyncio.run(_flow(d, actions))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _same_as_stored(stored: dict, got: dict) -> bool:
    return all([r.to_json() for r in rs] == [r.to_json() for r in stored.get(s, [])]
               for s, rs in got.items())


async def _flow(d, actions) -> tuple[dict, dict]:
    async with running_gateway(d, ACCOUNTS, batch_ns=300_000) as gw:
        got = _subscribe_all(gw)
        cids = []            # (account index, client id) of every new / replace so far
        foreign = []         # (cancel's client id, account) naming another account's order
        for n, a in enumerate(actions):
            if a[0] == "pause":
                await asyncio.sleep(a[1])
                continue
            if a[0] == "new":
                req = _new(a, n, gw)
                cids.append((a[1], req.client_order_id))
                gw.submit(req)
                continue
            i, alt, target, other = a[1], a[2], a[3], a[4]
            pool = [c for j, c in cids if (j != i) == other]
            if not pool:
                continue
            orig = pool[target % len(pool)]
            acct = ACCOUNTS.get(f"acct{i}")
            stream = f"{'ouch' if alt else 'fix'}:{acct.name}"
            # why symbol "" sometimes: an OUCH cancel/replace names no symbol
            sym = "" if alt else "JPM"
            if other:
                foreign.append((f"c{n}", acct.name))
            if a[0] == "cancel":
                gw.submit(Request("cancel", acct, stream, f"c{n}", sym, orig))
            else:
                gw.submit(Request("replace", acct, stream, f"c{n}", sym, orig, side=Side.BUY,
                                  price=15000 + a[5], qty=a[6]))
                cids.append((i, f"c{n}"))
        await _settle(gw)
        async with gw.engine_lock:
            stored, events = await in_core(gw, _check, gw, got)
            seen = {st: list(rs) for st, rs in got.items()}   # what was handed out by then
            for cid, name in foreign:
                rs = [r for s in (f"fix:{name}", f"ouch:{name}") for r in stored.get(s, [])
                      if r.client_order_id == cid]
                if any(r.exec == "rejected" and r.seq == 0 for r in rs):
                    continue   # a replace refused by the core for its own reasons
                assert rs and all(r.exec in ("cancel_rejected", "replace_rejected")
                                  and r.order_id == 0 and r.reason == Reason.UNKNOWN_ID
                                  for r in rs), rs
                seq = rs[0].seq
                # (the message's stamp may expire GTD orders: time, not the request)
                evs = events[(events["seq"] == seq) & (events["reason"] != Reason.EXPIRED)]
                assert len(evs) == 1 and evs[0]["event"] == Event.REJECTED \
                    and evs[0]["order_id"] == 0
        assert gw.failed is None
    return stored, seen


def _check(gw, got):
    from exsim.store import read

    return check_journal(gw, got), read(gw.session, "events", seq=(1, max(gw.engine.seq, 1)))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(action, min_size=5, max_size=150))
def test_random_flows_agree_with_the_journal(actions):
    stored, got = _run_flow(actions)
    assert _same_as_stored(stored, got)


def test_a_busy_flow_agrees_with_the_journal():
    """A fixed long flow: crossing orders of every type from four accounts on two streams."""
    import random

    rng = random.Random(3)
    kinds = ["limit", "market", "stop", "stop_limit", "iceberg", "post_only", "ioc", "fok",
             "gtd", "day"]
    actions = []
    for _ in range(400):
        r = rng.random()
        if r < 0.6:
            actions.append(("new", rng.randrange(4), rng.random() < 0.3, "JPM",
                            rng.choice([Side.BUY, Side.SELL]), rng.choice(kinds),
                            rng.randint(-4, 4), rng.randint(1, 12), rng.randint(0, 4)))
        elif r < 0.75:
            actions.append(("cancel", rng.randrange(4), rng.random() < 0.3,
                            rng.randrange(200), rng.random() < 0.1))
        elif r < 0.9:
            actions.append(("replace", rng.randrange(4), rng.random() < 0.3,
                            rng.randrange(200), rng.random() < 0.1, rng.randint(-3, 3),
                            rng.randint(1, 15)))
        else:
            actions.append(("pause", rng.choice([0, 0.0003, 0.001])))
    stored, got = _run_flow(actions)
    assert _same_as_stored(stored, got)
    assert sum(r.exec == "trade" for rs in stored.values() for r in rs) > 0   # it did trade
