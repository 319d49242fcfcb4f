"""Typed loads and stores on raw byte buffers, and float16/bfloat16 conversions in registers.

Kernels receive every operand as the uint8 buffer of its allocation plus byte offsets, so
one compiled kernel serves every dtype combination; these intrinsics read and write the
element types in place. float16 <-> float32 uses LLVM's fpext/fptrunc (F16C instructions,
round-to-nearest-even) where the target has F16C, and the same conversions in integer
arithmetic elsewhere (a baseline x86-64 would otherwise call compiler-rt's __extendhfsf2,
which Numba's JIT does not have); bfloat16 uses shifts with round-to-nearest-even.
"""

from __future__ import annotations

import functools
import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, config
from numba.core.codegen import get_host_cpu_features
from numba.extending import intrinsic, register_jitable

F32, F16, BF16 = 0, 1, 2  # element codes the kernels dispatch on


def target_features() -> set[str]:
    """The CPU features Numba compiles for (it honours NUMBA_CPU_FEATURES)."""
    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return set(features.split(","))


@functools.cache
def cpu_vendor() -> str:
    """The vendor string of the CPU this process runs on ("GenuineIntel", "AuthenticAMD"),
    or "" where the system does not say: for choices whose cost was measured per vendor
    (the microarchitecture, not the instruction set Numba compiles for). Read once."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    processor = platform.processor()
    return next((v for v in ("GenuineIntel", "AuthenticAMD") if v in processor), "")


F16C = "+f16c" in target_features() or platform.machine().lower() in ("aarch64", "arm64")
CACHE_LINE_BYTES = 64
STREAM_BYTES = 8 << 20  # outputs from this size are stored non-temporally (not cached)


@register_jitable
def element_bytes(code):
    """Bytes per element of the given code (in Python and in compiled code)."""
    return 4 if code == F32 else 2

_I16, _I32, _F32T, _HALF = ir.IntType(16), ir.IntType(32), ir.FloatType(), ir.HalfType()
_VEC16 = ir.VectorType(_F32T, 16)


def _element_pointer(context, builder, array_type, array, byte_index, element_type):
    data = context.make_array(array_type)(context, builder, value=array).data
    pointer = builder.gep(data, [byte_index])
    return builder.bitcast(pointer, element_type.as_pointer())


def _load_intrinsic(element_type, result_type, align: int, doc: str):
    def load(typingctx, buf, byte_index):
        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1],
                                   element_type)
            return builder.load(ptr, align=align)
        return result_type(buf, byte_index), codegen
    load.__doc__ = doc
    return intrinsic(load)


def _store_intrinsic(element_type, value_type, align: int, doc: str):
    def store(typingctx, buf, byte_index, value):
        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1],
                                   element_type)
            builder.store(args[2], ptr, align=align)
            return context.get_dummy_value()
        return types.none(buf, byte_index, value_type), codegen
    store.__doc__ = doc
    return intrinsic(store)


load_f32 = _load_intrinsic(_F32T, types.float32, 4,
                           "The float32 at `byte_index` of the uint8 array `buf`.")
load_u16 = _load_intrinsic(_I16, types.uint16, 2,
                           "The 16-bit word at `byte_index` of the uint8 array `buf`.")
store_f32 = _store_intrinsic(_F32T, types.float32, 4,
                             "Write the float32 `value` at `byte_index` of `buf`.")
store_u16 = _store_intrinsic(_I16, types.uint16, 2,
                             "Write the 16-bit word `value` at `byte_index` of `buf`.")


def _like(value, element_type, constant) -> ir.Constant:
    """A constant of `element_type` shaped like `value`: scalar, or in every lane."""
    if isinstance(value.type, ir.VectorType):
        count = value.type.count
        return ir.Constant(ir.VectorType(element_type, count), [constant] * count)
    return ir.Constant(element_type, constant)


def _shaped(value, element_type):
    return (ir.VectorType(element_type, value.type.count)
            if isinstance(value.type, ir.VectorType) else element_type)


def ir_widen_half(builder, bits):
    """float16 bits (i16, or a vector of them) -> float32 (exact; a NaN comes back quiet,
    as vcvtph2ps gives it)."""
    if F16C:
        return builder.fpext(builder.bitcast(bits, _shaped(bits, _HALF)), _shaped(bits, _F32T))
    h = builder.zext(bits, _shaped(bits, _I32))
    magnitude = builder.and_(h, _like(h, _I32, 0x7FFF))
    shifted = builder.shl(magnitude, _like(h, _I32, 13))
    # the exponent rebiased by a multiplication: exact, float16 subnormals included
    finite = builder.fmul(builder.bitcast(shifted, _shaped(h, _F32T)),
                          _like(h, _F32T, float(2.0 ** 112)))
    special = builder.or_(shifted, _like(h, _I32, 0x7F800000))
    quiet = builder.icmp_unsigned(">", magnitude, _like(h, _I32, 0x7C00))
    special = builder.select(quiet, builder.or_(special, _like(h, _I32, 0x00400000)), special)
    is_special = builder.icmp_unsigned(">=", magnitude, _like(h, _I32, 0x7C00))
    value = builder.select(is_special, special, builder.bitcast(finite, _shaped(h, _I32)))
    sign = builder.shl(builder.and_(h, _like(h, _I32, 0x8000)), _like(h, _I32, 16))
    return builder.bitcast(builder.or_(value, sign), _shaped(h, _F32T))


def ir_narrow_half(builder, value):
    """float32 (or a vector of them) -> float16 bits, round-to-nearest-even; NaN stays NaN
    (quiet, the payload's top bits kept), overflow gives inf."""
    if F16C:
        return builder.bitcast(builder.fptrunc(value, _shaped(value, _HALF)),
                               _shaped(value, _I16))
    x = builder.bitcast(value, _shaped(value, _I32))
    sign = builder.and_(x, _like(x, _I32, 0x80000000))
    a = builder.xor(x, sign)
    # below 2**-14 the float16 result is subnormal: adding 0.5 rounds it into place (RNE)
    tiny = builder.fadd(builder.bitcast(a, _shaped(x, _F32T)), _like(x, _F32T, 0.5))
    tiny = builder.sub(builder.bitcast(tiny, _shaped(x, _I32)), _like(x, _I32, 0x3F000000))
    odd = builder.and_(builder.lshr(a, _like(x, _I32, 13)), _like(x, _I32, 1))
    rebiased = builder.add(builder.add(a, _like(x, _I32, 0xC8000FFF)), odd)
    normal = builder.lshr(rebiased, _like(x, _I32, 13))
    result = builder.select(builder.icmp_unsigned("<", a, _like(x, _I32, 0x38800000)), tiny,
                            normal)
    result = builder.select(builder.icmp_unsigned(">=", a, _like(x, _I32, 0x47800000)),
                            _like(x, _I32, 0x7C00), result)
    nan = builder.or_(builder.and_(builder.lshr(a, _like(x, _I32, 13)), _like(x, _I32, 0x3FF)),
                      _like(x, _I32, 0x7E00))
    result = builder.select(builder.icmp_unsigned(">", a, _like(x, _I32, 0x7F800000)), nan,
                            result)
    result = builder.or_(result, builder.lshr(sign, _like(x, _I32, 16)))
    return builder.trunc(result, _shaped(x, _I16))


@intrinsic
def half_to_f32(typingctx, bits):
    """float16 bits -> float32 (exact)."""
    def codegen(context, builder, signature, args):
        return ir_widen_half(builder, args[0])
    return types.float32(types.uint16), codegen


@intrinsic
def f32_to_half(typingctx, value):
    """float32 -> float16 bits, round-to-nearest-even (NaN stays NaN, overflow gives inf)."""
    def codegen(context, builder, signature, args):
        return ir_narrow_half(builder, args[0])
    return types.uint16(types.float32), codegen


@intrinsic
def f32_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the uint32 `bits`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _F32T)
    return types.float32(types.uint32), codegen


