"""Each execution path of the pointwise kernels, at sizes that reach it, against the golden.

Small hypothesis examples rarely reach some paths: the typed flat kernel (one dtype, all
contiguous, incl. a scalar gradOut folded into the scale), the tiled kernel computing
contiguous float32 rows in place, broadcast rows (stride 0 along the columns), and
operands that stride past a cache line (transposed views, staged a tile at a time by
16 x 16 blocks, what the blocks leave element by element).
"""

import functools
import platform
import re

import ml_dtypes
import numba
import numpy as np
import pytest

import aclnn
from aclnn.kernels import lanes, pointwise
from aclnn.kernels.bits import BF16, F16, F32, cpu_vendor, line_aligned_floats
from reference import bits, check_output, compute, golden, layout_strides, strided_device
from support import cached_assembly

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
ROWS, COLS = 67, 301  # not multiples of any tile size

rng = np.random.default_rng(7)


def values(shape, dtype, scale=2.0):
    """Random values of `dtype` (normal, scaled)."""
    return (rng.standard_normal(shape) * scale).astype(dtype)


def transposed(array):
    """A device view of `array` stored column-major (strides [1, rows])."""
    return strided_device(array, layout_strides(array.shape, perm=[1, 0]))


CASES = {
    "smooth_l1": (1, 0.5),
    "l1": (0,),
    "gelu": ("none",),
}


def run_and_check(op, inputs, dtype):
    """Run `op` and compare with the float64 golden under the SPEC §10 bar."""
    hosts = [i.view() if hasattr(i, "view") and not isinstance(i, np.ndarray) else i
             for i in inputs]
    attrs = CASES[op]
    actual = compute(op, inputs, attrs)
    check_output(op, actual, golden(op, hosts, attrs), dtype, g=hosts[0], inputs=hosts)


def operands(op, shapes, dtype):
    """Host inputs of `op` with the given shapes."""
    count = 2 if op == "gelu" else 3
    return [values(shape, dtype) for shape in shapes[:count]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(CASES))
