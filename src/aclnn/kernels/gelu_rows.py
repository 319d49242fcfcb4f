"""GELU backward rows: o = g * GELU'(x) in float32, one branch-free formula per form.

Every lane of every vector goes through the same operations, whatever its value: no
segment tables, no fallback for wide inputs, no ISA-specific instructions (generic LLVM
vector IR, 32 lanes at a time, which LLVM splits into AVX2, AVX-512 or NEON registers).
The cost per 8 lanes (one AVX2 register) is 31 vector operations for the erf form, 17 of
them multiplies and FMAs, and about fifty for the tanh form. The erf form is bound by the
FMA units and what else they take (adds, blends): each FMA fewer made it about 4 % faster,
so its polynomials are no longer than SPEC §10's bar needs, and x**2 and 2 ln2 are rounded
once, not carried in two parts (15 % faster on AVX2 than degrees 6 and 8 with both
carried, which kept it within 4.1 ULP into the tail). No fit found with fewer: V (below)
of degree 4 uses at least 0.68 of the bar's allowance (at a t scale of 0.391; 0.7-7.7 of
it at others from 0.29 to 0.5), too much for the 4 ULP and the 2**-16 relative error into
the tail that the 16-bit results keep (see the tests); e**r of degree 4 has a relative
error of 2.8e-6 (the bar allows about 1e-6 near 0); V as a ratio of polynomials in a needs
degrees 3 and 3 (0.056 of the allowance) or 4 and 2 (0.8), as many FMAs as now (3 and 2
use 2.2 times it). On a Zen 1 EPYC (AVX2 as two 128-bit halves, 2 GHz) the erf form took
15-16 ns per 8 lanes in cache, one thread; t's division made 14-17 % of that (a probe
without it), but a reciprocal by Newton's steps from an integer seed (deterministic on
every CPU, unlike `rcpps`) ran 1.15x (2 steps) to 1.4x (3) as long, Estrin's scheme for V
and steps of 8, 16 or 32 lanes were within the noise (3 %), and so was t's division
computed one step ahead, or put first in the IR (LLVM keeps a step's divisions together
mid-loop; each `vdivps` of 8 lanes holds the divider 10 cycles there). One division for
two lanes' t, t = d' / (d d') with d' the other lane's denominator, ran 8-9 % faster in
cache and 3-6 % on 16M elements (torch/ours 1.53-1.63 against 1.47-1.57, alternating in
one process), but t then depends on the other lane's value (27 % of them 1-2 ULP off 1/d;
after one FMA correction step 8 in 85M, at 2.5 % faster): a result would depend on its
neighbour, so it was not taken. x and g prefetched 512 or 2048 bytes ahead of each step
made 16M elements slower there (20.4-20.9 ms against 19.6-19.9, two threads), but 10-15 %
faster on a Zen 4 EPYC, built for AVX2 or AVX-512: the contiguous kernel's rows go
`lanes.PREFETCH_BYTES` ahead, the tiled kernel's do not prefetch.

Both forms reduce to an exponential e**(-z/2) of z = a**2 (erf) or 4|u| (tanh), taken as
exact for z <= 260 (the tanh form clamps its input where the result is already exactly 0
or 1; the erf form discards e where it is, past ERF_TAIL):

    e**(-z/2) = 2**k * e**r,  k = round(-z / (2 ln2)) (by adding 1.5 * 2**23),
    r = -(z + 2k ln2)/2,  e**r = 1 + r P(r)  (degree 5, minimax in relative error: 9.2e-8),

all in terms of s = -2r (the halving folded into the constants: the same roundings as
reducing y = -z/2, one multiply fewer), with 2**(k + 64) put into the exponent bits of
e**r: a normal float32 for every z. 2 ln2 is one float32, so e's relative error grows by
k * 1.9e-9 (by Horner's rule 2 ULP up to z = 10, 2.5 up to 40, 6.5 at 260; Estrin's scheme,
in the tanh form, adds up to 0.8; e that small only reach results that the bar's absolute
term covers). The factor 2**-64 is taken off in the final term only, after the lanes whose
result rounds to 0 or 1 anyway (|x| past ERF_TAIL[0] or TANH_TAIL) were set to 0: only a lane
whose GELU' is itself subnormal makes a subnormal (x86 takes a slow microcode assist for
each operation that makes or takes one), rounded once, as a float32 result. In the erf
form one FMA makes it and the product with g takes it (see `by_sign`). Only 16-bit results
keep those lanes; float32 results take them as 0 (see `negative_tail`).

erf form: GELU'(x) = Phi(x) + x phi(x) is q(a) for x < 0 and 1 - q(a) otherwise, a = |x|,

    q(a) = Phi(-a) - a phi(a) = exp(-a**2/2) * (a_r - a) * V(t),  t = 1/(1 + 0.316 a),

a_r the root of q (held in two float32 parts, so a_r - a is exact near it) and V of degree 5
(V(1) = 1/(2 a_r) exactly, so GELU'(0) = 1/2), its relative error weighted by what SPEC
§10's float32 bar allows q at each a (about 1e-6 near 0, 1e-5 from a = 1.5 on, then more
as the absolute term 2**-22 |g| takes over; at most 2**-13, for the 16-bit results rounded
from these values): it uses 0.088 of that. Measured against float64: 0.23 of the bar at
most, 9 float32 ULP for |x| < 2, 55 for |x| < 4, and within 2**-16 relative error (1.4e-5)
plus the last rounding's half ULP into the tail. Degree 7 fitted for relative error alone
(1.3e-7, t = 1/(1 + a/(2 sqrt2)), 8 ULP for |x| < 4) took 1.11x the time in cache built for
AVX2, 1.10x for AVX-512; at t's scale 0.316 degree 5 uses 0.08-0.13 of the allowance, at
1/(2 sqrt2) 0.48. a**2 is rounded once, a relative error of up to a**2 * 2**-25 in e.
V's coefficients carry the 2**-64, and e is set to 0 where |x| >= ERF_TAIL[0] (|x| alone:
past ERF_TAIL[1] a positive x's 1 - q rounds to 1 inside the FMA, whose product is never
rounded alone). GELU', q where x's sign bit is set and 1 - q elsewhere, is
fma(s (a_r - a) V(t), e, 0 or 1), s = +1 or -1 by that sign bit: 1 - q rounded once, and
s (a_r - a) = (x + s a_r_hi) + s a_r_lo the same value as a_r - a with its sign flipped.
The signs and the addend are made from x's bits by logic operations: on Zen 5 adds, blends
and multiplies take time from the FMA units, logic operations hardly any (eight independent
FMAs took 4.1 cycles alone and with four `vandps` beside them, 4.9 with four `vaddps`, 5.9
with four `vblendvps`). With the one-sided tail test this took the form from 13.2 to 11.7
cycles per 8 lanes in cache built for AVX2 (U(+-100): 15.6 to 13.6), from 6.6 to 6.0 built
for AVX-512 (8.6 to 7.7); 16M elements built for AVX2 from 3.86 to 3.56 ms (U(+-100): 4.17
to 3.82), the same bits. +-inf gives NaN, as the formula does in PyTorch.

tanh form: with u = sqrt(2/pi)(x + 0.044715 x**3), e = exp(-2|u|), B = 1/(1 + e) and
S = e B (the sigmoids of +-2u),

    GELU'(x) = S - w  for x < 0,  B + w  otherwise,  w = |x| sqrt(2/pi)(2 + 0.26829 x**2) S B

(0.26829 = 6 * 0.044715); near its root a_r, where S - w cancels, GELU'(-a) = d P(d) with
d = a_r - a exact (a_r in two parts) and P of degree 5 interpolating in float64, for |d| <
ROOT_BAND: within 24 float32 ULP for |x| < 4, and SPEC §10's 8 ULP + 2**-22 |g| beyond.

(Coefficients: tools/fit_gelu.py, from mpmath references.)
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .bits import CACHE_LINE_BYTES, F32, copy_bytes, store_fence, stream_f32x16
from .lanes import (
    LANES,
    LINE_VECTORS,
    PREFETCH_BYTES,
    array_data,
    broadcast,
    function,
    prefetch,
    splat,
    split_row,
    store,
)

BLOCK = 4096  # elements per row of the contiguous kernel
RUNS = 64  # its parallel work items

f = np.float32
_EXP_C = tuple(f(c) for c in (
    1.0, 0.9999997070549008, 0.499991492722055, 0.1666763649271689, 0.041897964502657446,
    0.008290307999313268))
SCALE = 64  # e**y is computed times 2**SCALE: normal for every y >= -130
_MINUS_HALF_LOG2E = f(-0.5 * 1.4426950408889634)
_ROUNDER = f(1.5 * 2 ** 23 + SCALE)  # z * _MINUS_HALF_LOG2E + this: k + SCALE in its low bits
_TWO_LN2 = f(2 * math.log(2))
# P(-s/2) as a polynomial in s: every partial sum, by either scheme, a power of two times
# the one in r = -s/2
_EXP_HALF = tuple(f(c * (-0.5) ** i) for i, c in enumerate(_EXP_C))

_GELU_V = tuple(f(c) for c in (
    0.3992083668708801, 0.09099601954221725, 0.09802178293466568, 0.00038127959123812616,
    0.11151029914617538, -0.0350397564470768))
_GELU_V_SCALED = tuple(f(c * 2.0 ** -SCALE) for c in _GELU_V)  # takes e's 2**SCALE off
_ROOT = 0.7517915246935644574579049
_ROOT_HI = f(_ROOT)
_ROOT_LO = f(_ROOT - float(_ROOT_HI))
_T_SCALE = f(0.316)
# |x| from which GELU' rounds to 0 (x < 0: |GELU'| < 2**-150) or 1 (x > 0: |GELU' - 1| <
# 2**-25): (negative x, positive x), for the erf and the tanh form
ERF_TAIL = (f(14.6), f(6.1))
TANH_TAIL = (f(10.95), f(5.6))
# the first float32 |x| at which a negative x's GELU' is subnormal, by the kernel's
# operations and in float64 alike (see `negative_tail`): the erf form's -2**-126 at x =
# -13.3418823, the tanh form's -1.1754871e-38 at x = -10.235001
ERF_NORMAL, TANH_NORMAL = f(13.341883), f(10.235001)

_K = math.sqrt(2 / math.pi)
_C = 0.044715
_FOUR_U = (f(4 * _K), f(4 * _K * _C))  # 4u = a (4k + 4kc a**2), e**-2u = e**(-4u/2)
_W = (f(2 * _K), f(6 * _K * _C))  # w = a (2k + 6kc a**2) S B
ROOT_BAND = 0.1  # |a - a_r| below which the tanh form takes its root polynomial
_BAND_DEGREE = 5


def _q_tanh(a: float) -> float:
    """GELU'(-a) of the tanh form in float64: with s = 1/(1 + e**2u),
    s (1 - 2a (1 - s) k (1 + 3c a**2))."""
    s = 1 / (1 + math.exp(2 * _K * (a + _C * a ** 3)))
    return s * (1 - 2 * a * (1 - s) * _K * (1 + 3 * _C * a * a))


def _tanh_root_band() -> tuple[np.float32, np.float32, tuple]:
    """The tanh form's root a_r (two float32 parts, found by float64 bisection) and P,
    GELU'(-a) = d P(d) with d = a_r - a on |d| <= ROOT_BAND: P interpolates at Chebyshev
    nodes (none at d = 0) in float64."""
    lo, hi = 0.5, 1.0  # q(0.5) > 0 > q(1)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _q_tanh(mid) > 0 else (lo, mid)
    root = 0.5 * (lo + hi)
    d = ROOT_BAND * np.cos(np.pi * (np.arange(_BAND_DEGREE + 1) + 0.5) / (_BAND_DEGREE + 1))
    ratio = [_q_tanh(root - v) / v for v in d]
    p = np.linalg.solve(np.vander(d, _BAND_DEGREE + 1, increasing=True), ratio)
    return f(root), f(root - float(f(root))), tuple(f(c) for c in p)


_TANH_ROOT_HI, _TANH_ROOT_LO, _TANH_BAND = _tanh_root_band()
TANH_CLAMP = f(11.5)  # keeps 2u <= 127
_SIGN = -0x80000000  # float32 bit patterns as int32: the sign bit
_ONE = 0x3F800000  # 1.0


class _Vectors:
    """Float32 arithmetic on vectors of `lanes` lanes on an IR builder, FMAs explicit
    (nothing is contracted, so every caller of a row gets the same bits)."""

    def __init__(self, builder, lanes: int = LANES):
        self.b = builder
        self.vf = ir.VectorType(ir.FloatType(), lanes)
        self.vi = ir.VectorType(ir.IntType(32), lanes)
        self._fma = function(builder, f"llvm.fma.v{lanes}f32", self.vf, [self.vf] * 3)

    def const(self, value) -> ir.Constant:
        return splat(self.vf, float(f(value)))

    def bits(self, value: int) -> ir.Constant:
        return splat(self.vi, value)

    def fma(self, a, b, c):
        return self.b.call(self._fma, [a, b, c])

    def horner(self, t, coefficients):
        """The polynomial by Horner's rule: the fewest operations."""
        p = self.const(coefficients[-1])
        for c in coefficients[-2::-1]:
            p = self.fma(p, t, self.const(c))
        return p

    def estrin(self, t, coefficients):
        """The polynomial by Estrin's scheme: pairs c_i + c_(i+1) t, then pairs of those
        with t**2, t**4, ...; two operations more than Horner's rule for degree 5, but a
        dependency chain of three FMAs instead of five."""
        terms = [self.fma(self.const(coefficients[i + 1]), t, self.const(coefficients[i]))
                 if i + 1 < len(coefficients) else self.const(coefficients[i])
                 for i in range(0, len(coefficients), 2)]
        power = t
        while len(terms) > 1:
            power = self.b.fmul(power, power)
            terms = [self.fma(terms[i + 1], power, terms[i]) if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        return terms[0]

    def abs(self, x):
        return self.b.bitcast(self.b.and_(self.b.bitcast(x, self.vi), self.bits(~_SIGN)),
                              self.vf)

    def at_most(self, a, limit):
        """min(a, limit), NaN kept."""
        return self.b.select(self.b.fcmp_ordered(">", a, self.const(limit)),
                             self.const(limit), a)

    def scaled_exp(self, z, short_chain=False):
        """2**SCALE * e**(-z/2) for 0 <= z <= 260: a normal float32 throughout. The halving
        is folded into the constants: the roundings of e**y's reduction at y = -z/2, with
        one multiply fewer. The polynomial goes by Horner's rule, or with `short_chain` by
        Estrin's scheme: the erf form is bound by the FMA units' throughput (Estrin's
        made it 5 % slower), the tanh form, whose exp heads a long serial chain, by
        latency (Estrin's made it 18 % faster in cache on AVX2)."""
        b = self.b
        t = self.fma(z, self.const(_MINUS_HALF_LOG2E), self.const(_ROUNDER))
        k = b.fsub(t, self.const(_ROUNDER))
        s = self.fma(k, self.const(_TWO_LN2), z)
        polynomial = self.estrin if short_chain else self.horner
        p = b.bitcast(polynomial(s, _EXP_HALF), self.vi)
        power = b.shl(b.bitcast(t, self.vi), self.bits(23))
        return b.bitcast(b.add(p, power), self.vf)

    def unscaled(self, keep, scaled):
        """scaled * 2**-SCALE where `keep`, else scaled * 0 (a multiplier chosen per lane,
        so that only results that are themselves subnormal take x86's subnormal assists;
        a zero chosen after a common multiply would be folded into its arm by LLVM)."""
        factor = self.b.select(keep, self.const(2.0 ** -SCALE), self.const(0.0))
        return self.b.fmul(scaled, factor)

    def within(self, x, a, negative_limit, positive_limit):
        """a < the limit for x's sign (false for NaN); the negative one a vector."""
        b = self.b
        negative = b.fcmp_ordered("<", x, self.const(0.0))
        limit = b.select(negative, negative_limit, self.const(positive_limit))
        return negative, b.fcmp_ordered("<", a, limit)

    def by_sign(self, x, v, e):
        """GELU' from q = (a_r - a) v e: q where x's sign bit is set (x < 0, -0, negative
        NaNs), 1 - q elsewhere, by one FMA, fma(s (a_r - a) v, e, 0 or 1) with s = +1 where
        the sign bit is set, -1 elsewhere: s (a_r - a) = (x + s a_r_hi) + s a_r_lo, the
        signed parts and the addend made from x's bits by logic operations alone."""
        b = self.b
        bits = b.bitcast(x, self.vi)
        sign = b.and_(bits, self.bits(_SIGN))

        def signed(value):
            """+value where x's sign bit is set, -value elsewhere."""
            negated = int(np.float32(-value).view(np.int32))
            return b.bitcast(b.xor(sign, self.bits(negated)), self.vf)

        distance = b.fadd(b.fadd(x, signed(_ROOT_HI)), signed(_ROOT_LO))
        clear = b.xor(b.ashr(bits, self.bits(31)), self.bits(-1))  # ones where it is clear
        addend = b.bitcast(b.and_(clear, self.bits(_ONE)), self.vf)
        return self.fma(b.fmul(distance, v), e, addend)

    def erf_derivative(self, x, tail):
        """GELU'(x), erf form (see the module's docstring), 0 for x <= -tail (a vector; see
        `negative_tail`). +-inf: NaN from (a_r - a) * 0. Not taken on a Zen 5 EPYC (2026-12-02,
        a row of 4096 in cache, one thread, alternating; 2.75-2.80 ns per 8 lanes built for
        AVX2, 1.45-1.66 for AVX-512): t = c / (c + a), c = 1/0.316 (an add for the FMA),
        0.97-0.99x the time at both levels and within noise on 16M (0.98-1.00x); a_r's low
        part as a constant in an FMA, fma(x + s a_r_hi, v, s a_r_lo V(t_r)) (one add
        fewer), 0.98-0.99x for AVX2 and 1.03x for AVX-512; the tail test on integer bits,
        no change; Estrin's scheme for e or V, 1.05-1.10x. Without t's division (wrong
        results, a probe) it took 0.89x for AVX2."""
        b = self.b
        a = self.abs(x)
        e = self.scaled_exp(b.fmul(a, a))  # garbage where not kept
        kept = b.fcmp_ordered("<", a, tail)
        e = b.select(kept, e, self.const(0.0))
        t = b.fdiv(self.const(1.0), self.fma(a, self.const(_T_SCALE), self.const(1.0)))
        return self.by_sign(x, self.horner(t, _GELU_V_SCALED), e)

    def tanh_derivative(self, x, tail):
        """GELU'(x), tanh form (see the module's docstring), 0 for x <= -tail (a vector;
        see `negative_tail`). +-inf: NaN from inf * 0."""
        b = self.b
        a = self.abs(x)
        ac = self.at_most(a, TANH_CLAMP)
        square = b.fmul(ac, ac)
        e = self.scaled_exp(b.fmul(ac, self.fma(square, self.const(_FOUR_U[1]),
                                                self.const(_FOUR_U[0]))), short_chain=True)
        counts = b.fcmp_ordered(">=", e, self.const(2.0 ** (SCALE - 30)))  # 1 + e != 1
        big = b.fdiv(self.const(1.0), b.fadd(self.const(1.0), self.unscaled(counts, e)))
        small = b.fmul(e, big)
        w = b.fmul(b.fmul(a, b.fmul(small, big)),
                   self.fma(square, self.const(_W[1]), self.const(_W[0])))
        negative, keep = self.within(x, a, tail, TANH_TAIL[1])
        term = self.unscaled(keep, b.select(negative, b.fsub(small, w), w))
        d = b.select(negative, term, b.fadd(big, term))
        near = b.fadd(b.fsub(self.const(_TANH_ROOT_HI), a), self.const(_TANH_ROOT_LO))
        in_band = b.and_(negative, b.fcmp_ordered("<", self.abs(near), self.const(ROOT_BAND)))
        return b.select(in_band, b.fmul(near, self.horner(near, _TANH_BAND)), d)


def _row_block(use_tanh: bool, streaming: bool = False):
    """The vector loop of a float32 row at byte offsets of uint8 arrays: o = g * GELU'(x),
    for `vectors` vectors of LANES lanes, two at a time (one more where their count is
    odd), stored plainly, or one at a time and non-temporally where `streaming` (o_at
    aligned to 64 bytes; see `gelu_row`). Two vectors per step give each operation of the
    long serial chains four independent AVX2 registers (two AVX-512 ones) instead of two:
    in cache 5-9 % faster on AVX2 for the erf form. Not so on a Zen 1 EPYC, whose units
    split each AVX2 operation in two 128-bit halves: one vector per step ran the erf form 1
    % faster in cache and 3 % faster on 16M elements (18.6-18.9 ms against 19.2-19.8, two
    threads, processes alternating), the tanh form 2.5-3 % slower. With a step's prefetch,
    x and g are asked for a line of each per vector of the step, `ahead` bytes on."""
    per_step = 1 if streaming else 2

    def block(typingctx, x, x_at, g, g_at, o, o_at, vectors, tail, ahead):
        def codegen(context, builder, signature, args):
            data = array_data(context, builder, signature, args)
            _, x_at, _, g_at, _, o_at, vectors, tail_value, ahead = args
            prefetching = not isinstance(signature.args[-1], types.NoneType)
            nontemporal = ir.Constant(ir.IntType(1), 1) if streaming else None

            def step(first, lanes, prefetched):
                """o = g * GELU'(x) for the `lanes` elements from element `first`."""
                math_ = _Vectors(builder, lanes)
                tail = broadcast(builder, tail_value, math_.vf)
                derivative = math_.tanh_derivative if use_tanh else math_.erf_derivative
                offset = builder.mul(first, ir.Constant(first.type, 4))

                def at(i, base):
                    pointer = builder.gep(data(i), [builder.add(base, offset)])
                    return builder.bitcast(pointer, math_.vf.as_pointer())

                if prefetched:  # the step's lines of x and g
                    for i, base in ((0, x_at), (2, g_at)):
                        for line in range(0, 4 * lanes, CACHE_LINE_BYTES):
                            ahead_of = builder.add(offset, builder.add(ahead, ahead.type(line)))
                            prefetch(builder, builder.gep(data(i), [builder.add(base, ahead_of)]))
                product = builder.fmul(builder.load(at(2, g_at), align=1),
                                       derivative(builder.load(at(0, x_at), align=1), tail))
                store(builder, F32, product, at(4, o_at), nontemporal)

            steps = ir.Constant(vectors.type, per_step)
            with cgutils.for_range(builder, builder.udiv(vectors, steps)) as loop:
                step(builder.mul(loop.index, ir.Constant(vectors.type, per_step * LANES)),
                     per_step * LANES, prefetching)
            if per_step == 2:
                with builder.if_then(builder.trunc(vectors, ir.IntType(1))):
                    last = builder.sub(vectors, ir.Constant(vectors.type, 1))
                    step(builder.mul(last, ir.Constant(vectors.type, LANES)), LANES, False)
            return context.get_dummy_value()

        return types.none(x, types.intp, g, types.intp, o, types.intp, types.intp,
                          types.float32,
                          ahead if isinstance(ahead, types.NoneType) else types.intp), codegen
    block.__doc__ = _row_block.__doc__
    return intrinsic(block)


# whether the erf form's streamed rows store from their vector loop, where a vector spans
# more than one register (AVX2, NEON), rather than through the pad's span (see `gelu_row`)
ERF_LOOP_STREAMS = not LINE_VECTORS
_erf_block, _tanh_block = _row_block(False), _row_block(True)
_erf_streamed_block = _row_block(False, streaming=True)


@njit(inline="always", error_model="numpy")
def _vectors(x, x_at, g, g_at, o, o_at, vectors, use_tanh, tail, ahead):
    if use_tanh:
        _tanh_block(x, x_at, g, g_at, o, o_at, vectors, tail, ahead)
    else:
        _erf_block(x, x_at, g, g_at, o, o_at, vectors, tail, ahead)


def negative_tail(code: int, use_tanh: bool) -> np.float32:
    """The |x| from which the form takes a negative x's GELU' as 0, for results of the
    dtype `code`: ERF_NORMAL or TANH_NORMAL (where it turns subnormal) for float32 results,
    ERF_TAIL[0] or TANH_TAIL[0] (where it rounds to 0) for 16-bit ones. Each subnormal
    operation takes an x86 microcode assist: with self uniform in +-100 (0.6 % of the lanes
    subnormal in the erf form), 64K elements in cache on one thread took 1.09-1.10x the
    time of N(0, 1) built for AVX2 and 1.17-1.24x for AVX-512 with them, 1.00-1.02x and
    0.99-1.03x without (three runs); the tanh form (0.33 %), 16M elements on an Intel Xeon
    built for AVX-512 (2026-12-03), 8.65-8.79 ms with them against 6.08-6.15 without and
    6.16-6.29 for N(0, 1). A float32 result loses at most 2**-126 |g| so, within SPEC §10's
    2**-22 |g|. A bfloat16 result would lose up to all of its value (bfloat16 has
    float32's exponent range); float16 rows keep them too, so that they give the bits of
    the float16 table (built from these rows, see `lookup`): a product's sign, where it
    rounds to 0."""
    if code == F32:
        return TANH_NORMAL if use_tanh else ERF_NORMAL
    return TANH_TAIL[0] if use_tanh else ERF_TAIL[0]


_PAD_BYTES = 4 * LANES  # one vector of float32; the pad holds x, g, o at 0, 64, 128
# vectors computed into the pad's span before they are streamed out (see `gelu_row`): 16M
# elements took 0.91-0.94x the time with 16 as with 64 (erf form, AVX2 and AVX-512 builds;
# tanh form 0.99x and 0.88-0.92x), 1.04x with 128, 8 and 4 no faster than 16
SPAN_VECTORS = 16
_SPAN_AT = 3 * _PAD_BYTES  # where the span starts in the pad (moved to a cache line)
PAD_BYTES = _SPAN_AT + 4 * LANES * (SPAN_VECTORS + 1)  # the `pad` scratch of a row


@njit(inline="always", error_model="numpy")
def gelu_row(x, x_at, g, g_at, o, o_at, n, use_tanh, tail, pad, ahead, streaming=False):
    """o = g * GELU'(x) for a row of n float32 elements at byte offsets x_at, g_at, o_at of
    the uint8 arrays x, g, o (`tail`: see `negative_tail`). `pad`, PAD_BYTES of uint8
    scratch: the last partial vector goes through it, so that every element is computed by
    the same code. `ahead`: x and g are prefetched that many bytes ahead of their loads
    (None: not; decided where the row is compiled). `streaming`: whole vectors are stored
    non-temporally (o_at aligned to 64 bytes; a `store_fence` before the results are used):
    built for AVX2 or NEON (`ERF_LOOP_STREAMS`) the erf form's from its vector loop, one
    vector per step; otherwise computed SPAN_VECTORS at a time into the pad and copied out
    from there.

    Streaming stores mixed into a vector loop that spills registers to the stack ran 4.5x
    slower wherever the stack held the spills at some offsets within its page (a Zen 3 EPYC,
    AVX2, 2026-11-24: one process in eight, 1 to 7 of 41 call depths scanned; perf put the
    samples just after the spills: a spill store queued behind the streaming ones held up
    the loop's loads). It could not be made again since (2026-11-25 there: the worst of 512
    offsets of the stack and of o 1.3x; a Zen 5 EPYC, 2026-12-02: scans of 24 call depths x
    4 offsets of o, one thread, both ISA levels, none above 1.5x the median in three of
    four, and 1.7-2.2x at 4 of 96 points of the fourth through the span and from the loop
    alike, none slow again). On a Zen 1 EPYC (16M elements, two threads, processes
    alternating) streaming from the loop took 18.5-19.1 ms against 19.2-19.8 through the
    span at two vectors per step, but 24.3-24.6 at one; that one-vector loop (of 2026-11-28)
    spilled too, 3 stack stores when built for znver1 today. The erf form's one-vector loop
    of now spills nothing, built for haswell, znver1, znver2, znver3, skylake or alderlake
    alike (at two it spills x, which the end of the chain reads again; reading x again
    through an opaque pointer only moved the spill to |x|), so only it streams from the
    loop; the tanh form's loop spills at either width and keeps the span.

    The span costs its copy where the rows are bound by their compute: on the Zen 5 (16M,
    two threads, alternating in one process), streamed from the one-vector loop, the erf
    form built for AVX2 took 0.91-0.97x the span's time (3.19-3.55 ms against 3.44-3.68;
    from two vectors per step 0.89-0.96x), the tanh form 0.95x (one thread, 10.99 against
    11.63 ms, from its spilling loop); built for AVX-512, bound by memory, the span's bursts
    of streaming stores took 0.93-1.00x the time of streaming from the loop in eight runs of
    nine (1.2x in one). Whole processes on one thread also ran about 1.8x slower at times on
    the Zen 3, through the span (2 of about 90) and from the loop (1 of about 15), for
    reasons not found."""
    vectors, done, rest = split_row(F32, n)
    if streaming and ERF_LOOP_STREAMS and not use_tanh:
        _erf_streamed_block(x, x_at, g, g_at, o, o_at, vectors, tail, ahead)
    elif streaming:
        span = _SPAN_AT + (-(pad.ctypes.data + _SPAN_AT)) % CACHE_LINE_BYTES
        for first in range(0, vectors, SPAN_VECTORS):
            count = min(SPAN_VECTORS, vectors - first)
            at = 4 * LANES * first
            _vectors(x, x_at + at, g, g_at + at, pad, span, count, use_tanh, tail, ahead)
            stream_f32x16(o, o_at + at, pad, span, count)
    else:
        _vectors(x, x_at, g, g_at, o, o_at, vectors, use_tanh, tail, ahead)
    if rest:
        pad[:] = 0
        copy_bytes(pad, 0, x, x_at + done, rest)
        copy_bytes(pad, _PAD_BYTES, g, g_at + done, rest)
        _vectors(pad, 0, pad, _PAD_BYTES, pad, 2 * _PAD_BYTES, 1, use_tanh, tail, None)
        copy_bytes(o, o_at + done, pad, 2 * _PAD_BYTES, rest)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def gelu_flat(g, x, o, use_tanh, tail, streaming):
    """Contiguous float32 arrays: o = g * GELU'(x) (`tail`: see `negative_tail`). The rows
    are blocks of BLOCK elements, handed out in up to RUNS runs that each allocate their pad
    once. `streaming` (o aligned to 64 bytes): stored non-temporally, each run fenced."""
    n = o.size
    gb, xb, ob = g.view(np.uint8), x.view(np.uint8), o.view(np.uint8)
    blocks = (n + BLOCK - 1) // BLOCK
    runs = min(blocks, RUNS)
    for run in prange(runs):
        pad = np.empty(PAD_BYTES, np.uint8)
        for b in range(run * blocks // runs, (run + 1) * blocks // runs):
            start = b * BLOCK
            at = start * 4
            gelu_row(xb, at, gb, at, ob, at, min(BLOCK, n - start), use_tanh, tail, pad,
                     PREFETCH_BYTES, streaming)
        if streaming:
            store_fence()


@njit(nogil=True, cache=True, error_model="numpy")
def gelu_block(g, x, o, use_tanh, tail):
    """`gelu_flat` for at most BLOCK elements (one row, plain stores) on the calling
    thread: the same row, so the same bits, without a parallel launch of one run (see
    `smooth_l1_rows.smooth_l1_block`)."""
    gelu_row(x.view(np.uint8), 0, g.view(np.uint8), 0, o.view(np.uint8), 0, o.size, use_tanh,
             tail, np.empty(PAD_BYTES, np.uint8), PREFETCH_BYTES)
