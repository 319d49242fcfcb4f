"""Failure paths (SPEC §4, §9): memory exhaustion and exceptions inside queued work become
statuses with a recent error message, never a crash, and the runtime keeps working."""

from __future__ import annotations

import os

import numpy as np
import pytest

import aclnn
from aclnn import acl
from aclnn.ops import smooth_l1_loss_backward as smooth_l1_module
from support import to_device

ERR_INTERNAL = acl.ACL_ERROR_RT_INTERNAL_ERROR  # 507000
ERR_RUNTIME = 361001
ERR_INNER = 561000
H2D = acl.ACL_MEMCPY_HOST_TO_DEVICE
D2H = acl.ACL_MEMCPY_DEVICE_TO_HOST
PHYSICAL = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
#: Twice the machine's RAM, then sizes beyond any address space or any int64.
HUGE_SIZES = [2 * PHYSICAL, 1 << 50, 2**62, 2**63 - 1, 2**64, 10**30]


def test_internal_error_constant():
    assert ERR_INTERNAL == 507000


# --------------------------------------------------------------------------- exhaustion


def _round_trip_works() -> None:
    host = np.arange(1024, dtype=np.float32)
    ptr, ret = acl.rt.malloc(host.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0 and ptr != 0
    try:
        assert acl.rt.memcpy(ptr, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D) == 0
        back = np.zeros_like(host)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, ptr, back.nbytes, D2H) == 0
        assert np.array_equal(back, host)
    finally:
        assert acl.rt.free(ptr) == 0


@pytest.mark.parametrize("size", HUGE_SIZES, ids=lambda s: f"2^{s.bit_length() - 1}")
@pytest.mark.parametrize("policy", [acl.ACL_MEM_MALLOC_HUGE_FIRST, acl.ACL_MEM_MALLOC_NORMAL_ONLY])
def test_malloc_larger_than_the_machine_fails_with_a_status(size, policy):
    ptr, ret = acl.rt.malloc(size, policy)
    assert ret != 0
    assert ptr == 0
    msg = aclnn.aclGetRecentErrMsg()
    assert "malloc" in msg and str(size) in msg, msg
    _round_trip_works()  # the process carries on, and a normal malloc works


@pytest.mark.parametrize("size", HUGE_SIZES, ids=lambda s: f"2^{s.bit_length() - 1}")
def test_malloc_host_larger_than_the_machine_fails_with_a_status(size):
    ptr, ret = acl.rt.malloc_host(size)
    assert ret != 0
    assert ptr == 0
    msg = aclnn.aclGetRecentErrMsg()
    assert "malloc_host" in msg and str(size) in msg, msg
    ptr, ret = acl.rt.malloc_host(4096)
    assert ret == 0 and ptr != 0
    assert acl.rt.free_host(ptr) == 0
    _round_trip_works()


def test_many_failed_mallocs_leave_no_trace():
    for _ in range(200):
        assert acl.rt.malloc(1 << 50, 0) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
    _round_trip_works()


def test_memory_allocation_status_is_the_runtime_one():
    _, ret = acl.rt.malloc(1 << 50, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == acl.ACL_ERROR_RT_MEMORY_ALLOCATION  # 207001
    _, ret = acl.rt.malloc_host(1 << 50)
    assert ret == acl.ACL_ERROR_RT_MEMORY_ALLOCATION


# --------------------------------------------------------------------------- queued failures


class SmoothL1:
    """gradInput = gradOut * clamp(self - target, -1, 1) on small float32 tensors."""

    def __init__(self, x: np.ndarray):
        self.x = x.astype(np.float32)
        self.g = to_device(np.ones_like(self.x))
        self.s = to_device(self.x)
        self.t = to_device(np.zeros_like(self.x))
        self.out = to_device(np.full_like(self.x, 99.0))
        self.devs = [self.g, self.s, self.t, self.out]

    def plan(self):
        ws, executor, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(
            self.g.tensor, self.s.tensor, self.t.tensor, 0, 1.0, self.out.tensor)
        assert ret == 0, aclnn.aclGetRecentErrMsg()
        return ws, executor

    def expected(self) -> np.ndarray:
        return np.clip(self.x, -1, 1)

    def check(self) -> None:
        assert np.array_equal(self.out.view(), self.expected())
        for d in self.devs:
            d.check_guards()

    def release(self) -> None:
        for d in self.devs:
            d.free()



@pytest.fixture
def op():
    case = SmoothL1(np.linspace(-3, 3, 12).reshape(3, 4))
    yield case
    case.release()


class KernelBoom(RuntimeError):
    pass


def _raising(message: str):
    def step():
        raise KernelBoom(message)
    return step


@pytest.mark.parametrize("exc", [RuntimeError("kernel exploded"), MemoryError("no scratch"),
                                 ZeroDivisionError("division by zero in tile 3"),
                                 IndexError("tile out of range")],
                         ids=lambda e: type(e).__name__)
def test_exception_in_a_kernel_is_a_status_at_synchronize(op, stream, exc):
    ws, executor = op.plan()

    def boom():
        raise exc

    executor.plan.steps[0] = boom
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, stream) == 0  # only enqueued
    assert acl.rt.synchronize_stream(stream) == ERR_INTERNAL
    msg = aclnn.aclGetRecentErrMsg()
    assert type(exc).__name__ in msg and str(exc) in msg, msg
    assert (op.out.view() == 99.0).all()  # nothing was written
    # Reported once ...
    assert acl.rt.synchronize_stream(stream) == 0
    # ... and the stream keeps working: a normal call on it succeeds with correct results.
    ws, executor = op.plan()
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    op.check()


