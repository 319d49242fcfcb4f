"""aclnnAvgPool2dBackward: the gradient of 2-D average pooling with respect to its input.

Math (PyTorch's avg_pool2d backward): for output cell (oh, ow) the window starts at
o*s - p and ends at min(start + k, in + p) per axis; `pool` is the product of those
extents; the window is clipped to [0, in). divisor = divisorOverride if it is not 0, else
pool if countIncludePad, else the clipped window's size. Every input cell of the clipped
window receives gradOutput[oh, ow] / divisor (a true float32 division), accumulated in
float32 in row-major output order and rounded once to gradInput's dtype.

cubeMathType (FLOAT only; FLOAT16/BFLOAT16 always compute exactly in float32):
- KEEP_DTYPE (0): exact float32.
- USE_FP16 (2), and ALLOW_FP32_DOWN_PRECISION (1) on Ascend910/310P: each scaled gradient
  is rounded to float16 (round-to-nearest-even) before the float32 accumulation.
- USE_HF32 (3), and ALLOW_FP32_DOWN_PRECISION (1) on Ascend910B/910_93/950: each scaled
  gradient is rounded to HF32 (float32 range, 11 explicit mantissa bits, RNE).
- Ascend910/310P reject KEEP_DTYPE and USE_HF32 for FLOAT (their cube has no float32).

Checks, in the documented order: nulls (gradOutput, self, kernelSize, padding, gradInput;
stride may be None) -> dtypes of gradOutput, self, gradInput in FLOAT, FLOAT16 (+ BFLOAT16 on
Ascend910B/910_93/950), gradOutput's and self's equal to gradInput's -> formats NCHW or NCL,
4-D tensors NCHW, self's equal to gradInput's -> gradOutput and gradInput both 3-D or both
4-D -> kernelSize length 1 or 2, values > 0; stride length 0..2, values > 0; padding length
1 or 2, values >= 0 -> 2 * pad <= kernel -> cubeMathType in 0..3 and the SoC rule -> self
shape == gradInput shape -> divisorOverride in [-255, 255] -> C <= 65535 -> gradOutput's N
and C equal self's, its H and W the pooled size of self's; an empty gradOutput is invalid.
Then (ours, not on the page): gradInput's elements must not overlap each other or share
memory with gradOutput, or the result would depend on the order of the writes.

The library (pooling/avg_pool3_d_grad, op_api aclnn_avgpool2d_backward.cpp CheckParams)
departs from the page where the checks below say "library"; after its checks it runs one
of several graphs per SoC (`_avgpool_graphs`).
"""

from __future__ import annotations

import operator

import numpy as np

from ..dtypes import aclDataType as D
from ..dtypes import aclFormat as F
from ..dtypes import dtype_name, format_name
from ..framework import checks
from ..framework.executor import Plan, execute_api, workspace_api
from ..framework.soc import current_soc, library_contract
from ..framework.status import ACLNN_ERR_INNER_NULLPTR, AclnnError, ParamInvalidError
from ..kernels import pool
from ..kernels.pointwise import StridedOperand
from ..tensor import aclIntArray, aclTensor
from . import _avgpool_graphs as graphs
from ._pointwise import KERNEL_CODE

OP = "aclnnAvgPool2dBackward"
CUBE_MATH_TYPES = {0: "KEEP_DTYPE", 1: "ALLOW_FP32_DOWN_PRECISION", 2: "USE_FP16", 3: "USE_HF32"}
KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32 = 0, 1, 2, 3
MAX_CHANNELS = 65535
MAX_DIVISOR = 255
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _invalid(message: str) -> ParamInvalidError:
    return ParamInvalidError(f"{OP}: {message}")


def _int_array(name: str, array, lengths: tuple[int, ...], minimum: int | None
               ) -> tuple[int, ...]:
    """The values of an aclIntArray of an allowed length, each >= minimum (if given)."""
    if not isinstance(array, aclIntArray) or array.destroyed:
        raise _invalid(f"{name} must be a live aclIntArray, got {array!r}.")
    values = array.values
    if len(values) not in lengths:
        raise _invalid(f"{name} length must be one of {list(lengths)}, got {len(values)} "
                       f"({list(values)}).")
    if minimum is not None and any(v < minimum for v in values):
        rule = "> 0" if minimum == 1 else ">= 0"
        raise _invalid(f"{name} values must be {rule}, got {list(values)}.")
    return values


