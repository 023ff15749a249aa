"""The checkpoint layout: the one writer and the one parser of an engine's state as bytes.

Layout (little-endian): magic "EXSIMCKP", u32 version (2), u32 header length H, H bytes of header
JSON, u64 row count N, N CHECKPOINT_DTYPE rows (every resting order in priority order: symbols
ascending, bids then asks, best level first, FIFO within a level; then every pending stop:
symbols ascending, BUY stops by rising then SELL stops by falling stop price, FIFO among equal),
u32 CRC32C of everything before it. Version 1 (before stops, icebergs and expiry) wrote the
42-byte ``V1_ROW_DTYPE`` rows, a prefix of today's fields: ``frame`` still reads them, every new
field zero (a resting GTC LIMIT without reserve or expiry), and ``encode`` still writes them
for a state an old checkpoint can hold (``version_for``: old-form header, no new row field), so
such a checkpoint restores and re-encodes to its own bytes. The header is
``json.dumps(..., sort_keys=True)`` of ``{"config": {"stp", "ownership",
"symbols": [{"name", "id", "tick_size", "min_price", "max_price", "tick_table", "lot_size",
"min_order_qty", "session_close", "currency", "tick_value", "maker_bps", "taker_bps"}]}, "seq",
"trade_id", "next_auto_id", "last_prices"}`` (``last_prices``: each symbol's last trade price, 0
before its first trade).

Trading phases (docs/semantics.md, Trading phases): a symbol's phase options
(``reference_price``, ``static_band_bps``, ``dynamic_band_bps``, ``interruption_ns``,
``phase``: ``PHASE_OPTIONS``) are written in its symbol entry only where they differ from their
default, and its phase state (``PHASE_STATE``: phase, pending auction, reference price,
re-opening end, last indicative) in a ``phases`` list (one object per symbol) only when some
symbol's state differs from the one its options start it in. So a checkpoint of an engine that
never used phases, and every checkpoint written before they existed, has the same bytes as
before; a state in a call (a crossed book, MARKET orders resting at their call price) is
checked against its ``phases`` (``checkpoint_kernels.check_rows``).

Headers written before ownership, the symbol options and last prices existed lack all of those
keys (the "old form"); they parse with ownership off, default options and no trade yet. An
engine in exactly that state (``old_form``) writes the old form again, so such a checkpoint
restores and re-encodes to the same header bytes; any other state writes every key. A header
has all the new keys or none of them.

Invariants: ``encode`` is canonical (one byte string per state); ``parse`` accepts only what
``encode`` can write, checking the frame before allocating anything (magic, checksum, version,
a header length and row count that fit the blob) and then every header field, and raises
CorruptionError ("checkpoint: ...", with the byte offset) naming the first problem. The rows
are checked against the books by the engine (``checkpoint_kernels.check_rows``), whose findings
``row_problem`` words. Nothing else in exsim reads these bytes: store keeps them opaque and
replay restores them through ``Engine.restore``.
"""

from __future__ import annotations

import json
import math
import struct
from typing import NamedTuple

import crc32c
import numpy as np

from . import checkpoint_kernels as ck_kernels
from .errors import CorruptionError
from .schema import (CALL_MARKET_PRICE, CHECKPOINT_DTYPE, MAX_LEVEL_QTY, MAX_PRICE, MAX_QTY, Phase,
                     Side, Stp)
from .symbol_options import DEFAULTS as _DEFAULT_OPTIONS
from .symbol_options import OPTIONS as _OPTIONS
from .symbol_options import PHASE_DEFAULTS as _PHASE_DEFAULTS
from .symbol_options import OptionError, normalize as _normalize_options

__all__ = ["MAGIC", "VERSION", "V1_ROW_DTYPE", "MAX_ORDERS", "Checkpoint", "encode",
           "header_bytes", "version_for", "frame", "row_version", "row_size", "parse", "row_problem", "positive_number",
           "make_header", "PHASE_OPTIONS", "PHASE_STATE", "CALL_AUCTION", "phase_state",
           "start_state", "apply_phase_state"]

