"""Example-based numerics of SmoothL1LossBackward, L1LossBackward and GeluBackwardV2.

Every result is compared with the independent float64 golden of tests/reference.py under
the project bar of SPEC §10 (float32: 4 ULP, GELU 8 ULP + 2**-22*|g|; float16/bfloat16:
1 ULP of the output dtype). The only hard-coded expected values are the documented seed
sample of SPEC §11 and values SPEC states literally (x = +-1e30 -> g and 0, sign(0) = 0).
Every operator call also checks the guard bytes around every tensor.
"""

from __future__ import annotations

import numpy as np
import pytest

import aclnn
import reference as R
from reference import BF16, F16, F32, bits, check_output, compute, golden, run_op, strided_device
from support import DeviceTensor, empty_device, to_device

OPS = ("smooth_l1", "l1", "gelu")
ATTRS = {"smooth_l1": (0, 1.0), "l1": (0,), "gelu": ("none",)}
N_INPUTS = {"smooth_l1": 3, "l1": 3, "gelu": 2}


def rand(shape, dtype, rng, scale=2.0) -> np.ndarray:
    """Normal random values of `shape` rounded to `dtype`."""
    return (rng.standard_normal(shape) * scale).astype(dtype)


def check(op, inputs, attrs, out_dtype=None, exclude=None, what=""):
    """Run `op` on NumPy inputs and check the result against the golden; return it."""
    out = compute(op, inputs, attrs, out_dtype=out_dtype)
    dtype = R.promote(*(np.asarray(i).dtype for i in inputs)) if out_dtype is None else out_dtype
    gold = golden(op, inputs, attrs)
    names = ("g", "x", "y")[: len(inputs)]
    check_output(op, out, gold, dtype, g=inputs[0], exclude=exclude,
                 inputs=dict(zip(names, inputs, strict=True)), what=what or f"{op}{attrs}")
    return out


# --------------------------------------------------------------------------- the reference itself


def test_round_to_matches_correct_casts():
    """round_to agrees with NumPy's (correctly rounding) float32/float16 casts."""
    rng = np.random.default_rng(1)
    v = rng.standard_normal(20000) * 10.0 ** rng.integers(-48, 40, 20000)
    v = np.concatenate([v, [0.0, -0.0, np.inf, -np.inf, 65519.99, 65520.0, 2.0**-25,
                            2.0**-25 * (1 + 2**-40), 3.4028235e38 * (1 + 2**-25)]])
    with np.errstate(over="ignore"):
        for dt in (F32, F16):
            assert np.array_equal(bits(R.round_to(dt, v)), bits(v.astype(dt)))
    # bfloat16: one rounding from float64 (ml_dtypes goes through float32 and rounds twice)
    assert float(R.round_to(BF16, np.array([1 + 2**-8 + 2**-30]))[0]) == 1 + 2**-7
    assert float(R.round_to(BF16, np.array([1 + 2**-8]))[0]) == 1.0
    assert np.isinf(R.round_to(BF16, np.array([3.4e38 * 1.01]))[0])


def test_ulp_of_known_values():
    """ulp_of gives the binade spacing, subnormal spacing at 0, top spacing beyond max."""
    assert R.ulp_of(1.0, F32) == 2.0**-23
    assert R.ulp_of(1.9999, F32) == 2.0**-23
    assert R.ulp_of(2.0, F32) == 2.0**-22
    assert R.ulp_of(0.0, F32) == 2.0**-149
    assert R.ulp_of(1e-40, F32) == 2.0**-149
    assert R.ulp_of(1e39, F32) == 2.0**104
    assert R.ulp_of(1.0, F16) == 2.0**-10
    assert R.ulp_of(0.0, F16) == 2.0**-24
    assert R.ulp_of(1.0, BF16) == 2.0**-7
    assert R.ulp_of(1e-40, BF16) == 2.0**-133


