"""GELU' as 32 piecewise polynomials (kernels/gelu_segments.py), for float32 and bfloat16
results.

The tests hold the segment form to float32 accuracy against the float64 reference, the
vector code to its scalar twin (which fills the bfloat16 table) bit for bit, and every
way of running it (contiguous or strided, with or without AVX-512 or AVX512_BF16) to the
same bits.
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
MODES = ["none", "tanh"]
LIMIT_BITS = np.float32(gelu_segments.LIMIT).view(np.uint32) >> 16


def _ulp_error(got, exact):
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


def _run(kernel, g, x, approximate):
    """kernel(g, x, out, ...) as `pointwise.gelu_backward` calls it; out has x's type."""
    use_tanh = approximate == "tanh"
    form = gelu_segments.segments(use_tanh)
    table = pointwise.bf16_derivative_table(use_tanh) if x.dtype == np.int16 else \
        pointwise._NO_TABLE
    out = np.zeros(x.size, x.dtype)
    kernel(g, x, out, form.coefficients, form.root_hi, form.root_lo, use_tanh, table)
    return out


@pytest.mark.parametrize("approximate, bound", [("none", 4.0), ("tanh", 7.0)])
def test_segment_form_is_float32_accurate_on_every_bfloat16_input(approximate, bound):
    """Every bfloat16 x with |x| < LIMIT: the table (the segment form there) within `bound`
    float32 ULP of the float64 GELU' (3.3 and 6.3 measured); GELU'(+-0) is exactly 1/2."""
    table = pointwise.bf16_derivative_table(approximate == "tanh")
    inside = (ALL_BITS & 0x7FFF) < LIMIT_BITS
    exact = R.gelu_derivative(ALL_X[inside], approximate)
    assert _ulp_error(table[inside], exact).max() <= bound
    assert table[0] == table[0x8000] == np.float32(0.5)


@pytest.mark.parametrize("approximate, bound", [("none", 6.0), ("tanh", 8.0)])
def test_float32_results_are_accurate(approximate, bound):
    """float32, g = 1, x dense over [-13.5, 10] and around the root: within `bound` ULP of
    the float64 GELU' wherever it is a normal float32 (4.5 and 7.4 measured inside the
    segments). The tanh form's own formula, outside, is not held to it."""
    root = -float(gelu_segments.segments(approximate == "tanh").root_hi)
    x = np.concatenate([np.linspace(-13.5, 10.0, 1_000_003, dtype=np.float32),
                        np.float32(root) + np.arange(-3000, 3000, dtype=np.float32) * 6e-8])
    if approximate == "tanh":
        x = x[np.abs(x) < gelu_segments.LIMIT]
    got = _run(gelu_segments.gelu_flat, np.ones_like(x), x, approximate)
    exact = R.gelu_derivative(x, approximate)
    normal = np.abs(exact) >= np.finfo(np.float32).tiny
    assert _ulp_error(got, exact)[normal].max() <= bound


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
    nan = np.isnan(ours) & np.isnan(theirs)
    bits = np.dtype(f"u{ours.dtype.itemsize}")
    return np.array_equal(ours[~nan].view(bits), theirs[~nan].view(bits))


def _bf16_from_table(g, x, approximate):
    """bfloat16(g * table[x]) in NumPy: float32 product, rounded to nearest-even."""
    table = pointwise.bf16_derivative_table(approximate == "tanh")
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0, and 3e38 * 1.08
        product = g.view(ml_dtypes.bfloat16).astype(np.float32) * table[x.view(np.uint16)]
    return product.astype(ml_dtypes.bfloat16)


def _check_bf16(kernel, approximate, n=ALL_BITS.size, gradients=GRADIENTS):
    for g_value in gradients:
        g = np.full(n, g_value, ml_dtypes.bfloat16).view(np.int16)
        x = ALL_BITS[:n].view(np.int16)
        ours = _run(kernel, g, x, approximate).view(ml_dtypes.bfloat16)
        assert _same_bits(ours, _bf16_from_table(g, x, approximate)), g_value


