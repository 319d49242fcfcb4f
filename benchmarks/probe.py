"""The memory-bandwidth probe: Numba `prange` copy and triad (3 reads + 1 write) on
float32 arrays, run on 2 threads. A triad is the yardstick of the table's "x triad"
column: the case's own same-bytes triad where it has one (see `cases.measure_throughput`),
else the run's triad row. The same-bytes triad stores its output non-temporally, as our
kernels do for large outputs: a plain store first reads the line it writes, so the plain
triad row moves a quarter more bytes than it is credited with and is no floor. An operator
that mostly writes (AvgPool2dBackward) has a probe with its own mix of reads and writes as
its floor: streamed writes run slower than reads on some machines (an AMD EPYC with
AVX-512: 103 MB written non-temporally took 2.64 ms, where a triad moving 128 MB took
1.54)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numba
import numpy as np
import torch
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from aclnn.kernels import bits, gelu_rows, smooth_l1_rows, stamp_with_kernel_sources
from aclnn.kernels.bits import CACHE_LINE_BYTES, element_bytes, store_fence, stream_f32x16
from aclnn.kernels.lanes import PREFETCH_BYTES, array_data, prefetch_block_rows, transpose_x16
from aclnn.kernels.pointwise import BLOCK, STAGE_AHEAD, STAGE_PREFETCHES, _pitch

from .harness import InCache, Setup, device_array, host_data

# The probes compile the kernels' rows and transposes into themselves: their cache goes
# stale with the kernels' sources (before the decorators below make their caches).
stamp_with_kernel_sources(Path(__file__).parent)

THREADS = 2
READS, TRANSPOSES, STAGES = 0, 1, 2  # `_staged_triad`'s passes (see there)
LINE_WORDS = CACHE_LINE_BYTES // 4
ROW_ELEMENTS = 4096  # a row of the compute probes: a contiguous kernel's, its operands in L2
ROW_REPEATS = 2048  # times each thread computes its row per timing (16M elements in all)
CODES = {np.dtype(np.float32): bits.F32, np.dtype(np.float16): bits.F16,
         np.dtype(ml_dtypes.bfloat16): bits.BF16}


@numba.njit(parallel=True, cache=True)
def _copy(dst, src):
    for i in prange(dst.size):
        dst[i] = src[i]


@numba.njit(parallel=True, cache=True)
def _triad(out, a, b, c):
    for i in prange(out.size):
        out[i] = a[i] + b[i] * c[i]


@intrinsic
def _streamed_triad_line(typingctx, out, a, b, c, i, j):
    """out[i:i + 16] = a[i:i + 16] + b[j:j + 16] * c[i:i + 16], stored non-temporally (all
    three lines aligned to 64 bytes); in float32, or on uint32 arrays in integers
    (wrapping, whatever bits they hold)."""
    floats = a.dtype == types.float32

    def codegen(context, builder, signature, args):
        vector = ir.VectorType(ir.FloatType() if floats else ir.IntType(32), 16)

        def line(k):
            data = context.make_array(signature.args[k])(context, builder, value=args[k]).data
            at = args[5] if k == 2 else args[4]
            return builder.bitcast(builder.gep(data, [at]), vector.as_pointer())
        a_, b_, c_ = (builder.load(line(k), align=64) for k in (1, 2, 3))
        add, mul = (builder.fadd, builder.fmul) if floats else (builder.add, builder.mul)
        stored = builder.store(add(a_, mul(b_, c_)), line(0), align=64)
        stored.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()
    return types.none(out, a, b, c, types.intp, types.intp), codegen


@numba.njit(parallel=True, cache=True)
def _streamed_triad(out, a, b, c):
    """_triad for sizes that are multiples of 16, on 64-byte aligned float32 or uint32
    arrays."""
    lines = out.size // 16
    for t in prange(2 * THREADS):
        for k in range(t * lines // (2 * THREADS), (t + 1) * lines // (2 * THREADS)):
            _streamed_triad_line(out, a, b, c, 16 * k, 16 * k)


def copy_setup(n: int) -> Setup:
    """Copy n float32 elements: Numba vs torch `Tensor.copy_` (2 x 4n bytes)."""
    numba.set_num_threads(THREADS)
    src = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    dst = np.zeros_like(src)
    t_src, t_dst = torch.from_numpy(src.copy()), torch.zeros(n)
    return Setup(lambda: _copy(dst, src), lambda: t_dst.copy_(t_src), 2 * 4 * n, n)


def _aligned(n: int) -> np.ndarray:
    """n float32 zeros from a 64-byte boundary."""
    raw = np.zeros(n + 16, np.float32)
    start = (-raw.ctypes.data % 64) // 4
    return raw[start: start + n]


_STEP_LINES = 64  # lines written per step of the read-write probe


@intrinsic
def _add_lines(typingctx, src, first, end, sums, at):
    """sums[at:at + 16] += the 64-byte lines src[first:end] (float32 elements, 16 at a
    time, a vector sum: the reads at full speed)."""
    def codegen(context, builder, signature, args):
        vector, data = ir.VectorType(ir.FloatType(), 16), array_data(context, builder,
                                                                      signature, args)

        def pointer(k, index):
            return builder.bitcast(builder.gep(data(k), [index]), vector.as_pointer())
        _, first, end, _, at = args
        total = cgutils.alloca_once_value(builder, builder.load(pointer(3, at), align=4))
        sixteen = first.type(16)
        with cgutils.for_range(builder, builder.sdiv(builder.sub(end, first), sixteen)) as loop:
            index = builder.add(first, builder.mul(loop.index, sixteen))
            builder.store(builder.fadd(builder.load(total),
                                       builder.load(pointer(0, index), align=4)), total)
        builder.store(builder.load(total), pointer(3, at), align=4)
        return context.get_dummy_value()
    return types.none(src, types.intp, types.intp, sums, types.intp), codegen


@numba.njit(parallel=True, cache=True)
def _read_write(out, src, line, sums):
    """Read every line of `src` (summed into `sums`, 16 floats per part) and write every
    64-byte line of the uint8 array `out` (aligned, a multiple of 64 bytes) non-temporally,
    copies of the _STEP_LINES lines of `line`, in parts shared out over the threads; each
    part goes in steps that read their share of `src` and then write _STEP_LINES lines,
    so that reads and writes interleave."""
    parts, lines, src_lines = sums.size // 16, out.size // 64, src.size // 16
    for p in prange(parts):
        first, end = p * lines // parts, (p + 1) * lines // parts
        for step in range(first, end, _STEP_LINES):
            count = min(_STEP_LINES, end - step)
            _add_lines(src, 16 * (step * src_lines // lines),
                       16 * ((step + count) * src_lines // lines), sums, 16 * p)
            stream_f32x16(out, 64 * step, line, 0, count)
        store_fence()


def read_write_setup(read_bytes: int, write_bytes: int) -> Setup:
    """The floor of an operator that reads `read_bytes` and writes `write_bytes` (each
    rounded down to whole cache lines): a Numba kernel reading and writing as many bytes,
    the writes with streaming stores; no torch counterpart."""
    numba.set_num_threads(THREADS)
    src = _aligned(read_bytes // 64 * 16)
    src[:] = np.random.default_rng(2).standard_normal(src.size, dtype=np.float32)
    out = _aligned(write_bytes // 64 * 16).view(np.uint8)
    line, sums = np.ones(16 * _STEP_LINES, np.float32), np.zeros(64 * 16, np.float32)
    return Setup(lambda: _read_write(out, src, line, sums), None, src.nbytes + out.nbytes)


def triad_setup(n: int, streamed: bool = False) -> Setup:
    """out = a + b * c on n float32 elements (rounded down to a multiple of 16 when
    `streamed`: the output stored non-temporally): Numba vs `torch.addcmul(out=)`
    (4 x 4n bytes)."""
    numba.set_num_threads(THREADS)
    n = n - n % 16 if streamed else n
    rng = np.random.default_rng(1)
    a, b, c, out = (_aligned(n) for _ in range(4))
    for x in (a, b, c):
        x[:] = rng.standard_normal(n, dtype=np.float32)
    ta, tb, tc = (torch.from_numpy(x.copy()) for x in (a, b, c))
    t_out = torch.zeros(n)
    kernel = _streamed_triad if streamed else _triad
    return Setup(lambda: kernel(out, a, b, c),
                 lambda: torch.addcmul(ta, tb, tc, out=t_out), 4 * 4 * n, n)


@numba.njit(inline="always")
def _sum_words(words, first, count):
    """The sum of words[first:first + count] (wrapping; a vector loop)."""
    run = words[first:first + count]
    total = np.uint32(0)
    for i in range(run.size):
        total += run[i]
    return total


@numba.njit(inline="always")
def _read_runs(x, x_bytes, row_bytes, first_row, first_column, rows, columns, code, stage,
               area, pitch):
    """A staged tile's reads of x (rows of `row_bytes`, elements of `code`; `x_bytes` its
    uint8 view): the runs of `rows` elements from element `first_row` along x's rows
    `first_column` ... + `columns` (the tile's columns), BLOCK rows of x at a time down
    their runs, as our staging reads them (`pointwise._stage`), asking for the lines of the
    BLOCK rows STAGE_AHEAD groups on where it does (STAGE_PREFETCHES). For READS, each
    row's run summed as words (the sum returned); else transposed 16 x 16 blocks at a
    time, each into the first BLOCK lines of `area` (TRANSPOSES: kept nowhere) or into
    its place in the tile's rows of `pitch` bytes in `area` (STAGES: the staged tile)."""
    total, size = np.uint32(0), element_bytes(code)
    ahead, run_bytes = STAGE_AHEAD * BLOCK * row_bytes, rows * size
    for group in range(first_column, first_column + columns, BLOCK):
        first = group * row_bytes + first_row * size
        if stage == READS:  # each row's run whole, in a vector loop: at memory speed
            if STAGE_PREFETCHES:
                for line in range(first, first + run_bytes, CACHE_LINE_BYTES):
                    prefetch_block_rows(x_bytes, line + ahead, row_bytes)
            for row in range(BLOCK):
                total += _sum_words(x, (first + row * row_bytes) // 4, run_bytes // 4)
            continue
        for at in range(first, first + run_bytes, BLOCK * size):
            if STAGE_PREFETCHES and (at - first) % CACHE_LINE_BYTES == 0:
                prefetch_block_rows(x_bytes, at + ahead, row_bytes)
            to, step = ((0, CACHE_LINE_BYTES) if stage == TRANSPOSES else
                        ((at - first) // size * pitch + (group - first_column) * size, pitch))
            transpose_x16(code, code, x_bytes, at, row_bytes, area, to, step)
    return total


@numba.njit(parallel=True, cache=True)
def _staged_triad(out, a, x, x_bytes, c, side, rows, columns, code, stage, sums):
    """The work of a tiled call on [side, side] elements of `code` whose operand x is read
    transposed, tiles of `rows` x `columns` (dividing `side`, `rows` a multiple of BLOCK,
    `columns` of whole cache lines of elements) staged as our kernel stages them, on
    uint32 words, with no compute: each thread takes an equal run of tiles (as the
    kernel's prange does, row band by row band); a tile first reads its runs of x
    (`_read_runs`: READS sums them into `sums`; TRANSPOSES transposes them and keeps the
    first word of the last block in `sums`; STAGES transposes them into a staged tile),
    then streams its rows of a and c into `out`, stored non-temporally: out = a + c * c,
    or for STAGES out = a + staged * c (x transposed, exactly)."""
    size = element_bytes(code)
    row_bytes, pitch = side * size, _pitch(columns, code)  # as our staged tiles' rows
    row_words, pitch_words = row_bytes // 4, pitch // 4
    per_band = side // columns
    tiles = side // rows * per_band
    for p in prange(THREADS):
        total = np.uint32(0)
        area = bits.line_aligned_floats(rows * pitch_words if stage == STAGES
                                        else BLOCK * LINE_WORDS).view(np.uint32)
        area_bytes = area.view(np.uint8)
        for tile in range(p * tiles // THREADS, (p + 1) * tiles // THREADS):
            first_row, first_column = tile // per_band * rows, tile % per_band * columns
            total += _read_runs(x, x_bytes, row_bytes, first_row, first_column, rows, columns,
                                code, stage, area_bytes, pitch)
            for row in range(rows):
                at = (first_row + row) * row_words + first_column * size // 4
                for word in range(0, columns * size // 4, LINE_WORDS):
                    if stage == STAGES:
                        _streamed_triad_line(out, a, area, c, at + word, row * pitch_words + word)
                    else:
                        _streamed_triad_line(out, a, c, c, at + word, at + word)
        store_fence()
        if stage == TRANSPOSES:
            total += area[0]
        sums[p] = total


@numba.njit(parallel=True, cache=True)
def _staged_touches(x, x_bytes, row_words, run_words, sums):
    """The cache lines our tiled kernel stages from x (rows of `row_words` uint32 words;
    `x_bytes` its uint8 view), in its order, one word of each, asked for ahead as it asks:
    a tile's run of `run_words` words along every row, taken BLOCK rows at a time, line by
    line down the run, each line of those rows in turn, first asking for the same line of
    the BLOCK rows STAGE_AHEAD groups on where it does (see `pointwise._stage`); each
    thread sums its equal run of tiles into `sums`."""
    tiles, groups = row_words // run_words, len(x) // row_words // BLOCK
    ahead = STAGE_AHEAD * BLOCK * row_words
    for p in prange(THREADS):
        total = np.uint32(0)
        for tile in range(p * tiles // THREADS, (p + 1) * tiles // THREADS):
            for group in range(groups):
                first = group * BLOCK * row_words + tile * run_words
                for line in range(first, first + run_words, LINE_WORDS):
                    if STAGE_PREFETCHES:
                        prefetch_block_rows(x_bytes, 4 * (line + ahead), 4 * row_words)
                    for row in range(BLOCK):
                        total += x[line + row * row_words]
        sums[p] = total


def staged_triad_over(buffers: tuple[tuple[int, int], ...], side: int,
                      tile: tuple[int, int], code: int, stage: int) -> Callable[[], None]:
    """`_staged_triad` over a case's own device buffers (address, bytes: gradOut, the
    transposed self, target, output, each [side, side] of elements of `code`), in tiles of
    (rows, columns): self read a tile at a time as our staging reads it, the tile's rows
    of the others streamed; READS a memory-only pass; TRANSPOSES also transposes self's
    runs as our staging does, keeping nothing of them; STAGES keeps them in a staged tile
    and streams out = gradOut + staged * target from it, all with no compute."""
    numba.set_num_threads(THREADS)
    a, x, c, out = (device_array(buffer, np.uint32) for buffer in buffers)
    sums = np.zeros(THREADS, np.uint32)
    return lambda: _staged_triad(out, a, x, x.view(np.uint8), c, side, *tile, code, stage,
                                 sums)


def swept_tiles(side: int, code: int) -> list[tuple[int, int]]:
    """The tile shapes (rows, columns) a STAGES probe is swept over for a [side, side]
    self of elements of `code` read transposed: 16 to 512 rows (self read in runs of 16 to
    512 elements along its rows) by a cache line of columns (each 16 x 16 block used as it
    is transposed, the staged tile in L1), 1024 columns (in L2) or whole rows (the others
    streamed whole rows at a time, as ours does); those that divide `side`."""
    columns = (CACHE_LINE_BYTES // element_bytes(code), 1024, side)
    return [(rows, width) for rows in (16, 64, 128, 256, 512) for width in dict.fromkeys(columns)
            if side % rows == 0 and side % width == 0]


def staged_touches_over(buffer: tuple[int, int], row_bytes: int,
                        run_bytes: int) -> Callable[[], None]:
    """`_staged_touches` over a case's transposed self (its device buffer: address, bytes):
    the memory our tiled kernel's staging must fetch, in its order, and nothing else."""
    numba.set_num_threads(THREADS)
    sums = np.zeros(THREADS, np.uint32)
    x = device_array(buffer, np.uint32)
    return lambda: _staged_touches(x, x.view(np.uint8), row_bytes // 4, run_bytes // 4, sums)


def triad_over(buffers: tuple[tuple[int, int], ...], streamed: bool) -> Callable[[], None]:
    """The triad over a case's own device buffers (address, bytes): the three it reads
    and the one it writes, as uint32 words in integer arithmetic (their bits may be any
    16-bit values, whose float32 reading could hold subnormals), so that it meets the
    memory those buffers lie in. Each buffer is taken up to the smallest one's size, in
    whole 64-byte lines when `streamed`."""
    numba.set_num_threads(THREADS)
    words = min(size for _, size in buffers) // 4
    words -= words % 16 if streamed else 0
    a, b, c, out = (device_array(buffer, np.uint32)[:words] for buffer in buffers)
    kernel = _streamed_triad if streamed else _triad
    return lambda: kernel(out, a, b, c)


@numba.njit(parallel=True, cache=True, error_model="numpy", fastmath={"contract"})
def _loss_rows(code, rows, factor, mode, scale, repeats):
    """Each thread computes its own row of SmoothL1/L1 (`smooth_l1_rows.smooth_l1_row`,
    as the contiguous kernel calls it: plain stores, its prefetch distance) `repeats`
    times: rows[t] holds thread t's gradOut, self, target and output (uint8, elements of
    `code`)."""
    for t in prange(rows.shape[0]):
        pad = np.empty(smooth_l1_rows.PAD_BYTES, np.uint8)
        n = rows.shape[2] // element_bytes(code)
        g, x, y, o = rows[t, 0], rows[t, 1], rows[t, 2], rows[t, 3]
        for _ in range(repeats):
            smooth_l1_rows.smooth_l1_row(code, g, 0, x, 0, y, 0, o, 0, n, factor, mode, scale,
                                         True, False, pad)


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _gelu_rows(rows, use_tanh, tail, repeats):
    """Each thread computes its own float32 row of GELU backward (`gelu_rows.gelu_row`)
    `repeats` times: rows[t] holds thread t's gradOutput, self and output (uint8)."""
    for t in prange(rows.shape[0]):
        pad = np.empty(gelu_rows.PAD_BYTES, np.uint8)
        g, x, o = rows[t, 0], rows[t, 1], rows[t, 2]
        for _ in range(repeats):
            gelu_rows.gelu_row(x, 0, g, 0, o, 0, rows.shape[2] // 4, use_tanh, tail, pad,
                               PREFETCH_BYTES)


def _rows(dtype, inputs: int, spread: str = "normal") -> np.ndarray:
    """uint8 [THREADS, inputs + 1, ROW_ELEMENTS elements of `dtype`]: each thread's input
    rows drawn as the cases' (seed k for input k; self, input 1, from `spread`), its
    output row zero."""
    rows = np.zeros((THREADS, inputs + 1, ROW_ELEMENTS * np.dtype(dtype).itemsize), np.uint8)
    for k in range(inputs):
        values = host_data((ROW_ELEMENTS,), dtype, k, spread if k == 1 else "normal")
        rows[:, k] = values.view(np.uint8)
    return rows


def _in_cache(run: Callable[[int], None], rows: np.ndarray) -> InCache:
    """The compute probe running `run(ROW_REPEATS)` over `rows`."""
    return InCache(lambda: run(ROW_REPEATS), THREADS * ROW_ELEMENTS * ROW_REPEATS, rows)


def loss_rows_in_cache(dtype, beta: float, scale: float) -> InCache:
    """Our SmoothL1 (beta; 0 is L1) rows of `dtype` with `scale`, a full gradOut, on THREADS
    threads with their operands in cache: a compute floor with no call's fixed costs."""
    factor, mode = smooth_l1_rows.slope_factor(beta)
    rows, code = _rows(dtype, 3), CODES[np.dtype(dtype)]
    return _in_cache(lambda repeats: _loss_rows(code, rows, factor, mode, np.float32(scale),
                                                repeats), rows)


def gelu_rows_in_cache(approximate: str, spread: str) -> InCache:
    """Our float32 GELU backward rows (`approximate` "none" or "tanh", self from `spread`)
    on THREADS threads with their operands in cache."""
    use_tanh = approximate == "tanh"
    rows, tail = _rows(np.float32, 2, spread), gelu_rows.negative_tail(bits.F32, use_tanh)
    return _in_cache(lambda repeats: _gelu_rows(rows, use_tanh, tail, repeats), rows)
