"""The FIX session layer over real sockets: logon checks, sequence numbers (too low, gaps,
resend with PossDupFlag and GapFill, SequenceReset), persistence across a gateway restart,
heartbeats and timeouts, framing limits."""

from __future__ import annotations

import asyncio

from fix_helpers import client, fix_port, logon_body, px, raw_logon, raw_msg, read_raw, run

from exsim.exchange.gateway.client.fix import FixClient, FixClientError


def test_logon_is_refused_for_a_bad_password_target_or_heartbeat(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            for msg in (raw_msg("A", 1, logon_body(password="wrong")),
                        raw_msg("A", 1, logon_body(), target="OTHER"),
                        raw_msg("A", 1, logon_body(hb=0)),
                        raw_msg("A", 1, logon_body(), sender="nobody")):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(msg)
                got = await read_raw(r, timeout=5)
                assert got[0].type == "5" and got[-1] is None, got
                w.close()
            wrong = raw_msg("A", 1, logon_body(password="wrong"))
            nobody = raw_msg("A", 1, logon_body(), sender="nobody")
            texts = []
            for msg in (wrong, nobody):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(msg)
                texts.append((await read_raw(r, 1, timeout=5))[0][58])
                w.close()
            assert texts[0] == texts[1]   # no probing for account names
            # an order before the logon: disconnected without an answer
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(raw_msg("D", 1, [(11, "x")]))
            assert await read_raw(r, timeout=5) == [None]
            # a second session of the same account is refused while the first is on
            a = await client(port, "acct0")
            try:
                await client(port, "acct0")
                raise AssertionError("second logon accepted")
            except FixClientError as e:
                assert "already" in str(e)
            await a.logout()
    run(body())


def test_no_logon_within_the_timeout_is_disconnected(tmp_path):
    async def body():
        async with fix_port(tmp_path, logon_timeout=0.5) as (gw, port):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"8=FIX.4.4\x019=5")   # half a message, then silence
            assert await read_raw(r, timeout=5) == [None]
    run(body())


