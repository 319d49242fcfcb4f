"""The two contracts (SPEC §14): every row of the fidelity ledger (docs/fidelity.md) in both
modes. `library` answers as the open CANN operator repository's op_api does on the SoC;
`documented` as the pages (SPEC §5-§8).

The AvgPool2dBackward graphs are checked against a float64 model written here, one per
graph, with each graph's roundings: the terms are exact in float64 and only the float32
accumulation differs, so results agree within float32 rounding of the sums.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import aclnn
from aclnn import acl
from aclnn.framework.workspace import aligned
from support import DeviceTensor, run_phase_two, run_two_phase

ND, NCHW, NCL = aclnn.ACL_FORMAT_ND, aclnn.ACL_FORMAT_NCHW, aclnn.ACL_FORMAT_NCL
SCRATCH_950 = 16 << 20
INNER_NULLPTR = 561103


def dev(values, shape=None, strides=None, offset=0, fmt=ND, acl_dtype=None) -> DeviceTensor:
    """A device tensor viewing `values` (a NumPy array) as `shape`/`strides`/`offset`."""
    values = np.asarray(values)
    shape = values.shape if shape is None else shape
    return DeviceTensor(values.reshape(-1), shape, strides, offset, fmt, acl_dtype)


def ones(shape, dtype=np.float32, fmt=ND) -> DeviceTensor:
    return dev(np.ones(shape, dtype), fmt=fmt)


def status_of(result) -> int:
    return result[2]


def both_modes(use_contract, call):
    """{contract: call()} for each contract."""
    out = {}
    for contract in ("documented", "library"):
        use_contract(contract)
        out[contract] = call()
    return out


# ------------------------------------------------------------------ checks: C1 .. C12


def gelu_phase1(g, x, out, approximate="none"):
    return aclnn.aclnnGeluBackwardV2GetWorkspaceSize(g.tensor, x.tensor, approximate, out.tensor)


def test_c1_gelu_nine_dims(use_contract):
    shape = (1, 2, 1, 2, 1, 2, 1, 2, 1)
    g, x, out = ones(shape), dev(np.linspace(-2, 2, 16, dtype=np.float32), shape), ones(shape)
    got = both_modes(use_contract, lambda: status_of(gelu_phase1(g, x, out)))
    assert got == {"documented": 161002, "library": 0}
    use_contract("library")
    assert run_two_phase(aclnn.aclnnGeluBackwardV2GetWorkspaceSize, aclnn.aclnnGeluBackwardV2,
                         g.tensor, x.tensor, "none", out.tensor) == 0
    expected = aclnn.gelu_backward(np.ones(16, np.float32), x.view().reshape(-1), "none")
    assert np.array_equal(out.view().reshape(-1), expected)


def test_c2_gelu_checks_only_the_promoted_dtype(use_contract, use_soc):
    g = dev(np.array([1, 2, 3], np.int32))
    x, out = dev(np.array([0.5, -1.0, 2.0], np.float32)), ones((3,))
    got = both_modes(use_contract, lambda: status_of(gelu_phase1(g, x, out)))
    assert got == {"documented": 161002, "library": 0}
    use_contract("library")
    assert run_two_phase(aclnn.aclnnGeluBackwardV2GetWorkspaceSize, aclnn.aclnnGeluBackwardV2,
                         g.tensor, x.tensor, "none", out.tensor) == 0
    expected = aclnn.gelu_backward(np.array([1, 2, 3], np.float32), x.view(), "none")
    assert np.array_equal(out.view(), expected)
    use_soc("Ascend910")  # BF16 + FP16 promote to FLOAT: fine; BF16 alone is not
    bf, half, f32 = (dev(np.ones(3, ml_dtypes.bfloat16)), dev(np.ones(3, np.float16)),
                     ones((3,)))
    got = both_modes(use_contract, lambda: status_of(gelu_phase1(bf, half, f32)))
    assert got == {"documented": 161002, "library": 0}
    bf_out = dev(np.ones(3, ml_dtypes.bfloat16))
    assert status_of(gelu_phase1(bf, bf, bf_out)) == 161002
    assert "DT_BF16" in aclnn.aclGetRecentErrMsg()


def test_c3_l1_gradinput_only_castable(use_contract):
    g, x = ones((2, 2)), dev(np.array([[3.0, 1.0], [0.0, 1.0]], np.float32))
    y, out = ones((2, 2)), dev(np.zeros((2, 2)))
    call = lambda: status_of(aclnn.aclnnL1LossBackwardGetWorkspaceSize(  # noqa: E731
        g.tensor, x.tensor, y.tensor, 0, out.tensor))
    assert both_modes(use_contract, call) == {"documented": 161002, "library": 0}
    assert run_two_phase(aclnn.aclnnL1LossBackwardGetWorkspaceSize, aclnn.aclnnL1LossBackward,
                         g.tensor, x.tensor, y.tensor, 0, out.tensor) == 0
    assert out.view().tolist() == [[1.0, 0.0], [-1.0, 0.0]]


def pool_phase1(grad, x, out, kernel=(2, 2), stride=(2, 2), padding=(0, 0), ceil=False,
                include_pad=True, divisor=0, cube=1, arrays=None):
    """AvgPool2dBackward phase 1 with int arrays made (and kept alive) in `arrays`."""
    made = [aclnn.aclCreateIntArray(list(v)) if v is not None else None
            for v in (kernel, stride, padding)]
    if arrays is not None:
        arrays.extend(made)
    return aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
        grad.tensor, x.tensor, *made, ceil, include_pad, divisor, cube, out.tensor)


def pool_tensors(n=1, c=1, h=4, w=4, oh=2, ow=2, dtype=np.float32, grad=None):
    grad = dev(np.ones((n, c, oh, ow), dtype) if grad is None else grad, fmt=NCHW)
    return grad, dev(np.zeros((n, c, h, w), dtype), fmt=NCHW), \
        dev(np.zeros((n, c, h, w), dtype), fmt=NCHW)


@pytest.mark.parametrize(("soc", "library_status"), [
    ("Ascend910", 161002), ("Ascend310P", 161002), ("Ascend910B", 0), ("Ascend910_93", 0),
    ("Ascend950", 0)])
def test_c4_divisor_range_per_soc(use_contract, use_soc, soc, library_status):
    use_soc(soc)
    grad, x, out = pool_tensors()
    got = both_modes(use_contract, lambda: status_of(pool_phase1(grad, x, out, divisor=300)))
    assert got == {"documented": 161002, "library": library_status}
    if library_status == 0:  # the 3-D / V2 graphs divide by the override
        assert run_pool(grad, x, out, divisor=300) == 0
        assert np.allclose(out.view(), 1 / 300, rtol=1e-7)


def run_pool(grad, x, out, **kw) -> int:
    arrays: list = []
    ws, executor, ret = pool_phase1(grad, x, out, arrays=arrays, **kw)
    if ret != 0:
        return ret
    return run_phase_two(aclnn.aclnnAvgPool2dBackward, ws, executor)


def test_c5_channels_beyond_65535(use_contract, use_soc):
    grad, x, out = pool_tensors(c=65536, h=2, w=2, oh=1, ow=1, dtype=np.float16)
    for soc in ("Ascend910B", "Ascend950"):
        use_soc(soc)
        got = both_modes(use_contract, lambda: status_of(pool_phase1(grad, x, out)))
        assert got == {"documented": 161002, "library": 0}
        assert run_pool(grad, x, out) == 0
        assert np.all(out.view() == np.float16(0.25))


def test_c6_empty_tensors(use_contract):
    grad, x, out = pool_tensors(n=0)
    got = both_modes(use_contract, lambda: pool_phase1(grad, x, out)[::2])
    assert got["documented"][1] == 161002
    assert got["library"] == (0, 0)


def test_c7_self_dtype_and_format_free(use_contract):
    grad = dev(np.ones((1, 1, 2, 2), np.float32), fmt=NCHW)
    x = dev(np.zeros((1, 1, 4, 4), np.float16), fmt=NCL)  # 4-D self in NCL, another dtype
    out = dev(np.zeros((1, 1, 4, 4), np.float32), fmt=NCHW)
    got = both_modes(use_contract, lambda: status_of(pool_phase1(grad, x, out)))
    assert got == {"documented": 161002, "library": 0}
    nd = dev(np.zeros((1, 1, 4, 4), np.float32), fmt=ND)  # ND is still refused
    got = both_modes(use_contract, lambda: status_of(pool_phase1(grad, nd, out)))
    assert got == {"documented": 161002, "library": 161002}


def test_c8_float_keep_dtype_on_910(use_contract, use_soc):
    use_soc("Ascend910")
    grad, x, out = pool_tensors()
    got = both_modes(use_contract, lambda: status_of(pool_phase1(grad, x, out, cube=0)))
    assert got == {"documented": 161002, "library": 0}
    assert run_pool(grad, x, out, cube=0) == 0
    assert np.all(out.view() == np.float32(0.25))


def test_c9_no_format_rule_for_elementwise_operators(use_contract):
    g, x, y = (ones((2, 2), fmt=NCHW), ones((2, 2), fmt=aclnn.ACL_FORMAT_NHWC),
               ones((2, 2), fmt=aclnn.ACL_FORMAT_FRACTAL_NZ))
    out = ones((2, 2), fmt=aclnn.ACL_FORMAT_HWCN)
    call = lambda: status_of(aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(  # noqa: E731
        g.tensor, x.tensor, y.tensor, 0, 1.0, out.tensor))
    assert both_modes(use_contract, call) == {"documented": 0, "library": 0}


def test_c10_undefined_dtype_accepted_then_rejected(use_contract):
    ptr, ret = acl.rt.malloc(16, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    try:
        t = aclnn.aclCreateTensor([2, 2], aclnn.ACL_DT_UNDEFINED, None, 0, ND, [2, 2], ptr)
        assert t is not None, aclnn.aclGetRecentErrMsg()
        f = ones((2, 2))
        call = lambda: status_of(aclnn.aclnnGeluBackwardV2GetWorkspaceSize(  # noqa: E731
            t, f.tensor, "none", f.tensor))
        assert both_modes(use_contract, call) == {"documented": 161002, "library": 161002}
        assert "DT_UNDEFINED" in aclnn.aclGetRecentErrMsg()
        aclnn.aclDestroyTensor(t)
    finally:
        acl.rt.free(ptr)


@pytest.mark.parametrize(("soc", "library_status"), [
    ("Ascend950", INNER_NULLPTR), ("Ascend910B", 161002), ("Ascend910", 161002)])
def test_c11_grad_output_not_the_pooled_size(use_contract, use_soc, soc, library_status):
    use_soc(soc)
    grad, x, out = pool_tensors(oh=3, ow=2)
    got = both_modes(use_contract, lambda: status_of(pool_phase1(grad, x, out)))
    assert got == {"documented": 161002, "library": library_status}
    assert "gradOutput shape must be [1, 1, 2, 2]" in aclnn.aclGetRecentErrMsg()


@pytest.mark.parametrize("soc", ["Ascend910", "Ascend910B", "Ascend950"])
def test_c12_null_stride_means_the_kernel(use_contract, use_soc, soc):
    use_soc(soc)
    g = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)
    for contract in ("documented", "library"):
        use_contract(contract)
        results = []
        for stride in (None, (2, 2)):
            grad, x, out = pool_tensors(grad=g)
            assert run_pool(grad, x, out, stride=stride, cube=2) == 0
            results.append(out.view().copy())
        assert np.array_equal(*results)


def test_c14_output_may_alias_an_input_in_library_mode(use_contract):
    storage = np.arange(8, dtype=np.float32) - 3
    for contract, expected_status in (("documented", 161002), ("library", 0)):
        use_contract(contract)
        buf = dev(storage.copy())  # self and gradInput below: two views of its memory
        self_view = aclnn.aclCreateTensor([6], aclnn.ACL_FLOAT, [1], 0, ND, [8],
                                          buf.ptr + 64)
        out_view = aclnn.aclCreateTensor([6], aclnn.ACL_FLOAT, [1], 2, ND, [8], buf.ptr + 64)
        g, y = ones((6,)), dev(np.zeros(6, np.float32))
        status = run_two_phase(aclnn.aclnnL1LossBackwardGetWorkspaceSize,
                               aclnn.aclnnL1LossBackward, g.tensor, self_view, y.tensor, 0,
                               out_view)
        assert status == expected_status
        if status == 0:
            assert buf.view().tolist() == [-3, -2, -1, -1, -1, 0, 1, 1]
        over = aclnn.aclCreateTensor([6], aclnn.ACL_FLOAT, [0], 0, ND, [8], buf.ptr + 64)
        assert status_of(aclnn.aclnnL1LossBackwardGetWorkspaceSize(
            g.tensor, self_view, y.tensor, 0, over)) == 161002
        for t in (self_view, out_view, over):
            aclnn.aclDestroyTensor(t)


# ------------------------------------------------------------------ workspaces: C13 / W


def ws_of(result) -> int:
    assert result[2] == 0, aclnn.aclGetRecentErrMsg()
    return result[0]


def l1_ws(g, x, y, out) -> int:
    return ws_of(aclnn.aclnnL1LossBackwardGetWorkspaceSize(g.tensor, x.tensor, y.tensor, 1,
                                                           out.tensor))


@pytest.mark.parametrize("contract", ["documented", "library"])
def test_workspace_is_the_graphs_intermediates(use_contract, use_soc, contract):
    use_contract(contract)
    same = [ones((2, 3)) for _ in range(4)]
    assert l1_ws(*same) == 0  # nothing to copy, cast or broadcast; the result lands in place
    # BroadcastTo of gradOutput and of target: two live 24-byte tensors
    assert l1_ws(ones((1, 3)), ones((2, 3)), ones((2, 1)), ones((2, 3))) == 2 * aligned(24)
    # a transposed self: Contiguous copy; a float16 target: Cast to FLOAT
    t = dev(np.ones((3, 2), np.float32), (2, 3), (1, 2))
    assert l1_ws(ones((2, 3)), t, ones((2, 3), np.float16), ones((2, 3))) == 2 * aligned(24)
    # a non-contiguous gradInput: the kernel's output stays in the workspace
    out = dev(np.zeros((3, 2), np.float32), (2, 3), (1, 2))
    assert l1_ws(ones((2, 3)), ones((2, 3)), ones((2, 3)), out) == aligned(24)
    use_soc("Ascend950")  # the elementwise DAG kernels' 16 MiB tiling workspace
    assert l1_ws(*same) == aligned(SCRATCH_950)


def test_workspace_reuse_follows_lifetimes(use_soc):
    """SmoothL1 with all three inputs cast: the casts' outputs all live until the kernel,
    so none can share memory; the kernel's scratch cannot share with its inputs."""
    use_soc("Ascend950")
    h = [ones((4, 8), np.float16) for _ in range(3)]
    got = ws_of(aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(
        h[0].tensor, h[1].tensor, ones((4, 8)).tensor, 0, 1.0, ones((4, 8)).tensor))
    assert got == 2 * aligned(4 * 8 * 4) + aligned(SCRATCH_950)


