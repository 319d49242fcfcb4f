"""The SmoothL1 / L1 backward kernel for contiguous operands of one dtype, 16 lanes at a
time in LLVM IR, with streaming stores for large outputs.

    o = g * slope(x - y) * scale,  slope(d) = d / beta if |d| < beta else sign(d)

(sign keeps a zero's sign and NaN; beta = 0 is L1), in float32 from float32, float16 or
bfloat16 operands converted in registers, rounded once to the output's dtype. A scalar
gradient comes folded into `scale` (o = slope * scale). These are the operations, in the
same order, of the tiled kernel in `pointwise`, so every layout gives the same bits.

The slope is computed branch-free, as a quotient clamped to [-1, 1] or (L1) from d's
bits, in one of three ways chosen per call by `slope_factor` (each the formula above, bit
for bit):

    MULTIPLY  q = d * (1/beta)        beta a power of two with a finite reciprocal (1 is):
                                      the same correctly rounded number as d / beta, NaN
                                      only for a NaN d; slope = clamp(q)
    SIGN      slope = +-1, d's sign   beta = 0 (L1), by its bits, unclamped; d itself
                                      where d is +-0 or NaN (so +-0 and NaN stay)
    DIVIDE    q = d / beta            any other beta; q is NaN also for d = +-inf over beta
                                      = inf, which must give +-1: slope = clamp(d if q is
                                      NaN else q)

|d| < beta gives |q| <= 1; |d| >= beta > 0 gives |q| >= 1, so +-1. A scale of 1 is not
multiplied by. SIGN by d's bits, against q = d * 2**127 * 2**127 clamped (the same bits),
16M elements alternating in one process on a Zen 4 EPYC: float16 0.91-0.95 of the time
built for AVX2 and 0.92-0.99 for AVX-512; bfloat16 0.96-1.03, float32 within noise; not
clamped then (it is +-1, +-0 or NaN already): 0.93-1.05 of that again.

The kernel is bound by memory. A plain store first reads the line it writes; a
non-temporal one does not, so for outputs too large to stay in the caches the vectors go
to memory with streaming stores: about 20 % less time for a 3-read-1-write float32 loop
over 16M elements on this project's machine (3.2-5.7 ms vs 4.1-6.9 ms, three runs).
The 16-bit loops, slowed by their conversions, also prefetch their operands ahead: 16M
elements, 2 threads, AVX2, alternating with the loop without it: float16 0.82-0.94 of the
time, bfloat16 0.84-0.89 (one thread: 0.86 and 0.77), in cache unchanged; the float32
loop gained 2 % (noise), so it has none. The contiguous kernel's and the tiled kernel's
rows go `lanes.LOSS_PREFETCH_BYTES` ahead.

On a Zen 1 EPYC (AVX2, 2 threads) the float16 SmoothL1 and L1 loops compute in cache at
5.2-5.6 ms per 16M elements, about the 5.7-6.0 ms in which a streamed triad moves their
bytes, so there they run at whichever is slower, compute or memory: 0.77-0.96 of that
triad from one run to the next. Widening float16 by integer shifts instead of
`vcvtph2ps` (a probe; it gives other values) took 1.1-1.2x that time; with the multiply
by g made an add, no less time. On a Zen 3 EPYC (AVX2, 2.45 GHz) the 16-bit rows compute
16M elements in cache in 2.1-3.4 ms on two threads (each repeating a 4096-element row,
the benchmark's compute probe; float32 1.9-4.1, the machine noisy), against
3.2-3.7 ms in which the streamed triad moves their bytes: there too compute and memory
each take most of the call, which ran at 0.81-0.91 of that triad in 16 bits and 0.86-0.96
in float32 (medians over 30-60 alternations through the two-phase API; the float32 kernel
called directly 0.89-0.95), the same probe timed twice in one alternation 0.94-1.02 of
itself. Prefetch distances of 2048, 8192 and 16384 bytes there differed by less than
that noise, as did the t1 prefetch hint against t0 (0.88-0.90 against 0.86-0.89). The F16C
conversions are most of the float16 rows' compute there: a loop doing nothing else
(o = f16(f32(x) + f32(y) + f32(g)), vectorised by LLVM) ran in cache at 0.16-0.21 ns
per element on one thread where the L1 row ran at 0.21-0.27; x - y as a fused
multiply-add (off the pipes the conversions use) was no faster. When memory is fast (the
triad over a case's buffers in 2.0-2.4 ms rather than 3.0-4.2) the 16-bit calls ran at
0.74-0.80 of the triad's speed, in slower spells at 0.80-0.97.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .bits import BF16, F16, F32, copy_bytes, element_bytes, store_fence
from .lanes import (
    LANES,
    LOSS_PREFETCH_BYTES,
    VF,
    VI,
    as_i1,
    broadcast,
    pair_loop,
    row_loader,
    row_narrower,
    splat,
    split_row,
    store,
)
from .typed import element_code

BLOCK = 4096  # elements per row
RUNS = 64  # parallel work items
_PAD = 4 * LANES  # one vector of float32; the pad holds x, y, g, o at 0, 64, 128, 192
PAD_BYTES = 4 * _PAD  # the `pad` scratch of a row


def _row_block(code: int):
    """The vector loop over `vectors` vectors of elements of `code` at byte offsets of
    uint8 arrays (see `smooth_l1_row` for `factor`, `mode` and `has_grad`); `scaled`: the
    scale is not 1 (else it is not multiplied by); `streaming`: stored non-temporally (see
    `lanes.store`); `ahead`: how many bytes ahead a 16-bit loop prefetches its inputs
    (None: it does not, decided where the loop is compiled)."""
    step_bytes = LANES * element_bytes(code)

    def block(typingctx, g, g_at, x, x_at, y, y_at, o, o_at, vectors, factor, scale, has_grad,
              mode, scaled, streaming, ahead):
        def codegen(context, builder, signature, args):
            def address(i, at, v):
                data = context.make_array(signature.args[i])(context, builder, value=args[i])
                offset = builder.add(at, builder.mul(v, ir_step))
                return builder.gep(data.data, [offset])

            def load(i, at, v):
                return loaded(address(i, at, v))

            (_, g_at, _, x_at, _, y_at, _, o_at, vectors, factor, scale, has_grad, mode,
             scaled, streaming, ahead) = args
            ir_step = vectors.type(step_bytes)
            prefetching = not isinstance(signature.args[-1], types.NoneType)
            loaded, narrowed = row_loader(builder, code), row_narrower(builder, code)
            factor_v, scale_v = broadcast(builder, factor, VF), broadcast(builder, scale, VF)
            one, minus_one = splat(VF, 1.0), splat(VF, -1.0)
            sign_bit = splat(VI, -0x80000000)
            streaming = as_i1(builder, streaming)

            def result(v, form):
                quotient, with_grad, with_scale = form
                d = builder.fsub(load(2, x_at, v), load(4, y_at, v))
                if quotient == DIVIDE:
                    q = builder.fdiv(d, factor_v)
                    q = builder.select(builder.fcmp_unordered("uno", q, q), d, q)
                elif quotient == MULTIPLY:
                    q = builder.fmul(d, factor_v)
                if quotient == SIGN:  # +-1 with d's sign, d itself where +-0 or NaN
                    unit = builder.or_(builder.and_(builder.bitcast(d, VI), sign_bit),
                                       builder.bitcast(one, VI))
                    slope = builder.select(builder.fcmp_unordered("==", d, splat(VF, 0.0)), d,
                                           builder.bitcast(unit, VF))
                else:  # the quotient clamped to [-1, 1]
                    low = builder.select(builder.fcmp_ordered("<", q, minus_one), minus_one, q)
                    slope = builder.select(builder.fcmp_ordered(">", low, one), one, low)
                if with_grad:
                    slope = builder.fmul(load(0, g_at, v), slope)
                return narrowed(builder.fmul(slope, scale_v) if with_scale else slope)

            def loop(form) -> None:
                if code == F32:
                    with cgutils.for_range(builder, vectors) as index:
                        v = index.index
                        store(builder, code, result(v, form), address(6, o_at, v), streaming)
                    return
                operands = ((2, x_at), (4, y_at), (0, g_at))[:3 if form[1] else 2]
                pair_loop(builder, code, vectors, lambda v: result(v, form),
                          lambda v: address(6, o_at, v), streaming,
                          (lambda v: [address(i, at, v) for i, at in operands])
                          if prefetching else (), ahead)

            def branches(choices, form=()) -> None:
                """One loop per combination of the run-time choices, picked outside it:
                each choice (value, its options) becomes one entry of `form`."""
                if not choices:
                    loop(form)
                    return
                (value, options), rest = choices[0], choices[1:]
                if len(options) == 1:
                    branches(rest, (*form, options[0]))
                    return
                picked = builder.icmp_unsigned("==", value, value.type(int(options[0])))
                with builder.if_else(picked) as (first, others):
                    with first:
                        branches(rest, (*form, options[0]))
                    with others:
                        branches(((value, options[1:]), *rest), form)

            flags = (False, True)
            branches(((mode, (MULTIPLY, SIGN, DIVIDE)),
                      (as_i1(builder, has_grad), flags), (as_i1(builder, scaled), flags)))
            return context.get_dummy_value()

        sig = types.none(g, types.intp, x, types.intp, y, types.intp, o, types.intp,
                         types.intp, types.float32, types.float32, types.boolean, types.intp,
                         types.boolean, types.boolean,
                         ahead if isinstance(ahead, types.NoneType) else types.intp)
        return sig, codegen
    block.__doc__ = _row_block.__doc__
    return intrinsic(block)


_f32_block, _f16_block, _bf16_block = (_row_block(code) for code in (F32, F16, BF16))


MULTIPLY, SIGN, DIVIDE = 0, 1, 2  # how the slope's quotient is computed (see above)


def slope_factor(beta: float) -> tuple[np.float32, int]:
    """(factor, mode): how the kernels compute the slope's quotient for `beta` (a float32
    >= 0): MULTIPLY by 1/beta, SIGN (the factor, beta, unread) or DIVIDE by beta."""
    beta = np.float32(beta)
    if beta == 0:
        return beta, SIGN
    with np.errstate(over="ignore", divide="ignore"):
        reciprocal = np.float32(1) / beta
    if np.frexp(beta)[0] == 0.5 and np.isfinite(reciprocal):
        return reciprocal, MULTIPLY
    return beta, DIVIDE


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _vectors(code, g, g_at, x, x_at, y, y_at, o, o_at, vectors, factor, mode, scale,
             has_grad, streaming, ahead):
    """`vectors` vectors of a row, by the block of `code`."""
    scaled = scale != np.float32(1)
    if code == F32:
        _f32_block(g, g_at, x, x_at, y, y_at, o, o_at, vectors, factor, scale, has_grad,
                   mode, scaled, streaming, ahead)
    elif code == F16:
        _f16_block(g, g_at, x, x_at, y, y_at, o, o_at, vectors, factor, scale, has_grad,
                   mode, scaled, streaming, ahead)
    else:
        _bf16_block(g, g_at, x, x_at, y, y_at, o, o_at, vectors, factor, scale, has_grad,
                    mode, scaled, streaming, ahead)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def smooth_l1_row(code, g, g_at, x, x_at, y, y_at, o, o_at, n, factor, mode, scale,
                  has_grad, streaming, pad):
    """o = g * slope(x - y) * scale (g unread without `has_grad`) for a row of n elements of
    one dtype (`code`) at byte offsets of the uint8 arrays g, x, y, o; the slope's quotient
    computed as `slope_factor` says (factor, mode). `streaming`: whole vectors are stored
    non-temporally (o_at aligned to 64 bytes; a `store_fence` before the results are used).
    16-bit rows prefetch their inputs `lanes.LOSS_PREFETCH_BYTES` ahead of their loads. The last
    partial vector goes through `pad` (PAD_BYTES of uint8), so every element is computed by
    the same code."""
    vectors, done, rest = split_row(code, n)
    _vectors(code, g, g_at, x, x_at, y, y_at, o, o_at, vectors, factor, mode, scale,
             has_grad, streaming, LOSS_PREFETCH_BYTES)
    if rest:
        pad[:] = 0
        copy_bytes(pad, 0, x, x_at + done, rest)
        copy_bytes(pad, _PAD, y, y_at + done, rest)
        copy_bytes(pad, 2 * _PAD, g, g_at + done, rest)
        _vectors(code, pad, 2 * _PAD, pad, 0, pad, _PAD, pad, 3 * _PAD, 1, factor, mode,
                 scale, has_grad, False, None)
        copy_bytes(o, o_at + done, pad, 3 * _PAD, rest)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def smooth_l1_flat(g, x, y, o, factor, mode, scale, streaming):
    """Contiguous typed views of one dtype (see `typed`): o = g * slope(x - y) * scale, the
    slope's quotient as (factor, mode) say (see `slope_factor`); g None means a scalar
    gradient already folded into `scale`. The rows are blocks of BLOCK elements, handed out
    in up to RUNS runs. `streaming` (o aligned to 64 bytes): stored
    non-temporally, each run fenced. Calls of one block go to `smooth_l1_block`."""
    code = element_code(o)
    n = o.size
    xb, yb, ob = x.view(np.uint8), y.view(np.uint8), o.view(np.uint8)
    gb = xb if g is None else g.view(np.uint8)
    has_grad = g is not None
    blocks = (n + BLOCK - 1) // BLOCK
    runs = min(blocks, RUNS)
    for run in prange(runs):
        pad = np.empty(PAD_BYTES, np.uint8)
        for b in range(run * blocks // runs, (run + 1) * blocks // runs):
            at = b * BLOCK * o.itemsize
            smooth_l1_row(code, gb, at, xb, at, yb, at, ob, at, min(BLOCK, n - b * BLOCK),
                          factor, mode, scale, has_grad, streaming, pad)
        if streaming:
            store_fence()


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def smooth_l1_block(g, x, y, o, factor, mode, scale):
    """`smooth_l1_flat` for at most BLOCK elements (one row, plain stores) on the calling
    thread: the same row, so the same bits, without a parallel launch of one run. In a loop
    of 8-element two-phase calls (2 GHz Zen 1, the omp layer) the parallel kernel took 7.3
    us of the 17.7 us call and this one 3.0; each signature compiles in 3-4 s."""
    code = element_code(o)
    xb = x.view(np.uint8)
    gb = xb if g is None else g.view(np.uint8)
    smooth_l1_row(code, gb, 0, xb, 0, y.view(np.uint8), 0, o.view(np.uint8), 0, o.size,
                  factor, mode, scale, g is not None, False, np.empty(PAD_BYTES, np.uint8))
