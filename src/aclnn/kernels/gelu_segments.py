"""GELU' as piecewise polynomials picked by permutes: the GELU backward kernel.

The formulas of `fastmath` cost some fifty vector operations per element (and a lookup
table of the 65536 bfloat16 inputs, a gather per element); either keeps the kernel well
below the memory speed on this project's 2-core machine. Here, for |x| < LIMIT,

    GELU'(x) = q(a) for x < 0 and 1 - q(a) otherwise,  a = |x|,  q(a) = GELU'(-a),
    q(a) = ((a_r - a) in two parts) * P_k(w),  k = floor(8a),  w = 8a - k,

with 32 segments a in [k/8, (k+1)/8): P_k, of degree 4, interpolates q(a)/(a_r - a) at
Chebyshev nodes (float64 references), and a_r, q's root, is held in two float32 parts so
that a_r - a is exact near it (within 4.5 float32 ULP of GELU' for the erf form, 7.4 for
the tanh form). The coefficients of all 32 segments fill two 16-lane registers per power
of w; with AVX-512 a lane takes its segment's coefficient with one `vpermi2ps` (elsewhere
the same IR gathers them). A row goes 16 lanes at a time, in its own dtype (float32,
float16 or bfloat16, converted in registers); the vectors holding a lane with |x| >= LIMIT
or NaN are listed, and those lanes then take the `fastmath` formula: about one vector in a
thousand for normally distributed x, and no slower than the formula alone when every lane
is out there. Every element, the last partial vector of a row included, goes through this
same code, so contiguous and strided calls give the same bits.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import lanes
from .bits import (
    BF16,
    F16,
    F32,
    copy_bytes,
    element_bytes,
    load_as_f32,
    store_fence,
    store_from_f32,
)
from .fastmath import gelu_erf_derivative, gelu_tanh_derivative
from .lanes import (
    F32T,
    I16,
    I32,
    I64,
    LANES,
    VF,
    VI,
    VMASK,
    as_i1,
    broadcast,
    function,
    load_lanes,
    narrower,
    splat,
    split_row,
    store,
)
from .typed import element_code

SEGMENTS, PER_UNIT, DEGREE = 32, 8, 4
LIMIT = SEGMENTS / PER_UNIT
BLOCK = 4096  # elements per row of the contiguous kernel
RUNS = 64  # its parallel work items
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_TANH_C = 0.044715

f = np.float32
_F_LIMIT = f(LIMIT)


def _q_erf(a: float) -> float:
    """GELU'(-a) of the erf form, in float64: Phi(-a) - a phi(a)."""
    return 0.5 * math.erfc(a / math.sqrt(2)) - a * math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)


def _q_tanh(a: float) -> float:
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
    q = _q_tanh if use_tanh else _q_erf
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
def _formula(x, use_tanh):
    return gelu_tanh_derivative(x) if use_tanh else gelu_erf_derivative(x)




def _segment_picker(builder, coefficients):
    """(k, j) -> coefficient j of each lane's segment k (k: i32 x 16, any value; its low 5
    bits count): `vpermi2ps` from two registers per j with AVX-512, else a gather from the
    (DEGREE + 1, 32) float32 array at `coefficients`."""
    rows = builder.bitcast(coefficients, VF.as_pointer())
    if lanes.AVX512:
        permute = function(builder, "llvm.x86.avx512.vpermi2var.ps.512", VF, [VF, VI, VF])
        low = [builder.load(builder.gep(rows, [I32(2 * j)]), align=4) for j in range(DEGREE + 1)]
        high = [builder.load(builder.gep(rows, [I32(2 * j + 1)]), align=4)
                for j in range(DEGREE + 1)]
        return lambda k, j: builder.call(permute, [low[j], k, high[j]])
    pointers = ir.VectorType(F32T.as_pointer(), LANES)
    gather = function(builder, "llvm.masked.gather.v16f32.v16p0", VF,
                       [pointers, I32, VMASK, VF])
    base = broadcast(builder, builder.ptrtoint(rows, I64), ir.VectorType(I64, LANES))

    def pick(k, j):
        index = builder.add(builder.and_(k, splat(VI, SEGMENTS - 1)), splat(VI, SEGMENTS * j))
        offsets = builder.shl(builder.zext(index, base.type), ir.Constant(base.type, [2] * LANES))
        return builder.call(gather, [builder.inttoptr(builder.add(base, offsets), pointers),
                                     I32(4), splat(VMASK, 1), ir.Constant(VF, ir.Undefined)])
    return pick