MAGIC = b"EXSIMCKP"
VERSION = 2
# the rows of version 1 checkpoints: the fields an order had before stops, icebergs and expiry
V1_ROW_DTYPE = np.dtype([(name, CHECKPOINT_DTYPE.fields[name][0]) for name in
                         ("order_id", "price", "qty", "filled", "symbol", "trader", "side",
                          "flags")])
_ROW_DTYPES = {1: V1_ROW_DTYPE, 2: CHECKPOINT_DTYPE}
MAX_ORDERS = (1 << 31) - 1   # arena slots, levels and their links are int32
_I64_MAX = (1 << 63) - 1
_U64_MAX = (1 << 64) - 1

# the trading-phase symbol options (of those symbol_options declares) and their defaults
PHASE_OPTIONS = dict(_PHASE_DEFAULTS)
# a symbol's phase state in a checkpoint: SYMBOL_DTYPE fields (phase and auction as Phase names)
PHASE_STATE = ("phase", "auction", "reference_price", "auction_end", "ind_price", "ind_qty",
               "ind_surplus")
# the auction each call ends in: what entering it makes pending (docs/semantics.md, PHASE step 3)
CALL_AUCTION = {Phase.PRE_OPEN: Phase.OPENING_AUCTION, Phase.PRE_CLOSE: Phase.CLOSING_AUCTION,
                Phase.REOPENING_AUCTION: Phase.REOPENING_AUCTION}
_RESTING_PHASES = tuple(p for p in Phase if p not in (Phase.OPENING_AUCTION, Phase.CLOSING_AUCTION))
_AUCTIONS = (Phase.OPENING_AUCTION, Phase.CLOSING_AUCTION, Phase.REOPENING_AUCTION)
_NO_AUCTION = "none"

# the old form's fields; the new form adds the _NEW ones (and may add "phases"; a symbol entry
# may add the phase options that are not at their default)
_HEADER_FIELDS = {"config", "seq", "trade_id", "next_auto_id"}
_CONFIG_FIELDS = {"stp", "symbols"}
_SYMBOL_FIELDS = {"name", "id", "tick_size", "min_price", "max_price"}
_NEW_HEADER_FIELDS = _HEADER_FIELDS | {"last_prices"}
_NEW_CONFIG_FIELDS = _CONFIG_FIELDS | {"ownership"}
_NEW_SYMBOL_FIELDS = _SYMBOL_FIELDS | set(_OPTIONS)   # and any of PHASE_OPTIONS


class Checkpoint(NamedTuple):
    """A parsed checkpoint whose frame and header passed every check (rows not yet checked)."""

    header: bytes      # the header JSON exactly as stored
    stp: str           # self-trade prevention mode's name
    symbols: list      # (name, tick_size, min_price, max_price, options) per symbol id; options
                       # in symbol_options' normal form
    counters: tuple    # (seq, trade_id, next_auto_id)
    rows: np.ndarray   # CHECKPOINT_DTYPE, a read-only view into the blob
    rows_at: int       # byte offset of the first row (for error offsets)
    ownership: bool    # the engine's ownership option (False in an old-form header)
    last_prices: list  # each symbol's last trade price (0: none yet; all 0 in an old form)
    phases: list | None = None   # each symbol's PHASE_STATE as ints (None: each starts as its
                                 # options say, ``start_state``)


def positive_number(value) -> bool:
    """Whether ``value`` is a plain int or float (not bool), finite and > 0."""
    if type(value) is int:
        return value > 0
    return type(value) is float and math.isfinite(value) and value > 0


