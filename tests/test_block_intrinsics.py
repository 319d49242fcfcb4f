"""The kernels' block intrinsics, bit for bit.

`store_f32_row` writes a float32 row with non-temporal stores where it is whole cache
lines, with ordinary ones otherwise: every start offset within a cache line and lengths
around the vector width must write exactly the row, and not one byte outside it.
`transpose_x16` turns a 16 x 16 block of float32, float16 or bfloat16 in registers into
float32 (conversions exact, NaN payloads, -0, infinities and subnormals kept), or a 16-bit
block into the same 16-bit bits: any source step and offset, any destination position,
nothing written outside the block."""

import platform
import re

import ml_dtypes
import numpy as np
import pytest
from numba import njit

from aclnn.kernels.bits import BF16, F16, F32, store_f32_row, store_fence
from aclnn.kernels.lanes import transpose_x16

GUARD = 0xA5


@njit
def _store(buf, base, n, values, at=0):
    store_f32_row(buf, base, n, values, at)
    store_fence()


def _aligned_bytes(size: int) -> np.ndarray:
    """A uint8 buffer whose first byte is 64-byte aligned, filled with the guard byte."""
    raw = np.full(size + 64, GUARD, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip: skip + size]


@pytest.mark.parametrize("offset", range(0, 68, 4))
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 31, 32, 47, 48, 49, 112, 113])
@pytest.mark.parametrize("at", [0, 5])
def test_row_lands_exactly(offset, n, at):
    """values[at:at + n] land at byte `offset`, streamed or not."""
    buf = _aligned_bytes(offset + 4 * n + 128)
    values = np.random.default_rng(n).standard_normal(n + at).astype(np.float32)
    values[at: at + min(n, 3)] = [np.nan, -0.0, np.inf][: min(n, 3)]
    _store(buf, offset, n, values, at)
    written = buf[offset: offset + 4 * n].view(np.float32)
    assert written.view(np.uint32).tolist() == values[at:].view(np.uint32).tolist()
    assert (buf[:offset] == GUARD).all()
    assert (buf[offset + 4 * n:] == GUARD).all()


def test_misaligned_element_start_falls_back_to_ordinary_stores():
    """A row that does not start on a 4-byte boundary cannot use vector stores at all."""
    buf = _aligned_bytes(4 * 40 + 8)
    values = np.arange(40, dtype=np.float32)
    _store(buf, 2, 40, values)
    assert buf[2: 2 + 160].view(np.float32).tolist() == values.tolist()
    assert (buf[:2] == GUARD).all() and (buf[162:] == GUARD).all()


@njit
def _transpose(code, row_code, src, at, step, dst, dst_at, dst_step):
    transpose_x16(code, row_code, src, at, step, dst, dst_at, dst_step)


@pytest.mark.parametrize("dtype, code, kept", [
    (np.float32, F32, False), (np.float16, F16, False), (ml_dtypes.bfloat16, BF16, False),
    (np.float16, F16, True), (ml_dtypes.bfloat16, BF16, True)])
@pytest.mark.parametrize("row, col, side", [(0, 0, 16), (3, 5, 40), (17, 2, 33)])
def test_transpose_block(dtype, code, kept, row, col, side):
    """Into float32 rows, or (`kept`) into rows of the 16-bit dtype itself, bits as they are."""
    source = np.random.default_rng(side).standard_normal((side, side)).astype(dtype)
    tiny = ml_dtypes.finfo(dtype).smallest_subnormal
    source[row, col:col + 5] = np.array([np.nan, -0.0, np.inf, tiny, -tiny]).astype(dtype)
    source[row + 1, col] = np.array(0x7FC1, np.uint16).view(dtype) if code != F32 else np.nan
    row_dtype = dtype if kept else np.float32
    dst = np.full(20 * 20, -7.0, row_dtype)
    size, row_size = np.dtype(dtype).itemsize, np.dtype(row_dtype).itemsize
    _transpose(code, code if kept else F32, source.reshape(-1).view(np.uint8),
               size * (row * side + col), size * side, dst.view(np.uint8),
               row_size * (2 * 20 + 1), row_size * 20)
    expected = np.full((20, 20), -7.0, row_dtype)
    expected[2:18, 1:17] = source[row:row + 16, col:col + 16].T.astype(row_dtype)
    unsigned = np.uint32 if row_size == 4 else np.uint16
    assert dst.view(unsigned).tolist() == expected.reshape(-1).view(unsigned).tolist()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
def test_transpose_shuffles_within_lanes():
    """The block transpose loads 128-bit pieces into lanes and unpacks within them: no
    lane-crossing permute (vperm*, vshuf*x*), no 8-byte loads gathered into lanes. The
    element codes are run-time values, so one compiled copy holds all four variants."""
    options = {k: v for k, v in _transpose.targetoptions.items() if k not in ("cache", "nopython")}
    kernel = njit(**options)(_transpose.py_func)  # compiled afresh, inspectable
    kernel(F32, F32, np.zeros(64 * 64, np.uint8), 0, 64, np.zeros(64 * 64, np.uint8), 0, 256)
    asm = kernel.inspect_asm(kernel.signatures[0])
    assert len(re.findall(r"\tv(p)?unpck", asm)) >= 3 * 48 + 32
    assert not re.search(r"\tv(perm|shuf[if](32|64)x)|\tvmovq\t-?\d*\(", asm)
