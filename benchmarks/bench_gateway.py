"""The gateway over loopback: order round-trip latency and sustained order rate (issue 17).

A real ``exsim serve`` process (a child of this one, its own core) serves a fresh data
directory; this process is the load generator, with one asyncio client per account, through
the project's own clients (``exchange.gateway.client``). Orders are limit orders of 1 lot on
JPM at one price, alternating BUY and SELL per client, so every second order trades and the
book stays one level deep: what is measured is the gateway (decode, stamp, batch, match,
journal, report, encode), not a growing book.

- **Latency** (``--rates``): one client sends at a fixed offered rate, open loop: order i is due
  at ``t0 + i / rate`` and its latency is measured from that due time to the arrival of its
  acknowledgement (FIX ExecutionReport 35=8 ExecType=0, binary Accepted). A sender that falls
  behind sends at once and the delay counts: no coordinated omission. p50 / p99 / p99.9 in us.
- **Throughput** (``--clients``): each of N clients keeps ``--window`` orders outstanding and
  sends the next as each acknowledgement arrives; the rate is acknowledged orders per second
  over ``--duration`` seconds after a warm-up.
Both for each protocol (``fix``, ``binary``; ``ouch50``: NASDAQ OUCH 5.0 over SoupBinTCP 3.0,
acknowledged by Order Accepted, docs/gateway-nasdaq.md) and durability (``--fsync batch`` fsyncs
every batch before acknowledging it; ``none`` does not).

    python -m benchmarks.bench_gateway [--protocols fix binary] [--fsync batch none] [--rates 500 2000 8000] [--clients 1 16] [--duration 3] [--runs 3] [--batch-us 200] [--out benchmarks/results/gateway.json]

Anchors to read beside the figures (not measured here): go-quantcup with PostgreSQL, 42.8 k
orders/s end to end (its README); the Philadelphia Java FIX engine's published 7.7 us loopback
round trip. Figures are medians over ``--runs`` runs. Prints a markdown table and writes JSON.
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): one short run of each cell at one low rate.
EXSIM_BENCH_WAIT_S (default 120): how long a latency run waits for its last acknowledgement
before it fails (the first run on a fresh checkout also compiles the numba kernels).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from decimal import Decimal

import numpy as np

from benchmarks import _smoke
from benchmarks.bench_engine import machine

PRICE = 15_000
SYMBOL = "JPM"
PASSWORD = "bench-password"
OUCH_PASSWORD = "bench-pw"   # a SoupBinTCP 3.0 password is at most 10 characters
READY_TIMEOUT_S = 300     # the first start compiles the numba kernels


# -- the server ------------------------------------------------------------------------------------
class Server:
    """An ``exsim serve`` child process on a fresh data directory (ports picked by the system)."""

    def __init__(self, fsync: str, n_accounts: int, protocols, batch_us: int = 200):
        from exsim.exchange.gateway.accounts import Account, format_account, hash_password

        self.tmp = tempfile.TemporaryDirectory(prefix="exsim-bench-gw-")
        self.data_dir = os.path.join(self.tmp.name, "served")
        accounts = os.path.join(self.tmp.name, "accounts.toml")
        h, h_ouch = hash_password(PASSWORD), hash_password(OUCH_PASSWORD)
        with open(accounts, "w") as f:
            f.write("\n".join(format_account(Account(f"bench{i}", "BENCH", i + 1,
                                                     frozenset({"trade"}), 10_000_000, h))
                              for i in range(n_accounts)))
            # the OUCH 5.0 client's accounts: a SoupBinTCP username is 6 characters
            f.write("\n" + "\n".join(format_account(Account(
                f"nq{i}", "BENCH", 10_000 + i, frozenset({"trade"}), 10_000_000, h_ouch))
                for i in range(n_accounts)))
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exsim.replay.cli", "serve", self.data_dir, "--accounts", accounts,
             *[a for p in protocols for a in (f"--{p}", "0")], "--fsync", fsync,
             "--batch-us", str(batch_us)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.ports = self._wait_ready()

    def _wait_ready(self) -> dict:
        path = os.path.join(self.data_dir, "gateway", "listening.json")
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exsim serve exited {self.proc.returncode}: "
                                   f"{self.proc.stderr.read().decode()[-2000:]}")
            if os.path.exists(path):
                with open(path) as f:
                    return {k: tuple(v) for k, v in json.load(f).items()}
            time.sleep(0.05)
        raise RuntimeError("exsim serve did not start listening in time")

    def stop(self) -> None:
        """Stop the server cleanly (SIGTERM) and remove its directory."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()
        self.tmp.cleanup()


