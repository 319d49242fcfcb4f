"""aclnnAvgPool2dBackward: the seed page's C++ sample, line for line in Python.

gradOutput (1, 16, 1, 1) of ones, self (1, 16, 4, 4), a 4x4 kernel: every input cell gets
1 / 16, so the sample prints 256 lines `out result[i] is: 0.062500`.
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
    grad_output_shape = [1, 16, 1, 1]
    self_shape = [1, 16, 4, 4]
    kernel_dims = [4, 4]
    stride_dims = [1, 1]
    padding_dims = [0, 0]
    ceil_mode = False
    divisor_override = 0
    count_include_pad = True
    cube_math_type = 1
    grad_input_shape = [1, 16, 4, 4]

    # the C++ vectors hold twice the elements the tensors use; so do these
    grad_output_host_data = np.ones(GetShapeSize(grad_output_shape) * 2, dtype=np.float32)
    self_host_data = np.ones(GetShapeSize(self_shape) * 2, dtype=np.float32)
    grad_input_host_data = np.ones(GetShapeSize(grad_input_shape) * 2, dtype=np.float32)

    # gradOutput, self and gradInput aclTensors (NCHW)
    grad_output_device_addr, grad_output, ret = CreateAclTensor(
        grad_output_host_data, grad_output_shape, aclnn.ACL_FLOAT, aclnn.ACL_FORMAT_NCHW)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")
    self_device_addr, self_tensor, ret = CreateAclTensor(
        self_host_data, self_shape, aclnn.ACL_FLOAT, aclnn.ACL_FORMAT_NCHW)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")
    grad_input_device_addr, grad_input, ret = CreateAclTensor(
        grad_input_host_data, grad_input_shape, aclnn.ACL_FLOAT, aclnn.ACL_FORMAT_NCHW)
    CHECK_RET(ret == acl.ACL_SUCCESS, "")

    # kernel, stride and padding aclIntArrays
    kernel_size = aclnn.aclCreateIntArray(kernel_dims, 2)
    stride = aclnn.aclCreateIntArray(stride_dims, 2)
    padding = aclnn.aclCreateIntArray(padding_dims, 2)

    # 3. the CANN operator API: phase 1
    workspace_size, executor, ret = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
        grad_output, self_tensor, kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override, cube_math_type, grad_input)
    CHECK_RET(ret == acl.ACL_SUCCESS,
              f"aclnnAvgPool2dBackwardGetWorkspaceSize failed. ERROR: {ret}")
    # device memory for the workspace phase 1 asked for
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        CHECK_RET(ret == acl.ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}")
    # phase 2
    ret = aclnn.aclnnAvgPool2dBackward(workspace_addr, workspace_size, executor, stream)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclnnAvgPool2dBackward failed. ERROR: {ret}")

    # 4. (fixed pattern) wait for the stream
    ret = acl.rt.synchronize_stream(stream)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}")

    # 5. copy the result back to the host
    size = GetShapeSize(grad_input_shape)
    out_data = np.zeros(size, dtype=np.float32)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(out_data), out_data.nbytes,
                        grad_input_device_addr, size * out_data.itemsize,
                        acl.ACL_MEMCPY_DEVICE_TO_HOST)
    CHECK_RET(ret == acl.ACL_SUCCESS, f"copy result from device to host failed. ERROR: {ret}")
    for i in range(size):
        print(f"out result[{i}] is: {out_data[i]:f}")

    # 6. release the aclTensors and aclIntArrays
    aclnn.aclDestroyTensor(grad_output)
    aclnn.aclDestroyTensor(self_tensor)
    aclnn.aclDestroyTensor(grad_input)
    aclnn.aclDestroyIntArray(kernel_size)
    aclnn.aclDestroyIntArray(stride)
    aclnn.aclDestroyIntArray(padding)

    # 7. release device resources
    acl.rt.free(grad_output_device_addr)
    acl.rt.free(self_device_addr)
    acl.rt.free(grad_input_device_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
