"""float32 elementary functions written for vectorisation (no libm calls in the loops).

Coefficients were fitted for this project (weighted least squares on Chebyshev nodes
against high-precision references); the error figures are float32 evaluations measured
against float64/mpmath.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bits import scale_by_pow2

f = np.float32

_LOG2E = f(1.4426950408889634)
_LN2_HI = f(0.693145751953125)          # ln 2 split so k * _LN2_HI is exact
_LN2_LO = f(1.428606765330187e-06)
_EXP_MIN, _EXP_MAX = f(-120.0), f(88.72)
_EXP_C = tuple(f(1.0 / c) for c in (1, 1, 2, 6, 24, 120, 720, 5040))
_EXP_C_SHORT = _EXP_C[:6]  # relative error about 3.4e-6


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def horner(x, coeffs):
    """coeffs[0] + x * (coeffs[1] + x * (...)), for a tuple of float32 coefficients."""
    p = coeffs[-1]
    for i in range(len(coeffs) - 2, -1, -1):
        p = p * x + coeffs[i]
    return p


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _exp(y, coeffs):
    """e**y with the Taylor coefficients `coeffs` of e**r on |r| <= ln2/2; y below -120
    gives 0, so exp(-inf) == 0 (NaN is not kept)."""
    y = min(max(y, _EXP_MIN), _EXP_MAX)
    k = np.floor(y * _LOG2E + f(0.5))
    r = (y - k * _LN2_HI) - k * _LN2_LO
    return scale_by_pow2(horner(r, coeffs), k)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def exp_f32(y):
    """e**y in float32 (about 1 ULP); y below -120 gives 0 (see `_exp`)."""
    return _exp(y, _EXP_C)


# erfcx(z) = exp(z**2) * erfc(z) = t * Q(t), t = 1 / (1 + z/2), for all z >= 0
# (float64 relative error 1.2e-8; float32 evaluation within about 3 ULP).
_ERFCX_Q = tuple(f(c) for c in (
    0.2820947951982112, 0.28209375308217655, 0.24688459111752376, 0.1753158081289724,
    0.09346336635699132, -0.05921444105637454, 0.13218338234231602, -0.4549821497884919,
    0.4937013285608038, -0.23473637938417782, 0.04319595002202524))
# Near its root r = -0.75179152469356... the derivative is (x - r) * R(x + 3/4) for
# x in [-1, -1/2] (float64 relative error 8.5e-8): no cancellation between Phi and x*phi.
_ROOT_R = tuple(f(c) for c in (
    0.43218958880725467, 0.38821846129368737, -0.018822413671357868, -0.11409602072449367,
    -0.01418017802598358, 0.019100300846557176))
# Shorter fits for results rounded to float16/bfloat16: Q on t in [0.15, 1] (|x| <= 14.7;
# beyond, exp(-x**2/2) is 0 in float32) within 2.3e-6, R within 2.8e-6 - with the short
# exp, about a hundredth of a float16 ULP.
_ERFCX_Q_SHORT = tuple(f(c) for c in (
    0.28231120817488486, 0.2778246783546545, 0.280426502239424, 0.040147218819911415,
    0.38690868550421204, -0.35568691742590963, 0.08806807005358738))
_ROOT_R_SHORT = tuple(f(c) for c in (
    0.4321893253894365, 0.3881953042351895, -0.018788827338380665, -0.11260718355464441,
    -0.014716872707163063))
_ROOT_HI, _ROOT_LO = f(-0.75179154), f(1.211445e-08)
_ROOT_CENTER = f(0.75)
_SQRT_HALF = f(0.7071067811865476)
_INV_SQRT_2PI = f(0.3989422804014327)
_HALF, _ONE = f(0.5), f(1.0)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _gelu_erf(x, erfcx_q, root_r, exp_c):
    """d/dx [x * Phi(x)] = Phi(x) + x * phi(x), without overflow or cancellation.

    With E = exp(-x**2/2) and q = E * (erfcx(|x|/sqrt2)/2 - |x|/sqrt(2 pi)), the derivative
    is q for x < 0 and 1 - q for x >= 0 (Phi's tail never computed as 1 - Phi). On
    [-1, -1/2], around the root, (x - r) * R(x) instead (x - r is exact there).
    +-inf gives NaN (inf * 0), as the formula does in PyTorch.
    """
    e = _exp(-_HALF * (x * x), exp_c)
    ax = abs(x)
    t = _ONE / (_ONE + _HALF * _SQRT_HALF * ax)
    tail = e * (_HALF * t * horner(t, erfcx_q) - ax * _INV_SQRT_2PI)
    d = tail if x < 0 else _ONE - tail
    near_root = ((x - _ROOT_HI) - _ROOT_LO) * horner(x + _ROOT_CENTER, root_r)
    return near_root if -_ONE <= x <= -_HALF else d


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_erf_derivative(x):
    """GELU'(x) (erf form) to float32 accuracy: within a few float32 ULP."""
    return _gelu_erf(x, _ERFCX_Q, _ROOT_R, _EXP_C)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_erf_derivative_short(x):
    """GELU'(x) (erf form) for results rounded to float16/bfloat16: relative error about
    1e-5, so the rounded result is within 1 ULP; a third fewer operations."""
    return _gelu_erf(x, _ERFCX_Q_SHORT, _ROOT_R_SHORT, _EXP_C_SHORT)


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
