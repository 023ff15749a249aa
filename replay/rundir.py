"""What replay needs from a data directory: symbols, run bounds, checkpoints, table slices.

Everything here reads; nothing writes. A data directory is opened through ``store.Catalog`` and
``store.read`` (which merges sealed segments with the WAL tail), so replay sees exactly the rows a
reader of the store sees, including batches not yet sealed.

Invariants:
- ``RunInfo.first_seq`` is the seq of the run's first checkpoint (the state the run started
  from, usually 0: an empty engine); ``last_seq`` is the last journaled message, whether sealed,
  checkpointed or only in the WAL. Every seq in ``[first_seq, last_seq]`` can be rebuilt.
- Checkpoints are read through ``store.read_checkpoint`` (which checks the file's header and
  CRC32C) and restored with ``Engine.restore`` (whose bytes only ``exchange.checkpoint``
  parses, checksum and every field checked), never parsed here.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from dataclasses import dataclass

import numpy as np

from exsim.exchange import Engine
from exsim.exchange.errors import CorruptionError, StoreError, UsageError
from exsim.store import Catalog, journaled_through, read, read_checkpoint
from exsim.store.catalog import resolve_symbol as store_resolve_symbol
from exsim.store.tables import orders_without_seq as strip_seq  # noqa: F401 (exported)

__all__ = ["RunInfo", "run_info", "resolve_symbol", "load_checkpoint", "checkpoint_row", "restore",
           "read_table", "segment_cuts", "output_segments", "checkpoint_config", "config_difference",
           "strip_seq", "SEQ_MAX", "run_clock"]

log = logging.getLogger(__name__)

SEQ_MAX = (1 << 62)   # an inclusive upper bound above any seq a run can reach


@dataclass(frozen=True)
class RunInfo:
    """The bounds and configuration of the run stored in a data directory."""

    data_dir: str
    first_seq: int                 # seq of the first checkpoint (state the run started from)
    last_seq: int                  # last journaled message
    checkpoints: tuple             # checkpoint seqs, oldest first
    symbols: dict                  # name -> id, as the catalog records them
    config: dict                   # the engine config the first checkpoint records (the
                                   # catalog's copy must agree: run_info checks)


def _open_catalog(data_dir) -> Catalog:
    """The catalog of ``data_dir``, opened read-only (replay never writes a data directory)."""
    if not os.path.isdir(data_dir):
        raise StoreError(f"{data_dir}: no such data directory")
    return Catalog(data_dir, readonly=True)


def run_info(data_dir) -> RunInfo:
    """Return the RunInfo of ``data_dir``.

    The configuration (``RunInfo.config``, ``Engine.config()`` form) is the one the run's first
    checkpoint records: what the engine actually ran with, under the checkpoint file's CRC32C.
    The catalog's copies (the first run's ``engine_options`` and the ``symbols`` table) must
    agree with it value for value, so an edited catalog, even one from before row checksums,
    is a CorruptionError and never a different engine (``_check_config``). For a checkpoint of
    another engine class (whose layout only it knows) the catalog's ``engine_options`` is used.
    Raises StoreError if it is not a data directory or holds no checkpoint (nothing to rebuild
    from), CorruptionError if the catalog, the first checkpoint or the WAL fails a check, or
    the catalog's configuration differs from the first checkpoint's.
    """
    data_dir = os.fspath(data_dir)
    cat = _open_catalog(data_dir)
    try:
        cks = tuple(int(r["seq"]) for r in cat.checkpoints())
        sealed = cat.sealed_through()
        symbol_rows = cat.symbols()
        runs = cat.runs()[:1]
    finally:
        cat.close()
    if not cks:
        raise StoreError(f"{data_dir}: no checkpoint registered; the run cannot be rebuilt")
    symbols = {r["name"]: int(r["id"]) for r in symbol_rows}
    last = max(cks[-1], sealed, journaled_through(data_dir))
    config = _check_config(data_dir, cks[0], runs[0] if runs else None, symbol_rows)
    log.info("%s: seq %s..%s, %d checkpoint(s), %d symbol(s), stp %s; the catalog's run "
             "configuration agrees with the first checkpoint's", data_dir, f"{cks[0]:,}",
             f"{last:,}", len(cks), len(symbols), config.get("stp", "none"))
    return RunInfo(data_dir, cks[0], last, cks, symbols, config)


def checkpoint_config(ck) -> dict:
    """Return ``Engine.config()`` of the engine that wrote the parsed checkpoint ``ck``
    (``exchange.checkpoint.parse``), as JSON values (lists, not tuples).

    why it can: the header holds stp, ownership and every symbol's name, tick size, band and
    options in ``symbol_options``' normal form, which is what ``Engine.config()`` lists."""
    return json.loads(json.dumps({"stp": ck.stp, "ownership": ck.ownership, "symbols": [
        {"name": name, "id": i, "tick_size": tick, "min_price": lo, "max_price": hi, **opts}
        for i, (name, tick, lo, hi, opts) in enumerate(ck.symbols)]}))


