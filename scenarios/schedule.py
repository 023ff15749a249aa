"""Trading-phase schedules: a scenario's ``[[schedule]]`` entries and its symbols' band options
become PHASE messages (ORDER_DTYPE rows with ``kind = Kind.PHASE``) merged into the flow.

A schedule entry (TOML shown; JSON has the same keys)::

    [[schedule]]
    at = "08:50:00"            # "HH:MM:SS[.fffffffff]" after midnight, or an int of ns
    phase = "pre_open"         # a Phase name, any case (exchange/schema.py)
    symbol = "JPM"             # optional: one symbol; without it, every symbol in id order
    reference_price = 10_000   # optional: the new reference price in ticks (0 or absent: keep)
    end = "12:02:00"           # optional, phase = "reopening_auction" only: when it uncrosses

One entry is one PHASE message per symbol it names: ``ts = at``, ``phase``, ``price =
reference_price``, ``expire_ts = end`` (docs/semantics.md, "PHASE messages"); every other field 0.

Invariants:
- Entries are in time order in the file (equal times keep file order); a PHASE message goes
  before every flow message of the same ts, and the flow's own order is never changed
  (``merge_phases`` inserts, it does not sort).
- A bad entry (unknown key or phase, a time that is not HH:MM:SS or a non-negative ns count,
  times out of order, an unknown symbol, a negative reference price, an ``end`` on another
  phase or not after ``at``) raises InputError naming the file and the entry (``schedule[i]``).
- The symbol band options a [[symbols]] table may give (``BAND_OPTIONS``) are checked here and
  passed to ``Engine.add_symbol`` unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from exsim.exchange.errors import InputError
from exsim.exchange.schema import ORDER_DTYPE, Kind, Phase

__all__ = ["ScheduleEntry", "parse_schedule", "phase_messages", "merge_phases", "parse_time",
           "BAND_OPTIONS", "check_band_option", "RESTING_PHASES", "format_time"]

DAY_NS = 86_400 * 10**9
_TIME = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
_ENTRY_KEYS = {"at", "phase", "symbol", "reference_price", "end"}
# the symbol options of issue 16, in Engine.add_symbol's order
BAND_OPTIONS = ("reference_price", "static_band_bps", "dynamic_band_bps", "interruption_ns",
                "phase")
# the phases a symbol can be in (OPENING_AUCTION and CLOSING_AUCTION are targets only)
RESTING_PHASES = tuple(p for p in Phase if p not in (Phase.OPENING_AUCTION, Phase.CLOSING_AUCTION))


@dataclass(frozen=True)
class ScheduleEntry:
    """One checked schedule entry: ``at`` and ``end`` in ns after midnight, ``symbol`` a name
    (None: every symbol), ``reference_price`` in ticks (0: keep)."""

    at: int
    phase: Phase
    symbol: str | None = None
    reference_price: int = 0
    end: int = 0

    def describe(self) -> dict:
        """Return the JSON-able table of this entry (times as ns; absent optional keys left out)."""
        d = {"at": self.at, "phase": self.phase.name.lower()}
        if self.symbol is not None:
            d["symbol"] = self.symbol
        if self.reference_price:
            d["reference_price"] = self.reference_price
        if self.end:
            d["end"] = self.end
        return d


def parse_time(value, where: str) -> int:
    """Return ``value`` ("HH:MM:SS[.f...]" with up to 9 fractional digits, or an int of ns) as
    ns after midnight. Raises InputError naming ``where`` for anything else, or a time outside
    one day (strings) or below 0 / at or above 2^62 (ints)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 2**62:
            raise InputError(f"{where}: a time in ns should be in [0, 2^62), got {value}")
        return value
    if isinstance(value, str):
        m = _TIME.match(value.strip())
        if m:
            h, mi, s = int(m[1]), int(m[2]), int(m[3])
            frac = int((m[4] or "").ljust(9, "0"))
            if h < 24 and mi < 60 and s < 60:
                return ((h * 60 + mi) * 60 + s) * 10**9 + frac
    raise InputError(f"{where}: expected a time \"HH:MM:SS[.fff]\" (after midnight) or an "
                     f"integer number of ns, got {value!r}")


def format_time(ns: int) -> str:
    """Return ns after midnight as "HH:MM:SS" (with ".fffffffff" when not whole seconds)."""
    s, frac = divmod(int(ns), 10**9)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return f"{h:02d}:{m:02d}:{s:02d}" + (f".{frac:09d}" if frac else "")


def _phase(value, where: str, allowed=tuple(Phase)) -> Phase:
    names = [p.name.lower() for p in allowed]
    if isinstance(value, str) and value.upper() in Phase.__members__ \
            and Phase[value.upper()] in allowed:
        return Phase[value.upper()]
    raise InputError(f"{where}: 'phase' should be one of {', '.join(names)}, got {value!r}")


