"""Scenario files: a small TOML or JSON file names a generator, its parameters, a seed and the symbols.

A stored run keeps ``Scenario.describe()`` so it can say exactly what produced its flow; the same
description (or file) generates the same bytes again.

File format (TOML shown; JSON has the same keys)::

    name = "default"                 # optional; defaults to the file's stem
    description = "..."              # optional, free text
    generator = "uniform"            # a key of GENERATORS
    seed = 1                         # int >= 0
    [params]                         # keyword arguments of the generator (n, mix, sizes ...)
    n = 10_000
    [[symbols]]                      # one table per symbol, in symbol-id order (0, 1, ...)
    name = "JPM"
    tick_size = 0.01                 # price of one tick (the engine's prices are int ticks)
    mid = 10_000                     # optional: start mid in ticks, for generators that have one
    # optional engine options of the symbol (Engine.add_symbol; docs/semantics.md, "Symbols"):
    tick_table = [[1, 1], [10_000, 5]]   # (from_price, tick) rows, the first from price 1
    lot_size = 1                     # every quantity a multiple of it
    min_order_qty = 1                # NEW / MODIFY qty below it is rejected
    session_close = 75_600_000_000_000   # DAY orders end here: ns after midnight UTC
    currency = "USD"                 # money: backtests report PnL, fees, turnover in it
    tick_value = 0.01                # value of one tick on one lot, in currency
    maker_bps = -0.2                 # fee of a resting fill, bps of notional (negative: rebate)
    taker_bps = 0.5                  # fee of an aggressing fill
    [[symbols]]                      # ``count = k`` expands one table into k symbols
    name = "S"                       # named S000, S001, ... (zero-padded to the width of k-1)
    count = 100
    [venue]                          # optional: venue order types (scenarios.generators.venue_mix)
    stop_share = 0.1                 # share of NEW limits made stops / stop-limits
    iceberg_share = 0.1              # ... icebergs
    gtd_share = 0.1                  # ... GTD orders, living U(1, expire_max_ns) ns
    expire_max_ns = 10_000_000
    # per-symbol trading-phase options ([[symbols]] keys; docs/semantics.md, "Trading phases"):
    # reference_price = 10_000, static_band_bps = 1000, dynamic_band_bps = 100,
    # interruption_ns = 120_000_000_000, phase = "closed" (the phase the symbol starts in)
    [[schedule]]                     # optional: phase changes (scenarios/schedule.py)
    at = "08:50:00"                  # "HH:MM:SS[.fff]" after midnight, or ns
    phase = "pre_open"               # a Phase name; symbol, reference_price, end optional

Generation: the generator's flow, then (with a [venue] table) ``venue_mix`` seeded with the
scenario's seed and the table's keys (a key left out takes venue_mix's default), then (when a
symbol gives ``lot_size``, ``min_order_qty`` or ``tick_table``) ``scenarios.fit.fit_to_symbols``,
which rounds sizes up to the lot and minimum and moves prices onto the tick grid toward the
passive side, so the engine takes the messages instead of rejecting them. Then the schedule's
PHASE messages are merged in (``scenarios.schedule.merge_phases``: each before the flow messages
of its ts); a generator that takes a ``schedule`` argument (``trading_day``) gets them as an
ORDER_DTYPE array instead, shapes its flow around them and returns the merged day itself.

Invariants: symbols get engine ids in file order, so ``add_symbols`` on a fresh engine maps the
generator's symbol ids 0..k-1 onto them, with every engine option the file gives (an option the
file leaves out is the engine's default and is not passed, nor written by ``describe``, so files
without options describe and digest as before). A file is validated whole before anything is generated:
unknown keys, an unknown generator, a parameter the generator does not take or a bad symbol
option value raise InputError naming the file, the symbol table and the key (and the line, for
TOML syntax errors); so does a bad [venue] key or value, or a bad [[schedule]] entry (naming
``schedule[i]``). A file without [venue], [[schedule]], band options and without lot, minimum or
tick table generates, describes and digests as it did before these existed.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from exsim.exchange.errors import InputError, UsageError

from exsim.scenarios.schedule import BAND_OPTIONS, check_band_option, merge_phases, parse_schedule, phase_messages

__all__ = ["Scenario", "SymbolSpec", "load_scenario", "list_presets", "GENERATORS"]

# generator name -> (module, function). Each function takes (n, seed, n_symbols, **params) and
# returns an ORDER_DTYPE array; generators with a start mid also take mid_start.
GENERATORS: dict[str, tuple[str, str]] = {
    "uniform": ("exsim.scenarios.generators.uniform", "uniform_flow"),
    "zero_intelligence": ("exsim.scenarios.generators.zero_intelligence", "zi_flow"),
    "hawkes": ("exsim.scenarios.generators.hawkes", "hawkes_flow"),
    "trading_day": ("exsim.scenarios.generators.trading_day", "trading_day_flow"),
}

_TOP_KEYS = {"name", "description", "generator", "seed", "params", "symbols", "venue", "schedule"}
# the keys of a [venue] table (venue_mix's keyword arguments)
VENUE_KEYS = ("stop_share", "iceberg_share", "gtd_share", "expire_max_ns")
_SHARES = VENUE_KEYS[:3]
_FIT_OPTIONS = ("lot_size", "min_order_qty", "tick_table")
# the engine options of a symbol a file may give, in Engine.add_symbol's order
ENGINE_OPTIONS = ("tick_table", "lot_size", "min_order_qty", "session_close", "currency",
                  "tick_value", "maker_bps", "taker_bps", *BAND_OPTIONS)
_SYMBOL_KEYS = {"name", "tick_size", "mid", "count", *ENGINE_OPTIONS}
_DAY_NS = 86_400 * 10**9
_MAX_TICK_ROWS = 64


@dataclass(frozen=True)
class SymbolSpec:
    """One symbol of a scenario: engine name, tick size (price of one tick), optional start mid
    and the engine options the file gives (``options``: (key, value) pairs in ENGINE_OPTIONS
    order; a tick table as a tuple of (from_price, tick) pairs)."""

    name: str
    tick_size: float = 1
    mid: int | None = None
    options: tuple = ()

    def engine_options(self) -> dict:
        """Return the ``Engine.add_symbol`` keyword arguments of this symbol: name, tick_size
        and the options the file gives (a tick table as a list of (from_price, tick) tuples)."""
        out = {"name": self.name, "tick_size": self.tick_size}
        for key, value in self.options:
            out[key] = [tuple(r) for r in value] if key == "tick_table" else value
        return out

    def describe(self) -> dict:
        """Return the JSON-able table of this symbol (``Scenario.describe``'s "symbols" rows)."""
        d = {"name": self.name, "tick_size": self.tick_size, "mid": self.mid}
        for key, value in self.options:
            d[key] = [list(r) for r in value] if key == "tick_table" else value
        return d


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario: what to generate, from which seed, over which symbols."""

    name: str
    generator: str
    seed: int
    params: dict = field(default_factory=dict)
    symbols: tuple[SymbolSpec, ...] = ()
    description: str = ""
    source: str = ""
    venue: tuple | None = None   # the [venue] table's (key, value) pairs in VENUE_KEYS order
    schedule: tuple | None = None   # the [[schedule]] entries (scenarios.schedule.ScheduleEntry)

    def _function(self):
        mod, fn = GENERATORS[self.generator]
        return getattr(importlib.import_module(mod), fn)

    def generate(self) -> np.ndarray:
        """Return the scenario's order messages (ORDER_DTYPE); the same scenario gives the same bytes.

        Raises UsageError naming the scenario's source and the parameter when a parameter value is
        out of range.
        """
        kwargs = dict(self.params)
        mids = [s.mid for s in self.symbols]
        if any(m is not None for m in mids):
            if any(m is None for m in mids):
                raise InputError(f"{self.source or self.name}: give 'mid' for every symbol or for none")
            kwargs["mid_start"] = np.array(mids, np.int64)
        fn = self._function()
        takes_schedule = "schedule" in inspect.signature(fn).parameters
        phases = self.phase_messages()
        if takes_schedule and self.schedule is not None:
            kwargs["schedule"] = phases
        try:
            orders = fn(seed=self.seed, n_symbols=len(self.symbols), **kwargs)
        except UsageError as e:
            raise UsageError(f"{self.source or self.name}: [params]: {e}") from None
        if self.venue is not None:
            from exsim.scenarios.generators.venue_mix import venue_mix

            try:
                orders = venue_mix(orders, self.seed, **dict(self.venue))
            except UsageError as e:
                raise UsageError(f"{self.source or self.name}: [venue]: {e}") from None
        if any(k in _FIT_OPTIONS for s in self.symbols for k, _ in s.options):
            from exsim.scenarios.fit import fit_to_symbols

            orders = fit_to_symbols(orders, [s.engine_options() for s in self.symbols])
        if not takes_schedule:
            orders = merge_phases(orders, phases)
        return orders

    def phase_messages(self) -> np.ndarray:
        """Return the PHASE messages (ORDER_DTYPE, kind PHASE) of the scenario's schedule, in
        time order; empty without a schedule."""
        return phase_messages(self.schedule or (), [s.name for s in self.symbols])

    def add_symbols(self, engine) -> list[int]:
        """Register the scenario's symbols on ``engine`` in order; return their symbol ids."""
        return [engine.add_symbol(**s.engine_options()) for s in self.symbols]

    def describe(self) -> dict:
        """Return a JSON-serialisable description that regenerates this flow, with its sha256 digest."""
        d = {
            "name": self.name,
            "description": self.description,
            "generator": self.generator,
            "seed": self.seed,
            "params": dict(self.params),
            "symbols": [s.describe() for s in self.symbols],
            "source": self.source,
        }
        if self.venue is not None:   # absent otherwise, so older files describe and digest as before
            d["venue"] = dict(self.venue)
        if self.schedule is not None:
            d["schedule"] = [e.describe() for e in self.schedule]
        canon = {k: d[k] for k in ("generator", "seed", "params", "symbols", "venue", "schedule")
                 if k in d}
        d["sha256"] = hashlib.sha256(json.dumps(canon, sort_keys=True).encode()).hexdigest()
        return d

    @classmethod
    def from_dict(cls, data: dict, source: str = "<dict>") -> "Scenario":
        """Validate a scenario mapping (as read from a file or from ``describe()``) and return it.

        Raises InputError naming ``source`` and the offending key.
        """
        data = {k: v for k, v in data.items() if k not in ("sha256", "source")}
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise InputError(f"{source}: unknown key(s) {sorted(unknown)}; expected some of {sorted(_TOP_KEYS)}")
        gen = data.get("generator")
        if gen not in GENERATORS:
            raise InputError(f"{source}: key 'generator' should be one of {sorted(GENERATORS)}, got {gen!r}")
        seed = data.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise InputError(f"{source}: key 'seed' should be an integer >= 0, got {seed!r}")
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise InputError(f"{source}: key 'params' should be a table of generator arguments")
        symbols = _parse_symbols(data.get("symbols"), source)
        venue = _parse_venue(data["venue"], source) if "venue" in data else None
        schedule = (parse_schedule(data["schedule"], [s.name for s in symbols], source)
                    if "schedule" in data else None)
        sc = cls(name=str(data.get("name") or Path(source).stem), generator=gen, seed=seed,
                 params=dict(params), symbols=symbols, description=str(data.get("description", "")),
                 source=source, venue=venue, schedule=schedule)
        fn = sc._function()
        sig = inspect.signature(fn)
        taken = {name for name, p in sig.parameters.items() if p.kind != p.VAR_KEYWORD}
        # A generator that passes **kwargs on names the receiver in ``forwards_to``.
        if hasattr(fn, "forwards_to"):
            taken |= set(inspect.signature(fn.forwards_to).parameters)
        taken -= {"seed", "n_symbols", "mid_start", "schedule"}
        bad = set(params) - taken
        if bad:
            raise InputError(f"{source}: generator {gen!r} takes no parameter(s) {sorted(bad)}; "
                             f"it takes {sorted(taken)}")
        missing = [p.name for p in sig.parameters.values()
                   if p.default is inspect.Parameter.empty and p.kind != p.VAR_KEYWORD
                   and p.name not in params
                   and p.name not in ("seed", "n_symbols", "schedule")]
        if missing:
            raise InputError(f"{source}: generator {gen!r} needs parameter(s) {missing} in [params]")
        return sc


def _parse_symbols(raw, source: str) -> tuple[SymbolSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{source}: expected at least one [[symbols]] table with a 'name'")
    out: list[SymbolSpec] = []
    for i, s in enumerate(raw):
        where = f"{source}: symbols[{i}]"
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not s["name"]:
            raise InputError(f"{where}: expected a table with a non-empty string 'name'")
        unknown = set(s) - _SYMBOL_KEYS
        if unknown:
            raise InputError(f"{where}: unknown key(s) {sorted(unknown)}; expected some of {sorted(_SYMBOL_KEYS)}")
        tick = s.get("tick_size", 1)
        if not isinstance(tick, (int, float)) or isinstance(tick, bool) or tick <= 0:
            raise InputError(f"{where}: 'tick_size' should be a number > 0, got {tick!r}")
        mid = s.get("mid")
        if mid is not None and (not isinstance(mid, int) or mid < 1):
            raise InputError(f"{where}: 'mid' should be an integer number of ticks >= 1, got {mid!r}")
        count = s.get("count", 1)
        if not isinstance(count, int) or count < 1:
            raise InputError(f"{where}: 'count' should be an integer >= 1, got {count!r}")
        options = tuple((k, _symbol_option(k, s[k], where)) for k in ENGINE_OPTIONS if k in s)
        if "tick_value" in s and "currency" not in s:
            raise InputError(f"{where}: 'tick_value' is the value of a tick in 'currency'; "
                             f"give 'currency' too")
        if count == 1 and "count" not in s:
            out.append(SymbolSpec(s["name"], tick, mid, options))
        else:
            width = len(str(count - 1))
            out.extend(SymbolSpec(f"{s['name']}{k:0{width}d}", tick, mid, options)
                       for k in range(count))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise InputError(f"{source}: symbol names must be unique")
    return tuple(out)


def _parse_venue(raw, source: str) -> tuple:
    """Return the checked (key, value) pairs of a [venue] table in VENUE_KEYS order.
    Raises InputError naming ``source`` and the key for an unknown key or a bad value."""
    where = f"{source}: [venue]"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a table of {', '.join(VENUE_KEYS)}; got {raw!r}")
    unknown = set(raw) - set(VENUE_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {sorted(unknown)}; expected some of "
                         f"{list(VENUE_KEYS)}")
    for key in _SHARES:
        if key in raw and not (_is_number(raw[key]) and 0 <= raw[key] <= 1):
            raise InputError(f"{where}: {key!r} should be a number in [0, 1], got {raw[key]!r}")
    from exsim.scenarios.generators.venue_mix import venue_mix

    defaults = {k: p.default for k, p in inspect.signature(venue_mix).parameters.items()}
    total = sum(raw.get(k, defaults[k]) for k in _SHARES)
    if total > 1:
        raise InputError(f"{where}: 'stop_share' + 'iceberg_share' + 'gtd_share' (a key left "
                         f"out takes venue_mix's default) should be <= 1, got {total}")
    if "expire_max_ns" in raw and not (_is_int(raw["expire_max_ns"])
                                       and 1 <= raw["expire_max_ns"] < 2**62):
        raise InputError(f"{where}: 'expire_max_ns' should be an integer number of ns in "
                         f"[1, 2^62), got {raw['expire_max_ns']!r}")
    return tuple((k, raw[k]) for k in VENUE_KEYS if k in raw)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _symbol_option(key: str, value, where: str):
    """Return the checked value of engine option ``key`` of a [[symbols]] table (a tick table as
    a tuple of (from_price, tick) int pairs). Raises InputError naming ``where`` and ``key``
    for a value the engine would refuse."""
    def bad(expected: str):
        return InputError(f"{where}: {key!r} should be {expected}, got {value!r}")

    if key in BAND_OPTIONS:
        return check_band_option(key, value, where)
    if key == "tick_table":
        if not isinstance(value, list) or not 1 <= len(value) <= _MAX_TICK_ROWS:
            raise bad(f"a list of 1 to {_MAX_TICK_ROWS} [from_price, tick] pairs")
        rows = []
        for r in value:
            if not (isinstance(r, list) and len(r) == 2 and all(_is_int(x) for x in r)
                    and r[1] >= 1):
                raise bad("a list of [from_price, tick] integer pairs with tick >= 1")
            rows.append((r[0], r[1]))
        froms = [r[0] for r in rows]
        if froms[0] != 1 or any(b <= a for a, b in zip(froms, froms[1:])):
            raise bad("rows whose from_price starts at 1 and strictly increases")
        return tuple(rows)
    if key in ("lot_size", "min_order_qty"):
        if not _is_int(value) or value < 1:
            raise bad("an integer >= 1")
        return value
    if key == "session_close":
        if not _is_int(value) or not 0 <= value < _DAY_NS:
            raise bad(f"an integer number of ns after midnight UTC in [0, {_DAY_NS})")
        return value
    if key == "currency":
        if not isinstance(value, str) or not value or not value.isprintable() or value != value.strip():
            raise bad("a non-empty currency code such as \"USD\"")
        return value
    if key == "tick_value":
        if not _is_number(value) or value <= 0:
            raise bad("a number > 0 (value of one tick on one lot, in the currency)")
        return value
    if not _is_number(value):   # maker_bps, taker_bps
        raise bad("a finite number of basis points (negative: a rebate)")
    return value


def _preset_dir():
    return resources.files("exsim.scenarios") / "presets"


def list_presets() -> list[str]:
    """Return the names of the scenario files shipped in ``scenarios/presets`` (sorted)."""
    return sorted(p.name.rsplit(".", 1)[0] for p in _preset_dir().iterdir()
                  if p.name.endswith((".toml", ".json")))


def load_scenario(path_or_name: str | os.PathLike) -> Scenario:
    """Read a scenario file (``.toml`` or ``.json``), or a preset by name (see ``list_presets``).

    Returns a Scenario. Raises InputError when the file does not exist, is not valid TOML/JSON
    (the message carries the parser's line and column) or does not describe a valid scenario.
    """
    p = Path(os.fspath(path_or_name))
    if not p.suffix and not p.exists():
        for ext in (".toml", ".json"):
            cand = _preset_dir() / f"{p.name}{ext}"
            if cand.is_file():
                p = Path(str(cand))
                break
        else:
            raise InputError(f"{path_or_name}: no such scenario file or preset (presets: {list_presets()})")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot read scenario file ({exc})") from exc
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {exc}") from exc
    return Scenario.from_dict(data, source=str(p))
