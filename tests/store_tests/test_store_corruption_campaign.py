"""A bounded corruption campaign: damage one file of a small data directory at sampled offsets
and require, for every case, either an ExsimError naming the damaged file or exactly the
original data (all four tables through ``store.read``, every registered checkpoint through
``store.read_checkpoint``; ``journaled_through`` on its own).

The data directory (FakeEngine, ~3,000 messages) has sealed segments of every table, a WAL tail
above ``sealed_through`` and two checkpoints. Each file kind runs in one child process (the
cases one after the other, each on its own copy), so a decoder that crashes the interpreter
(a signal) fails the test naming the case instead of killing pytest.

Kinds and the readers that must catch them:
- ``catalog_value`` (SQL UPDATE of one value, its row_crc left as it was) and ``catalog_page``
  (bytes of catalog.sqlite): store/catalog.py (row checksums, table tallies, wrapped sqlite
  errors).
- ``checkpoint``: store/checkpoint_file.py (header, length, CRC32C).
- ``segment``: store/segment.py (footer, index checked against the file and the catalog row,
  block CRC32Cs) and the column decoders of store/codecs.py.
- ``wal``: store/wal/reader.py (frame headers, lengths and checksums before any allocation).
- ``forged``: edits made with every checksum recomputed, by someone who knows the formats
  (issue 41): zone maps retiled to open a gap between blocks, WAL frame headers claiming more
  orders, catalog rows relabelled and ``sealed_through`` moved (rows and tallies resealed).
  Each case also names seq windows (the rows a forgery would hide); every read of them, each
  on its own, must be a named error or exact. Its directory
  (``pristine_blocks``) is written with 16-row blocks, so segments have zone maps to forge.

Limit: the directory is written by today's store. A catalog written before row checksums is
read unchecked until a writer opens it; its segment rows are still value-checked and its run
configuration is checked against the first checkpoint, but a flipped tick size there is not.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

TABLES = ("orders", "fills", "l2", "events")
CASES_PER_KIND = int(os.environ.get("EXSIM_CAMPAIGN_CASES", "40"))   # per kind; raise it for a longer hunt
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A closed data directory: sealed segments, a WAL tail, checkpoints at seq 0 and 1,800."""
    return _pristine(tmp_path_factory, "campaign")


def _pristine(tmp_path_factory, name):
    from exsim.store import Session
    from store_fixtures import FakeEngine, make_orders
    d = tmp_path_factory.mktemp(name) / "pristine"
    eng = FakeEngine()
    for name in ("A", "B", "C"):
        eng.add_symbol(name)
    # why not in the background: a seal thread could still be writing a segment (.seg.tmp)
    # when the fixture returns and the copies are taken; sealed in process(), every file is
    # complete once the last process() returns
    s = Session.create(str(d), eng, run_info={"scenario": "campaign", "seed": 13},
                       seal_every=1000, checkpoint_every=1800, durability="none",
                       seal_in_background=False)
    for i in range(10):
        s.process(make_orders(300, seed=i))
    s.wal.close()        # a crash: the batches after the last seal stay in the WAL only
    s.catalog.close()
    leftovers = [p.name for p in d.rglob("*.tmp")]
    assert not leftovers, f"temporary files left in the pristine directory: {leftovers}"
    return str(d)


@pytest.fixture(scope="module")
def pristine_blocks(tmp_path_factory):
    """``pristine`` written with 16 rows per block: segments of several blocks."""
    from exsim.store import segment

    saved = dict(segment.BLOCK_ROWS)
    segment.BLOCK_ROWS.update({t: 16 for t in saved})
    try:
        return _pristine(tmp_path_factory, "campaign-blocks")
    finally:
        segment.BLOCK_ROWS.update(saved)


def _files(d, kind):
    if kind == "segment":
        root = os.path.join(d, "segments")
    elif kind == "checkpoint":
        root = os.path.join(d, "checkpoints")
    elif kind == "wal":
        root = os.path.join(d, "wal")
    else:
        return [os.path.join(d, "catalog.sqlite")]
    return sorted(os.path.join(p, f) for p, _, fs in os.walk(root) for f in fs)


def _byte_cases(d, kind, rng):
    """[(case name, relative file, offset, xor mask)]: a third in the first 64 bytes (headers),
    the rest anywhere (in catalog.sqlite: on bytes that are not 0, as most of a page is free)."""
    files = _files(d, kind)
    assert files, kind
    out = []
    for k in range(CASES_PER_KIND):
        path = files[int(rng.integers(len(files)))]
        size = os.path.getsize(path)
        if k % 3 == 0:
            off = int(rng.integers(min(size, 64)))
        elif kind == "catalog_page":
            used = np.flatnonzero(np.fromfile(path, np.uint8))
            off = int(used[rng.integers(used.size)])
        else:
            off = int(rng.integers(size))
        mask = 0xFF if k % 2 else 1 << int(rng.integers(8))
        rel = os.path.relpath(path, d)
        out.append((f"{rel}@{off}^{mask:#x}", rel, off, mask))
    return out


