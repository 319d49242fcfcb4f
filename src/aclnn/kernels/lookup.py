"""Elementwise operators of one 16-bit input by table: out = narrow(table[x's bits] * g).

A float16 or bfloat16 input has 65536 values, so a factor that depends on x alone (GELU's
derivative) is computed once per value, by the same float32 operations as the kernel it
stands for, and looked up: the same bits at memory speed, whatever the values.

The rows go 16 lanes at a time in LLVM IR: each lane's x is read as a scalar and its factor
by a scalar load from the table (256 KiB of float32), or all 16 by one gather where that
measured faster (GATHERS), g is widened and the product rounded in registers, and large
outputs are stored non-temporally. g and x are
prefetched _PREFETCH_BYTES ahead into every cache level (prefetcht0). Numba's own loop
over the elements read the table with gather instructions where the CPU has AVX-512,
slower than scalar loads there; reading x as a vector and taking its lanes apart ran no
faster than the gathers. 16M elements, 2 threads, alternating with that loop in one
process, new / old time for x from N(0,1), U(+-8), U(+-100) (on a Zen 4 EPYC, the
inputs then prefetched non-temporally):

    built for AVX-512   float16  1.93 / 3.43, 1.89 / 3.25, 2.40 / 3.90 ms
                        bfloat16 2.62 / 2.97, 2.27 / 2.44, 2.41 / 3.37
    built for AVX2      float16  2.01 / 3.72, 2.32 / 3.77, 2.41 / 3.54
                        bfloat16 1.81 / 2.01, 1.70 / 1.58, 2.53 / 3.03

(prefetch distances: float16 took 0.87, 0.67, 0.57 and 0.58 of the time without them at
512, 1024, 2048 and 4096 bytes; bfloat16 0.96-1.15 at any.) The non-temporal hint
(prefetchnta), meant to keep the streamed inputs from pushing the table out of L2, made
float16 2.3x slower on an Intel Xeon with AVX-512 (2 cores, 2 MiB L2 each, 2026-12-03):
there a line so prefetched goes to L1 alone and the table's misses evict it before its
load comes, which then goes to memory. 16M elements alternating in one process, median
ms for N(0, 1), U(+-8), U(+-100), non-temporal against prefetcht0: built for AVX-512
float16 9.83 / 4.26, 7.63 / 4.07, 7.73 / 4.25 (prefetcht1 4.21, 4.17, 4.12; prefetcht0
at 512, 1024, 4096 bytes 4.49, 4.32, 4.33 for N(0, 1); none 5.23-5.59), bfloat16 5.14 /
4.15, 5.07 / 4.21, 6.41 / 4.89; built for AVX2 float16 14.86 / 4.76, 8.24 / 4.64, 8.41 /
4.64, bfloat16 5.26 / 4.78, 5.32 / 5.00, 6.11 / 5.24. On a Zen 4 EPYC (2026-12-04,
through the benchmark, `--only "gelu f16 none"` built for AVX-512, two runs of each in
turn) the two hints ran within that machine's noise of each other: prefetchnta 3.70-5.85
ms over the four distributions, prefetcht0 4.16-7.62 (torch's own times swung 10-23 ms
in the same runs), so prefetcht0 stays everywhere. On the Xeon in cache (2^17 elements,
one thread, float16 N(0, 1)) the rows took 5.47 ns per 16 lanes, 3.88 with
llvm.masked.gather in place of the scalar loads (see GATHERS); vectors built of broadcast
loads blended in turn 5.40.

bfloat16 lanes go in the row kernels' unpacked order (`lanes.row_loader`, the factors
loaded in that order; a table's NaNs, float32 results from bfloat16 values, have the zero
low half `lanes.row_narrower` needs): 0.90-0.96 of the time built for AVX2 (N(0, 1)
1.60-1.62 ms against 1.67-1.77), the same for AVX-512. A subnormal table value makes its
products take x86 microcode assists: float16 tables hold none (`float16_factors`);
bfloat16 tables built for AVX-512, or for an Intel CPU, hold theirs scaled into the normal
range, their products made exact by integer steps (`bfloat16_factors`,
SCALES_SUBNORMALS).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from .bits import (
    BF16,
    CACHE_LINE_BYTES,
    F16,
    STREAM_BYTES,
    copy_bytes,
    cpu_vendor,
    store_fence,
    target_features,
)
from .lanes import (
    I16,
    I32,
    I64,
    LANES,
    VF,
    VH,
    VI,
    array_data,
    as_i1,
    broadcast,
    function,
    lane_order,
    pair_loop,
    row_loader,
    row_narrower,
    splat,
    split_row,
    vector_gep,
)
from .typed import element_code

TABLE_SIZE = 1 << 16
BLOCK = 4096  # elements per row
RUNS = 64  # parallel work items
_VECTOR_BYTES = 2 * LANES  # one vector of 16-bit elements
PAD_BYTES = 3 * _VECTOR_BYTES  # the pad holds a partial vector of g, x and o
_PREFETCH_BYTES = 2048  # how far ahead g and x are prefetched
# Whether the factors are gathered (`_gathered_factors`) rather than loaded one by one
# (`_loaded_factors`): on an Intel Xeon built for AVX-512 (2026-12-03; 16M elements, two
# threads, N(0, 1), alternating in one process) the gather took bfloat16 from 3.52-3.55
# to 2.53-2.78 ms and float16 from 3.52-3.58 to 3.11 (in cache, one thread: 0.69-0.70x
# the time); with 64-bit indices (vgatherqps, two per vector) 0.81x and 0.88-0.91x. Built
# for AVX2 there, gathers took 1.4-1.9x the time, and on a Zen 4 EPYC built for AVX-512
# Numba's own gathering loop ran slower than scalar loads (see above), so only Intel CPUs
# with AVX-512 gather.
GATHERS = "+avx512f" in target_features() and cpu_vendor() == "GenuineIntel"


TINY_SCALE = 64  # a scaled bfloat16 factor is held times 2**TINY_SCALE
_SIGN = -0x80000000  # float32 bits as int32: the sign bit
_NORMAL_SCALED = 2.0 ** (-126 + TINY_SCALE)  # a scaled product from which g * factor is normal


def _exact_products(builder, product, g, factors, x_pointer, order, span_words):
    """g * factor, rounded once to float32, where `factors` (in the lane order `order`)
    holds the factors of the lanes whose x lies in the scaled span (`span_words`, see
    `_span_words`) times 2**TINY_SCALE, and `product` is g * factors rounded: those lanes'
    products are made without a subnormal operand or result, in a branch taken only by the
    vectors holding such a lane (the others' products are `product` as it is), the lanes
    found by one unsigned compare of x's 16-bit words at `x_pointer`. A product scaled back
    into the normal range (|product| >= 2**(TINY_SCALE - 126), NaN and inf too) is
    multiplied by 2**-TINY_SCALE; a smaller one is rounded to the subnormal grid by one FMA
    on the exact product, |g| |factor| + 2**(TINY_SCALE - 126), whose low bits are then the
    result's (the float32 product's single rounding, not a second one after g *
    factor's)."""
    b = builder
    words = b.load(b.bitcast(x_pointer, VH.as_pointer()), align=1)
    low, width = span_words
    hit = b.icmp_unsigned("<=", b.sub(words, low), width)
    before = b.basic_block
    with b.if_then(b.icmp_unsigned("!=", b.bitcast(hit, ir.IntType(LANES)),
                                   ir.IntType(LANES)(0)), likely=False):
        scaled = b.shuffle_vector(hit, hit, ir.Constant(VI, list(order)))
        exact = _scaled_products(b, product, g, factors, scaled)
        after = b.basic_block
    result = b.phi(VF)
    result.add_incoming(product, before)
    result.add_incoming(exact, after)
    return result


def _span_words(builder, scaled_from, scaled_to):
    """(low, width), i16 vectors: a bfloat16 word w is in [low, low + width] (unsigned, by
    one subtract and one compare) exactly for the x from `scaled_from` to `scaled_to`
    (float64 scalars, bfloat16 values of one sign, see `bfloat16_factors`)."""
    b = builder

    def word(bound):
        bits = b.bitcast(b.fptrunc(bound, ir.FloatType()), I32)
        return b.trunc(b.lshr(bits, I32(16)), I16)
    first, last = word(scaled_from), word(scaled_to)
    ordered = b.icmp_unsigned("<", first, last)
    low, high = b.select(ordered, first, last), b.select(ordered, last, first)
    return broadcast(b, low, VH), broadcast(b, b.sub(high, low), VH)


def _scaled_products(builder, product, g, factors, scaled):
    """`_exact_products` for the lanes of the i1 vector `scaled`, all lanes at once."""
    b = builder

    def bits(value):
        return b.bitcast(value, VI)

    def magnitude(value):
        return b.bitcast(b.and_(bits(value), splat(VI, ~_SIGN)), VF)

    normal = b.fcmp_unordered(">=", magnitude(product), splat(VF, _NORMAL_SCALED))
    unscale = b.select(b.and_(scaled, normal), splat(VF, 2.0 ** -TINY_SCALE), splat(VF, 1.0))
    rounded = bits(b.fmul(product, unscale))
    base = splat(VF, _NORMAL_SCALED)
    fma = function(b, f"llvm.fma.v{LANES}f32", VF, [VF, VF, VF])
    grid = b.sub(bits(b.call(fma, [magnitude(g), magnitude(factors), base])), bits(base))
    subnormal = b.or_(b.and_(bits(product), splat(VI, _SIGN)), grid)
    tiny = b.and_(scaled, b.not_(normal))
    return b.bitcast(b.select(tiny, subnormal, rounded), VF)


def _loaded_factors(builder, table, x_pointer, order):
    """The factors of the LANES x at `x_pointer` in the lane order `order`: each x's word
    and its entry of `table` by scalar loads, put into the vector lane by lane."""
    words = builder.bitcast(x_pointer, I16.as_pointer())
    factors = ir.Constant(VF, ir.Undefined)
    for lane in range(LANES):
        word = builder.load(builder.gep(words, [I32(order[lane])]), align=1)
        factor = builder.load(builder.gep(table, [builder.zext(word, I64)]))
        factors = builder.insert_element(factors, factor, I32(lane))
    return factors


def _gathered_factors(builder, table, x_pointer, order):
    """`_loaded_factors` by one vector load of the words and one gather of their entries
    (llvm.masked.gather on 32-bit indices: vgatherdps on x86)."""
    words = builder.load(builder.bitcast(x_pointer, VH.as_pointer()), align=1)
    words = builder.shuffle_vector(words, words, ir.Constant(VI, list(order)))
    pointers = vector_gep(builder, table, builder.zext(words, VI))
    every = ir.VectorType(ir.IntType(1), LANES)
    gather = function(builder, f"llvm.masked.gather.v{LANES}f32.v{LANES}p0", VF,
                      [pointers.type, I32, every, VF])
    return builder.call(gather, [pointers, I32(4), ir.Constant(every, [1] * LANES),
                                 ir.Constant(VF, ir.Undefined)])


def _lookup_block(code: int, scaled: bool = False):
    """The vector loop over `vectors` vectors of 16-bit elements of `code` from byte `at`
    of the uint8 arrays g, x, o: o = narrow(table[x] * g), two vectors (one 64-byte line)
    at a time, non-temporally where `streaming` (o + at aligned to 64 bytes). `scaled`
    (bfloat16): the factors of x from `scaled_from` to `scaled_to` are held times
    2**TINY_SCALE (`_exact_products`)."""
    def block(typingctx, g, x, o, at, vectors, table, streaming, scaled_from, scaled_to):
        def codegen(context, builder, signature, args):
            data = array_data(context, builder, signature, args)
            _, _, _, at, vectors, _, streaming, scaled_from, scaled_to = args
            entries, narrowed = data(5), row_narrower(builder, code)
            loaded, order = row_loader(builder, code), lane_order(code)
            step = vectors.type(_VECTOR_BYTES)
            span_words = _span_words(builder, scaled_from, scaled_to) if scaled else None

            def address(i, v):
                return builder.gep(data(i), [builder.add(at, builder.mul(v, step))])

            def result(v):
                factors = (_gathered_factors if GATHERS else _loaded_factors)(
                    builder, entries, address(1, v), order)
                g = loaded(address(0, v))
                product = builder.fmul(factors, g)
                if scaled:
                    product = _exact_products(builder, product, g, factors,
                                              address(1, v), order, span_words)
                return narrowed(product)

            pair_loop(builder, code, vectors, result, lambda v: address(2, v),
                      as_i1(builder, streaming), lambda v: [address(0, v), address(1, v)],
                      vectors.type(_PREFETCH_BYTES))
            return context.get_dummy_value()

        return types.none(g, x, o, types.intp, types.intp, table, types.boolean, types.float64,
                          types.float64), codegen
    block.__doc__ = _lookup_block.__doc__
    return intrinsic(block)


_f16_block, _bf16_block = _lookup_block(F16), _lookup_block(BF16)
_bf16_scaled_block = _lookup_block(BF16, scaled=True)


@njit(inline="always", error_model="numpy")
def _vectors(code, g, x, o, at, vectors, table, streaming, scaled_from, scaled_to):
    """`vectors` vectors from byte `at`, by the block of `code` (and of a scaled span)."""
    if code == F16:
        _f16_block(g, x, o, at, vectors, table, streaming, scaled_from, scaled_to)
    elif scaled_from <= scaled_to:
        _bf16_scaled_block(g, x, o, at, vectors, table, streaming, scaled_from, scaled_to)
    else:
        _bf16_block(g, x, o, at, vectors, table, streaming, scaled_from, scaled_to)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def scaled_lookup(grad, x, out, table, scaled_from=np.inf, scaled_to=-np.inf):
    """out = narrow(table[bits of x] * g) over flat typed views of one 16-bit dtype (float16
    as uint16, bfloat16 as int16). The rows are blocks of BLOCK elements, handed out in up
    to RUNS runs; an output of STREAM_BYTES or more that starts on a cache line is stored
    non-temporally, each run fenced. A row's last partial vector goes through a pad, so
    every element is computed by the same code. bfloat16: the factors of x from
    `scaled_from` to `scaled_to` (of one sign; none where from > to) are held times
    2**TINY_SCALE (`bfloat16_factors`)."""
    code = element_code(out)
    n = out.size
    gb, xb, ob = grad.view(np.uint8), x.view(np.uint8), out.view(np.uint8)
    streaming = out.nbytes >= STREAM_BYTES and out.ctypes.data % CACHE_LINE_BYTES == 0
    blocks = (n + BLOCK - 1) // BLOCK
    runs = min(blocks, RUNS)
    for run in prange(runs):
        pad = np.zeros(PAD_BYTES, np.uint8)  # g, x, o: x's bits index the table
        g_pad, x_pad = pad[:_VECTOR_BYTES], pad[_VECTOR_BYTES:2 * _VECTOR_BYTES]
        o_pad = pad[2 * _VECTOR_BYTES:]
        for b in range(run * blocks // runs, (run + 1) * blocks // runs):
            at = 2 * b * BLOCK
            vectors, done, rest = split_row(code, min(BLOCK, n - b * BLOCK))
            _vectors(code, gb, xb, ob, at, vectors, table, streaming, scaled_from, scaled_to)
            if rest:
                copy_bytes(g_pad, 0, gb, at + done, rest)
                copy_bytes(x_pad, 0, xb, at + done, rest)
                _vectors(code, g_pad, x_pad, o_pad, 0, 1, table, False, scaled_from,
                         scaled_to)
                copy_bytes(ob, at + done, o_pad, 0, rest)
        if streaming:
            store_fence()


# What a float16 table holds in place of a subnormal factor (see `float16_factors`): any
# value from 2**-102 to 2**-42 makes a normal float32 product with every nonzero float16 g
# (|g| >= 2**-24) that still rounds to a float16 +-0 (|g| < 2**16), as the subnormal does.
FLOAT16_TINY_FACTOR = np.float32(2.0**-100)


def float16_factors(table: np.ndarray) -> np.ndarray:
    """`table` (float32 factors), each subnormal replaced in place by +-FLOAT16_TINY_FACTOR,
    for float16 products: g times either rounds to the same float16 (+-0 with the same sign,
    +-inf for an infinite g, g's NaN), but a product with a subnormal operand or result
    takes x86 microcode assists. GELU' is subnormal for x in (-14.6, -13.2) (erf form),
    0.3-0.6 % of x from U(+-100), which took 1.13-1.29x the time of N(0, 1) with the
    subnormals and 0.96-0.99x without (16M elements, both forms, AVX-512 and AVX2 builds,
    alternating). bfloat16 results can be subnormal themselves, so bfloat16 tables keep
    them or scale them (`bfloat16_factors`); earlier exact designs ran slower than the
    assists (U(+-100): 1.48x; an exact product in a branch for the vectors holding such a
    factor, float64 and integer rounding, took 1.55x, and 1.3x longer on every input built
    for AVX2, where the per-vector test costs; stand-ins of +-1 for the factors under
    2**-100, the vectors holding one marked branch-free in the loop and their lanes
    recomputed exactly in float64 after each row (bit-exact over every g): N(0, 1)
    1.16-1.19x and U(+-100) 1.12x the time before, U(+-100) 1.43x of N(0, 1); per 16M,
    0.25-0.29 ms for the marks, 0.54 for the recomputing, 0.2 for the fence each row then
    needs between its streamed stores and the recomputed ones)."""
    subnormal = (table != 0) & (np.abs(table) < np.finfo(np.float32).tiny)
    table[subnormal] = np.copysign(FLOAT16_TINY_FACTOR, table[subnormal])
    return table


# Built for AVX-512 the exact products, made for every vector, cost 14.4 cycles per 16
# lanes in cache against 11.8 (x from N(0, 1), one thread) and saved the assists (U(+-100):
# 14.7 against 16.5); 16M elements alternating with the unscaled table: N(0, 1) 1.06x the
# time (tanh form 1.09x), U(+-100) 0.82x (0.90x). Made only for the vectors holding an x of
# the span (a branch), against made for every vector, 16M elements from memory on a Zen 4
# EPYC, alternating in one process (same bits): erf form N(0, 1) 4.33-4.45 ms against
# 5.57-5.85, U(+-100) 4.65-5.45 against 5.01-6.08; tanh form 4.66-4.76 against 5.82-5.97
# and 4.70-4.92 against 5.46-5.52. Built for AVX2, where a mask of 16 lanes spans two
# registers (LLVM packs them), 16M elements from N(0, 1) took 3.9 ms against 2.25 made for
# every vector (3.2 with the masks cut into 8-lane pieces; 19.0 against 11.7 cycles per 16
# lanes in cache), and with the branch 5.0 against 4.2-4.4 with the subnormals kept
# (U(+-100) 5.6-6.1 against 4.6), so bfloat16 tables built for AVX2 keep their subnormals.
# On a Zen 5 EPYC (family 26), erf form, 16M elements alternating in one process, the
# branch and the kept subnormals ran alike (AVX-512: N(0, 1) 2.61-2.84 ms against
# 2.70-2.83, U(+-100) 3.21-3.48 against 3.18-3.47), U(+-100) 1.1-1.4x the time of N(0, 1)
# with the kept table (0.98-1.06x with its x from -15 to -13.3 replaced). Not taken there:
# the exact products made for every vector, no branch, with the final pick made on the
# integer bits (as a float32 select it cost U(+-100) 1.3-1.4x, as if the subnormal result
# took an assist): U(+-100) 2.28-2.39 against N(0, 1) 2.32-2.50 built for AVX-512, but
# N(0, 1) 1.05-1.14x the kept table's time (an earlier such form on the Zen 4: 1.25-1.35x),
# and built for AVX2 1.7x (3.56 against 2.09); built for AVX-512, a row's products first
# stored to a scratch row in L1, the vectors holding an x of the span marked branch-free by
# x's bits and remade, then the row streamed out (N(0, 1) 1.3-1.55x: the streamed copy's
# stores come in a burst, in chunks of 256 or 1024 elements too), or the marked vectors'
# lines remade and streamed again in place (U(+-100) 1.08-1.31x the kept table's time:
# each such line is written twice). There too (2026-12-02), the branch tested on x's 16-bit
# words (one unsigned compare of 16 lanes, the float32 test inside the branch only): built
# for AVX2 U(+-100) 2.75-2.83 ms against the kept table's 2.50-2.55 (the float32-test
# branch 2.87-2.92; N(0, 1) alike), for AVX-512 U(+-100) 2.41-2.44 against the float32-test
# branch's 2.53-2.55 but N(0, 1) 1.93-1.98 against 1.88-1.91 (the kept table there:
# 1.75-1.77 and 2.33-2.34; on the Zen 4 the branch won, see above). On an Intel Xeon with
# AVX-512 (2026-12-03), whose AVX-512 (EVEX) instructions take subnormals without assists
# but whose AVX2 (VEX) ones do not, 16M elements alternating in one process, erf / tanh
# form: built for AVX2 the kept table took N(0, 1) 3.10 / 3.04 ms, U(+-100) 5.00 / 4.08;
# the float32-test branch 3.48 / 3.44 and 4.56 / 4.07; the word-test branch 3.17 / 3.04
# and 4.04 / 3.53; built for AVX-512 all three 3.42-3.57 for either x. So the branch
# tests x's words, and bfloat16 tables are scaled where the build has AVX-512 or the CPU
# is Intel's. What the branch costs there, built for AVX2 (erf form, same process): x
# from U(+-100) 3.90-3.97 ms, N(0, 1) 3.05-3.09, U(+-100) with the span's x replaced
# 3.11-3.19; the branch with an empty body 3.53-3.62, so about 0.5 ms is its mispredictions
# (9 % of the vectors hold an x of the span) and 0.35 its body; made for every vector, no
# branch, 6.6-7.2 (with its masks as 32-bit lanes, the span's lanes found by a test on x's
# bits and every select a bitwise blend, the same bits: 5.7-6.1 in two rounds of three,
# 6.3-7.4 in a disturbed one; the loop of scalar loads leaves no room); inside the
# branch those masks within 3 %: not taken; the span's lanes taken from the word test
# too (no float32 test: spans of one sign only, `bfloat16_factors`), U(+-100) 3.87-3.93
# against 4.00-4.08 in five rounds, N(0, 1) alike (tanh form alike; built for AVX-512
# U(+-100) 3.19-3.28 against 3.19-3.33): so the word test is the only one.
# Nor a branch per 8-lane half (one register built for AVX2), the body made for that
# half alone: N(0, 1) 3.15-3.30 ms against 2.90-3.01, U(+-100) 3.99-4.08 against
# 3.70-3.80 (same bits; 2026-12-03, four rounds): the second branch costs more than
# the halved body saves.
SCALES_SUBNORMALS = "+avx512f" in target_features() or cpu_vendor() == "GenuineIntel"


class Factors(NamedTuple):
    """A table of factors by x's bits and the span of x (float32 values, from and to; none
    where from > to) whose factors it holds times 2**TINY_SCALE: `scaled_lookup`'s last
    arguments."""

    table: np.ndarray
    scaled_from: float = np.inf
    scaled_to: float = -np.inf


def bfloat16_factors(table: np.ndarray, scale: bool = SCALES_SUBNORMALS) -> Factors:
    """`table` (float32 factors of every bfloat16 value), its subnormals scaled where
    `scale`: the span of x from the lowest to the highest value with a subnormal factor
    (GELU': x from -14.5 to -13.375, 19 values, 0.6 % of x from U(+-100)) is held times
    2**TINY_SCALE, every factor there under 2**-TINY_SCALE (so no product with a bfloat16
    g overflows), or nothing is; nothing either where the span holds x of both signs (its
    words would not be one run, see `_span_words`). With their subnormal factors the
    products took 1.33-1.37x the time of x from N(0, 1) (16M elements, both ISA levels),
    1.02x with those x replaced."""
    x = (all_values(np.dtype(np.uint16)).astype(np.uint32) << 16).view(np.float32)
    tiny = (table != 0) & (np.abs(table) < np.finfo(np.float32).tiny)
    if not (scale and tiny.any()):
        return Factors(table)
    low, high = x[tiny].min(), x[tiny].max()
    span = (x >= low) & (x <= high)
    if np.signbit(low) != np.signbit(high) or not (np.abs(table[span]) < 2.0**-TINY_SCALE).all():
        return Factors(table)
    table[span] = table[span] * np.float32(2.0**TINY_SCALE)
    return Factors(table, float(low), float(high))


def factors(table: np.ndarray, float16: bool) -> Factors:
    """A table of float32 factors of every value of a 16-bit dtype (`float16`, else
    bfloat16) as that dtype's kernel takes it: `float16_factors` or `bfloat16_factors`."""
    return Factors(float16_factors(table)) if float16 else bfloat16_factors(table)


def all_values(view_dtype: np.dtype) -> np.ndarray:
    """Every 16-bit pattern, in bit order, as a typed view of `view_dtype`."""
    return np.arange(TABLE_SIZE, dtype=np.uint32).astype(np.uint16).view(view_dtype)
