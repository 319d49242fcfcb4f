"""The case registry: every benchmark case with its setup and its target.

A setup `(cfg, dev) -> Setup` builds the device tensors once (through `dev`, with the
public API: acl.rt.malloc + memcpy + aclCreateTensor) and returns the callable of our
full two-phase call + synchronize, the PyTorch CPU callable (the `out=` variant, same
dtypes), the bytes the operator reads and writes, and its element count.

PyTorch has no aten op for the L1 loss backward; its nearest `out=` equivalent is
`sub(out=) -> sign(out=) -> mul(out=)` written into the output buffer (the autograd of
`l1_loss` computes the same `grad * sign(self - target)`, allocating).
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import torch

import aclnn
from aclnn.kernels import lookup, pointwise
from aclnn.kernels.bits import element_bytes

from . import probe
from .harness import (
    SPREADS,
    Config,
    Device,
    Row,
    Setup,
    Target,
    at_most,
    both,
    device_array,
    host_data,
    paired_share,
    rate_vs_reference,
    seconds_per_element_in_cache,
    streamed_and_torch,
    time_alternating,
    to_torch,
    two_phase,
    vs_case,
    vs_torch,
)

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
REPO = Path(__file__).resolve().parent.parent
aten = torch.ops.aten


# --- measurements ------------------------------------------------------------------------

def measure_throughput(case: Case, cfg: Config) -> Row:
    """Median time of ours and torch (alternating, after warm-up) on the case's setup.

    Also timed in the same alternation, so that the machine's drift cancels out of the
    ratios: for a torch/ours target, triad probes that move the case's bytes, one with
    plain stores (the "x triad" yardstick) and one with streaming stores (the floor that
    bounds the reachable ratio, see `note_bandwidth_ceilings`); for a target relative
    to another case (`vs_case`), that case's call (`extra["reference_ms"]`), made on
    this setup's buffers where it offers one (`Setup.reference`), then the two again in
    pairs (`extra["reference_share"]`) and, where both setups name a `varied` input, in
    pairs once more with those swapped (`extra["swapped_share"]`, see
    `harness.crossed_ratio`); for a case whose self is read transposed (`Setup.staged`),
    the streamed triad over its buffers, the probe that reads them as our staged tiles do,
    the cache lines of self our staging fetches, touched alone, and the staging itself with
    no compute over the swept tile shapes (`extra["swept_staging_ms"]`; see
    `note_staging_bounds`). A case judged by its share of the streamed triad's speed times
    the two again in pairs (`extra["floor_share"]`). Each set of pairs is
    `cfg.share_pairs` of them (see `harness.paired_share`)."""
    dev, pairs = Device(), {}
    try:
        s = case.setup(cfg, dev)
        timed = {"ours": s.ours}
        if s.torch is not None:
            timed["torch"] = s.torch
        target = case.target
        if s.torch is not None and s.bytes_moved and target and target.torch_factor:
            if s.buffers:
                timed["triad"] = probe.triad_over(s.buffers, streamed=False)
                timed["floor"] = probe.triad_over(s.buffers, streamed=True)
            else:
                timed["triad"] = probe.triad_setup(s.bytes_moved // 16).ours  # 16 B/element
                timed["floor"] = (probe.read_write_setup(s.bytes_moved - s.bytes_written,
                                                         s.bytes_written).ours
                                  if s.bytes_written else
                                  probe.triad_setup(s.bytes_moved // 16, streamed=True).ours)
        if s.staged and s.buffers:
            timed["floor"] = probe.triad_over(s.buffers, streamed=True)
            row_bytes, run_bytes, code = s.staged
            size = element_bytes(code)
            side = row_bytes // size
            ours_tile = run_bytes // size, side
            for key, stage in (("staged", probe.READS), ("staged_transposes", probe.TRANSPOSES)):
                timed[key] = probe.staged_triad_over(s.buffers, side, ours_tile, code, stage)
            timed["staged_touches"] = probe.staged_touches_over(s.buffers[1], row_bytes,
                                                                run_bytes)
            for tile in probe.swept_tiles(side, code):
                timed[_SWEPT + _tile_name(tile)] = probe.staged_triad_over(
                    s.buffers, side, tile, code, probe.STAGES)
        reference = None
        if target and target.needs:
            reference = (s._replace(ours=s.reference, varied=None) if s.reference else
                         next(c for c in CASES if c.name == target.needs[0]).setup(cfg, dev))
            timed["reference"] = reference.ours
        times = dict(zip(timed, time_alternating(list(timed.values()), cfg.repeat,
                                                 cfg.warmup)))
        if s.exact_products:  # on the case's own values, before any swap below
            times["exact_products"] = time_alternating([s.ours, s.exact_products],
                                                       cfg.repeat, cfg.warmup)
        if reference is not None:
            pairs["reference_share"] = paired_share(s.ours, reference.ours, cfg.share_pairs,
                                                    cfg.warmup)
            if s.varied is not None and reference.varied is not None:
                dev.swap(s.varied, reference.varied)
                pairs["swapped_share"] = paired_share(reference.ours, s.ours,
                                                      cfg.share_pairs, cfg.warmup)
        if target and target.floor_fraction and "floor" in timed:
            pairs["floor_share"] = paired_share(s.ours, timed["floor"], cfg.share_pairs,
                                                cfg.warmup)
        if s.in_cache:
            times["compute"] = seconds_per_element_in_cache(s.in_cache, cfg.repeat,
                                                            cfg.warmup) * s.elements
    finally:
        dev.release()
    row = Row(case.name, times["ours"], times.get("torch"), s.bytes_moved, s.elements)
    row.extra.update((key, share._asdict()) for key, share in pairs.items())
    for key in ("triad", "floor", "reference", "compute", "staged", "staged_transposes",
                "staged_touches"):
        if key in times:
            row.extra[f"{key}_ms"] = times[key] * 1e3
    swept = {key[len(_SWEPT):]: t * 1e3 for key, t in times.items() if key.startswith(_SWEPT)}
    if swept:
        row.extra["swept_staging_ms"] = swept
    if "exact_products" in times:
        row.extra["exact_products_ms"] = [t * 1e3 for t in times["exact_products"]]
    if "floor" in times and s.bytes_written:
        row.extra["floor_written_mb"] = s.bytes_written / 1e6
    if "reference" in times:
        row.extra["reference_elements"] = reference.elements
    return row


def _per_call_median(fn, calls: int) -> float:
    for _ in range(min(calls, 200)):
        fn()
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) * 1e-9


def measure_latency(case: Case, cfg: Config) -> Row:
    """Median of many single calls, each timed on its own (ours, then torch)."""
    dev = Device()
    try:
        s = case.setup(cfg, dev)
        ours = _per_call_median(s.ours, cfg.latency_calls)
        theirs = _per_call_median(s.torch, cfg.latency_calls)
    finally:
        dev.release()
    return Row(case.name, ours, theirs, s.bytes_moved, s.elements,
               note=f"{ours * 1e6:.1f} us vs torch {theirs * 1e6:.1f} us "
                    f"(median of {cfg.latency_calls} calls)",
               extra={"latency_us": ours * 1e6, "torch_latency_us": theirs * 1e6})


COLD_START_OURS = """
import numpy as np, aclnn
from aclnn import acl
acl.init(); acl.rt.set_device(0)
def dev(a):
    p, r = acl.rt.malloc(a.nbytes, 0); assert r == 0
    acl.rt.memcpy(p, a.nbytes, acl.util.numpy_to_ptr(a), a.nbytes, 1)
    return aclnn.aclCreateTensor([8], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [8], p)
