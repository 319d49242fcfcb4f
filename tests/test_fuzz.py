"""The fuzzing campaign: every public entry point with random and hostile arguments.

Every call must return a documented status (or, for the Python-level helpers, raise the
documented exception), and memory must change only where a successful call says: a
shadow copy of every allocation is kept, each successful memcpy/memset is applied to it,
and after every operator call only the bytes of the output's view may differ.

CI runs a short campaign; the long one is the same tests with more examples:
    ACLNN_FUZZ_EXAMPLES=3000 ACLNN_FUZZ_REPORT=fuzz.json pytest tests/test_fuzz.py
(the report counts the calls made per entry point).
"""

from __future__ import annotations

import atexit
import json
import os
from collections import Counter

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aclnn
from aclnn import acl
from aclnn.user.cases import CaseFileError, parse_cases
from aclnn.user.runner import run_case

LONG = "ACLNN_FUZZ_EXAMPLES" in os.environ  # the long campaign: random, not derandomized
EXAMPLES = int(os.environ.get("ACLNN_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not LONG,
                suppress_health_check=list(HealthCheck))
CALLS: Counter = Counter()

ACL_STATUSES = {0, 100000, 100001, 100002, 100037, 107000, 107001, 207001}
PHASE1_STATUSES = {0, 161001, 161002}  # 561000 (internal error) would be a bug
PHASE2_STATUSES = {0, 161001, 161002}
SYNC_STATUSES = {0, 361001}  # 507000 (a kernel raised) would be a bug


def _report() -> None:
    path = os.environ.get("ACLNN_FUZZ_REPORT")
    if path and CALLS:
        Path = __import__("pathlib").Path
        Path(path).write_text(json.dumps({"examples_per_test": EXAMPLES,
                                          "calls": sum(CALLS.values()),
                                          "by_entry_point": dict(CALLS)}, indent=1))


atexit.register(_report)


def call(name: str, fn, *args, **kwargs):
    """Call an entry point, counting it."""
    CALLS[name] += 1
    return fn(*args, **kwargs)


def status_of(result) -> int:
    """The status of a pyACL-style result (the last element of a tuple, or the int)."""
    status = result[-1] if isinstance(result, tuple) else result
    assert type(status) is int, f"status {status!r} is not an int"
    return status


JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.binary(max_size=4), st.lists(st.integers(-3, 3), max_size=3),
    st.sampled_from([object(), np.float32(1.5), np.int64(-1), np.array([1, 2]), 1j, (), {}]),
)
SMALL_INTS = st.integers(-3, 70)


# --------------------------------------------------------------------------- the shadow world


class World:
    """Live allocations with shadow copies of their bytes; freed pointers; streams."""

    def __init__(self):
        self.allocs: dict[int, np.ndarray] = {}  # ptr -> shadow bytes
        self.freed: list[int] = []
        self.host: list[np.ndarray] = []  # host arrays registered with numpy_to_ptr
        self.streams: list[int] = []
        self.dead_streams: list[int] = []

    def malloc(self, size: int) -> int:
        ptr, status = acl.rt.malloc(size, 0)
        assert status == 0, acl.get_recent_err_msg()
        self.allocs[ptr] = self.read(ptr, size)
        return ptr

    @staticmethod
    def read(ptr: int, size: int) -> np.ndarray:
        return acl.util.ptr_to_numpy(ptr, (size,), np.uint8).copy()

    def write(self, ptr: int, data: np.ndarray) -> None:
        acl.util.ptr_to_numpy(ptr, data.shape, np.uint8)[...] = data
        self.allocs[ptr] = data.copy()

    def find(self, addr: int, count: int):
        """(kind, base, array) of the live memory holding [addr, addr+count), or None."""
        for base, shadow in self.allocs.items():
            if base <= addr and addr + count <= base + shadow.size:
                return "device", base, shadow
        for array in self.host:
            base = array.ctypes.data
            if base <= addr and addr + count <= base + array.nbytes:
                return "host", base, array.reshape(-1).view(np.uint8)
        return None

    def check(self, allowed: dict[int, np.ndarray] | None = None) -> None:
        """Every allocation equals its shadow, except bytes `allowed[ptr]` marks."""
        for ptr, shadow in self.allocs.items():
            actual = self.read(ptr, shadow.size)
            differs = actual != shadow
            if allowed and ptr in allowed:
                differs &= ~allowed[ptr]
            assert not differs.any(), (
                f"allocation {ptr:#x}: bytes {np.flatnonzero(differs)[:8]} changed unexpectedly")
            self.allocs[ptr] = actual

    def release(self) -> None:
        for ptr in self.allocs:
            assert acl.rt.free(ptr) == 0
        for handle in self.streams:
            acl.rt.destroy_stream(handle)
        self.allocs.clear()


