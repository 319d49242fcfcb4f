"""The GELU backward kernel (kernels/gelu_segments.py): GELU' as 32 piecewise polynomials
for |x| < LIMIT, the fastmath formula elsewhere, 16 lanes at a time in the result's dtype.

The tests hold the segment form to float32 accuracy against the float64 reference and to a
scalar emulation written here, bit for bit; every result dtype to the float32 derivative
rounded once; and every way of running the kernel (contiguous or strided, with or without
AVX-512 or AVX512_BF16) to the same bits.
"""

import ml_dtypes
import numpy as np
import pytest
from numba import njit

import reference as R
from aclnn.kernels import fastmath, gelu_segments, lanes
from aclnn.kernels.bits import BF16, F16, F32, fma_f32
from aclnn.kernels.typed import VIEW_DTYPE

MODES = ["none", "tanh"]
CODES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16,
         np.dtype(ml_dtypes.bfloat16): BF16}
# gradients that reach every rounding case of a 16-bit product: normal, subnormal (1e-38 *
# GELU' < 2**-126, which vcvtneps2bf16 would flush), overflow, signed zeros, NaN and inf
GRADIENTS = [1.0, -3.3, 1e-38, -2.5e-39, 3e38, 60000.0, 0.0, -0.0, np.nan, np.inf]


def _ulp_error(got, exact):
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


def _run(g, x, approximate, kernel=None, streaming=False):
    """o = g * GELU'(x) by the contiguous kernel, in x's dtype (into a cache-line aligned
    output, as streaming stores need)."""
    kernel = kernel or gelu_segments.gelu_flat
    view = VIEW_DTYPE[CODES[x.dtype]]
    out = R.aligned_zeros(x.size, view)
    kernel(g.view(view), x.view(view), out, *gelu_segments.segments(approximate == "tanh"),
           approximate == "tanh", streaming)
    return out.view(x.dtype)


def _derivative(x, approximate):
    """The float32 kernel's GELU'(x) (g = 1)."""
    x = np.asarray(x, np.float32)
    return _run(np.ones_like(x), x, approximate)


def _same_bits(ours, theirs) -> bool:
    """Equal bits, except that any two NaNs match: a NaN gradient times a NaN derivative
    keeps either payload, by operand order."""
    nan = np.isnan(ours) & np.isnan(theirs)
    bits = np.dtype(f"u{ours.dtype.itemsize}")
    return np.array_equal(ours[~nan].view(bits), theirs[~nan].view(bits))


@pytest.mark.parametrize("approximate, bound", [("none", 6.0), ("tanh", 8.0)])
def test_float32_results_are_accurate(approximate, bound):
    """g = 1, x dense over [-13.5, 10] and around the root: within `bound` ULP of the
    float64 GELU' wherever it is a normal float32 (4.5 and 7.4 measured inside the
    segments). The tanh form's own formula, outside them, is not held to it."""
    root = -float(gelu_segments.segments(approximate == "tanh").root_hi)
    x = np.concatenate([np.linspace(-13.5, 10.0, 1_000_003, dtype=np.float32),
                        np.float32(root) + np.arange(-3000, 3000, dtype=np.float32) * 6e-8])
    if approximate == "tanh":
        x = x[np.abs(x) < gelu_segments.LIMIT]
    exact = R.gelu_derivative(x, approximate)
    normal = np.abs(exact) >= np.finfo(np.float32).tiny
    assert _ulp_error(_derivative(x, approximate), exact)[normal].max() <= bound


@pytest.mark.parametrize("approximate, bound", [("none", 4.0), ("tanh", 7.0)])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_segments_on_every_16bit_input(dtype, approximate, bound):
    """Every float16/bfloat16 x with |x| < LIMIT: GELU' within `bound` float32 ULP (3.3 and
    6.3 measured on bfloat16 inputs); GELU'(+-0) is exactly 1/2."""
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype).astype(np.float32)
    x = x[np.abs(x) < gelu_segments.LIMIT]
    exact = R.gelu_derivative(x, approximate)
    assert _ulp_error(_derivative(x, approximate), exact).max() <= bound
    assert _derivative([0.0, -0.0], approximate).tolist() == [0.5, 0.5]


def test_roots_agree_with_the_fitted_formula():
    """The erf form's root, found here by float64 bisection, is the one tools/fit_fastmath.py
    found with mpmath (fastmath keeps it in the same two float32 parts)."""
    form = gelu_segments.segments(False)
    assert (form.root_hi, form.root_lo) == (fastmath._ROOT_HI, fastmath._ROOT_LO)
    tanh_root = float(gelu_segments.segments(True).root_hi)
    assert abs(R.gelu_derivative(np.array([-tanh_root]), "tanh")[0]) < 1e-7