def make_header(config: dict, seq: int, trade_id: int, next_auto_id: int,
                last_prices: list, phases: list | None = None) -> dict:
    """Return the checkpoint header of an engine with ``Engine.config()`` ``config``, its
    counters, its symbols' last trade prices and their phase state (``phase_state``; None: each
    as its options start it): the old form (see the module) when ownership is off, every
    symbol option is at its default, no symbol has traded and ``phases`` is None, else the new,
    each symbol's phase options written only where they differ from their default."""
    old = (phases is None and not config["ownership"] and not any(last_prices)
           and all(sym.get(k, v) == v for sym in config["symbols"]
                   for k, v in {**_DEFAULT_OPTIONS, **PHASE_OPTIONS}.items()))
    if old:
        config = {"stp": config["stp"],
                  "symbols": [{k: sym[k] for k in _SYMBOL_FIELDS} for sym in config["symbols"]]}
    else:
        config = {**config, "symbols": [
            {k: v for k, v in sym.items() if k not in PHASE_OPTIONS or v != PHASE_OPTIONS[k]}
            for sym in config["symbols"]]}
    header = {"config": config, "seq": seq, "trade_id": trade_id, "next_auto_id": next_auto_id}
    if not old:
        header["last_prices"] = [int(p) for p in last_prices]
    if phases is not None:
        header["phases"] = [{"phase": Phase(p[0]).name.lower(),
                             "auction": Phase(p[1]).name.lower() if p[1] else _NO_AUCTION,
                             **{k: int(v) for k, v in zip(PHASE_STATE[2:], p[2:])}}
                            for p in phases]
    return header


def start_state(options: dict) -> tuple:
    """Return the PHASE_STATE (ints) a symbol with normalized ``options`` starts in: its
    ``phase`` option, that call's auction pending, its reference price option, the rest 0."""
    phase = Phase[str(options.get("phase", "continuous")).upper()]
    return (int(phase), int(CALL_AUCTION.get(phase, 0)), int(options.get("reference_price", 0)),
            0, 0, 0, 0)


def phase_state(symbols: np.ndarray, options: list) -> list | None:
    """Return every symbol's PHASE_STATE (a tuple of ints per symbol) from the engine's
    SYMBOL_DTYPE rows, or None when each equals ``start_state`` of its ``options`` (what the
    header then leaves out)."""
    got = [tuple(int(row[k]) for k in PHASE_STATE) for row in symbols]
    if all(g == start_state(o) for g, o in zip(got, options)):
        return None
    return got


def apply_phase_state(symbols: np.ndarray, phases: list | None) -> None:
    """Write ``phases`` (``Checkpoint.phases``) into the engine's SYMBOL_DTYPE rows; None
    leaves them as their options started them. Returns None."""
    if phases is None:
        return
    for row, state in zip(symbols, phases):
        for k, v in zip(PHASE_STATE, state):
            row[k] = v


def header_bytes(header: dict) -> bytes:
    """Return the canonical bytes of a checkpoint header (sorted-key JSON, default separators)."""
    return json.dumps(header, sort_keys=True).encode()


# the row fields version 1 lacked: a state using none of them (and an old-form header) is
# written in version 1, so an old checkpoint re-encodes to its own bytes
_NEW_ROW_FIELDS = tuple(n for n in CHECKPOINT_DTYPE.names if n not in V1_ROW_DTYPE.names)


def version_for(header: dict, rows: np.ndarray) -> int:
    """Return the version ``encode`` writes for ``header`` and CHECKPOINT_DTYPE ``rows``: 1 when
    the header is in the old form (no ``last_prices``) and no row uses a field version 1 lacked
    (reserve, stop, display size, expiry, a type or tif but LIMIT GTC, pending), else VERSION."""
    if "last_prices" in header or any(rows[n].any() for n in _NEW_ROW_FIELDS):
        return VERSION
    return 1