@pytest.mark.parametrize("contract", ["documented", "library"])
def test_phase_two_needs_the_workspace(use_contract, contract):
    use_contract(contract)
    args = (ones((1, 3)).tensor, ones((2, 3)).tensor, ones((2, 1)).tensor, 0,
            ones((2, 3)).tensor)
    ws, executor, _ = aclnn.aclnnL1LossBackwardGetWorkspaceSize(*args)
    assert ws > 0
    assert aclnn.aclnnL1LossBackward(None, 0, executor, None) == 161002
    assert "workspaceSize must be >= " in aclnn.aclGetRecentErrMsg()
    assert aclnn.aclnnL1LossBackward(None, ws, executor, None) == 161001
    retry = aclnn.aclnnL1LossBackward(None, 0, executor, None)
    if contract == "library":  # the library releases the executor on a null workspace
        assert retry == 161002 and "destroyed" in aclnn.aclGetRecentErrMsg()
    else:
        assert retry == 161002 and "workspaceSize" in aclnn.aclGetRecentErrMsg()
        assert run_phase_two(aclnn.aclnnL1LossBackward, ws, executor) == 0


# ------------------------------------------------------------------ AvgPool graphs: N1 .. N3


def windows(size, kernel, stride, pad, out):
    """(start, end) of each window, PyTorch's end (before clipping)."""
    return [(o * stride - pad, min(o * stride - pad + kernel, size + pad)) for o in range(out)]


