"""Foreign records in: a field-by-field numpy copy into ORDER_DTYPE against ``exchange.ingest``'s
compiled pass and its zero-copy view, ns per record, side by side.

Workload: ``uniform_flow(n, seed 7, 4 symbols)`` (2,000,000 messages by default) written once,
outside the timing, as three foreign record arrays (what a C harness hands over):
- ``cstruct``: a 40-byte C struct (natural alignment: ``int64 ts; uint64 id; int64 price;
  uint32 qty; uint32 trader; uint16 symbol; char side ('B'/'S'); char action ('A'/'C'/'M');
  uint8 type; uint8 tif``); the other ORDER_DTYPE fields are constants. Needs conversion:
  widths, two value maps.
- ``aligned``: every ORDER_DTYPE field at its own type in a C-aligned struct (88 bytes): the
  fields are all there, at other offsets; ``view`` applies.
- ``padded``: ORDER_DTYPE's packed 78 bytes after an 8-byte header (96 bytes): ``view`` is an
  ORDER_DTYPE array ``Engine.process`` takes (it makes a strided batch contiguous itself).
Methods, each over all n records into one reused ORDER_DTYPE buffer (nothing allocated per run):
- ``numpy_copy``: ``out[name] = foreign[field]`` per field (value maps by a 256-entry lookup
  table, constants assigned; no check that codes are known: the convert path checks them);
- ``convert``: ``RecordLayout.convert(foreign, out=out)``;
- ``view``: ``RecordLayout.view(foreign)`` (no copy); ``view_astype``: ``view.astype(ORDER_DTYPE)``
  (numpy's cast by position, one pass); ``view_contiguous``: ``np.ascontiguousarray(view)``
  (the copy ``Engine.process`` makes of a strided ORDER_DTYPE batch).
Every method's rows are checked byte-identical to the flow. Rounds are interleaved (every
method once per round, after a warm-up round); figures are medians of process CPU time.
Prints a table, writes benchmarks/results/local/ingest.json (``--out PATH`` elsewhere).
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 5,000 records, one round, JSON to the smoke directory.

    python benchmarks/bench_ingest.py [--n 2000000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke
from exsim.exchange import ORDER_DTYPE, ForeignField, Kind, RecordLayout, Side
from exsim.scenarios.generators.uniform import uniform_flow

CSTRUCT = np.dtype([("ts", "<i8"), ("id", "<u8"), ("price", "<i8"), ("qty", "<u4"),
                    ("trader", "<u4"), ("symbol", "<u2"), ("side", "S1"), ("action", "S1"),
                    ("type", "u1"), ("tif", "u1")], align=True)
ALIGNED = np.dtype(ORDER_DTYPE.descr, align=True)
PADDED = np.dtype([("header", "<u8"), ("order", ORDER_DTYPE), ("trailer", "V10")])
SIDES = {b"B": Side.BUY, b"S": Side.SELL}
ACTIONS = {b"A": Kind.NEW, b"C": Kind.CANCEL, b"M": Kind.MODIFY}
CSTRUCT_MAP = {"ts": "ts", "order_id": "id", "price": "price", "qty": "qty", "trader": "trader",
               "symbol": "symbol", "order_type": "type", "tif": "tif",
               "side": ForeignField("side", values=SIDES),
               "kind": ForeignField("action", values=ACTIONS)}


def _lut(values: dict) -> np.ndarray:
    t = np.zeros(256, np.uint8)
    for k, v in values.items():
        t[k[0]] = v
    return t


def foreign_records(flow: np.ndarray) -> dict:
    """Return the three foreign arrays of ``flow`` (see the module docstring)."""
    c = np.zeros(len(flow), CSTRUCT)
    for ours, theirs in [("ts", "ts"), ("order_id", "id"), ("price", "price"), ("qty", "qty"),
                         ("trader", "trader"), ("symbol", "symbol"), ("order_type", "type"),
                         ("tif", "tif")]:
        c[theirs] = flow[ours]
    c["side"] = np.array([b"B", b"S"])[flow["side"]]
    c["action"] = np.array([b"A", b"C", b"M"])[flow["kind"]]
    a = np.zeros(len(flow), ALIGNED)
    for n in ORDER_DTYPE.names:
        a[n] = flow[n]
    p = np.zeros(len(flow), PADDED)
    p["order"] = flow
    return {"cstruct": c, "aligned": a, "padded": p}


def numpy_copy_cstruct(f: np.ndarray, out: np.ndarray, luts=(_lut(SIDES), _lut(ACTIONS))) -> np.ndarray:
    for ours, theirs in CSTRUCT_MAP.items():
        if isinstance(theirs, str):
            out[ours] = f[theirs]
    out["side"] = luts[0][f["side"].view(np.uint8)]
    out["kind"] = luts[1][f["action"].view(np.uint8)]
    for n in ("flags", "stop_price", "display_qty", "min_qty", "expire_ts", "phase"):
        out[n] = 0
    return out


def numpy_copy_named(f: np.ndarray, out: np.ndarray, prefix: str = "") -> np.ndarray:
    src = f["order"] if prefix else f
    for n in ORDER_DTYPE.names:
        out[n] = src[n]
    return out


def methods(foreign: dict, layouts: dict, out: np.ndarray) -> dict:
    """Return (layout, method) -> a callable returning ORDER_DTYPE rows of that layout."""
    c, a, p = foreign["cstruct"], foreign["aligned"], foreign["padded"]
    lc, la, lp = layouts["cstruct"], layouts["aligned"], layouts["padded"]
    return {
        ("cstruct", "numpy_copy"): lambda: numpy_copy_cstruct(c, out),
        ("cstruct", "convert"): lambda: lc.convert(c, out=out),
        ("aligned", "numpy_copy"): lambda: numpy_copy_named(a, out),
        ("aligned", "convert"): lambda: la.convert(a, out=out),
        ("aligned", "view"): lambda: la.view(a),
        ("aligned", "view_astype"): lambda: la.view(a).astype(ORDER_DTYPE),
        ("padded", "numpy_copy"): lambda: numpy_copy_named(p, out, "order"),
        ("padded", "convert"): lambda: lp.convert(p, out=out),
        ("padded", "view"): lambda: lp.view(p),
        ("padded", "view_contiguous"): lambda: np.ascontiguousarray(lp.view(p)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="records per foreign array")
    ap.add_argument("--runs", type=int, default=7, help="timed rounds (after one warm-up)")
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/"
                    "ingest.json; the committed one: --out benchmarks/results/ingest.json)")
    args = ap.parse_args(argv)
    n, runs = _smoke.scaled(args.n, 5_000), _smoke.scaled(args.runs, 1)
    out_path = str(_smoke.report_path(args.out, "ingest.json"))
    flow = uniform_flow(n, 7, 4)
    want = flow.tobytes()
    foreign = foreign_records(flow)
    t0 = time.process_time()
    layouts = {"cstruct": RecordLayout.from_dtype(CSTRUCT, CSTRUCT_MAP),
               "aligned": RecordLayout.from_dtype(ALIGNED),
               "padded": RecordLayout(PADDED.itemsize, {
                   k: ForeignField(8 + ORDER_DTYPE.fields[k][1], ORDER_DTYPE.fields[k][0])
                   for k in ORDER_DTYPE.names})}
    layouts["cstruct"].convert(foreign["cstruct"][:1])
    first_call = time.process_time() - t0          # numba's cache load (or compile) and setup
    out = np.zeros(n, ORDER_DTYPE)
    todo = methods(foreign, layouts, out)
    times = {k: [] for k in todo}
    load0 = os.getloadavg()[0]
    for r in range(runs + 1):
        for key, fn in todo.items():
            t = time.process_time()
            rows = fn()
            dt = time.process_time() - t
            if r == 0:
                if rows.dtype != ORDER_DTYPE:
                    rows = rows.astype(ORDER_DTYPE)     # a view with the foreign offsets
                if rows.tobytes() != want:
                    raise SystemExit(f"{key}: rows differ from the flow's")
            else:
                times[key].append(dt)
    ns = {f"{lay}/{m}": statistics.median(v) / n * 1e9 for (lay, m), v in times.items()}
    report = {
        "workload": f"uniform_flow(n={n}, seed 7, 4 symbols) as foreign records: cstruct "
                    f"({CSTRUCT.itemsize} B), aligned ({ALIGNED.itemsize} B), padded "
                    f"({PADDED.itemsize} B)",
        "records": n, "runs": runs, "ns_per_record": ns,
        "convert_speedup_over_numpy_copy": {
            lay: ns[f"{lay}/numpy_copy"] / ns[f"{lay}/convert"] for lay in layouts},
        "first_call_seconds": first_call,
        "machine": {"loadavg_1min_at_start": load0, "loadavg_1min_at_end": os.getloadavg()[0],
                    "cpu_count": os.cpu_count()},
        "smoke": _smoke.enabled(),
    }
    with open(out_path, "w") as fh:
        json.dump(report, fh, indent=2, sort_keys=True)
        fh.write("\n")
    cols = ["numpy_copy", "convert", "view", "view_astype", "view_contiguous"]
    print(report["workload"])
    print(f"ns per record, median of {runs} interleaved rounds (process CPU time):")
    print(f"{'layout':<10}" + "".join(f"{c:>17}" for c in cols) + f"{'numpy/convert':>15}")
    for lay in layouts:
        cells = "".join(f"{ns[f'{lay}/{c}']:>17.2f}" if f"{lay}/{c}" in ns else f"{'-':>17}"
                        for c in cols)
        print(f"{lay:<10}{cells}{report['convert_speedup_over_numpy_copy'][lay]:>14.1f}x")
    m = report["machine"]
    print(f"first convert call (cache load or compile): {first_call:.2f} s; load average "
          f"{m['loadavg_1min_at_start']:.1f} -> {m['loadavg_1min_at_end']:.1f}; report: {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
