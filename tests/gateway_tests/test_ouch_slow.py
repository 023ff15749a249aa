"""A client that does not read its socket, or goes silent, never stalls another session: the
slow one is disconnected (bounded backlog) or timed out, and can reconnect and replay."""

from __future__ import annotations

import asyncio

from ouch_fixtures import login, ouch_port, raw_login, run

from exsim.exchange.gateway import ouch
from exsim.exchange.gateway.framing import PacketType, frame
from exsim.exchange.schema import OrderType, Side, Tif


def _enter(token: str, price: int) -> bytes:
    return frame(PacketType.UNSEQUENCED, ouch.ENTER.pack(
        token=token, side=Side.BUY, qty=1, symbol="JPM", price=price, order_type=OrderType.LIMIT,
        tif=Tif.GTC, display_qty=0, min_qty=0, stop_price=0, expire_ts=0, post_only=False))


async def _round_trips(client, n: int, prefix: str) -> float:
    """Enter n orders one after another; return the slowest acknowledgement in seconds."""
    loop = asyncio.get_running_loop()
    worst = 0.0
    for i in range(n):
        t0 = loop.time()
        await client.enter(f"{prefix}{i}", "BTCUSD", Side.SELL, 1, 130000 + i)
        m = await client.recv(5.0)
        assert (m.kind, m.msg.token) == ("Accepted", f"{prefix}{i}")
        worst = max(worst, loop.time() - t0)
    return worst


async def _flood_unread(srv, gw, n: int, *, heartbeat: bool = False):
    """Log in as acct0 with a tiny receive buffer, send n orders and never read; return (the
    server's session, writer, heartbeat task or None) once the core has answered them all or
    the session was dropped (its orders not yet read are then never read)."""
    reader, writer, _ = await raw_login(srv, "acct0", rcvbuf=2048)
    session = [s for s in srv.sessions if s.account and s.account.name == "acct0"][0]
    writer.write(b"".join(_enter(f"F{i}", 1000 + i % 100) for i in range(n)))
    beat = None
    if heartbeat:                     # it keeps its read side alive: only its reading stalls
        async def beats():
            while True:
                writer.write(frame(PacketType.CLIENT_HEARTBEAT))
                await asyncio.sleep(0.2)
        beat = asyncio.ensure_future(beats())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while gw.stream_head("ouch:acct0") < n and not session.closed and loop.time() - t0 < 60:
        await asyncio.sleep(0.05)
    return session, writer, beat


def test_a_reader_whose_backlog_passes_the_bound_is_dropped_and_can_replay(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", max_queued_reports=200, idle_s=30) as (gw, srv):
            other = await login(srv, "acct1")
            slow, writer, _ = await _flood_unread(srv, gw, 5000)
            await asyncio.sleep(0.2)                # the batch in flight is answered
            assert slow.closed                      # by its backlog, long before idle_s
            head = gw.stream_head("ouch:acct0")
            assert slow.sent_rseq < head and head > 200
            assert await _round_trips(other, 10, "O") < 1.0
            # it reconnects and replays what it missed, from its own sequence number
            c = await login(srv, "acct0", seq=head - 4)
            got = [await c.recv() for _ in range(5)]
            assert [(m.seq, m.kind) for m in got] == [(q, "Accepted")
                                                      for q in range(head - 4, head + 1)]
            assert got[-1].msg.token == f"F{head - 1}"
            writer.close()
            await c.close()
            await other.close()
    run(main(), 120)


def test_a_stalled_reader_does_not_delay_another_session_and_is_dropped(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", max_queued_reports=10 ** 6, idle_s=2.0,
                             heartbeat_s=0.2, sndbuf=8192) as (gw, srv):
            other = await login(srv, "acct1", heartbeat_s=0.2)
            slow, writer, beat = await _flood_unread(srv, gw, 5000, heartbeat=True)
            # its sender is blocked on its socket: reports wait, the session is still there
            assert gw.stream_head("ouch:acct0") == 5000
            assert not slow.closed and slow.sent_rseq < 5000
            assert slow.transport.get_write_buffer_size() > 0
            assert await _round_trips(other, 20, "S") < 0.5
            assert not slow.closed
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            while not slow.closed and loop.time() - t0 < 10:
                await asyncio.sleep(0.05)
            assert slow.closed and loop.time() - t0 < 4      # the drain deadline (idle_s)
            beat.cancel()
            writer.close()
            await other.close()
    run(main(), 120)


def test_a_half_open_client_is_timed_out_while_others_trade(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", idle_s=0.8, heartbeat_s=0.2) as (gw, srv):
            other = await login(srv, "acct1", heartbeat_s=0.2)
            # logged in, then silent: neither sends nor reads (a peer that vanished)
            reader, writer, _ = await raw_login(srv, "acct0")
            ghost = [s for s in srv.sessions if s.account and s.account.name == "acct0"][0]
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            worst = await _round_trips(other, 10, "H")
            while not ghost.closed and loop.time() - t0 < 5:
                await asyncio.sleep(0.05)
            assert ghost.closed and loop.time() - t0 < 3
            assert worst < 1.0
            assert ghost not in srv.sessions or ghost.closed
            assert await _round_trips(other, 3, "J") < 1.0
            writer.close()
            await other.close()
    run(main())
