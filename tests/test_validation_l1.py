"""Parameter validation of aclnnL1LossBackward (SPEC §8), rule by rule and in order.

Documented order: nulls -> reduction in {0,1,2} -> promote(gradOutput, self) then with
target exists, is castable to gradInput and is in {FLOAT, FLOAT16, +BF16 per SoC};
gradInput's own dtype in that list -> every tensor rank <= 8 -> broadcast equals
gradInput's shape.
"""

from __future__ import annotations

import numpy as np
import pytest

import aclnn
from support import (
    DT_NAME,
    NINE,
    SOCS_WITH_BF16,
    SOCS_WITHOUT_BF16,
    DeviceTensor,
    check_accepted,
    check_rejected,
    rank_msg_ok,
    run_phase_two,
    shape_str,
)

OP = "aclnnL1LossBackward"
NAMES = ("gradOutput", "self", "target", "gradInput")

# Dtypes whose self-promotion is not in {FLOAT, FLOAT16, BF16}.
UNSUPPORTED = ["s32", "f64", "bool", "s64", "u16", "s8", "u8", "s16", "c64"]


def tensors(mk, dtypes=("f32",) * 4, shapes=((2, 3),) * 4):
    return [mk(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]


def call(g, s, t, out, reduction=0):
    return aclnn.aclnnL1LossBackwardGetWorkspaceSize(g, s, t, reduction, out)


def expect_fail(code, args, *needles, absent=(), **kw):
    """Phase 1 fails with `code`; the message names OP and every needle, none of `absent`."""
    return check_rejected(OP, code, call(*args, **kw), needles, absent)


def expect_ok(*args, **kw):
    ws, executor = check_accepted(call(*args, **kw))
    assert run_phase_two(aclnn.aclnnL1LossBackward, ws, executor) == 0


# ---------------------------------------------------------------------------- valid


def test_valid_baseline_all_reductions(mk):
    for reduction in (0, 1, 2):
        expect_ok(*tensors(mk), reduction=reduction)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_float_dtypes_accepted_on_every_soc(mk, use_soc, dtype):
    for soc in SOCS_WITHOUT_BF16 + SOCS_WITH_BF16:
        use_soc(soc)
        expect_ok(*tensors(mk, dtypes=(dtype,) * 4))


@pytest.mark.parametrize(
    "dtypes",
    [
        ("s32", "f32", "s64", "f32"),
        ("f32", "s32", "s32", "f32"),
        ("bool", "f16", "u8", "f16"),
        ("s8", "s16", "f16", "f16"),
        ("s32", "s32", "f32", "f32"),
    ],
)
def test_integer_inputs_promoting_to_float_accepted(mk, dtypes):
    """Only the promoted dtype is checked: ints mixed with a float input are fine."""
    expect_ok(*tensors(mk, dtypes=dtypes))


def test_integer_gradoutput_computes_through_promotion(mk):
    g = mk((3,), "s32", fill=3)
    s_dev = DeviceTensor(np.array([1.5, -2.0, 0.0], np.float32), (3,))
    mk.made.append(s_dev)
    t = mk((3,), "s64", fill=0)
    out = mk((3,), "f32", fill=7)
    ws, executor, ret = call(g, s_dev.tensor, t, out, reduction=0)
    assert ret == 0, aclnn.aclGetRecentErrMsg()
    assert run_phase_two(aclnn.aclnnL1LossBackward, ws, executor) == 0
    np.testing.assert_array_equal(mk.device(out).view(), np.array([3.0, -3.0, 0.0], np.float32))


def test_promoted_float_cast_into_narrower_float_output(mk):
    expect_ok(*tensors(mk, dtypes=("f16", "f32", "f16", "f16")))
    expect_ok(*tensors(mk, dtypes=("s32", "f16", "f16", "f32")))


@pytest.mark.parametrize("soc", SOCS_WITH_BF16)
def test_bf16_accepted_on_new_socs(mk, use_soc, soc):
    use_soc(soc)
    expect_ok(*tensors(mk, dtypes=("bf16",) * 4))
    expect_ok(*tensors(mk, dtypes=("bf16", "s32", "bf16", "bf16")))
    expect_ok(*tensors(mk, dtypes=("f16", "bf16", "f16", "f32")))
    expect_ok(*tensors(mk, dtypes=("f32", "f32", "f32", "bf16")))


def test_rank_8_accepted(mk):
    shape = (1, 2, 1, 1, 1, 1, 1, 2)
    expect_ok(*tensors(mk, shapes=(shape,) * 4))


def test_broadcast_accepted(mk):
    expect_ok(*tensors(mk, shapes=((2, 1), (1, 3), (3,), (2, 3))))


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


# ---------------------------------------------------------------------------- rule 2: reduction


@pytest.mark.parametrize("reduction", [-1, 3, 100, -(2**40)])
def test_bad_reduction_value(mk, reduction):
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        tensors(mk),
        "reduction",
        repr(reduction),
        reduction=reduction,
    )


@pytest.mark.parametrize("reduction", ["mean", "1", 1.0, True, [1]])
def test_bad_reduction_type(mk, reduction):
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk), "reduction", reduction=reduction)


# ---------------------------------------------------------------------------- rule 3: dtypes