@pytest.mark.parametrize("approximate", MODES)
@pytest.mark.parametrize("n", [1 << 16, (1 << 16) - 5, 7, 0])
def test_bfloat16_results_are_the_table_s(approximate, n):
    """Every bfloat16 x (|x| >= LIMIT, inf and NaN included, so the fallback runs) with
    each gradient of GRADIENTS: the vector code gives bfloat16(g * table[x]); lengths with
    a partial last vector and below one."""
    _check_bf16(gelu_segments.gelu_flat, approximate, n)


def _float32_inputs(n=200_003):
    """x over [-20, 20] shuffled (so vectors mix the segments and the tails) plus the
    special values; g normal."""
    rng = np.random.default_rng(5)
    x = np.concatenate([np.linspace(-20, 20, n, dtype=np.float32),
                        np.float32([np.nan, np.inf, -np.inf, 0, -0.0, 3.9999998, 4, -4])])
    return rng.standard_normal(x.size).astype(np.float32), rng.permutation(x)


@njit
def _segments_alone(g, x, coefficients, root_hi, root_lo):
    out = np.full(x.size, np.nan, np.float32)
    for i in range(x.size):
        if abs(x[i]) < gelu_segments.LIMIT:
            out[i] = g[i] * gelu_segments.segment_derivative(x[i], coefficients, root_hi,
                                                             root_lo)
    return out


@pytest.mark.parametrize("approximate", MODES)
def test_float32_vector_code_is_its_scalar_twin_inside(approximate):
    """|x| < LIMIT: the vector code's float32 result is g * segment_derivative(x) exactly;
    NaN and +-inf give NaN (the formula's; its accuracy outside is tested above)."""
    g, x = _float32_inputs()
    form = gelu_segments.segments(approximate == "tanh")
    ours = _run(gelu_segments.gelu_flat, g, x, approximate)
    inside = np.abs(x) < gelu_segments.LIMIT
    assert _same_bits(ours[inside], _segments_alone(g, x, *form)[inside])
    assert np.isnan(ours[~np.isfinite(x)]).all()


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("approximate", MODES)
def test_strided_and_contiguous_give_the_same_bits(dtype, approximate):
    """aclnnGeluBackwardV2 on a contiguous x and on the same values seen through a strided
    view (the tiled kernel): identical results, tails and partial vectors included."""
    g, x = _float32_inputs(40_032)  # 40 rows of 1001 with the special values
    g, x = g.astype(dtype).reshape(-1, 1001), x.astype(dtype).reshape(-1, 1001)
    contiguous = R.compute("gelu", [g, x], [approximate])
    strided = R.compute("gelu", [g, R.strided_device(x, R.layout_strides(x.shape, gap=3))],
                        [approximate])
    assert _same_bits(contiguous, strided)


def _recompiled(monkeypatch, **flags):
    """gelu_flat compiled afresh (not from the cache) with module flags changed."""
    for name, value in flags.items():
        monkeypatch.setattr(gelu_segments, name, value)
    options = {k: v for k, v in gelu_segments.gelu_flat.targetoptions.items()
               if k not in ("cache", "nopython")}
    return njit(**options)(gelu_segments.gelu_flat.py_func)


def test_integer_rounding_variant_gives_the_same_bits(monkeypatch):
    """Compiled without vcvtneps2bf16 (AVX-512F but not AVX512_BF16), the vector code
    rounds by integer arithmetic, to the same bits."""
    _check_bf16(_recompiled(monkeypatch, _BF16_CONVERT=False), "none",
                gradients=[1.0, 1e-38, 3e38, np.nan])


def test_portable_variant_gives_the_same_bits(monkeypatch):
    """Compiled as for a CPU without AVX-512 (coefficients gathered, fptosi), the same
    bits for bfloat16 and float32 results."""
    kernel = _recompiled(monkeypatch, AVX512=False, _BF16_CONVERT=False)
    _check_bf16(kernel, "tanh", gradients=[1.0, 1e-38, np.nan])
    g, x = _float32_inputs()
    assert _same_bits(_run(kernel, g, x, "none"), _run(gelu_segments.gelu_flat, g, x, "none"))
