"""GELU' of bfloat16 inputs as piecewise polynomials, selected by AVX-512 permutes.

A bfloat16 input has only 65536 values, so its GELU' can come from a table
(`pointwise.bf16_derivative_table`); but one lookup per element is a gather, which caps a
kernel well below the memory speed (about 6 G lookups/s on this project's 2-core
machine). Here, for |x| < LIMIT,

    GELU'(x) = q(a) for x < 0 and 1 - q(a) for x >= 0,  a = |x|,  q(a) = GELU'(-a),
    q(a) = ((a_r - a) in two parts) * P_k(w),  k = floor(8a),  w = 8a - k,

with 32 segments a in [k/8, (k+1)/8): P_k, of degree 4, interpolates q(a)/(a_r - a) at
Chebyshev nodes (float64 references), and a_r, q's root, is held in two float32 parts so
that a_r - a is exact near it. The coefficients of all 32 segments fill two 16-lane
registers per power of w; a lane takes its segment's coefficient with one `vpermi2ps`.
Lanes with |x| >= LIMIT, or NaN, read the table instead: a masked gather, run only for a
vector of 16 that has such a lane (about one in a thousand for normally distributed x).

The table holds these same float32 values for |x| < LIMIT (`segment_derivative` is the
scalar twin of the vector code), so every kernel path gives the same bits. The vector
code needs AVX-512F (`AVAILABLE`); elsewhere the table serves every element.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils, config
from numba.core.codegen import get_host_cpu_features
from numba.extending import intrinsic

from .bits import bf16_to_f32, fma_f32, ir_rounded_bits

SEGMENTS, PER_UNIT, DEGREE = 32, 8, 4
LIMIT = SEGMENTS / PER_UNIT
LANES = 16
BLOCK = 4096  # elements per parallel work item
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_TANH_C = 0.044715

f = np.float32
_F_LIMIT, _F_PER_UNIT, _ONE = f(LIMIT), f(PER_UNIT), f(1.0)


def _target_features() -> set[str]:
    """The CPU features Numba compiles for (it honours NUMBA_CPU_FEATURES)."""
    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return set(features.split(","))


AVAILABLE = "+avx512f" in _target_features()
_BF16_CONVERT = "+avx512bf16" in _target_features()  # vcvtneps2bf16


def q_erf(a: float) -> float:
    """GELU'(-a) of the erf form, in float64: Phi(-a) - a phi(a)."""
    return 0.5 * math.erfc(a / math.sqrt(2)) - a * math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)


def q_tanh(a: float) -> float:
    """GELU'(-a) of the tanh form, in float64, without cancellation: with
    u = sqrt(2/pi)(a + 0.044715 a**3) and s = (1 - tanh u)/2 = 1/(1 + e**2u),
    q = s (1 - 2a (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 a**2))."""
    u = _SQRT_2_OVER_PI * (a + _TANH_C * a ** 3)
    s = 1 / (1 + math.exp(2 * u))
    return s * (1 - 2 * a * (1 - s) * _SQRT_2_OVER_PI * (1 + 3 * _TANH_C * a * a))


def _root(q) -> float:
    """The root of q in (0.5, 1), by bisection (q(0.5) > 0 > q(1) for both forms)."""
    lo, hi = 0.5, 1.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if q(mid) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


class Segments(NamedTuple):
    """The piecewise form of one GELU mode: coefficients[j, k] multiplies w**j in segment
    k; the root a_r = root_hi + root_lo."""

    coefficients: np.ndarray
    root_hi: np.float32
    root_lo: np.float32


@functools.cache
def segments(use_tanh: bool) -> Segments:
    """The segment polynomials of the erf or the tanh form (computed once per mode)."""
    q = q_tanh if use_tanh else q_erf
    root = _root(q)
    nodes = 0.5 + 0.5 * np.cos(np.pi * (np.arange(DEGREE + 1) + 0.5) / (DEGREE + 1))
    vandermonde = np.vander(nodes, DEGREE + 1, increasing=True)
    coefficients = np.empty((DEGREE + 1, SEGMENTS), np.float32)
    for k in range(SEGMENTS):
        a = (k + nodes) / PER_UNIT
        ratio = [q(v) / (root - v) for v in a]
        coefficients[:, k] = np.linalg.solve(vandermonde, ratio)
    root_hi = f(root)
    return Segments(coefficients, root_hi, f(root - float(root_hi)))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def segment_derivative(bits, coefficients, root_hi, root_lo):
    """GELU'(x) for the bfloat16 `bits` of x with |x| < LIMIT, in float32, operation for
    operation as the vector code computes it."""
    a = abs(bf16_to_f32(bits))
    t = a * _F_PER_UNIT
    k = np.int32(t)
    w = t - f(k)
    p = coefficients[DEGREE, k]
    for j in range(DEGREE - 1, -1, -1):
        p = fma_f32(p, w, coefficients[j, k])
    q = ((root_hi - a) + root_lo) * p
    return q if bits >= 0x8000 else _ONE - q


