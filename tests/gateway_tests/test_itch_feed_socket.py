"""The ITCH-style feed over real sockets on 127.0.0.1: a client's book from snapshot and
incrementals equals the engine's visible book (for a client connected from the start and one
connected midway), re-requested snapshots resynchronise a gap, a slow reader is dropped while
another client keeps up and the gateway keeps trading, bad logins and silent clients are
refused or timed out. Every wait is bounded."""

from __future__ import annotations

import asyncio
import random
import socket
import struct

import pytest

from gw_fixtures import PASSWORD, make_accounts, running_gateway

from exsim.exchange import OrderType
from exsim.exchange.gateway import feed_server, itch
from exsim.exchange.gateway.client.itch import FeedClient, LoginRejected
from exsim.exchange.gateway.core import Request
from exsim.exchange.gateway.framing import FrameError, PacketType, frame, read_frame

T = 20   # seconds any one test may wait for the network


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


def random_requests(accounts, symbols, n, seed):
    """``n`` order requests of 4 accounts on ``symbols``: crossing limits, icebergs, stops,
    cancels and replaces (keeping or changing the price) of live client order ids."""
    rnd = random.Random(seed)
    live, out = [], []
    for i in range(n):
        acct = accounts.get(f"acct{rnd.randrange(4)}")
        sym = rnd.choice(symbols)
        mine = [x for x in live if x[0] is acct and x[1] == sym]
        r = rnd.random()
        cid = f"c{i}"
        stream = f"ouch:{acct.name}"
        if mine and r < 0.15:
            _, _, old = rnd.choice(mine)
            out.append(Request("cancel", acct, stream, cid, sym, orig_client_order_id=old))
        elif mine and r < 0.3:
            _, _, old = rnd.choice(mine)
            out.append(Request("replace", acct, stream, cid, sym, orig_client_order_id=old,
                               side=rnd.randrange(2), price=rnd.randint(98, 102),
                               qty=rnd.randint(1, 8)))
            live.append((acct, sym, cid))
        else:
            kw = dict(side=rnd.randrange(2), price=rnd.randint(97, 103), qty=rnd.randint(1, 6))
            if rnd.random() < 0.2:
                kw["display_qty"] = 1
            elif rnd.random() < 0.1:
                kw.update(order_type=OrderType.STOP_LIMIT, stop_price=rnd.randint(98, 102))
            out.append(Request("new", acct, stream, cid, sym, **kw))
            live.append((acct, sym, cid))
    return out


async def engine_books(gw, fs):
    """Return {sid: (seq, rows)} of the engine's visible books and the feed's seqs."""
    async with gw.engine_lock:
        out = {}
        for info in gw.symbols.values():
            o = gw.engine.orders(info.id)
            rows = list(zip(o["order_id"].tolist(), o["side"].tolist(), o["price"].tolist(),
                            o["qty"].tolist()))
            out[info.id] = (fs.builder.seq(info.id), rows)
        return out


async def assert_client_matches(client, gw, fs):
    want = await engine_books(gw, fs)
    await client.wait_for(lambda: all(client.seq(k) >= s for k, (s, _) in want.items()), T)
    for sid, (seq, rows) in want.items():
        assert client.seq(sid) == seq
        assert client.book(sid) == rows, f"symbol {sid}"


async def settle(gw, n_reports_stream=None):
    """Wait until the gateway's queue is empty and one more batch went through."""
    for _ in range(200):
        await asyncio.sleep(0.01)
        if gw._queue.empty():
            break
    async with gw.engine_lock:
        pass


def test_snapshot_and_incrementals_match_the_engine(tmp_path):
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            fs = await feed_server.start(gw, "127.0.0.1", 0)
            port = fs.sockets[0].getsockname()[1]
            syms = sorted(gw.symbols)
            early = await FeedClient.connect("127.0.0.1", port, "feed", PASSWORD,
                                             keep_messages=True)
            await early.wait_synced(T)
            reqs = random_requests(accts, syms, 600, seed=7)
            for r in reqs[:300]:
                gw.submit(r)
            await settle(gw)
            late = await FeedClient.connect("127.0.0.1", port, "acct1", PASSWORD)
            await late.wait_synced(T)
            await assert_client_matches(late, gw, fs)    # the snapshot alone
            for k, r in enumerate(reqs[300:]):
                gw.submit(r)
                if k % 50 == 0:
                    await asyncio.sleep(0.002)
            await settle(gw)
            for c in (early, late):
                await assert_client_matches(c, gw, fs)
                assert c.gaps == 0
            kinds = {type(m) for m in early.messages}
            assert {itch.AddOrder, itch.OrderExecuted, itch.OrderDelete,
                    itch.OrderReplace} <= kinds
            assert early.directory[gw.symbols[syms[0]].id].name == syms[0]
            assert fs.desyncs == 0
            await early.close()
            await late.close()
            fs.close()
            await fs.wait_closed()
    run(main())


