"""Resources (SPEC §4, §9): memory stays flat over many calls, freed memory is out of reach
of stale tensors and executors, and acl.finalize() releases everything.

`ACLNN_STRESS_SCALE` (default 1) multiplies the number of calls of the RSS test
(scale 20: 100 000 calls).
"""

from __future__ import annotations

import gc
import os
import resource
import time

import ml_dtypes
import numba
import numpy as np
import pytest

import aclnn
from aclnn import acl

SCALE = max(1, int(os.environ.get("ACLNN_STRESS_SCALE", "1")))
CALLS = 5000 * SCALE
WARMUP_CALLS = 500
RSS_GROWTH_LIMIT = 8 << 20
H2D = acl.ACL_MEMCPY_HOST_TO_DEVICE
D2H = acl.ACL_MEMCPY_DEVICE_TO_HOST
ERR_INVALID = aclnn.ACLNN_ERR_PARAM_INVALID
ERR_RUNTIME = 361001
OPS = ("SmoothL1LossBackward", "L1LossBackward", "GeluBackwardV2", "AvgPool2dBackward")
DTYPES = ((np.float32, aclnn.ACL_FLOAT), (np.float16, aclnn.ACL_FLOAT16),
          (ml_dtypes.bfloat16, aclnn.ACL_BF16))


