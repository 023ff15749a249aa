"""Helpers of the web page tests: a real Gateway with the web server on a free loopback port,
order requests, and bounded waits.

``web_gateway(tmp_path, **web_options)`` yields (gw, web): the Gateway of gw_fixtures (accounts
acct0..acct3 plus ``watch0``, who has roles marketdata and dropcopy in firm F0) and the started
WebServer, both closed on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from gw_fixtures import PASSWORD, cheap_hash, make_accounts, running_gateway

from exsim.exchange.gateway import web
from exsim.exchange.gateway.accounts import Account, Accounts
from exsim.exchange.gateway.core import Request
from exsim.exchange.schema import Side

TIMEOUT = 20.0   # seconds any one wait may take before the test fails


def accounts() -> Accounts:
    """Return gw_fixtures' accounts plus ``watch0`` (marketdata + dropcopy, firm F0)."""
    rows = list(make_accounts())
    rows.append(Account("watch0", "F0", 3000, frozenset({"marketdata", "dropcopy"}), 1000,
                        cheap_hash(PASSWORD)))
    return Accounts(rows)


@contextlib.asynccontextmanager
async def web_gateway(data_dir, **web_options):
    """Yield (gw, web server) on ``data_dir``; both closed on exit."""
    async with running_gateway(data_dir, accounts()) as gw:
        server = await web.start(gw, "127.0.0.1", 0, **web_options)
        try:
            yield gw, server
        finally:
            server.close()
            await asyncio.wait_for(server.wait_closed(), TIMEOUT)


_ids = iter(range(1, 1 << 30))


def order(gw, account: str, side: int, price: int, qty: int, symbol: str = "JPM") -> str:
    """Submit a GTC limit order for ``account``; return its client order id."""
    cid = f"w{next(_ids)}"
    gw.submit(Request("new", gw.accounts.get(account), f"test:{account}", cid, symbol=symbol,
                      side=side, price=price, qty=qty))
    return cid


def buy(gw, account, price, qty, symbol="JPM"):
    return order(gw, account, Side.BUY, price, qty, symbol)


def sell(gw, account, price, qty, symbol="JPM"):
    return order(gw, account, Side.SELL, price, qty, symbol)


async def until(ws, predicate, timeout: float = TIMEOUT) -> dict:
    """Return the first message from ``ws`` (parsed JSON) for which ``predicate`` is true;
    raises TimeoutError after ``timeout`` seconds."""
    async def scan():
        while True:
            m = json.loads(await ws.recv())
            if predicate(m):
                return m
    return await asyncio.wait_for(scan(), timeout)
