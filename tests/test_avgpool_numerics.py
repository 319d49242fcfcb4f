"""Numerics of aclnnAvgPool2dBackward by example (SPEC §8 math, §10 bars).

Golden: `avgpool_reference.avg_pool2d_backward_ref`, a naive float64 loop written for these
tests. float32 outputs must be within 4 ULP + 2**-23 * sum|terms| of it; float16 / bfloat16
within 1 ULP of their dtype. The cubeMathType tests use the rounding model of SPEC §8
(terms rounded to float16 or HF32 before the float32 accumulation) and pick gradients
whose quotients are not representable in float16 / HF32, so every mode is told apart.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import aclnn
from avgpool_reference import (
    ALL_SOCS,
    BF16,
    F16,
    F32,
    FP16_DOWN_SOCS,
    HF32_DOWN_SOCS,
    LAYOUTS,
    assert_avgpool_close,
    avg_pool2d_backward_ref,
    bits,
    layout,
    layout_device,
    pooled_shape,
    round_fp16,
    round_hf32,
    run_avgpool,
    term_mode,
    view_positions,
)

NCHW, NCL = aclnn.ACL_FORMAT_NCHW, aclnn.ACL_FORMAT_NCL


def random_grad(shape, dtype, seed, lo=-2.0, hi=2.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(dtype)


def run(grad_output, self_shape, kernel, stride, padding, ceil_mode, count_include_pad,
        divisor_override, cube_math_type, *, go_kind="contiguous", gi_kind="contiguous",
        fmt=None, gi_fill=-777.0, self_dtype=None):
    """Run the operator; returns (gradInput view, gradInput DeviceTensor, freed-later list).

    Checks status 0, every guard, and that gradInput's storage outside the view kept its
    bytes. The caller must not use the returned DeviceTensor after `release(...)`.
    """
    grad_output = np.asarray(grad_output)
    dtype = grad_output.dtype if self_dtype is None else np.dtype(self_dtype)
    if fmt is None:
        fmt = NCL if len(self_shape) == 3 else NCHW
    go = layout_device(grad_output, go_kind, fmt)
    rng = np.random.default_rng(123)
    self_values = rng.uniform(-1, 1, self_shape).astype(np.float32).astype(dtype)
    x = layout_device(self_values, "contiguous", fmt)
    gi = layout_device(np.full(self_shape, 9.0, dtype=grad_output.dtype), gi_kind, fmt,
                       fill=gi_fill)
    before = gi.storage()
    try:
        status = run_avgpool(go, x, gi, kernel, stride, padding, ceil_mode, count_include_pad,
                             divisor_override, cube_math_type)
        assert status == 0, f"status {status}: {aclnn.aclGetRecentErrMsg()}"
        for t in (go, x, gi):
            t.check_guards()
        after = gi.storage()
        strides, offset, size = layout(self_shape, gi_kind)
        outside = np.ones(size, dtype=bool)
        outside[view_positions(self_shape, strides, offset).reshape(-1)] = False
        assert np.array_equal(bits(after[outside]), bits(before[outside])), (
            "gradInput storage outside the view changed")
        assert np.array_equal(bits(go.view()), bits(grad_output)), "gradOutput was modified"
        return gi.view()
    finally:
        for t in (go, x, gi):
            t.free()


def check(grad_output, self_shape, kernel, stride, padding, ceil_mode, count_include_pad,
          divisor_override, cube_math_type=0, soc="Ascend910B", **kw) -> np.ndarray:
    """Run and compare with the reference (term rounding per cubeMathType and SoC)."""
    out = run(grad_output, self_shape, kernel, stride, padding, ceil_mode, count_include_pad,
              divisor_override, cube_math_type, **kw)
    mode = term_mode(np.asarray(grad_output).dtype, cube_math_type, soc)
    golden, sum_abs = avg_pool2d_backward_ref(grad_output, self_shape, kernel, stride, padding,
                                              ceil_mode, count_include_pad, divisor_override,
                                              mode)
    assert_avgpool_close(out, golden, sum_abs, np.asarray(grad_output).dtype,
                         what=f"mode={mode} k={kernel} s={stride} p={padding} "
                              f"ceil={ceil_mode} count={count_include_pad} "
                              f"div={divisor_override}")
    return out


# ============================================================================ seed sample


def test_seed_sample():
    """The seed page's sample: gradOutput (1,16,1,1) ones, self (1,16,4,4), k4 s1 p0."""
    g = np.ones((1, 16, 1, 1), np.float32)
    out = run(g, (1, 16, 4, 4), (4, 4), (1, 1), (0, 0), False, True, 0, 1)
    assert out.dtype == np.float32
    assert np.array_equal(out, np.full((1, 16, 4, 4), 0.0625, np.float32))


