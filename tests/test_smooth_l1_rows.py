"""The contiguous SmoothL1 / L1 backward kernel (kernels/smooth_l1_rows.py), bit for bit.

Every result is the float32 formula of SPEC §8 evaluated here with NumPy in the kernel's
order - d = x - y; d / beta inside |d| < beta, else sign(d) (keeping a zero's sign and
NaN); times g, times scale - then rounded once to the dtype. Streaming (non-temporal)
stores, the padded tail, the folded scalar gradient and the integer rounding of bfloat16
(a CPU without AVX512_BF16) all give those bits; the streaming policy takes only large,
cache-line aligned outputs; and on x86 the compiled kernel really streams (`movnt`, which
LLVM drops for float16 unless the vectors are paired) and fences (`sfence`)."""

import os
import platform
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from benchmarks import isa
from numba import njit

import reference as R
from aclnn.kernels import bits, lanes, pointwise, smooth_l1_rows
from aclnn.kernels.bits import BF16, F16, F32
from aclnn.kernels.typed import VIEW_DTYPE

DTYPES = {np.float32: F32, np.float16: F16, ml_dtypes.bfloat16: BF16}
# 0: L1 (SIGN); 1, 0.5, 2**-127 and 2**127 by their exact reciprocal (MULTIPLY); inf
# (every finite d inside), 0.3, 3e38, a subnormal and a subnormal power of two (whose
# reciprocal overflows) divide (DIVIDE)
BETAS = [1.0, 0.5, 0.0, np.inf, 2.0 ** -127, 2.0 ** 127, 0.3, 3e38, 1e-40, 2.0 ** -140]
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, 65504.0, 3e38]


def _inputs(dtype, n, seed=0):
    """g, x, y of `dtype`: random values, the special values against each other, and ties
    |x - y| == beta for the betas tried."""
    rng = np.random.default_rng(seed)
    g, x, y = ((rng.standard_normal(n) * 2).astype(dtype) for _ in range(3))
    pairs = np.array([(a, b) for a in SPECIAL for b in SPECIAL]).T
    m = pairs.shape[1]
    with np.errstate(over="ignore"):  # 3e38 is inf in the 16-bit dtypes
        x[:m], y[:m] = pairs.astype(dtype)
    x[m:m + 4], y[m:m + 4] = np.array([1.5, -2.0, 0.75, 3.0]).astype(dtype), np.array(
        [0.5, -1.5, 0.25, 2.0]).astype(dtype)
    g[::31] = np.array(np.nan, dtype)
    return g, x, y


def _expected(g, x, y, beta, scale, dtype):
    """The kernel's float32 formula, rounded once to `dtype`."""
    beta = np.float32(beta)
    with np.errstate(all="ignore"):
        d = x.astype(np.float32) - y.astype(np.float32)
        sign = np.where(d > 0, np.float32(1), np.where(d < 0, np.float32(-1), d))
        slope = np.where(np.abs(d) < beta, d / beta, sign).astype(np.float32)
        if g is not None:
            slope = g.astype(np.float32) * slope
        return (slope * np.float32(scale)).astype(dtype)


def _run(g, x, y, beta, scale, streaming, kernel=None):
    kernel = kernel or smooth_l1_rows.smooth_l1_flat
    view = VIEW_DTYPE[DTYPES[x.dtype.type]]
    out = R.aligned_zeros(x.size, view)
    factor, mode = smooth_l1_rows.slope_factor(np.float32(beta))
    kernel(None if g is None else g.view(view), x.view(view), y.view(view), out,
           factor, mode, np.float32(scale), streaming)
    return out.view(x.dtype)


@pytest.mark.parametrize("scale", [0.75, 1.0])
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_results_are_the_float32_formula_rounded_once(dtype, beta, streaming, scale):
    g, x, y = _inputs(dtype, 2 * smooth_l1_rows.BLOCK + 45)  # two blocks and a tail
    with np.errstate(over="ignore"):
        x[-40:] = (np.float32(beta) * np.linspace(-2, 2, 40)).astype(dtype)  # around +-beta
    y[-40:] = 0
    got = _run(g, x, y, beta, scale, streaming)
    assert np.array_equal(R.bits(got), R.bits(_expected(g, x, y, beta, scale, dtype)))


M, S, D = smooth_l1_rows.MULTIPLY, smooth_l1_rows.SIGN, smooth_l1_rows.DIVIDE


@pytest.mark.parametrize(("beta", "factor", "mode"), [
    (1.0, 1.0, M), (0.5, 2.0, M), (4.0, 0.25, M), (2.0 ** 127, 2.0 ** -127, M),
    (2.0 ** -127, 2.0 ** 127, M), (0.0, 0.0, S), (np.inf, np.inf, D),
    (2.0 ** -128, 2.0 ** -128, D), (0.3, 0.3, D), (3.0, 3.0, D), (1e-40, 1e-40, D),
])
def test_slope_factor_multiplies_only_by_exact_reciprocals(beta, factor, mode):
    got = smooth_l1_rows.slope_factor(np.float32(beta))
    assert got == (np.float32(factor), mode) and type(got[0]) is np.float32


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_scalar_gradient_folded_into_the_scale(dtype, streaming):
    _, x, y = _inputs(dtype, 1000, seed=1)
    got = _run(None, x, y, 1.0, -3e-3, streaming)
    assert np.array_equal(R.bits(got), R.bits(_expected(None, x, y, 1.0, -3e-3, dtype)))


@pytest.mark.parametrize("n", [1, 15, 16, 17, 4095, 4097])
def test_every_length_around_a_vector_and_a_block(n):
    g, x, y = _inputs(np.float16, n + 200, seed=2)
    g, x, y = g[-n:].copy(), x[-n:].copy(), y[-n:].copy()
    got = _run(g, x, y, 0.5, 1.0, True)
    assert np.array_equal(R.bits(got), R.bits(_expected(g, x, y, 0.5, 1.0, np.float16)))


