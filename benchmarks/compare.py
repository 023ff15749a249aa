"""exsim side by side with the peers a Python user could pick instead, on the same flows, in one run.

Workloads (pre-generated once, then shared by every system):
  seeded     scenarios.bench_1m (seed 7, one symbol; 60% passive limits, 30% cancels of live
             orders, 10% crossing limits), cut to ``--messages``
  quantcup   the QuantCup scoring feed, replayed on a fresh book until ``--messages`` is reached
  l2-seeded  the L2 rows exsim emits for the seeded flow (level totals), for L2-replay peers
  l2-binance the Binance BTCUSDT sample's L2 rows (scenarios.load_binance), for L2-replay peers

Systems: exsim, the reference model (tests/model.py), limit-order-book, matching-engine (without
and with its WAL), order-book and hftbacktest (L2 replay), each behind an adapter in
benchmarks/peers/. Before any time is reported, each peer runs once untimed and must agree with
exsim: on a match workload the number of fills, the traded volume, the resting orders and the
final top of book (whichever of these its API exposes, and at least the volume); on an L2 workload
the final top of book. A peer that disagrees is reported as such, without a speed.
``--model-messages N`` runs the reference model on each match segment's first N messages only
(checked against exsim on that cut, its msgs/s over it): on the seeded 1 M flow its deep book
makes one model run take tens of minutes.

Timing: ``--rounds`` interleaved rounds (every system once per round, A B A B ...), medians. exsim
runs twice per round as two systems ("exsim" and "exsim (repeat)"); the largest gap between
their medians on a workload is that workload's noise floor, and a peer within it is a tie.

Your own engine: ``--peer MODULE:CLASS`` adds a ``benchmarks.peers.Peer`` subclass (docs/benchmarks.md,
"Comparing your own engine"); ``benchmarks.peers.external_peer.ExternalEngine`` runs an engine in
another process on the same flows, written as generic order-flow files.

Storage: bytes per row of exsim segments (zstd) vs Parquet (pyarrow, zstd) on identical rows.

    python -m benchmarks.compare [--messages 1000000] [--rounds 5] [--peer-python PY312]
                                 [--model-messages N] [--peer MODULE:CLASS ...] [--no-builtin-peers]
                                 [--workloads l2-seeded,l2-binance [--update]]
                                 [--out benchmarks/results/compare.json] [--write-docs]

``--workloads`` runs only the named workloads; with ``--update`` their rows replace the same
workloads' rows in the existing ``--out`` report (the others are kept, and the report's command
line lists both runs). EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py) shrinks the run to seconds and
sends the JSON and any --write-docs output to the smoke directory, never to the checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import _smoke
from benchmarks.peers import Outcome, Peer, Workload, all_peers
from benchmarks.peers.exsim_peer import ExsimL2, ExsimMatch
from benchmarks.peers.model_peer import ReferenceModel

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
README = Path(__file__).resolve().parents[1] / "README.md"   # its Performance section
BEGIN, END = "<!-- compare:begin -->", "<!-- compare:end -->"
WORKLOADS = ("seeded", "quantcup", "l2-seeded", "l2-binance")
SMOKE_MESSAGES = 4_000                  # smoke mode: seeded cut; QuantCup replays the feed once


# ------------------------------------------------------------------------------------ workloads
def seeded_flow(messages: int) -> np.ndarray:
    """The first ``messages`` of scenarios.bench_1m (one symbol); in smoke mode the same law
    generated at that size (not a prefix: generating 1 M messages would dominate a smoke run)."""
    from exsim.scenarios import bench_1m
    from exsim.scenarios.generators.uniform import BENCH_1M, uniform_flow

    if _smoke.enabled():
        return uniform_flow(n_symbols=1, **{**BENCH_1M, "n": messages})
    return bench_1m(1)[:messages].copy()


def exsim_outputs(flow: np.ndarray):
    """Run exsim once (untimed) and return its Result over the whole flow (copies)."""
    from exsim.exchange import Engine
    from exsim.exchange.engine import Result

    eng = Engine()
    eng.add_symbol("S0")
    parts = [eng.process(flow[lo: lo + 65_536]) for lo in range(0, len(flow), 65_536)]
    return Result.concat(parts)


def build_workloads(messages: int, binance: bool = True) -> tuple[list[Workload], dict]:
    """The workloads, and the exsim outputs of the seeded flow (reused by the storage part)."""
    from exsim.scenarios import load_quantcup
    from exsim.scenarios.data import QUANTCUP_FEED, shared_file

    flow = seeded_flow(messages)
    res = exsim_outputs(flow)
    feed = load_quantcup(shared_file(QUANTCUP_FEED))
    feed["symbol"] = 0
    if _smoke.enabled():         # a prefix of the feed is a valid feed; the whole one is 35,759
        feed = feed[:messages].copy()
    reps = max(1, messages // len(feed))
    wls = [
        Workload("seeded", "match", [flow], f"bench_1m seed 7, first {len(flow):,} messages"),
        Workload("quantcup", "match", [feed] * reps,
                 f"QuantCup feed ({len(feed):,} messages) x {reps}, fresh book each"),
        Workload("l2-seeded", "l2", [res.l2], f"exsim's {len(res.l2):,} L2 rows for the seeded flow"),
    ]
    l2 = _binance_l2() if binance else None
    if l2 is not None:
        wls.append(Workload("l2-binance", "l2", [l2], f"Binance BTCUSDT sample, {len(l2):,} L2 rows"))
    return wls, {"flow": flow, "result": res}


def _binance_l2() -> np.ndarray | None:
    """The Binance BTCUSDT sample's L2 rows, or None (said on stderr) when the sample is missing."""
    try:
        from exsim.scenarios import load_binance
        from exsim.scenarios.data import BINANCE_BTCUSDT, shared_file

        return load_binance(shared_file(BINANCE_BTCUSDT)).l2
    except Exception as e:  # noqa: BLE001 - a missing sample only drops this workload
        print(f"l2-binance skipped: {e}", file=sys.stderr)
        return None


