"""The fused AvgPool2d backward kernel: parallel over the N*C planes.

Each plane scatters gradOutput[oh, ow] / divisor over its clipped window into a float32
accumulator the size of one input plane (per thread, never the whole tensor), visiting
output cells in row-major order as PyTorch does; then the plane is stored into gradInput
through its strides, rounded to its dtype. Work is O(OH * OW * kH * kW) per plane.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .bits import load_as_f32, round_to_half, round_to_hf32, store_from_f32

EXACT, ROUND_FP16, ROUND_HF32 = 0, 1, 2  # how the scaled gradient is rounded (cubeMathType)


@njit(inline="always", error_model="numpy")
def _windows(out_size, in_size, kernel, stride, pad, start, end, pool):
    """Per output index: clipped window [start, end) and the padded pool extent."""
    for o in range(out_size):
        s = o * stride - pad
        e = min(s + kernel, in_size + pad)
        pool[o] = e - s
        start[o] = max(s, 0)
        end[o] = min(e, in_size)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def _avg_pool2d_backward(bufs, meta, dims, params, rounding):
    """bufs: (gradOutput, gradInput); meta rows [code, byte offset, byte strides N, C, H, W];
    dims [N, C, H, W, OH, OW]; params [kH, kW, sH, sW, pH, pW, countIncludePad, divisor]."""
    n_batch, channels, height, width, out_h, out_w = dims[0], dims[1], dims[2], dims[3], \
        dims[4], dims[5]
    k_h, k_w, s_h, s_w, p_h, p_w, count_pad, divisor = params[0], params[1], params[2], \
        params[3], params[4], params[5], params[6], params[7]
    h_start = np.empty(out_h, np.int64)
    h_end = np.empty(out_h, np.int64)
    h_pool = np.empty(out_h, np.int64)
    w_start = np.empty(out_w, np.int64)
    w_end = np.empty(out_w, np.int64)
    w_pool = np.empty(out_w, np.int64)
    _windows(out_h, height, k_h, s_h, p_h, h_start, h_end, h_pool)
    _windows(out_w, width, k_w, s_w, p_w, w_start, w_end, w_pool)
    go, gi = bufs[0], bufs[1]
    for plane in prange(n_batch * channels):
        n = plane // channels
        c = plane - n * channels
        acc = np.zeros(height * width, np.float32)
        base = meta[0, 1] + n * meta[0, 2] + c * meta[0, 3]
        for oh in range(out_h):
            hs, he = h_start[oh], h_end[oh]
            for ow in range(out_w):
                ws, we = w_start[ow], w_end[ow]
                if divisor != 0:
                    div = divisor
                elif count_pad:
                    div = h_pool[oh] * w_pool[ow]
                else:
                    div = (he - hs) * (we - ws)
                g = load_as_f32(go, meta[0, 0], base + oh * meta[0, 4] + ow * meta[0, 5])
                v = g / np.float32(div)
                if rounding == ROUND_FP16:
                    v = round_to_half(v)
                elif rounding == ROUND_HF32:
                    v = round_to_hf32(v)
                for ih in range(hs, he):
                    row = ih * width
                    for iw in range(ws, we):
                        acc[row + iw] += v
        out = meta[1, 1] + n * meta[1, 2] + c * meta[1, 3]
        for ih in range(height):
            for iw in range(width):
                store_from_f32(gi, meta[1, 0], out + ih * meta[1, 4] + iw * meta[1, 5],
                               acc[ih * width + iw])


class AvgPool2dBackwardLaunch:
    """A prepared AvgPool2d backward call (layout fixed in phase 1)."""

    def __init__(self, grad_output, grad_input, dims, params, rounding: int):
        meta = np.array([[op.code, op.byte_offset, *op.byte_strides]
                         for op in (grad_output, grad_input)], dtype=np.int64)
        self._args = ((grad_output.buffer, grad_input.buffer), meta,
                      np.asarray(dims, np.int64), np.asarray(params, np.int64), rounding)

    def __call__(self) -> None:
        _avg_pool2d_backward(*self._args)
