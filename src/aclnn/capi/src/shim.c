/*
 * The exported C API of aclnn. Every function first makes sure the embedded Python
 * runtime is up (the first call, in whichever thread makes it, starts the interpreter and
 * cffi runs the package's start-up code), then hands its arguments to the aclnn Python
 * package (bridge.h), which does the work with the same objects as the Python API: one
 * runtime per process, shared by C and Python.
 *
 * If the runtime cannot start (no usable Python, a broken environment), the cause is
 * printed on stderr and every call fails: aclError functions return ACL_ERROR_FAILURE,
 * aclnnStatus functions ACLNN_ERR_INNER, constructors NULL.
 *
 * Including the public headers here makes the compiler check every prototype they
 * declare against its definition.
 */
#include <dlfcn.h> /* Python.h, included first, defines _GNU_SOURCE */
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclnn/opdev/op_errno.h"
#include "aclnnop/aclnn_avgpool2d_backward.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "aclnnop/aclnn_l1_loss_backward.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"

#define ACLNN_PY static
#include "bridge.h"

#define HANDLE(pointer) ((uint64_t)(uintptr_t)(pointer))
#define POINTER(type, handle) ((type)(uintptr_t)(handle))
/* Where a caller's out-parameter is NULL the Python side sees NULL, else a local. */
#define OUT(pointer, local) ((pointer) != NULL ? &(local) : NULL)
#define MAX_DIMS 64 /* the highest rank aclCreateTensor accepts */

/* A host that dlopen()s this library RTLD_LOCAL hides libpython's symbols from the
 * extension modules Python loads later (NumPy, Numba): make them global. */
__attribute__((constructor)) static void aclnn_promote_libpython(void)
{
    dlopen(ACLNN_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static const char START_FAILED[] =
    "aclnn: the Python runtime behind the C API failed to start (its error is on stderr)";

static int interpreter_failed;

/* Start the interpreter the SDK was built with (ACLNN_PYTHON) as if that program ran,
 * so a virtual environment's python finds its own site-packages, and without signal
 * handlers (the host program owns its signals). A Python host's own interpreter serves
 * as it is. Errors are reported, never fatal. */
static void aclnn_start_interpreter(void)
{
    PyConfig config;
    PyStatus status;
    if (Py_IsInitialized()) {
        return;
    }
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    status = PyConfig_SetBytesString(&config, &config.program_name, ACLNN_PYTHON);
    if (!PyStatus_Exception(status)) {
        status = Py_InitializeFromConfig(&config);
    }
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        interpreter_failed = 1;
        fprintf(stderr, "aclnn: cannot start the Python interpreter %s: %s\n", ACLNN_PYTHON,
                status.err_msg != NULL ? status.err_msg : "unknown error");
        return;
    }
    PyEval_SaveThread(); /* cffi takes the GIL per call */
}

/* ---- the calls a program repeats, made directly ----------------------------------------
 * Phase 1, phase 2 and aclrtSynchronizeStream call their bridge.py functions with the
 * CPython API instead of through cffi's `extern "Python"`, whose generic callback
 * converts every argument by its type descriptor: five integers took 0.87 us a call that
 * way and 0.37 us this way, and the C API's 8-element call (two phases + synchronize)
 * about 2 us less (19.9 against 17.8 us, a 2 GHz AMD EPYC). The functions are looked up
 * once, when the runtime starts; their arguments are Python ints (pointers as addresses),
 * floats and bools, their result an int. A Python exception (a bug in the bridge)
 * becomes `failure` with an internal-error message, as cffi's onerror makes it for the
 * other calls. */
enum aclnn_direct {
    DIRECT_SMOOTH_L1_LOSS_BACKWARD,
    DIRECT_L1_LOSS_BACKWARD,
    DIRECT_GELU_BACKWARD_V2,
    DIRECT_AVG_POOL2D_BACKWARD,
    DIRECT_EXECUTE,
    DIRECT_SYNCHRONIZE_STREAM,
    DIRECT_INTERNAL_ERROR,
    DIRECT_COUNT
};
static const char *const DIRECT_NAMES[DIRECT_COUNT] = {
    "aclnn_py_smooth_l1_loss_backward", "aclnn_py_l1_loss_backward", "aclnn_py_gelu_backward_v2",
    "aclnn_py_avg_pool2d_backward", "aclnn_py_execute", "aclnn_py_synchronize_stream",
    "internal_error"};
static PyObject *direct_functions[DIRECT_COUNT];
static int direct_failed;

/* Look the direct functions up in aclnn.capi.bridge (run once, after cffi started the
 * runtime, which imported it); a failure is printed on stderr. */
static void aclnn_find_direct(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *bridge = PyImport_ImportModule("aclnn.capi.bridge");
    int i;
    for (i = 0; bridge != NULL && i < DIRECT_COUNT; i++) {
        direct_functions[i] = PyObject_GetAttrString(bridge, DIRECT_NAMES[i]);
        if (direct_functions[i] == NULL) {
            break;
        }
    }
    if (bridge == NULL || i < DIRECT_COUNT) {
        direct_failed = 1;
        PyErr_Print();
    }
    Py_XDECREF(bridge);
    PyGILState_Release(gil);
}

/* 1 once the Python runtime runs; 0 if it failed to start (said once on stderr). */
static int aclnn_started(void)
{
    static pthread_once_t interpreter = PTHREAD_ONCE_INIT, direct = PTHREAD_ONCE_INIT;
    static int started = 0, reported = 0;
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    pthread_once(&interpreter, aclnn_start_interpreter);
    if (!interpreter_failed && cffi_start_python() == 0) {
        pthread_once(&direct, aclnn_find_direct);
        if (!direct_failed) {
            __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
            return 1;
        }
    }
    if (!__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED)) {
        fprintf(stderr, "%s; every aclnn call fails.\n", START_FAILED);
    }
    return 0;
}

