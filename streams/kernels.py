"""The compiled kernels' array types, their cache-line hint :func:`prefetch`, and :func:`warm`,
which compiles or loads them all.

Every numba kernel of moltscope is compiled ahead for the types it is given (an explicit
signature on its decorator, built from the aliases here): a process compiles a kernel, or loads
it from numba's cache beside its module, when the module is imported, never lazily on a first
call. That matters because numba's on-disk cache is not safe when two processes compile and
write the same kernel at once (numba issue #4807: a segfault): the install step (``make``) and
the test session compile every kernel in one process, by :func:`warm`, before any worker starts;
later processes only read the cache. A call with an array type no signature admits fails loudly
(``TypeError``), instead of compiling in whichever process meets it first.

>>> warm() == len(KERNEL_MODULES)
True
"""

from __future__ import annotations

import importlib

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

U8 = types.Array(types.uint8, 1, "C")
U8_RO = types.Array(types.uint8, 1, "C", readonly=True)  # a bytes buffer (np.frombuffer)
U32 = types.Array(types.uint32, 1, "C")
U64 = types.Array(types.uint64, 1, "C")
I32 = types.Array(types.int32, 1, "C")
I64 = types.Array(types.int64, 1, "C")
F64 = types.Array(types.float64, 1, "C")
B1 = types.Array(types.boolean, 1, "C")
# views into a packed record table (strided)
U64_A = types.Array(types.uint64, 1, "A")
I64_A = types.Array(types.int64, 1, "A")
F64_A = types.Array(types.float64, 1, "A")
B1_A = types.Array(types.boolean, 1, "A")
INT, UINT, FLOAT, BOOL = types.int64, types.uint64, types.float64, types.boolean


@intrinsic
def prefetch(typingctx: object, arr: types.Array, i: types.Integer) -> tuple[object, object]:
    """Ask the CPU for the cache line of ``arr[i]`` (LLVM's prefetch: a read, kept in every
    cache level; a hint, which changes no value): for a kernel whose look-ups miss the cache,
    asked for a pass ahead of the reads so that the misses overlap."""
    def codegen(context: object, builder: ir.IRBuilder, signature: object,
                args: tuple[object, object]) -> object:
        ary = context.make_array(arr)(context, builder, args[0])  # type: ignore[attr-defined]
        ptr = cgutils.get_item_pointer(context, builder, arr, ary, [args[1]])
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
            ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()  # type: ignore[attr-defined]
    return types.void(arr, i), codegen


KERNEL_MODULES = ("streams.textscan", "streams.state.cascade_kernels",
                  "streams.state.pagerank_kernels", "detectors.burst_kernels",
                  "detectors.surge_kernels", "streams.state.ngram_kernels",
                  "streams.state.cooperation_kernels", "detectors.supernode_kernels")


def warm() -> int:
    """Import every kernel module, which compiles its kernels or loads them from the cache;
    returns how many modules."""
    for name in KERNEL_MODULES:
        importlib.import_module(name)
    return len(KERNEL_MODULES)
