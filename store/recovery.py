"""Recovering a data directory on open: layout checks, checkpoint restore, WAL tail, orphans.

``Session.open`` takes the writer lock, then: ``check_layout``; ``restore_checkpoint`` (the
newest registered checkpoint, restored with a registered engine class); ``journaled_tail``
(the WAL scanned, repaired or salvaged, from the lower of ``sealed_through`` and the
checkpoint's seq); the session replays that tail through the engine; ``remove_orphans``.

Invariants:
- Nothing here imports code a data directory names (store.engine_classes), follows a symlinked
  ``wal/``, ``segments/`` or ``checkpoints/``, or deletes through a link.
- The WAL tail returned covers every seq after min(sealed_through, checkpoint seq) up to at
  least max(sealed_through, checkpoint seq), contiguously, or CorruptionError says what is lost.
"""

from __future__ import annotations

import os

from exsim.exchange.errors import CorruptionError, StoreError
from exsim.store.checkpoint_file import read_checkpoint_file
from exsim.store.engine_classes import registered_engine_class
from exsim.store.paths import is_plain_dir
from exsim.store.wal import scan_wal

__all__ = ["check_layout", "restore_checkpoint", "journaled_tail", "remove_orphans"]


def check_layout(data_dir: str) -> None:
    """Return None; raise CorruptionError if ``wal/``, ``segments/`` or ``checkpoints/`` exists but is
    not a plain directory (a symlink would let repair or the sweep touch files elsewhere)."""
    for sub in ("wal", "segments", "checkpoints"):
        path = os.path.join(data_dir, sub)
        if os.path.lexists(path) and not is_plain_dir(path):
            raise CorruptionError(f"{path}: is a symlink or not a directory; a data directory's "
                                  "files must be its own (refused before anything was written)",
                                  path, -1)


def restore_checkpoint(data_dir: str, catalog, engine_class=None):
    """Return (engine, checkpoint row): the engine restored from the newest registered checkpoint.

    ``engine_class`` None looks up the class the catalog names in ``ENGINE_CLASSES``. Raises
    StoreError if no checkpoint is registered or the class is not; CorruptionError if the file
    fails a check or restores another seq than its row says.
    """
    ck = catalog.latest_checkpoint()
    if ck is None:
        raise StoreError(f"{data_dir}: no checkpoint registered; cannot restore an engine")
    if engine_class is None:
        engine_class = registered_engine_class(catalog.get_meta("engine_class"), catalog.path)
    engine = engine_class.restore(read_checkpoint_file(data_dir, ck))
    if engine.seq != ck["seq"]:
        raise CorruptionError(f"{ck['path']}: checkpoint restores seq {engine.seq}, catalog says "
                              f"{ck['seq']}", os.path.join(data_dir, ck["path"]), 0)
    return engine, ck


def journaled_tail(data_dir: str, catalog, ckpt_seq: int, salvage: bool):
    """Return (records, WalReport, sealed_through): the WAL records after min(sealed_through,
    ``ckpt_seq``), the WAL repaired (a crash tail cut; with ``salvage`` a corrupt record too).

    Raises CorruptionError if the WAL fails a check, starts after that floor or ends before
    max(sealed_through, ``ckpt_seq``) (acknowledged records lost).
    """
    sealed = catalog.sealed_through()
    floor = min(sealed, ckpt_seq)
    records, report = scan_wal(os.path.join(data_dir, "wal"), repair=True, salvage=salvage,
                               after_seq=floor)
    if records and records[0].first_seq > floor + 1:
        raise CorruptionError(f"{data_dir}/wal: WAL starts at seq {records[0].first_seq}, "
                              f"but seqs after {floor} are neither sealed nor checkpointed",
                              os.path.join(data_dir, "wal"), 0)
    last = records[-1].last_seq if records else floor
    if last < max(sealed, ckpt_seq):
        raise CorruptionError(f"{data_dir}/wal: WAL ends at seq {last} before the sealed/"
                              f"checkpointed seq {max(sealed, ckpt_seq)} (records lost)",
                              os.path.join(data_dir, "wal"), 0)
    return records, report, sealed


def remove_orphans(data_dir: str, catalog) -> None:
    """Delete segment/checkpoint files no catalog row names (a crash between write and
    register, or between a compaction commit and its deletes) and temporary files; returns
    None. The caller holds the directory's writer lock.

    Never follows a symlink: a symlinked ``segments/`` or ``checkpoints/`` raises
    CorruptionError, a symlink below them is deleted as a link (never what it points at).
    """
    live = {r["path"] for r in catalog.all_segments()}
    live |= {r["path"] for r in catalog.checkpoints()}
    for sub in ("segments", "checkpoints"):
        root = os.path.join(data_dir, sub)
        if not os.path.lexists(root):
            continue
        if not is_plain_dir(root):
            raise CorruptionError(f"{root}: is a symlink or not a directory; refused (the "
                                  "orphan sweep deletes only the data directory's own files)",
                                  root, -1)
        # why fwalk: it never descends through a symlink and unlinks relative to the
        # directory's descriptor, so a directory swapped for a link meanwhile is not followed
        for dirpath, _, files, dirfd in os.fwalk(root, follow_symlinks=False):
            for name in files:
                rel = os.path.relpath(os.path.join(dirpath, name), data_dir)
                if rel not in live:
                    try:
                        os.unlink(name, dir_fd=dirfd)
                    except FileNotFoundError:
                        pass
