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


def _pool_kernel_asm() -> str:
    """The AvgPool kernel compiled now (not cached, with the module's current globals) for
    a float16 k2s2p0 call, as assembly."""
    options = {k: v for k, v in pool._avg_pool2d_backward.targetoptions.items()
               if k not in ("cache", "nopython")}
    kernel = njit(**options)(pool._avg_pool2d_backward.py_func)
    go, gi = np.zeros(4 * 4, np.float16), np.zeros(8 * 8, np.float16)
    meta = np.array([[pool.F16, 0, 32, 32, 8, 2], [pool.F16, 0, 128, 128, 16, 2]], np.int64)
    dims = np.array([1, 1, 8, 8, 4, 4], np.int64)
    plan = pool.axis_plan(4, 8, 2, 2, 0, True, 0)
    kernel((go.view(np.uint8), gi.view(np.uint8)), meta, dims, plan, plan[0],
           pool.residue_plan(2, 2, 0), 0, (True, False, 0, 1.0, False))
    return kernel.inspect_asm(kernel.signatures[0])


@pytest.mark.skipif(not (X86 and lanes.LINE_VECTORS),
                    reason="float16 rows are streamed where one vector fills a line")
def test_pool_kernel_streams_f16_rows(monkeypatch):
    """Where the build's vectors fill a line, the AvgPool kernel stores float16 rows by
    `store_f16_row`: it has more streamed integer-vector stores (float16 lines) than
    the same kernel compiled as for AVX2, which stores them plainly."""
    def line_stores() -> int:
        return len(re.findall(r"\tvmovntdq\s", _pool_kernel_asm()))
    streamed = line_stores()
    monkeypatch.setattr(pool, "LINE_VECTORS", False)
    assert streamed > line_stores()
