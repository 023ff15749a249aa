"""Simulation: a flow through a fresh ``Engine`` journaled by a ``store.Session`` into a new data directory.

``simulate(flow, out, ...)`` is what ``exsim simulate`` and ``exsim demo`` run; it returns a
``SimSummary`` (messages, fills, volume, rejects, time, top of book per symbol, size on disk, and
for a flow with trading phases the PHASE events, the auctions that traded and their volume).
``kernels_cold()`` says whether the first engine call of this process will compile the numba
kernels (minutes on a new install: docs/benchmarks.md, "Cold start"), so ``exsim serve`` can
compile them before its ports listen.

Invariants:
- The data directory is built under a temporary sibling name (``replay.atomic``) and renamed into
  place only after the session closed cleanly, so ``out`` either does not exist or is complete;
  on any failure the temporary directory is removed.
- With ``replace`` an existing data directory at ``out`` is swapped out only once the new one is
  complete; without it ``out`` must not exist or be an empty directory (the caller checks).
- ``SimSummary.seconds`` (and so ``rate``) excludes compiling: before the timer starts the same
  pipeline (Engine, Session, seal) runs once on a few messages in a scratch directory, which
  compiles or loads every kernel the run calls; the part of it numba spent compiling
  (``exchange.compiling``) is ``compile_seconds``, 0.0 on a warm cache.
- The flow's symbols are registered in order before the first batch, so the flow's symbol ids
  are the engine's; the run's catalog row records ``Flow.run_info()``.
- The Session journals arrays of exactly ``batch`` messages (the last may be shorter) cut from the
  flow's message sequence, whether the flow is loaded whole or streamed (``Flow.iter_batches``:
  a DBN file opened with ``stream=True``), so both give the same data directory byte for byte.
  A streamed flow is never held whole: at most one of its batches, plus fewer than ``batch``
  messages carried over to the next, is in memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from exsim.exchange import compiling
from exsim.exchange.errors import UsageError

from exsim.store.creation import sweep_abandoned

from exsim.replay.atomic import temp_dir_beside
from exsim.replay.progress import progress

__all__ = ["simulate", "SimSummary", "dir_bytes", "kernels_cold", "warm_up"]


@dataclass
class SimSummary:
    """What a simulation produced."""

    data_dir: str
    label: str
    seed: int | None
    messages: int
    fills: int
    volume: int
    rejects: int
    seconds: float
    top: list[tuple]                             # (symbol, tick, bid, bid qty, ask, ask qty)
    bytes: int = 0
    compile_seconds: float = 0.0                 # compiling before the timed run (see module)
    phase_changes: int = 0                       # PHASE events (messages' and the engine's own)
    auctions: int = 0                            # UNCROSS events that executed (volume > 0)
    auction_volume: int = 0                      # lots the uncrosses traded (in ``volume`` too)

    @property
    def rate(self) -> float:
        """Messages per second through engine, journal and final seal (generation and kernel
        compiling excluded)."""
        return self.messages / self.seconds if self.seconds > 0 else float("inf")


def dir_bytes(path: str) -> int:
    """Return the total size of the files under ``path``."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass   # why: a file may vanish under a concurrent compaction; sizes are informative
    return total


def kernels_cold() -> bool:
    """Return True when this process's first engine call will compile the matching kernel
    (``exchange.kernels.process_batch``, most of a first run's compiling), False when it is
    already loaded in this process or numba's on-disk cache holds it for today's source.

    How: numba's own cache index of the kernel is read (it is keyed on the source file's stamp,
    so a stale index counts as cold) without compiling anything. Never raises: if that index
    cannot be inspected, returns whether no ``*.nbi`` index file of the kernel exists next to
    the module.
    """
    import glob

    from exsim.exchange import kernels

    disp = kernels.process_batch
    if disp.signatures:
        return False
    try:
        return not disp._cache._cache_file._load_index()
    except Exception:   # why broad: numba internals may change; fall back to the file test
        folder = os.path.join(os.path.dirname(os.path.abspath(kernels.__file__)), "__pycache__")
        return not glob.glob(os.path.join(folder, "kernels.process_batch-*.nbi"))


