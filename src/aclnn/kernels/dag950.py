"""The Ascend950 kernels of SmoothL1/L1/GELU backward as their public DAGs compute them.

Each kernel evaluates the DAG's float32 operations one at a time, in the DAG's order and
with its constants, so every IEEE-exact step (add, sub, mul, div, compare, select,
round-to-nearest-even casts) rounds exactly as the device does. Exp and Erf are the
correctly rounded float32 values, obtained from the float64 libm functions (they differ
from the correctly rounded float32 only when the float64 result lies within one float64
ULP of a float32 rounding midpoint); the NPU's own instructions are not public. The
float32 tanh form runs by vectors with a float64 vector exp whose rounding is checked
against libm's (see `_tanh_vectors`): the same bits, 23-29 ms instead of 65-166 ms for
16M elements on an AVX2 machine.

Operands are flat, contiguous typed views (`typed`: float32, float16 as uint16, bfloat16
as int16) of one length (gradOut of SmoothL1/L1 may have length 1); the result has the
inputs' element type. Nothing here validates: the operator modules pass well-formed operands.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import lookup
from .lanes import LANES, VF, function, splat
from .launch import launch
from .typed import narrow, widen

f32 = np.float32
_ZERO, _ONE, _NEG_ONE, _HALF, _NEG_HALF = f32(0.0), f32(1.0), f32(-1.0), f32(0.5), f32(-0.5)
_INV_SQRT2 = f32(0.707106781)  # GeluGradV2None*DAG: ONE_OVER_SQRT_TWO
_INV_SQRT_2PI = f32(0.3989422804)  # GeluGradV2ErfPost
_BETA, _BETA_NEG = f32(1.595769121605730711759), f32(-1.595769121605730711759)  # TanhCustom
_A3, _AN = f32(0.2140644488178007), f32(-0.0713548162726002527220)
_OPTIONS = {"parallel": True, "nogil": True, "cache": True, "error_model": "numpy"}


@njit(inline="always", error_model="numpy")
def _exp(x):
    return f32(math.exp(np.float64(x)))


@njit(inline="always", error_model="numpy")
def _erf(x):
    return f32(math.erf(np.float64(x)))


@njit(inline="always", error_model="numpy")
def _smooth_l1_term(d, g, sigma, neg_sigma, invert_sigma, coefficient, scalar_grad):
    if scalar_grad:
        pos = _ONE if d >= sigma else _ZERO
        neg = _NEG_ONE if d <= neg_sigma else _ZERO
        inner = _ZERO if abs(d) >= sigma else d * invert_sigma
    else:
        pos = _ONE if d > sigma else _ZERO
        neg = _NEG_ONE if d < neg_sigma else _ZERO
        inner = _ZERO if abs(d) > sigma else d * invert_sigma
    return ((pos + neg) + inner) * g * coefficient


@njit(**_OPTIONS)
def smooth_l1(grad, x, target, out, sigma, invert_sigma, coefficient, scalar_grad):
    """SmoothL1LossGradV2 (arch35 DAG): d = x - t; (d > s) - (d < -s) + (|d| > s ? 0 :
    d * (1/s)), times g, times the mean coefficient. With a one-element gradOut (`grad`
    of length 1) the scalar DAG compares with >= / <= instead."""
    neg_sigma = _NEG_ONE * sigma
    if scalar_grad:
        g = widen(grad[0])
        for i in prange(out.size):
            d = widen(x[i]) - widen(target[i])
            out[i] = narrow(_smooth_l1_term(d, g, sigma, neg_sigma, invert_sigma, coefficient,
                                            True), out)
    else:
        for i in prange(out.size):
            d = widen(x[i]) - widen(target[i])
            out[i] = narrow(_smooth_l1_term(d, widen(grad[i]), sigma, neg_sigma, invert_sigma,
                                            coefficient, False), out)


@njit(inline="always", error_model="numpy")
def _sign(a, b):
    """The L1 DAG's sign: -1, 1 or 0 by comparisons (NaN gives 0)."""
    return _NEG_ONE if a < b else (_ONE if a > b else _ZERO)


