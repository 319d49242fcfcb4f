"""LLVM IR for 16-lane row kernels: float32, float16 or bfloat16 lanes loaded as float32,
rounded back and stored (plainly or streaming), and 16 x 16 blocks transposed.

The row kernels (`gelu_rows`, `smooth_l1_rows`) and the tiled kernel's staging build
their vector loops from these pieces inside Numba intrinsics. Conversions are exact on the
way in (float16 by fpext, bfloat16 by a 16-bit shift) and round to nearest-even on the way
out, as the scalar ones in `bits`. The CPU features the code picks instructions by are
read when a kernel is compiled (module flags, which tests change to build the portable
variants).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from llvmlite.ir.instructions import GEPInstr
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .bits import (
    BF16,
    CACHE_LINE_BYTES,
    F16,
    F32,
    cpu_vendor,
    element_bytes,
    ir_narrow_half,
    ir_rounded_bits,
    ir_widen_half,
    mark_nontemporal,
    store_span,
    target_features,
)

LANES = 16
I16, I32, I64, F32T = ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()
VF, VI, VH = (ir.VectorType(t, LANES) for t in (F32T, I32, I16))


def splat(vector_type: ir.VectorType, value) -> ir.Constant:
    """`value` in every lane."""
    return ir.Constant(vector_type, [value] * vector_type.count)


def broadcast(builder, value, vector_type: ir.VectorType):
    """The run-time scalar `value` in every lane."""
    first = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value, I32(0))
    return builder.shuffle_vector(first, first, splat(ir.VectorType(I32, vector_type.count), 0))


def vector_gep(builder, pointer, indices):
    """A vector of pointers to `pointer`'s elements at the i32 vector `indices` (a vector
    getelementptr, which llvmlite's `gep` cannot type: its result is retyped here)."""
    address = GEPInstr(builder.block, pointer, [indices], True, "",
                       source_etype=pointer.type.pointee)
    address.type = ir.VectorType(pointer.type, indices.type.count)
    builder._insert(address)
    return address


def array_data(context, builder, signature, args):
    """For an intrinsic's codegen: a function giving the data pointer of its i-th
    argument, an array."""
    return lambda i: context.make_array(signature.args[i])(context, builder,
                                                           value=args[i]).data


def function(builder, name: str, result, arguments):
    """The declaration of the LLVM function or intrinsic `name`."""
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(result, arguments),
                                          name)


# llvm.prefetch's locality: the caches a prefetched line is kept in. x86: prefetcht0,
# prefetcht1.
EVERY_LEVEL, OUTER_LEVELS = 3, 2


def prefetch(builder, pointer, locality: int = EVERY_LEVEL) -> None:
    """Ask for the cache line at the byte `pointer` (i8*) ahead of time: llvm.prefetch, a
    read of data kept in every cache level or in all but the first (OUTER_LEVELS); it
    never faults, so it may point past the end of an array."""
    i32, i8p = ir.IntType(32), ir.IntType(8).as_pointer()
    builder.call(function(builder, "llvm.prefetch.p0i8", ir.VoidType(), [i8p, i32, i32, i32]),
                 [pointer, i32(0), i32(locality), i32(1)])


def as_i1(builder, flag):
    """A Numba boolean argument (i1 or i8) as an i1."""
    if flag.type == ir.IntType(1):
        return flag
    return builder.icmp_unsigned("!=", flag, ir.Constant(flag.type, 0))


def _widened(builder, code: int, elements):
    """16 elements of the given code (16-bit codes as i16 x 16) as float32 x 16."""
    if code == F32:
        return elements
    if code == F16:
        return ir_widen_half(builder, elements)
    return builder.bitcast(builder.shl(builder.zext(elements, VI), splat(VI, 16)), VF)


def load_lanes(builder, code: int, pointer):
    """The 16 contiguous elements of the given code at the byte `pointer`, as float32."""
    return _widened(builder, code, builder.load(
        builder.bitcast(pointer, (VF if code == F32 else VH).as_pointer()), align=1))


