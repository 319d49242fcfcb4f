"""Independent float64 references and ULP helpers for the elementwise backward operators.

The references implement the math of SPEC §8 in float64 on the exact input values (the
inputs are first widened exactly from their storage dtype), which is the "golden" of SPEC
§10. They share no code with `aclnn`.

The second half of the module holds small device helpers (built on `tests/support.py`)
that run an operator through the public two-phase API; they are imported lazily so the
numeric part stays usable on its own.
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

#: (explicit mantissa bits, minimum normal exponent, maximum exponent) per output dtype.
_FORMAT = {
    F32: (23, -126, 127),
    F16: (10, -14, 15),
    BF16: (7, -126, 127),
}

REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM = 0, 1, 2

_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TANH_K = math.sqrt(2.0 / math.pi)
_TANH_C = 0.044715

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


# --------------------------------------------------------------------------- dtypes


def promote(*dtypes) -> np.dtype:
    """SPEC §5 promotion restricted to {float32, float16, bfloat16}, left to right.

    Equal dtypes stay; float16 with bfloat16 gives float32; anything with float32 gives
    float32.
    """
    result = np.dtype(dtypes[0])
    for other in dtypes[1:]:
        other = np.dtype(other)
        if other != result:
            result = F32
    return result


def widen(a) -> np.ndarray:
    """The exact float64 value of every element of `a` (any float dtype, or a scalar)."""
    return np.asarray(a).astype(np.float64)


# --------------------------------------------------------------------------- references


def smooth_l1_backward(g, x, y, reduction: int, beta: float) -> np.ndarray:
    """Golden SmoothL1LossBackward (SPEC §8) in float64, shape = broadcast(g, x, y).

    d = x - y; result = g*d/beta where |d| < beta, else g*sign(d) with sign(0) = 0
    (beta = 0 is pure sign). `beta` is a C `float`, so it is first rounded to float32.
    Reduction mean (1) divides by numel(x) (self's own element count); none (0) and sum
    (2) do not scale. NaN and infinities propagate as the formula does in float64
    (e.g. g = inf with d = 0 gives inf*0 = NaN).
    """
    g, x, y = widen(g), widen(x), widen(y)
    beta = float(np.float32(beta))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        d = x - y
        linear = np.abs(d) < beta
        safe_beta = beta if beta > 0 else 1.0
        out = np.where(linear, g * (d / safe_beta), g * np.sign(d))
        if reduction == REDUCTION_MEAN:
            out = out / float(max(x.size, 1))
    return np.asarray(out, dtype=np.float64)


def l1_backward(g, x, y, reduction: int) -> np.ndarray:
    """Golden L1LossBackward (SPEC §8) in float64, shape = broadcast(g, x, y).

    result = g*sign(x - y) (sign(0) = 0, sign(NaN) = NaN); reduction mean (1) divides by
    the element count of the broadcast result shape (not of self).
    """
    g, x, y = widen(g), widen(x), widen(y)
    with np.errstate(invalid="ignore", over="ignore"):
        out = g * np.sign(x - y)
        if reduction == REDUCTION_MEAN:
            n = math.prod(np.broadcast_shapes(g.shape, x.shape, y.shape))
            out = out / float(max(n, 1))
    return np.asarray(out, dtype=np.float64)


def gelu_derivative(x, approximate: str) -> np.ndarray:
    """d GELU(x)/dx in float64 (SPEC §8), without cancellation.

    none: Phi(x) + x*phi(x) with Phi(x) = erfc(-x/sqrt 2)/2 (accurate for x << 0).
    tanh: sigmoid(2u) + x/2 * 4*sigmoid(2u)*sigmoid(-2u) * sqrt(2/pi)*(1 + 3c x^2),
    u = sqrt(2/pi)*(x + c x^3), c = 0.044715. +-inf give NaN (inf*0), as in PyTorch.
    """
    x = widen(x)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        if approximate == "none":
            cdf = 0.5 * _erfc(-x / _SQRT2)
            pdf = np.exp(-0.5 * x * x) / _SQRT_2PI
            return np.asarray(cdf + x * pdf, dtype=np.float64)
        if approximate == "tanh":
            u = _TANH_K * (x + _TANH_C * x * x * x)
            s_pos = 1.0 / (1.0 + np.exp(-2.0 * u))  # sigmoid(2u) = (1 + tanh u)/2
            s_neg = 1.0 / (1.0 + np.exp(2.0 * u))  # sigmoid(-2u)
            one_minus_t2 = 4.0 * s_pos * s_neg
            du = _TANH_K * (1.0 + 3.0 * _TANH_C * x * x)
            return np.asarray(s_pos + 0.5 * x * one_minus_t2 * du, dtype=np.float64)
    raise ValueError(f"approximate must be 'none' or 'tanh', not {approximate!r}")


def gelu_backward(g, x, approximate: str) -> np.ndarray:
    """Golden GeluBackwardV2 (SPEC §8) in float64: g * gelu'(x), shape = broadcast(g, x)."""
    g = widen(g)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(g * gelu_derivative(x, approximate), dtype=np.float64)


# --------------------------------------------------------------------------- float32 range


def smooth_l1_f32_hazard(g, x, y, reduction: int, beta: float) -> np.ndarray:
    """Elements whose float32 result depends on the evaluation order (excluded from bars).

    In the linear branch (|d| < beta) the result is the product of g, d, 1/beta and the
    mean scale. SPEC fixes float32 as the compute type and no float32 evaluation order is
    safe for all inputs: (g*d)/beta underflows g*d for tiny g*d with beta < 1 (or
    overflows it with beta > 1), g*(d/beta) underflows d/beta for subnormal d and then
    amplifies the error by a large g. Elements where SOME product of two or three of
    those factors leaves the float32 normal range in a way that matters are flagged:
    |p| > FLT_MAX with a finite float32 golden, or 0 < |p| < 2**-126 with |golden| > |p|.
    Sign-branch elements (a single product g*scale) are never flagged.
    """
    scale = 1.0 / float(max(widen(x).size, 1)) if reduction == REDUCTION_MEAN else 1.0
    g, x, y = np.broadcast_arrays(widen(g), widen(x), widen(y))
    beta32 = float(np.float32(beta))
    shape = np.broadcast_shapes(g.shape, x.shape, y.shape)
    hazard = np.zeros(shape, dtype=bool)
    if beta32 <= 0:
        return hazard
    with np.errstate(all="ignore"):
        d = x - y
        linear = np.abs(d) < beta32
        factors = [np.abs(g), np.abs(d), np.full(shape, 1.0 / beta32), np.full(shape, scale)]
        golden = factors[0] * factors[1] * factors[2] * factors[3]
        fmax = float(np.finfo(np.float32).max)
        tiny = 2.0**-126
        for mask in range(1, 16):
            if bin(mask).count("1") < 2:
                continue  # single factors are exact inputs (or one correctly rounded 1/x)
            p = np.ones(shape)
            for i in range(4):
                if mask >> i & 1:
                    p = p * factors[i]
            under = (p > 0) & (p < tiny) & (golden > p)
            over = (p > fmax) & (golden <= fmax)
            hazard |= linear & np.isfinite(p) & (under | over)
    return hazard


# --------------------------------------------------------------------------- ULP helpers


def _format(dtype) -> tuple[int, int, int]:
    dtype = np.dtype(dtype)
    if dtype not in _FORMAT:
        raise ValueError(f"no ULP model for {dtype}")
    return _FORMAT[dtype]


def ulp_of(value, dtype) -> np.ndarray:
    """Spacing of `dtype` at |value| (float64 array): 2**(e - mantissa_bits).

    e is the binade exponent floor(log2|value|), clamped below at the minimum normal
    exponent (subnormal spacing, also used for 0) and above at the maximum exponent
    (values beyond the largest finite number and non-finite values use the top binade).
    """
    p, emin, emax = _format(dtype)
    v = np.abs(np.asarray(value, dtype=np.float64))
    _, e = np.frexp(np.where(np.isfinite(v), v, 0.0))
    e = np.where(v == 0, emin, e - 1)
    e = np.where(np.isfinite(v), e, emax)
    e = np.clip(e, emin, emax)
    return np.ldexp(1.0, (e - p).astype(np.int64))


def round_to(dtype, values) -> np.ndarray:
    """Correctly round float64 `values` to `dtype` (round-to-nearest-even, overflow to inf).

    Implemented independently of NumPy's/ml_dtypes' casts (ml_dtypes may round
    float64 -> bfloat16 through float32, i.e. twice): each value is scaled by a power of
    two to an integer grid, rounded with np.round (ties to even) and scaled back, all
    exactly in float64; the result is then exactly representable in `dtype`.
    """
    dtype = np.dtype(dtype)
    p, emin, emax = _format(dtype)
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    fv = np.where(finite, v, 0.0)
    _, e = np.frexp(fv)
    e = np.maximum(np.where(fv == 0, emin, e - 1), emin)
    q = np.ldexp(1.0, (e - p).astype(np.int64))
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.round(fv / q) * q
        r = np.where(np.abs(r) >= 2.0 ** (emax + 1), np.sign(r) * np.inf, r)
    r = np.where(finite, r, v)
    # r is exactly representable in float32 (or is inf/NaN) and then in `dtype`.
    return r.astype(np.float32).astype(dtype)


def _fmt_index(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def assert_within_ulp(
    actual,
    golden64,
    dtype,
    ulps: float,
    abs_extra=0.0,
    *,
    exclude=None,
    inputs: dict | None = None,
    what: str = "",
) -> None:
    """Assert every element of `actual` is within `ulps` ULP (+ `abs_extra`) of the golden.

    `golden64` is the float64 golden; `dtype` the output dtype whose ULP (at |golden|)
    is the unit. Rules: NaN matches NaN only; a golden that is (or rounds to) +-inf
    matches the same-sign inf (and, if the golden is a finite overflow, a finite value
    within `ulps` of 2**(emax+1)); an actual +-inf counts as +-2**(emax+1) when measured
    against a finite golden, so FLT_MAX-vs-inf is 1 ULP. Signed zeros compare equal.
    `abs_extra` (scalar or broadcastable array) adds an absolute allowance per element.
    `exclude` masks elements not checked. `inputs` (name -> array broadcastable to the
    output shape) are printed at the worst element. On failure the message names the
    number of failing elements and the worst one (index, actual, golden, distance in ULP).
    """
    dtype = np.dtype(dtype)
    _, _, emax = _format(dtype)
    a = np.asarray(actual)
    assert a.dtype == dtype, f"{what}: output dtype {a.dtype} != expected {dtype}"
    a = a.astype(np.float64)
    g = np.asarray(golden64, dtype=np.float64)
    assert a.shape == g.shape, f"{what}: output shape {a.shape} != golden shape {g.shape}"
    big = 2.0 ** (emax + 1)
    with np.errstate(invalid="ignore", over="ignore"):
        g_r = round_to(dtype, g).astype(np.float64)
        a_nan, g_nan = np.isnan(a), np.isnan(g)
        ok = a_nan & g_nan
        g_inf = np.isinf(g_r) & ~g_nan
        ok |= g_inf & (a == g_r)
        a_m = np.where(np.isinf(a), np.sign(a) * big, a)
        g_c = np.clip(g, -big, big)
        dist = np.abs(a_m - g_c)
        ulp = ulp_of(g_c, dtype)
        allowed = ulps * ulp + np.broadcast_to(np.asarray(abs_extra, dtype=np.float64), g.shape)
        ok |= np.isfinite(g) & ~a_nan & (dist <= allowed)
    if exclude is not None:
        ok |= np.broadcast_to(np.asarray(exclude, dtype=bool), g.shape)
    if ok.all():
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        badness = np.where(ok, -1.0, np.where(np.isfinite(dist), dist / ulp, np.inf))
        badness = np.where(np.isnan(badness) & ~ok, np.inf, badness)
    worst = np.unravel_index(int(np.argmax(badness)), g.shape) if g.ndim else ()
    n_bad = int((~ok).sum())
    lines = [
        f"{what}: {n_bad} of {g.size} elements outside {ulps} ULP"
        + (" + abs_extra" if np.any(np.asarray(abs_extra) != 0) else "")
        + f" of the float64 golden ({dtype})",
        f"  worst at index {_fmt_index(worst)}: actual={a[worst]!r} golden={g[worst]!r}"
        f" golden_rounded={g_r[worst]!r} distance={dist[worst] / ulp[worst]:.3g} ULP"
        f" allowed={allowed[worst]!r}",
    ]
    for name, arr in (inputs or {}).items():
        val = np.broadcast_to(np.asarray(arr), g.shape)[worst]
        lines.append(f"  {name}={val!r}")
    raise AssertionError("\n".join(lines))


def ulp_bar(op: str, dtype) -> float:
    """The SPEC §10 ULP count for `op` ('smooth_l1', 'l1', 'gelu') and output `dtype`."""
    dtype = np.dtype(dtype)
    if dtype == F32:
        return 8.0 if op == "gelu" else 4.0
    return 1.0


def gelu_abs_extra(g) -> np.ndarray:
    """The GELU absolute allowance 2**-22 * |gradOutput| (SPEC §10), as float64."""
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.abs(widen(g)) * 2.0**-22, nan=0.0, posinf=0.0)


def gelu_inf_grad_ambiguous(g, x, approximate: str) -> np.ndarray:
    """Elements where gradOutput is +-inf and |gelu'(x)| is below float32 compute error.

    There inf*derivative is NaN or +-inf depending on float32 rounding of a derivative
    that is (nearly) zero; such elements are excluded from the bars.
    """
    gg, xx = np.broadcast_arrays(widen(g), widen(x))
    with np.errstate(invalid="ignore"):
        der = gelu_derivative(xx, approximate)
        return np.isinf(gg) & (np.isfinite(der) & (np.abs(der) < 2.0**-20))


def check_output(op: str, actual, golden64, dtype, *, g=None, exclude=None, inputs=None,
                 what: str = "") -> None:
    """Apply the project bar of SPEC §10 for `op` to `actual` (dtype `dtype`).

    float32: 4 ULP (smooth_l1, l1), 8 ULP + 2**-22*|g| (gelu). float16/bfloat16: 1 ULP,
    with no absolute term (a 16-bit GELU output implies 16-bit x, which cannot come close
    enough to the derivative's root for float32 cancellation to matter).
    """
    extra = 0.0
    if op == "gelu" and np.dtype(dtype) == F32:
        extra = np.broadcast_to(gelu_abs_extra(g), np.shape(golden64))
    assert_within_ulp(actual, golden64, dtype, ulp_bar(op, dtype), extra, exclude=exclude,
                      inputs=inputs, what=what or op)


# --------------------------------------------------------------------------- device helpers


def layout_strides(
    shape: Sequence[int],
    perm: Sequence[int] | None = None,
    step: int = 1,
    gap: int = 0,
    zero_dims: Sequence[int] = (),
) -> list[int]:
    """Element strides of a (possibly) non-contiguous layout of logical `shape`.

    `perm` lists the logical dims from outermost to innermost in memory (default: row
    major); the innermost stride is `step`; each further level adds `gap` spare elements;
    dims in `zero_dims` get stride 0 (broadcast views).
    """
    n = len(shape)
    perm = list(range(n)) if perm is None else list(perm)
    strides = [0] * n
    acc = step
    for d in reversed(perm):
        if d in zero_dims:
            continue
        strides[d] = acc
        acc = acc * max(int(shape[d]), 1) + gap
    return strides


def view_positions(shape: Sequence[int], strides: Sequence[int], offset: int) -> np.ndarray:
    """Storage indices (elements) touched by the view, as an array of `shape`."""
    pos = np.full(tuple(shape), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides, strict=True)):
        idx = np.arange(n, dtype=np.int64) * s
        pos = pos + idx.reshape([-1 if i == d else 1 for i in range(len(shape))])
    return pos


