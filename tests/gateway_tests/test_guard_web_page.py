"""The web page on a phone and for a market-data-only account (issue 36, item 14): at a
390-pixel-wide window nothing is wider than the window, and an account with only the
marketdata role sees why it has no positions instead of an empty table. A real headless
Chromium (skipped when /usr/bin/chromium is absent); every wait is bounded."""

from __future__ import annotations

import asyncio

import pytest
from test_web_browser import CHROMIUM, _browser_page
from web_fixtures import buy, sell, web_gateway

from gw_fixtures import PASSWORD

pytestmark = pytest.mark.skipif(not __import__("os").path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is absent")


def test_the_page_fits_a_390_pixel_window(tmp_path):
    from playwright.async_api import async_playwright

    async def main():
        async with web_gateway(tmp_path) as (gw, server), async_playwright() as p:
            problems: list = []
            browser, page = await _browser_page(p, problems)
            try:
                await page.set_viewport_size({"width": 390, "height": 844})
                buy(gw, "acct0", 10_000, 5)
                sell(gw, "acct1", 10_000, 2)
                await page.goto(server.url)
                await page.wait_for_function(
                    "() => document.querySelectorAll('#positions tbody tr').length === 2")
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, width
                await page.goto(f"http://127.0.0.1:{server.port}/")   # the login form too
                await page.wait_for_selector("#login.shown")
                assert await page.evaluate("document.documentElement.scrollWidth") <= 390
                assert problems == []
            finally:
                await browser.close()
    asyncio.run(asyncio.wait_for(main(), 120))


def test_a_market_data_only_account_is_told_why_it_has_no_positions(tmp_path):
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
                await page.fill("#account", "feed")          # role marketdata only
                await page.fill("#password", PASSWORD)
                await page.click("#login button")
                await page.wait_for_function(
                    "() => document.getElementById('status').textContent === 'live'")
                note = await page.text_content("#posnote")
                assert "market-data rights only" in note
                assert await page.is_visible("#posnote")
                assert not await page.is_visible("#positions")
                assert problems == []
            finally:
                await browser.close()
    asyncio.run(asyncio.wait_for(main(), 120))
