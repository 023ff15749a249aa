"""TLS for every port of the gateway, and the rule for plaintext (docs/gateway.md, "TLS").

``server_context(cert, key, client_ca)`` returns the ``ssl.SSLContext`` every port of one
``exsim serve`` shares: TLS 1.3 only, the server's certificate chain and key, and with
``client_ca`` a client certificate signed by that CA is required (an unverified client never
reaches the login). ``check_plaintext(addresses, ...)`` refuses a plaintext port on an address
other than loopback unless plaintext was asked for.

Invariants:
- A port given ``ssl`` accepts TLS only: a plaintext client fails the handshake and never
  reaches the login, so a password or token never crosses the network in clear.
- Without TLS a port listens in plaintext only on a loopback address (127.0.0.0/8, ::1,
  localhost) unless ``allow_plaintext`` is set.
"""

from __future__ import annotations

import ipaddress
import os
import ssl

from exsim.exchange.errors import UsageError

__all__ = ["server_context", "check_plaintext", "is_loopback"]


def server_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """Return a TLS 1.3 server context with ``cert`` (PEM chain) and ``key`` (PEM); with
    ``client_ca`` (PEM) clients must present a certificate it signed.

    Raises UsageError naming the file if one cannot be read or does not hold what it should."""
    for what, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-client-ca", client_ca)):
        if path is not None and not os.path.isfile(path):
            raise UsageError(f"{what}: no such file {path!r}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise UsageError(f"--tls-cert {cert!r} / --tls-key {key!r}: not a certificate and its "
                         f"key in PEM: {e}") from None
    if client_ca is not None:
        try:
            ctx.load_verify_locations(cafile=client_ca)
        except (ssl.SSLError, OSError) as e:
            raise UsageError(f"--tls-client-ca {client_ca!r}: not PEM certificates: {e}") \
                from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def is_loopback(host: str) -> bool:
    """Return True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_plaintext(addresses: dict, *, tls: bool, allow_plaintext: bool) -> None:
    """Return None if every port of ``addresses`` ({name: (host, port)}) may listen as asked.

    Raises UsageError for a plaintext port on a non-loopback address without
    ``allow_plaintext``."""
    if tls or allow_plaintext:
        return
    for name, (host, _) in addresses.items():
        if not is_loopback(host):
            raise UsageError(f"--{name} {host}: refusing plaintext on an address other than "
                             "loopback (passwords would cross the network in clear); give "
                             "--tls-cert and --tls-key, or --allow-plaintext")
