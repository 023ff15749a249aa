"""Engine.restore against checkpoints with valid CRCs and impossible content.

Every blob here is a real checkpoint with one thing changed and its CRC32C recomputed, so only
restore's own checks stand between it and a broken engine. Each must be a CorruptionError whose
message starts with "checkpoint:" and names the row or field; restore is linear in symbols and
orders (``checkpoint()`` layout: magic "EXSIMCKP", u32 version, u32 header length, header JSON,
u64 row count, CHECKPOINT_DTYPE rows, u32 CRC32C of all that precedes it).
"""

import json
import math
import os
import struct
import sys

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from exsim.exchange import Engine
from exsim.exchange.checkpoint import V1_ROW_DTYPE, VERSION
from exsim.exchange.errors import CorruptionError, ExsimError, UsageError
from exsim.exchange.schema import CHECKPOINT_DTYPE, MAX_PRICE, MAX_QTY


def real_checkpoint() -> bytes:
    """Two symbols (B with band 90..110), bids and asks on several levels, a partial fill."""
    e = Engine(stp="cancel_resting")
    e.add_symbol("A", tick_size=0.01)
    e.add_symbol("B", tick_size=1, min_price=90, max_price=110)
    for oid, side, price, qty in ((1, "buy", 99, 5), (2, "buy", 99, 7), (3, "buy", 98, 4),
                                  (4, "sell", 101, 6), (5, "sell", 102, 3)):
        e.submit("A", side, price=price, qty=qty, order_id=oid, trader=oid)
    e.submit("A", "buy", price=101, qty=2, order_id=6, trader=9)      # fills 2 of order 4
    e.submit("B", "buy", price=100, qty=5, order_id=1, trader=1, post_only=True)
    e.submit("B", "sell", price=105, qty=5, order_id=2, trader=2)
    return e.checkpoint()


def parts(blob: bytes):
    """(header dict, rows array) of a checkpoint."""
    (hlen,) = struct.unpack_from("<I", blob, 12)
    (n,) = struct.unpack_from("<Q", blob, 16 + hlen)
    header = json.loads(blob[16: 16 + hlen])
    return header, np.frombuffer(blob, CHECKPOINT_DTYPE, count=n, offset=24 + hlen).copy()


def build(header, rows, *, nrows=None, header_bytes=None, hlen=None, version=VERSION) -> bytes:
    """A checkpoint of these parts with a correct CRC (``nrows``/``hlen`` may lie)."""
    h = json.dumps(header, sort_keys=True).encode() if header_bytes is None else header_bytes
    body = (b"EXSIMCKP" + struct.pack("<II", version, len(h) if hlen is None else hlen) + h
            + struct.pack("<Q", len(rows) if nrows is None else nrows) + rows.tobytes())
    return body + struct.pack("<I", crc32c.crc32c(body))


BLOB = real_checkpoint()
HEADER, ROWS = parts(BLOB)


def test_the_rebuilt_unedited_checkpoint_restores_to_itself():
    assert build(HEADER, ROWS) == BLOB
    assert Engine.restore(BLOB).checkpoint() == BLOB


def _row(k, **fields):
    rows = ROWS.copy()
    for f, v in fields.items():
        rows[k][f] = v
    return build(HEADER, rows)


def _swap(i, j):
    rows = ROWS.copy()
    rows[[i, j]] = rows[[j, i]]
    return build(HEADER, rows)


