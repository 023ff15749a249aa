"""The binary port over real sockets: every message type, login rules, replay by sequence
number (also after a restart), heartbeats, timeouts, logout, rate limit, bad messages."""

from __future__ import annotations

import asyncio

import pytest
from gw_fixtures import PASSWORD, make_accounts
from ouch_fixtures import login, ouch_port, raw_connect, raw_login, read_until_quiet, run

from exsim.exchange.gateway import ouch
from exsim.exchange.gateway.client.ouch import LoginRejected, SessionClosed
from exsim.exchange.gateway.framing import PacketType, frame
from exsim.exchange.gateway.ouch import OuchReason
from exsim.exchange.schema import OrderType, Reason, Side, Tif


def _kinds(received):
    return [r.kind for r in received]


def test_every_message_type_round_trips(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d") as (gw, srv):
            a, b = await login(srv, "acct0"), await login(srv, "acct1")
            await a.enter("A1", "JPM", Side.BUY, 10, 15000)
            acc = await a.recv()
            assert (acc.seq, acc.kind) == (1, "Accepted")
            assert (acc.msg.token, acc.msg.qty, acc.msg.price, acc.msg.leaves_qty,
                    acc.msg.side, acc.msg.symbol) == ("A1", 10, 15000, 10, Side.BUY, "JPM")
            await b.enter("B1", "JPM", Side.SELL, 4, 15000)
            got = await b.recv_until(lambda m: m.kind == "Executed")
            assert _kinds(got) == ["Accepted", "Executed"]
            fill_a = await a.recv()
            assert fill_a.kind == "Executed" and fill_a.seq == 2
            assert (fill_a.msg.qty, fill_a.msg.price, fill_a.msg.cum_qty,
                    fill_a.msg.leaves_qty) == (4, 15000, 4, 6)
            assert fill_a.msg.match_number == got[-1].msg.match_number > 0

            await a.replace("A1", "A2", 8, 14999)           # total 8: 4 filled + 4 open
            rep = await a.recv()
            assert rep.kind == "Replaced"
            assert (rep.msg.token, rep.msg.orig_token, rep.msg.qty, rep.msg.price,
                    rep.msg.cum_qty, rep.msg.leaves_qty) == ("A2", "A1", 8, 14999, 4, 4)
            await a.replace("NOPE", "A3", 8, 14998)         # no order has this token
            rej = await a.recv()
            # why two reasons: the core sends an unknown token's request with no symbol, and
            # the engine checks the symbol first
            assert (rej.kind, rej.msg.request, rej.msg.token, rej.msg.orig_token) == (
                "CancelReject", "replace", "A3", "NOPE")
            assert rej.msg.reason in (Reason.UNKNOWN_SYMBOL, Reason.UNKNOWN_ID)
            await a.cancel("A2")
            can = await a.recv()
            assert (can.kind, can.msg.token, can.msg.cum_qty, can.msg.reason) == (
                "Canceled", "A2", 4, Reason.USER_CANCEL)
            await a.cancel("A2")
            rej = await a.recv()
            assert (rej.kind, rej.msg.request, rej.msg.reason) == (
                "CancelReject", "cancel", Reason.UNKNOWN_ID)

            await a.enter("A4", "JPM", Side.BUY, 1, 0)      # a limit at price 0
            rej = await a.recv()
            assert (rej.kind, rej.msg.token, rej.msg.reason) == ("Rejected", "A4",
                                                                  Reason.BAD_PRICE)
            await a.enter("A1", "JPM", Side.BUY, 1, 15000)  # a token used before
            rej = await a.recv()
            assert (rej.kind, rej.seq is not None, rej.msg.reason) == (
                "Rejected", True, OuchReason.DUPLICATE_TOKEN)
            await a.enter("A5", "JPM", Side.BUY, 1, 14000, tif=Tif.IOC)
            got = await a.recv_until(lambda m: m.kind == "Canceled")
            assert got[-1].msg.reason == Reason.IOC_UNFILLED

            # a buy stop above the last trade (15000), released by a trade at 15001
            await a.enter("S1", "JPM", Side.BUY, 2, 0, order_type=OrderType.STOP,
                          stop_price=15001)
            assert (await a.recv()).kind == "Accepted"
            await b.enter("B2", "JPM", Side.SELL, 1, 15001)
            await a.enter("A6", "JPM", Side.BUY, 1, 15001)
            got = await a.recv_until(lambda m: m.kind == "Triggered")
            assert got[-1].msg.token == "S1"

            # a GTD order expires once the engine's clock (a later message) passes its expiry
            await a.enter("G1", "BTCUSD", Side.BUY, 1, 100000, tif=Tif.GTD,
                          expire_ts=gw.now_ns() + 50_000_000)
            got = await a.recv_until(lambda m: m.msg.token == "G1")
            assert got[-1].kind == "Accepted"
            await asyncio.sleep(0.1)
            await b.enter("B3", "BTCUSD", Side.SELL, 1, 130000)
            got = await a.recv_until(lambda m: m.msg.token == "G1")
            assert (got[-1].kind, got[-1].msg.reason) == ("Canceled", Reason.EXPIRED)
            seqs = [a_.seq for a_ in got]
            assert seqs == sorted(seqs)
            await a.logout()
            await b.logout()
    run(main())


def test_login_refusals(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", session="DAY1") as (gw, srv):
            for name, pw in (("acct0", "wrong"), ("nobody", PASSWORD), ("feed", PASSWORD)):
                with pytest.raises(LoginRejected) as e:
                    await login(srv, name, password=pw)
                assert e.value.code == "A"
            with pytest.raises(LoginRejected) as e:
                await login(srv, "acct0", session="DAY2")
            assert e.value.code == "S"
            c = await login(srv, "acct0", session="DAY1")
            assert c.session == "DAY1"
            await c.close()
            # a malformed login (short payload) is rejected and closed
            reader, writer = await raw_connect(srv)
            writer.write(frame(PacketType.LOGIN_REQUEST, b"acct0"))
            packets, closed = await read_until_quiet(reader, 2.0)
            assert closed and packets == [(PacketType.LOGIN_REJECTED, b"A")]
            writer.close()
    run(main())


def test_before_login_anything_else_or_silence_disconnects(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", login_timeout_s=0.3) as (gw, srv):
            reader, writer = await raw_connect(srv)
            writer.write(frame(PacketType.UNSEQUENCED, ouch.CANCEL.pack(token="X")))
            packets, closed = await read_until_quiet(reader, 2.0)
            assert closed and packets == []
            reader, writer = await raw_connect(srv)
            t0 = asyncio.get_running_loop().time()
            packets, closed = await read_until_quiet(reader, 3.0)
            assert closed and packets == []
            assert asyncio.get_running_loop().time() - t0 < 2.0
            assert not srv.sessions
    run(main())


async def _trade_some(a, b):
    """Enter, fill twice, replace, cancel, a reject: 6 reports on a's stream, in this order."""
    await a.enter("A1", "JPM", Side.BUY, 10, 15000)
    first = await a.recv()
    await b.enter("B1", "JPM", Side.SELL, 3, 15000)
    await b.enter("B2", "JPM", Side.SELL, 2, 15000)
    await b.recv_until(lambda m: m.kind == "Executed" and m.msg.token == "B2")
    await a.replace("A1", "A2", 9, 15000)
    got = await a.recv_until(lambda m: m.kind == "Replaced")
    # why wait: the core learns the new token when the replace's batch is done
    await a.cancel("A2")
    await a.enter("A3", "JPM", Side.SELL, 1, 0)
    got += await a.recv_until(lambda m: m.msg.token == "A3")
    assert [m.seq for m in got] == list(range(2, 7))
    assert _kinds(got) == ["Executed", "Executed", "Replaced", "Canceled", "Rejected"]
    assert (first.seq, first.kind) == (1, "Accepted")
    return [first] + got


def test_login_replays_from_the_requested_sequence_number(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d") as (gw, srv):
            a, b = await login(srv, "acct0"), await login(srv, "acct1")
            live = await _trade_some(a, b)
            for seq, want in ((1, live), (3, live[2:]), (6, live[5:])):
                c = await login(srv, "acct0", seq=seq)
                assert c.next_seq == seq
                got = [await c.recv() for _ in want]
                assert got == want
                with pytest.raises(asyncio.TimeoutError):
                    await c.recv(0.2)
                await c.close()
            for k, seq in enumerate((0, None, 10 ** 6)):   # from now on, the end, past it
                head = gw.stream_head("ouch:acct0")
                assert head == 6 + k
                c = await login(srv, "acct0", seq=head + 1 if seq is None else seq)
                assert c.next_seq == head + 1
                with pytest.raises(asyncio.TimeoutError):
                    await c.recv(0.2)
                await a.enter(f"N{seq}", "JPM", Side.BUY, 1, 1)
                new = await c.recv()
                assert (new.seq, new.msg.token) == (c.next_seq - 1, f"N{seq}")
                assert await a.recv() == new   # every session of the account sees it
                await c.close()
    run(main())


def test_reconnect_resumes_without_gap_or_repeat(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d") as (gw, srv):
            a, b = await login(srv, "acct0"), await login(srv, "acct1")
            await a.enter("A1", "JPM", Side.BUY, 10, 15000)
            assert (await a.recv()).seq == 1
            await a.close()
            for i in range(5):                       # fills a does not see while away
                await b.enter(f"B{i}", "JPM", Side.SELL, 1, 15000)
            await b.recv_until(lambda m: m.msg.token == "B4" and m.kind == "Executed")
            assert await a.reconnect() == 2
            got = [await a.recv() for _ in range(5)]
            assert [m.seq for m in got] == [2, 3, 4, 5, 6]
            assert [m.msg.cum_qty for m in got] == [1, 2, 3, 4, 5]
            with pytest.raises(asyncio.TimeoutError):
                await a.recv(0.2)
            await a.logout()
            await b.logout()
    run(main())


def test_replay_after_a_restart_is_byte_identical(tmp_path):
    async def sequenced(srv):
        reader, writer, first = await raw_login(srv, "acct0", seq=1)
        packets, _ = await read_until_quiet(reader, 0.5)
        writer.close()
        assert first == 1
        return [p for t, p in packets if t == PacketType.SEQUENCED]

    async def main():
        async with ouch_port(tmp_path / "d") as (gw, srv):
            a, b = await login(srv, "acct0"), await login(srv, "acct1")
            await _trade_some(a, b)
            before = await sequenced(srv)
            await a.close()
            await b.close()
        assert len(before) == 6
        async with ouch_port(tmp_path / "d") as (gw, srv):
            after = await sequenced(srv)
            assert after == before
            # and the stream goes on from 7 after the restart
            c = await login(srv, "acct0", seq=0)
            assert c.next_seq == 7
            await c.enter("R1", "JPM", Side.BUY, 1, 1)
            assert (await c.recv()).seq == 7
            await c.close()
    run(main())


def test_heartbeats_idle_timeout_logout_and_end_of_session(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", heartbeat_s=0.1, idle_s=0.6) as (gw, srv):
            reader, writer, _ = await raw_login(srv, "acct0")
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            packets, closed = await read_until_quiet(reader, 2.0)
            # a silent client gets heartbeats, then is dropped after idle_s
            assert closed and len(packets) >= 3
            assert {t for t, _ in packets} == {PacketType.SERVER_HEARTBEAT}
            assert 0.5 < loop.time() - t0 < 1.5
            # a client that heartbeats stays
            c = await login(srv, "acct1", heartbeat_s=0.1)
            await asyncio.sleep(1.2)
            await c.enter("C1", "JPM", Side.BUY, 1, 15000)
            assert (await c.recv()).kind == "Accepted"
            # logout: the server closes
            reader, writer, _ = await raw_login(srv, "acct2")
            writer.write(frame(PacketType.LOGOUT_REQUEST))
            packets, closed = await read_until_quiet(reader, 2.0)
            assert closed and PacketType.END_OF_SESSION not in {t for t, _ in packets}
            # end of session: the server stops
            srv.close()
            with pytest.raises(SessionClosed):
                await c.recv(2.0)
            assert c.ended
    run(main())


def test_rate_limit_answers_with_unsequenced_rejects(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d", make_accounts(rate=5)) as (gw, srv):
            a = await login(srv, "acct0")
            for i in range(20):
                await a.enter(f"R{i}", "JPM", Side.BUY, 1, 14000)
            got = [await a.recv() for _ in range(20)]
            limited = [m for m in got if m.seq is None]
            assert all(m.kind == "Rejected" and m.msg.reason == OuchReason.RATE_LIMITED
                       for m in limited)
            assert 13 <= len(limited) <= 15                     # a burst of 5 (and refills)
            assert {m.msg.token for m in limited} <= {f"R{i}" for i in range(20)}
            assert [m.seq for m in got if m.seq is not None] == list(range(1, 21 - len(limited)))
            await asyncio.sleep(1.0)                           # the bucket refills
            await a.enter("LATER", "JPM", Side.BUY, 1, 14000)
            m = await a.recv()
            assert (m.kind, m.msg.token) == ("Accepted", "LATER")
            await a.close()
    run(main())


def test_bad_messages_get_unsequenced_rejects_and_the_session_goes_on(tmp_path):
    async def main():
        async with ouch_port(tmp_path / "d") as (gw, srv):
            a = await login(srv, "acct0")
            good = ouch.ENTER.pack(token="OK1", side=Side.BUY, qty=1, symbol="JPM",
                                   price=15000, order_type=OrderType.LIMIT, tif=Tif.GTC,
                                   display_qty=0, min_qty=0, stop_price=0, expire_ts=0,
                                   post_only=False)
            bad_side = good[:15] + b"Q" + good[16:]
            cases = [(b"", OuchReason.MALFORMED, ""), (b"?abc", OuchReason.UNKNOWN_TYPE, ""),
                     (good[:-1], OuchReason.MALFORMED, ""),
                     (bad_side, OuchReason.BAD_FIELD, "OK1")]
            for payload, reason, token in cases:
                await a.send(payload)
                m = await a.recv()
                assert (m.seq, m.kind, m.msg.reason, m.msg.token) == (None, "Rejected", reason,
                                                                       token)
            await a.send(b"debug text", PacketType.DEBUG)
            await a.send(good)
            m = await a.recv()
            assert (m.seq, m.kind, m.msg.token) == (1, "Accepted", "OK1")
            # a second login on a logged-in connection is a protocol violation: disconnect
            await a.send(ouch.encode_login("acct0", PASSWORD), PacketType.LOGIN_REQUEST)
            with pytest.raises(SessionClosed):
                await a.recv(2.0)
    run(main())
