"""``exsim serve`` (the network gateway) and ``exsim account`` (write an accounts file entry).

A layer over ``replay.serving.serve`` (the store Session handed to the gateway's
``server.serve``) and ``exchange.gateway.accounts``.

Invariants:
- ``exsim account`` never writes a clear password: it reads the password from stdin
  (``--password-stdin``) or a prompt and writes only its scrypt hash; the file is rewritten
  atomically with mode 0600, other accounts kept as they were.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import secrets
import sys

from exsim.exchange.errors import InputError, UsageError

from exsim.replay.cli.common import EXIT_OK, note
from exsim.replay.simulation import kernels_cold, warm_up

__all__ = ["register", "cmd_serve", "cmd_account"]

SERVE_EXAMPLES = """\
examples:
  exsim account accounts.toml alice --firm ACME --trader 1      # prints alice's new password
  exsim serve runs/day1 --accounts accounts.toml --fix 0 --binary 0 --feed 0 --web 0 --duration 2
  exsim serve runs/day2 --accounts accounts.toml --ouch50 0 --itch50 0 --duration 2   # NASDAQ
  exsim verify runs/day1 && exsim rerun runs/day1               # a served day, like any run
  # fixed ports, until Ctrl-C: exsim serve runs/day1 --accounts accounts.toml --fix 9878 --web 8080
