"""Streams and operators under concurrency (SPEC §4, §9).

Several threads, each with a stream of its own and two sharing one, issue many two-phase
calls of all four operators (float32, float16, bfloat16, random shapes, NaN payloads) and
memcpys; every result must be bit-identical to a single-threaded run of the same calls, no
thread may hang, and no guard byte may change. A task that fails on one stream is reported
by that stream's synchronize only, and the stream keeps working. Results do not depend on
Numba's thread count, nor on how many threads call the functional API at once.

`ACLNN_STRESS_SCALE` (default 1) multiplies the number of calls per thread.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from dataclasses import dataclass, field

import ml_dtypes
import numba
import numpy as np
import pytest

import aclnn
from aclnn import acl
from aclnn.ops.avg_pool2d_backward import pooled_size
from support import GUARD_BYTES, DeviceTensor

SCALE = max(1, int(os.environ.get("ACLNN_STRESS_SCALE", "1")))
CALLS_PER_THREAD = 200 * SCALE
WATCHDOG_S = 120 * SCALE
OPS = ("SmoothL1LossBackward", "L1LossBackward", "GeluBackwardV2", "AvgPool2dBackward")
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
UINT_OF = {2: np.uint16, 4: np.uint32}
#: NaNs with distinct payloads (and signs), per element size: the bits must survive.
NAN_BITS = {4: [0x7FC00001, 0xFFC12345, 0x7FBFFFFF], 2: [0x7E01, 0xFE55, 0x7D03]}
NAN_BITS_BF16 = [0x7FC1, 0xFFA3, 0x7F81]
D2D = acl.ACL_MEMCPY_DEVICE_TO_DEVICE
D2H = acl.ACL_MEMCPY_DEVICE_TO_HOST
ERR_RUNTIME = 361001


# --------------------------------------------------------------------------- call specs


def random_values(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    """Normal values in `dtype`, with zeros, infinities and NaNs of several payloads."""
    a = (rng.standard_normal(shape) * rng.choice([0.5, 2.0, 30.0])).astype(dtype)
    a = a.copy(order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if a.size:
        flat = a.reshape(-1)
        specials = rng.random(flat.size) < 0.05
        picks = rng.integers(0, 6, flat.size)
        for k, value in enumerate([0.0, -0.0, np.inf, -np.inf]):
            flat[specials & (picks == k)] = value
        nan_at = specials & (picks >= 4)
        payloads = NAN_BITS_BF16 if dtype == DTYPES[2] else NAN_BITS[dtype.itemsize]
        raw = flat.view(UINT_OF[dtype.itemsize])
        raw[nan_at] = np.array(payloads, raw.dtype)[rng.integers(0, 3, int(nan_at.sum()))]
    return a


def broadcast_variant(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape`, or a shape that broadcasts to it (dims set to 1, leading dims dropped)."""
    if rng.random() < 0.5 or not shape:
        return shape
    variant = tuple(1 if rng.random() < 0.4 else d for d in shape)
    return variant[int(rng.integers(0, len(variant) + 1)):]


@dataclass
class Spec:
    """One operator call, fully determined by (op, dtype, seed)."""

    key: tuple
    op: str
    dtype: np.dtype
    seed: int


def make_specs(prefix, count: int, seed: int) -> list[Spec]:
    rng = np.random.default_rng(seed)
    return [Spec((prefix, i), OPS[int(rng.integers(0, 4))], DTYPES[int(rng.integers(0, 3))],
                 int(rng.integers(0, 2**31))) for i in range(count)]


