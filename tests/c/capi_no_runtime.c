/*
 * Run where the Python runtime cannot start: every call must fail, none may report
 * success. Prints one word per call: aclInit, aclrtSetDevice, aclrtMalloc statuses,
 * aclCreateTensor's pointer, phase 1's status, aclrtGetSocName's pointer, and whether
 * aclGetRecentErrMsg says the runtime failed to start.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"

int main(void)
{
    const int64_t shape[1] = {8};
    void *memory = NULL;
    uint64_t workspace = 0;
    aclOpExecutor *executor = NULL;
    const char *message;
    printf("%d\n", aclInit(NULL));
    printf("%d\n", aclrtSetDevice(0));
    printf("%d\n", aclrtMalloc(&memory, 32, ACL_MEM_MALLOC_HUGE_FIRST));
    printf("%s\n", aclCreateTensor(shape, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, shape, 1, memory) ? "tensor"
                                                                                                   : "NULL");
    printf("%d\n", aclnnSmoothL1LossBackwardGetWorkspaceSize(NULL, NULL, NULL, 0, 1.0f, NULL, &workspace,
                                                             &executor));
    printf("%s\n", aclrtGetSocName() ? aclrtGetSocName() : "NULL");
    message = aclGetRecentErrMsg();
    printf("%s\n", message && strstr(message, "failed to start") ? "failed to start" : "no message");
    return 0;
}
