"""``exsim serve --ouch50 PORT --itch50 PORT --itch50-udp HOST:PORT`` as a process: a spec
client (nasdaq_spec, no exsim import) trades over OUCH 5.0, the order is on the ITCH 5.0 feed
over SoupBinTCP and over MoldUDP64, and SIGTERM ends the sessions with End of Session and the
process with status 0. Every wait is bounded."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

from gw_fixtures import PASSWORD, make_accounts, write_accounts
from nasdaq_spec import OuchClient, decode_itch, enter, mold_decode

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_exsim_serve_runs_the_nasdaq_ports(tmp_path):
    accounts = write_accounts(tmp_path / "accounts.toml", make_accounts())
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(10)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    data = tmp_path / "served"
    proc = subprocess.Popen(
        [sys.executable, "-m", "exsim.replay.cli", "serve", str(data), "--accounts", accounts,
         "--ouch50", "0", "--itch50", "0", "--itch50-udp",
         f"127.0.0.1:{udp.getsockname()[1]}", "--fsync", "none", "--allow-weak-hashes"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        listening = data / "gateway" / "listening.json"
        deadline = time.monotonic() + 120
        while not listening.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "exsim serve did not start listening"
            time.sleep(0.05)
        ports = {k: v[1] for k, v in json.loads(listening.read_text()).items()}
        assert set(ports) == {"ouch50", "itch50"}

        async def main():
            a = await OuchClient.login(ports["ouch50"], "acct0", PASSWORD)
            a.send(enter(1, b"B", 7, "JPM", 1_234_500))   # $123.45
            await a.until(lambda c: len(c.msgs) >= 2)
            assert a.msgs[1]["type"] == b"A"
            feed = await OuchClient.login(ports["itch50"], "feed", PASSWORD, seq=1)
            adds = []
            while not adds:
                t, p = await feed.packet(10)
                if t == b"S" and p[:1] == b"A":
                    adds.append(decode_itch(p))
            assert (adds[0]["ref"], adds[0]["shares"], adds[0]["price"]) == (
                a.msgs[1]["order_ref"], 7, 1_234_500)
            proc.send_signal(signal.SIGTERM)
            for c in (a, feed):   # the stop: End of Session on both ports
                while (await c.packet(30))[0] != b"Z":
                    pass
                c.close()
        asyncio.run(asyncio.wait_for(main(), 60))
        assert proc.wait(60) == 0
        got = []
        while not any(m[:1] == b"A" for m in got):   # the same Add Order over MoldUDP64
            session, seq, count, msgs = mold_decode(udp.recv(2048))
            got += msgs
        assert session == "EXSIMITCH"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
        udp.close()


def test_itch50_udp_needs_the_feed(tmp_path, capsys):
    from exsim.replay.cli import main
    accounts = write_accounts(tmp_path / "accounts.toml", make_accounts())
    assert main(["serve", str(tmp_path / "d"), "--accounts", accounts, "--ouch50", "0",
                 "--itch50-udp", "127.0.0.1:30001"]) == 2
    assert "--itch50-udp needs --itch50" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
