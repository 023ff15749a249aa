"""TotalView-ITCH 5.0 over MoldUDP64 (loopback unicast, with lost packets re-requested) and over
SoupBinTCP, decoded by nasdaq_spec (written from the published specs, no exsim import): a book
built only from the feed equals the engine's visible book after every engine message, the
SoupBinTCP stream carries the same bytes, and NOII / Cross Trade / Trading Action / Add Order
with MPID have the spec's layouts. Every wait is bounded."""

from __future__ import annotations

import asyncio
import socket
import struct
from decimal import Decimal

import pytest

from gw_fixtures import PASSWORD, running_gateway
from nasdaq_spec import ItchBook, OuchClient, decode_itch, mold_decode, mold_request
from test_itch_feed_socket import random_requests

from exsim.exchange.gateway import itch as xitch
from exsim.exchange.gateway.core import Request
from exsim.exchange.gateway.nasdaq import itch50, itch_server
from exsim.exchange.schema import Phase


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 90))


class Receiver(asyncio.DatagramProtocol):
    """A MoldUDP64 listener that loses every ``lose``-th live packet and re-requests gaps."""

    def __init__(self, lose=0):
        self.msgs, self.next_expected, self.lose, self.live = {}, 1, lose, 0
        self.session = None
        self.requests = self.answers = 0
        self.mold_port = -1

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        session, seq, count, msgs = mold_decode(data)
        self.session = session
        if count in (0, 0xFFFF):
            self.next_expected = max(self.next_expected, seq)
            return
        if addr[1] == self.mold_port:
            self.answers += 1
        else:
            self.live += 1
            if self.lose and self.live % self.lose == 0:
                return   # lost on the way
        for i, m in enumerate(msgs):
            self.msgs[seq + i] = m
        self.next_expected = max(self.next_expected, seq + len(msgs))

    async def complete(self, upto, timeout=10):
        """Re-request until messages 1..upto-1 are all here."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            missing = [s for s in range(1, upto) if s not in self.msgs]
            if not missing:
                return
            assert loop.time() < end, f"messages {missing[:5]} never arrived"
            self.requests += 1
            self.transport.sendto(mold_request(self.session or "EXSIMITCH", missing[0],
                                               len(missing)), ("127.0.0.1", self.mold_port))
            await asyncio.sleep(0.02)


def requests(accounts, n, seed):
    """The feed socket test's random flow (crossing limits, icebergs, stops, cancels,
    replaces), then a reduction that keeps price and place (an Order Cancel, X)."""
    out = random_requests(accounts, ["JPM", "BTCUSD"], n, seed)
    # a reduction keeping price and place: Order Cancel (X)
    acct = accounts.get("acct0")
    out += [Request("new", acct, "ouch:acct0", "x1", "JPM", side=0, price=90, qty=5),
            Request("replace", acct, "ouch:acct0", "x2", "JPM", orig_client_order_id="x1",
                    price=90, qty=2)]
    return out


def engine_rows(gw, name):
    """The engine's visible book of ``name`` as (side byte, ITCH price, shares)."""
    info = gw.symbols[name]
    mult = int(Decimal(info.tick_size) * 10000)
    o = gw.engine.orders(info.id)
    return [(b"S" if s else b"B", p * mult, q) for s, p, q in
            zip(o["side"].tolist(), o["price"].tolist(), o["qty"].tolist())]


