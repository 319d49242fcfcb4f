"""float32 elementary functions written for vectorisation (no libm calls in the loops).

Coefficients were fitted for this project (weighted least squares on Chebyshev nodes
against high-precision references); the error figures are float32 evaluations measured
against float64/mpmath.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bits import f32_from_bits

f = np.float32

_LOG2E = f(1.4426950408889634)
_LN2_HI = f(0.693145751953125)          # ln 2 split so k * _LN2_HI is exact
_LN2_LO = f(1.428606765330187e-06)
_EXP_MIN, _EXP_MAX = f(-120.0), f(88.72)
_EXP_C = tuple(f(1.0 / c) for c in (1, 1, 2, 6, 24, 120, 720, 5040))
_BIAS = np.int32(127)
_MANT_SHIFT = np.uint32(23)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def exp_f32(y):
    """e**y in float32 (about 1 ULP); y below -120 gives 0, so exp(-inf) == 0 (NaN is not kept)."""
    y = min(max(y, _EXP_MIN), _EXP_MAX)
    k = np.floor(y * _LOG2E + f(0.5))
    r = (y - k * _LN2_HI) - k * _LN2_LO
    c = _EXP_C
    p = c[7]
    p = p * r + c[6]
    p = p * r + c[5]
    p = p * r + c[4]
    p = p * r + c[3]
    p = p * r + c[2]
    p = p * r + c[1]
    p = p * r + c[0]
    ki = np.int32(k)
    k1 = ki >> np.int32(1)            # 2**k as two normal factors, so subnormal results
    k2 = ki - k1                      # and the full range are reached without overflow
    s1 = f32_from_bits(np.uint32(k1 + _BIAS) << _MANT_SHIFT)
    s2 = f32_from_bits(np.uint32(k2 + _BIAS) << _MANT_SHIFT)
    return (p * s1) * s2


# erf(z) / z = P(z**2) for |z| <= 0.7072 (relative error 7e-10 in float64).
_ERF_P = tuple(f(c) for c in (
    1.1283791662780769, -0.3761262736809812, 0.11283525158465652,
    -0.026843457571340726, 0.005135520090637075, -0.0006925483590070856))
# erfcx(z) = exp(z**2) * erfc(z) = t * Q(t), t = 1 / (1 + z/2), for z >= 0.70
# (float64 relative error 3e-9; float32 evaluation within about 4 ULP).
_ERFCX_Q = tuple(f(c) for c in (
    0.28209479, 0.2820945, 0.24684962, 0.17594154, 0.08784227, -0.03047213,
    0.0433513, -0.28601832, 0.30034581, -0.1126508, 0.01051933))
# Near its root r = -0.75179152469356... the derivative is (x - r) * R(x + 3/4) for
# x in [-1, -1/2] (float64 relative error 5e-9): no cancellation between Phi and x*phi.
_ROOT_HI, _ROOT_LO = f(-0.75179154), f(1.211445e-08)
_ROOT_R = tuple(f(c) for c in (
    0.4321895549915881, 0.38821861552938375, -0.018812613377448772, -0.11410586917196322,
    -0.014599579423688624, 0.019226203679729454, 0.004481309332179344))
_ROOT_CENTER = f(0.75)
_SQRT_HALF = f(0.7071067811865476)
_INV_SQRT_2PI = f(0.3989422804014327)
_HALF, _ONE = f(0.5), f(1.0)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_erf_derivative(x):
    """d/dx [x * Phi(x)] = Phi(x) + x * phi(x), without overflow or cancellation in the tails.

    |x| < 1: 1/2 + erf(x/sqrt2)/2 + x*phi(x) with erf as an odd polynomial; on [-1, -1/2],
    around the root, (x - r) * R(x) instead (x - r is exact there).
    |x| >= 1: with E = exp(-x**2/2) and q = erfcx(|x|/sqrt2)/2 - |x|/sqrt(2 pi),
    the derivative is E*q for x < 0 and 1 - E*q for x > 0 (no 1 - Phi cancellation).
    +-inf gives NaN (inf * 0), as the formula does in PyTorch.
    """
    e = exp_f32(-_HALF * (x * x))
    z = x * _SQRT_HALF
    s = z * z
    a = _ERF_P
    erf_small = z * (a[0] + s * (a[1] + s * (a[2] + s * (a[3] + s * (a[4] + s * a[5])))))
    small = _HALF + _HALF * erf_small + x * e * _INV_SQRT_2PI
    v = x + _ROOT_CENTER
    r = _ROOT_R
    near_root = ((x - _ROOT_HI) - _ROOT_LO) * (r[0] + v * (r[1] + v * (r[2] + v * (r[3] + v * (
        r[4] + v * (r[5] + v * r[6]))))))
    small = near_root if -_ONE <= x <= -_HALF else small
    az = abs(z)
    t = _ONE / (_ONE + _HALF * az)
    q = _ERFCX_Q
    poly = q[0] + t * (q[1] + t * (q[2] + t * (q[3] + t * (q[4] + t * (
        q[5] + t * (q[6] + t * (q[7] + t * (q[8] + t * (q[9] + t * q[10])))))))))
    tail = e * (_HALF * t * poly - abs(x) * _INV_SQRT_2PI)
    large = tail if x < 0 else _ONE - tail
    return small if abs(x) < _ONE else large


_SQRT_2_OVER_PI = f(0.7978845608028654)
_TANH_C = f(0.044715)
_TANH_3C = f(3 * 0.044715)
_TANH_CLAMP = f(50.0)
_TWO = f(2.0)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_tanh_derivative(x):
    """Derivative of the tanh approximation of GELU, evaluated without cancellation.

    With u = sqrt(2/pi)(x + 0.044715 x**3) and s = sigmoid(2u): 1/2(1 + tanh u) = s and
    1 - tanh(u)**2 = 4 s (1 - s); both sigmoids come from a = exp(-2|u|) <= 1. x is clamped
    to +-50 (where the result is exactly 1 or 0) so huge finite inputs never overflow;
    NaN and +-inf give NaN.
    """
    xc = min(max(x, -_TANH_CLAMP), _TANH_CLAMP)
    x2 = xc * xc
    u = _SQRT_2_OVER_PI * (xc + _TANH_C * x2 * xc)
    a = exp_f32(-_TWO * abs(u))
    big = _ONE / (_ONE + a)
    small = a * big
    s = big if u >= 0 else small
    s_neg = small if u >= 0 else big
    d = s + _TWO * xc * s * s_neg * _SQRT_2_OVER_PI * (_ONE + _TANH_3C * x2)
    return d + (x - x)
