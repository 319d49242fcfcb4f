"""`acl.util`: NumPy arrays and raw addresses."""

from __future__ import annotations

import numpy as np

from ._memory import find_any, host_arrays


def numpy_to_ptr(array: np.ndarray) -> int:
    """The address of a contiguous NumPy array's data, usable as a host pointer in memcpy.

    The array stays usable as a host region for as long as it is alive.

    >>> host = np.zeros(16, dtype=np.float32)
    >>> host_ptr = acl.util.numpy_to_ptr(host)
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"numpy_to_ptr: expected a numpy.ndarray, got {type(array).__name__}")
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise ValueError("numpy_to_ptr: the array must be contiguous (use np.ascontiguousarray)")
    return host_arrays.register(array)


def ptr_to_numpy(ptr: int, shape, dtype) -> np.ndarray:
    """A NumPy array of `shape` and `dtype` viewing the live memory at `ptr` (no copy).

    >>> ret = acl.rt.memset(ptr, 64, 0, 64)
    >>> acl.util.ptr_to_numpy(ptr, (2, 2), np.float32)
    array([[0., 0.],
           [0., 0.]], dtype=float32)
    """
    try:
        dtype = np.dtype(dtype)
    except Exception as exc:  # NumPy parses dtype strings: even SyntaxError is possible
        raise TypeError(f"ptr_to_numpy: {dtype!r} is not a NumPy dtype ({exc})") from None
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if any(d < 0 for d in shape):
        raise ValueError(f"ptr_to_numpy: negative dimension in shape {list(shape)}")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    region = find_any(int(ptr), nbytes) if isinstance(ptr, (int, np.integer)) else None
    if region is None:
        raise ValueError(f"ptr_to_numpy: {ptr!r} + {nbytes} bytes is not inside live memory")
    return region.bytes_at(int(ptr), nbytes).view(dtype).reshape(shape)
