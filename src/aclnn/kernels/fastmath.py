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


# erfcx(z) = exp(z**2) * erfc(z) = t * Q(t), t = 1 / (1 + z/2), for all z >= 0
# (float64 relative error 1.2e-8; float32 evaluation within about 3 ULP).
_ERFCX_Q = tuple(f(c) for c in (
    0.2820947951982112, 0.28209375308217655, 0.24688459111752376, 0.1753158081289724,
    0.09346336635699132, -0.05921444105637454, 0.13218338234231602, -0.4549821497884919,
    0.4937013285608038, -0.23473637938417782, 0.04319595002202524))
# Near its root r = -0.75179152469356... the derivative is (x - r) * R(x + 3/4) for
# x in [-1, -1/2] (float64 relative error 8.5e-8): no cancellation between Phi and x*phi.
_ROOT_HI, _ROOT_LO = f(-0.75179154), f(1.211445e-08)
_ROOT_R = tuple(f(c) for c in (
    0.43218958880725467, 0.38821846129368737, -0.018822413671357868, -0.11409602072449367,
    -0.01418017802598358, 0.019100300846557176))
_ROOT_CENTER = f(0.75)
_SQRT_HALF = f(0.7071067811865476)
_INV_SQRT_2PI = f(0.3989422804014327)
_HALF, _ONE = f(0.5), f(1.0)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_erf_derivative(x):
    """d/dx [x * Phi(x)] = Phi(x) + x * phi(x), without overflow or cancellation.

    With E = exp(-x**2/2) and q = E * (erfcx(|x|/sqrt2)/2 - |x|/sqrt(2 pi)), the derivative
    is q for x < 0 and 1 - q for x >= 0 (Phi's tail never computed as 1 - Phi). On
    [-1, -1/2], around the root, (x - r) * R(x) instead (x - r is exact there).
    +-inf gives NaN (inf * 0), as the formula does in PyTorch.
    """
    e = exp_f32(-_HALF * (x * x))
    ax = abs(x)
    t = _ONE / (_ONE + _HALF * _SQRT_HALF * ax)
    q = _ERFCX_Q
    poly = q[0] + t * (q[1] + t * (q[2] + t * (q[3] + t * (q[4] + t * (
        q[5] + t * (q[6] + t * (q[7] + t * (q[8] + t * (q[9] + t * q[10])))))))))
    tail = e * (_HALF * t * poly - ax * _INV_SQRT_2PI)
    d = tail if x < 0 else _ONE - tail
    v = x + _ROOT_CENTER
    r = _ROOT_R
    near_root = ((x - _ROOT_HI) - _ROOT_LO) * (r[0] + v * (r[1] + v * (r[2] + v * (
        r[3] + v * (r[4] + v * r[5])))))
    return near_root if -_ONE <= x <= -_HALF else d


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
