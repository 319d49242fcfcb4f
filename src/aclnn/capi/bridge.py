"""The Python side of the C API: one function per function of `src/bridge.h`.

Each turns C arguments into the Python API's (handles into the objects they name, C
strings and arrays into str and lists, NULL into None), calls the Python API - the same
functions, objects and per-thread error messages a Python caller uses - and writes its
outputs through the C caller's pointers. `attach` binds them to the compiled library when
the embedded interpreter starts.

C memory is read only after `aclnn_host_mapped` (shim.c) says it is mapped, so a junk
pointer gets a status, never a crash. A bug here is caught by cffi (or by shim.c, for
the calls it makes directly) and becomes an internal-error status with a message, never
an exception escaping into C.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
from collections.abc import Callable

import numpy as np

from .. import acl
from ..acl import _codes as rt_codes
from ..acl import rt
from ..acl._device import CONTRACT_ENV, SOC_ENV
from ..acl._errmsg import get_recent_error, set_recent_error
from ..acl._memory import Region, device_heap, raw_host_region
from ..codes import ACLNN_ERR_INNER, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS
from ..dtypes import NUMPY_DTYPE, aclDataType
from ..framework.executor import (
    aclDestroyAclOpExecutor,
    aclSetAclOpExecutorRepeatable,
)
from ..ops import avg_pool2d_backward, gelu_backward_v2, l1_loss_backward, smooth_l1_loss_backward
from ..tensor import (
    aclCreateIntArray,
    aclCreateScalar,
    aclCreateTensor,
    aclDestroyIntArray,
    aclDestroyScalar,
    aclDestroyTensor,
    aclGetDataType,
    aclGetFormat,
    aclGetStorageShape,
    aclGetViewOffset,
    aclGetViewShape,
    aclGetViewStrides,
)
from .handles import HandleTable

C_HOST_HINT = "; a host address must be mapped memory of the program, outside device memory"
STRING_LIMIT = 256  # the longest C string argument read (approximate is "none" or "tanh")
PAGE = mmap.PAGESIZE

ffi = lib = None  # the compiled library's, set by `attach`
objects = HandleTable()
_exports: list[tuple[Callable, object]] = []
_thread = threading.local()
_soc_names: dict[str, object] = {}


def export(error) -> Callable[[Callable], Callable]:
    """Register a function of bridge.h (same name); a bug in it makes the call return
    `error` (None: NULL or 0) with an internal-error message."""
    def register(function: Callable) -> Callable:
        _exports.append((function, error))
        return function
    return register


def internal_error(exc_type, exc_value, traceback) -> None:
    """A bug in a bridge function: its exception as this thread's recent error message
    (cffi's onerror, and shim.c's for the functions it calls directly)."""
    set_recent_error(f"aclnn C API: internal error: {exc_type.__name__}: {exc_value}")


def attach(module_ffi, module_lib) -> None:
    """Bind every exported function to the compiled library (run once, at start-up)."""
    global ffi, lib
    ffi, lib = module_ffi, module_lib
    _DESTROY.update({
        lib.ACLNN_TENSOR: aclDestroyTensor, lib.ACLNN_INT_ARRAY: aclDestroyIntArray,
        lib.ACLNN_SCALAR: aclDestroyScalar, lib.ACLNN_EXECUTOR: aclDestroyAclOpExecutor})
    _DIMS.update({lib.ACLNN_VIEW_SHAPE: (aclGetViewShape, "viewDims", "viewDimsNum"),
                  lib.ACLNN_STORAGE_SHAPE: (aclGetStorageShape, "storageDims", "storageDimsNum"),
                  lib.ACLNN_VIEW_STRIDES: (aclGetViewStrides, "stridesValue", "stridesNum")})
    _ATTRIBUTES.update({lib.ACLNN_VIEW_OFFSET: (aclGetViewOffset, "offset"),
                        lib.ACLNN_FORMAT: (aclGetFormat, "format"),
                        lib.ACLNN_DATA_TYPE: (aclGetDataType, "dataType")})
    _PHASE_TWO.update({
        lib.ACLNN_OP_SMOOTH_L1_LOSS_BACKWARD: smooth_l1_loss_backward.aclnnSmoothL1LossBackward,
        lib.ACLNN_OP_L1_LOSS_BACKWARD: l1_loss_backward.aclnnL1LossBackward,
        lib.ACLNN_OP_GELU_BACKWARD_V2: gelu_backward_v2.aclnnGeluBackwardV2,
        lib.ACLNN_OP_AVG_POOL2D_BACKWARD: avg_pool2d_backward.aclnnAvgPool2dBackward})
    for function, error in _exports:
        ffi.def_extern(name=function.__name__, error=error, onerror=internal_error)(function)


# --- reading C memory --------------------------------------------------------------------

class Unreadable:
    """A C array or string argument whose memory is not mapped: every Python check
    rejects it, with this as the value it got."""

    def __init__(self, what: str, address: int):
        self.what, self.address = what, address

    def __repr__(self) -> str:
        return f"<{self.what} at {self.address:#x}: not readable memory>"


def _address(pointer) -> int:
    return int(ffi.cast("uintptr_t", pointer))


def _int64s(pointer, count: int):
    """The `count` int64 values at `pointer`: a list, None for NULL, or Unreadable."""
    if pointer == ffi.NULL:
        return [] if count == 0 else None
    if not lib.aclnn_host_mapped(_address(pointer), count * 8):
        return Unreadable(f"int64_t[{count}]", _address(pointer))
    return ffi.unpack(pointer, count)


def _text(pointer):
    """The C string at `pointer` (at most STRING_LIMIT bytes): str, None for NULL, or
    Unreadable."""
    if pointer == ffi.NULL:
        return None
    address = _address(pointer)
    readable = next((n for n in (STRING_LIMIT, PAGE - address % PAGE)
                     if lib.aclnn_host_mapped(address, n)), 0)
    if not readable:
        return Unreadable("char *", address)
    return ffi.string(pointer, readable).decode("utf-8", "replace")


def _scalar_value(pointer, dtype: int):
    """The value of `dtype` at `pointer` (None for NULL, 0 for a dtype aclCreateScalar
    will reject anyway)."""
    if pointer == ffi.NULL:
        return None
    try:
        np_dtype = NUMPY_DTYPE[aclDataType(dtype)]
    except ValueError:
        return 0
    address = _address(pointer)
    if not lib.aclnn_host_mapped(address, np_dtype.itemsize):
        return Unreadable(f"{np_dtype.name} value", address)
    value = np.frombuffer(ffi.buffer(pointer, np_dtype.itemsize), np_dtype)[0]
    if dtype == aclDataType.ACL_COMPLEX32:
        return complex(float(value["real"]), float(value["imag"]))
    return value.item()


def _c_host_region(address: int, nbytes: int) -> Region | None:
    """The host side of a C program's memcpy: any mapped memory outside device memory."""
    if not lib.aclnn_host_mapped(address, nbytes) or device_heap.overlaps(address, nbytes):
        return None
    return raw_host_region(address, nbytes)


