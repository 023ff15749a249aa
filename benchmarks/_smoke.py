"""Smoke mode for the benchmark scripts: ``EXSIM_BENCH_SMOKE=1`` makes the exact documented
command finish in seconds (sizes and repeats shrunk) and write its JSON outside the checkout, so
tests/docs_tests/test_docs_commands.py can run every documented benchmark command for real without touching
the committed results.

Off (the default), every function returns what the script asked for, unchanged: a real benchmark
run is never affected. On, figures are meaningless as measurements; only that the command runs,
agrees where it checks agreement, and writes a well-formed report is being tested.

    from benchmarks._smoke import scaled, results_path
    n = scaled(args.n, 20_000)                     # 20,000 in smoke mode, args.n otherwise
    out = results_path("store.json")               # benchmarks/results/... or the smoke dir
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["ENV", "DIR_ENV", "enabled", "scaled", "results_dir", "results_path", "out_path"]

ENV = "EXSIM_BENCH_SMOKE"          # "1": smoke mode
DIR_ENV = "EXSIM_BENCH_SMOKE_DIR"  # where smoke reports go (default: <tmp>/exsim-bench-smoke)
RESULTS = Path(__file__).resolve().parent / "results"


def enabled() -> bool:
    """Return True when the environment asks for smoke mode (EXSIM_BENCH_SMOKE set, not 0/empty)."""
    return os.environ.get(ENV, "").strip() not in ("", "0", "false", "no")


def scaled(full: int, smoke: int) -> int:
    """Return ``min(full, smoke)`` in smoke mode, ``full`` otherwise (a size, a run count ...)."""
    return min(full, smoke) if enabled() else full


def results_dir() -> Path:
    """Return the directory reports go to: benchmarks/results, or in smoke mode $EXSIM_BENCH_SMOKE_DIR
    (default <tmp>/exsim-bench-smoke), created if missing."""
    d = Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / "exsim-bench-smoke") \
        if enabled() else RESULTS
    d.mkdir(parents=True, exist_ok=True)
    return d


def results_path(name: str) -> Path:
    """Return where report ``name`` (e.g. "store.json") goes: see ``results_dir``."""
    return results_dir() / name


def out_path(out: str | os.PathLike) -> Path:
    """Return where a script's ``--out PATH`` goes: PATH itself, or in smoke mode the same file name
    in the smoke directory (so a documented ``--out benchmarks/results/x.json`` never overwrites a
    committed report with smoke figures)."""
    return results_path(Path(out).name) if enabled() else Path(out)
