"""The float32 functions under the GELU kernels against float64 references: the exp and the
2**k scaling under it (every exponent the kernels reach, subnormal results included), and
GELU' (erf form), which the GELU kernels take outside their segments."""

from pathlib import Path

import numpy as np
from numba import njit

import reference as R
from aclnn.kernels.bits import scale_by_pow2
from aclnn.kernels.fastmath import exp_f32, gelu_erf_derivative
from support import load_script, mapped


@njit
def _scaled(values, powers):
    out = np.empty_like(values)
    for i in range(values.size):
        out[i] = scale_by_pow2(values[i], powers[i])
    return out


_exp = mapped(exp_f32)
_gelu_erf = mapped(gelu_erf_derivative)


def test_scale_by_pow2_is_exact_over_its_range():
    """value * 2**k for every k in [-252, 254]: exact (NumPy's ldexp in float64, then
    rounded to float32 - one rounding, as two normal factors give when the first product
    is exact), subnormal and overflowing results included."""
    k = np.arange(-252, 255, dtype=np.float32)
    for value in (1.0, 1.5, -1.9999999, 1.1754944e-38 * 2**60, 3.0e-3):
        values = np.full(k.size, value, np.float32)
        expected = np.ldexp(values.astype(np.float64), k.astype(np.int64))
        with np.errstate(over="ignore"):
            expected = expected.astype(np.float32)
        assert _scaled(values, k).view(np.uint32).tolist() == expected.view(np.uint32).tolist()


def _ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


def test_exp_within_two_ulp_down_to_subnormal_results():
    y = np.concatenate([np.linspace(-103.0, 88.0, 200_001, dtype=np.float32),
                        np.float32([0.0, -0.0, 1e-30, -1e-30])])
    exact = np.exp(y.astype(np.float64))
    assert _ulp_error(_exp(y), exact).max() <= 2.0


def test_exp_limits():
    got = _exp(np.float32([-np.inf, -200.0, -121.0, np.inf, 1000.0]))
    assert got[:3].tolist() == [0.0, 0.0, 0.0]
    assert np.isfinite(got[3:]).all() and (got[3:] > 3.0e38).all()


_FLOAT32_TINY = 1.1754944e-38


def test_gelu_erf_derivative_within_six_ulp_into_the_tail():
    """Every normal float32 result from x = -13.5 (GELU' about -1e-38) to 10, densely, and
    each float32 within 3000 ULP of the root: at most 6 ULP. The tail keeps this only
    because the rounding error of x**2 reaches the exp (about 60 ULP at x = -13 without)."""
    root = np.float32(-0.75179154)
    near_root = root + np.arange(-3000, 3000, dtype=np.float32) * np.float32(6e-8)
    x = np.concatenate([np.linspace(-13.5, 10.0, 2_000_001, dtype=np.float32), near_root,
                        np.float32([0.0, -0.0, 1e-30, -1e-30])])
    exact = R.gelu_derivative(x, "none")
    normal = np.abs(exact) >= _FLOAT32_TINY
    assert _ulp_error(_gelu_erf(x), exact)[normal].max() <= 6.0


def test_gelu_erf_derivative_limits():
    """GELU'(+-0) is exactly 1/2; huge finite inputs give exactly 1 or 0 (no overflow in
    x**2); +-inf and NaN give NaN."""
    x = np.float32([0.0, -0.0, 3e38, 1e30, 40.0, -40.0, -1e30, -3e38, np.inf, -np.inf, np.nan])
    got = _gelu_erf(x)
    assert got[:8].tolist() == [0.5, 0.5, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert np.isnan(got[8:]).all()


def test_coefficients_are_the_fit_tool_s():
    """tools/fit_fastmath.py reproduces every coefficient set of fastmath (as float32), and
    reports the fit errors the module's comments quote."""
    from aclnn.kernels import fastmath

    fit_tool = load_script(Path(__file__).resolve().parents[1] / "tools" / "fit_fastmath.py")
    quoted = {"_EXP_C": 2.0e-9, "_GELU_V": 4.4e-9}
    for name, (coeffs, error) in fit_tool.fits().items():
        assert coeffs.astype(np.float32).tolist() == list(getattr(fastmath, name)), name
        assert error <= quoted[name] * 1.05, name
