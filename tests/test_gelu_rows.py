"""The GELU backward kernel (kernels/gelu_rows.py): GELU' by one branch-free float32 formula
per form, 32 lanes at a time, the same operations for every value.

The tests hold the exp under it and both forms to their accuracy against float64
references; the vector code to a scalar emulation of the documented operations written
here, bit for bit; every 16-bit input (through the operator) to the float32 derivative
rounded once; and contiguous, strided and streamed runs to the same bits.
"""

import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from benchmarks import isa
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

import reference as R
from aclnn.kernels import dag950, gelu_rows, lookup, pointwise
from aclnn.kernels.lanes import LANES, VF
from support import load_script

MODES = ["none", "tanh"]
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
# gradients that reach every rounding case of a 16-bit product: normal, subnormal, overflow,
# signed zeros, NaN and inf
GRADIENTS = [1.0, -3.3, 1e-38, -2.5e-39, 3e38, 60000.0, 0.0, -0.0, np.nan, np.inf]


def _ulp_error(got, exact):
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


def _run(g, x, approximate, streaming=False, code=pointwise.BF16):
    """o = g * GELU'(x) by the contiguous float32 kernel (into a cache-line aligned output,
    as streaming stores need), as it computes it for results of the dtype `code` (the erf
    form's negative tail: see `gelu_rows.negative_tail`)."""
    out = R.aligned_zeros(x.size, np.float32)
    gelu_rows.gelu_flat(np.asarray(g, np.float32), np.asarray(x, np.float32), out,
                        approximate == "tanh", gelu_rows.negative_tail(code, approximate == "tanh"),
                        streaming)
    return out


def _derivative(x, approximate, code=pointwise.BF16):
    """The float32 kernel's GELU'(x) (g = 1) for results of the dtype `code`: by default
    with the erf form's whole tail, as 16-bit results take it."""
    x = np.asarray(x, np.float32)
    return _run(np.ones_like(x), x, approximate, code=code)


def _same_bits(ours, theirs) -> bool:
    """Equal bits, except that any two NaNs match (a NaN times a NaN keeps either payload)."""
    nan = np.isnan(ours) & np.isnan(theirs)
    bits = np.dtype(f"u{ours.dtype.itemsize}")
    return np.array_equal(ours[~nan].view(bits), theirs[~nan].view(bits))


def _vector_method(name, **options):
    """A compiled function applying `gelu_rows._Vectors.<name>` (with `options`) to a
    float32 array, 16 lanes at a time (the array's size a multiple of 16)."""
    @intrinsic
    def lanes16(typingctx, values, out, first):
        def codegen(context, builder, signature, args):
            def at(i):
                data = context.make_array(signature.args[i])(context, builder, value=args[i]).data
                return builder.bitcast(builder.gep(data, [args[2]]), VF.as_pointer())
            vector = builder.load(at(0), align=4)
            method = getattr(gelu_rows._Vectors(builder), name)
            builder.store(method(vector, **options), at(1), align=4)
            return context.get_dummy_value()
        return types.none(values, out, types.intp), codegen

    @njit
    def apply(values):
        out = np.empty_like(values)
        for first in range(0, values.size, LANES):
            lanes16(values, out, first)
        return out
    return apply


_SCALED_EXP = {chain: _vector_method("scaled_exp", short_chain=chain) for chain in (False, True)}


def _padded(values) -> np.ndarray:
    values = np.asarray(values, np.float32)
    return np.concatenate([values, np.zeros(-values.size % LANES, np.float32)])


@pytest.mark.parametrize("short_chain", [False, True], ids=["horner", "estrin"])
def test_exp_within_two_ulp_plus_its_reduction_s_and_normal_down_to_minus_130(short_chain):
    """2**64 e**(-z/2) for z from 0 to 260 (e**-130, the kernels' lowest), its polynomial
    by either scheme: a normal float32 within 2 ULP of the float64 value by Horner's rule
    (3 by Estrin's scheme), plus the error of k * 2 ln2 growing with z (z/40 ULP: measured
    1.97 and 2.76 up to z = 10, 6.44 and 6.91 at 260); e**0 is exactly 1."""
    _scaled_exp = _SCALED_EXP[short_chain]
    z = _padded(np.concatenate([np.linspace(0.0, 260.0, 400_000, dtype=np.float32),
                                np.float32([0.0, -0.0, 2e-30, 2e-7])]))
    got = _scaled_exp(z)
    assert (got >= FLOAT32_TINY).all()
    exact = np.exp(-0.5 * z.astype(np.float64)) * 2.0**gelu_rows.SCALE
    assert (_ulp_error(got, exact) <= (3.0 if short_chain else 2.0) + z / 40).all()
    assert _scaled_exp(_padded([0.0, -0.0]))[:2].tolist() == [2.0**64] * 2


