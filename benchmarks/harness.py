"""Building blocks of the benchmarks: sizes, device tensors, the two-phase call, timing,
result rows and targets."""

from __future__ import annotations

import ctypes
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import ml_dtypes
import numpy as np
import torch

import aclnn
from aclnn import acl

MiB = 1024 * 1024
ACL_DTYPES = {np.dtype(np.float32): aclnn.ACL_FLOAT, np.dtype(np.float16): aclnn.ACL_FLOAT16,
              np.dtype(ml_dtypes.bfloat16): aclnn.ACL_BF16}
SHORT_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
               np.dtype(ml_dtypes.bfloat16): "bf16"}


# --- configuration -----------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """Sizes and repetition counts of one run (`quick` shrinks everything)."""

    quick: bool = False
    repeat: int = 7
    warmup: int = 2

    @property
    def n(self) -> int:
        """Elements of the large element-wise cases (16M, or 1M when quick)."""
        return MiB if self.quick else 16 * MiB

    @property
    def side(self) -> int:
        """Side of the square 2-D cases (4096, or 1024 when quick); side**2 == n."""
        return 1024 if self.quick else 4096

    @property
    def pool_shape(self) -> tuple[int, int, int, int]:
        """N, C, H, W of AvgPool2dBackward's input."""
        return (2, 16, 112, 112) if self.quick else (32, 64, 112, 112)

    @property
    def latency_calls(self) -> int:
        """Calls timed one by one for the latency case."""
        return 300 if self.quick else 2000

    @property
    def c_api_runs(self) -> int:
        """Fresh C and Python processes timed, alternating, for the C API's latency."""
        return 1 if self.quick else 5

    @property
    def cold_runs(self) -> int:
        """Fresh interpreters timed for the cold-start case (after one warming run)."""
        return 1 if self.quick else 3

    @property
    def share_pairs(self) -> int:
        """Pairs of calls (ours, then the streamed triad) a share of that triad's speed is
        the median of (see `paired_share`)."""
        return 5 if self.quick else 31


# --- host data ---------------------------------------------------------------------------

_HOST_CACHE: dict[tuple, np.ndarray] = {}


SPREADS = {"normal": "N(0,1)", "u8": "U(+-8)", "u100": "U(+-100)",
           "special": "N(0,1) with 1 % NaN/+-inf"}


def _draw(shape, seed: int, spread: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if spread == "u8":
        return rng.uniform(-8, 8, shape).astype(np.float32)
    if spread == "u100":
        return rng.uniform(-100, 100, shape).astype(np.float32)
    values = np.asarray(rng.standard_normal(shape, dtype=np.float32))
    if spread == "special":
        flat = values.reshape(-1)
        picked = rng.choice(flat.size, flat.size // 100, replace=False)
        flat[picked] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), picked.size)
    return values


def host_data(shape, dtype, seed: int, spread: str = "normal") -> np.ndarray:
    """A cached array of `shape` drawn from `spread` (a key of SPREADS; standard normal by
    default), rounded to `dtype`."""
    key = (tuple(shape), np.dtype(dtype), seed, spread)
    if key not in _HOST_CACHE:
        base_key = (tuple(shape), np.dtype(np.float32), seed, spread)
        if base_key not in _HOST_CACHE:
            _HOST_CACHE[base_key] = _draw(shape, seed, spread)
        with np.errstate(over="ignore"):  # U(+-100) is finite in every dtype used here
            _HOST_CACHE[key] = _HOST_CACHE[base_key].astype(dtype)
    return _HOST_CACHE[key]


def clear_host_cache() -> None:
    """Drop the cached host arrays."""
    _HOST_CACHE.clear()


