"""One order, one fate, when the process dies (os._exit in a child) after the core committed
a batch's requests (step 1 of docs/gateway.md "The life of an order") and before the engine
journaled it (step 2): a FIX request stays unknown (its session had not counted it as
received, so the client's resend is its only fate), a binary request is answered once with a
"not processed" reject that repeats the order it answers (side, type, time in force, price,
quantity), and both client order ids are free again."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

from gw_fixtures import make_accounts, running_gateway

from exsim.exchange.gateway.core import NOT_PROCESSED, Request
from exsim.exchange.schema import OrderType, Side, Tif

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import asyncio, os, sys
    sys.path.insert(0, sys.argv[2])
    from gw_fixtures import make_accounts
    from exsim.exchange.gateway.core import Request
    from exsim.exchange.schema import OrderType, Side, Tif
    from exsim.replay.serving import open_gateway
    from exsim.store.session import Session

    def process(self, orders, *args, **kw):
        os._exit(9)          # after the core's commit of the batch, before its WAL record

    async def main():
        accounts = make_accounts(4)
        gw = await open_gateway(sys.argv[1], accounts, durability="fsync", batch_ns=50_000_000)
        Session.process = process
        a0, a1 = accounts.get("acct0"), accounts.get("acct1")
        gw.submit(Request("new", a0, "fix:acct0", "F1", "JPM", side=Side.BUY, price=14000,
                          qty=3, tif=Tif.GTC))
        gw.submit(Request("new", a1, "ouch:acct1", "O1", "JPM", side=Side.SELL,
                          order_type=OrderType.LIMIT, price=14100, qty=7, tif=Tif.DAY))
        await asyncio.sleep(30)

    asyncio.run(main())
""")


def test_a_request_the_engine_never_journaled_has_one_fate(tmp_path):
    data = str(tmp_path / "d")
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", CHILD, data, here], cwd=ROOT, timeout=120,
                          capture_output=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]

    async def reopen():
        async with running_gateway(data, make_accounts(4)) as gw:
            fix, ouch = gw.read_stream("fix:acct0", 0), gw.read_stream("ouch:acct1", 0)
            # the client ids are free: the FIX client's resend runs once
            accounts = make_accounts(4)
            assert not gw.knows_client_order_id("acct0", "F1")
            assert not gw.knows_client_order_id("acct1", "O1")
            got = []
            gw.subscribe("fix:acct0", got.extend)
            gw.submit(Request("new", accounts.get("acct0"), "fix:acct0", "F1", "JPM",
                              side=Side.BUY, price=14000, qty=3, tif=Tif.GTC))
            for _ in range(200):
                if got:
                    break
                await asyncio.sleep(0.01)
            return fix, ouch, got

    fix, ouch, resent = asyncio.run(reopen())
    assert fix == []   # nothing said of F1 at recovery: its resend is its fate
    assert [(r.exec, r.client_order_id, r.text) for r in ouch] == [
        ("rejected", "O1", NOT_PROCESSED)]
    r = ouch[0]
    assert (r.side, r.order_type, r.tif, r.price, r.qty) == (
        Side.SELL, OrderType.LIMIT, Tif.DAY, 14100, 7)
    assert [(x.exec, x.client_order_id) for x in resent] == [("new", "F1")]