@dataclass
class Pending:
    """A call whose phase 2 was enqueued: its tensors until `finish`."""

    spec: Spec
    devs: list[DeviceTensor]
    out: DeviceTensor
    arrays: list = field(default_factory=list)
    freed: set = field(default_factory=set)
    workspace: int | None = None

    def finish(self) -> bytes:
        """After synchronize: the output allocation's bytes (guards included), read once
        directly and once through a device-to-device copy; guards checked; all released."""
        try:
            image = self.out.image()
            scratch, ret = acl.rt.malloc(self.out.total, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0, ret
            try:
                assert acl.rt.memcpy(scratch, self.out.total, self.out.ptr, self.out.total,
                                     D2D) == 0
                copied = np.empty(self.out.total, np.uint8)
                assert acl.rt.memcpy(acl.util.numpy_to_ptr(copied), copied.nbytes, scratch,
                                     copied.nbytes, D2H) == 0
            finally:
                assert acl.rt.free(scratch) == 0
            assert np.array_equal(image, copied), self.spec
            for d in self.devs:
                if id(d) not in self.freed:
                    d.check_guards()
                    if d is not self.out:  # inputs are read, never written
                        assert np.array_equal(d.storage().view(np.uint8),
                                              d.storage_host.view(np.uint8)), self.spec
            return image.tobytes()
        finally:
            self.release()

    def release(self) -> None:
        for d in self.devs:
            aclnn.aclDestroyTensor(d.tensor)
            if id(d) not in self.freed:
                acl.rt.free(d.ptr)
        for arr in self.arrays:
            aclnn.aclDestroyIntArray(arr)
        if self.workspace is not None:
            acl.rt.free(self.workspace)
        self.devs, self.arrays, self.workspace = [], [], None


def _device(array: np.ndarray, fmt=aclnn.ACL_FORMAT_ND) -> DeviceTensor:
    return DeviceTensor(array.reshape(-1), array.shape, fmt=fmt)


def enqueue(spec: Spec, stream) -> Pending:
    """Build the call's device tensors, run phase 1 and enqueue phase 2 on `stream`."""
    rng = np.random.default_rng(spec.seed)
    dt = spec.dtype
    if spec.op == "AvgPool2dBackward":
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        h, w = int(rng.integers(kh, 11)), int(rng.integers(kw, 11))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        ph, pw = int(rng.integers(0, kh // 2 + 1)), int(rng.integers(0, kw // 2 + 1))
        ceil = bool(rng.integers(0, 2))
        oh, ow = pooled_size(h, kh, sh, ph, ceil), pooled_size(w, kw, sw, pw, ceil)
        lead = (n, c) if rng.random() < 0.7 else (c,)
        nchw = aclnn.ACL_FORMAT_NCHW
        g = _device(random_values(rng, (*lead, oh, ow), dt), nchw)
        x = _device(random_values(rng, (*lead, h, w), dt), nchw)
        out = _device(np.full((*lead, h, w), 7, dt), nchw)
        arrays = [aclnn.aclCreateIntArray([kh, kw]), aclnn.aclCreateIntArray([sh, sw]),
                  aclnn.aclCreateIntArray([ph, pw])]
        divisor = int(rng.choice([0, 0, 0, 3, -2]))
        args = (g.tensor, x.tensor, *arrays, ceil, bool(rng.integers(0, 2)), divisor,
                int(rng.integers(0, 4)), out.tensor)
        devs = [g, x, out]
    else:
        rank = int(rng.integers(0, 5))
        shape = tuple(int(d) for d in rng.integers(1, 9, rank))
        if rng.random() < 0.03:
            shape = (*shape, 0)
        arrays = []
        if spec.op == "GeluBackwardV2":
            shapes = [broadcast_variant(rng, shape), shape]
            if rng.random() < 0.5:
                shapes.reverse()
        else:
            shapes = [broadcast_variant(rng, shape), shape, broadcast_variant(rng, shape)]
        devs = [_device(random_values(rng, s, dt)) for s in shapes]
        out = _device(np.full(shape, 7, dt))
        devs.append(out)
        tensors = [d.tensor for d in devs]
        if spec.op == "SmoothL1LossBackward":
            beta = float(rng.choice([0.0, 0.5, 1.0, 2.5]))
            args = (*tensors[:3], int(rng.integers(0, 3)), beta, tensors[3])
        elif spec.op == "L1LossBackward":
            args = (*tensors[:3], int(rng.integers(0, 3)), tensors[3])
        else:
            args = (*tensors[:2], str(rng.choice(["none", "tanh"])), tensors[2])
    pending = Pending(spec, devs, out, arrays)
    ws, executor, ret = getattr(aclnn, f"aclnn{spec.op}GetWorkspaceSize")(*args)
    assert ret == 0, (spec, aclnn.aclGetRecentErrMsg())
    if ws:  # the graph's intermediates (broadcasts, casts): held until the work has run
        pending.workspace, ret = acl.rt.malloc(ws, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0
    assert getattr(aclnn, f"aclnn{spec.op}")(pending.workspace, ws, executor, stream) == 0, spec
    return pending


def run_batches(specs: list[Spec], stream, rng: np.random.Generator) -> dict:
    """Enqueue `specs` in batches of random size, synchronizing after each; their bits."""
    results = {}
    i = 0
    while i < len(specs):
        batch = specs[i : i + int(rng.integers(1, 9))]
        i += len(batch)
        pendings = [enqueue(spec, stream) for spec in batch]
        ret = acl.rt.synchronize_stream(stream)
        assert ret == 0, (ret, aclnn.aclGetRecentErrMsg())
        for p in pendings:
            results[p.spec.key] = p.finish()
    return results


def reference(specs: list[Spec]) -> dict:
    """The bits of each call, run alone on one stream in this thread."""
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    try:
        out = {}
        for spec in specs:
            p = enqueue(spec, stream)
            assert acl.rt.synchronize_stream(stream) == 0, aclnn.aclGetRecentErrMsg()
            out[spec.key] = p.finish()
        return out
    finally:
        assert acl.rt.destroy_stream(stream) == 0


def run_threads(targets, timeout: float) -> None:
    """Start one daemon thread per callable, released together; fail on any exception or
    on a thread still alive after `timeout` seconds (a deadlock)."""
    barrier = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def wrap(fn):
        def body():
            try:
                barrier.wait(timeout=30)
                fn()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
        return body

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout
    for t in threads:
        t.join(timeout=max(0.0, end - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"threads still running after {timeout} s (deadlock?): {alive}"
    if errors:
        raise errors[0]


# --------------------------------------------------------------------------- stress


def test_threads_with_own_and_shared_streams_match_single_threaded_bits():
    own = [acl.rt.create_stream()[0] for _ in range(4)]
    shared, ret = acl.rt.create_stream()
    assert ret == 0
    stream_of = [*own, shared, shared]
    specs = [make_specs(t, CALLS_PER_THREAD, 1000 + t) for t in range(len(stream_of))]
    results: list[dict] = [{} for _ in stream_of]

    def worker(t):
        def fn():
            results[t] = run_batches(specs[t], stream_of[t], np.random.default_rng(t))
        return fn

    # the single-threaded run first: it compiles (or loads) every kernel the threads use, so
    # the watchdog times only the concurrent calls (a cold Numba cache took longer than
    # WATCHDOG_S to compile them on a 2 GHz Zen 1, which read as a deadlock)
    expected = reference([s for per_thread in specs for s in per_thread])
    try:
        run_threads([worker(t) for t in range(len(stream_of))], WATCHDOG_S)
        for t, per_thread in enumerate(specs):
            assert len(results[t]) == len(per_thread)
            for spec in per_thread:
                assert results[t][spec.key] == expected[spec.key], (t, spec)
        for s in set(stream_of):
            assert acl.rt.synchronize_stream(s) == 0
    finally:
        for s in set(stream_of):
            acl.rt.destroy_stream(s)


def test_many_threads_on_the_default_stream_and_memcpy_traffic():
    """Threads that all enqueue on the default stream, while another thread only copies."""
    specs = [make_specs(("default", t), CALLS_PER_THREAD // 4, 2000 + t) for t in range(3)]
    results: list[dict] = [{} for _ in specs]
    stop = threading.Event()

    def worker(t):
        def fn():
            results[t] = run_batches(specs[t], None, np.random.default_rng(50 + t))
        return fn

    def copier():
        rng = np.random.default_rng(9)
        while not stop.is_set():
            n = int(rng.integers(1, 1 << 16))
            src = rng.integers(0, 256, n, dtype=np.uint8)
            a, _ = acl.rt.malloc(n, 0)
            b, _ = acl.rt.malloc(n, 0)
            back = np.empty(n, np.uint8)
            try:
                assert acl.rt.memcpy(a, n, acl.util.numpy_to_ptr(src), n,
                                     acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
                assert acl.rt.memcpy(b, n, a, n, D2D) == 0
                assert acl.rt.memcpy(acl.util.numpy_to_ptr(back), n, b, n, D2H) == 0
                assert np.array_equal(back, src)
            finally:
                assert acl.rt.free(a) == 0 and acl.rt.free(b) == 0

    copy_thread_errors: list[BaseException] = []

    def copy_body():
        try:
            copier()
        except BaseException as exc:  # reported by the main thread
            copy_thread_errors.append(exc)

    expected = reference([s for per_thread in specs for s in per_thread])  # compiles first
    copy_thread = threading.Thread(target=copy_body, daemon=True)
    copy_thread.start()
    try:
        run_threads([worker(t) for t in range(len(specs))], WATCHDOG_S)
    finally:
        stop.set()
        copy_thread.join(timeout=30)
    assert not copy_thread.is_alive(), "memcpy thread hung"
    assert not copy_thread_errors, copy_thread_errors
    for t, per_thread in enumerate(specs):
        for spec in per_thread:
            assert results[t][spec.key] == expected[spec.key], (t, spec)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("how", ["free", "destroy"])
def test_failed_task_is_reported_only_by_its_stream(how):
    streams = [acl.rt.create_stream()[0] for _ in range(4)]
    failing = 2
    specs = [make_specs(("iso", how, k), 3, 3000 + k) for k in range(len(streams))]
    later = make_specs(("iso-later", how), 2, 3999)
    expected = reference([s for per in specs for s in per] + later)
    pendings: list[list[Pending]] = []
    try:
        for k, s in enumerate(streams):
            pendings.append([enqueue(spec, s) for spec in specs[k]])
        # Break the second call of the failing stream after its phase 2.
        victim = pendings[failing][1]
        broken = victim.devs[0]
        if how == "free":
            assert acl.rt.free(broken.ptr) == 0
            victim.freed.add(id(broken))
        else:
            assert aclnn.aclDestroyTensor(broken.tensor) == 0
            broken.tensor = None  # aclDestroyTensor(None) in release() is a no-op

        statuses: dict[int, tuple[int, str]] = {}

        def sync(k):
            def fn():
                ret = acl.rt.synchronize_stream(streams[k])
                statuses[k] = (ret, aclnn.aclGetRecentErrMsg())
            return fn

        run_threads([sync(k) for k in range(len(streams))], 60)
        for k in range(len(streams)):
            ret, msg = statuses[k]
            if k == failing:
                assert ret == ERR_RUNTIME, (ret, msg)
                assert ("freed" if how == "free" else "destroyed") in msg, msg
                assert victim.spec.op in msg, msg
            else:
                assert ret == 0, (k, ret, msg)
        # Work of the healthy streams is intact, and the failing stream's earlier call ran.
        for k in range(len(streams)):
            for j, p in enumerate(pendings[k]):
                if k == failing and j >= 1:
                    p.release()
                    continue
                assert p.finish() == expected[p.spec.key], (k, j)
        # Reported once; the failing stream keeps working.
        assert acl.rt.synchronize_stream(streams[failing]) == 0
        for spec in later:
            p = enqueue(spec, streams[failing])
            assert acl.rt.synchronize_stream(streams[failing]) == 0, aclnn.aclGetRecentErrMsg()
            assert p.finish() == expected[spec.key]
    finally:
        for per in pendings:
            for p in per:
                p.release()
        for s in streams:
            acl.rt.destroy_stream(s)


def test_recent_error_message_is_per_thread_under_concurrency():
    """A thread whose stream failed sees its message; a concurrently successful thread's
    message is not overwritten by it."""
    good, _ = acl.rt.create_stream()
    bad, _ = acl.rt.create_stream()
    messages: dict[str, str] = {}
    try:
        p_bad = enqueue(make_specs("msg-bad", 1, 41)[0], bad)
        assert acl.rt.free(p_bad.out.ptr) == 0
        p_bad.freed.add(id(p_bad.out))
        p_good = enqueue(make_specs("msg-good", 1, 42)[0], good)

        def on_good():  # a fresh thread: no recent error yet
            assert acl.rt.synchronize_stream(good) == 0
            messages["good"] = aclnn.aclGetRecentErrMsg()

        def on_bad():
            assert acl.rt.synchronize_stream(bad) == ERR_RUNTIME
            messages["bad"] = aclnn.aclGetRecentErrMsg()

        run_threads([on_good, on_bad], 60)
        assert messages["good"] == ""
        assert "freed" in messages["bad"]
        p_good.finish()
        p_bad.release()
    finally:
        acl.rt.destroy_stream(good)
        acl.rt.destroy_stream(bad)


def _enqueue_with_step(stream, step, seed: int) -> Pending:
    """A GELU call on small tensors whose launch is replaced by `step`, enqueued on `stream`."""
    x = _device(np.ones(8, np.float32))
    out = _device(np.zeros(8, np.float32))
    ws, executor, ret = aclnn.aclnnGeluBackwardV2GetWorkspaceSize(x.tensor, x.tensor, "none",
                                                                 out.tensor)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    executor.plan.steps[0] = step
    assert aclnn.aclnnGeluBackwardV2(None, ws, executor, stream) == 0
    return Pending(Spec(("step", seed), "GeluBackwardV2", DTYPES[0], seed), [x, out], out)


def test_synchronize_does_not_wait_for_work_enqueued_after_it_was_called():
    """aclrtSynchronizeStream waits for the tasks submitted before the call. Here thread A
    synchronizes a shared stream while its first task runs; meanwhile the main thread enqueues
    a second task that blocks until released. A's synchronize must return once the first task
    is done - if it also drains later work, a thread that keeps enqueuing on a shared stream
    can keep another thread's synchronize from ever returning."""
    stream, _ = acl.rt.create_stream()
    first_running, release_first, release_second = (threading.Event() for _ in range(3))
    result: dict[str, int] = {}

    def first():
        first_running.set()
        assert release_first.wait(10)

    def second():
        release_second.wait(10)

    pendings = []
    try:
        pendings.append(_enqueue_with_step(stream, first, 1))
        syncer = threading.Thread(
            target=lambda: result.setdefault("ret", acl.rt.synchronize_stream(stream)),
            daemon=True)
        syncer.start()
        assert first_running.wait(10)
        pendings.append(_enqueue_with_step(stream, second, 2))  # after A called synchronize
        release_first.set()
        syncer.join(timeout=3)
        still_waiting = syncer.is_alive()
        release_second.set()
        syncer.join(timeout=30)
        assert not syncer.is_alive()
        assert not still_waiting, ("synchronize_stream kept running a task enqueued after it "
                                   "was called (it drains the queue until it is empty)")
        assert result["ret"] == 0
    finally:
        release_first.set()
        release_second.set()
        acl.rt.synchronize_stream(stream)
        for p in pendings:
            p.release()
        acl.rt.destroy_stream(stream)


def test_error_of_work_enqueued_after_a_synchronize_began_goes_to_its_own_synchronize():
    """Thread A synchronizes a shared stream while its task runs; the main thread then
    enqueues a task that fails and synchronizes. The failure belongs to the main thread's
    synchronize (the task was submitted after A's call), not to A's: otherwise the thread
    whose work failed is told 0."""
    stream, _ = acl.rt.create_stream()
    first_running, release_first = threading.Event(), threading.Event()
    result: dict[str, tuple[int, str]] = {}

    def first():
        first_running.set()
        assert release_first.wait(10)

    def failing():
        raise RuntimeError("late task failed")

    def sync_a():
        ret = acl.rt.synchronize_stream(stream)
        result["a"] = (ret, aclnn.aclGetRecentErrMsg())

    pendings = []
    try:
        pendings.append(_enqueue_with_step(stream, first, 3))
        syncer = threading.Thread(target=sync_a, daemon=True)
        syncer.start()
        assert first_running.wait(10)
        pendings.append(_enqueue_with_step(stream, failing, 4))
        release_first.set()
        syncer.join(timeout=30)
        assert not syncer.is_alive()
        mine = acl.rt.synchronize_stream(stream)
        assert (result["a"][0], mine) == (0, acl.ACL_ERROR_RT_INTERNAL_ERROR), (
            f"A's synchronize returned {result['a']}, the enqueuing thread's returned {mine}")
    finally:
        release_first.set()
        acl.rt.synchronize_stream(stream)
        for p in pendings:
            p.release()
        acl.rt.destroy_stream(stream)


# --------------------------------------------------------------------------- determinism

BIG = 1 << 20


def big_cases():
    cases = []
    for dt in DTYPES:
        for op in OPS[:3]:
            cases.append((op, dt, "contiguous"))
            cases.append((op, dt, "broadcast"))
        cases.append(("AvgPool2dBackward", dt, "k3s2p1"))
        cases.append(("AvgPool2dBackward", dt, "k2s2ceil"))
    return cases


def _big_call(op: str, dt: np.dtype, layout: str, rng):
    """Device tensors and phase-1 arguments of a ~1M-element call."""
    if op == "AvgPool2dBackward":
        n, c, h, w = 4, 16, 128, 128
        k, s, p, ceil = (3, 2, 1, False) if layout == "k3s2p1" else (2, 2, 0, True)
        oh, ow = pooled_size(h, k, s, p, ceil), pooled_size(w, k, s, p, ceil)
        nchw = aclnn.ACL_FORMAT_NCHW
        g = _device(random_values(rng, (n, c, oh, ow), dt), nchw)
        x = _device(np.zeros((n, c, h, w), dt), nchw)
        out = _device(np.zeros((n, c, h, w), dt), nchw)
        arrays = [aclnn.aclCreateIntArray([k, k]), aclnn.aclCreateIntArray([s, s]),
                  aclnn.aclCreateIntArray([p, p])]
        args = (g.tensor, x.tensor, *arrays, ceil, layout == "k3s2p1", 0, 1, out.tensor)
        return [g, x, out], out, arrays, args
    shape = (1024, 1024)
    small = (1024, 1) if layout == "broadcast" else shape
    n_in = 2 if op == "GeluBackwardV2" else 3
    shapes = [shape] * n_in
    shapes[-1] = small
    devs = [_device(random_values(rng, s, dt)) for s in shapes]
    out = _device(np.zeros(shape, dt))
    t = [d.tensor for d in devs]
    if op == "SmoothL1LossBackward":
        args = (*t, 0, 0.75, out.tensor)
    elif op == "L1LossBackward":
        args = (*t, 2, out.tensor)
    else:
        args = (*t, "tanh" if layout == "broadcast" else "none", out.tensor)
    return [*devs, out], out, [], args


@pytest.mark.parametrize("op,dt,layout", big_cases(),
                         ids=[f"{o}-{d.name}-{lay}" for o, d, lay in big_cases()])
def test_large_inputs_identical_across_runs_and_numba_thread_counts(op, dt, layout):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{dt.name}-{layout}".encode()))
    devs, out, arrays, args = _big_call(op, dt, layout, rng)
    stream, _ = acl.rt.create_stream()
    default_threads = numba.get_num_threads()
    images = []
    workspace = None
    try:
        ws, executor, ret = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")(*args)
        assert ret == 0, aclnn.aclGetRecentErrMsg()
        if ws:
            workspace, ret = acl.rt.malloc(ws, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0
        assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
        for threads in (default_threads, default_threads, 1, 1):
            numba.set_num_threads(threads)
            assert numba.get_num_threads() == threads
            # Poison the output, so a run that wrote nothing cannot pass.
            ret = acl.rt.memset(out.ptr + GUARD_BYTES, out.nbytes, 0xEE, out.nbytes)
            assert ret == 0
            assert getattr(aclnn, f"aclnn{op}")(workspace, ws, executor, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0, aclnn.aclGetRecentErrMsg()
            images.append(out.image())
        assert aclnn.aclDestroyAclOpExecutor(executor) == 0
        for d in devs:
            d.check_guards()
    finally:
        numba.set_num_threads(default_threads)
        acl.rt.destroy_stream(stream)
        if workspace is not None:
            acl.rt.free(workspace)
        for d in devs:
            d.free()
        for a in arrays:
            aclnn.aclDestroyIntArray(a)
    assert numba.get_num_threads() == default_threads
    for image in images[1:]:
        assert np.array_equal(image, images[0])
    assert not (images[0][GUARD_BYTES:-GUARD_BYTES] == 0xEE).all()


# --------------------------------------------------------------------------- functional API


def _functional_cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(count):
        dt = DTYPES[i % 3]
        op = ["smooth_l1", "l1", "gelu", "avgpool"][(i // 3) % 4]
        if op == "avgpool":
            x = np.zeros((2, 3, 9, 8), dt)
            g = random_values(rng, (2, 3, 5, 4), dt)
            cases.append((op, (g, x)))
            continue
        shape = (int(rng.integers(1, 40)), int(rng.integers(1, 40)))
        a = random_values(rng, shape, dt)
        b = random_values(rng, shape[::-1], dt).T  # a transposed view
        c = random_values(rng, (shape[1],), dt)  # broadcast
        cases.append((op, (a, b, c)))
    return cases


def _functional(op, arrays):
    if op == "smooth_l1":
        return aclnn.smooth_l1_loss_backward(*arrays, "none", 0.5)
    if op == "l1":
        return aclnn.l1_loss_backward(*arrays, "sum")
    if op == "gelu":
        return aclnn.gelu_backward(arrays[0], arrays[1], "tanh")
    return aclnn.avg_pool2d_backward(*arrays, kernel_size=3, stride=2, padding=1)


def test_functional_api_from_several_threads_matches_single_threaded_bits():
    per_thread = 40 * SCALE
    cases = [_functional_cases(7000 + t, per_thread) for t in range(4)]
    expected = [[_functional(op, arrays).view(np.uint8).tobytes() for op, arrays in c]
                for c in cases]
    got: list[list[bytes]] = [[] for _ in cases]

    def worker(t):
        def fn():
            for _ in range(2):
                got[t] = [_functional(op, arrays).view(np.uint8).tobytes()
                          for op, arrays in cases[t]]
                assert got[t] == expected[t]
        return fn

    run_threads([worker(t) for t in range(len(cases))], WATCHDOG_S)
    assert got == expected


WORKQUEUE_SCRIPT = """
import threading
import numba, numpy as np
import aclnn
x = np.linspace(-6, 6, 1 << 18, dtype=np.float32)
alone = aclnn.gelu_backward(x, x)
results = []
def work():
    for _ in range(20):
        results.append(aclnn.gelu_backward(x, x).tobytes() == alone.tobytes())
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(numba.threading_layer(), len(results), all(results))
"""


def test_concurrent_launches_on_numbas_workqueue_layer_are_serialised():
    """The layer a machine without OpenMP or TBB gets aborts the process when two threads
    launch at once; the kernels serialise their launches on it (kernels.launch)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WORKQUEUE_SCRIPT], capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "NUMBA_THREADING_LAYER": "workqueue"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["workqueue", "80", "True"]
