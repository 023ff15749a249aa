"""exsim simulate, ls and export, exit codes and error messages (in-process, one subprocess run)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from cli_fixtures import run, write_scenario
from exsim.store import read


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A data directory simulated once from the small scenario with 500-message batches."""
    base = tmp_path_factory.mktemp("cli")
    out = base / "run"
    code, stdout, stderr = run(["simulate", write_scenario(base), "--out", out, "--batch", 500,
                                "--fsync", "none"])
    assert code == 0, stderr
    return out


def test_simulate_prints_messages_fills_and_top_of_book(run_dir):
    code, out, err = run(["simulate", write_scenario(run_dir.parent), "--out", run_dir.parent / "again",
                          "--batch", 500, "--fsync", "none"])
    fills = read(run_dir, "fills")
    assert code == 0 and err == ""   # no progress bar when stderr is not a terminal
    assert "messages 2,000" in out and f"fills {fills.size:,}" in out
    assert f"volume {int(fills['qty'].sum()):,}" in out
    assert "AAA" in out and "BBB" in out and "msgs/s" in out


def test_simulate_is_deterministic_across_batch_sizes(run_dir, tmp_path):
    code, _, _ = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "b", "--batch", 777,
                      "--fsync", "none", "-q"])
    assert code == 0
    for table in ("orders", "fills", "l2", "events"):
        assert np.array_equal(read(run_dir, table), read(tmp_path / "b", table)), table


def test_simulate_seed_override_changes_the_flow(run_dir, tmp_path):
    code, out, _ = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "s", "--seed", 99])
    assert code == 0 and "(seed 99)" in out
    assert not np.array_equal(read(run_dir, "orders"), read(tmp_path / "s", "orders"))


def test_simulate_refuses_an_existing_data_directory_without_force(run_dir):
    code, _, err = run(["simulate", write_scenario(run_dir.parent), "--out", run_dir])
    assert code == 2 and "--force" in err and "Traceback" not in err


def test_simulate_force_replaces_a_data_directory(tmp_path):
    sc = write_scenario(tmp_path)
    assert run(["simulate", sc, "--out", tmp_path / "r", "--fsync", "none"])[0] == 0
    code, out, _ = run(["simulate", sc, "--out", tmp_path / "r", "--seed", 5, "--force", "--fsync", "none"])
    assert code == 0 and "(seed 5)" in out
    assert sorted(os.listdir(tmp_path)) == ["r", "small.toml"]   # no temporary leftovers


def test_simulate_never_deletes_a_directory_that_is_not_a_data_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    code, _, err = run(["simulate", "--out", tmp_path / "mine", "--force"])
    assert code == 2 and "not an exsim data directory" in err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_bad_scenario_file_is_exit_2_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('generator = "uniform"\nseed = 1\n[params]\nn = 10\nbogus = 3\n[[symbols]]\nname = "X"\n')
    code, out, err = run(["simulate", bad, "--out", tmp_path / "never"])
    assert code == 2 and str(bad) in err and "bogus" in err
    assert "Traceback" not in err and not (tmp_path / "never").exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.toml"]


def test_unknown_preset_and_bad_batch_are_usage_errors(tmp_path):
    assert run(["simulate", "no_such_preset", "--out", tmp_path / "x"])[0] == 2
    code, _, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "x", "--batch", 0])
    assert code == 2 and "--batch" in err and not (tmp_path / "x").exists()


def test_flow_needs_the_right_number_of_files(tmp_path):
    code, _, err = run(["simulate", "--flow", "lobster", tmp_path / "m.csv", "--out", tmp_path / "x"])
    assert code == 2 and "MESSAGES BOOK" in err
    code, _, err = run(["simulate", "--flow", "xlsx", tmp_path / "m.xlsx", "--out", tmp_path / "x"])
    assert code == 2 and "unknown format" in err


def test_simulate_quantcup_flow_file(tmp_path):
    feed = tmp_path / "feed.csv"
    feed.write_text("seq,op,order_id,trader,side,price,size,cancel_order_id\n"
                    "1,limit,1,ID1,buy,100,10,\n2,limit,2,ID2,sell,100,4,\n3,cancel,,ID1,,,,1\n")
    code, out, err = run(["simulate", "--flow", "quantcup", feed, "--symbol", "QC", "--out", tmp_path / "q"])
    assert code == 0, err
    assert "messages 3" in out and "fills 1" in out and "volume 4" in out
    assert read(tmp_path / "q", "fills", symbol="QC")["qty"].tolist() == [4]


def test_argparse_errors_exit_2_without_traceback():
    code, _, err = run(["book"])
    assert code == 2 and "usage: exsim book" in err and "Traceback" not in err
    assert run(["no-such-command"])[0] == 2
    assert run(["--help"])[0] == 0