def to_torch(host: np.ndarray) -> torch.Tensor:
    """A torch tensor with a private copy of `host`'s values (bfloat16 via its bits)."""
    if host.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(host.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(host.copy())


# --- device tensors and the two-phase call -----------------------------------------------

def device_array(buffer: tuple[int, int], dtype) -> np.ndarray:
    """A NumPy array over a device buffer (address, bytes): as many `dtype` elements as
    fit, no copy (device memory is this process's memory)."""
    at, size = buffer
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(at))
    return raw[:size - size % np.dtype(dtype).itemsize].view(dtype)


def _check(ret, what: str) -> None:
    if ret != 0:
        raise RuntimeError(f"{what} failed with status {ret}: {aclnn.aclGetRecentErrMsg()}")


class Device:
    """The device allocations and tensors of one case; `release()` frees them all."""

    def __init__(self) -> None:
        self.ptrs: list[int] = []
        self.tensors: list = []
        self._buffers: dict[int, tuple[int, int]] = {}  # id(tensor) -> (address, bytes)
        self.arrays: list = []

    def _malloc(self, nbytes: int) -> int:
        ptr, ret = acl.rt.malloc(max(nbytes, 1), acl.ACL_MEM_MALLOC_HUGE_FIRST)
        _check(ret, "acl.rt.malloc")
        self.ptrs.append(ptr)
        return ptr

    def _tensor(self, ptr, storage_shape, dtype, view_shape, strides, fmt):
        t = aclnn.aclCreateTensor(list(view_shape), ACL_DTYPES[np.dtype(dtype)], list(strides),
                                  0, fmt, list(storage_shape), ptr)
        if t is None:
            raise RuntimeError(f"aclCreateTensor failed: {aclnn.aclGetRecentErrMsg()}")
        self.tensors.append(t)
        self._buffers[id(t)] = (ptr, int(np.prod(storage_shape, dtype=np.int64))
                                * np.dtype(dtype).itemsize)
        return t

    def buffers(self, *tensors) -> tuple[tuple[int, int], ...]:
        """The device buffers (address, bytes) under tensors made here."""
        return tuple(self._buffers[id(t)] for t in tensors)

    def place(self, host: np.ndarray) -> int:
        """Copy contiguous `host` to new device memory (malloc + memcpy); its address."""
        host = np.ascontiguousarray(host)
        ptr = self._malloc(host.nbytes)
        _check(acl.rt.memcpy(ptr, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                             acl.ACL_MEMCPY_HOST_TO_DEVICE), "acl.rt.memcpy")
        return ptr

    def view(self, ptr: int, host: np.ndarray, view_shape=None, strides=None,
             fmt=aclnn.ACL_FORMAT_ND):
        """An aclTensor over the device copy of `host` at `ptr` (see `place`);
        `view_shape`/`strides` (in elements) default to `host`'s own."""
        view_shape = host.shape if view_shape is None else view_shape
        strides = _contiguous_strides(host.shape) if strides is None else strides
        return self._tensor(ptr, host.shape, host.dtype, view_shape, strides, fmt)

    def tensor(self, host: np.ndarray, fmt=aclnn.ACL_FORMAT_ND):
        """Copy `host` to device memory and describe it as an aclTensor (`place`, `view`)."""
        return self.view(self.place(host), np.asarray(host), fmt=fmt)

    def torch_view(self, tensor, shape, dtype) -> torch.Tensor:
        """A torch tensor of `shape` and `dtype` over the device memory under `tensor`
        (made here): PyTorch's call then reads and writes the very pages ours does (the
        same call on two sets of buffers ran up to 1.4x apart on these machines)."""
        bf16 = np.dtype(dtype) == ml_dtypes.bfloat16
        array = device_array(self._buffers[id(tensor)], np.uint16 if bf16 else dtype)
        view = torch.from_numpy(array.reshape(shape))
        return view.view(torch.bfloat16) if bf16 else view

    def swap(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        """Exchange the contents of two device buffers (address, bytes) of one size."""
        (pa, size), (pb, other) = a, b
        assert size == other, (size, other)
        held = self._malloc(size)
        for dst, src in ((held, pa), (pa, pb), (pb, held)):
            _check(acl.rt.memcpy(dst, size, src, size, acl.ACL_MEMCPY_DEVICE_TO_DEVICE),
                   "acl.rt.memcpy")

    def output(self, shape, dtype, fmt=aclnn.ACL_FORMAT_ND):
        """A zero-filled contiguous device tensor (memset, so its pages are resident)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        ptr = self._malloc(nbytes)
        _check(acl.rt.memset(ptr, nbytes, 0, nbytes), "acl.rt.memset")
        return self._tensor(ptr, shape, dtype, shape, _contiguous_strides(shape), fmt)

    def int_array(self, values):
        """An aclIntArray of `values`, destroyed by `release()`."""
        array = aclnn.aclCreateIntArray(list(values), len(values))
        self.arrays.append(array)
        return array

    def release(self) -> None:
        """Destroy the tensors and free the memory of this case."""
        for t in self.tensors:
            aclnn.aclDestroyTensor(t)
        for array in self.arrays:
            aclnn.aclDestroyIntArray(array)
        for ptr in self.ptrs:
            acl.rt.free(ptr)
        self.tensors, self.arrays, self.ptrs = [], [], []


def _contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(list(shape)):
        strides.append(step)
        step *= size
    return strides[::-1]


def two_phase(op: str, *args) -> Callable[[], None]:
    """A callable running one full call of `aclnn<op>`: phase 1 (GetWorkspaceSize),
    phase 2, then synchronize the default stream; it raises on any non-zero status.
    The call is made once here, so a rejected setup fails before timing."""
    get_workspace = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")
    run = getattr(aclnn, f"aclnn{op}")

    def call() -> None:
        ws_size, executor, ret = get_workspace(*args)
        _check(ret, f"aclnn{op}GetWorkspaceSize")
        workspace = None
        if ws_size > 0:
            workspace, ret = acl.rt.malloc(ws_size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            _check(ret, "acl.rt.malloc(workspace)")
        _check(run(workspace, ws_size, executor, None), f"aclnn{op}")
        _check(acl.rt.synchronize_stream(None), "acl.rt.synchronize_stream")
        if workspace is not None:
            acl.rt.free(workspace)

    call()
    return call


def init_runtime() -> None:
    """acl.init and set_device(0) for this process."""
    acl.init()
    _check(acl.rt.set_device(0), "acl.rt.set_device")


# --- timing ------------------------------------------------------------------------------

def alternating_times(fns: list[Callable[[], object]], repeat: int, warmup: int,
                      settle: float = 0.01) -> list[list[float]]:
    """The seconds of `repeat` calls of each of `fns`, after `warmup` untimed calls of each.

    They alternate call by call, so the machine's noise hits all alike, with a pause of
    `settle` seconds before each timed call: Numba and torch each bring their own libgomp,
    whose idle workers spin for milliseconds after a parallel region; without the pause
    one library's spinning threads would steal a core from the other's call."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, fn_times in zip(fns, times):
            time.sleep(settle)
            t0 = time.perf_counter()
            fn()
            fn_times.append(time.perf_counter() - t0)
    return times


def time_alternating(fns: list[Callable[[], object]], repeat: int, warmup: int,
                     settle: float = 0.01) -> list[float]:
    """Median seconds of each of `fns`, timed as `alternating_times` does."""
    return [statistics.median(t) for t in alternating_times(fns, repeat, warmup, settle)]


class PairedShare(NamedTuple):
    """Our speed as a share of a probe's, over pairs of calls made one after the other:
    the median of the pairs' probe time / our time, its quartiles, and the pairs."""

    median: float
    low: float
    high: float
    pairs: int


def paired_share(ours: Callable[[], object], probe_call: Callable[[], object], pairs: int,
                 warmup: int) -> PairedShare:
    """`probe_call`'s time over `ours`'s, call after call (`alternating_times`). Each
    pair's ratio is taken before the median: the two calls of a pair meet the same memory
    speed, which drifts between pairs. On an AMD EPYC Zen 3 the streamed triad over a
    16-bit SmoothL1/L1 case's buffers took 2.0-4.2 ms from one process to the next; in
    one process of 40 pairs (l1 f16 none) the pairs' ratios had quartiles 0.77-0.94 around
    a median of 0.88, and 7 of the 40 drawn at random gave a share under 0.85 in 41 % of
    draws, 21 of them in 17 %."""
    mine, theirs = alternating_times([ours, probe_call], pairs, warmup)
    ratios = [t / m for m, t in zip(mine, theirs)]
    quartiles = statistics.quantiles(ratios, n=4)  # needs two pairs or more
    return PairedShare(statistics.median(ratios), quartiles[0], quartiles[2], len(ratios))


class InCache(NamedTuple):
    """A compute probe (see `probe.loss_rows_in_cache`): `run` computes `elements`
    elements with its operands in cache, in `rows` (uint8 [threads, operands, bytes], the
    output last)."""

    run: Callable[[], object]
    elements: int
    rows: np.ndarray


def seconds_per_element_in_cache(probe: InCache, repeat: int, warmup: int) -> float:
    """A kernel's compute floor: the median time of its compute probe's run over the
    elements it computes. Our two-phase calls on sizes that stay in cache are no such
    floor: on an AMD EPYC Zen 3 (512 KiB of L2 a core) the difference of calls on 16384
    and 65536 elements put SmoothL1/L1 at 3.1-8.0 ms per 16M elements from run to run
    (1.9-10.3 with 256 calls a timing), their calls from memory at 3.4-8.9 ms, where the
    rows repeated in cache take 1.9-3.4 ms."""
    return time_alternating([probe.run], repeat, warmup)[0] / probe.elements


class OthersLoad:
    """How much CPU other processes used between construction and `fraction()`: the
    machine's busy time (/proc/stat, steal included) minus this process's and its waited
    children's, over wall time x CPUs. None where /proc/stat is missing."""

    def __init__(self) -> None:
        self.start = self._snapshot()

    @staticmethod
    def _snapshot():
        try:
            with open("/proc/stat") as f:
                ticks = [int(v) for v in f.readline().split()[1:9]]
        except OSError:
            return None
        busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
        own = sum(os.times()[:4])
        return time.perf_counter(), busy, own

    def fraction(self) -> float | None:
        """Share of all CPUs' time used by other processes since construction."""
        end = self._snapshot()
        if self.start is None or end is None or end[0] <= self.start[0]:
            return None
        wall, busy, own = (b - a for a, b in zip(self.start, end))
        return max(0.0, (busy - own) / (wall * (os.cpu_count() or 1)))


# --- rows and targets --------------------------------------------------------------------

class Setup(NamedTuple):
    """What a case's setup returns: the two callables, the bytes the operator reads and
    writes (0 if not meaningful), and its element count (for elements/s comparisons);
    `bytes_written`, for an operator that writes far more than a triad's quarter of its
    bytes, those of them it writes (its floor is then a probe with its own mix of reads
    and writes, see `probe.read_write_setup`); `in_cache`, the compute probe of our kernel
    (see `seconds_per_element_in_cache`).

    For a case judged against another (`vs_case`), where the two differ only in layout:
    `reference`, that case's call made on this setup's own buffers (a contiguous view of
    the bytes this case views transposed), so both read memory placed alike; where they
    differ in the values of one input: `varied`, that input's device buffer (address,
    bytes), which the measurement swaps with the reference's own `varied` between its two
    sets of pairs (see `crossed_ratio`). The same call on two sets of buffers ran up to
    1.4x apart on these machines (the buffers' physical placement), so without either the
    ratio would measure the placement as much as the layout or the values. For the same reason
    `buffers`, the three device buffers (address, bytes) a call streams through and the
    one it writes, of one size: the same-bytes triad probes run over those
    (`probe.triad_over`). `exact_products`: for a case whose results take subnormal
    products, the same results made without any, on the case's own buffers (timed
    alongside our call, see `cases.note_subnormal_costs`). `staged`, for a case whose
    self is read transposed: (bytes per row of self, bytes each of our staged tiles reads
    along such a row, self's element code), for the probes that read it so, and stage it
    over other tile shapes too (`probe.staged_triad_over`, `probe.staged_touches_over`,
    `probe.swept_tiles`, see `cases.note_staging_bounds`)."""

    ours: Callable[[], object]
    torch: Callable[[], object] | None
    bytes_moved: int
    elements: int = 0
    bytes_written: int = 0
    in_cache: InCache | None = None
    reference: Callable[[], object] | None = None
    varied: tuple[int, int] | None = None
    buffers: tuple[tuple[int, int], ...] | None = None
    exact_products: Callable[[], object] | None = None
    staged: tuple[int, int, int] | None = None


@dataclass
class Row:
    """The measurements of one case."""

    case: str
    ours_s: float | None = None
    torch_s: float | None = None
    bytes_moved: int = 0
    elements: int = 0
    note: str = ""
    extra: dict = field(default_factory=dict)
    triad_gbps: float | None = None
    verdict: str = ""
    detail: str = ""

    @property
    def ratio(self) -> float | None:
        """torch time / our time: > 1 means we are faster."""
        if self.ours_s and self.torch_s:
            return self.torch_s / self.ours_s
        return None

    @property
    def gbps(self) -> float | None:
        """Our throughput in GB/s (1e9 bytes read + written per second)."""
        if self.ours_s and self.bytes_moved:
            return self.bytes_moved / self.ours_s / 1e9
        return None

    @property
    def triad_fraction(self) -> float | None:
        """Our GB/s as a fraction of the Numba triad probe's (plain stores, the issue's
        yardstick): of the same-bytes triad timed alternately with this case where there is
        one (`extra["triad_ms"]`), else of the run's triad probe row."""
        triad_ms = self.extra.get("triad_ms")
        if triad_ms and self.ours_s:
            return triad_ms / (self.ours_s * 1e3)
        if self.gbps and self.triad_gbps:
            return self.gbps / self.triad_gbps
        return None

    @property
    def streamed_fraction(self) -> float | None:
        """Our speed as a fraction of the streamed triad's (non-temporal stores) moving the
        same bytes: the median over pairs of calls where they were timed so
        (`extra["floor_share"]`, see `paired_share`), else of the medians timed alternately
        with this case (`extra["floor_ms"]`)."""
        if "floor_share" in self.extra:
            return self.extra["floor_share"]["median"]
        floor_ms = self.extra.get("floor_ms")
        if floor_ms and self.ours_s:
            return floor_ms / (self.ours_s * 1e3)
        return None

    @property
    def elements_per_s(self) -> float | None:
        """Output elements per second."""
        if self.ours_s and self.elements:
            return self.elements / self.ours_s
        return None


@dataclass(frozen=True)
class Target:
    """A pass/fail rule: `check(row, rows_by_name)` returns (passed or None, detail)."""

    text: str
    check: Callable[[Row, dict], tuple[bool | None, str]]
    needs: tuple[str, ...] = ()
    torch_factor: float | None = None  # the torch/ours ratio the target asks for, if any
    floor_fraction: float | None = None  # the share of the streamed triad's speed, if any


def _at_least(value, bound: float, label: str) -> tuple[bool | None, str]:
    if value is None:
        return None, f"{label} unavailable"
    return value >= bound, f"{label} {value:.2f} (>= {bound})"


def vs_torch(factor: float) -> Target:
    """Passes when torch's time / ours >= `factor`."""
    return Target(f"torch/ours >= {factor}",
                  lambda row, rows: _at_least(row.ratio, factor, "torch/ours"),
                  torch_factor=factor)


def streamed_and_torch(fraction: float, factor: float) -> Target:
    """Passes when our speed >= `fraction` x the streamed triad's moving the same bytes
    AND torch/ours >= `factor`."""
    def check(row, rows):
        bw_ok, bw = _at_least(row.streamed_fraction, fraction, "x streamed triad")
        share = row.extra.get("floor_share")
        if share:
            bw += (f", the median of {share['pairs']} pairs (quartiles {share['low']:.2f}-"
                   f"{share['high']:.2f})")
        t_ok, t = _at_least(row.ratio, factor, "torch/ours")
        ok = None if bw_ok is None or t_ok is None else bw_ok and t_ok
        return ok, f"{bw}; {t}"
    return Target(f">= {fraction} x streamed triad and torch/ours >= {factor}", check,
                  torch_factor=factor, floor_fraction=fraction)


def both(first: Target, second: Target) -> Target:
    """Passes when both targets pass (the cases either needs are timed alongside)."""
    def check(row, rows):
        (ok1, d1), (ok2, d2) = first.check(row, rows), second.check(row, rows)
        ok = None if ok1 is None or ok2 is None else ok1 and ok2
        return ok, f"{d1}; {d2}"
    return Target(f"{first.text} and {second.text}", check, first.needs + second.needs,
                  first.torch_factor or second.torch_factor,
                  first.floor_fraction or second.floor_fraction)


def crossed_ratio(row: Row) -> float | None:
    """Our call's time over the reference case's (None until they were timed so): the
    median over pairs of calls one after the other (`extra["reference_share"]`: its time
    over ours, see `paired_share`), and where the two setups swapped their `varied` inputs
    after those pairs (`extra["swapped_share"]`: then ours, on the reference's values,
    over the reference's call on ours), the geometric mean of the ratio before and after,
    in which each set of buffers' own speed cancels out. The pairs' ratios, not medians
    of seven calls each: on a Zen 4 EPYC built for AVX2, GELU over N(0,1) with 1 %
    NaN/+-inf took 1.27x the time of N(0,1) by those medians (6.27 against 5.02 ms, 6.52
    against 5.09 swapped) in one run and 0.97-1.03x in the next two, and 0.95-1.06x paired
    in four processes of 21 pairs each side."""
    before = row.extra.get("reference_share")
    if not before:
        return None
    after = row.extra.get("swapped_share")
    return 1 / (math.sqrt(before["median"] * after["median"]) if after else before["median"])


def rate_vs_reference(row: Row) -> float | None:
    """Our elements/s over the reference case's, by `crossed_ratio` (None until the two
    were timed alongside)."""
    time_ratio = crossed_ratio(row)
    if time_ratio is None or not row.extra.get("reference_elements"):
        return None
    return row.elements / row.extra["reference_elements"] / time_ratio


def vs_case(reference: str, factor: float) -> Target:
    """Passes when our elements/s >= `factor` x those of case `reference`, that case's call
    timed alongside this one in pairs (see `crossed_ratio`; its elements:
    `extra["reference_elements"]`)."""
    def check(row, rows):
        rate_ratio = rate_vs_reference(row)
        if rate_ratio is None or not row.elements_per_s:
            return None, f"needs case {reference!r} timed alongside"
        return _at_least(rate_ratio, factor, f"elements/s vs {reference!r}:")
    return Target(f"elements/s >= {factor} x {reference!r}", check, needs=(reference,))


def at_most(key: str, bound: float, unit: str) -> Target:
    """Passes when `row.extra[key]` <= `bound`."""
    def check(row, rows):
        value = row.extra.get(key)
        if value is None:
            return None, f"{key} unavailable"
        return value <= bound, f"{key} {value:.4g} {unit} (<= {bound} {unit})"
    return Target(f"{key} <= {bound} {unit}", check)
