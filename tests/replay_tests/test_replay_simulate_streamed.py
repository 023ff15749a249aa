"""``simulate`` on a streamed DBN flow (``open_flow(..., stream=True)``): the data directory is
byte-identical to simulating the fully loaded flow, the engine is only ever handed arrays of at
most ``batch`` messages while the file is read in many small batches, and a malformed record met
midway leaves nothing at ``out``."""

from __future__ import annotations

import numpy as np
import pytest

dbn = pytest.importorskip("databento_dbn")

from exsim.exchange.errors import InputError  # noqa: E402
from exsim.replay.simulation import simulate  # noqa: E402
from exsim.scenarios import open_flow  # noqa: E402
from exsim.scenarios.generators.uniform import uniform_flow  # noqa: E402
from exsim.scenarios.loaders.dbn_write import write_dbn, write_mbo  # noqa: E402
from exsim.store import Catalog, read  # noqa: E402

TABLES = ("orders", "fills", "l2", "events")
SYMS = [("AAA", 10 ** 7, 100), ("BBB", 5 * 10 ** 6, 1), ("CCC", 25 * 10 ** 7, 10)]
BATCH_BYTES = 4096      # the loader's smallest chunk: many batches from a small file


FLOW = dict(n=5000, seed=23, n_symbols=3, span=20, p_passive=0.55, p_cancel=0.3, p_cross=0.15)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same run written as zstd-compressed and as plain MBO."""
    d = tmp_path_factory.mktemp("streamed")
    out = {}
    for ext in ("dbn.zst", "dbn"):
        out[ext] = d / f"run.mbo.{ext}"
        write_mbo(out[ext], uniform_flow(**FLOW), SYMS)
    return out


@pytest.fixture
def mbo(files):
    return files["dbn.zst"]


def _symbols(d):
    cat = Catalog(str(d), readonly=True)
    try:
        return [(s["id"], s["name"], s["tick_size"]) for s in cat.symbols()]
    finally:
        cat.close()


def _run(flow, out, batch):
    """Simulate ``flow`` into ``out``; return (summary, final state hash, engine seq per batch)."""
    seqs, final = [0], {}

    def seen(engine, seq):
        seqs.append(seq)
        final["hash"] = engine.state_hash()

    s = simulate(flow, str(out), batch=batch, durability="none", on_batch=seen)
    return s, final["hash"], np.diff(seqs)


@pytest.mark.parametrize("ext,batch", [("dbn.zst", 1), ("dbn.zst", 333), ("dbn", 333), ("dbn", 4000)])
def test_streamed_run_is_byte_identical_to_the_loaded_one(tmp_path, files, ext, batch):
    mbo = files[ext]
    whole = open_flow(mbo)
    streamed = open_flow(mbo, stream=True, batch_bytes=BATCH_BYTES)
    assert streamed.orders is None and streamed.streamed and not whole.streamed
    assert streamed.symbols == whole.symbols == [(n, t / 1e9) for n, t, _ in SYMS]
    assert streamed.run_info() == whole.run_info() and streamed.label == whole.label

    parts = []                     # the size of each array the loader yields
    batches = streamed.batches

    def counted(progress=None):
        for p in batches(progress):
            parts.append(p.size)
            yield p

    streamed.batches = counted

    a, hash_a, sizes_a = _run(whole, tmp_path / "a", batch)
    b, hash_b, sizes_b = _run(streamed, tmp_path / "b", batch)
    for t in TABLES:
        assert read(str(tmp_path / "a"), t).tobytes() == read(str(tmp_path / "b"), t).tobytes(), t
    assert hash_a == hash_b
    assert _symbols(tmp_path / "a") == _symbols(tmp_path / "b")
    assert (a.messages, a.fills, a.volume, a.rejects, a.top) == (b.messages, b.fills, b.volume, b.rejects, b.top)
    assert b.messages == whole.orders.size
    # memory bounded by a batch: the file came in many pieces, and the engine took the same cuts
    # of at most ``batch`` messages. A plain file's piece is at most the records of BATCH_BYTES
    # (56-byte MBO records, one message each at most here); the zstd decoder hands records on a
    # compressed block at a time (128 KiB of records), several chunks of BATCH_BYTES
    assert sum(parts) == whole.orders.size and len(parts) > 10
    if ext == "dbn":
        assert max(parts) <= BATCH_BYTES // 56 + 1
    else:
        assert max(parts) <= (128 << 10) // 56 < whole.orders.size
    assert sizes_b.tolist() == sizes_a.tolist() and sizes_b.max() <= batch


def test_streamed_progress_reaches_the_file_size_and_a_path_streams(tmp_path, mbo):
    streamed = open_flow(mbo, stream=True, batch_bytes=BATCH_BYTES)
    seen = []
    assert sum(p.size for p in streamed.iter_batches(lambda done, total: seen.append((done, total)))) > 0
    size = mbo.stat().st_size
    assert len(seen) > 10 and seen[-1] == (size, size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    # iter_batches reads the file afresh on each call; simulate opens a DBN path streamed
    again = np.concatenate(list(streamed.iter_batches()))
    assert again.tobytes() == open_flow(mbo).orders.tobytes()
    s = simulate(str(mbo), str(tmp_path / "p"), durability="none")
    assert s.messages == again.size and s.label == f"dbn:{mbo.name}"


def test_a_bad_record_midway_leaves_nothing(tmp_path, mbo):
    raw = mbo.read_bytes()
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD)
    dec.write(raw)
    meta, *recs = dec.decode()
    adds = [k for k, r in enumerate(recs) if type(r).__name__ == "MBOMsg" and r.action == "A"]
    recs[adds[-10]].price += 1     # off AAA/BBB/CCC's tick grid, near the end of the file
    bad = tmp_path / "bad.mbo.dbn.zst"
    write_dbn(bad, recs, schema=None, symbols={n: 1000 + k for k, (n, _, _) in enumerate(SYMS)},
              start=meta.start)
    flow = open_flow(bad, stream=True, batch_bytes=BATCH_BYTES)    # the first pass converts nothing
    batches = []
    with pytest.raises(InputError, match="not a whole number of ticks"):
        simulate(flow, str(tmp_path / "out"), batch=100, durability="none",
                 on_batch=lambda engine, seq: batches.append(seq))
    assert len(batches) > 10            # it failed midway, after journaling batches
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mbo.dbn.zst"]