def strided_device(values, strides, offset: int = 0, fill=None, tail: int = 3):
    """A DeviceTensor viewing `values` through `strides`/`offset` in a larger storage.

    Storage elements outside the view hold `fill` (default: a junk pattern of the dtype
    that is not NaN); `tail` spare elements follow the view's last element. With
    zero strides, `values` must be constant along those dims.
    """
    from support import DeviceTensor

    values = np.asarray(values)
    shape = values.shape
    if values.size == 0:
        size = offset + tail + 1
    else:
        size = offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + 1 + tail
    junk = -12345.0 if fill is None else fill
    storage = np.full(size, junk, dtype=values.dtype)
    if values.size:
        pos = view_positions(shape, strides, offset)
        storage[pos.reshape(-1)] = values.reshape(-1)
        check = storage[pos]
        assert np.array_equal(check.view(_uint(values.dtype)), values.view(_uint(values.dtype))), (
            "values not constant along zero-stride dims"
        )
    return DeviceTensor(storage, list(shape), list(strides), offset)


def aligned_zeros(size: int, dtype) -> np.ndarray:
    """A zeroed 1-D array whose data starts on a 64-byte cache line."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(size * itemsize + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start: start + size * itemsize].view(dtype)


def _uint(dtype) -> np.dtype:
    return np.dtype({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize])


def bits(a) -> np.ndarray:
    """The raw bit patterns of a float array (so NaN payloads and -0 compare exactly)."""
    a = np.array(a)  # a contiguous copy (keeps rank 0)
    return a.view(_uint(a.dtype))


def _device(obj):
    from support import DeviceTensor, to_device

    if isinstance(obj, DeviceTensor):
        return obj, False
    return to_device(np.asarray(obj)), True


def run_op(op: str, tensors: Sequence, attrs: Sequence, out, check_guards: bool = True) -> int:
    """Run `op` ('smooth_l1', 'l1', 'gelu') with input DeviceTensors and output DeviceTensor.

    `attrs`: (reduction, beta) for smooth_l1, (reduction,) for l1, (approximate,) for
    gelu. Runs phase 1 + phase 2 + synchronize; after it every tensor's guards are checked.
    Returns the status.
    """
    import aclnn
    from support import run_two_phase

    handles = [t.tensor for t in tensors]
    if op == "smooth_l1":
        fns = (aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize, aclnn.aclnnSmoothL1LossBackward)
        args = (*handles, attrs[0], attrs[1], out.tensor)
    elif op == "l1":
        fns = (aclnn.aclnnL1LossBackwardGetWorkspaceSize, aclnn.aclnnL1LossBackward)
        args = (*handles, attrs[0], out.tensor)
    elif op == "gelu":
        fns = (aclnn.aclnnGeluBackwardV2GetWorkspaceSize, aclnn.aclnnGeluBackwardV2)
        args = (*handles, attrs[0], out.tensor)
    else:
        raise ValueError(op)
    status = run_two_phase(fns[0], fns[1], *args)
    if check_guards:
        for t in (*tensors, out):
            t.check_guards()
    return status


def compute(op: str, inputs: Sequence, attrs: Sequence, out_dtype=None, out=None):
    """Run `op` on inputs (NumPy arrays or DeviceTensors) and return the output view.

    The output is `out` (a DeviceTensor) or a fresh contiguous tensor of the broadcast
    shape and `out_dtype` (default: the promoted input dtype). Asserts status 0 (with the
    recent error message) and intact guards; frees what it created.
    """
    import aclnn
    from support import empty_device

    devs, owned = zip(*(_device(i) for i in inputs), strict=True)
    shape = np.broadcast_shapes(*(tuple(d.shape) for d in devs))
    own_out = out is None
    if own_out:
        dtype = promote(*(d.dtype for d in devs)) if out_dtype is None else np.dtype(out_dtype)
        out = empty_device(shape, dtype, fill=0)
    try:
        status = run_op(op, devs, attrs, out)
        assert status == 0, f"{op} failed with {status}: {aclnn.aclGetRecentErrMsg()}"
        return out.view()
    finally:
        for d, own in zip(devs, owned, strict=True):
            if own:
                d.free()
        if own_out:
            out.free()


def golden(op: str, inputs: Sequence, attrs: Sequence) -> np.ndarray:
    """The float64 golden of `op` for NumPy input arrays and attrs as in `run_op`."""
    if op == "smooth_l1":
        return smooth_l1_backward(*inputs, attrs[0], attrs[1])
    if op == "l1":
        return l1_backward(*inputs, attrs[0])
    if op == "gelu":
        return gelu_backward(*inputs, attrs[0])
    raise ValueError(op)
