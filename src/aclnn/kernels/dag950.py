"""The Ascend950 kernels of SmoothL1/L1/GELU backward as their public DAGs compute them.

Each kernel evaluates the DAG's float32 operations one at a time, in the DAG's order and
with its constants, so every IEEE-exact step (add, sub, mul, div, compare, select,
round-to-nearest-even casts) rounds exactly as the device does. Exp and Erf are the
correctly rounded float32 values, obtained from the float64 libm functions (they differ
from the correctly rounded float32 only when the float64 result lies within one float64
ULP of a float32 rounding midpoint); the NPU's own instructions are not public.

Operands are flat, contiguous typed views (`typed`: float32, float16 as uint16, bfloat16
as int16) of one length (gradOut of SmoothL1/L1 may have length 1); the result has the
inputs' element type. Nothing here validates: the operator modules pass well-formed operands.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, prange

from . import lookup
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


@njit(**_OPTIONS)
def gelu_tanh(grad, x, out):
    """GeluGradV2 tanh form: _tanh_factor(x) * g."""
    for i in prange(out.size):
        out[i] = narrow(_tanh_factor(widen(x[i])) * widen(grad[i]), out)


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