#define DIRECT_MAX_ARGUMENTS 11 /* aclnn_py_avg_pool2d_backward's */

/* The GIL for a direct call. A thread without a Python thread state gets one from a cffi
 * callback first, which keeps it until the thread ends: PyGILState_Ensure alone would
 * make and delete one at every call (a crossing took 9.3 us so, against 0.35). */
static PyGILState_STATE aclnn_enter(void)
{
    if (PyGILState_GetThisThreadState() == NULL) {
        aclnn_py_enter_thread();
    }
    return PyGILState_Ensure();
}

/* The raised exception as this thread's internal-error message (the GIL held). */
static void aclnn_report_exception(void)
{
    PyObject *type, *error, *reported;
#if PY_VERSION_HEX >= 0x030C0000
    error = PyErr_GetRaisedException();
    type = Py_NewRef(Py_TYPE(error));
#else
    PyObject *traceback;
    PyErr_Fetch(&type, &error, &traceback);
    PyErr_NormalizeException(&type, &error, &traceback);
    Py_XDECREF(traceback);
#endif
    reported = PyObject_CallFunctionObjArgs(direct_functions[DIRECT_INTERNAL_ERROR], type, error,
                                            Py_None, NULL);
    Py_XDECREF(reported);
    Py_XDECREF(type);
    Py_XDECREF(error);
    PyErr_Clear();
}

/* Call direct function `which` (the runtime started) with one argument per letter of
 * `kinds`: K a uint64_t as an int, L an int64_t as an int, d a double as a float, b an int
 * as a bool. Its int result, or `failure` where it raised or gave something else. */
