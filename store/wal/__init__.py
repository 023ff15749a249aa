"""Write-ahead log: one checksummed record per processed batch, split the way LevelDB splits its log.

- ``format``: magic, versions, record types, frame and batch structs, limits (the bytes on disk);
- ``payload``: a batch encoded as a record payload and decoded back (``PartEncoder``);
- ``files``: the WAL directory's files, listed, read and cut without following symlinks;
- ``writer``: ``WalWriter`` (append, rotate, durability policy) and ``GroupWriter`` (group commit);
- ``reader``: ``scan_wal`` (check, repair, salvage) returning ``WalRecord``s and a ``WalReport``.

A reader of this package needs only store.tables, store.shuffle and store.paths below it.
"""

from exsim.store.wal.files import fsync_dir, wal_files
from exsim.store.wal.format import BATCH, FILE_HEADER, FRAME, FRAME4, HCRC, MAGIC, READ_VERSIONS, VERSION
from exsim.store.wal.payload import PartEncoder
from exsim.store.wal.reader import WalRecord, WalReport, scan_wal
from exsim.store.wal.writer import DURABILITY, GroupWriter, WalWriter

__all__ = ["WalWriter", "GroupWriter", "PartEncoder", "WalRecord", "WalReport", "scan_wal", "wal_files",
           "DURABILITY", "fsync_dir", "MAGIC", "VERSION", "READ_VERSIONS", "FILE_HEADER", "FRAME", "FRAME4",
           "HCRC", "BATCH"]