def _run_block(g, x, y, beta, scale):
    """The one-block kernel (the calling thread's) on the inputs of `_run`."""
    view = VIEW_DTYPE[DTYPES[x.dtype.type]]
    out = R.aligned_zeros(x.size, view)
    factor, mode = smooth_l1_rows.slope_factor(np.float32(beta))
    smooth_l1_rows.smooth_l1_block(None if g is None else g.view(view), x.view(view),
                                   y.view(view), out, factor, mode, np.float32(scale))
    return out.view(x.dtype)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 175, smooth_l1_rows.BLOCK])
@pytest.mark.parametrize("beta", [1.0, 0.0, 0.3, np.inf])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_one_block_kernel_gives_the_float32_formula_rounded_once(dtype, beta, n):
    """The kernel of calls of up to one block (no parallel launch): the formula's bits, with
    a gradient and with a scalar one folded into the scale, whole vectors and the tail."""
    g, x, y = _inputs(dtype, max(n, 175), seed=5)  # the special pairs in the first 144
    g, x, y = g[:n].copy(), x[:n].copy(), y[:n].copy()
    for grad, scale in ((g, 0.75), (None, -3e-3)):
        got = _run_block(grad, x, y, beta, scale)
        assert np.array_equal(R.bits(got), R.bits(_expected(grad, x, y, beta, scale, dtype)))


@pytest.mark.parametrize("g_value", [1.0, 1e-38, 3e38])
def test_bfloat16_subnormal_and_overflowing_products_round_once(g_value):
    """bfloat16 results rounded by integer arithmetic: subnormal and overflowing products
    too, against the formula in float32 rounded once."""
    g, x, y = _inputs(ml_dtypes.bfloat16, 3000, seed=3)
    g[:] = np.array(g_value, ml_dtypes.bfloat16)
    got = _run(g, x, y, 1.0, 1.0, True)
    assert np.array_equal(R.bits(got), R.bits(_expected(g, x, y, 1.0, 1.0,
                                                         ml_dtypes.bfloat16)))


def test_bfloat16_rows_in_the_unpacked_lane_order_give_every_lane_its_own_result():
    """bfloat16 rows computed in the lane order `lanes._UNPACKED` and packed back: the
    formula's bits at every position of a vector and in the tail."""
    g, x, y = _inputs(ml_dtypes.bfloat16, 3000 + 13, seed=4)
    x[:64] = np.arange(64).astype(ml_dtypes.bfloat16)  # each lane its own value
    for beta in (1.0, 0.3):
        got = _run(g, x, y, beta, 0.75, False)
        assert np.array_equal(R.bits(got), R.bits(_expected(g, x, y, beta, 0.75,
                                                             ml_dtypes.bfloat16))), beta


def test_streaming_only_for_large_aligned_outputs():
    size = pointwise.STREAM_BYTES // 4
    large = R.aligned_zeros(size + 16, np.float32)
    assert pointwise._streams(large[:size])
    assert not pointwise._streams(large[1:size + 1])  # not on a cache line
    assert not pointwise._streams(large[:size - 16])  # small enough to stay in the caches


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_compiled_kernel_streams_and_fences(dtype):
    options = {k: v for k, v in smooth_l1_rows.smooth_l1_flat.targetoptions.items()
               if k not in ("cache", "nopython")}
    kernel = njit(**options)(smooth_l1_rows.smooth_l1_flat.py_func)  # inspectable: not cached
    _run(*_inputs(dtype, 256), 1.0, 1.0, True, kernel)
    asm = kernel.inspect_asm(kernel.signatures[0])
    assert re.search(r"\tvmovnt", asm) and re.search(r"\tsfence", asm)
    assert bool(re.search(r"\tprefetcht0", asm)) == (dtype != np.float32)  # 16-bit loops


_PREFETCH_DISTANCES = """
import re, sys, numpy as np
from aclnn.kernels import smooth_l1_rows as s
from aclnn.kernels.typed import VIEW_DTYPE
view = VIEW_DTYPE[int(sys.argv[1])]
kernel = s.smooth_l1_flat  # compiled here: NUMBA_CACHE_DIR is empty
raw = np.zeros(256, np.uint8)
out = raw[-raw.ctypes.data % 64:][:128].view(view)  # streamed: on a line
a = np.zeros(64, view)
kernel(a, a, a, out, np.float32(1), 0, np.float32(1), True)
asm = kernel.inspect_asm(kernel.signatures[0])
print(s.LOSS_PREFETCH_BYTES, " ".join(sorted(set(re.findall(r"\\tprefetcht0\\t(\\d+)\\(", asm)))))
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
@pytest.mark.parametrize("level", ["native", "avx2"])
@pytest.mark.parametrize("code", [F16, BF16])
def test_contiguous_16bit_loop_prefetch_distance(level, code, tmp_path):
    """The contiguous kernel's 16-bit loops prefetch their inputs LOSS_PREFETCH_BYTES
    ahead, natively and built for AVX2 (a pair of vectors: one line, or two where a vector
    is half a line): 512 bytes in a build whose vector fills a line (AVX-512) on a CPU
    other than Intel's, else 2048."""
    env = {**os.environ, **(isa.ENVIRONMENTS["avx2"] if level == "avx2" else {}),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _PREFETCH_DISTANCES, str(code)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ahead, *offsets = map(int, done.stdout.split())
    intel = bits.cpu_vendor() == "GenuineIntel"
    assert ahead == (512 if level == "native" and lanes.LINE_VECTORS and not intel else 2048)
    assert set(offsets) <= {ahead, ahead + 64}
    assert ahead in offsets
