"""A single engine's configuration: its options (stp, ownership) and its symbols.

``Configuration`` is a part of ``exchange.single.SingleEngine``: ``add_symbol`` checks a
symbol's options (``symbol_options.normalize``, the price band, the tick size) and appends its
rows to the book, stop-book and symbol arrays; ``config()`` returns all of it as JSON-able data
and ``build_from_config`` builds an engine back from that data (for ``from_config`` of every
engine class).

Invariants:
- Symbol ids are 0, 1, 2 ... in the order of adding; names are distinct; a symbol is never
  removed or changed once added.
- ``config()`` holds everything an engine's behaviour depends on but its orders and counters:
  ``from_config(e.config())`` matches every later message as ``e`` would from empty. How an
  engine runs (``threads``, ``prefetch_distance``) is not in it.
- A symbol's kernel row is a function of its normalized options alone (``_set_symbol_row``), so
  ``add_symbol`` and restoring a checkpoint write the same row.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import checkpoint as ckpt
from .arguments import I64, int_arg, is_bool
from .book import M_NSYM, M_OWNERSHIP, M_STP
from .checkpoint import positive_number as _positive_number
from .errors import UsageError
from .schema import MAX_PRICE, Phase, Stp
from .state import grow_array as _grow
from .state_growth import INITIAL_LADDER
from .symbol_options import OPTIONS as _OPTIONS
from .symbol_options import PHASE_OPTIONS as _PHASE_OPTIONS
from .symbol_options import OptionError, normalize as _normalize_options, phase_option

__all__ = ["Configuration", "build_from_config"]


def _tick_arg(tick_size, name) -> int | float:
    """Return ``tick_size`` as a plain int or float (JSON-able), or raise UsageError unless it
    is a finite real number > 0."""
    tick = None
    if isinstance(tick_size, numbers.Real) and not is_bool(tick_size):
        try:
            tick = int(tick_size) if isinstance(tick_size, numbers.Integral) else float(tick_size)
        except (OverflowError, ValueError):
            tick = None
    if not _positive_number(tick):
        raise UsageError(f"tick_size must be a finite number > 0; got {tick_size!r} for {name!r}")
    return tick


def build_from_config(make, cfg: dict):
    """Return a fresh engine (no orders) with the options and symbols of ``cfg`` (what
    ``config()`` returns, or one written before some options existed: a missing symbol
    option takes its default and a missing "ownership" is False, as the engine behaved before
    the option existed), made by ``make(stp=..., ownership=...)`` (an engine class, or one with
    its other arguments bound).

    Raises UsageError naming the key for anything else: a non-dict, an unknown or missing
    key, an id out of order, or a value ``add_symbol`` or ``make`` refuses."""
    if not isinstance(cfg, dict):
        raise UsageError(f"from_config takes a dict (Engine.config()); got "
                         f"{type(cfg).__name__}")
    extra = sorted(str(k) for k in cfg.keys() - {"stp", "ownership", "symbols"})
    if extra:
        raise UsageError(f"config has unknown key {extra[0]!r}")
    for key in ("stp", "symbols"):
        if key not in cfg:
            raise UsageError(f"config lacks key {key!r}")
    if not isinstance(cfg["symbols"], list):
        raise UsageError(f"config key 'symbols' must be a list; got {cfg['symbols']!r}")
    eng = make(stp=cfg["stp"], ownership=cfg.get("ownership", False))
    known = {"name", "id", "tick_size", "min_price", "max_price", *_OPTIONS, *_PHASE_OPTIONS}
    for k, sym in enumerate(cfg["symbols"]):
        if not isinstance(sym, dict):
            raise UsageError(f"config symbols[{k}] must be a dict; got {sym!r}")
        extra = sorted(str(x) for x in sym.keys() - known)
        if extra:
            raise UsageError(f"config symbols[{k}] has unknown key {extra[0]!r}")
        if "name" not in sym:
            raise UsageError(f"config symbols[{k}] lacks key 'name'")
        if sym.get("id", k) != k or is_bool(sym.get("id", k)):
            raise UsageError(f"config symbols[{k}] key 'id' must be {k} (symbols in id "
                             f"order); got {sym['id']!r}")
        eng.add_symbol(**{x: v for x, v in sym.items() if x != "id"})
    return eng


class Configuration:
    """The options and symbols of ``SingleEngine`` (see the module)."""

    def add_symbol(self, name: str, tick_size: float = 1, min_price: int = 1,
                   max_price: int = MAX_PRICE, *, tick_table=None, lot_size: int = 1,
                   min_order_qty: int = 1, session_close: int = 0, currency: str = "",
                   tick_value: float | None = None, maker_bps: float = 0.0,
                   taker_bps: float = 0.0, reference_price: int = 0, static_band_bps: int = 0,
                   dynamic_band_bps: int = 0, interruption_ns: int = 120_000_000_000,
                   phase: str | int = "continuous") -> int:
        """Add a symbol and return its id (0, 1, 2 ... in order of adding).

        ``tick_size`` is kept as metadata for converting prices at the edges; the engine itself
        works in integer ticks. ``min_price``/``max_price`` bound accepted prices (ticks).
        ``tick_table`` (rows ``(from_price, tick)``; None: ``[(1, 1)]``), ``lot_size``,
        ``min_order_qty`` and ``session_close`` (ns after midnight UTC) decide what the engine
        accepts and when DAY orders expire; ``currency``, ``tick_value``, ``maker_bps`` and
        ``taker_bps`` are money metadata for backtests (docs/semantics.md, "Symbols").
        ``reference_price`` (0: none), ``static_band_bps``, ``dynamic_band_bps`` (0: no band),
        ``interruption_ns`` (the length of a re-opening auction a band breach starts) and
        ``phase`` (the Phase the symbol starts in, a name or code; a call starts with its
        auction pending) are the trading-phase options (docs/semantics.md, Trading phases).
        Raises UsageError naming the symbol and the option for a duplicate name, a tick size
        that is not a finite number > 0, bounds that are not integers, an empty or inverted
        price band, or any option ``symbol_options.normalize`` refuses.
        """
        if not isinstance(name, str) or not name:
            raise UsageError(f"symbol name must be a non-empty string; got {name!r}")
        if name in self._ids:
            raise UsageError(f"symbol {name!r} already added (id {self._ids[name]})")
        opts = dict(lot_size=lot_size, min_order_qty=min_order_qty, session_close=session_close,
                    currency=currency, tick_value=tick_value, maker_bps=maker_bps,
                    taker_bps=taker_bps, reference_price=reference_price,
                    static_band_bps=static_band_bps, dynamic_band_bps=dynamic_band_bps,
                    interruption_ns=interruption_ns, phase=phase)
        if tick_table is not None:
            opts["tick_table"] = tick_table
        try:
            opts = _normalize_options(opts, name)
        except OptionError as e:
            raise UsageError(str(e)) from None
        lo = int_arg(min_price, f"min_price of {name!r}", *I64)
        hi = int_arg(max_price, f"max_price of {name!r}", *I64)
        if not (1 <= lo <= hi <= MAX_PRICE):
            raise UsageError(
                f"price band must satisfy 1 <= min_price <= max_price <= {MAX_PRICE}; "
                f"got [{min_price}, {max_price}] for {name!r}")
        if not lo <= phase_option(opts, "reference_price") <= hi and opts.get("reference_price"):
            raise UsageError(f"reference_price of {name!r} must be 0 (none) or in [min_price, "
                             f"max_price] = [{lo}, {hi}]; got {reference_price!r}")
        ref = phase_option(opts, "reference_price")
        if ref and ref % [t for f, t in opts["tick_table"] if f <= ref][-1]:
            raise UsageError(f"reference_price of {name!r} is off its tick table "
                             f"{opts['tick_table']}; got {reference_price!r}")
        tick = _tick_arg(tick_size, name)
        sid = len(self._names)
        if 2 * sid + 2 > len(self._book_rows):
            self._book_rows = _grow(self._book_rows[: 2 * sid], 2 * sid + 2)
            self._stop_rows = _grow(self._stop_rows[: 2 * sid], 2 * sid + 2)
            self._symbol_rows = _grow(self._symbol_rows[:sid], sid + 1)
            self._books = self._book_rows[: 2 * sid]
            self._stops = self._stop_rows[: 2 * sid]
        # before the new rows: a repack moves regions
        off = self._alloc_ladder(4 * INITIAL_LADDER)
        self._books = self._book_rows[: 2 * sid + 2]
        self._stops = self._stop_rows[: 2 * sid + 2]
        self._symbols = self._symbol_rows[: sid + 1]
        for rows, at in ((self._books[2 * sid:], off), (self._stops[2 * sid:],
                                                         off + 2 * INITIAL_LADDER)):
            rows["min_price"] = lo
            rows["max_price"] = hi
            rows["off"] = [at, at + INITIAL_LADDER]
            rows["cap"] = INITIAL_LADDER
        self._set_symbol_row(sid, opts)
        self._names.append(name)
        self._ids[name] = sid
        self._tick_sizes.append(tick)
        self._options.append(opts)
        self._meta[M_NSYM] = len(self._names)
        return sid

    def _set_symbol_row(self, sid: int, opts: dict) -> None:
        """Write symbol ``sid``'s kernel row from its normalized options ``opts`` and append its
        tick table to ``ticks`` (the last trade price is left as it is)."""
        table = opts["tick_table"]
        n = len(table)
        if self._ticks_used + n > len(self._ticks):
            self._ticks = _grow(self._ticks[: self._ticks_used], self._ticks_used + n)
        at = self._ticks_used
        self._ticks["from_price"][at: at + n] = [r[0] for r in table]
        self._ticks["tick"][at: at + n] = [r[1] for r in table]
        self._ticks_used += n
        row = self._symbols[sid]
        row["lot_size"], row["min_order_qty"], row["session_close"] = (
            opts["lot_size"], opts["min_order_qty"], opts["session_close"])
        row["tick_off"], row["tick_n"] = at, n
        # the phase state a symbol starts with; a checkpoint overwrites it with the saved one
        phase = Phase[phase_option(opts, "phase").upper()]
        for key in ("reference_price", "static_band_bps", "dynamic_band_bps", "interruption_ns"):
            row[key] = phase_option(opts, key)
        row["phase"] = int(phase)
        row["auction"] = int(ckpt.CALL_AUCTION.get(phase, 0))
        row["auction_end"] = row["ind_price"] = row["ind_qty"] = row["ind_surplus"] = 0

    def symbol_id(self, symbol: str | int) -> int:
        """Return the id of ``symbol`` (a name or an id). Raises UsageError if unknown."""
        if type(symbol) is str:
            sid = self._ids.get(symbol)
            if sid is not None:
                return sid
        if isinstance(symbol, (int, np.integer)) and not is_bool(symbol) \
                and 0 <= symbol < len(self._names):
            return int(symbol)
        if isinstance(symbol, str) and symbol in self._ids:
            return self._ids[symbol]
        known = ", ".join(self._names[:10]) + (f" ... ({len(self._names)})"
                                               if len(self._names) > 10 else "")
        raise UsageError(f"unknown symbol {symbol!r}; known: {known or 'none'}")

    @property
    def symbols(self) -> dict[str, int]:
        """Symbol names mapped to ids, in id order."""
        return dict(self._ids)

    @property
    def stp(self) -> str:
        """The self-trade prevention mode's name."""
        return Stp(int(self._meta[M_STP])).name.lower()

    @property
    def ownership(self) -> bool:
        """Whether a CANCEL or MODIFY from a trader other than the order's is refused."""
        return bool(self._meta[M_OWNERSHIP])

    def config(self) -> dict:
        """Return the engine's options and symbols as a JSON-able dict (enough to rebuild it
        with ``Engine.from_config``): "stp", "ownership" and per symbol its name, id,
        tick_size, min_price, max_price and every ``add_symbol`` option (the trading-phase
        options only where they differ from their defaults, see ``symbol_options``)."""
        return {
            "stp": self.stp,
            "ownership": self.ownership,
            "symbols": [
                {"name": n, "id": i, "tick_size": self._tick_sizes[i],
                 "min_price": int(self._books[2 * i]["min_price"]),
                 "max_price": int(self._books[2 * i]["max_price"]),
                 **{k: (list(map(list, v)) if k == "tick_table" else v)
                    for k, v in self._options[i].items()}}
                for i, n in enumerate(self._names)
            ],
        }

    @classmethod
    def from_config(cls, cfg: dict) -> "Configuration":
        """Return a fresh engine of this class with the options and symbols of ``cfg``
        (``build_from_config``: what it takes and raises)."""
        return build_from_config(cls, cfg)