def _fail(status: int, message: str) -> int:
    set_recent_error(message)
    return status


def _null_out(function: str, **outputs) -> str | None:
    """The message for the first NULL out-parameter, or None if there is none."""
    for name, pointer in outputs.items():
        if pointer == ffi.NULL:
            return f"{function}: {name} must not be null, got NULL."
    return None


@export(ACLNN_ERR_INNER)
def aclnn_py_fail(status: int, message) -> int:
    """A failure the C side found: record its message for this thread."""
    return _fail(status, ffi.string(message).decode())


@export(None)
def aclnn_py_recent_err_msg():
    """This thread's most recent failure message as a C string; NULL if there is none.
    The string stays valid until this thread's next call."""
    message = get_recent_error()
    if not message:
        return ffi.NULL
    _thread.message = ffi.new("char[]", message.encode())
    return _thread.message


@export(None)
def aclnn_py_enter_thread() -> None:
    """Nothing: a C thread's first crossing through cffi, which gives the thread a Python
    thread state it keeps until the thread ends (shim.c's aclnn_enter)."""


# --- runtime -------------------------------------------------------------------------------

RUNTIME_ERROR = rt_codes.ACL_ERROR_RT_INTERNAL_ERROR


@export(RUNTIME_ERROR)
def aclnn_py_init(config_path) -> int:
    """aclInit."""
    return acl.init(_text(config_path))


