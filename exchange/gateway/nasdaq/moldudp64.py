"""MoldUDP64 (NASDAQ, "MoldUDP64 Protocol Specification" 1.00) packets.

Downstream packet: Session Alpha(10) | Sequence Number u64 (of the first message) | Message
Count u16 | Message Blocks (Message Length u16, Message Data). Message Count 0 is a Heartbeat
(Sequence Number: the next one to be sent), 0xFFFF is End of Session. Request packet (to the
re-request server): Session(10) | Sequence Number u64 | Requested Message Count u16; the
answer is a downstream packet unicast to the requester.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["HEADER", "REQUEST", "HEARTBEAT", "END_OF_SESSION", "packets", "heartbeat",
           "end_of_session", "parse_request", "Request", "MAX_PAYLOAD"]

HEADER = struct.Struct(">10sQH")
REQUEST = struct.Struct(">10sQH")
HEARTBEAT = 0
END_OF_SESSION = 0xFFFF
MAX_PAYLOAD = 1400   # bytes of a downstream packet: one Ethernet frame with IP/UDP headers


class Request(NamedTuple):
    """A re-request: ``count`` messages from sequence number ``seq`` of ``session``."""

    session: str
    seq: int
    count: int


def _session(name: str) -> bytes:
    raw = name.encode("ascii")
    if len(raw) > 10:
        raise ValueError(f"a MoldUDP64 session is 10 characters; got {name!r}")
    return raw.ljust(10)


def packets(session: str, first_seq: int, msgs: list[bytes],
            max_payload: int = MAX_PAYLOAD) -> list[bytes]:
    """Return downstream packets carrying ``msgs`` (numbered from ``first_seq``), each at most
    ``max_payload`` bytes (a message larger than that gets a packet of its own)."""
    name = _session(session)
    out, block, size, seq = [], [], HEADER.size, first_seq
    for m in msgs:
        if block and size + 2 + len(m) > max_payload:
            out.append(HEADER.pack(name, seq, len(block)) + b"".join(block))
            seq += len(block)
            block, size = [], HEADER.size
        block.append(struct.pack(">H", len(m)) + m)
        size += 2 + len(m)
    if block:
        out.append(HEADER.pack(name, seq, len(block)) + b"".join(block))
    return out


def heartbeat(session: str, next_seq: int) -> bytes:
    """Return a Heartbeat packet (Message Count 0)."""
    return HEADER.pack(_session(session), next_seq, HEARTBEAT)


def end_of_session(session: str, next_seq: int) -> bytes:
    """Return an End of Session packet (Message Count 0xFFFF)."""
    return HEADER.pack(_session(session), next_seq, END_OF_SESSION)


def parse_request(data: bytes) -> Request | None:
    """Return the Request in a datagram, or None if it is not one (wrong size, bad session)."""
    if len(data) != REQUEST.size:
        return None
    name, seq, count = REQUEST.unpack(data)
    try:
        return Request(name.decode("ascii").rstrip(" "), seq, count)
    except UnicodeDecodeError:
        return None
