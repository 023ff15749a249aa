"""WAL against hostile bytes and directories: lengths, counts and claimed sizes checked before
anything is allocated, symlinks refused, files without a record never left behind."""

import os
import struct
import subprocess
import sys

import crc32c
import lz4.block
import numpy as np
import pytest

from exsim.exchange.errors import CorruptionError
from exsim.store import Session, read
from exsim.store.wal import BATCH, FILE_HEADER, FRAME, FRAME4, HCRC, MAGIC, VERSION, WalWriter, scan_wal, wal_files
from store_fixtures import FakeEngine, forge_wal_header, legacy_orders, make_batch, make_orders

HERE = os.path.dirname(os.path.abspath(__file__))


def _frame(rtype, payload):
    """A record frame as file versions 1-3 write it (no seq range in the header)."""
    head = FRAME.pack(len(payload), crc32c.crc32c(payload, crc32c.crc32c(bytes([rtype]))), rtype)
    return head + HCRC.pack(crc32c.crc32c(head)) + payload


def _frame4(rtype, payload, head=None):
    """A version-4 record frame; its seq range and counts are ``head`` (first seq, 4 counts),
    else what the payload's batch header says (or seq 1 and no rows when it has none)."""
    first, *counts = head or (BATCH.unpack_from(payload) if len(payload) >= BATCH.size else (1, 0, 0, 0, 0))
    last = max(-2**63, min(2**63 - 1, first + counts[0] - 1))
    head = FRAME4.pack(len(payload), crc32c.crc32c(payload, crc32c.crc32c(bytes([rtype]))), rtype,
                       first, last, *counts)
    return head + HCRC.pack(crc32c.crc32c(head)) + payload


def _wal_file(wal_dir, no, body=b"", version=3):
    """A WAL file of ``version`` (3 by default: the frames ``_frame`` builds; ``_frame4`` builds
    those of versions 4 and later) holding ``body``."""
    path = os.path.join(str(wal_dir), f"wal-{no:08d}.log")
    with open(path, "wb") as f:
        f.write(FILE_HEADER.pack(MAGIC, version, 0, no) + body)
    return path


def _session(path, **kw):
    eng = FakeEngine()
    eng.add_symbol("A")
    return Session.create(str(path), eng, run_info={"scenario": "hostile", "seed": 1}, **kw)


# -- sizes and counts ------------------------------------------------------------------------

@pytest.mark.parametrize("claim", [1 << 30, (1 << 31) + 5, (1 << 32) - 1])
def test_an_lz4_record_claiming_gigabytes_is_corruption_before_anything_is_allocated(tmp_path, claim, monkeypatch):
    calls = []
    monkeypatch.setattr(lz4.block, "decompress", lambda *a, **kw: calls.append(kw))
    path = _wal_file(tmp_path, 1, _frame(3, struct.pack("<I", claim) + lz4.block.compress(b"x" * 64, store_size=False)))
    with pytest.raises(CorruptionError, match="wal-00000001.log.*offset 16") as e:
        scan_wal(str(tmp_path))
    assert e.value.path == path and e.value.offset == FILE_HEADER.size and not calls


def test_an_uncompressed_record_shorter_than_its_batch_header_is_corruption(tmp_path):
    _wal_file(tmp_path, 1, _frame(1, b"\x01\x02\x03\x04\x05"))
    with pytest.raises(CorruptionError, match="offset 16"):
        scan_wal(str(tmp_path))


@pytest.mark.parametrize("version", [3, VERSION])
@pytest.mark.parametrize("counts", [(2**32 - 1, 0, 0, 0), (1, 2**32 - 1, 0, 0), (0, 0, 0, 2**31)])
def test_batch_counts_beyond_the_payload_are_corruption(tmp_path, counts, version):
    raw = BATCH.pack(1, *counts) + bytes(64)
    frame = _frame if version == 3 else (lambda t, p: _frame4(t, p, (1, *counts)))
    path = _wal_file(tmp_path, 1, frame(1, raw) + frame(3, struct.pack("<I", len(raw)) +
                                                        lz4.block.compress(raw, store_size=False)),
                     version)
    with pytest.raises(CorruptionError, match="wal-00000001.log.*offset 16") as e:
        scan_wal(str(tmp_path), after_seq=-1)   # -1: also decode a record of no orders
    assert e.value.path == path


