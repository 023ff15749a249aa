"""An independent reading of NASDAQ's published specs, for the tests: plain ``struct``, no exsim
import. SoupBinTCP 3.0 packets, OUCH 5.0 (April 2023) messages, TotalView-ITCH 5.0 messages and
MoldUDP64 packets, with the byte offsets of the specs. A client built on these is what a trading
system written for NASDAQ would send and expect."""

from __future__ import annotations

import asyncio
import collections
import struct

# -- SoupBinTCP 3.0 -----------------------------------------------------------------------------


def soup(ptype: bytes, payload: bytes = b"") -> bytes:
    """One SoupBinTCP packet: length (2, counts type + payload), type, payload."""
    return struct.pack(">H", len(payload) + 1) + ptype + payload


def soup_login(user: str, password: str, session: str = "", seq: int = 1) -> bytes:
    """Login Request 'L': Username(6) Password(10) right-padded, Requested Session(10) and
    Requested Sequence Number(20) left-padded with spaces."""
    return soup(b"L", user.encode().ljust(6) + password.encode().ljust(10)
                + session.encode().rjust(10) + str(seq).encode().rjust(20))


def split(buf: bytes):
    """Return ([(type byte, payload)], rest) of whole SoupBinTCP packets in ``buf``."""
    out, pos = [], 0
    while len(buf) - pos >= 2:
        (n,) = struct.unpack_from(">H", buf, pos)
        if len(buf) - pos - 2 < n:
            break
        out.append((buf[pos + 2:pos + 3], buf[pos + 3:pos + 2 + n]))
        pos += 2 + n
    return out, buf[pos:]


# -- OUCH 5.0 ---------------------------------------------------------------------------------
# section 2.1 Enter Order: Type O, UserRefNum u32, Side, Quantity u32, Symbol(8), Price u64,
# TIF, Display, Capacity, ISE, CrossType, ClOrdID(14), Appendage Length u16 = 47 bytes
ENTER = struct.Struct(">cIcI8sQccccc14sH")
REPLACE = struct.Struct(">cIIIQccc14sH")    # 2.2: 40 bytes
CANCEL = struct.Struct(">cII")              # 2.3: 9 bytes
OUT = {   # section 3: outbound fixed parts (type byte first)
    b"S": (struct.Struct(">cQc"), ("type", "ts", "event")),
    b"A": (struct.Struct(">cQIcI8sQccQcccc14sH"),
           ("type", "ts", "user_ref", "side", "qty", "symbol", "price", "tif", "display",
            "order_ref", "capacity", "ise", "cross", "state", "clordid", "app_len")),
    b"U": (struct.Struct(">cQIIcI8sQccQcccc14sH"),
           ("type", "ts", "orig_ref", "user_ref", "side", "qty", "symbol", "price", "tif",
            "display", "order_ref", "capacity", "ise", "cross", "state", "clordid", "app_len")),
    b"C": (struct.Struct(">cQIIc"), ("type", "ts", "user_ref", "qty", "reason")),
    b"E": (struct.Struct(">cQIIQcQH"),
           ("type", "ts", "user_ref", "qty", "price", "liquidity", "match", "app_len")),
    b"J": (struct.Struct(">cQIH14s"), ("type", "ts", "user_ref", "reason", "clordid")),
    b"I": (struct.Struct(">cQI"), ("type", "ts", "user_ref")),
    b"R": (struct.Struct(">cQIcH"), ("type", "ts", "user_ref", "reason", "app_len")),
    b"M": (struct.Struct(">cQIcI"), ("type", "ts", "user_ref", "side", "qty")),   # 3.12
}
MARKET = 0x7FFFFFFF


def tlv(tag: int, value: bytes) -> bytes:
    """One TagValue: Length (tag + value), OptionTag, value (section 1.2)."""
    return bytes((len(value) + 1, tag)) + value


def enter(ref, side, qty, symbol, price, tif=b"0", display=b"Y", clordid=b"", app=b""):
    """Return an Enter Order message."""
    return ENTER.pack(b"O", ref, side, qty, symbol.encode().ljust(8), price, tif, display,
                      b"A", b"N", b"N", clordid.ljust(14), len(app)) + app


