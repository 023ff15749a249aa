"""FIX market data over real sockets: a snapshot equals the engine's depth; snapshot plus
incrementals equal the engine's depth after every batch (every level and the best N) for order
flows sent through the gateway; trades arrive in order; unsubscribe stops the updates; bad
requests get MarketDataRequestReject; accounts without the role are refused; a subscriber that
does not read is cut off without holding up the others."""

from __future__ import annotations

import asyncio
import socket
from decimal import Decimal

from hypothesis import HealthCheck, given, settings, strategies as st

from fix_helpers import PASSWORD, client, fix_port, px, raw_msg, read_raw, run
from gw_fixtures import cheap_hash, make_accounts

from exsim.exchange.gateway.accounts import Account, Accounts
from exsim.exchange.gateway.client.fix import FixClientError, MarketDataBook
from exsim.exchange.gateway.fix.marketdata import MAX_DEPTH

SYM = "JPM"


def _accounts() -> Accounts:
    """The test accounts plus ``tonly``, who may trade but not receive market data."""
    rows = list(make_accounts())
    rows.append(Account("tonly", "F0", 500, frozenset({"trade"}), 100_000,
                        cheap_hash(PASSWORD)))
    return Accounts(rows)


class Recorder:
    """A market listener of the test: the engine's depth of SYM after every batch, and its
    fills, read where the core allows it (inside the callback)."""

    def __init__(self, gw):
        self.gw, self.sid = gw, gw.symbols[SYM].id
        self.batches = []   # (first seq, last seq, bids, asks) with rows (ticks, qty, count)
        self.fills = []     # (price ticks, qty, trade id)
        gw.add_market_listener(self)

    def __call__(self, batch):
        bids, asks = batch.engine.depth(self.sid, 1 << 30)
        rows = lambda a: [(int(r["price"]), int(r["qty"]), int(r["count"])) for r in a]  # noqa
        last = batch.first_seq + len(batch.orders) - 1
        self.batches.append((batch.first_seq, last, rows(bids), rows(asks)))
        f = batch.result.fills
        for r in f[f["symbol"] == self.sid]:
            self.fills.append((int(r["price"]), int(r["qty"]), str(int(r["trade_id"]))))

    def batch_of(self, seq: int) -> int:
        for k, (lo, hi, _, _) in enumerate(self.batches):
            if lo <= seq <= hi:
                return k
        raise AssertionError(f"seq {seq} is in no recorded batch")


def _ticks(gw, book: MarketDataBook, side: str) -> list:
    return _ticks_of(gw, book, SYM, side)


def _ticks_of(gw, book: MarketDataBook, symbol: str, side: str) -> list:
    tick = gw.symbols[symbol].tick_size
    return [(int(p / tick), q, c) for p, q, c in book.levels(symbol, side)]


async def _fence(c, tag: str):
    """Send a message of an unsupported type and return every message received before its
    BusinessMessageReject (the gateway answers in order; the client hides Heartbeats)."""
    seq = c.send("ZZ", [(58, tag)])
    got = []
    while True:
        m = await c.next(timeout=10)
        if m.type == "j" and m.get(45) == str(seq):
            return got
        got.append(m)


async def _depth(gw, n: int = 1 << 30):
    return await _depth_of(gw, SYM, n)


async def _depth_of(gw, symbol: str, n: int = 1 << 30):
    async with gw.engine_lock:
        bids, asks = gw.engine.depth(symbol, n)
    rows = lambda a: [(int(r["price"]), int(r["qty"]), int(r["count"])) for r in a]  # noqa
    return rows(bids), rows(asks)


