"""The gateway core tests' shared checks, and the child process the crash tests kill.

``check_journal(gw, received)`` is the test oracle of the core: it re-derives every report from
the rows the store holds (``store.read`` of orders, fills and events, and the requests the
gateway state keeps) with a fresh ``OrderState`` per order, and asserts that the stored report
streams are exactly those reports, numbered 1..N per stream, copied to the asking stream and the
firm's drop copy, and that they agree with the journal (fills) and the engine (live orders).

Run as a script (``python core_child.py DATA_DIR OUT_FILE [CRASH_AT_BATCH [WHERE]]``) it opens a
Gateway with durability "fsync", subscribes to every stream of the test accounts, submits a
seeded random flow forever, and appends every report it is handed (that is, acknowledged) to
OUT_FILE as ``to_json`` lines, flushed and fsynced per callback. With CRASH_AT_BATCH = K the
K-th engine batch's report commit (``StateDB.end_batch``) exits the process at once
(``os._exit(9)``): the engine journaled the batch, the gateway state did not get its reports.
With WHERE = "engine" the first batch from the K-th on that holds a new order exits as it reaches the engine (``Session.process``):
the gateway state holds its requests, the journal does not.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from exsim.exchange.gateway.core import Request  # noqa: E402
from exsim.exchange.gateway.reports import Origin, OrderState, Report, derive  # noqa: E402
from exsim.exchange.schema import Event, Kind, OrderType, Reason, Side, Tif  # noqa: E402

ANSWERS = ("canceled", "replaced", "cancel_rejected", "replace_rejected")


def _blank(r: Report) -> Report:
    return replace(r, stream="", rseq=0)


def rederive(gw) -> tuple[list, dict, dict]:
    """Return (reports, states, origins): every report of the journal derived afresh from the
    stored rows and requests (rseq 0, in journal order), the final OrderState of each order,
    and {seq: Origin}."""
    from exsim.store import read
    from exsim.store.tables import orders_without_seq

    last = gw.engine.seq
    if last == 0:
        return [], {}, {}
    src = gw.session
    orders = orders_without_seq(read(src, "orders", seq=(1, last)))
    fills = read(src, "fills", seq=(1, last))
    events = read(src, "events", seq=(1, last))
    origins = gw._db.origins(1, last)
    # every journaled seq has its request, but the gateway's clock messages (a CANCEL of id 0
    # by trader 0, sent at the engine's next deadline: core._clock_row), which have none
    clock = {seq for seq in range(1, last + 1) if seq not in origins}
    assert all(int(orders[s - 1]["kind"]) == Kind.CANCEL and int(orders[s - 1]["order_id"]) == 0
               and int(orders[s - 1]["trader"]) == 0 for s in clock), \
        "a journaled seq has no stored request and is not a clock message"
    states = {}
    for seq, o in sorted(origins.items()):
        if o.kind == "new":
            row = orders[seq - 1]
            assert int(row["order_id"]) == o.order_id
            states[o.order_id] = OrderState(
                o.order_id, o.account, o.firm, o.stream, o.client_order_id, o.symbol,
                int(row["side"]), int(row["order_type"]), int(row["tif"]), int(row["price"]),
                int(row["stop_price"]), int(row["qty"]))
    reports = derive(1, orders, fills, events, origins, states)
    return reports, states, origins


def expected_streams(gw, reports: list, origins: dict) -> dict:
    """Return {stream: [report with stream set, rseq 0]} of the engine-made (seq > 0) reports
    as the brief routes them: the order's stream, the asking stream for an answer to a
    cancel/replace from another stream, and the firm's drop copy."""
    out = defaultdict(list)
    for r in reports:
        acct = gw.accounts.get(r.account)
        out[r.stream].append(replace(r, rseq=0))
        o = origins.get(r.seq)
        if o is not None and o.order_id == r.order_id and o.stream != r.stream \
                and r.exec in ANSWERS:
            out[o.stream].append(replace(r, stream=o.stream, rseq=0))
        dc = f"dropcopy:{acct.firm}"
        out[dc].append(replace(r, stream=dc, rseq=0))
    return out