def test_flat_contiguous(op, dtype):
    shape = (ROWS * COLS,)
    run_and_check(op, operands(op, [shape] * 3, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["smooth_l1", "l1"])
def test_flat_scalar_grad(op, dtype):
    shape = (ROWS, COLS)
    inputs = [values((), dtype), values(shape, dtype), values(shape, dtype)]
    run_and_check(op, inputs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(CASES))
def test_broadcast_rows(op, dtype):
    shapes = [(ROWS, COLS), (ROWS, 1), (1, COLS)] if op != "gelu" else [(ROWS, COLS), (ROWS, 1)]
    run_and_check(op, operands(op, shapes, dtype), dtype)


@pytest.mark.parametrize("shapes", [
    [(500, 17), (500, 1), (1, 17)],  # tiles of 240 rows, the last one cut short (20)
    [(5, 3, 40), (5, 1, 40), (5, 3, 1)],  # tiles of the middle dim's 3 rows, 5 times
], ids=["2d", "3d"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(CASES))
def test_broadcast_short_rows(op, dtype, shapes):
    """Rows shorter than a tile go several to a tile."""
    run_and_check(op, operands(op, shapes, dtype), dtype)


def test_short_rows_share_a_tile():
    """Without a staged operand a tile is up to CHUNK columns by as many whole rows as make
    ROWS_TILE_ELEMENTS, as the row dim allows, cut in rows until every thread has one."""
    def tile(rows, cols, threads=2):
        shape = [1] * 6 + [rows, cols]
        return pointwise._tile_shape(shape, [[0] * 6 + [4 * cols, 4], [0] * 6 + [4, 0]], 4,
                                     threads=threads)

    per_tile = pointwise.ROWS_TILE_ELEMENTS
    assert tile(100_000, 17) == (per_tile // 17, pointwise.CHUNK)
    assert tile(1000, 4096) == tile(1000, 5000) == (per_tile // 4096, pointwise.CHUNK)
    assert tile(1000, 17) == (500, pointwise.CHUNK)  # one tile would hold every row
    assert tile(1000, 17, threads=1) == (1000, pointwise.CHUNK)
    assert tile(3, 40) == (2, pointwise.CHUNK)
    assert tile(1, 40) == (1, pointwise.CHUNK)
    assert tile(3, 40_000) == (3, pointwise.CHUNK)  # ten tiles side by side
    assert tile(3, 0) == (2, pointwise.CHUNK)  # no tile at all: any shape will do


def test_staged_tiles_hold_the_same_bytes():
    """A staged tile holds STAGED_TILE_BYTES in the rows' dtype: twice the rows in 16-bit
    rows, so each column of the staged operand is read as 512 bytes of its own row."""
    assert _staged_tile(4096, 4096, 4) == (128, 4096)
    assert _staged_tile(4096, 4096, 2) == (256, 4096)
    assert _staged_tile(4096, 5000, 2) == (256, 4096)
    assert _staged_tile(100, 4096, 2, threads=1) == (100, 4096)
    assert _staged_tile(9000, 1000, 2) == (1040, 1000)


def _staged_tile(rows, cols, row_bytes, threads=2, outer=1):
    """The tile shape for a [outer, rows, cols] iteration with an operand transposed."""
    shape = [1] * 5 + [outer, rows, cols]
    strides = [[0] * 5 + [row_bytes * rows * cols, row_bytes * cols, row_bytes],
               [0] * 5 + [row_bytes * rows * cols, row_bytes, row_bytes * rows]]
    return pointwise._tile_shape(shape, strides, row_bytes, threads)


def test_staged_tiles_give_every_thread_one():
    """Staged tiles are cut in rows (multiples of BLOCK) until there are at least as many
    as threads, counting tiles side by side and over the outer dims."""
    assert _staged_tile(1024, 1024, 2) == (512, 1024)  # one tile of 1024 rows would fit
    assert _staged_tile(1024, 1024, 2, threads=1) == (1024, 1024)
    assert _staged_tile(100, 4096, 2) == (64, 4096)
    assert _staged_tile(100, 4096, 2, threads=8) == (16, 4096)  # 7 tiles: BLOCK rows at least
    assert _staged_tile(1024, 8192, 2) == (256, 4096)  # two side by side, 256 rows fill them
    assert _staged_tile(1024, 1024, 2, threads=4, outer=2) == (512, 1024)
    assert _staged_tile(1024, 1024, 2, threads=8, outer=2) == (256, 1024)


@numba.njit
def _scratch_addresses(sizes):
    """The address and length of a `line_aligned_floats` array of each size, every other
    one kept alive while the rest are made (so they land at many places)."""
    addresses, lengths, kept = np.empty(len(sizes), np.int64), np.empty(len(sizes), np.int64), []
    for i, n in enumerate(sizes):
        scratch = line_aligned_floats(n)
        scratch[:] = 1.0  # every element is writable
        addresses[i], lengths[i] = scratch.ctypes.data, scratch.size
        if i % 2:
            kept.append(scratch)
    return addresses, lengths


def test_kernel_scratch_starts_on_a_cache_line():
    """The tiled and pooling kernels' scratch starts on a 64-byte line whatever its size
    (Numba aligns arrays to 32 bytes only: a work area half a line off made every vector
    of a staged tile span two lines, see `bits.line_aligned_floats`)."""
    sizes = np.array([0, 1, 5, 16, 17, 301, 4096, 4097, 65536 + 8, 526352] * 4, np.int64)
    addresses, lengths = _scratch_addresses(sizes)
    assert (addresses % 64 == 0).all()
    assert (lengths == sizes).all()


@pytest.mark.parametrize("cols", [1, 15, 301, 4096])
@pytest.mark.parametrize("row_code", [F32, F16])
def test_work_areas_start_on_cache_lines(cols, row_code):
    """Each operand's area in a run's work array and each row of a staged tile start on a
    cache line of it, a line apart at least beyond the row, for any tile width: gradOut in
    place, self transposed (staged), target broadcast (a converted row), the output."""
    size = 2 if row_code != F32 else 4
    inner = [size, 4096 * size, 0, size]
    meta = np.zeros((4, 2 + pointwise.MAX_RANK), np.int64)  # [code, offset, strides]
    meta[:, 0], meta[2, 0], meta[:, -1] = row_code, BF16, inner
    pitch = pointwise._pitch(cols, row_code)
    assert pitch % 64 == 0 and pitch >= size * cols + 64
    starts = pointwise._work_areas(meta, 48, cols, row_code)
    assert (starts % 16 == 0).all()
    assert list(np.diff(starts) > 0) == [False, True, True, False]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(CASES))
def test_transposed_inputs(op, dtype):
    hosts = operands(op, [(ROWS, COLS)] * 3, dtype)
    devices = [hosts[0]] + [transposed(h) for h in hosts[1:]]
    try:
        run_and_check(op, devices, dtype)
    finally:
        for d in devices[1:]:
            d.free()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["smooth_l1", "gelu"])
def test_transposed_wider_than_a_tile(op, dtype):
    """Rows wider than two staged tiles (4096 columns each): the tiles go down bands of
    columns, and the last, narrower band and the rows past the last 16-row group too."""
    hosts = operands(op, [(37, 2 * 4096 + 333)] * 3, dtype)
    devices = [hosts[0], transposed(hosts[1])] + hosts[2:]
    try:
        run_and_check(op, devices, dtype)
    finally:
        devices[1].free()


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposed_taller_than_a_tile(dtype):
    """Rows past one staged tile's (256 of 16-bit rows, 128 of float32 ones) and columns
    past its 4096: tiles below and beside others, each staged on its own."""
    hosts = operands("smooth_l1", [(300, 4096 + 40)] * 3, dtype)
    devices = [hosts[0], transposed(hosts[1])] + hosts[2:]
    try:
        run_and_check("smooth_l1", devices, dtype)
    finally:
        devices[1].free()


@pytest.mark.parametrize("op", list(CASES))
def test_mixed_dtypes_tiled(op):
    hosts = [values((ROWS, COLS), np.float16), values((ROWS, COLS), np.float32),
             values((ROWS, COLS), ml_dtypes.bfloat16)]
    if op == "gelu":
        hosts = hosts[:2]
    run_and_check(op, hosts, np.float32)


@pytest.mark.parametrize("layout", ["flat", "broadcast", "transposed"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(CASES))
def test_streaming_stores_give_the_same_bits(op, dtype, layout, monkeypatch):
    """Each path with its output stored non-temporally, as outputs of STREAM_BYTES are (the
    tiled kernels: the rows that start on a cache line), gives the bits of plain stores."""
    shapes = {"flat": [(ROWS, COLS)] * 3, "broadcast": [(ROWS, COLS), (ROWS, 1), (1, COLS)],
              "transposed": [(ROWS, COLS)] * 3}[layout]
    hosts = operands(op, shapes, dtype)
    devices = hosts[:1] + [transposed(h) for h in hosts[1:]] if layout == "transposed" else hosts
    try:
        plain = compute(op, devices, CASES[op])
        monkeypatch.setattr(pointwise, "STREAM_BYTES", 0)
        streamed = compute(op, devices, CASES[op])
    finally:
        for d in devices[1:] if layout == "transposed" else ():
            d.free()
    assert np.array_equal(bits(streamed), bits(plain))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_gelu_lookup_equals_the_strided_kernel(dtype, approximate):
    """Contiguous float16/bfloat16 GELU looks GELU' up in a table of the kernel's own values:
    over all 65536 inputs (NaN, inf, subnormals included) it gives the bits of the strided
    (tiled) kernel, which computes every element."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    g = np.random.default_rng(7).standard_normal(x.size).astype(dtype)
    contiguous = aclnn.gelu_backward(g, x, approximate)
    spread_x, spread_g = np.zeros(2 * x.size, dtype), np.zeros(2 * x.size, dtype)
    spread_x[::2], spread_g[::2] = x, g
    strided = aclnn.gelu_backward(spread_g[::2], spread_x[::2], approximate)
    assert np.array_equal(contiguous.view(np.uint16), strided.view(np.uint16))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", ["smooth_l1", "l1"])
def test_16bit_tiled_rows_give_the_float32_rows_bits(op, dtype, monkeypatch):
    """One 16-bit dtype throughout: the tiled kernel computes the rows in that dtype
    (converted in registers; a broadcast target, a strided self and a strided output
    gathered and scattered as they are, a transposed self staged as it is, by blocks and
    what they leave). They give the bits of rows converted to float32 and back, streamed
    or not, for a contiguous, a strided and a transposed self alike."""
    g, x, y = operands(op, [(ROWS, COLS), (ROWS, COLS), (ROWS, 1)], dtype)
    strided_x = strided_device(x, layout_strides(x.shape, step=2))
    transposed_x = transposed(x)
    out = strided_device(np.zeros((ROWS, COLS), dtype), layout_strides((ROWS, COLS), step=3))
    chosen = []
    native_code = pointwise._row_code

    def spy(*args):
        chosen.append(native_code(*args))
        return chosen[-1]

    try:
        results = []
        for row_code, stream_bytes in ((spy, pointwise.STREAM_BYTES), (spy, 0),
                                       (lambda *args: pointwise.F32, pointwise.STREAM_BYTES)):
            monkeypatch.setattr(pointwise, "_row_code", row_code)
            monkeypatch.setattr(pointwise, "STREAM_BYTES", stream_bytes)
            results += [bits(compute(op, [g, x, y], CASES[op])),
                        bits(compute(op, [g, strided_x, y], CASES[op], out=out).copy()),
                        bits(compute(op, [g, transposed_x, y], CASES[op]))]
    finally:
        strided_x.free()
        transposed_x.free()
        out.free()
    assert chosen and pointwise.F32 not in chosen
    assert all(np.array_equal(result, results[0]) for result in results[1:])


ALONG_ROWS, TRANSPOSED = (64, 1), (1, 64)  # element strides, 64 x 64


@functools.cache
def _tiled_f16_asm() -> str:
    """The assembly of the tiled kernel as this process runs it for float16 SmoothL1
    operands (from the cache). Strides, broadcasts and transposes are run-time data
    (`meta`), so this one code serves every float16 layout; a copy compiled for the
    purpose took 70-80 s on a 2 GHz AMD EPYC."""
    side, size = 64, 2
    buffers = [np.zeros(side * side * size, np.uint8) for _ in range(4)]
    operands = [pointwise.StridedOperand(b, pointwise.F16, 0, tuple(size * s for s in t))
                for b, t in zip(buffers, [ALONG_ROWS, TRANSPOSED, ALONG_ROWS, ALONG_ROWS])]
    pointwise.smooth_l1_backward((side, side), *operands, 1.0, 1.0)()
    tiled = pointwise._tiled_backward
    signature = next(s for s in tiled.signatures if len(s[5]) == 3)  # SmoothL1's params
    return cached_assembly(tiled, signature)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
def test_staging_asks_for_a_later_block_column_into_l2_except_on_intel():
    """Staging a transposed operand prefetches the 16 lines a later block column reads
    into the outer caches (prefetcht1: lines asked for into L1 are pushed out there before
    they are read, see `pointwise._stage`), none non-temporally; on Intel CPUs it asks for
    none (`pointwise.STAGE_PREFETCHES`: faster there), and nothing else in the kernel
    prefetches into L2 alone."""
    assert pointwise.STAGE_PREFETCHES == (cpu_vendor() != "GenuineIntel")
    asm = _tiled_f16_asm()
    into_l2 = len(re.findall(r"\tprefetcht1\s", asm))
    assert into_l2 >= 16 if pointwise.STAGE_PREFETCHES else into_l2 == 0
    assert not re.search(r"\tprefetchnta\s", asm)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
def test_tiled_16bit_rows_prefetch_their_inputs():
    """The tiled kernel's 16-bit SmoothL1 rows - of a transposed self, a broadcast target,
    any layout: one compiled code - prefetch their inputs as the contiguous kernel's do
    (prefetcht0, `lanes.LOSS_PREFETCH_BYTES` ahead: see test_smooth_l1_rows), besides the
    staging's prefetches into L2 where it makes them."""
    offsets = {int(hex_, 16) for hex_ in re.findall(r"\tprefetcht0\s+0x([0-9a-f]+)\(",
                                                      _tiled_f16_asm())}  # objdump's
    ahead = lanes.LOSS_PREFETCH_BYTES
    assert offsets and offsets <= {ahead, ahead + 64}, offsets


@pytest.mark.parametrize("op", ["smooth_l1", "l1", "gelu"])
def test_contiguous_calls_of_one_block_run_on_the_calling_thread(op, monkeypatch):
    """A contiguous float32 call of up to one block (4096 elements) runs the one-block
    kernel on the calling thread, not through `launch` (the parallel kernels' way); one
    element more, the parallel contiguous kernel. Both meet the golden."""
    used = []
    for name in ("smooth_l1_block", "smooth_l1_flat", "gelu_block", "gelu_flat", "launch"):
        kernel = getattr(pointwise, name)
        monkeypatch.setattr(pointwise, name,
                            functools.partial(lambda kernel, name, *a: used.append(name)
                                              or kernel(*a), kernel, name))
    family = "gelu" if op == "gelu" else "smooth_l1"
    for n, kernels in ((4096, [f"{family}_block"]), (4097, ["launch", f"{family}_flat"])):
        for grad_shape in [(n,)] if op == "gelu" else [(n,), ()]:  # () folded into the scale
            used.clear()
            run_and_check(op, operands(op, [grad_shape, (n,), (n,)], np.float32), np.float32)
            assert used == kernels, (n, grad_shape)