@pytest.mark.parametrize("dtype", UNSUPPORTED)
def test_inputs_promoting_to_unsupported_dtype(mk, dtype):
    """All three inputs of one non-float dtype: the promoted dtype is not supported."""
    args = tensors(mk, dtypes=(dtype, dtype, dtype, "f32"))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, DT_NAME[dtype])


def test_all_int32_rejected(mk):
    args = tensors(mk, dtypes=("s32",) * 4)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_INT32")


def test_mixed_integers_promoting_to_integer_rejected(mk):
    # s8 + u8 -> s16, then with s32 -> s32: an integer result is not supported.
    args = tensors(mk, dtypes=("s8", "u8", "s32", "f32"))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args)
    assert any(DT_NAME[d] in msg for d in ("s8", "u8", "s32", "s16")), msg


def test_double_input_promotes_to_double_rejected(mk):
    args = tensors(mk, dtypes=("f32", "f64", "f32", "f32"))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_DOUBLE")


@pytest.mark.parametrize("dtype", ["u16", "u32", "u64"])
@pytest.mark.parametrize("pos", range(3))
def test_unsigned_cannot_promote_with_float(mk, pos, dtype):
    dtypes = ["f32"] * 4
    dtypes[pos] = dtype
    args = tensors(mk, dtypes=dtypes)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, DT_NAME[dtype])


@pytest.mark.parametrize("dtype", ["s32", "s64", "bool", "f64", "s8", "u8", "s16", "u16", "c64"])
def test_output_dtype_not_supported(mk, dtype):
    args = tensors(mk, dtypes=("f32", "f32", "f32", dtype))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", DT_NAME[dtype])


def test_complex_input_not_castable_to_real_output(mk):
    args = tensors(mk, dtypes=("f32", "c64", "f32", "f32"))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_COMPLEX64")


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
def test_bf16_rejected_on_old_socs(mk, use_soc, soc):
    use_soc(soc)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, dtypes=("bf16",) * 4), "DT_BF16")
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        tensors(mk, dtypes=("f32", "f32", "f32", "bf16")),
        "gradInput",
        "DT_BF16",
    )
    # bf16 + int promotes to bf16, unsupported here.
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        tensors(mk, dtypes=("bf16", "s32", "bf16", "f32")),
        "DT_BF16",
    )


# ---------------------------------------------------------------------------- rule 4: rank


@pytest.mark.parametrize("pos", range(4))
def test_rank_9_rejected(mk, pos):
    shapes = [(1,)] * 3 + [(1,) * 8]
    shapes[pos] = NINE
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes), NAMES[pos])
    assert rank_msg_ok(msg, NINE), msg


def test_all_rank_9_rejected(mk):
    nine = (1, 1, 1, 2, 1, 1, 1, 1, 1)
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=(nine,) * 4))
    assert rank_msg_ok(msg, nine), msg


# ---------------------------------------------------------------------------- rule 5: broadcast


def test_broadcast_impossible(mk):
    shapes = ((2, 3), (4, 3), (2, 3), (2, 3))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes))
    assert "[4, 3]" in msg or "[2, 3]" in msg, msg


def test_broadcast_impossible_with_zero(mk):
    shapes = ((2, 3), (2, 3), (0, 3), (2, 3))
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


def test_order_null_before_reduction(mk):
    args = tensors(mk)
    args[1] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "self", reduction=3)


def test_order_null_before_dtype_and_shape(mk):
    args = tensors(mk, dtypes=("s32", "s32", "s32", "f64"), shapes=(NINE, (2,), (3,), (4,)))
    args[3] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "gradInput", reduction=-1)


def test_order_reduction_before_dtype(mk):
    args = tensors(mk, dtypes=("s32",) * 4)
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "reduction",
        "3",
        absent=("DT_INT32",),
        reduction=3,
    )


def test_order_reduction_before_promotion_failure(mk):
    args = tensors(mk, dtypes=("f32", "u16", "f32", "f32"))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "reduction",
        absent=("DT_UINT16",),
        reduction=-1,
    )


def test_order_reduction_before_rank(mk):
    args = tensors(mk, shapes=(NINE,) * 4)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "reduction", reduction=3)


def test_order_dtype_before_rank(mk):
    args = tensors(mk, dtypes=("s32",) * 4, shapes=(NINE,) * 4)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_INT32")


def test_order_output_dtype_before_rank(mk):
    args = tensors(mk, dtypes=("f32", "f32", "f32", "f64"), shapes=((1,), NINE, (1,), (1,)))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", "DT_DOUBLE")


def test_order_bf16_on_old_soc_before_rank(mk, use_soc):
    use_soc("Ascend310P")
    args = tensors(mk, dtypes=("bf16",) * 4, shapes=(NINE,) * 4)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_BF16")


def test_order_dtype_before_broadcast(mk):
    args = tensors(mk, dtypes=("s32",) * 4, shapes=((2, 3), (4, 3), (2, 3), (5, 5)))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_INT32", absent=("[4, 3]", "[5, 5]"))


def test_order_rank_before_broadcast(mk):
    args = tensors(mk, shapes=((2, 3), NINE, (4, 3), (5, 5)))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "self", absent=("[4, 3]", "[5, 5]"))
    assert rank_msg_ok(msg, NINE), msg
