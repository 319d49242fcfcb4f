"""The two-phase executor protocol (SPEC §9)."""

from __future__ import annotations

import numpy as np
import pytest

import aclnn
from aclnn import acl
from support import GUARD_BYTES, DeviceTensor, to_device

X = np.array([0.5, -0.5, 2.0, -2.0], dtype=np.float32)


class Case:
    """One operator call: its device tensors, its two phases and its expected output."""

    def __init__(self, op: str):
        self.op = op
        self.devs: list[DeviceTensor] = []
        self.freed: set[int] = set()
        self.destroyed: set[int] = set()
        self.extra = []  # int arrays
        if op == "SmoothL1LossBackward":
            self.g = self.dev(np.ones(4, np.float32))
            self.x = self.dev(X)
            self.t = self.dev(np.zeros(4, np.float32))
            self.out = self.dev(np.full(4, 99.0, np.float32))
            self.args = (self.g.tensor, self.x.tensor, self.t.tensor, 0, 1.0, self.out.tensor)
            self.expected = lambda gv: gv * np.array([0.5, -0.5, 1.0, -1.0], np.float32)
        elif op == "L1LossBackward":
            self.g = self.dev(np.ones(4, np.float32))
            self.x = self.dev(X)
            self.t = self.dev(np.zeros(4, np.float32))
            self.out = self.dev(np.full(4, 99.0, np.float32))
            self.args = (self.g.tensor, self.x.tensor, self.t.tensor, 0, self.out.tensor)
            self.expected = lambda gv: gv * np.sign(X)
        elif op == "GeluBackwardV2":
            self.g = self.dev(np.ones(4, np.float32))
            self.x = self.dev(np.zeros(4, np.float32))
            self.out = self.dev(np.full(4, 99.0, np.float32))
            self.args = (self.g.tensor, self.x.tensor, "none", self.out.tensor)
            self.expected = lambda gv: gv * np.float32(0.5)
        elif op == "AvgPool2dBackward":
            nchw = aclnn.ACL_FORMAT_NCHW
            self.g = self.dev(np.ones((1, 1, 2, 2), np.float32), nchw)
            self.x = self.dev(np.zeros((1, 1, 4, 4), np.float32), nchw)
            self.out = self.dev(np.full((1, 1, 4, 4), 99.0, np.float32), nchw)
            ks = aclnn.aclCreateIntArray([2, 2])
            st = aclnn.aclCreateIntArray([2, 2])
            pad = aclnn.aclCreateIntArray([0, 0])
            self.extra = [ks, st, pad]
            self.args = (
                self.g.tensor, self.x.tensor, ks, st, pad, False, True, 0, 0, self.out.tensor,
            )  # fmt: skip
            self.expected = lambda gv: np.full((1, 1, 4, 4), 0.25, np.float32) * gv
        else:
            raise AssertionError(op)
        self.phase1 = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")
        self.phase2 = getattr(aclnn, f"aclnn{op}")

    def dev(self, array, fmt=aclnn.ACL_FORMAT_ND) -> DeviceTensor:
        d = to_device(array, fmt=fmt)
        self.devs.append(d)
        return d

    def plan(self):
        ws, executor, ret = self.phase1(*self.args)
        assert ret == 0, aclnn.aclGetRecentErrMsg()
        assert executor is not None
        return ws, executor

    def set_grad(self, value: float) -> None:
        host = np.full(self.g.storage_host.size, value, np.float32)
        ret = acl.rt.memcpy(
            self.g.ptr + GUARD_BYTES, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
            acl.ACL_MEMCPY_HOST_TO_DEVICE,
        )  # fmt: skip
        assert ret == 0

    def check(self, gv: float = 1.0) -> None:
        np.testing.assert_allclose(self.out.view(), self.expected(np.float32(gv)), rtol=1e-6)
        for d in self.devs:
            if id(d) not in self.freed:
                d.check_guards()

    def destroy_tensor(self, d: DeviceTensor) -> None:
        aclnn.aclDestroyTensor(d.tensor)
        self.destroyed.add(id(d))

    def free_memory(self, d: DeviceTensor) -> None:
        assert acl.rt.free(d.ptr) == 0
        self.freed.add(id(d))

    def release(self) -> None:
        for d in self.devs:
            if id(d) not in self.destroyed:
                aclnn.aclDestroyTensor(d.tensor)
            if id(d) not in self.freed:
                acl.rt.free(d.ptr)
        for arr in self.extra:
            aclnn.aclDestroyIntArray(arr)