@njit(**_OPTIONS)
def l1(grad, x, target, out, coefficient):
    """L1LossGrad (arch35 DAG): sign by comparing x and t in their own dtype (NaN gives
    0), times (g * coefficient); `grad` of length 1 is the scalar-grads DAG. float16 and
    bfloat16 widen exactly, so comparing in float32 orders them alike."""
    if grad.size == 1:
        scaled = widen(grad[0]) * coefficient
        for i in prange(out.size):
            out[i] = narrow(_sign(widen(x[i]), widen(target[i])) * scaled, out)
    else:
        for i in prange(out.size):
            out[i] = narrow(_sign(widen(x[i]), widen(target[i])) * (widen(grad[i]) * coefficient),
                            out)


@njit(inline="always", error_model="numpy")
def _erf_factor(v):
    """The erf form's factor of g (None DAGs + ErfPost): cdf + pdf * x with
    cdf = 0.5 * erf(x * 0.707106781) + 0.5, pdf = exp(x * x * -0.5) * 0.3989422804."""
    cdf = _erf(v * _INV_SQRT2) * _HALF + _HALF
    pdf = _exp(v * v * _NEG_HALF) * _INV_SQRT_2PI
    return cdf + pdf * v


@njit(inline="always", error_model="numpy")
def _tanh_factor(v):
    """The tanh form's factor of g (TanhCustom): e = exp(x * (-b + x^2 * an)),
    r = x * (b + x^2 * a3), q = 1 / (e + 1), p = e * q * r * q (0 where NaN), p + q. Axpy is
    taken as a multiply then an add (two roundings)."""
    square = v * v
    e = _exp((_BETA_NEG + square * _AN) * v)
    r = (_BETA + square * _A3) * v
    q = _ONE / (e + _ONE)
    p = e * q * r * q
    p = p if p == p else _ZERO
    return p + q


@njit(**_OPTIONS)
def gelu_erf(grad, x, out):
    """GeluGradV2 erf form: _erf_factor(x) * g."""
    for i in prange(out.size):
        out[i] = narrow(_erf_factor(widen(x[i])) * widen(grad[i]), out)


# The tanh form's float32 exp by vectors: e**y in float64 to a few float64 ULP (y = k ln2 +
# r, |r| <= ln2/2, the Taylor polynomial of degree 12, 2**k put in through the exponent
# bits), rounded to float32. A lane is sure of libm's rounding when a * (1 -+ KAPPA) round
# to the same float32 (the float64 libm value lies in between); the others, a few in a
# million, are redone by the scalar path. NaN lanes take y itself, as libm's exp returns it.
_VD = ir.VectorType(ir.DoubleType(), LANES)
_VL = ir.VectorType(ir.IntType(64), LANES)
_LOG2E, _ROUNDER = 1.4426950408889634, 1.5 * 2.0 ** 52
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # k * _LN2_HI exact
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(13))
_KAPPA = 1e-13
_VECTOR_BLOCK = 4096  # elements per parallel item of the vector kernel


