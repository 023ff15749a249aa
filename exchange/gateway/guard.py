"""What keeps one client from hurting the others before and at logon: every limit in one place
(``Limits``), the connections not yet logged on (per port and per address), the failed-logon
throttle, the password-hashing pool and the logon audit log (docs/gateway.md, "Limits").

One ``Guard`` belongs to one Gateway (``gw.guard``) and is shared by every port.

Invariants:
- A connection takes a pre-logon ticket (``admit``) when it is accepted and gives it up once its
  login message has arrived (from then on the failure throttle bounds its cost) or it closes.
  An address may hold any number of tickets younger than ``preauth_grace_s`` (a herd of clients
  reconnecting at once) but at most ``preauth_per_address`` older ones per port: past that, new
  connections from it are closed at once. When a port holds ``preauth_per_port`` tickets, a new
  connection evicts the oldest ticket of the address holding the most, so idle sockets can never
  keep a legitimate client from logging on (each port's own login deadline ends them anyway).
- A failed logon costs its address one token of a bucket (``failures_per_address``, refilled
  one per ``failure_refill_s``) and its account one of another (``failures_per_account``).
  With the address's bucket empty, a logon from it is refused at once, without hashing. With
  the account's bucket empty, a logon for it is refused at once unless it comes from an address
  that logged on to that account before (so a guesser can delay a named account only for
  newcomers, never for the addresses its owner uses). Bad passwords therefore cost at most a
  bounded hash rate and cannot starve the pool.
- Password hashes run on ``hash_workers`` threads of the guard's own pool, never the event
  loop, at a lower scheduling priority than the loop (``background_thread``); a port's logon deadline covers receiving the logon, not the queue in front of the pool.
- Every logon success and failure is logged with its peer address: a warning on the
  ``exsim.gateway.auth`` logger for failures, and one line per logon in
  ``DATA_DIR/gateway/audit.log`` (mode 0600, rotated at ``audit_bytes``, ``audit_files`` kept).
  Logons refused by the throttle (no password checked) are the one kind a client can send
  without bound: of those, each address and port gets one warning and one audit line a
  second (``THROTTLED_LOG_S``); the ones between are counted, and the next line (or the
  close) says how many ("... and N more refused since T"), so every failure is accounted for.
  The warnings for connections refused or evicted before logon are limited the same way.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import logging.handlers
import os
import threading
import time
from dataclasses import dataclass, fields

from exsim.exchange.errors import InputError, UsageError
from exsim.exchange.gateway.accounts import AuthError, read_toml

__all__ = ["Limits", "Guard", "Ticket", "ThrottledError", "AUDIT_FILE", "peer_host",
           "PORT_LIMITS", "load_limits", "BACKGROUND_NICE", "background_thread"]

log = logging.getLogger("exsim.gateway.auth")

AUDIT_FILE = "audit.log"
_MAX_TRACKED = 65_536   # failure buckets kept before the full ones are forgotten
THROTTLED_LOG_S = 1.0   # seconds between the log lines of throttled logons of one address
BACKGROUND_NICE = 10    # how much lower the scheduling priority of the gateway's helper threads is


def background_thread() -> None:
    """Lower the calling thread's scheduling priority by ``BACKGROUND_NICE`` (Linux: nice is
    per thread); a ThreadPoolExecutor initializer. Returns None; does nothing where the
    system does not allow it.

    Why: on a 2-core machine, two threads hashing passwords (scrypt, ~60 ms of CPU each) took
    the event loop's core for as long: every session's acks waited. The loop must win. Only
    for threads that run outside the GIL (scrypt releases it): a lower-priority thread that
    holds the GIL would keep the loop waiting for it (priority inversion)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid,
                       min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE))
    except (AttributeError, OSError):
        pass


@dataclass(frozen=True)
class Limits:
    """Every per-address and per-account limit of the gateway, with its default. Per-session
    limits of each port stay that port's options (docs/gateway.md lists them all)."""

    preauth_per_address: int = 16     # connections not yet logged on, per address and port
    preauth_per_port: int = 256       # connections not yet logged on, per port (then: eviction)
    preauth_grace_s: float = 1.0      # a connection younger than this is not counted per address
    failures_per_address: int = 8     # failed logons an address may make in a burst
    failures_per_account: int = 16    # failed logons an account may see in a burst
    failure_refill_s: float = 2.0     # one more failure allowed per bucket every this long
    hash_workers: int = 2             # threads hashing passwords (scrypt) at once
    audit_bytes: int = 1 << 20        # audit.log size before it is rotated
    audit_files: int = 5              # rotated audit logs kept (audit.log.1 .. .5)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise UsageError(f"limit {f.name} must be a positive number; got {v!r}")


