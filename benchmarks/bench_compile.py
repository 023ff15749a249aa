"""Cold-start benchmark: what a user's first command costs in numba compiling, CPU and memory.

Each workload is a command a new user runs first (``exsim demo``; then ``simulate``, ``book``,
``verify``, ``rerun``, ``backtest`` and ``warmup`` on their own). Each runs in a child process of
its own on an empty numba cache (``NUMBA_CACHE_DIR`` set to a fresh directory), so its figures
are those of a first run on a fresh machine: the child's CPU seconds (user + system, from
``wait4``), its wall time and its peak resident memory (``ru_maxrss``). Inside the child a numba
event listener records every top-level compile, which gives the per-kernel-group table: the CPU
seconds and the peak memory reached while compiling the kernels of each module (of the main
process: a kernel compiled in a compile child, ``replay.warmup.in_background``, shows there
only as that child's CPU and peak memory, which the second table reports; the command's CPU
seconds include its children's, and its peak is the largest single process's, as
``/usr/bin/time -v`` reports it, so the table adds the sum of the processes' peaks too).

The commands that read a data directory (book, verify, rerun) get one made beforehand with a
separate, warm cache, so only their own compiling is counted.

Usage: python -m benchmarks.bench_compile [--commands demo,verify] [--out PATH]
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): the ``book`` command alone, on the warm cache (the
figures then measure loading, not compiling).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke

COMMANDS = ("demo", "simulate", "book", "verify", "rerun", "backtest", "warmup")
NEEDS_RUN = ("book", "verify", "rerun")
# what a user types; DIR is the prepared data directory
ARGV = {
    "demo": ["demo"],
    "simulate": ["simulate", "--out", "{work}/sim", "-q"],
    "book": ["book", "{run}", "JPM", "--seq", "5000"],
    "verify": ["verify", "{run}"],
    "rerun": ["rerun", "{run}"],
    "backtest": ["backtest", "default", "--symbol", "JPM"],
    "warmup": ["warmup"],
}

_CHILD = r"""
import json, resource, sys, time
from numba.core import event

records, stack = [], []


