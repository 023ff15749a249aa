"""Helpers of the binary order-entry tests: a gateway with the binary port on a temp dir.

``ouch_port(tmp)`` yields (gateway, server) with the port on 127.0.0.1:0; ``login(server,
name)`` returns a logged-in OuchClient. ``run(coro)`` runs a test coroutine under an overall
deadline so a stuck socket fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib

from gw_fixtures import PASSWORD, make_accounts, running_gateway

from exchange.gateway import binary_server
from exchange.gateway.client.ouch import OuchClient

TEST_DEADLINE_S = 60.0


def run(coro, deadline: float = TEST_DEADLINE_S):
    """Run ``coro`` to completion; raise asyncio.TimeoutError after ``deadline`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, deadline))


@contextlib.asynccontextmanager
async def ouch_port(data_dir, accounts=None, gw_options=None, **options):
    """Yield (gateway, BinaryServer) on ``data_dir``; both are closed on exit."""
    async with running_gateway(data_dir, accounts or make_accounts(),
                               **(gw_options or {})) as gw:
        srv = await binary_server.start(gw, "127.0.0.1", 0, **options)
        try:
            yield gw, srv
        finally:
            srv.close()
            await asyncio.wait_for(srv.wait_closed(), 5)


async def login(srv, name: str = "acct0", *, seq: int = 1, password: str = PASSWORD,
                **options) -> OuchClient:
    """Return an OuchClient logged in to ``srv`` as ``name`` from sequence number ``seq``."""
    options.setdefault("timeout", 5.0)
    return await OuchClient.connect("127.0.0.1", srv.port, name, password, seq=seq, **options)
