"""The Ascend950 kernels of SmoothL1/L1/GELU backward as their public DAGs compute them.

Each kernel evaluates the DAG's float32 operations one at a time, in the DAG's order and
with its constants, so every IEEE-exact step (add, sub, mul, div, compare, select,
round-to-nearest-even casts) rounds exactly as the device does. Exp and Erf are the
correctly rounded float32 values, obtained from the float64 libm functions (they differ
from the correctly rounded float32 only when the float64 result lies within one float64
ULP of a float32 rounding midpoint); the NPU's own instructions are not public. The
float32 forms of GELU run by vectors, with float64 vector Exp and Erf whose rounding is
checked against libm's (see `_Float64Lanes`): the same bits, for 16M elements on an AVX2
machine the tanh form in 20-29 ms instead of 65-166 ms, the erf form in 73-76 ms instead
of 145 (N(0,1)) - 300 (U(+-100)) ms.

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


# The float32 forms by vectors: the DAG's float32 operations on 16 lanes, its Exp and Erf
# in float64 vectors to a few float64 ULP, rounded to float32. A lane is sure of libm's
# rounding when a * (1 -+ KAPPA) round to the same float32 (the float64 libm value lies in
# between); the others, a few in a million, are redone by the scalar path.
#   exp: e**y = 2**k e**r, |r| <= ln2/2, the Taylor polynomial of degree 12, 2**k put in
#     through the exponent bits; NaN lanes take y itself, as libm's exp returns it.
#   erf: for |u| < ERF_SMALL its Taylor series u (2/sqrt(pi)) sum (-u**2)**n / (n! (2n+1)) to
#     n = 6 (relative error < 1e-17); up to |u| = 4 the Chebyshev interpolant of degree 32
#     on [0, 4], as a polynomial in t = |u| - 2 (its terms at most 1 in size: relatively
#     within 1e-14 from ERF_SMALL on), signed as u; past 4, +-1 (erf rounds to +-1 in
#     float32 from 3.92 on); NaN lanes take u.
_VD = ir.VectorType(ir.DoubleType(), LANES)
_VL = ir.VectorType(ir.IntType(64), LANES)
_LOG2E, _ROUNDER = 1.4426950408889634, 1.5 * 2.0 ** 52
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # k * _LN2_HI exact
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(13))
ERF_SMALL = 0.125
_ERF_TAYLOR = tuple((-1) ** n * 2 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1))
                    for n in range(7))
ERF_POLYNOMIAL = tuple(c / 2.0 ** j for j, c in enumerate(np.polynomial.chebyshev.cheb2poly(
    np.polynomial.chebyshev.chebinterpolate(np.vectorize(lambda w: math.erf(2 * (w + 1))), 32))))
_KAPPA = 1e-13
_VECTOR_BLOCK = 4096  # elements per parallel item of the vector kernels


class _Float64Lanes:
    """The float64 vector functions above on an IR builder, each returning the float32
    result and the lanes sure of libm's rounding."""

    def __init__(self, builder):
        self.b = builder
        self._fma = function(builder, f"llvm.fma.v{LANES}f64", _VD, [_VD] * 3)

    @staticmethod
    def d(value) -> ir.Constant:
        return splat(_VD, float(value))

    def polynomial(self, t, coefficients, ways: int = 4):
        """sum c_j t**j as `ways` interleaved Horner chains in t**ways (the coefficients
        c_i, c_i+ways, ...), joined by Horner's rule in t: fused multiply-adds, independent
        chains for the out-of-order core, and few values live at once."""
        b = self.b
        step = t
        for _ in range(ways.bit_length() - 1):
            step = b.fmul(step, step)
        chains = []
        for first in range(ways):
            part = coefficients[first::ways]
            p = self.d(part[-1])
            for c in part[-2::-1]:
                p = b.call(self._fma, [p, step, self.d(c)])
            chains.append(p)
        p = chains[-1]
        for chain in chains[-2::-1]:
            p = b.call(self._fma, [p, t, chain])
        return p

    def rounded(self, a, nan, fallback):
        """(float32 of a, or `fallback` on `nan` lanes; which lanes are sure of it)."""
        b = self.b
        low = b.fptrunc(b.fmul(a, self.d(1 - _KAPPA)), VF)
        high = b.fptrunc(b.fmul(a, self.d(1 + _KAPPA)), VF)
        return b.select(nan, fallback, low), b.or_(b.fcmp_ordered("==", low, high), nan)

    def exp(self, y32):
        """e**y for a float32 vector y."""
        b, d = self.b, self.d
        y = b.fpext(y32, _VD)
        y = b.select(b.fcmp_ordered("<", y, d(-200.0)), d(-200.0), y)
        y = b.select(b.fcmp_ordered(">", y, d(100.0)), d(100.0), y)
        t = b.fadd(b.fmul(y, d(_LOG2E)), d(_ROUNDER))
        k = b.fsub(t, d(_ROUNDER))
        r = b.fsub(b.fsub(y, b.fmul(k, d(_LN2_HI))), b.fmul(k, d(_LN2_LO)))
        poly = self.polynomial(r, _TAYLOR)
        power = b.shl(b.add(b.bitcast(t, _VL), splat(_VL, 1023)), splat(_VL, 52))
        a = b.fmul(poly, b.bitcast(power, _VD))
        return self.rounded(a, b.fcmp_unordered("uno", y32, y32), y32)

    def erf(self, u32):
        """erf(u) for a float32 vector u."""
        b, d = self.b, self.d
        u = b.fpext(u32, _VD)
        negative = b.fcmp_ordered("<", u, d(0.0))
        a = b.select(negative, b.fneg(u), u)
        series = self.polynomial(b.fmul(u, u), _ERF_TAYLOR)
        within = b.fcmp_ordered("<", a, d(4.0))
        t = b.fsub(b.select(within, a, d(4.0)), d(2.0))
        large = b.select(within, self.polynomial(t, ERF_POLYNOMIAL), d(1.0))
        large = b.select(negative, b.fneg(large), large)
        value = b.select(b.fcmp_ordered("<", a, d(ERF_SMALL)), b.fmul(u, series), large)
        return self.rounded(value, b.fcmp_unordered("uno", u32, u32), u32)