# ROWS: 0, 1 = A bids at 99; 2 = A bid 98; 3 = A ask 101 (4 left); 4 = A ask 102; 5 = B bid 100;
# 6 = B ask 105
ROW_CASES = [
    (lambda: _row(0, symbol=7), r"row 0.*symbol 7"),
    (lambda: _row(2, side=2), r"row 2.*side"),
    (lambda: _row(1, qty=0), r"row 1.*qty"),
    (lambda: _row(1, qty=-5), r"row 1.*qty"),
    (lambda: _row(4, qty=MAX_QTY + 1), r"row 4.*qty"),
    (lambda: _row(3, filled=-1), r"row 3.*filled"),
    (lambda: _row(5, price=120), r"row 5.*price 120.*band"),
    (lambda: _row(2, price=0), r"row 2.*price 0"),
    (lambda: _row(2, price=-(1 << 63)), r"row 2.*price"),
    (lambda: _row(6, flags=0x80), r"row 6.*flags"),
    (lambda: _row(1, order_id=1), r"row 1.*duplicate order id 1"),
    (lambda: _swap(1, 2), r"row 2.*priority order"),     # a worse level before a better one
    (lambda: _swap(0, 5), r"row \d.*priority order"),     # symbol B's row among A's
    (lambda: _row(3, price=99), r"crossed"),               # A's best ask at its best bid
    # the fields of stops, icebergs and expiry
    (lambda: _row(0, hidden=3), r"row 0.*reserve 3.*display_qty 0"),   # reserve, no display
    (lambda: _row(0, hidden=-1, display_qty=5), r"row 0.*reserve -1"),
    (lambda: _row(0, display_qty=2), r"row 0.*shown qty 5 and display_qty 2"),
    (lambda: _row(0, display_qty=-1), r"row 0.*display_qty -1"),
    (lambda: _row(1, expire_ts=10), r"row 1.*expire_ts 10 with tif 0"),  # GTC with an expiry
    (lambda: _row(1, tif=4), r"row 1.*expire_ts 0 with tif 4"),        # GTD without one
    (lambda: _row(1, tif=1), r"row 1.*tif 1 of a resting order"),       # IOC cannot rest
    (lambda: _row(2, order_type=1), r"row 2.*order_type 1 of a resting order"),
    (lambda: _row(2, stop_price=99), r"row 2.*stop_price 99 of a resting order"),
    (lambda: _row(4, pending=3), r"row 4.*pending 3"),
    (lambda: _row(6, pending=1), r"row 6.*order_type 0 of a pending stop"),
    (lambda: _row(6, pending=1, order_type=3), r"row 6.*filled|row 6.*stop_price 0"),
    (lambda: _row(6, pending=1, order_type=2), r"row 6.*price 105 of a pending STOP"),
    (lambda: _row(6, pending=1, order_type=3, stop_price=200), r"row 6.*stop_price 200"),
    (lambda: _row(5, pending=1, order_type=3, stop_price=100, price=100, flags=0),
     r"row 6.*out of priority order \(resting orders first"),   # a resting row after a stop
    (lambda: _stops(0, 1), r"row 1.*BUY stop at 100.*out of order"),   # BUY stops must rise
    (lambda: _stops(1, 1), r"row 1.*SELL stop at 105.*out of order"),  # SELL stops must fall
    (lambda: _stops(0, 0, filled=1), r"row 0.*filled 1.*pending stop"),
    (lambda: _stops(0, 0, flags=1), r"row 0.*flags 0x1.*pending stop"),
    (lambda: _stops(0, 0, tif=2), r"row 0.*tif 2 of a pending stop"),   # a stop cannot be FOK
    (lambda: _stops(0, 0, hidden=1), r"row 0.*reserve 1 of a pending stop"),
]


def _stops(side, swap, **fields):
    """Symbol B with two pending stops of ``side`` (trigger 100 and 105), in release order
    unless ``swap``; ``fields`` edit the first."""
    rows = np.zeros(2, CHECKPOINT_DTYPE)
    rows["symbol"], rows["side"], rows["pending"], rows["order_type"] = 1, side, 1, 2
    rows["order_id"], rows["qty"] = [1, 2], 5
    triggers = [100, 105] if side == 0 else [105, 100]
    rows["stop_price"] = triggers[::-1] if swap else triggers
    for f, v in fields.items():
        rows[0][f] = v
    return build(HEADER, rows)


def test_pending_stops_in_release_order_restore_exactly():
    blob = _stops(0, 0)
    eng = Engine.restore(blob)
    assert eng.checkpoint() == blob and eng.stops("B")["order_id"].tolist() == [1, 2]


