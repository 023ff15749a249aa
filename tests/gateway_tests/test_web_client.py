"""The web page's WebSocket and HTTP side, driven by a websockets client against a real Gateway
on loopback: the snapshot and the updates a watcher gets while orders arrive, who may see
which positions, and hostile or slow watchers (disconnected, never disturbing the others).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

import pytest
from web_fixtures import TIMEOUT, accounts, buy, sell, until, web_gateway
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway import web
from gw_fixtures import PASSWORD, running_gateway


def _uri(server) -> str:
    return f"ws://127.0.0.1:{server.port}/ws"


async def _watch(server, login: dict, **kw):
    ws = await connect(_uri(server), open_timeout=TIMEOUT, **kw)
    try:
        await ws.send(json.dumps(login))
    except ConnectionClosed:     # refused at once (too many watchers): the caller checks the code
        pass
    return ws


def _closed_code(ws) -> int:
    return ws.protocol.close_rcvd.code if ws.protocol.close_rcvd else -1


async def _closed(ws) -> int:
    """Return the close code the server sent, after reading what it sent before it."""
    async def drain():
        try:
            while True:
                await ws.recv()
        except ConnectionClosed:
            return _closed_code(ws)
    return await asyncio.wait_for(drain(), TIMEOUT)


async def _http(server, path: str, extra: str = "") -> tuple[int, dict, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{extra}\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), TIMEOUT)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def test_a_watcher_gets_the_snapshot_then_the_ladder_tape_and_positions_as_orders_arrive(tmp_path):
    async def main():
        async with web_gateway(tmp_path) as (gw, server):
            assert server.url == f"http://127.0.0.1:{server.port}/#token={server.token}"
            ws = await _watch(server, {"token": server.token})
            snap = await until(ws, lambda m: True)
            assert snap["type"] == "snapshot" and snap["seq"] == 0
            assert [(s["name"], s["tick_size"]) for s in snap["symbols"]] \
                == [(n, format(i.tick_size, "f")) for n, i in gw.symbols.items()]
            assert snap["books"]["JPM"] == {"bids": [], "asks": []}
            assert snap["trades"] == [] and snap["positions"] == []
            buy(gw, "acct0", 10_000, 5)
            buy(gw, "acct0", 9_999, 2)
            up = await until(ws, lambda m: m["books"].get("JPM", {}).get("bids") == [
                [10_000, 5, 1], [9_999, 2, 1]])
            assert up["type"] == "update" and up["seq"] == gw.engine.seq
            sell(gw, "acct1", 10_000, 3)
            up = await until(ws, lambda m: m["trades"])
            assert [(t["symbol"], t["price"], t["qty"], t["aggressor"]) for t in up["trades"]] \
                == [("JPM", 10_000, 3, "sell")]
            pos = {(p["account"], p["symbol"]): (p["net"], p["avg_cost"]) for p in up["positions"]}
            assert pos == {("acct0", "JPM"): (3, 10_000.0), ("acct1", "JPM"): (-3, 10_000.0)}
            assert up["books"]["JPM"]["bids"][0] == [10_000, 2, 1]
            # a watcher joining now starts from where the first one is
            late = await _watch(server, {"token": server.token})
            snap = await until(late, lambda m: True)
            assert snap["books"]["JPM"] == up["books"]["JPM"]
            assert [t["trade_id"] for t in snap["trades"]] == [t["trade_id"] for t in up["trades"]]
            assert {(p["account"], p["net"]) for p in snap["positions"]} \
                == {("acct0", 3), ("acct1", -3)}
            await ws.close()
            await late.close()
    asyncio.run(main())


def test_an_account_sees_the_market_and_only_its_own_or_its_firms_positions(tmp_path):
    async def main():
        async with web_gateway(tmp_path) as (gw, server):
            buy(gw, "acct0", 10_000, 5)     # firm F0
            sell(gw, "acct1", 10_000, 2)    # firm F1
            sell(gw, "acct2", 10_000, 1)    # firm F0
            await asyncio.sleep(0.3)
            seen = {}
            for name in ("acct0", "acct1", "watch0"):
                ws = await _watch(server, {"account": name, "password": PASSWORD})
                snap = await until(ws, lambda m: m["type"] == "snapshot")
                seen[name] = sorted((p["account"], p["net"]) for p in snap["positions"])
                assert len(snap["trades"]) == 2 and snap["books"]["JPM"]["bids"] == [[10_000, 2, 1]]
                await ws.close()
            assert seen == {"acct0": [("acct0", 3)], "acct1": [("acct1", -2)],
                            "watch0": [("acct0", 3), ("acct2", -1)]}
            # a drop-copy login without marketdata, a wrong password, a wrong token: refused
            for login in ({"account": "drop0", "password": PASSWORD},
                          {"account": "acct0", "password": "wrong"},
                          {"account": "nobody", "password": PASSWORD},
                          {"token": "x" * 24}):
                ws = await _watch(server, login)
                err = await until(ws, lambda m: True)
                assert err["type"] == "error"
                assert await _closed(ws) == 1008
    asyncio.run(main())


def test_hostile_watchers_are_disconnected_and_a_good_one_keeps_getting_updates(tmp_path):
    async def main():
        async with web_gateway(tmp_path, auth_timeout_s=0.5) as (gw, server):
            good = await _watch(server, {"token": server.token})
            await until(good, lambda m: m["type"] == "snapshot")
            silent = await connect(_uri(server), open_timeout=TIMEOUT)     # never logs on
            garbage = await _watch(server, {"token": server.token})
            await garbage.send(b"\xff\x00binary")
            for text in ("not json", "[1, 2]", json.dumps({"token": 5})):
                ws = await connect(_uri(server), open_timeout=TIMEOUT)
                await ws.send(text)
                assert await _closed(ws) == 1008
            big = await connect(_uri(server), open_timeout=TIMEOUT)
            await big.send("x" * (web.MAX_INBOUND + 1))
            assert await _closed(big) == 1009                      # message too big
            assert await _closed(silent) == 1008                   # no login in time
            assert await _closed(garbage) == 1008                  # sent something after login
            buy(gw, "acct0", 10_100, 1)
            up = await until(good, lambda m: m["type"] == "update")
            assert up["books"]["JPM"]["bids"] == [[10_100, 1, 1]]
            await good.close()
    asyncio.run(main())


def test_the_page_is_served_under_a_strict_policy_and_nothing_else_is(tmp_path):
    async def main():
        async with web_gateway(tmp_path) as (gw, server):
            status, headers, body = await _http(server, "/")
            assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
            assert body == web.PAGE.read_bytes()
            csp = headers["Content-Security-Policy"]
            assert "default-src 'none'" in csp and "script-src 'sha256-" in csp
            assert "unsafe-inline" not in csp and headers["X-Content-Type-Options"] == "nosniff"
            assert (await _http(server, "/index.html?x=1"))[0] == 200
            for path in ("/etc/passwd", "/../web.py", "/static/index.html", "/favicon.ico"):
                assert (await _http(server, path))[0] == 404
            # a page of another origin may not open the WebSocket (the browser sends Origin)
            with pytest.raises(InvalidStatus) as e:
                await connect(_uri(server), origin="http://evil.example", open_timeout=TIMEOUT)
            assert e.value.response.status_code == 403
            same = await connect(_uri(server), origin=f"http://127.0.0.1:{server.port}",
                                 open_timeout=TIMEOUT)
            await same.send(json.dumps({"token": server.token}))
            assert (await until(same, lambda m: True))["type"] == "snapshot"
            await same.close()
    asyncio.run(main())


def test_updates_are_coalesced_to_at_most_one_per_interval(tmp_path):
    async def main():
        async with web_gateway(tmp_path, interval_s=0.2) as (gw, server):
            ws = await _watch(server, {"token": server.token})
            await until(ws, lambda m: m["type"] == "snapshot")
            stamps, seqs = [], []

            async def reader():
                while True:
                    m = json.loads(await ws.recv())
                    stamps.append(time.monotonic())
                    seqs.append(m["seq"])
            task = asyncio.create_task(reader())
            t0 = time.monotonic()
            for i in range(100):                     # about 100 batches over about a second
                buy(gw, "acct0", 9_000 + i % 7, 1)
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)
            task.cancel()
            elapsed = time.monotonic() - t0
            assert seqs and seqs[-1] == gw.engine.seq == 100 and seqs == sorted(seqs)
            # one update per 0.2 s at most (one per batch would be about 100)
            assert 2 <= len(stamps) <= elapsed / 0.2 + 2, (len(stamps), elapsed)
            await ws.close()
    asyncio.run(main())


def test_a_slow_watcher_is_dropped_and_the_others_keep_getting_updates(tmp_path):
    async def main():
        async with web_gateway(tmp_path, levels=200, interval_s=0.02, queue_max=3) as (gw, srv):
            for i in range(150):                    # deep books: every update carries ~4 KB
                buy(gw, "acct0", 9_000 + i, 1)
                sell(gw, "acct1", 11_000 + i, 1)
            good = await _watch(srv, {"token": srv.token})
            await until(good, lambda m: m["type"] == "snapshot")
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", srv.port))
            # max_queue=1: the client library stops reading the socket after one frame
            slow = await _watch(srv, {"token": srv.token}, sock=sock, max_queue=1)
            deadline = time.monotonic() + TIMEOUT
            while len(srv.watchers) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            for w in srv.watchers:                  # a small kernel buffer on its server side
                if w.ws.remote_address[1] == sock.getsockname()[1]:
                    w.ws.transport.get_extra_info("socket").setsockopt(
                        socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            i = 0
            while srv.dropped == 0 and time.monotonic() < deadline:
                buy(gw, "acct2", 9_000 + i % 150, 1)
                i += 1
                await until(good, lambda m: m["type"] == "update")   # the good one keeps up
            assert srv.dropped == 1 and len(srv.watchers) == 1
            buy(gw, "acct2", 9_500, 7)
            up = await until(good, lambda m: [9_500, 7, 1] in m["books"].get("JPM", {}).get(
                "bids", []))
            assert up["seq"] == gw.engine.seq
            assert await _closed(slow) in (1013, 1006)
            await good.close()
    asyncio.run(main())


def test_watchers_beyond_the_limit_are_refused(tmp_path):
    async def main():
        async with web_gateway(tmp_path, max_watchers=2) as (gw, server):
            a = await _watch(server, {"token": server.token})
            b = await _watch(server, {"token": server.token})
            for ws in (a, b):
                await until(ws, lambda m: m["type"] == "snapshot")
            c = await _watch(server, {"token": server.token})
            assert await _closed(c) == 1013
            await a.close()
            await asyncio.sleep(0.2)
            d = await _watch(server, {"token": server.token})
            assert (await until(d, lambda m: True))["type"] == "snapshot"
            await b.close()
            await d.close()
    asyncio.run(main())


def test_after_a_restart_the_page_shows_the_days_positions_and_the_same_token_works(tmp_path):
    async def main():
        async with web_gateway(tmp_path) as (gw, server):
            token = server.token
            buy(gw, "acct0", 10_000, 4)
            sell(gw, "acct1", 10_000, 3)
            await asyncio.sleep(0.3)
        assert (os.stat(tmp_path / "gateway" / web.TOKEN_FILE).st_mode & 0o777) == 0o600
        async with web_gateway(tmp_path) as (gw, server):
            assert server.token == token
            ws = await _watch(server, {"token": token})
            snap = await until(ws, lambda m: True)
            assert snap["seq"] == 2
            assert snap["books"]["JPM"]["bids"] == [[10_000, 1, 1]]
            assert [(t["price"], t["qty"]) for t in snap["trades"]] == [(10_000, 3)]
            assert sorted((p["account"], p["net"]) for p in snap["positions"]) \
                == [("acct0", 3), ("acct1", -3)]
            await ws.close()
    asyncio.run(main())


def test_bad_options_are_refused_by_name(tmp_path):
    async def main():
        async with running_gateway(tmp_path, accounts()) as gw:
            for kw in ({"colour": "red"}, {"levels": 0}, {"interval_s": "fast"},
                       {"token": "short"}, {"queue_max": 2.5}, {"levels": True}):
                with pytest.raises(UsageError):
                    await web.start(gw, "127.0.0.1", 0, **kw)
            with pytest.raises(UsageError):
                await web.start(gw, "example.com", 0)
    asyncio.run(main())