def all_streams(gw) -> list[str]:
    """Return every stream the gateway state holds reports of."""
    return sorted(gw._db.stream_heads())


async def in_core(gw, fn, *args):
    """Return ``fn(*args)`` run on the gateway's worker thread (the store session's thread)."""
    return await asyncio.get_running_loop().run_in_executor(gw._pool, fn, *args)


def check_journal(gw, received: dict | None = None) -> dict:
    """Assert the core's invariants on an open gateway with nothing in flight (module
    docstring); run it on the gateway's thread (``in_core``) under ``engine_lock``; ``received``: {stream: [Report]} a subscriber was handed, which must be the
    stored stream exactly. Returns {stream: stored reports} for further checks."""
    from exsim.store import read

    streams = all_streams(gw)
    stored = {s: gw.read_stream(s, 0) for s in streams}
    for s, rs in stored.items():
        assert [r.rseq for r in rs] == list(range(1, len(rs) + 1)), f"rseq gap on {s}"
        assert gw.stream_head(s) == len(rs)
        assert all(r.stream == s for r in rs)
    for s, rs in (received or {}).items():
        assert [r.to_json() for r in rs] == [r.to_json() for r in stored.get(s, [])], \
            f"what {s}'s subscriber got differs from the stored stream"

    reports, states, origins = rederive(gw)
    want = expected_streams(gw, reports, origins)
    for s in set(want) | set(stored):
        got = [replace(r, rseq=0) for r in stored.get(s, []) if r.seq > 0]
        assert [r.to_json() for r in got] == [r.to_json() for r in want.get(s, [])], \
            f"stream {s} is not what derive makes of the journal"

    # core-level rejects (seq 0): on the asking stream and its firm's drop copy only
    for s, rs in stored.items():
        if s.startswith("dropcopy:"):
            firm = s.split(":", 1)[1]
            assert all(gw.accounts.get(r.account).firm == firm for r in rs), \
                f"{s} holds a report of another firm"
            core = sorted(_blank(r).to_json() for r in rs if r.seq == 0)
            mine = sorted(_blank(r).to_json() for t, rr in stored.items()
                          if not t.startswith("dropcopy:") for r in rr
                          if r.seq == 0 and gw.accounts.get(r.account).firm == firm)
            assert core == mine, f"{s} does not hold exactly its firm's core rejects"
        else:
            for r in rs:
                assert r.stream.endswith(":" + r.account), f"{r} on another account's stream"

    # the journal: every trade is a fill of that order; cum = the sum of its fills
    last = gw.engine.seq
    fills = read(gw.session, "fills", seq=(1, max(last, 1)))
    by_trade = {int(f["trade_id"]): f for f in fills}
    cum = defaultdict(int)
    for f in fills:
        cum[int(f["buy_order_id"])] += int(f["qty"])
        cum[int(f["sell_order_id"])] += int(f["qty"])
    running = defaultdict(int)
    for r in reports:
        o = origins.get(r.seq)
        if r.exec == "replaced" and o is not None and o.order_id == r.order_id:
            # a replace asks for a new TOTAL quantity (FIX OrderQty): leaves = total - cum
            assert (r.qty, r.leaves_qty) == (o.qty, o.qty - r.cum_qty), \
                f"replace {o.client_order_id} asked for {o.qty} in all; got {r}"
        if r.exec == "trade":
            f = by_trade[r.trade_id]
            assert int(f["seq"]) == r.seq and r.order_id in (int(f["buy_order_id"]),
                                                             int(f["sell_order_id"]))
            assert (r.last_qty, r.last_px) == (int(f["qty"]), int(f["price"]))
            running[r.order_id] += r.last_qty
            assert r.cum_qty == running[r.order_id]
    for oid, st in states.items():
        assert st.cum_qty == cum.get(oid, 0), f"order {oid}: cum {st.cum_qty} != its fills"
        assert gw.order_state(oid).to_json() == st.to_json(), f"order {oid}: state differs"

    # the engine: live orders are exactly those reported open, with the same leaves
    live = {}
    for name in gw.symbols:
        for o in gw.engine.orders(name):
            live[int(o["order_id"])] = int(o["qty"]) + int(o["hidden"])
        for o in gw.engine.stops(name):
            live[int(o["order_id"])] = int(o["qty"])
    for oid, st in states.items():
        if oid in live:
            assert st.status in ("new", "partially_filled"), f"live order {oid} is {st.status}"
            assert st.leaves_qty == live[oid], f"order {oid}: leaves {st.leaves_qty} != " \
                                               f"the engine's {live[oid]}"
        else:
            assert st.status in ("filled", "canceled", "expired", "rejected"), \
                f"order {oid} is {st.status} in the reports but not live in the engine"
            assert st.leaves_qty == 0
    assert set(live) <= set(states), "the engine holds orders the gateway did not send"
    return stored