def _old_form_checkpoint() -> bytes:
    """What an engine of before issue 15 could hold (ownership off, default options, no trade
    yet, plain GTC limits): checkpoint() writes it in version 1, 42-byte rows."""
    e = Engine(stp="cancel_resting", ownership=False)
    e.add_symbol("A", tick_size=0.01)
    e.add_symbol("B", tick_size=1, min_price=90, max_price=110)
    for oid, side, price, qty in ((1, "buy", 99, 5), (2, "buy", 99, 7), (4, "sell", 101, 6)):
        e.submit("A", side, price=price, qty=qty, order_id=oid, trader=oid)
    e.submit("B", "sell", price=105, qty=5, order_id=2, trader=2)
    return e.checkpoint()


def test_a_version_1_checkpoint_of_42_byte_rows_restores_and_reencodes_to_its_bytes():
    blob = _old_form_checkpoint()
    assert struct.unpack_from("<I", blob, 8)[0] == 1 and V1_ROW_DTYPE.itemsize == 42
    eng = Engine.restore(blob)
    assert eng.checkpoint() == blob and eng.checkpoint_equals(blob)
    eng.submit("A", "buy", price=98, qty=1, order_id=9, display_qty=0, tif="gtd", expire_ts=5)
    assert struct.unpack_from("<I", eng.checkpoint(), 8)[0] == VERSION   # new state: version 2
    assert not eng.checkpoint_equals(blob)


def test_a_version_1_checkpoint_with_a_bad_row_names_its_byte_offset():
    blob = _old_form_checkpoint()
    header, rows = _v1_parts(blob)
    rows[2]["qty"] = 0
    bad = build(header, rows, version=1)
    with pytest.raises(CorruptionError, match="row 2.*qty") as err:
        Engine.restore(bad)
    assert err.value.offset == len(bad) - 4 - (len(rows) - 2) * 42


def test_a_checkpoint_in_a_version_its_state_is_not_written_in_is_refused():
    header, rows = _v1_parts(_old_form_checkpoint())
    wide = np.zeros(len(rows), CHECKPOINT_DTYPE)
    for name in V1_ROW_DTYPE.names:
        wide[name] = rows[name]
    with pytest.raises(CorruptionError, match="^checkpoint: version 2 is not the one"):
        Engine.restore(build(header, wide))
    with pytest.raises(CorruptionError, match="^checkpoint: version 1 is not the one"):
        Engine.restore(build(HEADER, _v1_rows(ROWS), version=1))


def _v1_rows(rows):
    old = np.zeros(len(rows), V1_ROW_DTYPE)
    for name in V1_ROW_DTYPE.names:
        old[name] = rows[name]
    return old


def _v1_parts(blob):
    (hlen,) = struct.unpack_from("<I", blob, 12)
    (n,) = struct.unpack_from("<Q", blob, 16 + hlen)
    return (json.loads(blob[16: 16 + hlen]),
            np.frombuffer(blob, V1_ROW_DTYPE, count=n, offset=24 + hlen).copy())


@pytest.mark.parametrize("make,match", ROW_CASES)
def test_an_impossible_row_is_a_corruption_error_naming_the_row(make, match):
    with pytest.raises(CorruptionError, match="^checkpoint: ") as err:
        Engine.restore(make())
    assert err.match(match)


def _hdr(edit):
    h = json.loads(json.dumps(HEADER))
    edit(h)
    return build(h, ROWS)


def _sym(k, **kv):
    def edit(h):
        h["config"]["symbols"][k].update(kv)
    return edit


HEADER_CASES = [
    (lambda h: h["config"].update(stp="bogus"), "stp"),
    (lambda h: h["config"].update(stp="NONE"), "stp"),
    (_sym(0, tick_size=math.nan), "tick_size"),
    (_sym(0, tick_size=0), "tick_size"),
    (_sym(1, tick_size=-1), "tick_size"),
    (_sym(1, tick_size="1"), "tick_size"),
    (_sym(1, tick_size=True), "tick_size"),
    (_sym(1, min_price=111), "band"),
    (_sym(0, max_price=MAX_PRICE + 1), "max_price"),
    (_sym(1, min_price=1.5), "min_price"),
    (_sym(1, id=0), "id"),
    (_sym(1, name="A"), "name"),
    (_sym(0, name=""), "name"),
    (lambda h: h.update(seq=-1), "seq"),
    (lambda h: h.update(seq=1 << 64), "seq"),
    (lambda h: h.update(trade_id="x"), "trade_id"),
    (lambda h: h.update(next_auto_id=0), "next_auto_id"),
    (lambda h: h.pop("seq"), "seq"),
    (lambda h: h.update(extra=1), "extra"),
    (lambda h: h.update(config=[]), "config"),
    (lambda h: h["config"].update(symbols={}), "symbols"),
    (lambda h: h["config"]["symbols"].append(5), "symbol 2"),
]


