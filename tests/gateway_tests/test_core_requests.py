"""The gateway core request by request: replace semantics (a new TOTAL quantity, FIX style)
whatever the batch boundaries, and the rejects of the core (duplicate or malformed client ids,
out-of-range numbers) and of the engine (unknown symbol, unknown order), journaled or not.

Requests submitted with no await in between land in one batch (the core takes everything
queued), which is how these tests put a fill and a replace of the same order in one batch.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from core_child import check_journal, in_core
from exsim.exchange.gateway.core import MAX_CLIENT_ID, Request
from exsim.exchange.schema import Event, OrderType, Reason, Side, Tif
from gw_fixtures import make_accounts, running_gateway

ACCOUNTS = make_accounts(4)
A0, A1 = ACCOUNTS.get("acct0"), ACCOUNTS.get("acct1")
STREAMS = ["fix:acct0", "ouch:acct0", "fix:acct1", "dropcopy:F0", "dropcopy:F1"]


def new(acct, cid, side, price, qty, stream=None, **kw):
    return Request("new", acct, stream or f"fix:{acct.name}", cid, "JPM", side=side,
                   price=price, qty=qty, **kw)


def replace_(acct, cid, orig, qty, price=15000, symbol="JPM", stream=None):
    return Request("replace", acct, stream or f"fix:{acct.name}", cid, symbol, orig,
                   side=Side.BUY, price=price, qty=qty)


def cancel(acct, cid, orig, symbol="JPM", stream=None):
    return Request("cancel", acct, stream or f"fix:{acct.name}", cid, symbol, orig)


async def settle(gw):
    """Wait until everything submitted so far is processed (a marker cancel's reject)."""
    done = asyncio.get_running_loop().create_future()
    cid = f"settle{gw.now_ns() % 10**9}"

    def seen(rs):
        if any(r.client_order_id == cid for r in rs) and not done.done():
            done.set_result(None)

    gw.subscribe("fix:acct3", seen)
    gw.submit(cancel(ACCOUNTS.get("acct3"), cid, "none"))
    await asyncio.wait_for(asyncio.wait({done, gw._task}, return_when="FIRST_COMPLETED"), 10)
    assert gw.failed is None, f"the gateway failed: {gw.failed!r}"
    assert done.done()
    gw.unsubscribe("fix:acct3", seen)


async def run(tmp_path, batches, **options):
    """Submit each list of requests in ``batches`` as one batch; return ({stream: reports},
    gw state for checks) after checking the journal. The gateway is closed on return."""
    got = defaultdict(list)
    async with running_gateway(tmp_path / "d", ACCOUNTS, **options) as gw:
        for s in STREAMS:
            gw.subscribe(s, got[s].extend)
        for batch in batches:
            for req in batch:
                gw.submit(req)
            await settle(gw)
        async with gw.engine_lock:
            await in_core(gw, check_journal, gw, got)
        assert gw.failed is None
        live = {int(o["order_id"]): (int(o["qty"]) + int(o["hidden"]))
                for o in gw.engine.orders("JPM")}
    return got, live


def last(got, stream, cid):
    return [r for r in got[stream] if r.client_order_id == cid][-1]


# -- replace: a new total quantity ----------------------------------------------------------------

@pytest.mark.parametrize("symbol", ["JPM", ""])
@pytest.mark.parametrize("split", [False, True])
def test_replace_of_an_order_filled_in_the_same_batch(tmp_path, symbol, split):
    """acct0 buys 10 against a resting sell of 4, then replaces to 8 in all: leaves 8 - 4 = 4,
    whether the replace is in the fill's batch or the next, and whether it names the symbol
    (FIX) or not (OUCH)."""
    first = [new(A1, "s1", Side.SELL, 15000, 4)]
    rest = [new(A0, "b1", Side.BUY, 15000, 10), replace_(A0, "b2", "b1", 8, symbol=symbol)]
    batches = [first, rest[:1], rest[1:]] if split else [first, rest]
    got, live = asyncio.run(run(tmp_path, batches))
    r = last(got, "fix:acct0", "b2")
    assert (r.exec, r.qty, r.cum_qty, r.leaves_qty) == ("replaced", 8, 4, 4)
    assert live[r.order_id] == 4


@pytest.mark.parametrize("symbol", ["JPM", ""])
def test_replace_after_a_fill_by_another_account_in_the_same_batch(tmp_path, symbol):
    """acct0's resting buy of 10 is hit for 3 by acct1, and acct0 replaces it to 6 in all in
    the same batch: leaves 3."""
    batches = [[new(A0, "b1", Side.BUY, 15000, 10)],
               [new(A1, "s1", Side.SELL, 15000, 3), replace_(A0, "b2", "b1", 6, symbol=symbol)]]
    got, live = asyncio.run(run(tmp_path, batches))
    r = last(got, "fix:acct0", "b2")
    assert (r.exec, r.qty, r.cum_qty, r.leaves_qty) == ("replaced", 6, 3, 3)
    assert live[r.order_id] == 3


@pytest.mark.parametrize("symbol", ["JPM", ""])
def test_a_chain_of_replaces_and_a_cancel_in_one_batch(tmp_path, symbol):
    """b1 -> b2 -> b3, then cancel b3, all in one batch: the same outcome as one per batch
    (the client ids a replace gives are known to the requests after it)."""
    reqs = [new(A0, "b1", Side.BUY, 14990, 10), replace_(A0, "b2", "b1", 9, 14990, symbol),
            replace_(A0, "b3", "b2", 7, 14991, symbol), cancel(A0, "x1", "b3", symbol)]
    outcomes = []
    for i, batches in enumerate(([reqs], [[r] for r in reqs])):
        got, live = asyncio.run(run(tmp_path / str(i), batches))
        outcomes.append([(r.exec, r.client_order_id, r.orig_client_order_id, r.qty, r.price,
                          r.leaves_qty, r.reason) for r in got["fix:acct0"]
                         if not r.client_order_id.startswith("settle")])
        assert live == {}
    assert outcomes[0] == outcomes[1]
    assert [o[0] for o in outcomes[0]] == ["new", "replaced", "replaced", "canceled"]


def test_replace_to_no_more_than_filled_is_rejected(tmp_path):
    """A new total at or below the filled quantity leaves nothing open: the engine rejects it
    (BAD_QTY) and the order is unchanged."""
    batches = [[new(A1, "s1", Side.SELL, 15000, 4)],
               [new(A0, "b1", Side.BUY, 15000, 10)],
               [replace_(A0, "b2", "b1", 4)], [replace_(A0, "b3", "b1", 2)]]
    got, live = asyncio.run(run(tmp_path, batches))
    for cid in ("b2", "b3"):
        r = last(got, "fix:acct0", cid)
        assert (r.exec, r.reason) == ("replace_rejected", Reason.BAD_QTY)
    assert list(live.values()) == [6]


def test_a_replace_from_another_stream_is_answered_on_both(tmp_path):
    batches = [[new(A0, "b1", Side.BUY, 14990, 10)],
               [replace_(A0, "b2", "b1", 5, 14990, symbol="", stream="ouch:acct0")],
               [cancel(A0, "x1", "b2", stream="ouch:acct0")]]
    got, _ = asyncio.run(run(tmp_path, batches))
    for s in ("fix:acct0", "ouch:acct0"):
        assert [r.exec for r in got[s]] == (["new"] if s == "fix:acct0" else []) + \
            ["replaced", "canceled"]
    assert [r.exec for r in got["dropcopy:F0"]] == ["new", "replaced", "canceled"]


# -- rejects --------------------------------------------------------------------------------------

def test_duplicate_client_order_ids_are_refused_by_the_core(tmp_path):
    batches = [[new(A0, "b1", Side.BUY, 14990, 10), new(A0, "b1", Side.SELL, 15010, 1)],
               [new(A0, "b1", Side.BUY, 14980, 3), new(A0, "b2", Side.BUY, 14980, 3)],
               [replace_(A0, "b2", "b1", 5, 14990)],      # the new id is taken
               [new(A1, "b1", Side.SELL, 15010, 2)]]      # another account may use it
    got, live = asyncio.run(run(tmp_path, batches))
    rs = [r for r in got["fix:acct0"] if not r.client_order_id.startswith("settle")]
    dup = [r for r in rs if r.text == "duplicate client_order_id"]
    assert [(r.exec, r.seq, r.order_id, r.status) for r in dup] == \
        [("rejected", 0, 0, "rejected")] * 2 + [("replace_rejected", 0, 0, "rejected")]
    assert sorted(live.values()) == [2, 3, 10]
    assert [r.exec for r in got["fix:acct1"]] == ["new"]
    assert sum(r.text == "duplicate client_order_id" for r in got["dropcopy:F0"]) == 3


BIG = 1 << 63


@pytest.mark.parametrize("field,value", [
    ("price", BIG), ("qty", -BIG - 1), ("stop_price", 10**30), ("display_qty", 2.5),
    ("expire_ts", "1"), ("side", 256), ("order_type", -1), ("tif", True), ("min_qty", None)])
def test_out_of_range_numbers_are_refused_by_the_core(tmp_path, field, value):
    kw = dict(side=Side.BUY, price=14990, qty=10)
    kw[field] = value
    bad = Request("new", A0, "fix:acct0", "b1", "JPM", **kw)
    got, live = asyncio.run(run(tmp_path, [[bad], [new(A0, "b2", Side.BUY, 14990, 1)]]))
    r = got["fix:acct0"][0]
    assert (r.exec, r.seq, r.order_id, r.text) == ("rejected", 0, 0,
                                                   "a numeric field is out of range")
    assert list(live.values()) == [1]   # the gateway goes on


@pytest.mark.parametrize("qty", [-BIG, -BIG + 1, BIG - 1])
def test_a_replace_quantity_at_the_int64_edge_does_not_stop_the_gateway(tmp_path, qty):
    """The new total minus the filled quantity must not overflow the engine's int64 field."""
    batches = [[new(A1, "s1", Side.SELL, 15000, 4)], [new(A0, "b1", Side.BUY, 15000, 10)],
               [replace_(A0, "b2", "b1", qty)], [new(A0, "b3", Side.BUY, 14990, 1)]]
    got, live = asyncio.run(run(tmp_path, batches))
    r = last(got, "fix:acct0", "b2")
    assert r.exec == "replace_rejected" and r.reason in (Reason.BAD_QTY, Reason.OVERFLOW)
    assert sorted(live.values()) == [1, 6]


@pytest.mark.parametrize("cid", ["", "x" * (MAX_CLIENT_ID + 1), "y" * 10_000])
def test_bad_client_ids_are_refused(tmp_path, cid):
    got, live = asyncio.run(run(tmp_path, [[new(A0, cid, Side.BUY, 14990, 10),
                                            cancel(A0, cid, "b0"),
                                            new(A0, "z" * MAX_CLIENT_ID, Side.BUY, 14990, 2)]]))
    rs = got["fix:acct0"]
    assert [(r.exec, r.seq) for r in rs[:2]] == [("rejected", 0), ("cancel_rejected", 0)]
    assert all(len(r.client_order_id) <= 64 for r in rs)
    assert rs[2].exec == "new" and list(live.values()) == [2]


def test_unknown_symbol_and_unknown_order_are_journaled_rejects(tmp_path):
    batches = [[Request("new", A0, "fix:acct0", "b1", "NOPE", side=Side.BUY, price=1, qty=1),
                cancel(A0, "x1", "never"), cancel(A0, "x2", "never", symbol=""),
                replace_(A0, "x3", "never", 5), new(A1, "s1", Side.SELL, 15010, 1),
                cancel(A0, "x4", "s1")]]   # acct1's client id: unknown to acct0
    got, live = asyncio.run(run(tmp_path, batches))
    rs = {r.client_order_id: r for r in got["fix:acct0"]}
    assert (rs["b1"].exec, rs["b1"].reason) == ("rejected", Reason.UNKNOWN_SYMBOL)
    for cid, kind in (("x1", "cancel"), ("x2", "cancel"), ("x3", "replace"), ("x4", "cancel")):
        r = rs[cid]
        assert (r.exec, r.reason, r.order_id, r.text) == (f"{kind}_rejected", Reason.UNKNOWN_ID,
                                                          0, "UNKNOWN_ID"), r
        assert r.seq > 0   # journaled: the engine refused it
    assert list(live.values()) == [1]   # acct1's order untouched
    assert [r.exec for r in got["fix:acct1"]] == ["new"]


# -- the core's other promises ----------------------------------------------------------------------

def test_rate_limiter_is_a_token_bucket():
    from exsim.exchange.gateway.core import RateLimiter

    rl = RateLimiter(10)
    t = 5 * 10**9
    assert [rl.allow(t) for _ in range(11)] == [True] * 10 + [False]   # burst = per_sec
    assert rl.allow(t + 50_000_000) is False                            # half a token
    assert rl.allow(t + 100_000_000) is True                            # 0.1 s: one more
    assert rl.allow(t + 100_000_000) is False
    t += 3600 * 10**9                                                    # idle an hour
    assert sum(rl.allow(t) for _ in range(50)) == 10                    # never above the burst


def test_broken_listeners_are_removed_and_the_others_go_on(tmp_path):
    async def go():
        async with running_gateway(tmp_path / "d", ACCOUNTS) as gw:
            good, batches, calls = [], [], []

            def bad(rs):
                calls.append(1)
                raise RuntimeError("a buggy session")

            def market_bad(batch):
                raise RuntimeError("a buggy feed")

            gw.subscribe("fix:acct0", bad)
            gw.subscribe("fix:acct0", good.extend)
            gw.add_market_listener(market_bad)
            gw.add_market_listener(lambda b: batches.append((b.first_seq, len(b.orders))))
            gw.submit(new(A0, "b1", Side.BUY, 14990, 1))
            await settle(gw)
            gw.submit(new(A0, "b2", Side.BUY, 14990, 1))
            await settle(gw)
            assert [r.client_order_id for r in good] == ["b1", "b2"]
            assert len(calls) == 1 and gw.failed is None
            assert batches == [(1, 2), (3, 2)]   # each order with its settle marker
            gw.unsubscribe("fix:acct0", good.extend)   # a bound method: equal, not identical
            gw.unsubscribe("fix:acct0", good.extend)   # no-op
        with pytest.raises(Exception, match="closed"):
            gw.submit(new(A0, "b3", Side.BUY, 14990, 1))
        await gw.close()   # idempotent

    asyncio.run(go())


def test_read_stream_beside_a_busy_writer_sees_only_whole_dispatched_prefixes(tmp_path):
    """Sessions catch up with read_stream while the worker thread commits batches: every read
    is a prefix of the final stream, never a report that was not yet dispatched."""
    async def go():
        async with running_gateway(tmp_path / "d", ACCOUNTS, batch_ns=100_000) as gw:
            reads = []
            stop = False

            async def reader():
                while not stop:
                    for s in ("fix:acct0", "dropcopy:F1"):
                        reads.append((s, gw.stream_head(s), gw.read_stream(s, 0)))
                    await asyncio.sleep(0)

            task = asyncio.create_task(reader())
            for i in range(300):
                a = (A0, A1)[i % 2]
                gw.submit(new(a, f"o{i}", (Side.BUY, Side.SELL)[i % 2], 14999 + i % 3, 1 + i % 4))
                if i % 7 == 0:
                    await asyncio.sleep(0)
            await settle(gw)
            stop = True
            await task
            final = {s: [r.to_json() for r in gw.read_stream(s, 0)]
                     for s in ("fix:acct0", "dropcopy:F1")}
            assert len(reads) > 5
            for s, head, rs in reads:
                assert len(rs) == head
                assert [r.to_json() for r in rs] == final[s][:len(rs)]

    asyncio.run(go())


@pytest.mark.parametrize("second", ["replace", "new"])
def test_a_client_id_a_replace_gives_cannot_be_taken_again_in_its_batch(tmp_path, second):
    """Replace J1 -> x on JPM, then (same batch) replace B1 -> x on BTCUSD or a new order x:
    the second is refused as a duplicate, as it is in the next batch; x names one order."""
    btc = Request("new", A0, "fix:acct0", "B1", "BTCUSD", side=Side.BUY, price=119990, qty=5)
    then = (Request("replace", A0, "fix:acct0", "x", "BTCUSD", "B1", side=Side.BUY,
                    price=119990, qty=4) if second == "replace"
            else Request("new", A0, "fix:acct0", "x", "BTCUSD", side=Side.BUY, price=119990,
                         qty=1))
    got, live = asyncio.run(run(tmp_path, [[new(A0, "J1", Side.BUY, 14990, 5), btc],
                                           [replace_(A0, "x", "J1", 3, 14990), then]]))
    rs = [r for r in got["fix:acct0"] if r.client_order_id == "x"]
    assert [r.exec for r in rs] == ["replaced", f"{'replace_' if second == 'replace' else ''}rejected"]
    assert rs[1].text == "duplicate client_order_id"


def test_an_id_replaced_away_no_longer_names_the_order(tmp_path):
    """After replace A1 -> A2, a cancel naming A1 is rejected (UNKNOWN_ID) and the order stays;
    A1 is still refused as a new order's id (duplicate)."""
    import asyncio

    from exsim.exchange.gateway.core import Request
    from exsim.exchange.schema import Side
    from gw_fixtures import make_accounts, running_gateway

    async def main():
        accts = make_accounts(2)
        a = accts.get("acct0")
        got = []
        async with running_gateway(tmp_path / "d", accts) as gw:
            gw.subscribe("fix:acct0", got.extend)
            gw.submit(Request("new", a, "fix:acct0", "A1", "JPM", side=Side.BUY, price=15000, qty=5))
            await asyncio.sleep(0.05)
            gw.submit(Request("replace", a, "fix:acct0", "A2", "JPM", orig_client_order_id="A1",
                              side=Side.BUY, price=14999, qty=5))
            await asyncio.sleep(0.05)
            gw.submit(Request("cancel", a, "fix:acct0", "A3", "JPM", orig_client_order_id="A1"))
            gw.submit(Request("new", a, "fix:acct0", "A1", "JPM", side=Side.BUY, price=15000, qty=5))
            await asyncio.sleep(0.05)
            live = gw.engine.orders("JPM")
        return got, live

    got, live = asyncio.run(main())
    assert [r.exec for r in got] == ["new", "replaced", "rejected", "cancel_rejected"] or \
        [r.exec for r in got] == ["new", "replaced", "cancel_rejected", "rejected"]
    rej = next(r for r in got if r.exec == "cancel_rejected")
    assert rej.text == "UNKNOWN_ID" and rej.client_order_id == "A3"
    dup = next(r for r in got if r.exec == "rejected")
    assert dup.text == "duplicate client_order_id"
    assert len(live) == 1 and int(live["price"][0]) == 14999
