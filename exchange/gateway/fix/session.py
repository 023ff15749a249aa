"""The FIX 4.4 session layer of one TCP connection (docs/gateway-fix.md, "Session").

A connection must log on (35=A) within ``logon_timeout`` seconds: SenderCompID (49) is the
account name, Password (554) its password, TargetCompID (56) the gateway's CompID. An account
with the "trade" role gets an order-entry session on report stream ``fix:<account>``; one with
only "dropcopy" (or a Logon with TargetSubID 57=DROPCOPY) gets the drop copy of its firm,
stream ``dropcopy:<firm>``, and may not send orders; one with neither (or a Logon with
57=MARKETDATA) gets a market-data session, which has no report stream and may not send orders.
An account with the "marketdata" role may send MarketDataRequest on any of its sessions
(``marketdata.MarketData``). One session per account and kind at a time.

Invariants:
- Sequence numbers and the outbound store are persisted (``store.SessionStore``) before the
  bytes they describe are written and before inbound requests reach the engine, so they survive
  a restart. The inbound number persisted stops at the first order message whose request the
  engine has not journaled yet (``Gateway.submit``'s future), so a crash before the journal
  leaves it unreceived: after the restart the gateway asks for it again (ResendRequest) and the
  resent copy (PossDupFlag=Y) is processed; a resent NewOrderSingle / replace whose ClOrdID the
  gateway already knows was journaled after all and is not run twice; a resend repeats the stored bytes with PossDupFlag=Y and OrigSendingTime, and
  gap-fills administrative messages and market data (W, X: stale once sent) with
  SequenceReset-GapFill.
- Reports reach a session live once it has caught up: at logon it subscribes, and while the
  reports stored since its last one are read (off the event loop, ``RESEND_CHUNK`` at a time,
  at most ``backlog_per_s`` a second for the whole port) it ignores live ones; it goes live
  with no await between seeing the stream's head and switching. Each report is sent once: a
  report whose rseq is not above the last one sent is skipped.
- The FIX rules for a received MsgSeqNum: equal to the expected one, processed; lower without
  PossDupFlag=Y, Logout and disconnect; lower with it, ignored; higher, one ResendRequest and
  the message is dropped (the resend brings it again). A message with no MsgSeqNum, a wrong
  BeginString, an unusable BodyLength or one above ``max_message_size`` bytes ends the session;
  a bad checksum or trailer is ignored (FIX "garbled"), and more than ``max_garbled`` of them
  end the session; a framed message breaking a field rule gets a session Reject (35=3).
- No callback awaits; a client that does not read is disconnected when its unsent output
  passes ``max_output_bytes`` (its reports stay stored; a reconnect resends them), so a slow
  or half-open client never holds up the core or another session; output held back while a
  resend runs counts against the same bound. A resend is read and built ``RESEND_CHUNK`` stored
  messages at a time on the port's read thread (``FixServer.off_loop``), at most
  ``resend_per_s`` a second (other sessions run between chunks);
  ResendRequests that arrive while one
  runs are merged into one that follows it: per session at most one runs and one waits.
  Heartbeats: a Heartbeat
  after ``HeartBtInt`` seconds without output; a TestRequest after HeartBtInt + 20 % without
  input; a Logout and disconnect if the TestRequest is not answered within HeartBtInt more.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging

from exsim.exchange.errors import UsageError
from exsim.exchange.gateway.accounts import AuthError
from exsim.exchange.gateway.core import RateLimiter
from exsim.exchange.gateway.fix.codec import FatalFrame, FieldError, Framer, Garbled, body_of, build, \
    field, field_int, field_str, parse_frame, parse_utc_timestamp, seq_of, utc_timestamp
from exsim.exchange.gateway.fix.dialect import EXTENSION_TAG, plain_market_data
from exsim.exchange.gateway.fix.orders import ORDER_MSG_TYPES, Refused, parse_order, refusal_body, \
    report_body
from exsim.exchange.gateway.fix.store import Outbound

__all__ = ["FixSession", "ADMIN_TYPES"]

log = logging.getLogger("exsim.gateway.fix")

ADMIN_TYPES = frozenset({"0", "1", "2", "3", "4", "5", "A"})
UNSTORED_TYPES = ADMIN_TYPES | {"W", "X"}   # gap-filled on a resend (module docstring)
_RATE_TEXT = "message rate exceeded"
_MAX_SEQ = (1 << 31) - 1
# how long a closing session waits for its requests in flight to be journaled (a batch takes
# milliseconds; a stuck store must not hold the connection open)
RESEND_CHUNK = 256     # stored messages resent per step (then other sessions run)
SETTLE_SECONDS = 2.0   # FIX SeqNum is an int; the gateway keeps it in 31 bits


class _Close(Exception):
    """Raised inside frame handling to end the session (after what was queued is flushed)."""


class FixSession:
    """One FIX connection (module docstring). ``await run()`` serves it until it ends."""

    def __init__(self, server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server, self.gw, self.store = server, server.gw, server.store
        self.reader, self.writer = reader, writer
        self.loop = asyncio.get_running_loop()
        self.framer = Framer(server.max_message_size)
        self.state = None          # store.SessionState once logged on
        self.key = self.account = self.stream = self.kind = None
        self.heartbeat = 0
        self.extended = False      # exsim's FIX extensions, asked for at logon (dialect.py)
        self.limiter = None
        self.rows: list[Outbound] = []      # outbound rows not yet committed
        self.out: list[bytes] = []          # bytes not yet written
        self.to_submit: list = []           # (MsgSeqNum, request) waiting for the commit
        # (MsgSeqNum, Gateway.submit's future) of the requests in flight, in submit order
        self.unjournaled: collections.deque = collections.deque()
        self.ended = False                  # once True this object never commits again
        self.dirty = False
        self.closing = False
        self.logout_sent = False
        self.resend_until = 0      # while > 0: a ResendRequest of ours is outstanding
        self.resending = False     # while True, output waits in self.held (a resend is running)
        self.held: list[bytes] = []
        self.held_bytes = 0
        self.pending_resend = None   # (begin, end) asked while a resend was running
        self.catching_up = False     # while True, the logon's backlog is being delivered
        self.catch_up = None         # the task delivering it
        self.garbled = 0
        self.rejects_received = 0  # Rejects / BusinessMessageRejects of our messages
        self.test_request_at = None
        self.ticket = None
        self.authenticating = False   # the Logon arrived; its password is being checked
        self.started = self.last_recv = self.last_sent = self.loop.time()
        peer = self.peer_name = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"

    # -- the connection --------------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the connection until the peer leaves, logs out or breaks a rule. Raises nothing
        for anything the peer sends."""
        timer = self.loop.create_task(self._timer())
        try:
            while not self.closing:
                data = await self.reader.read(65536)
                if not data:
                    break
                self.last_recv = self.loop.time()
                self.framer.feed(data)
                try:
                    await self._frames()
                except _Close:
                    self.closing = True
                self._flush()
                if self.closing:
                    break
                await self.writer.drain()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except Exception:   # why broad: a bug here must end this session only, never the server
            log.exception("FIX session %s (%s) failed", self.key, self.peer)
        finally:
            timer.cancel()
            try:
                await self._settle()
            finally:
                self._end()

    async def _settle(self) -> None:
        """Hand what is queued to the core and wait (bounded) until it is journaled, so the
        final commit counts it as received and a reconnect does not have it sent again."""
        try:
            self._flush()
        except Exception:   # why: the store or socket may be gone at shutdown; _end tries again
            return
        pending = [done for _, done in self.unjournaled]
        if pending:
            await asyncio.wait(pending, timeout=SETTLE_SECONDS)

    def _end(self) -> None:
        self.closing = True
        if self.catch_up is not None:
            self.catch_up.cancel()
        if self.rejects_received:
            log.warning("FIX %s: session ended; the client rejected %d of our messages",
                        self.key, self.rejects_received)
        if self.stream is not None:
            self.gw.unsubscribe(self.stream, self._on_reports)
        if self.key is not None and self.server.active.get(self.key) is self:
            del self.server.active[self.key]
        try:
            self._flush()
        except Exception:   # why: the store or socket may be gone at shutdown; nothing to save
            pass
        # why: a later session of this key loads the state from the store; a late commit of
        # this one would overwrite it
        self.ended = True
        self.writer.close()

    def shutdown(self, text: str) -> None:
        """Log the session out with ``text`` and close it (the server is stopping)."""
        if self.closing:
            return
        if self.state is not None:
            self._send("5", [(58, text)])
            self._flush()
        self.closing = True
        self.writer.close()

    async def _timer(self) -> None:
        while not self.closing:
            hb = self.heartbeat or self.server.logon_timeout
            await asyncio.sleep(min(0.5, hb / 4))
            now = self.loop.time()
            if self.state is None:
                # why not while authenticating: the deadline is for the client's Logon, not
                # for the queue of the server's own password hashing (a logon herd)
                if not self.authenticating and now - self.started > self.server.logon_timeout:
                    log.info("FIX %s: no logon within %s s", self.peer, self.server.logon_timeout)
                    self.closing = True
                    self.writer.close()
                    return
                continue
            if self.test_request_at is not None and self.last_recv > self.test_request_at:
                self.test_request_at = None
            if self.test_request_at is not None and now - self.test_request_at > hb:
                self._logout("TestRequest not answered: heartbeat timeout")
                self._flush()
                return
            if self.test_request_at is None and now - self.last_recv > hb * 1.2:
                self.test_request_at = now
                self._send("1", [(112, f"TEST{self.state.next_out}")])
            elif now - self.last_sent >= hb:
                self._send("0", [])
            self._flush()

    # -- output ------------------------------------------------------------------------------------
    def _send(self, msg_type: str, body: list, rseq: int = 0) -> None:
        """Number, store (at the next flush) and queue one outbound message."""
        st = self.state
        seq = st.next_out
        st.next_out += 1
        if rseq:
            st.last_rseq = rseq
        raw = build(msg_type, self.server.comp_id, self.account.name, seq,
                    utc_timestamp(self.gw.now_ns()), body)
        self.rows.append(Outbound(seq, msg_type, rseq, None if msg_type in UNSTORED_TYPES else raw))
        self.out.append(raw)
        self.last_sent = self.loop.time()

    def _flush(self) -> None:
        """Commit the session state and queued rows, hand the queued requests to the core,
        then write the queued bytes (module docstring: that order is the invariant)."""
        if self.state is not None and (self.rows or self.dirty) and not self.ended:
            st = self.state
            first = (self.unjournaled[0][0] if self.unjournaled
                     else self.to_submit[0][0] if self.to_submit else st.next_in)
            durable = st if first >= st.next_in else dataclasses.replace(st, next_in=first)
            self.store.commit(self.key, durable, self.rows)
            self.rows, self.dirty = [], False
        if self.to_submit:
            reqs, self.to_submit = self.to_submit, []
            for seq, r in reqs:
                try:
                    done = self.gw.submit(r)
                except UsageError as e:   # the gateway is closing or failed
                    self._logout(str(e))
                    break
                self.unjournaled.append((seq, done))
                done.add_done_callback(self._on_journaled)
        if self.out:
            data, self.out = b"".join(self.out), []
            if self.resending:
                self.held.append(data)
                self.held_bytes += len(data)
                if self.held_bytes > self.server.max_output_bytes:
                    log.warning("FIX %s: client does not read during a resend; disconnected",
                                self.key)
                    self.closing = True
                    self.writer.transport.abort()
            elif not self.writer.is_closing():
                self.writer.write(data)
                self._check_output()

    def _on_journaled(self, done: asyncio.Future) -> None:
        """The oldest request in flight is journaled (the core keeps queue order): the inbound
        number may now be persisted past it."""
        if done.cancelled() or not self.unjournaled:
            return
        self.unjournaled.popleft()
        if self.state is not None and not self.ended and not self.dirty:
            # why deferred: a batch journals many requests of a session at once; their
            # callbacks all run before this, so the session commits once per batch
            self.dirty = True
            self.loop.call_soon(self._commit_later)

    def _commit_later(self) -> None:
        if self.dirty and not self.ended:
            self._flush()

    def _check_output(self) -> None:
        transport = self.writer.transport
        if transport.get_write_buffer_size() > self.server.max_output_bytes:
            log.warning("FIX %s: client does not read (%d bytes unsent); disconnected",
                        self.key, transport.get_write_buffer_size())
            self.closing = True
            transport.abort()

    def _logout(self, text: str) -> None:
        """Send Logout with ``text`` (once) and end the session after the flush."""
        if not self.logout_sent and self.state is not None:
            self._send("5", [(58, text)])
            self.logout_sent = True
        self.closing = True
        self.loop.call_soon(self.writer.close)

    def _reject(self, ref_seq: int, msg_type: str | None, err: FieldError) -> None:
        body = [(45, ref_seq)]
        if err.tag:
            body.append((371, err.tag))
        if msg_type:
            body.append((372, msg_type))
        body += [(373, err.reason), (58, err.text)]
        self._send("3", body)

    def _business_reject(self, ref_seq: int, msg_type: str, reason: int, text: str,
                         ref_id: str | None = None) -> None:
        body = [(45, ref_seq), (372, msg_type)]
        if ref_id:
            body.append((379, ref_id))
        body += [(380, reason), (58, text)]
        self._send("j", body)

    def send_market_data(self, messages: list) -> None:
        """Send market-data messages, (MsgType, body pairs) each, in order, and flush; nothing
        if the session is ending."""
        if self.closing or self.state is None:
            return
        for msg_type, body in messages:
            self._send(msg_type, body if self.extended else plain_market_data(body))
        self._flush()

    # -- reports -----------------------------------------------------------------------------------
    def _on_reports(self, reports: list) -> None:
        """Core callback: send each report not sent yet, in rseq order (none while the
        logon's backlog is delivered: ``_catch_up`` reads them from the store then)."""
        if self.closing or self.catching_up:
            return
        self._queue_reports(reports)
        self._flush()

    def _queue_reports(self, reports: list) -> None:
        dropcopy = self.kind == "dropcopy"
        for r in reports:
            if r.rseq <= self.state.last_rseq:
                continue
            msg_type, body = report_body(r, self.gw.symbols, with_account=dropcopy,
                                         extended=self.extended)
            self._send(msg_type, body, r.rseq)

    # -- input -------------------------------------------------------------------------------------
    async def _frames(self) -> None:
        while not self.closing:
            try:
                item = self.framer.next()
            except FatalFrame as e:
                if self.state is None:
                    raise _Close() from None
                self._logout(str(e))
                raise _Close() from None
            if item is None:
                return
            if isinstance(item, Garbled):
                self.garbled += 1
                if self.state is None:
                    raise _Close()
                if self.garbled > self.server.max_garbled:
                    self._logout(f"more than {self.server.max_garbled} garbled messages")
                    raise _Close()
                continue
            if self.state is None:
                await self._logon(item)
            else:
                self._message(item)

    async def _logon(self, frame: bytes) -> None:
        """Handle the first message of the connection: it must be a valid Logon."""
        srv = self.server
        if self.ticket is not None:
            self.ticket.presented()
        try:
            msg = parse_frame(frame)
            seq = field_int(msg, 34, required=True, lo=1, hi=_MAX_SEQ)
            if msg.message_type != b"A":
                raise FieldError(0, "the first message must be a Logon (35=A)", 35)
            name = field_str(msg, 49, required=True, max_len=32)
            target = field_str(msg, 56, required=True, max_len=32)
            user = field_str(msg, 553, max_len=32)
            password = field_str(msg, 554, required=True, max_len=256)
            encrypt = field_int(msg, 98, required=True)
            hb = field_int(msg, 108, required=True)
            reset = field(msg, 141) == b"Y"
            sub = field_str(msg, 57, max_len=32)
            extended = field(msg, EXTENSION_TAG) == b"Y"
            raw_time = field(msg, 52)
            if raw_time is None:
                raise FieldError(1, "required tag 52 missing", 52)
            parse_utc_timestamp(raw_time, 52)
        except FieldError as e:
            self.gw.guard.record_failure("fix", self.peer_name, None, e.text)
            raise _Close() from None
        problem = None
        if target != srv.comp_id:
            problem = f"TargetCompID must be {srv.comp_id}"
        elif user is not None and user != name:
            problem = "Username (553) must equal SenderCompID (49)"
        elif encrypt != 0:
            problem = "EncryptMethod (98) must be 0"
        elif not srv.min_heartbeat <= hb <= srv.max_heartbeat:
            problem = f"HeartBtInt (108) must be in [{srv.min_heartbeat}, {srv.max_heartbeat}]"
        elif reset and seq != 1:
            problem = "a Logon with ResetSeqNumFlag=Y must have MsgSeqNum 1"
        role = "trade"
        known = self.gw.accounts.get(name)
        if sub == "DROPCOPY" or (known is not None and not known.can("trade")
                                 and known.can("dropcopy")):
            role = "dropcopy"
        elif sub == "MARKETDATA" or (known is not None and not known.can("trade")
                                     and known.can("marketdata")):
            role = "marketdata"
        if problem is None:
            self.authenticating = True
            try:
                acct = await self.gw.guard.authenticate(self.gw.accounts, "fix", self.peer_name,
                                                        name, password, role)
            except AuthError as e:
                problem = str(e)
            finally:
                self.authenticating = False
        else:
            self.gw.guard.record_failure("fix", self.peer_name, name, problem)
        if problem is None and f"{role}:{acct.name}" in srv.active:
            problem = "this account already has a session of this kind logged on"
        if problem is not None:
            log.warning("FIX %s: refused logon of %r: %s", self.peer, name, problem)
            # why unstored, MsgSeqNum 1: no session state is touched for a refused logon
            self.writer.write(build("5", srv.comp_id, name, 1, utc_timestamp(self.gw.now_ns()),
                                    [(58, problem)]))
            raise _Close()
        self.account, self.kind, self.key = acct, role, f"{role}:{acct.name}"
        srv.active[self.key] = self
        state = self.store.load(self.key)
        if reset:
            state = self.store.reset(self.key, state.last_rseq)
        self.state, self.heartbeat, self.extended = state, hb, extended
        self.limiter = RateLimiter(acct.max_msgs_per_sec)
        if seq < state.next_in:
            self._logout(f"MsgSeqNum too low, expecting {state.next_in} but received {seq}")
            raise _Close()
        body = [(98, 0), (108, hb)]
        if reset:
            body.append((141, "Y"))
        if extended:
            body.append((EXTENSION_TAG, "Y"))
        self._send("A", body)
        if seq == state.next_in:
            state.next_in += 1
        else:
            self._ask_resend(seq)
        self.stream = {"trade": f"fix:{acct.name}", "dropcopy": f"dropcopy:{acct.firm}"}.get(role)
        owed = 0
        if self.stream is not None:
            owed = max(0, self.gw.stream_head(self.stream) - state.last_rseq)
            self.gw.subscribe(self.stream, self._on_reports)
            if owed:
                self.catching_up = True
                self.catch_up = self.loop.create_task(self._catch_up())
        log.info("FIX %s: %s logged on (%s%s), next in %d out %d, %d reports to deliver",
                 self.peer, acct.name, role, ", extensions" if extended else "", state.next_in,
                 state.next_out, owed)

    async def _catch_up(self) -> None:
        """Send the reports stored since the last one this session sent, ``RESEND_CHUNK`` at
        a time within the port's ``backlog_per_s``, read off the event loop
        (``Gateway.replay_stream``); live reports wait in the store meanwhile. Why: the whole
        backlog read and encoded in one go held every session's event loop for as long as it
        took."""
        try:
            while not self.closing:
                if self.state.last_rseq >= self.gw.stream_head(self.stream):
                    # no await since the head was read: the next report comes live
                    self.catching_up = False
                    return
                await self.server.backlog.take(RESEND_CHUNK)
                reports = await self.gw.replay_stream(self.stream, self.state.last_rseq,
                                                      RESEND_CHUNK)
                if self.closing:
                    return
                if not reports:   # never expected: a dispatched report is stored first
                    log.error("FIX %s: reports after %d are not stored; sending live ones",
                              self.key, self.state.last_rseq)
                    self.catching_up = False
                    return
                self._queue_reports(reports)
                self._flush()
                await self.writer.drain()
        except (ConnectionError, OSError):
            self.closing = True
        except Exception:   # why broad: a store that cannot be read ends this session only
            log.exception("FIX %s: the reports owed could not be read", self.key)
            self.closing = True
            self.writer.close()

    def _ask_resend(self, seen: int) -> None:
        if self.resend_until == 0:
            self._send("2", [(7, self.state.next_in), (16, 0)])
        self.resend_until = max(self.resend_until, seen)

    def _message(self, frame: bytes) -> None:
        """Handle one framed message of a logged-on session."""
        st = self.state
        seq = seq_of(frame)
        if seq is None or seq > _MAX_SEQ:
            self._logout("MsgSeqNum (34) missing or out of range")
            raise _Close()
        poss_dup = b"\x0143=Y\x01" in frame
        try:
            msg = parse_frame(frame)
        except FieldError as e:
            if self._sequenced(seq, poss_dup, None, None):
                self._reject(seq, None, e)
            return
        msg_type = msg.message_type.decode("ascii", "replace")
        try:
            sender, target = field(msg, 49), field(msg, 56)
        except FieldError as e:   # a repeated CompID: rejected (373=13), never a crash
            if self._sequenced(seq, poss_dup, None, None):
                self._reject(seq, msg_type, e)
            return
        if sender != self.account.name.encode() or target != self.server.comp_id.encode():
            self._reject(seq, msg_type, FieldError(9, "CompID problem", 49))
            self._logout("SenderCompID / TargetCompID do not match the session")
            raise _Close()
        if msg_type == "4":
            try:
                gap_fill = field(msg, 123)
            except FieldError as e:   # a repeated GapFillFlag: rejected (373=13), never a crash
                if self._sequenced(seq, poss_dup, None, None):
                    self._reject(seq, msg_type, e)
                return
            if gap_fill != b"Y":
                self._sequence_reset(msg, seq)
                return
        if not self._sequenced(seq, poss_dup, msg_type, msg):
            return
        try:
            self._check_header(msg, poss_dup)
            self._dispatch(msg, msg_type, seq, poss_dup)
        except FieldError as e:
            self._reject(seq, msg_type, e)

    def _sequenced(self, seq: int, poss_dup: bool, msg_type, msg) -> bool:
        """Apply the MsgSeqNum rules (module docstring); return True if the message is the
        expected one (now counted as received)."""
        st = self.state
        if seq < st.next_in:
            if poss_dup:
                return False
            self._logout(f"MsgSeqNum too low, expecting {st.next_in} but received {seq}")
            raise _Close()
        if seq > st.next_in:
            self._ask_resend(seq)
            # why process these out of order: FIX says a ResendRequest is honoured before our
            # own, and a Logout is answered
            if msg_type == "2" and msg is not None:
                try:
                    self._resend(msg)
                except FieldError:
                    pass
            elif msg_type == "5":
                self._logout("logout")
                raise _Close()
            return False
        st.next_in += 1
        self.dirty = True
        if self.resend_until and st.next_in > self.resend_until:
            self.resend_until = 0
        return True

    def _check_header(self, msg, poss_dup: bool) -> None:
        raw = field(msg, 52)
        if raw is None:
            raise FieldError(1, "required tag 52 missing", 52)
        parse_utc_timestamp(raw, 52)
        if poss_dup:
            orig = field(msg, 122)
            if orig is None:
                raise FieldError(1, "required tag 122 missing (PossDupFlag=Y)", 122)
            parse_utc_timestamp(orig, 122)

    def _dispatch(self, msg, msg_type: str, seq: int, poss_dup: bool = False) -> None:
        limited = not self.limiter.allow(self.gw.now_ns())
        if msg_type == "0":
            return
        if msg_type == "1":
            if limited:
                raise FieldError(99, _RATE_TEXT)
            test_id = field_str(msg, 112, required=True, max_len=64)
            self._send("0", [(112, test_id)])
        elif msg_type == "2":
            if limited:
                raise FieldError(99, _RATE_TEXT)
            self._resend(msg)
        elif msg_type in ("3", "j"):
            self._peer_rejected(msg, msg_type, quiet=limited)
        elif msg_type == "4":
            new = field_int(msg, 36, required=True, lo=1, hi=_MAX_SEQ)
            if new < self.state.next_in:
                raise FieldError(5, "SequenceReset-GapFill may not lower MsgSeqNum", 36)
            self.state.next_in = new
        elif msg_type == "5":
            self._logout("logout")
            raise _Close()
        elif msg_type == "A":
            self._logout("Logon received on a session already logged on")
            raise _Close()
        elif msg_type in ORDER_MSG_TYPES:
            self._order(msg, msg_type, seq, limited, poss_dup)
        elif msg_type == "V" and self.server.marketdata is not None:
            if limited:
                self._business_reject(seq, msg_type, 0, _RATE_TEXT)
            else:
                self.server.marketdata.request(self, msg, seq)
        elif len(msg_type) <= 2 and msg_type.isalnum():
            self._business_reject(seq, msg_type, 3, f"unsupported MsgType {msg_type}")
        else:
            raise FieldError(11, "invalid MsgType", 35)

    def _peer_rejected(self, msg, msg_type: str, quiet: bool = False) -> None:
        """The client refused one of our messages (a session Reject, or a BusinessMessageReject
        naming a message of ours): counted in ``server.stats`` and, unless ``quiet`` (the
        session is over its message rate: the log's cost stays bounded), a warning with what
        it named (the gateway sent something the client does not parse, and a report may not
        have reached its application)."""
        kind = "rejects_received" if msg_type == "3" else "business_rejects_received"
        self.server.stats[kind] += 1
        self.rejects_received += 1
        if quiet:
            return

        def text(tag):
            try:
                raw = field(msg, tag)
            except FieldError:
                return "?"
            return "-" if raw is None else raw.decode("ascii", "replace")[:200]

        reason = 373 if msg_type == "3" else 380
        log.warning("FIX %s: the client rejected one of our messages (35=%s): RefSeqNum=%s "
                    "RefTagID=%s RefMsgType=%s %s=%s Text=%s", self.key, msg_type, text(45),
                    text(371), text(372), reason, text(reason), text(58))

    def _order(self, msg, msg_type: str, seq: int, limited: bool, poss_dup: bool) -> None:
        if self.kind != "trade":
            kind = {"dropcopy": "drop-copy", "marketdata": "market-data"}[self.kind]
            self._business_reject(seq, msg_type, 6, f"a {kind} session may not send orders",
                                  (msg.get(11) or b"").decode("ascii", "replace")[:32])
            return
        try:
            req = parse_order(msg, msg_type, self.account, self.stream, self.gw.symbols)
            if limited:
                side = "2" if req.side == 1 else "1"
                raise Refused(req.kind, req.client_order_id, req.orig_client_order_id,
                              req.symbol, _RATE_TEXT, side)
        except Refused as r:
            # why the gateway clock: it never repeats (also across restarts and sequence
            # resets), where a MsgSeqNum starts again at 1 after 141=Y
            out_type, body = refusal_body(r, f"{self.stream}:L{self.gw.now_ns()}",
                                          self.gw.now_ns())
            self._send(out_type, body)
            return
        if poss_dup and req.kind in ("new", "replace") and self.gw.knows_client_order_id(
                self.account.name, req.client_order_id):
            log.info("FIX %s: PossDup %s %s already journaled; not run again", self.key,
                     msg_type, req.client_order_id)
            return
        self.to_submit.append((seq, req))

    def _sequence_reset(self, msg, seq: int) -> None:
        """SequenceReset in reset mode (123=N): MsgSeqNum is ignored (FIX)."""
        try:
            new = field_int(msg, 36, required=True, lo=1, hi=_MAX_SEQ)
            if new < self.state.next_in:
                raise FieldError(5, "SequenceReset may not lower MsgSeqNum", 36)
        except FieldError as e:
            self._reject(seq, "4", e)
            return
        self.state.next_in = new
        self.dirty = True
        if self.resend_until and new > self.resend_until:
            self.resend_until = 0

    # -- resend ------------------------------------------------------------------------------------
    def _resend(self, msg) -> None:
        """Answer a ResendRequest: stored application messages again (PossDupFlag=Y,
        OrigSendingTime), administrative ones gap-filled; written by a task that waits for the
        socket, while new output is held back until it is done."""
        begin = field_int(msg, 7, required=True, lo=1, hi=_MAX_SEQ)
        end = field_int(msg, 16, required=True, lo=0, hi=_MAX_SEQ)
        self._flush()
        last = self.state.next_out - 1
        end = last if end == 0 or end > last else end
        if begin > end:
            return
        if self.resending:
            # why not a second task: 200 ResendRequests would run 200 resends of the whole
            # history at once; at most one runs, and one waits (the union of what was asked)
            p = self.pending_resend
            self.pending_resend = (begin, end) if p is None else (min(p[0], begin), max(p[1], end))
            return
        self.resending = True
        self.loop.create_task(self._resend_task(begin, end))

    async def _resend_task(self, begin: int, end: int) -> None:
        srv, name = self.server, self.account.name
        try:
            pos = begin   # the first seq not yet resent or gap-filled
            rate = srv.resend_per_s
            budget, at = float(RESEND_CHUNK), self.loop.time()
            while pos <= end and not self.closing:
                # why a budget: a client looping ResendRequests over a long history would
                # otherwise take the event loop's time from every other session
                now = self.loop.time()
                budget = min(float(max(rate, RESEND_CHUNK)), budget + (now - at) * rate)
                at = now
                if budget < RESEND_CHUNK:
                    await asyncio.sleep((RESEND_CHUNK - budget) / rate)
                    continue
                budget -= RESEND_CHUNK
                data, pos = await srv.off_loop(_resend_step, self.key, pos, end, srv.comp_id,
                                               name, utc_timestamp(self.gw.now_ns()))
                if self.closing:
                    break
                if data:
                    self.writer.write(data)
                    self.last_sent = self.loop.time()
                    await self.writer.drain()
                # why: a long resend must let other sessions' acks through between chunks
                await asyncio.sleep(0)
                if pos > end and self.pending_resend is not None and not self.closing:
                    begin, end = self.pending_resend
                    self.pending_resend = None
                    pos = begin
        except (ConnectionError, OSError):
            self.closing = True
        finally:
            self.pending_resend = None
            self.resending = False
            held, self.held, self.held_bytes = self.held, [], 0
            if held and not self.writer.is_closing():
                self.writer.write(b"".join(held))
                self._check_output()