def test_seq_too_low_logs_out_and_a_gap_asks_for_a_resend(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            r, w, _ = await raw_logon(port)
            w.write(raw_msg("0", 5, []))                 # expected 2
            rr = await read_raw(r, 1)
            assert rr[0].type == "2" and (rr[0][7], rr[0][16]) == ("2", "0")
            w.write(raw_msg("4", 2, [(123, "Y"), (36, 6)], poss_dup=True))   # gap fill 2..5
            w.write(raw_msg("1", 6, [(112, "hello")]))
            hb = await read_raw(r, 1)
            assert hb[0].type == "0" and hb[0][112] == "hello"
            w.write(raw_msg("1", 6, [(112, "again")]))   # 6 again, no PossDupFlag
            out = await read_raw(r, timeout=3)
            assert out[0].type == "5" and "too low" in out[0][58] and out[-1] is None
            # SequenceReset (reset mode) may not lower the expected number
            r, w, _ = await raw_logon(port, seq=8)
            w.write(raw_msg("4", 1, [(36, 3)]))
            rej = await read_raw(r, 1)
            assert rej[0].type == "3" and rej[0][371] == "36"
            w.close()
    run(body())


def test_resend_request_repeats_reports_and_gap_fills_admin(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            for i in range(3):
                a.new_order(f"R{i}", "JPM", "buy", 1, px(gw, "JPM", 100 + i))
            first = [await a.expect("8") for _ in range(3)]
            a.send("1", [(112, "t")])                   # makes an admin Heartbeat (seq 5)
            await asyncio.sleep(0.2)
            a.new_order("R3", "JPM", "buy", 1, px(gw, "JPM", 90))
            last = await a.expect("8")
            await a.close()
            r, w, logon = await raw_logon(port, seq=a.next_out)
            w.write(raw_msg("2", a.next_out + 1, [(7, 1), (16, 0)]))
            got = await read_raw(r, 7, timeout=5)
            kinds = [(m.type, m.seq, m.get(123), m.get(43)) for m in got]
            # 1 Logon, 5 Heartbeat, 7 the new Logon -> gap fills; 2-4 and 6 resent
            assert kinds == [("4", 1, "Y", "Y"), ("8", 2, None, "Y"), ("8", 3, None, "Y"),
                             ("8", 4, None, "Y"), ("4", 5, "Y", "Y"), ("8", 6, None, "Y"),
                             ("4", 7, "Y", "Y")]
            assert (got[0][36], got[4][36], got[6][36]) == ("2", "6", "8")
            for old, new in zip(first + [last], got[1:4] + got[5:6]):
                assert new[122] == old[52]
                strip = {8, 9, 34, 43, 52, 122, 10}
                assert [f for f in new.fields if f[0] not in strip] == \
                       [f for f in old.fields if f[0] not in strip]
            w.close()
    run(body())


def test_state_survives_a_restart_and_missed_reports_arrive_after_logon(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            b = await client(port, "acct1")
            a.new_order("S1", "JPM", "sell", 5, px(gw, "JPM", 100), tif="1")
            ack = await a.expect("8")
            await a.close()                               # a leaves; b trades against it
            b.new_order("S2", "JPM", "buy", 2, px(gw, "JPM", 100))
            await b.expect("8", where=lambda m: m.get(150) == "F")
            await b.logout()
        async with fix_port(tmp_path) as (gw, port):      # the gateway restarted
            a.port = port
            await a.reconnect()
            fill = await a.expect("8")
            assert (fill[150], fill[11], fill[32], fill[151]) == ("F", "S1", "2", "3")
            assert fill.seq == ack.seq + 2               # numbering continued (+ the Logon)
            assert fill[17] == "fix:acct0:2"
            await a.close()
            # a resend after the restart repeats the same content under the same seqs
            r, w, _ = await raw_logon(port, seq=a.next_out)
            w.write(raw_msg("2", a.next_out + 1, [(7, ack.seq), (16, fill.seq)]))
            got = [m for m in await read_raw(r, 3, timeout=5) if m and m.type == "8"]
            strip = {8, 9, 34, 43, 52, 122, 10}
            assert [[f for f in m.fields if f[0] not in strip] for m in got] == \
                   [[f for f in m.fields if f[0] not in strip] for m in (ack, fill)]
            assert [m.seq for m in got] == [ack.seq, fill.seq]
            w.close()
    run(body())


def test_reconnect_with_the_client_behind_gets_the_gap_resent(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            a.new_order("G1", "JPM", "buy", 1, px(gw, "JPM", 100))
            ack = await a.expect("8")
            await a.close()
            a.next_in -= 1                               # as if the ack never arrived
            a.received.clear()
            await a.reconnect()
            again = await a.expect("8")
            assert again.seq == ack.seq and again[43] == "Y" and again[17] == ack[17]
            await a.logout()
    run(body())


def test_silent_client_gets_a_test_request_then_is_disconnected(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            r, w, _ = await raw_logon(port, hb=1)
            got = await read_raw(r, timeout=6)
            types = [m.type if m else None for m in got]
            assert "1" in types and types[-2:] == ["5", None], types
    run(body())


def test_framing_limits(tmp_path):
    async def body():
        async with fix_port(tmp_path, max_message_size=256) as (gw, port):
            r, w, _ = await raw_logon(port)
            w.write(b"8=FIX.4.4\x019=100000\x0135=D\x01")
            got = await read_raw(r, timeout=3)
            assert got[0].type == "5" and "limit" in got[0][58] and got[-1] is None
            # a bad checksum is ignored (garbled): the next message shows the gap
            r, w, _ = await raw_logon(port, seq=2)
            bad = bytearray(raw_msg("1", 3, [(112, "x")]))
            bad[-4:-1] = b"000" if bad[-4:-1] != b"000" else b"001"
            w.write(bytes(bad) + raw_msg("1", 4, [(112, "y")]))
            rr = await read_raw(r, 1)
            assert rr[0].type == "2" and rr[0][7] == "3"
            w.write(raw_msg("8=FIX.4.2"[:1], 5, []).replace(b"FIX.4.4", b"FIX.4.2"))
            got = await read_raw(r, timeout=3)
            assert got[0].type == "5" and "BeginString" in got[0][58]
    run(body())


def test_a_logon_backlog_arrives_in_steps_in_order_with_live_reports_after_it(tmp_path):
    """The reports made while a session was away are delivered after its Logon in
    RESEND_CHUNK steps within the port's ``backlog_per_s`` (read off the event loop); an order
    sent meanwhile is reported after the whole backlog, every report once, in stream order."""
    async def body():
        async with fix_port(tmp_path, backlog_per_s=256) as (gw, port):
            a = await client(port, "acct0")
            for i in range(300):
                a.new_order(f"S{i}", "JPM", "sell", 1, px(gw, "JPM", 100), tif="1")
            for _ in range(300):
                await a.expect("8")
            await a.close()
            b = await client(port, "acct1")
            b.new_order("B", "JPM", "buy", 300, px(gw, "JPM", 100))
            await b.expect("8", where=lambda m: m.get(39) == "2", timeout=20)
            await b.logout()
            t0 = asyncio.get_running_loop().time()
            await a.reconnect()
            a.new_order("LIVE", "JPM", "buy", 1, px(gw, "JPM", 90))
            got = [await a.expect("8", timeout=10) for _ in range(301)]
            took = asyncio.get_running_loop().time() - t0
            fills = got[:300]
            assert [m[150] for m in fills] == ["F"] * 300
            assert sorted(m[11] for m in fills) == sorted(f"S{i}" for i in range(300))
            ids = [int(m[17].rsplit(":", 1)[1]) for m in got]
            assert ids == list(range(ids[0], ids[0] + 301))   # stream order, each once
            assert (got[300][11], got[300][150]) == ("LIVE", "0")
            assert took > 0.1   # the second step waited for the port's budget
            await a.logout()
    run(body())


def test_a_sequence_reset_with_its_gap_fill_flag_twice_is_rejected_and_the_session_goes_on(
        tmp_path):
    """Found by test_fix_fuzz: 35=4 with two 123 fields ended the session with an exception
    (FieldError out of _message); it gets a session Reject 373=13 like any repeated tag."""
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            r, w, _ = await raw_logon(port)
            w.write(raw_msg("4", 2, [(123, "N"), (123, "N"), (36, 5)]))
            got = await read_raw(r, 1, timeout=5)
            assert got[0].type == "3" and got[0][373] == "13" and got[0][45] == "2"
            w.write(raw_msg("1", 3, [(112, "still-there")]))
            got = await read_raw(r, 1, timeout=5)
            assert got[0].type == "0" and got[0][112] == "still-there"
            w.close()
    run(body())
