"""The gateway state's JSON writer (reports.py ``to_json``) against json.dumps: the generated
fast writer must write exactly the bytes json.dumps(sort_keys=True, separators=(",", ":"))
writes, for every value a field may hold, since stored reports are compared byte for byte
after a restart (live and recovered reports must be equal bytes)."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given, settings, strategies as st

from exsim.exchange.gateway.reports import Origin, OrderState, Report
from exsim.exchange.schema import Side


class _Str(str):
    pass


def _dumps(obj) -> str:
    return json.dumps(obj.__dict__, sort_keys=True, separators=(",", ":"))


_texts = st.text(max_size=40) | st.sampled_from(["", "fix:acct1", "é\"\\\n\x00\u2028", "\ud800"])
_ints = st.integers(-(1 << 70), 1 << 70) | st.sampled_from([0, 1, -1, (1 << 63) - 1])
_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1e300, 5e-324])
# what a field must never hold but a bug could put there: the writer must still agree
_odd = st.one_of(st.booleans(), st.none(), st.sampled_from([Side.BUY, Side.SELL]),
                 _texts.map(_Str), _floats, _ints, _texts)


def _values(cls, odd: bool):
    def one(f):
        plain = {"int": _ints, "str": _texts, "float": _floats}[f.type]
        return (plain | _odd) if odd else plain
    return st.fixed_dictionaries({f.name: one(f) for f in dataclasses.fields(cls)})


def _build(cls, values: dict):
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([Report, OrderState, Origin]).flatmap(
    lambda cls: st.tuples(st.just(cls), _values(cls, odd=False))))
def test_plain_values_write_as_json_dumps(case):
    cls, values = case
    obj = _build(cls, values)
    assert obj.to_json() == _dumps(obj)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([Report, OrderState, Origin]).flatmap(
    lambda cls: st.tuples(st.just(cls), _values(cls, odd=False),
                          st.sampled_from([f.name for f in dataclasses.fields(cls)]), _odd)))
def test_one_odd_value_writes_as_json_dumps(case):
    cls, values, name, odd = case
    obj = _build(cls, {**values, name: odd})
    assert obj.to_json() == _dumps(obj)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([Report, OrderState, Origin]).flatmap(
    lambda cls: st.tuples(st.just(cls), _values(cls, odd=True))))
def test_any_values_write_as_json_dumps(case):
    cls, values = case
    obj = _build(cls, values)
    assert obj.to_json() == _dumps(obj)


def test_an_extra_or_missing_field_writes_as_json_dumps():
    r = Report("fix:a", 1, 2, 3, "new", "new", 4, "c", "", "a", "JPM", 0, 0, 0, 1, 0, 1)
    extra = _build(Report, {**r.__dict__, "zzz": 1})
    assert extra.to_json() == _dumps(extra)
    missing = _build(Report, {k: v for k, v in r.__dict__.items() if k != "text"})
    assert missing.to_json() == _dumps(missing)


def test_the_json_round_trips():
    r = Report("fix:a", 1, 2, 3, "trade", "filled", 4, "c\"é", "", "a", "JPM", Side.SELL, 0, 0,
               15000, 0, 1, last_px=15000, last_qty=1, trade_id=9, cum_qty=1, avg_px=15000.0)
    assert Report.from_json(r.to_json()) == r
    assert r.to_json() == _dumps(r)


@settings(max_examples=200, deadline=None)
@given(_values(Report, odd=False), st.one_of(_texts, _texts.map(_Str)),
       st.integers(0, 1 << 62), st.one_of(st.none(), st.sampled_from(list(Report.__dataclass_fields__))),
       _odd)
def test_a_renumbered_copy_writes_as_json_dumps(values, stream, rseq, odd_name, odd):
    from exsim.exchange.gateway.reports import renumbered_json

    if odd_name is not None:
        values = {**values, odd_name: odd}
    r = _build(Report, values)
    copy = _build(Report, {**values, "stream": stream, "rseq": rseq})
    assert renumbered_json(r.to_json(), r, stream, rseq) == _dumps(copy)
