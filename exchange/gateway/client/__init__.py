"""Python asyncio clients of the gateway's ports, used by the tests and the docs: ``fix``
(FIX 4.4 order entry and drop copy) and the binary order-entry client beside it."""
