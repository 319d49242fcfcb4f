"""The float32 exp the GELU kernels use, and the 2**k scaling under it, against NumPy in
float64: every exponent the kernels reach, subnormal results included."""

import numpy as np
from numba import njit

from aclnn.kernels.bits import scale_by_pow2
from aclnn.kernels.fastmath import exp_f32


@njit
def _scaled(values, powers):
    out = np.empty_like(values)
    for i in range(values.size):
        out[i] = scale_by_pow2(values[i], powers[i])
    return out


@njit
def _exp(values):
    out = np.empty_like(values)
    for i in range(values.size):
        out[i] = exp_f32(values[i])
    return out


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
