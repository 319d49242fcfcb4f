"""Test support: device tensors built from NumPy arrays through the public API only.

Every allocation made here carries guard bytes before and after the tensor's storage;
`DeviceTensor.check_guards()` proves nothing outside the storage was written, and
`DeviceTensor.storage()` lets a test prove nothing outside the *view* was written.
"""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import ml_dtypes
import numpy as np
from numba import njit
from numba.core.registry import cpu_target

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

#: NumPy dtype of each short dtype name the validation tests use ("f32", "s8", "bool", ...).
NP_DTYPE = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f64": np.float64,
    "s8": np.int8,
    "u8": np.uint8,
    "s16": np.int16,
    "u16": np.uint16,
    "s32": np.int32,
    "u32": np.uint32,
    "s64": np.int64,
    "u64": np.uint64,
    "bool": np.bool_,
    "c64": np.complex64,
}
#: How the operators' error messages name each of those dtypes.
DT_NAME = {
    "f32": "DT_FLOAT",
    "f16": "DT_FLOAT16",
    "bf16": "DT_BF16",
    "f64": "DT_DOUBLE",
    "s8": "DT_INT8",
    "u8": "DT_UINT8",
    "s16": "DT_INT16",
    "u16": "DT_UINT16",
    "s32": "DT_INT32",
    "u32": "DT_UINT32",
    "s64": "DT_INT64",
    "u64": "DT_UINT64",
    "bool": "DT_BOOL",
    "c64": "DT_COMPLEX64",
}
#: SoC profiles whose operators accept BF16, and those that reject it.
SOCS_WITH_BF16 = ["Ascend910B", "Ascend910_93", "Ascend950"]
SOCS_WITHOUT_BF16 = ["Ascend910", "Ascend310P"]
#: A rank-9 shape (one more dimension than the operators allow).
NINE = (1, 1, 1, 1, 1, 1, 1, 1, 1)


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


class TensorMaker:
    """Creates device tensors and aclIntArrays for one test and releases them afterwards.

    `mk(shape, dtype, fill, fmt)` returns the aclTensor of a new contiguous DeviceTensor;
    `mk.device(tensor)` gives that DeviceTensor back. Tests may destroy what they made
    early (`destroy`, `destroy_array`); `release()` destroys the rest and frees every
    allocation. The `mk` fixture (tests/conftest.py) hands one out per test.
    """

    def __init__(self):
        self.made: list[DeviceTensor] = []
        self.arrays: list = []
        self.destroyed: set[int] = set()

    def __call__(self, shape=(2, 3), dtype="f32", fill=1, fmt: int = aclnn.ACL_FORMAT_ND):
        """A contiguous tensor of `shape` whose every element is `fill` (or broadcasts it).

        `dtype` is a key of `NP_DTYPE`; `fill` is cast to it like `ndarray.astype` does
        (so -3.0 wraps around in an unsigned dtype rather than raising).
        """
        arr = np.broadcast_to(np.asarray(fill).astype(NP_DTYPE[dtype]), tuple(shape))
        dt = DeviceTensor(np.ascontiguousarray(arr).reshape(-1), arr.shape, fmt=fmt)
        self.made.append(dt)
        return dt.tensor

    def array(self, values):
        """A new aclIntArray holding `values`."""
        arr = aclnn.aclCreateIntArray(list(values))
        assert arr is not None, aclnn.aclGetRecentErrMsg()
        self.arrays.append(arr)
        return arr

    def device(self, tensor) -> DeviceTensor:
        """The DeviceTensor behind an aclTensor this maker made."""
        return next(dt for dt in self.made if dt.tensor is tensor)

    def find(self, tensor) -> DeviceTensor | None:
        """The live DeviceTensor behind `tensor`, or None."""
        for dt in self.made:
            if dt.tensor is tensor and id(dt) not in self.destroyed:
                return dt
        return None

    def destroy(self, tensor) -> int:
        """Destroy `tensor` now (its storage stays until `release`); aclDestroyTensor's status."""
        dt = self.device(tensor)
        ret = aclnn.aclDestroyTensor(dt.tensor)
        self.destroyed.add(id(dt))
        return ret

    def destroy_array(self, array) -> int:
        """Destroy `array` now; aclDestroyIntArray's status."""
        ret = aclnn.aclDestroyIntArray(array)
        self.destroyed.add(id(array))
        return ret

    def check_guards(self) -> None:
        """Assert that the guard bytes of every tensor made are intact."""
        for dt in self.made:
            dt.check_guards()

    def release(self) -> None:
        """Destroy whatever was not destroyed yet and free every allocation."""
        for arr in self.arrays:
            if id(arr) not in self.destroyed:
                aclnn.aclDestroyIntArray(arr)
        for dt in self.made:
            if id(dt) not in self.destroyed:
                aclnn.aclDestroyTensor(dt.tensor)
            acl.rt.free(dt.ptr)