def pointer(draw, world: World, count: int = 0):
    """A pointer worth trying: inside, at the edge of, or past a live allocation; a freed
    one; a host address; or junk."""
    choices = ["junk", "freed"]
    if world.allocs:
        choices += ["device", "device", "device"]
    if world.host:
        choices += ["host"]
    kind = draw(st.sampled_from(choices))
    if kind == "device":
        base = draw(st.sampled_from(sorted(world.allocs)))
        size = world.allocs[base].size
        return base + draw(st.integers(-8, size + 8))
    if kind == "host":
        array = draw(st.sampled_from(world.host))
        return array.ctypes.data + draw(st.integers(-4, array.nbytes + 4))
    if kind == "freed" and world.freed:
        return draw(st.sampled_from(world.freed))
    return draw(st.one_of(JUNK, st.integers(0, 2**64)))


# --------------------------------------------------------------------------- the runtime


@FUZZ
@given(st.data())
def test_fuzz_runtime(data):
    world = World()
    draw = data.draw
    try:
        for _ in range(draw(st.integers(1, 25))):
            action = draw(st.sampled_from(["malloc", "free", "memcpy", "memset", "stream",
                                           "register", "ptr_to_numpy", "device", "malloc_host"]))
            if action == "malloc":
                size = draw(st.one_of(st.integers(-4, 512), JUNK))
                policy = draw(st.one_of(st.sampled_from([0, 1, 2]), JUNK))
                result = call("rt.malloc", acl.rt.malloc, size, policy)
                assert status_of(result) in ACL_STATUSES
                if result[1] == 0:
                    assert result[0] % 64 == 0
                    if size > 1 << 16:  # a big one (virtual until touched): not shadowed
                        assert acl.rt.free(result[0]) == 0
                        continue
                    world.allocs[result[0]] = world.read(result[0], size)
            elif action == "malloc_host":
                result = call("rt.malloc_host", acl.rt.malloc_host,
                              draw(st.one_of(st.integers(-4, 64), JUNK)))
                assert status_of(result) in ACL_STATUSES
                if result[1] == 0:
                    assert call("rt.free_host", acl.rt.free_host, result[0]) == 0
            elif action == "free":
                ptr = pointer(draw, world)
                status = status_of(call("rt.free", acl.rt.free, ptr))
                assert status in ACL_STATUSES
                if status == 0:
                    assert ptr in world.allocs
                    del world.allocs[ptr]
                    world.freed.append(ptr)
            elif action == "memcpy":
                dst, src = pointer(draw, world), pointer(draw, world)
                count = draw(st.one_of(st.integers(-2, 80), JUNK))
                dst_max = draw(st.one_of(st.just(count), st.integers(-2, 80), JUNK))
                kind = draw(st.one_of(st.integers(-1, 4), JUNK))
                status = status_of(call("rt.memcpy", acl.rt.memcpy, dst, dst_max, src, count,
                                        kind))
                assert status in ACL_STATUSES
                if status == 0 and count:
                    dst_at, src_at = world.find(dst, count), world.find(src, count)
                    assert dst_at and src_at, "memcpy succeeded outside live memory"
                    assert (dst_at[0] == "device", src_at[0] == "device") == {
                        0: (False, False), 1: (True, False), 2: (False, True),
                        3: (True, True)}[kind]
                    payload = src_at[2][src - src_at[1]: src - src_at[1] + count].copy()
                    dst_at[2][dst - dst_at[1]: dst - dst_at[1] + count] = payload
            elif action == "memset":
                ptr = pointer(draw, world)
                count = draw(st.one_of(st.integers(-2, 80), JUNK))
                max_count = draw(st.one_of(st.just(count), st.integers(-2, 80), JUNK))
                value = draw(st.one_of(st.integers(-2, 260), JUNK))
                status = status_of(call("rt.memset", acl.rt.memset, ptr, max_count, value,
                                        count))
                assert status in ACL_STATUSES
                if status == 0 and count:
                    at = world.find(ptr, count)
                    assert at and at[0] == "device"
                    at[2][ptr - at[1]: ptr - at[1] + count] = value
            elif action == "stream":
                which = draw(st.sampled_from(["create", "destroy", "sync"]))
                if which == "create":
                    handle, status = call("rt.create_stream", acl.rt.create_stream)
                    assert status == 0
                    world.streams.append(handle)
                    continue
                handle = draw(st.one_of(st.sampled_from(world.streams + world.dead_streams
                                                        + [None, 0]), JUNK))
                fn = acl.rt.destroy_stream if which == "destroy" else acl.rt.synchronize_stream
                status = status_of(call(f"rt.{fn.__name__}", fn, handle))
                assert status in ACL_STATUSES
                if which == "destroy" and status == 0:
                    world.streams.remove(handle)
                    world.dead_streams.append(handle)
            elif action == "register":
                value = draw(st.one_of(JUNK, st.builds(lambda n: np.zeros(n, np.uint8),
                                                       st.integers(0, 64))))
                try:
                    ptr = call("util.numpy_to_ptr", acl.util.numpy_to_ptr, value)
                except (TypeError, ValueError):
                    continue
                assert ptr == value.ctypes.data
                world.host.append(value)
            elif action == "ptr_to_numpy":
                ptr = pointer(draw, world)
                shape = draw(st.one_of(st.lists(st.integers(-2, 9), max_size=3), JUNK))
                dtype = draw(st.one_of(st.sampled_from([np.uint8, np.float32, np.float16]),
                                       JUNK))
                try:
                    view = call("util.ptr_to_numpy", acl.util.ptr_to_numpy, ptr, shape, dtype)
                except (TypeError, ValueError, OverflowError):
                    continue
                at = world.find(int(ptr), view.nbytes)
                assert at is not None, "ptr_to_numpy reached memory that is not live"
            else:
                value = draw(st.one_of(st.integers(-2, 9), JUNK))
                assert status_of(call("rt.set_device", acl.rt.set_device, value)) in ACL_STATUSES
                assert acl.rt.set_device(0) == 0
            world.check()
    finally:
        world.release()
        acl.rt.set_device(0)