def test_assert_within_ulp_can_fail():
    """The comparison accepts what the bar allows and rejects everything else."""
    one = np.float32(1.0)
    R.assert_within_ulp(np.array([one + 4 * np.float32(2**-23)]), np.array([1.0]), F32, 4)
    with pytest.raises(AssertionError, match="worst at index"):
        R.assert_within_ulp(np.array([one + 5 * np.float32(2**-23)]), np.array([1.0]), F32, 4)
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    R.assert_within_ulp(np.array([nan, inf, -inf]), np.array([np.nan, np.inf, -np.inf]), F32, 4)
    for a, g in ((nan, 1.0), (one, np.nan), (inf, -np.inf), (-inf, np.inf), (inf, 1.0)):
        with pytest.raises(AssertionError):
            R.assert_within_ulp(np.array([a]), np.array([g]), F32, 4)
    fmax = np.finfo(np.float32).max
    R.assert_within_ulp(np.array([inf]), np.array([float(fmax)]), F32, 1)  # overflow is 1 ULP
    R.assert_within_ulp(np.array([fmax]), np.array([3.5e38]), F32, 1)
    with pytest.raises(AssertionError):
        R.assert_within_ulp(np.array([np.float16(1.0)]), np.array([1.0]), F32, 4)  # dtype


def test_reference_values():
    """The references reproduce values that SPEC states literally."""
    g = np.ones(8)
    x = np.arange(8.0)
    assert list(R.smooth_l1_backward(g, x, 1.0, 0, 1.0)) == [-1, 0, 1, 1, 1, 1, 1, 1]
    assert list(R.l1_backward(g, x, 1.0, 0)) == [-1, 0, 1, 1, 1, 1, 1, 1]
    for mode in ("none", "tanh"):
        d = R.gelu_derivative(np.array([0.0, 1e30, -1e30, np.inf, -np.inf, np.nan]), mode)
        assert d[0] == 0.5 and d[1] == 1.0 and d[2] == 0.0
        assert np.isnan(d[3:]).all()
    assert abs(R.gelu_derivative(np.array([-0.7517915246]), "none")[0]) < 1e-9
    assert R.smooth_l1_backward(np.ones((2, 3)), np.full((1, 3), 3.0), 0.0, 1, 1.0)[0, 0] == 1 / 3
    assert R.l1_backward(np.ones((2, 3)), np.full((1, 3), 3.0), 0.0, 1)[0, 0] == 1 / 6


# --------------------------------------------------------------------------- seed sample


def test_smooth_l1_seed_sample():
    """SPEC §11: self 0..7, target 1, gradOut 1, none, beta 1 -> -1, 0, 1, 1, 1, 1, 1, 1."""
    g = np.ones((4, 2), np.float32)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = np.ones((4, 2), np.float32)
    out = compute("smooth_l1", [g, x, y], (0, 1.0))
    assert out.dtype == F32
    assert out.reshape(-1).tolist() == [-1, 0, 1, 1, 1, 1, 1, 1]


def test_smooth_l1_seed_sample_linear_branch():
    """Half-integer self values put the seed's |d| < 1 cases into the linear branch."""
    x = (np.arange(8, dtype=np.float32) * 0.25).reshape(4, 2)
    out = compute("smooth_l1", [np.ones((4, 2), np.float32), x, np.ones((4, 2), np.float32)],
                  (0, 1.0))
    assert out.reshape(-1).tolist() == [-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75]


# --------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("op", ["smooth_l1", "l1"])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("g_shape", [(), (1,), (2, 1), (3, 2, 4)])
def test_reductions_with_broadcast(op, reduction, g_shape):
    """self [3,1,4], target [2,4] -> gradInput [3,2,4]; every reduction, gradOut broadcast."""
    rng = np.random.default_rng(reduction * 10 + len(g_shape))
    g = rand(g_shape, np.float32, rng)
    x = rand((3, 1, 4), np.float32, rng)
    y = rand((2, 4), np.float32, rng)
    attrs = (reduction, 0.75) if op == "smooth_l1" else (reduction,)
    out = check(op, [g, x, y], attrs)
    assert out.shape == (3, 2, 4)


@pytest.mark.parametrize("g_shape", [(), (1,)])
def test_mean_normalisation(g_shape):
    """SmoothL1 mean divides by numel(self) = 12; L1 mean by numel(broadcast) = 24."""
    g = np.full(g_shape, 3.0, np.float32)
    x = np.full((3, 1, 4), 5.0, np.float32)
    y = np.zeros((2, 4), np.float32)
    s = compute("smooth_l1", [g, x, y], (1, 1.0))
    l1 = compute("l1", [g, x, y], (1,))
    np.testing.assert_allclose(s, np.full((3, 2, 4), 3.0 / 12), rtol=4 * 2**-23)
    np.testing.assert_allclose(l1, np.full((3, 2, 4), 3.0 / 24), rtol=4 * 2**-23)
    s_sum = compute("smooth_l1", [g, x, y], (2, 1.0))
    assert (s_sum == 3.0).all()


