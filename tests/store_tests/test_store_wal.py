"""WAL: round trips, rotation, durability options, torn tails and corruption."""

import os

import crc32c
import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError, UsageError
from exsim.exchange.errors import WriteError
from exsim.store.wal import FILE_HEADER, VERSION, GroupWriter, WalWriter, scan_wal, wal_files
from exsim.exchange.schema import EVENT_DTYPE, ORDER_DTYPE
from store_fixtures import as_read, make_batch, old_wal_file


def _write(wal_dir, batches=5, n=200, **kw):
    w = WalWriter(str(wal_dir), **kw)
    written, seq = [], 1
    for i in range(batches):
        b = make_batch(seq, n, seed=i)
        w.append(seq, *b)
        written.append((seq, b))
        seq += n
    w.close()
    return written


def _same(rec, batch):
    """Whether a record holds ``batch`` as a reader returns it (the fields an older file's
    version lacks read as 0)."""
    from exsim.store.wal import VERSION

    version = open(rec.path, "rb").read(6)[4] if rec.path else VERSION
    want = [as_read(t, a, version) for t, a in zip(("orders", "fills", "l2", "events"), batch)]
    return all(np.array_equal(a, b) for a, b in zip((rec.orders, rec.fills, rec.l2, rec.events), want))


@pytest.mark.parametrize("compress", [True, False])
def test_records_read_back_bit_for_bit(tmp_path, compress):
    written = _write(tmp_path, compress=compress)
    recs, rep = scan_wal(str(tmp_path))
    assert [r.first_seq for r in recs] == [s for s, _ in written]
    assert all(_same(r, b) for r, (_, b) in zip(recs, written))
    assert rep.torn_tail is None and rep.last_seq == 1000


def test_files_rotate_at_the_size_limit_and_seqs_stay_contiguous(tmp_path):
    _write(tmp_path, batches=6, rotate_bytes=1)
    assert len(wal_files(str(tmp_path))) == 6
    recs, _ = scan_wal(str(tmp_path))
    assert [r.first_seq for r in recs] == [1, 201, 401, 601, 801, 1001]


@pytest.mark.parametrize("durability", ["fsync", "interval", "none"])
def test_every_durability_policy_writes_readable_records(tmp_path, durability):
    _write(tmp_path, batches=2, durability=durability)
    assert scan_wal(str(tmp_path))[1].records == 2


def test_unknown_durability_policy_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        WalWriter(str(tmp_path), durability="sometimes")


def test_truncated_trailing_record_is_cut_and_reported(tmp_path):
    _write(tmp_path, batches=3)
    (_, path), = wal_files(str(tmp_path))
    os.truncate(path, os.path.getsize(path) - 10)
    recs, rep = scan_wal(str(tmp_path), repair=True)
    assert len(recs) == 2 and rep.torn_tail[0] == path
    assert scan_wal(str(tmp_path))[1].torn_tail is None   # repaired: the cut is durable


def test_flipped_byte_before_the_tail_raises_naming_file_and_offset(tmp_path):
    _write(tmp_path, batches=3)
    (_, path), = wal_files(str(tmp_path))
    with open(path, "r+b") as f:
        f.seek(FILE_HEADER.size + 100)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    with pytest.raises(CorruptionError, match="wal-00000001.log") as e:
        scan_wal(str(tmp_path))
    assert e.value.path == path and e.value.offset == FILE_HEADER.size


def test_flipped_length_byte_is_corruption_not_a_torn_tail(tmp_path):
    _write(tmp_path, batches=3)
    (_, path), = wal_files(str(tmp_path))
    with open(path, "r+b") as f:
        f.seek(FILE_HEADER.size + 3)
        f.write(b"\x7f")
    with pytest.raises(CorruptionError, match="header checksum"):
        scan_wal(str(tmp_path))


def test_zeroed_block_in_an_earlier_file_is_corruption(tmp_path):
    _write(tmp_path, batches=4, rotate_bytes=1)
    path = wal_files(str(tmp_path))[1][1]
    with open(path, "r+b") as f:
        f.seek(200)
        f.write(bytes(512))
    with pytest.raises(CorruptionError, match=os.path.basename(path)):
        scan_wal(str(tmp_path))


def test_truncated_earlier_file_is_corruption_not_a_tail(tmp_path):
    _write(tmp_path, batches=4, rotate_bytes=1)
    path = wal_files(str(tmp_path))[1][1]
    os.truncate(path, os.path.getsize(path) - 5)
    with pytest.raises(CorruptionError, match="past the end"):
        scan_wal(str(tmp_path))