def _pair(values: tuple[int, ...], default: tuple[int, int]) -> tuple[int, int]:
    if len(values) == 0:
        return default
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def pooled_size(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """The forward pooling's output size along one axis."""
    span = size + 2 * pad - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def cube_rounding(dtype: int, cube_math_type: int, down_precision: str) -> int:
    """How the scaled gradient is rounded (pool.EXACT, ROUND_FP16 or ROUND_HF32) for a
    gradOutput dtype, a valid cubeMathType and the SoC's down-precision format."""
    if dtype != D.ACL_FLOAT or cube_math_type == KEEP_DTYPE:
        return pool.EXACT
    if cube_math_type == USE_FP16:
        return pool.ROUND_FP16
    if cube_math_type == USE_HF32:
        return pool.ROUND_HF32
    return pool.ROUND_FP16 if down_precision == "fp16" else pool.ROUND_HF32


def _operand(tensor: aclTensor) -> StridedOperand:
    strides = [s * tensor.itemsize for s in tensor.strides]
    if tensor.ndim == 3:
        strides = [0, *strides]
    return StridedOperand(tensor.region.buffer, KERNEL_CODE[tensor.dtype], tensor.byte_offset(),
                          tuple(strides))


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_, int, np.integer)):
        raise _invalid(f"{name} must be a bool, got {type(value).__name__} {value!r}.")
    return bool(value)


def _dtypes_and_formats(soc, library: bool, gradOutput, self, gradInput) -> None:  # noqa: N803
    """The dtype and format rules (the library compares only gradOutput's dtype with
    gradInput's and exempts self from the 4-D NCHW rule and from matching gradInput's
    format; ledger C7)."""
    checks.dtype_in(OP, soc, soc.float_dtypes(), gradOutput=gradOutput, self=self,
                    gradInput=gradInput)
    for name, tensor in (("gradOutput", gradOutput),) + ((("self", self),) if not library else ()):
        if tensor.dtype != gradInput.dtype:
            raise _invalid(f"{name} dtype {dtype_name(tensor.dtype)} must equal gradInput dtype "
                           f"{dtype_name(gradInput.dtype)}.")
    for name, tensor in (("gradOutput", gradOutput), ("self", self), ("gradInput", gradInput)):
        if tensor.format not in (F.ACL_FORMAT_NCHW, F.ACL_FORMAT_NCL):
            raise _invalid(f"{name} format must be NCHW or NCL, got {format_name(tensor.format)}.")
    four_d = ((("gradOutput", gradOutput), ("gradInput", gradInput)) if library
              else (("gradOutput", gradOutput), ("self", self), ("gradInput", gradInput)))
    for name, tensor in four_d:
        rank = gradOutput.ndim if library else tensor.ndim
        if rank == 4 and tensor.format != F.ACL_FORMAT_NCHW:
            raise _invalid(f"{name} is 4-D, so its format must be NCHW, got "
                           f"{format_name(tensor.format)}.")
    if not library and self.format != gradInput.format:
        raise _invalid(f"self format {format_name(self.format)} must equal gradInput format "
                       f"{format_name(gradInput.format)}.")


def _divisor(value, library: bool) -> int:
    try:
        divisor = operator.index(value)
    except TypeError:
        raise _invalid(f"divisorOverride must be an int, got {value!r}.") from None
    if isinstance(value, (bool, np.bool_)):
        raise _invalid(f"divisorOverride must be an int, got {value!r}.")
    low, high = (INT64_MIN, INT64_MAX) if library else (-MAX_DIVISOR, MAX_DIVISOR)
    if not low <= divisor <= high:
        what = "an int64" if library else f"in [-{MAX_DIVISOR}, {MAX_DIVISOR}]"
        raise _invalid(f"divisorOverride must be {what}, got {value!r}.")
    return divisor


def _expected_grad_shape(self, dims) -> list[int]:  # noqa: N803
    n, c, _, _, out_h, out_w = dims
    return [c, out_h, out_w] if self.ndim == 3 else [n, c, out_h, out_w]


def _check_grad_shape(gradOutput, self, dims, status_error=_invalid) -> None:  # noqa: N803
    expected = _expected_grad_shape(self, dims)
    if list(gradOutput.view_shape) != expected:
        raise status_error(f"gradOutput shape must be {expected} (N, C of self and the pooled "
                           f"H, W), got {list(gradOutput.view_shape)}.")