# --------------------------------------------------------------------------- beta, ties, sign(0)


def test_beta_zero_is_pure_sign():
    """beta = 0: g*sign(d) everywhere, sign(0) = 0, also for tiny and subnormal d."""
    x = np.array([0.0, 1e-45, -1e-45, 1e-30, -3.0, 2.0, 1e30, -np.inf, np.inf, 5.0], np.float32)
    y = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 4.0], np.float32)
    g = np.array([2.5, 2.5, 2.5, -1.5, 2.5, 7.0, 0.5, 3.0, 3.0, -2.0], np.float32)
    out = compute("smooth_l1", [g, x, y], (0, 0.0))
    expected = g * np.sign(x - y)
    assert np.array_equal(out, expected), (out, expected)
    check("smooth_l1", [g, x, y], (0, 0.0))


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("beta", [0.5, 1.0, 1.5, 3.0])
def test_ties_at_beta(dtype, beta):
    """|d| == beta exactly (either side, various offsets) and its float neighbours."""
    base = np.array([0.0, 1.0, -2.0, 4.0], dtype)
    y = np.repeat(base, 6)
    spacing = float(R.ulp_of(beta, dtype))
    deltas = np.array([beta, -beta, beta - spacing / 2, -(beta - spacing / 2),
                       beta + spacing, -(beta + spacing)])
    x = (y.astype(np.float64) + np.tile(deltas, 4)).astype(dtype)
    g = np.linspace(-3, 3, x.size).astype(dtype)
    out = check("smooth_l1", [g, x, y], (0, beta))
    ties = np.abs(x.astype(np.float64) - y.astype(np.float64)) == beta
    assert ties.sum() >= 8
    assert np.array_equal(out[ties].astype(np.float64),
                          (g[ties].astype(np.float64) * np.sign(x - y)[ties].astype(np.float64)))


@pytest.mark.parametrize("op,attrs", [("smooth_l1", (0, 1.0)), ("smooth_l1", (0, 0.0)),
                                      ("smooth_l1", (2, 2.0)), ("l1", (0,)), ("l1", (2,))])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_sign_of_zero_is_zero(op, attrs, dtype):
    """d == 0 (equal inputs, including +0 vs -0) gives exactly 0 for finite gradOut."""
    x = np.array([0.0, -0.0, 3.0, -7.5, 1e-40 if dtype != F16 else 6e-8, 100.0], dtype)
    y = np.array([-0.0, 0.0, 3.0, -7.5, 1e-40 if dtype != F16 else 6e-8, 100.0], dtype)
    g = np.array([1.0, -2.0, 5.0, -1e4, 3.0, 0.5], dtype)
    out = compute(op, [g, x, y], attrs)
    assert out.dtype == dtype
    assert (out.astype(np.float64) == 0).all(), out


# --------------------------------------------------------------------------- dtypes


DTYPE_COMBOS = [
    (F32, F32, F32),
    (F16, F16, F16),
    (BF16, BF16, BF16),
    (F16, F32, F32),
    (F32, F16, BF16),
    (F16, BF16, F16),
    (BF16, BF16, F16),
    (BF16, F32, BF16),
]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtypes", DTYPE_COMBOS, ids=lambda d: "-".join(t.name for t in d))
def test_dtypes_and_mixed(op, dtypes):
    """Native 16-bit and mixed inputs: output is the promoted dtype (f16+bf16 -> f32)."""
    rng = np.random.default_rng(7)
    n = N_INPUTS[op]
    inputs = [rand((5, 13), dt, rng) for dt in dtypes[:n]]
    expected_dtype = R.promote(*dtypes[:n])
    for attrs in ([(0, 0.8), (1, 1.0), (2, 0.0)] if op == "smooth_l1" else
                  [(0,), (1,), (2,)] if op == "l1" else [("none",), ("tanh",)]):
        out = check(op, inputs, attrs, out_dtype=expected_dtype, what=f"{op}{attrs}{dtypes}")
        assert out.dtype == expected_dtype