def test_snapshot_is_the_engine_depth_and_has_every_tag(tmp_path):
    async def body():
        async with fix_port(tmp_path, _accounts()) as (gw, port):
            a = await client(port, "acct0")
            for cid, side, t, q in (("B1", "buy", 100, 5), ("B2", "buy", 100, 2),
                                    ("B3", "buy", 98, 7), ("S1", "sell", 103, 4)):
                a.new_order(cid, SYM, side, q, px(gw, SYM, t), tif="1")
                await a.expect("8", where=lambda m, cid=cid: m.get(11) == cid)
            # marketdata role only: a market-data session; with exsim's extensions (83, 1023)
            feed = await client(port, "feed", extensions=True)
            rid = feed.subscribe(SYM, snapshot_only=True)
            w = await feed.expect("W")
            assert (w[262], w[55], w[268], w[83]) == (rid, SYM, "3", str(gw.engine.seq))
            book = MarketDataBook()
            assert book.apply(w)
            assert _ticks(gw, book, "bid") == [(100, 7, 2), (98, 7, 1)]
            assert _ticks(gw, book, "ask") == [(103, 4, 1)]
            assert [(t, v) for t, v in w.fields if t in (269, 270, 1023)][:3] == \
                [(269, "0"), (270, "1"), (1023, "1")]
            # snapshot only: a later change sends nothing
            a.new_order("B4", SYM, "buy", 1, px(gw, SYM, 99), tif="1")
            await a.expect("8", where=lambda m: m.get(11) == "B4")
            assert not [m for m in await _fence(feed, "T1") if m.type in "WX"]
            # depth 1 and bids only
            rid = feed.subscribe(SYM, depth=1, types=("0",), snapshot_only=True)
            w = await feed.expect("W", where=lambda m: m.get(262) == rid)
            book = MarketDataBook(req_id=rid)
            book.apply(w)
            assert _ticks(gw, book, "bid") == [(100, 7, 2)] and not book.levels(SYM, "ask")
            # a market-data session may not send orders
            feed.new_order("F1", SYM, "buy", 1, px(gw, SYM, 99))
            rej = await feed.expect("j")
            assert rej[380] == "6" and "market-data" in rej[58]
    run(body())


ORDER = st.tuples(st.sampled_from(["buy", "sell"]), st.integers(95, 105), st.integers(1, 9),
                  st.sampled_from(["1", "1", "1", "3"]), st.integers(0, 9))


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(flow=st.lists(ORDER, min_size=1, max_size=40), depth=st.integers(1, 3))
def test_snapshot_plus_incrementals_is_the_engine_depth_after_every_batch(tmp_path_factory,
                                                                         flow, depth):
    async def body():
        data = tmp_path_factory.mktemp("md")
        async with fix_port(data, _accounts()) as (gw, port):
            rec = Recorder(gw)
            # with exsim's extensions: 83 RptSeq ties each entry to its engine batch
            ext = {"extensions": True}
            a, b = await client(port, "acct0", **ext), await client(port, "acct1", **ext)
            # some book before the subscription: the snapshot must carry it
            a.new_order("PRE1", SYM, "buy", 3, px(gw, SYM, 99), tif="1")
            b.new_order("PRE2", SYM, "sell", 2, px(gw, SYM, 102), tif="1")
            await a.expect("8")
            await b.expect("8")
            feed = await client(port, "feed", **ext)
            full = feed.subscribe(SYM)
            top = b.subscribe(SYM, depth=depth, types=("0", "1"))
            sessions = {"full": (feed, full, 1 << 30), "top": (b, top, depth)}
            live = []   # (client, cid, side) of resting orders to cancel or replace
            for k, (side, t, q, tif, action) in enumerate(flow):
                c = (a, b)[k % 2]
                if action == 0 and live:
                    oc, ocid, oside = live.pop(0)
                    oc.cancel(f"X{k}", ocid, SYM, oside)
                elif action == 1 and live:
                    oc, ocid, oside = live.pop(0)
                    oc.replace(f"R{k}", ocid, SYM, oside, q, px(gw, SYM, t), tif="1")
                    live.append((oc, f"R{k}", oside))
                else:
                    c.new_order(f"N{k}", SYM, side, q, px(gw, SYM, t), tif=tif)
                    if tif == "1":
                        live.append((c, f"N{k}", side))
                if k % 7 == 0:
                    await asyncio.sleep(0.001)   # spread the flow over several batches
            # every order of a session is processed once the core answered its last one
            for c in (a, b):
                c.new_order("LAST", SYM, "buy", 1, px(gw, SYM, 90), tif="1")
            for c in (a, b):
                await c.expect("8", where=lambda m: m.get(11) == "LAST", timeout=20)
            for label, (c, rid, n) in sessions.items():
                msgs = [m for m in await _fence(c, f"F{label}") + c.received
                        if m.type in "WX" and m.get(262) == rid]
                msgs = sorted({m.seq: m for m in msgs}.values(), key=lambda m: m.seq)
                _check_stream(gw, rec, msgs, n, label)
            book = MarketDataBook(req_id=full)
            for m in feed.received:
                book.apply(m)
            # the trades the full subscription got are the engine's fills, in order
            tick = gw.symbols[SYM].tick_size
            assert [(int(p / tick), q, i) for _, p, q, i in book.trades] == rec.fills
            bids, asks = await _depth(gw)
            assert _ticks(gw, book, "bid") == bids and _ticks(gw, book, "ask") == asks
    run(body(), timeout=120)