# -- protocol adapters: send an order without waiting, hear its acknowledgement --------------------
class BinaryClient:
    """The binary order-entry client, reduced to what the benchmark needs."""

    name = "binary"

    async def connect(self, host, port, account):
        from exsim.exchange.gateway.client.ouch import OuchClient

        self.c = await OuchClient.connect(host, port, account, PASSWORD, seq=0, timeout=30)

    async def send(self, token: str, side: int) -> None:
        await self.c.enter(token, SYMBOL, side, 1, PRICE)

    async def acks(self):
        """Yield the token of each acknowledgement, as it arrives."""
        while True:
            got = await self.c.recv(60)
            if got.kind == "Accepted":
                yield got.msg.token.strip() if isinstance(got.msg.token, str) else got.msg.token

    async def close(self):
        await self.c.close()


class FixClient:
    """The FIX client, reduced to what the benchmark needs."""

    name = "fix"

    async def connect(self, host, port, account):
        from exsim.exchange.gateway.client.fix import FixClient as Client

        self.c = await Client.connect(host, port, account, PASSWORD, timeout=30, reset=True)
        self.price = str(PRICE * Decimal("0.01"))   # JPM's tick is 0.01

    async def send(self, token: str, side: int) -> None:
        self.c.new_order(token, SYMBOL, "sell" if side else "buy", 1, self.price, tif="1")

    async def acks(self):
        while True:
            msg = await self.c.next(60)
            if msg.type == "8" and msg.get(150) == "0":
                yield msg.get(11)

    async def close(self):
        await self.c.close()


class Ouch50Client:
    """A NASDAQ OUCH 5.0 client over SoupBinTCP 3.0 (plain struct, docs/gateway-nasdaq.md):
    Enter Order of 1 share of JPM at PRICE, acknowledged by Order Accepted. Its accounts are
    ``nq<k>`` (a SoupBinTCP username is 6 characters) with password OUCH_PASSWORD (10)."""

    name = "ouch50"
    ENTER = struct.Struct(">cIcI8sQccccc14sH")
    last_ref: dict = {}   # account -> last UserRefNum: they must rise for the server's life

    async def connect(self, host, port, account):
        self.account = "nq" + account.removeprefix("bench")
        self.r, self.w = await asyncio.open_connection(host, port)
        login = (self.account.ljust(6) + OUCH_PASSWORD.ljust(10) + " " * 10 + "0".rjust(20))
        self.w.write(struct.pack(">Hc", 47, b"L") + login.encode())
        n, t = struct.unpack(">Hc", await asyncio.wait_for(self.r.readexactly(3), 30))
        await self.r.readexactly(n - 1)
        if t != b"A":
            raise RuntimeError(f"OUCH 5.0 login of {self.account} refused ({t!r})")
        self.tokens = {}

    async def send(self, token: str, side: int) -> None:
        ref = self.last_ref.get(self.account, 0) + 1
        self.last_ref[self.account] = ref
        self.tokens[ref] = token
        self.w.write(struct.pack(">Hc", 48, b"U") + self.ENTER.pack(
            b"O", ref, b"S" if side else b"B", 1, b"JPM     ", PRICE * 100, b"5", b"Y", b"A",
            b"N", b"N", b" " * 14, 0))

    async def acks(self):
        """Yield the token of each Order Accepted, as it arrives."""
        while True:
            n, t = struct.unpack(">Hc", await asyncio.wait_for(self.r.readexactly(3), 60))
            body = await self.r.readexactly(n - 1)
            if t == b"S" and body[:1] == b"A":
                yield self.tokens.pop(struct.unpack_from(">I", body, 9)[0], None)

    async def close(self):
        self.w.write(struct.pack(">Hc", 1, b"O"))
        self.w.close()