def check_band_option(key: str, value, where: str):
    """Return the checked value of band option ``key`` of a [[symbols]] table (``phase`` as its
    lower-case name). Raises InputError naming ``where`` and ``key`` for a value the engine
    would refuse."""
    if key == "phase":
        return _phase(value, f"{where}: key", RESTING_PHASES).name.lower()
    ok = isinstance(value, int) and not isinstance(value, bool)
    if key == "interruption_ns":
        if not (ok and 1 <= value < 2**62):
            raise InputError(f"{where}: 'interruption_ns' should be an integer number of ns "
                             f">= 1, got {value!r}")
        return value
    if key in ("static_band_bps", "dynamic_band_bps"):
        if not (ok and 0 <= value <= 10_000):
            raise InputError(f"{where}: {key!r} should be an integer number of basis points in "
                             f"[0, 10000] (0: no band), got {value!r}")
        return value
    if not (ok and 0 <= value < 2**62):   # reference_price
        raise InputError(f"{where}: 'reference_price' should be an integer number of ticks "
                         f">= 0 (0: none), got {value!r}")
    return value


def parse_schedule(raw, symbols: list[str], source: str) -> tuple[ScheduleEntry, ...]:
    """Return the checked entries of a scenario's ``schedule`` list (see the module docstring).

    ``symbols`` are the scenario's symbol names. Raises InputError naming ``source`` and the
    entry for a bad entry, or for entries out of time order.
    """
    if not isinstance(raw, list):
        raise InputError(f"{source}: 'schedule' should be a list of [[schedule]] tables")
    out: list[ScheduleEntry] = []
    for i, e in enumerate(raw):
        where = f"{source}: schedule[{i}]"
        if not isinstance(e, dict):
            raise InputError(f"{where}: expected a table with 'at' and 'phase', got {e!r}")
        unknown = set(e) - _ENTRY_KEYS
        if unknown:
            raise InputError(f"{where}: unknown key(s) {sorted(unknown)}; expected some of "
                             f"{sorted(_ENTRY_KEYS)}")
        for key in ("at", "phase"):
            if key not in e:
                raise InputError(f"{where}: missing key {key!r}")
        at = parse_time(e["at"], f"{where}: 'at'")
        phase = _phase(e["phase"], where)
        sym = e.get("symbol")
        if sym is not None and sym not in symbols:
            raise InputError(f"{where}: unknown symbol {sym!r}; the scenario's symbols are "
                             f"{symbols}")
        ref = e.get("reference_price", 0)
        if not (isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < 2**62):
            raise InputError(f"{where}: 'reference_price' should be an integer number of ticks "
                             f">= 0 (0: keep the current one), got {ref!r}")
        end = 0
        if "end" in e:
            if phase != Phase.REOPENING_AUCTION:
                raise InputError(f"{where}: 'end' applies to phase reopening_auction only "
                                 f"(when it uncrosses), not to {phase.name.lower()}")
            end = parse_time(e["end"], f"{where}: 'end'")
            if end <= at:
                raise InputError(f"{where}: 'end' ({e['end']!r}) should be after 'at' "
                                 f"({e['at']!r})")
        if out and at < out[-1].at:
            raise InputError(f"{where}: 'at' {e['at']!r} is before the previous entry's "
                             f"({format_time(out[-1].at)}); entries must be in time order")
        out.append(ScheduleEntry(at, phase, sym, ref, end))
    return tuple(out)


def phase_messages(entries, symbols: list[str]) -> np.ndarray:
    """Return the PHASE messages of ``entries`` (ScheduleEntry), in entry order (an entry without
    a symbol gives one message per symbol, in id order), as ORDER_DTYPE rows."""
    rows = [(e, k) for e in entries
            for k in ([symbols.index(e.symbol)] if e.symbol is not None else range(len(symbols)))]
    out = np.zeros(len(rows), ORDER_DTYPE)
    for j, (e, k) in enumerate(rows):
        out[j]["ts"] = e.at
        out[j]["symbol"] = k
        out[j]["kind"] = Kind.PHASE
        out[j]["phase"] = e.phase
        out[j]["price"] = e.reference_price
        out[j]["expire_ts"] = e.end
    return out


def merge_phases(flow: np.ndarray, phases: np.ndarray) -> np.ndarray:
    """Return ``flow`` with the PHASE rows ``phases`` (in ts order) inserted: each before the
    first flow message whose ts is at or after its own, so it goes before the flow messages of
    its ts; the flow's own order is kept. ``flow`` is assumed sorted by ts (generators are)."""
    if not len(phases):
        return flow
    at = np.searchsorted(flow["ts"], phases["ts"], side="left")
    return np.insert(flow, at, phases)