@njit  # no contraction, as in the vector code
def _scalar_segments(x, coefficients, root_hi, root_lo):
    """The documented segment form, one element at a time (NaN outside |x| < LIMIT)."""
    out = np.full(x.size, np.nan, np.float32)
    for i in range(x.size):
        a = abs(x[i])
        if a < gelu_segments.LIMIT:
            t = a * np.float32(gelu_segments.PER_UNIT)
            k = np.int32(t)
            w = t - np.float32(k)
            p = coefficients[gelu_segments.DEGREE, k]
            for j in range(gelu_segments.DEGREE - 1, -1, -1):
                p = fma_f32(p, w, coefficients[j, k])
            q = ((root_hi - a) + root_lo) * p
            out[i] = q if x[i] < 0 else np.float32(1.0) - q
    return out


def _float32_inputs(n=200_003):
    """x over [-20, 20] shuffled (so vectors mix the segments and the tails) plus the
    special values; g normal."""
    rng = np.random.default_rng(5)
    x = np.concatenate([np.linspace(-20, 20, n, dtype=np.float32),
                        np.float32([np.nan, np.inf, -np.inf, 0, -0.0, 3.9999998, 4, -4])])
    return rng.standard_normal(x.size).astype(np.float32), rng.permutation(x)


@pytest.mark.parametrize("approximate", MODES)
def test_vector_code_is_the_documented_segment_form(approximate):
    """|x| < LIMIT: the kernel's GELU' is the scalar segment form exactly; NaN and +-inf
    give NaN (the formula's); lengths with a partial last vector and below one."""
    _, x = _float32_inputs()
    scalar = _scalar_segments(x, *gelu_segments.segments(approximate == "tanh"))
    inside = np.abs(x) < gelu_segments.LIMIT
    for n in (x.size, 4096 * 3 + 5, 17, 5, 0):
        ours = _derivative(x[:n], approximate)
        assert _same_bits(ours[inside[:n]], scalar[:n][inside[:n]])
        assert np.isnan(ours[~np.isfinite(x[:n])]).all()


@pytest.mark.parametrize("approximate", MODES)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16bit_results_are_the_float32_derivative_rounded_once(dtype, approximate):
    """Every 16-bit x (outside the segments, inf and NaN included) with each gradient of
    GRADIENTS: the result is dtype(float32(g) * GELU'(x)), GELU' the float32 kernel's."""
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    derivative = _derivative(x.astype(np.float32), approximate)
    for g_value in GRADIENTS:
        with np.errstate(invalid="ignore", over="ignore"):  # 3e38 is inf in float16
            g = np.full(x.size, g_value, dtype)
            expected = (g.astype(np.float32) * derivative).astype(dtype)
        assert _same_bits(_run(g, x, approximate), expected), g_value


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
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
    """gelu_flat compiled afresh (not from the cache) with the CPU feature flags of `lanes`
    changed."""
    for name, value in flags.items():
        monkeypatch.setattr(lanes, name, value)
    options = {k: v for k, v in gelu_segments.gelu_flat.targetoptions.items()
               if k not in ("cache", "nopython")}
    return njit(**options)(gelu_segments.gelu_flat.py_func)


def _same_results(kernel):
    """`kernel` gives gelu_flat's bits for float32 inputs and for every bfloat16 x with
    gradients that reach the subnormal and overflow roundings."""
    g, x = _float32_inputs()
    assert _same_bits(_run(g, x, "none", kernel), _run(g, x, "none"))
    x = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    for g_value in (1.0, 1e-38, 3e38, np.nan):
        g = np.full(x.size, g_value, ml_dtypes.bfloat16)
        assert _same_bits(_run(g, x, "tanh", kernel), _run(g, x, "tanh")), g_value


def test_integer_rounding_variant_gives_the_same_bits(monkeypatch):
    """Compiled without vcvtneps2bf16 (AVX-512F but not AVX512_BF16): bfloat16 results
    rounded by integer arithmetic, to the same bits."""
    _same_results(_recompiled(monkeypatch, BF16_CONVERT=False))


def test_portable_variant_gives_the_same_bits(monkeypatch):
    """Compiled as for a CPU without AVX-512 (coefficients gathered, fptosi)."""
    _same_results(_recompiled(monkeypatch, AVX512=False, BF16_CONVERT=False))


@pytest.mark.parametrize("approximate", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_streaming_stores_give_the_same_bits(dtype, approximate):
    """Non-temporal stores (large outputs) write what plain ones do: every vector, those
    with lanes outside the segments (|x| >= LIMIT, NaN; stored plainly, then patched by the
    formula) and the padded tail included."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(3 * 4096 + 21) * 3).astype(dtype)
    x[::97] = np.array(np.nan, dtype)
    g = rng.standard_normal(x.size).astype(dtype)
    assert _same_bits(_run(g, x, approximate, streaming=True), _run(g, x, approximate))