# bfloat16 rows of one dtype: the 16 elements widen by interleaving with zero words, lane
# order `_UNPACKED` (what x86's in-lane unpacklo / unpackhi of one 32-byte load give:
# elements 0-3 and 8-11, then 4-7 and 12-15), and pack back to their own order by taking
# the high words (one in-lane pack, no lane-crossing permute). Kernels whose every load and
# store of a row is bfloat16 compute in that order. On 8-lane registers (AVX2, NEON): 1
# instruction per 8 elements instead of 2 to widen, 1.5 instead of 2 to narrow; the
# contiguous bfloat16 SmoothL1 in cache: 3.0 ms per 16M elements instead of 4.2 (with its
# division-free slope). Built for AVX-512 with AVX512_BF16, against the natural order
# rounded by `vcvtneps2bf16` (with a branch to integer rounding for vectors holding a
# subnormal, which that instruction flushes), alternating in one process: 16M elements
# 0.87-0.91 of the time (2.19-2.31 against 2.44-2.53 ms; a float16 row kernel on the same
# bytes 2.12-2.17), in cache 0.92; the natural order rounded by integers 0.93-0.98. The
# table kernel (`lookup`) rounded by integers in the natural order took the same time as
# with `vcvtneps2bf16` on N(0, 1), 0.96 of it on U(+-100); its lanes now go in the
# unpacked order too (the factors loaded in that order).
_UNPACKED = [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]


def lane_order(code: int) -> list[int]:
    """Which element of 16 each lane of `row_loader`'s vectors holds."""
    return _UNPACKED if code == BF16 else list(range(LANES))


def _load_bf16_unpacked(builder, pointer):
    """The 16 contiguous bfloat16 elements at the byte `pointer` as float32, in the lane
    order `_UNPACKED`."""
    elements = builder.load(builder.bitcast(pointer, VH.as_pointer()), align=1)
    words = [index for e in _UNPACKED for index in (LANES, e)]  # (zero, element) pairs
    wide = builder.shuffle_vector(elements, ir.Constant(VH, [0] * LANES),
                                  ir.Constant(ir.VectorType(I32, 2 * LANES), words))
    return builder.bitcast(wide, VF)


def _bf16_repacker(builder):
    """float32 x 16 in the lane order `_UNPACKED` -> bfloat16 x 16 (as i16) in their own
    order, rounded to nearest-even, for values whose NaNs have a zero low half (see
    `row_narrower`): the rounding add leaves those as they are, so no NaN select."""
    positions = [_UNPACKED.index(e) for e in range(LANES)]

    def repack(value):
        bits = builder.bitcast(value, VI)
        lowest_kept = builder.and_(builder.lshr(bits, splat(VI, 16)), splat(VI, 1))
        rounded = builder.add(builder.add(bits, splat(VI, 0x7FFF)), lowest_kept)
        words = builder.bitcast(builder.lshr(rounded, splat(VI, 16)),
                                ir.VectorType(I16, 2 * LANES))
        return builder.shuffle_vector(words, words, ir.Constant(VI, [2 * p for p in positions]))
    return repack


def row_loader(builder, code: int):
    """For kernels whose every vector load and store of a row has the one element `code`:
    a function (pointer -> float32 x 16) loading 16 contiguous elements, for bfloat16 in
    the lane order `_UNPACKED` (see `lane_order`)."""
    if code == BF16:
        return lambda pointer: _load_bf16_unpacked(builder, pointer)
    return lambda pointer: load_lanes(builder, code, pointer)


def row_narrower(builder, code: int):
    """The `narrower` that matches `row_loader`: back to the elements' own order. For
    bfloat16 the values' NaNs must be quiet with a zero low half, as every NaN computed
    from bfloat16 operands is (an operation passes a NaN operand's bits on, quieted, or
    makes the default NaN; a bfloat16 widened has a zero low half): rounded as they are,
    they stay the same NaN."""
    if code == BF16:
        return _bf16_repacker(builder)
    return narrower(builder, code)