def test_promotion_table_used_by_tests():
    """The test promotion helper follows SPEC §5 (f16+bf16 -> f32, equal stays)."""
    assert R.promote(F16, BF16) == F32
    assert R.promote(BF16, BF16, BF16) == BF16
    assert R.promote(F16, F16, F32) == F32
    assert R.promote(F16, F16) == F16


@pytest.mark.parametrize("op", ["smooth_l1", "l1"])
@pytest.mark.parametrize("in_dtype,out_dtype", [(F16, F32), (BF16, F32), (F32, F16), (F32, BF16),
                                                (F16, BF16), (BF16, F16)])
def test_output_dtype_differs_from_promoted(op, in_dtype, out_dtype):
    """gradInput of another float dtype (castable): computed in float32, rounded to it."""
    rng = np.random.default_rng(3)
    inputs = [rand((4, 9), in_dtype, rng, scale=3.0) for _ in range(3)]
    attrs = (0, 0.5) if op == "smooth_l1" else (1,)
    out = check(op, inputs, attrs, out_dtype=out_dtype)
    assert out.dtype == out_dtype


@pytest.mark.parametrize("op", ["smooth_l1", "l1"])
@pytest.mark.parametrize("out_dtype", [F16, BF16])
def test_output_rounding_is_nearest_even(op, out_dtype):
    """float32 results written to a 16-bit gradInput are rounded to nearest, ties to even.

    With beta = 0 / sum the float32 result is exactly g*sign(d), so the output must equal
    the correctly rounded g bit for bit; g sits on, just below and just above 16-bit
    rounding midpoints, and beyond the 16-bit range (-> inf).
    """
    p = 10 if out_dtype == F16 else 7
    vals = []
    for base in (1.0, 1.5, 3.0, -2.0, 0.75):
        half = base / 2.0**p / 2 * (1 if base > 0 else -1)  # half a ULP at |base|
        for k in range(4):
            mid = base + (2 * k + 1) * half
            vals += [mid, np.nextafter(np.float32(mid), np.float32(0)),
                     np.nextafter(np.float32(mid), np.float32(np.inf) * np.sign(mid))]
    vals += [70000.0, -65520.0, 65519.0, 1e-7, 3e-8, 2.9e-8] if out_dtype == F16 else [
        3.3e38, -3.39e38, 1e-39, 1e-41]
    g = np.array(vals, np.float32)
    x = np.full(g.shape, 2.0, np.float32)
    y = np.zeros(g.shape, np.float32)
    attrs = (2, 0.0) if op == "smooth_l1" else (2,)
    with np.errstate(over="ignore"):
        out = compute(op, [g, x, y], attrs, out_dtype=out_dtype)
        expected = R.round_to(out_dtype, g.astype(np.float64))
    assert np.array_equal(bits(out), bits(expected)), (g, out, expected)


def test_gelu_f16_bf16_promotes_to_f32():
    """GELU gradOutput f16 with self bf16: the promoted (and required) gradInput is f32."""
    rng = np.random.default_rng(4)
    g = rand((3, 7), F16, rng)
    x = rand((3, 7), BF16, rng)
    for mode in ("none", "tanh"):
        assert check("gelu", [g, x], (mode,)).dtype == F32


# --------------------------------------------------------------------------- layouts


def _inputs_for(op, shape, rng, dtype=F32):
    return [rand(shape, dtype, rng) for _ in range(N_INPUTS[op])]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "layout",
    [
        dict(perm=(2, 1, 0)),  # fully transposed
        dict(perm=(1, 0, 2), offset=5),  # partly transposed with an offset
        dict(step=2, gap=3, offset=1),  # sliced: every other element, padded rows
        dict(perm=(0, 2, 1), step=3, gap=1, offset=7),
    ],
    ids=["transposed", "permuted-offset", "sliced", "mixed"],
)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_noncontiguous_inputs(op, layout, dtype):
    """Inputs viewed through transposed / sliced strides and offsets."""
    rng = np.random.default_rng(11)
    shape = (3, 4, 5)
    arrays = _inputs_for(op, shape, rng, dtype)
    devs = []
    for k, a in enumerate(arrays):
        lay = dict(layout)
        offset = lay.pop("offset", 0) + k
        strides = R.layout_strides(shape, **lay)
        devs.append(strided_device(a, strides, offset))
    attrs = (1, 0.6) if op == "smooth_l1" else (2,) if op == "l1" else ("tanh",)
    out = compute(op, devs, attrs)
    check_output(op, out, golden(op, arrays, attrs), dtype, g=arrays[0], what=f"{op} {layout}")
    for d in devs:
        d.free()


