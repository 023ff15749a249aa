"""TLS on the ports (issue 36, item 13): a binary login and a FIX logon over TLS 1.3 with a
certificate made here by the ``openssl`` command; a plaintext client never reaches the login
of a TLS port; with a client CA, a client without a certificate is refused and one with a
certificate the CA signed gets in; plaintext on an address other than loopback is refused
unless asked for. Every wait is bounded."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import pytest
from fix_helpers import raw_msg, logon_body, read_raw
from gw_fixtures import PASSWORD
from ouch_fixtures import ouch_port, run

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway import ouch, tls
from exsim.exchange.gateway.fix import server as fix_server
from exsim.exchange.gateway.framing import FrameError, PacketType, frame, read_frame

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A server certificate for 127.0.0.1, a client CA and a client certificate it signed."""
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "server.key", "-out", "server.pem", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", cwd=d)
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
            "-subj", "/CN=exsim test CA", cwd=d)
    openssl("req", "-new", *ec, "-keyout", "client.key", "-out", "client.csr",
            "-subj", "/CN=acct0", cwd=d)
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "client.pem", "-days", "1", cwd=d)
    return d


def client_context(certs, with_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "server.pem"))
    if with_cert:
        ctx.load_cert_chain(str(certs / "client.pem"), str(certs / "client.key"))
    return ctx


async def binary_login(port, ctx):
    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    w.write(frame(PacketType.LOGIN_REQUEST, ouch.encode_login("acct0", PASSWORD, "", 1)))
    got = await read_frame(r, max_size=1 << 16, idle_s=5)
    w.close()
    return got


def test_binary_login_over_tls_and_plaintext_refused(tmp_path, certs):
    async def main():
        ctx = tls.server_context(str(certs / "server.pem"), str(certs / "server.key"))
        async with ouch_port(tmp_path, ssl=ctx) as (gw, srv):
            got = await binary_login(srv.port, client_context(certs))
            assert got[0] == PacketType.LOGIN_ACCEPTED
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)   # plaintext
            w.write(frame(PacketType.LOGIN_REQUEST, ouch.encode_login("acct0", PASSWORD, "", 1)))
            data = await asyncio.wait_for(r.read(1 << 16), 5)
            assert PacketType.LOGIN_ACCEPTED not in data[2:3]   # a TLS alert or nothing
            w.close()
    run(main())


def test_fix_logon_over_tls(tmp_path, certs):
    async def main():
        from gw_fixtures import running_gateway
        ctx = tls.server_context(str(certs / "server.pem"), str(certs / "server.key"))
        async with running_gateway(tmp_path) as gw:
            srv = await fix_server.start(gw, "127.0.0.1", 0, ssl=ctx)
            port = srv.sockets[0].getsockname()[1]
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs))
            w.write(raw_msg("A", 1, logon_body()))
            got = await read_raw(r, 1, timeout=5)
            assert got and got[0].type == "A"
            w.close()
            srv.close()
            await srv.wait_closed()
    run(main())


def test_client_certificates_are_required_with_a_client_ca(tmp_path, certs):
    async def main():
        ctx = tls.server_context(str(certs / "server.pem"), str(certs / "server.key"),
                                 str(certs / "ca.pem"))
        async with ouch_port(tmp_path, ssl=ctx) as (gw, srv):
            got = await binary_login(srv.port, client_context(certs, with_cert=True))
            assert got[0] == PacketType.LOGIN_ACCEPTED
            try:   # no certificate: the server ends the handshake before any login
                got = await binary_login(srv.port, client_context(certs))
            except (ssl.SSLError, ConnectionError, FrameError):
                got = None
            assert got is None or got[0] != PacketType.LOGIN_ACCEPTED
    run(main())


def test_plaintext_is_refused_off_loopback_unless_asked():
    tls.check_plaintext({"fix": ("127.0.0.1", 0), "web": ("::1", 0)}, tls=False,
                        allow_plaintext=False)
    with pytest.raises(UsageError, match="refusing plaintext"):
        tls.check_plaintext({"fix": ("0.0.0.0", 9000)}, tls=False, allow_plaintext=False)
    tls.check_plaintext({"fix": ("0.0.0.0", 9000)}, tls=False, allow_plaintext=True)
    tls.check_plaintext({"fix": ("0.0.0.0", 9000)}, tls=True, allow_plaintext=False)


def test_serve_names_a_missing_certificate(tmp_path, capsys):
    from exsim.replay.cli import main
    assert main(["serve", str(tmp_path / "d"), "--accounts", "x.toml", "--fix", "0",
                 "--tls-cert", str(tmp_path / "no.pem"), "--tls-key", "k"]) == 2
    assert "--tls-cert: no such file" in capsys.readouterr().err