def rss_bytes() -> int:
    """The resident set size of this process, from /proc/self/statm (or getrusage's peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the peak is the best figure available
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def malloc(nbytes: int) -> int:
    ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0, (ret, aclnn.aclGetRecentErrMsg())
    return ptr


def upload(host: np.ndarray) -> int:
    ptr = malloc(host.nbytes)
    assert acl.rt.memcpy(ptr, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D) == 0
    return ptr


def download(ptr: int, shape, dtype) -> np.ndarray:
    host = np.empty(shape, dtype)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), host.nbytes, ptr, host.nbytes, D2H) == 0
    return host


def read_bytes(ptr: int, nbytes: int) -> np.ndarray:
    return download(ptr, (nbytes,), np.uint8)


def tensor(ptr: int, shape, acl_dtype, fmt=aclnn.ACL_FORMAT_ND):
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    t = aclnn.aclCreateTensor(list(shape), acl_dtype, strides, 0, fmt, list(shape), ptr)
    assert t is not None, aclnn.aclGetRecentErrMsg()
    return t


class Call:
    """One small operator call with its own allocations, tensors and int arrays."""

    def __init__(self, op: str, np_dtype, acl_dtype, seed: int):
        rng = np.random.default_rng(seed)
        self.op = op
        self.np_dtype = np_dtype
        fmt = aclnn.ACL_FORMAT_NCHW if op == "AvgPool2dBackward" else aclnn.ACL_FORMAT_ND
        if op == "AvgPool2dBackward":
            shapes = [(1, 2, 3, 3), (1, 2, 6, 6)]
            self.out_shape = (1, 2, 6, 6)
        else:
            shape = (int(rng.integers(1, 9)), int(rng.integers(1, 9)))
            shapes = [shape] * (2 if op == "GeluBackwardV2" else 3)
            self.out_shape = shape
        self.hosts = [rng.standard_normal(s).astype(np_dtype) for s in shapes]
        self.ptrs = [upload(h) for h in self.hosts]
        self.out_ptr = upload(np.zeros(self.out_shape, np_dtype))
        self.ptrs.append(self.out_ptr)
        self.tensors = [tensor(p, h.shape, acl_dtype, fmt) for p, h in zip(self.ptrs, self.hosts)]
        self.out = tensor(self.out_ptr, self.out_shape, acl_dtype, fmt)
        self.tensors.append(self.out)
        self.arrays = []
        t = self.tensors
        if op == "SmoothL1LossBackward":
            self.args = (t[0], t[1], t[2], 0, 1.0, t[3])
        elif op == "L1LossBackward":
            self.args = (t[0], t[1], t[2], 2, t[3])
        elif op == "GeluBackwardV2":
            self.args = (t[0], t[1], "tanh", t[2])
        else:
            self.arrays = [aclnn.aclCreateIntArray([2, 2]), aclnn.aclCreateIntArray([2, 2]),
                           aclnn.aclCreateIntArray([0, 0])]
            self.args = (t[0], t[1], *self.arrays, False, True, 0, 1, t[2])

    def phase1(self):
        ws, executor, ret = getattr(aclnn, f"aclnn{self.op}GetWorkspaceSize")(*self.args)
        return ws, executor, ret

    def phase2(self, ws, executor, stream) -> int:
        return getattr(aclnn, f"aclnn{self.op}")(None, ws, executor, stream)

    def result(self) -> np.ndarray:
        return download(self.out_ptr, self.out_shape, self.np_dtype)

    def release(self) -> None:
        for t in self.tensors:
            assert aclnn.aclDestroyTensor(t) == 0
        for a in self.arrays:
            assert aclnn.aclDestroyIntArray(a) == 0
        for p in self.ptrs:
            assert acl.rt.free(p) == 0


def one_round(i: int, stream) -> None:
    """One two-phase call with everything created and destroyed around it."""
    np_dtype, acl_dtype = DTYPES[(i // 4) % 3]
    call = Call(OPS[i % 4], np_dtype, acl_dtype, i)
    try:
        ws, executor, ret = call.phase1()
        assert ret == 0, aclnn.aclGetRecentErrMsg()
        if i % 3 == 0:  # a repeatable executor, run twice, then destroyed
            assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
            for _ in range(2):
                assert call.phase2(ws, executor, stream) == 0
                assert acl.rt.synchronize_stream(stream) == 0
            assert aclnn.aclDestroyAclOpExecutor(executor) == 0
        else:  # a run-once executor, consumed by phase 2
            assert call.phase2(ws, executor, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0
        if i % 97 == 0:
            assert np.isfinite(call.result().astype(np.float32)).all()
        # Larger device and host allocations and a registration of a short-lived array,
        # every round: a leak of any of them would show in RSS within a few hundred rounds.
        n = 4096 + 64 * (i % 64)
        scratch = np.full(n, i & 0xFF, np.uint8)
        dev_ptr = malloc(n)
        host_ptr, ret = acl.rt.malloc_host(n)
        assert ret == 0
        assert acl.rt.memcpy(dev_ptr, n, acl.util.numpy_to_ptr(scratch), n, H2D) == 0
        assert acl.rt.memcpy(host_ptr, n, dev_ptr, n, D2H) == 0
        assert acl.rt.memset(dev_ptr, n, 0, n) == 0
        assert acl.rt.free(dev_ptr) == 0
        assert acl.rt.free_host(host_ptr) == 0
    finally:
        call.release()


def run_rounds(start: int, count: int) -> None:
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    try:
        for i in range(start, start + count):
            if i % 250 == 0:  # streams come and go too
                assert acl.rt.destroy_stream(stream) == 0
                stream, ret = acl.rt.create_stream()
                assert ret == 0
            one_round(i, stream)
    finally:
        acl.rt.destroy_stream(stream)


def test_resident_memory_stays_flat_over_many_calls():
    # One Numba thread: the kernels are tiny, and on a busy 2-core machine waking a second
    # thread per call costs more than the call; the thread count has no bearing on leaks.
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        run_rounds(0, WARMUP_CALLS)
        gc.collect()
        before = rss_bytes()
        started = time.perf_counter()
        run_rounds(WARMUP_CALLS, CALLS)
        elapsed = time.perf_counter() - started
        gc.collect()
        after = rss_bytes()
    finally:
        numba.set_num_threads(threads)
    growth = after - before
    print(f"\n[test_resources] {CALLS} two-phase calls (after {WARMUP_CALLS} warm-up) in "
          f"{elapsed:.1f} s: RSS before {before / 2**20:.1f} MiB, after {after / 2**20:.1f} MiB, "
          f"growth {growth / 2**20:+.2f} MiB (limit {RSS_GROWTH_LIMIT / 2**20:.0f} MiB)")
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth / 2**20:.1f} MiB over {CALLS} calls"


REGISTRATIONS = 300_000 * SCALE
REGISTRY_GROWTH_LIMIT = 4 << 20  # one live array: the table should not grow at all


def _sweep_dead_registrations(count: int) -> None:
    """Register short-lived arrays until the registry has swept its dead entries, so a
    registration-heavy test does not slow down the tests after it (cleanup only)."""
    for _ in range(2 * count + 64):
        acl.util.numpy_to_ptr(np.empty(1, np.uint8))


def _register_one_array_many_times() -> tuple[int, int]:
    host = np.zeros(256, np.uint8)
    for _ in range(1000):
        acl.util.numpy_to_ptr(host)
    gc.collect()
    before = rss_bytes()
    for _ in range(REGISTRATIONS):
        acl.util.numpy_to_ptr(host)
    gc.collect()
    return before, rss_bytes()


def test_registering_one_live_array_again_and_again_keeps_memory_flat():
    """The README's pattern - `memcpy(..., acl.util.numpy_to_ptr(host), ...)` in a loop over
    one long-lived host array - registers the same array on every call. That must not keep
    growing a table: the address of a live array is one host region, however often it is
    handed out."""
    try:
        before, after = _register_one_array_many_times()
    finally:
        _sweep_dead_registrations(REGISTRATIONS + 1000)
    growth = after - before
    print(f"\n[test_resources] {REGISTRATIONS} numpy_to_ptr calls on one live array: RSS before "
          f"{before / 2**20:.1f} MiB, after {after / 2**20:.1f} MiB, growth "
          f"{growth / 2**20:+.2f} MiB")
    assert growth < REGISTRY_GROWTH_LIMIT, (
        f"RSS grew by {growth / 2**20:.1f} MiB over {REGISTRATIONS} registrations of one array")


def _memcpy_seconds(dst_ptr: int, src_ptr: int, reps: int = 50) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(reps):
            assert acl.rt.memcpy(dst_ptr, 64, src_ptr, 64, D2H) == 0
        best = min(best, time.perf_counter() - started)
    return best


def _memcpy_before_and_after_registrations(count: int) -> tuple[float, float]:
    dev = upload(np.arange(64, dtype=np.uint8))
    early = np.zeros(64, np.uint8)
    early_ptr = acl.util.numpy_to_ptr(early)
    busy = np.zeros(64, np.uint8)
    try:
        baseline = _memcpy_seconds(early_ptr, dev)
        for _ in range(count):
            acl.util.numpy_to_ptr(busy)
        later = _memcpy_seconds(early_ptr, dev)
        assert (early == np.arange(64)).all()
        return baseline, later
    finally:
        assert acl.rt.free(dev) == 0


def test_memcpy_cost_does_not_grow_with_the_number_of_registrations():
    """A memcpy to a host array registered once must not get slower because another live
    array was registered many times since (a lookup must not scan or copy every
    registration ever made)."""
    count = 100_000
    try:
        baseline, later = _memcpy_before_and_after_registrations(count)
    finally:
        _sweep_dead_registrations(count + 1000)
    print(f"\n[test_resources] 50 memcpys: {baseline * 1e3:.2f} ms before, "
          f"{later * 1e3:.2f} ms after {count} registrations of another array")
    assert later < 10 * baseline + 0.005, (
        f"memcpy became {later / baseline:.0f}x slower after {count} registrations")


# --------------------------------------------------------------------------- freed memory



def _free_one(call: Call, which: int) -> None:
    assert acl.rt.free(call.ptrs[which]) == 0
    call.ptrs.pop(which)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("which", ["input", "output"])
def test_phase1_with_a_tensor_on_freed_memory_fails(op, which):
    call = Call(op, np.float32, aclnn.ACL_FLOAT, 1)
    try:
        index = len(call.ptrs) - 1 if which == "output" else 1
        _free_one(call, index)
        ws, executor, ret = call.phase1()
        msg = aclnn.aclGetRecentErrMsg()
        assert ret == ERR_INVALID, (ret, msg)
        assert executor is None
        assert "freed" in msg and f"aclnn{op}" in msg, msg
    finally:
        call.release()


@pytest.mark.parametrize("op", OPS)
def test_executor_built_before_free_fails_at_phase2(op, stream):
    call = Call(op, np.float32, aclnn.ACL_FLOAT, 2)
    try:
        ws, executor, ret = call.phase1()
        assert ret == 0
        _free_one(call, 0)  # an input
        assert call.phase2(ws, executor, stream) == ERR_INVALID
        msg = aclnn.aclGetRecentErrMsg()
        assert "freed" in msg, msg
        assert acl.rt.synchronize_stream(stream) == 0
        assert (call.result() == 0).all()  # nothing computed from the freed input
    finally:
        call.release()


@pytest.mark.parametrize("op", OPS)
def test_memory_freed_after_phase2_fails_at_synchronize(op, stream):
    call = Call(op, np.float32, aclnn.ACL_FLOAT, 3)
    try:
        ws, executor, ret = call.phase1()
        assert ret == 0
        assert call.phase2(ws, executor, stream) == 0
        _free_one(call, 0)
        assert acl.rt.synchronize_stream(stream) == ERR_RUNTIME
        assert "freed" in aclnn.aclGetRecentErrMsg()
        assert (call.result() == 0).all()
        assert acl.rt.synchronize_stream(stream) == 0
    finally:
        call.release()


@pytest.mark.parametrize("when", ["before-phase2", "after-phase2"])
@pytest.mark.parametrize("op", OPS)
def test_no_write_into_a_new_allocation_after_the_output_was_freed(op, when, stream):
    call = Call(op, np.float32, aclnn.ACL_FLOAT, 4)
    fresh: list[int] = []
    try:
        ws, executor, ret = call.phase1()
        assert ret == 0
        out_bytes = int(np.prod(call.out_shape)) * 4
        if when == "after-phase2":
            assert call.phase2(ws, executor, stream) == 0
        _free_one(call, len(call.ptrs) - 1)
        for _ in range(32):  # new allocations of the same size, likely at the old address
            p = upload(np.full(out_bytes, 0x5A, np.uint8))
            fresh.append(p)
        if when == "before-phase2":
            assert call.phase2(ws, executor, stream) == ERR_INVALID
            assert acl.rt.synchronize_stream(stream) == 0
        else:
            assert acl.rt.synchronize_stream(stream) == ERR_RUNTIME
        for p in fresh:
            assert (read_bytes(p, out_bytes) == 0x5A).all()
    finally:
        for p in fresh:
            acl.rt.free(p)
        call.release()


def test_stale_tensor_on_a_reused_address_is_refused():
    """A tensor outlives its allocation; a new allocation at the very same address does not
    bring the stale tensor back to life."""
    nbytes = 4 * 16
    seen_reuse = False
    for _ in range(50):
        ptr = upload(np.arange(16, dtype=np.float32))
        stale = tensor(ptr, (16,), aclnn.ACL_FLOAT)
        assert acl.rt.free(ptr) == 0
        fresh = [upload(np.full(nbytes, 0x5A, np.uint8)) for _ in range(4)]
        try:
            seen_reuse |= ptr in fresh
            g = upload(np.ones(16, np.float32))
            gt = tensor(g, (16,), aclnn.ACL_FLOAT)
            for args in ((gt, stale, gt, 0, 1.0, gt), (gt, gt, gt, 0, 1.0, stale)):
                _, executor, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(*args)
                assert ret == ERR_INVALID and executor is None
                assert "freed" in aclnn.aclGetRecentErrMsg()
            aclnn.aclDestroyTensor(gt)
            acl.rt.free(g)
            # The address itself is usable exactly when a live allocation holds it again.
            zeros = np.zeros(16, np.float32)
            ret = acl.rt.memcpy(ptr, nbytes, acl.util.numpy_to_ptr(zeros), nbytes, H2D)
            assert ret == (0 if ptr in fresh else acl.ACL_ERROR_INVALID_PARAM)
            for p in fresh:
                expected = 0 if p == ptr else 0x5A  # our own memcpy above, nothing else
                assert (read_bytes(p, nbytes) == expected).all()
        finally:
            aclnn.aclDestroyTensor(stale)
            for p in fresh:
                acl.rt.free(p)
        if seen_reuse:
            break
    print(f"\n[test_resources] a freed address was handed out again: {seen_reuse}")


# --------------------------------------------------------------------------- finalize


def test_finalize_releases_everything_and_init_works_again():
    dev = [upload(np.full(n, 0x11, np.uint8)) for n in (64, 1000, 1 << 16)]
    host_ptr, ret = acl.rt.malloc_host(128)
    assert ret == 0
    registered = np.arange(32, dtype=np.uint8)
    reg_ptr = acl.util.numpy_to_ptr(registered)
    old_stream, ret = acl.rt.create_stream()
    assert ret == 0
    call = Call("GeluBackwardV2", np.float32, aclnn.ACL_FLOAT, 5)
    ws, executor, ret = call.phase1()
    assert ret == 0
    assert call.phase2(ws, executor, old_stream) == 0  # still queued at finalize
    sink = np.zeros(64, np.uint8)
    try:
        assert acl.finalize() == 0
        assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE

        def check_all_gone():
            for p in [*dev, *call.ptrs]:
                assert acl.rt.memcpy(acl.util.numpy_to_ptr(sink), 1, p, 1, D2H) != 0
                assert acl.rt.memcpy(p, 1, acl.util.numpy_to_ptr(sink), 1, H2D) != 0
                assert acl.rt.free(p) != 0
            assert acl.rt.free_host(host_ptr) != 0
            assert acl.rt.synchronize_stream(old_stream) != 0
            assert acl.rt.destroy_stream(old_stream) != 0

        check_all_gone()
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0
        check_all_gone()  # and a new init does not resurrect them
        # The host registration went too: the array's address must be handed out again.
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(sink), 32, reg_ptr, 32,
                             acl.ACL_MEMCPY_HOST_TO_HOST) != 0
        assert acl.util.numpy_to_ptr(registered) == reg_ptr
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(sink), 32, reg_ptr, 32,
                             acl.ACL_MEMCPY_HOST_TO_HOST) == 0
        assert (sink[:32] == registered).all()
        # Tensors made before finalize are on freed memory now.
        _, ex, ret = call.phase1()
        assert ret == ERR_INVALID and ex is None
        assert "freed" in aclnn.aclGetRecentErrMsg()
        # The runtime works again from scratch.
        s, ret = acl.rt.create_stream()
        assert ret == 0
        fresh = Call("AvgPool2dBackward", np.float32, aclnn.ACL_FLOAT, 6)
        ws, ex, ret = fresh.phase1()
        assert ret == 0
        assert fresh.phase2(ws, ex, s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        assert np.isfinite(fresh.result()).all() and (fresh.result() != 0).any()
        fresh.release()
        assert acl.rt.destroy_stream(s) == 0
    finally:
        acl.init()  # whatever happened, leave the session as conftest set it up
        assert acl.rt.set_device(0) == 0
        for t in call.tensors:
            aclnn.aclDestroyTensor(t)
    ptr = malloc(64)
    assert acl.rt.free(ptr) == 0