def _inner_nullptr(message: str) -> AclnnError:
    return AclnnError(f"{OP}: {message}", ACLNN_ERR_INNER_NULLPTR)


def _no_negative_padding(padding: tuple[int, int]) -> None:
    if min(padding) < 0:
        raise _invalid(f"padding values must be >= 0, got {list(padding)}.")


def _launch(gradOutput, gradInput, dims, window: graphs.Window, factors, scaling):  # noqa: N803
    count_include_pad, override = factors
    return pool.AvgPool2dBackwardLaunch(
        _operand(gradOutput), _operand(gradInput), dims,
        (*window.kernel, *window.stride, *window.padding, count_include_pad, override), scaling)


def _library_plan(soc, gradOutput, self, gradInput, window: graphs.Window, pooled_dims,  # noqa: N803
                  tensors) -> Plan:
    """After the library's CheckParams and empty test: the SoC's graph (see `_avgpool_graphs`),
    with the checks each branch makes on the way."""
    n, c = pooled_dims[:2]
    grad_shape = ((1, *gradOutput.view_shape) if gradOutput.ndim == 3
                  else tuple(gradOutput.view_shape))
    actual = (n, c, *pooled_dims[2:4], *grad_shape[2:])
    if grad_shape[:2] == (n, c) and graphs.is_global(window, actual):
        return Plan(steps=[graphs.global_step(gradOutput, gradInput, window)], tensors=tensors,
                    workspace_size=graphs.global_workspace(gradOutput, gradInput, window, actual))
    divisor = graphs.int32(window.divisor)
    if soc.name == "Ascend950":  # AvgPoolV2Grad; its tiling's shape check fails as 561103
        _no_negative_padding(window.padding)
        _check_grad_shape(gradOutput, self, pooled_dims, _inner_nullptr)
        launch = _launch(gradOutput, gradInput, pooled_dims, window,
                         (window.count_include_pad, divisor), pool.Scaling())
        return Plan(steps=[launch], tensors=tensors,
                    workspace_size=graphs.v2_workspace(gradOutput, self, gradInput, pooled_dims))
    cube = (graphs.cube_on_910b(window, pooled_dims) if soc.name in ("Ascend910B", "Ascend910_93")
            else True)
    if cube and not graphs.cube_divisor_in_range(window.divisor):  # Ascend910/310P
        raise _invalid(f"divisorOverride must be in [-{MAX_DIVISOR}, {MAX_DIVISOR}] on "
                       f"{soc.name}, got {window.divisor}.")
    _no_negative_padding(window.padding)  # the 3-D graph's check; the cube's answer: ours
    _check_grad_shape(gradOutput, self, pooled_dims)  # ours: the library's answer is undefined
    if cube:
        scaling, factors = graphs.cube_scaling(window, gradOutput.dtype, soc.name)
        workspace = graphs.cube_workspace(gradOutput, self, gradInput, window, pooled_dims)
    else:
        scaling, factors = pool.Scaling(divide=False), (window.count_include_pad, divisor)
        workspace = graphs.pool3d_workspace(gradOutput, self, gradInput, pooled_dims)
    launch = _launch(gradOutput, gradInput, pooled_dims, window, factors, scaling)
    return Plan(steps=[launch], tensors=tensors, workspace_size=workspace)


