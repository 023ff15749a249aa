"""Session: one Engine bound to one data directory.

``process(batch)`` runs the engine, journals the batch (orders + outputs) to the WAL and returns
the Result only once the record is durable under the chosen policy. Every ``checkpoint_every``
messages the engine's checkpoint is written; every ``seal_every`` messages (and at ``close``) the
unsealed batches are sealed into segments. Reopening restores the newest checkpoint and re-runs
the WAL tail through the engine, checking that it reproduces the journaled outputs, then goes
on with the next seq.

Data directory: ``catalog.sqlite``, ``wal/``, ``segments/<table>/<symbol>/``, ``checkpoints/``.
This module holds the lifecycle and the hot path (process, pipelining, acknowledgement); the
steps it drives live beside it: store.creation (atomic create), store.recovery (open: layout,
checkpoint restore, WAL tail, orphans), store.sealing (segments, WAL trimming),
store.checkpoint_file (checkpoint files), store.engine_classes (which classes may be restored).

Invariants:
- Acknowledged == in the WAL (durably, per policy). Rows with seq <= sealed_through are in
  segments; the rest are in the WAL and in ``unsealed_records()``.
- A WAL file is deleted only once every seq it holds is both sealed and covered by a
  checkpoint, so recovery needs only the newest checkpoint plus the WAL.
- ``open`` replays the WAL tail after the checkpoint and requires the engine's outputs to equal
  the journaled ones in every field the record's file format holds; a record of an older format
  then keeps the engine's rows (equal in those fields, filled in the fields added since).
- After a failed write the session refuses further batches: the engine is ahead of the journal.
  Reopen the directory to continue from the last acknowledged batch. ``close()`` of such a
  session releases everything and raises StoreError: its last batches are in the WAL only.

Locking (store/lock.py): a Session holds the directory's writer lock from before its first
write (``open``: before the catalog is opened, the WAL repaired or an orphan swept) to
``close``, and checks it before every catalog write, file write and delete; a failed ``open``
or ``create`` closes its catalog and releases the lock before raising.

Hostile directories: ``open`` imports nothing a catalog names (store.engine_classes), and
every path read from disk goes through ``store.paths.inside``, so a symlinked ``wal/``,
``segments/`` or ``checkpoints/`` is refused before anything is read or written
(store.recovery); ``create`` is atomic (store.creation).
"""

from __future__ import annotations

import os

import numpy as np

from exsim.exchange.errors import CorruptionError, StoreError, UsageError, WriteError
from exsim.exchange.protocol import OutputBuffers
from exsim.exchange.schema import TABLE_DTYPES
from exsim.store.arena import Arena, TableRows
from exsim.store.catalog import CATALOG_NAME, Catalog
from exsim.store.checkpoint_file import (CKPT_HEAD, CKPT_MAGIC, CKPT_VERSION,  # noqa: F401 (re-exported)
                                   write_checkpoint_file)
from exsim.store.choice import Chooser
from exsim.store.creation import build_directory
from exsim.store.engine_classes import ENGINE_CLASSES, register_engine_class  # noqa: F401 (re-exported)
from exsim.store.lock import DirLock, LockedError  # noqa: F401 (LockedError re-exported)
from exsim.store.paths import inside
from exsim.store.recovery import check_layout, journaled_tail, remove_orphans, restore_checkpoint
from exsim.store.sealing import SealJob, register_seal, trim_wal, write_segments
from exsim.store.tables import STORED_DTYPES, TABLES, zero_fields
from exsim.store.wal import WalRecord, WalReport, WalWriter
from exsim.store.wal.format import VERSION as WAL_VERSION, lacks

__all__ = ["Session", "ENGINE_CLASSES", "register_engine_class", "LockedError"]

def _starts_at(rows, room: np.ndarray) -> bool:
    """True if ``rows`` is a prefix of ``room`` (the engine wrote its outputs there)."""
    return (isinstance(rows, np.ndarray) and rows.dtype == room.dtype and rows.ndim == 1
            and rows.size <= room.size
            and (rows.size == 0 or rows.ctypes.data == room.ctypes.data))