static uint64_t aclnn_call_direct(enum aclnn_direct which, uint64_t failure, const char *kinds,
                                  ...)
{
    PyGILState_STATE gil = aclnn_enter();
    PyObject *arguments[DIRECT_MAX_ARGUMENTS], *result = NULL;
    size_t count = 0;
    int built = 1;
    uint64_t value = failure;
    va_list list;
    va_start(list, kinds);
    for (; kinds[count] != '\0'; count++) {
        switch (kinds[count]) {
        case 'K': arguments[count] = PyLong_FromUnsignedLongLong(va_arg(list, uint64_t)); break;
        case 'L': arguments[count] = PyLong_FromLongLong(va_arg(list, int64_t)); break;
        case 'd': arguments[count] = PyFloat_FromDouble(va_arg(list, double)); break;
        default: arguments[count] = PyBool_FromLong(va_arg(list, int)); break;
        }
        built = built && arguments[count] != NULL;
    }
    va_end(list);
    if (built) {
        result = PyObject_Vectorcall(direct_functions[which], arguments, count, NULL);
    }
    while (count > 0) {
        Py_XDECREF(arguments[--count]);
    }
    if (result != NULL) {
        value = PyLong_AsUnsignedLongLong(result);
        Py_DECREF(result);
    }
    if (PyErr_Occurred()) {
        aclnn_report_exception();
        value = failure;
    }
    PyGILState_Release(gil);
    return value;
}

#define START_OR_RETURN(failure) \
    do {                         \
        if (!aclnn_started()) {  \
            return (failure);    \
        }                        \
    } while (0)

/* Whether [address, address + size) is mapped memory of this process, so that a junk
 * host pointer given to aclrtMemcpy fails with a status instead of crashing. */
int aclnn_host_mapped(uint64_t address, uint64_t size)
{
    unsigned char resident[256];
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = address & ~(page - 1);
    const uint64_t end = address + size;
    if (address == 0 || end < address) {
        return 0;
    }
    while (start < end) {
        uint64_t length = end - start;
        if (length > sizeof resident * page) {
            length = sizeof resident * page;
        }
        if (mincore(POINTER(void *, start), (size_t)length, resident) != 0) {
            return 0;
        }
        start += length;
    }
    return 1;
}

/* ---- runtime (acl/acl_rt.h) ---------------------------------------------------------- */

aclError aclInit(const char *configPath)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_init(configPath);
}

aclError aclFinalize(void)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_finalize();
}

const char *aclGetRecentErrMsg(void)
{
    START_OR_RETURN(START_FAILED);
    return aclnn_py_recent_err_msg();
}

aclError aclrtSetDevice(int32_t deviceId)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_set_device(deviceId);
}

aclError aclrtResetDevice(int32_t deviceId)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_reset_device(deviceId);
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_get_device(deviceId);
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_get_device_count(count);
}

aclError aclrtSynchronizeDevice(void)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_synchronize_device();
}

const char *aclrtGetSocName(void)
{
    START_OR_RETURN(NULL);
    return aclnn_py_soc_name();
}

aclError aclrtCreateStream(aclrtStream *stream)
{
    uint64_t handle = 0;
    aclError status;
    START_OR_RETURN(ACL_ERROR_FAILURE);
    status = aclnn_py_create_stream(OUT(stream, handle));
    if (status == ACL_SUCCESS) {
        *stream = POINTER(aclrtStream, handle);
    }
    return status;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_destroy_stream(HANDLE(stream));
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return (aclError)aclnn_call_direct(DIRECT_SYNCHRONIZE_STREAM, ACL_ERROR_RT_INTERNAL_ERROR,
                                       "K", HANDLE(stream));
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    uint64_t address = 0;
    aclError status;
    START_OR_RETURN(ACL_ERROR_FAILURE);
    status = aclnn_py_malloc(OUT(devPtr, address), size, (int32_t)policy);
    if (status == ACL_SUCCESS) {
        *devPtr = POINTER(void *, address);
    }
    return status;
}

aclError aclrtFree(void *devPtr)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_free(HANDLE(devPtr));
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    uint64_t address = 0;
    aclError status;
    START_OR_RETURN(ACL_ERROR_FAILURE);
    status = aclnn_py_malloc_host(OUT(hostPtr, address), size);
    if (status == ACL_SUCCESS) {
        *hostPtr = POINTER(void *, address);
    }
    return status;
}

aclError aclrtFreeHost(void *hostPtr)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_free_host(HANDLE(hostPtr));
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_memcpy(HANDLE(dst), destMax, HANDLE(src), count, (int32_t)kind);
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    START_OR_RETURN(ACL_ERROR_FAILURE);
    return aclnn_py_memset(HANDLE(devPtr), maxCount, value, count);
}

