"""Checkpoint files: ``checkpoints/ckpt-<seq:020>.bin``, an engine's checkpoint under a CRC.

Layout (docs/formats.md, "Checkpoint file"): a 28-byte header ``magic "EXCK", u16 version,
u16 reserved, i64 seq, u64 blob length, u32 CRC32C(blob)`` followed by the blob (the bytes of
``Engine.checkpoint()``).

Invariants:
- A checkpoint file is written under a temporary name, fsynced (when asked), renamed into place
  and its directory fsynced before anyone registers it in the catalog.
- A checkpoint is read only through ``store.paths.inside`` (the catalog row's path cannot leave
  the data directory or pass a symlink), and its header is checked against the file's size
  before the blob is read: a damaged or hostile length never makes the reader allocate more
  than the file holds.
"""

from __future__ import annotations

import os
import struct

import crc32c

from exsim.exchange.errors import CorruptionError, StoreError, WriteError
from exsim.store.paths import inside, is_plain_dir
from exsim.store.wal import fsync_dir

__all__ = ["write_checkpoint_file", "read_checkpoint_file", "CKPT_HEAD", "CKPT_MAGIC", "CKPT_VERSION"]

CKPT_MAGIC = b"EXCK"
CKPT_VERSION = 1
CKPT_HEAD = struct.Struct("<4sHHqQI")   # magic, version, reserved, seq, blob length, crc32c(blob)


def checkpoint_rel(seq: int) -> str:
    """The relative path of the checkpoint file of ``seq``."""
    return os.path.join("checkpoints", f"ckpt-{int(seq):020d}.bin")


def write_checkpoint_file(data_dir: str, seq: int, blob: bytes, *, sync: bool = True) -> tuple[str, int, int]:
    """Write ``blob`` as the checkpoint file of ``seq`` in ``data_dir`` (durably if ``sync``).

    Returns (relative path, file size, CRC32C of the blob): what the catalog row records.
    Raises WriteError naming the file if it cannot be written, CorruptionError if
    ``checkpoints/`` (or the file's name) is a symlink.
    """
    rel = checkpoint_rel(seq)
    full = inside(data_dir, rel, what="checkpoint")
    tmp = full + ".tmp"
    crc = crc32c.crc32c(blob)
    try:
        ckdir = os.path.dirname(full)
        os.makedirs(ckdir, exist_ok=True)
        if not is_plain_dir(ckdir):
            raise CorruptionError(f"{ckdir}: not a plain directory (a symlink?); refused", ckdir, -1)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(CKPT_HEAD.pack(CKPT_MAGIC, CKPT_VERSION, 0, seq, len(blob), crc))
            f.write(blob)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, full)
        if sync:
            fsync_dir(ckdir)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriteError(f"cannot write checkpoint {full}: {e}") from e
    return rel, CKPT_HEAD.size + len(blob), crc


def read_checkpoint_file(data_dir: str, row: dict) -> bytes:
    """Return the engine blob of the checkpoint file a catalog ``row`` (seq, path) names.

    Raises CorruptionError naming the file and offset if the path leaves the data directory or
    passes a symlink, the header is bad, the length disagrees with the file's size or the
    CRC32C fails; StoreError if the file cannot be read (missing, unreadable).
    """
    path = inside(data_dir, row["path"], what="checkpoint")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise StoreError(f"{path}: cannot read the checkpoint the catalog registers for seq "
                         f"{row['seq']}: {e}") from e
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(CKPT_HEAD.size)
        if len(head) < CKPT_HEAD.size:
            raise CorruptionError(f"{path}: checkpoint file too short ({size} bytes)", path, 0)
        magic, version, _, seq, n, crc = CKPT_HEAD.unpack(head)
        if magic != CKPT_MAGIC or version != CKPT_VERSION or seq != row["seq"] \
                or n != size - CKPT_HEAD.size:
            raise CorruptionError(f"{path}: bad checkpoint header at offset 0", path, 0)
        blob = f.read(n)
    if len(blob) != n:
        raise CorruptionError(f"{path}: checkpoint file shorter than its header says", path, CKPT_HEAD.size)
    if crc32c.crc32c(blob) != crc:
        raise CorruptionError(f"{path}: checkpoint checksum mismatch at offset {CKPT_HEAD.size}",
                              path, CKPT_HEAD.size)
    return blob
