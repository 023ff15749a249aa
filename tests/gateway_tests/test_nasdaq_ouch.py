"""OUCH 5.0 over SoupBinTCP 3.0 on real sockets, seen by a client written from NASDAQ's
published specs (nasdaq_spec: plain struct, no exsim import): login with 6+10-byte credentials,
System Event, Enter / Replace / Cancel answered by Accepted / Executed / Replaced / Canceled /
Rejected with the spec's reasons, heartbeats both ways, and a sequenced replay on re-login that
gives the same bytes. Every wait is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import struct

import pytest

from gw_fixtures import PASSWORD, running_gateway
from nasdaq_spec import OuchClient, cancel, enter, replace, soup, tlv

from exsim.exchange.gateway.nasdaq import ouch_server


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


@contextlib.asynccontextmanager
async def ouch50_port(tmp_path, **options):
    async with running_gateway(tmp_path) as gw:
        srv = await ouch_server.start(gw, "127.0.0.1", 0, **options)
        try:
            yield gw, srv
        finally:
            srv.close()
            await asyncio.wait_for(srv.wait_closed(), 5)


def n_msgs(n):
    return lambda c: len(c.msgs) >= n


def test_spec_client_logs_in_trades_and_gets_every_report(tmp_path):
    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            b = await OuchClient.login(srv.port, "acct1", PASSWORD)
            assert a.session == "EXSIM" and a.next_seq == 1
            await a.until(n_msgs(1))
            assert a.msgs[0]["type"] == b"S" and a.msgs[0]["event"] == b"S"
            # JPM: tick $0.01 -> 100 units of $0.0001
            a.send(enter(1, b"B", 10, "JPM", 1_000_000, clordid=b"BUY-ONE"))
            await a.until(n_msgs(2))
            acc = a.msgs[1]
            assert acc["type"] == b"A" and acc["user_ref"] == 1 and acc["qty"] == 10
            assert acc["price"] == 1_000_000 and acc["symbol"] == b"JPM     "
            assert acc["clordid"] == b"BUY-ONE       " and acc["state"] == b"L"
            assert acc["side"] == b"B" and acc["tif"] == b"0" and acc["order_ref"] > 0
            b.send(enter(1, b"S", 4, "JPM", 1_000_000))
            await b.until(n_msgs(3))
            await a.until(n_msgs(3))
            eb, ea = b.msgs[2], a.msgs[2]
            assert eb["type"] == ea["type"] == b"E"
            assert (eb["qty"], eb["price"], eb["liquidity"]) == (4, 1_000_000, b"R")
            assert (ea["qty"], ea["price"], ea["liquidity"]) == (4, 1_000_000, b"A")
            assert ea["match"] == eb["match"] and ea["match"] > 0
            # replace: 10 shares liable in total (4 executed) at $100.01 -> 6 outstanding
            a.send(replace(1, 2, 10, 1_000_100, clordid=b"MOVED"))
            await a.until(n_msgs(4))
            rp = a.msgs[3]
            assert rp["type"] == b"U" and (rp["orig_ref"], rp["user_ref"]) == (1, 2)
            assert (rp["qty"], rp["price"], rp["clordid"]) == (6, 1_000_100, b"MOVED".ljust(14))
            assert rp["order_ref"] == acc["order_ref"]
            a.send(cancel(2))
            await a.until(n_msgs(5))
            cx = a.msgs[4]
            assert (cx["type"], cx["user_ref"], cx["qty"], cx["reason"]) == (b"C", 2, 6, b"U")
            a.close()
            b.close()
    run(main())


def test_rejects_carry_the_spec_reasons(tmp_path):
    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            a.send(enter(5, b"B", 1, "JPM", 1_000_050, clordid=b"OFFTICK"),  # $100.005
                   enter(6, b"B", 1, "NOPE", 1_000_000),
                   enter(7, b"X", 1, "JPM", 1_000_000),
                   enter(8, b"B", 1_000_000, "JPM", 1_000_000),
                   enter(9, b"B", 1, "JPM", 1_000_000, display=b"N"),
                   enter(4, b"B", 1, "JPM", 1_000_000))   # not above 9: ignored (spec 1.2)
            await a.until(n_msgs(6))
            got = [(m["type"], m["user_ref"], m["reason"]) for m in a.msgs[1:]]
            assert got == [(b"J", 5, 0x1D), (b"J", 6, 0x17), (b"J", 7, 0x09), (b"J", 8, 0x13),
                           (b"J", 9, 0x04)]
            assert a.msgs[1]["clordid"] == b"OFFTICK".ljust(14)
            # a cancel of an order that is not live: Cancel Reject
            a.send(cancel(77))
            await a.until(n_msgs(7))
            assert (a.msgs[6]["type"], a.msgs[6]["user_ref"]) == (b"I", 77)
            await asyncio.sleep(0.3)
            assert len(a.msgs) == 7   # UserRefNum 4 made no message
            a.close()
    run(main())


def test_extras_map_to_appendages(tmp_path):
    """MaxFloor -> iceberg, IOC + MinQty == Quantity -> FOK, PostOnly, ExpireTime (GTT), and
    exsim's StopPrice extension tag 101."""
    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            a.send(enter(1, b"S", 10, "JPM", 1_010_000, app=tlv(5, struct.pack(">I", 2))),
                   enter(2, b"B", 50, "JPM", 1_010_000, tif=b"3",
                         app=tlv(3, struct.pack(">I", 50))),
                   enter(3, b"B", 5, "JPM", 1_010_000, app=tlv(12, b"P")),
                   enter(4, b"B", 5, "JPM", 980_000, tif=b"6", app=tlv(15, struct.pack(">I", 60))),
                   enter(5, b"B", 5, "JPM", 1_030_000, app=tlv(101, struct.pack(">Q", 1_020_000))))
            await a.until(n_msgs(6))
            kinds = [(m["type"], m["user_ref"]) for m in a.msgs[1:6]]
            assert kinds[0] == (b"A", 1)
            # FOK (IOC + MinQty == Quantity) that cannot fill whole: the engine refuses it
            assert kinds[1] == (b"J", 2) and a.msgs[2]["reason"] == 0x0F
            # post-only that would cross: rejected (Crossed Market)
            assert kinds[2] == (b"J", 3) and a.msgs[3]["reason"] == 0x12
            assert kinds[3] == (b"A", 4) and a.msgs[4]["tif"] == b"6"
            assert kinds[4] == (b"A", 5) and a.msgs[5]["appendage"] == tlv(
                101, struct.pack(">Q", 1_020_000))
            async with gw.engine_lock:
                stops = gw.engine.stops(gw.symbols["JPM"].id)
            assert [int(x) for x in stops["order_id"]] == [a.msgs[5]["order_ref"]]
            async with gw.engine_lock:
                o = gw.engine.orders(gw.symbols["JPM"].id)
            shown = {int(r["order_id"]): (int(r["qty"]), int(r["display_qty"])) for r in o}
            assert shown[a.msgs[1]["order_ref"]] == (2, 2)   # shows 2 of 10
            a.close()
    run(main())


