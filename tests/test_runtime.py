"""The pyACL-compatible runtime (SPEC §4, §7): init, devices, SoC, memory, memcpy, streams.

The session fixture in conftest.py has already called acl.init() and set device 0.
"""

from __future__ import annotations

import numpy as np
import pytest

import aclnn
from aclnn import acl

SOCS = ["Ascend910", "Ascend310P", "Ascend910B", "Ascend910_93", "Ascend950"]
H2H = 0
H2D = 1
D2H = 2
D2D = 3


def malloc(nbytes, policy=None):
    ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST if policy is None else policy)
    assert ret == 0, ret
    return ptr


@pytest.fixture
def mem():
    """Allocate device memory for one test; everything still live is freed afterwards."""
    live = []

    def alloc(nbytes, fill=None):
        ptr = malloc(nbytes)
        live.append(ptr)
        if fill is not None:
            host = np.full(nbytes, fill, dtype=np.uint8)
            assert acl.rt.memcpy(ptr, nbytes, acl.util.numpy_to_ptr(host), nbytes, H2D) == 0
        return ptr

    alloc.live = live
    yield alloc
    for ptr in live:
        acl.rt.free(ptr)


def read(ptr, nbytes) -> np.ndarray:
    host = np.zeros(nbytes, dtype=np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), nbytes, ptr, nbytes, D2H) == 0
    return host


def write(ptr, data: np.ndarray) -> None:
    data = np.ascontiguousarray(data)
    ret = acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, H2D)
    assert ret == 0


# ---------------------------------------------------------------------------- init / device


def test_repeated_init_returns_100002():
    assert acl.init() == 100002


def test_finalize_then_init_again():
    assert acl.finalize() == 0
    try:
        assert acl.init() == 0
        assert acl.init() == 100002
    finally:
        # Leave the session as conftest set it up, whatever happened above.
        acl.init()
        assert acl.rt.set_device(0) == 0
    ptr = malloc(64)
    assert acl.rt.free(ptr) == 0


def test_set_and_reset_device():
    assert acl.rt.set_device(0) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.set_device(0) == 0
    ptr = malloc(128)
    write(ptr, np.arange(32, dtype=np.float32))
    assert (read(ptr, 128).view(np.float32) == np.arange(32)).all()
    assert acl.rt.free(ptr) == 0


def test_default_soc_is_ascend910b():
    assert acl.get_soc_name() == "Ascend910B"


@pytest.mark.parametrize("soc", SOCS)
def test_soc_selected_by_env_at_set_device(monkeypatch, soc):
    monkeypatch.setenv("ACLNN_SOC", soc)
    try:
        assert acl.rt.set_device(0) == 0
        assert acl.get_soc_name() == soc
    finally:
        monkeypatch.delenv("ACLNN_SOC")
        assert acl.rt.set_device(0) == 0
    assert acl.get_soc_name() == "Ascend910B"


@pytest.mark.parametrize("bad", ["Ascend999", "Ascend310", "Atlas"])
def test_unknown_soc_rejected_by_set_device(monkeypatch, bad):
    monkeypatch.setenv("ACLNN_SOC", bad)
    try:
        assert acl.rt.set_device(0) != 0
    finally:
        monkeypatch.delenv("ACLNN_SOC")
        assert acl.rt.set_device(0) == 0
    assert acl.get_soc_name() == "Ascend910B"


def test_soc_env_read_only_at_set_device(monkeypatch):
    monkeypatch.setenv("ACLNN_SOC", "Ascend310P")
    try:
        # Not re-read until set_device is called.
        assert acl.get_soc_name() == "Ascend910B"
        assert acl.rt.set_device(0) == 0
        assert acl.get_soc_name() == "Ascend310P"
    finally:
        monkeypatch.delenv("ACLNN_SOC")
        assert acl.rt.set_device(0) == 0


# ---------------------------------------------------------------------------- malloc / free


