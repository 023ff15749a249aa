"""FIX order entry over real sockets: every order type reaches the engine, execution reports
carry the FIX fields a client reads, refusals come back in the right message, drop copy."""

from __future__ import annotations

from fix_helpers import client, fix_port, px, raw_msg, read_raw, run
from gw_fixtures import make_accounts

from exsim.exchange.gateway.fix.codec import utc_timestamp


def _er(where_cid):
    return lambda m: m.get(11) == where_cid


def test_a_limit_cross_reports_fix_fields(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            # a with exsim's extensions (880 TrdMatchID), b plain FIX 4.4 (no 880)
            a, b = await client(port, "acct0", extensions=True), await client(port, "acct1")
            a.new_order("A1", "JPM", "buy", 10, px(gw, "JPM", 100))
            ack = await a.expect("8")
            assert (ack[150], ack[39], ack[11], ack[14], ack[151]) == ("0", "0", "A1", "0", "10")
            assert ack[44] == "1" and ack[38] == "10" and ack[17] == "fix:acct0:1"
            b.new_order("B1", "JPM", "sell", 4, px(gw, "JPM", 99), tif="3")
            b_ack = await b.expect("8")
            b_fill = await b.expect("8")
            assert b_ack[150] == "0" and b_fill[150] == "F" and b_fill[39] == "2"
            a_fill = await a.expect("8")
            # the resting order's price is the trade price: 1.00, not the seller's 0.99
            assert (a_fill[150], a_fill[39], a_fill[31], a_fill[32]) == ("F", "1", "1", "4")
            assert (a_fill[14], a_fill[151], a_fill[6]) == ("4", "6", "1")
            assert a_fill[37] == ack[37] and a_fill[880] and 880 not in b_fill
            await a.logout()
            await b.logout()
    run(body())


def test_every_order_type_and_time_in_force_reaches_the_engine(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a, b = await client(port, "acct0"), await client(port, "acct1")
            p = lambda t: px(gw, "BTCUSD", t)   # noqa: E731  (tick 0.5)
            a.new_order("REST", "BTCUSD", "sell", 5, p(200), tif="1", max_floor=2)
            rest = await a.expect("8")
            assert rest[150] == "0" and rest[59] == "1" and rest[44] == "100"
            b.new_order("MKT", "BTCUSD", "buy", 1, ord_type="1", tif="3")
            assert (await b.expect("8", where=_er("MKT")))[40] == "1"
            fill = await b.expect("8", where=lambda m: m.get(150) == "F")
            assert fill[31] == "100" and fill[32] == "1"
            b.new_order("POST", "BTCUSD", "buy", 1, p(200), tif="1", post_only=True)
            post = await b.expect("8", where=_er("POST"))
            assert post[150] == "8" and post[39] == "8" and "POST_ONLY" in post[58]
            b.new_order("FOK", "BTCUSD", "buy", 50, p(200), tif="4")
            fok = await b.expect("8", where=_er("FOK"))
            assert fok[59] == "4" and fok[150] in ("8", "4")
            b.new_order("STP", "BTCUSD", "buy", 1, ord_type="3", stop_px=p(300), tif="1")
            stp = await b.expect("8", where=_er("STP"))
            assert (stp[150], stp[40], stp[99]) == ("0", "3", "150")
            b.new_order("STL", "BTCUSD", "buy", 1, p(301), ord_type="4", stop_px=p(300),
                        tif="1")
            stl = await b.expect("8", where=_er("STL"))
            assert (stl[150], stl[40], stl[44], stl[99]) == ("0", "4", "150.5", "150")
            expire = utc_timestamp(gw.now_ns() + 3600 * 10**9)
            b.new_order("GTD", "BTCUSD", "buy", 1, p(150), tif="6", expire_time=expire)
            gtd = await b.expect("8", where=_er("GTD"))
            assert gtd[150] == "0" and gtd[59] == "6"
            # 4 lots rest at 100: a minimum of 5 cannot fill at once
            b.new_order("MINQ", "BTCUSD", "buy", 5, p(200), tif="3", min_qty=5)
            minq = await b.expect("8", where=_er("MINQ"))
            assert minq[150] in ("8", "4") and "MIN_QTY" in minq[58]
    run(body())


def test_cancel_replace_and_their_rejects(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            a.new_order("O1", "JPM", "buy", 10, px(gw, "JPM", 100), tif="1")
            await a.expect("8")
            a.replace("O2", "O1", "JPM", "buy", 7, px(gw, "JPM", 101))
            rep = await a.expect("8")
            assert (rep[150], rep[11], rep[41], rep[38], rep[44]) == ("5", "O2", "O1", "7", "1.01")
            a.cancel("O3", "O2", "JPM", "buy")
            can = await a.expect("8")
            assert (can[150], can[39], can[11], can[41], can[151]) == ("4", "4", "O3", "O2", "0")
            a.cancel("O4", "NOPE", "JPM", "buy")
            rej = await a.expect("9")
            assert (rej[434], rej[102], rej[11], rej[41]) == ("1", "1", "O4", "NOPE")
            a.replace("O5", "NOPE", "JPM", "buy", 3, px(gw, "JPM", 100))
            rej = await a.expect("9")
            assert rej[434] == "2"
            # another account cannot cancel acct0's orders: it names none of its own
            a.new_order("O6", "JPM", "buy", 1, px(gw, "JPM", 90), tif="1")
            await a.expect("8")
            b = await client(port, "acct1")
            b.cancel("X1", "O6", "JPM", "buy")
            assert (await b.expect("9"))[102] == "1"
            a.new_order("O6", "JPM", "buy", 1, px(gw, "JPM", 90), tif="1")
            dup = await a.expect("8")
            assert dup[150] == "8" and dup[103] == "6"
    run(body())


def test_off_tick_price_is_refused_before_the_engine(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            a.new_order("T1", "JPM", "buy", 1, "1.005")
            rej = await a.expect("8")
            assert (rej[150], rej[39], rej[103]) == ("8", "8", "99") and "tick" in rej[58]
            assert gw.stream_head("fix:acct0") == 0 and gw.engine.seq == 0
            a.new_order("T2", "NOSUCH", "buy", 1, "1.005")   # unknown symbol: the engine says
            unk = await a.expect("8")
            assert unk[103] == "1" and gw.engine.seq == 1
    run(body())


def test_malformed_and_unsupported_application_messages(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            a = await client(port, "acct0")
            a.send("D", [(11, "M1"), (55, "JPM"), (54, "1"), (60, utc_timestamp(gw.now_ns())),
                         (40, "2"), (44, "1")])           # no OrderQty
            rej = await a.expect("3")
            assert (rej[371], rej[373], rej[372]) == ("38", "1", "D")
            a.send("D", [(11, "M2"), (55, "JPM"), (54, "7"), (60, utc_timestamp(gw.now_ns())),
                         (38, 1), (40, "2"), (44, "1")])  # Side 7
            rej = await a.expect("3")
            assert (rej[371], rej[373]) == ("54", "5")
            a.send("AE", [(571, "x")])
            bmr = await a.expect("j")
            assert (bmr[372], bmr[380]) == ("AE", "3")
            # the session still trades after all that
            a.new_order("M3", "JPM", "buy", 1, px(gw, "JPM", 100))
            assert (await a.expect("8"))[150] == "0"
    run(body())


def test_drop_copy_sees_every_report_of_its_firm_and_cannot_order(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            drop = await client(port, "drop0")
            a, b = await client(port, "acct0"), await client(port, "acct1")   # F0 and F1
            a.new_order("D1", "JPM", "buy", 3, px(gw, "JPM", 100))
            b.new_order("D2", "JPM", "sell", 3, px(gw, "JPM", 100))
            await a.expect("8", where=lambda m: m.get(150) == "F")
            got = [await drop.expect("8") for _ in range(2)]
            assert [(m[11], m[150], m[1]) for m in got] == [("D1", "0", "acct0"),
                                                            ("D1", "F", "acct0")]
            assert got[0][17] == "dropcopy:F0:1"
            drop.new_order("D3", "JPM", "buy", 1, px(gw, "JPM", 100))
            bmr = await drop.expect("j")
            assert bmr[380] == "6"
    run(body())


def test_rate_limit_rejects_orders_over_the_rate(tmp_path):
    async def body():
        async with fix_port(tmp_path, make_accounts(rate=5)) as (gw, port):
            a = await client(port, "acct0")
            for i in range(10):
                a.new_order(f"R{i}", "JPM", "buy", 1, px(gw, "JPM", 100))
            got = [await a.expect("8") for _ in range(10)]
            limited = [m for m in got if m.get(58) == "message rate exceeded"]
            # the Logon took one token of the burst of 5
            assert 4 <= len(got) - len(limited) <= 5 and len(limited) >= 5
            assert all(m[150] == "8" and m[37] == "NONE" for m in limited)
    run(body())


def test_raw_order_without_transact_time_is_rejected(tmp_path):
    async def body():
        async with fix_port(tmp_path) as (gw, port):
            from fix_helpers import raw_logon
            r, w, _ = await raw_logon(port)
            w.write(raw_msg("D", 2, [(11, "Z"), (55, "JPM"), (54, "1"), (38, 1), (40, "1")]))
            got = await read_raw(r, 1)
            assert got[0].type == "3" and got[0][371] == "60"
            w.close()
    run(body())
