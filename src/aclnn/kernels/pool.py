"""The fused AvgPool2d backward kernel: parallel over the N*C planes.

Every divisor is a product of a per-row and a per-column factor (the padded extents, the
clipped extents, or the override), so each plane is computed separably in three small
passes with per-thread buffers of output-plane size (never the whole tensor):
  q[oh, ow]  = gradOutput[oh, ow] / (row factor * column factor)   (one float32 division,
               then the cubeMathType rounding of the scaled gradient)
  t[oh, iw]  = sum of q[oh, ow] over the output columns whose window covers iw (a gather
               of a fixed count per column, padded with a zero column)
  out[ih, :] = sum of t[oh, :] over the output rows whose window covers ih (vectorised)
and each finished row is stored into gradInput through its strides, rounded once to its
dtype. Work per plane is O(OH*OW + OH*W*ceil(kW/sW) + H*W*ceil(kH/sH)).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .bits import load_span, round_to_half, round_to_hf32, store_span

EXACT, ROUND_FP16, ROUND_HF32 = 0, 1, 2  # how the scaled gradient is rounded (cubeMathType)


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


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _avg_pool2d_backward(bufs, meta, dims, h_plan, divisor, w_gather, rounding):
    """bufs: (gradOutput, gradInput); meta rows [code, byte offset, byte strides N, C, H, W];
    dims [N, C, H, W, OH, OW]; h_plan from `axis_plan`; divisor[oh, ow] of every window
    (1 in the padding lanes); w_gather[j, iw] is the j-th output column covering input
    column iw, or OW (a zero column) past the last one. Rows are padded to multiples of
    LANES, so every loop runs whole vectors."""
    n_batch, channels, height, width = dims[0], dims[1], dims[2], dims[3]
    out_h, out_w = dims[4], dims[5]
    _, h_lo, h_hi = h_plan
    q_cols, t_cols = divisor.shape[1], w_gather.shape[1]
    go, gi = bufs[0], bufs[1]
    for plane in prange(n_batch * channels):
        n = plane // channels
        c = plane - n * channels
        q = np.zeros((out_h, q_cols), np.float32)  # column OW and the padding stay 0
        base = meta[0, 1] + n * meta[0, 2] + c * meta[0, 3]
        for oh in range(out_h):
            load_span(go, meta[0, 0], base + oh * meta[0, 4], meta[0, 5], out_w, q[oh])
            row, div = q[oh], divisor[oh]
            for ow in range(q_cols):
                row[ow] = row[ow] / div[ow]
            if rounding == ROUND_FP16:
                for ow in range(q_cols):
                    row[ow] = round_to_half(row[ow])
            elif rounding == ROUND_HF32:
                for ow in range(q_cols):
                    row[ow] = round_to_hf32(row[ow])
        t = np.empty((out_h, t_cols), np.float32)
        for oh in range(out_h):
            row, sums, first = q[oh], t[oh], w_gather[0]
            for iw in range(t_cols):
                sums[iw] = row[first[iw]]
            for j in range(1, w_gather.shape[0]):
                more = w_gather[j]
                for iw in range(t_cols):
                    sums[iw] += row[more[iw]]
        row = np.empty(t_cols, np.float32)
        out = meta[1, 1] + n * meta[1, 2] + c * meta[1, 3]
        for ih in range(height):
            lo, hi = h_lo[ih], h_hi[ih]
            if lo == hi:
                row[:] = 0.0
            else:
                first_row = t[lo]
                for iw in range(t_cols):
                    row[iw] = first_row[iw]
            for oh in range(lo + 1, hi):
                more_row = t[oh]
                for iw in range(t_cols):
                    row[iw] += more_row[iw]
            store_span(gi, meta[1, 0], out + ih * meta[1, 4], meta[1, 5], width, row)


LANES = 64  # loop bodies vectorise 16 lanes x 4: rows padded to this never run a scalar tail


def _padded(size: int) -> int:
    return -(-size // LANES) * LANES


class AvgPool2dBackwardLaunch:
    """A prepared AvgPool2d backward call (layout and window tables fixed in phase 1)."""

    def __init__(self, grad_output, grad_input, dims, params, rounding: int):
        n, c, h, w, out_h, out_w = dims
        k_h, k_w, s_h, s_w, p_h, p_w, count_include_pad, override = params
        meta = np.array([[op.code, op.byte_offset, *op.byte_strides]
                         for op in (grad_output, grad_input)], dtype=np.int64)
        w_factor, w_lo, w_hi = axis_plan(out_w, w, k_w, s_w, p_w, bool(count_include_pad),
                                         override)
        h_plan = axis_plan(out_h, h, k_h, s_h, p_h, bool(count_include_pad), override)
        divisor = np.ones((out_h, _padded(out_w + 1)), np.float32)
        divisor[:, :out_w] = (np.full((out_h, out_w), float(override)) if override
                              else np.outer(h_plan[0], w_factor))  # exact: small integers
        table = _gather_table(w_lo, w_hi, out_w)
        gather = np.full((table.shape[0], _padded(w)), out_w, np.int32)  # padding: the 0 column
        gather[:, :w] = table
        self._args = ((grad_output.buffer, grad_input.buffer), meta, np.asarray(dims, np.int64),
                      h_plan, divisor, gather, rounding)

    def __call__(self) -> None:
        _avg_pool2d_backward(*self._args)


def _gather_table(lo: np.ndarray, hi: np.ndarray, pad_index: int) -> np.ndarray:
    """table[j, i] = lo[i] + j where that is < hi[i], else `pad_index` (at least one row)."""
    count = max(int((hi - lo).max(initial=0)), 1)
    j = np.arange(count)[:, None]
    return np.where(lo[None, :] + j < hi[None, :], lo[None, :] + j, pad_index).astype(np.int32)