@pytest.mark.parametrize("op", OPS)
def test_zero_stride_broadcast_views(op):
    """Inputs that are broadcast views (stride 0 along expanded dims) of smaller data."""
    rng = np.random.default_rng(12)
    shape = (4, 3, 5)
    small = [rand((4, 1, 5), F32, rng), rand((1, 3, 1), F32, rng), rand((4, 3, 1), F32, rng)]
    zero_dims = [(1,), (0, 2), (2,)]
    arrays, devs = [], []
    for s, zd in list(zip(small, zero_dims, strict=True))[: N_INPUTS[op]]:
        full = np.ascontiguousarray(np.broadcast_to(s, shape))
        arrays.append(full)
        devs.append(strided_device(full, R.layout_strides(shape, zero_dims=zd), offset=2))
    attrs = (1, 1.0) if op == "smooth_l1" else (1,) if op == "l1" else ("none",)
    out = compute(op, devs, attrs)
    check_output(op, out, golden(op, arrays, attrs), F32, g=arrays[0], what=f"{op} zero-stride")
    for d in devs:
        d.free()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize(
    "layout",
    [dict(perm=(1, 0)), dict(step=2, gap=1), dict(perm=(1, 0), step=2, gap=2)],
    ids=["transposed", "sliced", "transposed-sliced"],
)
def test_noncontiguous_output_keeps_other_bytes(op, dtype, layout):
    """The output view gets exactly the result; storage outside the view is untouched."""
    rng = np.random.default_rng(13)
    shape = (6, 7)
    arrays = _inputs_for(op, shape, rng, dtype)
    strides = R.layout_strides(shape, **layout)
    offset = 3
    junk = np.full(shape, -12345.0, dtype)
    out_dev = strided_device(junk, strides, offset, fill=np.array(np.nan, dtype))
    before = out_dev.storage()
    attrs = (0, 0.9) if op == "smooth_l1" else (0,) if op == "l1" else ("tanh",)
    result = compute(op, arrays, attrs, out=out_dev)
    after = out_dev.storage()
    inside = np.zeros(before.size, bool)
    inside[R.view_positions(shape, strides, offset).reshape(-1)] = True
    assert np.array_equal(bits(before)[~inside], bits(after)[~inside]), "bytes outside view changed"
    check_output(op, result, golden(op, arrays, attrs), dtype, g=arrays[0], what="strided out")
    out_dev.free()


# --------------------------------------------------------------------------- empty, rank 0, rank 8


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "shapes",
    [((2, 0, 3), (2, 0, 3), (2, 0, 3)), ((), (0, 3), (1, 3)), ((0,), (4, 0), (1,))],
    ids=["all-empty", "broadcast-empty", "rank2-empty"],
)
def test_empty_tensors_succeed_and_write_nothing(op, shapes):
    """A 0 in the shape: success, workspace 0, nothing written (storage bytes unchanged)."""
    n = N_INPUTS[op]
    shapes = shapes[:n]
    devs = [DeviceTensor(np.full(4, 1.5, np.float32), s) for s in shapes]
    out_shape = np.broadcast_shapes(*shapes)
    assert 0 in out_shape
    out = DeviceTensor(np.full(5, 7.25, np.float32), out_shape)
    before = out.storage()
    attrs = ATTRS[op]
    getws = {"smooth_l1": aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize,
             "l1": aclnn.aclnnL1LossBackwardGetWorkspaceSize,
             "gelu": aclnn.aclnnGeluBackwardV2GetWorkspaceSize}[op]
    args = (*(d.tensor for d in devs), *attrs, out.tensor)
    ws, executor, ret = getws(*args)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    assert ws == 0
    assert executor is not None
    execute = {"smooth_l1": aclnn.aclnnSmoothL1LossBackward, "l1": aclnn.aclnnL1LossBackward,
               "gelu": aclnn.aclnnGeluBackwardV2}[op]
    assert execute(None, 0, executor, None) == 0
    from aclnn import acl

    assert acl.rt.synchronize_stream(None) == 0
    assert np.array_equal(bits(out.storage()), bits(before))
    for d in (*devs, out):
        d.check_guards()
        d.free()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reduction", [0, 1])