"""

ACCOUNT_EXAMPLES = """\
examples:
  exsim account accounts.toml alice --firm ACME --trader 1      # prints a new random password
  exsim account accounts.toml acme-dc --firm ACME --trader 900 --roles dropcopy
  # to type the password instead: exsim account accounts.toml bob --trader 2 --prompt
  # from a script: printf '%s\\n' "$PW" | exsim account accounts.toml bob --trader 2 --password-stdin
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
                       ("web", "the live depth / trades / positions page (HTTP + WebSocket)"),
                       ("ouch50", "NASDAQ OUCH 5.0 order entry over SoupBinTCP 3.0"),
                       ("itch50", "NASDAQ TotalView-ITCH 5.0 over SoupBinTCP (TCP) and its "
                                  "MoldUDP64 re-request server (UDP, the same port number)")):
        p.add_argument(f"--{name}", metavar="HOST:PORT", help=what)
    p.add_argument("--itch50-udp", metavar="HOST:PORT", action="append", default=[],
                   help="also send the ITCH 5.0 feed as MoldUDP64 packets to this address "
                        "(repeatable; a multicast group is sent with TTL 0)")
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
    p.add_argument("--tls-cert", metavar="PEM",
                   help="serve every port over TLS 1.3 with this certificate chain (with "
                        "--tls-key)")
    p.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    p.add_argument("--tls-client-ca", metavar="PEM",
                   help="require client certificates signed by these CA certificates")
    p.add_argument("--allow-plaintext", action="store_true",
                   help="listen without TLS on an address other than loopback (refused "
                        "otherwise)")
    p.add_argument("--limits", metavar="FILE",
                   help="TOML file of limits: a [gateway] table (per address, account and "
                        "logon) and [fix] [binary] [feed] [web] tables (per session and port); "
                        "what is left out keeps its default (docs/gateway.md)")
    p.add_argument("--allow-weak-hashes", action="store_true",
                   help="accept password hashes cheaper than scrypt n*r = 16384 (tests only)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="stop cleanly after S seconds (default: run until Ctrl-C or SIGTERM)")
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
    how = a.add_mutually_exclusive_group()
    how.add_argument("--prompt", action="store_true",
                     help="ask for the password (default: generate a random one and print it)")
    how.add_argument("--password-stdin", action="store_true",
                     help="read the password from the first line of stdin")
    a.set_defaults(func=cmd_account)


def _is_multicast(host: str) -> bool:
    """Return True if ``host`` is a multicast IP address (a name is not)."""
    import ipaddress
    try:
        return ipaddress.ip_address(host).is_multicast
    except ValueError:   # a host name: sent to as unicast
        return False


def cmd_serve(args) -> int:
    """Run ``exsim serve``; return 0 after a clean stop."""
    from exsim.replay.serving import serve

    ports = {n: getattr(args, n) for n in ("fix", "binary", "feed", "web", "ouch50", "itch50")
             if getattr(args, n) is not None}
    options = {}
    if args.itch50_udp:
        if args.itch50 is None:
            raise UsageError("--itch50-udp needs --itch50 (the feed it sends)")
        from exsim.exchange.gateway.server import parse_address
        dests = [parse_address(a, "itch50-udp") for a in args.itch50_udp]
        multicast = [d for d in dests if _is_multicast(d[0])]
        options["itch50"] = {"destinations": [d for d in dests if d not in multicast]}
        if multicast:
            if len(multicast) > 1:
                raise UsageError("--itch50-udp takes at most one multicast group")
            options["itch50"]["multicast"] = multicast[0]
    if args.batch_us < 1 or args.batch_max < 1:
        raise UsageError("--batch-us and --batch-max must be >= 1")
    durability = {"batch": "fsync", "interval": "interval", "none": "none"}[args.fsync]
    tls = None
    if args.tls_cert or args.tls_key or args.tls_client_ca:
        if not (args.tls_cert and args.tls_key):
            raise UsageError("--tls-cert and --tls-key go together (--tls-client-ca needs both)")
        from exsim.exchange.gateway.tls import server_context
        tls = server_context(args.tls_cert, args.tls_key, args.tls_client_ca)
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration must be > 0 seconds; got {args.duration}")
    limits = None
    if args.limits is not None:   # read before anything is created: a bad file changes nothing
        from exsim.exchange.gateway.guard import load_limits
        limits, port_options = load_limits(args.limits)
        for port, opts in (port_options or {}).items():   # the file's tables, then the flags'
            options[port] = {**opts, **options.get(port, {})}
    # why before the ports listen: a cold numba cache compiles the kernels for minutes,
    # and a client connected meanwhile would hear nothing about its first orders
    if kernels_cold():
        warm_up(durability="none", venue=True)   # the compile notices say what is compiled, and how long

    async def run() -> None:
        stop = asyncio.Event()
        if args.duration is not None:
            asyncio.get_running_loop().call_later(args.duration, stop.set)
        await serve(args.data_dir, args.accounts, ports, scenario=args.scenario,
                    durability=durability, batch_ns=args.batch_us * 1000,
                    batch_max=args.batch_max, stop=stop, options=options,
                    allow_weak_hashes=args.allow_weak_hashes, tls=tls,
                    allow_plaintext=args.allow_plaintext, limits=limits)

    # why: the data directory holds the journal and every account's reports; what the server
    # creates is for its own user only (directories 0700, files 0600)
    old_umask = os.umask(0o077)
    try:
        asyncio.run(run())
    finally:
        os.umask(old_umask)
    print(f"served {args.data_dir}: stopped cleanly")
    return EXIT_OK


def cmd_account(args) -> int:
    """Run ``exsim account``; return 0 once the file is written."""
    from exsim.exchange.gateway.accounts import Account, Accounts, format_account, hash_password

    generated = None
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise UsageError("--password-stdin: the first line of stdin is empty; give the "
                             "password on it")
    elif args.prompt:
        password = getpass.getpass(f"password for {args.name}: ")
        if not password:
            raise UsageError("--prompt: an empty password was typed")
    else:
        password = generated = secrets.token_urlsafe(12)
    roles = frozenset(r.strip() for r in args.roles.split(",") if r.strip())
    existing = list(Accounts.load(args.file)) if os.path.exists(args.file) else []
    new = Account(args.name, args.firm or args.name, args.trader, roles, args.rate,
                  hash_password(password))
    rows = [a for a in existing if a.name != args.name] + [new]
    text = "\n".join(format_account(a) for a in rows)
    tmp = f"{args.file}.tmp{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError as e:
        # why: name the file the user gave, not the temporary one beside it
        raise InputError(f"{args.file}: cannot write the accounts file: "
                         f"{e.strerror or e}") from None
    try:
        Accounts.load(tmp)   # why: refuse to write a file serve would refuse (bad name, roles)
    except InputError as e:
        os.unlink(tmp)
        raise InputError(str(e).replace(tmp, args.file)) from None
    os.replace(tmp, args.file)
    note(f"wrote account {args.name!r} to {args.file}")
    if generated is not None:
        # why bare: a script takes the secret as stdout (PASS=$(exsim account ...)); the remark
        # is for the person, on stderr
        note(f"the password of {args.name} follows on stdout; it is stored only as a hash: "
             "keep it now")
        print(generated)
    return EXIT_OK