def _check_stream(gw, rec: Recorder, msgs: list, depth: int, label: str) -> None:
    """Apply W then the X messages; after the last message of each batch the book must equal
    the engine's depth (best ``depth`` levels) recorded after that batch."""
    assert msgs and msgs[0].type == "W", label
    book = MarketDataBook()
    book.apply(msgs[0])
    snap = int(msgs[0][83])
    last_seq = snap
    groups: dict[int, list] = {}
    for m in msgs[1:]:
        assert m.type == "X", label
        seqs = [int(v) for t, v in m.fields if t == 83]
        assert seqs == sorted(seqs) and seqs[0] >= last_seq, (label, seqs, last_seq)
        assert seqs[0] > snap, (label, "an incremental repeats the snapshot", seqs, snap)
        batch = {rec.batch_of(s) for s in seqs}
        assert len(batch) == 1, (label, "one X holds one batch", seqs)
        groups.setdefault(batch.pop(), []).append(m)
        last_seq = seqs[-1]
    for k, group in sorted(groups.items()):
        for m in group:
            book.apply(m)
        _, _, bids, asks = rec.batches[k]
        assert _ticks(gw, book, "bid") == bids[:depth], (label, k)
        assert _ticks(gw, book, "ask") == asks[:depth], (label, k)
        if depth < 1 << 30:   # never more than the window
            assert len(book.levels(SYM, "bid")) <= depth


def test_trades_come_in_engine_order_with_their_prices(tmp_path):
    async def body():
        async with fix_port(tmp_path, _accounts()) as (gw, port):
            a, b = await client(port, "acct0"), await client(port, "acct1")
            feed = await client(port, "feed")
            rid = feed.subscribe(SYM, types=("2",))
            w = await feed.expect("W")
            assert w[268] == "0"   # trades only: a snapshot without entries
            a.new_order("S1", SYM, "sell", 3, px(gw, SYM, 101), tif="1")
            a.new_order("S2", SYM, "sell", 3, px(gw, SYM, 102), tif="1")
            await a.expect("8")
            await a.expect("8")
            b.new_order("B1", SYM, "buy", 5, px(gw, SYM, 102), tif="3")
            x = await feed.expect("X")
            book = MarketDataBook(req_id=rid)
            book.apply(x)
            assert [(p, q) for _, p, q, _ in book.trades] == [(Decimal("1.01"), 3),
                                                               (Decimal("1.02"), 2)]
            assert all(v == "2" for t, v in x.fields if t == 269)
            assert 272 in x and 273 in x and not book.levels(SYM, "bid")
    run(body())


AUCTION_SCENARIO = """
description = "one symbol whose dynamic band interrupts trading for a one-second auction"
generator = "trading_day"
seed = 1
[params]
n = 10
[[symbols]]
name = "AUC"
tick_size = 0.01
mid = 10_000
reference_price = 10_000
dynamic_band_bps = 100
interruption_ns = 1_000_000_000
"""