def _clock(monotonic: float) -> str:
    """Return the UTC wall time (ISO, seconds) of a ``time.monotonic()`` reading."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ",
                         time.gmtime(time.time() - (time.monotonic() - monotonic)))


# the options of each port a limits file may set (each port's page says what they bound); the
# values are integers, except seconds (names ending in _s, and FIX's logon_timeout)
PORT_LIMITS = {
    "fix": ("logon_timeout", "max_message_size", "min_heartbeat", "max_heartbeat",
            "max_output_bytes", "max_garbled", "max_sessions", "resend_per_s", "backlog_per_s",
            "sndbuf"),
    "binary": ("heartbeat_s", "idle_s", "login_timeout_s", "max_queued_reports",
               "max_buffer_bytes", "max_sessions", "sndbuf", "replay_per_s"),
    "feed": ("heartbeat_s", "idle_s", "login_timeout_s", "max_buffer", "max_sessions", "sndbuf",
             "snapshot_orders_per_s"),
    "web": ("levels", "tape", "interval_s", "queue_max", "max_watchers", "auth_timeout_s"),
}
SHARED_SECTION = "gateway"   # the limits file's table of ``Limits`` (every port's)


def load_limits(path: str) -> tuple[Limits, dict[str, dict]]:
    """Return ``(Limits, {port: {option: value}})`` read from the TOML file ``path``: a
    ``[gateway]`` table of ``Limits`` fields and ``[fix]``, ``[binary]``, ``[feed]``, ``[web]``
    tables of the options ``PORT_LIMITS`` names; whatever is left out keeps its default.

    Raises InputError naming the file (and the table and key) if it cannot be read or parsed
    (``accounts.read_toml``),
    has an unknown table or key, or a value that is not a number of the right kind (seconds
    may be fractional, the rest are integers; all positive, ``sndbuf`` may be 0)."""
    doc = read_toml(path, "limits file")
    known = {SHARED_SECTION: tuple(f.name for f in fields(Limits)), **PORT_LIMITS}
    shared, ports = {}, {}
    for table, values in doc.items():
        if table not in known or not isinstance(values, dict):
            raise InputError(f"{path}: unknown table [{table}]; known: "
                             f"{', '.join(f'[{k}]' for k in known)}")
        for key, value in values.items():
            if key not in known[table]:
                raise InputError(f"{path}: [{table}] has no limit {key!r}; known: "
                                 f"{', '.join(known[table])}")
            seconds = key.endswith("_s") or key == "logon_timeout"
            ok = not isinstance(value, bool) and isinstance(value, (int, float) if seconds
                                                                  else int)
            if not ok or not (value > 0 or (key == "sndbuf" and value == 0)):
                kind = "number of seconds" if seconds else "integer"
                raise InputError(f"{path}: [{table}] {key} must be a positive {kind}; got "
                                 f"{value!r}")
            (shared if table == SHARED_SECTION else ports.setdefault(table, {}))[key] = value
    return Limits(**shared), ports


class ThrottledError(AuthError):
    """A logon refused without checking the password: too many recent failures."""


def peer_host(peer) -> str:
    """Return the address part of a socket peer name (``"?"`` if there is none)."""
    if isinstance(peer, (tuple, list)) and peer:
        return str(peer[0])
    return "?"


class Ticket:
    """One connection's pre-logon slot. ``logged_on()`` or ``release()`` gives it back."""

    __slots__ = ("guard", "port", "host", "kill", "held", "born")

    def __init__(self, guard: "Guard", port: str, host: str, kill):
        self.guard, self.port, self.host, self.kill, self.held = guard, port, host, kill, True
        self.born = time.monotonic()

    def presented(self) -> None:
        """The connection's login message arrived: it no longer holds a pre-logon slot."""
        self.release()

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        if self.held:
            self.held = False
            self.guard._forget(self)


class _Bucket:
    __slots__ = ("tokens", "at")

    def __init__(self, tokens: float, at: float):
        self.tokens, self.at = tokens, at


