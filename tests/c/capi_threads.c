/*
 * Operator calls from many C threads at once. Each thread has its own stream and runs a
 * list of calls of all four operators (FLOAT and FLOAT16, inputs drawn from a seeded
 * generator, shapes varying); the digest of every result must equal the digest of the
 * same call run alone, before any thread started. Each thread also fails calls of its
 * own, and aclGetRecentErrMsg must always give that thread's message.
 *
 * argv[1]: threads (default 6), argv[2]: calls per thread (default 40).
 * Prints "threads T calls C identical" and exits 0, or says what differs and exits 1.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_avgpool2d_backward.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "aclnnop/aclnn_l1_loss_backward.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"

#define MAX_THREADS 64
#define MAX_CALLS 1000

typedef struct {
    int thread;
    int calls;
    aclrtStream stream;
    uint64_t digest[MAX_CALLS];
    int failures;
} Worker;

static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 33;
}

/* FNV-1a over the result's bytes. */
static uint64_t digest_of(const unsigned char *bytes, size_t size)
{
    uint64_t hash = 1469598103934665603ULL;
    size_t i;
    for (i = 0; i < size; i++) {
        hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
    return hash;
}

typedef struct {
    void *memory;
    aclTensor *tensor;
} Tensor;

static int make(Tensor *t, const int64_t *shape, int rank, aclDataType dtype, aclFormat format,
                uint64_t *random)
{
    size_t count = 1, item = dtype == ACL_FLOAT ? 4 : 2, i;
    int d;
    unsigned char *host;
    for (d = 0; d < rank; d++) {
        count *= (size_t)shape[d];
    }
    host = malloc(count * item);
    for (i = 0; i < count; i++) {
        /* values in about +-8, float32 or float16 bits, with an exact zero now and then */
        uint64_t r = next_random(random);
        float value = (r % 17 == 0) ? 0.0f : ((float)(r % 4096) - 2048.0f) / 256.0f;
        if (item == 4) {
            memcpy(host + 4 * i, &value, 4);
        } else {
            uint16_t half = (uint16_t)((r & 0x8000) | (0x3800 + (r >> 16) % 0x1000));
            memcpy(host + 2 * i, &half, 2);
        }
    }
    if (aclrtMalloc(&t->memory, count * item, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMemcpy(t->memory, count * item, host, count * item, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS) {
        free(host);
        return 1;
    }
    free(host);
    t->tensor = aclCreateTensor(shape, rank, dtype, NULL, 0, format, shape, rank, t->memory);
    return t->tensor == NULL;
}

static void release(Tensor *t)
{
    aclDestroyTensor(t->tensor);
    aclrtFree(t->memory);
}

/* Call `index` of thread `thread` (a pure function of both), on `stream`: its digest,
 * or 0 if a step failed. */
static uint64_t run_call(int thread, int index, aclrtStream stream)
{
    uint64_t random = 0x9E3779B97F4A7C15ULL * (uint64_t)(thread * MAX_CALLS + index + 1);
    const int op = (int)(next_random(&random) % 4);
    const aclDataType dtype = next_random(&random) % 2 ? ACL_FLOAT : ACL_FLOAT16;
    const int64_t rows = 1 + (int64_t)(next_random(&random) % 48), cols = 1 + (int64_t)(next_random(&random) % 70);
    int64_t shape[4] = {rows, cols, 0, 0}, pooled[4];
    int rank = 2, bad = 0, i;
    Tensor in[3], out;
    uint64_t workspace = 0, digest = 0;
    aclOpExecutor *executor = NULL;
    aclnnStatus status;
    aclFormat format = ACL_FORMAT_ND;
    size_t bytes;
    unsigned char *result;
    aclIntArray *kernel = NULL, *strides = NULL, *padding = NULL;

    if (op == 3) { /* AvgPool2dBackward, NCHW (2, C, H, W), kernel 3, stride 2, padding 1 */
        const int64_t three[2] = {3, 3}, two[2] = {2, 2}, one[2] = {1, 1};
        shape[0] = 2, shape[1] = 1 + rows % 5, shape[2] = 2 + rows, shape[3] = 2 + cols % 40;
        pooled[0] = shape[0], pooled[1] = shape[1];
        pooled[2] = (shape[2] + 2 - 3) / 2 + 1, pooled[3] = (shape[3] + 2 - 3) / 2 + 1;
        rank = 4, format = ACL_FORMAT_NCHW;
        kernel = aclCreateIntArray(three, 2), strides = aclCreateIntArray(two, 2);
        padding = aclCreateIntArray(one, 2);
        bad |= make(&in[0], pooled, 4, dtype, format, &random);
    } else {
        bad |= make(&in[0], shape, 2, dtype, format, &random);
    }
    bad |= make(&in[1], shape, rank, dtype, format, &random);
    bad |= make(&in[2], shape, rank, dtype, format, &random);
    bad |= make(&out, shape, rank, dtype, format, &random);
    if (bad) {
        return 0;
    }
    switch (op) {
    case 0:
        status = aclnnSmoothL1LossBackwardGetWorkspaceSize(in[0].tensor, in[1].tensor, in[2].tensor, 1, 0.5f,
                                                           out.tensor, &workspace, &executor);
        status = status ? status : aclnnSmoothL1LossBackward(NULL, workspace, executor, stream);
        break;
    case 1:
        status = aclnnL1LossBackwardGetWorkspaceSize(in[0].tensor, in[1].tensor, in[2].tensor, 0, out.tensor,
                                                     &workspace, &executor);
        status = status ? status : aclnnL1LossBackward(NULL, workspace, executor, stream);
        break;
    case 2: {
        char approximate[] = "tanh";
        status = aclnnGeluBackwardV2GetWorkspaceSize(in[0].tensor, in[1].tensor, approximate, out.tensor,
                                                     &workspace, &executor);
        status = status ? status : aclnnGeluBackwardV2(NULL, workspace, executor, stream);
        break;
    }
    default:
        status = aclnnAvgPool2dBackwardGetWorkspaceSize(in[0].tensor, in[1].tensor, kernel, strides, padding,
                                                        false, true, 0, 1, out.tensor, &workspace, &executor);
        status = status ? status : aclnnAvgPool2dBackward(NULL, workspace, executor, stream);
    }
    if (status == ACL_SUCCESS && aclrtSynchronizeStream(stream) == ACL_SUCCESS) {
        bytes = 1;
        for (i = 0; i < rank; i++) {
            bytes *= (size_t)shape[i];
        }
        bytes *= dtype == ACL_FLOAT ? 4 : 2;
        result = malloc(bytes);
        if (aclrtMemcpy(result, bytes, out.memory, bytes, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS) {
            digest = digest_of(result, bytes) | 1; /* never 0 */
        }
        free(result);
    }
    for (i = 0; i < 3; i++) {
        release(&in[i]);
    }
    release(&out);
    aclDestroyIntArray(kernel);
    aclDestroyIntArray(strides);
    aclDestroyIntArray(padding);
    return digest;
}

/* A failing call whose message names this thread's own bad value; 1 if the message
 * aclGetRecentErrMsg then gives is not that one. */
static int own_failure(int thread, int index)
{
    char wanted[32];
    const int32_t device = 1000 * (thread + 1) + index;
    const char *message;
    if (aclrtSetDevice(device) != ACL_ERROR_RT_INVALID_DEVICEID) {
        return 1;
    }
    snprintf(wanted, sizeof wanted, "got %d", (int)device);
    message = aclGetRecentErrMsg();
    return message == NULL || strstr(message, wanted) == NULL;
}

static void *work(void *argument)
{
    Worker *w = argument;
    int i;
    for (i = 0; i < w->calls; i++) {
        w->digest[i] = run_call(w->thread, i, w->stream);
        if (i % 7 == 0) {
            w->failures += own_failure(w->thread, i);
        }
    }
    w->failures += own_failure(w->thread, w->calls);
    return NULL;
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 6, calls = argc > 2 ? atoi(argv[2]) : 40;
    static Worker workers[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int t, i, differences = 0;
    if (threads < 1 || threads > MAX_THREADS || calls < 1 || calls > MAX_CALLS) {
        fprintf(stderr, "usage: %s [threads <= %d] [calls <= %d]\n", argv[0], MAX_THREADS, MAX_CALLS);
        return 2;
    }
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        fprintf(stderr, "start-up failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    for (t = 0; t < threads; t++) {
        workers[t].thread = t, workers[t].calls = calls;
        if (aclrtCreateStream(&workers[t].stream) != ACL_SUCCESS) {
            return 1;
        }
    }
    /* alone, one call at a time, on the default stream */
    for (t = 0; t < threads; t++) {
        for (i = 0; i < calls; i++) {
            uint64_t alone = run_call(t, i, NULL);
            workers[t].digest[i] = alone;
            if (alone == 0) {
                fprintf(stderr, "thread %d call %d failed alone: %s\n", t, i, aclGetRecentErrMsg());
                return 1;
            }
        }
    }
    {
        static uint64_t expected[MAX_THREADS][MAX_CALLS];
        for (t = 0; t < threads; t++) {
            memcpy(expected[t], workers[t].digest, sizeof expected[t]);
        }
        for (t = 0; t < threads; t++) {
            pthread_create(&ids[t], NULL, work, &workers[t]);
        }
        for (t = 0; t < threads; t++) {
            pthread_join(ids[t], NULL);
        }
        for (t = 0; t < threads; t++) {
            for (i = 0; i < calls; i++) {
                if (workers[t].digest[i] != expected[t][i]) {
                    differences++;
                    fprintf(stderr, "thread %d call %d: digest %llx, alone %llx\n", t, i,
                            (unsigned long long)workers[t].digest[i], (unsigned long long)expected[t][i]);
                }
            }
            if (workers[t].failures) {
                differences++;
                fprintf(stderr, "thread %d: %d messages were not its own\n", t, workers[t].failures);
            }
            aclrtDestroyStream(workers[t].stream);
        }
    }
    aclrtResetDevice(0);
    aclFinalize();
    if (differences) {
        return 1;
    }
    printf("threads %d calls %d identical\n", threads, calls);
    return 0;
}
