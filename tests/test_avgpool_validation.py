"""Parameter validation of aclnnAvgPool2dBackward (SPEC §7, §8), rule by rule and in order.

Documented order (SPEC §8): nulls (gradOutput, self, kernelSize, padding, gradInput;
stride=None allowed) -> dtypes of gradOutput, self, gradInput in {FLOAT, FLOAT16, +BF16
per SoC}, gradOutput's (and self's) equal to gradInput's -> formats NCHW or NCL, 4-D
tensors NCHW, self's equal to gradInput's -> gradOutput and gradInput both 3-D or both
4-D -> kernelSize length 1|2, values > 0; stride length 0..2, values > 0; padding length
1|2, values >= 0 -> 2*pad <= kernel per axis -> cubeMathType in {0,1,2,3} and the SoC
rule of §7 -> self shape == gradInput shape -> divisorOverride in [-255, 255] ->
C <= 65535 -> gradOutput's N, C equal self's and its H, W the pooled size -> empty
gradOutput rejected. None for a required argument -> 161001; anything else -> 161002.

Negative dims cannot reach the operator: aclCreateTensor already rejects them.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import aclnn
from aclnn import acl
from avgpool_reference import avg_pool2d_backward_ref, pooled_shape
from support import (
    DT_NAME,
    GUARD_BYTES,
    SOCS_WITH_BF16,
    SOCS_WITHOUT_BF16,
    check_accepted,
    check_rejected,
    shape_str,
)

OP = "aclnnAvgPool2dBackward"
ARGS = ("gradOutput", "self", "kernelSize", "stride", "padding", "ceilMode",
        "countIncludePad", "divisorOverride", "cubeMathType", "gradInput")
NULLABLE = ("gradOutput", "self", "kernelSize", "padding", "gradInput")
TENSORS = ("gradOutput", "self", "gradInput")
NULLPTR = 161001
INVALID = 161002

NCHW, NCL, ND, NHWC = (aclnn.ACL_FORMAT_NCHW, aclnn.ACL_FORMAT_NCL, aclnn.ACL_FORMAT_ND,
                       aclnn.ACL_FORMAT_NHWC)
FORMAT_NAME = {NCHW: "NCHW", NCL: "NCL", ND: "ND", NHWC: "NHWC",
               aclnn.ACL_FORMAT_NC1HWC0: "NC1HWC0", aclnn.ACL_FORMAT_HWCN: "HWCN"}

UNSUPPORTED = ["f64", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "bool", "c64"]

SELF4 = (2, 3, 6, 6)


def has_number(msg: str, value: int) -> bool:
    """`value` appears in `msg` as a whole number (not as part of another number)."""
    return re.search(rf"(?<![\d.]){re.escape(str(value))}(?!\d|\.\d)", msg) is not None


def valid(mk, self_shape=SELF4, kernel=(2, 2), stride=(2, 2), padding=(0, 0), ceil=False,
          count=True, div=0, cube=0, dtypes=("f32", "f32", "f32"), fmts=None, go_shape=None,
          gi_shape=None):
    """A dict of valid arguments (unless overridden), in the C prototype's names."""
    if fmts is None:
        fmts = (NCHW, NCHW, NCHW)
    if go_shape is None:
        go_shape = pooled_shape(self_shape, kernel, stride, padding, ceil)
    gi_shape = self_shape if gi_shape is None else gi_shape
    return {
        "_mk": mk,
        "gradOutput": mk(go_shape, dtypes[0], fmt=fmts[0]),
        "self": mk(self_shape, dtypes[1], fmt=fmts[1]),
        "kernelSize": mk.array(kernel),
        "stride": None if stride is None else mk.array(stride),
        "padding": mk.array(padding),
        "ceilMode": ceil,
        "countIncludePad": count,
        "divisorOverride": div,
        "cubeMathType": cube,
        "gradInput": mk(gi_shape, dtypes[2], fill=-3.0, fmt=fmts[2]),
    }


def call(a: dict):
    return aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(*(a[name] for name in ARGS))


def expect_fail(code, a, *needles, absent=()):
    """Phase 1 fails with `code`; the message names OP and every needle, none of `absent`.

    gradInput (when it is a live test tensor) keeps its bytes and its guards.
    """
    gi_dev = a["_mk"].find(a["gradInput"])
    before = None if gi_dev is None else gi_dev.storage()
    msg = check_rejected(OP, code, call(a), needles, absent)
    if gi_dev is not None:
        assert np.array_equal(gi_dev.storage().view(np.uint8), before.view(np.uint8))
        gi_dev.check_guards()
    return msg


