"""Refit the polynomial coefficients of src/aclnn/kernels/gelu_rows.py and print them.

    python tools/fit_gelu.py

Each fit is a weighted least-squares fit on Chebyshev nodes, reweighted towards the minimax
relative error by Lawson's iteration; the references come from mpmath (40 digits).

- exp: e**r = 1 + r * P(r) on |r| <= ln2/2 (constant term exactly 1, so e**0 == 1).
- GELU' (erf form): q(a) = Phi(-a) - a phi(a) = exp(-a**2/2) * (a_r - a) * V(t) with
  t = 1/(1 + T_SCALE a), fitted for a in [0, A_MAX] with V(1) = 1/(2 a_r) held exact, so
  that GELU'(0) = 1 - q(0) is exactly 1/2. Its relative error is weighted by what SPEC
  §10's float32 bar allows q at each a (`bar_allowance`): the error reported is the
  largest fraction of that allowance used.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

mp.mp.dps = 40
_SQRT2 = mp.sqrt(2)
NODES = 600
LAWSON_STEPS = 300
EXP_HALF_RANGE = 0.3466  # just past ln2/2, which the exp's reduced argument can reach
# t = 1/(1 + T_SCALE a): with V of degree 5, the weighted error was 0.08-0.13 for T_SCALE
# in [0.311, 0.318], 0.48 at 1/(2 sqrt2), above 0.7 below 0.27 and above 0.6
T_SCALE = 0.316
A_MAX = 16.0  # past the erf form's ERF_TAIL (14.6)
T_LOW = 1 / (1 + T_SCALE * A_MAX)
SIXTEEN_BIT_ALLOWANCE = 2.0**-13  # the relative error kept where the bar allows more: the
# float16/bfloat16 results rounded from these values stay within their 1 ULP


def chebyshev_nodes(lo: float, hi: float, n: int = NODES) -> np.ndarray:
    """n Chebyshev nodes of the first kind on [lo, hi]."""
    k = np.arange(n)
    return lo + (hi - lo) * (0.5 - 0.5 * np.cos(np.pi * (k + 0.5) / n))


def lawson(basis: np.ndarray, target: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, float]:
    """Coefficients c minimising max |basis @ c - target| / scale, and that maximum."""
    weights = 1 / scale
    best_error, best = np.inf, None
    for _ in range(LAWSON_STEPS):
        c, *_ = np.linalg.lstsq(basis * weights[:, None], target * weights, rcond=None)
        error = np.abs(basis @ c - target) / scale
        if error.max() < best_error:
            best_error, best = error.max(), c
        weights = weights * (error / error.max()) ** 0.3
        weights /= weights.max()
    return best, float(best_error)


def fit_exp(degree: int) -> tuple[np.ndarray, float]:
    """[1, c1, ..., c_degree] of e**r on |r| <= ln2/2, and the relative error."""
    r = chebyshev_nodes(-EXP_HALF_RANGE, EXP_HALF_RANGE)
    basis = r[:, None] ** np.arange(1, degree + 1)[None, :]
    c, error = lawson(basis, np.expm1(r), np.exp(r))
    return np.concatenate([[1.0], c]), error


def gelu_root() -> mp.mpf:
    """a_r, the root of q(a) = Phi(-a) - a phi(a) (GELU'(-a_r) = 0)."""
    return mp.findroot(lambda a: mp.sqrt(mp.pi / 2) * mp.exp(a * a / 2)
                       * mp.erfc(a / _SQRT2) - a, 0.75)


def gelu_v(t: float, root: mp.mpf) -> float:
    """V(t) = q(a) / (exp(-a**2/2) (a_r - a)), a = (1/t - 1) / T_SCALE."""
    a = (1 / mp.mpf(t) - 1) / mp.mpf(T_SCALE)
    if abs(a - root) < mp.mpf("1e-25"):
        a = root + mp.mpf("1e-25")
    z = a / _SQRT2
    q_over_e = (mp.sqrt(mp.pi / 2) * mp.exp(z * z) * mp.erfc(z) - a) / mp.sqrt(2 * mp.pi)
    return float(q_over_e / (root - a))


def bar_allowance(a: np.ndarray) -> np.ndarray:
    """The relative error of q(a) that SPEC §10's float32 bar for GELU' (8 ULP + 2**-22,
    g = 1) allows at both x = -a (GELU' = q) and x = a (1 - q), at most
    SIXTEEN_BIT_ALLOWANCE."""
    q = np.array([0.5 * math.erfc(v / math.sqrt(2)) - v * math.exp(-v * v / 2)
                  / math.sqrt(2 * math.pi) for v in a])

    def ulp(y: np.ndarray) -> np.ndarray:
        return np.spacing(np.abs(y).astype(np.float32)).astype(np.float64)
    allowed = np.minimum(8 * ulp(q), 8 * ulp(1 - q)) + 2.0**-22
    return np.minimum(allowed / np.abs(q), SIXTEEN_BIT_ALLOWANCE)


def fit_gelu_v(degree: int) -> tuple[np.ndarray, float]:
    """Monomial coefficients of V (degree `degree`) with V(1) = 1/(2 a_r), and the largest
    fraction of `bar_allowance` its relative error uses: V = V(1) + (t - 1) W(t) with W
    fitted."""
    root = gelu_root()
    v1 = 1 / (2 * float(root))
    t = chebyshev_nodes(T_LOW, 1.0)
    v = np.array([gelu_v(x, root) for x in t])
    basis = np.vander(t, degree, increasing=True) * (t - 1)[:, None]
    w, error = lawson(basis, v - v1, v * bar_allowance((1 / t - 1) / T_SCALE))
    coeffs = np.zeros(degree + 1)
    coeffs[0] = v1
    coeffs[1:] += w
    coeffs[:-1] -= w
    return _half_at_zero(coeffs.astype(np.float32), float(root)), error


def _half_at_zero(coeffs: np.ndarray, root: float) -> np.ndarray:
    """The float32 coefficients with the constant term moved by the fewest ULP that make
    the kernel's GELU'(0) = 1 - float32(a_r) * V(1) exactly 1/2 in float32 (V(1) by
    Horner's rule in float32, as the kernel evaluates it at t = 1)."""
    one, half = np.float32(1.0), np.float32(0.5)
    for step in sorted(range(-64, 65), key=abs):
        trial = coeffs.copy()
        trial[0] = coeffs[0] + np.float32(step) * np.spacing(coeffs[0])
        value = trial[-1]
        for c in trial[-2::-1]:
            value = value * one + c
        if one - np.float32(root) * value == half:
            return trial.astype(np.float64)
    raise ValueError("no constant term gives GELU'(0) = 1/2")


def fits() -> dict[str, tuple[np.ndarray, float]]:
    """Every coefficient set of gelu_rows.py, by its name there."""
    return {"_EXP_C": fit_exp(5), "_GELU_V": fit_gelu_v(5)}


def main() -> None:
    """Print each coefficient set with its relative error."""
    print(f"a_r = {mp.nstr(gelu_root(), 25)}")
    for name, (coeffs, error) in fits().items():
        print(f"{name}  (error {error:.2g})")
        print("    " + ", ".join(repr(float(c)) for c in coeffs))


if __name__ == "__main__":
    main()