def test_heartbeats_both_ways_and_idle_disconnect(tmp_path):
    async def main():
        async with ouch50_port(tmp_path, heartbeat_s=0.1, idle_s=0.6) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            for _ in range(8):   # 1.2 s, longer than idle_s: kept alive by client heartbeats
                a.heartbeat()
                await asyncio.sleep(0.15)
            await a.until(lambda c: sum(t == b"H" for t, _ in c.other) >= 3, 5)
            with pytest.raises(ConnectionError):   # silent past idle_s: disconnected
                await a.until(lambda c: False, 3)
    run(main())


def test_relogin_replays_the_same_bytes_from_a_sequence_number(tmp_path):
    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            a.send(enter(1, b"B", 3, "JPM", 1_000_000, clordid=b"K1"),
                   enter(2, b"S", 1, "JPM", 1_000_000), cancel(1))
            await a.until(n_msgs(6))
            live = [m["raw"] for m in a.msgs]
            a.writer.write(soup(b"O"))   # Logout Request
            a.close()
            again = await OuchClient.login(srv.port, "acct0", PASSWORD, seq=1)
            await again.until(n_msgs(6))
            assert [m["raw"] for m in again.msgs] == live
            mid = await OuchClient.login(srv.port, "acct0", PASSWORD, seq=4)
            assert mid.next_seq == 4
            await mid.until(n_msgs(3))
            assert [m["raw"] for m in mid.msgs] == live[3:]
            newest = await OuchClient.login(srv.port, "acct0", PASSWORD, seq=0)
            assert newest.next_seq == 7
            for c in (again, mid, newest):
                c.close()
    run(main())