@pytest.mark.parametrize("policy", [0, 1, 2])
def test_malloc_policies(policy):
    ptr, ret = acl.rt.malloc(100, policy)
    assert ret == 0
    assert isinstance(ptr, int) and ptr != 0
    assert ptr % 64 == 0
    assert acl.rt.free(ptr) == 0


def test_malloc_policy_constants():
    assert acl.ACL_MEM_MALLOC_HUGE_FIRST == 0
    assert acl.ACL_MEM_MALLOC_HUGE_ONLY == 1
    assert acl.ACL_MEM_MALLOC_NORMAL_ONLY == 2


def test_malloc_aligned_and_distinct():
    ptrs = []
    try:
        for size in (1, 3, 63, 64, 65, 100, 1000, 4096, 7):
            ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0
            assert isinstance(ptr, int)
            assert ptr % 64 == 0, hex(ptr)
            ptrs.append((ptr, size))
        starts = sorted(ptrs)
        for (p0, s0), (p1, _) in zip(starts, starts[1:], strict=False):
            assert p0 + s0 <= p1, "allocations overlap"
    finally:
        for ptr, _ in ptrs:
            assert acl.rt.free(ptr) == 0


@pytest.mark.parametrize("size", [0, -1, -64, 1 << 60])
def test_malloc_bad_size(size):
    ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret != 0
    assert ptr == 0


@pytest.mark.parametrize("policy", [3, -1, 99])
def test_malloc_bad_policy(policy):
    ptr, ret = acl.rt.malloc(64, policy)
    assert ret != 0
    assert ptr == 0


def test_free_twice():
    ptr = malloc(64)
    assert acl.rt.free(ptr) == 0
    assert acl.rt.free(ptr) != 0


@pytest.mark.parametrize("ptr", [0, 64, 12345, 1 << 47])
def test_free_unknown_pointer(ptr):
    assert acl.rt.free(ptr) != 0


def test_free_interior_pointer_rejected_and_allocation_kept(mem):
    ptr = mem(256, fill=7)
    assert acl.rt.free(ptr + 64) != 0
    assert (read(ptr, 256) == 7).all()


# ---------------------------------------------------------------------------- memcpy


def test_memcpy_round_trip():
    host = np.arange(8, dtype=np.float32)
    nbytes = host.nbytes
    ptr = malloc(nbytes)
    try:
        ret = acl.rt.memcpy(ptr, nbytes, acl.util.numpy_to_ptr(host), nbytes, H2D)
        assert ret == 0
        back = np.zeros(8, dtype=np.float32)
        ret = acl.rt.memcpy(acl.util.numpy_to_ptr(back), nbytes, ptr, nbytes, D2H)
        assert ret == 0
        np.testing.assert_array_equal(back, host)
    finally:
        assert acl.rt.free(ptr) == 0


def test_memcpy_device_to_device_and_offsets(mem):
    a = mem(64)
    b = mem(64, fill=0)
    write(a, np.arange(16, dtype=np.float32))
    # Copy elements 4..7 of a to elements 8..11 of b.
    assert acl.rt.memcpy(b + 32, 32, a + 16, 16, D2D) == 0
    got = read(b, 64).view(np.float32)
    expected = np.zeros(16, np.float32)
    expected[8:12] = [4, 5, 6, 7]
    np.testing.assert_array_equal(got, expected)


def test_memcpy_host_to_host():
    src = np.arange(10, dtype=np.int32)
    dst = np.zeros(10, dtype=np.int32)
    ret = acl.rt.memcpy(
        acl.util.numpy_to_ptr(dst), dst.nbytes, acl.util.numpy_to_ptr(src), src.nbytes, H2H
    )
    assert ret == 0
    np.testing.assert_array_equal(dst, src)


def test_memcpy_partial_count(mem):
    ptr = mem(64, fill=0xEE)
    data = np.arange(16, dtype=np.uint8)
    assert acl.rt.memcpy(ptr, 64, acl.util.numpy_to_ptr(data), 10, H2D) == 0
    got = read(ptr, 64)
    assert (got[:10] == data[:10]).all()
    assert (got[10:] == 0xEE).all()


