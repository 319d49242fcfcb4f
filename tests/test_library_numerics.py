"""The library contract on Ascend950: bit-identical to the arch35 kernels' float32 DAGs.

In library mode on Ascend950, aclnnSmoothL1LossBackward, aclnnL1LossBackward and
aclnnGeluBackwardV2 must return exactly what a float32 op-by-op evaluation of the public
arch35 kernels gives (tests/dag_reference.py; exp/erf correctly rounded). Compared bit for
bit (-0 vs +0 included), with any NaN equal to any NaN.

Also here:
* the references themselves are checked against float64 evaluations of the derivative
  formulas within a few float32 ulps on ordinary values, and against hand-derived DAG
  facts on special values;
* on Ascend910B the library contract gives the same arrays as the documented contract;
* on Ascend950 the documented contract differs from the library contract on one crafted
  input per operator.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aclnn
import dag_reference as D
from dag_reference import BF16, F16, F32

DTYPES = (F32, F16, BF16)
DTYPE_IDS = ("f32", "f16", "bf16")
BETAS = (0.0, 1e-7, 0.5, 1.0, 3.0)
REDUCTIONS = ("none", "mean", "sum")


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def lib950(use_soc, use_contract):
    """Ascend950 with the library contract for one test."""
    use_soc("Ascend950")
    use_contract("library")


def _uint(dtype: np.dtype) -> type:
    return {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]


def assert_bits_equal(got, want, inputs: dict[str, np.ndarray] | None = None,
                      what: str = "") -> None:
    """`got` and `want` have the same dtype and shape and the same raw bits everywhere,
    except that any NaN equals any NaN. On failure: the count and the first mismatches,
    with the (broadcast) inputs there."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g = np.ascontiguousarray(got).reshape(-1)
    w = np.ascontiguousarray(want).reshape(-1)
    g_nan = np.isnan(g.astype(np.float64))
    w_nan = np.isnan(w.astype(np.float64))
    same = (g.view(_uint(g.dtype)) == w.view(_uint(w.dtype))) | (g_nan & w_nan)
    if same.all():
        return
    bad = np.flatnonzero(~same)
    lines = [f"{what}: {bad.size} of {g.size} elements differ"]
    for i in bad[:8]:
        ctx = ""
        if inputs:
            flat = {k: np.broadcast_to(np.asarray(v), got.shape).reshape(-1)[i]
                    for k, v in inputs.items()}
            ctx = " " + ", ".join(f"{k}={float(v)!r}" for k, v in flat.items())
        lines.append(f"  [{i}] got {float(g[i])!r} want {float(w[i])!r}{ctx}")
    raise AssertionError("\n".join(lines))


def specials(dtype: np.dtype) -> np.ndarray:
    """NaN, +-inf, +-0, huge, float max, smallest normal, subnormals, small integers,
    rounded to `dtype` (1e30 becomes inf in float16)."""
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_normal)
    sub = float(info.smallest_subnormal)
    v = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, float(info.max), -float(info.max),
         tiny, -tiny, sub, -sub, 3 * sub, -7 * sub, tiny / 2, 1.0, -1.0, 0.5, -2.0, 1e-7, 100.0]
    with np.errstate(over="ignore"):
        return np.array(v, dtype=np.float64).astype(dtype)


def randoms(rng: np.random.Generator, n: int, dtype: np.dtype) -> np.ndarray:
    """N(0,1), U(+-8), U(+-100) and sign * 10^U(-45, 38) values, a quarter each."""
    q = n // 4
    parts = [rng.standard_normal(q), rng.uniform(-8, 8, q), rng.uniform(-100, 100, q),
             rng.choice([-1.0, 1.0], n - 3 * q) * 10.0 ** rng.uniform(-45, 38, n - 3 * q)]
    v = np.concatenate(parts)
    rng.shuffle(v)
    with np.errstate(over="ignore"):
        return v.astype(dtype)


def sprinkle(rng: np.random.Generator, a: np.ndarray, rate: float) -> np.ndarray:
    """`a` with a fraction `rate` of its elements replaced by special values."""
    a = np.array(a)  # a copy; keeps rank 0
    pick = rng.random(a.size) < rate
    a.reshape(-1)[pick] = rng.choice(specials(a.dtype), int(pick.sum()))
    return a


def neighbours(v: float, dtype: np.dtype) -> list[float]:
    """v rounded to `dtype` and the adjacent `dtype` values on both sides, with signs."""
    with np.errstate(over="ignore"):
        c = np.array([v], dtype=np.float64).astype(dtype)
    up = np.nextafter(c.astype(F32), np.float32(np.inf)).astype(dtype)  # f32 step, re-rounded
    vals = set()
    for base in (c, up):
        b = base.astype(np.float64)[0]
        vals |= {b, -b}
    # the exact dtype neighbours (via the bit patterns)
    u = c.view(_uint(dtype))
    for step in (-1, 1):
        n = (u.astype(np.int64) + step).astype(_uint(dtype)).view(dtype).astype(np.float64)[0]
        if np.isfinite(n):
            vals |= {n, -n}
    return sorted(vals)


