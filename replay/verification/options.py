"""What verify's checks need of a run's engine config, per symbol, and how it reaches the kernel.

``_options_by_symbol`` reads an engine config (``Engine.config()``, recorded in the catalog)
into one ``_SymbolOptions`` per symbol id: the ``ownership`` option (the engine's; absent: off,
as for runs written before it existed) and the symbol's tick table, lot size, minimum order
quantity, session close and phase options (``replay.verification.phases.PhaseOptions``). A
symbol entry without them has the defaults (every price, lot 1, minimum 1, session close
midnight UTC, CONTINUOUS without bands); the key ``None`` holds the options of symbols the
config does not list. ``configure`` writes a symbol's options into a kernel state.

Invariant: every value is checked as it is read; a malformed one raises the ``error`` the caller
names (UsageError for ``verify_arrays``' argument, CorruptionError for a stored run's config),
naming where it was found, so the kernels only ever see valid tables and sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exsim.exchange.schema import MAX_PRICE

from exsim.replay.verification.book import MAX_TICK_ROWS, set_config
from exsim.replay.verification.phases import PhaseOptions, phase_options
from exsim.replay.verification.rules import DAY_NS

__all__ = ["configure"]


@dataclass(frozen=True)
class _SymbolOptions:
    """What the checks need of a symbol's engine options (docs/semantics.md "Symbols" and
    "Trading phases")."""

    ownership: bool = False
    tick_table: tuple = ((1, 1),)
    lot_size: int = 1
    min_order_qty: int = 1
    session_close: int = 0
    phase: PhaseOptions = PhaseOptions()


def configure(state: tuple, options: "_SymbolOptions | None") -> None:
    """Write a symbol's options into a kernel state (None: leave the defaults). Returns None."""
    if options is not None:
        set_config(state, options.ownership, options.tick_table, options.lot_size,
                     options.min_order_qty, options.session_close)


def _int_option(entry: dict, key: str, default: int, lo: int, hi: int, error, where: str) -> int:
    value = entry.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not lo <= int(value) <= hi:
        raise error(f"{where}: {key} must be an integer in [{lo}, {hi}]; got {value!r}")
    return int(value)


def _symbol_options(entry, ownership: bool, error, where: str) -> _SymbolOptions:
    """The options of one symbol entry of an engine config; ``error`` (UsageError or
    CorruptionError) for a malformed one, naming ``where``."""
    if not isinstance(entry, dict):
        raise error(f"{where}: a symbol entry must be a mapping; got {entry!r}")
    rows = entry.get("tick_table") or [(1, 1)]
    try:
        table = tuple((int(a), int(b)) for a, b in rows)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for row in rows for v in row):
            raise TypeError
    except (TypeError, ValueError):
        raise error(f"{where}: tick_table must be rows (from_price, tick); got {rows!r}") from None
    froms = [a for a, _ in table]
    if not (1 <= len(table) <= MAX_TICK_ROWS and froms[0] == 1 and
            all(a < b for a, b in zip(froms, froms[1:])) and froms[-1] <= MAX_PRICE and
            all(1 <= t <= MAX_PRICE for _, t in table)):
        raise error(f"{where}: tick_table must have 1..{MAX_TICK_ROWS} rows, from_price "
                    f"strictly increasing from 1 and every tick >= 1; got {rows!r}")
    return _SymbolOptions(bool(ownership), table,
                          _int_option(entry, "lot_size", 1, 1, MAX_PRICE, error, where),
                          _int_option(entry, "min_order_qty", 1, 1, MAX_PRICE, error, where),
                          _int_option(entry, "session_close", 0, 0, DAY_NS - 1, error, where),
                          phase_options(entry, error, where))


def _options_by_symbol(config, error, where: str) -> dict:
    """Symbol id -> _SymbolOptions from an engine config (``Engine.config()``); {} for None.

    The ``ownership`` key absent means off (configs written before the option existed)."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise error(f"{where}: the engine config must be a mapping; got {type(config).__name__}")
    ownership = config.get("ownership", False)
    if not isinstance(ownership, (bool, np.bool_)):
        raise error(f"{where}: ownership must be true or false; got {ownership!r}")
    out = {}
    for j, entry in enumerate(config.get("symbols") or []):
        sid = entry.get("id", j) if isinstance(entry, dict) else j
        if isinstance(sid, bool) or not isinstance(sid, (int, np.integer)):
            raise error(f"{where}: symbol entry {j} has id {sid!r}, not an integer")
        name = entry.get("name", sid) if isinstance(entry, dict) else sid
        out[int(sid)] = _symbol_options(entry, bool(ownership), error, f"{where}, symbol {name}")
    out[None] = _SymbolOptions(bool(ownership))     # symbols the config does not list
    return out