def test_numpy_to_ptr_is_the_data_address():
    host = np.arange(4, dtype=np.float64)
    assert acl.util.numpy_to_ptr(host) == host.ctypes.data


def test_memcpy_count_greater_than_dst_max(mem):
    ptr = mem(64, fill=0x11)
    data = np.full(64, 0x22, dtype=np.uint8)
    assert acl.rt.memcpy(ptr, 16, acl.util.numpy_to_ptr(data), 32, H2D) != 0
    assert (read(ptr, 64) == 0x11).all()
    host = np.full(64, 0x33, dtype=np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 16, ptr, 32, D2H) != 0
    assert (host == 0x33).all()


def test_memcpy_dst_beyond_allocation_end(mem):
    ptr = mem(64, fill=0x11)
    data = np.full(64, 0x22, dtype=np.uint8)
    # dst_max claims 64 bytes but only 32 remain in the allocation after ptr + 32.
    assert acl.rt.memcpy(ptr + 32, 64, acl.util.numpy_to_ptr(data), 64, H2D) != 0
    assert (read(ptr, 64) == 0x11).all()


def test_memcpy_src_beyond_allocation_end(mem):
    ptr = mem(64, fill=0x11)
    host = np.full(128, 0x33, dtype=np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 128, ptr, 128, D2H) != 0
    assert (host == 0x33).all()
    host2 = np.full(64, 0x33, dtype=np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host2), 64, ptr + 16, 64, D2H) != 0
    assert (host2 == 0x33).all()


def test_memcpy_d2d_beyond_either_end(mem):
    a = mem(64, fill=0x11)
    b = mem(128, fill=0x44)
    assert acl.rt.memcpy(a, 64, b, 128, D2D) != 0  # count > dst_max
    assert acl.rt.memcpy(a + 32, 64, b, 64, D2D) != 0  # runs past a's end
    assert acl.rt.memcpy(b, 128, a, 128, D2D) != 0  # reads past a's end
    assert (read(a, 64) == 0x11).all()
    assert (read(b, 128) == 0x44).all()


@pytest.mark.parametrize("bad", [64, 4096, 1 << 46])
def test_memcpy_unknown_device_pointer(bad):
    data = np.full(16, 0x22, dtype=np.uint8)
    assert acl.rt.memcpy(bad, 16, acl.util.numpy_to_ptr(data), 16, H2D) != 0
    host = np.full(16, 0x33, dtype=np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 16, bad, 16, D2H) != 0
    assert (host == 0x33).all()


def test_memcpy_freed_pointer():
    ptr = malloc(64)
    assert acl.rt.free(ptr) == 0
    data = np.full(16, 0x22, dtype=np.uint8)
    assert acl.rt.memcpy(ptr, 16, acl.util.numpy_to_ptr(data), 16, H2D) != 0
    host = np.full(16, 0x33, dtype=np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 16, ptr, 16, D2H) != 0
    assert (host == 0x33).all()


def test_memcpy_wrong_kind(mem):
    a = mem(64, fill=0x11)
    b = mem(64, fill=0x44)
    host = np.full(64, 0x55, dtype=np.uint8)
    hp = acl.util.numpy_to_ptr(host)
    # HOST_TO_DEVICE with a device source.
    assert acl.rt.memcpy(a, 64, b, 64, H2D) != 0
    # DEVICE_TO_HOST with a device destination.
    assert acl.rt.memcpy(a, 64, b, 64, D2H) != 0
    # DEVICE_TO_DEVICE with a host source / destination.
    assert acl.rt.memcpy(a, 64, hp, 64, D2D) != 0
    assert acl.rt.memcpy(hp, 64, b, 64, D2D) != 0
    # HOST_TO_DEVICE into host memory.
    assert acl.rt.memcpy(hp, 64, acl.util.numpy_to_ptr(np.zeros(64, np.uint8)), 64, H2D) != 0
    assert (read(a, 64) == 0x11).all()
    assert (read(b, 64) == 0x44).all()
    assert (host == 0x55).all()


