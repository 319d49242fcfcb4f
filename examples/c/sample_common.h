// Helpers the four samples share, in the style of the CANN operator pages: status
// checks that print and return, device tensors made from host vectors, and the fixed
// runtime start-up and shutdown.
#ifndef ACLNN_EXAMPLES_SAMPLE_COMMON_H
#define ACLNN_EXAMPLES_SAMPLE_COMMON_H

#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"

#define CHECK_RET(cond, return_expr) \
    do {                             \
        if (!(cond)) {               \
            return_expr;             \
        }                            \
    } while (0)

#define LOG_PRINT(message, ...)         \
    do {                                \
        printf(message, ##__VA_ARGS__); \
    } while (0)

// A tensor on the device: its memory and its aclTensor.
struct DeviceTensor {
    void *addr = nullptr;
    aclTensor *tensor = nullptr;
};

inline int64_t ElementCount(const std::vector<int64_t> &shape)
{
    int64_t count = 1;
    for (int64_t dim : shape) {
        count *= dim;
    }
    return count;
}

// aclInit, the device, a stream.
inline int StartRuntime(int32_t deviceId, aclrtStream *stream)
{
    auto ret = aclInit(nullptr);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclInit failed. ERROR: %d\n", ret); return ret);
    ret = aclrtSetDevice(deviceId);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSetDevice failed. ERROR: %d\n", ret); return ret);
    ret = aclrtCreateStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtCreateStream failed. ERROR: %d\n", ret); return ret);
    return ACL_SUCCESS;
}

// The stream, the device and the runtime, released in reverse order.
inline void StopRuntime(int32_t deviceId, aclrtStream stream)
{
    aclrtDestroyStream(stream);
    aclrtResetDevice(deviceId);
    aclFinalize();
}

// Device memory holding `host`, described as a contiguous tensor of `shape`.
template <typename T>
int MakeDeviceTensor(const std::vector<T> &host, const std::vector<int64_t> &shape,
                     aclDataType dataType, aclFormat format, DeviceTensor *out)
{
    const size_t bytes = ElementCount(shape) * sizeof(T);
    auto ret = aclrtMalloc(&out->addr, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMalloc failed. ERROR: %d\n", ret); return ret);
    ret = aclrtMemcpy(out->addr, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMemcpy failed. ERROR: %d\n", ret); return ret);
    std::vector<int64_t> strides(shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; i--) {
        strides[i] = shape[i + 1] * strides[i + 1];
    }
    out->tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0, format,
                                  shape.data(), shape.size(), out->addr);
    CHECK_RET(out->tensor != nullptr,
              LOG_PRINT("aclCreateTensor failed: %s\n", aclGetRecentErrMsg()); return 1);
    return ACL_SUCCESS;
}

// Destroy the tensor and free its device memory.
inline void Release(DeviceTensor *tensor)
{
    aclDestroyTensor(tensor->tensor);
    aclrtFree(tensor->addr);
}

// An operator's phase 2: aclnnXxx(workspace, workspaceSize, executor, stream).
using Phase2 = aclnnStatus (*)(void *, uint64_t, aclOpExecutor *, aclrtStream);

// Phase 2 with the workspace phase 1 asked for (none for 0 bytes), then wait for the
// stream and free the workspace.
inline int RunPhase2(const char *name, Phase2 phase2, uint64_t workspaceSize,
                     aclOpExecutor *executor, aclrtStream stream)
{
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        auto ret = aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_RET(ret == ACL_SUCCESS,
                  LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret); return ret);
    }
    auto ret = phase2(workspace, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("%s failed. ERROR: %d\n", name, ret); return ret);
    ret = aclrtSynchronizeStream(stream);
    CHECK_RET(ret == ACL_SUCCESS,
              LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret); return ret);
    if (workspace != nullptr) {
        aclrtFree(workspace);
    }
    return ACL_SUCCESS;
}

// Copy the float tensor back to the host and print "<label>[i] is: value" per element.
inline int PrintResult(const char *label, const DeviceTensor &tensor, int64_t count)
{
    std::vector<float> host(count, 0.0f);
    auto ret = aclrtMemcpy(host.data(), host.size() * sizeof(float), tensor.addr,
                           count * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST);
    CHECK_RET(ret == ACL_SUCCESS,
              LOG_PRINT("copy result from device to host failed. ERROR: %d\n", ret); return ret);
    for (int64_t i = 0; i < count; i++) {
        LOG_PRINT("%s[%ld] is: %f\n", label, static_cast<long>(i), host[i]);
    }
    return ACL_SUCCESS;
}

#endif  // ACLNN_EXAMPLES_SAMPLE_COMMON_H
