"""Times as people write them: ``--ts 10:00:00`` and ISO timestamps wherever the CLI takes a
timestamp (book --ts, stats --ts, export --ts), and plots with a time-of-day axis."""

from __future__ import annotations

import csv
import io
import os

import pytest

from cli_fixtures import run, write_scenario
from exsim.exchange.errors import UsageError
from exsim.replay.timefmt import DAY_NS, clock_text, parse_time, parse_time_range

BTC_DAY = 1_723_075_200 * 10**9   # 2024-08-08T00:00:00Z


@pytest.mark.parametrize("text,base,want", [
    ("36000000000000", 0, 36_000 * 10**9),
    ("10:00", 0, 36_000 * 10**9),
    ("10:00:00", BTC_DAY, BTC_DAY + 36_000 * 10**9),
    ("00:00:02.5", 0, 2_500_000_000),
    ("23:59:59.123456789", 0, DAY_NS - 10**9 + 123_456_789),
    ("2024-08-08T10:00:00Z", 0, BTC_DAY + 36_000 * 10**9),
    ("2024-08-08 12:00:00+02:00", 0, BTC_DAY + 36_000 * 10**9),
    ("2024-08-08T10:00:00.000000001", 0, BTC_DAY + 36_000 * 10**9 + 1),
    ("2024-08-08", 0, BTC_DAY),
])
def test_parse_time_takes_ns_times_of_day_and_iso(text, base, want):
    assert parse_time(text, "--ts", base) == want


@pytest.mark.parametrize("text", ["25:00", "10:60", "2024-02-30T00:00", "tomorrow", "10h"])
def test_a_time_that_is_none_of_the_forms_names_the_option(text):
    with pytest.raises(UsageError, match=f"--ts '{text}'"):
        parse_time(text, "--ts")


def test_ranges_take_dots_between_times_and_keep_the_integer_colon_form():
    assert parse_time_range("10:00..10:30") == (36_000 * 10**9, 37_800 * 10**9)
    assert parse_time_range("100:2000") == (100, 2000)
    assert parse_time_range("..00:00:01") == (0, 10**9)
    assert clock_text(BTC_DAY + 36_000 * 10**9 + 5 * 10**8, BTC_DAY, 3) == "10:00:00.500"
    assert clock_text(BTC_DAY + DAY_NS, BTC_DAY) == "+1d 00:00:00"
    with pytest.raises(UsageError, match="low bound is above"):
        parse_time_range("10:00:00..09:00:00")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("times")
    scenario = write_scenario(root)
    out = str(root / "run")
    code, _, err = run(["simulate", scenario, "--out", out, "--quiet"])
    assert code == 0, err
    return out


def test_book_at_a_time_of_day_is_the_book_at_that_ns(small_run):
    by_ns = run(["book", small_run, "AAA", "--ts", "1500000000"])
    by_clock = run(["book", small_run, "AAA", "--ts", "00:00:01.5"])
    assert by_ns[0] == by_clock[0] == 0, by_clock[2]
    assert by_ns[1] == by_clock[1]
    assert "UTC" in by_clock[1].splitlines()[0] and "00:00:01" in by_clock[1].splitlines()[0]


def test_book_with_a_bad_time_is_one_usage_line(small_run):
    code, out, err = run(["book", small_run, "AAA", "--ts", "noon"])
    assert code == 2 and not out and err.startswith("exsim: error: --ts 'noon'")


def test_stats_and_export_take_time_ranges(small_run, tmp_path):
    a = run(["stats", small_run, "AAA", "--csv", "--ts", "1000000000:1200000000"])
    b = run(["stats", small_run, "AAA", "--csv", "--ts", "00:00:01..00:00:01.2"])
    assert a[0] == b[0] == 0 and a[1] == b[1] and len(a[1].splitlines()) > 2
    out = tmp_path / "l2.csv"
    code, _, err = run(["export", small_run, "l2", "--format", "csv", "--out", out, "--ts",
                        "00:00:01..00:00:01.2"])
    assert code == 0, err
    ts = [int(r["ts"]) for r in csv.DictReader(io.StringIO(out.read_text()))]
    assert ts and min(ts) >= 10**9 and max(ts) <= 1_200_000_000


def test_the_stats_plot_labels_times_of_day(small_run, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from exsim.replay.cli import inspect as cli_inspect

    labels = []
    real = cli_inspect._plot_module

    def spy():
        plt = real()
        orig = plt.subplots

        def subplots(*a, **k):
            fig, axes = orig(*a, **k)
            orig_save = fig.savefig

            def savefig(*sa, **sk):
                fig.canvas.draw()
                labels.extend(t.get_text() for t in axes[-1].get_xticklabels())
                labels.append(axes[-1].get_xlabel())
                return orig_save(*sa, **sk)
            fig.savefig = savefig
            return fig, axes
        monkeypatch.setattr(plt, "subplots", subplots)
        return plt
    monkeypatch.setattr(cli_inspect, "_plot_module", spy)
    path = tmp_path / "s.png"
    code, _, err = run(["stats", small_run, "AAA", "--plot", path])
    assert code == 0 and os.path.getsize(path) > 0, err
    assert any(t.startswith("00:00:") for t in labels), labels
    assert "time of day" in labels[-1]
