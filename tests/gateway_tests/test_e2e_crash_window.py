"""A FIX order killed (SIGKILL) between the core's commit of the request (step 1 of
docs/gateway.md "The life of an order") and the WAL record of its batch (step 2) has one fate
after the restart: the session had not counted it as received (that waits for the WAL), so the
gateway asks for it again and runs the resent copy, reported New once; the recovery sends no
"not processed" reject for it (a client that also obeyed that reject got its order rejected and
then executed, and its own resend refused as a duplicate).

The window is widened by a child ``exsim serve`` whose engine step sleeps while a flag file
exists (a wrapper script, no library change)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from e2e_fixtures import PASSWORD, ROOT, accounts_file, run, warm_up

from exsim.exchange.gateway.client.fix import FixClient


WRAPPER = textwrap.dedent("""
    import os, sys, time
    import exsim.exchange.gateway.core as core
    _open = core.Gateway.open.__func__
    async def _patched(cls, *a, **k):
        gw = await _open(cls, *a, **k)
        process = gw.session.process
        def slow(orders, *x, **y):
            if os.path.exists(os.environ["REVIEW_SLOW_FLAG"]):
                time.sleep(6)
            return process(orders, *x, **y)
        gw.session.process = slow
        return gw
    core.Gateway.open = classmethod(_patched)
    from exsim.replay.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _start(argv, env, data_dir, log):
    path = os.path.join(data_dir, "gateway", "listening.json")
    if os.path.exists(path):
        os.unlink(path)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        assert proc.poll() is None, "exsim serve exited"
        assert time.monotonic() < deadline, "exsim serve did not listen"
        time.sleep(0.05)
    with open(path) as f:
        return proc, int(json.load(f)["fix"][1])


def _stop_all(procs, log) -> None:
    """Stop every server a test started (SIGTERM, then SIGKILL after 20 s) and close its log."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    log.close()


def test_order_killed_before_its_wal_record_has_one_fate(tmp_path):
    warm_up(tmp_path)
    accounts, _ = accounts_file(tmp_path, 2)
    data_dir = str(tmp_path / "served")
    wrapper = tmp_path / "slow_serve.py"
    wrapper.write_text(WRAPPER)
    flag = str(tmp_path / "SLOW")
    env = dict(os.environ, PYTHONPATH=ROOT, REVIEW_SLOW_FLAG=flag)
    serve = ["serve", data_dir, "--accounts", str(accounts), "--fix", "0", "--allow-weak-hashes"]
    log = open(tmp_path / "serve.log", "ab")
    procs = []

    async def main():
        proc, port = _start([sys.executable, str(wrapper), *serve], env, data_dir, log)
        procs.append(proc)
        c = await FixClient.connect("127.0.0.1", port, "acct0", PASSWORD, reset=True,
                                    timeout=20)
        c.new_order("warm", "JPM", "buy", 1, "140.00", tif="1")
        assert (await c.expect("8", timeout=60)).get(150) == "0"
        open(flag, "w").close()
        c.new_order("X1", "JPM", "buy", 1, "140.00", tif="1")
        # the core committed X1 (step 1) and the engine sleeps before its WAL record
        await asyncio.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        os.unlink(flag)
        proc, port = _start([sys.executable, "-m", "exsim.replay.cli", *serve], env, data_dir, log)
        procs.append(proc)
        c.port = port
        await c.reconnect(timeout=20)
        # a later order of the same stream: every report of X1 comes before its answer
        c.new_order("Y1", "JPM", "buy", 1, "139.00", tif="1")
        await c.expect("8", where=lambda m: m.get(11) == "Y1", timeout=20)
        await c.logout()
        return [m for m in c.received if m.type == "8" and m.get(11) == "X1"]

    try:
        x1 = run(main(), 240)
    finally:
        _stop_all(procs, log)
    # one fate: run once (New), from the copy the gateway asked for again; never rejected
    assert [(m.get(150), m.get(39)) for m in x1] == [("0", "0")], \
        [(m.get(150), m.get(58)) for m in x1]
    assert x1[0].get(38) == "1" and x1[0].get(44) == "140"


def test_order_waiting_for_its_batch_is_asked_again_after_a_crash(tmp_path):
    """A NewOrderSingle the session took (MsgSeqNum counted) while it waited in memory for its
    batch (a long ``--batch-us`` window), then SIGKILL: the restarted gateway has not counted
    it as received, asks for it again (ResendRequest; the test client answers it itself), and
    the resent copy (PossDupFlag=Y) is accepted: the only way Q1 can be answered here, since
    the core never held it. Before the inbound number waited for the journal, the
    gateway expected the next number and the order was never answered."""
    warm_up(tmp_path)
    accounts, _ = accounts_file(tmp_path, 2)
    data_dir = str(tmp_path / "served")
    env = dict(os.environ, PYTHONPATH=ROOT)
    serve = ["serve", data_dir, "--accounts", str(accounts), "--fix", "0", "--allow-weak-hashes"]
    log = open(tmp_path / "serve.log", "ab")
    procs = []

    async def main():
        proc, port = _start([sys.executable, "-m", "exsim.replay.cli", *serve, "--batch-us",
                             "9000000"], env, data_dir, log)
        procs.append(proc)
        c = await FixClient.connect("127.0.0.1", port, "acct0", PASSWORD, reset=True,
                                    timeout=20)
        c.new_order("Q1", "JPM", "buy", 1, "140.00", tif="1")
        await asyncio.sleep(1.0)          # the session has read it; its batch waits 9 s
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc, port = _start([sys.executable, "-m", "exsim.replay.cli", *serve], env, data_dir, log)
        procs.append(proc)
        c.port = port
        await c.reconnect(timeout=20)
        try:
            m = await c.expect("8", where=lambda m: m.get(11) == "Q1", timeout=20)
        except asyncio.TimeoutError:
            m = None
        await c.logout()
        return m

    try:
        m = run(main(), 240)
    finally:
        _stop_all(procs, log)
    assert m is not None, "no ExecutionReport ever came for ClOrdID Q1 after the restart"
    assert m.get(150) == "0", (m.get(150), m.get(58))
