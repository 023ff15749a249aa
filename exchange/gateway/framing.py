"""SoupBinTCP-style framing shared by the binary order-entry port and the market-data feed.

A frame on the wire is ``length (u16 big-endian) | type (1 byte) | payload`` where ``length``
counts the type byte and the payload (SoupBinTCP 3.0's packet layout). The packet types used by
both ports are below; the payloads of the sequenced data packets are the port's own messages
(OUCH-style orders and reports, ITCH-style market data).

Invariants:
- A reader never allocates more than ``max_size`` bytes for a frame: the length is checked
  before the payload is read, so a hostile 65,535-byte length on a port with a 1 KiB limit is
  refused after 2 bytes.
- Every read has a deadline (``idle_s``): a client that stops sending mid-frame or sends
  nothing is timed out (FrameError), never waited on forever.
"""

from __future__ import annotations

import asyncio
import struct

from exsim.exchange.errors import ExsimError

__all__ = ["FrameError", "frame", "read_frame", "PacketType", "HEADER"]

HEADER = struct.Struct(">HB")   # length (type byte + payload), packet type


class PacketType:
    """SoupBinTCP packet types (one ASCII byte each)."""

    DEBUG = ord("+")
    LOGIN_ACCEPTED = ord("A")
    LOGIN_REJECTED = ord("J")
    SEQUENCED = ord("S")          # server -> client, numbered implicitly from the login's seq
    UNSEQUENCED = ord("U")        # client -> server (orders), or unsequenced server replies
    SERVER_HEARTBEAT = ord("H")
    END_OF_SESSION = ord("Z")
    LOGIN_REQUEST = ord("L")
    CLIENT_HEARTBEAT = ord("R")
    LOGOUT_REQUEST = ord("O")


class FrameError(ExsimError):
    """A frame was malformed, too large, or did not arrive in time; the connection is closed."""


def frame(packet_type: int, payload: bytes = b"") -> bytes:
    """Return the bytes of one frame. Raises FrameError if the payload exceeds 65,534 bytes."""
    if len(payload) > 0xFFFE:
        raise FrameError(f"payload of {len(payload)} bytes does not fit one frame (65534 max)")
    return HEADER.pack(len(payload) + 1, packet_type) + payload


async def read_frame(reader: asyncio.StreamReader, *, max_size: int,
                     idle_s: float) -> tuple[int, bytes] | None:
    """Return (packet type, payload) of the next frame, or None at a clean end of stream
    (the peer closed between frames).

    Raises FrameError if nothing arrives within ``idle_s`` seconds, the stream ends inside a
    frame, the length is 0, or the frame is larger than ``max_size`` bytes (checked before
    reading the payload).
    """
    try:
        head = await asyncio.wait_for(reader.readexactly(HEADER.size), idle_s)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError("the connection ended inside a frame header") from None
    except asyncio.TimeoutError:
        raise FrameError(f"nothing received for {idle_s:g} s") from None
    length, ptype = HEADER.unpack(head)
    if length == 0:
        raise FrameError("a frame of length 0 (it must count at least its type byte)")
    if length > max_size:
        raise FrameError(f"a frame of {length} bytes; this port's limit is {max_size}")
    try:
        payload = await asyncio.wait_for(reader.readexactly(length - 1), idle_s)
    except asyncio.IncompleteReadError:
        raise FrameError("the connection ended inside a frame") from None
    except asyncio.TimeoutError:
        raise FrameError(f"a frame was not completed within {idle_s:g} s") from None
    return ptype, payload