# ============================================================================ flags


@pytest.mark.parametrize("divisor_override", [0, 3, -2])
@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_flag_combinations(ceil_mode, count_include_pad, divisor_override):
    """self (2,3,8,7), k (3,2), s (2,2), p (1,1).

    H: (8+2-3)/2 -> floor 3+1 = 4, ceil 4+1 = 5. W: (7+2-2)/2 -> 4 or 5, but with ceil
    (5-1)*2 = 8 >= 7+1 drops the last window, giving 4.
    """
    self_shape = (2, 3, 8, 7)
    go_shape = pooled_shape(self_shape, (3, 2), (2, 2), (1, 1), ceil_mode)
    assert go_shape == ((2, 3, 5, 4) if ceil_mode else (2, 3, 4, 4))
    g = random_grad(go_shape, F32, seed=7)
    out = check(g, self_shape, (3, 2), (2, 2), (1, 1), ceil_mode, count_include_pad,
                divisor_override)
    if divisor_override == 0 and not count_include_pad:
        # Corner cell (0, 0) is in exactly one window: clipped to 2x1 cells.
        np.testing.assert_allclose(out[:, :, 0, 0], g[:, :, 0, 0] / 2, rtol=2**-22)
    if divisor_override == 0 and count_include_pad:
        np.testing.assert_allclose(out[:, :, 0, 0], g[:, :, 0, 0] / 6, rtol=2**-22)
    if divisor_override == -2:
        np.testing.assert_allclose(out[:, :, 0, 0], g[:, :, 0, 0] / -2, rtol=2**-22)


def test_count_include_pad_with_ceil_window_beyond_padding():
    """A ceil-mode window reaching past in + p: pool counts only up to in + p.

    in=6, k=3, s=3, p=1, ceil: out = ceil(5/3)+1 = 3 ((3-1)*3 = 6 < 7 keeps it). Window 2
    starts at 5 and ends at min(8, 7) = 7: pool extent 2 per axis (not 3); clipped to the
    single row / column 5, which no other window covers.
    """
    assert pooled_shape((1, 1, 6, 6), (3, 3), (3, 3), (1, 1), True) == (1, 1, 3, 3)
    g = np.full((1, 1, 3, 3), 12.0, np.float32)
    out = check(g, (1, 1, 6, 6), (3, 3), (3, 3), (1, 1), True, True, 0)
    assert out[0, 0, 5, 5] == np.float32(3.0)  # 12 / (2 * 2), not 12 / 9
    out = check(g, (1, 1, 6, 6), (3, 3), (3, 3), (1, 1), True, False, 0)
    assert out[0, 0, 5, 5] == np.float32(12.0)  # clipped window of one cell


# ============================================================================ 3-D


@pytest.mark.parametrize("fmt", [NCL, NCHW])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_3d_input(fmt, dtype):
    self_shape = (3, 7, 5)
    go_shape = pooled_shape(self_shape, (3,), (2,), (1,), True)
    g = random_grad(go_shape, dtype, seed=11)
    check(g, self_shape, (3,), (2,), (1,), True, False, 0, fmt=fmt)


def test_3d_equals_4d_with_batch_one():
    self_shape = (2, 9, 6)
    go_shape = pooled_shape(self_shape, (2, 3), (1, 2), (1, 1), False)
    g = random_grad(go_shape, F32, seed=12)
    out3 = run(g, self_shape, (2, 3), (1, 2), (1, 1), False, True, 5, 0)
    out4 = run(g[None], (1, *self_shape), (2, 3), (1, 2), (1, 1), False, True, 5, 0)
    assert np.array_equal(bits(out3), bits(out4[0]))


