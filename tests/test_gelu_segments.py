"""GELU' of bfloat16 inputs as 32 piecewise polynomials (kernels/gelu_segments.py).

The segment form fills the bfloat16 derivative table for |x| < LIMIT and is what the
AVX-512 kernel computes in its vectors; the tests hold it to float32 accuracy against the
float64 reference, and hold every kernel path (vector, table, both bfloat16 conversions,
the machine without AVX-512) to the same bits.
"""

import ml_dtypes
import numpy as np
import pytest
from numba import njit

import reference as R
from aclnn.kernels import fastmath, gelu_segments, pointwise

ALL_BITS = np.arange(1 << 16, dtype=np.uint16)
ALL_X = ALL_BITS.view(ml_dtypes.bfloat16)
# gradients that reach every rounding case of the product: normal, subnormal results
# (1e-38 * GELU' < 2**-126, which vcvtneps2bf16 would flush), overflow to inf, signed
# zeros, NaN and inf
GRADIENTS = [1.0, -3.3, 1e-38, -2.5e-39, 3e38, 0.0, -0.0, np.nan, np.inf]
needs_avx512 = pytest.mark.skipif(not gelu_segments.AVAILABLE,
                                  reason="the vector path is compiled only for AVX-512F")


def _ulp_error(got, exact):
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


@pytest.mark.parametrize("approximate, bound", [("none", 4.0), ("tanh", 7.0)])
def test_segment_form_is_float32_accurate_on_every_bfloat16_input(approximate, bound):
    """Every bfloat16 x with |x| < LIMIT: the table (the segment form there) within `bound`
    float32 ULP of the float64 GELU' (3.3 and 6.3 measured); GELU'(+-0) is exactly 1/2."""
    table = pointwise.bf16_derivative_table(approximate == "tanh")
    limit_bits = np.float32(gelu_segments.LIMIT).view(np.uint32) >> 16
    inside = (ALL_BITS & 0x7FFF) < limit_bits
    exact = R.gelu_derivative(ALL_X[inside], approximate)
    assert _ulp_error(table[inside], exact).max() <= bound
    assert table[0] == table[0x8000] == np.float32(0.5)


def test_roots_agree_with_the_fitted_formula():
    """The erf form's root, found here by float64 bisection, is the one tools/fit_fastmath.py
    found with mpmath (fastmath keeps it in the same two float32 parts)."""
    form = gelu_segments.segments(False)
    assert (form.root_hi, form.root_lo) == (fastmath._ROOT_HI, fastmath._ROOT_LO)
    tanh_root = float(gelu_segments.segments(True).root_hi)
    assert abs(R.gelu_derivative(np.array([-tanh_root]), "tanh")[0]) < 1e-7


def _same_bits(ours, theirs) -> bool:
    """Equal bits, except that any two NaNs match: a NaN gradient times a NaN derivative
    keeps either payload, by operand order."""
    nan = (ours & 0x7FFF > 0x7F80) & (theirs & 0x7FFF > 0x7F80)
    return np.array_equal(ours[~nan], theirs[~nan])


def _vector_and_table(kernel, g_value, approximate, n=ALL_BITS.size):
    """(kernel's bits, the table kernel's bits) for g = g_value and every bfloat16 x."""
    use_tanh = approximate == "tanh"
    table = pointwise.bf16_derivative_table(use_tanh)
    form = gelu_segments.segments(use_tanh)
    g = np.full(n, g_value, ml_dtypes.bfloat16).view(np.int16)
    x = ALL_BITS[:n].view(np.int16)
    ours, theirs = np.zeros(n, np.int16), np.zeros(n, np.int16)
    kernel(g, x, ours, form.coefficients, form.root_hi, form.root_lo, table)
    pointwise._gelu_table_flat(g, x, theirs, table)
    return ours, theirs


@needs_avx512
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("n", [1 << 16, (1 << 16) - 5, 7, 0])
def test_vector_path_gives_the_table_s_bits(approximate, n):
    """Every bfloat16 x (|x| >= LIMIT, inf and NaN included, so the gather fallback runs),
    with each gradient of GRADIENTS; lengths with a partial last vector and below one."""
    for g_value in GRADIENTS:
        ours, theirs = _vector_and_table(gelu_segments.gelu_bf16_flat, g_value, approximate, n)
        assert _same_bits(ours, theirs), (g_value, np.count_nonzero(ours != theirs))


@needs_avx512
def test_integer_rounding_variant_gives_the_same_bits(monkeypatch):
    """The vector kernel compiled without vcvtneps2bf16 (a CPU with AVX-512F but not
    AVX512_BF16) rounds by integer arithmetic, to the same bits."""
    monkeypatch.setattr(gelu_segments, "_BF16_CONVERT", False)
    kernel = njit(parallel=True, error_model="numpy")(gelu_segments.gelu_bf16_flat.py_func)
    for g_value in (1.0, 1e-38, 3e38, np.nan):
        ours, theirs = _vector_and_table(kernel, g_value, "none")
        assert _same_bits(ours, theirs), g_value


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_operator_without_avx512_takes_the_table_with_the_same_bits(monkeypatch, approximate):
    """aclnnGeluBackwardV2 on contiguous bfloat16: the same result whether the machine has
    the vector path or not (the table holds the segment form)."""
    rng = np.random.default_rng(3)
    g = (rng.standard_normal(5000) * 3).astype(ml_dtypes.bfloat16)
    x = (rng.standard_normal(5000) * 3).astype(ml_dtypes.bfloat16)
    results = []
    for available in (True, False):
        monkeypatch.setattr(pointwise, "SEGMENTS_AVAILABLE", available)
        results.append(R.compute("gelu", [g, x], [approximate]).view(np.uint16))
    assert np.array_equal(results[0], results[1])
    R.check_output("gelu", results[0].view(ml_dtypes.bfloat16),
                   R.golden("gelu", [g, x], [approximate]), ml_dtypes.bfloat16, g=g)

