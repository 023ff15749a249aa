"""Helpers of the end-to-end gateway tests: a real ``exsim serve`` child process, recording
clients of its FIX and binary ports, a seeded random order flow, and the checks that what every
client received agrees with the journal and the stored report streams.

The oracle, after the server has stopped:
- ``stored_streams(dir)``: every report stream as the gateway state file holds it (read-only).
- ``check_streams_against_journal``: each stored report agrees with the journal's rows
  (``store.read`` of orders, fills, events): a trade report is its fill (price, qty, trade id,
  side's order), every report's cum/leaves is an engine event of that order at that seq, an
  acknowledged order is a NEW row of the orders table; every fill is reported once to each
  side's own stream and to each side's firm's drop copy, and a drop copy holds nothing else.
- ``fix_business(raw)`` / ``expected_fix``: a FIX message's business content (the body after the
  standard header, so SendingTime, PossDupFlag and OrigSendingTime do not count) and the one the
  stored report makes (``fix.orders.report_body``); ``expected_ouch``: the binary message a
  stored report makes. A client's received reports must be its stream, in order, exactly.

Every wait here is bounded (asyncio.wait_for, or a deadline on a poll).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from gw_fixtures import PASSWORD, make_accounts, write_accounts  # noqa: E402

from exsim.exchange.gateway import ouch  # noqa: E402
from exsim.exchange.gateway.client.fix import FixClient, FixClientError  # noqa: E402
from exsim.exchange.gateway.client.ouch import OuchClient, SessionClosed  # noqa: E402
from exsim.exchange.gateway.core import SymbolInfo  # noqa: E402
from exsim.exchange.gateway.core import NOT_PROCESSED  # noqa: E402
from exsim.exchange.gateway.fix.codec import body_of  # noqa: E402
from exsim.exchange.gateway.fix.orders import report_body  # noqa: E402
from exsim.exchange.gateway.reports import Report  # noqa: E402
from exsim.exchange.schema import Event, Kind, OrderType, Side, Tif  # noqa: E402

__all__ = ["PASSWORD", "ROOT", "ServeProcess", "RecordingFixClient", "OuchRecorder", "Flow",
           "MIDS", "NETWORK_S", "SENTINEL_OFFSET", "accounts_file", "fix_login", "fix_trader",
           "ouch_trader", "quiesce", "stored_streams", "journal", "symbol_infos",
           "check_streams_against_journal", "check_fix_client", "check_ouch_client",
           "fix_business", "expected_fix", "expected_ouch", "fix_reports", "run", "wait_until",
           "warm_up", "px", "core_oracle"]

# the default scenario's symbols and mids (ticks): JPM 0.01, BTCUSD 0.5
MIDS = {"JPM": 15_000, "BTCUSD": 120_000}
TICKS = {"JPM": Decimal("0.01"), "BTCUSD": Decimal("0.5")}
SENTINEL_OFFSET = 400   # quiescence orders rest this many ticks below the mid: nothing crosses
NETWORK_S = 20.0        # the longest any one socket wait may take


def run(coro, timeout: float):
    """Run ``coro`` under an overall deadline; return its result."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def wait_until(predicate, timeout: float, what: str, step: float = 0.01) -> None:
    """Poll ``predicate()`` until true; raise AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(step)


def accounts_file(tmp_path, n: int):
    """Write the gw_fixtures test accounts (acct0 .. acct{n-1}, drop0, drop1, feed; cheap
    hashes) to ``tmp_path/accounts.toml``; return (path, Accounts)."""
    accts = make_accounts(n)
    return write_accounts(tmp_path / "accounts.toml", accts), accts


# -- the server process -------------------------------------------------------------------------

class ServeProcess:
    """``exsim serve DIR --accounts FILE --fix 0 --binary 0 --feed 0`` in a child process.

    ``await start()`` removes a stale ``listening.json`` (a killed server leaves it), starts the
    child and returns {port name: port} once the child wrote the file; ``kill()`` is SIGKILL,
    ``await stop()`` SIGTERM and the exit status."""

    def __init__(self, data_dir, accounts_path, log_path, *, ports=("fix", "binary", "feed"),
                 extra=()):
        self.data_dir, self.accounts_path = str(data_dir), str(accounts_path)
        self.log_path = str(log_path)
        self.ports_wanted, self.extra = ports, list(extra)
        self.proc: subprocess.Popen | None = None
        self.ports: dict = {}
        self.starts = 0

    @property
    def listening_path(self) -> str:
        return os.path.join(self.data_dir, "gateway", "listening.json")

    async def start(self, timeout: float = 60.0) -> dict:
        """Start the child; return {name: port}. Raises AssertionError (with the child's log)
        if it exits or does not listen within ``timeout`` s."""
        try:
            os.unlink(self.listening_path)
        except FileNotFoundError:
            pass
        argv = [sys.executable, "-m", "exsim.replay.cli", "serve", self.data_dir,
                "--accounts", self.accounts_path, "--fsync", "batch", "--batch-us", "500",
                "--allow-weak-hashes"]
        for p in self.ports_wanted:
            argv += [f"--{p}", "0"]
        # why the fault handler: a child that hangs is stopped with SIGABRT, which then writes
        # every thread's stack to the log the failure shows
        env = dict(os.environ, PYTHONPATH=ROOT, PYTHONFAULTHANDLER="1")
        log = open(self.log_path, "ab")
        log.write(f"\n--- start {self.starts} ---\n".encode())
        log.flush()
        self.proc = subprocess.Popen(argv + self.extra, cwd=ROOT, env=env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"exsim serve exited with {self.proc.returncode}:\n"
                                     f"{self.log()}")
            if os.path.exists(self.listening_path):
                with open(self.listening_path) as f:
                    self.ports = {k: int(v[1]) for k, v in json.load(f).items()}
                return self.ports
            if time.monotonic() > deadline:
                self.abort()
                raise AssertionError(f"exsim serve did not listen within {timeout} s:\n"
                                     f"{self.log()}")
            await asyncio.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def abort(self) -> None:
        """SIGABRT the child (its stacks go to the log) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGABRT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    async def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM the child; return its exit status (it is killed after ``timeout`` s)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.abort()
                raise AssertionError(f"exsim serve did not stop within {timeout} s:\n"
                                     f"{self.log()}")
            await asyncio.sleep(0.02)
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-12000:].decode("utf-8", "replace")
        except OSError:
            return ""