def _f(value) -> ir.Constant:
    """`value` as float32 in every lane of a float32 vector."""
    return splat(VF, float(np.float32(value)))


def _erf_vector_factor(builder, x):
    """The erf form's factor of g (`_erf_factor`), the float32 steps in the DAG's order."""
    lanes = _Float64Lanes(builder)
    erf, erf_sure = lanes.erf(builder.fmul(x, _f(_INV_SQRT2)))
    cdf = builder.fadd(builder.fmul(erf, _f(_HALF)), _f(_HALF))
    e, exp_sure = lanes.exp(builder.fmul(builder.fmul(x, x), _f(_NEG_HALF)))
    pdf = builder.fmul(e, _f(_INV_SQRT_2PI))
    return builder.fadd(cdf, builder.fmul(pdf, x)), builder.and_(erf_sure, exp_sure)


def _tanh_vector_factor(builder, x):
    """The tanh form's factor of g (`_tanh_factor`), the float32 steps in the DAG's order."""
    square = builder.fmul(x, x)
    y = builder.fmul(builder.fadd(_f(_BETA_NEG), builder.fmul(square, _f(_AN))), x)
    e, sure = _Float64Lanes(builder).exp(y)
    r = builder.fmul(builder.fadd(_f(_BETA), builder.fmul(square, _f(_A3))), x)
    q = builder.fdiv(_f(1.0), builder.fadd(e, _f(1.0)))
    p = builder.fmul(builder.fmul(builder.fmul(e, q), r), q)
    p = builder.select(builder.fcmp_ordered("==", p, p), p, _f(0.0))
    return builder.fadd(p, q), sure


