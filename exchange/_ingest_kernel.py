"""The one compiled pass of ``exchange.ingest``: foreign fixed-size records → ORDER_DTYPE rows.

One kernel serves every layout: it is driven by a table of operations (``OP_*`` columns; one
row per sourced ORDER_DTYPE field, plus plain copies and constants merged into 8/4/2/1-byte
pieces; built and checked by ``exchange.ingest.RecordLayout``), so a new layout costs no
compile. Input and output are byte arrays; every load and store is an unaligned fixed-width
access (``_load*``/``_store*``: foreign C structs and ORDER_DTYPE's packed rows are not
aligned), so the kernel never touches a byte outside the fields the table names.
Records go through in blocks of ``BLOCK`` (both sides of a block stay in L1): each operation
runs over the whole block, and a conversion one step at a time (load, byte swap, sign, value
map or range check, store), so every branch is decided once per block, not once per record.

Invariants (the table's builder guarantees them; the kernel trusts them):
- every source ``[offset, offset + width)`` lies inside the foreign record, every destination
  inside the ORDER_DTYPE row, and ``base + n * itemsize <= len(buf)``, ``n <= len(out) / 78``;
- values travel as int64 bit patterns (an unsigned 64-bit source keeps its bits); a range check
  ``lo <= v <= hi`` runs only where the source type does not fit the target, a value map's
  entries fit the target and ``UNMAPPED`` marks a code the map lacks.
The kernel stops at the first record that fails a check and reports it in ``err``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["convert", "OP_SRC", "OP_SRC_OFF", "OP_DST_OFF", "OP_DST_WIDTH", "OP_CHECK", "OP_LO",
           "OP_HI", "OP_MAP_BASE", "OP_MAP_LO", "OP_MAP_LEN", "OP_CONST", "OP_COLUMNS",
           "SRC_CONST", "SRC_SIGNED", "SRC_SWAP", "UNMAPPED", "ERR_RANGE", "ERR_UNMAPPED"]

# the columns of one operation (an int64 row of the table)
(OP_SRC, OP_SRC_OFF, OP_DST_OFF, OP_DST_WIDTH, OP_CHECK, OP_LO, OP_HI, OP_MAP_BASE, OP_MAP_LO,
 OP_MAP_LEN, OP_CONST) = range(11)
OP_COLUMNS = 11
# OP_SRC: 0 for a constant, else the source width in bytes (1, 2, 4, 8) | these bits
SRC_CONST, SRC_SIGNED, SRC_SWAP = 0, 16, 32
UNMAPPED = -(1 << 63)        # a value-map entry for a code the map does not name
ERR_RANGE, ERR_UNMAPPED = 1, 2


def _loader(width: int):
    bits = ir.IntType(8 * width)

    @intrinsic
    def load(typingctx, buf, pos):
        """Return the ``width`` bytes of ``buf`` at ``pos`` (unaligned, little-endian) as int64,
        zero-extended."""
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            ptr = builder.bitcast(builder.gep(data, [args[1]]), bits.as_pointer())
            v = builder.load(ptr, align=1)
            return v if width == 8 else builder.zext(v, ir.IntType(64))
        return types.int64(buf, types.int64), codegen
    return load


def _storer(width: int):
    bits = ir.IntType(8 * width)

    @intrinsic
    def store(typingctx, buf, pos, value):
        """Write the low ``width`` bytes of int64 ``value`` to ``buf`` at ``pos`` (unaligned)."""
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            ptr = builder.bitcast(builder.gep(data, [args[1]]), bits.as_pointer())
            v = args[2] if width == 8 else builder.trunc(args[2], bits)
            builder.store(v, ptr, align=1)
            return context.get_dummy_value()
        return types.none(buf, types.int64, types.int64), codegen
    return store


_load1, _load2, _load4, _load8 = (_loader(w) for w in (1, 2, 4, 8))
_store1, _store2, _store4, _store8 = (_storer(w) for w in (1, 2, 4, 8))


@njit(cache=True, inline="always")
def _swap(v, width):
    """Return the low ``width`` bytes of ``v`` in reverse order (big-endian → little-endian)."""
    r = 0
    for _ in range(width):
        r = (r << 8) | (v & 0xFF)
        v >>= 8
    return r


BLOCK = 256   # records per block: a block's input and output rows stay in L1 between operations


@njit(cache=True, inline="always")
def _gather(buf, at, itemsize, width, vals, m):
    """Load ``m`` fields of ``width`` bytes, ``itemsize`` apart from ``at``, into ``vals``."""
    if width == 8:
        for r in range(m):
            vals[r] = _load8(buf, at + r * itemsize)
    elif width == 4:
        for r in range(m):
            vals[r] = _load4(buf, at + r * itemsize)
    elif width == 1:
        for r in range(m):
            vals[r] = _load1(buf, at + r * itemsize)
    else:
        for r in range(m):
            vals[r] = _load2(buf, at + r * itemsize)


@njit(cache=True, inline="always")
def _scatter(out, to, row, width, vals, m):
    """Store the low ``width`` bytes of ``vals[:m]`` ``row`` bytes apart from ``to``."""
    if width == 8:
        for r in range(m):
            _store8(out, to + r * row, vals[r])
    elif width == 4:
        for r in range(m):
            _store4(out, to + r * row, vals[r])
    elif width == 1:
        for r in range(m):
            _store1(out, to + r * row, vals[r])
    else:
        for r in range(m):
            _store2(out, to + r * row, vals[r])


@njit(cache=True, inline="always")
def _fill(out, to, row, width, v, m):
    """Store the low ``width`` bytes of ``v`` ``m`` times, ``row`` bytes apart from ``to``."""
    if width == 8:
        for r in range(m):
            _store8(out, to + r * row, v)
    elif width == 4:
        for r in range(m):
            _store4(out, to + r * row, v)
    elif width == 1:
        for r in range(m):
            _store1(out, to + r * row, v)
    else:
        for r in range(m):
            _store2(out, to + r * row, v)


@njit(cache=True, inline="always")
def _copy(buf, at, itemsize, out, to, row, width, m):
    """Copy ``m`` fields of ``width`` bytes, ``itemsize`` apart from ``at``, to ``row`` bytes
    apart from ``to``."""
    if width == 8:
        for r in range(m):
            _store8(out, to + r * row, _load8(buf, at + r * itemsize))
    elif width == 4:
        for r in range(m):
            _store4(out, to + r * row, _load4(buf, at + r * itemsize))
    elif width == 1:
        for r in range(m):
            _store1(out, to + r * row, _load1(buf, at + r * itemsize))
    else:
        for r in range(m):
            _store2(out, to + r * row, _load2(buf, at + r * itemsize))


@njit(cache=True)
def convert(buf, base, itemsize, n, ops, maps, out, row, err):
    """Convert records ``0..n-1`` of ``buf`` (record i at ``base + i * itemsize``) into the
    ORDER_DTYPE rows (``row`` bytes each) of byte array ``out`` as the ``ops`` table says. Return
    -1 when every record converted, else the index of the first record that failed; then ``err``
    holds ``[op row, ERR_RANGE or ERR_UNMAPPED, the foreign value]``.

    Works a block of records at a time, one operation over the whole block and one step of it
    (load, swap, sign, map or check, store) over the block's values at a time: each branch is
    decided once per block, and every inner loop is a tight loop the compiler can schedule."""
    vals = np.empty(BLOCK, np.int64)
    for b0 in range(0, n, BLOCK):
        m = min(n - b0, BLOCK)
        for k in range(ops.shape[0]):
            src = ops[k, OP_SRC]
            dw = ops[k, OP_DST_WIDTH]
            to = ops[k, OP_DST_OFF] + b0 * row
            if src == SRC_CONST:
                _fill(out, to, row, dw, ops[k, OP_CONST], m)
                continue
            if src == dw and not ops[k, OP_CHECK] and not ops[k, OP_MAP_LEN]:   # plain copy
                _copy(buf, base + b0 * itemsize + ops[k, OP_SRC_OFF], itemsize, out, to, row,
                      dw, m)
                continue
            width = src & 15
            _gather(buf, base + b0 * itemsize + ops[k, OP_SRC_OFF], itemsize, width, vals, m)
            if src & SRC_SWAP:
                for r in range(m):
                    vals[r] = _swap(vals[r], width)
            if src & SRC_SIGNED and width < 8:
                half = 1 << (8 * width - 1)
                for r in range(m):
                    vals[r] = (vals[r] ^ half) - half
            if ops[k, OP_MAP_LEN]:
                lo, size, at = ops[k, OP_MAP_LO], ops[k, OP_MAP_LEN], ops[k, OP_MAP_BASE]
                for r in range(m):
                    j = vals[r] - lo
                    code = maps[at + j] if 0 <= j < size else UNMAPPED
                    if code == UNMAPPED:
                        err[0], err[1], err[2] = k, ERR_UNMAPPED, vals[r]
                        return b0 + r
                    vals[r] = code
            elif ops[k, OP_CHECK]:
                lo, hi = ops[k, OP_LO], ops[k, OP_HI]
                for r in range(m):
                    if vals[r] < lo or vals[r] > hi:
                        err[0], err[1], err[2] = k, ERR_RANGE, vals[r]
                        return b0 + r
            _scatter(out, to, row, dw, vals, m)
    return -1
