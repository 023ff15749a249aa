"""The OUCH-style message layouts: what the docs say, round trips, and refusals of bad bytes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exsim.exchange.gateway import ouch
from exsim.exchange.gateway.ouch import MessageError, OuchReason
from exsim.exchange.gateway.reports import EXEC_KINDS, Report
from exsim.exchange.schema import OrderType, Reason, Side, Tif

DOC = Path(__file__).resolve().parents[2] / "docs" / "gateway-binary.md"

tokens = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                 max_size=ouch.TOKEN_LEN)
symbols = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                  max_size=ouch.SYMBOL_LEN)
u64 = st.integers(0, (1 << 64) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)


def _section(layouts) -> str:
    return "\n".join(f"#### {lay.name} (`{lay.code.decode()}`, {lay.size} bytes)\n\n"
                     f"{ouch.layout_table(lay)}\n" for lay in layouts)


@pytest.mark.parametrize("name, layouts", [
    ("ouch-client-layouts", [ouch.ENTER, ouch.CANCEL, ouch.REPLACE]),
    ("ouch-server-layouts", [ouch.ACCEPTED, ouch.REJECTED, ouch.EXECUTED, ouch.CANCELED,
                             ouch.REPLACED, ouch.TRIGGERED, ouch.CANCEL_REJECT]),
])
def test_the_docs_show_the_layouts_the_code_uses(name, layouts):
    text = DOC.read_text()
    m = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert m, f"docs/gateway-binary.md has no {name} section"
    assert m.group(1).strip() == _section(layouts).strip()
    # the offsets are the struct's: each field starts where the previous one ended
    for lay in layouts:
        rows = lay.offsets()
        assert rows[0][:2] == (0, 1)
        assert all(a[0] + a[1] == b[0] for a, b in zip(rows, rows[1:]))
        assert rows[-1][0] + rows[-1][1] == lay.size == lay.struct.size


def test_every_exec_kind_has_a_message_and_types_are_distinct():
    assert len(ouch.CLIENT) == 3 and len(ouch.SERVER) == 7
    for kind in EXEC_KINDS:
        ouch.encode_report(_report(kind))
    with pytest.raises(ValueError):
        ouch.encode_report(_report("bogus"))


@settings(max_examples=150, deadline=None)
@given(token=tokens, side=st.sampled_from(list(Side)), qty=u64, symbol=symbols, price=i64,
       otype=st.sampled_from(list(OrderType)), tif=st.sampled_from(list(Tif)), disp=u64,
       minq=u64, stop=i64, exp=u64, post=st.booleans(), new_token=tokens)
def test_client_messages_round_trip(token, side, qty, symbol, price, otype, tif, disp, minq,
                                    stop, exp, post, new_token):
    fields = dict(token=token, side=side, qty=qty, symbol=symbol, price=price, order_type=otype,
                  tif=tif, display_qty=disp, min_qty=minq, stop_price=stop, expire_ts=exp,
                  post_only=post)
    data = ouch.ENTER.pack(**fields)
    assert len(data) == ouch.ENTER.size and data[:1] == b"O"
    assert ouch.parse_client(data)._asdict() == fields
    assert ouch.parse_client(ouch.CANCEL.pack(token=token)).token == token
    rep = dict(token=token, new_token=new_token, qty=qty, price=price, stop_price=stop)
    assert ouch.parse_client(ouch.REPLACE.pack(**rep))._asdict() == rep


def _report(exec_kind, **kw):
    base = dict(stream="ouch:a", rseq=7, seq=9, ts=1_700_000_000_123_456_789, exec=exec_kind,
                status="new", order_id=42, client_order_id="TOK-1", orig_client_order_id="",
                account="a", symbol="JPM", side=int(Side.SELL), order_type=int(OrderType.LIMIT),
                tif=int(Tif.DAY), price=15001, stop_price=0, qty=100, last_px=15000,
                last_qty=30, trade_id=5, cum_qty=30, leaves_qty=70, avg_px=15000.0, reason=0,
                text="")
    base.update(kw)
    return Report(**base)


EXPECTED = [
    (_report("new"), "Accepted", dict(token="TOK-1", order_id=42, side=Side.SELL, qty=100,
                                      symbol="JPM", price=15001, order_type=OrderType.LIMIT,
                                      tif=Tif.DAY, leaves_qty=70)),
    (_report("rejected", reason=int(Reason.OFF_TICK)), "Rejected",
     dict(token="TOK-1", reason=int(Reason.OFF_TICK))),
    (_report("rejected", text="duplicate client_order_id"), "Rejected",
     dict(reason=int(OuchReason.DUPLICATE_TOKEN))),
    (_report("rejected", text="gateway overloaded: request queue full"), "Rejected",
     dict(reason=int(OuchReason.GATEWAY))),
    (_report("trade"), "Executed", dict(qty=30, price=15000, match_number=5, cum_qty=30,
                                        leaves_qty=70)),
    (_report("canceled", reason=int(Reason.USER_CANCEL), orig_client_order_id="TOK-1"),
     "Canceled", dict(token="TOK-1", orig_token="TOK-1", cum_qty=30,
                      reason=int(Reason.USER_CANCEL))),
    (_report("expired", reason=int(Reason.EXPIRED)), "Canceled",
     dict(orig_token="", reason=int(Reason.EXPIRED))),
    (_report("replaced", client_order_id="TOK-2", orig_client_order_id="TOK-1"), "Replaced",
     dict(token="TOK-2", orig_token="TOK-1", qty=100, price=15001, cum_qty=30, leaves_qty=70)),
    (_report("triggered", order_type=int(OrderType.STOP)), "Triggered", dict(leaves_qty=70)),
    (_report("cancel_rejected", reason=int(Reason.UNKNOWN_ID)), "CancelReject",
     dict(request="cancel", reason=int(Reason.UNKNOWN_ID))),
    (_report("replace_rejected", text="duplicate client_order_id"), "CancelReject",
     dict(request="replace", reason=int(OuchReason.DUPLICATE_TOKEN))),
]


@pytest.mark.parametrize("report, name, fields", EXPECTED, ids=[e[0].exec + str(i)
                                                                 for i, e in enumerate(EXPECTED)])
def test_reports_encode_to_their_message(report, name, fields):
    data = ouch.encode_report(report)
    assert data == ouch.encode_report(Report.from_json(report.to_json()))   # a pure function
    msg = ouch.decode_server(data)
    assert type(msg).__name__ == name and len(data) == ouch.SERVER[data[0]].size
    assert msg.ts == report.ts
    got = msg._asdict()
    assert {k: got[k] for k in fields} == fields


def test_report_fields_too_long_or_unknown_are_cut_not_errors():
    # a FIX ClOrdID of 32 characters and a side code this port has no letter for
    r = _report("canceled", client_order_id="F" * 32, orig_client_order_id="G" * 20, side=9)
    msg = ouch.decode_server(ouch.encode_report(r))
    assert (msg.token, msg.orig_token) == ("F" * 14, "G" * 14)
    assert ouch.decode_server(ouch.encode_report(_report("new", side=9))).side == Side.BUY


def _enter(**kw):
    fields = dict(token="T1", side=Side.BUY, qty=1, symbol="JPM", price=1,
                  order_type=OrderType.LIMIT, tif=Tif.GTC, display_qty=0, min_qty=0,
                  stop_price=0, expire_ts=0, post_only=False)
    fields.update(kw)
    return bytearray(ouch.ENTER.pack(**fields))


def _refused(data) -> MessageError:
    with pytest.raises(MessageError) as e:
        ouch.parse_client(bytes(data))
    return e.value


def test_client_message_refusals_name_the_reason_and_the_readable_token():
    assert _refused(b"").reason == OuchReason.MALFORMED
    assert _refused(b"Q" + bytes(20)).reason == OuchReason.UNKNOWN_TYPE
    for lay in ouch.CLIENT.values():
        good = lay.code + b"T".ljust(lay.size - 1, b"\0")
        assert _refused(good[:-1]).reason == OuchReason.MALFORMED
        assert _refused(good + b"\0").reason == OuchReason.MALFORMED
    for offset, bad in ((15, b"X"), (40, b"Z"), (41, b"Q"), (74, b"?")):  # side, type, tif, flag
        data = _enter()
        data[offset:offset + 1] = bad
        e = _refused(data)
        assert (e.reason, e.token) == (OuchReason.BAD_FIELD, "T1")
    data = _enter()
    data[24:32] = b"J M     "           # a space inside the symbol
    assert _refused(data).reason == OuchReason.BAD_FIELD
    for token in (b" T1           ", b"T\x001".ljust(14), b" " * 14, "é".encode().ljust(14)):
        data = _enter()
        data[1:15] = token
        e = _refused(data)
        assert (e.reason, e.token) == (OuchReason.BAD_FIELD, "")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100))
def test_any_bytes_parse_or_are_refused_with_a_reason(data):
    try:
        msg = ouch.parse_client(data)
    except MessageError as e:
        assert e.reason in (OuchReason.MALFORMED, OuchReason.UNKNOWN_TYPE, OuchReason.BAD_FIELD)
    else:
        assert len(data) == ouch.CLIENT[data[0]].size and msg.token


def test_login_payloads_round_trip_and_refuse_bad_fields():
    data = ouch.encode_login("alice", "pässword", "", 12345)
    assert len(data) == ouch.LOGIN_REQUEST.size == 126
    assert ouch.parse_login(data) == ("alice", "pässword", "", 12345)
    assert ouch.parse_login(ouch.encode_login("bob", "x", "EXSIM", 0)).seq == 0
    assert ouch.parse_login_accepted(ouch.encode_login_accepted("EXSIM", 7)) == ("EXSIM", 7)
    with pytest.raises(ValueError):
        ouch.parse_login(data[:-1])
    with pytest.raises(ValueError):
        ouch.parse_login(data[:-20] + b"12x".rjust(20))
    with pytest.raises(ValueError):
        ouch.parse_login(b"\xff" * 32 + data[32:])
    with pytest.raises(ValueError):
        ouch.encode_login("u" * 33, "p")
    with pytest.raises(ValueError):
        ouch.encode_login("u", "trailing ")
