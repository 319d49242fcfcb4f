/*
 * The C API's latency, for `python -m benchmarks`: SmoothL1LossBackward on 8 float32
 * elements. Prints "first-result" (flushed) as soon as the first result is back on the
 * host - the parent times that from the process start - then times `calls` single calls
 * of phase 1 + phase 2 + synchronize, each on its own, and prints "median-us <value>".
 *
 * argv[1]: calls to time (default 2000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"

#define CHECK(call)                                                               \
    do {                                                                          \
        int status_ = (call);                                                     \
        if (status_ != 0) {                                                       \
            fprintf(stderr, "%s: %d %s\n", #call, status_, aclGetRecentErrMsg()); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static int compare(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static void call(aclTensor *const *t)
{
    uint64_t workspace = 0;
    aclOpExecutor *executor = NULL;
    CHECK(aclnnSmoothL1LossBackwardGetWorkspaceSize(t[0], t[1], t[2], 0, 1.0f, t[3], &workspace, &executor));
    CHECK(aclnnSmoothL1LossBackward(NULL, workspace, executor, NULL));
    CHECK(aclrtSynchronizeStream(NULL));
}

int main(int argc, char **argv)
{
    const int calls = argc > 1 ? atoi(argv[1]) : 2000;
    const int64_t shape[1] = {8};
    const float self[8] = {0, 1, 2, 3, 4, 5, 6, 7}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float result[8];
    void *memory[4];
    aclTensor *t[4];
    double *times = malloc(sizeof(double) * (calls > 0 ? calls : 1));
    int i;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    for (i = 0; i < 4; i++) {
        CHECK(aclrtMalloc(&memory[i], sizeof ones, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemcpy(memory[i], sizeof ones, i == 1 ? self : ones, sizeof ones, ACL_MEMCPY_HOST_TO_DEVICE));
        t[i] = aclCreateTensor(shape, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, shape, 1, memory[i]);
    }
    call(t);
    CHECK(aclrtMemcpy(result, sizeof result, memory[3], sizeof result, ACL_MEMCPY_DEVICE_TO_HOST));
    printf("first-result %f\n", result[0]);
    fflush(stdout);
    for (i = 0; i < 200 && i < calls; i++) {
        call(t);
    }
    for (i = 0; i < calls; i++) {
        const double start = now_us();
        call(t);
        times[i] = now_us() - start;
    }
    qsort(times, calls, sizeof(double), compare);
    printf("median-us %.3f\n", calls > 0 ? times[calls / 2] : 0.0);
    free(times);
    return 0;
}
