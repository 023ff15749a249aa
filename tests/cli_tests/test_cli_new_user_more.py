"""What a new user meets (issue 18, continued): tables that keep every digit left of the point,
bare sample names found in the shared data folder, errors that name the file or argument, and
abandoned temporary run directories cleaned on the next run of the same name."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cli_fixtures import run, write_scenario

REPO = Path(__file__).resolve().parents[2]


# -- 7: tables keep every digit left of the point ---------------------------------------------

def test_table_numbers_are_not_rounded_to_six_significant_digits():
    from exsim.replay.cli.common import format_number

    assert format_number(-132674.5) == "-132,674.5"
    assert format_number(987425123.25) == "987,425,123.25"
    assert "e+" not in format_number(987425123.0)
    assert format_number(3) == "3" and format_number(1234567) == "1,234,567"
    assert format_number(0.5) == "0.5" and format_number(0.0) == "0"
    assert format_number(float("nan")) == "nan"
    assert format_number(1.5e-5) == "1.5e-05"


# -- 8: bare sample names in the help examples are found in the shared data folder -----------

def _shared():
    from exsim.scenarios.data import shared_data_dir

    base = shared_data_dir()
    if base is None:
        pytest.skip("shared data directory not found")
    return base


def test_bare_sample_names_resolve_to_the_shared_data_folder(tmp_path, monkeypatch):
    from exsim.scenarios.data import find_sample

    base = _shared()
    monkeypatch.chdir(tmp_path)
    assert find_sample("quantcup_score_feed.csv") == str(base / "quantcup_score_feed" / "quantcup_score_feed.csv")
    assert find_sample("lobster_AMZN_2012-06-21_level1") == str(base / "lobster_AMZN_2012-06-21_level1")
    (tmp_path / "quantcup_score_feed.csv").write_text("x")
    assert find_sample("quantcup_score_feed.csv") == "quantcup_score_feed.csv"   # a path wins
    assert find_sample("no_such_sample") == "no_such_sample"


def test_simulate_help_example_with_a_bare_lobster_name_runs(tmp_path, monkeypatch):
    _shared()
    monkeypatch.chdir(tmp_path)
    d = "lobster_AAPL_2012-06-21_level10_head"
    msg = f"{d}/AAPL_2012-06-21_34200000_57600000_message_10_head.csv"
    book = f"{d}/AAPL_2012-06-21_34200000_57600000_orderbook_10_head.csv"
    code, _, err = run(["simulate", "--flow", "lobster", msg, book, "--out", tmp_path / "r",
                        "--fsync", "none", "-q"])
    assert code == 0, err


# -- 12: a killed simulate's hidden directory is removed by the next run of the same name ---

def test_next_simulate_removes_an_abandoned_hidden_directory(tmp_path, monkeypatch):
    import shutil

    from exsim import store
    import exsim.replay.simulation as sim

    scenario = write_scenario(tmp_path)
    out = tmp_path / "run"

    def killed(*args, **kwargs):
        raise RuntimeError("SIGKILL")

    # a SIGKILL runs no cleanup: what is left is whatever simulate names its hidden directory
    with monkeypatch.context() as m:
        m.setattr(sim, "warm_up", lambda *a: 0.0)
        m.setattr(store.Session, "create", killed)
        m.setattr(shutil, "rmtree", lambda *a, **k: None)
        with pytest.raises(RuntimeError):
            sim.simulate(scenario, str(out), durability="none")
    left = [e for e in os.listdir(tmp_path) if e.startswith(".run.")]
    assert len(left) == 1
    old = tmp_path / left[0]
    fresh = tmp_path / (left[0] + "x")
    os.mkdir(fresh)                       # a second one, too young to be abandoned
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    code, _, err = run(["simulate", scenario, "--out", out, "--fsync", "none", "-q"])
    assert code == 0, err
    assert not old.exists() and fresh.exists()


# -- 5: stats rows describe consistent books: one row per timestamp, after its last message --

def test_stats_has_one_row_per_timestamp_after_its_last_message():
    import numpy as np

    from exsim.exchange.schema import DEPTH_DTYPE, FILL_DTYPE, L2_DTYPE
    from exsim.replay.analytics import stats_arrays

    bids = np.zeros(1, DEPTH_DTYPE)
    bids["price"], bids["qty"] = 100, 5
    asks = np.zeros(1, DEPTH_DTYPE)
    asks["price"], asks["qty"] = 101, 5
    # one depth update at ts 10 in two messages: the ask moves from 101 to 103 (its new level
    # first), then a lone message at ts 20
    l2 = np.zeros(3, L2_DTYPE)
    l2["seq"], l2["ts"], l2["side"] = [2, 3, 4], [10, 10, 20], [1, 1, 0]
    l2["price"], l2["qty"] = [103, 101, 100], [5, 0, 7]
    rows = stats_arrays(bids, asks, l2, np.zeros(0, FILL_DTYPE))
    assert list(rows["ts"]) == [10, 20] and list(rows["seq"]) == [3, 4]
    assert list(rows["spread"]) == [3.0, 3.0]


# -- 9: errors name the file and the broken argument -----------------------------------------

@pytest.mark.parametrize("change, words", [
    (("size_min = 1", "size_min = -5"), ["size_min -5"]),
    (("n = 2_000", "n = -1000"), ["n >= 0, got -1000"]),
])
def test_scenario_parameter_errors_name_the_file_and_the_parameter(tmp_path, change, words):
    from cli_fixtures import SMALL_SCENARIO

    text = SMALL_SCENARIO.replace("[params]\n", "[params]\nsize_min = 1\nsize_max = 10\n")
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(*change))
    code, _, err = run(["simulate", path, "--out", tmp_path / "r", "--fsync", "none", "-q"])
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(path) in err and all(w in err for w in words), err
    assert "span" not in err and "n_traders" not in err


def test_simulate_out_that_cannot_be_created_names_out_not_a_temporary(tmp_path, monkeypatch):
    import exsim.replay.atomic

    def refuse(out, tag="exsim"):
        name = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.{tag}-abcd")
        raise FileNotFoundError(2, "No such file or directory", name)

    monkeypatch.setattr("exsim.replay.simulation.temp_dir_beside", refuse)
    out = tmp_path / "nope"
    code, _, err = run(["simulate", write_scenario(tmp_path), "--out", out, "--fsync", "none", "-q"])
    assert code == 2 and f"--out {out}" in err and ".exsim" not in err, err


def test_export_into_a_missing_directory_names_out(tmp_path):
    scenario = write_scenario(tmp_path)
    code, _, err = run(["simulate", scenario, "--out", tmp_path / "r", "--fsync", "none", "-q"])
    assert code == 0, err
    out = tmp_path / "nonexistent" / "f.csv"
    code, _, err = run(["export", tmp_path / "r", "fills", "--format", "csv", "--out", out])
    assert code == 2 and f"--out {out}" in err and "does not exist" in err and ".tmp" not in err


def test_backtest_on_a_two_symbol_flow_asks_for_the_option_not_the_python_argument(tmp_path):
    code, _, err = run(["backtest", write_scenario(tmp_path), "-q"])
    assert code == 2 and "--symbol" in err and "symbol=" not in err, err


@pytest.mark.parametrize("library, cli", [
    ("use scheduler='serial'", "--scheduler serial"),
    ("; use Session.open", "--force"),
])
def test_library_wording_becomes_the_cli_option(library, cli):
    from exsim.exchange.errors import UsageError
    from exsim.replay.cli.app import _describe

    text = _describe(UsageError(f"something {library}"))
    assert cli in text and library.strip("; ") not in text
