"""The fused AvgPool2d backward kernel: parallel over the N*C planes.

Every divisor is a product of a per-row and a per-column factor (the padded extents, the
clipped extents, or the override), so each plane is computed separably, row by row, with
buffers of a row or of output-plane size, allocated once per run of planes:
  q[oh, ow]  = the scaled gradient of window (oh, ow), as `Scaling` says: gradOutput divided
               by the factors (one float32 division), or multiplied by the float32
               reciprocal of their product (optionally in float16 arithmetic, as a float16
               mean matrix is), then the cubeMathType rounding, then times a weight (the
               divisors and reciprocals are computed once per call)
  t[oh, iw]  = sum of q[oh, ow] over the output columns whose window covers iw: for the
               columns iw = sW*m + rho those are m + first[rho] .. m + last[rho], so each
               residue rho sums a few shifted runs of the row of q (zero columns around it
               stand for the windows off the edge), then the residues are interleaved
  out[ih, :] = sum of t[oh, :] over the output rows whose window covers ih (vectorised)
and each finished row is stored into gradInput through its strides, rounded once to its
dtype, streamed where that pays (`bits.store_f32_row`: float32 rows of whole cache
lines; `lanes.store_f16_row`: the whole lines of longer float16 rows, one by one where
that measured faster, `F16_ROWS_ALONE`, else of groups of a contiguous plane's rows,
`store_group`). A column stride of 2 (the common one)
builds its rows of t in registers, both residues' sums interleaved by shuffles. Rows of q
and t are computed when the first input row that needs them comes, so the
stores of finished rows overlap the computing of the next ones (computing a plane's q and
t first and then storing its rows took 6.2-6.9 ms instead of 4.8-5.6 on (32, 64, 112, 112)
float32, k2s2p0 and k3s2p1, on an AVX2 machine). An input row covered by one row of
windows is stored straight from its row of t, and no value is rounded to float16 twice:
float16 (32, 64, 112, 112) took 0.71-0.75 of the time in k2s2p0, 0.81-0.84 in k3s2p1
(AVX2, same bits). Rows of t in registers, rows covered by one row of windows streamed
straight from t in float32 and every float16 row streamed on an AVX-512 build, (32, 64,
112, 112), fraction of the time before, same bits (alternating in one process, AVX-512
CPU): float32 0.86-0.93 (k2s2p0) and 0.78-0.89 (k3s2p1) with either build; float16
0.64 / 0.75 built for AVX-512, 0.90 / 0.88 for AVX2; then the sums of k2s2p0 and k3s2p1
unrolled: k2s2p0 0.89-1.00, k3s2p1 0.80-0.92 (either build). Work per plane is O(OH*OW +
OH*W*ceil(kW/sW) + H*W*ceil(kH/sH)), all of it in contiguous runs that vectorise.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .bits import (
    F16,
    F32,
    cpu_vendor,
    line_aligned_floats,
    load_span,
    round_to_half,
    round_to_hf32,
    store_f32_row,
    store_fence,
    store_span,
)
from .lanes import LANES, LINE_VECTORS, VF, VI, array_data, splat, store_f16_row
from .launch import launch

EXACT, ROUND_FP16, ROUND_HF32 = 0, 1, 2  # how the scaled gradient is rounded (cubeMathType)
_ONE = np.float32(1)


class Scaling(NamedTuple):
    """How a window's gradient is scaled and the result stored.

    divide: q = g / (row * column factor), a true float32 division; otherwise
    q = g * float32(1 / (row * column factor)) (a reciprocal, as a mean matrix or
    AvgPool3DGrad's multiplier is), in float16 arithmetic when `half_mean` (the mean matrix
    and the Mul of a FLOAT16 graph). Then the `rounding` of the scaled gradient (the cube's
    input dtype), then q times `weight` (the cube's kernel weight, already in that dtype).
    `half_out`: the sums are rounded to float16 before the store (a float16 cube output).
    """

    divide: bool = True
    half_mean: bool = False
    rounding: int = EXACT
    weight: float = 1.0
    half_out: bool = False


# Float16 rows of a contiguous plane are stored this many bytes at a time or more where one
# vector does not fill a line (see `store_group`): built for AVX2, (32, 64, 112, 112) rows of
# 224 bytes, streamed 8192 bytes at a time, took 0.75-0.94 of the time of plain stores row
# by row in k2s2p0 and 0.77-0.83 in k3s2p1 (4096: 0.82-0.94; 32768 and whole planes:
# 0.84-0.90), where each row streamed alone took 1.35-1.5x. Rows of 4096 bytes streamed two
# at a time took 1.0-1.04x (no gain), rows of a group or longer are stored alone. Built for
# AVX-512 (rows streamed alone) or in float32, gathering them took 1.0-1.4x as long.
GROUP_BYTES = 8192
# Float16 rows are streamed one by one, not in groups, built for AVX-512 (a vector store
# fills a line) on AMD CPUs: on an AMD EPYC with AVX-512 groups took 1.0-1.4x as long. On an
# Intel Xeon with AVX-512 (2 cores, 2026-12-03), rows streamed alone took twice as long as
# groups: (32, 64, 112, 112) through the benchmark's call, alternating in one process,
# median ms k3s2p1 12.22 alone, 6.42 in groups, 6.28 stored plainly; k2s2p0 8.08, 5.24,
# 5.17. Other CPUs (not measured) take groups, as every AVX2 or NEON build does.
F16_ROWS_ALONE = LINE_VECTORS and cpu_vendor() == "AuthenticAMD"
PLANE_CHUNKS = 64  # the planes are shared out in this many runs, each with its own buffers
_U1 = np.uint64(1)  # unsigned index arithmetic (see the plane loop)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def axis_plan(out_size, in_size, kernel, stride, pad, count_include_pad, override):
    """For one axis: each output's divisor factor, and for each input index the range
    [lo, hi) of outputs whose clipped window covers it."""
    start = np.empty(out_size, np.int64)
    end = np.empty(out_size, np.int64)
    factor = np.empty(out_size, np.int64)
    for o in range(out_size):
        s = o * stride - pad
        e = min(s + kernel, in_size + pad)
        start[o] = max(s, 0)
        end[o] = min(e, in_size)
        factor[o] = 1 if override != 0 else (e - s if count_include_pad else end[o] - start[o])
    lo = np.empty(in_size, np.int64)
    hi = np.empty(in_size, np.int64)
    first = 0
    for i in range(in_size):
        while first < out_size and end[first] <= i:
            first += 1
        last = first
        while last < out_size and start[last] <= i:
            last += 1
        lo[i] = first
        hi[i] = last
    return factor, lo, hi


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _q_row(go, meta, base, oh, out_w, front, grad_row, q, window_factor, divide, half_mean,
           rounding, weight):
    """Row oh of q (see the module's docstring) into q[front:front + out_w]."""
    load_span(go, meta[0, 0], base + oh * meta[0, 4], meta[0, 5], out_w, grad_row)
    q0, f0 = np.uint64(front), np.uint64(oh * out_w)
    if divide:
        for ow in range(np.uint64(out_w)):
            q[q0 + ow] = grad_row[ow] / window_factor[f0 + ow]
    elif half_mean:
        for ow in range(np.uint64(out_w)):
            q[q0 + ow] = round_to_half(grad_row[ow] * window_factor[f0 + ow])
    else:
        for ow in range(np.uint64(out_w)):
            q[q0 + ow] = grad_row[ow] * window_factor[f0 + ow]
    if rounding == ROUND_FP16 and not half_mean:  # (half_mean's products are float16 already)
        for ow in range(np.uint64(out_w)):
            q[q0 + ow] = round_to_half(q[q0 + ow])
    elif rounding == ROUND_HF32:
        for ow in range(np.uint64(out_w)):
            q[q0 + ow] = round_to_hf32(q[q0 + ow])
    if weight != _ONE:
        for ow in range(np.uint64(out_w)):
            q[q0 + ow] = q[q0 + ow] * weight


# the first and second halves of two vectors' lanes, interleaved
_INTERLEAVED = [ir.Constant(VI, [k for i in range(h, h + LANES // 2) for k in (i, LANES + i)])
                for h in (0, LANES // 2)]


def _stride2_t_rows(counts: tuple[int, int] | None):
    """The intrinsic for a row of t with a column stride of 2, in `steps` steps of 16
    column pairs: t[t_at + 2m + rho] = the sum, in order, of q[first_rho + m + d] for d <
    count_rho (+0.0 where count_rho is 0), for m < 16 * steps (q is read and t written
    that far). One pass, the two residues' sums interleaved in registers. `counts`: the
    counts, fixed when compiled (their sums unrolled), or None: taken at run time, each
    sum a loop (k2s2p0's rows took 1.4x as long so)."""
    def stride2_t_row(typingctx, q, first0, count0, first1, count1, t, t_at, steps):
        def codegen(context, builder, signature, args):
            data = array_data(context, builder, signature, args)
            q_data, t_data = data(0), data(5)
            _, first0, count0, first1, count1, _, t_at, steps = args
            i64 = ir.IntType(64)

            def load(index):
                pointer = builder.bitcast(builder.gep(q_data, [index]), VF.as_pointer())
                return builder.load(pointer, align=4)

            def unrolled_sum(start, count: int):
                terms = [load(builder.add(start, i64(d))) for d in range(count)]
                result = terms[0] if terms else splat(VF, 0.0)
                for term in terms[1:]:
                    result = builder.fadd(result, term)
                return result

            def run_sum(start, count):
                total = cgutils.alloca_once(builder, VF)
                none = builder.icmp_unsigned("==", count, i64(0))
                builder.store(builder.select(none, splat(VF, 0.0), load(start)), total)
                with cgutils.for_range(builder, builder.select(none, i64(0), builder.sub(
                        count, i64(1)))) as loop:
                    term = load(builder.add(start, builder.add(loop.index, i64(1))))
                    builder.store(builder.fadd(builder.load(total), term), total)
                return builder.load(total)

            def residue_sum(first, count, m, rho):
                start = builder.add(first, m)
                return run_sum(start, count) if counts is None else unrolled_sum(
                    start, counts[rho])

            with cgutils.for_range(builder, steps) as loop:
                m = builder.mul(loop.index, i64(LANES))
                even, odd = residue_sum(first0, count0, m, 0), residue_sum(first1, count1, m, 1)
                at = builder.add(t_at, builder.add(m, m))
                for half, mask in enumerate(_INTERLEAVED):
                    pointer = builder.gep(t_data, [builder.add(at, i64(half * LANES))])
                    builder.store(builder.shuffle_vector(even, odd, mask),
                                  builder.bitcast(pointer, VF.as_pointer()), align=4)
            return context.get_dummy_value()

        u64 = types.uint64
        return types.void(q, u64, u64, u64, u64, t, u64, u64), codegen
    stride2_t_row.__doc__ = _stride2_t_rows.__doc__
    return intrinsic(stride2_t_row)


# the column sums of k2s2p0 (counts 1, 1) and k3s2p1 (1, 2) unrolled, any other at run time
_t_row_1_1, _t_row_1_2, _t_row_any = (_stride2_t_rows(c) for c in ((1, 1), (1, 2), None))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _t_row(q, sums, t, oh, width, padded, front, first_offset, last_offset):
    """Row oh of t from the row of q: each residue's sums of shifted runs of q, then the
    residues interleaved (q and t have 2 * LANES elements to spare at their ends: a stride
    of 2 fills a row in whole vectors)."""
    stride = first_offset.size
    if stride == 2:  # the common case, in registers
        count0 = max(0, last_offset[0] - first_offset[0] + 1)
        count1 = max(0, last_offset[1] - first_offset[1] + 1)
        args = (q, np.uint64(front + first_offset[0]), np.uint64(count0),
                np.uint64(front + first_offset[1]), np.uint64(count1), t,
                np.uint64(oh * width), np.uint64(-(-width // (2 * LANES))))
        if count0 == 1 and count1 == 1:
            _t_row_1_1(*args)
        elif count0 == 1 and count1 == 2:
            _t_row_1_2(*args)
        else:
            _t_row_any(*args)
        return
    for rho in range(stride):
        first, last = first_offset[rho], last_offset[rho]
        r0 = np.uint64(rho * padded)
        count = np.uint64((width - rho + stride - 1) // stride)
        if first > last:  # no window covers these columns
            sums[r0: r0 + count] = 0.0
            continue
        start = np.uint64(front + first)
        for m in range(count):
            sums[r0 + m] = q[start + m]
        for d in range(np.uint64(last - first)):
            for m in range(count):
                sums[r0 + m] += q[start + d + _U1 + m]
    t0 = np.uint64(oh * width)
    for rho in range(stride):
        r0 = np.uint64(rho * padded)
        step, at = np.uint64(stride), t0 + np.uint64(rho)
        for m in range(np.uint64((width - rho + stride - 1) // stride)):
            t[at + step * m] = sums[r0 + m]


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _store_row(gi, meta, at, width, values, first, streamed_f16):
    """values[first:first + width] to the row of gradInput (`meta[1]`) at byte `at`,
    rounded to its dtype: contiguous float32 rows by `bits.store_f32_row`, contiguous
    float16 ones by `lanes.store_f16_row` when `streamed_f16`, streamed where that pays;
    any other row through its stride."""
    code, step = meta[1, 0], meta[1, 5]
    if code == F32 and step == 4:
        store_f32_row(gi, at, width, values, first)
    elif streamed_f16 and code == F16 and step == 2:
        store_f16_row(gi, at, width, values, first)
    else:
        store_span(gi, code, at, step, width, values, np.uint64(first))


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _avg_pool2d_backward(bufs, meta, dims, h_plan, w_factor, w_plan, override, scaling, group):
    """bufs: (gradOutput, gradInput); meta rows [code, byte offset, byte strides N, C, H, W];
    dims [N, C, H, W, OH, OW]; h_plan from `axis_plan`; w_plan from `residue_plan`;
    scaling: the fields of `Scaling`; group: the rows of gradInput stored together (see
    `store_group`). With the body of the loop over chunks a function of its own (called
    once a chunk) it compiled in 25 s instead of 46 on a 2 GHz Zen 1, but float32 (32, 64,
    112, 112) ran 2.5-3x as long: not taken."""
    divide, half_mean, rounding, weight, half_out = scaling
    weight = np.float32(weight)
    n_batch, channels, height, width = dims[0], dims[1], dims[2], dims[3]
    out_h, out_w = dims[4], dims[5]
    h_factor, h_lo, h_hi = h_plan
    first_offset, last_offset, front = w_plan
    stride = first_offset.size
    padded = front + out_w + max(0, (width - 1) // stride + last_offset.max() + 1 - out_w)
    # whole cache lines: the residues' sums then start on one (k3s2p1 on 112 x 112 planes
    # took twice as long with rows of 57)
    padded = (padded + 15) // 16 * 16
    go, gi = bufs[0], bufs[1]
    # half_out: the sums rounded to float16, unless the store itself rounds them to float16
    round_row = half_out and meta[1, 0] != F16
    streamed_f16 = F16_ROWS_ALONE or group > 1
    w_divisor = w_factor.astype(np.float32)  # exact: window extents are small integers
    # each window's divisor (divide) or multiplier, the same for every plane
    window_factor = np.empty(out_h * out_w, np.float32)
    for oh in range(out_h):
        row_factor = np.float32(override if override != 0 else h_factor[oh])
        for ow in range(out_w):
            divisor = row_factor * w_divisor[ow]
            if divide:
                window_factor[oh * out_w + ow] = divisor
            elif half_mean:
                window_factor[oh * out_w + ow] = round_to_half(_ONE / divisor)
            else:
                window_factor[oh * out_w + ow] = _ONE / divisor
    planes = n_batch * channels
    chunks = min(planes, PLANE_CHUNKS)
    for chunk in prange(chunks):  # buffers allocated once per chunk of planes
        # Flat buffers with unsigned indices throughout: 2-D indexing and signed indices
        # (negative-index wraparound) kept these short loops from vectorising (3x slower).
        # each on a cache line (see `line_aligned_floats`)
        q = line_aligned_floats(padded + 2 * LANES)  # a row of q, zero columns around it
        q[:] = 0.0
        t = line_aligned_floats(out_h * width + 2 * LANES)
        # sums[rho * padded + m]: the sum for column stride*m + rho of a row of q (a stride
        # of 2 sums in registers)
        sums = line_aligned_floats(0 if stride == 2 else stride * padded)
        grad_row = line_aligned_floats(out_w)
        row = line_aligned_floats(group * width)  # the rows of a group, end to end
        for plane in range(chunk * planes // chunks, (chunk + 1) * planes // chunks):
            n = plane // channels
            c = plane - n * channels
            base = meta[0, 1] + n * meta[0, 2] + c * meta[0, 3]
            out = meta[1, 1] + n * meta[1, 2] + c * meta[1, 3]
            ready = 0  # rows of t computed so far: each when an input row first needs it,
            # so that the stores of the finished rows go on while the next ones are computed
            grouped = 0  # rows in the group being filled
            for ih in range(height):
                lo, hi = h_lo[ih], h_hi[ih]
                while ready < hi:
                    _q_row(go, meta, base, ready, out_w, front, grad_row, q, window_factor,
                           divide, half_mean, rounding, weight)
                    _t_row(q, sums, t, ready, width, padded, front, first_offset, last_offset)
                    ready += 1
                if group == 1 and hi - lo == 1 and not round_row:
                    # one row of windows covers this row: its row of t is stored as it is
                    _store_row(gi, meta, out + ih * meta[1, 4], width, t, lo * width,
                               streamed_f16)
                    continue
                slot = row[np.uint64(grouped * width):]  # this row's place in its group
                if lo < hi:
                    t0 = np.uint64(lo * width)
                    for iw in range(np.uint64(width)):
                        slot[iw] = t[t0 + iw]
                else:
                    slot[:width] = 0.0
                for oh in range(lo + 1, hi):
                    t0 = np.uint64(oh * width)
                    for iw in range(np.uint64(width)):
                        slot[iw] += t[t0 + iw]
                if round_row:
                    for iw in range(np.uint64(width)):
                        slot[iw] = round_to_half(slot[iw])
                grouped += 1
                if grouped == group or ih == height - 1:  # the group is complete
                    top = ih + 1 - grouped
                    _store_row(gi, meta, out + top * meta[1, 4], grouped * width, row, 0,
                               streamed_f16)
                    grouped = 0
        store_fence()


def store_group(code: int, byte_strides, width: int) -> int:
    """How many rows of gradInput (element `code`, byte strides over N, C, H, W) the kernel
    stores together: the float16 rows of a contiguous plane, unless they are streamed one
    by one (`F16_ROWS_ALONE`), as many as make GROUP_BYTES (they are streamed together, see
    GROUP_BYTES); any other row is stored when finished (float16 streamed only then)."""
    row_bytes = 2 * width
    if (F16_ROWS_ALONE or code != F16 or byte_strides[3] != 2 or byte_strides[2] != row_bytes
            or row_bytes >= GROUP_BYTES):
        return 1
    return GROUP_BYTES // row_bytes


def residue_plan(kernel: int, stride: int, pad: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The columns iw = stride*m + rho (rho < stride) are covered by the windows of the
    outputs m + first[rho] .. m + last[rho] (those outside [0, OW) are the zero columns
    around q); returns (first, last, how many zero columns go before q's first)."""
    rho = np.arange(stride)
    first = -((kernel - 1 - pad - rho) // stride)  # ceil((rho + pad - kernel + 1) / stride)
    last = (rho + pad) // stride
    return first.astype(np.int64), last.astype(np.int64), max(0, -int(first.min()))


class AvgPool2dBackwardLaunch:
    """A prepared AvgPool2d backward call (layout and window tables fixed in phase 1)."""

    def __init__(self, grad_output, grad_input, dims, params, scaling: Scaling):
        n, c, h, w, out_h, out_w = dims
        k_h, k_w, s_h, s_w, p_h, p_w, count_include_pad, override = params
        meta = np.array([[op.code, op.byte_offset, *op.byte_strides]
                         for op in (grad_output, grad_input)], dtype=np.int64)
        w_factor = axis_plan(out_w, w, k_w, s_w, p_w, bool(count_include_pad), override)[0]
        self._args = (
            (grad_output.buffer, grad_input.buffer), meta, np.asarray(dims, np.int64),
            axis_plan(out_h, h, k_h, s_h, p_h, bool(count_include_pad), override),
            w_factor, residue_plan(k_w, s_w, p_w), override,
            (bool(scaling.divide), bool(scaling.half_mean), int(scaling.rounding),
             float(scaling.weight), bool(scaling.half_out)),
            store_group(grad_input.code, grad_input.byte_strides, w))

    def __call__(self) -> None:
        launch(lambda: _avg_pool2d_backward(*self._args))