def test_auction_prices_indicative_then_opening(tmp_path):
    async def body():
        scenario = tmp_path / "auc.toml"
        scenario.write_text(AUCTION_SCENARIO)
        async with fix_port(tmp_path / "d", _accounts(),
                            gw_options={"scenario": str(scenario)}) as (gw, port):
            a, b = await client(port, "acct0"), await client(port, "acct1")
            feed = await client(port, "feed")
            rid = feed.subscribe("AUC", types=("0", "1", "2", "4", "5"))
            await feed.expect("W")
            a.new_order("S1", "AUC", "sell", 1, "100", tif="1")
            await a.expect("8")
            b.new_order("B1", "AUC", "buy", 1, "100", tif="1")   # last price 100.00
            await b.expect("8", where=lambda m: m.get(150) == "F")
            a.new_order("S2", "AUC", "sell", 1, "103", tif="1")
            await a.expect("8", where=lambda m: m.get(11) == "S2")
            b.new_order("B2", "AUC", "buy", 1, "103", tif="1")   # 3 % away: an auction call
            await b.expect("8", where=lambda m: m.get(11) == "B2")
            book = MarketDataBook(req_id=rid)
            for m in await _fence(feed, "T1"):
                book.apply(m)
            assert book.auction["AUC"] == {("4", "expected"): (Decimal("103"), 1)}
            # a snapshot during the call carries the indicative price
            snap = feed.subscribe("AUC", types=("4",), snapshot_only=True)
            w = await feed.expect("W", where=lambda m: m.get(262) == snap)
            assert [(t, v) for t, v in w.fields if t in (269, 270, 271, 286)] == \
                [(269, "4"), (270, "103"), (271, "1"), (286, "3")]
            await asyncio.sleep(1.1)   # the interruption ends: the next message uncrosses
            a.new_order("S3", "AUC", "sell", 1, "110", tif="1")
            await a.expect("8", where=lambda m: m.get(11) == "S3")
            for m in await _fence(feed, "T2"):
                book.apply(m)
            assert book.auction["AUC"] == {("4", "actual"): (Decimal("103"), 1)}
            assert [(p, q) for _, p, q, _ in book.trades] == [(Decimal("100"), 1),
                                                               (Decimal("103"), 1)]
            bids, asks = await _depth_of(gw, "AUC")
            assert _ticks_of(gw, book, "AUC", "bid") == bids
            assert _ticks_of(gw, book, "AUC", "ask") == asks
    run(body())


def test_unsubscribe_stops_updates(tmp_path):
    async def body():
        async with fix_port(tmp_path, _accounts()) as (gw, port):
            a = await client(port, "acct0")
            rid = a.subscribe(SYM)
            await a.expect("W")
            start = len(a.received)
            a.new_order("B1", SYM, "buy", 1, px(gw, SYM, 100), tif="1")
            await a.expect("8", where=lambda m: m.get(11) == "B1")
            await _fence(a, "T1")
            assert [m.type for m in a.received[start:] if m.type in "WX"] == ["X"]
            a.unsubscribe(rid)
            start = len(a.received)
            a.new_order("B2", SYM, "buy", 1, px(gw, SYM, 99), tif="1")
            await a.expect("8", where=lambda m: m.get(11) == "B2")
            await _fence(a, "T2")
            assert not [m for m in a.received[start:] if m.type in "WX"]
            # the id is free again; unsubscribing an unknown id is refused
            a.subscribe(SYM, req_id=rid)
            w = await a.expect("W", "Y")
            assert w.type == "W" and w[262] == rid
            a.send("V", [(262, "nope"), (263, "2"), (264, 0), (267, 1), (269, "0"),
                         (146, 1), (55, SYM)])
            y = await a.expect("Y")
            assert y[262] == "nope" and 281 not in y and "no subscription" in y[58]
    run(body())


def test_bad_requests_get_market_data_request_reject(tmp_path):
    def v(rid, *, kind="1", depth=0, types=("0",), symbols=(SYM,), extra=()):
        return [(262, rid), (263, kind), (264, depth), *extra, (267, len(types)),
                *[(269, t) for t in types], (146, len(symbols)), *[(55, s) for s in symbols]]

    async def body():
        async with fix_port(tmp_path, _accounts()) as (gw, port):
            a = await client(port, "acct0")
            cases = [("U", v("U", symbols=(SYM, "NOPE")), "0"),
                     ("D", v("D", depth=MAX_DEPTH + 1), "5"),
                     ("K", v("K", kind="5"), "4"),
                     ("T", v("T", types=("0", "7")), "8"),
                     ("F", v("F", extra=[(265, 0)]), "6"),
                     ("G", v("G", extra=[(266, "N")]), "7")]
            for rid, body_, reason in cases:
                a.send("V", body_)
                y = await a.expect("Y", "W")
                assert (y.type, y[262], y.get(281)) == ("Y", rid, reason), (rid, y.fields)
            a.send("V", v("OK"))
            assert (await a.expect("W"))[262] == "OK"
            a.send("V", v("OK"))
            y = await a.expect("Y")
            assert (y[262], y[281]) == ("OK", "1")
            # a malformed group is a session Reject (NumInGroup disagrees)
            a.send("V", [(262, "M"), (263, "1"), (264, 0), (267, 2), (269, "0"), (146, 1),
                         (55, SYM)])
            r = await a.expect("3")
            assert (r[373], r[371]) == ("16", "267")
            # a snapshot-only request may reuse nothing live, but its id is not kept
            a.send("V", v("S", kind="0"))
            await a.expect("W")
            a.send("V", v("S", kind="0"))
            assert (await a.expect("W", "Y")).type == "W"
    run(body())


