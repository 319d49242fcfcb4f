// aclnnL1LossBackward from C++: gradOutput 1, self 0..7, target 1, reduction mean.
// Prints result[i] = sign(self - target) / 8: -0.125, 0, then 0.125 six times.
#include "aclnnop/aclnn_l1_loss_backward.h"
#include "sample_common.h"

int main()
{
    // 1. runtime, device, stream
    const int32_t deviceId = 0;
    aclrtStream stream = nullptr;
    auto ret = StartRuntime(deviceId, &stream);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 2. inputs and the output, on the device
    const std::vector<int64_t> shape = {4, 2};
    const int64_t reduction = 1;  // mean
    DeviceTensor gradOutput, self, target, gradInput;
    ret = MakeDeviceTensor(std::vector<float>(8, 1.0f), shape, ACL_FLOAT, ACL_FORMAT_ND,
                           &gradOutput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, shape, ACL_FLOAT,
                           ACL_FORMAT_ND, &self);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>(8, 1.0f), shape, ACL_FLOAT, ACL_FORMAT_ND, &target);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>(8, 0.0f), shape, ACL_FLOAT, ACL_FORMAT_ND, &gradInput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 3. phase 1 checks and plans; phase 2 runs on the stream, which is then synchronized
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnL1LossBackwardGetWorkspaceSize(gradOutput.tensor, self.tensor, target.tensor,
                                              reduction, gradInput.tensor, &workspaceSize,
                                              &executor);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnL1LossBackwardGetWorkspaceSize failed. "
                                            "ERROR: %d (%s)\n", ret, aclGetRecentErrMsg());
              return ret);
    ret = RunPhase2("aclnnL1LossBackward", aclnnL1LossBackward, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 4. the result, copied back to the host
    ret = PrintResult("result", gradInput, ElementCount(shape));
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 5. release the tensors, their memory and the runtime
    Release(&gradOutput);
    Release(&self);
    Release(&target);
    Release(&gradInput);
    StopRuntime(deviceId, stream);
    return 0;
}
