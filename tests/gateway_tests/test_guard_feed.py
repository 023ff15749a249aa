"""The feed port under hostile or careless clients (issue 36): an order for an unknown symbol
does not break the feed for anyone, and a client that asks for snapshots and never reads them
is cut off at its output bound instead of being buffered without limit. Every wait is bounded."""

from __future__ import annotations

import asyncio
import socket

from gw_fixtures import PASSWORD, make_accounts, running_gateway

from exsim.exchange.gateway import feed_server, itch
from exsim.exchange.gateway.client.itch import FeedClient
from exsim.exchange.gateway.core import Request
from exsim.exchange.gateway.framing import PacketType, frame

T = 10   # seconds any one wait may take


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


async def settle(gw):
    for _ in range(200):
        await asyncio.sleep(0.01)
        if gw._queue.empty():
            break
    async with gw.engine_lock:
        pass


def test_an_order_for_an_unknown_symbol_leaves_the_feed_working(tmp_path):
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            fs = await feed_server.start(gw, "127.0.0.1", 0)
            port = fs.sockets[0].getsockname()[1]
            a = accts.get("acct0")
            gw.submit(Request("new", a, "ouch:acct0", "x1", "NO-SUCH", side=0, price=100, qty=1))
            sym = sorted(gw.symbols)[0]
            gw.submit(Request("new", a, "ouch:acct0", "x2", sym, side=0, price=100, qty=1))
            await settle(gw)
            c = await FeedClient.connect("127.0.0.1", port, "feed", PASSWORD)
            await c.wait_synced(T)            # a login after the bad order gets its snapshot
            assert set(c.directory) == {info.id for info in gw.symbols.values()}
            c.request_snapshot()              # and an all-symbols request is answered
            sid = gw.symbols[sym].id
            await c.wait_for(lambda: c.book(sid), T)
            assert c.book(sid)[0][2] == 100 and not c.debug
            assert fs.desyncs == 0
            await c.close()
            fs.close()
            await fs.wait_closed()
    run(main())


def test_a_client_that_requests_snapshots_and_never_reads_is_cut_off(tmp_path):
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            sym = sorted(gw.symbols)[0]
            a = accts.get("acct0")
            for i in range(400):   # a book whose snapshot is ~20 KB
                gw.submit(Request("new", a, "ouch:acct0", f"b{i}", sym, side=0,
                                  price=50 + i % 40, qty=1))
            await settle(gw)
            fs = await feed_server.start(gw, "127.0.0.1", 0, max_buffer=64 << 10, sndbuf=4096)
            port = fs.sockets[0].getsockname()[1]
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, ("127.0.0.1", port))
            req = frame(PacketType.UNSEQUENCED, itch.encode_request(
                itch.SnapshotRequest(itch.ALL_SYMBOLS)))
            await loop.sock_sendall(sock, frame(PacketType.LOGIN_REQUEST,
                                                feed_server.encode_login("feed", PASSWORD)))
            peak = 0
            for _ in range(60):                # 3 s of requests at the allowed 20/s
                try:
                    await loop.sock_sendall(sock, req)
                except OSError:
                    break
                await asyncio.sleep(0.05)
                peak = max([peak] + [s.transport.get_write_buffer_size() for s in fs.sessions])
                if fs.dropped:
                    break
            assert fs.dropped == 1 and not fs.sessions
            # never more than the bound plus one snapshot waited in the gateway for it
            assert peak <= (64 << 10) + 2 * 40_000
            sock.close()
            fs.close()
            await fs.wait_closed()
    run(main())


def test_a_snapshot_is_the_same_bytes_as_its_messages_encoded_one_by_one(tmp_path):
    """The numpy encoding of a snapshot's orders is byte for byte itch.encode of each message."""
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            syms = sorted(gw.symbols)
            a = accts.get("acct0")
            for i in range(120):   # both sides, icebergs, several levels, two symbols
                gw.submit(Request("new", a, "ouch:acct0", f"s{i}", syms[i % 2], side=i % 2,
                                  price=(40 if i % 2 == 0 else 60) + i % 7, qty=1 + i % 5,
                                  **({"display_qty": 1} if i % 9 == 0 else {})))
            await settle(gw)
            fs = await feed_server.start(gw, "127.0.0.1", 0)
            async with gw.engine_lock:
                for sym in syms[:2]:
                    sid = gw.symbols[sym].id
                    rows = gw.engine.orders(sid)
                    assert len(rows) >= 60
                    want = b"".join(frame(PacketType.SEQUENCED, itch.encode(m))
                                    for m in fs.builder.snapshot(sid, rows))
                    got, head = feed_server.snapshot_frames(fs.builder, sid, rows)
                    assert got == want
                    assert head[0].orders == len(rows)
            fs.close()
            await fs.wait_closed()
    run(main())


def test_snapshot_requests_past_the_port_budget_are_refused_and_the_session_stays(tmp_path):
    """Past ``snapshot_orders_per_s`` a Snapshot Request gets a Debug packet, not a snapshot;
    the incremental stream goes on and the login's own snapshot was sent in full."""
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            sym = sorted(gw.symbols)[0]
            sid = gw.symbols[sym].id
            a = accts.get("acct0")
            for i in range(50):
                gw.submit(Request("new", a, "ouch:acct0", f"b{i}", sym, side=0,
                                  price=50 + i % 10, qty=1))
            await settle(gw)
            # a budget of 20 orders a second: the login's snapshot (50 orders) is sent whole
            # and leaves the port in debt for ~2.5 s
            fs = await feed_server.start(gw, "127.0.0.1", 0, snapshot_orders_per_s=20)
            port = fs.sockets[0].getsockname()[1]
            c = await FeedClient.connect("127.0.0.1", port, "feed", PASSWORD)
            await c.wait_synced(T)
            assert len(c.book(sid)) == 50
            c.request_snapshot()
            await c.wait_for(lambda: c.debug, T)
            assert b"budget" in c.debug[0]
            assert fs.refused_snapshots == 1 and fs.sessions
            gw.submit(Request("new", a, "ouch:acct0", "late", sym, side=0, price=51, qty=1))
            await c.wait_for(lambda: len(c.book(sid)) == 51, T)
            await c.close()
            fs.close()
            await fs.wait_closed()
    run(main())
