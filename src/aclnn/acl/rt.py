"""`acl.rt`: devices, memory, memcpy and streams, pyACL style (outputs first, status last)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import _codes as c
from ._device import (
    CONTRACT_ENV,
    CONTRACTS,
    DEVICE_COUNT,
    SOC_ENV,
    SOC_NAMES,
    contract_from_environment,
    soc_from_environment,
    state,
)
from ._errmsg import set_recent_error
from ._memory import Region, device_heap, find_host, host_heap
from ._streams import streams


def _fail(status: int, message: str) -> int:
    set_recent_error(message)
    return status


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


# --- devices -----------------------------------------------------------------------------

def set_device(device_id: int) -> int:
    """Make `device_id` current; (re)reads the SoC from ACLNN_SOC and the contract (SPEC §14:
    "library", the default, or "documented") from ACLNN_CONTRACT.

    >>> ret = acl.rt.set_device(0)
    """
    if not _is_int(device_id) or not 0 <= device_id < DEVICE_COUNT:
        return _fail(c.ACL_ERROR_RT_INVALID_DEVICEID,
                     f"set_device: device_id must be in [0, {DEVICE_COUNT}), got {device_id!r}")
    soc = soc_from_environment()
    if soc is None:
        return _fail(c.ACL_ERROR_INVALID_PARAM,
                     f"set_device: {SOC_ENV} must be one of {list(SOC_NAMES)}")
    contract = contract_from_environment()
    if contract is None:
        return _fail(c.ACL_ERROR_INVALID_PARAM,
                     f"set_device: {CONTRACT_ENV} must be one of {list(CONTRACTS)}")
    with state.lock:
        state.device = int(device_id)
        state.soc_name = soc
        state.contract = contract
    return c.ACL_SUCCESS


def reset_device(device_id: int) -> int:
    """Release the device: pending work on every stream is completed first.

    >>> ret = acl.rt.reset_device(0)
    """
    if not _is_int(device_id) or not 0 <= device_id < DEVICE_COUNT:
        return _fail(c.ACL_ERROR_RT_INVALID_DEVICEID,
                     f"reset_device: device_id must be in [0, {DEVICE_COUNT}), got {device_id!r}")
    synchronize_device()
    with state.lock:
        if state.device == device_id:
            state.device = None
    return c.ACL_SUCCESS


def get_device() -> tuple[int, int]:
    """The current device id, or an error status if none was set.

    >>> ret = acl.rt.set_device(0)
    >>> device_id, ret = acl.rt.get_device()
    >>> device_id
    0
    """
    if state.device is None:
        return -1, _fail(c.ACL_ERROR_RT_INVALID_DEVICEID, "get_device: no device was set")
    return state.device, c.ACL_SUCCESS


def get_device_count() -> tuple[int, int]:
    """How many devices this runtime offers (all share the host's memory).

    >>> count, ret = acl.rt.get_device_count()
    >>> count
    8
    """
    return DEVICE_COUNT, c.ACL_SUCCESS


def synchronize_device() -> int:
    """Wait for the work of every stream; the first error among them.

    >>> ret = acl.rt.synchronize_device()
    """
    first = c.ACL_SUCCESS
    for stream in streams.all():
        status, message = stream.synchronize()
        if status != c.ACL_SUCCESS and first == c.ACL_SUCCESS:
            first = status
            set_recent_error(message)
    return first


# --- memory ------------------------------------------------------------------------------

def _allocate(heap, size, policy, name: str) -> tuple[int, int]:
    if not _is_int(size) or size <= 0:
        return 0, _fail(c.ACL_ERROR_INVALID_PARAM,
                        f"{name}: size must be a positive int, got {size!r}")
    if policy is not None and (not _is_int(policy) or policy not in c.MALLOC_POLICIES):
        return 0, _fail(c.ACL_ERROR_INVALID_PARAM,
                        f"{name}: policy must be one of {list(c.MALLOC_POLICIES)}, got {policy!r}")
    try:
        region = heap.allocate(int(size))
    except (MemoryError, ValueError, OverflowError) as exc:
        return 0, _fail(c.ACL_ERROR_RT_MEMORY_ALLOCATION,
                        f"{name}: cannot allocate {size} bytes ({exc})")
    return region.addr, c.ACL_SUCCESS


def malloc(size: int, policy: int) -> tuple[int, int]:
    """Allocate `size` bytes of device memory, 64-byte aligned; (address, status).

    >>> ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    """
    return _allocate(device_heap, size, policy, "malloc")


def malloc_host(size: int) -> tuple[int, int]:
    """Allocate `size` bytes of host memory, 64-byte aligned; (address, status).

    >>> host_ptr, ret = acl.rt.malloc_host(64)
    """
    return _allocate(host_heap, size, None, "malloc_host")


def _release(heap, ptr, name: str) -> int:
    if not _is_int(ptr) or heap.release(int(ptr)) is None:
        return _fail(c.ACL_ERROR_INVALID_PARAM,
                     f"{name}: {ptr!r} is not the address of a live allocation")
    return c.ACL_SUCCESS


def free(ptr: int) -> int:
    """Free a device allocation made by `malloc`.

    >>> ret = acl.rt.free(ptr)
    """
    return _release(device_heap, ptr, "free")


def free_host(ptr: int) -> int:
    """Free a host allocation made by `malloc_host`.

    >>> ret = acl.rt.free_host(host_ptr)
    """
    return _release(host_heap, ptr, "free_host")


_MEMCPY_SIDES = {
    c.ACL_MEMCPY_HOST_TO_HOST: (False, False),
    c.ACL_MEMCPY_HOST_TO_DEVICE: (True, False),
    c.ACL_MEMCPY_DEVICE_TO_HOST: (False, True),
    c.ACL_MEMCPY_DEVICE_TO_DEVICE: (True, True),
}


HOST_HINT = ("; host addresses come from malloc_host or util.numpy_to_ptr and stay valid "
             "while that array is alive")


def memcpy(dst: int, dst_max: int, src: int, count: int, kind: int) -> int:
    """Copy `count` bytes from `src` to `dst`; both ranges must lie in live memory on the
    sides that `kind` names.

    >>> host = np.arange(16, dtype=np.float32)
    >>> ret = acl.rt.memcpy(ptr, 64, acl.util.numpy_to_ptr(host), 64, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    """
    return copy_memory(dst, dst_max, src, count, kind, find_host, HOST_HINT)


def copy_memory(dst, dst_max, src, count, kind,
                host_region: Callable[[int, int], Region | None], host_hint: str) -> int:
    """`memcpy`, with `host_region(address, nbytes)` finding the host side of a copy (the
    Python API: registered arrays and malloc_host; the C API: the C program's memory) and
    `host_hint` saying, when it finds none, what a host address must be."""
    if not _is_int(kind) or kind not in _MEMCPY_SIDES:
        return _fail(c.ACL_ERROR_INVALID_PARAM, f"memcpy: kind must be 0..3, got {kind!r}")
    if not _is_int(count) or not _is_int(dst_max) or count < 0 or dst_max < 0:
        return _fail(c.ACL_ERROR_INVALID_PARAM,
                     f"memcpy: count and dst_max must be non-negative ints, "
                     f"got {count!r}, {dst_max!r}")
    if count > dst_max:
        return _fail(c.ACL_ERROR_INVALID_PARAM, f"memcpy: count {count} exceeds dst_max {dst_max}")
    regions = []
    for name, ptr, on_device in (("dst", dst, _MEMCPY_SIDES[kind][0]),
                                 ("src", src, _MEMCPY_SIDES[kind][1])):
        region = None
        if _is_int(ptr):
            region = (device_heap.find(int(ptr), count) if on_device
                      else host_region(int(ptr), count))
        if region is None:
            side, hint = ("device", "") if on_device else ("host", host_hint)
            return _fail(c.ACL_ERROR_INVALID_PARAM,
                         f"memcpy: {name} {ptr!r} + {count} bytes is not inside live {side} memory "
                         f"(kind {kind}){hint}")
        regions.append(region)
    if count:
        dst_region, src_region = regions
        np.copyto(dst_region.bytes_at(int(dst), count), src_region.bytes_at(int(src), count))
    return c.ACL_SUCCESS


def memset(ptr: int, max_count: int, value: int, count: int) -> int:
    """Set `count` bytes of device memory at `ptr` to `value`.

    >>> ret = acl.rt.memset(ptr, 64, 0, 64)
    """
    if (not _is_int(count) or not _is_int(max_count) or not _is_int(value)
            or not 0 <= count <= max_count or not 0 <= value <= 255):
        return _fail(c.ACL_ERROR_INVALID_PARAM,
                     f"memset: need 0 <= count <= max_count and 0 <= value <= 255, "
                     f"got count={count!r} max_count={max_count!r} value={value!r}")
    region = device_heap.find(int(ptr), count) if _is_int(ptr) else None
    if region is None:
        return _fail(c.ACL_ERROR_INVALID_PARAM,
                     f"memset: {ptr!r} + {count} bytes is not inside live device memory")
    region.bytes_at(int(ptr), count)[:] = value
    return c.ACL_SUCCESS


# --- streams -----------------------------------------------------------------------------

def create_stream() -> tuple[int, int]:
    """A new stream; (handle, status).

    >>> stream, ret = acl.rt.create_stream()
    """
    return streams.create().handle, c.ACL_SUCCESS


def destroy_stream(stream: int) -> int:
    """Finish the stream's pending work, then destroy it.

    >>> ret = acl.rt.destroy_stream(stream)
    """
    found = streams.get(stream)
    if found is None or found is streams.default:
        return _fail(c.ACL_ERROR_RT_PARAM_INVALID,
                     f"destroy_stream: {stream!r} is not a live stream")
    found.synchronize()
    streams.remove(stream)
    return c.ACL_SUCCESS


def synchronize_stream(stream) -> int:
    """Run the stream's queued work in order; the first error's status (its message is recorded).

    >>> ret = acl.rt.synchronize_stream(stream)
    """
    found = streams.default if stream is None else streams.get(stream)
    if found is None:
        return _fail(c.ACL_ERROR_RT_PARAM_INVALID,
                     f"synchronize_stream: {stream!r} is not a live stream")
    status, message = found.synchronize()
    if status != c.ACL_SUCCESS:
        set_recent_error(message)
    return status