# ------------------------------------------------------------------------------------ agreement
FIELDS = ("fills", "volume", "live", "top")


def agreement(ref: Outcome, got: Outcome, kind: str) -> tuple[bool, str]:
    """(agrees, text): compare every figure the peer reports with exsim's."""
    fields = ("top",) if kind == "l2" else FIELDS
    checked, missing, bad = [], [], []
    for f in fields:
        mine, theirs = getattr(ref, f), getattr(got, f)
        if theirs is None:
            missing.append(f)
        elif mine == theirs:
            checked.append(f)
        else:
            bad.append(f"{f} {theirs} vs exsim {mine}")
    if kind == "match" and got.volume is None:
        bad.append("no traded volume to check")
    if bad:
        return False, "DISAGREES: " + "; ".join(bad)
    text = "agrees: " + ", ".join(checked)
    if missing:
        text += f" ({', '.join(missing)} not exposed)"
    return True, text


# ------------------------------------------------------------------------------------ the run
def _label(p: Peer) -> str:
    return p.name


def cut_workload(wl: Workload, messages: int | None) -> Workload:
    """``wl`` with every segment cut to its first ``messages`` (``wl`` itself when None or when
    no segment is longer)."""
    if not messages or all(len(s) <= messages for s in wl.segments):
        return wl
    return Workload(wl.name, wl.kind, [s[:messages] for s in wl.segments],
                    f"{wl.description}, each segment cut to its first {messages:,}")


def load_peer(spec: str, ap=None) -> Peer:
    """Return an instance of the Peer subclass ``spec`` names (``module:Class`` or
    ``path/to/file.py:Class``), built with no arguments.

    Raises SystemExit (through ``ap.error``; ValueError without ``ap``) naming ``spec`` when
    the module or class cannot be loaded or the class is not a Peer."""
    import importlib
    import importlib.util

    def fail(why: str):
        if ap is not None:
            ap.error(f"--peer {spec}: {why}")
        raise ValueError(f"--peer {spec}: {why}")

    module_name, sep, cls_name = spec.rpartition(":")
    if not sep or not module_name or not cls_name:
        fail("expected MODULE:CLASS (e.g. benchmarks.peers.external_peer:ExternalEngine)")
    try:
        if module_name.endswith(".py"):
            where = importlib.util.spec_from_file_location(
                f"exsim_peer_{Path(module_name).stem}", module_name)
            if where is None or not Path(module_name).is_file():
                fail(f"{module_name}: no such file")
            module = importlib.util.module_from_spec(where)
            where.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as e:
        fail(f"cannot import {module_name} ({e})")
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Peer)):
        fail(f"{cls_name} is not a Peer subclass in {module_name} (benchmarks/peers/__init__.py "
             "defines Peer)")
    return cls()


