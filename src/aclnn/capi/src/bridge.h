/*
 * The functions of the aclnn Python package that the C API calls through cffi
 * (aclnn.capi.bridge implements each with @ffi.def_extern), and those it calls directly.
 * One declaration per line: the SDK build turns this file into cffi's `extern "Python"`
 * block and into shim.c's static prototypes.
 *
 * Handles (tensors, int arrays, scalars, executors, streams) and addresses cross as
 * uint64_t; 0 is C's NULL. An out-parameter is NULL when the caller passed NULL.
 * Lines without ACLNN_PY are shared constants, and C functions Python calls back.
 *
 * shim.c calls these directly (see aclnn_call_direct), with Python ints for handles and
 * pointers, a float for beta and bools for the flags, each returning an int:
 *   aclnn_py_smooth_l1_loss_backward(grad_out, self, target, reduction, beta, grad_input,
 *                                    workspace_size)
 *   aclnn_py_l1_loss_backward(grad_output, self, target, reduction, grad_input, workspace_size)
 *   aclnn_py_gelu_backward_v2(grad_output, self, approximate, grad_input, workspace_size)
 *   aclnn_py_avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
 *                                count_include_pad, divisor_override, cube_math_type,
 *                                grad_input, workspace_size)
 *   aclnn_py_execute(op, workspace, workspace_size, executor, stream)
 *   aclnn_py_synchronize_stream(stream)
 *   internal_error(exc_type, exc_value, traceback)
 * Phase 1 returns its executor's handle on success, else its status: a handle is never
 * below ACLNN_HANDLE_MIN, a status always is (the C side checks the caller's
 * out-parameters first); it writes a workspace size other than 0 through the uint64_t at
 * `workspace_size`.
 */
int aclnn_host_mapped(uint64_t address, uint64_t size);
enum aclnn_kind { ACLNN_TENSOR, ACLNN_INT_ARRAY, ACLNN_SCALAR, ACLNN_EXECUTOR };
enum aclnn_dims { ACLNN_VIEW_SHAPE, ACLNN_STORAGE_SHAPE, ACLNN_VIEW_STRIDES };
enum aclnn_attribute { ACLNN_VIEW_OFFSET, ACLNN_FORMAT, ACLNN_DATA_TYPE };
#define ACLNN_HANDLE_MIN 0x100000000
enum aclnn_op { ACLNN_OP_SMOOTH_L1_LOSS_BACKWARD, ACLNN_OP_L1_LOSS_BACKWARD, ACLNN_OP_GELU_BACKWARD_V2, ACLNN_OP_AVG_POOL2D_BACKWARD };
ACLNN_PY int32_t aclnn_py_fail(int32_t status, const char *message);
ACLNN_PY const char *aclnn_py_recent_err_msg(void);
ACLNN_PY void aclnn_py_enter_thread(void);
ACLNN_PY int32_t aclnn_py_init(const char *config_path);
ACLNN_PY int32_t aclnn_py_finalize(void);
ACLNN_PY int32_t aclnn_py_set_device(int32_t device_id);
ACLNN_PY int32_t aclnn_py_reset_device(int32_t device_id);
ACLNN_PY int32_t aclnn_py_get_device(int32_t *device_id);
ACLNN_PY int32_t aclnn_py_get_device_count(uint32_t *count);
ACLNN_PY int32_t aclnn_py_synchronize_device(void);
ACLNN_PY const char *aclnn_py_soc_name(void);
ACLNN_PY int32_t aclnn_py_create_stream(uint64_t *stream);
ACLNN_PY int32_t aclnn_py_destroy_stream(uint64_t stream);
ACLNN_PY int32_t aclnn_py_malloc(uint64_t *address, uint64_t size, int32_t policy);
ACLNN_PY int32_t aclnn_py_free(uint64_t address);
ACLNN_PY int32_t aclnn_py_malloc_host(uint64_t *address, uint64_t size);
ACLNN_PY int32_t aclnn_py_free_host(uint64_t address);
ACLNN_PY int32_t aclnn_py_memcpy(uint64_t dst, uint64_t dst_max, uint64_t src, uint64_t count, int32_t kind);
ACLNN_PY int32_t aclnn_py_memset(uint64_t address, uint64_t max_count, int32_t value, uint64_t count);
ACLNN_PY uint64_t aclnn_py_create_tensor(const int64_t *view_dims, uint64_t view_rank, int32_t dtype, const int64_t *strides, int64_t offset, int32_t format, const int64_t *storage_dims, uint64_t storage_rank, uint64_t address);
ACLNN_PY uint64_t aclnn_py_create_int_array(const int64_t *values, uint64_t size);
ACLNN_PY uint64_t aclnn_py_create_scalar(const void *value, int32_t dtype);
ACLNN_PY int32_t aclnn_py_destroy(uint64_t handle, int32_t kind);
ACLNN_PY int32_t aclnn_py_tensor_dims(uint64_t tensor, int32_t which, int64_t *dims, uint64_t capacity, uint64_t *rank);
ACLNN_PY int32_t aclnn_py_tensor_attribute(uint64_t tensor, int32_t which, int64_t *value);
ACLNN_PY int32_t aclnn_py_set_repeatable(uint64_t executor);
