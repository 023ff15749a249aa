"""Smoke mode for the benchmark scripts: ``EXSIM_BENCH_SMOKE=1`` makes the exact documented
command finish in seconds (sizes and repeats shrunk) and write its JSON outside the checkout, so
tests/docs_tests/test_docs_commands.py can run every documented benchmark command for real without touching
the committed results.

Reports go by default to benchmarks/results/local/ (ignored by git), so running a documented
command never dirties the checkout; the committed reports in benchmarks/results/ are refreshed
only by naming them with ``--out benchmarks/results/NAME.json``.

Off (the default), every function returns what the script asked for, unchanged: a real benchmark
run is never affected. On, figures are meaningless as measurements; only that the command runs,
agrees where it checks agreement, and writes a well-formed report is being tested.

    from benchmarks._smoke import scaled, results_path
    n = scaled(args.n, 20_000)                     # 20,000 in smoke mode, args.n otherwise
    out = report_path(args.out, "store.json")      # --out, else results/local/ or the smoke dir
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["ENV", "DIR_ENV", "enabled", "scaled", "results_dir", "results_path", "out_path",
           "report_path", "LOCAL"]

ENV = "EXSIM_BENCH_SMOKE"          # "1": smoke mode
DIR_ENV = "EXSIM_BENCH_SMOKE_DIR"  # where smoke reports go (default: <tmp>/exsim-bench-smoke)
RESULTS = Path(__file__).resolve().parent / "results"   # the committed reports
LOCAL = RESULTS / "local"                                # a run's default report (git-ignored)


def enabled() -> bool:
    """Return True when the environment asks for smoke mode (EXSIM_BENCH_SMOKE set, not 0/empty)."""
    return os.environ.get(ENV, "").strip() not in ("", "0", "false", "no")


def scaled(full: int, smoke: int) -> int:
    """Return ``min(full, smoke)`` in smoke mode, ``full`` otherwise (a size, a run count ...)."""
    return min(full, smoke) if enabled() else full


def results_dir() -> Path:
    """Return the directory reports go to without ``--out``: benchmarks/results/local (untracked),
    or in smoke mode $EXSIM_BENCH_SMOKE_DIR (default <tmp>/exsim-bench-smoke), created if missing."""
    d = Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / "exsim-bench-smoke") \
        if enabled() else LOCAL
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


def report_path(out: str | os.PathLike | None, name: str) -> Path:
    """Return where a script's report goes: ``out_path(out)`` when ``--out`` was given, else
    ``results_path(name)`` (benchmarks/results/local/NAME, or the smoke directory)."""
    return out_path(out) if out else results_path(name)
