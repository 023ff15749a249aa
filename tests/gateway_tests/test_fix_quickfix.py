"""A standard FIX 4.4 engine takes every message the gateway sends: QuickFIX (C++, Debian's
libquickfix-dev) with its stock FIX44.xml and validation on drives a scripted session through
logon, heartbeats and a TestRequest, every order type and time in force, cancel, replace,
IOC / FOK, rejects, a triggered stop, market data (snapshot and incremental), drop copy and
logout, and refuses none of them (0 session Rejects, 0 BusinessMessageRejects); a session with
exsim's extensions, validated with the merged dictionary, does the same (quickfix_engine.py
says where the engine and the dictionary come from; the only skip is QuickFIX missing)."""

from __future__ import annotations

import asyncio
import time

from fix_helpers import PASSWORD, fix_port, run
from quickfix_engine import engine

from exsim.exchange.gateway.fix import dialect
from exsim.exchange.gateway.fix.codec import build, utc_timestamp

SETTINGS = """[DEFAULT]
ConnectionType=initiator
BeginString=FIX.4.4
TargetCompID=EXSIM
SocketConnectHost=127.0.0.1
SocketConnectPort={port}
HeartBtInt=1
ReconnectInterval=1
StartTime=00:00:00
EndTime=00:00:00
ResetOnLogon=Y
UseDataDictionary=Y
DataDictionary={stock}
ValidateUserDefinedFields=Y
ValidateFieldsOutOfOrder=Y
ValidateFieldsHaveValues=Y
AllowUnknownMsgFields=N
CheckLatency=N
Password={password}
"""
# acct0 / acct2 (firm F0), acct1 (F1) trade; drop0 is F0's drop copy; feed gets market data;
# acct2 speaks the extensions and validates with the merged dictionary
SESSIONS = ["acct0", "acct1", "drop0", "feed"]


class QuickFix:
    """The QuickFIX client process: ``send`` a message from a session, ``wait`` for a line."""

    def __init__(self, proc):
        self.proc, self.lines, self.changed = proc, [], asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    async def _read(self):
        while line := await self.proc.stdout.readline():
            kind, _, rest = line.decode().rstrip("\n").partition(" ")
            sender, _, raw = rest.partition(" ")
            pairs = [(int(t), v) for t, _, v in (p.partition("=") for p in raw.split("|") if p)]
            self.lines.append((kind, sender, dict(pairs), pairs))
            self.changed.set()

    def send(self, sender: str, msg_type: str, body: list) -> None:
        raw = build(msg_type, sender, "EXSIM", 1, utc_timestamp(time.time_ns()), body)
        self.proc.stdin.write(b"SEND %s %s\n" % (sender.encode(), raw.replace(b"\x01", b"|")))

    def order(self, sender: str, cid: str, side: str, qty: int, ord_type: str = "2", **tags):
        body = [(11, cid), (55, tags.pop("symbol", "JPM")), (54, side),
                (60, utc_timestamp(time.time_ns())), (38, qty), (40, ord_type)]
        self.send(sender, "D", body + [(int(k[1:]), v) for k, v in tags.items()])

    async def wait(self, kind: str, sender: str, timeout: float = 10.0, **want) -> dict:
        """Return the first line of ``kind`` from ``sender`` holding every field of ``want``
        (keyword t<tag>=value; a repeated tag matches if any of its values does)."""
        want = {(int(k[1:]), str(v)) for k, v in want.items()}
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for k, s, fields, pairs in self.lines:
                if k == kind and s == sender and want <= set(pairs):
                    return fields
            self.changed.clear()
            left = deadline - asyncio.get_running_loop().time()
            try:
                assert left > 0
                await asyncio.wait_for(self.changed.wait(), left)
            except (AssertionError, asyncio.TimeoutError):
                tail = "\n".join(f"{k} {s} {p}" for k, s, f, p in self.lines
                                 if k not in ("ADMIN", "APP") or f.get(35) not in "0WX")
                raise AssertionError(f"no {kind} from {sender} with {want}; last:\n{tail}")

    def refusals(self) -> list:
        return [x[:2] + (x[3],) for x in self.lines if x[0] in ("SENT_REJECT", "SENT_BMR",
                                                                "ERROR")]


