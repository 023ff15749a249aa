"""``exsim serve`` (the network gateway) and ``exsim account`` (write an accounts file entry).

A layer over ``exchange.gateway.server.serve`` and ``exchange.gateway.accounts``.

Invariants:
- ``exsim account`` never writes a clear password: it reads the password from stdin
  (``--password-stdin``) or a prompt and writes only its scrypt hash; the file is rewritten
  atomically with mode 0600, other accounts kept as they were.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys

from exchange.errors import InputError, UsageError

from replay.cli.common import EXIT_OK, note

__all__ = ["register", "cmd_serve", "cmd_account"]

SERVE_EXAMPLES = """\
examples:
  exsim account accounts.toml alice --firm ACME --trader 1 --roles trade,marketdata
  exsim serve runs/day1 --accounts accounts.toml --fix 9878 --binary 9879 --feed 9880 --web 8080
  exsim verify runs/day1 && exsim rerun runs/day1      # after stopping it (Ctrl-C)
"""

ACCOUNT_EXAMPLES = """\
examples:
  exsim account accounts.toml alice --firm ACME --trader 1            # prompts for the password
  echo "$PW" | exsim account accounts.toml bob --firm ACME --trader 2 --password-stdin
  exsim account accounts.toml acme-dc --firm ACME --trader 900 --roles dropcopy --password-stdin
"""


def register(sub, parents, formatter) -> None:
    """Add the ``serve`` and ``account`` subcommands to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "serve", parents=parents, formatter_class=formatter, epilog=SERVE_EXAMPLES,
        help="run the network gateway: FIX, binary order entry, market-data feed, web page",
        description="Serve DATA_DIR over the network (docs/gateway.md): every order from every "
                    "session is stamped,\nbatched into the engine and journaled; an "
                    "acknowledgement is sent only once its batch is durable.\nA new DATA_DIR is "
                    "created with the symbols of --scenario; an existing one is reopened (its "
                    "\nreports resent by sequence number). Ports listen on 127.0.0.1 unless "
                    "HOST is given; port 0\npicks a free one (DATA_DIR/gateway/listening.json "
                    "says which). Stop with Ctrl-C or SIGTERM.")
    p.add_argument("data_dir", metavar="DATA_DIR", help="data directory to serve (created if absent)")
    p.add_argument("--accounts", required=True, metavar="FILE",
                   help="accounts file (TOML; `exsim account` writes entries)")
    for name, what in (("fix", "FIX 4.4 order entry, drop copy and market data"),
                       ("binary", "OUCH-style binary order entry over SoupBinTCP framing"),
                       ("feed", "ITCH-style market-data feed"),
                       ("web", "the live depth / trades / positions page (HTTP + WebSocket)")):
        p.add_argument(f"--{name}", metavar="HOST:PORT", help=what)
    p.add_argument("--scenario", default="default", metavar="NAME",
                   help="preset or scenario file whose symbols a new DATA_DIR gets (default: "
                        "%(default)s)")
    p.add_argument("--fsync", choices=("batch", "interval", "none"), default="batch",
                   help="durability of each batch before it is acknowledged (default: "
                        "%(default)s)")
    p.add_argument("--batch-us", type=int, default=1000, metavar="US",
                   help="gather requests for at most this many microseconds (default: "
                        "%(default)s)")
    p.add_argument("--batch-max", type=int, default=1024, metavar="N",
                   help="... or until this many are waiting (default: %(default)s)")
    p.set_defaults(func=cmd_serve)

    a = sub.add_parser(
        "account", parents=parents, formatter_class=formatter, epilog=ACCOUNT_EXAMPLES,
        help="add or replace an account in a gateway accounts file (password stored hashed)",
        description="Add the account NAME to FILE (created if absent), or replace it; the "
                    "password is read from\nstdin or a prompt and stored only as a scrypt hash.")
    a.add_argument("file", metavar="FILE", help="accounts file (TOML)")
    a.add_argument("name", metavar="NAME", help="login name (1-32 letters, digits, _.-)")
    a.add_argument("--firm", help="firm (drop copy sees its firm's executions; default: NAME)")
    a.add_argument("--trader", type=int, required=True, metavar="N",
                   help="the engine trader id of this account's orders (unique, >= 1)")
    a.add_argument("--roles", default="trade,marketdata", metavar="LIST",
                   help="comma-separated: trade, dropcopy, marketdata (default: %(default)s)")
    a.add_argument("--rate", type=int, default=1000, metavar="N",
                   help="inbound messages per second before rejects (default: %(default)s)")
    a.add_argument("--password-stdin", action="store_true",
                   help="read the password from the first line of stdin instead of a prompt")
    a.set_defaults(func=cmd_account)


def cmd_serve(args) -> int:
    """Run ``exsim serve``; return 0 after a clean stop."""
    from exchange.gateway.server import serve

    ports = {n: getattr(args, n) for n in ("fix", "binary", "feed", "web")
             if getattr(args, n) is not None}
    if args.batch_us < 1 or args.batch_max < 1:
        raise UsageError("--batch-us and --batch-max must be >= 1")
    durability = {"batch": "fsync", "interval": "interval", "none": "none"}[args.fsync]
    asyncio.run(serve(args.data_dir, args.accounts, ports, scenario=args.scenario,
                      durability=durability, batch_ns=args.batch_us * 1000,
                      batch_max=args.batch_max))
    return EXIT_OK


def cmd_account(args) -> int:
    """Run ``exsim account``; return 0 once the file is written."""
    from exchange.gateway.accounts import Account, Accounts, format_account, hash_password

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
    roles = frozenset(r.strip() for r in args.roles.split(",") if r.strip())
    existing = list(Accounts.load(args.file)) if os.path.exists(args.file) else []
    new = Account(args.name, args.firm or args.name, args.trader, roles, args.rate,
                  hash_password(password))
    rows = [a for a in existing if a.name != args.name] + [new]
    text = "\n".join(format_account(a) for a in rows)
    tmp = f"{args.file}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    try:
        Accounts.load(tmp)   # why: refuse to write a file serve would refuse (bad name, roles)
    except InputError as e:
        os.unlink(tmp)
        raise InputError(str(e).replace(tmp, args.file)) from None
    os.replace(tmp, args.file)
    note(f"wrote account {args.name!r} to {args.file}")
    return EXIT_OK
