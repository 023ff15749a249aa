"""exsim store: write-ahead log, columnar segments, catalog, compaction and the read API.

Public surface::

    from exsim.store import Session, read, compact
    s = Session.create("data/run1", engine, run_info={"scenario": "poisson", "seed": 7})
    res = s.process(orders)              # journaled before it returns
    s.close()                            # seals and checkpoints
    s = Session.open("data/run1")        # engine restored exactly, continues at the next seq
    fills = read("data/run1", "fills", symbol="JPM", seq=(1, 10_000))   # inclusive range
    cols = read_columns("data/run1", "fills", columns=["price", "qty"])  # {name: array}
    seq, blob = read_checkpoint("data/run1", seq=5_000)   # newest at or before; Engine.restore(blob)
    compact("data/run1")                 # merge small segments into zstd ones
    with Reader("data/run1") as r:       # keeps catalog snapshot, open files, zone maps
        w = r.read("l2", symbol="JPM", ts=(t0, t1))   # read(r, ...) is the same
"""

from exsim.store.catalog import Catalog
from exsim.store.compaction import compact
from exsim.store.query import Reader, iter_columns, journaled_through, read, read_checkpoint, read_columns
from exsim.store.session import Session
from exsim.store.tables import STORED_DTYPES, TABLES
from exsim.store.wal import WalReport, scan_wal

__all__ = ["Session", "Reader", "read", "read_columns", "iter_columns", "read_checkpoint", "journaled_through", "compact", "Catalog", "scan_wal", "WalReport", "STORED_DTYPES", "TABLES"]
