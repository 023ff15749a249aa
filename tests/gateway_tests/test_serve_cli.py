"""``exsim account`` (writes a 0600 accounts file holding only hashes) and the usage errors of
``exsim serve`` (exit status 2 with a message saying what to fix, before anything is created)."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import sys

import pytest

from exsim.exchange.gateway.accounts import Accounts
from gw_fixtures import make_accounts, write_accounts
from exsim.replay.cli import main


def account(monkeypatch, *argv, password="pw-one"):
    monkeypatch.setattr(sys, "stdin", io.StringIO(password + "\n"))
    return main(["account", *map(str, argv), "--password-stdin"])


def test_account_writes_a_private_file_of_hashes(tmp_path, monkeypatch, capsys):
    f = tmp_path / "acc.toml"
    assert account(monkeypatch, f, "alice", "--firm", "ACME", "--trader", 1) == 0
    assert account(monkeypatch, f, "bob", "--trader", 2, "--roles", "dropcopy",
                   "--rate", 50, password="pw-two") == 0
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    text = f.read_text()
    assert "pw-one" not in text and "pw-two" not in text
    accts = Accounts.load(f)
    assert accts.authenticate("alice", "pw-one").firm == "ACME"
    bob = accts.authenticate("bob", "pw-two", "dropcopy")
    assert (bob.firm, bob.trader, bob.max_msgs_per_sec) == ("bob", 2, 50)
    assert os.listdir(tmp_path) == ["acc.toml"]    # no temporary file left


def test_account_replaces_an_entry_and_keeps_the_others(tmp_path, monkeypatch):
    f = tmp_path / "acc.toml"
    account(monkeypatch, f, "alice", "--trader", 1)
    account(monkeypatch, f, "bob", "--trader", 2)
    os.chmod(f, 0o644)
    assert account(monkeypatch, f, "alice", "--trader", 7, password="new-pw") == 0
    accts = Accounts.load(f)
    assert sorted(a.name for a in accts) == ["alice", "bob"]
    assert accts.get("alice").trader == 7
    assert accts.authenticate("alice", "new-pw")
    with pytest.raises(Exception):
        accts.authenticate("alice", "pw-one")
    assert accts.authenticate("bob", "pw-one")
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600


@pytest.mark.parametrize("argv,password,message", [
    (["carol", "--trader", 1], "pw", "same trader id 1"),
    (["bad name", "--trader", 3], "pw", "'name'"),
    (["carol", "--trader", 3, "--roles", "trade,admin"], "pw", "'roles'"),
    (["carol", "--trader", 0], "pw", "'trader'"),
    (["carol", "--trader", 3, "--rate", 0], "pw", "'max_msgs_per_sec'"),
    (["carol", "--trader", 3], "", "password"),
])
def test_account_refuses_and_leaves_the_file_as_it_was(tmp_path, monkeypatch, capsys, argv,
                                                      password, message):
    f = tmp_path / "acc.toml"
    account(monkeypatch, f, "alice", "--trader", 1)
    before = f.read_bytes()
    capsys.readouterr()
    assert account(monkeypatch, f, *argv, password=password) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert ".tmp" not in err    # the message names the file, not its temporary copy
    assert f.read_bytes() == before
    assert os.listdir(tmp_path) == ["acc.toml"]


def test_account_refuses_a_broken_existing_file(tmp_path, monkeypatch, capsys):
    f = tmp_path / "acc.toml"
    f.write_text("[[accounts]]\nname = 'x'\npassword = 'clear'\ntrader = 1\n")
    assert account(monkeypatch, f, "alice", "--trader", 2) == 2
    assert "clear passwords" in capsys.readouterr().err


@pytest.fixture
def accounts_file(tmp_path):
    return write_accounts(tmp_path / "acc.toml", make_accounts(2))


@pytest.mark.parametrize("extra,message", [
    ([], "give at least one of --fix, --binary, --feed, --web"),
    (["--fix", "nonsense"], "--fix takes HOST:PORT"),
    (["--binary", "127.0.0.1:70000"], "--binary: port must be in [0, 65535]"),
    (["--feed", "host:"], "--feed takes HOST:PORT"),
    (["--web", "-1"], "port must be in [0, 65535]"),
    (["--fix", "0", "--batch-us", "0"], "--batch-us and --batch-max must be >= 1"),
])
def test_serve_usage_errors(tmp_path, capsys, accounts_file, extra, message):
    d = tmp_path / "day"
    assert main(["serve", str(d), "--accounts", accounts_file, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not d.exists()   # nothing was created


def test_serve_with_an_unknown_accounts_file(tmp_path, capsys):
    d = tmp_path / "day"
    missing = tmp_path / "nope.toml"
    assert main(["serve", str(d), "--accounts", str(missing), "--fix", "0"]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "cannot read the accounts file" in err
    assert not d.exists()


def test_serve_needs_an_accounts_file(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "day"), "--fix", "0"]) == 2
    assert "--accounts" in capsys.readouterr().err


@pytest.mark.parametrize("text,message", [
    ("[gateway\n", "not a TOML limits file"),
    ("[nope]\nx = 1\n", "unknown table [nope]"),
    ("[feed]\nmax_buffers = 1\n", "[feed] has no limit 'max_buffers'"),
    ("[gateway]\nhash_workers = 1.5\n", "[gateway] hash_workers must be a positive integer"),
    ("[binary]\nreplay_per_s = 0\n", "[binary] replay_per_s must be a positive number"),
    ("[fix]\nmax_sessions = true\n", "[fix] max_sessions must be a positive integer"),
])
def test_serve_refuses_a_bad_limits_file(tmp_path, capsys, accounts_file, text, message):
    f = tmp_path / "limits.toml"
    f.write_text(text)
    d = tmp_path / "day"
    assert main(["serve", str(d), "--accounts", accounts_file, "--fix", "0",
                 "--limits", str(f)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(f) in err and "Traceback" not in err
    assert not d.exists()   # nothing was created


def test_serve_applies_a_limits_file(tmp_path):
    """``--limits``: a port's table sets its options (one binary session at a time here) and
    the [gateway] table the shared ones (a second failed logon from an address is refused
    without checking, and audited as throttled)."""
    from e2e_fixtures import ServeProcess
    from gw_fixtures import PASSWORD
    from exsim.exchange.gateway.client.ouch import LoginRejected, OuchClient, SessionClosed

    f = tmp_path / "limits.toml"
    f.write_text("[gateway]\nfailures_per_address = 1\nfailure_refill_s = 600\n\n"
                 "[binary]\nmax_sessions = 1\n")
    acc = write_accounts(tmp_path / "acc.toml", make_accounts(3))

    async def main():
        srv = ServeProcess(tmp_path / "day", acc, tmp_path / "serve.log", ports=("binary",),
                           extra=["--limits", str(f)])
        ports = await srv.start()
        try:
            one = await OuchClient.connect("127.0.0.1", ports["binary"], "acct0", PASSWORD)
            with pytest.raises((SessionClosed, ConnectionError, LoginRejected)):
                await OuchClient.connect("127.0.0.1", ports["binary"], "acct1", PASSWORD,
                                         timeout=5)
            await one.close()
            for _ in range(2):
                with pytest.raises(LoginRejected):
                    await OuchClient.connect("127.0.0.1", ports["binary"], "acct2", "wrong",
                                             timeout=5)
        finally:
            assert await srv.stop() == 0
        audit = (tmp_path / "day" / "gateway" / "audit.log").read_text()
        assert "too many failed logons from this address" in audit
    asyncio.run(asyncio.wait_for(main(), 90))


def test_every_limit_a_limits_file_may_set_is_an_option_of_its_port():
    import inspect

    from exsim.exchange.gateway import binary_server, feed_server, web
    from exsim.exchange.gateway.fix import server as fix_server
    from exsim.exchange.gateway.guard import PORT_LIMITS

    assert set(PORT_LIMITS["fix"]) <= set(fix_server.DEFAULTS)
    assert set(PORT_LIMITS["binary"]) <= set(binary_server.DEFAULTS)
    assert set(PORT_LIMITS["feed"]) <= set(inspect.signature(feed_server.FeedServer).parameters)
    assert all(f"``{k}``" in web.start.__doc__ for k in PORT_LIMITS["web"])