/* ---- objects (aclnn/acl_meta.h, aclnn/aclnn_base.h) ----------------------------------- */

aclnnStatus aclnnInit(const char *configPath)
{
    (void)configPath;
    START_OR_RETURN(ACLNN_ERR_INNER);
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return ACLNN_SUCCESS;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData)
{
    START_OR_RETURN(NULL);
    return POINTER(aclTensor *, aclnn_py_create_tensor(viewDims, viewDimsNum, (int32_t)dataType,
                                                       stride, offset, (int32_t)format, storageDims,
                                                       storageDimsNum, HANDLE(tensorData)));
}

aclScalar *aclCreateScalar(void *value, aclDataType dataType)
{
    START_OR_RETURN(NULL);
    return POINTER(aclScalar *, aclnn_py_create_scalar(value, (int32_t)dataType));
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)
{
    START_OR_RETURN(NULL);
    return POINTER(aclIntArray *, aclnn_py_create_int_array(value, size));
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return aclnn_py_destroy(HANDLE(tensor), ACLNN_TENSOR);
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return aclnn_py_destroy(HANDLE(scalar), ACLNN_SCALAR);
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return aclnn_py_destroy(HANDLE(array), ACLNN_INT_ARRAY);
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return aclnn_py_destroy(HANDLE(executor), ACLNN_EXECUTOR);
}

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return aclnn_py_set_repeatable(HANDLE(executor));
}

/* Whether the main program links a C++ runtime (libstdc++, libc++) itself: read from
 * its DT_NEEDED entries (the first object dl_iterate_phdr reports is the program). */
static int aclnn_program_needs(struct dl_phdr_info *info, size_t size, void *is_cxx)
{
    const ElfW(Dyn) *dynamic = NULL, *entry;
    uintptr_t strings = 0;
    int i;
    (void)size;
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        }
    }
    for (entry = dynamic; entry != NULL && entry->d_tag != DT_NULL; entry++) {
        if (entry->d_tag == DT_STRTAB) {
            strings = entry->d_un.d_ptr; /* relocated by the loader, unless below the base */
            strings += strings < info->dlpi_addr ? info->dlpi_addr : 0;
        }
    }
    for (entry = dynamic; entry != NULL && strings != 0 && entry->d_tag != DT_NULL; entry++) {
        const char *name = (const char *)(strings + entry->d_un.d_val);
        if (entry->d_tag == DT_NEEDED && (strstr(name, "libstdc++") || strstr(name, "libc++"))) {
            *(int *)is_cxx = 1;
        }
    }
    return 1;
}

/* C++ callers release the getters' arrays with delete[] (CANN's rule), C callers with
 * free(): the arrays come from operator new[] in a C++ program, else from malloc(). */
extern void *_ZnamRKSt9nothrow_t(size_t size, const void *tag) __attribute__((weak));
extern const char _ZSt7nothrow __attribute__((weak));

static int64_t *aclnn_new_dims(uint64_t count)
{
    static int program_is_cxx = -1;
    const size_t size = (size_t)count * sizeof(int64_t);
    if (program_is_cxx < 0) {
        int is_cxx = 0;
        dl_iterate_phdr(aclnn_program_needs, &is_cxx);
        program_is_cxx = is_cxx && _ZnamRKSt9nothrow_t != NULL && &_ZSt7nothrow != NULL;
    }
    if (program_is_cxx) {
        return (int64_t *)_ZnamRKSt9nothrow_t(size, &_ZSt7nothrow);
    }
    return (int64_t *)malloc(size > 0 ? size : 1);
}

static aclnnStatus aclnn_get_dims(const aclTensor *tensor, int32_t which, int64_t **dims,
                                  uint64_t *rank)
{
    int64_t buffer[MAX_DIMS];
    uint64_t count = 0;
    int64_t *array;
    aclnnStatus status;
    START_OR_RETURN(ACLNN_ERR_INNER);
    status = aclnn_py_tensor_dims(HANDLE(tensor), which, dims != NULL ? buffer : NULL, MAX_DIMS,
                                  OUT(rank, count));
    if (status != ACLNN_SUCCESS) {
        return status;
    }
    array = aclnn_new_dims(count);
    if (array == NULL) {
        return aclnn_py_fail(ACLNN_ERR_INNER_NULLPTR, "aclnn: cannot allocate the dims array");
    }
    memcpy(array, buffer, (size_t)count * sizeof(int64_t));
    *dims = array;
    *rank = count;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum)
{
    return aclnn_get_dims(tensor, ACLNN_VIEW_SHAPE, viewDims, viewDimsNum);
}

