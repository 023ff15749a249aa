"""Times of day on a real trading day (issue 40, item 1): a LOBSTER run keeps its trading date
(from the file name) and time zone (New York, or ``--tz``); ``--ts`` reads and every time prints
in that zone; a time outside the run is an error naming the run's first and last times."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from cli_fixtures import run
from exsim.exchange.errors import UsageError
from exsim.replay.timefmt import RunClock
from exsim.scenarios.loaders.lobster import date_from_name, load_lobster

DATA = Path("/work/shared/data/lobster_AMZN_2012-06-21_level1")
MSG = DATA / "AMZN_2012-06-21_34200000_57600000_message_1.csv"
BOOK = DATA / "AMZN_2012-06-21_34200000_57600000_orderbook_1.csv"
needs_data = pytest.mark.skipif(not MSG.exists(), reason="shared LOBSTER sample not present")
TEN = 36_000 * 10**9            # 10:00:00 after midnight, as a LOBSTER ts


def test_the_trading_date_comes_from_the_file_name():
    assert date_from_name(MSG) == "2012-06-21"
    assert date_from_name("AMZN_2012-13-40_1_2_message_1.csv") is None
    assert date_from_name("messages.csv") is None


def test_a_new_york_day_reads_and_prints_new_york_times():
    ny = RunClock(tz="America/New_York", date="2012-06-21", first=34_200 * 10**9, last=57_600 * 10**9)
    # 2012-06-21 is summer time: New York is UTC-4
    assert ny.parse("10:00") == TEN
    assert ny.parse("2012-06-21T10:00:00") == TEN
    assert ny.parse("2012-06-21T14:00:00Z") == TEN
    assert ny.parse("2012-06-21T16:00:00+02:00") == TEN
    assert ny.text(TEN) == "2012-06-21 10:00:00 America/New_York"
    winter = RunClock(tz="America/New_York", date="2012-01-03")
    assert winter.parse("2012-01-03T15:00:00Z") == TEN   # UTC-5 in January
    old = RunClock()   # a run recorded before runs kept their date and zone: UTC, as then
    assert old.parse("00:00:01.5") == 1_500_000_000 and old.text(1_500_000_000) == "00:00:01.500000000 UTC"


def test_a_time_outside_the_run_names_its_first_and_last_times():
    ny = RunClock(tz="America/New_York", date="2012-06-21", first=34_200 * 10**9, last=57_600 * 10**9)
    with pytest.raises(UsageError, match=r"before the run r: its messages run from 2012-06-21 "
                                         r"09:30:00 America/New_York to 2012-06-21 16:00:00"):
        ny.check(TEN - 4 * 3600 * 10**9, TEN - 4 * 3600 * 10**9, "06:00", "r")
    ny.check(0, TEN, "..10:00", "r")   # a range that overlaps the run is fine


@needs_data
def test_load_lobster_records_date_and_zone():
    lf = load_lobster(MSG, BOOK)
    assert (lf.date, lf.tz) == ("2012-06-21", "America/New_York")
    assert load_lobster(MSG, BOOK, tz="Europe/London", date="2012-06-22").tz == "Europe/London"
    with pytest.raises(UsageError, match="Mars/Olympus"):
        load_lobster(MSG, BOOK, tz="Mars/Olympus")


@pytest.fixture(scope="module")
def amzn(tmp_path_factory):
    if not MSG.exists():
        pytest.skip("shared LOBSTER sample not present")
    out = tmp_path_factory.mktemp("amzn") / "amzn"
    code, stdout, err = run(["simulate", "--flow", "lobster", MSG, BOOK, "--out", out,
                             "--fsync", "none", "--quiet"])
    assert code == 0, err
    assert "trading day 2012-06-21, times in America/New_York" in stdout
    return str(out)


def test_book_at_a_utc_instant_before_the_open_is_an_error(amzn):
    code, out, err = run(["book", amzn, "AMZN", "--ts", "2012-06-21T10:00:00Z"])
    assert code == 2 and not out
    assert "2012-06-21 06:00:00 America/New_York is before the run" in err
    assert "09:30:00.017460000 America/New_York to 2012-06-21 15:59:59.959360000 America/New_York" in err


def test_book_past_the_last_message_is_an_error_not_the_last_book(amzn):
    for ts in ("17:00", "2012-06-22", str(60_000 * 10**9)):
        code, out, err = run(["book", amzn, "AMZN", "--ts", ts])
        assert code == 2 and "is after the run" in err and "15:59:59.959360000" in err, (ts, err)


def test_book_reads_new_york_times_and_prints_its_zone(amzn):
    local = run(["book", amzn, "AMZN", "--ts", "10:00", "--depth", "2"])
    iso = run(["book", amzn, "AMZN", "--ts", "2012-06-21T10:00:00", "--depth", "2"])
    utc = run(["book", amzn, "AMZN", "--ts", "2012-06-21T14:00:00Z", "--depth", "2"])
    assert local[0] == iso[0] == utc[0] == 0 and local[1] == iso[1] == utc[1]
    assert "2012-06-21 09:59:58.495270000 America/New_York" in local[1].splitlines()[0]


def test_export_and_stats_of_an_iso_range_hold_rows(amzn):
    code, out, err = run(["export", amzn, "l2", "--format", "csv", "--out", "-", "--ts",
                          "2012-06-21T10:00:00..2012-06-21T10:01:00"])
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) > 100, err
    assert all(TEN <= int(r["ts"]) <= TEN + 60 * 10**9 for r in rows)
    code, out, err = run(["stats", amzn, "AMZN", "--ts", "2012-06-21T14:00:00Z..2012-06-21T14:01:00Z"])
    assert code == 0 and "no rows" not in out and "time in America/New_York, 2012-06-21" in out
    for cmd in (["export", amzn, "l2", "--format", "csv", "--out", "-"], ["stats", amzn, "AMZN"]):
        code, _, err = run(cmd + ["--ts", "2012-06-21T10:00:00Z..2012-06-21T10:01:00Z"])
        assert code == 2 and "before the run" in err and "09:30:00.017460000" in err


def test_tz_says_where_the_file_was_recorded(amzn, tmp_path):
    out = tmp_path / "london"
    code, _, err = run(["simulate", "--flow", "lobster", MSG, BOOK, "--out", out, "--fsync", "none",
                        "--quiet", "--tz", "Europe/London"])
    assert code == 0, err
    code, out_text, _ = run(["book", out, "AMZN", "--ts", "2012-06-21T09:00:00Z", "--depth", "1"])
    assert code == 0 and "2012-06-21 09:59:58.495270000 Europe/London" in out_text
    code, _, err = run(["simulate", "--flow", "lobster", MSG, BOOK, "--out", tmp_path / "x",
                        "--tz", "Mars/Olympus"])
    assert code == 2 and "Mars/Olympus" in err and "not a time zone" in err


def test_the_stats_plot_axis_names_the_zone_and_day(amzn, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import exsim.replay.timefmt as timefmt

    seen = []
    real = timefmt.time_of_day_axis

    def spy(ax, base, span_ns, epoch, zone=None):
        real(ax, base, span_ns, epoch, zone)
        seen.append(ax.get_xlabel())
    monkeypatch.setattr(timefmt, "time_of_day_axis", spy)
    code, _, err = run(["stats", amzn, "AMZN", "--ts", "10:00..10:05", "--plot", tmp_path / "p.png"])
    assert code == 0, err
    assert seen == ["time of day (America/New_York, 2012-06-21)"]


def test_ls_says_when_the_run_happened_in_its_zone(amzn):
    code, out, err = run(["ls", amzn])
    assert code == 0, err
    assert "created (UTC)" in out
    assert ("messages from 2012-06-21 09:30:00.017460000 America/New_York to 2012-06-21 "
            "15:59:59.959360000 America/New_York") in out


@pytest.mark.parametrize("date, tz, want", [
    ("20x2-06-21", "America/New_York", (None, "America/New_York")),
    ("20120621", "UTC", (None, "UTC")),
    ("2012-06-21", "../../etc/passwd", ("2012-06-21", "UTC"))])
def test_a_run_recording_a_bad_date_or_zone_reads_without_it(tmp_path, caplog, date, tz, want):
    # a catalog row is input like any file: a date or zone that is not one is warned about and
    # left out, never a crash in every later book, export or stats of the run
    import numpy as np

    from exsim.exchange import ORDER_DTYPE, Engine, Kind, Side
    from exsim.replay.rundir import run_clock
    from exsim.store import Session

    msgs = np.zeros(2, ORDER_DTYPE)
    msgs["ts"], msgs["order_id"], msgs["price"], msgs["qty"] = [1, 2], [1, 2], [100, 101], [5, 5]
    msgs["trader"], msgs["kind"], msgs["side"] = 1, Kind.NEW, [Side.BUY, Side.SELL]
    engine = Engine()
    engine.add_symbol("X")
    session = Session.create(str(tmp_path / "d"), engine, durability="none",
                             run_info={"scenario": "t", "date": date, "tz": tz})
    session.process(msgs)
    session.close()
    clock = run_clock(str(tmp_path / "d"))
    assert (clock.date, clock.tz) == want
    assert clock.origin() >= 0 and clock.first == 1 and clock.last == 2
    assert "times are read" in caplog.text
