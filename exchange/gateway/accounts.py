"""Who may connect to the gateway: the accounts file, hashed passwords, roles.

An accounts file is TOML::

    [[accounts]]
    name = "alice"             # the login on every port (FIX SenderCompID, OUCH username, ...)
    password = "scrypt$16384$8$1$<salt hex>$<hash hex>"   # `exsim account FILE NAME` writes it
    firm = "ACME"              # drop-copy sessions see every execution of their firm
    trader = 1                 # the engine's trader id of this account's orders (unique, >= 1)
    roles = ["trade", "marketdata"]   # any of: trade, dropcopy, marketdata
    max_msgs_per_sec = 1000    # inbound messages per second before the gateway rejects

Invariants:
- Passwords are stored only as scrypt hashes (stdlib ``hashlib.scrypt``, a random 16-byte salt
  per account); ``authenticate`` compares in constant time and says the same thing for an
  unknown name and a wrong password, so a client cannot probe for names.
- Account names and trader ids are unique within a file; a file that breaks a rule is refused
  as a whole with an InputError naming the file, the account and the field.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import tomllib
from dataclasses import dataclass

from exsim.exchange.errors import ExsimError, InputError

__all__ = ["Account", "Accounts", "AuthError", "ROLES", "hash_password", "check_password",
           "format_account", "read_toml"]

ROLES = frozenset({"trade", "dropcopy", "marketdata"})
MAX_FILE_BYTES = 16 << 20
# why these scrypt costs: ~50 ms per login on this class of machine (a logon is rare; a guessing
# attacker pays the same per guess); n=2^14, r=8 is the interactive-login setting of the scrypt paper
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 14, 8, 1
# why this floor: 1/8 of the default work (n*r); a file below it (say n=16, r=1) makes a
# stolen file's passwords cheap to guess, so `exsim serve` refuses it unless told otherwise
MIN_SCRYPT_WORK = 1 << 17 >> 3
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
MAX_TRADER = (1 << 32) - 1


class AuthError(ExsimError):
    """A login named no account, gave the wrong password, or the account lacks the role."""


@dataclass(frozen=True)
class Account:
    """One login of the gateway (see the module docstring for the fields)."""

    name: str
    firm: str
    trader: int
    roles: frozenset
    max_msgs_per_sec: int = 1000
    password: str = ""   # the scrypt hash line, never a clear password

    def can(self, role: str) -> bool:
        """Return True if the account holds ``role``."""
        return role in self.roles


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """Return the stored form of ``password``: ``scrypt$n$r$p$salt$hash`` (hex fields).

    Raises InputError for an empty password.
    """
    if not isinstance(password, str) or not password:
        raise InputError("a password must be a non-empty string")
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                            dklen=32)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def _parse_hash(stored: str) -> tuple[int, int, int, bytes, bytes] | None:
    """Return (n, r, p, salt, digest) of a stored hash, or None if it is not one we wrote."""
    parts = stored.split("$") if isinstance(stored, str) else []
    if len(parts) != 6 or parts[0] != "scrypt":
        return None
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, digest = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        return None
    # why bounds: a hostile file must not make a login allocate gigabytes (scrypt uses 128*n*r B)
    if not (2 <= n <= 1 << 20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16
            and 128 * n * r <= 256 << 20 and 8 <= len(salt) <= 64 and len(digest) == 32):
        return None
    return n, r, p, salt, digest


def check_password(stored: str, password: str) -> bool:
    """Return True if ``password`` matches the stored hash (constant time); False otherwise,
    including for a malformed stored hash or a non-string password."""
    parsed = _parse_hash(stored)
    if parsed is None or not isinstance(password, str):
        return False
    n, r, p, salt, digest = parsed
    got = hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, n=n, r=r, p=p,
                         maxmem=256 << 20 | 1 << 20, dklen=32)
    return hmac.compare_digest(got, digest)


# a hash of a random password, checked for unknown names so both failures cost the same time
_DUMMY_HASH = hash_password(secrets.token_hex(16), salt=b"\0" * 16)


def read_toml(path, what: str) -> dict:
    """Return the parsed TOML file ``path`` (at most ``MAX_FILE_BYTES``). Raises InputError
    naming the file and ``what`` it is ("accounts file") if it is too large, unreadable or
    not TOML."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise InputError(f"{path}: {what} is {size} bytes; the limit is {MAX_FILE_BYTES}")
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a TOML {what}: {e}") from None