def model(grad, shape, kernel, stride, padding, term):
    """float64 gradInput: term(g, window) added to each input cell of each clipped window;
    window = ((hs, he), (ws, we)) before clipping."""
    n, c, h, w = shape
    oh, ow = grad.shape[-2:]
    out = np.zeros((n, c, h, w))
    for i, (hs, he) in enumerate(windows(h, kernel[0], stride[0], padding[0], oh)):
        for j, (ws, we) in enumerate(windows(w, kernel[1], stride[1], padding[1], ow)):
            value = term(grad[:, :, i, j].astype(np.float64), ((hs, he), (ws, we)))
            out[:, :, max(hs, 0):min(he, h), max(ws, 0):min(we, w)] += value[..., None, None]
    return out


def clipped(window, shape) -> int:
    (hs, he), (ws, we) = window
    return (min(he, shape[2]) - max(hs, 0)) * (min(we, shape[3]) - max(ws, 0))


def f32(v) -> np.ndarray:
    return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)


def f16(v) -> np.ndarray:
    return np.asarray(v, np.float64).astype(np.float32).astype(np.float16).astype(np.float64)


def test_n1_910_ceil_mode_with_count_include_pad(use_contract, use_soc):
    """The issue's example: 3x3 input, kernel 2, stride 2, ceilMode: the cut window's cell
    gets 1/(kH*kW) of its gradient on Ascend910 (cube graph), PyTorch's 1/1 in the pages."""
    use_soc("Ascend910")
    got = {}
    for contract in ("documented", "library"):
        use_contract(contract)
        grad, x, out = pool_tensors(h=3, w=3, oh=2, ow=2)
        assert run_pool(grad, x, out, ceil=True, cube=1) == 0
        got[contract] = out.view()[0, 0]
    assert got["library"][2, 2] == 0.25 and got["documented"][2, 2] == 1.0
    assert got["library"][0, 0] == got["documented"][0, 0] == 0.25


