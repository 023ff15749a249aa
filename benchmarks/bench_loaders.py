"""Loader throughput: Databento MBO decode + conversion against databento-dbn's bare decode of the
same file (the bound: the loader cannot be faster than the decoder it calls), and the LOBSTER
loader on the AMZN sample.

DBN workload: ``uniform_flow(n, seed 7, 2 symbols)`` run on the engine and written as a
zstd-compressed MBO file by ``scenarios.loaders.dbn_write.write_mbo`` (definitions, a clear per
instrument, then A/C/M/T/F records; written once, outside the timing). Measured, interleaved
(A B C A B C ...) after a warm-up round, medians over rounds:
- ``dbn_bare_decode``: ``databento_dbn.DBNDecoder`` fed the file in the loader's 16 MiB chunks,
  ``decode()`` to record objects, nothing else (records/s);
- ``dbn_load``: ``scenarios.loaders.dbn.load_dbn`` on the same file: the same decode plus the
  conversion to ORDER_DTYPE messages, consistent points, trades and fills (records/s);
- ``lobster_load``: ``load_lobster`` on the LOBSTER AMZN level-1 sample (messages/s; skipped
  when the shared sample is absent).
Rates are per second of process CPU time. Prints a table, writes benchmarks/results/local/loaders.json
(``--out PATH`` elsewhere).
EXSIM_BENCH_SMOKE=1 (benchmarks/_smoke.py): 5,000 messages, one round, JSON to the smoke directory.

    python benchmarks/bench_loaders.py [--n 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

try:
    from benchmarks import _smoke
except ImportError:          # run as a script: benchmarks/ is sys.path[0]
    import _smoke
from exsim.scenarios.data import LOBSTER_AMZN, shared_data_dir
from exsim.scenarios.generators.uniform import uniform_flow
from exsim.scenarios.loaders.dbn import load_dbn
from exsim.scenarios.loaders.dbn_write import write_mbo
from exsim.scenarios.loaders.lobster import load_lobster

CHUNK = 1 << 24
SYMBOLS = [("AAA", 10 ** 7, 100), ("BBB", 5 * 10 ** 6, 1)]


def _bare_decode(path: str) -> int:
    import databento_dbn as dbn
    n = 0
    with open(path, "rb") as fh:
        first = fh.read(CHUNK)
        zstd = first[:4] == b"\x28\xb5\x2f\xfd"
        dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD if zstd else dbn.Compression.NONE)
        chunk = first
        while chunk:
            dec.write(chunk)
            n += len(dec.decode())
            chunk = fh.read(CHUNK)
    return n - 1   # the metadata


def _timed(fn):
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="messages of the generated flow")
    ap.add_argument("--runs", type=int, default=5, help="timed rounds (after one warm-up)")
    ap.add_argument("--out", default=None, help="JSON report (default: benchmarks/results/local/loaders.json; the committed one: --out benchmarks/results/loaders.json)")
    args = ap.parse_args(argv)
    n, runs = _smoke.scaled(args.n, 5_000), _smoke.scaled(args.runs, 1)
    out = str(_smoke.report_path(args.out, "loaders.json"))
    base = shared_data_dir()
    amzn = base / LOBSTER_AMZN if base is not None else None
    lob = None
    if amzn is not None and amzn.exists():
        msg = sorted(amzn.glob("*message*.csv"))[0]
        lob = (str(msg), str(msg).replace("message", "orderbook"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flow.mbo.dbn.zst")
        flow = uniform_flow(n, 7, len(SYMBOLS))
        write_mbo(path, flow, SYMBOLS)
        size = os.path.getsize(path)
        times = {"dbn_bare_decode": [], "dbn_load": [], "lobster_load": []}
        counts = {}
        for r in range(runs + 1):
            t, counts["records"] = _timed(lambda: _bare_decode(path))
            times["dbn_bare_decode"].append(t)
            t, d = _timed(lambda: load_dbn(path))
            times["dbn_load"].append(t)
            counts["orders"] = len(d.orders)
            if lob is not None:
                t, f = _timed(lambda: load_lobster(*lob))
                times["lobster_load"].append(t)
                counts["lobster_messages"] = len(f.seq_after)
        median = {k: statistics.median(v[1:]) for k, v in times.items() if v}
    rates = {
        "dbn_bare_decode": counts["records"] / median["dbn_bare_decode"],
        "dbn_load": counts["records"] / median["dbn_load"],
    }
    if "lobster_load" in median:
        rates["lobster_load"] = counts["lobster_messages"] / median["lobster_load"]
    report = {
        "workload": f"uniform_flow(n={n}, seed 7, {len(SYMBOLS)} symbols) as zstd MBO "
                    f"({counts['records']} records, {size} bytes); LOBSTER {LOBSTER_AMZN}",
        "runs": runs, "records": counts["records"], "orders": counts["orders"],
        "lobster_messages": counts.get("lobster_messages"), "file_bytes": size,
        "seconds": median, "per_second": rates,
        "load_over_bare": rates["dbn_load"] / rates["dbn_bare_decode"],
        "smoke": _smoke.enabled(),
    }
    with open(out, "w") as fh:
        json.dump(report, fh, indent=2, sort_keys=True)
        fh.write("\n")
    print(report["workload"])
    print(f"{'measure':<18}{'items':>12}{'CPU s':>10}{'items/s':>14}")
    for k in rates:
        items = counts["lobster_messages"] if k == "lobster_load" else counts["records"]
        print(f"{k:<18}{items:>12,}{median[k]:>10.3f}{rates[k]:>14,.0f}")
    print(f"dbn_load runs at {report['load_over_bare']:.0%} of the bare decode's rate; report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