def narrower(builder, code: int):
    """A function emitting float32 x 16 -> 16 elements of the given code (float16 and
    bfloat16 as i16 x 16), rounded to nearest-even."""
    if code == F16:
        return lambda value: ir_narrow_half(builder, value)
    if code == BF16:
        return lambda value: builder.trunc(builder.lshr(ir_rounded_bits(builder, value, 16),
                                                        splat(VI, 16)), VH)
    return lambda value: value


def store(builder, code: int, elements, pointer, streaming=None) -> None:
    """Store 16 elements of the given code (from `narrower`) at the byte `pointer`. Where
    the i1 `streaming` is true, with a non-temporal store, which needs `pointer` aligned to
    the vector's size (64 bytes for float32, 32 for 16-bit codes) and leaves the stores
    weakly ordered until a fence (`bits.store_fence`). (LLVM folds a float16 vector's store
    into its conversion instruction, a plain store: `store_pair` streams float16.)"""
    target = builder.bitcast(pointer, elements.type.as_pointer())
    if streaming is None:
        builder.store(elements, target, align=element_bytes(code))
        return
    with builder.if_else(streaming) as (streamed, plain):
        with streamed:
            mark_nontemporal(builder, builder.store(elements, target,
                                                align=LANES * element_bytes(code)))
        with plain:
            builder.store(elements, target, align=element_bytes(code))



def store_pair(builder, first, second, pointer, streaming, zero) -> None:
    """Store two vectors of 16-bit elements (from `narrower`), one after the other, as one
    64-byte line at the byte `pointer` (aligned to 64 where the i1 `streaming` is true,
    which stores the line non-temporally, as `store` does). `zero` (float16 lines): an i16
    that is 0 at run time but not provably so, or'ed into the line, so that LLVM cannot
    fold the store into float16's conversion instructions (a plain store: the
    non-temporal hint lost); None where there is no such instruction (bfloat16)."""
    line = builder.shuffle_vector(first, second, ir.Constant(ir.VectorType(I32, 2 * LANES),
                                                             list(range(2 * LANES))))
    if zero is not None:
        lanes = ir.VectorType(I16, 2 * LANES)
        opaque = builder.insert_element(ir.Constant(lanes, ir.Undefined), zero, I32(0))
        line = builder.or_(line, builder.shuffle_vector(
            opaque, opaque, ir.Constant(ir.VectorType(I32, 2 * LANES), [0] * 2 * LANES)))
    target = builder.bitcast(pointer, line.type.as_pointer())
    with builder.if_else(streaming) as (streamed, plain):
        with streamed:
            mark_nontemporal(builder, builder.store(line, target, align=2 * LANES * 2))
        with plain:
            builder.store(line, target, align=2)


def pair_loop(builder, code: int, vectors, result, out_at, streaming, prefetched=(),
              ahead=None) -> None:
    """The vector loop of a 16-bit row of `vectors` vectors: the results (`result(v)`, from
    `narrower`) stored at the byte pointers `out_at(v)` two at a time, one 64-byte line each
    (`store_pair`, streamed where the i1 `streaming`), the last one alone where their count
    is odd. Each pair first prefetches `ahead` bytes (a value of the vectors' type) past
    each byte pointer of `prefetched(v)` (`prefetch`, into every cache level)."""
    two = vectors.type(2)
    # the output address's sign bit: 0 (a user-space address), which LLVM cannot know (a
    # count's, used before, it could where the caller had tested the count)
    zero = None if code == BF16 else builder.trunc(builder.lshr(
        builder.ptrtoint(out_at(vectors.type(0)), I64), I64(63)), I16)
    with cgutils.for_range(builder, builder.udiv(vectors, two)) as loop:
        v = builder.mul(loop.index, two)
        for pointer in prefetched(v) if prefetched else ():
            prefetch(builder, builder.gep(pointer, [ahead]))
        store_pair(builder, result(v), result(builder.add(v, vectors.type(1))), out_at(v),
                   streaming, zero)
    with builder.if_then(builder.trunc(vectors, ir.IntType(1))):  # odd count
        last = builder.sub(vectors, vectors.type(1))
        store(builder, code, result(last), out_at(last))


