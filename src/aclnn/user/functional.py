"""The functional API: one call on the arrays you already have, PyTorch-style names and
defaults.

Each function runs the operator's two-phase API - the same checks, the same kernels -
on tensors that view the caller's memory in place (transposed, negative-stride and
zero-stride broadcast views included; an array whose strides are not whole elements is
copied first). The result is a NumPy array for NumPy input and a torch.Tensor when any
argument is one; `out=` is written in place and returned. A failure raises the status's
exception: `ParamNullptrError` (161001, also a TypeError), `ParamInvalidError` (161002,
also a ValueError), or `AclnnError` with `.status` and `.message`.

A Python number given for a tensor argument becomes a 0-d array of `input`'s dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import acl
from ..dtypes import ACL_DTYPE, NUMPY_DTYPE
from ..dtypes import aclFormat as F
from ..framework.broadcast import broadcast_shapes
from ..framework.promotion import promote_all
from ..framework.status import ParamInvalidError, error_for
from ..ops.avg_pool2d_backward import (
    aclnnAvgPool2dBackward,
    aclnnAvgPool2dBackwardGetWorkspaceSize,
)
from ..ops.gelu_backward_v2 import aclnnGeluBackwardV2, aclnnGeluBackwardV2GetWorkspaceSize
from ..ops.l1_loss_backward import aclnnL1LossBackward, aclnnL1LossBackwardGetWorkspaceSize
from ..ops.smooth_l1_loss_backward import (
    aclnnSmoothL1LossBackward,
    aclnnSmoothL1LossBackwardGetWorkspaceSize,
)
from ..tensor import aclCreateIntArray, aclTensor, tensor_over_array
from .arrays import as_numpy, is_torch_tensor, like

REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


@dataclass
class _Output:
    """The tensor the kernel writes (over `array`) and what the caller gets back."""

    tensor: aclTensor
    array: np.ndarray
    result: Any
    copy_back: np.ndarray | None = None  # the caller's `out`, when `array` is a stand-in

def _inputs(where: str, named: dict[str, Any], scalar_dtype_from: str
            ) -> dict[str, np.ndarray | None]:
    """Every tensor argument as a NumPy array (None stays None: phase 1 reports it);
    Python numbers take the dtype of the array named `scalar_dtype_from`."""
    arrays: dict[str, np.ndarray | None] = {}
    for name, value in named.items():
        if value is None:
            arrays[name] = None
        elif not isinstance(value, (bool, int, float)):
            arrays[name] = as_numpy(value, name, where)
    source = arrays.get(scalar_dtype_from)
    dtype = source.dtype if source is not None else np.float32
    for name, value in named.items():
        if name not in arrays:
            try:
                with np.errstate(over="ignore"):  # a float too big for float16 becomes inf
                    arrays[name] = np.asarray(value, dtype=dtype)
            except (OverflowError, ValueError) as exc:
                raise ParamInvalidError(f"{where}: {name} {value!r} does not convert to {dtype} "
                                        f"(the dtype of {scalar_dtype_from}): "
                                        f"{exc}.") from None
    return {name: arrays[name] for name in named}


def _output(where: str, out: Any, shape, dtype: np.dtype, torch_wanted: bool, fmt: int
            ) -> _Output:
    """A fresh contiguous output, or the caller's `out` (which must be writeable), viewed
    as a tensor once; an `out` with strides of partial elements gets a stand-in that is
    copied back."""
    if out is None:
        array = np.empty(shape, dtype)
        return _Output(tensor_over_array(array, fmt), array, like(array, torch_wanted))
    if not (isinstance(out, np.ndarray) or is_torch_tensor(out) or hasattr(out, "__dlpack__")):
        raise ParamInvalidError(f"{where}: out must be an array to write in place (NumPy, "
                                f"torch or DLPack), got {type(out).__name__} {out!r}.")
    array = as_numpy(out, "out", where)
    if not array.flags.writeable:
        raise ParamInvalidError(f"{where}: out must be a writeable array, got a read-only "
                                f"view of shape {list(array.shape)}.")
    tensor = _tensor(where, "out", array, fmt, copy=False)
    if tensor is None:
        stand_in = np.empty(array.shape, array.dtype)
        return _Output(tensor_over_array(stand_in, fmt), stand_in, out, copy_back=array)
    return _Output(tensor, array, out)

def _tensor(where: str, name: str, array: np.ndarray | None, fmt: int, copy: bool = True
            ) -> aclTensor | None:
    """The array viewed in place; one with odd strides or unaligned: a contiguous copy, or
    None when `copy` is False."""
    if array is None:
        return None
    if array.dtype not in ACL_DTYPE:
        raise ParamInvalidError(f"{where}: {name} has dtype {array.dtype}, which no "
                                "aclDataType describes.")
    tensor = tensor_over_array(array, fmt)
    if tensor is None and copy:
        tensor = tensor_over_array(np.ascontiguousarray(array), fmt)
    return tensor


def _run(op: str, workspace_size_fn: Callable, execute_fn: Callable, args: Sequence) -> None:
    """Phase 1, then phase 2 with the workspace phase 1 asked for, on a stream of its own,
    synchronized; a failure raises."""
    workspace_size, executor, status = workspace_size_fn(*args)
    if status != 0:
        raise error_for(status, acl.get_recent_err_msg())
    workspace = None
    if workspace_size > 0:
        workspace, status = acl.rt.malloc(workspace_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        if status != 0:
            raise error_for(status, acl.get_recent_err_msg())
    stream, _ = acl.rt.create_stream()
    try:
        status = execute_fn(workspace, workspace_size, executor, stream)
        if status == 0:
            status = acl.rt.synchronize_stream(stream)
    finally:
        acl.rt.destroy_stream(stream)
        if workspace is not None:
            acl.rt.free(workspace)
    if status != 0:
        raise error_for(status, acl.get_recent_err_msg() or f"{op} failed with {status}")


def _finish(output: _Output):
    if output.copy_back is not None:
        np.copyto(output.copy_back, output.array)
    return output.result


def _promoted_dtype(arrays: Sequence[np.ndarray]) -> np.dtype:
    """The promoted dtype of the arrays (the first one's when they do not promote: phase 1
    then reports why)."""
    codes = [ACL_DTYPE.get(a.dtype) for a in arrays]
    promoted = promote_all(*codes) if None not in codes else None
    return NUMPY_DTYPE[promoted] if promoted is not None else arrays[0].dtype


def _pointwise(where: str, named: dict[str, Any], out, call: Callable[[list], None]):
    """Shared by the three pointwise operators: arrays in, output of the broadcast shape
    and promoted dtype, `call(tensors + [output tensor])` gives phase 1's arguments."""
    torch_wanted = any(is_torch_tensor(v) for v in (*named.values(), out))
    arrays = _inputs(where, named, "input")
    values = [a for a in arrays.values() if a is not None] or [np.empty(0, np.float32)]
    shape = broadcast_shapes(*(a.shape for a in values)) or values[0].shape
    nd = F.ACL_FORMAT_ND
    output = _output(where, out, shape, _promoted_dtype(values), torch_wanted, nd)
    call([_tensor(where, name, a, nd) for name, a in arrays.items()] + [output.tensor])
    return _finish(output)