def test_quickfix_with_its_stock_dictionary_takes_every_message(tmp_path):
    binary, stock = engine()
    merged = tmp_path / "FIX44-exsim.xml"
    dialect.merge_dictionary(str(stock), str(merged))

    async def body():
        from exsim.exchange.gateway.fix import server
        from gw_fixtures import running_gateway
        async with running_gateway(tmp_path / "served") as gw:
            srv = await server.start(gw, "127.0.0.1", 0)
            port = srv.sockets[0].getsockname()[1]
            cfg = SETTINGS.format(port=port, stock=stock, password=PASSWORD)
            cfg += "".join(f"[SESSION]\nSenderCompID={s}\n" for s in SESSIONS)
            cfg += f"[SESSION]\nSenderCompID=acct2\nExsimExtensions=Y\nDataDictionary={merged}\n"
            (tmp_path / "qf.cfg").write_text(cfg)
            proc = await asyncio.create_subprocess_exec(
                str(binary), str(tmp_path / "qf.cfg"), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, cwd=tmp_path)
            qf = QuickFix(proc)
            keys = {"acct0": "trade:acct0", "acct1": "trade:acct1", "acct2": "trade:acct2",
                    "drop0": "dropcopy:drop0", "feed": "marketdata:feed"}
            try:
                await _script(qf, gw)
                sent = {name: srv.store.load(key).next_out - 1 for name, key in keys.items()}
            finally:
                if proc.returncode is None:
                    proc.stdin.write(b"QUIT\n")
                    try:
                        await asyncio.wait_for(proc.wait(), 5)
                    except asyncio.TimeoutError:
                        proc.kill()
                        await proc.wait()
                srv.close()
                await srv.wait_closed()
            assert qf.refusals() == []
            assert srv.stats["rejects_received"] == 0
            # every message the gateway sent each session reached QuickFIX's application
            # callbacks (validated), MsgSeqNum 1 to the last
            for name, last in sent.items():
                seen = sorted(int(f[34]) for k, s, f, _ in qf.lines
                              if s == name and k in ("APP", "ADMIN"))
                assert last > 3 and seen == list(range(1, last + 1)), (name, last, seen)
    run(body(), timeout=60)