@export(RUNTIME_ERROR)
def aclnn_py_finalize() -> int:
    """aclFinalize."""
    return acl.finalize()


def _sync_environment(*names: str) -> None:
    """Copy the C program's current values of `names` into os.environ (Python's copy was
    taken when the interpreter started; the program may have called setenv since)."""
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    for name in names:
        value = libc.getenv(name.encode())
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value.decode(errors="replace")


@export(RUNTIME_ERROR)
def aclnn_py_set_device(device_id: int) -> int:
    """aclrtSetDevice: reads ACLNN_SOC and ACLNN_CONTRACT from the program's environment."""
    _sync_environment(SOC_ENV, CONTRACT_ENV)
    return rt.set_device(device_id)


@export(RUNTIME_ERROR)
def aclnn_py_reset_device(device_id: int) -> int:
    """aclrtResetDevice."""
    return rt.reset_device(device_id)


def _output(function: str, out, name: str, call: Callable[[], tuple[int, int]],
            convert: Callable[[int], int] = int) -> int:
    """Run the pyACL `call` (returning value, status) and write its value through `out`;
    a NULL `out` is an invalid parameter and `call` does not run."""
    if out == ffi.NULL:
        return _fail(rt_codes.ACL_ERROR_INVALID_PARAM, f"{function}: {name} must not be null.")
    value, status = call()
    if status == rt_codes.ACL_SUCCESS:
        out[0] = convert(value)
    return status


@export(RUNTIME_ERROR)
def aclnn_py_get_device(device_id) -> int:
    """aclrtGetDevice."""
    return _output("aclrtGetDevice", device_id, "deviceId", rt.get_device)


@export(RUNTIME_ERROR)
def aclnn_py_get_device_count(count) -> int:
    """aclrtGetDeviceCount."""
    return _output("aclrtGetDeviceCount", count, "count", rt.get_device_count)


@export(RUNTIME_ERROR)
def aclnn_py_synchronize_device() -> int:
    """aclrtSynchronizeDevice."""
    return rt.synchronize_device()


@export(None)
def aclnn_py_soc_name():
    """aclrtGetSocName: a C string that lives as long as the process."""
    name = acl.get_soc_name()
    if name not in _soc_names:
        _soc_names[name] = ffi.new("char[]", name.encode())
    return _soc_names[name]


@export(RUNTIME_ERROR)
def aclnn_py_create_stream(stream) -> int:
    """aclrtCreateStream."""
    return _output("aclrtCreateStream", stream, "stream", rt.create_stream, objects.add)


@export(RUNTIME_ERROR)
def aclnn_py_destroy_stream(stream: int) -> int:
    """aclrtDestroyStream."""
    status = rt.destroy_stream(objects.lookup(stream))
    if status == rt_codes.ACL_SUCCESS:
        objects.retire(stream)
    return status


def aclnn_py_synchronize_stream(stream: int) -> int:
    """aclrtSynchronizeStream (called directly, see bridge.h)."""
    return rt.synchronize_stream(objects.lookup(stream))


@export(RUNTIME_ERROR)
def aclnn_py_malloc(address, size: int, policy: int) -> int:
    """aclrtMalloc."""
    return _output("aclrtMalloc", address, "devPtr", lambda: rt.malloc(size, policy))


@export(RUNTIME_ERROR)
def aclnn_py_free(address: int) -> int:
    """aclrtFree."""
    return rt.free(address)


