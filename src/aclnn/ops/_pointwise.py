"""Shared by the pointwise operators: tensors (and cast temporaries) as kernel operands."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..dtypes import ITEMSIZE, NUMPY_DTYPE
from ..dtypes import aclDataType as D
from ..kernels.bits import BF16, F16, F32
from ..kernels.layout import broadcast_strides
from ..kernels.pointwise import StridedOperand
from ..kernels.typed import VIEW_DTYPE
from ..tensor import aclTensor
from ._l0 import is_contiguous

KERNEL_CODE = {D.ACL_FLOAT: F32, D.ACL_FLOAT16: F16, D.ACL_BF16: BF16}

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
MEAN = 1


def operand(tensor: aclTensor, out_shape: Sequence[int]) -> StridedOperand:
    """`tensor` read in place, broadcast to `out_shape` (its dtype must be a kernel dtype)."""
    strides = [s * tensor.itemsize for s in tensor.strides]
    return StridedOperand(
        tensor.region.buffer, KERNEL_CODE[tensor.dtype], tensor.byte_offset(),
        tuple(broadcast_strides(tensor.view_shape, strides, out_shape)))


def cast_operand(tensor: aclTensor, dtype: int, out_shape: Sequence[int]) -> StridedOperand:
    """`tensor` converted to the kernel dtype `dtype` (a temporary the size of the tensor)."""
    array = np.ascontiguousarray(tensor.numpy_view().astype(NUMPY_DTYPE[dtype]))
    strides = [s for s in array.strides] if array.ndim else []
    raw = array.reshape(-1).view(np.uint8) if array.size else np.zeros(0, np.uint8)
    return StridedOperand(raw, KERNEL_CODE[dtype], 0,
                          tuple(broadcast_strides(array.shape, strides, out_shape)))


def numel(shape: Sequence[int]) -> int:
    """The number of elements of `shape`."""
    return math.prod(shape)


def flat_input(tensor: aclTensor, dtype: int, shape: Sequence[int] | None = None) -> np.ndarray:
    """Phase 2's read of an input as the library's graph feeds its kernel: the view cast to
    the kernel dtype `dtype` (l0op::Cast, round-to-nearest-even), broadcast to `shape` when
    given (l0op::BroadcastTo), contiguous and flat, as a typed view (`kernels.typed`)."""
    array = tensor.numpy_view()
    if tensor.dtype != dtype:
        array = array.astype(NUMPY_DTYPE[dtype])
    if shape is not None:
        array = np.broadcast_to(array, tuple(shape))
    return np.ascontiguousarray(array).reshape(-1).view(VIEW_DTYPE[KERNEL_CODE[dtype]])


def _cast_into(out: aclTensor, values: np.ndarray) -> None:
    """The library's Cast to out's dtype and ViewCopy: the flat `values` into out's view."""
    with np.errstate(over="ignore", invalid="ignore"):  # a Cast saturates to inf
        out.numpy_view()[...] = values.reshape(out.view_shape).astype(NUMPY_DTYPE[out.dtype])


class FlatOutput:
    """Where a kernel over flat operands writes gradInput: straight into it when it is
    contiguous, of the kernel dtype and shares no memory with an input; otherwise into a
    buffer of the library's own that `finish` copies into the view (ViewCopy, with the
    Cast to gradInput's dtype)."""

    def __init__(self, out: aclTensor, dtype: int, aliased: bool):
        self.out, self.dtype = out, dtype
        self.direct = (not aliased and out.dtype == dtype
                       and is_contiguous(out.view_shape, out.strides))

    def array(self) -> np.ndarray:
        """The flat typed array the kernel writes."""
        if self.direct:
            return self.out.numpy_view().reshape(-1).view(VIEW_DTYPE[KERNEL_CODE[self.dtype]])
        return np.empty(self.out.numel, VIEW_DTYPE[KERNEL_CODE[self.dtype]])

    def finish(self, result: np.ndarray) -> None:
        """Copy `result` (from `array`) into gradInput unless it was written in place."""
        if not self.direct:
            _cast_into(self.out, result.view(NUMPY_DTYPE[self.dtype]))


def staged_operand(out: aclTensor, dtype: int, shape: Sequence[int]):
    """An output operand of the kernel dtype `dtype` in a buffer of the library's own, and
    the step copying it into `out` (ViewCopy and the Cast to out's dtype); for an output
    that shares memory with an input, or whose dtype no kernel writes."""
    staged = np.zeros(max(numel(shape), 1) * ITEMSIZE[dtype], np.uint8)
    strides = [0] * len(shape)
    step = ITEMSIZE[dtype]
    for axis in reversed(range(len(shape))):
        strides[axis] = step
        step *= shape[axis]
    operand_ = StridedOperand(staged, KERNEL_CODE[dtype], 0, tuple(strides))

    def copy_out() -> None:
        _cast_into(out, staged[: numel(shape) * ITEMSIZE[dtype]].view(NUMPY_DTYPE[dtype]))

    return operand_, copy_out


def converting_launch(build, inputs: Sequence[aclTensor], dtype: int, shape: Sequence[int],
                      out: StridedOperand):
    """`build(*input_operands, out)` (a kernels.pointwise launch) over the inputs read in
    place; inputs of a dtype no kernel reads (integers, FLOAT64) are converted to the
    promoted `dtype` when the work runs, as CANN's Cast step does."""
    if all(t.dtype in KERNEL_CODE for t in inputs):
        return build(*(operand(t, shape) for t in inputs), out)

    def cast_then_run() -> None:
        converted = [operand(t, shape) if t.dtype in KERNEL_CODE else cast_operand(t, dtype, shape)
                     for t in inputs]
        build(*converted, out)()

    return cast_then_run


def output_operand(out: aclTensor, dtype: int, shape: Sequence[int], aliased: bool):
    """gradInput as the fused kernels' output operand, and the steps to run after the
    kernel: none when it is written in place, the copy out of a buffer of the library's own
    (`staged_operand`) when it shares memory with an input or no kernel writes its dtype."""
    if aliased or out.dtype not in KERNEL_CODE:
        staged, copy_out = staged_operand(out, dtype, shape)
        return staged, [copy_out]
    return operand(out, shape), []
