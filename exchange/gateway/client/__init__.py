"""Python asyncio clients of the gateway ports, used by the tests and the docs."""