def replace(orig, ref, qty, price, tif=b"0", clordid=b"", app=b""):
    """Return a Replace Order Request."""
    return REPLACE.pack(b"U", orig, ref, qty, price, tif, b"Y", b"N", clordid.ljust(14),
                        len(app)) + app


def modify(ref, side, qty):
    """Return a Modify Order Request (2.4): Type M, UserRefNum, Side, Quantity."""
    return struct.pack(">cIcI", b"M", ref, side, qty)


def cancel(ref, qty=0):
    """Return a Cancel Order Request (Quantity: the new intended size; 0 cancels all)."""
    return CANCEL.pack(b"X", ref, qty)


def decode_ouch(msg: bytes) -> dict:
    """Decode one outbound OUCH 5.0 message; assert its length is the spec's."""
    st, names = OUT[msg[:1]]
    d = dict(zip(names, st.unpack_from(msg)))
    app = d.get("app_len", 0)
    assert len(msg) == st.size + app, (msg[:1], len(msg), st.size, app)
    d["appendage"] = msg[st.size:]
    d["raw"] = msg
    return d


class OuchClient:
    """A SoupBinTCP 3.0 + OUCH 5.0 client: login, send, collect sequenced messages."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.buf = b""
        self.queue = collections.deque()   # whole packets not yet taken
        self.msgs: list[dict] = []      # decoded sequenced messages, in order
        self.other: list[tuple] = []    # (type, payload) of every other packet
        self.next_seq = 0
        self.session = ""

    @classmethod
    async def login(cls, port, user, password, *, session="", seq=1):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        c = cls(r, w)
        w.write(soup_login(user, password, session, seq))
        await w.drain()
        t, p = await c.packet(5)
        if t == b"J":
            c.close()
            raise PermissionError(p.decode())
        assert t == b"A" and len(p) == 30, (t, p)
        c.session, c.next_seq = p[:10].decode().strip(), int(p[10:].decode())
        return c

    async def packet(self, timeout):
        """Return the next (type, payload); raise ConnectionError at the end of the stream."""
        while not self.queue:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                raise ConnectionError("closed")
            pk, self.buf = split(self.buf + data)
            self.queue.extend(pk)
        return self.queue.popleft()

    def send(self, *messages):
        self.writer.write(b"".join(soup(b"U", m) for m in messages))

    def heartbeat(self):
        self.writer.write(soup(b"R"))

    async def until(self, pred, timeout=10.0):
        """Read packets until ``pred(self)`` holds; return the sequenced messages."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not pred(self):
            t, p = await self.packet(max(end - loop.time(), 0.01))
            if t == b"S":
                self.msgs.append(decode_ouch(p))
                self.next_seq += 1
            else:
                self.other.append((t, p))
        return self.msgs

    def close(self):
        self.writer.close()


# -- TotalView-ITCH 5.0 -------------------------------------------------------------------------
# every message: Type, Stock Locate u16, Tracking Number u16, Timestamp 6 bytes (ns since
# midnight), then its body (section 1.3 / 4)
ITCH = {
    b"S": (">c", ("event",)),
    b"R": (">8sccIcc2scccccIc", ("stock", "category", "status", "round_lot", "round_only",
                                "klass", "subtype", "auth", "ssti", "ipo", "luld", "etp",
                                "leverage", "inverse")),
    b"H": (">8scc4s", ("stock", "state", "reserved", "reason")),
    b"A": (">QcI8sI", ("ref", "side", "shares", "stock", "price")),
    b"F": (">QcI8sI4s", ("ref", "side", "shares", "stock", "price", "mpid")),
    b"E": (">QIQ", ("ref", "shares", "match")),
    b"C": (">QIQcI", ("ref", "shares", "match", "printable", "price")),
    b"X": (">QI", ("ref", "shares")),
    b"D": (">Q", ("ref",)),
    b"U": (">QQII", ("ref", "new_ref", "shares", "price")),
    b"P": (">QcI8sIQ", ("ref", "side", "shares", "stock", "price", "match")),
    b"Q": (">Q8sIQc", ("shares", "stock", "price", "match", "cross")),
    b"I": (">QQc8sIIIcc", ("paired", "imbalance", "direction", "stock", "far", "near",
                           "reference", "cross", "variation")),
}
ITCH_SIZES = {b"S": 12, b"R": 39, b"H": 25, b"A": 36, b"F": 40, b"E": 31, b"C": 36, b"X": 23,
              b"D": 19, b"U": 35, b"P": 44, b"Q": 40, b"I": 50}


