"""Float32 op-by-op references of the Ascend950 (arch35) kernels of three operators.

Each function evaluates one kernel DAG of hicann/ops-nn operation by operation, in the
DAG's order, on float32 NumPy arrays: every intermediate is an `np.float32` array, so
every vector operation rounds once (IEEE round-to-nearest-even, subnormals kept, no
flush to zero). Sources read (hicann/ops-nn):

* SmoothL1LossBackward - loss/smooth_l1_loss_grad_v2/op_kernel/arch35/
  smooth_l1_loss_grad_v2_dag.h (a DAG for a tensor gradOut and one for a gradOut of one
  element), the arch35 tiling (sigma, negSigma = -1.0f * sigma, invertSigma = NaN when
  fabsf(sigma) < 1e-6f else 1 / sigma; the mean coefficient float(1.0f / double(n)) with n
  the element count of predict's storage shape, i.e. `self` as given - the op_api makes
  the inputs contiguous and casts them to the promoted dtype but does NOT broadcast them)
  and op_api/aclnn_smooth_l1_loss_backward.cpp (beta is a C float).
* L1LossBackward - loss/l1_loss_grad/op_kernel/arch35/l1_loss_grad_dag.h, the arch35
  tiling (mean coefficient: float 1.0 divided by each dim of label's storage shape in
  turn, each quotient rounded to float32; label is always broadcast to the full shape by
  the op_api, so that is the broadcast shape, [1] for a 0-d result) and the op_api.
  The sign is two comparisons in the input dtype, so NaN gives sign 0.
* GeluBackwardV2 - activation/gelu_grad_v2/op_kernel/arch35/gelu_grad_v2_dag.h (erf form:
  Muls(x, 0.707106781f), Erf, then GeluGradV2ErfPost; tanh form: GeluGradV2TanhCustom).

Conventions (fixed by the brief this module was written to):

* Inputs of float16 / bfloat16 / float32 are first cast to the promoted dtype (exact, the
  op_api's Cast) and then to float32 (exact, Cast<float, T>); the float32 result is rounded
  to the promoted dtype (Cast<T, float, RINT>: `astype`, round to nearest even) and then
  to the requested output dtype (the op_api's final Cast).
* Muls / Adds / Mul / Add / Div are IEEE float32 operations. The kernels' scalar constants
  are the float32 roundings of the decimal literals in the sources.
* Exp and Erf are taken as CORRECTLY ROUNDED float32 functions. They are evaluated in
  float64 (`np.exp`, `math.erf`) and rounded to float32. That equals the correctly rounded
  result unless the float64 value lies within about 2^-52 relative of a float32 rounding
  midpoint: the libm results (glibc exp, erf) are within 1 float64 ulp <= 2^-52 relative
  of the true value, so only then can the true value and the float64 value lie on
  different sides of the midpoint. `exp_f32` / `erf_f32` check every element and raise
  `MidpointError` if one lies within 2^-52 relative of a midpoint, so a reference is never
  silently wrong.
* MicroAPI::Axpy (dst = dst + src * scalar) in the tanh form: UNCERTAIN whether fused.
  What the public material shows: Reg::Axpy on float/half lowers to the single `vaxpy`
  instruction (asc-devkit micro-vector ternary-scalar impl; only 64-bit integers are
  emulated as Muls then Add); the Reg-level Axpy page describes it only as an element-wise
  "multiply-add" (乘加) without saying how it rounds; the high-level Axpy page says it
  "computes through the combination of Muls and Add for better precision", yet on
  arch 3510 that high-level Axpy is implemented with Reg::Axpy itself. None of this states
  one rounding or two, so, as instructed, the default here is a multiply then an add (two
  roundings); `fused_axpy=True` selects a single rounding (see `_axpy`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = (F32, F16, BF16)

#: Relative distance from a float32 rounding midpoint below which a float64 evaluation
#: of exp/erf is not trusted to round to the correctly rounded float32 result.
MIDPOINT_MARGIN = 2.0**-52

# GeluGradV2TanhCustom's constants (float32 roundings of the literals in the kernel).
TANH_BETA = np.float32(1.595769121605730711759)
TANH_BETAN = np.float32(-1.595769121605730711759)
TANH_AN = np.float32(-0.0713548162726002527220)
TANH_A3 = np.float32(0.2140644488178007)
# The erf form's constants.
ERF_ONE_OVER_SQRT2 = np.float32(0.707106781)
ERF_INV_SQRT_2PI = np.float32(0.3989422804)

REDUCTIONS = {"none": 0, "mean": 1, "sum": 2, 0: 0, 1: 1, 2: 2}


class MidpointError(AssertionError):
    """A float64 exp/erf value lies too close to a float32 rounding midpoint to be trusted."""


# --------------------------------------------------------------------------- dtypes, rounding


def promote(*dtypes) -> np.dtype:
    """The promoted dtype of float32 / float16 / bfloat16 operands (aclnn's PromoteType:
    equal dtypes stay, float16 with bfloat16 and anything with float32 give float32)."""
    ds = {np.dtype(d) for d in dtypes}
    unknown = ds - set(FLOAT_DTYPES)
    if unknown:
        raise TypeError(f"unsupported dtype(s) {sorted(map(str, unknown))}")
    return ds.pop() if len(ds) == 1 else F32


def to_f32(a, promoted: np.dtype) -> np.ndarray:
    """`a` cast to the promoted dtype (exact: only widening happens) and then to float32."""
    a = np.asarray(a)
    widened = a.astype(promoted)
    assert np.array_equal(widened.astype(a.dtype), a, equal_nan=True), "promotion was not exact"
    return widened.astype(F32)


def store(result: np.ndarray, promoted: np.dtype, out_dtype) -> np.ndarray:
    """The float32 `result` rounded to the promoted dtype (Cast RINT, nearest even), then
    to `out_dtype` (default: the promoted dtype)."""
    assert result.dtype == F32
    with np.errstate(over="ignore"):
        kernel_out = result.astype(promoted)
        return kernel_out.astype(promoted if out_dtype is None else np.dtype(out_dtype))


def _check_midpoints(v64: np.ndarray, r32: np.ndarray, what: str) -> None:
    """Raise MidpointError if a finite float64 value `v64` is within MIDPOINT_MARGIN
    (relative) of the midpoint between its float32 rounding `r32` and the float32
    neighbour on its side."""
    v = v64.ravel()
    r = r32.astype(np.float64).ravel()
    live = np.isfinite(v) & (v != r)
    if not live.any():
        return
    v, r, r32f = v[live], r[live], r32.ravel()[live]
    toward = np.where(v > r, np.float32(np.inf), np.float32(-np.inf)).astype(F32)
    with np.errstate(over="ignore"):
        nxt = np.nextafter(r32f, toward).astype(np.float64)
    top = 2.0**128  # what the float32 after FLT_MAX would be with an unbounded exponent
    nxt = np.where(np.isinf(nxt) & np.isfinite(r), np.copysign(top, v), nxt)
    # r32 overflowed to inf: the midpoint is FLT_MAX + ulp/2 = 2^128 - 2^103
    mid = np.where(np.isinf(r), np.copysign(top - 2.0**103, v), (r + nxt) / 2.0)
    close = np.abs(v - mid) <= MIDPOINT_MARGIN * np.abs(v)
    if close.any():
        bad = v[close][:5]
        raise MidpointError(f"{what}: float64 values {bad.tolist()} lie within "
                            f"{MIDPOINT_MARGIN} (relative) of a float32 midpoint")


def exp_f32(a: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 exp of the float32 array `a` (see the module docstring)."""
    assert a.dtype == F32
    with np.errstate(over="ignore", under="ignore"):
        v = np.exp(a.astype(np.float64))
        r = v.astype(F32)
    _check_midpoints(v, r, "exp")
    return r


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf_f32(a: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 erf of the float32 array `a` (see the module docstring)."""
    assert a.dtype == F32
    v = np.asarray(_ERF(a.astype(np.float64)), dtype=np.float64).reshape(a.shape)
    r = v.astype(F32)
    _check_midpoints(v, r, "erf")
    return r


def _axpy(dst: np.ndarray, src: np.ndarray, scalar: np.float32, fused: bool) -> np.ndarray:
    """MicroAPI::Axpy: dst + src * scalar. Unfused (default): round the product, then the
    sum. Fused: one rounding of the exact dst + src*scalar - the float64 product of two
    float32 values is exact, the float64 sum s is corrected by its exact error e (TwoSum),
    and where s falls exactly on a float32 midpoint the sign of e picks the side."""
    if not fused:
        return dst + src * scalar
    with np.errstate(over="ignore", invalid="ignore"):
        a = dst.astype(np.float64)
        b = src.astype(np.float64) * np.float64(scalar)
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)                   # TwoSum: a + b == s + e exactly
        r = s.astype(F32)
        up = np.nextafter(r, np.float32(np.inf)).astype(np.float64)
        down = np.nextafter(r, np.float32(-np.inf)).astype(np.float64)
        r64 = r.astype(np.float64)
        fin = np.isfinite(s) & np.isfinite(e)
        # s is a tie between r and a neighbour (ties-to-even chose r): the sign of e decides
        tie_up = fin & (e > 0) & (s == (r64 + up) / 2)
        tie_down = fin & (e < 0) & (s == (r64 + down) / 2)
        r = np.where(tie_up, up.astype(F32), r).astype(F32)
        return np.where(tie_down, down.astype(F32), r).astype(F32)


def _bcast(*arrays: np.ndarray) -> list[np.ndarray]:
    """The arrays broadcast to their common shape, as contiguous copies (0-d stays 0-d)."""
    return [np.array(a) for a in np.broadcast_arrays(*arrays)]


def _reduction(reduction) -> int:
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}")
    return REDUCTIONS[reduction]


# --------------------------------------------------------------------------- SmoothL1


def smooth_l1_scalars(beta: float) -> tuple[np.float32, np.float32, np.float32]:
    """(sigma, negSigma, invertSigma) as the arch35 tiling computes them from `beta` (a
    Python float, first rounded to the C float the API takes)."""
    sigma = np.float32(beta)
    neg_sigma = np.float32(-1.0) * sigma
    inv_sigma = np.float32(np.nan) if abs(sigma) < np.float32(1e-6) else np.float32(1) / sigma
    return sigma, neg_sigma, inv_sigma


def smooth_l1_mean_coef(self_shape: Sequence[int]) -> np.float32:
    """float(1.0f / double(n)), n the element count of `self_shape` (0-d counts as [1])."""
    n = 1
    for d in self_shape:
        n *= int(d)
    return np.float32(1.0 / float(n))


def smooth_l1_950(grad, x, target, beta: float, reduction, self_shape=None,
                  out_dtype=None) -> np.ndarray:
    """aclnnSmoothL1LossBackward on Ascend950: SmoothL1LossGradV2OpDag, or the scalar DAG
    (non-strict comparisons) when gradOut has exactly one element.

    `self_shape` (default x's shape) is the shape the mean coefficient counts; the result
    has the broadcast shape and `out_dtype` (default: the promoted dtype)."""
    grad, x, target = np.asarray(grad), np.asarray(x), np.asarray(target)
    promoted = promote(grad.dtype, x.dtype, target.dtype)
    scalar_dag = grad.size == 1
    shape = np.broadcast_shapes(grad.shape, x.shape, target.shape)
    mode = _reduction(reduction)
    norm = smooth_l1_mean_coef(x.shape if self_shape is None else self_shape) if mode == 1 \
        else np.float32(1.0)
    sigma, neg_sigma, inv_sigma = smooth_l1_scalars(beta)
    p, lab, dout = _bcast(to_f32(x, promoted), to_f32(target, promoted), to_f32(grad, promoted))
    zero, one, neg_one = np.float32(0.0), np.float32(1.0), np.float32(-1.0)
    with np.errstate(all="ignore"):
        d = p - lab                                     # OpX = Sub
        d_abs = np.abs(d)                               # OpXAbs
        d_scaled = d * inv_sigma                        # OpXInvertSigma = Muls
        if scalar_dag:
            is_neg = d <= neg_sigma                     # Compare LE
            is_pos = d >= sigma                         # Compare GE
            outer = d_abs >= sigma                      # Compare GE
        else:
            is_neg = d < neg_sigma                      # Compare LT
            is_pos = d > sigma                          # Compare GT
            outer = d_abs > sigma                       # Compare GT
        sel_pos = np.where(is_pos, one, zero).astype(F32)
        sel_neg = np.where(is_neg, neg_one, zero).astype(F32)
        sel_x = np.where(outer, zero, d_scaled).astype(F32)
        acc = sel_pos + sel_neg                         # OpAddPosNeg
        acc = acc + sel_x                               # OpAdd
        res = acc * dout                                # OpRes = Mul
        res = res * norm                                # Mul0 = Muls(norm)
    assert res.dtype == F32 and res.shape == shape
    return store(res, promoted, out_dtype)


# --------------------------------------------------------------------------- L1


def l1_mean_coef(shape: Sequence[int]) -> np.float32:
    """1.0f divided by each dim of `shape` in turn (0-d counts as [1]), each quotient a
    float32 division."""
    coef = np.float32(1.0)
    for d in (list(shape) or [1]):
        coef = coef / np.float32(d)
    return coef


def l1_950(grad, x, target, reduction, out_dtype=None) -> np.ndarray:
    """aclnnL1LossBackward on Ascend950: L1LossGradCast (or its scalar-grads twin, the same
    arithmetic): sign(x - target) by two comparisons (NaN -> 0), grads * coef, sign * that.
    The mean coefficient counts the broadcast shape (label is broadcast by the op_api)."""
    grad, x, target = np.asarray(grad), np.asarray(x), np.asarray(target)
    promoted = promote(grad.dtype, x.dtype, target.dtype)
    shape = np.broadcast_shapes(grad.shape, x.shape, target.shape)
    coef = l1_mean_coef(shape) if _reduction(reduction) == 1 else np.float32(1.0)
    g, p, lab = _bcast(to_f32(grad, promoted), to_f32(x, promoted), to_f32(target, promoted))
    with np.errstate(all="ignore"):
        gt = p > lab                                    # Compare GT (exact in the input dtype)
        sel = np.where(gt, np.float32(1.0), np.float32(0.0)).astype(F32)
        lt = p < lab                                    # Compare LT
        sign = np.where(lt, np.float32(-1.0), sel).astype(F32)
        scaled = g * coef                               # OpGrads = Muls(coef)
        res = sign * scaled                             # OpResCast = Mul
    assert res.dtype == F32 and res.shape == shape
    return store(res, promoted, out_dtype)


# --------------------------------------------------------------------------- GELU


def gelu_erf_950(grad, x, out_dtype=None) -> np.ndarray:
    """aclnnGeluBackwardV2(approximate="none") on Ascend950: erf(x * 0.707106781f), then
    GeluGradV2ErfPost: (erf*0.5 + 0.5 + exp(x*x*-0.5)*0.3989422804f*x) * dy."""
    grad, x = np.asarray(grad), np.asarray(x)
    promoted = promote(grad.dtype, x.dtype)
    dy, xv = _bcast(to_f32(grad, promoted), to_f32(x, promoted))
    with np.errstate(all="ignore"):
        erf_in = xv * ERF_ONE_OVER_SQRT2                # OpCdfErfInput = Muls
        erf = erf_f32(erf_in)                           # Erf
        cdf = erf * np.float32(0.5)                     # Muls 0.5
        cdf = cdf + np.float32(0.5)                     # Adds 0.5
        sq = xv * xv                                    # Mul
        sq = sq * np.float32(-0.5)                      # Muls -0.5
        pdf = exp_f32(sq)                               # Exp
        pdf = pdf * ERF_INV_SQRT_2PI                    # Muls 1/sqrt(2 pi)
        mul = pdf * xv                                  # Mul
        add = cdf + mul                                 # Add
        res = add * dy                                  # Mul
    return store(res, promoted, out_dtype)


def gelu_tanh_950(grad, x, out_dtype=None, fused_axpy: bool = False) -> np.ndarray:
    """aclnnGeluBackwardV2(approximate="tanh") on Ascend950: GeluGradV2TanhCustom.

    px = exp((BETAN + x^2*AN) * x); res0 = (BETA + x^2*A3) * x; div = 1 / (px + 1);
    r = px * div * res0 * div, NaN -> 0; out = dy * (r + div). `fused_axpy`: see the
    module docstring."""
    grad, x = np.asarray(grad), np.asarray(x)
    promoted = promote(grad.dtype, x.dtype)
    dy, xv = _bcast(to_f32(grad, promoted), to_f32(x, promoted))
    with np.errstate(all="ignore"):
        xsq = xv * xv                                   # Mul
        px = np.full_like(xv, TANH_BETAN)               # Duplicate BETAN
        px = _axpy(px, xsq, TANH_AN, fused_axpy)        # Axpy
        px = px * xv                                    # Mul
        px = exp_f32(px)                                # Exp
        res0 = np.full_like(xv, TANH_BETA)              # Duplicate BETA
        res0 = _axpy(res0, xsq, TANH_A3, fused_axpy)    # Axpy
        res0 = res0 * xv                                # Mul
        t = px + np.float32(1.0)                        # Adds 1
        div = np.float32(1.0) / t                       # Div(ones, t)
        resp = px * div                                 # Mul
        resp = resp * res0                              # Mul
        resp = resp * div                               # Mul
        resp = np.where(resp == resp, resp, np.float32(0.0)).astype(F32)  # Compare EQ, Select
        resp = resp + div                               # Add
        res = dy * resp                                 # Mul
    return store(res, promoted, out_dtype)


def gelu_950(grad, x, approximate: str = "none", out_dtype=None) -> np.ndarray:
    """`gelu_erf_950` for approximate="none", `gelu_tanh_950` for "tanh"."""
    if approximate == "none":
        return gelu_erf_950(grad, x, out_dtype)
    if approximate == "tanh":
        return gelu_tanh_950(grad, x, out_dtype)
    raise ValueError(f"unknown approximate {approximate!r}")