def test_accounts_without_the_marketdata_role_are_refused(tmp_path):
    async def body():
        async with fix_port(tmp_path, _accounts()) as (gw, port):
            for name in ("tonly", "drop0"):
                c = await client(port, name)
                rid = c.subscribe(SYM)
                y = await c.expect("Y", "W")
                assert (y.type, y[262], y[281]) == ("Y", rid, "3"), name
                await c.logout()
            # a market-data-only login works without TargetSubID; a trade-only one cannot ask
            # for a market-data session
            feed = await client(port, "feed")
            feed.subscribe(SYM)
            assert (await feed.expect("W", "Y")).type == "W"
            try:
                await client(port, "tonly", marketdata=True)
                raise AssertionError("tonly got a market-data session")
            except FixClientError as e:
                assert "lacks the role 'marketdata'" in str(e)
    run(body())


def test_a_subscriber_that_does_not_read_is_cut_off_and_others_go_on(tmp_path):
    async def body():
        async with fix_port(tmp_path, _accounts(), max_output_bytes=16 << 10) as (gw, port):
            a = await client(port, "acct0")
            for k in range(200):   # a deep book: a full snapshot is ~7 kB
                a.new_order(f"D{k}", SYM, "buy" if k % 2 else "sell", 1,
                            px(gw, SYM, 100 - k if k % 2 else 101 + k), tif="1")
            await a.expect("8", where=lambda m: m.get(11) == "D199", timeout=30)
            watcher = await client(port, "acct1")
            rid = watcher.subscribe(SYM)
            await watcher.expect("W")
            # a raw subscriber with a tiny receive buffer that never reads, and asks for far
            # more than the kernel buffers hold (a few MB on loopback)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock)
            writer.write(raw_msg("A", 1, [(98, 0), (108, 30), (554, PASSWORD)], sender="feed"))
            assert (await read_raw(reader, 1, timeout=5))[0].type == "A"
            groups = [(264, 0), (267, 3), (269, "0"), (269, "1"), (269, "2"), (146, 1), (55, SYM)]
            writer.write(raw_msg("V", 2, [(262, "live"), (263, "1")] + groups, sender="feed"))
            for q in range(3, 1000):
                writer.write(raw_msg("V", q, [(262, f"s{q}"), (263, "0")] + groups,
                                     sender="feed"))
            # the others keep trading and watching meanwhile
            for k in range(300):
                a.new_order(f"O{k}", SYM, "buy" if k % 2 else "sell", 1 + k % 3,
                            px(gw, SYM, 60 + k % 40 if k % 2 else 141 + k % 40), tif="1")
                if k % 50 == 0:
                    await asyncio.sleep(0.002)
            await a.expect("8", where=lambda m: m.get(11) == "O299", timeout=30)
            await _fence(watcher, "T")
            book = MarketDataBook(req_id=rid)
            for m in watcher.received:
                book.apply(m)
            bids, asks = await _depth(gw)
            assert _ticks(gw, book, "bid") == bids and _ticks(gw, book, "ask") == asks
            # the slow session is disconnected: its account can log on again (one session per
            # account and kind at a time)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while True:
                try:
                    again = await client(port, "feed", reset=True)
                    break
                except FixClientError:
                    assert loop.time() < deadline, "the slow subscriber was never cut off"
                    await asyncio.sleep(0.2)
            again.subscribe(SYM, snapshot_only=True)
            assert (await again.expect("W")).type == "W"
            writer.close()
    run(body())
