"""Foreign order records in: a fixed-size record layout mapped onto ORDER_DTYPE.

A ``RecordLayout`` says, for each ORDER_DTYPE field, where its value comes from in a foreign
record of ``itemsize`` bytes (a C struct array from ctypes or cffi, a memory-mapped file, a numpy
structured array): a ``ForeignField`` (byte offset, integer format, optional value map for
codes that differ, such as ``b"B"``/``b"S"`` for the side) or an int constant for a field the
foreign layout lacks. A field named nowhere is 0 (NEW, LIMIT, GTC, no flags, BUY, no stop, CONTINUOUS:
what ``np.zeros(n, ORDER_DTYPE)`` holds). Two ways in:

- ``convert(buffer, out=None)``: one compiled pass (numba, one kernel for every layout, driven
  by a table: a new layout compiles nothing) into ORDER_DTYPE rows; pass the same ``out`` for
  every batch of a stream and nothing is allocated per batch. Widening, sign and byte order are
  converted; a value that does not fit its ORDER_DTYPE field, or a code its value map lacks,
  raises InputError naming the record and the field.
- ``view(buffer)``: no copy at all, when every field comes from the foreign record with exactly
  ORDER_DTYPE's type (``viewable``). When the foreign record is ORDER_DTYPE's 78 bytes at some
  offset (a prefix, or padding around them) the view's dtype *is* ORDER_DTYPE: ``Engine.process``
  takes it, with no copy when ``itemsize`` is 78 and one C ``memcpy`` pass of its own otherwise
  (a strided batch is made contiguous). A view with the fields at other offsets is a structured
  array of the foreign ``itemsize``: columns read without a copy, but ``Engine.process``
  refuses it (it takes ORDER_DTYPE only); ``convert`` it (or ``view.astype(ORDER_DTYPE)``).

Invariants: the layout is checked once, when it is built (field names, formats, offsets inside
the record, no two fields overlapping, value maps and constants that fit their fields); a buffer
is checked before anything is allocated for it (a whole number of records; ``out`` big enough).
The kernel reads exactly the bytes the layout names and writes every byte of each output row, so
equal foreign bytes give equal ORDER_DTYPE bytes.
Known limits: integer fields only (floats are not ticks: scale prices before they come here);
the host must be little-endian (ORDER_DTYPE is); a value map spans at most 65,536 codes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .errors import InputError, UsageError
from .schema import ORDER_DTYPE

__all__ = ["ForeignField", "RecordLayout"]

MAP_SPAN = 1 << 16          # most codes one value map's table covers (max key - min key + 1)
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_TARGETS = {name: (ORDER_DTYPE.fields[name][0], ORDER_DTYPE.fields[name][1])
            for name in ORDER_DTYPE.names}    # name -> (dtype, offset in the row)


@dataclass(frozen=True)
class ForeignField:
    """Where one ORDER_DTYPE field comes from in the foreign record.

    ``source``: the foreign field's name (``RecordLayout.from_dtype``) or its byte offset.
    ``format``: the numpy integer format of its bytes (``"<i4"``, ``">u8"``, ``"u1"``, ``"S1"``
    for a C char, ``"?"``); None takes the foreign dtype's (by name only).
    ``values``: foreign code -> ORDER_DTYPE code, for enum fields whose codes differ (keys may be
    one-character str or bytes for a one-byte source: ``{"B": Side.BUY, "S": Side.SELL}``); a
    code the map lacks makes ``convert`` raise InputError.
    """

    source: str | int
    format: str | np.dtype | None = None
    values: Mapping | None = None


def _range(dt: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def _bits(v: int) -> int:
    """``v`` as the int64 bit pattern the kernel carries (values of 2**63 and above wrap)."""
    return v - (1 << 64) if v > _I64_MAX else v


def _int(value, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{what} must be an int; got {value!r}")
    return int(value)


def _format(name: str, fmt) -> tuple[np.dtype, bool, bool]:
    """Return (dtype, signed, byte-swapped) of a foreign field's format, or raise InputError."""
    try:
        dt = np.dtype(fmt)
    except TypeError as exc:
        raise InputError(f"field {name!r}: {fmt!r} is not a numpy format ({exc})") from None
    kind = dt.kind
    if dt.shape or dt.names or kind not in "iubS" or dt.itemsize not in (1, 2, 4, 8) \
            or (kind in "bS" and dt.itemsize != 1):
        hint = " (scale prices to integer ticks first)" if kind == "f" else ""
        raise InputError(f"field {name!r}: foreign format {dt} is not an integer of 1, 2, 4 or 8 "
                         f"bytes, a one-byte char or a bool{hint}")
    swapped = dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big")
    return dt, kind == "i", swapped and dt.itemsize > 1