def _check_config(data_dir: str, first: int, run: dict | None, symbol_rows: list) -> dict:
    """Return the run's engine configuration: the first checkpoint's (``checkpoint_config``),
    or the catalog's (``run``'s engine_options; {} without a run row) when the checkpoint is
    another engine's.

    Raises CorruptionError naming the catalog, the table and the value when the first run
    row's ``engine_options`` or a ``symbols`` row says anything the checkpoint does
    not. why: the checkpoint is what the engine actually ran with and sits under its own
    checksum; the catalog's copy is what a reader would otherwise trust, and a catalog from
    before row checksums is read unchecked, so verify would judge the run by an edited STP mode
    or lot size while rerun (which restores the checkpoint) saw nothing wrong.
    """
    from exsim.exchange.checkpoint import MAGIC, parse

    _, blob = read_checkpoint(data_dir, first)
    if bytes(blob[:len(MAGIC)]) != MAGIC:
        return run["engine_options"] if run else {}
    truth = checkpoint_config(parse(blob))
    catalog = os.path.join(data_dir, "catalog.sqlite")

    def damaged(where: str, problem: str) -> CorruptionError:
        return CorruptionError(f"{catalog}: {where}: {problem} (the run's first checkpoint, "
                               f"seq {first}, records what the engine ran with): the catalog "
                               "is damaged", catalog, -1)

    if run is None:
        raise damaged("table runs", "has no row (no run configuration)")
    problem = config_difference(run["engine_options"], truth)
    if problem:
        raise damaged(f"table runs row id={run['id']}: engine_options", problem)
    by_id = {int(r["id"]): r for r in symbol_rows}
    if sorted(by_id) != list(range(len(truth["symbols"]))):
        raise damaged("table symbols", f"holds symbol ids {sorted(by_id)} where the first checkpoint "
                                       f"has {len(truth['symbols'])} symbol(s)")
    for sid, want in enumerate(truth["symbols"]):
        row = by_id[sid]
        if row["name"] != want["name"]:
            raise damaged(f"table symbols row id={sid}", f"name is {row['name']!r} where the "
                                                         f"first checkpoint has {want['name']!r}")
        if row["tick_size"] != float(want["tick_size"]):
            raise damaged(f"table symbols row id={sid}",
                          f"tick_size is {row['tick_size']!r} where the first checkpoint has "
                          f"{want['tick_size']!r}")
        problem = _symbol_difference(row["info"], want, f"symbol {sid}")
        if problem:
            raise damaged(f"table symbols row id={sid}: info", problem)
    return truth


def config_difference(recorded, truth: dict) -> str | None:
    """Return the first value in which the engine config ``recorded`` (a catalog's copy,
    possibly written before some options existed) differs from ``truth`` (``Engine.config()``
    form), as text naming the key and both values; None when they agree.

    An option ``recorded`` lacks counts as its default (older writers did not know it), so an
    old catalog agrees with its own checkpoint."""
    if not isinstance(recorded, dict):
        return f"is {_short(recorded)}, not an engine config"
    extra = sorted(str(k) for k in recorded.keys() - {"stp", "ownership", "symbols"})
    if extra:
        return f"has key {extra[0]!r}, which no engine config has"
    for key, default in (("stp", "none"), ("ownership", False)):
        got = recorded.get(key, default)
        if got != truth[key] or type(got) is not type(truth[key]):
            return f"{key} is {_short(got)} where the first checkpoint has {_short(truth[key])}"
    syms = recorded.get("symbols")
    if not isinstance(syms, list) or len(syms) != len(truth["symbols"]):
        return (f"symbols is {_short(syms)} where the first checkpoint has {len(truth['symbols'])} "
                "symbol(s)")
    for k, (got, want) in enumerate(zip(syms, truth["symbols"])):
        problem = _symbol_difference(got, want, f"symbols[{k}]")
        if problem:
            return problem
    return None