def shape_str(shape) -> str:
    """`shape` as the operators' messages print it: "[2, 3]"."""
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def rank_msg_ok(msg: str, shape) -> bool:
    """A rank rejection message names the rank 9 or the offending shape."""
    return "9" in msg or shape_str(shape) in msg


def check_rejected(op: str, code: int, result, needles=(), absent=()) -> str:
    """Assert that the phase-1 `result` (workspace size, executor, status) failed.

    The status is `code`, no executor came back, and the recent error message names `op`
    and every needle and none of `absent` (which would mean a later rule was checked
    first). Returns the message.
    """
    _, executor, ret = result
    msg = aclnn.aclGetRecentErrMsg()
    assert ret == code, f"status {ret}, message {msg!r}"
    assert executor is None
    assert op in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    for needle in absent:
        assert needle not in msg, f"{needle!r} unexpectedly in {msg!r} (check order)"
    return msg


def check_accepted(result):
    """Assert that the phase-1 `result` succeeded with an executor; (workspace size, executor)."""
    ws, executor, ret = result
    msg = aclnn.aclGetRecentErrMsg()
    assert ret == 0, f"status {ret}, message {msg!r}"
    assert executor is not None
    return ws, executor


def run_two_phase(get_workspace_size, execute, *args, stream=None) -> int:
    """Phase 1 with `args`, then phase 2 and synchronize; the first failing status."""
    ws_size, executor, ret = get_workspace_size(*args)
    if ret != 0:
        assert executor is None
        return ret
    return run_phase_two(execute, ws_size, executor, stream)


def run_phase_two(execute, ws_size: int, executor, stream=None) -> int:
    """Phase 2 with a workspace of the size phase 1 reported (none when 0), then
    synchronize; the first failing status."""
    workspace = None
    if ws_size > 0:
        workspace, ret = acl.rt.malloc(ws_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0
    try:
        ret = execute(workspace, ws_size, executor, stream)
        return ret if ret != 0 else acl.rt.synchronize_stream(stream)
    finally:
        if workspace is not None:
            acl.rt.free(workspace)


def mapped(fn, out_dtype=np.float32):
    """A compiled loop applying the scalar kernel function `fn` to every element of a
    1-D array, into a new array of `out_dtype` (kernel functions run only compiled)."""
    @njit
    def apply(values):
        out = np.empty(values.size, out_dtype)
        for i in range(values.size):
            out[i] = fn(values[i])
        return out
    return apply


def load_script(path) -> ModuleType:
    """The Python file `path` (a tool or example script, not in a package) as a module."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cached_assembly(dispatcher, signature) -> str:
    """The assembly (objdump's) of the machine code Numba's cache holds for `dispatcher`'s
    `signature` on this machine: the code this process runs, read without compiling it
    again (a kernel loaded from the cache keeps no assembly of its own)."""
    cache = dispatcher._cache
    key = cache._index_key(signature, cpu_target.target_context.codegen())
    data = cache._cache_file.load(key)
    assert data is not None, f"nothing cached for {dispatcher.__name__}{signature}"
    _, kind, (machine_code, _) = data[0]  # CompileResult._reduce: the library first
    assert kind == "object"
    with tempfile.NamedTemporaryFile(suffix=".o") as file:
        file.write(machine_code)
        file.flush()
        return subprocess.run(["objdump", "-d", "--no-show-raw-insn", file.name],
                              capture_output=True, text=True, check=True).stdout