@pytest.mark.parametrize("kind", [4, -1, 99])
def test_memcpy_invalid_kind(mem, kind):
    ptr = mem(64, fill=0x11)
    data = np.full(64, 0x22, dtype=np.uint8)
    assert acl.rt.memcpy(ptr, 64, acl.util.numpy_to_ptr(data), 64, kind) != 0
    assert (read(ptr, 64) == 0x11).all()


def test_memcpy_kind_constants():
    assert acl.ACL_MEMCPY_HOST_TO_HOST == 0
    assert acl.ACL_MEMCPY_HOST_TO_DEVICE == 1
    assert acl.ACL_MEMCPY_DEVICE_TO_HOST == 2
    assert acl.ACL_MEMCPY_DEVICE_TO_DEVICE == 3


# ---------------------------------------------------------------------------- ptr_to_numpy


def test_ptr_to_numpy_views_device_memory(mem):
    ptr = mem(32)
    write(ptr, np.arange(8, dtype=np.float32))
    view = acl.util.ptr_to_numpy(ptr, (2, 4), np.float32)
    assert view.shape == (2, 4)
    assert view.dtype == np.float32
    np.testing.assert_array_equal(view, np.arange(8, dtype=np.float32).reshape(2, 4))
    # A view, not a copy: later device writes show through ...
    write(ptr, np.full(8, 9.5, dtype=np.float32))
    assert (view == 9.5).all()
    # ... and writes through the view reach the device memory.
    view[0, 0] = -1.0
    assert read(ptr, 32).view(np.float32)[0] == -1.0


def test_ptr_to_numpy_with_offset(mem):
    ptr = mem(64)
    write(ptr, np.arange(16, dtype=np.int32))
    view = acl.util.ptr_to_numpy(ptr + 8, (4,), np.int32)
    np.testing.assert_array_equal(view, [2, 3, 4, 5])


def _rejected(call) -> bool:
    try:
        result = call()
    except Exception:
        return True
    if result is None:
        return True
    return isinstance(result, tuple) and result[-1] != 0


def test_ptr_to_numpy_out_of_bounds_rejected(mem):
    ptr = mem(16)
    assert _rejected(lambda: acl.util.ptr_to_numpy(ptr, (5,), np.float32))
    assert _rejected(lambda: acl.util.ptr_to_numpy(ptr + 8, (3,), np.float32))
    assert _rejected(lambda: acl.util.ptr_to_numpy(ptr, (2, 2), np.float64))


def test_ptr_to_numpy_freed_allocation_rejected():
    ptr = malloc(64)
    assert acl.rt.free(ptr) == 0
    assert _rejected(lambda: acl.util.ptr_to_numpy(ptr, (4,), np.float32))


# ---------------------------------------------------------------------------- streams


def test_create_and_destroy_stream():
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert stream is not None
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_destroy_stream_twice():
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) != 0


def test_destroy_unknown_stream():
    assert acl.rt.destroy_stream(123456789) != 0


def test_synchronize_destroyed_stream():
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.synchronize_stream(stream) != 0


def test_distinct_streams():
    s1, r1 = acl.rt.create_stream()
    s2, r2 = acl.rt.create_stream()
    assert r1 == 0 and r2 == 0
    assert s1 is not s2 and s1 != s2
    assert acl.rt.destroy_stream(s1) == 0
    assert acl.rt.destroy_stream(s2) == 0


def test_synchronize_default_stream():
    assert acl.rt.synchronize_stream(None) == 0


