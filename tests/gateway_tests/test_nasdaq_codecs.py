"""Round trips of the NASDAQ codecs against the independent spec reading (nasdaq_spec): what a
spec client encodes, exsim decodes to the same fields, and every report exsim encodes decodes
with the spec's length and values; SoupBinTCP packets survive any split of the byte stream.
Small hypothesis budgets: these are fast pure functions."""

from __future__ import annotations

import struct

from hypothesis import given, settings, strategies as st

from nasdaq_spec import decode_ouch, enter, soup, tlv

from exsim.exchange.gateway.nasdaq import ouch50, soupbintcp
from exsim.exchange.gateway.reports import Report

alpha = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ", max_size=14).map(
    lambda s: s.rstrip().encode())


@settings(max_examples=60, deadline=None)
@given(ref=st.integers(1, 2**32 - 1), side=st.sampled_from([b"B", b"S", b"T", b"E"]),
       qty=st.integers(0, 2**32 - 1), price=st.integers(0, 2**63), clordid=alpha,
       max_floor=st.none() | st.integers(0, 2**32 - 1))
def test_enter_order_decodes_to_what_the_spec_client_encoded(ref, side, qty, price, clordid,
                                                             max_floor):
    app = b"" if max_floor is None else tlv(5, struct.pack(">I", max_floor))
    (msg,) = ouch50.decode([enter(ref, side, qty, "JPM", price, clordid=clordid, app=app)])
    assert (msg.type, msg.user_ref, msg.side, msg.qty, msg.symbol, msg.price) == (
        b"O", ref, side, qty, "JPM", price)
    assert msg.clordid.rstrip(b" ") == clordid
    assert (msg.options or {}).get(5) == (None if max_floor is None
                                          else struct.pack(">I", max_floor))


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=80))
def test_any_bytes_decode_to_a_message_or_a_reason(data):
    (msg,) = ouch50.decode([data])
    assert isinstance(msg, (ouch50.Order, ouch50.Malformed))


reports = st.builds(
    lambda kind, status, ref, side, qty, cum, price, last, reason, ts: Report(
        stream="ouch50:a", rseq=1, seq=3, ts=ts, exec=kind, status=status, order_id=ref,
        client_order_id=str(ref), orig_client_order_id=str(max(ref - 1, 1)), account="a",
        symbol="JPM", side=side, order_type=0, tif=0, price=price, stop_price=0,
        qty=qty + cum, last_px=price, last_qty=last, trade_id=ref, cum_qty=cum, leaves_qty=qty,
        reason=reason),
    st.sampled_from(["new", "replaced", "trade", "canceled", "expired", "rejected",
                     "replace_rejected", "cancel_rejected", "triggered"]),
    st.sampled_from(["new", "partially_filled", "filled", "canceled", "rejected"]),
    st.integers(1, 2**32 - 1), st.integers(0, 1), st.integers(0, 999_999),
    st.integers(0, 999_999), st.integers(1, 10**8), st.integers(1, 999_999),
    st.integers(0, 127), st.integers(0, 2**62))


@settings(max_examples=80, deadline=None)
@given(r=reports)
def test_every_report_encodes_to_a_spec_message(r):
    enc = ouch50.Encoder({"JPM": ouch50.PriceMap("0.01")}, lambda a, n: b"ID")
    d = decode_ouch(enc.one(r))
    assert d["ts"] == r.ts % (86_400 * 10**9)
    assert d["user_ref"] == int(r.client_order_id)
    if r.exec == "trade":
        assert (d["type"], d["qty"], d["price"]) == (b"E", r.last_qty, r.last_px * 100)
    elif r.exec in ("canceled", "expired"):
        assert (d["type"], d["qty"]) == (b"C", r.qty - r.cum_qty)
    elif r.exec == "new":
        assert (d["type"], d["price"], d["clordid"]) == (b"A", r.price * 100, b"ID".ljust(14))


@settings(max_examples=40, deadline=None)
@given(payloads=st.lists(st.binary(min_size=0, max_size=60), max_size=8),
       cuts=st.lists(st.integers(0, 600), max_size=6))
def test_packets_survive_any_split_of_the_stream(payloads, cuts):
    stream = b"".join(soup(b"U", p) for p in payloads)
    got, buf, pos = [], b"", 0
    for c in sorted(set(cuts)) + [len(stream)]:
        buf += stream[pos:c]
        pos = max(pos, c)
        packets, buf = soupbintcp.split_packets(buf, 100)
        got += packets
    assert got == [(ord("U"), p) for p in payloads] and buf == b""