def encode(header: dict, rows: np.ndarray) -> bytes:
    """Return the checkpoint bytes of ``header`` (see the module) and CHECKPOINT_DTYPE ``rows``,
    in the version ``version_for`` names."""
    head = header_bytes(header)
    version = version_for(header, rows)
    if version != VERSION:
        old = np.zeros(len(rows), V1_ROW_DTYPE)
        for name in V1_ROW_DTYPE.names:
            old[name] = rows[name]
        rows = old
    body = (MAGIC + struct.pack("<II", version, len(head)) + head
            + struct.pack("<Q", len(rows)) + rows.tobytes())
    return body + struct.pack("<I", crc32c.crc32c(body))


def frame(blob) -> tuple[bytes, np.ndarray, int]:
    """Check a checkpoint's frame; return (header bytes, rows, byte offset of the rows).

    The rows are a read-only CHECKPOINT_DTYPE view into ``blob`` for a current checkpoint, and
    a widened copy (new fields zero) for a version 1 one. ``blob`` is bytes-like. Raises
    CorruptionError for a bad magic, checksum or version, or a header length or row count that
    does not fit the blob (checked before anything is allocated)."""
    if len(blob) < 28 or bytes(blob[:8]) != MAGIC:
        raise CorruptionError("checkpoint: not an exsim checkpoint (bad magic or shorter than "
                              "28 bytes)", offset=0)
    (crc,) = struct.unpack_from("<I", blob, len(blob) - 4)
    if crc32c.crc32c(blob[:-4]) != crc:
        raise CorruptionError("checkpoint: checksum mismatch", offset=len(blob) - 4)
    version, hlen = struct.unpack_from("<II", blob, 8)
    if version not in _ROW_DTYPES:
        raise CorruptionError(f"checkpoint: version {version} is not supported", offset=8)
    dtype = _ROW_DTYPES[version]
    start = 24 + hlen
    if start + 4 > len(blob):
        raise CorruptionError(f"checkpoint: header length {hlen} runs past the end of the "
                              f"{len(blob)}-byte blob", offset=12)
    (nrows,) = struct.unpack_from("<Q", blob, 16 + hlen)
    room = len(blob) - 4 - start
    if nrows * dtype.itemsize != room:
        raise CorruptionError(
            f"checkpoint: row count {nrows} does not fit the {room} bytes of rows "
            f"({dtype.itemsize} bytes a row in version {version})", offset=16 + hlen)
    if nrows > MAX_ORDERS:
        raise CorruptionError(f"checkpoint: {nrows} rows exceed the engine's {MAX_ORDERS} "
                              "order slots", offset=16 + hlen)
    rows = np.frombuffer(blob, dtype, count=nrows, offset=start)
    if version != VERSION:
        wide = np.zeros(nrows, CHECKPOINT_DTYPE)
        for name in dtype.names:
            wide[name] = rows[name]
        rows = wide
    return bytes(blob[16:16 + hlen]), rows, start


def row_version(blob) -> int:
    """Return the version of checkpoint ``blob`` (whose frame passed ``frame``)."""
    return struct.unpack_from("<I", blob, 8)[0]


def row_size(blob) -> int:
    """Return the byte size of one row of checkpoint ``blob`` (whose frame passed ``frame``)."""
    (version,) = struct.unpack_from("<I", blob, 8)
    return _ROW_DTYPES[version].itemsize


def parse(blob) -> Checkpoint:
    """Check a checkpoint's frame and header; return them parsed (see ``Checkpoint``).

    Raises CorruptionError naming the first problem (frame, then header field)."""
    head, rows, start = frame(blob)
    stp, symbols, counters, ownership, last_prices, phases = _parse_header(head)
    return Checkpoint(head, stp, symbols, counters, rows, start, ownership, last_prices, phases)


def _corrupt_header(what: str) -> CorruptionError:
    return CorruptionError(f"checkpoint: header: {what}", offset=16)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _header_int(d: dict, key: str, lo: int, hi: int, where: str = "") -> int:
    v = d[key]
    if type(v) is not int or not lo <= v <= hi:
        raise _corrupt_header(f"{where}{key} must be an integer in [{lo}, {hi}]; got {_short(v)}")
    return v