def random_grad(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) * 3).astype(dtype)


CASES = [  # kernel, stride, padding, ceilMode, countIncludePad, divisor, H, W
    ((3, 3), (2, 2), (1, 1), False, True, 0, 9, 11),
    ((3, 2), (1, 2), (1, 0), False, False, 0, 7, 6),
    ((2, 2), (2, 2), (0, 0), True, True, 0, 7, 7),
    ((3, 3), (2, 1), (1, 1), True, False, 0, 8, 9),
    ((2, 3), (2, 2), (0, 1), False, True, 7, 6, 8),
    ((3, 3), (3, 3), (1, 1), False, False, 255, 9, 9),
]


def pooled(size, k, s, p, ceil) -> int:
    span = size + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    return out - 1 if ceil and (out - 1) * s >= size + p else out


def run_case(rng, case, dtype=np.float32, cube=0):
    kernel, stride, padding, ceil, include_pad, divisor, h, w = case
    oh, ow = (pooled(h, kernel[0], stride[0], padding[0], ceil),
              pooled(w, kernel[1], stride[1], padding[1], ceil))
    g = random_grad(rng, (2, 3, oh, ow), dtype)
    grad, x, out = pool_tensors(n=2, c=3, h=h, w=w, grad=g, dtype=dtype)
    assert run_pool(grad, x, out, kernel=kernel, stride=stride, padding=padding, ceil=ceil,
                    include_pad=include_pad, divisor=divisor, cube=cube) == 0, \
        aclnn.aclGetRecentErrMsg()
    return g, out.view().astype(np.float64)