# --------------------------------------------------------------------------- tensors

DTYPE_CODES = st.one_of(st.sampled_from([0, 1, 2, 3, 9, 11, 12, 27, 33]), st.integers(-3, 40))


@FUZZ
@given(st.data())
def test_fuzz_create_tensor(data):
    world = World()
    draw = data.draw
    try:
        world.malloc(draw(st.integers(1, 256)))
        for _ in range(draw(st.integers(1, 10))):
            dims = draw(st.lists(st.integers(-2, 9), max_size=4))
            strides = draw(st.one_of(st.none(), st.lists(st.integers(-9, 9), min_size=len(dims),
                                                         max_size=len(dims))))
            offset = draw(st.integers(-3, 40))
            storage = draw(st.lists(st.integers(-1, 80), min_size=1, max_size=2))
            dtype, fmt = draw(st.sampled_from([0, 1, 27, 3])), draw(st.sampled_from([0, 2, 47]))
            addr = draw(st.sampled_from(sorted(world.allocs)))
            fields = [dims, dtype, strides, offset, fmt, storage, addr]
            for _ in range(draw(st.integers(0, 2))):  # hostile fields
                spoiled = draw(st.integers(0, 6))
                fields[spoiled] = (pointer(draw, world) if spoiled == 6 else
                                   draw(st.one_of(JUNK, DTYPE_CODES)))
            dims, dtype, strides, offset, fmt, storage, addr = fields
            tensor = call("aclCreateTensor", aclnn.aclCreateTensor, dims, dtype, strides,
                          offset, fmt, storage, addr)
            if tensor is None:
                assert "aclCreateTensor" in aclnn.aclGetRecentErrMsg()
                continue
            if tensor.numel and tensor.addr is not None:
                view = tensor.numpy_view()  # inside its allocation, or this would fault
                at = world.find(int(view.ctypes.data), 1)
                assert at is not None and at[0] == "device"
            for getter in (aclnn.aclGetViewShape, aclnn.aclGetViewStrides,
                           aclnn.aclGetViewOffset, aclnn.aclGetStorageShape,
                           aclnn.aclGetDataType, aclnn.aclGetFormat):
                assert status_of(call(getter.__name__, getter, tensor)) == 0
                assert status_of(getter(draw(JUNK))) in (161001, 161002)
            assert call("aclDestroyTensor", aclnn.aclDestroyTensor, tensor) == 0
            assert aclnn.aclDestroyTensor(tensor) == 161002
            assert status_of(aclnn.aclGetViewShape(tensor)) == 161002
        for make, destroy in ((aclnn.aclCreateIntArray, aclnn.aclDestroyIntArray),
                              (aclnn.aclCreateScalar, aclnn.aclDestroyScalar)):
            args = (draw(st.one_of(st.lists(st.integers(-5, 5), max_size=3), JUNK)),
                    draw(st.one_of(DTYPE_CODES, JUNK)))
            made = call(make.__name__, make, *args[: 1 if make is aclnn.aclCreateIntArray
                                                    else 2])
            assert status_of(call(destroy.__name__, destroy, made)) in (0, 161002)
            assert status_of(destroy(draw(JUNK))) in (0, 161002)
        world.check()
    finally:
        world.release()


