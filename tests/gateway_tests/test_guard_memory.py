"""Memory kept per order is released when the order is finished (issue 36, item 7): thousands
of IOC orders leave the gateway's memory where it was (only their client order ids stay, to
refuse duplicates), and a cancel naming a finished order is still answered from its stored
state (a cancel reject that says it is filled)."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

from gw_fixtures import make_accounts, running_gateway

from exsim.exchange.gateway.core import Request

PER_ORDER_BOUND = 400   # bytes a finished order may keep (its client order id, to refuse duplicates)


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 120))


async def settle(gw):
    for _ in range(500):
        await asyncio.sleep(0.01)
        if gw._queue.empty():
            break
    async with gw.engine_lock:
        pass


def test_finished_orders_release_their_memory(tmp_path):
    async def main():
        accts = make_accounts()
        a = accts.get("acct0")
        async with running_gateway(tmp_path, accts) as gw:
            for i in range(300):    # warm up: the first batches allocate buffers once
                gw.submit(Request("new", a, "ouch:acct0", f"w{i}", "JPM", side=0, price=100,
                                  qty=1, tif=1))
            await settle(gw)
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            n = 2000
            for i in range(n):      # IOC on an empty book: each one is canceled at once
                gw.submit(Request("new", a, "ouch:acct0", f"i{i}", "JPM", side=0, price=100,
                                  qty=1, tif=1))
                if i % 1000 == 999:
                    await settle(gw)
            await settle(gw)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            assert grown / n < PER_ORDER_BOUND, f"{grown / n:.0f} bytes kept per IOC order"
    run(main())


def test_a_cancel_of_a_finished_order_is_answered_from_its_stored_state(tmp_path):
    async def main():
        accts = make_accounts()
        a, b = accts.get("acct0"), accts.get("acct1")
        async with running_gateway(tmp_path, accts) as gw:
            got = []
            gw.subscribe("ouch:acct0", got.extend)
            gw.submit(Request("new", a, "ouch:acct0", "s1", "JPM", side=1, price=100, qty=2))
            gw.submit(Request("new", b, "ouch:acct1", "b1", "JPM", side=0, price=100, qty=2))
            await settle(gw)
            assert got[-1].status == "filled"
            gw.submit(Request("cancel", a, "ouch:acct0", "s1", "JPM", orig_client_order_id="s1"))
            await settle(gw)
            r = got[-1]
            assert (r.exec, r.status, r.client_order_id, r.cum_qty) == \
                ("cancel_rejected", "filled", "s1", 2)
            # and a new order reusing the finished order's id is still a duplicate
            gw.submit(Request("new", a, "ouch:acct0", "s1", "JPM", side=1, price=100, qty=1))
            await settle(gw)
            assert got[-1].exec == "rejected" and "duplicate" in got[-1].text
    run(main())
