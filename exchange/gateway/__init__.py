"""The network gateway: other processes trade against exsim over FIX 4.4, an OUCH-style binary
protocol, an ITCH-style market-data feed and a web page (docs/gateway.md).

``core.Gateway`` owns the engine and the journal session: it stamps every inbound request with
the gateway clock, batches requests into the journal's ``process`` and hands out execution
reports (``reports.Report``) only once their batch is durable. The journal is whatever
satisfies ``journal.JournalSession`` (a ``store.Session`` under ``exsim serve``), handed in by
the code that composes the server (``exsim.replay.serving``): this package imports nothing
from store, replay or scenarios. The protocol modules turn wire messages into ``core.Request``
objects and reports into wire messages; ``server.serve`` runs them all in one asyncio process
(``exsim serve``).
"""
