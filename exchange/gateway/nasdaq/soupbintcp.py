"""SoupBinTCP 3.0 as NASDAQ publishes it: packet header, login, session and sequence fields.

A packet is ``Packet Length (2, big-endian; counts the type byte and the payload) | Packet Type
(1 ASCII byte) | payload``. Logical packets (SoupBinTCP 3.0, section 2):

  server -> client: '+' Debug, 'A' Login Accepted, 'J' Login Rejected, 'S' Sequenced Data,
                    'H' Server Heartbeat, 'Z' End of Session
  client -> server: '+' Debug, 'L' Login Request, 'U' Unsequenced Data, 'R' Client Heartbeat,
                    'O' Logout Request

Login Request payload (46 bytes): Username Alpha(6), Password Alpha(10) (left-justified, padded
on the right with spaces), Requested Session Alpha(10) (all spaces: the current session),
Requested Sequence Number Numeric(20) (ASCII decimal, padded on the left with spaces; 0: start
with the next message generated). Login Accepted (30 bytes): Session Alpha(10), Sequence Number
Numeric(20), both padded on the left with spaces. Login Rejected (1 byte): 'A' not authorized,
'S' session not available. Heartbeats: each side sends one after 1 s without other output; a
side silent for 15 s is gone.

Invariants: the layouts are numpy dtypes (big-endian, packed), ``itemsize`` is the payload size;
``split_packets`` never allocates a packet above its ``max_size`` (checked on the header).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from exsim.exchange.errors import ExsimError

__all__ = ["HEADER", "Packet", "LOGIN_REQUEST", "LOGIN_ACCEPTED", "LOGIN_REJECTED",
           "LoginRequest", "SoupError", "frame", "split_packets", "parse_login",
           "encode_login", "encode_login_accepted", "parse_login_accepted", "REJECT_AUTH",
           "REJECT_SESSION"]

HEADER = struct.Struct(">HB")   # packet length (type byte + payload), packet type


class Packet:
    """SoupBinTCP 3.0 packet types (one ASCII byte each)."""

    DEBUG = ord("+")
    LOGIN_ACCEPTED = ord("A")
    LOGIN_REJECTED = ord("J")
    SEQUENCED = ord("S")
    SERVER_HEARTBEAT = ord("H")
    END_OF_SESSION = ord("Z")
    LOGIN_REQUEST = ord("L")
    UNSEQUENCED = ord("U")
    CLIENT_HEARTBEAT = ord("R")
    LOGOUT_REQUEST = ord("O")


LOGIN_REQUEST = np.dtype([("username", "S6"), ("password", "S10"), ("session", "S10"),
                          ("seq", "S20")])
LOGIN_ACCEPTED = np.dtype([("session", "S10"), ("seq", "S20")])
LOGIN_REJECTED = np.dtype([("reason", "S1")])
REJECT_AUTH = b"A"      # Not Authorized: bad username or password
REJECT_SESSION = b"S"   # Session not available: the requested session is not this server's
MAX_SEQ_DIGITS = 20


class SoupError(ExsimError):
    """A SoupBinTCP packet is malformed (bad length, bad field); the connection is closed."""


class LoginRequest(NamedTuple):
    """A parsed Login Request: fields with their padding removed; ``seq`` an int."""

    username: str
    password: str
    session: str
    seq: int


def frame(packet_type: int, payload: bytes = b"") -> bytes:
    """Return one packet's bytes. Raises SoupError if the payload passes 65,534 bytes."""
    if len(payload) > 0xFFFE:
        raise SoupError(f"a payload of {len(payload)} bytes does not fit one packet")
    return HEADER.pack(len(payload) + 1, packet_type) + payload


def split_packets(buf: bytes, max_size: int) -> tuple[list[tuple[int, bytes]], bytes]:
    """Return the whole packets at the start of ``buf`` as (type, payload) pairs and the bytes
    after them (a packet not yet complete). Raises SoupError for a length of 0 or above
    ``max_size`` at the start of ``buf``; after whole packets a bad length ends the list there
    (the packets before it are handled first, the next call raises)."""
    out, pos, end = [], 0, len(buf)
    while end - pos >= 3:
        length, ptype = HEADER.unpack_from(buf, pos)
        if length == 0 or length > max_size:
            if out:
                break
            raise SoupError(f"a packet length of {length} (this port takes 1-{max_size})")
        stop = pos + 2 + length
        if stop > end:
            break
        out.append((ptype, buf[pos + 3:stop]))
        pos = stop
    return out, buf[pos:]


def _alpha(value: str, n: int, *, left_pad: bool = False) -> bytes:
    raw = value.encode("ascii")
    if len(raw) > n:
        raise SoupError(f"{value!r} is longer than {n} characters")
    return raw.rjust(n) if left_pad else raw.ljust(n)


def _numeric(value: int) -> bytes:
    if not 0 <= value < 10 ** MAX_SEQ_DIGITS:
        raise SoupError(f"sequence number {value} does not fit 20 digits")
    return str(value).encode().rjust(MAX_SEQ_DIGITS)


def encode_login(username: str, password: str, session: str = "", seq: int = 0) -> bytes:
    """Return a Login Request payload (46 bytes). Raises SoupError for a field too long."""
    return (_alpha(username, 6) + _alpha(password, 10) + _alpha(session, 10, left_pad=True)
            + _numeric(seq))


def parse_login(payload: bytes) -> LoginRequest:
    """Return the Login Request in ``payload``. Raises SoupError if it is not 46 bytes of
    printable ASCII with a decimal (or blank: 0) sequence number."""
    if len(payload) != LOGIN_REQUEST.itemsize:
        raise SoupError(f"a Login Request is {LOGIN_REQUEST.itemsize} bytes; got {len(payload)}")
    if any(b < 0x20 or b > 0x7E for b in payload):
        raise SoupError("a Login Request holds a byte that is not printable ASCII")
    text = payload.decode("ascii")
    user, pw, session, seq = text[:6], text[6:16], text[16:26], text[26:46].strip()
    if seq and not seq.isdigit():
        raise SoupError(f"the requested sequence number {seq!r} is not a decimal number")
    return LoginRequest(user.strip(), pw.strip(), session.strip(), int(seq or 0))


def encode_login_accepted(session: str, seq: int) -> bytes:
    """Return a Login Accepted payload (30 bytes): ``session``, the next sequence number."""
    return _alpha(session, 10, left_pad=True) + _numeric(seq)


def parse_login_accepted(payload: bytes) -> tuple[str, int]:
    """Return (session, next sequence number). Raises SoupError if malformed."""
    if len(payload) != LOGIN_ACCEPTED.itemsize:
        raise SoupError(f"a Login Accepted is {LOGIN_ACCEPTED.itemsize} bytes; got {len(payload)}")
    try:
        return payload[:10].decode("ascii").strip(), int(payload[10:].decode("ascii"))
    except ValueError:
        raise SoupError("a Login Accepted with a bad sequence number") from None