def _gap_fill(comp_id: str, name: str, first: int, next_seq: int, now: str) -> bytes:
    return build("4", comp_id, name, first, now, [(123, "Y"), (36, next_seq)], poss_dup=True,
                 orig_sending_time=now)


def _resend_step(reader, key: str, pos: int, end: int, comp_id: str, name: str,
                 now: str) -> tuple[bytes, int]:
    """Return the bytes that resend session ``key``'s messages from ``pos`` on (at most
    ``RESEND_CHUNK`` stored ones, with a SequenceReset-GapFill for each run of unstored ones
    up to ``end``) and the next seq to resend. ``reader``: a ``store.OutboundReader`` (run on
    the FIX port's read thread)."""
    rows = reader.resendable(key, pos, end, RESEND_CHUNK)
    parts = []
    for r in rows:
        if r.seq > pos:
            parts.append(_gap_fill(comp_id, name, pos, r.seq, now))
        msg_type, body, sent = body_of(r.raw)
        parts.append(build(msg_type, comp_id, name, r.seq, now, body, poss_dup=True,
                           orig_sending_time=sent))
        pos = r.seq + 1
    if len(rows) < RESEND_CHUNK and pos <= end:
        parts.append(_gap_fill(comp_id, name, pos, end + 1, now))
        pos = end + 1
    return b"".join(parts), pos
