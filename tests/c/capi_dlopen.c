/*
 * A host that loads the library as framework adapters do: dlopen(RTLD_LOCAL) under a
 * given name, then dlsym for every function it calls. argv[1]: the library's path.
 * Runs SmoothL1LossBackward and prints "result[i] is: ..." as the samples do.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"

#define RESOLVE(library, name) ((__typeof__(&name))dlsym(library, #name))

int main(int argc, char **argv)
{
    const int64_t shape[1] = {8};
    const float self[8] = {0, 1, 2, 3, 4, 5, 6, 7}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float result[8];
    void *memory[4], *library;
    aclTensor *tensor[4];
    uint64_t workspace = 0;
    aclOpExecutor *executor = NULL;
    int i;
    if (argc != 2 || (library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "dlopen failed: %s\n", argc == 2 ? dlerror() : "usage: capi_dlopen LIBRARY");
        return 1;
    }
    if (dlsym(RTLD_DEFAULT, "aclInit") != NULL) {
        fprintf(stderr, "RTLD_LOCAL leaked aclInit into the global scope\n");
        return 1;
    }
    if (RESOLVE(library, aclInit)(NULL) != ACL_SUCCESS || RESOLVE(library, aclrtSetDevice)(0) != ACL_SUCCESS) {
        fprintf(stderr, "start-up failed\n");
        return 1;
    }
    for (i = 0; i < 4; i++) {
        const float *host = i == 1 ? self : ones;
        if (RESOLVE(library, aclrtMalloc)(&memory[i], sizeof self, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
            RESOLVE(library, aclrtMemcpy)(memory[i], sizeof self, host, sizeof self, ACL_MEMCPY_HOST_TO_DEVICE)) {
            return 1;
        }
        tensor[i] = RESOLVE(library, aclCreateTensor)(shape, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, shape, 1,
                                                       memory[i]);
    }
    if (RESOLVE(library, aclnnSmoothL1LossBackwardGetWorkspaceSize)(tensor[0], tensor[1], tensor[2], 0, 1.0f,
                                                                     tensor[3], &workspace, &executor) ||
        RESOLVE(library, aclnnSmoothL1LossBackward)(NULL, workspace, executor, NULL) ||
        RESOLVE(library, aclrtSynchronizeStream)(NULL) ||
        RESOLVE(library, aclrtMemcpy)(result, sizeof result, memory[3], sizeof result,
                                      ACL_MEMCPY_DEVICE_TO_HOST)) {
        fprintf(stderr, "the call failed: %s\n", RESOLVE(library, aclGetRecentErrMsg)());
        return 1;
    }
    for (i = 0; i < 8; i++) {
        printf("result[%d] is: %f\n", i, result[i]);
    }
    for (i = 0; i < 4; i++) {
        RESOLVE(library, aclDestroyTensor)(tensor[i]);
        RESOLVE(library, aclrtFree)(memory[i]);
    }
    return RESOLVE(library, aclFinalize)();
}