OPS = ["SmoothL1LossBackward", "L1LossBackward", "GeluBackwardV2"]
ALL_OPS = OPS + ["AvgPool2dBackward"]


@pytest.fixture
def case(request):
    c = Case(request.param)
    yield c
    c.release()



@pytest.mark.parametrize("case", ALL_OPS, indirect=True)
def test_workspace_size_zero_and_none_workspace_accepted(case, stream):
    ws, executor = case.plan()
    assert ws == 0
    assert case.phase2(None, 0, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    case.check()


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_real_workspace_larger_than_needed_is_accepted(case, stream):
    ws, executor = case.plan()
    buf, ret = acl.rt.malloc(256, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    try:
        assert case.phase2(buf, 256, executor, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        case.check()
    finally:
        acl.rt.free(buf)


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_phase2_twice_fails_without_repeatable(case, stream):
    ws, executor = case.plan()
    assert case.phase2(None, ws, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    case.check()
    assert case.phase2(None, ws, executor, stream) == aclnn.ACLNN_ERR_PARAM_INVALID
    assert acl.rt.synchronize_stream(stream) == 0
    case.check()


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_spent_executor_drops_its_plan_and_a_racing_phase2_fails_cleanly(case, stream):
    """A run-once executor keeps no plan after its phase 2 (the queued work holds it); a
    phase 2 that passed its checks before another thread spent the executor fails with
    161002, not an exception."""
    ws, executor = case.plan()
    assert case.phase2(None, ws, executor, stream) == 0
    assert executor.plan is None
    assert acl.rt.synchronize_stream(stream) == 0
    case.check()
    executor.consumed = False  # as seen by a thread that checked before it was spent
    assert case.phase2(None, ws, executor, stream) == aclnn.ACLNN_ERR_PARAM_INVALID
    assert "already run or was destroyed" in aclnn.aclGetRecentErrMsg()


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_phase2_that_loses_the_race_to_consume_fails_cleanly(case, stream, monkeypatch):
    """Another thread runs a run-once executor while this one waits for the consume lock,
    after this one's checks passed: this one fails with 161002 and queues nothing."""
    from aclnn.framework import executor as executor_module

    ws, executor = case.plan()

    class RacingLock:
        def acquire(self) -> None:
            executor.consumed = True  # what the other thread did in the meantime

        def release(self) -> None:
            pass

    monkeypatch.setattr(executor_module, "_consume_lock", RacingLock())
    assert case.phase2(None, ws, executor, stream) == aclnn.ACLNN_ERR_PARAM_INVALID
    assert "already run" in aclnn.aclGetRecentErrMsg()
    assert acl.rt.synchronize_stream(stream) == 0


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_phase2_twice_without_synchronize_in_between(case, stream):
    ws, executor = case.plan()
    assert case.phase2(None, ws, executor, stream) == 0
    assert case.phase2(None, ws, executor, stream) == aclnn.ACLNN_ERR_PARAM_INVALID
    assert acl.rt.synchronize_stream(stream) == 0
    case.check()


@pytest.mark.parametrize("case", ALL_OPS, indirect=True)
def test_repeatable_executor(case, stream):
    ws, executor = case.plan()
    assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
    for gv in (1.0, 2.0, -3.0):
        case.set_grad(gv)
        assert case.phase2(None, ws, executor, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        case.check(gv)
    assert aclnn.aclDestroyAclOpExecutor(executor) == 0
    case.set_grad(5.0)
    assert case.phase2(None, ws, executor, stream) == aclnn.ACLNN_ERR_PARAM_INVALID
    assert acl.rt.synchronize_stream(stream) == 0
    case.check(-3.0)  # the destroyed executor did not run


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_repeatable_runs_queued_back_to_back(case, stream):
    """Several runs of one repeatable executor queued before one synchronize."""
    ws, executor = case.plan()
    assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
    for _ in range(4):
        assert case.phase2(None, ws, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    case.check()
    assert aclnn.aclDestroyAclOpExecutor(executor) == 0


@pytest.mark.parametrize("op", ALL_OPS)
def test_phase2_with_null_executor(op):
    phase2 = getattr(aclnn, f"aclnn{op}")
    assert phase2(None, 0, None, None) == aclnn.ACLNN_ERR_PARAM_NULLPTR


@pytest.mark.parametrize("bad", [42, "executor", [1]])
def test_phase2_with_wrong_executor_type(bad, stream):
    assert aclnn.aclnnSmoothL1LossBackward(None, 0, bad, stream) != 0
    assert acl.rt.synchronize_stream(stream) == 0


def _phase2_then_sync(case, executor, ws, stream) -> int:
    ret = case.phase2(None, ws, executor, stream)
    sync = acl.rt.synchronize_stream(stream)
    return ret if ret != 0 else sync


@pytest.mark.parametrize("which", ["x", "out", "g"])
@pytest.mark.parametrize("case", OPS, indirect=True)
def test_tensor_destroyed_between_phases(case, stream, which):
    ws, executor = case.plan()
    case.destroy_tensor(getattr(case, which))
    assert _phase2_then_sync(case, executor, ws, stream) != 0
    # The stream is usable afterwards.
    assert acl.rt.synchronize_stream(stream) == 0


@pytest.mark.parametrize("which", ["x", "out", "g"])
@pytest.mark.parametrize("case", OPS, indirect=True)
def test_allocation_freed_between_phases(case, stream, which):
    ws, executor = case.plan()
    case.free_memory(getattr(case, which))
    assert _phase2_then_sync(case, executor, ws, stream) != 0
    assert acl.rt.synchronize_stream(stream) == 0
    if which != "out":
        # The output was not written from freed memory.
        assert (case.out.view() == 99.0).all()


def test_freed_allocation_reused_by_a_new_allocation_is_not_written(stream):
    """Freeing the output and allocating again must not let the old plan write there."""
    case = Case("L1LossBackward")
    try:
        ws, executor = case.plan()
        case.free_memory(case.out)
        ptrs = []
        for _ in range(4):
            p, ret = acl.rt.malloc(case.out.total, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0
            host = np.full(case.out.total, 0x5A, np.uint8)
            ret = acl.rt.memcpy(
                p, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                acl.ACL_MEMCPY_HOST_TO_DEVICE,
            )  # fmt: skip
            assert ret == 0
            ptrs.append(p)
        try:
            assert _phase2_then_sync(case, executor, ws, stream) != 0
            for p in ptrs:
                back = np.empty(case.out.total, np.uint8)
                ret = acl.rt.memcpy(
                    acl.util.numpy_to_ptr(back), back.nbytes, p, back.nbytes,
                    acl.ACL_MEMCPY_DEVICE_TO_HOST,
                )  # fmt: skip
                assert ret == 0
                assert (back == 0x5A).all()
        finally:
            for p in ptrs:
                acl.rt.free(p)
    finally:
        case.release()


@pytest.mark.parametrize("case", OPS, indirect=True)
def test_executor_survives_on_default_stream(case):
    ws, executor = case.plan()
    assert case.phase2(None, ws, executor, None) == 0
    assert acl.rt.synchronize_stream(None) == 0
    case.check()


@pytest.mark.parametrize("case", ["SmoothL1LossBackward"], indirect=True)
def test_run_once_executor_raced_by_threads_runs_once(case, stream):
    """Several threads released together on one run-once executor: exactly one enqueues it."""
    import threading

    def race(barrier, ws, executor, statuses):
        barrier.wait()
        statuses.append(case.phase2(None, ws, executor, stream))

    for _ in range(50):
        ws, executor = case.plan()
        barrier = threading.Barrier(4)
        statuses: list[int] = []
        threads = [threading.Thread(target=race, args=(barrier, ws, executor, statuses))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [0] + [aclnn.ACLNN_ERR_PARAM_INVALID] * 3
        assert acl.rt.synchronize_stream(stream) == 0
    case.check()
