"""Opening a flow: every source of market messages becomes one ``Flow`` through ``open_flow``.

Sources ``open_flow`` accepts:
- a ``Scenario``, a preset name or a ``.toml``/``.json`` scenario file: generated whole, with
  ``seed`` replacing the scenario's seed;
- a LOBSTER day: its folder (the first ``*_message_*.csv`` and ``*_orderbook_*.csv`` in it) or,
  with ``fmt="lobster"``, the (messages, book) file pair;
- a QuantCup feed file (``fmt="quantcup"``);
- a Binance capture: its ``.gz`` file, or a folder holding exactly one ``.gz`` and no ``.csv``
  (also with ``fmt="binance"``);
- a Databento DBN file (``.dbn``, ``.dbn.zst``, or ``fmt="dbn"``): its MBO records as order
  messages, one symbol per instrument (scenarios/loaders/dbn.py);
- a generic order-flow file (``.csv``, ``.parquet``, or ``fmt="csv"``/``"parquet"``, also for
  ``.csv.gz``): its messages and symbol table (scenarios/loaders/generic.py);
- an exsim data directory (one holding ``catalog.sqlite``): its journaled orders;
- objects already loaded: an ORDER_DTYPE array, a ``LobsterFlow``, a ``BinanceData``.

Streaming: ``open_flow(..., stream=True)`` opens a DBN file without loading it. Its symbols come
from a first pass over the file that converts nothing (``loaders.dbn.dbn_symbols``: the metadata's
symbol mappings, the definitions and each instrument's first record); ``Flow.orders`` is None and
``Flow.iter_batches()`` converts the file batch by batch, each time it is called, so a consumer
holds one batch at a time. Every other source is loaded whole whatever ``stream`` says, and
consumers that need the whole flow at once (backtests) open it without ``stream``.

Invariants:
- ``Flow.orders`` is an ORDER_DTYPE array in the order the engine takes it, prices in integer ticks,
  or None for a streamed flow; ``iter_batches()`` yields the same messages in the same order in
  either case (the concatenation of a streamed flow's batches is the array it would have loaded).
  A Binance capture also keeps its L2 data in ``Flow.l2`` (its ``orders`` are the market-by-price
  flow); consumers that replay aggregate levels use ``l2``.
- ``Flow.symbols`` lists (name, tick size) in symbol-id order, or is None when the source names
  no symbols (a bare array, a data directory whose ids are not 0..n-1); a streamed flow's are
  known before its first batch and are those the whole load would give.
- ``Flow.specs`` lists the ``Engine.add_symbol`` keyword dicts of those symbols with every option
  the source records (a scenario file's tick tables, lots, session close and money; a data
  directory's stored run config), or is None when the source records only names and ticks; when
  set, its names and ticks are ``symbols``. ``Flow.engine`` holds the ``Engine()`` options (stp,
  ownership) a data directory's run was made with, None for every other source: a consumer that
  re-matches a stored run with them (and ``specs``) runs the recorded market, not another one.
- A file's symbol name comes from ``symbol_from_file`` (``symbol=`` overrides it); LOBSTER ticks
  are ``lobster.TICK_SIZE``, Binance ticks ``binance.DEFAULT_TICK``.
- Errors: UsageError for a source of the wrong kind or a ``seed``/``symbol`` it cannot take,
  InputError (from the loaders, naming file and line) for a malformed file.

This module reads ``exchange`` and ``store`` only; backtest-specific views of a flow (the L2 queue
replay) are built from a Flow in ``replay.backtesting``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from exsim.exchange.errors import InputError, UsageError
from exsim.exchange.schema import ORDER_DTYPE

from exsim.scenarios.data import find_sample
from exsim.scenarios.loaders import binance, lobster
from exsim.scenarios.loaders._parse import check_zone
from exsim.scenarios.scenario import Scenario, load_scenario

__all__ = ["Flow", "open_flow", "symbol_from_file", "FORMATS"]

FORMATS = {"quantcup": 1, "lobster": 2, "binance": 1, "dbn": 1, "csv": 1, "parquet": 1}
# fmt -> number of files it takes
DBN_SUFFIXES = (".dbn", ".dbn.zst")
GENERIC_SUFFIXES = {".csv": "csv", ".parquet": "parquet"}
BINANCE_NAME = "BTCUSDT"    # the symbol of a BinanceData given without a name (the sample's)


@dataclass
class Flow:
    """Market messages ready for an engine, the symbols to register first, and where they came from."""

    orders: np.ndarray | None                    # ORDER_DTYPE; None: streamed (see batches)
    symbols: list[tuple[str, float]] | None      # (name, tick size) by symbol id; None: unnamed
    label: str                                   # e.g. "default" or "quantcup:feed.csv"
    kind: str                                    # scenario, quantcup, lobster, binance, dbn, csv, parquet, data_dir, orders
    source: str | None = None                    # the path opened, as given (None: an object)
    files: list[str] = field(default_factory=list)   # absolute paths of the files read
    seed: int | None = None                      # the scenario's seed
    scenario: Scenario | None = None
    l2: binance.BinanceData | None = None        # a Binance capture's L2 data
    tick: str | None = None                      # a Binance capture's tick, as a decimal string
    batches: Callable[..., Iterator[np.ndarray]] | None = None   # a streamed flow's (iter_batches)
    specs: list[dict] | None = None              # add_symbol keyword dicts by id (module docstring)
    engine: dict | None = None                   # a stored run's Engine() options (stp, ownership)
    date: str | None = None                      # trading date YYYY-MM-DD whose midnight is ts 0
    tz: str | None = None                        # IANA zone of the times (None: not known, UTC)
    ts_origin: str | None = None                 # "midnight" (of date, in tz) or "epoch"; None: not known
    loaded: dict = field(default_factory=dict)   # what the loader counted (a DBN's skipped records);
                                                 # a streamed flow's is filled when its batches end

    @property
    def streamed(self) -> bool:
        """Return True when the messages come batch by batch (``orders`` is None)."""
        return self.batches is not None

    def iter_batches(self, progress: Callable[[int, int], None] | None = None) -> Iterator[np.ndarray]:
        """Return an iterator over the flow's messages as ORDER_DTYPE arrays, in engine order.

        A streamed flow reads its source afresh on every call and yields one array per batch of
        the file, calling ``progress(bytes_read, total_bytes)`` after each; any other flow yields
        ``orders`` as one array and calls ``progress(n, n)`` with its message count after it.
        Raises (while iterating) InputError for a malformed record of a streamed file.
        """
        if self.batches is not None:
            return self.batches(progress)
        return self._whole(progress)

    def _whole(self, progress):
        yield self.orders
        if progress is not None:
            progress(self.orders.size, self.orders.size)

    @property
    def names(self) -> list[str] | None:
        """Return the symbol names by id, or None when the source names none."""
        return None if self.symbols is None else [n for n, _ in self.symbols]

    @property
    def ticks(self) -> list[float] | None:
        """Return the tick sizes by symbol id, or None when the source names no symbols."""
        return None if self.symbols is None else [t for _, t in self.symbols]

    def run_info(self) -> dict:
        """Return the JSON-serialisable description a run records of this flow (its catalog row):
        the scenario's ``describe()`` for a scenario, else the format and files read."""
        if self.scenario is not None:
            return {"scenario_spec": self.scenario.describe()}
        info = {"flow": self.kind, "files": list(self.files)}
        if self.tick is not None:
            info["tick"] = self.tick
        for key in ("date", "tz", "ts_origin"):   # why: how a reader turns ts into wall-clock times
            if getattr(self, key) is not None:
                info[key] = getattr(self, key)
        return info