g, x, y, o = (dev(a) for a in (np.ones(8, np.float32), np.arange(8, dtype=np.float32),
                               np.ones(8, np.float32), np.zeros(8, np.float32)))
ws, ex, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0, o)
assert ret == 0
assert aclnn.aclnnSmoothL1LossBackward(None, ws, ex, None) == 0
assert acl.rt.synchronize_stream(None) == 0
"""
COLD_START_TORCH = """
import torch
torch.ops.aten.smooth_l1_loss_backward(torch.ones(8), torch.arange(8.0), torch.ones(8), 0, 1.0)
"""


def _wall(code: str, runs: int) -> float:
    """Median wall seconds of a fresh `python -c code`, after one untimed warming run."""
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_cold_start(case: Case, cfg: Config) -> Row:
    """Wall time of a fresh interpreter doing one 8-element call (Numba cache warm)."""
    ours, theirs = _wall(COLD_START_OURS, cfg.cold_runs), _wall(COLD_START_TORCH, cfg.cold_runs)
    return Row(case.name, ours, theirs, note=f"{ours:.2f} s vs torch import+call {theirs:.2f} s "
                                             f"(median of {cfg.cold_runs})",
               extra={"seconds": ours, "torch_seconds": theirs})


C_LATENCY = REPO / "benchmarks" / "c_latency.c"


@functools.cache
def _c_latency_program() -> Path:
    """benchmarks/c_latency.c built against the C SDK (`aclnn sdk`), once per run."""
    from aclnn.capi import sdk

    prefix = sdk.ensure()
    program = Path(tempfile.mkdtemp(prefix="aclnn-bench-")) / "c_latency"
    subprocess.run(["gcc", "-O2", str(C_LATENCY), *sdk.cflags(prefix), *sdk.libs(prefix), "-o",
                    str(program)], check=True)
    return program


PYTHON_LATENCY = COLD_START_OURS + """
import statistics, sys, time
def call():
    ws, ex, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0, o)
    assert ret == 0 and aclnn.aclnnSmoothL1LossBackward(None, ws, ex, None) == 0
    assert acl.rt.synchronize_stream(None) == 0