def pytorch_divisor(window, shape, include_pad, divisor):
    if divisor:
        return divisor
    (hs, he), (ws, we) = window
    return (he - hs) * (we - ws) if include_pad else clipped(window, shape)


def assert_close(got, want, magnitude, rounding=2.0**-23):
    """Equal up to float32 accumulation: a few roundings of the running sums, each within
    `rounding` of the sum of the terms' magnitudes (`magnitude`, from `model` over |term|)."""
    assert np.all(np.abs(got - want) <= 4 * rounding * magnitude + 1e-38), \
        np.max(np.abs(got - want) / np.maximum(magnitude, 1e-38))


def model_and_magnitude(grad, shape, kernel, stride, padding, term):
    """`model` of the terms and of their magnitudes."""
    return (model(grad, shape, kernel, stride, padding, term),
            model(grad, shape, kernel, stride, padding, lambda v, win: np.abs(term(v, win))))


@pytest.mark.parametrize("case", CASES)
def test_n2_910b_pool3d_graph_multiplies_by_a_float32_reciprocal(use_contract, use_soc, case):
    """Ascend910B outside the cube conditions: AvgPool3DGrad, g * float32(1 / divisor)."""
    use_soc("Ascend910B")
    use_contract("library")
    kernel, stride, padding, ceil, include_pad, divisor, h, w = case
    rng = np.random.default_rng(1)
    g, got = run_case(rng, (kernel, stride, padding, ceil, False if not ceil else include_pad,
                            divisor or 300, h, w))
    shape = (2, 3, h, w)
    include = False if not ceil else include_pad
    want, magnitude = model_and_magnitude(g, shape, kernel, stride, padding, lambda v, win: f32(
        v * f32(1 / np.float32(pytorch_divisor(win, shape, include, divisor or 300)))))
    assert_close(got, want, magnitude)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cube", [0, 1, 2])
