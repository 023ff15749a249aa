"""FIX 4.4 tag=value on a byte stream: framing by BodyLength, checksum, parsing and encoding.

``simplefix`` splits fields and encodes messages; this module adds what a session needs before
trusting a message, which simplefix does not check: the frame is cut by BodyLength (9), the
trailer must be ``10=NNN<SOH>`` exactly where BodyLength says, and the checksum must match.

Invariants:
- ``Framer`` never holds more than one partial message plus one read chunk: BodyLength is checked
  against ``max_size`` before the body is waited for, so a hostile length is refused after its
  digits, not after it has been buffered.
- A frame that fails only the trailer or checksum is *garbled* (FIX: ignored, not counted as
  received); the framer drops one byte and scans for the next ``8=FIX.4.4<SOH>9=``. A wrong
  BeginString or an unusable BodyLength is *fatal* (the session logs out and disconnects).
- Timestamps on the wire are UTC ``YYYYMMDD-HH:MM:SS.sss`` (FIX UTCTimestamp); inside exsim
  they are epoch nanoseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import simplefix
from simplefix import errors as fix_errors

from exsim.exchange.errors import ExsimError

__all__ = ["BEGIN_STRING", "Framer", "Garbled", "FatalFrame", "FieldError", "parse_frame",
           "build", "utc_timestamp", "parse_utc_timestamp", "field", "field_str", "field_int",
           "SOH"]

BEGIN_STRING = "FIX.4.4"
SOH = b"\x01"
PREFIX = b"8=FIX.4.4\x019="
_TRAILER = re.compile(rb"10=(\d{3})\x01")
_MAX_LENGTH_DIGITS = 7
_SEQ = re.compile(rb"\x0134=(\d{1,18})\x01")


class FatalFrame(ExsimError):
    """The byte stream cannot be framed any more (wrong BeginString, unusable BodyLength,
    message larger than the limit): the session must log out and disconnect."""


@dataclass(frozen=True)
class Garbled:
    """Bytes the framer discarded (garbage between messages, a bad trailer or checksum)."""

    reason: str
    size: int


class FieldError(ExsimError):
    """A framed message breaks a session-level rule: the answer is a session Reject (35=3).

    ``reason`` is the SessionRejectReason (373), ``tag`` the RefTagID (371) or 0.
    """

    def __init__(self, reason: int, text: str, tag: int = 0):
        super().__init__(text)
        self.reason, self.text, self.tag = reason, text, tag


class Framer:
    """Cuts FIX messages out of a byte stream (module docstring). Feed bytes with ``feed``,
    take results with ``next``."""

    def __init__(self, max_size: int):
        self.max_size = max_size
        self.buf = bytearray()

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        self.buf += data

    def next(self) -> bytes | Garbled | None:
        """Return the next complete message (its bytes, checksum verified), a Garbled record
        for discarded bytes, or None if more bytes are needed.

        Raises FatalFrame when the stream cannot be framed (module docstring).
        """
        buf = self.buf
        if not buf:
            return None
        if not buf.startswith(PREFIX):
            if len(buf) < len(PREFIX) and PREFIX.startswith(bytes(buf)):
                return None
            if buf.startswith(b"8="):
                end = buf.find(SOH)
                if end != -1 and buf[2:end] != BEGIN_STRING.encode():
                    raise FatalFrame("BeginString must be FIX.4.4")
                if end == -1 and len(buf) > 16:
                    raise FatalFrame("BeginString must be FIX.4.4")
                if end == -1:
                    return None
            i = buf.find(PREFIX, 1)
            if i == -1:
                # keep a tail that could be the start of the next message
                i = max(1, len(buf) - len(PREFIX) + 1)
            del buf[:i]
            return Garbled("bytes before BeginString", i)
        start = len(PREFIX)
        soh = buf.find(SOH, start, start + _MAX_LENGTH_DIGITS + 1)
        if soh == -1:
            if len(buf) - start > _MAX_LENGTH_DIGITS:
                raise FatalFrame("BodyLength (9) is not a number")
            return None
        digits = bytes(buf[start:soh])
        if not digits.isdigit():
            raise FatalFrame("BodyLength (9) is not a number")
        length = int(digits)
        if length == 0:
            raise FatalFrame("BodyLength (9) is 0")
        if length > self.max_size:
            raise FatalFrame(f"message of {length} bytes; the limit is {self.max_size}")
        body_end = soh + 1 + length
        total = body_end + 7
        if len(buf) < total:
            return None
        m = _TRAILER.fullmatch(buf, body_end, total)
        if m is None or sum(buf[:body_end]) % 256 != int(m.group(1)):
            del buf[:1]
            return Garbled("bad trailer or checksum" if m is None else "checksum mismatch", 1)
        out = bytes(buf[:total])
        del buf[:total]
        return out


def seq_of(frame: bytes) -> int | None:
    """Return the MsgSeqNum (34) found in a framed message, or None if it has none."""
    m = _SEQ.search(frame)
    return int(m.group(1)) if m else None


_RAW_LEN_TAGS = frozenset(simplefix.parser.RAW_LEN_TAGS)


def parse_frame(frame: bytes) -> simplefix.FixMessage:
    """Return the parsed message of one verified frame.

    Raises FieldError if a field is not ``tag=value`` with a numeric tag and a non-empty value
    (373=0/4), the checksum field appears inside the body (373=13), or 8, 9, 35 are not the
    first three fields (373=14).

    Why two paths: simplefix's parser walks the bytes one at a time in Python (~110 us a
    message); a message of plain ``tag=value`` fields is split here at C speed into the same
    FixMessage, and anything else (a raw data field, an empty value, a tag int() refuses, a
    field without ``=``, a checksum field before the end) goes to simplefix, so every answer
    is simplefix's (tests/gateway_tests/test_perf_fix_codec.py compares the two).
    """
    msg = _split_plain(frame)
    return msg if msg is not None else _parse_simplefix(frame)


def _split_plain(frame: bytes) -> simplefix.FixMessage | None:
    """Return the FixMessage simplefix would make of ``frame`` if it is plain ``tag=value``
    fields, each ended by SOH, the last and only the last one tag 10; else None."""
    fields = frame.split(b"\x01")
    if fields.pop() != b"":
        return None
    pairs = []
    try:
        for f in fields:
            tag, eq, value = f.partition(b"=")
            t = int(tag)
            if not eq or not value or t in _RAW_LEN_TAGS or t == 10:
                if t == 10 and eq and value and len(pairs) == len(fields) - 1:
                    pairs.append((b"10", value))
                    break
                return None
            pairs.append((str(t).encode("ascii"), value))
        else:
            return None   # no checksum field
    except ValueError:
        return None
    if pairs[0][0] != b"8":
        return None   # simplefix drops the fields before a BeginString
    m = simplefix.FixMessage()
    m.pairs = pairs
    for t, v in pairs:   # why every one: simplefix keeps the last 8 and the last 35
        if t == b"8":
            m.begin_string = v
        elif t == b"35":
            m.message_type = v
    return _checked(m)


def _parse_simplefix(frame: bytes) -> simplefix.FixMessage:
    """``parse_frame`` by simplefix's parser (the reference, and the path for odd input)."""
    parser = simplefix.FixParser()
    parser.append_buffer(frame)
    try:
        msg = parser.get_message()
    except fix_errors.EmptyValueError:
        raise FieldError(4, "tag specified without a value") from None
    except fix_errors.RawLengthNotNumberError:
        raise FieldError(6, "raw data length is not a number") from None
    except fix_errors.ParsingError:
        raise FieldError(0, "invalid tag number") from None
    if msg is None or parser.get_buffer():
        raise FieldError(13, "tag appears more than once", 10)
    return _checked(msg)