def test_kernel_failure_on_the_default_stream_and_synchronize_device(op):
    ws, executor = op.plan()
    executor.plan.steps[0] = _raising("default-stream boom")
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, None) == 0
    assert acl.rt.synchronize_device() == ERR_INTERNAL
    assert "default-stream boom" in aclnn.aclGetRecentErrMsg()
    assert acl.rt.synchronize_device() == 0
    assert acl.rt.synchronize_stream(None) == 0
    ws, executor = op.plan()
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, None) == 0
    assert acl.rt.synchronize_stream(None) == 0
    op.check()


def test_first_error_wins_and_is_reported_once(op, stream):
    """Two failing tasks queued before one synchronize: the first one's status and message
    are reported, once, and the stream then works normally."""
    other = SmoothL1(np.linspace(-0.5, 0.5, 6))
    try:
        ws1, ex1 = op.plan()
        ex1.plan.steps[0] = _raising("first failure")
        ws2, ex2 = other.plan()
        assert aclnn.aclnnSmoothL1LossBackward(None, ws1, ex1, stream) == 0
        assert aclnn.aclnnSmoothL1LossBackward(None, ws2, ex2, stream) == 0
        other.t.free()  # the second task now fails with 361001 when it runs
        other.devs.remove(other.t)
        assert acl.rt.synchronize_stream(stream) == ERR_INTERNAL
        msg = aclnn.aclGetRecentErrMsg()
        assert "first failure" in msg, msg
        assert acl.rt.synchronize_stream(stream) == 0
        ws, executor = op.plan()
        assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        op.check()
    finally:
        other.release()


def test_kernel_failure_in_a_repeatable_executor_run(op, stream):
    """A repeatable executor whose kernel fails once: the status comes back, the executor
    stays usable, and the next run (kernel restored) is correct."""
    ws, executor = op.plan()
    assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
    good = executor.plan.steps[0]
    executor.plan.steps[0] = _raising("transient")
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == ERR_INTERNAL
    executor.plan.steps[0] = good
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    op.check()
    assert aclnn.aclDestroyAclOpExecutor(executor) == 0


def test_kernel_failure_does_not_leak_into_other_streams(op, stream):
    other_stream, ret = acl.rt.create_stream()
    assert ret == 0
    other = SmoothL1(np.linspace(-2, 2, 8))
    try:
        ws, executor = op.plan()
        executor.plan.steps[0] = _raising("isolated")
        assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, stream) == 0
        ws2, ex2 = other.plan()
        assert aclnn.aclnnSmoothL1LossBackward(None, ws2, ex2, other_stream) == 0
        assert acl.rt.synchronize_stream(other_stream) == 0
        other.check()
        assert acl.rt.synchronize_stream(stream) == ERR_INTERNAL
    finally:
        other.release()
        acl.rt.destroy_stream(other_stream)


def test_destroy_stream_with_failing_work_does_not_crash(op):
    s, ret = acl.rt.create_stream()
    assert ret == 0
    ws, executor = op.plan()
    executor.plan.steps[0] = _raising("pending at destroy")
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, s) == 0
    acl.rt.destroy_stream(s)  # its status is not specified; it must return, not raise
    assert acl.rt.synchronize_stream(s) != 0  # gone
    assert acl.rt.synchronize_stream(None) == 0  # the error did not move elsewhere
    _round_trip_works()


def test_exception_while_planning_is_an_inner_error(op, monkeypatch):
    """Phase 1 turns an unexpected exception into 561000 and a message, never a crash."""

    def broken(*args, **kwargs):
        raise RuntimeError("planner bug")

    monkeypatch.setattr(smooth_l1_module.pointwise, "smooth_l1_backward", broken)
    ws, executor, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(
        op.g.tensor, op.s.tensor, op.t.tensor, 0, 1.0, op.out.tensor)
    assert ret == ERR_INNER and executor is None
    msg = aclnn.aclGetRecentErrMsg()
    assert "planner bug" in msg and "aclnnSmoothL1LossBackward" in msg, msg
    monkeypatch.undo()
    ws, executor = op.plan()
    assert aclnn.aclnnSmoothL1LossBackward(None, ws, executor, None) == 0
    assert acl.rt.synchronize_stream(None) == 0
    op.check()


def test_functional_api_reports_a_failing_kernel_as_an_exception(monkeypatch):
    """The functional API raises aclnn.AclnnError with the status; later calls work."""
    real = smooth_l1_module.pointwise.smooth_l1_backward

    def planted(*args, **kwargs):
        real(*args, **kwargs)  # plan normally, but hand back a launch that fails
        return _raising("functional boom")

    monkeypatch.setattr(smooth_l1_module.pointwise, "smooth_l1_backward", planted)
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    with pytest.raises(aclnn.AclnnError) as info:
        aclnn.smooth_l1_loss_backward(np.float32(1), x, np.zeros(8, np.float32), "none")
    assert info.value.status == ERR_INTERNAL
    assert "functional boom" in info.value.message
    monkeypatch.undo()
    got = aclnn.smooth_l1_loss_backward(np.float32(1), x, np.zeros(8, np.float32), "none")
    assert np.array_equal(got, np.clip(x, -1, 1))


def test_functional_api_survives_an_output_larger_than_the_machine():
    """An output that cannot be allocated (4 TiB here) raises - a MemoryError today, or an
    AclnnError - and the process and the next call carry on."""
    a = np.ones((1 << 20, 1), np.float32)
    b = np.ones((1, 1 << 20), np.float32)
    with pytest.raises((MemoryError, aclnn.AclnnError)):
        aclnn.gelu_backward(a, b)
    x = np.array([0.0, 1.0], np.float32)
    got = aclnn.gelu_backward(np.ones(2, np.float32), x)
    assert got[0] == np.float32(0.5)
    _round_trip_works()
