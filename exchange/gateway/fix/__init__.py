"""FIX 4.4 on the gateway: order entry, drop copy and market data over TCP (docs/gateway-fix.md).

``server.start(gw, host, port, **options)`` listens; each connection is a ``session.FixSession``
(the FIX session layer: logon, sequence numbers, heartbeats, resend); ``orders`` maps the
application messages to ``core.Request`` and reports to ExecutionReports; ``codec`` frames and
parses tag=value with ``simplefix``; ``store`` persists the session state under the gateway's
state directory; ``dialect`` says what plain FIX 4.4 leaves out and a session may ask for
(exsim's extensions, and the data-dictionary additions that declare them).
"""