def _checked(msg: simplefix.FixMessage) -> simplefix.FixMessage:
    tags = [int(t) for t, _ in msg.pairs[:3]]
    if tags != [8, 9, 35]:
        raise FieldError(14, "BeginString, BodyLength, MsgType must be the first three fields",
                         35 if len(tags) < 3 or tags[2] != 35 else 9)
    return msg


def field(msg: simplefix.FixMessage, tag: int) -> bytes | None:
    """Return the raw value of ``tag`` in ``msg`` or None.

    Raises FieldError (373=13) if the tag appears more than once.
    """
    value = msg.get(tag)
    if value is not None and msg.get(tag, 2) is not None:
        raise FieldError(13, "tag appears more than once", tag)
    return value


def field_str(msg, tag: int, *, required: bool = False, max_len: int = 64) -> str | None:
    """Return the value of ``tag`` as printable ASCII text, or None when absent.

    Raises FieldError: 373=1 if required and missing, 373=6 if not printable ASCII,
    373=5 if longer than ``max_len``.
    """
    raw = field(msg, tag)
    if raw is None:
        if required:
            raise FieldError(1, f"required tag {tag} missing", tag)
        return None
    if not all(0x20 <= b < 0x7F for b in raw):
        raise FieldError(6, f"tag {tag} is not printable ASCII", tag)
    if len(raw) > max_len:
        raise FieldError(5, f"tag {tag} is longer than {max_len} characters", tag)
    return raw.decode("ascii")


def field_int(msg, tag: int, *, required: bool = False, lo: int = 0,
              hi: int = (1 << 63) - 1) -> int | None:
    """Return the value of ``tag`` as an int in [lo, hi], or None when absent.

    Raises FieldError: 373=1 if required and missing, 373=6 if not digits, 373=5 out of range.
    """
    raw = field(msg, tag)
    if raw is None:
        if required:
            raise FieldError(1, f"required tag {tag} missing", tag)
        return None
    if not (raw.isdigit() and len(raw) <= 19):
        raise FieldError(6, f"tag {tag} is not a non-negative integer", tag)
    value = int(raw)
    if not lo <= value <= hi:
        raise FieldError(5, f"tag {tag} is out of range [{lo}, {hi}]", tag)
    return value


_TS = re.compile(rb"(\d{4})(\d{2})(\d{2})-(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")


