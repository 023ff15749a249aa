"""The FIX dialect: plain FIX 4.4 by default (what a stock FIX 4.4 dictionary validates), exsim's
extensions only for a session that asks at logon; FIX 4.4 conventions for killed IOC / FOK
orders; unsupported order characteristics answered at the order level; a client's Reject of one
of our messages logged as a warning and counted (docs/gateway-fix.md, "Dialect")."""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET

import pytest
from fix_helpers import client, fix_port, px, run

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway.fix import dialect
from exsim.exchange.gateway.fix.codec import utc_timestamp


def _cid(cid):
    return lambda m: m.get(11) == cid


def test_a_triggered_stop_is_restated_in_fix44_and_L_only_with_the_extensions(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            plain, ext = await client(port, "acct1"), await client(port, "acct2", extensions=True)
            a.new_order("S1", "JPM", "sell", 10, px(gw, "JPM", 100), tif="1")
            await a.expect("8")
            for c, cid in ((plain, "P"), (ext, "E")):
                c.new_order(cid, "JPM", "buy", 1, ord_type="3", stop_px=px(gw, "JPM", 100),
                            tif="1")
                await c.expect("8", where=_cid(cid))
            a.new_order("B1", "JPM", "buy", 1, px(gw, "JPM", 100))   # a trade at 1.00
            p = await plain.expect("8", where=lambda m: m.get(150) not in ("0",))
            e = await ext.expect("8", where=lambda m: m.get(150) not in ("0",))
            assert (p[150], p[378], p[58]) == ("D", "99", "stop triggered")
            assert e[150] == "L" and 378 not in e
            fill_p = await plain.expect("8", where=lambda m: m.get(150) == "F")
            fill_e = await ext.expect("8", where=lambda m: m.get(150) == "F")
            assert 880 not in fill_p and fill_e[880]
            assert not [m for c in (a, plain, ext) for m in c.received if m.type in "3j"]
    run(body())


def test_an_unfillable_fok_and_an_unfilled_ioc_are_canceled(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            a.new_order("S1", "JPM", "sell", 3, px(gw, "JPM", 100), tif="1")
            await a.expect("8")
            b = await client(port, "acct1")
            b.new_order("FOK", "JPM", "buy", 5, px(gw, "JPM", 100), tif="4")
            fok = await b.expect("8", where=_cid("FOK"))
            # FIX 4.4: an FOK that cannot fill is killed (ExecType 4), never rejected (8)
            assert (fok[150], fok[39], fok[59], fok[14], fok[151]) == ("4", "4", "4", "0", "0")
            assert 103 not in fok and "FOK" in fok[58]
            b.new_order("IOC", "JPM", "buy", 1, px(gw, "JPM", 99), tif="3")
            ioc = [await b.expect("8", where=_cid("IOC")) for _ in range(2)]
            assert [(m[150], m[39]) for m in ioc] == [("0", "0"), ("4", "4")]
            assert gw.engine.seq == 3
    run(body())


@pytest.mark.parametrize("tag, value, name", [(18, "G", "ExecInst (18)"),
                                              (40, "P", "OrdType (40)"),
                                              (59, "2", "TimeInForce (59)")])
def test_an_unsupported_order_characteristic_gets_an_execution_report(tmp_path, tag, value,
                                                                      name):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            fields = {11: "U1", 55: "JPM", 54: "1", 60: utc_timestamp(gw.now_ns()), 38: 7,
                      40: "2", 44: "1.5", 59: "1", tag: value}
            a.send("D", list(fields.items()))
            rej = await a.expect("8", "3")
            assert (rej.type, rej[150], rej[39], rej[103]) == ("8", "8", "8", "11")
            assert name in rej[58] and rej[11] == "U1" and rej[38] == "7"
            assert rej.get(tag) is None or tag == 18   # never an unsupported value repeated
            a.new_order("O1", "JPM", "buy", 1, px(gw, "JPM", 100), tif="1")
            await a.expect("8", where=_cid("O1"))
            fields = {11: "O2", 41: "O1", 55: "JPM", 54: "1", 60: utc_timestamp(gw.now_ns()),
                      38: 2, 40: "2", 44: "1", 59: "1", tag: value}
            a.send("G", list(fields.items()))
            cxl = await a.expect("9", "3")
            assert (cxl.type, cxl[434], cxl[11], cxl[41]) == ("9", "2", "O2", "O1")
            assert name in cxl[58]
            assert gw.engine.seq == 1   # neither reached the engine
    run(body())


def test_plain_market_data_has_no_later_version_tags(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            a.new_order("B1", "JPM", "buy", 5, px(gw, "JPM", 100), tif="1")
            await a.expect("8")
            plain, ext = await client(port, "acct1"), await client(port, "acct2", extensions=True)
            for c in (plain, ext):
                c.subscribe("JPM")
            wp, we = await plain.expect("W"), await ext.expect("W")
            assert 83 not in wp and 1023 not in wp and wp[290] == "1"
            assert we[83] and we[1023] == "1" and 290 not in we
            a.new_order("B2", "JPM", "buy", 5, px(gw, "JPM", 101), tif="1")
            xp, xe = await plain.expect("X"), await ext.expect("X")
            assert 83 not in xp and 1023 not in xp and xp[290] == "1"
            assert xe[83] and xe[1023] == "1"
    run(body())


def test_a_reject_of_our_message_is_a_counted_warning(tmp_path, caplog):
    async def body():
        from exsim.exchange.gateway.fix import server
        from gw_fixtures import running_gateway
        async with running_gateway(tmp_path) as gw:
            srv = await server.start(gw, "127.0.0.1", 0)
            try:
                a = await client(srv.sockets[0].getsockname()[1], "acct0")
                a.new_order("O1", "JPM", "buy", 1, px(gw, "JPM", 100), tif="1")
                er = await a.expect("8")
                a.send("3", [(45, er.seq), (371, 880), (372, "8"), (373, 0),
                             (58, "Invalid tag number")])
                a.send("j", [(45, er.seq), (372, "8"), (380, 0), (58, "no")])
                fence = a.send("ZZ", [(58, "fence")])   # answered in order, after those
                await a.expect("j", where=lambda m: m.get(45) == str(fence))
                assert srv.stats["rejects_received"] == 1
                assert srv.stats["business_rejects_received"] == 1
                assert len([m for m in a.received if m.type == "j"]) == 1   # no BMR of a BMR
            finally:
                srv.close()
                await srv.wait_closed()
    with caplog.at_level(logging.WARNING, logger="exsim.gateway.fix"):
        run(body())
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("RefSeqNum=2" in w and "RefTagID=880" in w and "Invalid tag number" in w
               for w in warned), warned


def _mini_dictionary(path):
    path.write_text(
        '<fix type="FIX" major="4" minor="4"><header/><trailer/><messages>'
        '<message name="Logon" msgtype="A"><field name="HeartBtInt" required="Y"/></message>'
        '<message name="ExecutionReport" msgtype="8"><field name="ExecType" required="Y"/>'
        '</message>'
        '<message name="MarketDataSnapshotFullRefresh" msgtype="W">'
        '<component name="MDFullGrp" required="Y"/></message>'
        '<message name="MarketDataIncrementalRefresh" msgtype="X">'
        '<component name="MDIncGrp" required="Y"/></message></messages>'
        '<components><component name="MDFullGrp"><group name="NoMDEntries" required="Y">'
        '<field name="MDEntryType" required="Y"/></group></component>'
        '<component name="MDIncGrp"><group name="NoMDEntries" required="Y">'
        '<field name="MDUpdateAction" required="Y"/></group></component></components>'
        '<fields><field number="108" name="HeartBtInt" type="INT"/>'
        '<field number="83" name="RptSeq" type="INT"/>'
        '<field number="150" name="ExecType" type="CHAR"><value enum="0" description="NEW"/>'
        '</field></fields></fix>')


def test_merged_dictionary_declares_every_extension(tmp_path):
    _mini_dictionary(tmp_path / "FIX44.xml")
    assert dialect.main([str(tmp_path / "FIX44.xml"), str(tmp_path / "out.xml")]) == 0
    root = ET.parse(tmp_path / "out.xml").getroot()
    fields = {f.get("number"): f for f in root.find("fields")}
    assert {"880", "1023", "9801"} <= set(fields)
    assert [v.get("enum") for v in fields["150"]] == ["0", "L"]
    msgs = {m.get("name"): m for m in root.find("messages")}
    assert msgs["ExecutionReport"].find("field[@name='TrdMatchID']") is not None
    comps = {c.get("name"): c for c in root.find("components")}
    inc = comps["MDIncGrp"].find("group")
    assert {f.get("name") for f in inc} == {"MDUpdateAction", "MDPriceLevel", "RptSeq"}
    assert dialect.main([str(tmp_path / "out.xml"), str(tmp_path / "again.xml")]) == 0
    again = ET.parse(tmp_path / "again.xml").getroot()   # merging twice adds nothing
    assert len(list(again.iter())) == len(list(root.iter()))


def test_merging_into_something_else_is_a_clear_error(tmp_path):
    (tmp_path / "x.xml").write_text("<fix major='4' minor='2'><fields/><messages/></fix>")
    with pytest.raises(UsageError, match="not a FIX 4.4"):
        dialect.merge_dictionary(str(tmp_path / "x.xml"), str(tmp_path / "o.xml"))
    assert dialect.main([str(tmp_path / "missing.xml"), str(tmp_path / "o.xml")]) == 2