def expect_ok(mk, a):
    """Both phases succeed; guards of every tensor intact. Returns the workspace size."""
    ws, executor = check_accepted(call(a))
    assert isinstance(ws, int) and ws >= 0
    workspace = None
    if ws > 0:
        workspace, r = acl.rt.malloc(ws, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert r == 0
    try:
        assert aclnn.aclnnAvgPool2dBackward(workspace, ws, executor, None) == 0
        assert acl.rt.synchronize_stream(None) == 0
    finally:
        if workspace is not None:
            acl.rt.free(workspace)
    mk.check_guards()
    return ws


def result(mk, a) -> np.ndarray:
    expect_ok(mk, a)
    return mk.device(a["gradInput"]).view()


def random_fill(mk, tensor, seed=0):
    """Overwrite a (contiguous) TensorMaker tensor's device storage with random values."""
    dt = mk.device(tensor)
    rng = np.random.default_rng(seed)
    vals = rng.uniform(-2, 2, dt.storage_host.size).astype(dt.dtype)
    host = np.ascontiguousarray(vals)
    ret = acl.rt.memcpy(dt.ptr + GUARD_BYTES, dt.nbytes, acl.util.numpy_to_ptr(host), dt.nbytes,
                        acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == 0
    return vals.reshape(dt.shape)


# ============================================================================ valid baselines


def test_valid_baseline_4d(mk):
    a = valid(mk)
    out = result(mk, a)
    # gradOutput all ones, k = s = 2, count: every cell gets exactly 1/4.
    assert np.array_equal(out, np.full(SELF4, 0.25, np.float32))


@pytest.mark.parametrize("fmt", [NCHW, NCL])
def test_valid_3d_either_format(mk, fmt):
    a = valid(mk, self_shape=(3, 6, 6), fmts=(fmt, fmt, fmt))
    out = result(mk, a)
    assert np.array_equal(out, np.full((3, 6, 6), 0.25, np.float32))


def test_3d_gradoutput_format_may_differ_from_self(mk):
    """Only self's and gradInput's formats must agree (seed: 数据格式需要与self一致)."""
    expect_ok(mk, valid(mk, self_shape=(3, 6, 6), fmts=(NCL, NCHW, NCHW)))
    expect_ok(mk, valid(mk, self_shape=(3, 6, 6), fmts=(NCHW, NCL, NCL)))


def test_stride_none_accepted_and_means_kernel(mk):
    a = valid(mk, stride=None, kernel=(3, 2), self_shape=(1, 2, 7, 6))
    b = valid(mk, stride=(3, 2), kernel=(3, 2), self_shape=(1, 2, 7, 6))
    g = random_fill(mk, a["gradOutput"], 1)
    gb = random_fill(mk, b["gradOutput"], 1)
    assert np.array_equal(g, gb)
    out_a, out_b = result(mk, a), result(mk, b)
    assert np.array_equal(out_a, out_b)
    ref, _ = avg_pool2d_backward_ref(g, (1, 2, 7, 6), (3, 2), (3, 2), (0, 0), False, True, 0)
    np.testing.assert_allclose(out_a, ref, rtol=2**-20, atol=0)


def test_stride_empty_array_means_kernel(mk):
    a = valid(mk, stride=(), kernel=(3, 2), self_shape=(1, 2, 7, 6))
    b = valid(mk, stride=(3, 2), kernel=(3, 2), self_shape=(1, 2, 7, 6))
    random_fill(mk, a["gradOutput"], 2)
    random_fill(mk, b["gradOutput"], 2)
    assert np.array_equal(result(mk, a), result(mk, b))


def test_stride_length_one_means_both_axes(mk):
    a = valid(mk, stride=(1,), kernel=(3, 2), self_shape=(1, 2, 7, 6))
    b = valid(mk, stride=(1, 1), kernel=(3, 2), self_shape=(1, 2, 7, 6))
    shape_a = aclnn.aclGetViewShape(a["gradOutput"])[0]
    assert shape_a == aclnn.aclGetViewShape(b["gradOutput"])[0] == [1, 2, 5, 5]
    random_fill(mk, a["gradOutput"], 3)
    random_fill(mk, b["gradOutput"], 3)
    assert np.array_equal(result(mk, a), result(mk, b))


def test_kernel_and_padding_length_one_mean_both_axes(mk):
    a = valid(mk, kernel=(3,), stride=(2,), padding=(1,), self_shape=(1, 2, 7, 6), count=False)
    b = valid(mk, kernel=(3, 3), stride=(2, 2), padding=(1, 1), self_shape=(1, 2, 7, 6),
              count=False)
    random_fill(mk, a["gradOutput"], 4)
    random_fill(mk, b["gradOutput"], 4)
    assert np.array_equal(result(mk, a), result(mk, b))


@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("count", [False, True])
def test_flags_accept_bools(mk, ceil, count):
    expect_ok(mk, valid(mk, self_shape=(1, 1, 7, 5), kernel=(3, 2), stride=(2, 2),
                        padding=(1, 1), ceil=ceil, count=count))


# ============================================================================ rule 1: nulls


@pytest.mark.parametrize("name", NULLABLE)
def test_null_argument(mk, name):
    a = valid(mk)
    a[name] = None
    expect_fail(NULLPTR, a, name)


def test_all_null(mk):
    a = valid(mk)
    for name in NULLABLE:
        a[name] = None
    expect_fail(NULLPTR, a, "gradOutput")


# ============================================================================ rule 2: dtypes


@pytest.mark.parametrize("dtype", UNSUPPORTED)
@pytest.mark.parametrize("pos", range(3))
def test_unsupported_dtype(mk, pos, dtype):
    dtypes = ["f32", "f32", "f32"]
    dtypes[pos] = dtype
    expect_fail(INVALID, valid(mk, dtypes=tuple(dtypes)), TENSORS[pos], DT_NAME[dtype])


def test_all_int32_names_gradoutput_first(mk):
    expect_fail(INVALID, valid(mk, dtypes=("s32", "s32", "s32")), "gradOutput", "DT_INT32")


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
def test_bf16_rejected_on_old_socs(mk, use_soc, soc):
    use_soc(soc)
    expect_fail(INVALID, valid(mk, dtypes=("bf16",) * 3, cube=1), "gradOutput", "DT_BF16")
    for pos in range(3):
        dtypes = ["f16", "f16", "f16"]
        dtypes[pos] = "bf16"
        expect_fail(INVALID, valid(mk, dtypes=tuple(dtypes), cube=1), TENSORS[pos], "DT_BF16")


@pytest.mark.parametrize("soc", SOCS_WITH_BF16)
def test_bf16_accepted_on_new_socs(mk, use_soc, soc):
    use_soc(soc)
    for cube in (0, 1, 2, 3):
        a = valid(mk, dtypes=("bf16",) * 3, cube=cube)
        out = result(mk, a)
        assert out.dtype == ml_dtypes.bfloat16
        assert np.array_equal(out.astype(np.float32), np.full(SELF4, 0.25, np.float32))


@pytest.mark.parametrize("soc", SOCS_WITH_BF16 + SOCS_WITHOUT_BF16)
def test_float16_accepted_on_every_soc(mk, use_soc, soc):
    use_soc(soc)
    for cube in (0, 1, 2, 3):
        a = valid(mk, dtypes=("f16",) * 3, cube=cube)
        assert np.array_equal(result(mk, a), np.full(SELF4, 0.25, np.float16))


@pytest.mark.parametrize("dtypes", [("f16", "f32", "f32"), ("f32", "f32", "f16"),
                                    ("f16", "f16", "f32")])
def test_gradoutput_dtype_differs_from_gradinput(mk, dtypes):
    msg = expect_fail(INVALID, valid(mk, dtypes=dtypes), "gradOutput", DT_NAME[dtypes[0]])
    assert DT_NAME[dtypes[2]] in msg, msg


def test_gradoutput_bf16_vs_gradinput_float(mk):
    msg = expect_fail(INVALID, valid(mk, dtypes=("bf16", "f32", "f32")), "gradOutput", "DT_BF16")
    assert "DT_FLOAT" in msg


@pytest.mark.parametrize("dtypes", [("f32", "f16", "f32"), ("f16", "f32", "f16"),
                                    ("bf16", "f16", "bf16")])
def test_self_dtype_differs_from_gradinput(mk, dtypes):
    msg = expect_fail(INVALID, valid(mk, dtypes=dtypes), "self", DT_NAME[dtypes[1]])
    assert DT_NAME[dtypes[2]] in msg, msg


# ============================================================================ rule 3: formats


@pytest.mark.parametrize("pos", range(3))
@pytest.mark.parametrize("fmt", [ND, NHWC, aclnn.ACL_FORMAT_NC1HWC0, aclnn.ACL_FORMAT_HWCN])
def test_format_not_nchw_or_ncl_rejected_4d(mk, pos, fmt):
    fmts = [NCHW, NCHW, NCHW]
    fmts[pos] = fmt
    expect_fail(INVALID, valid(mk, fmts=tuple(fmts)), TENSORS[pos], FORMAT_NAME[fmt])


@pytest.mark.parametrize("pos", range(3))
def test_format_nd_rejected_3d(mk, pos):
    fmts = [NCL, NCL, NCL]
    fmts[pos] = ND
    expect_fail(INVALID, valid(mk, self_shape=(3, 6, 6), fmts=tuple(fmts)), TENSORS[pos], "ND")


@pytest.mark.parametrize("pos", range(3))
def test_4d_tensor_must_be_nchw(mk, pos):
    fmts = [NCHW, NCHW, NCHW]
    fmts[pos] = NCL
    expect_fail(INVALID, valid(mk, fmts=tuple(fmts)), TENSORS[pos], "NCL")


def test_all_4d_ncl_rejected(mk):
    expect_fail(INVALID, valid(mk, fmts=(NCL, NCL, NCL)), "gradOutput", "NCL")


@pytest.mark.parametrize("fmts", [(NCL, NCL, NCHW), (NCL, NCHW, NCL), (NCHW, NCHW, NCL)])
def test_self_format_differs_from_gradinput(mk, fmts):
    msg = expect_fail(INVALID, valid(mk, self_shape=(3, 6, 6), fmts=fmts), "self")
    assert FORMAT_NAME[fmts[1]] in msg and FORMAT_NAME[fmts[2]] in msg, msg


# ============================================================================ rule 4: ranks


def test_gradoutput_3d_gradinput_4d(mk):
    a = valid(mk, go_shape=(3, 3, 3))
    msg = expect_fail(INVALID, a, "gradOutput", "gradInput")
    assert shape_str((3, 3, 3)) in msg or shape_str(SELF4) in msg, msg


def test_gradoutput_4d_gradinput_3d(mk):
    a = valid(mk, self_shape=(3, 6, 6), go_shape=(1, 3, 3, 3))
    msg = expect_fail(INVALID, a, "gradOutput", "gradInput")
    assert shape_str((1, 3, 3, 3)) in msg or shape_str((3, 6, 6)) in msg, msg


@pytest.mark.parametrize("go_shape, self_shape", [((3, 3), (6, 6)), ((1, 1, 3, 3, 3),
                                                                      (1, 1, 3, 6, 6))])
def test_gradoutput_rank_2_or_5_rejected(mk, go_shape, self_shape):
    a = valid(mk, self_shape=self_shape, go_shape=go_shape)
    expect_fail(INVALID, a, "gradOutput", shape_str(go_shape))


@pytest.mark.parametrize("gi_shape", [(6, 6), (1, 2, 3, 6, 6)])
def test_gradinput_rank_2_or_5_rejected(mk, gi_shape):
    a = valid(mk, gi_shape=gi_shape)
    expect_fail(INVALID, a, "gradInput", shape_str(gi_shape))


@pytest.mark.parametrize("self_shape", [(6, 6), (1, 2, 3, 6, 6), (3, 6, 6)])
def test_self_rank_differs_from_gradinput(mk, self_shape):
    """go and gi 4-D, self of another rank: self's shape != gradInput's -> 161002."""
    a = valid(mk, go_shape=(2, 3, 3, 3), gi_shape=SELF4)
    a["self"] = mk(self_shape, fmt=NCHW)
    msg = expect_fail(INVALID, a, "self")
    assert shape_str(self_shape) in msg or shape_str(SELF4) in msg, msg


# ============================================================================ rule 5: int arrays


@pytest.mark.parametrize("kernel", [(), (2, 2, 2)])
def test_kernel_size_bad_length(mk, kernel):
    a = valid(mk)
    a["kernelSize"] = mk.array(kernel)
    msg = expect_fail(INVALID, a, "kernelSize")
    assert shape_str(kernel) in msg or has_number(msg, len(kernel)), msg


@pytest.mark.parametrize("kernel, bad", [((0, 2), 0), ((2, 0), 0), ((2, -1), -1), ((-1,), -1),
                                         ((0,), 0)])
def test_kernel_size_non_positive(mk, kernel, bad):
    a = valid(mk)
    a["kernelSize"] = mk.array(kernel)
    msg = expect_fail(INVALID, a, "kernelSize")
    assert shape_str(kernel) in msg or has_number(msg, bad), msg


def test_stride_bad_length(mk):
    a = valid(mk)
    a["stride"] = mk.array((1, 1, 1))
    msg = expect_fail(INVALID, a, "stride")
    assert shape_str((1, 1, 1)) in msg or has_number(msg, 3), msg


@pytest.mark.parametrize("stride, bad", [((0, 1), 0), ((1, 0), 0), ((0,), 0), ((2, -2), -2)])
def test_stride_non_positive(mk, stride, bad):
    a = valid(mk)
    a["stride"] = mk.array(stride)
    msg = expect_fail(INVALID, a, "stride", absent=("kernelSize",))
    assert shape_str(stride) in msg or has_number(msg, bad), msg


@pytest.mark.parametrize("padding", [(), (0, 0, 0)])
def test_padding_bad_length(mk, padding):
    a = valid(mk)
    a["padding"] = mk.array(padding)
    msg = expect_fail(INVALID, a, "padding")
    assert shape_str(padding) in msg or has_number(msg, len(padding)), msg


@pytest.mark.parametrize("padding, bad", [((-1, 0), -1), ((0, -1), -1), ((-2,), -2)])
def test_padding_negative(mk, padding, bad):
    a = valid(mk, kernel=(4, 4), stride=(1, 1))
    a["padding"] = mk.array(padding)
    msg = expect_fail(INVALID, a, "padding")
    assert shape_str(padding) in msg or has_number(msg, bad), msg


# ============================================================================ rule 6: 2*pad <= k


@pytest.mark.parametrize("kernel, padding", [((2, 4), (2, 1)), ((4, 3), (1, 2)),
                                             ((3,), (2,)), ((1, 1), (1, 0)), ((5, 5), (3, 3))])
def test_padding_more_than_half_kernel(mk, kernel, padding):
    a = valid(mk, stride=(1, 1))
    a["kernelSize"] = mk.array(kernel)
    a["padding"] = mk.array(padding)
    expect_fail(INVALID, a, "padding", absent=("cubeMathType",))


@pytest.mark.parametrize("kernel, padding", [((2, 4), (1, 2)), ((4, 3), (2, 1)), ((2,), (1,)),
                                             ((5, 1), (2, 0))])
def test_padding_exactly_half_kernel_accepted(mk, kernel, padding):
    self_shape = (1, 2, 5, 6)
    for count in (False, True):
        for ceil in (False, True):
            a = valid(mk, self_shape=self_shape, kernel=kernel, stride=(1, 1), padding=padding,
                      count=count, ceil=ceil)
            g = random_fill(mk, a["gradOutput"], 5)
            out = result(mk, a)
            ref, _ = avg_pool2d_backward_ref(g, self_shape, kernel, (1, 1), padding, ceil,
                                             count, 0)
            np.testing.assert_allclose(out, ref, rtol=2**-19, atol=2**-20)


# ============================================================================ rule 7: cube


@pytest.mark.parametrize("cube", [-1, 4, 127, -128])
def test_cube_math_type_out_of_range(mk, cube):
    a = valid(mk, cube=cube)
    msg = expect_fail(INVALID, a, "cubeMathType")
    assert has_number(msg, cube), msg


@pytest.mark.parametrize("cube", ["1", 1.0, True, [1]])
def test_cube_math_type_wrong_python_type(mk, cube):
    expect_fail(INVALID, valid(mk, cube=cube), "cubeMathType")


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
@pytest.mark.parametrize("cube", [0, 3])
def test_float_keep_dtype_or_hf32_rejected_on_old_socs(mk, use_soc, soc, cube):
    use_soc(soc)
    msg = expect_fail(INVALID, valid(mk, cube=cube), "cubeMathType")
    assert has_number(msg, cube), msg


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
def test_old_socs_accept_float_with_1_or_2_and_float16_with_any(mk, use_soc, soc):
    use_soc(soc)
    for cube in (1, 2):
        expect_ok(mk, valid(mk, cube=cube))
    for cube in (0, 1, 2, 3):
        expect_ok(mk, valid(mk, cube=cube, dtypes=("f16",) * 3))


@pytest.mark.parametrize("soc", SOCS_WITH_BF16)
def test_new_socs_accept_float_with_every_cube_math_type(mk, use_soc, soc):
    use_soc(soc)
    for cube in (0, 1, 2, 3):
        expect_ok(mk, valid(mk, cube=cube))


# ============================================================================ rule 8: shapes


@pytest.mark.parametrize("gi_shape", [(2, 3, 6, 7), (1, 3, 6, 6), (2, 4, 6, 6), (2, 3, 5, 6)])
def test_self_shape_differs_from_gradinput(mk, gi_shape):
    a = valid(mk, gi_shape=gi_shape)
    msg = expect_fail(INVALID, a, "gradInput")
    assert shape_str(gi_shape) in msg and shape_str(SELF4) in msg, msg


def test_self_shape_differs_from_gradinput_3d(mk):
    a = valid(mk, self_shape=(3, 6, 6), gi_shape=(3, 6, 4), fmts=(NCL, NCL, NCL))
    msg = expect_fail(INVALID, a, "gradInput")
    assert shape_str((3, 6, 4)) in msg and shape_str((3, 6, 6)) in msg, msg


# ============================================================================ rule 9: divisor


@pytest.mark.parametrize("div", [256, -256, 1000, -(2**40), 2**62])
def test_divisor_override_out_of_range(mk, div):
    msg = expect_fail(INVALID, valid(mk, div=div), "divisorOverride")
    assert has_number(msg, div), msg


@pytest.mark.parametrize("div", [255, -255, 1, -1])
def test_divisor_override_in_range_accepted(mk, div):
    a = valid(mk, div=div)
    out = result(mk, a)
    assert np.array_equal(out, np.full(SELF4, np.float32(1.0) / np.float32(div)))


@pytest.mark.parametrize("div", ["3", 3.0, True, [3]])
def test_divisor_override_wrong_python_type(mk, div):
    expect_fail(INVALID, valid(mk, div=div), "divisorOverride")


def test_divisor_override_numpy_int_accepted(mk):
    out = result(mk, valid(mk, div=np.int64(5)))
    assert np.array_equal(out, np.full(SELF4, np.float32(0.2)))


# ============================================================================ rule 10: C


@pytest.mark.parametrize("self_shape", [(65536, 1, 1), (1, 65536, 1, 1)])
def test_channels_above_65535_rejected(mk, self_shape):
    fmt = NCL if len(self_shape) == 3 else NCHW
    a = valid(mk, self_shape=self_shape, kernel=(1, 1), stride=(1, 1), dtypes=("f16",) * 3,
              fmts=(fmt,) * 3)
    expect_fail(INVALID, a, "65536")


def test_channels_65535_accepted(mk):
    a = valid(mk, self_shape=(65535, 1, 2), kernel=(1, 2), stride=(1, 1), dtypes=("f16",) * 3,
              fmts=(NCL,) * 3)
    out = result(mk, a)
    assert np.array_equal(out, np.full((65535, 1, 2), 0.5, np.float16))


# ============================================================================ rule 11: go shape


@pytest.mark.parametrize("go_shape", [(1, 3, 3, 3), (2, 2, 3, 3), (2, 3, 2, 3), (2, 3, 3, 4),
                                      (3, 3, 3, 3), (2, 3, 3, 1)])
def test_gradoutput_shape_mismatch(mk, go_shape):
    a = valid(mk, go_shape=go_shape)
    expect_fail(INVALID, a, "gradOutput", shape_str(go_shape))


@pytest.mark.parametrize("go_shape", [(2, 3, 3), (3, 2, 3), (3, 3, 4)])
def test_gradoutput_shape_mismatch_3d(mk, go_shape):
    a = valid(mk, self_shape=(3, 6, 6), go_shape=go_shape, fmts=(NCL,) * 3)
    expect_fail(INVALID, a, "gradOutput", shape_str(go_shape))


def test_gradoutput_of_the_other_ceil_mode_rejected(mk):
    """self H=W=8, k=3, s=2, p=1: floor gives 4, ceil gives 5 per axis."""
    floor_shape = pooled_shape((1, 1, 8, 8), (3, 3), (2, 2), (1, 1), False)
    ceil_shape = pooled_shape((1, 1, 8, 8), (3, 3), (2, 2), (1, 1), True)
    assert floor_shape == (1, 1, 4, 4) and ceil_shape == (1, 1, 5, 5)
    a = valid(mk, self_shape=(1, 1, 8, 8), kernel=(3, 3), stride=(2, 2), padding=(1, 1),
              ceil=True, go_shape=floor_shape)
    expect_fail(INVALID, a, "gradOutput", shape_str(floor_shape))
    b = valid(mk, self_shape=(1, 1, 8, 8), kernel=(3, 3), stride=(2, 2), padding=(1, 1),
              ceil=False, go_shape=ceil_shape)
    expect_fail(INVALID, b, "gradOutput", shape_str(ceil_shape))


def test_ceil_mode_last_window_dropped(mk):
    """in=7, k=2, s=2, p=1, ceil: (7+2-2)/2 -> 4, +1 = 5; (5-1)*2 = 8 >= 7+1 -> 4."""
    assert pooled_shape((1, 1, 7, 7), (2, 2), (2, 2), (1, 1), True) == (1, 1, 4, 4)
    expect_ok(mk, valid(mk, self_shape=(1, 1, 7, 7), kernel=(2, 2), stride=(2, 2),
                        padding=(1, 1), ceil=True))
    a = valid(mk, self_shape=(1, 1, 7, 7), kernel=(2, 2), stride=(2, 2), padding=(1, 1),
              ceil=True, go_shape=(1, 1, 5, 5))
    expect_fail(INVALID, a, "gradOutput", "[1, 1, 5, 5]")


# ============================================================================ rule 12: empty


@pytest.mark.parametrize("self_shape, kernel, padding", [((0, 3, 6, 6), (2, 2), (0, 0)),
                                                          ((1, 0, 6, 6), (2, 2), (0, 0)),
                                                          ((0, 6, 6), (2, 2), (0, 0)),
                                                          ((1, 1, 1, 4), (2, 1), (0, 0))])
def test_empty_gradoutput_rejected(mk, self_shape, kernel, padding):
    go_shape = pooled_shape(self_shape, kernel, (1, 1), padding, False)
    assert 0 in go_shape
    fmt = NCL if len(self_shape) == 3 else NCHW
    a = valid(mk, self_shape=self_shape, kernel=kernel, stride=(1, 1), padding=padding,
              fmts=(fmt,) * 3)
    expect_fail(INVALID, a, "gradOutput")


def test_empty_self_with_nonempty_gradoutput_succeeds(mk):
    """SPEC §8: empty tensors that pass the checks succeed with workspace 0.

    self (1, 1, 0, 4), k (2, 1), p (1, 0): pooled H = (0 + 2 - 2)/1 + 1 = 1, so gradOutput
    (1, 1, 1, 4) is not empty and every check passes; there is nothing to write.
    """
    a = valid(mk, self_shape=(1, 1, 0, 4), kernel=(2, 1), stride=(1, 1), padding=(1, 0))
    assert aclnn.aclGetViewShape(a["gradOutput"])[0] == [1, 1, 1, 4]
    assert expect_ok(mk, a) == 0


# ============================================================================ python types


@pytest.mark.parametrize("name", TENSORS)
@pytest.mark.parametrize("bad", [[1.0, 2.0], 1, "x", np.ones((2, 3, 6, 6), np.float32)])
def test_wrong_python_type_for_tensor(mk, name, bad):
    a = valid(mk)
    a[name] = bad
    expect_fail(INVALID, a, name)


@pytest.mark.parametrize("name", ["kernelSize", "stride", "padding"])
@pytest.mark.parametrize("bad", [[2, 2], (2, 2), 2, "2", np.array([2, 2])])
def test_wrong_python_type_for_int_array(mk, name, bad):
    a = valid(mk)
    a[name] = bad
    expect_fail(INVALID, a, name)


@pytest.mark.parametrize("name", ["kernelSize", "stride", "padding"])
def test_tensor_as_int_array(mk, name):
    a = valid(mk)
    a[name] = mk((2,), "s64", fill=1, fmt=NCHW)
    expect_fail(INVALID, a, name)


@pytest.mark.parametrize("name", ["kernelSize", "stride", "padding"])
def test_destroyed_int_array(mk, name):
    a = valid(mk)
    assert mk.destroy_array(a[name]) == 0
    expect_fail(INVALID, a, name)


@pytest.mark.parametrize("name", TENSORS)
def test_destroyed_tensor(mk, name):
    a = valid(mk)
    assert mk.destroy(a[name]) == 0
    expect_fail(INVALID, a, name)


@pytest.mark.parametrize("name", ["ceilMode", "countIncludePad"])
@pytest.mark.parametrize("bad", ["yes", [True], 1.5])
def test_wrong_python_type_for_flag(mk, name, bad):
    a = valid(mk)
    a[name] = bad
    expect_fail(INVALID, a, name)


# ============================================================================ order


def test_order_null_before_everything(mk):
    a = valid(mk, dtypes=("s32", "f64", "bool"), fmts=(ND, ND, ND), cube=9, div=999)
    a["padding"] = None
    a["kernelSize"] = mk.array((0, 0, 0))
    expect_fail(NULLPTR, a, "padding")


def test_order_null_kernel_before_wrong_type_tensor(mk):
    a = valid(mk)
    a["gradOutput"] = "not a tensor"
    a["kernelSize"] = None
    expect_fail(NULLPTR, a, "kernelSize")


def test_order_dtype_before_format(mk):
    a = valid(mk, dtypes=("s32", "f32", "f32"), fmts=(ND, ND, ND))
    expect_fail(INVALID, a, "gradOutput", "DT_INT32", absent=("format",))


def test_order_dtype_mismatch_before_format(mk):
    a = valid(mk, dtypes=("f16", "f32", "f32"), fmts=(NCHW, NCHW, ND))
    expect_fail(INVALID, a, "gradOutput", "DT_FLOAT16", absent=("format",))


def test_order_format_before_rank(mk):
    a = valid(mk, go_shape=(3, 3), fmts=(ND, NCHW, NCHW))
    expect_fail(INVALID, a, "gradOutput", "ND")


def test_order_format_before_rank_mismatch(mk):
    a = valid(mk, go_shape=(3, 3, 3), fmts=(NCHW, NCHW, NHWC))
    expect_fail(INVALID, a, "gradInput", "NHWC", absent=(shape_str((3, 3, 3)),))


def test_order_rank_before_kernel(mk):
    a = valid(mk, go_shape=(1, 1, 2, 3, 3))
    a["kernelSize"] = mk.array((0, 0, 0))
    expect_fail(INVALID, a, "gradOutput", shape_str((1, 1, 2, 3, 3)), absent=("kernelSize",))


def test_order_kernel_before_stride(mk):
    a = valid(mk)
    a["kernelSize"] = mk.array((0, 2))
    a["stride"] = mk.array((0, 0, 0))
    expect_fail(INVALID, a, "kernelSize", absent=("stride",))


def test_order_stride_before_padding(mk):
    a = valid(mk)
    a["stride"] = mk.array((-1, 1))
    a["padding"] = mk.array((-1, -1, -1))
    expect_fail(INVALID, a, "stride", absent=("padding",))


def test_order_padding_before_half_kernel_rule(mk):
    a = valid(mk)
    a["padding"] = mk.array((-1, 5))  # negative H, and W > half the kernel
    msg = expect_fail(INVALID, a, "padding")
    assert has_number(msg, -1) or shape_str((-1, 5)) in msg, msg


def test_order_padding_before_cube(mk):
    a = valid(mk, cube=-1)
    a["padding"] = mk.array((0, 0, 0))
    expect_fail(INVALID, a, "padding", absent=("cubeMathType",))


def test_order_half_kernel_before_cube(mk):
    a = valid(mk, cube=4)
    a["padding"] = mk.array((2, 0))
    expect_fail(INVALID, a, "padding", absent=("cubeMathType",))


def test_order_cube_before_self_shape(mk):
    a = valid(mk, cube=7, gi_shape=(2, 3, 6, 7))
    expect_fail(INVALID, a, "cubeMathType", absent=(shape_str((2, 3, 6, 7)),))


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
def test_order_soc_cube_rule_before_self_shape(mk, use_soc, soc):
    use_soc(soc)
    a = valid(mk, cube=0, gi_shape=(2, 3, 6, 7))
    expect_fail(INVALID, a, "cubeMathType", absent=(shape_str((2, 3, 6, 7)),))


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
def test_order_dtype_before_soc_cube_rule(mk, use_soc, soc):
    use_soc(soc)
    a = valid(mk, cube=0, dtypes=("bf16",) * 3)
    expect_fail(INVALID, a, "DT_BF16", absent=("cubeMathType",))


def test_order_self_shape_before_divisor(mk):
    a = valid(mk, div=256, gi_shape=(2, 3, 6, 7))
    expect_fail(INVALID, a, shape_str((2, 3, 6, 7)), absent=("divisorOverride",))


def test_order_divisor_before_channels(mk):
    a = valid(mk, self_shape=(65536, 1, 1), kernel=(1, 1), stride=(1, 1), dtypes=("f16",) * 3,
              fmts=(NCL,) * 3, div=-300)
    expect_fail(INVALID, a, "divisorOverride", absent=("65536",))


def test_order_channels_before_gradoutput_shape(mk):
    a = valid(mk, self_shape=(65536, 1, 1), kernel=(1, 1), stride=(1, 1), dtypes=("f16",) * 3,
              fmts=(NCL,) * 3, go_shape=(65536, 2, 1))
    expect_fail(INVALID, a, "65536", absent=(shape_str((65536, 2, 1)),))


def test_order_rank_before_self_shape(mk):
    """gradOutput 3-D with gradInput 4-D fails at the rank rule, not at self vs gradInput."""
    a = valid(mk, go_shape=(3, 3, 3), gi_shape=(2, 3, 6, 7))
    expect_fail(INVALID, a, "gradOutput", "gradInput", absent=(shape_str(SELF4),))


# ============================================================================ guards / phase 2


def test_failed_phase1_leaves_gradinput_untouched(mk):
    a = valid(mk, div=300)
    dev = mk.device(a["gradInput"])
    before = dev.storage().copy()
    expect_fail(INVALID, a, "divisorOverride")
    assert np.array_equal(dev.storage().view(np.uint8), before.view(np.uint8))
    mk.check_guards()


def test_phase1_does_not_write_before_phase2(mk):
    a = valid(mk)
    dev = mk.device(a["gradInput"])
    before = dev.storage().copy()
    ws, executor, ret = call(a)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    assert np.array_equal(dev.storage(), before)
    assert aclnn.aclnnAvgPool2dBackward(None, ws, executor, None) == 0
    assert acl.rt.synchronize_stream(None) == 0
    assert np.array_equal(dev.view(), np.full(SELF4, 0.25, np.float32))
    mk.check_guards()


def test_executor_consumed_by_phase2(mk):
    a = valid(mk)
    ws, executor, ret = call(a)
    assert ret == 0
    assert aclnn.aclnnAvgPool2dBackward(None, ws, executor, None) == 0
    assert acl.rt.synchronize_stream(None) == 0
    assert aclnn.aclnnAvgPool2dBackward(None, ws, executor, None) == INVALID
