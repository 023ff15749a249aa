"""A symbol's trading options (tick table, lot size, minimum order quantity, session close,
money, trading phases and price bands) and the one check of them that ``Engine.add_symbol``, ``Engine.from_config`` and the
checkpoint parser share.

docs/semantics.md ("Symbols") states the rules. ``normalize`` returns the options in canonical
JSON-able form (the form ``Engine.config()`` and checkpoint headers carry) or raises
``OptionError`` naming the option; callers word it as their own error (UsageError for a caller's
argument, CorruptionError for a stored header).

Invariants: ``normalize(normalize(x)) == normalize(x)``; ``DEFAULTS`` is the normal form of a
symbol added with no options (the engine's behaviour before these options existed).
"""

from __future__ import annotations

import math
import numbers

from .schema import MAX_PRICE, Phase

__all__ = ["OPTIONS", "DEFAULTS", "PHASE_OPTIONS", "PHASE_DEFAULTS", "MAX_BAND_BPS",
           "phase_option", "MAX_TICK_ROWS", "DAY_NS", "MAX_CURRENCY_LEN", "OptionError",
           "normalize", "is_default"]

MAX_TICK_ROWS = 64            # rows of one symbol's tick table
DAY_NS = 86_400 * 10 ** 9     # session_close lies in [0, DAY_NS)
MAX_CURRENCY_LEN = 16         # "USD", "USDT", "EUR" ...: a short code, not a description
MAX_BPS = 10_000              # |maker_bps|, |taker_bps| < 100 %

MAX_BAND_BPS = 10_000         # a band's half-width is at most 100 % of its centre
INTERRUPTION_NS = 120 * 10 ** 9   # default length of a re-opening auction after a band breach

DEFAULTS = {"tick_table": [[1, 1]], "lot_size": 1, "min_order_qty": 1, "session_close": 0,
            "currency": "", "tick_value": None, "maker_bps": 0.0, "taker_bps": 0.0}
OPTIONS = tuple(DEFAULTS)

# the trading-phase options (docs/semantics.md, Trading phases); ``phase`` is the phase the
# symbol starts in, by its lower-case name. The normal form leaves out each one at its default,
# so the options (and the configs and checkpoint headers that carry them) of a symbol that does
# not use phases are exactly those written before phases existed.
PHASE_DEFAULTS = {"reference_price": 0, "static_band_bps": 0, "dynamic_band_bps": 0,
                  "interruption_ns": INTERRUPTION_NS, "phase": "continuous"}
PHASE_OPTIONS = tuple(PHASE_DEFAULTS)


class OptionError(ValueError):
    """A symbol option is invalid; ``option`` names it and the message says why."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def _int(value, option: str, lo: int, hi: int, what: str) -> int:
    """Return ``value`` as an int in [lo, hi] (ints, numpy integers, integral finite floats;
    never bool), or raise OptionError."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and type(value).__name__ != "bool_":
        v = int(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) \
            and math.isfinite(value) and float(value).is_integer():
        v = int(value)
    else:
        raise OptionError(option, f"{what} must be an integer; got {value!r}")
    if not lo <= v <= hi:
        raise OptionError(option, f"{what} must be in [{lo}, {hi}]; got {value!r}")
    return v


