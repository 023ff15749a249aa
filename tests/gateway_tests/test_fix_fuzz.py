"""Hostile FIX input (hypothesis): garbage, truncated, oversized, wrong checksum or length, and
well-framed messages with random fields, before and after logon. The gateway answers with
session messages (Reject, Logout, ...) or disconnects, never crashes, and another session keeps
trading through all of it."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from fix_helpers import client, fix_port, logon_body, raw_msg, read_raw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exsim.exchange.gateway.fix.codec import build, utc_timestamp

ANSWERS = {"0", "1", "2", "3", "4", "5", "8", "9", "j"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro, timeout=60):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    errors: list = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    for name in ("exsim.gateway", "asyncio"):
        logging.getLogger(name).addHandler(handler)
    cm = fix_port(tmp_path_factory.mktemp("fuzz"), max_message_size=1024, max_garbled=4)
    gw, port = call(cm.__aenter__())
    peer = call(client(port, "acct1"))
    try:
        yield call, gw, port, peer, errors
    finally:
        for name in ("exsim.gateway", "asyncio"):
            logging.getLogger(name).removeHandler(handler)
        call(peer.logout())
        call(cm.__aexit__(None, None, None))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _valid(seq: int) -> bytes:
    return raw_msg("D", seq, [(11, "FZ"), (55, "JPM"), (54, "1"), (60, utc_timestamp(0)),
                              (38, 1), (40, "2"), (44, "1.00")], sender="acct0")


@st.composite
def mutated(draw):
    raw = bytearray(_valid(2))
    how = draw(st.sampled_from(["truncate", "flip", "checksum", "length", "oversize",
                                "soh", "drop_field"]))
    if how == "truncate":
        raw = raw[:draw(st.integers(0, len(raw) - 1))]
    elif how == "flip":
        i = draw(st.integers(0, len(raw) - 1))
        raw[i] = draw(st.integers(0, 255))
    elif how == "checksum":
        raw[-4:-1] = b"%03d" % ((int(raw[-4:-1]) + draw(st.integers(1, 255))) % 256)
    elif how == "length":
        start = raw.index(b"9=") + 2
        end = raw.index(b"\x01", start)
        raw[start:end] = str(draw(st.integers(0, 10**7))).encode()
    elif how == "oversize":
        raw = bytearray(raw_msg("D", 2, [(58, "x" * draw(st.integers(1000, 5000)))],
                                sender="acct0"))
    elif how == "soh":
        i = draw(st.integers(0, len(raw) - 1))
        raw[i:i] = b"\x01"
    else:
        fields = bytes(raw).split(b"\x01")[3:-2]
        gone = draw(st.sampled_from(fields))
        raw = bytearray(raw_msg("D", 2, [(int(f.split(b"=")[0]), f.split(b"=", 1)[1])
                                         for f in fields if f != gone and b"=" in f
                                         and f.split(b"=")[0].isdigit()
                                         and int(f.split(b"=")[0]) not in (34, 49, 52, 56)],
                                sender="acct0"))
    return bytes(raw)


random_fields = st.builds(
    lambda t, pairs: build(t, "acct0", "EXSIM", 2, utc_timestamp(0), pairs),
    st.sampled_from(["0", "1", "2", "3", "4", "5", "A", "D", "F", "G", "V", "j", "ZZ"]),
    st.lists(st.tuples(st.integers(1, 2000),
                       st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e),
                               min_size=1, max_size=12)), max_size=12))

payloads = st.one_of(st.binary(max_size=400), mutated(), random_fields)


async def _connect(port: int, logged_on: bool):
    for _ in range(40):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        if not logged_on:
            return r, w
        w.write(raw_msg("A", 1, logon_body(reset=True), sender="acct0"))
        got = await read_raw(r, 1, timeout=5)
        if got and got[0] is not None and got[0].type == "A":
            return r, w
        w.close()
        await asyncio.sleep(0.05)   # the previous example's session is still ending
    raise AssertionError("could not log on")


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payload=payloads, logged_on=st.booleans())
def test_hostile_input_gets_answers_or_a_disconnect_and_others_keep_trading(served, payload,
                                                                             logged_on):
    call, gw, port, peer, errors = served

    async def one():
        r, w = await _connect(port, logged_on)
        w.write(payload)
        got = await read_raw(r, timeout=0.3)
        for m in got:
            assert m is None or m.type in ANSWERS, m
        if not logged_on:
            # before a logon, anything but a valid Logon ends the connection unanswered
            assert all(m is None or m.type in ("A", "5", "2", "8") for m in got)
        w.close()
        cid = peer.new_client_id()
        peer.new_order(cid, "JPM", "sell", 1, "5.00", tif="1")
        ack = await peer.expect("8", where=lambda m: m.get(11) == cid, timeout=10)
        assert ack[150] == "0"

    call(one())
    assert gw.failed is None
    assert not errors, [e.getMessage() for e in errors]   # no session died of an exception
