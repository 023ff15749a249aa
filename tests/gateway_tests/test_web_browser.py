"""The web page in a real headless browser: the system's Chromium, driven by playwright (never
a downloaded browser), against a real Gateway on loopback. The page loads, shows the ladder,
and updates while orders arrive; an account logs on through the page's form.

Skips only when /usr/bin/chromium is absent (`.ci/run` installs it).
"""

from __future__ import annotations

import asyncio
import os

import pytest
from web_fixtures import buy, sell, web_gateway

from gw_fixtures import PASSWORD

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 20_000

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is absent (.ci/run installs the chromium package)")


async def _rows(page, table: str) -> list[list[str]]:
    return await page.eval_on_selector_all(
        f"#{table} tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")


async def _browser_page(p, problems: list):
    browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True,
                                      timeout=60_000)
    page = await browser.new_page()
    page.set_default_timeout(WAIT_MS)
    # a CSP violation or a script error shows here: the page must run without either
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    return browser, page


def test_the_page_loads_shows_the_ladder_and_updates_while_orders_arrive(tmp_path):
    from playwright.async_api import async_playwright

    async def main():
        async with web_gateway(tmp_path) as (gw, server), async_playwright() as p:
            problems: list = []
            browser, page = await _browser_page(p, problems)
            try:
                buy(gw, "acct0", 10_000, 5)           # on the book before the page opens
                await asyncio.sleep(0.3)
                await page.goto(server.url)
                await page.wait_for_function(
                    "() => document.getElementById('status').textContent === 'live'")
                assert await page.title() == "exsim: live session"
                assert await page.eval_on_selector("#symbol", "s => s.value") == "JPM"
                assert await _rows(page, "ladder") == [["1", "5", "100.00", "", ""]]
                # orders arrive while the page is open: the ladder, tape and positions follow
                sell(gw, "acct1", 10_050, 4)
                buy(gw, "acct2", 9_990, 2)
                await page.wait_for_function(
                    "() => document.querySelectorAll('#ladder tbody tr').length === 3")
                assert await _rows(page, "ladder") == [["", "", "100.50", "4", "1"],
                                                       ["1", "5", "100.00", "", ""],
                                                       ["1", "2", "99.90", "", ""]]
                sell(gw, "acct3", 10_000, 3)
                await page.wait_for_function(
                    "() => document.querySelectorAll('#tape tbody tr').length === 1")
                tape = await _rows(page, "tape")
                assert [r[1:] for r in tape] == [["JPM", "100.00", "3", "sell"]]
                await page.wait_for_function(
                    "() => document.querySelectorAll('#positions tbody tr').length === 2")
                assert sorted(r[:4] for r in await _rows(page, "positions")) \
                    == [["acct0", "JPM", "3", "100.0000"], ["acct3", "JPM", "-3", "100.0000"]]
                assert (await _rows(page, "ladder"))[1] == ["1", "2", "100.00", "", ""]
                seq = await page.evaluate("() => document.body.dataset.seq")
                assert int(seq) == gw.engine.seq == 4
                # another symbol's ladder is one choice away (BTCUSD ticks are 0.5)
                buy(gw, "acct0", 120_001, 1, symbol="BTCUSD")
                await page.select_option("#symbol", "BTCUSD")
                await page.wait_for_function(
                    "() => document.querySelector('#ladder tbody td.px').textContent === '60000.5'")
                assert problems == []
            finally:
                await browser.close()
    asyncio.run(asyncio.wait_for(main(), 120))


def test_an_account_logs_on_through_the_page_and_sees_only_its_own_position(tmp_path):
    from playwright.async_api import async_playwright

    async def main():
        async with web_gateway(tmp_path) as (gw, server), async_playwright() as p:
            problems: list = []
            browser, page = await _browser_page(p, problems)
            try:
                buy(gw, "acct0", 10_000, 5)
                sell(gw, "acct1", 10_000, 2)
                await page.goto(f"http://127.0.0.1:{server.port}/")
                await page.wait_for_selector("#login.shown")
                await page.fill("#account", "acct0")
                await page.fill("#password", "wrong")
                await page.click("#login button")
                await page.wait_for_function(
                    "() => document.getElementById('error').textContent.includes('wrong password')")
                await page.fill("#account", "acct0")
                await page.fill("#password", PASSWORD)
                await page.click("#login button")
                await page.wait_for_function(
                    "() => document.getElementById('status').textContent === 'live'")
                await page.wait_for_function(
                    "() => document.querySelectorAll('#positions tbody tr').length === 1")
                assert [r[:3] for r in await _rows(page, "positions")] == [["acct0", "JPM", "2"]]
                assert await _rows(page, "ladder") == [["1", "3", "100.00", "", ""]]
                sell(gw, "acct1", 10_000, 3)             # the ladder empties, acct0 is long 5
                await page.wait_for_function(
                    "() => document.querySelector('#positions tbody td:nth-child(3)').textContent === '5'")
                assert await _rows(page, "ladder") == [["", "", "empty book", "", ""]]
                assert [r[2] for r in await _rows(page, "tape")] == ["100.00", "100.00"]
                assert [e for e in problems if "1008" not in e] == []
            finally:
                await browser.close()
    asyncio.run(asyncio.wait_for(main(), 120))