@workspace_api(OP)
def aclnnAvgPool2dBackwardGetWorkspaceSize(gradOutput, self, kernelSize, stride, padding,  # noqa: N802, N803
                                           ceilMode, countIncludePad, divisorOverride,
                                           cubeMathType, gradInput):
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, ex, ret = aclnnAvgPool2dBackwardGetWorkspaceSize(
    ...     gradOutput, self, kernel, stride, padding, False, True, 0, 1, gradInput)
    """
    checks.not_null(OP, gradOutput=gradOutput, self=self, kernelSize=kernelSize,
                    padding=padding, gradInput=gradInput)
    checks.live_tensors(OP, gradOutput=gradOutput, self=self, gradInput=gradInput)
    soc, library = current_soc(), library_contract()
    _dtypes_and_formats(soc, library, gradOutput, self, gradInput)
    for name, tensor in (("gradOutput", gradOutput), ("gradInput", gradInput)):
        if tensor.ndim not in (3, 4):
            raise _invalid(f"{name} must be 3-D (C, H, W) or 4-D (N, C, H, W), got "
                           f"{tensor.ndim}-D {list(tensor.view_shape)}.")
    if gradOutput.ndim != gradInput.ndim:
        raise _invalid(f"gradOutput and gradInput must both be 3-D or both 4-D, got "
                       f"{list(gradOutput.view_shape)} and {list(gradInput.view_shape)}.")
    k_h, k_w = _pair(_int_array("kernelSize", kernelSize, (1, 2), 1), (0, 0))
    stride_values = () if stride is None else _int_array("stride", stride, (0, 1, 2), 1)
    s_h, s_w = _pair(stride_values, (k_h, k_w))
    # the library checks padding's sign only in some graphs (below)
    pad_values = _int_array("padding", padding, (0, 1, 2) if library else (1, 2),
                            None if library else 0)
    if not pad_values:
        raise _invalid("padding must not be empty, got [].")
    p_h, p_w = _pair(pad_values, (0, 0))
    for axis, pad, kernel in (("H", p_h, k_h), ("W", p_w, k_w)):
        if 2 * pad > kernel:
            raise _invalid(f"padding must be at most half of kernelSize, got padding{axis}={pad} "
                           f"with kernelSize{axis}={kernel}.")
    ceil_mode = _flag("ceilMode", ceilMode)
    count_include_pad = _flag("countIncludePad", countIncludePad)
    cube_math_type = checks.int_choice(OP, "cubeMathType", cubeMathType, CUBE_MATH_TYPES)
    if (not library and gradOutput.dtype == D.ACL_FLOAT and not soc.cube_fp32  # ledger C8
            and cube_math_type in (KEEP_DTYPE, USE_HF32)):
        raise _invalid(f"cubeMathType {cube_math_type} ({CUBE_MATH_TYPES[cube_math_type]}) is not "
                       f"supported for FLOAT input on {soc.name}; use 1 "
                       f"(ALLOW_FP32_DOWN_PRECISION) or 2 (USE_FP16).")
    checks.shape_equals(OP, "gradInput", gradInput, self.view_shape, "self's shape")
    if library and 0 in (gradOutput.numel, self.numel, gradInput.numel):  # ledger C6
        return Plan(tensors=(gradOutput, self, gradInput))
    divisor = _divisor(divisorOverride, library)
    n, c, h, w = ((1, *self.view_shape) if self.ndim == 3 else self.view_shape)
    if not library and c > MAX_CHANNELS:  # ledger C5
        raise _invalid(f"self channels C must be <= {MAX_CHANNELS}, got {c}.")
    dims = (n, c, h, w, pooled_size(h, k_h, s_h, p_h, ceil_mode),
            pooled_size(w, k_w, s_w, p_w, ceil_mode))
    if not library:
        _check_grad_shape(gradOutput, self, dims)
        if gradOutput.numel == 0:
            raise _invalid(f"gradOutput must not be empty, got shape "
                           f"{list(gradOutput.view_shape)}.")
    checks.output_memory(OP, "gradInput", gradInput, False, library, gradOutput=gradOutput)

    tensors = (gradOutput, self, gradInput)
    window = graphs.Window((k_h, k_w), (s_h, s_w), (p_h, p_w), ceil_mode, count_include_pad,
                           divisor, cube_math_type)
    if library:
        return _library_plan(soc, gradOutput, self, gradInput, window, dims, tensors)
    if gradInput.numel == 0:
        return Plan(tensors=tensors)
    scaling = pool.Scaling(rounding=cube_rounding(gradOutput.dtype, cube_math_type,
                                                  soc.down_precision))
    return Plan(steps=[_launch(gradOutput, gradInput, dims, window,
                               (count_include_pad, divisor), scaling)], tensors=tensors)


aclnnAvgPool2dBackward = execute_api(OP)


def golden_rounding(dtype: int, self_shape, grad_shape, window: graphs.Window) -> int:
    """The rounding of the scaled gradient (pool.EXACT, ROUND_FP16 or ROUND_HF32) that the
    current contract and SoC apply to a valid call: the golden's cubeMathType step."""
    soc = current_soc()
    if not library_contract():
        return cube_rounding(dtype, window.cube_math_type, soc.down_precision)
    n, c, h, w = (1, *self_shape) if len(self_shape) == 3 else tuple(self_shape)
    return graphs.library_rounding(window, (n, c, h, w, *grad_shape[-2:]), dtype, soc.name)