def _truncator(builder):
    """t -> int32 x 16, t's integer part for 0 <= t < 2**31; any other t gives some integer
    (`cvttps2dq`; else fptosi of t, or of 0 where t is out of that range)."""
    if lanes.AVX512:
        truncate = function(builder, "llvm.x86.avx512.mask.cvttps2dq.512", VI,
                             [VF, VI, I16, I32])
        return lambda t: builder.call(truncate, [t, splat(VI, 0), I16(-1), I32(4)])

    def portable(t):
        inside = builder.fcmp_ordered("<", t, splat(VF, float(2 ** 31)))
        return builder.fptosi(builder.select(inside, t, splat(VF, 0.0)), VI)
    return portable


def _row_block(code: int):
    """The vector loop of a row of float32, float16 or bfloat16 elements (`code`) at byte
    offsets of uint8 arrays; returns how many vectors it listed in `flagged`. With
    `streaming`, the vectors with no listed lane are stored non-temporally (see
    `lanes.store`)."""
    lane_bytes = element_bytes(code)

    def block(typingctx, x, x_at, g, g_at, o, o_at, vectors, coefficients, root_hi, root_lo,
              flagged, streaming):
        def codegen(context, builder, signature, args):
            def data(i):
                return context.make_array(signature.args[i])(context, builder,
                                                             value=args[i]).data

            (_, x_at, _, g_at, _, o_at, vectors, _, root_hi, root_lo, _, streaming) = args
            pick = _segment_picker(builder, data(7))
            truncate = _truncator(builder)
            narrowed = narrower(builder, code)
            streaming = as_i1(builder, streaming)
            fma = function(builder, "llvm.fma.v16f32", VF, [VF] * 3)
            root_hi_v = broadcast(builder, root_hi, VF)
            root_lo_v = broadcast(builder, root_lo, VF)
            flagged_at = builder.bitcast(data(10), I64.as_pointer())
            count = cgutils.alloca_once_value(builder, ir.Constant(vectors.type, 0))
            step = ir.Constant(vectors.type, LANES * lane_bytes)

            def address(i, at, v):
                return builder.gep(data(i), [builder.add(at, builder.mul(v, step))])

            def load(i, at, v):
                return load_lanes(builder, code, address(i, at, v))

            with cgutils.for_range(builder, vectors) as loop:
                v = loop.index
                x_value = load(0, x_at, v)
                a = builder.bitcast(builder.and_(builder.bitcast(x_value, VI),
                                                 splat(VI, 0x7FFFFFFF)), VF)
                t = builder.fmul(a, splat(VF, float(PER_UNIT)))
                k = truncate(t)
                w = builder.fsub(t, builder.sitofp(k, VF))
                p = pick(k, DEGREE)
                for j in range(DEGREE - 1, -1, -1):
                    p = builder.call(fma, [p, w, pick(k, j)])
                q = builder.fmul(builder.fadd(builder.fsub(root_hi_v, a), root_lo_v), p)
                negative = builder.fcmp_ordered("<", x_value, splat(VF, 0.0))
                derivative = builder.select(negative, q, builder.fsub(splat(VF, 1.0), q))
                product = builder.fmul(load(2, g_at, v), derivative)
                outside = builder.fcmp_unordered(">=", a, splat(VF, LIMIT))  # NaN too
                any_outside = builder.icmp_unsigned("!=", builder.bitcast(outside, I16), I16(0))
                store(builder, code, narrowed(product), address(4, o_at, v),
                      builder.and_(streaming, builder.not_(any_outside)))
                with builder.if_then(any_outside, likely=False):
                    listed = builder.load(count)
                    builder.store(v, builder.gep(flagged_at, [listed]))
                    builder.store(builder.add(listed, ir.Constant(listed.type, 1)), count)
            return builder.load(count)

        sig = types.intp(x, types.intp, g, types.intp, o, types.intp, types.intp,
                         coefficients, types.float32, types.float32, flagged, types.boolean)
        return sig, codegen
    block.__doc__ = _row_block.__doc__
    return intrinsic(block)