class Chain:
    """A chain of SmoothL1LossBackward ops, each consuming the previous op's output.

    self = 0.5, target = 0, beta = 1, reduction none: gradInput = gradOut * 0.5, so after
    n ops the last buffer holds 0.5**n exactly -- only if the ops ran in order.
    """

    def __init__(self, n, size=64):
        self.n = n
        self.size = size
        nbytes = size * 4
        self.ptrs = [malloc(nbytes) for _ in range(n + 3)]
        write(self.ptrs[0], np.ones(size, np.float32))
        for p in self.ptrs[1 : n + 1]:
            write(p, np.full(size, 123.0, np.float32))
        write(self.ptrs[n + 1], np.full(size, 0.5, np.float32))
        write(self.ptrs[n + 2], np.zeros(size, np.float32))
        self.tensors = [
            aclnn.aclCreateTensor([size], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [size], p)
            for p in self.ptrs
        ]
        assert all(t is not None for t in self.tensors), aclnn.aclGetRecentErrMsg()

    def enqueue(self, stream):
        x, y = self.tensors[self.n + 1], self.tensors[self.n + 2]
        for i in range(self.n):
            g, out = self.tensors[i], self.tensors[i + 1]
            ws, ex, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0, out)
            assert ret == 0, aclnn.aclGetRecentErrMsg()
            assert aclnn.aclnnSmoothL1LossBackward(None, ws, ex, stream) == 0

    def check(self):
        for i in range(1, self.n + 1):
            got = read(self.ptrs[i], self.size * 4).view(np.float32)
            assert (got == np.float32(0.5**i)).all(), (i, got[:4])

    def release(self):
        for t in self.tensors:
            aclnn.aclDestroyTensor(t)
        for p in self.ptrs:
            acl.rt.free(p)


def test_stream_runs_ops_in_order():
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    chain = Chain(12)
    try:
        chain.enqueue(stream)
        assert acl.rt.synchronize_stream(stream) == 0
        chain.check()
    finally:
        chain.release()
        acl.rt.destroy_stream(stream)


def test_default_stream_runs_ops_in_order():
    chain = Chain(6)
    try:
        chain.enqueue(None)
        assert acl.rt.synchronize_stream(None) == 0
        chain.check()
    finally:
        chain.release()


def test_two_streams_independent_chains():
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    c1, c2 = Chain(5), Chain(7, size=200)
    try:
        c1.enqueue(s1)
        c2.enqueue(s2)
        assert acl.rt.synchronize_stream(s2) == 0
        assert acl.rt.synchronize_stream(s1) == 0
        c1.check()
        c2.check()
    finally:
        c1.release()
        c2.release()
        acl.rt.destroy_stream(s1)
        acl.rt.destroy_stream(s2)


def test_phase2_enqueues_and_result_is_there_after_synchronize():
    """Phase 2 only enqueues (it returns 0 whatever the queue holds); the results are
    guaranteed after synchronize_stream. Whether work already ran when phase 2 returns is
    not observable without racing, so only the guaranteed part is asserted."""
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    chain = Chain(3, size=4096)
    try:
        chain.enqueue(stream)
        assert acl.rt.synchronize_stream(stream) == 0
        chain.check()
        # Synchronizing an idle stream again is fine.
        assert acl.rt.synchronize_stream(stream) == 0
    finally:
        chain.release()
        acl.rt.destroy_stream(stream)