def _exact_fields(d, fields: set, what: str, optional=()) -> None:
    if not isinstance(d, dict):
        raise _corrupt_header(f"{what} must be a JSON object; got {_short(d)}")
    if d.keys() - set(optional) != fields:
        missing, extra = sorted(fields - d.keys()), sorted(d.keys() - fields - set(optional))
        raise _corrupt_header(f"{what} " + (f"lacks field {missing[0]!r}" if missing
                                           else f"has unknown field {_short(extra[0])}"))


def _parse_header(head: bytes) -> tuple[str, list, tuple, bool, list, list | None]:
    """Parse and check a checkpoint header, old form or new; return (stp name, [(name,
    tick_size, min_price, max_price, options) per symbol], (seq, trade_id, next_auto_id),
    ownership, last prices, phase states or None). Raises CorruptionError naming the field."""
    try:
        header = json.loads(head)
    except (ValueError, RecursionError) as e:   # bad JSON or UTF-8, too deep, too many digits
        raise CorruptionError(f"checkpoint: header is not JSON ({_short(str(e))})",
                              offset=16) from None
    # either new key tells the new form; then every new key must be there
    new = isinstance(header, dict) and ("last_prices" in header or (
        isinstance(header.get("config"), dict) and "ownership" in header["config"]))
    _exact_fields(header, _NEW_HEADER_FIELDS if new else _HEADER_FIELDS, "the header",
                  ("phases",) if new else ())
    cfg = header["config"]
    _exact_fields(cfg, _NEW_CONFIG_FIELDS if new else _CONFIG_FIELDS, "config")
    ownership = cfg.get("ownership", False)
    if type(ownership) is not bool:
        raise _corrupt_header(f"config.ownership must be true or false; got {_short(ownership)}")
    names = [m.name.lower() for m in Stp]
    if cfg["stp"] not in names or not isinstance(cfg["stp"], str):
        raise _corrupt_header(f"config.stp must be one of {', '.join(names)}; "
                              f"got {_short(cfg['stp'])}")
    if not isinstance(cfg["symbols"], list):
        raise _corrupt_header(f"config.symbols must be a list; got {_short(cfg['symbols'])}")
    specs, seen = [], {}
    for k, sym in enumerate(cfg["symbols"]):
        where = f"symbol {k} "
        _exact_fields(sym, _NEW_SYMBOL_FIELDS if new else _SYMBOL_FIELDS,
                      f"symbol {k} (config.symbols[{k}])", PHASE_OPTIONS if new else ())
        name = sym["name"]
        if not isinstance(name, str) or not name:
            raise _corrupt_header(f"{where}name must be a non-empty string; got {_short(name)}")
        if name in seen:
            raise _corrupt_header(f"{where}name {name!r} is also symbol {seen[name]}'s")
        seen[name] = k
        _header_int(sym, "id", k, k, where)
        tick = sym["tick_size"]
        if not positive_number(tick):
            raise _corrupt_header(f"{where}tick_size must be a finite number > 0; "
                                  f"got {_short(tick)}")
        lo = _header_int(sym, "min_price", 1, MAX_PRICE, where)
        hi = _header_int(sym, "max_price", 1, MAX_PRICE, where)
        if lo > hi:
            raise _corrupt_header(f"{where}price band [{lo}, {hi}] is empty")
        try:
            opts = _normalize_options({key: sym[key] for key in (*_OPTIONS, *PHASE_OPTIONS)
                                       if key in sym})
        except OptionError as e:
            raise _corrupt_header(f"{where}{e.option}: {e}") from None
        ref = opts.get("reference_price", 0)
        if ref and not lo <= ref <= hi:
            raise _corrupt_header(f"{where}reference_price {ref} is outside its band [{lo}, {hi}]")
        specs.append((name, tick, lo, hi, opts))
    counters = (_header_int(header, "seq", 0, _I64_MAX),
                _header_int(header, "trade_id", 0, _I64_MAX),
                _header_int(header, "next_auto_id", 1, _U64_MAX + 1))
    last_prices = header.get("last_prices", [0] * len(specs))
    if not isinstance(last_prices, list) or len(last_prices) != len(specs):
        raise _corrupt_header(f"last_prices must be a list of {len(specs)} prices (one per "
                              f"symbol); got {_short(last_prices)}")
    for k, (p, spec) in enumerate(zip(last_prices, specs)):
        # a trade happens at a resting order's price, which lay in the band
        if type(p) is not int or not (p == 0 or spec[2] <= p <= spec[3]):
            raise _corrupt_header(f"last_prices[{k}] (symbol {k}'s last trade price) must be 0 "
                                  f"or an integer in its band [{spec[2]}, {spec[3]}]; "
                                  f"got {_short(p)}")
    phases = _parse_phases(header["phases"], specs) if "phases" in header else None
    return cfg["stp"], specs, counters, ownership, last_prices, phases