def test_gap_is_resynchronised_by_a_snapshot_request(tmp_path):
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            fs = await feed_server.start(gw, "127.0.0.1", 0)
            port = fs.sockets[0].getsockname()[1]
            syms = sorted(gw.symbols)
            c = await FeedClient.connect("127.0.0.1", port, "feed", PASSWORD)
            await c.wait_synced(T)
            for r in random_requests(accts, syms, 100, seed=3):
                gw.submit(r)
            await settle(gw)
            await assert_client_matches(c, gw, fs)
            sid = gw.symbols[syms[0]].id
            # a message that skips a seq (as after a lost packet): never applied, and answered
            # by a snapshot request that brings the symbol back
            before = c.book(sid)
            c._on_message(itch.AddOrder(sid, c.seq(sid) + 2, 0, 10**9, 0, 5, 100))
            assert c.gaps == 1 and sid not in c.synced and c.book(sid) == before
            await c.wait_for(lambda: sid in c.synced, T)
            await assert_client_matches(c, gw, fs)
            # an explicit request of every symbol, and an unknown symbol id refused
            c.request_snapshot()
            c.request_snapshot(12345)
            await c.wait_for(lambda: c.debug, T)
            assert c.debug == [b"unknown symbol id"]
            await assert_client_matches(c, gw, fs)
            await c.close()
            fs.close()
            await fs.wait_closed()
    run(main())


async def raw_login(port, user, password):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(PacketType.LOGIN_REQUEST, feed_server.encode_login(user, password)))
    return reader, writer


async def stalled_login(port, user, password):
    """A plain socket (small receive buffer) that logs in and then reads nothing."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, frame(PacketType.LOGIN_REQUEST,
                                        feed_server.encode_login(user, password)))
    return sock


def test_slow_reader_is_dropped_without_stalling_others(tmp_path):
    async def main():
        accts = make_accounts()
        async with running_gateway(tmp_path, accts) as gw:
            fs = await feed_server.start(gw, "127.0.0.1", 0, max_buffer=16 << 10,
                                         sndbuf=8192)
            port = fs.sockets[0].getsockname()[1]
            syms = sorted(gw.symbols)
            good = await FeedClient.connect("127.0.0.1", port, "feed", PASSWORD)
            await good.wait_synced(T)
            # logs in and then never reads: its kernel buffers fill, then its session buffer
            slow = await stalled_login(port, "acct0", PASSWORD)
            await asyncio.sleep(0.1)
            assert len(fs.sessions) == 2
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            reqs = random_requests(accts, syms, 3000, seed=11)
            for k, r in enumerate(reqs):
                gw.submit(r)
                if k % 100 == 0:
                    await asyncio.sleep(0.001)
            await settle(gw)
            await assert_client_matches(good, gw, fs)
            assert loop.time() - t0 < T
            assert fs.dropped == 1 and len(fs.sessions) == 1
            # the slow one reads what reached it and then the end of the connection
            reader, writer = await asyncio.open_connection(sock=slow)
            with pytest.raises((ConnectionError, FrameError)):
                while True:
                    got = await read_frame(reader, max_size=1 << 16, idle_s=5)
                    if got is None:
                        raise ConnectionError("closed")
            writer.close()
            await good.close()
            fs.close()
            await fs.wait_closed()
    run(main())


def test_bad_logins_are_refused(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            fs = await feed_server.start(gw, "127.0.0.1", 0, login_timeout_s=0.3)
            port = fs.sockets[0].getsockname()[1]
            for user, pw in (("feed", "wrong"), ("nobody", PASSWORD), ("drop0", PASSWORD)):
                with pytest.raises(LoginRejected):   # drop0 has no marketdata role
                    await FeedClient.connect("127.0.0.1", port, user, pw, timeout=T)

            async def answer(payload_frame):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(payload_frame)
                try:
                    return await read_frame(reader, max_size=1 << 16, idle_s=T)
                finally:
                    writer.close()

            rejected = (PacketType.LOGIN_REJECTED, b"A")
            assert await answer(frame(PacketType.LOGIN_REQUEST, b"short")) == rejected
            assert await answer(frame(PacketType.CLIENT_HEARTBEAT)) == rejected
            assert await answer(struct.pack(">HB", 60000, PacketType.LOGIN_REQUEST)) is None
            assert await answer(b"") is None      # silent: closed after login_timeout_s
            assert not fs.sessions
            fs.close()
            await fs.wait_closed()
    run(main())


def test_heartbeats_and_idle_timeout(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            fs = await feed_server.start(gw, "127.0.0.1", 0, heartbeat_s=0.1, idle_s=0.6)
            port = fs.sockets[0].getsockname()[1]
            reader, writer = await raw_login(port, "feed", PASSWORD)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            types = []
            while True:
                got = await read_frame(reader, max_size=1 << 16, idle_s=T)
                if got is None:
                    break
                types.append(got[0])
            elapsed = loop.time() - t0
            assert types[0] == PacketType.LOGIN_ACCEPTED
            assert types.count(PacketType.SERVER_HEARTBEAT) >= 3
            assert 0.5 < elapsed < 3        # it sent nothing after its login: timed out
            # a client that heartbeats stays connected past the idle timeout
            c = await FeedClient.connect("127.0.0.1", port, "feed", PASSWORD, heartbeat_s=0.1)
            await asyncio.sleep(1.2)
            assert c.closed_reason is None and len(fs.sessions) == 1
            await c.close()
            writer.close()
            fs.close()
            await fs.wait_closed()
    run(main())
