"""Fuzzed inbound bytes on the binary port (hypothesis): garbage, wrong lengths, truncated and
oversized packets, before and after the login. Each example must end in answers the protocol
allows or a clean disconnect, the server must log no error, and another session must still
trade right after it.

One gateway serves all examples, in its own thread and event loop; each example runs its
clients in a fresh loop with a deadline."""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import threading

import pytest
from gw_fixtures import PASSWORD, make_accounts, running_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ouch_fixtures import read_until_quiet

from exsim.exchange.gateway import binary_server, ouch
from exsim.exchange.gateway.client.ouch import OuchClient
from exsim.exchange.gateway.framing import PacketType, frame
from exsim.exchange.schema import OrderType, Side, Tif


class _Errors(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Yield (port, error records) of a binary port served by a background thread."""
    data_dir = tmp_path_factory.mktemp("ouch_fuzz") / "d"
    ready, box = threading.Event(), {}
    errors = _Errors()
    for name in ("exsim.exchange.gateway.binary_server", "exsim.gateway"):
        logging.getLogger(name).addHandler(errors)

    async def serve():
        async with running_gateway(data_dir, make_accounts(4)) as gw:
            srv = await binary_server.start(gw, "127.0.0.1", 0, login_timeout_s=1.0, idle_s=2.0)
            box["stop"], box["port"] = asyncio.Event(), srv.port
            box["loop"] = asyncio.get_running_loop()
            ready.set()
            await box["stop"].wait()
            srv.close()
            await srv.wait_closed()

    t = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    t.start()
    assert ready.wait(120), "the fuzz server did not start"
    yield box["port"], errors.records
    box["loop"].call_soon_threadsafe(box["stop"].set)
    t.join(30)
    for name in ("exsim.exchange.gateway.binary_server", "exsim.gateway"):
        logging.getLogger(name).removeHandler(errors)


_tokens = itertools.count()


def _valid_messages():
    enter = ouch.ENTER.pack(token="FZ", side=Side.BUY, qty=1, symbol="JPM", price=14000,
                            order_type=OrderType.LIMIT, tif=Tif.GTC, display_qty=0, min_qty=0,
                            stop_price=0, expire_ts=0, post_only=False)
    return [enter, ouch.CANCEL.pack(token="FZ"),
            ouch.REPLACE.pack(token="FZ", new_token="FZ2", qty=2, price=14000, stop_price=0)]


def _mutated(data: st.DataObject) -> bytes:
    base = data.draw(st.sampled_from(_valid_messages()))
    how = data.draw(st.sampled_from(["as is", "truncate", "extend", "flip"]))
    if how == "truncate":
        return base[:data.draw(st.integers(0, len(base) - 1))]
    if how == "extend":
        return base + data.draw(st.binary(min_size=1, max_size=40))
    if how == "flip":
        i = data.draw(st.integers(0, len(base) - 1))
        return base[:i] + bytes([data.draw(st.integers(0, 255))]) + base[i + 1:]
    return base


def _packet(data: st.DataObject) -> bytes:
    ptype = data.draw(st.sampled_from([PacketType.UNSEQUENCED, PacketType.CLIENT_HEARTBEAT,
                                       PacketType.DEBUG, PacketType.LOGIN_REQUEST,
                                       PacketType.LOGOUT_REQUEST, ord("S"), 0, 255]))
    payload = _mutated(data) if data.draw(st.booleans()) else data.draw(st.binary(max_size=200))
    shape = data.draw(st.sampled_from(["right", "right", "right", "short", "zero", "huge"]))
    if shape == "short":        # the length claims more than is sent: the stream ends inside
        return struct.pack(">HB", len(payload) + 5, ptype) + payload
    if shape == "zero":
        return b"\0\0" + bytes([ptype]) + payload
    if shape == "huge":
        return struct.pack(">HB", data.draw(st.integers(200, 0xFFFF)), ptype) + payload
    return struct.pack(">HB", len(payload) + 1, ptype) + payload


ALLOWED = {PacketType.LOGIN_ACCEPTED, PacketType.LOGIN_REJECTED, PacketType.SEQUENCED,
           PacketType.UNSEQUENCED, PacketType.SERVER_HEARTBEAT, PacketType.END_OF_SESSION}


async def _fuzz_once(port: int, login_first: bool, chunks: list[bytes]):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if login_first:
        writer.write(frame(PacketType.LOGIN_REQUEST, ouch.encode_login("acct0", PASSWORD, "", 0)))
    try:
        for c in chunks:
            writer.write(c)
        await writer.drain()
        writer.write_eof()        # a truncated packet then ends inside the stream
    except OSError:               # the server may disconnect before everything was sent
        pass
    packets, closed = await read_until_quiet(reader, 0.5)
    writer.close()
    for ptype, payload in packets:
        assert ptype in ALLOWED, packets
        if ptype in (PacketType.SEQUENCED, PacketType.UNSEQUENCED):
            ouch.decode_server(payload)        # every message is well formed
        if ptype == PacketType.UNSEQUENCED:
            assert ouch.decode_server(payload).reason >= 200   # the port's own rejects only
    if not login_first:
        assert {t for t, _ in packets} <= {PacketType.LOGIN_ACCEPTED, PacketType.LOGIN_REJECTED,
                                           PacketType.SEQUENCED, PacketType.SERVER_HEARTBEAT,
                                           PacketType.UNSEQUENCED}


async def _other_session_trades(port: int):
    c = await OuchClient.connect("127.0.0.1", port, "acct1", PASSWORD, seq=0, timeout=5.0)
    token = f"OK{next(_tokens)}"
    await c.enter(token, "JPM", Side.SELL, 1, 20000)
    got = await c.recv_until(lambda m: m.msg.token == token, timeout=5.0)
    assert got[-1].kind == "Accepted"
    await c.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_packets_get_rejects_or_a_disconnect_and_others_keep_trading(served, data):
    port, errors = served
    login_first = data.draw(st.booleans())
    if data.draw(st.booleans()):
        chunks = [data.draw(st.binary(max_size=300))]
    else:
        chunks = [_packet(data) for _ in range(data.draw(st.integers(1, 6)))]

    async def main():
        await _fuzz_once(port, login_first, chunks)
        await _other_session_trades(port)
    asyncio.run(asyncio.wait_for(main(), 20))
    assert not errors, [r.getMessage() for r in errors]