@pytest.mark.parametrize("version", [4, VERSION])
@pytest.mark.parametrize("rtype", [1, 3])
def test_order_rows_of_the_other_version_s_width_are_corruption_naming_the_file(tmp_path, version, rtype):
    from exsim.store.wal.payload import wire_bytes

    o = make_orders(20)
    # a version-4 file holding 77-byte rows, a version-5 file holding 45-byte ones
    rows = legacy_orders(o).tobytes() if version == VERSION else wire_bytes("orders", o).tobytes()
    raw = BATCH.pack(1, 20, 0, 0, 0) + rows
    payload = raw if rtype == 1 else struct.pack("<I", len(raw)) + lz4.block.compress(raw, store_size=False)
    path = _wal_file(tmp_path, 1, _frame4(rtype, payload, (1, 20, 0, 0, 0)), version)
    with pytest.raises(CorruptionError, match="wal-00000001.log: record at offset 16 has a bad payload") as e:
        scan_wal(str(tmp_path))
    assert e.value.path == path and e.value.offset == FILE_HEADER.size


@pytest.mark.parametrize("first_seq", [0, -5, 2**63 - 10])
def test_a_record_with_seqs_a_reader_cannot_number_is_corruption(tmp_path, first_seq):
    o = legacy_orders(make_orders(20)).tobytes()   # version 3: 45-byte order rows
    _wal_file(tmp_path, 1, _frame(1, BATCH.pack(first_seq, 20, 0, 0, 0) + o))
    with pytest.raises(CorruptionError, match="implausible seqs.*offset 16"):
        scan_wal(str(tmp_path))
    _wal_file(tmp_path, 1, _frame(1, BATCH.pack(1, 20, 0, 0, 0) + o))   # the same record from seq 1
    assert scan_wal(str(tmp_path))[1].last_seq == 20


def test_a_multi_part_record_claiming_more_parts_than_fit_is_corruption(tmp_path):
    _wal_file(tmp_path, 1, _frame(4, struct.pack("<I", 2**32 - 1) + bytes(20)))
    with pytest.raises(CorruptionError, match="offset 16"):
        scan_wal(str(tmp_path))


# -- the version-4 frame header: seq range and row counts -----------------------------------

def _batch_record(first_seq, n=20):
    from exsim.store.wal.payload import wire_bytes

    return BATCH.pack(first_seq, n, 0, 0, 0) + wire_bytes("orders", make_orders(n)).tobytes()


@pytest.mark.parametrize("head", [(1, 21, 0, 0, 0), (1, 20, 1, 0, 0), (2, 20, 0, 0, 0), (1, 20, 0, 0, 7)])
def test_a_version_4_header_disagreeing_with_its_payload_is_corruption(tmp_path, head):
    _wal_file(tmp_path, 1, _frame4(1, _batch_record(1), head), VERSION)
    with pytest.raises(CorruptionError, match="disagrees with its record header.*offset 16"):
        scan_wal(str(tmp_path))


def test_a_version_4_header_whose_seq_range_disagrees_with_its_orders_is_corruption(tmp_path):
    payload = _batch_record(1)
    frame = bytearray(_frame4(1, payload))
    last = FRAME.size + 8
    frame[last:last + 8] = struct.pack("<q", 25)          # last seq 25 for 20 orders from seq 1
    frame[FRAME4.size:FRAME4.size + 4] = HCRC.pack(crc32c.crc32c(bytes(frame[:FRAME4.size])))
    _wal_file(tmp_path, 1, bytes(frame), VERSION)
    with pytest.raises(CorruptionError, match="seqs 1..25 disagree with its 20 orders.*offset 16"):
        scan_wal(str(tmp_path), after_seq=100)


def test_a_flipped_bit_in_a_version_4_header_is_corruption_not_a_crash_tail(tmp_path):
    frame = bytearray(_frame4(1, _batch_record(1)) + _frame4(1, _batch_record(21)))
    frame[10] ^= 0x40                                      # inside the first record's first seq
    _wal_file(tmp_path, 1, bytes(frame), VERSION)
    with pytest.raises(CorruptionError, match="bad record header checksum at offset 16"):
        scan_wal(str(tmp_path), after_seq=100)


def test_a_version_4_scan_checks_records_at_or_below_after_seq_without_decoding_them(tmp_path, monkeypatch):
    import exsim.store.wal.reader as reader

    w = WalWriter(str(tmp_path), durability="none")
    batches = [make_batch(1 + 30 * k, 30, seed=k) for k in range(8)]
    for k, b in enumerate(batches):
        w.append(1 + 30 * k, *b)
    w.close()
    decoded = []
    real = reader.decode_batch
    monkeypatch.setattr(reader, "decode_batch", lambda t, p, *v: (decoded.append(t), real(t, p, *v))[1])
    recs, rep = scan_wal(str(tmp_path), after_seq=5 * 30)
    assert [r.first_seq for r in recs] == [151, 181, 211] and len(decoded) == 3
    assert rep.records == 8 and rep.last_seq == 240
    assert all(_same_batch(r, b) for r, b in zip(recs, batches[5:]))
    decoded.clear()
    assert len(scan_wal(str(tmp_path))[0]) == 8 and len(decoded) == 8


