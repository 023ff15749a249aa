"""Compile the numba kernels into the on-disk cache once, before the test workers start.

Why: on a cold cache (a fresh CI clone) every process that first calls a kernel compiles it,
and compiling is most of a cold run: with ``pytest -n 2`` both workers compiled the engine
kernel at once, and the verifier's kernel (the largest) was compiled inside whichever tests
called it first, at the same time on both workers, while subprocess tests started meanwhile
compiled them a third time. ``tests/conftest.py`` runs this module's groups as parallel
subprocesses in the xdist controller, before any worker exists; every later process then loads
the kernels from the cache.

Groups are balanced for two cores: the verifier's kernel alone takes about as long to compile
as everything else.
Each group is the smallest set of calls that reaches its kernels' entry points with the
argument types the library passes them (a signature not reached here is compiled where it is
first used, as before: the warm-up can make a run faster, never wrong).

Usage: python tests/kernel_warmup.py GROUP  (exits 0 whatever happens inside a group: a failure
there is reported by the tests that exercise the same code).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
GROUPS = ("engine", "verify")


def _engine(tmp: Path) -> list:
    """Engine, checkpoint, store (encode and decode), scenario generators, backtest kernels."""
    sys.path[:0] = [str(HERE / "cli_tests")]
    from cli_fixtures import run, write_scenario

    from exsim.exchange import Engine
    from exsim.replay.backtesting.driver import backtest
    from exsim.replay.backtesting.strategies import InventoryMarketMaker
    from exsim.scenarios import uniform_flow
    from exsim.store import read

    def simulate():
        code, _, err = run(["simulate", write_scenario(tmp), "--out", tmp / "run", "--batch",
                            500, "--fsync", "none", "-q"])
        if code:
            raise RuntimeError(err)
        for table in ("orders", "fills", "l2", "events"):        # read back: the decoders
            read(tmp / "run", table)

    def checkpoint():
        eng = Engine()
        eng.add_symbol("X", tick_size=1, min_price=1, max_price=10 ** 6)
        eng.process(uniform_flow(500, 1))
        Engine.restore(eng.checkpoint())

    def threads():    # the shard kernels (exchange.shard_kernels), on the pool's path too
        import exsim.exchange.shards as shards

        eng = Engine(threads=2)
        eng.add_symbol("X", tick_size=1, min_price=1, max_price=10 ** 6)
        eng.process(uniform_flow(shards.PARALLEL_MIN, 1))

    def backtesting():
        backtest(uniform_flow(500, 1), InventoryMarketMaker(every=50), trader=4_000_000_000)

    return [simulate, checkpoint, threads, backtesting]


def _verify(tmp: Path) -> list:
    """The verifier, on a small simulated run exactly as ``exsim verify`` reads it (its own
    simulation compiles the engine kernel a second time, at the same time as the engine group:
    the same wall time as waiting for that group's run, without coordinating the two)."""
    sys.path[:0] = [str(HERE / "cli_tests")]
    from cli_fixtures import run, write_scenario

    def verify():
        code, _, err = run(["simulate", write_scenario(tmp), "--out", tmp / "run", "--batch",
                            500, "--fsync", "none", "-q"])
        if code:
            raise RuntimeError(err)
        code, out, err = run(["verify", tmp / "run"])
        if code:
            raise RuntimeError(out + err)

    def venue_verify():
        """check_symbol, which a plain run never reaches (replay.verification.plain)."""
        from exsim.replay.warmup import _compile_full_verifier

        _compile_full_verifier()

    return [verify, venue_verify]


def main(group: str) -> int:
    """Run one group's steps, each on its own; print their durations; return 0 (see the module
    docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"exsim-warmup-{group}-"))
    try:
        for step in {"engine": _engine, "verify": _verify}[group](tmp):
            t0 = time.perf_counter()
            try:
                step()
                status = "ok"
            except Exception:   # why broad: the tests report failures; the warm-up saves time
                status = "failed (the tests will show why): " + traceback.format_exc(limit=-1)
            print(f"kernel warm-up {group}.{step.__name__}: {time.perf_counter() - t0:.1f} s, "
                  f"{status.strip()}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(HERE.parent), str(HERE)]
    sys.exit(main(sys.argv[1]))
