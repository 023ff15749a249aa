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

import os
from dataclasses import dataclass

import numpy as np

from exchange import Engine
from exchange.errors import CorruptionError, StoreError, UsageError
from store import Catalog, journaled_through, read, read_checkpoint
from store.catalog import resolve_symbol as store_resolve_symbol
from store.tables import orders_without_seq as strip_seq  # noqa: F401 (exported)

__all__ = ["RunInfo", "run_info", "resolve_symbol", "load_checkpoint", "checkpoint_row", "restore",
           "read_table", "segment_cuts", "output_segments",
           "strip_seq", "SEQ_MAX"]

SEQ_MAX = (1 << 62)   # an inclusive upper bound above any seq a run can reach


@dataclass(frozen=True)
class RunInfo:
    """The bounds and configuration of the run stored in a data directory."""

    data_dir: str
    first_seq: int                 # seq of the first checkpoint (state the run started from)
    last_seq: int                  # last journaled message
    checkpoints: tuple             # checkpoint seqs, oldest first
    symbols: dict                  # name -> id, as the catalog records them
    config: dict                   # the engine config recorded for the first run ({} if none)


def _open_catalog(data_dir) -> Catalog:
    """The catalog of ``data_dir``, opened read-only (replay never writes a data directory)."""
    if not os.path.isdir(data_dir):
        raise StoreError(f"{data_dir}: no such data directory")
    return Catalog(data_dir, readonly=True)


def run_info(data_dir) -> RunInfo:
    """Return the RunInfo of ``data_dir``.

    The configuration is the first run's ``engine_options`` as the catalog's checked rows hold
    it (a damaged one is a CorruptionError, never a different engine).
    Raises StoreError if it is not a data directory or holds no checkpoint (nothing to rebuild
    from), CorruptionError if the catalog or the WAL fails a check.
    """
    data_dir = os.fspath(data_dir)
    cat = _open_catalog(data_dir)
    try:
        cks = tuple(int(r["seq"]) for r in cat.checkpoints())
        sealed = cat.sealed_through()
        symbols = {r["name"]: int(r["id"]) for r in cat.symbols()}
        runs = cat.runs()[:1]
    finally:
        cat.close()
    if not cks:
        raise StoreError(f"{data_dir}: no checkpoint registered; the run cannot be rebuilt")
    last = max(cks[-1], sealed, journaled_through(data_dir))
    config = runs[0]["engine_options"] if runs else {}
    _check_config(data_dir, cks[0], config, symbols)
    return RunInfo(data_dir, cks[0], last, cks, symbols, config)


def _check_config(data_dir: str, first: int, config: dict, symbols: dict) -> None:
    """CorruptionError naming the catalog if its run configuration (STP mode, symbols) is not
    the one the run's first checkpoint records. why: the checkpoint is what the engine actually
    ran with and sits under its own checksums; a catalog from before row checksums does not, and
    verify would otherwise judge the run by an edited STP mode."""
    from exchange.checkpoint import MAGIC, parse

    _, blob = read_checkpoint(data_dir, first)
    if bytes(blob[:len(MAGIC)]) != MAGIC:
        return   # another engine's checkpoint: its layout is its own (restore checks it)
    ck = parse(blob)
    catalog = os.path.join(data_dir, "catalog.sqlite")
    stp = config.get("stp", "none") if isinstance(config, dict) else config
    if stp != ck.stp:
        raise CorruptionError(f"{catalog}: the run's engine options say stp {stp!r}, but its first "
                              f"checkpoint (seq {first}) was made with stp {ck.stp!r}: the catalog "
                              "is damaged", catalog, -1)
    names = {name: i for i, (name, *_rest) in enumerate(ck.symbols)}
    if any(names.get(name, sid) != sid for name, sid in symbols.items()):
        raise CorruptionError(f"{catalog}: the symbols table disagrees with the run's first "
                              f"checkpoint (seq {first}): the catalog is damaged", catalog, -1)


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