def symbol_from_file(path: str | os.PathLike) -> str:
    """Return the symbol name a data file's name carries: the part before the first ``_`` of its
    name up to the first dot, upper-cased (AMZN_2012-06-21_..._message_1.csv -> AMZN,
    btcusdt_20240808.gz -> BTCUSDT); the whole stem when it starts with ``_``."""
    base = os.path.basename(os.fspath(path)).split(".", 1)[0]
    return (base.split("_", 1)[0] or base).upper()


def open_flow(source, *, fmt: str | None = None, symbol: str | None = None,
              seed: int | None = None, progress=None, stream: bool = False,
              batch_bytes: int | None = None, tz: str | None = None,
              definitions: str | os.PathLike | None = None, tick: str | None = None,
              midday: str = "drop") -> Flow:
    """Open ``source`` (see the module docstring for what it may be) and return its Flow.

    ``fmt`` ("quantcup", "lobster", "binance") says how to read a file (or, for "lobster", a
    (messages, book) pair or a folder); without it a path is recognised as a Binance capture, a
    data directory, a LOBSTER folder or else a scenario. ``symbol`` names the one symbol of a
    file flow (default: ``symbol_from_file``). ``seed`` replaces a scenario's seed.
    ``progress(bytes_read, total_bytes)``, if given, is called as a DBN file is read (with
    ``stream``, by its first pass). ``stream`` opens a DBN file as a streamed flow (module
    docstring) read ``batch_bytes`` at a time (default: ``iter_dbn``'s); other sources ignore both.
    ``tz``: the IANA time zone of a LOBSTER file's times (default ``lobster.DEFAULT_TZ``, New
    York) or the zone a Binance or DBN flow's times are shown in (default UTC).
    ``definitions`` (a DBN file of instrument definitions), ``tick`` (decimal price of one tick
    for instruments without a definition) and ``midday`` ("drop" or "refuse") go to the DBN
    loader (``loaders.dbn.iter_dbn``). Raises UsageError for an unknown format, the wrong number of files, a folder that is none of
    the above, a ``seed`` for a flow that is not a scenario, a ``symbol`` for a scenario or data
    directory, a ``tz`` for a flow that is not LOBSTER, Binance or DBN (or that is not a zone),
    DBN options for another flow, or an object of another type; InputError for a missing or malformed file.
    """
    opts = _DbnOptions(progress, stream, batch_bytes, tz, definitions, tick, midday)
    flow = _open(source, fmt, symbol, opts)
    if isinstance(flow, Flow):
        if seed is not None:
            raise UsageError("seed= applies to generated scenarios, not to a flow file or array")
        return _with_clock(flow, opts)
    _no_symbol(symbol, "a scenario")
    if tz is not None:
        raise UsageError("tz= applies to LOBSTER, Binance and DBN flows; a scenario's times "
                         "count from midnight UTC")
    if seed is not None:
        if seed < 0:
            raise UsageError(f"seed must be >= 0, got {seed}")
        flow = dataclasses.replace(flow, seed=seed)
    return Flow(flow.generate(), [(s.name, s.tick_size) for s in flow.symbols], flow.name,
                "scenario", source=flow.source or None, seed=flow.seed, scenario=flow,
                specs=[s.engine_options() for s in flow.symbols])