def test_a_version_4_record_skipped_by_after_seq_still_fails_its_payload_checksum(tmp_path):
    w = WalWriter(str(tmp_path), durability="none")
    for k in range(3):
        w.append(1 + 30 * k, *make_batch(1 + 30 * k, 30, seed=k))
    w.close()
    (_, path), = wal_files(str(tmp_path))
    data = bytearray(open(path, "rb").read())
    data[FILE_HEADER.size + 60] ^= 1                        # inside the first record's payload
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptionError, match="bad record checksum at offset 16"):
        scan_wal(str(tmp_path), after_seq=60)


def _same_batch(rec, batch):
    return all(np.array_equal(getattr(rec, t), a) for t, a in zip(("orders", "fills", "l2", "events"), batch))


def _hostile_examples():
    """Run in a child process by the test below: a crash there is a signal death, not a hang."""
    import tempfile

    from hypothesis import HealthCheck, given, settings, strategies as st

    u32 = st.one_of(st.integers(0, 64), st.sampled_from([2**31 - 1, 2**31, 2**32 - 1]), st.integers(0, 2**32 - 1))
    counts = st.tuples(u32, u32, u32, u32)
    valid = make_batch(1, 30, seed=3)

    def lz4_of(raw):
        return lz4.block.compress(raw, store_size=False)

    @st.composite
    def payload(draw):
        kind = draw(st.sampled_from(["raw", "lz4", "parts", "mutant", "bytes"]))
        head = BATCH.pack(draw(st.integers(-2**63, 2**63 - 1)), *draw(counts)) \
            if draw(st.booleans()) else draw(st.binary(max_size=30))
        raw = head + draw(st.binary(max_size=200))
        if kind == "raw":
            return draw(st.sampled_from([1, 2, 3, 4, 5, 0, 255])), raw
        if kind == "lz4":
            claim = draw(st.one_of(st.just(len(raw)), u32))
            return draw(st.sampled_from([2, 3])), struct.pack("<I", claim) + lz4_of(raw)
        if kind == "parts":
            n = draw(st.integers(0, 3))
            parts = [(draw(st.one_of(st.just(len(raw)), u32)), lz4_of(raw)) for _ in range(n)]
            body = b"".join(struct.pack("<II", c, len(b) if draw(st.booleans()) else draw(u32)) + b
                            for c, b in parts)
            return 4, struct.pack("<I", draw(st.one_of(st.just(n), u32))) + body
        if kind == "mutant":   # a real record with flipped bytes, its checksum made to match
            from exsim.store.wal.payload import encode_batch as _encode_batch

            rtype, pieces = _encode_batch(1, *valid, compress=draw(st.booleans()))
            data = bytearray(b"".join(bytes(memoryview(p).cast("B")) for p in pieces))
            for _ in range(draw(st.integers(1, 4))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] ^= draw(st.integers(1, 255))
            return rtype, bytes(data)
        return draw(st.integers(0, 255)), draw(st.binary(max_size=300))

    heads = st.one_of(st.none(), st.tuples(st.integers(-2**63, 2**63 - 1), u32, u32, u32, u32))

    @settings(max_examples=400, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(payload(), heads), min_size=1, max_size=3), st.booleans(),
           st.sampled_from([3, 4, 5]), st.integers(0, 100))
    def scan_hostile(frames, repair, version, after_seq):
        with tempfile.TemporaryDirectory() as d:
            if version == 3:
                body = b"".join(_frame(t, p) for (t, p), _ in frames)
            else:
                body = b"".join(_frame4(t, p, h) for (t, p), h in frames)
            _wal_file(d, 1, body, version)
            try:
                recs, _ = scan_wal(d, repair=repair, after_seq=after_seq)
            except CorruptionError as e:
                assert e.path.endswith("wal-00000001.log") and e.offset >= FILE_HEADER.size, e
                return
            for r in recs:   # what a scan returns is usable: seqs a reader can number rows by
                assert isinstance(r.orders, np.ndarray) and 1 <= r.first_seq <= r.last_seq + 1 < 2**62

    scan_hostile()


def test_hostile_frames_with_matching_checksums_only_ever_raise_corruption_errors(tmp_path):
    # why the repo root first: the venv may also see another checkout of exsim
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(HERE)),
                                                        os.path.dirname(HERE), HERE])}
    code = "import test_store_wal_hostile as t; t._hostile_examples(); print('OK')"
    p = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env, timeout=300,
                       capture_output=True, text=True)
    assert p.returncode == 0 and "OK" in p.stdout, \
        f"exit {p.returncode} (negative: killed by signal)\n{p.stderr[-3000:]}"


# -- files without a record --------------------------------------------------------------------