class Session:
    """A journaled engine. Build with ``Session.create`` or ``Session.open``, not directly."""

    def __init__(self, data_dir, engine, catalog, *, lock, durability, sync_interval,
                 checkpoint_every, seal_every, wal_rotate_bytes, wal_compress, seal_in_background,
                 journal_parts):
        self.data_dir = os.fspath(data_dir)
        self.engine = engine
        self.catalog = catalog
        self._lock: DirLock = lock
        self.checkpoint_every = int(checkpoint_every)
        self.seal_every = int(seal_every)
        self.seal_in_background = bool(seal_in_background)
        self._pending: list[WalRecord] = []
        self._pending_rows = 0
        self._arena = Arena()
        self._wal_exec = None   # the GroupWriter while process_many runs: it owns self.wal
        self.wal_groups = (0, 0)   # (records, fsync groups) of the last process_many
        self._wal_ops: list = []   # WAL rotations queued to it
        self._sealing: SealJob | None = None
        self._wal_ranges: dict[str, tuple[int, int]] = {}
        self._failed: str | None = None
        self._closed = False
        self.chooser = Chooser()   # used by one seal at a time (see _reap_seal)
        # why: reused output buffers avoid an allocation (and page faults) per batch; the
        # session copies each output once anyway, into its pending record
        self._out: OutputBuffers | None = None   # sized by the first batch (_outputs)
        self._inplace = OutputBuffers(0)   # its arrays: the arena room the engine writes into
        # why: durability "none" is pure simulation; fsyncing its segments and checkpoints
        # would pay for a power-loss guarantee its WAL does not give anyway
        self._sync = durability != "none"
        self._scratch = np.empty((max(len(d.names) for d in STORED_DTYPES.values()), 0), np.uint64)
        self.recovery: WalReport | None = None
        self.wal = WalWriter(os.path.join(self.data_dir, "wal"), durability=durability,
                             interval=sync_interval, rotate_bytes=wal_rotate_bytes,
                             compress=(durability != "none") if wal_compress is None else wal_compress,
                             next_seq=engine.seq + 1)
        self._parts = self._resolve_parts(journal_parts)
        self._encoder = None   # the thread that encodes record parts (process), made when needed
        self._part_encoder = None
        self._rows_per_msg = {"fills": 0.5, "l2": 2.0, "events": 3.0}   # room guessed per batch
        ck = catalog.latest_checkpoint()
        self._last_ckpt = ck["seq"] if ck else -1
        # why: a reopened directory starts from the encodings already found good for its data
        self.chooser.load(catalog.meta_json("encoding_choices", {}))

    _OPTS = dict(durability="fsync", sync_interval=0.05, checkpoint_every=1_000_000,
                 seal_every=1_000_000, wal_rotate_bytes=64 << 20, wal_compress=None,
                 seal_in_background=True, journal_parts=None)
    PART_MIN = 4096   # messages: a smaller part costs more in calls and hand-overs than it overlaps

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def create(cls, data_dir, engine, *, run_info: dict | None = None, **options) -> "Session":
        """Start a new data directory for ``engine`` (which may already hold symbols).

        options: durability ("fsync" | "interval" | "none"; "none" also skips the fsyncs of
        segments and checkpoints: pure simulation), sync_interval (s), checkpoint_every
        (messages), seal_every (messages), wal_rotate_bytes, wal_compress (None: byte-shuffled
        lz4 records when the WAL is fsynced, where fewer bytes to sync pay for the compression;
        raw records under durability "none", where they do not), seal_in_background (True:
        the seals ``process`` triggers write their segments on a thread while batches go on;
        they are registered by a later call; ``seal()`` and ``close()`` always wait),
        journal_parts (None: 8 for an ``exchange.Engine`` when records are compressed, else 1;
        k > 1: ``process`` matches a batch in up to k slices of >= PART_MIN messages and
        encodes each slice's record part on a thread while the engine matches the next, then
        writes the batch as one multi-part record. Only for engines whose outputs for a batch
        equal those for its slices in turn, as exchange.Engine's do: recovery replays a record
        as one batch and checks the outputs).
        run_info: scenario, seed and anything else worth recording in the ``runs`` table.

        Atomic: the catalog and the first checkpoint are written (under the new directory's
        lock) into a hidden sibling directory, which is then renamed to ``data_dir``; a crash
        or failure before that leaves ``data_dir`` as it was (absent or empty). ``data_dir``
        may exist if it is an empty directory. The engine's class is registered for
        ``Session.open`` in this process (``register_engine_class``).
        Returns the open Session, holding the directory's writer lock. Raises UsageError if the
        directory already holds a catalog or is not empty (or another create won the race),
        WriteError if the first checkpoint or the catalog cannot be written.
        """
        data_dir = os.fspath(data_dir)
        opts = cls._options(options)
        lock = build_directory(data_dir, engine, run_info, sync=opts["durability"] != "none")
        catalog = None
        try:
            catalog = Catalog(data_dir)
            s = cls(data_dir, engine, catalog, lock=lock, **opts)
        except BaseException:
            if catalog is not None:
                catalog.close()
            lock.release()
            raise
        if callable(getattr(type(engine), "restore", None)):
            register_engine_class(type(engine))   # why: the caller handed us this class
        return s

    @classmethod
    def open(cls, data_dir, *, engine_class=None, salvage: bool = False, **options) -> "Session":
        """Reopen a data directory: restore the newest checkpoint, replay the WAL tail.

        The directory's writer lock is taken first, before anything is opened for writing,
        repaired or deleted. ``engine_class``: the class whose ``restore`` rebuilds the engine;
        None looks up the name the catalog records in ``ENGINE_CLASSES`` (nothing named by the
        data is ever imported). A crash tail in the WAL is cut and reported in
        ``session.recovery.torn_tail``. With ``salvage`` a corrupt WAL record is cut too
        (``session.recovery.salvaged``) instead of raising. Unregistered segment and checkpoint
        files (a crash before registering them) are deleted.
        Returns the open Session with ``engine.seq`` = the last journaled seq.
        Raises LockedError (a StoreError) if another process has the directory open for writing
        (nothing was written then); StoreError if the directory is not a data directory or its
        engine class is not registered; CorruptionError if a file fails a check, ``wal/``,
        ``segments/`` or ``checkpoints/`` is a symlink, or the replayed engine does not
        reproduce the journaled outputs. A failed open closes its catalog and releases the lock.
        """
        data_dir = os.fspath(data_dir)
        opts = cls._options(options)
        if not os.path.isdir(data_dir) or not os.path.isfile(os.path.join(data_dir, CATALOG_NAME)):
            raise StoreError(f"{data_dir} is not an exsim data directory (no {CATALOG_NAME})")
        inside(data_dir, CATALOG_NAME, what="catalog")   # refuses a symlinked catalog
        lock = DirLock.acquire(data_dir, supersede=True, what="open")
        catalog = s = None
        try:
            check_layout(data_dir)
            catalog = Catalog(data_dir)
            s = cls._restore(data_dir, catalog, lock, engine_class, salvage, opts)
            return s
        except BaseException:
            if s is not None:
                s._release()
            else:
                if catalog is not None:
                    catalog.close()
                lock.release()
            raise

    @classmethod
    def _restore(cls, data_dir, catalog, lock, engine_class, salvage, opts) -> "Session":
        """The rest of ``open``, under the lock: restore, replay, sweep. Returns the Session."""
        engine, ck = restore_checkpoint(data_dir, catalog, engine_class)
        records, report, sealed = journaled_tail(data_dir, catalog, ck["seq"], salvage)
        for rec in records:
            if rec.first_seq <= engine.seq:
                continue
            res = engine.process(rec.orders)
            for name in TABLES[1:]:
                mine, lacking = getattr(res, name), lacks(rec.version, name)
                # why only the fields the record holds: an older file's rows read 0 in the
                # fields added since, which the engine now fills (a fill event's price)
                if not np.array_equal(zero_fields(mine, lacking), getattr(rec, name)):
                    raise CorruptionError(f"{rec.path}: replaying the record at offset {rec.offset} "
                                          f"(seq {rec.first_seq}) gives different {name}: the engine "
                                          "is not deterministic or the checkpoint is wrong",
                                          rec.path, rec.offset)
                if lacking:
                    # why the engine's rows are kept (and sealed): they equal the record in
                    # every field it holds and carry the fields it lacks, so the sealed
                    # segment is what a rerun of the same orders emits
                    setattr(rec, name, np.array(mine))
            rec.version = WAL_VERSION   # its rows now hold every field (its orders' added are 0)
        s = cls(data_dir, engine, catalog, lock=lock, **opts)
        try:
            s.recovery = report
            s._wal_ranges = dict(report.file_ranges)
            s._pending = [r for r in records if r.first_seq > sealed]
            s._pending_rows = sum(r.orders.size for r in s._pending)
            s._lock.check()
            remove_orphans(data_dir, catalog)   # files no catalog row names: a crash's leftovers
        except BaseException:
            s._release()
            raise
        return s

    @classmethod
    def _options(cls, options: dict) -> dict:
        unknown = set(options) - set(cls._OPTS)
        if unknown:
            raise UsageError(f"unknown session option(s) {sorted(unknown)}; known: {sorted(cls._OPTS)}")
        return {**cls._OPTS, **options}

    # -- the hot path --------------------------------------------------------------------------
    def process(self, orders: np.ndarray):
        """Run one batch through the engine and journal it; return the engine's Result.

        The Result is returned only after the WAL record is durable under the session's policy.
        Its arrays are read-only (they are the rows waiting to be sealed); copy to modify.
        Raises WriteError if journaling fails (the session is then unusable: reopen it),
        StoreError if the session is closed or failed earlier, UsageError while
        ``process_many`` is running.
        """
        self._check_usable()
        # (anything but an array goes the one-call way, where the engine names what is wrong)
        size = orders.size if isinstance(orders, np.ndarray) and orders.ndim == 1 else 0
        k = min(self._parts, size // self.PART_MIN) if self.wal.compress else 1
        if k >= 2:
            rec, res = self._process_parts(orders, k)
        else:
            rec, res = self._match(orders)
            try:
                self.wal.append(rec.first_seq, rec.orders, rec.fills, rec.l2, rec.events)
            except WriteError as e:
                self._failed = str(e)
                raise
        self._after_durable(rec)
        return res

    def _resolve_parts(self, journal_parts) -> int:
        if journal_parts is None:
            try:
                from exsim.exchange.engine import Engine
            except ImportError:   # pragma: no cover - the package ships the engine
                return 1
            return 8 if isinstance(self.engine, Engine) and self.wal.compress else 1
        if isinstance(journal_parts, bool) or not isinstance(journal_parts, int) or journal_parts < 1:
            raise UsageError(f"journal_parts must be None or an integer >= 1, got {journal_parts!r}")
        return journal_parts

    def _process_parts(self, orders: np.ndarray, k: int):
        """``process`` in k slices: each slice is matched, its outputs copied end to end into
        the batch's rows, and its record part encoded on the encoder thread while the engine
        matches the next slice; the parts are then written as one record. Returns (record,
        Result) once it is durable."""
        from concurrent.futures import ThreadPoolExecutor

        from exsim.store.wal import PartEncoder

        if self._encoder is None:
            self._encoder = ThreadPoolExecutor(1, thread_name_prefix="exsim-journal")
            self._part_encoder = PartEncoder()
        first, n = self.engine.seq + 1, orders.size
        cuts = [n * i // k for i in range(k + 1)]
        outs = self._table_rows(n)
        # why the orders are copied on the encoder thread: the copy leaves the calling thread,
        # and the encoder reads each slice's rows while they are in its cache; the caller's
        # array is only read, and only until this call returns
        mine = self._arena.reserve(orders.nbytes).view(orders.dtype) if \
            orders.dtype == TABLE_DTYPES["orders"] else None
        futs = []
        try:
            for a, b in zip(cuts[:-1], cuts[1:]):
                sub, f0 = orders[a:b], self.engine.seq + 1
                res, parts = self._match_into(sub, outs)
                futs.append(self._encoder.submit(self._encode_part, f0, sub,
                                                 None if mine is None else mine[a:b], *parts))
            if mine is None:
                mine = self._arena.copy(orders)
            mine.flags.writeable = False
            rec = WalRecord(first, mine, *(o.rows() for o in outs))
            self.wal.append_parts(first, n, [f.result() for f in futs])
        except BaseException as e:
            for f in futs:   # why wait: the encoder must be idle before the next batch
                f.cancel() or f.exception()
            if self.engine.seq >= first:   # the engine is ahead of the journal
                self._failed = str(e) if isinstance(e, WriteError) else f"journaling failed: {e!r}"
            raise
        self._learn_rows(n, outs)
        return rec, type(res)(rec.fills, rec.l2, rec.events)

    def _encode_part(self, first_seq, orders, copy, fills, l2, events):
        """(On the encoder thread) copy ``orders`` into ``copy`` (its place in the record's
        rows, or None) and encode the part; return the ``Part``."""
        if copy is not None:
            if orders.flags.c_contiguous:
                # why bytes: a structured copyto goes field by field, 10x slower than memcpy
                np.copyto(copy.view(np.uint8), orders.view(np.uint8))
            else:
                np.copyto(copy, orders, casting="no")
            orders = copy
        return self._part_encoder.encode(first_seq, orders, fills, l2, events)

    def process_many(self, batches, *, depth: int = 4):
        """Process an iterable of order batches, yielding each batch's Result in order.

        Same guarantee as ``process``: a Result is yielded only once its batch's WAL record is
        durable under the policy. The difference is pipelining: journaling (shuffle, lz4, CRC,
        write, fsync) runs on a writer thread, so up to ``depth`` batches are in flight and
        batch k+1 is matched while batch k is being written and fsynced. When batches arrive
        faster than fsyncs complete, the writer commits the queued records with one fsync
        (group commit: ``wal.GroupWriter``), and each of their Results is yielded after it.
        The engine is then ahead of the journal by the batches in flight, which is why
        checkpoints wait for the pipeline to drain, and why a failed write leaves the session
        failed (reopen it: the batches after the last yielded Result are replayed only if they
        reached the WAL whole). ``process``, ``checkpoint`` and ``close`` raise UsageError
        inside the loop over the results.
        Raises WriteError, StoreError as ``process``; UsageError if depth < 1.
        """
        import collections

        from exsim.store.wal import GroupWriter

        self._check_usable()
        if depth < 1:
            raise UsageError(f"process_many: depth must be >= 1, got {depth}")
        flight = collections.deque()
        writer = GroupWriter(self.wal)   # its thread owns self.wal until closed
        self._wal_exec = writer
        try:
            for orders in batches:
                if flight and self.engine.seq - self._last_ckpt >= self.checkpoint_every:
                    while flight:   # why: a checkpoint must not be ahead of the journal
                        yield self._ack(*flight.popleft())
                self._check_usable(inside=True)
                rec, res = self._match(orders)
                fut = writer.append(rec.first_seq, rec.orders, rec.fills, rec.l2, rec.events)
                flight.append((rec, res, fut))
                while len(flight) >= depth or (flight and flight[0][2].done()):
                    # why also when done: a durable Result is handed over at once, and its
                    # batch booked for sealing, instead of waiting for the pipe to fill
                    yield self._ack(*flight.popleft())
            while flight:
                yield self._ack(*flight.popleft())
        finally:
            writer.close()   # why: the writer must be idle before anyone else writes
            self._wal_exec = None
            self.wal_groups = (writer.records, writer.groups)
            # a loop left early (break, an exception) leaves journaled but unyielded batches:
            # book them, or the next seal would skip their rows
            for rec, _, fut in flight:
                if fut.exception() is not None:
                    self._failed = self._failed or str(fut.exception())
                    break
                if not self._failed:
                    self._pending.append(rec)
                    self._pending_rows += rec.orders.size
            for fut in self._wal_ops:
                if fut.exception() is not None and not self._failed:
                    self._failed = f"WAL rotation failed: {fut.exception()}"
            self._wal_ops = []

    def _ack(self, rec, res, fut):
        try:
            fut.result()
            for op in self._wal_ops:      # rotations queued before this append are done too
                if op.done():
                    op.result()
        except WriteError as e:
            self._failed = str(e)
            raise
        self._wal_ops = [op for op in self._wal_ops if not op.done()]
        self._after_durable(rec)
        return res

    def _check_usable(self, inside: bool = False) -> None:
        if self._failed or self._closed:
            raise StoreError(f"{self.data_dir}: session {'closed' if self._closed else 'failed'}"
                             f"{': ' + self._failed if self._failed else ''}; reopen the directory")
        if not self._lock.held:
            self._lock.check()   # raises: superseded by a later open of this directory
        if self._wal_exec is not None and not inside:
            raise UsageError("Session.process_many is running: finish iterating over it first")

    def _outputs(self, orders) -> OutputBuffers:
        """The output buffers every batch is matched into, sized for the first batch (the
        engine grows them when a later batch needs more, and names what is wrong with a batch
        that is not an array)."""
        if self._out is None:
            self._out = OutputBuffers(orders.size if isinstance(orders, np.ndarray) else 0)
        return self._out

    def _match(self, orders: np.ndarray):
        """Run the engine; return (record with private copies of the batch, Result of them)."""
        first = self.engine.seq + 1
        if not (isinstance(orders, np.ndarray) and orders.ndim == 1):
            # anything else goes the one-call way, where the engine names what is wrong
            res = self.engine.process(orders, out=self._outputs(orders))
            outs = None
        else:
            outs = self._table_rows(orders.size)
            res, _ = self._match_into(orders, outs)
        cp = self._arena.copy
        if outs is None:
            rec = WalRecord(first, cp(orders), cp(res.fills), cp(res.l2), cp(res.events))
        else:
            rec = WalRecord(first, cp(orders), *(o.rows() for o in outs))
            self._learn_rows(orders.size, outs)
        # the caller gets the record's (read-only) arrays: the engine overwrites its buffers on
        # the next batch
        return rec, type(res)(rec.fills, rec.l2, rec.events)

    def _table_rows(self, n: int) -> list:
        """TableRows of fills, l2 and events for a batch of ``n`` messages, with the room the
        last batches' rows per message suggest."""
        # why reserved rows: the engine writes each slice's outputs straight to their place in
        # the batch's rows (``_match_into``), sparing a copy of them; the room is guessed from
        # the last batch's rows per message, and a table that outgrows it is copied instead
        return [TableRows(self._arena, TABLE_DTYPES[t], int(n * self._rows_per_msg[t]) + 1024)
                for t in TABLES[1:]]

    def _learn_rows(self, n: int, outs: list) -> None:
        if n:
            for t, o in zip(TABLES[1:], outs):
                self._rows_per_msg[t] = o.size / n * 1.25

    def _match_into(self, orders: np.ndarray, outs: list):
        """Match ``orders`` (a 1-d array), their fills, l2 and events appended to ``outs``
        (TableRows): written by the engine in place, in the room after the rows already there,
        or copied there when the engine needed more room than was left. Returns (the engine's
        Result, [the rows appended to each of ``outs``])."""
        base = self._outputs(orders)
        into = self._inplace
        rooms = [o.room() for o in outs]
        into.fills, into.l2, into.events = (
            getattr(base, t) if r is None else r for t, r in zip(TABLES[1:], rooms))
        try:
            res = self.engine.process(orders, out=into)
            got = []
            for t, o, r, rows in zip(TABLES[1:], outs, rooms, res):
                now = getattr(into, t)
                if r is not None and now is r and _starts_at(rows, r):
                    got.append(o.commit(rows))   # written in place
                else:
                    # the engine grew the buffer, or ignored ``out`` (the protocol allows it)
                    got.append(o.add(rows))
                    if r is None:
                        setattr(base, t, now)    # keep a buffer the engine grew
            return res, got
        finally:
            # why: views of the arena left here would keep its chunk from being reused
            into.fills, into.l2, into.events = base.fills, base.l2, base.events

    def _after_durable(self, rec: WalRecord) -> None:
        """Book a durable record: pending for the next seal; checkpoint and seal when due."""
        self._pending.append(rec)
        self._pending_rows += rec.orders.size
        try:
            self._reap_seal(block=False)
            if self.engine.seq == rec.last_seq and \
                    self.engine.seq - self._last_ckpt >= self.checkpoint_every:
                self._checkpoint()
            if self._pending_rows >= self.seal_every:
                if self.seal_in_background:
                    self._start_seal()
                else:
                    self.seal()
        except WriteError as e:
            # the batch itself is durable in the WAL; only the background work failed
            raise WriteError(f"batch seq {rec.first_seq}..{rec.last_seq} is journaled, but {e}") from e

    def unsealed_records(self) -> list[WalRecord]:
        """The journaled batches not yet sealed into registered segments, oldest first
        (including those a background seal is writing)."""
        return (self._sealing.records if self._sealing else []) + self._pending

    def read(self, table: str, symbol=None, seq=None, ts=None, columns=None) -> np.ndarray:
        """Same as ``store.read(self, ...)``: see there."""
        from exsim.store.query import read

        return read(self, table, symbol=symbol, seq=seq, ts=ts, columns=columns)

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint(self) -> int:
        """Write the engine's checkpoint durably and register it (after waiting for a background
        seal, so that the WAL files both cover are trimmed at once); return its seq.

        Raises WriteError if the file cannot be written or the background seal failed,
        UsageError while ``process_many`` runs (the engine is then ahead of the journal).
        """
        if self._wal_exec is not None:
            raise UsageError("Session.checkpoint inside process_many: the engine is ahead of the WAL")
        self._lock.check()
        self._reap_seal(block=True)
        return self._checkpoint()

    def _checkpoint(self) -> int:
        self._lock.check()
        seq = self.engine.seq
        rel, nbytes, crc = write_checkpoint_file(self.data_dir, seq, self.engine.checkpoint(),
                                                 sync=self._sync)
        self.catalog.add_checkpoint(seq, rel, nbytes, crc)
        self._last_ckpt = seq
        self._trim_wal()
        return seq

    # -- sealing -------------------------------------------------------------------------------
    def seal(self) -> list:
        """Seal every unsealed batch into lz4 segments (one per table and symbol) and register
        them, advancing sealed_through in the same catalog transaction; waits for a background
        seal first. Returns the SegmentInfos registered by this call (a finished background
        seal's included). Raises WriteError if a segment cannot be written (its rows stay
        unsealed, in the WAL); StoreError if this Session no longer holds the directory's lock.
        """
        self._lock.check()
        infos = self._reap_seal(block=True)
        if not self._pending:
            return infos
        recs, through = self._pending, self._pending[-1].last_seq
        new = self._write_segments(recs)
        register_seal(self.catalog, self._lock, self.chooser, new, through)
        self._pending = []
        self._pending_rows = 0
        self._rotate_wal()   # why: the file just sealed can be trimmed once a checkpoint covers it
        self._trim_wal()
        return infos + new

    def _start_seal(self) -> None:
        """Hand the pending records to a background seal (after the previous one finished)."""
        self._reap_seal(block=True)
        recs, self._pending, self._pending_rows = self._pending, [], 0
        # why rotate now: the file holding exactly these records can be trimmed once the seal
        # is registered and a checkpoint covers it
        self._rotate_wal()
        self._sealing = SealJob(self, recs)

    def _rotate_wal(self) -> None:
        if self._wal_exec is None:
            self.wal.rotate()
        else:   # why queued: the writer thread owns the WAL; FIFO puts this after queued appends
            self._wal_ops.append(self._wal_exec.rotate())

    def _reap_seal(self, block: bool) -> list:
        """Register a finished background seal (waiting for it if ``block``); return its infos.

        Raises WriteError if it failed: its records go back to the pending ones.
        """
        job = self._sealing
        if job is None or (not block and job.thread.is_alive()):
            return []
        job.thread.join()
        self._sealing = None
        if job.error is None:
            try:
                register_seal(self.catalog, self._lock, self.chooser, job.infos, job.through)
            except BaseException as e:
                job.error = e
        if job.error is not None:
            self._pending = job.records + self._pending
            self._pending_rows = sum(r.orders.size for r in self._pending)
            if isinstance(job.error, WriteError):
                raise job.error
            raise WriteError(f"background seal failed: {job.error!r}") from job.error
        self._trim_wal()
        return job.infos

    def _write_segments(self, recs: list) -> list:
        """Write (durably, per policy) the segments of ``recs``; register nothing. Returns the
        SegmentInfos. Runs on the seal thread or the session's, never on both at once."""
        infos, self._scratch = write_segments(self.data_dir, recs, self.chooser, self._scratch,
                                              lock=self._lock, sync=self._sync)
        return infos

    def _trim_wal(self) -> None:
        trim_wal(self.wal, self._wal_ranges, min(self.catalog.sealed_through(), self._last_ckpt),
                 self._lock)

    # -- end -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Seal everything, write a final checkpoint, trim the WAL, release the lock and close.

        A failed session (a write failed earlier) or one superseded by a later open of the same
        directory in this process is closed without writing anything: its WAL, catalog and
        lock are released and StoreError is raised saying the last batches were not sealed
        (they are in the WAL: reopen the directory to recover them). Later calls return None.
        Raises WriteError if sealing or the checkpoint fails (the WAL still holds everything;
        the session stays open so that close can be retried), UsageError inside process_many.
        """
        if self._closed:
            return
        if self._wal_exec is not None:
            raise UsageError("Session.close inside process_many: finish iterating over it first")
        if self._failed or not self._lock.held:
            why = (f"the session failed earlier: {self._failed}" if self._failed else
                   "a later Session.open/create of the directory in this process took it over")
            try:
                sealed = str(self.catalog.sealed_through())
            except Exception:   # why broad: only for the message of an error being raised anyway
                sealed = "(unknown)"
            self._release()
            raise StoreError(f"{self.data_dir}: closed without sealing or checkpointing ({why}); "
                             f"the batches after seq {sealed} were not sealed and are only in the "
                             "WAL: reopen the directory (Session.open) to recover them")
        if self.seal_in_background and self._pending:
            self._start_seal()   # (after a running seal) the rest goes to the seal thread
        if self.engine.seq != self._last_ckpt:
            # why before waiting for the seal: the final checkpoint (engine state, write,
            # fsync) is made on this thread while the seal thread writes the last segments;
            # recovery accepts either one registered first
            self._checkpoint()
        self.seal()
        self.wal.close()
        self._trim_wal()
        self._release()

    def _release(self) -> None:
        """Let go of everything the session holds (seal thread, WAL file, catalog connection,
        encoder threads, lock) without writing anything more; never raises."""
        if self._sealing is not None:
            self._sealing.thread.join()   # its files are orphans unless registered
            self._sealing = None
        try:
            self.wal.close()
        except Exception:   # why broad: a failed session's WAL may fail again; nothing to add
            pass
        try:
            self.catalog.close()
        except Exception:
            pass
        if self._encoder is not None:
            self._encoder.shutdown(wait=True)
            self._encoder = None
        self._lock.release()
        self._closed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and (self._failed or not self._lock.held):
            # why quietly: the exception in flight is the failure; close()'s StoreError would
            # only hide it
            self._release()
            return
        self.close()
