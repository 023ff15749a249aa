"""Scenario files: presets load and generate, descriptions regenerate, bad files fail clearly."""

import json

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import InputError
from exsim.scenarios import Scenario, list_presets, load_scenario
from exsim.scenarios.generators.uniform import bench_1m


def test_presets_include_default_and_benchmarks():
    assert {"default", "bench_1m", "bench_1m_100sym"} <= set(list_presets())


def test_default_preset_is_small_and_runs_through_the_engine():
    sc = load_scenario("default")
    orders = sc.generate()
    eng = Engine()
    assert sc.add_symbols(eng) == [0, 1]
    res = eng.process(orders)
    assert len(orders) == 10_000 and len(res.fills) > 0
    assert set(np.unique(orders["symbol"])) == {0, 1}


def test_bench_preset_file_equals_bench_function():
    assert load_scenario("bench_1m").generate().tobytes() == bench_1m().tobytes()


def test_description_round_trips_to_the_same_flow(tmp_path):
    sc = load_scenario("default")
    d = sc.describe()
    path = tmp_path / "run.json"
    path.write_text(json.dumps(d))
    again = load_scenario(path)
    assert again.describe()["sha256"] == d["sha256"]
    assert again.generate().tobytes() == sc.generate().tobytes()


def test_symbol_count_expands_to_numbered_names():
    sc = load_scenario("bench_1m_100sym")
    assert len(sc.symbols) == 100 and sc.symbols[0].name == "S00" and sc.symbols[-1].name == "S99"


def test_toml_syntax_error_names_file_and_line(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('generator = "uniform"\nseed = = 3\n')
    with pytest.raises(InputError, match=r"bad.toml: not valid TOML.*line 2"):
        load_scenario(p)


def test_unknown_generator_and_unknown_parameter_are_input_errors(tmp_path):
    base = {"generator": "uniform", "seed": 1, "params": {"n": 10}, "symbols": [{"name": "A"}]}
    with pytest.raises(InputError, match="'generator' should be one of"):
        Scenario.from_dict({**base, "generator": "nope"}, "x.toml")
    with pytest.raises(InputError, match=r"takes no parameter\(s\) \['speed'\]"):
        Scenario.from_dict({**base, "params": {"n": 10, "speed": 2}}, "x.toml")
    with pytest.raises(InputError, match="needs parameter"):
        Scenario.from_dict({**base, "params": {}}, "x.toml")


def test_missing_preset_lists_the_known_ones():
    with pytest.raises(InputError, match="no such scenario file or preset"):
        load_scenario("no_such_preset")