def test_n1_cube_graph_on_910(use_contract, use_soc, case, cube):
    """Ascend910/310P: the cube graph: mean matrix float32(1/clipped count) when
    countIncludePad is false and the divisor is 0 or +-255, else the weight float32(1/divisor)
    or float32(1/(kH*kW)) on every window; cubeMathType 1 and 2 cast both to float16 and
    the result is float16 before the cast to FLOAT."""
    use_soc("Ascend910")
    use_contract("library")
    kernel, stride, padding, ceil, include_pad, divisor, h, w = case
    g, got = run_case(np.random.default_rng(2), case, cube=cube)
    shape = (2, 3, h, w)
    half = cube in (1, 2)
    rnd = f16 if half else f32
    mean = not include_pad and divisor in (0, 255, -255)
    weight = 1.0 if mean else f32(1 / np.float32(divisor or kernel[0] * kernel[1]))

    def term(v, win):
        scaled = f32(v * f32(1 / np.float32(clipped(win, shape)))) if mean else v
        return rnd(scaled) * rnd(weight)

    want, magnitude = model_and_magnitude(g, shape, kernel, stride, padding, term)
    if half:  # the float16 result: rounded once more, to float16
        assert np.array_equal(f16(got), got), "the float16 cube's result is a float16 value"
        assert_close(got, f16(want), magnitude, 2.0**-11)
    else:
        assert_close(got, want, magnitude)


def test_n2_910b_allow_down_precision_is_float16_in_the_cube(use_contract, use_soc):
    """The cube graph on Ascend910B casts to FLOAT16 for ALLOW_FP32_DOWN_PRECISION (the pages
    say HF32); USE_HF32 rounds to HF32."""
    use_soc("Ascend910B")
    grad = np.full((1, 1, 2, 2), 1 / 3, np.float32)
    results = {}
    for contract in ("documented", "library"):
        use_contract(contract)
        g, x, out = pool_tensors(grad=grad)
        assert run_pool(g, x, out, cube=1) == 0
        results[contract] = out.view()[0, 0, 0, 0]
    assert results["library"] == np.float32(np.float16(np.float16(1 / 3) * np.float16(0.25)))
    assert results["documented"] != results["library"]


@pytest.mark.parametrize("case", CASES)
def test_n3_950_true_division_cube_math_type_ignored(use_contract, use_soc, case):
    use_soc("Ascend950")
    use_contract("library")
    kernel, stride, padding, ceil, include_pad, divisor, h, w = case
    g, got = run_case(np.random.default_rng(3), case, cube=2)
    shape = (2, 3, h, w)
    want, magnitude = model_and_magnitude(g, shape, kernel, stride, padding, lambda v, win: f32(
        v / pytorch_divisor(win, shape, include_pad, divisor)))
    assert_close(got, want, magnitude)


@pytest.mark.parametrize("soc", ["Ascend910", "Ascend910B", "Ascend950"])
@pytest.mark.parametrize("cube", [0, 1])
def test_global_pooling_divides_in_the_compute_dtype(use_contract, use_soc, soc, cube):
    """Every SoC: kernel == self's H x W (>= 10), gradOutput 1 x 1, no divisor: gradOutput
    divided by kH*kW, in float16 for cubeMathType 1 and 2; padding does not matter."""
    use_soc(soc)
    use_contract("library")
    g = np.array([1.0, 1 / 3, -7.1], np.float32).reshape(1, 3, 1, 1)
    grad, x, out = pool_tensors(c=3, h=10, w=12, grad=g)
    assert run_pool(grad, x, out, kernel=(10, 12), stride=(1, 1), padding=(5, 6),
                    include_pad=False, cube=cube) == 0
    if cube == 1:
        want = (g.astype(np.float16) / np.float16(120)).astype(np.float32)
    else:
        want = g / np.float32(120)
    assert np.array_equal(out.view(), np.broadcast_to(want, (1, 3, 10, 12)))


