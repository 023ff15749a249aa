"""exsim book, rerun, verify, stats and demo over stored runs, including a run with a planted defect."""

from __future__ import annotations

import sys

import pytest

from exsim import replay
from cli_fixtures import run, write_scenario
from exsim.exchange import Engine
from exsim.scenarios import load_scenario
from exsim.store import Session, read



class TamperedEngine:
    """A real Engine whose ``nth`` fill comes out one tick dearer: a planted defect in the journal.

    The engine state itself is untouched, so only the stored fill is wrong: verify must flag its
    price and rerun must diverge at its seq.
    """

    def __init__(self, engine, nth: int):
        self._engine, self._left, self.tampered_seq = engine, nth, None

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def process(self, orders, *, out=None):
        res = self._engine.process(orders, out=out)
        if self.tampered_seq is None and res.fills.size > self._left:
            fills = res.fills.copy()
            fills["price"][self._left] += 1
            self.tampered_seq = int(fills["seq"][self._left])
            return res._replace(fills=fills)
        self._left -= res.fills.size
        return res


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The small scenario simulated once, in 500-message batches."""
    base = tmp_path_factory.mktemp("cli_replay")
    code, _, err = run(["simulate", write_scenario(base), "--out", base / "run", "--batch", 500, "--fsync", "none"])
    assert code == 0, err
    return base / "run"


@pytest.fixture(scope="module")
def tampered(tmp_path_factory):
    """(data dir, seq of the planted defect): the small scenario with its 10th fill's price raised."""
    base = tmp_path_factory.mktemp("cli_tampered")
    sc = load_scenario(write_scenario(base))
    eng = TamperedEngine(Engine(), nth=9)
    sc.add_symbols(eng._engine)
    session = Session.create(base / "bad", eng, run_info={"scenario": "tampered"}, durability="none")
    orders = sc.generate()
    for lo in range(0, orders.size, 500):
        session.process(orders[lo:lo + 500])
    session.close()
    return base / "bad", eng.tampered_seq


def test_book_prints_the_rebuilt_levels(run_dir):
    view = replay.book_at(run_dir, "AAA", seq=1000, depth=3)
    code, out, _ = run(["book", run_dir, "AAA", "--seq", 1000, "--depth", 3])
    assert code == 0 and "AAA after seq 1,000" in out
    lines = out.splitlines()[3:]
    assert len(lines) == max(view.bids.size, view.asks.size)
    assert [int(l.split("|")[0].split()[-1]) for l in lines] == view.bids["price"].tolist()


def test_book_l3_lists_orders_in_queue_order(run_dir):
    view = replay.book_at(run_dir, "BBB", ts=1_000_000_000, depth=1, l3=True)
    code, out, _ = run(["book", run_dir, "BBB", "--ts", 1_000_000_000, "--depth", 1, "--l3"])
    best_bid = view.orders[(view.orders["side"] == 0) & (view.orders["price"] == view.bids["price"][0])]
    assert code == 0 and "queue" in out
    bid_lines = [l.split() for l in out.splitlines() if l.startswith("buy ")]
    assert [int(f[3]) for f in bid_lines] == best_bid["order_id"].tolist()
    assert [int(f[2]) for f in bid_lines] == list(range(1, best_bid.size + 1))


def test_book_user_errors_exit_2_without_traceback(run_dir):
    for argv, words in ((["book", run_dir, "ZZZ", "--seq", 5], ["ZZZ", "AAA", "BBB"]),
                        (["book", run_dir, "AAA", "--seq", 10**9], ["outside"]),
                        (["book", run_dir, "AAA", "--seq", 5, "--ts", 5], ["not allowed"]),
                        (["book", run_dir / "nope", "AAA", "--seq", 5], ["nope"])):
        code, _, err = run(argv)
        assert code == 2 and "Traceback" not in err and all(w in err for w in words), (argv, err)


def test_rerun_of_a_clean_run_exits_0(run_dir):
    code, out, _ = run(["rerun", run_dir])
    assert code == 0 and "rerun: ok" in out and "2,000" in out


