"""Review finding: the ExecID (17) of an ExecutionReport the FIX layer makes itself (a price
that is not a whole number of ticks, an order over the rate limit) is ``<stream>:L<MsgSeqNum>``.
MsgSeqNums start again at 1 after a Logon with ResetSeqNumFlag=Y (141=Y), so two different
rejections get the same ExecID: a client (or a drop-copy consumer) that de-duplicates by ExecID,
as FIX intends (ExecID unique per day), drops the second one. Expected: ExecIDs that are never
reused (e.g. from a durable counter or the gateway clock), like the ``<stream>:<rseq>`` of
journaled reports. Fix: exchange/gateway/fix/session.py, FixSession._order (the exec_id given to
refusal_body).
"""

from __future__ import annotations

import pytest

from fix_helpers import client, fix_port, run

pytestmark = pytest.mark.xfail(strict=True, reason="review: refusal ExecIDs fix:<acct>:L<seq> "
                               "repeat after a sequence reset (FixSession._order)")


def test_refusal_exec_ids_are_not_reused_after_a_sequence_reset(tmp_path):
    async def main():
        async with fix_port(tmp_path / "gw") as (gw, port):
            seen = []
            for n in range(2):
                c = await client(port, "acct0", reset=True)
                c.new_order(f"BAD{n}", "JPM", "buy", 1, "150.001")   # not a whole tick
                m = await c.expect("8", timeout=10)
                assert m.get(150) == "8" and m.get(11) == f"BAD{n}"
                seen.append(m.get(17))
                await c.logout()
            return seen

    ids = run(main())
    assert len(set(ids)) == 2, f"two different rejections share ExecID {ids[0]!r}"
