"""The attacker of the abuse test (test_guard_abuse.py), run as a separate process so its own
work does not slow the probe: ``python abuse_child.py KIND PORTS_JSON SECONDS``.

KIND: ``replay`` (12 binary logins of acct1 asking for its stream from 1, never reading, again
and again), ``resend`` (a FIX session of acct2 sending ResendRequests for its whole history),
``snapshots`` (4 feed sessions asking for every symbol's snapshot at the allowed 20/s, never
reading), ``idle`` (hundreds of idle connections on the binary and FIX ports from 127.0.0.2,
reopened as they are closed), ``badlogon`` (16 loops of wrong-password logins of ``victim``
from 127.0.0.3), ``herd`` (acct8..acct39 log on over FIX all at once, log out, again). Every
loop ends after SECONDS."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time

from gw_fixtures import PASSWORD

from exsim.exchange.gateway import feed_server, itch, ouch
from exsim.exchange.gateway.client.fix import FixClient, FixClientError
from exsim.exchange.gateway.framing import PacketType, frame

H = "127.0.0.1"


async def raw(port, local=None, rcvbuf=0):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if local:
        s.bind((local, 0))
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, (H, port))
    return s


async def replay(ports, until):
    while time.monotonic() < until:
        socks = []
        for _ in range(12):
            s = await raw(ports["binary"], rcvbuf=4096)
            await asyncio.get_running_loop().sock_sendall(s, frame(
                PacketType.LOGIN_REQUEST, ouch.encode_login("acct1", PASSWORD, "", 1)))
            socks.append(s)
        await asyncio.sleep(0.5)
        for s in socks:
            s.close()


async def resend(ports, until):
    c = FixClient(H, ports["fix"], "acct2", PASSWORD, heartbeat=30)
    try:
        await c.logon()
    except FixClientError as e:   # "MsgSeqNum too low, expecting N ...": log on again from N
        c.next_out = int(str(e).split("expecting ")[1].split()[0])
        await c.logon()
    while time.monotonic() < until:
        for _ in range(20):
            c.send("2", [(7, 1), (16, 0)])
        while not c.inbox.empty():   # why: read what comes, so only the server's cost counts
            c.inbox.get_nowait()
        await asyncio.sleep(0.1)
    await c.close()


async def snapshots(ports, until):
    loop = asyncio.get_running_loop()
    req = frame(PacketType.UNSEQUENCED, itch.encode_request(itch.SnapshotRequest(itch.ALL_SYMBOLS)))
    socks = []
    while time.monotonic() < until:
        socks = [s for s in socks if s.fileno() >= 0]
        while len(socks) < 4:
            s = await raw(ports["feed"], rcvbuf=4096)
            await loop.sock_sendall(s, frame(PacketType.LOGIN_REQUEST,
                                             feed_server.encode_login("feed", PASSWORD)))
            socks.append(s)
        for s in list(socks):
            try:
                s.send(req)
            except OSError:
                s.close()
        await asyncio.sleep(0.05)


async def idle(ports, until):
    socks = []
    while time.monotonic() < until:
        for s in list(socks):
            try:
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    s.close()
                    socks.remove(s)
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                socks.remove(s)
        while len(socks) < 300:
            try:
                socks.append(await raw(ports["binary" if len(socks) % 2 else "fix"],
                                       local="127.0.0.2"))
            except OSError:
                break
        await asyncio.sleep(0.1)
    for s in socks:
        s.close()


async def badlogon(ports, until):
    async def loop_once():
        while time.monotonic() < until:
            try:
                r, w = await asyncio.open_connection(H, ports["binary"],
                                                     local_addr=("127.0.0.3", 0))
                w.write(frame(PacketType.LOGIN_REQUEST,
                              ouch.encode_login("victim", "wrong", "", 1)))
                await asyncio.wait_for(r.read(64), 2)
                w.close()
            except (OSError, asyncio.TimeoutError):
                await asyncio.sleep(0.01)
    await asyncio.gather(*(loop_once() for _ in range(16)))


async def herd(ports, until):
    while time.monotonic() < until:
        got = await asyncio.gather(*(FixClient.connect(H, ports["fix"], f"acct{i}", PASSWORD,
                                                       heartbeat=30, timeout=10)
                                     for i in range(8, 40)), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in got if not isinstance(c, BaseException)))
        await asyncio.sleep(0.2)


async def main(kind, ports, seconds):
    await {"replay": replay, "resend": resend, "snapshots": snapshots, "idle": idle,
           "badlogon": badlogon, "herd": herd}[kind](ports, time.monotonic() + seconds)


if __name__ == "__main__":
    # why nicer: the attacker stands for clients on other machines; on the shared 2-core test
    # box its own CPU (parsing thousands of resent messages a second) would otherwise be taken
    # from the server and the probe by the scheduler, which is not what the test measures
    os.nice(10)
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])))