@pytest.mark.parametrize("approximate", MODES)
def test_float32_results_meet_the_precision_bar(approximate):
    """Dense x over [-15, 15] and every float32 within 3000 ULP of the root: within SPEC
    §10's 8 ULP + 2**-22 of the float64 GELU' (g = 1)."""
    root = -float(gelu_rows._ROOT_HI)
    x = np.concatenate([np.linspace(-15.0, 15.0, 1_500_001, dtype=np.float32),
                        np.float32(root) + np.arange(-3000, 3000, dtype=np.float32) * 6e-8])
    exact = R.gelu_derivative(x, approximate)
    error = np.abs(_derivative(x, approximate, pointwise.F32).astype(np.float64) - exact)
    assert (error <= 8 * np.spacing(np.abs(exact).astype(np.float32)) + 2.0**-22).all()


@pytest.mark.parametrize("approximate", MODES)
def test_float32_results_take_subnormal_derivatives_as_0(approximate):
    """For float32 results each form takes GELU' as 0 from x = -ERF_NORMAL / -TANH_NORMAL
    on, where the whole tail's value (16-bit results) is subnormal; every other float32
    result keeps the whole tail's bits and none is subnormal. Through the operator,
    contiguous and strided: float32 gives 0 there, bfloat16 the subnormal GELU' times g."""
    tanh = approximate == "tanh"
    normal = float(gelu_rows.TANH_NORMAL if tanh else gelu_rows.ERF_NORMAL)
    zero = float((gelu_rows.TANH_TAIL if tanh else gelu_rows.ERF_TAIL)[0])
    middle = -0.5 * (normal + zero)  # between where GELU' turns subnormal and rounds to 0
    x = np.linspace(-16.0, 16.0, 3_200_001, dtype=np.float32)
    flushed, whole = _derivative(x, approximate, pointwise.F32), _derivative(x, approximate)
    past = x <= -gelu_rows.negative_tail(pointwise.F32, tanh)
    assert (flushed[past] == 0).all()
    assert _same_bits(flushed[~past], whole[~past])
    assert ((flushed == 0) | (np.abs(flushed) >= FLOAT32_TINY)).all()
    assert (np.abs(whole[past]) < FLOAT32_TINY).all()
    assert (whole[past & (x > middle)] != 0).all()
    last_normal = np.nextafter(np.float32(-normal), np.float32(0))
    assert abs(_derivative([last_normal], approximate)[0]) >= FLOAT32_TINY
    for dtype in (np.float32, ml_dtypes.bfloat16):
        x = np.array([[-normal - 0.15, middle, -normal + 0.09]], dtype)
        g = np.array([[1e30, -1e25, 1.0]], dtype)
        for x_in in (x, R.strided_device(x, R.layout_strides(x.shape, gap=3))):
            got = R.compute("gelu", [g, x_in], [approximate]).astype(np.float32)
            assert (got[0, :2] == 0).all() == (dtype == np.float32), dtype
            assert got[0, 2] != 0


def test_erf_form_keeps_relative_accuracy_into_the_tail():
    """The erf form's relative error stays within 2**-16 (1.4e-5 measured) plus 1 ULP where
    the bar's absolute term would allow any value (16-bit results are rounded from these):
    every result from x = -14.6 (GELU' about -1e-46; subnormal from -13.34 on) to 10,
    densely, and around the root."""
    root = -float(gelu_rows._ROOT_HI)
    x = np.concatenate([np.linspace(-14.6, 10.0, 2_500_001, dtype=np.float32),
                        np.float32(root) + np.arange(-3000, 3000, dtype=np.float32) * 6e-8])
    exact = R.gelu_derivative(x, "none")
    error = np.abs(_derivative(x, "none").astype(np.float64) - exact)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert (error <= 2.0**-16 * np.abs(exact) + ulp).all()