def test_salvage_mode_stops_at_corruption_and_reports_what_it_dropped(tmp_path):
    _write(tmp_path, batches=4, rotate_bytes=1)
    path = wal_files(str(tmp_path))[2][1]
    with open(path, "r+b") as f:
        f.seek(FILE_HEADER.size + 50)
        f.write(b"\xff\xff")
    recs, rep = scan_wal(str(tmp_path), salvage=True)
    assert [r.first_seq for r in recs] == [1, 201]
    assert rep.salvaged[0] == path and rep.salvaged[3] > 0
    assert len(wal_files(str(tmp_path))) == 3


def test_a_missing_middle_file_is_a_seq_gap(tmp_path):
    _write(tmp_path, batches=3, rotate_bytes=1)
    os.unlink(wal_files(str(tmp_path))[1][1])
    with pytest.raises(CorruptionError, match="seq gap"):
        scan_wal(str(tmp_path))


def test_append_must_continue_the_seq(tmp_path):
    w = WalWriter(str(tmp_path))
    with pytest.raises(UsageError):
        w.append(5, *make_batch(5, 10))


def test_version_1_files_still_read(tmp_path):
    batch = make_batch(1, 300)
    old_wal_file(str(tmp_path / "wal-00000001.log"), 1, 1, [(1, batch)], rtype=2)
    (rec,), rep = scan_wal(str(tmp_path))
    assert _same(rec, batch) and rep.last_seq == 300


def _with_added_fields(orders, seed):
    """``orders`` with every field added after the legacy row set to seeded nonzero values."""
    from exsim.store.tables import ADDED_COLUMNS

    rng = np.random.default_rng(seed)
    out = orders.copy()
    for name in ADDED_COLUMNS["orders"]:
        out[name] = rng.integers(1, 1 << 50, orders.size)
    return out


@pytest.mark.parametrize("version,rtype", [(1, 1), (1, 2), (2, 3), (3, 1), (3, 3), (4, 1), (4, 3),
                                           (5, 1), (5, 3)])
def test_old_version_files_read_their_narrower_rows_with_zeros_in_the_fields_added_since(tmp_path, version, rtype):
    from exsim.store.wal import VERSION

    batches = [(1, make_batch(1, 200, seed=1)), (201, make_batch(201, 150, seed=2))]
    journaled = [(f, (_with_added_fields(b[0], f), *b[1:])) for f, b in batches]
    old_wal_file(str(tmp_path / "wal-00000001.log"), version, 1, journaled, rtype=rtype)
    recs, rep = scan_wal(str(tmp_path))
    assert rep.last_seq == 350 and [r.first_seq for r in recs] == [1, 201]
    for rec, (_, b) in zip(recs, journaled):
        assert rec.orders.dtype == ORDER_DTYPE and rec.orders.flags.writeable
        assert rec.orders.tobytes() == as_read("orders", b[0], version).tobytes()
        assert rec.events.dtype == EVENT_DTYPE and rec.events.flags.writeable
        assert rec.events.tobytes() == as_read("events", b[3], version).tobytes()
        assert b[3]["price"].any() and not rec.events["price"].any()   # the fixture sets them
        assert rec.orders["expire_ts"].any() == (version >= 5) and not rec.orders["phase"].any()
        assert _same(rec, b)
    # the header-only scan of indexed versions reads nothing it does not need and agrees
    assert scan_wal(str(tmp_path), after_seq=350)[1].last_seq == 350 and version <= VERSION


@pytest.mark.parametrize("compress", [True, False])
def test_the_added_order_and_event_fields_round_trip_bit_for_bit_in_the_current_version(tmp_path, compress):
    from exsim.store.wal import VERSION, PartEncoder

    w = WalWriter(str(tmp_path), compress=compress)
    b = make_batch(1, 300, seed=3)
    b = (_with_added_fields(b[0], 3), *b[1:])
    w.append(1, *b)
    parts = [make_batch(301 + 100 * k, 100, seed=k) for k in range(3)]
    parts = [(_with_added_fields(p[0], 10 + k), *p[1:]) for k, p in enumerate(parts)]
    enc = PartEncoder()
    w.append_parts(301, 300, [enc.encode(301 + 100 * k, *p) for k, p in enumerate(parts)])
    w.close()
    (_, path), = wal_files(str(tmp_path))
    assert open(path, "rb").read(6)[4] == VERSION
    recs, _ = scan_wal(str(tmp_path))
    assert recs[0].orders.tobytes() == b[0].tobytes() and _same(recs[0], b)
    assert recs[1].orders.tobytes() == np.concatenate([p[0] for p in parts]).tobytes()
    assert recs[0].events.tobytes() == b[3].tobytes() and b[3]["phase"].any() and b[3]["price"].any()
    assert recs[0].orders["phase"].any() and recs[1].orders["phase"].any()


