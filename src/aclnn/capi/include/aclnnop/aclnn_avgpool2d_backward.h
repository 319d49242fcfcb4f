/*
 * aclnnop/aclnn_avgpool2d_backward.h - the gradient of 2-D average pooling w.r.t. its input.
 */
#ifndef ACLNN_SDK_ACLNNOP_AVGPOOL2D_BACKWARD_H
#define ACLNN_SDK_ACLNNOP_AVGPOOL2D_BACKWARD_H

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: check, plan, report the workspace. stride may be NULL (stride = kernel);
 * cubeMathType 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32. */
ACLNN_API aclnnStatus aclnnAvgPool2dBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *kernelSize,
    const aclIntArray *stride, const aclIntArray *padding, bool ceilMode, bool countIncludePad,
    int64_t divisorOverride, int8_t cubeMathType, aclTensor *gradInput, uint64_t *workspaceSize,
    aclOpExecutor **executor);
/* Phase 2: enqueue the plan on stream (NULL: the default stream). */
ACLNN_API aclnnStatus aclnnAvgPool2dBackward(void *workspace, uint64_t workspaceSize,
                                             aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_SDK_ACLNNOP_AVGPOOL2D_BACKWARD_H */