def _value_cases(d, rng):
    """[(case name, table, rowid, column, SQL expression)] flipping one catalog value."""
    from exsim.store.catalog import _ROW_COLUMNS
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    out = []
    tables = list(_ROW_COLUMNS)
    for _ in range(CASES_PER_KIND):
        table = tables[int(rng.integers(len(tables)))]
        rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table}")]
        rowid = rowids[int(rng.integers(len(rowids)))]
        col, kind = _ROW_COLUMNS[table][int(rng.integers(len(_ROW_COLUMNS[table])))]
        bit = int(rng.integers(20))
        last = f"unicode(substr({col}, -1))"
        expr = {"t": f"substr({col}, 1, length({col}) - 1) || char(({last} | 1) - ({last} & 1))",
                "f": f"{col} + {1 << bit}",
                "i": f"(({col}) | {1 << bit}) - (({col}) & {1 << bit})"}[kind[0]]   # xor
        out.append((f"{table}[{rowid}].{col}", table, rowid, col, expr))
    con.close()
    return out


def _forged_cases(d):
    """[(case name, forge(copy dir) -> the damaged file's name, [(table, seq lo, seq hi)])]:
    forgeries under recomputed checksums, each with the windows of the rows it would hide."""
    from exsim.store import Catalog
    from exsim.store.segment import SegmentFile
    from exsim.store.wal import wal_files
    from store_fixtures import forge_catalog, forge_wal_header, forge_zone_map

    cat = Catalog(d, readonly=True)
    segs, sealed = cat.all_segments(), cat.sealed_through()
    cat.close()
    cases = []
    for table in TABLES:
        row = max((r for r in segs if r["table_name"] == table), key=lambda r: r["rows"])
        with SegmentFile(os.path.join(d, row["path"])) as f:
            z = f.meta["zones"].copy()
        assert z.size >= 3, (table, z.size)
        # block 1's first seq moved up (a gap before it) / its last seq moved down (after it)
        lo_new = int(z[1]["seq_lo"]) + max(1, (int(z[1]["seq_hi"]) - int(z[1]["seq_lo"])) // 2)
        hi_new = int(z[1]["seq_hi"]) - max(1, (int(z[1]["seq_hi"]) - int(z[1]["seq_lo"])) // 2)
        for what, field, value, window in (
                ("start", "seq_lo", lo_new, (int(z[0]["seq_hi"]) + 1, lo_new - 1)),
                ("end", "seq_hi", hi_new, (hi_new + 1, int(z[2]["seq_lo"]) - 1))):
            def forge(c, row=row, field=field, value=value):
                def edit(zones):
                    zones[1][field] = value
                forge_zone_map(os.path.join(c, row["path"]), edit)
                return os.path.basename(row["path"])
            cases.append((f"zone map of {row['path']}: block 1 {what} moved to {value}", forge,
                          [(table, *window)] if window[0] <= window[1] else []))
    wal = [p for _, p in wal_files(os.path.join(d, "wal"))]
    for which in (0, -1):
        def forge(c, which=which):
            path = os.path.join(c, "wal", os.path.basename(wal[which]))
            forge_wal_header(path, which)
            return os.path.basename(path)
        cases.append((f"WAL {os.path.basename(wal[which])} record {which}: +10 orders", forge, []))
    for table, to in (("fills", "l2"), ("l2", "fills"), ("events", "orders")):
        row = max((r for r in segs if r["table_name"] == table), key=lambda r: r["rows"])
        def forge(c, row=row, to=to):
            forge_catalog(c, "segments", row["id"], table_name=to)
            return "catalog.sqlite"
        cases.append((f"catalog: {row['path']} relabelled {to}", forge,
                      [(table, row["seq_lo"], row["seq_hi"])]))
    row = max((r for r in segs if r["table_name"] == "orders"), key=lambda r: r["rows"])
    other = next(r["symbol"] for r in segs if r["symbol"] != row["symbol"])
    def forge(c, row=row, other=other):
        forge_catalog(c, "segments", row["id"], symbol=other)
        return "catalog.sqlite"
    cases.append((f"catalog: {row['path']} moved to symbol {other}", forge,
                  [("orders", row["seq_lo"], row["seq_hi"])]))
    for moved in (sealed - 300, sealed + 200):
        def forge(c, moved=moved):
            forge_catalog(c, "meta", "sealed_through", value=str(moved))
            return "catalog.sqlite"
        cases.append((f"catalog: sealed_through {sealed} -> {moved}", forge,
                      [("orders", min(sealed, moved) + 1, max(sealed, moved))]))
    return cases


def _damage_copies(pristine, tmp_path, kind):
    """Make one damaged copy per case; return [(case name, copy dir, damaged file name)]."""
    rng = np.random.default_rng(sum(map(ord, kind)))   # the same cases on every run
    made = []
    if kind == "forged":
        cases = _forged_cases(pristine)
    else:
        cases = _value_cases(pristine, rng) if kind == "catalog_value" else _byte_cases(pristine, kind, rng)
    for i, case in enumerate(cases):
        d = tmp_path / f"{kind}-{i}"
        shutil.copytree(pristine, d, ignore=shutil.ignore_patterns("catalog.sqlite-*"))
        if kind == "forged":
            name, forge, windows = case
            made.append((name, str(d), forge(str(d)), windows))
        elif kind == "catalog_value":
            name, table, rowid, col, expr = case
            con = sqlite3.connect(d / "catalog.sqlite")
            # OR IGNORE: a key flipped onto another row's key is refused by sqlite (nothing changes)
            con.execute(f"UPDATE OR IGNORE {table} SET {col} = {expr} WHERE rowid = ?", [rowid])
            con.commit()
            con.close()
            made.append((name, str(d), "catalog.sqlite"))
        else:
            name, rel, off, mask = case
            path = d / rel
            data = bytearray(path.read_bytes())
            data[off] ^= mask
            path.write_bytes(bytes(data))
            made.append((name, str(d), os.path.basename(rel)))
    return made


def _read_all(d):
    """Everything a reader can get from ``d``: the four tables, every checkpoint's bytes, the
    catalog's symbols, runs and the meta values a session reads."""
    from exsim.store import Catalog, read, read_checkpoint
    out = {t: read(d, t) for t in TABLES}
    cat = Catalog(d, readonly=True)
    try:
        seqs = [r["seq"] for r in cat.checkpoints()]
        out["symbols"] = cat.symbols()
        out["runs"] = [{k: v for k, v in r.items() if k != "created"} for r in cat.runs()]
        out["meta"] = [cat.get_meta(k) for k in ("engine_class", "encoding_choices", "sealed_through")]
    finally:
        cat.close()
    for seq in seqs:
        out[f"checkpoint {seq}"] = read_checkpoint(d, seq)[1]
    return out


def _same(a, b) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray):
            if not (isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True


def _child(manifest_path: str) -> None:
    """Run in a child process: print one JSON line per case ("start" first, then its outcome)."""
    from exsim.exchange.errors import ExsimError
    with open(manifest_path) as f:
        manifest = json.load(f)
    from exsim.store import journaled_through, read

    want = _read_all(manifest["pristine"])
    last = journaled_through(manifest["pristine"])
    for name, d, damaged, *windows in manifest["cases"]:
        print(json.dumps({"start": name}), flush=True)
        # every read on its own: the whole directory, then each window (a forgery may hide
        # rows from a window that a whole-table read would find)
        reads = [("everything", lambda d=d: _read_all(d), want),
                 ("journaled_through", lambda d=d: {"r": journaled_through(d)}, {"r": last})]
        for table, lo, hi in (windows[0] if windows else []):
            reads.append((f"{table} seq {lo}..{hi}", lambda d=d, t=table, w=(lo, hi): {"r": read(d, t, seq=w)},
                          {"r": read(manifest["pristine"], table, seq=(lo, hi))}))
        outcome = None
        for what, fn, expect in reads:
            try:
                if not _same(fn(), expect):
                    outcome = {"outcome": "different", "message": what}
            except ExsimError as e:
                named = damaged in str(e) or damaged in os.path.basename(str(getattr(e, "path", "")))
                if not named:
                    outcome = {"outcome": "unnamed error", "message": f"{what}: {e}"}
            except Exception as e:   # why broad: any other exception is what this campaign looks for
                outcome = {"outcome": "crash", "message": f"{what}: {type(e).__name__}: {e}"}
            if outcome is not None:
                break
        if outcome is None:
            outcome = {"outcome": "checked"}
        print(json.dumps({"case": name, **outcome}), flush=True)


@pytest.mark.parametrize("kind", ["catalog_value", "catalog_page", "checkpoint", "segment", "wal",
                                  "forged"])
def test_damage_is_a_named_error_or_changes_nothing(pristine, pristine_blocks, tmp_path, kind):
    if kind == "forged":
        pristine = pristine_blocks
    cases = _damage_copies(pristine, tmp_path, kind)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"pristine": pristine, "cases": cases}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE,
                                                       os.environ.get("PYTHONPATH", "")]))
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import test_store_corruption_campaign as m; "
            f"m._child({str(manifest)!r})")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    started = [x["start"] for x in lines if "start" in x]
    assert proc.returncode == 0, (f"child died (status {proc.returncode}) in case "
                                  f"{started[-1] if started else '?'}: {proc.stderr[-2000:]}")
    results = [x for x in lines if "case" in x]
    assert len(results) == len(cases), proc.stderr[-2000:]
    bad = [x for x in results if x["outcome"] != "checked"]
    assert not bad, "\n".join(f"{x['case']}: {x['outcome']} {x.get('message', '')}" for x in bad)
