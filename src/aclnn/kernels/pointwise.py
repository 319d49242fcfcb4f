"""Fused, multithreaded pointwise kernels over strided and broadcast operands.

Every kernel makes one pass, computes in float32 and stores the result rounded to the
output dtype (round-to-nearest-even). Two kinds of kernel:

- flat: every operand contiguous and of one dtype (float32, or float16/bfloat16 as typed
  16-bit views, see `typed`): the rows of `smooth_l1_rows` and `gelu_rows`, 16 lanes
  at a time with no staging, large outputs stored non-temporally (`_streams`); a call of
  at most one block runs its row on the calling thread (`smooth_l1_block`, `gelu_block`).
- tiled: anything else. The iteration space is coalesced to `MAX_RANK` dims and cut into
  tiles (rows along dim MAX_RANK-2 by columns along the innermost dim), handed out in up
  to RUNS runs that each allocate their float32 work area once. A tile row of an operand
  is used where it lies when it is contiguous float32; otherwise it is loaded from its
  native dtype through its strides (stride 0 on broadcast dims, no copies) into the work
  area, and a transposed operand is staged there a tile at a time. SmoothL1/L1 rows of
  one 16-bit dtype throughout are computed in that dtype, their operands gathered or
  staged as they are (see `_row_code`). The row is computed, then stored. An operand
  travels as the uint8 buffer of its allocation plus a row of `meta`: [element code, byte
  offset of the first element, byte strides of the MAX_RANK dims]; since the element code
  is a runtime value, one kernel serves every dtype mix, compiled once per operator (the
  type of its row parameters picks the rows, see `_tile`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import ml_dtypes
import numba
import numpy as np
from numba import njit, prange
from numba.extending import overload

from . import lookup
from .bits import (
    BF16,
    CACHE_LINE_BYTES,
    F16,
    F32,
    STREAM_BYTES,
    copy_span16,
    cpu_vendor,
    element_bytes,
    line_aligned_floats,
    load_as_f32,
    load_span,
    store_f32,
    store_fence,
    store_span,
)
from .gelu_rows import BLOCK as GELU_BLOCK
from .gelu_rows import PAD_BYTES as GELU_PAD
from .gelu_rows import gelu_block, gelu_flat, gelu_row, negative_tail
from .lanes import prefetch_block_rows, transpose_x16
from .launch import launch
from .layout import MAX_RANK, coalesce
from .smooth_l1_rows import BLOCK as SMOOTH_L1_BLOCK
from .smooth_l1_rows import PAD_BYTES as SMOOTH_L1_PAD
from .smooth_l1_rows import (
    slope_factor,
    smooth_l1_block,
    smooth_l1_flat,
    smooth_l1_row,
)
from .typed import VIEW_DTYPE

CHUNK = 4096  # the widest tile when no operand is staged (see `_tile_shape`)
ROWS_TILE_ELEMENTS = 65536  # elements per tile of whole rows (see `_tile_shape`)
BLOCK = 16  # the side of the blocks `transpose_x16` turns
STAGE_AHEAD = 4  # block columns the staging prefetches ahead (see `_stage`)
STAGE_PREFETCHES = cpu_vendor() != "GenuineIntel"  # whether it does (see `_stage`)
STAGED_COLS = 4096  # the widest tile when an operand is staged (see `_tile_shape`)
STAGED_TILE_BYTES = 2 << 20  # bytes per such tile, staged in the rows' dtype
BAND_TILES = 2  # column tiles per band of tall tiles (see `_tile_span`)
RUNS = 64  # the tiled kernel's parallel work items
_INNER = 2 + MAX_RANK - 1  # meta column of the innermost byte stride


@dataclass(frozen=True)
class StridedOperand:
    """One operand: its allocation's bytes, element code, first-element byte offset, and
    byte strides over the iteration shape (0 on broadcast dims)."""

    buffer: np.ndarray
    code: int
    byte_offset: int
    byte_strides: tuple[int, ...]


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _chunk_base(meta, k, shape, row, start):
    """Byte offset of element (row, start) of operand k; `row` indexes the outer dims."""
    offset = meta[k, 1] + start * meta[k, _INNER]
    for d in range(MAX_RANK - 2, -1, -1):
        if row == 0:  # the outer indices left are all 0 (spares the divisions)
            break
        size = shape[d]
        offset += (row % size) * meta[k, 2 + d]
        row //= size
    return offset


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _tile_count(shape, tile_rows, tile_cols):
    """Tiles of tile_rows (along dim MAX_RANK-2) x tile_cols (innermost) elements."""
    outer = 1
    for d in range(MAX_RANK - 2):
        outer *= shape[d]
    mid_tiles = (shape[MAX_RANK - 2] + tile_rows - 1) // tile_rows
    col_tiles = (shape[MAX_RANK - 1] + tile_cols - 1) // tile_cols
    return outer * mid_tiles * col_tiles, mid_tiles, col_tiles


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _tile_span(shape, mid_tiles, col_tiles, tile_rows, tile_cols, c):
    """Tile c: (first row over the outer dims, row count, first column, column count).

    Single-row tiles go in row order. Taller tiles go down bands of BAND_TILES column
    tiles (row order too where the rows fit one tile), every row of a band before the
    next band: a transposed operand is then read along a few hundred of its own rows at a
    time, each front to back, instead of a cache line of every one of its rows per row of
    tiles (10-15 % faster on 4096 x 4096 float32)."""
    per_outer = mid_tiles * col_tiles
    outer, c = c // per_outer, c % per_outer
    band = col_tiles if tile_rows == 1 else min(col_tiles, BAND_TILES)
    first_col_tile = (c // (mid_tiles * band)) * band
    width = min(band, col_tiles - first_col_tile)  # the last band may be narrower
    c -= first_col_tile * mid_tiles
    mid_tile, col_tile = c // width, first_col_tile + c % width
    first_mid = mid_tile * tile_rows
    rows = min(tile_rows, shape[MAX_RANK - 2] - first_mid)
    start = col_tile * tile_cols
    cols = min(tile_cols, shape[MAX_RANK - 1] - start)
    return outer * shape[MAX_RANK - 2] + first_mid, rows, start, cols


_MID = 2 + MAX_RANK - 2  # meta column of the byte stride between the rows of a tile


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _strides_past_line(meta, k):
    """Whether operand k jumps more than a cache line between neighbouring columns."""
    return abs(meta[k, _INNER]) > CACHE_LINE_BYTES


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _in_place(meta, k, row_code):
    """Whether operand k's tile rows are contiguous in the rows' dtype, used where they
    lie."""
    return meta[k, 0] == row_code and meta[k, _INNER] == element_bytes(row_code)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _stage(buf, code, base, inner, mid, rows, n, work_bytes, at, pitch, row_code):
    """Read a tile column by column - each column is a run along the operand's own rows,
    so every cache line fetched is used whole - into the rows of `pitch` bytes from byte
    `at` of `work_bytes`, in the rows' dtype (see `_row_code`). Where the operand is
    contiguous along those rows, each BLOCK columns go as BLOCK x BLOCK blocks transposed
    in registers, down the tile's rows in groups of BLOCK, each group that starts a cache
    line of the column first asking for the same lines STAGE_AHEAD block columns on, into
    the outer caches (`prefetch_block_rows`), except on Intel CPUs (STAGE_PREFETCHES, see
    below); what the blocks leave (the last columns and
    rows) is read one element at a time. Rows of self a power of two apart put a block's
    16 lines in one set of an 8-way L1 (and its lines in few sets of L2): lines asked for
    into L1 are pushed out before they are read. On a Zen 4 EPYC (1 MiB L2), 4096 x 4096
    with self transposed, alternating in one process, rate against the contiguous call:
    float32 0.62-0.65 prefetching into L2 4 blocks ahead (3: 0.65, 6: 0.63, 8: 0.62, 16:
    0.60, 2: 0.58) against 0.48-0.55 asking non-temporally (into L1) for the next block's
    and 0.50 into L1 4 ahead; float16 0.57-0.60 against 0.47-0.49; built for AVX2, float32
    0.60 against 0.49, float16 0.57 against 0.43; staging alone (float32, no rows) 5.1-5.5
    ms against 6.7. The conflicts still cost: staging one tile in cache (one thread) took
    0.30-0.32 ns an element with rows 16384 bytes apart against 0.19-0.21 at 16448 or 16640,
    and the whole call ran at 0.68-0.75 of the contiguous one with sides of 4000 and 4160.
    Loading a block's rows whole, one after the other (all pieces of a row before the next
    row's), and for 16-bit rows two blocks (a line of each row) per transpose took that to
    0.22 ns (against 0.30) and, float16 rows 8192 bytes apart, to 0.14 (against 0.18), but
    the calls from memory ran within noise of these (0.58-0.67 against 0.56-0.65, both ISA
    levels): not taken; nor tiles of 1 or 4 MiB (0.64-0.67 against 0.59-0.66). On a Zen 1
    EPYC (32 KiB 8-way L1), staging 16M float16 alone: rows of self 8192 bytes apart took
    one thread 4.6 ms in cache against 2.1 at 8256 bytes apart (from memory 8.8 against
    8.1); the non-temporal prefetch of the next block's lines took one thread 1.2-1.3x the
    time without it at 8192 bytes apart and 0.6-0.8x at 8224, two threads 0.99-1.23x and
    0.65-0.84x; not taken either: each row's 512-byte run copied to a padded buffer first
    (1.07-1.15x), two blocks per call with each row's whole line loaded at once (no
    change). On a Zen 3 EPYC (AVX2 only, 512 KiB 8-way L2, huge pages granted), 4096 x
    4096 float32: a probe fetching the staging's lines alone, in its order, took 7.6-8.9
    ms with this prefetch and 6.1-7.1 ms with none (sequential reading 3.4-4.5; 1024- and
    2048-byte runs along self's rows, no prefetch, 4.2-5.4 and 3.6-4.4); through the
    benchmark, two processes of each alternating, the calls ran at 0.42-0.48 (float32) and
    0.47-0.49 (float16) of the contiguous call's rate with it, 0.49-0.52 and 0.53-0.54
    with none: short of the target either way, and the Zen 4 figures above never timed
    the staging without a prefetch, so it stays. On a Zen 5 EPYC (float16, four processes,
    alternating in each) the calls ran within noise of each other with the prefetch 2, 4
    or 8 block columns ahead or none (0.72-0.80 of the contiguous call's rate). On an Intel
    Xeon (2026-12-03, alternating in one process on the same buffers) 0, 1 or 2 block
    columns ahead ran 1.03-1.09x as fast as 4 (float16 0.55-0.59 against 0.52-0.56,
    float32 0.50-0.55 against 0.48-0.50), 8 and 16 no faster than 4, and none at all
    1.00-1.21x as fast as 4 in every round of seven runs (built for AVX-512 float16 0.47-0.54
    of the contiguous call's rate against 0.46-0.48, float32 0.48-0.57 against 0.46-0.52;
    for AVX2 float16 0.47-0.56 against 0.47-0.51, float32 0.56-0.57 against 0.54-0.57):
    Intel CPUs stage without it, the Zen EPYCs keep 4 (the Zen 4 ran slower with 2, and
    on 2026-12-04 slower without: through the benchmark built for AVX-512, two runs of
    each in turn, float32 0.44-0.62 of the contiguous call's rate against 0.57-0.67 with
    it, float16 0.44-0.45 against 0.46-0.57). There
    (float32, AVX-512) the staging alone (no rows) took 8.4-8.6 ms without the prefetch and
    9.3-10.4 with it, where fetching the same lines in the same order (one word of each,
    `benchmarks.probe`) took 4.1-4.4 and the staging with every block stored to one small
    area (a probe, wrong results) 6.3-6.8 (the contiguous call 8.1-8.7); in another run the
    rows alone (no staging) took 7.0-7.2, the call 14.3-14.9, the two added (the
    contiguous call 7.5-7.8). Asking for each block
    column's 16 rows whole, one row after the other, 1, 2 or 4 block columns ahead: no
    faster than none; reading them so (a byte of each line, this block column's or the
    next's, before its transposes): slower (0.42-0.44 of the contiguous call's rate
    against 0.47); asking for the first two lines of each of a later block column's runs
    alone (2, 4 or 8 block columns ahead, so that the L2 streamer might fetch the rest):
    0.54-0.57 against 0.54-0.56. The staging alone took as long per element with self
    16 MiB (side 2048) as with 64 MiB: a pointer chase there took 143-184 ns a line in
    32-512 MiB and 40 ns within 8 MiB, so both come from memory (this VM's share of L3
    is small)."""
    size = element_bytes(row_code)
    grouped = rows - rows % BLOCK if mid == element_bytes(code) else 0
    blocks = n // BLOCK
    for b in range(blocks if grouped else 0):
        for q in range(0, grouped, BLOCK):
            if STAGE_PREFETCHES and (q * mid) % CACHE_LINE_BYTES == 0:  # a later column's lines
                prefetch_block_rows(buf, base + BLOCK * (b + STAGE_AHEAD) * inner + mid * q,
                                    inner)
            transpose_x16(code, row_code, buf, base + BLOCK * b * inner + mid * q, inner,
                          work_bytes, at + q * pitch + size * BLOCK * b, pitch)
    for j in range(n):
        first = 0 if j >= BLOCK * blocks else grouped
        column, cell = base + j * inner + first * mid, at + first * pitch + size * j
        if row_code == F32:
            for r in range(rows - first):
                store_f32(work_bytes, cell + r * pitch, load_as_f32(buf, code, column + r * mid))
        else:
            copy_span16(buf, column, mid, work_bytes, cell, pitch, rows - first)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _pitch(tile_cols, row_code):
    """Bytes from one row of a staged tile to the next: the row in whole cache lines (so
    every staged row starts on one, see `_line_floats`) and a line more, so a column's
    elements fall in different cache sets (a row of 4096 floats would put them all in
    one)."""
    return 4 * _line_floats(element_bytes(row_code) * tile_cols) + CACHE_LINE_BYTES


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _line_floats(nbytes):
    """The floats of the whole cache lines that hold nbytes: work areas are sized so, so
    that each starts on a line of the run's work array (itself on one, see
    `bits.line_aligned_floats`)."""
    return -(-nbytes // CACHE_LINE_BYTES) * (CACHE_LINE_BYTES // 4)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _work_areas(meta, tile_rows, tile_cols, row_code):
    """Where each operand's float32 work area starts in a run's work array (the last entry
    is the array's size), each on a cache line: a tile for a staged input, a row for an
    operand converted row by row, nothing for one used in place (the last operand is the
    output, never staged)."""
    starts = np.zeros(meta.shape[0] + 1, np.int64)
    for k in range(meta.shape[0]):
        if _in_place(meta, k, row_code):
            size = 0
        elif _strides_past_line(meta, k) and k < meta.shape[0] - 1:
            size = _line_floats(tile_rows * _pitch(tile_cols, row_code))
        else:
            size = _line_floats(4 * tile_cols)
        starts[k + 1] = starts[k] + size
    return starts


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _locate_rows(bufs, meta, k, base, rows, n, work_bytes, tile_cols, area, row_code):
    """Where the tile's rows of operand k are read (or, for the output, computed) in the
    rows' dtype: (1 if in the work area else 0 for its own buffer, byte offset of its first
    row, byte step between rows). Contiguous rows of that dtype lie where they are; a
    transposed input is staged whole into its work area (see `_work_areas`, starting at
    work[area]); anything else goes through a row of the work area (step 0): inputs put
    into it by `_convert_rows`, the output stored from it by `_flush_row`."""
    if _in_place(meta, k, row_code):
        return 0, base, meta[k, _MID]
    if _strides_past_line(meta, k) and k < meta.shape[0] - 1:
        pitch = _pitch(tile_cols, row_code)
        _stage(bufs[k], meta[k, 0], base, meta[k, _INNER], meta[k, _MID], rows, n, work_bytes,
               4 * area, pitch, row_code)
        return 1, 4 * area, pitch
    return 1, 4 * area, 0


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _convert_rows(bufs, meta, place, r, n, work, work_bytes, areas, row_code):
    """Row r of each input that is read from a row of its work area, put there in the rows'
    dtype: converted to float32, or gathered as it is for 16-bit rows."""
    for k in range(meta.shape[0] - 1):
        if not _strides_past_line(meta, k) and not _in_place(meta, k, row_code):
            first = place[0, k] + r * meta[k, _MID]
            if row_code == F32:
                load_span(bufs[k], meta[k, 0], first, meta[k, _INNER], n, work, areas[k])
            else:
                copy_span16(bufs[k], first, meta[k, _INNER], work_bytes, 4 * areas[k], 2, n)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _flush_row(bufs, meta, place, r, n, work, work_bytes, areas, row_code):
    """Store row r of the output from its work area (nothing to do when computed in place)."""
    k = meta.shape[0] - 1
    if not _in_place(meta, k, row_code):
        first = place[0, k] + r * meta[k, _MID]
        if row_code == F32:
            store_span(bufs[k], meta[k, 0], first, meta[k, _INNER], n, work, areas[k])
        else:
            copy_span16(work_bytes, 4 * areas[k], 2, bufs[k], first, meta[k, _INNER], n)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _rows(bufs, work_bytes, place, k):
    """The buffer holding operand k's tile rows (see `_locate_rows`)."""
    return work_bytes if place[1, k] else bufs[k]


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _row_at(place, k, r):
    """The byte offset of row r of operand k's tile rows in `_rows`."""
    return place[2, k] + r * place[3, k]


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _streamed(o, place, k, r, streaming):
    """Whether row r of output k (in `o`) is stored non-temporally: the kernel streams, the
    row is computed in place and it starts on a cache line."""
    return streaming and place[1, k] == 0 and (
        o.ctypes.data + _row_at(place, k, r)) % CACHE_LINE_BYTES == 0


def _tile(params, bufs, meta, place, rows, n, work, work_bytes, areas, streaming, pad,
          row_code):
    """The rows of a tile, its operands located by `place`: SmoothL1 / L1 for params
    (factor, mode, scale) (see `smooth_l1_rows.slope_factor`), GELU for (use_tanh,
    tail) (see `gelu_rows.negative_tail`), told apart when the kernel is compiled (see the
    overload below); `row_code`: the dtype the rows are computed in (see `_row_code`). The
    SmoothL1 / L1 rows prefetch their inputs as the contiguous kernel's do, the GELU rows
    do not (see `lanes.PREFETCH_BYTES`)."""
    raise NotImplementedError("compiled code only")


@overload(_tile, inline="always", jit_options={"error_model": "numpy", "fastmath": {"contract"}})
def _tile_of(params, bufs, meta, place, rows, n, work, work_bytes, areas, streaming, pad,
             row_code):
    """The tile function for the type of `params`: bufs (gradOut, self, target, gradInput)
    row by row through `smooth_l1_rows.smooth_l1_row`, or (gradOutput, self, gradInput)
    through `gelu_rows.gelu_row`. The row buffers are picked once per tile and the
    byte view of the work area made once per run: picking them per row, or making the view
    per tile, cost 10-35 % on 256 x 256 in cache (reference counting)."""
    if len(params) == 3:
        def smooth_l1(params, bufs, meta, place, rows, n, work, work_bytes, areas, streaming,
                      pad, row_code):
            factor, mode, scale = params
            g, x = _rows(bufs, work_bytes, place, 0), _rows(bufs, work_bytes, place, 1)
            y, o = _rows(bufs, work_bytes, place, 2), _rows(bufs, work_bytes, place, 3)
            for r in range(rows):
                _convert_rows(bufs, meta, place, r, n, work, work_bytes, areas, row_code)
                smooth_l1_row(row_code, g, _row_at(place, 0, r), x, _row_at(place, 1, r), y,
                              _row_at(place, 2, r), o, _row_at(place, 3, r), n, factor, mode,
                              scale, True, _streamed(o, place, 3, r, streaming), pad)
                _flush_row(bufs, meta, place, r, n, work, work_bytes, areas, row_code)
        return smooth_l1

    def gelu(params, bufs, meta, place, rows, n, work, work_bytes, areas, streaming, pad,
             row_code):  # float32 rows only
        use_tanh, tail = params
        g, x = _rows(bufs, work_bytes, place, 0), _rows(bufs, work_bytes, place, 1)
        o = _rows(bufs, work_bytes, place, 2)
        for r in range(rows):
            _convert_rows(bufs, meta, place, r, n, work, work_bytes, areas, F32)
            gelu_row(x, _row_at(place, 1, r), g, _row_at(place, 0, r), o,
                     _row_at(place, 2, r), n, use_tanh, tail, pad, None,
                     _streamed(o, place, 2, r, streaming))
            _flush_row(bufs, meta, place, r, n, work, work_bytes, areas, F32)
    return gelu


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _tiled_backward(bufs, meta, shape, tile_rows, tile_cols, params, streaming, row_code):
    """bufs: the operands' buffers, the output last; params: the rows' (see `_tile`), computed
    in the dtype `row_code` (see `_row_code`). Each run of tiles allocates its work area
    and the rows' scratch (`pad`) once; per tile, `place` holds each operand's first
    element (byte offset) and where its rows are (see `_locate_rows`). Most of its compile
    time (66 s for float16 SmoothL1 on a 2 GHz Zen 1) is Numba's own: copying the inlined
    rows' IR, and its parallel passes over the loop body. With that body a function of its
    own, called once a run, it compiled in 44 s but ran 5-9 % slower with target [4096, 1]
    broadcast (float16 and float32, alternating in one process): not taken. Nor `_tile` as
    a function of its own, called once a tile: 41 s (GELU 33 s against 59), but 1.2-1.6x
    the time on 512 x 512 in cache (target [512, 1] and self transposed, float16 and
    float32, three processes of each alternating). Built without `parallel` it compiled
    in 38 s."""
    count, mid_tiles, col_tiles = _tile_count(shape, tile_rows, tile_cols)
    runs, areas = min(count, RUNS), _work_areas(meta, tile_rows, tile_cols, row_code)
    operands = meta.shape[0]
    for run in prange(runs):
        work = line_aligned_floats(areas[-1])
        work_bytes = work.view(np.uint8)
        pad = np.empty(max(GELU_PAD, SMOOTH_L1_PAD), np.uint8)
        place = np.empty((4, operands), np.int64)
        for c in range(run * count // runs, (run + 1) * count // runs):
            first, rows, start, n = _tile_span(shape, mid_tiles, col_tiles, tile_rows,
                                               tile_cols, c)
            for k in range(operands):
                place[0, k] = _chunk_base(meta, k, shape, first, start)
                place[1, k], place[2, k], place[3, k] = _locate_rows(
                    bufs, meta, k, place[0, k], rows, n, work_bytes, tile_cols, areas[k],
                    row_code)
            _tile(params, bufs, meta, place, rows, n, work, work_bytes, areas, streaming, pad,
                  row_code)
        if streaming:
            store_fence()


def _too_large_to_cache(nbytes: int) -> bool:
    """Whether an output of nbytes is stored non-temporally: it would not stay in the caches
    for a reader anyway (the tiled kernel then streams the rows that start on a cache
    line)."""
    return nbytes >= STREAM_BYTES


def _streams(out: np.ndarray) -> bool:
    """Whether a flat kernel stores `out` non-temporally: too large to cache and aligned to
    a cache line, as the streaming stores need."""
    return _too_large_to_cache(out.nbytes) and out.ctypes.data % CACHE_LINE_BYTES == 0


def _flat_view(op: StridedOperand, stride: int, size: int) -> np.ndarray | None:
    """The operand as a contiguous typed 1-D view, if its single stride is its itemsize."""
    dtype = VIEW_DTYPE[op.code]
    if stride != dtype.itemsize:
        return None
    return op.buffer[op.byte_offset: op.byte_offset + size * dtype.itemsize].view(dtype)


def _scalar_reader(op: StridedOperand):
    """A function reading the (broadcast) first element of `op` as a Python float."""
    dtype = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16}[op.code]
    view = op.buffer[op.byte_offset: op.byte_offset + np.dtype(dtype).itemsize].view(dtype)
    return lambda: float(view[0])


def _any_past_line(strides) -> bool:
    """Whether an operand jumps more than a cache line between neighbouring columns (the
    byte strides of each, innermost last): the tiled kernel then stages tiles."""
    return any(abs(s[-1]) > CACHE_LINE_BYTES for s in strides)


def _tile_shape(shape, strides, row_bytes: int, threads: int) -> tuple[int, int]:
    """Tiles of up to CHUNK columns by as many rows as make ROWS_TILE_ELEMENTS, cut
    shorter where there would be fewer tiles than `threads`. Each tile pays a fixed cost
    (locating every operand's first element and rows, 100-250 ns): with one row per tile,
    a broadcast target over [R, 64] float32 ran at 0.12-0.17 of the contiguous call's rate
    and over [R, 256] at 0.38-0.53 (4M elements, one thread); with rows grouped in tiles of
    4096 elements, at 0.82 and 1.05. Tiles of 65536 elements against 4096, alternating in
    one process, 2 threads, a target [R, 1] broadcast, rate against the contiguous call:
    4096 x 4096 float16 1.34 against 1.13, float32 1.05 against 0.86 (in fast memory),
    1024 x 1024 float16 (in cache) 0.95 against 0.79, 64 x 40000 float32 1.03 against 0.81,
    16384 x 64 float32 0.76 against 0.70; 262144 gained 0-2 % more, and would leave fewer
    tiles to share out.

    When an operand strides past a cache line along the innermost dim (a transposed view),
    it is staged, in tiles of up to STAGED_COLS columns, so the other operands still stream
    long runs (whole rows of 4096 lie end to end), and as many rows (a multiple of BLOCK) as
    fill STAGED_TILE_BYTES in the rows' dtype (`row_bytes` each), so the staged operand is
    read 512 bytes at a time along each of its rows, in float32 and 16-bit rows alike. On
    4096 x 4096 with self transposed, alternating calls in one process: float32 64 x 4096
    tiles ran at 0.61-0.78 of the contiguous call's rate where the earlier 16 x 256 ran at
    0.38-0.65 (32 x 4096: 0.51-0.54, 64 x 2048: 0.45-0.55); once the outputs were streamed,
    128 x 4096 ran at 0.71-0.73 where 64 x 4096 ran at 0.67-0.68 (192 x 4096: 0.73-0.75, 256
    x 4096 no faster); float16 256 x 4096 ran 1.10-1.15x as fast as 128 x 4096 at either
    ISA level. Staging and computing add up: float16 256 x 4096, staging alone 1.4-1.5 ms
    (its reads 0.9, its transposes and stores 0.65-0.7, whatever the tile's height), the
    rows alone 1.9-2.2, the call 3.8-4.1; the staged operand's reads slow down with shorter
    runs (64 and 128 bytes: 2.4-2.6 ms). No faster: staging the next tile 16 x 16 blocks at
    a time between pieces of this tile's rows (0.66-0.67 against 0.69-0.70), a staged
    operand in huge pages, each 16 x 16 block computed from registers as it is transposed
    (0.44-0.55: the other operands are then read 64 bytes per row at a time), software
    prefetch of the staged operand's lines (beside the staging's non-temporal one of then:
    1-8 blocks ahead into any cache level, or the next tile's during this tile's rows;
    see `_stage` for the one it has now), and tiles of 16-64 rows by 4096 columns or 64-128
    rows by 512-1024 columns (a staging area that stays in L2 gives the other operands
    short rows, which cost more than the stores save: float32 0.43-0.63 against 0.56-0.67,
    float16 0.27-0.50 against 0.50-0.56). With the lane transposes: 4 MiB tiles (float16
    512 rows) took 0.94-0.97 of the time of 2 MiB ones in five runs at both ISA levels,
    not taken: two of them per thread outgrow a laptop core's share of L3, and the staged
    rows would then come back from memory; tile heights that leave the threads unequal
    tile counts (192 or 384 rows on 4096) ran 1.05-1.10x as long as 256.

    Where the rest of the time goes (float16 4096 x 4096, AVX-512 build): the staged
    tile's stores. With them sent to one small area instead (wrong results, a probe), the
    call ran at 0.77-0.79 of the contiguous call's rate in slow memory and 0.93 in fast,
    against 0.68-0.69 and 0.65; with the rows reading one staged row instead, no faster.
    No faster either: asking for the staged lines ahead of their stores (`prefetchw`, 2
    or 4 block columns ahead: 0.55-0.68 against 0.60-0.70), for the staged operand's lines
    of the next tile while staging this one (into L1, L2 or L3: 0.64 against 0.70 in 2 MiB
    tiles, 0.60-0.63 against 0.65 in 1 MiB ones), the two threads' tiles half a tile out of
    phase, the two threads on the two halves of the same rows (256 x 2048 tiles, one band
    of columns each: 0.67 against 0.69-0.70),
    tiles of 256 rows by 512-2048 columns whose rows prefetch the next rows (0.47-0.58
    against 0.64), 16-row tiles with the staged operand's next 512 bytes of each row asked
    for ahead (0.27), and a staged tile laid out block column by block column, so that its
    stores run in order (alternating in one process: float16 0.68-0.74 against 0.69-0.70,
    float32 0.70-0.77 against 0.74-0.77). 4 MiB tiles again: 0.68-0.69 against 0.66-0.68.
    No faster either (float16, alternating in one process, 10 ms pause before each call):
    1 MiB tiles of 2048 columns, alone or with the rows' inputs prefetched non-temporally
    so that the staged tile might stay in L2 (0.63-0.64 against 0.72-0.75); staging 512 KiB
    or 1 MiB tiles from a run of 512 or 1024 bytes along each of self's rows read ahead
    into the caches for two to eight of them (0.50-0.70 against 0.63-0.74); every operand
    in 2 MiB pages (1.00-1.04x the time). On a Zen 1 EPYC (AVX2, 512 KiB of L2 a core, 8
    MiB of L3), through the benchmark: 0.45-0.53 with these tiles, 0.38-0.52 with 512 KiB
    ones (4096 or 1024 columns) and 1 MiB ones (4096 or 2048); the probe's bound there is
    0.73-0.90. There staging and rows add up (float16, two threads: the staging alone
    4.2-5.6 ms, the rows alone 6.5-6.7 (5.9 with their inputs prefetched 8192 bytes ahead),
    the call 12.5-14.3 against 5.9-6.3 contiguous), and staging one block column of the
    next tile after each row of this one (two work areas) took 1.1x the time of staging and
    computing in turn (13.9 against 12.4 ms; one thread 22.0-25.7 against 19.4-22.9). On
    a Zen 3 EPYC (AVX2, 512 KiB of L2 a core, 32 MiB of L3; no huge pages in its VM), through
    the benchmark: 0.47-0.60 with these tiles (float32 and float16), 0.50-0.51 with 4 MiB and
    8 MiB ones, no better; a memory-only probe (self read a tile at a time, the others
    streamed, float32) ran at 0.66-0.73 of the streamed triad with these tiles, 0.78-0.80
    with 256 x 4096, 0.81-0.83 with 512 and 1024 x 4096, 0.68-0.74 with 512 x 2048 down to
    2048 x 256: longer runs along self's rows help its reads, but not a call that also
    stores and reads back the taller staged tile. On a Zen 5 EPYC (1 MiB L2 a core, 32 MiB
    L3, a streamed triad of 42-82 GB/s from one run to the next), float16 4096 x 4096,
    alternating in one process: these tiles 0.69-0.75 of the contiguous call's rate, 1 MiB
    ones 0.66, 4 MiB 0.68, 8 MiB 0.65, 2 MiB of 2048 columns 0.59, of 1024 columns 0.56-0.60;
    the staging alone 1.16-1.24 ms and the rows alone 2.24-2.40 add up to the call's
    3.46-3.67 (contiguous 2.60-2.80). On one thread the staging alone took 3.25 ms and the
    rows alone 3.49 (contiguous 3.95), so one thread staging for another computing rows
    could not beat the two taking tiles in turn. Nor on a Zen 4 EPYC (2026-12-04): one
    thread staged 16M float32 (float16) in 7.05 (4.5-4.7) ms and ran the contiguous call
    in 8.8-9.7 (6.0), where two threads ran it in 4.7-8.1 (3.2-4.6). On an Intel Xeon (2
    MiB L2 a core, 2026-12-03), 4096 x 4096 alternating in one process on the same
    buffers, 1 MiB and 512 KiB tiles ran 1.02-1.05x as fast as these in float32 (0.50-0.52
    of the contiguous call's rate against 0.48-0.51) and 1.03-1.10x in float16 (0.56-0.60
    against 0.53-0.55),
    4 MiB ones 0.8x; self in 2 MiB pages no faster (0.57-0.59 against 0.55-0.58); float32
    2 MiB tiles of 1024 or 512 columns (self read in runs of 2 or 4 KiB) or 1 MiB ones of
    512 or 256, 0.52-0.56 against 0.52-0.54; the next tile's lines of self asked for into
    L2 during this tile's rows, spread over them (2 MiB tiles, 1 MiB of 2048 columns, 512
    KiB of 1024), 0.54-0.56 against 0.56-0.57 without: short of the target either way,
    not taken. There a memory-only probe (uint32 words, no prefetch) reading self a tile's
    runs at a time and then streaming the tile's rows of the others ran at 0.81-0.86 of
    the contiguous call's rate with runs of 512 bytes, 0.89-0.91 with 1024 and 0.93-0.98
    with 2048, and slower with the next tile's runs read among this tile's rows (0.78-0.81,
    0.83-0.86, 0.87-0.90): longer runs help the reads, but the staging is what costs (see
    `_stage`). Staging and rows still add up there (alternating in one process, float32):
    the staging alone 6.1-6.5 ms in 2 MiB, 1 MiB or 512 KiB tiles of 4096 columns, the
    rows alone (the staging skipped, its work area never written) 6.7-6.9, the calls
    12.4-13.4, the contiguous call 7.2-7.7; so the rows alone take 0.9 of the contiguous
    call, and even staging at the speed of fetching its lines (3.2-3.7 ms, the
    benchmark's probe) would leave the call at 0.68-0.78 of it. There again (2026-12-06,
    the work area on a cache line, see `bits.line_aligned_floats`), with this design
    written in C (AVX-512 intrinsics, OpenMP, huge pages) beside a contiguous kernel, 4096
    x 4096 float32 ran at 0.41-0.59 of its rate over tile shapes from 32 x 4096 to 1024 x
    1024 (0.52-0.59 at 64-128 rows by 2048-4096 columns); with the staged tile's stores
    sent to one small area (wrong results) 0.60-0.74, and without the transposes too (the
    memory-only probe) 0.72-0.93. In this kernel's order, the transposes with the others
    streamed but no staged tile kept ran at 0.72-0.80 (float32 and float16; the
    benchmark's transposing probe), so the staged tile's stores and reloads are what the
    target lacks here. No faster in C: two work areas, this tile's rows interleaved with
    the next tile's staging (0.49-0.55); one thread half a tile out of phase with the other
    (0.54-0.58); each block column's lines copied to an area in L1 before their transposes
    (0.45-0.59); the staged tile laid out block column by block column (within noise);
    strips of 16 or 32 rows computed from the transposed registers, no staged tile
    (0.25-0.39); the work area in a 2 MiB page (0.26-0.51, by its offset). This kernel with
    tiles of 2 MiB (4096 columns), 1 MiB (4096) and 512 KiB (2048), four processes of each
    in turn: 0.51-0.56 of the contiguous call's rate alike. On the Zen 3 EPYC again
    (2026-12-06, AVX2), this design's staging with no compute at all (the benchmark's
    swept probe: self's tiles transposed into a staged tile and read back into the output,
    over 15 tile shapes, 16 to 512 rows by a cache line of columns, 1024 or all 4096) at
    its fastest shape bounded the call at 0.52-0.59 (float32) and 0.57-0.62 (float16) of
    the contiguous call's rate, three runs; the call reached 0.81-0.95 of that probe's
    speed. No tile shape reaches the target there.

    Staged tiles are cut shorter where there would be fewer of them than `threads` (each
    tile is one thread's work): 1024 x 1024 float16 with self transposed, one tile of
    1024 rows, took 0.15 ms on one thread, as two of 512 rows 0.08-0.09 ms."""
    if not _any_past_line(strides):
        cols = max(1, min(shape[-1], CHUNK))
        rows = _rows_for_threads(shape, cols, ROWS_TILE_ELEMENTS // cols, threads, 1)
        return max(1, min(shape[-2], rows)), CHUNK
    cols = min(shape[-1], STAGED_COLS)
    rows = max(BLOCK, STAGED_TILE_BYTES // (row_bytes * cols) // BLOCK * BLOCK)
    return min(_rows_for_threads(shape, cols, rows, threads, BLOCK), shape[-2]), cols


def _rows_for_threads(shape, cols: int, rows: int, threads: int, multiple: int) -> int:
    """`rows` cut (to a multiple of `multiple`, at least one) until tiles of rows x cols
    over `shape` number at least `threads`, counting tiles side by side and over the outer
    dims (each tile is one thread's work)."""
    across = max(1, math.prod(shape[:-2]) * -(-shape[-1] // cols))  # tiles side by side
    shares = -(-threads // across)  # row tiles wanted so that every thread has one
    if shares > 1:
        rows = min(rows, max(multiple, -(-shape[-2] // shares // multiple) * multiple))
    return rows


def _row_code(operands: list[StridedOperand], strides, params: tuple) -> int:
    """The dtype the tiled kernel computes rows in: float16 or bfloat16 for SmoothL1/L1 when
    every operand has that dtype (the row code converts in registers, as the flat kernel
    does; a broadcast or strided row is gathered as it is, a transposed one staged as it
    is: on 4096 x 4096 float16 with target [4096, 1] the rows converted to float32 and
    back ran at 0.60 of the contiguous call's rate, with self transposed at 0.35);
    float32 otherwise."""
    codes = {op.code for op in operands}
    if len(params) == 3 and len(codes) == 1:
        return codes.pop()
    return F32


class PointwiseLaunch:
    """A prepared kernel call: layout coalesced once (phase 1), run any number of times.

    When every operand has one dtype and the coalesced layout is a single contiguous run
    (the common case), `flat` gives a call of a typed kernel that needs no staging buffers
    and whether that kernel is parallel (a serial one runs on the calling thread, past
    `launch`); otherwise the tiled kernel serves any strides, broadcasts and dtype mix;
    `params` are its row function's (see `_tile`).
    """

    def __init__(self, shape, operands: list[StridedOperand], params: tuple, flat=None):
        iter_shape, strides = coalesce(shape, [op.byte_strides for op in operands])
        found = None
        if flat is not None and len({op.code for op in operands}) == 1 and all(
                size == 1 for size in iter_shape[:-1]):
            views = [_flat_view(op, s[-1], iter_shape[-1]) for op, s in zip(operands, strides)]
            found = flat(views, [s[-1] for s in strides], operands)
        if found is not None:
            self._run, self._parallel = found
        else:
            meta = np.array([[op.code, op.byte_offset, *s] for op, s in zip(operands, strides)],
                            dtype=np.int64)
            out_bytes = math.prod(iter_shape) * VIEW_DTYPE[operands[-1].code].itemsize
            row_code = _row_code(operands, strides, params)
            args = (tuple(op.buffer for op in operands), meta, np.array(iter_shape, np.int64),
                    *_tile_shape(iter_shape, strides, element_bytes(row_code),
                                 numba.get_num_threads()), params,
                    _too_large_to_cache(out_bytes), row_code)
            self._run, self._parallel = (lambda: _tiled_backward(*args)), True

    def __call__(self) -> None:
        if self._parallel:
            launch(self._run)
        else:
            self._run()


def smooth_l1_backward(shape, grad, x, target, out, beta: float, scale: float) -> PointwiseLaunch:
    """out = grad * (d/beta if |d| < beta else sign(d)) * scale, d = x - target (a beta
    beyond float32's range is inf: every finite d is then inside it, with slope 0)."""
    with np.errstate(over="ignore"):
        beta, scale = np.float32(beta), np.float32(scale)
    factor, mode = slope_factor(beta)

    def flat(views, strides, operands):
        g, xs, ys, o = views
        if xs is None or ys is None or o is None:
            return None
        streaming = _streams(o)
        if g is None and strides[0] != 0:
            return None
        one_block = o.size <= SMOOTH_L1_BLOCK and not streaming  # see `smooth_l1_block`
        kernel, last = (smooth_l1_block, ()) if one_block else (smooth_l1_flat, (streaming,))
        if g is not None:
            run = functools.partial(kernel, g, xs, ys, o, factor, mode, scale, *last)
        else:
            read_grad = _scalar_reader(operands[0])

            def run() -> None:  # the scalar gradient is read when the call runs
                kernel(None, xs, ys, o, factor, mode, np.float32(read_grad() * float(scale)),
                       *last)
        return run, not one_block

    return PointwiseLaunch(shape, [grad, x, target, out], (factor, mode, scale), flat)


def l1_backward(shape, grad, x, target, out, scale: float) -> PointwiseLaunch:
    """out = grad * sign(x - target) * scale: the SmoothL1 kernel with beta = 0."""
    return smooth_l1_backward(shape, grad, x, target, out, 0.0, scale)


@functools.cache
def _derivative_table(code: int, use_tanh: bool) -> lookup.Factors:
    """GELU'(x) exactly as the float32 kernel computes it, for every value x of the 16-bit
    dtype `code`, by its bits (see `lookup`), as that dtype's lookup takes them
    (`lookup.factors`)."""
    wide = {F16: np.float16, BF16: ml_dtypes.bfloat16}[code]
    x = lookup.all_values(VIEW_DTYPE[code]).view(wide).astype(np.float32)
    table = np.empty(lookup.TABLE_SIZE, np.float32)
    gelu_flat(np.ones_like(x), x, table, use_tanh, negative_tail(code, use_tanh), False)
    return lookup.factors(table, float16=code == F16)


def gelu_backward(shape, grad, x, out, use_tanh: bool) -> PointwiseLaunch:
    """out = grad * GELU'(x), exact (erf) or tanh-approximated, by the branch-free float32
    formulas of `gelu_rows`. Contiguous float16/bfloat16 operands look GELU' up in a table
    of the kernel's own values (`lookup`): the same bits, at memory speed."""
    use_tanh = bool(use_tanh)
    tail = negative_tail(out.code, use_tanh)

    def flat(views, strides, operands):
        if any(v is None for v in views):
            return None
        g, xs, o = views
        code = operands[0].code
        if code != F32:
            factors = _derivative_table(code, use_tanh)
            return (lambda: lookup.scaled_lookup(g, xs, o, *factors)), True
        streaming = _streams(o)
        if o.size <= GELU_BLOCK and not streaming:  # see `gelu_rows.gelu_block`
            return functools.partial(gelu_block, g, xs, o, use_tanh, tail), False
        return functools.partial(gelu_flat, g, xs, o, use_tanh, tail, streaming), True

    return PointwiseLaunch(shape, [grad, x, out], (use_tanh, tail), flat)
