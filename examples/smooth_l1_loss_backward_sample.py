"""aclnnSmoothL1LossBackward: the seed page's C++ sample, line for line in Python."""

import sys

import numpy as np

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


def CreateAclTensor(host_data, shape, data_type):  # noqa: N802
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
    tensor = aclnn.aclCreateTensor(shape, data_type, strides, 0, aclnn.ACL_FORMAT_ND, shape,
                                   device_addr)
    return device_addr, tensor, 0


def main() -> int:
    """The sample's main()."""
    # 1. (fixed pattern) device/stream init
    device_id = 0
    stream, ret = Init(device_id)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"Init acl failed. ERROR: {ret}")

    # 2. inputs and outputs
    grad_out_shape = [4, 2]
    self_shape = [4, 2]
    target_shape = [4, 2]
    grad_input_shape = [4, 2]
    reduction = 0
    beta = 1.0
    grad_out_host_data = np.array([1, 1, 1, 1, 1, 1, 1, 1], dtype=np.float32)
    self_host_data = np.array([0, 1, 2, 3, 4, 5, 6, 7], dtype=np.float32)
    target_host_data = np.array([1, 1, 1, 1, 1, 1, 1, 1], dtype=np.float32)
    grad_input_host_data = np.zeros(8, dtype=np.float32)
    grad_out_device_addr, grad_out, ret = CreateAclTensor(grad_out_host_data, grad_out_shape,
                                                         aclnn.ACL_FLOAT)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")
    self_device_addr, self_tensor, ret = CreateAclTensor(self_host_data, self_shape,
                                                         aclnn.ACL_FLOAT)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")
    target_device_addr, target, ret = CreateAclTensor(target_host_data, target_shape,
                                                      aclnn.ACL_FLOAT)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")
    grad_input_device_addr, grad_input, ret = CreateAclTensor(grad_input_host_data,
                                                              grad_input_shape, aclnn.ACL_FLOAT)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")

    # 3. the CANN operator API: phase 1
    workspace_size, executor, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(
        grad_out, self_tensor, target, reduction, beta, grad_input)
    CHECK_RET(ret == acl.ACL_SUCCESS,
              f"aclnnSmoothL1LossBackwardGetWorkspaceSize failed. ERROR: {ret}")
    # device memory for the workspace phase 1 asked for
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        CHECK_RET(ret == acl.ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}")
    # phase 2
    ret = aclnn.aclnnSmoothL1LossBackward(workspace_addr, workspace_size, executor, stream)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclnnSmoothL1LossBackward failed. ERROR: {ret}")

    # 4. (fixed pattern) wait for the stream
    ret = acl.rt.synchronize_stream(stream)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}")

    # 5. copy the result back to the host
    size = GetShapeSize(grad_input_shape)
    result_data = np.zeros(size, dtype=np.float32)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(result_data), result_data.nbytes,
                        grad_input_device_addr, size * result_data.itemsize,
                        acl.ACL_MEMCPY_DEVICE_TO_HOST)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"copy result from device to host failed. ERROR: {ret}")
    for i in range(size):
        print(f"result[{i}] is: {result_data[i]:f}")

    # 6. release the aclTensors
    aclnn.aclDestroyTensor(grad_out)
    aclnn.aclDestroyTensor(self_tensor)
    aclnn.aclDestroyTensor(target)
    aclnn.aclDestroyTensor(grad_input)
    # 7. release device resources
    acl.rt.free(grad_out_device_addr)
    acl.rt.free(self_device_addr)
    acl.rt.free(target_device_addr)
    acl.rt.free(grad_input_device_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