async def _script(qf: QuickFix, gw) -> None:
    """The scripted session (module docstring); each step waits for the gateway's answer as
    QuickFIX handed it to the application."""
    for s in SESSIONS + ["acct2"]:
        await qf.wait("LOGON", s)
    qf.order("acct0", "A1", "1", 10, t44="1.00", t59="0")
    await qf.wait("APP", "acct0", t11="A1", t150="0")
    for s, rid in (("feed", "M1"), ("acct2", "M2")):
        qf.send(s, "V", [(262, rid), (263, "1"), (264, 0), (265, 1), (267, 3), (269, "0"),
                         (269, "1"), (269, "2"), (146, 1), (55, "JPM")])
        await qf.wait("APP", s, t35="W", t262=rid)
    qf.order("acct1", "B1", "2", 4, t44="0.99", t59="3")                # IOC, fills
    await qf.wait("APP", "acct1", t11="B1", t150="F")
    await qf.wait("APP", "acct0", t11="A1", t150="F")
    qf.send("acct0", "G", [(11, "A2"), (41, "A1"), (55, "JPM"), (54, "1"),
                           (60, utc_timestamp(time.time_ns())), (38, 8), (40, "2"),
                           (44, "1.01"), (59, "0")])
    await qf.wait("APP", "acct0", t11="A2", t150="5")
    qf.send("acct0", "F", [(11, "A3"), (41, "A2"), (55, "JPM"), (54, "1"),
                           (60, utc_timestamp(time.time_ns()))])
    await qf.wait("APP", "acct0", t11="A3", t150="4")
    qf.order("acct0", "M1", "1", 1, ord_type="1")                       # market, no liquidity
    await qf.wait("APP", "acct0", t11="M1", t150="4")
    qf.order("acct1", "S1", "2", 5, t44="1.05", t59="1", t111=2)        # GTC, MaxFloor
    await qf.wait("APP", "acct1", t11="S1", t150="0")
    qf.order("acct0", "F1", "1", 10, t44="1.05", t59="4")               # FOK, cannot fill
    await qf.wait("APP", "acct0", t11="F1", t150="4")
    qf.order("acct0", "I1", "1", 1, t44="1.00", t59="3")                # IOC, nothing to hit
    await qf.wait("APP", "acct0", t11="I1", t150="4")
    qf.order("acct0", "P1", "1", 1, t44="1.05", t59="1", t18="6")       # post-only, crosses
    await qf.wait("APP", "acct0", t11="P1", t150="8")
    qf.order("acct0", "Q1", "1", 3, t44="1.05", t59="3", t110=3)        # MinQty
    await qf.wait("APP", "acct0", t11="Q1", t150="F")
    for s, cid in (("acct0", "ST1"), ("acct2", "ST2")):                # stops at 1.06
        qf.order(s, cid, "1", 1, ord_type="3", t99="1.06", t59="1")
        await qf.wait("APP", s, t11=cid, t150="0")
    qf.order("acct1", "S2", "2", 3, t44="1.06", t59="1")
    await qf.wait("APP", "acct1", t11="S2", t150="0")
    qf.order("acct1", "B2", "1", 3, t44="1.06", t59="0")                # last trade at 1.06
    await qf.wait("APP", "acct0", t11="ST1", t150="D")
    await qf.wait("APP", "acct2", t11="ST2", t150="L")
    qf.order("acct0", "SL1", "1", 1, ord_type="4", t44="1.10", t99="1.20", t59="1")
    await qf.wait("APP", "acct0", t11="SL1", t150="0")
    expire = utc_timestamp(gw.now_ns() + 3600 * 10**9)
    qf.order("acct0", "G1", "1", 1, t44="0.90", t59="6", t126=expire)
    await qf.wait("APP", "acct0", t11="G1", t150="0")
    qf.order("acct0", "X1", "1", 1, t44="1", symbol="NOPE")             # engine reject
    await qf.wait("APP", "acct0", t11="X1", t150="8", t103="1")
    qf.order("acct0", "T1", "1", 1, t44="1.005")                        # off tick
    await qf.wait("APP", "acct0", t11="T1", t150="8")
    qf.order("acct0", "U1", "1", 1, t44="1", t18="G")                   # unsupported ExecInst
    await qf.wait("APP", "acct0", t11="U1", t150="8", t103="11")
    qf.send("acct0", "F", [(11, "C9"), (41, "NOPE"), (55, "JPM"), (54, "1"),
                           (60, utc_timestamp(time.time_ns()))])
    await qf.wait("APP", "acct0", t35="9", t11="C9")
    qf.send("acct0", "1", [(112, "TR1")])
    await qf.wait("ADMIN", "acct0", t35="0", t112="TR1")
    await qf.wait("APP", "feed", t35="X", t269="2")
    await qf.wait("APP", "acct2", t35="X")
    await qf.wait("APP", "drop0", t11="A1", t150="F", t1="acct0")
    await asyncio.sleep(2.2)                                             # heartbeats both ways
    for s in SESSIONS + ["acct2"]:
        await qf.wait("ADMIN", s, t35="0")
        qf.proc.stdin.write(b"LOGOUT %s\n" % s.encode())
    for s in SESSIONS + ["acct2"]:
        await qf.wait("LOGOUT", s)