_SHIFT = np.uint32(16)
_QUIET_BIT = 1 << 22


def mark_nontemporal(builder, store_instruction) -> None:
    """Mark an LLVM store non-temporal (`movnt`: the line is not read before it is
    written; weakly ordered until a `store_fence`)."""
    store_instruction.set_metadata("nontemporal", builder.module.add_metadata([_i32(1)]))


@intrinsic
def stream_f32x16(typingctx, dst, dst_byte_index, src, src_index, vectors):
    """Copy 16 * `vectors` floats from the array `src` (float32, from element `src_index`,
    or uint8, from byte `src_index`) to the uint8 array `dst` at `dst_byte_index`, which
    must be 64-byte aligned, with non-temporal stores (whole cache lines written without
    reading them first). They are weakly ordered: call `store_fence` before the data is
    handed on."""
    def codegen(context, builder, signature, args):
        d = context.make_array(signature.args[0])(context, builder, value=args[0]).data
        s = context.make_array(signature.args[2])(context, builder, value=args[2]).data
        dst_base = builder.gep(d, [args[1]])
        src_base = builder.bitcast(builder.gep(s, [args[3]]), _F32T.as_pointer())
        with cgutils.for_range(builder, args[4]) as loop:
            offset = builder.mul(loop.index, ir.Constant(loop.index.type, 16))
            value = builder.load(builder.bitcast(builder.gep(src_base, [offset]),
                                                 _VEC16.as_pointer()), align=4)
            target = builder.gep(builder.bitcast(dst_base, _F32T.as_pointer()), [offset])
            mark_nontemporal(builder, builder.store(value, builder.bitcast(
                target, _VEC16.as_pointer()), align=64))
        return context.get_dummy_value()
    return types.none(dst, types.intp, src, types.intp, types.intp), codegen