def warm_up(stp: str = "none", durability: str = "none", venue: bool = False) -> float:
    """Run a few crossing, modified and cancelled orders through a fresh Engine journaled by a
    Session into a scratch directory (removed afterwards), so that every kernel ``simulate``
    calls is compiled, or loaded from numba's cache, before a run is timed.

    A plain flow only ever needs the plain matching kernel (``exchange.plain``); with
    ``venue=True`` one iceberg order follows, so the full kernel (``exchange.kernels
    .process_batch``, which any venue order needs) is compiled too: a server warms both, since a
    client may send any order, and its first venue order must not wait minutes for a compile.

    Returns the seconds it took (about the compile time on a cold cache, milliseconds on a warm
    one). Raises what Engine or Session raise (a full temporary directory, say).
    """
    import numpy as np

    from exsim.exchange import ORDER_DTYPE, Engine, Kind, Side
    from exsim.store import Session

    msgs = np.zeros(5, ORDER_DTYPE)
    msgs["ts"] = np.arange(1, 6)
    msgs["order_id"] = [1, 2, 3, 1, 3]
    msgs["price"] = [100, 100, 99, 100, 99]
    msgs["qty"] = [10, 4, 5, 3, 0]
    msgs["trader"] = [1, 2, 3, 1, 3]
    msgs["kind"] = [Kind.NEW, Kind.NEW, Kind.NEW, Kind.MODIFY, Kind.CANCEL]
    msgs["side"] = [Side.BUY, Side.SELL, Side.BUY, Side.BUY, Side.BUY]
    t0 = time.perf_counter()
    scratch = tempfile.mkdtemp(prefix="exsim-warm-")
    try:
        engine = Engine(stp=stp)
        engine.add_symbol("WARM")
        session = Session.create(os.path.join(scratch, "d"), engine, run_info={"scenario": "warm-up"},
                                 durability=durability)
        try:
            session.process(msgs)
            if venue:
                iceberg = np.zeros(1, ORDER_DTYPE)
                for field, value in (("ts", 6), ("order_id", 4), ("price", 98), ("qty", 10),
                                     ("display_qty", 5), ("trader", 4), ("kind", Kind.NEW),
                                     ("side", Side.BUY)):
                    iceberg[field] = value
                session.process(iceberg)
        finally:
            session.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.perf_counter() - t0