def test_bad_logins_and_malformed_messages(tmp_path):
    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            with pytest.raises(PermissionError, match="A"):
                await OuchClient.login(srv.port, "acct0", "wrong")
            with pytest.raises(PermissionError, match="S"):
                await OuchClient.login(srv.port, "acct0", PASSWORD, session="OTHER")
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            a.send(b"Zjunk", enter(1, b"B", 1, "JPM", 1_000_000)[:30],
                   enter(2, b"B", 1, "JPM", 1_000_000) + b"\x05")
            await a.until(lambda c: sum(t == b"+" for t, _ in c.other) >= 3, 5)
            a.send(enter(3, b"B", 1, "JPM", 1_000_000))
            await a.until(n_msgs(2))
            assert a.msgs[1]["type"] == b"A" and a.msgs[1]["user_ref"] == 3
            a.close()
    run(main())


def test_a_restarted_server_replays_the_same_bytes_with_the_clordids(tmp_path):
    async def session(n_expected, orders=()):
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD, seq=1)
            a.send(*orders)
            await a.until(n_msgs(n_expected))
            a.close()
            return [m["raw"] for m in a.msgs]

    async def main():
        first = await session(4, [enter(1, b"B", 3, "JPM", 1_000_000, clordid=b"KEEP-ME"),
                                  enter(2, b"S", 1, "JPM", 1_000_000, clordid=b"AND-ME")])
        again = await session(4)   # a new gateway process on the same data directory
        assert again == first
        assert b"KEEP-ME" in again[1] and b"AND-ME" in again[2]
    run(main())
    # a day served over OUCH 5.0 is a run like any other
    from exsim.replay.cli import main as cli
    assert cli(["verify", str(tmp_path)]) == 0
    assert cli(["rerun", str(tmp_path)]) == 0


def test_a_cancel_with_quantity_reduces_and_keeps_the_place(tmp_path):
    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            b = await OuchClient.login(srv.port, "acct1", PASSWORD)
            a.send(enter(1, b"B", 10, "JPM", 1_000_000), enter(2, b"B", 5, "JPM", 1_000_000))
            await a.until(n_msgs(3))
            a.send(cancel(1, 6))           # at most 6 shares in total from now on
            await a.until(n_msgs(4))
            assert (a.msgs[3]["type"], a.msgs[3]["user_ref"], a.msgs[3]["qty"],
                    a.msgs[3]["reason"]) == (b"C", 1, 4, b"U")
            b.send(enter(1, b"S", 2, "JPM", 1_000_000))   # order 1 kept its place: first
            await a.until(n_msgs(5))
            assert (a.msgs[4]["type"], a.msgs[4]["user_ref"], a.msgs[4]["qty"]) == (b"E", 1, 2)
            a.send(cancel(1, 1))           # below what executed: refused, order untouched
            await a.until(n_msgs(6))
            assert (a.msgs[5]["type"], a.msgs[5]["user_ref"]) == (b"I", 1)
            a.send(cancel(1))              # the rest (4) goes
            await a.until(n_msgs(7))
            assert (a.msgs[6]["type"], a.msgs[6]["user_ref"], a.msgs[6]["qty"]) == (b"C", 1, 4)
            a.close()
            b.close()
    run(main())


def test_modify_order_reduces_and_is_answered_by_order_modified(tmp_path):
    from nasdaq_spec import modify

    async def main():
        async with ouch50_port(tmp_path) as (gw, srv):
            a = await OuchClient.login(srv.port, "acct0", PASSWORD)
            a.send(enter(1, b"S", 10, "JPM", 1_000_000))
            await a.until(n_msgs(2))
            a.send(modify(1, b"T", 12),   # larger: ignored (spec 2.4)
                   modify(1, b"T", 7))    # sell -> sell short, 7 shares in total
            await a.until(n_msgs(3))
            m = a.msgs[2]
            assert (m["type"], m["user_ref"], m["side"], m["qty"]) == (b"M", 1, b"S", 7)
            a.send(modify(1, b"S", 0))    # zero: cancel the rest
            await a.until(n_msgs(4))
            assert (a.msgs[3]["type"], a.msgs[3]["qty"], a.msgs[3]["reason"]) == (b"C", 7, b"U")
            assert any(t == b"+" for t, _ in a.other)   # the ignored Modify was told
            a.close()
    run(main())