def _vector_block(factor):
    """An intrinsic (grad, x, out, start, vectors) -> int64: out[start:][:16 * vectors] =
    factor(x) * g for float32 arrays, returning how many lanes were unsure (their results
    are then to be redone)."""
    def block(typingctx, grad, x, out, start, vectors):
        if any(a.dtype != types.float32 for a in (grad, x, out)):
            return None  # float32 only: a typing error for any other array

        def codegen(context, builder, signature, args):
            def at(k, v):
                data = context.make_array(signature.args[k])(context, builder,
                                                             value=args[k]).data
                index = builder.add(args[3], builder.mul(v, v.type(LANES)))
                return builder.bitcast(builder.gep(data, [index]), VF.as_pointer())

            count = cgutils.alloca_once_value(builder, ir.IntType(64)(0))
            ctpop = function(builder, "llvm.ctpop.i16", ir.IntType(16), [ir.IntType(16)])
            with cgutils.for_range(builder, args[4]) as loop:
                value, sure = factor(builder, builder.load(at(1, loop.index), align=4))
                product = builder.fmul(value, builder.load(at(0, loop.index), align=4))
                builder.store(product, at(2, loop.index), align=4)
                unsure = builder.bitcast(builder.not_(sure), ir.IntType(16))
                lanes = builder.zext(builder.call(ctpop, [unsure]), ir.IntType(64))
                builder.store(builder.add(builder.load(count), lanes), count)
            return builder.load(count)
        return types.int64(grad, x, out, types.intp, types.intp), codegen
    block.__doc__ = _vector_block.__doc__
    return intrinsic(block)


_erf_vectors, _tanh_vectors = _vector_block(_erf_vector_factor), _vector_block(_tanh_vector_factor)


@njit(inline="always", error_model="numpy")
def _by_vectors(grad, x, out, use_tanh):
    """_tanh_factor or _erf_factor(x) * g on float32 operands by 16-lane vectors, each
    block's vectors redone by the scalar path where a lane was unsure."""
    n = out.size
    blocks = (n + _VECTOR_BLOCK - 1) // _VECTOR_BLOCK
    for b in prange(blocks):
        start = b * _VECTOR_BLOCK
        stop = min(n, start + _VECTOR_BLOCK)
        vectors = (stop - start) // LANES
        done = start + LANES * vectors
        if use_tanh:
            if _tanh_vectors(grad, x, out, start, vectors) > 0:
                done = start
        elif _erf_vectors(grad, x, out, start, vectors) > 0:
            done = start
        for i in range(done, stop):
            v = x[i]
            out[i] = (_tanh_factor(v) if use_tanh else _erf_factor(v)) * grad[i]


@njit(**_OPTIONS)
def gelu_erf(grad, x, out):
    """GeluGradV2 erf form on float32 operands (16-bit ones take `factor_table`)."""
    _by_vectors(grad, x, out, False)


@njit(**_OPTIONS)
def gelu_tanh(grad, x, out):
    """GeluGradV2 tanh form on float32 operands (16-bit ones take `factor_table`)."""
    _by_vectors(grad, x, out, True)


@njit(cache=True, error_model="numpy")
def _factor_table(values, use_tanh):
    """The GELU factor of each typed 16-bit value in `values` (see `lookup`)."""
    table = np.empty(values.size, np.float32)
    for b in range(values.size):
        v = widen(values[b])
        table[b] = _tanh_factor(v) if use_tanh else _erf_factor(v)
    return table


@functools.cache
def factor_table(view_dtype: np.dtype, use_tanh: bool) -> lookup.Factors:
    """The 950 GELU factor of every value of a 16-bit typed view dtype, by its bits, as that
    dtype's lookup takes them (`lookup.factors`)."""
    table = _factor_table(lookup.all_values(view_dtype), use_tanh)
    return lookup.factors(table, float16=view_dtype == np.dtype(np.uint16))


class Dag950Launch:
    """A prepared call of one of the kernels above (phase 1), run by phase 2."""

    def __init__(self, kernel, operands: tuple, finish=None):
        self._kernel, self._operands, self._finish = kernel, operands, finish

    def __call__(self) -> None:
        launch(lambda: self._kernel(*self._operands))
        if self._finish is not None:
            self._finish()