_LAST_STAMP = (None, "")   # (epoch ms, its text): every message of a millisecond has one


def utc_timestamp(ns: int) -> str:
    """Return FIX UTCTimestamp text (millisecond precision) of epoch nanoseconds ``ns``."""
    global _LAST_STAMP
    ms = int(ns) // 1_000_000
    last_ms, text = _LAST_STAMP
    if ms == last_ms:
        return text
    import datetime as _dt
    secs, rem = divmod(ms, 1000)
    t = _dt.datetime.fromtimestamp(secs, _dt.timezone.utc)
    text = t.strftime("%Y%m%d-%H:%M:%S") + f".{rem:03d}"
    _LAST_STAMP = (ms, text)
    return text


def parse_utc_timestamp(raw: bytes, tag: int) -> int:
    """Return epoch nanoseconds of a FIX UTCTimestamp value.

    Raises FieldError (373=6) if it is not ``YYYYMMDD-HH:MM:SS[.f{1,9}]`` or names no date.
    """
    import calendar
    m = _TS.fullmatch(raw)
    if m is None:
        raise FieldError(6, f"tag {tag} is not a UTCTimestamp", tag)
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or b""
    if not (1970 <= y <= 2200 and 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]
            and h < 24 and mi < 60 and s < 61):
        raise FieldError(6, f"tag {tag} is not a valid UTCTimestamp", tag)
    secs = calendar.timegm((y, mo, d, h, mi, s))
    return secs * 1_000_000_000 + int(frac.ljust(9, b"0") or b"0")


def build(msg_type: str, sender: str, target: str, seq: int, sending_time: str,
          body: list[tuple[int, object]], *, poss_dup: bool = False,
          orig_sending_time: str | None = None) -> bytes:
    """Return the encoded bytes of one message: what simplefix's ``FixMessage.encode`` writes
    for it (BodyLength and CheckSum computed).

    ``body``: (tag, value) pairs after the standard header; values are str, int or bytes.
    Why two paths: simplefix builds the message by repeated bytes concatenation (~70 us); when
    every value is a str, int or bytes and every body tag an int other than 8, 9, 10, 35, it is
    joined here at once (each value written as simplefix's fix_val writes it), and otherwise
    simplefix writes it (tests/gateway_tests/test_perf_fix_codec.py compares the two).
    """
    parts = [b"35=", msg_type, b"\x0149=", sender, b"\x0156=", target, b"\x0134=", seq]
    if poss_dup:
        parts += (b"\x0143=", "Y")
    parts += (b"\x0152=", sending_time)
    if orig_sending_time is not None:
        parts += (b"\x01122=", orig_sending_time)
    for tag, value in body:
        parts += (b"\x01", tag, b"=", value)
    try:
        for i in range(1, len(parts), 2):
            parts[i] = _PLAIN_VALUE[type(parts[i])](parts[i])
        for tag, _ in body:
            if type(tag) is not int or tag in (8, 9, 10, 35):
                raise TypeError("not a plain body tag")
    except (KeyError, TypeError):
        return _build_simplefix(msg_type, sender, target, seq, sending_time, body,
                                poss_dup=poss_dup, orig_sending_time=orig_sending_time)
    parts.append(b"\x01")
    out = b"".join(parts)
    out = b"8=FIX.4.4\x019=" + str(len(out)).encode() + b"\x01" + out
    return out + b"10=%03d\x01" % (sum(out) % 256)


# how a value in ``build``'s join is written: as simplefix's fix_val / fix_tag write it
_PLAIN_VALUE = {bytes: bytes, str: lambda v: v.encode("utf-8"),
                int: lambda v: str(v).encode("ascii")}


def _build_simplefix(msg_type: str, sender: str, target: str, seq: int, sending_time: str,
                     body: list[tuple[int, object]], *, poss_dup: bool = False,
                     orig_sending_time: str | None = None) -> bytes:
    """``build`` by simplefix (the reference, and the path for values of other kinds)."""
    m = simplefix.FixMessage()
    m.append_pair(8, BEGIN_STRING, header=True)
    m.append_pair(35, msg_type, header=True)
    m.append_pair(49, sender, header=True)
    m.append_pair(56, target, header=True)
    m.append_pair(34, seq, header=True)
    if poss_dup:
        m.append_pair(43, "Y", header=True)
    m.append_pair(52, sending_time, header=True)
    if orig_sending_time is not None:
        m.append_pair(122, orig_sending_time, header=True)
    for tag, value in body:
        m.append_pair(tag, value)
    return m.encode()


_HEADER_TAGS = {8, 9, 35, 49, 56, 34, 43, 52, 122, 97, 10}


def body_of(raw: bytes) -> tuple[str, list[tuple[int, bytes]], str]:
    """Return (MsgType, body pairs, SendingTime) of a message ``build`` encoded: what a resend
    needs to send the same content again."""
    msg = parse_frame(raw)
    body = [(int(t), v) for t, v in msg.pairs if int(t) not in _HEADER_TAGS]
    return msg.message_type.decode(), body, (msg.get(52) or b"").decode()
