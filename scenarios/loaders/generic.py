"""The generic order-flow format: anyone's own order messages as CSV or Parquet, read and written.

One row per order message, one column per ORDER_DTYPE field, named as below (any column order;
a header row is required in CSV; an unknown column name is an error):

===========  ========  ===================================================================
column       needed    values
===========  ========  ===================================================================
ts           always    integer nanoseconds
symbol       always    a symbol name (no comma); ids follow the symbol table, see below
kind         always    NEW, CANCEL or MODIFY
order_id     always    integer in [0, 2^64)
side         NEW       BUY or SELL (B, S); empty = BUY
type         no        LIMIT (default), MARKET, STOP or STOP_LIMIT
tif          no        GTC (default), IOC, FOK, DAY or GTD
price        LIMIT     integer ticks (or a decimal price with ``decimal_prices``); empty = 0
qty          NEW/MOD   integer lots; empty = 0
trader       no        integer in [0, 2^32); empty or absent = 0 on a NEW, the order's owner
                       on a CANCEL or MODIFY (the trader of the latest NEW of its symbol and id)
flags        no        empty, POST_ONLY, or an integer bit set
stop_price   STOP*     trigger in integer ticks (decimal with ``decimal_prices``); empty = 0
display_qty  no        iceberg: the largest quantity shown at once, lots; empty = 0 (all shown)
min_qty      no        fill at least this many lots at once or not at all; empty = 0 (none)
expire_ts    GTD       expiry, integer nanoseconds; empty = 0
===========  ========  ===================================================================

The last four columns are optional (a file without them reads as before); the writer writes
each only when some row has a non-zero value in it. Their meaning is docs/semantics.md's.

Words are case-insensitive; ``kind``, ``side``, ``type``, ``tif`` also take their integer codes
(exchange.schema), so a flow holding any byte value round-trips. Validation of the *messages*
(a limit price <= 0, an unknown id ...) is the engine's, which rejects them with a reason, as for
every other flow; this module refuses only what is not a message: a missing or unknown column, a
word or number that does not parse, a value outside its field's range.

Symbol table: a CSV may start with ``# symbols: NAME=TICK_SIZE,NAME=TICK_SIZE`` (ids in that
order); Parquet keeps the same text in its schema metadata key ``exsim.symbols``. Without one,
symbols get ids in order of first appearance and tick size 1; with one, a name outside it is an
error. A CSV may follow it with ``# symbol options: {JSON}`` (Parquet: metadata key
``exsim.symbol_options``): per symbol name, its ``Engine.add_symbol`` options (the keys of
``scenarios.scenario.ENGINE_OPTIONS``: tick table, lot size, minimum, session close, money),
which land in ``SymbolSpec.options``; a reader that does not know the line takes it for a
comment, and a file without it reads as before (no options). Other lines starting with ``#`` are
comments. ``decimal_prices=True`` reads ``price`` as a
decimal price and converts it to ticks of the symbol's tick size, exactly (a price that is not a
whole number of ticks is an error).

Invariants: ``write_generic`` then ``load_generic`` returns the same ORDER_DTYPE bytes and symbol
table. Errors are InputError naming the file, the line (CSV; a Parquet row is "row N", from 1) and
the column. Nothing is written on a failed load; the writer replaces its file atomically.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import numpy as np

from exsim.exchange.errors import InputError
from exsim.exchange.schema import ORDER_DTYPE, Flag, Kind, OrderType, Side, Tif

from exsim.scenarios.loaders._parse import column_decimal, fill_owners
from exsim.scenarios.scenario import ENGINE_OPTIONS, SymbolSpec

__all__ = ["load_generic", "write_generic", "GenericFlow", "COLUMNS", "SYMBOLS_KEY", "OPTIONS_KEY"]

COLUMNS = ("ts", "symbol", "kind", "side", "type", "tif", "order_id", "price", "qty", "trader", "flags",
           "stop_price", "display_qty", "min_qty", "expire_ts")
_OPTIONAL_INTS = ("stop_price", "display_qty", "min_qty", "expire_ts")   # empty or absent = 0
_BASE_COLUMNS = COLUMNS[:11]   # what the writer always writes; the optional ones when non-zero
_REQUIRED = ("ts", "symbol", "kind", "order_id")
SYMBOLS_KEY = "exsim.symbols"
OPTIONS_KEY = "exsim.symbol_options"
_WORDS = {
    "kind": {k.name: int(k) for k in Kind},
    "side": {**{s.name: int(s) for s in Side}, "B": 0, "S": 1},
    "type": {t.name: int(t) for t in OrderType},
    "tif": {t.name: int(t) for t in Tif},
    "flags": {"POST_ONLY": int(Flag.POST_ONLY)},
}
_FIELD = {"type": "order_type"}          # column name -> ORDER_DTYPE field where they differ
_I64 = (-(1 << 63), (1 << 63) - 1)
_RANGE = {"ts": _I64, "order_id": (0, (1 << 64) - 1), "price": _I64, "qty": _I64,
          "trader": (0, (1 << 32) - 1), **{k: _I64 for k in _OPTIONAL_INTS}}


@dataclass
class GenericFlow:
    """A loaded generic flow: ORDER_DTYPE rows and the symbol table (SymbolSpec per id)."""

    orders: np.ndarray
    symbols: list[SymbolSpec]


def _parse_symbols(path: str, text: str, where: str) -> list[SymbolSpec]:
    out, seen = [], set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, tick = part.partition("=")
        name = name.strip()
        try:
            t = Decimal(tick.strip()) if eq else Decimal(1)
            ok = t.is_finite() and t > 0
        except InvalidOperation:
            ok = False
        if not name or not ok or name in seen:
            raise InputError(f"{path}, {where}: symbol table entry {part!r} should be NAME=TICK_SIZE "
                             f"with a unique name and a tick size > 0")
        seen.add(name)
        out.append(SymbolSpec(name, _num(t)))
    return out


def _apply_options(path: str, table, text: str, where: str):
    """Return ``table`` (SymbolSpecs) with the options of a ``symbol options`` JSON ``text``.

    Raises InputError for text that is not a JSON object of known names to objects of
    ENGINE_OPTIONS keys, or options without a symbol table."""
    import json

    try:
        given = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}, {where}: symbol options are not JSON ({exc})") from exc
    if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
        raise InputError(f"{path}, {where}: symbol options should be a JSON object of "
                         "symbol name -> object of options")
    if table is None:
        raise InputError(f"{path}, {where}: symbol options without a symbols table before them")
    names = {t.name for t in table}
    for name, opts in given.items():
        if name not in names:
            raise InputError(f"{path}, {where}: symbol options name {name!r}, which is not in "
                             "the symbols table")
        bad = sorted(set(opts) - set(ENGINE_OPTIONS))
        if bad:
            raise InputError(f"{path}, {where}: unknown option {bad[0]!r} of symbol {name!r} "
                             f"(known: {', '.join(ENGINE_OPTIONS)})")
    out = []
    for t in table:
        opts = given.get(t.name, {})
        pairs = tuple((k, tuple(tuple(r) for r in opts[k]) if k == "tick_table" else opts[k])
                      for k in ENGINE_OPTIONS if k in opts)
        out.append(SymbolSpec(t.name, t.tick_size, t.mid, pairs) if pairs else t)
    return out


def _options_text(specs) -> str | None:
    """The ``symbol options`` JSON of ``specs``, None when no symbol has options."""
    import json

    given = {s.name: {k: [list(r) for r in v] if k == "tick_table" else v for k, v in s.options}
             for s in specs if s.options}
    return json.dumps(given, separators=(",", ":")) if given else None


def _num(t: Decimal):
    return int(t) if t == t.to_integral_value() else float(t)


def _symbols_text(symbols) -> str:
    specs = [s if isinstance(s, SymbolSpec) else SymbolSpec(*s) for s in symbols]
    return ",".join(f"{s.name}={Decimal(repr(s.tick_size)).normalize():f}" for s in specs)


# ------------------------------------------------------------------------------ reading
def _read_csv(path: str):
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", newline="") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    table, header, rows, numbers = None, None, [], []
    for n, ln in enumerate(lines, 1):
        s = ln.strip()
        if not s:
            continue
        if s.startswith("#"):
            body = s[1:].strip()
            if body.lower().startswith("symbols:") and header is None:
                table = _parse_symbols(path, body[8:], f"line {n}")
            elif body.lower().startswith("symbol options:") and header is None:
                table = _apply_options(path, table, body[15:], f"line {n}")
            continue
        if header is None:
            header = [c.strip().lower() for c in s.split(",")]
            header_line = n
            continue
        rows.append(ln)
        numbers.append(n)
    if header is None:
        raise InputError(f"{path}, line {len(lines) + 1}: expected a header row naming the columns "
                         f"({','.join(COLUMNS)}), got end of file")
    _check_header(path, header, f"line {header_line}")
    lines_no = np.array(numbers, np.int64)
    cols = {h: [] for h in header}
    for ln, n in zip(rows, numbers):
        parts = ln.split(",")
        if len(parts) != len(header):
            raise InputError(f"{path}, line {n}: expected {len(header)} comma-separated columns "
                             f"({','.join(header)}), got {len(parts)}: {ln[:80]!r}")
        for h, v in zip(header, parts):
            cols[h].append(v.strip())
    cols = {h: np.array(v, dtype=str) if v else np.zeros(0, "U1") for h, v in cols.items()}
    return cols, table, lambda i: f"line {int(lines_no[i])}"


def _read_parquet(path: str):
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(f"{path}: reading Parquet needs pyarrow, which is not installed "
                         "(pip install 'exsim[parquet]')") from exc
    try:
        t = pq.read_table(path)
    except Exception as exc:   # pyarrow raises its own error types for damaged files
        raise InputError(f"{path}: cannot read as Parquet ({exc})") from exc
    header = [c.lower() for c in t.column_names]
    _check_header(path, header, "schema")
    meta = t.schema.metadata or {}
    raw = meta.get(SYMBOLS_KEY.encode())
    table = _parse_symbols(path, raw.decode("utf-8", "replace"), "schema metadata") if raw is not None else None
    raw = meta.get(OPTIONS_KEY.encode())
    if raw is not None:
        table = _apply_options(path, table, raw.decode("utf-8", "replace"), "schema metadata")
    cols = {}
    for name, h in zip(t.column_names, header):
        c = t.column(name).to_numpy(zero_copy_only=False)
        cols[h] = np.array(["" if v is None else str(v) for v in c.tolist()], dtype=str) \
            if c.dtype == object or c.dtype.kind in "US" else c.astype(object).astype(str)
    return cols, table, lambda i: f"row {i + 1}"


def _check_header(path: str, header: list[str], where: str):
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise InputError(f"{path}, {where}: unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)})")
    dup = [h for h in header if header.count(h) > 1]
    if dup:
        raise InputError(f"{path}, {where}: column {dup[0]!r} appears twice")
    missing = [h for h in _REQUIRED if h not in header]
    if missing:
        raise InputError(f"{path}, {where}: missing column {missing[0]!r} (needed: {', '.join(_REQUIRED)})")


def _ints(path, col, where, name, default=0) -> np.ndarray:
    lo, hi = _RANGE[name]
    vals = np.where(col == "", str(default), col)
    dtype = np.uint64 if name == "order_id" else np.int64
    try:
        if not np.char.startswith(vals, "-").any() or name != "order_id":
            out = vals.astype(dtype)
            if name != "trader" or not ((out < lo).any() or (out > hi).any()):
                return out
    except (ValueError, OverflowError):
        pass
    # the slow path: find the first bad value so that the error can name it
    good = []
    for i, v in enumerate(vals.tolist()):
        ok = v.lstrip("+-").isdigit() and v.count("-") + v.count("+") <= 1 and lo <= int(v) <= hi
        if not ok:
            raise InputError(f"{path}, {where(i)}, column {name!r}: expected an integer in [{lo}, {hi}], got {v!r}")
        good.append(int(v))
    return np.array(good, dtype)


def _codes(path, col, where, name, default: int) -> np.ndarray:
    words = _WORDS[name]
    up = np.char.upper(col)
    out = np.full(len(col), -1, np.int64)
    out[up == ""] = default
    for w, code in words.items():
        out[up == w] = code
    digits = np.char.isdigit(col)
    if digits.any():
        out[digits] = col[digits].astype(np.int64)
    bad = np.flatnonzero((out < 0) | (out > 255))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}, {where(i)}, column {name!r}: expected one of {', '.join(words)} or a "
                         f"code 0-255, got {str(col[i])!r}")
    return out


def load_generic(path: str | os.PathLike, *, symbols=None, decimal_prices: bool = False) -> GenericFlow:
    """Read a generic flow file (CSV, CSV.gz or Parquet by its name); return a GenericFlow.

    ``symbols`` (names, or SymbolSpec / (name, tick_size)) overrides the file's symbol table.
    Raises InputError naming file, line (or row) and column for anything that is not a message
    (module docstring).
    """
    path = os.fspath(path)
    cols, table, where = _read_parquet(path) if path.endswith(".parquet") else _read_csv(path)
    if symbols is not None:
        table = [s if isinstance(s, SymbolSpec) else SymbolSpec(s) if isinstance(s, str) else SymbolSpec(*s)
                 for s in symbols]
    n = len(cols["ts"])
    empty = np.full(n, "", dtype="U1")
    get = lambda h: cols.get(h, empty)   # noqa: E731
    out = np.zeros(n, ORDER_DTYPE)
    for name in ("ts", "order_id", "qty", "trader", *_OPTIONAL_INTS):
        if not (decimal_prices and name == "stop_price"):   # a price: read with ``price`` below
            out[name] = _ints(path, get(name), where, name)
    blank = np.flatnonzero(get("ts") == "")
    if blank.size:
        raise InputError(f"{path}, {where(int(blank[0]))}, column 'ts': expected an integer, got ''")
    for name, default in (("kind", -1), ("side", 0), ("type", 0), ("tif", 0), ("flags", 0)):
        out[_FIELD.get(name, name)] = _codes(path, get(name), where, name, default)
    names = get("symbol")
    if table is None:
        order = list(dict.fromkeys(names.tolist()))
        table = [SymbolSpec(s) for s in order]
    ids = {s.name: k for k, s in enumerate(table)}
    sym = np.array([ids.get(s, -1) for s in names.tolist()], np.int64)
    bad = np.flatnonzero((sym < 0) | (names == ""))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}, {where(i)}, column 'symbol': {str(names[i])!r} is not in the symbol "
                         f"table ({', '.join(ids) or 'empty'})")
    out["symbol"] = sym
    out["price"] = _prices(path, get("price"), sym, table, where) if decimal_prices \
        else _ints(path, get("price"), where, "price")
    if decimal_prices and "stop_price" in cols:
        out["stop_price"] = _prices(path, get("stop_price"), sym, table, where, "stop_price")
    # a CANCEL/MODIFY without a trader names its order's owner (docs/semantics.md, "Ownership")
    fill_owners(out, get("trader") == "")
    return GenericFlow(out, list(table))


def _prices(path, col, sym, table, where, name: str = "price") -> np.ndarray:
    ticks = [Decimal(repr(s.tick_size)) for s in table]
    digits = max([0] + [max(0, -t.as_tuple().exponent) for t in ticks])
    vals = np.where(col == "", "0", col)
    try:
        scaled = column_decimal(path, vals, digits, 1, name)
    except InputError:
        scaled = None
    unit = np.array([int(t.scaleb(digits)) for t in ticks] or [1], np.int64)[sym]
    if scaled is not None:
        q, r = np.divmod(scaled, unit)
        bad = np.flatnonzero(r != 0)
        if not bad.size:
            return q
    for i, v in enumerate(vals.tolist()):   # name the first value that is not a whole tick
        try:
            x = Decimal(v)
            whole = x.is_finite() and (x.scaleb(digits) % int(unit[i])) == 0
        except InvalidOperation:
            raise InputError(f"{path}, {where(i)}, column {name!r}: expected a decimal price, got {v!r}") from None
        if not whole:
            raise InputError(f"{path}, {where(i)}, column {name!r}: {v!r} is not a whole number of "
                             f"ticks of {table[int(sym[i])].tick_size}")
    raise InputError(f"{path}: column {name!r} does not fit int64 ticks")   # pragma: no cover


# ------------------------------------------------------------------------------ writing
def _word_column(values: np.ndarray, enum_words: dict[str, int]) -> list[str]:
    names = {code: w for w, code in enum_words.items() if len(w) > 1}
    return [names.get(v, str(v)) for v in values.tolist()]


def write_generic(path: str | os.PathLike, orders: np.ndarray, symbols) -> int:
    """Write ORDER_DTYPE ``orders`` as a generic flow (CSV, CSV.gz or Parquet by the name) with its
    symbol table (SymbolSpec or (name, tick_size) per symbol id; a SymbolSpec's options are
    written as the ``symbol options`` line); return the rows written.

    The file is written beside its target and renamed into place. Raises InputError for a symbol
    id outside the table or Parquet without pyarrow; OSError if the file cannot be written.
    """
    path = os.fspath(path)
    specs = [s if isinstance(s, SymbolSpec) else SymbolSpec(*s) for s in symbols]
    if len(orders) and int(orders["symbol"].max()) >= len(specs):
        raise InputError(f"{path}: symbol id {int(orders['symbol'].max())} is outside the symbol table "
                         f"({len(specs)} symbols)")
    names = np.array([s.name for s in specs] or [""], dtype=object)[orders["symbol"].astype(np.int64)]
    cols = {
        "ts": orders["ts"].tolist(), "symbol": names.tolist(),
        "kind": _word_column(orders["kind"], _WORDS["kind"]),
        "side": _word_column(orders["side"], _WORDS["side"]),
        "type": _word_column(orders["order_type"], _WORDS["type"]),
        "tif": _word_column(orders["tif"], _WORDS["tif"]),
        "order_id": orders["order_id"].tolist(), "price": orders["price"].tolist(),
        "qty": orders["qty"].tolist(), "trader": orders["trader"].tolist(),
        "flags": ["" if f == 0 else _word_column(np.array([f]), _WORDS["flags"])[0]
                  for f in orders["flags"].tolist()],
        **{c: orders[c].tolist() for c in _OPTIONAL_INTS},
    }
    columns = _BASE_COLUMNS + tuple(c for c in _OPTIONAL_INTS if orders[c].any())
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        if path.endswith(".parquet"):
            _write_parquet(tmp, cols, columns, specs, path)
        else:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(tmp, "wt", encoding="utf-8", newline="") as fh:
                fh.write(f"# symbols: {_symbols_text(specs)}\n")
                if _options_text(specs) is not None:
                    fh.write(f"# symbol options: {_options_text(specs)}\n")
                fh.write(",".join(columns) + "\n")
                rows = zip(*(map(str, cols[c]) for c in columns))
                fh.writelines(",".join(r) + "\n" for r in rows)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(orders)


def _write_parquet(tmp, cols, columns, specs, path):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(f"{path}: writing Parquet needs pyarrow, which is not installed") from exc
    types = {"ts": pa.int64(), "order_id": pa.uint64(), "price": pa.int64(), "qty": pa.int64(),
             "trader": pa.uint32(), **{c: pa.int64() for c in _OPTIONAL_INTS}}
    arrays = [pa.array(cols[c], type=types.get(c, pa.string())) for c in columns]
    meta = {SYMBOLS_KEY: _symbols_text(specs)}
    if _options_text(specs) is not None:
        meta[OPTIONS_KEY] = _options_text(specs)
    schema = pa.schema([(c, a.type) for c, a in zip(columns, arrays)], metadata=meta)
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), tmp)
