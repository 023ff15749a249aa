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
memory is its own: ``jobs`` is also the bound on how many compile at the same time). With
``jobs`` > 1 on a cold cache, the store's codecs and (when ``verify`` is asked for) the
verifier's kernel compile in a child meanwhile (``in_background``, below), memory allowing
beside the engine group's own compile.

Invariants:
- Warming up never changes a result: it only fills numba's on-disk cache (the one
  ``exchange.compiling.cache_location`` names) and removes every file it wrote.
- A group that fails raises: its error names the group (a cache that cannot be written makes
  every later run compile again, which the caller should hear about).

Compiling in child processes while a command works (``in_background``, used by ``exsim demo``):
a first run spends most of its time compiling kernels that do not depend on each other, so on a
cold cache the independent groups of ``BACKGROUND`` (today ``codecs``: the store's encoders and
decoders; ``verify``: the verifier's kernel) compile in child processes while this process
compiles and runs the engine. Each background group is named here with what compiles it (a
step that needs no data from the parent), the modules whose cache says whether it is cold, and
the packages whose kernels must wait for it. Invariants:

- A warm cache starts no child and prints nothing: ``cold`` reads numba's cache index only.
- This process never compiles a kernel a child is compiling: each kernel of a background
  group's packages waits (``exchange.compiling.hold``, at numba's cache lookup) until the child
  reports the group done, then loads the child's entry from the cache. If the child failed or
  died, the wait says so on stderr and this process compiles the kernel itself, as without a
  child: a child can make a run faster, never wrong, never fail it.
- Memory is bounded: at most ``background_children()`` children (the cores less the one this
  process compiles on, at least one; no more than the available memory holds at each group's
  measured compile peak; ``EXSIM_COMPILE_CHILDREN`` caps it, 0 for none). Each child's CPU and
  peak memory are reported on stderr and kept in ``background_stats()``.