def test_itch_book_from_moldudp64_equals_the_engine_after_every_message(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            loop = asyncio.get_running_loop()
            rt, rx = await loop.create_datagram_endpoint(lambda: Receiver(lose=4),
                                                         local_addr=("127.0.0.1", 0))
            srv = await itch_server.start(gw, destinations=[rt.get_extra_info("sockname")],
                                          port=0, mold_port=0, heartbeat_s=0.2)
            rx.mold_port = srv.mold_port
            book, applied = ItchBook(), 0
            try:
                await rx.complete(srv.feed.next_seq)
                for req in requests(gw.accounts, 150, seed=38):
                    await gw.submit(req)
                    async with gw.engine_lock:   # the batch's market listener has run
                        want = {n: engine_rows(gw, n) for n in gw.symbols}
                        upto = srv.feed.next_seq
                    await rx.complete(upto)
                    while applied < upto - 1:
                        applied += 1
                        book.apply(decode_itch(rx.msgs[applied]))
                    for loc, name in book.stocks.items():
                        assert book.rows(loc) == want[name], (name, applied)
                assert rx.requests > 0   # gaps happened and were filled
                kinds = {decode_itch(m)["type"] for m in rx.msgs.values()}
                assert {b"A", b"E", b"X", b"D", b"U"} <= kinds, kinds
                # the same stream over SoupBinTCP, byte for byte
                c = await OuchClient.login(srv.soup_port, "feed", PASSWORD, seq=1)
                got = []
                while len(got) < upto - 1:
                    t, p = await c.packet(5)
                    if t == b"S":
                        got.append(p)
                assert got == [rx.msgs[s] for s in range(1, upto)]
                c.close()
            finally:
                srv.close()
                await srv.wait_closed()
                rt.close()
    run(main())


def test_start_of_day_lists_the_symbols_and_the_resting_orders(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            acct = gw.accounts.get("acct0")
            await gw.submit(Request("new", acct, "ouch:acct0", "r1", "JPM", side=0,
                                    price=10100, qty=5))   # $101.00 (tick $0.01)
            srv = await itch_server.start(gw, "127.0.0.1", 0, mpid=True)
            try:
                c = await OuchClient.login(srv.soup_port, "feed", PASSWORD, seq=0)
                assert c.next_seq == srv.feed.next_seq
                c.close()
                msgs = [decode_itch(m) for m in srv.feed.get(1, 100)]
                kinds = [m["type"] for m in msgs]
                assert kinds[:2] == [b"S", b"S"] and msgs[0]["event"] == b"O"
                dirs = {m["stock"].strip(): m["locate"] for m in msgs if m["type"] == b"R"}
                assert dirs == {b"JPM": 1, b"BTCUSD": 2}
                adds = [m for m in msgs if m["type"] == b"F"]
                assert [(a["locate"], a["side"], a["shares"], a["price"], a["mpid"])
                        for a in adds] == [(1, b"B", 5, 1_010_000, b"F0  ")]
                assert adds[0]["ref"] == gw.order_state(adds[0]["ref"]).order_id
            finally:
                srv.close()
                await srv.wait_closed()
    run(main())


def test_auction_messages_have_the_spec_layouts(tmp_path):
    """Trading Action, NOII and Cross Trade from exsim's own feed tuples, read back with the
    independent decoder."""
    async def main():
        async with running_gateway(tmp_path) as gw:
            tr = itch50.Translator(gw.symbols)
            sid = gw.symbols["JPM"].id
            out = tr.translate([
                xitch.TradingPhase(sid, 1, 5, Phase.PRE_OPEN, 0, 100),
                xitch.Indicative(sid, 2, 6, Phase.PRE_OPEN, 101, 300, -40),
                xitch.Cross(sid, 3, 7, Phase.OPENING_AUCTION, 101, 300, -40),
                xitch.TradingPhase(sid, 4, 8, Phase.CONTINUOUS, 97, 101)])
            h, noii, q, h2 = map(decode_itch, out)
            assert (h["type"], h["state"], h["stock"], h["ts"]) == (b"H", b"Q", b"JPM     ", 5)
            assert (noii["paired"], noii["imbalance"], noii["direction"]) == (300, 40, b"S")
            assert (noii["near"], noii["cross"]) == (10_100, b"O")   # 101 ticks of $0.01
            assert (q["type"], q["shares"], q["price"], q["cross"]) == (b"Q", 300, 10_100, b"O")
            assert (h2["state"], h2["reason"]) == (b"T", b"LUDP")
    run(main())


def test_moldudp64_on_loopback_multicast(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            grp = "239.255.38.1"
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("", 0))
            port = sock.getsockname()[1]
            try:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                                struct.pack("4s4s", socket.inet_aton(grp),
                                            socket.inet_aton("127.0.0.1")))
            except OSError as e:   # a machine whose loopback takes no multicast
                sock.close()
                pytest.skip(f"no loopback multicast here: {e}")
            loop = asyncio.get_running_loop()
            rt, rx = await loop.create_datagram_endpoint(Receiver, sock=sock)
            rx.mold_port = -1
            srv = await itch_server.start(gw, "127.0.0.1", None, multicast=(grp, port))
            try:
                for _ in range(250):   # no re-request server here: wait for the packets
                    if len(rx.msgs) >= srv.feed.next_seq - 1:
                        break
                    await asyncio.sleep(0.02)
                assert sorted(rx.msgs) == list(range(1, srv.feed.next_seq))
                assert rx.session == "EXSIMITCH"
                assert decode_itch(rx.msgs[1])["event"] == b"O"
            finally:
                srv.close()
                await srv.wait_closed()
                rt.close()
    run(main())


def test_feed_logins_rerequests_and_retention_are_bounded(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            loop = asyncio.get_running_loop()
            srv = await itch_server.start(gw, "127.0.0.1", 0, max_retained=5,
                                          requests_per_s=2)
            rt, rx = await loop.create_datagram_endpoint(Receiver, local_addr=("127.0.0.1", 0))
            try:
                # an account without the marketdata role, a wrong password, another session
                for user, pw, session in (("drop0", PASSWORD, ""), ("feed", "nope", ""),
                                          ("feed", PASSWORD, "OTHER")):
                    try:
                        await OuchClient.login(srv.soup_port, user, pw, session=session)
                        raise AssertionError("logged in")
                    except PermissionError as e:
                        assert str(e) == ("S" if session else "A")
                # only the last 5 messages are kept: a login from 1 starts at the oldest kept
                assert srv.feed.next_seq > 6 and srv.feed.base == srv.feed.next_seq - 5
                c = await OuchClient.login(srv.soup_port, "feed", PASSWORD, seq=1)
                assert c.next_seq == srv.feed.base
                c.close()
                # re-requests: 2 a second per address; nothing for what is gone or not yet
                # sent, nor for another session
                rx.mold_port = srv.mold_port
                dest = ("127.0.0.1", srv.mold_port)
                rt.sendto(mold_request("WRONG", srv.feed.base, 10), dest)
                for seq in (srv.feed.base, 1, srv.feed.base, srv.feed.base):
                    rt.sendto(mold_request("EXSIMITCH", seq, 10), dest)
                await asyncio.sleep(0.3)
                assert rx.answers == 1
                assert sorted(rx.msgs) == list(range(srv.feed.base, srv.feed.next_seq))
            finally:
                srv.close()
                await srv.wait_closed()
                rt.close()
    run(main())


BAND_SCENARIO = """\
description = "one symbol with a dynamic band and a 0.3 s volatility interruption"
generator = "uniform"
seed = 1

[params]
n = 1

[[symbols]]
name = "XETR"
tick_size = 0.01
reference_price = 10_000
dynamic_band_bps = 100
interruption_ns = 300_000_000
"""


def test_a_volatility_auction_on_the_feed(tmp_path):
    """A trade 3% away interrupts trading: Trading Action Q (LUDP), Add Order in the call,
    NOII, then by the clock the Cross Trade with its non-printable executions and Trading
    Action T; the ITCH book equals the engine's after each step."""
    scenario = tmp_path / "band.toml"
    scenario.write_text(BAND_SCENARIO)

    async def main():
        async with running_gateway(tmp_path / "d", scenario=str(scenario)) as gw:
            srv = await itch_server.start(gw, "127.0.0.1", None)
            a0, a1 = gw.accounts.get("acct0"), gw.accounts.get("acct1")
            book, applied = ItchBook(), 0

            async def check():
                nonlocal applied
                async with gw.engine_lock:
                    want = engine_rows(gw, "XETR")
                    upto = srv.feed.next_seq
                for m in srv.feed.get(applied + 1, upto - applied - 1):
                    book.apply(decode_itch(m))
                    applied += 1
                assert book.rows(1) == want
            try:
                for r in (Request("new", a0, "s:a0", "b1", "XETR", side=0, price=10000, qty=5),
                          Request("new", a1, "s:a1", "s1", "XETR", side=1, price=10000, qty=1),
                          Request("new", a0, "s:a0", "b2", "XETR", side=0, price=9800, qty=5),
                          Request("new", a1, "s:a1", "s2", "XETR", side=1, price=9700, qty=10)):
                    await gw.submit(r)
                    await check()
                for _ in range(300):   # the interruption ends by the clock (0.3 s)
                    async with gw.engine_lock:
                        if int(gw.engine.phase(gw.symbols["XETR"].id)) == Phase.CONTINUOUS:
                            break
                    await asyncio.sleep(0.01)
                await check()
                msgs = [decode_itch(m) for m in srv.feed.get(1, srv.feed.next_seq)]
                # after the start of day (S O, S S, R, H, S Q)
                kinds = [(m["type"], m.get("state"), m.get("printable")) for m in msgs[5:]]
                assert kinds == [(b"A", None, None), (b"E", None, None), (b"A", None, None),
                                 (b"E", None, None), (b"H", b"Q", None), (b"A", None, None),
                                 (b"I", None, None), (b"Q", None, None), (b"C", None, b"N"),
                                 (b"C", None, b"N"), (b"H", b"T", None)]
                noii, cross = msgs[11], msgs[12]
                assert (noii["paired"], noii["imbalance"], noii["direction"]) == (5, 1, b"S")
                assert (cross["shares"], cross["price"], cross["cross"]) == (5, 970_000, b"H")
            finally:
                srv.close()
                await srv.wait_closed()
    run(main())


def test_a_login_trickled_a_byte_at_a_time_is_cut_at_the_login_deadline(tmp_path):
    async def main():
        async with running_gateway(tmp_path) as gw:
            srv = await itch_server.start(gw, "127.0.0.1", 0, login_timeout_s=0.5)
            try:
                r, w = await asyncio.open_connection("127.0.0.1", srv.soup_port)
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                closed = False
                w.write(b"\x00\x2fL")   # a Login Request's header: 46 bytes to come ...
                for _ in range(40):   # ... one every 0.1 s: never a whole Login Request
                    w.write(b"a")
                    await asyncio.sleep(0.1)
                    if r.at_eof() or w.is_closing():
                        closed = True
                        break
                    try:
                        if await asyncio.wait_for(r.read(1), 0.001) == b"":
                            closed = True
                            break
                    except asyncio.TimeoutError:
                        pass
                    except ConnectionError:
                        closed = True
                        break
                assert closed and loop.time() - t0 < 2.0
                w.close()
            finally:
                srv.close()
                await srv.wait_closed()
    run(main())