def decode_itch(msg: bytes) -> dict:
    """Decode one ITCH 5.0 message; assert its length is the spec's."""
    t = msg[:1]
    assert t in ITCH, t
    assert len(msg) == ITCH_SIZES[t], (t, len(msg))
    locate, tracking = struct.unpack_from(">HH", msg, 1)
    ts = int.from_bytes(msg[5:11], "big")
    fmt, names = ITCH[t]
    d = dict(zip(names, struct.unpack_from(fmt, msg, 11)))
    d.update(type=t, locate=locate, tracking=tracking, ts=ts)
    return d


class ItchBook:
    """Order books by stock locate, built only from ITCH 5.0 messages."""

    def __init__(self):
        self.orders = {}      # ref -> [locate, side, price, shares]
        self.order_seq = {}   # ref -> arrival counter (priority within a level)
        self.n = 0
        self.stocks = {}      # locate -> stock name

    def apply(self, m: dict) -> None:
        t = m["type"]
        if t == b"R":
            self.stocks[m["locate"]] = m["stock"].decode().strip()
        elif t in (b"A", b"F"):
            assert m["ref"] not in self.orders
            self.orders[m["ref"]] = [m["locate"], m["side"], m["price"], m["shares"]]
            self.n += 1
            self.order_seq[m["ref"]] = self.n
        elif t in (b"E", b"C", b"X"):
            o = self.orders[m["ref"]]
            assert 0 < m["shares"] <= o[3]
            o[3] -= m["shares"]
            if o[3] == 0:
                del self.orders[m["ref"]]
        elif t == b"D":
            del self.orders[m["ref"]]
        elif t == b"U":
            o = self.orders.pop(m["ref"])
            assert m["new_ref"] not in self.orders
            self.orders[m["new_ref"]] = [o[0], o[1], m["price"], m["shares"]]
            self.n += 1
            self.order_seq[m["new_ref"]] = self.n

    def rows(self, locate):
        """(side, price, shares) of the stock's orders: bids best first, then asks, FIFO."""
        mine = [(r, o) for r, o in self.orders.items() if o[0] == locate]
        bids = sorted((o for o in mine if o[1][1] == b"B"),
                      key=lambda x: (-x[1][2], self.order_seq[x[0]]))
        asks = sorted((o for o in mine if o[1][1] == b"S"),
                      key=lambda x: (x[1][2], self.order_seq[x[0]]))
        return [(o[1], o[2], o[3]) for _, o in bids + asks]   # side is b"B" / b"S"


# -- MoldUDP64 -------------------------------------------------------------------------------
def mold_decode(packet: bytes):
    """Return (session, sequence number, count, [messages]) of a downstream packet."""
    session, seq, count = struct.unpack_from(">10sQH", packet)
    msgs, pos = [], 20
    n = 0 if count in (0, 0xFFFF) else count
    for _ in range(n):
        (ln,) = struct.unpack_from(">H", packet, pos)
        msgs.append(packet[pos + 2:pos + 2 + ln])
        pos += 2 + ln
    assert pos == len(packet), "trailing bytes in a MoldUDP64 packet"
    return session.decode().rstrip(" "), seq, count, msgs


def mold_request(session: str, seq: int, count: int) -> bytes:
    """A MoldUDP64 request packet: Session(10), Sequence Number u64, Requested Message Count."""
    return struct.pack(">10sQH", session.encode().ljust(10), seq, count)