def simulate(flow, out: str, *, batch: int = 10_000, durability: str = "fsync", stp: str = "none",
             replace: bool = False, quiet: bool = True, on_batch=None) -> SimSummary:
    """Run ``flow`` through a fresh Engine journaled by a Session into ``out``; return a SimSummary.

    ``flow`` is a ``scenarios.Flow`` or anything ``scenarios.open_flow`` opens (a DBN file is
    opened streamed); a flow without symbol names gets S0, S1, ... with tick 1. ``durability`` is the Session's ("fsync",
    "interval", "none"), ``stp`` the Engine's self-trade prevention. ``replace`` swaps out an
    existing data directory at ``out``. ``on_batch(engine, seq)`` is called after each batch.
    ``quiet`` False shows a progress bar on a terminal's stderr (messages, or bytes of the file
    read for a streamed flow).
    Raises UsageError for a bad batch size or flow (a streamed one without symbols),
    WriteError/StoreError if the store fails, InputError for a malformed record of a streamed file
    (nothing is left at ``out`` then).
    """
    import numpy as np

    from exsim.exchange import Engine, Event
    from exsim.exchange.schema import AUCTION_SIDE
    from exsim.scenarios import Flow, open_flow
    from exsim.store import Session

    if batch < 1:
        raise UsageError(f"batch must be >= 1, got {batch}")
    if not isinstance(flow, Flow):
        flow = open_flow(flow, stream=True)
    symbols = flow.symbols
    if symbols is None:
        if flow.streamed:
            raise UsageError(f"{flow.label}: a streamed flow must name its symbols")
        orders = flow.orders
        symbols = [(f"S{k}", 1) for k in range(int(orders["symbol"].max()) + 1 if orders.size else 1)]
    engine = Engine(stp=stp)
    if flow.specs is not None:
        # scenario files, flow files and data directories carry each symbol's tick table, lot,
        # session close and money
        for spec in flow.specs:
            engine.add_symbol(**spec)
    else:
        for name, tick, *options in symbols:
            # an entry is (name, tick size) or (name, tick size, add_symbol options dict)
            engine.add_symbol(name, tick_size=tick, **(options[0] if options else {}))
    compiled_before = compiling.compiled_seconds()
    warm_up(stp, durability)
    # only what numba compiled: loading a warm cache and the warm-up's own work are not a compile
    compile_seconds = compiling.compiled_seconds() - compiled_before
    out = os.path.abspath(out)
    # why the create tag: a killed simulate leaves its hidden directory behind; named like a
    # create's build directory, the next run of the same name removes it once it is unlocked
    # and a minute old (store.creation.sweep_abandoned)
    sweep_abandoned(os.path.dirname(out), os.path.basename(out))
    tmp = temp_dir_beside(out, tag="exsim-create")
    messages = fills = volume = rejects = phase_changes = auctions = auction_volume = 0
    try:
        run_info = {"scenario": flow.label, "seed": flow.seed, "batch": batch,
                    "durability": durability, **flow.run_info()}
        session = Session.create(tmp, engine, run_info=run_info, durability=durability)
        t0 = time.perf_counter()
        try:
            total, unit = (None, "B") if flow.streamed else (flow.orders.size, "msg")
            with progress(total=total, desc="simulate", unit=unit, quiet=quiet) as bar:
                def read(done: int, size: int) -> None:
                    bar.total = size
                    bar.update(done - bar.n)

                for part in _slices(flow.iter_batches(read if flow.streamed else None), batch):
                    res = session.process(part)
                    messages += part.size
                    fills += res.fills.size
                    volume += int(res.fills["qty"].sum())
                    ev = res.events["event"]
                    rejects += int(np.count_nonzero(ev == Event.REJECTED))
                    phase_changes += int(np.count_nonzero(ev == Event.PHASE))
                    auctions += int(np.count_nonzero((ev == Event.UNCROSS)
                                                     & (res.events["filled_qty"] > 0)))
                    auction_volume += int(res.fills["qty"][res.fills["aggressor_side"]
                                                           == AUCTION_SIDE].sum())
                    if on_batch is not None:
                        on_batch(engine, engine.seq)
                    if not flow.streamed:
                        bar.update(part.size)
        finally:
            session.close()
        seconds = time.perf_counter() - t0
        top = [_top(engine, name, tick) for name, tick, *_ in symbols]
        _move_into_place(tmp, out, replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SimSummary(out, flow.label, flow.seed, messages, fills, volume, rejects, seconds,
                      top, dir_bytes(out), compile_seconds, phase_changes, auctions, auction_volume)


def _slices(parts, batch: int):
    """Yield the messages of the ORDER_DTYPE arrays ``parts`` as arrays of exactly ``batch`` (the
    last may be shorter), cut from their concatenation without building it: a part's tail
    shorter than ``batch`` is carried, as a copy, into the next."""
    import numpy as np

    carry = None
    for part in parts:
        start = 0
        if carry is not None:
            need = batch - carry.size
            if part.size < need:
                carry = np.concatenate([carry, part])
                continue
            yield np.concatenate([carry, part[:need]])
            carry, start = None, need
        stop = start + (part.size - start) // batch * batch
        for lo in range(start, stop, batch):
            yield part[lo:lo + batch]
        if stop < part.size:
            carry = part[stop:].copy()
    if carry is not None and carry.size:
        yield carry


def _top(engine, name: str, tick) -> tuple:
    """(symbol, tick, bid, bid qty, ask, ask qty) of the engine's book, None for an empty side."""
    bids, asks = engine.depth(name, levels=1)
    return (name, tick,
            int(bids["price"][0]) if bids.size else None, int(bids["qty"][0]) if bids.size else None,
            int(asks["price"][0]) if asks.size else None, int(asks["qty"][0]) if asks.size else None)


def _move_into_place(tmp: str, out: str, replace: bool) -> None:
    if replace and os.path.lexists(out):
        # why rename first: the old directory disappears only once the new one is complete
        trash = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.old-", dir=os.path.dirname(out))
        os.rename(out, os.path.join(trash, "old"))
        os.rename(tmp, out)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        if os.path.isdir(out):
            os.rmdir(out)   # the caller checked it empty; rename needs it gone
        os.rename(tmp, out)