def smooth_l1_inputs(rng: np.random.Generator, dtype: np.dtype, beta: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(self, target), 1-D: random pairs, all pairs of specials, and pairs whose difference
    is +-beta, +-beta +- 1 ulp (of the dtype and of float32), 0, and target-shifted ties."""
    x_r, t_r = randoms(rng, 2048, dtype), randoms(rng, 2048, dtype)
    sp = specials(dtype)
    x_s, t_s = (a.reshape(-1) for a in np.meshgrid(sp, sp))
    b32 = float(np.float32(beta))
    near = neighbours(b32, dtype) + neighbours(b32, F32) + [0.0, -0.0]
    with np.errstate(over="ignore"):
        near_a = np.array(near, dtype=np.float64).astype(dtype)
    t_base = np.array([0.0, 1.0, -2.0, 0.25, 10.0, -3.5], dtype=np.float64).astype(dtype)
    x_b = (t_base.astype(np.float64)[:, None] + near_a.astype(np.float64)[None, :])
    with np.errstate(over="ignore"):
        x_b = x_b.astype(dtype).reshape(-1)
    t_b = np.repeat(t_base, near_a.size)
    # pairs (beta-ish, 0) and (0, -beta-ish)
    x_n = np.concatenate([near_a, np.zeros_like(near_a)])
    t_n = np.concatenate([np.zeros_like(near_a), -near_a])
    x = np.concatenate([x_r, x_s, x_b, x_n]).astype(dtype)
    t = np.concatenate([t_r, t_s, t_b, t_n]).astype(dtype)
    return x, t


def grad_for(rng: np.random.Generator, n: int, dtype: np.dtype) -> np.ndarray:
    """A gradOut tensor: N(0,1) * 3 with 5% specials."""
    return sprinkle(rng, (rng.standard_normal(n) * 3).astype(dtype), 0.05)


def seed_of(*parts) -> int:
    """A stable seed from the test's parameters."""
    return zlib.crc32(repr(parts).encode())


# --------------------------------------------------------------------------- SmoothL1


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("form", ["tensor", "scalar0d", "scalar1"])
def test_smooth_l1_bits(lib950, form, dtype, beta, reduction):
    """Tensor gradOut (strict-comparison DAG) and one-element gradOut (0-d or [1]: the
    scalar DAG with non-strict comparisons), every beta and reduction."""
    rng = np.random.default_rng(seed_of("sl1", form, dtype, beta, reduction))
    x, t = smooth_l1_inputs(rng, dtype, beta)
    if form == "tensor":
        g = grad_for(rng, x.size, dtype)
    elif form == "scalar0d":
        g = np.array(-2.75, dtype=dtype)
    else:
        g = np.array([0.75], dtype=dtype)
    got = aclnn.smooth_l1_loss_backward(g, x, t, reduction, beta)
    want = D.smooth_l1_950(g, x, t, beta, reduction)
    assert_bits_equal(got, want, {"g": g, "x": x, "t": t}, f"smooth_l1 {form} beta={beta}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("gval", [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, 3e38, 65504.0])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_smooth_l1_special_scalar_grad(lib950, dtype, gval, reduction):
    """A one-element gradOut holding a special value (0 * inf -> NaN, subnormal, huge)."""
    rng = np.random.default_rng(7)
    x, t = smooth_l1_inputs(rng, dtype, 1.0)
    with np.errstate(over="ignore"):
        g = np.array(gval).astype(dtype)
    got = aclnn.smooth_l1_loss_backward(g, x, t, reduction, 1.0)
    want = D.smooth_l1_950(g, x, t, 1.0, reduction)
    assert_bits_equal(got, want, {"g": g, "x": x, "t": t}, f"smooth_l1 g={gval}")


SL1_BROADCASTS = [  # (grad shape, self shape, target shape)
    ((64, 48), (64, 1), (1, 48)),   # mean counts self (64), not the 64*48 result
    ((48,), (64, 48), (64, 1)),     # 1-d gradOut of 48 elements: tensor DAG
    ((), (1, 48), (64, 48)),        # 0-d gradOut: scalar DAG; mean counts 48
    ((1, 1), (7, 5), (7, 5)),       # one-element 2-d gradOut: scalar DAG
    ((5,), (), (5,)),               # 0-d self: mean coefficient 1
    ((7, 5), (7, 5), (5,)),
    ((3, 1, 5), (1, 4, 1), (4, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", SL1_BROADCASTS, ids=str)
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_smooth_l1_broadcast(lib950, dtype, shapes, beta):
    """Inputs reach the kernel unbroadcast: the mean coefficient counts self's shape."""
    gs, xs, ts = shapes
    rng = np.random.default_rng(seed_of("sl1b", dtype, shapes, beta))
    g = sprinkle(rng, (rng.standard_normal(gs) * 2).astype(dtype), 0.05)
    x = sprinkle(rng, randoms(rng, math.prod(xs), dtype).reshape(xs), 0.05)
    t = rng.choice(np.array([0.0, 0.5, -0.5, 1.0, 2.0], dtype=dtype), ts)
    for reduction in REDUCTIONS:
        got = aclnn.smooth_l1_loss_backward(g, x, t, reduction, beta)
        want = D.smooth_l1_950(g, x, t, beta, reduction)
        assert_bits_equal(got, want, {"g": g, "x": x, "t": t},
                          f"smooth_l1 {shapes} {reduction}")


def test_smooth_l1_mixed_dtypes_and_output_dtype(lib950):
    """Mixed input dtypes promote to float32 (exact casts); a float16 output rounds the
    float32 kernel result once."""
    rng = np.random.default_rng(11)
    x, t = smooth_l1_inputs(rng, BF16, 0.5)
    t = sprinkle(rng, randoms(rng, x.size, F16), 0.05)
    g = grad_for(rng, x.size, F32)
    for out_dtype in (F32, F16, BF16):
        out = np.empty(x.shape, out_dtype)
        got = aclnn.smooth_l1_loss_backward(g, x, t, "mean", 0.5, out=out)
        want = D.smooth_l1_950(g, x, t, 0.5, "mean", out_dtype=out_dtype)
        assert_bits_equal(got, want, {"g": g, "x": x, "t": t}, f"smooth_l1 out {out_dtype}")


# --------------------------------------------------------------------------- L1


def l1_inputs(rng: np.random.Generator, dtype: np.dtype, n: int = 2048
              ) -> tuple[np.ndarray, np.ndarray]:
    """(self, target): random pairs, all pairs of specials, and equal pairs."""
    x_r, t_r = randoms(rng, n, dtype), randoms(rng, n, dtype)
    sp = specials(dtype)
    x_s, t_s = (a.reshape(-1) for a in np.meshgrid(sp, sp))
    eq = randoms(rng, 64, dtype)
    return (np.concatenate([x_r, x_s, eq]).astype(dtype),
            np.concatenate([t_r, t_s, eq]).astype(dtype))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("form", ["tensor", "scalar0d", "scalar1"])
def test_l1_bits(lib950, form, dtype, reduction):
    """Sign by comparisons (NaN -> 0), grads * coef, sign * that."""
    rng = np.random.default_rng(seed_of("l1", form, dtype, reduction))
    x, t = l1_inputs(rng, dtype)
    if form == "tensor":
        g = grad_for(rng, x.size, dtype)
    elif form == "scalar0d":
        g = np.array(1.25, dtype=dtype)
    else:
        g = np.array([-3.0], dtype=dtype)
    got = aclnn.l1_loss_backward(g, x, t, reduction)
    want = D.l1_950(g, x, t, reduction)
    assert_bits_equal(got, want, {"g": g, "x": x, "t": t}, f"l1 {form} {reduction}")


def _l1_coef_differs(shape) -> bool:
    return D.l1_mean_coef(shape) != np.float32(1.0 / math.prod(shape))


L1_SHAPES = [  # (grad, self, target) shapes; in the first four 1/d0/d1.. != 1/(d0*d1..)
    ((7, 5), (7, 5), (7, 5)),       # 1/7/5 != 1/35 in float32
    ((), (7, 1), (1, 5)),           # 0-d gradOut (not broadcast on Ascend950), label [7, 5]
    ((1,), (7, 5), (7, 1)),         # [1] gradOut, broadcast first
    ((2, 7, 5), (7, 5), (5,)),      # 1/2/7/5 != 1/70
    ((7, 7), (7, 1), (7, 7)),
    ((5, 23), (5, 23), (1,)),
    ((3, 7), (3, 7), (3, 7)),
    ((), (), ()),                   # all 0-d: label [1], coefficient 1
]


def test_l1_shapes_with_distinct_coefficient():
    """The shapes above do exercise the successive-division coefficient."""
    for gs, xs, ts in L1_SHAPES[:4]:
        shape = np.broadcast_shapes(gs, xs, ts)
        assert _l1_coef_differs(shape), shape


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", L1_SHAPES, ids=str)
def test_l1_broadcast_and_mean_coefficient(lib950, dtype, shapes):
    """Broadcast inputs; the mean coefficient 1.0f / d0 / d1 / ... of the broadcast shape."""
    gs, xs, ts = shapes
    rng = np.random.default_rng(seed_of("l1b", dtype, shapes))
    g = sprinkle(rng, (rng.standard_normal(gs) * 2 + 0.3).astype(dtype), 0.05)
    x = sprinkle(rng, randoms(rng, math.prod(xs), dtype).reshape(xs), 0.05)
    t = sprinkle(rng, rng.standard_normal(ts).astype(dtype), 0.05)
    for reduction in REDUCTIONS:
        got = aclnn.l1_loss_backward(g, x, t, reduction)
        want = D.l1_950(g, x, t, reduction)
        assert_bits_equal(got, want, {"g": g, "x": x, "t": t}, f"l1 {shapes} {reduction}")


def test_l1_mixed_dtypes(lib950):
    """float16 grad, bfloat16 self, float32 target: promoted to float32."""
    rng = np.random.default_rng(5)
    x, t = l1_inputs(rng, BF16, 512)
    g = grad_for(rng, x.size, F16)
    t = t.astype(F32)
    got = aclnn.l1_loss_backward(g, x, t, "mean")
    assert_bits_equal(got, D.l1_950(g, x, t, "mean"), {"g": g, "x": x, "t": t}, "l1 mixed")


# --------------------------------------------------------------------------- GELU


def gelu_inputs(rng: np.random.Generator, dtype: np.dtype) -> np.ndarray:
    """x: randoms, specials, a dense sweep of [-12, 12], and values near the overflow of
    x*x and of the tanh form's exponent."""
    sweep = np.linspace(-12, 12, 2001)
    edges = np.array([9.0, 9.5, 10.0, 13.0, 13.5, 14.0, 18.0, 19.0, 20.0, 1e19, 1.8e19,
                      1.9e19, 1e20, 3e5, 1e10])
    with np.errstate(over="ignore"):
        v = np.concatenate([sweep, edges, -edges]).astype(dtype)
    return np.concatenate([randoms(rng, 2048, dtype), specials(dtype), v]).astype(dtype)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gelu_bits(lib950, dtype, approximate):
    """Erf form (Muls, Erf, ErfPost) and tanh form (Axpy, Exp, Div, NaN -> 0 select)."""
    rng = np.random.default_rng(seed_of("gelu", dtype, approximate))
    x = gelu_inputs(rng, dtype)
    g = grad_for(rng, x.size, dtype)
    got = aclnn.gelu_backward(g, x, approximate)
    want = D.gelu_950(g, x, approximate)
    assert_bits_equal(got, want, {"g": g, "x": x}, f"gelu {approximate}")


def _next_to_midpoints(a: np.ndarray) -> np.ndarray:
    """Where the float64 values `a` lie within 5e-14 (relative) of a float32 rounding
    midpoint: the float32 vector kernels cannot be sure of such lanes (they keep a lane
    when a +- 1e-13 round alike) and must redo them with libm's function. (Not within
    1e-15: there the reference refuses to say how the device rounds.)"""
    with np.errstate(all="ignore"):
        r = a.astype(F32)
        below = np.nextafter(r, np.float32(0)).astype(np.float64)
        above = np.nextafter(r, np.float32(np.inf)).astype(np.float64)
        r = r.astype(np.float64)
        gap = np.minimum(np.abs(a - (r + below) / 2), np.abs(a - (r + above) / 2))
    return (gap < 5e-14 * np.abs(a)) & (gap > 1e-15 * np.abs(a)) & (np.abs(a) > 1e-30)


def _near_midpoints(rng: np.random.Generator, count: int, approximate: str) -> np.ndarray:
    """float32 x whose Exp (tanh form: of (beta + x*x*an) * x; erf form: of x*x*-0.5) or
    Erf (erf form: of x * 0.707106781) lies next to a float32 rounding midpoint."""
    x = rng.uniform(-12, 12, count).astype(F32)
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            beta, an = np.float32(-1.595769121605730711759), np.float32(-0.0713548162726002527220)
            return x[_next_to_midpoints(np.exp(((beta + x * x * an) * x).astype(np.float64)))]
        x = x / np.float32(3)  # where erf is not yet 1
        exp_arg = (x * x * np.float32(-0.5)).astype(np.float64)
        erf_arg = (x * D.ERF_ONE_OVER_SQRT2).astype(np.float64)
        erf = np.asarray(D._ERF(erf_arg), dtype=np.float64)
        return x[_next_to_midpoints(np.exp(exp_arg)) | _next_to_midpoints(erf)]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("n", [1, 15, 17, 4095, 4097, 3 * 4096 + 5, 50_000])
def test_gelu_float32_vectors(lib950, approximate, n):
    """The float32 forms by 16-lane vectors (float64 vector Exp and Erf, lanes they cannot
    be sure of redone with libm's): the DAG's bits at every length around a vector and a
    block, over N(0,1), U(+-12), U(+-100), tiny values, specials, and lanes whose Exp or
    Erf lies next to a float32 rounding midpoint."""
    rng = np.random.default_rng(seed_of("gelu vectors", approximate, n))
    near = _near_midpoints(rng, 8_000_000, approximate)
    assert near.size >= 3
    pool = np.concatenate([rng.standard_normal(n).astype(F32),
                           rng.uniform(-12, 12, n).astype(F32),
                           rng.uniform(-100, 100, n).astype(F32),
                           (rng.standard_normal(n) * 1e-3).astype(F32), specials(F32)])
    x = rng.choice(pool, n).astype(F32)
    x[rng.integers(0, n, min(n, near.size))] = near[:min(n, near.size)]
    g = grad_for(rng, n, F32)
    got = aclnn.gelu_backward(g, x, approximate)
    assert_bits_equal(got, D.gelu_950(g, x, approximate), {"g": g, "x": x},
                      f"gelu {approximate} n={n}")


@pytest.mark.parametrize("kernel", ["gelu_erf", "gelu_tanh"])
def test_gelu_vector_kernels_take_float32_only(kernel):
    """16-bit operands go through the factor table; the vector kernels refuse to compile
    for them rather than read their bytes as float32."""
    from numba.core.errors import TypingError

    from aclnn.kernels import dag950
    halves = np.zeros(32, np.uint16)
    with pytest.raises(TypingError):
        getattr(dag950, kernel)(halves, halves, halves.copy())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_vectors_flag_lanes_next_to_a_midpoint(approximate):
    """The vector block counts as unsure every lane whose Exp or Erf lies within 5e-14 of a
    float32 rounding midpoint (those the scalar path then redoes), and at most a few lanes
    of ordinary inputs."""
    from numba import njit

    from aclnn.kernels import dag950

    block = dag950._tanh_vectors if approximate == "tanh" else dag950._erf_vectors

    @njit
    def unsure(g, x):
        return block(g, x, np.empty_like(x), 0, x.size // 16)

    rng = np.random.default_rng(7)
    near = _near_midpoints(rng, 8_000_000, approximate)
    x = np.resize(near, 16 * near.size).astype(F32)
    assert unsure(np.ones_like(x), x) == x.size
    ordinary = np.linspace(-3, 3, 4096).astype(F32)
    assert unsure(np.ones_like(ordinary), ordinary) <= 1


def test_erf_polynomial_within_1e14_of_erf():
    """The vector Erf's polynomial on [ERF_SMALL, 4] against math.erf: relatively within
    1e-14 (the lanes' 1e-13 margin covers it), evaluated as the kernel does, in float64."""
    from aclnn.kernels import dag950
    u = np.linspace(dag950.ERF_SMALL, 4.0, 200_001)
    t, value = u - 2.0, np.zeros_like(u)
    for c in dag950.ERF_POLYNOMIAL[::-1]:
        value = value * t + c
    exact = np.array([math.erf(v) for v in u])
    assert (np.abs(value - exact) <= 1e-14 * exact).all()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shapes", [((64, 1), (1, 48)), ((), (300,)), ((300,), ()),
                                    ((1,), (5, 60))], ids=str)
def test_gelu_broadcast(lib950, approximate, shapes):
    """Broadcast gradOut / self (the op_api broadcasts both before the kernel)."""
    gs, xs = shapes
    rng = np.random.default_rng(seed_of("gelub", approximate, shapes))
    for dtype in DTYPES:
        g = sprinkle(rng, (rng.standard_normal(gs) * 2).astype(dtype), 0.05)
        x = sprinkle(rng, (rng.standard_normal(xs) * 4).astype(dtype), 0.05)
        got = aclnn.gelu_backward(g, x, approximate)
        want = D.gelu_950(g, x, approximate)
        assert_bits_equal(got, want, {"g": g, "x": x}, f"gelu {approximate} {shapes} {dtype}")


# --------------------------------------------------------------------------- hypothesis

#: The library contract's fixture only sets the SoC/contract: safe to share between examples.
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
floats32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@st.composite
def float_arrays(draw, n: int) -> np.ndarray:
    """A float64 array of n hypothesis float32 values (edge cases included)."""
    return np.array(draw(st.lists(floats32, min_size=n, max_size=n)), dtype=np.float64)


def _cast(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore"):
        return a.astype(dtype)


@fixture_ok
@given(data=st.data(), n=st.integers(1, 24), dtype=st.sampled_from(DTYPES),
       beta=st.one_of(st.sampled_from(BETAS), st.floats(0, 1e3, width=32)),
       reduction=st.sampled_from(REDUCTIONS), scalar_grad=st.booleans())
def test_smooth_l1_property(lib950, data, n, dtype, beta, reduction, scalar_grad):
    """Any float32 values (hypothesis's edge cases), any beta >= 0, both DAGs."""
    x = _cast(data.draw(float_arrays(n)), dtype)
    t = _cast(data.draw(float_arrays(n)), dtype)
    g = _cast(data.draw(float_arrays(1 if scalar_grad else n)), dtype)
    got = aclnn.smooth_l1_loss_backward(g, x, t, reduction, float(beta))
    want = D.smooth_l1_950(g, x, t, float(beta), reduction)
    assert_bits_equal(got, want, {"g": g, "x": x, "t": t}, f"smooth_l1 beta={beta}")


@fixture_ok
@given(data=st.data(), n=st.integers(1, 24), dtype=st.sampled_from(DTYPES),
       reduction=st.sampled_from(REDUCTIONS), scalar_grad=st.booleans())
def test_l1_property(lib950, data, n, dtype, reduction, scalar_grad):
    """Any float32 values, both DAGs."""
    x = _cast(data.draw(float_arrays(n)), dtype)
    t = _cast(data.draw(float_arrays(n)), dtype)
    g = _cast(data.draw(float_arrays(1)), dtype).reshape(()) if scalar_grad else \
        _cast(data.draw(float_arrays(n)), dtype)
    got = aclnn.l1_loss_backward(g, x, t, reduction)
    assert_bits_equal(got, D.l1_950(g, x, t, reduction), {"g": g, "x": x, "t": t}, "l1")


@fixture_ok
@given(data=st.data(), n=st.integers(1, 24), dtype=st.sampled_from(DTYPES),
       approximate=st.sampled_from(["none", "tanh"]))
def test_gelu_property(lib950, data, n, dtype, approximate):
    """Any float32 values of x and gradOut, both forms."""
    x = _cast(data.draw(float_arrays(n)), dtype)
    g = _cast(data.draw(float_arrays(n)), dtype)
    got = aclnn.gelu_backward(g, x, approximate)
    assert_bits_equal(got, D.gelu_950(g, x, approximate), {"g": g, "x": x}, approximate)


# --------------------------------------------------------------------------- contracts

Call = Callable[[], np.ndarray]


def _mixed_cases() -> list[tuple[str, Call]]:
    """One call per operator / form / dtype on random + special inputs."""
    rng = np.random.default_rng(99)
    cases: list[tuple[str, Call]] = []
    for dtype in DTYPES:
        x, t = smooth_l1_inputs(rng, dtype, 1.0)
        g = grad_for(rng, x.size, dtype)
        for beta in (0.0, 1.0):
            cases.append((f"sl1 {dtype} {beta}", lambda g=g, x=x, t=t, b=beta:
                          aclnn.smooth_l1_loss_backward(g, x, t, "mean", b)))
        cases.append((f"l1 {dtype}", lambda g=g, x=x, t=t:
                      aclnn.l1_loss_backward(g, x, t, "mean")))
        xg = gelu_inputs(rng, dtype)
        gg = grad_for(rng, xg.size, dtype)
        for approximate in ("none", "tanh"):
            cases.append((f"gelu {approximate} {dtype}", lambda g=gg, x=xg, a=approximate:
                          aclnn.gelu_backward(g, x, a)))
    return cases


def test_910b_library_equals_documented(use_soc, use_contract):
    """On Ascend910B the library contract is the documented math: identical arrays."""
    use_soc("Ascend910B")
    for name, call in _mixed_cases():
        use_contract("library")
        lib = call()
        use_contract("documented")
        doc = call()
        assert_bits_equal(lib, doc, what=f"910B library vs documented: {name}")


def _crafted() -> list[tuple[str, Call, Call, int]]:
    """(name, operator call, reference call, index where the contracts must differ)."""
    f32 = np.float32
    x_l1, t_l1, g_l1 = f32([np.nan, 1.0]), f32([0.0, 0.0]), f32([1.0, 1.0])
    x_s, t_s, g_s = f32([0.0, 1.0]), f32([0.0, 0.0]), f32([1.0, 1.0])
    x_g, g_g = f32([np.inf, 1.0]), f32([2.0, 2.0])
    return [
        ("l1 NaN self -> 0", lambda: aclnn.l1_loss_backward(g_l1, x_l1, t_l1, "none"),
         lambda: D.l1_950(g_l1, x_l1, t_l1, "none"), 0),
        ("smooth_l1 beta=0, d=0 -> NaN",
         lambda: aclnn.smooth_l1_loss_backward(g_s, x_s, t_s, "none", 0.0),
         lambda: D.smooth_l1_950(g_s, x_s, t_s, 0.0, "none"), 0),
        ("gelu tanh x=+inf -> g", lambda: aclnn.gelu_backward(g_g, x_g, "tanh"),
         lambda: D.gelu_tanh_950(g_g, x_g), 0),
    ]


@pytest.mark.parametrize("case", range(3), ids=["l1", "smooth_l1", "gelu_tanh"])
def test_950_documented_differs_from_library(use_soc, use_contract, case):
    """Ascend950: the library contract follows the kernel (= the reference) on a crafted
    input where the documented contract gives something else."""
    name, call, ref, idx = _crafted()[case]
    use_soc("Ascend950")
    use_contract("library")
    lib = call()
    use_contract("documented")
    doc = call()
    want = ref()
    assert_bits_equal(lib, want, what=f"950 library: {name}")
    assert not np.array_equal(lib[idx:idx + 1], doc[idx:idx + 1], equal_nan=True), \
        f"{name}: documented gives {doc[idx]!r} as well"


# --------------------------------------------------------------------------- the references


def test_reference_dag_facts():
    """Hand-derived consequences of the DAGs (checks the references encode the DAGs)."""
    f32 = np.float32
    one = f32([1.0])
    # SmoothL1, beta = 0: invertSigma is NaN, so the inner branch is NaN; the tensor DAG's
    # strict comparisons put d = 0 inside, the scalar DAG's non-strict ones outside (0).
    z = f32([0.0])
    assert np.isnan(D.smooth_l1_950(f32([1.0, 1.0]), f32([0.0, 2.0]), f32([0.0, 2.0]),
                                    0.0, "none")).all()
    assert D.smooth_l1_950(one.reshape(()), z, z, 0.0, "none")[0] == 0.0
    # beta = 1e-7 < 1e-6: NaN inside, +-g at |d| == beta for the scalar DAG only
    b = float(f32(1e-7))
    assert np.isnan(D.smooth_l1_950(f32([1.0, 1.0]), f32([b, 0.0]), f32([0.0, 0.0]),
                                    1e-7, "none")).all()
    assert D.smooth_l1_950(f32(1.0), f32([b]), z, 1e-7, "none")[0] == 1.0
    # beta = 0.5 at d == beta: tensor DAG d * (1/beta) = 1, scalar DAG the outer branch 1
    assert D.smooth_l1_950(f32([3.0]), f32([0.5]), z, 0.5, "none")[0] == 3.0
    # NaN d: tensor DAG NaN (NaN * 1/beta), also for the scalar DAG
    assert np.isnan(D.smooth_l1_950(one, f32([np.nan]), z, 1.0, "none")[0])
    assert np.isnan(D.smooth_l1_950(f32(1.0), f32([np.nan]), z, 1.0, "none")[0])
    # mean: 1/n of self's shape, not of the broadcast shape
    got = D.smooth_l1_950(f32(1.0), f32([[5.0], [5.0]]), f32([[0.0, 0.0, 0.0]]), 1.0, "mean")
    assert got.shape == (2, 3) and (got == f32(0.5)).all()
    # L1: NaN -> sign 0 -> 0 * g; inf g with sign 0 -> NaN
    assert D.l1_950(one, f32([np.nan]), z, "none")[0] == 0.0
    assert np.isnan(D.l1_950(f32([np.inf]), z, z, "none")[0])
    assert D.l1_950(f32([2.0]), f32([-1.0]), z, "none")[0] == -2.0
    # GELU tanh: x = +inf -> g, x = -inf -> 0 (times g), huge negative x -> 0
    g2 = f32([2.0, 2.0, 2.0, 2.0])
    r = D.gelu_tanh_950(g2, f32([np.inf, -np.inf, -1e30, 1e30]))
    assert list(r) == [2.0, 0.0, 0.0, 2.0]
    assert np.isnan(D.gelu_tanh_950(one, f32([np.nan]))[0])
    # GELU erf: x = +-inf -> exp(-inf) * x = 0 * inf = NaN; huge finite x -> g or 0
    r = D.gelu_erf_950(g2, f32([np.inf, -np.inf, 1e30, -1e30]))
    assert np.isnan(r[:2]).all() and list(r[2:]) == [2.0, 0.0]
    assert D.gelu_erf_950(one, z)[0] == 0.5
    # constants are the float32 roundings of the kernel literals
    assert D.TANH_AN == f32(-0.0713548162726002527220)
    assert D.ERF_ONE_OVER_SQRT2 == f32(0.707106781)


def test_reference_coefficients():
    """SmoothL1: float(1/double(n)) of self's shape; L1: successive float32 divisions."""
    assert D.smooth_l1_mean_coef((7, 5)) == np.float32(1 / 35)
    assert D.smooth_l1_mean_coef(()) == 1.0
    assert D.l1_mean_coef((7, 5)) == np.float32(np.float32(1 / 7) / np.float32(5))
    assert D.l1_mean_coef((7, 5)) != np.float32(1 / 35)
    assert D.l1_mean_coef(()) == 1.0
    sigma, neg, inv = D.smooth_l1_scalars(1e-7)
    assert sigma == np.float32(1e-7) and neg == -sigma and np.isnan(inv)
    assert D.smooth_l1_scalars(3.0)[2] == np.float32(1) / np.float32(3)
    assert D.smooth_l1_scalars(1e-6)[2] == np.float32(1) / np.float32(1e-6)


def test_reference_exp_erf_correctly_rounded():
    """exp_f32/erf_f32 round the exact values correctly (checked against exact rational
    bounds on sample points), keep subnormals, and refuse values near a midpoint."""
    assert np.float32(1e-45) * np.float32(1.0) != 0.0, "float32 arithmetic flushes subnormals"
    xs = np.array([0.0, 1.0, -1.0, 0.5, -87.0, -100.0, -103.0, 88.0, 89.0, 1e-3, 10.0],
                  dtype=F32)
    e = D.exp_f32(xs)
    assert e[0] == 1.0 and e[5] > 0 and e[5] < np.finfo(F32).smallest_normal  # subnormal
    assert np.isinf(e[8])
    assert e[1] == np.float32(math.e)
    er = D.erf_f32(np.array([0.0, -0.0, 1e-40, 0.5, 3.0, 10.0, np.inf, -np.inf], dtype=F32))
    assert er[2] > 0 and er[5] == 1.0 and er[6] == 1.0 and er[7] == -1.0
    assert np.signbit(er[1])
    # a float64 value right at a float32 midpoint must be refused
    mid = (1.0 + (1.0 + 2.0**-23)) / 2.0
    with pytest.raises(D.MidpointError):
        D._check_midpoints(np.array([mid]), np.array([mid]).astype(F32), "test")
    # the overflow midpoint too
    top_mid = 2.0**128 - 2.0**103
    with pytest.raises(D.MidpointError):
        with np.errstate(over="ignore"):
            D._check_midpoints(np.array([top_mid]), np.array([top_mid]).astype(F32), "test")
    # a value well away from midpoints passes
    D._check_midpoints(np.array([1.0 + 2.0**-25]), np.array([1.0 + 2.0**-25]).astype(F32), "t")


def test_reference_fused_axpy_option():
    """The fused Axpy variant rounds dst + src*scalar once (checked with exact fractions);
    the default variant is Mul then Add."""
    rng = np.random.default_rng(3)
    dst = (rng.standard_normal(2000) * 10.0 ** rng.uniform(-5, 5, 2000)).astype(F32)
    src = (rng.standard_normal(2000) * 10.0 ** rng.uniform(-5, 5, 2000)).astype(F32)
    scalar = np.float32(-0.0713548162726002527220)
    fused = D._axpy(dst, src, scalar, True)
    for d, s, f in zip(dst[:400], src[:400], fused[:400], strict=True):
        exact = Fraction(float(d)) + Fraction(float(s)) * Fraction(float(scalar))
        near = np.float32(float(exact))
        # the correctly rounded float32 of `exact`: the nearest of three neighbours, ties
        # to the even significand
        cands = [np.nextafter(near, np.float32(-np.inf)), near,
                 np.nextafter(near, np.float32(np.inf))]
        best = min(cands, key=lambda c: (abs(Fraction(float(c)) - exact),
                                         int(np.array(c).view(np.uint32)) & 1))
        assert f == best, (d, s, f, best)
    assert np.array_equal(D._axpy(dst, src, scalar, False), dst + src * scalar)


def _ulps(got: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """|got - gold| in float32 ulps of gold."""
    ulp = np.spacing(np.abs(gold.astype(F32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - gold) / ulp


def test_reference_smooth_l1_vs_float64():
    """The SmoothL1 reference within 4 float32 ulps of the float64 formula on ordinary
    values away from the branch points."""
    rng = np.random.default_rng(21)
    n = 20000
    for beta in (0.5, 1.0, 3.0, 0.1):
        x = rng.uniform(-8, 8, n).astype(F32)
        t = rng.uniform(-8, 8, n).astype(F32)
        g = (rng.standard_normal(n) * 3).astype(F32)
        d = x.astype(np.float64) - t.astype(np.float64)
        keep = np.abs(np.abs(d) - beta) > 1e-3 * beta
        for reduction, scale in (("none", 1.0), ("mean", 1.0 / n)):
            gold = np.where(np.abs(d) < beta, d / beta, np.sign(d)) * g * scale
            ref = D.smooth_l1_950(g, x, t, beta, reduction).astype(np.float64)
            assert (_ulps(ref, gold)[keep] <= 4).all(), (beta, reduction)


def test_reference_l1_vs_float64():
    """The L1 reference within 4 float32 ulps of sign(x - t) * g / N."""
    rng = np.random.default_rng(22)
    shape = (7, 5, 23)
    x = rng.uniform(-8, 8, shape).astype(F32)
    t = rng.uniform(-8, 8, shape).astype(F32)
    t.reshape(-1)[:50] = x.reshape(-1)[:50]
    g = (rng.standard_normal(shape) * 3).astype(F32)
    d = x.astype(np.float64) - t.astype(np.float64)
    for reduction, scale in (("none", 1.0), ("sum", 1.0), ("mean", 1.0 / x.size)):
        gold = np.sign(d) * g * scale
        ref = D.l1_950(g, x, t, reduction).astype(np.float64)
        ok = np.where(gold == 0, ref == 0, _ulps(ref, gold) <= 4)
        assert ok.all(), reduction


def _gelu_gold(x: np.ndarray, approximate: str) -> np.ndarray:
    """d/dx GELU(x) in float64."""
    if approximate == "none":
        cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))
        return cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    k = math.sqrt(2.0 / math.pi)
    u = k * (x + 0.044715 * x**3)
    th = np.tanh(u)
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3 * 0.044715 * x * x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_reference_gelu_vs_float64(approximate):
    """The GELU references within 8 float32 ulps + 2^-22 * |g| of the float64 derivative
    (the tanh one in either Axpy variant)."""
    rng = np.random.default_rng(23)
    x = np.concatenate([rng.standard_normal(6000) * 2, rng.uniform(-9, 9, 6000)]).astype(F32)
    g = (rng.standard_normal(x.size) * 3).astype(F32)
    gold = _gelu_gold(x.astype(np.float64), approximate) * g
    tol = 8 * np.spacing(np.abs(gold.astype(F32))).astype(np.float64) + 2.0**-22 * np.abs(g)
    if approximate == "none":
        refs = [D.gelu_erf_950(g, x)]
    else:
        refs = [D.gelu_tanh_950(g, x), D.gelu_tanh_950(g, x, fused_axpy=True)]
    for ref in refs:
        err = np.abs(ref.astype(np.float64) - gold)
        assert (err <= tol).all(), float(np.max(err / tol))


def test_reference_low_precision_rounding():
    """Inputs widen exactly; the float32 result rounds once, to nearest even, to the dtype."""
    x = np.array([1.0, 1.0 + 2**-7], dtype=BF16)
    assert D.to_f32(x, F32).tolist() == [1.0, 1.0 + 2**-7]
    r = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, 70000.0], dtype=F32)
    assert D.store(r, BF16, None).astype(np.float64).tolist() == [1.0, 1.0 + 2**-6, 70144.0]
    assert D.store(r, F16, None)[2] == np.inf
    assert D.promote(F16, BF16) == F32 and D.promote(F16, F16) == F16
