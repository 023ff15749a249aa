"""A GTD order (FIX 59=6 with 126 ExpireTime) expires when its time comes on a served session,
with no other traffic: the engine acts only on messages, so the gateway sends its clock message
at the engine's next deadline (``Engine.next_deadline``) and the Expired report (150=C) comes
at the ExpireTime, not with the next client's order. The same holds for DAY orders at the
symbol's session close."""

from __future__ import annotations

import asyncio
import time

import pytest

from fix_helpers import client, fix_port, run
from exsim.exchange.gateway.fix.codec import utc_timestamp


def test_gtd_order_expires_without_other_traffic(tmp_path):
    async def main():
        async with fix_port(tmp_path / "gw") as (gw, port):
            c = await client(port, "acct0")
            expire = utc_timestamp(time.time_ns() + 1_000_000_000)
            c.new_order("G1", "JPM", "buy", 1, "140.00", tif="6", expire_time=expire)
            ack = await c.expect("8", timeout=60)
            assert ack.get(150) == "0", ack.get(58)
            try:
                m = await c.expect("8", where=lambda m: m.get(150) == "C", timeout=4)
            except asyncio.TimeoutError:
                m = None
            await c.logout()
            return m

    got = run(main())
    assert got is not None, "no Expired ExecutionReport 3 s after the order's ExpireTime"


def test_a_deadline_the_clock_message_does_not_clear_sends_one_clock_message(tmp_path):
    """If the engine kept reporting a passed deadline (a bug), the core must not journal clock
    messages in a loop: one is sent for that deadline, then the core waits for requests."""
    from gw_fixtures import running_gateway

    async def main():
        async with running_gateway(tmp_path / "d") as gw:
            gw.engine.next_deadline = lambda: 1   # long past, never cleared
            await asyncio.sleep(0.3)
            return gw.engine.seq

    assert run(main()) == 1
