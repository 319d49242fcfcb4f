// aclnnAvgPool2dBackward from C++: gradOutput (1, 16, 1, 1) of ones, self (1, 16, 4, 4),
// a 4x4 kernel, stride 1, no padding: every input cell receives 1/16, so it prints
// "out result[i] is: 0.062500" for the 256 cells.
#include "aclnnop/aclnn_avgpool2d_backward.h"
#include "sample_common.h"

int main()
{
    // 1. runtime, device, stream
    const int32_t deviceId = 0;
    aclrtStream stream = nullptr;
    auto ret = StartRuntime(deviceId, &stream);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 2. inputs, the output and the pooling attributes
    const std::vector<int64_t> gradOutputShape = {1, 16, 1, 1};
    const std::vector<int64_t> selfShape = {1, 16, 4, 4};
    const std::vector<int64_t> kernelDims = {4, 4}, strideDims = {1, 1}, paddingDims = {0, 0};
    const bool ceilMode = false, countIncludePad = true;
    const int64_t divisorOverride = 0;  // none
    const int8_t cubeMathType = 1;      // ALLOW_FP32_DOWN_PRECISION
    DeviceTensor gradOutput, self, gradInput;
    ret = MakeDeviceTensor(std::vector<float>(ElementCount(gradOutputShape), 1.0f),
                           gradOutputShape, ACL_FLOAT, ACL_FORMAT_NCHW, &gradOutput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>(ElementCount(selfShape), 1.0f), selfShape, ACL_FLOAT,
                           ACL_FORMAT_NCHW, &self);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>(ElementCount(selfShape), 0.0f), selfShape, ACL_FLOAT,
                           ACL_FORMAT_NCHW, &gradInput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    aclIntArray *kernelSize = aclCreateIntArray(kernelDims.data(), kernelDims.size());
    aclIntArray *stride = aclCreateIntArray(strideDims.data(), strideDims.size());
    aclIntArray *padding = aclCreateIntArray(paddingDims.data(), paddingDims.size());

    // 3. phase 1 checks and plans; phase 2 runs on the stream, which is then synchronized
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnAvgPool2dBackwardGetWorkspaceSize(gradOutput.tensor, self.tensor, kernelSize, stride,
                                                 padding, ceilMode, countIncludePad,
                                                 divisorOverride, cubeMathType, gradInput.tensor,
                                                 &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnAvgPool2dBackwardGetWorkspaceSize failed. "
                                            "ERROR: %d (%s)\n", ret, aclGetRecentErrMsg());
              return ret);
    ret = RunPhase2("aclnnAvgPool2dBackward", aclnnAvgPool2dBackward, workspaceSize, executor,
                    stream);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 4. the result, copied back to the host
    ret = PrintResult("out result", gradInput, ElementCount(selfShape));
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 5. release the tensors, the int arrays, their memory and the runtime
    Release(&gradOutput);
    Release(&self);
    Release(&gradInput);
    aclDestroyIntArray(kernelSize);
    aclDestroyIntArray(stride);
    aclDestroyIntArray(padding);
    StopRuntime(deviceId, stream);
    return 0;
}