# ============================================================================ 16-bit dtypes


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("ceil_mode, count_include_pad, divisor_override",
                         [(False, True, 0), (True, False, 0), (True, True, 7), (False, False, -3)])
def test_half_dtypes(dtype, ceil_mode, count_include_pad, divisor_override):
    self_shape = (2, 2, 9, 10)
    kernel, stride, padding = (3, 4), (2, 3), (1, 2)
    go_shape = pooled_shape(self_shape, kernel, stride, padding, ceil_mode)
    g = random_grad(go_shape, dtype, seed=13)
    out = check(g, self_shape, kernel, stride, padding, ceil_mode, count_include_pad,
                divisor_override)
    assert out.dtype == dtype


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_half_dtypes_ignore_cube_math_type(dtype):
    """cubeMathType only changes FLOAT numerics; 16-bit inputs compute in float32 always."""
    self_shape = (1, 3, 7, 7)
    g = random_grad(pooled_shape(self_shape, (3, 3), (1, 1), (1, 1), False), dtype, seed=14)
    outs = [run(g, self_shape, (3, 3), (1, 1), (1, 1), False, True, 3, cube)
            for cube in (0, 1, 2, 3)]
    for out in outs[1:]:
        assert np.array_equal(bits(out), bits(outs[0]))
    check(g, self_shape, (3, 3), (1, 1), (1, 1), False, True, 3, 2)


def test_float16_result_rounded_once_from_float32():
    """float16 terms are accumulated in float32 and rounded once (SPEC §8).

    With divisorOverride 1 cell (1, 1) of a 3x3 input (k2 s1) receives the plain sum of the
    four gradients 1 + 2**-11 + 2**-11 + 0 = 1 + 2**-10 (a float16 value), whereas rounding
    the partial sums to float16 would give 1 (two ties to even).
    """
    g = np.zeros((1, 1, 2, 2), np.float16)
    g[0, 0, 0, 0] = 1.0
    g[0, 0, 0, 1] = 2.0**-11
    g[0, 0, 1, 0] = 2.0**-11
    # self 3x3, k2 s1: cell (1,1) receives all four gradients.
    out = run(g, (1, 1, 3, 3), (2, 2), (1, 1), (0, 0), False, True, 1, 0)
    assert out[0, 0, 1, 1] == np.float16(1.0 + 2.0**-10)


@pytest.mark.parametrize("soc", ["Ascend910_93", "Ascend950"])
def test_bf16_on_other_socs(use_soc, soc):
    use_soc(soc)
    self_shape = (1, 2, 6, 6)
    g = random_grad(pooled_shape(self_shape, (2, 2), (1, 1), (1, 1), True), BF16, seed=15)
    check(g, self_shape, (2, 2), (1, 1), (1, 1), True, False, 0, soc=soc)


# ============================================================================ layouts


@pytest.mark.parametrize("go_kind", LAYOUTS)
@pytest.mark.parametrize("gi_kind", LAYOUTS)
def test_layouts_4d(go_kind, gi_kind):
    self_shape = (2, 3, 7, 6)
    kernel, stride, padding = (3, 2), (2, 1), (1, 1)
    go_shape = pooled_shape(self_shape, kernel, stride, padding, False)
    g = random_grad(go_shape, F32, seed=16)
    check(g, self_shape, kernel, stride, padding, False, True, 0, go_kind=go_kind,
          gi_kind=gi_kind)


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_layouts_half(kind, dtype):
    self_shape = (1, 4, 5, 6)
    go_shape = pooled_shape(self_shape, (2, 2), (1, 2), (1, 0), True)
    g = random_grad(go_shape, dtype, seed=17)
    check(g, self_shape, (2, 2), (1, 2), (1, 0), True, False, 0, go_kind=kind, gi_kind=kind)