# --------------------------------------------------------------------------- operators

FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
ACL = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(ml_dtypes.bfloat16): 27,
       np.dtype(np.int32): 3, np.dtype(np.float64): 11}
SPECIALS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, 3e38, -1.0, 0.5])


class Pool:
    """Tensors for one example: views of a few allocations (sharing memory on purpose),
    plus destroyed ones and ones whose memory was freed."""

    def __init__(self, draw, world: World):
        self.world, self.tensors, self.bad = world, [], []
        for _ in range(draw(st.integers(1, 3))):
            dtype = np.dtype(draw(st.sampled_from(FLOATS + [np.int32, np.float64])))
            count = draw(st.integers(1, 48))
            ptr = world.malloc(count * dtype.itemsize)
            raw = draw(st.lists(st.sampled_from(list(SPECIALS)) | st.floats(-4, 4),
                                min_size=count, max_size=count))
            with np.errstate(invalid="ignore", over="ignore"):
                world.write(ptr, np.array(raw).astype(dtype).view(np.uint8))
            for _ in range(draw(st.integers(1, 4))):
                self.add_view(draw, ptr, count, dtype)
        spare = world.malloc(64)
        gone = aclnn.aclCreateTensor([4], 0, [1], 0, 2, [4], spare)
        destroyed = aclnn.aclCreateTensor([4], 0, [1], 0, 2, [4], spare)
        assert aclnn.aclDestroyTensor(destroyed) == 0
        assert acl.rt.free(spare) == 0
        del world.allocs[spare]
        world.freed.append(spare)
        self.bad = [gone, destroyed]

    def add_view(self, draw, ptr, count, dtype):
        rank = draw(st.integers(0, 4))
        shape = [draw(st.integers(0, 4)) for _ in range(rank)]
        strides = [draw(st.integers(-3, 6)) for _ in range(rank)]
        offset = draw(st.integers(0, count))
        fmt = draw(st.sampled_from([0, 2, 47, 1]))
        tensor = aclnn.aclCreateTensor(shape, ACL[dtype], strides, offset, fmt, [count], ptr)
        if tensor is not None:
            self.tensors.append(tensor)

    def pick(self, draw):
        kind = draw(st.sampled_from(["tensor"] * 6 + ["none", "bad", "junk"]))
        if kind == "tensor" and self.tensors:
            return draw(st.sampled_from(self.tensors))
        if kind == "bad":
            return draw(st.sampled_from(self.bad))
        if kind == "none":
            return None
        return draw(JUNK)


def _attrs(draw, op: str):
    def maybe(good):
        return draw(st.one_of(good, good, good, JUNK))

    if op == "SmoothL1LossBackward":
        return [maybe(st.integers(0, 2)), maybe(st.floats(-1, 3) | st.just(float("nan")))]
    if op == "L1LossBackward":
        return [maybe(st.integers(-1, 3))]
    if op == "GeluBackwardV2":
        return [maybe(st.sampled_from(["none", "tanh", "exact", ""]))]
    arrays = [maybe(st.builds(aclnn.aclCreateIntArray, st.lists(st.integers(-1, 4),
                                                                 max_size=3)))
              for _ in range(3)]
    return arrays + [maybe(st.booleans()), maybe(st.booleans()), maybe(st.integers(-300, 300)),
                     maybe(st.integers(-1, 4))]


