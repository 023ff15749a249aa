"""The network gateway: other processes trade against exsim over FIX 4.4, an OUCH-style binary
protocol, an ITCH-style market-data feed and a web page (docs/gateway.md).

``core.Gateway`` owns the engine and the store session: it stamps every inbound request with
the gateway clock, batches requests into ``store.Session.process`` and hands out execution
reports (``reports.Report``) only once their batch is durable. The protocol modules turn wire
messages into ``core.Request`` objects and reports into wire messages; ``server.serve`` runs
them all in one asyncio process (``exsim serve``).
"""
