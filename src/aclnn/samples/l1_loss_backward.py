"""aclnnL1LossBackward: a sample in the style of the seed samples (the L1 page has none).

gradOutput 1, self 0..7, target 1, reduction 'mean': each result is sign(self - target) / 8.
"""

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
    grad_output_shape = [4, 2]
    self_shape = [4, 2]
    target_shape = [4, 2]
    grad_input_shape = [4, 2]
    reduction = 1  # 'mean'
    grad_output_host_data = np.ones(8, dtype=np.float32)
    self_host_data = np.arange(8, dtype=np.float32)
    target_host_data = np.ones(8, dtype=np.float32)
    grad_input_host_data = np.zeros(8, dtype=np.float32)
    tensors = {}
    for name, data, shape in (("gradOutput", grad_output_host_data, grad_output_shape),
                              ("self", self_host_data, self_shape),
                              ("target", target_host_data, target_shape),
                              ("gradInput", grad_input_host_data, grad_input_shape)):
        tensors[name] = CreateAclTensor(data, shape, aclnn.ACL_FLOAT)
        CHECK_RET(tensors[name][2] == acl.ACL_SUCCESS, "")

    # 3. the CANN operator API: phase 1, then phase 2 with the workspace it asked for
    workspace_size, executor, ret = aclnn.aclnnL1LossBackwardGetWorkspaceSize(
        tensors["gradOutput"][1], tensors["self"][1], tensors["target"][1], reduction,
        tensors["gradInput"][1])
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclnnL1LossBackwardGetWorkspaceSize failed. ERROR: {ret}")
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        CHECK_RET(ret == acl.ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}")
    ret = aclnn.aclnnL1LossBackward(workspace_addr, workspace_size, executor, stream)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclnnL1LossBackward failed. ERROR: {ret}")

    # 4. (fixed pattern) wait for the stream
    ret = acl.rt.synchronize_stream(stream)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}")

    # 5. copy the result back to the host and print it
    size = GetShapeSize(grad_input_shape)
    result_data = np.zeros(size, dtype=np.float32)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(result_data), result_data.nbytes,
                        tensors["gradInput"][0], result_data.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"copy result from device to host failed. ERROR: {ret}")
    for i in range(size):
        print(f"result[{i}] is: {result_data[i]:f}")

    # 6./7. release tensors, device memory, the workspace, the stream and the device
    for device_addr, tensor, _ in tensors.values():
        aclnn.aclDestroyTensor(tensor)
        acl.rt.free(device_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
