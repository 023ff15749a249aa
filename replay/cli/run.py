"""``exsim simulate`` and ``exsim demo``: order flow → Engine → journaled Session → sealed data directory.

A layer over ``scenarios.open_flow`` (the scenario or ``--flow`` files) and
``replay.simulation.simulate`` (the run, built aside and renamed into place).

Invariants:
- Every input is validated (scenario or flow file parsed, the whole flow generated, the output
  path checked) before anything is written. A DBN file is the exception that keeps memory bounded:
  it is streamed (its symbols read by a first pass that also checks the file decodes, its records
  converted batch by batch as the run consumes them), so a malformed record fails the run midway,
  and, as for any failed run, nothing is left at DIR.
- The data directory is built under a temporary sibling name and renamed into place only after
  the session closed cleanly, so DIR either does not exist or is complete; a failed run removes
  its temporary directory. ``--force`` replaces an existing *data directory* (one holding
  ``catalog.sqlite``) and nothing else: a non-empty directory of other files is never deleted.
- Compiling on a cold numba cache is announced on stderr as it happens
  (``exchange.compiling``); a warm run says nothing about it. ``exsim demo`` compiles the
  verifier and the store's codecs in a child process meanwhile (``replay.warmup.in_background``). The printed rate excludes the
  compile (``replay.simulation.warm_up``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from exsim.exchange.errors import UsageError

from exsim.replay.cli.common import (
    EXIT_FAILED, EXIT_OK, format_table, human_bytes, log, need_pyarrow, note,
    out_failed, step,
)
from exsim.replay.simulation import SimSummary, simulate
from exsim.replay.warmup import in_background

__all__ = ["register", "cmd_simulate", "cmd_demo"]

FSYNC_POLICIES = {"batch": "fsync", "interval": "interval", "none": "none"}
STP_MODES = ("none", "cancel_resting", "cancel_incoming", "cancel_both")

SIMULATE_EXAMPLES = """\
examples:
  exsim simulate --out runs/default                      # the embedded 'default' preset
  exsim new-scenario my_scenario && exsim simulate my_scenario.toml --out runs/mine --seed 7 --batch 5000
  exsim simulate bench_1m --out runs/bench --fsync none --force
  exsim simulate --flow quantcup quantcup_score_feed.csv --out runs/qc
  exsim simulate --flow lobster lobster_AMZN_2012-06-21_level1/AMZN_2012-06-21_34200000_57600000_message_1.csv \\
        lobster_AMZN_2012-06-21_level1/AMZN_2012-06-21_34200000_57600000_orderbook_1.csv --out runs/amzn
"""

DEMO_EXAMPLES = """\
example:
  exsim demo                    # in a temporary directory, removed afterwards
  exsim demo --out runs/demo    # keep the data directory
"""


def register(sub, parents, formatter) -> None:
    """Add the ``simulate`` and ``demo`` subcommands to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "simulate", parents=parents, formatter_class=formatter, epilog=SIMULATE_EXAMPLES,
        help="run a scenario (or a real-data flow) through the engine into a data directory",
        description="Generate a scenario's order flow (or load a real-data flow file), run it "
                    "through the matching engine\nand journal every batch into a new data "
                    "directory, then seal it and print a summary.\nPrices are in integer ticks.")
    p.add_argument("scenario", nargs="?", metavar="SCENARIO",
                   help="preset name or .toml/.json scenario file (default: the 'default' preset)")
    p.add_argument("--out", required=True, metavar="DIR", help="data directory to create")
    p.add_argument("--flow", nargs="+", metavar=("FORMAT", "FILE"),
                   help="instead of a scenario: 'quantcup FILE', 'lobster MESSAGES BOOK', "
                        "'binance FILE', 'dbn FILE.dbn[.zst]' (Databento MBO, streamed: read "
                        "in batches after a first pass for its symbols) or 'csv FILE' / "
                        "'parquet FILE' (the generic order-flow format, docs/data-formats.md)")
    p.add_argument("--symbol", metavar="NAME",
                   help="symbol name for a --flow (default: from the file name)")
    p.add_argument("--tz", metavar="ZONE",
                   help="time zone of a --flow's times: a LOBSTER file's local times (default: "
                        "America/New_York, LOBSTER's NASDAQ data), the zone a Binance or DBN "
                        "run's times are shown in (default: UTC); an IANA name")
    p.add_argument("--definitions", metavar="FILE",
                   help="--flow dbn: a DBN file of instrument definitions, read first (names, "
                        "ticks, lots)")
    p.add_argument("--tick", metavar="PRICE",
                   help="--flow dbn: the price of one tick (a decimal such as 0.25) for "
                        "instruments without a definition (default: DBN's own unit, 1e-9)")
    p.add_argument("--midday", choices=("drop", "refuse"), default="drop",
                   help="--flow dbn: a file that starts mid-session (before its first clear R) "
                        "names orders it never added: skip those records and say how many "
                        "(drop, the default), or stop at the first (refuse)")
    p.add_argument("--seed", type=int, metavar="S", help="override the scenario's seed")
    p.add_argument("--batch", type=int, default=10_000, metavar="N",
                   help="messages per journaled batch (default: %(default)s)")
    p.add_argument("--fsync", choices=sorted(FSYNC_POLICIES), default="batch",
                   help="durability: fsync every batch, group commit on an interval, or none "
                        "(default: %(default)s)")
    p.add_argument("--stp", choices=STP_MODES, default="none",
                   help="self-trade prevention (default: %(default)s)")
    p.add_argument("--force", action="store_true",
                   help="replace DIR if it is an existing exsim data directory")
    p.set_defaults(func=cmd_simulate)

    d = sub.add_parser(
        "demo", parents=parents, formatter_class=formatter, epilog=DEMO_EXAMPLES,
        help="simulate -> store -> replay -> verify on the embedded defaults, in one go",
        description="Simulate the 'default' scenario into a data directory, rebuild each symbol's "
                    "book with book_at\nat a mid-run seq and compare it with the live engine's, "
                    "re-run the journal through a fresh\nengine, and verify every deal against "
                    "its orders. Exit status 0 only if every step passes.")
    d.add_argument("--out", metavar="DIR", help="keep the data directory here (default: a "
                                               "temporary directory, removed afterwards)")
    d.add_argument("--force", action="store_true",
                   help="replace DIR if it is an existing exsim data directory")
    d.set_defaults(func=cmd_demo)


