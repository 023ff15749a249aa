"""An asyncio client of the binary order-entry port (OUCH-style messages over SoupBinTCP).

``await OuchClient.connect(host, port, username, password, seq=1)`` logs in and asks for the
report stream from sequence number ``seq``; ``enter`` / ``cancel`` / ``replace`` send orders;
``recv`` returns the next server message as a ``Received`` (its ``seq`` is the SoupBinTCP
sequence number, None for an unsequenced reject of the port). ``reconnect`` logs in again with
the next sequence number not yet received, so nothing is missed and nothing arrives twice.

Invariants:
- ``next_seq`` is one more than the sequence number of the last sequenced message received
  (the Login Accepted number before the first); it only moves forward.
- A background task sends a client heartbeat every ``heartbeat_s``, so an idle client is not
  timed out by the server; every read of the socket has a deadline (``idle_s``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from exsim.exchange.errors import ExsimError
from exsim.exchange.gateway import ouch
from exsim.exchange.gateway.framing import FrameError, PacketType, frame, read_frame
from exsim.exchange.schema import OrderType, Side, Tif

__all__ = ["OuchClient", "Received", "LoginRejected", "SessionClosed"]

MAX_SERVER_FRAME = 1 + max(max(lay.size for lay in ouch.SERVER.values()),
                           ouch.LOGIN_ACCEPTED.size)


class LoginRejected(ExsimError):
    """The server refused the login: ``code`` is "A" (not authorized) or "S" (no session)."""

    def __init__(self, code: str):
        super().__init__(f"login rejected ({code!r}: "
                         f"{'not authorized' if code == 'A' else 'session not available'})")
        self.code = code


class SessionClosed(ExsimError):
    """The connection ended (End of Session, a disconnect, or a timeout) with nothing queued."""


@dataclass(frozen=True)
class Received:
    """One server message: ``seq`` (None if unsequenced) and ``msg`` (ouch namedtuple)."""

    seq: int | None
    msg: tuple

    @property
    def kind(self) -> str:
        """The message's name: Accepted, Rejected, Executed, Canceled, Replaced, Triggered,
        CancelReject."""
        return type(self.msg).__name__


def _check_token(token: str, what: str = "token") -> str:
    if not isinstance(token, str) or not 1 <= len(token) <= ouch.TOKEN_LEN \
            or any(not 0x21 <= ord(c) <= 0x7E for c in token):
        raise ValueError(f"{what} must be 1-{ouch.TOKEN_LEN} printable ASCII characters without "
                         f"spaces; got {token!r}")
    return token


class OuchClient:
    """One logged-in session (module docstring). Build with ``await OuchClient.connect``."""

    def __init__(self, host: str, port: int, username: str, password: str, *,
                 session: str = "", heartbeat_s: float = 1.0, idle_s: float = 15.0,
                 timeout: float = 10.0):
        self.host, self.port = host, port
        self.username, self.password = username, password
        self.session = session
        self.heartbeat_s, self.idle_s, self.timeout = heartbeat_s, idle_s, timeout
        self.next_seq = 1
        self.ended = False     # End of Session received
        self.closed = True
        self._reader = self._writer = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []

    @classmethod
    async def connect(cls, host: str, port: int, username: str, password: str, *,
                      seq: int = 1, **options) -> "OuchClient":
        """Return a client logged in with ``seq`` as the next sequence number wanted (1: the
        whole stream; 0: only what comes from now on).

        Raises LoginRejected, SessionClosed if the server closes before answering, OSError if
        it cannot connect, asyncio.TimeoutError after ``timeout`` seconds.
        """
        client = cls(host, port, username, password, **options)
        await client.login(seq)
        return client

    async def login(self, seq: int | None = None) -> int:
        """Connect and log in; ``seq`` None resumes at ``next_seq``. Returns the sequence
        number of the next message the server will send. Raises as ``connect``."""
        await self.close()
        seq = self.next_seq if seq is None else seq
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port), self.timeout)
        self.closed, self.ended = False, False
        # messages received before a disconnect stay to be read (next_seq counted them)
        old, self._queue = self._queue, asyncio.Queue()
        while not old.empty():
            item = old.get_nowait()
            if item is not None:
                self._queue.put_nowait(item)
        self._writer.write(frame(PacketType.LOGIN_REQUEST,
                                 ouch.encode_login(self.username, self.password, self.session,
                                                   seq)))
        try:
            got = await read_frame(self._reader, max_size=MAX_SERVER_FRAME, idle_s=self.timeout)
        except FrameError as e:
            await self.close()
            raise SessionClosed(f"no login answer: {e}") from None
        if got is None:
            await self.close()
            raise SessionClosed("the server closed the connection before answering the login")
        ptype, payload = got
        if ptype == PacketType.LOGIN_REJECTED:
            await self.close()
            raise LoginRejected(payload[:1].decode("ascii", "replace"))
        if ptype != PacketType.LOGIN_ACCEPTED:
            await self.close()
            raise SessionClosed(f"unexpected packet {ptype:#04x} instead of a login answer")
        self.session, self.next_seq = ouch.parse_login_accepted(payload)
        self._tasks = [asyncio.ensure_future(self._read_loop()),
                       asyncio.ensure_future(self._heartbeat_loop())]
        return self.next_seq

    async def reconnect(self) -> int:
        """Log in again from ``next_seq`` (after a disconnect or a server restart). Returns
        the server's next sequence number. Raises as ``connect``."""
        return await self.login(None)

    async def _read_loop(self) -> None:
        # why a chunk at a time (not read_frame per packet): a timed read per packet cost more
        # than decoding it; the server sends a heartbeat at least every second, so silence
        # for idle_s still ends the session
        buf = b""
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(self._reader.read(1 << 16), self.idle_s)
                except asyncio.TimeoutError:
                    break
                if not chunk:
                    break
                packets, buf = ouch.split_packets(buf + chunk, MAX_SERVER_FRAME)
                for ptype, payload in packets:
                    if ptype == PacketType.SEQUENCED:
                        self._queue.put_nowait(Received(self.next_seq,
                                                        ouch.decode_server(payload)))
                        self.next_seq += 1
                    elif ptype == PacketType.UNSEQUENCED:
                        self._queue.put_nowait(Received(None, ouch.decode_server(payload)))
                    elif ptype == PacketType.END_OF_SESSION:
                        self.ended = True
                        return
        except (FrameError, ValueError, ConnectionError):
            pass
        finally:
            self.closed = True
            self._queue.put_nowait(None)

    async def _heartbeat_loop(self) -> None:
        try:
            while not self.closed:
                await asyncio.sleep(self.heartbeat_s)
                self._writer.write(frame(PacketType.CLIENT_HEARTBEAT))
        except (ConnectionError, RuntimeError):
            pass

    async def send(self, payload: bytes, packet_type: int = PacketType.UNSEQUENCED) -> None:
        """Send one packet as given (the order methods use it; tests send raw bytes with it).
        Raises SessionClosed if the connection is closed."""
        if self.closed or self._writer is None:
            raise SessionClosed("the session is closed")
        self._writer.write(frame(packet_type, payload))
        # why only above the high-water mark: below it drain() returns at once, and a timed
        # wait per message (a task and a timer) cost more than sending it
        transport = self._writer.transport
        if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
            try:
                await asyncio.wait_for(self._writer.drain(), self.timeout)
            except (ConnectionError, asyncio.TimeoutError) as e:
                raise SessionClosed(f"cannot send: {e!r}") from None
        elif transport.is_closing():
            raise SessionClosed("cannot send: the connection is closing")

    async def enter(self, token: str, symbol: str, side: Side, qty: int, price: int = 0, *,
                    order_type: OrderType = OrderType.LIMIT, tif: Tif = Tif.GTC,
                    display_qty: int = 0, min_qty: int = 0, stop_price: int = 0,
                    expire_ts: int = 0, post_only: bool = False) -> None:
        """Send an Enter Order. Raises ValueError for a bad token or symbol or a value that
        does not fit its field, SessionClosed if the connection is closed."""
        _check_token(token)
        if not 1 <= len(symbol) <= ouch.SYMBOL_LEN or not symbol.isascii() or " " in symbol:
            raise ValueError(f"symbol must be 1-{ouch.SYMBOL_LEN} ASCII characters; got {symbol!r}")
        await self.send(ouch.ENTER.pack(
            token=token, side=Side(side), qty=qty, symbol=symbol, price=price,
            order_type=OrderType(order_type), tif=Tif(tif), display_qty=display_qty,
            min_qty=min_qty, stop_price=stop_price, expire_ts=expire_ts, post_only=post_only))

    async def cancel(self, token: str) -> None:
        """Send a Cancel Order for the order whose current token is ``token``. Raises as
        ``enter``."""
        await self.send(ouch.CANCEL.pack(token=_check_token(token)))

    async def replace(self, token: str, new_token: str, qty: int, price: int,
                      stop_price: int = 0) -> None:
        """Send a Replace Order: ``qty`` is the new total quantity (filled + open). Raises as
        ``enter``."""
        await self.send(ouch.REPLACE.pack(token=_check_token(token),
                                          new_token=_check_token(new_token, "new_token"),
                                          qty=qty, price=price, stop_price=stop_price))

    async def recv(self, timeout: float | None = None) -> Received:
        """Return the next server message. Raises SessionClosed once the connection has
        ended and every message before it was returned, asyncio.TimeoutError after
        ``timeout`` seconds (default: the client's timeout)."""
        if not self._queue.empty():   # why: no timer for a message already here
            item = self._queue.get_nowait()
        else:
            item = await asyncio.wait_for(self._queue.get(),
                                          self.timeout if timeout is None else timeout)
        if item is None:
            self._queue.put_nowait(None)   # every later recv sees the end too
            raise SessionClosed("End of Session" if self.ended else "the connection ended")
        return item

    async def recv_until(self, predicate, timeout: float | None = None) -> list[Received]:
        """Return the messages received up to and including the first for which
        ``predicate(received)`` is true. Raises as ``recv`` (the deadline covers them all)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        out = []
        while True:
            got = await self.recv(max(0.0, deadline - loop.time()))
            out.append(got)
            if predicate(got):
                return out

    async def logout(self) -> None:
        """Send a Logout Request and close. Raises nothing if the connection is gone."""
        try:
            await self.send(b"", PacketType.LOGOUT_REQUEST)
        except SessionClosed:
            pass
        await self.close()

    async def close(self) -> None:
        """Close the connection and stop the tasks (idempotent). Raises nothing."""
        self.closed = True
        # why close before cancel: the read loop then ends on its own at the end of stream (a
        # cancel alone can be lost inside asyncio.wait_for on Python 3.11)
        if self._writer is not None:
            self._writer.close()
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        self._tasks = []
        if self._writer is not None:
            try:
                await asyncio.wait_for(self._writer.wait_closed(), 1.0)
            except (ConnectionError, asyncio.TimeoutError, OSError):
                pass
            self._writer = None