def test_allocations_beyond_the_memory_budget_fail_with_a_status():
    """Found by the fuzzing campaign: a 16-20 GiB malloc succeeded (virtual memory) and the
    process was killed once the memory was touched. Allocations now count against a budget
    of 80 % of physical memory, device and host together."""
    from aclnn.acl._memory import budget

    before = budget.in_use
    big = budget.capacity - budget.in_use - 4096
    ptr, ret = acl.rt.malloc(big, acl.ACL_MEM_MALLOC_HUGE_FIRST)  # virtual: never touched
    assert ret == 0
    try:
        second, ret = acl.rt.malloc_host(8192)
        assert (second, ret) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
        assert "memory budget has" in acl.get_recent_err_msg()
        small, ret = acl.rt.malloc(1024, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0 and acl.rt.free(small) == 0
    finally:
        assert acl.rt.free(ptr) == 0
    assert budget.in_use == before
    ptr, ret = acl.rt.malloc(budget.capacity + 1, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert (ptr, ret) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)


@pytest.mark.parametrize("dtype", [b",", "not a dtype", object(), "(", 3.5])
def test_ptr_to_numpy_with_a_junk_dtype_is_a_type_error(dtype):
    """Found by the fuzzing campaign: np.dtype(b",") raised SyntaxError."""
    ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    try:
        with pytest.raises(TypeError, match="ptr_to_numpy: .* is not a NumPy dtype"):
            acl.util.ptr_to_numpy(ptr, (4,), dtype)
    finally:
        acl.rt.free(ptr)


def test_device_heap_overlaps_counts_any_shared_byte():
    """The C API rejects a host side of memcpy that shares a byte with device memory."""
    from aclnn.acl._memory import device_heap

    ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    try:
        end = ptr + 64
        assert device_heap.overlaps(ptr - 8, 16) and device_heap.overlaps(end - 1, 1)
        assert device_heap.overlaps(ptr + 8, 8) and device_heap.overlaps(ptr - 64, 256)
        assert not device_heap.overlaps(ptr - 16, 16) and not device_heap.overlaps(end, 8)
    finally:
        acl.rt.free(ptr)
    assert not device_heap.overlaps(ptr, 64)


def test_a_freed_large_device_allocation_is_reused_by_the_next_of_its_size():
    """A workspace allocated and freed around every call costs no mmap / munmap after the
    first: the freed buffer is kept and handed out again; tensors made over the freed
    allocation stay dead."""
    from aclnn.acl._memory import SPARE_MIN, device_heap

    size = SPARE_MIN + 4096
    first = malloc(size)
    buffer = device_heap.find(first).buffer
    tensor = aclnn.aclCreateTensor([4], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [4], first)
    assert acl.rt.free(first) == 0
    again = malloc(size)
    try:
        assert again == first and device_heap.find(again).buffer is buffer
        assert not tensor.is_live()
        host = np.arange(size, dtype=np.uint64).astype(np.uint8)
        assert acl.rt.memcpy(again, size, acl.util.numpy_to_ptr(host), size, H2D) == 0
        back = np.empty(size, np.uint8)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(back), size, again, size, D2H) == 0
        assert np.array_equal(back, host)
    finally:
        assert acl.rt.free(again) == 0
        aclnn.aclDestroyTensor(tensor)


def test_spare_buffers_are_bounded_and_let_go():
    """Kept: freed allocations from SPARE_MIN bytes, up to the heap's limit in all; a large
    allocation of another size lets them all go, as does releasing everything (acl's
    finalize); small ones are never kept, nor host allocations."""
    from aclnn.acl import _memory

    quarter = 2 * _memory.SPARE_MIN
    heap = _memory._Heap(spare_limit=3 * quarter)

    spare_bytes = heap.spare_bytes

    heap.release(heap.allocate(_memory.SPARE_MIN - 64).addr)
    assert spare_bytes() == 0
    regions = [heap.allocate(quarter) for _ in range(4)]  # only three fit under the limit
    for region in regions:
        heap.release(region.addr)
    assert spare_bytes() == 3 * quarter
    reused = heap.allocate(quarter)
    assert reused.addr in {r.addr for r in regions[:3]} and spare_bytes() == 2 * quarter
    other = heap.allocate(_memory.SPARE_MIN)  # a size none matches
    assert spare_bytes() == 0
    heap.release(other.addr)
    assert spare_bytes() == _memory.SPARE_MIN
    heap.release_all()
    assert spare_bytes() == 0 and not heap._regions
    host, ret = acl.rt.malloc_host(_memory.SPARE_MIN)
    assert ret == 0 and acl.rt.free_host(host) == 0
    assert not _memory.host_heap._spares
