"""The accounts file: what loads, what is refused as a whole (naming the file and the field),
and authentication that says the same thing for an unknown name and a wrong password."""

from __future__ import annotations

import os
import time

import pytest

from exsim.exchange.errors import InputError
from exsim.exchange.gateway.accounts import (
    Account, Accounts, AuthError, check_password, format_account, hash_password)
from gw_fixtures import PASSWORD, cheap_hash

H = cheap_hash(PASSWORD)


def _toml(rows: list[dict]) -> str:
    out = []
    for r in rows:
        out.append("[[accounts]]")
        for k, v in r.items():
            if isinstance(v, str):
                out.append(f"{k} = {v!r}".replace("'", '"'))
            elif isinstance(v, bool):
                out.append(f"{k} = {str(v).lower()}")
            elif isinstance(v, list):
                out.append(f"{k} = [{', '.join(chr(34) + x + chr(34) for x in v)}]")
            else:
                out.append(f"{k} = {v}")
    return "\n".join(out) + "\n"


def _write(tmp_path, rows) -> str:
    p = tmp_path / "accounts.toml"
    p.write_text(_toml(rows) if isinstance(rows, list) else rows)
    return str(p)


def _row(**kw):
    r = dict(name="alice", password=H, firm="ACME", trader=1, roles=["trade", "marketdata"])
    r.update(kw)
    return {k: v for k, v in r.items() if v is not None}


def test_a_good_file_loads(tmp_path):
    path = _write(tmp_path, [_row(), _row(name="bob", trader=2, roles=["dropcopy"],
                                          max_msgs_per_sec=5),
                             _row(name="c.d-e_f", trader=2**32 - 1, firm=None, roles=None)])
    accts = Accounts.load(path)
    assert len(accts) == 3
    a, b, c = accts.get("alice"), accts.get("bob"), accts.get("c.d-e_f")
    assert (a.firm, a.trader, a.roles, a.max_msgs_per_sec) == ("ACME", 1,
                                                               frozenset({"trade", "marketdata"}),
                                                               1000)
    assert b.can("dropcopy") and not b.can("trade") and b.max_msgs_per_sec == 5
    assert (c.firm, c.roles) == ("c.d-e_f", frozenset({"trade"}))   # defaults
    assert accts.by_trader(2) is b and accts.get("nobody") is None
    # format_account writes what load reads
    p2 = tmp_path / "again.toml"
    p2.write_text("\n".join(format_account(x) for x in accts))
    def by_name(x):
        return x.name
    # compared as values: a frozenset's repr order depends on the hash seed
    assert sorted(Accounts.load(p2), key=by_name) == sorted(accts, key=by_name)


BAD = [
    ([_row(name="")], "'name'"),
    ([_row(name="a b")], "'name'"),
    ([_row(name="x" * 33)], "'name'"),
    ([_row(name="al\u00efce")], "'name'"),
    ([_row(name=7)], "'name'"),
    ([_row(firm="A CME")], "'firm'"),
    ([_row(), _row(trader=2)], "twice"),
    ([_row(), _row(name="bob")], "same trader id 1"),
    ([_row(roles=["trade", "admin"])], "'roles'"),
    ([_row(roles="trade")], "'roles'"),
    ([_row(password="hunter2")], "clear passwords"),
    ([_row(password=None)], "'password'"),
    ([_row(trader=0)], "'trader'"),
    ([_row(trader=2**32)], "'trader'"),
    ([_row(trader=True)], "'trader'"),
    ([_row(trader="1")], "'trader'"),
    ([_row(max_msgs_per_sec=0)], "'max_msgs_per_sec'"),
    ([_row(admin=True)], "unknown field"),
    ("accounts = 3\n", "array of tables"),
    ("[[accounts]\nname=", "not a TOML"),
    (b"\xff\xfe[[accounts]]", "not a TOML"),
]


@pytest.mark.parametrize("rows,message", BAD)
def test_a_bad_file_is_refused_naming_the_problem(tmp_path, rows, message):
    p = tmp_path / "accounts.toml"
    if isinstance(rows, bytes):
        p.write_bytes(rows)
    else:
        _write(tmp_path, rows)
    with pytest.raises(InputError, match=message) as e:
        Accounts.load(p)
    assert str(p) in str(e.value)