class Listener(event.Listener):
    def on_start(self, ev):
        stack.append(time.process_time())

    def on_end(self, ev):
        t0 = stack.pop()
        if not stack:   # a top-level compile: nested ones are inside its time
            f = ev.data["dispatcher"].py_func
            records.append({"module": f.__module__, "function": f.__qualname__,
                            "cpu_s": time.process_time() - t0,
                            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


event.register("numba:compile", Listener())
from exsim.replay.cli import main
from exsim.replay.warmup import background_stats
code = main(json.loads(sys.argv[1]))
own = resource.getrusage(resource.RUSAGE_SELF)
json.dump({"exit": code, "compiles": records, "children": background_stats(),
           "own_cpu_s": own.ru_utime + own.ru_stime, "own_peak_mb": own.ru_maxrss / 1024},
          open(sys.argv[2], "w"))
"""


def run_child(argv: list[str], cache_dir: str | None, cwd: str) -> dict:
    """Run the exsim command ``argv`` in a child process whose numba cache is ``cache_dir``
    (None: this process's, whatever it is); return its exit code, CPU seconds, wall seconds,
    peak RSS (MB) and top-level compiles. Raises RuntimeError if the child cannot report."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    report = os.path.join(cwd, "compile-report.json")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(argv), report], cwd=cwd,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if not os.path.exists(report):
        raise RuntimeError(f"exsim {' '.join(argv)} reported nothing (exit {proc.returncode}):\n"
                           f"{err[-2000:]}")
    with open(report) as f:
        out = json.load(f)
    os.unlink(report)
    out.update(cpu_s=usage.ru_utime + usage.ru_stime, wall_s=wall,
               peak_mb=usage.ru_maxrss / 1024, stderr_tail=err[-400:])
    return out


def groups(compiles: list[dict]) -> list[dict]:
    """Return the compiles summed by module (a kernel group), largest CPU first."""
    by = {}
    for c in compiles:
        g = by.setdefault(c["module"], {"group": c["module"], "kernels": 0, "cpu_s": 0.0,
                                        "peak_mb": 0.0})
        g["kernels"] += 1
        g["cpu_s"] += c["cpu_s"]
        g["peak_mb"] = max(g["peak_mb"], c["peak_mb"])
    return sorted(by.values(), key=lambda g: -g["cpu_s"])


def main(argv=None) -> int:
    """Run the benchmark; print the tables and write the JSON report. Returns 0, or 1 if a
    command failed."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commands", default=",".join(COMMANDS),
                   help=f"comma-separated, from {', '.join(COMMANDS)}")
    p.add_argument("--out", help="JSON report path (default: benchmarks/results/local/compile.json)")
    args = p.parse_args(argv)
    commands = [c for c in args.commands.split(",") if c]
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        p.error(f"unknown command(s) {unknown}; choose from {', '.join(COMMANDS)}")
    smoke = _smoke.enabled()
    if smoke:
        commands = ["book"]
    work = tempfile.mkdtemp(prefix="exsim-bench-compile-")
    # smoke: the process's own (warm) cache; else a cache of its own, so that the data
    # directory's preparation leaves the measured commands' fresh caches untouched
    warm_cache = None if smoke else os.path.join(work, "warm-cache")
    results, failed = [], False
    try:
        run_dir = os.path.join(work, "run")
        if any(c in NEEDS_RUN for c in commands):
            prep = run_child(["simulate", "--out", run_dir, "-q"], warm_cache, work)
            if prep["exit"] != 0:
                raise RuntimeError(f"preparing the data directory failed: {prep['stderr_tail']}")
        for name in commands:
            cache = warm_cache if smoke else tempfile.mkdtemp(prefix=f"cache-{name}-", dir=work)
            cmd = [a.format(work=work, run=run_dir) for a in ARGV[name]]
            r = run_child(cmd, cache, work)
            failed |= r["exit"] != 0
            kids = r.get("children", [])
            results.append({"command": "exsim " + " ".join(ARGV[name]), "name": name,
                            "exit": r["exit"], "cpu_s": round(r["cpu_s"], 1),
                            "wall_s": round(r["wall_s"], 1), "peak_mb": round(r["peak_mb"]),
                            "own_cpu_s": round(r["own_cpu_s"], 1),
                            "own_peak_mb": round(r["own_peak_mb"]),
                            "children": kids,
                            "peak_sum_mb": round(r["own_peak_mb"] + sum(k["peak_mb"] for k in kids)),
                            "compiled": len(r["compiles"]),
                            "compile_cpu_s": round(sum(c["cpu_s"] for c in r["compiles"]), 1),
                            "groups": [dict(g, cpu_s=round(g["cpu_s"], 1),
                                            peak_mb=round(g["peak_mb"]))
                                       for g in groups(r["compiles"])]})
            if not smoke:
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| command | exit | CPU s | wall s | peak RSS MB | kernels compiled | compile CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['exit']} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | "
              f"{r['peak_mb']} | {r['compiled']} | {r['compile_cpu_s']:.1f} |")
    print()
    # the compile children (replay.warmup.in_background): CPU s above counts theirs too (wait4
    # sums a process's reaped children), peak RSS is the largest one process reached, as
    # /usr/bin/time -v reports it; the sum bounds what they held at once
    print("| command | process | kernel groups | CPU s | wall s | peak RSS MB |")
    print("|---|---|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | main | (everything else) | {r['own_cpu_s']:.1f} | "
              f"{r['wall_s']:.1f} | {r['own_peak_mb']} |")
        for k in r["children"]:
            print(f"| {r['name']} | child {k['pid']} | {', '.join(k['groups'])} | "
                  f"{k['cpu_s']:.1f} | {k['wall_s']:.1f} | {k['peak_mb']} |")
            for g in k.get("reports", []):   # the child's own figures per group, in order
                print(f"| {r['name']} | child {k['pid']}: {g['group']} | "
                      f"{'ok' if g.get('ok') else 'FAILED'} | {g.get('cpu_s', 0):.1f} | "
                      f"{g.get('wall_s', 0):.1f} | {g.get('peak_mb', 0)} (so far) |")
        if r["children"]:
            print(f"| {r['name']} | sum of peaks | | | | {r['peak_sum_mb']} |")
    print()
    print("| command | kernel group (module) | kernels | compile CPU s | peak RSS MB while compiling |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        for g in r["groups"]:
            print(f"| {r['name']} | {g['group']} | {g['kernels']} | {g['cpu_s']:.1f} | "
                  f"{g['peak_mb']} |")
    out = _smoke.report_path(args.out, "compile.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"benchmark": "compile", "smoke": smoke, "cpus": os.cpu_count(),
                   "results": results}, f, indent=1)
    print(f"\nwrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