def run_compare(workloads: list[Workload], peers: list[Peer], rounds: int,
                log=lambda s: print(s, file=sys.stderr, flush=True),
                cuts: dict | None = None) -> dict:
    """Check every peer against exsim, then time the agreeing ones in interleaved rounds.

    ``peers`` excludes exsim: it is added twice per workload kind (exsim, exsim (repeat)).
    ``cuts`` maps a peer's name to a message cut (``cut_workload``): that peer is checked
    against exsim on the cut workload and timed on it, its msgs/s over the cut's messages (for
    the reference model, whose deep-book operations are slow enough that 1 M messages take
    most of an hour). Returns {"rows": [...], "noise_floor": float, "floors": {workload: float}}.
    """
    cuts = cuts or {}
    rows, floors = [], {}
    for wl in workloads:
        ref_sys = ExsimMatch() if wl.kind == "match" else ExsimL2()
        rep_sys = ExsimMatch("exsim (repeat)") if wl.kind == "match" else ExsimL2("exsim (repeat)")
        ref_prep = ref_sys.prepare(wl)
        ref = ref_sys.check(ref_prep)
        rep_prep = rep_sys.prepare(wl)
        rep_sys.run(rep_prep)                       # warm-up, like the peers' check pass
        timed = [(ref_sys, ref_prep)]
        entries = {}
        counts = {id(ref_sys): wl.messages, id(rep_sys): wl.messages}   # messages per run
        for p in peers:
            if p.kind != wl.kind:
                continue
            missing = p.unavailable()
            why = missing or p.cannot(wl)
            pwl = cut_workload(wl, cuts.get(p.name))
            counts[id(p)] = pwl.messages
            e = {"system": p.name, "version": "-" if missing else p.version(), "workload": wl.name,
                 "messages": pwl.messages, "msgs_per_s": None, "agrees": False}
            entries[id(p)] = e
            if why:
                e["agreement"] = f"not run: {why}"
                log(f"[{wl.name}] {p.name}: not run ({why})")
                continue
            prep = p.prepare(pwl)
            log(f"[{wl.name}] {p.name}: checking against exsim"
                + (f" on the first {pwl.messages:,} messages" if pwl is not wl else ""))
            got = p.check(prep)
            pref = ref if pwl is wl else ref_sys.check(ref_sys.prepare(pwl))
            ok, text = agreement(pref, got, wl.kind)
            if pwl is not wl:
                text += f" (on {pwl.messages:,} messages: each segment's first {cuts[p.name]:,})"
            e["agrees"], e["agreement"] = ok, text
            e["reported"] = {f: getattr(got, f) for f in FIELDS}
            log(f"[{wl.name}] {p.name}: {text}")
            if ok:
                timed.append((p, prep))
            elif hasattr(p, "release"):
                p.release(prep)
        timed.append((rep_sys, rep_prep))           # exsim first and last in every round
        seconds = {id(p): [] for p, _ in timed}
        for r in range(rounds):
            for p, prep in timed:
                seconds[id(p)].append(p.run(prep).seconds)
            log(f"[{wl.name}] round {r + 1}/{rounds}: " + ", ".join(
                f"{p.name} {counts[id(p)] / seconds[id(p)][-1] / 1e6:.3g}M/s" for p, _ in timed))
        for p, prep in timed:
            if hasattr(p, "release"):
                p.release(prep)
        med = {k: statistics.median(v) for k, v in seconds.items()}
        base = wl.messages / med[id(ref_sys)]
        for p in (ref_sys, rep_sys):
            entries[id(p)] = {"system": p.name, "version": p.version(), "workload": wl.name,
                              "messages": wl.messages, "agrees": True,
                              "agreement": "reference" if p is ref_sys else "same system (noise floor)",
                              "reported": {f: getattr(ref, f) for f in FIELDS}}
        for p, _ in timed:
            e = entries[id(p)]
            e["seconds"] = seconds[id(p)]
            e["msgs_per_s"] = counts[id(p)] / med[id(p)]
            e["ratio"] = e["msgs_per_s"] / base
        floors[wl.name] = abs(entries[id(rep_sys)]["ratio"] - 1.0)
        order = [id(ref_sys), id(rep_sys)] + [id(p) for p in peers if id(p) in entries]
        rows += [entries[k] for k in order]
    for e in rows:
        if e.get("ratio") is not None:
            floor = floors[e["workload"]]
            e["verdict"] = "tie" if abs(e["ratio"] - 1.0) <= floor else (
                "faster" if e["ratio"] > 1 else "slower")
    return {"rows": rows, "noise_floor": max(floors.values(), default=0.0), "floors": floors}


