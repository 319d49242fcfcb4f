"""Property sweep of aclnnAvgPool2dBackward against the float64 reference and PyTorch.

Each example draws a geometry (N 1..2 or a 3-D input, C 1..3, H, W 1..40, kernel 1..5 per
axis, stride 1..4 per axis / one value / empty / None, padding 0..k//2, ceilMode,
countIncludePad, divisorOverride 0 or in [-255, 255]), a dtype (float32, float16,
bfloat16), a cubeMathType and a layout for gradOutput and for gradInput (contiguous,
channels-last permuted strides, offset inside a bigger storage, gapped). Only geometries
whose pooled size is <= 0 are skipped (the operator rejects their empty gradOutput).

The result must be within the SPEC §10 bar of the float64 reference (with the SPEC §8
cubeMathType term rounding for float32), and, for KEEP_DTYPE-exact numerics, within the
same bar of torch.ops.aten.avg_pool2d_backward computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import aclnn
from avgpool_reference import (
    BF16,
    F16,
    F32,
    LAYOUTS,
    assert_avgpool_close,
    avg_pool2d_backward_ref,
    bits,
    layout,
    layout_device,
    pooled_shape,
    run_avgpool,
    term_mode,
    view_positions,
    widen,
)

SOC = "Ascend910B"  # the session default (tests/conftest.py)
NCHW, NCL = aclnn.ACL_FORMAT_NCHW, aclnn.ACL_FORMAT_NCL


@dataclass
class Case:
    self_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...] | None
    padding: tuple[int, ...]
    ceil_mode: bool
    count_include_pad: bool
    divisor_override: int
    dtype: np.dtype
    cube_math_type: int
    go_kind: str
    gi_kind: str
    fmt: int
    grad_output: np.ndarray

    @property
    def go_shape(self):
        return pooled_shape(self.self_shape, self.kernel, self.stride, self.padding,
                            self.ceil_mode)


def _attr(draw, values: tuple[int, int]) -> tuple[int, ...]:
    """An int-array attribute: one value when both axes agree (sometimes), else two."""
    if values[0] == values[1] and draw(st.booleans()):
        return (values[0],)
    return values


@st.composite
def cases(draw, exact_only: bool = False) -> Case:
    three_d = draw(st.integers(0, 4)) == 0
    n = draw(st.integers(1, 2))
    c = draw(st.integers(1, 3))
    h = draw(st.integers(1, 40))
    w = draw(st.integers(1, 40))
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    p = (draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2)))
    stride_form = draw(st.sampled_from(["two", "one", "empty", "none"]))
    if stride_form == "two":
        stride = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    elif stride_form == "one":
        stride = (draw(st.integers(1, 4)),)
    else:
        stride = () if stride_form == "empty" else None
    ceil_mode = draw(st.booleans())
    count_include_pad = draw(st.booleans())
    divisor_override = draw(st.one_of(st.just(0), st.integers(-255, 255)))
    dtype = draw(st.sampled_from([F32, F16, BF16]))
    cube = 0 if exact_only else draw(st.integers(0, 3))
    self_shape = (c, h, w) if three_d else (n, c, h, w)
    kernel, padding = _attr(draw, k), _attr(draw, p)
    go_shape = pooled_shape(self_shape, kernel, stride, padding, ceil_mode)
    assume(go_shape[-1] > 0 and go_shape[-2] > 0)
    # Keep each example small: at most a few thousand output elements.
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    g = rng.uniform(-4.0, 4.0, go_shape).astype(np.float32).astype(dtype)
    return Case(
        self_shape=self_shape, kernel=kernel, stride=stride, padding=padding,
        ceil_mode=ceil_mode, count_include_pad=count_include_pad,
        divisor_override=divisor_override, dtype=np.dtype(dtype), cube_math_type=cube,
        go_kind=draw(st.sampled_from(LAYOUTS)), gi_kind=draw(st.sampled_from(LAYOUTS)),
        fmt=draw(st.sampled_from([NCL, NCHW])) if three_d else NCHW, grad_output=g,
    )


def run_case(case: Case) -> np.ndarray:
    """Run the operator on `case`; checks status, guards, untouched storage; the output."""
    go = layout_device(case.grad_output, case.go_kind, case.fmt)
    x = layout_device(np.zeros(case.self_shape, case.dtype), "contiguous", case.fmt)
    gi = layout_device(np.full(case.self_shape, 5.0, case.dtype), case.gi_kind, case.fmt,
                       fill=-333.0)
    before = gi.storage()
    try:
        status = run_avgpool(go, x, gi, case.kernel, case.stride, case.padding, case.ceil_mode,
                             case.count_include_pad, case.divisor_override,
                             case.cube_math_type)
        assert status == 0, f"status {status}: {aclnn.aclGetRecentErrMsg()} for {case}"
        for t in (go, x, gi):
            t.check_guards()
        strides, offset, size = layout(case.self_shape, case.gi_kind)
        outside = np.ones(size, dtype=bool)
        outside[view_positions(case.self_shape, strides, offset).reshape(-1)] = False
        assert np.array_equal(bits(gi.storage()[outside]), bits(before[outside]))
        return gi.view()
    finally:
        for t in (go, x, gi):
            t.free()


def describe(case: Case) -> str:
    return (f"self={case.self_shape} k={case.kernel} s={case.stride} p={case.padding} "
            f"ceil={case.ceil_mode} count={case.count_include_pad} "
            f"div={case.divisor_override} {case.dtype} cube={case.cube_math_type} "
            f"layouts={case.go_kind}/{case.gi_kind}")


SWEEP = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SWEEP
@given(case=cases())
def test_matches_float64_reference(case):
    out = run_case(case)
    mode = term_mode(case.dtype, case.cube_math_type, SOC)
    golden, sum_abs = avg_pool2d_backward_ref(
        case.grad_output, case.self_shape, case.kernel, case.stride, case.padding,
        case.ceil_mode, case.count_include_pad, case.divisor_override, mode)
    assert_avgpool_close(out, golden, sum_abs, case.dtype, what=describe(case))


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def torch_golden(torch, case: Case) -> np.ndarray:
    """PyTorch's avg_pool2d backward in float64 on the exact gradOutput values.

    PyTorch accepts every combination drawn here: negative divisor_override included
    (it only rejects 0, which we map to None), stride [] means the kernel, and pad <= k//2
    equals 2*pad <= k. The sweep draws only non-empty pooled sizes, as torch requires.
    """
    g = torch.from_numpy(widen(case.grad_output))
    x = torch.zeros(case.self_shape, dtype=torch.float64)
    stride = [] if case.stride is None else list(case.stride)
    res = torch.ops.aten.avg_pool2d_backward(
        g, x, list(case.kernel), stride, list(case.padding), case.ceil_mode,
        case.count_include_pad, case.divisor_override or None)
    return res.numpy()


@SWEEP
@given(case=cases(exact_only=True))
def test_matches_torch(torch, case):
    """KEEP_DTYPE (exact float32 terms; 16-bit dtypes ignore cubeMathType) against PyTorch.

    The down-precision cubeMathType modes have no PyTorch counterpart; they are covered by
    test_matches_float64_reference. The reference itself is checked against PyTorch here.
    """
    out = run_case(case)
    t_golden = torch_golden(torch, case)
    golden, sum_abs = avg_pool2d_backward_ref(
        case.grad_output, case.self_shape, case.kernel, case.stride, case.padding,
        case.ceil_mode, case.count_include_pad, case.divisor_override, "exact")
    np.testing.assert_allclose(golden, t_golden, rtol=1e-12, atol=1e-300,
                               err_msg="reference disagrees with PyTorch: " + describe(case))
    assert_avgpool_close(out, t_golden, sum_abs, case.dtype, what="torch: " + describe(case))