@intrinsic
def _tanh_vectors(typingctx, grad, x, out, start, vectors):
    """out[start:][:16 * vectors] = _tanh_factor(x) * g with the vector exp above, for
    float32 arrays; returns how many lanes were unsure (their results are then to be
    redone)."""
    if any(a.dtype != types.float32 for a in (grad, x, out)):
        return None  # float32 only: a typing error for any other array

    def codegen(context, builder, signature, args):
        def at(k, v):
            data = context.make_array(signature.args[k])(context, builder, value=args[k]).data
            index = builder.add(args[3], builder.mul(v, v.type(LANES)))
            return builder.bitcast(builder.gep(data, [index]), VF.as_pointer())

        def f(value):
            return splat(VF, float(np.float32(value)))

        def d(value):
            return splat(_VD, float(value))

        count = cgutils.alloca_once_value(builder, ir.IntType(64)(0))
        ctpop = function(builder, "llvm.ctpop.i16", ir.IntType(16), [ir.IntType(16)])
        with cgutils.for_range(builder, args[4]) as loop:
            v = loop.index
            xv = builder.load(at(1, v), align=4)
            gv = builder.load(at(0, v), align=4)
            square = builder.fmul(xv, xv)
            y32 = builder.fmul(builder.fadd(f(_BETA_NEG), builder.fmul(square, f(_AN))), xv)
            y = builder.fpext(y32, _VD)
            y = builder.select(builder.fcmp_ordered("<", y, d(-200.0)), d(-200.0), y)
            y = builder.select(builder.fcmp_ordered(">", y, d(100.0)), d(100.0), y)
            t = builder.fadd(builder.fmul(y, d(_LOG2E)), d(_ROUNDER))
            k = builder.fsub(t, d(_ROUNDER))
            r = builder.fsub(builder.fsub(y, builder.fmul(k, d(_LN2_HI))),
                             builder.fmul(k, d(_LN2_LO)))
            poly = d(_TAYLOR[12])
            for c in _TAYLOR[11::-1]:
                poly = builder.fadd(builder.fmul(poly, r), d(c))
            power = builder.shl(builder.add(builder.bitcast(t, _VL), splat(_VL, 1023)),
                                splat(_VL, 52))
            a = builder.fmul(poly, builder.bitcast(power, _VD))
            low = builder.fptrunc(builder.fmul(a, d(1 - _KAPPA)), VF)
            high = builder.fptrunc(builder.fmul(a, d(1 + _KAPPA)), VF)
            nan = builder.fcmp_unordered("uno", y32, y32)
            sure = builder.or_(builder.fcmp_ordered("==", low, high), nan)
            e = builder.select(nan, y32, low)
            r32 = builder.fmul(builder.fadd(f(_BETA), builder.fmul(square, f(_A3))), xv)
            q = builder.fdiv(f(1.0), builder.fadd(e, f(1.0)))
            p = builder.fmul(builder.fmul(builder.fmul(e, q), r32), q)
            p = builder.select(builder.fcmp_ordered("==", p, p), p, f(0.0))
            builder.store(builder.fmul(builder.fadd(p, q), gv), at(2, v), align=4)
            unsure = builder.bitcast(builder.not_(sure), ir.IntType(16))
            lanes = builder.zext(builder.call(ctpop, [unsure]), ir.IntType(64))
            builder.store(builder.add(builder.load(count), lanes), count)
        return builder.load(count)
    return types.int64(grad, x, out, types.intp, types.intp), codegen


@njit(**_OPTIONS)
def gelu_tanh(grad, x, out):
    """GeluGradV2 tanh form on float32 operands (16-bit ones take `factor_table`):
    _tanh_factor(x) * g by 16-lane vectors with the vector exp, each block's vectors redone
    by the scalar path where a lane was unsure."""
    n = out.size
    blocks = (n + _VECTOR_BLOCK - 1) // _VECTOR_BLOCK
    for b in prange(blocks):
        start = b * _VECTOR_BLOCK
        stop = min(n, start + _VECTOR_BLOCK)
        vectors = (stop - start) // LANES
        done = start + LANES * vectors
        if _tanh_vectors(grad, x, out, start, vectors) > 0:
            done = start
        for i in range(done, stop):
            out[i] = _tanh_factor(x[i]) * grad[i]


@njit(cache=True, error_model="numpy")
def _factor_table(values, use_tanh):
    """The GELU factor of each typed 16-bit value in `values` (see `lookup`)."""
    table = np.empty(values.size, np.float32)
    for b in range(values.size):
        v = widen(values[b])
        table[b] = _tanh_factor(v) if use_tanh else _erf_factor(v)
    return table


@functools.cache
def factor_table(view_dtype: np.dtype, use_tanh: bool) -> np.ndarray:
    """The 950 GELU factor of every value of a 16-bit typed view dtype, by its bits."""
    return _factor_table(lookup.all_values(view_dtype), use_tanh)


class Dag950Launch:
    """A prepared call of one of the kernels above (phase 1), run by phase 2."""

    def __init__(self, kernel, operands: tuple, finish=None):
        self._kernel, self._operands, self._finish = kernel, operands, finish

    def __call__(self) -> None:
        launch(lambda: self._kernel(*self._operands))
        if self._finish is not None:
            self._finish()