@dataclass(frozen=True)
class _DbnOptions:
    """How ``open_flow`` reads a DBN file."""

    progress: Callable[[int, int], None] | None = None
    stream: bool = False
    batch_bytes: int | None = None
    tz: str | None = None
    definitions: str | os.PathLike | None = None
    tick: str | None = None
    midday: str = "drop"


def _with_clock(flow: Flow, opts: _DbnOptions) -> Flow:
    """``flow`` with its times' zone and origin (LOBSTER's are set by ``_lobster``); UsageError
    for options its kind does not take."""
    if flow.kind != "dbn" and (opts.definitions is not None or opts.tick is not None
                               or opts.midday != "drop"):
        raise UsageError(f"definitions=, tick= and midday= apply to DBN flows, not to a "
                         f"{flow.kind} flow")
    if flow.kind in ("binance", "dbn"):
        tz = "UTC" if opts.tz is None else check_zone(opts.tz, "tz")
        return dataclasses.replace(flow, tz=tz, ts_origin="epoch")
    if opts.tz is not None and flow.kind != "lobster":
        raise UsageError(f"tz= applies to LOBSTER, Binance and DBN flows, not to a {flow.kind} "
                         "flow")
    return flow


def _open(source, fmt: str | None, symbol: str | None, dbn: _DbnOptions) -> Flow | Scenario:
    """The Flow of a data source, or the Scenario a source names (generated by the caller)."""
    if fmt is not None:
        return _open_format(fmt, source, symbol, dbn)
    if isinstance(source, (str, os.PathLike)):
        path = find_sample(os.fspath(source))
        if os.path.isfile(path) and path.endswith(DBN_SUFFIXES):
            return _dbn(path, symbol, dbn)
        ext = os.path.splitext(path)[1]
        if os.path.isfile(path) and ext in GENERIC_SUFFIXES:
            return _generic(path, GENERIC_SUFFIXES[ext], symbol)
        gz = _binance_file(path)
        if gz:
            return _binance(gz, symbol, source=path)
        if os.path.isdir(path) and os.path.exists(os.path.join(path, "catalog.sqlite")):
            _no_symbol(symbol, "a data directory")
            return _data_dir(path)
        if os.path.isdir(path):
            pair = _lobster_pair(path)
            if pair is None:
                raise UsageError(f"{path}: neither a data directory nor a LOBSTER directory")
            return _lobster(*pair, symbol, source=path, tz=dbn.tz)
        return load_scenario(path)
    if isinstance(source, Scenario):
        return source
    if isinstance(source, lobster.LobsterFlow):
        return Flow(source.orders, _loaded_symbols(source.orders, symbol, lobster.TICK_SIZE),
                    "lobster", "lobster", date=source.date, tz=source.tz, ts_origin="midnight")
    if isinstance(source, binance.BinanceData):
        return Flow(source.orders, [(symbol or BINANCE_NAME, float(binance.DEFAULT_TICK))],
                    "binance", "binance", l2=source, tick=binance.DEFAULT_TICK)
    if isinstance(source, np.ndarray) and source.dtype == ORDER_DTYPE and source.ndim == 1:
        return Flow(source, None if symbol is None else _loaded_symbols(source, symbol, 1),
                    "orders", "orders")
    raise UsageError("flow must be an ORDER_DTYPE array, a Scenario, a LobsterFlow, a BinanceData "
                     "or L2Flow, a scenario name or file, a LOBSTER directory, a Binance capture "
                     f"(.gz file or its directory) or a data directory; got {type(source)}")