def test_rank0(op, reduction):
    """All tensors rank 0 (shape [])."""
    g, x, y = np.float32(1.75), np.float32(0.25), np.float32(-0.5)
    inputs = [np.array(g), np.array(x), np.array(y)][: N_INPUTS[op]]
    attrs = (reduction, 1.0) if op == "smooth_l1" else (reduction,) if op == "l1" else ("none",)
    out = check(op, inputs, attrs)
    assert out.shape == ()


@pytest.mark.parametrize("op", OPS)
def test_rank8_broadcast(op):
    """Rank-8 output with every input broadcasting along different dims."""
    rng = np.random.default_rng(8)
    shapes = [(2, 1, 2, 1, 3, 1, 2, 1), (1, 3, 1, 2, 3, 1, 1, 2), (2, 1, 1, 1, 3, 2, 1, 1)]
    inputs = [rand(s, F32, rng) for s in shapes[: N_INPUTS[op]]]
    for attrs in ((1, 0.5), (0, 2.0)) if op == "smooth_l1" else ((1,), (0,)) if op == "l1" else (
            ("none",), ("tanh",)):
        out = check(op, inputs, attrs)
        assert out.ndim == 8


# --------------------------------------------------------------------------- special values


@pytest.mark.parametrize("op", ["smooth_l1", "l1"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_loss_special_values(op, dtype):
    """NaN, +-inf, +-0, huge and subnormal values in every input, all pairs."""
    big = 6e4 if dtype == F16 else 1e30
    tiny = 6e-8 if dtype == F16 else 1e-40
    top = 65504.0 if dtype == F16 else 3e38  # d = top - (-top) overflows: still sign(d)
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, big, -big, tiny, -tiny, 1.0, -0.3, 2.5,
                     top, -top], dtype)
    x = np.repeat(vals, vals.size)
    y = np.tile(vals, vals.size)
    g = np.resize(vals[::-1], x.size).astype(dtype)
    for attrs in ([(0, 1.0), (1, 0.0), (2, 3.0)] if op == "smooth_l1" else [(0,), (1,)]):
        excl = R.smooth_l1_f32_hazard(g, x, y, *attrs) if op == "smooth_l1" else None
        check(op, [g, x, y], attrs, exclude=excl)