# -- the child process --------------------------------------------------------------------------

def random_request(rng: random.Random, accounts, gw, n: int, mine: dict) -> Request:
    """Return the n-th request of a seeded flow: mostly limit orders around 15000 on JPM,
    some market orders, cancels and replaces of the account's earlier orders."""
    i = rng.randrange(4)
    acct = accounts.get(f"acct{i}")
    stream = f"fix:{acct.name}"
    own = mine.setdefault(acct.name, [])
    roll = rng.random()
    if own and roll < 0.2:
        return Request("cancel", acct, stream, f"x{n}", "JPM", rng.choice(own))
    if own and roll < 0.3:
        cid = f"o{n}"
        req = Request("replace", acct, stream, cid, "JPM", rng.choice(own), side=Side.BUY,
                      price=15000 + rng.randint(-3, 3), qty=rng.randint(1, 20))
        own.append(cid)
        return req
    cid = f"o{n}"
    own.append(cid)
    if len(own) > 30:
        own.pop(0)
    ot = OrderType.MARKET if roll > 0.93 else OrderType.LIMIT
    return Request("new", acct, stream, cid, "JPM", side=rng.choice((Side.BUY, Side.SELL)),
                   order_type=ot, tif=Tif.IOC if ot == OrderType.MARKET else Tif.GTC,
                   price=0 if ot == OrderType.MARKET else 15000 + rng.randint(-3, 3),
                   qty=rng.randint(1, 20))


async def _child(data_dir: str, out_path: str, crash_at: int, where: str) -> None:
    from gw_fixtures import make_accounts
    from exsim.exchange.gateway.state_db import StateDB
    from exsim.replay.serving import open_gateway

    if crash_at and where == "engine":
        from exsim.store.session import Session

        real_process = Session.process
        calls = [0]

        def process(self, orders, *args, **kw):
            calls[0] += 1
            if calls[0] >= crash_at and (orders["kind"] == Kind.NEW).any():
                os._exit(9)
            return real_process(self, orders, *args, **kw)

        Session.process = process
    elif crash_at:
        real = StateDB.end_batch
        count = [0]

        def end_batch(self, reports, *args, **kw):
            if any(r.seq > 0 for r in reports):
                count[0] += 1
                if count[0] == crash_at:
                    os._exit(9)
            return real(self, reports, *args, **kw)

        StateDB.end_batch = end_batch
    accounts = make_accounts(4)
    gw = await open_gateway(data_dir, accounts, durability="fsync", batch_ns=300_000)
    out = open(out_path, "a")

    def got(reports):
        out.write("".join(r.to_json() + "\n" for r in reports))
        out.flush()
        os.fsync(out.fileno())

    for a in accounts:
        gw.subscribe(f"fix:{a.name}", got)
    for f in ("F0", "F1"):
        gw.subscribe(f"dropcopy:{f}", got)
    rng, mine, n = random.Random(7), {}, 0
    while True:
        for _ in range(rng.randint(1, 8)):
            n += 1
            gw.submit(random_request(rng, accounts, gw, n, mine))
        await asyncio.sleep(0.001)


if __name__ == "__main__":
    asyncio.run(_child(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0,
                       sys.argv[4] if len(sys.argv) > 4 else "report"))
