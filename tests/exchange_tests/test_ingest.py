"""exchange.ingest: foreign fixed-size records → ORDER_DTYPE, by one compiled pass or a view.

What a user relies on: a layout names where each ORDER_DTYPE field comes from (offset, integer
format, byte order, value map) or a constant; ``convert`` gives exactly the ORDER_DTYPE bytes a
field-by-field numpy copy would (so the engine's outputs are byte-identical); ``view`` copies
nothing; a bad layout or a hostile buffer is an InputError naming the field, never a crash.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from conftest import SYMBOLS, assert_same_outputs, make_book, random_flow
from hypothesis import given, settings
from hypothesis import strategies as st

from exsim.exchange import ORDER_DTYPE, ForeignField, Kind, RecordLayout, Side
from exsim.exchange.errors import InputError, UsageError

# a C-struct-like foreign record: other widths, another field order, padding, a big-endian
# timestamp, the side as a char and the kind as a letter
FOREIGN = np.dtype({
    "names": ["qty", "side", "ts", "kind", "price", "oid", "sym", "trader", "type", "tif", "flags"],
    "formats": ["<i2", "S1", ">i8", "S1", "<i4", "<u8", "<u2", "<i4", "u1", "u1", "u1"],
    "offsets": [0, 2, 4, 12, 16, 24, 32, 36, 40, 41, 43],
    "itemsize": 48,
})
SIDES = {b"B": Side.BUY, b"S": Side.SELL}
KINDS = {b"N": Kind.NEW, b"X": Kind.CANCEL, b"M": Kind.MODIFY, b"?": 7}   # 7: random_flow's bad kind
LAYOUT = RecordLayout.from_dtype(FOREIGN, {
    "ts": "ts", "order_id": "oid", "price": "price", "qty": "qty", "symbol": "sym",
    "trader": "trader", "order_type": "type", "tif": "tif", "flags": "flags",
    "side": ForeignField("side", values=SIDES), "kind": ForeignField("kind", values=KINDS),
})


def to_foreign(orders: np.ndarray) -> np.ndarray:
    """The foreign records of an ORDER_DTYPE flow (stop_price .. phase must be 0)."""
    f = np.zeros(len(orders), FOREIGN)
    for ours, theirs in [("ts", "ts"), ("order_id", "oid"), ("price", "price"), ("qty", "qty"),
                         ("symbol", "sym"), ("trader", "trader"), ("order_type", "type"),
                         ("tif", "tif"), ("flags", "flags")]:
        f[theirs] = orders[ours]
    f["side"] = np.array([b"B", b"S"])[orders["side"]]
    letters = {int(v): k for k, v in KINDS.items()}
    f["kind"] = [letters[int(k)] for k in orders["kind"]]
    return f


def engine_outputs(orders):
    eng = make_book("engine", symbols=SYMBOLS)
    return tuple(eng.process(orders)), eng.state_hash()


# ---------------------------------------------------------------- round trips
def test_converting_a_foreign_copy_of_a_flow_gives_its_bytes_and_the_same_engine_outputs():
    flow = random_flow(11, 3_000)
    got = LAYOUT.convert(to_foreign(flow))
    assert got.tobytes() == flow.tobytes()
    (want, want_hash), (have, have_hash) = engine_outputs(flow), engine_outputs(got)
    assert_same_outputs(have, want)
    assert have_hash == want_hash


def test_a_stream_of_batches_converts_into_one_reused_buffer():
    flow = random_flow(12, 1_000)
    raw = to_foreign(flow).tobytes()
    out = np.zeros(300, ORDER_DTYPE)
    parts = []
    for lo in range(0, len(flow), 300):
        rows = LAYOUT.convert(raw[lo * 48: (lo + 300) * 48], out=out)
        assert np.shares_memory(rows, out) and rows.base is out
        parts.append(rows.tobytes())
    assert b"".join(parts) == flow.tobytes()


def test_a_ctypes_struct_array_converts_with_constants_and_a_char_side():
    class Msg(ctypes.Structure):
        _fields_ = [("ts", ctypes.c_int64), ("id", ctypes.c_uint64), ("px", ctypes.c_int32),
                    ("qty", ctypes.c_uint32), ("side", ctypes.c_char)]
    msgs = (Msg * 2)(Msg(5, 1, 101, 7, b"S"), Msg(6, 2, 102, 3, b"B"))
    layout = RecordLayout.from_dtype(np.dtype(Msg), {
        "ts": "ts", "order_id": "id", "price": "px", "qty": "qty", "symbol": 2, "trader": 9,
        "side": ForeignField("side", values={"B": Side.BUY, "S": Side.SELL})})
    got = layout.convert(msgs)
    assert got.tolist() == [(5, 1, 101, 7, 2, 9, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0),
                            (6, 2, 102, 3, 2, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]


def test_a_non_contiguous_array_converts_like_its_copy():
    foreign = to_foreign(random_flow(13, 200))
    assert LAYOUT.convert(foreign[::3]).tobytes() == LAYOUT.convert(foreign[::3].copy()).tobytes()


def test_an_empty_buffer_gives_no_rows():
    assert len(LAYOUT.convert(b"")) == 0
    assert LAYOUT.convert(b"", out=np.zeros(4, ORDER_DTYPE)).dtype == ORDER_DTYPE


# ---------------------------------------------------------------- views
PADDED = np.dtype([("header", "<u8"), ("order", ORDER_DTYPE), ("trailer", "V10")])   # 96 bytes


def test_a_record_holding_order_dtype_at_an_offset_views_as_order_dtype_and_the_engine_takes_it():
    flow = random_flow(14, 2_000)
    foreign = np.zeros(len(flow), PADDED)
    foreign["order"] = flow
    foreign["header"] = 0xDEADBEEF
    layout = RecordLayout(96, {n: ForeignField(8 + ORDER_DTYPE.fields[n][1], ORDER_DTYPE.fields[n][0])
                               for n in ORDER_DTYPE.names})
    view = layout.view(foreign.tobytes())
    assert view.dtype == ORDER_DTYPE and view.strides == (96,) and not view.flags.writeable
    assert_same_outputs(engine_outputs(view)[0], engine_outputs(flow)[0])
    assert layout.convert(foreign).tobytes() == flow.tobytes()


def test_order_dtype_itself_views_without_a_copy():
    flow = random_flow(15, 100)
    view = RecordLayout.from_dtype(ORDER_DTYPE).view(flow)
    assert view.dtype == ORDER_DTYPE and np.shares_memory(view, flow) and view.flags.writeable
    assert view.tobytes() == flow.tobytes()


def test_a_view_with_other_offsets_reads_columns_but_the_engine_needs_a_copy():
    names = list(ORDER_DTYPE.names)[::-1]
    offsets, at = [], 0
    for n in names:
        offsets.append(at)
        at += ORDER_DTYPE.fields[n][0].itemsize + 1
    shuffled = np.dtype({"names": names, "formats": [ORDER_DTYPE.fields[n][0] for n in names],
                         "offsets": offsets, "itemsize": at})
    flow = random_flow(16, 500)
    foreign = np.zeros(len(flow), shuffled)
    for n in names:
        foreign[n] = flow[n]
    layout = RecordLayout.from_dtype(shuffled)
    view = layout.view(foreign)
    assert view.dtype != ORDER_DTYPE and np.shares_memory(view, foreign)
    assert np.array_equal(view["price"], flow["price"])
    with pytest.raises(UsageError, match="ORDER_DTYPE"):
        make_book("engine").process(view)
    assert view.astype(ORDER_DTYPE).tobytes() == flow.tobytes()
    assert layout.convert(foreign).tobytes() == flow.tobytes()


def test_view_of_a_layout_that_needs_conversion_names_the_field():
    assert not LAYOUT.viewable
    with pytest.raises(UsageError, match="'ts'"):
        LAYOUT.view(to_foreign(random_flow(1, 3)))


# ---------------------------------------------------------------- hostile layouts
def raw(**fields):
    return lambda: RecordLayout(16, fields)


@pytest.mark.parametrize("build,match", [
    (raw(size=ForeignField(0, "<i8")), "'size' is not an ORDER_DTYPE field"),
    (raw(price=ForeignField(0, "<f8")), "'price'.*float64 is not an integer.*ticks"),
    (raw(price=ForeignField(0, "V3")), "'price'.*not an integer"),
    (raw(side=ForeignField(0, "S2")), "'side'.*not an integer"),
    (raw(price=ForeignField(0, ("<i4", 2))), "'price'.*not an integer"),
    (raw(price=ForeignField(0, "no such")), "'price'.*not a numpy format"),
    (raw(price=ForeignField(12, "<i8")), "'price'.*bytes 12..19 lie outside the 16-byte record"),
    (raw(price=ForeignField(-1, "u1")), "'price'.*outside"),
    (raw(price=ForeignField(0, "<i8"), qty=ForeignField(4, "<i4")), "'qty'.*overlaps field 'price'"),
    (raw(price=ForeignField("px", "<i8")), "'price'.*names need RecordLayout.from_dtype"),
    (raw(price=ForeignField(0)), "'price'.*needs a format"),
    (raw(price=ForeignField(True, "u1")), "'price'.*must be an int"),
    (raw(side=2 ** 8), "'side': constant 256 is outside side's range"),
    (raw(symbol=-1), "'symbol': constant -1"),
    (raw(tif=True), "'tif'.*must be an int"),
    (raw(tif="GTC"), "'tif'.*must be an int"),
    (raw(side=ForeignField(0, "u1", values={256: 0})), "'side'.*key 256 cannot occur"),
    (raw(side=ForeignField(0, "u1", values={1: 256})), "'side'.*code 256.*outside side's range"),
    (raw(side=ForeignField(0, "u1", values={"B": 0, 66: 1})), "'side'.*key 66 given twice"),
    (raw(side=ForeignField(0, "<u2", values={"B": 0})), "'side'.*key 'B' cannot occur"),
    (raw(side=ForeignField(0, "<u4", values={0: 0, 1 << 20: 1})), "'side'.*span 1048577 codes"),
    (raw(side=ForeignField(0, "u1", values={})), "'side'.*non-empty mapping"),
    (lambda: RecordLayout(0, {}), "itemsize must be at least 1"),
    (lambda: RecordLayout(8.0, {}), "itemsize must be an int"),
    (lambda: RecordLayout(8, [("price", 1)]), "fields must be a mapping"),
    (lambda: RecordLayout.from_dtype("<i8"), "must be a structured dtype"),
    (lambda: RecordLayout.from_dtype(FOREIGN, {"price": "px"}), "'price'.*no field 'px'"),
])
def test_a_bad_layout_is_an_input_error_naming_the_field(build, match):
    with pytest.raises(InputError, match=match):
        build()


# ---------------------------------------------------------------- hostile buffers
def test_a_buffer_that_is_not_whole_records_is_refused_before_anything_is_allocated():
    with pytest.raises(InputError, match="100 bytes are not a whole number of 48-byte records"):
        LAYOUT.convert(bytes(100))
    with pytest.raises(InputError, match="records of 78 bytes; the layout's are 48"):
        LAYOUT.convert(np.zeros(3, ORDER_DTYPE))


@pytest.mark.parametrize("out,match", [
    (np.zeros(2, ORDER_DTYPE), "room for 2 rows; the buffer holds 3"),
    (np.zeros(6, ORDER_DTYPE)[::2], "C-contiguous"),
    (np.zeros(3, FOREIGN), "ORDER_DTYPE"),
    ([], "ORDER_DTYPE"),
])
def test_an_out_that_cannot_hold_the_rows_is_a_usage_error(out, match):
    with pytest.raises(UsageError, match=match):
        LAYOUT.convert(bytes(48 * 3), out=out)


def test_a_read_only_out_is_a_usage_error():
    out = np.zeros(3, ORDER_DTYPE)
    out.flags.writeable = False
    with pytest.raises(UsageError, match="writeable"):
        LAYOUT.convert(bytes(48 * 3), out=out)


@pytest.mark.parametrize("buffer", [object(), 7, np.array([None, None])])
def test_a_buffer_that_holds_no_bytes_is_a_usage_error(buffer):
    with pytest.raises(UsageError, match="buffer"):
        LAYOUT.convert(buffer)


def test_an_unmapped_code_names_the_record_the_field_and_the_code():
    foreign = to_foreign(random_flow(2, 10))
    foreign["side"][6] = b"Z"
    with pytest.raises(InputError, match=r"record 6: field 'side' .*code b'Z' is not in its "
                                         r"value map \(b'B', b'S'\)"):
        LAYOUT.convert(foreign)


@pytest.mark.parametrize("fmt,value,field,match", [
    ("<i4", -1, "symbol", "value -1 is outside symbol's range"),
    ("<u8", 1 << 63, "price", f"value {1 << 63} is outside price's range"),
    ("<u8", (1 << 64) - 1, "qty", f"value {(1 << 64) - 1} is outside"),
    ("<i8", 256, "side", "value 256 is outside side's range"),
    (">i2", -2, "order_id", "value -2 is outside order_id's range"),
    ("<i8", 1 << 32, "trader", f"value {1 << 32} is outside trader's range"),
])
def test_a_value_that_does_not_fit_its_field_names_the_record_and_the_field(fmt, value, field, match):
    dt = np.dtype([("pad", "u1"), ("v", fmt)])
    foreign = np.zeros(4, dt)
    foreign["v"][2] = value
    layout = RecordLayout.from_dtype(dt, {field: "v"})
    with pytest.raises(InputError, match=f"record 2: field '{field}' .*{match}"):
        layout.convert(foreign)


def test_values_that_fit_pass_at_the_edges_of_the_range():
    dt = np.dtype([("sym", "<i8"), ("id", "<i4"), ("px", "<u8")])
    foreign = np.array([(0, 0, 0), ((1 << 32) - 1, (1 << 31) - 1, (1 << 63) - 1)], dt)
    got = RecordLayout.from_dtype(dt, {"symbol": "sym", "order_id": "id", "price": "px"}).convert(foreign)
    assert got["symbol"].tolist() == [0, (1 << 32) - 1]
    assert got["order_id"].tolist() == [0, (1 << 31) - 1]
    assert got["price"].tolist() == [0, (1 << 63) - 1]


# ---------------------------------------------------------------- random layouts
INT_FORMATS = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"]


@st.composite
def layouts(draw):
    """A random foreign layout for random ORDER_DTYPE rows: per field a constant, a source of a
    random integer format and byte order (the rows' values fit both), or a value map; fields in
    a random order with random gaps."""
    names = draw(st.permutations(ORDER_DTYPE.names))
    spec, at = {}, draw(st.integers(0, 3))
    for name in names:
        how = draw(st.sampled_from(["source", "source", "constant", "map"]))
        target = ORDER_DTYPE.fields[name][0]
        if how == "constant":
            info = np.iinfo(target)
            spec[name] = draw(st.integers(int(info.min), int(info.max)))
            continue
        fmt = draw(st.sampled_from(INT_FORMATS)) if how == "source" else "u1"
        if fmt[1] != "1":
            fmt = draw(st.sampled_from("<>")) + fmt
        values = None
        if how == "map":
            codes = draw(st.lists(st.integers(0, 255), min_size=1, max_size=6, unique=True))
            keys = draw(st.lists(st.integers(0, 255), min_size=len(codes), max_size=len(codes),
                                 unique=True))
            values = dict(zip(keys, codes))
        spec[name] = ForeignField(at, fmt, values)
        at += np.dtype(fmt).itemsize + draw(st.integers(0, 2))
    return RecordLayout(at + draw(st.integers(0, 3)), spec)


def fitting(draw, name, field):
    """A value for ORDER_DTYPE field ``name`` that its foreign ``field`` can hold."""
    if field.values is not None:
        return draw(st.sampled_from(sorted(field.values)))
    a, b = np.iinfo(field.format), np.iinfo(ORDER_DTYPE.fields[name][0])
    return draw(st.integers(max(int(a.min), int(b.min)), min(int(a.max), int(b.max))))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_layout_converts_to_what_a_field_by_field_copy_gives(data):
    layout = data.draw(layouts())
    n = data.draw(st.integers(0, 12))
    buf = np.zeros((n, layout.itemsize), np.uint8)
    want = np.zeros(n, ORDER_DTYPE)
    for name, field in layout.fields.items():
        if not isinstance(field, ForeignField):
            want[name] = field
            continue
        dt = np.dtype(field.format)
        for i in range(n):
            v = fitting(data.draw, name, field)
            buf[i, field.source: field.source + dt.itemsize] = np.frombuffer(
                np.array(v, dt).tobytes(), np.uint8)
            want[name][i] = field.values[v] if field.values is not None else v
    assert layout.convert(buf.tobytes()).tobytes() == want.tobytes()
    assert layout.convert(buf, out=np.zeros(n + 2, ORDER_DTYPE)).tobytes() == want.tobytes()


def test_convert_writes_only_the_rows_of_the_buffer():
    out = np.full(5, 0xAB, np.uint8).repeat(ORDER_DTYPE.itemsize).view(ORDER_DTYPE)
    before = out[3:].tobytes()
    rows = RecordLayout(4, {"symbol": 5, "qty": ForeignField(0, "<u4")}).convert(
        np.array([7, 8, 9], "<u4"), out=out)
    assert rows.tolist() == [(0, 0, 0, q, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) for q in (7, 8, 9)]
    assert out[3:].tobytes() == before
    assert RecordLayout(4, {}).count(bytes(12)) == 3