def _real(value, option: str, what: str) -> int | float:
    """Return ``value`` as a finite plain int or float (not bool), or raise OptionError."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) \
            and type(value).__name__ != "bool_":
        v = int(value) if isinstance(value, numbers.Integral) else float(value)
        if math.isfinite(v):
            return v
    raise OptionError(option, f"{what} must be a finite number; got {value!r}")


def _tick_table(table, where: str) -> list:
    what = f"tick_table{where}"
    try:
        rows = list(table)
    except TypeError:
        raise OptionError("tick_table", f"{what} must be a list of (from_price, tick) rows; "
                                        f"got {table!r}") from None
    if not 1 <= len(rows) <= MAX_TICK_ROWS:
        raise OptionError("tick_table", f"{what} must have 1 to {MAX_TICK_ROWS} rows; "
                                        f"got {len(rows)}")
    out = []
    for k, row in enumerate(rows):
        try:
            pair = list(row)
        except TypeError:
            pair = None
        if pair is None or len(pair) != 2 or isinstance(row, (str, bytes)):
            raise OptionError("tick_table", f"{what} row {k} must be a (from_price, tick) pair; "
                                            f"got {row!r}")
        lo = _int(pair[0], "tick_table", 1, MAX_PRICE, f"{what} row {k} from_price")
        tick = _int(pair[1], "tick_table", 1, MAX_PRICE, f"{what} row {k} tick")
        if k == 0 and lo != 1:
            raise OptionError("tick_table", f"{what} row 0 must start at from_price 1; got {lo}")
        if k and lo <= out[-1][0]:
            raise OptionError("tick_table", f"{what} row {k} from_price {lo} must be above row "
                                            f"{k - 1}'s {out[-1][0]}")
        out.append([lo, tick])
    return out


def normalize(options: dict, name: str = "") -> dict:
    """Return every option of ``OPTIONS`` in canonical form, missing ones at their default, and
    the options of ``PHASE_OPTIONS`` that differ from their default (``phase_option`` reads them).

    ``name`` (the symbol's) goes into the messages. Raises OptionError naming the first bad
    option: an unknown key; a tick table that is not 1..64 rows (from_price, tick) of integers
    with the first from_price 1, from_prices strictly increasing and every tick >= 1; a lot size
    or minimum order quantity below 1; a session close outside [0, 86_400e9); a currency that is
    not a str of at most 16 printable ASCII characters without spaces; a tick value that is not
    None or a finite number > 0; a maker or taker rate that is not finite in (-10000, 10000);
    a reference price outside [0, MAX_PRICE]; a band outside [0, 10000] bps; an interruption
    length below 1 ns; a starting phase that is not a Phase a symbol can rest in.
    """
    where = f" of {name!r}" if name else ""
    for key in options:
        if key not in DEFAULTS and key not in PHASE_DEFAULTS:
            raise OptionError(str(key), f"unknown symbol option {key!r}{where}; known: "
                                        f"{', '.join(OPTIONS + PHASE_OPTIONS)}")
    o = {**DEFAULTS, **PHASE_DEFAULTS, **options}
    out = {"tick_table": _tick_table(o["tick_table"], where)}
    out["lot_size"] = _int(o["lot_size"], "lot_size", 1, MAX_PRICE, f"lot_size{where}")
    out["min_order_qty"] = _int(o["min_order_qty"], "min_order_qty", 1, MAX_PRICE,
                                f"min_order_qty{where}")
    out["session_close"] = _int(o["session_close"], "session_close", 0, DAY_NS - 1,
                                f"session_close{where} (ns after midnight UTC)")
    cur = o["currency"]
    if not isinstance(cur, str) or len(cur) > MAX_CURRENCY_LEN or not cur.isascii() \
            or not cur.isprintable() or any(c.isspace() for c in cur):
        raise OptionError("currency", f"currency{where} must be a str of at most "
                                      f"{MAX_CURRENCY_LEN} printable ASCII characters without "
                                      f"spaces; got {cur!r}")
    out["currency"] = cur
    tv = o["tick_value"]
    if tv is not None:
        tv = _real(tv, "tick_value", f"tick_value{where}")
        if tv <= 0:
            raise OptionError("tick_value", f"tick_value{where} must be None or > 0; got {tv!r}")
    out["tick_value"] = tv
    for key in ("maker_bps", "taker_bps"):
        v = float(_real(o[key], key, f"{key}{where}")) + 0.0   # -0.0 is 0.0
        if not -MAX_BPS < v < MAX_BPS:
            raise OptionError(key, f"{key}{where} must be in (-{MAX_BPS}, {MAX_BPS}); got {v!r}")
        out[key] = v
    phase = {"reference_price": _int(o["reference_price"], "reference_price", 0, MAX_PRICE,
                                     f"reference_price{where} (0: none)")}
    for key in ("static_band_bps", "dynamic_band_bps"):
        phase[key] = _int(o[key], key, 0, MAX_BAND_BPS, f"{key}{where} (0: no band)")
    phase["interruption_ns"] = _int(o["interruption_ns"], "interruption_ns", 1, (1 << 63) - 1,
                                    f"interruption_ns{where}")
    phase["phase"] = _phase_name(o["phase"], where)
    out.update((k, v) for k, v in phase.items() if v != PHASE_DEFAULTS[k])
    return out


def phase_option(options: dict, key: str):
    """Return phase option ``key`` of normalized ``options`` (its default when left out)."""
    return options.get(key, PHASE_DEFAULTS[key])


def _phase_name(value, where: str) -> str:
    """Return the lower-case name of the Phase ``value`` names (a name in any case or a code)
    that a symbol may start in, or raise OptionError. OPENING_AUCTION and CLOSING_AUCTION are
    never a resting state, so a symbol cannot start in them."""
    phase = None
    if isinstance(value, str):
        phase = Phase.__members__.get(value.upper())
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and type(value).__name__ != "bool_" and int(value) in Phase._value2member_map_:
        phase = Phase(int(value))
    starts = [p.name.lower() for p in Phase
              if p not in (Phase.OPENING_AUCTION, Phase.CLOSING_AUCTION)]
    if phase is None or phase.name.lower() not in starts:
        raise OptionError("phase", f"phase{where} must be one of {', '.join(starts)}; "
                                   f"got {value!r}")
    return phase.name.lower()


def is_default(options: dict) -> bool:
    """Whether normalized ``options`` are all at their defaults."""
    return options == DEFAULTS