- No child outlives its parent: ``close`` (the context manager's exit) stops them, and a child
  exits by itself when its parent dies (the end of its stdin pipe, and on Linux a parent-death
  signal), so killing the parent leaves no orphan compiling. A child killed mid-compile leaves
  nothing wrong in the cache (numba writes each file aside and renames it into place).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from exsim.exchange.errors import UsageError

__all__ = ["warmup", "GROUPS", "default_jobs", "BACKGROUND", "BackgroundGroup", "in_background",
           "start_background", "background_children", "background_stats", "cold"]

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

    verify(os.path.join(work, "run"))   # a plain run: the plain verifier kernel
    _compile_full_verifier()


def _compile_full_verifier() -> None:
    """The verifier's full kernel (``check_symbol``), which a plain run never reaches (the plain
    kernel, ``replay.verification.plain``, takes it): the rows of one accepted GTD order,
    written by hand, because a venue flow through the engine would compile the engine's full
    kernel here as well."""
    import numpy as np

    from exsim.exchange.schema import Event, Tif
    from exsim.replay import verify_arrays
    from exsim.store.tables import STORED_DTYPES

    orders = np.zeros(1, STORED_DTYPES["orders"])
    orders["seq"], orders["ts"], orders["order_id"], orders["price"] = 1, 1, 1, 100
    orders["qty"], orders["tif"], orders["expire_ts"] = 5, Tif.GTD, 10
    events = np.zeros(1, STORED_DTYPES["events"])
    events["seq"], events["ts"], events["order_id"] = 1, 1, 1
    events["event"], events["leaves_qty"] = Event.ACCEPTED, 5
    fills, l2 = np.zeros(0, STORED_DTYPES["fills"]), np.zeros(0, STORED_DTYPES["l2"])
    verify_arrays(orders, fills, l2, events)


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
    # why: the engine group is the longest (both matching kernels); the store's codecs (which
    # it calls) and the verifier compile meanwhile in a child on a cold cache, memory allowing
    # beside the matching kernel's compile (CHILD_PEAK_BYTES)
    ahead = ["codecs"] + (["verify"] if "verify" in names else [])
    try:
        with in_background(ahead if jobs > 1 else [], here="the engine group",
                           reserve=CHILD_PEAK_BYTES) as bg:
            # every other group reads the data directory the engine group writes
            done["engine"] = _run_group("engine", work)
            for g in (bg.groups if bg is not None else ()):
                bg.wait(g)   # before the groups below start processes of their own
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


# -- compiling independent kernel groups in child processes (see the module docstring) --------

@dataclasses.dataclass(frozen=True)
class BackgroundGroup:
    """A kernel group that compiles in a child process while its parent works.

    ``step``: "module:function" the child calls (no arguments, no data from the parent: it
    reaches the group's kernels with the argument types the library passes them, so the
    parent later loads what it compiled). ``probe``: modules, or packages of modules, whose
    cached kernels say whether the group is warm (each must hold one for today's source; a
    package, in any of its modules). ``packages``: the modules, or
    packages of modules, whose kernels wait for the child in the parent. ``peak_bytes``: the
    child's measured peak memory (bounds how many children run at once)."""

    name: str
    label: str
    step: str
    probe: tuple
    packages: tuple
    peak_bytes: int


def _compile_codecs() -> None:
    """The codec kernels a seal and a read of a plain run call (those ``exsim demo`` calls):
    every encoding's encoder for a uint64 column, its decoder into uint64, FOR's into the
    narrower widths a stored table decodes, and the column helpers. Why not
    ``store.codecs.compile_all`` (every encoding into every width, for ``exsim warmup``): it
    compiles 25 signatures where a first demo needs 12, which cost ~10 s more of CPU here;
    a signature not reached here compiles where it is first used, as without a child."""
    import numpy as np

    from exsim.store.codecs.block import DICT, ENCODINGS, FOR, PLAIN, decode, encode_view
    from exsim.store.codecs.columns import gather_u64, seq_u64, take_u64

    rng = np.random.default_rng(0)
    # runs of a few small values (as compile_all's): every encoding takes them
    small = np.repeat(rng.integers(0, 9, 600), rng.integers(1, 4, 600))[:1000].astype(np.uint64)
    for enc in ENCODINGS:
        if enc != PLAIN:
            block = bytes(encode_view(small, np.dtype(np.uint64), enc))
            # (a dictionary column is a narrow one: a side, a kind, a status)
            dtype = np.dtype(np.uint8 if enc == DICT else np.uint64)
            assert np.array_equal(decode(block, small.size, dtype), small.astype(dtype)), enc
    block = bytes(encode_view(small, np.dtype(np.uint64), FOR))
    for dtype in (np.uint32, np.uint8):
        assert np.array_equal(decode(block, small.size, np.dtype(dtype)), small.astype(dtype))
    wide = (small << np.uint64(40)) + np.arange(small.size, dtype=np.uint64) * np.uint64(3)
    encode_view(wide, np.dtype(np.uint64), DICT)   # a wide dictionary: its look-up kernel
    narrow = small.astype(np.uint8)
    gather_u64([narrow], False)
    seq_u64(np.array([1], np.int64), np.array([3], np.int64))
    idx = np.arange(3, dtype=np.int64)
    take_u64(small, idx, 0, 3)
    take_u64(narrow, idx, 0, 3)


def _compile_verifier() -> None:
    """The verifier's kernel for the tables a plain run stores (limit orders, no auctions: the
    rows ``exsim demo`` verifies), through ``verify_arrays``, which calls it with the same
    array types ``verify`` reads from a data directory."""
    import numpy as np

    from exsim.exchange import Kind, Side
    from exsim.replay import verify_arrays
    from exsim.store.tables import STORED_DTYPES

    orders = np.zeros(4, STORED_DTYPES["orders"])
    orders["seq"] = orders["ts"] = orders["order_id"] = [1, 2, 3, 4]
    orders["price"], orders["qty"], orders["trader"] = [100, 101, 99, 100], 1, [1, 2, 3, 1]
    orders["kind"] = [Kind.NEW, Kind.NEW, Kind.NEW, Kind.CANCEL]
    orders["side"] = [Side.BUY, Side.SELL, Side.BUY, Side.BUY]
    empty = {t: np.zeros(0, STORED_DTYPES[t]) for t in ("fills", "l2", "events")}
    # the rows are not a consistent run (no reports): the kernel reports violations, which is
    # not the point; compiling it for these types is
    verify_arrays(orders, empty["fills"], empty["l2"], empty["events"])


# measured peaks of a child compiling the group alone (python -m benchmarks.bench_compile
# --commands demo: docs/benchmarks.md, "Cold start"); the verifier's is the largest compile a
# first demo makes
BACKGROUND = {
    "codecs": BackgroundGroup(
        "codecs", "the store's codecs", "exsim.replay.warmup:_compile_codecs",
        probe=("exsim.store.codecs.stream", "exsim.store.codecs.delta", "exsim.store.codecs.rle",
               "exsim.store.codecs.dictionary", "exsim.store.codecs.columns"),
        packages=("exsim.store.codecs",), peak_bytes=600_000_000),
    "verify": BackgroundGroup(
        "verify", "the verifier's kernel", "exsim.replay.warmup:_compile_verifier",
        # why the package: which of its kernels a plain run reaches is the verifier's choice
        # (a kernel for plain rows may join check_symbol); any of them cached means this group
        # ran here for today's sources, and a stale one alone compiles where it is used
        probe=("exsim.replay.verification",),
        packages=("exsim.replay.verification",), peak_bytes=800_000_000),
}
ENV_CHILDREN = "EXSIM_COMPILE_CHILDREN"   # at most this many compile children; 0: none
# what the parent of a first demo peaks at meanwhile (the plain matching kernel's compile)
PARENT_PEAK_BYTES = 1_000_000_000
WAIT_LIMIT_S = 1800.0   # a child silent this long while the parent waits is stopped (hung)

_STATS: list = []        # background_stats(): one dict per finished child of this process


def _modules(name: str) -> list:
    """The module ``name`` and, for a package, every module in it (imported)."""
    mod = importlib.import_module(name)
    found = [mod]
    for info in pkgutil.iter_modules(getattr(mod, "__path__", None) or [], name + "."):
        try:
            found.append(importlib.import_module(info.name))
        except Exception:   # why broad: a module that cannot import has no kernel to wait for
            continue
    return found


def cold(group: BackgroundGroup) -> bool:
    """Return True when ``group``'s kernels are not in numba's on-disk cache for today's
    sources (a probe module has no cached kernel), False when they are or when that cannot be
    told (then nothing starts: the kernels compile where they are used, as without children).
    Reads cache indexes only; never raises."""
    from exsim.exchange import compiling

    try:
        for name in group.probe:
            if not any(compiling.cached(d) for m in _modules(name)
                       for d in compiling.dispatchers(m)):
                return True
    except Exception:   # why broad: an unreadable cache must not stop the command
        return False
    return False


def _available_bytes() -> int:
    """Memory the system can give without swapping (MemAvailable), else free memory; a large
    number if neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def background_children(groups, reserve: int = PARENT_PEAK_BYTES) -> int:
    """Return how many child processes may compile ``groups`` (BackgroundGroups) here: one per
    core less the one this process compiles on (at least one), no more than the groups, no
    more than the available memory, less ``reserve`` bytes for this process's own compiling,
    holds at the largest group's measured peak (0 when it does not hold one), and no more than
    ``$EXSIM_COMPILE_CHILDREN``. Never raises."""
    groups = list(groups)
    if not groups:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = min(len(groups), max(1, (cores or 1) - 1),
            max(0, _available_bytes() - int(reserve)) // max(g.peak_bytes for g in groups))
    cap = os.environ.get(ENV_CHILDREN, "").strip()
    if cap:
        try:
            n = min(n, max(0, int(cap)))
        except ValueError:
            pass   # why: a malformed cap must not stop a run; the default bound still holds
    return max(0, n)


def background_stats() -> list:
    """Return one dict per compile child this process has finished: ``groups``, ``pid``,
    ``exit``, ``wall_s``, ``cpu_s`` (user + system), ``peak_mb`` (its peak resident memory)
    and ``reports`` (the child's own line per group: ``ok``, ``wall_s``, ``cpu_s``, and
    ``peak_mb`` so far), for reports such as benchmarks/bench_compile.py. Never raises."""
    return [dict(s) for s in _STATS]


class Background:
    """Child processes compiling background groups; build with ``start_background``."""

    def __init__(self, groups: list, children: int):
        self.groups = {g.name: g for g in groups}
        self._n = children
        self._done = {g.name: threading.Event() for g in groups}
        self._result: dict = {}
        self._told: set = set()
        self._procs: list = []
        self._readers: list = []
        self._releases: list = []
        self._t0 = time.monotonic()
        self._closed = False

    def start(self, here: str | None) -> None:
        from exsim.exchange import compiling

        names = list(self.groups)
        shares = [names[k::self._n] for k in range(self._n)]
        env = dict(os.environ, **{compiling.ENV_QUIET: "0"})
        for share in shares:
            err = tempfile.TemporaryFile()
            steps = [f"{name}={self.groups[name].step}" for name in share]
            proc = subprocess.Popen(
                [sys.executable, "-m", "exsim.replay.warmup", "--background", str(os.getpid()),
                 *steps], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
            reader = threading.Thread(target=self._read, args=(proc, share, err, time.monotonic()),
                                      name="exsim-compile-child", daemon=True)
            self._procs.append(proc)
            self._readers.append(reader)
            reader.start()
        for name in names:
            for pkg in self.groups[name].packages:
                try:
                    disps = [d for m in _modules(pkg) for d in compiling.dispatchers(m)]
                except Exception:   # why broad: without the wait, the kernels compile here
                    continue
                self._releases.append(compiling.hold(disps, lambda n=name: self.wait(n)))
        labels = " and ".join(g.label for g in self.groups.values())
        where = (f"{len(self._procs)} child processes" if len(self._procs) > 1 else
                 f"a child process (pid {self._procs[0].pid})")
        compiling.announce(
            f"compiling numba kernels on first use, once ({compiling.FIRST_RUN_ESTIMATE} on "
            f"2 vCPUs): {labels} in {where}" + (f", {here} in this one" if here else "")
            + f"; cached in {compiling.cache_location()}, later runs load them in seconds "
              "(`exsim warmup` compiles everything ahead)")

    def _read(self, proc, share: list, err, t0: float) -> None:
        """Collect a child's reports, one JSON line per group; after its end, its usage."""
        from exsim.exchange import compiling

        try:
            for line in proc.stdout:
                try:
                    rep = json.loads(line)
                    name = rep["group"]
                except (ValueError, KeyError, TypeError):
                    continue   # why: only the report lines are the protocol
                if name in self._done:
                    self._result[name] = rep
                    if rep.get("ok"):
                        compiling.say(
                            f"compiled {self.groups[name].label} in a child process in "
                            f"{rep['wall_s']:.0f} s ({rep['cpu_s']:.0f} s CPU, peak "
                            f"{rep['peak_mb']:.0f} MB); {time.monotonic() - self._t0:.0f} s "
                            "since the first-run compile began")
                    self._done[name].set()
        except (OSError, ValueError):
            pass   # why: a closed pipe is the child's end, handled below
        try:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            _STATS.append({"groups": share, "pid": proc.pid, "exit": proc.returncode,
                           "reports": [self._result[n] for n in share if n in self._result],
                           "wall_s": round(time.monotonic() - t0, 1),
                           "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                           "peak_mb": round(usage.ru_maxrss / 1024)})
        except ChildProcessError:
            pass   # why: reaped elsewhere (close's kill path); the stats are then missing
        try:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip()[-1200:]
            err.close()
        except (OSError, ValueError):
            tail = ""
        for name in share:
            if name not in self._result:
                why = f"its process ended with exit code {proc.returncode}"
                self._result[name] = {"group": name, "ok": False,
                                      "error": why + (f": {tail}" if tail else "")}
            self._done[name].set()

    def wait(self, name: str) -> bool:
        """Block until the child compiling group ``name`` reports it (saying so every
        ``exchange.compiling.HEARTBEAT_S`` meanwhile); return True if it compiled it, False if
        it failed, died or was stopped (said on stderr once: the caller compiles it itself).
        A group not compiled in a child returns True at once."""
        from exsim.exchange import compiling

        done = self._done.get(name)
        if done is None:
            return True
        t0 = time.monotonic()
        while not done.wait(compiling.HEARTBEAT_S):
            waited = time.monotonic() - t0
            if waited >= WAIT_LIMIT_S or self._closed:
                self._result.setdefault(name, {"group": name, "ok": False,
                                               "error": f"no report after {waited:.0f} s"})
                break
            compiling.say(f"waiting for the child process compiling {self.groups[name].label} "
                          f"({time.monotonic() - self._t0:.0f} s since it started)...")
        rep = self._result.get(name, {"ok": False, "error": "no report"})
        if not rep.get("ok") and name not in self._told:
            self._told.add(name)
            compiling.say(f"compiling {self.groups[name].label} in a child process failed "
                          f"({rep.get('error', 'no report')}); compiling it in this process "
                          "instead")
        return bool(rep.get("ok"))

    def close(self) -> None:
        """Stop the children still running (closing their stdin, then SIGTERM, then SIGKILL),
        collect their usage and undo the waits. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()          # a child reads EOF and exits at once
        deadline = time.monotonic() + 2.0
        for proc, reader in zip(self._procs, self._readers):
            reader.join(max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                with contextlib.suppress(OSError):
                    proc.terminate()
                reader.join(2.0)
            if reader.is_alive():
                with contextlib.suppress(OSError):
                    proc.kill()
                reader.join(5.0)
            with contextlib.suppress(OSError, ValueError):
                proc.stdout.close()
        for release in self._releases:
            release()
        for done in self._done.values():
            done.set()


def start_background(names, *, here: str | None = None,
                     reserve: int = PARENT_PEAK_BYTES) -> "Background | None":
    """Start compiling the cold groups among ``names`` (keys of ``BACKGROUND``, or
    BackgroundGroups) in child processes; return the Background (call ``close`` when done), or None when none is cold or
    no child may run (``background_children``): then nothing started and nothing was printed.
    ``here``: what this process compiles meanwhile, for the notice; ``reserve``: the memory it
    needs for that (see ``background_children``). Raises UsageError for an unknown group
    name."""
    unknown = [n for n in names if not isinstance(n, BackgroundGroup) and n not in BACKGROUND]
    if unknown:
        raise UsageError(f"unknown background group(s) {unknown}; choose from "
                         f"{', '.join(BACKGROUND)}")
    groups = [n if isinstance(n, BackgroundGroup) else BACKGROUND[n] for n in names]
    groups = [g for g in groups if cold(g)]
    children = background_children(groups, reserve)
    if not children:
        return None
    bg = Background(groups, children)
    try:
        bg.start(here)
    except BaseException:
        bg.close()
        raise
    return bg


@contextlib.contextmanager
def in_background(names, *, here: str | None = None, reserve: int = PARENT_PEAK_BYTES):
    """``with in_background(("codecs", "verify")):`` compiles the cold ones of those groups in
    child processes while the block runs (``start_background``), and stops any child still
    running when it ends. Yields the Background or None."""
    bg = start_background(names, here=here, reserve=reserve)
    try:
        yield bg
    finally:
        if bg is not None:
            bg.close()


def _exit_with_parent(parent: int) -> None:
    """In a compile child: exit when the parent dies, however it dies."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
        except Exception:   # why broad: the stdin watch below still covers it
            pass
    if os.getppid() != parent:   # the parent died before the signal was armed
        os._exit(3)

    def watch() -> None:
        try:
            sys.stdin.buffer.read()   # returns at EOF: the parent closed the pipe, or died
        finally:
            os._exit(3)
    threading.Thread(target=watch, name="exsim-parent-watch", daemon=True).start()


def _background_child(parent: int, steps: list) -> None:
    """A compile child: run each group's step (``NAME=module:function``), report one JSON line
    per group on stdout, exit 0."""
    import resource

    from exsim.exchange import compiling

    _exit_with_parent(parent)
    compiling.set_quiet(True)   # the parent speaks for its children
    for spec in steps:
        name, _, step = spec.partition("=")
        t0, c0 = time.perf_counter(), time.process_time()
        rep = {"group": name, "ok": True}
        try:
            module, _, func = step.partition(":")
            getattr(importlib.import_module(module), func)()
        except Exception as e:   # why broad: reported to the parent, which compiles it itself
            rep.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
        rep.update(wall_s=round(time.perf_counter() - t0, 1),
                   cpu_s=round(time.process_time() - c0, 1),
                   peak_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
        sys.stdout.write(json.dumps(rep) + "\n")
        sys.stdout.flush()
    # why not a return: the interpreter's shutdown would abort on the watcher thread, blocked
    # reading stdin; everything is written (numba saves each kernel as it compiles it)
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--background"]:   # a child of start_background: PID NAME=STEP...
        _background_child(int(sys.argv[2]), sys.argv[3:])
    # one group in a child of ``warmup(jobs > 1)``: GROUP WORK_DIR
    from exsim.exchange import compiling

    compiling.set_quiet(True)   # the parent speaks for its children
    _run_group(sys.argv[1], sys.argv[2])