# -- clients -------------------------------------------------------------------------------------

class RecordingFixClient(FixClient):
    """A FixClient that also keeps every frame the gateway sent, duplicates included:
    ``frames`` [(connection number, raw bytes)] (``received`` keeps what was handed out)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.frames: list[tuple[int, bytes]] = []
        self.connections = 0

    async def logon(self, *, timeout: float = 5.0, reset: bool = False):
        self.connections += 1
        return await super().logon(timeout=timeout, reset=reset)

    def _on_frame(self, frame: bytes) -> None:
        self.frames.append((self.connections, frame))
        super()._on_frame(frame)


async def fix_login(port: int, name: str, **kw) -> RecordingFixClient:
    """Return a RecordingFixClient logged on as ``name`` (bounded by NETWORK_S), with exsim's
    FIX extensions (880 TrdMatchID ties each trade report to its fill row)."""
    kw.setdefault("extensions", True)
    c = RecordingFixClient("127.0.0.1", port, name, PASSWORD, **kw)
    await asyncio.wait_for(c.logon(timeout=NETWORK_S), NETWORK_S + 1)
    return c


class OuchRecorder:
    """An OuchClient and a task that keeps every message it receives: ``log`` [(connection
    number, Received)]. ``await reconnect(port)`` logs in again from the next sequence number
    (to a restarted server's new port) and restarts the pump."""

    def __init__(self, client: OuchClient):
        self.client = client
        self.log: list = []
        self.connections = 1
        self._pump = asyncio.create_task(self._run())

    @classmethod
    async def connect(cls, port: int, name: str) -> "OuchRecorder":
        c = await asyncio.wait_for(OuchClient.connect("127.0.0.1", port, name, PASSWORD, seq=1,
                                                      timeout=NETWORK_S), NETWORK_S + 1)
        return cls(c)

    async def _run(self) -> None:
        while True:
            try:
                got = await self.client.recv(timeout=3600)
            except (SessionClosed, asyncio.TimeoutError):
                return
            self.log.append((self.connections, got))

    @property
    def sequenced(self) -> list:
        return [g for _, g in self.log if g.seq is not None]

    async def pump_done(self, timeout: float = NETWORK_S) -> None:
        """Wait until the pump has drained the ended connection."""
        await asyncio.wait_for(asyncio.shield(self._pump), timeout)

    async def reconnect(self, port: int) -> int:
        """Log in again from ``next_seq`` on ``port``; return the server's next seq."""
        await self.pump_done()
        self.client.port = port
        self.connections += 1
        nxt = await asyncio.wait_for(self.client.reconnect(), NETWORK_S)
        self._pump = asyncio.create_task(self._run())
        return nxt

    async def close(self) -> None:
        await self.client.logout()
        try:
            await self.pump_done(5)
        except asyncio.TimeoutError:
            self._pump.cancel()


# -- the random flow -----------------------------------------------------------------------------

@dataclass
class Live:
    """An order of the flow that may still be open (its current client id is the key)."""

    symbol: str
    side: int
    qty: int
    price: int
    order_type: int


class Flow:
    """A seeded random order flow of one client: limit (GTC, some IOC / FOK / post-only /
    iceberg / min-qty), market IOC, stop and stop-limit orders, cancels and replaces of its own
    orders, at prices crossing around each symbol's mid. ``next()`` returns one action:
    ("new", cid, dict of order fields) | ("cancel", cid, orig) | ("replace", cid, orig, qty,
    price). The client ids are ``prefix`` + a counter (at most 14 characters)."""

    def __init__(self, seed: int, prefix: str):
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.n = 0
        self.live: dict[str, Live] = {}

    def cid(self) -> str:
        self.n += 1
        return f"{self.prefix}{self.n}"

    def next(self):
        rng = self.rng
        roll = rng.random()
        limits = [c for c, o in self.live.items() if o.order_type == OrderType.LIMIT]
        if self.live and roll < 0.12:
            orig = rng.choice(list(self.live))
            self.live.pop(orig)
            return ("cancel", self.cid(), orig)
        if limits and roll < 0.24:
            orig = rng.choice(limits)
            o = self.live.pop(orig)
            cid = self.cid()
            qty, price = rng.randint(1, 12), o.price + rng.choice((-1, 0, 1))
            self.live[cid] = Live(o.symbol, o.side, qty, price, o.order_type)
            return ("replace", cid, orig, qty, price)
        symbol = rng.choice(("JPM", "BTCUSD"))
        mid = MIDS[symbol]
        side = rng.choice((Side.BUY, Side.SELL))
        sign = 1 if side == Side.BUY else -1
        o = dict(symbol=symbol, side=side, qty=rng.randint(1, 10), price=mid + rng.randint(-4, 4),
                 order_type=OrderType.LIMIT, tif=Tif.GTC, stop_price=0, display_qty=0,
                 min_qty=0, post_only=False)
        k = rng.random()
        if k < 0.08:
            o.update(order_type=OrderType.MARKET, tif=Tif.IOC, price=0)
        elif k < 0.14:
            o.update(tif=Tif.IOC)
        elif k < 0.17:
            o.update(tif=Tif.FOK)
        elif k < 0.21:
            o.update(post_only=True, price=mid - sign * rng.randint(1, 5))
        elif k < 0.30:
            o.update(qty=rng.randint(6, 20), display_qty=rng.randint(1, 3))
        elif k < 0.33:
            o.update(qty=rng.randint(4, 10), min_qty=rng.randint(2, 4))
        elif k < 0.39:
            o.update(order_type=OrderType.STOP, price=0, stop_price=mid + sign * rng.randint(1, 4))
        elif k < 0.44:
            sp = mid + sign * rng.randint(1, 4)
            o.update(order_type=OrderType.STOP_LIMIT, stop_price=sp, price=sp + sign)
        cid = self.cid()
        if o["tif"] == Tif.GTC and o["order_type"] != OrderType.MARKET:
            self.live[cid] = Live(symbol, side, o["qty"], o["price"], o["order_type"])
            if len(self.live) > 40:
                self.live.pop(next(iter(self.live)))
        return ("new", cid, o)

    def done(self, cid: str) -> None:
        """The order ``cid`` is no longer open (a report said so)."""
        self.live.pop(cid, None)


def px(symbol: str, ticks: int) -> str:
    """Return the FIX decimal price of ``ticks`` ticks of ``symbol``."""
    return format(TICKS[symbol] * ticks, "f")


_FIX_ORD = {OrderType.LIMIT: "2", OrderType.MARKET: "1", OrderType.STOP: "3",
            OrderType.STOP_LIMIT: "4"}
_FIX_TIF = {Tif.GTC: "1", Tif.IOC: "3", Tif.FOK: "4", Tif.DAY: "0"}


def fix_send(client: FixClient, action, orders: dict) -> str:
    """Send one Flow action over FIX; ``orders`` {cid: (symbol, side)} of what was entered.
    Returns the request's ClOrdID."""
    kind, cid = action[0], action[1]
    if kind == "new":
        o = action[2]
        orders[cid] = (o["symbol"], o["side"])
        side = "1" if o["side"] == Side.BUY else "2"
        ot = o["order_type"]
        price = px(o["symbol"], o["price"]) if ot in (OrderType.LIMIT, OrderType.STOP_LIMIT) \
            else None
        stop = px(o["symbol"], o["stop_price"]) if o["stop_price"] else None
        client.new_order(cid, o["symbol"], side, o["qty"], price, ord_type=_FIX_ORD[ot],
                         tif=_FIX_TIF[o["tif"]], stop_px=stop, post_only=o["post_only"],
                         max_floor=o["display_qty"] or None, min_qty=o["min_qty"] or None)
        return cid
    orig = action[2]
    symbol, side = orders[orig]
    fside = "1" if side == Side.BUY else "2"
    if kind == "cancel":
        client.cancel(cid, orig, symbol, fside)
    else:
        orders[cid] = (symbol, side)
        client.replace(cid, orig, symbol, fside, action[3], px(symbol, action[4]), tif="1")
    return cid


async def ouch_send(client: OuchClient, action) -> str:
    """Send one Flow action over the binary port; return the request's token (a cancel's is
    the order's token)."""
    kind, cid = action[0], action[1]
    if kind == "new":
        o = action[2]
        await client.enter(cid, o["symbol"], o["side"], o["qty"], o["price"],
                           order_type=o["order_type"], tif=o["tif"],
                           display_qty=o["display_qty"], min_qty=o["min_qty"],
                           stop_price=o["stop_price"], post_only=o["post_only"])
        return cid
    if kind == "cancel":
        await client.cancel(action[2])
        return action[2]
    await client.replace(action[2], cid, action[3], action[4])
    return cid


TERMINAL_FIX = {"2", "4", "C", "8"}   # OrdStatus of an order that is no longer open


def fix_reports(client: FixClient) -> list:
    """Return the ExecutionReports and OrderCancelRejects handed out to ``client``, in order."""
    return [m for m in client.received if m.type in ("8", "9")]


# -- trading and quiescence ----------------------------------------------------------------------

PACE_S = (0.005, 0.045)   # pause between one client's messages (about 40 a second each)


def absorb_fix(client, flow, start: int) -> int:
    """Forget the flow's orders the reports handed out since ``start`` closed; return the new
    index into ``client.received``."""
    rec = client.received
    for m in rec[start:]:
        if m.type == "8" and m.get(39) in TERMINAL_FIX:
            flow.done(m.get(11))
            flow.done(m.get(41))
    return len(rec)


def absorb_ouch(rec: "OuchRecorder", flow, start: int) -> int:
    """``absorb_fix`` of a binary client (index into ``rec.log``)."""
    log = rec.log
    for _, got in log[start:]:
        m = got.msg
        if got.kind in ("Canceled", "Rejected") or (got.kind == "Executed" and m.leaves_qty == 0):
            flow.done(m.token)
            flow.done(getattr(m, "orig_token", ""))
    return len(log)


async def fix_trader(client, flow, until: float, orders: dict, pace=PACE_S,
                     stop: asyncio.Event | None = None) -> int:
    """Send the flow over FIX until ``until`` (monotonic) or ``stop``; return the messages sent.
    A dropped connection ends it quietly (the crash tests drop it on purpose)."""
    seen = sent = 0
    try:
        while time.monotonic() < until and not (stop and stop.is_set()):
            seen = absorb_fix(client, flow, seen)
            fix_send(client, flow.next(), orders)
            sent += 1
            await asyncio.sleep(flow.rng.uniform(*pace))
    except FixClientError:
        pass
    return sent


async def ouch_trader(rec, flow, until: float, pace=PACE_S,
                      stop: asyncio.Event | None = None) -> int:
    """``fix_trader`` over the binary port."""
    seen = sent = 0
    try:
        while time.monotonic() < until and not (stop and stop.is_set()):
            seen = absorb_ouch(rec, flow, seen)
            await ouch_send(rec.client, flow.next())
            sent += 1
            await asyncio.sleep(flow.rng.uniform(*pace))
    except SessionClosed:
        pass
    return sent


def sentinel_cids(tag: str) -> dict:
    """Return {symbol: client id} of one quiescence round."""
    return {sym: f"{tag}{sym[:3]}" for sym in MIDS}


def fix_acks(client, cids) -> dict:
    """Return {ClOrdID: OrderID} of the acknowledgements (150=0) of ``cids`` handed out."""
    return {m.get(11): int(m[37]) for m in client.received
            if m.type == "8" and m.get(150) == "0" and m.get(11) in cids}


def ouch_acks(rec, cids) -> dict:
    """Return {token: order id} of the Accepted messages of ``cids``."""
    return {g.msg.token: g.msg.order_id for _, g in rec.log
            if g.kind == "Accepted" and g.msg.token in cids}


async def fix_sentinels(client, tag: str) -> dict:
    """Enter one resting buy per symbol far below the mid; return {symbol: order id} once both
    are acknowledged (so every earlier request of the session was answered)."""
    cids = sentinel_cids(tag)
    for sym, cid in cids.items():
        client.new_order(cid, sym, "1", 1, px(sym, MIDS[sym] - SENTINEL_OFFSET), tif="1")
    want = set(cids.values())
    await wait_until(lambda: set(fix_acks(client, want)) == want, NETWORK_S,
                     f"{client.name}'s sentinels {want}")
    acks = fix_acks(client, want)
    return {sym: acks[cid] for sym, cid in cids.items()}


async def ouch_sentinels(rec, tag: str) -> dict:
    """``fix_sentinels`` over the binary port."""
    cids = sentinel_cids(tag)
    for sym, cid in cids.items():
        await rec.client.enter(cid, sym, Side.BUY, 1, MIDS[sym] - SENTINEL_OFFSET)
    want = set(cids.values())
    await wait_until(lambda: set(ouch_acks(rec, want)) == want, NETWORK_S,
                     f"{rec.client.username}'s sentinels {want}")
    acks = ouch_acks(rec, want)
    return {sym: acks[cid] for sym, cid in cids.items()}


async def quiesce(fixc, ouchc, drops: dict, accounts, feed=None) -> None:
    """Wait until every report made so far reached every client (module docstring of
    test_e2e_sessions): two rounds of sentinels, then the drop copies and the feed see the
    second round."""
    for tag in ("zA", "zB"):
        got = await asyncio.gather(*(fix_sentinels(c, tag) for c in fixc),
                                   *(ouch_sentinels(r, tag) for r in ouchc))
    names = [c.name for c in fixc] + [r.client.username for r in ouchc]
    last = dict(zip(names, got))
    for firm, d in drops.items():
        want = {(n, cid) for n in last if accounts.get(n).firm == firm
                for cid in sentinel_cids("zB").values()}
        await wait_until(lambda: want <= {(m.get(1), m.get(11)) for m in d.received
                                          if m.type == "8"}, NETWORK_S,
                         f"the drop copy of {firm}")
    if feed is not None:
        for sym in MIDS:
            refs = {ids[sym] for ids in last.values()}
            await feed.wait_for(lambda: refs <= {r[0] for r in feed.book(sym)}, NETWORK_S)


# -- the oracle ----------------------------------------------------------------------------------

def stored_streams(data_dir) -> dict[str, list[Report]]:
    """Return {stream: [Report in rseq order]} from DATA_DIR/gateway/gateway.sqlite, read-only."""
    path = os.path.join(str(data_dir), "gateway", "gateway.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = defaultdict(list)
        for stream, rseq, body in db.execute(
                "SELECT stream, rseq, body FROM reports ORDER BY stream, rseq"):
            r = Report.from_json(body)
            assert (r.stream, r.rseq) == (stream, rseq), f"row {stream}:{rseq} holds {r}"
            out[stream].append(r)
        return dict(out)
    finally:
        db.close()


def journal(data_dir) -> dict:
    """Return {"orders", "fills", "events"}: the stored tables of the served directory."""
    from exsim.store import read

    return {t: read(str(data_dir), t) for t in ("orders", "fills", "events")}


def symbol_infos(data_dir) -> dict:
    """Return {name: SymbolInfo} from the directory's catalog."""
    from exsim.store import Reader

    with Reader(str(data_dir)) as r:
        return {str(s["name"]): SymbolInfo(int(s["id"]), str(s["name"]),
                                           Decimal(str(s["tick_size"])))
                for s in r.catalog.symbols()}


def check_streams_against_journal(streams: dict, jr: dict, accounts) -> dict:
    """Assert that the stored report streams agree with the journal (module docstring).
    Returns {order_id: stream} of the orders the streams acknowledged."""
    fills = {int(f["trade_id"]): f for f in jr["fills"]}
    events = defaultdict(list)
    for e in jr["events"]:
        events[(int(e["seq"]), int(e["order_id"]))].append(e)
    rejected_seqs = {int(e["seq"]) for e in jr["events"] if int(e["event"]) == Event.REJECTED}
    orders = {int(o["seq"]): o for o in jr["orders"]}
    by_trader = {a.trader: a for a in accounts}
    owner: dict[int, str] = {}        # order_id -> the stream of its acknowledgement
    trade_reports = defaultdict(int)  # (stream, trade_id, order_id) -> count

    for stream, rs in streams.items():
        assert [r.rseq for r in rs] == list(range(1, len(rs) + 1)), f"{stream}: rseq gap"
        running = defaultdict(int)
        for r in rs:
            where = f"{stream}:{r.rseq} ({r.exec} of order {r.order_id})"
            if r.seq == 0:
                # the only core-level answer these flows can get: a request a crash caught
                # between its commit and its batch's WAL record (core.NOT_PROCESSED)
                assert r.text == NOT_PROCESSED and r.exec.endswith("rejected"), \
                    f"{where}: a core-level refusal in a flow that has none: {r.text}"
                continue
            if r.exec == "trade":
                f = fills.get(r.trade_id)
                assert f is not None, f"{where}: trade id {r.trade_id} is no fill"
                assert int(f["seq"]) == r.seq, where
                assert r.order_id in (int(f["buy_order_id"]), int(f["sell_order_id"])), where
                assert (r.last_qty, r.last_px) == (int(f["qty"]), int(f["price"])), where
                running[r.order_id] += r.last_qty
                assert r.cum_qty == running[r.order_id], f"{where}: cum is not its fills' sum"
                trade_reports[(stream, r.trade_id, r.order_id)] += 1
            if r.exec in ("new", "trade", "canceled", "expired", "replaced", "triggered"):
                rows = events.get((r.seq, r.order_id), [])
                assert any((int(e["filled_qty"]), int(e["leaves_qty"])) ==
                           (r.cum_qty, r.leaves_qty) for e in rows), \
                    f"{where}: no engine event of the order at seq {r.seq} has cum " \
                    f"{r.cum_qty} / leaves {r.leaves_qty}"
            else:
                assert r.seq in rejected_seqs, f"{where}: no REJECTED event at seq {r.seq}"
            if r.exec == "new":
                o = orders.get(r.seq)
                assert o is not None and int(o["kind"]) == Kind.NEW \
                    and int(o["order_id"]) == r.order_id, f"{where}: not a NEW row of the journal"
                assert (int(o["side"]), int(o["qty"]), int(o["order_type"])) == \
                    (r.side, r.qty, r.order_type), where
                assert by_trader[int(o["trader"])].name == r.account, where
                if not stream.startswith("dropcopy:"):
                    owner[r.order_id] = stream
            if stream.startswith("dropcopy:"):
                assert accounts.get(r.account).firm == stream.split(":", 1)[1], \
                    f"{where}: a report of another firm's account {r.account}"
            else:
                assert stream.endswith(":" + r.account), f"{where}: another account's report"

    # every fill: once on each side's own stream, once in each side's firm's drop copy
    for tid, f in fills.items():
        for oid, trader in ((int(f["buy_order_id"]), int(f["buy_trader"])),
                            (int(f["sell_order_id"]), int(f["sell_trader"]))):
            acct = by_trader[trader]
            own = owner.get(oid)
            assert own is not None, f"fill {tid}: order {oid} was never acknowledged"
            assert trade_reports[(own, tid, oid)] == 1, f"fill {tid} side {oid} on {own}"
            assert trade_reports[(f"dropcopy:{acct.firm}", tid, oid)] == 1, \
                f"fill {tid} side {oid} in dropcopy:{acct.firm}"
    n_fill_sides = 2 * len(fills)
    assert sum(v for (s, _, _), v in trade_reports.items() if s.startswith("dropcopy:")) == \
        n_fill_sides, "the drop copies hold trades that are not fills"
    return owner


def fix_business(raw: bytes) -> tuple:
    """Return (MsgType, body pairs as bytes) of a FIX message: its content without the standard
    header (BodyLength, MsgSeqNum, SendingTime, PossDupFlag, OrigSendingTime ...) and trailer."""
    msg_type, body, _ = body_of(raw)
    return msg_type, tuple((t, bytes(v)) for t, v in body)


def expected_fix(report: Report, symbols: dict, *, dropcopy: bool = False) -> tuple:
    """Return what ``fix_business`` of the message telling a client of ``report`` must be."""
    msg_type, body = report_body(report, symbols, with_account=dropcopy, extended=True)
    return msg_type, tuple((t, str(v).encode()) for t, v in body)


def expected_ouch(report: Report):
    """Return the decoded binary message of ``report``."""
    return ouch.decode_server(ouch.encode_report(report))


def check_fix_client(client, stream: str, streams: dict, symbols: dict, fills: dict, *,
                     dedupe: bool = False) -> None:
    """Assert that the reports handed out to ``client`` are ``stream`` as stored, in order,
    exactly, that a trade's LastQty / LastPx / OrderID are its fill row's, and that no
    session-level Reject or BusinessMessageReject came. ``dedupe``: keep the first of the
    messages with one MsgSeqNum (a client that asked again for what it had already had)."""
    dropcopy = stream.startswith("dropcopy:")
    reports = fix_reports(client)
    if dedupe:
        seen = set()
        reports = [m for m in reports if not (m.seq in seen or seen.add(m.seq))]
    got = [fix_business(m.raw) for m in reports]
    want = [expected_fix(r, symbols, dropcopy=dropcopy) for r in streams.get(stream, [])]
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise AssertionError(f"{stream}: {len(got)} reports received, {len(want)} stored; the "
                             f"first difference is at #{first + 1}: "
                             f"{got[first] if first < len(got) else None} != "
                             f"{want[first] if first < len(want) else None}")
    assert not [m for m in client.received if m.type in ("3", "j")], f"{stream}: rejects"
    for m in reports:
        if m.type == "8" and m.get(150) == "F":
            f = fills[int(m[880])]
            assert int(m[37]) in (int(f["buy_order_id"]), int(f["sell_order_id"])), m.raw
            tick = symbols[m[55]].tick_size
            assert (int(m[32]), m[31]) == (
                int(f["qty"]), format((tick * int(f["price"])).normalize(), "f")), m.raw


def check_ouch_client(rec, streams: dict, fills: dict) -> None:
    """Assert that the sequenced messages ``rec`` received are its stored stream, numbered
    1..N, exactly, that every Executed is its fill row, and that no unsequenced reject came."""
    name = rec.client.username
    seqd = rec.sequenced
    assert [g.seq for g in seqd] == list(range(1, len(seqd) + 1)), f"{name}: numbering"
    want = [expected_ouch(x) for x in streams.get(f"ouch:{name}", [])]
    assert [g.msg for g in seqd] == want, f"{name}: {len(seqd)} received, {len(want)} stored"
    assert not [g for _, g in rec.log if g.seq is None], f"{name}: unsequenced rejects"
    for g in seqd:
        if g.kind == "Executed":
            f = fills[g.msg.match_number]
            assert (g.msg.qty, g.msg.price) == (int(f["qty"]), int(f["price"])), g
            assert g.msg.order_id in (int(f["buy_order_id"]), int(f["sell_order_id"])), g


_warm = []


def warm_up(tmp_path) -> None:
    """Compile the engine in this process once (numba writes its cache), so a child server's
    first batch does not spend a minute compiling while the test's socket waits run."""
    if _warm:
        return
    from gw_fixtures import running_gateway
    from exsim.exchange.gateway.core import Request

    async def main():
        accts = make_accounts(2)
        a0, a1 = accts.get("acct0"), accts.get("acct1")
        async with running_gateway(tmp_path / "warm", accts) as gw:
            heard = []
            gw.subscribe("fix:acct1", heard.extend)
            gw.submit(Request("new", a0, "fix:acct0", "w1", "JPM", side=Side.BUY, price=15000,
                              qty=5, display_qty=1))
            gw.submit(Request("new", a0, "fix:acct0", "w2", "JPM", side=Side.BUY,
                              order_type=OrderType.STOP, stop_price=15002, qty=1))
            gw.submit(Request("new", a1, "fix:acct1", "w3", "JPM", side=Side.SELL, price=15000,
                              qty=2))
            gw.submit(Request("replace", a0, "fix:acct0", "w4", "JPM", orig_client_order_id="w1",
                              price=14999, qty=4))
            gw.submit(Request("cancel", a0, "fix:acct0", "w5", "JPM", orig_client_order_id="w4"))
            await wait_until(lambda: heard, 600, "the warm-up's reports")
    asyncio.run(main())
    _warm.append(True)


def core_oracle(data_dir, accounts) -> None:
    """Reopen the served directory in-process and run the core tests' oracle
    (``core_child.check_journal``: every stored stream is what ``derive`` makes of the journal,
    the order states agree with the fills and the engine's live orders). Run it after verify
    and rerun: reopening seals and checkpoints again."""
    from core_child import check_journal, in_core
    from exsim.replay.serving import open_gateway

    async def main():
        gw = await open_gateway(str(data_dir), accounts, durability="none")
        try:
            async with gw.engine_lock:
                await in_core(gw, check_journal, gw)
        finally:
            await gw.close()
    asyncio.run(asyncio.wait_for(main(), 120))