calls, clock, times = int(sys.argv[1]), time.perf_counter_ns, []
for _ in range(min(calls, 200)):
    call()
for _ in range(calls):
    t0 = clock(); call(); times.append(clock() - t0)
print("median-us", statistics.median(times) / 1e3)
"""


@functools.cache
def _c_api_runs(cfg: Config) -> dict:
    """The C API's 8-element latency and first-result time, and the Python API's latency
    measured the same way (a fresh process timing single calls after 200 untimed ones),
    the two alternating; the ratio is the median of adjacent pairs' ratios."""
    program, calls = _c_latency_program(), str(cfg.latency_calls)
    c_us, python_us, ratios, first = [], [], [], []
    for run in range(cfg.c_api_runs + 1):
        python = subprocess.run([sys.executable, "-c", PYTHON_LATENCY, calls], check=True,
                                cwd=REPO, capture_output=True, text=True).stdout.split()
        started = time.perf_counter()
        with subprocess.Popen([str(program), calls], stdout=subprocess.PIPE, text=True) as proc:
            first_line = proc.stdout.readline()
            first_s = time.perf_counter() - started
            c_words = proc.stdout.read().split()
        assert first_line.startswith("first-result") and proc.returncode == 0, first_line
        if run:  # the first run warms the page cache and the Numba cache
            first.append(first_s)
            c_us.append(float(c_words[-1]))
            python_us.append(float(python[-1]))
            ratios.append(c_us[-1] / python_us[-1])
    return {"latency_us": statistics.median(c_us), "first_result_s": statistics.median(first),
            "python_latency_us": statistics.median(python_us),
            "c_over_python": statistics.median(ratios), "runs": cfg.c_api_runs}


def measure_c_latency(case: Case, cfg: Config) -> Row:
    """Two phases + synchronize on 8 elements from C, against the same from Python."""
    m = _c_api_runs(cfg)
    return Row(case.name, m["latency_us"] * 1e-6, None, 0, 8,
               note=f"C {m['latency_us']:.1f} us vs Python {m['python_latency_us']:.1f} us "
                    f"(medians of {cfg.latency_calls} calls in fresh processes, "
                    f"{m['runs']} of each alternating)", extra=m)


def measure_c_first_result(case: Case, cfg: Config) -> Row:
    """Wall time from starting the C program to its first result on the host."""
    m = _c_api_runs(cfg)
    return Row(case.name, m["first_result_s"], None,
               note=f"{m['first_result_s']:.2f} s from exec to the first result (median of "
                    f"{m['runs']} processes)", extra={"seconds": m["first_result_s"]})