# -- inputs ------------------------------------------------------------------------------------

def load_flow(fmt: str, files: list[str], symbol: str | None, quiet: bool = True,
              tz: str | None = None, dbn: dict | None = None):
    """Check a ``--flow FORMAT FILE...`` argument and open it with ``scenarios.open_flow``.

    Returns a Flow; a DBN file's is streamed (its symbols from a first pass over the file, with a
    progress bar on a terminal, its messages converted as ``simulate`` consumes them); ``dbn``:
    its ``definitions``, ``tick`` and ``midday`` (``open_flow``'s). Raises
    UsageError for an unknown format, the wrong number of files or a missing file, InputError
    (from the loader, naming file and line) for a malformed one.
    """
    from exsim.scenarios.data import find_sample
    from exsim.scenarios.flows import FORMATS, open_flow

    files = [find_sample(f) for f in files]
    if fmt not in FORMATS:
        raise UsageError(f"--flow: unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    if len(files) != FORMATS[fmt]:
        want = "MESSAGES BOOK" if fmt == "lobster" else "FILE"
        raise UsageError(f"--flow {fmt} takes {want}, got {len(files)} file(s)")
    for f in files:
        if not os.path.isfile(f):
            raise UsageError(f"--flow {fmt}: {f}: no such file")
    if fmt == "parquet":
        need_pyarrow()
    if tz is not None and fmt not in ("lobster", "binance", "dbn"):
        raise UsageError(f"--tz applies to --flow lobster, binance and dbn, not to {fmt}")
    dbn = {k: v for k, v in (dbn or {}).items() if v is not None and (k, v) != ("midday", "drop")}
    if dbn and fmt != "dbn":
        raise UsageError(f"--{'/--'.join(sorted(dbn))} applies to --flow dbn, not to {fmt}")
    if fmt != "dbn":
        return open_flow(files, fmt=fmt, symbol=symbol, tz=tz)
    from exsim.replay.progress import progress

    with progress(total=os.path.getsize(files[0]), desc=f"scan {os.path.basename(files[0])}",
                  unit="B", quiet=quiet) as bar:
        return open_flow(files, fmt=fmt, symbol=symbol, stream=True, tz=tz, **dbn,
                         progress=lambda done, total: bar.update(done - bar.n))


def load_scenario_flow(name: str, seed: int | None):
    """Open a scenario (preset or file) with a seed override as a Flow (generated whole).

    Raises InputError for a missing or invalid scenario, UsageError for a bad seed or parameter.
    """
    from exsim.scenarios import load_scenario, open_flow

    sc = load_scenario(name)
    if seed is not None and seed < 0:
        raise UsageError(f"--seed must be >= 0, got {seed}")
    return open_flow(sc, seed=seed)


def check_out_dir(out: str, force: bool) -> bool:
    """Check that ``out`` may be written. Returns True if it is an existing data directory that
    will be replaced. Raises UsageError when it is a file, or a non-empty directory that is not a
    data directory, or a data directory without ``force``."""
    if not os.path.exists(out):
        return False
    if not os.path.isdir(out):
        raise UsageError(f"--out {out}: exists and is not a directory")
    if not os.listdir(out):
        return False
    if not os.path.exists(os.path.join(out, "catalog.sqlite")):
        raise UsageError(f"--out {out}: directory is not empty and is not an exsim data directory; "
                         "refusing to write into it")
    if not force:
        raise UsageError(f"--out {out}: already holds a data directory (use --force to replace it)")
    return True


def print_summary(s: SimSummary, quiet: bool = False) -> None:
    """Print a simulation summary to stdout (the rate excludes compiling the kernels; a run
    that compiled says how long on stderr, unless ``quiet``)."""
    seed = f" (seed {s.seed})" if s.seed is not None else ""
    print(f"simulated {s.label}{seed} -> {s.data_dir}")
    print(f"messages {s.messages:,}  fills {s.fills:,}  volume {s.volume:,}  rejects {s.rejects:,}  "
          f"in {s.seconds:.2f} s ({s.rate:,.0f} msgs/s)  on disk {human_bytes(s.bytes)}")
    if s.phase_changes:   # a flow without phases prints what it printed before they existed
        print(f"phase changes {s.phase_changes:,}  auctions {s.auctions:,}  auction volume "
              f"{s.auction_volume:,}")
    if s.compile_seconds > 0 and not quiet:
        note(f"(compiling the kernels took {s.compile_seconds:.1f} s more, not counted in the "
             "rate; later runs load them from the cache)")
    print(format_table(["symbol", "tick", "bid", "bid_qty", "ask", "ask_qty"],
                       [["-" if v is None else v for v in row] for row in s.top],
                       right=[False, True, True, True, True, True]))


def cmd_simulate(args) -> int:
    """``exsim simulate``: returns 0, or raises an ExsimError/OSError for main to report."""
    if args.flow and args.scenario:
        raise UsageError("give either SCENARIO or --flow, not both")
    if args.flow and args.seed is not None:
        raise UsageError("--seed applies to generated scenarios, not to a --flow file")
    if args.symbol and not args.flow:
        raise UsageError("--symbol names the symbol of a --flow; a scenario names its own")
    if args.tz and not args.flow:
        raise UsageError("--tz gives the time zone of a --flow; a scenario's times count from "
                         "midnight UTC")
    replace = check_out_dir(args.out, args.force)
    if not args.flow and (args.definitions or args.tick or args.midday != "drop"):
        raise UsageError("--definitions, --tick and --midday apply to --flow dbn")
    with step("open the flow" + (" (a first pass over the file)" if args.flow and args.flow[0] == "dbn"
                                 else "")):
        if args.flow:
            flow = load_flow(args.flow[0], args.flow[1:], args.symbol, quiet=args.quiet,
                             tz=args.tz, dbn={"definitions": args.definitions, "tick": args.tick,
                                              "midday": args.midday})
        else:
            flow = load_scenario_flow(args.scenario or "default", args.seed)
    log.info("flow %s: %s message(s), %d symbol(s)", flow.label,
             "streamed" if flow.orders is None else f"{flow.orders.size:,}", len(flow.symbols or []))
    # why check again: generating a large flow takes a while and the directory may have appeared
    replace = check_out_dir(args.out, args.force) or replace
    if args.batch < 1:
        raise UsageError(f"--batch must be >= 1, got {args.batch}")
    try:
        with step(f"match, journal and seal into {args.out}"):
            summary = simulate(flow, args.out, batch=args.batch,
                               durability=FSYNC_POLICIES[args.fsync], stp=args.stp,
                               replace=replace, quiet=args.quiet)
    except OSError as e:
        raise out_failed(args.out, e) from None
    log.info("of which compiling the kernels %.3f s, matching %.3f s", summary.compile_seconds,
             summary.seconds)
    print_summary(summary, args.quiet)
    if flow.date or flow.ts_origin == "epoch":
        when = f"trading day {flow.date}, " if flow.date else ""
        print(f"{when}times in {flow.tz}")
    if flow.kind == "dbn":
        for line in dbn_report(flow.loaded, summary.messages):
            note(line)
        if summary.messages == 0:
            note(f"exsim: nothing was simulated: {args.out} holds a run without messages")
            return EXIT_FAILED
    return EXIT_OK


def dbn_report(loaded: dict, messages: int) -> list[str]:
    """Return the lines that say what a DBN load skipped and why (``Flow.loaded``), and which
    symbols' prices are in DBN's 1e-9 units; [] when there is nothing to say."""
    counts = loaded.get("counts", {})
    lines = []
    skipped = counts.get("unknown_order", 0)
    if skipped:
        whom = ", ".join(loaded.get("unsynced", [])) or "some symbols"
        lines.append(
            f"dbn: skipped {skipped:,} of {counts.get('mbo', 0):,} MBO records ({messages:,} "
            f"messages kept): they name orders resting before the file began ({whom}: the file "
            "starts mid-session, without a clear R and snapshot, so the book lacks those orders; "
            "midday='drop'). Start from a file that begins with the session's R and snapshot, "
            "or use --midday refuse to stop at the first such record")
    if counts.get("other", 0):
        lines.append(f"dbn: {counts['other']:,} records of schemas that carry no orders (OHLCV, "
                     "statistics, status, ...) were not converted")
    if counts.get("mbp", 0) and not counts.get("mbo", 0):
        lines.append(f"dbn: {counts['mbp']:,} MBP/BBO records show levels, not orders: they give "
                     "no messages to simulate (backtest an L2 view of them instead)")
    if loaded.get("tick_1e9"):
        lines.append(f"dbn: {', '.join(loaded['tick_1e9'])}: no instrument definition and no "
                     "--tick, so prices are in DBN's unit of 1e-9; give --definitions FILE or "
                     "--tick 0.25 (the instrument's tick)")
    return lines


# -- demo --------------------------------------------------------------------------------------

def _demo_steps(data_dir: str, captured: dict, mid_seq: int, quiet: bool) -> list[tuple[str, bool, str]]:
    """Run the replay checks of ``exsim demo``; return (step, passed, detail) rows."""
    import numpy as np

    from exsim.replay import book_at, rerun, verify

    steps = []
    same = []
    for name, (bids, asks, live) in captured.items():
        view = book_at(data_dir, name, seq=mid_seq, depth=10, l3=True)
        ok = (np.array_equal(view.bids, bids) and np.array_equal(view.asks, asks)
              and view.orders is not None and np.array_equal(view.orders, live))
        same.append((name, ok))
    steps.append(("book_at", all(ok for _, ok in same),
                  f"seq {mid_seq:,}: " + ", ".join(f"{n} {'equal' if ok else 'DIFFERENT'}" for n, ok in same)
                  + " to the live engine (L2 10 levels + L3)"))
    rr = rerun(data_dir, progress=not quiet and sys.stderr.isatty())
    if rr.ok:
        detail = ("fresh engine reproduced every stored row "
                  + ("(sealed segments by row digest)" if rr.mode == "digest" else "byte for byte"))
    else:
        d = rr.first_divergence
        detail = f"first divergence in {d.table} at seq {d.seq}" if d else "diverged"
    steps.append(("rerun", rr.ok, detail))
    vr = verify(data_dir, progress=not quiet and sys.stderr.isatty())
    detail = f"{len(vr.violations)} violation(s)"
    if vr.summary:
        detail += "; " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                                   for k, v in list(vr.summary.items())[:4])
    steps.append(("verify", vr.ok, detail))
    return steps