def test_ls_lists_runs_symbols_and_segments(run_dir):
    code, out, _ = run(["ls", run_dir, "--files"])
    assert code == 0
    assert "small" in out and "AAA" in out and "0.01" in out
    assert f"{read(run_dir, 'orders').size:,}" in out and "segments/" in out


def test_ls_of_a_missing_directory_is_exit_2(tmp_path):
    code, _, err = run(["ls", tmp_path / "nope"])
    assert code == 2 and err.startswith("exsim: error:") and "nope" in err
    code, _, err = run(["ls", tmp_path])   # exists, but holds no catalog
    assert code == 2 and "not an exsim data directory" in err


def test_export_sqlite_fill_count_equals_the_stored_count(run_dir, tmp_path):
    db = tmp_path / "run.db"
    assert run(["export", run_dir, "all", "--format", "sqlite", "--out", db])[0] == 0
    con = sqlite3.connect(db)
    fills = read(run_dir, "fills")
    assert con.execute("SELECT count(*), sum(qty) FROM deals").fetchone() == (fills.size, int(fills["qty"].sum()))
    assert con.execute("SELECT count(*) FROM orders").fetchone()[0] == 2000
    per = dict(con.execute("SELECT s.name, count(*) FROM fills f JOIN symbols s ON s.id = f.symbol GROUP BY 1"))
    assert per == {"AAA": read(run_dir, "fills", symbol="AAA").size, "BBB": read(run_dir, "fills", symbol="BBB").size}


def test_export_csv_with_symbol_and_seq_filters(run_dir, tmp_path):
    out = tmp_path / "l2.csv"
    assert run(["export", run_dir, "l2", "--format", "csv", "--out", out, "--symbol", "BBB", "--seq", "100:900"])[0] == 0
    # the l2 table's 7 code columns come first; the named ones (time, symbol_name, side_name) follow
    rows = np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2, usecols=range(7))
    want = read(run_dir, "l2", symbol="BBB", seq=(100, 900))
    assert rows.shape[0] == want.size and rows[:, 0].tolist() == want["seq"].tolist()


def test_export_parquet_round_trips(run_dir, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    assert run(["export", run_dir, "events", "--format", "parquet", "--out", tmp_path / "e.parquet"])[0] == 0
    table = pq.read_table(tmp_path / "e.parquet")
    want = read(run_dir, "events")
    assert table.num_rows == want.size and table["order_id"].to_pylist() == want["order_id"].tolist()


def test_export_parquet_without_pyarrow_names_the_extra(run_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # makes `import pyarrow` fail
    code, _, err = run(["export", run_dir, "fills", "--format", "parquet", "--out", tmp_path / "f.parquet"])
    assert code == 2 and "exsim[parquet]" in err and not (tmp_path / "f.parquet").exists()


def test_export_refuses_bad_combinations(run_dir, tmp_path):
    assert run(["export", run_dir, "all", "--format", "csv", "--out", tmp_path / "a.csv"])[0] == 2
    assert run(["export", run_dir, "fills", "--format", "csv", "--out", tmp_path / "a.csv", "--seq", "9:1"])[0] == 2
    code, _, err = run(["export", run_dir, "fills", "--format", "csv", "--out", tmp_path / "a.csv", "--symbol", "ZZZ"])
    assert code == 2 and "ZZZ" in err and "AAA" in err
    assert os.listdir(tmp_path) == []


def test_console_script_runs_as_a_subprocess(run_dir):
    exe = os.path.join(os.path.dirname(sys.executable), "exsim")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "exsim.replay.cli"]
    done = subprocess.run(cmd + ["ls", str(run_dir / "missing")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "exsim: error:" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(cmd + ["ls", str(run_dir)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "AAA" in done.stdout and done.stderr == ""


AAPL = ("/work/shared/data/lobster_AAPL_2012-06-21_level10_head/AAPL_2012-06-21_34200000_57600000_message_10_head.csv",
        "/work/shared/data/lobster_AAPL_2012-06-21_level10_head/AAPL_2012-06-21_34200000_57600000_orderbook_10_head.csv")


@pytest.mark.skipif(not all(os.path.exists(p) for p in AAPL), reason="shared LOBSTER sample not present")
def test_simulate_lobster_flow_names_the_symbol_from_the_file(tmp_path):
    from exsim.scenarios.loaders.lobster import load_lobster

    code, out, err = run(["simulate", "--flow", "lobster", *AAPL, "--out", tmp_path / "aapl"])
    assert code == 0, err
    assert "AAPL" in out and f"messages {load_lobster(*AAPL).orders.size:,}" in out
    assert read(tmp_path / "aapl", "orders", symbol="AAPL").size == load_lobster(*AAPL).orders.size
