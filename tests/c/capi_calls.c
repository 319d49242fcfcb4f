/*
 * Every exported function of the C API, called with valid and hostile arguments (NULL,
 * junk and destroyed handles and pointers, wrong memcpy kinds and sizes, bad
 * attributes); each status, each output and the message aclGetRecentErrMsg gives are
 * checked. Prints "N checks passed" and exits 0, or lists each failure and exits 1.
 *
 * argv[1]: the SoC aclrtGetSocName must report.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnn/opdev/op_errno.h"
#include "aclnnop/aclnn_avgpool2d_backward.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "aclnnop/aclnn_l1_loss_backward.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"

static int checks, failures;

static void check(int line, int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL line %d: %s\n", line, what);
    }
}

/* `status` must be `want`, and the thread's message must contain `needle` (if given). */
static void expect(int line, const char *call, int status, int want, const char *needle)
{
    const char *message = aclGetRecentErrMsg();
    checks++;
    if (status != want || (needle != NULL && (message == NULL || strstr(message, needle) == NULL))) {
        failures++;
        fprintf(stderr, "FAIL line %d: %s gave %d (want %d), message \"%s\" (want \"%s\")\n",
                line, call, status, want, message ? message : "(null)", needle ? needle : "");
    }
}

#define CHECK(cond) check(__LINE__, (cond), #cond)
#define EXPECT(call, want, needle) expect(__LINE__, #call, (call), (want), (needle))
/* After a constructor returned NULL: its message must contain `needle`. */
#define MESSAGE_HAS(needle) expect(__LINE__, "the message", 0, 0, (needle))

#define JUNK(type) ((type)(uintptr_t)0x1234)
#define DEVICE_BYTES 64

static aclTensor *tensor_2x2(void *data, aclDataType dtype, aclFormat format)
{
    const int64_t shape[2] = {2, 2};
    return aclCreateTensor(shape, 2, dtype, NULL, 0, format, shape, 2, data);
}

static void runtime_calls(const char *soc)
{
    int32_t device = -1;
    uint32_t count = 0;
    aclrtStream stream = NULL, destroyed = NULL;
    CHECK(aclGetRecentErrMsg() == NULL); /* no failure yet on this thread */
    EXPECT(aclInit(NULL), ACL_SUCCESS, NULL);
    EXPECT(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE, "already");
    EXPECT(aclnnInit(NULL), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSetDevice(8), ACL_ERROR_RT_INVALID_DEVICEID, "device_id");
    EXPECT(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID, "device_id");
    EXPECT(aclrtSetDevice(0), ACL_SUCCESS, NULL);
    EXPECT(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM, "deviceId");
    EXPECT(aclrtGetDevice(&device), ACL_SUCCESS, NULL);
    CHECK(device == 0);
    EXPECT(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM, "count");
    EXPECT(aclrtGetDeviceCount(&count), ACL_SUCCESS, NULL);
    CHECK(count == 8);
    CHECK(aclrtGetSocName() != NULL && strcmp(aclrtGetSocName(), soc) == 0);
    EXPECT(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM, "stream");
    EXPECT(aclrtCreateStream(&stream), ACL_SUCCESS, NULL);
    CHECK(stream != NULL);
    EXPECT(aclrtCreateStream(&destroyed), ACL_SUCCESS, NULL);
    EXPECT(aclrtDestroyStream(destroyed), ACL_SUCCESS, NULL);
    EXPECT(aclrtDestroyStream(destroyed), ACL_ERROR_RT_PARAM_INVALID, "not a live stream");
    EXPECT(aclrtDestroyStream(JUNK(aclrtStream)), ACL_ERROR_RT_PARAM_INVALID, "not a live stream");
    EXPECT(aclrtDestroyStream(NULL), ACL_ERROR_RT_PARAM_INVALID, "not a live stream");
    EXPECT(aclrtSynchronizeStream(JUNK(aclrtStream)), ACL_ERROR_RT_PARAM_INVALID, "not a live");
    EXPECT(aclrtSynchronizeStream(destroyed), ACL_ERROR_RT_PARAM_INVALID, "not a live stream");
    EXPECT(aclrtSynchronizeStream(NULL), ACL_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeDevice(), ACL_SUCCESS, NULL);
    EXPECT(aclrtDestroyStream(stream), ACL_SUCCESS, NULL);
}

