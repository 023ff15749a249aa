"""Digests of what exsim produces on fixed inputs, through its public API only.

``python -m tests.golden.capture`` prints them as JSON; ``--write`` stores them in
``tests/golden/outputs.json``, which ``tests/golden/test_golden_outputs.py`` compares against the code
of the day. A restructure that keeps behaviour keeps every digest; a change of behaviour shows
as the names of the jobs whose digest moved (regenerate the file only for a deliberate change,
and say so in the commit).

Every job uses public names only (``exchange``, ``store``, ``replay``, ``scenarios`` and their
documented functions), so moving modules does not move the digests. Inputs: the preset
scenarios (large ones cut to their first messages to keep the suite fast) and the real samples
under ``../shared/data`` when present (jobs on a missing sample are left out, and the test skips
them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUTS = os.path.join(HERE, "outputs.json")
SHARED = os.path.abspath(os.path.join(HERE, "..", "..", "..", "shared", "data"))
CUT = 200_000   # messages kept of the 1 M benchmark presets


# The digests cover the fields each row had when they were recorded; the fields added since
# (issue 15's stop, iceberg and expiry fields of orders and L3 rows, issue 16's order phase and
# event price and phase) have tests of their own, so a row hashes as its recorded fields,
# packed. (The event price of a fill is not zero on the golden flows; it is what the fill's
# own price says, which the fills digests cover.)
_ORDER_FIELDS = ("ts", "order_id", "price", "qty", "symbol", "trader", "kind", "order_type",
                 "tif", "flags", "side")
_L3_FIELDS = ("order_id", "price", "qty", "filled", "trader", "side", "flags")
_CHECKPOINT_FIELDS = ("order_id", "price", "qty", "filled", "symbol", "trader", "side", "flags")
_EVENT_FIELDS = ("seq", "ts", "order_id", "filled_qty", "leaves_qty", "symbol", "event", "reason")


def _recorded(a: np.ndarray) -> np.ndarray:
    """``a`` with only the fields its kind of row had when the digests were recorded."""
    names = a.dtype.names or ()
    if "kind" in names:
        keep = [n for n in names if n == "seq" or n in _ORDER_FIELDS]
    elif "pending" in names:
        keep = [n for n in names if n in _CHECKPOINT_FIELDS]
    elif "filled" in names and "hidden" in names:
        keep = [n for n in names if n in _L3_FIELDS]
    elif "event" in names and "leaves_qty" in names:
        keep = [n for n in names if n in _EVENT_FIELDS]
    else:
        return a
    if tuple(keep) == names:
        return a
    out = np.zeros(len(a), np.dtype([(n, a.dtype.fields[n][0]) for n in keep],
                                    align=a.dtype.isalignedstruct))
    for n in keep:
        out[n] = a[n]
    return out


def _h(*arrays) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        if isinstance(a, (bytes, str)):
            h.update(a.encode() if isinstance(a, str) else a)
        else:
            h.update(np.ascontiguousarray(_recorded(np.asarray(a))).tobytes())
    return h.hexdigest()


def _state(eng) -> str:
    """``Engine.state_hash()`` over the state it covered when the digests were recorded: the
    header's options, symbols and counters, and the live orders' recorded fields."""
    from exsim.exchange import checkpoint as ckpt

    parsed = ckpt.parse(eng.checkpoint())
    head = json.loads(parsed.header)
    config = head["config"]
    old = {"config": {"stp": config["stp"], "symbols": [
        {k: s[k] for k in ("name", "id", "tick_size", "min_price", "max_price")}
        for s in config["symbols"]]},
        **{k: head[k] for k in ("seq", "trade_id", "next_auto_id")}}
    return _h(ckpt.header_bytes(old), parsed.rows)


def _bt(res) -> str:
    """``BacktestResult.digest()`` over the recorded fields of its rows (see ``_recorded``)."""
    return _h(res.orders, res.sent_ts, res.order_seq, res.fills, res.events, res.marks,
              res.series, json.dumps(res.summary, sort_keys=True))


def _sample(*parts) -> str | None:
    path = os.path.join(SHARED, *parts)
    return path if os.path.exists(path) else None


def _flows() -> dict:
    """name -> (ORDER_DTYPE orders, [(symbol name, tick size)])."""
    from exsim.scenarios import load_lobster, load_quantcup, load_scenario

    out = {}
    for preset in ("default", "zi", "hawkes", "bench_1m", "bench_1m_100sym"):
        sc = load_scenario(preset)
        orders = sc.generate()[:CUT]
        out[f"preset:{preset}"] = (orders, [(s.name, s.tick_size) for s in sc.symbols])
    qc = _sample("quantcup_score_feed", "quantcup_score_feed.csv")
    if qc:
        out["quantcup"] = (load_quantcup(qc), [("QC", 1.0)])
    amzn = _sample("lobster_AMZN_2012-06-21_level1")
    if amzn:
        lf = load_lobster(os.path.join(amzn, "AMZN_2012-06-21_34200000_57600000_message_1.csv"),
                          os.path.join(amzn, "AMZN_2012-06-21_34200000_57600000_orderbook_1.csv"))
        out["lobster:AMZN"] = (lf.orders, [("AMZN", 0.01)])
    aapl = _sample("lobster_AAPL_2012-06-21_level10_head")
    if aapl:
        files = sorted(os.listdir(aapl))
        msg = [f for f in files if "_message_" in f][0]
        book = [f for f in files if "_orderbook_" in f][0]
        lf = load_lobster(os.path.join(aapl, msg), os.path.join(aapl, book))
        out["lobster:AAPL"] = (lf.orders, [("AAPL", 0.01)])
    return out


def _engine(symbols, **options):
    from exsim.exchange import Engine

    eng = Engine(**options)
    for name, tick in symbols:
        eng.add_symbol(name, tick_size=tick)
    return eng


def engine_jobs(flows: dict) -> dict:
    """Fills, L2, events and final state of each flow through one Engine.process call, and of
    the same flow in batches of 997 (which must be identical), with and without STP."""
    out = {}
    for name, (orders, symbols) in flows.items():
        for stp in ("none", "cancel_both"):
            eng = _engine(symbols, stp=stp)
            res = eng.process(orders)
            out[f"engine:{name}:{stp}"] = {
                "fills": _h(res.fills), "l2": _h(res.l2), "events": _h(res.events),
                "rows": [int(res.fills.size), int(res.l2.size), int(res.events.size)],
                "state": _state(eng),
            }
    return out


def store_jobs(flows: dict, tmp: str) -> dict:
    """A journaled run of the default preset: stored tables, books, verify, rerun, stats."""
    from exsim.replay import book_at, rerun, stats, verify
    from exsim.store import Session, read

    orders, symbols = flows["preset:default"]
    d = os.path.join(tmp, "run")
    s = Session.create(d, _engine(symbols), run_info={"scenario": "default", "seed": 0},
                       durability="none", seal_every=4000, checkpoint_every=3000)
    for lo in range(0, orders.size, 1000):
        s.process(orders[lo:lo + 1000])
    s.close()
    out = {f"store:read:{t}": _h(read(d, t)) for t in ("orders", "fills", "l2", "events")}
    for seq in (1, 2500, 5000, 9999):
        for sym, _ in symbols:
            v = book_at(d, sym, seq=seq)
            out[f"store:book_at:{sym}:{seq}"] = _h(v.bids, v.asks)
            v3 = book_at(d, sym, seq=seq, l3=True)
            out[f"store:book_at_l3:{sym}:{seq}"] = _h(v3.bids, v3.asks, v3.orders)
    rep = verify(d)
    out["store:verify"] = {"ok": bool(rep.ok), "violations": len(rep.violations)}
    out["store:rerun"] = {"ok": bool(rerun(d).ok)}
    for sym, _ in symbols:
        out[f"store:stats:{sym}"] = _h(stats(d, sym))
    return out


def backtest_jobs(flows: dict) -> dict:
    """Backtests on the njit and Python paths, L3 and L2, with latency, what-if and a sweep."""
    from exsim.replay import ConstantLatency, backtest, sweep, whatif
    from exsim.scenarios import load_binance, load_scenario
    from exsim.replay.backtesting.strategies import InventoryMarketMaker, MomentumTaker, market_maker_fast

    out = {}
    sc = load_scenario("default")
    out["backtest:mm:default"] = _bt(backtest(sc, InventoryMarketMaker(), symbol="JPM"))
    out["backtest:mm_fast:default"] = _bt(backtest(sc, market_maker_fast(), symbol="JPM"))
    out["backtest:momentum:default:latency"] = _bt(backtest(
        sc, MomentumTaker(), symbol="JPM", latency=ConstantLatency(20_000, 50_000)))
    out["backtest:mm:default:fees"] = _bt(backtest(sc, InventoryMarketMaker(size=3), symbol="BTCUSD",
                                               fees_bps=1.5))
    amzn = _sample("lobster_AMZN_2012-06-21_level1")
    if amzn:
        out["backtest:mm:lobster_AMZN"] = _bt(backtest(
            amzn, InventoryMarketMaker(size=100, skew_lots=200)))
    bn = _sample("binance_spot_btcusdt_20240808_hftbacktest", "btcusdt_20240808.gz")
    if bn:
        data = load_binance(bn)
        for qm in ("conservative", "proportional"):
            out[f"backtest:mm:binance:{qm}"] = _bt(backtest(
                data, InventoryMarketMaker(size=100_000, skew_lots=100_000, max_position=1_000_000,
                                           every=500),
                latency=ConstantLatency(1_000_000, 1_000_000), queue_model=qm))
    w = whatif(sc, InventoryMarketMaker(), symbol="JPM")
    out["whatif:mm:default"] = _h(*(np.asarray(getattr(w, k)) for k in ("displaced", "added")))
    rows = sweep("default", "exsim.replay.backtesting.strategies:InventoryMarketMaker",
                 {"size": [2, 5]}, symbol="JPM", scheduler="serial")
    out["sweep:mm:default"] = _h(json.dumps(rows, sort_keys=True, default=str))
    return out


def old_dir_jobs(tmp: str) -> dict:
    """What a reader and a reopening writer see in ``run_v1`` (written by the store of
    2026-12-01, see make_dir.py): every table, books, verify and rerun, then the same tables
    after ``Session.open`` recovered its WAL tail and ``close`` sealed it."""
    import shutil

    from exsim.replay import book_at, rerun, verify
    from exsim.store import Session, read

    d = os.path.join(tmp, "run_v1")
    shutil.copytree(os.path.join(HERE, "run_v1"), d)
    tables = ("orders", "fills", "l2", "events")
    out = {f"old_dir:read:{t}": _h(read(d, t)) for t in tables}
    for seq in (1999, 4500, 7500):
        v = book_at(d, "JPM", seq=seq, l3=True)
        out[f"old_dir:book_at_l3:JPM:{seq}"] = _h(v.bids, v.asks, v.orders)
    out["old_dir:verify"] = {"ok": bool(verify(d).ok)}
    out["old_dir:rerun"] = {"ok": bool(rerun(d).ok)}
    s = Session.open(d)
    seq = int(s.engine.seq)
    s.close()
    out["old_dir:reopened"] = {"seq": seq, **{t: _h(read(d, t)) for t in tables}}
    return out


def capture() -> dict:
    """Return {job name: digest or small dict} for every job whose inputs are present."""
    flows = _flows()
    out = {}
    out.update(engine_jobs(flows))
    with tempfile.TemporaryDirectory() as tmp:
        out.update(store_jobs(flows, tmp))
        out.update(old_dir_jobs(tmp))
    out.update(backtest_jobs(flows))
    return out


def main(argv=None) -> int:
    """Print (or with --write store) the digests; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {OUTPUTS}")
    args = ap.parse_args(argv)
    got = capture()
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if args.write:
        with open(OUTPUTS, "w") as f:
            f.write(text)
        print(f"wrote {len(got)} digests to {OUTPUTS}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
