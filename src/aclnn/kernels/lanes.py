"""LLVM IR for 16-lane row kernels: float32, float16 or bfloat16 lanes loaded as float32,
rounded back and stored (plainly or streaming), and 16 x 16 blocks transposed.

The row kernels (`gelu_segments`, `smooth_l1_rows`) and the tiled kernel's staging build
their vector loops from these pieces inside Numba intrinsics. Conversions are exact on the
way in (float16 by fpext, bfloat16 by a 16-bit shift) and round to nearest-even on the way
out, as the scalar ones in `bits`. The CPU features the code picks instructions by are
read when a kernel is compiled (module flags, which tests change to build the portable
variants).
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, config
from numba.core.codegen import get_host_cpu_features
from numba.extending import intrinsic

from .bits import BF16, F16, F32, element_bytes, ir_rounded_bits, mark_nontemporal

LANES = 16
I16, I32, I64, F32T = ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()
VF, VI, VH, VHALF = (ir.VectorType(t, LANES) for t in (F32T, I32, I16, ir.HalfType()))
VMASK = ir.VectorType(ir.IntType(1), LANES)


def _target_features() -> set[str]:
    """The CPU features Numba compiles for (it honours NUMBA_CPU_FEATURES)."""
    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return set(features.split(","))


AVX512 = "+avx512f" in _target_features()  # vpermi2ps, cvttps2dq
BF16_CONVERT = "+avx512bf16" in _target_features()  # vcvtneps2bf16


def splat(vector_type: ir.VectorType, value) -> ir.Constant:
    """`value` in every lane."""
    return ir.Constant(vector_type, [value] * vector_type.count)


def broadcast(builder, value, vector_type: ir.VectorType):
    """The run-time scalar `value` in every lane."""
    first = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value, I32(0))
    return builder.shuffle_vector(first, first, splat(VI, 0))


def function(builder, name: str, result, arguments):
    """The declaration of the LLVM function or intrinsic `name`."""
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(result, arguments),
                                          name)


def as_i1(builder, flag):
    """A Numba boolean argument (i1 or i8) as an i1."""
    if flag.type == ir.IntType(1):
        return flag
    return builder.icmp_unsigned("!=", flag, ir.Constant(flag.type, 0))


def load_lanes(builder, code: int, pointer):
    """The 16 contiguous elements of the given code at the byte `pointer`, as float32."""
    if code == F32:
        return builder.load(builder.bitcast(pointer, VF.as_pointer()), align=1)
    words = builder.load(builder.bitcast(pointer, VH.as_pointer()), align=1)
    if code == F16:
        return builder.fpext(builder.bitcast(words, VHALF), VF)
    return builder.bitcast(builder.shl(builder.zext(words, VI), splat(VI, 16)), VF)


class _BFloat(ir.Type):
    """LLVM's bfloat type, which llvmlite does not define."""

    def __str__(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


def _bf16_converter(builder):
    """A function emitting float32 x 16 -> bfloat16 x 16 (as i16), round-to-nearest-even:
    `vcvtneps2bf16` where the CPU has it, whose flushing of subnormal inputs to zero is
    undone by the integer rounding in a branch for vectors that have one; else the integer
    rounding alone."""
    def by_integers(value):
        return builder.trunc(builder.lshr(ir_rounded_bits(builder, value, 16), splat(VI, 16)),
                             VH)

    if not BF16_CONVERT:
        return by_integers
    convert = function(builder, "llvm.x86.avx512bf16.cvtneps2bf16.512",
                       ir.VectorType(_BFloat(), LANES), [VF])
    classify = function(builder, "llvm.x86.avx512.fpclass.ps.512", VMASK, [VF, I32])

    def by_instruction(value):
        slot = cgutils.alloca_once(builder, VH)
        builder.store(builder.bitcast(builder.call(convert, [value]), VH), slot)
        subnormal = builder.call(classify, [value, I32(0x20)])
        with builder.if_then(builder.icmp_unsigned("!=", builder.bitcast(subnormal, I16),
                                                   I16(0)), likely=False):
            builder.store(builder.select(subnormal, by_integers(value), builder.load(slot)),
                          slot)
        return builder.load(slot)
    return by_instruction


def narrower(builder, code: int):
    """A function emitting float32 x 16 -> 16 elements of the given code (float16 and
    bfloat16 as i16 x 16), rounded to nearest-even."""
    if code == F16:
        return lambda value: builder.bitcast(builder.fptrunc(value, VHALF), VH)
    if code == BF16:
        return _bf16_converter(builder)
    return lambda value: value


def store(builder, code: int, elements, pointer, streaming=None) -> None:
    """Store 16 elements of the given code (from `narrower`) at the byte `pointer`. Where
    the i1 `streaming` is true, with a non-temporal store, which needs `pointer` aligned to
    the vector's size (64 bytes for float32, 32 for 16-bit codes) and leaves the stores
    weakly ordered until a fence (`bits.store_fence`). (LLVM folds a float16 vector's store
    into its conversion instruction, a plain store: `store_pair` streams float16.)"""
    target = builder.bitcast(pointer, elements.type.as_pointer())
    if streaming is None:
        builder.store(elements, target, align=element_bytes(code))
        return
    with builder.if_else(streaming) as (streamed, plain):
        with streamed:
            mark_nontemporal(builder, builder.store(elements, target,
                                                align=LANES * element_bytes(code)))
        with plain:
            builder.store(elements, target, align=element_bytes(code))



def store_pair(builder, first, second, pointer, streaming, zero) -> None:
    """Store two vectors of 16-bit elements (from `narrower`), one after the other, as one
    64-byte line at the byte `pointer` (aligned to 64 where the i1 `streaming` is true,
    which stores the line non-temporally, as `store` does). `zero`: an i16 that is 0 at
    run time but not provably so, or'ed into the line, so that LLVM cannot fold the store
    into float16's conversion instructions (a plain store: the non-temporal hint lost)."""
    line = builder.shuffle_vector(first, second, ir.Constant(ir.VectorType(I32, 2 * LANES),
                                                             list(range(2 * LANES))))
    lanes = ir.VectorType(I16, 2 * LANES)
    opaque = builder.insert_element(ir.Constant(lanes, ir.Undefined), zero, I32(0))
    line = builder.or_(line, builder.shuffle_vector(opaque, opaque,
                                                    ir.Constant(ir.VectorType(I32, 2 * LANES),
                                                                [0] * 2 * LANES)))
    target = builder.bitcast(pointer, line.type.as_pointer())
    with builder.if_else(streaming) as (streamed, plain):
        with streamed:
            mark_nontemporal(builder, builder.store(line, target, align=2 * LANES * 2))
        with plain:
            builder.store(line, target, align=2)


def _transpose_intrinsic(code: int):
    def transpose(typingctx, src, src_byte_index, src_step, dst, dst_index, dst_step):
        def codegen(context, builder, signature, args):
            s = context.make_array(signature.args[0])(context, builder, value=args[0]).data
            d = context.make_array(signature.args[3])(context, builder, value=args[3]).data
            lanes = []
            for j in range(LANES):
                at = builder.add(args[1], builder.mul(args[2], ir.Constant(args[2].type, j)))
                lanes.append(load_lanes(builder, code, builder.gep(s, [at])))
            for block in (8, 4, 2, 1):  # swap the off-diagonal blocks at every scale
                for j in range(LANES):
                    if j & block:
                        continue
                    low = [k if not k & block else LANES + k - block for k in range(LANES)]
                    high = [k + block if not k & block else LANES + k for k in range(LANES)]
                    a, b = lanes[j], lanes[j + block]
                    lanes[j] = builder.shuffle_vector(a, b, ir.Constant(VI, low))
                    lanes[j + block] = builder.shuffle_vector(a, b, ir.Constant(VI, high))
            for i in range(LANES):
                at = builder.add(args[4], builder.mul(args[5], ir.Constant(args[5].type, i)))
                builder.store(lanes[i], builder.bitcast(builder.gep(d, [at]), VF.as_pointer()),
                              align=4)
            return context.get_dummy_value()
        return types.none(src, types.intp, types.intp, dst, types.intp, types.intp), codegen
    return intrinsic(transpose)


_TRANSPOSE_F32, _TRANSPOSE_F16, _TRANSPOSE_BF16 = (_transpose_intrinsic(code)
                                                   for code in (F32, F16, BF16))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def split_row(code, n):
    """A row of n elements of the given code as (whole vectors of LANES, their bytes, the
    bytes of the partial vector left after them)."""
    vectors = n // LANES
    size = element_bytes(code)
    return vectors, size * LANES * vectors, size * (n - LANES * vectors)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def transpose_x16(code, src, src_byte_index, src_step, dst, dst_index, dst_step):
    """A 16 x 16 block of the given element code transposed in registers: the 16
    contiguous elements at src_byte_index + j * src_step (bytes) of the uint8 array `src`
    become, as float32, column j of the rows dst[dst_index + i * dst_step:][:16] of the
    float32 array `dst`."""
    if code == F32:
        _TRANSPOSE_F32(src, src_byte_index, src_step, dst, dst_index, dst_step)
    elif code == F16:
        _TRANSPOSE_F16(src, src_byte_index, src_step, dst, dst_index, dst_step)
    else:
        _TRANSPOSE_BF16(src, src_byte_index, src_step, dst, dst_index, dst_step)