# One vector store fills a 64-byte line (AVX-512): float16 rows are streamed only then.
# Built for AVX2 (two 32-byte stores a line), AvgPool2dBackward's float16 rows with
# streamed lines took 1.35-1.5x the time of plain stores on an AVX-512 CPU, built for it
# 0.65-0.71x (k2s2p0, (32, 64, 112, 112)).
LINE_VECTORS = "+avx512f" in target_features()
# Rows with fewer whole lines are stored plainly: AvgPool2dBackward's 112-byte float16 rows
# (one whole line or none) took 0.80-0.96 of the time stored so. Its 224-byte rows on
# lines, or 32 bytes past (three), took 0.70-0.81 of the plain stores' time streamed. 16
# bytes past a line (two or three lines), streaming every row measured 0.74-0.79 of plain
# in one build of the kernel, 1.2-1.6x in another: those with two are stored plainly.
STREAMED_ROW_LINES = 3

# How far ahead of their loads the row kernels prefetch their inputs, in bytes, by the
# width of their vectors: the 16-bit SmoothL1 / L1 loops (`smooth_l1_rows`; the
# contiguous kernel's and the tiled kernel's rows) and the contiguous kernel's float32
# GELU rows (`gelu_rows`; the tiled kernel's GELU rows do not prefetch). SmoothL1 / L1
# on a Zen 4 EPYC (AVX-512 with AVX512_BF16): 16M elements, streaming stores, variants
# alternating in one process with the streamed triad over the same buffers (31 rounds,
# 10 ms pause before each call), median share of it:
# - built for AVX2: 512 bytes 0.88-0.95 (float16 and bfloat16, SmoothL1 and L1, six runs),
#   256 0.86-0.95, 1024 0.81-0.95, 2048 0.77-0.94, 8192 (the distance before) 0.71-0.82,
#   no prefetch 0.78-0.91;
# - built for AVX-512: bfloat16 512 bytes 1.00-1.04 against 0.87 at 2048 (before), 0.90-0.92
#   at 1024, 0.88-0.99 without; float16 1.00-1.02 at 512 (two identical variants), 0.94 at
#   1024.
# Earlier, on an AVX-512 machine of this project, 8192 had run ahead of 512 built for AVX2
# (float16 1.22-1.30 against 0.70-0.78 of the triad, later within 4 % of each other), and
# on a Zen 3 EPYC (AVX2) 2048-16384 bytes differed by less than the noise.
# GELU (x and g, the step's two lines of each), 16M elements on the Zen 4, variants
# alternating in one process on the same buffers, N(0, 1) and U(+-8): erf form built for
# AVX2 7.5-8.5 ms at 512 and 1024 bytes against 8.8-9.2 without (2048: 7.8-8.5), for
# AVX-512 5.3-5.7 against 6.1-6.5; the tanh form for AVX2 14.1-14.5 against 15.1-16.4, for
# AVX-512 8.0 against 9.0-9.7. On a Zen 1 EPYC (AVX2) 512 or 2048 bytes had made the erf
# form slower (20.4-20.9 ms against 19.6-19.9).
# The tiled kernel's float16 SmoothL1 rows, 4096 x 4096 on the Zen 4, alternating in one
# process with the contiguous call (15 rounds), rate against it: a target [4096, 1]
# broadcast 1.11 at 512 bytes against 0.98 without built for AVX-512, 1.20-1.23 against
# 0.95-1.03 for AVX2; a transposed self 0.46-0.49 against 0.43-0.49 and 0.50 against 0.48.
# Before, they did not prefetch: on other machines of this project a broadcast target had
# run -1 to +11 % faster without than at 512 bytes, a transposed self 0.69-0.86 without
# against 0.69-0.82 at 8192, and on a Zen 1 EPYC 8192 had taken a transposed float16 self
# 12.8-13.9 ms against 14.0-14.3 without.
# On a Zen 5 EPYC (family 26, 58 GB/s streamed triad against the Zen 4's 36) built for
# AVX2, the 16-bit SmoothL1 loops at 16M elements, 25 rounds alternating in one process
# with the streamed triad over the same buffers, share of it (float16 and bfloat16, none
# and mean, two runs): 2048 bytes 0.93-1.00, 1024 0.87-0.94, 512 0.83-0.92, none
# 0.89-0.95; built for AVX-512, 512 bytes 0.94-0.98, 2048 0.94-0.96, none 0.97-0.99; the
# float32 GELU rows built for AVX2 within 3 % at 512 and 2048 (erf and tanh forms). A
# likely reason: faster memory needs more bytes in flight, and a loop of 8-lane vectors
# has half the bytes of a 16-lane one ahead of it in the core's window. So builds whose
# vector is half a line go 2048 bytes ahead: the AVX2-only machine measured (Zen 3,
# above) differed by less than the noise from 2048 up, and only the Zen 4's AVX2 build,
# an AVX-512 CPU's, ran its loss loops at 0.77-0.94 there against 0.88-0.95 at 512.
PREFETCH_BYTES = 512 if LINE_VECTORS else 2048
# The 16-bit SmoothL1 / L1 loops on an Intel Xeon built for AVX-512 (2026-12-03; 16M
# elements, streaming stores, alternating in one process, two runs): 2048 bytes took
# 0.93-0.94x the time of 512 (float16 3.06-3.10 against 3.29-3.30 ms, bfloat16 2.93-2.98
# against 3.23-3.26; 1024 0.95x, 4096 as 2048), where the float32 GELU rows' erf form took
# 1.03-1.08x (tanh form 0.94-0.95x): so on Intel CPUs the loss loops go 2048 ahead.
# On a Zen 4 EPYC again (2026-12-04) built for AVX2, where the full benchmark had the
# 16-bit loss rows at 0.70-0.84 of the streamed triad: 16M float16, variants in turn in
# their own processes, each alternating with the triad over its buffers, 512 / 1024 /
# 2048 / 4096 / 8192 bytes 0.77-0.85 / 0.79-0.93 / 0.68-0.86 / 0.76-0.88 / 0.77-0.81,
# the call itself 2.8-5.0 ms at any distance; through the benchmark (`--only "l1 f16 "`,
# two runs each in turn) 512 0.71-0.88, 2048 0.78-0.93: no distance stands out of the
# noise, so 2048 stays. The plain stores there ran at 0.76-0.79 against 0.83-0.93 streamed.
# bfloat16 with no prefetch against 2048 bytes (`--only "l1 bf16"`, two runs each in turn):
# 0.70-0.94 against 0.82-0.93 of the triad, the compute probe itself 1.5-3.1 ms from one
# run to the next (1.4-1.45 alone, steady): none is no faster either.
LOSS_PREFETCH_BYTES = 2048 if cpu_vendor() == "GenuineIntel" else PREFETCH_BYTES