def _reduction(where: str, reduction) -> int:
    if isinstance(reduction, str):
        if reduction not in REDUCTIONS:
            raise ParamInvalidError(f"{where}: reduction must be 'none', 'mean' or 'sum' "
                                    f"(or 0, 1, 2), got {reduction!r}.")
        return REDUCTIONS[reduction]
    return reduction


def smooth_l1_loss_backward(grad_output, input, target, reduction="mean", beta=1.0, *,  # noqa: A002
                            out=None):
    """The gradient of SmoothL1Loss with respect to `input` (aclnnSmoothL1LossBackward).

    `reduction`: "none", "mean" or "sum" (or 0, 1, 2); `beta` >= 0 (0 is pure sign).
    Operands broadcast; the result has the broadcast shape and the promoted dtype.

    >>> x = np.arange(8, dtype=np.float32)
    >>> aclnn.smooth_l1_loss_backward(np.float32(1), x, np.ones(8, np.float32), "none")
    array([-1.,  0.,  1.,  1.,  1.,  1.,  1.,  1.], dtype=float32)
    """
    where = "smooth_l1_loss_backward"
    mode = _reduction(where, reduction)
    return _pointwise(where, {"grad_output": grad_output, "input": input, "target": target},
                      out, lambda t: _run("aclnnSmoothL1LossBackward",
                                          aclnnSmoothL1LossBackwardGetWorkspaceSize,
                                          aclnnSmoothL1LossBackward,
                                          (t[0], t[1], t[2], mode, beta, t[3])))


