"""What a new user meets (issue 18): plot paths checked before the work and failing in one line,
notes on stderr so ``--json`` stays pure, strict JSON (null, never NaN), the ``parquet`` extra,
the first run's compile announced and kept out of the throughput, and benchmark reports and
``runs/`` kept out of git."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from cli_fixtures import run, write_scenario

REPO = Path(__file__).resolve().parents[2]


def _strict(text: str):
    """json.loads that rejects NaN and Infinity (as jq and most parsers do)."""
    def bad(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=bad)


def _boom(*args, **kwargs):
    raise AssertionError("the work ran before the plot path was checked")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("newuser")
    code, _, err = run(["simulate", write_scenario(base), "--out", base / "run", "--batch", 500,
                        "--fsync", "none", "-q"])
    assert code == 0, err
    return base / "run"


# -- 1: a plot path matplotlib cannot write ---------------------------------------------------

def test_stats_plot_with_an_unwritable_suffix_exits_2_before_the_work(run_dir, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from exsim import replay

    monkeypatch.setattr(replay, "stats", _boom)
    out = tmp_path / "out.txt"
    code, stdout, err = run(["stats", run_dir, "AAA", "--plot", out])
    assert code == 2 and str(out) in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_stats_plot_into_a_missing_directory_exits_2(run_dir, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "nope" / "a.png"
    code, _, err = run(["stats", run_dir, "AAA", "--plot", out])
    assert code == 2 and str(out) in err and "does not exist" in err


def test_a_matplotlib_failure_while_saving_is_one_line_naming_the_path(run_dir, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.figure

    def fail(self, *a, **k):
        raise RuntimeError("renderer exploded\nsecond line")
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", fail)
    out = tmp_path / "a.png"
    code, _, err = run(["stats", run_dir, "AAA", "--plot", out])
    assert code == 2 and str(out) in err and "renderer exploded" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# -- 2, 3, 10: backtest and sweep output ------------------------------------------------------

def test_backtest_json_with_plot_keeps_stdout_pure_json(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "j.png"
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA", "--plot", png,
                          "--json", "-q"])
    assert code == 0, err
    summary = _strict(out)
    assert summary["n_messages"] > 0 and "wrote" not in out and f"wrote {png}" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_backtest_and_sweep_json_write_null_for_nan(tmp_path):
    # a strategy that never quotes has no passive fill: mean_time_in_queue_ns is NaN
    code, out, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA", "--param",
                          "every=100000000", "--json", "-q"])
    assert code == 0, err
    summary = _strict(out)
    assert summary["mean_time_in_queue_ns"] is None
    code, out, err = run(["sweep", write_scenario(tmp_path), "--symbol", "AAA", "--scheduler",
                          "serial", "--grid", "every=100000000,200000000", "--json", "-q"])
    assert code == 0, err
    rows = _strict(out)
    assert len(rows) == 2 and all(r["mean_time_in_queue_ns"] is None for r in rows)


def test_json_text_maps_non_finite_floats_to_null():
    from exsim.replay.cli.common import json_text

    text = json_text({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": (2,)})
    assert _strict(text) == {"a": None, "b": [None, None, 1.5], "c": [2]}


@pytest.mark.parametrize("name", ["nonexistent/dir/p.png", "p.txt"])
def test_backtest_plot_path_is_checked_before_the_backtest(tmp_path, monkeypatch, name):
    pytest.importorskip("matplotlib")
    import exsim.replay.backtesting.driver as driver

    monkeypatch.setattr(driver, "backtest", _boom)
    path = tmp_path / name
    code, _, err = run(["backtest", write_scenario(tmp_path), "--symbol", "AAA", "--plot", path])
    assert code == 2 and str(path) in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_sweep_csv_note_goes_to_stderr(tmp_path):
    out_csv = tmp_path / "s.csv"
    code, out, err = run(["sweep", write_scenario(tmp_path), "--symbol", "AAA", "--scheduler",
                          "serial", "--grid", "size=2,4", "--csv", out_csv, "-q"])
    assert code == 0, err
    assert "wrote" not in out and "wrote 2 rows" in err and out_csv.exists()


# -- 11: Parquet has its own small extra ------------------------------------------------------

def test_parquet_has_its_own_extra_and_the_cli_names_it(run_dir, tmp_path, monkeypatch):
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [d for d in extras["parquet"] if not d.startswith("pyarrow")] == []
    assert any(d.startswith("pyarrow") for d in extras["test"])
    code, out, _ = run(["export", "--help"])
    assert code == 0 and "exsim[parquet]" in out and "exsim[bench]" not in out
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    target = tmp_path / "o.parquet"
    code, _, err = run(["export", run_dir, "orders", "--format", "parquet", "--out", target])
    assert code == 2 and "pip install 'exsim[parquet]'" in err and not target.exists()


# -- 13, 14: the first run's compile ----------------------------------------------------------

def test_simulate_throughput_excludes_the_warm_up(tmp_path, monkeypatch):
    import exsim.replay.simulation as simulation

    real = simulation.warm_up

    def slow(*a, **k):
        real(*a, **k)
        time.sleep(1.0)                 # as a compile would
        return 1.0
    monkeypatch.setattr(simulation, "warm_up", slow)
    code, out, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "r",
                          "--fsync", "none", "-q"])
    assert code == 0, err
    summary = out.splitlines()[1]
    seconds = float(summary.split(" in ")[1].split(" s ")[0])
    assert seconds < 1.0, summary


def test_bench_does_not_time_the_first_call(monkeypatch):
    from exsim.exchange import Engine
    from exsim.replay.cli.bench import measure_throughput

    real, calls = Engine.process, []

    def first_slow(self, *a, **k):
        if not calls:
            time.sleep(1.0)             # the compile of a first run
        calls.append(1)
        return real(self, *a, **k)
    monkeypatch.setattr(Engine, "process", first_slow)
    r = measure_throughput(2000, 1, 1, 65_536)
    assert r["seconds"] < 1.0 and r["messages"] == 2000


@pytest.fixture
def fresh_notices(monkeypatch):
    """A process that has not announced a compile yet, whose next warm-up compiles a kernel
    (a fresh numba function without a cache: numba compiles it, as on a cold cache)."""
    from numba import njit

    import exsim.replay.simulation as simulation
    import exsim.scenarios.generators.uniform as uniform
    from exsim.exchange import compiling

    monkeypatch.setitem(compiling._state, "announced", False)

    def compiling_first(real):
        @functools.wraps(real)   # why: scenario files are checked against its signature
        def call(*args, **kwargs):
            njit(lambda x: x + 1)(1)
            return real(*args, **kwargs)
        return call
    monkeypatch.setattr(simulation, "warm_up", compiling_first(simulation.warm_up))
    monkeypatch.setattr(uniform, "uniform_flow", compiling_first(uniform.uniform_flow))
    return compiling


def test_cold_cache_is_announced_on_stderr_before_the_run(tmp_path, fresh_notices):
    code, out, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "r",
                          "--fsync", "none"])
    assert code == 0, err
    assert err.splitlines()[0].startswith("exsim: compiling numba kernels on first use")
    assert "compil" not in out and "exsim warmup" in err.splitlines()[0]
    # a second compile in the same process is not announced again
    code, out, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "r2",
                          "--fsync", "none"])
    assert code == 0 and "on first use" not in err


def test_a_cold_bench_is_announced_before_its_table(fresh_notices):
    code, out, err = run(["bench", "--messages", 1000, "--runs", 1])
    assert code == 0 and err.splitlines()[0].startswith("exsim: compiling numba kernels")
    assert "compil" not in out


def test_a_quiet_run_says_nothing_about_compiling(tmp_path, fresh_notices):
    code, out, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "q",
                          "--fsync", "none", "-q"])
    assert code == 0 and err == ""


def test_a_warm_run_says_nothing_about_compiling(tmp_path):
    assert run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "w", "--fsync",
                "none", "-q"])[0] == 0                     # everything compiled or cached
    code, out, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "w2",
                          "--fsync", "none"])
    assert code == 0 and "compil" not in err + out, err


def test_kernels_cold_reads_numbas_cache(tmp_path):
    from exsim.replay.simulation import kernels_cold, warm_up

    warm_up()
    assert kernels_cold() is False      # loaded in this process
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "empty"), PYTHONPATH=str(REPO))
    code = "from exsim.replay.simulation import kernels_cold; print(kernels_cold())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    env.pop("NUMBA_CACHE_DIR")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr   # on disk


# -- 15: the checkout stays clean -------------------------------------------------------------

def test_benchmark_reports_and_runs_are_untracked_by_default(monkeypatch):
    from benchmarks import _smoke

    monkeypatch.delenv(_smoke.ENV, raising=False)
    assert _smoke.results_dir() == _smoke.RESULTS / "local"
    assert _smoke.report_path(None, "engine.json") == _smoke.RESULTS / "local" / "engine.json"
    assert _smoke.report_path("benchmarks/results/engine.json", "engine.json") == \
        Path("benchmarks/results/engine.json")
    for path in ("runs/default/catalog.sqlite", "benchmarks/results/local/engine.json"):
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        assert done.returncode == 0, f"{path} is not ignored by git"
    assert "--out benchmarks/results/" in (REPO / "docs" / "benchmarks.md").read_text()