def _no_symbol(symbol, what: str) -> None:
    if symbol is not None:
        raise UsageError(f"symbol= names the symbol of a flow file; {what} names its own")


def _loaded_symbols(orders: np.ndarray, symbol: str | None, tick: float) -> list[tuple[str, float]]:
    """Symbols of an array loaded under one symbol id: ``symbol`` (default S<id>) with ``tick``
    for the highest id present, S<k> with tick 1 for the unused ids below it."""
    top = int(orders["symbol"].max()) if orders.size else 0
    return [(f"S{k}", 1) for k in range(top)] + [(symbol or f"S{top}", tick)]


def _open_format(fmt: str, source, symbol: str | None, dbn: _DbnOptions) -> Flow:
    if fmt not in FORMATS:
        raise UsageError(f"unknown flow format {fmt!r}; formats: {', '.join(FORMATS)}")
    files = [os.fspath(source)] if isinstance(source, (str, os.PathLike)) else [os.fspath(f) for f in source]
    files = [find_sample(f) for f in files]
    if fmt == "lobster" and len(files) == 1 and os.path.isdir(files[0]):
        pair = _lobster_pair(files[0])
        if pair is None:
            raise UsageError(f"{files[0]}: no *_message_*.csv and *_orderbook_*.csv in it")
        return _lobster(*pair, symbol, source=files[0], tz=dbn.tz)
    if fmt == "binance" and len(files) == 1 and os.path.isdir(files[0]):
        gz = _binance_file(files[0])
        if gz is None:
            raise UsageError(f"{files[0]}: not a Binance capture directory (one .gz file)")
        return _binance(gz, symbol, source=files[0])
    if len(files) != FORMATS[fmt]:
        raise UsageError(f"a {fmt} flow takes {FORMATS[fmt]} file(s), got {len(files)}")
    for f in files:
        if not os.path.isfile(f):
            raise InputError(f"{f}: no such file")
    if fmt == "lobster":
        return _lobster(files[0], files[1], symbol, tz=dbn.tz)
    if fmt == "binance":
        return _binance(files[0], symbol)
    if fmt == "dbn":
        return _dbn(files[0], symbol, dbn)
    if fmt in ("csv", "parquet"):
        return _generic(files[0], fmt, symbol)
    from exsim.scenarios.loaders.quantcup import load_quantcup

    # the feed's prices are already integer ticks
    return Flow(load_quantcup(files[0]), [(symbol or symbol_from_file(files[0]), 1)],
                f"quantcup:{os.path.basename(files[0])}", "quantcup", source=files[0],
                files=[os.path.abspath(files[0])])


