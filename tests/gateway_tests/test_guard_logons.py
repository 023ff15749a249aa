"""Connections before logon and logons themselves cannot hurt other clients (issue 36, items 3-6
and 8): idle sockets of one address do not use up the slots of a port, wrong passwords are
throttled per address and per account without hashing, a herd of correct logons all get in
while the server queues its own hashing, a login JSON nested thousands deep is refused 1008,
and every logon is logged and audited with its peer address. Every wait is bounded; the
attacker's sockets come from 127.0.0.2, the well-behaved client's from 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time

from fix_helpers import client, fix_port
from gw_fixtures import PASSWORD, make_accounts
from ouch_fixtures import login, ouch_port, run
from web_fixtures import web_gateway, until
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from exsim.exchange.gateway import ouch
from exsim.exchange.gateway.accounts import Accounts
from exsim.exchange.gateway.framing import PacketType, frame, read_frame
from exsim.exchange.gateway.guard import AUDIT_FILE, Limits

ATTACKER = "127.0.0.2"
TIGHT = Limits(preauth_per_address=4, preauth_per_port=8, preauth_grace_s=0.05)


async def idle_sockets(port: int, n: int) -> list:
    """Open ``n`` connections from ATTACKER that never send anything; return their writers."""
    out = []
    for _ in range(n):
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port, local_addr=(ATTACKER, 0))
            out.append(w)
        except OSError:
            pass
    return out


def close_all(writers) -> None:
    for w in writers:
        w.transport.abort()


class CountingAccounts(Accounts):
    """Accounts that count (and optionally slow down, as a real scrypt cost) password checks."""

    def __init__(self, rows, delay_s: float = 0.0):
        super().__init__(list(rows))
        self.delay_s, self.checks = delay_s, 0
        self._lock = threading.Lock()

    def authenticate(self, name, password, role=None):
        with self._lock:
            self.checks += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().authenticate(name, password, role)


def test_idle_binary_connections_of_one_address_leave_room_for_a_login(tmp_path):
    async def main():
        async with ouch_port(tmp_path, gw_options={"limits": TIGHT}, max_sessions=4) as (gw, srv):
            idle = await idle_sockets(srv.port, 40)
            await asyncio.sleep(0.2)
            assert gw.guard.preauth("binary") <= TIGHT.preauth_per_port
            c = await login(srv)           # from 127.0.0.1: gets in
            assert c.next_seq >= 1
            await c.close()
            close_all(idle)
    run(main())


def test_idle_fix_connections_of_one_address_leave_room_for_a_logon(tmp_path):
    async def main():
        async with fix_port(tmp_path, gw_options={"limits": TIGHT}, max_sessions=4) as (gw, port):
            idle = await idle_sockets(port, 40)
            await asyncio.sleep(0.2)
            c = await client(port)
            assert c is not None
            await c.close()
            close_all(idle)
    run(main())


def test_idle_web_connections_do_not_lock_out_the_operator_token(tmp_path):
    async def main():
        from exsim.exchange.gateway import web
        async with web_gateway(tmp_path) as (gw, server):
            gw.guard.limits = TIGHT     # why swapped in: web_gateway builds its own gateway
            uri = f"ws://127.0.0.1:{server.port}/ws"
            idle = []
            for _ in range(40):        # handshake done, never a login
                try:
                    idle.append(await connect(uri, open_timeout=5, local_addr=(ATTACKER, 0)))
                except (OSError, ConnectionClosed, Exception):
                    pass
            await asyncio.sleep(0.2)
            ws = await connect(uri, open_timeout=5)
            await ws.send(json.dumps({"token": server.token}))
            assert (await until(ws, lambda m: True))["type"] == "snapshot"
            await ws.close()
            for w in idle:
                w.transport.abort()
            assert web.MAX_INBOUND >= 4096
    run(main())


def test_a_login_json_nested_2000_deep_is_refused_with_1008(tmp_path):
    async def main():
        async with web_gateway(tmp_path) as (gw, server):
            ws = await connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=5)
            await ws.send("[" * 2000 + "]" * 2000)
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 5)
            except ConnectionClosed:
                pass
            assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1008
    run(main())


async def bad_binary_login(port: int, name: str = "acct0", host: str = ATTACKER) -> bytes:
    """Log in with a wrong password from ``host``; return the Login Rejected payload."""
    r, w = await asyncio.open_connection("127.0.0.1", port, local_addr=(host, 0))
    w.write(frame(PacketType.LOGIN_REQUEST, ouch.encode_login(name, "wrong-pw", "", 1)))
    got = await read_frame(r, max_size=1 << 16, idle_s=5)
    w.transport.abort()
    assert got is not None and got[0] == PacketType.LOGIN_REJECTED
    return got[1]


def test_wrong_passwords_are_throttled_without_hashing_and_audited(tmp_path, caplog):
    async def main():
        accts = CountingAccounts(make_accounts())
        lim = Limits(failures_per_address=4, failures_per_account=6, failure_refill_s=30)
        async with ouch_port(tmp_path, accts, gw_options={"limits": lim}) as (gw, srv):
            good = await login(srv)    # acct0's owner logs on from 127.0.0.1 first
            await good.close()
            for _ in range(30):        # one address guessing: 4 hashes, then refused at once
                await bad_binary_login(srv.port)
            assert accts.checks == 1 + 4
            for k in range(3, 12):     # many addresses guessing acct0: the account's budget
                await bad_binary_login(srv.port, host=f"127.0.0.{k}")
            assert accts.checks == 1 + 6
            # the owner's address still logs on; the guessing address is refused even with the
            # right password until its budget refills
            again = await login(srv)
            await again.close()
            with_right_pw = await asyncio.open_connection("127.0.0.1", srv.port,
                                                          local_addr=(ATTACKER, 0))
            with_right_pw[1].write(frame(PacketType.LOGIN_REQUEST,
                                         ouch.encode_login("acct0", PASSWORD, "", 1)))
            got = await read_frame(with_right_pw[0], max_size=1 << 16, idle_s=5)
            assert got[0] == PacketType.LOGIN_REJECTED
            with_right_pw[1].transport.abort()
        audit = (tmp_path / "gateway" / AUDIT_FILE).read_text().splitlines()
        assert sum(" OK binary 127.0.0.1 'acct0'" in line for line in audit) == 2
        # every failure is accounted for: one line each, but throttled refusals (no hash)
        # one line a second per address, the next line (or the close) saying how many came
        # between
        fails = [line for line in audit if " FAIL binary 127.0.0.2 'acct0'" in line]
        counts = [re.search(r"(\d+) more refused since", line) for line in fails]
        summaries = sum(" 'acct0' %s" % m.group(0) in line for m, line in zip(counts, fails) if m)
        assert len(fails) - summaries + sum(int(m.group(1)) for m in counts if m) == 31
        assert len(fails) < 31
        assert ((tmp_path / "gateway" / AUDIT_FILE).stat().st_mode & 0o777) == 0o600
    with caplog.at_level(logging.WARNING, logger="exsim.gateway.auth"):
        run(main())
    assert any("127.0.0.2" in r.getMessage() and "refused" in r.getMessage()
               for r in caplog.records)


def test_a_herd_of_64_fix_logons_all_get_in_while_hashing_queues(tmp_path):
    async def main():
        # 64 checks of 60 ms on 2 threads: ~2 s of queue, twice the logon deadline
        accts = CountingAccounts(make_accounts(64), delay_s=0.06)
        async with fix_port(tmp_path, accts, logon_timeout=1.0) as (gw, port):
            got = await asyncio.gather(*(client(port, f"acct{i}") for i in range(64)),
                                       return_exceptions=True)
            failed = [g for g in got if isinstance(g, BaseException)]
            assert not failed, failed[:3]
            await asyncio.gather(*(c.close() for c in got))
    run(main(), 60)


def test_serve_refuses_an_accounts_file_with_weak_hashes(tmp_path, capsys):
    from gw_fixtures import write_accounts

    from exsim.replay.cli import main
    path = write_accounts(tmp_path / "acc.toml", make_accounts(2))   # scrypt n=16
    assert main(["serve", str(tmp_path / "day"), "--accounts", path, "--fix", "0"]) == 2
    err = capsys.readouterr().err
    assert "too cheap to guess" in err and "acct0" in err and "Traceback" not in err


def test_served_data_directory_is_private(tmp_path):
    from gw_fixtures import write_accounts

    from exsim.replay.cli import main
    path = write_accounts(tmp_path / "acc.toml", make_accounts(2))
    day = tmp_path / "day"
    assert main(["serve", str(day), "--accounts", path, "--binary", "0", "--fsync", "none",
                 "--allow-weak-hashes", "--duration", "0.3"]) == 0
    assert (day.stat().st_mode & 0o777) == 0o700
    assert ((day / "gateway").stat().st_mode & 0o777) == 0o700
    for f in day.rglob("*"):
        if f.is_file():
            assert (f.stat().st_mode & 0o077) == 0, f
