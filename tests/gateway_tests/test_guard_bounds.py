"""Per-session costs are bounded (issue 36, item 2): a binary login replaying from sequence 1
reads its stream a chunk at a time (never the whole stream at once), and FIX ResendRequests
sent in a burst are merged (at most one resend runs and one waits per session) instead of each
resending the whole history. Every wait is bounded."""

from __future__ import annotations

import asyncio
import logging
import time

from fix_helpers import client, fix_port, px, raw_logon, raw_msg, read_raw
from ouch_fixtures import login, ouch_port, run

from exsim.exchange.gateway import binary_server
from exsim.exchange.gateway.guard import Guard, Limits
from exsim.exchange.schema import Side


def test_a_replay_from_one_reads_the_stream_a_chunk_at_a_time(tmp_path):
    async def main():
        async with ouch_port(tmp_path) as (gw, srv):
            c = await login(srv)
            n = 3 * binary_server.SEND_CHUNK + 10
            for i in range(n):
                await c.enter(f"t{i}", "JPM", Side.BUY, 1, 100 + i % 7)
            for _ in range(200):
                if c.next_seq > n:
                    break
                await asyncio.sleep(0.05)
            await c.close()
            reads = []
            real = gw.replay_stream

            async def spy(stream, after, limit):
                out = await real(stream, after, limit)
                reads.append(len(out))
                return out
            gw.replay_stream = spy
            again = await login(srv, seq=1)
            for _ in range(200):
                if again.next_seq > n:
                    break
                await asyncio.sleep(0.05)
            assert again.next_seq > n               # everything replayed, in order
            assert reads and max(reads) <= binary_server.SEND_CHUNK
            await again.close()
    run(main())


def test_a_burst_of_resend_requests_runs_at_most_two_resends(tmp_path):
    async def main():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            for i in range(40):
                a.new_order(f"R{i}", "JPM", "buy", 1, px(gw, "JPM", 100))
            for _ in range(40):
                await a.expect("8")
            await a.close()
            r, w, logon = await raw_logon(port, seq=a.next_out)
            w.write(b"".join(raw_msg("2", a.next_out + 1 + k, [(7, 1), (16, 0)])
                             for k in range(50)))
            got = await read_raw(r, None, timeout=3)
            resent_first = [m for m in got if m is not None and m.seq == 2]
            assert 1 <= len(resent_first) <= 2, len(resent_first)
            w.close()
    run(main())


def test_market_data_subscribe_churn_over_a_deep_book_is_refused_past_its_budget(tmp_path,
                                                                                 monkeypatch):
    from exsim.exchange.gateway.core import Request
    from exsim.exchange.gateway.fix import marketdata

    monkeypatch.setattr(marketdata, "SNAPSHOT_LEVELS_PER_S", 400)   # a burst of 2,000 levels

    def v(rid, kind):
        return [(262, rid), (263, kind), (264, 0), (267, 2), (269, "0"), (269, "1"),
                (146, 1), (55, "JPM")]

    async def main():
        async with fix_port(tmp_path) as (gw, port):
            acct = gw.accounts.get("acct1")
            for i in range(500):    # 500 bid levels
                gw.submit(Request("new", acct, "fix:acct1", f"L{i}", "JPM", side=0,
                                  price=1000 + i, qty=1))
            a = await client(port, "acct0")
            answers = []
            for k in range(12):     # subscribe and unsubscribe as fast as allowed
                a.send("V", v(f"S{k}", "1"))
                m = await a.expect("W", "Y", timeout=10)
                answers.append(m.type if m.type == "W" else f"Y{m.get(281)}")
                if m.type == "W":
                    a.send("V", v(f"S{k}", "2"))
            # 2,000 levels of budget: a few snapshots of 500, then refusals naming the
            # bandwidth (281=2) instead of one more full snapshot per request
            assert answers[:3] == ["W"] * 3 and answers[-6:] == ["Y2"] * 6, answers
            await a.close()
    run(main())


def test_refused_connections_are_warned_about_once_a_second_per_address(caplog):
    """A client opening thousands of connections a second past its address's limit gets them
    refused, counted, and one warning a second, not one each (the log would grow without
    bound and its writes cost the event loop)."""
    g = Guard(Limits(preauth_per_address=1, preauth_grace_s=0.001))
    try:
        assert g.admit("binary", ("10.0.0.1", 1), lambda: None) is not None
        time.sleep(0.01)   # the first connection is past its grace: it counts
        with caplog.at_level(logging.WARNING, logger="exsim.gateway.auth"):
            refused = [g.admit("binary", ("10.0.0.1", 2 + i), lambda: None) for i in range(500)]
        assert refused == [None] * 500 and g.refused["preauth_per_address"] == 500
        lines = [r.getMessage() for r in caplog.records if "10.0.0.1" in r.getMessage()]
        assert 1 <= len(lines) <= 3, lines
    finally:
        g.close()