ADAPTERS = {"binary": BinaryClient, "fix": FixClient, "ouch50": Ouch50Client}


# -- the two measurements ----------------------------------------------------------------------------
async def latency_run(proto: str, host: str, port: int, rate: int, n: int, tag: str) -> np.ndarray:
    """Send ``n`` orders open loop at ``rate``/s from one client; return each latency in ns
    (from its due time to its acknowledgement)."""
    client = ADAPTERS[proto]()
    await client.connect(host, port, "bench0")
    due = {}
    lat = np.zeros(n, np.int64)
    got = 0
    done = asyncio.Event()

    async def hear():
        nonlocal got
        async for token in client.acks():
            i = due.pop(token, None)
            if i is not None:
                lat[i[0]] = time.perf_counter_ns() - i[1]
                got += 1
                if got == n:
                    done.set()
                    return

    listener = asyncio.ensure_future(hear())
    t0 = time.perf_counter_ns() + 1_000_000
    step = 1e9 / rate
    for i in range(n):
        when = t0 + int(i * step)
        wait = (when - time.perf_counter_ns()) * 1e-9
        if wait > 0:
            await asyncio.sleep(wait)
        token = f"{tag}{i}"
        due[token] = (i, when)
        await client.send(token, i % 2)
    await asyncio.wait_for(done.wait(), float(os.environ.get("EXSIM_BENCH_WAIT_S", 120)))
    listener.cancel()
    await client.close()
    return lat


async def throughput_run(proto: str, host: str, port: int, clients: int, window: int,
                         duration: float, tag: str) -> float:
    """Run ``clients`` closed-loop clients with ``window`` orders outstanding each for
    ``duration`` s after a 0.5 s warm-up; return acknowledged orders per second."""
    conns = []
    for k in range(clients):
        c = ADAPTERS[proto]()
        await c.connect(host, port, f"bench{k}")
        conns.append(c)
    counts = [0] * clients
    stop_at = [None]

    async def one(k, c):
        sent = 0
        for _ in range(window):
            await c.send(f"{tag}{k}x{sent}", sent % 2)
            sent += 1
        async for _ in c.acks():
            counts[k] += 1
            if stop_at[0] is not None and time.perf_counter() >= stop_at[0]:
                return
            await c.send(f"{tag}{k}x{sent}", sent % 2)
            sent += 1

    tasks = [asyncio.ensure_future(one(k, c)) for k, c in enumerate(conns)]
    await asyncio.sleep(0.5)
    base, t0 = sum(counts), time.perf_counter()
    stop_at[0] = t0 + duration
    await asyncio.sleep(duration)
    rate = (sum(counts) - base) / (time.perf_counter() - t0)
    for t in tasks:
        t.cancel()
    # every task's end is collected: one whose connection ended before the window closed is
    # named here rather than left as an unretrieved exception
    ended = [r for r in await asyncio.gather(*tasks, return_exceptions=True)
             if isinstance(r, Exception)]
    if ended:
        print(f"bench_gateway: {len(ended)} of {clients} {proto} clients ended before the "
              f"window closed ({ended[0]!r}); their acknowledgements until then are counted",
              file=sys.stderr)
    for c in conns:
        await c.close()
    return rate


def _pct(lat_ns: np.ndarray) -> dict:
    us = lat_ns / 1000.0
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)),
            "p999_us": float(np.percentile(us, 99.9)), "n": int(lat_ns.size)}


