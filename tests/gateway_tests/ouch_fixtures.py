"""Helpers of the binary order-entry tests: a gateway with the binary port on a temp dir.

``ouch_port(tmp)`` yields (gateway, server) with the port on 127.0.0.1:0; ``login(server,
name)`` returns a logged-in OuchClient. ``run(coro)`` runs a test coroutine under an overall
deadline so a stuck socket fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib

from gw_fixtures import PASSWORD, make_accounts, running_gateway

from exsim.exchange.gateway import binary_server
from exsim.exchange.gateway.client.ouch import OuchClient

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


async def raw_connect(srv, *, rcvbuf: int = 0):
    """Return (reader, writer) of a plain TCP connection to ``srv`` (``rcvbuf``: a small
    receive buffer, set before connecting, for slow-reader tests)."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", srv.port))
    return await asyncio.open_connection(sock=sock)


async def raw_login(srv, name: str = "acct0", *, seq: int = 1, password: str = PASSWORD,
                    rcvbuf: int = 0):
    """Return (reader, writer, next seq) of a raw connection logged in as ``name``; raises
    AssertionError if the login is not accepted."""
    from exsim.exchange.gateway import ouch
    from exsim.exchange.gateway.framing import PacketType, frame, read_frame

    reader, writer = await raw_connect(srv, rcvbuf=rcvbuf)
    writer.write(frame(PacketType.LOGIN_REQUEST, ouch.encode_login(name, password, "", seq)))
    got = await read_frame(reader, max_size=1 << 16, idle_s=5)
    assert got is not None and got[0] == PacketType.LOGIN_ACCEPTED, got
    return reader, writer, ouch.parse_login_accepted(got[1])[1]


async def read_until_quiet(reader, quiet_s: float = 0.3, limit: int = 100_000):
    """Return (packets, closed): the (type, payload) packets received until nothing came for
    ``quiet_s`` seconds (closed False) or the server closed the connection (closed True)."""
    from exsim.exchange.gateway.framing import FrameError, read_frame

    packets = []
    while len(packets) < limit:
        try:
            got = await read_frame(reader, max_size=1 << 16, idle_s=quiet_s)
        except FrameError as e:
            if "nothing received" in str(e):
                return packets, False
            return packets, True
        except ConnectionError:
            return packets, True
        if got is None:
            return packets, True
        packets.append(got)
    return packets, False
