"""The ExecID (17) of an ExecutionReport the FIX layer makes itself (a price that is not a whole
number of ticks, an order over the rate limit) is never reused, also after a Logon with
ResetSeqNumFlag=Y restarts the MsgSeqNums: FIX intends ExecIDs unique, and a client or drop-copy
consumer de-duplicates by them."""

from __future__ import annotations

import pytest

from fix_helpers import client, fix_port, run


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
