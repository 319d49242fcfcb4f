/*
 * Every exported function of the C API, called with valid and hostile arguments (NULL,
 * junk and destroyed handles and pointers, wrong memcpy kinds and sizes, bad
 * attributes); each status, each output and the message aclGetRecentErrMsg gives are
 * checked. Every phase 2 meant to run gets a workspace of the size its phase 1 reported;
 * the workspace checks themselves (size, NULL, and what each contract does with the
 * executor after a NULL workspace) are in workspace_calls. Prints "N checks passed" and
 * exits 0, or lists each failure and exits 1.
 *
 * argv[1]: the SoC aclrtGetSocName must report (the test selects it with ACLNN_SOC);
 * argv[2], optional: the contract, "library" or "documented", set as ACLNN_CONTRACT
 * before the first call (the runtime reads its environment when it starts); without it,
 * ACLNN_CONTRACT as inherited (unset: library).
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
#define KERNEL_SCRATCH_950 ((uint64_t)16 << 20) /* Ascend950's elementwise tiling workspace */

/* Phase 2 as a caller runs it: a workspace of the `size` phase 1 reported (none for 0),
 * from aclrtMalloc; it stays allocated until free_workspaces(), once the work has run. */
#define MAX_WORKSPACES 16
#define RUN(phase_two, size, executor, stream) \
    phase_two(new_workspace(__LINE__, (size)), (size), (executor), (stream))

static void *workspaces[MAX_WORKSPACES];
static int workspace_count;