def _symbol_difference(got, want: dict, where: str) -> str | None:
    """The first value in which the symbol config ``got`` differs from ``want`` (both
    ``Engine.config()`` symbol entries; options ``got`` lacks at their defaults), or None."""
    from exsim.exchange.symbol_options import OPTIONS, PHASE_OPTIONS, OptionError, normalize

    if not isinstance(got, dict):
        return f"{where} is {_short(got)}, not a symbol config"
    base = ("name", "id", "tick_size", "min_price", "max_price")
    extra = sorted(str(k) for k in got.keys() - {*base, *OPTIONS, *PHASE_OPTIONS})
    if extra:
        return f"{where} has key {extra[0]!r}, which no symbol config has"
    for key in base:
        if key not in got:
            continue   # why: an older writer's entry may lack one; what it has must agree
        v = got[key]
        if v != want[key] or isinstance(v, bool) or (key == "name" and not isinstance(v, str)):
            return (f"{where}.{key} is {_short(v)} where the first checkpoint has "
                    f"{_short(want[key])}")
    try:
        opts = json.loads(json.dumps(normalize({k: got[k] for k in (*OPTIONS, *PHASE_OPTIONS)
                                                if k in got})))
    except (OptionError, TypeError, ValueError) as e:
        return f"{where}: {e}"
    for key in sorted(opts.keys() | (want.keys() - set(base))):
        v, w = opts.get(key, _default_of(key)), want.get(key, _default_of(key))
        if v != w or type(v) is not type(w):
            return f"{where}.{key} is {_short(v)} where the first checkpoint has {_short(w)}"
    return None


def _default_of(key: str):
    """The normal-form default of symbol option ``key`` (a phase option at its default is left
    out of the normal form, so either side may lack it)."""
    from exsim.exchange.symbol_options import DEFAULTS, PHASE_DEFAULTS
    return json.loads(json.dumps({**DEFAULTS, **PHASE_DEFAULTS}.get(key)))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def resolve_symbol(info: RunInfo, symbol) -> tuple[int, str]:
    """Return (id, name) of ``symbol`` (a name or an id). Raises UsageError if the run lacks it."""
    sid = store_resolve_symbol(info.symbols, symbol, info.data_dir)
    return sid, next(name for name, i in info.symbols.items() if i == sid)


def checkpoint_row(info: RunInfo, seq: int) -> dict:
    """Return the catalog row of the newest checkpoint at or before ``seq``.

    Raises UsageError if ``seq`` is before the run's first checkpoint.
    """
    cat = _open_catalog(info.data_dir)
    try:
        row = cat.latest_checkpoint(at_or_before=seq)
    finally:
        cat.close()
    if row is None:
        raise UsageError(f"seq {seq} is before the first checkpoint (seq {info.first_seq}) of "
                         f"{info.data_dir}")
    return row


def restore(info: RunInfo, row: dict) -> Engine:
    """Return the Engine restored from checkpoint ``row``; CorruptionError if it fails a check."""
    seq, blob = read_checkpoint(info.data_dir, int(row["seq"]))
    if seq != int(row["seq"]):   # only if the catalog changed under us between the two reads
        raise StoreError(f"{info.data_dir}: checkpoint at seq {row['seq']} is no longer registered")
    return Engine.restore(blob)


def load_checkpoint(info: RunInfo, seq: int) -> Engine:
    """Return the Engine restored from the newest checkpoint at or before ``seq``.

    Raises UsageError if ``seq`` is before the run's first checkpoint, CorruptionError if the
    checkpoint file fails a check.
    """
    return restore(info, checkpoint_row(info, seq))


