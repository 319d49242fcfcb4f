// aclnnGeluBackwardV2 from C++: self 0..7, gradOutput 1, approximate "tanh". Prints
// result[i] = GELU'(i) with the tanh approximation. (The page's own sample fills its
// FLOAT tensors from std::vector<int>, so it prints zeros; this one passes floats.)
#include "aclnnop/aclnn_gelu_backward_v2.h"
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
    char approximate[] = "tanh";
    DeviceTensor gradOutput, self, gradInput;
    ret = MakeDeviceTensor(std::vector<float>(8, 1.0f), shape, ACL_FLOAT, ACL_FORMAT_ND,
                           &gradOutput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, shape, ACL_FLOAT,
                           ACL_FORMAT_ND, &self);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = MakeDeviceTensor(std::vector<float>(8, 0.0f), shape, ACL_FLOAT, ACL_FORMAT_ND, &gradInput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 3. phase 1 checks and plans; phase 2 runs on the stream, which is then synchronized
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnGeluBackwardV2GetWorkspaceSize(gradOutput.tensor, self.tensor, approximate,
                                              gradInput.tensor, &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnGeluBackwardV2GetWorkspaceSize failed. "
                                            "ERROR: %d (%s)\n", ret, aclGetRecentErrMsg());
              return ret);
    ret = RunPhase2("aclnnGeluBackwardV2", aclnnGeluBackwardV2, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 4. the result, copied back to the host
    ret = PrintResult("result", gradInput, ElementCount(shape));
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    // 5. release the tensors, their memory and the runtime
    Release(&gradOutput);
    Release(&self);
    Release(&gradInput);
    StopRuntime(deviceId, stream);
    return 0;
}