aclnnStatus aclGetStorageShape(const aclTensor *tensor, int64_t **storageDims,
                               uint64_t *storageDimsNum)
{
    return aclnn_get_dims(tensor, ACLNN_STORAGE_SHAPE, storageDims, storageDimsNum);
}

aclnnStatus aclGetViewStrides(const aclTensor *tensor, int64_t **stridesValue, uint64_t *stridesNum)
{
    return aclnn_get_dims(tensor, ACLNN_VIEW_STRIDES, stridesValue, stridesNum);
}

aclnnStatus aclGetViewOffset(const aclTensor *tensor, int64_t *offset)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return aclnn_py_tensor_attribute(HANDLE(tensor), ACLNN_VIEW_OFFSET, offset);
}

aclnnStatus aclGetFormat(const aclTensor *tensor, aclFormat *format)
{
    int64_t value = 0;
    aclnnStatus status;
    START_OR_RETURN(ACLNN_ERR_INNER);
    status = aclnn_py_tensor_attribute(HANDLE(tensor), ACLNN_FORMAT, OUT(format, value));
    if (status == ACLNN_SUCCESS) {
        *format = (aclFormat)value;
    }
    return status;
}

aclnnStatus aclGetDataType(const aclTensor *tensor, aclDataType *dataType)
{
    int64_t value = 0;
    aclnnStatus status;
    START_OR_RETURN(ACLNN_ERR_INNER);
    status = aclnn_py_tensor_attribute(HANDLE(tensor), ACLNN_DATA_TYPE, OUT(dataType, value));
    if (status == ACLNN_SUCCESS) {
        *dataType = (aclDataType)value;
    }
    return status;
}

/* ---- operators (aclnnop/aclnn_*.h) ------------------------------------------------------ */

/* Phase 1's out-parameters: 161001 (and the message) for the first that is NULL. */
static aclnnStatus aclnn_null_outputs(const char *op, const uint64_t *workspaceSize,
                                      aclOpExecutor **executor)
{
    char message[160];
    const char *name = workspaceSize == NULL ? "workspaceSize" : executor == NULL ? "executor" : NULL;
    if (name == NULL) {
        return ACLNN_SUCCESS;
    }
    snprintf(message, sizeof message, "%sGetWorkspaceSize: %s must not be null, got NULL.", op, name);
    return aclnn_py_fail(ACLNN_ERR_PARAM_NULLPTR, message);
}

/* Phase 1's status from the bridge's result (an executor's handle or a status); on
 * success its workspace size and executor, through the caller's pointers. */
static aclnnStatus aclnn_planned(uint64_t result, uint64_t size, uint64_t *workspaceSize,
                                 aclOpExecutor **executor)
{
    if (result < ACLNN_HANDLE_MIN) {
        return (aclnnStatus)result;
    }
    *workspaceSize = size;
    *executor = POINTER(aclOpExecutor *, result);
    return ACLNN_SUCCESS;
}

#define PHASE_ONE_START(op)                                                  \
    uint64_t size = 0;                                                       \
    uint64_t result;                                                         \
    aclnnStatus status;                                                      \
    START_OR_RETURN(ACLNN_ERR_INNER);                                        \
    status = aclnn_null_outputs(op, workspaceSize, executor);                \
    if (status != ACLNN_SUCCESS) {                                           \
        return status;                                                       \
    }

