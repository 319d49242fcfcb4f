"""The SmoothL1 / L1 backward kernel for contiguous operands of one dtype, 16 lanes at a
time in LLVM IR, with streaming stores for large outputs.

    o = g * slope(x - y) * scale,  slope(d) = d / beta if |d| < beta else sign(d)

(sign keeps a zero's sign and NaN; beta = 0 is L1), in float32 from float32, float16 or
bfloat16 operands converted in registers, rounded once to the output's dtype. A scalar
gradient comes folded into `scale` (o = slope * scale). These are the operations, in the
same order, of the tiled kernel in `pointwise`, so every layout gives the same bits.

The kernel is bound by memory. A plain store first reads the line it writes; a
non-temporal one does not, so for outputs too large to stay in the caches the vectors go
to memory with streaming stores: about 20 % less time for a 3-read-1-write float32 loop
over 16M elements on this project's machine (3.2-5.7 ms vs 4.1-6.9 ms, three runs).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .bits import BF16, F16, F32, copy_bytes, element_bytes, store_fence
from .lanes import (
    LANES,
    VF,
    VI,
    as_i1,
    broadcast,
    load_lanes,
    narrower,
    splat,
    split_row,
    store,
    store_pair,
)
from .typed import element_code

BLOCK = 4096  # elements per row
RUNS = 64  # parallel work items
_PAD = 4 * LANES  # one vector of float32; the pad holds x, y, g, o at 0, 64, 128, 192
PAD_BYTES = 4 * _PAD  # the `pad` scratch of a row


def _row_block(code: int):
    """The vector loop over `vectors` vectors of elements of `code` at byte offsets of
    uint8 arrays; `has_grad` false: no gradient is read (it is folded into `scale`);
    `streaming`: stored non-temporally (see `lanes.store`)."""
    step_bytes = LANES * element_bytes(code)

    def block(typingctx, g, g_at, x, x_at, y, y_at, o, o_at, vectors, beta, scale, has_grad,
              streaming):
        def codegen(context, builder, signature, args):
            def address(i, at, v):
                data = context.make_array(signature.args[i])(context, builder, value=args[i])
                offset = builder.add(at, builder.mul(v, ir_step))
                return builder.gep(data.data, [offset])

            _, g_at, _, x_at, _, y_at, _, o_at, vectors, beta, scale, has_grad, streaming = args
            ir_step = vectors.type(step_bytes)
            narrowed = narrower(builder, code)
            beta_v, scale_v = broadcast(builder, beta, VF), broadcast(builder, scale, VF)
            one, minus_one = splat(VF, 1.0), splat(VF, -1.0)
            zero = splat(VF, 0.0)
            streaming = as_i1(builder, streaming)

            def result(v, with_grad: bool):
                d = builder.fsub(load_lanes(builder, code, address(2, x_at, v)),
                                 load_lanes(builder, code, address(4, y_at, v)))
                size = builder.bitcast(builder.and_(builder.bitcast(d, VI),
                                                    splat(VI, 0x7FFFFFFF)), VF)
                sign = builder.select(builder.fcmp_ordered(">", d, zero), one,
                                      builder.select(builder.fcmp_ordered("<", d, zero),
                                                     minus_one, d))
                slope = builder.select(builder.fcmp_ordered("<", size, beta_v),
                                       builder.fdiv(d, beta_v), sign)
                if with_grad:
                    slope = builder.fmul(load_lanes(builder, code, address(0, g_at, v)), slope)
                return narrowed(builder.fmul(slope, scale_v))

            def loop(with_grad: bool) -> None:
                if code == F32:
                    with cgutils.for_range(builder, vectors) as index:
                        v = index.index
                        store(builder, code, result(v, with_grad), address(6, o_at, v),
                              streaming)
                    return
                two = vectors.type(2)  # 16-bit vectors go in pairs, a cache line each
                zero = builder.trunc(builder.lshr(vectors, vectors.type(63)),  # a count: 0
                                     ir.IntType(16))
                with cgutils.for_range(builder, builder.udiv(vectors, two)) as index:
                    v = builder.mul(index.index, two)
                    second = builder.add(v, vectors.type(1))
                    store_pair(builder, result(v, with_grad), result(second, with_grad),
                               address(6, o_at, v), streaming, zero)
                with builder.if_then(builder.trunc(vectors, ir.IntType(1))):  # odd count
                    last = builder.sub(vectors, vectors.type(1))
                    store(builder, code, result(last, with_grad), address(6, o_at, last))

            with builder.if_else(as_i1(builder, has_grad)) as (with_grad, folded):
                with with_grad:
                    loop(True)
                with folded:
                    loop(False)
            return context.get_dummy_value()

        sig = types.none(g, types.intp, x, types.intp, y, types.intp, o, types.intp,
                         types.intp, types.float32, types.float32, types.boolean, types.boolean)
        return sig, codegen
    block.__doc__ = _row_block.__doc__
    return intrinsic(block)


_f32_block, _f16_block, _bf16_block = (_row_block(code) for code in (F32, F16, BF16))


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def _vectors(code, g, g_at, x, x_at, y, y_at, o, o_at, vectors, beta, scale, has_grad,
             streaming):
    """`vectors` vectors of a row, by the block of `code`."""
    if code == F32:
        _f32_block(g, g_at, x, x_at, y, y_at, o, o_at, vectors, beta, scale, has_grad,
                   streaming)
    elif code == F16:
        _f16_block(g, g_at, x, x_at, y, y_at, o, o_at, vectors, beta, scale, has_grad,
                   streaming)
    else:
        _bf16_block(g, g_at, x, x_at, y, y_at, o, o_at, vectors, beta, scale, has_grad,
                    streaming)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def smooth_l1_row(code, g, g_at, x, x_at, y, y_at, o, o_at, n, beta, scale, has_grad,
                  streaming, pad):
    """o = g * slope(x - y) * scale (g unread without `has_grad`) for a row of n elements of
    one dtype (`code`) at byte offsets of the uint8 arrays g, x, y, o. `streaming`: whole
    vectors are stored non-temporally (o_at aligned to 64 bytes; a `store_fence` before the
    results are used). The last partial vector goes through `pad` (PAD_BYTES of uint8), so
    every element is computed by the same code."""
    vectors, done, rest = split_row(code, n)
    _vectors(code, g, g_at, x, x_at, y, y_at, o, o_at, vectors, beta, scale, has_grad,
             streaming)
    if rest:
        pad[:] = 0
        copy_bytes(pad, 0, x, x_at + done, rest)
        copy_bytes(pad, _PAD, y, y_at + done, rest)
        copy_bytes(pad, 2 * _PAD, g, g_at + done, rest)
        _vectors(code, pad, 2 * _PAD, pad, 0, pad, _PAD, pad, 3 * _PAD, 1, beta, scale,
                 has_grad, False)
        copy_bytes(o, o_at + done, pad, 3 * _PAD, rest)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def smooth_l1_flat(g, x, y, o, beta, scale, streaming):
    """Contiguous typed views of one dtype (see `typed`): o = g * slope(x - y) * scale; g
    None means a scalar gradient already folded into `scale`. The rows are blocks of BLOCK
    elements, handed out in up to RUNS runs. `streaming` (o aligned to 64 bytes): stored
    non-temporally, each run fenced."""
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
            smooth_l1_row(code, gb, at, xb, at, yb, at, ob, at, min(BLOCK, n - b * BLOCK), beta,
                          scale, has_grad, streaming, pad)
        if streaming:
            store_fence()
