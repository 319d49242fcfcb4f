"""The tensor model: aclTensor, aclIntArray, aclScalar, their creation, getters and destruction.

An aclTensor is a view (dims, strides and offset in elements) on a storage (storage dims)
that starts at a device address. Creation proves the view lies inside the storage and the
storage inside one live allocation; otherwise it returns None and records why, so no later
step can read or write outside memory the runtime owns.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np

from .acl import _memory
from .acl._errmsg import set_recent_error
from .codes import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS
from .dtypes import (
    ACL_DTYPE,
    ITEMSIZE,
    NUMPY_DTYPE,
    aclDataType,
    aclFormat,
    dtype_name,
    format_name,
)

MAX_CREATE_RANK = 64


class aclTensor:  # noqa: N801 - the CANN name
    """A strided view on device memory; build it with `aclCreateTensor`."""

    __slots__ = ("view_shape", "dtype", "strides", "offset", "format", "storage_shape",
                 "addr", "region", "destroyed", "__weakref__")

    def __init__(self, view_shape, dtype, strides, offset, fmt, storage_shape, addr, region):
        self.view_shape: tuple[int, ...] = view_shape
        self.dtype = aclDataType(dtype)
        self.strides: tuple[int, ...] = strides
        self.offset: int = offset
        self.format = aclFormat(fmt)
        self.storage_shape: tuple[int, ...] = storage_shape
        self.addr: int | None = addr
        self.region: _memory.Region | None = region
        self.destroyed = False

    @property
    def ndim(self) -> int:
        """The view's rank."""
        return len(self.view_shape)

    @property
    def numel(self) -> int:
        """The number of elements of the view."""
        return _product(self.view_shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return ITEMSIZE[self.dtype]

    def is_live(self) -> bool:
        """Not destroyed, and its memory (if any) still allocated."""
        return not self.destroyed and (self.region is None or self.region.alive)

    def byte_offset(self) -> int:
        """Where the view's first element lies, in bytes from the start of its region."""
        return self.addr - self.region.addr + self.offset * self.itemsize

    def numpy_view(self) -> np.ndarray:
        """The view as a NumPy array sharing the device memory (empty views: a fresh array)."""
        dtype = NUMPY_DTYPE[self.dtype]
        if self.numel == 0:
            return np.empty(self.view_shape, dtype=dtype)
        start = self.byte_offset()
        first = self.region.buffer[start : start + self.itemsize].view(dtype)
        return np.lib.stride_tricks.as_strided(
            first, shape=self.view_shape, strides=[s * self.itemsize for s in self.strides])

    def __repr__(self) -> str:
        state = "destroyed" if self.destroyed else hex(self.addr or 0)
        return (f"aclTensor(shape={list(self.view_shape)}, dtype={dtype_name(self.dtype)}, "
                f"strides={list(self.strides)}, offset={self.offset}, "
                f"format={format_name(self.format)}, {state})")


class aclIntArray:  # noqa: N801 - the CANN name
    """A host array of int64 values (kernel sizes, strides, paddings)."""

    __slots__ = ("values", "destroyed")

    def __init__(self, values: tuple[int, ...]):
        self.values = values
        self.destroyed = False

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"aclIntArray({list(self.values)})"


class aclScalar:  # noqa: N801 - the CANN name
    """A host scalar with a data type."""

    __slots__ = ("value", "dtype", "destroyed")

    def __init__(self, value, dtype: aclDataType):
        self.value = value
        self.dtype = dtype
        self.destroyed = False

    def __repr__(self) -> str:
        return f"aclScalar({self.value!r}, {dtype_name(self.dtype)})"


def _product(values: Sequence[int]) -> int:
    total = 1
    for v in values:
        total *= v
    return total


class _Rejected(Exception):
    pass


def _int_list(name: str, values, allow_negative: bool) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise _Rejected(f"{name} must be a sequence of ints, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)):
            raise _Rejected(f"{name} must hold ints, got {values!r}")
        try:
            v = operator.index(v)
        except TypeError:
            raise _Rejected(f"{name} must hold ints, got {values!r}") from None
        if v < 0 and not allow_negative:
            raise _Rejected(f"{name} must not be negative, got {list(values)!r}")
        out.append(v)
    return tuple(out)


def _enum(name: str, enum, value):
    if isinstance(value, (bool, np.bool_)):
        raise _Rejected(f"{name} {value!r} is not a valid {enum.__name__}")
    try:
        return enum(operator.index(value))
    except (TypeError, ValueError):
        raise _Rejected(f"{name} {value!r} is not a valid {enum.__name__}") from None


def element_reach(shape: Sequence[int], strides: Sequence[int], offset: int) -> tuple[int, int]:
    """The lowest and highest element index a non-empty view touches."""
    low = high = offset
    for d, s in zip(shape, strides):
        if s < 0:
            low += (d - 1) * s
        else:
            high += (d - 1) * s
    return low, high


def _build_tensor(view_dims, data_type, stride, offset, fmt, storage_dims, addr) -> aclTensor:
    view = _int_list("viewDims", view_dims, allow_negative=False)
    if len(view) > MAX_CREATE_RANK:
        raise _Rejected(f"viewDims rank must be <= {MAX_CREATE_RANK}, got {len(view)}")
    dtype = _enum("dataType", aclDataType, data_type)
    strides = (_int_list("stride", stride, allow_negative=True) if stride is not None
               else tuple(_product(view[i + 1:]) for i in range(len(view))))
    if len(strides) != len(view):
        raise _Rejected(
            f"stride must have one entry per view dim ({len(view)}), got {list(strides)}")
    if (isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (int, np.integer))
            or offset < 0):
        raise _Rejected(f"offset must be a non-negative int, got {offset!r}")
    offset = int(offset)
    fmt = _enum("format", aclFormat, fmt)
    storage = _int_list("storageDims", storage_dims, allow_negative=False)
    itemsize = ITEMSIZE[dtype]
    storage_numel = _product(storage)
    if _product(view) > 0:
        low, high = element_reach(view, strides, offset)
        if low < 0 or high >= storage_numel:
            raise _Rejected(
                f"view (dims {list(view)}, strides {list(strides)}, offset {offset}) reaches "
                f"elements [{low}, {high}] outside its storage of {storage_numel} elements "
                f"(storageDims {list(storage)})")
    storage_bytes = storage_numel * itemsize
    if addr is None:
        if storage_bytes:
            raise _Rejected(f"tensorData is null but the storage holds {storage_bytes} bytes")
        return aclTensor(view, dtype, strides, offset, fmt, storage, None, None)
    if isinstance(addr, (bool, np.bool_)) or not isinstance(addr, (int, np.integer)):
        raise _Rejected(f"tensorData must be a device address (int), got {addr!r}")
    addr = int(addr)
    if addr % itemsize:
        raise _Rejected(f"tensorData {addr:#x} is not aligned to the element size {itemsize}")
    region = _memory.device_heap.find(addr, storage_bytes)
    if region is None:
        raise _Rejected(f"tensorData {addr:#x} + storage of {storage_bytes} bytes is not inside "
                        "one live device allocation")
    return aclTensor(view, dtype, strides, offset, fmt, storage, addr, region)


def aclCreateTensor(viewDims, dataType, stride, offset, format, storageDims, tensorData):  # noqa: A002, N802, N803
    """Create a tensor viewing device memory; None (and a recent error message) if rejected.

    Strides and offset are in elements; `stride=None` means contiguous. The view must lie
    inside the storage, and the storage inside one live allocation starting at `tensorData`.

    >>> t = aclCreateTensor([4, 2], ACL_FLOAT, [2, 1], 0, ACL_FORMAT_ND, [4, 2], ptr)
    """
    try:
        return _build_tensor(viewDims, dataType, stride, offset, format, storageDims, tensorData)
    except _Rejected as exc:
        set_recent_error(f"aclCreateTensor: ACLNN_ERR_PARAM_INVALID (161002): {exc}")
        return None


def tensor_over_array(array: np.ndarray, fmt: int = aclFormat.ACL_FORMAT_ND) -> aclTensor | None:
    """An aclTensor viewing a NumPy array's own memory (any strides, negative and zero
    included; no copy), or None when it cannot: a dtype with no aclDataType, an unaligned
    address, or a stride that is not a whole number of elements. The tensor's storage is
    exactly the bytes the view spans; it keeps the array alive."""
    dtype = ACL_DTYPE.get(array.dtype)
    itemsize = array.itemsize
    if dtype is None or not array.flags.aligned or any(s % itemsize for s in array.strides):
        return None
    view = tuple(int(d) for d in array.shape)
    strides = tuple(s // itemsize for s in array.strides)
    if array.size == 0:
        return aclTensor(view, dtype, strides, 0, fmt, (0,), None, None)
    region = _memory.borrowed_region(array)
    offset = (int(array.ctypes.data) - region.addr) // itemsize
    return aclTensor(view, dtype, strides, offset, fmt, (region.size // itemsize,),
                     region.addr, region)


# Called with each object destroyed, after it is marked so: the aclnn plan cache forgets
# the calls it recognises by their objects' identities alone (see `plan_cache.repeat`).
destroy_listeners: list[Callable[[object], None]] = []


def _destroy(kind, name: str, obj) -> int:
    if obj is None:
        return ACLNN_SUCCESS
    if not isinstance(obj, kind):
        set_recent_error(f"{name}: expected an {kind.__name__}, got {type(obj).__name__} {obj!r}")
        return ACLNN_ERR_PARAM_INVALID
    if obj.destroyed:
        set_recent_error(f"{name}: {obj!r} was already destroyed")
        return ACLNN_ERR_PARAM_INVALID
    obj.destroyed = True
    for listener in destroy_listeners:
        listener(obj)
    return ACLNN_SUCCESS


def aclDestroyTensor(tensor: aclTensor) -> int:  # noqa: N802
    """Destroy a tensor (its memory stays allocated); later use of it is rejected.

    >>> ret = aclnn.aclDestroyTensor(t)
    >>> aclnn.aclDestroyTensor(t)  # already destroyed: ACLNN_ERR_PARAM_INVALID
    161002
    """
    status = _destroy(aclTensor, "aclDestroyTensor", tensor)
    if status == ACLNN_SUCCESS and tensor is not None:
        tensor.region = None
    return status


def aclCreateIntArray(value, size: int | None = None) -> aclIntArray | None:  # noqa: N802
    """An aclIntArray of the first `size` ints of `value` (all of them if size is None).

    >>> kernel = aclnn.aclCreateIntArray([2, 2])
    >>> kernel
    aclIntArray([2, 2])
    """
    try:
        values = _int_list("value", value, allow_negative=True)
        if size is not None:
            size = operator.index(size)
            if not 0 <= size <= len(values):
                raise _Rejected(f"size must be in [0, {len(values)}], got {size!r}")
            values = values[:size]
    except (_Rejected, TypeError) as exc:
        set_recent_error(f"aclCreateIntArray: {exc}")
        return None
    return aclIntArray(values)


def aclDestroyIntArray(array: aclIntArray) -> int:  # noqa: N802
    """Destroy an aclIntArray.

    >>> ret = aclnn.aclDestroyIntArray(kernel)
    """
    return _destroy(aclIntArray, "aclDestroyIntArray", array)


def _scalar_value(value, dtype: aclDataType):
    """`value` as a Python number of `dtype`: floats round, but nothing else may change - an
    integer dtype takes only integers within its range (bool: 0/1, True/False), a real
    dtype no imaginary part, and a finite value must stay finite."""
    if dtype == aclDataType.ACL_COMPLEX32:
        return complex(value)
    source = np.array(value)
    if source.dtype.kind not in "biufc":
        if isinstance(value, int):
            raise ValueError("beyond 64-bit integers")
        raise TypeError(f"{type(value).__name__} is not a number")
    np_dtype = NUMPY_DTYPE[dtype]
    if source.dtype.kind == "c" and np_dtype.kind != "c" and source.imag != 0:
        raise ValueError(f"{dtype_name(dtype)} has no imaginary part")
    if np_dtype.kind in "biu":
        if not (np.isfinite(source) and source.real == np.round(source.real)):
            raise ValueError(f"{dtype_name(dtype)} holds integers only")
        low, high = (0, 1) if np_dtype.kind == "b" else (np.iinfo(np_dtype).min,
                                                          np.iinfo(np_dtype).max)
        if not low <= int(source.real) <= high:
            raise ValueError(f"{dtype_name(dtype)} holds [{low}, {high}]")
        return np.array(int(source.real)).astype(np_dtype).item()
    with np.errstate(all="ignore"):
        converted = source.astype(np_dtype) if np_dtype.kind == "c" else \
            source.real.astype(np_dtype)
    if np.isfinite(source) and not np.isfinite(converted):
        raise ValueError(f"beyond the range of {dtype_name(dtype)}")
    return converted.item()


def aclCreateScalar(value, dataType) -> aclScalar | None:  # noqa: N802, N803
    """An aclScalar holding `value` as `dataType` (floats round to it; a value the dtype
    cannot hold - a fraction for an integer dtype, out of range, an imaginary part for a
    real dtype - is rejected).

    >>> alpha = aclnn.aclCreateScalar(2, aclnn.ACL_FLOAT)
    >>> alpha
    aclScalar(2.0, DT_FLOAT)
    """
    try:
        dtype = _enum("dataType", aclDataType, dataType)
        converted = _scalar_value(value, dtype)
    except (_Rejected, TypeError, ValueError, OverflowError) as exc:
        set_recent_error(f"aclCreateScalar: cannot make a scalar of {value!r}: {exc}")
        return None
    return aclScalar(converted, dtype)


def aclDestroyScalar(scalar: aclScalar) -> int:  # noqa: N802
    """Destroy an aclScalar.

    >>> ret = aclnn.aclDestroyScalar(alpha)
    """
    return _destroy(aclScalar, "aclDestroyScalar", scalar)


def _live_tensor(name: str, tensor) -> int:
    if tensor is None:
        set_recent_error(f"{name}: tensor is null")
        return ACLNN_ERR_PARAM_NULLPTR
    if not isinstance(tensor, aclTensor) or tensor.destroyed:
        set_recent_error(f"{name}: expected a live aclTensor, got {tensor!r}")
        return ACLNN_ERR_PARAM_INVALID
    return ACLNN_SUCCESS


def aclGetViewShape(tensor: aclTensor) -> tuple[list[int] | None, int]:  # noqa: N802
    """(view dims, status).

    >>> shape, ret = aclnn.aclGetViewShape(t)
    >>> shape
    [4, 2]
    """
    status = _live_tensor("aclGetViewShape", tensor)
    return (list(tensor.view_shape) if status == ACLNN_SUCCESS else None), status


def aclGetViewStrides(tensor: aclTensor) -> tuple[list[int] | None, int]:  # noqa: N802
    """(view strides in elements, status).

    >>> strides, ret = aclnn.aclGetViewStrides(t)
    >>> strides
    [2, 1]
    """
    status = _live_tensor("aclGetViewStrides", tensor)
    return (list(tensor.strides) if status == ACLNN_SUCCESS else None), status


def aclGetViewOffset(tensor: aclTensor) -> tuple[int | None, int]:  # noqa: N802
    """(view offset in elements, status).

    >>> offset, ret = aclnn.aclGetViewOffset(t)
    >>> offset
    0
    """
    status = _live_tensor("aclGetViewOffset", tensor)
    return (tensor.offset if status == ACLNN_SUCCESS else None), status


def aclGetStorageShape(tensor: aclTensor) -> tuple[list[int] | None, int]:  # noqa: N802
    """(storage dims, status).

    >>> storage_shape, ret = aclnn.aclGetStorageShape(t)
    >>> storage_shape
    [4, 2]
    """
    status = _live_tensor("aclGetStorageShape", tensor)
    return (list(tensor.storage_shape) if status == ACLNN_SUCCESS else None), status


def aclGetDataType(tensor: aclTensor) -> tuple[int | None, int]:  # noqa: N802
    """(data type enum, status).

    >>> dtype, ret = aclnn.aclGetDataType(t)
    >>> dtype
    <aclDataType.ACL_FLOAT: 0>
    """
    status = _live_tensor("aclGetDataType", tensor)
    return (tensor.dtype if status == ACLNN_SUCCESS else None), status


def aclGetFormat(tensor: aclTensor) -> tuple[int | None, int]:  # noqa: N802
    """(format enum, status).

    >>> fmt, ret = aclnn.aclGetFormat(t)
    >>> fmt
    <aclFormat.ACL_FORMAT_ND: 2>
    """
    status = _live_tensor("aclGetFormat", tensor)
    return (tensor.format if status == ACLNN_SUCCESS else None), status