def l1_loss_backward(grad_output, input, target, reduction="mean", *, out=None):  # noqa: A002
    """The gradient of L1Loss with respect to `input` (aclnnL1LossBackward):
    grad_output * sign(input - target), divided by the element count for "mean".

    >>> aclnn.l1_loss_backward(np.float32(1), np.array([0., 2.], np.float32),
    ...                        np.ones(2, np.float32))
    array([-0.5,  0.5], dtype=float32)
    """
    where = "l1_loss_backward"
    mode = _reduction(where, reduction)
    return _pointwise(where, {"grad_output": grad_output, "input": input, "target": target},
                      out, lambda t: _run("aclnnL1LossBackward",
                                          aclnnL1LossBackwardGetWorkspaceSize,
                                          aclnnL1LossBackward, (t[0], t[1], t[2], mode, t[3])))


def gelu_backward(grad_output, input, approximate="none", *, out=None):  # noqa: A002
    """The gradient of GELU with respect to `input` (aclnnGeluBackwardV2); `approximate`
    is "none" (the erf form) or "tanh".

    >>> aclnn.gelu_backward(np.ones(2, np.float32), np.array([0., 1.], np.float32))
    array([0.5      , 1.0833155], dtype=float32)
    """
    where = "gelu_backward"
    return _pointwise(where, {"grad_output": grad_output, "input": input}, out,
                      lambda t: _run("aclnnGeluBackwardV2", aclnnGeluBackwardV2GetWorkspaceSize,
                                     aclnnGeluBackwardV2, (t[0], t[1], approximate, t[2])))


def _int_array(where: str, name: str, value):
    """An int or a sequence of ints as an aclIntArray (None stays None)."""
    if value is None:
        return None
    values = [value] if isinstance(value, (int, np.integer)) else value
    array = aclCreateIntArray(values)
    if array is None:
        raise ParamInvalidError(f"{where}: {name} must be an int or a sequence of ints, "
                                f"got {value!r}.")
    return array


def avg_pool2d_backward(grad_output, input, kernel_size, stride=None, padding=0,  # noqa: A002
                        ceil_mode=False, count_include_pad=True, divisor_override=None,
                        cube_math_type=1, *, out=None):
    """The gradient of 2-D average pooling with respect to `input` (aclnnAvgPool2dBackward).

    `input` is (N, C, H, W) or (C, H, W) (passed as NCHW / NCL); `kernel_size`, `stride`
    and `padding` are ints or sequences of 1 or 2 ints (stride None: the kernel size);
    `divisor_override` None means none; `cube_math_type` 0..3 (default 1,
    ALLOW_FP32_DOWN_PRECISION). The result has `input`'s shape and grad_output's dtype.

    >>> g = np.ones((1, 1, 2, 2), np.float32)
    >>> aclnn.avg_pool2d_backward(g, np.zeros((1, 1, 4, 4), np.float32), 2)[0, 0, 0]
    array([0.25, 0.25, 0.25, 0.25], dtype=float32)
    """
    where = "avg_pool2d_backward"
    torch_wanted = any(is_torch_tensor(v) for v in (grad_output, input, out))
    arrays = _inputs(where, {"grad_output": grad_output, "input": input}, "input")
    grad, x = arrays["grad_output"], arrays["input"]
    shape_from, dtype_from = (x if x is not None else grad), (grad if grad is not None else x)
    shape = () if shape_from is None else shape_from.shape
    fmt = {3: F.ACL_FORMAT_NCL, 4: F.ACL_FORMAT_NCHW}.get(len(shape), F.ACL_FORMAT_ND)
    output = _output(where, out, shape, np.float32 if dtype_from is None else dtype_from.dtype,
                     torch_wanted, fmt)
    args = (_tensor(where, "grad_output", grad, fmt), _tensor(where, "input", x, fmt),
            _int_array(where, "kernel_size", kernel_size),
            _int_array(where, "stride", stride), _int_array(where, "padding", padding),
            ceil_mode, count_include_pad, 0 if divisor_override is None else divisor_override,
            cube_math_type, output.tensor)
    _run("aclnnAvgPool2dBackward", aclnnAvgPool2dBackwardGetWorkspaceSize,
         aclnnAvgPool2dBackward, args)
    return _finish(output)