@pytest.mark.parametrize("fmt", [NCL, NCHW])
@pytest.mark.parametrize("kind", LAYOUTS)
def test_layouts_3d(fmt, kind):
    self_shape = (3, 6, 5)
    go_shape = pooled_shape(self_shape, (2, 3), (), (0, 1), False)
    g = random_grad(go_shape, F32, seed=18)
    check(g, self_shape, (2, 3), (), (0, 1), False, True, 0, go_kind=kind, gi_kind=kind,
          fmt=fmt)


def test_channels_last_strides_are_what_the_test_says():
    """The channels-last view: NCHW shape, strides (H*W*C, 1, W*C, C)."""
    strides, offset, size = layout((2, 3, 4, 5), "channels_last")
    assert strides == [60, 1, 15, 3] and offset == 0 and size == 120


@pytest.mark.parametrize("fill_bits", [0x7FA12345, 0xFFFFFFFF, 0x00000001, 0x80000000])
def test_offset_view_keeps_untouched_bytes(fill_bits):
    """gradInput viewed at an offset / with gaps: the elements around it keep their bits
    (a NaN payload, a subnormal and -0.0 included)."""
    fill = np.array([fill_bits], np.uint32).view(np.float32)[0]
    self_shape = (1, 2, 5, 4)
    g = random_grad(pooled_shape(self_shape, (2, 2), (1, 1), (1, 1), False), F32, seed=19)
    for kind in ("offset", "gapped"):
        check(g, self_shape, (2, 2), (1, 1), (1, 1), False, True, 0, gi_kind=kind,
              gi_fill=fill)


def test_overwrites_not_accumulates():
    """gradInput's previous contents (9.0 in `run`) do not leak into the result."""
    g = np.ones((1, 1, 2, 2), np.float32)
    out = run(g, (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, 0, 0)
    assert np.array_equal(out, np.full((1, 1, 4, 4), 0.25, np.float32))


def test_cells_outside_every_window_are_zero():
    """in=7, k=2, s=3: rows/cols 2 and 5 belong to no window and get exactly 0."""
    g = random_grad((1, 2, 2, 2), F32, seed=20)
    out = check(g, (1, 2, 7, 7), (2, 2), (3, 3), (0, 0), False, True, 0)
    for i in (2, 5, 6):
        assert np.all(out[:, :, i, :] == 0) and np.all(out[:, :, :, i] == 0)


# ============================================================================ cubeMathType


def _allowed_cubes(soc: str) -> tuple[int, ...]:
    return (1, 2) if soc in FP16_DOWN_SOCS else (0, 1, 2, 3)


# Gradients whose quotients by 3 are neither float16 nor HF32 values, and whose float16 and
# HF32 roundings differ from each other (checked in the test).
_G_ODD = np.array([1.0, 2.0, 5.0, 7.0, 10.0, -11.0, 13.0, -0.1, 0.7, 1.7, -2.9, 3.14159],
                  np.float32)


def _disjoint_case():
    """k = s = 2, divisorOverride 3: every input cell receives exactly one term."""
    g = np.resize(_G_ODD, 1 * 2 * 2 * 3).reshape(1, 2, 2, 3).astype(np.float32)
    expected_q = np.repeat(np.repeat(g / np.float32(3), 2, axis=2), 2, axis=3)
    return g, (1, 2, 4, 6), expected_q


def test_rounding_models_are_distinguishable():
    q = _G_ODD / np.float32(3)
    fp16 = round_fp16(q).astype(np.float32)
    hf32 = round_hf32(q)
    assert np.all(fp16 != q) and np.all(hf32 != q) and np.all(fp16 != hf32)


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_cube_math_type_single_term_bit_exact(use_soc, soc):
    """One term per cell: the output is exactly the model's rounded quotient."""
    use_soc(soc)
    g, self_shape, q = _disjoint_case()
    exact = q.astype(np.float32)
    fp16 = round_fp16(q).astype(np.float32)
    hf32 = round_hf32(q)
    outs = {}
    for cube in _allowed_cubes(soc):
        out = run(g, self_shape, (2, 2), (2, 2), (0, 0), False, True, 3, cube)
        outs[cube] = out
        want = {"exact": exact, "fp16": fp16, "hf32": hf32}[term_mode(F32, cube, soc)]
        assert np.array_equal(bits(out), bits(want)), (
            f"{soc} cubeMathType={cube}: got {out.reshape(-1)[:6]}, want {want.reshape(-1)[:6]}")
        if cube != 0:
            assert not np.array_equal(out, exact), "down-precision mode gave the exact result"
    # ALLOW_FP32_DOWN_PRECISION picks float16 on 910/310P and HF32 on the others.
    if soc in FP16_DOWN_SOCS:
        assert np.array_equal(bits(outs[1]), bits(fp16))
        assert np.array_equal(bits(outs[1]), bits(outs[2]))
    else:
        assert soc in HF32_DOWN_SOCS
        assert np.array_equal(bits(outs[1]), bits(hf32))
        assert np.array_equal(bits(outs[1]), bits(outs[3]))
        assert np.array_equal(bits(outs[0]), bits(exact))


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_cube_math_type_overlapping_windows(use_soc, soc):
    """Overlapping windows (k3 s1 p1, count): each mode within the bar of its own model, and
    the down-precision modes measurably away from the exact result."""
    use_soc(soc)
    self_shape = (2, 3, 8, 9)
    go_shape = pooled_shape(self_shape, (3, 3), (1, 1), (1, 1), False)
    g = random_grad(go_shape, F32, seed=21, lo=0.5, hi=4.0)
    exact, exact_abs = avg_pool2d_backward_ref(g, self_shape, (3, 3), (1, 1), (1, 1), False,
                                               True, 0, "exact")
    for cube in _allowed_cubes(soc):
        out = check(g, self_shape, (3, 3), (1, 1), (1, 1), False, True, 0, cube, soc=soc)
        mode = term_mode(F32, cube, soc)
        err = np.abs(out.astype(np.float64) - exact)
        exact_bar = 4 * np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64) + (
            2.0**-23 * exact_abs)
        if mode == "exact":
            assert np.all(err <= exact_bar)
        else:
            # Term rounding to 11 / 12 significant bits is far beyond the float32 bar.
            assert np.mean(err > exact_bar) > 0.5, f"{soc} cube {cube}: looks exact"


