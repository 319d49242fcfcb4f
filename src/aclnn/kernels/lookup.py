"""Elementwise operators of one 16-bit input by table: out = narrow(table[x's bits] * g).

A float16 or bfloat16 input has 65536 values, so a factor that depends on x alone (GELU's
derivative) is computed once per value, by the same float32 operations as the kernel it
stands for, and looked up: the same bits at memory speed, whatever the values.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .typed import narrow, widen

TABLE_SIZE = 1 << 16


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def scaled_lookup(grad, x, out, table):
    """out = narrow(table[bits of x] * g) over flat typed views of one 16-bit dtype (float16
    as uint16, bfloat16 as int16)."""
    for i in prange(out.size):
        out[i] = narrow(table[np.int64(x[i]) & 0xFFFF] * widen(grad[i]), out)


def all_values(view_dtype: np.dtype) -> np.ndarray:
    """Every 16-bit pattern, in bit order, as a typed view of `view_dtype`."""
    return np.arange(TABLE_SIZE, dtype=np.uint32).astype(np.uint16).view(view_dtype)