@pytest.mark.parametrize("edit,match", HEADER_CASES)
def test_an_impossible_header_field_is_a_corruption_error_naming_it(edit, match):
    with pytest.raises(CorruptionError, match="^checkpoint: ") as err:
        Engine.restore(_hdr(edit))
    assert err.match(match)


@pytest.mark.parametrize("header_bytes", [b"{", b"\xff\xfe", b"[" * 100_000, b"7", b'"x"',
                                          json.dumps(HEADER, sort_keys=True, indent=1).encode()])
def test_a_header_that_is_not_the_canonical_json_object_is_a_corruption_error(header_bytes):
    with pytest.raises(CorruptionError, match="^checkpoint: .*header"):
        Engine.restore(build(HEADER, ROWS, header_bytes=header_bytes))


@pytest.mark.parametrize("nrows", [len(ROWS) + 1, len(ROWS) - 1, 1 << 60, (1 << 64) - 1])
def test_a_row_count_that_does_not_fit_the_blob_is_refused_before_allocating(nrows):
    with pytest.raises(CorruptionError, match="^checkpoint: row count"):
        Engine.restore(build(HEADER, ROWS, nrows=nrows))


@pytest.mark.parametrize("hlen", [len(BLOB), (1 << 32) - 1])
def test_a_header_length_past_the_end_is_refused(hlen):
    h = json.dumps(HEADER, sort_keys=True).encode()
    with pytest.raises(CorruptionError, match="^checkpoint: header length"):
        Engine.restore(build(HEADER, ROWS, header_bytes=h, hlen=hlen))


@pytest.mark.parametrize("blob", [10 ** 12, "EXSIMCKP", None])
def test_restore_of_something_that_is_not_bytes_is_a_usage_error(blob):
    with pytest.raises(UsageError, match="bytes"):
        Engine.restore(blob)


# ---- any edit with a valid CRC: an ExsimError, or exactly the state the blob describes -------

_FIELDS = {name: CHECKPOINT_DTYPE[name] for name in CHECKPOINT_DTYPE.names}


def _field_value(name):
    info = np.iinfo(_FIELDS[name])
    return st.one_of(st.integers(int(info.min), int(info.max)),
                     st.sampled_from([0, 1, 2, -1, 98, 99, 100, 101, 105, 110, MAX_QTY,
                                      MAX_PRICE]).filter(lambda v: info.min <= v <= info.max))


_row_edit = st.sampled_from(sorted(_FIELDS)).flatmap(
    lambda f: st.tuples(st.just("row"), st.integers(0, len(ROWS) - 1), st.just(f),
                        _field_value(f)))
_json_value = st.one_of(st.integers(-2, 1 << 64), st.floats(allow_nan=True), st.booleans(),
                        st.none(), st.text(max_size=3), st.sampled_from(["none", "A", "B"]))
_header_edit = st.tuples(st.just("header"), st.sampled_from(
    ["stp", "seq", "trade_id", "next_auto_id"] + [f"{k}.{f}" for k in (0, 1) for f in
                                                  ("name", "id", "tick_size", "min_price",
                                                   "max_price")]), _json_value)
_count_edit = st.tuples(st.just("count"), st.integers(0, 2 * len(ROWS)))


