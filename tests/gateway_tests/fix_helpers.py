"""Helpers of the FIX port tests: a gateway with a FIX listener on 127.0.0.1 port 0, raw FIX
messages and a raw reader (for tests that send what the client library would not).

Every wait is bounded: ``run`` puts a deadline on the whole test coroutine, and
``read_raw`` / the client's ``expect`` have their own timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from gw_fixtures import PASSWORD, running_gateway

from exsim.exchange.gateway.client.fix import FixClient, FixMessage
from exsim.exchange.gateway.fix import server
from exsim.exchange.gateway.fix.codec import Framer, Garbled, build, parse_frame, utc_timestamp

__all__ = ["run", "fix_port", "client", "raw_msg", "raw_logon", "read_raw", "PASSWORD", "px"]


def run(coro, timeout: float = 120.0):
    """Run ``coro`` to completion with a deadline; return its result."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


@contextlib.asynccontextmanager
async def fix_port(data_dir, accounts=None, gw_options: dict | None = None, **fix_options):
    """Yield (gateway, FIX port) on ``data_dir``; both closed on exit."""
    async with running_gateway(data_dir, accounts, **(gw_options or {})) as gw:
        srv = await server.start(gw, "127.0.0.1", 0, **fix_options)
        try:
            yield gw, srv.sockets[0].getsockname()[1]
        finally:
            srv.close()
            await srv.wait_closed()


async def client(port: int, name: str = "acct0", **kw) -> FixClient:
    """Return a FixClient logged on as ``name`` (password PASSWORD)."""
    kw.setdefault("heartbeat", 30)
    return await FixClient.connect("127.0.0.1", port, name, PASSWORD, **kw)


def px(gw, symbol: str, ticks: int) -> str:
    """Return the FIX decimal price of ``ticks`` ticks of ``symbol``."""
    return format(gw.symbols[symbol].tick_size * ticks, "f")


def raw_msg(msg_type: str, seq: int, body: list, *, sender: str = "acct0",
            target: str = "EXSIM", poss_dup: bool = False) -> bytes:
    """Return one well-formed message from ``sender``."""
    now = utc_timestamp(time.time_ns())
    return build(msg_type, sender, target, seq, now, body, poss_dup=poss_dup,
                 orig_sending_time=now if poss_dup else None)


def logon_body(password: str = PASSWORD, hb: int = 30, reset: bool = False) -> list:
    """Return the body of a Logon."""
    body = [(98, 0), (108, hb), (554, password)]
    if reset:
        body.append((141, "Y"))
    return body


async def raw_logon(port: int, name: str = "acct0", seq: int = 1, hb: int = 30, **kw):
    """Open a raw connection and log on as ``name``; return (reader, writer, Logon reply)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw_msg("A", seq, logon_body(hb=hb, **kw), sender=name))
    got = await read_raw(reader, 1, timeout=5)
    assert got and got[0].type == "A", got
    return reader, writer, got[0]


async def read_raw(reader, count: int | None = None, *, timeout: float = 2.0,
                   framer: Framer | None = None) -> list[FixMessage]:
    """Return the messages read until ``count`` arrived, the peer closed, or ``timeout`` s
    passed (whichever first). A list ending in None means the peer closed."""
    framer = framer or Framer(1 << 16)
    out: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while count is None or len(out) < count:
        left = deadline - loop.time()
        if left <= 0:
            break
        try:
            data = await asyncio.wait_for(reader.read(65536), left)
        except (asyncio.TimeoutError, ConnectionError):
            break
        if not data:
            out.append(None)
            break
        framer.feed(data)
        while (item := framer.next()) is not None:
            if isinstance(item, Garbled):
                continue
            m = parse_frame(item)
            out.append(FixMessage(m.message_type.decode(), int(m.get(34)),
                                  [(int(t), v.decode("latin-1")) for t, v in m.pairs], item))
    return out
