"""``exsim backtest --report`` (issue 18): the quant's report after the summary table, or under
"report" in strict JSON, without changing the summary's keys or values."""

from __future__ import annotations

import json

import pytest

from cli_fixtures import run, write_scenario

ARGS = ["--symbol", "AAA", "--param", "size=5", "--param", "every=10", "--fees-bps", "1", "-q"]


def _strict(text: str):
    def bad(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("report"))


def test_report_json_carries_every_trade_and_leaves_the_summary_alone(scenario):
    code, plain, err = run(["backtest", scenario, *ARGS, "--json"])
    assert code == 0, err
    code, out, err = run(["backtest", scenario, *ARGS, "--json", "--report", "--bar-ns", "10000000"])
    assert code == 0, err
    got, before = _strict(out), _strict(plain)
    report = got.pop("report")
    assert got == before
    assert len(report["trades"]) >= before["n_fills"] > 0
    assert report["stats"]["fees"] == before["fees"] and report["unit"] == before["unit"]
    assert report["stats"]["bar_ns"] == 10_000_000
    assert len(report["bars"]["ts"]) == report["stats"]["n_bars"] > 1
    assert sum(t["fee"] for t in report["trades"]) == pytest.approx(before["fees"])


def test_report_table_follows_the_summary(scenario):
    code, out, err = run(["backtest", scenario, *ARGS, "--report", "--trades", "2"])
    assert code == 0, err
    assert out.index("measure") < out.index("sharpe_annualised") < out.index("trades (")
    after = out[out.index("trades ("):].splitlines()
    assert after[1].split()[:3] == ["ts", "side", "price"]
    assert len(after) == 5 and after[-1].startswith("... ") and after[-1].endswith(" more")


@pytest.mark.parametrize("argv, needle", [(["--bar-ns", "0"], "--bar-ns"),
                                          (["--trades", "-1"], "--trades")])
def test_bad_report_options_exit_2_naming_them(scenario, argv, needle):
    code, out, err = run(["backtest", scenario, *ARGS, "--report", *argv])
    assert code == 2 and needle in err and out == ""
