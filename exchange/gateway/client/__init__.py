"""Python asyncio clients of the gateway's ports, used by the tests and the docs: ``fix`` (FIX 4.4
order entry and drop copy), ``ouch`` (binary order entry) and ``itch`` (the market-data feed,
keeping a local book)."""
