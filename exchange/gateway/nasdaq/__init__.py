"""NASDAQ's published wire protocols on the exsim gateway (docs/gateway-nasdaq.md).

- ``soupbintcp``: SoupBinTCP 3.0 packets (login 6+10-byte username/password, session, sequence).
- ``ouch50``: OUCH 5.0 order entry messages (layouts as numpy dtypes, appendage TagValues).
- ``itch50``: TotalView-ITCH 5.0 messages and the translator from the engine's batches.
- ``moldudp64``: MoldUDP64 downstream and request packets.
- ``ouch_server`` / ``itch_server``: the ports that host them on a ``Gateway``.
"""