@intrinsic
def stream_f16_lines(typingctx, dst, dst_byte_index, src, src_index, lines):
    """float32 src[src_index:][:32 * lines] rounded to float16 and stored, one 64-byte line
    at a time (`pair_loop`), non-temporally at the 64-byte aligned byte `dst_byte_index`
    of the uint8 array dst. Call `bits.store_fence` once the rows are written."""
    def codegen(context, builder, signature, args):
        data = array_data(context, builder, signature, args)
        _, at, _, first, lines = args
        narrowed = narrower(builder, F16)

        def result(v):
            pointer = builder.gep(data(2), [builder.add(first, builder.mul(v, I64(LANES)))])
            return narrowed(builder.load(builder.bitcast(pointer, VF.as_pointer()), align=4))

        pair_loop(builder, F16, builder.shl(lines, I64(1)), result,
                  lambda v: builder.gep(data(0), [builder.add(at, builder.mul(v, I64(2 * LANES)))]),
                  ir.IntType(1)(1))
        return context.get_dummy_value()

    return types.none(dst, types.uint64, src, types.uint64, types.uint64), codegen


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def store_f16_row(buf, base, n, values, at):
    """float32 values[at:at + n] rounded to float16, to the contiguous run at byte `base` of
    `buf`: whole cache lines streamed (`stream_f16_lines`), the unaligned head and tail
    stored plainly; a run of fewer than STREAMED_ROW_LINES whole lines all plainly. Call
    `bits.store_fence` once the rows are written."""
    address = buf.ctypes.data + base
    head = min(n, ((-address) % CACHE_LINE_BYTES) // 2) if address % 2 == 0 else n
    lines = (n - head) // (2 * LANES)
    if lines < STREAMED_ROW_LINES:
        head, lines = n, 0
    store_span(buf, F16, base, 2, head, values, at)
    if lines:
        stream_f16_lines(buf, np.uint64(base + 2 * head), values, np.uint64(at + head),
                         np.uint64(lines))
    done = head + 2 * LANES * lines
    store_span(buf, F16, base + 2 * done, 2, n - done, values, at + done)


LANE_BYTES = 16  # a 128-bit lane, the unit x86's unpacks (and NEON's zips) work within


def _unpack_mask(width: int, span: int, high: bool) -> ir.Constant:
    """A two-vector shuffle mask over 16 elements in lanes of `span`: within each lane, the
    low (or `high`) half of the first vector and of the second interleaved in runs of
    `width` elements (x86's unpacklo / unpackhi at that width)."""
    half = span // 2
    return ir.Constant(VI, [source + lane * span + high * half + run * width + k
                            for lane in range(LANES // span) for run in range(half // width)
                            for source in (0, LANES) for k in range(width)])


def _transpose_intrinsic(code: int, widen: bool):
    """The block transpose by lanes: with `span` elements to a 128-bit lane (4 float32, 8
    16-bit), vector a of column piece c gathers piece c (elements span*c ... span*c+span-1)
    of rows a, span+a, 2*span+a, ... into its lanes with lane-sized loads, so that the
    `span` vectors of a piece hold a span x span block in each lane; log2(span) rounds of
    in-lane unpacks transpose those, and vector j of piece c is then row span*c + j of the
    result. No lane-crossing shuffle. For 16-bit elements, against pieces of 4 (8-byte
    loads inserted four to a lane, then two rounds of unpacks and permutes), alternating in
    one process: in cache 0.75-0.78 of the time (0.56-0.58 against 0.71-0.77 ms per 16M
    elements, either ISA level; widened to float32 0.89-0.93), and the transposed float16
    SmoothL1 (4096 x 4096) 3.27-3.44 against 3.53-3.60 ms built for AVX-512, 3.57 against
    3.73 for AVX2. The rows come out as float32 when `widen`, widened after the
    transpose, else as the 16-bit elements they are (16-bit codes only)."""
    size = element_bytes(code)
    span = LANE_BYTES // size
    element = F32T if code == F32 else I16
    piece_type = ir.VectorType(element, span)
    row_type = VF if widen else ir.VectorType(element, LANES)

    def transpose(typingctx, src, src_byte_index, src_step, dst, dst_byte_index, dst_step):
        def codegen(context, builder, signature, args):
            data = array_data(context, builder, signature, args)
            s, d = data(0), data(3)
            _, first, step, _, out_first, out_step = args

            def piece(row, c):
                at = builder.add(first, builder.add(builder.mul(step, step.type(row)),
                                                    step.type(LANE_BYTES * c)))
                return builder.load(builder.bitcast(builder.gep(s, [at]), piece_type.as_pointer()),
                                    align=size)

            def gathered(pieces):  # lane-sized pieces joined in pairs up to 16 elements
                while len(pieces) > 1:
                    count = 2 * pieces[0].type.count
                    joined = ir.Constant(ir.VectorType(I32, count), list(range(count)))
                    pieces = [builder.shuffle_vector(pieces[i], pieces[i + 1], joined)
                              for i in range(0, len(pieces), 2)]
                return pieces[0]

            for c in range(LANES // span):
                vectors = [gathered([piece(span * g + a, c) for g in range(LANES // span)])
                           for a in range(span)]
                width = 1
                while width < span:  # pair a with a + width, for a with that bit clear
                    vectors = [builder.shuffle_vector(vectors[a], vectors[a + width],
                                                      _unpack_mask(width, span, high))
                               for a in range(span) if not a & width for high in (False, True)]
                    width *= 2
                for j, row in enumerate(vectors):  # row span * c + j of the result
                    if widen and code != F32:
                        row = _widened(builder, code, row)
                    at = builder.add(out_first, builder.mul(out_step, out_step.type(span * c + j)))
                    builder.store(row, builder.bitcast(builder.gep(d, [at]),
                                                       row_type.as_pointer()), align=2)
            return context.get_dummy_value()
        return types.none(src, types.intp, types.intp, dst, types.intp, types.intp), codegen
    return intrinsic(transpose)


_TRANSPOSE_F32, _TRANSPOSE_F16, _TRANSPOSE_BF16 = (_transpose_intrinsic(code, True)
                                                   for code in (F32, F16, BF16))
_TRANSPOSE_BITS16 = _transpose_intrinsic(F16, False)


@intrinsic
def prefetch_block_rows(typingctx, src, src_byte_index, src_step):
    """Ask for the cache lines at src_byte_index + i * src_step (bytes) of the uint8 array
    `src`, i = 0 ... 15, into the outer caches (OUTER_LEVELS): the lines a later
    `transpose_x16` reads there (it may point past the array's end: a prefetch never
    faults)."""
    def codegen(context, builder, signature, args):
        data = array_data(context, builder, signature, args)(0)
        _, first, step = args
        for i in range(LANES):
            prefetch(builder, builder.gep(data, [builder.add(first, builder.mul(
                step, step.type(i)))]), OUTER_LEVELS)
        return context.get_dummy_value()
    return types.none(src, types.intp, types.intp), codegen


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def split_row(code, n):
    """A row of n elements of the given code as (whole vectors of LANES, their bytes, the
    bytes of the partial vector left after them)."""
    vectors = n // LANES
    size = element_bytes(code)
    return vectors, size * LANES * vectors, size * (n - LANES * vectors)


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def transpose_x16(code, row_code, src, src_byte_index, src_step, dst, dst_byte_index,
                  dst_step):
    """A 16 x 16 block of the given element code transposed in registers: the 16
    contiguous elements at src_byte_index + j * src_step (bytes) of the uint8 array `src`
    become column j of the 16-element rows at dst_byte_index + i * dst_step (bytes) of the
    uint8 array `dst`, in the rows' dtype `row_code`: float32, or the 16-bit code itself
    (its elements moved as they are)."""
    if row_code != F32:
        _TRANSPOSE_BITS16(src, src_byte_index, src_step, dst, dst_byte_index, dst_step)
    elif code == F32:
        _TRANSPOSE_F32(src, src_byte_index, src_step, dst, dst_byte_index, dst_step)
    elif code == F16:
        _TRANSPOSE_F16(src, src_byte_index, src_step, dst, dst_byte_index, dst_step)
    else:
        _TRANSPOSE_BF16(src, src_byte_index, src_step, dst, dst_byte_index, dst_step)