# the kernel groups a first demo compiles in a child process (replay.warmup.BACKGROUND), in the
# order it needs them: the codecs at the first seal, the verifier at the end
DEMO_BACKGROUND = ("codecs", "verify")


def cmd_demo(args) -> int:
    """``exsim demo``: returns 0 if every step passed, 1 otherwise."""
    if args.out is not None:
        check_out_dir(args.out, args.force)   # why first: before minutes of compiling
    flow = load_scenario_flow("default", None)
    batch = 1000
    # why a batch boundary: the live engine can only be observed between batches
    mid_seq = (flow.orders.size // 2) // batch * batch or min(batch, flow.orders.size)
    captured = {}

    def capture(engine, seq):
        if seq == mid_seq:
            for name, _ in flow.symbols:
                bids, asks = engine.depth(name, levels=10)
                captured[name] = (bids, asks, engine.orders(name))

    keep = args.out is not None
    if keep:
        replace = check_out_dir(args.out, args.force)
        out = args.out
    else:
        replace = False
        scratch = tempfile.mkdtemp(prefix="exsim-demo-")
        out = os.path.join(scratch, "data")
    try:
        # why: on a cold cache the verifier's and the store's kernels compile in a child
        # process while this one compiles and runs the engine (replay.warmup.in_background;
        # a warm cache starts nothing); each waits for the child at its first use
        with in_background(DEMO_BACKGROUND, here="the matching engine"):
            summary = simulate(flow, out, batch=batch, durability="none", replace=replace,
                               quiet=args.quiet, on_batch=capture)
            print_summary(summary, args.quiet)
            steps = [("simulate", True, f"{summary.messages:,} messages, {summary.fills:,} "
                                        f"fills, {summary.rate:,.0f} msgs/s")]
            steps += _demo_steps(out, captured, mid_seq, args.quiet)
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(format_table(["step", "result", "detail"],
                       [(s, "ok" if ok else "FAILED", d) for s, ok, d in steps],
                       right=[False, False, False]))
    passed = all(ok for _, ok, _ in steps)
    if not keep:
        note("(data directory removed; use --out DIR to keep it)")
    print("demo passed" if passed else "demo FAILED")
    return EXIT_OK if passed else EXIT_FAILED