def _lobster_pair(path: str) -> tuple[str, str] | None:
    """The first message and book files of a LOBSTER folder, or None if it lacks either."""
    names = os.listdir(path)
    msg = sorted(f for f in names if "_message_" in f and f.endswith(".csv"))
    book = sorted(f for f in names if "_orderbook_" in f and f.endswith(".csv"))
    if not (msg and book):
        return None
    return os.path.join(path, msg[0]), os.path.join(path, book[0])


def _lobster(messages: str, book: str, symbol: str | None, source: str | None = None,
             tz: str | None = None) -> Flow:
    lf = lobster.load_lobster(messages, book, tz=lobster.DEFAULT_TZ if tz is None else tz)
    return Flow(lf.orders, [(symbol or symbol_from_file(messages), lobster.TICK_SIZE)],
                f"lobster:{os.path.basename(messages)}", "lobster", source=source or messages,
                files=[os.path.abspath(messages), os.path.abspath(book)], date=lf.date, tz=lf.tz,
                ts_origin="midnight")


def _binance_file(path: str) -> str | None:
    """The Binance capture ``path`` names (a .gz file, or a directory holding exactly one), else
    None (scenario files are .toml/.json; LOBSTER directories hold .csv files)."""
    if os.path.isfile(path) and path.endswith(".gz"):
        return path
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "catalog.sqlite")):
        names = os.listdir(path)
        gz = sorted(f for f in names if f.endswith(".gz"))
        if len(gz) == 1 and not any(f.endswith(".csv") for f in names):
            return os.path.join(path, gz[0])
    return None


def _binance(path: str, symbol: str | None, source: str | None = None) -> Flow:
    tick = binance.DEFAULT_TICK
    data = binance.load_binance(path, tick=tick)
    return Flow(data.orders, [(symbol or symbol_from_file(path), float(tick))],
                f"binance:{os.path.basename(path)}", "binance", source=source or path,
                files=[os.path.abspath(path)], l2=data, tick=tick)


def _one_symbol(symbols: list[tuple[str, float]], symbol: str | None, path: str):
    """``symbols`` with the one symbol renamed to ``symbol``; UsageError if there are several."""
    if symbol is None:
        return symbols
    if len(symbols) != 1:
        raise UsageError(f"{path}: symbol= renames the one symbol of a flow file; this one has "
                         f"{len(symbols)} ({', '.join(n for n, _ in symbols)})")
    return [(symbol, symbols[0][1])]


def _dbn(path: str, symbol: str | None, opts: _DbnOptions) -> Flow:
    from exsim.scenarios.loaders.dbn import dbn_symbols, iter_dbn, load_dbn

    size = {} if opts.batch_bytes is None else {"batch_bytes": opts.batch_bytes}
    given = {"tick": opts.tick, "definitions": opts.definitions}
    if opts.definitions is not None and not os.path.isfile(opts.definitions):
        raise InputError(f"{opts.definitions}: no such file (definitions)")
    label, files = f"dbn:{os.path.basename(path)}", [os.path.abspath(path)]
    if opts.definitions is not None:
        files.append(os.path.abspath(opts.definitions))
    if not opts.stream:
        data = load_dbn(path, progress=opts.progress, midday=opts.midday, **given, **size)
        syms = _one_symbol([(s.name, s.tick_size) for s in data.symbols], symbol, path)
        return Flow(data.orders, syms, label, "dbn", source=path, files=files,
                    tick=None if opts.tick is None else str(opts.tick),
                    loaded=_dbn_loaded(data))
    scanned = [(s.name, s.tick_size) for s in dbn_symbols(path, progress=opts.progress, **given, **size)]
    syms = _one_symbol(scanned, symbol, path)
    loaded: dict = {}

    def batches(progress=None) -> Iterator[np.ndarray]:
        last = None
        for last in iter_dbn(path, progress=progress, midday=opts.midday, **given, **size):
            yield last.orders
        if [(s.name, s.tick_size) for s in last.symbols] != scanned:
            raise InputError(f"{path}: its instruments differ from the first pass over it "
                             f"(was the file changed while it was read?)")
        loaded.update(_dbn_loaded(last))

    return Flow(None, syms, label, "dbn", source=path, files=files, batches=batches,
                tick=None if opts.tick is None else str(opts.tick), loaded=loaded)


