"""The gateway core killed mid-stream: nothing acknowledged is lost or changed.

A child process (``core_child.py``) serves a random flow with durability "fsync" and writes
down every report it was handed (acknowledged); the test SIGKILLs it, reopens the directory
in-process and checks that each of those reports is stored with the same rseq and the same
bytes, that the streams are what ``derive`` makes of the journal (``check_journal``), and that
new reports continue each stream's numbering. A second test kills the child between the
engine's journal write and the report commit of a chosen batch: recovery must derive exactly
that batch's reports.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict

from core_child import check_journal, in_core
from exsim.exchange.gateway.reports import Report
from exsim.exchange.schema import Side
from gw_fixtures import make_accounts, running_gateway
from test_core_requests import ACCOUNTS, A0, new, settle

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "core_child.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start(d, out, *extra):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, CHILD, str(d), str(out), *map(str, extra)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lines(path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _acknowledged(path) -> list[Report]:
    """The reports the child wrote down; a torn last line (killed mid-write) is dropped."""
    with open(path) as f:
        text = f.read()
    return [Report.from_json(line) for line in text.split("\n")[:-1]]


def _reported_through(d) -> tuple[int, int]:
    db = sqlite3.connect(os.path.join(d, "gateway", "gateway.sqlite"))
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'reported_through'").fetchone()
        n = db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]
    finally:
        db.close()
    return (row[0] if row else 0), n


async def _reopen_and_check(d, acked):
    async with running_gateway(d, ACCOUNTS, durability="fsync") as gw:
        async with gw.engine_lock:
            stored = await in_core(gw, check_journal, gw)
        by_key = {(r.stream, r.rseq): r.to_json() for rs in stored.values() for r in rs}
        for r in acked:
            assert by_key.get((r.stream, r.rseq)) == r.to_json(), \
                f"acknowledged report {r.stream}#{r.rseq} is lost or changed"
        heads = {s: gw.stream_head(s) for s in stored}
        got = defaultdict(list)
        for s in ("fix:acct0", "dropcopy:F0"):
            gw.subscribe(s, got[s].extend)
        gw.submit(new(A0, "after-crash", Side.BUY, 14000, 1))
        await settle(gw)
        mine = [r for r in got["fix:acct0"] if r.client_order_id == "after-crash"]
        assert [r.rseq for r in mine] == [heads.get("fix:acct0", 0) + 1]
        assert got["dropcopy:F0"][0].rseq == heads.get("dropcopy:F0", 0) + 1
        assert gw.engine.seq > 0
        return stored, gw.engine.seq


def _kill_after(proc, out, n, timeout=60.0):
    end = time.monotonic() + timeout
    while _lines(out) < n:
        if proc.poll() is not None:
            raise AssertionError(f"the child stopped: {proc.stderr.read().decode()[-2000:]}")
        assert time.monotonic() < end, "the child did not report in time"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_sigkill_mid_stream_loses_no_acknowledged_report(tmp_path):
    d, out = tmp_path / "d", tmp_path / "acked.jsonl"
    proc = _start(d, out)
    try:
        _kill_after(proc, out, 1500)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    acked = _acknowledged(out)
    assert len(acked) >= 1500
    stored, _ = asyncio.run(_reopen_and_check(d, acked))
    assert sum(len(rs) for rs in stored.values()) >= len(acked)


def test_crash_between_journal_and_report_commit_is_recovered(tmp_path):
    """The 40th batch is journaled (fsync) but its reports never committed: at reopen the
    gateway derives them from the stored rows, and they are what derive makes of them."""
    d, out = tmp_path / "d", tmp_path / "acked.jsonl"
    proc = _start(d, out, 40)
    try:
        assert proc.wait(60) == 9, proc.stderr.read().decode()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    acked = _acknowledged(out)
    before, n_before = _reported_through(str(d))
    from exsim.store import journaled_through

    journal = journaled_through(str(d))
    assert journal > before > 0, "the crash did not leave a journaled batch without reports"
    stored, seq = asyncio.run(_reopen_and_check(d, acked))
    recovered = [r for rs in stored.values() for r in rs if before < r.seq <= journal]
    assert recovered, "the journaled batch got no reports"
    acked_keys = {(r.stream, r.rseq) for r in acked}
    assert not any((r.stream, r.rseq) in acked_keys for r in recovered)
    assert sum(len(rs) for rs in stored.values()) > n_before


def test_crash_before_the_engine_forgets_the_unjournaled_requests(tmp_path):
    """The 30th batch's requests are committed to the gateway state but the engine never ran
    it: at reopen they are dropped (nobody was told of them), so their client ids are free
    again, and the order ids they took are never used again."""
    d, out = tmp_path / "d", tmp_path / "acked.jsonl"
    proc = _start(d, out, 30, "engine")
    try:
        assert proc.wait(60) == 9, proc.stderr.read().decode()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    from exsim.store import journaled_through

    journal = journaled_through(str(d))
    db = sqlite3.connect(os.path.join(d, "gateway", "gateway.sqlite"))
    try:
        next_id = db.execute("SELECT value FROM meta WHERE key = 'next_order_id'").fetchone()[0]
        lost = [(json.loads(o)["account"], json.loads(o)["client_order_id"]) for (o,) in
                db.execute("SELECT origin FROM requests WHERE seq > ?", (journal,))
                if json.loads(o)["kind"] == "new"]
    finally:
        db.close()
    assert lost, "the crash left no unjournaled new order"
    acked = _acknowledged(out)

    async def go():
        async with running_gateway(d, ACCOUNTS, durability="fsync") as gw:
            assert gw._db.origins(journal + 1, 1 << 62) == {}
            got = defaultdict(list)
            name, cid = lost[0]
            gw.subscribe(f"fix:{name}", got[name].extend)
            gw.submit(new(ACCOUNTS.get(name), cid, Side.BUY, 14000, 1))
            await settle(gw)
            r = [r for r in got[name] if r.client_order_id == cid][0]
            assert r.exec == "new" and r.order_id >= next_id
        await _reopen_and_check(d, acked)

    asyncio.run(go())
