"""Compiling exsim's numba kernels ahead of use: ``exsim warmup`` and ``exsim.warmup()``.

A first run compiles every kernel it calls (``exchange.compiling`` says so as it happens); a
Dockerfile, a CI image or a notebook's setup cell can pay that once, ahead, with ``warmup``.
Each group is the smallest set of real calls that reaches its kernels with the argument types
the library passes them, so what it compiles is what later runs load from numba's cache:

- ``engine``    simulate a small scenario through Engine, journal and seal (the plain matching
                kernel, the store's encoders), read every table back (the decoders), every
                encoding's encoders and decoders (``store.codecs.compile_all``), one iceberg order
                (the full matching kernel, which a plain flow never calls), checkpoint and
                restore; the data directory it writes is the other groups' input
- ``venue``     stops, icebergs, GTD orders and a trading day with auctions through the engine
- ``replay``    book_at (L2 and L3), rerun and stats over that directory
- ``verify``    verify over that directory
- ``backtest``  an L3 backtest with a Python strategy and one with the compiled QuoteStrategy,
                and on a 2-row L2 book with two trades, per queue model, a Python strategy
                (``l2loop.drive_l2``) and the compiled QuoteStrategy (``l2loop.run_quotes_l2``),
                once with the fill model's options on. The quote loops
                (``run_quotes_l2``, ``kernels.run_quotes``) are cached per quote function
                (``replay.backtesting.quoteloops``, numba/numba#6264): this group leaves
                them cached for the example market maker's ``mm_quotes``
- ``threads``   the sharded engine (``Engine(threads=2)``)

``engine`` runs first; the others need its data directory and are independent of each other,
so with ``jobs`` > 1 they compile in that many child processes at once (each child's compile
memory is its own: ``jobs`` is also the bound on how many compile at the same time).

Invariants:
- Warming up never changes a result: it only fills numba's on-disk cache (the one
  ``exchange.compiling.cache_location`` names) and removes every file it wrote.
- A group that fails raises: its error names the group (a cache that cannot be written makes
  every later run compile again, which the caller should hear about).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from exsim.exchange.errors import UsageError

__all__ = ["warmup", "GROUPS", "default_jobs"]

GROUPS = ("engine", "venue", "replay", "verify", "backtest", "threads")
# the bound on parallel jobs: the largest compile peak measured (4.3-4.7 GB, the matching
# kernel: docs/benchmarks.md, "Cold start"); the groups run in children compile smaller kernels,
# so this errs on the side of fewer jobs
CHILD_PEAK_BYTES = 4_500_000_000


def _engine(work: str) -> None:
    from exsim.exchange import Engine
    from exsim.replay.simulation import simulate
    from exsim.scenarios import open_flow, uniform_flow
    from exsim.store import read
    from exsim.store.codecs import compile_all

    simulate(open_flow("default"), os.path.join(work, "run"), batch=1000, durability="none",
             quiet=True)
    for table in ("orders", "fills", "l2", "events"):
        read(os.path.join(work, "run"), table)
    compile_all()   # every encoding's kernels, also those this run's columns did not choose
    eng = Engine()
    eng.add_symbol("X", tick_size=1, min_price=1, max_price=10 ** 6)
    eng.process(uniform_flow(500, 1))
    # a venue order: exchange.kernels.process_batch, compiled only when a batch needs it
    # (exchange.plain), here so that the groups run in children after this one load it
    eng.submit("X", "buy", qty=10, price=1, display_qty=5, order_id=1 << 40)
    Engine.restore(eng.checkpoint())


def _venue(work: str) -> None:
    from exsim.exchange import Engine
    from exsim.replay.simulation import simulate
    from exsim.scenarios import open_flow, uniform_flow, venue_mix

    eng = Engine()
    eng.add_symbol("X", tick_size=1, min_price=1, max_price=10 ** 6)
    eng.process(venue_mix(uniform_flow(2000, 1), 7))
    simulate(open_flow("trading_day"), os.path.join(work, "day"), batch=1000,
             durability="none", quiet=True)


def _replay(work: str) -> None:
    from exsim.replay import book_at, rerun, stats

    run = os.path.join(work, "run")
    book_at(run, "JPM", seq=5000)
    book_at(run, "JPM", seq=5000, l3=True)
    rerun(run)
    stats(run, "JPM")


def _verify(work: str) -> None:
    from exsim.replay import verify

    verify(os.path.join(work, "run"))


def _backtest(work: str) -> None:
    import numpy as np

    from exsim.exchange.schema import FILL_DTYPE, L2_DTYPE, Side
    from exsim.replay import L2Flow, backtest
    from exsim.replay.backtesting.queue_models import QUEUE_MODELS
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    from exsim.replay.backtesting.strategies.market_maker import market_maker_fast
    from exsim.scenarios import uniform_flow

    flow = uniform_flow(2000, 1)
    backtest(flow, InventoryMarketMaker(every=50), trader=4_000_000_000)
    backtest(flow, market_maker_fast(every=50), trader=4_000_000_000)
    book = np.zeros(2, L2_DTYPE)            # an L2 book and two trades, for the L2 driver
    book["ts"], book["side"], book["price"], book["qty"] = 1, [Side.BUY, Side.SELL], [99, 101], 5
    trades = np.zeros(2, FILL_DTYPE)
    trades["ts"], trades["price"], trades["qty"], trades["trade_id"] = [2, 3], 101, 3, [1, 2]
    trades["aggressor_side"] = Side.BUY
    for name, model in QUEUE_MODELS.items():
        for options in ({}, {"cross_fills": True, "whole_on_trade_through": True}):
            l2 = L2Flow(book, trades, name="X")
            backtest(l2, InventoryMarketMaker(every=1), queue_model=model(**options))
            backtest(l2, market_maker_fast(every=1), queue_model=model(**options))


def _threads(work: str) -> None:
    from exsim.exchange import Engine
    from exsim.exchange.shards import PARALLEL_MIN
    from exsim.scenarios import uniform_flow

    eng = Engine(threads=2)
    eng.add_symbol("X", tick_size=1, min_price=1, max_price=10 ** 6)
    eng.process(uniform_flow(PARALLEL_MIN, 1))


_STEPS = {"engine": _engine, "venue": _venue, "replay": _replay, "verify": _verify,
          "backtest": _backtest, "threads": _threads}


def default_jobs() -> int:
    """Return how many groups may compile at once here: the cores, and no more children than
    the available memory holds at ``CHILD_PEAK_BYTES`` each (at least 1). Never raises."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        avail = CHILD_PEAK_BYTES
    return max(1, min(cores or 1, avail // CHILD_PEAK_BYTES))


def _run_group(name: str, work: str) -> float:
    t0 = time.perf_counter()
    try:
        _STEPS[name](work)
    except Exception as e:
        raise RuntimeError(f"warmup group {name!r} failed: {type(e).__name__}: {e}") from e
    return time.perf_counter() - t0


def warmup(groups=None, *, jobs: int | None = None, progress=None) -> dict[str, float]:
    """Compile the kernels of ``groups`` (default: all of ``GROUPS``) into numba's on-disk cache.

    ``jobs``: how many groups compile at once in child processes after ``engine`` (default
    ``default_jobs()``; 1 runs everything in this process). ``progress``: called with
    ``(group, seconds)`` as each group ends. Returns {group: wall seconds}; on a warm cache
    each takes well under a second or two. Raises UsageError for an unknown group or jobs < 1,
    RuntimeError naming the group that failed.
    """
    names = list(GROUPS if groups is None else groups)
    unknown = [g for g in names if g not in _STEPS]
    if unknown:
        raise UsageError(f"warmup: unknown group(s) {unknown}; choose from {', '.join(GROUPS)}")
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs < 1:
        raise UsageError(f"warmup: jobs must be >= 1; got {jobs}")
    report = progress or (lambda group, seconds: None)
    work = tempfile.mkdtemp(prefix="exsim-warmup-")
    done: dict[str, float] = {}
    try:
        # every other group reads the data directory the engine group writes
        done["engine"] = _run_group("engine", work)
        report("engine", done["engine"])
        rest = [g for g in names if g != "engine"]
        if jobs == 1 or len(rest) <= 1:
            for g in rest:
                done[g] = _run_group(g, work)
                report(g, done[g])
        else:
            done.update(_in_children(rest, work, jobs, report))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {g: done[g] for g in names}


def _in_children(names: list[str], work: str, jobs: int, report) -> dict[str, float]:
    """Run each group in a child process, ``jobs`` at a time; return their wall seconds.
    Raises RuntimeError with a failed child's last output."""
    pending, running, done, failed = list(names), {}, {}, []
    while pending or running:
        while pending and len(running) < jobs:
            g = pending.pop(0)
            proc = subprocess.Popen([sys.executable, "-m", "exsim.replay.warmup", g, work],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            running[g] = (proc, time.perf_counter())
        time.sleep(0.05)
        for g, (proc, t0) in list(running.items()):
            if proc.poll() is None:
                continue
            out = proc.stdout.read().decode(errors="replace")
            proc.stdout.close()
            del running[g]
            if proc.returncode != 0:
                failed.append(f"warmup group {g!r} failed in its child process:\n{out[-1500:]}")
                continue
            done[g] = time.perf_counter() - t0
            report(g, done[g])
    if failed:
        raise RuntimeError("\n".join(failed))
    return done


if __name__ == "__main__":   # one group in a child of ``warmup(jobs > 1)``: GROUP WORK_DIR
    from exsim.exchange import compiling

    compiling.set_quiet(True)   # the parent speaks for its children
    _run_group(sys.argv[1], sys.argv[2])