@export(RUNTIME_ERROR)
def aclnn_py_malloc_host(address, size: int) -> int:
    """aclrtMallocHost."""
    return _output("aclrtMallocHost", address, "hostPtr", lambda: rt.malloc_host(size))


@export(RUNTIME_ERROR)
def aclnn_py_free_host(address: int) -> int:
    """aclrtFreeHost."""
    return rt.free_host(address)


@export(RUNTIME_ERROR)
def aclnn_py_memcpy(dst: int, dst_max: int, src: int, count: int, kind: int) -> int:
    """aclrtMemcpy: the host side is the C program's own memory."""
    return rt.copy_memory(dst, dst_max, src, count, kind, _c_host_region, C_HOST_HINT)


@export(RUNTIME_ERROR)
def aclnn_py_memset(address: int, max_count: int, value: int, count: int) -> int:
    """aclrtMemset."""
    return rt.memset(address, max_count, value, count)


# --- objects -------------------------------------------------------------------------------

def _handle(obj) -> int:
    """A new handle for a created object; 0 (NULL) for None."""
    return 0 if obj is None else objects.add(obj)


@export(None)
def aclnn_py_create_tensor(view_dims, view_rank, dtype, strides, offset, fmt, storage_dims,
                           storage_rank, address) -> int:
    """aclCreateTensor (a NULL stride means contiguous)."""
    stride = None if strides == ffi.NULL else _int64s(strides, view_rank)
    return _handle(aclCreateTensor(_int64s(view_dims, view_rank), dtype, stride, offset, fmt,
                                   _int64s(storage_dims, storage_rank), address or None))


@export(None)
def aclnn_py_create_int_array(values, size: int) -> int:
    """aclCreateIntArray."""
    return _handle(aclCreateIntArray(_int64s(values, size)))


@export(None)
def aclnn_py_create_scalar(value, dtype: int) -> int:
    """aclCreateScalar."""
    return _handle(aclCreateScalar(_scalar_value(value, dtype), dtype))


_DESTROY: dict[int, Callable[[object], int]] = {}  # kind -> destroy function, set by `attach`


@export(ACLNN_ERR_INNER)
def aclnn_py_destroy(handle: int, kind: int) -> int:
    """aclDestroyTensor, aclDestroyIntArray, aclDestroyScalar, aclDestroyAclOpExecutor."""
    status = _DESTROY[kind](objects.lookup(handle))
    if status == ACLNN_SUCCESS:
        objects.retire(handle)
    return status


@export(ACLNN_ERR_INNER)
def aclnn_py_set_repeatable(executor: int) -> int:
    """aclSetAclOpExecutorRepeatable."""
    return aclSetAclOpExecutorRepeatable(objects.lookup(executor))


_DIMS: dict[int, tuple[Callable, str, str]] = {}  # which -> getter, out names; set by `attach`
_ATTRIBUTES: dict[int, tuple[Callable, str]] = {}


@export(ACLNN_ERR_INNER)
def aclnn_py_tensor_dims(tensor: int, which: int, dims, capacity: int, rank) -> int:
    """aclGetViewShape, aclGetStorageShape, aclGetViewStrides: up to `capacity` values
    into `dims` (shim.c copies them into the array it returns)."""
    getter, dims_name, rank_name = _DIMS[which]
    values, status = getter(objects.lookup(tensor))
    if status != ACLNN_SUCCESS:
        return status
    message = _null_out(getter.__name__, **{dims_name: dims, rank_name: rank})
    if message:
        return _fail(ACLNN_ERR_PARAM_NULLPTR, message)
    if len(values) > capacity:
        return _fail(ACLNN_ERR_INNER, f"{getter.__name__}: {len(values)} dims, more than "
                     f"the C API's {capacity}.")
    dims[0:len(values)] = values
    rank[0] = len(values)
    return ACLNN_SUCCESS