_X86 = platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def store_fence(typingctx):
    """A full memory fence that orders earlier non-temporal stores before everything after:
    `sfence` on x86 (which LLVM's own seq_cst fence, a locked instruction there, is not
    documented to do for weakly ordered stores), then the seq_cst fence."""
    def codegen(context, builder, signature, args):
        if _X86:
            builder.call(cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence"), [])
        builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.none(), codegen


def _i32(value: int) -> ir.Constant:
    return ir.Constant(_I32, value)


def _i32_like(value, constant: int) -> ir.Constant:
    """An i32 `constant` shaped like `value`: scalar, or the same in every lane."""
    if isinstance(value.type, ir.VectorType):
        return ir.Constant(ir.VectorType(_I32, value.type.count), [constant] * value.type.count)
    return _i32(constant)


def ir_rounded_bits(builder, value, dropped: int):
    """The IEEE bits of float32 `value` (a scalar or a vector) rounded to nearest-even at
    bit `dropped`, the low `dropped` bits cleared; a NaN comes back as a quiet NaN. 32-bit
    integer ops only, so loops vectorise 16 lanes wide (Numba's own uint32 arithmetic
    widens to 64 bits)."""
    bits = builder.bitcast(value, ir.VectorType(_I32, value.type.count)
                           if isinstance(value.type, ir.VectorType) else _I32)
    lowest_kept = builder.and_(builder.lshr(bits, _i32_like(bits, dropped)), _i32_like(bits, 1))
    rounded = builder.add(builder.add(bits, _i32_like(bits, (1 << (dropped - 1)) - 1)),
                          lowest_kept)
    quiet_nan = builder.or_(bits, _i32_like(bits, _QUIET_BIT))
    is_nan = builder.fcmp_unordered("uno", value, value)
    keep_mask = _i32_like(bits, (0xFFFFFFFF << dropped) & 0xFFFFFFFF)
    return builder.and_(builder.select(is_nan, quiet_nan, rounded), keep_mask)


@intrinsic
def f32_to_bf16(typingctx, value):
    """float32 -> bfloat16 bits, round-to-nearest-even; NaN stays a quiet NaN."""
    def codegen(context, builder, signature, args):
        return builder.trunc(builder.lshr(ir_rounded_bits(builder, args[0], 16),
                                          _i32(16)), _I16)
    return types.uint16(types.float32), codegen


@intrinsic
def round_to_hf32(typingctx, value):
    """float32 -> HF32 (float32 range, 11 explicit mantissa bits), round-to-nearest-even,
    returned as float32. NaN stays NaN; values past the HF32 maximum become inf."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(ir_rounded_bits(builder, args[0], 12), _F32T)
    return types.float32(types.float32), codegen


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def bf16_to_f32(bits):
    """bfloat16 bits -> float32 (exact)."""
    return f32_from_bits(np.uint32(bits) << _SHIFT)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def load_as_f32(buf, code, byte_index):
    """One element of the given code at `byte_index` of `buf`, as float32."""
    if code == F32:
        return load_f32(buf, byte_index)
    if code == F16:
        return half_to_f32(load_u16(buf, byte_index))
    return bf16_to_f32(load_u16(buf, byte_index))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def store_from_f32(buf, code, byte_index, value):
    """Write float32 `value` as an element of the given code (rounded to nearest-even)."""
    if code == F32:
        store_f32(buf, byte_index, value)
    elif code == F16:
        store_u16(buf, byte_index, f32_to_half(value))
    else:
        store_u16(buf, byte_index, f32_to_bf16(value))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def round_to_half(value):
    """float32 -> float16 -> float32 (round-to-nearest-even; overflow gives inf)."""
    return half_to_f32(f32_to_half(value))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _index(at, i):
    """at + i (both >= 0) as an unsigned index: Numba then adds no wraparound for negative
    indices, which with a runtime `at` kept the span loops from vectorising (float16 rows
    converted at 0.38 ns per element in cache instead of 0.08)."""
    return np.uint64(at) + np.uint64(i)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def load_span(buf, code, base, stride, n, out, at=0):
    """Read n elements of the given code from buf at base + i*stride into float32
    out[at:at + n].

    Contiguous and broadcast (stride 0) operands get loops of their own, which vectorise.
    Every other element (a slice with step 2) has none, unlike `copy_span16`: such loops
    for float32 and both 16-bit codes made the tiled kernel's first compile 10-12 s longer
    (33.5 against 23.8 s), for a float32 self so sliced 0.46 to 0.62 of the contiguous
    call's rate in cache.
    """
    if stride == 0:
        value = load_as_f32(buf, code, base)
        for i in range(n):
            out[_index(at, i)] = value
    elif code == F32:
        if stride == 4:
            for i in range(n):
                out[_index(at, i)] = load_f32(buf, base + 4 * i)
        else:
            for i in range(n):
                out[_index(at, i)] = load_f32(buf, base + stride * i)
    elif code == F16:
        if stride == 2:
            for i in range(n):
                out[_index(at, i)] = half_to_f32(load_u16(buf, base + 2 * i))
        else:
            for i in range(n):
                out[_index(at, i)] = half_to_f32(load_u16(buf, base + stride * i))
    elif stride == 2:
        for i in range(n):
            out[_index(at, i)] = bf16_to_f32(load_u16(buf, base + 2 * i))
    else:
        for i in range(n):
            out[_index(at, i)] = bf16_to_f32(load_u16(buf, base + stride * i))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def copy_span16(src, src_at, src_step, dst, dst_at, dst_step, n):
    """The n 16-bit elements of src at byte src_at + i*src_step copied as they are to dst at
    byte dst_at + i*dst_step (uint8 arrays): a row of a float16 or bfloat16 operand gathered
    or scattered, no conversion. src_step 0 repeats one element, in a loop of its own;
    every other element into a contiguous run (a slice with step 2) has one with literal
    steps, which LLVM vectorises: float16 SmoothL1 with self so sliced, 512 x 512 in
    cache, at 0.64 (AVX-512 build) and 0.76 (AVX2) of the contiguous call's rate where the
    loop with run-time steps ran at 0.37 and 0.41."""
    if src_step == 0:
        value = load_u16(src, src_at)
        for i in range(n):
            store_u16(dst, dst_at + dst_step * i, value)
    elif src_step == 4 and dst_step == 2:
        _copy_run16(src, src_at, 4, dst, dst_at, 2, n)
    else:
        _copy_run16(src, src_at, src_step, dst, dst_at, dst_step, n)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _copy_run16(src, src_at, src_step, dst, dst_at, dst_step, n):
    """copy_span16's loop, vectorised by LLVM where it is inlined with literal steps."""
    for i in range(n):
        store_u16(dst, dst_at + dst_step * i, load_u16(src, src_at + src_step * i))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def store_span(buf, code, base, stride, n, values, at=0):
    """Write the n float32 values[at:at + n] to buf at base + i*stride, rounded to the
    given code."""
    if code == F32:
        if stride == 4:
            for i in range(n):
                store_f32(buf, base + 4 * i, values[_index(at, i)])
        else:
            for i in range(n):
                store_f32(buf, base + stride * i, values[_index(at, i)])
    elif code == F16:
        if stride == 2:
            for i in range(n):
                store_u16(buf, base + 2 * i, f32_to_half(values[_index(at, i)]))
        else:
            for i in range(n):
                store_u16(buf, base + stride * i, f32_to_half(values[_index(at, i)]))
    elif stride == 2:
        for i in range(n):
            store_u16(buf, base + 2 * i, f32_to_bf16(values[_index(at, i)]))
    else:
        for i in range(n):
            store_u16(buf, base + stride * i, f32_to_bf16(values[_index(at, i)]))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def store_f32_row(buf, base, n, values, at=0):
    """values[at:at + n] to the contiguous float32 run at byte `base` of `buf`: with
    non-temporal stores (the output is not read back, so its lines need not be fetched
    first) where the run is whole cache lines, else with ordinary ones. Call `store_fence`
    once the rows are written. Rows of AvgPool2dBackward (float32, 2 threads, AVX-512
    CPU) that were not whole lines, streamed between ordinary stores of their ends, took
    up to 5.5x the time of ordinary stores: 448-byte rows 16 bytes past a line 2.2-2.4x
    built for AVX2, 224-byte ones 16 bytes past a line 1.2-5.5x built for either level,
    and 1.05-1.13x on lines."""
    if (buf.ctypes.data + base) % CACHE_LINE_BYTES == 0 and n % 16 == 0:
        stream_f32x16(buf, base, values, at, n // 16)
    else:
        store_span(buf, F32, base, 4, n, values, at)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def copy_bytes(dst, dst_at, src, src_at, count):
    """dst[dst_at:][:count] = src[src_at:][:count] for uint8 arrays (the few bytes of a
    row's last partial vector, to and from a kernel's pad)."""
    for b in range(count):
        dst[dst_at + b] = src[src_at + b]


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def line_aligned_floats(n):
    """An uninitialised float32 array of n elements starting on a cache line. Numba aligns
    its arrays to 32 bytes (`get_preferred_array_alignment`), so a kernel's scratch (a
    staged tile, a converted row, a pooling row) started mid-line in about half the
    processes, and every 64-byte vector load or store of it then spanned two lines: on an
    Intel Xeon built for AVX-512, 4096 x 4096 float32 SmoothL1 with self transposed took
    13.1-13.8 ms with its work area placed 32 bytes past a line against 9.9-10.7 on one
    (three processes of each); left where it fell, 12.3-13.8 ms in 10 processes of 23 and
    9.3-11.3 in the others."""
    raw = np.empty(n + CACHE_LINE_BYTES // 4, np.float32)
    skip = (CACHE_LINE_BYTES - raw.ctypes.data % CACHE_LINE_BYTES) % CACHE_LINE_BYTES
    return raw[skip // 4: skip // 4 + n]