@pytest.mark.parametrize("approximate", MODES)
def test_results_are_exactly_0_or_1_past_the_tails(approximate):
    """Past ERF_TAIL / TANH_TAIL (where the kernel sets the term to 0 before its last
    multiply), the float64 GELU' does round to 0 (x < 0) or 1 (x > 0) in float32."""
    negative, positive = gelu_rows.TANH_TAIL if approximate == "tanh" else gelu_rows.ERF_TAIL
    for limit, sign, value in ((negative, -1, 0.0), (positive, 1, 1.0)):
        x = sign * np.linspace(float(limit), 1e4, 100_001)
        assert (R.gelu_derivative(x, approximate).astype(np.float32) == value).all()
        assert (_derivative(x, approximate) == value).all()


def test_tanh_form_within_24_ulp_for_x_within_4():
    """The tanh form for |x| < 4, densely, and every float32 within 3000 ULP of its root
    (the root polynomial): within 24 ULP (19.0 measured; 2.3 around the root). Further out
    the rounding error of 2u reaches the exp and the bar's absolute term holds instead."""
    root = -float(gelu_rows._TANH_ROOT_HI)
    x = np.concatenate([np.linspace(-4.0, 4.0, 2_000_001, dtype=np.float32),
                        np.float32(root) + np.arange(-3000, 3000, dtype=np.float32) * 6e-8])
    exact = R.gelu_derivative(x, "tanh")
    assert _ulp_error(_derivative(x, "tanh"), exact).max() <= 24.0