@pytest.mark.parametrize("tail", [b"", b"\x05\x00"], ids=["header only", "torn first record"])
def test_a_file_a_kill_left_without_a_record_is_not_left_behind_for_good(tmp_path, tail):
    s = _session(tmp_path, wal_rotate_bytes=1)
    s.process(make_orders(100, seed=1))
    s.wal.close()                      # a kill: no seal, no final checkpoint
    wal = tmp_path / "wal"
    stray = _wal_file(wal, wal_files(str(wal))[-1][0] + 1, tail, VERSION)   # killed right after its header
    s = Session.open(str(tmp_path), wal_rotate_bytes=1)
    s.process(make_orders(100, seed=2))
    s.close()                          # seals, checkpoints and trims every file it covers
    assert not os.path.exists(stray) or os.path.getsize(stray) > FILE_HEADER.size
    assert wal_files(str(wal)) == []
    assert read(str(tmp_path), "orders").size == 200


def test_an_older_file_without_a_record_is_removed_by_repair(tmp_path):
    w = WalWriter(str(tmp_path), rotate_bytes=1)
    for seq in (1, 201):
        w.append(seq, *make_batch(seq, 200, seed=seq))
    w.close()
    os.rename(tmp_path / "wal-00000002.log", tmp_path / "wal-00000003.log")
    with open(tmp_path / "wal-00000003.log", "r+b") as f:
        f.write(FILE_HEADER.pack(MAGIC, VERSION, 0, 3))
    path = _wal_file(tmp_path, 2)      # an earlier process was killed after this header
    recs, rep = scan_wal(str(tmp_path), repair=True)
    assert [r.first_seq for r in recs] == [1, 201] and rep.removed == [path]
    assert [n for n, _ in wal_files(str(tmp_path))] == [1, 3]


def test_a_new_writer_replaces_a_newest_file_without_a_record(tmp_path):
    w = WalWriter(str(tmp_path))
    w.append(1, *make_batch(1, 50))
    w.close()
    _wal_file(tmp_path, 2)
    w = WalWriter(str(tmp_path), next_seq=51)
    w.append(51, *make_batch(51, 50, seed=1))
    w.close()
    assert [n for n, _ in wal_files(str(tmp_path))] == [1, 2]
    assert [r.first_seq for r in scan_wal(str(tmp_path))[0]] == [1, 51]


# -- symlinks ----------------------------------------------------------------------------------

def test_a_symlinked_wal_directory_is_refused_by_readers_and_writers(tmp_path):
    d = tmp_path / "d"
    s = _session(d)
    s.process(make_orders(100, seed=1))
    s.wal.close()
    os.rename(d / "wal", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", d / "wal")
    before = sorted(os.listdir(tmp_path / "elsewhere"))
    for attempt in (lambda: read(str(d), "orders"), lambda: scan_wal(str(d / "wal"), repair=True),
                    lambda: Session.open(str(d)), lambda: WalWriter(str(d / "wal"))):
        with pytest.raises(CorruptionError, match="symlink"):
            attempt()
    assert sorted(os.listdir(tmp_path / "elsewhere")) == before


def test_a_symlinked_wal_file_is_never_read_cut_or_deleted(tmp_path):
    wal = tmp_path / "wal"
    w = WalWriter(str(wal), rotate_bytes=1)
    for seq in (1, 101):
        w.append(seq, *make_batch(seq, 100, seed=seq))
    w.close()
    outside = tmp_path / "outside.log"
    os.rename(wal / "wal-00000002.log", outside)
    with open(outside, "ab") as f:
        f.write(b"torn tail bytes")   # what a repair would cut
    os.symlink(outside, wal / "wal-00000002.log")
    size = os.path.getsize(outside)
    for kw in ({}, {"repair": True}, {"salvage": True}):
        with pytest.raises(CorruptionError, match="wal-00000002.log.*symlink"):
            scan_wal(str(wal), **kw)
    assert os.path.getsize(outside) == size and os.path.islink(wal / "wal-00000002.log")


# -- forged headers under recomputed checksums -------------------------------------------------

@pytest.mark.parametrize("which", [0, 1, -1])
def test_a_wal_header_forged_to_claim_more_orders_is_corruption_without_a_payload_read(tmp_path, which):
    from exsim.store import journaled_through
    from exsim.store.wal.format import SEQ_LIMIT

    d = str(tmp_path / "run")
    pid = os.fork()
    if pid == 0:   # a run that died with its three batches only in the WAL
        try:
            s = _session(d, seal_every=10**9)
            for k in range(3):
                s.process(make_orders(100, seed=k))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    (_, path), = wal_files(os.path.join(d, "wal"))
    assert journaled_through(d) == 300
    forge_wal_header(path, which)
    for call in (lambda: journaled_through(d), lambda: scan_wal(os.path.join(d, "wal"), after_seq=SEQ_LIMIT),
                 lambda: read(d, "orders", seq=(1, 10))):
        with pytest.raises(CorruptionError, match="record header|seq gap") as e:
            call()
        assert e.value.path == path