_f32_block, _f16_block, _bf16_block = (_row_block(code) for code in (F32, F16, BF16))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _vectors(code, x, x_at, g, g_at, o, o_at, vectors, coefficients, root_hi, root_lo,
             use_tanh, flagged, streaming):
    """`vectors` vectors of a row; then the formula for the lanes outside the segments."""
    if code == F32:
        count = _f32_block(x, x_at, g, g_at, o, o_at, vectors, coefficients, root_hi,
                           root_lo, flagged, streaming)
    elif code == F16:
        count = _f16_block(x, x_at, g, g_at, o, o_at, vectors, coefficients, root_hi,
                           root_lo, flagged, streaming)
    else:
        count = _bf16_block(x, x_at, g, g_at, o, o_at, vectors, coefficients, root_hi,
                            root_lo, flagged, streaming)
    for listed in range(count):
        _formula_lanes(code, x, x_at, g, g_at, o, o_at, LANES * flagged[listed], use_tanh)


@njit(error_model="numpy", fastmath={"contract"})  # not inlined: one copy per kernel
def _formula_lanes(code, x, x_at, g, g_at, o, o_at, first, use_tanh):
    """The formula for the lanes of the vector from element `first` that are outside the
    segments (or NaN)."""
    size = element_bytes(code)
    for i in range(first, first + LANES):
        xi = load_as_f32(x, code, x_at + size * i)
        if not abs(xi) < _F_LIMIT:
            product = load_as_f32(g, code, g_at + size * i) * _formula(xi, use_tanh)
            store_from_f32(o, code, o_at + size * i, product)


_PAD_BYTES = 4 * LANES  # one vector of float32; the pad holds x, g, o at 0, 64, 128
PAD_BYTES = 3 * _PAD_BYTES  # the `pad` scratch of a row


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_row(code, x, x_at, g, g_at, o, o_at, n, coefficients, root_hi, root_lo, use_tanh,
             flagged, pad, streaming=False):
    """o = g * GELU'(x) for a row of n elements of one dtype (`code`) at byte offsets x_at,
    g_at, o_at of the uint8 arrays x, g, o. Scratch: `flagged`, int64, at least n // 16
    long; `pad`, PAD_BYTES of uint8: the last partial vector goes through it, so that every
    element is computed by the same code. `streaming`: whole vectors are stored
    non-temporally (o_at aligned to a vector; a `store_fence` before the results are
    used)."""
    vectors, done, rest = split_row(code, n)
    _vectors(code, x, x_at, g, g_at, o, o_at, vectors, coefficients, root_hi, root_lo,
             use_tanh, flagged, streaming)
    if rest:
        pad[:] = 0
        copy_bytes(pad, 0, x, x_at + done, rest)
        copy_bytes(pad, _PAD_BYTES, g, g_at + done, rest)
        _vectors(code, pad, 0, pad, _PAD_BYTES, pad, 2 * _PAD_BYTES, 1, coefficients,
                 root_hi, root_lo, use_tanh, flagged, False)
        copy_bytes(o, o_at + done, pad, 2 * _PAD_BYTES, rest)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def gelu_flat(g, x, o, coefficients, root_hi, root_lo, use_tanh, streaming):
    """Contiguous typed views of one dtype (see `typed`): o = g * GELU'(x). The rows are
    blocks of BLOCK elements, handed out in up to RUNS runs that each allocate their
    scratch once. `streaming` (o aligned to 64 bytes): stored non-temporally, each run
    fenced."""
    code = element_code(o)
    n = o.size
    gb, xb, ob = g.view(np.uint8), x.view(np.uint8), o.view(np.uint8)
    size = o.itemsize
    blocks = (n + BLOCK - 1) // BLOCK
    runs = min(blocks, RUNS)
    for run in prange(runs):
        flagged = np.empty(BLOCK // LANES, np.int64)
        pad = np.empty(PAD_BYTES, np.uint8)
        for b in range(run * blocks // runs, (run + 1) * blocks // runs):
            start = b * BLOCK
            at = start * size
            gelu_row(code, xb, at, gb, at, ob, at, min(BLOCK, n - start), coefficients,
                     root_hi, root_lo, use_tanh, flagged, pad, streaming)
        if streaming:
            store_fence()
