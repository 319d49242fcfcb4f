"""aclnnSmoothL1LossBackward: the seed page's C++ sample, line for line in Python."""

import sys

import numpy as np

import aclnn
from aclnn import acl
from aclnn.samples.common import CHECK_RET, CreateAclTensor, GetShapeSize, Init


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
