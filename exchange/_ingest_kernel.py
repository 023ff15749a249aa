"""The one compiled pass of ``exchange.ingest``: foreign fixed-size records → ORDER_DTYPE rows.

One kernel serves every layout: it is driven by a table of operations (``OP_*`` columns, one row
per ORDER_DTYPE field, built and checked by ``exchange.ingest.RecordLayout``), so a new layout
costs no compile. Input and output are byte arrays; every load and store is an unaligned
fixed-width access (``_load``/``_store``: foreign C structs and ORDER_DTYPE's packed rows are
not aligned), so the kernel never reads or writes outside ``[p, p + width)`` of a record.

Invariants (the table's builder guarantees them; the kernel trusts them):
- every source ``[offset, offset + width)`` lies inside the foreign record, every destination
  inside the ORDER_DTYPE row, and ``base + n * itemsize <= len(buf)``, ``n <= len(out) / 78``;
- values travel as int64 bit patterns (an unsigned 64-bit source keeps its bits); a range check
  ``lo <= v <= hi`` runs only where the source type does not fit the target, a value map's
  entries fit the target and ``UNMAPPED`` marks a code the map lacks.
The kernel stops at the first record that fails a check and reports it in ``err``.
"""

from __future__ import annotations

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


@njit(cache=True)
def _value(buf, at, src, k, ops, maps, err):
    """Return the converted value of operation ``k`` of the foreign field at ``at`` and whether it
    passed its range check or value map (if not, ``err`` says why)."""
    width = src & 15
    if width == 8:
        v = _load8(buf, at)
    elif width == 4:
        v = _load4(buf, at)
    elif width == 1:
        v = _load1(buf, at)
    else:
        v = _load2(buf, at)
    if src & SRC_SWAP:
        v = _swap(v, width)
    if src & SRC_SIGNED and width < 8:
        m = 1 << (8 * width - 1)
        v = (v ^ m) - m
    if ops[k, OP_MAP_LEN]:
        j = v - ops[k, OP_MAP_LO]
        if j < 0 or j >= ops[k, OP_MAP_LEN] or maps[ops[k, OP_MAP_BASE] + j] == UNMAPPED:
            err[0], err[1], err[2] = k, ERR_UNMAPPED, v
            return v, False
        return maps[ops[k, OP_MAP_BASE] + j], True
    if ops[k, OP_CHECK] and (v < ops[k, OP_LO] or v > ops[k, OP_HI]):
        err[0], err[1], err[2] = k, ERR_RANGE, v
        return v, False
    return v, True


@njit(cache=True, inline="always")
def _put(out, to, width, v):
    if width == 8:
        _store8(out, to, v)
    elif width == 4:
        _store4(out, to, v)
    elif width == 1:
        _store1(out, to, v)
    else:
        _store2(out, to, v)


@njit(cache=True)
def convert(buf, base, itemsize, n, ops, maps, out, row, err):
    """Convert records ``0..n-1`` of ``buf`` (record i at ``base + i * itemsize``) into the
    ORDER_DTYPE rows (``row`` bytes each) of byte array ``out`` as the ``ops`` table says. Return
    -1 when every record converted, else the index of the first record that failed; then ``err``
    holds ``[op row, ERR_RANGE or ERR_UNMAPPED, the foreign value]``.

    Works a block of records at a time, one operation over the whole block: each operation's
    branches are decided once per block, and a plain copy (a source of the target's width and
    byte order, unchecked) is a tight load/store loop."""
    nops = ops.shape[0]
    for b0 in range(0, n, BLOCK):
        b1 = min(n, b0 + BLOCK)
        for k in range(nops):
            src = ops[k, OP_SRC]
            dw = ops[k, OP_DST_WIDTH]
            to = ops[k, OP_DST_OFF] + b0 * row
            if src == SRC_CONST:
                v = ops[k, OP_CONST]
                for _ in range(b0, b1):
                    _put(out, to, dw, v)
                    to += row
                continue
            at = base + b0 * itemsize + ops[k, OP_SRC_OFF]
            if src == dw and ops[k, OP_CHECK] == 0 and ops[k, OP_MAP_LEN] == 0:
                if dw == 8:
                    for _ in range(b0, b1):
                        _store8(out, to, _load8(buf, at))
                        to += row
                        at += itemsize
                elif dw == 4:
                    for _ in range(b0, b1):
                        _store4(out, to, _load4(buf, at))
                        to += row
                        at += itemsize
                elif dw == 1:
                    for _ in range(b0, b1):
                        _store1(out, to, _load1(buf, at))
                        to += row
                        at += itemsize
                else:
                    for _ in range(b0, b1):
                        _store2(out, to, _load2(buf, at))
                        to += row
                        at += itemsize
                continue
            for i in range(b0, b1):
                v, ok = _value(buf, at, src, k, ops, maps, err)
                if not ok:
                    return i
                _put(out, to, dw, v)
                to += row
                at += itemsize
    return -1