static void memory_calls(void)
{
    void *device = NULL, *host = NULL, *other = NULL;
    unsigned char source[DEVICE_BYTES], back[DEVICE_BYTES], copy[DEVICE_BYTES];
    int i, same = 1;
    for (i = 0; i < DEVICE_BYTES; i++) {
        source[i] = (unsigned char)(3 * i + 1);
    }
    EXPECT(aclrtMalloc(NULL, DEVICE_BYTES, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "devPtr");
    EXPECT(aclrtMalloc(&device, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "size");
    EXPECT(aclrtMalloc(&device, DEVICE_BYTES, (aclrtMemMallocPolicy)9), ACL_ERROR_INVALID_PARAM, "policy");
    EXPECT(aclrtMalloc(&device, SIZE_MAX / 2, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION,
           "cannot allocate");
    EXPECT(aclrtMalloc(&device, DEVICE_BYTES, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS, NULL);
    CHECK(device != NULL && (uintptr_t)device % 64 == 0);
    EXPECT(aclrtMalloc(&other, DEVICE_BYTES, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS, NULL);
    EXPECT(aclrtMallocHost(NULL, 16), ACL_ERROR_INVALID_PARAM, "hostPtr");
    EXPECT(aclrtMallocHost(&host, 0), ACL_ERROR_INVALID_PARAM, "size");
    EXPECT(aclrtMallocHost(&host, DEVICE_BYTES), ACL_SUCCESS, NULL);

    /* copies: the program's stack is a valid host side */
    EXPECT(aclrtMemcpy(device, DEVICE_BYTES, source, DEVICE_BYTES, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS, NULL);
    EXPECT(aclrtMemcpy(other, DEVICE_BYTES, device, DEVICE_BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS, NULL);
    EXPECT(aclrtMemcpy(host, DEVICE_BYTES, other, DEVICE_BYTES, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS, NULL);
    EXPECT(aclrtMemcpy(back, DEVICE_BYTES, host, DEVICE_BYTES, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS, NULL);
    for (i = 0; i < DEVICE_BYTES; i++) {
        same = same && back[i] == source[i];
    }
    CHECK(same);
    EXPECT(aclrtMemcpy(back, DEVICE_BYTES, device, 0, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS, NULL);
    /* wrong sizes, kinds and pointers: a status, nothing copied */
    memset(copy, 0x5A, sizeof copy);
    EXPECT(aclrtMemcpy(copy, 8, device, 16, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM, "exceeds dst_max");
    EXPECT(aclrtMemcpy(copy, DEVICE_BYTES, device, DEVICE_BYTES, (aclrtMemcpyKind)7), ACL_ERROR_INVALID_PARAM,
           "kind");
    EXPECT(aclrtMemcpy(copy, DEVICE_BYTES, source, DEVICE_BYTES, ACL_MEMCPY_HOST_TO_DEVICE),
           ACL_ERROR_INVALID_PARAM, "device memory");
    EXPECT(aclrtMemcpy(copy, DEVICE_BYTES, device, DEVICE_BYTES, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM,
           "host memory");
    EXPECT(aclrtMemcpy(copy, DEVICE_BYTES, (char *)device + 32, 48, ACL_MEMCPY_DEVICE_TO_HOST),
           ACL_ERROR_INVALID_PARAM, "device memory");
    EXPECT(aclrtMemcpy(NULL, DEVICE_BYTES, device, DEVICE_BYTES, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
           "dst");
    EXPECT(aclrtMemcpy(device, DEVICE_BYTES, JUNK(void *), DEVICE_BYTES, ACL_MEMCPY_HOST_TO_DEVICE),
           ACL_ERROR_INVALID_PARAM, "src");
    EXPECT(aclrtMemcpy(copy, DEVICE_BYTES, JUNK(void *), DEVICE_BYTES, ACL_MEMCPY_DEVICE_TO_HOST),
           ACL_ERROR_INVALID_PARAM, "src");
    same = 1;
    for (i = 0; i < DEVICE_BYTES; i++) {
        same = same && copy[i] == 0x5A;
    }
    CHECK(same);
    /* memset */
    EXPECT(aclrtMemset(device, DEVICE_BYTES, 0xAB, DEVICE_BYTES), ACL_SUCCESS, NULL);
    EXPECT(aclrtMemcpy(back, DEVICE_BYTES, device, DEVICE_BYTES, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS, NULL);
    CHECK(back[0] == 0xAB && back[DEVICE_BYTES - 1] == 0xAB);
    EXPECT(aclrtMemset(device, 8, 0, 16), ACL_ERROR_INVALID_PARAM, "count");
    EXPECT(aclrtMemset(device, DEVICE_BYTES, 300, DEVICE_BYTES), ACL_ERROR_INVALID_PARAM, "value");
    EXPECT(aclrtMemset(JUNK(void *), DEVICE_BYTES, 0, DEVICE_BYTES), ACL_ERROR_INVALID_PARAM, "device memory");
    EXPECT(aclrtMemset(host, DEVICE_BYTES, 0, DEVICE_BYTES), ACL_ERROR_INVALID_PARAM, "device memory");
    /* frees */
    EXPECT(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM, "live allocation");
    EXPECT(aclrtFree(JUNK(void *)), ACL_ERROR_INVALID_PARAM, "live allocation");
    EXPECT(aclrtFree(host), ACL_ERROR_INVALID_PARAM, "live allocation");
    EXPECT(aclrtFreeHost(device), ACL_ERROR_INVALID_PARAM, "live allocation");
    EXPECT(aclrtFreeHost(host), ACL_SUCCESS, NULL);
    EXPECT(aclrtFreeHost(host), ACL_ERROR_INVALID_PARAM, "live allocation");
    EXPECT(aclrtFree(other), ACL_SUCCESS, NULL);
    EXPECT(aclrtFree(other), ACL_ERROR_INVALID_PARAM, "live allocation");
    EXPECT(aclrtMemcpy(back, DEVICE_BYTES, other, DEVICE_BYTES, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
           "device memory");
    EXPECT(aclrtFree(device), ACL_SUCCESS, NULL);
}

static void object_calls(void)
{
    const int64_t shape[2] = {4, 2}, storage[1] = {8}, too_big[2] = {4, 4}, negative[2] = {-1, 2};
    const int64_t values[2] = {3, 5};
    int64_t *dims = NULL, offset = -1;
    uint64_t rank = 0;
    aclFormat format = ACL_FORMAT_UNDEFINED;
    aclDataType dtype = ACL_DT_UNDEFINED;
    float number = 2.5f;
    uint16_t half = 0x3C00; /* 1.0 */
    char stack[32];
    void *device = NULL;
    aclTensor *tensor, *destroyed;
    aclIntArray *array;
    aclScalar *scalar;

    EXPECT(aclrtMalloc(&device, 32, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, NULL);
    tensor = aclCreateTensor(shape, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, storage, 1, device);
    CHECK(tensor != NULL);
    CHECK(aclCreateTensor(NULL, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, storage, 1, device) == NULL);
    MESSAGE_HAS("viewDims");
    CHECK(aclCreateTensor(JUNK(const int64_t *), 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, storage, 1, device) == NULL);
    MESSAGE_HAS("not readable memory");
    CHECK(aclCreateTensor(too_big, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, too_big, 2, device) == NULL);
    MESSAGE_HAS("not inside one live device allocation");
    CHECK(aclCreateTensor(shape, 2, ACL_FLOAT, NULL, 1, ACL_FORMAT_ND, storage, 1, device) == NULL);
    MESSAGE_HAS("outside its storage");
    CHECK(aclCreateTensor(negative, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, storage, 1, device) == NULL);
    MESSAGE_HAS("negative");
    CHECK(aclCreateTensor(shape, 2, (aclDataType)99, NULL, 0, ACL_FORMAT_ND, storage, 1, device) == NULL);
    MESSAGE_HAS("dataType 99");
    CHECK(aclCreateTensor(shape, 2, ACL_FLOAT, NULL, 0, (aclFormat)99, storage, 1, device) == NULL);
    MESSAGE_HAS("format 99");
    CHECK(aclCreateTensor(shape, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, storage, 1, stack) == NULL);
    MESSAGE_HAS("device allocation");

    /* getters */
    EXPECT(aclGetViewShape(tensor, &dims, &rank), ACLNN_SUCCESS, NULL);
    CHECK(rank == 2 && dims[0] == 4 && dims[1] == 2);
    free(dims);
    EXPECT(aclGetViewStrides(tensor, &dims, &rank), ACLNN_SUCCESS, NULL);
    CHECK(rank == 2 && dims[0] == 2 && dims[1] == 1); /* NULL stride: contiguous */
    free(dims);
    EXPECT(aclGetStorageShape(tensor, &dims, &rank), ACLNN_SUCCESS, NULL);
    CHECK(rank == 1 && dims[0] == 8);
    free(dims);
    EXPECT(aclGetViewOffset(tensor, &offset), ACLNN_SUCCESS, NULL);
    CHECK(offset == 0);
    EXPECT(aclGetFormat(tensor, &format), ACLNN_SUCCESS, NULL);
    CHECK(format == ACL_FORMAT_ND);
    EXPECT(aclGetDataType(tensor, &dtype), ACLNN_SUCCESS, NULL);
    CHECK(dtype == ACL_FLOAT);
    EXPECT(aclGetViewShape(NULL, &dims, &rank), ACLNN_ERR_PARAM_NULLPTR, "null");
    EXPECT(aclGetViewShape(tensor, NULL, &rank), ACLNN_ERR_PARAM_NULLPTR, "viewDims");
    EXPECT(aclGetViewShape(tensor, &dims, NULL), ACLNN_ERR_PARAM_NULLPTR, "viewDimsNum");
    EXPECT(aclGetViewStrides(JUNK(aclTensor *), &dims, &rank), ACLNN_ERR_PARAM_INVALID, "not a live handle");
    EXPECT(aclGetStorageShape(tensor, NULL, NULL), ACLNN_ERR_PARAM_NULLPTR, "storageDims");
    EXPECT(aclGetViewOffset(tensor, NULL), ACLNN_ERR_PARAM_NULLPTR, "offset");
    EXPECT(aclGetFormat(tensor, NULL), ACLNN_ERR_PARAM_NULLPTR, "format");
    EXPECT(aclGetDataType(tensor, NULL), ACLNN_ERR_PARAM_NULLPTR, "dataType");
    EXPECT(aclGetDataType(JUNK(aclTensor *), &dtype), ACLNN_ERR_PARAM_INVALID, "not a live handle");

    /* int arrays and scalars */
    array = aclCreateIntArray(values, 2);
    CHECK(array != NULL);
    CHECK(aclCreateIntArray(NULL, 2) == NULL);
    MESSAGE_HAS("aclCreateIntArray");
    CHECK(aclCreateIntArray(JUNK(const int64_t *), 2) == NULL);
    MESSAGE_HAS("not readable memory");
    scalar = aclCreateScalar(&number, ACL_FLOAT);
    CHECK(scalar != NULL);
    EXPECT(aclDestroyScalar(scalar), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyScalar(scalar), ACLNN_ERR_PARAM_INVALID, "already destroyed");
    scalar = aclCreateScalar(&half, ACL_FLOAT16);
    CHECK(scalar != NULL);
    EXPECT(aclDestroyScalar(scalar), ACLNN_SUCCESS, NULL);
    CHECK(aclCreateScalar(NULL, ACL_FLOAT) == NULL);
    MESSAGE_HAS("aclCreateScalar");
    CHECK(aclCreateScalar(&number, (aclDataType)99) == NULL);
    MESSAGE_HAS("dataType");
    CHECK(aclCreateScalar(JUNK(void *), ACL_FLOAT) == NULL);
    MESSAGE_HAS("not readable memory");

    /* destroy: NULL is fine, junk, twice and the wrong kind are not */
    EXPECT(aclDestroyTensor(NULL), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyIntArray(NULL), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyScalar(NULL), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyTensor(JUNK(aclTensor *)), ACLNN_ERR_PARAM_INVALID, "not a live handle");
    EXPECT(aclDestroyIntArray((aclIntArray *)tensor), ACLNN_ERR_PARAM_INVALID, "aclTensor");
    EXPECT(aclDestroyTensor((aclTensor *)array), ACLNN_ERR_PARAM_INVALID, "aclIntArray");
    EXPECT(aclDestroyIntArray(array), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyIntArray(array), ACLNN_ERR_PARAM_INVALID, "already destroyed");
    destroyed = tensor_2x2(device, ACL_FLOAT, ACL_FORMAT_ND);
    EXPECT(aclDestroyTensor(destroyed), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyTensor(destroyed), ACLNN_ERR_PARAM_INVALID, "already destroyed");
    EXPECT(aclGetViewShape(destroyed, &dims, &rank), ACLNN_ERR_PARAM_INVALID, "destroyed");
    EXPECT(aclDestroyTensor(tensor), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtFree(device), ACL_SUCCESS, NULL);
}

/* The four operators: valid calls with their results, then hostile ones. */
typedef struct {
    void *memory[4];
    aclTensor *tensor[4]; /* gradOut, self, target, gradInput: 2x2 FLOAT */
} Tensors;

static void make_tensors(Tensors *t, const float *self)
{
    const float ones[4] = {1, 1, 1, 1}, zeros[4] = {0, 0, 0, 0};
    const float *data[4] = {ones, self, ones, zeros};
    int i;
    for (i = 0; i < 4; i++) {
        EXPECT(aclrtMalloc(&t->memory[i], 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, NULL);
        EXPECT(aclrtMemcpy(t->memory[i], 16, data[i], 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS, NULL);
        t->tensor[i] = tensor_2x2(t->memory[i], ACL_FLOAT, ACL_FORMAT_NCHW);
        CHECK(t->tensor[i] != NULL);
    }
}

static void free_tensors(Tensors *t)
{
    int i;
    for (i = 0; i < 4; i++) {
        aclDestroyTensor(t->tensor[i]);
        aclrtFree(t->memory[i]);
    }
}

static int result_near(const Tensors *t, const double want[4], double tolerance)
{
    float out[4];
    int i;
    if (aclrtMemcpy(out, sizeof out, t->memory[3], sizeof out, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS) {
        return 0;
    }
    for (i = 0; i < 4; i++) {
        if (!(fabs(out[i] - want[i]) <= tolerance * fabs(want[i]))) {
            return 0;
        }
    }
    return 1;
}

static int result_is(const Tensors *t, double a, double b, double c, double d)
{
    const double want[4] = {a, b, c, d};
    return result_near(t, want, 0.0);
}

/* GELU's derivative (erf form) in double. */
static double gelu_grad(double x)
{
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

static void operator_calls(void)
{
    const float self[4] = {0, 1, 2, 5};
    const int64_t two[2] = {2, 2}, zero[2] = {0, 0};
    uint64_t size = 99;
    aclOpExecutor *executor = NULL, *other = NULL;
    aclrtStream stream = NULL;
    aclIntArray *kernel = aclCreateIntArray(two, 2), *padding = aclCreateIntArray(zero, 2);
    Tensors t;
    aclTensor *g, *x, *y, *out;
    char approximate[] = "none", bogus[] = "sigmoid";

    make_tensors(&t, self);
    g = t.tensor[0], x = t.tensor[1], y = t.tensor[2], out = t.tensor[3];
    EXPECT(aclrtCreateStream(&stream), ACL_SUCCESS, NULL);

    /* SmoothL1LossBackward: a run, then every kind of bad argument */
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, &executor), ACLNN_SUCCESS, NULL);
    CHECK(size == 0 && executor != NULL);
    EXPECT(aclnnSmoothL1LossBackward(NULL, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    CHECK(result_is(&t, -1, 0, 1, 1));
    EXPECT(aclnnSmoothL1LossBackward(NULL, 0, executor, stream), ACLNN_ERR_PARAM_INVALID, "already run");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 5, 1.0f, out, &size, &executor),
           ACLNN_ERR_PARAM_INVALID, "reduction");
    MESSAGE_HAS("got 5");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(NULL, x, y, 0, 1.0f, out, &size, &executor),
           ACLNN_ERR_PARAM_NULLPTR, "gradOut");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, JUNK(aclTensor *), y, 0, 1.0f, out, &size, &executor),
           ACLNN_ERR_PARAM_INVALID, "self");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, -1.0f, out, &size, &executor),
           ACLNN_ERR_PARAM_INVALID, "beta");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, NULL, &executor),
           ACLNN_ERR_PARAM_NULLPTR, "workspaceSize");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, NULL),
           ACLNN_ERR_PARAM_NULLPTR, "executor");
    EXPECT(aclnnSmoothL1LossBackward(NULL, 0, NULL, stream), ACLNN_ERR_PARAM_NULLPTR, "executor");
    EXPECT(aclnnSmoothL1LossBackward(NULL, 0, JUNK(aclOpExecutor *), stream), ACLNN_ERR_PARAM_INVALID, "executor");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 2, 1.0f, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnSmoothL1LossBackward(NULL, 0, executor, JUNK(aclrtStream)), ACLNN_ERR_PARAM_INVALID, "stream");
    EXPECT(aclnnL1LossBackward(NULL, 0, executor, stream), ACLNN_ERR_PARAM_INVALID, "built by");
    EXPECT(aclnnSmoothL1LossBackward(NULL, 0, executor, NULL), ACLNN_SUCCESS, NULL); /* default stream */
    EXPECT(aclrtSynchronizeStream(NULL), ACL_SUCCESS, NULL);

    /* L1LossBackward, mean; a repeatable executor */
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, NULL, 1, out, &size, &executor), ACLNN_ERR_PARAM_NULLPTR,
           "target");
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 1, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackward(NULL, 0, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackward(NULL, 0, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    CHECK(result_is(&t, -0.25, 0, 0.25, 0.25));
    EXPECT(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackward(NULL, 0, executor, stream), ACLNN_ERR_PARAM_INVALID, "destroyed");
    EXPECT(aclDestroyAclOpExecutor(executor), ACLNN_ERR_PARAM_INVALID, "destroyed");
    EXPECT(aclSetAclOpExecutorRepeatable(NULL), ACLNN_ERR_PARAM_NULLPTR, "executor");
    EXPECT(aclSetAclOpExecutorRepeatable(JUNK(aclOpExecutor *)), ACLNN_ERR_PARAM_INVALID, "executor");
    EXPECT(aclDestroyAclOpExecutor(JUNK(aclOpExecutor *)), ACLNN_ERR_PARAM_INVALID, "executor");

    /* GeluBackwardV2: approximate NULL, unknown, unreadable */
    EXPECT(aclnnGeluBackwardV2GetWorkspaceSize(g, x, NULL, out, &size, &executor), ACLNN_ERR_PARAM_NULLPTR,
           "approximate");
    EXPECT(aclnnGeluBackwardV2GetWorkspaceSize(g, x, bogus, out, &size, &executor), ACLNN_ERR_PARAM_INVALID,
           "'sigmoid'");
    EXPECT(aclnnGeluBackwardV2GetWorkspaceSize(g, x, JUNK(char *), out, &size, &executor),
           ACLNN_ERR_PARAM_INVALID, "not readable memory");
    EXPECT(aclnnGeluBackwardV2GetWorkspaceSize(g, x, approximate, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnGeluBackwardV2(NULL, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    {
        const double want[4] = {gelu_grad(0), gelu_grad(1), gelu_grad(2), gelu_grad(5)};
        CHECK(result_near(&t, want, 1e-6));
    }

    /* AvgPool2dBackward on (1, 1, 2, 2) views: stride may be NULL, the rest may not */
    {
        const int64_t in_shape[4] = {1, 1, 2, 2}, out_shape[4] = {1, 1, 1, 1};
        aclTensor *grad = aclCreateTensor(out_shape, 4, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCHW, out_shape, 4,
                                          t.memory[0]);
        aclTensor *input = aclCreateTensor(in_shape, 4, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCHW, in_shape, 4,
                                           t.memory[1]);
        aclTensor *result = aclCreateTensor(in_shape, 4, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCHW, in_shape, 4,
                                            t.memory[3]);
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, NULL, NULL, padding, false, true, 0, 1, result,
                                                      &size, &executor),
               ACLNN_ERR_PARAM_NULLPTR, "kernelSize");
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, JUNK(aclIntArray *), NULL, padding, false,
                                                      true, 0, 1, result, &size, &executor),
               ACLNN_ERR_PARAM_INVALID, "kernelSize");
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, kernel, NULL, padding, false, true, 0, 9,
                                                      result, &size, &executor),
               ACLNN_ERR_PARAM_INVALID, "cubeMathType");
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, kernel, NULL, padding, false, true, 300, 1,
                                                      result, &size, &executor),
               ACLNN_ERR_PARAM_INVALID, "divisorOverride");
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, kernel, NULL, padding, false, true, 0, 1,
                                                      result, &size, &executor),
               ACLNN_SUCCESS, NULL);
        EXPECT(aclnnAvgPool2dBackward(NULL, size, executor, stream), ACLNN_SUCCESS, NULL);
        EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
        CHECK(result_is(&t, 0.25, 0.25, 0.25, 0.25));
        aclDestroyTensor(grad);
        aclDestroyTensor(input);
        aclDestroyTensor(result);
    }

    /* a tensor destroyed between the phases, and one destroyed before the work ran */
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 0, out, &size, &other), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackward(NULL, 0, other, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyTensor(y), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnSmoothL1LossBackward(NULL, 0, executor, stream), ACLNN_ERR_PARAM_INVALID, "destroyed");
    EXPECT(aclrtSynchronizeStream(stream), ACLNN_ERR_RUNTIME_ERROR, "destroyed");
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, &executor),
           ACLNN_ERR_PARAM_INVALID, "destroyed");
    t.tensor[2] = NULL;

    EXPECT(aclrtDestroyStream(stream), ACL_SUCCESS, NULL);
    EXPECT(aclDestroyIntArray(kernel), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyIntArray(padding), ACLNN_SUCCESS, NULL);
    free_tensors(&t);
}

int main(int argc, char **argv)
{
    runtime_calls(argc > 1 ? argv[1] : "Ascend910B");
    memory_calls();
    object_calls();
    operator_calls();
    EXPECT(aclnnFinalize(), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtResetDevice(0), ACL_SUCCESS, NULL);
    EXPECT(aclFinalize(), ACL_SUCCESS, NULL);
    EXPECT(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE, "not initialised");
    if (failures) {
        fprintf(stderr, "%d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("%d checks passed\n", checks);
    return 0;
}
