"""The functional API: the same results as the two-phase API, bit for bit, on NumPy arrays
in any layout, PyTorch tensors and DLPack objects; `out=` in place; errors as exceptions
that are also TypeError/ValueError."""

from __future__ import annotations

import tracemalloc

import ml_dtypes
import numpy as np
import pytest
import torch

import aclnn
from aclnn import acl
from aclnn.framework.workspace import aligned
from avgpool_reference import layout_device, pooled_size, run_avgpool
from reference import BF16, F16, F32, bits, compute
from support import empty_device, to_device

ATTRS = {"smooth_l1": (0, 0.7), "l1": (2,), "gelu": ("tanh",)}
REDUCTION_NAMES = {0: "none", 1: "mean", 2: "sum"}


def functional(op: str, inputs, attrs, **kw):
    """Call the functional API of `op` with the tests' (op, attrs) convention."""
    if op == "smooth_l1":
        return aclnn.smooth_l1_loss_backward(*inputs, REDUCTION_NAMES[attrs[0]], attrs[1], **kw)
    if op == "l1":
        return aclnn.l1_loss_backward(*inputs, REDUCTION_NAMES[attrs[0]], **kw)
    return aclnn.gelu_backward(*inputs, attrs[0], **kw)


def values(shape, dtype, seed) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 2).astype(dtype)


def inputs_for(op, shape, dtype, seed=0):
    count = 2 if op == "gelu" else 3
    return [values(shape, dtype, seed + k) for k in range(count)]


# --------------------------------------------------------------------------- bit for bit


