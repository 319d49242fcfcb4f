"""`store_f32_row`: a float32 row written with non-temporal stores for its whole cache
lines and ordinary ones for the unaligned head and tail. Every start offset within a
cache line and lengths around the vector width must write exactly the row: the same
bits, and not one byte outside it."""

import numpy as np
import pytest
from numba import njit

from aclnn.kernels.bits import store_f32_row, store_fence

GUARD = 0xA5


@njit
def _store(buf, base, n, values):
    store_f32_row(buf, base, n, values)
    store_fence()


def _aligned_bytes(size: int) -> np.ndarray:
    """A uint8 buffer whose first byte is 64-byte aligned, filled with the guard byte."""
    raw = np.full(size + 64, GUARD, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip: skip + size]


@pytest.mark.parametrize("offset", range(0, 68, 4))
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 31, 32, 47, 48, 49, 112, 113])
def test_row_lands_exactly(offset, n):
    buf = _aligned_bytes(offset + 4 * n + 128)
    values = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    values[: min(n, 3)] = [np.nan, -0.0, np.inf][: min(n, 3)]
    _store(buf, offset, n, values)
    written = buf[offset: offset + 4 * n].view(np.float32)
    assert written.view(np.uint32).tolist() == values.view(np.uint32).tolist()
    assert (buf[:offset] == GUARD).all()
    assert (buf[offset + 4 * n:] == GUARD).all()


def test_misaligned_element_start_falls_back_to_ordinary_stores():
    """A row that does not start on a 4-byte boundary cannot use vector stores at all."""
    buf = _aligned_bytes(4 * 40 + 8)
    values = np.arange(40, dtype=np.float32)
    _store(buf, 2, 40, values)
    assert buf[2: 2 + 160].view(np.float32).tolist() == values.tolist()
    assert (buf[:2] == GUARD).all() and (buf[162:] == GUARD).all()
