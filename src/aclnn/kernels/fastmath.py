"""float32 elementary functions written for vectorisation (no libm calls in the loops).

Coefficients were fitted for this project by tools/fit_fastmath.py (weighted least squares
on Chebyshev nodes against mpmath references, reweighted towards minimax relative error by
Lawson's iteration); tests/test_fastmath.py measures the float32 evaluations against
float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bits import fma_f32, scale_by_pow2

f = np.float32

_LOG2E = f(1.4426950408889634)
_LN2_HI = f(0.693145751953125)          # ln 2 split so k * _LN2_HI is exact
_LN2_LO = f(1.428606765330187e-06)
_EXP_MIN, _EXP_MAX = f(-120.0), f(88.72)
_EXP_ZERO_BELOW = f(-104.0)  # e**-104 < 2**-150: rounds to 0 in float32
_ZERO = f(0.0)
# e**r = 1 + r * P(r) on |r| <= ln2/2, minimax in relative error (the constant term kept
# exactly 1, so e**0 == 1): degree 6, within 2.0e-9 before float32 rounding.
_EXP_C = tuple(f(c) for c in (
    1.0, 1.000000032179425, 0.4999999420637201, 0.1666643119180718, 0.04166800244910409,
    0.008374161479770256, 0.0013843646260626816))
_NEG_ZERO = f(-0.0)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def horner(x, coeffs):
    """coeffs[0] + x * (coeffs[1] + x * (...)), for a tuple of float32 coefficients."""
    p = coeffs[-1]
    for i in range(len(coeffs) - 2, -1, -1):
        p = p * x + coeffs[i]
    return p


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _exp_split(y, y_lo):
    """e**(y + y_lo), y_lo a correction far below y's ULP; y below -104 gives 0, so
    exp(-inf) == 0 (NaN is not kept). Such y are replaced by 0 before the evaluation, whose
    result is then dropped: computing their underflow through subnormals is what made
    inputs like U(+-100) run at half speed on x86."""
    underflows = y < _EXP_ZERO_BELOW
    z = min(max(_NEG_ZERO if underflows else y, _EXP_MIN), _EXP_MAX)
    k = np.floor(z * _LOG2E + f(0.5))
    r = ((z - k * _LN2_HI) - k * _LN2_LO) + y_lo
    value = scale_by_pow2(horner(r, _EXP_C), k)
    return _ZERO if underflows else value


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def exp_f32(y):
    """e**y in float32 (about 1 ULP); y below -120 gives 0 (see `_exp_split`)."""
    return _exp_split(y, _NEG_ZERO)  # adding -0.0 is folded away


# GELU'(x) = Phi(x) + x phi(x) is q(|x|) for x < 0 and 1 - q(|x|) for x >= 0, with
# q(a) = Phi(-a) - a phi(a) = exp(-a**2/2) * (a_r - a) * V(t),  t = 1 / (1 + a / (2 sqrt2)),
# where a_r = 0.75179152469356... is the root of q (GELU' vanishes at x = -a_r). V is smooth
# and positive (1/sqrt(2 pi) at t = 0, 0.665 at t = 1): q over its linear factor. Fitted on
# t in [0.15, 1], i.e. a <= 16 (beyond, exp(-a**2/2) is 0 in float32), minimising the
# relative error with V(1) = 1/(2 a_r) held exact, so that GELU'(0) is exactly 1/2 in
# float32: within 4.4e-9.
_GELU_V = tuple(f(c) for c in (
    0.3989390836588086, 0.10611886741880797, 0.0835012383087859, 0.06187271938800103,
    0.01111807234303505, 0.04125522994476243, -0.05201707443591371, 0.009016615487457162,
    0.008309986605798264, -0.003036743588108403))
_ROOT = 0.7517915246935644574579049
_ROOT_HI = f(_ROOT)
_ROOT_LO = f(_ROOT - float(_ROOT_HI))
_T_SCALE = f(0.3535533905932738)  # 1 / (2 sqrt2)
_SQUARE_CLAMP = f(16.0)  # exp(-x**2/2) is already 0 there; keeps x**2 and its error finite
_NEG_HALF, _ONE = f(-0.5), f(1.0)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def gelu_erf_derivative(x):
    """GELU'(x) = d/dx [x * Phi(x)] = Phi(x) + x * phi(x) (erf form) to float32 accuracy,
    within a few float32 ULP, without overflow or cancellation.

    q = exp(-x**2/2) * (a_r - |x|) * V(t) (see `_GELU_V`): a_r - |x| is exact near the root
    (a_r kept in two parts), and the tail Phi(-|x|) is never computed as 1 - Phi. The
    rounding error of x**2 reaches the exp (through an FMA), which keeps the tail relatively
    accurate: e**(-x**2/2) is that error times x**2/2 off otherwise. +-inf gives NaN
    (0 * inf), as the formula does in PyTorch.
    """
    xc = min(max(x, -_SQUARE_CLAMP), _SQUARE_CLAMP)
    square = xc * xc
    e = _exp_split(_NEG_HALF * square, _NEG_HALF * fma_f32(xc, xc, -square))
    a = abs(x)
    t = _ONE / (_ONE + _T_SCALE * a)
    q = e * (((_ROOT_HI - a) + _ROOT_LO) * horner(t, _GELU_V))
    return q if x < 0 else _ONE - q


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