@pytest.mark.parametrize("approximate", MODES)
def test_limits(approximate):
    """GELU'(+-0) is exactly 1/2; huge finite inputs give exactly 1 or 0 (no overflow in
    x**2 or x**3); +-inf and NaN give NaN, as the formula does in PyTorch."""
    x = np.float32([0.0, -0.0, 3e38, 1e30, 40.0, -40.0, -1e30, -3e38, np.inf, -np.inf, np.nan])
    got = _derivative(x, approximate)
    assert got[:8].tolist() == [0.5, 0.5, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert np.isnan(got[8:]).all()


def test_coefficients_are_the_fit_tool_s():
    """tools/fit_gelu.py reproduces every coefficient set of gelu_rows (as float32), its
    root and t's scale, and reports the fit errors the module quotes."""
    fit_tool = load_script(Path(__file__).resolve().parents[1] / "tools" / "fit_gelu.py")
    quoted = {"_EXP_C": 9.2e-8, "_GELU_V": 0.088}  # V: the fraction of the bar it uses
    for name, (coeffs, error) in fit_tool.fits().items():
        assert coeffs.astype(np.float32).tolist() == list(getattr(gelu_rows, name)), name
        assert error <= quoted[name] * 1.05, name
    assert abs(float(fit_tool.gelu_root()) - gelu_rows._ROOT) < 1e-24
    assert np.float32(fit_tool.T_SCALE) == gelu_rows._T_SCALE


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c in float32 with one rounding."""
    def codegen(context, builder, signature, args):
        float32 = ir.FloatType()
        fma = builder.module.declare_intrinsic("llvm.fma", [float32],
                                               ir.FunctionType(float32, [float32] * 3))
        return builder.call(fma, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


f = np.float32


@njit
def _horner(t, coefficients):
    p = coefficients[-1]
    for i in range(len(coefficients) - 2, -1, -1):
        p = _fma(p, t, coefficients[i])
    return p


@njit
def _estrin(t, coefficients):
    """Estrin's scheme for degree 5: pairs c_i + c_(i+1) t, then with t**2, then t**4."""
    p01 = _fma(coefficients[1], t, coefficients[0])
    p23 = _fma(coefficients[3], t, coefficients[2])
    p45 = _fma(coefficients[5], t, coefficients[4])
    t2 = t * t
    return _fma(p45, t2 * t2, _fma(p23, t2, p01))


@njit
def _scalar_scaled_exp(z, short_chain=False):
    """The documented exp of -z/2, one value at a time: k = round(-z/(2 ln2)),
    s = z + 2k ln2, e**(-s/2) by the polynomial in s (Horner's rule, or Estrin's scheme
    with `short_chain`), 2**(k + SCALE) into its exponent."""
    t = _fma(z, gelu_rows._MINUS_HALF_LOG2E, gelu_rows._ROUNDER)
    k = t - gelu_rows._ROUNDER
    s = _fma(k, gelu_rows._TWO_LN2, z)
    p = _estrin(s, gelu_rows._EXP_HALF) if short_chain else _horner(s, gelu_rows._EXP_HALF)
    return np.ldexp(p, np.int64(k) + gelu_rows.SCALE)


@njit
def _unscaled(keep, scaled):
    return scaled * (f(2.0 ** -gelu_rows.SCALE) if keep else f(0.0))


@njit
def _scalar_derivatives(x, use_tanh, tail):
    """GELU' of each element by the module docstring's operations, in the same order."""
    out = np.empty(x.size, np.float32)
    for i in range(x.size):
        a = abs(x[i])
        negative = x[i] < 0
        if use_tanh:
            keep = a < (tail if negative else gelu_rows.TANH_TAIL[1])
            ac = gelu_rows.TANH_CLAMP if a > gelu_rows.TANH_CLAMP else a
            square = ac * ac
            e = _scalar_scaled_exp(ac * _fma(square, gelu_rows._FOUR_U[1], gelu_rows._FOUR_U[0]),
                                   True)
            big = f(1.0) / (f(1.0) + _unscaled(e >= f(2.0 ** (gelu_rows.SCALE - 30)), e))
            small = e * big
            w = (a * (small * big)) * _fma(square, gelu_rows._W[1], gelu_rows._W[0])
            term = _unscaled(keep, small - w if negative else w)
            near = (gelu_rows._TANH_ROOT_HI - a) + gelu_rows._TANH_ROOT_LO
            if negative and abs(near) < gelu_rows.ROOT_BAND:
                out[i] = near * _horner(near, gelu_rows._TANH_BAND)
            else:
                out[i] = term if negative else big + term
        else:
            e = f(0.0)
            if a < tail:
                e = _scalar_scaled_exp(a * a)
            t = f(1.0) / _fma(a, gelu_rows._T_SCALE, f(1.0))
            negative = math.copysign(1.0, x[i]) < 0  # q = p e, or 1 - q by one rounding
            s = f(1.0) if negative else f(-1.0)
            distance = (x[i] + s * gelu_rows._ROOT_HI) + s * gelu_rows._ROOT_LO  # s (a_r - a)
            out[i] = _fma(distance * _horner(t, gelu_rows._GELU_V_SCALED), e,
                          f(0.0) if negative else f(1.0))
    return out


@njit
def _erf_vectors(x, g, o, vectors):
    gelu_rows._vectors(x, 0, g, 0, o, 0, vectors, False, gelu_rows.ERF_NORMAL, None)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions counted are x86's")
def test_erf_form_takes_signs_by_logic_operations():
    """Per vector (one division each), the compiled erf form has 17 multiplies and FMAs,
    three adds (k, and the two parts of s (a_r - a)) and no blend: the tail test and the
    signs by x's bits, not by adds or selects, which take time from the FMA units."""
    buffer = np.zeros(4 * 3 * LANES, np.uint8)
    _erf_vectors(buffer, buffer, buffer, 3)
    asm = _erf_vectors.inspect_asm(_erf_vectors.signatures[0])

    def count(pattern):
        return len(re.findall(rf"\t(?:{pattern})\t", asm))
    vectors = count("vdivps")
    assert vectors >= 3
    assert count(r"vf\w*madd\w*ps|vf\w*msub\w*ps|vmulps") == 17 * vectors
    assert count("vaddps|vsubps") == 3 * vectors
    assert count(r"vblend\w*ps|vpblend\w*") == 0


def _float32_inputs(n=200_003):
    """x over [-20, 20] shuffled, with the special values; g normal."""
    rng = np.random.default_rng(5)
    x = np.concatenate([np.linspace(-20, 20, n, dtype=np.float32),
                        np.float32([np.nan, np.inf, -np.inf, 0, -0.0, 13.22, -13.22, 3e38])])
    return rng.standard_normal(x.size).astype(np.float32), rng.permutation(x)


@pytest.mark.parametrize("code", [pointwise.F32, pointwise.BF16], ids=["float32", "16-bit"])
@pytest.mark.parametrize("approximate", MODES)
def test_vector_code_is_the_documented_formula(approximate, code):
    """The kernel's GELU' is the scalar emulation's, bit for bit (NaN for NaN and +-inf),
    for lengths with a partial last vector, an odd count of whole ones, and below one,
    for float32 and 16-bit results (the erf form's tail)."""
    _, x = _float32_inputs()
    use_tanh = approximate == "tanh"
    scalar = _scalar_derivatives(x, use_tanh, gelu_rows.negative_tail(code, use_tanh))
    for n in (x.size, 4096 * 3 + 5, 53, 17, 5, 0):  # 53: a pair of vectors, one more, a rest
        assert _same_bits(_derivative(x[:n], approximate, code), scalar[:n])
    assert np.isnan(scalar[~np.isfinite(x)]).all()


@pytest.mark.parametrize("approximate", MODES)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16bit_results_are_the_float32_derivative_rounded_once(dtype, approximate):
    """Every 16-bit x (inf and NaN included) with each gradient of GRADIENTS, through the
    operator, contiguous (the table) and strided (the tiled kernel): the result is
    dtype(float32(g) * GELU'(x)), GELU' the float32 kernel's."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype).reshape(256, 256)
    derivative = _derivative(x.astype(np.float32).ravel(), approximate).reshape(x.shape)
    strided_x = R.strided_device(x, R.layout_strides(x.shape, gap=3))
    for g_value in GRADIENTS:
        with np.errstate(invalid="ignore", over="ignore"):  # 3e38 is inf in float16
            g = np.full(x.shape, g_value, dtype)
            expected = (g.astype(np.float32) * derivative).astype(dtype)
        assert _same_bits(R.compute("gelu", [g, x], [approximate]), expected), g_value
        assert _same_bits(R.compute("gelu", [g, strided_x], [approximate]), expected), g_value


@pytest.mark.parametrize("approximate", MODES)
def test_float16_subnormal_derivatives_keep_every_gradient_s_bits(approximate):
    """The float16 x whose GELU' is subnormal (the table holds +-FLOAT16_TINY_DERIVATIVE
    for them), each with every float16 g (all 65536 patterns: subnormals, +-0, inf, NaN),
    through the operator: float16(float32(g) * GELU'(x)) with the subnormal GELU' itself."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    derivative = _derivative(every.astype(np.float32), approximate)
    subnormal = (derivative != 0) & (np.abs(derivative) < FLOAT32_TINY)
    assert subnormal.sum() >= 50
    x = np.repeat(every[subnormal], every.size)
    g = np.tile(every, subnormal.sum())
    with np.errstate(invalid="ignore"):
        expected = (g.astype(np.float32) * np.repeat(derivative[subnormal], every.size)
                    ).astype(np.float16)
    assert _same_bits(R.compute("gelu", [g, x], [approximate]), expected)
    table = pointwise._derivative_table(pointwise.F16, approximate == "tanh").table
    assert np.array_equal(table[subnormal], np.copysign(lookup.FLOAT16_TINY_FACTOR,
                                                        derivative[subnormal]))


@pytest.mark.parametrize("approximate", MODES)
def test_library_float16_table_stands_in_for_its_subnormals(approximate):
    """The library contract's float16 factor table: where the 950 factor is subnormal it
    holds +-FLOAT16_TINY_FACTOR, and the lookup gives float16(float32(g) * factor) with the
    subnormal factor itself for every float16 g; elsewhere the factors are the 950 ones
    (the 950 tanh DAG's factors have no subnormal)."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    raw = dag950._factor_table(lookup.all_values(np.dtype(np.uint16)), approximate == "tanh")
    table = dag950.factor_table(np.dtype(np.uint16), approximate == "tanh").table
    subnormal = (raw != 0) & (np.abs(raw) < FLOAT32_TINY)
    assert subnormal.sum() >= (100 if approximate == "none" else 0)
    assert np.array_equal(table[~subnormal].view(np.uint32), raw[~subnormal].view(np.uint32))
    x = np.repeat(every[subnormal], every.size)
    g = np.tile(every, subnormal.sum())
    out = np.empty_like(x)
    lookup.scaled_lookup(g, x, out, table)
    with np.errstate(invalid="ignore"):
        expected = (g.view(np.float16).astype(np.float32) * raw[x]).astype(np.float16)
    assert _same_bits(out.view(np.float16), expected)


@pytest.mark.parametrize("approximate", MODES)
def test_bfloat16_tables_nans_have_a_zero_low_half(approximate):
    """The bfloat16 factor tables (ours and the library contract's): every NaN has a zero
    low half, which the lookup's packing of bfloat16 lanes (`lanes.row_narrower`) needs to
    keep it a NaN; and the NaN x give NaN for g = 1."""
    use_tanh = approximate == "tanh"
    view = np.dtype(np.int16)
    for factors in (pointwise._derivative_table(pointwise.BF16, use_tanh),
                    dag950.factor_table(view, use_tanh)):
        nan = np.isnan(factors.table)
        assert nan.sum() >= 254
        assert not np.any(factors.table[nan].view(np.uint32) & 0xFFFF)
        x = lookup.all_values(view)[nan]
        out = np.empty_like(x)
        lookup.scaled_lookup(np.ones_like(x, ml_dtypes.bfloat16).view(view), x, out, *factors)
        assert np.isnan(out.view(ml_dtypes.bfloat16).astype(np.float32)).all()


@pytest.mark.parametrize("approximate, bound", [("none", 4.0), ("tanh", 8.0)])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_every_16bit_input_meets_the_bar(dtype, approximate, bound):
    """Every finite float16/bfloat16 x: GELU' within `bound` float32 ULP + 2**-22 of the
    float64 value; GELU'(+-0) is exactly 1/2."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype).astype(np.float32)
    x = x[np.isfinite(x)]
    exact = R.gelu_derivative(x, approximate)
    error = np.abs(_derivative(x, approximate).astype(np.float64) - exact)
    assert (error <= bound * np.spacing(np.abs(exact).astype(np.float32)) + 2.0**-22).all()
    assert _derivative([0.0, -0.0], approximate).tolist() == [0.5, 0.5]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("approximate", MODES)
def test_strided_and_contiguous_give_the_same_bits(dtype, approximate):
    """aclnnGeluBackwardV2 on a contiguous x and on the same values seen through a strided
    view (the tiled kernel): identical results, partial vectors and specials included."""
    g, x = _float32_inputs(40_032)  # 40 rows of 1001 with the special values
    with np.errstate(over="ignore"):  # 3e38 is inf in float16
        g, x = g.astype(dtype).reshape(-1, 1001), x.astype(dtype).reshape(-1, 1001)
    contiguous = R.compute("gelu", [g, x], [approximate])
    strided = R.compute("gelu", [g, R.strided_device(x, R.layout_strides(x.shape, gap=3))],
                        [approximate])
    assert _same_bits(contiguous, strided)


@pytest.mark.parametrize("approximate", MODES)
@pytest.mark.parametrize("size", [3 * 4096 + 21, 4096 + LANES * (gelu_rows.SPAN_VECTORS + 6) + 5,
                                  LANES * gelu_rows.SPAN_VECTORS])
def test_streaming_stores_give_the_same_bits(approximate, size):
    """Non-temporal stores (large outputs, streamed out of the pad's span) write what plain
    ones do: whole spans, a span cut short, a row of one span, the padded tail."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(size) * 8).astype(np.float32)
    x[::97] = np.nan
    g = rng.standard_normal(x.size).astype(np.float32)
    assert _same_bits(_run(g, x, approximate, streaming=True), _run(g, x, approximate))


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, gelu_rows.BLOCK])
@pytest.mark.parametrize("approximate", MODES)
def test_one_block_kernel_gives_the_contiguous_kernels_bits(approximate, n):
    """The kernel of calls of up to one block (on the calling thread, no parallel launch)
    computes the contiguous kernel's rows: the same bits, specials and both tails included."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(n) * 6).astype(np.float32)
    x[:8] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -14.0, 20.0, -1e-40])[:n]
    g = rng.standard_normal(n).astype(np.float32)
    for code in (pointwise.F32, pointwise.BF16):
        tail = gelu_rows.negative_tail(code, approximate == "tanh")
        out = np.zeros(n, np.float32)
        gelu_rows.gelu_block(g, x, out, approximate == "tanh", tail)
        assert _same_bits(out, _run(g, x, approximate, code=code)), code