static void *new_workspace(int line, uint64_t size)
{
    void *memory = NULL;
    if (size == 0) {
        return NULL;
    }
    check(line, workspace_count < MAX_WORKSPACES &&
                    aclrtMalloc(&memory, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS,
          "a workspace from aclrtMalloc");
    if (memory != NULL) {
        workspaces[workspace_count++] = memory;
    }
    return memory;
}

/* After the streams the workspaces were used on were synchronised. */
static void free_workspaces(void)
{
    while (workspace_count > 0) {
        EXPECT(aclrtFree(workspaces[--workspace_count]), ACL_SUCCESS, NULL);
    }
}

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
    { /* ACLNN_SOC and ACLNN_CONTRACT are read at aclrtSetDevice, even when set after aclInit */
        const char *other = strcmp(soc, "Ascend950") == 0 ? "Ascend910" : "Ascend950";
        const char *was = getenv("ACLNN_CONTRACT");
        char saved[32] = "";
        if (was != NULL) {
            snprintf(saved, sizeof saved, "%s", was);
        }
        CHECK(setenv("ACLNN_SOC", other, 1) == 0 && setenv("ACLNN_CONTRACT", "pages", 1) == 0);
        EXPECT(aclrtSetDevice(0), ACL_ERROR_INVALID_PARAM, "ACLNN_CONTRACT");
        CHECK(was != NULL ? setenv("ACLNN_CONTRACT", saved, 1) == 0
                          : unsetenv("ACLNN_CONTRACT") == 0);
        EXPECT(aclrtSetDevice(0), ACL_SUCCESS, NULL);
        CHECK(strcmp(aclrtGetSocName(), other) == 0);
        CHECK(setenv("ACLNN_SOC", soc, 1) == 0);
        EXPECT(aclrtSetDevice(0), ACL_SUCCESS, NULL);
        CHECK(strcmp(aclrtGetSocName(), soc) == 0);
    }
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

static void operator_calls(const char *soc, int library)
{
    const float self[4] = {0, 1, 2, 5};
    const int64_t two[2] = {2, 2}, zero[2] = {0, 0};
    uint64_t size = 99, other_size = 99;
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
    CHECK(executor != NULL);
    /* Ascend950's kernel has a 16 MiB tiling workspace; elsewhere same-shape contiguous
     * FLOAT inputs need none */
    CHECK(strcmp(soc, "Ascend950") == 0 ? size >= KERNEL_SCRATCH_950 : size == 0);
    EXPECT(RUN(aclnnSmoothL1LossBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    CHECK(result_is(&t, -1, 0, 1, 1));
    EXPECT(RUN(aclnnSmoothL1LossBackward, size, executor, stream), ACLNN_ERR_PARAM_INVALID, "already run");
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
    EXPECT(RUN(aclnnSmoothL1LossBackward, size, executor, JUNK(aclrtStream)), ACLNN_ERR_PARAM_INVALID, "stream");
    EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_ERR_PARAM_INVALID, "built by");
    EXPECT(RUN(aclnnSmoothL1LossBackward, size, executor, NULL), ACLNN_SUCCESS, NULL); /* default stream */
    EXPECT(aclrtSynchronizeStream(NULL), ACL_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    free_workspaces();

    /* L1LossBackward, mean; a repeatable executor */
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, NULL, 1, out, &size, &executor), ACLNN_ERR_PARAM_NULLPTR,
           "target");
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 1, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS, NULL);
    EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    CHECK(result_is(&t, -0.25, 0, 0.25, 0.25));
    EXPECT(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS, NULL);
    EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_ERR_PARAM_INVALID, "destroyed");
    free_workspaces();
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
    EXPECT(RUN(aclnnGeluBackwardV2, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    free_workspaces();
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
        /* the pages limit divisorOverride to [-255, 255]; the library on Ascend910B and
         * Ascend950 takes any int64 */
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, kernel, NULL, padding, false, true, 300, 1,
                                                      result, &size, &executor),
               library ? ACLNN_SUCCESS : ACLNN_ERR_PARAM_INVALID, library ? NULL : "divisorOverride");
        if (library) {
            EXPECT(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS, NULL);
        }
        EXPECT(aclnnAvgPool2dBackwardGetWorkspaceSize(grad, input, kernel, NULL, padding, false, true, 0, 1,
                                                      result, &size, &executor),
               ACLNN_SUCCESS, NULL);
        EXPECT(RUN(aclnnAvgPool2dBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
        EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
        free_workspaces();
        CHECK(result_is(&t, 0.25, 0.25, 0.25, 0.25));
        aclDestroyTensor(grad);
        aclDestroyTensor(input);
        aclDestroyTensor(result);
    }

    /* a tensor destroyed between the phases, and one destroyed before the work ran */
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 0, out, &other_size, &other), ACLNN_SUCCESS, NULL);
    EXPECT(RUN(aclnnL1LossBackward, other_size, other, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyTensor(y), ACLNN_SUCCESS, NULL);
    EXPECT(RUN(aclnnSmoothL1LossBackward, size, executor, stream), ACLNN_ERR_PARAM_INVALID, "destroyed");
    EXPECT(aclrtSynchronizeStream(stream), ACLNN_ERR_RUNTIME_ERROR, "destroyed");
    free_workspaces();
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, &executor),
           ACLNN_ERR_PARAM_INVALID, "destroyed");
    t.tensor[2] = NULL;

    EXPECT(aclrtDestroyStream(stream), ACL_SUCCESS, NULL);
    EXPECT(aclDestroyIntArray(kernel), ACLNN_SUCCESS, NULL);
    EXPECT(aclDestroyIntArray(padding), ACLNN_SUCCESS, NULL);
    free_tensors(&t);
}

/* The workspace phase 2 needs: the size phase 1 reported, no less, at a live allocation of
 * that size; a NULL workspace with a size fails, and `library` (CANN's CommonOpExecutorRun)
 * then releases the executor, where the documented contract keeps it for a retry. An
 * L1LossBackward whose target (1, 2) is broadcast to (2, 2) needs a workspace on every SoC
 * (its BroadcastTo output). */