def _phase_code(value, allowed, what: str) -> int:
    names = {p.name.lower(): int(p) for p in allowed}
    if not isinstance(value, str) or value not in names:
        raise _corrupt_header(f"{what} must be one of {', '.join(names)}; got {_short(value)}")
    return names[value]


def _parse_phases(phases, specs: list) -> list:
    """Check the header's ``phases`` (one object of PHASE_STATE per symbol); return them as
    tuples of ints. Raises CorruptionError naming the field."""
    if not isinstance(phases, list) or len(phases) != len(specs):
        raise _corrupt_header(f"phases must be a list of {len(specs)} objects (one per symbol); "
                              f"got {_short(phases)}")
    out = []
    for k, (st, spec) in enumerate(zip(phases, specs)):
        what = f"phases[{k}] (symbol {k}'s phase state)"
        _exact_fields(st, set(PHASE_STATE), what)
        phase = _phase_code(st["phase"], _RESTING_PHASES, f"{what} phase")
        if st["auction"] == _NO_AUCTION:
            auction = 0
        else:
            auction = _phase_code(st["auction"], _AUCTIONS, f"{what} auction ({_NO_AUCTION!r} or)")
        lo, hi = spec[2], spec[3]
        for key in ("reference_price", "ind_price"):
            v = st[key]
            if type(v) is not int or not (v == 0 or lo <= v <= hi):
                raise _corrupt_header(f"{what} {key} must be 0 or an integer in the band "
                                      f"[{lo}, {hi}]; got {_short(v)}")
        end = _header_int(st, "auction_end", 0, _I64_MAX, f"{what} ")
        qty = _header_int(st, "ind_qty", 0, _I64_MAX, f"{what} ")
        surplus = _header_int(st, "ind_surplus", -_I64_MAX, _I64_MAX, f"{what} ")
        out.append((phase, auction, st["reference_price"], end, st["ind_price"], qty, surplus))
    return out