_PREFETCHES = """
import re, numpy as np
from aclnn.kernels import gelu_rows
kernel = gelu_rows.gelu_flat  # compiled here: NUMBA_CACHE_DIR is empty
raw = np.zeros(4096, np.uint8)
out = raw[-raw.ctypes.data % 64:][:1024].view(np.float32)  # streamed: on a line
a = np.zeros(256, np.float32)
kernel(a, a, out, False, gelu_rows.negative_tail(gelu_rows.F32, False), True)
print(len(re.findall(r"\\tprefetcht0\\s", kernel.inspect_asm(kernel.signatures[0]))))
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
@pytest.mark.parametrize("level", ["native", "avx2"])
def test_contiguous_rows_prefetch_x_and_g(level, tmp_path):
    """The contiguous kernel's rows prefetch x and g (`lanes.PREFETCH_BYTES` ahead: a
    line of each per vector of a step, in each form and each loop of a row), natively and
    built for AVX2."""
    env = {**os.environ, **(isa.ENVIRONMENTS["avx2"] if level == "avx2" else {}),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _PREFETCHES], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) >= 2 * 2 * 2  # two forms, x and g, two lines


_STREAMED_LOOPS = """
import re, numpy as np
from aclnn.kernels import gelu_rows
kernel = gelu_rows.gelu_flat  # compiled here: NUMBA_CACHE_DIR is empty
raw = np.zeros(1 << 16, np.uint8)
out = raw[-raw.ctypes.data % 64:][:8192].view(np.float32)  # streamed: on a line
a = np.zeros(8192, np.float32)
kernel(a, a, out, False, gelu_rows.negative_tail(gelu_rows.F32, False), True)
print(int(gelu_rows.ERF_LOOP_STREAMS))
lines = kernel.inspect_asm(kernel.signatures[0]).splitlines()
for end, line in enumerate(lines):  # loops of one block: a jump back to their own label
    jump = re.match(r"\\s+j\\w+\\s+(\\.LBB\\w+)$", line)
    start = max((k for k in range(end) if re.match(r"\\.LBB\\w+:", lines[k])), default=None)
    if jump and start is not None and lines[start] == jump.group(1) + ":":
        body = "\\n".join(lines[start:end])
        if "vmovntps" in body and "vdivps" in body:
            print(len(re.findall(r"%[xyz]mm\\d+, -?\\d*\\(%rsp\\)", body)))