_I16, _I32, _I64, _F32 = ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()
_VF, _VI, _VH, _VQ = (ir.VectorType(t, LANES) for t in (_F32, _I32, _I16, _I64))
_VMASK = ir.VectorType(ir.IntType(1), LANES)


class _BFloat(ir.Type):
    """LLVM's bfloat type, which llvmlite does not define."""

    def __str__(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


def _splat(vector_type: ir.VectorType, value) -> ir.Constant:
    return ir.Constant(vector_type, [value] * LANES)


def _broadcast(builder, value, vector_type: ir.VectorType):
    first = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value, _I32(0))
    return builder.shuffle_vector(first, first, _splat(_VI, 0))


def _bf16_converter(builder):
    """A function emitting float32 x 16 -> bfloat16 x 16 (as i16), round-to-nearest-even:
    `vcvtneps2bf16` where the CPU has it, whose flushing of subnormal inputs to zero is
    undone by the integer rounding in a branch for vectors that have one; else the integer
    rounding alone."""
    def by_integers(value):
        return builder.trunc(builder.lshr(ir_rounded_bits(builder, value, 16),
                                          _splat(_VI, 16)), _VH)

    if not _BF16_CONVERT:
        return by_integers
    module = builder.module
    convert = cgutils.get_or_insert_function(
        module, ir.FunctionType(ir.VectorType(_BFloat(), LANES), [_VF]),
        "llvm.x86.avx512bf16.cvtneps2bf16.512")
    classify = cgutils.get_or_insert_function(
        module, ir.FunctionType(_VMASK, [_VF, _I32]), "llvm.x86.avx512.fpclass.ps.512")

    def by_instruction(value):
        slot = cgutils.alloca_once(builder, _VH)
        builder.store(builder.bitcast(builder.call(convert, [value]), _VH), slot)
        subnormal = builder.call(classify, [value, _I32(0x20)])
        with builder.if_then(builder.icmp_unsigned("!=", builder.bitcast(subnormal, _I16),
                                                   _I16(0)), likely=False):
            builder.store(builder.select(subnormal, by_integers(value), builder.load(slot)),
                          slot)
        return builder.load(slot)
    return by_instruction


