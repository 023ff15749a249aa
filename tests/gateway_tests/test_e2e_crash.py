"""Crash: a real ``exsim serve`` child is SIGKILLed while FIX and binary clients trade, then
restarted on the same data directory (new ports); the clients reconnect and resynchronise by
sequence number (FIX: Logon with their next MsgSeqNums, the gap handled by ResendRequest /
SequenceReset; binary: login with the next sequence number) and trade on.

Asserted after a clean stop, for kills after three different numbers of acknowledgements:
- no acknowledged order is lost: every order a client got an acknowledgement for, before or
  after the crash, is a NEW row of the journal's orders table with that order id and account;
- no report is delivered twice with different content: every copy of a FIX application
  message (same MsgSeqNum; the server's PossDupFlag=Y resends included) and of a report
  (same ExecID = stream:rseq) has the same business content (the body after the standard
  header: only SendingTime / PossDupFlag / OrigSendingTime may differ); on the binary port
  each sequence number is one report;
- the numbering continues: each client's reports, across both connections, are exactly its
  stored stream 1..N in order, the server's MsgSeqNums after the restart go on from before it,
  and reports of orders entered after the restart follow;
- the stored streams agree with the journal, and ``exsim verify`` / ``exsim rerun`` pass.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

from e2e_fixtures import (MIDS, SENTINEL_OFFSET, Flow, NETWORK_S, OuchRecorder, ServeProcess, accounts_file,
                          check_fix_client, check_ouch_client, check_streams_against_journal,
                          core_oracle, expected_fix, fix_business, fix_login, fix_trader,
                          journal, ouch_trader, quiesce, run, stored_streams, symbol_infos,
                          px, wait_until, warm_up)

from exsim.exchange.gateway.fix.codec import build, parse_frame, parse_utc_timestamp, utc_timestamp
from exsim.exchange.schema import Kind

N_FIX, N_OUCH = 3, 3
PACE_S = (0.002, 0.012)   # about 140 messages a second per client
AFTER_S = 1.0             # trading after the restart
FORGOTTEN = 20            # reports acct0 "forgets" before it reconnects


def lost_in_the_crash(client, cid: str) -> None:
    """Number and keep a NewOrderSingle as ``client`` would if its bytes were lost with the
    server (written to a connection that was already dead): its MsgSeqNum is used, so the
    restarted server sees a gap at the Logon and must ask for it again."""
    body = [(11, cid), (55, "JPM"), (54, "1"), (60, utc_timestamp(time.time_ns())), (38, 1),
            (40, "2"), (44, px("JPM", MIDS["JPM"] - SENTINEL_OFFSET)), (59, "1")]
    seq = client.next_out
    client.next_out += 1
    client.sent[seq] = build("D", client.name, client.target, seq,
                             utc_timestamp(time.time_ns()), body)


def utc_ns(raw: bytes) -> int:
    return parse_utc_timestamp(raw, 60)


def acks_of(fixc, ouchc) -> int:
    n = sum(1 for c in fixc for m in c.received if m.type == "8" and m.get(150) == "0")
    return n + sum(1 for r in ouchc for _, g in r.log if g.kind == "Accepted")


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_acks", [150, 500, 1000])
def test_sigkill_mid_session_and_resync(tmp_path, kill_after_acks):
    warm_up(tmp_path)
    acc_path, accts = accounts_file(tmp_path, N_FIX + N_OUCH)
    data = tmp_path / "served"
    srv = ServeProcess(data, acc_path, tmp_path / "serve.log", ports=("fix", "binary"))
    fix_names = [f"acct{i}" for i in range(N_FIX)]
    ouch_names = [f"acct{i}" for i in range(N_FIX, N_FIX + N_OUCH)]
    info = {}

    async def main():
        ports = await srv.start()
        try:
            drop = await fix_login(ports["fix"], "drop0", dropcopy=True)
            fixc = list(await asyncio.gather(*(fix_login(ports["fix"], n) for n in fix_names)))
            ouchc = list(await asyncio.gather(*(OuchRecorder.connect(ports["binary"], n)
                                                for n in ouch_names)))
            flows = {n: Flow(7 * kill_after_acks + i, f"{'f' if i < N_FIX else 'b'}{i}-")
                     for i, n in enumerate(fix_names + ouch_names)}
            orders = {n: {} for n in fix_names}
            stop = asyncio.Event()
            far = time.monotonic() + 3600
            traders = [asyncio.create_task(fix_trader(c, flows[c.name], far, orders[c.name],
                                                      PACE_S, stop)) for c in fixc]
            traders += [asyncio.create_task(ouch_trader(r, flows[r.client.username], far,
                                                        PACE_S, stop)) for r in ouchc]
            t0 = time.monotonic()
            await wait_until(lambda: acks_of(fixc, ouchc) >= kill_after_acks, 30,
                             f"{kill_after_acks} acknowledgements")
            srv.kill()                        # mid-session: the traders are still sending
            info["kill_ns"] = time.time_ns()
            info["acks_before"] = acks_of(fixc, ouchc)
            info["until_kill"] = time.monotonic() - t0
            stop.set()
            await asyncio.wait_for(asyncio.gather(*traders), NETWORK_S)
            await wait_until(lambda: not any(c.logged_on for c in fixc + [drop]), NETWORK_S,
                             "the FIX clients to see the connection end")
            for r in ouchc:
                await r.pump_done()
            before = {c.name: len(c.frames) for c in fixc + [drop]}
            for c in fixc[1:]:
                lost_in_the_crash(c, f"L{c.name}")
            # acct0 forgets the last reports it had (as a client that keeps its sequence numbers
            # lazily would): it must get them again by ResendRequest, PossDupFlag=Y, same content
            fixc[0].next_in = max(1, fixc[0].next_in - FORGOTTEN)
            info["binary_next"] = {r.client.username: r.client.next_seq for r in ouchc}

            t1 = time.monotonic()
            ports = await srv.start()         # the same directory; new ports
            info["restart"] = time.monotonic() - t1
            for c in fixc + [drop]:
                c.port = ports["fix"]
                await asyncio.wait_for(c.reconnect(timeout=NETWORK_S), NETWORK_S + 1)
            for r in ouchc:
                nxt = await r.reconnect(ports["binary"])
                # the numbering goes on from the first report this client has not seen
                assert nxt == info["binary_next"][r.client.username]
            stop = asyncio.Event()
            until = time.monotonic() + AFTER_S
            await asyncio.wait_for(asyncio.gather(
                *(fix_trader(c, flows[c.name], until, orders[c.name], PACE_S) for c in fixc),
                *(ouch_trader(r, flows[r.client.username], until, PACE_S) for r in ouchc)),
                AFTER_S + NETWORK_S)
            await quiesce(fixc, ouchc, {"F0": drop}, accts)
            await asyncio.gather(*(c.logout(timeout=5) for c in fixc + [drop]),
                                 *(r.close() for r in ouchc))
        finally:
            rc = await srv.stop()
        assert rc == 0, srv.log()
        return fixc, ouchc, drop, before

    try:
        fixc, ouchc, drop, before = run(main(), 120)
    finally:
        srv.kill()   # a no-op after a clean stop; never leave a child behind
    streams = stored_streams(data)
    jr = journal(data)
    symbols = symbol_infos(data)
    check_streams_against_journal(streams, jr, accts)
    fills = {int(f["trade_id"]): f for f in jr["fills"]}
    new_rows = {int(o["order_id"]): o for o in jr["orders"] if int(o["kind"]) == Kind.NEW}
    by_trader = {a.trader: a.name for a in accts}

    for c in fixc:
        check_fix_client(c, f"fix:{c.name}", streams, symbols, fills, dedupe=c is fixc[0])
    check_fix_client(drop, "dropcopy:F0", streams, symbols, fills)
    for r in ouchc:
        check_ouch_client(r, streams, fills)

    for c in fixc + [drop]:
        stream = "dropcopy:F0" if c is drop else f"fix:{c.name}"
        by_seq, by_exec = defaultdict(set), defaultdict(set)
        for _, raw in c.frames:
            m = parse_frame(raw)
            seq, kind = int(m.get(34)), m.message_type.decode()
            by_seq[seq].add(fix_business(raw))
            if kind == "8":
                by_exec[m.get(17).decode()].add(fix_business(raw))
        app = {s for s, v in by_seq.items() if any(k in ("8", "9") for k, _ in v)}
        for s in app:
            assert len(by_seq[s]) == 1, \
                f"{c.name}: MsgSeqNum {s} came with different content: {by_seq[s]}"
        for e, v in by_exec.items():
            assert len(v) == 1, f"{c.name}: ExecID {e} came with different content"
            st, rseq = e.rsplit(":", 1)
            assert st == stream and v == {expected_fix(streams[st][int(rseq) - 1], symbols,
                                                       dropcopy=c is drop)}, e
        # the server's numbering goes on after the restart (no reset to 1)
        pre = [int(parse_frame(raw).get(34)) for k, raw in c.frames if k == 1]
        post = [int(parse_frame(raw).get(34)) for k, raw in c.frames if k == 2
                if parse_frame(raw).get(43) != b"Y"]
        assert pre and post and min(post) > max(pre), (c.name, max(pre), min(post))
        assert len(c.frames) > before[c.name], f"{c.name}: nothing after the restart"

    # no acknowledged order is lost, before or after the crash
    acked = 0
    for c in fixc:
        for m in c.received:
            if m.type == "8" and m.get(150) == "0":
                row = new_rows.get(int(m[37]))
                assert row is not None and by_trader[int(row["trader"])] == c.name, m.raw
                acked += 1
    for r in ouchc:
        for _, g in r.log:
            if g.kind == "Accepted":
                row = new_rows.get(g.msg.order_id)
                assert row is not None and by_trader[int(row["trader"])] == r.client.username
                acked += 1
    assert acked >= info["acks_before"]
    # trading went on after the restart: every client has acknowledgements on its new connection
    for c in fixc:
        post = [parse_frame(raw) for k, raw in c.frames if k == 2]
        assert any(m.message_type == b"8" and m.get(150) == b"0" for m in post), c.name
        if c is fixc[0]:
            continue
        # the order whose bytes the crash ate: the server asked for it again and took it
        assert any(m.message_type == b"2" for m in post), f"{c.name}: no ResendRequest"
        assert any(m.message_type == b"8" and m.get(11) == f"L{c.name}".encode()
                   and m.get(150) == b"0" for m in post), f"{c.name}: the resent order"
    assert sum(1 for k, raw in fixc[0].frames if k == 2 and parse_frame(raw).get(43) == b"Y"
               and parse_frame(raw).message_type in (b"8", b"9")) > 0, "nothing was resent"
    for r in ouchc:
        assert any(g.kind == "Accepted" for k, g in r.log if k == 2), r.client.username

    # how much resynchronisation there was: reports made before the kill but first seen after
    # the restart, and FIX resends (PossDupFlag=Y)
    late = sum(1 for c in fixc for k, raw in c.frames if k == 2
               for m in [parse_frame(raw)] if m.message_type in (b"8", b"9")
               and m.get(60) is not None and m.get(43) != b"Y"
               and utc_ns(m.get(60)) < info["kill_ns"])
    late += sum(1 for r in ouchc for k, g in r.log if k == 2 and g.seq is not None
                and g.msg.ts < info["kill_ns"])
    possdup = sum(1 for c in fixc + [drop] for k, raw in c.frames if k == 2
                  and parse_frame(raw).get(43) == b"Y")

    from exsim.replay.cli import main as cli

    assert cli(["verify", str(data)]) == 0
    assert cli(["rerun", str(data)]) == 0
    core_oracle(data, accts)
    print(f"\nkill after {info['acks_before']} acks ({info['until_kill']:.2f} s of trading), "
          f"restart {info['restart']:.2f} s, {len(jr['orders'])} messages, {len(fills)} fills; "
          f"{late} reports made before the kill delivered after it, {possdup} FIX resends")


def test_resend_request_beyond_a_gap_is_answered(tmp_path):
    """After a SIGKILL, a client that missed the last reports AND whose last order's bytes died
    with the server reconnects: the gateway's Logon is beyond the client's gap and the gateway
    asks for the lost order (ResendRequest) in the same breath. Both sides must resync: the
    missed reports come again (PossDupFlag=Y) and the lost order is taken and acknowledged."""
    warm_up(tmp_path)
    acc_path, _ = accounts_file(tmp_path, 2)
    srv = ServeProcess(tmp_path / "served", acc_path, tmp_path / "serve.log", ports=("fix",))

    async def main():
        ports = await srv.start()
        try:
            c = await fix_login(ports["fix"], "acct0")   # the library's behaviour
            for i in range(5):
                c.new_order(f"x{i}", "JPM", "1", 1, px("JPM", MIDS["JPM"] - SENTINEL_OFFSET),
                            tif="1")
            await wait_until(lambda: sum(m.type == "8" for m in c.received) == 5, NETWORK_S,
                             "5 acknowledgements")
            srv.kill()
            await wait_until(lambda: not c.logged_on, NETWORK_S, "the end of the connection")
            lost_in_the_crash(c, "lost1")
            c.next_in -= 2                  # the last two reports never arrived
            c.port = (await srv.start())["fix"]
            await asyncio.wait_for(c.reconnect(timeout=NETWORK_S), NETWORK_S + 1)
            c.new_order("after1", "JPM", "1", 1, px("JPM", MIDS["JPM"] - SENTINEL_OFFSET),
                        tif="1")
            want = {"lost1", "after1"}
            await wait_until(lambda: want <= {m.get(11) for m in c.received if m.type == "8"},
                             5, "the lost order and the next one to be acknowledged")
            await c.logout(timeout=5)
            return c.received
        finally:
            await srv.stop()
    try:
        received = run(main(), 60)
    finally:
        srv.kill()
    acks = {m.get(11) for m in received if m.type == "8" and m.get(150) == "0"}
    assert {"lost1", "after1"} <= acks, sorted(acks)
    resent = [m for m in received if m.type == "8" and m.get(43) == "Y"]
    assert resent, "the two reports that never arrived were not resent (PossDupFlag=Y)"