def measure(protocols, fsyncs, rates, client_counts, duration, runs, window,
            batch_us: int = 200) -> dict:
    """Return the report: one latency row per (protocol, fsync, rate) and one throughput row
    per (protocol, fsync, clients), each the median over ``runs`` runs."""
    rows_lat, rows_tput = [], []
    for fsync in fsyncs:
        for run in range(runs):
            server = Server(fsync, max(client_counts), protocols, batch_us)
            try:
                for proto in protocols:
                    host, port = server.ports[proto]
                    for rate in rates:
                        n = max(200, int(rate * duration))
                        lat = asyncio.run(latency_run(proto, host, port, rate, n,
                                                      f"L{run}{proto[0]}{rate}-"))
                        rows_lat.append({"protocol": proto, "fsync": fsync, "rate": rate,
                                         "run": run, **_pct(lat)})
                    for nc in client_counts:
                        r = asyncio.run(throughput_run(proto, host, port, nc, window, duration,
                                                       f"T{run}{proto[0]}{nc}-"))
                        rows_tput.append({"protocol": proto, "fsync": fsync, "clients": nc,
                                          "run": run, "orders_per_s": r})
            finally:
                server.stop()
    return {"latency": _median_rows(rows_lat, ("protocol", "fsync", "rate"),
                                    ("p50_us", "p99_us", "p999_us")),
            "throughput": _median_rows(rows_tput, ("protocol", "fsync", "clients"),
                                       ("orders_per_s",)),
            "runs": runs, "duration_s": duration, "window": window, "batch_us": batch_us}


def _median_rows(rows: list, keys: tuple, values: tuple) -> list:
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in groups.items():
        row = dict(zip(keys, key))
        for v in values:
            row[v] = statistics.median(r[v] for r in rs)
        row["runs"] = len(rs)
        out.append(row)
    return out


def table(report: dict) -> str:
    """Return the report as two markdown tables."""
    lines = ["| protocol | fsync | offered orders/s | p50 us | p99 us | p99.9 us |",
             "|---|---|---:|---:|---:|---:|"]
    for r in report["latency"]:
        lines.append(f"| {r['protocol']} | {r['fsync']} | {r['rate']:,} | {r['p50_us']:,.0f} | "
                     f"{r['p99_us']:,.0f} | {r['p999_us']:,.0f} |")
    lines += ["", "| protocol | fsync | clients | sustained orders/s |", "|---|---|---:|---:|"]
    for r in report["throughput"]:
        lines.append(f"| {r['protocol']} | {r['fsync']} | {r['clients']} | "
                     f"{r['orders_per_s']:,.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Run the benchmark; print the tables and write the JSON report. Returns 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--protocols", nargs="+", choices=sorted(ADAPTERS), default=["fix", "binary"])
    p.add_argument("--fsync", nargs="+", choices=("batch", "none"), default=["batch", "none"])
    p.add_argument("--rates", nargs="+", type=int, default=[500, 2000, 8000])
    p.add_argument("--clients", nargs="+", type=int, default=[1, 16])
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batch-us", type=int, default=200,
                   help="the server's longest wait for more requests to a batch (us)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    rates = args.rates if not _smoke.enabled() else [min(args.rates)]
    clients = args.clients if not _smoke.enabled() else [min(args.clients)]
    duration = args.duration if not _smoke.enabled() else 0.3
    runs = _smoke.scaled(args.runs, 1)
    report = measure(args.protocols, args.fsync, rates, clients, duration, runs, args.window,
                     args.batch_us)
    report["machine"] = machine()
    report["command"] = "python -m benchmarks.bench_gateway " + " ".join(argv or sys.argv[1:])
    report["anchors"] = {"go-quantcup + PostgreSQL orders/s (its README)": 42_800,
                         "Philadelphia FIX engine loopback round trip us (published)": 7.7}
    print(table(report))
    out = _smoke.report_path(args.out, "gateway.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