static void workspace_calls(const char *soc, int library)
{
    const float self[4] = {0, 1, 2, 5};
    const int64_t row[2] = {1, 2};
    const int ascend950 = strcmp(soc, "Ascend950") == 0;
    uint64_t size = 0;
    aclOpExecutor *executor = NULL;
    aclrtStream stream = NULL;
    void *small = NULL;
    char needed[64];
    Tensors t;
    aclTensor *g, *x, *y, *row_target, *out;

    make_tensors(&t, self);
    g = t.tensor[0], x = t.tensor[1], y = t.tensor[2], out = t.tensor[3];
    row_target = aclCreateTensor(row, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCHW, row, 2, t.memory[2]);
    CHECK(row_target != NULL);
    EXPECT(aclrtCreateStream(&stream), ACL_SUCCESS, NULL);
    EXPECT(aclrtMalloc(&small, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, NULL);

    /* SmoothL1 on Ascend950: the kernel's 16 MiB tiling workspace, and not a byte less */
    EXPECT(aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0f, out, &size, &executor), ACLNN_SUCCESS, NULL);
    CHECK(ascend950 ? size >= KERNEL_SCRATCH_950 : size == 0);
    if (size > 0) {
        snprintf(needed, sizeof needed, "workspaceSize must be >= %llu", (unsigned long long)size);
        EXPECT(aclnnSmoothL1LossBackward(new_workspace(__LINE__, size), size - 1, executor, stream),
               ACLNN_ERR_PARAM_INVALID, needed);
    }
    EXPECT(aclrtMemset(t.memory[3], 16, 0, 16), ACL_SUCCESS, NULL);
    EXPECT(RUN(aclnnSmoothL1LossBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    CHECK(result_is(&t, -1, 0, 1, 1));
    free_workspaces();

    /* L1 with a broadcast target: too small a size or allocation is refused, and the
     * executor still runs with the right ones */
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, row_target, 0, out, &size, &executor), ACLNN_SUCCESS, NULL);
    CHECK(size > 0 && (!ascend950 || size >= KERNEL_SCRATCH_950));
    snprintf(needed, sizeof needed, "workspaceSize must be >= %llu", (unsigned long long)size);
    EXPECT(aclnnL1LossBackward(new_workspace(__LINE__, size), size - 1, executor, stream), ACLNN_ERR_PARAM_INVALID,
           needed);
    EXPECT(aclnnL1LossBackward(new_workspace(__LINE__, size), 0, executor, stream), ACLNN_ERR_PARAM_INVALID,
           needed);
    EXPECT(aclnnL1LossBackward(small, size, executor, stream), ACLNN_ERR_PARAM_INVALID,
           "not a live device allocation");
    EXPECT(aclnnL1LossBackward(JUNK(void *), size, executor, stream), ACLNN_ERR_PARAM_INVALID,
           "not a live device allocation");
    EXPECT(aclrtMemset(t.memory[3], 16, 0, 16), ACL_SUCCESS, NULL);
    EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
    EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
    CHECK(result_is(&t, -1, 0, 1, 1));
    free_workspaces();

    /* NULL workspace, workspaceSize > 0: 161001 in both contracts; then the executor is
     * gone (library) or runs when given its workspace (documented) */
    EXPECT(aclnnL1LossBackwardGetWorkspaceSize(g, x, row_target, 0, out, &size, &executor), ACLNN_SUCCESS, NULL);
    EXPECT(aclnnL1LossBackward(NULL, size, executor, stream), ACLNN_ERR_PARAM_NULLPTR, "workspace");
    EXPECT(aclrtMemset(t.memory[3], 16, 0, 16), ACL_SUCCESS, NULL);
    if (library) {
        EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_ERR_PARAM_INVALID, "destroyed");
        EXPECT(aclDestroyAclOpExecutor(executor), ACLNN_ERR_PARAM_INVALID, "destroyed");
        EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
        CHECK(result_is(&t, 0, 0, 0, 0)); /* nothing ran */
    } else {
        EXPECT(RUN(aclnnL1LossBackward, size, executor, stream), ACLNN_SUCCESS, NULL);
        EXPECT(aclrtSynchronizeStream(stream), ACL_SUCCESS, NULL);
        CHECK(result_is(&t, -1, 0, 1, 1));
    }
    free_workspaces();

    EXPECT(aclrtFree(small), ACL_SUCCESS, NULL);
    EXPECT(aclrtDestroyStream(stream), ACL_SUCCESS, NULL);
    EXPECT(aclDestroyTensor(row_target), ACLNN_SUCCESS, NULL);
    free_tensors(&t);
}

int main(int argc, char **argv)
{
    const char *soc = argc > 1 ? argv[1] : "Ascend910B", *contract;
    int library;
    if (argc > 2 && setenv("ACLNN_CONTRACT", argv[2], 1) != 0) {
        return 2;
    }
    contract = getenv("ACLNN_CONTRACT"); /* unset or empty: the default, library */
    library = contract == NULL || *contract == '\0' || strcmp(contract, "library") == 0;
    runtime_calls(soc);
    memory_calls();
    object_calls();
    operator_calls(soc, library);
    workspace_calls(soc, library);
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