@export(ACLNN_ERR_INNER)
def aclnn_py_tensor_attribute(tensor: int, which: int, value) -> int:
    """aclGetViewOffset, aclGetFormat, aclGetDataType."""
    getter, name = _ATTRIBUTES[which]
    result, status = getter(objects.lookup(tensor))
    if status != ACLNN_SUCCESS:
        return status
    message = _null_out(getter.__name__, **{name: value})
    if message:
        return _fail(ACLNN_ERR_PARAM_NULLPTR, message)
    value[0] = int(result)
    return ACLNN_SUCCESS


# --- operators (called directly by shim.c, see bridge.h) ------------------------------------

def _planned(workspace_size: int, result: tuple) -> int:
    """Phase 1's result for the C side (bridge.h): its executor's new handle on success,
    else its status; a workspace size other than 0 is written into the uint64_t at the
    address `workspace_size` (the C side's starts at 0)."""
    size, executor, status = result
    if status:
        return status
    if size:
        ffi.cast("uint64_t *", workspace_size)[0] = size
    return objects.add(executor)


_last_beta: list = [None]  # the float object of SmoothL1's previous C call


def aclnn_py_smooth_l1_loss_backward(grad_out, self, target, reduction, beta, grad_input,
                                     workspace_size) -> int:
    """aclnnSmoothL1LossBackwardGetWorkspaceSize. `beta` is a new Python float at every
    call; one equal to the previous call's, and not zero (-0.0 == 0.0) or NaN, is passed
    as that call's object, so that the plan cache tells a repeated call by its arguments'
    identities (`PlanCache.repeat`), sooner than by their values: phase 1 took 7.1 us
    against 8.8 (a 2 GHz AMD EPYC; 7.5 with this test in a function of its own)."""
    last = _last_beta[0]
    if beta == last and beta:
        beta = last
    else:
        _last_beta[0] = beta
    look = objects.lookup
    return _planned(workspace_size,
                    smooth_l1_loss_backward.aclnnSmoothL1LossBackwardGetWorkspaceSize(
                        look(grad_out), look(self), look(target), reduction, beta,
                        look(grad_input)))


def aclnn_py_l1_loss_backward(grad_output, self, target, reduction, grad_input,
                              workspace_size) -> int:
    """aclnnL1LossBackwardGetWorkspaceSize."""
    look = objects.lookup
    return _planned(workspace_size, l1_loss_backward.aclnnL1LossBackwardGetWorkspaceSize(
        look(grad_output), look(self), look(target), reduction, look(grad_input)))


def aclnn_py_gelu_backward_v2(grad_output, self, approximate, grad_input,
                              workspace_size) -> int:
    """aclnnGeluBackwardV2GetWorkspaceSize."""
    look = objects.lookup
    return _planned(workspace_size, gelu_backward_v2.aclnnGeluBackwardV2GetWorkspaceSize(
        look(grad_output), look(self), _text(ffi.cast("const char *", approximate)),
        look(grad_input)))


def aclnn_py_avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad, divisor_override, cube_math_type, grad_input,
                                 workspace_size) -> int:
    """aclnnAvgPool2dBackwardGetWorkspaceSize."""
    look = objects.lookup
    return _planned(workspace_size, avg_pool2d_backward.aclnnAvgPool2dBackwardGetWorkspaceSize(
        look(grad_output), look(self), look(kernel_size), look(stride), look(padding), ceil_mode,
        count_include_pad, divisor_override, cube_math_type, look(grad_input)))


_PHASE_TWO: dict[int, Callable] = {}  # op code -> phase 2, set by `attach`


def aclnn_py_execute(op: int, workspace: int, workspace_size: int, executor: int,
                     stream: int) -> int:
    """Phase 2 of every operator; an executor that has run and is not repeatable is
    released (its handle retired). Phase 2 succeeds only with a live executor, which it
    then has consumed."""
    found = objects.lookup(executor)
    status = _PHASE_TWO[op](workspace or None, workspace_size, found, objects.lookup(stream))
    if status == ACLNN_SUCCESS and not found.repeatable:
        objects.retire(executor)
    return status
