"""Tensor model (SPEC §2-§4): aclCreateTensor validation, getters, int arrays, scalars,
constants and the per-thread recent error message."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import aclnn
from aclnn import acl
from support import run_phase_two

FLOAT = 0
ND = 2


@pytest.fixture
def alloc():
    """alloc(nbytes, host=None) -> ptr; everything is freed after the test."""
    live = []

    def make(nbytes, host=None):
        ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0
        live.append(ptr)
        if host is not None:
            host = np.ascontiguousarray(host)
            assert host.nbytes <= nbytes
            ret = acl.rt.memcpy(
                ptr, nbytes, acl.util.numpy_to_ptr(host), host.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE
            )
            assert ret == 0
        return ptr

    yield make
    for ptr in live:
        acl.rt.free(ptr)


@pytest.fixture
def created():
    """A list to append created tensors to; they are destroyed after the test."""
    tensors = []
    yield tensors
    for t in tensors:
        if t is not None:
            aclnn.aclDestroyTensor(t)


def create(view, dtype, strides, offset, fmt, storage, addr):
    return aclnn.aclCreateTensor(view, dtype, strides, offset, fmt, storage, addr)


def expect_rejected(*args, needles=()):
    t = create(*args)
    msg = aclnn.aclGetRecentErrMsg()
    assert t is None, f"aclCreateTensor{args!r} was accepted"
    assert msg, "no error message set"
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------------------- valid tensors


def test_spec_example_noncontiguous_view_is_valid(alloc, created):
    ptr = alloc(400)
    t = create([6, 5], aclnn.ACL_FLOAT, [10, 1], 22, aclnn.ACL_FORMAT_ND, [10, 10], ptr)
    assert t is not None, aclnn.aclGetRecentErrMsg()
    created.append(t)
    shape, ret = aclnn.aclGetViewShape(t)
    assert ret == 0
    assert list(shape) == [6, 5]


def test_spec_example_view_selects_the_documented_elements(alloc, created):
    """Run L1LossBackward on the (6,5)/(10,1)/22 view: the output is sign(view)."""
    storage = (np.arange(100, dtype=np.float32) - 50.0).reshape(10, 10)
    ptr = alloc(400, storage)
    x = create([6, 5], aclnn.ACL_FLOAT, [10, 1], 22, aclnn.ACL_FORMAT_ND, [10, 10], ptr)
    g_ptr = alloc(120, np.ones(30, np.float32))
    t_ptr = alloc(120, np.zeros(30, np.float32))
    o_ptr = alloc(120, np.full(30, 9.0, np.float32))
    g = create([6, 5], aclnn.ACL_FLOAT, [5, 1], 0, aclnn.ACL_FORMAT_ND, [6, 5], g_ptr)
    tg = create([6, 5], aclnn.ACL_FLOAT, [5, 1], 0, aclnn.ACL_FORMAT_ND, [6, 5], t_ptr)
    out = create([6, 5], aclnn.ACL_FLOAT, [5, 1], 0, aclnn.ACL_FORMAT_ND, [6, 5], o_ptr)
    created.extend([x, g, tg, out])
    assert None not in (x, g, tg, out)
    ws, ex, ret = aclnn.aclnnL1LossBackwardGetWorkspaceSize(g, x, tg, 0, out)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    assert run_phase_two(aclnn.aclnnL1LossBackward, ws, ex) == 0
    got = acl.util.ptr_to_numpy(o_ptr, (6, 5), np.float32).copy()
    view = storage.reshape(-1)[22:].copy()
    expected = np.sign(np.lib.stride_tricks.as_strided(view, (6, 5), (40, 4)))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "view, strides, offset, storage",
    [
        ([4, 2], [2, 1], 0, [4, 2]),
        ([2, 4], [1, 2], 0, [8]),  # transposed
        ([6, 5], [10, 1], 45, [10, 10]),  # last element is exactly the last of storage
        ([3, 3], [20, 2], 0, [100]),
        ([], [], 0, [1]),  # 0-d tensor
        ([], [], 99, [100]),
        ([0, 3], [3, 1], 0, [0]),  # empty
        ([0, 3], [3, 1], 0, [100]),
        ([100], [1], 0, [100]),
        ([1, 1, 1, 1, 1, 1, 1, 1, 1], [1] * 9, 0, [1]),  # rank 9 is a valid tensor
    ],
)
def test_valid_tensors(alloc, created, view, strides, offset, storage):
    ptr = alloc(400)
    t = create(view, aclnn.ACL_FLOAT, strides, offset, aclnn.ACL_FORMAT_ND, storage, ptr)
    assert t is not None, aclnn.aclGetRecentErrMsg()
    created.append(t)
    shape, ret = aclnn.aclGetViewShape(t)
    assert ret == 0
    assert list(shape) == view


def test_valid_inside_allocation_at_an_offset_address(alloc, created):
    ptr = alloc(400)
    t = create([10], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [84], ptr + 64)
    assert t is not None, aclnn.aclGetRecentErrMsg()
    created.append(t)


@pytest.mark.parametrize(
    "dtype, itemsize",
    [
        (aclnn.ACL_FLOAT16, 2),
        (aclnn.ACL_BF16, 2),
        (aclnn.ACL_INT8, 1),
        (aclnn.ACL_UINT8, 1),
        (aclnn.ACL_INT16, 2),
        (aclnn.ACL_UINT16, 2),
        (aclnn.ACL_INT32, 4),
        (aclnn.ACL_UINT32, 4),
        (aclnn.ACL_INT64, 8),
        (aclnn.ACL_UINT64, 8),
        (aclnn.ACL_DOUBLE, 8),
        (aclnn.ACL_BOOL, 1),
        (aclnn.ACL_COMPLEX64, 8),
        (aclnn.ACL_COMPLEX128, 16),
        (aclnn.ACL_COMPLEX32, 4),
    ],
)
def test_storage_bound_uses_the_element_size(alloc, created, dtype, itemsize):
    ptr = alloc(256)
    n = 256 // itemsize
    t = create([n], dtype, [1], 0, aclnn.ACL_FORMAT_ND, [n], ptr)
    assert t is not None, aclnn.aclGetRecentErrMsg()
    created.append(t)
    value, ret = aclnn.aclGetDataType(t)
    assert (value, ret) == (dtype, 0)
    expect_rejected([n + 1], dtype, [1], 0, aclnn.ACL_FORMAT_ND, [n + 1], ptr)


@pytest.mark.parametrize(
    "fmt",
    [0, 1, 2, 3, 4, 12, 16, 27, 29, 30, 32, 33, 35, 47],
)
def test_every_format_accepted_and_reported(alloc, created, fmt):
    ptr = alloc(64)
    t = create([2, 2], aclnn.ACL_FLOAT, [2, 1], 0, fmt, [4], ptr)
    assert t is not None, aclnn.aclGetRecentErrMsg()
    created.append(t)
    assert aclnn.aclGetFormat(t) == (fmt, 0)


def test_getters(alloc, created):
    ptr = alloc(64)
    t = create([4, 2], aclnn.ACL_FLOAT16, [2, 1], 0, aclnn.ACL_FORMAT_NCHW, [8], ptr)
    assert t is not None
    created.append(t)
    shape, ret = aclnn.aclGetViewShape(t)
    assert ret == 0 and list(shape) == [4, 2]
    assert aclnn.aclGetDataType(t) == (aclnn.ACL_FLOAT16, 0)
    assert aclnn.aclGetFormat(t) == (aclnn.ACL_FORMAT_NCHW, 0)


def test_getters_reject_none():
    assert aclnn.aclGetViewShape(None)[-1] != 0
    assert aclnn.aclGetDataType(None)[-1] != 0
    assert aclnn.aclGetFormat(None)[-1] != 0


def test_destroy_tensor_returns_zero(alloc):
    ptr = alloc(64)
    t = create([4], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [4], ptr)
    assert t is not None
    assert aclnn.aclDestroyTensor(t) == 0


def test_tensor_does_not_copy_data(alloc, created):
    """The tensor refers to device memory: later writes are seen by an operator."""
    ptr = alloc(16, np.full(4, -1.0, np.float32))
    g_ptr = alloc(16, np.ones(4, np.float32))
    z_ptr = alloc(16, np.zeros(4, np.float32))
    o_ptr = alloc(16)
    x = create([4], FLOAT, [1], 0, ND, [4], ptr)
    g = create([4], FLOAT, [1], 0, ND, [4], g_ptr)
    z = create([4], FLOAT, [1], 0, ND, [4], z_ptr)
    o = create([4], FLOAT, [1], 0, ND, [4], o_ptr)
    created.extend([x, g, z, o])
    host = np.full(4, 2.0, np.float32)
    ret = acl.rt.memcpy(ptr, 16, acl.util.numpy_to_ptr(host), 16, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == 0
    ws, ex, ret = aclnn.aclnnL1LossBackwardGetWorkspaceSize(g, x, z, 0, o)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    assert run_phase_two(aclnn.aclnnL1LossBackward, ws, ex) == 0
    assert (acl.util.ptr_to_numpy(o_ptr, (4,), np.float32) == 1.0).all()


# ---------------------------------------------------------------------------- rejected tensors


def test_view_past_storage_end(alloc):
    ptr = alloc(400)
    expect_rejected([6, 5], FLOAT, [10, 1], 46, ND, [10, 10], ptr)
    expect_rejected([6, 5], FLOAT, [20, 1], 0, ND, [10, 10], ptr)
    expect_rejected([6, 5], FLOAT, [10, 1], 100, ND, [10, 10], ptr)
    expect_rejected([101], FLOAT, [1], 0, ND, [100], ptr)
    expect_rejected([], FLOAT, [], 100, ND, [100], ptr)


def test_storage_larger_than_allocation(alloc):
    ptr = alloc(400)
    expect_rejected([10, 10], FLOAT, [10, 1], 0, ND, [10, 11], ptr)
    expect_rejected([4], FLOAT, [1], 0, ND, [101], ptr)
    # Room left after ptr + 64 is 84 floats.
    expect_rejected([4], FLOAT, [1], 0, ND, [85], ptr + 64)


@pytest.mark.parametrize("addr", [64, 4096, 1 << 46])
def test_address_in_no_live_allocation(addr):
    expect_rejected([4], FLOAT, [1], 0, ND, [4], addr)


def test_address_past_the_end_of_an_allocation(alloc):
    ptr = alloc(64)
    expect_rejected([4], FLOAT, [1], 0, ND, [4], ptr + 64)


def test_address_of_freed_allocation():
    ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    assert acl.rt.free(ptr) == 0
    expect_rejected([4], FLOAT, [1], 0, ND, [4], ptr)


def test_negative_dims(alloc):
    ptr = alloc(400)
    expect_rejected([-1, 5], FLOAT, [5, 1], 0, ND, [100], ptr, needles=("-1",))
    expect_rejected([3, -3], FLOAT, [5, 1], 0, ND, [100], ptr, needles=("-3",))
    expect_rejected([4], FLOAT, [1], 0, ND, [-100], ptr, needles=("-100",))


def test_negative_offset(alloc):
    ptr = alloc(400)
    expect_rejected([4], FLOAT, [1], -1, ND, [100], ptr, needles=("-1",))
    expect_rejected([4], FLOAT, [1], -4, ND, [100], ptr + 64, needles=("-4",))


@pytest.mark.parametrize("dtype", [99, 5, -5, 1000])
def test_unknown_dtype_enum(alloc, dtype):
    ptr = alloc(400)
    expect_rejected([4], dtype, [1], 0, ND, [4], ptr, needles=(str(dtype),))


@pytest.mark.parametrize("fmt", [99, 5, -5, 1000])
def test_unknown_format_enum(alloc, fmt):
    ptr = alloc(400)
    expect_rejected([4], FLOAT, [1], 0, fmt, [4], ptr, needles=(str(fmt),))


def test_misaligned_address(alloc, created):
    ptr = alloc(400)
    expect_rejected([4], aclnn.ACL_FLOAT, [1], 0, ND, [4], ptr + 2)
    expect_rejected([4], aclnn.ACL_FLOAT, [1], 0, ND, [4], ptr + 1)
    expect_rejected([4], aclnn.ACL_FLOAT16, [1], 0, ND, [4], ptr + 1)
    expect_rejected([4], aclnn.ACL_INT64, [1], 0, ND, [4], ptr + 4)
    # Aligned to the element size is fine.
    for dtype, delta in ((aclnn.ACL_FLOAT16, 2), (aclnn.ACL_INT8, 1), (aclnn.ACL_FLOAT, 4)):
        t = create([4], dtype, [1], 0, ND, [4], ptr + delta)
        assert t is not None, aclnn.aclGetRecentErrMsg()
        created.append(t)


def test_strides_length_must_match_view(alloc):
    ptr = alloc(400)
    expect_rejected([4, 2], FLOAT, [1], 0, ND, [8], ptr)
    expect_rejected([4], FLOAT, [1, 1], 0, ND, [8], ptr)


# ---------------------------------------------------------------------------- error message


def test_recent_error_message_is_per_thread(alloc):
    ptr = alloc(64)
    assert create([4], 99, [1], 0, ND, [4], ptr) is None
    main_msg = aclnn.aclGetRecentErrMsg()
    assert "99" in main_msg
    seen = {}

    def other():
        seen["before"] = aclnn.aclGetRecentErrMsg()
        seen["tensor"] = create([4], FLOAT, [1], 0, 777, [4], ptr)
        seen["after"] = aclnn.aclGetRecentErrMsg()

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert seen["before"] == ""
    assert seen["tensor"] is None
    assert "777" in seen["after"]
    assert aclnn.aclGetRecentErrMsg() == main_msg


# ---------------------------------------------------------------------------- int arrays, scalars


@pytest.mark.parametrize("values", [[2, 2], [3], [], [1, -1, 1 << 40]])
def test_int_array(values):
    arr = aclnn.aclCreateIntArray(values)
    assert arr is not None
    assert aclnn.aclDestroyIntArray(arr) == 0


def test_scalar():
    s = aclnn.aclCreateScalar(1.5, aclnn.ACL_FLOAT)
    assert s is not None and s.value == 1.5
    assert aclnn.aclDestroyScalar(s) == 0


@pytest.mark.parametrize("value, dtype, held", [
    (2, aclnn.ACL_FLOAT, 2.0), (0.1, aclnn.ACL_FLOAT, float(np.float32(0.1))),
    (1 + 0j, aclnn.ACL_FLOAT, 1.0), (float("nan"), aclnn.ACL_FLOAT16, "nan"),
    (float("inf"), aclnn.ACL_FLOAT, float("inf")), (-128, aclnn.ACL_INT8, -128),
    (7.0, aclnn.ACL_INT32, 7), (True, aclnn.ACL_BOOL, True), (3, aclnn.ACL_COMPLEX64, 3 + 0j),
])
def test_scalar_holds_the_value_in_its_dtype(value, dtype, held):
    s = aclnn.aclCreateScalar(value, dtype)
    assert s is not None, aclnn.aclGetRecentErrMsg()
    assert (np.isnan(s.value) if held == "nan" else s.value == held)


@pytest.mark.parametrize("value, dtype, reason", [
    (1.5, aclnn.ACL_INT32, "holds integers only"), (300, aclnn.ACL_INT8, "holds [-128, 127]"),
    (-1, aclnn.ACL_UINT8, "holds [0, 255]"), (2, aclnn.ACL_BOOL, "holds [0, 1]"),
    (float("nan"), aclnn.ACL_INT64, "holds integers only"),
    (1e300, aclnn.ACL_FLOAT, "beyond the range of DT_FLOAT"),
    (1e5, aclnn.ACL_FLOAT16, "beyond the range of DT_FLOAT16"),
    (1 + 2j, aclnn.ACL_FLOAT, "has no imaginary part"), (2**70, aclnn.ACL_INT64, "64-bit"),
    ("x", aclnn.ACL_FLOAT, "is not a number"), (None, aclnn.ACL_FLOAT, "is not a number"),
])
def test_scalar_refuses_values_its_dtype_cannot_hold(value, dtype, reason):
    """Found by the fuzzing campaign: such values were wrapped, truncated or lost their
    imaginary part without a word."""
    assert aclnn.aclCreateScalar(value, dtype) is None
    message = aclnn.aclGetRecentErrMsg()
    assert message.startswith("aclCreateScalar: cannot make a scalar of") and reason in message


# ---------------------------------------------------------------------------- constants

DTYPES = {
    "ACL_FLOAT": 0,
    "ACL_FLOAT16": 1,
    "ACL_INT8": 2,
    "ACL_INT32": 3,
    "ACL_UINT8": 4,
    "ACL_INT16": 6,
    "ACL_UINT16": 7,
    "ACL_UINT32": 8,
    "ACL_INT64": 9,
    "ACL_UINT64": 10,
    "ACL_DOUBLE": 11,
    "ACL_BOOL": 12,
    "ACL_COMPLEX64": 16,
    "ACL_COMPLEX128": 17,
    "ACL_BF16": 27,
    "ACL_COMPLEX32": 33,
}
FORMATS = {
    "ACL_FORMAT_NCHW": 0,
    "ACL_FORMAT_NHWC": 1,
    "ACL_FORMAT_ND": 2,
    "ACL_FORMAT_NC1HWC0": 3,
    "ACL_FORMAT_FRACTAL_Z": 4,
    "ACL_FORMAT_NC1HWC0_C04": 12,
    "ACL_FORMAT_HWCN": 16,
    "ACL_FORMAT_NDHWC": 27,
    "ACL_FORMAT_FRACTAL_NZ": 29,
    "ACL_FORMAT_NCDHW": 30,
    "ACL_FORMAT_NDC1HWC0": 32,
    "ACL_FORMAT_FRACTAL_Z_3D": 33,
    "ACL_FORMAT_NC": 35,
    "ACL_FORMAT_NCL": 47,
}
STATUSES = {
    "ACLNN_SUCCESS": 0,
    "ACLNN_ERR_PARAM_NULLPTR": 161001,
    "ACLNN_ERR_PARAM_INVALID": 161002,
    "ACLNN_ERR_RUNTIME_ERROR": 361001,
    "ACLNN_ERR_INNER": 561000,
    "ACLNN_ERR_INNER_NULLPTR": 561103,
}
CUBE_MATH_TYPES = {
    "KEEP_DTYPE": 0,
    "ALLOW_FP32_DOWN_PRECISION": 1,
    "USE_FP16": 2,
    "USE_HF32": 3,
}
RUNTIME = {
    "ACL_MEMCPY_HOST_TO_HOST": 0,
    "ACL_MEMCPY_HOST_TO_DEVICE": 1,
    "ACL_MEMCPY_DEVICE_TO_HOST": 2,
    "ACL_MEMCPY_DEVICE_TO_DEVICE": 3,
    "ACL_MEM_MALLOC_HUGE_FIRST": 0,
    "ACL_MEM_MALLOC_HUGE_ONLY": 1,
    "ACL_MEM_MALLOC_NORMAL_ONLY": 2,
}


@pytest.mark.parametrize(
    "name, value", sorted({**DTYPES, **FORMATS, **STATUSES, **CUBE_MATH_TYPES}.items())
)
def test_aclnn_constant(name, value):
    assert getattr(aclnn, name) == value


@pytest.mark.parametrize("name, value", sorted(RUNTIME.items()))
def test_acl_runtime_constant(name, value):
    assert getattr(acl, name) == value
