"""The row pieces of the AvgPool2d backward kernel (kernels/pool.py, kernels/lanes.py):
float16 rows stored with streamed whole lines (`lanes.store_f16_row`) against NumPy's
rounding, at every length and start, and the compiled code's line stores."""

import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest
from benchmarks import isa
from numba import njit

import reference as R
from aclnn.kernels import lanes, pool
from aclnn.kernels.pointwise import StridedOperand
from support import cached_assembly

X86 = platform.machine().lower() in ("x86_64", "amd64")
SENTINEL = 0xAB
rng = np.random.default_rng(5)


@njit(cache=False)
def _store_row(buf, base, n, values, at):
    lanes.store_f16_row(buf, base, n, values, at)


def _values(n: int) -> np.ndarray:
    """float32 values with NaN, infinities, zeros of both signs, float16 subnormals and
    overflow, and ties between two float16 values among them."""
    values = (rng.standard_normal(n) * 100).astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e-6, -6e-8, 7e4,
                        np.float32(1 + 2**-11), np.float32(2049)], np.float32)
    values[: min(n, special.size)] = special[: min(n, special.size)]
    return rng.permutation(values)


@pytest.mark.parametrize("n", [0, 1, 16, 31, 33, 64, 95, 96, 97, 112, 128, 200])
@pytest.mark.parametrize("start", [0, 2, 32, 62, 1])
@pytest.mark.parametrize("at", [0, 5])
def test_f16_rows_are_numpy_rounding_and_touch_nothing_else(n, start, at):
    """Head, streamed lines and tail give float16(values) bit for bit, and so do rows of
    fewer than STREAMED_ROW_LINES whole lines, stored plainly; the bytes around the row
    keep their sentinel (an odd `start`: no line is aligned, every element plain)."""
    values = _values(n + at)
    buf = R.aligned_zeros(n * 2 + 192, np.uint8)
    buf[:] = SENTINEL
    base = 64 + start
    _store_row(buf, base, n, values, at)
    lanes_bits = buf[base: base + 2 * n].copy().view(np.uint16)
    with np.errstate(over="ignore"):
        expected = values[at:].astype(np.float16)
    assert np.array_equal(lanes_bits, expected.view(np.uint16))
    assert (buf[:base] == SENTINEL).all() and (buf[base + 2 * n:] == SENTINEL).all()


_LINE_STORES = """
import re, numpy as np
from numba import njit
from aclnn.kernels import lanes
buf, values = np.zeros(512, np.uint8), np.ones(256, np.float32)
kernel = njit(lambda b, base, v: lanes.store_f16_row(b, base, 200, v, 0))
kernel(buf, 0, values)  # (a base known when compiled would let LLVM fold the stores)
asm = kernel.inspect_asm(kernel.signatures[0])
print(" ".join(re.findall(r"\\tvmovnt\\w*\\s+%([xyz])mm", asm)))
"""


@pytest.mark.skipif(not X86, reason="the instructions checked are x86's")
@pytest.mark.parametrize("level", ["native", "avx2"])
def test_f16_lines_are_stored_whole_and_streamed(level, tmp_path):
    """Each line goes out as full vectors (one 64-byte store, or two of 32 bytes built for
    AVX2), never in 16-byte pieces: LLVM folds a float16 store into its conversion, 16
    bytes each, unless kept from it (built for AVX2 it did, with `lanes.pair_loop`'s
    opaque zero taken from a count the caller had tested)."""
    env = {**os.environ, **(isa.ENVIRONMENTS["avx2"] if level == "avx2" else {}),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _LINE_STORES], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stores = done.stdout.split()
    assert stores and "x" not in stores


def _pool_call() -> tuple:
    """The AvgPool kernel's arguments for a float16 k2s2p0 call on 8 x 8."""
    go, gi = np.zeros(4 * 4, np.float16), np.zeros(8 * 8, np.float16)
    meta = np.array([[pool.F16, 0, 32, 32, 8, 2], [pool.F16, 0, 128, 128, 16, 2]], np.int64)
    dims = np.array([1, 1, 8, 8, 4, 4], np.int64)
    plan = pool.axis_plan(4, 8, 2, 2, 0, True, 0)
    return ((go.view(np.uint8), gi.view(np.uint8)), meta, dims, plan, plan[0],
            pool.residue_plan(2, 2, 0), 0, (True, False, 0, 1.0, False), 2)


def _pool_kernel_asm() -> str:
    """The AvgPool kernel compiled now (not cached, with the module's current globals) for
    a float16 k2s2p0 call, as assembly."""
    options = {k: v for k, v in pool._avg_pool2d_backward.targetoptions.items()
               if k not in ("cache", "nopython")}
    kernel = njit(**options)(pool._avg_pool2d_backward.py_func)
    kernel(*_pool_call())
    return kernel.inspect_asm(kernel.signatures[0])


