"""A full disk (issue 36, item 9): the clients whose orders arrive when the store fails get an
answer that says why (FIX: a Logout whose Text names the failure; binary: a Debug packet with it
before End of Session, or a Rejected), and the FIX session store does not hide "disk is full"
behind its own "cannot rollback" error. Every wait is bounded."""

from __future__ import annotations

import asyncio
import errno
import json
import os

import pytest
from gw_fixtures import PASSWORD, make_accounts, write_accounts

from exsim.exchange.gateway import ouch, server
from exsim.exchange.gateway.client.fix import FixClient
from exsim.exchange.gateway.fix.store import Outbound, SessionState, SessionStore
from exsim.exchange.gateway.framing import FrameError, PacketType, frame, read_frame
from exsim.exchange.schema import OrderType, Side, Tif
from exsim.replay.serving import session_opener


def test_a_full_session_store_says_disk_full(tmp_path):
    store = SessionStore(tmp_path / "fix.sqlite")
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count={pages}")   # the file may not grow: a full disk
    with pytest.raises(Exception, match="full"):
        store.commit("k", SessionState(), [Outbound(i, "8", i, b"x" * 3000) for i in range(1, 50)])
    store.close() if hasattr(store, "close") else store.db.close()


class _FillsUp:
    """A journal session whose disk fills after ``batches`` batches."""

    def __init__(self, session, batches: int):
        self._s, self._left = session, batches

    def __getattr__(self, name):
        return getattr(self._s, name)

    def process(self, orders):
        self._left -= 1
        if self._left < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._s.process(orders)


def test_orders_sent_as_the_disk_fills_are_answered_with_the_reason(tmp_path):
    async def main():
        accounts = write_accounts(tmp_path / "acc.toml", make_accounts(2))
        opener = session_opener(tmp_path / "day", durability="none")
        stop = asyncio.Event()
        task = asyncio.create_task(server.serve(
            lambda: _FillsUp(opener(), 3), accounts, {"fix": "0", "binary": "0"},
            durability="none", stop=stop, allow_weak_hashes=True))
        path = tmp_path / "day" / "gateway" / "listening.json"
        for _ in range(600):
            if path.exists():
                break
            await asyncio.sleep(0.05)
        ports = {k: v[1] for k, v in json.loads(path.read_text()).items()}
        fix = await FixClient.connect("127.0.0.1", ports["fix"], "acct0", PASSWORD, heartbeat=30)
        r, w = await asyncio.open_connection("127.0.0.1", ports["binary"])
        w.write(frame(PacketType.LOGIN_REQUEST, ouch.encode_login("acct1", PASSWORD, "", 0)))
        assert (await read_frame(r, max_size=1 << 16, idle_s=5))[0] == PacketType.LOGIN_ACCEPTED
        logout, texts, kinds, open_ = None, [], [], True
        for i in range(300):       # orders keep coming on both ports as the disk fills
            try:
                fix.new_order(f"F{i}", "JPM", "buy", 1, "1.00")
            except Exception:
                pass
            if open_:
                w.write(frame(PacketType.UNSEQUENCED, ouch.ENTER.pack(
                    token=f"B{i}", side=Side.BUY, qty=1, symbol="JPM", price=100,
                    order_type=OrderType.LIMIT, tif=Tif.GTC, display_qty=0, min_qty=0,
                    stop_price=0, expire_ts=0, post_only=False)))
            while open_:           # what the binary port answered so far
                try:
                    got = await read_frame(r, max_size=1 << 16, idle_s=0.01)
                except (FrameError, ConnectionError):
                    break
                if got is None:
                    open_ = False
                    break
                kinds.append(got[0])
                if got[0] == PacketType.DEBUG:
                    texts.append(got[1].decode())
            while not fix.inbox.empty():
                m = fix.inbox.get_nowait()
                if getattr(m, "type", None) == "5":
                    logout = m
            if logout is not None and not open_:
                break
            await asyncio.sleep(0.01)
        assert logout is not None and "No space left on device" in logout.get(58, ""), logout
        # the binary client heard why: the Debug text, or a Rejected naming the gateway
        assert any("No space left on device" in t for t in texts) or \
            PacketType.UNSEQUENCED in kinds, (texts, kinds[-5:])
        with pytest.raises(OSError, match="No space left"):
            await asyncio.wait_for(task, 20)
        w.close()
        await fix.close()
    asyncio.run(asyncio.wait_for(main(), 60))
