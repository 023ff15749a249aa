"""Shared helpers of the gateway tests: accounts files and a running Gateway on a temp dir.

``make_accounts(n)`` builds accounts acct0 ... acct{n-1} (trader ids 1..n, firm "F0" for the
even ones and "F1" for the odd, roles trade + marketdata), plus "drop0" / "drop1" (the drop-copy
logins of F0 / F1) and "feed" (marketdata only); every password is ``PASSWORD``. Hashing uses
cheap scrypt settings so tests do not spend seconds on logins.
"""

from __future__ import annotations

import contextlib
import hashlib

from exsim.exchange.gateway import accounts as acc
from exsim.exchange.gateway.accounts import Account, Accounts
from exsim.replay.serving import open_gateway

PASSWORD = "s3cret-pw"


def cheap_hash(password: str, salt: bytes = b"exsim-test-salt!") -> str:
    """Return a valid scrypt hash line at low cost (n=16): for tests only."""
    digest = hashlib.scrypt(password.encode(), salt=salt, n=16, r=1, p=1, dklen=32)
    return f"scrypt$16$1$1${salt.hex()}${digest.hex()}"


def make_accounts(n: int = 4, *, rate: int = 100_000) -> Accounts:
    """Return the test accounts described in the module docstring."""
    h = cheap_hash(PASSWORD)
    rows = [Account(f"acct{i}", f"F{i % 2}", i + 1, frozenset({"trade", "marketdata"}), rate, h)
            for i in range(n)]
    rows += [Account(f"drop{f}", f"F{f}", 1000 + f, frozenset({"dropcopy"}), rate, h)
             for f in range(2)]
    rows.append(Account("feed", "F9", 2000, frozenset({"marketdata"}), rate, h))
    return Accounts(rows)


def write_accounts(path, accounts: Accounts) -> str:
    """Write ``accounts`` as a TOML accounts file at ``path``; return the path as str."""
    with open(path, "w") as f:
        f.write("\n".join(acc.format_account(a) for a in accounts))
    return str(path)


@contextlib.asynccontextmanager
async def running_gateway(data_dir, accounts: Accounts | None = None, **options):
    """Yield an open Gateway on ``data_dir`` (durability "none" and 0.2 ms batches unless
    given), closed on exit."""
    options.setdefault("durability", "none")
    options.setdefault("batch_ns", 200_000)
    gw = await open_gateway(data_dir, accounts or make_accounts(), **options)
    try:
        yield gw
    finally:
        await gw.close()