def _hash(n, r, p, salt=b"s" * 16, digest=b"d" * 32):
    return f"scrypt${n}${r}${p}${salt.hex()}${digest.hex()}"


@pytest.mark.parametrize("stored", [
    _hash(1 << 30, 8, 1),             # 128 GiB of scrypt memory
    _hash(1 << 20, 8, 1),             # 1 GiB
    _hash(1 << 14, 1 << 20, 1),       # r huge
    _hash(1 << 14, 8, 1 << 20),       # p huge (CPU)
    _hash(1000, 8, 1),                # n not a power of two
    _hash(1, 8, 1), _hash(0, 8, 1), _hash(-16, 8, 1),
    _hash(16, 0, 1), _hash(16, 1, 0),
    _hash(16, 1, 1, salt=b"s"),       # salt too short
    _hash(16, 1, 1, digest=b"d" * 31),
    "scrypt$16$1$1$zz$" + "00" * 32,  # not hex
    "scrypt$16$1$1$" + "00" * 16,     # a field missing
    "bcrypt$16$1$1$" + "00" * 16 + "$" + "00" * 32,
    "scrypt$1e3$1$1$" + "00" * 16 + "$" + "00" * 32,
])
def test_malformed_hash_parameters_are_refused_without_running_scrypt(tmp_path, stored):
    with pytest.raises(InputError, match="'password'"):
        Accounts.load(_write(tmp_path, [_row(password=stored)]))
    t = time.perf_counter()
    assert check_password(stored, "anything") is False
    assert time.perf_counter() - t < 0.5


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    p = tmp_path / "accounts.toml"
    with open(p, "wb") as f:
        f.truncate(64 << 20)   # sparse: 64 MiB of size, no data written
    with pytest.raises(InputError, match="limit"):
        Accounts.load(p)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        Accounts.load(tmp_path / "nope.toml")


def test_authenticate(tmp_path):
    accts = Accounts.load(_write(tmp_path, [_row(), _row(name="bob", trader=2,
                                                         roles=["dropcopy"])]))
    assert accts.authenticate("alice", PASSWORD) is accts.get("alice")
    assert accts.authenticate("alice", PASSWORD, "trade").name == "alice"
    messages = set()
    for name, pw in (("alice", "wrong"), ("nobody", PASSWORD), ("alice", ""), ("ALICE", PASSWORD),
                     (None, PASSWORD), ("alice", None), ("alice", PASSWORD + " ")):
        with pytest.raises(AuthError) as e:
            accts.authenticate(name, pw)
        messages.add(str(e.value))
    assert messages == {"unknown account or wrong password"}
    with pytest.raises(AuthError, match="lacks the role .trade."):
        accts.authenticate("bob", PASSWORD, "trade")


def test_hash_password_and_check_password():
    stored = hash_password("correct horse", salt=b"\x01" * 16)
    assert stored == hash_password("correct horse", salt=b"\x01" * 16)
    assert stored != hash_password("correct horse")          # a fresh salt each time
    assert check_password(stored, "correct horse")
    assert not check_password(stored, "correct horsE")
    assert not check_password(stored, b"correct horse")
    assert "correct" not in stored
    with pytest.raises(InputError):
        hash_password("")


def test_unknown_names_cost_as_much_as_wrong_passwords():
    """The check of an unknown name runs scrypt on a dummy hash: both failures take about as
    long, so timing does not tell which names exist."""
    acct = Account("alice", "ACME", 1, frozenset({"trade"}), 1000, hash_password(PASSWORD))
    accts = Accounts([acct])

    def cost(name):
        t = time.perf_counter()
        for _ in range(3):
            with pytest.raises(AuthError):
                accts.authenticate(name, "wrong")
        return time.perf_counter() - t

    wrong, unknown = min(cost("alice") for _ in range(2)), min(cost("nobody") for _ in range(2))
    assert 0.2 < unknown / wrong < 5, (wrong, unknown)


def test_accounts_refuses_duplicates_in_code():
    a = Account("a", "F", 1, frozenset({"trade"}), 1, H)
    with pytest.raises(InputError, match="twice"):
        Accounts([a, a])
    with pytest.raises(InputError, match="same trader id"):
        Accounts([a, Account("b", "F", 1, frozenset({"trade"}), 1, H)])
    assert os.fspath(Accounts([a]).source) == "<accounts>"