class Accounts:
    """The accounts of one file, by name. Build with ``Accounts.load`` or ``Accounts(list)``."""

    def __init__(self, accounts: list[Account], source: str = "<accounts>"):
        self.source = source
        self._by_name: dict[str, Account] = {}
        self._by_trader: dict[int, Account] = {}
        for a in accounts:
            if a.name in self._by_name:
                raise InputError(f"{source}: account {a.name!r} appears twice")
            if a.trader in self._by_trader:
                raise InputError(f"{source}: accounts {self._by_trader[a.trader].name!r} and "
                                 f"{a.name!r} have the same trader id {a.trader}")
            self._by_name[a.name] = a
            self._by_trader[a.trader] = a

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Accounts":
        """Return the accounts of a TOML accounts file (module docstring).

        Raises InputError naming the file (and the account and field) if it cannot be read, is
        larger than 16 MiB, is not TOML, or an account breaks a rule: a name not of 1-32 letters,
        digits, ``_.-``; a missing or malformed password hash; a trader id not in [1, 2^32-1]
        or used twice; an unknown role; a rate not a positive integer.
        """
        path = os.fspath(path)
        data = read_toml(path, "accounts file")
        rows = data.get("accounts", [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError(f"{path}: 'accounts' must be an array of tables ([[accounts]])")
        return cls([_account(r, f"{path}: account {i + 1}") for i, r in enumerate(rows)], path)

    def require_cost(self, min_work: int = MIN_SCRYPT_WORK) -> None:
        """Return None if every account's hash costs at least ``min_work`` (scrypt n * r).

        Raises InputError naming the file, the first weak account and its cost otherwise."""
        for a in self._by_name.values():
            n, r, _, _, _ = _parse_hash(a.password) or (0, 0, 0, b"", b"")
            if n * r < min_work:
                raise InputError(
                    f"{self.source}: account {a.name!r}: its password hash is too cheap to "
                    f"guess against (scrypt n={n}, r={r}; n*r must be >= {min_work}); write it "
                    "again with `exsim account`, or pass --allow-weak-hashes (tests only)")

    def __iter__(self):
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Account | None:
        """Return the account called ``name``, or None."""
        return self._by_name.get(name)

    def by_trader(self, trader: int) -> Account | None:
        """Return the account whose trader id is ``trader``, or None."""
        return self._by_trader.get(int(trader))

    def authenticate(self, name: str, password: str, role: str | None = None) -> Account:
        """Return the account if ``password`` is its password (and it holds ``role``, if given).

        Raises AuthError with one message for an unknown name and a wrong password (the check
        costs the same either way), and another if the account lacks the role.
        """
        acct = self._by_name.get(name) if isinstance(name, str) else None
        ok = check_password(acct.password if acct else _DUMMY_HASH, password)
        if acct is None or not ok:
            raise AuthError("unknown account or wrong password")
        if role is not None and not acct.can(role):
            raise AuthError(f"account {acct.name!r} lacks the role {role!r}")
        return acct


def _account(row: dict, where: str) -> Account:
    """Return the Account of one ``[[accounts]]`` table; raises InputError naming the field."""
    known = {"name", "password", "firm", "trader", "roles", "max_msgs_per_sec"}
    unknown = set(row) - known
    if unknown:
        raise InputError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
    name = row.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InputError(f"{where}: 'name' must be 1-32 letters, digits or _.- ; got {name!r}")
    where = f"{where} ({name})"
    firm = row.get("firm", name)
    if not isinstance(firm, str) or not NAME_RE.match(firm):
        raise InputError(f"{where}: 'firm' must be 1-32 letters, digits or _.- ; got {firm!r}")
    password = row.get("password")
    if _parse_hash(password) is None:
        raise InputError(f"{where}: 'password' must be a scrypt hash written by "
                         "`exsim account` (clear passwords are not accepted)")
    trader = row.get("trader")
    if type(trader) is not int or not 1 <= trader <= MAX_TRADER:
        raise InputError(f"{where}: 'trader' must be an integer in [1, {MAX_TRADER}]; got {trader!r}")
    roles = row.get("roles", ["trade"])
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles) \
            or not set(roles) <= ROLES:
        raise InputError(f"{where}: 'roles' must be a list of {sorted(ROLES)}; got {roles!r}")
    rate = row.get("max_msgs_per_sec", 1000)
    if type(rate) is not int or not 1 <= rate <= 10_000_000:
        raise InputError(f"{where}: 'max_msgs_per_sec' must be an integer in [1, 10000000]; "
                         f"got {rate!r}")
    return Account(name, firm, trader, frozenset(roles), rate, password)


def format_account(account: Account) -> str:
    """Return the TOML ``[[accounts]]`` table of ``account`` (as ``Accounts.load`` reads it)."""
    roles = ", ".join(f'"{r}"' for r in sorted(account.roles))
    return (f'[[accounts]]\nname = "{account.name}"\npassword = "{account.password}"\n'
            f'firm = "{account.firm}"\ntrader = {account.trader}\nroles = [{roles}]\n'
            f"max_msgs_per_sec = {account.max_msgs_per_sec}\n")