def _apply(edits) -> bytes:
    header, rows, nrows = json.loads(json.dumps(HEADER)), ROWS.copy(), None
    for edit in edits:
        if edit[0] == "row":
            rows[edit[1]][edit[2]] = edit[3]
        elif edit[0] == "count":
            nrows = edit[1]
        elif "." in edit[1]:
            k, f = edit[1].split(".")
            header["config"]["symbols"][int(k)][f] = edit[2]
        elif edit[1] == "stp":
            header["config"]["stp"] = edit[2]
        else:
            header[edit[1]] = edit[2]
    return build(header, rows, nrows=nrows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_row_edit, _row_edit, _header_edit, _count_edit), min_size=1,
                max_size=3))
def test_any_edit_with_a_valid_crc_is_refused_or_restores_exactly_that_checkpoint(edits):
    blob = _apply(edits)
    try:
        eng = Engine.restore(blob)
    except ExsimError as e:
        assert str(e).startswith("checkpoint: ")
        return
    assert eng.checkpoint() == blob
    eng.submit(0, "buy", qty=1, price=1, order_id=1 << 63)      # and the engine works
    eng.submit(0, "sell", qty=10 ** 6, order_type="market", order_id=(1 << 63) + 1)


# ---- restore is linear in symbols and in orders --------------------------------------------

def _symbols_blob(n: int) -> bytes:
    syms = [{"name": f"S{i}", "id": i, "tick_size": 1, "min_price": 1, "max_price": MAX_PRICE}
            for i in range(n)]
    header = {"config": {"stp": "none", "symbols": syms}, "next_auto_id": 1, "seq": 0,
              "trade_id": 0}
    rows = np.zeros(n, CHECKPOINT_DTYPE)      # one bid per symbol
    rows["symbol"] = np.arange(n)
    rows["order_id"], rows["price"], rows["qty"] = 1, 100, 1
    return build(header, _v1_rows(rows), version=1)   # an old-form state is written in version 1


def _levels_blob(n: int) -> bytes:
    header = json.loads(json.dumps(HEADER))
    header["config"]["symbols"] = header["config"]["symbols"][:1]
    header["last_prices"] = header["last_prices"][:1]
    rows = np.zeros(n, CHECKPOINT_DTYPE)      # n bid levels of symbol 0, best first
    rows["order_id"] = np.arange(1, n + 1)
    rows["price"] = np.arange(n, 0, -1) + 10
    rows["qty"] = 1
    return build(header, rows)


# numpy calls whose cost is the size of what they build: a loop that grows arrays one symbol
# or one level at a time through them copies O(n^2) elements
_COPYING = ("concatenate", "append", "insert", "resize", "repeat", "vstack", "hstack", "delete")


def _restore_work(blob: bytes) -> int:
    """The work ``Engine.restore(blob)`` does in Python, counted, not timed (so load on the
    machine cannot move it): lines executed in the exchange package plus the elements built by
    numpy's copying calls. The compiled kernels' own loops are not seen here; their linear
    cost is benchmarks/bench_restore.py's target."""
    from exsim import exchange
    root = os.path.dirname(exchange.__file__) + os.sep
    lines = elements = 0

    def tracer(frame, event, arg):
        nonlocal lines
        if not frame.f_code.co_filename.startswith(root):
            return None           # why: count only our code, not numpy's or json's
        if event == "line":
            lines += 1
        return tracer

    def counting(fn):
        def wrapper(*a, **kw):
            nonlocal elements
            out = fn(*a, **kw)
            elements += getattr(out, "size", 0)
            return out
        return wrapper

    saved = {name: getattr(np, name) for name in _COPYING}
    try:
        for name, fn in saved.items():
            setattr(np, name, counting(fn))
        sys.settrace(tracer)
        eng = Engine.restore(blob)
    finally:
        sys.settrace(None)
        for name, fn in saved.items():
            setattr(np, name, fn)
    assert eng.checkpoint() == blob
    return lines + elements


@pytest.mark.parametrize("make,small", [(_symbols_blob, 1_000), (_levels_blob, 2_000)])
def test_restore_work_grows_linearly_not_quadratically(make, small):
    Engine.restore(make(100))     # compiled: compiling is not restore's work
    w_small, w_big = _restore_work(make(small)), _restore_work(make(4 * small))
    assert w_big < 6 * w_small, (w_small, w_big)   # linear: 4x plus a fixed part; quadratic 16x
