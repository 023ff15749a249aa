"""``exsim warmup --groups backtest`` (issue 37 leftovers) reaches the compiled L2 loops: the
Python-strategy driver ``l2loop.drive_l2`` and the njit quote path ``l2loop.run_quotes_l2``,
under every queue model, with and without the fill model's options."""

from __future__ import annotations

from exsim.replay import warmup
from exsim.replay.backtesting import driver, l2loop
from exsim.replay.backtesting import queue_models


def test_the_backtest_group_runs_both_l2_loops_under_every_fill_model(tmp_path, monkeypatch):
    calls = {"drive_l2": 0, "run_quotes_l2": 0}
    models = set()
    real_drive = l2loop.drive_l2

    def counted_drive(*a):
        calls["drive_l2"] += 1
        return real_drive(*a)
    monkeypatch.setattr(l2loop, "drive_l2", counted_drive)
    # run_quotes_l2 is reached through the loop built per quote function (quoteloops)
    real_loop = driver.quote_loop

    def counted_loop(kind, fn):
        loop = real_loop(kind, fn)

        def run(*a):
            calls["run_quotes_l2"] += kind == "l2"
            return loop(*a)
        return run
    monkeypatch.setattr(driver, "quote_loop", counted_loop)
    real_as = queue_models.as_queue_model

    def seen(model):
        m = real_as(model)
        models.add((m.name, m.cross_fills, m.whole_on_trade_through))
        return m
    monkeypatch.setattr(queue_models, "as_queue_model", seen)
    warmup._backtest(str(tmp_path))
    assert calls["drive_l2"] > 0 and calls["run_quotes_l2"] > 0
    assert {(n, o, o) for n in queue_models.QUEUE_MODELS for o in (False, True)} <= models
