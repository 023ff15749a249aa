"""``exsim simulate`` and ``exsim backtest`` on the trading_day preset (needs the issue-16 engine):
the simulate summary counts the day's auctions, the backtest shows the auction fills apart."""

from __future__ import annotations

import json

from cli_fixtures import run

SMALL = ["--param", "qty=40"]


def _day(tmp_path):
    p = tmp_path / "day.toml"
    from exsim.scenarios.scenario import load_scenario
    text = load_scenario("trading_day").source
    body = open(text).read().replace("n = 20_000", "n = 3_000").replace("call_messages = 400",
                                                                         "call_messages = 120")
    p.write_text(body)
    return p


def test_simulate_prints_the_phase_changes_and_auctions(tmp_path):
    code, out, _ = run(["simulate", _day(tmp_path), "--out", tmp_path / "run", "--fsync", "none"])
    assert code == 0
    assert "phase changes 6  auctions 3" in out


def test_backtest_shows_auction_fills_apart(tmp_path):
    day = _day(tmp_path)
    argv = ["backtest", day, "--strategy", "exsim.replay.backtesting.strategies:ClosingAuctionJoiner",
            *SMALL]
    code, out, _ = run(argv + ["--json"])
    assert code == 0
    js = json.loads(out)
    assert js["auction"]["auction_volume"] == 40 and js["auction"]["auction_fills"] >= 1
    code, out, _ = run(argv + ["--report"])
    assert code == 0 and "auction fills" in out and "auction_pnl" in out


def test_a_run_without_auction_fills_prints_no_auction_table(tmp_path):
    code, out, _ = run(["backtest", "default", "--symbol", "JPM", "--json"])
    assert code == 0 and "auction" not in json.loads(out)
