"""The gateway core across a clean restart, and on a hostile gateway state directory.

After close + open on the same data directory: every stream continues at its head, order ids
are never reused, a client id used before the restart is still refused, the clock never goes
back (even when the wall clock did), and the served directory passes ``exsim verify`` and
``exsim rerun``. A ``DATA_DIR/gateway`` that is a symlink or holds a damaged gateway.sqlite
is refused at open with a StoreError naming the file, never a raw sqlite3 traceback.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections import defaultdict

import pytest

from core_child import check_journal, in_core
from exsim.exchange.errors import CorruptionError, StoreError
from exsim.exchange.gateway.core import Request
from exsim.exchange.schema import OrderType, Side, Tif
from exsim.replay.serving import open_gateway
from gw_fixtures import make_accounts, running_gateway
from test_core_requests import ACCOUNTS, A0, A1, cancel, new, settle

STREAMS = ["fix:acct0", "fix:acct1", "dropcopy:F0", "dropcopy:F1"]


async def _first_run(d, got):
    async with running_gateway(d, ACCOUNTS) as gw:
        for s in STREAMS:
            gw.subscribe(s, got[s].extend)
        for i in range(10):
            gw.submit(new(A0, f"b{i}", Side.BUY, 14995 + i, 3))
            gw.submit(new(A1, f"s{i}", Side.SELL, 15000 + i % 3, 2))
        gw.submit(Request("new", A0, "fix:acct0", "g1", "JPM", side=Side.BUY, price=14990,
                          qty=1, tif=Tif.GTD, expire_ts=gw.now_ns() + 10**12))
        gw.submit(Request("new", A1, "fix:acct1", "st1", "JPM", side=Side.SELL, qty=1,
                          order_type=OrderType.STOP, stop_price=14000))
        await settle(gw)
        # the last thing stamped is a core-level reject: its stamp must count too
        gw.submit(new(A0, "b0", Side.BUY, 14990, 1))
        await settle(gw)
        gw.submit(new(A0, "b0", Side.BUY, 14990, 1))
        await asyncio.sleep(0.01)
        heads = {s: gw.stream_head(s) for s in STREAMS}
        last_ts = max(r.ts for rs in got.values() for r in rs)
        max_id = max(r.order_id for rs in got.values() for r in rs)
        async with gw.engine_lock:
            await in_core(gw, check_journal, gw, got)
    return heads, last_ts, max_id


def test_restart_keeps_streams_ids_and_clock(tmp_path, monkeypatch):
    d = tmp_path / "d"
    got = defaultdict(list)
    heads, last_ts, max_id = asyncio.run(_first_run(d, got))
    # the wall clock went back an hour across the restart
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 3600 * 10**9)

    async def second():
        got2 = defaultdict(list)
        async with running_gateway(d, ACCOUNTS) as gw:
            assert {s: gw.stream_head(s) for s in STREAMS} == heads
            old = {s: gw.read_stream(s, 0) for s in STREAMS}
            assert {s: [r.to_json() for r in rs] for s, rs in old.items()} == \
                {s: [r.to_json() for r in got[s]] for s in STREAMS}
            t = gw.now_ns()
            assert t >= last_ts
            for s in STREAMS:
                gw.subscribe(s, got2[s].extend)
            gw.submit(new(A0, "b1", Side.BUY, 14990, 1))        # used before the restart
            gw.submit(new(A0, "after", Side.BUY, 14990, 1))
            gw.submit(cancel(A0, "x1", "b3"))                    # a pre-restart order
            await settle(gw)
            rs = {r.client_order_id: r for r in got2["fix:acct0"]}
            assert (rs["b1"].exec, rs["b1"].text) == ("rejected", "duplicate client_order_id")
            assert rs["after"].exec == "new" and rs["after"].order_id > max_id
            assert rs["after"].ts >= last_ts and rs["b1"].ts >= last_ts
            assert rs["x1"].exec == "canceled"
            assert got2["fix:acct0"][0].rseq == heads["fix:acct0"] + 1
            for s in STREAMS:
                assert [r.rseq for r in got2[s]] == list(range(heads[s] + 1, gw.stream_head(s) + 1))
            async with gw.engine_lock:
                await in_core(gw, check_journal, gw)

    asyncio.run(second())
    monkeypatch.undo()
    from exsim.replay.cli import main

    assert main(["verify", str(d)]) == 0
    assert main(["rerun", str(d)]) == 0


# -- hostile state ---------------------------------------------------------------------------------

async def _open_close(d):
    gw = await open_gateway(d, ACCOUNTS, durability="none")
    await gw.close()


def _made(tmp_path):
    d = tmp_path / "d"
    asyncio.run(_first_run(d, defaultdict(list)))
    return d


def test_gateway_dir_that_is_a_symlink_is_refused(tmp_path):
    d = _made(tmp_path)
    os.rename(d / "gateway", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", d / "gateway")
    with pytest.raises(CorruptionError, match="symlink"):
        asyncio.run(_open_close(d))


def test_gateway_sqlite_that_is_a_symlink_is_refused(tmp_path):
    d = _made(tmp_path)
    os.rename(d / "gateway" / "gateway.sqlite", tmp_path / "elsewhere.sqlite")
    os.symlink(tmp_path / "elsewhere.sqlite", d / "gateway" / "gateway.sqlite")
    with pytest.raises(StoreError):
        asyncio.run(_open_close(d))


def _garbage_header(path):
    with open(path, "r+b") as f:
        f.write(b"this is not a database" * 10)


def _garbage_pages(path):
    size = os.path.getsize(path)
    assert size > 8192
    with open(path, "r+b") as f:
        f.seek(4096)
        f.write(os.urandom(size - 4096))


def _foreign_schema(path):
    os.unlink(path)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE reports (x)")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value)")
    db.execute("INSERT INTO meta VALUES ('schema_version', 1)")
    db.commit()
    db.close()


def _bad_meta_value(path):
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = 'abc' WHERE key = 'next_order_id'")
    db.commit()
    db.close()


def _bad_row(path):
    db = sqlite3.connect(path)
    db.execute("UPDATE orders SET state = '{\"order_id\": 1}'")
    db.commit()
    db.close()


@pytest.mark.parametrize("damage", [_garbage_header, _garbage_pages, _foreign_schema,
                                    _bad_meta_value, _bad_row])
def test_a_damaged_gateway_sqlite_is_a_clear_error(tmp_path, damage):
    d = _made(tmp_path)
    path = d / "gateway" / "gateway.sqlite"
    for extra in ("-wal", "-shm"):
        assert not os.path.exists(str(path) + extra)   # closed cleanly: all in the main file
    damage(str(path))
    with pytest.raises(StoreError) as e:
        asyncio.run(_open_close(d))
    assert "gateway.sqlite" in str(e.value)


def test_a_second_gateway_on_a_directory_another_process_serves_is_refused(tmp_path):
    """Two servers on one data directory would interleave two journals: the second open fails
    with a StoreError and the first goes on serving."""
    import subprocess
    import sys
    import time

    from test_core_crash import _lines, _start

    d, out = tmp_path / "d", tmp_path / "acked.jsonl"
    proc = _start(d, out)
    try:
        end = time.monotonic() + 60
        while _lines(out) < 50:
            assert proc.poll() is None and time.monotonic() < end
            time.sleep(0.01)
        with pytest.raises(StoreError):
            asyncio.run(_open_close(d))
        n = _lines(out)
        time.sleep(0.3)
        assert proc.poll() is None and _lines(out) > n   # still serving
    finally:
        proc.kill()
        proc.wait(10)


def test_open_refuses_bad_options(tmp_path):
    from exsim.exchange.errors import UsageError

    for kw in (dict(durability="sometimes"), dict(batch_ns=0), dict(batch_max=0),
               dict(batch_ns=1.5)):
        with pytest.raises(UsageError):
            asyncio.run(open_gateway(tmp_path / "d", ACCOUNTS, **kw))
    assert not (tmp_path / "d").exists()