rng = np.random.default_rng(5)
for size in (3 * 4096 + 21, 4096 + 16 * 22 + 5, 16 * 16):  # whole, cut short, one span
    raw = np.zeros(4 * size + 128, np.uint8)
    streamed = raw[-raw.ctypes.data % 64:][:4 * size].view(np.float32)
    x = (rng.standard_normal(size) * 8).astype(np.float32)
    x[::97] = np.nan
    g = rng.standard_normal(size).astype(np.float32)
    for tanh in (False, True):
        plain = np.zeros(size, np.float32)
        tail = gelu_rows.negative_tail(gelu_rows.F32, tanh)
        kernel(g, x, plain, tanh, tail, False)
        kernel(g, x, streamed, tanh, tail, True)
        if not np.array_equal(plain.view(np.uint32), streamed.view(np.uint32)):
            raise SystemExit(f"streamed bits differ: size {size}, tanh {tanh}")
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
@pytest.mark.parametrize("level", ["native", "avx2"])
def test_streamed_rows_of_each_level(level, tmp_path):
    """Built for AVX2, the erf form's streamed rows store non-temporally from a vector
    loop that stores nothing to the stack (with spills, streaming from the loop once ran
    4.5x slower: see `gelu_rows.gelu_row`); built for AVX-512 they go through the pad's
    span (no such loop). Either way, both forms' streamed rows write the bits plain stores
    do (rows of whole spans, a span cut short, one span; NaNs in x; NaN payloads too)."""
    env = {**os.environ, **(isa.ENVIRONMENTS["avx2"] if level == "avx2" else {}),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _STREAMED_LOOPS], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    from_loop, *spills = (int(count) for count in done.stdout.split())
    assert from_loop or level != "avx2"
    assert (bool(spills) and not any(spills)) if from_loop else not spills, done.stdout