def row_problem(code: int, i: int, rows: np.ndarray, specs: list) -> str:
    """Return the message for ``checkpoint_kernels.check_rows``' finding ``code`` at row ``i``."""
    r = rows[i]
    sym, side, price = int(r["symbol"]), int(r["side"]), int(r["price"])
    name = specs[sym][0] if sym < len(specs) else None
    at = f"checkpoint: row {i}: "
    kind = "pending stop" if int(r["pending"]) == 1 else "resting order"
    if code == ck_kernels.ROW_SYMBOL:
        return at + f"symbol {sym} is not one of the engine's {len(specs)} symbols"
    if code == ck_kernels.ROW_SIDE:
        return at + f"side {side} is neither BUY (0) nor SELL (1)"
    if code == ck_kernels.ROW_QTY:
        return at + f"qty {int(r['qty'])} is outside 1..{MAX_QTY}"
    if code == ck_kernels.ROW_FILLED:
        return at + (f"filled {int(r['filled'])} is outside 0..{MAX_LEVEL_QTY} (0 for a "
                     "pending stop)")
    if code == ck_kernels.ROW_FLAGS:
        return at + f"flags {int(r['flags']):#x} holds bits no {kind} carries"
    if code == ck_kernels.ROW_PRICE and int(r["order_type"]) == 1:
        return at + (f"price {price} of a MARKET resting in a call (its side's call price "
                     f"{CALL_MARKET_PRICE[side]} needed)")
    if code == ck_kernels.ROW_PRICE and price == 0:
        return at + "price 0 of a resting order or STOP_LIMIT (a price in band needed)"
    if code == ck_kernels.ROW_PRICE and int(r["order_type"]) == 2:
        return at + f"price {price} of a pending STOP (a STOP has no price: 0)"
    if code == ck_kernels.ROW_PRICE:
        return at + (f"price {price} is outside the band {specs[sym][2]}..{specs[sym][3]} of "
                     f"symbol {name!r}")
    if code == ck_kernels.ROW_ORDER:
        if int(r["pending"]) == 1:
            return at + (f"{Side(side).name} stop at {int(r['stop_price'])} of symbol {name!r} "
                         "is out of order (pending stops after every resting order; symbols "
                         "ascending, BUY stops by rising then SELL stops by falling stop price)")
        return at + (f"{Side(side).name} {price} of symbol {name!r} is out of priority order "
                     "(resting orders first: symbols ascending, bids then asks, best level "
                     "first)")
    if code == ck_kernels.ROW_LEVEL_QTY:
        return at + f"the orders at {Side(side).name} {price} of {name!r} total past {MAX_LEVEL_QTY}"
    if code == ck_kernels.ROW_PENDING:
        return at + f"pending {int(r['pending'])} is neither 0 (resting) nor 1 (a stop)"
    if code == ck_kernels.ROW_TYPE:
        want = "STOP or STOP_LIMIT" if kind == "pending stop" else \
            "LIMIT, or MARKET in a call (an auction pending)"
        return at + f"order_type {int(r['order_type'])} of a {kind} (must be {want})"
    if code == ck_kernels.ROW_TIF:
        want = "GTC, IOC, DAY or GTD" if kind == "pending stop" else "GTC, DAY or GTD"
        return at + f"tif {int(r['tif'])} of a {kind} (must be {want})"
    if code == ck_kernels.ROW_HIDDEN:
        return at + (f"reserve {int(r['hidden'])} of a {kind} with display_qty "
                     f"{int(r['display_qty'])} (a reserve needs a display size; a stop has "
                     f"none; open qty at most {MAX_QTY})")
    if code == ck_kernels.ROW_DISPLAY:
        return at + (f"shown qty {int(r['qty'])} and display_qty {int(r['display_qty'])} of a "
                     f"{kind} (an iceberg shows at most its display size; a stop has none)")
    if code == ck_kernels.ROW_STOP_PRICE:
        return at + (f"stop_price {int(r['stop_price'])} of a {kind} (a resting order has "
                     f"none; a stop's is in the band of symbol {name!r})")
    if code == ck_kernels.ROW_EXPIRY:
        return at + (f"expire_ts {int(r['expire_ts'])} with tif {int(r['tif'])} (DAY and GTD "
                     "orders have an expiry, others none)")
    if code == ck_kernels.ROW_CROSSED:
        bids = rows[:i][(rows["symbol"][:i] == sym) & (rows["side"][:i] == Side.BUY)]
        return at + (f"symbol {name!r} is crossed: best ask {price} <= best bid "
                     f"{int(bids['price'][0])} (only a book in a call may cross)")
    raise AssertionError(f"unknown check_rows code {code}")  # pragma: no cover