def test_rerun_of_a_tampered_run_exits_1_with_the_seq_and_both_rows(tampered):
    data_dir, seq = tampered
    code, out, _ = run(["rerun", data_dir])
    stored = read(data_dir, "fills", seq=(seq, seq))
    assert code == 1 and f"first divergence in table fills at seq {seq:,}" in out
    price_line = next(l for l in out.splitlines() if l.startswith("price "))
    stored_px, rerun_px = (int(v) for v in price_line.split()[1:3])
    assert stored_px in stored["price"].tolist() and rerun_px == stored_px - 1 and "<--" in price_line


def test_verify_of_a_clean_run_exits_0(run_dir):
    code, out, _ = run(["verify", run_dir])
    assert code == 0 and "verify: ok" in out


def test_verify_of_a_tampered_run_exits_1_naming_the_seq(tampered):
    data_dir, seq = tampered
    code, out, _ = run(["verify", data_dir, "--limit", 0])
    assert code == 1 and "verify: FAILED" in out
    rows = out.split("violations", 1)[1].splitlines()
    assert any(l.split()[:2] == [str(seq), "resting_price"] for l in rows)


def test_stats_table_and_csv_cover_the_series(run_dir):
    series = replay.stats(run_dir, "AAA", levels=3, window_ns=100_000_000)
    code, out, _ = run(["stats", run_dir, "AAA", "--levels", 3, "--window-ns", 100_000_000, "--csv"])
    assert code == 0 and out.splitlines()[0].split(",") == list(series.dtype.names)
    assert len(out.splitlines()) == series.size + 1
    code, out, _ = run(["stats", run_dir, "AAA", "--rows", 5])
    assert code == 0 and "mid" in out and "imbalance" in out


def test_stats_plot_writes_a_png(run_dir, tmp_path):
    pytest.importorskip("matplotlib")
    code, out, err = run(["stats", run_dir, "BBB", "--plot", tmp_path / "bbb.png"])
    assert code == 0, err
    assert (tmp_path / "bbb.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stats_plot_without_matplotlib_names_the_extra(run_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run(["stats", run_dir, "AAA", "--plot", tmp_path / "a.png"])
    assert code == 2 and "exsim[plot]" in err and not (tmp_path / "a.png").exists()


def test_demo_simulates_replays_and_verifies_the_default_scenario(tmp_path):
    code, out, err = run(["demo", "--out", tmp_path / "demo"])
    assert code == 0, out + err
    assert "demo passed" in out
    for step in ("simulate", "book_at", "rerun", "verify"):
        assert any(l.split()[:2] == [step, "ok"] for l in out.splitlines()), step
    assert (tmp_path / "demo" / "catalog.sqlite").exists()


def test_a_flipped_byte_fails_verify_and_rerun_and_export_names_the_file(run_dir, tmp_path):
    import shutil

    bad = tmp_path / "flipped"
    shutil.copytree(run_dir, bad)
    seg = next((bad / "segments" / "fills").rglob("*.seg"))
    data = bytearray(seg.read_bytes())
    data[100] ^= 0xFF
    seg.write_bytes(bytes(data))
    for command in ("verify", "rerun"):
        code, out, _ = run([command, bad])
        assert code == 1 and "corrupt" in out and seg.name in out, command
    code, _, err = run(["export", bad, "fills", "--format", "csv", "--out", tmp_path / "f.csv"])
    assert code == 2 and seg.name in err and "offset" in err and "Traceback" not in err
    assert not (tmp_path / "f.csv").exists()


def test_stats_ts_range_and_bad_options(run_dir):
    series = replay.stats(run_dir, "AAA", ts=(200_000_000, 900_000_000))
    code, out, _ = run(["stats", run_dir, "AAA", "--ts", "200000000:900000000", "--csv"])
    assert code == 0 and len(out.splitlines()) == series.size + 1
    assert run(["stats", run_dir, "AAA", "--levels", 0])[0] == 2
    code, _, err = run(["stats", run_dir, "AAA", "--ts", "late:early"])
    assert code == 2 and "--ts" in err
    assert run(["stats", run_dir, "NOPE"])[0] == 2