@pytest.mark.parametrize("op", ["smooth_l1", "l1", "gelu"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_matches_the_two_phase_api_bit_for_bit(op, dtype):
    inputs = inputs_for(op, (5, 7), dtype)
    expected = compute(op, inputs, ATTRS[op])
    got = functional(op, inputs, ATTRS[op])
    assert isinstance(got, np.ndarray) and got.dtype == expected.dtype
    assert np.array_equal(bits(got), bits(expected))


def _views(base: np.ndarray) -> dict[str, np.ndarray]:
    """Views of a (6, 8) base: transposed, negative strides, sliced with an offset,
    and a zero-stride broadcast."""
    return {
        "transposed": base.T,
        "negative": base[::-1, ::-2].T,
        "sliced": base[1:5, 2:].T,
        "broadcast": np.broadcast_to(base[:1, :6].T, (6, 4)),
    }


@pytest.mark.parametrize("layout", ["transposed", "negative", "sliced", "broadcast"])
@pytest.mark.parametrize("op", ["smooth_l1", "l1", "gelu"])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_numpy_views_in_any_layout(op, layout, dtype):
    """Strided views give exactly what their contiguous copies give."""
    count = 2 if op == "gelu" else 3
    bases = [values((6, 8), dtype, k) for k in range(count)]
    views = [_views(b)[layout] for b in bases]
    views = [v[: views[0].shape[0], : views[0].shape[1]] for v in views]
    got = functional(op, views, ATTRS[op])
    expected = compute(op, [np.ascontiguousarray(v) for v in views], ATTRS[op])
    assert np.array_equal(bits(got), bits(expected))


def test_inputs_are_read_in_place_not_copied():
    """A transposed 8M-element input adds no copy of itself to the peak memory (32 MiB) beyond
    the workspace phase 1 reports (the library's Contiguous copy of it, which the functional
    API allocates as the device would need): the kernel's scratch is a staged tile of about
    2 MiB per thread."""
    x = values((4096, 2048), F32, 1).T
    target = values((2048, 4096), F32, 2)
    out = np.empty((2048, 4096), F32)
    aclnn.smooth_l1_loss_backward(np.float32(1), x, target, "none", out=out)  # warm up
    tracemalloc.start()
    try:
        aclnn.smooth_l1_loss_backward(np.float32(1), x, target, "none", out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    workspace = aligned(x.nbytes)
    assert peak < workspace + x.nbytes // 4, f"peak {peak} bytes: an input was copied"
    expected = compute("smooth_l1", [np.float32(1), np.ascontiguousarray(x), target],
                       (0, 1.0))
    assert np.array_equal(out, expected)


def test_broadcast_shapes_and_python_scalars():
    """A Python number takes input's dtype; operands broadcast (rank 0 .. 3)."""
    x = values((3, 1, 4), F16, 0)
    y = values((5, 1), F16, 1)
    got = aclnn.smooth_l1_loss_backward(2.0, x, y, "sum", 0.5)
    assert got.shape == (3, 5, 4) and got.dtype == F16
    expected = compute("smooth_l1", [np.float16(2.0), x, y], (2, 0.5))
    assert np.array_equal(bits(got), bits(expected))


def test_reduction_given_as_int_is_the_same():
    inputs = inputs_for("l1", (4, 4), F32)
    for number, name in REDUCTION_NAMES.items():
        assert np.array_equal(aclnn.l1_loss_backward(*inputs, number),
                              aclnn.l1_loss_backward(*inputs, name))


# --------------------------------------------------------------------------- out=


def test_out_is_written_in_place_and_nothing_else_changes():
    big = np.full((8, 10), -5.0, F32)
    out = big[1:6:2, 2:9].T  # (7, 3), strided
    inputs = inputs_for("gelu", (7, 3), F32)
    result = aclnn.gelu_backward(*inputs, "none", out=out)
    assert result is out
    expected = compute("gelu", inputs, ("none",))
    assert np.array_equal(out, expected)
    untouched = np.ones(big.shape, bool)
    untouched[1:6:2, 2:9] = False
    assert (big[untouched] == -5.0).all()


def test_out_with_strides_of_partial_elements_is_filled_through_a_copy():
    """A float32 field of a packed record array (5-byte stride) still gets the result."""
    records = np.zeros(6, dtype=[("value", F32), ("tag", np.uint8)])
    out = records["value"]
    assert out.strides == (5,)
    inputs = inputs_for("l1", (6,), F32)
    assert aclnn.l1_loss_backward(*inputs, "none", out=out) is out
    assert np.array_equal(out, compute("l1", inputs, (0,)))
    assert (records["tag"] == 0).all()


def test_out_with_the_wrong_dtype_is_the_operator_error():
    inputs = inputs_for("gelu", (3,), F32)
    with pytest.raises(ValueError) as info:
        aclnn.gelu_backward(*inputs, out=np.empty(3, F16))
    assert info.value.status == aclnn.ACLNN_ERR_PARAM_INVALID
    assert "gradInput" in info.value.message and "DT_FLOAT16" in info.value.message


def test_read_only_out_is_refused():
    inputs = inputs_for("gelu", (4,), F32)
    out = np.zeros(4, F32)
    out.flags.writeable = False
    with pytest.raises(aclnn.ParamInvalidError, match="out must be a writeable array"):
        aclnn.gelu_backward(*inputs, out=out)
    assert (out == 0).all()


# --------------------------------------------------------------------------- torch and DLPack


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_torch_in_torch_out(dtype):
    g = torch.randn(4, 6).to(dtype)
    x = torch.randn(6, 4).to(dtype).t()  # non-contiguous
    y = torch.randn(1, 6).to(dtype).expand(4, 6)  # zero stride
    got = aclnn.smooth_l1_loss_backward(g, x, y, "mean", 1.0)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == (4, 6)
    np_dtype = {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16}[dtype]
    as_np = [t.contiguous().view(torch.int16).numpy().view(np_dtype) if dtype == torch.bfloat16
             else t.contiguous().numpy() for t in (g, x, y)]
    expected = compute("smooth_l1", as_np, (1, 1.0))
    got_np = got.view(torch.int16).numpy().view(BF16) if dtype == torch.bfloat16 else got.numpy()
    assert np.array_equal(bits(got_np), bits(expected))


def test_torch_out_in_place_and_requires_grad_inputs():
    x = torch.randn(5, requires_grad=True)
    g = torch.ones(5)
    out = torch.zeros(5)
    assert aclnn.gelu_backward(g, x, out=out) is out
    expected = torch.ops.aten.gelu_backward(g, x.detach())
    assert torch.allclose(out, expected, rtol=1e-6, atol=1e-7)


def test_mixed_numpy_and_torch_returns_torch():
    got = aclnn.l1_loss_backward(np.ones(3, F32), torch.tensor([0.0, 1.0, 2.0]),
                                 np.ones(3, F32), "none")
    assert isinstance(got, torch.Tensor)
    assert got.tolist() == [-1.0, 0.0, 1.0]


class DLPackOnly:
    """An object that offers nothing but the DLPack protocol."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_objects_are_accepted():
    x = values((3, 4), F32, 3)
    g = values((3, 4), F32, 4)
    got = aclnn.gelu_backward(DLPackOnly(g), DLPackOnly(x))
    assert isinstance(got, np.ndarray)
    assert np.array_equal(got, compute("gelu", [g, x], ("none",)))


# --------------------------------------------------------------------------- AvgPool2dBackward


def as_list(value):
    """An int, a tuple or None as the list (or None) the two-phase call takes."""
    return None if value is None else list(value) if isinstance(value, tuple) else [value]


def _pool_two_phase(grad, shape, kernel, stride, padding, ceil_mode, include_pad, divisor,
                    cube):
    fmt = aclnn.ACL_FORMAT_NCL if len(shape) == 3 else aclnn.ACL_FORMAT_NCHW
    go = layout_device(grad, fmt=fmt)
    x = empty_device(shape, grad.dtype, fill=0, fmt=fmt)
    gi = empty_device(shape, grad.dtype, fill=0, fmt=fmt)
    try:
        status = run_avgpool(go, x, gi, kernel, stride, padding, ceil_mode, include_pad,
                             divisor, cube)
        assert status == 0, aclnn.aclGetRecentErrMsg()
        return gi.view().copy()
    finally:
        for t in (go, x, gi):
            t.free()


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("params", [
    dict(shape=(2, 3, 9, 8), kernel=3, stride=2, padding=1, ceil=False, pad=True, div=None),
    dict(shape=(3, 7, 6), kernel=(2, 3), stride=None, padding=(1, 0), ceil=True, pad=False,
         div=None),
    dict(shape=(1, 2, 5, 5), kernel=2, stride=1, padding=0, ceil=False, pad=True, div=-3),
])
def test_avg_pool_matches_the_two_phase_api(dtype, params):
    shape, kernel = params["shape"], params["kernel"]
    k = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    s = params["stride"] or k
    s = s if isinstance(s, tuple) else (s, s)
    p = params["padding"] if isinstance(params["padding"], tuple) else (params["padding"],) * 2
    out_hw = [pooled_size(shape[-2 + i], k[i], s[i], p[i], params["ceil"]) for i in range(2)]
    grad = values((*shape[:-2], *out_hw), dtype, 7)
    x = values(shape, dtype, 8)
    got = aclnn.avg_pool2d_backward(grad, x, kernel, params["stride"], params["padding"],
                                    params["ceil"], params["pad"], params["div"])
    expected = _pool_two_phase(grad, shape, as_list(kernel), as_list(params["stride"]),
                               as_list(params["padding"]), params["ceil"], params["pad"],
                               params["div"] or 0, 1)
    assert got.shape == shape and got.dtype == dtype
    assert np.array_equal(bits(got), bits(expected))


def test_avg_pool_torch_tensors_and_channels_last_views():
    x = torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last)
    g = torch.randn(2, 4, 3, 3)
    got = aclnn.avg_pool2d_backward(g, x, 2, cube_math_type=0)
    assert isinstance(got, torch.Tensor)
    expected = torch.ops.aten.avg_pool2d_backward(g, x, [2, 2], [2, 2], [0, 0], False, True,
                                                  None)
    assert torch.allclose(got, expected, rtol=0, atol=1e-6)


def test_avg_pool_errors_name_the_parameter():
    g, x = np.ones((1, 1, 2, 2), F32), np.zeros((1, 1, 4, 4), F32)
    with pytest.raises(ValueError) as info:
        aclnn.avg_pool2d_backward(g, x, 0)
    assert info.value.status == 161002 and "kernelSize" in info.value.message
    with pytest.raises(TypeError) as info:
        aclnn.avg_pool2d_backward(g, x, None)
    assert info.value.status == 161001 and "kernelSize" in info.value.message
    with pytest.raises(ValueError, match="kernel_size must be an int or a sequence"):
        aclnn.avg_pool2d_backward(g, x, "3")


# --------------------------------------------------------------------------- errors


def test_null_argument_is_a_type_error_with_161001():
    x = values((3,), F32, 0)
    with pytest.raises(TypeError) as info:
        aclnn.smooth_l1_loss_backward(None, x, x)
    err = info.value
    assert isinstance(err, aclnn.AclnnError) and isinstance(err, aclnn.ParamNullptrError)
    assert err.status == aclnn.ACLNN_ERR_PARAM_NULLPTR and "gradOut" in err.message


@pytest.mark.parametrize("call, needle", [
    (lambda x: aclnn.smooth_l1_loss_backward(x, x, x[:2]), "cannot broadcast"),
    (lambda x: aclnn.smooth_l1_loss_backward(x, x, x, "avg"), "reduction must be"),
    (lambda x: aclnn.smooth_l1_loss_backward(x, x, x, 7), "reduction must be"),
    (lambda x: aclnn.smooth_l1_loss_backward(x, x, x, "none", -1.0), "beta"),
    (lambda x: aclnn.gelu_backward(x, x, "exact"), "approximate"),
    (lambda x: aclnn.l1_loss_backward(x.astype(np.int32), x.astype(np.int32),
                                      x.astype(np.int32)), "DT_INT32"),
    (lambda x: aclnn.gelu_backward(x.astype(np.float64), x), "DT_DOUBLE"),
    (lambda x: aclnn.gelu_backward(x.astype(np.longdouble), x), "no aclDataType"),
])
def test_invalid_arguments_are_value_errors_with_161002(call, needle):
    x = values((3,), F32, 0)
    with pytest.raises(ValueError) as info:
        call(x)
    assert info.value.status == aclnn.ACLNN_ERR_PARAM_INVALID
    assert needle in info.value.message


def test_soc_rules_apply(use_soc):
    use_soc("Ascend910")
    x = values((3,), BF16, 0)
    with pytest.raises(ValueError, match="DT_BF16"):
        aclnn.gelu_backward(x, x)


def test_bfloat16_numpy_results_keep_their_dtype():
    x = values((4,), ml_dtypes.bfloat16, 0)
    got = aclnn.gelu_backward(np.ones(4, BF16), x)
    assert got.dtype == BF16
    expected = compute("gelu", [np.ones(4, BF16), x], ("none",))
    assert np.array_equal(bits(got), bits(expected))


def test_empty_inputs_give_empty_results():
    x = np.zeros((0, 3), F32)
    got = aclnn.gelu_backward(x, x)
    assert got.shape == (0, 3)


def test_a_call_leaves_work_queued_on_the_default_stream_alone():
    """Functional calls run on a stream of their own: work the caller queued on the default
    stream stays queued until the caller synchronizes it."""
    g, x, y = (to_device(a) for a in inputs_for("smooth_l1", (4,), F32))
    out = empty_device((4,), F32, fill=7.0)
    try:
        _, executor, status = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(
            g.tensor, x.tensor, y.tensor, 0, 1.0, out.tensor)
        assert status == 0
        assert aclnn.aclnnSmoothL1LossBackward(None, 0, executor, None) == 0
        aclnn.gelu_backward(np.ones(3, F32), np.zeros(3, F32))
        assert (out.view() == 7.0).all(), "the functional call ran the caller's queue"
        assert acl.rt.synchronize_stream(None) == 0
        expected = compute("smooth_l1", [g.view(), x.view(), y.view()], (0, 1.0))
        assert np.array_equal(out.view(), expected)
    finally:
        for t in (g, x, y, out):
            t.free()


def test_the_docstring_examples_hold():
    """The `>>>` examples of the functional API's docstrings, run as doctests."""
    import doctest

    from aclnn.user import functional as module

    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(module, globs={"np": np, "aclnn": aclnn}):
        runner.run(test)
    assert runner.tries >= 6 and runner.failures == 0


@pytest.mark.parametrize("number", [2.0**31, float("nan"), 10**30])
def test_a_python_number_that_does_not_fit_inputs_dtype_is_a_value_error(number):
    """Found by the fuzzing campaign: this raised OverflowError / a bare ValueError."""
    x = np.arange(3, dtype=np.int32)
    with pytest.raises(aclnn.ParamInvalidError, match="does not convert to int32"):
        aclnn.l1_loss_backward(number, x, x)


@pytest.mark.parametrize("out", [np.float32(1.5), 2.0, [0.0, 0.0, 0.0]])
def test_out_must_be_an_array_that_can_be_written(out):
    """Found by the fuzzing campaign: a NumPy scalar as out was silently not written."""
    x = np.ones(3, F32)
    with pytest.raises(aclnn.ParamInvalidError, match="out must be an array to write in place"):
        aclnn.gelu_backward(x, x, out=out)
