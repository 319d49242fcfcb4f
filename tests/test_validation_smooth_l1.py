"""Parameter validation of aclnnSmoothL1LossBackward (SPEC §8), rule by rule and in order.

Documented order: nulls (4 tensors) -> each tensor's dtype in {FLOAT, FLOAT16, +BF16 per
SoC} -> max rank of the three inputs <= 8 -> reduction in {0,1,2} -> beta >= 0 (NaN fails)
-> promote(gradOut, self, target) exists, is supported and castable to gradInput ->
broadcast(gradOut, self, target) exists and equals gradInput's shape.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import aclnn
from support import (
    DT_NAME,
    SOCS_WITH_BF16,
    SOCS_WITHOUT_BF16,
    check_accepted,
    check_rejected,
    rank_msg_ok,
    run_phase_two,
    shape_str,
)

OP = "aclnnSmoothL1LossBackward"
NAMES = ("gradOut", "self", "target", "gradInput")

UNSUPPORTED = ["s32", "f64", "bool", "s64", "u16", "s8", "u8", "s16", "c64"]


def tensors(mk, dtypes=("f32",) * 4, shapes=((2, 3),) * 4):
    return [mk(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]


def call(g, s, t, out, reduction=0, beta=1.0):
    return aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(g, s, t, reduction, beta, out)


def expect_fail(code, args, *needles, absent=(), **kw):
    """Phase 1 fails with `code`; the message names OP and every needle, none of `absent`."""
    return check_rejected(OP, code, call(*args, **kw), needles, absent)


def expect_ok(*args, **kw):
    ws, executor = check_accepted(call(*args, **kw))
    assert run_phase_two(aclnn.aclnnSmoothL1LossBackward, ws, executor) == 0


# ---------------------------------------------------------------------------- valid


def test_valid_baseline_all_reductions(mk):
    for reduction in (0, 1, 2):
        expect_ok(*tensors(mk), reduction=reduction, beta=1.0)


@pytest.mark.parametrize("beta", [0.0, -0.0, 0.5, 1e30, math.inf])
def test_valid_beta_values(mk, beta):
    expect_ok(*tensors(mk), beta=beta)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_float_dtypes_accepted_on_every_soc(mk, use_soc, dtype):
    for soc in SOCS_WITHOUT_BF16 + SOCS_WITH_BF16:
        use_soc(soc)
        expect_ok(*tensors(mk, dtypes=(dtype,) * 4))


def test_promoted_float_cast_into_narrower_float_output(mk):
    # f16 + f32 + f16 -> f32, castable (float -> float) into an f16 gradInput.
    expect_ok(*tensors(mk, dtypes=("f16", "f32", "f16", "f16")))


def test_f16_bf16_promote_to_f32_into_bf16_output(mk):
    expect_ok(*tensors(mk, dtypes=("f16", "bf16", "f16", "bf16")))
    expect_ok(*tensors(mk, dtypes=("bf16", "f16", "bf16", "f32")))


def test_rank_8_accepted(mk):
    shape = (1, 2, 1, 1, 1, 1, 1, 2)
    expect_ok(*tensors(mk, shapes=(shape,) * 4))


def test_broadcast_accepted(mk):
    shapes = ((2, 1), (1, 3), (3,), (2, 3))
    expect_ok(*tensors(mk, shapes=shapes))


@pytest.mark.parametrize(
    "shapes",
    [
        ((0,),) * 4,
        ((2, 0, 3),) * 4,
        ((1, 3), (0, 3), (0, 1), (0, 3)),
        ((0, 3), (1, 3), (3,), (0, 3)),
    ],
)
def test_empty_tensors_succeed(mk, shapes):
    for reduction in (0, 1, 2):
        expect_ok(*tensors(mk, shapes=shapes), reduction=reduction)


# ---------------------------------------------------------------------------- rule 1: nulls


@pytest.mark.parametrize("pos", range(4))
def test_null_tensor(mk, pos):
    args = tensors(mk)
    args[pos] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, NAMES[pos])


def test_all_null():
    ws, executor, ret = call(None, None, None, None)
    assert ret == aclnn.ACLNN_ERR_PARAM_NULLPTR
    assert executor is None


# ---------------------------------------------------------------------------- rule 2: dtypes


@pytest.mark.parametrize("dtype", UNSUPPORTED)
@pytest.mark.parametrize("pos", range(4))
def test_unsupported_dtype(mk, pos, dtype):
    dtypes = ["f32"] * 4
    dtypes[pos] = dtype
    args = tensors(mk, dtypes=dtypes)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos], DT_NAME[dtype])


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
@pytest.mark.parametrize("pos", range(4))
def test_bf16_rejected_on_old_socs(mk, use_soc, soc, pos):
    use_soc(soc)
    dtypes = ["f32"] * 4
    dtypes[pos] = "bf16"
    args = tensors(mk, dtypes=dtypes)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos], "DT_BF16")


@pytest.mark.parametrize("soc", SOCS_WITH_BF16)
def test_bf16_accepted_on_new_socs(mk, use_soc, soc):
    use_soc(soc)
    expect_ok(*tensors(mk, dtypes=("bf16",) * 4))
    for pos in range(4):
        dtypes = ["f32"] * 4
        dtypes[pos] = "bf16"
        expect_ok(*tensors(mk, dtypes=dtypes))


# ---------------------------------------------------------------------------- rule 3: rank


@pytest.mark.parametrize("pos", range(3))
def test_input_rank_9_rejected(mk, pos):
    nine = (1,) * 9
    shapes = [(1,), (1,), (1,), nine]
    shapes[pos] = nine
    args = tensors(mk, shapes=shapes)
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos])
    assert rank_msg_ok(msg, nine), msg


def test_all_rank_9_rejected(mk):
    nine = (1, 1, 1, 1, 2, 1, 1, 1, 1)
    args = tensors(mk, shapes=(nine,) * 4)
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args)
    assert rank_msg_ok(msg, nine), msg


def test_output_rank_9_rejected(mk):
    # Inputs of rank <= 8 broadcast to a rank <= 8 shape, so a rank-9 gradInput never fits.
    args = tensors(mk, shapes=((1,) * 8, (1,) * 8, (1,) * 8, (1,) * 9))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput")


# ---------------------------------------------------------------------------- rule 4: reduction


@pytest.mark.parametrize("reduction", [-1, 3, 100, -(2**40)])
def test_bad_reduction_value(mk, reduction):
    args = tensors(mk)
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, args, "reduction", repr(reduction), reduction=reduction
    )


@pytest.mark.parametrize("reduction", ["mean", "1", 1.0, True, [1]])
def test_bad_reduction_type(mk, reduction):
    args = tensors(mk)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "reduction", reduction=reduction)


# ---------------------------------------------------------------------------- rule 5: beta


@pytest.mark.parametrize("beta", [-1.0, -0.5, -math.inf, math.nan])
def test_bad_beta_value(mk, beta):
    args = tensors(mk)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "beta", repr(beta), beta=beta)


@pytest.mark.parametrize("beta", ["1.0", [1.0]])
def test_bad_beta_type(mk, beta):
    args = tensors(mk)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "beta", beta=beta)


# ---------------------------------------------------------------------------- rule 6/7: shapes


def test_broadcast_impossible(mk):
    shapes = ((2, 3), (4, 3), (2, 3), (2, 3))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes))
    assert "[4, 3]" in msg or "[2, 3]" in msg, msg


def test_broadcast_impossible_with_zero(mk):
    shapes = ((0, 3), (2, 3), (2, 3), (2, 3))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes))
    assert "[0, 3]" in msg or "[2, 3]" in msg, msg


@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 3), (2, 3), (2, 3), (3, 2)),
        ((2, 1), (1, 3), (2, 3), (1, 3)),
        ((1, 3), (1, 3), (1, 3), (2, 3)),
        ((2, 3), (2, 3), (2, 3), (6,)),
        ((2, 3), (2, 3), (2, 3), (1, 2, 3)),
        ((0, 3), (0, 3), (0, 3), (1, 3)),
    ],
)
def test_broadcast_result_differs_from_gradinput(mk, shapes):
    args = tensors(mk, shapes=shapes)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", shape_str(shapes[3]))


# ---------------------------------------------------------------------------- python types


@pytest.mark.parametrize("bad", [[1.0, 2.0], 1, "x", 1.5, np.ones(3, np.float32)])
@pytest.mark.parametrize("pos", range(4))
def test_wrong_python_type_in_tensor_position(mk, pos, bad):
    args = tensors(mk)
    args[pos] = bad
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos])


@pytest.mark.parametrize("pos", range(4))
def test_destroyed_tensor(mk, pos):
    args = tensors(mk)
    mk.destroy(args[pos])
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos])


# ---------------------------------------------------------------------------- order


def test_order_null_before_dtype(mk):
    args = tensors(mk, dtypes=("f32", "s32", "f32", "f32"))
    args[0] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "gradOut")


def test_order_null_before_everything(mk):
    args = tensors(mk, dtypes=("f64", "s32", "f32", "f32"), shapes=((1,) * 9, (2,), (3,), (4,)))
    args[3] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "gradInput", reduction=7, beta=-1.0)


def test_order_later_null_before_earlier_dtype(mk):
    # gradOut has a bad dtype but target is null: nulls are checked for all four first.
    args = tensors(mk, dtypes=("s32", "f32", "f32", "f32"))
    args[2] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "target")


def test_order_dtype_before_rank(mk):
    args = tensors(mk, dtypes=("f32", "f64", "f32", "f32"), shapes=((1,) * 9,) * 4)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "self", "DT_DOUBLE")


def test_order_dtype_before_reduction(mk):
    args = tensors(mk, dtypes=("f32", "s32", "f32", "f32"))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "self",
        "DT_INT32",
        absent=("reduction",),
        reduction=3,
    )


def test_order_output_dtype_before_reduction(mk):
    args = tensors(mk, dtypes=("f32", "f32", "f32", "f64"))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "gradInput",
        "DT_DOUBLE",
        absent=("reduction",),
        reduction=3,
    )


def test_order_bf16_on_old_soc_before_reduction(mk, use_soc):
    use_soc("Ascend910")
    args = tensors(mk, dtypes=("bf16", "f32", "f32", "f32"))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "gradOut",
        "DT_BF16",
        absent=("reduction",),
        reduction=-1,
    )


def test_order_rank_before_reduction(mk):
    args = tensors(mk, shapes=((1,), (1,), (1,) * 9, (1,) * 9))
    msg = expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, args, "target", absent=("reduction",), reduction=3
    )
    assert rank_msg_ok(msg, (1,) * 9), msg


def test_order_reduction_before_beta(mk):
    args = tensors(mk)
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "reduction",
        absent=("beta",),
        reduction=3,
        beta=-1.0,
    )


def test_order_beta_before_broadcast(mk):
    args = tensors(mk, shapes=((2, 3), (4, 3), (2, 3), (5, 5)))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "beta",
        "-1.0",
        absent=("[4, 3]", "[5, 5]"),
        beta=-1.0,
    )


def test_order_nan_beta_before_output_shape(mk):
    args = tensors(mk, shapes=((2, 3), (2, 3), (2, 3), (3, 2)))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "beta",
        "nan",
        absent=("[3, 2]",),
        beta=math.nan,
    )


def test_order_output_dtype_before_output_shape(mk):
    args = tensors(mk, dtypes=("f32", "f32", "f32", "s32"), shapes=((2, 3),) * 3 + ((3, 2),))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", "DT_INT32", absent=("[3, 2]",))
