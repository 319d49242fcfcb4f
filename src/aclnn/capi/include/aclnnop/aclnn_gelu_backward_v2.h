/*
 * aclnnop/aclnn_gelu_backward_v2.h - the gradient of GELU w.r.t. self.
 */
#ifndef ACLNN_SDK_ACLNNOP_GELU_BACKWARD_V2_H
#define ACLNN_SDK_ACLNNOP_GELU_BACKWARD_V2_H

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: check, plan, report the workspace; approximate is "none" (erf) or "tanh". */
ACLNN_API aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *self, char *approximate, aclTensor *gradInput,
    uint64_t *workspaceSize, aclOpExecutor **executor);
/* Phase 2: enqueue the plan on stream (NULL: the default stream). */
ACLNN_API aclnnStatus aclnnGeluBackwardV2(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_SDK_ACLNNOP_GELU_BACKWARD_V2_H */
