"""Test support: device tensors built from NumPy arrays through the public API only.

Every allocation made here carries guard bytes before and after the tensor's storage;
`DeviceTensor.check_guards()` proves nothing outside the storage was written, and
`DeviceTensor.storage()` lets a test prove nothing outside the *view* was written.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

import aclnn
from aclnn import acl

GUARD_BYTES = 64
GUARD_PATTERN = 0xA5

ACL_DTYPE_OF = {
    np.dtype(np.float32): aclnn.ACL_FLOAT,
    np.dtype(np.float16): aclnn.ACL_FLOAT16,
    np.dtype(ml_dtypes.bfloat16): aclnn.ACL_BF16,
    np.dtype(np.float64): aclnn.ACL_DOUBLE,
    np.dtype(np.int8): aclnn.ACL_INT8,
    np.dtype(np.uint8): aclnn.ACL_UINT8,
    np.dtype(np.int16): aclnn.ACL_INT16,
    np.dtype(np.uint16): aclnn.ACL_UINT16,
    np.dtype(np.int32): aclnn.ACL_INT32,
    np.dtype(np.uint32): aclnn.ACL_UINT32,
    np.dtype(np.int64): aclnn.ACL_INT64,
    np.dtype(np.uint64): aclnn.ACL_UINT64,
    np.dtype(np.bool_): aclnn.ACL_BOOL,
    np.dtype(np.complex64): aclnn.ACL_COMPLEX64,
    np.dtype(np.complex128): aclnn.ACL_COMPLEX128,
}
NUMPY_DTYPE_OF = {v: k for k, v in ACL_DTYPE_OF.items()}


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides, in elements, of `shape`."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(int(shape[i + 1]), 1)
    return strides


class DeviceTensor:
    """An aclTensor viewing `storage` (copied to a fresh device allocation).

    The allocation is `GUARD_BYTES | storage | GUARD_BYTES`; the guards hold a pattern.
    """

    def __init__(
        self,
        storage: np.ndarray,
        shape: Sequence[int],
        strides: Sequence[int] | None = None,
        offset: int = 0,
        fmt: int = aclnn.ACL_FORMAT_ND,
        acl_dtype: int | None = None,
    ):
        self.storage_host = np.ascontiguousarray(storage).reshape(-1)
        self.dtype = self.storage_host.dtype
        self.shape = [int(d) for d in shape]
        self.strides = contiguous_strides(shape) if strides is None else [int(s) for s in strides]
        self.offset = int(offset)
        self.acl_dtype = ACL_DTYPE_OF[self.dtype] if acl_dtype is None else acl_dtype
        self.nbytes = self.storage_host.nbytes
        total = self.nbytes + 2 * GUARD_BYTES
        self.ptr, ret = acl.rt.malloc(total, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0, ret
        image = np.full(total, GUARD_PATTERN, dtype=np.uint8)
        image[GUARD_BYTES : GUARD_BYTES + self.nbytes] = self.storage_host.view(np.uint8)
        ret = acl.rt.memcpy(
            self.ptr, total, acl.util.numpy_to_ptr(image), total, acl.ACL_MEMCPY_HOST_TO_DEVICE
        )
        assert ret == 0, ret
        self.total = total
        self.tensor = aclnn.aclCreateTensor(
            self.shape,
            self.acl_dtype,
            self.strides,
            self.offset,
            fmt,
            [self.storage_host.size],
            self.ptr + GUARD_BYTES,
        )
        assert self.tensor is not None, aclnn.aclGetRecentErrMsg()

    def image(self) -> np.ndarray:
        """The whole allocation, guards included, copied back to the host."""
        out = np.empty(self.total, dtype=np.uint8)
        ret = acl.rt.memcpy(
            acl.util.numpy_to_ptr(out), self.total, self.ptr, self.total,
            acl.ACL_MEMCPY_DEVICE_TO_HOST,
        )
        assert ret == 0, ret
        return out

    def storage(self) -> np.ndarray:
        """The storage (without guards) copied back to the host, in its dtype."""
        return self.image()[GUARD_BYTES : GUARD_BYTES + self.nbytes].view(self.dtype).copy()

    def view(self) -> np.ndarray:
        """The tensor's view of the storage, as a NumPy array (a copy)."""
        storage = self.storage()
        if any(d == 0 for d in self.shape):
            return np.empty(self.shape, dtype=self.dtype)
        itemsize = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            storage[self.offset :],
            shape=self.shape,
            strides=[s * itemsize for s in self.strides],
        ).copy()

    def check_guards(self) -> None:
        """Assert that the guard bytes around the storage are intact."""
        image = self.image()
        assert (image[:GUARD_BYTES] == GUARD_PATTERN).all(), "guard before storage overwritten"
        assert (image[GUARD_BYTES + self.nbytes :] == GUARD_PATTERN).all(), (
            "guard after storage overwritten"
        )

    def free(self) -> None:
        """Destroy the tensor and free its allocation."""
        aclnn.aclDestroyTensor(self.tensor)
        acl.rt.free(self.ptr)


def to_device(array: np.ndarray, fmt: int = aclnn.ACL_FORMAT_ND) -> DeviceTensor:
    """A contiguous device tensor holding `array`."""
    array = np.asarray(array)
    return DeviceTensor(array.reshape(-1), array.shape, fmt=fmt)


def empty_device(shape: Sequence[int], dtype, fill=0, fmt: int = aclnn.ACL_FORMAT_ND):
    """A contiguous device tensor of `shape` filled with `fill`."""
    return to_device(np.full(shape, fill, dtype=dtype), fmt=fmt)


def run_two_phase(get_workspace_size, execute, *args, stream=None) -> int:
    """Phase 1 with `args`, then phase 2 and synchronize; the first failing status."""
    ws_size, executor, ret = get_workspace_size(*args)
    if ret != 0:
        assert executor is None
        return ret
    workspace = None
    if ws_size > 0:
        workspace, r = acl.rt.malloc(ws_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert r == 0
    try:
        ret = execute(workspace, ws_size, executor, stream)
        if ret != 0:
            return ret
        return acl.rt.synchronize_stream(stream)
    finally:
        if workspace is not None:
            acl.rt.free(workspace)