def read_table(info: RunInfo, table: str, sid: int | None, lo: int, hi: int,
               columns=None) -> np.ndarray:
    """Rows of ``table`` for symbol ``sid`` (None: all) with lo <= seq <= hi, in seq order."""
    if hi < lo:
        return read(info.data_dir, table, symbol=sid, seq=(1, 0), columns=columns)[:0]
    return read(info.data_dir, table, symbol=sid, seq=(lo, hi), columns=columns)


def segment_cuts(info: RunInfo, table: str = "orders") -> list[int]:
    """Seqs where reading ``table`` can be split without cutting a sealed segment, ascending.

    A seq s is a cut when every live segment of ``table`` (any symbol) ends at or before s or
    starts after it; seal boundaries are such cuts for every table, since one seal writes each
    table's rows of the same seq range. Why: a reader that splits a run at these seqs decodes
    each segment once, where a split inside a segment decodes it for both sides.
    """
    cat = _open_catalog(info.data_dir)
    try:
        _, segs = cat.snapshot(table)
    finally:
        cat.close()
    cuts, end = [], None
    for lo, hi in sorted((int(s["seq_lo"]), int(s["seq_hi"])) for s in segs):
        if end is not None and lo > end:
            cuts.append(end)
        end = hi if end is None else max(end, hi)
    if end is not None:
        cuts.append(end)
    return cuts


def output_segments(info: RunInfo, tables) -> tuple[int, dict] | None:
    """(sealed_through, {(table, symbol): its live segments' catalog rows, by seq}) for
    ``tables``, or None if sealing moved on between the tables' snapshots (a live writer).

    A row of a catalog made before row digests has no "digest" key; readers take it as "".
    """
    cat = _open_catalog(info.data_dir)
    try:
        snaps = [(table, *cat.snapshot(table)) for table in tables]
    finally:
        cat.close()
    if len({sealed for _, sealed, _ in snaps}) > 1:
        return None
    out = {}
    for table, _, segs in snaps:
        for s in segs:
            out.setdefault((table, int(s["symbol"])), []).append(s)
    for segs in out.values():
        segs.sort(key=lambda s: int(s["seq_lo"]))
    return (snaps[0][1] if snaps else 0), out




def run_clock(data_dir) -> "RunClock":
    """Return the ``replay.timefmt.RunClock`` of the run in ``data_dir``: the trading date and
    time zone its catalog row records (``date``, ``tz``, ``ts_origin`` of ``Flow.run_info``),
    and the ts of its first and last messages.

    A run recorded before runs kept their date and zone reads as UTC: an epoch run when its
    first ts is past the first day, else a day counted from midnight with no date (what every
    reader assumed then). Raises as ``run_info``."""
    from exsim.replay.timefmt import DAY_NS, RunClock

    info = run_info(data_dir)
    cat = _open_catalog(info.data_dir)
    try:
        runs = cat.runs()[:1]
    finally:
        cat.close()
    rec = runs[0]["info"] if runs else {}
    first = read_table(info, "orders", None, info.first_seq + 1, info.first_seq + 1, ["ts"])
    last = read_table(info, "orders", None, info.last_seq, info.last_seq, ["ts"])
    first = int(first["ts"][0]) if first.size else None
    last = int(last["ts"][-1]) if last.size else first
    origin = rec.get("ts_origin")
    epoch = origin == "epoch" if origin in ("epoch", "midnight") else (first or 0) >= DAY_NS
    tz = rec.get("tz") if isinstance(rec.get("tz"), str) else "UTC"
    date = rec.get("date") if isinstance(rec.get("date"), str) and not epoch else None
    if date is not None:
        try:   # why: the catalog row is input like any file; a bad date must not crash later
            if len(date) != 10:
                raise ValueError(date)
            _dt.date.fromisoformat(date)
        except ValueError:
            log.warning("%s: the run records trading date %r, which is not a date "
                        "(YYYY-MM-DD); times are read without a date", data_dir, date)
            date = None
    try:
        from exsim.replay.timefmt import check_zone
        check_zone(tz)
    except UsageError:
        log.warning("%s: the run records time zone %r, which this machine does not know; "
                    "times are read as UTC", data_dir, tz)
        tz = "UTC"
    return RunClock(tz=tz, date=date, epoch=epoch, first=first, last=last)