def test_a_newer_file_version_is_rejected_naming_the_file(tmp_path):
    _write(tmp_path, batches=1)
    (_, path), = wal_files(str(tmp_path))
    data = bytearray(open(path, "rb").read())
    data[4] = 9
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptionError, match="wal-00000001.log.*version 9"):
        scan_wal(str(tmp_path))


def test_fsync_policy_syncs_a_new_file_and_its_directory_before_the_first_record_returns(tmp_path, monkeypatch):
    import exsim.store.wal.writer as wal_mod

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(wal_mod.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    w = WalWriter(str(tmp_path), durability="fsync")
    w.append(1, *make_batch(1, 50, seed=1))
    assert synced == [w._path, str(tmp_path)]     # the record (and header), then the directory
    w.append(51, *make_batch(51, 50, seed=2))
    assert synced[2:] == [w._path]
    w.rotate()                                    # nothing unsynced: no fsync needed
    assert len(synced) == 3
    w.close()


@pytest.mark.parametrize("width", [1, 7, 8, 9, 16, 41, 45, 46, 55, 69, 78])
def test_byte_shuffle_matches_a_transpose_and_inverts(width):
    from exsim.store.shuffle import shuffle as _shuffle, unshuffle as _unshuffle

    rng = np.random.default_rng(width)
    for n in (0, 1, 7, 8, 9, 63, 64, 65, 200, 1031):   # around the 8-row and 64-row blocks
        rows = rng.integers(0, 256, (n, width), dtype=np.uint8)
        out = np.full(5 + n * width + 3, 0xAA, np.uint8)
        assert _shuffle(rows.reshape(-1), width, out, 5) == 5 + n * width
        assert np.array_equal(out[5:5 + n * width], rows.T.reshape(-1))
        assert (out[:5] == 0xAA).all() and (out[5 + n * width:] == 0xAA).all()   # nothing outside
        back = np.zeros(n * width, np.uint8)
        _unshuffle(out, 5, width, n, back)
        assert np.array_equal(back, rows.reshape(-1))


def _traced_group(tmp_path, monkeypatch, fsync):
    """A GroupWriter whose writes, fsyncs and acknowledgements land in one ordered trace."""
    import exsim.store.wal.writer as wal_mod

    trace = []
    monkeypatch.setattr(wal_mod.os, "fsync", lambda fd: (fsync(fd), trace.append(("fsync",))))
    w = WalWriter(str(tmp_path), durability="fsync")
    real_append = w.append
    w.append = lambda seq, *a, **k: (real_append(seq, *a, **k), trace.append(("write", seq)))[0]
    return GroupWriter(w), w, trace


def test_group_commit_acknowledges_each_record_only_after_an_fsync_that_covers_it(tmp_path, monkeypatch):
    import time

    real = os.fsync
    g, w, trace = _traced_group(tmp_path, monkeypatch, lambda fd: (time.sleep(0.02), real(fd)))
    futs, seq = [], 1
    for i in range(8):
        b = make_batch(seq, 100, seed=i)
        f = g.append(seq, *b)
        f.add_done_callback(lambda f, s=seq: trace.append(("ack", s)))   # runs on the writer
        futs.append(f)
        seq += 100
    assert [f.result() > 0 for f in futs] == [True] * 8
    g.close()
    for i, ev in enumerate(trace):
        if ev[0] == "ack":
            wrote = trace.index(("write", ev[1]))
            assert ("fsync",) in trace[wrote + 1:i], f"record {ev[1]} acknowledged before an fsync"
    assert trace.count(("fsync",)) < 8 and g.groups < g.records == 8   # grouped
    w.close()
    assert scan_wal(str(tmp_path))[1].last_seq == 800


def test_a_failed_group_fsync_fails_every_record_of_the_group_and_later_appends(tmp_path, monkeypatch):
    import time

    def fail(fd):
        time.sleep(0.02)
        raise OSError(5, "I/O error")

    g, w, _ = _traced_group(tmp_path, monkeypatch, fail)
    futs = [g.append(1 + 100 * i, *make_batch(1 + 100 * i, 100, seed=i)) for i in range(4)]
    g.close()
    assert all(isinstance(f.exception(), WriteError) for f in futs)
    with pytest.raises(WriteError, match="unusable"):
        w.append(401, *make_batch(401, 10))


def test_a_failed_fsync_at_rotation_makes_the_writer_refuse_later_appends(tmp_path, monkeypatch):
    # a record whose fsync failed may be lost: a later record made durable in the next file
    # would leave a seq gap on disk instead of a clean end
    import exsim.store.wal.writer as wal_mod

    w = WalWriter(str(tmp_path), durability="fsync")
    w.append(1, *make_batch(1, 50), defer_sync=True)

    def fail(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(wal_mod.os, "fsync", fail)
    with pytest.raises(WriteError, match="fsync"):
        w.rotate()
    monkeypatch.undo()
    with pytest.raises(WriteError, match="unusable"):
        w.append(51, *make_batch(51, 10))
    assert [no for no, _ in wal_files(str(tmp_path))] == [1]


def _parts_record(tmp_path, firsts, n=150):
    """A WAL with one multi-part record whose parts start at ``firsts`` (n orders each)."""
    from exsim.store.wal import PartEncoder

    enc, batches = PartEncoder(), [make_batch(f, n, seed=f) for f in firsts]
    w = WalWriter(str(tmp_path))
    w.append_parts(firsts[0], n * len(firsts), [enc.encode(f, *b) for f, b in zip(firsts, batches)])
    w.close()
    return batches


def test_a_multi_part_record_reads_back_as_one_batch(tmp_path):
    batches = _parts_record(tmp_path, [1, 151, 301])
    (rec,), rep = scan_wal(str(tmp_path))
    want = [np.concatenate(parts) for parts in zip(*batches)]
    assert rec.first_seq == 1 and _same(rec, want) and rep.last_seq == 450


def test_multi_part_record_with_a_seq_gap_between_parts_is_corruption(tmp_path):
    _parts_record(tmp_path, [1, 152])
    with pytest.raises(CorruptionError, match="part 1 starts at seq 152, expected 151"):
        scan_wal(str(tmp_path))


def _reframe_as(path, version):
    """Rewrite the frames of the current-version WAL file ``path`` as file ``version`` (1-3)
    frames them: the same payloads under the older frame header, which carries no seq range
    (their order rows are not made legacy: for records a scan must refuse before decoding)."""
    from exsim.store.wal import FRAME, FRAME4, HCRC

    data = open(path, "rb").read()
    out, pos = [bytearray(data[:FILE_HEADER.size])], FILE_HEADER.size
    out[0][4:6] = version.to_bytes(2, "little")
    while pos < len(data):
        length, crc, rtype, *_ = FRAME4.unpack_from(data, pos)
        head = FRAME.pack(length, crc, rtype)
        body = pos + FRAME4.size + HCRC.size
        out.append(head + HCRC.pack(crc32c.crc32c(head)) + data[body:body + length])
        pos = body + length
    open(path, "wb").write(b"".join(out))


def test_multi_part_record_in_a_version_2_file_is_corruption(tmp_path):
    _parts_record(tmp_path, [1, 151])
    (_, path), = wal_files(str(tmp_path))
    _reframe_as(path, 2)                      # the file header's version, and its frames
    with pytest.raises(CorruptionError, match="bad record checksum"):
        scan_wal(str(tmp_path))


def test_a_data_directory_whose_wal_is_version_3_opens_recovers_and_goes_on(tmp_path):
    from exsim.store import Session, read
    from store_fixtures import FakeEngine, make_orders

    eng = FakeEngine()
    eng.add_symbol("A")
    s = Session.create(str(tmp_path), eng, run_info={"scenario": "v3", "seed": 1}, wal_rotate_bytes=1)
    fed = [make_orders(300, seed=k) for k in range(3)]
    for o in fed:
        s.process(o)
    s.wal.close()                            # a kill: nothing sealed, the batches only in the WAL
    wal = str(tmp_path / "wal")
    for no, path in wal_files(wal):          # as format version 3 wrote them: legacy order rows
        recs, _ = scan_wal(wal)
        rec = next(r for r in recs if r.path == path)
        old_wal_file(path, 3, no, [(rec.first_seq, (rec.orders, rec.fills, rec.l2, rec.events))])
    s = Session.open(str(tmp_path))
    assert s.engine.seq == 900 and s.recovery.last_seq == 900
    fed.append(make_orders(300, seed=9))
    s.process(fed[-1])                       # appended as the current version, after the version-3 files
    versions = {open(p, "rb").read(6)[4] for _, p in wal_files(wal)}
    assert versions == {3, VERSION}
    s.close()
    got = read(str(tmp_path), "orders")
    assert np.array_equal(got["seq"], np.arange(1, 1201))
    assert np.array_equal(got["price"], np.concatenate([o["price"] for o in fed]))