aclnnStatus aclnnSmoothL1LossBackwardGetWorkspaceSize(const aclTensor *gradOut,
                                                      const aclTensor *self,
                                                      const aclTensor *target, int64_t reduction,
                                                      float beta, aclTensor *gradInput,
                                                      uint64_t *workspaceSize,
                                                      aclOpExecutor **executor)
{
    PHASE_ONE_START("aclnnSmoothL1LossBackward")
    result = aclnn_call_direct(DIRECT_SMOOTH_L1_LOSS_BACKWARD, ACLNN_ERR_INNER, "KKKLdKK",
                               HANDLE(gradOut), HANDLE(self), HANDLE(target), reduction,
                               (double)beta, HANDLE(gradInput), HANDLE(&size));
    return aclnn_planned(result, size, workspaceSize, executor);
}

aclnnStatus aclnnL1LossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                const aclTensor *target, int64_t reduction,
                                                aclTensor *gradInput, uint64_t *workspaceSize,
                                                aclOpExecutor **executor)
{
    PHASE_ONE_START("aclnnL1LossBackward")
    result = aclnn_call_direct(DIRECT_L1_LOSS_BACKWARD, ACLNN_ERR_INNER, "KKKLKK",
                               HANDLE(gradOutput), HANDLE(self), HANDLE(target), reduction,
                               HANDLE(gradInput), HANDLE(&size));
    return aclnn_planned(result, size, workspaceSize, executor);
}

aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                char *approximate, aclTensor *gradInput,
                                                uint64_t *workspaceSize, aclOpExecutor **executor)
{
    PHASE_ONE_START("aclnnGeluBackwardV2")
    result = aclnn_call_direct(DIRECT_GELU_BACKWARD_V2, ACLNN_ERR_INNER, "KKKKK",
                               HANDLE(gradOutput), HANDLE(self), HANDLE(approximate),
                               HANDLE(gradInput), HANDLE(&size));
    return aclnn_planned(result, size, workspaceSize, executor);
}

aclnnStatus aclnnAvgPool2dBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *kernelSize,
    const aclIntArray *stride, const aclIntArray *padding, bool ceilMode, bool countIncludePad,
    int64_t divisorOverride, int8_t cubeMathType, aclTensor *gradInput, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    PHASE_ONE_START("aclnnAvgPool2dBackward")
    result = aclnn_call_direct(DIRECT_AVG_POOL2D_BACKWARD, ACLNN_ERR_INNER, "KKKKKbbLLKK",
                               HANDLE(gradOutput), HANDLE(self), HANDLE(kernelSize),
                               HANDLE(stride), HANDLE(padding), (int)ceilMode,
                               (int)countIncludePad, divisorOverride, (int64_t)cubeMathType,
                               HANDLE(gradInput), HANDLE(&size));
    return aclnn_planned(result, size, workspaceSize, executor);
}

static aclnnStatus aclnn_execute(int32_t op, void *workspace, uint64_t workspaceSize,
                                 aclOpExecutor *executor, aclrtStream stream)
{
    START_OR_RETURN(ACLNN_ERR_INNER);
    return (aclnnStatus)aclnn_call_direct(DIRECT_EXECUTE, ACLNN_ERR_INNER, "LKKKK", (int64_t)op,
                                          HANDLE(workspace), workspaceSize,
                                          HANDLE(executor), HANDLE(stream));
}

aclnnStatus aclnnSmoothL1LossBackward(void *workspace, uint64_t workspaceSize,
                                      aclOpExecutor *executor, aclrtStream stream)
{
    return aclnn_execute(ACLNN_OP_SMOOTH_L1_LOSS_BACKWARD, workspace, workspaceSize, executor, stream);
}

aclnnStatus aclnnL1LossBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                aclrtStream stream)
{
    return aclnn_execute(ACLNN_OP_L1_LOSS_BACKWARD, workspace, workspaceSize, executor, stream);
}

aclnnStatus aclnnGeluBackwardV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                const aclrtStream stream)
{
    return aclnn_execute(ACLNN_OP_GELU_BACKWARD_V2, workspace, workspaceSize, executor, stream);
}

aclnnStatus aclnnAvgPool2dBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                   aclrtStream stream)
{
    return aclnn_execute(ACLNN_OP_AVG_POOL2D_BACKWARD, workspace, workspaceSize, executor, stream);
}
