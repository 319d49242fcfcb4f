"""Shared by the pointwise operators: tensors (and cast temporaries) as kernel operands."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..dtypes import NUMPY_DTYPE
from ..dtypes import aclDataType as D
from ..kernels.bits import BF16, F16, F32
from ..kernels.layout import broadcast_strides
from ..kernels.pointwise import StridedOperand
from ..tensor import aclTensor

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