def _cached_pool_kernel_asm() -> str:
    """The assembly of the AvgPool kernel this process runs for that call (from the cache)."""
    kernel, args = pool._avg_pool2d_backward, _pool_call()
    kernel(*args)
    return cached_assembly(kernel, tuple(kernel.typeof_pyval(a) for a in args))


@pytest.mark.skipif(not X86, reason="the instructions checked are x86's")
@pytest.mark.parametrize("rows_alone", [
    value if value == pool.F16_ROWS_ALONE else pytest.param(value, marks=pytest.mark.slow)
    for value in (True, False)])
def test_pool_kernel_streams_f16_rows(monkeypatch, rows_alone):
    """The AvgPool kernel has streamed integer-vector stores (float16 lines) with rows
    stored one by one (`pool.F16_ROWS_ALONE`) and with groups of rows of a contiguous
    plane (`pool.store_group`). The build of this machine is read from the cache; the
    other is compiled for the test (55 s on a 2 GHz Zen 1)."""
    if rows_alone == pool.F16_ROWS_ALONE:
        assembly = _cached_pool_kernel_asm()
    else:
        monkeypatch.setattr(pool, "F16_ROWS_ALONE", rows_alone)
        assembly = _pool_kernel_asm()
    assert re.findall(r"\tvmovntdq\s", assembly)


def test_store_group_rule(monkeypatch):
    """Rows are grouped only for float16 rows of a contiguous plane, shorter than
    GROUP_BYTES, unless rows are streamed alone; as many as fill GROUP_BYTES."""
    monkeypatch.setattr(pool, "F16_ROWS_ALONE", False)
    f16, f32 = pool.F16, pool.F32
    assert pool.store_group(f16, (0, 0, 224, 2), 112) == pool.GROUP_BYTES // 224
    assert pool.store_group(f16, (0, 0, 2 * 3000, 2), 3000) == pool.GROUP_BYTES // 6000
    assert pool.store_group(f16, (0, 0, 2 * 4096, 2), 4096) == 1  # a row fills a group
    assert pool.store_group(f16, (0, 0, 256, 2), 112) == 1  # rows apart
    assert pool.store_group(f16, (0, 0, 448, 4), 112) == 1  # every other element
    assert pool.store_group(f32, (0, 0, 448, 4), 112) == 1
    monkeypatch.setattr(pool, "F16_ROWS_ALONE", True)
    assert pool.store_group(f16, (0, 0, 224, 2), 112) == 1


def _pool_bits(shape, ksp, group, offset, channels_last=False):
    """float16 gradInput of AvgPool2d backward (count_include_pad) computed with rows stored
    `group` at a time (None: as `store_group` says), at byte `offset` of a buffer whose
    other bytes hold SENTINEL; (the output's bits, whether the rest kept SENTINEL)."""
    n, c, h, w = shape
    k, s, p = ksp
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    go = np.random.default_rng(9).standard_normal((n, c, oh, ow)).astype(np.float16)
    count = n * c * h * w
    buf = R.aligned_zeros(2 * count + offset + 128, np.uint8)
    buf[:] = SENTINEL
    if channels_last:
        strides = (2 * h * w * c, 2, 2 * w * c, 2 * c)
    else:
        strides = (2 * c * h * w, 2 * h * w, 2 * w, 2)

    launch = pool.AvgPool2dBackwardLaunch(
        StridedOperand(go.reshape(-1).view(np.uint8), pool.F16, 0, go.strides),
        StridedOperand(buf, pool.F16, offset, strides),
        (n, c, h, w, oh, ow), (k, k, s, s, p, p, True, 0), pool.Scaling())
    if group is not None:
        launch._args = (*launch._args[:-1], group)
    launch()
    inside = buf[offset: offset + 2 * count]
    kept = (buf[:offset] == SENTINEL).all() and (buf[offset + 2 * count:] == SENTINEL).all()
    return inside.copy(), kept


@pytest.mark.parametrize("shape", [(2, 3, 112, 112), (1, 5, 9, 13), (1, 2, 40, 7)])
@pytest.mark.parametrize("ksp", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
@pytest.mark.parametrize("offset", [0, 2, 64])
def test_grouped_rows_store_the_same_bits(shape, ksp, offset):
    """Rows stored (and streamed) in groups, whole, partial at a plane's end, and larger
    than a plane, give the bits of rows stored one by one, plane starts on a line or not,
    and write nothing outside the output; a layout the rule does not group gives them too."""
    expected, kept = _pool_bits(shape, ksp, 1, offset)
    assert kept
    for group in (2, 3, 7, shape[2] + 5):
        bits, kept = _pool_bits(shape, ksp, group, offset)
        assert kept and np.array_equal(bits, expected), group
    bits, kept = _pool_bits(shape, ksp, None, offset, channels_last=True)
    assert kept and np.array_equal(
        bits.view(np.float16).reshape(shape[0], shape[2], shape[3], shape[1]).transpose(
            0, 3, 1, 2), expected.view(np.float16).reshape(shape))