def test_negative_padding_is_checked_late_in_library_mode(use_contract, use_soc):
    use_soc("Ascend910B")
    grad, x, out = pool_tensors(n=0)
    got = both_modes(use_contract, lambda: status_of(pool_phase1(
        grad, x, out, kernel=(3, 3), padding=(-1, 0))))
    assert got == {"documented": 161002, "library": 0}  # library: empty comes first
    grad, x, out = pool_tensors()
    use_contract("library")
    assert status_of(pool_phase1(grad, x, out, kernel=(2, 2), padding=(-1, 0),
                                 include_pad=False)) == 161002
    assert "padding values must be >= 0" in aclnn.aclGetRecentErrMsg()


def test_contract_selected_by_environment(monkeypatch):
    monkeypatch.setenv("ACLNN_CONTRACT", "nonsense")
    assert acl.rt.set_device(0) == acl.ACL_ERROR_INVALID_PARAM
    assert "ACLNN_CONTRACT" in acl.get_recent_err_msg()
    monkeypatch.delenv("ACLNN_CONTRACT")
    assert acl.rt.set_device(0) == 0
    assert acl.get_contract() == "library"  # the default
    monkeypatch.setenv("ACLNN_CONTRACT", "documented")
    assert acl.rt.set_device(0) == 0
    assert acl.get_contract() == "documented"
    with pytest.raises(ValueError, match="set_contract"):
        acl.set_contract("pages")


def test_plan_cache_keys_on_the_contract(use_contract):
    shape = (1,) * 9
    g, x, out = ones(shape), ones(shape), ones(shape)
    use_contract("library")
    assert status_of(gelu_phase1(g, x, out)) == 0
    use_contract("documented")
    assert status_of(gelu_phase1(g, x, out)) == 161002


def test_functional_api_follows_the_contract(use_contract):
    g = np.ones((1,) * 9, np.float32)
    use_contract("documented")
    with pytest.raises(ValueError, match="rank"):
        aclnn.gelu_backward(g, g, "none")
    use_contract("library")
    assert aclnn.gelu_backward(g, g, "none").shape == g.shape
    assert math.isclose(float(aclnn.gelu_backward(g, g, "none").reshape(-1)[0]), 1.0833154,
                        rel_tol=1e-6)


@pytest.mark.parametrize(("soc", "window", "dims", "want"), [
    ("Ascend910B", ((3, 3), (2, 2), (1, 1), False, True, 0, 1), (1, 8, 16, 16, 8, 8), "fp16"),
    ("Ascend910B", ((3, 3), (2, 2), (1, 1), False, True, 0, 3), (1, 8, 16, 16, 8, 8), "hf32"),
    ("Ascend910B", ((3, 3), (2, 2), (1, 1), False, False, 0, 1), (1, 8, 16, 16, 8, 8),
     "exact"),  # AvgPool3DGrad: cubeMathType ignored
    ("Ascend910", ((3, 3), (2, 2), (1, 1), False, False, 0, 2), (1, 8, 16, 16, 8, 8), "fp16"),
    ("Ascend910", ((3, 3), (2, 2), (1, 1), False, True, 0, 3), (1, 8, 16, 16, 8, 8), "exact"),
    ("Ascend950", ((3, 3), (2, 2), (1, 1), False, True, 0, 1), (1, 8, 16, 16, 8, 8), "exact"),
    ("Ascend950", ((16, 16), (1, 1), (0, 0), False, True, 0, 1), (1, 8, 16, 16, 1, 1),
     "fp16"),  # global pooling divides in FLOAT16
])
def test_golden_rounding_follows_the_graph(use_contract, use_soc, soc, window, dims, want):
    """`aclnn run`'s golden rounds the scaled gradient as the graph the library runs does
    (FLOAT input); the documented contract keeps the SoC's page rule."""
    from aclnn.kernels import pool
    from aclnn.ops._avgpool_graphs import Window
    from aclnn.ops.avg_pool2d_backward import golden_rounding
    names = {pool.EXACT: "exact", pool.ROUND_FP16: "fp16", pool.ROUND_HF32: "hf32"}
    use_soc(soc)
    use_contract("library")
    n, c, h, w, oh, ow = dims
    got = golden_rounding(aclnn.ACL_FLOAT, (n, c, h, w), (n, c, oh, ow), Window(*window))
    assert names[got] == want
    use_contract("documented")
    page = golden_rounding(aclnn.ACL_FLOAT, (n, c, h, w), (n, c, oh, ow), Window(*window))
    cube = window[-1]
    page_rule = {0: "exact", 2: "fp16", 3: "hf32",
                 1: "fp16" if soc == "Ascend910" else "hf32"}  # SPEC §8
    assert names[page] == page_rule[cube]
