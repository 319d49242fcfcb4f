"""Helpers every seed sample defines before main(): CHECK_RET/LOG_PRINT, GetShapeSize,
Init and CreateAclTensor, translated once from the C++ samples."""

import sys

import aclnn
from aclnn import acl


def CHECK_RET(cond: bool, message: str) -> None:  # noqa: N802 - the sample's macro
    """The sample's CHECK_RET + LOG_PRINT: print and exit on failure."""
    if not cond:
        print(message)
        sys.exit(1)


def GetShapeSize(shape):  # noqa: N802
    """The number of elements of `shape`."""
    shape_size = 1
    for i in shape:
        shape_size *= i
    return shape_size


def Init(device_id):  # noqa: N802
    """(Fixed pattern) runtime init, device, stream."""
    ret = acl.init()
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclInit failed. ERROR: {ret}")
    ret = acl.rt.set_device(device_id)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtSetDevice failed. ERROR: {ret}")
    stream, ret = acl.rt.create_stream()
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtCreateStream failed. ERROR: {ret}")
    return stream, 0


def CreateAclTensor(host_data, shape, data_type, fmt=aclnn.ACL_FORMAT_ND):  # noqa: N802
    """Copy `host_data` to a new device allocation; returns (device_addr, tensor, ret)."""
    size = GetShapeSize(shape) * host_data.itemsize
    # aclrtMalloc: device memory
    device_addr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtMalloc failed. ERROR: {ret}")
    # aclrtMemcpy: host -> device
    ret = acl.rt.memcpy(device_addr, size, acl.util.numpy_to_ptr(host_data), size,
                        acl.ACL_MEMCPY_HOST_TO_DEVICE)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtMemcpy failed. ERROR: {ret}")
    # strides of a contiguous tensor
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    # aclCreateTensor
    tensor = aclnn.aclCreateTensor(shape, data_type, strides, 0, fmt, shape, device_addr)
    return device_addr, tensor, 0