def _fresh(draw, world: World, shape, dtype, fmt=2):
    """A new contiguous tensor of `shape` in an allocation of its own, random values."""
    dtype = np.dtype(dtype)
    count = max(int(np.prod(shape)), 1)
    ptr = world.malloc(count * dtype.itemsize)
    raw = draw(st.lists(st.sampled_from(list(SPECIALS)) | st.floats(-4, 4), min_size=count,
                        max_size=count))
    with np.errstate(invalid="ignore", over="ignore"):
        world.write(ptr, np.array(raw).astype(dtype).view(np.uint8))
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    tensor = aclnn.aclCreateTensor(list(shape), ACL[dtype], strides, 0, fmt, [count], ptr)
    assert tensor is not None, aclnn.aclGetRecentErrMsg()
    return tensor


def _valid_call(draw, world: World, op: str) -> list:
    """Arguments that pass every check (random dtype, shapes, broadcast, attributes)."""
    dtype = draw(st.sampled_from(FLOATS))
    if op == "AvgPool2dBackward":
        k, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        p = draw(st.integers(0, k // 2))
        n, c, h, w = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(k, 7)),
                      draw(st.integers(k, 7)))
        shape = (n, c, h, w)
        grad_shape = (n, c, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1)
        cube = draw(st.sampled_from([1, 2]) if dtype == np.float32 else st.integers(0, 3))
        return [_fresh(draw, world, grad_shape, dtype, 0), _fresh(draw, world, shape, dtype, 0),
                aclnn.aclCreateIntArray([k]), aclnn.aclCreateIntArray([s]),
                aclnn.aclCreateIntArray([p]), False, draw(st.booleans()),
                draw(st.integers(-3, 3)), cube, _fresh(draw, world, shape, dtype, 0)]
    full = draw(st.lists(st.integers(0, 4), max_size=3))
    count = 2 if op == "GeluBackwardV2" else 3
    shapes = [[d if draw(st.booleans()) else 1 for d in full] for _ in range(count)]
    shapes[draw(st.integers(0, count - 1))] = full
    inputs = [_fresh(draw, world, shape, dtype) for shape in shapes]
    attrs = {"SmoothL1LossBackward": [draw(st.integers(0, 2)), draw(st.floats(0, 2))],
             "L1LossBackward": [draw(st.integers(0, 2))],
             "GeluBackwardV2": [draw(st.sampled_from(["none", "tanh"]))]}[op]
    return inputs + attrs + [_fresh(draw, world, full, dtype)]


def _call_args(draw, pool: Pool, op: str) -> list:
    if op == "AvgPool2dBackward":
        g, x = pool.pick(draw), pool.pick(draw)
        kernel, stride, padding, *rest = _attrs(draw, op)
        return [g, x, kernel, stride, padding, *rest, pool.pick(draw)]
    count = 2 if op == "GeluBackwardV2" else 3
    return [pool.pick(draw) for _ in range(count)] + _attrs(draw, op) + [pool.pick(draw)]


def _view_bytes(tensor) -> tuple[int, np.ndarray] | None:
    """(allocation base, mask of the bytes the tensor's view covers)."""
    if tensor.numel == 0:
        return None
    region = tensor.region
    mask = np.zeros(region.size, bool)
    index = np.indices(tensor.view_shape).reshape(tensor.ndim, tensor.numel)
    steps = (np.array(tensor.strides, dtype=np.int64).reshape(-1, 1) * index).sum(0)
    elements = tensor.byte_offset() + steps * tensor.itemsize
    for b in range(tensor.itemsize):
        mask[elements + b] = True
    return region.addr, mask


OPS = ["SmoothL1LossBackward", "L1LossBackward", "GeluBackwardV2", "AvgPool2dBackward"]