@intrinsic
def _segments_block(typingctx, x, g, o, start, vectors, coefficients, table, root_hi, root_lo):
    """o[start:start + 16 * vectors] = bfloat16(g * GELU'(x)) for bfloat16 (int16) arrays,
    16 lanes at a time: the vector twin of `segment_derivative`, `table` for |x| >= LIMIT."""
    def codegen(context, builder, signature, args):
        def data(i):
            return context.make_array(signature.args[i])(context, builder, value=args[i]).data

        module = builder.module
        permute = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VF, [_VF, _VI, _VF]), "llvm.x86.avx512.vpermi2var.ps.512")
        fma = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VF, [_VF, _VF, _VF]), "llvm.fma.v16f32")
        # cvttps2dq: defined for every input (NaN and |t| >= 2**31 give 0x80000000, whose
        # low 5 bits pick segment 0), unlike fptosi; those lanes read the table anyway
        truncate = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VI, [_VF, _VI, _I16, _I32]),
            "llvm.x86.avx512.mask.cvttps2dq.512")
        pointers = ir.VectorType(_F32.as_pointer(), LANES)
        gather = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VF, [pointers, _I32, _VMASK, _VF]),
            "llvm.masked.gather.v16f32.v16p0")
        rows = builder.bitcast(data(5), _VF.as_pointer())
        low = [builder.load(builder.gep(rows, [_I32(2 * j)]), align=4) for j in range(DEGREE + 1)]
        high = [builder.load(builder.gep(rows, [_I32(2 * j + 1)]), align=4)
                for j in range(DEGREE + 1)]
        root_hi_v = _broadcast(builder, args[7], _VF)
        root_lo_v = _broadcast(builder, args[8], _VF)
        table_v = _broadcast(builder, builder.ptrtoint(data(6), _I64), _VQ)
        derivative = cgutils.alloca_once(builder, _VF)
        to_bf16 = _bf16_converter(builder)
        xs, gs, os = data(0), data(1), data(2)

        def at(base, index):
            return builder.bitcast(builder.gep(base, [index]), _VH.as_pointer())

        with cgutils.for_range(builder, args[4]) as loop:
            index = builder.add(args[3], builder.mul(loop.index, ir.Constant(loop.index.type,
                                                                              LANES)))
            x_half = builder.load(at(xs, index), align=2)
            x_bits = builder.shl(builder.zext(x_half, _VI), _splat(_VI, 16))
            a = builder.bitcast(builder.and_(x_bits, _splat(_VI, 0x7FFFFFFF)), _VF)
            inside = builder.fcmp_ordered("<", a, _splat(_VF, LIMIT))
            t = builder.fmul(a, _splat(_VF, float(PER_UNIT)))
            k = builder.call(truncate, [t, _splat(_VI, 0), _I16(-1), _I32(4)])
            w = builder.fsub(t, builder.sitofp(k, _VF))
            p = builder.call(permute, [low[DEGREE], k, high[DEGREE]])
            for j in range(DEGREE - 1, -1, -1):
                p = builder.call(fma, [p, w, builder.call(permute, [low[j], k, high[j]])])
            q = builder.fmul(builder.fadd(builder.fsub(root_hi_v, a), root_lo_v), p)
            negative = builder.icmp_signed("<", x_bits, _splat(_VI, 0))
            builder.store(builder.select(negative, q, builder.fsub(_splat(_VF, 1.0), q)),
                          derivative)
            outside = builder.not_(inside)
            with builder.if_then(builder.icmp_unsigned("!=", builder.bitcast(outside, _I16),
                                                       _I16(0)), likely=False):
                offsets = builder.shl(builder.zext(x_half, _VQ), _splat(_VQ, 2))
                entries = builder.inttoptr(builder.add(table_v, offsets), pointers)
                builder.store(builder.call(gather, [entries, _I32(4), outside,
                                                    builder.load(derivative)]), derivative)
            g_value = builder.bitcast(builder.shl(builder.zext(builder.load(at(gs, index),
                                                                            align=2), _VI),
                                                  _splat(_VI, 16)), _VF)
            product = builder.fmul(g_value, builder.load(derivative))
            builder.store(to_bf16(product), at(os, index), align=2)
        return context.get_dummy_value()

    sig = types.none(x, g, o, types.intp, types.intp, coefficients, table, types.float32,
                     types.float32)
    return sig, codegen


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def gelu_bf16_flat(g, x, o, coefficients, root_hi, root_lo, table):
    """Contiguous bfloat16 (int16 views): o = g * GELU'(x), 16 lanes at a time; the last
    partial vector goes through a padded copy."""
    n = o.size
    for b in prange((n + BLOCK - 1) // BLOCK):
        start = b * BLOCK
        count = min(BLOCK, n - start)
        vectors = count // LANES
        _segments_block(x, g, o, start, vectors, coefficients, table, root_hi, root_lo)
        done = start + LANES * vectors
        if done < start + count:
            pad = np.zeros((3, LANES), np.int16)
            pad[0, :n - done] = x[done:]
            pad[1, :n - done] = g[done:]
            _segments_block(pad[0], pad[1], pad[2], 0, 1, coefficients, table, root_hi,
                            root_lo)
            o[done:] = pad[2, :n - done]


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _write_inside(table, coefficients, root_hi, root_lo):
    for bits in range(table.size):
        if abs(bf16_to_f32(np.uint16(bits))) < _F_LIMIT:
            table[bits] = segment_derivative(np.uint16(bits), coefficients, root_hi, root_lo)


def write_segments_into(table: np.ndarray, use_tanh: bool) -> None:
    """Replace table[bits] (GELU'(x) for every bfloat16 x) by the segment form wherever
    |x| < LIMIT, so that the table and `gelu_bf16_flat` agree bit for bit."""
    s = segments(use_tanh)
    _write_inside(table, s.coefficients, s.root_hi, s.root_lo)