def _dbn_loaded(data) -> dict:
    """What a DBN load counted, for a consumer to report: the loader's ``counts``, the names of
    the symbols whose book never synced (no clear ``R`` seen: records naming orders from before
    the file were skipped) and of those without a definition (tick from ``tick=`` or 1e-9)."""
    return {"counts": dict(data.counts), "unsynced": [s.name for s in data.symbols if not s.synced],
            "undefined": [s.name for s in data.symbols if not s.defined],
            "tick_1e9": [s.name for s in data.symbols if s.tick == 1]}


def _generic(path: str, fmt: str, symbol: str | None) -> Flow:
    from exsim.scenarios.loaders.generic import load_generic

    if fmt == "parquet" and not path.endswith(".parquet") or fmt == "csv" and path.endswith(".parquet"):
        raise UsageError(f"{path}: a {fmt} flow file must be named *.{'parquet' if fmt == 'parquet' else 'csv'}")
    g = load_generic(path)
    syms = _one_symbol([(s.name, s.tick_size) for s in g.symbols], symbol, path)
    # a file written by `exsim export --format flow` carries each symbol's engine options
    specs = [{**s.engine_options(), "name": name} for s, (name, _) in zip(g.symbols, syms)]
    return Flow(g.orders, syms, f"{fmt}:{os.path.basename(path)}", fmt, source=path,
                files=[os.path.abspath(path)], specs=specs)


def _data_dir(path: str) -> Flow:
    """The journaled orders of a data directory, with its catalog's symbols when their ids are
    0..n-1 (the engine numbers symbols that way) and the run's engine config (``_stored_config``)."""
    from exsim.store import Catalog, read
    from exsim.store.tables import orders_without_seq

    orders = orders_without_seq(read(path, "orders"))
    cat = Catalog(path, readonly=True)
    try:
        syms = cat.symbols()
        runs = cat.runs()[:1]
    finally:
        cat.close()
    symbols = specs = None
    if [s["id"] for s in syms] == list(range(len(syms))):
        symbols = [(s["name"], s["tick_size"]) for s in syms]
    config = runs[0]["engine_options"] if runs else None
    engine, specs = _stored_config(config, symbols)
    return Flow(orders, symbols, f"data_dir:{os.path.basename(os.path.abspath(path))}", "data_dir",
                source=path, files=[os.path.abspath(path)], specs=specs, engine=engine)


_ENGINE_KEYS = ("stp", "ownership")


def _stored_config(config, symbols) -> tuple[dict | None, list[dict] | None]:
    """Return (Engine() options, add_symbol specs) of a run's stored ``engine_options`` (the
    catalog's ``Engine.config()``; the first run's, which the run's first checkpoint matches).

    why the fallbacks: catalogs written before a key existed lack it (no "ownership": the run
    had none, as ``Engine.from_config`` reads it; a bare stp string: the oldest layout), and a
    config whose symbols are not the symbols table's (by name and tick, in id order) describes
    another engine, so the flow then carries names and ticks only (specs None)."""
    if isinstance(config, str):
        return {"stp": config}, None
    if not isinstance(config, dict):
        return None, None
    engine = {k: config[k] for k in _ENGINE_KEYS if k in config}
    if "stp" in engine:
        engine.setdefault("ownership", False)
    rows = config.get("symbols")
    if symbols is None or not isinstance(rows, list) or len(rows) != len(symbols) \
            or not all(isinstance(r, dict) and (r.get("name"), r.get("tick_size")) == sym
                       for r, sym in zip(rows, symbols)):
        return engine or None, None
    return engine or None, [{k: v for k, v in r.items() if k != "id"} for r in rows]