# ------------------------------------------------------------------------------------ storage
def storage(res, binance_l2: np.ndarray | None) -> list[dict]:
    """Bytes/row: exsim zstd segment vs Parquet (pyarrow, zstd) of exactly the same rows."""
    from benchmarks.bench_store import binance_sizes

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tables = [("seeded fills", res.fills), ("seeded l2", res.l2), ("seeded events", res.events)]
        if binance_l2 is not None:
            tables.append(("binance l2", binance_l2))
        for name, rows in tables:
            table = name.split()[-1]
            s = _sizes(table, rows, tmp) if table != "l2" else binance_sizes(rows, tmp)
            n = s["rows"]
            out.append({"rows_of": name, "rows": n,
                        "exsim_zstd_bytes_per_row": s["store_zstd_bytes"] / n,
                        "parquet_zstd_bytes_per_row": s["parquet_zstd_bytes"] / n,
                        "ratio_to_parquet": s["store_zstd_bytes"] / s["parquet_zstd_bytes"]})
    return out


def _sizes(table: str, rows: np.ndarray, tmp: str) -> dict:
    """bench_store.binance_sizes for any table (it writes table "l2")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from exsim.store.segment import write_segment

    d = tempfile.mkdtemp(dir=tmp)
    ours = write_segment(d, table, 0, rows, codec="zstd")
    path = os.path.join(d, f"{table}.parquet")
    pq.write_table(pa.table({n: rows[n] for n in rows.dtype.names}), path, compression="zstd")
    return {"rows": int(rows.size), "store_zstd_bytes": ours.bytes,
            "parquet_zstd_bytes": os.path.getsize(path)}


# ------------------------------------------------------------------------------------ output
def _fmt_rate(v):
    if v is None:
        return "-"
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


def markdown(report: dict) -> str:
    lines = ["| system | version | workload | msgs/s | ratio to exsim | agreement |",
             "|---|---|---|---:|---:|---|"]
    for e in report["rows"]:
        ratio = "-"
        if e.get("agreement") == "reference":
            ratio = "1"
        elif e.get("ratio") is not None:
            ratio = f"{e['ratio']:.3g}x" + (" (tie)" if e.get("verdict") == "tie" else "")
        lines.append(f"| {e['system']} | {e['version']} | {e['workload']} | {_fmt_rate(e.get('msgs_per_s'))} "
                     f"| {ratio} | {e['agreement']} |")
    m = report["machine"]
    rounds = f"{report['rounds']}"
    if report.get("rounds_by_workload"):
        rounds = "/".join(str(v) for v in report["rounds_by_workload"].values()) + " (per workload)"
    lines += ["", f"Median of {rounds} interleaved rounds (exsim first and last in each); noise floor "
              f"(exsim vs itself, per workload): {', '.join(f'{k} {v * 100:.1f}%' for k, v in report['floors'].items())}; "
              "a ratio within it is a tie. "
              f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, numpy {m['numpy']}, "
              f"numba {m['numba']}.", "", "Workloads: " + "; ".join(
                  f"{w['name']}: {w['description']}" for w in report["workloads"]) + ".", "",
              "| rows (identical in both) | rows | exsim segment (zstd) B/row | Parquet (zstd) B/row | ratio |",
              "|---|---:|---:|---:|---:|"]
    for s in report["storage"]:
        lines.append(f"| {s['rows_of']} | {s['rows']:,} | {s['exsim_zstd_bytes_per_row']:.2f} "
                     f"| {s['parquet_zstd_bytes_per_row']:.2f} | {s['ratio_to_parquet']:.2f} |")
    load = [f"at the {k}: {', '.join(f'{x:.2f}' for x in report[f'load_{k}'])}"
            for k in ("start", "end") if report.get(f"load_{k}")]
    if load:
        lines += ["", f"Load average (1, 5, 15 min) {'; '.join(load)}."]
    # why the placeholder: the path of the Python 3.12 that ran matching-engine is the
    # measuring machine's; a reader's is elsewhere
    command = re.sub(r"--peer-python \S+", "--peer-python PY312", report["command"])
    lines += ["", f"Command: `{command}`"]
    return "\n".join(lines)


def write_docs(text: str, path: Path = DOCS) -> None:
    """Replace the text between the compare markers of ``path`` (docs/benchmarks.md or README.md).

    Raises SystemExit naming the file when the markers are missing.
    """
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: markers {BEGIN} / {END} not found")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def _workload_names(text: str) -> list[str]:
    """Parse ``--workloads a,b``; raise argparse.ArgumentTypeError naming an unknown workload."""
    import argparse

    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in WORKLOADS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown workload {', '.join(bad) or repr(text)}; choose from {', '.join(WORKLOADS)}")
    return names


def merge_reports(old: dict, new: dict) -> dict:
    """Return ``old`` with the rows, floors and workload descriptions of ``new``'s workloads
    replaced by ``new``'s (workloads keep the order of WORKLOADS); the command line names both runs.

    Raises SystemExit when the two reports were taken with different --messages (their workloads
    would not be the same flows)."""
    if old.get("messages") != new.get("messages"):
        raise SystemExit(f"--update: the saved report used --messages {old.get('messages')}, "
                         f"this run {new.get('messages')}; rerun every workload instead")
    names = {w["name"] for w in new["workloads"]}
    order = {n: k for k, n in enumerate(WORKLOADS)}
    rows = [r for r in old["rows"] if r["workload"] not in names] + new["rows"]
    rows.sort(key=lambda r: order.get(r["workload"], len(order)))    # stable: keeps system order
    wls = [w for w in old["workloads"] if w["name"] not in names] + new["workloads"]
    wls.sort(key=lambda w: order.get(w["name"], len(order)))
    floors = {**old["floors"], **new["floors"]}
    floors = {w["name"]: floors[w["name"]] for w in wls if w["name"] in floors}
    base_cmd = old["command"].split("; then ")[0]
    merged = {**old, "rows": rows, "workloads": wls, "floors": floors,
              "noise_floor": max(floors.values(), default=0.0), "storage": new["storage"],
              "command": f"{base_cmd}; then {new['command']}",
              "updated": {"workloads": sorted(names, key=order.get), "rounds": new["rounds"],
                          "machine": new["machine"], "wall_seconds": new["wall_seconds"]}}
    if merged["rounds"] != new["rounds"]:
        merged["rounds_by_workload"] = {w["name"]: (new["rounds"] if w["name"] in names else old["rounds"])
                                        for w in wls}
    return merged


def main(argv: list[str] | None = None) -> dict:
    """Measure (or with --from-json render) the comparison; print the markdown and write the JSON
    report (and with --write-docs the doc sections). Returns the report.

    Raises SystemExit on bad arguments, a missing --update report or missing doc markers."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000, help="cut of the seeded flow; QuantCup replays to about this")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model-messages", type=int, default=None, metavar="N",
                    help="run the reference model on each match segment's first N messages "
                         "only (checked against exsim on the same cut; default: all)")
    ap.add_argument("--peer-python", default=os.environ.get("EXSIM_BENCH_PEER_PYTHON"),
                    help="a Python >= 3.12 with matching-engine and numpy, for that peer when this "
                         "interpreter is older (env EXSIM_BENCH_PEER_PYTHON)")
    ap.add_argument("--peer", action="append", default=[], metavar="MODULE:CLASS",
                    help="also compare this Peer subclass (benchmarks/peers/__init__.py; "
                         "MODULE may be a file path.py), built with no arguments; repeatable. "
                         "benchmarks.peers.external_peer:ExternalEngine runs an engine in another "
                         "process (EXSIM_PEER_COMMAND)")
    ap.add_argument("--no-builtin-peers", action="store_true",
                    help="compare only exsim and the --peer systems")
    ap.add_argument("--workloads", type=_workload_names, default=list(WORKLOADS), metavar="A,B",
                    help=f"run only these workloads (default: all of {','.join(WORKLOADS)})")
    ap.add_argument("--update", action="store_true",
                    help="merge this run's workloads into the existing --out report instead of replacing it")
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/compare.json; the committed one: --out benchmarks/results/compare.json)")
    ap.add_argument("--write-docs", action="store_true",
                    help=f"write the table into {DOCS.name} and the README's Performance section")
    ap.add_argument("--from-json", metavar="PATH",
                    help="do not measure: render a saved report (e.g. the committed compare.json)")
    args = ap.parse_args(argv)
    docs = [DOCS, README]
    if _smoke.enabled():
        # the documented command, shrunk; docs are rendered into copies in the smoke directory
        args.messages = _smoke.scaled(args.messages, SMOKE_MESSAGES)
        args.rounds = _smoke.scaled(args.rounds, 1)
        docs = [_smoke.results_dir() / p.name for p in docs]
        for src, dst in zip((DOCS, README), docs):
            dst.write_text(src.read_text())
    if not args.from_json:
        args.out = str(_smoke.report_path(args.out, "compare.json"))
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
        text = markdown(report)
        print(text)
        if args.write_docs:
            for d in docs:
                write_docs(text, d)
        return report
    if args.update and not Path(args.out).exists():
        ap.error(f"--update: no report at {args.out} to merge into")

    from benchmarks.bench_engine import first_call_seconds, machine

    load_start = list(os.getloadavg())
    first = first_call_seconds()
    t0 = time.perf_counter()
    workloads, seeded = build_workloads(args.messages, binance="l2-binance" in args.workloads)
    workloads = [w for w in workloads if w.name in args.workloads]
    added = [load_peer(spec, ap) for spec in args.peer]
    builtin = [] if args.no_builtin_peers else all_peers(args.peer_python)
    peers = [p for p in builtin if not isinstance(p, (ExsimMatch, ExsimL2))] + added
    if args.model_messages is not None and args.model_messages < 1:
        ap.error(f"--model-messages must be >= 1; got {args.model_messages}")
    model_cut = _smoke.scaled(args.model_messages, SMOKE_MESSAGES) if args.model_messages else None
    result = run_compare(workloads, peers, args.rounds,
                         cuts={p.name: model_cut for p in peers if isinstance(p, ReferenceModel)})
    binance = next((w.segments[0] for w in workloads if w.name == "l2-binance"), None)
    if binance is None and args.update:
        binance = _binance_l2()            # the storage table keeps its Binance row
    cmd = "python -m benchmarks.compare" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:]) if a != "--write-docs")
    report = {"benchmark": "compare", "command": cmd, "rounds": args.rounds,
              "messages": args.messages, "machine": machine(), "first_call_seconds": first,
              "workloads": [{"name": w.name, "kind": w.kind, "messages": w.messages,
                             "description": w.description} for w in workloads],
              **result, "storage": storage(seeded["result"], binance),
              "wall_seconds": time.perf_counter() - t0,
              "load_start": load_start, "load_end": list(os.getloadavg())}
    out = Path(args.out)
    if args.update:
        report = merge_reports(json.loads(out.read_text()), report)
    text = markdown(report)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwrote {out}")
    if args.write_docs:
        for d in docs:
            write_docs(text, d)
        print(f"wrote {' and '.join(str(d) for d in docs)}")
    return report


if __name__ == "__main__":
    main()
