"""The output's memory (ours, not on the seed pages): gradInput must not overlap itself,
nor share memory with an input except as the very same view (in place, elementwise ops)
- otherwise the result would depend on the order of the writes. Views of one allocation
that do not share an element are fine."""

from __future__ import annotations

import numpy as np
import pytest

import aclnn
from reference import F32, compute
from support import GUARD_BYTES, DeviceTensor, check_rejected, run_two_phase

ND = aclnn.ACL_FORMAT_ND


def view(base: DeviceTensor, shape, strides, offset=0, fmt=ND):
    """Another aclTensor on `base`'s storage."""
    tensor = aclnn.aclCreateTensor(list(shape), base.acl_dtype, list(strides), offset, fmt,
                                   [base.storage_host.size], base.ptr + GUARD_BYTES)
    assert tensor is not None, aclnn.aclGetRecentErrMsg()
    return tensor


def storage(size=64, seed=0) -> DeviceTensor:
    values = np.random.default_rng(seed).standard_normal(size).astype(F32)
    return DeviceTensor(values, [size])


def pointwise(op, inputs, out):
    """Phase 1 + 2 of a pointwise op on aclTensors (gelu takes two inputs)."""
    if op == "smooth_l1":
        return run_two_phase(aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize,
                             aclnn.aclnnSmoothL1LossBackward, *inputs, 0, 1.0, out)
    if op == "l1":
        return run_two_phase(aclnn.aclnnL1LossBackwardGetWorkspaceSize,
                             aclnn.aclnnL1LossBackward, *inputs, 0, out)
    return run_two_phase(aclnn.aclnnGeluBackwardV2GetWorkspaceSize,
                         aclnn.aclnnGeluBackwardV2, *inputs, "none", out)


OPS = ["smooth_l1", "l1", "gelu"]
ATTRS = {"smooth_l1": (0, 1.0), "l1": (0,), "gelu": ("none",)}
OP_NAMES = {"smooth_l1": "aclnnSmoothL1LossBackward", "l1": "aclnnL1LossBackward",
            "gelu": "aclnnGeluBackwardV2"}


def strided(values: np.ndarray, shape, strides, offset) -> np.ndarray:
    """The view (shape, strides and offset in elements) of a 1-D array, copied."""
    first = values[offset:]
    return np.lib.stride_tricks.as_strided(first, shape, [s * values.itemsize for s in strides]
                                           ).copy()


def _phase1(op, inputs, out):
    if op == "smooth_l1":
        return aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(*inputs, 0, 1.0, out)
    if op == "l1":
        return aclnn.aclnnL1LossBackwardGetWorkspaceSize(*inputs, 0, out)
    return aclnn.aclnnGeluBackwardV2GetWorkspaceSize(*inputs, "none", out)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("strides", [[0, 1], [1, 1], [2, 1]])
def test_an_output_overlapping_itself_is_rejected(op, strides):
    base = storage()
    inputs = [storage(seed=k) for k in range(1, 4 if op != "gelu" else 3)]
    try:
        out = view(base, [4, 3], strides)
        ins = [view(t, [4, 3], [3, 1]) for t in inputs]
        check_rejected(OP_NAMES[op], aclnn.ACLNN_ERR_PARAM_INVALID, _phase1(op, ins, out),
                       needles=("gradInput's elements must not overlap each other",
                                f"strides {strides} over shape [4, 3]"))
    finally:
        for t in (base, *inputs):
            t.free()


@pytest.mark.parametrize("op", OPS)
def test_an_output_partly_overlapping_an_input_is_rejected(op):
    base = storage()
    others = [storage(seed=k) for k in range(1, 3)]
    try:
        x = view(base, [16], [1], 0)
        out = view(base, [16], [1], 4)  # shifted by 4 elements: partial overlap
        ins = [view(others[0], [16], [1]), x] + ([view(others[1], [16], [1])]
                                                  if op != "gelu" else [])
        check_rejected(OP_NAMES[op], aclnn.ACLNN_ERR_PARAM_INVALID, _phase1(op, ins, out),
                       needles=("gradInput must not share memory with self",
                                "unless it is the very same view"))
    finally:
        for t in (base, *others):
            t.free()


