"""Fused, multithreaded pointwise kernels over strided and broadcast operands.

Every kernel makes one pass: the iteration space (coalesced to `MAX_RANK` dims) is cut
into chunks of at most `CHUNK` elements along the innermost dim; each chunk loads its
operands from their native dtype (float32, float16 or bfloat16, read in place through
their strides) into small float32 buffers, computes in float32, and stores the result
rounded to the output dtype (round-to-nearest-even). Chunks run in parallel.

An operand travels as the uint8 buffer of its allocation plus a row of `meta`:
[element code, byte offset of the first element, byte strides of the MAX_RANK dims].
Since the element code is a runtime value, one compiled kernel serves all dtype mixes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .bits import load_span, store_span
from .fastmath import gelu_erf_derivative, gelu_tanh_derivative
from .layout import MAX_RANK, coalesce

CHUNK = 2048
_INNER = 2 + MAX_RANK - 1  # meta column of the innermost byte stride

_F0, _F1 = np.float32(0.0), np.float32(1.0)


@dataclass(frozen=True)
class StridedOperand:
    """One operand: its allocation's bytes, element code, first-element byte offset, and
    byte strides over the iteration shape (0 on broadcast dims)."""

    buffer: np.ndarray
    code: int
    byte_offset: int
    byte_strides: tuple[int, ...]


@njit(inline="always", error_model="numpy")
def _chunk_base(meta, k, shape, row, start):
    """Byte offset of element (row, start) of operand k; `row` indexes the outer dims."""
    offset = meta[k, 1] + start * meta[k, _INNER]
    for d in range(MAX_RANK - 2, -1, -1):
        size = shape[d]
        offset += (row % size) * meta[k, 2 + d]
        row //= size
    return offset


@njit(inline="always", error_model="numpy")
def _chunk_count(shape):
    rows = 1
    for d in range(MAX_RANK - 1):
        rows *= shape[d]
    per_row = (shape[MAX_RANK - 1] + CHUNK - 1) // CHUNK
    return rows * per_row, per_row


@njit(inline="always", error_model="numpy")
def _chunk_span(shape, per_row, c):
    row = c // per_row
    start = (c - row * per_row) * CHUNK
    return row, start, min(CHUNK, shape[MAX_RANK - 1] - start)


@njit(inline="always", error_model="numpy")
def _load_operand(bufs, meta, k, shape, row, start, n, out):
    base = _chunk_base(meta, k, shape, row, start)
    load_span(bufs[k], meta[k, 0], base, meta[k, _INNER], n, out)


@njit(inline="always", error_model="numpy")
def _store_operand(bufs, meta, k, shape, row, start, n, values):
    base = _chunk_base(meta, k, shape, row, start)
    store_span(bufs[k], meta[k, 0], base, meta[k, _INNER], n, values)


@njit(inline="always", error_model="numpy")
def _signum(d):
    """sign(d): -1, 0 (keeping the zero's sign) or 1; NaN stays NaN."""
    return _F1 if d > 0 else (-_F1 if d < 0 else d)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def _smooth_l1_backward(bufs, meta, shape, beta, scale):
    """bufs: (gradOut, self, target, gradInput); beta = 0 is pure sign (L1)."""
    count, per_row = _chunk_count(shape)
    for c in prange(count):
        row, start, n = _chunk_span(shape, per_row, c)
        g = np.empty(CHUNK, np.float32)
        x = np.empty(CHUNK, np.float32)
        y = np.empty(CHUNK, np.float32)
        _load_operand(bufs, meta, 0, shape, row, start, n, g)
        _load_operand(bufs, meta, 1, shape, row, start, n, x)
        _load_operand(bufs, meta, 2, shape, row, start, n, y)
        for i in range(n):
            d = x[i] - y[i]
            slope = d / beta if abs(d) < beta else _signum(d)
            g[i] = g[i] * slope * scale
        _store_operand(bufs, meta, 3, shape, row, start, n, g)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def _gelu_backward(bufs, meta, shape, use_tanh):
    """bufs: (gradOutput, self, gradInput)."""
    count, per_row = _chunk_count(shape)
    for c in prange(count):
        row, start, n = _chunk_span(shape, per_row, c)
        g = np.empty(CHUNK, np.float32)
        x = np.empty(CHUNK, np.float32)
        _load_operand(bufs, meta, 0, shape, row, start, n, g)
        _load_operand(bufs, meta, 1, shape, row, start, n, x)
        if use_tanh:
            for i in range(n):
                g[i] = g[i] * gelu_tanh_derivative(x[i])
        else:
            for i in range(n):
                g[i] = g[i] * gelu_erf_derivative(x[i])
        _store_operand(bufs, meta, 2, shape, row, start, n, g)


class PointwiseLaunch:
    """A prepared kernel call: layout coalesced once (phase 1), run any number of times."""

    def __init__(self, kernel, shape, operands: list[StridedOperand], *scalars):
        iter_shape, strides = coalesce(shape, [op.byte_strides for op in operands])
        meta = np.zeros((len(operands), 2 + MAX_RANK), dtype=np.int64)
        for k, (op, s) in enumerate(zip(operands, strides)):
            meta[k, 0] = op.code
            meta[k, 1] = op.byte_offset
            meta[k, 2:] = s
        self._kernel = kernel
        self._args = (tuple(op.buffer for op in operands), meta, iter_shape, *scalars)

    def __call__(self) -> None:
        self._kernel(*self._args)


def smooth_l1_backward(shape, grad, x, target, out, beta: float, scale: float) -> PointwiseLaunch:
    """out = grad * (d/beta if |d| < beta else sign(d)) * scale, d = x - target."""
    return PointwiseLaunch(_smooth_l1_backward, shape, [grad, x, target, out],
                           np.float32(beta), np.float32(scale))


def l1_backward(shape, grad, x, target, out, scale: float) -> PointwiseLaunch:
    """out = grad * sign(x - target) * scale: the SmoothL1 kernel with beta = 0."""
    return smooth_l1_backward(shape, grad, x, target, out, 0.0, scale)


def gelu_backward(shape, grad, x, out, use_tanh: bool) -> PointwiseLaunch:
    """out = grad * GELU'(x), exact (erf) or tanh-approximated."""
    return PointwiseLaunch(_gelu_backward, shape, [grad, x, out], bool(use_tanh))
