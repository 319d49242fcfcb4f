"""Data types and formats of the tensor model, with the real CANN enum values."""

from __future__ import annotations

from enum import IntEnum

import ml_dtypes
import numpy as np


class aclDataType(IntEnum):  # noqa: N801 - the CANN name
    """`aclDataType`: element types of an aclTensor. ACL_DT_UNDEFINED is accepted by
    aclCreateTensor (as the library does); every operator then rejects it (161002)."""

    ACL_DT_UNDEFINED = -1
    ACL_FLOAT = 0
    ACL_FLOAT16 = 1
    ACL_INT8 = 2
    ACL_INT32 = 3
    ACL_UINT8 = 4
    ACL_INT16 = 6
    ACL_UINT16 = 7
    ACL_UINT32 = 8
    ACL_INT64 = 9
    ACL_UINT64 = 10
    ACL_DOUBLE = 11
    ACL_BOOL = 12
    ACL_COMPLEX64 = 16
    ACL_COMPLEX128 = 17
    ACL_BF16 = 27
    ACL_COMPLEX32 = 33


class aclFormat(IntEnum):  # noqa: N801 - the CANN name
    """`aclFormat`: the layout an aclTensor declares."""

    ACL_FORMAT_NCHW = 0
    ACL_FORMAT_NHWC = 1
    ACL_FORMAT_ND = 2
    ACL_FORMAT_NC1HWC0 = 3
    ACL_FORMAT_FRACTAL_Z = 4
    ACL_FORMAT_NC1HWC0_C04 = 12
    ACL_FORMAT_HWCN = 16
    ACL_FORMAT_NDHWC = 27
    ACL_FORMAT_FRACTAL_NZ = 29
    ACL_FORMAT_NCDHW = 30
    ACL_FORMAT_NDC1HWC0 = 32
    ACL_FORMAT_FRACTAL_Z_3D = 33
    ACL_FORMAT_NC = 35
    ACL_FORMAT_NCL = 47


D = aclDataType

ITEMSIZE = {
    D.ACL_FLOAT: 4, D.ACL_FLOAT16: 2, D.ACL_INT8: 1, D.ACL_INT32: 4, D.ACL_UINT8: 1,
    D.ACL_INT16: 2, D.ACL_UINT16: 2, D.ACL_UINT32: 4, D.ACL_INT64: 8, D.ACL_UINT64: 8,
    D.ACL_DOUBLE: 8, D.ACL_BOOL: 1, D.ACL_COMPLEX64: 8, D.ACL_COMPLEX128: 16, D.ACL_BF16: 2,
    D.ACL_COMPLEX32: 4, D.ACL_DT_UNDEFINED: 1,
}

NUMPY_DTYPE = {
    D.ACL_FLOAT: np.dtype(np.float32), D.ACL_FLOAT16: np.dtype(np.float16),
    D.ACL_INT8: np.dtype(np.int8), D.ACL_INT32: np.dtype(np.int32),
    D.ACL_UINT8: np.dtype(np.uint8), D.ACL_INT16: np.dtype(np.int16),
    D.ACL_UINT16: np.dtype(np.uint16), D.ACL_UINT32: np.dtype(np.uint32),
    D.ACL_INT64: np.dtype(np.int64), D.ACL_UINT64: np.dtype(np.uint64),
    D.ACL_DOUBLE: np.dtype(np.float64), D.ACL_BOOL: np.dtype(np.bool_),
    D.ACL_COMPLEX64: np.dtype(np.complex64), D.ACL_COMPLEX128: np.dtype(np.complex128),
    D.ACL_BF16: np.dtype(ml_dtypes.bfloat16),
    D.ACL_COMPLEX32: np.dtype([("real", np.float16), ("imag", np.float16)]),
}

ACL_DTYPE = {np_dtype: acl for acl, np_dtype in NUMPY_DTYPE.items()
             if acl != D.ACL_COMPLEX32}  # NumPy dtype -> aclDataType (no complex32 in NumPy)

_DT_NAMES = {D.ACL_FLOAT: "DT_FLOAT", D.ACL_BF16: "DT_BF16", D.ACL_DT_UNDEFINED: "DT_UNDEFINED"}


def dtype_name(dtype: int) -> str:
    """CANN's name of a data type in messages: DT_FLOAT, DT_FLOAT16, DT_BF16, DT_INT32, ..."""
    try:
        member = D(dtype)
    except ValueError:
        return f"<unknown dtype {dtype!r}>"
    return _DT_NAMES.get(member, "DT_" + member.name.removeprefix("ACL_"))


def format_name(fmt: int) -> str:
    """The name of a format in messages: NCHW, ND, NCL, ..."""
    try:
        return aclFormat(fmt).name.removeprefix("ACL_FORMAT_")
    except ValueError:
        return f"<unknown format {fmt!r}>"


def is_floating(dtype: int) -> bool:
    """Whether `dtype` is a real floating type."""
    return dtype in (D.ACL_FLOAT, D.ACL_FLOAT16, D.ACL_BF16, D.ACL_DOUBLE)


def is_complex(dtype: int) -> bool:
    """Whether `dtype` is a complex type."""
    return dtype in (D.ACL_COMPLEX32, D.ACL_COMPLEX64, D.ACL_COMPLEX128)
