"""A numba intrinsic for a software prefetch of one array element (LLVM ``llvm.prefetch``).

A deep book spreads live orders over megabytes of arena and order index, so a cancel or a modify
usually misses every cache level. The batch kernel knows the messages to come: it prefetches the
index bucket, then the arena row, then the row's neighbours, several messages ahead, so those
misses overlap with the work on the current message. A prefetch is only a hint: it never faults
and never changes results.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the CPU to load ``arr[idx]`` into cache for reading (no effect on results)."""
    sig = types.void(arr, types.intp)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # rw=0 (read), locality=3 (keep in all cache levels), cache type=1 (data)
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