@FUZZ
@given(st.data())
def test_fuzz_operators(data):
    world = World()
    draw = data.draw
    stream, _ = acl.rt.create_stream()
    try:
        pool = Pool(draw, world)
        world.check()
        for _ in range(draw(st.integers(1, 6))):
            op = draw(st.sampled_from(OPS))
            if draw(st.booleans()):  # a valid call, perhaps with one argument spoiled
                args = _valid_call(draw, world, op)
                if draw(st.booleans()):
                    spoiled = draw(st.integers(0, len(args) - 1))
                    args[spoiled] = draw(st.one_of(st.just(pool.pick(draw)), JUNK))
            else:
                args = _call_args(draw, pool, op)
            phase1 = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")
            ws, executor, status = call(f"{op}GetWorkspaceSize", phase1, *args)
            assert status in PHASE1_STATUSES, aclnn.aclGetRecentErrMsg()
            if status:
                assert executor is None and aclnn.aclGetRecentErrMsg()
                world.check()
                continue
            out = args[-1]
            if draw(st.booleans()):
                assert aclnn.aclSetAclOpExecutorRepeatable(executor) == 0
            where = draw(st.sampled_from([stream, stream, None, "junk", 10**9]))
            run = getattr(aclnn, f"aclnn{op}")
            status = call(op, run, draw(st.one_of(st.none(), JUNK)),
                          draw(st.one_of(st.just(ws), JUNK)), executor, where)
            assert status in PHASE2_STATUSES, aclnn.aclGetRecentErrMsg()
            view = _view_bytes(out)
            vanished = status == 0 and draw(st.integers(0, 5)) == 0
            if vanished:  # an input destroyed after phase 2: the queued work must refuse
                victim = args[1]
                assert aclnn.aclDestroyTensor(victim) == 0
                pool.tensors = [t for t in pool.tensors if t is not victim]
            sync = acl.rt.synchronize_stream(None if where is None else stream)
            queued = vanished and view is not None
            assert sync == (361001 if queued else 0), (
                f"{aclnn.aclGetRecentErrMsg()} vanished={vanished} out={out!r} where={where!r}")
            if queued:
                view = None
            allowed = {view[0]: view[1]} if view is not None and status == 0 else {}
            world.check(allowed)
            if vanished:
                continue
            workspace = world.malloc(ws) if ws else None  # a live one of the size asked
            again = call(op, run, workspace, ws, executor, stream)
            assert again == (0 if executor.repeatable or status else 161002)
            assert acl.rt.synchronize_stream(stream) == 0
            allowed = {view[0]: view[1]} if view is not None and again == 0 else {}
            if workspace is not None:  # the operator's to write
                allowed[workspace] = np.ones(ws, bool)
            world.check(allowed)
            assert status_of(aclnn.aclDestroyAclOpExecutor(executor)) in (0, 161002)
    finally:
        acl.rt.synchronize_stream(stream)
        acl.rt.destroy_stream(stream)
        world.release()


# --------------------------------------------------------------------------- functional API


def _array(draw):
    kind = draw(st.sampled_from(["float", "float", "int", "junk", "scalar", "complex"]))
    if kind == "junk":
        return draw(JUNK)
    if kind == "scalar":
        return draw(st.floats(allow_nan=True) | st.integers(-3, 3))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    dtype = {"float": draw(st.sampled_from(FLOATS + [np.float64])), "int": np.int32,
             "complex": np.complex64}[kind]
    values = np.random.default_rng(draw(st.integers(0, 99))).standard_normal(shape)
    array = np.asarray(values).astype(dtype)
    if array.ndim >= 2 and draw(st.booleans()):
        array = array.T
    if array.ndim and draw(st.booleans()):
        array = array[::-1]
    if draw(st.booleans()):
        array = np.broadcast_to(array, (2, *array.shape))
    return array


EXTRA_ARGS = {"smooth_l1_loss_backward": (0, 2), "l1_loss_backward": (0, 1),
              "gelu_backward": (0, 1), "avg_pool2d_backward": (1, 5)}


@FUZZ
@given(st.data())
def test_fuzz_functional(data):
    draw = data.draw
    name = draw(st.sampled_from(["smooth_l1_loss_backward", "l1_loss_backward",
                                 "gelu_backward", "avg_pool2d_backward"]))
    fn = getattr(aclnn, name)
    arrays = [_array(draw) for _ in range(3 if "l1" in name else 2)]
    out = draw(st.sampled_from(["none", "fresh", "alias", "junk"]))
    kwargs = {}
    if out == "fresh":
        kwargs["out"] = np.zeros(draw(st.lists(st.integers(0, 3), max_size=3)),
                                 draw(st.sampled_from(FLOATS)))
    elif out == "alias" and isinstance(arrays[1], np.ndarray):
        kwargs["out"] = arrays[1]
    elif out == "junk":
        kwargs["out"] = draw(JUNK)
    extra = [draw(st.one_of(JUNK, st.sampled_from(["none", "mean", "sum", "tanh", 2, 3])))
             for _ in range(draw(st.integers(*EXTRA_ARGS[name])))]
    before = np.copy(kwargs["out"]) if isinstance(kwargs.get("out"), np.ndarray) else None
    try:
        result = call(name, fn, *arrays, *extra, **kwargs)
    except aclnn.AclnnError as exc:
        assert exc.status in (161001, 161002), exc
        assert isinstance(exc, TypeError if exc.status == 161001 else ValueError)
        if before is not None and kwargs["out"].flags.writeable:
            assert np.array_equal(kwargs["out"], before, equal_nan=True), "failed call wrote"
        return
    assert isinstance(result, np.ndarray)
    if kwargs.get("out") is not None:
        assert result is kwargs["out"]