def test_a_broadcast_input_aliasing_the_output_is_rejected():
    """target (1, 4) viewing the output's first row: later rows would read written values."""
    base, g, x = storage(), storage(seed=1), storage(seed=2)
    try:
        out = view(base, [4, 4], [4, 1])
        target = view(base, [1, 4], [4, 1])
        check_rejected(OP_NAMES["smooth_l1"], aclnn.ACLNN_ERR_PARAM_INVALID,
                       _phase1("smooth_l1", [view(g, [4, 4], [4, 1]), view(x, [4, 4], [4, 1]),
                                             target], out),
                       needles=("gradInput must not share memory with target",))
    finally:
        for t in (base, g, x):
            t.free()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("strides, offset", [([4, 1], 0), ([1, 4], 0), ([-4, 1], 12)])
def test_in_place_on_the_very_same_view_is_exact(op, strides, offset):
    """gradInput the same view as self: the result is what out-of-place gives."""
    base = storage(16)
    grad = storage(16, seed=5)
    target = storage(16, seed=6)
    try:
        x = view(base, [4, 4], strides, offset)
        x_values = strided(base.storage(), [4, 4], strides, offset)
        g_values = grad.storage().reshape(4, 4)
        y_values = target.storage().reshape(4, 4)
        ins = [view(grad, [4, 4], [4, 1]), x] + ([view(target, [4, 4], [4, 1])]
                                                 if op != "gelu" else [])
        assert pointwise(op, ins, x) == 0, aclnn.aclGetRecentErrMsg()
        arrays = [g_values, x_values] + ([y_values] if op != "gelu" else [])
        expected = compute(op, arrays, ATTRS[op])
        assert np.array_equal(strided(base.storage(), [4, 4], strides, offset), expected)
        base.check_guards()
    finally:
        for t in (base, grad, target):
            t.free()


def test_interleaved_views_of_one_allocation_are_fine():
    """self the even elements, gradInput the odd ones: no element shared, so allowed."""
    base, grad = storage(32), storage(16, seed=3)
    try:
        x = view(base, [16], [2], 0)
        out = view(base, [16], [2], 1)
        x_values = base.storage()[0::2].copy()
        assert run_two_phase(aclnn.aclnnGeluBackwardV2GetWorkspaceSize,
                             aclnn.aclnnGeluBackwardV2, view(grad, [16], [1]), x, "tanh",
                             out) == 0, aclnn.aclGetRecentErrMsg()
        after = base.storage()
        expected = compute("gelu", [grad.storage(), x_values], ("tanh",))
        assert np.array_equal(after[1::2], expected)
        assert np.array_equal(after[0::2], x_values)
    finally:
        for t in (base, grad):
            t.free()


def test_avg_pool_output_sharing_grad_output_is_rejected_but_self_may_alias():
    """gradOutput is read while gradInput is written: no sharing at all. self's values are
    never read, so gradInput may be the same memory as self."""
    base = storage(64)
    try:
        nchw = aclnn.ACL_FORMAT_NCHW
        grad_in = view(base, [1, 1, 4, 4], [16, 16, 4, 1], 0, nchw)
        grad_out = view(base, [1, 1, 2, 2], [4, 4, 2, 1], 8, nchw)  # inside grad_in's rows
        self_ = view(base, [1, 1, 4, 4], [16, 16, 4, 1], 0, nchw)
        kernel = aclnn.aclCreateIntArray([2, 2])
        padding = aclnn.aclCreateIntArray([0])
        result = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
            grad_out, self_, kernel, None, padding, False, True, 0, 0, grad_in)
        check_rejected("aclnnAvgPool2dBackward", aclnn.ACLNN_ERR_PARAM_INVALID, result,
                       needles=("gradInput must not share memory with gradOutput",))
        apart = view(base, [1, 1, 2, 2], [4, 4, 2, 1], 32, nchw)
        result = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
            apart, self_, kernel, None, padding, False, True, 0, 0, grad_in)
        assert result[2] == 0, aclnn.aclGetRecentErrMsg()
    finally:
        base.free()


def test_the_functional_api_in_place_and_overlap():
    x = np.random.default_rng(1).standard_normal(12).astype(F32)
    g = np.ones(12, F32)
    expected = compute("gelu", [g, x], ("none",))
    assert aclnn.gelu_backward(g, x, out=x) is x
    assert np.array_equal(x, expected)
    buffer = np.zeros(16, F32)
    with pytest.raises(ValueError, match="must not share memory with self"):
        aclnn.gelu_backward(np.ones(12, F32), buffer[:12], out=buffer[4:])
