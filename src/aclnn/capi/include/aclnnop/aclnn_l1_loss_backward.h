/*
 * aclnnop/aclnn_l1_loss_backward.h - the gradient of L1Loss w.r.t. self.
 */
#ifndef ACLNN_SDK_ACLNNOP_L1_LOSS_BACKWARD_H
#define ACLNN_SDK_ACLNNOP_L1_LOSS_BACKWARD_H

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: check, plan, report the workspace; reduction 0 none, 1 mean, 2 sum. */
ACLNN_API aclnnStatus aclnnL1LossBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, int64_t reduction,
    aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor);
/* Phase 2: enqueue the plan on stream (NULL: the default stream). */
ACLNN_API aclnnStatus aclnnL1LossBackward(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_SDK_ACLNNOP_L1_LOSS_BACKWARD_H */