@pytest.mark.parametrize("mode", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gelu_huge_inf_nan(mode, dtype):
    """x = 1e30 -> g, x = -1e30 -> 0 (no NaN from overflow); +-inf and NaN -> NaN."""
    x = np.array([1e30, -1e30, 3e38, -3e38, np.inf, -np.inf, np.nan, 1e30], dtype)
    g = np.array([2.5, 2.5, -1.5, -1.5, 1.0, 1.0, 1.0, 0.0], dtype)
    out = compute("gelu", [g, x], (mode,)).astype(np.float64)
    assert out[0] == 2.5 and out[2] == -1.5 and out[7] == 0.0
    assert out[1] == 0.0 and out[3] == 0.0
    assert np.isnan(out[4:7]).all(), out


@pytest.mark.parametrize("mode", ["none", "tanh"])
def test_gelu_huge_f16(mode):
    """float16: the largest values (+-65504) behave like +-1e30; inf and NaN give NaN."""
    x = np.array([65504, -65504, 6e4, -6e4, np.inf, -np.inf, np.nan], F16)
    g = np.array([3.0, 3.0, -1.0, -1.0, 1.0, 1.0, 1.0], F16)
    out = compute("gelu", [g, x], (mode,)).astype(np.float64)
    assert out[0] == 3.0 and out[2] == -1.0 and out[1] == 0.0 and out[3] == 0.0
    assert np.isnan(out[4:]).all()


@pytest.mark.parametrize("mode", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_gelu_grid(mode, dtype):
    """A dense grid over [-12, 12] plus +-0 and subnormals, random gradOutput."""
    rng = np.random.default_rng(21)
    x = np.concatenate([np.linspace(-12, 12, 4001), [0.0, -0.0, 1e-40, -1e-40, 1e-45]])
    x = x.astype(dtype)
    g = rand(x.shape, dtype, rng, scale=4.0)
    check("gelu", [g, x], (mode,))


@pytest.mark.parametrize("mode", ["none", "tanh"])
def test_gelu_near_minus_four(mode):
    """Every float32 in a window around x = -4 (tanh: the naive form fails here)."""
    xs = []
    v = np.float32(-4.0) - np.float32(2000) * np.float32(2.0**-21)
    for _ in range(4001):
        xs.append(v)
        v = np.nextafter(v, np.float32(0))
    x = np.array(xs, np.float32)
    grid = np.linspace(-4.6, -3.4, 3000).astype(np.float32)
    x = np.concatenate([x, grid])
    g = np.ones_like(x)
    check("gelu", [g, x], (mode,))
    check("gelu", [np.float32(-3.0) * g, x], (mode,))


@pytest.mark.parametrize("mode", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_gelu_near_derivative_root(mode, dtype):
    """Consecutive values around the derivative's root (~ -0.7518): cancellation region."""
    root = -0.7517915246 if mode == "none" else -0.7524614
    span = 400 * float(R.ulp_of(root, dtype))
    x = np.unique(np.linspace(root - span, root + span, 2001).astype(dtype))
    g = np.full(x.shape, 1.0, dtype)
    check("gelu", [g, x], (mode,))
    check("gelu", [(g.astype(np.float64) * -7.0).astype(dtype), x], (mode,))


@pytest.mark.parametrize("mode", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_gelu_special_gradients(mode, dtype):
    """NaN / +-inf / 0 / huge gradOutput combined with ordinary and extreme x."""
    big = 6e4 if dtype == F16 else 1e30
    gv = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, big, -big, 1.0], dtype)
    xv = np.array([0.0, 1.0, -1.0, -3.0, 5.0, big, -big, np.nan, np.inf, -20.0], dtype)
    g = np.repeat(gv, xv.size)
    x = np.tile(xv, gv.size)
    excl = R.gelu_inf_grad_ambiguous(g, x, mode)
    check("gelu", [g, x], (mode,), exclude=excl)


def test_guards_checked_by_every_call():
    """run_op really checks guards: a corrupted guard is detected."""
    dev = to_device(np.ones(3, np.float32))
    out = empty_device((3,), np.float32)
    from aclnn import acl

    bad = np.zeros(1, np.uint8)
    assert acl.rt.memcpy(out.ptr, 1, acl.util.numpy_to_ptr(bad), 1,
                         acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    with pytest.raises(AssertionError, match="guard"):
        run_op("gelu", [dev, dev], ("none",), out)
    dev.free()
    out.free()


def test_large_smooth_l1_f32_random():
    """A larger random float32 case in every branch, beta not a power of two."""
    rng = np.random.default_rng(99)
    g = rand((64, 50), F32, rng)
    x = rand((64, 50), F32, rng)
    y = rand((1, 50), F32, rng)
    for beta in (0.3, 1e-3, 7.0):
        for red in (0, 1, 2):
            check("smooth_l1", [g, x, y], (red, beta))


def _every_16bit_value(dtype) -> np.ndarray:
    """All 65536 bit patterns of a 16-bit float dtype."""
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


@pytest.mark.parametrize("mode", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_gelu_every_16bit_input(mode, dtype):
    """Every float16 / bfloat16 x (NaN, +-inf, subnormals included), through the flat kernel
    (contiguous) and the tiled one (transposed), with gradOutput 1 and random gradients."""
    rng = np.random.default_rng(31)
    x = _every_16bit_value(dtype)
    ones = np.ones_like(x)
    check("gelu", [ones, x], (mode,))
    g = rand(x.shape, dtype, rng)
    check("gelu", [g, x], (mode,))
    transposed = R.layout_strides((256, 256), perm=(1, 0))
    devs = [strided_device(a.reshape(256, 256), transposed) for a in (g, x)]
    out = compute("gelu", devs, (mode,))
    check_output("gelu", out, golden("gelu", [g.reshape(256, 256), x.reshape(256, 256)],
                                     (mode,)), dtype, what=f"gelu {mode} transposed")
    for d in devs:
        d.free()