# --------------------------------------------------------------------------- case files

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)
TENSOR_NAMES = ["gradOut", "gradOutput", "self", "target", "x"]
ATTR_NAMES = ["reduction", "beta", "approximate", "kernel_size", "stride", "padding",
              "ceil_mode", "count_include_pad", "divisor_override", "cube_math_type"]


def _entry(draw):
    if draw(st.booleans()):
        return {"name": draw(st.sampled_from(TENSOR_NAMES)), "type": "tensor",
                "dtype": draw(st.sampled_from(["fp32", "fp16", "bf16", "int32", "fp8", 3])),
                "shape": draw(st.lists(st.integers(-1, 4), max_size=4) | JSON),
                "range_values": draw(st.sampled_from([[-1, 1], [1, -1], "nan", ["inf", 0],
                                                      0.5, {"name": "nd", "mean": [0, 1],
                                                            "std": [0, 1]}]) | JSON)}
    entry = {"name": draw(st.sampled_from(ATTR_NAMES)), "type": draw(st.sampled_from(
        ["attr", "attrs", "tensor", "weird"])), "dtype": draw(st.sampled_from(
            ["int", "float32", "bool", "string", "float64"])),
             "range_values": draw(st.integers(-2, 4) | st.sampled_from(["none", "tanh", "mean"])
                                  | st.lists(st.integers(-1, 4), max_size=3) | JSON)}
    return [entry, dict(entry)] if draw(st.booleans()) else entry


BASIC_CASES = json.loads(
    (__import__("pathlib").Path(__file__).parent.parent / "examples/cases/basic.json").read_text())


def _mutated(draw, case: dict) -> dict:
    """A deep copy of a valid case with up to three fields replaced, dropped or shrunk."""
    case = json.loads(json.dumps(case))
    for _ in range(draw(st.integers(0, 3))):
        entry = draw(st.sampled_from(case["inputs"]))
        entry = entry[0] if isinstance(entry, list) else entry
        key = draw(st.sampled_from(sorted(entry)))
        action = draw(st.sampled_from(["junk", "drop", "shape", "values"]))
        if action == "drop":
            del entry[key]
        elif action == "shape" and "shape" in entry:
            entry["shape"] = draw(st.lists(st.integers(-1, 5), max_size=9))
        elif action == "values":
            entry["range_values"] = draw(st.sampled_from(
                [[-1e38, 1e38], [0, 0], ["nan"], "-inf", [5, 1], [0.25, 0.75], 7, [1, 2, 3]]))
        else:
            entry[key] = draw(JSON)
    return case


@FUZZ
@given(st.data())
def test_fuzz_case_files(data):
    draw = data.draw
    choice = draw(st.sampled_from(["json", "built", "mutated", "mutated"]))
    if choice == "json":
        document = draw(JSON)
    elif choice == "mutated":
        document = [_mutated(draw, case) for case in draw(st.lists(
            st.sampled_from(BASIC_CASES), min_size=1, max_size=3))]
    else:
        document = [{"id": draw(st.integers(0, 9)),
                     "aclnn_name": draw(st.sampled_from(
                         ["aclnnSmoothL1LossBackward", "L1LossBackward", "GeluBackwardV2",
                          "aclnnAvgPool2dBackward", "Nope"])),
                     "inputs": [_entry(draw) for _ in range(draw(st.integers(0, 9)))]}
                    for _ in range(draw(st.integers(1, 3)))]
    try:
        cases = call("parse_cases", parse_cases, document)
    except CaseFileError as exc:
        assert str(exc)
        return
    for case in cases:
        result = call("run_case", run_case, case, 0)
        assert result.status in (0, 161001, 161002)
        json.dumps(result.to_json(), allow_nan=False)