def measure_peak_memory(case: Case, cfg: Config) -> Row:
    """Peak RSS growth of one float16 SmoothL1 call, measured in a fresh subprocess."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.peakmem", str(cfg.n)], check=True,
                         cwd=REPO, capture_output=True, text=True)
    m = json.loads(out.stdout)
    note = (f"peak = {m['peak_over_io']:.3f} x (inputs+output); extra "
            f"{m['extra_bytes'] / 2**20:.1f} MiB over {m['io_bytes'] / 2**20:.0f} MiB")
    if not m["hwm_reset"]:
        note += " (VmHWM not resettable: upper bound)"
    return Row(case.name, m["seconds"], None, 0, m["n"], note=note, extra=m)


@dataclass(frozen=True)
class Case:
    """One benchmark: `setup` builds it, `measure` turns it into a Row, `target` judges."""

    name: str
    setup: Callable[[Config, Device], Setup] | None
    target: Target | None
    measure: Callable[[Case, Config], Row] = measure_throughput


# --- setups ------------------------------------------------------------------------------

def smooth_l1(dtype, reduction: int = 0, grad_shape=None, layout: str = "1d"):
    """SmoothL1LossBackward (beta 1.0). layout: "1d" ([n]), "bcast" (target [side, 1]),
    "transposed" (self a [side, side] view with strides [1, side]); "1d" with a gradOut of
    the shape of self and "transposed" also time our rows in cache (the contiguous
    kernel's, `probe.loss_rows_in_cache`)."""
    def setup(cfg: Config, dev: Device) -> Setup:
        shape = (cfg.n,) if layout == "1d" else (cfg.side, cfg.side)
        g = host_data(shape if grad_shape is None else grad_shape, dtype, 0)
        x = host_data(shape, dtype, 1)
        y = host_data((cfg.side, 1) if layout == "bcast" else shape, dtype, 2)
        dg, x_at, dy = dev.tensor(g), dev.place(x), dev.tensor(y)
        dx = dev.view(x_at, x)
        out = dev.output(shape, dtype)
        tg, tx, ty, tout = (dev.torch_view(t, a.shape, dtype) for t, a in
                            ((dg, g), (dx, x), (dy, y), (out, x)))

        def call(x_view, target):
            return two_phase("SmoothL1LossBackward", dg, x_view, target, reduction, 1.0, out)
        reference, staged = None, None
        # the contiguous kernel's compute (for a transposed self: its rows')
        in_cache = (probe.loss_rows_in_cache(dtype, 1.0, _scale(reduction, x.size))
                    if layout == "transposed" or layout == "1d" and grad_shape is None
                    else None)
        if layout == "transposed":  # the contiguous call reads the same bytes in order
            ours, reference = call(dev.view(x_at, x, shape, [1, cfg.side]), dy), call(dx, dy)
            tx = tx.t()
            staged = _staged_runs(cfg.side, x.dtype)
        else:
            ours = call(dx, dy)
        if layout == "bcast":  # the contiguous call on the same gradOut, self and output
            reference = call(dx, dev.tensor(host_data(shape, dtype, 2)))

        def theirs():
            aten.smooth_l1_loss_backward.grad_input(tg, tx, ty, reduction, 1.0, grad_input=tout)
        streamed = dev.buffers(dg, dx, dy, out) if g.size == y.size == x.size else None
        return Setup(ours, theirs, g.nbytes + x.nbytes + y.nbytes + tout.nbytes, x.size,
                     in_cache=in_cache, reference=reference, buffers=streamed, staged=staged)
    return setup


def _scale(reduction: int, elements: int) -> float:
    """The scale a loss call with a full gradOut computes its rows with: 1/n for mean."""
    return 1 / elements if reduction == 1 else 1.0


_SWEPT = "swept "  # the timing keys of the swept staging probes, then their tile's name


def _tile_name(tile: tuple[int, int]) -> str:
    """A tile shape (rows, columns) as the notes write it."""
    return f"{tile[0]}x{tile[1]}"


def _staged_runs(side: int, dtype) -> tuple[int, int, int]:
    """(bytes per row, bytes each staged tile reads along a row, element code) of a [side,
    side] self of `dtype` read transposed by the tiled kernel, all operands of one dtype
    (rows computed in it)."""
    itemsize = np.dtype(dtype).itemsize
    row, column = (side * itemsize, itemsize), (itemsize, side * itemsize)
    tile_rows, _ = pointwise._tile_shape((side, side), [row, column, row, row], itemsize,
                                         probe.THREADS)
    return side * itemsize, tile_rows * itemsize, probe.CODES[np.dtype(dtype)]


def l1(dtype, reduction: int = 0, grad_shape=None):
    """L1LossBackward on [n]; torch: sub -> sign -> mul, all out= into the output. With a
    gradOut of the shape of self, also our rows in cache (`probe.loss_rows_in_cache`)."""
    def setup(cfg: Config, dev: Device) -> Setup:
        shape = (cfg.n,)
        g = host_data(shape if grad_shape is None else grad_shape, dtype, 0)
        x, y = host_data(shape, dtype, 1), host_data(shape, dtype, 2)
        out = dev.output(shape, dtype)
        operands = dev.tensor(g), dev.tensor(x), dev.tensor(y), out
        tg, tx, ty, tout = (dev.torch_view(t, a.shape, dtype)
                            for t, a in zip(operands, (g, x, y, x)))
        ours = two_phase("L1LossBackward", *operands[:3], reduction, out)

        def theirs():
            torch.sub(tx, ty, out=tout)
            torch.sign(tout, out=tout)
            torch.mul(tout, tg / x.size if reduction == 1 else tg, out=tout)
        in_cache = (probe.loss_rows_in_cache(dtype, 0.0, _scale(reduction, x.size))
                    if grad_shape is None else None)
        return Setup(ours, theirs, g.nbytes + x.nbytes + y.nbytes + tout.nbytes, x.size,
                     in_cache=in_cache,
                     buffers=dev.buffers(*operands) if g.size == x.size else None)
    return setup


def gelu(dtype, approximate: str, spread: str = "normal"):
    """GeluBackwardV2 on [n], self drawn from `spread` (harness.SPREADS), in float32 with
    our rows in cache (the compute floor, `probe.gelu_rows_in_cache`; 16-bit operands look
    GELU' up in a table); torch: gelu_backward.grad_input. bfloat16 from U(+-100) where the
    build keeps the table's subnormal factors: `_exact_products` too."""
    def setup(cfg: Config, dev: Device) -> Setup:
        shape = (cfg.n,)
        g, x = host_data(shape, dtype, 0), host_data(shape, dtype, 1, spread)
        in_cache = (probe.gelu_rows_in_cache(approximate, spread)
                    if np.dtype(dtype) == F32 else None)
        x_at, dg, out = dev.place(x), dev.tensor(g), dev.output(shape, dtype)
        tensors = dg, dev.view(x_at, x), out
        ours = two_phase("GeluBackwardV2", *tensors[:2], approximate, out)
        tg, tx, tout = (dev.torch_view(t, shape, dtype) for t in tensors)

        def theirs():
            aten.gelu_backward.grad_input(tg, tx, approximate=approximate, grad_input=tout)
        buffers = dev.buffers(*tensors)
        exact = (_exact_products(approximate, buffers) if np.dtype(dtype) == BF16
                 and spread == "u100" and not lookup.SCALES_SUBNORMALS else None)
        return Setup(ours, theirs, g.nbytes + x.nbytes + tout.nbytes, x.size,
                     in_cache=in_cache, varied=buffers[1], exact_products=exact)
    return setup


def _exact_products(approximate: str, buffers) -> Callable[[], None]:
    """The table kernel on a case's bfloat16 g, self and output buffers (address, bytes)
    with the subnormal GELU factors scaled as builds for AVX-512 hold them
    (`lookup.bfloat16_factors`): the same results, no subnormal product."""
    scaled = pointwise._derivative_table(pointwise.BF16, approximate == "tanh")
    if scaled.scaled_from > scaled.scaled_to:  # this build keeps them
        scaled = lookup.bfloat16_factors(scaled.table.copy(), scale=True)
    arrays = [device_array(buffer, np.int16) for buffer in buffers]
    return lambda: lookup.scaled_lookup(*arrays, *scaled)


def avg_pool(dtype, k: int, s: int, p: int):
    """AvgPool2dBackward, countIncludePad, no ceil, cubeMathType 0 (KEEP_DTYPE). Bytes:
    gradOutput read + gradInput written (self is only read for its shape)."""
    def setup(cfg: Config, dev: Device) -> Setup:
        n, c, h, w = cfg.pool_shape
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        g = host_data((n, c, oh, ow), dtype, 3)
        nchw = aclnn.ACL_FORMAT_NCHW
        dg, dself = dev.tensor(g, fmt=nchw), dev.output((n, c, h, w), dtype, fmt=nchw)
        out = dev.output((n, c, h, w), dtype, fmt=nchw)
        ks, st, pd = (dev.int_array([v, v]) for v in (k, s, p))
        ours = two_phase("AvgPool2dBackward", dg, dself, ks, st, pd, False, True, 0, 0, out)
        tg = dev.torch_view(dg, g.shape, dtype)
        tself, tout = (dev.torch_view(t, (n, c, h, w), dtype) for t in (dself, out))

        def theirs():
            aten.avg_pool2d_backward.grad_input(tg, tself, [k, k], [s, s], [p, p], False, True,
                                                None, grad_input=tout)
        return Setup(ours, theirs, g.nbytes + tout.nbytes, tout.numel(),
                     bytes_written=tout.nbytes)
    return setup


def tiny_smooth_l1(cfg: Config, dev: Device) -> Setup:
    """SmoothL1LossBackward on 8 float32 elements (the latency case)."""
    g, x, y = (np.ones(8, np.float32), np.arange(8, dtype=np.float32), np.ones(8, np.float32))
    tg, tx, ty, tout = to_torch(g), to_torch(x), to_torch(y), torch.zeros(8)
    ours = two_phase("SmoothL1LossBackward", dev.tensor(g), dev.tensor(x), dev.tensor(y), 0, 1.0,
                     dev.output((8,), np.float32))
    return Setup(ours, lambda: aten.smooth_l1_loss_backward.grad_input(
        tg, tx, ty, 0, 1.0, grad_input=tout), 0, 8)


def _probe(fn):
    return lambda cfg, dev: fn(cfg.n)


# --- the registry ------------------------------------------------------------------------

PROBES = [
    Case("probe: numba copy f32", _probe(probe.copy_setup), None),
    Case("probe: numba triad f32", _probe(probe.triad_setup), None),
    Case("probe: numba triad f32 streamed",
         lambda cfg, dev: probe.triad_setup(cfg.n, streamed=True), None),
]
TRIAD = PROBES[1].name


# the targets of the operators' cases (16M elements; each ISA level, each distribution)
GELU_VS_TORCH = 1.5
LOSS_TARGET = (0.85, 1.0)  # x the streamed triad, torch/ours
LAYOUT_VS_CONTIGUOUS = 0.75
POOL_VS_TORCH = 5.0
SPREAD_VS_NORMAL = 0.8  # elements/s: within 1.25x of the time on N(0,1)
DTYPES = (("f32", F32), ("f16", F16), ("bf16", BF16))


def _loss_cases() -> list[Case]:
    """SmoothL1/L1 backward, none and mean, in every dtype (and the scalar-gradOut means)."""
    cases = []
    for d, dtype in DTYPES:
        for reduction, mode in ((0, "none"), (1, "mean")):
            cases += [Case(f"smooth_l1 {d} {mode}", smooth_l1(dtype, reduction),
                           streamed_and_torch(*LOSS_TARGET)),
                      Case(f"l1 {d} {mode}", l1(dtype, reduction),
                           streamed_and_torch(*LOSS_TARGET))]
    return cases + [
        Case("smooth_l1 f32 mean grad[]", smooth_l1(F32, 1, ()), vs_torch(LOSS_TARGET[1])),
        Case("l1 f32 mean grad[1]", l1(F32, 1, (1,)), vs_torch(LOSS_TARGET[1]))]


def _gelu_cases() -> list[Case]:
    """GELU backward, none and tanh, in every dtype, self from N(0,1), and also from
    U(+-8), U(+-100) and N(0,1) with 1 % NaN/+-inf, each within 1.25x of its N(0,1) time
    and itself >= 1.5x torch."""
    cases = []
    for d, dtype in DTYPES:
        for mode in ("none", "tanh"):
            name = f"gelu {d} {mode}"
            cases.append(Case(name, gelu(dtype, mode), vs_torch(GELU_VS_TORCH)))
            cases += [Case(f"{name} {SPREADS[spread]}", gelu(dtype, mode, spread),
                           both(vs_torch(GELU_VS_TORCH), vs_case(name, SPREAD_VS_NORMAL)))
                      for spread in ("u8", "u100", "special")]
    return cases


def _layout_cases() -> list[Case]:
    """SmoothL1 with a broadcast target [S, 1] and with a transposed self, against the
    contiguous call of the same dtype."""
    return [Case(f"smooth_l1 {d} {label}", smooth_l1(dtype, layout=layout),
                 vs_case(f"smooth_l1 {d} none", LAYOUT_VS_CONTIGUOUS))
            for d, dtype in DTYPES[:2]
            for label, layout in (("bcast target[S,1]", "bcast"),
                                  ("self transposed", "transposed"))]


CASES = [
    *_loss_cases(),
    *_gelu_cases(),
    *_layout_cases(),
    *(Case(f"avgpool {d} k{k}s{s}p{p}", avg_pool(dtype, k, s, p), vs_torch(POOL_VS_TORCH))
      for d, dtype in DTYPES[:2] for k, s, p in ((3, 2, 1), (2, 2, 0))),
    Case("latency smooth_l1 f32 8 elems", tiny_smooth_l1, at_most("latency_us", 15, "us"),
         measure_latency),
    Case("cold start smooth_l1 8 elems", None, at_most("seconds", 1.5, "s"),
         measure_cold_start),
    Case("C API latency smooth_l1 8 elems", None, at_most("c_over_python", 1.5, "x Python"),
         measure_c_latency),
    Case("C API first result smooth_l1 8 elems", None, at_most("seconds", 1.5, "s"),
         measure_c_first_result),
    Case("peak memory smooth_l1 f16", None, at_most("extra_fraction", 0.10, "of in+out"),
         measure_peak_memory),
]


def note_subnormal_costs(rows: list[Row], cases: list[Case]) -> None:
    """Note on each failed case that timed `Setup.exact_products` what avoiding its
    subnormal products costs in this run: those exact products (whose speed does not
    depend on the values) against our call, timed together, and against torch's time on
    the reference case, and, where our call was timed against the reference's in pairs
    (`harness.rate_vs_reference`), the elements/s they would have against it (our ratio scaled
    by exact / ours): where either is under its target, neither way meets both of the
    case's targets here."""
    by_name = {r.case: r for r in rows}
    for case in cases:
        row = by_name.get(case.name)
        timed = row.extra.get("exact_products_ms") if row else None
        if not (timed and row.verdict == "FAIL" and case.target and case.target.needs):
            continue
        reference, factor = by_name.get(case.target.needs[0]), case.target.torch_factor
        if not (reference and reference.torch_s and factor):
            continue
        ours, exact = timed
        bound = reference.torch_s * 1e3 / exact
        note = (f"subnormal products (each takes an x86 microcode assist): the same results "
                f"made without them, as builds for AVX-512 make them, took {exact:.2f} ms "
                f"against ours {ours:.2f} ms on the same buffers, timed together, so with "
                f"them torch/ours on '{reference.case}' <= {reference.torch_s * 1e3:.2f} / "
                f"{exact:.2f} = {bound:.2f} (target {factor})")
        ours_rate, short = rate_vs_reference(row), bound < factor
        if ours_rate:
            rate = ours_rate * ours / exact
            note += (f", and elements/s vs '{reference.case}' {ours_rate:.2f} x "
                     f"{ours:.2f} / {exact:.2f} = {rate:.2f} (target {SPREAD_VS_NORMAL})")
            short = short or rate < SPREAD_VS_NORMAL
        note += "; out of reach here either way" if short else ""
        row.note = f"{row.note}; {note}" if row.note else note


def note_staging_bounds(rows: list[Row]) -> None:
    """Note on each failed case that timed `Setup.staged` what this run allows it, by
    bounds on its elements/s against the contiguous call (its probes timed alternately
    with our call and the contiguous one, on the same buffers):

    - memory: a probe reading self as our staged tiles do and streaming the others
      (`probe.staged_triad_over`) moves those bytes in that order, and our call moves
      more (it stores and reads back the staged tiles): at most the contiguous call's
      time over the probe's;
    - memory and transposes: the same probe transposing self's runs as our staging does
      but keeping nothing of them (`extra["staged_transposes_ms"]`): our call does that
      too, and also stores and reads back the staged tiles; the share of this probe's
      speed that ours reaches is what those stores and reloads leave;
    - staging and computing in turn (as each thread of ours does, a tile at a time): at
      least the rows' compute (our contiguous kernel's rows with their operands in cache,
      `extra["compute_ms"]`) plus fetching the lines our staging reads, in its order
      (`probe.staged_touches_over`), so at most the contiguous call's time over that sum.

    Where any is under the target, it is out of reach here for tiles staged and
    computed so. And for any tile shape: the staging itself with no compute, swept over
    tile shapes (`probe.swept_tiles`, `extra["swept_staging_ms"]`), from blocks used as
    they are transposed to whole rows; every design reads self a tile at a time, turns it
    in registers and hands it to the rows of the others through memory or cache, so its
    best shape bounds them all: where that is under the target, out of reach here for
    every tile shape tried."""
    for row in rows:
        staged, floor, reference = (row.extra.get(f"{key}_ms")
                                    for key in ("staged", "floor", "reference"))
        if row.verdict != "FAIL" or not (staged and floor and reference and row.ours_s):
            continue
        bound, ours = reference / staged, row.ours_s * 1e3
        compute, touches = row.extra.get("compute_ms"), row.extra.get("staged_touches_ms")
        in_turn = reference / (compute + touches) if compute and touches else None
        transposes = row.extra.get("staged_transposes_ms")
        with_transposes = reference / transposes if transposes else None
        swept = row.extra.get("swept_staging_ms")
        best = min(swept, key=swept.get) if swept else None
        any_tile = reference / swept[best] if swept else None
        verdict = ("out of reach here for every tile shape tried"
                   if any_tile and any_tile < LAYOUT_VS_CONTIGUOUS else
                   "out of reach for these tiles here"
                   if min(bound, in_turn or bound, with_transposes or bound)
                   < LAYOUT_VS_CONTIGUOUS else "reachable in principle")
        note = (f"{verdict}: a memory-only probe reading self a staged tile at a time "
                f"(as ours does) and streaming the tile's rows of the others took "
                f"{staged:.2f} ms, the streamed triad over the same buffers {floor:.2f} ms "
                f"(the layout alone: {floor / staged:.2f} of its speed), the contiguous call "
                f"{reference:.2f} ms, so elements/s vs it <= {bound:.2f} with these tiles "
                f"(target {LAYOUT_VS_CONTIGUOUS}); ours took {ours:.2f} ms, "
                f"{staged / ours:.2f} of the probe's speed")
        if with_transposes:
            note += (f"; the same probe transposing self's runs as our staging does, keeping "
                     f"nothing of them, took {transposes:.2f} ms, so elements/s vs it <= "
                     f"{with_transposes:.2f}; ours reached {transposes / ours:.2f} of its "
                     f"speed (the rest: storing and reading back the staged tiles)")
        if in_turn:
            note += (f"; staging and computing in turn, the rows' compute (our contiguous "
                     f"kernel's rows in cache) {compute:.2f} ms and fetching the "
                     f"lines of self our staging reads, in its order, {touches:.2f} ms add "
                     f"up to {compute + touches:.2f} ms, so elements/s vs it <= "
                     f"{in_turn:.2f}")
        if swept:
            rows, columns = zip(*(tuple(map(int, name.split("x"))) for name in swept))
            note += (f"; the staging alone (self's tiles transposed into a staged tile and "
                     f"read back into out = gradOut + staged * target, as integers, no "
                     f"compute) over {len(swept)} tile shapes, {min(rows)}-{max(rows)} rows by "
                     f"{min(columns)}-{max(columns)} columns, took at best "
                     f"{swept[best]:.2f} ms ({best}), so elements/s vs it <= {any_tile:.2f} "
                     f"with any of them; ours reached {swept[best] / ours:.2f} of its speed")
        row.note = f"{row.note}; {note}" if row.note else note


def note_bandwidth_ceilings(rows: list[Row], cases: list[Case]) -> None:
    """Note on each case that failed its torch/ours target the most that ratio can be in this
    run: torch's time over the floor (a triad probe moving the case's bytes with streaming
    stores, or for a case that mostly writes a probe with its mix of reads and writes,
    timed alternately with ours and torch; no kernel of ours is expected to move its bytes
    faster). Where that bound is below the target, the target is out of reach here. A
    case that timed its rows in cache (`extra["compute_ms"]`, scaled to its elements) also
    gets the bound of our kernel's compute: torch's time over that."""
    by_name = {r.case: r for r in rows}
    for case in cases:
        row, factor = by_name.get(case.name), case.target and case.target.torch_factor
        floor_ms = row.extra.get("floor_ms") if row else None
        if not (factor and floor_ms and row.torch_s and row.ours_s):
            continue
        ceiling = row.torch_s * 1e3 / floor_ms
        if (row.verdict != "FAIL" or row.ratio >= factor) and ceiling >= factor:
            continue  # passed, or failed another part of its target
        verdict = "out of reach here" if ceiling < factor else "reachable in principle"
        written = row.extra.get("floor_written_mb")
        probe_moving = (f"a probe reading {row.bytes_moved / 1e6 - written:.0f} MB and "
                        f"writing {written:.0f} MB with streaming stores" if written else
                        f"a streamed triad probe moving the same {row.bytes_moved / 1e6:.0f} MB")
        note = (f"{verdict}: {probe_moving} "
                f"took {floor_ms:.2f} ms (alternating with ours and torch), torch "
                f"{row.torch_s * 1e3:.2f} ms, so torch/ours <= {ceiling:.2f} (target "
                f"{factor}); ours took {row.ours_s * 1e3:.2f} ms, "
                f"{floor_ms / (row.ours_s * 1e3):.2f} of the probe's speed")
        compute_ms = row.extra.get("compute_ms")
        if compute_ms:
            bound = row.torch_s * 1e3 / compute_ms
            note += (f"; {_computes(compute_ms)}, so torch/ours <= {bound:.2f} for this kernel"
                     + (" (bound by its compute here)" if bound < factor else ""))
        row.note = f"{row.note}; {note}" if row.note else note


def _computes(compute_ms: float) -> str:
    """What a case's in-cache timing (`extra["compute_ms"]`) says, for a note."""
    return (f"our kernel's rows with their operands in cache (a row of {probe.ROW_ELEMENTS} "
            f"elements repeated on each of {probe.THREADS} threads) compute this case's "
            f"elements in {compute_ms:.2f} ms")


def note_compute_floors(rows: list[Row], cases: list[Case]) -> None:
    """Note on each case that failed the streamed-triad part of its target and timed its
    rows in cache (`extra["compute_ms"]`) what its compute allows: our call takes at least
    that compute, so its speed is at most the streamed triad's time (`extra["floor_ms"]`)
    over it, as a share of the triad's speed; where that is under the target, the kernel is
    bound by its compute here. An in-cache time above the call's own from memory bounds
    nothing (the machine was busier while it was timed), and the note says so."""
    by_name = {r.case: r for r in rows}
    for case in cases:
        row, fraction = by_name.get(case.name), case.target and case.target.floor_fraction
        if not (fraction and row and row.verdict == "FAIL" and row.streamed_fraction
                and row.streamed_fraction < fraction and row.extra.get("compute_ms")):
            continue
        compute, floor = row.extra["compute_ms"], row.extra["floor_ms"]
        ours = row.ours_s * 1e3
        if compute > ours:
            note = (f"no compute bound measured: {_computes(compute)}, more than the "
                    f"{ours:.2f} ms of its call from memory")
        else:
            bound = floor / compute
            verdict = ("bound by its compute here" if bound < fraction else
                       "reachable in principle")
            note = (f"{verdict}: {_computes(compute)}, the streamed triad moves its bytes in "
                    f"{floor:.2f} ms, so x streamed triad <= {bound:.2f} for this kernel "
                    f"(target {fraction}); ours took {ours:.2f} ms")
        row.note = f"{row.note}; {note}" if row.note else note