class Guard:
    """The gateway's pre-logon and logon protection (module docstring)."""

    def __init__(self, limits: Limits | None = None, state_dir: str | None = None):
        self.limits = limits or Limits()
        self._tickets: dict[str, dict[str, collections.OrderedDict]] = {}
        self._counts: dict[str, int] = {}
        self._by_address: dict[str, _Bucket] = {}
        self._by_account: dict[str, _Bucket] = {}
        self._good: dict[str, set] = {}        # account -> addresses it logged on from
        self._pool = concurrent.futures.ThreadPoolExecutor(
            self.limits.hash_workers, thread_name_prefix="exsim-auth",
            initializer=background_thread)
        self.refused = collections.Counter()   # why -> connections or logons refused
        # (port, host) -> [first time of the window, the name, refusals not yet logged, why]
        self._quiet: dict[tuple[str, str], list] = {}
        self._warned: dict[tuple, list] = {}   # key -> [first time of the window, not logged]
        self._audit = self._open_audit(state_dir)

    # -------------------------------------------------------------- connections before logon
    def admit(self, port: str, peer, kill) -> Ticket | None:
        """Return a pre-logon ticket for a new connection from ``peer`` on ``port``, or None if
        its address already holds ``preauth_per_address`` tickets older than
        ``preauth_grace_s`` (close it then). ``kill()`` closes the connection if its ticket is
        evicted (module docstring)."""
        host = peer_host(peer)
        per_host = self._tickets.setdefault(port, {})
        mine = per_host.setdefault(host, collections.OrderedDict())
        old, limit = 0, self.limits.preauth_per_address
        if len(mine) >= limit:
            young = time.monotonic() - self.limits.preauth_grace_s
            for t in mine:   # oldest first: stop at the first young one
                if t.born > young or old >= limit:
                    break
                old += 1
        if old >= limit:
            self.refused["preauth_per_address"] += 1
            self._warn_limited(("preauth", port, host), f"{port}: connection from {host} "
                               f"refused: {len(mine)} connections of this address are not "
                               "logged on")
            if not mine:
                del per_host[host]
            return None
        if self._counts.get(port, 0) >= self.limits.preauth_per_port:
            worst = max(per_host.values(), key=len)
            victim = next(iter(worst))
            self.refused["preauth_evicted"] += 1
            self._warn_limited(("evicted", port, victim.host), f"{port}: "
                               f"{self.limits.preauth_per_port} connections not logged on; "
                               f"closing the oldest of {victim.host}")
            victim.release()
            victim.kill()
        t = Ticket(self, port, host, kill)
        mine[t] = None
        self._counts[port] = self._counts.get(port, 0) + 1
        return t

    def _warn_limited(self, key: tuple, text: str) -> None:
        """Log ``text`` as a warning at most once every ``THROTTLED_LOG_S`` per ``key``; the
        ones between are counted, and the next line says how many."""
        # why: a client can open thousands of connections a second, and a warning for each
        # is both the gateway's time and a log file that grows without bound
        now = time.monotonic()
        w = self._warned.get(key)
        if w is not None and now - w[0] < THROTTLED_LOG_S:
            w[1] += 1
            return
        if w is not None and w[1]:
            text = f"{text} (and {w[1]} more since {_clock(w[0])})"
        if w is None and len(self._warned) >= _MAX_TRACKED:
            self._warned.clear()
        self._warned[key] = [now, 0]
        log.warning("%s", text)

    def _forget(self, t: Ticket) -> None:
        per_host = self._tickets.get(t.port, {})
        mine = per_host.get(t.host)
        if mine is not None and t in mine:
            del mine[t]
            self._counts[t.port] -= 1
            if not mine:
                del per_host[t.host]

    def preauth(self, port: str) -> int:
        """Return how many connections of ``port`` are not logged on."""
        return self._counts.get(port, 0)

    # -------------------------------------------------------------- logons
    def _bucket(self, table: dict, key: str, burst: int, now: float) -> _Bucket:
        b = table.get(key)
        if b is None:
            if len(table) >= _MAX_TRACKED:
                self._prune(table, burst, now)
            b = table[key] = _Bucket(float(burst), now)
        else:
            b.tokens = min(float(burst), b.tokens + (now - b.at) / self.limits.failure_refill_s)
            b.at = now
        return b

    def _prune(self, table: dict, burst: int, now: float) -> None:
        refill = self.limits.failure_refill_s
        for k in [k for k, b in table.items() if b.tokens + (now - b.at) / refill >= burst]:
            del table[k]
        if len(table) >= _MAX_TRACKED:   # why: never grow without bound, even under a flood
            for k in list(table)[:len(table) // 2]:
                del table[k]

    def _throttled(self, name: str, host: str, now: float) -> str | None:
        lim = self.limits
        if self._bucket(self._by_address, host, lim.failures_per_address, now).tokens < 1:
            return "too many failed logons from this address; wait and retry"
        if isinstance(name, str) and host not in self._good.get(name, ()) and \
                self._bucket(self._by_account, name, lim.failures_per_account, now).tokens < 1:
            return "too many failed logons for this account; wait and retry"
        return None

    async def authenticate(self, accounts, port: str, peer, name, password,
                           role: str | None = None):
        """Return the Account of a correct logon (``accounts.authenticate``), hashing on the
        guard's pool; log and audit the outcome with the peer's address.

        Raises ThrottledError (no hash computed) while the address or account has used its
        failure budget, and AuthError for a wrong name, password or role."""
        host = peer_host(peer)
        now = time.monotonic()
        why = self._throttled(name, host, now)
        if why is not None:
            self.refused["throttled"] += 1
            self._record_throttled(port, host, name, why, now)
            raise ThrottledError(why)
        loop = asyncio.get_running_loop()
        try:
            acct = await loop.run_in_executor(self._pool, accounts.authenticate, name, password,
                                              role)
        except AuthError as e:
            now = time.monotonic()
            self._bucket(self._by_address, host, self.limits.failures_per_address,
                         now).tokens -= 1
            if isinstance(name, str) and len(name) <= 64:
                self._bucket(self._by_account, name, self.limits.failures_per_account,
                             now).tokens -= 1
            self._record(port, host, name, False, str(e))
            raise
        good = self._good.setdefault(acct.name, set())
        if len(good) < 64:
            good.add(host)
        self._record(port, host, acct.name, True, role or "")
        return acct

    def record_failure(self, port: str, peer, name, why: str) -> None:
        """Log and audit a logon refused before any password check (a malformed login)."""
        self._record(port, peer_host(peer), name, False, why)

    def _record_throttled(self, port: str, host: str, name, why: str, now: float) -> None:
        # why not one line each: refusing costs no hash, so a client can send thousands a
        # second, and two log writes per refusal were a good part of the gateway's time then
        key = (port, host)
        q = self._quiet.get(key)
        if q is not None and now - q[0] < THROTTLED_LOG_S:
            q[1], q[2], q[3] = name, q[2] + 1, why
            return
        if q is not None and q[2]:
            why = f"{why} (and {q[2]} more refused since {_clock(q[0])})"
        if q is None and len(self._quiet) >= _MAX_TRACKED:
            self._flush_throttled()
        self._quiet[key] = [now, name, 0, why]
        self._record(port, host, name, False, why)

    def _flush_throttled(self) -> None:
        """Log the throttled refusals counted but not yet logged, and forget them."""
        for (port, host), (at, name, n, why) in list(self._quiet.items()):
            if n:
                self._record(port, host, name, False,
                             f"{n} more refused since {_clock(at)}: {why}")
        self._quiet.clear()

    def _record(self, port: str, host: str, name, ok: bool, why: str) -> None:
        shown = name if isinstance(name, str) and len(name) <= 64 else "?"
        if ok:
            log.info("%s logon of %r from %s", port, shown, host)
        else:
            log.warning("%s logon of %r from %s refused: %s", port, shown, host, why)
        if self._audit is not None:
            self._audit.info("%s %s %s %s %r %s", time.strftime("%Y-%m-%dT%H:%M:%SZ",
                             time.gmtime()), "OK" if ok else "FAIL", port, host, shown, why)

    # -------------------------------------------------------------- the audit log
    def _open_audit(self, state_dir: str | None):
        if state_dir is None:
            return None
        path = os.path.join(state_dir, AUDIT_FILE)
        # why created here: the handler would open it with the process umask
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=self.limits.audit_bytes, backupCount=self.limits.audit_files)
        handler.setFormatter(logging.Formatter("%(message)s"))
        audit = logging.getLogger(f"exsim.gateway.audit.{id(self)}")
        audit.propagate = False
        audit.setLevel(logging.INFO)
        audit.addHandler(handler)
        return audit

    def close(self) -> None:
        """Stop the hashing pool, log the throttled refusals not logged yet and close the
        audit log (idempotent)."""
        self._pool.shutdown(wait=False)
        self._flush_throttled()
        if self._audit is not None:
            for h in list(self._audit.handlers):
                h.close()
                self._audit.removeHandler(h)
            self._audit = None