@pytest.mark.parametrize("soc", FP16_DOWN_SOCS)
def test_old_socs_float16_keep_dtype_is_exact(use_soc, soc):
    use_soc(soc)
    self_shape = (1, 2, 6, 6)
    g = random_grad(pooled_shape(self_shape, (3, 3), (1, 1), (1, 1), False), F16, seed=22)
    check(g, self_shape, (3, 3), (1, 1), (1, 1), False, True, 0, 0, soc=soc)


def test_fp16_term_rounding_is_of_the_float32_quotient():
    """The quotient is a true float32 division, then rounded to float16 (USE_FP16).

    g = 1, divisorOverride 3: q32 = 0x3EAAAAAB, float16(q32) = 0.333251953125.
    """
    g = np.ones((1, 1, 1, 1), np.float32)
    out = run(g, (1, 1, 2, 2), (2, 2), (2, 2), (0, 0), False, True, 3, 2)
    assert np.all(out == np.float32(0.333251953125))
    out = run(g, (1, 1, 2, 2), (2, 2), (2, 2), (0, 0), False, True, 3, 3)
    assert np.all(out == np.float32(0.333374023437500))


def test_fp16_term_rounding_of_tiny_and_large_quotients():
    """USE_FP16 with quotients outside float16's normal range follows the float16 model:
    tiny quotients become float16 subnormals (or zero); large ones keep 11 bits."""
    g = np.array([1e-6, 3e-8, -1e-9, 6.5e4], np.float32).reshape(1, 1, 2, 2)
    out = run(g, (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, 1, 2)
    want = round_fp16(g).astype(np.float32)
    want = np.repeat(np.repeat(want, 2, axis=2), 2, axis=3)
    assert np.array_equal(out, want)  # values: the sign of a zero sum is not specified


def test_bf16_values_exact_in_float32():
    """bfloat16 inputs: quotients computed in float32 and rounded once to bfloat16."""
    g = np.array([1.0, 3.0, -5.0, 7.0], np.float32).astype(ml_dtypes.bfloat16).reshape(1, 1, 2, 2)
    out = run(g, (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, 3, 0)
    want = (g.astype(np.float32) / np.float32(3)).astype(ml_dtypes.bfloat16)
    want = np.repeat(np.repeat(want, 2, axis=2), 2, axis=3)
    assert np.array_equal(bits(out), bits(want))


# ============================================================================ special inputs


@pytest.mark.parametrize("dtype, cube", [(F32, 0), (F32, 2), (F32, 3), (F16, 0), (BF16, 0)])
def test_nan_and_inf_gradients_propagate(dtype, cube):
    """NaN reaches every cell of its window; +inf and -inf meeting in a cell give NaN."""
    g = np.ones((1, 1, 3, 3), np.float32)
    g[0, 0, 0, 0] = np.nan
    g[0, 0, 2, 1] = np.inf
    g[0, 0, 2, 2] = -np.inf
    g = g.astype(dtype)
    out = check(g, (1, 1, 4, 4), (2, 2), (1, 1), (0, 0), False, True, 0, cube)
    assert np.isnan(out[0, 0, :2, :2]).all()
    assert np.isnan(out[0, 0, 3, 2]) and np.isnan(out[0, 0, 2, 2])
    assert out[0, 0, 3, 1] == np.inf and out[0, 0, 3, 3] == -np.inf
    assert np.isfinite(out[0, 0, 0, 2:]).all()


def test_float16_sum_overflows_to_inf():
    """float32 compute: 4 * 60000 is finite in float32 and becomes inf in float16."""
    g = np.full((1, 1, 2, 2), 60000.0, np.float16)
    out = run(g, (1, 1, 3, 3), (2, 2), (1, 1), (0, 0), False, True, 1, 0)
    assert out[0, 0, 1, 1] == np.inf
    assert out[0, 0, 0, 0] == np.float16(60000.0)
    assert out[0, 0, 0, 1] == np.inf  # 120000


def test_broadcast_gradoutput_zero_strides():
    """A gradOutput view with stride 0 along C and along W (one stored row per (N, H))."""
    from support import DeviceTensor

    self_shape = (2, 3, 6, 8)
    go_shape = pooled_shape(self_shape, (2, 3), (2, 2), (1, 1), False)
    n, c, ho, wo = go_shape
    rows = random_grad((n, ho), F32, seed=30)
    go = DeviceTensor(rows.reshape(-1), list(go_shape), [ho, 0, 1, 0], 0,
                      aclnn.ACL_FORMAT_NCHW)
    x = layout_device(np.zeros(self_shape, np.float32))
    gi = layout_device(np.zeros(self_shape, np.float32))
    try:
        assert run_avgpool(go, x, gi, (2, 3), (2, 2), (1, 1), False, True, 0, 0) == 0, (
            aclnn.aclGetRecentErrMsg())
        g = np.broadcast_to(rows[:, None, :, None], go_shape)
        golden, sum_abs = avg_pool2d_backward_ref(g, self_shape, (2, 3), (2, 2), (1, 1), False,
                                                  True, 0)
        assert_avgpool_close(gi.view(), golden, sum_abs, F32, what="zero strides")
        for t in (go, x, gi):
            t.check_guards()
    finally:
        for t in (go, x, gi):
            t.free()


@pytest.mark.parametrize("kind", ["channels_last", "gapped", "offset"])
def test_self_layout_does_not_matter(kind):
    """self only supplies the shape: a strided self view gives the same result."""
    self_shape = (1, 2, 5, 5)
    g = random_grad(pooled_shape(self_shape, (3, 3), (2, 2), (1, 1), True), F32, seed=31)
    x_strided = layout_device(np.ones(self_shape, np.float32), kind)
    outs = []
    for x in (x_strided, layout_device(np.ones(self_shape, np.float32))):
        go = layout_device(g)
        gi = layout_device(np.zeros(self_shape, np.float32))
        try:
            assert run_avgpool(go, x, gi, (3, 3), (2, 2), (1, 1), True, False, 0, 0) == 0
            outs.append(gi.view())
        finally:
            go.free()
            gi.free()
            x.free()
    assert np.array_equal(bits(outs[0]), bits(outs[1]))


def test_huge_stride_single_window():
    """stride 2**40 on H: one window row (pooled H = 1); no int overflow anywhere."""
    self_shape = (1, 1, 5, 4)
    stride = (2**40, 1)
    assert pooled_shape(self_shape, (2, 2), stride, (0, 0), False) == (1, 1, 1, 3)
    g = random_grad((1, 1, 1, 3), F32, seed=32)
    out = check(g, self_shape, (2, 2), stride, (0, 0), False, True, 0)
    assert np.all(out[0, 0, 2:] == 0)


# ============================================================================ executor, streams


def _phase1(go, x, gi, kernel, stride, padding, div=0, cube=0):
    from avgpool_reference import int_array

    arrays = [int_array(kernel), int_array(stride), int_array(padding)]
    ws, executor, ret = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
        go.tensor, x.tensor, arrays[0], arrays[1], arrays[2], False, True, div, cube, gi.tensor)
    for a in arrays:
        aclnn.aclDestroyIntArray(a)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    return ws, executor


def _workspace(ws):
    from aclnn import acl

    if ws == 0:
        return None
    ptr, ret = acl.rt.malloc(ws, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    return ptr


def test_repeatable_executor_reads_current_data():
    """A repeatable executor runs again on the tensors' current device contents."""
    from aclnn import acl
    from support import GUARD_BYTES

    self_shape = (1, 2, 4, 4)
    g1 = random_grad((1, 2, 3, 3), F32, seed=33)
    g2 = random_grad((1, 2, 3, 3), F32, seed=34)
    go, x = layout_device(g1), layout_device(np.zeros(self_shape, np.float32))
    gi = layout_device(np.zeros(self_shape, np.float32))
    try:
        ws, executor = _phase1(go, x, gi, (2, 2), (1, 1), (0, 0))
        assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
        wsp = _workspace(ws)
        results = []
        for g in (g1, g2):
            host = np.ascontiguousarray(g)
            assert acl.rt.memcpy(go.ptr + GUARD_BYTES, host.nbytes, acl.util.numpy_to_ptr(host),
                                 host.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
            assert aclnn.aclnnAvgPool2dBackward(wsp, ws, executor, None) == 0
            assert acl.rt.synchronize_stream(None) == 0
            results.append(gi.view())
        assert aclnn.aclDestroyAclOpExecutor(executor) == 0
        if wsp is not None:
            acl.rt.free(wsp)
        for g, out in zip((g1, g2), results):
            golden, sum_abs = avg_pool2d_backward_ref(g, self_shape, (2, 2), (1, 1), (0, 0),
                                                      False, True, 0)
            assert_avgpool_close(out, golden, sum_abs, F32, what="repeatable")
    finally:
        for t in (go, x, gi):
            t.free()


def test_runs_on_a_created_stream():
    from aclnn import acl

    self_shape = (2, 1, 6, 5)
    g = random_grad(pooled_shape(self_shape, (3, 2), (1, 2), (1, 1), True), F32, seed=35)
    go, x = layout_device(g), layout_device(np.zeros(self_shape, np.float32))
    gi = layout_device(np.zeros(self_shape, np.float32))
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    try:
        arrays = [aclnn.aclCreateIntArray(v) for v in ([3, 2], [1, 2], [1, 1])]
        ws, executor, ret = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
            go.tensor, x.tensor, *arrays, True, False, 0, 0, gi.tensor)
        assert ret == 0, aclnn.aclGetRecentErrMsg()
        wsp = _workspace(ws)
        assert aclnn.aclnnAvgPool2dBackward(wsp, ws, executor, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        if wsp is not None:
            acl.rt.free(wsp)
        for a in arrays:
            aclnn.aclDestroyIntArray(a)
        golden, sum_abs = avg_pool2d_backward_ref(g, self_shape, (3, 2), (1, 2), (1, 1), True,
                                                  False, 0)
        assert_avgpool_close(gi.view(), golden, sum_abs, F32, what="stream")
    finally:
        acl.rt.destroy_stream(stream)
        for t in (go, x, gi):
            t.free()
