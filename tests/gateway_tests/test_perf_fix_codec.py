"""The FIX codec's fast paths against simplefix (the reference): ``parse_frame`` must return
the same message (pairs, BeginString, MsgType) or raise the same FieldError as parsing with
simplefix, and ``build`` must return the bytes simplefix's ``encode`` writes (or raise the same
error), on valid and hostile input alike."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from exsim.exchange.gateway.fix import codec
from exsim.exchange.gateway.fix.codec import FieldError

SOH = b"\x01"


def _outcome(fn, *args, **kw):
    try:
        m = fn(*args, **kw)
    except FieldError as e:
        return ("FieldError", e.reason, e.tag, str(e))
    except Exception as e:   # the reference's own errors must be the same type and text
        return (type(e).__name__, str(e))
    if isinstance(m, bytes):
        return m
    return (m.pairs, m.begin_string, m.message_type, m.header_index, m.count())


def _frame(body: bytes) -> bytes:
    head = b"8=FIX.4.4\x019=" + str(len(body)).encode() + SOH + body
    return head + b"10=%03d\x01" % (sum(head) % 256)


_tags = st.one_of(st.integers(1, 1200).map(lambda t: str(t).encode()),
                  st.sampled_from([b"10", b"35", b"8", b"9", b"95", b"96", b"212", b"213",
                                   b" 35", b"+35", b"3_5", b"-1", b"035", b"", b"x", b"1=2",
                                   b"\x01", b"10 "]),
                  st.binary(max_size=4))
_values = st.one_of(st.binary(min_size=1, max_size=12).filter(lambda v: SOH not in v),
                    st.sampled_from([b"", b"D", b"0", b"5", b"a=b", b"\x01", b"FIX.4.4", b"-3",
                                     b"x" * 3]),
                    st.binary(max_size=6))
_RAW_LEN = {90, 93, 95, 212, 348, 350, 352, 354, 356, 358, 360, 362, 364, 445, 618, 621}
_clean_field = st.tuples(
    st.integers(1, 1200).filter(lambda t: t not in _RAW_LEN and t != 10).map(
        lambda t: str(t).encode()),
    st.binary(min_size=1, max_size=8).filter(lambda v: SOH not in v))
_field = st.one_of(_clean_field, _clean_field, _clean_field, st.tuples(_tags, _values))
# half the messages are clean fields only, so a hostile frame around them is what differs
_fields = st.one_of(st.lists(_clean_field, max_size=10), st.lists(_field, max_size=12))
_glue = st.sampled_from([b"=", b"", b"==", b"=\x01"])


@st.composite
def _messages(draw):
    fields = draw(_fields)
    glue = draw(st.lists(_glue, min_size=len(fields), max_size=len(fields)))
    if draw(st.booleans()):
        glue = [b"="] * len(fields)   # mostly well-formed fields
    body = b"35=" + draw(st.sampled_from([b"D", b"F", b"G", b"0", b"A"])) + SOH
    body += b"".join(t + g + v + SOH for (t, v), g in zip(fields, glue))
    if draw(st.booleans()):
        return _frame(body)
    # hostile: cut, spliced or raw bytes, also without a valid frame around them
    raw = _frame(body)
    how = draw(st.sampled_from(["cut", "insert", "raw", "prefix", "double10"]))
    if how == "cut":
        return raw[:draw(st.integers(0, len(raw)))]
    if how == "insert":
        i = draw(st.integers(0, len(raw)))
        return raw[:i] + draw(st.binary(max_size=6)) + raw[i:]
    if how == "prefix":
        return draw(st.sampled_from([b"35=D\x01", b"49=X\x01", b"9=1\x01"])) + raw
    if how == "double10":
        return raw + b"10=000\x01"
    return draw(st.binary(max_size=60))


@settings(max_examples=300, deadline=None)
@given(_messages())
def test_parse_frame_answers_as_simplefix(frame):
    assert _outcome(codec.parse_frame, frame) == _outcome(codec._parse_simplefix, frame)


def test_parse_frame_known_cases():
    for body in (b"35=D\x0111=a\x0155=JPM\x01", b"35=D\x0195=3\x0196=a\x01b\x0111=x\x01",
                 b"35=D\x0111=\x01", b"35=D\x01x=1\x01", b"35=D\x0110=000\x0111=a\x01",
                 b"35=D\x01 11=a\x01", b"35=D\x0135=F\x01", b"35=D\x018=X\x01"):
        frame = _frame(body)
        assert _outcome(codec.parse_frame, frame) == _outcome(codec._parse_simplefix, frame)
    good = codec.parse_frame(_frame(b"35=D\x0111=a\x0155=JPM\x01"))
    assert good.message_type == b"D" and good.get(55) == b"JPM"


_text = st.one_of(st.text(max_size=12), st.sampled_from(["", "EXSIM", "é", "a=b", "\x01"]))
_plain = st.one_of(_text, st.integers(-(1 << 70), 1 << 70), st.binary(max_size=8))
_odd = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.just("\ud800"),
                 st.just(b"\x01"))
_body_tags = st.one_of(st.integers(1, 9999), st.sampled_from([8, 9, 10, 35, 0, -1]),
                       st.sampled_from(["55", b"55", True, 55.0]))


@settings(max_examples=300, deadline=None)
@given(msg_type=st.one_of(st.sampled_from(["8", "D", "0", "4", ""]), _plain, _odd),
       sender=st.one_of(_text, _text, _odd), target=_text,
       seq=st.one_of(st.integers(0, 1 << 40), st.integers(0, 1 << 40), _odd, _text),
       sending_time=st.one_of(st.just("20261201-19:30:00.000"), _text, _text, _odd),
       body=st.one_of(
           st.lists(st.tuples(st.integers(1, 9999), _plain), max_size=8),
           st.lists(st.tuples(st.one_of(st.integers(1, 9999), st.sampled_from([8, 9, 10, 35])),
                              _plain), max_size=4),
           st.lists(st.tuples(_body_tags, st.one_of(_plain, _plain, _odd)), max_size=10)),
       poss_dup=st.booleans(),
       orig=st.one_of(st.none(), st.just("20261201-19:29:00.000"), _odd))
def test_build_writes_as_simplefix(msg_type, sender, target, seq, sending_time, body,
                                   poss_dup, orig):
    args = (msg_type, sender, target, seq, sending_time, body)
    kw = dict(poss_dup=poss_dup, orig_sending_time=orig)
    assert _outcome(codec.build, *args, **kw) == _outcome(codec._build_simplefix, *args, **kw)


def test_build_known_case():
    args = ("8", "EXSIM", "bench0", 123, "20261201-19:30:00.000",
            [(37, 5), (11, "T0-1"), (44, "150.00"), (58, b"raw"), (6, "0")])
    out = codec.build(*args, poss_dup=True, orig_sending_time="20261201-19:29:00.000")
    assert out == codec._build_simplefix(*args, poss_dup=True,
                                         orig_sending_time="20261201-19:29:00.000")
    assert codec.parse_frame(out).get(11) == b"T0-1"
    # a body naming a header or trailer tag: simplefix moves or drops it
    for tag in (8, 9, 10, 35, 34, 49):
        body = [(55, "JPM"), (tag, "X"), (11, 7)]
        assert codec.build("D", "A", "B", 1, "t", body) == \
            codec._build_simplefix("D", "A", "B", 1, "t", body), tag


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 40), 7_000_000_000_000_000_000), min_size=1, max_size=5))
def test_utc_timestamp_is_the_datetime_text_of_its_millisecond(stamps):
    import datetime

    # repeated and neighbouring stamps too: the text of one millisecond is kept for the next
    for ns in stamps + [s + 1 for s in stamps] + stamps:
        secs, rem = divmod(ns, 1_000_000_000)
        want = datetime.datetime.fromtimestamp(secs, datetime.timezone.utc).strftime(
            "%Y%m%d-%H:%M:%S") + f".{rem // 1_000_000:03d}"
        assert codec.utc_timestamp(ns) == want
