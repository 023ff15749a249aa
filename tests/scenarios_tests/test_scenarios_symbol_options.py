"""Scenario [[symbols]] tables take the engine's symbol options (tick table, lots, session close,
money) and hand them to ``Engine.add_symbol``; bad values are errors naming file and key."""

from __future__ import annotations

import pytest

from exsim.exchange.errors import InputError
from exsim.scenarios.scenario import Scenario, load_scenario

OPTIONS = {"tick_table": [[1, 1], [10_000, 5]], "lot_size": 10, "min_order_qty": 20,
           "session_close": 75_600_000_000_000, "currency": "USD", "tick_value": 0.01,
           "maker_bps": -0.2, "taker_bps": 0.5}


def _data(**sym):
    return {"generator": "uniform", "seed": 1, "params": {"n": 10},
            "symbols": [{"name": "AAA", "tick_size": 0.01, **sym}]}


class _Recorder:
    """Stands in for an Engine: records add_symbol's keyword arguments."""

    def __init__(self):
        self.calls = []

    def add_symbol(self, name, **kw):
        self.calls.append({"name": name, **kw})
        return len(self.calls) - 1


def test_a_symbol_table_passes_every_engine_option_to_add_symbol():
    sc = Scenario.from_dict(_data(**OPTIONS), source="s.toml")
    eng = _Recorder()
    assert sc.add_symbols(eng) == [0]
    want = {"name": "AAA", "tick_size": 0.01, **OPTIONS,
            "tick_table": [(1, 1), (10_000, 5)]}
    assert eng.calls == [want]


def test_options_the_file_leaves_out_are_not_passed_and_describe_as_before():
    sc = Scenario.from_dict(_data(), source="s.toml")
    eng = _Recorder()
    sc.add_symbols(eng)
    assert eng.calls == [{"name": "AAA", "tick_size": 0.01}]
    assert sc.describe()["symbols"] == [{"name": "AAA", "tick_size": 0.01, "mid": None}]


def test_describe_keeps_the_options_and_reads_back_to_the_same_scenario():
    sc = Scenario.from_dict(_data(**OPTIONS), source="s.toml")
    d = sc.describe()
    assert d["symbols"][0]["tick_table"] == [[1, 1], [10_000, 5]]
    again = Scenario.from_dict(d, source="again")
    assert again.symbols == sc.symbols and again.describe()["sha256"] == d["sha256"]
    assert d["sha256"] != Scenario.from_dict(_data(), source="s").describe()["sha256"]


def test_count_gives_every_expanded_symbol_the_options():
    sc = Scenario.from_dict(_data(count=3, currency="EUR", maker_bps=-1), source="s.toml")
    assert [s.engine_options()["currency"] for s in sc.symbols] == ["EUR"] * 3


@pytest.mark.parametrize("key, value", [
    ("tick_table", [[2, 1]]),                     # must start at 1
    ("tick_table", [[1, 1], [1, 5]]),             # from_price strictly increasing
    ("tick_table", [[1, 0]]),                     # tick >= 1
    ("tick_table", [[1, 1.5]]),                   # integers
    ("tick_table", "1:1"),
    ("tick_table", [[1, 1]] * 65),                # at most 64 rows
    ("lot_size", 0), ("lot_size", 2.5), ("lot_size", True),
    ("min_order_qty", 0),
    ("session_close", -1), ("session_close", 86_400 * 10**9),
    ("currency", ""), ("currency", 3),
    ("tick_value", 0), ("tick_value", "1"),
    ("maker_bps", "1"), ("taker_bps", float("nan")),
])
def test_a_bad_option_value_is_an_input_error_naming_file_symbol_and_key(key, value):
    extra = {"currency": "USD"} if key == "tick_value" else {}
    with pytest.raises(InputError) as e:
        Scenario.from_dict(_data(**{key: value, **extra}), source="bad.toml")
    msg = str(e.value)
    assert "bad.toml" in msg and "symbols[0]" in msg and repr(key) in msg


def test_a_tick_value_without_a_currency_is_refused():
    with pytest.raises(InputError, match="tick_value.*currency"):
        Scenario.from_dict(_data(tick_value=0.01), source="bad.toml")


def test_a_toml_file_with_options_loads(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('generator = "uniform"\nseed = 1\n[params]\nn = 10\n[[symbols]]\nname = "AAA"\n'
                 'tick_size = 0.01\ncurrency = "USD"\ntick_value = 0.01\nmaker_bps = -0.2\n'
                 'taker_bps = 0.5\ntick_table = [[1, 1], [10_000, 5]]\nlot_size = 1\n')
    opts = load_scenario(p).symbols[0].engine_options()
    assert opts["currency"] == "USD" and opts["tick_table"] == [(1, 1), (10_000, 5)]