@dataclass(frozen=True)
class _Source:
    offset: int
    dtype: np.dtype          # as given (byte order included)
    signed: bool
    swapped: bool
    values: dict | None      # key (python int) -> ORDER_DTYPE code


class RecordLayout:
    """A foreign fixed-size record mapped onto ORDER_DTYPE (see the module docstring).

    ``RecordLayout(itemsize, fields)``: ``fields`` maps ORDER_DTYPE field names to a
    ``ForeignField`` (``source`` a byte offset, ``format`` given) or an int constant; fields not
    named are 0.
    Raises InputError naming the field for an unknown field name, a format that is not a 1-, 2-,
    4- or 8-byte integer, a field outside the record or overlapping another, a constant or a
    value-map entry that does not fit its ORDER_DTYPE field, a value map wider than MAP_SPAN.
    """

    def __init__(self, itemsize: int, fields: Mapping[str, ForeignField | int]):
        self.itemsize = _int(itemsize, "itemsize")
        if self.itemsize < 1:
            raise InputError(f"itemsize must be at least 1; got {self.itemsize}")
        if not isinstance(fields, Mapping):
            raise InputError(f"fields must be a mapping of ORDER_DTYPE field names; got "
                             f"{type(fields).__name__}")
        self._sources: dict[str, _Source] = {}
        self._constants: dict[str, int] = {}
        for name, spec in fields.items():
            if name not in _TARGETS:
                raise InputError(f"field {name!r} is not an ORDER_DTYPE field (those are "
                                 f"{', '.join(ORDER_DTYPE.names)})")
            if isinstance(spec, ForeignField):
                self._sources[name] = self._source(name, spec)
            else:
                lo, hi = _range(_TARGETS[name][0])
                v = _int(spec, f"field {name!r}: a constant")
                if not lo <= v <= hi:
                    raise InputError(f"field {name!r}: constant {v} is outside {name}'s range "
                                     f"[{lo}, {hi}]")
                self._constants[name] = v
        spans = sorted((s.offset, s.offset + s.dtype.itemsize, n) for n, s in self._sources.items())
        for (a0, a1, a), (b0, _, b) in zip(spans, spans[1:]):
            if b0 < a1:
                raise InputError(f"field {b!r} (foreign bytes {b0}..) overlaps field {a!r} "
                                 f"(foreign bytes {a0}..{a1 - 1})")
        self._ops, self._maps, self._op_field = self._table()

    @classmethod
    def from_dtype(cls, dtype, fields: Mapping[str, ForeignField | str | int] | None = None
                   ) -> RecordLayout:
        """Return the layout of records of numpy structured ``dtype`` (``np.dtype(ctypes struct)``
        works). ``fields`` maps ORDER_DTYPE names to a foreign field name, a ``ForeignField`` (its
        ``source`` a foreign name or offset) or an int constant; None takes every ORDER_DTYPE
        field the dtype has by the same name. Raises InputError for a dtype that is not
        structured, a foreign name the dtype lacks, and everything ``RecordLayout`` checks."""
        try:
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise InputError(f"dtype: {dtype!r} is not a numpy dtype ({exc})") from None
        if dt.names is None:
            raise InputError(f"dtype must be a structured dtype (named fields); got {dt}")
        if fields is None:
            fields = {n: n for n in ORDER_DTYPE.names if n in dt.names}
        if not isinstance(fields, Mapping):
            raise InputError(f"fields must be a mapping of ORDER_DTYPE field names; got "
                             f"{type(fields).__name__}")
        resolved: dict[str, ForeignField | int] = {}
        for name, spec in fields.items():
            if isinstance(spec, str):
                spec = ForeignField(spec)
            if isinstance(spec, ForeignField) and isinstance(spec.source, str):
                if spec.source not in dt.names:
                    raise InputError(f"field {name!r}: the foreign dtype has no field "
                                     f"{spec.source!r} (it has {', '.join(dt.names)})")
                fdt, off = dt.fields[spec.source][:2]
                spec = ForeignField(off, fdt if spec.format is None else spec.format, spec.values)
            resolved[name] = spec
        return cls(dt.itemsize, resolved)

    # ---------------------------------------------------------------- checking the layout
    def _source(self, name: str, spec: ForeignField) -> _Source:
        off = spec.source
        if isinstance(off, str):
            raise InputError(f"field {name!r}: source {off!r} is a name; names need "
                             f"RecordLayout.from_dtype (or give the byte offset)")
        off = _int(off, f"field {name!r}: source offset")
        if spec.format is None:
            raise InputError(f"field {name!r}: a source given by offset needs a format")
        dt, signed, swapped = _format(name, spec.format)
        if off < 0 or off + dt.itemsize > self.itemsize:
            raise InputError(f"field {name!r}: foreign bytes {off}..{off + dt.itemsize - 1} lie "
                             f"outside the {self.itemsize}-byte record")
        values = None
        if spec.values is not None:
            values = self._value_map(name, spec.values, dt)
        return _Source(off, dt, signed, swapped, values)

    @staticmethod
    def _value_map(name: str, values, dt: np.dtype) -> dict:
        if not isinstance(values, Mapping) or not values:
            raise InputError(f"field {name!r}: values must be a non-empty mapping of foreign "
                             f"codes to ORDER_DTYPE codes; got {values!r}")
        s_lo, s_hi = (0, 255) if dt.kind in "bS" else _range(dt)
        t_lo, t_hi = _range(_TARGETS[name][0])
        out = {}
        for key, code in values.items():
            k = key
            if isinstance(key, str) and len(key) == 1:
                k = ord(key)
            elif isinstance(key, (bytes, np.bytes_)) and len(key) == 1:
                k = key[0]
            k = _int(k, f"field {name!r}: value-map key")
            if not s_lo <= k <= s_hi or (isinstance(key, (str, bytes)) and dt.itemsize != 1):
                raise InputError(f"field {name!r}: value-map key {key!r} cannot occur in a "
                                 f"foreign {dt} field")
            c = _int(code, f"field {name!r}: value-map code for {key!r}")
            if not t_lo <= c <= t_hi or c == _I64_MIN:
                raise InputError(f"field {name!r}: value-map code {c} for {key!r} is outside "
                                 f"{name}'s range [{t_lo}, {t_hi}]")
            if k in out:
                raise InputError(f"field {name!r}: value-map key {key!r} given twice")
            out[k] = c
        keys = [_bits(k) for k in out]
        if max(keys) - min(keys) >= MAP_SPAN:
            raise InputError(f"field {name!r}: value-map keys span {max(keys) - min(keys) + 1} "
                             f"codes; at most {MAP_SPAN}")
        return out

    def _table(self):
        """Return the kernel's operations table, the value maps' entries and, per operation, the
        ORDER_DTYPE field it writes (None for merged plain copies and constants, which cannot
        fail). Plain copies adjacent in both records are merged, and constants adjacent in the
        row, into as few 8/4/2/1-byte operations as cover them."""
        from ._ingest_kernel import (      # numba loads here, not when exchange is imported
            OP_CHECK, OP_COLUMNS, OP_CONST, OP_DST_OFF, OP_DST_WIDTH, OP_HI, OP_LO, OP_MAP_BASE,
            OP_MAP_LEN, OP_MAP_LO, OP_SRC, OP_SRC_OFF, SRC_SIGNED, SRC_SWAP, UNMAPPED,
        )
        template = np.zeros(1, ORDER_DTYPE)
        for name, v in self._constants.items():
            template[name] = v
        tbytes = template.tobytes()
        rows, maps, fields = [], [], []
        plain, const = [], []            # runs: [src_off, dst_off, length] / [dst_off, length]
        for name in ORDER_DTYPE.names:
            tdt, toff = _TARGETS[name]
            s = self._sources.get(name)
            if s is None:
                if const and const[-1][0] + const[-1][1] == toff:
                    const[-1][1] += tdt.itemsize
                else:
                    const.append([toff, tdt.itemsize])
                continue
            w = s.dtype.itemsize
            s_lo, s_hi = (0, 255) if s.dtype.kind in "bS" else _range(s.dtype)
            t_lo, t_hi = _range(tdt)
            lo, hi = max(s_lo, t_lo), min(s_hi, t_hi)
            check = (lo, hi) != (s_lo, s_hi)
            if s.values is None and not check and not s.swapped and w == tdt.itemsize:
                last = plain[-1] if plain else None
                if last and last[0] + last[2] == s.offset and last[1] + last[2] == toff:
                    last[2] += w
                else:
                    plain.append([s.offset, toff, w])
                continue
            row = [0] * OP_COLUMNS
            row[OP_SRC] = w | (SRC_SIGNED if s.signed else 0) | (SRC_SWAP if s.swapped else 0)
            row[OP_SRC_OFF], row[OP_DST_OFF], row[OP_DST_WIDTH] = s.offset, toff, tdt.itemsize
            row[OP_CHECK], row[OP_LO], row[OP_HI] = int(check), _bits(lo), _bits(hi)
            if s.values is not None:
                keys = {_bits(k): c for k, c in s.values.items()}
                k0 = min(keys)
                table = [UNMAPPED] * (max(keys) - k0 + 1)
                for k, c in keys.items():
                    table[k - k0] = _bits(c)
                row[OP_MAP_BASE], row[OP_MAP_LO], row[OP_MAP_LEN] = len(maps), k0, len(table)
                maps += table
            rows.append(row)
            fields.append(name)
        for src_off, dst_off, length in plain:
            for at, w in _pieces(length):
                row = [0] * OP_COLUMNS
                row[OP_SRC], row[OP_SRC_OFF], row[OP_DST_OFF], row[OP_DST_WIDTH] = \
                    w, src_off + at, dst_off + at, w
                rows.append(row)
                fields.append(None)
        for dst_off, length in const:
            for at, w in _pieces(length):
                row = [0] * OP_COLUMNS
                row[OP_DST_OFF], row[OP_DST_WIDTH] = dst_off + at, w
                row[OP_CONST] = int.from_bytes(tbytes[dst_off + at: dst_off + at + w], "little",
                                               signed=True)
                rows.append(row)
                fields.append(None)
        ops = np.array(rows, np.int64).reshape(-1, OP_COLUMNS)
        return ops, np.array(maps or [0], np.int64), fields

    # ---------------------------------------------------------------- what it tells
    @property
    def fields(self) -> dict:
        """Return ORDER_DTYPE field name -> ``ForeignField`` (offset, format, value map as given,
        normalised) or int constant, for every field the layout names."""
        out: dict = {n: ForeignField(s.offset, s.dtype.str, s.values)
                     for n, s in self._sources.items()}
        out.update(self._constants)
        return out

    @property
    def viewable(self) -> bool:
        """Return True when every ORDER_DTYPE field comes from the foreign record with exactly
        its ORDER_DTYPE type and no value map: ``view`` needs no conversion."""
        return self._why_not_viewable() is None

    def _why_not_viewable(self) -> str | None:
        for name in ORDER_DTYPE.names:
            s = self._sources.get(name)
            if s is None:
                return f"field {name!r} is not in the foreign record"
            if s.values is not None:
                return f"field {name!r} has a value map"
            if s.dtype != _TARGETS[name][0]:
                return (f"field {name!r} is {s.dtype} in the foreign record, "
                        f"{_TARGETS[name][0]} in ORDER_DTYPE")
        return None

    def __repr__(self) -> str:
        return f"RecordLayout({self.itemsize}, {self.fields!r})"

    # ---------------------------------------------------------------- buffers
    def _records(self, buffer) -> tuple[np.ndarray, int]:
        """Return ``buffer`` as a read-only byte array and its number of records, or raise."""
        if isinstance(buffer, np.ndarray):
            if buffer.dtype.hasobject:
                raise UsageError("buffer: an array of Python objects holds no records")
            if buffer.dtype.names is not None and buffer.dtype.itemsize != self.itemsize:
                raise InputError(f"buffer: records of {buffer.dtype.itemsize} bytes; the layout's "
                                 f"are {self.itemsize}")
            raw = np.ascontiguousarray(buffer).reshape(-1).view(np.uint8)
        else:
            try:
                raw = np.frombuffer(buffer, np.uint8)
            except (TypeError, ValueError) as exc:
                raise UsageError(f"buffer must be a numpy array or a bytes-like object; got "
                                 f"{type(buffer).__name__} ({exc})") from None
        n, rest = divmod(raw.size, self.itemsize)
        if rest:
            raise InputError(f"buffer: {raw.size} bytes are not a whole number of "
                             f"{self.itemsize}-byte records ({rest} bytes left over)")
        return raw, n

    def count(self, buffer) -> int:
        """Return how many records ``buffer`` holds. Raises as ``convert`` does for its size."""
        return self._records(buffer)[1]

    def convert(self, buffer, out: np.ndarray | None = None) -> np.ndarray:
        """Return the ORDER_DTYPE rows of the records in ``buffer`` (a numpy array, bytes,
        bytearray, memoryview, mmap, a ctypes array: any C-contiguous buffer; a non-contiguous
        numpy array is copied first). With ``out`` (a C-contiguous ORDER_DTYPE array of at least
        as many rows) the rows are written there and ``out[:n]`` is returned: nothing allocated.

        Raises InputError when the buffer is not a whole number of records, or naming the
        record, the field and the value when a value does not fit its ORDER_DTYPE field or a code
        is not in the field's value map (rows before that record are converted; the rest of
        ``out`` is unspecified); UsageError for an ``out`` that is not such an array.
        """
        if sys.byteorder != "little":
            raise UsageError("RecordLayout.convert needs a little-endian host (ORDER_DTYPE is)")
        raw, n = self._records(buffer)
        if raw.flags.writeable:
            raw = raw.view()
            raw.flags.writeable = False     # the kernel is compiled for read-only input only
        if out is None:
            out = np.empty(n, ORDER_DTYPE)
        elif not (isinstance(out, np.ndarray) and out.dtype == ORDER_DTYPE and out.ndim == 1
                  and out.flags.c_contiguous and out.flags.writeable):
            raise UsageError(f"convert(out=...) takes a writeable C-contiguous 1-d ORDER_DTYPE "
                             f"array; got {getattr(out, 'dtype', type(out).__name__)}")
        elif len(out) < n:
            raise UsageError(f"convert(out=...) has room for {len(out)} rows; the buffer holds {n}")
        if n == 0:
            return out[:0]
        from ._ingest_kernel import convert
        err = np.zeros(3, np.int64)
        bad = convert(raw, 0, self.itemsize, n, self._ops, self._maps,
                      out.view(np.uint8), ORDER_DTYPE.itemsize, err)
        if bad >= 0:
            raise self._error(int(bad), *(int(x) for x in err))
        return out[:n]

    def _error(self, record: int, op: int, why: int, value: int) -> InputError:
        from ._ingest_kernel import ERR_UNMAPPED
        name = self._op_field[op]
        s = self._sources[name]
        if not s.signed and value < 0:
            value += 1 << 64
        where = (f"record {record}: field {name!r} (foreign bytes {s.offset}.."
                 f"{s.offset + s.dtype.itemsize - 1} as {s.dtype})")
        if why == ERR_UNMAPPED:
            show = (lambda k: repr(bytes([k]))) if s.dtype.kind == "S" else repr
            known = ", ".join(show(k) for k in sorted(s.values))
            return InputError(f"{where}: code {show(value)} is not in its value map ({known})")
        lo, hi = _range(_TARGETS[name][0])
        return InputError(f"{where}: value {value} is outside {name}'s range [{lo}, {hi}]")

    def view(self, buffer) -> np.ndarray:
        """Return the records of ``buffer`` as a numpy array with ORDER_DTYPE's field names, no
        copy: of dtype ORDER_DTYPE itself when the foreign record holds ORDER_DTYPE's packed 78
        bytes at one offset (strided when ``itemsize`` > 78), else a structured dtype with the
        foreign offsets and itemsize (see the module docstring for what the engine accepts).
        Read-only when the buffer is; a non-contiguous numpy array is copied first (the view is
        then of that copy). Raises UsageError naming the field when the layout is not
        ``viewable``, and what ``convert`` raises for the buffer's size."""
        why = self._why_not_viewable()
        if why is not None:
            raise UsageError(f"this layout needs convert(), not view(): {why}")
        raw, n = self._records(buffer)
        shift = {self._sources[k].offset - _TARGETS[k][1] for k in ORDER_DTYPE.names}
        c = shift.pop() if len(shift) == 1 else -1
        if 0 <= c and c + ORDER_DTYPE.itemsize <= self.itemsize:
            dt, offset = ORDER_DTYPE, c
        else:
            dt = np.dtype({"names": list(ORDER_DTYPE.names),
                           "formats": [_TARGETS[k][0] for k in ORDER_DTYPE.names],
                           "offsets": [self._sources[k].offset for k in ORDER_DTYPE.names],
                           "itemsize": self.itemsize})
            offset = 0
        if n == 0:
            return np.zeros(0, dt)
        return np.ndarray((n,), dt, buffer=raw, offset=offset, strides=(self.itemsize,))


def _pieces(length: int):
    """Yield (offset, width) of the fewest 8/4/2/1-byte pieces that cover ``length`` bytes."""
    at = 0
    for w in (8, 4, 2, 1):
        while length - at >= w:
            yield at, w
            at += w
