"""The table kernel (kernels/lookup.py): out = narrow(table[x's bits] * g) for float16 and
bfloat16, against NumPy's own float32 product rounded once, at row lengths that reach
each part of a row (pairs of vectors, an odd vector, a partial one), on outputs that start
anywhere and on one large enough to be stored non-temporally."""

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
from aclnn.kernels import bits, lookup, pointwise

DTYPES = [np.float16, ml_dtypes.bfloat16]
VIEW = {np.float16: np.uint16, ml_dtypes.bfloat16: np.int16}  # the kernels' typed views
rng = np.random.default_rng(11)


def _table() -> np.ndarray:
    """Random float32 factors with zeros, infinities, NaN and subnormals among them."""
    table = (rng.standard_normal(lookup.TABLE_SIZE) * 4).astype(np.float32)
    table[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]
    return rng.permutation(table)


def _inputs(dtype, n: int, offset: int = 0):
    """g and x of n random elements (x: any bits), and an output starting `offset` elements
    into a cache-line aligned buffer."""
    g = (rng.standard_normal(n) * 8).astype(dtype)
    x = rng.integers(0, 1 << 16, n, dtype=np.uint16).view(dtype)
    out = R.aligned_zeros(n + offset, dtype)[offset:]
    return g, x, out


def _expected(table, g, x, dtype):
    """dtype(table[x's bits] * float32(g)), computed by NumPy."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (table[x.view(np.uint16)] * g.astype(np.float32)).astype(dtype)


def _run(table, g, x, out, dtype):
    view = VIEW[dtype]
    lookup.scaled_lookup(g.view(view), x.view(view), out.view(view), table)
    return out


def _same(ours, theirs) -> bool:
    """Equal bits, any two NaNs matching."""
    nan = np.isnan(ours.astype(np.float32)) & np.isnan(theirs.astype(np.float32))
    return np.array_equal(ours[~nan].view(np.uint16), theirs[~nan].view(np.uint16))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 32, 33, 47, 4096, 3 * 4096 + 21])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_rows_are_the_table_times_g_rounded_once(dtype, n, offset):
    """Every row length, the output on and off a cache line."""
    table = _table()
    g, x, out = _inputs(dtype, n, offset)
    assert _same(_run(table, g, x, out, dtype), _expected(table, g, x, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_streamed_outputs_give_the_same_bits(dtype):
    """An output of STREAM_BYTES and more, on a cache line (stored non-temporally) and off
    one (stored plainly): both the table times g rounded once."""
    table = _table()
    n = lookup.STREAM_BYTES // 2 + 4096 + 37
    g, x, aligned = _inputs(dtype, n)
    expected = _expected(table, g, x, dtype)
    assert _same(_run(table, g, x, aligned, dtype), expected)
    shifted = R.aligned_zeros(n + 1, dtype)[1:]
    assert _same(_run(table, g, x, shifted, dtype), expected)


def _fresh_kernel():
    """scaled_lookup compiled anew (inspectable, not cached), from the module's settings
    as they are now."""
    options = {k: v for k, v in lookup.scaled_lookup.targetoptions.items()
               if k not in ("cache", "nopython")}
    return njit(**options)(lookup.scaled_lookup.py_func)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instructions checked are x86's")
@pytest.mark.parametrize("gathers", [False, True], ids=["loads", "gathers"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_kernel_prefetches_streams_and_reads_the_table_as_chosen(
        dtype, gathers, monkeypatch):
    """g and x prefetched into every cache level (prefetcht0, not prefetchnta: see
    `lookup`), the output streamed and fenced, and the table read by scalar loads or, where
    `lookup.GATHERS`, by gathers on 32-bit indices, one per vector (built for AVX-512);
    either way the table times g rounded once, bfloat16's scaled
    span included."""
    monkeypatch.setattr(lookup, "GATHERS", gathers)
    kernel = _fresh_kernel()
    g, x, out = _inputs(dtype, 3 * 4096 + 21)
    view, table = VIEW[dtype], _table()
    kernel(g.view(view), x.view(view), out.view(view), table)
    assert _same(out, _expected(table, g, x, dtype))
    asm = kernel.inspect_asm(kernel.signatures[0])
    assert re.search(r"\tprefetcht0", asm) and not re.search(r"prefetchnta", asm)
    assert re.search(r"\tvmovnt", asm) and re.search(r"\tsfence", asm)
    assert not re.search(r"gatherq", asm)
    if not gathers:
        assert not re.search(r"gather", asm)
    elif "+avx512f" in bits.target_features():  # LLVM may scalarize them for AVX2
        assert re.search(r"\tvgatherdps", asm)
    if dtype is ml_dtypes.bfloat16:
        tiny, _ = _tiny_span_table()
        factors = lookup.bfloat16_factors(tiny.copy(), scale=True)
        kernel(g.view(view), x.view(view), out.view(view), *factors)
        assert _same(out, _expected(tiny, g, x, dtype))


def _tiny_span_table():
    """Random factors with a span of x (bfloat16 values -14.5 to -13.375, as GELU's) whose
    factors are subnormal or zero, and normal ones all around it."""
    table = _table()
    table[np.abs(table) < np.finfo(np.float32).tiny] = 1.0  # no subnormal outside the span
    x = (lookup.all_values(np.dtype(np.uint16)).astype(np.uint32) << 16).view(np.float32)
    span = (x >= -14.5) & (x <= -13.375)
    table[span] = rng.uniform(-1, 1, span.sum()) * np.float32(2.0**-126)  # subnormals
    table[np.flatnonzero(span)[3]] = -0.0
    return table, span


def test_bfloat16_factors_scale_the_span_of_subnormal_factors():
    """The span from the lowest to the highest x with a subnormal factor is held times
    2**TINY_SCALE, exactly; nothing else moves. Not scaled: where asked not to, and where a
    factor in the span is too large to scale."""
    table, span = _tiny_span_table()
    factors = lookup.bfloat16_factors(table.copy(), scale=True)
    assert (factors.scaled_from, factors.scaled_to) == (-14.5, -13.375)
    assert np.array_equal(factors.table[~span].view(np.uint32), table[~span].view(np.uint32))
    assert np.array_equal(factors.table[span].astype(np.float64),
                          table[span].astype(np.float64) * 2.0**lookup.TINY_SCALE)
    unscaled = lookup.bfloat16_factors(table.copy(), scale=False)
    assert unscaled.scaled_from > unscaled.scaled_to
    assert np.array_equal(unscaled.table.view(np.uint32), table.view(np.uint32))
    large = table.copy()
    large[np.flatnonzero(span)[5]] = 1.0
    assert lookup.bfloat16_factors(large, scale=True).scaled_from == np.inf


def test_scaled_span_gives_the_products_of_the_subnormal_factors():
    """Every x of the scaled span with every bfloat16 g (all 65536 patterns: subnormals,
    +-0, huge, inf, NaN), and every x with random g: bfloat16(float32(g) * factor) with the
    unscaled factor, by the table's own kernel on whatever this CPU builds."""
    table, span = _tiny_span_table()
    factors = lookup.bfloat16_factors(table.copy(), scale=True)
    every = lookup.all_values(np.dtype(np.int16))
    x = np.repeat(every[span], every.size)
    g = np.tile(every, span.sum())
    out = np.empty_like(x)
    lookup.scaled_lookup(g, x, out, *factors)
    dtype = ml_dtypes.bfloat16
    assert _same(out.view(dtype), _expected(table, g.view(dtype), x.view(dtype), dtype))
    g, x, out = _inputs(dtype, 3 * 4096 + 21)
    lookup.scaled_lookup(g.view(np.int16), x.view(np.int16), out.view(np.int16), *factors)
    assert _same(out, _expected(table, g, x, dtype))



@pytest.mark.parametrize("low, high", [(13.375, 14.5), (-0.5, 0.75), (-1e-30, -1e-38)],
                         ids=["positive", "across 0", "tiny negative"])
def test_spans_of_either_sign_make_their_lanes_exact(low, high):
    """The branch finds a span's lanes by x's 16-bit words alone (`lookup._span_words`): a
    span of positive x and one of tiny negative x are scaled, one across 0 is not (its words
    are no one run); each gives the products of the unscaled factors for every x in it, the
    other lanes of each vector (x next to the span on either side among them) those of
    their own factors."""
    dtype = ml_dtypes.bfloat16
    table = _table()
    table[np.abs(table) < np.finfo(np.float32).tiny] = 1.0
    x_all = (lookup.all_values(np.dtype(np.uint16)).astype(np.uint32) << 16).view(np.float32)
    span = (x_all >= low) & (x_all <= high)
    table[span] = rng.uniform(-1, 1, span.sum()) * np.float32(2.0**-126)
    factors = lookup.bfloat16_factors(table.copy(), scale=True)
    one_sign = np.signbit(low) == np.signbit(high)
    scaled = (factors.scaled_from, factors.scaled_to)
    assert scaled == ((x_all[span].min(), x_all[span].max()) if one_sign else (np.inf, -np.inf))
    words = lookup.all_values(np.dtype(np.int16))
    inside = rng.choice(words[span], 4096)
    first, last = np.flatnonzero(span)[[0, -1]]  # bit order: the span's words are one run
    beside = rng.choice(words[[first - 1, last + 1]], 4096)
    outside = -(10.0 ** rng.uniform(0, 30, 4096)).astype(dtype)  # no word of any span here
    pick = rng.random(4096)
    x = np.where(pick < 0.03, inside, np.where(pick < 0.1, beside, outside.view(np.int16)))
    g = (rng.standard_normal(4096) * 8).astype(dtype)
    g[::7] = np.array(2.0**100, dtype)  # normal products of the subnormal factors too
    out = np.empty(4096, np.int16)
    lookup.scaled_lookup(g.view(np.int16), x, out, *factors)
    assert _same(out.view(dtype), _expected(table, g, x.view(dtype), dtype))


def test_a_vector_with_one_lane_in_the_scaled_span_makes_that_lane_exact():
    """Rows of 64 elements (two pairs of vectors), x outside the scaled span but for one
    element, at each position in turn, whose g makes a subnormal product: the vector holding
    it takes the exact products (`lookup._exact_products` branches on whether any lane is
    in the span), its other lanes keep the plain products, and so does every other vector."""
    table, span = _tiny_span_table()
    factors = lookup.bfloat16_factors(table.copy(), scale=True)
    dtype, width = ml_dtypes.bfloat16, 64
    every = lookup.all_values(np.dtype(np.int16))
    outside = rng.choice(every[~span], (width, width))
    inside = rng.choice(every[span], width)
    x = outside.copy()
    x[np.arange(width), np.arange(width)] = inside
    g = (rng.standard_normal((width, width)) * 8).astype(dtype).view(np.int16)
    g[np.arange(width), np.arange(width)] = np.array(3.0, dtype).view(np.int16)
    out = np.empty_like(x)
    lookup.scaled_lookup(g.ravel(), x.ravel(), out.ravel(), *factors)
    assert _same(out.view(dtype), _expected(table, g.view(dtype), x.view(dtype), dtype))


def test_bfloat16_gelu_tables_are_scaled_where_the_build_scales():
    """The bfloat16 GELU tables hold their subnormals scaled in builds for AVX-512 (and
    none is left there), as they were elsewhere."""
    for use_tanh in (False, True):
        factors = pointwise._derivative_table(pointwise.BF16, use_tanh)
        assert (factors.scaled_from <= factors.scaled_to) == lookup.SCALES_SUBNORMALS
        tiny = (factors.table != 0) & (np.abs(factors.table) < np.finfo(np.float32).tiny)
        assert tiny.any() != lookup.SCALES_SUBNORMALS


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the levels checked are x86's")
@pytest.mark.parametrize("level", ["native", "avx2"])
def test_each_level_chooses_its_table_reads_and_subnormal_scaling(level, tmp_path):
    """Built for AVX-512 the bfloat16 tables are scaled everywhere and gathered from on
    Intel CPUs; built for AVX2 they are scaled on Intel CPUs only and never gathered from
    (`lookup.GATHERS`, `lookup.SCALES_SUBNORMALS`): the choices each build makes."""
    env = {**os.environ, **(isa.ENVIRONMENTS["avx2"] if level == "avx2" else {}),
           "NUMBA_CACHE_DIR": str(tmp_path)}
    code = ("from aclnn.kernels import bits, lookup\n"
            "print('+avx512f' in bits.target_features(), lookup.GATHERS, "
            "lookup.SCALES_SUBNORMALS)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    avx512, gathers, scales = (word == "True" for word in done.stdout.split())
    intel = bits.cpu_vendor() == "GenuineIntel"
    assert not (level == "avx2" and avx512)
    assert gathers == (avx512 and intel)
    assert scales == (avx512 or intel)
